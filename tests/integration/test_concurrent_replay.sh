#!/usr/bin/env bash
# issue 3 §5 (concurrency, processes): several `kvtier replay` processes at once on
# overlapping parts of the trace (same instance, so they write and read the same keys
# and share reservations) — every load is byte-exact, no request fails. The third
# process uses the frame path (--no-shm), the others the shared-memory path.
. "$(dirname "$0")/lib.sh"

it_deployment 2048 64KiB
it_start

pids=()
for off in 0 40 80; do
  path=()
  [ "$off" != 80 ] || path=(--no-shm)
  it_cli replay "$it_trace" --offset "$off" --requests 120 --in-flight 2 --no-progress \
    "${path[@]}" >"$it_dir/replay-$off.txt" 2>&1 &
  pids+=($!)
done
fail=0
for i in "${!pids[@]}"; do
  rc=0
  wait "${pids[$i]}" || rc=$?
  [ $rc -eq 0 ] || { it_log "replay $i exited with status $rc"; fail=1; }
done
for off in 0 40 80; do
  f=$it_dir/replay-$off.txt
  cat "$f"
  [ "$(it_replay_field "$f" 5)" = 0 ] || { it_log "replay at $off: verify failures"; fail=1; }
  [ "$(it_replay_field "$f" 1)" = 120 ] || { it_log "replay at $off: not 120 requests"; fail=1; }
  grep -q '^requests  *120 replayed, 0 failed$' "$f" || { it_log "replay at $off: failed requests"; fail=1; }
done
[ $fail -eq 0 ] || it_fail "a concurrent replay failed"
it_log "PASS"
