/* test_kvt_segments.c — layer-wise blocks (issue 11 §2): an instance declares its
 * block as equal segments (layers x K/V) and kvt_submit_put_segments /
 * kvt_submit_get_segments move ranges of them, one job per call, against the real
 * scheduler and a real host tier actor in this process over real ZeroMQ. Each test
 * names its rule: segments scattered over separate buffers are stored layer by
 * layer and read back exact in any order, on shared memory (in place) and on frames
 * (staged); the put's checksum covers the whole block (a whole-block read over
 * frames, which checks it on arrival, gets the bytes); a put completed before its
 * last segment commits nothing; bad ranges, order, pointers and specs are
 * INVALID_ARGUMENT with a message, the token kept and nothing stored damaged. */
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
#include "kvtier.h"

#define T_BLOCK 8192u
#define T_SEGS 16u /* 8 layers x K/V */
#define T_SEG (T_BLOCK / T_SEGS)
#define T_TPB 16u
#define T_INST "llama-lw"
#define T_PLAIN "llama-one"
#define T_KEYS 8u /* source and destination buffers for keys [0, T_KEYS) of a call */
#define T_CAP 64u

typedef struct {
    ck_service_t svc;
    kvt_client_t *c;  /* shared memory allowed */
    kvt_client_t *cf; /* frames only */
    kvt_key_t keys[T_CAP];
    uint8_t *seg_src[T_KEYS][T_SEGS]; /* one buffer per segment: an engine's pages */
    uint8_t *seg_dst[T_KEYS][T_SEGS];
    uint8_t *whole[T_KEYS];
    uint64_t job;
} t_env_t;

static kvt_client_t *t_client(t_env_t *e, bool disable_shm)
{
    char err[512];
    kvt_options_t o = {
        .coordinators = e->svc.sched_ep, .timeout_ms = 5000, .disable_shm = disable_shm};
    kvt_client_t *c = kvt_connect(&o, err, sizeof err);
    if (!c)
        fprintf(stderr, "connect: %s\n", err);
    return c;
}

static int t_register(kvt_client_t *c, const char *id, uint32_t segments)
{
    kvt_instance_t spec = {.instance_id = id,
                           .model = "llama",
                           .dtype = "fp16",
                           .tokens_per_block = T_TPB,
                           .bytes_per_block = T_BLOCK,
                           .segments = segments};
    return kvt_register_instance(c, &spec);
}

static int t_setup(void **state)
{
    t_env_t *e = calloc(1, sizeof *e);
    if (ck_start(&e->svc, "lw", "lw-e2e", T_CAP, T_BLOCK) < 0)
        return -1;
    e->c = t_client(e, false);
    e->cf = t_client(e, true);
    if (!e->c || !e->cf)
        return -1;
    kvt_cluster_info_t ci;
    for (int i = 0; i < 500; i++) {
        if (kvt_cluster_info(e->c, &ci) == 0 && ci.n_tiers == 1 && ci.tiers[0].up)
            break;
        zclock_sleep(10);
    }
    if (t_register(e->c, T_INST, T_SEGS) != 0 || t_register(e->c, T_PLAIN, 0) != 0) {
        fprintf(stderr, "register: %s\n", kvt_last_error(e->c));
        return -1;
    }
    uint32_t tokens[T_CAP * T_TPB];
    for (uint32_t i = 0; i < T_CAP * T_TPB; i++)
        tokens[i] = 7100000u + i;
    if (kvt_block_keys(tokens, T_CAP * T_TPB, T_TPB, NULL, e->keys, T_CAP) != (int)T_CAP)
        return -1;
    for (uint32_t i = 0; i < T_KEYS; i++) {
        for (uint32_t s = 0; s < T_SEGS; s++) {
            e->seg_src[i][s] = malloc(T_SEG);
            e->seg_dst[i][s] = calloc(1, T_SEG);
        }
        e->whole[i] = calloc(1, T_BLOCK);
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
        for (uint32_t s = 0; s < T_SEGS; s++) {
            free(e->seg_src[i][s]);
            free(e->seg_dst[i][s]);
        }
        free(e->whole[i]);
    }
    free(e);
    return 0;
}

/* Fills the source segments with a pattern of (salt, key, segment, byte). */
static void t_fill(t_env_t *e, uint32_t salt)
{
    for (uint32_t i = 0; i < T_KEYS; i++)
        for (uint32_t s = 0; s < T_SEGS; s++)
            for (uint32_t b = 0; b < T_SEG; b++)
                e->seg_src[i][s][b] = (uint8_t)(salt * 37u + i * 131u + s * 17u + b * 7u + 1u);
}

/* The pointers of segments [first, first + count) of keys [0, n), key-major. */
static void t_ptrs(uint8_t *(*segs)[T_SEGS], uint32_t n, uint32_t first, uint32_t count, void **out)
{
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t s = 0; s < count; s++)
            out[i * count + s] = segs[i][first + s];
}

static kvt_job_result_t t_wait(kvt_client_t *c, uint64_t job)
{
    kvt_job_result_t r;
    assert_int_equal(kvt_wait(c, &job, 1, 10000, &r), 0);
    return r;
}

/* A new request of instance inst on c (its id in rid), ended by t_end. */
static const char *t_begin(t_env_t *e, kvt_client_t *c, const char *inst, char *rid, size_t len)
{
    snprintf(rid, len, "r-%" PRIu64, ++e->job);
    kvt_request_t r = {.instance_id = inst, .request_id = rid};
    if (kvt_request_begin(c, &r) != 0)
        fail_msg("request_begin: %s", kvt_last_error(c));
    return rid;
}

static void t_end(kvt_client_t *c, const char *inst, const char *rid)
{
    assert_int_equal(kvt_request_end(c, inst, rid, NULL), 0);
}

/* Stores keys [k0, k0 + n) of the layer-wise instance in jobs of `step` segments. */
static void t_put_layers(t_env_t *e, kvt_client_t *c, uint32_t k0, uint32_t n, uint32_t step)
{
    kvt_token_t *tok = NULL;
    char rid[32];
    t_begin(e, c, T_INST, rid, sizeof rid);
    if (kvt_prepare_put(c, T_INST, rid, &e->keys[k0], n, &tok) != 0)
        fail_msg("prepare_put: %s", kvt_last_error(c));
    assert_int_equal(kvt_token_count(tok), n);
    void *ptrs[T_KEYS * T_SEGS];
    for (uint32_t first = 0; first < T_SEGS; first += step) {
        t_ptrs(e->seg_src, n, first, step, ptrs);
        uint64_t job = ++e->job;
        if (kvt_submit_put_segments(c, job, tok, first, step, (const void *const *)ptrs) != 0)
            fail_msg("submit_put_segments [%u, +%u): %s", first, step, kvt_last_error(c));
        kvt_job_result_t r = t_wait(c, job);
        if (r.status != 0 || r.n_failed != 0)
            fail_msg("put job [%u, +%u): status %d, %u failed: %s", first, step, r.status,
                     r.n_failed, kvt_last_error(c));
        assert_int_equal(r.n_keys, n);
    }
    if (kvt_complete_put(c, &tok, NULL) != 0)
        fail_msg("complete_put: %s", kvt_last_error(c));
    t_end(c, T_INST, rid);
}

/* Reads keys [k0, k0 + n) back layer by layer, last layer first, and compares. */
static void t_get_layers_reverse(t_env_t *e, kvt_client_t *c, uint32_t k0, uint32_t n)
{
    kvt_token_t *tok = NULL;
    char rid[32];
    t_begin(e, c, T_INST, rid, sizeof rid);
    if (kvt_prepare_get(c, T_INST, rid, &e->keys[k0], n, &tok) != 0)
        fail_msg("prepare_get: %s", kvt_last_error(c));
    assert_int_equal(kvt_token_count(tok), n);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t s = 0; s < T_SEGS; s++)
            memset(e->seg_dst[i][s], 0, T_SEG);
    void *ptrs[T_KEYS * 2];
    for (int first = (int)T_SEGS - 2; first >= 0; first -= 2) { /* one layer: K and V */
        t_ptrs(e->seg_dst, n, (uint32_t)first, 2, ptrs);
        uint64_t job = ++e->job;
        if (kvt_submit_get_segments(c, job, tok, (uint32_t)first, 2, ptrs) != 0)
            fail_msg("submit_get_segments: %s", kvt_last_error(c));
        kvt_job_result_t r = t_wait(c, job);
        if (r.status != 0 || r.n_failed != 0)
            fail_msg("get job at %d: status %d: %s", first, r.status, kvt_last_error(c));
        for (uint32_t i = 0; i < n; i++) /* this layer arrived; the ones above stay */
            for (uint32_t s = 0; s < T_SEGS; s++) {
                if (s >= (uint32_t)first)
                    assert_memory_equal(e->seg_dst[i][s], e->seg_src[i][s], T_SEG);
                else
                    assert_int_equal(e->seg_dst[i][s][0], 0);
            }
    }
    assert_int_equal(kvt_complete_get(c, &tok, NULL), 0);
    t_end(c, T_INST, rid);
}

/* Reads keys whole over frames (the frame path checks each block against the
 * header's checksum on arrival) and compares with the segments in order. */
static void t_get_whole_frames(t_env_t *e, uint32_t k0, uint32_t n)
{
    kvt_token_t *tok = NULL;
    char rid[32];
    t_begin(e, e->cf, T_INST, rid, sizeof rid);
    assert_int_equal(kvt_prepare_get(e->cf, T_INST, rid, &e->keys[k0], n, &tok), 0);
    uint64_t job = ++e->job;
    assert_int_equal(kvt_submit_get(e->cf, job, tok, (void *const *)e->whole, T_BLOCK), 0);
    kvt_job_result_t r = t_wait(e->cf, job);
    if (r.status != 0 || r.n_failed != 0)
        fail_msg("whole get: status %d: %s", r.status, kvt_last_error(e->cf));
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t s = 0; s < T_SEGS; s++)
            assert_memory_equal(e->whole[i] + s * T_SEG, e->seg_src[i][s], T_SEG);
    assert_int_equal(kvt_complete_get(e->cf, &tok, NULL), 0);
    t_end(e->cf, T_INST, rid);
}

static void t_remove(t_env_t *e, uint32_t k0, uint32_t n)
{
    uint32_t removed = 0;
    assert_int_equal(kvt_remove(e->c, T_INST, &e->keys[k0], n, &removed), 0);
    assert_int_equal(removed, n);
}

/* Shared memory: stored in jobs of one segment, of four, and all sixteen at once;
 * each read back layer by layer in reverse, and whole over frames (checksum). */
static void test_layers_shared_memory(void **state)
{
    t_env_t *e = *state;
    const uint32_t steps[] = {1, 4, T_SEGS};
    for (uint32_t k = 0; k < 3; k++) {
        t_fill(e, k + 1);
        t_put_layers(e, e->c, 0, T_KEYS, steps[k]);
        t_get_layers_reverse(e, e->c, 0, T_KEYS);
        t_get_whole_frames(e, 0, T_KEYS);
        t_remove(e, 0, T_KEYS);
    }
}

/* Frames: the same through the staging buffers; the frames handle registers the
 * instance itself first (layer-wise needs the spec on the submitting handle). */
static void test_layers_frames(void **state)
{
    t_env_t *e = *state;
    kvt_token_t *tok = NULL;
    void *ptrs[T_KEYS * T_SEGS];
    char rid[32];
    t_begin(e, e->cf, T_INST, rid, sizeof rid);
    /* not registered on this handle yet: refused, with what to do */
    assert_int_equal(kvt_prepare_put(e->cf, T_INST, rid, e->keys, T_KEYS, &tok), 0);
    t_ptrs(e->seg_src, T_KEYS, 0, 2, ptrs);
    assert_int_equal(kvt_submit_put_segments(e->cf, ++e->job, tok, 0, 2, (const void *const *)ptrs),
                     -KVT_INVALID_ARGUMENT);
    assert_non_null(strstr(kvt_last_error(e->cf), "not registered on this handle"));
    assert_int_equal(t_register(e->cf, T_INST, T_SEGS), 0); /* the same spec: OK */
    assert_int_equal(kvt_complete_put(e->cf, &tok, NULL), 0);
    t_end(e->cf, T_INST, rid);
    for (uint32_t k = 0; k < 2; k++) {
        t_fill(e, 10 + k);
        t_put_layers(e, e->cf, 0, T_KEYS, k == 0 ? 2 : 8);
        t_get_layers_reverse(e, e->cf, 0, T_KEYS);
        t_get_layers_reverse(e, e->c, 0, T_KEYS); /* and in place, by shm */
        t_remove(e, 0, T_KEYS);
    }
    /* stored in place, read back over frames layer by layer */
    t_fill(e, 20);
    t_put_layers(e, e->c, 0, T_KEYS, 4);
    t_get_layers_reverse(e, e->cf, 0, T_KEYS);
    t_remove(e, 0, T_KEYS);
}

/* A put completed before its last segment commits nothing: the keys stay misses
 * and can be stored again. */
static void s_partial_put(t_env_t *e, kvt_client_t *c)
{
    t_fill(e, 30);
    kvt_token_t *tok = NULL;
    char rid[32];
    t_begin(e, c, T_INST, rid, sizeof rid);
    assert_int_equal(kvt_prepare_put(c, T_INST, rid, &e->keys[8], 4, &tok), 0);
    void *ptrs[4 * 8];
    t_ptrs(e->seg_src, 4, 0, 8, ptrs);
    uint64_t job = ++e->job;
    assert_int_equal(kvt_submit_put_segments(c, job, tok, 0, 8, (const void *const *)ptrs), 0);
    kvt_job_result_t r = t_wait(c, job);
    assert_int_equal(r.n_failed, 0);
    bool yes[4] = {true, true, true, true}; /* saying it was written is refused */
    assert_int_equal(kvt_complete_put(c, &tok, yes), -KVT_INVALID_ARGUMENT);
    assert_non_null(strstr(kvt_last_error(c), "stopped at segment 8 of 16"));
    assert_non_null(tok);
    kvt_complete_put(c, &tok, NULL); /* half the block: nothing to commit */
    assert_null(tok);
    t_end(c, T_INST, rid);
    bool hit[4];
    kvt_lookup_result_t lr = {.hit = hit};
    assert_int_equal(kvt_lookup(c, T_INST, NULL, KVT_LOOKUP_PER_KEY, 0, &e->keys[8], 4, &lr), 0);
    assert_int_equal(lr.hit_count, 0);
    t_put_layers(e, c, 8, 4, 16);
    assert_int_equal(kvt_lookup(c, T_INST, NULL, KVT_LOOKUP_PER_KEY, 0, &e->keys[8], 4, &lr), 0);
    assert_int_equal(lr.hit_count, 4);
    t_get_layers_reverse(e, c, 8, 4);
    t_remove(e, 8, 4);
}

static void test_put_completed_early_commits_nothing(void **state)
{
    t_env_t *e = *state;
    s_partial_put(e, e->c);
    assert_int_equal(t_register(e->cf, T_INST, T_SEGS), 0);
    s_partial_put(e, e->cf);
}

/* The halves of a kvt_prepare token move layer-wise too: 4 stored keys are the
 * prefix hits, loaded by layer, and the 4 misses after them are stored by layer; one
 * kvt_complete concludes both, and all 8 then read back exact. */
static void test_get_put_halves_by_layer(void **state)
{
    t_env_t *e = *state;
    t_fill(e, 50);
    t_put_layers(e, e->c, 24, 4, 4); /* keys 24..27: seg_src[0..3] */
    kvt_key_t req_keys[8];
    memcpy(req_keys, &e->keys[24], sizeof req_keys);
    char rid[32];
    t_begin(e, e->c, T_INST, rid, sizeof rid);
    kvt_token_t *tok = NULL;
    kvt_prepare_info_t pi;
    assert_int_equal(kvt_prepare(e->c, T_INST, rid, req_keys, 8, NULL, &tok, &pi), 0);
    assert_int_equal(pi.hit_count, 4);
    kvt_token_t *g = kvt_token_half(tok, KVT_HALF_GET), *p = kvt_token_half(tok, KVT_HALF_PUT);
    void *ptrs[4 * 2];
    for (uint32_t i = 0; i < 4; i++)
        for (uint32_t s = 0; s < T_SEGS; s++)
            memset(e->seg_dst[i][s], 0, T_SEG);
    for (uint32_t layer = 0; layer < T_SEGS / 2; layer++) {
        t_ptrs(e->seg_dst, 4, 2 * layer, 2, ptrs); /* load layer l of the hits */
        uint64_t job = ++e->job;
        assert_int_equal(kvt_submit_get_segments(e->c, job, g, 2 * layer, 2, ptrs), 0);
        assert_int_equal(t_wait(e->c, job).n_failed, 0);
        t_ptrs(&e->seg_src[4], 4, 2 * layer, 2, ptrs); /* store layer l of the misses */
        job = ++e->job;
        assert_int_equal(
            kvt_submit_put_segments(e->c, job, p, 2 * layer, 2, (const void *const *)ptrs), 0);
        assert_int_equal(t_wait(e->c, job).n_failed, 0);
    }
    for (uint32_t i = 0; i < 4; i++)
        for (uint32_t s = 0; s < T_SEGS; s++)
            assert_memory_equal(e->seg_dst[i][s], e->seg_src[i][s], T_SEG);
    kvt_complete_info_t ci;
    assert_int_equal(kvt_complete(e->c, &tok, NULL, NULL, &ci), 0);
    assert_int_equal(ci.released, 4);
    assert_int_equal(ci.committed, 4);
    t_end(e->c, T_INST, rid);
    t_get_layers_reverse(e, e->c, 24, 8);
    t_get_whole_frames(e, 24, 8);
    t_remove(e, 24, 8);
}

static void t_expect(kvt_client_t *c, int rc, const char *needle)
{
    if (rc != -KVT_INVALID_ARGUMENT || !strstr(kvt_last_error(c), needle))
        fail_msg("rc %d, want INVALID_ARGUMENT with \"%s\": %s", rc, needle, kvt_last_error(c));
}

/* Bad input: specs, ranges, order, pointers, kinds; each refused with a message,
 * the token kept (the put then finishes and reads back exact). */
static void test_bad_input(void **state)
{
    t_env_t *e = *state;
    kvt_instance_t bad = {.instance_id = "bad-lw",
                          .tokens_per_block = T_TPB,
                          .bytes_per_block = T_BLOCK,
                          .segments = 3}; /* 8192 % 3 != 0 */
    t_expect(e->c, kvt_register_instance(e->c, &bad), "divisor");
    bad.segments = KVT_MAX_SEGMENTS * 2;
    t_expect(e->c, kvt_register_instance(e->c, &bad), "at most");
    /* the same id with other segments: a different spec */
    assert_int_equal(t_register(e->c, T_INST, 8), -KVT_CONFLICT);

    t_fill(e, 40);
    kvt_token_t *tok = NULL;
    char rid[32], rid2[32];
    t_begin(e, e->c, T_INST, rid, sizeof rid);
    assert_int_equal(kvt_prepare_put(e->c, T_INST, rid, &e->keys[16], 2, &tok), 0);
    void *ptrs[2 * T_SEGS];
    t_ptrs(e->seg_src, 2, 0, T_SEGS, ptrs);
    const void *const *cp = (const void *const *)ptrs;
    t_expect(e->c, kvt_submit_put_segments(e->c, 1, tok, 0, 0, cp), "non-empty range");
    t_expect(e->c, kvt_submit_put_segments(e->c, 1, tok, 15, 2, cp), "non-empty range");
    t_expect(e->c, kvt_submit_put_segments(e->c, 1, tok, T_SEGS, 1, cp), "non-empty range");
    t_expect(e->c, kvt_submit_put_segments(e->c, 1, tok, 4, 2, cp), "go in order");
    t_expect(e->c, kvt_submit_put_segments(e->c, 1, tok, 0, 2, NULL), "ptrs is NULL");
    void *saved = ptrs[3];
    ptrs[3] = NULL;
    t_expect(e->c, kvt_submit_put_segments(e->c, 1, tok, 0, 2, cp), "ptrs[3] (key 1, segment 1)");
    ptrs[3] = saved;
    /* the first half, then a restart and a gap are refused; the rest finishes it */
    t_ptrs(e->seg_src, 2, 0, 8, ptrs);
    uint64_t job = ++e->job;
    assert_int_equal(kvt_submit_put_segments(e->c, job, tok, 0, 8, cp), 0);
    assert_int_equal(t_wait(e->c, job).n_failed, 0);
    t_expect(e->c, kvt_submit_put_segments(e->c, 1, tok, 0, 8, cp), "starts at segment 8");
    t_expect(e->c, kvt_submit_put_segments(e->c, 1, tok, 9, 2, cp), "starts at segment 8");
    t_ptrs(e->seg_src, 2, 8, 8, ptrs);
    job = ++e->job;
    assert_int_equal(kvt_submit_put_segments(e->c, job, tok, 8, 8, cp), 0);
    assert_int_equal(t_wait(e->c, job).n_failed, 0);
    assert_int_equal(kvt_complete_put(e->c, &tok, NULL), 0);

    /* an instance of one segment has no layer-wise moves */
    t_begin(e, e->c, T_PLAIN, rid2, sizeof rid2);
    assert_int_equal(kvt_prepare_put(e->c, T_PLAIN, rid2, &e->keys[20], 1, &tok), 0);
    t_expect(e->c, kvt_submit_put_segments(e->c, 1, tok, 0, 1, cp), "one segment");
    assert_int_equal(kvt_complete_put(e->c, &tok, NULL), 0);
    t_end(e->c, T_PLAIN, rid2);
    /* a get token: any range, but still within the block and with pointers */
    assert_int_equal(kvt_prepare_get(e->c, T_INST, rid, &e->keys[16], 2, &tok), 0);
    t_ptrs(e->seg_dst, 2, 0, T_SEGS, ptrs);
    t_expect(e->c, kvt_submit_get_segments(e->c, 1, tok, 2, T_SEGS, ptrs), "non-empty range");
    assert_int_equal(kvt_complete_get(e->c, &tok, NULL), 0);
    t_end(e->c, T_INST, rid);
    /* nothing stored was damaged: the block reads back exact, whole */
    t_get_layers_reverse(e, e->c, 16, 2);
    t_get_whole_frames(e, 16, 2);
    t_remove(e, 16, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_layers_shared_memory, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_layers_frames, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_put_completed_early_commits_nothing, t_setup,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(test_get_put_halves_by_layer, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_bad_input, t_setup, t_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
