#!/usr/bin/env bash
# issue 14 §1: "the chain is worth its slots". A deployment host0 (HOST slots) -> nvme0
# (NVME slots, a file in the test's temp dir), 4 KiB blocks, the default chain placement
# (exclusive) and reclaim (the last tier on demand), events recorded from before the
# replay (`kvtier events --snapshot --record`). `kvtier replay --in-flight 1 --promote-wait`
# of the first REQUESTS trace requests stores many times what the chain holds.
# Asserted:
# - the last tier is not reclaimed ahead of need: the reclaimer marked nothing
#   (reclaim_marked 0), its slots were freed by evictions when a demotion needed them,
#   and it ends above its high watermark (90%): it filled to its capacity;
# - promotions moved their blocks (prefetch_moved > 0): as many BlockMoved nvme0 ->
#   host0 with reason PROMOTED (2) in the recording;
# - the index rebuilt from the recording (stored: add; removed: discard; moved: off the
#   source, onto the destination) never removes or moves a block it does not hold, and
#   is the scheduler's (blocks - deleting) once the service is quiet: nothing is held
#   twice or lost from the events' view; every load was byte-exact.
. "$(dirname "$0")/lib.sh"

HOST=128
NVME=512
REQUESTS=300 # 4,500 distinct blocks: many times the chain's 640 slots
inst=(--block-size 4KiB)

it_write_deployment <<JSON
{"tiers": [
  {"name": "host0", "kind": "host", "capacity": $HOST, "slot_size": "4KiB"},
  {"name": "nvme0", "kind": "nvme", "capacity": $NVME, "slot_size": "4KiB"}]}
JSON
it_start

counter() { it_cli status | awk -v n="$1" '$1 == n { print $2; exit }'; }
# fill TIER: "used capacity" of the tier's status line.
fill() { it_cli status | sed -n "s/^tier [0-9]* $1: .* fill \([0-9]*\)\/\([0-9]*\) slots.*$/\1 \2/p"; }

# marker N: stores one block of its own and waits until the recording has it, so
# the recorder saw everything before (it is connected) or up to now (it caught up).
marker() {
  local key
  key=$(printf '7e%030x' "$1")
  it_cli put --key "$key" --pattern "${inst[@]}" >/dev/null || it_fail "marker put failed"
  it_wait_until 30 grep -q "\"kind\":\"stored\".*\"$key\"" "$it_dir/events.jsonl"
}

# --snapshot: the index as the publisher has it first, then every batch after it, so a
# store the recorder's subscription came too late for is in the snapshot
"$KVTIER_BIN" events --coordinator "$KVTIER_COORDINATOR" --snapshot --record "$it_dir/events.jsonl" \
  >/dev/null 2>"$it_dir/events.err" &
recorder=$!
for i in $(seq 1 50); do
  marker "$i" && break
  [ "$i" -lt 50 ] || it_fail "the recorder never saw a store: $(cat "$it_dir/events.err")"
done

it_cli replay "$it_trace" --requests $REQUESTS --in-flight 1 --promote-wait 5000 --no-progress "${inst[@]}" \
  >"$it_dir/replay.txt" || it_fail "replay failed: $(cat "$it_dir/replay.txt")"
grep -q '^failures  *0 hits not granted, 0 loads failed, 0 stores failed, 0 verify failures$' \
  "$it_dir/replay.txt" || it_fail "failed or wrong blocks: $(cat "$it_dir/replay.txt")"
it_log "replay: $(grep -E '^(blocks|promotion) ' "$it_dir/replay.txt" | tr '\n' ' ')"

# ---- the last tier fills; nothing reclaimed ahead ------------------------------------
[ "$(counter reclaim_marked)" = 0 ] || it_fail "the reclaimer marked $(counter reclaim_marked) blocks DELETING on a last tier"
[ "$(counter evictions)" -gt 0 ] || it_fail "nothing was evicted: the chain never filled"
read -r used cap < <(fill nvme0)
[ "$cap" = $NVME ] || it_fail "nvme0 capacity $cap"
[ $((used * 10)) -gt $((cap * 9)) ] || it_fail "nvme0 rests at $used of $cap slots (not above 90%)"
it_log "nvme0 at $used/$cap slots, $(counter evictions) evictions on demand, 0 marked ahead"

# ---- quiet: the head's reclaimer done, no demotion in flight -------------------------
quiet() {
  local s sub dem fail stale h hc
  s=$(it_cli status)
  sub=$(awk '$1 == "demote_submitted" { print $2 }' <<<"$s")
  dem=$(awk '$1 == "demoted" { print $2 }' <<<"$s")
  fail=$(awk '$1 == "demote_failed" { print $2 }' <<<"$s")
  stale=$(awk '$1 == "demote_stale" { print $2 }' <<<"$s")
  read -r h hc < <(sed -n 's/^tier [0-9]* host0: .* fill \([0-9]*\)\/\([0-9]*\) slots.*$/\1 \2/p' <<<"$s")
  [ "$sub" = $((dem + fail + stale)) ] && [ $((h * 10)) -le $((hc * 9)) ] &&
    [ "$(awk '$1 == "deleting" { print $2 }' <<<"$s")" = 0 ]
}
it_wait_until 60 quiet || it_fail "the service did not settle: $(it_cli status | grep -E 'demote|deleting|^tier')"
marker 1000 || it_fail "the recorder did not catch up"
kill -INT "$recorder"
wait "$recorder" || true
grep -q '^events: .* (0 missing), 0 terms lost$' "$it_dir/events.err" || it_fail "the recording has gaps: $(tail -n 2 "$it_dir/events.err")"

moved=$(counter prefetch_moved)
blocks=$(counter blocks)
deleting=$(counter deleting)
[ "$moved" -gt 0 ] || it_fail "no promotion moved a block (prefetch_moved 0)"

/usr/bin/python3 - "$it_dir/events.jsonl" "$moved" $((blocks - deleting)) <<'EOF' || it_fail "the recording disagrees (above)"
import json, sys
path, moved, live = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
held, bad, promoted = set(), [], 0
for line in open(path):
    e = json.loads(line)
    k = e.get("kind")
    for key in e.get("keys", []):
        if k == "stored":
            held.add((key, e["tier"]))
        elif k == "removed":
            if (key, e["tier"]) not in held:
                bad.append("removed from tier %d where it was not: %s" % (e["tier"], key))
            held.discard((key, e["tier"]))
        elif k == "moved":
            if (key, e["from"]) not in held:
                bad.append("moved off tier %d where it was not: %s" % (e["from"], key))
            held.discard((key, e["from"]))
            held.add((key, e["to"]))
            if e.get("reason") == 2:
                if (e["from"], e["to"]) != (2, 1):
                    bad.append("a promotion %d -> %d" % (e["from"], e["to"]))
                promoted += 1
    if k == "tier" and not e.get("up"):
        bad.append("a tier went down")
if promoted != moved:
    bad.append("%d promotions moved blocks, %d BlockMoved PROMOTED events" % (moved, promoted))
if len(held) != live:
    bad.append("the events hold %d blocks, the scheduler %d" % (len(held), live))
for b in bad[:10]:
    print("events: " + b, file=sys.stderr)
print("events: %d blocks held, %d promotions moved" % (len(held), promoted), file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
it_log "$moved promotions moved their block (BlockMoved PROMOTED), $((blocks - deleting)) blocks held, as the events say"
it_no_crash
it_log PASS
