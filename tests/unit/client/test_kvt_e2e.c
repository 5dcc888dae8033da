/* test_kvt_e2e.c — libkvtier against the real scheduler (actors/sched_actor.h) and a
 * real host tier actor (actors/tier_actor.h), both started in this process and
 * wired the way the coordinator process wires them (the tier's membership is
 * handed to the scheduler). Real block keys (kvt_block_keys), real windows:
 * put then get byte-exact through shared memory and through frames, the three
 * lookup modes, TTL expiry and touch, keys already serving skipped by a put. */
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
#include "client_testkit.h"
#include "kvtier.h"
#include "sched_actor.h"
#include "tier_actor.h"

#define T_BLOCK 20000u
#define T_SLOT 32768u
#define T_CAPACITY 64u
#define T_TPB 16u
#define T_INST "llama-test"
#define T_MAXK 32

#define T_WRITE_GRACE_MS 3000

typedef struct {
    ck_service_t svc;
    kvt_client_t *c;  /* shared memory allowed */
    kvt_client_t *cf; /* frames only */
    uint8_t *src[T_MAXK], *dst[T_MAXK];
    uint32_t seq;
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

static int setup(void **state)
{
    t_env_t *e = calloc(1, sizeof *e);
    if (ck_tier_start(&e->svc, "e2e", T_CAPACITY, T_SLOT) < 0)
        return -1;
    sched_config_t sc;
    ck_sched_config(&sc, "e2e", T_CAPACITY, T_SLOT);
    sc.write_grace_ms = T_WRITE_GRACE_MS; /* short, for the stale-token rule below */
    e->svc.sched = sched_actor_new(&sc);
    if (!e->svc.sched)
        return -1;
    sched_actor_endpoint(e->svc.sched, e->svc.sched_ep, sizeof e->svc.sched_ep);
    if (ck_announce(e->svc.sched, &e->svc) < 0)
        return -1;

    e->c = t_client(e, false);
    e->cf = t_client(e, true);
    if (!e->c || !e->cf)
        return -1;
    /* the scheduler reads the tier's inventory before it accepts writes: wait for it */
    kvt_cluster_info_t ci;
    for (int i = 0; i < 500; i++) {
        if (kvt_cluster_info(e->c, &ci) == 0 && ci.n_tiers == 1 && ci.tiers[0].up)
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
    for (int i = 0; i < T_MAXK; i++) {
        e->src[i] = malloc(T_BLOCK);
        e->dst[i] = malloc(T_BLOCK);
    }
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    t_env_t *e = *state;
    kvt_close(&e->c);
    kvt_close(&e->cf);
    ck_stop(&e->svc);
    for (int i = 0; i < T_MAXK; i++) {
        free(e->src[i]);
        free(e->dst[i]);
    }
    free(e);
    return 0;
}

/* n block keys of a fresh prompt (distinct per call) and random bytes per block */
static void t_prompt(t_env_t *e, kvt_key_t *keys, uint32_t n)
{
    uint32_t tokens[T_MAXK * T_TPB];
    e->seq++;
    for (uint32_t i = 0; i < n * T_TPB; i++)
        tokens[i] = e->seq * 100000u + i;
    assert_int_equal(kvt_block_keys(tokens, n * T_TPB, T_TPB, NULL, keys, n), (int)n);
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t b = 0; b < T_BLOCK; b++)
            e->src[i][b] = (uint8_t)(rand() & 0xff);
        memset(e->dst[i], 0, T_BLOCK);
    }
}

static void t_begin(kvt_client_t *c, const char *rid, uint64_t ttl_ms)
{
    kvt_request_t r = {.instance_id = T_INST, .request_id = rid, .ttl_ms = ttl_ms};
    assert_int_equal(kvt_request_begin(c, &r), 0);
}

static void t_end(kvt_client_t *c, const char *rid)
{
    kvt_request_end_info_t info;
    assert_int_equal(kvt_request_end(c, T_INST, rid, &info), 0);
    assert_int_equal(info.closed_windows, 0);
}

/* Puts keys (bytes e->src[0..n)) in request rid; returns how many the token covered. */
static uint32_t t_put(t_env_t *e, kvt_client_t *c, const char *rid, const kvt_key_t *keys,
                      uint32_t n, uint64_t job)
{
    kvt_token_t *tok = NULL;
    int rc = kvt_prepare_put(c, T_INST, rid, keys, n, &tok);
    if (rc != 0)
        fprintf(stderr, "prepare_put: %s\n", kvt_last_error(c));
    assert_int_equal(rc, 0);
    uint32_t m = kvt_token_count(tok);
    /* the token lists the keys to write in request order: match buffers to them */
    const void *bufs[T_MAXK];
    const kvt_key_t *tk = kvt_token_keys(tok);
    for (uint32_t i = 0; i < m; i++) {
        bufs[i] = NULL;
        for (uint32_t k = 0; k < n; k++)
            if (memcmp(&tk[i], &keys[k], sizeof keys[k]) == 0)
                bufs[i] = e->src[k];
        assert_non_null(bufs[i]);
        assert_int_equal(kvt_token_tier(tok, i), 1);
    }
    assert_int_equal(kvt_submit_put(c, job, tok, bufs, T_BLOCK), 0);
    kvt_job_result_t res;
    assert_int_equal(kvt_wait(c, &job, 1, 10000, &res), 0);
    assert_int_equal(res.status, 0);
    assert_int_equal(res.n_failed, 0);
    rc = kvt_complete_put(c, &tok, NULL);
    if (rc != 0)
        fprintf(stderr, "complete_put: %s\n", kvt_last_error(c));
    assert_int_equal(rc, 0);
    return m;
}

static void t_get_exact(t_env_t *e, kvt_client_t *c, const char *rid, const kvt_key_t *keys,
                        uint32_t n, uint64_t job)
{
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_get(c, T_INST, rid, keys, n, &tok), 0);
    assert_int_equal(kvt_token_count(tok), n);
    assert_memory_equal(kvt_token_keys(tok), keys, n * sizeof *keys);
    assert_int_equal(kvt_submit_get(c, job, tok, (void *const *)e->dst, T_BLOCK), 0);
    kvt_job_result_t res;
    assert_int_equal(kvt_wait(c, &job, 1, 10000, &res), 0);
    assert_int_equal(res.status, 0);
    assert_int_equal(res.n_failed, 0);
    assert_int_equal(kvt_complete_get(c, &tok, NULL), 0);
    for (uint32_t i = 0; i < n; i++)
        assert_memory_equal(e->dst[i], e->src[i], T_BLOCK);
}

/* issue 3 §5: put then get of random blocks, byte-exact, through shared memory. */
static void put_get_byte_exact_shm(void **state)
{
    t_env_t *e = *state;
    kvt_key_t keys[8];
    t_prompt(e, keys, 8);
    t_begin(e->c, "shm-1", 0);
    assert_int_equal(t_put(e, e->c, "shm-1", keys, 8, 1), 8);
    t_end(e->c, "shm-1");
    t_begin(e->c, "shm-2", 0);
    t_get_exact(e, e->c, "shm-2", keys, 8, 2);
    t_end(e->c, "shm-2");
    /* the frame client reads the same bytes through the tier actor */
    t_begin(e->cf, "shm-3", 0);
    t_get_exact(e, e->cf, "shm-3", keys, 8, 3);
    t_end(e->cf, "shm-3");
}

/* issue 3 §5: put then get of random blocks, byte-exact, through the frame path. */
static void put_get_byte_exact_frames(void **state)
{
    t_env_t *e = *state;
    kvt_key_t keys[8];
    t_prompt(e, keys, 8);
    t_begin(e->cf, "frm-1", 0);
    assert_int_equal(t_put(e, e->cf, "frm-1", keys, 8, 1), 8);
    t_end(e->cf, "frm-1");
    t_begin(e->c, "frm-2", 0);
    t_get_exact(e, e->c, "frm-2", keys, 8, 2); /* and shm reads what frames wrote */
    t_end(e->c, "frm-2");
    t_begin(e->cf, "frm-3", 0);
    t_get_exact(e, e->cf, "frm-3", keys, 8, 3);
    t_end(e->cf, "frm-3");
}

/* DESIGN.md §6: prepare_put leaves out keys already SERVING. */
static void put_skips_keys_already_serving(void **state)
{
    t_env_t *e = *state;
    kvt_key_t keys[6];
    t_prompt(e, keys, 6);
    t_begin(e->c, "skip-1", 0);
    assert_int_equal(t_put(e, e->c, "skip-1", keys, 3, 1), 3);
    t_end(e->c, "skip-1");
    t_begin(e->c, "skip-2", 0);
    assert_int_equal(t_put(e, e->c, "skip-2", keys, 6, 2), 3); /* only the 3 new ones */
    t_end(e->c, "skip-2");
    t_begin(e->c, "skip-3", 0);
    t_get_exact(e, e->c, "skip-3", keys, 6, 3);
    t_end(e->c, "skip-3");
}

/* DESIGN.md §6 Read / issue 3 §1: prefix, reverse sliding window and per-key lookups. */
static void lookups_in_three_modes(void **state)
{
    t_env_t *e = *state;
    kvt_key_t keys[10];
    t_prompt(e, keys, 10);
    t_begin(e->c, "look-1", 0);
    assert_int_equal(t_put(e, e->c, "look-1", keys, 8, 1), 8); /* keys 8, 9 never stored */
    t_end(e->c, "look-1");
    bool hit[10];
    uint32_t tiers[10];
    kvt_lookup_result_t r = {.hit = hit, .tier_ids = tiers};
    assert_int_equal(kvt_lookup(e->c, T_INST, NULL, KVT_LOOKUP_PREFIX, 0, keys, 10, &r), 0);
    assert_int_equal(r.hit_count, 8);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(hit[i], i < 8);
        assert_int_equal(tiers[i], i < 8 ? 1u : 0u);
    }
    assert_false(r.prefetch_advised);
    /* a hole at block 1: prefix stops there, reverse (window 2) still finds 8 */
    uint32_t removed = 0;
    assert_int_equal(kvt_remove(e->c, T_INST, &keys[1], 1, &removed), 0);
    assert_int_equal(removed, 1);
    assert_int_equal(kvt_lookup(e->c, T_INST, NULL, KVT_LOOKUP_PREFIX, 0, keys, 10, &r), 0);
    assert_int_equal(r.hit_count, 1);
    assert_int_equal(kvt_lookup(e->c, T_INST, NULL, KVT_LOOKUP_REVERSE, 2, keys, 10, &r), 0);
    assert_int_equal(r.hit_count, 8);
    assert_true(hit[7]);
    assert_false(hit[9]);
    /* per key: each independently */
    kvt_key_t mix[4] = {keys[0], keys[1], keys[9], keys[5]};
    assert_int_equal(kvt_lookup(e->c, T_INST, NULL, KVT_LOOKUP_PER_KEY, 0, mix, 4, &r), 0);
    assert_int_equal(r.hit_count, 2);
    assert_true(hit[0]);
    assert_false(hit[1]);
    assert_false(hit[2]);
    assert_true(hit[3]);
    assert_int_equal(tiers[3], 1);
    /* another instance never sees these keys */
    kvt_instance_t other = {
        .instance_id = "other", .tokens_per_block = T_TPB, .bytes_per_block = T_BLOCK};
    assert_int_equal(kvt_register_instance(e->c, &other), 0);
    assert_int_equal(kvt_lookup(e->c, "other", NULL, KVT_LOOKUP_PER_KEY, 0, mix, 4, &r), 0);
    assert_int_equal(r.hit_count, 0);
}

/* DESIGN.md §6 TTL: a request's TTL is the deadline of the blocks it writes; touch
 * extends it. The untouched block expires first; the touched one still hits. */
static void ttl_expiry_and_touch(void **state)
{
    t_env_t *e = *state;
    kvt_key_t keys[2];
    t_prompt(e, keys, 2);
    t_begin(e->c, "ttl-1", 300);
    assert_int_equal(t_put(e, e->c, "ttl-1", keys, 2, 1), 2);
    t_end(e->c, "ttl-1");
    uint32_t touched = 0;
    assert_int_equal(kvt_touch(e->c, T_INST, &keys[1], 1, 600000, &touched), 0);
    assert_int_equal(touched, 1);
    bool hit[2];
    kvt_lookup_result_t r = {.hit = hit};
    bool expired = false;
    for (int i = 0; i < 1000 && !expired; i++) { /* poll: at most ~10 s */
        assert_int_equal(kvt_lookup(e->c, T_INST, NULL, KVT_LOOKUP_PER_KEY, 0, keys, 2, &r), 0);
        expired = !hit[0];
        if (!expired)
            zclock_sleep(10);
    }
    assert_true(expired);
    assert_true(hit[1]);
}

/* DESIGN.md §2 "window": at most one open get window per request; a second
 * prepare is refused, and the first one still completes. */
static void second_prepare_in_a_window_is_refused(void **state)
{
    t_env_t *e = *state;
    kvt_key_t keys[2];
    t_prompt(e, keys, 2);
    t_begin(e->c, "win-1", 0);
    assert_int_equal(t_put(e, e->c, "win-1", keys, 2, 1), 2);
    kvt_token_t *a = NULL, *b = NULL;
    assert_int_equal(kvt_prepare_get(e->c, T_INST, "win-1", keys, 2, &a), 0);
    int rc = kvt_prepare_get(e->c, T_INST, "win-1", keys, 2, &b);
    assert_true(rc < 0);
    assert_null(b);
    assert_non_null(strstr(kvt_last_error(e->c), "prepare_get: "));
    assert_int_equal(kvt_complete_get(e->c, &a, NULL), 0);
    t_end(e->c, "win-1");
}

/* DESIGN.md §6 "pins and reservations are leases": a put token older than its
 * lease less a margin (a tenth, at least 1 s) is refused at submit with EXPIRED,
 * so a stalled writer never writes into a slot the scheduler gave away. The
 * sleep ages the token; it synchronises nothing. */
static void stale_put_token_is_refused_at_submit(void **state)
{
    t_env_t *e = *state;
    kvt_key_t keys[2];
    t_prompt(e, keys, 2);
    t_begin(e->c, "stale-1", 0);
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_put(e->c, T_INST, "stale-1", keys, 2, &tok), 0);
    zclock_sleep(T_WRITE_GRACE_MS - 1000 + 200);
    assert_int_equal(kvt_submit_put(e->c, 77, tok, (const void *const *)e->src, T_BLOCK),
                     -KVT_EXPIRED);
    assert_non_null(strstr(kvt_last_error(e->c), "prepare again"));
    kvt_complete_put(e->c, &tok, NULL); /* the window may already be closed: either way */
    t_end(e->c, "stale-1");
}

/* Issue "one source for shared identities and limits": every caller learns the
 * total and gets every counter. Against the real scheduler, pages of 7 asked for by
 * hand (kvt_stats_page from offset + n) give the same counters, in the same order,
 * as one kvt_stats with room for all, and every page reports that total; the
 * cluster info reports its total of tiers. */
static void stats_pages_of_the_real_scheduler_add_up(void **state)
{
    t_env_t *e = *state;
    static kvt_stat_t all[KVT_STATS_PAGE * 2], page[7];
    uint32_t n_all = 0, total = 0, n = 0;
    assert_int_equal(kvt_stats_page(e->c, NULL, 0, all, KVT_STATS_PAGE * 2, &n_all, &total), 0);
    assert_int_equal(n_all, total);
    assert_true(total > 7);
    uint32_t off = 0;
    while (off < total) {
        uint32_t t = 0;
        assert_int_equal(kvt_stats_page(e->c, NULL, off, page, 7, &n, &t), 0);
        assert_int_equal(t, total);
        assert_true(n > 0 && n <= 7);
        for (uint32_t i = 0; i < n; i++)
            assert_string_equal(page[i].name, all[off + i].name);
        off += n;
    }
    assert_int_equal(off, total);
    assert_int_equal(kvt_stats(e->c, T_INST, page, 7, &n), 0);
    assert_int_equal(n, 7);
    kvt_cluster_info_t ci;
    assert_int_equal(kvt_cluster_info(e->c, &ci), 0);
    assert_int_equal(ci.total_tiers, 1);
    assert_int_equal(ci.n_tiers, 1);
}

int main(void)
{
    srand(4242);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(put_get_byte_exact_shm),
        cmocka_unit_test(put_get_byte_exact_frames),
        cmocka_unit_test(put_skips_keys_already_serving),
        cmocka_unit_test(lookups_in_three_modes),
        cmocka_unit_test(ttl_expiry_and_touch),
        cmocka_unit_test(second_prepare_in_a_window_is_refused),
        cmocka_unit_test(stale_put_token_is_refused_at_submit),
        cmocka_unit_test(stats_pages_of_the_real_scheduler_add_up),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    zsys_shutdown();
    return rc;
}
