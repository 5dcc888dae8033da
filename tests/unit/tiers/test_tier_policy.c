/* test_tier_policy.c — the replacement policies on their own (DESIGN.md §8:
 * "a policy only orders slots: admitted, touched, released, pick victim") and
 * their registry by name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <errno.h>

#include <cmocka.h>

#include "tier_policy.h"

#define CAP 8

typedef struct {
    void *st;
    const tier_policy_ops_t *ops;
    bool blocked[CAP]; /* slots the engine would not let go (pinned, ...) */
} fixture_t;

static bool s_ok(const void *ctx, uint32_t slot)
{
    const fixture_t *f = ctx;
    return !f->blocked[slot];
}

static void fx_init(fixture_t *f, const char *name)
{
    f->ops = tier_policy_find(name);
    assert_non_null(f->ops);
    f->st = malloc(f->ops->state_size(CAP));
    assert_non_null(f->st);
    f->ops->init(f->st, CAP);
    for (int i = 0; i < CAP; i++)
        f->blocked[i] = false;
}

static void fx_fini(fixture_t *f)
{
    free(f->st);
}

/* A key hash whose fingerprint (s3fifo: its high 32 bits) is id's own. */
static uint64_t H(uint32_t id)
{
    return (uint64_t)(0x9e3779b9u * (id + 1)) << 32 | id;
}

/* slot becomes committed, as the engine tells it: with its facts when the
 * policy takes them (key hash H(id), reserve batch), else plainly. */
static void admit_as(fixture_t *f, uint32_t slot, uint32_t id, uint32_t batch)
{
    if (f->ops->admitted_facts) {
        tier_policy_facts_t facts = {H(id), batch};
        f->ops->admitted_facts(f->st, slot, &facts);
    } else {
        f->ops->admitted(f->st, slot);
    }
}

/* slot admitted with its own number as key id and no batch. */
static void admit(fixture_t *f, uint32_t slot)
{
    admit_as(f, slot, slot, 0);
}

/* The whole order (next_coldest from the start), count returned. */
static uint32_t walk(const fixture_t *f, uint32_t *out)
{
    uint64_t cursor = 0;
    uint32_t n = 0, slot;
    while (f->ops->next_coldest(f->st, &cursor, &slot)) {
        assert_true(n < CAP);
        out[n++] = slot;
    }
    return n;
}

/* The order is exactly want[0..n-1]. */
static void assert_order(const fixture_t *f, const uint32_t *want, uint32_t n)
{
    uint32_t got[CAP];
    uint32_t k = walk(f, got);
    for (uint32_t i = 0; i < n && i < k; i++)
        if (got[i] != want[i])
            fail_msg("order[%u]: slot %u, expected %u", i, got[i], want[i]);
    assert_int_equal(k, n);
}

#define ORDER(f, ...)                                                                              \
    do {                                                                                           \
        const uint32_t want_[] = {__VA_ARGS__};                                                    \
        assert_order(f, want_, (uint32_t)(sizeof(want_) / sizeof(want_[0])));                      \
    } while (0)

static uint32_t pick(fixture_t *f)
{
    uint32_t v = 999;
    assert_true(f->ops->pick_victim(f->st, s_ok, f, &v));
    return v;
}

/* Rule: built-in policies are registered by name; unknown names are not found. */
static void test_registry_finds_builtins_by_name(void **state)
{
    (void)state;
    assert_ptr_equal(tier_policy_find("lru"), &tier_policy_lru);
    assert_ptr_equal(tier_policy_find("clock"), &tier_policy_clock);
    assert_ptr_equal(tier_policy_find("fifo"), &tier_policy_fifo);
    assert_ptr_equal(tier_policy_find("s3fifo"), &tier_policy_s3fifo);
    assert_null(tier_policy_find("LRU"));
    assert_null(tier_policy_find(""));
    assert_true(tier_policy_count() >= 4);
    assert_string_equal(tier_policy_at(0)->name, "lru");
    assert_null(tier_policy_at(tier_policy_count()));
}

/* Rule: out-of-tree policies register by name; duplicates and incomplete
 * tables are refused. */
static void test_registry_accepts_new_refuses_duplicates(void **state)
{
    (void)state;
    static tier_policy_ops_t mine;
    mine = tier_policy_fifo;
    mine.name = "fifo2";
    assert_int_equal(tier_policy_register(&mine), 0);
    assert_ptr_equal(tier_policy_find("fifo2"), &mine);
    assert_int_equal(tier_policy_register(&mine), -EEXIST);
    static tier_policy_ops_t broken;
    broken = tier_policy_lru;
    broken.name = "broken";
    broken.pick_victim = NULL;
    assert_int_equal(tier_policy_register(&broken), -EINVAL);
    assert_null(tier_policy_find("broken"));
}

/* Rule: a policy may take its admissions with their facts (admitted_facts)
 * instead of plainly (admitted), but must have one of the two. */
static void test_registry_needs_one_admission_op(void **state)
{
    (void)state;
    static tier_policy_ops_t facts_only;
    facts_only = tier_policy_s3fifo;
    facts_only.name = "s3fifo2";
    assert_null(facts_only.admitted);
    assert_int_equal(tier_policy_register(&facts_only), 0);
    assert_ptr_equal(tier_policy_find("s3fifo2"), &facts_only);
    static tier_policy_ops_t neither;
    neither = tier_policy_s3fifo;
    neither.name = "neither";
    neither.admitted_facts = NULL;
    assert_int_equal(tier_policy_register(&neither), -EINVAL);
    neither = tier_policy_lru;
    neither.name = "neither";
    neither.admitted = NULL;
    assert_int_equal(tier_policy_register(&neither), -EINVAL);
    assert_null(tier_policy_find("neither"));
}

/* Rule: lru evicts the least recently admitted or touched slot. */
static void test_lru_evicts_least_recently_used(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f, "lru");
    for (uint32_t s = 0; s < 4; s++)
        admit(&f, s);
    f.ops->touched(f.st, 0);
    f.ops->touched(f.st, 2);
    assert_int_equal(pick(&f), 1);
    f.ops->released(f.st, 1);
    assert_int_equal(pick(&f), 3);
    f.ops->released(f.st, 3);
    assert_int_equal(pick(&f), 0);
    fx_fini(&f);
}

/* Rule: fifo evicts in admission order; touches do not reorder. */
static void test_fifo_ignores_touch(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f, "fifo");
    for (uint32_t s = 0; s < 4; s++)
        admit(&f, s);
    f.ops->touched(f.st, 0);
    assert_int_equal(pick(&f), 0);
    f.ops->released(f.st, 0);
    admit(&f, 0); /* re-admitted: now the newest */
    assert_int_equal(pick(&f), 1);
    fx_fini(&f);
}

/* Rule: clock gives touched slots a second chance and sweeps in slot order. */
static void test_clock_gives_second_chance(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f, "clock");
    for (uint32_t s = 0; s < 4; s++)
        admit(&f, s);
    f.ops->touched(f.st, 0);
    f.ops->touched(f.st, 1);
    assert_int_equal(pick(&f), 2); /* 0 and 1 lose their bit */
    f.ops->released(f.st, 2);
    assert_int_equal(pick(&f), 3);
    f.ops->released(f.st, 3);
    assert_int_equal(pick(&f), 0); /* wrapped: bits were cleared */
    fx_fini(&f);
}

/* Rule: a policy's pick skips slots the engine may not take (pinned,
 * reserved) and reports none when nothing may be taken (policy: the test's state). */
static void test_pick_skips_non_evictable(void **state)
{
    const char *policy = *state;
    fixture_t f;
    fx_init(&f, policy);
    for (uint32_t s = 0; s < 3; s++)
        admit(&f, s);
    f.blocked[0] = f.blocked[1] = true;
    assert_int_equal(pick(&f), 2);
    f.blocked[2] = true;
    uint32_t v;
    assert_false(f.ops->pick_victim(f.st, s_ok, &f, &v));
    fx_fini(&f);
}

/* Rule: a released slot restored from its position memo (in reverse order
 * of release) is back exactly where it was, so the same victims follow (policy:
 * the test's state). */
static void test_restore_puts_slot_back_in_place(void **state)
{
    const char *policy = *state;
    fixture_t f;
    fx_init(&f, policy);
    for (uint32_t s = 0; s < 6; s++)
        admit(&f, s);
    f.ops->touched(f.st, 1);
    /* Release 2 then 4 then 0, restore in reverse. */
    uint32_t order[3] = {2, 4, 0};
    uint64_t memo[3];
    for (int i = 0; i < 3; i++) {
        memo[i] = f.ops->position(f.st, order[i]);
        f.ops->released(f.st, order[i]);
    }
    for (int i = 2; i >= 0; i--)
        f.ops->restore(f.st, order[i], memo[i]);
    /* Victim sequence equals that of an untouched twin. */
    fixture_t g;
    fx_init(&g, policy);
    for (uint32_t s = 0; s < 6; s++)
        admit(&g, s);
    g.ops->touched(g.st, 1);
    for (int i = 0; i < 6; i++) {
        uint32_t a = pick(&f), b = pick(&g);
        assert_int_equal(a, b);
        f.ops->released(f.st, a);
        g.ops->released(g.st, b);
    }
    fx_fini(&f);
    fx_fini(&g);
}

/* ---- s3fifo (tier_policy_s3fifo.c's header): with CAP 8, S's target is 3 ---- */

/* slot admitted, left S unused (its fingerprint into the ghost) and admitted
 * again under the same key id: now in M with a use count of 0. */
static void admit_to_main(fixture_t *f, uint32_t slot, uint32_t id)
{
    admit_as(f, slot, id, 0);
    f->ops->released(f->st, slot);
    admit_as(f, slot, id, 0);
}

/* Rule: new blocks go to S, and the victim comes from S (its oldest unused
 * block) while S holds at least 2/5 of the capacity, even with M holding an
 * unused block; below that, from M. */
static void test_s3fifo_small_queue_first_while_at_target(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f, "s3fifo");
    admit_to_main(&f, 7, 70);
    for (uint32_t s = 0; s < 3; s++)
        admit(&f, s);
    ORDER(&f, 0, 1, 2, 7); /* S (3 of 8 = its target) first, then M */
    assert_int_equal(pick(&f), 0);
    f.ops->released(f.st, 0);
    ORDER(&f, 7, 1, 2); /* S below its target: M first */
    assert_int_equal(pick(&f), 7);
    f.ops->released(f.st, 7);
    ORDER(&f, 1, 2); /* M empty: S */
    assert_int_equal(pick(&f), 1);
    fx_fini(&f);
}

/* Rule: S's oldest evictable block is the victim when unused since it came
 * in; a used one moves to M's newest end instead, its count back to 0. */
static void test_s3fifo_used_small_block_moves_to_main(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f, "s3fifo");
    for (uint32_t s = 0; s < 4; s++)
        admit(&f, s);
    f.ops->touched(f.st, 0);
    ORDER(&f, 1, 2, 3, 0); /* the unused first, then the used */
    assert_int_equal(pick(&f), 1);
    ORDER(&f, 1, 2, 3, 0); /* 0 now in M, unused: after S's unused */
    f.ops->released(f.st, 1);
    ORDER(&f, 0, 2, 3); /* S below its target: M first, 0 unused there */
    assert_int_equal(pick(&f), 0);
    fx_fini(&f);
}

/* Rule: a block released from S unused enters the ghost; re-admitted under
 * the same key hash it goes to M, once (the entry is used up). A used block
 * released from S, and a block released from M, do not enter the ghost. */
static void test_s3fifo_ghost_readmits_to_main(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f, "s3fifo");
    admit_as(&f, 0, 10, 0);
    f.ops->released(f.st, 0); /* unused, from S: remembered */
    admit_as(&f, 1, 11, 0);
    f.ops->touched(f.st, 1);
    f.ops->released(f.st, 1); /* used: not remembered */
    admit_as(&f, 2, 10, 0);
    admit_as(&f, 3, 11, 0);
    ORDER(&f, 2, 3); /* 2 in M (M first: S below target), 3 in S */
    assert_int_equal(pick(&f), 2);
    f.ops->released(f.st, 2); /* from M: not remembered */
    admit_as(&f, 4, 10, 0);   /* the ghost entry was used up: S */
    ORDER(&f, 3, 4);
    fx_fini(&f);
}

/* s3fifo's ghost bucket of a key id, as tier_policy_s3fifo.c computes it
 * (murmur3's finaliser of the fingerprint; CAP 8 gives 8 buckets). */
static uint32_t s3_bucket(uint32_t id)
{
    uint32_t h = (uint32_t)(H(id) >> 32);
    h = h ? h : 1;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h & 7u;
}

/* Rule: a ghost entry counts for 3 x capacity insertions, also after its
 * 16-bit epoch has wrapped: an entry nobody overwrote (its bucket never
 * chosen again) must not look young 65,536 epochs later. Fails without the
 * sweep of dead entries. */
static void test_s3fifo_ghost_entry_does_not_come_back_after_wrap(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f, "s3fifo");
    admit_as(&f, 0, 10, 0);
    f.ops->released(f.st, 0); /* remembered at epoch 0 */
    uint32_t home = s3_bucket(10), id = 1000;
    for (uint32_t n = 0; n < 65536 + 4; n++) { /* one epoch each (CAP 8) */
        while (s3_bucket(id) == home)
            id++;
        admit_as(&f, 1, id++, 0);
        f.ops->released(f.st, 1);
    }
    admit_as(&f, 2, 10, 0);
    assert_int_equal(f.ops->position(f.st, 2) >> 32 & 3u, 1u); /* S, not M */
    fx_fini(&f);
}

/* Rule: M's oldest block with a use count comes round to M's newest end with
 * the count minus one; the count is capped at 3 however often it is touched. */
static void test_s3fifo_main_reinserts_with_count_minus_one(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f, "s3fifo");
    admit_to_main(&f, 0, 100);
    for (int i = 0; i < 5; i++)
        f.ops->touched(f.st, 0);
    /* Each round: a fresh unused block behind 0 in M; 0 passes (count 3, 2,
     * 1) and the fresh one goes, until 0's count is spent. */
    for (uint32_t round = 0; round < 3; round++) {
        admit_to_main(&f, 1, 200 + round);
        ORDER(&f, 1, 0);
        assert_int_equal(pick(&f), 1);
        f.ops->released(f.st, 1);
    }
    admit_to_main(&f, 1, 300);
    ORDER(&f, 0, 1); /* 0's count is 0 now: unused, and the oldest */
    assert_int_equal(pick(&f), 0);
    fx_fini(&f);
}

/* Rule: slots the engine may not take are passed over in place: a used S
 * block stays in S, an M block keeps its place and its count. */
static void test_s3fifo_non_evictable_passed_over_in_place(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f, "s3fifo");
    admit_to_main(&f, 7, 70);
    for (uint32_t s = 0; s < 3; s++)
        admit(&f, s);
    f.ops->touched(f.st, 0);
    f.blocked[0] = true;
    assert_int_equal(pick(&f), 1);
    f.ops->released(f.st, 1);
    f.blocked[0] = false;
    ORDER(&f, 7, 2, 0); /* 0 still in S (used), not moved to M */
    fx_fini(&f);

    fx_init(&f, "s3fifo");
    admit_to_main(&f, 0, 10);
    admit_to_main(&f, 1, 11);
    f.ops->touched(f.st, 0);
    f.blocked[0] = true;
    assert_int_equal(pick(&f), 1);
    f.ops->released(f.st, 1);
    f.blocked[0] = false;
    admit_to_main(&f, 2, 12);
    ORDER(&f, 2, 0);               /* 0 still used */
    assert_int_equal(pick(&f), 2); /* 0 (count 1 kept) comes round first */
    fx_fini(&f);
}

/* Rule: a batch whose keys split between S and M (one came back from the
 * ghost) keeps its prefix order in each queue: the anchor is per queue, so
 * the key after the M one still goes just older than the S key before it. */
static void test_s3fifo_batch_split_by_ghost_keeps_order(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f, "s3fifo");
    admit_as(&f, 4, 11, 0);
    f.ops->released(f.st, 4); /* 11 remembered */
    admit_as(&f, 0, 10, 5);
    admit_as(&f, 1, 11, 5); /* from the ghost: M */
    admit_as(&f, 2, 12, 5);
    admit_as(&f, 3, 13, 5);
    ORDER(&f, 3, 2, 0, 1); /* S (3 of 8, its target) tail first, then M */
    fx_fini(&f);
}

/* Rule: consecutive admissions of one nonzero batch are placed each just
 * older than the one before (a request's tail leaves before its head);
 * batch 0, or another batch, is placed newest. */
static void test_s3fifo_batch_tail_leaves_first(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f, "s3fifo");
    for (uint32_t s = 0; s < 3; s++)
        admit_as(&f, s, s, 7);
    ORDER(&f, 2, 1, 0);
    admit_as(&f, 3, 3, 0);
    admit_as(&f, 4, 4, 0); /* batch 0 twice: each newest */
    ORDER(&f, 2, 1, 0, 3, 4);
    admit_as(&f, 5, 5, 9);
    admit_as(&f, 6, 6, 9);
    ORDER(&f, 2, 1, 0, 3, 4, 6, 5);
    admit_as(&f, 7, 7, 7); /* batch 7 again, but not right after batch 7 */
    ORDER(&f, 2, 1, 0, 3, 4, 6, 5, 7);
    assert_int_equal(pick(&f), 2);
    fx_fini(&f);
}

/* The state the restore and walk tests start from: S = 0, 1 (used), 2, 3
 * (at its target), M = 5 (used), 6. */
static void s3_setup(fixture_t *f)
{
    fx_init(f, "s3fifo");
    admit_to_main(f, 5, 50);
    admit_to_main(f, 6, 60);
    f->ops->touched(f->st, 5);
    for (uint32_t s = 0; s < 4; s++)
        admit(f, s);
    f->ops->touched(f->st, 1);
}

/* Rule: position then restore after a release puts the slot back exactly
 * (queue, place, count), restoring in reverse order of release, and takes
 * its fingerprint out of the ghost again. */
static void test_s3fifo_restore_exact_and_ghost_undone(void **state)
{
    (void)state;
    fixture_t f, g;
    s3_setup(&f);
    s3_setup(&g);
    ORDER(&f, 0, 2, 3, 6, 1, 5);
    /* 2 (S, unused: into the ghost), 1 (S, used), 6 (M), 5 (M, used). */
    uint32_t order[4] = {2, 1, 6, 5};
    uint64_t memo[4];
    for (int i = 0; i < 4; i++) {
        memo[i] = f.ops->position(f.st, order[i]);
        f.ops->released(f.st, order[i]);
    }
    for (int i = 3; i >= 0; i--)
        f.ops->restore(f.st, order[i], memo[i]);
    ORDER(&f, 0, 2, 3, 6, 1, 5);
    /* Key 2's fingerprint left the ghost again: a new block under it is new. */
    admit_as(&f, 7, 2, 0);
    admit_as(&g, 7, 2, 0);
    ORDER(&f, 0, 2, 3, 7, 6, 1, 5);
    for (int i = 0; i < 7; i++) {
        uint32_t a = pick(&f), b = pick(&g);
        assert_int_equal(a, b);
        f.ops->released(f.st, a);
        g.ops->released(g.st, b);
    }
    uint32_t v;
    assert_false(f.ops->pick_victim(f.st, s_ok, &f, &v));
    fx_fini(&f);
    fx_fini(&g);
}

/* Rule: next_coldest walks the documented order (the queue taken first, then
 * the other, each from its oldest, first the unused, then the used) and does
 * not change it. */
static void test_s3fifo_next_coldest_order(void **state)
{
    (void)state;
    fixture_t f, g;
    s3_setup(&f);
    s3_setup(&g);
    ORDER(&f, 0, 2, 3, 6, 1, 5); /* S at its target: S first */
    uint64_t cursor = 0;
    uint32_t slot;
    assert_true(f.ops->next_coldest(f.st, &cursor, &slot));
    assert_int_equal(slot, 0);
    assert_true(f.ops->next_coldest(f.st, &cursor, &slot));
    assert_int_equal(slot, 2);
    for (uint32_t s = 0; s < 3; s += 2) {
        f.ops->released(f.st, s);
        g.ops->released(g.st, s);
    }
    ORDER(&f, 6, 3, 5, 1); /* S below target: M first */
    ORDER(&f, 6, 3, 5, 1); /* walking again: the same */
    for (int i = 0; i < 4; i++) {
        uint32_t a = pick(&f), b = pick(&g);
        assert_int_equal(a, b);
        f.ops->released(f.st, a);
        g.ops->released(g.st, b);
    }
    uint32_t rest[CAP];
    assert_int_equal(walk(&f, rest), 0);
    fx_fini(&f);
    fx_fini(&g);
}

/* Rules every built-in policy keeps run once per policy, its name the test's state. */
#define UNDER_POLICY(f, policy)                                                                    \
    {                                                                                              \
        .name = #f "/" policy, .test_func = f, .initial_state = (void *)policy                     \
    }
#define UNDER_EVERY_POLICY(f)                                                                      \
    UNDER_POLICY(f, "lru"), UNDER_POLICY(f, "clock"), UNDER_POLICY(f, "fifo"),                     \
        UNDER_POLICY(f, "s3fifo")

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_finds_builtins_by_name),
        cmocka_unit_test(test_registry_accepts_new_refuses_duplicates),
        cmocka_unit_test(test_lru_evicts_least_recently_used),
        cmocka_unit_test(test_fifo_ignores_touch),
        cmocka_unit_test(test_clock_gives_second_chance),
        cmocka_unit_test(test_registry_needs_one_admission_op),
        cmocka_unit_test(test_s3fifo_small_queue_first_while_at_target),
        cmocka_unit_test(test_s3fifo_used_small_block_moves_to_main),
        cmocka_unit_test(test_s3fifo_ghost_readmits_to_main),
        cmocka_unit_test(test_s3fifo_ghost_entry_does_not_come_back_after_wrap),
        cmocka_unit_test(test_s3fifo_main_reinserts_with_count_minus_one),
        cmocka_unit_test(test_s3fifo_non_evictable_passed_over_in_place),
        cmocka_unit_test(test_s3fifo_batch_tail_leaves_first),
        cmocka_unit_test(test_s3fifo_batch_split_by_ghost_keeps_order),
        cmocka_unit_test(test_s3fifo_restore_exact_and_ghost_undone),
        cmocka_unit_test(test_s3fifo_next_coldest_order),
        UNDER_EVERY_POLICY(test_pick_skips_non_evictable),
        UNDER_EVERY_POLICY(test_restore_puts_slot_back_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
