/* test_tier_slots_alloc.c — the slot engine's "no allocation per operation"
 * rule (DESIGN.md §8, STYLE.md 6), checked by counting every malloc, calloc,
 * realloc, aligned_alloc and posix_memalign made from the engine's code. The
 * build links this test alone with -Wl,--wrap=<each> (tests/CMakeLists.txt);
 * the __real_ symbols are weak so a build without the wrap skips the test
 * instead of failing to link. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tier_slots.h"

extern void *__real_malloc(size_t size) __attribute__((weak));
extern void *__real_calloc(size_t n, size_t size) __attribute__((weak));
extern void *__real_realloc(void *p, size_t size) __attribute__((weak));
extern void *__real_aligned_alloc(size_t align, size_t size) __attribute__((weak));
extern int __real_posix_memalign(void **p, size_t align, size_t size) __attribute__((weak));

static unsigned long s_allocs;

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
void *__wrap_aligned_alloc(size_t align, size_t size);
int __wrap_posix_memalign(void **p, size_t align, size_t size);

void *__wrap_malloc(size_t size)
{
    s_allocs++;
    return __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
    s_allocs++;
    return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
    s_allocs++;
    return __real_realloc(p, size);
}

void *__wrap_aligned_alloc(size_t align, size_t size)
{
    s_allocs++;
    return __real_aligned_alloc(align, size);
}

int __wrap_posix_memalign(void **p, size_t align, size_t size)
{
    s_allocs++;
    return __real_posix_memalign(p, align, size);
}

static tier_key_t K(uint32_t id)
{
    tier_key_t k;
    memset(&k, 0, sizeof(k));
    memcpy(k.b, &id, sizeof(id));
    k.b[15] = (uint8_t)(id * 31u);
    return k;
}

static uint64_t s_rng = 0x2545f4914f6cdd1dull;

static uint32_t rnd(uint32_t n)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return (uint32_t)(s_rng % n);
}

/* Reservations owed a commit, so the pool keeps turning over. */
#define NTICKETS 512
static tier_key_t s_tickets[NTICKETS];
static size_t s_ntickets;

static void reserve_some(tier_slots_t *s, uint64_t now)
{
    tier_key_t keys[8];
    tier_resv_t out[8];
    tier_victim_t v[8];
    size_t nv, n = 1 + rnd(8);
    if (s_ntickets + n > NTICKETS)
        return;
    for (size_t i = 0; i < n; i++)
        keys[i] = K(rnd(200));
    if (tier_slots_reserve(s, 1, keys, n, rnd(2) ? now + 1 + rnd(50) : 0, now, rnd(2), out, v,
                           &nv) != 0)
        return;
    for (size_t i = 0; i < n; i++)
        if (out[i].kind != TIER_RESV_SERVING)
            s_tickets[s_ntickets++] = keys[i];
}

static void commit_one(tier_slots_t *s, uint64_t now)
{
    if (s_ntickets == 0)
        return;
    size_t i = rnd((uint32_t)s_ntickets);
    tier_key_t k = s_tickets[i];
    s_tickets[i] = s_tickets[--s_ntickets];
    tier_commit_outcome_t oc;
    assert_int_equal(tier_slots_commit(s, 1, &k, rnd(4) != 0, now, &oc), 0);
}

static bool s_walk_step(void *arg, uint32_t slot)
{
    (void)arg;
    return slot == UINT32_MAX;
}

/* One pass over every operation, including the paths that evict, expire,
 * defer, roll back and compact. */
static void exercise(tier_slots_t *s, uint64_t *now)
{
    tier_victim_t v[8];
    size_t nv;
    tier_slot_info_t info;
    tier_slots_stats_t st;
    uint32_t slot;
    s_ntickets = 0;
    for (int round = 0; round < 20000; round++) {
        tier_key_t k = K(rnd(200));
        switch (rnd(12)) {
        case 0:
        case 1:
            reserve_some(s, *now);
            break;
        case 2:
        case 3:
        case 4:
        case 5:
            commit_one(s, *now);
            break;
        case 6:
            tier_slots_pin(s, 1, &k, *now, &slot);
            break;
        case 7:
            tier_slots_unpin(s, 1, &k);
            tier_slots_unpin(s, 1, &k);
            break;
        case 8:
            tier_slots_touch(s, 1, &k, *now, *now + rnd(80));
            break;
        case 9:
            tier_slots_lookup(s, 1, &k, *now, &info);
            tier_slots_peek(s, 1, &k, &info);
            break;
        case 10:
            *now += rnd(4);
            if (rnd(4) == 0)
                tier_slots_expire(s, *now, v, 1 + rnd(8), &nv);
            break;
        default:
            if (rnd(4) == 0)
                tier_slots_remove(s, 1, &k);
            tier_slots_adopt(s, 1, &k, rnd(64), *now + rnd(50), *now);
            tier_slots_stats(s, &st);
            tier_slots_walk_coldest(s, 64, s_walk_step, NULL);
            break;
        }
    }
    while (s_ntickets > 0)
        commit_one(s, *now);
}

/* Rule: no allocation per operation — after tier_slots_new, no call of the
 * engine allocates, whatever path it takes. */
static void test_no_allocation_per_operation(void **state)
{
    (void)state;
    if (!__real_malloc)
        skip(); /* built without -Wl,--wrap: nothing to count */
    const char *policies[4] = {"lru", "clock", "fifo", "s3fifo"};
    for (int p = 0; p < 4; p++) {
        tier_slots_config_t cfg = {
            .policy = policies[p], .capacity = 64, .max_batch = 8, .heap_stale_bound = 4};
        unsigned long before_new = s_allocs;
        tier_slots_t *s = tier_slots_new(&cfg);
        assert_non_null(s);
        assert_true(s_allocs > before_new); /* the counter sees the engine's allocations */
        uint64_t now = 1;
        unsigned long before = s_allocs;
        exercise(s, &now);
        assert_int_equal(tier_slots_check(s), 0);
        assert_int_equal(s_allocs, before);
        tier_slots_stats_t st;
        tier_slots_stats(s, &st);
        /* The pass did reach the interesting paths. */
        assert_true(st.evictions > 0 && st.expirations > 0 && st.rollbacks > 0);
        assert_true(st.heap_compactions > 0);
        tier_slots_destroy(&s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_allocation_per_operation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
