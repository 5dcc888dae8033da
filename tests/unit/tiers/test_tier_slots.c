/* test_tier_slots.c — one test per rule of the slot engine (DESIGN.md §8,
 * issue 2 §4). Each test names the rule it checks. Time is driven by the
 * now_ms arguments; nothing sleeps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tier_policy.h"
#include "tier_slots.h"

#define INST 7u

static const char *const s_policies[] = {"lru", "clock", "fifo"};
#define NPOL 3

/* Deterministic, well-spread 16-byte key for a small id. */
static tier_key_t K(uint32_t id)
{
    tier_key_t k;
    uint64_t x = 0x9e3779b97f4a7c15ull * (id + 1);
    for (int i = 0; i < 2; i++) {
        x ^= x >> 31;
        x *= 0xbf58476d1ce4e5b9ull;
        x ^= x >> 27;
        memcpy(k.b + 8 * i, &x, 8);
    }
    return k;
}

static tier_slots_t *mk(const char *policy, uint32_t cap, uint32_t max_batch)
{
    tier_slots_config_t cfg = {.policy = policy, .capacity = cap, .max_batch = max_batch};
    tier_slots_t *s = tier_slots_new(&cfg);
    assert_non_null(s);
    return s;
}

/* Reserve one key alone; returns its slot. */
static uint32_t reserve1(tier_slots_t *s, uint32_t id, uint64_t deadline, uint64_t now)
{
    tier_key_t k = K(id);
    tier_resv_t r;
    tier_victim_t v[1];
    size_t nv;
    assert_int_equal(tier_slots_reserve(s, INST, &k, 1, deadline, now, 0, &r, v, &nv), 0);
    return r.slot;
}

static int commit1(tier_slots_t *s, uint32_t id, bool ok, uint64_t now)
{
    tier_key_t k = K(id);
    tier_commit_outcome_t oc = 0;
    assert_int_equal(tier_slots_commit(s, INST, &k, ok, now, &oc), 0);
    return (int)oc;
}

/* Reserve and commit one key; returns its slot. */
static uint32_t put(tier_slots_t *s, uint32_t id, uint64_t deadline, uint64_t now)
{
    uint32_t slot = reserve1(s, id, deadline, now);
    assert_int_equal(commit1(s, id, true, now), TIER_COMMIT_COMMITTED);
    return slot;
}

static int lookup(tier_slots_t *s, uint32_t id, uint64_t now, tier_slot_info_t *info)
{
    tier_key_t k = K(id);
    return tier_slots_lookup(s, INST, &k, now, info);
}

static int pin(tier_slots_t *s, uint32_t id, uint64_t now)
{
    tier_key_t k = K(id);
    return tier_slots_pin(s, INST, &k, now, NULL);
}

static int unpin(tier_slots_t *s, uint32_t id)
{
    tier_key_t k = K(id);
    return tier_slots_unpin(s, INST, &k);
}

static int touch(tier_slots_t *s, uint32_t id, uint64_t now, uint64_t deadline)
{
    tier_key_t k = K(id);
    return tier_slots_touch(s, INST, &k, now, deadline);
}

static int peek(tier_slots_t *s, uint32_t id, tier_slot_info_t *info)
{
    tier_key_t k = K(id);
    return tier_slots_peek(s, INST, &k, info);
}

static void keys_of(tier_key_t *keys, const uint32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        keys[i] = K(ids[i]);
}

static tier_slots_stats_t stats(const tier_slots_t *s)
{
    tier_slots_stats_t st;
    tier_slots_stats(s, &st);
    return st;
}

/* Rule: policies come from a registry by name; an unknown name is refused. */
static void test_policies_found_by_name_unknown_refused(void **state)
{
    (void)state;
    for (int p = 0; p < NPOL; p++) {
        assert_non_null(tier_policy_find(s_policies[p]));
        tier_slots_t *s = mk(s_policies[p], 4, 2);
        assert_string_equal(tier_slots_policy(s), s_policies[p]);
        tier_slots_destroy(&s);
        assert_null(s);
        tier_slots_destroy(&s); /* idempotent */
    }
    assert_null(tier_policy_find("arc"));
    assert_null(tier_policy_find(NULL));
    tier_slots_config_t cfg = {.policy = "arc", .capacity = 4, .max_batch = 2};
    assert_null(tier_slots_new(&cfg));
    cfg = (tier_slots_config_t){.capacity = 0, .max_batch = 2};
    assert_null(tier_slots_new(&cfg));
    cfg = (tier_slots_config_t){.capacity = 4, .max_batch = 0};
    assert_null(tier_slots_new(&cfg));
    cfg = (tier_slots_config_t){.capacity = 4, .max_batch = 1};
    tier_slots_t *s = tier_slots_new(&cfg);
    assert_string_equal(tier_slots_policy(s), "lru"); /* default */
    tier_slots_destroy(&s);
}

/* Rule: fixed pool with an intrusive free list — capacity slots, each handed
 * out once, a released slot is reused before any eviction. */
static void test_fixed_pool_free_list_reuses_released_slots(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 4, 4);
    bool seen[4] = {false};
    for (uint32_t id = 0; id < 4; id++) {
        uint32_t slot = put(s, id, 0, 1);
        assert_true(slot < 4);
        assert_false(seen[slot]);
        seen[slot] = true;
    }
    assert_int_equal(stats(s).free, 0);
    tier_key_t k2 = K(2);
    tier_slot_info_t info;
    assert_int_equal(lookup(s, 2, 1, &info), 0);
    assert_int_equal(tier_slots_remove(s, INST, &k2), 0);
    assert_int_equal(stats(s).free, 1);
    assert_int_equal(reserve1(s, 9, 0, 1), info.slot); /* the freed slot, no eviction */
    assert_int_equal(stats(s).evictions, 0);
    assert_int_equal(commit1(s, 9, false, 1), TIER_COMMIT_RELEASED);
    assert_int_equal(stats(s).free, 1);
    assert_int_equal(tier_slots_check(s), 0);
    tier_slots_destroy(&s);
}

/* Rule: keys are scoped by instance; keys of different instances never match. */
static void test_keys_of_different_instances_never_match(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 4, 2);
    uint32_t slot = put(s, 1, 0, 1);
    tier_key_t k = K(1);
    tier_slot_info_t info;
    assert_int_equal(tier_slots_lookup(s, INST + 1, &k, 1, &info), TIER_SLOTS_ENOENT);
    tier_resv_t r;
    assert_int_equal(tier_slots_reserve(s, INST + 1, &k, 1, 0, 1, 0, &r, NULL, NULL), 0);
    assert_int_equal(r.kind, TIER_RESV_NEW);
    assert_int_not_equal(r.slot, slot);
    assert_int_equal(lookup(s, 1, 1, &info), 0);
    assert_int_equal(info.slot, slot);
    tier_slots_destroy(&s);
}

/* Rule: blocks being written (WRITING) are never served. */
static void test_writing_blocks_are_not_served(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 4, 2);
    reserve1(s, 1, 0, 1);
    tier_slot_info_t info;
    assert_int_equal(lookup(s, 1, 1, &info), TIER_SLOTS_ENOENT);
    assert_int_equal(pin(s, 1, 1), TIER_SLOTS_ENOENT);
    assert_int_equal(touch(s, 1, 1, 0), TIER_SLOTS_ENOENT);
    assert_int_equal(peek(s, 1, &info), 0);
    assert_int_equal(info.state, TIER_SLOT_RESERVED);
    assert_int_equal(commit1(s, 1, true, 1), TIER_COMMIT_COMMITTED);
    assert_int_equal(lookup(s, 1, 1, &info), 0);
    assert_int_equal(info.state, TIER_SLOT_COMMITTED);
    tier_slots_destroy(&s);
}

/* Rule: reserve is all-or-nothing — a batch that cannot be placed entirely
 * changes nothing. */
static void test_reserve_is_all_or_nothing(void **state)
{
    (void)state;
    for (int p = 0; p < NPOL; p++) {
        tier_slots_t *s = mk(s_policies[p], 4, 4);
        uint32_t slots[4];
        for (uint32_t id = 0; id < 4; id++)
            slots[id] = put(s, id, 0, 1);
        assert_int_equal(pin(s, 0, 1), 0);
        assert_int_equal(pin(s, 1, 1), 0);
        assert_int_equal(pin(s, 2, 1), 0); /* one evictable block left */
        tier_slots_stats_t before = stats(s);
        uint32_t ids[2] = {10, 11};
        tier_key_t keys[2];
        keys_of(keys, ids, 2);
        tier_resv_t out[2];
        tier_victim_t v[2];
        size_t nv = 99;
        assert_int_equal(tier_slots_reserve(s, INST, keys, 2, 0, 1, 0, out, v, &nv),
                         TIER_SLOTS_ENOSPC);
        assert_int_equal(nv, 0);
        tier_slots_stats_t after = stats(s);
        assert_int_equal(after.used, before.used);
        assert_int_equal(after.committed, 4);
        assert_int_equal(after.reserved, 0);
        assert_int_equal(after.evictions, 0);
        assert_int_equal(after.rollbacks, 1);
        tier_slot_info_t info;
        for (uint32_t id = 0; id < 4; id++) {
            assert_int_equal(lookup(s, id, 1, &info), 0);
            assert_int_equal(info.slot, slots[id]);
        }
        assert_int_equal(peek(s, 10, &info), TIER_SLOTS_ENOENT);
        assert_int_equal(peek(s, 11, &info), TIER_SLOTS_ENOENT);
        assert_int_equal(tier_slots_check(s), 0);
        tier_slots_destroy(&s);
    }
}

/* Rule: the batch size limit is a creation parameter; a larger batch is
 * rejected with its own error and changes nothing. */
static void test_batch_over_limit_rejected(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 8, 2);
    uint32_t ids[3] = {1, 2, 3};
    tier_key_t keys[3];
    keys_of(keys, ids, 3);
    tier_resv_t out[3];
    assert_int_equal(tier_slots_reserve(s, INST, keys, 3, 0, 1, 0, out, NULL, NULL),
                     TIER_SLOTS_E2BIG);
    assert_int_equal(stats(s).used, 0);
    assert_int_equal(tier_slots_reserve(s, INST, keys, 2, 0, 1, 0, out, NULL, NULL), 0);
    assert_int_equal(stats(s).reserved, 2);
    tier_slots_destroy(&s);
}

/* Rule: the same key twice in one batch is rejected (and rolled back). */
static void test_duplicate_key_in_batch_rejected(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 8, 4);
    put(s, 1, 0, 1);
    uint32_t ids_new[3] = {5, 6, 5};
    uint32_t ids_known[3] = {1, 6, 1};
    tier_key_t keys[3];
    tier_resv_t out[3];
    keys_of(keys, ids_new, 3);
    assert_int_equal(tier_slots_reserve(s, INST, keys, 3, 0, 1, 0, out, NULL, NULL),
                     TIER_SLOTS_EDUP);
    keys_of(keys, ids_known, 3);
    assert_int_equal(tier_slots_reserve(s, INST, keys, 3, 0, 1, 0, out, NULL, NULL),
                     TIER_SLOTS_EDUP);
    tier_slots_stats_t st = stats(s);
    assert_int_equal(st.used, 1);
    assert_int_equal(st.rewriting, 0);
    assert_int_equal(st.rollbacks, 2);
    assert_int_equal(tier_slots_check(s), 0);
    tier_slots_destroy(&s);
}

/* Rule: an evicted slot goes straight from committed to reserved for the
 * newcomer, and the victim is reported with its key. */
static void test_eviction_goes_straight_to_reserved(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 2, 2);
    uint32_t slot_a = put(s, 1, 500, 1);
    put(s, 2, 0, 2);
    tier_key_t k = K(3);
    tier_resv_t r;
    tier_victim_t v[1];
    size_t nv;
    assert_int_equal(tier_slots_reserve(s, INST, &k, 1, 0, 3, 0, &r, v, &nv), 0);
    assert_int_equal(r.kind, TIER_RESV_EVICTED);
    assert_int_equal(r.slot, slot_a);
    assert_int_equal(nv, 1);
    tier_key_t k1 = K(1);
    assert_true(tier_key_eq(&v[0].key, &k1));
    assert_int_equal(v[0].instance, INST);
    assert_int_equal(v[0].slot, slot_a);
    assert_int_equal(v[0].deadline_ms, 500);
    assert_false(v[0].expired);
    tier_slots_stats_t st = stats(s);
    assert_int_equal(st.free, 0);
    assert_int_equal(st.reserved, 1);
    assert_int_equal(st.committed, 1);
    assert_int_equal(st.evictions, 1);
    tier_slot_info_t info;
    assert_int_equal(lookup(s, 1, 3, &info), TIER_SLOTS_ENOENT);
    assert_int_equal(peek(s, 3, &info), 0);
    assert_int_equal(info.state, TIER_SLOT_RESERVED);
    assert_int_equal(info.slot, slot_a);
    assert_int_equal(tier_slots_check(s), 0);
    tier_slots_destroy(&s);
}

/* Rule: a failed batch is rolled back from the journal in reverse — victims
 * restored in place (same slot, found by lookup) with their deadlines, and
 * still expiring at them. */
static void test_rollback_restores_victims_in_place_with_deadlines(void **state)
{
    (void)state;
    for (int p = 0; p < NPOL; p++) {
        tier_slots_t *s = mk(s_policies[p], 4, 4);
        uint32_t slots[4];
        for (uint32_t id = 0; id < 4; id++)
            slots[id] = put(s, id, id == 0 ? 0 : 1000 + 100 * id, 1);
        assert_int_equal(pin(s, 0, 1), 0); /* 3 evictable: the 4th newcomer fails */
        uint32_t ids[4] = {10, 11, 12, 13};
        tier_key_t keys[4];
        keys_of(keys, ids, 4);
        tier_resv_t out[4];
        tier_victim_t v[4];
        size_t nv;
        assert_int_equal(tier_slots_reserve(s, INST, keys, 4, 0, 2, 0, out, v, &nv),
                         TIER_SLOTS_ENOSPC);
        tier_slots_stats_t st = stats(s);
        assert_int_equal(st.evictions, 0);
        assert_int_equal(st.reserved, 0);
        assert_int_equal(st.committed, 4);
        tier_slot_info_t info;
        for (uint32_t id = 1; id < 4; id++) {
            assert_int_equal(lookup(s, id, 2, &info), 0);
            assert_int_equal(info.slot, slots[id]);
            assert_int_equal(info.deadline_ms, 1000 + 100 * id);
        }
        assert_int_equal(tier_slots_check(s), 0);
        /* The restored deadlines still drive expiry, earliest first. */
        tier_victim_t ex[4];
        size_t n;
        assert_int_equal(tier_slots_expire(s, 1250, ex, 4, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(ex[0].slot, slots[1]);
        assert_int_equal(ex[1].slot, slots[2]);
        assert_int_equal(lookup(s, 3, 1250, &info), 0);
        tier_slots_destroy(&s);
    }
}

/* Rule: rollback restores the victims' policy positions, so the policy
 * chooses the same victims afterwards (lru and fifo exactly). */
static void test_rollback_restores_policy_order(void **state)
{
    (void)state;
    const char *list_policies[2] = {"lru", "fifo"};
    for (int p = 0; p < 2; p++) {
        tier_slots_t *s = mk(list_policies[p], 5, 5);
        for (uint32_t id = 0; id < 5; id++)
            put(s, id, 0, 1);
        assert_int_equal(touch(s, 0, 1, 0), 0); /* lru: 1,2,3,4,0; fifo: 0,1,2,3,4 */
        assert_int_equal(pin(s, 2, 1), 0);
        assert_int_equal(pin(s, 4, 1), 0);
        uint32_t ids[4] = {10, 11, 12, 13};
        tier_key_t keys[4];
        keys_of(keys, ids, 4);
        tier_resv_t out[4];
        assert_int_equal(tier_slots_reserve(s, INST, keys, 4, 0, 2, 0, out, NULL, NULL),
                         TIER_SLOTS_ENOSPC);
        assert_int_equal(unpin(s, 2), 0);
        assert_int_equal(unpin(s, 4), 0);
        tier_victim_t v[5];
        size_t nv;
        assert_int_equal(tier_slots_reserve(s, INST, keys, 4, 0, 2, 0, out, v, &nv), 0);
        assert_int_equal(nv, 4);
        uint32_t want_lru[4] = {1, 2, 3, 4}, want_fifo[4] = {0, 1, 2, 3};
        for (int i = 0; i < 4; i++) {
            tier_key_t w = K(p == 0 ? want_lru[i] : want_fifo[i]);
            assert_true(tier_key_eq(&v[i].key, &w));
        }
        tier_slots_destroy(&s);
    }
}

/* Rule: rollback also returns the references a failed batch took on shared
 * reservations and re-admissions. */
static void test_rollback_returns_shared_and_readmit_references(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 3, 3);
    reserve1(s, 1, 100, 1); /* in flight */
    put(s, 2, 0, 1);        /* committed */
    assert_int_equal(pin(s, 2, 1), 0);
    reserve1(s, 3, 0, 1);        /* pool full, nothing evictable */
    uint32_t ids[3] = {1, 2, 9}; /* share 1, re-admit 2, newcomer 9 has no room */
    tier_key_t keys[3];
    keys_of(keys, ids, 3);
    tier_resv_t out[3];
    assert_int_equal(tier_slots_reserve(s, INST, keys, 3, 777, 1, 0, out, NULL, NULL),
                     TIER_SLOTS_ENOSPC);
    tier_slot_info_t info;
    assert_int_equal(peek(s, 1, &info), 0);
    assert_int_equal(info.refs, 1);
    assert_int_equal(info.pending_deadline_ms, 100);
    assert_int_equal(peek(s, 2, &info), 0);
    assert_int_equal(info.refs, 0);
    assert_int_equal(stats(s).rewriting, 0);
    assert_int_equal(tier_slots_check(s), 0);
    tier_slots_destroy(&s);
}

/* Rule: known blocks are settled first, so a batch never evicts its own
 * members (re-admitted, shared, or reported serving). */
static void test_batch_does_not_evict_its_own_members(void **state)
{
    (void)state;
    for (int p = 0; p < NPOL; p++) {
        for (unsigned flags = 0; flags <= TIER_RESERVE_SKIP_SERVING; flags++) {
            tier_slots_t *s = mk(s_policies[p], 4, 4);
            for (uint32_t id = 0; id < 4; id++)
                put(s, id, 0, 1); /* 0 is the coldest under every policy */
            uint32_t ids[3] = {20, 21, 0};
            tier_key_t keys[3];
            keys_of(keys, ids, 3);
            tier_resv_t out[3];
            tier_victim_t v[3];
            size_t nv;
            assert_int_equal(tier_slots_reserve(s, INST, keys, 3, 0, 2, flags, out, v, &nv), 0);
            assert_int_equal(out[2].kind, flags ? TIER_RESV_SERVING : TIER_RESV_READMIT);
            assert_int_equal(nv, 2);
            tier_key_t k0 = K(0);
            for (size_t i = 0; i < nv; i++)
                assert_false(tier_key_eq(&v[i].key, &k0));
            tier_slot_info_t info;
            assert_int_equal(lookup(s, 0, 2, &info), 0);
            assert_int_equal(tier_slots_check(s), 0);
            tier_slots_destroy(&s);
        }
    }
}

/* Rule: a batch never evicts its own members even when they are the only
 * candidates: it fails instead and changes nothing. */
static void test_batch_fails_rather_than_evict_own_members(void **state)
{
    (void)state;
    for (int p = 0; p < NPOL; p++) {
        for (unsigned flags = 0; flags <= TIER_RESERVE_SKIP_SERVING; flags++) {
            tier_slots_t *s = mk(s_policies[p], 2, 3);
            put(s, 1, 0, 1);
            put(s, 2, 0, 1);
            uint32_t ids[3] = {3, 1, 2};
            tier_key_t keys[3];
            keys_of(keys, ids, 3);
            tier_resv_t out[3];
            assert_int_equal(tier_slots_reserve(s, INST, keys, 3, 0, 1, flags, out, NULL, NULL),
                             TIER_SLOTS_ENOSPC);
            tier_slots_stats_t st = stats(s);
            assert_int_equal(st.committed, 2);
            assert_int_equal(st.evictable, 2);
            assert_int_equal(st.rewriting, 0);
            assert_int_equal(tier_slots_check(s), 0);
            tier_slots_destroy(&s);
        }
    }
}

/* Rule: the result of a reserve does not depend on the order of keys within
 * the batch (kinds per key, victims as a set). */
static void test_result_independent_of_batch_order(void **state)
{
    (void)state;
    const uint32_t ids[6] = {1, 40, 3, 41, 5, 42}; /* 1: in flight, 3: serving, 5: pinned */
    const size_t orders[3][6] = {{0, 1, 2, 3, 4, 5}, {5, 4, 3, 2, 1, 0}, {3, 0, 5, 1, 4, 2}};
    for (int p = 0; p < NPOL; p++) {
        for (unsigned flags = 0; flags <= TIER_RESERVE_SKIP_SERVING; flags++) {
            uint32_t kinds[3][6];
            bool victim[3][16];
            size_t nvict[3];
            for (int o = 0; o < 3; o++) {
                tier_slots_t *s = mk(s_policies[p], 8, 8);
                reserve1(s, 1, 0, 1);
                for (uint32_t id = 2; id < 9; id++)
                    put(s, id, id == 7 ? 50 : 0, 1); /* 7 expires at 50 */
                assert_int_equal(pin(s, 5, 1), 0);
                assert_int_equal(touch(s, 2, 1, 0), 0);
                tier_key_t keys[6];
                for (size_t i = 0; i < 6; i++)
                    keys[i] = K(ids[orders[o][i]]);
                tier_resv_t out[6];
                tier_victim_t v[6];
                assert_int_equal(
                    tier_slots_reserve(s, INST, keys, 6, 0, 100, flags, out, v, &nvict[o]), 0);
                for (size_t i = 0; i < 6; i++)
                    kinds[o][orders[o][i]] = out[i].kind;
                memset(victim[o], 0, sizeof(victim[o]));
                for (size_t i = 0; i < nvict[o]; i++)
                    for (uint32_t id = 0; id < 16; id++) {
                        tier_key_t k = K(id);
                        if (tier_key_eq(&v[i].key, &k))
                            victim[o][id] = true;
                    }
                tier_slots_destroy(&s);
            }
            for (int o = 1; o < 3; o++) {
                assert_memory_equal(kinds[0], kinds[o], sizeof(kinds[0]));
                assert_memory_equal(victim[0], victim[o], sizeof(victim[0]));
                assert_int_equal(nvict[0], nvict[o]);
            }
            assert_int_equal(nvict[0], 3);
            assert_true(victim[0][7]); /* the expired block goes first */
        }
    }
}

/* Rule: shared reservation — concurrent reserves of one key share the slot
 * with a reference count; the last commit decides. */
static void test_shared_reservation_last_commit_decides(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 4, 2);
    uint32_t slot = reserve1(s, 1, 100, 1);
    tier_key_t k = K(1);
    tier_resv_t r;
    assert_int_equal(tier_slots_reserve(s, INST, &k, 1, 200, 1, 0, &r, NULL, NULL), 0);
    assert_int_equal(r.kind, TIER_RESV_SHARED);
    assert_int_equal(r.slot, slot);
    tier_slot_info_t info;
    assert_int_equal(peek(s, 1, &info), 0);
    assert_int_equal(info.refs, 2);
    assert_int_equal(info.pending_deadline_ms, 200); /* last writer wins */
    assert_int_equal(commit1(s, 1, false, 1), TIER_COMMIT_PENDING);
    assert_int_equal(lookup(s, 1, 1, &info), TIER_SLOTS_ENOENT); /* still writing */
    assert_int_equal(commit1(s, 1, true, 1), TIER_COMMIT_COMMITTED);
    assert_int_equal(lookup(s, 1, 1, &info), 0);
    assert_int_equal(info.slot, slot);
    assert_int_equal(info.deadline_ms, 200);
    assert_int_equal(tier_slots_commit(s, INST, &k, true, 1, NULL), TIER_SLOTS_ESTATE);
    tier_slots_destroy(&s);
}

/* Rule: shared reservation — any success by a sharer commits, even if the
 * last one to commit failed; if all fail the slot is released. */
static void test_shared_reservation_any_success_commits(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 4, 2);
    uint32_t slot = reserve1(s, 1, 0, 1);
    reserve1(s, 1, 0, 1);
    reserve1(s, 1, 0, 1);
    assert_int_equal(commit1(s, 1, true, 1), TIER_COMMIT_PENDING);
    assert_int_equal(commit1(s, 1, false, 1), TIER_COMMIT_PENDING);
    assert_int_equal(commit1(s, 1, false, 1), TIER_COMMIT_COMMITTED);
    tier_slot_info_t info;
    assert_int_equal(lookup(s, 1, 1, &info), 0);
    assert_int_equal(info.slot, slot);

    reserve1(s, 2, 0, 1);
    reserve1(s, 2, 0, 1);
    assert_int_equal(commit1(s, 2, false, 1), TIER_COMMIT_PENDING);
    assert_int_equal(commit1(s, 2, false, 1), TIER_COMMIT_RELEASED);
    assert_int_equal(peek(s, 2, &info), TIER_SLOTS_ENOENT);
    assert_int_equal(stats(s).free, 3);
    tier_key_t k = K(2);
    assert_int_equal(tier_slots_commit(s, INST, &k, true, 1, NULL), TIER_SLOTS_ENOENT);
    tier_slots_destroy(&s);
}

/* Rule: re-admitting a committed key keeps its slot and holds it against
 * eviction during the rewrite; a failed rewrite leaves it committed as it was. */
static void test_readmission_keeps_slot_and_holds_it(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 1, 1);
    uint32_t slot = put(s, 1, 900, 1);
    tier_key_t k = K(1);
    tier_resv_t r;
    assert_int_equal(tier_slots_reserve(s, INST, &k, 1, 5000, 2, 0, &r, NULL, NULL), 0);
    assert_int_equal(r.kind, TIER_RESV_READMIT);
    assert_int_equal(r.slot, slot);
    tier_slot_info_t info;
    assert_int_equal(lookup(s, 1, 2, &info), 0); /* still serving the same bytes */
    assert_int_equal(info.refs, 1);
    assert_int_equal(stats(s).rewriting, 1);
    tier_key_t k2 = K(2);
    assert_int_equal(tier_slots_reserve(s, INST, &k2, 1, 0, 2, 0, &r, NULL, NULL),
                     TIER_SLOTS_ENOSPC); /* held: not a victim */
    assert_int_equal(commit1(s, 1, false, 3), TIER_COMMIT_KEPT);
    assert_int_equal(lookup(s, 1, 3, &info), 0);
    assert_int_equal(info.slot, slot);
    assert_int_equal(info.deadline_ms, 900);
    assert_int_equal(info.refs, 0);
    /* A successful rewrite of a live block keeps its deadline (touch extends). */
    assert_int_equal(tier_slots_reserve(s, INST, &k, 1, 5000, 3, 0, &r, NULL, NULL), 0);
    assert_int_equal(commit1(s, 1, true, 4), TIER_COMMIT_KEPT);
    assert_int_equal(lookup(s, 1, 4, &info), 0);
    assert_int_equal(info.deadline_ms, 900);
    assert_int_equal(stats(s).rewriting, 0);
    assert_int_equal(tier_slots_reserve(s, INST, &k2, 1, 0, 4, 0, &r, NULL, NULL), 0);
    assert_int_equal(r.slot, slot); /* evictable again */
    tier_slots_destroy(&s);
}

/* Rule: re-admission of an expired block revives it on success with the new
 * deadline (same slot); on failure it stays expired and is removed lazily. */
static void test_readmission_revives_expired_block(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 2, 1);
    uint32_t slot = put(s, 1, 100, 1);
    put(s, 2, 100, 1);
    tier_key_t k1 = K(1), k2 = K(2);
    tier_resv_t r;
    /* Expired keys are re-admitted even when serving keys are skipped. */
    assert_int_equal(
        tier_slots_reserve(s, INST, &k1, 1, 500, 200, TIER_RESERVE_SKIP_SERVING, &r, NULL, NULL),
        0);
    assert_int_equal(r.kind, TIER_RESV_READMIT);
    assert_int_equal(r.slot, slot);
    assert_int_equal(commit1(s, 1, true, 200), TIER_COMMIT_REVIVED);
    tier_slot_info_t info;
    assert_int_equal(lookup(s, 1, 300, &info), 0);
    assert_int_equal(info.slot, slot);
    assert_int_equal(info.deadline_ms, 500);
    assert_int_equal(tier_slots_reserve(s, INST, &k2, 1, 500, 300, 0, &r, NULL, NULL), 0);
    assert_int_equal(commit1(s, 2, false, 300), TIER_COMMIT_KEPT);
    assert_int_equal(lookup(s, 2, 300, &info), TIER_SLOTS_EXPIRED);
    assert_int_equal(tier_slots_check(s), 0);
    tier_slots_destroy(&s);
}

/* Rule: with the skip-serving option a live committed key is reported
 * serving and nothing is reserved or held for it. */
static void test_skip_serving_reports_serving_without_reserving(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 4, 2);
    uint32_t slot = put(s, 1, 0, 1);
    uint32_t ids[2] = {1, 2};
    tier_key_t keys[2];
    keys_of(keys, ids, 2);
    tier_resv_t out[2];
    assert_int_equal(
        tier_slots_reserve(s, INST, keys, 2, 0, 1, TIER_RESERVE_SKIP_SERVING, out, NULL, NULL), 0);
    assert_int_equal(out[0].kind, TIER_RESV_SERVING);
    assert_int_equal(out[0].slot, slot);
    assert_int_equal(out[1].kind, TIER_RESV_NEW);
    tier_slot_info_t info;
    assert_int_equal(peek(s, 1, &info), 0);
    assert_int_equal(info.refs, 0);
    assert_int_equal(stats(s).rewriting, 0);
    tier_key_t k = K(1);
    assert_int_equal(tier_slots_commit(s, INST, &k, true, 1, NULL), TIER_SLOTS_ESTATE);
    tier_slots_destroy(&s);
}

/* Rule: with the skip-serving option a block that expired while pinned is
 * reported serving, not re-admitted: a reader may be copying its slot, so no
 * writer may be handed that slot (found in review: torn same-host reads). */
static void test_skip_serving_never_readmits_a_pinned_expired_block(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 2, 1);
    uint32_t slot = put(s, 1, 1000, 1);
    assert_int_equal(pin(s, 1, 500), 0);
    tier_key_t k = K(1);
    tier_resv_t r;
    assert_int_equal(
        tier_slots_reserve(s, INST, &k, 1, 5000, 2000, TIER_RESERVE_SKIP_SERVING, &r, NULL, NULL),
        0);
    assert_int_equal(r.kind, TIER_RESV_SERVING);
    assert_int_equal(r.slot, slot);
    tier_slot_info_t info;
    assert_int_equal(peek(s, 1, &info), 0);
    assert_int_equal(info.refs, 0);
    assert_int_equal(tier_slots_commit(s, INST, &k, true, 2000, NULL), TIER_SLOTS_ESTATE);
    /* Once unpinned it is an ordinary expired block: re-admitted again. */
    assert_int_equal(tier_slots_unpin(s, INST, &k), 0);
    assert_int_equal(
        tier_slots_reserve(s, INST, &k, 1, 5000, 2001, TIER_RESERVE_SKIP_SERVING, &r, NULL, NULL),
        0);
    assert_int_equal(r.kind, TIER_RESV_READMIT);
    assert_int_equal(tier_slots_check(s), 0);
    tier_slots_destroy(&s);
}

/* Rule: pin counts nest; unpin without a pin is refused. */
static void test_pin_counts_nest(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 2, 1);
    put(s, 1, 0, 1);
    assert_int_equal(pin(s, 1, 1), 0);
    assert_int_equal(pin(s, 1, 1), 0);
    tier_slot_info_t info;
    assert_int_equal(peek(s, 1, &info), 0);
    assert_int_equal(info.pins, 2);
    assert_int_equal(stats(s).pinned, 1);
    assert_int_equal(unpin(s, 1), 0);
    assert_int_equal(stats(s).pinned, 1);
    assert_int_equal(unpin(s, 1), 0);
    assert_int_equal(stats(s).pinned, 0);
    assert_int_equal(unpin(s, 1), TIER_SLOTS_ESTATE);
    assert_int_equal(unpin(s, 9), TIER_SLOTS_ENOENT);
    assert_int_equal(pin(s, 9, 1), TIER_SLOTS_ENOENT);
    tier_slots_destroy(&s);
}

/* Rule: pinned slots are never victims, under every policy. */
static void test_pinned_never_evicted(void **state)
{
    (void)state;
    for (int p = 0; p < NPOL; p++) {
        tier_slots_t *s = mk(s_policies[p], 3, 3);
        for (uint32_t id = 0; id < 3; id++)
            put(s, id, 0, 1);
        assert_int_equal(pin(s, 0, 1), 0);
        assert_int_equal(pin(s, 2, 1), 0);
        tier_key_t k0 = K(0), k2 = K(2);
        for (uint32_t id = 10; id < 20; id++) {
            uint32_t slot = reserve1(s, id, 0, 1);
            assert_int_equal(commit1(s, id, true, 1), TIER_COMMIT_COMMITTED);
            tier_slot_info_t info;
            assert_int_equal(lookup(s, 0, 1, &info), 0);
            assert_int_not_equal(info.slot, slot);
            assert_int_equal(lookup(s, 2, 1, &info), 0);
            assert_int_not_equal(info.slot, slot);
        }
        assert_int_equal(pin(s, 19, 1), 0); /* all pinned: no room */
        tier_key_t k = K(30);
        tier_resv_t r;
        assert_int_equal(tier_slots_reserve(s, INST, &k, 1, 0, 1, 0, &r, NULL, NULL),
                         TIER_SLOTS_ENOSPC);
        assert_int_equal(tier_slots_remove(s, INST, &k0), TIER_SLOTS_EBUSY);
        assert_int_equal(tier_slots_remove(s, INST, &k2), TIER_SLOTS_EBUSY);
        tier_slots_destroy(&s);
    }
}

/* Rule: touch refreshes the policy order (lru moves, clock sets the
 * reference bit, fifo ignores it). */
static void test_touch_refreshes_policy_order(void **state)
{
    (void)state;
    const uint32_t want[NPOL] = {1, 1, 0}; /* lru, clock, fifo: victim after touching 0 */
    for (int p = 0; p < NPOL; p++) {
        tier_slots_t *s = mk(s_policies[p], 3, 1);
        for (uint32_t id = 0; id < 3; id++)
            put(s, id, 0, 1);
        assert_int_equal(touch(s, 0, 1, 0), 0);
        tier_key_t k = K(9);
        tier_resv_t r;
        tier_victim_t v[1];
        size_t nv;
        assert_int_equal(tier_slots_reserve(s, INST, &k, 1, 0, 1, 0, &r, v, &nv), 0);
        tier_key_t w = K(want[p]);
        assert_true(tier_key_eq(&v[0].key, &w));
        tier_slots_destroy(&s);
    }
}

/* Rule: touch can extend a deadline, never shortens it, and a block
 * without deadline keeps none. */
static void test_touch_extends_deadline_never_shortens(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 2, 1);
    put(s, 1, 100, 1);
    put(s, 2, 0, 1);
    tier_slot_info_t info;
    assert_int_equal(touch(s, 1, 2, 50), 0);
    assert_int_equal(peek(s, 1, &info), 0);
    assert_int_equal(info.deadline_ms, 100);
    assert_int_equal(touch(s, 1, 2, 300), 0);
    assert_int_equal(touch(s, 1, 2, 0), 0);
    assert_int_equal(peek(s, 1, &info), 0);
    assert_int_equal(info.deadline_ms, 300);
    assert_int_equal(lookup(s, 1, 200, &info), 0); /* would have expired at 100 */
    assert_int_equal(touch(s, 2, 200, 400), 0);
    assert_int_equal(peek(s, 2, &info), 0);
    assert_int_equal(info.deadline_ms, 0);
    assert_int_equal(lookup(s, 1, 300, &info), TIER_SLOTS_EXPIRED);
    assert_int_equal(tier_slots_check(s), 0);
    tier_slots_destroy(&s);
}

/* Rule: TTL deadlines are monotonic — the engine's clock never goes back, so
 * an expired block stays expired. */
static void test_clock_never_goes_back(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 2, 1);
    put(s, 1, 100, 50);
    assert_int_equal(pin(s, 1, 50), 0);
    tier_slot_info_t info;
    assert_int_equal(lookup(s, 1, 150, &info), TIER_SLOTS_EXPIRED_HELD);
    assert_int_equal(lookup(s, 1, 10, &info), TIER_SLOTS_EXPIRED_HELD);
    assert_int_equal(stats(s).now_ms, 150);
    assert_int_equal(unpin(s, 1), 0);
    assert_int_equal(lookup(s, 1, 20, &info), TIER_SLOTS_EXPIRED);
    tier_slots_destroy(&s);
}

/* Rule: lazy expiry — lookup, pin and touch of an expired unpinned block
 * remove it and report it expired. */
static void test_lazy_expiry_removes_expired_unpinned(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 4, 1);
    uint32_t slot = put(s, 1, 100, 1);
    put(s, 2, 100, 1);
    put(s, 3, 100, 1);
    tier_slot_info_t info;
    assert_int_equal(lookup(s, 1, 99, &info), 0);
    assert_int_equal(lookup(s, 1, 100, &info), TIER_SLOTS_EXPIRED); /* deadline <= now */
    assert_int_equal(info.slot, slot);
    assert_true(info.expired);
    assert_int_equal(peek(s, 1, &info), TIER_SLOTS_ENOENT);
    assert_int_equal(pin(s, 2, 100), TIER_SLOTS_EXPIRED);
    assert_int_equal(touch(s, 3, 100, 1000), TIER_SLOTS_EXPIRED); /* too late to extend */
    tier_slots_stats_t st = stats(s);
    assert_int_equal(st.expirations, 3);
    assert_int_equal(st.used, 0);
    assert_int_equal(tier_slots_check(s), 0);
    tier_slots_destroy(&s);
}

/* Rule: under pressure expired unpinned blocks are swept first (earliest
 * deadline first), before the policy's victim. */
static void test_expired_swept_first_under_pressure(void **state)
{
    (void)state;
    for (int p = 0; p < NPOL; p++) {
        tier_slots_t *s = mk(s_policies[p], 4, 2);
        put(s, 0, 0, 1);   /* the policy's choice */
        put(s, 1, 300, 1); /* expires second */
        put(s, 2, 200, 1); /* expires first */
        put(s, 3, 0, 1);
        assert_int_equal(touch(s, 1, 1, 0), 0);
        assert_int_equal(touch(s, 2, 1, 0), 0);
        uint32_t ids[2] = {10, 11};
        tier_key_t keys[2];
        keys_of(keys, ids, 2);
        tier_resv_t out[2];
        tier_victim_t v[2];
        size_t nv;
        assert_int_equal(tier_slots_reserve(s, INST, keys, 2, 0, 400, 0, out, v, &nv), 0);
        assert_int_equal(nv, 2);
        tier_key_t k1 = K(1), k2 = K(2);
        assert_true(tier_key_eq(&v[0].key, &k2) && v[0].expired);
        assert_true(tier_key_eq(&v[1].key, &k1) && v[1].expired);
        tier_slots_stats_t st = stats(s);
        assert_int_equal(st.expirations, 2);
        assert_int_equal(st.evictions, 0);
        tier_slots_destroy(&s);
    }
}

/* Rule (issue 4 §6 "nothing is lost"): with TIER_RESERVE_NO_EVICT newcomers take
 * free slots and expired blocks only; when a live block would have to go, the
 * batch fails with ENOSPC and nothing changed. */
static void test_no_evict_takes_free_and_expired_only(void **state)
{
    (void)state;
    for (int p = 0; p < NPOL; p++) {
        tier_slots_t *s = mk(s_policies[p], 4, 3);
        put(s, 0, 0, 1);
        put(s, 1, 200, 1); /* expires at 200 */
        put(s, 2, 0, 1);
        tier_key_t keys[3];
        uint32_t ids[3] = {10, 11, 12};
        keys_of(keys, ids, 3);
        tier_resv_t out[3];
        tier_victim_t v[3];
        size_t nv = 9;
        /* one free slot, nothing expired yet: two newcomers need a live victim */
        assert_int_equal(
            tier_slots_reserve(s, INST, keys, 2, 0, 100, TIER_RESERVE_NO_EVICT, out, v, &nv),
            TIER_SLOTS_ENOSPC);
        assert_int_equal(nv, 0);
        tier_slot_info_t info;
        for (uint32_t id = 0; id < 3; id++)
            assert_int_equal(lookup(s, id, 100, &info), 0);
        assert_int_equal(stats(s).used, 3);
        /* once block 1 has expired, the free slot and the expired one suffice */
        assert_int_equal(tier_slots_reserve(s, INST, keys, 2, 0, 300,
                                            TIER_RESERVE_NO_EVICT | TIER_RESERVE_SKIP_SERVING, out,
                                            v, &nv),
                         0);
        assert_int_equal(nv, 1);
        tier_key_t k1 = K(1);
        assert_true(tier_key_eq(&v[0].key, &k1) && v[0].expired);
        assert_int_equal(lookup(s, 0, 300, &info), 0);
        assert_int_equal(lookup(s, 2, 300, &info), 0);
        /* the same batch without the flag evicts the policy's choice */
        uint32_t more[1] = {13};
        keys_of(keys, more, 1);
        assert_int_equal(
            tier_slots_reserve(s, INST, keys, 1, 0, 300, TIER_RESERVE_NO_EVICT, out, v, &nv),
            TIER_SLOTS_ENOSPC);
        assert_int_equal(tier_slots_reserve(s, INST, keys, 1, 0, 300, 0, out, v, &nv), 0);
        assert_int_equal(nv, 1);
        assert_false(v[0].expired);
        tier_slots_destroy(&s);
    }
}

/* Rule: an expired pinned block is not served and not taken; its expiry is
 * deferred until it is unpinned, then it is swept like any expired block. */
static void test_pinned_expired_deferred(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 2, 1);
    put(s, 1, 100, 1);
    put(s, 2, 0, 1);
    assert_int_equal(pin(s, 1, 1), 0);
    tier_slot_info_t info;
    assert_int_equal(lookup(s, 1, 200, &info), TIER_SLOTS_EXPIRED_HELD);
    assert_int_equal(pin(s, 1, 200), TIER_SLOTS_EXPIRED_HELD);
    assert_int_equal(touch(s, 1, 200, 0), TIER_SLOTS_EXPIRED_HELD);
    tier_key_t k = K(3);
    tier_resv_t r;
    tier_victim_t v[1];
    size_t nv;
    assert_int_equal(tier_slots_reserve(s, INST, &k, 1, 0, 200, 0, &r, v, &nv), 0);
    tier_key_t k2 = K(2);
    assert_true(tier_key_eq(&v[0].key, &k2)); /* not the pinned expired one */
    assert_false(v[0].expired);
    assert_int_equal(stats(s).deferred, 1);
    assert_int_equal(peek(s, 1, &info), 0);
    assert_true(info.deferred);
    assert_int_equal(commit1(s, 3, true, 200), TIER_COMMIT_COMMITTED);
    assert_int_equal(unpin(s, 1), 0);
    assert_int_equal(stats(s).deferred, 0);
    k = K(4);
    assert_int_equal(tier_slots_reserve(s, INST, &k, 1, 0, 200, 0, &r, v, &nv), 0);
    tier_key_t k1 = K(1);
    assert_true(tier_key_eq(&v[0].key, &k1)); /* swept first once released */
    assert_true(v[0].expired);
    assert_int_equal(tier_slots_check(s), 0);
    tier_slots_destroy(&s);
}

/* Rule: stale TTL-heap entries (deadline extended, block gone) are bounded:
 * the heap is compacted once they exceed the bound, and expiry stays right. */
static void test_stale_heap_compaction_bounded(void **state)
{
    (void)state;
    tier_slots_config_t cfg = {.capacity = 8, .max_batch = 2, .heap_stale_bound = 4};
    tier_slots_t *s = tier_slots_new(&cfg);
    assert_non_null(s);
    put(s, 1, 1000, 1);
    put(s, 2, 5000, 1);
    uint64_t d = 1000;
    for (int i = 0; i < 200; i++) {
        d += 10;
        assert_int_equal(touch(s, 1, 2, d), 0);
        tier_slots_stats_t st = stats(s);
        assert_true(st.heap_stale <= 4);
        assert_true(st.heap_len <= 8 + 4 + 1);
    }
    for (uint32_t id = 10; id < 100; id++) { /* departures leave stale entries too */
        put(s, id, 9000, 2);
        tier_key_t k = K(id);
        assert_int_equal(tier_slots_remove(s, INST, &k), 0);
        assert_true(stats(s).heap_stale <= 4);
    }
    assert_true(stats(s).heap_compactions >= 40);
    assert_int_equal(tier_slots_check(s), 0);
    tier_victim_t v[2];
    size_t n;
    assert_int_equal(tier_slots_expire(s, d - 1, v, 2, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(tier_slots_expire(s, d, v, 2, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(v[0].deadline_ms, d);
    tier_slots_destroy(&s);
}

/* Rule: a gc expiry round is bounded by its max, earliest deadline first, and
 * defers expired pinned blocks. */
static void test_expire_round_is_bounded(void **state)
{
    (void)state;
    tier_slots_t *s = mk("clock", 6, 1);
    for (uint32_t id = 0; id < 5; id++)
        put(s, id, 100 + id, 1);
    assert_int_equal(pin(s, 0, 1), 0);
    tier_victim_t v[6];
    size_t n;
    assert_int_equal(tier_slots_expire(s, 1000, v, 2, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(v[0].deadline_ms, 101);
    assert_int_equal(v[1].deadline_ms, 102);
    assert_int_equal(stats(s).deferred, 1);
    assert_int_equal(tier_slots_expire(s, 1000, v, 6, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(stats(s).committed, 1);
    assert_int_equal(unpin(s, 0), 0);
    assert_int_equal(tier_slots_expire(s, 1000, v, 6, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(v[0].deadline_ms, 100);
    assert_int_equal(stats(s).expirations, 5);
    tier_slots_destroy(&s);
}

/* Rule: remove takes only committed blocks nobody holds. */
static void test_remove_refuses_held_blocks(void **state)
{
    (void)state;
    tier_slots_t *s = mk("fifo", 4, 1);
    reserve1(s, 1, 0, 1);
    put(s, 2, 0, 1);
    put(s, 3, 0, 1);
    assert_int_equal(pin(s, 2, 1), 0);
    reserve1(s, 3, 0, 1); /* re-admitted */
    tier_key_t k1 = K(1), k2 = K(2), k3 = K(3), k4 = K(4);
    assert_int_equal(tier_slots_remove(s, INST, &k1), TIER_SLOTS_EBUSY);
    assert_int_equal(tier_slots_remove(s, INST, &k2), TIER_SLOTS_EBUSY);
    assert_int_equal(tier_slots_remove(s, INST, &k3), TIER_SLOTS_EBUSY);
    assert_int_equal(tier_slots_remove(s, INST, &k4), TIER_SLOTS_ENOENT);
    assert_int_equal(unpin(s, 2), 0);
    assert_int_equal(tier_slots_remove(s, INST, &k2), 0);
    assert_int_equal(stats(s).removals, 1);
    tier_slots_destroy(&s);
}

/* Rule: recovery adopts a committed block at the slot the tier reports. */
static void test_adopt_places_block_at_given_slot(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 4, 1);
    tier_key_t k1 = K(1), k2 = K(2);
    assert_int_equal(tier_slots_adopt(s, INST, &k1, 2, 300, 1), 0);
    assert_int_equal(tier_slots_adopt(s, INST, &k2, 2, 0, 1), TIER_SLOTS_EBUSY);
    assert_int_equal(tier_slots_adopt(s, INST, &k1, 3, 0, 1), TIER_SLOTS_EDUP);
    assert_int_equal(tier_slots_adopt(s, INST, &k2, 4, 0, 1), TIER_SLOTS_EINVAL);
    assert_int_equal(tier_slots_adopt(s, INST, &k2, 0, 0, 1), 0);
    tier_slot_info_t info;
    assert_int_equal(lookup(s, 1, 1, &info), 0);
    assert_int_equal(info.slot, 2);
    assert_int_equal(info.deadline_ms, 300);
    assert_int_equal(reserve1(s, 3, 0, 1), 1); /* the free list skips adopted slots */
    assert_int_equal(reserve1(s, 4, 0, 1), 3);
    assert_int_equal(tier_slots_check(s), 0);
    tier_slots_destroy(&s);
}

/* Rule: counters (used, reserved, committed, pinned, evictions, expirations)
 * follow every transition. */
static void test_counters_track_states(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 3, 3);
    uint32_t ids[3] = {1, 2, 3};
    tier_key_t keys[3];
    keys_of(keys, ids, 3);
    tier_resv_t out[3];
    assert_int_equal(tier_slots_reserve(s, INST, keys, 3, 100, 1, 0, out, NULL, NULL), 0);
    tier_slots_stats_t st = stats(s);
    assert_int_equal(st.capacity, 3);
    assert_int_equal(st.used, 3);
    assert_int_equal(st.reserved, 3);
    assert_int_equal(st.committed, 0);
    commit1(s, 1, true, 1);
    commit1(s, 2, true, 1);
    commit1(s, 3, false, 1);
    pin(s, 1, 1);
    st = stats(s);
    assert_int_equal(st.used, 2);
    assert_int_equal(st.free, 1);
    assert_int_equal(st.committed, 2);
    assert_int_equal(st.pinned, 1);
    assert_int_equal(st.evictable, 1);
    put(s, 4, 0, 1);
    put(s, 5, 0, 1); /* evicts 2 (1 is pinned) */
    tier_slot_info_t info;
    assert_int_equal(lookup(s, 1, 500, &info), TIER_SLOTS_EXPIRED_HELD);
    st = stats(s);
    assert_int_equal(st.evictions, 1);
    assert_int_equal(st.expirations, 0);
    unpin(s, 1);
    assert_int_equal(lookup(s, 1, 500, &info), TIER_SLOTS_EXPIRED);
    st = stats(s);
    assert_int_equal(st.expirations, 1);
    assert_int_equal(st.used, 2);
    assert_int_equal(st.pinned, 0);
    tier_slots_destroy(&s);
}

/* Rule (issue 13 §3): a batched lookup has exactly the results and expiries of
 * the same lookups one by one, in key order: two engines with one history, one
 * asked in batches (of every length across the prefetch group), the other key by
 * key. The keys mix live blocks, absent ones, a reservation being written,
 * expired blocks (removed) and an expired pinned one (EXPIRED_HELD), and repeat
 * keys so that a removal seen by one is seen by the next. */
static void test_batch_lookup_is_the_lookups_in_order(void **state)
{
    (void)state;
    tier_slots_config_t cfg = {.policy = "lru", .capacity = 256, .max_batch = 4, .hash_seed = 7};
    tier_slots_t *a = tier_slots_new(&cfg), *b = tier_slots_new(&cfg);
    assert_non_null(a);
    assert_non_null(b);
    for (int e = 0; e < 2; e++) {
        tier_slots_t *s = e ? b : a;
        for (uint32_t id = 0; id < 150; id++)
            put(s, id, id % 7 == 0 ? 500 : 0, 100); /* every 7th expires at 500 */
        (void)reserve1(s, 900, 0, 100);             /* being written */
        assert_int_equal(pin(s, 14, 100), 0);       /* expires pinned */
    }
    uint32_t n = 0, ids[400];
    for (uint32_t i = 0; i < 200; i++) {
        ids[n++] = (i * 37) % 170; /* 150..169 absent */
        if (i % 9 == 0) {
            uint32_t again = ids[n - 1];
            ids[n++] = (i % 2) ? 900 : again; /* the reservation, or the key again */
        }
    }
    tier_key_t keys[400];
    keys_of(keys, ids, n);
    tier_slot_info_t ia[400], ib;
    int ra[400];
    for (uint32_t off = 0, len = 1; off < n; off += len, len = len % 37 + 1) {
        uint32_t m = n - off < len ? n - off : len;
        assert_int_equal(tier_slots_lookup_batch(a, INST, &keys[off], m, 1000, &ia[off], &ra[off]),
                         0);
        for (uint32_t i = off; i < off + m; i++) {
            memset(&ib, 0, sizeof ib);
            int rb = tier_slots_lookup(b, INST, &keys[i], 1000, &ib);
            assert_int_equal(ra[i], rb);
            if (rb == 0 || rb == TIER_SLOTS_EXPIRED || rb == TIER_SLOTS_EXPIRED_HELD) {
                assert_int_equal(ia[i].slot, ib.slot);
                assert_memory_equal(&ia[i].key, &ib.key, sizeof ib.key);
                assert_int_equal(ia[i].deadline_ms, ib.deadline_ms);
            }
        }
    }
    tier_slots_stats_t sa = stats(a), sb = stats(b);
    assert_int_equal(sa.expirations, sb.expirations);
    assert_true(sa.expirations > 0);
    assert_int_equal(sa.committed, sb.committed);
    assert_int_equal(tier_slots_check(a), 0);
    /* bad arguments */
    assert_int_equal(tier_slots_lookup_batch(NULL, INST, keys, 1, 0, ia, ra), TIER_SLOTS_EINVAL);
    assert_int_equal(tier_slots_lookup_batch(a, INST, NULL, 1, 0, ia, ra), TIER_SLOTS_EINVAL);
    assert_int_equal(tier_slots_lookup_batch(a, INST, keys, 1, 0, NULL, ra), TIER_SLOTS_EINVAL);
    assert_int_equal(tier_slots_lookup_batch(a, INST, keys, 0, 0, NULL, NULL), 0);
    tier_slots_destroy(&a);
    tier_slots_destroy(&b);
}

/* Rule: touch_at is touch, the slot a lookup gave saving the second search; a
 * slot that is not the key's (another block, a free or reserved record, out of
 * range) falls back to the search by key. */
static void test_touch_at_is_touch(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 8, 4);
    uint32_t s1 = put(s, 1, 0, 10), s2 = put(s, 2, 0, 10);
    (void)put(s, 3, 0, 10);
    tier_key_t k1 = K(1), k9 = K(9);
    assert_int_equal(tier_slots_touch_at(s, s1, INST, &k1, 20, 0), 0);
    assert_int_equal(tier_slots_touch_at(s, s2, INST, &k1, 20, 0), 0);   /* another's slot */
    assert_int_equal(tier_slots_touch_at(s, 4000, INST, &k1, 20, 0), 0); /* out of range */
    assert_int_equal(tier_slots_touch_at(s, s1, INST + 1, &k1, 20, 0), TIER_SLOTS_ENOENT);
    assert_int_equal(tier_slots_touch_at(s, s1, INST, &k9, 20, 0), TIER_SLOTS_ENOENT);
    assert_int_equal(tier_slots_touch_at(s, s1, INST, NULL, 20, 0), TIER_SLOTS_EINVAL);
    assert_int_equal(tier_slots_touch_at(NULL, s1, INST, &k1, 20, 0), TIER_SLOTS_EINVAL);
    /* 1 was touched last: 2 is the coldest */
    tier_victim_t v[1];
    size_t nv = 0;
    tier_key_t fill[6];
    for (uint32_t i = 0; i < 6; i++)
        fill[i] = K(100 + i);
    tier_resv_t r[4];
    assert_int_equal(tier_slots_reserve(s, INST, fill, 4, 0, 30, 0, r, NULL, NULL), 0);
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(tier_slots_commit(s, INST, &fill[i], true, 30, NULL), 0);
    assert_int_equal(tier_slots_reserve(s, INST, &fill[4], 1, 0, 40, 0, r, v, &nv), 0);
    assert_int_equal(nv, 0); /* the eighth slot */
    assert_int_equal(tier_slots_commit(s, INST, &fill[4], true, 40, NULL), 0);
    assert_int_equal(tier_slots_reserve(s, INST, &fill[5], 1, 0, 50, 0, r, v, &nv), 0);
    assert_int_equal(nv, 1);
    tier_key_t k2 = K(2);
    assert_memory_equal(&v[0].key, &k2, sizeof k2);
    assert_int_equal(tier_slots_check(s), 0);
    tier_slots_destroy(&s);
}

/* Rule: set_deadline gives a live block exactly the deadline asked (a block
 * without one gets one, an earlier one shortens it, 0 takes it away) and expiry
 * follows it; an absent key is ENOENT. */
static void test_set_deadline_is_exact(void **state)
{
    (void)state;
    tier_slots_t *s = mk("lru", 8, 4);
    (void)put(s, 1, 0, 10);
    (void)put(s, 2, 5000, 10);
    (void)put(s, 3, 5000, 10);
    tier_key_t k1 = K(1), k2 = K(2), k3 = K(3), k9 = K(9);
    assert_int_equal(tier_slots_set_deadline(s, INST, &k1, 20, 100), 0); /* none -> 100 */
    assert_int_equal(tier_slots_set_deadline(s, INST, &k2, 20, 200), 0); /* 5000 -> 200 */
    assert_int_equal(tier_slots_set_deadline(s, INST, &k3, 20, 0), 0);   /* 5000 -> none */
    assert_int_equal(tier_slots_set_deadline(s, INST, &k9, 20, 100), TIER_SLOTS_ENOENT);
    assert_int_equal(tier_slots_set_deadline(s, INST, NULL, 20, 100), TIER_SLOTS_EINVAL);
    tier_slot_info_t info;
    assert_int_equal(lookup(s, 1, 50, &info), 0);
    assert_int_equal(info.deadline_ms, 100);
    assert_int_equal(tier_slots_check(s), 0);
    assert_int_equal(lookup(s, 1, 150, &info), TIER_SLOTS_EXPIRED);
    assert_int_equal(lookup(s, 2, 250, &info), TIER_SLOTS_EXPIRED);
    assert_int_equal(lookup(s, 3, 9000, &info), 0);
    assert_int_equal(info.deadline_ms, 0);
    assert_int_equal(tier_slots_check(s), 0);
    tier_slots_destroy(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_lookup_is_the_lookups_in_order),
        cmocka_unit_test(test_touch_at_is_touch),
        cmocka_unit_test(test_set_deadline_is_exact),
        cmocka_unit_test(test_policies_found_by_name_unknown_refused),
        cmocka_unit_test(test_fixed_pool_free_list_reuses_released_slots),
        cmocka_unit_test(test_keys_of_different_instances_never_match),
        cmocka_unit_test(test_writing_blocks_are_not_served),
        cmocka_unit_test(test_reserve_is_all_or_nothing),
        cmocka_unit_test(test_no_evict_takes_free_and_expired_only),
        cmocka_unit_test(test_batch_over_limit_rejected),
        cmocka_unit_test(test_duplicate_key_in_batch_rejected),
        cmocka_unit_test(test_eviction_goes_straight_to_reserved),
        cmocka_unit_test(test_rollback_restores_victims_in_place_with_deadlines),
        cmocka_unit_test(test_rollback_restores_policy_order),
        cmocka_unit_test(test_rollback_returns_shared_and_readmit_references),
        cmocka_unit_test(test_batch_does_not_evict_its_own_members),
        cmocka_unit_test(test_batch_fails_rather_than_evict_own_members),
        cmocka_unit_test(test_result_independent_of_batch_order),
        cmocka_unit_test(test_shared_reservation_last_commit_decides),
        cmocka_unit_test(test_shared_reservation_any_success_commits),
        cmocka_unit_test(test_readmission_keeps_slot_and_holds_it),
        cmocka_unit_test(test_readmission_revives_expired_block),
        cmocka_unit_test(test_skip_serving_reports_serving_without_reserving),
        cmocka_unit_test(test_skip_serving_never_readmits_a_pinned_expired_block),
        cmocka_unit_test(test_pin_counts_nest),
        cmocka_unit_test(test_pinned_never_evicted),
        cmocka_unit_test(test_touch_refreshes_policy_order),
        cmocka_unit_test(test_touch_extends_deadline_never_shortens),
        cmocka_unit_test(test_clock_never_goes_back),
        cmocka_unit_test(test_lazy_expiry_removes_expired_unpinned),
        cmocka_unit_test(test_expired_swept_first_under_pressure),
        cmocka_unit_test(test_pinned_expired_deferred),
        cmocka_unit_test(test_stale_heap_compaction_bounded),
        cmocka_unit_test(test_expire_round_is_bounded),
        cmocka_unit_test(test_remove_refuses_held_blocks),
        cmocka_unit_test(test_adopt_places_block_at_given_slot),
        cmocka_unit_test(test_counters_track_states),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
