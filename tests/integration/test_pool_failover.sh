#!/usr/bin/env bash
# Issue 9 §3, a pool across a change of leader. Two coordinators (a, b), host0 (256
# slots) -> pool "remote" (at most 3 members of 1,024 slots): m1 listed (started by
# deploy/supervise), m2 added by hand.
# 1. Two replays put blocks on both members; their fill is noted.
# 2. kill -9 of the leader (the supervisor held, so the standby wins): the new
#    leader lists both members, adopts every block they hold (the pool's fill as
#    before the kill), and a replay reads from m1 and m2, byte-exact.
# 3. m3 joins under the new leader: the next replay places new blocks on it.
# 4. `kvtier leader resign` hands the leadership back to the restarted one: it
#    learns all three members, and a replay reads from m3, byte-exact.
. "$(dirname "$0")/lib.sh"

REQUESTS=${POOL_REQUESTS:-80}
m1_port=$(it_free_port)
it_write_deployment <<JSON
{"etcd": {"lease_ttl": "2s"},
 "coordinators": [{"name": "a"}, {"name": "b"}],
 "tiers": [
  {"name": "host0", "kind": "host", "capacity": 256, "slot_size": "64KiB"}],
 "pools": [
  {"name": "remote", "kind": "remote", "max_members": 3, "capacity": 1024,
   "slot_size": "64KiB", "prefault": false,
   "members": [{"name": "m1", "endpoint": "tcp://127.0.0.1:$m1_port"}]}],
 "chains": [{"name": "default", "tiers": ["host0", "remote"]}]}
JSON

status() { it_cli status >"$it_dir/status.txt" 2>&1 && cat "$it_dir/status.txt"; }
counter() { status | awk -v n="$1" '$1 == n && v == "" { v = $2 } END { print v }'; }
hits() { awk -v t="tier $2:" '$1 " " $2 == t { print $3 }' "$1"; }
replay() {
  local out=$1 rc=0
  it_cli replay "$it_trace" --requests "$REQUESTS" --no-progress >"$out" || rc=$?
  [ $rc -eq 0 ] || it_fail "replay exited with status $rc: $(cat "$out")"
  grep -q "^requests  *$REQUESTS replayed, 0 failed$" "$out" || it_fail "failed requests: $(cat "$out")"
  grep -q '^failures  *0 hits not granted, 0 loads failed, 0 stores failed, 0 verify failures$' "$out" ||
    it_fail "failed or wrong blocks: $(cat "$out")"
  [ "$(it_replay_field "$out" 5)" = 0 ] || it_fail "wrong bytes: $(cat "$out")"
}
declare -A member_pid
member() { # member NAME: a pool member started by hand, in the background
  "$KVTIER_BIN" tier -c "$it_dir/deployment.json" --pool remote --name "$1" \
    --endpoint "tcp://127.0.0.1:$(it_free_port)" --etcd "$KVTIER_ETCD" --secret "$it_run/secret" \
    >"$it_dir/member-$1.log" 2>&1 &
  member_pid[$1]=$!
}
member_up() {
  status >/dev/null && grep -Eq "^tier [0-9]+ $1: kind remote, up, .*, member of pool remote$" "$it_dir/status.txt"
}
role() { it_cli status 2>/dev/null | awk -v n="$1" '$1 == "coordinator" && $2 == n { sub(/:$/, "", $3); sub(/ .*/, "", $4); print $4 }'; }
epoch() { it_cli status 2>/dev/null | awk '$1 == "leader" { gsub(/[()]/, "", $4); print $4 }'; }
one_leads() {
  local ra rb
  ra=$(role a) rb=$(role b)
  { [ "$ra" = leader ] && [ "$rb" = standby ]; } || { [ "$ra" = standby ] && [ "$rb" = leader ]; }
}

it_start
export KVTIER_COORDINATOR # both endpoints: the CLI finds whichever leads
it_wait_until 30 one_leads || it_fail "not one leader and one standby: $(status | head -n 8)"
old=$( [ "$(role a)" = leader ] && echo a || echo b)
new=$( [ "$old" = a ] && echo b || echo a)
e1=$(epoch)
it_wait_until 30 member_up m1 || it_fail "m1 did not join: $(cat "$it_run/logs/tier-m1.log")"
member m2
it_wait_until 30 member_up m2 || it_fail "m2 did not join: $(cat "$it_dir/member-m2.log")"
it_log "coordinator $old leads (epoch $e1); members m1, m2 up"

replay "$it_dir/pass1.txt"
replay "$it_dir/pass2.txt"
m1_used=$(counter tier.m1.used) m2_used=$(counter tier.m2.used)
[ "$m1_used" -gt 0 ] && [ "$m2_used" -gt 0 ] || it_fail "blocks are not on both members: $(status)"
it_log "before the kill: m1 $m1_used, m2 $m2_used used slots"

# ---- kill -9 of the leader ---------------------------------------------------------
kill -STOP "$it_supervisor" # the killed one, restarted at once, could win the election back
kill -KILL "$(it_pid "coordinator-$old")"
new_leads() { [ "$(role "$new")" = leader ] && [ "$(epoch)" -gt "$e1" ]; }
it_wait_until 30 new_leads || {
  kill -CONT "$it_supervisor"
  it_fail "$new did not take over: $(status | head -n 8)"
}
kill -CONT "$it_supervisor"
e2=$(epoch)
# the new leader learnt both members and read their inventories: every block is back
adopted() {
  member_up m1 && member_up m2 && [ "$(counter tier.m1.used)" = "$m1_used" ] &&
    [ "$(counter tier.m2.used)" = "$m2_used" ]
}
it_wait_until 30 adopted ||
  it_fail "the new leader $new does not hold the members' blocks (m1 $m1_used, m2 $m2_used before): $(status)"
grep -q '^pool remote: 2 members (2 up)' "$it_dir/status.txt" || it_fail "pool line: $(status)"
replay "$it_dir/pass3.txt"
[ "$(hits "$it_dir/pass3.txt" m1)" -gt 0 ] && [ "$(hits "$it_dir/pass3.txt" m2)" -gt 0 ] ||
  it_fail "the new leader served nothing from m1 or m2: $(cat "$it_dir/pass3.txt")"
it_log "$new leads (epoch $e2): m1 $(hits "$it_dir/pass3.txt" m1), m2 $(hits "$it_dir/pass3.txt" m2) hits, 0 wrong bytes"

# ---- a member joins under the new leader -------------------------------------------
member m3
it_wait_until 30 member_up m3 || it_fail "m3 did not join under $new: $(cat "$it_dir/member-m3.log")"
replay "$it_dir/pass4.txt"
m3_used=$(counter tier.m3.used)
[ "$m3_used" -gt 0 ] || it_fail "the new leader placed nothing on the new member m3: $(status)"
it_log "m3 joined under $new: $m3_used used slots after a replay"

# ---- resign: the restarted coordinator takes over and learns all three ----------------
it_wait_until 30 eval '[ "$(role "$old")" = standby ]' || it_fail "$old is not back as a standby: $(status | grep '^coordinator ')"
it_cli leader resign --wait 30 >"$it_dir/resign.out" 2>&1 || it_fail "resign: $(cat "$it_dir/resign.out")"
back() { [ "$(role "$old")" = leader ] && [ "$(epoch)" -gt "$e2" ]; }
it_wait_until 30 back || it_fail "$old does not lead after the resign: $(status | head -n 8)"
all3() { member_up m1 && member_up m2 && member_up m3 && [ "$(counter tier.m3.used)" = "$m3_used" ]; }
it_wait_until 30 all3 || it_fail "$old does not hold all three members (m3 $m3_used before): $(status)"
replay "$it_dir/pass5.txt"
[ "$(hits "$it_dir/pass5.txt" m3)" -gt 0 ] || it_fail "nothing served from m3 after the resign: $(cat "$it_dir/pass5.txt")"
it_log "$old leads again (epoch $(epoch)): $(status | grep '^pool remote:'); m3 $(hits "$it_dir/pass5.txt" m3) hits"

! grep -Eq 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$it_run"/logs/*.log ||
  it_fail "sanitizer report: $(grep -Eh -A3 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$it_run"/logs/*.log | head -n 20)"
it_log PASS
