# shellcheck shell=bash disable=SC2034  # variables are used by the scripts that source this
# lib.sh — sourced by the integration test scripts. Each test gets a temp dir, a
# deployment on free loopback ports with a unique cluster and shm names (so tests run
# in parallel), deploy/supervise running it, and a cleanup that runs on every exit:
# the supervisor is stopped, any process of this test still alive is killed, its shm
# segments are removed; on failure the logs are printed first.
#
# Needs KVTIER_BIN (the kvtier executable) and KVT_SOURCE_DIR (the repository), both
# set by tests/integration/CMakeLists.txt. KVT_KEEP_IT_DIR=1 keeps the temp dir.
set -euo pipefail

: "${KVTIER_BIN:?KVTIER_BIN must name the kvtier executable}"
: "${KVT_SOURCE_DIR:?KVT_SOURCE_DIR must name the repository}"

IT_READY_TIMEOUT_S=${IT_READY_TIMEOUT_S:-90}
IT_STOP_TIMEOUT_S=40   # the supervisor's grace is 10 s per child
it_name=it$$x$RANDOM
it_dir=$(mktemp -d "${TMPDIR:-/tmp}/kvt-$it_name-XXXXXX")
it_run=$it_dir/run
it_trace=$KVT_SOURCE_DIR/traces/synthetic_trace.jsonl
it_supervisor=""
it_shms=()
KVTIER_COORDINATOR=""

it_log() { printf '[%s %s] %s\n' "$(date +%H:%M:%S)" "${0##*/}" "$*" >&2; }
it_failure="" # why the test failed, printed again after the logs (a CI log's tail shows the reason)
it_fail() {
  it_failure=$*
  it_log "FAIL: $*"
  exit 1
}

# A loopback port that was free a moment ago, below the kernel's ephemeral range
# (tests/integration/ports.py says why).
it_free_port() {
  /usr/bin/python3 "$KVT_SOURCE_DIR/tests/integration/ports.py"
}
# it_free_ports N SEP: N distinct such ports, joined by SEP (default a space).
it_free_ports() {
  /usr/bin/python3 "$KVT_SOURCE_DIR/tests/integration/ports.py" "$1" | tr ' ' "${2:- }"
}

# it_deployment [capacity] [slot_size]: writes $it_dir/deployment.json, the default
# deployment (deploy/default.json when present) moved to free ports (metrics too), a unique
# cluster and shm names, embedded etcd, and the given tier geometry.
it_deployment() {
  local capacity=${1:-2048} slot=${2:-64KiB}
  /usr/bin/python3 - "$KVT_SOURCE_DIR/deploy/default.json" "$it_dir/deployment.json" \
    "$it_name" "$capacity" "$slot" <<'EOF'
import json, os, socket, sys
sys.path.insert(0, os.path.join(os.environ["KVT_SOURCE_DIR"], "tests/integration")); import ports
src, dst, name, capacity, slot = sys.argv[1:]
if os.path.exists(src):
    with open(src) as f:
        d = json.load(f)
else:
    d = {"tiers": [{"name": "host0", "kind": "host"}],
         "chains": [{"name": "default", "tiers": ["host0"]}]}
socks = []
def port():
    s = socket.socket()
    ports.bind_free(s)
    socks.append(s)  # held until all are picked, so they differ
    return s.getsockname()[1]
# The default's nvme tiers have a fixed file path and a 1 GiB file: dropped here
# (tests that need an nvme tier, like test_nvme_restart.sh, describe their own).
nvme = {t["name"] for t in d["tiers"] if t.get("kind", "host") == "nvme"}
d["tiers"] = [t for t in d["tiers"] if t["name"] not in nvme]
for c in d.get("chains", []):
    c["tiers"] = [n for n in c["tiers"] if n not in nvme]
d["cluster"] = name
d.setdefault("etcd", {})["endpoints"] = []
d.setdefault("coordinator", {})["endpoint"] = "tcp://127.0.0.1:%d" % port()
d["coordinator"]["metrics"] = "127.0.0.1:%d" % port()
ev = d.setdefault("events", {})
ev["endpoint"] = "tcp://127.0.0.1:%d" % port()
ev["replay_endpoint"] = "tcp://127.0.0.1:%d" % port()
ev["vllm_endpoint"] = "tcp://127.0.0.1:%d" % port()
ev["vllm_replay_endpoint"] = "tcp://127.0.0.1:%d" % port()
for t in d["tiers"]:
    t["endpoint"] = "tcp://127.0.0.1:%d" % port()
    t["metrics"] = "127.0.0.1:%d" % port()
    if t.get("kind", "host") == "host":
        t["shm"] = "/kvtier-%s-%s" % (name, t["name"])
        t["capacity"] = int(capacity)
        t["slot_size"] = slot
with open(dst, "w") as f:
    json.dump(d, f, indent=2)
EOF
  local line
  while read -r line; do it_shms+=("$line"); done < <(
    "$KVTIER_BIN" deployment -c "$it_dir/deployment.json" | awk '$1 == "tier" && $5 != "-" { print $5 }')
}

# it_write_deployment < JSON: writes $it_dir/deployment.json from a partial deployment
# on stdin: this test's cluster name and embedded etcd (lease 3 s), free loopback ports
# for the coordinator and every tier (planes and metrics, unless given), host tiers' shm
# names made unique (and removed at
# cleanup), nvme tiers' files in the test dir ($it_dir/NAME.dat unless "path" is given),
# one chain "default" of all tiers in file order unless "chains" or "topology" is given. Keys given
# in the JSON (write_grace, watermarks, reclaimer, quotas...) are kept.
it_write_deployment() {
  /usr/bin/python3 -c '
import json, os, socket, sys
sys.path.insert(0, os.path.join(os.environ["KVT_SOURCE_DIR"], "tests/integration")); import ports
dst, name, tdir = sys.argv[1:]
d = json.load(sys.stdin)
socks = []
def port():
    s = socket.socket()
    ports.bind_free(s)
    socks.append(s)  # held until all are picked, so they differ
    return "tcp://127.0.0.1:%d" % s.getsockname()[1]
d["cluster"] = name
d.setdefault("etcd", {})["endpoints"] = []
d["etcd"].setdefault("lease_ttl", "3s")
if "coordinators" in d:  # several coordinators: endpoints per entry (docs/OPERATIONS.md)
    d.setdefault("coordinator", {})
    for c in d["coordinators"]:
        c["endpoint"] = port()
        c.setdefault("metrics", port()[len("tcp://"):])
else:
    d.setdefault("coordinator", {})["endpoint"] = port()
    d["coordinator"].setdefault("metrics", port()[len("tcp://"):])
ev = d.setdefault("events", {})
if ev.get("endpoint", None) != "":
    ev["endpoint"] = port()
    ev["replay_endpoint"] = port()
    if ev.get("vllm_endpoint", None) != "":
        ev["vllm_endpoint"] = port()
        ev["vllm_replay_endpoint"] = port()
else:
    ev["vllm_endpoint"] = ev["vllm_replay_endpoint"] = ""
for t in d["tiers"]:
    t["endpoint"] = port()
    t.setdefault("metrics", port()[len("tcp://"):])
    t.setdefault("policy", "lru")
    if t.get("kind") == "host":
        t["shm"] = "/kvtier-%s-%s" % (name, t["name"])
        t.setdefault("prefault", False)
    elif t.get("kind") == "nvme":
        t.setdefault("path", "%s/%s.dat" % (tdir, t["name"]))
if "topology" not in d:
    d.setdefault("chains", [{"name": "default", "tiers": [t["name"] for t in d["tiers"]]}])
with open(dst, "w") as f:
    json.dump(d, f, indent=2)
' "$it_dir/deployment.json" "$it_name" "$it_dir" || it_fail "cannot write the deployment"
  local line
  while read -r line; do it_shms+=("$line"); done < <(
    "$KVTIER_BIN" deployment -c "$it_dir/deployment.json" | awk '$1 == "tier" && $5 != "-" { print $5 }')
}

it_dump_logs() {
  local f
  for f in "$it_dir/supervise.log" "$it_run"/logs/*.log; do
    [ -f "$f" ] || continue
    echo "----- last lines of $f" >&2
    tail -n 25 "$f" >&2
  done
}

# True when PID is alive and its command line mentions this test's dir.
it_ours() {
  local args=()
  mapfile -d '' args 2>/dev/null <"/proc/$1/cmdline" || return 1
  [[ " ${args[*]} " == *"$it_dir"* ]]
}

it_cleanup() {
  local rc=$? f pid
  trap - EXIT
  if [ $rc -ne 0 ]; then
    it_dump_logs
    it_log "FAILED (status $rc): ${it_failure:-see the lines above the logs}"
  fi
  if [ -n "$it_supervisor" ] && kill -0 "$it_supervisor" 2>/dev/null; then
    kill -TERM "$it_supervisor" 2>/dev/null || true
    it_wait_gone "$it_supervisor" "$IT_STOP_TIMEOUT_S" || kill -KILL "$it_supervisor" 2>/dev/null || true
  fi
  for f in "$it_run"/pids/*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if it_ours "$pid"; then
      it_log "cleanup: killing leftover $(basename "$f" .pid) (pid $pid)"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  for f in "${it_shms[@]}"; do rm -f "/dev/shm/${f#/}"; done
  it_netns_cleanup
  if [ "${KVT_KEEP_IT_DIR:-0}" = 1 ]; then
    it_log "kept $it_dir"
  else
    rm -rf "$it_dir"
  fi
  exit $rc
}
trap it_cleanup EXIT
trap 'exit 130' INT TERM

# it_skip WHY: the test cannot run here; ctest shows it skipped (SKIP_RETURN_CODE 77).
it_skip() {
  it_log "SKIP: $*"
  exit 77
}

# ---- hosts as network namespaces (issue 9 §5, §6) ----------------------------------
# it_netns_hosts N creates N namespaces as hosts 1..N, each with lo up and a veth to a
# bridge of this test in the root namespace; the root namespace is on the bridge too.
# Sets it_ns[i] (the namespace), it_ns_ip[i] (host i's address) and it_ns_root_ip (the
# root namespace's address on the bridge, where processes started outside the
# namespaces are reached). The /24 is picked at random among unused 10.x.y.0 ones, so
# parallel tests never meet; cleanup removes namespaces and bridge. Where namespaces
# cannot be made (not root, no CAP_SYS_ADMIN) the test is skipped, unless
# KVT_REQUIRE_NETNS=1 (.ci/run sets it): then that is a failure.
# The namespaces are deploy/hosts.sh's (deploy/run --hosts makes them the same way).
# shellcheck source=../../deploy/hosts.sh
. "$KVT_SOURCE_DIR/deploy/hosts.sh"
it_ns=() it_ns_ip=() it_ns_root_ip="" it_ns_bridge=""
it_netns_hosts() {
  local n=$1
  if ! hosts_can_netns; then
    local why="cannot create network namespaces here (uid $(id -u); 'ip netns add' needs root and CAP_SYS_ADMIN)"
    [ "${KVT_REQUIRE_NETNS:-0}" != 1 ] || it_fail "$why, and KVT_REQUIRE_NETNS=1 makes that a failure"
    it_skip "$why"
  fi
  hosts_create "$n" || it_fail "cannot create the hosts (see above)"
  local i
  it_ns=() it_ns_ip=()
  for ((i = 1; i <= n; i++)); do it_ns[i]=${HOSTS_NS[i]} it_ns_ip[i]=${HOSTS_IP[i]}; done
  it_ns_root_ip=$HOSTS_ROOT_IP it_ns_bridge=$HOSTS_BRIDGE
  it_log "hosts: ${it_ns[*]} on ${HOSTS_ROOT_IP%.1}.0/24 (bridge $it_ns_bridge at $it_ns_root_ip)"
}

# it_ns_exec I CMD...: CMD on host I (in its namespace).
it_ns_exec() {
  local i=$1
  shift
  ip netns exec "${it_ns[i]}" "$@"
}

# it_ns_link I up|down: host I's cable (its veth on the bridge).
it_ns_link() {
  ip link set "${it_ns_bridge%br}v$1" "$2"
}

it_netns_cleanup() {
  hosts_cleanup
  it_ns=()
  it_ns_bridge=""
}

# it_wait_gone PID SECONDS: polls until PID is gone; 1 at the deadline.
it_wait_gone() {
  local deadline=$((SECONDS + $2))
  while kill -0 "$1" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.1
  done
}

# it_wait_until SECONDS CMD...: polls CMD until it succeeds; 1 at the deadline.
it_wait_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

# Starts deploy/supervise on the deployment and waits for its ready marker.
it_start() {
  local etcd_ports
  etcd_ports=$(it_free_ports 2 ,) # the embedded etcd's client and peer ports
  "$KVT_SOURCE_DIR/deploy/supervise" "$it_dir/deployment.json" --run-dir "$it_run" \
    --kvtier "$KVTIER_BIN" --etcd-ports "$etcd_ports" >"$it_dir/supervise.log" 2>&1 &
  it_supervisor=$!
  local deadline=$((SECONDS + IT_READY_TIMEOUT_S))
  until [ -f "$it_run/ready" ]; do
    kill -0 "$it_supervisor" 2>/dev/null || it_fail "the supervisor exited before ready"
    [ $SECONDS -lt $deadline ] || it_fail "not ready after $IT_READY_TIMEOUT_S s"
    sleep 0.1
  done
  # shellcheck source=/dev/null
  . "$it_run/ready"
  it_log "ready: coordinator $KVTIER_COORDINATOR, etcd $KVTIER_ETCD"
}

# it_cli COMMAND ARGS...: the kvtier CLI against this test's coordinator.
it_cli() {
  local cmd=$1
  shift
  "$KVTIER_BIN" "$cmd" --coordinator "$KVTIER_COORDINATOR" "$@"
}

# it_python_env: the environment Debian's python3 needs to load the Python binding's
# $KVTIER_LIB (set by CMakeLists.txt), as NAME=VALUE words for env(1): a sanitizer
# build's libkvtier.so needs the ASan runtime loaded first (python's own allocations
# are not leak-checked); nothing for a plain build.
it_python_env() {
  local asan=""
  [ -z "${KVTIER_LIB:-}" ] || asan=$(ldd "$KVTIER_LIB" 2>/dev/null | awk '$1 ~ /^libasan\.so/ { print $3; exit }')
  [ -z "$asan" ] || echo "LD_PRELOAD=$asan ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
}
# it_python ARGS...: python3 with that environment (env execs it: in the background,
# $! is the python process itself).
it_python() {
  # shellcheck disable=SC2046  # word splitting wanted: NAME=VALUE words
  env $(it_python_env) /usr/bin/python3 "$@"
}

# it_no_crash: fails the test when a child of the supervisor exited (was restarted)
# or a process of the deployment printed a sanitizer report so far.
it_no_crash() {
  if grep -q ' exited with status ' "$it_dir/supervise.log"; then
    it_fail "a process of the deployment died: $(grep ' exited with status ' "$it_dir/supervise.log")"
  fi
  if grep -Eq 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$it_run"/logs/*.log; then
    it_fail "sanitizer report: $(grep -Eh -A3 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$it_run"/logs/*.log | head -n 20)"
  fi
}

# it_pid NAME: the pid the supervisor recorded for child NAME ("tier-host0").
it_pid() { cat "$it_run/pids/$1.pid"; }

# it_replay_field FILE N: field N of the report's final "replay:" line (1 requests,
# 2 hit rate %, 3 loaded GB, 4 stored GB, 5 verify failures); empty if no such line.
it_replay_field() {
  sed -n 's/^replay: \([0-9]*\) requests, hit rate \([0-9.]*\)%, loaded \([0-9.]*\) GB, stored \([0-9.]*\) GB, verify failures \([0-9]*\)$/\1 \2 \3 \4 \5/p' "$1" | tail -n 1 | awk -v f="$2" '{ print $f }'
}
