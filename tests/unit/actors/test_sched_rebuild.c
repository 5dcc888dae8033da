/* test_sched_rebuild.c — the index rebuild from tier inventories (issue 13 §5,
 * docs/PROTOCOL.md "Inventory"): windows of inventory_page slots read as pages of
 * records, several in flight per tier, tiers in parallel; what a production user
 * expects of it: every block adopted exactly once (also from an actor that predates
 * records), bad pages refused and retried, a partial index when a tier stops
 * answering, nothing stale kept when it dies or restarts mid-rebuild, and the
 * changes a tier makes while it is read land as each window saw them. The tiers are
 * the controllable fake tier actor (tests/support/sched_fake_tier.h, real ZeroMQ
 * sockets) and real tier actors on the in-memory backend. */
#include <unistd.h>

#include "sched_testkit.h"
#include "tier_actor.h"
#include "tier_fake.h"

#define CAPACITY 1000u
#define PAGE 100u /* ten windows */
#define EPOCH 5u
#define TRIES 5u /* SCHED_INV_TRIES (actors/sched_tiers.h): a window failing in a row */

/* Key i: distinct for every i (tk_key repeats every 256 below 65,536). */
static void s_key(uint32_t i, uint8_t out[16])
{
    tk_key(i, out);
    memcpy(out, &i, sizeof i);
}

static void s_serve(sched_fake_tier_t *ft, uint64_t slot, uint32_t key_i)
{
    sched_fake_slot_t h;
    memset(&h, 0, sizeof h);
    h.serving = true;
    s_key(key_i, h.key);
    snprintf(h.instance_id, sizeof h.instance_id, "%s", TK_INST);
    h.size = 4096;
    h.checksum = 7000 + key_i;
    assert_int_equal(sched_fake_tier_set(ft, slot, &h), 0);
}

/* A fake tier of CAPACITY slots, slot i holding key i (holes: every `hole`-th slot
 * empty; 0: none), answering with `inv`. */
static sched_fake_tier_t *s_fake(uint32_t hole, const sched_fake_inv_t *inv)
{
    sched_fake_tier_t *ft = sched_fake_tier_new(1, CAPACITY);
    assert_non_null(ft);
    for (uint32_t i = 0; i < CAPACITY; i++)
        if (!hole || i % hole != 0)
            s_serve(ft, i, i);
    sched_fake_inv_t def = {.epoch = EPOCH};
    sched_fake_tier_set_inventory(ft, inv ? inv : &def);
    return ft;
}

static tk_t *s_sched(uint32_t page, uint32_t in_flight, uint64_t tier_timeout_ms)
{
    sched_config_t cfg;
    tk_config(&cfg, CAPACITY, 4096);
    cfg.inventory_page = page;
    cfg.inventory_in_flight = in_flight;
    cfg.tick_ms = 10; /* failed pages are retried from the tick */
    if (tier_timeout_ms)
        cfg.tier_timeout_ms = tier_timeout_ms;
    tk_t *t = tk_new(&cfg);
    return t;
}

/* Keys first..first+n-1 the index holds (per-key lookup, at most 1000). */
static uint32_t s_hits(tk_t *t, uint32_t first, uint32_t n)
{
    uint8_t(*keys)[16] = calloc(n, 16);
    assert_non_null(keys);
    for (uint32_t i = 0; i < n; i++)
        s_key(first + i, keys[i]);
    assert_int_equal(tk_lookup(t, TK_INST, NULL, kvtier_LookupMode_LOOKUP_MODE_PER_KEY, 0, keys, n),
                     0);
    free(keys);
    return t->rep->body.lookup_rep.hit_count;
}

static bool s_cached(tk_t *t, uint32_t i)
{
    return s_hits(t, i, 1) == 1;
}

static uint64_t s_used(tk_t *t)
{
    const kvtier_TierInfo *ti = tk_tier(t, 1);
    assert_non_null(ti);
    return ti->used_slots;
}

/* Windows of 100 slots, three pages in flight: every block adopted once, none
 * deleted as a "second copy", pages of records sized as configured. */
static void test_windows_in_flight_adopt_every_block_once(void **state)
{
    (void)state;
    sched_fake_tier_t *ft = s_fake(7, NULL);
    tk_t *t = s_sched(PAGE, 3, 0);
    tk_tier_up(t, 1, sched_fake_tier_endpoint(ft), EPOCH, CAPACITY, 4096);
    assert_int_equal(tk_register(t, TK_INST, 4096), 0);
    uint32_t want = CAPACITY - (CAPACITY + 6) / 7;
    assert_int_equal(s_used(t), want);
    assert_int_equal(tk_stat(t, "adopted"), want);
    assert_int_equal(s_hits(t, 0, CAPACITY), want);
    sched_fake_tier_stats_t fs;
    sched_fake_tier_stats(ft, &fs);
    assert_int_equal(fs.slots_deleted, 0);
    assert_int_equal(fs.inventories, CAPACITY / PAGE); /* one page a window */
    uint64_t rec_pages, max;
    sched_fake_tier_inventory_asks(ft, &rec_pages, &max);
    assert_int_equal(rec_pages, CAPACITY / PAGE);
    assert_int_equal(max, PAGE);
    tk_destroy(&t);
    sched_fake_tier_destroy(&ft);
}

/* An actor that predates records and windows answers with 128-entry pages that
 * run past the window: the scheduler clips them to the window, so every block is
 * adopted exactly once (a block seen twice would have its header deleted). And the
 * protocol before records (cfg.inventory_entries) still reads a tier whole. */
static void test_actor_before_records_is_read_whole_and_once(void **state)
{
    (void)state;
    sched_fake_inv_t legacy = {.legacy = true, .epoch = EPOCH};
    sched_fake_tier_t *ft = s_fake(0, &legacy);
    tk_t *t = s_sched(3 * PAGE, 4, 0); /* 128-entry pages run past 300-slot windows */
    tk_tier_up(t, 1, sched_fake_tier_endpoint(ft), EPOCH, CAPACITY, 4096);
    assert_int_equal(tk_register(t, TK_INST, 4096), 0);
    assert_int_equal(s_used(t), CAPACITY);
    assert_int_equal(s_hits(t, 0, CAPACITY), CAPACITY);
    sched_fake_tier_stats_t fs;
    sched_fake_tier_stats(ft, &fs);
    assert_int_equal(fs.slots_deleted, 0);
    uint64_t rec_pages, max;
    sched_fake_tier_inventory_asks(ft, &rec_pages, &max);
    assert_int_equal(rec_pages, 0); /* it never answered with records */
    tk_destroy(&t);

    sched_config_t cfg;
    tk_config(&cfg, CAPACITY, 4096);
    cfg.inventory_entries = true;
    t = tk_new(&cfg);
    sched_fake_inv_t def = {.epoch = EPOCH};
    sched_fake_tier_set_inventory(ft, &def);
    sched_fake_tier_stats(ft, &fs);
    uint64_t pages_before = fs.inventories;
    tk_tier_up(t, 1, sched_fake_tier_endpoint(ft), EPOCH, CAPACITY, 4096);
    assert_int_equal(s_used(t), CAPACITY);
    sched_fake_tier_stats(ft, &fs);
    assert_int_equal(fs.inventories - pages_before, (CAPACITY + 127) / 128);
    sched_fake_tier_inventory_asks(ft, &rec_pages, &max);
    assert_int_equal(rec_pages, 0);
    assert_int_equal(fs.slots_deleted, 0);
    tk_destroy(&t);
    sched_fake_tier_destroy(&ft);
}

/* A page that is not what was asked (records cut short, a record outside the
 * window, another epoch, a refusal) adopts nothing and is asked again: two bad
 * answers and the rebuild still completes; a window that stays bad ends the
 * rebuild after SCHED_INV_TRIES with a partial index (the tier is up, writable,
 * and holds exactly the windows read before). */
static void test_bad_pages_are_retried_then_give_a_partial_index(void **state)
{
    (void)state;
    const sched_fake_bad_t bads[] = {SCHED_FAKE_BAD_LENGTH, SCHED_FAKE_BAD_OUTSIDE,
                                     SCHED_FAKE_BAD_EPOCH, SCHED_FAKE_BAD_STATUS};
    for (size_t k = 0; k < sizeof bads / sizeof bads[0]; k++) {
        sched_fake_inv_t inv = {.epoch = EPOCH, .bad = bads[k], .bad_from = 2, .bad_count = 2};
        sched_fake_tier_t *ft = s_fake(0, &inv);
        tk_t *t = s_sched(PAGE, 1, 0);
        tk_tier_up(t, 1, sched_fake_tier_endpoint(ft), EPOCH, CAPACITY, 4096);
        assert_int_equal(s_used(t), CAPACITY);
        sched_fake_tier_stats_t fs;
        sched_fake_tier_stats(ft, &fs);
        assert_int_equal(fs.inventories, CAPACITY / PAGE + 2);
        assert_int_equal(fs.slots_deleted, 0);
        tk_destroy(&t);

        inv.bad_count = 1000; /* window 1 never answers right */
        sched_fake_tier_set_inventory(ft, &inv);
        uint64_t asked = fs.inventories;
        t = s_sched(PAGE, 1, 0);
        tk_tier_up(t, 1, sched_fake_tier_endpoint(ft), EPOCH, CAPACITY, 4096);
        assert_int_equal(tk_register(t, TK_INST, 4096), 0);
        assert_int_equal(s_used(t), PAGE); /* window 0 only */
        assert_int_equal(s_hits(t, 0, PAGE), PAGE);
        assert_int_equal(s_hits(t, PAGE, CAPACITY - PAGE), 0);
        sched_fake_tier_stats(ft, &fs);
        assert_int_equal(fs.inventories - asked, 1 + TRIES);
        assert_true(tk_tier(t, 1)->up);
        tk_destroy(&t);
        sched_fake_tier_destroy(&ft);
    }
}

/* A tier whose headers change while it is read: each window is adopted as it was
 * when its page was built. Windows read before the change keep what they saw
 * (the gc's probes correct those later); windows read after see the change. One
 * page in flight makes "before" exact: the change runs before page 4 (windows 0-2
 * read). With four in flight, a change before the first page to window 9 only. */
typedef struct {
    uint32_t at_page;
} s_change_t;

static void s_change(void *arg, uint32_t page, sched_fake_slot_t *slots, uint64_t capacity)
{
    const s_change_t *c = arg;
    if (page != c->at_page)
        return;
    assert_true(capacity == CAPACITY);
    slots[50].serving = false;  /* window 0, already read */
    slots[550].serving = false; /* window 5, not yet */
    slots[960].serving = false; /* window 9, not yet */
    slots[560] = slots[561];    /* was empty: a new block, key 5000 */
    s_key(5000, slots[560].key);
    s_key(7000, slots[600].key); /* rewritten with another block */
}

static void test_inventory_changing_during_the_rebuild(void **state)
{
    (void)state;
    for (uint32_t in_flight = 1; in_flight <= 4; in_flight += 3) {
        s_change_t ch = {.at_page = in_flight == 1 ? 4 : 1};
        sched_fake_inv_t inv = {.epoch = EPOCH, .on_page = s_change, .arg = &ch};
        sched_fake_tier_t *ft = s_fake(0, &inv);
        assert_int_equal(sched_fake_tier_set(ft, 560, NULL), 0);
        tk_t *t = s_sched(PAGE, in_flight, 0);
        tk_tier_up(t, 1, sched_fake_tier_endpoint(ft), EPOCH, CAPACITY, 4096);
        assert_int_equal(tk_register(t, TK_INST, 4096), 0);
        assert_int_equal(s_cached(t, 50), in_flight == 1); /* read before it went */
        assert_false(s_cached(t, 550));
        assert_false(s_cached(t, 960));
        assert_true(s_cached(t, 5000));
        assert_true(s_cached(t, 7000));
        assert_false(s_cached(t, 600));
        assert_int_equal(s_used(t), in_flight == 1 ? CAPACITY - 2 : CAPACITY - 3);
        sched_fake_tier_stats_t fs;
        sched_fake_tier_stats(ft, &fs);
        assert_int_equal(fs.slots_deleted, 0);
        tk_destroy(&t);
        sched_fake_tier_destroy(&ft);
    }
}

static bool s_pages_asked(sched_fake_tier_t *ft, uint64_t n)
{
    int64_t until = zclock_mono() + TK_POLL_MS;
    sched_fake_tier_stats_t fs;
    do {
        sched_fake_tier_stats(ft, &fs);
        if (fs.inventories >= n)
            return true;
        zclock_sleep(5);
    } while (zclock_mono() < until);
    return false;
}

/* A tier that dies mid-rebuild (it stops answering from window 3 on, or 2). Silent
 * (its pages time out): after
 * SCHED_INV_TRIES timeouts of a window the tier is up with the windows read
 * before; its new incarnation (another epoch) is read again from scratch. Gone
 * (membership DOWN while pages are in flight): DOWN with nothing indexed, and
 * its next UP reads it whole. */
static void test_tier_dying_mid_rebuild(void **state)
{
    (void)state;
    sched_fake_inv_t inv = {.epoch = EPOCH, .mute_from = 3 * PAGE};
    sched_fake_tier_t *ft = s_fake(0, &inv);
    tk_t *t = s_sched(PAGE, 2, 100);
    tk_tier_up(t, 1, sched_fake_tier_endpoint(ft), EPOCH, CAPACITY, 4096);
    assert_int_equal(s_used(t), 3 * PAGE);
    /* it restarts: another epoch, answering again */
    sched_fake_inv_t back = {.epoch = EPOCH + 1};
    sched_fake_tier_set_inventory(ft, &back);
    tk_tier_up(t, 1, sched_fake_tier_endpoint(ft), EPOCH + 1, CAPACITY, 4096);
    assert_int_equal(s_used(t), CAPACITY);
    tk_destroy(&t);

    /* DOWN while two pages are in flight (a long tier timeout: only DOWN ends them) */
    inv = (sched_fake_inv_t){.epoch = EPOCH, .mute_from = 2 * PAGE};
    sched_fake_tier_set_inventory(ft, &inv);
    sched_fake_tier_stats_t fs;
    sched_fake_tier_stats(ft, &fs);
    uint64_t asked = fs.inventories;
    t = s_sched(PAGE, 2, 60000);
    kvtier_TierInfo info;
    memset(&info, 0, sizeof info);
    info.tier_id = 1;
    snprintf(info.endpoint, sizeof info.endpoint, "%s", sched_fake_tier_endpoint(ft));
    info.epoch = EPOCH;
    info.capacity_slots = CAPACITY;
    info.slot_bytes = 4096;
    assert_int_equal(sched_actor_tier_change(t->sched, true, &info), 0);
    assert_true(s_pages_asked(ft, asked + 4)); /* two answered, two unanswered */
    assert_false(tk_tier(t, 1)->up);           /* still recovering */
    assert_int_equal(sched_actor_tier_change(t->sched, false, &info), 0);
    int64_t until = zclock_mono() + TK_POLL_MS;
    while (s_used(t) != 0 && zclock_mono() < until)
        zclock_sleep(5);
    assert_int_equal(s_used(t), 0);
    assert_false(tk_tier(t, 1)->up);
    sched_fake_inv_t def = {.epoch = EPOCH + 2};
    sched_fake_tier_set_inventory(ft, &def);
    tk_tier_up(t, 1, sched_fake_tier_endpoint(ft), EPOCH + 2, CAPACITY, 4096);
    assert_int_equal(s_used(t), CAPACITY);
    tk_destroy(&t);
    sched_fake_tier_destroy(&ft);
}

/* Two real tier actors on the in-memory backend, read at the same time with
 * windows smaller than the tier: their headers are what the new scheduler indexes. */
static zactor_t *s_real_tier(uint32_t tier_id, uint64_t n, char *ep, size_t eplen)
{
    tier_actor_config_t tc;
    memset(&tc, 0, sizeof tc);
    snprintf(tc.tier.name, sizeof tc.tier.name, "fake%u", tier_id);
    snprintf(tc.tier.kind, sizeof tc.tier.kind, TIER_FAKE_KIND);
    tc.tier.capacity = n;
    tc.tier.slot_size = 4096;
    tc.tier_id = tier_id;
    tc.endpoint = "tcp://127.0.0.1:*";
    tc.max_slots = (uint32_t)n;
    zactor_t *ta = tier_actor_new(&tc);
    assert_non_null(ta);
    assert_int_equal(tier_actor_endpoint(ta, ep, eplen), 0);
    /* every slot a SERVING block of TK_INST: key (tier_id << 16) + slot */
    bus_client_config_t cc = {.name = "fill", .max_in_flight = 2};
    bus_client_t *c = bus_client_new(ep, &cc);
    assert_non_null(c);
    uint64_t *slots = calloc(n, 8), *sizes = calloc(n, 8);
    uint8_t(*keys)[16] = calloc(n, 16);
    kvtier_Envelope *req = calloc(2, sizeof *req);
    assert_true(slots && sizes && keys && req);
    for (uint64_t i = 0; i < n; i++) {
        slots[i] = i;
        sizes[i] = 512;
        s_key((tier_id << 16) + (uint32_t)i, keys[i]);
    }
    bus_env_init(req, kvtier_Envelope_put_header_req_tag, "test");
    snprintf(req->body.put_header_req.instance_id, sizeof req->body.put_header_req.instance_id,
             "%s", TK_INST);
    req->body.put_header_req.state = kvtier_LocationState_LOCATION_SERVING;
    bus_arrays_t arr = {.slots = {slots, (uint32_t)n, (uint32_t)n},
                        .keys = {keys, (uint32_t)n, (uint32_t)n},
                        .sizes = {sizes, (uint32_t)n, (uint32_t)n}};
    kvtier_Status st;
    assert_int_equal(bus_client_call(c, req, &arr, NULL, 0, TK_CALL_MS, req + 1, NULL, NULL, &st),
                     0);
    assert_int_equal(req[1].body.put_header_rep.written, n);
    bus_client_destroy(&c);
    free(slots);
    free(sizes);
    free(keys);
    free(req);
    return ta;
}

static void test_real_tiers_are_rebuilt_in_parallel(void **state)
{
    (void)state;
    assert_true(tier_register(&tier_fake_ops) == 0 || tier_find(TIER_FAKE_KIND) != NULL);
    enum { N = 3000 };
    char ep[2][256];
    zactor_t *ta[2] = {s_real_tier(1, N, ep[0], sizeof ep[0]),
                       s_real_tier(2, N, ep[1], sizeof ep[1])};
    sched_config_t cfg;
    tk_config(&cfg, N, 4096);
    cfg.n_tiers = 2;
    cfg.tiers[1] = cfg.tiers[0];
    cfg.tiers[1].tier_id = 2;
    snprintf(cfg.tiers[1].name, sizeof cfg.tiers[1].name, "host1");
    cfg.chains[0].n_tiers = 2;
    cfg.chains[0].tier_ids[1] = 2;
    cfg.inventory_page = 256; /* 12 windows a tier, the last one short */
    cfg.inventory_in_flight = 3;
    tk_t *t = tk_new(&cfg);
    for (uint32_t i = 0; i < 2; i++) {
        kvtier_TierInfo info;
        memset(&info, 0, sizeof info);
        info.tier_id = i + 1;
        snprintf(info.endpoint, sizeof info.endpoint, "%.*s", (int)sizeof info.endpoint - 1, ep[i]);
        info.epoch = tier_actor_epoch(ta[i]);
        info.capacity_slots = N;
        info.slot_bytes = 4096;
        assert_int_equal(sched_actor_tier_change(t->sched, true, &info), 0);
    }
    for (uint32_t i = 0; i < 2; i++) {
        tk_tier_want_t w = {i + 1, true, tier_actor_epoch(ta[i])};
        assert_true(tk_poll(tk_tier_is, t, &w));
        assert_int_equal(tk_tier(t, i + 1)->used_slots, N);
    }
    assert_int_equal(tk_register(t, TK_INST, 512), 0);
    assert_int_equal(s_hits(t, 1u << 16, 1000), 1000);
    assert_int_equal(s_hits(t, (2u << 16) + 2000, 1000), 1000);
    tier_actor_stats_t ts;
    assert_int_equal(tier_actor_stats(ta[0], &ts), 0);
    assert_int_equal(ts.inventory_pages, (N + 255) / 256);
    assert_int_equal(ts.slots_deleted, 0);
    tk_destroy(&t);
    zactor_destroy(&ta[0]);
    zactor_destroy(&ta[1]);
}

/* Page sizes and pages in flight out of range are refused at configuration. */
static void test_bad_rebuild_config_is_refused(void **state)
{
    (void)state;
    sched_config_t cfg;
    char err[256];
    tk_config(&cfg, CAPACITY, 4096);
    cfg.inventory_page = BUS_MAX_INVENTORY_RECORDS + 1;
    assert_true(sched_config_check(&cfg, err, sizeof err) < 0);
    assert_non_null(strstr(err, "inventory_page 65537"));
    tk_config(&cfg, CAPACITY, 4096);
    cfg.inventory_in_flight = SCHED_INV_MAX_IN_FLIGHT + 1;
    assert_true(sched_config_check(&cfg, err, sizeof err) < 0);
    assert_non_null(strstr(err, "inventory_in_flight 17"));
    tk_config(&cfg, CAPACITY, 4096);
    cfg.inventory_page = BUS_MAX_INVENTORY_RECORDS;
    cfg.inventory_in_flight = SCHED_INV_MAX_IN_FLIGHT;
    assert_int_equal(sched_config_check(&cfg, err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_windows_in_flight_adopt_every_block_once),
        cmocka_unit_test(test_actor_before_records_is_read_whole_and_once),
        cmocka_unit_test(test_bad_pages_are_retried_then_give_a_partial_index),
        cmocka_unit_test(test_inventory_changing_during_the_rebuild),
        cmocka_unit_test(test_tier_dying_mid_rebuild),
        cmocka_unit_test(test_real_tiers_are_rebuilt_in_parallel),
        cmocka_unit_test(test_bad_rebuild_config_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
