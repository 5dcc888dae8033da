/* test_publisher_mirror.c — the publisher's copy of the index
 * (actors/publisher_mirror.h, docs/EVENTS.md "Snapshot"): each event kind
 * changes the mirror as the scheduler's index changed; what it cannot follow
 * makes it stale (never silently wrong); a new term makes it whole again; the
 * table stays exact through growth and backward-shift deletions. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "publisher_mirror.h"

#define S_MAX_KEYS 64

typedef struct {
    bus_event_t e;
    uint8_t keys[S_MAX_KEYS][BUS_KEY_LEN];
} s_ev_t;

static void s_key(uint8_t out[BUS_KEY_LEN], uint32_t i)
{
    for (int j = 0; j < BUS_KEY_LEN; j++)
        out[j] = (uint8_t)((i * 2654435761u) >> (j % 4 * 8)) ^ (uint8_t)j;
    memcpy(out + 12, &i, sizeof i);
}

/* An event of KIND for instance INST with keys first..first+n-1. */
static void s_ev(s_ev_t *ev, pb_size_t kind, const char *inst, uint32_t first, uint32_t n)
{
    memset(ev, 0, sizeof *ev);
    ev->e.ev.which_kind = kind;
    snprintf(ev->e.ev.instance_id, sizeof ev->e.ev.instance_id, "%s", inst);
    for (uint32_t i = 0; i < n; i++)
        s_key(ev->keys[i], first + i);
    ev->e.keys = (bus_keys_t){.keys = ev->keys, .n = n, .cap = S_MAX_KEYS};
}

static void s_apply(publisher_mirror_t *m, uint64_t seq, s_ev_t *ev)
{
    kvtier_EventBatch b = {.epoch = 1};
    publisher_mirror_apply(m, seq, &b, &ev->e, 1);
}

static void s_stored(publisher_mirror_t *m, const char *inst, uint32_t tier, uint32_t first,
                     uint32_t n)
{
    s_ev_t ev;
    s_ev(&ev, kvtier_Event_block_stored_tag, inst, first, n);
    ev.e.ev.kind.block_stored = (kvtier_BlockStored){.tier_id = tier,
                                                     .block_bytes = 4096,
                                                     .medium = kvtier_Medium_MEDIUM_CPU,
                                                     .tokens_per_block = 16};
    s_apply(m, 1, &ev);
}

static void s_removed(publisher_mirror_t *m, const char *inst, uint32_t tier, uint32_t first,
                      uint32_t n)
{
    s_ev_t ev;
    s_ev(&ev, kvtier_Event_block_removed_tag, inst, first, n);
    ev.e.ev.kind.block_removed.tier_id = tier;
    s_apply(m, 1, &ev);
}

/* True when the mirror holds (inst, key i, tier). */
static bool s_has(const publisher_mirror_t *m, const char *inst, uint32_t i, uint32_t tier)
{
    publisher_mirror_loc_t *locs;
    uint32_t n;
    assert_int_equal(publisher_mirror_copy(m, &locs, &n), 0);
    uint8_t key[BUS_KEY_LEN];
    s_key(key, i);
    bool found = false;
    for (uint32_t k = 0; k < n && !found; k++)
        found = locs[k].tier_id == tier && memcmp(locs[k].key, key, BUS_KEY_LEN) == 0 &&
                strcmp(publisher_mirror_instance(m, locs[k].instance), inst) == 0;
    free(locs);
    return found;
}

/* Rule: stored adds a location per (instance, key, tier); removed drops that one. */
static void test_mirror_stored_and_removed(void **state)
{
    (void)state;
    publisher_mirror_t *m = publisher_mirror_new(0);
    assert_non_null(m);
    s_stored(m, "a", 1, 0, 10);
    s_stored(m, "b", 1, 0, 10); /* same keys, another instance: other locations */
    s_stored(m, "a", 2, 0, 5);  /* same keys, another tier */
    assert_int_equal(publisher_mirror_count(m), 25);
    s_stored(m, "a", 1, 0, 10); /* stored again: refreshed, not doubled */
    assert_int_equal(publisher_mirror_count(m), 25);
    s_removed(m, "a", 1, 0, 3);
    assert_int_equal(publisher_mirror_count(m), 22);
    assert_false(s_has(m, "a", 0, 1));
    assert_true(s_has(m, "a", 0, 2));
    assert_true(s_has(m, "b", 0, 1));
    s_removed(m, "a", 1, 100, 3); /* not there: nothing */
    assert_int_equal(publisher_mirror_count(m), 22);
    assert_null(publisher_mirror_stale(m));
    publisher_mirror_destroy(&m);
    assert_null(m);
}

/* Rule: moved drops the source and adds the destination with the same bytes and
 * tokens; a tier down drops that tier only; a lookup changes nothing. */
static void test_mirror_moved_tier_down_lookup(void **state)
{
    (void)state;
    publisher_mirror_t *m = publisher_mirror_new(0);
    s_stored(m, "a", 1, 0, 8);
    s_stored(m, "a", 3, 100, 4);
    s_ev_t ev;
    s_ev(&ev, kvtier_Event_block_moved_tag, "a", 0, 2);
    ev.e.ev.kind.block_moved = (kvtier_BlockMoved){
        .src_tier_id = 1, .dst_tier_id = 2, .dst_medium = kvtier_Medium_MEDIUM_DISK};
    s_apply(m, 2, &ev);
    assert_int_equal(publisher_mirror_count(m), 12);
    assert_false(s_has(m, "a", 0, 1));
    assert_true(s_has(m, "a", 0, 2));
    publisher_mirror_loc_t *locs;
    uint32_t n;
    assert_int_equal(publisher_mirror_copy(m, &locs, &n), 0);
    for (uint32_t k = 0; k < n; k++)
        if (locs[k].tier_id == 2) {
            assert_int_equal(locs[k].bytes, 4096);
            assert_int_equal(locs[k].tokens, 16);
            assert_int_equal(locs[k].medium, kvtier_Medium_MEDIUM_DISK);
        }
    free(locs);
    s_ev(&ev, kvtier_Event_cache_get_tag, "a", 0, 8);
    s_apply(m, 3, &ev);
    assert_int_equal(publisher_mirror_count(m), 12);
    s_ev(&ev, kvtier_Event_tier_changed_tag, "", 0, 0);
    ev.e.ev.kind.tier_changed = (kvtier_TierChanged){.tier_id = 1, .up = false};
    s_apply(m, 4, &ev);
    assert_int_equal(publisher_mirror_count(m), 6); /* tier 2's two and tier 3's four */
    assert_true(s_has(m, "a", 100, 3));
    ev.e.ev.kind.tier_changed.up = true; /* up: its stores follow, nothing else */
    s_apply(m, 5, &ev);
    assert_int_equal(publisher_mirror_count(m), 6);
    publisher_mirror_destroy(&m);
}

/* Rule: a location beyond snapshot_blocks, or a batch that was not applied,
 * makes the mirror stale with a reason; a new term (LeaderChanged) or
 * AllCleared empties it and makes it whole again. */
static void test_mirror_stale_and_new_term(void **state)
{
    (void)state;
    publisher_mirror_t *m = publisher_mirror_new(4);
    s_stored(m, "a", 1, 0, 4);
    assert_null(publisher_mirror_stale(m));
    s_stored(m, "a", 1, 0, 4); /* refreshes: still within the bound */
    assert_null(publisher_mirror_stale(m));
    s_stored(m, "a", 1, 4, 1);
    assert_non_null(publisher_mirror_stale(m));
    assert_non_null(strstr(publisher_mirror_stale(m), "snapshot_blocks"));
    s_ev_t ev;
    s_ev(&ev, kvtier_Event_leader_changed_tag, "", 0, 0);
    s_apply(m, 1ull << 40 | 1, &ev);
    assert_null(publisher_mirror_stale(m));
    assert_int_equal(publisher_mirror_count(m), 0);
    publisher_mirror_lost(m, 77, "dropped");
    assert_non_null(strstr(publisher_mirror_stale(m), "77"));
    s_ev(&ev, kvtier_Event_all_cleared_tag, "", 0, 0);
    s_apply(m, 78, &ev);
    assert_null(publisher_mirror_stale(m));
    assert_null(publisher_mirror_new(PUBLISHER_MIRROR_MAX_BLOCKS + 1));
    publisher_mirror_destroy(&m);
}

/* The table stays exact through growth and many deletions in random order
 * (backward-shift deletion keeps every probe run whole). */
static void test_mirror_grows_and_deletes_exactly(void **state)
{
    (void)state;
    enum { N = 5000 };
    publisher_mirror_t *m = publisher_mirror_new(0);
    for (uint32_t i = 0; i < N; i += S_MAX_KEYS)
        s_stored(m, "a", 1, i, S_MAX_KEYS);
    assert_int_equal(publisher_mirror_count(m), (N + S_MAX_KEYS - 1) / S_MAX_KEYS * S_MAX_KEYS);
    uint32_t total = publisher_mirror_count(m);
    bool *gone = calloc(total, sizeof *gone);
    srand(7);
    uint32_t removed = 0;
    for (uint32_t r = 0; r < total / 2; r++) {
        uint32_t i = (uint32_t)rand() % total;
        if (!gone[i])
            removed++;
        gone[i] = true;
        s_removed(m, "a", 1, i, 1);
    }
    assert_int_equal(publisher_mirror_count(m), total - removed);
    publisher_mirror_loc_t *locs;
    uint32_t n;
    assert_int_equal(publisher_mirror_copy(m, &locs, &n), 0);
    assert_int_equal(n, total - removed);
    uint32_t seen = 0;
    for (uint32_t i = 0; i < total; i++) {
        uint8_t key[BUS_KEY_LEN];
        s_key(key, i);
        bool found = false;
        for (uint32_t k = 0; k < n && !found; k++)
            found = memcmp(locs[k].key, key, BUS_KEY_LEN) == 0;
        assert_true(found == !gone[i]);
        seen += found;
    }
    assert_int_equal(seen, n);
    free(locs);
    free(gone);
    publisher_mirror_destroy(&m);
}

/* The copy is sorted by (instance, tier) so a snapshot makes few events. */
static void test_mirror_copy_is_sorted(void **state)
{
    (void)state;
    publisher_mirror_t *m = publisher_mirror_new(0);
    s_stored(m, "b", 2, 0, 3);
    s_stored(m, "a", 2, 0, 3);
    s_stored(m, "b", 1, 0, 3);
    publisher_mirror_loc_t *locs;
    uint32_t n;
    assert_int_equal(publisher_mirror_copy(m, &locs, &n), 0);
    assert_int_equal(n, 9);
    for (uint32_t k = 1; k < n; k++)
        assert_true(
            locs[k - 1].instance < locs[k].instance ||
            (locs[k - 1].instance == locs[k].instance && locs[k - 1].tier_id <= locs[k].tier_id));
    free(locs);
    publisher_mirror_destroy(&m);
    m = publisher_mirror_new(0);
    assert_int_equal(publisher_mirror_copy(m, &locs, &n), 0);
    assert_null(locs);
    assert_int_equal(n, 0);
    publisher_mirror_destroy(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mirror_stored_and_removed),
        cmocka_unit_test(test_mirror_moved_tier_down_lookup),
        cmocka_unit_test(test_mirror_stale_and_new_term),
        cmocka_unit_test(test_mirror_grows_and_deletes_exactly),
        cmocka_unit_test(test_mirror_copy_is_sorted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
