#!/usr/bin/env bash
# Issue 9 §3, §4, §6 across hosts: two network namespaces as hosts h1 and h2 (a veth
# each on a bridge; they share the kernel boot id and /dev/shm, as namespaces do).
# etcd runs in the root namespace on the bridge; h1's supervisor (deploy/supervise
# --host h1) runs the coordinator and a host tier, h2's runs a remote tier — every
# byte between them crosses the veths. Checked:
# 1. a replay in h1 stores more than host0 holds: blocks are demoted to remote0 on
#    h2 (tier actor to tier actor across hosts), every load byte-exact; again, every
#    block hits, remote0's promoted back;
# 2. a client on h2 (KVTIER_HOST=h2) reads h1's host tier over frames, not its
#    segment (another host by name), byte-exact;
# 3. h2's cable cut: remote0's lease lapses and its blocks leave the index; a replay
#    in h1 then misses them, never a wrong byte; the cable back: remote0 registers
#    again, its inventory is read, and its blocks hit again.
# Skipped where namespaces cannot be made, unless KVT_REQUIRE_NETNS=1 (.ci/run).
. "$(dirname "$0")/lib.sh"

it_netns_hosts 2
h1=${it_ns_ip[1]} h2=${it_ns_ip[2]}
read -r etcd_port etcd_peer < <(it_free_ports 2)
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
  "tiers": [ { "name": "host0", "kind": "host", "capacity": 256, "slot_size": "64KiB", "host": "h1" },
             { "name": "remote0", "kind": "remote", "capacity": 4096, "slot_size": "64KiB",
               "host": "h2", "prefault": false } ] }
EOF
/usr/bin/python3 - "$it_dir/deployment.json" "$h1" "$h2" "$etcd_url" <<'PY'
import json, sys
path, h1, h2, etcd = sys.argv[1:]
d = json.load(open(path))
d["etcd"]["endpoints"] = [etcd]
ep = d["coordinator"].pop("endpoint")
d["coordinator"].pop("metrics")
d["coordinators"] = [{"name": "a", "host": "h1", "endpoint": ep.replace("127.0.0.1", h1)}]
for t in d["tiers"]:
    t["endpoint"] = t["endpoint"].replace("127.0.0.1", h1 if t["host"] == "h1" else h2)
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
    for f in "$it_dir"/supervise*.log "$it_dir"/run*/logs/*.log; do
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
tier_up() { k 1 status 2>/dev/null | grep -q "^tier [0-9]* $1: kind [a-z]*, up,"; }
tier_down() { k 1 status 2>/dev/null | grep -q "^tier [0-9]* $1: kind [a-z]*, DOWN,"; }
it_wait_until 90 tier_up host0 || it_fail "host0 on h1 not up"
it_wait_until 90 tier_up remote0 || it_fail "remote0 on h2 not up"
it_log "h1 ($h1): coordinator a and host0; h2 ($h2): remote0; etcd at $etcd_url"

replay() { # HOST OUT ARGS...: 80 requests, every load verified, no failed call
  local i=$1 out=$2 rc=0
  shift 2
  k "$i" replay "$it_trace" --requests 80 --no-progress "$@" >"$out" || rc=$?
  [ $rc -eq 0 ] || it_fail "replay on h$i: status $rc: $(cat "$out")"
  [ "${ALLOW_NO_SPACE:-0}" = 1 ] || grep -q '^requests  *80 replayed, 0 failed$' "$out" ||
    it_fail "failed requests: $(cat "$out")"
  # with the last tier gone, host0 cannot demote: a put that finds no room is told
  # NO_SPACE (nothing reserved) — the only failure allowed then
  ! grep '^errors ' "$out" | grep -v -q -E '^errors  *(0 failed calls|[0-9]+ failed calls, NO_SPACE [0-9]+)$' ||
    it_fail "calls failed other than NO_SPACE: $(cat "$out")"
  [ "$(it_replay_field "$out" 5)" = 0 ] || it_fail "wrong bytes: $(cat "$out")"
  grep -q ' 0 verify failures$' "$out" || it_fail "verify failures: $(cat "$out")"
}
tier_hits() { sed -n "s/^tier $2: \([0-9]*\) hits$/\1/p" "$1"; }
counter() { k 1 status | awk -v n="$1" '$1 == n { print $2; exit }'; }

replay 1 "$it_dir/p1.txt"
[ "$(counter demoted)" -gt 0 ] || it_fail "nothing was demoted to remote0 on h2"
replay 1 "$it_dir/p2.txt"
[ "$(it_replay_field "$it_dir/p2.txt" 2)" = 100.0 ] || it_fail "pass 2 missed: $(cat "$it_dir/p2.txt")"
[ "$(tier_hits "$it_dir/p2.txt" remote0)" -gt 0 ] || it_fail "pass 2: no hit on remote0: $(cat "$it_dir/p2.txt")"
it_log "h1 replays: $(counter demoted) blocks demoted to h2, then all hit ($(grep '^tier ' "$it_dir/p2.txt" | tr '\n' ' '))"

# host0's frame reads (its tier actor counts only those; shm copies never reach it)
host0_metrics=$(/usr/bin/python3 -c 'import json,sys; print([t for t in json.load(open(sys.argv[1]))["tiers"] if t["name"] == "host0"][0]["metrics"])' "$it_dir/deployment.json")
frames_read() { # empty while the metrics are not served yet
  { it_ns_exec 1 curl -sf "http://$host0_metrics/metrics" || true; } |
    awk '$1 ~ /^kvtier_tier_actor_slots_read_total/ { print $2; exit }'
}
it_wait_until 30 eval '[ -n "$(frames_read)" ]' || it_fail "host0's metrics are not served at $host0_metrics"
r0=$(frames_read)
replay 2 "$it_dir/p3.txt" --no-promote
[ "$(it_replay_field "$it_dir/p3.txt" 2)" = 100.0 ] || it_fail "h2's client missed: $(cat "$it_dir/p3.txt")"
h2_host0=$(tier_hits "$it_dir/p3.txt" host0)
[ "$h2_host0" -gt 0 ] || it_fail "h2's client read nothing of host0: $(cat "$it_dir/p3.txt")"
it_wait_until 20 eval '[ "$(frames_read)" -ge $((${r0:-0} + h2_host0)) ]' ||
  it_fail "h2's client did not read host0 over frames: slots_read $r0 -> $(frames_read), $h2_host0 hits"
it_log "h2's client read h1's host tier over frames (slots_read $r0 -> $(frames_read)): $(grep '^tier ' "$it_dir/p3.txt" | tr '\n' ' ')"

it_ns_link 2 down
it_log "h2's cable cut"
it_wait_until 30 tier_down remote0 || it_fail "remote0 still up 30 s after its host was cut off"
ALLOW_NO_SPACE=1 replay 1 "$it_dir/p4.txt" --no-promote
hit=$(it_replay_field "$it_dir/p4.txt" 2)
[ "$(tier_hits "$it_dir/p4.txt" remote0)" = 0 ] || it_fail "remote0 served while cut off: $(cat "$it_dir/p4.txt")"
it_log "while cut off: hit rate $hit% from host0 alone, $(sed -n 's/^errors  *//p' "$it_dir/p4.txt"), no wrong byte"

it_ns_link 2 up
it_wait_until 60 tier_up remote0 || it_fail "remote0 did not come back with its host"
replay 1 "$it_dir/p5.txt" --no-promote
[ "$(tier_hits "$it_dir/p5.txt" remote0)" -gt 0 ] || it_fail "remote0's blocks did not come back: $(cat "$it_dir/p5.txt")"
it_log "cable back: remote0 rejoined; $(grep '^tier ' "$it_dir/p5.txt" | tr '\n' ' '), hit rate $(it_replay_field "$it_dir/p5.txt" 2)%"
it_no_crash
it_log PASS
