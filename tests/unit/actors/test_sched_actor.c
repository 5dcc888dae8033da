/* test_sched_actor.c — the scheduler actor's meta plane over real sockets, against
 * a fake tier actor (tests/support/sched_fake_tier.h): registration rules, the
 * put/get flow with tokens, the window protocol, lookup modes, remove, the request
 * end safety net, stats, and malformed requests leaving stored blocks intact
 * (issue 3 §1, §5; DESIGN.md §6). */
#include "sched_testkit.h"

#include "tier_actor.h"

/* Issue 3 §1: the actor binds an ephemeral endpoint, reports it, and ClusterInfo
 * names the leader, the epoch and the tiers with their fill. */
static void test_start_reports_endpoint_and_cluster_info(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    assert_non_null(strstr(e.t->ep, "tcp://127.0.0.1:"));
    tk_req(e.t, kvtier_Envelope_cluster_info_req_tag);
    assert_int_equal(tk_call(e.t, NULL), 0);
    const kvtier_ClusterInfoReply *r = &e.t->rep->body.cluster_info_rep;
    assert_string_equal(r->cluster, "kvtier");
    assert_string_equal(r->leader_endpoint, e.t->ep);
    assert_int_equal(r->leader_epoch, 7);
    assert_int_equal(r->tiers_count, 1);
    assert_string_equal(r->tiers[0].name, "host0");
    assert_int_equal(r->tiers[0].kind, kvtier_TierKind_TIER_KIND_HOST);
    assert_string_equal(r->tiers[0].endpoint, sched_fake_tier_endpoint(e.ft));
    assert_string_equal(r->tiers[0].shm, "/kvtier-test-host0");
    assert_int_equal(r->tiers[0].capacity_slots, 16);
    assert_int_equal(r->tiers[0].used_slots, 0);
    assert_true(r->tiers[0].up);
    tk_env_stop(&e);
}

/* A bad config is refused: the constructor returns NULL. */
static void test_bad_config_returns_null(void **state)
{
    (void)state;
    sched_config_t cfg;
    tk_config(&cfg, 16, 4096);
    cfg.chains[0].tier_ids[0] = 5;
    char err[256];
    assert_int_not_equal(sched_config_check(&cfg, err, sizeof err), 0);
    assert_non_null(strstr(err, "chain"));
    assert_null(sched_actor_new(&cfg));
    tk_config(&cfg, 16, 4096);
    snprintf(cfg.tiers[0].policy, sizeof cfg.tiers[0].policy, "nope");
    assert_null(sched_actor_new(&cfg));
}

/* A meta endpoint already bound elsewhere: the constructor returns NULL. */
static void test_bind_failure_returns_null(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 4, NULL);
    sched_config_t cfg = e.cfg;
    snprintf(cfg.endpoint, sizeof cfg.endpoint, "%s", e.t->ep);
    assert_null(sched_actor_new(&cfg));
    tk_env_stop(&e);
}

static void s_two_requests(sched_config_t *cfg)
{
    cfg->max_requests = 2;
}

/* Bounded request table: past max_requests, UNAVAILABLE; ending one frees a place. */
static void test_open_requests_are_bounded(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 4, s_two_requests);
    assert_int_equal(tk_begin(e.t, TK_INST, "a", 0), 0);
    assert_int_equal(tk_begin(e.t, TK_INST, "b", 0), 0);
    assert_int_equal(tk_begin(e.t, TK_INST, "c", 0), kvtier_StatusCode_STATUS_UNAVAILABLE);
    assert_non_null(strstr(e.t->msg, "max_requests"));
    assert_int_equal(tk_end(e.t, TK_INST, "a"), 0);
    assert_int_equal(tk_begin(e.t, TK_INST, "c", 0), 0);
    assert_int_equal(tk_begin(e.t, TK_INST, "a", 0), kvtier_StatusCode_STATUS_UNAVAILABLE);
    assert_int_equal(tk_end(e.t, TK_INST, "b"), 0);
    assert_int_equal(tk_begin(e.t, TK_INST, "a", 0), 0);
    tk_env_stop(&e);
}

/* The slot-header instance number matches what the tier actor stores. */
static void test_instance_number_matches_tier_actor_hash(void **state)
{
    (void)state;
    const char *ids[] = {"llama-8b", "a", "qwen2-72b-instruct", ""};
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(sched_instance_number(ids[i]), tier_actor_instance_hash(ids[i]));
}

/* bus_token.h (v2): a minted token says what it is: the window's token id (as
 * Token.token_id), one nonzero issuer per scheduler, the leader epoch it runs
 * under, the instance it was minted for, and an expiry of now + the lease on the
 * wall clock. */
static void test_tokens_carry_their_metadata(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    tk_t *t = e.t;
    uint8_t keys[2][16];
    tk_keys(300, 2, keys);
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    uint64_t before = (uint64_t)zclock_time();
    assert_int_equal(tk_prepare_put(t, "r1", keys, 2), 0);
    uint64_t after = (uint64_t)zclock_time();
    const kvtier_Token put = t->rep->body.prepare_put_rep.token;
    uint8_t payload[4096];
    memcpy(payload, t->arr->payload.data, t->arr->payload.len);
    bus_token_view_t v;
    assert_int_equal(bus_token_decode(payload, t->arr->payload.len, &v, NULL, 0), 0);
    assert_true(v.meta.token_id == put.token_id);
    assert_true(v.meta.issuer != 0);
    assert_int_equal(v.meta.leader_epoch, 7);
    assert_int_equal(v.meta.instance, sched_instance_number(TK_INST));
    assert_int_equal(v.meta.flags, 0);
    assert_true(v.meta.expiry_ms >= before + put.lease_ms);
    assert_true(v.meta.expiry_ms <= after + put.lease_ms);
    uint64_t issuer = v.meta.issuer;
    uint64_t ck[2] = {1, 2};
    assert_int_equal(tk_complete_put(t, "r1", put.token_id, NULL, 0, ck, 2), 0);

    assert_int_equal(tk_prepare_get(t, "r1", keys, 2), 0);
    const kvtier_Token get = t->rep->body.prepare_get_rep.token;
    memcpy(payload, t->arr->payload.data, t->arr->payload.len);
    assert_int_equal(bus_token_decode(payload, t->arr->payload.len, &v, NULL, 0), 0);
    assert_true(v.meta.token_id == get.token_id);
    assert_true(get.token_id != put.token_id);
    assert_true(v.meta.issuer == issuer);
    assert_int_equal(v.meta.leader_epoch, 7);
    assert_int_equal(tk_complete(t, kvtier_Envelope_complete_get_req_tag, "r1", get.token_id), 0);
    assert_int_equal(tk_end(t, TK_INST, "r1"), 0);
    tk_env_stop(&e);
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

/* DESIGN.md §6 write then read: prepare_put returns a token with head-tier slots,
 * complete_put makes the tier write the headers before the blocks serve; a lookup
 * hits; prepare_get pins and returns a token with tier, slot and size per key;
 * complete_get unpins; request_end with nothing open reports nothing. */
static void test_put_then_get_round_trip(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    tk_t *t = e.t;
    uint8_t keys[4][16];
    tk_keys(100, 4, keys);
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(t->rep->body.request_begin_rep.head_tier_id, 1);
    assert_int_equal(tk_prefix(t, keys, 4), 0);

    assert_int_equal(tk_prepare_put(t, "r1", keys, 4), 0);
    const kvtier_Token tok = t->rep->body.prepare_put_rep.token;
    assert_int_equal(t->rep->body.prepare_put_rep.skipped, 0);
    assert_int_equal(t->arr->keys.n, 4);
    assert_memory_equal(t->arr->keys.keys, keys, sizeof keys);
    assert_true(tok.lease_ms > 0);
    bus_token_view_t v;
    uint8_t payload[4096];
    memcpy(payload, t->arr->payload.data, t->arr->payload.len);
    assert_int_equal(bus_token_decode(payload, t->arr->payload.len, &v, NULL, 0), 0);
    assert_int_equal(v.kind, BUS_TOKEN_PUT);
    assert_int_equal(v.n_tiers, 1);
    assert_int_equal(v.tiers[0].tier_id, 1);
    assert_string_equal(v.tiers[0].endpoint, sched_fake_tier_endpoint(e.ft));
    assert_int_equal(v.tiers[0].epoch, 1);
    assert_int_equal(v.n_entries, 4);
    uint64_t slots[4];
    for (uint32_t i = 0; i < 4; i++) {
        bus_token_entry_t en;
        bus_token_entry_at(&v, i, &en);
        assert_int_equal(en.size, 4096);
        assert_true(en.slot < 16);
        slots[i] = en.slot;
    }
    /* reads never see WRITING */
    assert_int_equal(tk_prefix(t, keys, 4), 0);

    uint64_t ck[4] = {11, 22, 33, 44};
    assert_int_equal(tk_complete_put(t, "r1", tok.token_id, NULL, 0, ck, 4), 0);
    assert_int_equal(t->rep->body.complete_put_rep.committed, 4);
    /* the tier actor holds every header before the client hears OK */
    for (uint32_t i = 0; i < 4; i++) {
        sched_fake_slot_t h;
        assert_int_equal(sched_fake_tier_get(e.ft, slots[i], &h), 0);
        assert_true(h.serving);
        assert_memory_equal(h.key, keys[i], 16);
        assert_int_equal(h.checksum, ck[i]);
        assert_int_equal(h.size, 4096);
        assert_string_equal(h.instance_id, TK_INST);
    }
    sched_fake_tier_stats_t fs;
    sched_fake_tier_stats(e.ft, &fs);
    assert_int_equal(fs.last_epoch, 1);

    assert_int_equal(tk_lookup(t, TK_INST, "r1", kvtier_LookupMode_LOOKUP_MODE_PREFIX, 0, keys, 4),
                     0);
    assert_int_equal(t->rep->body.lookup_rep.hit_count, 4);
    assert_false(t->rep->body.lookup_rep.prefetch_advised);
    assert_int_equal(t->arr->tier_ids.n, 4);
    assert_int_equal(t->arr->tier_ids.v[3], 1);

    assert_int_equal(tk_prepare_get(t, "r1", keys, 4), 0);
    uint64_t gtok = t->rep->body.prepare_get_rep.token.token_id;
    memcpy(payload, t->arr->payload.data, t->arr->payload.len);
    assert_int_equal(bus_token_decode(payload, t->arr->payload.len, &v, NULL, 0), 0);
    assert_int_equal(v.kind, BUS_TOKEN_GET);
    assert_int_equal(v.n_entries, 4);
    for (uint32_t i = 0; i < 4; i++) {
        bus_token_entry_t en;
        bus_token_entry_at(&v, i, &en);
        assert_int_equal(en.slot, slots[i]);
        assert_int_equal(en.size, 4096);
        assert_int_equal(v.tiers[en.tier].tier_id, 1);
    }
    assert_int_equal(tk_stat(t, "pinned"), 4);
    assert_int_equal(tk_complete(t, kvtier_Envelope_complete_get_req_tag, "r1", gtok), 0);
    assert_int_equal(t->rep->body.complete_get_rep.released, 4);
    assert_int_equal(tk_stat(t, "pinned"), 0);

    assert_int_equal(tk_end(t, TK_INST, "r1"), 0);
    assert_int_equal(t->rep->body.request_end_rep.closed_windows_count, 0);
    assert_int_equal(tk_stat(t, "blocks"), 4);
    assert_int_equal(tk_stat(t, "puts_committed"), 4);
    tk_env_stop(&e);
}

/* DESIGN.md §6: prepare_put skips keys already SERVING and reports how many. */
static void test_prepare_put_skips_serving_keys(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 2), 0);
    uint8_t keys[4][16];
    tk_keys(0, 4, keys);
    assert_int_equal(tk_prepare_put(t, "r1", keys, 4), 0);
    assert_int_equal(t->rep->body.prepare_put_rep.skipped, 2);
    assert_int_equal(t->arr->keys.n, 2);
    assert_memory_equal(t->arr->keys.keys[0], keys[2], 16);
    assert_memory_equal(t->arr->keys.keys[1], keys[3], 16);
    tk_env_stop(&e);
}

/* UCM window protocol: a second prepare of one kind is INVALID_ARGUMENT, complete
 * without prepare or with another token is INVALID_ARGUMENT, a failed prepare
 * opens no window, kinds are independent. */
static void test_window_protocol(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 2), 0);
    uint8_t keys[3][16];
    tk_keys(0, 3, keys);

    assert_int_equal(tk_complete(t, kvtier_Envelope_complete_get_req_tag, "r1", 1),
                     kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(t->msg, "no open get window"));
    /* key 2 is not cached: NOT_FOUND, nothing pinned, no window */
    assert_int_equal(tk_prepare_get(t, "r1", keys, 3), kvtier_StatusCode_STATUS_NOT_FOUND);
    assert_non_null(strstr(t->msg, "1 of 3"));
    assert_int_equal(tk_stat(t, "pinned"), 0);
    assert_int_equal(tk_prepare_get(t, "r1", keys, 2), 0);
    uint64_t tok = t->rep->body.prepare_get_rep.token.token_id;
    assert_int_equal(tk_prepare_get(t, "r1", keys, 2), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(t->msg, "already has an open get window"));
    /* a put window opens independently */
    assert_int_equal(tk_prepare_put(t, "r1", keys + 2, 1), 0);
    uint64_t ptok = t->rep->body.prepare_put_rep.token.token_id;
    assert_int_equal(tk_prepare_put(t, "r1", keys + 2, 1),
                     kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_complete(t, kvtier_Envelope_complete_get_req_tag, "r1", tok + 100),
                     kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(t->msg, "not the open get window"));
    assert_int_equal(tk_complete(t, kvtier_Envelope_complete_get_req_tag, "r1", tok), 0);
    assert_int_equal(tk_complete(t, kvtier_Envelope_complete_get_req_tag, "r1", tok),
                     kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    uint64_t ck = 5;
    assert_int_equal(tk_complete_put(t, "r1", ptok, NULL, 0, &ck, 1), 0);
    /* prefetch: single-tier chain, empty token, same window rules */
    assert_int_equal(
        tk_prepare(t, kvtier_Envelope_prepare_prefetch_req_tag, TK_INST, "r1", keys, 2), 0);
    uint64_t ftok = t->rep->body.prepare_prefetch_rep.token.token_id;
    bus_token_view_t v;
    uint8_t payload[128]; /* an empty v2 token: 68 bytes */
    assert_true(t->arr->payload.len <= sizeof payload);
    memcpy(payload, t->arr->payload.data, t->arr->payload.len);
    assert_int_equal(bus_token_decode(payload, t->arr->payload.len, &v, NULL, 0), 0);
    assert_int_equal(v.n_entries, 0);
    assert_int_equal(t->arr->keys.n, 0);
    assert_int_equal(
        tk_prepare(t, kvtier_Envelope_prepare_prefetch_req_tag, TK_INST, "r1", keys, 2),
        kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_complete(t, kvtier_Envelope_complete_prefetch_req_tag, "r1", ftok), 0);
    assert_int_equal(tk_complete(t, kvtier_Envelope_complete_prefetch_req_tag, "r1", ftok),
                     kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    /* windows belong to open requests */
    assert_int_equal(tk_prepare_get(t, "nope", keys, 1), kvtier_StatusCode_STATUS_NOT_FOUND);
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), kvtier_StatusCode_STATUS_ALREADY_EXISTS);
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

/* UCM window protocol 4: request_end closes windows left open (pins released,
 * reservations aborted) and reports them. */
static void test_request_end_safety_net(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 2), 0);
    uint8_t keys[5][16];
    tk_keys(0, 5, keys);
    assert_int_equal(tk_prepare_get(t, "r1", keys, 2), 0);
    assert_int_equal(tk_prepare_put(t, "r1", keys + 2, 3), 0);
    assert_int_equal(tk_stat(t, "reserved"), 3);
    assert_int_equal(tk_end(t, TK_INST, "r1"), 0);
    const kvtier_RequestEndReply *r = &t->rep->body.request_end_rep;
    assert_int_equal(r->closed_windows_count, 2);
    assert_int_equal(r->closed_windows[0], kvtier_WindowKind_WINDOW_KIND_GET);
    assert_int_equal(r->closed_windows[1], kvtier_WindowKind_WINDOW_KIND_PUT);
    assert_int_equal(r->released_pins, 2);
    assert_int_equal(r->aborted_reservations, 3);
    assert_int_equal(tk_stat(t, "pinned"), 0);
    assert_int_equal(tk_stat(t, "reserved"), 0);
    assert_int_equal(tk_stat(t, "blocks"), 2);
    assert_int_equal(tk_stat(t, "open_requests"), 0);
    assert_false(tk_cached(t, 2));
    assert_int_equal(tk_end(t, TK_INST, "r1"), kvtier_StatusCode_STATUS_NOT_FOUND);
    tk_env_stop(&e);
}

/* DESIGN.md §5: malformed input gets INVALID_ARGUMENT (or NOT_FOUND for unknown
 * names) with a message, and stored blocks are intact afterwards. */
static void test_malformed_requests_leave_blocks_intact(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 4), 0);
    uint8_t keys[4][16];
    tk_keys(0, 4, keys);

    /* more keys than max_batch: refused by the decoder */
    kvtier_Envelope *env = tk_req(t, kvtier_Envelope_lookup_req_tag);
    snprintf(env->body.lookup_req.instance_id, 64, "%s", TK_INST);
    uint8_t(*big)[16] = calloc(2000, 16);
    bus_arrays_t ra = tk_keys_arr(big, 2000); /* over max_batch 1024 */
    assert_int_equal(tk_call(t, &ra), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    free(big);
    /* empty ids, unknown request, empty key lists */
    assert_int_equal(tk_begin(t, "", "x", 0), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_begin(t, TK_INST, "", 0), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_begin(t, TK_INST, "x", 1ull << 50),
                     kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_prepare_put(t, "r1", keys, 0), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_prepare_get(t, "r1", keys, 0), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    /* a key twice in one put batch */
    uint8_t dup[2][16];
    tk_key(9, dup[0]);
    tk_key(9, dup[1]);
    assert_int_equal(tk_prepare_put(t, "r1", dup, 2), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    /* complete_put with a wrong mask length or without checksums: window stays open */
    uint8_t nk[2][16];
    tk_keys(20, 2, nk);
    assert_int_equal(tk_prepare_put(t, "r1", nk, 2), 0);
    uint64_t tok = t->rep->body.prepare_put_rep.token.token_id;
    bool mask[3] = {true, true, true};
    uint64_t ck[2] = {1, 2};
    assert_int_equal(tk_complete_put(t, "r1", tok, mask, 3, ck, 2),
                     kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_complete_put(t, "r1", tok, NULL, 0, ck, 1),
                     kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(t->msg, "checksums"));
    assert_int_equal(tk_complete_put(t, "r1", tok, mask, 2, ck, 2), 0);
    assert_int_equal(t->rep->body.complete_put_rep.committed, 2);
    /* tier-plane and membership bodies are not served here */
    tk_req(t, kvtier_Envelope_inventory_req_tag);
    assert_int_equal(tk_call(t, NULL), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    tk_req(t, kvtier_Envelope_tier_membership_req_tag);
    assert_int_equal(tk_call(t, NULL), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    /* raw garbage on the socket is answered and dropped */
    zsock_t *raw_sock = zsock_new_dealer(t->ep);
    assert_non_null(raw_sock);
    zstr_send(raw_sock, "\x08\x01\xff\xff\xff garbage");
    zsock_set_rcvtimeo(raw_sock, TK_CALL_MS);
    zmsg_t *m = zmsg_recv(raw_sock);
    assert_non_null(m);
    zmsg_destroy(&m);
    zsock_destroy(&raw_sock);

    assert_int_equal(tk_prefix(t, keys, 4), 4);
    assert_int_equal(tk_stat(t, "blocks"), 6);
    assert_true(tk_stat(t, "invalid_requests") >= 8);
    tk_env_stop(&e);
}

/* Stats and AdminStatus report what happened; per-instance counters too. */
static void test_stats_and_admin_status(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 2), 0);
    uint8_t keys[3][16];
    tk_keys(0, 3, keys);
    assert_int_equal(tk_prefix(t, keys, 3), 2);
    assert_int_equal(tk_stat(t, "lookups"), 1);
    assert_int_equal(tk_stat(t, "lookup_keys"), 3);
    assert_int_equal(tk_stat(t, "hits"), 2);
    assert_int_equal(tk_stat(t, "misses"), 1);
    assert_int_equal(tk_stat(t, "tier.host0.used"), 2);
    assert_int_equal(tk_stat(t, "tier.host0.capacity"), 16);
    assert_int_equal(tk_stat(t, "open_requests"), 1);
    assert_int_equal(tk_stat(t, "instances"), 1);
    kvtier_StatsRequest *sr = &tk_req(t, kvtier_Envelope_stats_req_tag)->body.stats_req;
    snprintf(sr->instance_id, sizeof sr->instance_id, "%s", TK_INST);
    assert_int_equal(tk_call(t, NULL), 0);
    assert_true(t->rep->body.stats_rep.counters_count > 0);
    snprintf(tk_req(t, kvtier_Envelope_stats_req_tag)->body.stats_req.instance_id, 64, "ghost");
    assert_int_equal(tk_call(t, NULL), kvtier_StatusCode_STATUS_NOT_FOUND);
    tk_req(t, kvtier_Envelope_admin_status_req_tag);
    assert_int_equal(tk_call(t, NULL), 0);
    const kvtier_AdminStatusReply *a = &t->rep->body.admin_status_rep;
    assert_true(a->leader);
    assert_string_equal(a->node_id, "test-coord");
    assert_int_equal(a->blocks, 2);
    assert_int_equal(a->instances, 1);
    assert_int_equal(a->open_requests, 1);
    assert_int_equal(a->tiers, 1);
    tk_env_stop(&e);
}

/* One StatsRequest page; returns the reply. */
static const kvtier_StatsReply *s_stats_page(tk_t *t, const char *inst, uint32_t offset,
                                             uint32_t max)
{
    kvtier_StatsRequest *sr = &tk_req(t, kvtier_Envelope_stats_req_tag)->body.stats_req;
    snprintf(sr->instance_id, sizeof sr->instance_id, "%s", inst);
    sr->offset = offset;
    sr->max_counters = max;
    assert_int_equal(tk_call(t, NULL), 0);
    return &t->rep->body.stats_rep;
}

/* Walks the pages of `max` counters from 0 by next_offset and checks they are, in
 * order, the counters of one whole-list reply `all` (names and values), each page
 * at most `max` long and reporting the same total. */
static void s_check_pages(tk_t *t, const char *inst, const kvtier_StatsReply *all, uint32_t max)
{
    uint32_t off = 0, pages = 0;
    while (off < all->total) {
        const kvtier_StatsReply *r = s_stats_page(t, inst, off, max);
        assert_int_equal(r->total, all->total);
        assert_true(r->counters_count >= 1 && r->counters_count <= max);
        assert_int_equal(r->next_offset, off + r->counters_count);
        for (pb_size_t i = 0; i < r->counters_count; i++) {
            assert_string_equal(r->counters[i].name, all->counters[off + i].name);
            assert_int_equal(r->counters[i].value, all->counters[off + i].value);
        }
        off = r->next_offset;
        pages++;
    }
    assert_int_equal(off, all->total);
    assert_int_equal(pages, (all->total + max - 1) / max);
}

/* Issue "one source for shared identities and limits": StatsReply never drops
 * counters silently (nor ClusterInfoReply tiers). Every reply says how many counters there are (total) and where
 * the next page starts; pages of any size, walked by next_offset, give every counter
 * of the list exactly once and in order; a page is never longer than asked nor than
 * the reply's bound (StatsReply.counters); an offset past the end is an empty page. */
static void test_stats_are_paged_and_report_their_total(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 2), 0);
    static kvtier_StatsReply all, inst;
    all = *s_stats_page(t, "", 0, 0); /* 0: a whole page, as an older client asks */
    assert_true(all.total > 7 && all.total <= BUS_STATS_PAGE_MAX);
    assert_int_equal(all.counters_count, all.total);
    assert_int_equal(all.next_offset, all.total);
    assert_string_equal(all.counters[all.total - 1].name, "tier.host0.capacity");
    s_check_pages(t, "", &all, 7);
    s_check_pages(t, "", &all, 1);
    inst = *s_stats_page(t, TK_INST, 0, 0);
    assert_int_equal(inst.counters_count, inst.total);
    s_check_pages(t, TK_INST, &inst, 5);
    const kvtier_StatsReply *r = s_stats_page(t, "", all.total + 10, 7);
    assert_int_equal(r->counters_count, 0);
    assert_int_equal(r->total, all.total);
    assert_int_equal(r->next_offset, all.total);
    r = s_stats_page(t, "", 0, 100000);
    assert_int_equal(r->counters_count, all.total);
    /* ClusterInfo says how many tiers there are, too: all of them listed */
    tk_req(t, kvtier_Envelope_cluster_info_req_tag);
    assert_int_equal(tk_call(t, NULL), 0);
    assert_int_equal(t->rep->body.cluster_info_rep.total_tiers, 1);
    assert_int_equal(t->rep->body.cluster_info_rep.tiers_count, 1);
    tk_env_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_reports_endpoint_and_cluster_info),
        cmocka_unit_test(test_bad_config_returns_null),
        cmocka_unit_test(test_bind_failure_returns_null),
        cmocka_unit_test(test_open_requests_are_bounded),
        cmocka_unit_test(test_instance_number_matches_tier_actor_hash),
        cmocka_unit_test(test_register_instance_checks_spec),
        cmocka_unit_test(test_register_instance_is_bounded),
        cmocka_unit_test(test_put_then_get_round_trip),
        cmocka_unit_test(test_tokens_carry_their_metadata),
        cmocka_unit_test(test_prepare_put_skips_serving_keys),
        cmocka_unit_test(test_window_protocol),
        cmocka_unit_test(test_lookup_modes),
        cmocka_unit_test(test_remove_spares_pinned_blocks),
        cmocka_unit_test(test_request_end_safety_net),
        cmocka_unit_test(test_malformed_requests_leave_blocks_intact),
        cmocka_unit_test(test_stats_and_admin_status),
        cmocka_unit_test(test_stats_are_paged_and_report_their_total),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
