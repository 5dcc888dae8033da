/* test_sched_leases.c — capacity, sharing and time in the scheduler actor: all-or-
 * nothing NO_SPACE with pinned blocks never evicted, evicted victims deleted on the
 * tier, shared reservations of two requests, TTL expiry and touch, pin and write
 * leases lapsing, and a tier that never answers a PutHeader (DESIGN.md §6, §8;
 * issue 3 §1, §5). Against a fake tier actor over real sockets. */
#include "sched_testkit.h"

typedef struct {
    const char *stat;
    uint64_t at_least;
} s_stat_want_t;

static bool s_stat_reaches(tk_t *t, void *arg)
{
    const s_stat_want_t *w = arg;
    uint64_t v = tk_stat(t, w->stat);
    return v != UINT64_MAX && v >= w->at_least;
}

/* DESIGN.md §8: a batch that cannot be placed entirely is refused NO_SPACE and
 * changes nothing; pinned blocks are never evicted; once unpinned, the policy
 * evicts and the victim's header is deleted on the tier. */
static void test_no_space_is_all_or_nothing_and_spares_pinned(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 4, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_begin(t, TK_INST, "r2", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 4), 0);
    uint8_t keys[6][16];
    tk_keys(0, 6, keys);
    assert_int_equal(tk_prepare_get(t, "r1", keys, 3), 0); /* pins 0 1 2 */
    uint64_t gtok = t->rep->body.prepare_get_rep.token.token_id;

    /* two newcomers, one evictable block: NO_SPACE, nothing changed */
    assert_int_equal(tk_prepare_put(t, "r2", keys + 4, 2), kvtier_StatusCode_STATUS_NO_SPACE);
    assert_non_null(strstr(t->msg, "3 pinned"));
    assert_int_equal(tk_prefix(t, keys, 4), 4);
    assert_int_equal(tk_stat(t, "evictions"), 0);
    assert_int_equal(tk_stat(t, "reserved"), 0);
    /* the failed prepare opened no window */
    assert_int_equal(tk_prepare_put(t, "r2", keys + 4, 1), 0);
    uint64_t ptok = t->rep->body.prepare_put_rep.token.token_id;
    assert_int_equal(tk_stat(t, "evictions"), 1);
    assert_false(tk_cached(t, 3)); /* the only unpinned block was the victim */
    assert_true(tk_cached(t, 0) && tk_cached(t, 1) && tk_cached(t, 2));
    uint64_t ck = 9;
    assert_int_equal(tk_complete_put(t, "r2", ptok, NULL, 0, &ck, 1), 0);
    assert_true(tk_cached(t, 4));
    /* everything pinned or serving-and-pinned: even one newcomer is refused */
    assert_int_equal(tk_prepare_get(t, "r2", keys + 4, 1), 0);
    assert_int_equal(tk_prepare_put(t, "r1", keys + 5, 1), kvtier_StatusCode_STATUS_NO_SPACE);
    assert_int_equal(tk_complete(t, kvtier_Envelope_complete_get_req_tag, "r1", gtok), 0);
    assert_int_equal(tk_prepare_put(t, "r1", keys + 5, 1), 0);
    assert_true(tk_cached(t, 4)); /* still pinned by r2 */
    /* the victim's header (key 3) was deleted on the tier */
    int64_t until = zclock_mono() + TK_POLL_MS;
    while (sched_fake_tier_count_key(e.ft, keys[3]) && zclock_mono() < until)
        zclock_sleep(5);
    assert_int_equal(sched_fake_tier_count_key(e.ft, keys[3]), 0);
    tk_env_stop(&e);
}

/* DESIGN.md §6: concurrent puts of one key share one reservation; the last
 * completion decides and success by any sharer commits. */
static void test_shared_reservation_of_two_requests(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 8, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "a", 0), 0);
    assert_int_equal(tk_begin(t, TK_INST, "b", 0), 0);
    uint8_t k[2][16];
    tk_keys(50, 2, k);
    bool no = false, yes = true;
    uint64_t ck = 77;

    /* a succeeds first, b fails last: committed */
    assert_int_equal(tk_prepare_put(t, "a", k, 1), 0);
    uint64_t ta = t->rep->body.prepare_put_rep.token.token_id;
    uint8_t pa[4096];
    memcpy(pa, t->arr->payload.data, t->arr->payload.len);
    bus_token_view_t va, vb;
    assert_int_equal(bus_token_decode(pa, t->arr->payload.len, &va, NULL, 0), 0);
    assert_int_equal(tk_prepare_put(t, "b", k, 1), 0);
    uint64_t tb = t->rep->body.prepare_put_rep.token.token_id;
    assert_int_equal(t->arr->keys.n, 1); /* shared, not skipped */
    uint8_t pb[4096];
    memcpy(pb, t->arr->payload.data, t->arr->payload.len);
    assert_int_equal(bus_token_decode(pb, t->arr->payload.len, &vb, NULL, 0), 0);
    bus_token_entry_t ea, eb;
    bus_token_entry_at(&va, 0, &ea);
    bus_token_entry_at(&vb, 0, &eb);
    assert_int_equal(ea.slot, eb.slot); /* one reservation */
    assert_int_equal(tk_stat(t, "reserved"), 1);
    assert_int_equal(tk_complete_put(t, "a", ta, &yes, 1, &ck, 1), 0);
    assert_int_equal(t->rep->body.complete_put_rep.committed, 1);
    assert_false(tk_cached(t, 50)); /* b still writing: not served yet */
    assert_int_equal(tk_complete_put(t, "b", tb, &no, 1, &ck, 1), 0);
    assert_int_equal(t->rep->body.complete_put_rep.failed, 1);
    assert_true(tk_cached(t, 50));

    /* a fails first, b succeeds last: committed */
    assert_int_equal(tk_prepare_put(t, "a", k + 1, 1), 0);
    ta = t->rep->body.prepare_put_rep.token.token_id;
    assert_int_equal(tk_prepare_put(t, "b", k + 1, 1), 0);
    tb = t->rep->body.prepare_put_rep.token.token_id;
    assert_int_equal(tk_complete_put(t, "a", ta, &no, 1, &ck, 1), 0);
    assert_false(tk_cached(t, 51));
    assert_int_equal(tk_complete_put(t, "b", tb, &yes, 1, &ck, 1), 0);
    assert_true(tk_cached(t, 51));
    tk_env_stop(&e);
}

/* DESIGN.md §6 TTL: a request's TTL is the deadline of the blocks it writes;
 * expired blocks stop hitting; touch extends a deadline. */
static void test_ttl_expiry_and_touch(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 8, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "short", 300), 0);
    assert_int_equal(tk_put(t, "short", 0, 2), 0);
    /* the tier's header carries a wall-clock deadline */
    sched_fake_slot_t h;
    bool found = false;
    for (uint64_t s = 0; s < 8 && !found; s++)
        found = sched_fake_tier_get(e.ft, s, &h) == 0 && h.serving;
    assert_true(found);
    assert_true(h.deadline_ms > (uint64_t)zclock_time());
    uint8_t k1[1][16];
    tk_key(1, k1[0]);
    assert_int_equal(tk_touch(t, k1, 1, 3600 * 1000), 0);
    assert_int_equal(t->rep->body.touch_rep.touched, 1);
    /* poll until key 0 expires; key 1 (touched) must still be there */
    int64_t until = zclock_mono() + TK_POLL_MS;
    while (tk_cached(t, 0) && zclock_mono() < until)
        zclock_sleep(10);
    assert_false(tk_cached(t, 0));
    assert_true(tk_cached(t, 1));
    assert_true(tk_stat(t, "expirations") >= 1);
    uint8_t k0[1][16];
    tk_key(0, k0[0]);
    assert_int_equal(tk_touch(t, k0, 1, 1000), 0);
    assert_int_equal(t->rep->body.touch_rep.touched, 0);
    /* a request without TTL writes blocks without deadline */
    assert_int_equal(tk_begin(t, TK_INST, "forever", 0), 0);
    assert_int_equal(tk_put(t, "forever", 5, 1), 0);
    assert_true(tk_cached(t, 5));
    tk_env_stop(&e);
}

static void s_short_leases(sched_config_t *cfg)
{
    cfg->pin_lease_ms = 150;
    cfg->write_grace_ms = 150;
    cfg->tick_ms = 10;
}

/* DESIGN.md §6: pins are leases; an unrenewed pin is released by the scheduler and
 * the late complete gets EXPIRED. */
static void test_pin_lease_lapses(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 8, s_short_leases);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 2), 0);
    uint8_t keys[2][16];
    tk_keys(0, 2, keys);
    assert_int_equal(tk_prepare_get(t, "r1", keys, 2), 0);
    uint64_t tok = t->rep->body.prepare_get_rep.token.token_id;
    assert_int_equal(t->rep->body.prepare_get_rep.token.lease_ms, 150);
    s_stat_want_t w = {"pins_lapsed", 2};
    assert_true(tk_poll(s_stat_reaches, t, &w));
    assert_int_equal(tk_stat(t, "pinned"), 0);
    assert_int_equal(tk_complete(t, kvtier_Envelope_complete_get_req_tag, "r1", tok),
                     kvtier_StatusCode_STATUS_EXPIRED);
    assert_non_null(strstr(t->msg, "lapsed"));
    /* the window is closed: a new prepare works, the blocks are removable */
    assert_int_equal(tk_remove(t, keys, 1), 0);
    assert_int_equal(t->rep->body.remove_rep.removed, 1);
    assert_int_equal(tk_prepare_get(t, "r1", keys + 1, 1), 0);
    tk_env_stop(&e);
}

/* DESIGN.md §6: an unfinished reservation is aborted after the write grace; the
 * slot is free again and nothing serves. */
static void test_write_grace_aborts_reservations(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 8, s_short_leases);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    uint8_t keys[3][16];
    tk_keys(0, 3, keys);
    assert_int_equal(tk_prepare_put(t, "r1", keys, 3), 0);
    uint64_t tok = t->rep->body.prepare_put_rep.token.token_id;
    s_stat_want_t w = {"reservations_lapsed", 3};
    assert_true(tk_poll(s_stat_reaches, t, &w));
    assert_int_equal(tk_stat(t, "reserved"), 0);
    assert_int_equal(tk_stat(t, "tier.host0.used"), 0);
    uint64_t ck[3] = {1, 2, 3};
    assert_int_equal(tk_complete_put(t, "r1", tok, NULL, 0, ck, 3),
                     kvtier_StatusCode_STATUS_EXPIRED);
    assert_int_equal(tk_prefix(t, keys, 3), 0);
    tk_env_stop(&e);
}

static void s_short_idle(sched_config_t *cfg)
{
    s_short_leases(cfg);
    cfg->request_idle_ms = 300;
}

/* Bounded resources: a request whose client died after request_begin (no window
 * open, no call) is ended after request_idle, so dead clients cannot fill
 * max_requests; a request in use is not, and a call on an ended one is
 * NOT_FOUND saying why. */
static void test_idle_request_is_ended(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 8, s_short_idle);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "dead", 0), 0);
    assert_int_equal(tk_begin(t, TK_INST, "live", 0), 0);
    assert_int_equal(tk_stat(t, "open_requests"), 2);
    /* "live" keeps calling (a put every few ms) while "dead" is forgotten */
    uint32_t i = 0;
    while (tk_stat(t, "requests_lapsed") < 1 && i < 2000) {
        assert_int_equal(tk_put(t, "live", i % 4, 1), 0);
        zclock_sleep(5);
        i++;
    }
    assert_int_equal(tk_stat(t, "requests_lapsed"), 1);
    assert_int_equal(tk_stat(t, "open_requests"), 1);
    uint8_t keys[1][16];
    tk_keys(9, 1, keys);
    assert_int_equal(tk_prepare_put(t, "dead", keys, 1), kvtier_StatusCode_STATUS_NOT_FOUND);
    assert_non_null(strstr(t->msg, "request_idle"));
    assert_int_equal(tk_prepare_put(t, "live", keys, 1), 0);
    tk_env_stop(&e);
}

static void s_fast_tier_timeout(sched_config_t *cfg)
{
    cfg->tier_timeout_ms = 200;
    cfg->tick_ms = 10;
}

/* Issue 3 §1: complete_put replies only after the tier's PutHeader reply; a tier
 * that never answers makes the keys fail and the client gets TIMEOUT. */
static void test_tier_timeout_fails_complete_put(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 8, s_fast_tier_timeout);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    uint8_t keys[2][16];
    tk_keys(0, 2, keys);
    assert_int_equal(tk_prepare_put(t, "r1", keys, 2), 0);
    uint64_t tok = t->rep->body.prepare_put_rep.token.token_id;
    sched_fake_tier_set_mute(e.ft, true);
    sched_fake_tier_stats_t fs0;
    sched_fake_tier_stats(e.ft, &fs0);
    uint64_t ck[2] = {1, 2};
    assert_int_equal(tk_complete_put(t, "r1", tok, NULL, 0, ck, 2),
                     kvtier_StatusCode_STATUS_TIMEOUT);
    assert_non_null(strstr(t->msg, "host0"));
    assert_int_equal(t->rep->body.complete_put_rep.failed, 2);
    /* A late PutHeader could still land on the freed slots: keyed deletes follow it
     * on the same connection (found in review). The muted tier reads (and drops)
     * every request: the PutHeader, then the DeleteSlots. */
    sched_fake_tier_stats_t fs1 = fs0;
    for (int i = 0; i < 1000 && fs1.requests < fs0.requests + 2; i++) {
        sched_fake_tier_stats(e.ft, &fs1);
        if (fs1.requests < fs0.requests + 2)
            zclock_sleep(5);
    }
    assert_true(fs1.requests >= fs0.requests + 2);
    sched_fake_tier_set_mute(e.ft, false);
    assert_int_equal(tk_prefix(t, keys, 2), 0);
    assert_int_equal(tk_stat(t, "reserved"), 0);
    assert_int_equal(tk_stat(t, "tier_timeouts"), 1);
    /* the window closed: the keys can be put again */
    assert_int_equal(tk_put(t, "r1", 0, 2), 0);
    assert_int_equal(tk_prefix(t, keys, 2), 2);
    tk_env_stop(&e);
}

static void s_one_pending_put(sched_config_t *cfg)
{
    cfg->max_pending_puts = 1;
}

/* Bounded deferred replies: a complete_put beyond max_pending_puts is refused
 * UNAVAILABLE and its window stays open for a retry. */
static void test_pending_puts_are_bounded(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 8, s_one_pending_put);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "a", 0), 0);
    assert_int_equal(tk_begin(t, TK_INST, "b", 0), 0);
    uint8_t keys[2][16];
    tk_keys(0, 2, keys);
    assert_int_equal(tk_prepare_put(t, "a", keys, 1), 0);
    uint64_t ta = t->rep->body.prepare_put_rep.token.token_id;
    assert_int_equal(tk_prepare_put(t, "b", keys + 1, 1), 0);
    uint64_t tb = t->rep->body.prepare_put_rep.token.token_id;
    sched_fake_tier_set_mute(e.ft, true);
    /* a's complete waits on the muted tier: send it without waiting */
    kvtier_CompletePutRequest *r =
        &tk_req(t, kvtier_Envelope_complete_put_req_tag)->body.complete_put_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", TK_INST);
    snprintf(r->request_id, sizeof r->request_id, "a");
    r->token_id = ta;
    uint64_t ck = 1;
    bus_arrays_t ra = {.checksums = {.v = &ck, .n = 1, .cap = 1}};
    zsock_t *d = zsock_new_dealer(t->ep);
    zmsg_t *m = NULL;
    kvtier_Status st;
    t->req->corr_id = 99;
    assert_int_equal(bus_msg_encode(t->req, &ra, NULL, 0, &m, &st), 0);
    assert_int_equal(zmsg_send(&m, d), 0);
    /* poll until a's complete is pending */
    s_stat_want_t w = {"pending_puts", 1};
    assert_true(tk_poll(s_stat_reaches, t, &w));
    assert_int_equal(tk_complete_put(t, "b", tb, NULL, 0, &ck, 1),
                     kvtier_StatusCode_STATUS_UNAVAILABLE);
    assert_non_null(strstr(t->msg, "max_pending_puts"));
    sched_fake_tier_set_mute(e.ft, false);
    /* a's reply arrives (TIMEOUT from the tier deadline); then b's retry succeeds */
    zsock_set_rcvtimeo(d, TK_CALL_MS);
    m = zmsg_recv(d);
    assert_non_null(m);
    zmsg_destroy(&m);
    zsock_destroy(&d);
    assert_int_equal(tk_complete_put(t, "b", tb, NULL, 0, &ck, 1), 0);
    assert_int_equal(t->rep->body.complete_put_rep.committed, 1);
    tk_env_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_space_is_all_or_nothing_and_spares_pinned),
        cmocka_unit_test(test_shared_reservation_of_two_requests),
        cmocka_unit_test(test_ttl_expiry_and_touch),
        cmocka_unit_test(test_pin_lease_lapses),
        cmocka_unit_test(test_write_grace_aborts_reservations),
        cmocka_unit_test(test_idle_request_is_ended),
        cmocka_unit_test(test_tier_timeout_fails_complete_put),
        cmocka_unit_test(test_pending_puts_are_bounded),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
