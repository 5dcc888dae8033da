/* test_kvt_getput.c — a request in two round trips (issue 13 §2) through
 * libkvtier: kvt_prepare / kvt_complete against the real scheduler and a real host
 * tier actor in this process, over real ZeroMQ, with the cluster secret (every
 * token sealed, every tier-plane request checked by the tier actor). Each test
 * names its rule: a request costs two meta round trips and its hits read back
 * exact, its misses stored and then hit, on the shared-memory and the frame paths;
 * misuse of the token or its halves is INVALID_ARGUMENT with a message and the
 * token is kept; pinned hits read back exact after a full tier evicted everything
 * else; a head tier full of pinned blocks makes kvt_prepare BUSY after its
 * retries, nothing held; a lapse is EXPIRED; request_end releases everything.
 * Also: kvt_complete_put_ex reports the commit counts of a put with a failed key,
 * and an OVERLOADED request_begin is answered once, never retried. */
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

#include "bus_host.h"
#include "bus_token_mac.h"
#include "kvtier.h"
#include "sched_actor.h"
#include "sched_fake_tier.h"
#include "tier_actor.h"

#define T_BLOCK 4096u
#define T_TPB 16u
#define T_INST "llama-gp"
#define T_MAXB 192u /* blocks a test may use */
#define T_CLUSTER "gp-e2e"

static const uint8_t t_secret[BUS_SECRET_BYTES] = "getput-e2e-secret-of-32-bytes-o";

typedef struct {
    uint32_t capacity;     /* the host tier's slots */
    uint64_t pin_lease_ms; /* 0: the default */
    bool lower;            /* a second tier below (a fake tier actor), demotion on */
    uint32_t max_requests_per_client; /* 0: the default */
} t_opts_t;

typedef struct {
    zactor_t *tier;
    sched_fake_tier_t *lower;
    zactor_t *sched;
    char sched_ep[256];
    kvt_client_t *c;  /* shared memory allowed */
    kvt_client_t *cf; /* frames only */
    kvt_key_t keys[T_MAXB];
    uint8_t *src[T_MAXB], *dst[T_MAXB];
    uint32_t seq;
} t_env_t;

static kvt_client_t *t_client(t_env_t *e, bool disable_shm, uint32_t timeout_ms)
{
    char err[512];
    kvt_options_t o = {
        .coordinators = e->sched_ep, .timeout_ms = timeout_ms, .disable_shm = disable_shm};
    kvt_client_t *c = kvt_connect(&o, err, sizeof err);
    if (!c)
        fprintf(stderr, "connect: %s\n", err);
    return c;
}

static void t_sched_config(sched_config_t *sc, const t_opts_t *o)
{
    sched_config_defaults(sc);
    snprintf(sc->cluster, sizeof sc->cluster, T_CLUSTER);
    sc->has_secret = true;
    memcpy(sc->secret, t_secret, sizeof sc->secret);
    if (o->pin_lease_ms)
        sc->pin_lease_ms = o->pin_lease_ms;
    if (o->max_requests_per_client)
        sc->max_requests_per_client = o->max_requests_per_client;
    sc->n_tiers = o->lower ? 2 : 1;
    sc->tiers[0] =
        (sched_tier_config_t){.tier_id = 1, .capacity = o->capacity, .slot_size = T_BLOCK};
    snprintf(sc->tiers[0].name, sizeof sc->tiers[0].name, "host0");
    snprintf(sc->tiers[0].kind, sizeof sc->tiers[0].kind, "host");
    sc->n_chains = 1;
    snprintf(sc->chains[0].name, sizeof sc->chains[0].name, "default");
    sc->chains[0].n_tiers = o->lower ? 2 : 1;
    sc->chains[0].tier_ids[0] = 1;
    if (o->lower) {
        sc->tiers[1] = (sched_tier_config_t){.tier_id = 2, .capacity = 64, .slot_size = T_BLOCK};
        snprintf(sc->tiers[1].name, sizeof sc->tiers[1].name, "lower0");
        snprintf(sc->tiers[1].kind, sizeof sc->tiers[1].kind, "host");
        sc->chains[0].tier_ids[1] = 2;
        sc->demote = true;
    }
}

static int t_tier_up(t_env_t *e, uint32_t id, const char *ep, const char *shm, uint64_t epoch,
                     uint32_t capacity)
{
    kvtier_TierInfo ti = kvtier_TierInfo_init_zero;
    ti.tier_id = id;
    snprintf(ti.name, sizeof ti.name, id == 1 ? "host0" : "lower0");
    ti.kind = kvtier_TierKind_TIER_KIND_HOST;
    snprintf(ti.endpoint, sizeof ti.endpoint, "%s", ep);
    bus_host_identity(NULL, ti.host, sizeof ti.host);
    snprintf(ti.shm, sizeof ti.shm, "%s", shm);
    ti.epoch = epoch;
    ti.capacity_slots = capacity;
    ti.slot_bytes = T_BLOCK;
    ti.up = true;
    return sched_actor_tier_change(e->sched, true, &ti);
}

static int t_setup(void **state, const t_opts_t *o)
{
    t_env_t *e = calloc(1, sizeof *e);
    char shm[64];
    snprintf(shm, sizeof shm, "/kvtc-gp-%d-%u", (int)getpid(), o->capacity);
    tier_actor_config_t tc = {
        .tier_id = 1, .endpoint = "tcp://127.0.0.1:*", .secret = t_secret, .cluster = T_CLUSTER};
    snprintf(tc.tier.name, sizeof tc.tier.name, "host0");
    snprintf(tc.tier.kind, sizeof tc.tier.kind, "host");
    snprintf(tc.tier.path, sizeof tc.tier.path, "%s", shm);
    tc.tier.capacity = o->capacity;
    tc.tier.slot_size = T_BLOCK;
    e->tier = tier_actor_new(&tc);
    if (!e->tier)
        return -1;
    char tier_ep[128];
    tier_actor_endpoint(e->tier, tier_ep, sizeof tier_ep);
    sched_config_t sc;
    t_sched_config(&sc, o);
    e->sched = sched_actor_new(&sc);
    if (!e->sched)
        return -1;
    sched_actor_endpoint(e->sched, e->sched_ep, sizeof e->sched_ep);
    if (t_tier_up(e, 1, tier_ep, shm, tier_actor_epoch(e->tier), o->capacity) != 0)
        return -1;
    if (o->lower) {
        e->lower = sched_fake_tier_new(2, 64);
        if (!e->lower || t_tier_up(e, 2, sched_fake_tier_endpoint(e->lower), "", 1, 64) != 0)
            return -1;
    }
    e->c = t_client(e, false, 5000);
    e->cf = t_client(e, true, 5000);
    if (!e->c || !e->cf)
        return -1;
    kvt_cluster_info_t ci;
    uint32_t want = o->lower ? 2 : 1;
    for (int i = 0; i < 500; i++) {
        if (kvt_cluster_info(e->c, &ci) == 0 && ci.n_tiers == want && ci.tiers[0].up &&
            ci.tiers[want - 1].up)
            break;
        zclock_sleep(10);
    }
    kvt_instance_t spec = {.instance_id = T_INST,
                           .model = "llama",
                           .dtype = "fp16",
                           .tokens_per_block = T_TPB,
                           .bytes_per_block = T_BLOCK};
    if (kvt_register_instance(e->c, &spec) != 0) {
        fprintf(stderr, "register: %s\n", kvt_last_error(e->c));
        return -1;
    }
    uint32_t tokens[T_MAXB * T_TPB];
    for (uint32_t i = 0; i < T_MAXB * T_TPB; i++)
        tokens[i] = 9000000u + i;
    if (kvt_block_keys(tokens, T_MAXB * T_TPB, T_TPB, NULL, e->keys, T_MAXB) != (int)T_MAXB)
        return -1;
    for (uint32_t i = 0; i < T_MAXB; i++) {
        e->src[i] = malloc(T_BLOCK);
        e->dst[i] = calloc(1, T_BLOCK);
        for (uint32_t b = 0; b < T_BLOCK; b++)
            e->src[i][b] = (uint8_t)((i * 131u + b * 7u) | 1u);
    }
    *state = e;
    return 0;
}

static int t_teardown(void **state)
{
    t_env_t *e = *state;
    kvt_close(&e->c);
    kvt_close(&e->cf);
    zactor_destroy(&e->sched);
    zactor_destroy(&e->tier);
    sched_fake_tier_destroy(&e->lower);
    for (uint32_t i = 0; i < T_MAXB; i++) {
        free(e->src[i]);
        free(e->dst[i]);
    }
    free(e);
    return 0;
}

static int s_setup_plain(void **state)
{
    t_opts_t o = {.capacity = 64};
    return t_setup(state, &o);
}

static int s_setup_short_lease(void **state)
{
    t_opts_t o = {.capacity = 64, .pin_lease_ms = 1500};
    return t_setup(state, &o);
}

static int s_setup_two_requests(void **state)
{
    t_opts_t o = {.capacity = 64, .max_requests_per_client = 2};
    return t_setup(state, &o);
}

static int s_setup_tiny_head(void **state)
{
    t_opts_t o = {.capacity = 4, .lower = true};
    return t_setup(state, &o);
}

/* A scheduler counter by name (UINT64_MAX: absent). */
static uint64_t t_stat(kvt_client_t *c, const char *name)
{
    static kvt_stat_t st[512];
    uint32_t n = 0;
    assert_int_equal(kvt_stats(c, NULL, st, 512, &n), 0);
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(st[i].name, name) == 0)
            return st[i].value;
    return UINT64_MAX;
}

/* Runs one job and waits for it: its result. */
static kvt_job_result_t t_run(kvt_client_t *c, bool get, uint64_t job, kvt_token_t *half,
                              void *const *bufs)
{
    int rc = get ? kvt_submit_get(c, job, half, bufs, T_BLOCK)
                 : kvt_submit_put(c, job, half, (const void *const *)bufs, T_BLOCK);
    if (rc != 0)
        fail_msg("submit: %s", kvt_last_error(c));
    kvt_job_result_t res;
    assert_int_equal(kvt_wait(c, &job, 1, 10000, &res), 0);
    return res;
}

/* One engine request over keys [0, n) of request id rid: prepare, load the hits,
 * store the misses, complete. Checks the hits read back as stored and that the
 * halves are what the prefix says; returns the complete's counts. */
static kvt_complete_info_t t_request(t_env_t *e, kvt_client_t *c, const char *rid, uint32_t n,
                                     uint32_t want_hits)
{
    kvt_request_t r = {.instance_id = T_INST, .request_id = rid};
    assert_int_equal(kvt_request_begin(c, &r), 0);
    kvt_token_t *tok = NULL;
    kvt_prepare_info_t pi;
    uint64_t trips = kvt_meta_round_trips(c);
    if (kvt_prepare(c, T_INST, rid, e->keys, n, NULL, &tok, &pi) != 0)
        fail_msg("prepare: %s", kvt_last_error(c));
    assert_int_equal(pi.hit_count, want_hits);
    assert_int_equal(pi.skipped, 0);
    kvt_token_t *g = kvt_token_half(tok, KVT_HALF_GET), *p = kvt_token_half(tok, KVT_HALF_PUT);
    assert_non_null(g);
    assert_non_null(p);
    assert_int_equal(kvt_token_count(tok), n);
    assert_int_equal(kvt_token_count(g), want_hits);
    assert_int_equal(kvt_token_count(p), n - want_hits);
    assert_memory_equal(kvt_token_keys(g), e->keys, want_hits * sizeof(kvt_key_t));
    assert_memory_equal(kvt_token_keys(p), &e->keys[want_hits],
                        (n - want_hits) * sizeof(kvt_key_t));
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(kvt_token_tier(tok, i), 1);
    if (want_hits) {
        for (uint32_t i = 0; i < want_hits; i++)
            memset(e->dst[i], 0, T_BLOCK);
        kvt_job_result_t res = t_run(c, true, ++e->seq, g, (void *const *)e->dst);
        assert_int_equal(res.n_failed, 0);
        for (uint32_t i = 0; i < want_hits; i++)
            assert_memory_equal(e->dst[i], e->src[i], T_BLOCK);
    }
    if (n > want_hits) {
        kvt_job_result_t res = t_run(c, false, ++e->seq, p, (void *const *)&e->src[want_hits]);
        assert_int_equal(res.n_failed, 0);
    }
    kvt_complete_info_t ci;
    if (kvt_complete(c, &tok, NULL, NULL, &ci) != 0)
        fail_msg("complete: %s", kvt_last_error(c));
    assert_null(tok);
    assert_int_equal(kvt_meta_round_trips(c) - trips, 2); /* the two round trips */
    assert_int_equal(kvt_request_end(c, T_INST, rid, NULL), 0);
    return ci;
}

/* Issue 13 §2 "an engine request in two round trips", on one path: the first
 * request stores everything (no hits), the second hits the prefix and stores
 * more, the third hits all; each costs exactly two meta calls between begin and
 * end (prepare, complete), and the bytes read are the bytes written. */
static void s_two_round_trips(t_env_t *e, kvt_client_t *c, const char *tag)
{
    char rid[3][32];
    for (int i = 0; i < 3; i++)
        snprintf(rid[i], sizeof rid[i], "%s-%d", tag, i);
    uint64_t p0 = t_stat(c, "prepares"), c0 = t_stat(c, "completes");
    uint64_t g0 = t_stat(c, "gets"), pu0 = t_stat(c, "puts");
    kvt_complete_info_t ci = t_request(e, c, rid[0], 8, 0);
    assert_int_equal(ci.released, 0);
    assert_int_equal(ci.committed, 8);
    assert_int_equal(ci.failed, 0);
    ci = t_request(e, c, rid[1], 12, 8);
    assert_int_equal(ci.released, 8);
    assert_int_equal(ci.committed, 4);
    ci = t_request(e, c, rid[2], 12, 12);
    assert_int_equal(ci.released, 12);
    assert_int_equal(ci.committed, 0);
    assert_int_equal(t_stat(c, "prepares") - p0, 3);
    assert_int_equal(t_stat(c, "completes") - c0, 3);
    /* and no separate get or put window was opened */
    assert_int_equal(t_stat(c, "gets") - g0, 2);  /* the two requests with hits */
    assert_int_equal(t_stat(c, "puts") - pu0, 2); /* the two with misses */
    assert_int_equal(t_stat(c, "pinned"), 0);
    assert_int_equal(t_stat(c, "reserved"), 0);
    uint32_t removed = 0;
    assert_int_equal(kvt_remove(c, T_INST, e->keys, 12, &removed), 0);
    assert_int_equal(removed, 12);
}

static void test_two_round_trips_shared_memory(void **state)
{
    t_env_t *e = *state;
    s_two_round_trips(e, e->c, "shm");
}

static void test_two_round_trips_frames(void **state)
{
    t_env_t *e = *state;
    s_two_round_trips(e, e->cf, "frames");
}

static void s_expect_fail(kvt_client_t *c, int rc, int code, const char *needle)
{
    if (rc != -code)
        fail_msg("rc %d, want %d (\"%s\"): %s", rc, -code, needle, kvt_last_error(c));
    if (!strstr(kvt_last_error(c), needle))
        fail_msg("message \"%s\" does not say \"%s\"", kvt_last_error(c), needle);
}

/* Misuse of a combined token is INVALID_ARGUMENT with a message and keeps the
 * token usable: no keys, too many, a second prepare, prepare_get beside it, the
 * whole token to a submit, a half to the other submit or to a complete, the
 * complete of another kind, a complete while a job is in flight, a complete of a
 * get token by kvt_complete, a complete twice. */
static void test_misuse_is_refused(void **state)
{
    t_env_t *e = *state;
    kvt_client_t *c = e->cf; /* frames: a job stays in flight until its replies are read */
    kvt_request_t r = {.instance_id = T_INST, .request_id = "misuse"};
    assert_int_equal(kvt_request_begin(c, &r), 0);
    kvt_token_t *tok = NULL, *other = NULL;
    s_expect_fail(c, kvt_prepare(c, T_INST, "misuse", e->keys, 0, NULL, &tok, NULL),
                  KVT_INVALID_ARGUMENT, "no keys");
    s_expect_fail(c, kvt_prepare(c, T_INST, "misuse", e->keys, KVT_MAX_KEYS + 1, NULL, &tok, NULL),
                  KVT_INVALID_ARGUMENT, "at most");
    s_expect_fail(c, kvt_prepare(c, T_INST, "misuse", e->keys, 4, NULL, NULL, NULL),
                  KVT_INVALID_ARGUMENT, "tok is NULL");
    assert_int_equal(kvt_prepare(c, T_INST, "misuse", e->keys, 4, NULL, &tok, NULL), 0);
    s_expect_fail(c, kvt_prepare(c, T_INST, "misuse", e->keys, 4, NULL, &other, NULL),
                  KVT_INVALID_ARGUMENT, "already has an open get+put window");
    s_expect_fail(c, kvt_prepare_get(c, T_INST, "misuse", e->keys, 1, &other), KVT_INVALID_ARGUMENT,
                  "cannot open beside it");
    kvt_token_t *p = kvt_token_half(tok, KVT_HALF_PUT);
    s_expect_fail(c, kvt_submit_put(c, 1, tok, (const void *const *)e->src, T_BLOCK),
                  KVT_INVALID_ARGUMENT, "moves by its halves");
    s_expect_fail(c, kvt_submit_get(c, 1, p, (void *const *)e->dst, T_BLOCK), KVT_INVALID_ARGUMENT,
                  "other half");
    kvt_token_t *pc = p;
    s_expect_fail(c, kvt_complete_put(c, &pc, NULL), KVT_INVALID_ARGUMENT, "kvt_complete");
    s_expect_fail(c, kvt_complete(c, &pc, NULL, NULL, NULL), KVT_INVALID_ARGUMENT, "is a half");
    kvt_token_t *tc = tok;
    s_expect_fail(c, kvt_complete_get(c, &tc, NULL), KVT_INVALID_ARGUMENT, "comes from prepare");
    assert_null(kvt_token_half(NULL, KVT_HALF_GET));
    assert_null(kvt_token_half(tok, (kvt_half_t)2));
    /* a job in flight keeps the complete back */
    assert_int_equal(kvt_submit_put(c, 7, p, (const void *const *)e->src, T_BLOCK), 0);
    s_expect_fail(c, kvt_complete(c, &tok, NULL, NULL, NULL), KVT_INVALID_ARGUMENT,
                  "still in flight");
    assert_non_null(tok);
    kvt_job_result_t res;
    uint64_t job = 7;
    assert_int_equal(kvt_wait(c, &job, 1, 10000, &res), 0);
    assert_int_equal(res.n_failed, 0);
    kvt_complete_info_t ci;
    assert_int_equal(kvt_complete(c, &tok, NULL, NULL, &ci), 0);
    assert_int_equal(ci.committed, 4);
    s_expect_fail(c, kvt_complete(c, &tok, NULL, NULL, NULL), KVT_INVALID_ARGUMENT, "no token");
    tc = p; /* the half went with its token */
    s_expect_fail(c, kvt_complete(c, &tc, NULL, NULL, NULL), KVT_INVALID_ARGUMENT,
                  "already completed");
    /* a get token is not kvt_complete's */
    assert_int_equal(kvt_prepare_get(c, T_INST, "misuse", e->keys, 4, &other), 0);
    s_expect_fail(c, kvt_complete(c, &other, NULL, NULL, NULL), KVT_INVALID_ARGUMENT,
                  "kvt_complete_get");
    assert_int_equal(kvt_complete_get(c, &other, NULL), 0);
    assert_int_equal(kvt_request_end(c, T_INST, "misuse", NULL), 0);
}

/* Hits pinned by an open window cannot be evicted before its complete: a full
 * tier's writes evict every other block, and the pinned ones then read back
 * exact through the get half; a batch only the pinned slots could hold is
 * NO_SPACE. */
static void test_pinned_hits_survive_a_full_tier(void **state)
{
    t_env_t *e = *state;
    kvt_client_t *c = e->c;
    kvt_complete_info_t ci = t_request(e, c, "fill", 64, 0);
    assert_int_equal(ci.committed, 64);
    kvt_request_t r = {.instance_id = T_INST, .request_id = "reader"};
    assert_int_equal(kvt_request_begin(c, &r), 0);
    kvt_token_t *tok = NULL;
    kvt_prepare_info_t pi;
    assert_int_equal(kvt_prepare(c, T_INST, "reader", e->keys, 8, NULL, &tok, &pi), 0);
    assert_int_equal(pi.hit_count, 8);
    /* another request writes 56 fresh blocks: everything not pinned goes */
    kvt_request_t w = {.instance_id = T_INST, .request_id = "writer"};
    assert_int_equal(kvt_request_begin(e->cf, &w), 0);
    for (uint32_t b = 0; b < 2; b++) {
        kvt_token_t *pt = NULL;
        assert_int_equal(
            kvt_prepare(e->cf, T_INST, "writer", &e->keys[64 + 28 * b], 28, NULL, &pt, &pi), 0);
        assert_int_equal(pi.hit_count, 0);
        kvt_job_result_t res = t_run(e->cf, false, ++e->seq, kvt_token_half(pt, KVT_HALF_PUT),
                                     (void *const *)&e->src[64 + 28 * b]);
        assert_int_equal(res.n_failed, 0);
        assert_int_equal(kvt_complete(e->cf, &pt, NULL, NULL, &ci), 0);
        assert_int_equal(ci.committed, 28);
    }
    kvt_token_t *big = NULL;
    /* 57 fresh keys: the 56 unpinned slots are not enough */
    s_expect_fail(e->cf, kvt_prepare(e->cf, T_INST, "writer", &e->keys[120], 57, NULL, &big, NULL),
                  KVT_NO_SPACE, "no room");
    bool hit[16];
    kvt_lookup_result_t lr = {.hit = hit};
    assert_int_equal(kvt_lookup(c, T_INST, NULL, KVT_LOOKUP_PER_KEY, 0, e->keys, 16, &lr), 0);
    assert_int_equal(lr.hit_count, 8);
    for (uint32_t i = 0; i < 16; i++)
        assert_int_equal(hit[i], i < 8);
    for (uint32_t i = 0; i < 8; i++)
        memset(e->dst[i], 0, T_BLOCK);
    kvt_job_result_t res =
        t_run(c, true, ++e->seq, kvt_token_half(tok, KVT_HALF_GET), (void *const *)e->dst);
    assert_int_equal(res.n_failed, 0);
    for (uint32_t i = 0; i < 8; i++)
        assert_memory_equal(e->dst[i], e->src[i], T_BLOCK);
    assert_int_equal(kvt_complete(c, &tok, NULL, NULL, &ci), 0);
    assert_int_equal(ci.released, 8);
    assert_int_equal(kvt_request_end(c, T_INST, "reader", NULL), 0);
    assert_int_equal(kvt_request_end(e->cf, T_INST, "writer", NULL), 0);
}

/* A head tier full of pinned blocks that keeps its blocks (a tier below, demotion
 * on): the misses cannot be reserved; libkvtier retries BUSY within timeout_ms
 * and then returns it; the prefix it had pinned was released each time. */
static void test_full_pinned_head_is_busy(void **state)
{
    t_env_t *e = *state;
    kvt_client_t *c = e->c;
    kvt_complete_info_t ci = t_request(e, c, "fill", 4, 0);
    assert_int_equal(ci.committed, 4);
    kvt_request_t r = {.instance_id = T_INST, .request_id = "pin"};
    assert_int_equal(kvt_request_begin(c, &r), 0);
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare(c, T_INST, "pin", e->keys, 4, NULL, &tok, NULL), 0);
    kvt_client_t *quick = t_client(e, true, 200);
    assert_non_null(quick);
    kvt_request_t q = {.instance_id = T_INST, .request_id = "busy"};
    assert_int_equal(kvt_request_begin(quick, &q), 0);
    kvt_token_t *bt = NULL;
    s_expect_fail(quick, kvt_prepare(quick, T_INST, "busy", e->keys, 6, NULL, &bt, NULL), KVT_BUSY,
                  "retry shortly");
    assert_null(bt);
    assert_true(t_stat(c, "put_busy") >= 1);
    assert_int_equal(t_stat(c, "pinned"), 4);
    assert_int_equal(t_stat(c, "reserved"), 0);
    kvt_request_end_info_t info;
    assert_int_equal(kvt_request_end(quick, T_INST, "busy", &info), 0);
    assert_int_equal(info.closed_windows, 0);
    kvt_close(&quick);
    assert_int_equal(kvt_complete(c, &tok, NULL, NULL, &ci), 0);
    assert_int_equal(ci.released, 4);
    assert_int_equal(kvt_request_end(c, T_INST, "pin", NULL), 0);
}

static bool t_lapsed(kvt_client_t *c)
{
    for (int i = 0; i < 2000; i++) {
        if (t_stat(c, "pins_lapsed") >= 2 && t_stat(c, "reservations_lapsed") >= 2)
            return true;
        zclock_sleep(10);
    }
    return false;
}

/* kvt_complete_put_ex reports the commit counts: a put of 4 keys, all written,
 * completed with the third flag false, is answered 0 with 3 committed and 1
 * failed; the 3 are served, the third is not (the complete's 0 alone does not say
 * the put was whole). Also on kvt_complete_put_ex with a NULL info. */
static void test_complete_put_ex_reports_the_counts(void **state)
{
    t_env_t *e = *state;
    kvt_client_t *c = e->c;
    const char *rid = "put-ex";
    kvt_request_t r = {.instance_id = T_INST, .request_id = rid};
    assert_int_equal(kvt_request_begin(c, &r), 0);
    kvt_token_t *tok = NULL;
    if (kvt_prepare_put(c, T_INST, rid, e->keys, 4, &tok) != 0)
        fail_msg("prepare_put: %s", kvt_last_error(c));
    assert_int_equal(kvt_token_count(tok), 4);
    kvt_job_result_t res = t_run(c, false, ++e->seq, tok, (void *const *)e->src);
    assert_int_equal(res.n_failed, 0);
    const bool ok[4] = {true, true, false, true};
    kvt_complete_info_t ci = {.released = 7, .committed = 7, .failed = 7};
    if (kvt_complete_put_ex(c, &tok, ok, &ci) != 0)
        fail_msg("complete_put_ex: %s", kvt_last_error(c));
    assert_null(tok);
    assert_int_equal(ci.committed, 3);
    assert_int_equal(ci.failed, 1);
    assert_int_equal(ci.released, 0);
    kvt_lookup_result_t lr;
    bool hit[4];
    uint32_t tiers[4];
    lr.hit = hit;
    lr.tier_ids = tiers;
    assert_int_equal(kvt_lookup(c, T_INST, NULL, KVT_LOOKUP_PER_KEY, 0, e->keys, 4, &lr), 0);
    assert_int_equal(lr.hit_count, 3);
    assert_true(hit[0] && hit[1] && !hit[2] && hit[3]);
    /* an error leaves info zero: a complete of no token */
    ci = (kvt_complete_info_t){.committed = 7};
    assert_int_equal(kvt_complete_put_ex(c, &tok, NULL, &ci), -KVT_INVALID_ARGUMENT);
    assert_int_equal(ci.committed, 0);
    /* NULL info: the plain complete_put */
    if (kvt_prepare_put(c, T_INST, rid, &e->keys[2], 1, &tok) != 0)
        fail_msg("prepare_put: %s", kvt_last_error(c));
    res = t_run(c, false, ++e->seq, tok, (void *const *)&e->src[2]);
    assert_int_equal(res.n_failed, 0);
    assert_int_equal(kvt_complete_put_ex(c, &tok, NULL, NULL), 0);
    assert_int_equal(kvt_request_end(c, T_INST, rid, NULL), 0);
    assert_int_equal(kvt_lookup(c, T_INST, NULL, KVT_LOOKUP_PER_KEY, 0, e->keys, 4, &lr), 0);
    assert_int_equal(lr.hit_count, 4);
}

/* OVERLOADED is answered once and never retried by libkvtier (docs/PROTOCOL.md
 * §6: a flood answered with retries would grow): with max_requests_per_client 2,
 * a third request_begin is -KVT_OVERLOADED after exactly one round trip, the
 * scheduler counted one refusal, and the message says what to do; the other
 * handle (another client) is still served, and ending one request frees a place. */
static void test_overloaded_is_not_retried(void **state)
{
    t_env_t *e = *state;
    kvt_client_t *c = e->c;
    kvt_request_t r1 = {.instance_id = T_INST, .request_id = "ov-1"};
    kvt_request_t r2 = {.instance_id = T_INST, .request_id = "ov-2"};
    kvt_request_t r3 = {.instance_id = T_INST, .request_id = "ov-3"};
    assert_int_equal(kvt_request_begin(c, &r1), 0);
    assert_int_equal(kvt_request_begin(c, &r2), 0);
    uint64_t refused0 = t_stat(e->cf, "overloaded");
    uint64_t trips = kvt_meta_round_trips(c);
    int rc = kvt_request_begin(c, &r3);
    if (rc != -KVT_OVERLOADED)
        fail_msg("third request_begin: %d (%s), want OVERLOADED", rc, kvt_last_error(c));
    assert_int_equal(kvt_meta_round_trips(c) - trips, 1); /* one call, no resend */
    assert_non_null(strstr(kvt_last_error(c), "OVERLOADED"));
    assert_int_equal(t_stat(e->cf, "overloaded") - refused0, 1);
    /* another client is not refused for it */
    assert_int_equal(kvt_request_begin(e->cf, &r3), 0);
    assert_int_equal(kvt_request_end(e->cf, T_INST, "ov-3", NULL), 0);
    /* a place freed: the same begin is served */
    assert_int_equal(kvt_request_end(c, T_INST, "ov-1", NULL), 0);
    assert_int_equal(kvt_request_begin(c, &r3), 0);
    assert_int_equal(kvt_request_end(c, T_INST, "ov-2", NULL), 0);
    assert_int_equal(kvt_request_end(c, T_INST, "ov-3", NULL), 0);
}

/* The window's lease lapses (the shorter of pin lease and write grace): the
 * scheduler releases both halves; a submit on a half is EXPIRED at the client, the
 * complete EXPIRED at the scheduler, and nothing of the put half was stored. */
static void test_lapse_is_expired(void **state)
{
    t_env_t *e = *state;
    kvt_client_t *c = e->c;
    kvt_complete_info_t ci = t_request(e, c, "fill", 2, 0);
    assert_int_equal(ci.committed, 2);
    kvt_request_t r = {.instance_id = T_INST, .request_id = "late"};
    assert_int_equal(kvt_request_begin(c, &r), 0);
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare(c, T_INST, "late", e->keys, 4, NULL, &tok, NULL), 0);
    assert_true(t_lapsed(c));
    s_expect_fail(c,
                  kvt_submit_put(c, 1, kvt_token_half(tok, KVT_HALF_PUT),
                                 (const void *const *)&e->src[2], T_BLOCK),
                  KVT_EXPIRED, "lease");
    s_expect_fail(c, kvt_complete(c, &tok, NULL, NULL, NULL), KVT_EXPIRED, "lapsed");
    assert_null(tok);
    bool hit[4];
    kvt_lookup_result_t lr = {.hit = hit};
    assert_int_equal(kvt_lookup(c, T_INST, NULL, KVT_LOOKUP_PREFIX, 0, e->keys, 4, &lr), 0);
    assert_int_equal(lr.hit_count, 2);
    assert_int_equal(t_stat(c, "pinned"), 0);
    assert_int_equal(kvt_request_end(c, T_INST, "late", NULL), 0);
}

/* request_end with the window open releases everything (the safety net) and
 * says so; the token's complete then finds no request. */
static void test_request_end_releases_the_window(void **state)
{
    t_env_t *e = *state;
    kvt_client_t *c = e->cf;
    kvt_complete_info_t ci = t_request(e, c, "fill", 3, 0);
    assert_int_equal(ci.committed, 3);
    kvt_request_t r = {.instance_id = T_INST, .request_id = "gone"};
    assert_int_equal(kvt_request_begin(c, &r), 0);
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare(c, T_INST, "gone", e->keys, 7, NULL, &tok, NULL), 0);
    kvt_request_end_info_t info;
    assert_int_equal(kvt_request_end(c, T_INST, "gone", &info), 0);
    assert_int_equal(info.closed_windows, 1);
    assert_int_equal(info.released_pins, 3);
    assert_int_equal(info.aborted_reservations, 4);
    assert_int_equal(t_stat(c, "pinned"), 0);
    assert_int_equal(t_stat(c, "reserved"), 0);
    s_expect_fail(c, kvt_complete(c, &tok, NULL, NULL, NULL), KVT_NOT_FOUND, "not open");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_two_round_trips_shared_memory, s_setup_plain,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(test_two_round_trips_frames, s_setup_plain, t_teardown),
        cmocka_unit_test_setup_teardown(test_misuse_is_refused, s_setup_plain, t_teardown),
        cmocka_unit_test_setup_teardown(test_pinned_hits_survive_a_full_tier, s_setup_plain,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(test_full_pinned_head_is_busy, s_setup_tiny_head,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(test_complete_put_ex_reports_the_counts, s_setup_plain,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(test_overloaded_is_not_retried, s_setup_two_requests,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(test_lapse_is_expired, s_setup_short_lease, t_teardown),
        cmocka_unit_test_setup_teardown(test_request_end_releases_the_window, s_setup_plain,
                                        t_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
