/* test_kvt_data.c — libkvtier's data role against a real host tier actor
 * (actors/tier_actor.h) started in this process, with tokens minted by the
 * scripted coordinator of tests/support/fake_coord.h (key k -> slot k.b[0]). Checks the
 * shared-memory path and the frame path byte for byte, which path was taken (the
 * tier actor's counters), checksums (the actor verifies them at PutHeader), the
 * completion rules (exactly once, unique job ids, bounds) and failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus_host.h"
#include "etcd_fixture.h"
#include "fake_coord.h"
#include "kvtier.h"
#include "tier_actor.h"

#define T_BLOCK 20000u /* not a multiple of a page: sizes are honoured exactly */
#define T_SLOT 32768u
#define T_CAPACITY 256u
#define T_TIMEOUT_MS 2000u

typedef struct {
    zactor_t *tier;
    zactor_t *fc;
    char tier_ep[256];
    char fc_ep[128];
    char shm[64];
    bus_token_tier_t tok_tier; /* what the fake puts in tokens */
    kvt_client_t *shm_c;       /* same host, shm allowed */
    kvt_client_t *frm_c;       /* disable_shm */
    uint8_t *src[T_CAPACITY];
    uint8_t *dst[T_CAPACITY];
    uint32_t round;
} t_env_t;

static kvt_client_t *t_client(t_env_t *e, bool disable_shm, uint32_t max_in_flight)
{
    char err[512];
    kvt_options_t o = {.coordinators = e->fc_ep,
                       .timeout_ms = T_TIMEOUT_MS,
                       .disable_shm = disable_shm,
                       .max_in_flight = max_in_flight,
                       .name = disable_shm ? "frames" : "shm"};
    kvt_client_t *c = kvt_connect(&o, err, sizeof err);
    if (!c)
        fprintf(stderr, "connect: %s\n", err);
    return c;
}

static int setup(void **state)
{
    t_env_t *e = calloc(1, sizeof *e);
    snprintf(e->shm, sizeof e->shm, "/kvtc-data-%d", (int)getpid());
    tier_actor_config_t tc = {.tier_id = 1, .endpoint = "tcp://127.0.0.1:*", .verify_put = true};
    snprintf(tc.tier.name, sizeof tc.tier.name, "host0");
    snprintf(tc.tier.kind, sizeof tc.tier.kind, "host");
    snprintf(tc.tier.path, sizeof tc.tier.path, "%s", e->shm);
    tc.tier.capacity = T_CAPACITY;
    tc.tier.slot_size = T_SLOT;
    e->tier = tier_actor_new(&tc);
    if (!e->tier)
        return -1;
    tier_actor_endpoint(e->tier, e->tier_ep, sizeof e->tier_ep);
    e->tok_tier.tier_id = 1;
    e->tok_tier.slot_size = T_SLOT;
    e->tok_tier.epoch = tier_actor_epoch(e->tier);
    snprintf(e->tok_tier.endpoint, sizeof e->tok_tier.endpoint, "%s", e->tier_ep);
    snprintf(e->tok_tier.shm, sizeof e->tok_tier.shm, "%s", e->shm);
    bus_host_identity(NULL, e->tok_tier.host, sizeof e->tok_tier.host);
    e->fc = fc_new();
    fc_endpoint(e->fc, e->fc_ep, sizeof e->fc_ep);
    fc_set_tier(e->fc, &e->tok_tier, T_BLOCK, true);
    e->shm_c = t_client(e, false, 0);
    e->frm_c = t_client(e, true, 0);
    if (!e->shm_c || !e->frm_c)
        return -1;
    for (uint32_t i = 0; i < T_CAPACITY; i++) {
        e->src[i] = malloc(T_BLOCK);
        e->dst[i] = malloc(T_BLOCK);
    }
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    t_env_t *e = *state;
    kvt_close(&e->shm_c);
    kvt_close(&e->frm_c);
    zactor_destroy(&e->fc);
    zactor_destroy(&e->tier);
    for (uint32_t i = 0; i < T_CAPACITY; i++) {
        free(e->src[i]);
        free(e->dst[i]);
    }
    free(e);
    return 0;
}

/* Keys whose first byte is the slot; fresh random bytes per round. */
static void t_fill(t_env_t *e, kvt_key_t *keys, uint32_t first, uint32_t n)
{
    e->round++;
    for (uint32_t i = 0; i < n; i++) {
        memset(&keys[i], 0, sizeof keys[i]);
        keys[i].b[0] = (uint8_t)(first + i);
        keys[i].b[1] = (uint8_t)e->round;
        keys[i].b[2] = 0x5A;
        for (uint32_t b = 0; b < T_BLOCK; b++)
            e->src[i][b] = (uint8_t)(rand() & 0xff);
        memset(e->dst[i], 0, T_BLOCK);
    }
}

static tier_actor_stats_t t_tier_stats(t_env_t *e)
{
    tier_actor_stats_t st;
    assert_int_equal(tier_actor_stats(e->tier, &st), 0);
    return st;
}

static void t_put(t_env_t *e, kvt_client_t *c, const kvt_key_t *keys, uint32_t n, uint64_t job)
{
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_put(c, "inst", "r", keys, n, &tok), 0);
    assert_int_equal(kvt_token_count(tok), n);
    assert_int_equal(kvt_submit_put(c, job, tok, (const void *const *)e->src, T_BLOCK), 0);
    kvt_job_result_t res;
    assert_int_equal(kvt_wait(c, &job, 1, 10000, &res), 0);
    assert_int_equal(res.job_id, job);
    assert_int_equal(res.status, 0);
    assert_int_equal(res.n_keys, n);
    assert_int_equal(res.n_failed, 0);
    uint64_t before = fc_stats(e->fc).headers_put;
    assert_int_equal(kvt_complete_put(c, &tok, NULL), 0);
    assert_null(tok);
    /* the tier actor recomputed every checksum the client sent (verify_put) */
    assert_int_equal(fc_stats(e->fc).headers_put, before + n);
}

static void t_get(t_env_t *e, kvt_client_t *c, const kvt_key_t *keys, uint32_t n, uint64_t job,
                  kvt_job_result_t *res)
{
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_get(c, "inst", "r", keys, n, &tok), 0);
    assert_int_equal(kvt_submit_get(c, job, tok, (void *const *)e->dst, T_BLOCK), 0);
    assert_int_equal(kvt_wait(c, &job, 1, 10000, res), 0);
    assert_int_equal(kvt_complete_get(c, &tok, NULL), 0);
}

/* issue 3 §3/§5: a client on the tier's host copies through shared memory (no
 * message per block) and the bytes come back exact. */
static void put_then_get_byte_exact_through_shm(void **state)
{
    t_env_t *e = *state;
    kvt_key_t keys[16];
    t_fill(e, keys, 0, 16);
    tier_actor_stats_t s0 = t_tier_stats(e);
    t_put(e, e->shm_c, keys, 16, 1);
    kvt_job_result_t res;
    t_get(e, e->shm_c, keys, 16, 2, &res);
    assert_int_equal(res.status, 0);
    assert_int_equal(res.n_failed, 0);
    for (uint32_t i = 0; i < 16; i++)
        assert_memory_equal(e->dst[i], e->src[i], T_BLOCK);
    tier_actor_stats_t s1 = t_tier_stats(e);
    assert_int_equal(s1.bytes_written, s0.bytes_written); /* no WriteSlots */
    assert_int_equal(s1.bytes_read, s0.bytes_read);       /* no ReadSlots */
    assert_int_equal(s1.headers_put, s0.headers_put + 16);
}

/* issue 3 §3/§5: with the shared-memory path off, bytes travel as frames to and
 * from the tier actor, byte-exact, in several chunks. */
static void put_then_get_byte_exact_through_frames(void **state)
{
    t_env_t *e = *state;
    enum { N = 200 }; /* more than one 128-slot message */
    static kvt_key_t keys[N];
    t_fill(e, keys, 20, N);
    tier_actor_stats_t s0 = t_tier_stats(e);
    t_put(e, e->frm_c, keys, N, 3);
    tier_actor_stats_t s1 = t_tier_stats(e);
    assert_int_equal(s1.slots_written - s0.slots_written, N);
    assert_int_equal(s1.bytes_written - s0.bytes_written, (uint64_t)N * T_BLOCK);
    assert_true(s1.requests - s0.requests >= 2);
    kvt_job_result_t res;
    t_get(e, e->frm_c, keys, N, 4, &res);
    assert_int_equal(res.status, 0);
    assert_int_equal(res.n_failed, 0);
    for (uint32_t i = 0; i < N; i++)
        assert_memory_equal(e->dst[i], e->src[i], T_BLOCK);
    tier_actor_stats_t s2 = t_tier_stats(e);
    assert_int_equal(s2.slots_read - s1.slots_read, N);
    /* and the shm client reads what the frame client wrote */
    t_get(e, e->shm_c, keys, 16, 5, &res);
    assert_int_equal(res.n_failed, 0);
    for (uint32_t i = 0; i < 16; i++)
        assert_memory_equal(e->dst[i], e->src[i], T_BLOCK);
}

/* DESIGN.md §2 "job": completions are reported exactly once, through
 * get_finished or wait, in finishing order; a collected job is gone. */
static void completions_reported_exactly_once(void **state)
{
    t_env_t *e = *state;
    kvt_client_t *c = e->frm_c;
    kvt_key_t keys[3][4];
    kvt_token_t *tok[3];
    for (int t = 0; t < 3; t++) {
        t_fill(e, keys[t], (uint32_t)(30 + 4 * t), 4);
        assert_int_equal(kvt_prepare_put(c, "inst", "r", keys[t], 4, &tok[t]), 0);
        assert_int_equal(
            kvt_submit_put(c, (uint64_t)(100 + t), tok[t], (const void *const *)e->src, T_BLOCK),
            0);
    }
    bool seen[3] = {false, false, false};
    uint32_t total = 0;
    for (int spins = 0; total < 3 && spins < 100000; spins++) {
        kvt_job_result_t out[8];
        uint32_t n = 0;
        assert_int_equal(kvt_get_finished(c, out, 8, &n), 0);
        for (uint32_t i = 0; i < n; i++) {
            assert_true(out[i].job_id >= 100 && out[i].job_id < 103);
            assert_false(seen[out[i].job_id - 100]);
            seen[out[i].job_id - 100] = true;
            assert_int_equal(out[i].status, 0);
            assert_int_equal(out[i].n_keys, 4);
        }
        total += n;
        if (total < 3) {
            uint64_t left = 0;
            for (int t = 0; t < 3; t++)
                if (!seen[t])
                    left = (uint64_t)(100 + t);
            kvt_job_result_t one;
            /* a short wait on a job still out: either it finished or it stays */
            int rc = kvt_wait(c, &left, 1, 0, &one);
            if (rc == 0) {
                assert_false(seen[left - 100]);
                seen[left - 100] = true;
                total++;
            } else {
                assert_int_equal(rc, -KVT_TIMEOUT);
            }
        }
    }
    assert_int_equal(total, 3);
    kvt_job_result_t out[8];
    uint32_t n = 9;
    assert_int_equal(kvt_get_finished(c, out, 8, &n), 0);
    assert_int_equal(n, 0);
    uint64_t gone = 100;
    assert_int_equal(kvt_wait(c, &gone, 1, 100, out), -KVT_INVALID_ARGUMENT);
    assert_non_null(strstr(kvt_last_error(c), "not in flight"));
    for (int t = 0; t < 3; t++)
        assert_int_equal(kvt_complete_put(c, &tok[t], NULL), 0);
}

/* kvtier.h: a job id must be unique among the handle's jobs in flight; once
 * collected it may be used again. */
static void duplicate_job_id_rejected(void **state)
{
    t_env_t *e = *state;
    kvt_client_t *c = e->shm_c;
    kvt_key_t k1[2], k2[2];
    t_fill(e, k1, 50, 2);
    t_fill(e, k2, 52, 2);
    kvt_token_t *t1 = NULL, *t2 = NULL;
    assert_int_equal(kvt_prepare_put(c, "inst", "r", k1, 2, &t1), 0);
    assert_int_equal(kvt_prepare_put(c, "inst", "r2", k2, 2, &t2), 0);
    assert_int_equal(kvt_submit_put(c, 7, t1, (const void *const *)e->src, T_BLOCK), 0);
    /* finished (shm copies inside submit) but not collected: still taken */
    assert_int_equal(kvt_submit_put(c, 7, t2, (const void *const *)e->src, T_BLOCK),
                     -KVT_INVALID_ARGUMENT);
    assert_non_null(strstr(kvt_last_error(c), "job id 7 is already in flight"));
    kvt_job_result_t r;
    uint64_t id = 7;
    assert_int_equal(kvt_wait(c, &id, 1, 1000, &r), 0);
    assert_int_equal(kvt_submit_put(c, 7, t2, (const void *const *)e->src, T_BLOCK), 0);
    assert_int_equal(kvt_wait(c, &id, 1, 1000, &r), 0);
    assert_int_equal(r.status, 0);
    assert_int_equal(kvt_complete_put(c, &t1, NULL), 0);
    assert_int_equal(kvt_complete_put(c, &t2, NULL), 0);
}

/* kvtier.h max_in_flight: at the bound submit is UNAVAILABLE; collecting frees it. */
static void job_table_bound_is_unavailable(void **state)
{
    t_env_t *e = *state;
    kvt_client_t *c = t_client(e, false, 2);
    assert_non_null(c);
    kvt_key_t k[3][1];
    kvt_token_t *t[3];
    for (int i = 0; i < 3; i++) {
        t_fill(e, k[i], (uint32_t)(60 + i), 1);
        char rid[8];
        snprintf(rid, sizeof rid, "b%d", i);
        assert_int_equal(kvt_prepare_put(c, "inst", rid, k[i], 1, &t[i]), 0);
    }
    assert_int_equal(kvt_submit_put(c, 1, t[0], (const void *const *)e->src, T_BLOCK), 0);
    assert_int_equal(kvt_submit_put(c, 2, t[1], (const void *const *)e->src, T_BLOCK), 0);
    assert_int_equal(kvt_submit_put(c, 3, t[2], (const void *const *)e->src, T_BLOCK),
                     -KVT_UNAVAILABLE);
    assert_non_null(strstr(kvt_last_error(c), "max_in_flight"));
    kvt_job_result_t out[4];
    uint32_t n = 0;
    assert_int_equal(kvt_get_finished(c, out, 1, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(out[0].job_id, 1);
    assert_int_equal(kvt_submit_put(c, 3, t[2], (const void *const *)e->src, T_BLOCK), 0);
    assert_int_equal(kvt_get_finished(c, out, 4, &n), 0);
    assert_int_equal(n, 2);
    for (int i = 0; i < 3; i++)
        assert_int_equal(kvt_complete_put(c, &t[i], NULL), 0);
    kvt_close(&c);
}

/* issue 3 §5 bad input: a wrong block size is refused before anything moves;
 * the token stays usable. */
static void wrong_block_size_refused(void **state)
{
    t_env_t *e = *state;
    kvt_client_t *c = e->shm_c;
    kvt_key_t k[2];
    t_fill(e, k, 70, 2);
    kvt_token_t *t = NULL;
    assert_int_equal(kvt_prepare_put(c, "inst", "r", k, 2, &t), 0);
    assert_int_equal(kvt_submit_put(c, 9, t, (const void *const *)e->src, T_BLOCK - 1),
                     -KVT_INVALID_ARGUMENT);
    assert_non_null(strstr(kvt_last_error(c), "block size mismatch"));
    assert_int_equal(kvt_submit_put(c, 9, t, NULL, T_BLOCK), -KVT_INVALID_ARGUMENT);
    kvt_token_t *g = NULL;
    assert_int_equal(kvt_prepare_get(c, "inst", "r", k, 2, &g), 0);
    assert_int_equal(kvt_submit_put(c, 9, g, (const void *const *)e->src, T_BLOCK),
                     -KVT_INVALID_ARGUMENT); /* a get token for a put */
    assert_int_equal(kvt_complete_get(c, &g, NULL), 0);
    assert_int_equal(kvt_submit_put(c, 9, t, (const void *const *)e->src, T_BLOCK), 0);
    kvt_job_result_t r;
    uint64_t id = 9;
    assert_int_equal(kvt_wait(c, &id, 1, 1000, &r), 0);
    assert_int_equal(r.status, 0);
    assert_int_equal(kvt_complete_put(c, &t, NULL), 0);
}

/* kvtier.h: complete needs the token's job collected first (the token is kept);
 * complete(…, NULL) then sends each key's recorded outcome. */
static void complete_waits_for_the_job(void **state)
{
    t_env_t *e = *state;
    kvt_client_t *c = e->frm_c;
    kvt_key_t k[3];
    t_fill(e, k, 80, 3);
    kvt_token_t *t = NULL;
    assert_int_equal(kvt_prepare_put(c, "inst", "r", k, 3, &t), 0);
    assert_int_equal(kvt_submit_put(c, 11, t, (const void *const *)e->src, T_BLOCK), 0);
    /* replies are only read inside get_finished / wait: the job is still out */
    kvt_token_t *keep = t;
    assert_int_equal(kvt_complete_put(c, &t, NULL), -KVT_INVALID_ARGUMENT);
    assert_ptr_equal(t, keep);
    assert_non_null(strstr(kvt_last_error(c), "still in flight"));
    assert_int_equal(kvt_submit_put(c, 12, t, (const void *const *)e->src, T_BLOCK),
                     -KVT_INVALID_ARGUMENT); /* one job per token at a time */
    kvt_job_result_t r;
    uint64_t id = 11;
    assert_int_equal(kvt_wait(c, &id, 1, 10000, &r), 0);
    assert_int_equal(r.n_failed, 0);
    assert_int_equal(kvt_complete_put(c, &t, NULL), 0);
    assert_int_equal(fc_stats(e->fc).last_success_true, 3);
}

/* DESIGN.md §4: a block is served only with a SERVING header; a get of blocks
 * never committed fails per key on both paths and complete(NULL) reports it. */
static void get_of_uncommitted_blocks_fails(void **state)
{
    t_env_t *e = *state;
    kvt_key_t k[2];
    t_fill(e, k, 240, 2); /* slots 240, 241: never written */
    kvt_client_t *cs[2] = {e->shm_c, e->frm_c};
    for (int i = 0; i < 2; i++) {
        kvt_token_t *t = NULL;
        assert_int_equal(kvt_prepare_get(cs[i], "inst", "r", k, 2, &t), 0);
        assert_int_equal(kvt_submit_get(cs[i], 20, t, (void *const *)e->dst, T_BLOCK), 0);
        kvt_job_result_t r;
        uint64_t id = 20;
        assert_int_equal(kvt_wait(cs[i], &id, 1, 10000, &r), 0);
        assert_int_equal(r.status, -KVT_NOT_FOUND);
        assert_int_equal(r.n_failed, 2);
        /* the job's message is the handle's last error once it is reported */
        assert_non_null(strstr(kvt_last_error(cs[i]), "job 20 (get): NOT_FOUND"));
        assert_int_equal(kvt_complete_get(cs[i], &t, NULL), 0);
        assert_int_equal(fc_stats(e->fc).last_success_true, 0);
    }
    /* a put that was never submitted commits nothing */
    kvt_token_t *t = NULL;
    assert_int_equal(kvt_prepare_put(e->shm_c, "inst", "r", k, 2, &t), 0);
    uint64_t before = fc_stats(e->fc).headers_put;
    assert_int_equal(kvt_complete_put(e->shm_c, &t, NULL), 0);
    assert_int_equal(fc_stats(e->fc).last_success_true, 0);
    assert_int_equal(fc_stats(e->fc).headers_put, before);
}

/* Wave rule "same host": a token whose host is another machine goes by frames.
 * A token whose tier epoch is not the tier's (the tier restarted since the token
 * was minted) neither maps the segment nor gets through by frames: the tier
 * actor's epoch fence refuses it (UNAVAILABLE) and nothing is written. */
static void stale_epoch_or_other_host_uses_frames(void **state)
{
    t_env_t *e = *state;
    kvt_key_t k[4];
    t_fill(e, k, 90, 4);
    bus_token_tier_t t = e->tok_tier;

    t.epoch ^= 0x1234;
    fc_set_tier(e->fc, &t, T_BLOCK, true);
    tier_actor_stats_t s0 = t_tier_stats(e);
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_put(e->shm_c, "inst", "r", k, 4, &tok), 0);
    assert_int_equal(kvt_submit_put(e->shm_c, 29, tok, (const void *const *)e->src, T_BLOCK), 0);
    uint64_t job = 29;
    kvt_job_result_t r;
    assert_int_equal(kvt_wait(e->shm_c, &job, 1, 10000, &r), 0);
    assert_int_equal(r.status, -KVT_UNAVAILABLE);
    assert_int_equal(r.n_failed, 4);
    assert_int_equal(t_tier_stats(e).slots_written, s0.slots_written);
    assert_int_equal(kvt_complete_put(e->shm_c, &tok, NULL), 0);

    t = e->tok_tier;
    snprintf(t.host, sizeof t.host, "another-host");
    fc_set_tier(e->fc, &t, T_BLOCK, true);
    s0 = t_tier_stats(e);
    t_put(e, e->shm_c, k, 4, 30);
    t_get(e, e->shm_c, k, 4, 31, &r);
    assert_int_equal(r.n_failed, 0);
    for (int i = 0; i < 4; i++)
        assert_memory_equal(e->dst[i], e->src[i], T_BLOCK);
    tier_actor_stats_t s1 = t_tier_stats(e);
    assert_int_equal(s1.slots_written - s0.slots_written, 4);
    assert_int_equal(s1.slots_read - s0.slots_read, 4);

    fc_set_tier(e->fc, &e->tok_tier, T_BLOCK, true);
    /* and back on the right epoch, shared memory again */
    s0 = t_tier_stats(e);
    t_put(e, e->shm_c, k, 4, 32);
    assert_int_equal(t_tier_stats(e).slots_written, s0.slots_written);
}

/* issue 3 §5 "a dead tier actor": a job to an endpoint nobody serves completes
 * once, with TIMEOUT, after the per-call timeout; a short wait leaves it pending. */
static void dead_tier_endpoint_times_out_the_job(void **state)
{
    t_env_t *e = *state;
    bus_token_tier_t t = e->tok_tier;
    snprintf(t.endpoint, sizeof t.endpoint, "tcp://127.0.0.1:%u", etcd_fixture_free_port());
    fc_set_tier(e->fc, &t, T_BLOCK, false);
    kvt_client_t *c = e->frm_c;
    kvt_key_t k[2];
    t_fill(e, k, 100, 2);
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_get(c, "inst", "r", k, 2, &tok), 0);
    assert_int_equal(kvt_submit_get(c, 40, tok, (void *const *)e->dst, T_BLOCK), 0);
    uint64_t id = 40;
    kvt_job_result_t r;
    assert_int_equal(kvt_wait(c, &id, 1, 0, &r), -KVT_TIMEOUT);
    assert_int_equal(kvt_wait(c, &id, 1, -1, &r), 0);
    assert_int_equal(r.status, -KVT_TIMEOUT);
    assert_int_equal(r.n_failed, 2);
    assert_non_null(strstr(kvt_last_error(c), "ReadSlots"));
    assert_int_equal(kvt_complete_get(c, &tok, NULL), 0);
    fc_set_tier(e->fc, &e->tok_tier, T_BLOCK, true);
}

/* A prefetch job is one CopyPrefetch to the scheduler, which copies through the
 * migrator; the fake scheduler copies nothing, so the job fails per key with
 * NOT_FOUND and says which call failed. */
static void prefetch_reports_the_tier_status(void **state)
{
    t_env_t *e = *state;
    kvt_client_t *c = e->shm_c;
    kvt_key_t k[2];
    t_fill(e, k, 110, 2);
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_prefetch(c, "inst", "r", k, 2, &tok), 0);
    assert_int_equal(kvt_submit_prefetch(c, 50, tok), 0);
    uint64_t id = 50;
    kvt_job_result_t r;
    assert_int_equal(kvt_wait(c, &id, 1, 10000, &r), 0);
    assert_int_equal(r.status, -KVT_NOT_FOUND);
    assert_int_equal(r.n_failed, 2);
    assert_non_null(strstr(kvt_last_error(c), "CopyPrefetch"));
    assert_int_equal(fc_stats(e->fc).copies, 1);
    assert_int_equal(kvt_complete_prefetch(c, &tok, NULL), 0);
}

int main(void)
{
    srand(12345);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(put_then_get_byte_exact_through_shm),
        cmocka_unit_test(put_then_get_byte_exact_through_frames),
        cmocka_unit_test(completions_reported_exactly_once),
        cmocka_unit_test(duplicate_job_id_rejected),
        cmocka_unit_test(job_table_bound_is_unavailable),
        cmocka_unit_test(wrong_block_size_refused),
        cmocka_unit_test(complete_waits_for_the_job),
        cmocka_unit_test(get_of_uncommitted_blocks_fails),
        cmocka_unit_test(stale_epoch_or_other_host_uses_frames),
        cmocka_unit_test(dead_tier_endpoint_times_out_the_job),
        cmocka_unit_test(prefetch_reports_the_tier_status),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    zsys_shutdown();
    return rc;
}
