"""Device buffers through the Python binding (issue 11 §5), against $KVTIER_COORDINATOR,
with the suite's fake CUDA runtime ($KVT_FAKECUDA_SO: host memory behind device
pointers, loaded by the same dlopen as libcudart): device memory wrapped in an object
exposing __cuda_array_interface__ (as a torch CUDA tensor or a CuPy array does) is
stored and loaded whole and layer by layer, on shared memory and as frames, with an
engine stream and events; mixed host and device buffers are refused. With
IT_EXPECT_IPC=1 (a deployment whose head tier is a gpu tier in another process) the
shared-memory client's gets must have gone device to device through the tier's CUDA
IPC handle (the fake counts the mappings it opened), the frames client's not.
Exit 0 on success, 1 with a message.
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.environ["KVT_SOURCE_DIR"], "client", "python"))
import kvtier  # noqa: E402

FAKE = os.environ["KVT_FAKECUDA_SO"]
cuda = ctypes.CDLL(FAKE)  # the same object libkvtier's dlopen of FAKE returns
cuda.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cuda.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
cuda.cudaStreamCreateWithFlags.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
cuda.cudaEventCreateWithFlags.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
cuda.cudaEventRecord.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
cuda.cudaEventQuery.argtypes = [ctypes.c_void_p]
cuda.kvt_fakecuda_counter.argtypes = [ctypes.c_char_p]
cuda.kvt_fakecuda_counter.restype = ctypes.c_uint64
H2D, D2H = 1, 2
SEGS, SEG, N = 8, 1024, 4
BLOCK = SEGS * SEG


def fail(msg):
    print("it_device: " + msg, file=sys.stderr)
    sys.exit(1)


class DeviceArray:
    """n bytes of (fake) device memory, as a CUDA array library exposes them."""

    def __init__(self, n, ptr=None, owner=None):
        if ptr is None:
            p = ctypes.c_void_p()
            if cuda.cudaMalloc(ctypes.byref(p), n) != 0:
                fail("cudaMalloc failed")
            ptr = p.value
        self.ptr, self.n, self.owner = ptr, n, owner
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (n,),
                                         "typestr": "|u1", "strides": None, "version": 3}

    def segment(self, s, size):
        return DeviceArray(size, self.ptr + s * size, self)

    def write(self, data):
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        cuda.cudaMemcpy(self.ptr, buf, len(data), H2D)

    def read(self):
        buf = ctypes.create_string_buffer(self.n)
        cuda.cudaMemcpy(buf, self.ptr, self.n, D2H)
        return buf.raw


def pattern(salt, i):
    return bytes((salt * 31 + i * 17 + b * 7) % 251 for b in range(BLOCK))


def run(c, instance, salt, keys):
    c.register_instance(instance, 16, BLOCK, segments=SEGS)
    rid = "dev-%d" % salt
    c.request_begin(instance, rid)
    src = [DeviceArray(BLOCK) for _ in range(N)]
    dst = [DeviceArray(BLOCK) for _ in range(N)]
    for i, d in enumerate(src):
        d.write(pattern(salt, i))
    stream, ready, done = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    cuda.cudaStreamCreateWithFlags(ctypes.byref(stream), 1)
    cuda.cudaEventCreateWithFlags(ctypes.byref(ready), 2)
    cuda.cudaEventCreateWithFlags(ctypes.byref(done), 2)
    cuda.cudaEventRecord(ready, stream)  # the engine's "pages written"
    with c.prepare_put(instance, rid, keys) as tok:
        c.submit_put(1, tok, src, BLOCK, stream=stream.value, wait_event=ready.value,
                     done_event=done.value)
        r = c.wait([1], 10000)[0]
        if not r.ok:
            fail("device put: %r %s" % (r, c.last_error))
    if cuda.cudaEventQuery(done) != 0:
        fail("done_event not recorded after the put")
    with c.prepare_get(instance, rid, keys) as tok:  # layer by layer, last layer first
        for s in reversed(range(SEGS)):
            c.submit_get_segments(10 + s, tok, s, [[d.segment(s, SEG)] for d in dst])
            r = c.wait([10 + s], 10000)[0]
            if not r.ok:
                fail("device get of segment %d: %r %s" % (s, r, c.last_error))
    for i, d in enumerate(dst):
        if d.read() != pattern(salt, i):
            fail("block %d came back different" % i)
    with c.prepare_get(instance, rid, keys[:1]) as tok:
        try:
            c.submit_get(20, tok, [dst[0]], BLOCK)
            if not c.wait([20], 10000)[0].ok:
                fail("a device get of one block failed: %s" % c.last_error)
        except kvtier.KvtError as e:
            fail("a device get of one block: %s" % e)
    with c.prepare_get(instance, rid, keys[:2]) as tok:
        try:
            c.submit_get(21, tok, [dst[0], bytearray(BLOCK)], BLOCK)
            fail("a job of one device and one host buffer was accepted")
        except ValueError as e:
            if "one device, one host" not in str(e):
                fail("unclear error for mixed buffers: %s" % e)
    c.request_end(instance, rid)


def main():
    coord = os.environ["KVTIER_COORDINATOR"]
    keys = kvtier.block_keys(range(64 * 16), 16)
    ipc = os.environ.get("IT_EXPECT_IPC") == "1"
    with kvtier.Client(coordinators=coord, name="it-device", cuda_library=FAKE) as c:
        run(c, "it-device-shm", 1, keys[:N])
        opened = cuda.kvt_fakecuda_counter(b"ipc_opened")
        if ipc and opened < 1:
            fail("the gets did not map the gpu tier's arena (CUDA IPC): %d mappings" % opened)
    with kvtier.Client(coordinators=coord, name="it-device-frames", cuda_library=FAKE,
                       disable_shm=True) as c:
        run(c, "it-device-frames", 2, keys[N:2 * N])
        if cuda.kvt_fakecuda_counter(b"ipc_opened") != 0:
            fail("a frames-only client mapped a tier (it closed its first handle's)")
    print("it_device: device blocks stored and loaded exact (shm, frames, layer-wise)")


if __name__ == "__main__":
    main()
