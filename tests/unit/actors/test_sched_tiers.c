/* test_sched_tiers.c — tier membership in the scheduler actor (DESIGN.md §4;
 * issue 3 §1, §5): a tier going DOWN drops its locations and makes puts on it
 * UNAVAILABLE, fails what waits on it; a tier coming UP with a new epoch is
 * re-inventoried from scratch; inventory adoption (unregistered instances,
 * expired entries); and the whole path with a real tier actor (actors/tier_actor.h):
 * the headers the scheduler writes are what a new scheduler rebuilds its index from. */
#include <unistd.h>

#include "sched_testkit.h"
#include "tier_actor.h"

static void s_preload(sched_fake_tier_t *ft, uint64_t slot, uint32_t key_i, const char *inst,
                      uint64_t deadline_ms)
{
    sched_fake_slot_t h;
    memset(&h, 0, sizeof h);
    h.serving = true;
    tk_key(key_i, h.key);
    snprintf(h.instance_id, sizeof h.instance_id, "%s", inst);
    h.size = 4096;
    h.checksum = 1000 + key_i;
    h.deadline_ms = deadline_ms;
    assert_int_equal(sched_fake_tier_set(ft, slot, &h), 0);
}

/* DESIGN.md §4: a tier whose actor is gone loses its locations (host memory is
 * gone); puts on it are UNAVAILABLE with the tier named; lookups miss. */
static void test_tier_down_drops_locations_and_refuses_puts(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 8, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 3), 0);
    uint8_t keys[3][16];
    tk_keys(0, 3, keys);
    assert_int_equal(tk_prepare_get(t, "r1", keys, 2), 0); /* pins on the tier */
    uint64_t gtok = t->rep->body.prepare_get_rep.token.token_id;
    tk_tier_down(t, 1);
    assert_int_equal(tk_prefix(t, keys, 3), 0);
    assert_int_equal(tk_stat(t, "blocks"), 0);
    assert_int_equal(tk_stat(t, "dropped_by_tier"), 3);
    assert_int_equal(tk_put(t, "r1", 5, 1), kvtier_StatusCode_STATUS_UNAVAILABLE);
    assert_non_null(strstr(t->msg, "host0 is down"));
    assert_int_equal(tk_prepare_get(t, "r1", keys, 1), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    /* the window opened before still closes, releasing nothing stale */
    assert_int_equal(tk_complete(t, kvtier_Envelope_complete_get_req_tag, "r1", gtok), 0);
    assert_int_equal(t->rep->body.complete_get_rep.released, 0);
    assert_int_equal(tk_prepare_get(t, "r1", keys, 1), kvtier_StatusCode_STATUS_NOT_FOUND);
    assert_non_null(strstr(t->msg, "tier is down"));
    /* UP again (same actor, same epoch): its inventory brings the blocks back */
    tk_tier_up(t, 1, sched_fake_tier_endpoint(e.ft), 1, 8, 4096);
    assert_int_equal(tk_prefix(t, keys, 3), 3);
    tk_env_stop(&e);
}

static void s_fast_tier_timeout(sched_config_t *cfg)
{
    cfg->tier_timeout_ms = 60000; /* only DOWN may end the wait */
}

/* DOWN fails the tier's pending requests: a complete_put waiting for its headers
 * gets UNAVAILABLE and its keys fail. */
static void test_tier_down_fails_pending_puts(void **state)
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
    kvtier_CompletePutRequest *r =
        &tk_req(t, kvtier_Envelope_complete_put_req_tag)->body.complete_put_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", TK_INST);
    snprintf(r->request_id, sizeof r->request_id, "r1");
    r->token_id = tok;
    uint64_t ck[2] = {1, 2};
    bus_arrays_t ra = {.checksums = {.v = ck, .n = 2, .cap = 2}};
    zsock_t *d = zsock_new_dealer(t->ep);
    zmsg_t *m = NULL;
    kvtier_Status st;
    t->req->corr_id = 5;
    assert_int_equal(bus_msg_encode(t->req, &ra, NULL, 0, &m, &st), 0);
    assert_int_equal(zmsg_send(&m, d), 0);
    while (tk_stat(t, "pending_puts") != 1)
        zclock_sleep(5);
    tk_tier_down(t, 1);
    zsock_set_rcvtimeo(d, TK_CALL_MS);
    m = zmsg_recv(d);
    assert_non_null(m);
    kvtier_Envelope *rep = calloc(1, sizeof *rep);
    assert_int_equal(bus_msg_decode(m, BUS_DIR_REPLY, rep, NULL, &st), 0);
    assert_int_equal(rep->corr_id, 5);
    assert_int_equal(rep->status.code, kvtier_StatusCode_STATUS_UNAVAILABLE);
    assert_int_equal(rep->body.complete_put_rep.failed, 2);
    free(rep);
    zmsg_destroy(&m);
    zsock_destroy(&d);
    assert_int_equal(tk_stat(t, "reserved"), 0);
    tk_env_stop(&e);
}

/* DESIGN.md §4: UP with another epoch means the memory behind the old locations
 * is gone: they are dropped and the index is rebuilt from the new inventory. */
static void test_new_epoch_drops_and_reinventories(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 8, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 2), 0);
    assert_true(tk_cached(t, 0) && tk_cached(t, 1));
    /* the actor restarted: its memory now holds only key 9 in slot 5 */
    sched_fake_tier_clear(e.ft);
    s_preload(e.ft, 5, 9, TK_INST, 0);
    tk_tier_up(t, 1, sched_fake_tier_endpoint(e.ft), 2, 8, 4096);
    assert_false(tk_cached(t, 0));
    assert_false(tk_cached(t, 1));
    assert_true(tk_cached(t, 9));
    assert_int_equal(tk_stat(t, "adopted"), 1);
    /* the adopted block serves from its slot with its recorded size */
    assert_int_equal(tk_begin(t, TK_INST, "r2", 0), 0);
    uint8_t k9[1][16];
    tk_key(9, k9[0]);
    assert_int_equal(tk_prepare_get(t, "r2", k9, 1), 0);
    uint8_t payload[1024];
    memcpy(payload, t->arr->payload.data, t->arr->payload.len);
    bus_token_view_t v;
    assert_int_equal(bus_token_decode(payload, t->arr->payload.len, &v, NULL, 0), 0);
    bus_token_entry_t en;
    bus_token_entry_at(&v, 0, &en);
    assert_int_equal(en.slot, 5);
    assert_int_equal(en.size, 4096);
    assert_int_equal(v.tiers[0].epoch, 2);
    /* the epoch fence travels with every DeleteSlots / PutHeader */
    assert_int_equal(tk_put(t, "r1", 20, 1), 0);
    sched_fake_tier_stats_t fs;
    sched_fake_tier_stats(e.ft, &fs);
    assert_int_equal(fs.last_epoch, 2);
    tk_env_stop(&e);
}

/* Inventory entries of instances not registered yet are adopted under their
 * slot-header number ("#xxxxxxxx") and serve once the instance registers;
 * expired entries are not adopted and their headers are deleted. */
static void test_inventory_adoption_rules(void **state)
{
    (void)state;
    sched_config_t cfg;
    tk_config(&cfg, 16, 4096);
    sched_fake_tier_t *ft = sched_fake_tier_new(1, 16);
    assert_non_null(ft);
    char hashed[16];
    snprintf(hashed, sizeof hashed, "#%08x", sched_instance_number("later"));
    for (uint32_t i = 0; i < 3; i++)
        s_preload(ft, 10 + i, 40 + i, hashed, 0);
    s_preload(ft, 2, 60, TK_INST, (uint64_t)zclock_time() - 1000);        /* expired */
    s_preload(ft, 3, 61, TK_INST, (uint64_t)zclock_time() + 3600 * 1000); /* live */
    tk_t *t = tk_new(&cfg);
    tk_tier_up(t, 1, sched_fake_tier_endpoint(ft), 3, 16, 4096);
    assert_int_equal(tk_register(t, TK_INST, 4096), 0);
    assert_false(tk_cached(t, 60));
    assert_true(tk_cached(t, 61));
    int64_t until = zclock_mono() + TK_POLL_MS;
    sched_fake_slot_t h;
    do
        assert_int_equal(sched_fake_tier_get(ft, 2, &h), 0);
    while (h.serving && zclock_mono() < until && (zclock_sleep(5), 1));
    assert_false(h.serving);
    assert_int_equal(tk_register(t, "later", 4096), 0);
    uint8_t keys[3][16];
    tk_keys(40, 3, keys);
    assert_int_equal(tk_lookup(t, "later", NULL, kvtier_LookupMode_LOOKUP_MODE_PREFIX, 0, keys, 3),
                     0);
    assert_int_equal(t->rep->body.lookup_rep.hit_count, 3);
    /* keys of another instance never match */
    assert_int_equal(tk_prefix(t, keys, 3), 0);
    tk_destroy(&t);
    sched_fake_tier_destroy(&ft);
}

/* Membership changes naming an unknown tier or the wrong name are ignored. */
static void test_bad_membership_is_ignored(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 8, NULL);
    kvtier_TierInfo info;
    memset(&info, 0, sizeof info);
    info.tier_id = 9;
    snprintf(info.endpoint, sizeof info.endpoint, "tcp://127.0.0.1:1");
    info.capacity_slots = 8;
    info.slot_bytes = 4096;
    info.epoch = 99;
    assert_int_equal(sched_actor_tier_change(e.t->sched, true, &info), 0);
    info.tier_id = 1;
    snprintf(info.name, sizeof info.name, "other");
    assert_int_equal(sched_actor_tier_change(e.t->sched, true, &info), 0);
    snprintf(info.name, sizeof info.name, "host0");
    info.capacity_slots = 0;
    assert_int_equal(sched_actor_tier_change(e.t->sched, true, &info), 0);
    zstr_send(e.t->sched, "NOT-A-COMMAND");
    const kvtier_TierInfo *ti = tk_tier(e.t, 1);
    assert_true(ti->up);
    assert_int_equal(ti->epoch, 1);
    tk_env_stop(&e);
}

/* With a real tier actor: the scheduler's PutHeader lands in the actor's slot
 * headers, and a new scheduler (a new leader) rebuilds its index from the actor's
 * inventory (DESIGN.md §4 recovery rule). */
static void test_real_tier_actor_headers_rebuild_a_new_scheduler(void **state)
{
    (void)state;
    tier_actor_config_t tc;
    memset(&tc, 0, sizeof tc);
    snprintf(tc.tier.name, sizeof tc.tier.name, "host0");
    snprintf(tc.tier.kind, sizeof tc.tier.kind, "host");
    snprintf(tc.tier.path, sizeof tc.tier.path, "/kvt-schedtest-%d", (int)getpid());
    tc.tier.capacity = 32;
    tc.tier.slot_size = 4096;
    tc.tier_id = 1;
    tc.endpoint = "tcp://127.0.0.1:*";
    zactor_t *ta = tier_actor_new(&tc);
    assert_non_null(ta);
    char tep[256];
    assert_int_equal(tier_actor_endpoint(ta, tep, sizeof tep), 0);
    uint64_t epoch = tier_actor_epoch(ta);
    assert_true(epoch != 0);

    sched_config_t cfg;
    tk_config(&cfg, 32, 4096);
    tk_t *t = tk_new(&cfg);
    tk_tier_up(t, 1, tep, epoch, 32, 4096);
    assert_int_equal(tk_register(t, TK_INST, 4096), 0);
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 5), 0);
    assert_int_equal(t->rep->body.complete_put_rep.committed, 5);
    tier_actor_stats_t ts;
    assert_int_equal(tier_actor_stats(ta, &ts), 0);
    assert_int_equal(ts.headers_put, 5);
    tk_destroy(&t);

    t = tk_new(&cfg);
    tk_tier_up(t, 1, tep, epoch, 32, 4096);
    assert_int_equal(tk_register(t, TK_INST, 4096), 0);
    uint8_t keys[6][16];
    tk_keys(0, 6, keys);
    assert_int_equal(tk_prefix(t, keys, 6), 5);
    assert_int_equal(tk_stat(t, "adopted"), 5);
    /* removing deletes the header on the actor */
    assert_int_equal(tk_remove(t, keys, 1), 0);
    assert_int_equal(t->rep->body.remove_rep.removed, 1);
    int64_t until = zclock_mono() + TK_POLL_MS;
    do
        assert_int_equal(tier_actor_stats(ta, &ts), 0);
    while (ts.slots_deleted < 1 && zclock_mono() < until && (zclock_sleep(5), 1));
    assert_int_equal(ts.slots_deleted, 1);
    /* the actor refuses headers for another epoch: complete_put fails cleanly */
    tk_tier_up(t, 1, tep, epoch + 1, 32, 4096);
    assert_int_equal(tk_begin(t, TK_INST, "r2", 0), 0);
    assert_int_equal(tk_put(t, "r2", 100, 1), kvtier_StatusCode_STATUS_UNAVAILABLE);
    assert_non_null(strstr(t->msg, "epoch"));
    assert_false(tk_cached(t, 100));
    tk_destroy(&t);
    zactor_destroy(&ta);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tier_down_drops_locations_and_refuses_puts),
        cmocka_unit_test(test_tier_down_fails_pending_puts),
        cmocka_unit_test(test_new_epoch_drops_and_reinventories),
        cmocka_unit_test(test_inventory_adoption_rules),
        cmocka_unit_test(test_bad_membership_is_ignored),
        cmocka_unit_test(test_real_tier_actor_headers_rebuild_a_new_scheduler),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
