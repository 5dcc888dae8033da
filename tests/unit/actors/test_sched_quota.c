/* test_sched_quota.c — per-instance quotas (issue 4 §4; actors/sched_quota.c,
 * actors/reclaimer.h; docs/SCHEDULER.md "Quotas") against a real scheduler, real
 * reclaimer and fake tier actors over real sockets: an instance above its quota is
 * brought down to quota x low and nobody else loses a block; max_bytes counts in
 * the instance's bytes_per_block; "*" is the default; pinned and being-written
 * blocks are never taken; the last tier of the chain goes first; the DELETING
 * queue's bound is backpressure; an operator's trim (AdminTrimRequest, kvtier trim /
 * remove) takes an instance without a quota down to exactly its count, reports,
 * cancels, and refuses bad requests. Conditions are polled with a deadline; no
 * timing thresholds. */
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

#define CAP 64
#define OTHER "other-7b"

typedef struct {
    tk_env_t e;
    zactor_t *rec;
    bus_client_t *ic; /* test -> scheduler internal plane */
} fx_t;

static void s_quota(sched_config_t *c, const char *inst, uint64_t max_blocks, uint64_t max_bytes)
{
    sched_quota_config_t *q = &c->quotas[c->n_quotas++];
    snprintf(q->instance, sizeof q->instance, "%s", inst);
    q->max_blocks = max_blocks;
    q->max_bytes = max_bytes;
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

static void s_stop(fx_t *fx)
{
    zactor_destroy(&fx->rec);
    bus_client_destroy(&fx->ic);
    tk_env_stop(&fx->e);
}

/* Registers inst (bytes_per_block bpb) and opens request "w" for it. */
static void s_instance(fx_t *fx, const char *inst, uint64_t bpb)
{
    assert_int_equal(tk_register(fx->e.t, inst, bpb), 0);
    assert_int_equal(tk_begin(fx->e.t, inst, "w", 0), 0);
}

/* prepare_put + complete_put (all succeeded) of keys first..first+n-1 for inst. */
static int s_put_as(tk_t *t, const char *inst, uint32_t first, uint32_t n)
{
    uint8_t(*keys)[16] = calloc(n, 16);
    tk_keys(first, n, keys);
    int rc = tk_prepare(t, kvtier_Envelope_prepare_put_req_tag, inst, "w", keys, n);
    free(keys);
    if (rc)
        return rc;
    uint64_t token = t->rep->body.prepare_put_rep.token.token_id;
    uint32_t m = t->arr->keys.n;
    uint64_t ck[CAP];
    for (uint32_t i = 0; i < m && i < CAP; i++)
        ck[i] = 0xC0FFEE00u + i;
    kvtier_CompletePutRequest *r =
        &tk_req(t, kvtier_Envelope_complete_put_req_tag)->body.complete_put_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", inst);
    snprintf(r->request_id, sizeof r->request_id, "w");
    r->token_id = token;
    bus_arrays_t ra = {.checksums = {.v = ck, .n = m, .cap = CAP}};
    return tk_call(t, &ra);
}

/* QuotaEnforce over the internal plane; the reply stays in fx->e.t->rep. */
static int s_enforce(fx_t *fx, uint32_t max_blocks, uint32_t low_permille)
{
    tk_t *t = fx->e.t;
    kvtier_QuotaEnforceRequest *r =
        &tk_req(t, kvtier_Envelope_quota_enforce_req_tag)->body.quota_enforce_req;
    r->max_blocks = max_blocks;
    r->low_permille = low_permille;
    kvtier_Status st;
    int rc = bus_client_call(fx->ic, t->req, NULL, NULL, 0, TK_CALL_MS, t->rep, NULL, NULL, &st);
    return rc < 0 ? (int)st.code : 0;
}

/* A scheduler counter of one instance; UINT64_MAX when absent. */
static uint64_t s_inst_stat(tk_t *t, const char *inst, const char *name)
{
    kvtier_StatsRequest *r = &tk_req(t, kvtier_Envelope_stats_req_tag)->body.stats_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", inst);
    assert_int_equal(tk_call(t, NULL), 0);
    const kvtier_StatsReply *rep = &t->rep->body.stats_rep;
    for (pb_size_t i = 0; i < rep->counters_count; i++)
        if (strcmp(rep->counters[i].name, name) == 0)
            return rep->counters[i].value;
    return UINT64_MAX;
}

/* Is key i's header SERVING on the fake tier ft? (no scheduler touch) */
static bool s_on(sched_fake_tier_t *ft, uint32_t i)
{
    uint8_t k[16];
    tk_key(i, k);
    return sched_fake_tier_count_key(ft, k) == 1;
}

typedef struct {
    sched_fake_tier_t *ft;
    uint32_t first, n;
} s_range_t;

static bool s_gone(tk_t *t, void *arg)
{
    s_range_t *r = arg;
    for (uint32_t i = r->first; i < r->first + r->n; i++)
        if (s_on(r->ft, i))
            return false;
    return tk_stat(t, "deleting") == 0;
}

static void s_key_is(const kvtier_BlockRef *b, uint32_t i, uint32_t tier_id)
{
    uint8_t k[16];
    tk_key(i, k);
    assert_memory_equal(b->key, k, 16);
    assert_int_equal(b->tier_id, tier_id);
}

static void s_ten_blocks_fast(sched_config_t *c)
{
    c->delete_delay_ms = 1;
    s_quota(c, TK_INST, 10, 0);
}

/* Issue 4 §4: the reclaimer brings an instance above max_blocks down to
 * quota x quota_low, coldest first, through the DELETING path; another instance
 * (no quota) keeps every block. */
static void test_instance_over_max_blocks_brought_down_to_quota_times_low(void **state)
{
    (void)state;
    fx_t fx;
    s_start(&fx, s_ten_blocks_fast);
    tk_t *t = fx.e.t;
    s_instance(&fx, OTHER, 4096);
    assert_int_equal(s_put_as(t, TK_INST, 0, 20), 0);
    assert_int_equal(s_put_as(t, OTHER, 100, 10), 0);

    reclaimer_config_t rc;
    memset(&rc, 0, sizeof rc);
    assert_int_equal(
        sched_actor_internal_endpoint(t->sched, rc.sched_endpoint, sizeof rc.sched_endpoint), 0);
    rc.interval_ms = 10;
    rc.batch = 4; /* several requests per pass */
    rc.quota_low_permille = 500;
    fx.rec = reclaimer_actor_new(&rc);
    assert_non_null(fx.rec);

    s_range_t gone = {fx.e.ft, 0, 15};
    /* down to 5, not merely to the limit of 10: an instance over its quota keeps
     * draining across calls until it reaches quota x low */
    assert_true(tk_poll(s_gone, t, &gone));
    for (uint32_t i = 0; i < 20; i++) {
        assert_int_equal(s_on(fx.e.ft, i), i >= 15);
        assert_int_equal(tk_cached(t, i), i >= 15);
    }
    for (uint32_t i = 100; i < 110; i++)
        assert_true(s_on(fx.e.ft, i));
    assert_int_equal(tk_stat(t, "quota_reclaimed"), 15);
    assert_int_equal(tk_stat(t, "reclaimed"), 15);
    assert_int_equal(tk_stat(t, "tier.host0.used"), 15);
    assert_int_equal(s_inst_stat(t, TK_INST, "quota_usage_blocks"), 5);
    assert_int_equal(s_inst_stat(t, TK_INST, "quota_usage_bytes"), 5 * 4096);
    assert_int_equal(s_inst_stat(t, TK_INST, "quota_limit_blocks"), 10);
    assert_int_equal(s_inst_stat(t, TK_INST, "quota_reclaimed"), 15);
    assert_true(s_inst_stat(t, TK_INST, "quota_over") >= 1);
    assert_int_equal(s_inst_stat(t, OTHER, "quota_limit_blocks"), 0);
    assert_int_equal(s_inst_stat(t, OTHER, "quota_reclaimed"), 0);
    reclaimer_stats_t rs;
    assert_int_equal(reclaimer_actor_stats(fx.rec, &rs), 0);
    assert_int_equal(rs.quota_marked, 15);
    assert_true(rs.quota_requests >= 4); /* 15 blocks, 4 per request */
    /* below the quota now: later passes leave it alone */
    assert_int_equal(s_enforce(&fx, 64, 500), 0);
    assert_int_equal(t->rep->body.quota_enforce_rep.over, 0);
    assert_int_equal(t->rep->body.quota_enforce_rep.marked, 0);
    assert_int_equal(t->rep->body.quota_enforce_rep.instances, 1);
    s_stop(&fx);
}

static void s_bytes_quotas(sched_config_t *c)
{
    c->delete_delay_ms = 600000;
    s_quota(c, TK_INST, 0, 40960); /* 10 blocks of 4096 */
    s_quota(c, OTHER, 0, 40960);   /* 40 blocks of 1024 */
}

/* Issue 4 §4: bytes = locations x the instance's bytes_per_block; the same
 * max_bytes is 10 blocks of 4 KiB but 40 of 1 KiB. */
static void test_max_bytes_counts_in_bytes_per_block(void **state)
{
    (void)state;
    fx_t fx;
    s_start(&fx, s_bytes_quotas);
    tk_t *t = fx.e.t;
    s_instance(&fx, OTHER, 1024);
    assert_int_equal(s_put_as(t, TK_INST, 0, 20), 0);
    assert_int_equal(s_put_as(t, OTHER, 100, 20), 0);
    assert_int_equal(s_enforce(&fx, 64, 1000), 0);
    const kvtier_QuotaEnforceReply *r = &t->rep->body.quota_enforce_rep;
    assert_int_equal(r->instances, 2);
    assert_int_equal(r->over, 1);
    assert_int_equal(r->marked, 10);
    assert_false(r->more);
    assert_false(r->backpressure);
    assert_true(r->scanned >= CAP); /* at least the usage scan */
    for (uint32_t i = 0; i < 10; i++)
        s_key_is(&r->blocks[i], i, 1); /* coldest first */
    assert_int_equal(s_inst_stat(t, TK_INST, "quota_usage_bytes"), 40960);
    assert_int_equal(s_inst_stat(t, TK_INST, "quota_limit_blocks"), 10);
    assert_int_equal(s_inst_stat(t, OTHER, "quota_usage_bytes"), 20 * 1024);
    assert_int_equal(s_inst_stat(t, OTHER, "quota_limit_blocks"), 40);
    uint8_t k[20][16];
    tk_keys(100, 20, k);
    assert_int_equal(tk_lookup(t, OTHER, NULL, kvtier_LookupMode_LOOKUP_MODE_PREFIX, 0, k, 20), 0);
    assert_int_equal(t->rep->body.lookup_rep.hit_count, 20);
    assert_int_equal(tk_stat(t, "deleting"), 10);
    assert_int_equal(tk_stat(t, "quota_over_instances"), 1);
    s_stop(&fx);
}

static void s_star_quotas(sched_config_t *c)
{
    c->delete_delay_ms = 600000;
    s_quota(c, "*", 4, 0);
    s_quota(c, OTHER, 100, 0);
}

/* Issue 4 §4: "*" applies to instances without their own entry, never to one
 * with its own. */
static void test_star_is_the_default_quota(void **state)
{
    (void)state;
    fx_t fx;
    s_start(&fx, s_star_quotas);
    tk_t *t = fx.e.t;
    s_instance(&fx, OTHER, 4096);
    assert_int_equal(s_put_as(t, TK_INST, 0, 10), 0);
    assert_int_equal(s_put_as(t, OTHER, 100, 10), 0);
    assert_int_equal(s_enforce(&fx, 64, 1000), 0);
    const kvtier_QuotaEnforceReply *r = &t->rep->body.quota_enforce_rep;
    assert_int_equal(r->instances, 2);
    assert_int_equal(r->over, 1);
    assert_int_equal(r->marked, 6);
    for (uint32_t i = 0; i < 6; i++)
        s_key_is(&r->blocks[i], i, 1);
    assert_int_equal(s_inst_stat(t, TK_INST, "quota_limit_blocks"), 4);
    assert_int_equal(s_inst_stat(t, TK_INST, "quota_usage_blocks"), 4);
    assert_int_equal(s_inst_stat(t, OTHER, "quota_limit_blocks"), 100);
    assert_int_equal(s_inst_stat(t, OTHER, "quota_usage_blocks"), 10);
    s_stop(&fx);
}

static void s_four_blocks(sched_config_t *c)
{
    c->delete_delay_ms = 600000;
    s_quota(c, TK_INST, 4, 0);
}

/* Issue 4 §4 / DESIGN §6: pinned blocks and blocks being written count in the
 * usage but are never taken; unpinned later, they are candidates again. */
static void test_pinned_and_written_blocks_never_taken(void **state)
{
    (void)state;
    fx_t fx;
    s_start(&fx, s_four_blocks);
    tk_t *t = fx.e.t;
    assert_int_equal(tk_put(t, "w", 0, 6), 0);
    assert_int_equal(tk_begin(t, TK_INST, "rd", 0), 0);
    uint8_t keys[4][16];
    tk_keys(0, 4, keys); /* the 4 coldest are being read */
    assert_int_equal(tk_prepare_get(t, "rd", keys, 4), 0);
    uint64_t gtok = t->rep->body.prepare_get_rep.token.token_id;
    assert_int_equal(tk_begin(t, TK_INST, "w2", 0), 0);
    uint8_t wkeys[3][16];
    tk_keys(10, 3, wkeys); /* 3 reservations being written */
    assert_int_equal(tk_prepare_put(t, "w2", wkeys, 3), 0);
    uint64_t ptok = t->rep->body.prepare_put_rep.token.token_id;

    assert_int_equal(s_enforce(&fx, 64, 1000), 0);
    const kvtier_QuotaEnforceReply *r = &t->rep->body.quota_enforce_rep;
    assert_int_equal(r->over, 1);
    assert_int_equal(r->marked, 2); /* need 9 - 4 = 5, only 4 and 5 are free to take */
    assert_false(r->more);
    s_key_is(&r->blocks[0], 4, 1);
    s_key_is(&r->blocks[1], 5, 1);
    assert_int_equal(s_inst_stat(t, TK_INST, "quota_usage_blocks"), 7);
    assert_int_equal(tk_prefix(t, keys, 4), 4);
    /* the writes complete: all three commit */
    uint64_t ck[3] = {1, 2, 3};
    assert_int_equal(tk_complete_put(t, "w2", ptok, NULL, 0, ck, 3), 0);
    assert_int_equal(t->rep->body.complete_put_rep.committed, 3);
    /* unpinned, the read blocks are taken like any other */
    assert_int_equal(tk_complete(t, kvtier_Envelope_complete_get_req_tag, "rd", gtok), 0);
    assert_int_equal(s_enforce(&fx, 64, 1000), 0);
    assert_int_equal(r->marked, 3);
    assert_int_equal(s_inst_stat(t, TK_INST, "quota_usage_blocks"), 4);
    s_stop(&fx);
}

static void s_two_tiers(sched_config_t *c)
{
    c->delete_delay_ms = 600000;
    c->n_tiers = 2;
    c->tiers[1] = (sched_tier_config_t){.tier_id = 2, .capacity = CAP, .slot_size = 4096};
    snprintf(c->tiers[1].name, sizeof c->tiers[1].name, "nvme0");
    snprintf(c->tiers[1].kind, sizeof c->tiers[1].kind, "nvme");
    c->chains[0].n_tiers = 2;
    c->chains[0].tier_ids[1] = 2;
    s_quota(c, TK_INST, 4, 0);
}

/* Issue 4 §4: deletion starts with the last tier of the chain (the coldest data),
 * even where the head tier's blocks are colder by access order; then the head. */
static void test_quota_deletes_last_tier_first(void **state)
{
    (void)state;
    fx_t fx;
    s_start(&fx, s_two_tiers);
    tk_t *t = fx.e.t;
    /* 6 blocks already on the lower tier (adopted from its inventory) */
    sched_fake_tier_t *ft2 = sched_fake_tier_new(2, CAP);
    assert_non_null(ft2);
    for (uint32_t i = 0; i < 6; i++) {
        sched_fake_slot_t h;
        memset(&h, 0, sizeof h);
        h.serving = true;
        tk_key(200 + i, h.key);
        snprintf(h.instance_id, sizeof h.instance_id, "%s", TK_INST);
        h.size = 4096;
        assert_int_equal(sched_fake_tier_set(ft2, i, &h), 0);
    }
    tk_tier_up(t, 2, sched_fake_tier_endpoint(ft2), 2, CAP, 4096);
    assert_int_equal(tk_stat(t, "tier.nvme0.used"), 6);
    assert_int_equal(tk_put(t, "w", 0, 6), 0);
    uint8_t lower[6][16];
    tk_keys(200, 6, lower); /* the lower blocks are now the most recently used */
    assert_int_equal(tk_prefix(t, lower, 6), 6);

    assert_int_equal(s_enforce(&fx, 64, 1000), 0);
    const kvtier_QuotaEnforceReply *r = &t->rep->body.quota_enforce_rep;
    assert_int_equal(r->marked, 8); /* 12 - 4 */
    for (uint32_t i = 0; i < 6; i++)
        assert_int_equal(r->blocks[i].tier_id, 2);
    s_key_is(&r->blocks[6], 0, 1); /* then the head's coldest */
    s_key_is(&r->blocks[7], 1, 1);
    assert_int_equal(tk_prefix(t, lower, 6), 0);
    s_stop(&fx);
    sched_fake_tier_destroy(&ft2);
}

static void s_tiny_queue(sched_config_t *c)
{
    c->delete_delay_ms = 600000;
    c->max_pending_deletes = 2;
    s_quota(c, TK_INST, 4, 0);
}

/* Issue 4 §4: a call marks at most max_blocks; a full DELETING queue is
 * backpressure, flagged and counted; the public meta endpoint refuses the body;
 * low_permille 0 is refused. */
static void test_quota_bounds_and_backpressure(void **state)
{
    (void)state;
    fx_t fx;
    s_start(&fx, s_tiny_queue);
    tk_t *t = fx.e.t;
    assert_int_equal(tk_put(t, "w", 0, 10), 0);
    assert_int_equal(s_enforce(&fx, 1, 1000), 0);
    const kvtier_QuotaEnforceReply *r = &t->rep->body.quota_enforce_rep;
    assert_int_equal(r->marked, 1);
    assert_true(r->more); /* the budget stopped it */
    assert_false(r->backpressure);
    assert_int_equal(s_enforce(&fx, 64, 1000), 0);
    assert_int_equal(r->marked, 1); /* the queue holds 2 */
    assert_true(r->backpressure);
    assert_int_equal(tk_stat(t, "quota_backpressure"), 1);
    assert_int_equal(tk_stat(t, "quota_reclaimed"), 2);
    assert_int_equal(s_enforce(&fx, 64, 0), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    /* internal plane only */
    kvtier_QuotaEnforceRequest *q =
        &tk_req(t, kvtier_Envelope_quota_enforce_req_tag)->body.quota_enforce_req;
    q->low_permille = 900;
    assert_int_equal(tk_call(t, NULL), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(t->msg, "internal plane"));
    s_stop(&fx);
}

/* AdminTrim on the meta plane; the reply stays in t->rep. 0 or the status code. */
static int s_trim(tk_t *t, const char *inst, uint64_t keep, bool status_only, bool cancel)
{
    kvtier_AdminTrimRequest *r =
        &tk_req(t, kvtier_Envelope_admin_trim_req_tag)->body.admin_trim_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", inst);
    r->keep_blocks = keep;
    r->status_only = status_only;
    r->cancel = cancel;
    return tk_call(t, NULL);
}

static void s_no_quota_fast(sched_config_t *c)
{
    c->delete_delay_ms = 1;
}

static bool s_trim_done(tk_t *t, void *arg)
{
    (void)arg;
    return s_trim(t, TK_INST, 0, true, false) == 0 && !t->rep->body.admin_trim_rep.active &&
           tk_stat(t, "deleting") == 0;
}

/* Issue 9 §3: kvtier trim / remove. No quota is configured: the reclaimer's quota
 * rounds still carry out a trim, down to exactly the count, coldest first; the
 * other instance keeps every block; the trim ends by itself; remove takes the rest. */
static void test_trim_and_remove_an_instance(void **state)
{
    (void)state;
    fx_t fx;
    s_start(&fx, s_no_quota_fast);
    tk_t *t = fx.e.t;
    s_instance(&fx, OTHER, 4096);
    assert_int_equal(s_put_as(t, TK_INST, 0, 20), 0);
    assert_int_equal(s_put_as(t, OTHER, 100, 10), 0);

    /* bad requests: an unknown instance, cancel with status */
    assert_int_equal(s_trim(t, "nobody-here", 5, false, false), kvtier_StatusCode_STATUS_NOT_FOUND);
    assert_int_equal(s_trim(t, TK_INST, 5, true, true), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    /* a status asks nothing of the service */
    assert_int_equal(s_trim(t, TK_INST, 5, true, false), 0);
    assert_int_equal(t->rep->body.admin_trim_rep.blocks, 20);
    assert_false(t->rep->body.admin_trim_rep.active);

    assert_int_equal(s_trim(t, TK_INST, 5, false, false), 0);
    assert_int_equal(t->rep->body.admin_trim_rep.blocks, 20);
    assert_true(t->rep->body.admin_trim_rep.active);
    assert_int_equal(t->rep->body.admin_trim_rep.keep_blocks, 5);

    reclaimer_config_t rc;
    memset(&rc, 0, sizeof rc);
    assert_int_equal(
        sched_actor_internal_endpoint(t->sched, rc.sched_endpoint, sizeof rc.sched_endpoint), 0);
    rc.interval_ms = 10;
    rc.batch = 4;
    rc.quota_low_permille = 900; /* the coordinator always sets it; a trim ignores it */
    fx.rec = reclaimer_actor_new(&rc);
    assert_non_null(fx.rec);

    assert_true(tk_poll(s_trim_done, t, NULL));
    /* the scheduler's count is done when its DeleteSlots are sent; the tier applies
     * them a moment later */
    s_range_t coldest = {fx.e.ft, 0, 15};
    assert_true(tk_poll(s_gone, t, &coldest));
    for (uint32_t i = 0; i < 20; i++) /* the 15 coldest (oldest) went: exactly 5 left */
        assert_int_equal(s_on(fx.e.ft, i), i >= 15);
    for (uint32_t i = 100; i < 110; i++)
        assert_true(s_on(fx.e.ft, i));
    assert_int_equal(s_inst_stat(t, TK_INST, "trim_removed"), 15);
    assert_int_equal(s_inst_stat(t, TK_INST, "quota_reclaimed"), 0);
    assert_int_equal(s_trim(t, TK_INST, 0, true, false), 0);
    assert_int_equal(t->rep->body.admin_trim_rep.blocks, 5);

    /* a trim to more than it has ends at once; cancel of none is fine */
    assert_int_equal(s_trim(t, TK_INST, 50, false, false), 0);
    assert_false(t->rep->body.admin_trim_rep.active);
    assert_int_equal(s_trim(t, TK_INST, 0, false, true), 0);
    assert_false(t->rep->body.admin_trim_rep.active);

    /* remove: keep 0 */
    assert_int_equal(s_trim(t, TK_INST, 0, false, false), 0);
    assert_true(tk_poll(s_trim_done, t, NULL));
    s_range_t all = {fx.e.ft, 0, 20};
    assert_true(tk_poll(s_gone, t, &all));
    assert_int_equal(s_inst_stat(t, TK_INST, "trim_removed"), 20);
    for (uint32_t i = 100; i < 110; i++)
        assert_true(s_on(fx.e.ft, i));
    s_stop(&fx);
}

static void s_quota_20(sched_config_t *c)
{
    c->delete_delay_ms = 1;
    s_quota(c, TK_INST, 20, 0);
}

/* A trim beside a quota: the instance at its quota (20 of 20, not over) trimmed to
 * 19 loses exactly one block, named a removal; over its quota, the lower target
 * rules (the quota's, counted as the quota's). */
static void test_trim_beside_a_quota(void **state)
{
    (void)state;
    fx_t fx;
    s_start(&fx, s_quota_20);
    tk_t *t = fx.e.t;
    assert_int_equal(s_put_as(t, TK_INST, 0, 20), 0);
    assert_int_equal(s_trim(t, TK_INST, 19, false, false), 0);
    assert_int_equal(s_enforce(&fx, 64, 500), 0);
    assert_int_equal(t->rep->body.quota_enforce_rep.marked, 1);
    assert_int_equal(t->rep->body.quota_enforce_rep.over, 0);
    assert_int_equal(s_trim(t, TK_INST, 0, true, false), 0);
    assert_int_equal(t->rep->body.admin_trim_rep.blocks, 19);
    assert_int_equal(s_enforce(&fx, 64, 500), 0); /* the round that sees it done */
    assert_int_equal(t->rep->body.quota_enforce_rep.marked, 0);
    assert_int_equal(s_trim(t, TK_INST, 0, true, false), 0);
    assert_false(t->rep->body.admin_trim_rep.active);
    assert_int_equal(s_inst_stat(t, TK_INST, "trim_removed"), 1);
    assert_int_equal(s_inst_stat(t, TK_INST, "quota_reclaimed"), 0);
    assert_int_equal(tk_stat(t, "trim_removed"), 1);
    assert_int_equal(tk_stat(t, "quota_reclaimed"), 0);

    /* over the quota (25 > 20) with a trim to 15: the quota's target (10) rules */
    assert_int_equal(s_put_as(t, TK_INST, 100, 6), 0);
    assert_int_equal(s_trim(t, TK_INST, 15, false, false), 0);
    assert_int_equal(s_enforce(&fx, 64, 500), 0);
    assert_int_equal(t->rep->body.quota_enforce_rep.over, 1);
    assert_int_equal(t->rep->body.quota_enforce_rep.marked, 15);
    assert_int_equal(s_inst_stat(t, TK_INST, "quota_reclaimed"), 15);
    assert_int_equal(s_inst_stat(t, TK_INST, "trim_removed"), 1);
    s_stop(&fx);
}

/* Config rule: at most 64 quotas, ids unique, each with a limit; quota_low <= 1000. */
static void test_quota_config_checked(void **state)
{
    (void)state;
    sched_config_t c;
    char err[256];
    tk_config(&c, CAP, 4096);
    s_quota(&c, "a", 1, 0);
    s_quota(&c, "*", 0, 1);
    assert_int_equal(sched_config_check(&c, err, sizeof err), 0);
    s_quota(&c, "a", 2, 0);
    assert_int_equal(sched_config_check(&c, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "two quotas"));
    c.n_quotas = 2;
    s_quota(&c, "b", 0, 0);
    assert_int_equal(sched_config_check(&c, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "no limit"));
    c.n_quotas = SCHED_MAX_QUOTAS + 1;
    assert_int_equal(sched_config_check(&c, err, sizeof err), -EINVAL);

    reclaimer_config_t rc;
    memset(&rc, 0, sizeof rc);
    snprintf(rc.sched_endpoint, sizeof rc.sched_endpoint, "inproc://nowhere");
    rc.quota_low_permille = 1001;
    assert_int_equal(reclaimer_config_check(&rc, err, sizeof err), -EINVAL);
    rc.quota_low_permille = 1000;
    assert_int_equal(reclaimer_config_check(&rc, err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_instance_over_max_blocks_brought_down_to_quota_times_low),
        cmocka_unit_test(test_max_bytes_counts_in_bytes_per_block),
        cmocka_unit_test(test_star_is_the_default_quota),
        cmocka_unit_test(test_pinned_and_written_blocks_never_taken),
        cmocka_unit_test(test_quota_deletes_last_tier_first),
        cmocka_unit_test(test_quota_bounds_and_backpressure),
        cmocka_unit_test(test_quota_config_checked),
        cmocka_unit_test(test_trim_and_remove_an_instance),
        cmocka_unit_test(test_trim_beside_a_quota),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
