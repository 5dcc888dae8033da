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
    assert_null(tier_policy_find("LRU"));
    assert_null(tier_policy_find(""));
    assert_true(tier_policy_count() >= 3);
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

/* Rule: lru evicts the least recently admitted or touched slot. */
static void test_lru_evicts_least_recently_used(void **state)
{
    (void)state;
    fixture_t f;
    fx_init(&f, "lru");
    for (uint32_t s = 0; s < 4; s++)
        f.ops->admitted(f.st, s);
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
        f.ops->admitted(f.st, s);
    f.ops->touched(f.st, 0);
    assert_int_equal(pick(&f), 0);
    f.ops->released(f.st, 0);
    f.ops->admitted(f.st, 0); /* re-admitted: now the newest */
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
        f.ops->admitted(f.st, s);
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
        f.ops->admitted(f.st, s);
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
        f.ops->admitted(f.st, s);
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
        g.ops->admitted(g.st, s);
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

/* Rules every built-in policy keeps run once per policy, its name the test's state. */
#define UNDER_POLICY(f, policy)                                                                    \
    {                                                                                              \
        .name = #f "/" policy, .test_func = f, .initial_state = (void *)policy                     \
    }
#define UNDER_EVERY_POLICY(f)                                                                      \
    UNDER_POLICY(f, "lru"), UNDER_POLICY(f, "clock"), UNDER_POLICY(f, "fifo")

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_finds_builtins_by_name),
        cmocka_unit_test(test_registry_accepts_new_refuses_duplicates),
        cmocka_unit_test(test_lru_evicts_least_recently_used),
        cmocka_unit_test(test_fifo_ignores_touch),
        cmocka_unit_test(test_clock_gives_second_chance),
        UNDER_EVERY_POLICY(test_pick_skips_non_evictable),
        UNDER_EVERY_POLICY(test_restore_puts_slot_back_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
