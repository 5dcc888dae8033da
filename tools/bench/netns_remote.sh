#!/usr/bin/env bash
# netns_remote.sh — `kvt-bench data --tier-kind remote` between two network
# namespaces on a veth pair (issue 9 §7): the tier actor, its scheduler and the raw
# TCP server in namespace A (`--serve`), the clients in namespace B (`--connect`),
# so every byte of the remote tier (ZeroMQ frames or UCX) and of the raw TCP baseline
# crosses the veth. Needs root (ip netns). Everything it makes is removed on exit.
#
#   tools/bench/netns_remote.sh [KVT_BENCH] [kvt-bench data options...]
#   e.g. tools/bench/netns_remote.sh build/tools/bench/kvt-bench --transport both \
#          --seconds 2 --rounds 3 --shm-mib 512 --pool-mib 128
# UCX_TLS and the other UCX_* variables pass through to both sides.
set -euo pipefail
BENCH=${1:-build/tools/bench/kvt-bench}
shift || true
[ "$(id -u)" = 0 ] || { echo "netns_remote.sh: needs root (ip netns)" >&2; exit 2; }
[ -x "$BENCH" ] || { echo "netns_remote.sh: no kvt-bench at $BENCH" >&2; exit 2; }
id=$$
A=kvtb$id-a B=kvtb$id-b
net=10.$((200 + RANDOM % 50)).$((RANDOM % 256))
dir=$(mktemp -d /tmp/kvt-netns-bench.XXXXXX)
serve_pid=""
cleanup() {
  [ -n "$serve_pid" ] && kill -9 "$serve_pid" 2>/dev/null || true
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
ip netns add "$A"
ip netns add "$B"
ip link add "kvb${id}a" type veth peer name "kvb${id}b"
ip link set "kvb${id}a" netns "$A"
ip link set "kvb${id}b" netns "$B"
ip -n "$A" addr add "$net.1/24" dev "kvb${id}a"
ip -n "$B" addr add "$net.2/24" dev "kvb${id}b"
for ns in "$A" "$B"; do
  ip -n "$ns" link set lo up
done
ip -n "$A" link set "kvb${id}a" up
ip -n "$B" link set "kvb${id}b" up
echo "namespaces $A ($net.1) and $B ($net.2) on a veth pair"
ip netns exec "$A" "$BENCH" data --tier-kind remote --bind "$net.1" --serve "$dir/svc" "$@" \
  >"$dir/serve.log" 2>&1 &
serve_pid=$!
rc=0
ip netns exec "$B" "$BENCH" data --tier-kind remote --connect "$dir/svc" "$@" 2>"$dir/client.err" || rc=$?
wait "$serve_pid" || rc=$?
serve_pid=""
grep -v ' info ' "$dir/client.err" >&2 || true
[ $rc -eq 0 ] || { echo "netns_remote.sh: failed (rc $rc); serving side:" >&2; tail -20 "$dir/serve.log" >&2; }
exit $rc
