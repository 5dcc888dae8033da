#!/usr/bin/env bash
# issue 11 §4: routing branches from the deployment's "topology" (docs/SCHEDULER.md
# "Branches", docs/OPERATIONS.md "Branches"), through real processes under
# deploy/supervise, clients over the Python binding (it_client.py branch).
# Topology: route "ttl"; branch "long" = host0 -> host2 (TTLs above 10 min), "short" =
# host1 -> host2 (every other TTL, ttl_above 0s), fallback "untimed" = host0 -> host2
# (no TTL). Both chains end on host2: branches share a tier when what follows agrees.
# 1. Each branch gets its requests: request_begin names the branch, its head, and the
#    request's blocks land on that head, read back byte-exact (it_client checks).
# 2. The scheduler's counters show each head holding exactly its branch's blocks, and
#    the requests begun per branch (branch.<name>.requests, kvtier_branch_requests_total).
# 3. A topology with bounds out of order is refused at start, naming the key path.
# (Before the start: `kvtier deployment` prints the route and the branches as read.)
. "$(dirname "$0")/lib.sh"

: "${KVTIER_LIB:?KVTIER_LIB must name libkvtier.so}"
N=6

it_write_deployment <<JSON
{"tiers": [{"name": "host0", "kind": "host", "capacity": 64, "slot_size": "64KiB"},
           {"name": "host1", "kind": "host", "capacity": 64, "slot_size": "64KiB"},
           {"name": "host2", "kind": "host", "capacity": 256, "slot_size": "64KiB"}],
 "topology": {"type": "branches", "route": "ttl", "branches": [
   {"name": "long", "type": "chain", "tiers": ["host0", "host2"], "ttl_above": "10m"},
   {"name": "short", "type": "chain", "tiers": ["host1", "host2"], "ttl_above": "0s"},
   {"name": "untimed", "type": "chain", "tiers": ["host0", "host2"], "fallback": true}]}}
JSON

it_client() {
  KVTIER_COORDINATOR=$KVTIER_COORDINATOR IT_INSTANCE=it-branches \
    it_python "$KVT_SOURCE_DIR/tests/integration/it_client.py" "$@"
}
field() { /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
counter() { it_client stats | field "$1"; }

# the deployment as the processes read it (kvtier deployment's route / branch lines)
"$KVTIER_BIN" deployment -c "$it_dir/deployment.json" | grep -E '^(route|branch) ' >"$it_dir/branches.txt"
printf '%s\n' "route ttl" "branch long host0,host2 ttl>600000" "branch short host1,host2 ttl>0" \
  "branch untimed host0,host2 fallback" | diff - "$it_dir/branches.txt" >&2 ||
  it_fail "kvtier deployment describes the topology otherwise"

it_start

# ---- 1. each branch gets its requests ------------------------------------------------
branch() { # branch TAG TTL_MS WANT-NAME WANT-HEAD
  it_client branch "$1" 0 $N "$2" 0 >"$it_dir/$1.json" || it_fail "branch $1: $(cat "$it_dir/$1.json")"
  local name head tiers
  name=$(field branch_name <"$it_dir/$1.json")
  head=$(field head_tier_id <"$it_dir/$1.json")
  tiers=$(field tiers <"$it_dir/$1.json")
  [ "$name" = "$3" ] || it_fail "a request of TTL $2 ms went to branch $name, want $3"
  [ "$head" = "$4" ] || it_fail "branch $3's head is tier $head, want $4"
  [ "$tiers" = "[$4]" ] || it_fail "the blocks of a request on $3 live on tiers $tiers, want [$4]"
  it_log "TTL $2 ms: branch $name, blocks on tier $head, read back byte-exact"
}
branch long 3600000 long 1
branch short 60000 short 2
branch edge 600000 short 2 # not above 10 min
branch untimed 0 untimed 1

# ---- 2. the heads hold their branches' blocks -------------------------------------------
[ "$(counter tier.host0.used)" -eq $((2 * N)) ] || it_fail "host0 holds $(counter tier.host0.used) blocks, want $((2 * N))"
[ "$(counter tier.host1.used)" -eq $((2 * N)) ] || it_fail "host1 holds $(counter tier.host1.used) blocks, want $((2 * N))"
[ "$(counter tier.host2.used)" -eq 0 ] || it_fail "host2 holds blocks nobody demoted"
[ "$(counter branch.short.requests)" -eq 2 ] || it_fail "branch.short.requests $(counter branch.short.requests), want 2"
# ... and Prometheus sees the router's choices (refreshed every metrics.refresh)
metrics=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["coordinator"]["metrics"])' "$it_dir/deployment.json")
routed() {
  curl -s "http://$metrics/metrics" >"$it_dir/metrics.txt" &&
    grep -qx 'kvtier_branch_requests_total{branch="long"} 1' "$it_dir/metrics.txt" &&
    grep -qx 'kvtier_branch_requests_total{branch="short"} 2' "$it_dir/metrics.txt" &&
    grep -qx 'kvtier_branch_requests_total{branch="untimed"} 1' "$it_dir/metrics.txt"
}
it_wait_until 20 routed || it_fail "kvtier_branch_requests_total: $(grep branch "$it_dir/metrics.txt")"

# ---- 3. bounds out of order are refused, naming the key path ------------------------------
/usr/bin/python3 - "$it_dir/deployment.json" "$it_dir/bad.json" <<'EOF2'
import json, sys
d = json.load(open(sys.argv[1]))
d["topology"]["branches"][1]["ttl_above"] = "1h"
json.dump(d, open(sys.argv[2], "w"))
EOF2
rc=0
"$KVTIER_BIN" deployment -c "$it_dir/bad.json" >"$it_dir/bad.out" 2>&1 || rc=$?
[ $rc -ne 0 ] || it_fail "a topology with bounds out of order was accepted"
grep -qF "topology.branches[1].ttl_above: 1h is not below branches[0]'s 10m" "$it_dir/bad.out" ||
  it_fail "the refusal does not name the key path: $(cat "$it_dir/bad.out")"
it_log "PASS"
