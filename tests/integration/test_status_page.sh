#!/usr/bin/env bash
# Issue 10 §3: the coordinator's status page `/` in a real browser. Headless
# Chromium (Debian's chromium, --no-sandbox as root, a private profile in the
# test dir, a timeout) loads it from a running deployment after a short replay:
# - before the optimizer has written anything the page says "no optimizer figures
#   yet"; a bad record in etcd is ignored (the page still says so, the coordinator
#   logs it once) and never crashes anything;
# - with a valid record, the DOM Chromium renders (--dump-dom) names every tier
#   with its fill (the figures ClusterInfo reports), shows the hit rate over time
#   and the optimizer's curve with the current capacity marked;
# - a screenshot is saved and is not blank (more than one distinct colour, decoded
#   with zlib: no PIL).
. "$(dirname "$0")/lib.sh"

it_write_deployment <<'JSON'
{"tiers": [{"name": "host0", "kind": "host", "capacity": 1024, "slot_size": "64KiB"},
           {"name": "host1", "kind": "host", "capacity": 512, "slot_size": "64KiB"}],
 "metrics": {"refresh": "500ms", "sample_interval": "1s"}}
JSON
it_start
coord=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["coordinator"]["metrics"])' \
  "$it_dir/deployment.json")
it_log "page at http://$coord/"

# two replays a few hit-rate samples apart (metrics.sample_interval 1s): the
# second finds the first's blocks, so the history has points
for i in 1 2; do
  rc=0
  it_cli replay "$it_trace" --requests 60 --no-progress >"$it_dir/replay.txt" || rc=$?
  [ $rc -eq 0 ] || it_fail "replay exited with status $rc: $(cat "$it_dir/replay.txt")"
  sleep 2.5
done

curl -s "http://$coord/" >"$it_dir/page0.html" || it_fail "GET /"
grep -q 'no optimizer figures yet' "$it_dir/page0.html" || it_fail "the page without optimizer figures"

# a bad record: ignored, logged once, the page unchanged
okey="/kvtier/$it_name/optimizer"
ETCDCTL_API=3 etcdctl --endpoints "$KVTIER_ETCD" put "$okey" '{"ts_ms":1,"live_hit_rate":7}' >/dev/null ||
  it_fail "etcdctl put"
it_wait_until 10 grep -q "optimizer's record is ignored" "$it_run/logs/coordinator.log" ||
  it_fail "a bad optimizer record was not reported"
sleep 1.5
[ "$(grep -c "optimizer's record is ignored" "$it_run/logs/coordinator.log")" = 1 ] ||
  it_fail "the bad record was logged more than once"
curl -s "http://$coord/" | grep -q 'no optimizer figures yet' || it_fail "a bad record was shown"

# a good one (the shape kvtier optimize --live writes)
now_ms=$(($(date +%s) * 1000))
ETCDCTL_API=3 etcdctl --endpoints "$KVTIER_ETCD" put "$okey" \
  "{\"ts_ms\":$now_ms,\"window_requests\":100,\"capacity_blocks\":1536,\"live_hit_rate\":0.21,\"lru_hit_rate\":0.2,\"belady_hit_rate\":0.3,\"curve\":[[0,0],[512,0.1],[1024,0.16],[1536,0.2],[2048,0.23]]}" \
  >/dev/null || it_fail "etcdctl put"
it_wait_until 10 bash -c "curl -s http://$coord/ | grep -q retrospective" ||
  it_fail "the optimizer's figures do not show"
it_wait_until 10 bash -c "curl -s http://$coord/metrics | grep -q '^kvtier_optimizer_live_hit_ratio 0.21'" ||
  it_fail "the optimizer gauges: $(curl -s "http://$coord/metrics" | grep optimizer)"

it_cli status >"$it_dir/status.txt" || it_fail "status failed"
chrome() {
  timeout 60 chromium --headless --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$it_dir/chrome" --window-size=1200,900 "$@" 2>>"$it_dir/chromium.log"
}
chrome --dump-dom "http://$coord/" >"$it_dir/dom.html" || it_fail "chromium --dump-dom failed: $(tail -5 "$it_dir/chromium.log")"
chrome --screenshot="$it_dir/page.png" "http://$coord/" >/dev/null ||
  it_fail "chromium --screenshot failed: $(tail -5 "$it_dir/chromium.log")"

/usr/bin/python3 - "$it_dir/dom.html" "$it_dir/status.txt" "$it_dir/page.png" <<'EOF' || it_fail "the page is wrong"
import re, struct, sys, zlib
dom, status, png = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
fail = []
# every tier of kvtier status, with its fill, in the rendered DOM
tiers = re.findall(r"^tier \d+ (\S+): kind (\S+), (\S+), endpoint \S+, fill (\d+)/(\d+) slots", status, re.M)
if len(tiers) != 2:
    fail.append("kvtier status lists %d tiers" % len(tiers))
for name, kind, state, used, cap in tiers:
    row = re.search(r'<tr class="tier" data-tier="%s">(.*?)</tr>' % re.escape(name), dom, re.S)
    if not row:
        fail.append("tier %s is not in the DOM" % name)
        continue
    r = row.group(1)
    fill = re.search(r'class="fill">(\d+) / (\d+) slots \(([\d.]+)%\)', r)
    if not fill or fill.group(2) != cap:
        fail.append("tier %s: fill %s, kvtier status says %s/%s" % (name, fill and fill.group(0), used, cap))
    if kind not in r:
        fail.append("tier %s: kind %s missing" % (name, kind))
    print("tier %s: %s" % (name, fill.group(0) if fill else "?"))
for what in ('id="history"', 'id="curve"', 'id="capacity"', "retrospective"):
    if what not in dom:
        fail.append("%s missing from the DOM" % what)
line = re.search(r'id="history-line"[^>]*points="([^"]*)"', dom)
if not line or not line.group(1).split():
    fail.append("the hit-rate history has no point")
# the screenshot: a PNG, decoded by hand, with more than one colour
data = open(png, "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n":
    fail.append("the screenshot is not a PNG")
else:
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if typ == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif typ == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype = hdr[0], hdr[1], hdr[2], hdr[3]
    bpp = {2: 3, 6: 4}.get(ctype, 0) * depth // 8
    raw = zlib.decompress(idat)
    colours, stride, prev = set(), w * bpp, bytearray(w * bpp)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        if y % 8 == 0:
            for x in range(0, w, 4):
                colours.add(bytes(line[x * bpp:x * bpp + 3]))
        prev = line
    print("screenshot %dx%d, %d distinct colours sampled" % (w, h, len(colours)))
    if len(colours) < 2:
        fail.append("the screenshot is blank (one colour)")
if fail:
    print("\n".join(fail))
    sys.exit(1)
EOF
it_no_crash
it_log "PASS"
