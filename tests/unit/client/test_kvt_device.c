/* test_kvt_device.c — device buffers (kvtier.h "Device buffers", issue 11 §2):
 * kvt_submit_*_ex with KVT_MEM_CUDA against the real scheduler and a real host tier
 * actor in this process over real ZeroMQ, the CUDA runtime being the suite's fake
 * (tests/support/fakecuda: host memory behind device pointers, streams run in order
 * at synchronisation points, holds to stop a stream). Each test names its rule:
 * device blocks go through pinned staging and come back exact, on shared memory and
 * on frames; a put's copy does not start before the engine's wait_event, and a get's
 * done_event is recorded after the bytes are in device memory; layer-wise segments
 * of device pages; bad input (host pointers as device ones and the reverse, an unknown kind, a
 * stream with host buffers, a runtime that does not load, a job above the staging
 * bound) is INVALID_ARGUMENT with a message, the token kept and nothing stored
 * damaged. */
#include <dlfcn.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "client_testkit.h"
#include "fakecuda.h"
#include "kvtier.h"

#define T_BLOCK 8192u
#define T_SEGS 8u
#define T_SEG (T_BLOCK / T_SEGS)
#define T_TPB 16u
#define T_INST "dev-llama"
#define T_KEYS 4u
#define T_CAP 64u

/* The fake's entry points this test calls itself (the CUDA runtime's C ABI). */
typedef struct {
    void *dl;
    int (*malloc_d)(void **p, size_t n);
    int (*free_d)(void *p);
    int (*memcpy_s)(void *dst, const void *src, size_t n, int kind);
    int (*stream_create)(void **s, unsigned flags);
    int (*stream_destroy)(void *s);
    int (*event_create)(void **e, unsigned flags);
    int (*event_record)(void *e, void *s);
    int (*event_query)(void *e);
    int (*event_destroy)(void *e);
    kvt_fakecuda_hold_fn hold, release;
    kvt_fakecuda_counter_fn counter;
} t_cuda_t;

typedef struct {
    ck_service_t svc;
    const char *lib;
    t_cuda_t cu;
    kvt_client_t *c;  /* shared memory allowed */
    kvt_client_t *cf; /* frames only */
    kvt_key_t keys[T_CAP];
    void *dsrc[T_KEYS], *ddst[T_KEYS]; /* device blocks */
    uint8_t *hsrc[T_KEYS], *hdst[T_KEYS];
    uint32_t next_key;
    uint64_t job;
} t_env_t;

static kvt_client_t *t_client(t_env_t *e, bool disable_shm, const char *lib, uint64_t staging)
{
    char err[512];
    kvt_options_t o = {.coordinators = e->svc.sched_ep,
                       .timeout_ms = 5000,
                       .disable_shm = disable_shm,
                       .cuda_library = lib,
                       .device_staging = staging};
    kvt_client_t *c = kvt_connect(&o, err, sizeof err);
    if (!c)
        fprintf(stderr, "connect: %s\n", err);
    return c;
}

static int t_register(kvt_client_t *c)
{
    kvt_instance_t spec = {.instance_id = T_INST,
                           .model = "llama",
                           .dtype = "fp16",
                           .tokens_per_block = T_TPB,
                           .bytes_per_block = T_BLOCK,
                           .segments = T_SEGS};
    return kvt_register_instance(c, &spec);
}

#define T_SYM(field, name)                                                                         \
    do {                                                                                           \
        *(void **)&e->cu.field = dlsym(e->cu.dl, name);                                            \
        if (!e->cu.field) {                                                                        \
            fprintf(stderr, "fake runtime: %s missing\n", name);                                   \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

static int t_cuda(t_env_t *e)
{
    e->lib = getenv("KVT_FAKECUDA");
    if (!e->lib || !(e->cu.dl = dlopen(e->lib, RTLD_NOW | RTLD_LOCAL))) {
        fprintf(stderr, "KVT_FAKECUDA must name libkvt_fakecuda.so (%s)\n", dlerror());
        return -1;
    }
    T_SYM(malloc_d, "cudaMalloc");
    T_SYM(free_d, "cudaFree");
    T_SYM(memcpy_s, "cudaMemcpy");
    T_SYM(stream_create, "cudaStreamCreateWithFlags");
    T_SYM(stream_destroy, "cudaStreamDestroy");
    T_SYM(event_create, "cudaEventCreateWithFlags");
    T_SYM(event_record, "cudaEventRecord");
    T_SYM(event_query, "cudaEventQuery");
    T_SYM(event_destroy, "cudaEventDestroy");
    T_SYM(hold, KVT_FAKECUDA_HOLD);
    T_SYM(release, KVT_FAKECUDA_RELEASE);
    T_SYM(counter, KVT_FAKECUDA_COUNTER);
    return 0;
}

static int t_setup(void **state)
{
    t_env_t *e = calloc(1, sizeof *e);
    if (t_cuda(e) < 0)
        return -1;
    if (ck_start(&e->svc, "dev", "dev-e2e", T_CAP, T_BLOCK) < 0)
        return -1;
    e->c = t_client(e, false, e->lib, 0);
    e->cf = t_client(e, true, e->lib, 0);
    if (!e->c || !e->cf)
        return -1;
    kvt_cluster_info_t ci;
    for (int i = 0; i < 500; i++) {
        if (kvt_cluster_info(e->c, &ci) == 0 && ci.n_tiers == 1 && ci.tiers[0].up)
            break;
        zclock_sleep(10);
    }
    if (t_register(e->c) != 0 || t_register(e->cf) != 0) {
        fprintf(stderr, "register: %s\n", kvt_last_error(e->c));
        return -1;
    }
    uint32_t tokens[T_CAP * T_TPB];
    for (uint32_t i = 0; i < T_CAP * T_TPB; i++)
        tokens[i] = 8100000u + i;
    if (kvt_block_keys(tokens, T_CAP * T_TPB, T_TPB, NULL, e->keys, T_CAP) != (int)T_CAP)
        return -1;
    for (uint32_t i = 0; i < T_KEYS; i++) {
        if (e->cu.malloc_d(&e->dsrc[i], T_BLOCK) != 0 || e->cu.malloc_d(&e->ddst[i], T_BLOCK) != 0)
            return -1;
        e->hsrc[i] = malloc(T_BLOCK);
        e->hdst[i] = calloc(1, T_BLOCK);
    }
    *state = e;
    return 0;
}

static int t_teardown(void **state)
{
    t_env_t *e = *state;
    kvt_close(&e->c);
    kvt_close(&e->cf);
    ck_stop(&e->svc);
    for (uint32_t i = 0; i < T_KEYS; i++) {
        e->cu.free_d(e->dsrc[i]);
        e->cu.free_d(e->ddst[i]);
        free(e->hsrc[i]);
        free(e->hdst[i]);
    }
    free(e);
    return 0;
}

/* Fills the source device blocks with a pattern of salt (through host copies). */
static void t_fill(t_env_t *e, uint32_t salt)
{
    for (uint32_t i = 0; i < T_KEYS; i++) {
        for (uint32_t b = 0; b < T_BLOCK; b++)
            e->hsrc[i][b] = (uint8_t)(salt * 29u + i * 131u + b * 7u + 3u);
        assert_int_equal(e->cu.memcpy_s(e->dsrc[i], e->hsrc[i], T_BLOCK, 1 /* H2D */), 0);
        static const uint8_t zero[T_BLOCK];
        assert_int_equal(e->cu.memcpy_s(e->ddst[i], zero, T_BLOCK, 1), 0);
    }
}

/* The destination device blocks equal the sources (read back to the host). */
static void t_check_dst(t_env_t *e, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        assert_int_equal(e->cu.memcpy_s(e->hdst[i], e->ddst[i], T_BLOCK, 2 /* D2H */), 0);
        assert_memory_equal(e->hdst[i], e->hsrc[i], T_BLOCK);
    }
}

static kvt_job_result_t t_wait(kvt_client_t *c, uint64_t job)
{
    kvt_job_result_t r;
    assert_int_equal(kvt_wait(c, &job, 1, 10000, &r), 0);
    return r;
}

static const char *t_begin(t_env_t *e, kvt_client_t *c, char *rid, size_t len)
{
    snprintf(rid, len, "r-%" PRIu64, ++e->job);
    kvt_request_t r = {.instance_id = T_INST, .request_id = rid};
    if (kvt_request_begin(c, &r) != 0)
        fail_msg("request_begin: %s", kvt_last_error(c));
    return rid;
}

/* Keys not used by an earlier test (the tier keeps what they stored). */
static const kvt_key_t *t_keys(t_env_t *e, uint32_t n)
{
    assert_true(e->next_key + n <= T_CAP);
    e->next_key += n;
    return &e->keys[e->next_key - n];
}

/* Whole device blocks put and got back on client c (shared memory or frames). */
static void t_round_trip(t_env_t *e, kvt_client_t *c, uint32_t salt)
{
    char rid[32];
    t_begin(e, c, rid, sizeof rid);
    const kvt_key_t *keys = t_keys(e, T_KEYS);
    t_fill(e, salt);
    kvt_xfer_t x = {.mem = KVT_MEM_CUDA};
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_put(c, T_INST, rid, keys, T_KEYS, &tok), 0);
    uint64_t job = ++e->job;
    assert_int_equal(kvt_submit_put_ex(c, job, tok, (const void *const *)e->dsrc, T_BLOCK, &x), 0);
    kvt_job_result_t r = t_wait(c, job);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.n_failed, 0);
    assert_int_equal(kvt_complete_put(c, &tok, NULL), 0);
    assert_int_equal(kvt_prepare_get(c, T_INST, rid, keys, T_KEYS, &tok), 0);
    assert_int_equal(kvt_token_count(tok), T_KEYS);
    job = ++e->job;
    assert_int_equal(kvt_submit_get_ex(c, job, tok, e->ddst, T_BLOCK, &x), 0);
    r = t_wait(c, job);
    assert_int_equal(r.status, 0);
    assert_int_equal(kvt_complete_get(c, &tok, NULL), 0);
    t_check_dst(e, T_KEYS);
    assert_int_equal(kvt_request_end(c, T_INST, rid, NULL), 0);
}

/* Rule: device blocks go through the handle's pinned staging (no unpinned copy) and
 * come back exact, on shared memory and on frames. */
static void test_device_round_trip(void **state)
{
    t_env_t *e = *state;
    uint64_t unpinned = e->cu.counter("unpinned_copies");
    uint64_t copies = e->cu.counter("copies");
    t_round_trip(e, e->c, 1);
    t_round_trip(e, e->cf, 2);
    assert_true(e->cu.counter("copies") >= copies + 4 * T_KEYS);
    /* the only unpinned copies are this test's own: t_fill's 2 and t_check_dst's 1
     * per key and round trip */
    assert_int_equal(e->cu.counter("unpinned_copies"), unpinned + 2 * 3 * T_KEYS);
    assert_true(e->cu.counter("registered") >= 2); /* the two handles' staging */
}

/* Rule: a put's copy out of the device waits for the engine's event; the job is not
 * reported before it ran, and nothing is stored before it; a get's done_event is
 * recorded after its bytes are in device memory. */
static void test_device_event_order(void **state)
{
    t_env_t *e = *state;
    kvt_client_t *c = e->c;
    void *engine = NULL, *ready = NULL, *done = NULL;
    assert_int_equal(e->cu.stream_create(&engine, 1), 0);
    assert_int_equal(e->cu.event_create(&ready, 2), 0);
    assert_int_equal(e->cu.event_create(&done, 2), 0);
    char rid[32];
    t_begin(e, c, rid, sizeof rid);
    const kvt_key_t *keys = t_keys(e, T_KEYS);
    t_fill(e, 3);
    /* The engine's stream is held: its "kernel" has not finished writing the pages. */
    assert_int_equal(e->cu.hold(engine), 0);
    assert_int_equal(e->cu.event_record(ready, engine), 0);
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_put(c, T_INST, rid, keys, T_KEYS, &tok), 0);
    kvt_xfer_t x = {.mem = KVT_MEM_CUDA, .wait_event = ready, .done_event = done};
    uint64_t job = ++e->job;
    uint64_t copies = e->cu.counter("copies");
    assert_int_equal(kvt_submit_put_ex(c, job, tok, (const void *const *)e->dsrc, T_BLOCK, &x), 0);
    kvt_job_result_t r;
    assert_int_equal(kvt_wait(c, &job, 1, 200, &r), -KVT_TIMEOUT);
    assert_int_equal(e->cu.counter("copies"), copies); /* not one byte copied yet */
    assert_int_equal(e->cu.event_query(done), 600);    /* cudaErrorNotReady */
    uint32_t hits = 99;
    kvt_lookup_result_t lr = {0};
    assert_int_equal(kvt_lookup(c, T_INST, NULL, KVT_LOOKUP_PREFIX, 0, keys, T_KEYS, &lr), 0);
    hits = lr.hit_count;
    assert_int_equal(hits, 0);
    assert_int_equal(e->cu.release(engine), 0);
    r = t_wait(c, job);
    assert_int_equal(r.status, 0);
    assert_int_equal(e->cu.counter("copies"), copies + T_KEYS);
    assert_int_equal(e->cu.event_query(done), 0);
    assert_int_equal(kvt_complete_put(c, &tok, NULL), 0);
    /* The get: its copy into the device waits for the engine's "pages free" event. */
    assert_int_equal(e->cu.hold(engine), 0);
    assert_int_equal(e->cu.event_record(ready, engine), 0);
    assert_int_equal(kvt_prepare_get(c, T_INST, rid, keys, T_KEYS, &tok), 0);
    job = ++e->job;
    assert_int_equal(kvt_submit_get_ex(c, job, tok, e->ddst, T_BLOCK, &x), 0);
    assert_int_equal(kvt_wait(c, &job, 1, 200, &r), -KVT_TIMEOUT);
    assert_int_equal(e->cu.event_query(done), 600);
    assert_int_equal(e->cu.release(engine), 0);
    r = t_wait(c, job);
    assert_int_equal(r.status, 0);
    assert_int_equal(e->cu.event_query(done), 0);
    assert_int_equal(kvt_complete_get(c, &tok, NULL), 0);
    t_check_dst(e, T_KEYS);
    assert_int_equal(kvt_request_end(c, T_INST, rid, NULL), 0);
    e->cu.event_destroy(ready);
    e->cu.event_destroy(done);
    e->cu.stream_destroy(engine);
}

/* Rule: layer-wise segments of device pages move like host ones: stored in two
 * ranges, loaded in reverse, exact (shared memory and frames). */
static void t_segments(t_env_t *e, kvt_client_t *c, uint32_t salt)
{
    char rid[32];
    t_begin(e, c, rid, sizeof rid);
    const kvt_key_t *keys = t_keys(e, T_KEYS);
    t_fill(e, salt);
    void *src[T_KEYS * T_SEGS], *dst[T_KEYS * T_SEGS];
    kvt_xfer_t x = {.mem = KVT_MEM_CUDA};
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_put(c, T_INST, rid, keys, T_KEYS, &tok), 0);
    for (uint32_t first = 0; first < T_SEGS; first += T_SEGS / 2) {
        for (uint32_t i = 0; i < T_KEYS; i++)
            for (uint32_t s = 0; s < T_SEGS / 2; s++)
                src[i * (T_SEGS / 2) + s] = (uint8_t *)e->dsrc[i] + (first + s) * T_SEG;
        uint64_t job = ++e->job;
        assert_int_equal(kvt_submit_put_segments_ex(c, job, tok, first, T_SEGS / 2,
                                                    (const void *const *)src, &x),
                         0);
        assert_int_equal(t_wait(c, job).status, 0);
    }
    assert_int_equal(kvt_complete_put(c, &tok, NULL), 0);
    assert_int_equal(kvt_prepare_get(c, T_INST, rid, keys, T_KEYS, &tok), 0);
    for (int s = (int)T_SEGS - 1; s >= 0; s--) {
        for (uint32_t i = 0; i < T_KEYS; i++)
            dst[i] = (uint8_t *)e->ddst[i] + (uint32_t)s * T_SEG;
        uint64_t job = ++e->job;
        assert_int_equal(kvt_submit_get_segments_ex(c, job, tok, (uint32_t)s, 1, dst, &x), 0);
        assert_int_equal(t_wait(c, job).status, 0);
    }
    assert_int_equal(kvt_complete_get(c, &tok, NULL), 0);
    t_check_dst(e, T_KEYS);
    assert_int_equal(kvt_request_end(c, T_INST, rid, NULL), 0);
}

static void test_device_segments(void **state)
{
    t_env_t *e = *state;
    t_segments(e, e->c, 4);
    t_segments(e, e->cf, 5);
}

/* Rule: bad device submits are INVALID_ARGUMENT with a message; the token is kept
 * (a host put on it then works) and nothing stored is damaged. */
static void test_device_bad_input(void **state)
{
    t_env_t *e = *state;
    kvt_client_t *c = e->c;
    char rid[32];
    t_begin(e, c, rid, sizeof rid);
    const kvt_key_t *keys = t_keys(e, T_KEYS);
    t_fill(e, 6);
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_put(c, T_INST, rid, keys, T_KEYS, &tok), 0);
    kvt_xfer_t x = {.mem = KVT_MEM_CUDA};
    uint64_t job = ++e->job;
    /* host buffers passed as device ones */
    assert_int_equal(kvt_submit_put_ex(c, job, tok, (const void *const *)e->hsrc, T_BLOCK, &x),
                     -KVT_INVALID_ARGUMENT);
    assert_non_null(strstr(kvt_last_error(c), "not CUDA device memory"));
    /* an unknown kind, and a stream with host buffers */
    kvt_xfer_t bad = {.mem = (kvt_mem_t)7};
    assert_int_equal(kvt_submit_put_ex(c, job, tok, (const void *const *)e->hsrc, T_BLOCK, &bad),
                     -KVT_INVALID_ARGUMENT);
    assert_non_null(strstr(kvt_last_error(c), "KVT_MEM_HOST"));
    kvt_xfer_t host_stream = {.mem = KVT_MEM_HOST, .stream = (void *)&bad};
    assert_int_equal(
        kvt_submit_put_ex(c, job, tok, (const void *const *)e->hsrc, T_BLOCK, &host_stream),
        -KVT_INVALID_ARGUMENT);
    assert_non_null(strstr(kvt_last_error(c), "KVT_MEM_CUDA"));
    /* device buffers passed as host memory, on a handle whose runtime is open */
    assert_int_equal(kvt_submit_put(c, job, tok, (const void *const *)e->dsrc, T_BLOCK),
                     -KVT_INVALID_ARGUMENT);
    assert_non_null(strstr(kvt_last_error(c), "is CUDA device memory"));
    /* the token is intact: a host put on it goes through */
    assert_int_equal(kvt_submit_put(c, job, tok, (const void *const *)e->hsrc, T_BLOCK), 0);
    assert_int_equal(t_wait(c, job).status, 0);
    assert_int_equal(kvt_complete_put(c, &tok, NULL), 0);
    assert_int_equal(kvt_request_end(c, T_INST, rid, NULL), 0);

    /* a runtime that does not load: the message names it */
    kvt_client_t *nolib = t_client(e, false, "/nonexistent/libcudart.so.12", 0);
    assert_non_null(nolib);
    assert_int_equal(t_register(nolib), 0);
    t_begin(e, nolib, rid, sizeof rid);
    assert_int_equal(kvt_prepare_get(nolib, T_INST, rid, keys, T_KEYS, &tok), 0);
    assert_int_equal(kvt_submit_get_ex(nolib, ++e->job, tok, e->ddst, T_BLOCK, &x),
                     -KVT_INVALID_ARGUMENT);
    assert_non_null(strstr(kvt_last_error(nolib), "/nonexistent/libcudart.so.12"));
    /* the same token reads the blocks into host memory: nothing was damaged */
    job = ++e->job;
    assert_int_equal(kvt_submit_get(nolib, job, tok, (void *const *)e->hdst, T_BLOCK), 0);
    assert_int_equal(t_wait(nolib, job).status, 0);
    for (uint32_t i = 0; i < T_KEYS; i++)
        assert_memory_equal(e->hdst[i], e->hsrc[i], T_BLOCK);
    assert_int_equal(kvt_complete_get(nolib, &tok, NULL), 0);
    assert_int_equal(kvt_request_end(nolib, T_INST, rid, NULL), 0);
    kvt_close(&nolib);

    /* a job above the staging bound */
    kvt_client_t *small = t_client(e, false, e->lib, T_BLOCK);
    assert_non_null(small);
    assert_int_equal(t_register(small), 0);
    t_begin(e, small, rid, sizeof rid);
    assert_int_equal(kvt_prepare_get(small, T_INST, rid, keys, T_KEYS, &tok), 0);
    assert_int_equal(kvt_submit_get_ex(small, ++e->job, tok, e->ddst, T_BLOCK, &x),
                     -KVT_INVALID_ARGUMENT);
    assert_non_null(strstr(kvt_last_error(small), "staging bound"));
    assert_int_equal(kvt_complete_get(small, &tok, NULL), 0);
    assert_int_equal(kvt_request_end(small, T_INST, rid, NULL), 0);
    kvt_close(&small);
}

/* Rule: a device get's copy straight from a slot that runs after the token's lease
 * lapsed (it waited for the engine's event that long) fails its keys EXPIRED: the
 * pin may be gone and the slot another block's, so the bytes are not vouched for. */
static void test_device_direct_copy_after_lease(void **state)
{
    t_env_t *e = *state;
    ck_service_t svc = {0};
    assert_int_equal(ck_tier_start(&svc, "devlease", T_CAP, T_BLOCK), 0);
    sched_config_t sc;
    ck_sched_config(&sc, "dev-lease", T_CAP, T_BLOCK);
    sc.pin_lease_ms = 2000; /* a transfer relies on it for 1 s (kvti_token_lapsed) */
    svc.sched = sched_actor_new(&sc);
    assert_non_null(svc.sched);
    sched_actor_endpoint(svc.sched, svc.sched_ep, sizeof svc.sched_ep);
    assert_int_equal(ck_announce(svc.sched, &svc), 0);
    char err[512];
    kvt_options_t o = {.coordinators = svc.sched_ep, .timeout_ms = 5000, .cuda_library = e->lib};
    kvt_client_t *c = kvt_connect(&o, err, sizeof err);
    assert_non_null(c);
    kvt_cluster_info_t ci;
    for (int i = 0; i < 500; i++) {
        if (kvt_cluster_info(c, &ci) == 0 && ci.n_tiers == 1 && ci.tiers[0].up)
            break;
        zclock_sleep(10);
    }
    assert_int_equal(t_register(c), 0);
    char rid[32];
    t_begin(e, c, rid, sizeof rid);
    t_fill(e, 9);
    kvt_xfer_t x = {.mem = KVT_MEM_CUDA};
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_put(c, T_INST, rid, e->keys, 1, &tok), 0);
    uint64_t job = ++e->job;
    assert_int_equal(kvt_submit_put_ex(c, job, tok, (const void *const *)e->dsrc, T_BLOCK, &x), 0);
    assert_int_equal(t_wait(c, job).status, 0);
    assert_int_equal(kvt_complete_put(c, &tok, NULL), 0);

    void *engine = NULL, *ready = NULL;
    assert_int_equal(e->cu.stream_create(&engine, 1), 0);
    assert_int_equal(e->cu.event_create(&ready, 2), 0);
    assert_int_equal(e->cu.hold(engine), 0);
    assert_int_equal(e->cu.event_record(ready, engine), 0);
    assert_int_equal(kvt_prepare_get(c, T_INST, rid, e->keys, 1, &tok), 0);
    kvt_xfer_t xw = {.mem = KVT_MEM_CUDA, .wait_event = ready};
    job = ++e->job;
    assert_int_equal(kvt_submit_get_ex(c, job, tok, e->ddst, T_BLOCK, &xw), 0);
    zclock_sleep(1300); /* the engine's event comes past the part of the lease relied on */
    assert_int_equal(e->cu.release(engine), 0);
    kvt_job_result_t r = t_wait(c, job);
    assert_int_equal(r.status, -KVT_EXPIRED);
    assert_int_equal(r.n_failed, 1);
    assert_non_null(strstr(kvt_last_error(c), "lease lapsed"));
    int rc = kvt_complete_get(c, &tok, NULL);
    assert_true(rc == 0 || rc == -KVT_EXPIRED);
    assert_int_equal(kvt_request_end(c, T_INST, rid, NULL), 0);
    kvt_close(&c);
    e->cu.event_destroy(ready);
    e->cu.stream_destroy(engine);
    ck_stop(&svc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_round_trip),
        cmocka_unit_test(test_device_event_order),
        cmocka_unit_test(test_device_segments),
        cmocka_unit_test(test_device_bad_input),
        cmocka_unit_test(test_device_direct_copy_after_lease),
    };
    return cmocka_run_group_tests(tests, t_setup, t_teardown);
}
