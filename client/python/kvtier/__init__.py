"""kvtier — Python binding of libkvtier (client/kvtier.h), over ctypes.

The same shape as the C API (DESIGN.md §9) for engine connectors: a Client with
the control role (instances, requests, lookups, prepare/complete windows, and a
request's get and put in two round trips: prepare() / complete()) and the
data role (submit jobs over caller buffers, collect completions exactly once),
plus block_keys() and status_name(). Only Python's standard library is used.

The shared library is found through $KVTIER_LIB (a path to libkvtier.so), then
next to this package's repository build directories, then the system loader.
A Client is used by one thread at a time, like the C handle.
"""

import ctypes
import ctypes.util
import os
import struct

__all__ = [
    "Client", "Token", "JobResult", "KvtError", "block_keys", "status_name", "HALF_GET",
    "HALF_PUT",
    "LOOKUP_PREFIX", "LOOKUP_REVERSE", "LOOKUP_PER_KEY", "KEY_BYTES", "MAX_KEYS",
    "MAX_TIERS", "STATS_PAGE", "MEM_HOST", "MEM_CUDA",
]

# Copies of kvtier.h's KVT_KEY_BYTES, KVT_MAX_KEYS, KVT_MAX_TIERS, KVT_STATS_PAGE
# (test_kvtier.py checks them against the header).
KEY_BYTES = 16
MAX_KEYS = 65536
MAX_TIERS = 32
STATS_PAGE = 128
_STATS_TRIES = 4
LOOKUP_PREFIX, LOOKUP_REVERSE, LOOKUP_PER_KEY = 0, 1, 2
_MODES = {"prefix": 0, "reverse": 1, "per_key": 2, 0: 0, 1: 1, 2: 2}


def _find_library():
    env = os.environ.get("KVTIER_LIB")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.abspath(os.path.join(here, "..", "..", ".."))
    for build in sorted(os.listdir(repo)) if os.path.isdir(repo) else []:
        cand = os.path.join(repo, build, "client", "libkvtier.so")
        if build.startswith("build") and os.path.exists(cand):
            return cand
    found = ctypes.util.find_library("kvtier")
    if found:
        return found
    raise OSError("libkvtier.so not found: set KVTIER_LIB to its path")


_lib = ctypes.CDLL(_find_library())


class _Key(ctypes.Structure):
    _fields_ = [("b", ctypes.c_uint8 * KEY_BYTES)]


class _Options(ctypes.Structure):
    _fields_ = [("coordinators", ctypes.c_char_p), ("etcd_endpoints", ctypes.c_char_p),
                ("cluster", ctypes.c_char_p), ("name", ctypes.c_char_p),
                ("timeout_ms", ctypes.c_uint32), ("max_in_flight", ctypes.c_uint32),
                ("disable_shm", ctypes.c_bool),
                ("curve_cert", ctypes.c_char_p), ("curve_server_key", ctypes.c_char_p),
                ("etcd_ca_file", ctypes.c_char_p), ("etcd_cert_file", ctypes.c_char_p),
                ("etcd_key_file", ctypes.c_char_p),
                ("host", ctypes.c_char_p), ("failover_ms", ctypes.c_uint32),
                ("cuda_library", ctypes.c_char_p), ("device_staging", ctypes.c_uint64)]


class _Xfer(ctypes.Structure):
    _fields_ = [("mem", ctypes.c_int), ("stream", ctypes.c_void_p),
                ("wait_event", ctypes.c_void_p), ("done_event", ctypes.c_void_p)]


class _Instance(ctypes.Structure):
    _fields_ = [("instance_id", ctypes.c_char_p), ("model", ctypes.c_char_p),
                ("dtype", ctypes.c_char_p), ("tokens_per_block", ctypes.c_uint32),
                ("bytes_per_block", ctypes.c_uint64), ("segments", ctypes.c_uint32)]


class _Request(ctypes.Structure):
    _fields_ = [("instance_id", ctypes.c_char_p), ("request_id", ctypes.c_char_p),
                ("ttl_ms", ctypes.c_uint64), ("total_blocks", ctypes.c_uint32)]


class _BeginInfo(ctypes.Structure):
    _fields_ = [("branch", ctypes.c_uint32), ("head_tier_id", ctypes.c_uint32),
                ("branch_name", ctypes.c_char * 32)]


class _EndInfo(ctypes.Structure):
    _fields_ = [("closed_windows", ctypes.c_uint32), ("released_pins", ctypes.c_uint32),
                ("aborted_reservations", ctypes.c_uint32)]


class _LookupResult(ctypes.Structure):
    _fields_ = [("hit_count", ctypes.c_uint32), ("prefetch_advised", ctypes.c_bool),
                ("hit", ctypes.POINTER(ctypes.c_bool)),
                ("tier_ids", ctypes.POINTER(ctypes.c_uint32))]


class _TierInfo(ctypes.Structure):
    _fields_ = [("tier_id", ctypes.c_uint32), ("name", ctypes.c_char * 64),
                ("kind", ctypes.c_char * 16), ("endpoint", ctypes.c_char * 256),
                ("capacity", ctypes.c_uint64), ("slot_size", ctypes.c_uint64),
                ("used", ctypes.c_uint64), ("up", ctypes.c_bool),
                ("drain", ctypes.c_int),  # kvt_tier_drain_t
                ("pool", ctypes.c_char * 32)]


DRAIN_STATES = {0: "serving", 1: "draining", 2: "retired"}  # kvtier.h kvt_tier_drain_t


class _ClusterInfo(ctypes.Structure):
    _fields_ = [("cluster", ctypes.c_char * 64), ("leader_endpoint", ctypes.c_char * 256),
                ("leader_epoch", ctypes.c_uint64), ("event_endpoint", ctypes.c_char * 256),
                ("n_tiers", ctypes.c_uint32), ("tiers", _TierInfo * MAX_TIERS),
                ("total_tiers", ctypes.c_uint32),
                ("event_replay_endpoint", ctypes.c_char * 256),
                ("vllm_event_endpoint", ctypes.c_char * 256),
                ("vllm_replay_endpoint", ctypes.c_char * 256),
                ("resigning", ctypes.c_bool),
                ("etcd_cluster_id", ctypes.c_uint64)]


class _Stat(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 64), ("value", ctypes.c_uint64)]


class _JobResult(ctypes.Structure):
    _fields_ = [("job_id", ctypes.c_uint64), ("status", ctypes.c_int),
                ("n_keys", ctypes.c_uint32), ("n_failed", ctypes.c_uint32)]


_P = ctypes.c_void_p
_u32, _u64, _int, _size = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int, ctypes.c_size_t
_KeyP = ctypes.POINTER(_Key)
_sigs = {
    "kvt_status_name": (ctypes.c_char_p, [_int]),
    "kvt_block_keys": (_int, [ctypes.POINTER(_u32), _size, _u32, _KeyP, _KeyP, _size]),
    "kvt_connect": (_P, [ctypes.POINTER(_Options), ctypes.c_char_p, _size]),
    "kvt_close": (None, [ctypes.POINTER(_P)]),
    "kvt_last_error": (ctypes.c_char_p, [_P]),
    "kvt_meta_round_trips": (_u64, [_P]),
    "kvt_leader_epoch": (_u64, [_P]),
    "kvt_register_instance": (_int, [_P, ctypes.POINTER(_Instance)]),
    "kvt_request_begin": (_int, [_P, ctypes.POINTER(_Request)]),
    "kvt_request_begin_ex": (_int, [_P, ctypes.POINTER(_Request), ctypes.POINTER(_BeginInfo)]),
    "kvt_request_end": (_int, [_P, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(_EndInfo)]),
    "kvt_lookup": (_int, [_P, ctypes.c_char_p, ctypes.c_char_p, _int, _u32, _KeyP, _u32,
                          ctypes.POINTER(_LookupResult)]),
    "kvt_touch": (_int, [_P, ctypes.c_char_p, _KeyP, _u32, _u64, ctypes.POINTER(_u32)]),
    "kvt_remove": (_int, [_P, ctypes.c_char_p, _KeyP, _u32, ctypes.POINTER(_u32)]),
    "kvt_cluster_info": (_int, [_P, ctypes.POINTER(_ClusterInfo)]),
    "kvt_stats": (_int, [_P, ctypes.c_char_p, ctypes.POINTER(_Stat), _u32,
                         ctypes.POINTER(_u32)]),
    "kvt_stats_page": (_int, [_P, ctypes.c_char_p, _u32, ctypes.POINTER(_Stat), _u32,
                              ctypes.POINTER(_u32), ctypes.POINTER(_u32)]),
    "kvt_token_count": (_u32, [_P]),
    "kvt_token_keys": (_KeyP, [_P]),
    "kvt_token_tier": (_u32, [_P, _u32]),
    "kvt_submit_get": (_int, [_P, _u64, _P, ctypes.POINTER(_P), _size]),
    "kvt_submit_get_segments": (_int, [_P, _u64, _P, _u32, _u32, ctypes.POINTER(_P)]),
    "kvt_submit_put_segments": (_int, [_P, _u64, _P, _u32, _u32, ctypes.POINTER(_P)]),
    "kvt_submit_put": (_int, [_P, _u64, _P, ctypes.POINTER(_P), _size]),
    "kvt_submit_prefetch": (_int, [_P, _u64, _P]),
    "kvt_submit_get_ex": (_int, [_P, _u64, _P, ctypes.POINTER(_P), _size,
                                 ctypes.POINTER(_Xfer)]),
    "kvt_submit_put_ex": (_int, [_P, _u64, _P, ctypes.POINTER(_P), _size,
                                 ctypes.POINTER(_Xfer)]),
    "kvt_submit_get_segments_ex": (_int, [_P, _u64, _P, _u32, _u32, ctypes.POINTER(_P),
                                          ctypes.POINTER(_Xfer)]),
    "kvt_submit_put_segments_ex": (_int, [_P, _u64, _P, _u32, _u32, ctypes.POINTER(_P),
                                          ctypes.POINTER(_Xfer)]),
    "kvt_get_finished": (_int, [_P, ctypes.POINTER(_JobResult), _u32, ctypes.POINTER(_u32)]),
    "kvt_wait": (_int, [_P, ctypes.POINTER(_u64), _u32, _int, ctypes.POINTER(_JobResult)]),
    "kvt_token_export": (_int, [_P, _P, _P, _size, ctypes.POINTER(_size)]),
    "kvt_token_import": (_int, [_P, ctypes.c_char_p, _size, ctypes.POINTER(_P)]),
    "kvt_token_result_export": (_int, [_P, _P, _P, _size, ctypes.POINTER(_size)]),
    "kvt_token_result_import": (_int, [_P, _P, ctypes.c_char_p, _size]),
    "kvt_token_release": (_int, [_P, ctypes.POINTER(_P)]),
}
class _PutMeta(ctypes.Structure):
    _fields_ = [("parent", _KeyP), ("token_ids", ctypes.POINTER(_u32)),
                ("n_token_ids", _u32)]


class _PrepareInfo(ctypes.Structure):
    _fields_ = [("hit_count", _u32), ("skipped", _u32)]


class _CompleteInfo(ctypes.Structure):
    _fields_ = [("released", _u32), ("committed", _u32), ("failed", _u32)]


class _TrimInfo(ctypes.Structure):
    _fields_ = [("blocks", _u64), ("active", ctypes.c_bool), ("keep_blocks", _u64)]


TRIM_STATUS, TRIM_CANCEL = 1, 2  # kvtier.h KVT_TRIM_STATUS / KVT_TRIM_CANCEL
MAX_SEGMENTS = 4096  # kvtier.h KVT_MAX_SEGMENTS: equal segments of a block
_sigs["kvt_trim"] = (_int, [_P, ctypes.c_char_p, _u64, ctypes.c_uint, ctypes.POINTER(_TrimInfo)])


class _ResignInfo(ctypes.Structure):  # kvtier.h kvt_resign_info_t
    _fields_ = [("old_leader", ctypes.c_char * 64), ("old_epoch", _u64),
                ("windows_open", _u32), ("windows_finished", _u32),
                ("windows_lapsed", _u32), ("standbys", _u32), ("waited_ms", _u64),
                ("new_leader", ctypes.c_char * 64),
                ("new_leader_endpoint", ctypes.c_char * 256), ("new_epoch", _u64)]


class _DrainInfo(ctypes.Structure):  # kvtier.h kvt_drain_info_t
    _fields_ = [("tier_id", _u32), ("state", ctypes.c_int), ("next_tier", ctypes.c_char * 64),
                ("blocks_left", _u64), ("blocks_moved", _u64), ("elapsed_ms", _u64)]


DRAIN_STATUS, DRAIN_CANCEL = 1, 2  # kvtier.h KVT_DRAIN_STATUS / KVT_DRAIN_CANCEL
_sigs["kvt_drain"] = (_int, [_P, ctypes.c_char_p, ctypes.c_uint, ctypes.POINTER(_DrainInfo)])


RESIGN_WAIT_DEFAULT_S, RESIGN_WAIT_MAX_S = 10, 300  # kvtier.h KVT_RESIGN_WAIT_*
_sigs["kvt_leader_resign"] = (_int, [_P, _u32, ctypes.POINTER(_ResignInfo)])


HALF_GET, HALF_PUT = 0, 1  # kvtier.h kvt_half_t
_sigs["kvt_prepare"] = (_int, [_P, ctypes.c_char_p, ctypes.c_char_p, _KeyP, _u32,
                               ctypes.POINTER(_PutMeta), ctypes.POINTER(_P),
                               ctypes.POINTER(_PrepareInfo)])
_sigs["kvt_complete"] = (_int, [_P, ctypes.POINTER(_P), ctypes.POINTER(ctypes.c_bool),
                                ctypes.POINTER(ctypes.c_bool), ctypes.POINTER(_CompleteInfo)])
_sigs["kvt_complete_put_ex"] = (_int, [_P, ctypes.POINTER(_P), ctypes.POINTER(ctypes.c_bool),
                                       ctypes.POINTER(_CompleteInfo)])
_sigs["kvt_token_half"] = (_P, [_P, _int])


MAX_TOKEN_IDS = 65536  # kvtier.h KVT_MAX_TOKEN_IDS: token ids per put
_sigs["kvt_prepare_put_ex"] = (_int, [_P, ctypes.c_char_p, ctypes.c_char_p, _KeyP, _u32,
                                      ctypes.POINTER(_PutMeta), ctypes.POINTER(_P)])
for _kind in ("get", "put", "prefetch"):
    _sigs["kvt_prepare_" + _kind] = (_int, [_P, ctypes.c_char_p, ctypes.c_char_p, _KeyP, _u32,
                                           ctypes.POINTER(_P)])
    _sigs["kvt_complete_" + _kind] = (_int, [_P, ctypes.POINTER(_P),
                                            ctypes.POINTER(ctypes.c_bool)])
for _name, (_res, _args) in _sigs.items():
    _fn = getattr(_lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args


# The wire StatusCode values (schemas/common.proto, kvtier.h kvt_status_t).
OK, NOT_FOUND, INVALID_ARGUMENT, NOT_LEADER, NO_SPACE, TIMEOUT, CONFLICT = range(7)
UNAVAILABLE, INTERNAL, EXPIRED, ALREADY_EXISTS, BUSY, PERMISSION_DENIED, OVERLOADED = range(7, 14)
ABORTED = 14
STATUS_MAX = ABORTED


def status_name(code):
    """'INVALID_ARGUMENT' for -2 or 2; 'UNKNOWN' outside the enum."""
    return _lib.kvt_status_name(int(code)).decode()


class KvtError(Exception):
    """A failed call: .code is the positive status code, .status its name. Calls
    raise the subclass of their status (NotFoundError, BusyError...), so callers can
    catch one kind; every one is a KvtError. KvtError(code, msg) builds the
    subclass of code."""

    def __new__(cls, code=INTERNAL, message=""):
        sub = _ERRORS.get(abs(code), KvtError) if cls is KvtError else cls
        return Exception.__new__(sub)

    def __init__(self, code=INTERNAL, message=""):
        super().__init__(message)
        self.code = abs(code)
        self.status = status_name(code)


class NotFoundError(KvtError):
    pass


class InvalidArgumentError(KvtError):
    pass


class NotLeaderError(KvtError):
    pass


class NoSpaceError(KvtError):
    pass


class TimeoutError(KvtError):  # noqa: A001 (kvtier.TimeoutError, not the builtin)
    pass


class ConflictError(KvtError):
    pass


class UnavailableError(KvtError):
    pass


class InternalError(KvtError):
    pass


class ExpiredError(KvtError):
    pass


class AlreadyExistsError(KvtError):
    pass


class BusyError(KvtError):
    pass


class PermissionDeniedError(KvtError):
    pass


class OverloadedError(KvtError):
    pass


class AbortedError(KvtError):
    pass


# status code -> its exception class (one per code of kvt_status_t but OK)
_ERRORS = {NOT_FOUND: NotFoundError, INVALID_ARGUMENT: InvalidArgumentError,
           NOT_LEADER: NotLeaderError, NO_SPACE: NoSpaceError, TIMEOUT: TimeoutError,
           CONFLICT: ConflictError, UNAVAILABLE: UnavailableError, INTERNAL: InternalError,
           EXPIRED: ExpiredError, ALREADY_EXISTS: AlreadyExistsError, BUSY: BusyError,
           PERMISSION_DENIED: PermissionDeniedError, OVERLOADED: OverloadedError,
           ABORTED: AbortedError}


def _b(s):
    return None if s is None else s.encode() if isinstance(s, str) else bytes(s)


def _keys(keys):
    keys = list(keys)
    arr = (_Key * max(len(keys), 1))()
    for i, k in enumerate(keys):
        k = bytes(k)
        if len(k) != KEY_BYTES:
            raise ValueError("key %d is %d bytes, a block key is 16" % (i, len(k)))
        ctypes.memmove(arr[i].b, k, KEY_BYTES)
    return arr, len(keys)


def block_keys(tokens, tokens_per_block, parent=None):
    """Chained xxh3-128 block keys of a token sequence (kvtier.h kvt_block_keys):
    one 16-byte key per full block; a trailing partial block has none."""
    tokens = list(tokens)
    tarr = (_u32 * max(len(tokens), 1))(*tokens)
    n = len(tokens) // tokens_per_block if tokens_per_block else 0
    out = (_Key * max(n, 1))()
    par = None
    if parent is not None:
        par, _ = _keys([parent])
    rc = _lib.kvt_block_keys(tarr, len(tokens), tokens_per_block, par, out, n)
    if rc < 0:
        raise KvtError(rc, "block_keys: %s" % status_name(rc))
    return [bytes(out[i].b) for i in range(rc)]


MEM_HOST, MEM_CUDA = 0, 1  # kvtier.h kvt_mem_t


def _is_device(b):
    """A CUDA buffer: it exposes __cuda_array_interface__ (a torch CUDA tensor, a CuPy
    or Numba array, or any object wrapping device memory)."""
    return hasattr(b, "__cuda_array_interface__")


def _device_addr(b, nbytes, what):
    cai = b.__cuda_array_interface__
    shape, typestr = tuple(cai.get("shape", ())), cai.get("typestr", "|u1")
    itemsize = int(typestr[2:]) if len(typestr) > 2 and typestr[2:].isdigit() else 1
    size = itemsize
    for d in shape:
        size *= d
    strides = cai.get("strides")
    if strides is not None:
        want, step = [], itemsize
        for d in reversed(shape):
            want.insert(0, step)
            step *= d
        if tuple(strides) != tuple(want):
            raise ValueError("%s: the device array is not contiguous (strides %s)" %
                             (what, strides))
    if size != nbytes:
        raise ValueError("%s: %d bytes, want %d" % (what, size, nbytes))
    ptr = cai["data"][0]
    if not ptr:
        raise ValueError("%s: a NULL device pointer" % what)
    return ptr, b


def _is_tensor(b):
    return hasattr(b, "data_ptr") and hasattr(b, "is_contiguous") and hasattr(b, "numel")


def _buffer_addr(b, nbytes, writes, what):
    """The address of buffer b for a job, and the object to keep alive until the job
    is collected. b: a bytes-like object (bytes, bytearray, memoryview, a numpy
    array) or a CPU tensor (torch: contiguous, nbytes long; read in place, written
    in place by a get). writes: the job writes into it (a get)."""
    if _is_tensor(b):
        dev = getattr(getattr(b, "device", None), "type", "cpu")
        if dev != "cpu":
            raise ValueError("%s: a %s tensor without __cuda_array_interface__" % (what, dev))
        if not b.is_contiguous():
            raise ValueError("%s: the tensor is not contiguous" % what)
        size = b.numel() * b.element_size()
        if size != nbytes:
            raise ValueError("%s: %d bytes, want %d" % (what, size, nbytes))
        return b.data_ptr(), b
    mv = memoryview(b)
    if mv.nbytes != nbytes or not mv.contiguous:
        raise ValueError("%s: %d bytes, want %d contiguous" % (what, mv.nbytes, nbytes))
    if mv.readonly:
        if writes:
            raise ValueError("%s is read-only; a get writes into it" % what)
        c = ctypes.c_char_p(mv.tobytes() if not isinstance(b, bytes) else b)
        return ctypes.cast(c, _P).value, c
    c = (ctypes.c_char * nbytes).from_buffer(mv)
    return ctypes.addressof(c), c


class JobResult:
    __slots__ = ("job_id", "status", "n_keys", "n_failed")

    def __init__(self, r):
        self.job_id, self.status = r.job_id, r.status
        self.n_keys, self.n_failed = r.n_keys, r.n_failed

    @property
    def ok(self):
        return self.status == 0

    def __repr__(self):
        return "JobResult(job_id=%d, status=%s, n_keys=%d, n_failed=%d)" % (
            self.job_id, status_name(self.status), self.n_keys, self.n_failed)


class Token:
    """What a prepare returns; consumed by the matching complete. A get+put token
    (Client.prepare) has two halves, .get and .put: Tokens of kind "get" / "put"
    for submit_get / submit_put, valid until the token is completed."""

    def __init__(self, client, handle, kind, instance=None):
        self._client, self._h, self.kind = client, ctypes.c_void_p(handle), kind
        self.instance = instance  # the instance id it was prepared for
        self.hit_count = self.skipped = 0
        self.imported = False  # Client.import_token: jobs run here, released here
        self._seg_bytes = None  # an imported token: one segment's bytes, as exported
        self._parent_half = False  # a half of a get+put token
        self._halves = []
        if kind == "get_put" and handle:
            for half, name in ((HALF_GET, "get"), (HALF_PUT, "put")):
                h = _lib.kvt_token_half(self._h, half)
                self._halves.append(Token(client, h, name, instance))
                self._halves[-1]._parent_half = True

    @property
    def get(self):
        """The get half (the pinned prefix hits) of a get+put token."""
        return self._halves[0] if self._halves else None

    @property
    def put(self):
        """The put half (the reserved misses) of a get+put token."""
        return self._halves[1] if self._halves else None

    def _consumed(self):
        for h in self._halves:  # the halves go with their token
            h._h = ctypes.c_void_p()

    @property
    def count(self):
        return _lib.kvt_token_count(self._h) if self._h else 0

    def __len__(self):
        return self.count

    @property
    def keys(self):
        p = _lib.kvt_token_keys(self._h) if self._h else None
        return [bytes(p[i].b) for i in range(self.count)] if p else []

    def tier(self, i):
        return _lib.kvt_token_tier(self._h, i) if self._h else 0

    @property
    def live(self):
        """Not completed yet (a half: its token not completed yet)."""
        return bool(self._h)

    # ---- tokens across processes (kvtier.h "Tokens across processes") ----
    def _bytes(self, fn):
        c = self._client
        need = _size()
        c._check(fn(c._h, self._h, None, 0, ctypes.byref(need)))
        buf = ctypes.create_string_buffer(max(need.value, 1))
        n = _size()
        c._check(fn(c._h, self._h, ctypes.cast(buf, _P), need.value, ctypes.byref(n)))
        return buf.raw[:n.value]

    def export(self):
        """The token as bytes ("KVTX" v1) for another process's Client.import_token;
        this token stays here and is completed here once its result came back."""
        return self._bytes(_lib.kvt_token_export)

    def export_result(self):
        """What this (imported) token's jobs recorded, as bytes ("KVTR" v1) for the
        process that prepared it (Token.import_result there)."""
        return self._bytes(_lib.kvt_token_result_export)

    def import_result(self, data):
        """Applies a worker's export_result() to this token, which this process
        prepared; complete it then (success None: the worker's outcome)."""
        data = bytes(data)
        c = self._client
        c._check(_lib.kvt_token_result_import(c._h, self._h, data, len(data)))

    def release(self):
        """Frees an imported token without completing it (its window is the
        exporter's to complete)."""
        c = self._client
        c._check(_lib.kvt_token_release(c._h, ctypes.byref(self._h)))
        self._h = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        """Completes the token if the block did not: with what its jobs recorded,
        or with every key failed when the block raised (nothing half-written
        commits). A half is completed through its token; an imported token is
        released (the process that prepared it completes it)."""
        if not self._h or self.kind in ("get", "put") and self._parent_half:
            return False
        if self.imported:
            self.release()
            return False
        fail = None if exc_type is None else False
        if self.kind == "get_put":
            g = None if fail is None else [False] * (self.get.count if self.get else 0)
            p = None if fail is None else [False] * (self.put.count if self.put else 0)
            self._client.complete(self, g, p)
        else:
            self._client._complete(self.kind, self,
                                   None if fail is None else [False] * self.count)
        return False


class Client:
    """A libkvtier handle (kvt_connect). Use as a context manager or call close()."""

    def __init__(self, coordinators=None, etcd_endpoints=None, cluster=None, name=None,
                 timeout_ms=0, max_in_flight=0, disable_shm=False, curve_cert=None,
                 curve_server_key=None, etcd_ca_file=None, etcd_cert_file=None,
                 etcd_key_file=None, host=None, failover_ms=0, cuda_library=None,
                 device_staging=0):
        """host: this client's host name (a tier's shared memory only when the tier
        registered the same; default $KVTIER_HOST or the machine's). curve_cert / curve_server_key: this client's zcert file and the deployment's
        server public key (a file or its Z85 text), for a deployment with
        security.curve (docs/SECURITY.md); both or neither. etcd_ca_file /
        etcd_cert_file / etcd_key_file: PEM files for https:// etcd_endpoints (a
        deployment with etcd.tls); the certificate and key both or neither.
        failover_ms: how long a call keeps finding a new leader and sending itself
        again (0: 15 s, kvtier.h "Failover"); a window of a leader that is gone ends
        with KvtError code ABORTED. cuda_library: the CUDA runtime device buffers
        load (a path or soname; default $KVT_CUDA_LIBRARY, else libcudart.so...);
        device_staging: bytes of pinned staging its device jobs may hold (0: 256 MiB)."""
        if isinstance(coordinators, (list, tuple)):
            coordinators = ",".join(coordinators)
        if isinstance(etcd_endpoints, (list, tuple)):
            etcd_endpoints = ",".join(etcd_endpoints)
        opts = _Options(_b(coordinators), _b(etcd_endpoints), _b(cluster), _b(name),
                        timeout_ms, max_in_flight, disable_shm, _b(curve_cert),
                        _b(curve_server_key), _b(etcd_ca_file), _b(etcd_cert_file),
                        _b(etcd_key_file), _b(host), failover_ms, _b(cuda_library),
                        device_staging)
        err = ctypes.create_string_buffer(512)
        self._h = ctypes.c_void_p(_lib.kvt_connect(ctypes.byref(opts), err, len(err)))
        if not self._h:
            msg = err.value.decode(errors="replace")
            code = next((c for c in range(1, STATUS_MAX + 1) if ": %s:" % status_name(c) in msg), 8)
            raise KvtError(code, msg)
        self._jobs = {}  # job id -> buffers kept alive until the job is collected
        self._seg_bytes = {}  # instance id -> bytes of one segment (layer-wise instances)

    def close(self):
        if getattr(self, "_h", None):
            _lib.kvt_close(ctypes.byref(self._h))
            self._h = None
            self._jobs.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    @property
    def meta_round_trips(self):
        """Meta-plane requests this handle sent (kvt_meta_round_trips)."""
        return _lib.kvt_meta_round_trips(self._h)

    @property
    def leader_epoch(self):
        """Epoch of the leader this handle talks to, 0 while unknown (kvt_leader_epoch)."""
        return _lib.kvt_leader_epoch(self._h)

    @property
    def last_error(self):
        return _lib.kvt_last_error(self._h).decode(errors="replace")

    def _check(self, rc):
        if rc < 0:
            raise KvtError(rc, self.last_error)
        return rc

    # ---- control role ----

    def register_instance(self, instance_id, tokens_per_block, bytes_per_block, model="",
                          dtype="", segments=0):
        """segments > 1: blocks of that many equal parts (layers x K/V), moved by
        range with submit_get_segments / submit_put_segments."""
        spec = _Instance(_b(instance_id), _b(model), _b(dtype), tokens_per_block,
                         bytes_per_block, segments)
        self._check(_lib.kvt_register_instance(self._h, ctypes.byref(spec)))
        if segments > 1:
            self._seg_bytes[instance_id] = bytes_per_block // segments

    def request_begin(self, instance_id, request_id, ttl_ms=0, total_blocks=0):
        """Begins a request; returns where the scheduler routed it (fixed for its
        life): {"branch": chain index, "branch_name": str, "head_tier_id": int}."""
        req = _Request(_b(instance_id), _b(request_id), ttl_ms, total_blocks)
        info = _BeginInfo()
        self._check(_lib.kvt_request_begin_ex(self._h, ctypes.byref(req), ctypes.byref(info)))
        return {"branch": info.branch, "branch_name": info.branch_name.decode(),
                "head_tier_id": info.head_tier_id}

    def request_end(self, instance_id, request_id):
        info = _EndInfo()
        self._check(_lib.kvt_request_end(self._h, _b(instance_id), _b(request_id),
                                         ctypes.byref(info)))
        return {"closed_windows": info.closed_windows, "released_pins": info.released_pins,
                "aborted_reservations": info.aborted_reservations}

    def lookup(self, instance_id, keys, mode="prefix", window=0, request_id=None):
        """Returns (hit_count, hits, tier_ids, prefetch_advised)."""
        arr, n = _keys(keys)
        hit = (ctypes.c_bool * max(n, 1))()
        tiers = (_u32 * max(n, 1))()
        res = _LookupResult(0, False, hit, tiers)
        self._check(_lib.kvt_lookup(self._h, _b(instance_id), _b(request_id), _MODES[mode],
                                    window, arr, n, ctypes.byref(res)))
        return res.hit_count, [bool(hit[i]) for i in range(n)], list(tiers[:n]), \
            bool(res.prefetch_advised)

    def _prepare(self, kind, instance_id, request_id, keys):
        arr, n = _keys(keys)
        tok = ctypes.c_void_p()
        fn = getattr(_lib, "kvt_prepare_" + kind)
        self._check(fn(self._h, _b(instance_id), _b(request_id), arr, n, ctypes.byref(tok)))
        return Token(self, tok.value, kind, instance_id)

    def import_token(self, data):
        """A token another process exported (Token.export), for this client's
        submit_* calls; release it (or leave a with block) when its result is out."""
        data = bytes(data)
        tok = ctypes.c_void_p()
        self._check(_lib.kvt_token_import(self._h, data, len(data), ctypes.byref(tok)))
        # the C call checked the bytes: kind at 6, block bytes at 56, segments at 64,
        # then the u8-length strings cluster and instance_id from 72 (PROTOCOL.md)
        kind, = struct.unpack_from("<H", data, 6)
        bpb, segs = struct.unpack_from("<QI", data, 56)
        o = 72 + 1 + data[72]
        instance = data[o + 1:o + 1 + data[o]].decode(errors="replace")
        t = Token(self, tok.value, {1: "get", 2: "put", 3: "prefetch"}[kind], instance)
        t.imported = True
        if segs > 1:
            t._seg_bytes = bpb // segs
        return t

    def _complete(self, kind, token, success):
        if token._client is not self:
            raise ValueError("the token belongs to another client")
        mask = None
        if success is not None:
            success = list(success)
            mask = (ctypes.c_bool * max(len(success), 1))(*success)
        fn = getattr(_lib, "kvt_complete_" + kind)
        self._check(fn(self._h, ctypes.byref(token._h), mask))
        token._consumed()

    def prepare_get(self, instance_id, request_id, keys):
        return self._prepare("get", instance_id, request_id, keys)

    def prepare_put(self, instance_id, request_id, keys, parent=None, token_ids=None):
        """parent: the 16-byte key before keys[0] (optional); token_ids: the blocks'
        token ids, tokens_per_block per key (optional, at most MAX_TOKEN_IDS),
        for the event stream (kvt_prepare_put_ex)."""
        if parent is None and token_ids is None:
            return self._prepare("put", instance_id, request_id, keys)
        arr, n = _keys(keys)
        meta = _PutMeta()
        if parent is not None:
            pk, _ = _keys([parent])
            meta.parent = pk
        toks = list(token_ids or [])
        tarr = (_u32 * max(len(toks), 1))(*toks)
        meta.token_ids = tarr
        meta.n_token_ids = len(toks)
        tok = ctypes.c_void_p()
        self._check(_lib.kvt_prepare_put_ex(self._h, _b(instance_id), _b(request_id), arr, n,
                                            ctypes.byref(meta), ctypes.byref(tok)))
        return Token(self, tok.value, "put", instance_id)

    def prepare_prefetch(self, instance_id, request_id, keys):
        return self._prepare("prefetch", instance_id, request_id, keys)

    def prepare(self, instance_id, request_id, keys, parent=None, token_ids=None):
        """A request in two round trips (kvt_prepare): looks up the longest cached
        prefix of keys, pins it and reserves the misses after it, under one token.
        Returns a Token of kind "get_put" with .hit_count, .skipped and its halves
        .get (load with submit_get) and .put (store with submit_put); parent and
        token_ids as prepare_put's."""
        arr, n = _keys(keys)
        meta = None
        keep = []
        if parent is not None or token_ids is not None:
            meta = _PutMeta()
            if parent is not None:
                pk, _ = _keys([parent])
                keep.append(pk)
                meta.parent = pk
            toks = list(token_ids or [])
            tarr = (_u32 * max(len(toks), 1))(*toks)
            keep.append(tarr)
            meta.token_ids = tarr
            meta.n_token_ids = len(toks)
        tok = ctypes.c_void_p()
        info = _PrepareInfo()
        self._check(_lib.kvt_prepare(self._h, _b(instance_id), _b(request_id), arr, n,
                                     ctypes.byref(meta) if meta is not None else None,
                                     ctypes.byref(tok), ctypes.byref(info)))
        t = Token(self, tok.value, "get_put", instance_id)
        t.hit_count, t.skipped = info.hit_count, info.skipped
        return t

    def complete(self, token, get_success=None, put_success=None):
        """Concludes both halves of a prepare() token in one call (kvt_complete):
        one flag per key of each half, or None for what the jobs recorded. Returns
        {"released", "committed", "failed"}."""
        if token._client is not self:
            raise ValueError("the token belongs to another client")
        masks = []
        for flags, half in ((get_success, token.get), (put_success, token.put)):
            if flags is None:
                masks.append(None)
                continue
            flags = list(flags)
            if half is not None and len(flags) != half.count:
                raise ValueError("%d flags for a half of %d keys" % (len(flags), half.count))
            masks.append((ctypes.c_bool * max(len(flags), 1))(*flags))
        info = _CompleteInfo()
        rc = _lib.kvt_complete(self._h, ctypes.byref(token._h), masks[0], masks[1],
                               ctypes.byref(info))
        if not token._h:
            token._consumed()
        self._check(rc)
        return {"released": info.released, "committed": info.committed,
                "failed": info.failed}

    def complete_get(self, token, success=None):
        self._complete("get", token, success)

    def complete_put(self, token, success=None):
        """Concludes a put window (kvt_complete_put_ex). Returns {"committed",
        "failed"}: the blocks now stored and the reservations released. A call that
        raises nothing can still have failed > 0 (a flag False, or a write the
        data role recorded as failed): only the committed blocks are stored."""
        if token._client is not self:
            raise ValueError("the token belongs to another client")
        mask = None
        if success is not None:
            success = list(success)
            mask = (ctypes.c_bool * max(len(success), 1))(*success)
        info = _CompleteInfo()
        rc = _lib.kvt_complete_put_ex(self._h, ctypes.byref(token._h), mask, ctypes.byref(info))
        if not token._h:
            token._consumed()
        self._check(rc)
        return {"committed": info.committed, "failed": info.failed}

    def complete_prefetch(self, token, success=None):
        self._complete("prefetch", token, success)

    def trim(self, instance_id, keep_blocks=0, status_only=False, cancel=False):
        """An operator's trim (kvt_trim): drop the instance's coldest blocks beyond
        keep_blocks (0: all); status_only reports, cancel stops the one running.
        Returns {"blocks", "active", "keep_blocks"}."""
        info = _TrimInfo()
        flags = (TRIM_STATUS if status_only else 0) | (TRIM_CANCEL if cancel else 0)
        self._check(_lib.kvt_trim(self._h, _b(instance_id), keep_blocks, flags,
                                  ctypes.byref(info)))
        return {"blocks": info.blocks, "active": bool(info.active),
                "keep_blocks": info.keep_blocks}

    def drain(self, tier, status_only=False, cancel=False):
        """An operator's drain (kvt_drain): the tier takes no new block and its
        blocks move down its chain; once empty it is retired until cancel=True.
        status_only reports. Raises NotFoundError (no such tier),
        InvalidArgumentError (the last tier of its chain), ConflictError (already
        draining or retired, nothing below to take its blocks). Returns {"tier_id",
        "state" ("serving" / "draining" / "retired"), "next_tier", "blocks_left",
        "blocks_moved", "elapsed_ms"}."""
        info = _DrainInfo()
        flags = (DRAIN_STATUS if status_only else 0) | (DRAIN_CANCEL if cancel else 0)
        self._check(_lib.kvt_drain(self._h, _b(tier), flags, ctypes.byref(info)))
        return {"tier_id": info.tier_id, "state": DRAIN_STATES.get(info.state, str(info.state)),
                "next_tier": info.next_tier.decode(), "blocks_left": info.blocks_left,
                "blocks_moved": info.blocks_moved, "elapsed_ms": info.elapsed_ms}

    def leader_resign(self, wait_s=RESIGN_WAIT_DEFAULT_S):
        """An operator's hand-over (kvt_leader_resign): the leader opens no new
        windows, lets the open ones finish for up to wait_s seconds, then lets a
        standby take over. Raises ConflictError when refused (no standby, one in
        progress). Returns {"old_leader", "old_epoch", "windows_open",
        "windows_finished", "windows_lapsed", "standbys", "waited_ms",
        "new_leader", "new_leader_endpoint", "new_epoch"} (new_epoch 0: no new
        leader answered within failover_ms)."""
        info = _ResignInfo()
        self._check(_lib.kvt_leader_resign(self._h, wait_s, ctypes.byref(info)))
        return {"old_leader": info.old_leader.decode(), "old_epoch": info.old_epoch,
                "windows_open": info.windows_open, "windows_finished": info.windows_finished,
                "windows_lapsed": info.windows_lapsed, "standbys": info.standbys,
                "waited_ms": info.waited_ms, "new_leader": info.new_leader.decode(),
                "new_leader_endpoint": info.new_leader_endpoint.decode(),
                "new_epoch": info.new_epoch}

    def touch(self, instance_id, keys, ttl_ms):
        arr, n = _keys(keys)
        out = _u32()
        self._check(_lib.kvt_touch(self._h, _b(instance_id), arr, n, ttl_ms, ctypes.byref(out)))
        return out.value

    def remove(self, instance_id, keys):
        arr, n = _keys(keys)
        out = _u32()
        self._check(_lib.kvt_remove(self._h, _b(instance_id), arr, n, ctypes.byref(out)))
        return out.value

    def cluster_info(self):
        ci = _ClusterInfo()
        self._check(_lib.kvt_cluster_info(self._h, ctypes.byref(ci)))
        tiers = [{"tier_id": t.tier_id, "name": t.name.decode(), "kind": t.kind.decode(),
                  "endpoint": t.endpoint.decode(), "capacity": t.capacity,
                  "slot_size": t.slot_size, "used": t.used, "up": bool(t.up),
                  "drain": DRAIN_STATES.get(t.drain, str(t.drain)), "pool": t.pool.decode()}
                 for t in ci.tiers[:ci.n_tiers]]
        return {"cluster": ci.cluster.decode(), "leader_endpoint": ci.leader_endpoint.decode(),
                "leader_epoch": ci.leader_epoch, "event_endpoint": ci.event_endpoint.decode(),
                "tiers": tiers, "total_tiers": ci.total_tiers,
                "event_replay_endpoint": ci.event_replay_endpoint.decode(),
                "vllm_event_endpoint": ci.vllm_event_endpoint.decode(),
                "vllm_replay_endpoint": ci.vllm_replay_endpoint.decode(),
                "resigning": bool(ci.resigning), "etcd_cluster_id": ci.etcd_cluster_id}

    def stats_page(self, instance_id=None, offset=0, cap=STATS_PAGE):
        """Counters offset .. offset + cap - 1 in the scheduler's order, as a list of
        (name, value), and the total the scheduler has (kvtier.h kvt_stats_page)."""
        out = (_Stat * max(cap, 1))()
        n, total = _u32(), _u32()
        self._check(_lib.kvt_stats_page(self._h, _b(instance_id), offset, out, cap,
                                        ctypes.byref(n), ctypes.byref(total)))
        return [(out[i].name.decode(), out[i].value) for i in range(n.value)], total.value

    def stats(self, instance_id=None):
        """Every counter, however many pages they take: {name: value}."""
        cap = STATS_PAGE
        for _ in range(_STATS_TRIES):
            page, total = self.stats_page(instance_id, 0, cap)
            if total <= len(page):
                return dict(page)
            cap = total
        raise KvtError(-6, "stats: the counter list grew on each of %d reads" % _STATS_TRIES)

    # ---- data role ----

    @staticmethod
    def _xfer(bufs, stream, wait_event, done_event):
        """The job's kvt_xfer_t: device buffers (all of them expose
        __cuda_array_interface__) or host ones; None for plain host buffers."""
        dev = [_is_device(b) for b in bufs]
        if any(dev) and not all(dev):
            raise ValueError("buffers %d and %d: one device, one host; a job's buffers are "
                             "all of one kind" % (dev.index(True), dev.index(False)))
        if not any(dev) and (stream or wait_event or done_event):
            raise ValueError("stream / wait_event / done_event go with device buffers only")
        if not any(dev):
            return None
        return _Xfer(MEM_CUDA, stream or None, wait_event or None, done_event or None)

    def _submit(self, kind, job_id, token, buffers, length, stream=None, wait_event=None,
                done_event=None):
        bufs = list(buffers)
        if len(bufs) != token.count:
            raise ValueError("%d buffers for %d token keys" % (len(bufs), token.count))
        x = self._xfer(bufs, stream, wait_event, done_event)
        ptrs = (_P * max(len(bufs), 1))()
        keep = []
        for i, b in enumerate(bufs):
            if x is not None:
                addr, c = _device_addr(b, length, "buffer %d" % i)
            else:
                addr, c = _buffer_addr(b, length, kind == "get", "buffer %d" % i)
            ptrs[i] = addr
            keep.append(c)
        if x is not None:
            fn = _lib.kvt_submit_get_ex if kind == "get" else _lib.kvt_submit_put_ex
            self._check(fn(self._h, job_id, token._h, ptrs, length, ctypes.byref(x)))
        else:
            fn = _lib.kvt_submit_get if kind == "get" else _lib.kvt_submit_put
            self._check(fn(self._h, job_id, token._h, ptrs, length))
        self._jobs[job_id] = keep

    def submit_get(self, job_id, token, buffers, length, stream=None, wait_event=None,
                   done_event=None):
        """Reads the token's blocks into writable buffers (bytearray, memoryview, numpy
        arrays, CPU tensors), one per token key, each `length` bytes — or into device
        memory: buffers exposing __cuda_array_interface__, with the copy into them
        after wait_event and done_event recorded when it is done (cudaStream_t /
        cudaEvent_t as ints; kvtier.h "Device buffers"). Keep them until the job is
        collected (the binding holds a reference)."""
        self._submit("get", job_id, token, buffers, length, stream, wait_event, done_event)

    def submit_put(self, job_id, token, buffers, length, stream=None, wait_event=None,
                   done_event=None):
        """Writes one buffer per token key (any bytes-like object of `length` bytes, a
        CPU tensor, or device memory as for submit_get: the copy out of it starts
        after wait_event)."""
        self._submit("put", job_id, token, buffers, length, stream, wait_event, done_event)

    def _submit_segments(self, kind, job_id, token, first, buffers, stream=None,
                         wait_event=None, done_event=None):
        seg = self._seg_bytes.get(token.instance) or token._seg_bytes
        if seg is None:
            raise ValueError("instance %r is not registered with segments on this client: "
                             "register_instance(..., segments=N) first" % (token.instance,))
        rows = [list(r) for r in buffers]
        if len(rows) != token.count or not rows or any(len(r) != len(rows[0]) for r in rows):
            raise ValueError("want %d keys x the same number of segments, got %s" %
                             (token.count, [len(r) for r in rows]))
        count = len(rows[0])
        x = self._xfer([b for r in rows for b in r], stream, wait_event, done_event)
        ptrs = (_P * max(token.count * count, 1))()
        keep = []
        for i, row in enumerate(rows):
            for s, b in enumerate(row):
                what = "key %d segment %d" % (i, first + s)
                addr, c = (_device_addr(b, seg, what) if x is not None else
                           _buffer_addr(b, seg, kind == "get", what))
                ptrs[i * count + s] = addr
                keep.append(c)
        if x is not None:
            fn = (_lib.kvt_submit_get_segments_ex if kind == "get" else
                  _lib.kvt_submit_put_segments_ex)
            self._check(fn(self._h, job_id, token._h, first, count, ptrs, ctypes.byref(x)))
        else:
            fn = _lib.kvt_submit_get_segments if kind == "get" else _lib.kvt_submit_put_segments
            self._check(fn(self._h, job_id, token._h, first, count, ptrs))
        self._jobs[job_id] = keep

    def submit_get_segments(self, job_id, token, first, buffers, stream=None,
                            wait_event=None, done_event=None):
        """Layer-wise get: buffers[i][s] (writable, one segment's bytes; host or device
        as for submit_get) receives key i's segment first + s. Any ranges, any order."""
        self._submit_segments("get", job_id, token, first, buffers, stream, wait_event,
                              done_event)

    def submit_put_segments(self, job_id, token, first, buffers, stream=None,
                            wait_event=None, done_event=None):
        """Layer-wise put: buffers[i][s] is key i's segment first + s; the calls of a
        token cover its segments in order, and a key is written with its last one."""
        self._submit_segments("put", job_id, token, first, buffers, stream, wait_event,
                              done_event)

    def submit_prefetch(self, job_id, token):
        """The service copies the token's blocks up to the head tier (through its
        migrator, tier actor to tier actor); no bytes pass through this process."""
        self._check(_lib.kvt_submit_prefetch(self._h, job_id, token._h))
        self._jobs[job_id] = []

    def get_finished(self, cap=64):
        out = (_JobResult * cap)()
        n = _u32()
        self._check(_lib.kvt_get_finished(self._h, out, cap, ctypes.byref(n)))
        res = [JobResult(out[i]) for i in range(n.value)]
        for r in res:
            self._jobs.pop(r.job_id, None)
        return res

    def wait(self, job_ids, timeout_ms=-1):
        ids = list(job_ids)
        arr = (_u64 * max(len(ids), 1))(*ids)
        out = (_JobResult * max(len(ids), 1))()
        self._check(_lib.kvt_wait(self._h, arr, len(ids), timeout_ms, out))
        res = [JobResult(out[i]) for i in range(len(ids))]
        for r in res:
            self._jobs.pop(r.job_id, None)
        return res
