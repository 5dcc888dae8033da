"""Two requests that share a prefix, through kvtier.connector, in one process: the
scheduler side and the worker side of the connector as vLLM would drive them, with a
paged KV cache of torch CPU tensors. The first request's blocks are saved layer by
layer as its "model" computes them; the second request finds its prefix in kvtier,
loads those blocks into its own pages layer by layer and computes only the rest.

Run it against a running service (./deploy/run --serve in another terminal):

    KVTIER_LIB=build/client/libkvtier.so PYTHONPATH=client/python \\
        python3 examples/vllm_connector/demo.py tcp://127.0.0.1:7700

It prints what each request matched and loaded, and checks the loaded pages.
"""
import sys

import torch

from kvtier import connector as kc

LAYERS, BLOCK, HEADS, HEAD = 4, 16, 8, 64           # a small model
PAGES = 64                                           # pages of the paged KV cache
NAMES = ["model.layers.%d.self_attn.attn" % i for i in range(LAYERS)]


def fake_attention(tokens, block, layer, kv):
    """Stands in for the model: K or V of one block at one layer, from its prefix."""
    seed = (sum(tokens[:(block + 1) * BLOCK]) * 31 + layer * 7 + kv) % 1000
    return torch.full((BLOCK, HEADS, HEAD), float(seed), dtype=torch.float16)


def step(sched, worker, caches, req_id, prompt, pages):
    req = kc.ConnectorRequest(req_id, prompt)
    # -- scheduler process: how much of the prompt does kvtier have? --
    matched, _ = sched.get_num_new_matched_tokens(req, num_computed_tokens=0)
    sched.update_state_after_alloc(req, pages, matched)
    meta = sched.build_connector_meta(kc.SchedulerOutput(
        scheduled_new_reqs=[kc.NewRequestData(req_id, prompt, pages, matched)],
        num_scheduled_tokens={req_id: len(prompt) - matched}))
    # -- worker process: the forward pass, layer by layer --
    worker.bind_connector_metadata(meta)
    worker.start_load_kv()
    for layer, name in enumerate(NAMES):
        worker.wait_for_layer_load(name)             # this layer's loaded blocks are in place
        for b in range(matched // BLOCK, len(prompt) // BLOCK):   # compute the rest
            for kv in (0, 1):
                caches[name][kv][pages[b]] = fake_attention(prompt, b, layer, kv)
        worker.save_kv_layer(name, caches[name])     # store this layer of the new blocks
    worker.wait_for_save()
    out = worker.get_connector_output()
    worker.clear_connector_metadata()
    # -- scheduler process again: the workers' results close kvtier's windows --
    sched.update_connector_output(out)
    sched.request_finished(req, pages)
    loaded = sum(len(s.pages) for s in meta.loads)
    stored = sum(len(s.pages) for s in meta.saves)
    print("%s: %d prompt tokens, %d matched in kvtier, %d blocks loaded, %d stored" %
          (req_id, len(prompt), matched, loaded, stored))
    for spec in meta.loads:                          # the loaded pages hold the right KV
        for i, page in enumerate(spec.pages):
            for layer, name in enumerate(NAMES):
                assert torch.equal(caches[name][0][page], fake_attention(prompt, i, layer, 0))


def main():
    coordinator = sys.argv[1] if len(sys.argv) > 1 else "tcp://127.0.0.1:7700"
    cfg = kc.ConnectorConfig(instance_id="demo-vllm", block_size=BLOCK, num_layers=LAYERS,
                             segment_bytes=BLOCK * HEADS * HEAD * 2, coordinators=coordinator)
    sched = kc.KVTierConnector(cfg, kc.ROLE_SCHEDULER)
    worker = kc.KVTierConnector(cfg, kc.ROLE_WORKER)
    caches = {n: torch.zeros(2, PAGES, BLOCK, HEADS, HEAD, dtype=torch.float16) for n in NAMES}
    worker.register_kv_caches(caches)
    system = list(range(1000, 1000 + 4 * BLOCK))     # a shared system prompt: 4 blocks
    step(sched, worker, caches, "chat-1", system + [1, 2, 3, 4, 5] * 4, list(range(0, 6)))
    step(sched, worker, caches, "chat-2", system + [9, 8, 7, 6] * 5, list(range(10, 16)))
    worker.close()
    sched.close()


if __name__ == "__main__":
    main()
