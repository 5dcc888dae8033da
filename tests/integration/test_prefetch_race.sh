#!/usr/bin/env bash
# issue 4 §6: "a prefetch racing with a reclaim of the same block never serves wrong
# bytes", and "blocks come back up on reuse".
#
# A small host tier chained to a small nvme tier (a file in the test's temp dir), with
# low watermarks, a short reclaimer interval and delete delay, so that demotion from
# host0 and deletion on nvme0 run all the time (nvme0, the last tier, is reclaimed
# ahead by its watermarks: "reclaim": "ahead", so blocks go DELETING under the
# prefetches). Clients are Python processes
# (it_client.py, the binding); a block's bytes are a function of its key.
# - a writer stores sequences of blocks in rounds, over a key space several times
#   what the tiers hold;
# - a prefetcher loops: picks a sequence cached below the head, prefix lookup, and
#   when a prefetch is advised prepare_prefetch -> submit_prefetch -> wait ->
#   complete_prefetch, looks the sequence up again, then prepare_get -> submit_get ->
#   checks every byte -> complete_get; every fourth advised sequence is loaded
#   straight from the lower tier instead, and every fourth sequence is prefetched
#   blind (no lookup first, so its blocks stay the reclaimer's coldest). Two of them.
# Asserted: no block ever loads wrong bytes (a key may be gone, a prepare refused
# with NO_SPACE / BUSY / UNAVAILABLE, a job failed: counted, allowed); the race
# happened: prefetches committed blocks that then showed on the head tier, blocks
# loaded from nvme0, and demotions and deletions ran during the run; at the end every
# block still cached loads byte-exact.
. "$(dirname "$0")/lib.sh"

HOST_CAPACITY=96   # 64 KiB slots; reclaim above 50%, down to 25%
NVME_CAPACITY=512  # 64 KiB slots; reclaim above 50%, down to 25%
SEQS=96            # sequences of BLOCKS blocks: 768 keys, 3x what nvme0 keeps
BLOCKS=8
PREFETCHERS=2      # prefetcher processes
ITERATIONS=300     # loop iterations of each (a sanitizer build: 75)
MAX_SECONDS=100    # ... or until this much time has passed: bounds the run on a busy host
MAX_ROUNDS=40      # the writer stops at the end of the prefetcher, or after these
: "${KVTIER_LIB:?KVTIER_LIB must name libkvtier.so}"
nvme_file=$it_dir/nvme0.dat
[ -z "$(it_python_env)" ] || ITERATIONS=75

it_write_deployment <<JSON
{"tiers": [
  {"name": "host0", "kind": "host", "capacity": $HOST_CAPACITY, "slot_size": "64KiB",
   "high_watermark": "50%", "low_watermark": "25%"},
  {"name": "nvme0", "kind": "nvme", "capacity": $NVME_CAPACITY, "slot_size": "64KiB",
   "path": "$nvme_file", "high_watermark": "50%", "low_watermark": "25%", "reclaim": "ahead"}],
 "reclaimer": {"interval": "20ms", "delete_delay": "50ms"}}
JSON

client_py=$KVT_SOURCE_DIR/tests/integration/it_client.py
it_client() { KVTIER_COORDINATOR=$KVTIER_COORDINATOR it_python "$client_py" "$@"; }
# json_get FILE KEY: one value of a JSON object file.
json_get() { /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
# stats_to FILE: the scheduler's counters, now, into FILE.
stats_to() { it_client stats >"$1" || it_fail "stats failed"; }

it_start
it_cli status --check >/dev/null || it_fail "status --check failed on a ready deployment"

stats_to "$it_dir/stats0.json"
stop=$it_dir/stop
# shellcheck disable=SC2046  # word splitting wanted: NAME=VALUE words
env $(it_python_env) KVTIER_COORDINATOR="$KVTIER_COORDINATOR" /usr/bin/python3 "$client_py" \
  writer --seqs $SEQS --blocks $BLOCKS --rounds $MAX_ROUNDS --stop "$stop" \
  >"$it_dir/writer.json" 2>"$it_dir/writer.err" &
writer_pid=$!
trap 'rc=$?; set +e; kill -KILL "$writer_pid" 2>/dev/null; (exit $rc); it_cleanup' EXIT

# The prefetcher starts once some blocks live below the head (demotion ran).
demoted_some() {
  kill -0 $writer_pid 2>/dev/null || it_fail "the writer ended early: $(cat "$it_dir/writer.err")"
  stats_to "$it_dir/stats_w.json"
  [ "$(json_get "$it_dir/stats_w.json" demoted)" -gt 0 ]
}
it_wait_until 60 demoted_some || it_fail "nothing was demoted from host0: $(cat "$it_dir/stats_w.json")"

pids=()
for i in $(seq 1 $PREFETCHERS); do
  # shellcheck disable=SC2046  # word splitting wanted: NAME=VALUE words
  env $(it_python_env) KVTIER_COORDINATOR="$KVTIER_COORDINATOR" /usr/bin/python3 "$client_py" \
    prefetcher --id "$i" --seqs $SEQS --blocks $BLOCKS --iterations $ITERATIONS \
    --max-seconds $MAX_SECONDS \
    >"$it_dir/prefetcher$i.json" 2>"$it_dir/prefetcher$i.err" &
  pids+=($!)
done
trap 'rc=$?; set +e; kill -KILL "$writer_pid" "${pids[@]}" 2>/dev/null; (exit $rc); it_cleanup' EXIT
rc=0
for i in $(seq 1 $PREFETCHERS); do
  prc=0
  wait "${pids[$((i - 1))]}" || prc=$?
  cat "$it_dir/prefetcher$i.err" >&2
  [ $prc -eq 0 ] || { it_log "prefetcher $i failed (exit $prc)"; rc=1; }
done
touch "$stop"
it_wait_gone $writer_pid 60 || it_fail "the writer did not stop"
wrc=0
wait $writer_pid || wrc=$?
trap it_cleanup EXIT
stats_to "$it_dir/stats1.json"
[ $rc -eq 0 ] || it_fail "a prefetcher failed: $(cat "$it_dir"/prefetcher[0-9]*.json)"
# the prefetchers' counts added up
/usr/bin/python3 - "$it_dir/prefetcher.json" "$it_dir"/prefetcher[0-9]*.json <<'EOF'
import json, sys
total = {}
for name in sys.argv[2:]:
    with open(name) as f:
        for k, v in json.load(f).items():
            if isinstance(v, dict):
                d = total.setdefault(k, {})
                for k2, v2 in v.items():
                    d[k2] = d.get(k2, 0) + v2
            else:
                total[k] = total.get(k, 0) + v
with open(sys.argv[1], "w") as f:
    json.dump(total, f, sort_keys=True)
EOF
[ $wrc -eq 0 ] || it_fail "the writer failed (exit $wrc): $(cat "$it_dir/writer.err")"
it_log "writer: $(cat "$it_dir/writer.json")"
it_log "prefetcher: $(cat "$it_dir/prefetcher.json")"

# counter NAME: how much a scheduler counter grew during the run ("-" if this
# scheduler has no such counter).
counter() {
  /usr/bin/python3 -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
print(b[sys.argv[3]] - a[sys.argv[3]] if sys.argv[3] in a and sys.argv[3] in b else "-")' \
    "$it_dir/stats0.json" "$it_dir/stats1.json" "$1"
}
pf() { json_get "$it_dir/prefetcher.json" "$1"; }
summary=""
for n in prefetches prefetch_keys prefetch_committed prefetch_failed prefetch_copy_jobs \
  prefetch_copied prefetch_copy_failed demote_submitted demoted \
  demote_failed demote_stale room_demotions reclaim_marked reclaimed evictions put_busy \
  busy_refusals put_no_space get_not_found; do
  summary+=" $n=$(counter $n)"
done
it_log "scheduler counters during the run:$summary"

[ "$(pf wrong_blocks)" -eq 0 ] || it_fail "wrong bytes were served"
[ "$(pf blocks_checked)" -gt 0 ] || it_fail "no block was loaded and checked"
# the race happened: blocks came back up, blocks were read from below the head, and
# demotion and deletion ran meanwhile
[ "$(counter prefetch_committed)" -gt 0 ] || it_fail "no prefetch committed a block"
# the copies went through the migrator, beside the demotions (DESIGN.md §6)
[ "$(counter prefetch_copied)" -gt 0 ] || it_fail "no prefetch copy ran through the migrator"
[ "$(pf prefetched_on_head)" -gt 0 ] || it_fail "no prefetched block showed on the head tier"
[ "$(pf blocks_from_lower)" -gt 0 ] || it_fail "no block was loaded from nvme0"
[ "$(counter demoted)" -gt 0 ] || it_fail "no block was demoted during the run"
# reclaim_marked: blocks the reclaimer marked DELETING on a chain's last tier (nvme0)
[ "$(counter reclaim_marked)" -gt 0 ] || it_fail "no block was deleted from nvme0 during the run"

# At the end, every block still cached loads byte-exact.
it_client prefetcher --seqs $SEQS --blocks $BLOCKS --iterations 0 --final-check \
  >"$it_dir/final.json" 2>"$it_dir/final.err" ||
  it_fail "the final check failed: $(cat "$it_dir/final.err")"
it_log "final check: $(cat "$it_dir/final.json")"
[ "$(json_get "$it_dir/final.json" blocks_checked)" -gt 0 ] || it_fail "nothing cached at the end"
it_no_crash
it_log "PASS"
