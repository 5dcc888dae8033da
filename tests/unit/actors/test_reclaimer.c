/* test_reclaimer.c — the reclaimer actor and the scheduler's DELETING state
 * (actors/reclaimer.h, actors/sched_internal.c; DESIGN.md §6 "Reclaim", issue 4 §4)
 * against a real scheduler and a fake tier actor over real sockets: a tier above
 * its high watermark drains to its low one, pinned blocks are never removed, a
 * DELETING block is not served and its slot is freed only after the delay, and the
 * DELETING queue's bound is reported as backpressure. Conditions are polled with a
 * deadline; no timing thresholds. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reclaimer.h"
#include "sched_testkit.h"

#define CAP 20

typedef struct {
    tk_env_t e;
    zactor_t *rec;
    bus_client_t *ic; /* test -> scheduler internal plane */
} fx_t;

static void s_fast_delete(sched_config_t *c)
{
    c->delete_delay_ms = 1;
}

static void s_slow_delete(sched_config_t *c)
{
    c->delete_delay_ms = 600000; /* never within a test */
}

static void s_tiny_queue(sched_config_t *c)
{
    c->delete_delay_ms = 600000;
    c->max_pending_deletes = 2;
}

static void s_start(fx_t *fx, void (*tweak)(sched_config_t *))
{
    memset(fx, 0, sizeof *fx);
    tk_env_start(&fx->e, CAP, tweak);
    char iep[256];
    assert_int_equal(sched_actor_internal_endpoint(fx->e.t->sched, iep, sizeof iep), 0);
    bus_client_config_t cc = {.name = "test", .default_timeout_ms = TK_CALL_MS};
    fx->ic = bus_client_new(iep, &cc);
    assert_non_null(fx->ic);
    assert_int_equal(tk_begin(fx->e.t, TK_INST, "w", 0), 0);
}

static void s_start_reclaimer(fx_t *fx, uint32_t high, uint32_t low)
{
    reclaimer_config_t rc;
    memset(&rc, 0, sizeof rc);
    assert_int_equal(
        sched_actor_internal_endpoint(fx->e.t->sched, rc.sched_endpoint, sizeof rc.sched_endpoint),
        0);
    rc.interval_ms = 10;
    rc.batch = 3; /* several requests per drain */
    rc.n_tiers = 1;
    rc.tiers[0] = (reclaimer_tier_t){.tier_id = 1, .high_permille = high, .low_permille = low};
    fx->rec = reclaimer_actor_new(&rc);
    assert_non_null(fx->rec);
}

static void s_stop(fx_t *fx)
{
    zactor_destroy(&fx->rec);
    bus_client_destroy(&fx->ic);
    tk_env_stop(&fx->e);
}

/* Is key i's header still SERVING on the (fake) tier actor? (no scheduler touch) */
static bool s_on_tier(fx_t *fx, uint32_t i)
{
    uint8_t k[16];
    tk_key(i, k);
    return sched_fake_tier_count_key(fx->e.ft, k) == 1;
}

typedef struct {
    fx_t *fx;
    uint64_t used;
} s_used_t;

static bool s_drained(tk_t *t, void *arg)
{
    s_used_t *w = arg;
    return tk_stat(t, "tier.host0.used") <= w->used && tk_stat(t, "deleting") == 0;
}

typedef struct {
    fx_t *fx;
    uint32_t first, n;
} s_range_t;

static bool s_gone_from_tier(tk_t *t, void *arg)
{
    (void)t;
    s_range_t *r = arg;
    for (uint32_t i = r->first; i < r->first + r->n; i++)
        if (s_on_tier(r->fx, i))
            return false;
    return true;
}

/* ReclaimCandidates over the internal plane; the reply stays in fx->e.t->rep. */
static int s_candidates(fx_t *fx, uint32_t max, bool mark, uint32_t low)
{
    tk_t *t = fx->e.t;
    kvtier_ReclaimCandidatesRequest *r =
        &tk_req(t, kvtier_Envelope_reclaim_candidates_req_tag)->body.reclaim_candidates_req;
    r->tier_id = 1;
    r->max_blocks = max;
    r->mark_deleting = mark;
    r->low_permille = low;
    kvtier_Status st;
    int rc = bus_client_call(fx->ic, t->req, NULL, NULL, 0, TK_CALL_MS, t->rep, NULL, NULL, &st);
    return rc < 0 ? (int)st.code : 0;
}

/* Issue 4 §4: above high, the last tier drains to its low watermark, coldest first
 * (policy order), and the tier actor gets the deletes. */
static void test_reclaim_drains_last_tier_from_above_high_to_low(void **state)
{
    (void)state;
    fx_t fx;
    s_start(&fx, s_fast_delete);
    assert_int_equal(tk_put(fx.e.t, "w", 0, 18), 0); /* 90% > 80% */
    s_start_reclaimer(&fx, 800, 500);
    s_used_t w = {&fx, 10};
    assert_true(tk_poll(s_drained, fx.e.t, &w));
    assert_int_equal(tk_stat(fx.e.t, "tier.host0.used"), 10); /* exactly down to low */
    assert_int_equal(tk_stat(fx.e.t, "reclaimed"), 8);
    s_range_t gone = {&fx, 0, 8};
    assert_true(tk_poll(s_gone_from_tier, fx.e.t, &gone));
    for (uint32_t i = 0; i < 18; i++) {
        assert_int_equal(s_on_tier(&fx, i), i >= 8);
        assert_int_equal(tk_cached(fx.e.t, i), i >= 8);
    }
    reclaimer_stats_t rs;
    assert_int_equal(reclaimer_actor_stats(fx.rec, &rs), 0);
    assert_int_equal(rs.marked, 8);
    assert_int_equal(rs.drains, 1);
    assert_int_equal(rs.draining, 0);
    s_stop(&fx);
}

typedef struct {
    fx_t *fx;
    uint64_t requests;
} s_passes_t;

static bool s_watched(tk_t *t, void *arg)
{
    (void)t;
    s_passes_t *p = arg;
    reclaimer_stats_t rs;
    assert_int_equal(reclaimer_actor_stats(p->fx->rec, &rs), 0);
    return rs.requests >= p->requests;
}

/* Issue 14 §1: a last tier reclaimed on demand (the coordinator's default for a
 * chain's last tier) is only watched: above its high watermark it is not drained —
 * nothing marked, every block still served — and a write that needs a slot takes
 * the slot engine's victim at reserve time instead (the tier fills to its capacity). */
static void test_on_demand_tier_is_only_watched_and_fills(void **state)
{
    (void)state;
    fx_t fx;
    s_start(&fx, s_fast_delete);
    assert_int_equal(tk_put(fx.e.t, "w", 0, 18), 0); /* 90% > 80% */
    reclaimer_config_t rc;
    memset(&rc, 0, sizeof rc);
    assert_int_equal(
        sched_actor_internal_endpoint(fx.e.t->sched, rc.sched_endpoint, sizeof rc.sched_endpoint),
        0);
    rc.interval_ms = 10;
    rc.n_tiers = 1;
    rc.tiers[0] = (reclaimer_tier_t){
        .tier_id = 1, .high_permille = 800, .low_permille = 500, .on_demand = true};
    fx.rec = reclaimer_actor_new(&rc);
    assert_non_null(fx.rec);
    s_passes_t p = {&fx, 5};
    assert_true(tk_poll(s_watched, fx.e.t, &p)); /* several passes over the tier */
    reclaimer_stats_t rs;
    assert_int_equal(reclaimer_actor_stats(fx.rec, &rs), 0);
    assert_int_equal(rs.marked, 0);
    assert_int_equal(rs.drains, 0);
    assert_int_equal(rs.fill_permille[0], 900); /* watched */
    assert_int_equal(tk_stat(fx.e.t, "deleting"), 0);
    assert_int_equal(tk_stat(fx.e.t, "reclaim_marked"), 0);
    for (uint32_t i = 0; i < 18; i++)
        assert_true(tk_cached(fx.e.t, i));
    /* 2 more fill it; 4 beyond evict the 4 coldest when they reserve */
    assert_int_equal(tk_put(fx.e.t, "w", 18, 6), 0);
    assert_int_equal(tk_stat(fx.e.t, "tier.host0.used"), CAP);
    assert_int_equal(tk_stat(fx.e.t, "evictions"), 4);
    for (uint32_t i = 0; i < 24; i++)
        assert_int_equal(tk_cached(fx.e.t, i), i >= 4);
    s_stop(&fx);
}

static void s_fifo(sched_config_t *c)
{
    c->delete_delay_ms = 600000;
    snprintf(c->tiers[0].policy, sizeof c->tiers[0].policy, "fifo");
}

static void s_clock(sched_config_t *c)
{
    c->delete_delay_ms = 600000;
    snprintf(c->tiers[0].policy, sizeof c->tiers[0].policy, "clock");
}

static void s_small_scan(sched_config_t *c)
{
    c->delete_delay_ms = 600000;
    c->reclaim_scan = 4;
}

/* The reclaim budget (reclaim_scan) counts blocks that can be taken: DELETING
 * blocks at the cold end of the order do not hide the blocks behind them, so
 * each call marks more until the tier is down to its target. */
static void test_reclaim_walks_past_blocks_it_cannot_take(void **state)
{
    (void)state;
    fx_t fx;
    s_start(&fx, s_small_scan);
    assert_int_equal(tk_put(fx.e.t, "w", 0, 16), 0);
    for (int call = 0; call < 3; call++) { /* 16 used, target 20 x 0.2 = 4 */
        assert_int_equal(s_candidates(&fx, 4, true, 200), 0);
        const kvtier_ReclaimCandidatesReply *r = &fx.e.t->rep->body.reclaim_candidates_rep;
        if (r->marked != 4)
            fail_msg("call %d marked %u blocks, expected 4", call, r->marked);
    }
    assert_int_equal(s_candidates(&fx, 4, true, 200), 0);
    assert_int_equal(fx.e.t->rep->body.reclaim_candidates_rep.marked, 0); /* at target */
    s_stop(&fx);
}

/* The first n candidates, as key numbers (tk_key), coldest first. */
static void s_candidate_ids(fx_t *fx, uint32_t n, uint32_t *ids)
{
    assert_int_equal(s_candidates(fx, n, false, 0), 0);
    const kvtier_ReclaimCandidatesReply *r = &fx->e.t->rep->body.reclaim_candidates_rep;
    assert_int_equal(r->blocks_count, n);
    for (uint32_t i = 0; i < n; i++) {
        ids[i] = UINT32_MAX;
        for (uint32_t k = 0; k < 32 && ids[i] == UINT32_MAX; k++) {
            uint8_t key[16];
            tk_key(k, key);
            if (memcmp(r->blocks[i].key, key, 16) == 0)
                ids[i] = k;
        }
    }
}

/* DESIGN §8: a policy orders slots, and reclaim takes the tier policy's order (not
 * a second one kept beside it): after hits on the oldest blocks, an lru tier's
 * coldest are the ones not hit, a fifo tier's are still the first admitted, and a
 * clock tier's are those without a reference bit. */
static void test_reclaim_order_is_the_tier_policy_order(void **state)
{
    (void)state;
    void (*tweaks[3])(sched_config_t *) = {s_slow_delete, s_fifo, s_clock};
    static const uint32_t want[3][4] = {{4, 5, 6, 7}, {0, 1, 2, 3}, {4, 5, 6, 7}};
    for (int p = 0; p < 3; p++) {
        fx_t fx;
        s_start(&fx, tweaks[p]);
        assert_int_equal(tk_put(fx.e.t, "w", 0, 12), 0);
        for (uint32_t i = 0; i < 4; i++)
            assert_true(tk_cached(fx.e.t, i)); /* a hit */
        uint32_t ids[4];
        s_candidate_ids(&fx, 4, ids);
        for (uint32_t i = 0; i < 4; i++)
            if (ids[i] != want[p][i])
                fail_msg("policy %d candidate %u: key %u, expected %u", p, i, ids[i], want[p][i]);
        s_stop(&fx);
    }
}

/* Issue 4 §4 / DESIGN §6: pinned blocks are never reclaimed; once unpinned they
 * are candidates like any other (freed by a later drain). */
static void test_reclaim_never_removes_pinned_blocks(void **state)
{
    (void)state;
    fx_t fx;
    s_start(&fx, s_fast_delete);
    tk_t *t = fx.e.t;
    assert_int_equal(tk_put(t, "w", 0, 18), 0);
    /* the 5 coldest blocks are being read */
    assert_int_equal(tk_begin(t, TK_INST, "rd", 0), 0);
    uint8_t keys[5][16];
    tk_keys(0, 5, keys);
    assert_int_equal(tk_prepare_get(t, "rd", keys, 5), 0);
    uint64_t token = t->rep->body.prepare_get_rep.token.token_id;
    /* listed as candidates before the reclaimer runs: the coldest is block 0 */
    assert_int_equal(s_candidates(&fx, 8, false, 0), 0);
    assert_int_equal(t->rep->body.reclaim_candidates_rep.blocks_count, 8);
    uint8_t k5[16];
    tk_key(5, k5); /* pinned 0..4 are not candidates */
    assert_memory_equal(t->rep->body.reclaim_candidates_rep.blocks[0].key, k5, 16);

    s_start_reclaimer(&fx, 800, 500);
    s_used_t w = {&fx, 10};
    assert_true(tk_poll(s_drained, t, &w));
    s_range_t gone = {&fx, 5, 8};
    assert_true(tk_poll(s_gone_from_tier, t, &gone));
    for (uint32_t i = 0; i < 18; i++)
        assert_int_equal(s_on_tier(&fx, i), i < 5 || i >= 13);

    /* unpinned, they are the coldest: the next drain takes them */
    assert_int_equal(tk_complete(t, kvtier_Envelope_complete_get_req_tag, "rd", token), 0);
    assert_int_equal(tk_put(t, "w", 100, 7), 0); /* 17 of 20 > 80% */
    s_range_t pinned = {&fx, 0, 5};
    assert_true(tk_poll(s_gone_from_tier, t, &pinned));
    assert_true(tk_poll(s_drained, t, &w));
    for (uint32_t i = 0; i < 5; i++)
        assert_false(tk_cached(t, i));
    for (uint32_t i = 100; i < 107; i++)
        assert_true(s_on_tier(&fx, i));
    s_stop(&fx);
}

/* DESIGN §6: deletion is two-step. A DELETING block is not served nor pinnable at
 * once, but its slot (and the tier's header) is kept until the delay passed; a put
 * of the same key stores it again instead of skipping it as cached. */
static void test_deleting_block_not_served_and_slot_kept_until_delay(void **state)
{
    (void)state;
    fx_t fx;
    s_start(&fx, s_slow_delete);
    tk_t *t = fx.e.t;
    assert_int_equal(tk_put(t, "w", 0, 10), 0);
    assert_int_equal(s_candidates(&fx, 3, true, 100), 0);
    const kvtier_ReclaimCandidatesReply *r = &t->rep->body.reclaim_candidates_rep;
    assert_int_equal(r->marked, 3);
    assert_int_equal(r->deleting, 3);
    assert_int_equal(r->next_tier_id, 0);
    assert_int_equal(r->fill_permille, 350); /* 7 of 20, DELETING excluded */
    for (uint32_t i = 0; i < 10; i++)
        assert_int_equal(tk_cached(t, i), i >= 3);
    uint8_t k0[1][16];
    tk_key(0, k0[0]);
    assert_int_equal(tk_begin(t, TK_INST, "rd", 0), 0);
    assert_int_equal(tk_prepare_get(t, "rd", k0, 1), kvtier_StatusCode_STATUS_NOT_FOUND);
    for (uint32_t i = 0; i < 3; i++)
        assert_true(s_on_tier(&fx, i)); /* not freed before the delay */
    assert_int_equal(tk_stat(t, "tier.host0.used"), 10);
    assert_int_equal(tk_stat(t, "deleting"), 3);
    /* a put of a DELETING key stores it again */
    assert_int_equal(tk_put(t, "w", 0, 1), 0);
    assert_true(tk_cached(t, 0));
    assert_int_equal(tk_stat(t, "deleting"), 2);
    s_stop(&fx);
}

/* Issue 4 §4: pending work is bounded; a full DELETING queue is backpressure,
 * reported and counted; a low watermark of 0 is refused. */
static void test_reclaim_pending_bound_is_backpressure(void **state)
{
    (void)state;
    fx_t fx;
    s_start(&fx, s_tiny_queue);
    tk_t *t = fx.e.t;
    assert_int_equal(tk_put(t, "w", 0, 10), 0);
    assert_int_equal(s_candidates(&fx, 5, true, 100), 0);
    assert_int_equal(t->rep->body.reclaim_candidates_rep.marked, 2);
    assert_true(t->rep->body.reclaim_candidates_rep.backpressure);
    assert_int_equal(tk_stat(t, "reclaim_backpressure"), 1);
    assert_int_equal(s_candidates(&fx, 5, true, 0), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    s_stop(&fx);
}

static void s_two_tiers(sched_config_t *c)
{
    c->n_tiers = 2;
    c->tiers[1] = (sched_tier_config_t){.tier_id = 2, .capacity = CAP, .slot_size = 4096};
    snprintf(c->tiers[1].name, sizeof c->tiers[1].name, "nvme0");
    snprintf(c->tiers[1].kind, sizeof c->tiers[1].kind, "nvme");
    c->chains[0].n_tiers = 2;
    c->chains[0].tier_ids[1] = 2;
}

/* Issue 4 §4: a tier with a next tier in its chain is demoted, not deleted: until
 * the migrator exists the reclaimer only watches it, and the scheduler refuses to
 * mark its blocks DELETING (it names the next tier). */
static void test_reclaim_tier_with_next_tier_is_only_watched(void **state)
{
    (void)state;
    fx_t fx;
    s_start(&fx, s_two_tiers);
    tk_t *t = fx.e.t;
    sched_fake_tier_t *ft2 = sched_fake_tier_new(2, CAP);
    assert_non_null(ft2);
    tk_tier_up(t, 2, sched_fake_tier_endpoint(ft2), 2, CAP, 4096);
    assert_int_equal(tk_put(t, "w", 0, 18), 0); /* head tier host0 at 90% */
    assert_int_equal(s_candidates(&fx, 4, false, 0), 0);
    assert_int_equal(t->rep->body.reclaim_candidates_rep.next_tier_id, 2);
    assert_int_equal(t->rep->body.reclaim_candidates_rep.blocks_count, 4);
    assert_int_equal(s_candidates(&fx, 4, true, 500), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);

    reclaimer_config_t rc;
    memset(&rc, 0, sizeof rc);
    assert_int_equal(
        sched_actor_internal_endpoint(t->sched, rc.sched_endpoint, sizeof rc.sched_endpoint), 0);
    rc.interval_ms = 10;
    rc.n_tiers = 2;
    rc.tiers[0] = (reclaimer_tier_t){1, 800, 500, false};
    rc.tiers[1] = (reclaimer_tier_t){2, 800, 500, false};
    fx.rec = reclaimer_actor_new(&rc);
    assert_non_null(fx.rec);
    reclaimer_stats_t rs;
    int64_t until = zclock_mono() + TK_POLL_MS;
    do {
        assert_int_equal(reclaimer_actor_stats(fx.rec, &rs), 0);
        zclock_sleep(5);
    } while ((rs.not_last < 3 || rs.requests < 6) && zclock_mono() < until);
    assert_true(rs.not_last >= 3 && rs.requests >= 6); /* several passes over both tiers */
    assert_int_equal(rs.marked, 0);
    assert_int_equal(rs.fill_permille[0], 900);
    assert_int_equal(rs.fill_permille[1], 0);
    assert_int_equal(tk_stat(t, "tier.host0.used"), 18);
    assert_int_equal(tk_stat(t, "deleting"), 0);
    s_stop(&fx);
    sched_fake_tier_destroy(&ft2);
}

/* Config rule: 0 < low < high <= 1000 (permille), tier ids known and unique. */
static void test_reclaimer_config_rejects_bad_watermarks(void **state)
{
    (void)state;
    reclaimer_config_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.sched_endpoint, sizeof c.sched_endpoint, "inproc://nowhere");
    c.n_tiers = 1;
    char err[256];
    const reclaimer_tier_t bad[] = {{1, 800, 800, false},  {1, 800, 900, false},
                                    {1, 1001, 500, false}, {1, 800, 0, false},
                                    {0, 800, 500, false},  {33, 800, 500, false}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c.tiers[0] = bad[i];
        assert_int_equal(reclaimer_config_check(&c, err, sizeof err), -EINVAL);
        assert_null(reclaimer_actor_new(&c));
    }
    c.tiers[0] = (reclaimer_tier_t){1, 1000, 999, false};
    assert_int_equal(reclaimer_config_check(&c, err, sizeof err), 0);
    c.n_tiers = 2;
    c.tiers[1] = c.tiers[0];
    assert_int_equal(reclaimer_config_check(&c, err, sizeof err), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reclaim_drains_last_tier_from_above_high_to_low),
        cmocka_unit_test(test_on_demand_tier_is_only_watched_and_fills),
        cmocka_unit_test(test_reclaim_never_removes_pinned_blocks),
        cmocka_unit_test(test_reclaim_order_is_the_tier_policy_order),
        cmocka_unit_test(test_reclaim_walks_past_blocks_it_cannot_take),
        cmocka_unit_test(test_deleting_block_not_served_and_slot_kept_until_delay),
        cmocka_unit_test(test_reclaim_pending_bound_is_backpressure),
        cmocka_unit_test(test_reclaim_tier_with_next_tier_is_only_watched),
        cmocka_unit_test(test_reclaimer_config_rejects_bad_watermarks),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
