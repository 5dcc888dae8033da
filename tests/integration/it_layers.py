"""Layer-wise blocks through the Python binding (issue 11 §2), one client process
against $KVTIER_COORDINATOR: an engine-shaped paged KV cache (numpy, one array of
LAYERS x 2 rows of pages), blocks stored layer by layer from some pages and loaded
layer by layer (last layer first) into other pages, byte-exact.

  it_layers.py store-load   put from pages [0, N), load into pages [N, 2N), compare
  it_layers.py load PAGE0   load the blocks stored by an earlier store-load into
                            pages starting at PAGE0 and compare (another process)
IT_DISABLE_SHM=1 sends every byte as frames. Exit 0 on success, 1 with a message.
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.environ["KVT_SOURCE_DIR"], "client", "python"))
import kvtier  # noqa: E402

INSTANCE = os.environ.get("IT_INSTANCE") or "it-layers"
LAYERS, SEG, TPB, N = 8, 2048, 16, 6
BLOCK = LAYERS * 2 * SEG
PAGES = 4 * N


def fail(msg):
    print("it_layers: " + msg, file=sys.stderr)
    sys.exit(1)


def expected(page_of_key):
    """The bytes key i was stored with, by (layer row, key)."""
    rows = np.arange(LAYERS * 2, dtype=np.uint32)[:, None, None]
    keys = np.arange(N, dtype=np.uint32)[None, :, None]
    cols = np.arange(SEG, dtype=np.uint32)[None, None, :]
    return ((rows * 31 + keys * 7 + cols * 3 + 5) % 251).astype(np.uint8)


def main():
    c = kvtier.Client(coordinators=os.environ["KVTIER_COORDINATOR"], name="it-layers",
                      timeout_ms=5000, disable_shm=os.environ.get("IT_DISABLE_SHM") == "1")
    c.register_instance(INSTANCE, TPB, BLOCK, segments=LAYERS * 2)
    keys = kvtier.block_keys(range(N * TPB), TPB)
    kv = np.zeros((LAYERS * 2, PAGES, SEG), dtype=np.uint8)  # the engine's paged cache
    want = expected(None)
    job = [0]

    def run(submit, tok, first, rows):
        job[0] += 1
        submit(job[0], tok, first, rows)
        r = c.wait([job[0]], 10000)[0]
        if not r.ok:
            fail("job %d: %r: %s" % (job[0], r, c.last_error))

    def load(page0, rid):
        c.request_begin(INSTANCE, rid)
        with c.prepare_get(INSTANCE, rid, keys) as tok:  # completed on leaving the block
            if tok.count != N:
                fail("%d of %d keys pinned" % (tok.count, N))
            for layer in reversed(range(LAYERS)):  # wait for layer l while l - 1 moves
                rows = [[kv[2 * layer + h, page0 + i] for h in (0, 1)] for i in range(N)]
                run(c.submit_get_segments, tok, 2 * layer, rows)
        if tok.live:
            fail("the token was not completed on leaving its with block")
        c.request_end(INSTANCE, rid)
        got = kv[:, page0:page0 + N, :]
        if not np.array_equal(got, want):
            bad = np.argwhere(got != want)[0]
            fail("loaded bytes differ at layer row %d key %d byte %d" % tuple(bad))

    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "store-load":
        kv[:, 0:N, :] = want
        c.request_begin(INSTANCE, "lw-store")
        tok = c.prepare_put(INSTANCE, "lw-store", keys)
        if tok.count != N:
            fail("%d of %d keys reserved" % (tok.count, N))
        for layer in range(LAYERS):  # each layer as the engine's forward pass ends it
            rows = [[kv[2 * layer + h, i] for h in (0, 1)] for i in range(N)]
            run(c.submit_put_segments, tok, 2 * layer, rows)
        c.complete_put(tok)
        c.request_end(INSTANCE, "lw-store")
        load(N, "lw-load")
        # bad input: a range past the block, a short buffer
        c.request_begin(INSTANCE, "lw-bad")
        tok = c.prepare_get(INSTANCE, "lw-bad", keys)
        try:
            run(c.submit_get_segments, tok, LAYERS * 2 - 1,
                [[kv[0, 0], kv[1, 0]] for _ in range(N)])
            fail("a range past the block was accepted")
        except kvtier.InvalidArgumentError as e:  # the status's own exception class
            if e.status != "INVALID_ARGUMENT" or "range" not in str(e):
                fail("past the block: %s" % e)
        try:
            run(c.submit_get_segments, tok, 0, [[bytearray(SEG - 1)] for _ in range(N)])
            fail("a short buffer was accepted")
        except ValueError as e:
            if "want %d" % SEG not in str(e):
                fail("short buffer: %s" % e)
        c.complete_get(tok)
        c.request_end(INSTANCE, "lw-bad")
        # the service recounts an instance's blocks at most once a second
        # (docs/OPERATIONS.md "trim"): ask until the count is this run's
        for _ in range(50):
            st = c.trim(INSTANCE, status_only=True)
            if st["blocks"] == N:
                break
            time.sleep(0.1)
        if st["blocks"] != N or st["active"]:
            fail("trim status: %r, want %d blocks and no trim" % (st, N))
    elif mode == "load":
        load(int(sys.argv[2]), "lw-load-%d" % os.getpid())
    else:
        fail("usage: it_layers.py store-load | load PAGE0")
    c.close()
    print("it_layers: %s ok" % mode)


main()
