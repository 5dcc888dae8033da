/* test_sched_route.c — routing requests to branches (issue 11 §4, §6; UCM's
 * StorePeer and its ttl / length strategies; docs/SCHEDULER.md "Branches").
 *
 * Rules checked: the router is a pure function of the request's facts (TTL
 * bounds strictly decreasing in chain order, the first exceeded wins, no TTL or
 * none exceeded: the fallback; the same for the predicted length; instances by
 * table, unlisted ones to the fallback); a bad router is refused with a message
 * naming the chain (bounds out of order or equal, a fallback out of range or
 * with a bound, an instance twice or on the fallback, a branch nothing reaches,
 * a tier followed by two different tiers); through the real scheduler each
 * branch gets its requests (the begin reply names the branch, its name and its
 * head, and the request's puts land on that head tier), a resend of the begin
 * and a begin at a new leader with the same config land on the same branch,
 * and lookups search every branch (the request's first) while puts skip only
 * what the request's own branch holds. */
#include "sched_route.h"
#include "sched_testkit.h"

#define S_CAP 64u

/* ---- the pure router ---- */

/* Three one-tier chains: long (ttl > 10 min), mid (ttl > 1 min), short (fallback). */
static void s_ttl_config(sched_config_t *c)
{
    tk_config(c, S_CAP, 4096);
    c->n_tiers = 3;
    static const char *const names[] = {"host0", "host1", "host2"};
    static const char *const chains[] = {"long", "mid", "short"};
    for (uint32_t i = 0; i < 3; i++) {
        c->tiers[i] = (sched_tier_config_t){.tier_id = i + 1, .capacity = S_CAP, .slot_size = 4096};
        snprintf(c->tiers[i].name, sizeof c->tiers[i].name, "%s", names[i]);
        snprintf(c->tiers[i].kind, sizeof c->tiers[i].kind, "host");
        c->chains[i] = (sched_chain_config_t){.n_tiers = 1, .tier_ids = {i + 1}};
        snprintf(c->chains[i].name, sizeof c->chains[i].name, "%s", chains[i]);
    }
    c->n_chains = 3;
    c->route.kind = SCHED_ROUTE_TTL;
    c->route.fallback = 2;
    c->chains[0].above = 600000;
    c->chains[1].above = 60000;
}

static void s_length_config(sched_config_t *c)
{
    s_ttl_config(c);
    c->route.kind = SCHED_ROUTE_LENGTH;
    c->chains[0].above = 4096;
    c->chains[1].above = 256;
}

static void s_instance_config(sched_config_t *c)
{
    s_ttl_config(c);
    c->route.kind = SCHED_ROUTE_INSTANCE;
    c->chains[0].above = c->chains[1].above = 0;
    c->route.fallback = 0; /* the fallback need not be last */
    c->route.n_instances = 3;
    c->route.instances[0] = (sched_route_instance_t){.instance = "llama-70b", .chain = 1};
    c->route.instances[1] = (sched_route_instance_t){.instance = "llama-8b", .chain = 2};
    c->route.instances[2] = (sched_route_instance_t){.instance = "qwen-7b", .chain = 2};
}

static void s_check_ok(const sched_config_t *c)
{
    char err[256] = "";
    int rc = sched_config_check(c, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "unexpected: %s\n", err);
    assert_int_equal(rc, 0);
}

/* UCM's ttl strategy: first bound exceeded in order (strictly above), else the
 * fallback, which also takes requests without a TTL. */
static void test_ttl_router_picks_the_first_bound_exceeded(void **state)
{
    (void)state;
    sched_config_t c;
    s_ttl_config(&c);
    s_check_ok(&c);
    assert_int_equal(sched_route_select(&c, "x", 3600000, 0), 0);
    assert_int_equal(sched_route_select(&c, "x", 600001, 0), 0);
    assert_int_equal(sched_route_select(&c, "x", 600000, 0), 1); /* not above 10 min */
    assert_int_equal(sched_route_select(&c, "x", 60001, 0), 1);
    assert_int_equal(sched_route_select(&c, "x", 60000, 0), 2);
    assert_int_equal(sched_route_select(&c, "x", 1, 0), 2);
    assert_int_equal(sched_route_select(&c, "x", 0, 0), 2);        /* no TTL */
    assert_int_equal(sched_route_select(&c, "x", 0, 1u << 30), 2); /* length ignored */
    /* a fallback in the middle is skipped by the bounds */
    c.route.fallback = 1;
    c.chains[1].above = 0;
    c.chains[2].above = 60000;
    s_check_ok(&c);
    assert_int_equal(sched_route_select(&c, "x", 600001, 0), 0);
    assert_int_equal(sched_route_select(&c, "x", 600000, 0), 2);
    assert_int_equal(sched_route_select(&c, "x", 60000, 0), 1);
}

static void test_length_router_uses_the_predicted_total(void **state)
{
    (void)state;
    sched_config_t c;
    s_length_config(&c);
    s_check_ok(&c);
    assert_int_equal(sched_route_select(&c, "x", 0, 100000), 0);
    assert_int_equal(sched_route_select(&c, "x", 0, 4097), 0);
    assert_int_equal(sched_route_select(&c, "x", 0, 4096), 1);
    assert_int_equal(sched_route_select(&c, "x", 0, 257), 1);
    assert_int_equal(sched_route_select(&c, "x", 0, 256), 2);
    assert_int_equal(sched_route_select(&c, "x", 0, 0), 2);       /* unknown */
    assert_int_equal(sched_route_select(&c, "x", 3600000, 0), 2); /* TTL ignored */
}

static void test_instance_router_maps_instances(void **state)
{
    (void)state;
    sched_config_t c;
    s_instance_config(&c);
    s_check_ok(&c);
    assert_int_equal(sched_route_select(&c, "llama-70b", 0, 0), 1);
    assert_int_equal(sched_route_select(&c, "llama-8b", 99, 99), 2);
    assert_int_equal(sched_route_select(&c, "qwen-7b", 0, 0), 2);
    assert_int_equal(sched_route_select(&c, "mistral", 0, 0), 0); /* unlisted: fallback */
    assert_int_equal(sched_route_select(&c, "llama-70", 0, 0), 0);
}

static void test_no_router_is_chain_zero(void **state)
{
    (void)state;
    sched_config_t c;
    s_ttl_config(&c);
    c.route = (sched_route_config_t){0};
    c.chains[0].above = c.chains[1].above = 0;
    s_check_ok(&c);
    assert_int_equal(sched_route_select(&c, "x", 3600000, 9999), 0);
    assert_int_equal(sched_route_select(&c, "x", 0, 0), 0);
}

/* Each bad router: refused, and the message names what is wrong. */
static void s_refused(const sched_config_t *c, const char *want)
{
    char err[256] = "";
    assert_int_equal(sched_config_check(c, err, sizeof err), -EINVAL);
    if (!strstr(err, want))
        fprintf(stderr, "message '%s' lacks '%s'\n", err, want);
    assert_non_null(strstr(err, want));
    assert_null(sched_actor_new(c));
}

static void test_bad_routers_are_refused(void **state)
{
    (void)state;
    sched_config_t c;
    s_ttl_config(&c);
    c.chains[1].above = 600000; /* equal: not strictly decreasing */
    s_refused(&c, "chain 1 (mid) bound ttl_ms > 600000 is not below chain 0 (long)'s 600000");
    s_ttl_config(&c);
    c.chains[0].above = 1000; /* increasing */
    s_refused(&c, "is not below chain 0 (long)'s 1000");
    s_length_config(&c);
    c.chains[1].above = 5000;
    s_refused(&c, "chain 1 (mid) bound total_blocks > 5000 is not below");
    s_ttl_config(&c);
    c.route.fallback = 3;
    s_refused(&c, "fallback chain 3, expected below 3");
    s_ttl_config(&c);
    c.chains[2].above = 5;
    s_refused(&c, "chain 2 (short) is the fallback and has a bound");
    s_ttl_config(&c);
    c.chains[0].above = 1ull << 40;
    s_refused(&c, "out of range");
    s_ttl_config(&c);
    c.route.kind = 9;
    s_refused(&c, "router kind 9");
    s_ttl_config(&c);
    c.route.kind = SCHED_ROUTE_NONE;
    s_refused(&c, "no router, yet a fallback");
    s_ttl_config(&c);
    c.route.kind = SCHED_ROUTE_NONE;
    c.route.fallback = 0;
    s_refused(&c, "chain 0 (long) has a bound but no router");

    s_instance_config(&c);
    c.route.instances[2].chain = 1;
    snprintf(c.route.instances[2].instance, sizeof c.route.instances[2].instance, "llama-70b");
    s_refused(&c, "instance 'llama-70b' routed twice");
    s_instance_config(&c);
    c.route.instances[0].chain = 0;
    s_refused(&c, "instance 'llama-70b' routed to chain 0");
    s_instance_config(&c);
    c.route.n_instances = 1; /* chain 2 unreachable */
    s_refused(&c, "chain 2 (short) is neither the fallback nor named by an instance");
    s_instance_config(&c);
    c.route.instances[1].instance[0] = '\0';
    s_refused(&c, "route instance 1 empty");
}

/* Shared tiers are fine when what follows them agrees; a tier followed by two
 * different tiers (or by one and by none) is refused. */
static void test_a_shared_tier_has_one_next_tier(void **state)
{
    (void)state;
    sched_config_t c;
    s_ttl_config(&c);
    c.chains[0] =
        (sched_chain_config_t){.name = "long", .n_tiers = 2, .tier_ids = {1, 3}, .above = 600000};
    c.chains[1] =
        (sched_chain_config_t){.name = "mid", .n_tiers = 2, .tier_ids = {2, 3}, .above = 60000};
    s_check_ok(&c); /* both end on host2 */
    c.chains[1].tier_ids[0] = 1;
    c.chains[1].tier_ids[1] = 2;
    s_refused(&c, "tier 1 is followed by tier 2 in chain 1 but by tier 3 in chain 0");
    c.chains[1].n_tiers = 1; /* host0 alone in mid, host0 -> host2 in long */
    s_refused(&c, "tier 1 is followed by tier 0 in chain 1 but by tier 3 in chain 0");
}

/* ---- through the scheduler ---- */

typedef struct {
    tk_t *t;
    sched_fake_tier_t *ft[3];
} s_env_t;

static void s_start(s_env_t *e, const sched_config_t *c)
{
    memset(e, 0, sizeof *e);
    e->t = tk_new(c);
    for (uint32_t i = 0; i < 3; i++) {
        e->ft[i] = sched_fake_tier_new(i + 1, S_CAP);
        assert_non_null(e->ft[i]);
        tk_tier_up(e->t, i + 1, sched_fake_tier_endpoint(e->ft[i]), 1, S_CAP, 4096);
    }
    assert_int_equal(tk_register(e->t, TK_INST, 4096), 0);
}

static void s_stop(s_env_t *e)
{
    tk_destroy(&e->t);
    for (uint32_t i = 0; i < 3; i++)
        sched_fake_tier_destroy(&e->ft[i]);
}

static int s_begin(tk_t *t, const char *inst, const char *req, uint64_t ttl_ms, uint32_t total)
{
    kvtier_RequestBeginRequest *r =
        &tk_req(t, kvtier_Envelope_request_begin_req_tag)->body.request_begin_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", inst);
    r->has_ctx = true;
    snprintf(r->ctx.request_id, sizeof r->ctx.request_id, "%s", req);
    r->ctx.ttl_ms = ttl_ms;
    r->ctx.total_blocks = total;
    return tk_call(t, NULL);
}

/* Begins req and checks the reply names branch `chain` of c, its name and head. */
static void s_begin_on(tk_t *t, const sched_config_t *c, const char *req, uint64_t ttl_ms,
                       uint32_t total, uint32_t chain)
{
    assert_int_equal(s_begin(t, TK_INST, req, ttl_ms, total), 0);
    const kvtier_RequestBeginReply *r = &t->rep->body.request_begin_rep;
    assert_int_equal(t->rep->which_body, kvtier_Envelope_request_begin_rep_tag);
    assert_int_equal(r->branch, chain);
    assert_string_equal(r->branch_name, c->chains[chain].name);
    assert_int_equal(r->head_tier_id, c->chains[chain].tier_ids[0]);
}

/* Where key i is (PER_KEY lookup, no request): its tier id, 0 for a miss. */
static uint32_t s_where(tk_t *t, uint32_t i)
{
    uint8_t k[1][16];
    tk_key(i, k[0]);
    assert_int_equal(tk_lookup(t, TK_INST, NULL, kvtier_LookupMode_LOOKUP_MODE_PER_KEY, 0, k, 1),
                     0);
    return t->rep->body.lookup_rep.hit_count ? t->arr->tier_ids.v[0] : 0;
}

/* issue 11 §6: each branch gets its requests, and their puts land on it. */
static void test_each_ttl_branch_gets_its_requests(void **state)
{
    (void)state;
    sched_config_t c;
    s_ttl_config(&c);
    s_env_t e;
    s_start(&e, &c);
    static const struct {
        const char *req;
        uint64_t ttl;
        uint32_t chain;
    } cases[] = {{"day", 86400000, 0}, {"hour", 3600000, 0}, {"five-min", 300000, 1},
                 {"edge", 600000, 1},  {"minute", 60000, 2}, {"no-ttl", 0, 2}};
    for (uint32_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s_begin_on(e.t, &c, cases[i].req, cases[i].ttl, 0, cases[i].chain);
        assert_int_equal(tk_put(e.t, cases[i].req, 100 * i, 2), 0);
        assert_int_equal(s_where(e.t, 100 * i), cases[i].chain + 1);
        assert_int_equal(s_where(e.t, 100 * i + 1), cases[i].chain + 1);
    }
    /* stats count the requests begun per branch (a resend is not a new one) */
    s_begin_on(e.t, &c, "day", 86400000, 0, 0);
    assert_int_equal(tk_stat(e.t, "branch.long.requests"), 2);
    assert_int_equal(tk_stat(e.t, "branch.mid.requests"), 2);
    assert_int_equal(tk_stat(e.t, "branch.short.requests"), 2);
    s_stop(&e);
}

static void test_each_length_branch_gets_its_requests(void **state)
{
    (void)state;
    sched_config_t c;
    s_length_config(&c);
    s_env_t e;
    s_start(&e, &c);
    s_begin_on(e.t, &c, "book", 3600000, 10000, 0);
    s_begin_on(e.t, &c, "chat", 3600000, 1000, 1);
    s_begin_on(e.t, &c, "short", 3600000, 10, 2);
    s_begin_on(e.t, &c, "unknown", 3600000, 0, 2);
    assert_int_equal(tk_put(e.t, "book", 0, 1), 0);
    assert_int_equal(tk_put(e.t, "chat", 10, 1), 0);
    assert_int_equal(tk_put(e.t, "short", 20, 1), 0);
    assert_int_equal(s_where(e.t, 0), 1);
    assert_int_equal(s_where(e.t, 10), 2);
    assert_int_equal(s_where(e.t, 20), 3);
    s_stop(&e);
}

static void test_each_instance_branch_gets_its_requests(void **state)
{
    (void)state;
    sched_config_t c;
    s_instance_config(&c);
    s_env_t e;
    s_start(&e, &c);
    /* TK_INST (llama-8b) goes to chain 2; llama-70b to 1; another to the fallback 0 */
    s_begin_on(e.t, &c, "a", 0, 0, 2);
    assert_int_equal(tk_register(e.t, "llama-70b", 4096), 0);
    assert_int_equal(tk_register(e.t, "mistral", 4096), 0);
    assert_int_equal(s_begin(e.t, "llama-70b", "b", 0, 0), 0);
    assert_int_equal(e.t->rep->body.request_begin_rep.branch, 1);
    assert_string_equal(e.t->rep->body.request_begin_rep.branch_name, "mid");
    assert_int_equal(s_begin(e.t, "mistral", "c", 0, 0), 0);
    assert_int_equal(e.t->rep->body.request_begin_rep.branch, 0);
    assert_int_equal(e.t->rep->body.request_begin_rep.head_tier_id, 1);
    assert_int_equal(tk_put(e.t, "a", 0, 1), 0);
    assert_int_equal(s_where(e.t, 0), 3);
    s_stop(&e);
}

/* A resend of the begin answers the same branch; a new leader with the same
 * config (a failover: libkvtier begins its open requests again) routes the same
 * facts to the same branch. */
static void test_a_begin_again_lands_on_the_same_branch(void **state)
{
    (void)state;
    sched_config_t c;
    s_ttl_config(&c);
    s_env_t e;
    s_start(&e, &c);
    s_begin_on(e.t, &c, "r", 300000, 7, 1);
    s_begin_on(e.t, &c, "r", 300000, 7, 1); /* resend */
    /* another context under the same id is refused, the branch kept */
    assert_int_equal(s_begin(e.t, TK_INST, "r", 3600000, 7),
                     kvtier_StatusCode_STATUS_ALREADY_EXISTS);
    assert_int_equal(tk_put(e.t, "r", 0, 1), 0);
    assert_int_equal(s_where(e.t, 0), 2);
    s_stop(&e);

    c.leader_epoch++; /* the next leader */
    s_start(&e, &c);
    s_begin_on(e.t, &c, "r", 300000, 7, 1);
    assert_int_equal(tk_put(e.t, "r", 1, 1), 0);
    assert_int_equal(s_where(e.t, 1), 2);
    s_stop(&e);
}

/* Lookups and gets search every branch's tiers (the request's first): a block
 * written through one branch hits in a request of another. A put writes into the
 * request's own branch and skips only what that branch holds. */
static void test_lookups_search_every_branch_puts_stay_on_theirs(void **state)
{
    (void)state;
    sched_config_t c;
    s_ttl_config(&c);
    s_env_t e;
    s_start(&e, &c);
    s_begin_on(e.t, &c, "long", 3600000, 0, 0);
    s_begin_on(e.t, &c, "short", 1000, 0, 2);
    assert_int_equal(tk_put(e.t, "long", 0, 4), 0);
    uint8_t keys[4][16];
    tk_keys(0, 4, keys);
    assert_int_equal(
        tk_lookup(e.t, TK_INST, "short", kvtier_LookupMode_LOOKUP_MODE_PREFIX, 0, keys, 4), 0);
    assert_int_equal(e.t->rep->body.lookup_rep.hit_count, 4);
    assert_int_equal(e.t->arr->tier_ids.v[0], 1);
    assert_true(e.t->rep->body.lookup_rep.prefetch_advised); /* not on short's head */
    assert_int_equal(tk_prepare_get(e.t, "short", keys, 4), 0);
    uint64_t tok = e.t->rep->body.prepare_get_rep.token.token_id;
    assert_int_equal(tk_complete(e.t, kvtier_Envelope_complete_get_req_tag, "short", tok), 0);
    /* short's put of the same keys writes them on short's head; long's skips them */
    assert_int_equal(tk_prepare_put(e.t, "short", keys, 4), 0);
    assert_int_equal(e.t->arr->keys.n, 4);
    tok = e.t->rep->body.prepare_put_rep.token.token_id;
    uint64_t ck[4] = {1, 2, 3, 4};
    assert_int_equal(tk_complete_put(e.t, "short", tok, NULL, 0, ck, 4), 0);
    assert_int_equal(tk_prepare_put(e.t, "long", keys, 4), 0);
    assert_int_equal(e.t->arr->keys.n, 0);
    uint8_t k0[16];
    tk_key(0, k0);
    assert_int_equal(sched_fake_tier_count_key(e.ft[0], k0), 1);
    assert_int_equal(sched_fake_tier_count_key(e.ft[2], k0), 1);
    assert_int_equal(sched_fake_tier_count_key(e.ft[1], k0), 0);
    s_stop(&e);
}

/* A prefetch promotes into the request's branch head from wherever the block
 * is; on an exclusive chain it moves only a copy of its own branch: a copy on
 * another branch's tier stays there (that branch's reads and TTL keep it). */
static void test_prefetch_from_another_branch_keeps_its_copy(void **state)
{
    (void)state;
    sched_config_t c;
    s_ttl_config(&c);
    s_env_t e;
    s_start(&e, &c);
    s_begin_on(e.t, &c, "long", 3600000, 0, 0);
    s_begin_on(e.t, &c, "short", 1000, 0, 2);
    assert_int_equal(tk_put(e.t, "long", 0, 2), 0);
    uint8_t keys[2][16];
    tk_keys(0, 2, keys);
    assert_int_equal(
        tk_prepare(e.t, kvtier_Envelope_prepare_prefetch_req_tag, TK_INST, "short", keys, 2), 0);
    assert_int_equal(e.t->arr->keys.n, 2);
    uint64_t tok = e.t->rep->body.prepare_prefetch_rep.token.token_id;
    /* the caller copied (CopySlots) and reports success for both */
    assert_int_equal(tk_complete(e.t, kvtier_Envelope_complete_prefetch_req_tag, "short", tok), 0);
    assert_int_equal(e.t->rep->body.complete_prefetch_rep.committed, 2);
    assert_int_equal(sched_fake_tier_count_key(e.ft[0], keys[0]), 1);
    assert_int_equal(sched_fake_tier_count_key(e.ft[2], keys[0]), 1);
    assert_int_equal(tk_stat(e.t, "prefetch_moved"), 0);
    /* short's lookup finds its own head first now; long's still its own */
    assert_int_equal(
        tk_lookup(e.t, TK_INST, "short", kvtier_LookupMode_LOOKUP_MODE_PER_KEY, 0, keys, 2), 0);
    assert_int_equal(e.t->arr->tier_ids.v[0], 3);
    assert_false(e.t->rep->body.lookup_rep.prefetch_advised);
    assert_int_equal(
        tk_lookup(e.t, TK_INST, "long", kvtier_LookupMode_LOOKUP_MODE_PER_KEY, 0, keys, 2), 0);
    assert_int_equal(e.t->arr->tier_ids.v[1], 1);
    s_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ttl_router_picks_the_first_bound_exceeded),
        cmocka_unit_test(test_length_router_uses_the_predicted_total),
        cmocka_unit_test(test_instance_router_maps_instances),
        cmocka_unit_test(test_no_router_is_chain_zero),
        cmocka_unit_test(test_bad_routers_are_refused),
        cmocka_unit_test(test_a_shared_tier_has_one_next_tier),
        cmocka_unit_test(test_each_ttl_branch_gets_its_requests),
        cmocka_unit_test(test_each_length_branch_gets_its_requests),
        cmocka_unit_test(test_each_instance_branch_gets_its_requests),
        cmocka_unit_test(test_a_begin_again_lands_on_the_same_branch),
        cmocka_unit_test(test_lookups_search_every_branch_puts_stay_on_theirs),
        cmocka_unit_test(test_prefetch_from_another_branch_keeps_its_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
