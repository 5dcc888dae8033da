#!/usr/bin/env bash
# Issue 10 §5: a slow subscriber does not slow the service and sees a gap, not
# silence. A deployment with events.subscriber_queue 16 (the XPUB's per-subscriber
# queue). Through the Python binding, 120 lookups of 16,384 keys each (every one
# a CacheGet event of 256 KiB) run twice: alone, then with a subscriber that
# does not read (receive queue 1 message, socket buffer 4 KiB) until the lookups
# are done. Checked by behaviour, never by timing:
# - every lookup completes within its own timeout (the binding raises otherwise);
# - the scheduler handed every batch to the publisher (events_dropped stays 0:
#   the publisher never waited on the subscriber, the scheduler never on it);
# - the slow subscriber then reads what its queues held, and the batches of
#   later lookups (not silence), and their sequences jump: it sees the gap where
#   the XPUB dropped for it.
# Both lookup rates are printed (reported, not asserted).
. "$(dirname "$0")/lib.sh"

it_deployment 256 64KiB
/usr/bin/python3 - "$it_dir/deployment.json" <<'EOF' || it_fail "cannot edit the deployment"
import json, sys
d = json.load(open(sys.argv[1]))
d["events"]["subscriber_queue"] = 16
d["coordinator"]["max_batch"] = 16384
json.dump(d, open(sys.argv[1], "w"), indent=2)
EOF
it_start
ev_ep=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["events"]["endpoint"])' \
  "$it_dir/deployment.json")

KVTIER_COORDINATOR=$KVTIER_COORDINATOR it_python - "$ev_ep" >"$it_dir/slow.json" 2>"$it_dir/slow.err" <<'EOF' ||
import hashlib, json, os, sys, time
import zmq
sys.path.insert(0, os.path.join(os.environ["KVT_SOURCE_DIR"], "client", "python"))
import kvtier

ev_ep = sys.argv[1]
N, KEYS = 120, 16384
N_AFTER = 3
c = kvtier.Client(coordinators=os.environ["KVTIER_COORDINATOR"], name="slow-sub", timeout_ms=5000)
c.register_instance("slow", 16, 64 << 10)

def stats():
    return c.stats()

def lookups(tag, n=N):
    t0 = time.monotonic()
    for i in range(n):
        buf = hashlib.shake_128(b"%s/%d" % (tag, i)).digest(16 * KEYS)
        keys = [buf[k * 16:(k + 1) * 16] for k in range(KEYS)]
        c.lookup("slow", keys, mode="prefix")  # raises on a timeout or an error
    return n / (time.monotonic() - t0)

before = stats()
alone = lookups(b"alone")
ctx = zmq.Context()
sub = ctx.socket(zmq.SUB)
sub.setsockopt(zmq.RCVHWM, 1)
sub.setsockopt(zmq.RCVBUF, 4096)
sub.setsockopt(zmq.SUBSCRIBE, b"")
sub.connect(ev_ep)
time.sleep(1.0)  # the subscription reaches the XPUB (ZeroMQ's slow joiner)
with_slow = lookups(b"slow")
time.sleep(0.5)  # the last tick's batches
after = stats()
seqs = []
def drain(wait_ms):
    while sub.poll(wait_ms):
        topic, seq, payload = sub.recv_multipart()
        seqs.append(int.from_bytes(seq, "big"))
drain(500)  # what its queues held
lookups(b"after", N_AFTER)  # the batches after the drop reach it: the jump shows
drain(2000)
gaps = sum(1 for a, b in zip(seqs, seqs[1:]) if b > a + 1)
missing = sum(b - a - 1 for a, b in zip(seqs, seqs[1:]) if b > a + 1)
print(json.dumps({"alone_lookups_s": alone, "with_slow_lookups_s": with_slow,
                  "handed": after["events_batches"] - before["events_batches"],
                  "dropped": after["events_dropped"] - before["events_dropped"],
                  "received": len(seqs), "gaps": gaps, "missing": missing}))
EOF
  it_fail "the lookups failed: $(cat "$it_dir/slow.err")"
cat "$it_dir/slow.json"
/usr/bin/python3 - "$it_dir/slow.json" <<'EOF' || it_fail "a slow subscriber changed the service, or saw no gap"
import json, sys
r = json.load(open(sys.argv[1]))
fail = []
if r["dropped"] != 0:
    fail.append("the scheduler dropped %d batches (it waited on the publisher?)" % r["dropped"])
if r["handed"] < 2 * 120:
    fail.append("only %d batches handed for 240 lookups" % r["handed"])
if r["received"] == 0:
    fail.append("the slow subscriber got nothing (silence, not a gap)")
if r["gaps"] == 0:
    fail.append("the slow subscriber saw no gap in %d batches" % r["received"])
print("lookups/s alone %.0f, with a slow subscriber %.0f (reported, not asserted); "
      "it read %d batches with %d gaps (%d missing)" %
      (r["alone_lookups_s"], r["with_slow_lookups_s"], r["received"], r["gaps"], r["missing"]))
if fail:
    print("\n".join(fail))
    sys.exit(1)
EOF
it_log "PASS"
