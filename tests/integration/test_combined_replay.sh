#!/usr/bin/env bash
# issue 13 §2 (an engine request in two round trips): `kvtier replay --combined` runs
# each request as kvt_prepare (lookup, pins, reservations in one call) and
# kvt_complete, against real processes. The same 60 requests (fewer blocks than the
# tier holds) replayed cold and then warm: every request succeeds, every load is
# byte-exact, the warm pass hits everything and stores nothing, and each
# request costs exactly 4 meta round trips (request begin, prepare, complete, request
# end: the report's "meta calls" line, counted by libkvtier), where the five-call path
# costs more. And the Python binding's prepare() / complete() store and read back
# blocks through the token's halves.
. "$(dirname "$0")/lib.sh"

it_deployment 2048 64KiB
it_start

replay() { # replay OUT N [ARGS...]
  local out=$1 n=$2
  shift 2
  it_cli replay "$it_trace" --requests "$n" --in-flight 2 --no-progress "$@" >"$out" 2>&1 ||
    { cat "$out"; it_fail "replay $* exited with status $?"; }
  grep -q "^requests  *$n replayed, 0 failed\$" "$out" || { cat "$out"; it_fail "failed requests: $*"; }
  [ "$(it_replay_field "$out" 5)" = 0 ] || { cat "$out"; it_fail "verify failures: $*"; }
}
trips() { sed -n 's/^meta calls  *\([0-9.]*\) round trips per request.*$/\1/p' "$1"; }

replay "$it_dir/cold.txt" 60 --combined
replay "$it_dir/warm.txt" 60 --combined
hit=$(it_replay_field "$it_dir/warm.txt" 2)
[ "$hit" = 100.0 ] || { cat "$it_dir/warm.txt"; it_fail "the warm combined pass hit $hit%, not all"; }
grep -q '^blocks .*, 0 stored, 0 already stored$' "$it_dir/warm.txt" ||
  { cat "$it_dir/warm.txt"; it_fail "the warm pass stored blocks again"; }
for f in cold warm; do
  [ "$(trips "$it_dir/$f.txt")" = 4.00 ] ||
    { cat "$it_dir/$f.txt"; it_fail "$f: $(trips "$it_dir/$f.txt") meta round trips per request, not 4"; }
done
replay "$it_dir/separate.txt" 60 --offset 60
sep=$(trips "$it_dir/separate.txt")
awk -v s="$sep" 'BEGIN { exit !(s > 4) }' || it_fail "the five-call path cost $sep round trips per request"
it_log "combined: $(trips "$it_dir/cold.txt") round trips per request cold, $(trips "$it_dir/warm.txt") warm (hit rate $hit%); separate: $sep"

# the binding: a request's hits and misses through prepare() / complete()
KVTIER_COORDINATOR=$KVTIER_COORDINATOR it_python - <<'PY' || it_fail "the Python binding's prepare / complete"
import os, sys
sys.path.insert(0, os.path.join(os.environ["KVT_SOURCE_DIR"], "client", "python"))
import kvtier
B = 64 * 1024
keys = kvtier.block_keys(range(16 * 6), 16)
blocks = [bytes([i + 1]) * B for i in range(6)]
with kvtier.Client(coordinators=os.environ["KVTIER_COORDINATOR"], name="py-combined") as c:
    c.register_instance("py-gp", 16, B)
    c.request_begin("py-gp", "w")
    t = c.prepare("py-gp", "w", keys[:4])
    assert (t.hit_count, t.get.count, t.put.count) == (0, 0, 4), (t.hit_count, t.put.count)
    c.submit_put(1, t.put, blocks[:4], B)
    assert c.wait([1])[0].ok
    trips = c.meta_round_trips
    r = c.complete(t)
    assert r == {"released": 0, "committed": 4, "failed": 0}, r
    t = c.prepare("py-gp", "w", keys)
    assert (t.hit_count, t.get.count, t.put.count) == (4, 4, 2)
    assert c.meta_round_trips - trips == 2
    out = [bytearray(B) for _ in range(4)]
    c.submit_get(2, t.get, out, B)
    c.submit_put(3, t.put, blocks[4:], B)
    assert all(r.ok for r in c.wait([2, 3]))
    assert [bytes(o) for o in out] == blocks[:4]
    r = c.complete(t)
    assert r == {"released": 4, "committed": 2, "failed": 0}, r
    assert t.get.count == 0  # the halves went with the token
    c.request_end("py-gp", "w")
    print("python: prepare / complete ok")
PY
it_no_crash
it_log "PASS"
