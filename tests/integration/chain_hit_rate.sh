#!/usr/bin/env bash
# chain_hit_rate.sh — a measurement, not a test (not in KVT_IT_SCRIPTS): the hit rate of
# a host -> nvme chain replayed through the running service, next to the offline
# figures of the same trace (issue 14 §1, docs/OPTIMIZER.md "Chain hit rate vs LRU of
# its size").
#
#   KVTIER_BIN=build/bin/kvtier KVT_SOURCE_DIR=. \
#     tests/integration/chain_hit_rate.sh HOST NVME [PLACEMENT] [TRACE] [REQUESTS]
#
# A deployment host0 (HOST slots) -> nvme0 (NVME slots, a file in the temp dir), 4 KiB
# blocks, chain placement PLACEMENT ("exclusive" or "inclusive"; default: the
# deployment default), under deploy/supervise; `kvtier replay --in-flight 1` of TRACE
# (default traces/synthetic_trace.jsonl; REQUESTS: all); then `kvtier optimize` of the
# same requests at HOST + NVME and the chain model. KVT_HEAD_OPTS: more keys of the
# host0 entry (JSON, e.g. '"high_watermark": 0.95, "low_watermark": 0.9');
# KVT_REPLAY_OPTS: more replay flags (e.g. "--promote-wait 2000"); KVT_POLICY: both
# tiers' replacement policy (default lru; docs/POLICY.md). Prints the replay's report, the
# scheduler's counters that say where hits went, and one summary line:
#   chain HOST+NVME PLACEMENT: service X%, lru(N) Y%, chain model Z%
. "$(dirname "$0")/lib.sh"

host=${1:?usage: chain_hit_rate.sh HOST NVME [PLACEMENT] [TRACE] [REQUESTS]}
nvme=${2:?usage: chain_hit_rate.sh HOST NVME [PLACEMENT] [TRACE] [REQUESTS]}
placement=${3:-}
trace=${4:-$it_trace}
requests=${5:-}
policy=${KVT_POLICY:-lru}
chain='{"name": "default", "tiers": ["host0", "nvme0"]}'
[ -z "$placement" ] || chain="{\"name\": \"default\", \"tiers\": [\"host0\", \"nvme0\"], \"placement\": \"$placement\"}"

it_write_deployment <<JSON
{"tiers": [
  {"name": "host0", "kind": "host", "capacity": $host, "slot_size": "4KiB", "policy": "$policy"${KVT_HEAD_OPTS:+, $KVT_HEAD_OPTS}},
  {"name": "nvme0", "kind": "nvme", "capacity": $nvme, "slot_size": "4KiB", "policy": "$policy"}],
 "chains": [$chain]}
JSON
it_start
args=(--in-flight 1 --block-size 4KiB --no-progress)
# shellcheck disable=SC2206  # word splitting wanted: more replay flags
[ -z "${KVT_REPLAY_OPTS:-}" ] || args+=($KVT_REPLAY_OPTS)
[ -z "$requests" ] || args+=(--requests "$requests")
start=$SECONDS
it_cli replay "$trace" "${args[@]}" >"$it_dir/replay.txt" || it_fail "replay failed: $(cat "$it_dir/replay.txt")"
cat "$it_dir/replay.txt"
echo "replay time: $((SECONDS - start)) s"
it_cli status >"$it_dir/status.txt"
for c in blocks put_busy room_demotions demote_submitted demoted evictions reclaim_marked \
  prefetch_keys prefetch_committed prefetch_failed promoted_exclusive; do
  awk -v n="$c" '$1 == n { printf "%s %s  ", $1, $2 }' "$it_dir/status.txt"
done
echo
grep -E '^tier ' "$it_dir/status.txt" || true
service=$(it_replay_field "$it_dir/replay.txt" 2)
opt_args=(--no-plot --no-belady --no-arc --no-policies --capacities $((host + nvme)) --chain "$host,$nvme"
  --chain-policy "$policy,$policy")
[ -z "$placement" ] || opt_args+=(--chain-placement "$placement")
[ -z "$requests" ] || { head -n "$requests" "$trace" >"$it_dir/trace.jsonl"; trace=$it_dir/trace.jsonl; }
"$KVTIER_BIN" optimize "$trace" "${opt_args[@]}" >"$it_dir/opt.txt" 2>&1 || cat "$it_dir/opt.txt"
lru=$(awk -v c=$((host + nvme)) '$1 == c { print $2; exit }' "$it_dir/opt.txt")
model=$(sed -n 's/^chain .*: hit rate \([0-9.]*%\).*$/\1/p' "$it_dir/opt.txt")
grep '^chain ' "$it_dir/opt.txt" || true
it_no_crash
echo "chain $host+$nvme ${placement:-default}: service $service%, lru($((host + nvme))) $lru, chain model $model"
