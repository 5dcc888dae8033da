/* test_sched_index.c — the scheduler's index module (actors/sched_index.c): instance
 * registration and its bounds, the slot-header instance number, lookup modes, and
 * remove sparing pinned blocks, over the scheduler's meta plane against a fake tier
 * actor (tests/support/sched_fake_tier.h). Moved from test_sched_actor.c. */
#include "sched_testkit.h"

#include "tier_actor.h"

/* The slot-header instance number matches what the tier actor stores. */
static void test_instance_number_matches_tier_actor_hash(void **state)
{
    (void)state;
    const char *ids[] = {"llama-8b", "a", "qwen2-72b-instruct", ""};
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(sched_instance_number(ids[i]), tier_actor_instance_hash(ids[i]));
}

/* Issue 3 §1: spec checks (bytes_per_block > 0 and <= slot size, tokens_per_block
 * > 0, segments add up); the same spec again is OK, a different one CONFLICT. */
static void test_register_instance_checks_spec(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL); /* registers TK_INST with 4096-byte blocks */
    tk_t *t = e.t;
    assert_int_equal(tk_register(t, TK_INST, 4096), 0);
    assert_false(t->rep->body.register_instance_rep.created);
    assert_int_equal(tk_register(t, TK_INST, 2048), kvtier_StatusCode_STATUS_CONFLICT);
    assert_int_equal(tk_register(t, "big", 4097), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(t->msg, "slot size"));
    assert_int_equal(tk_register(t, "zero", 0), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_register(t, "", 16), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    /* ids name event topics and metric labels: printable ASCII, no spaces */
    assert_int_equal(tk_register(t, "two words", 16), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(t->msg, "byte 0x20 at offset 3"));
    assert_int_equal(tk_register(t, "caf\xc3\xa9", 16), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_register(t, "llama-8b/v2:prod@us", 16), 0);

    kvtier_RegisterInstanceRequest *r =
        &tk_req(t, kvtier_Envelope_register_instance_req_tag)->body.register_instance_req;
    r->has_spec = true;
    snprintf(r->spec.instance_id, sizeof r->spec.instance_id, "seg");
    r->spec.tokens_per_block = 16;
    r->spec.bytes_per_block = 1000;
    r->spec.segment_bytes_count = 2;
    r->spec.segment_bytes[0] = 500;
    r->spec.segment_bytes[1] = 400;
    assert_int_equal(tk_call(t, NULL), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(t->msg, "add up"));
    r = &tk_req(t, kvtier_Envelope_register_instance_req_tag)->body.register_instance_req;
    r->has_spec = true;
    snprintf(r->spec.instance_id, sizeof r->spec.instance_id, "seg");
    r->spec.tokens_per_block = 0;
    r->spec.bytes_per_block = 1000;
    assert_int_equal(tk_call(t, NULL), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    /* equal segments (issue 11 §2): a divisor of the block, at most 4096, not with
     * segment_bytes; part of the spec (another count is CONFLICT) */
    const struct {
        uint64_t bpb;
        uint32_t segments, seg_bytes_count;
        kvtier_StatusCode want;
        const char *msg;
    } lw[] = {
        {1000, 3, 0, kvtier_StatusCode_STATUS_INVALID_ARGUMENT, "not a multiple of segments 3"},
        {4096, 8192, 0, kvtier_StatusCode_STATUS_INVALID_ARGUMENT, "above the maximum 4096"},
        {1000, 2, 2, kvtier_StatusCode_STATUS_INVALID_ARGUMENT, "not both"},
        {1000, 8, 0, kvtier_StatusCode_STATUS_OK, NULL},
        {1000, 8, 0, kvtier_StatusCode_STATUS_OK, NULL}, /* the same again */
        {1000, 4, 0, kvtier_StatusCode_STATUS_CONFLICT, NULL},
    };
    for (size_t k = 0; k < sizeof lw / sizeof lw[0]; k++) {
        r = &tk_req(t, kvtier_Envelope_register_instance_req_tag)->body.register_instance_req;
        r->has_spec = true;
        snprintf(r->spec.instance_id, sizeof r->spec.instance_id, "layers");
        r->spec.tokens_per_block = 16;
        r->spec.bytes_per_block = lw[k].bpb;
        r->spec.segments = lw[k].segments;
        r->spec.segment_bytes_count = lw[k].seg_bytes_count;
        r->spec.segment_bytes[0] = r->spec.segment_bytes[1] = 500;
        assert_int_equal(tk_call(t, NULL), lw[k].want);
        if (lw[k].msg && !strstr(t->msg, lw[k].msg))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", k, t->msg, lw[k].msg);
    }
    assert_int_equal(tk_register(t, "second", 1024), 0);
    assert_true(t->rep->body.register_instance_rep.created);
    tk_env_stop(&e);
}

static void s_two_instances(sched_config_t *cfg)
{
    cfg->max_instances = 2;
}

/* Bounded registry: past max_instances, NO_SPACE. */
static void test_register_instance_is_bounded(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, s_two_instances);
    assert_int_equal(tk_register(e.t, "b", 64), 0);
    assert_int_equal(tk_register(e.t, "c", 64), kvtier_StatusCode_STATUS_NO_SPACE);
    tk_env_stop(&e);
}

/* Lookup modes (meta.proto): PREFIX stops at the first miss; REVERSE with window w
 * is the longest prefix whose last w blocks are cached; PER_KEY looks at each. */
static void test_lookup_modes(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 32, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    /* cached: 0 1 _ 3 4 5 _ 7 */
    assert_int_equal(tk_put(t, "r1", 0, 2), 0);
    assert_int_equal(tk_put(t, "r1", 3, 3), 0);
    assert_int_equal(tk_put(t, "r1", 7, 1), 0);
    uint8_t keys[8][16];
    tk_keys(0, 8, keys);
    const bool want[8] = {1, 1, 0, 1, 1, 1, 0, 1};

    assert_int_equal(tk_prefix(t, keys, 8), 2);
    assert_int_equal(t->arr->mask.n, 8);
    assert_true(t->arr->mask.v[1] && !t->arr->mask.v[2] && !t->arr->mask.v[3]);

    assert_int_equal(tk_lookup(t, TK_INST, NULL, kvtier_LookupMode_LOOKUP_MODE_PER_KEY, 0, keys, 8),
                     0);
    assert_int_equal(t->rep->body.lookup_rep.hit_count, 6);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(t->arr->mask.v[i], want[i]);
        assert_int_equal(t->arr->tier_ids.v[i], want[i] ? 1 : 0);
    }
    struct {
        uint32_t n, w, end;
    } cases[] = {
        {8, 3, 6}, /* last run of 3 hits: 3 4 5 -> prefix of 6 */
        {8, 1, 8}, /* key 7 is cached */
        {7, 1, 6}, /* keys 0..6: 5 is the last hit */
        {8, 4, 2}, /* no run of 4; the leading run 0 1 counts */
        {8, 0, 2}, /* window 0: the whole prefix */
        {3, 2, 2}, /* 0 1 _ : run 0 1 */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        assert_int_equal(tk_lookup(t, TK_INST, NULL, kvtier_LookupMode_LOOKUP_MODE_REVERSE,
                                   cases[c].w, keys, cases[c].n),
                         0);
        assert_int_equal(t->rep->body.lookup_rep.hit_count, cases[c].end);
    }
    uint8_t gap[1][16];
    tk_key(2, gap[0]);
    assert_int_equal(tk_lookup(t, TK_INST, NULL, kvtier_LookupMode_LOOKUP_MODE_REVERSE, 2, gap, 1),
                     0);
    assert_int_equal(t->rep->body.lookup_rep.hit_count, 0);
    /* bad mode, unknown instance, unknown request */
    assert_int_equal(tk_lookup(t, TK_INST, NULL, (kvtier_LookupMode)9, 0, keys, 8),
                     kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_lookup(t, "ghost", NULL, kvtier_LookupMode_LOOKUP_MODE_PREFIX, 0, keys, 8),
                     kvtier_StatusCode_STATUS_NOT_FOUND);
    assert_int_equal(tk_lookup(t, TK_INST, "r9", kvtier_LookupMode_LOOKUP_MODE_PREFIX, 0, keys, 8),
                     kvtier_StatusCode_STATUS_NOT_FOUND);
    tk_env_stop(&e);
}

/* Issue 3 §1 remove: drops unpinned blocks (and deletes their headers on the tier);
 * a pinned block is reported not removed. */
static void test_remove_spares_pinned_blocks(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 3), 0);
    uint8_t keys[3][16];
    tk_keys(0, 3, keys);
    assert_int_equal(tk_prepare_get(t, "r1", keys, 1), 0); /* pins key 0 */
    assert_int_equal(tk_remove(t, keys, 3), 0);
    assert_int_equal(t->rep->body.remove_rep.removed, 2);
    assert_non_null(strstr(t->rep->status.message, "pinned"));
    assert_true(tk_cached(t, 0));
    assert_false(tk_cached(t, 1));
    assert_false(tk_cached(t, 2));
    /* the tier's headers of removed blocks go away */
    int64_t until = zclock_mono() + TK_POLL_MS;
    while (sched_fake_tier_count_key(e.ft, keys[1]) && zclock_mono() < until)
        zclock_sleep(5);
    assert_int_equal(sched_fake_tier_count_key(e.ft, keys[1]), 0);
    assert_int_equal(sched_fake_tier_count_key(e.ft, keys[0]), 1);
    tk_env_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_instance_number_matches_tier_actor_hash),
        cmocka_unit_test(test_register_instance_checks_spec),
        cmocka_unit_test(test_register_instance_is_bounded),
        cmocka_unit_test(test_lookup_modes),
        cmocka_unit_test(test_remove_spares_pinned_blocks),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
