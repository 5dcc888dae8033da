#!/usr/bin/env bash
# Issue 9 §3 across hosts: a pool of remote tiers whose members run on other hosts.
# Three network namespaces as hosts h1, h2, h3 (a veth each on a bridge); etcd in the
# root namespace on the bridge. h1's supervisor (deploy/supervise --host h1) runs the
# coordinator and host0 (256 slots); h2's runs r1, the pool's listed member (1,024
# slots); r2 joins by hand on h3 (`kvtier tier --pool remote --endpoint
# tcp://0.0.0.0:P --advertise tcp://H3:P --host h3`). Every byte between the hosts
# crosses the veths. Checked:
# 1. replays in h1 demote to r1 on h2 (tier actor to tier actor across hosts); the
#    trace does not fit host0 + r1;
# 2. r2 joins from h3 while the deployment runs: the pool's capacity is the sum, the
#    next replays' new blocks go to r2 (the roomier member) across the bridge, and a
#    replay then hits more than with one member; every load byte-exact;
# 3. h3's cable cut: r2's lease lapses, it leaves the pool and its blocks leave the
#    index; a replay then misses them, never a wrong byte.
# Skipped where namespaces cannot be made, unless KVT_REQUIRE_NETNS=1 (.ci/run).
. "$(dirname "$0")/lib.sh"

it_netns_hosts 3
h1=${it_ns_ip[1]} h2=${it_ns_ip[2]} h3=${it_ns_ip[3]}
read -r etcd_port etcd_peer r1_port r2_port < <(it_free_ports 4)
etcd_url=http://$it_ns_root_ip:$etcd_port
"${KVT_ETCD_BIN:-/usr/bin/etcd}" --name "etcd-$it_name" --data-dir "$it_dir/etcd" \
  --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
  --initial-cluster "etcd-$it_name=http://127.0.0.1:$etcd_peer" \
  --heartbeat-interval=10 --election-timeout=100 >"$it_dir/etcd.log" 2>&1 &
etcd_pid=$!
it_wait_until 30 curl -sf "$etcd_url/health" >/dev/null || it_fail "etcd did not start: $(tail -5 "$it_dir/etcd.log")"

"$KVTIER_BIN" keygen --secret "$it_dir/secret" >/dev/null
it_write_deployment <<EOF
{ "security": { "secret_file": "$it_dir/secret" },
  "etcd": { "lease_ttl": "2s" },
  "optimizer": { "enabled": false },
  "tiers": [ { "name": "host0", "kind": "host", "capacity": 256, "slot_size": "64KiB", "host": "h1" } ],
  "pools": [ { "name": "remote", "kind": "remote", "max_members": 2, "capacity": 1024,
               "slot_size": "64KiB", "prefault": false,
               "members": [ { "name": "r1", "host": "h2", "endpoint": "tcp://$h2:$r1_port" } ] } ],
  "chains": [ { "name": "default", "tiers": ["host0", "remote"] } ] }
EOF
/usr/bin/python3 - "$it_dir/deployment.json" "$h1" "$etcd_url" <<'PY'
import json, sys
path, h1, etcd = sys.argv[1:]
d = json.load(open(path))
d["etcd"]["endpoints"] = [etcd]
ep = d["coordinator"].pop("endpoint")
d["coordinator"].pop("metrics")
d["coordinators"] = [{"name": "a", "host": "h1", "endpoint": ep.replace("127.0.0.1", h1)}]
for t in d["tiers"]:
    t["endpoint"] = t["endpoint"].replace("127.0.0.1", h1)
json.dump(d, open(path, "w"), indent=2)
PY
coord=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["coordinators"][0]["endpoint"])' "$it_dir/deployment.json")
for i in 1 2; do
  it_ns_exec "$i" "$KVT_SOURCE_DIR/deploy/supervise" "$it_dir/deployment.json" --host "h$i" --etcd "$etcd_url" \
    --run-dir "$it_dir/run$i" --kvtier "$KVTIER_BIN" >"$it_dir/supervise$i.log" 2>&1 &
done
stop_all_then_cleanup() { # the supervisors first (they stop their children), then lib.sh's cleanup
  local r=$? i pid
  set +e
  for i in 1 2; do
    for pid in $(ip netns pids "${it_ns[i]}" 2>/dev/null); do
      if grep -q "deploy/supervise" "/proc/$pid/cmdline" 2>/dev/null; then kill -TERM "$pid" 2>/dev/null; fi
    done
  done
  sleep 3
  kill -TERM "$etcd_pid" 2>/dev/null
  if [ $r -ne 0 ]; then
    for f in "$it_dir"/supervise*.log "$it_dir"/run*/logs/*.log "$it_dir"/r2.log; do
      [ -f "$f" ] && { echo "----- last lines of $f" >&2; tail -n 20 "$f" >&2; }
    done
  fi
  (exit "$r")
  it_cleanup
}
trap stop_all_then_cleanup EXIT

# k HOST ARGS...: kvtier ARGS on host HOST (its namespace and host name)
k() {
  local i=$1
  shift
  it_ns_exec "$i" env KVTIER_HOST="h$i" "$KVTIER_BIN" "$@" --coordinator "$coord" --cluster "$it_name"
}
status() { k 1 status >"$it_dir/status.txt" 2>/dev/null && cat "$it_dir/status.txt"; }
tier_up() { status >/dev/null && grep -q "^tier [0-9]* $1: kind [a-z]*, up," "$it_dir/status.txt"; }
gone() { status >/dev/null && ! grep -q "^tier [0-9]* $1:" "$it_dir/status.txt"; }
counter() { status | awk -v n="$1" '$1 == n && v == "" { v = $2 } END { print v }'; }
pool_line() { status | grep '^pool remote:'; }
tier_hits() { sed -n "s/^tier $2: \([0-9]*\) hits$/\1/p" "$1"; }
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }
replay() { # OUT: 80 requests from h1, every load verified, no failed call
  local out=$1 rc=0
  k 1 replay "$it_trace" --requests 80 --no-progress >"$out" || rc=$?
  [ $rc -eq 0 ] || it_fail "replay: status $rc: $(cat "$out")"
  grep -q '^requests  *80 replayed, 0 failed$' "$out" || it_fail "failed requests: $(cat "$out")"
  grep -q '^failures  *0 hits not granted, 0 loads failed, 0 stores failed, 0 verify failures$' "$out" ||
    it_fail "failed or wrong blocks: $(cat "$out")"
  [ "$(it_replay_field "$out" 5)" = 0 ] || it_fail "wrong bytes: $(cat "$out")"
}

it_wait_until 90 tier_up host0 || it_fail "host0 on h1 not up"
it_wait_until 90 tier_up r1 || it_fail "r1 on h2 not up"
it_log "h1 ($h1): coordinator a and host0; h2 ($h2): pool member r1; etcd at $etcd_url"

replay "$it_dir/p1.txt"
replay "$it_dir/p2.txt"
hit1=$(it_replay_field "$it_dir/p2.txt" 2)
[ "$(counter tier.r1.used)" -gt 0 ] || it_fail "nothing was demoted to r1 on h2: $(status)"
[ "$(counter evictions)" -gt 0 ] || it_fail "the trace fits host0 + r1: nothing to grow for"
it_log "one member: hit rate $hit1%, $(pool_line)"

it_ns_exec 3 "$KVTIER_BIN" tier -c "$it_dir/deployment.json" --pool remote --name r2 \
  --endpoint "tcp://0.0.0.0:$r2_port" --advertise "tcp://$h3:$r2_port" --host h3 >"$it_dir/r2.log" 2>&1 &
it_wait_until 30 tier_up r2 || it_fail "r2 on h3 did not join: $(cat "$it_dir/r2.log")"
grep -q "^tier [0-9]* r2: kind remote, up, endpoint tcp://$h3:$r2_port, .*member of pool remote$" "$it_dir/status.txt" ||
  it_fail "r2 is not listed with its advertised endpoint: $(cat "$it_dir/status.txt")"
[ "$(counter pool.remote.capacity)" = 2048 ] || it_fail "the pool's capacity is not the sum: $(status)"
replay "$it_dir/p3.txt"
[ "$(counter tier.r2.used)" -gt 0 ] || it_fail "no block went to r2 on h3: $(status)"
replay "$it_dir/p4.txt"
hit2=$(it_replay_field "$it_dir/p4.txt" 2)
gt "$hit2" "$hit1" || it_fail "two members hit no more than one: $hit2% vs $hit1%"
[ "$(tier_hits "$it_dir/p4.txt" r2)" -gt 0 ] || it_fail "nothing read from r2: $(cat "$it_dir/p4.txt")"
it_log "r2 joined from h3 ($h3): hit rate $hit2% (one member: $hit1%), $(pool_line)"

blocks=$(counter blocks)
it_ns_link 3 down
it_log "h3's cable cut"
it_wait_until 30 gone r2 || it_fail "r2 still listed 30 s after its host was cut off"
left=$(counter blocks)
[ "$left" -lt "$blocks" ] || it_fail "r2's blocks are still indexed: $left of $blocks"
replay "$it_dir/p5.txt"
[ "$(tier_hits "$it_dir/p5.txt" r2)" = "" ] || [ "$(tier_hits "$it_dir/p5.txt" r2)" = 0 ] ||
  it_fail "r2 served while cut off: $(cat "$it_dir/p5.txt")"
it_log "while h3 is cut off: $blocks -> $left blocks indexed, hit rate $(it_replay_field "$it_dir/p5.txt" 2)%, no wrong byte"
it_no_crash
it_log PASS
