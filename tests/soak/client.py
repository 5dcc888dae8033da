#!/usr/bin/python3
"""client.py — one soak client (tests/soak/run): stores fresh blocks and loads blocks
it stored earlier, in a loop, through the Python binding, and records its history
(one JSON line per operation, flushed at once, so a kill -9 loses at most the line
being written):

  {"t": T, "op": "put", "keys": [HEX...], "ack": true|false, "err": "..."}
      ack true: complete_put answered OK (the blocks are acknowledged); false: the
      put failed or its outcome is unknown (the checker ignores those keys)
  {"t": T, "op": "get", "key": HEX, "res": "hit"|"miss"|"err", "ok": true|false,
   "sum": "sha256 of the bytes received (hits)", "err": "..."}
      miss: prepare_get said NOT_FOUND for the key; hit: the bytes arrived, ok says
      whether they are the key's own (a function of the key alone)

T is time.time() when the call returned (the scheduler stamps its events with the
same host's wall clock). Block bytes are shake-128(salt + key), so any block read can
be checked on its own.

  client.py --id N --history FILE --stop FILE [--seed S] [--coordinator EP]
"""
import argparse
import hashlib
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("KVT_SOURCE_DIR", "."), "client", "python"))
import kvtier  # noqa: E402

INSTANCE = "soak"
BLOCK = 64 << 10
TOKENS_PER_BLOCK = 16
SALT = b"kvtier-soak"
JOB_TIMEOUT_MS = 15000
RECENT = 512  # most loads pick among this many of the client's latest blocks
# statuses after which the handle is rebuilt: libkvtier gave up (no leader found within
# its failover_ms, a call that timed out) or the handle is in doubt. A leader change
# alone is not one: the handle finds the new leader, registers its instance there and
# begins its requests again by itself (kvtier.h "Failover"); a window opened at the
# old leader ends with one ABORTED and the next operation goes on. Each rebuild is
# recorded ({"op": "reconnect", "why": STATUS}) and counted by the checker.
RECONNECT = {"UNAVAILABLE", "TIMEOUT", "INTERNAL", "EXPIRED"}


def pattern(key):
    return hashlib.shake_128(SALT + key).digest(BLOCK)


class Soak:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed * 1000 + a.id)
        self.hist = open(a.history, "a", buffering=1)
        self.c = None
        self.seq = 0
        self.acked = []
        self.prefix = hashlib.sha256(b"%d/%d/%d" % (a.id, os.getpid(), time.time_ns())).digest()[:8]

    def log(self, rec):
        rec["t"] = time.time()
        self.hist.write(json.dumps(rec, sort_keys=True) + "\n")

    def connect(self):
        while not os.path.exists(self.a.stop):
            try:
                self.c = kvtier.Client(coordinators=self.a.coordinator, name="soak-%d" % self.a.id,
                                       timeout_ms=5000)
                self.c.register_instance(INSTANCE, TOKENS_PER_BLOCK, BLOCK)
                return True
            except kvtier.KvtError:
                self.drop()
                time.sleep(0.5)
        return False

    def drop(self):
        if self.c is not None:
            try:
                self.c.close()
            except Exception:  # noqa: BLE001 - a handle of a dead leader
                pass
        self.c = None

    def rid(self, what):
        self.seq += 1
        return "%d-%d-%s-%d" % (self.a.id, os.getpid(), what, self.seq)

    def job(self, submit, tok, bufs):
        self.seq += 1
        submit(self.seq, tok, bufs, BLOCK)
        return self.c.wait([self.seq], JOB_TIMEOUT_MS)[0]

    def put(self):
        n = self.rng.randint(2, 12)
        keys = []
        for _ in range(n):
            self.seq += 1
            keys.append(hashlib.sha256(self.prefix + b"%d" % self.seq).digest()[:16])
        rid = self.rid("put")
        rec = {"op": "put", "keys": [k.hex() for k in keys], "ack": False}
        try:
            self.c.request_begin(INSTANCE, rid)
            try:
                tok = self.c.prepare_put(INSTANCE, rid, keys)
                ok = tok.count == len(keys)
                if tok.count:
                    r = self.job(self.c.submit_put, tok, [pattern(k) for k in tok.keys])
                    ok = ok and r.ok
                # acknowledged only when every key committed: a complete answered
                # OK can still have released some reservations (failed > 0)
                info = self.c.complete_put(tok)
                rec["committed"], rec["failed"] = info["committed"], info["failed"]
                rec["ack"] = ok and info["failed"] == 0 and info["committed"] == len(keys)
            finally:
                self.c.request_end(INSTANCE, rid)
        except kvtier.KvtError as e:
            rec["err"] = "%s: %s" % (e.status, e)
            self.log(rec)
            return e.status
        self.log(rec)
        if rec["ack"]:
            self.acked.extend(keys)
        return None

    def get(self, key):
        rid = self.rid("get")
        rec = {"op": "get", "key": key.hex(), "res": "err", "ok": False}
        try:
            self.c.request_begin(INSTANCE, rid)
            try:
                try:
                    tok = self.c.prepare_get(INSTANCE, rid, [key])
                except kvtier.KvtError as e:
                    if e.status == "NOT_FOUND" and "not registered" not in str(e):
                        rec["res"] = "miss"
                        self.log(rec)
                        return None
                    raise
                buf = bytearray(BLOCK)
                n = tok.count
                r = self.job(self.c.submit_get, tok, [buf])
                try:
                    self.c.complete_get(tok)
                except kvtier.KvtError:
                    pass
                if r.ok and n == 1:
                    rec["res"] = "hit"
                    rec["ok"] = bytes(buf) == pattern(key)
                    rec["sum"] = hashlib.sha256(buf).hexdigest()[:16]
                else:
                    rec["err"] = "job %r" % r
            finally:
                self.c.request_end(INSTANCE, rid)
        except kvtier.KvtError as e:
            rec["err"] = "%s: %s" % (e.status, e)
            self.log(rec)
            return e.status
        self.log(rec)
        return None

    def run(self):
        if not self.connect():
            return
        while not os.path.exists(self.a.stop):
            if not self.acked or self.rng.random() < 0.35:
                bad = self.put()
            else:
                # recent blocks mostly (older ones are evicted by then), some old ones
                recent = self.acked[-RECENT:] if self.rng.random() < 0.9 else self.acked
                bad = self.get(self.rng.choice(recent))
            if bad in RECONNECT:
                self.log({"op": "reconnect", "why": bad})
                self.drop()
                time.sleep(0.2)
                if not self.connect():
                    break


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--id", type=int, required=True)
    p.add_argument("--history", required=True)
    p.add_argument("--stop", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--coordinator", default=os.environ.get("KVTIER_COORDINATOR"))
    a = p.parse_args()
    if not a.coordinator:
        sys.exit("client.py: --coordinator or $KVTIER_COORDINATOR is needed")
    Soak(a).run()


if __name__ == "__main__":
    main()
