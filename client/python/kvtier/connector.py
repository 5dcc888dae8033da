"""kvtier.connector — a KV connector with the shape of vLLM's (KVConnectorBase_V1).

An engine has one scheduler process, which decides what each step computes, and
worker processes, which hold the paged KV cache and move its bytes. The connector
has one side in each (docs/CONNECTOR.md):

scheduler side (role="scheduler"; a kvtier control-role client)
    get_num_new_matched_tokens(request, num_computed_tokens) -> (tokens, False)
        how many prompt tokens beyond num_computed_tokens kvtier holds (a prefix
        lookup; no pin, no side effect);
    update_state_after_alloc(request, blocks, num_external_tokens)
        the pages the engine gave the request; the matched ones are to be loaded;
    build_connector_meta(scheduler_output) -> ConnectorMetadata
        for this step: pins the blocks to load (prepare_get) and reserves the
        blocks this step completes (prepare_put), and hands both tokens to the
        workers as bytes (kvt_token_export), with the pages each block goes to;
    update_connector_output(output)
        the workers' job results (bytes, kvt_token_result_export) come back: the
        windows are completed here, where they were opened;
    request_finished(request, block_ids) -> (False, None)
        ends the request at kvtier (once its last save's result is in).

worker side (role="worker"; a kvtier data-role client)
    register_kv_caches(kv_caches)  {layer name: tensor [2, pages, block_size, ...]}
    bind_connector_metadata(meta) / clear_connector_metadata()
    start_load_kv(forward_context=None)   imports the load tokens, one job per layer
    wait_for_layer_load(layer_name)       waits for that layer's jobs only
    save_kv_layer(layer_name, kv_layer, attn_metadata=None)   one job per layer
    wait_for_save()
    get_finished(finished_req_ids) -> (done_sending, done_recving)
    get_connector_output() -> ConnectorOutput   what goes back to the scheduler

A block is one kvtier key (kvtier.block_keys over block_size tokens, chained from
the first token), stored as 2 x layers segments (layer l's K is segment 2l, its V
2l + 1), each one page of one layer: block_size x num_kv_heads x head_size
elements. Only full blocks of the prompt are stored; a prompt always leaves its
last token to be computed (the engine needs its logits).

The classes that stand in for vLLM's (ConnectorRequest, NewRequestData,
SchedulerOutput) carry the fields of vLLM's that the connector reads, so the
connector runs without vLLM (tests/integration/it_connector.py) and a vLLM adapter
passes vLLM's own objects (examples/vllm_connector/).
"""

import itertools
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import kvtier

__all__ = [
    "ConnectorConfig", "ConnectorRequest", "NewRequestData", "CachedRequestData",
    "SchedulerOutput", "ConnectorMetadata", "LoadSpec", "SaveSpec", "ConnectorOutput",
    "KVTierConnector", "ROLE_SCHEDULER", "ROLE_WORKER",
]

ROLE_SCHEDULER, ROLE_WORKER = "scheduler", "worker"
_LAYOUTS = ("kv_first", "pages_first")  # [2, pages, ...] (flash-attn) or [pages, 2, ...]


@dataclass
class ConnectorConfig:
    """instance_id: the kvtier instance (one model, one KV layout: every process of
    an engine uses the same). segment_bytes: one layer's K (or V) of one page:
    block_size * num_kv_heads * head_size * element size. coordinators / cluster:
    as kvtier.Client's."""
    instance_id: str
    block_size: int
    num_layers: int
    segment_bytes: int
    coordinators: Optional[str] = None
    etcd_endpoints: Optional[str] = None
    cluster: Optional[str] = None
    model: str = ""
    kv_layout: str = "kv_first"
    timeout_ms: int = 5000
    disable_shm: bool = False
    ttl_ms: int = 0  # deadline of stored blocks (0: none), per request_begin

    def check(self):
        for name in ("block_size", "num_layers", "segment_bytes"):
            v = getattr(self, name)
            if not isinstance(v, int) or v <= 0:
                raise ValueError("ConnectorConfig.%s: %r is not a positive integer" % (name, v))
        if 2 * self.num_layers > kvtier.MAX_SEGMENTS:
            raise ValueError("ConnectorConfig.num_layers: %d layers x K/V is over kvtier's %d "
                             "segments per block" % (self.num_layers, kvtier.MAX_SEGMENTS))
        if self.kv_layout not in _LAYOUTS:
            raise ValueError("ConnectorConfig.kv_layout: %r is not one of %s" %
                             (self.kv_layout, ", ".join(_LAYOUTS)))
        if not self.instance_id:
            raise ValueError("ConnectorConfig.instance_id is empty")

    @property
    def segments(self):
        return 2 * self.num_layers

    @property
    def block_bytes(self):
        return self.segments * self.segment_bytes


@dataclass
class ConnectorRequest:
    """The fields of vLLM's Request the connector reads."""
    request_id: str
    prompt_token_ids: List[int]


@dataclass
class NewRequestData:
    """vLLM's NewRequestData: a request scheduled for the first time."""
    req_id: str
    prompt_token_ids: List[int]
    block_ids: List[int]
    num_computed_tokens: int


@dataclass
class CachedRequestData:
    """vLLM's CachedRequestData, one request: scheduled again (chunked prefill, or
    resumed after preemption: then new_block_ids is its whole block list)."""
    req_id: str
    new_block_ids: List[int]
    num_computed_tokens: int
    resumed_from_preemption: bool = False


@dataclass
class SchedulerOutput:
    scheduled_new_reqs: List[NewRequestData] = field(default_factory=list)
    scheduled_cached_reqs: List[CachedRequestData] = field(default_factory=list)
    num_scheduled_tokens: Dict[str, int] = field(default_factory=dict)


@dataclass
class LoadSpec:
    """Blocks to load: token (exported bytes) covers keys; key i goes to pages[i].
    missing: pages whose blocks were gone by the time they were pinned (the engine
    must compute them again: they come back as invalid_block_ids)."""
    req_id: str
    token: bytes
    pages: List[int]
    missing: List[int] = field(default_factory=list)


@dataclass
class SaveSpec:
    """Blocks to store: token (exported bytes) covers keys; key i is in pages[i]."""
    req_id: str
    token: bytes
    pages: List[int]


@dataclass
class ConnectorMetadata:
    """What the scheduler side hands the workers for one step (picklable)."""
    loads: List[LoadSpec] = field(default_factory=list)
    saves: List[SaveSpec] = field(default_factory=list)


@dataclass
class ConnectorOutput:
    """What a worker hands back after a step: vLLM's KVConnectorOutput fields, and
    the job results (kind, req_id, result bytes) the scheduler side completes its
    windows with."""
    finished_sending: set = field(default_factory=set)
    finished_recving: set = field(default_factory=set)
    invalid_block_ids: set = field(default_factory=set)
    results: list = field(default_factory=list)


def _block_ids(blocks):
    """vLLM's KVCacheBlocks (get_block_ids() -> one list per KV cache group) or a list."""
    if hasattr(blocks, "get_block_ids"):
        ids = blocks.get_block_ids()
        return list(ids[0]) if ids and isinstance(ids[0], (list, tuple)) else list(ids)
    return list(blocks or [])


class _SchedState:
    """One request on the scheduler side."""

    def __init__(self, req_id, keys):
        self.req_id = req_id
        self.keys = keys            # full prompt blocks' keys
        self.pages = []             # page of block i
        self.load_first = 0         # blocks [load_first, load_first + load_blocks)
        self.load_blocks = 0        # come from kvtier (those before: the engine's own cache)
        self.load_sent = False
        self.saved_to = 0           # blocks [0, saved_to) stored or handed to a save
        self.computed_to = 0        # blocks [0, computed_to) computed by the end of the step
        self.open = {}              # token id (python id) -> (kind, kvtier.Token)
        self.finished = False
        self.begun = False


class KVTierConnector:
    """One side of the connector: role ROLE_SCHEDULER or ROLE_WORKER."""

    def __init__(self, config, role, client=None, name=None):
        config.check()
        if role not in (ROLE_SCHEDULER, ROLE_WORKER):
            raise ValueError("role: %r is not %r or %r" % (role, ROLE_SCHEDULER, ROLE_WORKER))
        self.config, self.role = config, role
        self._own = client is None
        self.client = client or kvtier.Client(
            coordinators=config.coordinators, etcd_endpoints=config.etcd_endpoints,
            cluster=config.cluster, name=name or "connector-%s-%d" % (role, os.getpid()),
            timeout_ms=config.timeout_ms, disable_shm=config.disable_shm)
        self.client.register_instance(config.instance_id, config.block_size,
                                      config.block_bytes, model=config.model,
                                      segments=config.segments)
        # scheduler side
        self._reqs = {}
        self._computed_hint = {}    # request id -> num_computed_tokens of the last ask
        # worker side
        self._layers = []           # layer names in order
        self._caches = {}           # layer name -> tensor
        self._meta = None
        self._jobs = itertools.count(1)
        self._done = {}             # job id -> ok, for jobs collected
        self._loads = []            # [LoadSpec, imported token, {layer: job}] this step
        self._saves = []            # (SaveSpec, imported token, [jobs])
        self._out = ConnectorOutput()
        # Device KV caches (tensors exposing __cuda_array_interface__): the CUDA stream
        # the copies go on, as an int (a vLLM adapter sets the compute stream, so a
        # save follows the kernel that wrote the layer and a load precedes the one
        # that reads it); None: the kvtier handle's own.
        self.stream = None

    def close(self):
        if self._own and self.client is not None:
            self.client.close()
        self.client = None

    # ---------------------------------------------------------------- scheduler side

    def _state(self, request):
        st = self._reqs.get(request.request_id)
        if st is None:
            keys = kvtier.block_keys(request.prompt_token_ids, self.config.block_size)
            st = _SchedState(request.request_id, keys)
            self._reqs[request.request_id] = st
        return st

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        """Prompt tokens past num_computed_tokens that kvtier can load, and whether
        the load is asynchronous (never: the load runs in the step, layer by layer)."""
        self._need(ROLE_SCHEDULER)
        keys = kvtier.block_keys(request.prompt_token_ids, self.config.block_size)
        # The last prompt token is always computed: a block that ends the prompt
        # is not loaded.
        usable = (len(request.prompt_token_ids) - 1) // self.config.block_size
        if usable <= 0:
            return 0, False
        hits = self.client.lookup(self.config.instance_id, keys[:usable])[0]
        # What the engine has already (its own prefix cache) is where a load starts:
        # update_state_after_alloc reads it back (the last ask before the alloc).
        self._computed_hint[request.request_id] = num_computed_tokens
        return max(0, hits * self.config.block_size - num_computed_tokens), False

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        self._need(ROLE_SCHEDULER)
        st = self._state(request)
        pages = _block_ids(blocks)
        if len(pages) > len(st.pages):
            st.pages = pages
        computed = self._computed_hint.pop(request.request_id, 0)
        loading = any(k == "get" for k, _ in st.open.values())
        if num_external_tokens > 0 and not loading:
            bs = self.config.block_size
            if num_external_tokens % bs or computed % bs:
                raise ValueError("update_state_after_alloc: %d external tokens after %d "
                                 "computed is not whole blocks of %d" %
                                 (num_external_tokens, computed, bs))
            # a new load: the first allocation, or the request resumed after preemption
            st.load_first = computed // bs
            st.load_blocks = num_external_tokens // bs
            st.load_sent = False

    def build_connector_meta(self, scheduler_output):
        """Opens this step's windows at kvtier and describes them for the workers."""
        self._need(ROLE_SCHEDULER)
        meta = ConnectorMetadata()
        cfg = self.config
        steps = []
        for nr in scheduler_output.scheduled_new_reqs:
            st = self._state(ConnectorRequest(nr.req_id, nr.prompt_token_ids))
            st.pages = _block_ids(nr.block_ids)
            if not st.begun:
                self.client.request_begin(cfg.instance_id, st.req_id, ttl_ms=cfg.ttl_ms,
                                          total_blocks=len(st.keys))
                st.begun = True
            steps.append((st, nr.num_computed_tokens))
        for cr in scheduler_output.scheduled_cached_reqs:
            st = self._reqs.get(cr.req_id)
            if st is None:
                continue  # not one of ours (no prompt seen)
            new = _block_ids(cr.new_block_ids)
            # resumed after preemption: new_block_ids is the whole list again
            st.pages = new if cr.resumed_from_preemption else st.pages + new
            steps.append((st, cr.num_computed_tokens))
        for st, computed in steps:
            n_sched = scheduler_output.num_scheduled_tokens.get(st.req_id, 0)
            if st.load_blocks and not st.load_sent:
                meta.loads.append(self._open_load(st))
            # Full prompt blocks this step leaves computed.
            done = min(len(st.keys), (computed + n_sched) // cfg.block_size)
            st.computed_to = max(st.computed_to, done)
            save = self._open_save(st)
            if save is not None:
                meta.saves.append(save)
        return meta

    def _open_load(self, st):
        st.load_sent = True
        first, n = st.load_first, st.load_blocks
        keys = st.keys[first:first + n]
        tok = self.client.prepare_get(self.config.instance_id, st.req_id, keys)
        pinned = set(tok.keys)  # blocks gone since the lookup are left out
        index = {k: i for i, k in enumerate(keys)}
        pages = [st.pages[first + index[k]] for k in tok.keys]
        missing = [st.pages[first + i] for i, k in enumerate(keys) if k not in pinned]
        # Blocks from the first missing one on are the engine's to compute again
        # (invalid_block_ids): they are saved like any computed block.
        held = next((i for i, k in enumerate(keys) if k not in pinned), n)
        st.saved_to = max(st.saved_to, first + held)
        if not tok.keys:
            self.client.complete_get(tok)
            return LoadSpec(st.req_id, b"", [], missing)
        st.open[id(tok)] = ("get", tok)
        return LoadSpec(st.req_id, tok.export(), pages, missing)

    def _open_save(self, st):
        if st.computed_to <= st.saved_to or any(k == "put" for k, _ in st.open.values()):
            return None  # nothing new, or the last save still open: the next step takes it
        first, last = st.saved_to, st.computed_to
        keys = st.keys[first:last]
        parent = st.keys[first - 1] if first else None
        tok = self.client.prepare_put(self.config.instance_id, st.req_id, keys, parent=parent)
        st.saved_to = last
        left = tok.keys  # keys already stored are left out of the token
        if not left:
            self.client.complete_put(tok)
            return None
        index = {k: i for i, k in enumerate(keys)}
        pages = [st.pages[first + index[k]] for k in left]
        st.open[id(tok)] = ("put", tok)
        return SaveSpec(st.req_id, tok.export(), pages)

    def update_connector_output(self, output):
        """Completes the windows whose jobs the workers finished, with their results."""
        self._need(ROLE_SCHEDULER)
        for kind, req_id, data in output.results:
            st = self._reqs.get(req_id)
            if st is None:
                raise ValueError("update_connector_output: a %s result for request %r, which "
                                 "this connector does not hold" % (kind, req_id))
            match = [(k, t) for k, t in st.open.values() if k == kind]
            if not match:
                raise ValueError("update_connector_output: a %s result for request %r, which "
                                 "has no %s window open" % (kind, req_id, kind))
            _, tok = match[0]
            tok.import_result(data)
            del st.open[id(tok)]
            if kind == "get":
                self.client.complete_get(tok)
            else:
                self.client.complete_put(tok)
        for req_id in list(self._reqs):
            st = self._reqs[req_id]
            if st.finished and not st.open:
                self._end(st)

    def request_finished(self, request, block_ids=None):
        """(delay_free, kv_transfer_params): never delays — a step's loads and saves
        are done before the step ends (wait_for_layer_load, wait_for_save), so the
        engine may reuse the pages. A window whose result has not come back yet (vLLM
        frees a request before it hands the scheduler the step's output) keeps the
        request open at kvtier until update_connector_output completes it."""
        self._need(ROLE_SCHEDULER)
        self._computed_hint.pop(request.request_id, None)
        st = self._reqs.get(request.request_id)
        if st is None:
            return False, None
        st.finished = True
        if not st.open:
            self._end(st)
        return False, None

    def _end(self, st):
        """Ends the request at kvtier; its windows are all completed by now."""
        self._reqs.pop(st.req_id, None)
        if st.begun:
            self.client.request_end(self.config.instance_id, st.req_id)

    # ---------------------------------------------------------------- worker side

    def register_kv_caches(self, kv_caches):
        """kv_caches: {layer name: tensor}, in layer order, each [2, pages, block_size,
        heads, head_size] (kv_layout "kv_first") or [pages, 2, ...] ("pages_first")."""
        self._need(ROLE_WORKER)
        names = list(kv_caches)
        if len(names) != self.config.num_layers:
            raise ValueError("register_kv_caches: %d layers, the config says %d" %
                             (len(names), self.config.num_layers))
        for name in names:
            t = kv_caches[name]
            page = self._page(t, 0, 0)
            size = page.numel() * page.element_size()
            if size != self.config.segment_bytes or not page.is_contiguous():
                raise ValueError("register_kv_caches: layer %r: one page of K is %d bytes%s, "
                                 "the config says segment_bytes=%d" %
                                 (name, size, "" if page.is_contiguous() else " (not contiguous)",
                                  self.config.segment_bytes))
        self._layers, self._caches = names, dict(kv_caches)

    def _page(self, t, kv, page):
        return t[kv][page] if self.config.kv_layout == "kv_first" else t[page][kv]

    def _segments(self, layer, pages):
        t = self._caches[self._layers[layer]]
        return [[self._page(t, 0, p), self._page(t, 1, p)] for p in pages]

    def _dev(self, pages):
        """The stream of a device cache's jobs (kvtier.h "Device buffers")."""
        first = self._caches[self._layers[0]] if self._layers else None
        if pages and first is not None and hasattr(first, "__cuda_array_interface__"):
            return {"stream": self.stream}
        return {}

    def bind_connector_metadata(self, meta):
        self._need(ROLE_WORKER)
        self._meta = meta

    def clear_connector_metadata(self):
        self._meta = None

    def start_load_kv(self, forward_context=None, **kwargs):
        """Imports the step's load tokens and starts their first layer. A kvtier token
        moves one job at a time, so each later layer starts when the one before it is
        in place (wait_for_layer_load): layer l + 1 moves while layer l computes."""
        self._need(ROLE_WORKER)
        if not self._caches:
            raise RuntimeError("start_load_kv: register_kv_caches first")
        for spec in (self._meta.loads if self._meta else []):
            self._out.invalid_block_ids.update(spec.missing)
            if not spec.token:
                self._out.finished_recving.add(spec.req_id)
                continue
            load = [spec, self.client.import_token(spec.token), {}]
            self._loads.append(load)
            self._load_next(load)

    def _load_next(self, load):
        """Submits the next layer of a load (after the one before it was collected)."""
        spec, tok, jobs = load
        layer = len(jobs)
        if jobs:
            self._wait([jobs[layer - 1]])
        job = next(self._jobs)
        self.client.submit_get_segments(job, tok, 2 * layer, self._segments(layer, spec.pages),
                                        **self._dev(spec.pages))
        jobs[layer] = job

    def wait_for_layer_load(self, layer_name):
        """Returns when layer layer_name of every load of the step is in its pages, and
        starts the next layer of each."""
        self._need(ROLE_WORKER)
        layer = self._layers.index(layer_name)
        for load in self._loads:
            while layer not in load[2]:
                self._load_next(load)
            self._wait([load[2][layer]])
            if len(load[2]) == layer + 1 and layer + 1 < len(self._layers):
                self._load_next(load)
        if layer == len(self._layers) - 1:
            self._finish_loads()

    def _wait(self, jobs):
        pending = [j for j in jobs if j not in self._done]
        if pending:
            for r in self.client.wait(pending, self.config.timeout_ms * 4):
                self._done[r.job_id] = r.ok

    def _finish(self, kind, spec, tok, jobs):
        """A token's jobs are done: its result goes back to the scheduler side."""
        self._wait(jobs)
        ok = all([self._done.pop(j) for j in jobs])
        if kind == "get" and not ok:
            self._out.invalid_block_ids.update(spec.pages)  # compute them again
        self._out.results.append((kind, spec.req_id, tok.export_result()))
        tok.release()
        (self._out.finished_recving if kind == "get" else
         self._out.finished_sending).add(spec.req_id)

    def _finish_loads(self):
        for load in self._loads:
            while len(load[2]) < len(self._layers):  # layers never waited for
                self._load_next(load)
            spec, tok, jobs = load
            self._finish("get", spec, tok, list(jobs.values()))
        self._loads = []

    def save_kv_layer(self, layer_name, kv_layer=None, attn_metadata=None, **kwargs):
        """Stores layer layer_name of the step's save blocks (its K and V segments)
        from the registered cache (kv_layer, when given, must be that layer's tensor)."""
        self._need(ROLE_WORKER)
        layer = self._layers.index(layer_name)
        if kv_layer is not None and kv_layer is not self._caches[layer_name]:
            self._caches[layer_name] = kv_layer
        if layer == 0:
            self._saves = [(spec, self.client.import_token(spec.token), [])
                           for spec in (self._meta.saves if self._meta else [])]
        for spec, tok, jobs in self._saves:
            if jobs:  # one job at a time per token: the layer before is collected first
                self._wait([jobs[-1]])
            job = next(self._jobs)
            self.client.submit_put_segments(job, tok, 2 * layer,
                                            self._segments(layer, spec.pages),
                                            **self._dev(spec.pages))
            jobs.append(job)

    def wait_for_save(self):
        self._need(ROLE_WORKER)
        for spec, tok, jobs in self._saves:
            self._finish("put", spec, tok, jobs)
        self._saves = []

    def get_finished(self, finished_req_ids=()):
        """(requests whose saves are done, requests whose loads are done) since the
        last call."""
        self._need(ROLE_WORKER)
        return set(self._out.finished_sending), set(self._out.finished_recving)

    def get_connector_output(self):
        """This step's output for the scheduler side; starts the next step's."""
        self._need(ROLE_WORKER)
        if self._loads:
            self._finish_loads()
        out, self._out = self._out, ConnectorOutput()
        return out

    def _need(self, role):
        if self.role != role:
            raise RuntimeError("this is the %s side of the connector; that call belongs to "
                               "the %s side" % (self.role, role))
