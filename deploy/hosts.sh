# shellcheck shell=bash disable=SC2034  # variables are used by the scripts that source this
# deploy/hosts.sh — sourced by deploy/run --hosts and the multi-host tests
# (tests/integration/lib.sh, test_multihost.sh): hosts as network namespaces on one
# machine, a three-member etcd across them, and the deployment they run
# (docs/OPERATIONS.md "Deploying on several hosts"). Needs root (ip netns).
#
#   hosts_create N           N namespaces as hosts 1..N, a veth each on a bridge
#   hosts_exec I CMD...      CMD in host I's namespace
#   hosts_link I up|down     host I's cable
#   hosts_cleanup            kills what runs in the namespaces, removes them and the bridge
#   hosts_etcd_init DIR CLUSTER   three etcd members (their URLs in HOSTS_ETCD_URLS)
#   hosts_etcd_start M / hosts_etcd_stop M [SIGNAL]   member M (1..3)
#   hosts_etcd_healthy       every member answers /health
#   hosts_deployment OUT CLUSTER SECRET LEASE HOST0_CAP REMOTE_CAP SLOT
#                            the deployment of N hosts (below)
#
# Functions return non-zero with a message on stderr; none exits.

HOSTS_MAX=8 # a chain holds 8 levels (KVT_HOSTS_REMOTE=levels: host0 + one per other host)
HOSTS_NS=() HOSTS_IP=() HOSTS_ROOT_IP="" HOSTS_BRIDGE="" HOSTS_N=0
# etcd's timing for a 1 s lease: etcd grants at least ⌈(3·ticks/2)·heartbeat⌉ with
# ticks = election / heartbeat, so an election timeout of 500 ms grants 750 ms -> 1 s;
# 50 ms heartbeats stay far above the veths' round trip (docs/OPERATIONS.md "Failover
# and fencing")
HOSTS_ETCD_HEARTBEAT_MS=50
HOSTS_ETCD_ELECTION_MS=500

hosts_say() { echo "hosts: $*" >&2; }

# hosts_can_netns: 0 when namespaces can be made here (root with CAP_SYS_ADMIN).
hosts_can_netns() {
  local probe
  probe="kvt$(printf '%04x' $((RANDOM % 65536)))-probe"
  [ "$(id -u)" = 0 ] && command -v ip >/dev/null && ip netns add "$probe" 2>/dev/null || return 1
  ip netns del "$probe"
}

# hosts_create N: namespaces kvtXXXX-h1..hN, each with lo up and eth0 (a veth) on a
# bridge kvtXXXXbr in the root namespace, which is on the bridge too (HOSTS_ROOT_IP).
# The /24 is picked at random among unused 10.x.y.0 ones, so parallel runs never meet.
hosts_create() {
  local n=$1 id i net try used
  id=$(printf '%04x' $((RANDOM % 65536)))
  used=$(ip -4 -o addr show) || { hosts_say "cannot list the addresses in use"; return 1; }
  net=""
  for try in 1 2 3 4 5 6 7 8; do
    net=10.$((200 + RANDOM % 50)).$((RANDOM % 256))
    [[ $used == *" $net."* ]] || break
    net=""
  done
  [ -n "$net" ] || { hosts_say "no free 10.x.y.0/24 found for the hosts after 8 tries"; return 1; }
  HOSTS_BRIDGE="kvt${id}br"
  ip link add "$HOSTS_BRIDGE" type bridge || { hosts_say "cannot create bridge $HOSTS_BRIDGE"; return 1; }
  HOSTS_ROOT_IP=$net.1
  ip addr add "$HOSTS_ROOT_IP/24" dev "$HOSTS_BRIDGE"
  ip link set "$HOSTS_BRIDGE" up
  for ((i = 1; i <= n; i++)); do
    HOSTS_NS[i]="kvt$id-h$i"
    HOSTS_IP[i]=$net.$((10 + i))
    HOSTS_N=$i
    ip netns add "${HOSTS_NS[i]}" || { hosts_say "cannot create namespace ${HOSTS_NS[i]}"; return 1; }
    ip link add "kvt${id}v$i" type veth peer name eth0 netns "${HOSTS_NS[i]}" ||
      { hosts_say "cannot create the veth of ${HOSTS_NS[i]}"; return 1; }
    ip link set "kvt${id}v$i" master "$HOSTS_BRIDGE" up
    ip -n "${HOSTS_NS[i]}" link set lo up
    ip -n "${HOSTS_NS[i]}" addr add "${HOSTS_IP[i]}/24" dev eth0
    ip -n "${HOSTS_NS[i]}" link set eth0 up
    ip -n "${HOSTS_NS[i]}" route add default via "$HOSTS_ROOT_IP"
  done
}

hosts_exec() {
  local i=$1
  shift
  ip netns exec "${HOSTS_NS[i]}" "$@"
}

hosts_link() { ip link set "${HOSTS_BRIDGE%br}v$1" "$2"; }

hosts_cleanup() {
  local ns pid i m
  for m in 1 2 3; do hosts_etcd_stop "$m" TERM; done
  for ns in "${HOSTS_NS[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  done
  # the cables first: a namespace outlives `ip netns del` while the kernel still
  # holds it, and its veth with it
  for i in "${!HOSTS_NS[@]}"; do ip link del "${HOSTS_BRIDGE%br}v$i" 2>/dev/null || true; done
  for ns in "${HOSTS_NS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  [ -z "$HOSTS_BRIDGE" ] || ip link del "$HOSTS_BRIDGE" 2>/dev/null || true
  HOSTS_NS=() HOSTS_IP=() HOSTS_BRIDGE="" HOSTS_N=0 HOSTS_ETCD_PID=()
}

# ---- a three-member etcd ------------------------------------------------------------
# Member M runs on host M (its namespace, ports 2379/2380 of its address); with fewer
# than three hosts the others run in the root namespace on the bridge address, on free
# ports. Data under DIR/etcd-eM, log DIR/etcd-eM.log. The members are started by
# hosts_etcd_start (not supervised: a member killed stays down until started again).
HOSTS_ETCD_URLS="" HOSTS_ETCD_DIR="" HOSTS_ETCD_TOKEN=""
HOSTS_ETCD_PID=() HOSTS_ETCD_CLIENT=() HOSTS_ETCD_PEER=() HOSTS_ETCD_NS=()
hosts_etcd_init() {
  local dir=$1 cluster=$2 m ip cport pport initial=""
  HOSTS_ETCD_DIR=$dir HOSTS_ETCD_TOKEN="kvtier-$cluster-$RANDOM" HOSTS_ETCD_URLS=""
  for m in 1 2 3; do
    if [ "$m" -le "$HOSTS_N" ]; then
      ip=${HOSTS_IP[m]} cport=2379 pport=2380 HOSTS_ETCD_NS[m]=$m
    else
      ip=$HOSTS_ROOT_IP HOSTS_ETCD_NS[m]=0
      read -r cport pport < <(/usr/bin/python3 -c '
import socket, sys
s = [socket.socket() for _ in range(2)]
for x in s: x.bind((sys.argv[1], 0))
print(*(x.getsockname()[1] for x in s))' "$ip") || { hosts_say "no free ports on $ip"; return 1; }
    fi
    HOSTS_ETCD_CLIENT[m]=http://$ip:$cport HOSTS_ETCD_PEER[m]=http://$ip:$pport
    initial+=${initial:+,}e$m=http://$ip:$pport
    HOSTS_ETCD_URLS+=${HOSTS_ETCD_URLS:+,}http://$ip:$cport
  done
  HOSTS_ETCD_INITIAL=$initial
  rm -rf "$dir"/etcd-e[123]
  mkdir -p "$dir"
}

hosts_etcd_start() {
  local m=$1 state=new run=()
  [ ! -d "$HOSTS_ETCD_DIR/etcd-e$m/member" ] || state=existing
  [ "${HOSTS_ETCD_NS[m]}" = 0 ] || run=(ip netns exec "${HOSTS_NS[${HOSTS_ETCD_NS[m]}]}")
  echo "=== $(date -Is) starting etcd member e$m ($state)" >>"$HOSTS_ETCD_DIR/etcd-e$m.log"
  "${run[@]}" setsid "${KVT_ETCD_BIN:-/usr/bin/etcd}" --name "e$m" --data-dir "$HOSTS_ETCD_DIR/etcd-e$m" \
    --listen-client-urls "${HOSTS_ETCD_CLIENT[m]}" --advertise-client-urls "${HOSTS_ETCD_CLIENT[m]}" \
    --listen-peer-urls "${HOSTS_ETCD_PEER[m]}" --initial-advertise-peer-urls "${HOSTS_ETCD_PEER[m]}" \
    --initial-cluster "$HOSTS_ETCD_INITIAL" --initial-cluster-state "$state" \
    --initial-cluster-token "$HOSTS_ETCD_TOKEN" \
    --heartbeat-interval="$HOSTS_ETCD_HEARTBEAT_MS" --election-timeout="$HOSTS_ETCD_ELECTION_MS" \
    --logger=zap --log-outputs=stderr >>"$HOSTS_ETCD_DIR/etcd-e$m.log" 2>&1 </dev/null &
  HOSTS_ETCD_PID[m]=$!
}

# hosts_etcd_stop M [SIGNAL]: stops member M (SIGTERM by default) and reaps it.
hosts_etcd_stop() {
  local m=$1 pid=${HOSTS_ETCD_PID[$1]:-}
  [ -n "$pid" ] || return 0
  kill "-${2:-TERM}" "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  HOSTS_ETCD_PID[m]=""
}

# hosts_etcd_healthy [M...]: 0 when each member named (default all three) answers
# /health true (from the root namespace, over the bridge).
hosts_etcd_healthy() {
  local m ms=("$@")
  [ $# -gt 0 ] || ms=(1 2 3)
  for m in "${ms[@]}"; do
    curl -sf --max-time 1 "${HOSTS_ETCD_CLIENT[m]}/health" 2>/dev/null | grep -q '"health":"true"' || return 1
  done
}

# ---- the deployment -----------------------------------------------------------------
# hosts_deployment OUT CLUSTER SECRET LEASE HOST0_CAP REMOTE_CAP SLOT: writes OUT for
# the HOSTS_N hosts h1..hN: a coordinator cK on each of the first three hosts (meta
# tcp://IP:7700, metrics IP:7790), a host tier host0 on h1 (shm /kvtier-CLUSTER-host0)
# and the remote level: a pool "remote" with a member rK on each other host hK
# (tcp://IP:7710, REMOTE_CAP slots each, metrics on the pool's default address:
# members take no address of their own but the endpoint; docs/OPERATIONS.md "Pools"),
# or with KVT_HOSTS_REMOTE=levels a remote tier remoteK per other host (metrics IP:7791),
# each its own
# chain level. One chain default = host0, then the remote level(s) (exclusive: a full
# level demotes to the next), slots of SLOT, the three etcd members, etcd.lease_ttl
# LEASE, the cluster secret SECRET, no event sockets (the leader binds those, so
# their addresses would differ per host) and no live optimizer.
# The one place the shape of a multi-host deployment is decided.
hosts_deployment() {
  local out=$1 cluster=$2 secret=$3 lease=$4 cap0=$5 capr=$6 slot=$7
  /usr/bin/python3 - "$out" "$cluster" "$secret" "$lease" "$cap0" "$capr" "$slot" \
    "$HOSTS_ETCD_URLS" "${KVT_HOSTS_REMOTE:-pool}" "${HOSTS_IP[@]:1:$HOSTS_N}" <<'EOF'
import json, sys
out, cluster, secret, lease, cap0, capr, slot, etcd, remote = sys.argv[1:10]
ips = sys.argv[10:]
d = {
    "cluster": cluster,
    "security": {"secret_file": secret},
    "etcd": {"endpoints": etcd.split(","), "lease_ttl": lease},
    "coordinator": {"pin_lease": "30s", "write_grace": "30s", "tier_timeout": "2s"},
    "coordinators": [{"name": "c%d" % (k + 1), "host": "h%d" % (k + 1),
                      "endpoint": "tcp://%s:7700" % ip, "metrics": "%s:7790" % ip}
                     for k, ip in enumerate(ips[:3])],
    "events": {"endpoint": "", "replay_endpoint": "", "vllm_endpoint": "",
               "vllm_replay_endpoint": ""},
    "optimizer": {"enabled": False},
    "tiers": [{"name": "host0", "kind": "host", "host": "h1",
               "endpoint": "tcp://%s:7710" % ips[0], "metrics": "%s:7791" % ips[0],
               "capacity": int(cap0), "slot_size": slot, "policy": "lru",
               "shm": "/kvtier-%s-host0" % cluster, "prefault": False}],
}
members = [{"name": "r%d" % (k + 1), "host": "h%d" % (k + 1), "endpoint": "tcp://%s:7710" % ip}
           for k, ip in enumerate(ips) if k > 0]
if remote == "pool":  # one level: a pool of a member per other host
    d["pools"] = [{"name": "remote", "kind": "remote", "max_members": len(members),
                   "capacity": int(capr), "slot_size": slot, "policy": "lru",
                   "prefault": False, "members": members}]
    levels = ["host0", "remote"]
else:  # a level per other host
    for m in members:
        d["tiers"].append(dict(m, name="remote%s" % m["name"][1:], kind="remote",
                               metrics=m["endpoint"][len("tcp://"):].replace(":7710", ":7791"),
                               capacity=int(capr), slot_size=slot, policy="lru",
                               prefault=False))
    levels = [t["name"] for t in d["tiers"]]
d["chains"] = [{"name": "default", "tiers": levels, "placement": "exclusive"}]
with open(out, "w") as f:
    json.dump(d, f, indent=2)
EOF
}

# hosts_leader ETCD_URLS CLUSTER: "NAME EPOCH" of the leader key, nothing when none
# (a read that fails or finds none is tried again for up to 5 s: etcd may be electing
# a member, or the key is between two leaders).
hosts_leader() {
  local try out
  for try in 1 2 3 4 5 6 7 8 9 10; do
    out=$(ETCDCTL_API=3 etcdctl --endpoints "$1" --command-timeout=2s get "/kvtier/$2/leader" \
      --print-value-only 2>/dev/null) && [ -n "$out" ] && break
    out=""
    sleep 0.5
  done
  [ -n "$out" ] || return 0
  /usr/bin/python3 -c 'import json,sys
try:
    d = json.loads(sys.argv[1]); print(d["name"], d["epoch"])
except Exception:
    pass' "$out"
}
