#!/usr/bin/env bash
# issue 4 §4: "Per-instance quotas (max bytes or blocks) enforced the same way" as the
# watermarks (docs/SCHEDULER.md "Quotas").
#
# A deployment with one host tier, a quota of 20 blocks for instance it-quota,
# reclaimer.quota_low 0.5 and short reclaimer delays runs under deploy/supervise; the
# clients are Python processes (it_client.py, the binding).
# 1. Instance it-other (no quota, no "*") stores 30 blocks, read back byte-exact.
# 2. Instance it-quota puts 40 blocks in one batch (soft quota: the put is not
#    refused).
# 3. The reclaimer brings it-quota down to 20 x 0.5 = 10 blocks: its 30 coldest (the
#    first 30 keys) are no longer served, the 10 newest load byte-exact, it-other's
#    blocks are all intact; `kvtier status --instance-stats` shows the quota counters.
# 4. A put of 4 it-other keys whose last success flag is False: complete_put returns
#    3 committed, 1 failed (kvt_complete_put_ex); the 3 load, the 4th is not served.
. "$(dirname "$0")/lib.sh"

CAPACITY=128 # host slots of 64 KiB: 70 blocks stay under the watermarks
N_OTHER=30
N_QUOTA=40
QUOTA=20
KEEP=10 # QUOTA x quota_low
: "${KVTIER_LIB:?KVTIER_LIB must name libkvtier.so}"

it_write_deployment <<JSON
{"tiers": [{"name": "host0", "kind": "host", "capacity": $CAPACITY, "slot_size": "64KiB"}],
 "reclaimer": {"interval": "50ms", "delete_delay": "100ms", "quota_low": 0.5},
 "quotas": [{"instance": "it-quota", "max_blocks": $QUOTA}]}
JSON

# it_client INSTANCE ARGS...: one client process (the Python binding) as INSTANCE.
it_client() {
  local inst=$1
  shift
  KVTIER_COORDINATOR=$KVTIER_COORDINATOR IT_INSTANCE=$inst \
    it_python "$KVT_SOURCE_DIR/tests/integration/it_client.py" "$@"
}
# counter INSTANCE NAME: one of the instance's scheduler counters ("" INSTANCE: all).
counter() {
  # shellcheck disable=SC2086  # an empty INSTANCE is no argument: all instances
  it_client it-other stats $1 | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"
}

it_start

# ---- 1. the other instance's blocks ---------------------------------------------------
it_client it-other store other 0 $N_OTHER >/dev/null || it_fail "storing it-other's blocks"

# ---- 2. over the quota: a soft quota refuses nothing ------------------------------------
it_client it-quota put q 0 $N_QUOTA >"$it_dir/put.txt" || it_fail "the put above the quota failed"
grep -q "^put $N_QUOTA keys q/0.. in one batch, $N_QUOTA written$" "$it_dir/put.txt" ||
  it_fail "not all keys were written: $(cat "$it_dir/put.txt")"

# ---- 3. brought down to quota x quota_low ------------------------------------------------
enforced() {
  [ "$(counter it-quota quota_usage_blocks)" -eq $KEEP ] && [ "$(counter "" deleting)" -eq 0 ] &&
    [ "$(counter "" tier.host0.used)" -eq $((N_OTHER + KEEP)) ]
}
it_wait_until 60 enforced || it_fail "it-quota was not brought down to $KEEP blocks: $(it_client it-quota stats it-quota)"
it_client it-quota miss q 0 $((N_QUOTA - KEEP)) >/dev/null || it_fail "a block reclaimed for the quota is still served"
it_client it-quota verify q $((N_QUOTA - KEEP)) $KEEP >/dev/null || it_fail "the newest blocks of it-quota are not served byte-exact"
it_client it-other verify other 0 $N_OTHER >/dev/null || it_fail "it-other lost or damaged blocks"
[ "$(counter "" quota_reclaimed)" -eq $((N_QUOTA - KEEP)) ] ||
  it_fail "quota_reclaimed is $(counter "" quota_reclaimed), expected $((N_QUOTA - KEEP))"
[ "$(counter it-other quota_reclaimed)" -eq 0 ] || it_fail "it-other lost blocks to a quota"
it_log "it-quota: $N_QUOTA blocks put, $((N_QUOTA - KEEP)) reclaimed for its quota of $QUOTA, $KEEP kept"

"$KVTIER_BIN" status --coordinator "$KVTIER_COORDINATOR" --instance-stats it-quota >"$it_dir/status.txt" ||
  it_fail "kvtier status --instance-stats failed"
for want in "quota_usage_blocks +$KEEP" "quota_limit_blocks +$QUOTA" \
  "quota_reclaimed +$((N_QUOTA - KEEP))" "quota_usage_bytes +$((KEEP * 65536))"; do
  grep -Eq "^ +$want$" "$it_dir/status.txt" || it_fail "kvtier status lacks \"$want\": $(cat "$it_dir/status.txt")"
done
it_log "kvtier status --instance-stats it-quota shows the quota counters"

# ---- 4. a put with one failed flag: the binding returns the commit counts ------------------
it_client it-other partial part 0 4 >"$it_dir/partial.txt" ||
  it_fail "the partial put: $(cat "$it_dir/partial.txt")"
it_log "$(cat "$it_dir/partial.txt")"
