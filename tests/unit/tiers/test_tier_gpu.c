/* test_tier_gpu.c — the gpu tier backend (tiers/tier_gpu.h, issue 11 §1 and §6)
 * through the ops table on the fake CUDA runtime: byte-exact round trips of blocks
 * larger than the staging, headers and inventory, the CUDA IPC description opened
 * from a second process onto the same bytes and invalidated by a new epoch, copies
 * only through pinned staging, and the errors of a missing runtime, driver or
 * device and of bad options.
 *
 * KVT_TEST_CUDA_LIBRARY=path runs the same tests on that runtime (a real GPU:
 * tests/device/run); what only the fake can show (its counters, a runtime without
 * IPC or driver, several devices, opening a handle in a forked child, which a real
 * CUDA context does not survive) is skipped there. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <dlfcn.h>

#include "fakecuda.h"
#include "tier.h"
#include "tier_checksum.h"
#include "tier_cuda.h"
#include "tier_gpu.h"

#define SLOT_SIZE (200 * 1024 + 123) /* over three staging halves of 32 KiB, not aligned */
#define CAPACITY 5

/* The fake runtime: where the build put it, or $KVT_FAKECUDA_SO (binaries carried to
 * another machine, tests/device/run). */
static const char *s_fake_so(void)
{
    const char *e = getenv("KVT_FAKECUDA_SO");
    return e && e[0] ? e : KVT_FAKECUDA_SO;
}

static const char *s_lib(void)
{
    const char *real = getenv("KVT_TEST_CUDA_LIBRARY");
    return real && real[0] ? real : s_fake_so();
}

static bool s_real(void)
{
    return strcmp(s_lib(), s_fake_so()) != 0;
}

static tier_config_t s_cfg(void)
{
    tier_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.name, sizeof cfg.name, "gpu0");
    snprintf(cfg.kind, sizeof cfg.kind, "gpu");
    cfg.capacity = CAPACITY;
    cfg.slot_size = SLOT_SIZE;
    assert_int_equal(tier_config_set(&cfg, "cuda_library", s_lib()), 0);
    assert_int_equal(tier_config_set(&cfg, "staging_bytes", "65536"), 0);
    return cfg;
}

static tier_t *s_open(void)
{
    char err[512] = "";
    tier_config_t cfg = s_cfg();
    tier_t *t = tier_open(&cfg, err, sizeof err);
    if (!t)
        fail_msg("open: %s", err);
    return t;
}

/* The fake's counter; under a real runtime the value every caller expects. */
static uint64_t s_counter(const char *name, uint64_t expect)
{
    if (s_real())
        return expect;
    void *h = dlopen(s_fake_so(), RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    kvt_fakecuda_counter_fn fn = (kvt_fakecuda_counter_fn)dlsym(h, KVT_FAKECUDA_COUNTER);
    assert_non_null(fn);
    uint64_t v = fn(name);
    dlclose(h);
    return v;
}

static void s_fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i * 131u + seed * 7u + (i >> 9));
}

static int s_setup(void **state)
{
    (void)state;
    unsetenv("KVT_FAKECUDA_DEVICES");
    unsetenv("KVT_FAKECUDA_NO_DRIVER");
    unsetenv("KVT_FAKECUDA_NO_IPC");
    unsetenv(TIER_CUDA_LIBRARY_ENV);
    return 0;
}

/* `gpu` is a registered kind with the wire's number (schemas/common.proto). */
static void test_registered(void **state)
{
    (void)state;
    assert_ptr_equal(tier_find("gpu"), &tier_gpu_ops);
    assert_int_equal(tier_kind_wire("gpu"), 3);
    assert_string_equal(tier_kind_name(3), "gpu");
}

/* Blocks written in several iov segments read back byte-exact, whole and in
 * pieces larger than the staging; only pinned memory met the copies. */
static void test_round_trip(void **state)
{
    (void)state;
    tier_t *t = s_open();
    uint64_t unpinned = s_counter("unpinned_copies", 0);
    uint8_t *a = malloc(SLOT_SIZE), *b = calloc(1, SLOT_SIZE);
    for (uint64_t slot = 0; slot < CAPACITY; slot++) {
        size_t size = slot == 0 ? 1 : SLOT_SIZE - slot * 1000;
        s_fill(a, size, (unsigned)slot);
        struct iovec w[3] = {
            {a, size / 3}, {a + size / 3, size / 3}, {a + 2 * (size / 3), size - 2 * (size / 3)}};
        assert_int_equal(tier_write(t, slot, w, 3), 0);
        tier_slot_header_t h;
        assert_int_equal(tier_get_header(t, slot, &h), 0);
        assert_int_equal(h.state, TIER_SLOT_WRITING); /* not served until committed */
        assert_int_equal(h.size, size);
    }
    for (uint64_t slot = CAPACITY; slot-- > 0;) {
        size_t size = slot == 0 ? 1 : SLOT_SIZE - slot * 1000;
        s_fill(a, size, (unsigned)slot);
        memset(b, 0, SLOT_SIZE);
        struct iovec r[2] = {{b, size / 2}, {b + size / 2, size - size / 2}};
        assert_int_equal(tier_read(t, slot, r, 2), 0);
        assert_memory_equal(a, b, size);
    }
    /* a piece of a block from its start, as the dispatcher allows */
    struct iovec part = {b, 10};
    assert_int_equal(tier_read(t, 3, &part, 1), 0);
    s_fill(a, 10, 3);
    assert_memory_equal(a, b, 10);
    struct iovec big = {a, SLOT_SIZE + 1};
    assert_int_equal(tier_write(t, 0, &big, 1), -EMSGSIZE);
    assert_int_equal(tier_write(t, CAPACITY, &part, 1), -ERANGE);
    assert_int_equal(s_counter("unpinned_copies", unpinned), unpinned);
    assert_int_equal(s_counter("pending", 0), 0);
    free(a);
    free(b);
    tier_close(&t);
    assert_null(t);
    assert_int_equal(s_counter("allocations", 0), 0);
    assert_int_equal(s_counter("registered", 0), 0);
}

static int s_count(void *arg, uint64_t slot, const tier_slot_header_t *h)
{
    (void)h;
    uint64_t *mask = arg;
    *mask |= 1ull << slot;
    return 0;
}

/* Headers round-trip; inventory and probe report SERVING slots only. */
static void test_headers_inventory(void **state)
{
    (void)state;
    tier_t *t = s_open();
    tier_slot_header_t h = {.state = TIER_SLOT_SERVING,
                            .instance = 7,
                            .size = 99,
                            .checksum = 0x1234,
                            .deadline_ms = 55};
    memset(h.key.b, 0xab, sizeof h.key.b);
    assert_int_equal(tier_put_header(t, 1, &h), 0);
    assert_int_equal(tier_put_header(t, 4, &h), 0);
    tier_slot_header_t w = {.state = TIER_SLOT_WRITING};
    assert_int_equal(tier_put_header(t, 2, &w), 0);
    tier_slot_header_t got;
    assert_int_equal(tier_get_header(t, 4, &got), 0);
    assert_memory_equal(&got, &h, sizeof h);
    uint64_t mask = 0;
    assert_int_equal(tier_inventory(t, s_count, &mask), 0);
    assert_int_equal(mask, (1ull << 1) | (1ull << 4));
    uint64_t slots[3] = {1, 2, 4};
    bool present[3];
    assert_int_equal(tier_probe(t, slots, 3, present), 0);
    assert_true(present[0]);
    assert_false(present[1]);
    assert_true(present[2]);
    tier_slot_header_t bad = {.state = TIER_SLOT_SERVING, .size = SLOT_SIZE + 1};
    assert_int_equal(tier_put_header(t, 0, &bad), -EINVAL);
    tier_close(&t);
}

/* The arena is not host-readable, so the backend checks SERVING headers itself
 * (tier.h): checksum 0 takes the checksum of the bytes written (read back), a wrong
 * size is refused, a slot never written has none to take; a given checksum is kept
 * (as the host tier does) unless verify_put checks it; after a clear, a block
 * written by other means (a same-GPU client) keeps its writer's checksum. */
static void test_checksums_of_written_bytes(void **state)
{
    (void)state;
    for (int verify = 0; verify < 2; verify++) {
        char err[512] = "";
        tier_config_t cfg = s_cfg();
        assert_int_equal(tier_config_set(&cfg, "verify_put", verify ? "true" : "false"), 0);
        tier_t *t = tier_open(&cfg, err, sizeof err);
        assert_non_null(t);
        uint8_t *a = malloc(150000); /* over two staging halves */
        s_fill(a, 150000, 9);
        struct iovec w[2] = {{a, 1000}, {a + 1000, 149000}};
        assert_int_equal(tier_write(t, 1, w, 2), 0);
        tier_slot_header_t h = {.state = TIER_SLOT_SERVING, .size = 150000};
        tier_slot_header_t bad = h;
        bad.checksum = 42;
        assert_int_equal(tier_put_header(t, 1, &bad), verify ? -EBADMSG : 0);
        bad = h;
        bad.size = 149999;
        assert_int_equal(tier_put_header(t, 1, &bad), -EINVAL);
        assert_int_equal(tier_put_header(t, 1, &h), 0);
        tier_slot_header_t got;
        assert_int_equal(tier_get_header(t, 1, &got), 0);
        assert_int_equal(got.checksum, tier_checksum(w, 2));
        h.checksum = got.checksum;
        assert_int_equal(tier_put_header(t, 1, &h), 0); /* the right one passes either way */
        h.checksum = 0;
        assert_int_equal(tier_put_header(t, 2, &h), -ENODATA);
        tier_slot_header_t empty = {.state = TIER_SLOT_EMPTY};
        assert_int_equal(tier_put_header(t, 1, &empty), 0);
        tier_slot_header_t other = {.state = TIER_SLOT_SERVING, .size = 10, .checksum = 77};
        assert_int_equal(tier_put_header(t, 1, &other), 0);
        assert_int_equal(tier_get_header(t, 1, &got), 0);
        assert_int_equal(got.checksum, 77);
        free(a);
        tier_close(&t);
    }
}

static void s_counter_of(void *arg, const char *name, uint64_t value)
{
    if (strcmp(name, "direct_copies") == 0)
        *(uint64_t *)arg = value;
}

/* Host memory the caller registered (a host tier's segment, pinned frames) goes
 * straight to and from the arena, without the staging, and byte-exact. */
static void test_registered_buffers_skip_staging(void **state)
{
    (void)state;
    tier_t *t = s_open();
    char err[512];
    tier_cuda_t *cu = tier_cuda_open(s_lib(), NULL, err, sizeof err);
    assert_non_null(cu);
    size_t len = SLOT_SIZE;
    uint8_t *a = malloc(len), *b = calloc(1, len);
    s_fill(a, len, 77);
    assert_int_equal(cu->host_register(a, len, 0), 0);
    assert_int_equal(cu->host_register(b, len, 0), 0);
    struct iovec w[2] = {{a, 4096}, {a + 4096, len - 4096}};
    assert_int_equal(tier_write(t, 4, w, 2), 0);
    struct iovec r = {b, len};
    assert_int_equal(tier_read(t, 4, &r, 1), 0);
    assert_memory_equal(a, b, len);
    uint64_t direct = 0;
    tier_counters(t, s_counter_of, &direct);
    assert_int_equal(direct, 2);
    /* a pageable buffer still goes through the staging */
    uint8_t *c = calloc(1, len);
    struct iovec rc = {c, len};
    assert_int_equal(tier_read(t, 4, &rc, 1), 0);
    assert_memory_equal(a, c, len);
    tier_counters(t, s_counter_of, &direct);
    assert_int_equal(direct, 2);
    assert_int_equal(s_counter("unpinned_copies", 0), 0);
    cu->host_unregister(a);
    cu->host_unregister(b);
    free(a);
    free(b);
    free(c);
    tier_close(&t);
    tier_cuda_close(&cu);
}

/* describe gives the arena's CUDA IPC handle and the GPU's UUID: a second process
 * opens it and finds slot i's bytes at i * slot_stride. A reopened tier has a new
 * epoch and the old handle opens nothing. */
static void test_describe_ipc(void **state)
{
    (void)state;
    tier_t *t = s_open();
    enum { N = 5000 };
    uint8_t a[N];
    s_fill(a, N, 42);
    struct iovec w = {a, N};
    assert_int_equal(tier_write(t, 2, &w, 1), 0);
    tier_desc_t d;
    tier_describe(t, &d);
    assert_int_equal(d.access_kind, TIER_ACCESS_CUDA_IPC);
    assert_int_equal(d.handle_len, TIER_CUDA_IPC_HANDLE_LEN);
    assert_int_equal(d.slot_stride, 204800 + 4096); /* SLOT_SIZE rounded up to 4096 */
    assert_int_not_equal(d.epoch, 0);
    assert_non_null(strstr(d.detail, "pinned staging 64 KiB"));
    char err[512];
    tier_cuda_t *cu = tier_cuda_open(s_lib(), NULL, err, sizeof err);
    assert_non_null(cu);
    uint8_t uuid[16];
    assert_int_equal(tier_cuda_device_identity(cu, 0, uuid, NULL, 0, err, sizeof err), 0);
    assert_memory_equal(d.gpu_uuid, uuid, 16);
    char text[TIER_CUDA_UUID_STR_LEN];
    tier_cuda_uuid_format(uuid, text, sizeof text);
    assert_string_equal(d.access, text);
    tier_cuda_ipc_handle_t h;
    memcpy(&h, d.handle, sizeof h);
    if (s_real()) { /* the handle is opened by kvt-bench gpu's second process there */
        tier_close(&t);
        tier_cuda_close(&cu);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        void *arena = NULL;
        uint8_t got[N];
        if (cu->ipc_open_mem_handle(&arena, h, TIER_CUDA_IPC_LAZY_PEER_ACCESS) != 0)
            _exit(2);
        if (cu->memcpy_sync(got, (char *)arena + 2 * d.slot_stride, N, TIER_CUDA_D2H) != 0)
            _exit(3);
        _exit(memcmp(got, a, N) == 0 ? 0 : 4);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    uint64_t old_epoch = d.epoch;
    tier_close(&t);
    t = s_open();
    tier_describe(t, &d);
    assert_int_not_equal(d.epoch, old_epoch);
    pid = fork();
    if (pid == 0) {
        void *arena = NULL;
        _exit(cu->ipc_open_mem_handle(&arena, h, 0) == TIER_CUDA_ERR_INVALID_RESOURCE_HANDLE ? 0
                                                                                             : 1);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    tier_close(&t);
    tier_cuda_close(&cu);
}

/* A runtime without IPC still serves frames; describe says there is no handle. */
static void test_no_ipc(void **state)
{
    (void)state;
    if (s_real())
        skip();
    setenv("KVT_FAKECUDA_NO_IPC", "1", 1);
    tier_t *t = s_open();
    tier_desc_t d;
    tier_describe(t, &d);
    assert_int_equal(d.access_kind, TIER_ACCESS_NONE);
    assert_int_equal(d.handle_len, 0);
    assert_non_null(strstr(d.detail, "no CUDA IPC: cudaErrorNotSupported"));
    uint8_t a[64] = {1, 2, 3}, b[64] = {0};
    struct iovec w = {a, sizeof a}, r = {b, sizeof b};
    assert_int_equal(tier_write(t, 0, &w, 1), 0);
    assert_int_equal(tier_read(t, 0, &r, 1), 0);
    assert_memory_equal(a, b, sizeof a);
    tier_close(&t);
    unsetenv("KVT_FAKECUDA_NO_IPC");
}

/* The device option takes an index or a UUID. */
static void test_device_by_uuid(void **state)
{
    (void)state;
    setenv("KVT_FAKECUDA_DEVICES", "3", 1);
    char err[512] = "";
    tier_cuda_t *cu = tier_cuda_open(s_lib(), NULL, err, sizeof err);
    assert_non_null(cu);
    int count = 0;
    assert_int_equal(cu->get_device_count(&count), 0);
    int last = count - 1;
    uint8_t uuid[16];
    assert_int_equal(tier_cuda_device_identity(cu, last, uuid, NULL, 0, err, sizeof err), 0);
    char text[TIER_CUDA_UUID_STR_LEN];
    tier_cuda_uuid_format(uuid, text, sizeof text);
    tier_config_t cfg = s_cfg();
    assert_int_equal(tier_config_set(&cfg, "device", text), 0);
    tier_t *t = tier_open(&cfg, err, sizeof err);
    assert_non_null(t);
    tier_desc_t d;
    tier_describe(t, &d);
    assert_memory_equal(d.gpu_uuid, uuid, 16);
    char want[64];
    snprintf(want, sizeof want, "device %d", last);
    assert_non_null(strstr(d.detail, want));
    tier_close(&t);
    snprintf(want, sizeof want, "%d", count);
    assert_int_equal(tier_config_set(&cfg, "device", want), 0);
    assert_null(tier_open(&cfg, err, sizeof err));
    snprintf(want, sizeof want, "device %d: no such CUDA device (%d found", count, count);
    assert_non_null(strstr(err, want));
    tier_cuda_close(&cu);
    unsetenv("KVT_FAKECUDA_DEVICES");
}

/* What is missing is named: the runtime (and how to point at one), the driver,
 * a device. */
static void test_missing_runtime_driver_device(void **state)
{
    (void)state;
    char err[512] = "";
    tier_config_t cfg = s_cfg();
    assert_int_equal(tier_config_set(&cfg, "cuda_library", "libcudart-missing.so.9"), 0);
    assert_null(tier_open(&cfg, err, sizeof err));
    assert_non_null(strstr(err, "libcudart-missing.so.9"));
    assert_non_null(strstr(err, "tiers.gpu0.cuda_library"));
    assert_non_null(strstr(err, "KVT_CUDA_LIBRARY"));
    if (s_real())
        return; /* a real runtime has its driver and devices */
    cfg = s_cfg();
    setenv("KVT_FAKECUDA_NO_DRIVER", "1", 1);
    assert_null(tier_open(&cfg, err, sizeof err));
    assert_non_null(strstr(err, "tier gpu0: no usable CUDA device"));
    assert_non_null(strstr(err, "cudaErrorInsufficientDriver"));
    assert_non_null(strstr(err, "is the NVIDIA driver loaded?"));
    unsetenv("KVT_FAKECUDA_NO_DRIVER");
    setenv("KVT_FAKECUDA_DEVICES", "0", 1);
    assert_null(tier_open(&cfg, err, sizeof err));
    assert_non_null(strstr(err, "cudaErrorNoDevice"));
    unsetenv("KVT_FAKECUDA_DEVICES");
    assert_int_equal(s_counter("allocations", 0), 0);
}

/* Options are checked before anything is opened, with the key in the message. */
static void test_bad_options(void **state)
{
    (void)state;
    char err[512] = "";
    tier_config_t cfg = s_cfg();
    assert_int_equal(tier_config_set(&cfg, "device", "gpu-one"), 0);
    assert_int_equal(tier_configure(&cfg, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "device: \"gpu-one\" is neither a device index"));
    cfg = s_cfg();
    assert_int_equal(tier_config_set(&cfg, "staging_bytes", "4096"), 0);
    assert_int_equal(tier_configure(&cfg, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "staging_bytes"));
    cfg = s_cfg();
    assert_int_equal(tier_config_set(&cfg, "cuda_library", "/nonexistent/libcudart.so"), 0);
    assert_int_equal(tier_configure(&cfg, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "cuda_library: /nonexistent/libcudart.so"));
    cfg = s_cfg();
    assert_int_equal(tier_config_set(&cfg, "shm", "/x"), 0);
    assert_true(tier_configure(&cfg, err, sizeof err) < 0);
    assert_non_null(strstr(err, "shm"));
}

int main(void)
{
    /* held for the whole run, so the fake's counters outlive each tier's handle */
    void *fake = dlopen(s_lib(), RTLD_NOW | RTLD_LOCAL);
    if (!fake) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_registered, s_setup),
        cmocka_unit_test_setup(test_round_trip, s_setup),
        cmocka_unit_test_setup(test_headers_inventory, s_setup),
        cmocka_unit_test_setup(test_checksums_of_written_bytes, s_setup),
        cmocka_unit_test_setup(test_registered_buffers_skip_staging, s_setup),
        cmocka_unit_test_setup(test_describe_ipc, s_setup),
        cmocka_unit_test_setup(test_no_ipc, s_setup),
        cmocka_unit_test_setup(test_device_by_uuid, s_setup),
        cmocka_unit_test_setup(test_missing_runtime_driver_device, s_setup),
        cmocka_unit_test_setup(test_bad_options, s_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
