#!/usr/bin/env bash
# issue 12 §8: two deployments on one host. Two with different names and their own
# ports and shm names run side by side and never serve each other; a third given the
# first one's freshly chosen ports and shm names (with its name, or with another) is
# refused before anything starts, naming the process that holds each, and the first
# keeps serving. Readiness (`status --check`) never accepts the other's coordinator.
. "$(dirname "$0")/lib.sh"

it_deployment 256 64KiB
it_start
a_ep=$KVTIER_COORDINATOR

# B: the same deployment under another name, on its own fresh ports and shm names
b_name=${it_name}b
b_run=$it_dir/run-b
/usr/bin/python3 - "$it_dir/deployment.json" "$it_dir/b.json" "$b_name" <<'PYEOF'
import json, os, re, socket, sys
sys.path.insert(0, os.path.join(os.environ["KVT_SOURCE_DIR"], "tests/integration")); import ports
src, dst, name = sys.argv[1:]
d = json.load(open(src))
socks = []
def fresh(m):
    s = socket.socket()
    ports.bind_free(s)
    socks.append(s)
    return "127.0.0.1:%d" % s.getsockname()[1]
text = re.sub(r"127\.0\.0\.1:[0-9]+", fresh, json.dumps(d))
d = json.loads(text)
d["cluster"] = name
for t in d["tiers"]:
    if t.get("kind") == "host":
        t["shm"] = "/kvtier-%s-%s" % (name, t["name"])
json.dump(d, open(dst, "w"), indent=2)
PYEOF
b_stop() {
  [ -n "${b_sup:-}" ] && kill -0 "$b_sup" 2>/dev/null || return 0
  kill -TERM "$b_sup" 2>/dev/null || true
  it_wait_gone "$b_sup" "$IT_STOP_TIMEOUT_S" || kill -KILL "$b_sup" 2>/dev/null || true
  local f
  for f in "$b_run"/pids/*.pid; do
    [ -f "$f" ] && it_ours "$(cat "$f")" && kill -KILL "$(cat "$f")" 2>/dev/null || true
  done
  rm -f "/dev/shm/kvtier-$b_name-"*
}
# set +e first: under errexit `(exit $rc)` would end the trap before it_cleanup
trap 'rc=$?; set +e; b_stop; (exit $rc); it_cleanup' EXIT
"$KVT_SOURCE_DIR/deploy/supervise" "$it_dir/b.json" --run-dir "$b_run" --kvtier "$KVTIER_BIN" \
  --etcd-ports "$(it_free_ports 2 ,)" >"$it_dir/supervise-b.log" 2>&1 &
b_sup=$!
it_wait_until "$IT_READY_TIMEOUT_S" test -f "$b_run/ready" ||
  it_fail "B not ready: $(tail -n 5 "$it_dir/supervise-b.log")"
b_ep=$(sed -n 's/^KVTIER_COORDINATOR=//p' "$b_run/ready")
[ -n "$b_ep" ] && [ "$b_ep" != "$a_ep" ] || it_fail "B's coordinator endpoint '$b_ep'"

key_a=$(printf 'a1%030x' $$)
key_b=$(printf 'b1%030x' $$)
"$KVTIER_BIN" put --coordinator "$a_ep" --key "$key_a" --pattern >/dev/null || it_fail "put on A"
"$KVTIER_BIN" put --coordinator "$b_ep" --key "$key_b" --pattern >/dev/null || it_fail "put on B"
"$KVTIER_BIN" get --coordinator "$b_ep" --key "$key_b" --verify >/dev/null || it_fail "get on B"
# neither serves the other's blocks
"$KVTIER_BIN" get --coordinator "$b_ep" --key "$key_a" --verify >/dev/null 2>&1 &&
  it_fail "B served A's block"
"$KVTIER_BIN" get --coordinator "$a_ep" --key "$key_b" --verify >/dev/null 2>&1 &&
  it_fail "A served B's block"
"$KVTIER_BIN" status --check --coordinator "$b_ep" --cluster "$it_name" >/dev/null 2>&1 &&
  it_fail "readiness of A accepted B's coordinator"
"$KVTIER_BIN" status --check --coordinator "$b_ep" --cluster "$b_name" >/dev/null ||
  it_fail "readiness of B"
# the same cluster name is not enough: the leader answering must be the one the
# given etcd elected (ClusterInfo.etcd_cluster_id), as deploy/supervise asks
b_etcd=$(sed -n 's/^KVTIER_ETCD=//p' "$b_run/ready")
"$KVTIER_BIN" status --check --coordinator "$b_ep" --cluster "$b_name" --etcd "$b_etcd" >/dev/null ||
  it_fail "readiness of B with its own etcd"
if "$KVTIER_BIN" status --check --coordinator "$b_ep" --cluster "$b_name" --etcd "$KVTIER_ETCD" \
  >/dev/null 2>"$it_dir/etcd-check.err"; then
  it_fail "readiness with A's etcd accepted B's coordinator (same cluster name)"
fi
grep -q "was elected by etcd cluster .*, not by the etcd given ($KVTIER_ETCD" "$it_dir/etcd-check.err" ||
  it_fail "the etcd mismatch is not named: $(cat "$it_dir/etcd-check.err")"
it_log "readiness: B's coordinator refused against A's etcd under B's own name: $(tail -n 1 "$it_dir/etcd-check.err")"

# C: A's own file again (same ports, names, cluster), then the same under another name:
# each refused before anything starts, naming the holders; A untouched
a_coord_pid=$(it_pid coordinator)
for variant in same renamed; do
  cfile=$it_dir/deployment.json
  if [ $variant = renamed ]; then
    cfile=$it_dir/c.json
    /usr/bin/python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); d["cluster"] = sys.argv[3]
json.dump(d, open(sys.argv[2], "w"))' "$it_dir/deployment.json" "$cfile" "${it_name}c"
  fi
  rc=0
  timeout 60 "$KVT_SOURCE_DIR/deploy/supervise" "$cfile" --run-dir "$it_dir/run-c-$variant" \
    --kvtier "$KVTIER_BIN" >"$it_dir/c-$variant.log" 2>&1 || rc=$?
  [ $rc -ne 0 ] || it_fail "deployment C ($variant) started on A's ports"
  [ $rc -ne 124 ] || it_fail "deployment C ($variant) neither started nor refused in 60 s"
  grep -q "coordinator.endpoint ${a_ep} is in use by pid $a_coord_pid (.*kvtier coordinator -c $it_dir/deployment.json" \
    "$it_dir/c-$variant.log" || it_fail "C ($variant) did not name A's coordinator: $(cat "$it_dir/c-$variant.log")"
  grep -q "tiers\[0\].shm (host0) ${it_shms[0]} is in use by pid $(it_pid tier-host0)" "$it_dir/c-$variant.log" ||
    it_fail "C ($variant) did not name A's shm segment: $(cat "$it_dir/c-$variant.log")"
  grep -q "supervise: cannot start" "$it_dir/c-$variant.log" || it_fail "C ($variant): $(cat "$it_dir/c-$variant.log")"
  [ ! -e "$it_dir/run-c-$variant/pids/etcd.pid" ] || it_fail "C ($variant) started etcd before refusing"
done
"$KVTIER_BIN" get --coordinator "$a_ep" --key "$key_a" --verify >/dev/null ||
  it_fail "A lost its block after C was refused"
it_cli status --check --cluster "$it_name" >/dev/null || it_fail "A not ready after C was refused"

# a bind that fails at a process's own start names the holder too
rc=0
timeout 30 "$KVTIER_BIN" tier -c "$it_dir/deployment.json" --name host0 --etcd "$KVTIER_ETCD" \
  --secret "$it_run/secret" \
  >"$it_dir/tier2.log" 2>&1 || rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || it_fail "a second host0 tier process: status $rc"
grep -q "is in use by pid $(it_pid tier-host0)" "$it_dir/tier2.log" ||
  it_fail "a second host0 did not name the holder: $(cat "$it_dir/tier2.log")"
it_no_crash
b_stop
it_log "PASS"
