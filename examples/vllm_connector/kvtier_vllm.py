"""A vLLM KV connector over kvtier.connector: the thin adapter between vLLM's
KVConnectorBase_V1 and kvtier's connector (client/python/kvtier/connector.py).

Not run by kvtier's tests (vLLM is not installable on the project's machines); the
connector it wraps is (tests/integration/it_connector.py, and demo.py next to this
file). Written against vLLM's v1 connector API as of 0.10/0.11; vLLM moves fast —
check the signatures of the version you run. Use it with

    vllm serve MODEL --kv-transfer-config '{"kv_connector": "KVTierConnectorV1",
        "kv_connector_module_path": "kvtier_vllm", "kv_role": "kv_both",
        "kv_connector_extra_config": {"coordinators": "tcp://127.0.0.1:7700"}}'

with this directory and client/python on PYTHONPATH and KVTIER_LIB naming
libkvtier.so.
"""
import torch
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1, KVConnectorMetadata, KVConnectorRole)

from kvtier import connector as kc


class KVTierMetadata(KVConnectorMetadata):
    """What the scheduler hands the workers each step: kvtier tokens as bytes."""

    def __init__(self, meta):
        self.meta = meta


def _config(vllm_config):
    extra = vllm_config.kv_transfer_config.kv_connector_extra_config or {}
    model, cache, par = vllm_config.model_config, vllm_config.cache_config, \
        vllm_config.parallel_config
    elem = torch.tensor([], dtype=model.dtype).element_size()
    seg = cache.block_size * model.get_num_kv_heads(par) * model.get_head_size() * elem
    # One kvtier instance per model and KV layout: every engine serving the same
    # model with the same layout shares its blocks.
    instance = extra.get("instance_id") or "%s-tp%d-bs%d" % (
        model.model.replace("/", "_"), par.tensor_parallel_size, cache.block_size)
    return kc.ConnectorConfig(instance_id=instance, block_size=cache.block_size,
                              num_layers=model.get_num_layers(par), segment_bytes=seg,
                              coordinators=extra.get("coordinators"),
                              etcd_endpoints=extra.get("etcd_endpoints"),
                              cluster=extra.get("cluster"), model=model.model,
                              ttl_ms=int(extra.get("ttl_ms", 0)))


def _cached(scheduler_output):
    """vLLM's CachedRequestData (one object of lists) as one entry per request."""
    c = scheduler_output.scheduled_cached_reqs
    if isinstance(c, list):
        return c
    resumed = getattr(c, "resumed_from_preemption", [False] * len(c.req_ids))
    return [kc.CachedRequestData(rid, (c.new_block_ids[i] or [[]])[0], c.num_computed_tokens[i],
                                 bool(resumed[i]))
            for i, rid in enumerate(c.req_ids)]


class KVTierConnectorV1(KVConnectorBase_V1):
    def __init__(self, vllm_config, role):
        super().__init__(vllm_config=vllm_config, role=role)
        side = kc.ROLE_SCHEDULER if role == KVConnectorRole.SCHEDULER else kc.ROLE_WORKER
        self._kv = kc.KVTierConnector(_config(vllm_config), side)
        self._load_errors = set()

    # ---- scheduler side ----
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return self._kv.get_num_new_matched_tokens(request, num_computed_tokens)

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self._kv.update_state_after_alloc(request, blocks, num_external_tokens)

    def build_connector_meta(self, scheduler_output):
        out = kc.SchedulerOutput(
            scheduled_new_reqs=[kc.NewRequestData(r.req_id, r.prompt_token_ids, r.block_ids[0],
                                                  r.num_computed_tokens)
                                for r in scheduler_output.scheduled_new_reqs],
            scheduled_cached_reqs=_cached(scheduler_output),
            num_scheduled_tokens=dict(scheduler_output.num_scheduled_tokens))
        return KVTierMetadata(self._kv.build_connector_meta(out))

    def update_connector_output(self, connector_output):
        # The workers' job results ride in kv_connector_stats (a picklable field of
        # KVConnectorOutput); see get_kv_connector_stats below.
        results = getattr(connector_output, "kv_connector_stats", None)
        if results is not None:
            self._kv.update_connector_output(results)

    def request_finished(self, request, block_ids):
        return self._kv.request_finished(request, block_ids)

    # ---- worker side ----
    def register_kv_caches(self, kv_caches):
        self._kv.register_kv_caches(kv_caches)

    def start_load_kv(self, forward_context, **kwargs):
        self._kv.stream = torch.cuda.current_stream().cuda_stream
        self._kv.bind_connector_metadata(self._get_connector_metadata().meta)
        self._kv.start_load_kv()

    def wait_for_layer_load(self, layer_name):
        self._kv.wait_for_layer_load(layer_name)

    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs):
        self._kv.save_kv_layer(layer_name, kv_layer)

    def wait_for_save(self):
        self._kv.wait_for_save()

    def get_finished(self, finished_req_ids):
        # Loads and saves end within their step (wait_for_layer_load, wait_for_save):
        # nothing finishes asynchronously, so vLLM has nothing to free later.
        return None, None

    def get_block_ids_with_load_errors(self):
        # blocks gone between the lookup and the pin, or whose load failed: vLLM
        # computes them again
        errors, self._load_errors = self._load_errors, set()
        return errors

    def get_kv_connector_stats(self):
        out = self._kv.get_connector_output()
        self._load_errors |= out.invalid_block_ids
        return out
