#!/usr/bin/env bash
# Issue "one source for shared identities and limits": "Every caller learns the
# total, long lists are paged, and a bound that is reached is reported, never
# truncated silently." Before it, `kvtier status` and the Python binding read at
# most 64 counters, and four tiers already make more.
#
# A deployment of TIERS host tiers (the scheduler has 2 counters per tier: more than
# 64 in all) runs under deploy/supervise.
# 1. `kvtier status` prints "counters N" with N above 64, then exactly N counter
#    lines, among them tier.<name>.used and tier.<name>.capacity of every tier.
# 2. The Python binding (it_client.py stats, Client.stats) returns the same N
#    counters, with the same values for the per-tier capacities.
. "$(dirname "$0")/lib.sh"

TIERS=8
CAPACITY=16
: "${KVTIER_LIB:?KVTIER_LIB must name libkvtier.so}"

tiers_json=""
for i in $(seq 0 $((TIERS - 1))); do
  tiers_json+="${tiers_json:+, }{\"name\": \"host$i\", \"kind\": \"host\", \"capacity\": $CAPACITY, \"slot_size\": \"64KiB\"}"
done
it_write_deployment <<JSON
{"tiers": [$tiers_json]}
JSON
it_start

# ---- 1. the CLI shows every counter ---------------------------------------------
it_cli status >"$it_dir/status.txt" || it_fail "kvtier status failed: $(cat "$it_dir/status.txt")"
n=$(awk '$1 == "counters" { print $2; exit }' "$it_dir/status.txt")
[ -n "$n" ] || it_fail "no counters line: $(cat "$it_dir/status.txt")"
[ "$n" -gt 64 ] || it_fail "$n counters with $TIERS tiers: expected more than 64 (the old cut)"
grep -Eq "^counters +$n$" "$it_dir/status.txt" ||
  it_fail "the counters line reports a cut: $(grep '^counters' "$it_dir/status.txt")"
shown=$(sed -n '/^counters /,$p' "$it_dir/status.txt" | grep -Ec '^  [^ ]+ +[0-9]+$' || true)
[ "$shown" -eq "$n" ] || it_fail "kvtier status shows $shown of $n counters"
for i in $(seq 0 $((TIERS - 1))); do
  grep -Eq "^  tier\.host$i\.used +0$" "$it_dir/status.txt" || it_fail "no tier.host$i.used line"
  grep -Eq "^  tier\.host$i\.capacity +$CAPACITY$" "$it_dir/status.txt" ||
    it_fail "no tier.host$i.capacity $CAPACITY line"
done

# ---- 2. the Python binding returns them all -------------------------------------
KVTIER_COORDINATOR=$KVTIER_COORDINATOR IT_INSTANCE=it-stats \
  it_python "$KVT_SOURCE_DIR/tests/integration/it_client.py" stats >"$it_dir/stats.json" ||
  it_fail "it_client stats failed"
/usr/bin/python3 - "$it_dir/stats.json" "$n" "$TIERS" "$CAPACITY" <<'PY' || it_fail "the binding's counters differ from the CLI's"
import json, sys
st = json.load(open(sys.argv[1]))
n, tiers, capacity = (int(v) for v in sys.argv[2:])
counters = {k: v for k, v in st.items() if not k.startswith("used.")}  # used.*: from cluster_info
assert len(counters) == n, "%d counters, the CLI shows %d" % (len(counters), n)
for i in range(tiers):
    assert counters["tier.host%d.capacity" % i] == capacity, i
    assert st["used.host%d" % i] == 0, i
PY
it_no_crash
it_log "every counter shown: $n"
