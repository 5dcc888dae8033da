#!/usr/bin/env bash
# Issue 9 §3 (host identity) and §5's first sentence (deploy/supervise --host): one
# deployment of two hosts, h1 (coordinator a, the host tier, etcd, the optimizer)
# and h2 (coordinator b), run by two supervisors on this machine, each starting only
# its host's processes. Both hosts share the boot id and /dev/shm here (as network
# namespaces do), so only the host name tells them apart: a client with
# KVTIER_HOST=h1 moves the tier's bytes through shared memory, one with
# KVTIER_HOST=h2 through frames (the tier actor's slots_written / slots_read count
# only frames), and says why at debug level.
. "$(dirname "$0")/lib.sh"

"$KVTIER_BIN" keygen --secret "$it_dir/secret" >/dev/null
it_write_deployment <<EOF
{ "security": { "secret_file": "$it_dir/secret" },
  "tiers": [ { "name": "host0", "kind": "host", "capacity": 64, "slot_size": "64KiB",
               "host": "h1" } ] }
EOF
/usr/bin/python3 - "$it_dir/deployment.json" <<'EOF'
import json, os, socket, sys
sys.path.insert(0, os.path.join(os.environ["KVT_SOURCE_DIR"], "tests/integration")); import ports
d = json.load(open(sys.argv[1]))
socks = []
def port():
    s = socket.socket(); ports.bind_free(s); socks.append(s)
    return s.getsockname()[1]
d["coordinator"].pop("endpoint")
d["coordinator"].pop("metrics")
d["coordinators"] = [{"name": n, "host": h, "endpoint": "tcp://127.0.0.1:%d" % port(),
                      "metrics": "127.0.0.1:%d" % port()} for n, h in (("a", "h1"), ("b", "h2"))]
# the tier binds every interface and registers its loopback address
t = d["tiers"][0]
t["advertise"] = t["endpoint"]
t["endpoint"] = t["endpoint"].replace("127.0.0.1", "0.0.0.0")
json.dump(d, open(sys.argv[1], "w"), indent=2)
EOF
"$KVTIER_BIN" deployment -c "$it_dir/deployment.json" >"$it_dir/desc.txt"
grep -q '^hosts h1 h1 h1$' "$it_dir/desc.txt" || it_fail "hosts: $(cat "$it_dir/desc.txt")"

# a host no process is on, and a second host without the shared secret: refused
rc=0
"$KVT_SOURCE_DIR/deploy/supervise" "$it_dir/deployment.json" --host h3 --run-dir "$it_dir/run3" \
  --kvtier "$KVTIER_BIN" >"$it_dir/h3.out" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q 'no process of .* is on that host (hosts: h1 h2)' "$it_dir/h3.out" ||
  it_fail "--host h3: $(cat "$it_dir/h3.out")"
rc=0
"$KVT_SOURCE_DIR/deploy/supervise" "$it_dir/deployment.json" --host h2 --run-dir "$it_dir/run3" \
  --kvtier "$KVTIER_BIN" >"$it_dir/h2.out" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q 'the embedded etcd runs on host h1 .*give this host.s supervisor --etcd' \
  "$it_dir/h2.out" || it_fail "--host h2 without --etcd: $(cat "$it_dir/h2.out")"

rc=0
"$KVTIER_BIN" tier -c "$it_dir/deployment.json" --name host0 --host "h 1" --etcd http://127.0.0.1:9 \
  --secret "$it_dir/secret" >"$it_dir/tierhost.out" 2>&1 || rc=$?
[ $rc -ne 0 ] && grep -q -- '--host "h 1": a host name is 1..46' "$it_dir/tierhost.out" ||
  it_fail "kvtier tier --host \"h 1\": $(cat "$it_dir/tierhost.out")"

# h1's supervisor: etcd, a, host0, the optimizer (it_start waits for its ready file;
# readiness needs a leader: a is the only coordinator so far)
"$KVT_SOURCE_DIR/deploy/supervise" "$it_dir/deployment.json" --host h1 --run-dir "$it_run" \
  --kvtier "$KVTIER_BIN" --etcd-ports "$(it_free_ports 2 ,)" >"$it_dir/supervise.log" 2>&1 &
it_supervisor=$!
it_wait_until 90 test -f "$it_run/ready" || it_fail "h1 not ready: $(tail -n 5 "$it_dir/supervise.log")"
. "$it_run/ready"
[ "$KVTIER_HOST" = h1 ] || it_fail "h1's ready file: $(cat "$it_run/ready")"
ls "$it_run/pids" | sort | tr '\n' ' ' >"$it_dir/pids1"
[ "$(cat "$it_dir/pids1")" = "coordinator-a.pid etcd.pid optimizer.pid tier-host0.pid " ] ||
  it_fail "h1 runs $(cat "$it_dir/pids1")"

# h2's supervisor, pointed at h1's etcd: b only
run2=$it_dir/run2
"$KVT_SOURCE_DIR/deploy/supervise" "$it_dir/deployment.json" --host h2 --etcd "$KVTIER_ETCD" \
  --run-dir "$run2" --kvtier "$KVTIER_BIN" >"$it_dir/supervise2.log" 2>&1 &
sup2=$!
# on any exit h2's supervisor stops first (it stops b), then lib.sh's cleanup runs
# with the script's exit status
stop_h2_then_cleanup() {
  local r=$?
  set +e
  kill -TERM "$sup2" 2>/dev/null
  it_wait_gone "$sup2" "$IT_STOP_TIMEOUT_S" || kill -KILL "$sup2" 2>/dev/null
  (exit "$r")
  it_cleanup
}
trap stop_h2_then_cleanup EXIT
it_wait_until 90 test -f "$run2/ready" || it_fail "h2 not ready: $(tail -n 5 "$it_dir/supervise2.log")"
[ "$(ls "$run2/pids")" = coordinator-b.pid ] || it_fail "h2 runs $(ls "$run2/pids")"
grep -q '^KVTIER_HOST=h2$' "$run2/ready" || it_fail "h2's ready file: $(cat "$run2/ready")"
it_wait_until 30 eval 'it_cli status 2>/dev/null | grep -q "^coordinator  b .*: standby"' ||
  it_fail "b is not a standby: $(it_cli status 2>&1 | grep '^coordinator')"
it_cli status | grep '^coordinator' >&2

# the tier registered its host name with the boot id
reg=$(ETCDCTL_API=3 etcdctl --endpoints "$KVTIER_ETCD" get "/kvtier/$it_name/tiers/host0" --print-value-only)
grep -q '"host":"h1/[0-9a-f]\{16\}"' <<<"$reg" || it_fail "tier registration: $reg"
tier_adv=$(awk '$1 == "tier" { print $6 }' "$it_dir/desc.txt")
grep -qF "\"endpoint\":\"$tier_adv\"" <<<"$reg" || it_fail "the tier registered another endpoint than $tier_adv: $reg"

metrics_addr=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tiers"][0]["metrics"])' "$it_dir/deployment.json")
counter() { # the tier actor's counter NAME (frames only: shm copies never reach it)
  /usr/bin/python3 - "$metrics_addr" "$1" <<'EOF'
import sys, urllib.request
for line in urllib.request.urlopen("http://%s/metrics" % sys.argv[1], timeout=5).read().decode().splitlines():
    if line.startswith(sys.argv[2] + " ") or line.startswith(sys.argv[2] + "{"):
        print(int(float(line.split()[-1]))); break
EOF
}
k1=$(printf 'a1%030x' $$)
k2=$(printf 'b2%030x' $$)
KVTIER_HOST=h1 it_cli put --key "$k1" --pattern >/dev/null || it_fail "put from h1"
KVTIER_HOST=h1 it_cli get --key "$k1" --verify >/dev/null || it_fail "get from h1"
KVT_LOG_LEVEL=debug KVTIER_HOST=h2 it_cli put --key "$k2" --pattern >/dev/null 2>"$it_dir/h2put.err" ||
  it_fail "put from h2: $(cat "$it_dir/h2put.err")"
KVTIER_HOST=h2 it_cli get --key "$k2" --verify >/dev/null || it_fail "get from h2"
grep -q 'shared memory .* not used: the tier is on host h1/.*, this client on h2/' "$it_dir/h2put.err" ||
  it_fail "no debug line for the refusal: $(cat "$it_dir/h2put.err")"
grep -h 'not used: the tier is on host' "$it_dir/h2put.err" >&2
# h2's put and get went by frames: 1 slot each; h1's (earlier) are not counted
it_wait_until 30 eval '[ "$(counter kvtier_tier_actor_slots_read_total)" -ge 1 ]' || it_fail "no frame read counted"
w=$(counter kvtier_tier_actor_slots_written_total) r=$(counter kvtier_tier_actor_slots_read_total)
[ "$w" = 1 ] && [ "$r" = 1 ] || it_fail "tier counted $w slots written, $r read by frames: want 1 and 1"
it_log "frames: $w slot written, $r read (h2's); h1's put and get used shared memory"
kill -TERM "$sup2"
it_wait_gone "$sup2" 40 || it_fail "h2's supervisor did not stop"
! grep -Eq 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$it_run"/logs/*.log "$run2"/logs/*.log ||
  it_fail "sanitizer report: $(grep -Eh -A3 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$it_run"/logs/*.log "$run2"/logs/*.log | head -n 20)"
it_log "PASS"
