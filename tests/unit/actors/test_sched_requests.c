/* test_sched_requests.c — the scheduler's requests module (actors/sched_requests.c):
 * the request bound, the put/get flow with tokens and their metadata, skipping keys
 * already SERVING, the window protocol and the request-end safety net, over the
 * meta plane against a fake tier actor (tests/support/sched_fake_tier.h). Moved
 * from test_sched_actor.c. */
#include "sched_testkit.h"

#include "tier_actor.h"

static void s_two_requests(sched_config_t *cfg)
{
    cfg->max_requests = 2;
}

/* Bounded request table: past max_requests, OVERLOADED (issue 12 §3); ending one frees a
 * place. */
static void test_open_requests_are_bounded(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 4, s_two_requests);
    assert_int_equal(tk_begin(e.t, TK_INST, "a", 0), 0);
    assert_int_equal(tk_begin(e.t, TK_INST, "b", 0), 0);
    assert_int_equal(tk_begin(e.t, TK_INST, "c", 0), kvtier_StatusCode_STATUS_OVERLOADED);
    assert_non_null(strstr(e.t->msg, "max_requests"));
    assert_int_equal(tk_end(e.t, TK_INST, "a"), 0);
    assert_int_equal(tk_begin(e.t, TK_INST, "c", 0), 0);
    assert_int_equal(tk_begin(e.t, TK_INST, "a", 0), kvtier_StatusCode_STATUS_OVERLOADED);
    assert_int_equal(tk_end(e.t, TK_INST, "b"), 0);
    assert_int_equal(tk_begin(e.t, TK_INST, "a", 0), 0);
    tk_env_stop(&e);
}

/* bus_token.h (v2): a minted token says what it is: the window's token id (as
 * Token.token_id), one nonzero issuer per scheduler, the leader epoch it runs
 * under, the instance it was minted for, and an expiry of now + the lease on the
 * wall clock, less the tier actors' clock skew (5 s by default) when the lease is
 * longer than twice it, so that a tier refuses a late writer when the window lapses.
 * A get, put or prefetch token is flagged EXPORTABLE (kvt_token_export, issue 11 §3). */
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
    assert_int_equal(v.meta.flags, BUS_TOKEN_F_EXPORTABLE);
    uint64_t slack = put.lease_ms > 10000 ? 5000 : 0;
    assert_true(v.meta.expiry_ms >= before + put.lease_ms - slack);
    assert_true(v.meta.expiry_ms <= after + put.lease_ms - slack);
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
 * opens no window, kinds are independent. A complete sent again after it
 * concluded is a resend (issue 9 §1): OK again, applied once. */
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
    assert_int_equal(tk_complete(t, kvtier_Envelope_complete_get_req_tag, "r1", tok), 0);
    assert_int_equal(t->rep->body.complete_get_rep.released, 2);
    assert_int_equal(tk_stat(t, "pinned"), 0);
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
    assert_int_equal(tk_complete(t, kvtier_Envelope_complete_prefetch_req_tag, "r1", ftok), 0);
    assert_int_equal(tk_complete(t, kvtier_Envelope_complete_prefetch_req_tag, "r1", ftok + 50),
                     kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    /* windows belong to open requests */
    assert_int_equal(tk_prepare_get(t, "nope", keys, 1), kvtier_StatusCode_STATUS_NOT_FOUND);
    /* begin of an open request: the same context is a resend, another one is not */
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_begin(t, TK_INST, "r1", 5000), kvtier_StatusCode_STATUS_ALREADY_EXISTS);
    assert_non_null(strstr(t->msg, "another context"));
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
    /* ending it again (a resend) answers OK and closes nothing; the instance must exist */
    assert_int_equal(tk_end(t, TK_INST, "r1"), 0);
    assert_int_equal(t->rep->body.request_end_rep.closed_windows_count, 0);
    assert_int_equal(tk_end(t, "no-such-instance", "r1"), kvtier_StatusCode_STATUS_NOT_FOUND);
    tk_env_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_requests_are_bounded),
        cmocka_unit_test(test_tokens_carry_their_metadata),
        cmocka_unit_test(test_put_then_get_round_trip),
        cmocka_unit_test(test_prepare_put_skips_serving_keys),
        cmocka_unit_test(test_window_protocol),
        cmocka_unit_test(test_request_end_safety_net),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
