#!/usr/bin/python3
"""it_client.py — client processes of the integration tests, over the Python binding
(client/python/kvtier, ctypes over libkvtier: $KVTIER_LIB names the library).

Used by test_client_killed.sh, test_prefetch_race.sh, test_quota.sh,
test_fencing.sh, test_coordinators.sh, test_failover_client.sh,
test_branches.sh and test_leader_resign.sh; each
subcommand is one client process against $IT_COORDINATORS (a list), else
$KVTIER_COORDINATOR, as instance $IT_INSTANCE (default "it-client") of $IT_BLOCK
bytes per block (64 KiB); IT_DISABLE_SHM=1: the frame path even on the tier's
host. Block bytes are a function of the key
(shake-128 of a salt and the key), so any block read back can be checked on its own:
a wrong byte anywhere is a block served for the wrong key or a stale or torn slot.

Subcommands:
  store TAG FIRST N         stores keys TAG/FIRST .. TAG/FIRST+N-1 and reads them back
  put TAG FIRST N           stores them in one put (one batch), no read-back
  verify TAG FIRST N        every key hits and loads byte-exact (exit 1 otherwise)
  miss TAG FIRST N          no key hits and prepare_get is NOT_FOUND (exit 1 otherwise)
  partial TAG FIRST N       one put of N keys, the last flagged failed: complete_put reports
                            N-1 committed and 1 failed, the N-1 load byte-exact, the last
                            is not served
  hold TAG NA NB READY      prepare_put of NA keys (bytes written, never completed) and NB
                            keys (nothing written) in two requests, writes READY (JSON),
                            then waits to be killed
  stats [INSTANCE]          the scheduler's counters as JSON (all, or one instance's)
  stale TAG N READY GO      prepare_put of N keys at the leader of the moment, writes READY,
                            waits for the file GO, then writes the bytes under that (by then
                            a deposed leader's) token; prints the job's outcome as JSON;
                            exit 0 when the tier refused it, 1 when any byte was written
  takeover TAG N READY GO   one handle across a leader change (test_coordinators.sh):
                            stores N keys, writes READY, waits for the file GO, then
                            stores N more and reads all 2N back byte-exact
  failover TAG N READY GO   stores N keys, opens a get and a put window in one request,
                            writes READY (JSON), waits for the file GO (the leader was
                            killed), then: each window's complete is ABORTED once, the
                            next prepare_get of the same request (not begun again by
                            hand) loads the keys byte-exact (exit 1 otherwise)
  resign TAG N READY GO STOP one handle across `kvtier leader resign`
                            (test_leader_resign.sh): stores N keys, opens a put window
                            (bytes written, not completed), writes READY, waits for GO
                            (the leader is resigning), completes the window (it must
                            commit at the old leader), then stores and reads keys in a
                            loop until the file STOP, and reads every key back; prints
                            JSON: keys, the leader epochs its calls saw, errors by status
  leader-resign WAIT        Client.leader_resign(wait_s=WAIT): prints the outcome as JSON,
                            or the refusal's status and message (exit 0 either way)
  branch TAG FIRST N TTL_MS TOTAL
                            one request with these facts (test_branches.sh): prints where
                            request_begin routed it and, as JSON, the tier each key lives
                            on after its put in that request, read back byte-exact in it
  writer ...                race test: stores sequences of blocks in a loop
  prefetcher ...            race test: lookup, prefetch, get and check, in a loop
Exit status: 0 ok, 1 a check failed (message on stderr), 2 usage or setup error.
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

INSTANCE = os.environ.get("IT_INSTANCE") or "it-client"
TOKENS_PER_BLOCK = 16
BLOCK = int(os.environ.get("IT_BLOCK") or 64 << 10)  # bytes per block (the instance's)
SALT = b"kvtier-it"
JOB_TIMEOUT_MS = 30000
# prepare statuses the race test counts as allowed outcomes: a full head tier
# (NO_SPACE, or BUSY = 11 once the scheduler answers it), a tier down / recovering.
ALLOWED_PREPARE = {"NO_SPACE", "BUSY", "UNAVAILABLE", "TIMEOUT"}
# complete statuses counted as allowed: the window lapsed, the tier failed the header
ALLOWED_COMPLETE = {"EXPIRED", "UNAVAILABLE", "TIMEOUT"}
BUSY_CODE = 11


def fail(msg):
    print("it_client: FAIL: %s" % msg, file=sys.stderr)
    sys.exit(1)


def key_of(tag, i):
    return hashlib.sha256(b"%s/%d" % (tag.encode(), i)).digest()[:16]


def pattern(key, salt=SALT):
    return hashlib.shake_128(salt + key).digest(BLOCK)


def status_of(err):
    """The status name of a KvtError, BUSY included before the binding knows it."""
    return "BUSY" if err.code == BUSY_CODE else err.status


class Conn:
    """One client handle, its instance registered, with a job id counter."""

    def __init__(self, name):
        coord = os.environ.get("IT_COORDINATORS") or os.environ.get("KVTIER_COORDINATOR")
        if not coord:
            print("it_client: KVTIER_COORDINATOR is not set", file=sys.stderr)
            sys.exit(2)
        # a deployment with security.curve: this client's pair and the server key
        self.c = kvtier.Client(coordinators=coord, name=name, timeout_ms=5000,
                               disable_shm=os.environ.get("IT_DISABLE_SHM") == "1",
                               curve_cert=os.environ.get("IT_CURVE_CERT"),
                               curve_server_key=os.environ.get("IT_CURVE_SERVER_KEY"))
        self.c.register_instance(INSTANCE, TOKENS_PER_BLOCK, BLOCK)
        self.name = name
        self.seq = 0

    def job(self):
        self.seq += 1
        return self.seq

    def req(self, what):
        self.seq += 1
        rid = "%s-%s-%d" % (self.name, what, self.seq)
        self.c.request_begin(INSTANCE, rid)
        return rid

    def end(self, rid):
        try:
            self.c.request_end(INSTANCE, rid)
        except kvtier.KvtError as e:
            print("it_client: request_end %s: %s" % (rid, e), file=sys.stderr)

    def run_job(self, submit, *args):
        jid = self.job()
        submit(jid, *args)
        return self.c.wait([jid], JOB_TIMEOUT_MS)[0]

    def put(self, keys, salt=SALT):
        """Stores keys (bytes from the pattern); returns how many were written
        (keys already stored are skipped by the scheduler)."""
        rid = self.req("put")
        try:
            tok = self.c.prepare_put(INSTANCE, rid, keys)
            if tok.count:
                r = self.run_job(self.c.submit_put, tok, [pattern(k, salt) for k in tok.keys], BLOCK)
                if not r.ok:
                    self.c.complete_put(tok)
                    raise RuntimeError("submit_put: %r" % r)
            n = tok.count
            info = self.c.complete_put(tok)
            if info["committed"] != n or info["failed"]:
                raise RuntimeError("complete_put: %r of %d keys" % (info, n))
            return n
        finally:
            self.end(rid)

    def get(self, keys):
        """(result, [(key, bytes, tier)], complete_error) of one prepare_get /
        submit_get / complete_get; raises KvtError from prepare_get (NOT_FOUND when a
        key is not cached) or the job."""
        rid = self.req("get")
        try:
            tok = self.c.prepare_get(INSTANCE, rid, keys)
            bufs = [bytearray(BLOCK) for _ in range(tok.count)]
            tiers = [tok.tier(i) for i in range(tok.count)]
            tkeys = tok.keys
            r = self.run_job(self.c.submit_get, tok, bufs, BLOCK)
            err = None
            try:
                self.c.complete_get(tok)
            except kvtier.KvtError as e:
                err = e
            return r, list(zip(tkeys, bufs, tiers)), err
        finally:
            self.end(rid)

    def lookup(self, keys, mode="per_key"):
        return self.c.lookup(INSTANCE, keys, mode)


def keys_of(tag, first, n):
    return [key_of(tag, first + i) for i in range(n)]


def check_loaded(r, loaded, want_keys):
    if not r.ok or r.n_failed:
        fail("get job failed: %r" % r)
    if [k for k, _, _ in loaded] != list(want_keys):
        fail("the get token lists other keys than asked")
    for k, b, tier in loaded:
        if bytes(b) != pattern(k):
            fail("key %s (tier %d): wrong bytes" % (k.hex(), tier))


# ---- store / verify / miss ----

def cmd_store(a):
    cn = Conn("store")
    keys = keys_of(a.tag, a.first, a.n)
    written = 0
    for i in range(0, len(keys), 16):
        written += cn.put(keys[i:i + 16])
    r, loaded, err = cn.get(keys)
    check_loaded(r, loaded, keys)
    if err:
        fail("complete_get: %s" % err)
    print("stored %d keys %s/%d.., %d written, byte-exact" % (len(keys), a.tag, a.first, written))


def cmd_put(a):
    cn = Conn("put")
    written = cn.put(keys_of(a.tag, a.first, a.n))
    print("put %d keys %s/%d.. in one batch, %d written" % (a.n, a.tag, a.first, written))


def cmd_verify(a):
    cn = Conn("verify")
    keys = keys_of(a.tag, a.first, a.n)
    hits, hit, _, _ = cn.lookup(keys)
    if hits != len(keys):
        fail("%d of %d keys %s/%d.. hit" % (hits, len(keys), a.tag, a.first))
    r, loaded, err = cn.get(keys)
    check_loaded(r, loaded, keys)
    if err:
        fail("complete_get: %s" % err)
    print("%d keys %s/%d.. hit and load byte-exact" % (len(keys), a.tag, a.first))


def cmd_branch(a):
    cn = Conn("branch")
    cn.seq += 1
    rid = "branch-%s-%d" % (a.tag, cn.seq)
    info = cn.c.request_begin(INSTANCE, rid, a.ttl_ms, a.total)
    keys = keys_of(a.tag, a.first, a.n)
    try:
        tok = cn.c.prepare_put(INSTANCE, rid, keys)
        written = tok.count
        if tok.count:
            r = cn.run_job(cn.c.submit_put, tok, [pattern(k) for k in tok.keys], BLOCK)
            if not r.ok:
                cn.c.complete_put(tok)
                fail("submit_put: %r" % r)
        cn.c.complete_put(tok)
        _, _, tiers, _ = cn.lookup(keys)
        tok = cn.c.prepare_get(INSTANCE, rid, keys)
        bufs = [bytearray(BLOCK) for _ in range(tok.count)]
        tkeys = tok.keys
        r = cn.run_job(cn.c.submit_get, tok, bufs, BLOCK)
        cn.c.complete_get(tok)
        check_loaded(r, list(zip(tkeys, bufs, [0] * len(bufs))), keys)
    finally:
        cn.end(rid)
    info.update({"written": written, "tiers": sorted(set(tiers))})
    print(json.dumps(info, sort_keys=True))


def cmd_miss(a):
    cn = Conn("miss")
    keys = keys_of(a.tag, a.first, a.n)
    hits, _, _, _ = cn.lookup(keys)
    if hits:
        fail("%d of %d keys %s/%d.. hit" % (hits, len(keys), a.tag, a.first))
    try:
        r, _, _ = cn.get(keys)
        fail("prepare_get of keys never committed succeeded: %r" % r)
    except kvtier.KvtError as e:
        if e.status != "NOT_FOUND":
            fail("prepare_get of keys never committed: %s, expected NOT_FOUND" % e)
    print("no key of %s/%d..+%d is served" % (a.tag, a.first, a.n))


def cmd_partial(a):
    """One put of N keys whose last flag is False: complete_put succeeds and reports
    N-1 committed, 1 failed; the first N-1 are served byte-exact, the last is not."""
    cn = Conn("partial")
    keys = keys_of(a.tag, a.first, a.n)
    rid = cn.req("partial")
    try:
        tok = cn.c.prepare_put(INSTANCE, rid, keys)
        if tok.count != len(keys):
            fail("prepare_put left out %d keys" % (len(keys) - tok.count))
        r = cn.run_job(cn.c.submit_put, tok, [pattern(k) for k in tok.keys], BLOCK)
        if not r.ok:
            fail("submit_put: %r" % r)
        info = cn.c.complete_put(tok, [True] * (len(keys) - 1) + [False])
    finally:
        cn.end(rid)
    if info != {"committed": len(keys) - 1, "failed": 1}:
        fail("complete_put with one False flag reported %r" % info)
    r, loaded, err = cn.get(keys[:-1])
    check_loaded(r, loaded, keys[:-1])
    hits, _, _, _ = cn.lookup(keys[-1:])
    if hits:
        fail("the key whose flag was False is served")
    print("partial put of %d keys: %d committed, %d failed" % (len(keys), info["committed"],
                                                                info["failed"]))


def stats_of(cn, instance=None):
    """The scheduler's counters (all of them: Client.stats pages through them) plus,
    from cluster_info, "used.<tier>": slots in use per tier."""
    st = cn.c.stats(instance)
    for t in cn.c.cluster_info()["tiers"]:
        st["used." + t["name"]] = t["used"]
    return st


def cmd_stats(a):
    cn = Conn("stats")
    print(json.dumps(stats_of(cn, a.instance), sort_keys=True))


# ---- hold: a client that dies between prepare_put and complete_put ----

def cmd_hold(a):
    cn = Conn("hold")
    keys_a = keys_of(a.tag, 0, a.na)
    keys_b = keys_of(a.tag, a.na, a.nb)
    # request A: slots reserved, bytes written (other bytes than the pattern, so a
    # later read of them would be caught), never completed
    rid_a = cn.req("written")
    tok_a = cn.c.prepare_put(INSTANCE, rid_a, keys_a)
    r = cn.run_job(cn.c.submit_put, tok_a, [pattern(k, b"dead-writer") for k in tok_a.keys], BLOCK)
    if not r.ok:
        fail("submit_put of the held keys: %r" % r)
    # request B: slots reserved, nothing written
    rid_b = cn.req("reserved")
    tok_b = cn.c.prepare_put(INSTANCE, rid_b, keys_b)
    st = stats_of(cn)
    hits, _, _, _ = cn.lookup(keys_a + keys_b)
    state = {"pid": os.getpid(), "count_a": tok_a.count, "count_b": tok_b.count,
             "hits": hits, "stats": st}
    tmp = a.ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.rename(tmp, a.ready)
    # keep the tokens and the connection; the test kills this process
    while True:
        time.sleep(3600)


def cmd_stale(a):
    cn = Conn("stale")
    keys = keys_of(a.tag, 0, a.n)
    rid = cn.req("stale")
    tok = cn.c.prepare_put(INSTANCE, rid, keys)
    if tok.count != a.n:
        fail("prepare_put reserved %d of %d keys" % (tok.count, a.n))
    tmp = a.ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"pid": os.getpid(), "count": tok.count}, f)
    os.rename(tmp, a.ready)
    deadline = time.monotonic() + 300
    while not os.path.exists(a.go):
        if time.monotonic() > deadline:
            fail("no %s after 300 s" % a.go)
        time.sleep(0.05)
    r = cn.run_job(cn.c.submit_put, tok, [pattern(k, b"deposed-leader") for k in tok.keys], BLOCK)
    print(json.dumps({"status": kvtier.status_name(r.status), "n_keys": r.n_keys,
                      "n_failed": r.n_failed}))
    sys.exit(0 if r.n_failed == r.n_keys and not r.ok else 1)


# ---- failover: windows opened at a leader that is killed ----

def cmd_failover(a):
    cn = Conn("failover")
    keys = keys_of(a.tag, 0, a.n)
    cn.put(keys)
    rid = cn.req("held")
    tok_get = cn.c.prepare_get(INSTANCE, rid, keys)
    tok_put = cn.c.prepare_put(INSTANCE, rid, keys_of(a.tag, a.n, a.n))
    epoch = cn.c.cluster_info()["leader_epoch"]
    tmp = a.ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"pid": os.getpid(), "epoch": epoch, "request": rid}, f)
    os.rename(tmp, a.ready)
    deadline = time.monotonic() + 120
    while not os.path.exists(a.go):
        if time.monotonic() > deadline:
            fail("no %s within 120 s" % a.go)
        time.sleep(0.05)
    for name, tok, complete in (("get", tok_get, cn.c.complete_get),
                                ("put", tok_put, cn.c.complete_put)):
        try:
            complete(tok)
            fail("complete_%s of a window of the killed leader succeeded" % name)
        except kvtier.KvtError as e:
            if e.status != "ABORTED":
                fail("complete_%s of a window of the killed leader: %s, expected ABORTED"
                     % (name, e))
            print("complete_%s: %s" % (name, e))
    # the same request goes on at the new leader: the library began it again
    tok = cn.c.prepare_get(INSTANCE, rid, keys)
    bufs = [bytearray(BLOCK) for _ in range(tok.count)]
    tkeys = tok.keys
    r = cn.run_job(cn.c.submit_get, tok, bufs, BLOCK)
    cn.c.complete_get(tok)
    check_loaded(r, list(zip(tkeys, bufs, [0] * len(bufs))), keys)
    cn.end(rid)
    new_epoch = cn.c.cluster_info()["leader_epoch"]
    if new_epoch == epoch:
        fail("the leader epoch is still %d" % epoch)
    print("failover: epoch %d -> %d, one ABORTED per window, %d keys load byte-exact"
          % (epoch, new_epoch, len(keys)))


# ---- the prefetch race ----

def seq_keys(s, blocks):
    return keys_of("seq", s * blocks, blocks)


def cmd_writer(a):
    """Stores the sequences in rounds until the stop file appears or the rounds end;
    a sequence's blocks are written when the scheduler does not hold them."""
    cn = Conn("writer-%d" % a.id)
    rng = random.Random(a.id)
    c = {"rounds": 0, "puts": 0, "written": 0, "refused": {}, "job_failed": 0}
    order = list(range(a.seqs))
    for rnd in range(a.rounds):
        rng.shuffle(order)
        for s in order:
            if os.path.exists(a.stop):
                break
            try:
                c["written"] += cn.put(seq_keys(s, a.blocks))
                c["puts"] += 1
            except kvtier.KvtError as e:
                name = status_of(e)
                if name not in ALLOWED_PREPARE:
                    fail("writer: put of sequence %d: %s" % (s, e))
                c["refused"][name] = c["refused"].get(name, 0) + 1
            except RuntimeError as e:
                c["job_failed"] += 1
                print("writer: %s" % e, file=sys.stderr)
        c["rounds"] = rnd + 1
        if os.path.exists(a.stop):
            break
    print(json.dumps(c, sort_keys=True))


def cmd_prefetcher(a):
    """Picks sequences that are cached below the head, prefetches and reads them,
    and checks every byte of every block a get returns."""
    cn = Conn("prefetcher-%d" % a.id)
    rng = random.Random(1000 + a.id)
    c = {"iterations": 0, "lookups": 0, "advised": 0, "prefetch_prepared": 0,
         "prefetch_keys": 0, "prefetch_jobs_ok": 0, "prefetch_jobs_failed": 0,
         "prefetched_on_head": 0, "prepare_refused": {}, "get_not_found": 0,
         "gets": 0, "get_jobs_failed": 0, "blocks_checked": 0, "blocks_from_lower": 0,
         "blocks_from_head": 0, "direct_lower_gets": 0, "blind_prefetches": 0,
         "prefetched_gone_again": 0,
         "wrong_blocks": 0}
    wrong = []

    def refused(what, e):
        name = status_of(e)
        if what == "get" and name == "NOT_FOUND":
            c["get_not_found"] += 1
            return
        if name not in (ALLOWED_COMPLETE if what.startswith("complete") else ALLOWED_PREPARE):
            fail("prefetcher: prepare_%s: %s" % (what, e))
        k = "%s:%s" % (what, name)
        c["prepare_refused"][k] = c["prepare_refused"].get(k, 0) + 1

    def load(keys):
        try:
            r, loaded, err = cn.get(keys)
        except kvtier.KvtError as e:
            refused("get", e)
            return
        if err:
            refused("complete_get", err)
        c["gets"] += 1
        if not r.ok or r.n_failed:
            # which keys failed is not reported per key: none of these is counted
            # as served (the job said so)
            c["get_jobs_failed"] += 1
            return
        for k, b, tier in loaded:
            c["blocks_checked"] += 1
            c["blocks_from_head" if tier == 1 else "blocks_from_lower"] += 1
            if bytes(b) != pattern(k):
                c["wrong_blocks"] += 1
                wrong.append("%s from tier %d" % (k.hex(), tier))

    if a.final_check:
        # every block still cached, sequence by sequence
        for s in range(a.seqs):
            keys = seq_keys(s, a.blocks)
            _, hit, _, _ = cn.lookup(keys)
            c["lookups"] += 1
            cached = [k for k, h in zip(keys, hit) if h]
            if cached:
                load(cached)
    def prefetch(keys):
        """prepare -> submit -> wait -> complete; counts the promoted keys that a
        lookup then reports on the head tier."""
        rid = cn.req("prefetch")
        try:
            try:
                tok = cn.c.prepare_prefetch(INSTANCE, rid, keys)
            except kvtier.KvtError as e:
                refused("prefetch", e)
                return
            c["prefetch_prepared"] += 1
            c["prefetch_keys"] += tok.count
            moved = tok.keys
            if tok.count:
                r = cn.run_job(cn.c.submit_prefetch, tok)
                c["prefetch_jobs_ok" if r.ok and not r.n_failed else "prefetch_jobs_failed"] += 1
            try:
                cn.c.complete_prefetch(tok)
            except kvtier.KvtError as e:
                refused("complete_prefetch", e)
                return
            if moved:
                _, hit, tiers, _ = cn.lookup(moved)
                up = sum(1 for h, t in zip(hit, tiers) if h and t == 1)
                c["prefetched_on_head"] += up
                # committed by the prefetch, already off the head at the next lookup:
                # the reclaimer took the block right after it came up
                c["prefetched_gone_again"] += len(moved) - up
        finally:
            cn.end(rid)

    deadline = time.monotonic() + a.max_seconds
    for it in range(a.iterations):
        if time.monotonic() > deadline:
            break
        c["iterations"] = it + 1
        # candidates: a sample of sequences, by their first block's location
        sample = rng.sample(range(a.seqs), min(a.sample, a.seqs))
        firsts = [key_of("seq", s * a.blocks) for s in sample]
        _, hit, tiers, _ = cn.lookup(firsts)
        c["lookups"] += 1
        lower = [s for s, h, t in zip(sample, hit, tiers) if h and t > 1]
        anyhit = [s for s, h in zip(sample, hit) if h]
        if not anyhit:
            continue
        s = rng.choice(lower or anyhit)
        keys = seq_keys(s, a.blocks)
        if it % 4 == 1:
            # blind: prefetch the whole sequence without looking it up first (a
            # lookup refreshes the blocks' rank; these stay as cold as they were,
            # the reclaimer's next victims); keys not cached are left out
            c["blind_prefetches"] += 1
            prefetch(keys)
        else:
            n, _, tiers, advised = cn.lookup(keys, "prefix")
            c["lookups"] += 1
            keys = keys[:n]
            if not advised:
                pass
            elif it % 4 == 3:
                # a direct load from the lower tier, no prefetch
                c["direct_lower_gets"] += 1
                load(keys)
                continue
            else:
                c["advised"] += 1
                prefetch(keys)
        n, _, _, _ = cn.lookup(keys, "prefix")
        c["lookups"] += 1
        if n:
            load(keys[:n])
    for w in wrong[:20]:
        print("prefetcher: WRONG BYTES: %s" % w, file=sys.stderr)
    print(json.dumps(c, sort_keys=True))
    if c["wrong_blocks"]:
        sys.exit(1)


def cmd_takeover(a):
    cn = Conn("failover")
    first = keys_of(a.tag, 0, a.n)
    for k in first:
        cn.put([k])
    with open(a.ready + ".tmp", "w") as f:
        f.write("ready")
    os.rename(a.ready + ".tmp", a.ready)
    deadline = time.monotonic() + 120
    while not os.path.exists(a.go):
        if time.monotonic() > deadline:
            fail("no GO file")
        time.sleep(0.05)
    # the same handle: calls reach the new leader through the list or the redirect
    seen, registered = {}, 0
    second = keys_of(a.tag, a.n, a.n)
    todo = [("put", k) for k in second] + [("get", k) for k in first + second]
    deadline = time.monotonic() + 60
    while todo:
        what, k = todo[0]
        try:
            if what == "put":
                cn.put([k])
            else:
                r, loaded, err = cn.get([k])
                check_loaded(r, loaded, [k])
                if err:
                    raise err
            todo.pop(0)
        except kvtier.KvtError as e:
            st = status_of(e)
            seen[st] = seen.get(st, 0) + 1
            if time.monotonic() > deadline:
                fail("%s %s after the takeover: %s (%s); seen %r" % (what, k.hex(), e, st, seen))
            if st == "NOT_FOUND" and "not registered" in str(e):
                cn.c.register_instance(INSTANCE, TOKENS_PER_BLOCK, BLOCK)
                registered += 1
            else:
                time.sleep(0.2)
    print(json.dumps({"keys": 2 * a.n, "reregistered": registered, "errors": seen},
                     sort_keys=True))


def wait_file(path, seconds=120):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            fail("no file %s" % path)
        time.sleep(0.05)


def cmd_resign(a):
    cn = Conn("resign")
    stored = keys_of(a.tag, 0, a.n)
    for k in stored:
        cn.put([k])
    # a window open across the start of the resign: it must finish at the old leader
    held = key_of(a.tag + "-held", 0)
    rid = cn.req("held")
    tok = cn.c.prepare_put(INSTANCE, rid, [held])
    if tok.count != 1:
        fail("the held window reserved %d keys" % tok.count)
    r = cn.run_job(cn.c.submit_put, tok, [pattern(held)], BLOCK)
    if not r.ok:
        fail("submit_put of the held window: %r" % r)
    epochs = [cn.c.cluster_info()["leader_epoch"]]
    with open(a.ready + ".tmp", "w") as f:
        f.write("ready")
    os.rename(a.ready + ".tmp", a.ready)
    wait_file(a.go)
    cn.c.complete_put(tok)  # an error here fails the run: it is an open window's complete
    cn.end(rid)
    stored.append(held)
    # requests across the hand-over: the library waits for the new leader
    seen, i = {}, a.n
    while not os.path.exists(a.stop) or len(stored) < a.n + 8:
        k = key_of(a.tag, i)
        try:
            cn.put([k])
            stored.append(k)
            i += 1
            k2 = stored[random.randrange(len(stored))]
            r, loaded, err = cn.get([k2])
            check_loaded(r, loaded, [k2])
            if err:
                raise err
        except kvtier.KvtError as e:
            st = status_of(e)
            seen[st] = seen.get(st, 0) + 1
            print("it_client: resign: %s" % e, file=sys.stderr)
            if sum(seen.values()) > 20:
                fail("too many errors across the resign: %r" % seen)
            time.sleep(0.2)
        ep = cn.c.cluster_info()["leader_epoch"]
        if ep and ep != epochs[-1]:
            epochs.append(ep)
        if i > a.n + 2000:
            fail("no STOP file after 2000 keys")
        time.sleep(0.02)
    r, loaded, err = cn.get(stored)
    check_loaded(r, loaded, stored)
    if err:
        fail("complete_get of every key: %s" % err)
    print(json.dumps({"keys": len(stored), "epochs": epochs, "errors": seen}, sort_keys=True))


def cmd_leader_resign(a):
    coord = os.environ.get("IT_COORDINATORS") or os.environ.get("KVTIER_COORDINATOR")
    c = kvtier.Client(coordinators=coord, name="resigner", timeout_ms=5000)
    try:
        print(json.dumps(c.leader_resign(wait_s=a.wait), sort_keys=True))
    except kvtier.KvtError as e:
        print(json.dumps({"refused": status_of(e), "message": str(e)}, sort_keys=True))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("store", "put", "verify", "miss", "partial"):
        s = sub.add_parser(name)
        s.add_argument("tag")
        s.add_argument("first", type=int)
        s.add_argument("n", type=int)
    s = sub.add_parser("hold")
    s.add_argument("tag")
    s.add_argument("na", type=int)
    s.add_argument("nb", type=int)
    s.add_argument("ready")
    sub.add_parser("stats").add_argument("instance", nargs="?")
    s = sub.add_parser("resign")
    s.add_argument("tag")
    s.add_argument("n", type=int)
    s.add_argument("ready")
    s.add_argument("go")
    s.add_argument("stop")
    sub.add_parser("leader-resign").add_argument("wait", type=int)
    s = sub.add_parser("branch")
    s.add_argument("tag")
    s.add_argument("first", type=int)
    s.add_argument("n", type=int)
    s.add_argument("ttl_ms", type=int)
    s.add_argument("total", type=int)
    for name in ("stale", "takeover", "failover"):
        s = sub.add_parser(name)
        s.add_argument("tag")
        s.add_argument("n", type=int)
        s.add_argument("ready")
        s.add_argument("go")
    for name in ("writer", "prefetcher"):
        s = sub.add_parser(name)
        s.add_argument("--id", type=int, default=0)
        s.add_argument("--seqs", type=int, required=True)
        s.add_argument("--blocks", type=int, required=True)
        s.add_argument("--stop", default="/nonexistent")
        s.add_argument("--rounds", type=int, default=1)
        s.add_argument("--iterations", type=int, default=1)
        s.add_argument("--sample", type=int, default=16)
        s.add_argument("--max-seconds", type=float, default=600)
        s.add_argument("--final-check", action="store_true")
    a = p.parse_args()
    try:
        {"store": cmd_store, "put": cmd_put, "verify": cmd_verify, "miss": cmd_miss, "hold": cmd_hold,
         "partial": cmd_partial,
         "stats": cmd_stats, "branch": cmd_branch, "stale": cmd_stale, "takeover": cmd_takeover,
         "failover": cmd_failover, "writer": cmd_writer, "resign": cmd_resign,
         "leader-resign": cmd_leader_resign,
         "prefetcher": cmd_prefetcher}[a.cmd](a)
    except kvtier.KvtError as e:
        fail("%s: %s (%s)" % (a.cmd, e, status_of(e)))


if __name__ == "__main__":
    main()
