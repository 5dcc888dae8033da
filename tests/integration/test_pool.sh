#!/usr/bin/env bash
# Issue 9 §3: a pool of tier actors — capacity that grows at run time.
#
# A deployment host0 (256 slots) -> pool "remote" (kind remote, at most 2 members of
# 1,024 slots), under deploy/supervise, which starts the pool's listed member m1;
# others are started by hand with `kvtier tier --pool remote`. Each member claims a
# tier id of the pool's range in etcd when it starts.
# 1. m1 joins: `kvtier status` lists it as a member, the pool at 1 member.
# 2. Two replays of the trace (more distinct blocks than host0 + m1 hold): the
#    second one's hit rate is what one member gives; every load byte-exact.
# 3. m2 joins by hand while the coordinator runs (no restart, no deployment edit):
#    the pool's capacity is the sum (2,048), status lists both with their fill.
# 4. Two replays again: new blocks go to m2 (the roomier member), and the second
#    replay hits more than the one-member one; every load byte-exact.
# 5. A third member is refused at start: "pool remote is full: 2 of 2 members".
# 6. m2 is killed: when its lease lapses it leaves the pool and its blocks leave
#    the index; a replay then misses them but never reads wrong bytes.
# 7. m3 joins in the id m2 left; `kvtier drain m1` moves m1's blocks to m3 (the
#    other member) and retires m1; a replay reads them from m3, byte-exact.
# 8. Bad pools are refused by `kvtier deployment` with the key and the reason.
. "$(dirname "$0")/lib.sh"

REQUESTS=${POOL_REQUESTS:-80}
m1_port=$(it_free_port)
it_write_deployment <<JSON
{"tiers": [
  {"name": "host0", "kind": "host", "capacity": 256, "slot_size": "64KiB"}],
 "pools": [
  {"name": "remote", "kind": "remote", "max_members": 2, "capacity": 1024,
   "slot_size": "64KiB", "prefault": false,
   "members": [{"name": "m1", "endpoint": "tcp://127.0.0.1:$m1_port"}]}],
 "chains": [{"name": "default", "tiers": ["host0", "remote"]}]}
JSON

"$KVTIER_BIN" deployment -c "$it_dir/deployment.json" >"$it_dir/deployment.txt" ||
  it_fail "kvtier deployment refused it: $(cat "$it_dir/deployment.txt")"
grep -q '^pool remote remote 2 2 3 1024$' "$it_dir/deployment.txt" ||
  it_fail "kvtier deployment does not list the pool (ids 2..3): $(cat "$it_dir/deployment.txt")"
grep -q "^member m1 remote tcp://127.0.0.1:$m1_port - - -$" "$it_dir/deployment.txt" ||
  it_fail "kvtier deployment does not list member m1: $(cat "$it_dir/deployment.txt")"

# the status read whole, then looked at (a grep -q on the pipe would cut it short)
status() { it_cli status >"$it_dir/status.txt" && cat "$it_dir/status.txt"; }
counter() { status | awk -v n="$1" '$1 == n && v == "" { v = $2 } END { print v }'; }
replay() {
  local out=$1 rc=0
  shift
  it_cli replay "$it_trace" --requests "$REQUESTS" --no-progress "$@" >"$out" || rc=$?
  [ $rc -eq 0 ] || it_fail "replay exited with status $rc: $(cat "$out")"
  grep -q "^requests  *$REQUESTS replayed, 0 failed$" "$out" || it_fail "failed requests: $(cat "$out")"
  grep -q '^failures  *0 hits not granted, 0 loads failed, 0 stores failed, 0 verify failures$' "$out" ||
    it_fail "failed or wrong blocks: $(cat "$out")"
  [ "$(it_replay_field "$out" 5)" = 0 ] || it_fail "wrong bytes: $(cat "$out")"
}
declare -A member_pid
member() { # member NAME: starts a pool member by hand (its own endpoint), in the background
  local port
  port=$(it_free_port)
  "$KVTIER_BIN" tier -c "$it_dir/deployment.json" --pool remote --name "$1" \
    --endpoint "tcp://127.0.0.1:$port" --etcd "$KVTIER_ETCD" --secret "$it_run/secret" \
    >"$it_dir/member-$1.log" 2>&1 &
  member_pid[$1]=$!
}
member_up() {
  status >/dev/null && grep -Eq "^tier [0-9]+ $1: kind remote, up, .*, member of pool remote$" "$it_dir/status.txt"
}
pool_line() { status | grep '^pool remote:'; }
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

it_start
it_wait_until 30 member_up m1 || it_fail "m1 did not join: $(cat "$it_run/logs/tier-m1.log")"
grep -q 'pool remote: member m1 has tier id 2' "$it_run/logs/tier-m1.log" ||
  it_fail "m1 does not say its id: $(cat "$it_run/logs/tier-m1.log")"
pool_line | grep -q '^pool remote: 1 members (1 up), fill 0/1024 slots' ||
  it_fail "status does not show the pool of one: $(status)"
it_log "m1 joined: $(pool_line)"

replay "$it_dir/pass1.txt"
replay "$it_dir/pass2.txt"
hit1=$(it_replay_field "$it_dir/pass2.txt" 2)
[ "$(counter evictions)" -gt 0 ] || it_fail "the trace fits host0 + m1: nothing to grow for"
it_log "one member: hit rate $hit1%, $(pool_line)"

member m2
it_wait_until 30 member_up m2 || it_fail "m2 did not join: $(cat "$it_dir/member-m2.log")"
[ "$(counter pool.remote.capacity)" = 2048 ] || it_fail "the pool's capacity is not the sum: $(status)"
pool_line | grep -q '^pool remote: 2 members (2 up), .* m1 [0-9]*/1024 m2 0/1024$' ||
  it_fail "status does not show both members: $(status)"
coord_metrics=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["coordinator"]["metrics"])' "$it_dir/deployment.json")
pool_metrics() {
  curl -s "http://$coord_metrics/metrics" >"$it_dir/metrics.txt" &&
    grep -q '^kvtier_pool_members{pool="remote"} 2$' "$it_dir/metrics.txt" &&
    grep -q '^kvtier_pool_capacity_slots{pool="remote"} 2048$' "$it_dir/metrics.txt" &&
    grep -q '^kvtier_tier_up{tier="m2"} 1$' "$it_dir/metrics.txt"
}
it_wait_until 20 pool_metrics || it_fail "/metrics does not show the pool of two: $(grep pool "$it_dir/metrics.txt")"
it_log "m2 joined: $(pool_line)"

replay "$it_dir/pass3.txt"
m2_used=$(counter tier.m2.used)
[ "$m2_used" -gt 0 ] || it_fail "no block went to the new member m2: $(status)"
replay "$it_dir/pass4.txt"
hit2=$(it_replay_field "$it_dir/pass4.txt" 2)
gt "$hit2" "$hit1" || it_fail "two members hit no more than one: $hit2% vs $hit1%"
[ "$(grep '^tier m2: ' "$it_dir/pass4.txt" | awk '{ print $3 }')" -gt 0 ] ||
  it_fail "pass 4 read nothing from m2: $(cat "$it_dir/pass4.txt")"
it_log "two members: hit rate $hit2% (one member: $hit1%), $(pool_line)"

rc=0
"$KVTIER_BIN" tier -c "$it_dir/deployment.json" --pool remote --name m9 \
  --endpoint "tcp://127.0.0.1:$(it_free_port)" --etcd "$KVTIER_ETCD" --secret "$it_run/secret" \
  >"$it_dir/member-m9.log" 2>&1 || rc=$?
[ $rc -ne 0 ] || it_fail "a third member joined a pool of at most 2"
grep -q 'pool remote is full: 2 of 2 members (id 2: {"name":"m1","pool":"remote"}, id 3: {"name":"m2","pool":"remote"})' \
  "$it_dir/member-m9.log" || it_fail "unclear refusal of m9: $(cat "$it_dir/member-m9.log")"
member_up m2 || it_fail "m2 is not up after m9's refusal"

blocks=$(counter blocks)
kill -KILL "${member_pid[m2]}"
gone() { status >/dev/null && ! grep -q '^tier [0-9]* m2:' "$it_dir/status.txt"; }
it_wait_until 30 gone || it_fail "m2 is still listed after its lease: $(status)"
left=$(counter blocks)
[ "$left" -lt "$blocks" ] || it_fail "m2's blocks are still indexed: $left of $blocks"
pool_line | grep -q '^pool remote: 1 members (1 up)' || it_fail "the pool still counts m2: $(status)"
replay "$it_dir/pass5.txt"
it_log "m2 killed: $blocks -> $left blocks indexed; replay after: hit rate $(it_replay_field "$it_dir/pass5.txt" 2)%, 0 wrong bytes"

member m3
it_wait_until 30 member_up m3 || it_fail "m3 did not join: $(cat "$it_dir/member-m3.log")"
grep -q 'pool remote: member m3 has tier id 3' "$it_dir/member-m3.log" ||
  it_fail "m3 did not take the id m2 left: $(cat "$it_dir/member-m3.log")"
m1_used=$(counter tier.m1.used)
it_cli drain m1 --wait 60 >"$it_dir/drain.txt" || it_fail "drain failed: $(cat "$it_dir/drain.txt")"
tail -1 "$it_dir/drain.txt" | grep -q '^drain: tier m1: retired (' ||
  it_fail "m1 not retired: $(cat "$it_dir/drain.txt")"
[ "$(counter tier.m1.used)" = 0 ] || it_fail "m1 still holds blocks: $(status)"
[ "$(counter tier.m3.used)" -gt 0 ] || it_fail "m1's blocks did not go to m3: $(status)"
status | grep -q '^tier [0-9]* m1: .*, retired (kvtier drain.*member of pool remote$' ||
  it_fail "status does not show m1 retired: $(status)"
replay "$it_dir/pass6.txt"
[ "$(grep '^tier m3: ' "$it_dir/pass6.txt" | awk '{ print $3 }')" -gt 0 ] ||
  it_fail "pass 6 read nothing from m3: $(cat "$it_dir/pass6.txt")"
it_log "m1 drained to m3 ($m1_used used slots): $(pool_line); replay after: hit rate $(it_replay_field "$it_dir/pass6.txt" 2)%"

# bad pools: refused with the key and the reason
bad() { # bad NAME PYTHON-EDIT EXPECTED-TEXT
  /usr/bin/python3 - "$it_dir/deployment.json" "$it_dir/$1.json" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))
PY
  if "$KVTIER_BIN" deployment -c "$it_dir/$1.json" >"$it_dir/$1.txt" 2>&1; then
    it_fail "$1: accepted: $(cat "$it_dir/$1.txt")"
  fi
  grep -qF "$3" "$it_dir/$1.txt" || it_fail "$1: unclear refusal: $(cat "$it_dir/$1.txt")"
}
bad unknown 'd["chains"][0]["tiers"][1] = "remot"' 'chains[0].tiers[1]: no tier or pool named "remot"'
bad clash 'd["pools"][0]["name"] = "host0"; d["chains"][0]["tiers"] = ["host0"]' \
  'pools[0].name: "host0" is also tiers[0]'"'"'s name'
bad too_many 'd["pools"][0]["max_members"] = 32' \
  'pools[0].max_members: 32 members do not fit: tier ids are 1..32, 1 taken'
bad zero 'd["pools"][0]["max_members"] = 0' 'pools[0].max_members'
bad kind 'd["pools"][0]["kind"] = "host"' 'pools[0].kind: "host" takes an address of its own'
bad endpoint 'd["pools"][0]["endpoint"] = "tcp://127.0.0.1:1"' \
  'pools[0].endpoint: a pool'"'"'s members each have their own'
it_no_crash
it_log PASS
