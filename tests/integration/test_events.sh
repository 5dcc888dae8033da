#!/usr/bin/env bash
# docs/EVENTS.md, DESIGN.md §13: the leader's event socket. A subscriber
# (Debian's python3-zmq, python3-protobuf, classes from schemas/ by protoc) listens
# while `kvtier replay` runs, then asks the replay socket for everything from
# sequence 0 and rebuilds the index from the events; checks:
# - framing: [topic][8-byte big-endian sequence][EventBatch], topics by kind (and
#   instance), sequences strictly increasing, epoch in the high bits, no gap;
# - the replay socket resends the batches the subscriber saw, byte for byte, from
#   the leader's first batch (LeaderChanged) on, then END with the next sequence;
# - the blocks rebuilt from stored / removed / moved events are as many as the
#   scheduler holds (blocks - deleting), no block is removed where it was not
#   stored, and lookups are reported (one CacheGet per lookup);
# - a malformed replay request gets an ERROR.
. "$(dirname "$0")/lib.sh"

it_deployment 2048 64KiB
it_start

it_client() {
  KVTIER_COORDINATOR=$KVTIER_COORDINATOR it_python "$KVT_SOURCE_DIR/tests/integration/it_client.py" "$@"
}

read -r ev_ep replay_ep < <(/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["events"]
print(d["endpoint"], d["replay_endpoint"])' "$it_dir/deployment.json")
it_log "events on $ev_ep, replay on $replay_ep"
it_cli status >"$it_dir/status.txt" || it_fail "status failed"
grep -q "^events  *$ev_ep\$" "$it_dir/status.txt" ||
  it_fail "status does not show the event endpoint: $(grep '^events' "$it_dir/status.txt")"

pb="$it_dir/pb"
mkdir -p "$pb"
protoc -I"$KVT_SOURCE_DIR/schemas" --python_out="$pb" \
  "$KVT_SOURCE_DIR"/schemas/{common,meta,tier,internal,events,envelope}.proto ||
  it_fail "protoc failed"

# the subscriber: SUB to everything until told to stop (a file), then REPLAY from 0
/usr/bin/python3 - "$ev_ep" "$replay_ep" "$pb" "$it_dir/stop" "$it_dir/events.json" \
  >"$it_dir/subscriber.log" 2>&1 <<'EOF' &
import json, os, sys, time
import zmq
ev_ep, replay_ep, pb, stop, out = sys.argv[1:]
sys.path.insert(0, pb)
import events_pb2

ctx = zmq.Context()
sub = ctx.socket(zmq.SUB)
sub.setsockopt(zmq.SUBSCRIBE, b"")
sub.connect(ev_ep)
open(stop + ".ready", "w").close()
live = []
while not os.path.exists(stop) or sub.poll(300):
    if sub.poll(100):
        live.append(sub.recv_multipart())
def seq(f):
    assert len(f) == 8, "sequence frame of %d bytes" % len(f)
    return int.from_bytes(f, "big")
# replay everything from 0
d = ctx.socket(zmq.DEALER)
d.connect(replay_ep)
d.send_multipart([b"REPLAY", (0).to_bytes(8, "big")])
replayed, end, gap = [], None, None
while end is None:
    if not d.poll(10000):
        raise SystemExit("replay: no answer within 10 s")
    m = d.recv_multipart()
    if m[0] == b"BATCH":
        replayed.append(m[1:])
    elif m[0] == b"GAP":
        gap = seq(m[1])
    elif m[0] == b"END":
        end = seq(m[1])
    else:
        raise SystemExit("replay: unexpected %r" % m[:1])
d.send_multipart([b"REPLAY", b"short"])
bad = d.recv_multipart() if d.poll(10000) else [b"(none)"]

res = {"live": len(live), "replayed": len(replayed), "end": end, "gap": gap,
       "bad_reply": bad[0].decode(), "errors": []}
def err(msg):
    res["errors"].append(msg)
# framing and sequences
for name, msgs in (("live", live), ("replayed", replayed)):
    last = 0
    for m in msgs:
        if len(m) != 3:
            err("%s: a message of %d frames" % (name, len(m)))
            continue
        s = seq(m[1])
        if s <= last:
            err("%s: sequence %d after %d" % (name, s, last))
        if last and s != last + 1:
            err("%s: gap %d -> %d" % (name, last, s))
        last = s
by_seq = {seq(m[1]): m for m in replayed}
for m in live:
    if seq(m[1]) in by_seq and by_seq[seq(m[1])] != m:
        err("replayed batch %d differs from the live one" % seq(m[1]))
if replayed and end != seq(replayed[-1][1]) + 1:
    err("END %s, last replayed %d" % (end, seq(replayed[-1][1])))
# rebuild the index from the whole history
blocks, lookups, hits, kinds, reasons = set(), 0, 0, {}, {}
epoch = None
for i, (topic, s, payload) in enumerate(replayed):
    b = events_pb2.EventBatch()
    b.ParseFromString(payload)
    t = topic.decode()
    kind = t.split("/")[0]
    kinds[kind] = kinds.get(kind, 0) + 1
    if epoch is None:
        epoch = b.epoch
    if seq(s) >> 40 != b.epoch:
        err("sequence %d: epoch %d in its high bits, batch says %d" % (seq(s), seq(s) >> 40, b.epoch))
    if i == 0 and not (kind == "leader" and b.events[0].WhichOneof("kind") == "leader_changed"):
        err("the first batch is %s, not LeaderChanged" % t)
    for e in b.events:
        k = e.WhichOneof("kind")
        if kind in ("stored", "removed", "moved", "lookup") and t != kind + "/" + e.instance_id:
            err("topic %s for an event of instance %s" % (t, e.instance_id))
        for key in e.keys:
            if len(key) != 16:
                err("a key of %d bytes" % len(key))
        if k == "block_stored":
            for key in e.keys:
                blocks.add((e.instance_id, key, e.block_stored.tier_id))
        elif k == "block_removed":
            r = events_pb2.RemoveReason.Name(e.block_removed.reason)
            reasons[r] = reasons.get(r, 0) + len(e.keys)
            for key in e.keys:
                if (e.instance_id, key, e.block_removed.tier_id) not in blocks:
                    err("batch %d: %s removed from tier %d where it was not stored" %
                        (seq(s), key.hex(), e.block_removed.tier_id))
                blocks.discard((e.instance_id, key, e.block_removed.tier_id))
        elif k == "block_moved":
            for key in e.keys:
                blocks.discard((e.instance_id, key, e.block_moved.src_tier_id))
                blocks.add((e.instance_id, key, e.block_moved.dst_tier_id))
        elif k == "tier_changed" and not e.tier_changed.up:
            blocks = {x for x in blocks if x[2] != e.tier_changed.tier_id}
        elif k == "cache_get":
            lookups += 1
            hits += e.cache_get.hit_count
            if e.cache_get.key_count != len(e.keys):
                err("CacheGet key_count %d, %d keys" % (e.cache_get.key_count, len(e.keys)))
res.update({"blocks": len(blocks), "lookups": lookups, "hits": hits, "kinds": kinds,
            "removed_keys": reasons,
            "epoch": epoch})
json.dump(res, open(out, "w"), sort_keys=True)
print(json.dumps(res, sort_keys=True))
EOF
sub_pid=$!
deadline=$((SECONDS + 30))
until [ -f "$it_dir/stop.ready" ]; do
  [ $SECONDS -lt $deadline ] || it_fail "the subscriber did not start"
  sleep 0.1
done
sleep 0.5 # the SUB's subscription reaches the XPUB (ZeroMQ's slow joiner)

rc=0
it_cli replay "$it_trace" --requests 100 --no-progress >"$it_dir/replay.txt" || rc=$?
cat "$it_dir/replay.txt"
[ $rc -eq 0 ] || it_fail "replay exited with status $rc"
sleep 0.5 # the last tick's batches
it_client stats >"$it_dir/stats.json" || it_fail "stats failed"
touch "$it_dir/stop"
wait $sub_pid || it_fail "the subscriber failed: $(cat "$it_dir/subscriber.log")"
cat "$it_dir/subscriber.log"

/usr/bin/python3 - "$it_dir/events.json" "$it_dir/stats.json" "$it_dir/replay.txt" <<'EOF' ||
import json, re, sys
ev = json.load(open(sys.argv[1]))
st = json.load(open(sys.argv[2]))
rep = open(sys.argv[3]).read()
fail = list(ev["errors"])
if ev["live"] == 0:
    fail.append("the subscriber saw no batch")
if ev["gap"] is not None:
    fail.append("replay from 0 reported a gap at %s" % ev["gap"])
if ev["bad_reply"] != "ERROR":
    fail.append("a malformed replay request got %s" % ev["bad_reply"])
live_blocks = st["blocks"] - st["deleting"]
if ev["blocks"] != live_blocks:
    fail.append("rebuilt %d blocks, the scheduler holds %d (blocks %d, deleting %d)" %
                (ev["blocks"], live_blocks, st["blocks"], st["deleting"]))
if ev["lookups"] != st["lookups"]:
    fail.append("%d lookup events, the scheduler counted %d lookups" % (ev["lookups"], st["lookups"]))
m = re.search(r"(\d+) looked up, (\d+) hit", rep)
if ev["lookups"] == 0 or not m:
    fail.append("no lookups reported")
if st["events_dropped"] != 0:
    fail.append("the scheduler dropped %d batches" % st["events_dropped"])
if ev["replayed"] != st["events_batches"]:
    fail.append("replayed %d batches, the scheduler handed over %d" %
                (ev["replayed"], st["events_batches"]))
for k in ("leader", "tier", "stored", "lookup"):
    if k not in ev["kinds"]:
        fail.append("no %s batch" % k)
print("events: %d batches (%s), %d blocks rebuilt, %d lookups" %
      (ev["replayed"], ev["kinds"], ev["blocks"], ev["lookups"]))
if fail:
    print("\n".join(fail))
    sys.exit(1)
EOF
  it_fail "the events do not match the service"

# kvtier events: the leader's endpoint from cluster info, one JSON line per event
it_cli events --for 5000 --count 1 --topic stored/ >"$it_dir/cli-events.txt" 2>"$it_dir/cli-events.err" &
cli_pid=$!
sleep 0.5 # its subscription reaches the publisher
it_cli put --key 00112233445566778899aabbccddeeff --pattern >/dev/null || it_fail "put failed"
wait $cli_pid || it_fail "kvtier events failed: $(cat "$it_dir/cli-events.err")"
/usr/bin/python3 - "$it_dir/cli-events.txt" <<'EOF' || it_fail "kvtier events printed: $(cat "$it_dir/cli-events.txt")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert lines and all(l["kind"] == "stored" for l in lines), lines
assert any("00112233445566778899aabbccddeeff" in l["keys"] for l in lines), lines
EOF
grep -q '^events: 1 batches, 0 gaps (0 missing)$' "$it_dir/cli-events.err" ||
  it_fail "kvtier events summary: $(cat "$it_dir/cli-events.err")"
it_log "PASS"
