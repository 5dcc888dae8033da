/* test_sched_pool.c — pools in the scheduler actor (issue 9 §3, docs/SCHEDULER.md
 * "Pools"): a pool's slots are vacant (not listed) until a member announces itself
 * with an id of the pool's range; a member's UP fills its slot, its DOWN empties it
 * and takes its blocks out of the index; new blocks at a pool level go to the up
 * member with the largest free fraction; capacity is the sum (Stats pool.<name>.*);
 * a drain of the pool's name is refused; bad pool configs are refused at start.
 * Members are fake tier actors (tests/support/sched_fake_tier.h) on real sockets. */
#include "sched_testkit.h"

#define S_POOL_FIRST 2u /* host0 is id 1 */
#define S_POOL_MAX 3u
#define S_MEMBER_CAP 8u

/* host0 (4 slots) -> pool "remote" (ids 2..4, members of 8 slots by default);
 * head_pool: the chain is the pool alone (puts land on it). */
static void s_config(sched_config_t *cfg, bool head_pool)
{
    tk_config(cfg, 4, 4096);
    cfg->n_pools = 1;
    snprintf(cfg->pools[0].name, sizeof cfg->pools[0].name, "remote");
    cfg->pools[0].first_id = S_POOL_FIRST;
    cfg->pools[0].max_members = S_POOL_MAX;
    for (uint32_t k = 0; k < S_POOL_MAX; k++) {
        sched_tier_config_t *t = &cfg->tiers[S_POOL_FIRST - 1 + k];
        *t = (sched_tier_config_t){
            .tier_id = S_POOL_FIRST + k, .capacity = S_MEMBER_CAP, .slot_size = 4096, .pool = 1};
        snprintf(t->kind, sizeof t->kind, "remote");
    }
    cfg->n_tiers = S_POOL_FIRST - 1 + S_POOL_MAX;
    uint32_t n = 0;
    if (!head_pool)
        cfg->chains[0].tier_ids[n++] = 1;
    for (uint32_t k = 0; k < S_POOL_MAX; k++)
        cfg->chains[0].tier_ids[n++] = S_POOL_FIRST + k;
    cfg->chains[0].n_tiers = n;
}

/* Announces member NAME of pool "remote" at id ID and waits until it is up. */
static void s_member_up(tk_t *t, uint32_t id, const char *name, sched_fake_tier_t *ft,
                        uint64_t epoch, uint64_t capacity)
{
    kvtier_TierInfo info;
    memset(&info, 0, sizeof info);
    info.tier_id = id;
    snprintf(info.name, sizeof info.name, "%s", name);
    snprintf(info.pool, sizeof info.pool, "remote");
    snprintf(info.kind_name, sizeof info.kind_name, "remote");
    snprintf(info.endpoint, sizeof info.endpoint, "%s", sched_fake_tier_endpoint(ft));
    info.epoch = epoch;
    info.capacity_slots = capacity;
    info.slot_bytes = 4096;
    assert_int_equal(sched_actor_tier_change(t->sched, true, &info), 0);
    tk_tier_want_t w = {id, true, epoch};
    assert_true(tk_poll(tk_tier_is, t, &w));
}

static void s_member_down(tk_t *t, uint32_t id, const char *name)
{
    kvtier_TierInfo info;
    memset(&info, 0, sizeof info);
    info.tier_id = id;
    snprintf(info.name, sizeof info.name, "%s", name);
    snprintf(info.pool, sizeof info.pool, "remote");
    assert_int_equal(sched_actor_tier_change(t->sched, false, &info), 0);
}

static bool s_not_listed(tk_t *t, void *arg)
{
    return tk_tier(t, *(uint32_t *)arg) == NULL;
}

/* The tier each of keys first..first+n-1 is found on (PER_KEY lookup; 0: miss). */
static void s_where(tk_t *t, uint32_t first, uint32_t n, uint32_t *out)
{
    uint8_t(*keys)[16] = calloc(n, 16);
    tk_keys(first, n, keys);
    assert_int_equal(tk_lookup(t, TK_INST, NULL, kvtier_LookupMode_LOOKUP_MODE_PER_KEY, 0, keys, n),
                     0);
    for (uint32_t i = 0; i < n; i++)
        out[i] = t->arr->mask.v[i] ? t->arr->tier_ids.v[i] : 0;
    free(keys);
}

typedef struct {
    tk_t *t;
    sched_fake_tier_t *host, *m[S_POOL_MAX];
} s_env_t;

static void s_start(s_env_t *e, bool head_pool)
{
    memset(e, 0, sizeof *e);
    sched_config_t cfg;
    s_config(&cfg, head_pool);
    e->host = sched_fake_tier_new(1, 4);
    assert_non_null(e->host);
    for (uint32_t k = 0; k < S_POOL_MAX; k++) {
        e->m[k] = sched_fake_tier_new(S_POOL_FIRST + k, 16);
        assert_non_null(e->m[k]);
    }
    e->t = tk_new(&cfg);
    tk_tier_up(e->t, 1, sched_fake_tier_endpoint(e->host), 1, 4, 4096);
    assert_int_equal(tk_register(e->t, TK_INST, 4096), 0);
}

static void s_stop(s_env_t *e)
{
    tk_destroy(&e->t);
    sched_fake_tier_destroy(&e->host);
    for (uint32_t k = 0; k < S_POOL_MAX; k++)
        sched_fake_tier_destroy(&e->m[k]);
}

/* Vacant slots are not listed; a member joins (listed with its pool, counted in
 * the pool's stats), leaves (not listed, not counted), and its slot takes
 * another member later. */
static void test_members_join_and_leave(void **state)
{
    (void)state;
    s_env_t e;
    s_start(&e, false);
    tk_t *t = e.t;
    tk_req(t, kvtier_Envelope_cluster_info_req_tag);
    assert_int_equal(tk_call(t, NULL), 0);
    assert_int_equal(t->rep->body.cluster_info_rep.tiers_count, 1); /* host0 only */
    assert_int_equal(t->rep->body.cluster_info_rep.total_tiers, 1);
    assert_int_equal(tk_stat(t, "pool.remote.members"), 0);
    assert_int_equal(tk_stat(t, "pool.remote.max"), S_POOL_MAX);
    assert_int_equal(tk_stat(t, "pool.remote.capacity"), 0);

    s_member_up(t, 2, "m1", e.m[0], 11, S_MEMBER_CAP);
    const kvtier_TierInfo *ti = tk_tier(t, 2);
    assert_non_null(ti);
    assert_string_equal(ti->name, "m1");
    assert_string_equal(ti->pool, "remote");
    assert_int_equal(ti->capacity_slots, S_MEMBER_CAP);
    s_member_up(t, 3, "m2", e.m[1], 12, 2 * S_MEMBER_CAP); /* its own capacity */
    assert_int_equal(tk_stat(t, "pool.remote.members"), 2);
    assert_int_equal(tk_stat(t, "pool.remote.capacity"), 3 * S_MEMBER_CAP);
    assert_int_equal(tk_stat(t, "tier.m2.capacity"), 2 * S_MEMBER_CAP);

    /* a name another slot holds is refused (the first one stays) */
    kvtier_TierInfo dup;
    memset(&dup, 0, sizeof dup);
    dup.tier_id = 4;
    snprintf(dup.name, sizeof dup.name, "m1");
    snprintf(dup.pool, sizeof dup.pool, "remote");
    snprintf(dup.endpoint, sizeof dup.endpoint, "%s", sched_fake_tier_endpoint(e.m[2]));
    dup.epoch = 13;
    dup.capacity_slots = S_MEMBER_CAP;
    dup.slot_bytes = 4096;
    assert_int_equal(sched_actor_tier_change(t->sched, true, &dup), 0);
    assert_int_equal(tk_stat(t, "pool.remote.members"), 2); /* after the change: one loop */
    assert_null(tk_tier(t, 4));

    /* a DOWN naming another member than the slot's is stale: ignored */
    s_member_down(t, 2, "m9");
    assert_int_equal(tk_stat(t, "pool.remote.members"), 2);
    s_member_down(t, 2, "m1");
    uint32_t id = 2;
    assert_true(tk_poll(s_not_listed, t, &id));
    assert_int_equal(tk_stat(t, "pool.remote.members"), 1);
    assert_int_equal(tk_stat(t, "pool.remote.capacity"), 2 * S_MEMBER_CAP);
    assert_int_equal(tk_stat(t, "tier.m1.capacity"), UINT64_MAX); /* no counter of a vacant slot */
    /* the slot takes a new member */
    s_member_up(t, 2, "m3", e.m[0], 14, S_MEMBER_CAP);
    assert_string_equal(tk_tier(t, 2)->name, "m3");
    s_stop(&e);
}

/* A pool at the head: a put goes to the up member with the largest free fraction
 * (one member for the whole window); a new, empty member takes the next puts; a
 * member that leaves takes its blocks out of the index (misses, the others hit). */
static void test_puts_go_to_the_roomiest_member(void **state)
{
    (void)state;
    s_env_t e;
    s_start(&e, true);
    tk_t *t = e.t;
    s_member_up(t, 2, "m1", e.m[0], 21, S_MEMBER_CAP);
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 4), 0);
    uint32_t where[8];
    s_where(t, 0, 4, where);
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(where[i], 2);

    s_member_up(t, 3, "m2", e.m[1], 22, S_MEMBER_CAP); /* empty: 8/8 free vs m1's 4/8 */
    assert_int_equal(tk_put(t, "r1", 10, 3), 0);
    s_where(t, 10, 3, where);
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(where[i], 3);
    /* m2 5/8 free > m1 4/8 free: m2 again; then m1 4/8 > m2 3/8... */
    assert_int_equal(tk_put(t, "r1", 20, 2), 0);
    s_where(t, 20, 2, where);
    assert_int_equal(where[0], 3);
    assert_int_equal(where[1], 3);
    assert_int_equal(tk_put(t, "r1", 30, 1), 0);
    s_where(t, 30, 1, where);
    assert_int_equal(where[0], 2);
    assert_int_equal(tk_stat(t, "pool.remote.used"), 10);

    s_member_down(t, 3, "m2");
    uint32_t id = 3;
    assert_true(tk_poll(s_not_listed, t, &id));
    s_where(t, 10, 3, where); /* m2's: gone from the index */
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(where[i], 0);
    s_where(t, 0, 4, where); /* m1's: still served */
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(where[i], 2);
    assert_int_equal(tk_stat(t, "pool.remote.used"), 5);
    assert_int_equal(tk_end(t, TK_INST, "r1"), 0);
    s_stop(&e);
}

/* A pool at the head with no member up: puts go to the next level (none here:
 * the pool is the whole chain, so its vacant slot refuses them as a down tier). */
static void test_empty_head_pool_refuses_puts(void **state)
{
    (void)state;
    s_env_t e;
    s_start(&e, true);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 2), kvtier_StatusCode_STATUS_UNAVAILABLE);
    assert_non_null(strstr(t->msg, "pool remote has no member up"));
    s_member_up(t, 4, "m1", e.m[2], 31, S_MEMBER_CAP);
    assert_int_equal(tk_put(t, "r1", 0, 2), 0);
    uint32_t where[2];
    s_where(t, 0, 2, where);
    assert_int_equal(where[0], 4);
    assert_int_equal(tk_end(t, TK_INST, "r1"), 0);
    s_stop(&e);
}

/* A pool at the head is one level: a block on one member is on the head, though
 * new blocks go to another (the roomier): a lookup advises no prefetch for it and
 * a prefetch leaves it where it is (no copy from member to member). */
static void test_head_pool_blocks_are_not_promoted_between_members(void **state)
{
    (void)state;
    s_env_t e;
    s_start(&e, true);
    tk_t *t = e.t;
    s_member_up(t, 2, "m1", e.m[0], 41, S_MEMBER_CAP);
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 4), 0);
    s_member_up(t, 3, "m2", e.m[1], 42, S_MEMBER_CAP); /* empty: the head's pick now */
    uint8_t keys[4][16];
    tk_keys(0, 4, keys);
    assert_int_equal(tk_lookup(t, TK_INST, "r1", kvtier_LookupMode_LOOKUP_MODE_PER_KEY, 0, keys, 4),
                     0);
    assert_int_equal(t->rep->body.lookup_rep.hit_count, 4);
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(t->arr->tier_ids.v[i], 2);
    assert_false(t->rep->body.lookup_rep.prefetch_advised);
    assert_int_equal(tk_prepare(t, kvtier_Envelope_prepare_prefetch_req_tag, TK_INST, "r1", keys, 4),
                     0);
    assert_int_equal(t->arr->keys.n, 0); /* nothing to promote */
    uint64_t token = t->rep->body.prepare_prefetch_rep.token.token_id;
    assert_int_equal(tk_stat(t, "reserved"), 0);
    assert_int_equal(tk_stat(t, "pinned"), 0);
    kvtier_CompletePrefetchRequest *c =
        &tk_req(t, kvtier_Envelope_complete_prefetch_req_tag)->body.complete_prefetch_req;
    snprintf(c->instance_id, sizeof c->instance_id, "%s", TK_INST);
    snprintf(c->request_id, sizeof c->request_id, "r1");
    c->token_id = token;
    bus_arrays_t none = {0};
    assert_int_equal(tk_call(t, &none), 0);
    assert_int_equal(tk_stat(t, "tier.m1.used"), 4);
    assert_int_equal(tk_stat(t, "tier.m2.used"), 0);
    assert_int_equal(tk_end(t, TK_INST, "r1"), 0);
    s_stop(&e);
}

/* A put of keys a member of the head pool already holds stores nothing again,
 * though the head's pick is another member: a block lives on one member. */
static void test_head_pool_put_skips_keys_on_another_member(void **state)
{
    (void)state;
    s_env_t e;
    s_start(&e, true);
    tk_t *t = e.t;
    s_member_up(t, 2, "m1", e.m[0], 51, S_MEMBER_CAP);
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 4), 0);
    s_member_up(t, 3, "m2", e.m[1], 52, S_MEMBER_CAP); /* empty: the head's pick now */
    uint8_t keys[4][16];
    tk_keys(0, 4, keys);
    assert_int_equal(tk_prepare_put(t, "r1", keys, 4), 0);
    assert_int_equal(t->arr->keys.n, 0); /* all four are stored already */
    uint64_t token = t->rep->body.prepare_put_rep.token.token_id;
    assert_int_equal(tk_complete_put(t, "r1", token, NULL, 0, NULL, 0), 0);
    assert_int_equal(tk_stat(t, "tier.m1.used"), 4);
    assert_int_equal(tk_stat(t, "tier.m2.used"), 0);
    assert_int_equal(tk_end(t, TK_INST, "r1"), 0);
    s_stop(&e);
}

/* `kvtier drain` names members, not pools. */
static void test_drain_of_a_pool_is_refused(void **state)
{
    (void)state;
    s_env_t e;
    s_start(&e, false);
    tk_t *t = e.t;
    kvtier_AdminDrainRequest *r =
        &tk_req(t, kvtier_Envelope_admin_drain_req_tag)->body.admin_drain_req;
    snprintf(r->tier, sizeof r->tier, "remote");
    assert_int_equal(tk_call(t, NULL), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(t->msg, "\"remote\" is a pool: drain its members one by one"));
    s_stop(&e);
}

static void test_bad_pool_configs_are_refused(void **state)
{
    (void)state;
    char err[256];
    sched_config_t cfg;
    s_config(&cfg, false);
    assert_int_equal(sched_config_check(&cfg, err, sizeof err), 0);

    s_config(&cfg, false);
    cfg.tiers[2].pool = 0; /* a slot of the range not marked */
    snprintf(cfg.tiers[2].name, sizeof cfg.tiers[2].name, "x");
    assert_int_equal(sched_config_check(&cfg, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "tier id 3 is not marked pool remote's"));

    s_config(&cfg, false);
    cfg.chains[0].n_tiers = 3; /* host0 and two of the pool's three slots */
    assert_int_equal(sched_config_check(&cfg, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "pool remote's slots (ids 2..4) are not listed together"));

    s_config(&cfg, false);
    cfg.pools[0].max_members = 4; /* past the table */
    assert_int_equal(sched_config_check(&cfg, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "pools[0]"));

    s_config(&cfg, false);
    cfg.tiers[1].pool = 2; /* no such pool */
    assert_int_equal(sched_config_check(&cfg, err, sizeof err), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_members_join_and_leave),
        cmocka_unit_test(test_puts_go_to_the_roomiest_member),
        cmocka_unit_test(test_empty_head_pool_refuses_puts),
        cmocka_unit_test(test_head_pool_blocks_are_not_promoted_between_members),
        cmocka_unit_test(test_head_pool_put_skips_keys_on_another_member),
        cmocka_unit_test(test_drain_of_a_pool_is_refused),
        cmocka_unit_test(test_bad_pool_configs_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
