#!/usr/bin/env bash
# policy_hit_rate.sh — a measurement, not a test (not in KVT_IT_SCRIPTS): the hit rate of
# one host tier under a replacement policy, replayed through the running service, next
# to the offline figure of the same policy, LRU and the Belady reference at the same
# capacity (issue 14 §2, docs/POLICY.md "Through the service").
#
#   KVTIER_BIN=build/bin/kvtier KVT_SOURCE_DIR=. \
#     tests/integration/policy_hit_rate.sh CAPACITY POLICY [TRACE]
#
# A deployment of one host tier (CAPACITY slots of 4 KiB, POLICY), under
# deploy/supervise; `kvtier replay --in-flight 1` of TRACE (default
# traces/synthetic_trace.jsonl); then `kvtier optimize` of the same trace at CAPACITY.
# Prints one line:
#   policy POLICY CAPACITY: service X%, offline POLICY Y%, lru Z%, belady* W%
. "$(dirname "$0")/lib.sh"

cap=${1:?usage: policy_hit_rate.sh CAPACITY POLICY [TRACE]}
policy=${2:?usage: policy_hit_rate.sh CAPACITY POLICY [TRACE]}
trace=${3:-$it_trace}

it_write_deployment <<JSON
{"tiers": [{"name": "host0", "kind": "host", "capacity": $cap, "slot_size": "4KiB",
            "policy": "$policy"}],
 "chains": [{"name": "default", "tiers": ["host0"]}]}
JSON
it_start
it_cli replay "$trace" --in-flight 1 --block-size 4KiB --no-progress >"$it_dir/replay.txt" ||
  it_fail "replay failed: $(cat "$it_dir/replay.txt")"
service=$(it_replay_field "$it_dir/replay.txt" 2)
"$KVTIER_BIN" optimize "$trace" --no-plot --no-arc --capacities "$cap" >"$it_dir/opt.txt" 2>&1 ||
  cat "$it_dir/opt.txt"
read -r lru bel own < <(awk -v c="$cap" -v p="$policy" '
  $1 == "capacity" { for (i = 2; i <= NF; i++) if ($i == p) col = i }
  ($1 == c || $1 == "unbounded") && !done { print $2, $3, $col; done = 1 }' "$it_dir/opt.txt")
it_no_crash
echo "policy $policy $cap: service $service%, offline $policy $own, lru $lru, belady* $bel"
