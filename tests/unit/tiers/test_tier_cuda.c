/* test_tier_cuda.c — the CUDA runtime loader (tiers/tier_cuda.h, issue 11 §1) and
 * the protocol of the fake runtime the suite builds (tests/support/fakecuda):
 * errors that name what is missing, the order of the library search, device
 * lookup by index and UUID, streams that run in order and only at
 * synchronisation points, cudaStreamWaitEvent holding a copy until the engine's
 * event, IPC handles opened by another process, registration and pointer kinds. */
#include <errno.h>
#include <fcntl.h>
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
#include "tier_cuda.h"

/* The fake runtime: where the build put it, or $KVT_FAKECUDA_SO (binaries carried to
 * another machine, tests/device/run). */
static const char *s_fake_so(void)
{
    const char *e = getenv("KVT_FAKECUDA_SO");
    return e && e[0] ? e : KVT_FAKECUDA_SO;
}

static char s_log_path[128];

static tier_cuda_t *s_fake(void)
{
    char err[512] = "";
    tier_cuda_t *cu = tier_cuda_open(s_fake_so(), "tiers.gpu0.cuda_library", err, sizeof err);
    if (!cu)
        fail_msg("fake runtime: %s", err);
    return cu;
}

static void *s_control(tier_cuda_t *cu, const char *name)
{
    void *fn = dlsym(cu->dl, name);
    assert_non_null(fn);
    return fn;
}

static char *s_read_log(void)
{
    static char buf[65536];
    FILE *f = fopen(s_log_path, "r");
    if (!f)
        return strcpy(buf, "");
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int s_setup(void **state)
{
    (void)state;
    snprintf(s_log_path, sizeof s_log_path, "/tmp/kvt-test-cuda-%d.log", (int)getpid());
    unlink(s_log_path);
    setenv("KVT_FAKECUDA_LOG", s_log_path, 1);
    unsetenv("KVT_FAKECUDA_DEVICES");
    unsetenv("KVT_FAKECUDA_NO_DRIVER");
    unsetenv(TIER_CUDA_LIBRARY_ENV);
    return 0;
}

static int s_teardown(void **state)
{
    (void)state;
    unlink(s_log_path);
    return 0;
}

/* A path that does not exist: the message names it, the setting it came from and
 * the other way to give one. */
static void test_missing_library_named(void **state)
{
    (void)state;
    char err[512] = "";
    tier_cuda_t *cu =
        tier_cuda_open("/nonexistent/libcudart.so.99", "tiers.gpu0.cuda_library", err, sizeof err);
    assert_null(cu);
    assert_non_null(strstr(err, "/nonexistent/libcudart.so.99"));
    assert_non_null(strstr(err, "tiers.gpu0.cuda_library"));
    assert_non_null(strstr(err, "KVT_CUDA_LIBRARY"));
}

/* The default search: where no runtime is installed (CI), the message says which
 * names were tried and how to point at one. */
static void test_default_search_message(void **state)
{
    (void)state;
    char err[512] = "";
    tier_cuda_t *cu = tier_cuda_open(NULL, "tiers.gpu0.cuda_library", err, sizeof err);
    if (cu) {
        tier_cuda_close(&cu);
        skip(); /* a real runtime is installed here */
    }
    assert_non_null(strstr(err, "libcudart.so"));
    assert_non_null(strstr(err, "KVT_CUDA_LIBRARY or tiers.gpu0.cuda_library"));
}

/* A shared object that is not a CUDA runtime: the first symbol it lacks is named. */
static void test_not_a_runtime(void **state)
{
    (void)state;
    char err[512] = "";
    tier_cuda_t *cu = tier_cuda_open("libm.so.6", NULL, err, sizeof err);
    assert_null(cu);
    assert_non_null(strstr(err, "libm.so.6"));
    assert_non_null(strstr(err, "symbol cudaGetDeviceCount missing"));
}

/* The environment names the runtime when the config does not; the config wins. */
static void test_env_and_config_order(void **state)
{
    (void)state;
    char err[512] = "";
    setenv(TIER_CUDA_LIBRARY_ENV, s_fake_so(), 1);
    tier_cuda_t *cu = tier_cuda_open(NULL, NULL, err, sizeof err);
    assert_non_null(cu);
    assert_string_equal(cu->path, s_fake_so());
    tier_cuda_close(&cu);
    assert_null(cu);
    cu = tier_cuda_open("/nonexistent/cudart.so", NULL, err, sizeof err);
    assert_null(cu);
    assert_non_null(strstr(err, "/nonexistent/cudart.so"));
    setenv(TIER_CUDA_LIBRARY_ENV, "/nonexistent/env-cudart.so", 1);
    cu = tier_cuda_open(NULL, "tiers.gpu0.cuda_library", err, sizeof err);
    assert_null(cu);
    assert_non_null(strstr(err, "/nonexistent/env-cudart.so (KVT_CUDA_LIBRARY)"));
    unsetenv(TIER_CUDA_LIBRARY_ENV);
    tier_cuda_close(&cu); /* NULL is fine */
}

static void test_uuid_text(void **state)
{
    (void)state;
    uint8_t u[16], v[16];
    for (int i = 0; i < 16; i++)
        u[i] = (uint8_t)(0xa0 + i);
    char text[TIER_CUDA_UUID_STR_LEN];
    tier_cuda_uuid_format(u, text, sizeof text);
    assert_string_equal(text, "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf");
    assert_int_equal(tier_cuda_uuid_parse(text, v), 0);
    assert_memory_equal(u, v, 16);
    assert_int_equal(tier_cuda_uuid_parse("a0a1a2a3a4a5a6a7a8a9aaabacadaeaf", v), 0);
    assert_memory_equal(u, v, 16);
    assert_int_equal(tier_cuda_uuid_parse("GPU-a0a1", v), -EINVAL);
    assert_int_equal(tier_cuda_uuid_parse("GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeafff", v),
                     -EINVAL);
    assert_int_equal(tier_cuda_uuid_parse("zz", v), -EINVAL);
}

/* `device` is an index or a UUID; no device and no driver are reported plainly. */
static void test_find_device(void **state)
{
    (void)state;
    tier_cuda_t *cu = s_fake();
    char err[512] = "";
    int dev = -1;
    setenv("KVT_FAKECUDA_DEVICES", "2", 1);
    assert_int_equal(tier_cuda_find_device(cu, "1", &dev, err, sizeof err), 0);
    assert_int_equal(dev, 1);
    uint8_t uuid[16];
    char name[TIER_CUDA_NAME_MAX];
    assert_int_equal(tier_cuda_device_identity(cu, 1, uuid, name, sizeof name, err, sizeof err), 0);
    assert_string_equal(name, "kvtier fake GPU 1");
    char text[TIER_CUDA_UUID_STR_LEN];
    tier_cuda_uuid_format(uuid, text, sizeof text);
    dev = -1;
    assert_int_equal(tier_cuda_find_device(cu, text, &dev, err, sizeof err), 0);
    assert_int_equal(dev, 1);
    assert_int_equal(tier_cuda_find_device(cu, "2", &dev, err, sizeof err), -ENODEV);
    assert_non_null(strstr(err, "no such CUDA device (2 found, 0..1)"));
    assert_int_equal(tier_cuda_find_device(cu, "GPU-00000000-0000-0000-0000-000000000000", &dev,
                                           err, sizeof err),
                     -ENODEV);
    assert_non_null(strstr(err, "no CUDA device has this UUID"));
    assert_int_equal(tier_cuda_find_device(cu, "first", &dev, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "neither a device index"));
    setenv("KVT_FAKECUDA_DEVICES", "0", 1);
    assert_int_equal(tier_cuda_find_device(cu, "0", &dev, err, sizeof err), -ENODEV);
    assert_non_null(strstr(err, "cudaErrorNoDevice"));
    unsetenv("KVT_FAKECUDA_DEVICES");
    setenv("KVT_FAKECUDA_NO_DRIVER", "1", 1);
    assert_int_equal(tier_cuda_find_device(cu, "0", &dev, err, sizeof err), -ENODEV);
    assert_non_null(strstr(err, "cudaErrorInsufficientDriver"));
    unsetenv("KVT_FAKECUDA_NO_DRIVER");
    tier_cuda_close(&cu);
}

/* Async copies run in stream order and only once someone synchronises: a reader
 * that did not wait sees the old bytes. */
static void test_stream_order_lazy(void **state)
{
    (void)state;
    tier_cuda_t *cu = s_fake();
    enum { N = 8192 };
    char *host = malloc(N), *back = calloc(1, N);
    memset(host, 'a', N);
    void *dev = NULL;
    tier_cuda_stream_t s = NULL;
    assert_int_equal(cu->malloc_device(&dev, N), 0);
    assert_int_equal(cu->host_register(host, N, TIER_CUDA_HOST_REGISTER_PORTABLE), 0);
    assert_int_equal(cu->host_register(back, N, 0), 0);
    assert_int_equal(cu->stream_create(&s, TIER_CUDA_STREAM_NON_BLOCKING), 0);
    assert_int_equal(cu->memcpy_async(dev, host, N, TIER_CUDA_H2D, s), 0);
    memset(host + N / 2, 'b', N / 2); /* not yet copied: the copy sees this */
    assert_int_equal(cu->memcpy_async(back, dev, N, TIER_CUDA_D2H, s), 0);
    assert_int_equal(back[0], 0);
    assert_int_equal(cu->stream_synchronize(s), 0);
    assert_int_equal(back[0], 'a');
    assert_int_equal(back[N - 1], 'b');
    /* a copy of the wrong kind, or past the allocation's end, is refused */
    assert_int_equal(cu->memcpy_async(host, dev, N, TIER_CUDA_H2D, s), TIER_CUDA_ERR_INVALID_VALUE);
    assert_int_equal(cu->memcpy_async(dev, host, N + 1, TIER_CUDA_H2D, s),
                     TIER_CUDA_ERR_INVALID_VALUE);
    kvt_fakecuda_counter_fn counter = (kvt_fakecuda_counter_fn)s_control(cu, KVT_FAKECUDA_COUNTER);
    assert_int_equal(counter("unpinned_copies"), 0);
    assert_int_equal(cu->stream_destroy(s), 0);
    assert_int_equal(cu->host_unregister(host), 0);
    assert_int_equal(cu->host_unregister(host), TIER_CUDA_ERR_HOST_MEMORY_NOT_REGISTERED);
    assert_int_equal(cu->host_unregister(back), 0);
    assert_int_equal(cu->free_device(dev), 0);
    assert_int_equal(counter("allocations"), 0);
    free(host);
    free(back);
    tier_cuda_close(&cu);
}

/* The rule the client's ordering relies on (issue 11 §6): a copy queued behind
 * cudaStreamWaitEvent does not start before the engine's event has run. */
static void test_wait_event_orders_copy(void **state)
{
    (void)state;
    tier_cuda_t *cu = s_fake();
    kvt_fakecuda_hold_fn hold = (kvt_fakecuda_hold_fn)s_control(cu, KVT_FAKECUDA_HOLD);
    kvt_fakecuda_hold_fn release = (kvt_fakecuda_hold_fn)s_control(cu, KVT_FAKECUDA_RELEASE);
    enum { N = 4096 };
    char *src = malloc(N), *dst = calloc(1, N);
    memset(src, 'x', N);
    void *dev = NULL;
    tier_cuda_stream_t engine = NULL, tier = NULL;
    tier_cuda_event_t ready = NULL, done = NULL;
    assert_int_equal(cu->malloc_device(&dev, N), 0);
    assert_int_equal(cu->stream_create(&engine, TIER_CUDA_STREAM_NON_BLOCKING), 0);
    assert_int_equal(cu->stream_create(&tier, TIER_CUDA_STREAM_NON_BLOCKING), 0);
    assert_int_equal(cu->event_create(&ready, TIER_CUDA_EVENT_DISABLE_TIMING), 0);
    assert_int_equal(cu->event_create(&done, TIER_CUDA_EVENT_DISABLE_TIMING), 0);
    /* the engine's compute: held, then it fills dev and records `ready` */
    assert_int_equal(hold(engine), 0);
    assert_int_equal(cu->memcpy_async(dev, src, N, TIER_CUDA_H2D, engine), 0);
    assert_int_equal(cu->event_record(ready, engine), 0);
    /* the tier's copy out of dev waits for `ready` */
    assert_int_equal(cu->stream_wait_event(tier, ready, 0), 0);
    assert_int_equal(cu->memcpy_async(dst, dev, N, TIER_CUDA_D2H, tier), 0);
    assert_int_equal(cu->event_record(done, tier), 0);
    assert_int_equal(cu->event_query(done), TIER_CUDA_ERR_NOT_READY);
    assert_int_equal(cu->event_query(ready), TIER_CUDA_ERR_NOT_READY);
    assert_int_equal(dst[0], 0);
    assert_null(strstr(s_read_log(), "exec copy"));
    assert_int_equal(release(engine), 0);
    assert_int_equal(release(engine), -1); /* nothing left to release */
    assert_int_equal(cu->event_synchronize(done), 0);
    assert_int_equal(cu->event_query(done), 0);
    assert_memory_equal(dst, src, N);
    /* the log shows the order: engine copy, its record, the wait, then the tier's copy */
    char *log = s_read_log();
    char *rec = strstr(log, "exec record");
    char *wait = strstr(log, "exec wait");
    assert_non_null(rec);
    assert_non_null(wait);
    assert_true(rec < wait);
    assert_non_null(strstr(wait, "exec copy"));
    /* unregistered host memory at both ends was flagged */
    kvt_fakecuda_counter_fn counter = (kvt_fakecuda_counter_fn)s_control(cu, KVT_FAKECUDA_COUNTER);
    assert_true(counter("unpinned_copies") >= 2);
    assert_int_equal(counter("pending"), 0);
    cu->event_destroy(ready);
    cu->event_destroy(done);
    cu->stream_destroy(engine);
    cu->stream_destroy(tier);
    cu->free_device(dev);
    free(src);
    free(dst);
    tier_cuda_close(&cu);
}

/* An IPC handle opens in another process onto the same bytes, both ways; the
 * process that made it cannot open it, and a freed allocation's handle is dead. */
static void test_ipc_other_process(void **state)
{
    (void)state;
    tier_cuda_t *cu = s_fake();
    enum { N = 65536 };
    char *buf = malloc(N);
    void *dev = NULL, *mine = NULL;
    assert_int_equal(cu->malloc_device(&dev, N), 0);
    memset(buf, 'p', N);
    assert_int_equal(cu->memcpy_sync(dev, buf, N, TIER_CUDA_H2D), 0);
    tier_cuda_ipc_handle_t h;
    assert_int_equal(cu->ipc_get_mem_handle(&h, dev), 0);
    assert_int_equal(cu->ipc_open_mem_handle(&mine, h, TIER_CUDA_IPC_LAZY_PEER_ACCESS),
                     TIER_CUDA_ERR_INVALID_RESOURCE_HANDLE);
    pid_t pid = fork();
    if (pid == 0) {
        void *peer = NULL;
        char got[16];
        if (cu->ipc_open_mem_handle(&peer, h, TIER_CUDA_IPC_LAZY_PEER_ACCESS) != 0)
            _exit(2);
        tier_cuda_ptr_attr_t a;
        if (cu->pointer_get_attributes(&a, peer) != 0 || a.type != TIER_CUDA_MEM_DEVICE)
            _exit(3);
        if (cu->memcpy_sync(got, (char *)peer + N - 16, 16, TIER_CUDA_D2H) != 0 ||
            memcmp(got, "pppppppppppppppp", 16) != 0)
            _exit(4);
        memset(got, 'q', sizeof got);
        if (cu->memcpy_sync(peer, got, 16, TIER_CUDA_H2D) != 0)
            _exit(5);
        _exit(cu->ipc_close_mem_handle(peer) == 0 ? 0 : 6);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(cu->memcpy_sync(buf, dev, 16, TIER_CUDA_D2H), 0);
    assert_memory_equal(buf, "qqqqqqqqqqqqqqqq", 16);
    assert_int_equal(cu->free_device(dev), 0);
    pid = fork();
    if (pid == 0) {
        void *peer = NULL;
        _exit(cu->ipc_open_mem_handle(&peer, h, 0) == TIER_CUDA_ERR_INVALID_RESOURCE_HANDLE ? 0
                                                                                            : 1);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_non_null(strstr(s_read_log(), "ipc_open_mem_handle"));
    free(buf);
    tier_cuda_close(&cu);
}

/* Pointer attributes tell device from registered host from plain host memory; a
 * range registered twice is refused. */
static void test_pointer_kinds_and_registration(void **state)
{
    (void)state;
    tier_cuda_t *cu = s_fake();
    char *host = malloc(8192), plain[8];
    void *dev = NULL;
    assert_int_equal(cu->malloc_device(&dev, 4096), 0);
    assert_int_equal(cu->host_register(host, 8192, 0), 0);
    assert_int_equal(cu->host_register(host + 4096, 16, 0),
                     TIER_CUDA_ERR_HOST_MEMORY_ALREADY_REGISTERED);
    tier_cuda_ptr_attr_t a;
    assert_int_equal(cu->pointer_get_attributes(&a, (char *)dev + 100), 0);
    assert_int_equal(a.type, TIER_CUDA_MEM_DEVICE);
    assert_int_equal(a.device, 0);
    assert_int_equal(cu->pointer_get_attributes(&a, host + 10), 0);
    assert_int_equal(a.type, TIER_CUDA_MEM_HOST);
    assert_int_equal(cu->pointer_get_attributes(&a, plain), 0);
    assert_int_equal(a.type, TIER_CUDA_MEM_UNREGISTERED);
    char text[256];
    assert_non_null(strstr(tier_cuda_strerror(cu, TIER_CUDA_ERR_NO_DEVICE, text, sizeof text),
                           "cudaErrorNoDevice (100): no CUDA-capable device"));
    char err[256];
    assert_int_equal(
        tier_cuda_check(cu, TIER_CUDA_ERR_MEMORY_ALLOCATION, "cudaMalloc(8 GiB)", err, sizeof err),
        -ENOMEM);
    assert_non_null(strstr(err, "cudaMalloc(8 GiB): cudaErrorMemoryAllocation"));
    assert_int_equal(tier_cuda_check(cu, 0, "x", err, sizeof err), 0);
    cu->host_unregister(host);
    cu->free_device(dev);
    free(host);
    tier_cuda_close(&cu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_missing_library_named, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_default_search_message, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_not_a_runtime, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_env_and_config_order, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_uuid_text, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_find_device, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_stream_order_lazy, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_wait_event_orders_copy, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_ipc_other_process, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_pointer_kinds_and_registration, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
