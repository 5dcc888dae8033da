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
# - a malformed replay request gets an ERROR;
# - a subscriber that starts late converges: a SNAPSHOT taken while the replay
#   runs, then REPLAY from the sequence it names, gives the same blocks;
# - the vLLM stream (msgpack KVEventBatch, Debian's python3-msgpack) rebuilds
#   the same set of block hashes; its sequences have no gap; its replay socket
#   answers in vLLM's framing and a malformed request gets the end marker.
. "$(dirname "$0")/lib.sh"

it_deployment 2048 64KiB
it_start

it_client() {
  KVTIER_COORDINATOR=$KVTIER_COORDINATOR it_python "$KVT_SOURCE_DIR/tests/integration/it_client.py" "$@"
}

read -r ev_ep replay_ep vllm_ep vllm_replay_ep < <(/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["events"]
print(d["endpoint"], d["replay_endpoint"], d["vllm_endpoint"], d["vllm_replay_endpoint"])' \
  "$it_dir/deployment.json")
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
  "$vllm_ep" "$vllm_replay_ep" >"$it_dir/subscriber.log" 2>&1 <<'EOF' &
import json, os, sys, time
import msgpack, zmq
ev_ep, replay_ep, pb, stop, out, vllm_ep, vllm_replay_ep = sys.argv[1:]
sys.path.insert(0, pb)
import events_pb2

def seq(f):
    assert len(f) == 8, "sequence frame of %d bytes" % len(f)
    return int.from_bytes(f, "big")

ctx = zmq.Context()
sub = ctx.socket(zmq.SUB)
sub.setsockopt(zmq.SUBSCRIBE, b"")
sub.connect(ev_ep)
vsub = ctx.socket(zmq.SUB)
vsub.setsockopt(zmq.SUBSCRIBE, b"")
vsub.connect(vllm_ep)
poller = zmq.Poller()
poller.register(sub, zmq.POLLIN)
poller.register(vsub, zmq.POLLIN)

def snapshot():
    # the late subscriber: the index now and the sequence it reflects
    d = ctx.socket(zmq.DEALER)
    d.connect(replay_ep)
    d.send_multipart([b"SNAPSHOT"])
    assert d.poll(10000), "snapshot: no answer within 10 s"
    head = d.recv_multipart()
    assert head[0] == b"SNAPSHOT", head
    at, count, blocks = seq(head[1]), seq(head[2]), set()
    while True:
        assert d.poll(10000), "snapshot: stalled"
        m = d.recv_multipart()
        if m[0] == b"END":
            assert seq(m[1]) == at + 1, (seq(m[1]), at)
            break
        assert m[0] == b"BLOCKS", m[:1]
        b = events_pb2.EventBatch()
        b.ParseFromString(m[1])
        for e in b.events:
            assert e.WhichOneof("kind") == "block_stored"
            for key in e.keys:
                blocks.add((e.instance_id, key, e.block_stored.tier_id))
    assert len(blocks) == count, (len(blocks), count)
    d.close()
    return at, blocks

open(stop + ".ready", "w").close()
live, vlive, snap = [], [], None
while not os.path.exists(stop) or sub.poll(300) or vsub.poll(100):
    ready = dict(poller.poll(100))
    if sub in ready:
        live.append(sub.recv_multipart())
    if vsub in ready:
        vlive.append(vsub.recv_multipart())
    if snap is None and len(live) >= 40:
        snap = snapshot()
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
# the vLLM replay socket, in vLLM's framing: [""][from_seq] -> [""][seq][payload]..., [""][-1][""]
vd = ctx.socket(zmq.DEALER)
vd.connect(vllm_replay_ep)
vd.send_multipart([b"", (0).to_bytes(8, "big")])
vreplayed = []
while True:
    if not vd.poll(10000):
        raise SystemExit("vllm replay: no answer within 10 s")
    m = vd.recv_multipart()
    assert len(m) == 3 and m[0] == b"", m[:2]
    if m[1] == b"\xff" * 8:
        assert m[2] == b"", m[2]
        break
    vreplayed.append(m[1:])
vd.send_multipart([b"", b"short"])
vbad = vd.recv_multipart() if vd.poll(10000) else [b"", b"", b"(none)"]

res = {"live": len(live), "replayed": len(replayed), "end": end, "gap": gap,
       "bad_reply": bad[0].decode(), "errors": [], "vllm_live": len(vlive),
       "vllm_replayed": len(vreplayed),
       "vllm_bad": [vbad[1] == b"\xff" * 8, vbad[2].decode(errors="replace")]}
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
# the late subscriber: its snapshot, then the batches after it, give the same blocks
if snap is None:
    err("no snapshot was taken (fewer than 40 live batches)")
else:
    at, sblocks = snap
    for topic, s, payload in replayed:
        if seq(s) <= at:
            continue
        b = events_pb2.EventBatch()
        b.ParseFromString(payload)
        for e in b.events:
            k = e.WhichOneof("kind")
            for key in e.keys:
                if k == "block_stored":
                    sblocks.add((e.instance_id, key, e.block_stored.tier_id))
                elif k == "block_removed":
                    sblocks.discard((e.instance_id, key, e.block_removed.tier_id))
                elif k == "block_moved":
                    sblocks.discard((e.instance_id, key, e.block_moved.src_tier_id))
                    sblocks.add((e.instance_id, key, e.block_moved.dst_tier_id))
            if k == "tier_changed" and not e.tier_changed.up:
                sblocks = {x for x in sblocks if x[2] != e.tier_changed.tier_id}
    res["snapshot_at"] = at
    if sblocks != blocks:
        err("snapshot at %d + replay: %d blocks, the whole history: %d" %
            (at, len(sblocks), len(blocks)))
# the vLLM stream: the hashes it stores and removes, per medium
vblocks, vtypes, last = set(), {}, 0
vby_seq = {seq(m[0]): m[1] for m in vreplayed}
for topic, s, payload in vlive:
    if vby_seq.get(seq(s)) != payload:
        err("vllm: live batch %d is not in the replay as it is" % seq(s))
for s, payload in vreplayed:
    if last and seq(s) != last + 1:
        err("vllm: gap %d -> %d" % (last, seq(s)))
    last = seq(s)
    b = msgpack.unpackb(payload, raw=False)
    if set(b) != {"ts", "events"} or not isinstance(b["ts"], float):
        err("vllm: a batch with keys %s" % sorted(b))
    for e in b["events"]:
        t = e["type"]
        vtypes[t] = vtypes.get(t, 0) + 1
        if t == "BlockStored":
            want = ["type", "block_hashes", "parent_block_hash", "token_ids", "block_size",
                    "lora_id", "medium", "lora_name"]
            if list(e) != want:
                err("vllm: BlockStored fields %s" % list(e))
            if e["block_size"] <= 0 or e["medium"] != "CPU":
                err("vllm: block_size %s medium %s" % (e["block_size"], e["medium"]))
            for h in e["block_hashes"]:
                vblocks.add((h, e["medium"]))
        elif t == "BlockRemoved":
            for h in e["block_hashes"]:
                vblocks.discard((h, e["medium"]))
        elif t == "AllBlocksCleared":
            vblocks = set()
if {(k, "CPU") for (_, k, _) in blocks} != vblocks:
    err("vllm: rebuilt %d hashes, the protobuf stream %d" % (len(vblocks), len(blocks)))
if not vreplayed or "AllBlocksCleared" not in vtypes:
    err("vllm: the replay does not start with the term's AllBlocksCleared: %s" % vtypes)
res["vllm_types"] = vtypes
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
if not ev["vllm_bad"][0] or "8-byte" not in ev["vllm_bad"][1]:
    fail.append("a malformed vLLM replay request got %s" % ev["vllm_bad"])
if ev["vllm_live"] == 0 or "BlockStored" not in ev["vllm_types"]:
    fail.append("the vLLM stream carried no BlockStored: %s" % ev["vllm_types"])
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
print("events: %d batches (%s), %d blocks rebuilt, %d lookups; snapshot at seq %s; "
      "vLLM: %d batches %s" % (ev["replayed"], ev["kinds"], ev["blocks"], ev["lookups"],
                              ev.get("snapshot_at"), ev["vllm_live"], ev["vllm_types"]))
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
grep -q '^events: 1 batches, 0 gaps (0 missing), 0 terms lost$' "$it_dir/cli-events.err" ||
  it_fail "kvtier events summary: $(cat "$it_dir/cli-events.err")"
# --snapshot: the index now (the put's block among it), then what follows; --from 0:
# the whole ring from the leader's first batch; --record writes the same lines
it_cli events --snapshot --for 1500 >"$it_dir/cli-snap.txt" 2>"$it_dir/cli-snap.err" ||
  it_fail "kvtier events --snapshot failed: $(cat "$it_dir/cli-snap.err")"
it_cli events --from 0 --for 1500 --record "$it_dir/cli-from.jsonl" 2>"$it_dir/cli-from.err" ||
  it_fail "kvtier events --from failed: $(cat "$it_dir/cli-from.err")"
/usr/bin/python3 - "$it_dir/cli-snap.txt" "$it_dir/cli-from.jsonl" "$it_dir/stats.json" <<'EOF' ||
import json, sys
snap = [json.loads(l) for l in open(sys.argv[1])]
frm = [json.loads(l) for l in open(sys.argv[2])]
st = json.load(open(sys.argv[3]))
s = [l for l in snap if l.get("snapshot")]
keys = {k for l in s for k in l["keys"]}
assert "00112233445566778899aabbccddeeff" in keys, "the put's block is not in the snapshot"
assert all(l["kind"] == "stored" for l in s), "a snapshot line that is not stored"
assert frm and frm[0]["kind"] == "leader", frm[:1]
assert sum(1 for l in frm if l["kind"] == "lookup") >= st["lookups"], "--from 0 lost lookups"
print("snapshot: %d blocks; --from 0: %d events" % (len(keys), len(frm)))
EOF
  it_fail "kvtier events --snapshot / --from printed the wrong events"
# token ids and the parent key given at put (the Python binding's prepare_put)
# reach the vLLM stream's BlockStored as token_ids and parent_block_hash
KVTIER_COORDINATOR=$KVTIER_COORDINATOR it_python - "$vllm_ep" <<'EOF' ||
import os, sys, time
import msgpack, zmq
sys.path.insert(0, os.path.join(os.environ["KVT_SOURCE_DIR"], "client", "python"))
import kvtier
ctx = zmq.Context()
sub = ctx.socket(zmq.SUB)
sub.setsockopt(zmq.SUBSCRIBE, b"")
sub.connect(sys.argv[1])
time.sleep(0.5)  # the subscription reaches the XPUB
c = kvtier.Client(coordinators=os.environ["KVTIER_COORDINATOR"], name="tok", timeout_ms=5000)
c.register_instance("tok", 4, 64 << 10)
parent, keys = b"\x11" * 16, [b"\x21" * 16, b"\x22" * 16]
tokens = [101, 102, 103, 104, 201, 202, 203, 70000]
c.request_begin("tok", "tok-1")
try:
    c.prepare_put("tok", "tok-x", keys, parent=parent, token_ids=tokens[:7])
    sys.exit("7 token ids for 2 blocks of 4 were accepted")
except kvtier.KvtError as e:
    assert e.status == "INVALID_ARGUMENT", e
tok = c.prepare_put("tok", "tok-1", keys, parent=parent, token_ids=tokens)
c.submit_put(1, tok, [b"\x00" * (64 << 10)] * tok.count, 64 << 10)
assert c.wait([1], 10000)[0].ok
c.complete_put(tok)
c.request_end("tok", "tok-1")
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    if not sub.poll(500):
        continue
    topic, seq, payload = sub.recv_multipart()
    for e in msgpack.unpackb(payload, raw=False)["events"]:
        if e["type"] == "BlockStored" and e["block_hashes"] == keys:
            assert e["token_ids"] == tokens, e["token_ids"]
            assert e["parent_block_hash"] == parent, e["parent_block_hash"]
            assert e["block_size"] == 4, e["block_size"]
            print("vLLM BlockStored: token_ids %s, parent %s" % (e["token_ids"], e["parent_block_hash"].hex()))
            sys.exit(0)
sys.exit("no BlockStored of the put with its token ids on the vLLM stream")
EOF
  it_fail "token ids given at put did not reach the vLLM stream"

rc=0
it_cli events --from 1 --snapshot >/dev/null 2>&1 || rc=$?
[ $rc -eq 2 ] || it_fail "--from with --snapshot exited $rc, not 2 (usage)"
rc=0
it_cli events --record "$it_dir/x.jsonl" --summary >/dev/null 2>&1 || rc=$?
[ $rc -eq 2 ] || it_fail "--record with --summary exited $rc, not 2 (usage)"
it_log "PASS"
