/* test_gc.c — the gc actor (actors/gc.h; DESIGN.md §6 "GC", issue 4 §5) against a
 * real scheduler and a real host tier actor (POSIX shm), over real sockets: a
 * SERVING location whose slot was deleted behind the scheduler's back is dropped,
 * present blocks are kept, and a tier actor that does not answer makes the gc drop
 * nothing. Conditions are polled with a deadline; no timing thresholds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gc.h"
#include "sched_testkit.h"
#include "tier_actor.h"

#define CAP 16
#define SLOT 4096
#define N_BLOCKS 6

static int s_seq;

typedef struct {
    zactor_t *tier;
    char tier_ep[256];
    bus_client_t *tc; /* test -> tier actor */
    tk_t *t;
    zactor_t *gc;
} fx_t;

/* A host tier actor (fresh shm segment) bound at endpoint; NULL if the bind fails. */
static zactor_t *s_tier_new(const char *endpoint)
{
    tier_actor_config_t tc;
    memset(&tc, 0, sizeof tc);
    int seq = s_seq++;
    snprintf(tc.tier.name, sizeof tc.tier.name, "host0");
    snprintf(tc.tier.kind, sizeof tc.tier.kind, "host");
    snprintf(tc.tier.path, sizeof tc.tier.path, "/kvt-gc-%d-%d", (int)getpid(), seq);
    tc.tier.capacity = CAP;
    tc.tier.slot_size = SLOT;
    tc.tier_id = 1;
    tc.endpoint = endpoint;
    return tier_actor_new(&tc);
}

static void s_start_at(fx_t *fx, uint32_t page, const char *endpoint)
{
    memset(fx, 0, sizeof *fx);
    fx->tier = s_tier_new(endpoint);
    assert_non_null(fx->tier);
    assert_int_equal(tier_actor_endpoint(fx->tier, fx->tier_ep, sizeof fx->tier_ep), 0);
    bus_client_config_t cc = {.name = "test", .default_timeout_ms = TK_CALL_MS};
    fx->tc = bus_client_new(fx->tier_ep, &cc);
    assert_non_null(fx->tc);

    sched_config_t cfg;
    tk_config(&cfg, CAP, SLOT);
    fx->t = tk_new(&cfg);
    tk_tier_up(fx->t, 1, fx->tier_ep, tier_actor_epoch(fx->tier), CAP, SLOT);
    assert_int_equal(tk_register(fx->t, TK_INST, SLOT), 0);
    assert_int_equal(tk_begin(fx->t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(fx->t, "r1", 0, N_BLOCKS), 0);
    for (uint32_t i = 0; i < N_BLOCKS; i++)
        assert_true(tk_cached(fx->t, i));

    gc_config_t gc;
    memset(&gc, 0, sizeof gc);
    assert_int_equal(
        sched_actor_internal_endpoint(fx->t->sched, gc.sched_endpoint, sizeof gc.sched_endpoint),
        0);
    gc.interval_ms = 10;
    gc.page = page;
    gc.probe_timeout_ms = 300;
    fx->gc = gc_actor_new(&gc);
    assert_non_null(fx->gc);
}

static void s_start(fx_t *fx, uint32_t page)
{
    s_start_at(fx, page, "tcp://127.0.0.1:*");
}

static void s_stop(fx_t *fx)
{
    zactor_destroy(&fx->gc);
    tk_destroy(&fx->t);
    bus_client_destroy(&fx->tc);
    zactor_destroy(&fx->tier);
}

/* The slot that holds key i on the tier actor (its own inventory). */
static uint64_t s_slot_of(fx_t *fx, uint32_t i)
{
    uint8_t key[16];
    tk_key(i, key);
    kvtier_Envelope *req = calloc(1, sizeof *req), *rep = calloc(1, sizeof *rep);
    assert_true(req && rep);
    bus_env_init(req, kvtier_Envelope_inventory_req_tag, "test");
    req->body.inventory_req.tier_id = 1;
    req->body.inventory_req.max_entries = 128;
    kvtier_Status st;
    assert_int_equal(bus_client_call(fx->tc, req, NULL, NULL, 0, TK_CALL_MS, rep, NULL, NULL, &st),
                     0);
    uint64_t slot = UINT64_MAX;
    const kvtier_InventoryReply *ir = &rep->body.inventory_rep;
    for (pb_size_t e = 0; e < ir->entries_count; e++)
        if (memcmp(ir->entries[e].key, key, 16) == 0)
            slot = ir->entries[e].slot;
    free(req);
    free(rep);
    assert_true(slot != UINT64_MAX);
    return slot;
}

/* Deletes key i's slot on the tier actor directly (behind the scheduler's back). */
static void s_delete_behind(fx_t *fx, uint32_t i)
{
    uint64_t slot = s_slot_of(fx, i);
    uint8_t key[1][16];
    tk_key(i, key[0]);
    kvtier_Envelope *req = calloc(1, sizeof *req), *rep = calloc(1, sizeof *rep);
    assert_true(req && rep);
    bus_env_init(req, kvtier_Envelope_delete_slots_req_tag, "test");
    req->body.delete_slots_req.tier_id = 1;
    bus_arrays_t arr = {.slots = {.v = &slot, .n = 1, .cap = 1},
                        .keys = {.keys = key, .n = 1, .cap = 1}};
    kvtier_Status st;
    assert_int_equal(bus_client_call(fx->tc, req, &arr, NULL, 0, TK_CALL_MS, rep, NULL, NULL, &st),
                     0);
    assert_int_equal(rep->body.delete_slots_rep.deleted, 1);
    free(req);
    free(rep);
}

static gc_stats_t s_stats(fx_t *fx)
{
    gc_stats_t st;
    assert_int_equal(gc_actor_stats(fx->gc, &st), 0);
    return st;
}

static bool s_not_cached(tk_t *t, void *arg)
{
    return !tk_cached(t, *(uint32_t *)arg);
}

typedef struct {
    fx_t *fx;
    uint64_t passes, probe_failures, epoch_mismatches;
} s_want_t;

static bool s_progress(tk_t *t, void *arg)
{
    (void)t;
    s_want_t *w = arg;
    gc_stats_t st = s_stats(w->fx);
    return st.passes >= w->passes && st.probe_failures >= w->probe_failures &&
           st.epoch_mismatches >= w->epoch_mismatches;
}

/* Issue 4 §5: a SERVING location the tier actor cannot confirm is dropped; the
 * blocks the tier still holds are kept (several rounds, paged: page 2 of 6). */
static void test_gc_drops_location_deleted_behind_scheduler_and_keeps_others(void **state)
{
    (void)state;
    fx_t fx;
    s_start(&fx, 2);
    s_delete_behind(&fx, 3);
    uint32_t gone = 3;
    assert_true(tk_poll(s_not_cached, fx.t, &gone));
    /* two more full passes over the index: nothing else goes */
    s_want_t w = {&fx, s_stats(&fx).passes + 2, 0, 0};
    assert_true(tk_poll(s_progress, fx.t, &w));
    for (uint32_t i = 0; i < N_BLOCKS; i++)
        assert_int_equal(tk_cached(fx.t, i), i != gone);
    gc_stats_t st = s_stats(&fx);
    assert_int_equal(st.dropped, 1);
    assert_int_equal(st.missing, 1);
    assert_int_equal(st.probe_failures, 0);
    assert_int_equal(tk_stat(fx.t, "gc_dropped"), 1);
    s_stop(&fx);
}

/* Probes without an answer from the scanned incarnation (timeouts; or, when another
 * process reuses the freed port meanwhile, answers from another actor). */
static bool s_unanswered(tk_t *t, void *arg)
{
    (void)t;
    gc_stats_t st = s_stats(arg);
    return st.probe_failures + st.epoch_mismatches >= 3 * N_BLOCKS;
}

/* Issue 4 §5 / DESIGN §6: probe failure is not "missing" — a tier actor that does
 * not answer makes the gc drop nothing. */
static void test_gc_dead_tier_actor_drops_nothing(void **state)
{
    (void)state;
    fx_t fx;
    s_start(&fx, 64);
    bus_client_destroy(&fx.tc);
    zactor_destroy(&fx.tier); /* gone, but the scheduler was not told */
    assert_true(tk_poll(s_unanswered, fx.t, &fx));
    for (uint32_t i = 0; i < N_BLOCKS; i++)
        assert_true(tk_cached(fx.t, i));
    gc_stats_t st = s_stats(&fx);
    assert_int_equal(st.dropped, 0);
    assert_int_equal(st.missing, 0);
    assert_int_equal(tk_stat(fx.t, "gc_dropped"), 0);
    s_stop(&fx);
}

static bool s_mismatched(tk_t *t, void *arg)
{
    (void)t;
    fx_t *fx = arg;
    return s_stats(fx).epoch_mismatches >= 3 * N_BLOCKS;
}

/* Issue 4 §5 (only a definite "not present" drops): another tier actor bound at
 * the same endpoint (a restart the scheduler was not told of yet) answers the
 * probes for a different incarnation: nothing is dropped. */
static void test_gc_other_incarnation_at_same_endpoint_drops_nothing(void **state)
{
    (void)state;
    char dir[] = "/tmp/kvt-gc-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char ep[128];
    snprintf(ep, sizeof ep, "ipc://%s/tier.ipc", dir);
    fx_t fx;
    s_start_at(&fx, 64, ep);
    zactor_destroy(&fx.tier);
    int64_t until = zclock_mono() + TK_POLL_MS;
    while (!(fx.tier = s_tier_new(ep)) && zclock_mono() < until)
        zclock_sleep(5); /* the old socket releases the path asynchronously */
    assert_non_null(fx.tier);
    assert_true(tk_poll(s_mismatched, fx.t, &fx));
    for (uint32_t i = 0; i < N_BLOCKS; i++)
        assert_true(tk_cached(fx.t, i));
    gc_stats_t st = s_stats(&fx);
    assert_int_equal(st.dropped, 0);
    assert_int_equal(st.missing, 0);
    s_stop(&fx);
    char path[160];
    snprintf(path, sizeof path, "%s/tier.ipc", dir);
    unlink(path);
    rmdir(dir);
}

/* One GcScan on the internal plane from CURSOR; the reply is in t->rep. */
static void s_gc_scan(tk_t *t, uint64_t cursor)
{
    char iep[256];
    assert_int_equal(sched_actor_internal_endpoint(t->sched, iep, sizeof iep), 0);
    bus_client_config_t cc = {.name = "test", .default_timeout_ms = TK_CALL_MS};
    bus_client_t *ic = bus_client_new(iep, &cc);
    assert_non_null(ic);
    kvtier_Envelope *e = tk_req(t, kvtier_Envelope_gc_scan_req_tag);
    e->body.gc_scan_req.max_entries = 8;
    e->body.gc_scan_req.cursor = cursor;
    kvtier_Status st;
    assert_int_equal(
        bus_client_call(ic, t->req, NULL, NULL, 0, TK_CALL_MS, t->rep, NULL, NULL, &st), 0);
    bus_client_destroy(&ic);
}

/* Issue 12 §4: a load that failed (CompleteGet success false: a tier that found
 * the bytes damaged drops the block) makes the next GcScan hand that location to
 * the gc before anything its cursor would reach, once; the block then leaves the
 * index within one gc round instead of whenever the scan comes by. */
static void test_failed_load_is_probed_first(void **state)
{
    (void)state;
    fx_t fx;
    s_start(&fx, 2);
    zactor_destroy(&fx.gc); /* this test plays the gc itself */
    uint8_t key[1][16];
    tk_key(3, key[0]);
    assert_int_equal(tk_prepare_get(fx.t, "r1", key, 1), 0);
    uint64_t token = fx.t->rep->body.prepare_get_rep.token.token_id;
    kvtier_CompleteGetRequest *r =
        &tk_req(fx.t, kvtier_Envelope_complete_get_req_tag)->body.complete_get_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", TK_INST);
    snprintf(r->request_id, sizeof r->request_id, "r1");
    r->token_id = token;
    bool failed[1] = {false};
    bus_arrays_t ra = {.mask = {.v = failed, .n = 1, .cap = 1}};
    assert_int_equal(tk_call(fx.t, &ra), 0);
    /* a cursor past every tier: the scan itself finds nothing, the suspect comes */
    s_gc_scan(fx.t, (uint64_t)1 << 32);
    const kvtier_GcScanReply *g = &fx.t->rep->body.gc_scan_rep;
    assert_int_equal(g->to_probe_count, 1);
    assert_memory_equal(g->to_probe[0].key, key[0], 16);
    assert_int_equal(g->to_probe[0].slot, s_slot_of(&fx, 3));
    assert_int_equal(g->to_probe_epochs_count, 1);
    s_gc_scan(fx.t, (uint64_t)1 << 32); /* handed over once */
    assert_int_equal(fx.t->rep->body.gc_scan_rep.to_probe_count, 0);
    assert_int_equal(tk_stat(fx.t, "gc_suspects"), 1);
    s_stop(&fx);
}

/* The internal plane is not served on the meta endpoint (clients cannot drop
 * locations); on the internal endpoint a GcDrop needs one epoch per location. */
static void test_gc_requests_only_on_internal_plane(void **state)
{
    (void)state;
    sched_config_t cfg;
    tk_config(&cfg, CAP, SLOT);
    tk_t *t = tk_new(&cfg);
    kvtier_Envelope *e = tk_req(t, kvtier_Envelope_gc_scan_req_tag);
    e->body.gc_scan_req.max_entries = 8;
    assert_int_equal(tk_call(t, NULL), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);

    char iep[256];
    assert_int_equal(sched_actor_internal_endpoint(t->sched, iep, sizeof iep), 0);
    bus_client_config_t cc = {.name = "test", .default_timeout_ms = TK_CALL_MS};
    bus_client_t *ic = bus_client_new(iep, &cc);
    assert_non_null(ic);
    kvtier_Status st;
    assert_int_equal(
        bus_client_call(ic, t->req, NULL, NULL, 0, TK_CALL_MS, t->rep, NULL, NULL, &st), 0);
    assert_true(t->rep->body.gc_scan_rep.wrapped); /* no tier up: nothing to scan */
    assert_int_equal(t->rep->body.gc_scan_rep.to_probe_count, 0);

    e = tk_req(t, kvtier_Envelope_gc_drop_req_tag);
    e->body.gc_drop_req.missing_count = 1;
    e->body.gc_drop_req.missing[0].tier_id = 1;
    assert_true(bus_client_call(ic, t->req, NULL, NULL, 0, TK_CALL_MS, t->rep, NULL, NULL, &st) <
                0);
    assert_int_equal(st.code, kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    bus_client_destroy(&ic);
    tk_destroy(&t);
}

/* Issue "actor start": a start the gc refuses (page above GC_MAX_PAGE, no scheduler
 * endpoint) is NULL from gc_actor_new, not a live actor that never runs. */
static void test_gc_refused_start_is_null(void **state)
{
    (void)state;
    gc_config_t gc;
    memset(&gc, 0, sizeof gc);
    snprintf(gc.sched_endpoint, sizeof gc.sched_endpoint, "inproc://nowhere");
    gc.page = GC_MAX_PAGE + 1;
    assert_null(gc_actor_new(&gc));
    gc.page = 0;
    gc.sched_endpoint[0] = '\0';
    assert_null(gc_actor_new(&gc));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gc_drops_location_deleted_behind_scheduler_and_keeps_others),
        cmocka_unit_test(test_gc_dead_tier_actor_drops_nothing),
        cmocka_unit_test(test_gc_other_incarnation_at_same_endpoint_drops_nothing),
        cmocka_unit_test(test_gc_requests_only_on_internal_plane),
        cmocka_unit_test(test_failed_load_is_probed_first),
        cmocka_unit_test(test_gc_refused_start_is_null),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
