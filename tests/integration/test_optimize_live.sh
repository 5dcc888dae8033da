#!/usr/bin/env bash
# Issue 10 §4 "Live": the supervisor runs the optimizer on the event stream; its
# figures are metrics too, and `kvtier status` shows the same three numbers.
# A deployment with optimizer.every 1s under deploy/supervise; a replay of 300
# requests; then:
# - etcd holds /kvtier/<cluster>/optimizer (the record docs/OPTIMIZER.md defines)
#   whose window covers the replay's lookups and whose live hit rate is the
#   replay's own (±0.5 pp);
# - the coordinator's /metrics carries the same three rates
#   (kvtier_optimizer_{live,lru,belady}_hit_ratio);
# - `kvtier status --etcd` prints the same three numbers;
# - the record's curve is increasing in capacity and ends at the window's
#   unbounded hit rate.
. "$(dirname "$0")/lib.sh"

it_deployment 2048 64KiB
/usr/bin/python3 - "$it_dir/deployment.json" <<'EOF' || it_fail "cannot edit the deployment"
import json, sys
d = json.load(open(sys.argv[1]))
d["optimizer"] = {"every": "1s", "capacity": 2048}
json.dump(d, open(sys.argv[1], "w"), indent=2)
EOF
it_start
[ -f "$it_run/pids/optimizer.pid" ] || it_fail "the supervisor runs no optimizer"
# ready does not wait for the optimizer's subscription (it may still be waiting for
# the leader): a lookup of another instance until its window shows one (its 2 keys
# never hit and weigh nothing against the replay's thousands)
sync_seen() {
  it_cli lookup --instance it-sync --tokens-per-block 2 --tokens 1,2 >/dev/null 2>&1 || true
  grep -q '^live: window [1-9]' "$it_run/logs/optimizer.log"
}
it_wait_until 60 sync_seen || it_fail "the optimizer saw no lookup: $(tail -n 3 "$it_run/logs/optimizer.log")"

rc=0
it_cli replay "$it_trace" --requests 300 --no-progress >"$it_dir/replay.txt" || rc=$?
[ $rc -eq 0 ] || it_fail "replay exited with status $rc: $(cat "$it_dir/replay.txt")"
grep '^blocks' "$it_dir/replay.txt"
looked=$(sed -n 's/^blocks *\([0-9]*\) looked up.*/\1/p' "$it_dir/replay.txt")

record() {
  ETCDCTL_API=3 etcdctl --endpoints "$KVTIER_ETCD" get "/kvtier/$it_name/optimizer" \
    --print-value-only >"$it_dir/record.json" 2>/dev/null
}
# the window has every lookup of the replay (the optimizer's next report after it)
covers() {
  record && /usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r["window_requests"] >= int(sys.argv[2]) else 1)' "$it_dir/record.json" 300
}
it_wait_until 60 covers || it_fail "no optimizer record covering the replay: $(cat "$it_dir/record.json")
$(tail -n 5 "$it_run/logs/optimizer.log")"
cat "$it_dir/record.json"; echo

coord_metrics=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["coordinator"]["metrics"])' \
  "$it_dir/deployment.json")
metrics_match() {
  record && curl -sf "http://$coord_metrics/metrics" >"$it_dir/metrics.txt" &&
    /usr/bin/python3 - "$it_dir/record.json" "$it_dir/metrics.txt" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
m = {}
for line in open(sys.argv[2]):
    if line.startswith("kvtier_optimizer_"):
        k, v = line.split()[:2]
        m[k] = float(v)
want = {"kvtier_optimizer_live_hit_ratio": r["live_hit_rate"],
        "kvtier_optimizer_lru_hit_ratio": r["lru_hit_rate"],
        "kvtier_optimizer_belady_hit_ratio": r["belady_hit_rate"]}
sys.exit(0 if all(abs(m.get(k, -1) - v) < 1e-6 for k, v in want.items()) else 1)
EOF
}
it_wait_until 30 metrics_match || it_fail "the metrics do not carry the optimizer's figures: $(grep '^kvtier_optimizer' "$it_dir/metrics.txt")"

"$KVTIER_BIN" status --coordinator "$KVTIER_COORDINATOR" --etcd "$KVTIER_ETCD" >"$it_dir/status.txt" ||
  it_fail "kvtier status failed"
grep '^optimizer' "$it_dir/status.txt"
record
/usr/bin/python3 - "$it_dir/record.json" "$it_dir/status.txt" "$it_dir/replay.txt" <<'EOF' || it_fail "the optimizer's figures do not agree"
import json, re, sys
r = json.load(open(sys.argv[1]))
st = open(sys.argv[2]).read()
rep = open(sys.argv[3]).read()
fail = []
m = re.search(r"^optimizer +live ([\d.]+)%, lru ([\d.]+)%, belady reference ([\d.]+)% at (\d+) blocks",
              st, re.M)
if not m:
    fail.append("kvtier status shows no optimizer figures")
else:
    for got, key in zip(m.groups()[:3], ("live_hit_rate", "lru_hit_rate", "belady_hit_rate")):
        if abs(float(got) - 100 * r[key]) > 0.006:
            fail.append("status %s %s%%, record %.4f" % (key, got, r[key]))
    if int(m.group(4)) != r["capacity_blocks"] or r["capacity_blocks"] != 2048:
        fail.append("capacity %s, record %d" % (m.group(4), r["capacity_blocks"]))
b = re.search(r"^blocks +(\d+) looked up, (\d+) hit", rep, re.M)
replay_rate = int(b.group(2)) / int(b.group(1))
if abs(r["live_hit_rate"] - replay_rate) > 0.005:
    fail.append("live %.4f, the replay's own %.4f" % (r["live_hit_rate"], replay_rate))
curve = r["curve"]
if any(b[0] <= a[0] or b[1] < a[1] - 1e-12 for a, b in zip(curve, curve[1:])):
    fail.append("the curve is not increasing: %s" % curve[:5])
if not any(c[0] == 2048 for c in curve):
    fail.append("the curve does not hold the capacity's point")
if not r.get("retrospective"):
    fail.append("the record is not labelled retrospective")
print("optimizer: live %.2f%% (replay %.2f%%), lru %.2f%%, belady reference %.2f%% at %d blocks, "
      "%d lookups in the window" % (100 * r["live_hit_rate"], 100 * replay_rate,
                                    100 * r["lru_hit_rate"], 100 * r["belady_hit_rate"],
                                    r["capacity_blocks"], r["window_requests"]))
if fail:
    print("\n".join(fail))
    sys.exit(1)
EOF
it_log "PASS"
