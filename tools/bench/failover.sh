#!/usr/bin/env bash
# failover.sh — the failover benchmark of issue 9 §7 (report, never a gate).
#
#   KVTIER_BIN=build/bin/kvtier KVTIER_LIB=build/client/libkvtier.so \
#     KVT_SOURCE_DIR=. tools/bench/failover.sh [KILLS] [LEASE]
#
# One etcd (--heartbeat-interval=10 --election-timeout=100: it grants a 1 s lease),
# one host tier process and two coordinators A and B, all started here (not under
# deploy/supervise, whose restart backoff doubles per exit), lease LEASE (default
# "1s"). A prober (one process, the Python binding, coordinators "A,B", 200 ms call
# timeout) stores and reads back one block after another, a new client after any
# failure (libkvtier does not re-register by itself before branch fo-core). KILLS
# times (default 20): kill -9 of the leader, then the time from the kill to the
# prober's first successful store + read-back, which the new leader served; the
# killed coordinator is started again as a standby before the next kill. Prints
# every sample, then
#   failover: N kills, lease L: kill -> first successful call p50 X ms, p99 Y ms, max Z ms
. "$(dirname "$0")/../../tests/integration/lib.sh"
kills=${1:-20}
lease=${2:-1s}

it_write_deployment <<EOF
{"etcd": {"lease_ttl": "$lease"},
 "tiers": [{"name": "host0", "kind": "host", "capacity": 4096, "slot_size": "64KiB"}]}
EOF
mkdir -p "$it_run/pids" "$it_run/logs"
"$KVTIER_BIN" keygen --secret "$it_run/secret" >/dev/null
etcd_port=$(it_free_port)
peer_port=$(it_free_port)
KVTIER_ETCD="http://127.0.0.1:$etcd_port"
etcd --name=bench-etcd --data-dir="$it_run/etcd" \
  --listen-client-urls="$KVTIER_ETCD" --advertise-client-urls="$KVTIER_ETCD" \
  --listen-peer-urls="http://127.0.0.1:$peer_port" --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
  --initial-cluster="bench-etcd=http://127.0.0.1:$peer_port" \
  --heartbeat-interval=10 --election-timeout=100 >"$it_run/logs/etcd.log" 2>&1 &
echo $! >"$it_run/pids/etcd.pid"
etcd_up() { ETCDCTL_API=3 etcdctl --endpoints "$KVTIER_ETCD" endpoint health >/dev/null 2>&1; }
it_wait_until 30 etcd_up || it_fail "etcd did not start"
"$KVTIER_BIN" tier -c "$it_dir/deployment.json" --name host0 --etcd "$KVTIER_ETCD" \
  --secret "$it_run/secret" >"$it_run/logs/tier.log" 2>&1 &
echo $! >"$it_run/pids/tier.pid"

# two coordinators, each with its own meta, metrics and event ports
declare -A ep
for c in a b; do
  /usr/bin/python3 -c '
import json, socket, sys
d = json.load(open(sys.argv[1]))
socks = []
def port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
    return s.getsockname()[1]
d["coordinator"]["endpoint"] = "tcp://127.0.0.1:%d" % port()
d["coordinator"]["metrics"] = "127.0.0.1:%d" % port()
for k in ("endpoint", "replay_endpoint", "vllm_endpoint", "vllm_replay_endpoint"):
    if d["events"].get(k):
        d["events"][k] = "tcp://127.0.0.1:%d" % port()
json.dump(d, open(sys.argv[2], "w"), indent=2)' "$it_dir/deployment.json" "$it_dir/coord-$c.json"
  ep[$c]=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["coordinator"]["endpoint"])' "$it_dir/coord-$c.json")
done
start_coord() {
  "$KVTIER_BIN" coordinator -c "$it_dir/coord-$1.json" --etcd "$KVTIER_ETCD" --secret "$it_run/secret" \
    --name "bench-$1" --endpoint "${ep[$1]}" >>"$it_run/logs/coord-$1.log" 2>&1 &
  echo $! >"$it_run/pids/coord-$1.pid"
}
start_coord a
start_coord b
leader_name() {
  ETCDCTL_API=3 etcdctl --endpoints "$KVTIER_ETCD" get "/kvtier/$it_name/leader" --print-value-only 2>/dev/null |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])' 2>/dev/null || true
}
has_leader() { [ -n "$(leader_name)" ]; }
it_wait_until 60 has_leader || it_fail "no leader"
export KVTIER_COORDINATOR="${ep[a]},${ep[b]}"

# the prober: "ok START END" per successful store + read-back (wall clock ms)
it_python - "$it_dir/probe.txt" "$it_dir/probe.stop" <<'EOF' 2>"$it_dir/probe.err" &
import os, sys, time
sys.path.insert(0, os.path.join(os.environ["KVT_SOURCE_DIR"], "client", "python"))
import kvtier
out, stop = open(sys.argv[1], "w", buffering=1), sys.argv[2]
coords, BLOCK, inst = os.environ["KVTIER_COORDINATOR"], 64 << 10, "bench-failover"
c, seq = None, 0
while not os.path.exists(stop):
    try:
        if c is None:
            c = kvtier.Client(coordinators=coords, name="probe", timeout_ms=200)
            c.register_instance(inst, 16, BLOCK)
        seq += 1
        t0 = int(time.time() * 1000)
        key = b"fo%014d" % seq  # 16 bytes
        rid = "p%d" % seq
        c.request_begin(inst, rid)
        tok = c.prepare_put(inst, rid, [key])
        if tok.count:
            c.submit_put(1, tok, [bytes([seq % 251]) * BLOCK], BLOCK)
            r = c.wait([1], 2000)[0]
            c.complete_put(tok)
            if not r.ok:
                raise RuntimeError("put %r" % r)
        g = c.prepare_get(inst, rid, [key])
        buf = bytearray(BLOCK)
        c.submit_get(2, g, [buf], BLOCK)
        r = c.wait([2], 2000)[0]
        c.complete_get(g)
        c.request_end(inst, rid)
        if not r.ok or buf != bytes([seq % 251]) * BLOCK:
            raise RuntimeError("get %r" % r)
        out.write("ok %d %d\n" % (t0, int(time.time() * 1000)))
    except Exception as e:  # a failed call: a new client, as an engine would
        print("probe: %s" % e, file=sys.stderr)
        if c is not None:
            c.close()
        c = None
        time.sleep(0.05)
EOF
probe_pid=$!
trap 'rc=$?; set +e; touch "$it_dir/probe.stop"; kill "$probe_pid" 2>/dev/null; (exit $rc); it_cleanup' EXIT
probe_n() { { wc -l <"$it_dir/probe.txt"; } 2>/dev/null || echo 0; }
probe_more() { [ "$(probe_n)" -gt "$1" ]; }
# (a kill -9'd coordinator's leader key stays until its lease runs out: that is
# the wait being measured)
it_wait_until 60 probe_more 0 || it_fail "the prober never succeeded: $(tail -n 3 "$it_dir/probe.err")"

samples=()
for k in $(seq 1 "$kills"); do
  who=$(leader_name)
  case $who in bench-a) c=a ;; bench-b) c=b ;; *) it_fail "leader '$who' is not ours" ;; esac
  other=$([ $c = a ] && echo b || echo a)
  # the other one is a live standby (its registration is under a live lease)
  standby_up() {
    kill -0 "$(cat "$it_run/pids/coord-$other.pid")" 2>/dev/null &&
      ETCDCTL_API=3 etcdctl --endpoints "$KVTIER_ETCD" get "/kvtier/$it_name/coordinators/bench-$other" \
        --print-value-only 2>/dev/null | grep -q .
  }
  it_wait_until 60 standby_up || it_fail "coordinator $other is not up: $(tail -n 5 "$it_run/logs/coord-$other.log")"
  n=$(probe_n)
  it_wait_until 30 probe_more "$((n + 2))" || it_fail "the prober does not run before kill $k"
  kill -KILL "$(cat "$it_run/pids/coord-$c.pid")"
  t_kill=$(date +%s%3N) # after the kill: a call begun later cannot reach the dead leader
  # the first call begun after the kill that succeeded
  after_kill() { awk -v t="$t_kill" '$2 > t { found = 1 } END { exit !found }' "$it_dir/probe.txt"; }
  it_wait_until 60 after_kill || it_fail "no successful call after kill $k: $(tail -n 3 "$it_dir/probe.err")"
  ms=$(awk -v t="$t_kill" '$2 > t { print $3 - t; exit }' "$it_dir/probe.txt")
  samples+=("$ms")
  moved() { [ "$(leader_name)" != "$who" ]; }
  it_wait_until 30 moved || it_fail "the leader key still names $who"
  new=$(leader_name)
  it_log "kill $k: $who -> ${new:-?}: first successful call after $ms ms"
  [ "$new" = "bench-$other" ] || it_log "(the new leader is '$new')"
  start_coord "$c"
done
touch "$it_dir/probe.stop"
printf '%s\n' "${samples[@]}" | sort -n | awk -v n="$kills" -v lease="$lease" '
  { v[NR] = $1 }
  END {
    # nearest rank: the smallest sample with at least p of them at or below it
    r50 = int(NR * 0.50); if (r50 < NR * 0.50) r50++
    r99 = int(NR * 0.99); if (r99 < NR * 0.99) r99++
    p50 = v[r50]; p99 = v[r99]
    printf "failover: %d kills, lease %s: kill -> first successful call p50 %d ms, p99 %d ms, max %d ms\n", NR, lease, p50, p99, v[NR]
  }'
