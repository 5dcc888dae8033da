/* test_kvt_prefetch.c — prefetch end to end through libkvtier (client/kvtier.h)
 * against the real scheduler (actors/sched_actor.h, demotion on: it runs its own
 * migrator) and two real host tier actors forming one chain, a small head (host0)
 * over a larger lower tier (host1), each with its own shm segment, wired the way
 * the coordinator process wires them (their membership is handed to the
 * scheduler). Blocks get below the head honestly: a full head demotes its coldest
 * blocks when a write needs room (issue 4 §6). Then prefetch (issue 4 §3) promotes
 * them, and every read is compared byte for byte with what was put, through shared
 * memory and through frames. Only the public client API drives the service; the
 * test never talks to a tier actor itself. */
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
#include "kvtier.h"
#include "sched_actor.h"
#include "tier_actor.h"

#define T_BLOCK 20000u
#define T_SLOT 32768u
#define T_HEAD_CAP 16u /* host0: the head */
#define T_LOW_CAP 64u  /* host1: below it */
#define T_TPB 16u
#define T_INST "llama-pf"
#define T_MAXK 16u
#define T_NA 8u /* blocks of the prompt that is demoted, then prefetched */
#define T_HEAD 1u
#define T_LOW 2u
#define T_CALL_MS 10000
#define T_POLL 2000 /* bounded polls: at most T_POLL x 5 ms */

typedef struct {
    const char *name;
    kvt_key_t keys[T_MAXK];
    uint8_t *bytes[T_MAXK];
    uint32_t n;
} t_prompt_t;

typedef struct {
    zactor_t *tiers[2];
    zactor_t *sched;
    char sched_ep[256];
    kvt_client_t *c;  /* shared memory allowed */
    kvt_client_t *cf; /* frames only */
    t_prompt_t a;     /* demoted, then prefetched */
    t_prompt_t b;     /* fills the head so that a goes down */
    t_prompt_t x;     /* written while a prefetch copy may still be in flight */
    uint8_t *dst[T_MAXK];
    uint32_t seq;
} t_env_t;

static uint32_t s_envs;

/* The whole chain runs authenticated (docs/SECURITY.md): tiers and scheduler share
 * the cluster secret, so every copy and commit here carries a sealed token. */
static const uint8_t t_secret[BUS_SECRET_BYTES] = "prefetch-e2e-secret-32-bytes-ok";

static zactor_t *t_tier(uint32_t id, const char *name, const char *shm, uint64_t cap, char *ep,
                        size_t eplen)
{
    tier_actor_config_t tc = {
        .tier_id = id, .endpoint = "tcp://127.0.0.1:*", .secret = t_secret, .cluster = "pf-e2e"};
    snprintf(tc.tier.name, sizeof tc.tier.name, "%s", name);
    snprintf(tc.tier.kind, sizeof tc.tier.kind, "host");
    snprintf(tc.tier.path, sizeof tc.tier.path, "%s", shm);
    tc.tier.capacity = cap;
    tc.tier.slot_size = T_SLOT;
    zactor_t *a = tier_actor_new(&tc);
    if (a && tier_actor_endpoint(a, ep, eplen) != 0)
        zactor_destroy(&a);
    return a;
}

/* The tier actor is up: the scheduler learns it the coordinator's way. */
static int t_member(t_env_t *e, uint32_t id, const char *name, const char *shm, uint64_t cap,
                    const char *ep)
{
    kvtier_TierInfo ti = kvtier_TierInfo_init_zero;
    ti.tier_id = id;
    snprintf(ti.name, sizeof ti.name, "%s", name);
    ti.kind = kvtier_TierKind_TIER_KIND_HOST;
    snprintf(ti.endpoint, sizeof ti.endpoint, "%s", ep);
    bus_host_identity(NULL, ti.host, sizeof ti.host);
    snprintf(ti.shm, sizeof ti.shm, "%s", shm);
    ti.epoch = tier_actor_epoch(e->tiers[id - 1]);
    ti.capacity_slots = cap;
    ti.slot_bytes = T_SLOT;
    ti.up = true;
    return sched_actor_tier_change(e->sched, true, &ti);
}

static int t_sched(t_env_t *e)
{
    sched_config_t sc;
    sched_config_defaults(&sc);
    snprintf(sc.cluster, sizeof sc.cluster, "pf-e2e");
    sc.has_secret = true;
    memcpy(sc.secret, t_secret, sizeof sc.secret);
    sc.demote = true; /* no migrator_endpoint: the scheduler starts its own */
    sc.delete_delay_ms = 10;
    sc.n_tiers = 2;
    sc.tiers[0] = (sched_tier_config_t){.tier_id = 1, .capacity = T_HEAD_CAP, .slot_size = T_SLOT};
    snprintf(sc.tiers[0].name, sizeof sc.tiers[0].name, "host0");
    snprintf(sc.tiers[0].kind, sizeof sc.tiers[0].kind, "host");
    sc.tiers[1] = (sched_tier_config_t){.tier_id = 2, .capacity = T_LOW_CAP, .slot_size = T_SLOT};
    snprintf(sc.tiers[1].name, sizeof sc.tiers[1].name, "host1");
    snprintf(sc.tiers[1].kind, sizeof sc.tiers[1].kind, "host");
    sc.n_chains = 1;
    snprintf(sc.chains[0].name, sizeof sc.chains[0].name, "default");
    sc.chains[0].n_tiers = 2;
    sc.chains[0].tier_ids[0] = T_HEAD;
    sc.chains[0].tier_ids[1] = T_LOW;
    e->sched = sched_actor_new(&sc);
    if (!e->sched)
        return -1;
    return sched_actor_endpoint(e->sched, e->sched_ep, sizeof e->sched_ep);
}

static kvt_client_t *t_client(t_env_t *e, bool disable_shm)
{
    char err[512];
    kvt_options_t o = {
        .coordinators = e->sched_ep, .timeout_ms = T_CALL_MS, .disable_shm = disable_shm};
    kvt_client_t *c = kvt_connect(&o, err, sizeof err);
    if (!c)
        fprintf(stderr, "connect: %s\n", err);
    return c;
}

/* the scheduler reads each tier's inventory before it accepts writes: wait for both */
static bool t_tiers_up(t_env_t *e)
{
    kvt_cluster_info_t ci;
    for (int i = 0; i < T_POLL; i++) {
        if (kvt_cluster_info(e->c, &ci) == 0 && ci.n_tiers == 2 && ci.tiers[0].up && ci.tiers[1].up)
            return true;
        zclock_sleep(5);
    }
    return false;
}

static void t_env_free(t_env_t **ep)
{
    t_env_t *e = *ep;
    if (!e)
        return;
    kvt_close(&e->c);
    kvt_close(&e->cf);
    zactor_destroy(&e->sched);
    zactor_destroy(&e->tiers[0]);
    zactor_destroy(&e->tiers[1]);
    t_prompt_t *ps[] = {&e->a, &e->b, &e->x};
    for (uint32_t i = 0; i < T_MAXK; i++) {
        for (size_t p = 0; p < sizeof ps / sizeof ps[0]; p++)
            free(ps[p]->bytes[i]);
        free(e->dst[i]);
    }
    free(e);
    *ep = NULL;
}

/* A fresh service: two tier actors (unique shm names), the scheduler, two handles,
 * the instance registered. */
static t_env_t *t_env_new(void)
{
    t_env_t *e = calloc(1, sizeof *e);
    assert_non_null(e);
    char shm[2][64], ep[2][128];
    uint32_t k = s_envs++;
    snprintf(shm[0], sizeof shm[0], "/kvtc-pf-%d-%u-h0", (int)getpid(), k);
    snprintf(shm[1], sizeof shm[1], "/kvtc-pf-%d-%u-h1", (int)getpid(), k);
    e->tiers[0] = t_tier(T_HEAD, "host0", shm[0], T_HEAD_CAP, ep[0], sizeof ep[0]);
    e->tiers[1] = t_tier(T_LOW, "host1", shm[1], T_LOW_CAP, ep[1], sizeof ep[1]);
    assert_non_null(e->tiers[0]);
    assert_non_null(e->tiers[1]);
    assert_int_equal(t_sched(e), 0);
    assert_int_equal(t_member(e, T_HEAD, "host0", shm[0], T_HEAD_CAP, ep[0]), 0);
    assert_int_equal(t_member(e, T_LOW, "host1", shm[1], T_LOW_CAP, ep[1]), 0);
    e->c = t_client(e, false);
    e->cf = t_client(e, true);
    assert_non_null(e->c);
    assert_non_null(e->cf);
    assert_true(t_tiers_up(e));
    kvt_instance_t spec = {.instance_id = T_INST,
                           .model = "llama",
                           .dtype = "fp16",
                           .tokens_per_block = T_TPB,
                           .bytes_per_block = T_BLOCK};
    assert_int_equal(kvt_register_instance(e->c, &spec), 0);
    e->a.name = "a";
    e->b.name = "b";
    e->x.name = "x";
    t_prompt_t *ps[] = {&e->a, &e->b, &e->x};
    for (uint32_t i = 0; i < T_MAXK; i++) {
        for (size_t p = 0; p < sizeof ps / sizeof ps[0]; p++) {
            ps[p]->bytes[i] = malloc(T_BLOCK);
            assert_non_null(ps[p]->bytes[i]);
        }
        e->dst[i] = malloc(T_BLOCK);
        assert_non_null(e->dst[i]);
    }
    return e;
}

/* A fresh service in *state (the previous one stopped): each test, and each row
 * of a table, starts from empty tiers. teardown stops the last one, also after
 * a failure. */
static t_env_t *t_fresh(void **state)
{
    t_env_free((t_env_t **)state);
    *state = t_env_new();
    return *state;
}

static int teardown(void **state)
{
    t_env_free((t_env_t **)state);
    return 0;
}

/* n block keys of a fresh prompt (distinct per call) and random bytes per block */
static void t_prompt(t_env_t *e, t_prompt_t *p, uint32_t n)
{
    uint32_t tokens[T_MAXK * T_TPB];
    e->seq++;
    for (uint32_t i = 0; i < n * T_TPB; i++)
        tokens[i] = e->seq * 100000u + i;
    assert_int_equal(kvt_block_keys(tokens, n * T_TPB, T_TPB, NULL, p->keys, n), (int)n);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t b = 0; b < T_BLOCK; b++)
            p->bytes[i][b] = (uint8_t)(rand() & 0xff);
    p->n = n;
}

/* Index in p of key k; fails the test when p does not hold it. */
static uint32_t t_index(const t_prompt_t *p, const kvt_key_t *k)
{
    for (uint32_t i = 0; i < p->n; i++)
        if (memcmp(&p->keys[i], k, sizeof *k) == 0)
            return i;
    fail_msg("a token key is not one of the prompt's");
    return 0;
}

/* The token names each of p's keys exactly once (in whatever order). */
static void t_token_is(const kvt_token_t *tok, const t_prompt_t *p)
{
    assert_int_equal(kvt_token_count(tok), p->n);
    bool seen[T_MAXK] = {false};
    for (uint32_t i = 0; i < p->n; i++) {
        uint32_t k = t_index(p, &kvt_token_keys(tok)[i]);
        assert_false(seen[k]);
        seen[k] = true;
    }
}

static void t_begin(kvt_client_t *c, const char *rid)
{
    kvt_request_t r = {.instance_id = T_INST, .request_id = rid};
    assert_int_equal(kvt_request_begin(c, &r), 0);
}

static void t_end(kvt_client_t *c, const char *rid, uint32_t closed)
{
    kvt_request_end_info_t info;
    assert_int_equal(kvt_request_end(c, T_INST, rid, &info), 0);
    assert_int_equal(info.closed_windows, closed);
}

/* Puts all of p in its own request; prepare_put retries BUSY itself while a full
 * head demotes (bounded by the handle's timeout). */
static void t_put(t_env_t *e, kvt_client_t *c, const char *rid, const t_prompt_t *p)
{
    (void)e;
    t_begin(c, rid);
    kvt_token_t *tok = NULL;
    int rc = kvt_prepare_put(c, T_INST, rid, p->keys, p->n, &tok);
    if (rc != 0)
        fail_msg("prepare_put: %s", kvt_last_error(c));
    t_token_is(tok, p);
    const void *bufs[T_MAXK];
    for (uint32_t i = 0; i < p->n; i++) {
        bufs[i] = p->bytes[t_index(p, &kvt_token_keys(tok)[i])];
        assert_int_equal(kvt_token_tier(tok, i), T_HEAD);
    }
    uint64_t job = 100;
    assert_int_equal(kvt_submit_put(c, job, tok, bufs, T_BLOCK), 0);
    kvt_job_result_t res;
    assert_int_equal(kvt_wait(c, &job, 1, T_CALL_MS, &res), 0);
    assert_int_equal(res.status, 0);
    assert_int_equal(res.n_failed, 0);
    rc = kvt_complete_put(c, &tok, NULL);
    if (rc != 0)
        fail_msg("complete_put: %s", kvt_last_error(c));
    t_end(c, rid, 0);
}

/* Per-key lookup of p: every key must hit; its tier into tiers[]. Returns
 * prefetch_advised. */
static bool t_where(t_env_t *e, const t_prompt_t *p, uint32_t *tiers)
{
    bool hit[T_MAXK];
    kvt_lookup_result_t r = {.hit = hit, .tier_ids = tiers};
    assert_int_equal(kvt_lookup(e->c, T_INST, NULL, KVT_LOOKUP_PER_KEY, 0, p->keys, p->n, &r), 0);
    assert_int_equal(r.hit_count, p->n);
    for (uint32_t i = 0; i < p->n; i++)
        assert_true(hit[i]);
    return r.prefetch_advised;
}

static uint64_t t_stat(t_env_t *e, const char *name)
{
    static kvt_stat_t all[KVT_STATS_PAGE * 2];
    uint32_t n = 0, total = 0;
    assert_int_equal(kvt_stats_page(e->c, NULL, 0, all, KVT_STATS_PAGE * 2, &n, &total), 0);
    assert_int_equal(n, total);
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(all[i].name, name) == 0)
            return all[i].value;
    fail_msg("the scheduler has no counter '%s'", name);
    return 0;
}

/* Puts e->a, then fills the head with e->b: the full head demotes e->a's blocks
 * (the coldest) to make room. Returns once a lookup reports all of e->a on the
 * lower tier with prefetch advised (bounded poll). */
static void t_demote_a(t_env_t *e)
{
    t_prompt(e, &e->a, T_NA);
    t_put(e, e->c, "put-a", &e->a);
    uint32_t tiers[T_MAXK];
    assert_false(t_where(e, &e->a, tiers));
    for (uint32_t i = 0; i < T_NA; i++)
        assert_int_equal(tiers[i], T_HEAD);
    t_prompt(e, &e->b, T_HEAD_CAP); /* every head slot: nothing of a can stay */
    t_put(e, e->cf, "put-b", &e->b);
    bool below = false;
    for (int k = 0; k < T_POLL && !below; k++) {
        bool advised = t_where(e, &e->a, tiers);
        below = advised;
        for (uint32_t i = 0; i < T_NA; i++)
            below = below && tiers[i] == T_LOW;
        if (!below)
            zclock_sleep(5);
    }
    assert_true(below);
    /* moved, not dropped: exactly a's blocks went down, nothing was evicted */
    assert_int_equal(t_stat(e, "demoted"), T_NA);
    assert_int_equal(t_stat(e, "demote_failed"), 0);
    assert_int_equal(t_stat(e, "evictions"), 0);
}

/* prepare_prefetch of p in rid; BUSY (the head is full of e->b and is demoting
 * to make room; it is not retried by the library) is retried here, bounded. */
static kvt_token_t *t_prepare_prefetch(kvt_client_t *c, const char *rid, const t_prompt_t *p)
{
    kvt_token_t *tok = NULL;
    int rc = -KVT_BUSY;
    for (int k = 0; k < T_POLL && rc == -KVT_BUSY; k++) {
        rc = kvt_prepare_prefetch(c, T_INST, rid, p->keys, p->n, &tok);
        if (rc == -KVT_BUSY)
            zclock_sleep(5);
    }
    if (rc != 0)
        fail_msg("prepare_prefetch: %s", kvt_last_error(c));
    assert_non_null(tok);
    t_token_is(tok, p);
    return tok;
}

/* Whose bytes a block read back holds, for a failure message. */
static const char *t_whose(const t_env_t *e, const uint8_t *got)
{
    static char why[64];
    const t_prompt_t *ps[] = {&e->a, &e->b, &e->x};
    for (size_t q = 0; q < sizeof ps / sizeof ps[0]; q++)
        for (uint32_t i = 0; i < ps[q]->n; i++)
            if (memcmp(got, ps[q]->bytes[i], T_BLOCK) == 0) {
                snprintf(why, sizeof why, "it holds block %u of prompt %s", i, ps[q]->name);
                return why;
            }
    return "it holds no block of this test";
}

/* A get of all of p in a new request rid through c: each key's token tier must be
 * want[its index] and the bytes must be the ones put. */
static void t_get_exact(t_env_t *e, kvt_client_t *c, const char *rid, const t_prompt_t *p,
                        const uint32_t *want)
{
    t_begin(c, rid);
    kvt_token_t *tok = NULL;
    int rc = kvt_prepare_get(c, T_INST, rid, p->keys, p->n, &tok);
    if (rc != 0)
        fail_msg("prepare_get: %s", kvt_last_error(c));
    t_token_is(tok, p);
    uint32_t idx[T_MAXK];
    for (uint32_t i = 0; i < p->n; i++) {
        idx[i] = t_index(p, &kvt_token_keys(tok)[i]);
        assert_int_equal(kvt_token_tier(tok, i), want[idx[i]]);
        memset(e->dst[i], 0, T_BLOCK);
    }
    uint64_t job = 200;
    assert_int_equal(kvt_submit_get(c, job, tok, (void *const *)e->dst, T_BLOCK), 0);
    kvt_job_result_t res;
    assert_int_equal(kvt_wait(c, &job, 1, T_CALL_MS, &res), 0);
    if (res.status != 0 || res.n_failed != 0)
        fail_msg("%s of prompt %s: %u of %u keys failed: %s", rid, p->name, res.n_failed, p->n,
                 kvt_last_error(c));
    assert_int_equal(kvt_complete_get(c, &tok, NULL), 0);
    for (uint32_t i = 0; i < p->n; i++)
        if (memcmp(e->dst[i], p->bytes[idx[i]], T_BLOCK) != 0)
            fail_msg("%s of prompt %s: block %u (from tier %u) differs from the bytes put; %s", rid,
                     p->name, idx[i], want[idx[i]], t_whose(e, e->dst[i]));
    t_end(c, rid, 0);
}

/* Both handles read p byte-exact from the tiers want[] names. */
static void t_get_both(t_env_t *e, const t_prompt_t *p, const uint32_t *want)
{
    t_get_exact(e, e->c, "get-shm", p, want);
    t_get_exact(e, e->cf, "get-frames", p, want);
}

/* No window holds a pin or a reservation any more (bounded poll: a copy or a
 * demotion may still be concluding). */
static bool t_nothing_held(t_env_t *e)
{
    for (int k = 0; k < T_POLL; k++) {
        if (t_stat(e, "pinned") == 0 && t_stat(e, "reserved") == 0)
            return true;
        zclock_sleep(5);
    }
    return false;
}

static void t_all(uint32_t *tiers, uint32_t n, uint32_t tier)
{
    for (uint32_t i = 0; i < n; i++)
        tiers[i] = tier;
}

/* issue 4 §3 / DESIGN.md §6: blocks that live only below the head (demoted there
 * by a full head) are advised for prefetch; prepare -> submit -> wait -> complete
 * promotes every one of them: a lookup then reports the head tier with nothing
 * left to advise, and gets through shared memory and through frames read from the
 * head exactly the bytes first put. Whichever handle runs the prefetch. */
static void prefetch_promotes_demoted_blocks_byte_exact(void **state)
{
    static const struct {
        const char *name;
        bool frames; /* the handle that prefetches is frames-only */
    } rows[] = {{"prefetch through the shm handle", false},
                {"prefetch through the frames handle", true}};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        print_message("%s\n", rows[r].name);
        t_env_t *e = t_fresh(state);
        t_demote_a(e);
        kvt_client_t *c = rows[r].frames ? e->cf : e->c;
        t_begin(c, "pf");
        kvt_token_t *tok = t_prepare_prefetch(c, "pf", &e->a);
        uint64_t job = 7;
        assert_int_equal(kvt_submit_prefetch(c, job, tok), 0);
        kvt_job_result_t res;
        assert_int_equal(kvt_wait(c, &job, 1, T_CALL_MS, &res), 0);
        assert_int_equal(res.status, 0);
        assert_int_equal(res.n_keys, T_NA);
        assert_int_equal(res.n_failed, 0);
        int rc = kvt_complete_prefetch(c, &tok, NULL);
        if (rc != 0)
            fail_msg("complete_prefetch: %s", kvt_last_error(c));
        assert_null(tok);
        t_end(c, "pf", 0);

        uint32_t tiers[T_MAXK], head[T_MAXK];
        assert_false(t_where(e, &e->a, tiers));
        t_all(head, T_NA, T_HEAD);
        assert_memory_equal(tiers, head, T_NA * sizeof *tiers);
        assert_int_equal(t_stat(e, "prefetch_committed"), T_NA);
        assert_int_equal(t_stat(e, "prefetch_failed"), 0);
        t_get_both(e, &e->a, head);
        assert_true(t_nothing_held(e));
    }
}

/* DESIGN.md §6 window rules / docs/SCHEDULER.md: request_end closes an open
 * prefetch window (its head reservations aborted, its source pins released),
 * even with the copy still in flight. The process survives, the job is still
 * reported once, the late complete is refused (NOT_FOUND) and consumes the token,
 * nothing stays held, nothing was promoted (the blocks are served from below,
 * byte-exact), a write that takes the freed head room reads back its own bytes,
 * and a new prefetch of the same blocks then promotes them. */
static void request_end_right_after_prefetch_submit(void **state)
{
    t_env_t *e = t_fresh(state);
    t_demote_a(e);
    t_begin(e->c, "pf-end");
    kvt_token_t *tok = t_prepare_prefetch(e->c, "pf-end", &e->a);
    uint64_t job = 9;
    assert_int_equal(kvt_submit_prefetch(e->c, job, tok), 0);
    t_end(e->c, "pf-end", 1); /* the prefetch window, closed by the safety net */

    kvt_job_result_t res;
    assert_int_equal(kvt_wait(e->c, &job, 1, T_CALL_MS, &res), 0);
    assert_int_equal(res.job_id, job);
    assert_int_equal(res.n_keys, T_NA);
    int rc = kvt_complete_prefetch(e->c, &tok, NULL);
    assert_int_equal(rc, -KVT_NOT_FOUND); /* the request is gone */
    assert_null(tok);
    assert_true(t_nothing_held(e));
    assert_int_equal(t_stat(e, "prefetch_committed"), 0);

    uint32_t tiers[T_MAXK], low[T_MAXK];
    assert_true(t_where(e, &e->a, tiers));
    t_all(low, T_NA, T_LOW);
    assert_memory_equal(tiers, low, T_NA * sizeof *tiers);
    t_get_both(e, &e->a, low);
    /* the aborted reservations' head slots are free again: a write takes them */
    t_prompt(e, &e->x, T_NA);
    t_put(e, e->c, "put-x", &e->x);
    (void)t_where(e, &e->x, tiers);
    t_get_both(e, &e->x, tiers);

    /* consistent enough to promote them now */
    t_begin(e->c, "pf-again");
    tok = t_prepare_prefetch(e->c, "pf-again", &e->a);
    job = 10;
    assert_int_equal(kvt_submit_prefetch(e->c, job, tok), 0);
    assert_int_equal(kvt_wait(e->c, &job, 1, T_CALL_MS, &res), 0);
    assert_int_equal(res.status, 0);
    assert_int_equal(res.n_failed, 0);
    assert_int_equal(kvt_complete_prefetch(e->c, &tok, NULL), 0);
    t_end(e->c, "pf-again", 0);
    uint32_t head[T_MAXK];
    assert_false(t_where(e, &e->a, tiers));
    t_all(head, T_NA, T_HEAD);
    assert_memory_equal(tiers, head, T_NA * sizeof *tiers);
    assert_int_equal(t_stat(e, "prefetch_committed"), T_NA);
    t_get_both(e, &e->a, head);
    (void)t_where(e, &e->x, tiers); /* x may have gone down to make the room */
    t_get_both(e, &e->x, tiers);
    assert_true(t_nothing_held(e));
}

#define T_RACE_ROUNDS 200

/* DESIGN.md §6 "pins and reservations are leases" / tier_actor.h (a block's bytes
 * are only ever those its writer put): request_end frees the head slots an open
 * prefetch reserved, and the next write may take them at once. A prefetch copy
 * still in flight must then never land in them: the write reads back its own
 * bytes, SERVING. The copy is usually done before the write starts, so the race
 * is tried T_RACE_ROUNDS times; the test fails on the first round it is lost
 * (on the code of this commit: about 1 run in 10 under no load, more under load). */
static void ended_prefetch_copy_never_lands_in_reused_slots(void **state)
{
    t_env_t *e = t_fresh(state);
    t_demote_a(e); /* a stays below: none of its prefetches below commits */
    char rid[32], pid[32];
    for (uint32_t r = 0; r < T_RACE_ROUNDS; r++) {
        snprintf(rid, sizeof rid, "race-%u", r);
        t_begin(e->c, rid);
        kvt_token_t *tok = t_prepare_prefetch(e->c, rid, &e->a);
        uint64_t job = 1000 + r;
        assert_int_equal(kvt_submit_prefetch(e->c, job, tok), 0);
        t_end(e->c, rid, 1);
        t_prompt(e, &e->x, T_NA); /* into the slots just freed, copy maybe in flight */
        snprintf(pid, sizeof pid, "race-put-%u", r);
        t_put(e, e->c, pid, &e->x);
        kvt_job_result_t res;
        assert_int_equal(kvt_wait(e->c, &job, 1, T_CALL_MS, &res), 0);
        assert_int_equal(kvt_complete_prefetch(e->c, &tok, NULL), -KVT_NOT_FOUND);
        uint32_t tiers[T_MAXK];
        (void)t_where(e, &e->x, tiers);
        t_get_exact(e, e->c, "race-get", &e->x, tiers);
        uint32_t removed = 0; /* x's room for the next round, and the lower tier's */
        assert_int_equal(kvt_remove(e->c, T_INST, e->x.keys, e->x.n, &removed), 0);
        assert_int_equal(removed, e->x.n);
    }
    assert_true(t_nothing_held(e));
}

/* issue 4 §3: complete_prefetch with success = false for some keys rolls those
 * back (head reservation released, still served from below, still advised);
 * the others are committed on the head. Every key then reads back byte-exact
 * from the tier the lookup names. */
static void failed_keys_of_a_prefetch_stay_below(void **state)
{
    static const struct {
        const char *name;
        uint32_t fail; /* bit k: prompt key k reported failed */
    } rows[] = {{"the first key failed", 0x01u},
                {"every other key failed", 0x55u},
                {"the last two keys failed", 0xc0u},
                {"every key failed", 0xffu}};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        print_message("%s\n", rows[r].name);
        t_env_t *e = t_fresh(state);
        t_demote_a(e);
        t_begin(e->c, "pf-mask");
        kvt_token_t *tok = t_prepare_prefetch(e->c, "pf-mask", &e->a);
        uint64_t job = 11;
        assert_int_equal(kvt_submit_prefetch(e->c, job, tok), 0);
        kvt_job_result_t res;
        assert_int_equal(kvt_wait(e->c, &job, 1, T_CALL_MS, &res), 0);
        assert_int_equal(res.status, 0);
        assert_int_equal(res.n_failed, 0);
        /* success is one flag per token key, in the token's order */
        bool ok[T_MAXK];
        uint32_t want[T_MAXK], n_fail = 0;
        for (uint32_t i = 0; i < T_NA; i++) {
            uint32_t k = t_index(&e->a, &kvt_token_keys(tok)[i]);
            bool failed = (rows[r].fail >> k) & 1u;
            ok[i] = !failed;
            want[k] = failed ? T_LOW : T_HEAD;
            n_fail += failed;
        }
        int rc = kvt_complete_prefetch(e->c, &tok, ok);
        if (rc != 0)
            fail_msg("complete_prefetch: %s", kvt_last_error(e->c));
        t_end(e->c, "pf-mask", 0);

        uint32_t tiers[T_MAXK];
        assert_int_equal(t_where(e, &e->a, tiers), n_fail > 0);
        assert_memory_equal(tiers, want, T_NA * sizeof *tiers);
        assert_int_equal(t_stat(e, "prefetch_committed"), T_NA - n_fail);
        assert_int_equal(t_stat(e, "prefetch_failed"), n_fail);
        t_get_both(e, &e->a, want);
        assert_true(t_nothing_held(e));
    }
}

int main(void)
{
    srand(4243);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(prefetch_promotes_demoted_blocks_byte_exact, teardown),
        cmocka_unit_test_teardown(request_end_right_after_prefetch_submit, teardown),
        cmocka_unit_test_teardown(failed_keys_of_a_prefetch_stay_below, teardown),
        cmocka_unit_test_teardown(ended_prefetch_copy_never_lands_in_reused_slots, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
