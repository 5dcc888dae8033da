#!/usr/bin/python3
"""Wire interop test: the bus wire format is real protobuf (DESIGN.md §5).

Run with Debian's /usr/bin/python3 (python3-protobuf). Steps:
  1. the C program (bus codec, nanopb) encodes messages to WORK/c_*.bin;
     this script decodes them with the protoc-generated Python classes and
     checks every field;
  2. this script encodes messages to WORK/py_*.bin; the C program decodes
     them and checks every field (exit status 1 on a mismatch).
Both directions must pass. Value rules (key(i), slot(i), checksum(i)) are
mirrored in interop_wire.c.
"""
import argparse
import os
import subprocess
import sys


def key(i):
    return bytes(((i * 131 + j * 7 + 1) & 0xFF) for j in range(16))


def slot(i):
    return 1000000007 * (i + 1)


def checksum(i):
    return 0xF00DFACE12345678 ^ (i << 56)


FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("interop Python check failed:", what, file=sys.stderr)


def parse(cls, path):
    msg = cls()
    with open(path, "rb") as f:
        msg.ParseFromString(f.read())
    return msg


def check_c_messages(work, pb):
    env_pb2, events_pb2, common_pb2, meta_pb2 = pb

    e = parse(env_pb2.Envelope, os.path.join(work, "c_lookup.bin"))
    check(e.WhichOneof("body") == "lookup_req", "c_lookup body %s" % e.WhichOneof("body"))
    check(e.corr_id == 0x0123456789ABCDEF, "c_lookup corr_id %x" % e.corr_id)
    check(e.sender == "c-client", "c_lookup sender %r" % e.sender)
    check(e.version == 1, "c_lookup version %d" % e.version)
    check(not e.HasField("status"), "c_lookup: a request carries no status")
    lk = e.lookup_req
    check(lk.instance_id == "llama-3-70b", "c_lookup instance %r" % lk.instance_id)
    check(lk.request_id == "req-7", "c_lookup request %r" % lk.request_id)
    check(lk.mode == meta_pb2.LOOKUP_MODE_REVERSE, "c_lookup mode %d" % lk.mode)
    check(lk.window == 4, "c_lookup window %d" % lk.window)
    check(list(lk.keys) == [key(i) for i in range(5)], "c_lookup keys")

    e = parse(env_pb2.Envelope, os.path.join(work, "c_put_header.bin"))
    check(e.WhichOneof("body") == "put_header_req", "c_put_header body")
    ph = e.put_header_req
    check(e.corr_id == 77, "c_put_header corr_id")
    check(ph.tier_id == 3, "c_put_header tier_id %d" % ph.tier_id)
    check(ph.instance_id == "llama-3-70b", "c_put_header instance")
    check(ph.state == common_pb2.LOCATION_SERVING, "c_put_header state %d" % ph.state)
    check(ph.ttl_deadline_ms == 1893456000000, "c_put_header deadline")
    check(list(ph.slots) == [slot(i) for i in range(5)], "c_put_header slots %s" % list(ph.slots))
    check(list(ph.keys) == [key(i + 10) for i in range(5)], "c_put_header keys")
    check(list(ph.sizes) == [2 << 20] * 5, "c_put_header sizes")
    check(list(ph.checksums) == [checksum(i) for i in range(5)],
          "c_put_header checksums %s" % [hex(c) for c in ph.checksums])

    e = parse(env_pb2.Envelope, os.path.join(work, "c_lookup_reply.bin"))
    check(e.WhichOneof("body") == "lookup_rep", "c_lookup_reply body")
    check(e.corr_id == 4242, "c_lookup_reply corr_id")
    check(e.status.code == common_pb2.STATUS_OK and e.status.message == "served",
          "c_lookup_reply status")
    r = e.lookup_rep
    check(r.hit_count == 3 and r.prefetch_advised, "c_lookup_reply scalars")
    check(list(r.hit) == [True, True, True, False, False], "c_lookup_reply hit %s" % list(r.hit))
    check(list(r.tier_ids) == [1, 2, 3, 0, 0], "c_lookup_reply tier_ids %s" % list(r.tier_ids))

    e = parse(env_pb2.Envelope, os.path.join(work, "c_prepare_put_reply.bin"))
    check(e.WhichOneof("body") == "prepare_put_rep", "c_prepare_put_reply body")
    t = e.prepare_put_rep.token
    check(e.prepare_put_rep.skipped == 2, "c_prepare_put_reply skipped")
    check(t.token_id == 99 and t.lease_ms == 30000, "c_prepare_put_reply token scalars")
    check(list(t.keys) == [key(i + 20) for i in range(3)], "c_prepare_put_reply token keys")
    check(t.payload == bytes((255 - i) for i in range(100)), "c_prepare_put_reply payload")

    e = parse(env_pb2.Envelope, os.path.join(work, "c_cluster_info.bin"))
    check(e.WhichOneof("body") == "cluster_info_rep", "c_cluster_info body")
    ci = e.cluster_info_rep
    check(ci.cluster == "demo" and ci.leader_endpoint == "tcp://10.0.0.1:7000"
          and ci.leader_epoch == 5, "c_cluster_info scalars")
    check(len(ci.tiers) == 2, "c_cluster_info tiers %d" % len(ci.tiers))
    for i, t in enumerate(ci.tiers):
        check(t.tier_id == i + 1 and t.name == "tier%d" % i, "tier %d id/name" % i)
        check(t.kind == (common_pb2.TIER_KIND_HOST if i == 0 else common_pb2.TIER_KIND_NVME),
              "tier %d kind" % i)
        check(t.endpoint == "tcp://10.0.0.%d:7100" % (i + 2), "tier %d endpoint" % i)
        check(t.capacity_slots == 1000 * (i + 1) and t.slot_bytes == 2 << 20
              and t.used_slots == 10 * (i + 1), "tier %d sizes" % i)

    b = parse(events_pb2.EventBatch, os.path.join(work, "c_events.bin"))
    check(b.source == "coord-b" and b.epoch == 6, "c_events header")
    kinds = [ev.WhichOneof("kind") for ev in b.events]
    check(kinds == ["cache_get", "block_stored", "block_removed", "block_moved",
                    "leader_changed"], "c_events kinds %s" % kinds)
    for i, ev in enumerate(b.events):
        check(ev.ts_us == 1700000000000000 + i, "event %d ts" % i)
        check(ev.instance_id == ("inst-%d" % i if i < 4 else ""), "event %d instance" % i)
        want = [key(30 + 4 * i + j) for j in range(4)] if i < 4 else []
        check(list(ev.keys) == want, "event %d keys" % i)
    if len(b.events) == 5:
        cg = b.events[0].cache_get
        check(cg.hit_count == 2 and cg.head_hits == 1 and cg.request_id == "req-7"
              and cg.mode == meta_pb2.LOOKUP_MODE_PER_KEY, "event cache_get")
        bs = b.events[1].block_stored
        check(bs.tier_id == 1 and bs.block_bytes == 2 << 20, "event block_stored")
        br = b.events[2].block_removed
        check(br.tier_id == 2 and br.reason == events_pb2.REMOVE_REASON_EVICTED,
              "event block_removed")
        bm = b.events[3].block_moved
        check(bm.src_tier_id == 1 and bm.dst_tier_id == 2, "event block_moved")
        lc = b.events[4].leader_changed
        check(lc.node_id == "coord-b" and lc.endpoint == "tcp://10.0.0.9:7000"
              and lc.epoch == 6, "event leader_changed")


def write(work, name, msg):
    with open(os.path.join(work, name), "wb") as f:
        f.write(msg.SerializeToString())


def encode_py_messages(work, pb):
    env_pb2, events_pb2, common_pb2, meta_pb2 = pb

    e = env_pb2.Envelope(corr_id=31337, sender="py-sched", version=1)
    e.status.code = common_pb2.STATUS_OK
    e.status.message = "all good"
    e.lookup_rep.hit_count = 4
    e.lookup_rep.prefetch_advised = True
    e.lookup_rep.hit.extend([i % 2 == 0 for i in range(6)])
    e.lookup_rep.tier_ids.extend([(300 + i) if i % 2 == 0 else 0 for i in range(6)])
    write(work, "py_lookup_reply.bin", e)

    e = env_pb2.Envelope(corr_id=1, sender="py-worker", version=1)
    w = e.write_slots_req
    w.tier_id = 2
    w.segments = 2
    w.slots.extend([slot(i) for i in range(3)])
    w.sizes.extend([4096 * (i + 1) for i in range(6)])
    write(work, "py_write_slots.bin", e)

    e = env_pb2.Envelope(corr_id=2, sender="py-client", version=1)
    c = e.complete_put_req
    c.instance_id = "inst-py"
    c.request_id = "req-py"
    c.job_id = 0xFFFFFFFFFFFF
    c.token_id = 12
    c.success.extend([i != 1 for i in range(5)])
    c.checksums.extend([checksum(i) for i in range(5)])
    write(work, "py_complete_put.bin", e)

    e = env_pb2.Envelope(corr_id=5, sender="py-standby", version=1,
                         leader_endpoint="tcp://10.0.0.3:7000")
    e.status.code = common_pb2.STATUS_NOT_LEADER
    e.status.message = "not the leader"
    write(work, "py_not_leader.bin", e)

    e = env_pb2.Envelope(corr_id=6, sender="py-sched", version=1)
    e.status.code = common_pb2.STATUS_OK
    t = e.prepare_get_rep.token
    t.token_id = 555
    t.lease_ms = 30000
    t.keys.extend([key(40 + i) for i in range(4)])
    t.payload = bytes(((i * 3) & 0xFF) for i in range(200))
    write(work, "py_prepare_get_reply.bin", e)

    b = events_pb2.EventBatch(source="py-coord", epoch=3)
    ev = b.events.add(ts_us=1700000000123456, instance_id="inst-py")
    ev.keys.extend([key(50 + i) for i in range(3)])
    ev.block_stored.tier_id = 1
    ev.block_stored.block_bytes = 65536
    ev = b.events.add(ts_us=1700000000123457, instance_id="inst-py")
    ev.keys.append(key(60))
    ev.block_removed.reason = events_pb2.REMOVE_REASON_GC
    write(work, "py_events.bin", b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--c-prog", required=True)
    ap.add_argument("--py-gen", required=True, help="directory of protoc --python_out")
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    sys.path.insert(0, args.py_gen)
    import common_pb2
    import envelope_pb2
    import events_pb2
    import meta_pb2
    pb = (envelope_pb2, events_pb2, common_pb2, meta_pb2)

    os.makedirs(args.work, exist_ok=True)
    for name in os.listdir(args.work):
        if name.endswith(".bin"):
            os.unlink(os.path.join(args.work, name))

    subprocess.run([args.c_prog, "encode", args.work], check=True)
    check_c_messages(args.work, pb)
    c_to_py = not FAILURES
    print("C -> Python: %s" % ("ok" if c_to_py else "FAILED"))

    encode_py_messages(args.work, pb)
    res = subprocess.run([args.c_prog, "check", args.work])
    py_to_c = res.returncode == 0
    print("Python -> C: %s" % ("ok" if py_to_c else "FAILED"))
    return 0 if (c_to_py and py_to_c) else 1


if __name__ == "__main__":
    sys.exit(main())
