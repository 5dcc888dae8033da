#!/usr/bin/env bash
# Issue 10 §4 "Checked": the optimizer run on the events of a replay gives the same
# hit rate as the replay itself (±0.5 pp). `kvtier events` records the leader's events
# while `kvtier replay` runs on a one-tier deployment; `kvtier optimize` reads the
# recording (its "lookup" lines, instance demo) and reports the service's own hits,
# which must match the replay's count; its offline LRU of the same requests is printed
# next to them (not compared: the tier keeps free slots by its watermarks). And live:
# `kvtier optimize --subscribe` over the same stream reports the same service hit rate
# in its final line (its window holds every lookup of the run).
. "$(dirname "$0")/lib.sh"

it_deployment 2048 64KiB
it_start

rec=$it_dir/events.jsonl
# run directly (not through a function): $! is kvtier itself, which stops on SIGTERM
"$KVTIER_BIN" events --coordinator "$KVTIER_COORDINATOR" >"$rec" 2>"$it_dir/events.err" &
events_pid=$!
"$KVTIER_BIN" optimize --subscribe --coordinator "$KVTIER_COORDINATOR" --capacity 2048 \
  --every 1 >"$it_dir/live.txt" 2>"$it_dir/live.err" &
live_pid=$!
# both subscriptions reach the publisher: a lookup of another instance shows up in the
# recording and in the live window (its 2 keys never hit: nothing is stored for them)
sync_seen() {
  it_cli lookup --instance it-sync --tokens-per-block 2 --tokens 1,2 >/dev/null 2>&1 || true
  grep -q '"instance":"it-sync"' "$rec" && grep -q '^live: window [1-9]' "$it_dir/live.txt"
}
it_wait_until 30 sync_seen || it_fail "the subscribers saw no lookup within 30 s"

rc=0
it_cli replay "$it_trace" --requests 1000 --no-progress >"$it_dir/replay.txt" || rc=$?
cat "$it_dir/replay.txt"
[ $rc -eq 0 ] || it_fail "replay exited with status $rc"
# the last batches are flushed at the next tick (250 ms at most): wait for them
want=$(sed -n 's/^requests *\([0-9]*\) replayed.*/\1/p' "$it_dir/replay.txt")
all_seen() { [ "$(grep -c '"kind":"lookup","request":"replay' "$rec" || true)" -ge "$want" ]; }
it_wait_until 20 all_seen || it_log "only $(grep -c '"kind":"lookup","request":"replay' "$rec") of $want lookups recorded"
kill -TERM $events_pid $live_pid
wait $events_pid || it_fail "kvtier events failed: $(cat "$it_dir/events.err")"
wait $live_pid || it_fail "kvtier optimize --subscribe failed: $(cat "$it_dir/live.err")"
cat "$it_dir/events.err"
tail -n 2 "$it_dir/live.txt"

"$KVTIER_BIN" optimize "$rec" --instance demo --capacity 2048 --no-plot \
  --json "$it_dir/opt.json" >"$it_dir/opt.txt" || it_fail "kvtier optimize failed"
cat "$it_dir/opt.txt"
/usr/bin/python3 - "$it_dir/replay.txt" "$it_dir/opt.json" "$it_dir/live.txt" <<'PY' || it_fail "the optimizer's figure is not the replay's"
import json, re, sys
rep = open(sys.argv[1]).read()
m = re.search(r"^blocks +(\d+) looked up, (\d+) hit", rep, re.M)
looked, hit = int(m.group(1)), int(m.group(2))
o = json.load(open(sys.argv[2]))
refs, obs = o["references"], o["observed"]["hits"]
lru = [r["lru"] for r in o["rows"] if r["deployment"]][0]
print(f"replay: {hit} of {looked} blocks hit ({100 * hit / looked:.2f}%); optimizer on its "
      f"events: {obs} of {refs} ({100 * obs / refs:.2f}%); offline LRU at 2,048: "
      f"{100 * lru / refs:.2f}%")
assert abs(100 * obs / refs - 100 * hit / looked) <= 0.5, "more than 0.5 pp apart"
final = [l for l in open(sys.argv[3]) if l.startswith("live (final):")]
assert final, "no final live line"
m = re.search(r"window (\d+) lookups, (\d+) refs; service ([0-9.]+)%", final[-1])
print(f"live: {m.group(1)} lookups, {m.group(2)} refs, service {m.group(3)}%")
assert int(m.group(1)) >= 1000, "the live window missed lookups"
assert abs(float(m.group(3)) - 100 * hit / looked) <= 0.5, "live: more than 0.5 pp apart"
PY
it_no_crash
it_log "ok"
