"""kvtier.connector end to end (issue 11 §5), without vLLM: this process plays the
engine's scheduler (the connector's scheduler side) and starts worker processes
(the connector's worker side) holding a paged KV cache of torch CPU tensors,
[2, pages, block_size, heads, head_size] per layer as vLLM's flash-attention
backend lays it out. The two sides talk only through what vLLM would carry
between them: the step's ConnectorMetadata (pickled) and the worker's
ConnectorOutput back.

1. request A (5 full blocks and 3 tokens) runs in worker 1, which computes its
   KV layer by layer and saves each layer as it is computed;
2. request B shares A's first 5 blocks: the scheduler side matches 80 tokens,
   worker 2 (another process, an empty cache) loads them layer by layer into other
   pages, waiting for layer l before computing it, and finds them byte-exact; it
   stores B's own sixth block;
3. request C shares B's 6 blocks: worker 1 loads them (the sixth stored by worker 2),
   and the engine frees it before the scheduler side sees the step's output (vLLM's
   order);
4. request D: the engine's own prefix cache holds its first 2 blocks, kvtier loads
   blocks 2..5 into pages 2..5;
5. request E: loaded, preempted after one chunk, resumed on other pages: loaded again;
6. bad calls: the other side's methods, a KV cache that disagrees with the config,
   a result for a request the scheduler side does not hold.
Exit 0 on success, 1 with a message. $KVTIER_COORDINATOR names the leader;
IT_DISABLE_SHM=1 makes the workers move every byte as frames.
"""
import multiprocessing as mp
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.environ["KVT_SOURCE_DIR"], "client", "python"))
import kvtier  # noqa: E402
from kvtier import connector as kc  # noqa: E402

LAYERS, BS, HEADS, HEAD = 4, 16, 2, 64
PAGES = 32
SEG = BS * HEADS * HEAD * 2  # float16


def fail(msg):
    print("it_connector: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def config(disable_shm=False):
    return kc.ConnectorConfig(instance_id=os.environ.get("IT_INSTANCE", "it-connector"),
                              block_size=BS, num_layers=LAYERS, segment_bytes=SEG,
                              coordinators=os.environ["KVTIER_COORDINATOR"],
                              disable_shm=disable_shm, model="it-model")


def layer_names():
    return ["model.layers.%d.self_attn" % i for i in range(LAYERS)]


def kv_of(tokens, pos, layer, kv):
    """The 'model': K or V of one block of tokens at one layer, a function of the whole
    prefix so far (a block's KV depends on every token before it)."""
    h = (sum(tokens[:pos + BS]) * 31 + pos * 7 + layer * 13 + kv * 5) % 997
    base = torch.arange(BS * HEADS * HEAD, dtype=torch.float32).reshape(BS, HEADS, HEAD)
    return ((base * 0.25 + h) % 1024).to(torch.float16)


def worker_main(conn, disable_shm):
    """A worker process: the connector's worker side and a paged KV cache."""
    try:
        w = kc.KVTierConnector(config(disable_shm), kc.ROLE_WORKER)
        caches = {n: torch.zeros(2, PAGES, BS, HEADS, HEAD, dtype=torch.float16)
                  for n in layer_names()}
        w.register_kv_caches(caches)
        while True:
            msg = conn.recv()
            if msg[0] == "quit":
                break
            _, meta, work = msg  # work: [(req_id, prompt, pages, computed, scheduled)]
            w.bind_connector_metadata(meta)
            w.start_load_kv()
            for layer, name in enumerate(layer_names()):
                w.wait_for_layer_load(name)  # layer l is in place; later layers still move
                for _, prompt, pages, computed, scheduled in work:
                    for b in range(computed // BS, (computed + scheduled) // BS):
                        for kv in (0, 1):
                            caches[name][kv][pages[b]] = kv_of(prompt, b * BS, layer, kv)
                w.save_kv_layer(name, caches[name])
            w.wait_for_save()
            out = w.get_connector_output()
            w.clear_connector_metadata()
            # What the loads put in the pages, checked against the model.
            reqs = {rid: (prompt, pages) for rid, prompt, pages, _, _ in work}
            bad = []
            for spec in meta.loads:
                prompt, pages = reqs[spec.req_id]
                for page in spec.pages:
                    block = pages.index(page)
                    for layer, name in enumerate(layer_names()):
                        for kv in (0, 1):
                            want = kv_of(prompt, block * BS, layer, kv)
                            if not torch.equal(caches[name][kv][page], want):
                                bad.append((spec.req_id, page, layer, kv))
            conn.send(("ok", out, bad))
        w.close()
    except Exception as e:  # noqa: BLE001 — reported to the driver, which fails
        conn.send(("error", "%s: %s" % (type(e).__name__, e), []))


class Worker:
    def __init__(self, disable_shm):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker_main, args=(child, disable_shm))
        self.proc.start()

    def step(self, meta, work):
        self.conn.send(("step", meta, work))
        if not self.conn.poll(60):
            fail("the worker did not answer a step in 60 s")
        status, out, bad = self.conn.recv()
        if status != "ok":
            fail("worker: " + out)
        if bad:
            fail("loaded pages differ from the stored blocks: %s" % bad[:4])
        return out

    def close(self):
        self.conn.send(("quit",))
        self.proc.join(30)
        if self.proc.exitcode != 0:
            fail("a worker exited %s" % self.proc.exitcode)


def run_request(sched, worker, rid, prompt, pages, want_matched, local=0, vllm_order=False):
    """One request through both sides: local = tokens the engine's own prefix cache
    holds (a load starts after them); vllm_order: the request is freed before the
    scheduler side sees the step's output, as vLLM's scheduler does."""
    req = kc.ConnectorRequest(rid, prompt)
    matched, is_async = sched.get_num_new_matched_tokens(req, local)
    if matched != want_matched or is_async:
        fail("%s: matched %d tokens (async %s), want %d" % (rid, matched, is_async, want_matched))
    sched.update_state_after_alloc(req, pages, matched)
    computed = local + matched
    out_sched = kc.SchedulerOutput(
        scheduled_new_reqs=[kc.NewRequestData(rid, prompt, pages, computed)],
        num_scheduled_tokens={rid: len(prompt) - computed})
    meta = sched.build_connector_meta(out_sched)
    check_loads(rid, meta, pages[local // BS:computed // BS])
    out = worker.step(meta, [(rid, prompt, pages, computed, len(prompt) - computed)])
    if out.invalid_block_ids:
        fail("%s: blocks failed to load: %s" % (rid, sorted(out.invalid_block_ids)))
    if matched and rid not in out.finished_recving:
        fail("%s: its load is not reported finished" % rid)
    if vllm_order:
        delay, _ = sched.request_finished(req, pages)
        sched.update_connector_output(out)
    else:
        sched.update_connector_output(out)
        delay, _ = sched.request_finished(req, pages)
    if delay:
        fail("%s: request_finished holds its pages" % rid)
    return meta


def check_loads(rid, meta, want_pages):
    got = [p for s in meta.loads for p in s.pages]
    if got != want_pages:
        fail("%s: the metadata loads into pages %s, want %s" % (rid, got, want_pages))


def preempted(sched, worker, rid, prompt, pages, new_pages, want_matched):
    """A request loaded, preempted before it finished, and resumed on other pages: it
    is loaded again there."""
    req = kc.ConnectorRequest(rid, prompt)
    matched, _ = sched.get_num_new_matched_tokens(req, 0)
    sched.update_state_after_alloc(req, pages, matched)
    meta = sched.build_connector_meta(kc.SchedulerOutput(
        scheduled_new_reqs=[kc.NewRequestData(rid, prompt, pages, matched)],
        num_scheduled_tokens={rid: BS}))  # one block of chunked prefill, then preempted
    check_loads(rid, meta, pages[:matched // BS])
    sched.update_connector_output(worker.step(meta, [(rid, prompt, pages, matched, BS)]))
    # resumed: the engine asks again and allocates new pages
    again, _ = sched.get_num_new_matched_tokens(req, 0)
    if again != want_matched:
        fail("%s: resumed, matched %d, want %d" % (rid, again, want_matched))
    sched.update_state_after_alloc(req, new_pages, again)
    meta = sched.build_connector_meta(kc.SchedulerOutput(
        scheduled_cached_reqs=[kc.CachedRequestData(rid, new_pages, again, True)],
        num_scheduled_tokens={rid: len(prompt) - again}))
    check_loads(rid + " (resumed)", meta, new_pages[:again // BS])
    out = worker.step(meta, [(rid, prompt, new_pages, again, len(prompt) - again)])
    sched.update_connector_output(out)
    sched.request_finished(req, new_pages)


def bad_calls(sched, disable_shm):
    w = kc.KVTierConnector(config(disable_shm), kc.ROLE_WORKER)
    try:
        for call in (lambda: w.get_num_new_matched_tokens(kc.ConnectorRequest("x", [1]), 0),
                     lambda: sched.wait_for_save()):
            try:
                call()
                fail("a call of the other side of the connector was accepted")
            except RuntimeError as e:
                if "side" not in str(e):
                    fail("unclear error for a call of the other side: %s" % e)
        wrong = {n: torch.zeros(2, PAGES, BS, HEADS, HEAD // 2, dtype=torch.float16)
                 for n in layer_names()}
        try:
            w.register_kv_caches(wrong)
            fail("a KV cache of the wrong page size was accepted")
        except ValueError as e:
            if "segment_bytes" not in str(e):
                fail("unclear error for a wrong KV cache: %s" % e)
        try:
            sched.update_connector_output(kc.ConnectorOutput(results=[("put", "nobody", b"x")]))
            fail("a result for an unknown request was accepted")
        except ValueError as e:
            if "nobody" not in str(e):
                fail("unclear error for a foreign result: %s" % e)
        try:
            kc.ConnectorConfig("i", 16, 0, SEG).check()
            fail("num_layers 0 was accepted")
        except ValueError:
            pass
    finally:
        w.close()


def main():
    disable_shm = os.environ.get("IT_DISABLE_SHM") == "1"
    sched = kc.KVTierConnector(config(), kc.ROLE_SCHEDULER)
    base = [(i * 7919 + 13) % 32000 for i in range(80)]
    a = base + [5, 6, 7]                                   # 5 blocks + 3 tokens
    b = base + [(i * 104729) % 32000 for i in range(20)]   # A's 5 blocks, 1 more, 4 tokens
    c = b[:96] + [1, 2, 3, 4, 5]                           # B's 6 blocks + 5 tokens
    w1, w2 = Worker(disable_shm), Worker(disable_shm)
    run_request(sched, w1, "req-a", a, list(range(0, 6)), 0)
    meta = run_request(sched, w2, "req-b", b, list(range(10, 17)), 80)
    if not meta.saves or meta.saves[0].pages != [15]:
        fail("req-b: want its sixth block saved from page 15, got %s" % meta.saves)
    # all of it loaded but the tail: a load and no save; freed before its output
    run_request(sched, w1, "req-c", c, list(range(20, 27)), 96, vllm_order=True)
    # the engine's own cache holds 2 blocks: kvtier loads blocks 2..5 into pages 2..5
    run_request(sched, w2, "req-d", c, list(range(0, 7)), 64, local=32)
    preempted(sched, w1, "req-e", c, list(range(8, 15)), list(range(16, 23)), 96)
    bad_calls(sched, disable_shm)
    w1.close()
    w2.close()
    stats = sched.client.stats(config().instance_id)
    sched.close()
    print("it_connector: 5 requests, %s" % {k: v for k, v in stats.items()
                                              if "hit" in k or "put" in k})


if __name__ == "__main__":
    main()
