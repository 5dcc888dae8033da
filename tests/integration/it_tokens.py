"""Tokens across processes through the Python binding (issue 11 §3), against
$KVTIER_COORDINATOR: this process is the control role (the scheduler side of an
engine's connector); each job runs in a worker process (this script again, its
own Client) that imports the token it reads on stdin, moves the bytes and writes
the token's result on stdout; the control side imports the result and completes.

  it_tokens.py                       the control side: every check below
  it_tokens.py worker MODE FRAMES    the data side (MODE put | get | put-segs | get-segs;
                                     FRAMES 1: every byte as frames)
Exit 0 on success, 1 with a message.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ["KVT_SOURCE_DIR"], "client", "python"))
import kvtier  # noqa: E402

PLAIN, LAYERED = "it-tokens", "it-tokens-lw"
BLOCK, SEGS, TPB, N = 16384, 8, 16, 4
SEG = BLOCK // SEGS


def fail(msg):
    print("it_tokens: " + msg, file=sys.stderr)
    sys.exit(1)


def pattern(seed, key):
    return bytes((seed * 13 + key * 31 + j * 7 + 1) & 255 for j in range(BLOCK))


def client(name, frames=False):
    return kvtier.Client(coordinators=os.environ["KVTIER_COORDINATOR"], name=name,
                         timeout_ms=5000, disable_shm=frames)


def worker(mode, frames, seed):
    data = sys.stdin.buffer.read()
    c = client("it-tokens-worker", frames)
    with c.import_token(data) as tok:  # released on leaving the block, never completed
        if not tok.imported or tok.count != N:
            fail("imported token: imported %r, %d keys" % (tok.imported, tok.count))
        try:
            c.complete_put(tok) if tok.kind == "put" else c.complete_get(tok)
            fail("an imported token was completed in the worker")
        except kvtier.InvalidArgumentError as e:
            if "imported" not in str(e):
                fail("complete refused, but not saying why: %s" % e)
        blocks = [bytearray(pattern(seed, i)) if mode.startswith("put") else bytearray(BLOCK)
                  for i in range(N)]
        job = [0]

        def run(submit, *args):
            job[0] += 1
            submit(job[0], tok, *args)
            r = c.wait([job[0]], 10000)[0]
            if not r.ok:
                fail("job %d (%s): %r: %s" % (job[0], mode, r, c.last_error))
            if c.get_finished():
                fail("job %d reported twice" % job[0])

        def rows(first, count):
            return [[memoryview(blocks[i])[s * SEG:(s + 1) * SEG]
                     for s in range(first, first + count)] for i in range(N)]

        if mode == "put":
            run(c.submit_put, blocks, BLOCK)
        elif mode == "get":
            run(c.submit_get, blocks, BLOCK)
        elif mode == "put-segs":  # layer by layer, as the forward pass ends each
            for layer in range(SEGS // 2):
                run(c.submit_put_segments, 2 * layer, rows(2 * layer, 2))
        elif mode == "get-segs":  # the last layer first
            for layer in reversed(range(SEGS // 2)):
                run(c.submit_get_segments, 2 * layer, rows(2 * layer, 2))
        else:
            fail("unknown worker mode " + mode)
        if mode.startswith("get"):
            for i in range(N):
                if bytes(blocks[i]) != pattern(seed, i):
                    fail("worker %s: key %d is not the bytes stored" % (mode, i))
        result = tok.export_result()
    if tok.live:
        fail("the imported token was not released on leaving its with block")
    c.close()
    sys.stdout.buffer.write(result)


def hand_over(tok, mode, frames, seed):
    """Runs a worker on the exported token; applies its result here."""
    p = subprocess.run([sys.executable, __file__, "worker", mode, "1" if frames else "0",
                        str(seed)], input=tok.export(), capture_output=True, timeout=60)
    if p.returncode != 0:
        fail("worker %s exited %d: %s" % (mode, p.returncode, p.stderr.decode()))
    tok.import_result(p.stdout)
    return p.stdout


def round_trip(c, inst, seed, put_mode, get_mode, put_frames):
    keys = kvtier.block_keys(range(seed * 100000, seed * 100000 + N * TPB), TPB)
    rid = "tok-%d" % seed
    c.request_begin(inst, rid)
    tok = c.prepare_put(inst, rid, keys)
    if tok.count != N:
        fail("%d of %d keys reserved" % (tok.count, N))
    hand_over(tok, put_mode, put_frames, seed)
    c.complete_put(tok)  # with what the worker recorded
    hits = c.lookup(inst, keys, mode="per_key")
    if hits[0] != N:
        fail("after the worker's %s: %r" % (put_mode, hits))
    tok = c.prepare_get(inst, rid, keys)
    hand_over(tok, get_mode, not put_frames, seed)
    c.complete_get(tok)
    c.request_end(inst, rid)
    return keys


def control():
    c = client("it-tokens-control")
    c.register_instance(PLAIN, TPB, BLOCK)
    c.register_instance(LAYERED, TPB, BLOCK, segments=SEGS)
    round_trip(c, PLAIN, 1, "put", "get", False)
    round_trip(c, PLAIN, 2, "put", "get", True)
    round_trip(c, LAYERED, 3, "put-segs", "get-segs", False)
    round_trip(c, LAYERED, 4, "put-segs", "get-segs", True)

    # bad input: altered bytes; a result for another token; completing where imported
    keys = kvtier.block_keys(range(500000, 500000 + N * TPB), TPB)
    c.request_begin(PLAIN, "tok-bad")
    a = c.prepare_put(PLAIN, "tok-bad", keys[:2])
    data = bytearray(a.export())
    data[len(data) // 2] ^= 0xFF
    w = client("it-tokens-w2")
    try:
        w.import_token(bytes(data))
        fail("altered token bytes were imported")
    except kvtier.InvalidArgumentError as e:
        if "checksum" not in str(e):
            fail("altered bytes refused, but not saying why: %s" % e)
    try:
        w.import_token(b"KVTX")
        fail("cut token bytes were imported")
    except kvtier.InvalidArgumentError:
        pass
    wa = w.import_token(a.export())  # imported and released with no job run
    res_a = wa.export_result()
    wa.release()
    c.request_begin(PLAIN, "tok-bad2")
    b = c.prepare_put(PLAIN, "tok-bad2", keys[2:4])  # another window, another token
    try:
        b.import_result(res_a)
        fail("a result of another token was applied")
    except kvtier.InvalidArgumentError as e:
        if "the result is of token" not in str(e):
            fail("another token's result refused, but not saying why: %s" % e)
    c.complete_put(b, [False, False])
    c.request_end(PLAIN, "tok-bad2")
    a.import_result(res_a)  # nothing moved there: every key failed
    c.complete_put(a)
    if c.lookup(PLAIN, keys[:2], mode="per_key")[0] != 0:
        fail("a put whose worker moved nothing committed keys")
    c.request_end(PLAIN, "tok-bad")
    w.close()
    c.close()
    print("it_tokens: ok")


if len(sys.argv) > 1 and sys.argv[1] == "worker":
    worker(sys.argv[2], sys.argv[3] == "1", int(sys.argv[4]))
else:
    control()
