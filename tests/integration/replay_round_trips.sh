#!/usr/bin/env bash
# replay_round_trips.sh — a measurement, not a test (not in KVT_IT_SCRIPTS): meta round
# trips per request and replay time of the shipped trace, the five-call path against
# the combined one (issue 13 §2, docs/PERFORMANCE.md "A request in two round trips").
#
#   KVTIER_BIN=build/bin/kvtier KVT_SOURCE_DIR=. \
#     tests/integration/replay_round_trips.sh SHAPE OUT [REPLAY-OPTS...]
#
# SHAPE "default": a fresh deployment shaped like deploy/default.json (host0 2048 x
# 256 KiB -> nvme0 16384 x 64 KiB in the temp dir, s3fifo, exclusive, 30 s leases) on
# free ports; "host": one host tier of 2048 x 64 KiB (it_deployment: no demotion, so no
# BUSY). Then `kvtier replay` of the trace's first ${KVT_REQUESTS:-200} requests with
# REPLAY-OPTS (e.g. --combined), its report and `kvtier status` into OUT, and one line:
#   SHAPE OPTS: R round trips per request (B BUSY retries), W window calls without
#   BUSY and begin/end, S s
. "$(dirname "$0")/lib.sh"

shape=${1:?usage: replay_round_trips.sh default|host OUT [REPLAY-OPTS...]}
out=${2:?usage: replay_round_trips.sh default|host OUT [REPLAY-OPTS...]}
shift 2
case $shape in
  host) it_deployment 2048 64KiB ;;
  default) it_write_deployment <<'JSON' ;;
{ "coordinator": { "pin_lease": "30s", "write_grace": "30s", "max_batch": 65536,
                   "max_requests": 65536, "tier_timeout": "2s" },
  "tiers": [ { "name": "host0", "kind": "host", "capacity": 2048, "slot_size": "256KiB",
               "policy": "s3fifo", "prefault": true },
             { "name": "nvme0", "kind": "nvme", "capacity": 16384, "slot_size": "64KiB",
               "policy": "s3fifo" } ],
  "chains": [ { "name": "default", "tiers": ["host0", "nvme0"], "placement": "exclusive" } ] }
JSON
  *) it_fail "shape $shape: default or host" ;;
esac
it_start
n=${KVT_REQUESTS:-200}
it_cli replay "$it_trace" --requests "$n" --no-progress "$@" >"$out" 2>&1 ||
  { cat "$out"; it_fail "replay exited with status $?"; }
it_cli status >>"$out" 2>&1 || true
req=$(sed -n 's/^requests *\([0-9]*\) replayed.*/\1/p' "$out")
all=$(sed -n 's/^meta calls.*, \([0-9]*\) in all$/\1/p' "$out")
busy=$(awk '$1 == "put_busy" { print $2 }' "$out")
secs=$(sed -n 's/^data .* in \([0-9.]*\) s .*/\1/p' "$out")
awk -v s="$shape" -v o="$*" -v r="$req" -v a="$all" -v b="${busy:-0}" -v t="$secs" 'BEGIN {
  printf "%s %s: %.2f round trips per request (%d BUSY retries), %.2f window calls without BUSY and begin/end, %s s\n",
    s, o, a / r, b, (a - b - 2 * r) / r, t }'
