/* test_sched_window.c — the window lifecycle (actors/sched_window.c, DESIGN.md §2
 * "window"): every (state, event) pair is either the one transition of the table
 * or refused (-1) with nothing changed; PREPARE hands out the token, LAPSE records
 * it as lapsed, TIER_RESET counts stale entries and keeps the window open; COPY
 * holds a prefetch window until COPIED. And the windows' entry pool. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sched_window.h"

#define NO -1 /* no transition */

/* The expected table: next state, or NO. */
static const int s_want[SCHED_WIN_STATES][SCHED_WEV_COUNT] = {
    /*            PREPARE         CANCEL            COMPLETE              DONE
                  HANDOFF         LAPSE             END                   TIER_RESET
                  COPY            COPIED */
    [SCHED_WIN_CLOSED] = {SCHED_WIN_OPEN, NO, NO, NO, NO, NO, NO, NO, NO, NO},
    [SCHED_WIN_OPEN] = {NO, SCHED_WIN_CLOSED, SCHED_WIN_COMPLETING, NO, NO, SCHED_WIN_CLOSED,
                        SCHED_WIN_CLOSED, SCHED_WIN_OPEN, SCHED_WIN_COPYING, NO},
    [SCHED_WIN_COMPLETING] = {NO, NO, NO, SCHED_WIN_CLOSED, SCHED_WIN_CLOSED, NO, NO, NO, NO, NO},
    [SCHED_WIN_COPYING] = {NO, NO, NO, NO, NO, NO, SCHED_WIN_ABANDONED, NO, NO, SCHED_WIN_OPEN},
    [SCHED_WIN_ABANDONED] = {NO, NO, NO, NO, NO, NO, NO, NO, NO, SCHED_WIN_CLOSED},
};

static sched_window_t s_in(sched_win_state_t st)
{
    sched_window_t w;
    sched_window_init(&w);
    w.state = st;
    w.token_id = 7;
    w.job_id = 3;
    w.opened_ms = 100;
    return w;
}

/* Every pair of the table, and an unknown transition changes nothing. */
static void test_every_transition_is_the_table_or_refused(void **state)
{
    (void)state;
    for (int s = 0; s < SCHED_WIN_STATES; s++)
        for (int e = 0; e < SCHED_WEV_COUNT; e++) {
            sched_window_t w = s_in((sched_win_state_t)s), before = w;
            int rc = sched_window_step(&w, (sched_win_event_t)e, 99, 5, 500);
            if (s_want[s][e] == NO) {
                if (rc != -1 || memcmp(&w, &before, sizeof w) != 0)
                    fail_msg("%s on %s: accepted or changed", sched_window_state_name(s),
                             sched_window_event_name(e));
                continue;
            }
            if (rc != 0 || (int)w.state != s_want[s][e])
                fail_msg("%s on %s: rc %d, state %s, want %s", sched_window_state_name(s),
                         sched_window_event_name(e), rc, sched_window_state_name(w.state),
                         sched_window_state_name(s_want[s][e]));
        }
}

/* A window's life: closed -> open -> completing -> closed, with the token of the
 * prepare; a second prepare or a complete of a closed window is refused. */
static void test_lifecycle_and_token(void **state)
{
    (void)state;
    sched_window_t w;
    sched_window_init(&w);
    assert_int_equal(w.state, SCHED_WIN_CLOSED);
    assert_int_equal(w.entries.head, UINT32_MAX);
    assert_int_equal(sched_window_step(&w, SCHED_WEV_COMPLETE, 0, 0, 0), -1);
    assert_int_equal(sched_window_step(&w, SCHED_WEV_PREPARE, 42, 9, 1000), 0);
    assert_true(sched_window_open(&w));
    assert_int_equal(w.token_id, 42);
    assert_int_equal(w.job_id, 9);
    assert_int_equal(w.opened_ms, 1000);
    assert_int_equal(sched_window_step(&w, SCHED_WEV_PREPARE, 43, 9, 1000), -1);
    assert_int_equal(w.token_id, 42);
    assert_int_equal(sched_window_step(&w, SCHED_WEV_TIER_RESET, 0, 0, 0), 0);
    assert_int_equal(w.stale, 1);
    assert_true(sched_window_open(&w));
    assert_int_equal(sched_window_step(&w, SCHED_WEV_COMPLETE, 0, 0, 0), 0);
    assert_false(sched_window_open(&w));
    assert_int_equal(sched_window_step(&w, SCHED_WEV_LAPSE, 0, 0, 0),
                     -1); /* not while completing */
    assert_int_equal(sched_window_step(&w, SCHED_WEV_HANDOFF, 0, 0, 0), 0);
    assert_int_equal(w.state, SCHED_WIN_CLOSED);
    assert_int_equal(w.lapsed_token_id, 0);
}

/* A prefetch copy holds its window: no lapse, no complete, no second copy while
 * copying; a request_end mid-copy abandons it until the copy ends. */
static void test_copy_holds_the_window(void **state)
{
    (void)state;
    sched_window_t w;
    sched_window_init(&w);
    assert_int_equal(sched_window_step(&w, SCHED_WEV_COPY, 0, 0, 0), -1);
    assert_int_equal(sched_window_step(&w, SCHED_WEV_PREPARE, 21, 2, 0), 0);
    assert_int_equal(sched_window_step(&w, SCHED_WEV_COPY, 0, 0, 0), 0);
    assert_int_equal(w.state, SCHED_WIN_COPYING);
    assert_false(sched_window_open(&w)); /* the lease scan passes it by */
    assert_int_equal(sched_window_step(&w, SCHED_WEV_LAPSE, 0, 0, 0), -1);
    assert_int_equal(sched_window_step(&w, SCHED_WEV_COMPLETE, 0, 0, 0), -1);
    assert_int_equal(sched_window_step(&w, SCHED_WEV_COPY, 0, 0, 0), -1);
    assert_int_equal(sched_window_step(&w, SCHED_WEV_COPIED, 0, 0, 4000), 0);
    assert_true(sched_window_open(&w));
    assert_int_equal(w.token_id, 21);
    assert_int_equal(w.opened_ms, 4000); /* the lease restarts when the copy ends */
    assert_int_equal(sched_window_step(&w, SCHED_WEV_COPY, 0, 0, 0), 0);
    assert_int_equal(sched_window_step(&w, SCHED_WEV_END, 0, 0, 0), 0);
    assert_int_equal(w.state, SCHED_WIN_ABANDONED);
    assert_int_equal(sched_window_step(&w, SCHED_WEV_END, 0, 0, 0), -1);
    assert_int_equal(sched_window_step(&w, SCHED_WEV_COPIED, 0, 0, 0), 0);
    assert_int_equal(w.state, SCHED_WIN_CLOSED);
    assert_string_equal(sched_window_state_name(SCHED_WIN_ABANDONED), "abandoned");
    assert_string_equal(sched_window_event_name(SCHED_WEV_COPIED), "copied");
}

/* LAPSE records the token, so a late complete of it is told EXPIRED. */
static void test_lapse_records_the_token(void **state)
{
    (void)state;
    sched_window_t w;
    sched_window_init(&w);
    assert_int_equal(sched_window_step(&w, SCHED_WEV_PREPARE, 11, 1, 0), 0);
    assert_int_equal(sched_window_step(&w, SCHED_WEV_LAPSE, 0, 0, 0), 0);
    assert_int_equal(w.state, SCHED_WIN_CLOSED);
    assert_int_equal(w.lapsed_token_id, 11);
    assert_int_equal(sched_window_step(&w, SCHED_WEV_PREPARE, 12, 1, 0), 0);
    assert_int_equal(w.stale, 0);
    assert_int_equal(w.lapsed_token_id, 11); /* until the next lapse */
    assert_string_equal(sched_window_state_name((sched_win_state_t)9), "?");
    assert_string_equal(sched_window_event_name(SCHED_WEV_TIER_RESET), "tier-reset");
}

/* The entry pool: lists take whole chunks and give them back; iteration is in
 * push order across chunks; a full pool refuses (NULL) and changes nothing. */
static void test_pool_lists(void **state)
{
    (void)state;
    sched_pool_t p;
    assert_int_equal(sched_pool_init(&p, 2 * SCHED_CHUNK + 1), 0); /* 3 chunks */
    assert_int_equal(p.n_chunks, 3);
    sched_list_t a = {.head = UINT32_MAX, .tail = UINT32_MAX}, b = a;
    assert_true(sched_pool_can_take(&p, 3 * SCHED_CHUNK));
    assert_false(sched_pool_can_take(&p, 3 * SCHED_CHUNK + 1));
    for (uint32_t i = 0; i < SCHED_CHUNK + 10; i++) {
        sched_entry_t *e = sched_list_push(&p, &a);
        assert_non_null(e);
        e->slot = i;
    }
    assert_int_equal(sched_pool_used(&p), 2 * SCHED_CHUNK);
    for (uint32_t i = 0; i < SCHED_CHUNK; i++)
        assert_non_null(sched_list_push(&p, &b));
    assert_null(sched_list_push(&p, &b)); /* a fourth chunk: none left */
    assert_int_equal(b.n, SCHED_CHUNK);
    uint32_t want = 0;
    sched_iter_t it;
    for (sched_entry_t *e = sched_list_first(&p, &a, &it); e; e = sched_list_next(&p, &it))
        assert_int_equal(e->slot, want++);
    assert_int_equal(want, SCHED_CHUNK + 10);
    sched_list_free(&p, &a);
    assert_int_equal(a.n, 0);
    assert_null(sched_list_first(&p, &a, &it));
    assert_int_equal(sched_pool_used(&p), SCHED_CHUNK);
    assert_non_null(sched_list_push(&p, &b)); /* a freed chunk is taken again */
    sched_list_free(&p, &b);
    assert_int_equal(sched_pool_used(&p), 0);
    sched_pool_fini(&p);
    sched_pool_fini(&p); /* idempotent */
}

/* The kinds table (sched_window.c): one window per kind, and a get+put window
 * excludes the get and put kinds both ways; prefetch stands alone. Any state
 * but CLOSED blocks (a completing put still holds its slots). */
static void test_get_put_excludes_get_and_put(void **state)
{
    (void)state;
    sched_window_t win[SCHED_WIN_KINDS];
    for (int k = 0; k < SCHED_WIN_KINDS; k++)
        sched_window_init(&win[k]);
    for (int k = 0; k < SCHED_WIN_KINDS; k++)
        assert_int_equal(sched_window_blocker(win, k), -1);
    win[SCHED_WIN_GETPUT].state = SCHED_WIN_OPEN;
    assert_int_equal(sched_window_blocker(win, SCHED_WIN_GET), SCHED_WIN_GETPUT);
    assert_int_equal(sched_window_blocker(win, SCHED_WIN_PUT), SCHED_WIN_GETPUT);
    assert_int_equal(sched_window_blocker(win, SCHED_WIN_GETPUT), SCHED_WIN_GETPUT);
    assert_int_equal(sched_window_blocker(win, SCHED_WIN_PREFETCH), -1);
    win[SCHED_WIN_GETPUT].state = SCHED_WIN_CLOSED;
    win[SCHED_WIN_PUT].state = SCHED_WIN_COMPLETING;
    assert_int_equal(sched_window_blocker(win, SCHED_WIN_GETPUT), SCHED_WIN_PUT);
    assert_int_equal(sched_window_blocker(win, SCHED_WIN_GET), -1);
    win[SCHED_WIN_PUT].state = SCHED_WIN_CLOSED;
    win[SCHED_WIN_GET].state = SCHED_WIN_OPEN;
    assert_int_equal(sched_window_blocker(win, SCHED_WIN_GETPUT), SCHED_WIN_GET);
    win[SCHED_WIN_GET].state = SCHED_WIN_CLOSED;
    win[SCHED_WIN_PREFETCH].state = SCHED_WIN_COPYING;
    assert_int_equal(sched_window_blocker(win, SCHED_WIN_GETPUT), -1);
    assert_int_equal(sched_window_blocker(win, SCHED_WIN_KINDS), -1);
    assert_string_equal(sched_window_kind_name(SCHED_WIN_GETPUT), "get+put");
}

/* A get+put window lapses at the shorter of its pins' and reservations' leases;
 * the others keep theirs. */
static void test_get_put_lease_is_the_shorter(void **state)
{
    (void)state;
    assert_int_equal(sched_window_lease_ms(SCHED_WIN_GETPUT, 30000, 5000), 5000);
    assert_int_equal(sched_window_lease_ms(SCHED_WIN_GETPUT, 2000, 5000), 2000);
    assert_int_equal(sched_window_lease_ms(SCHED_WIN_PUT, 2000, 5000), 5000);
    assert_int_equal(sched_window_lease_ms(SCHED_WIN_GET, 2000, 5000), 2000);
    assert_int_equal(sched_window_lease_ms(SCHED_WIN_PREFETCH, 2000, 5000), 2000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_transition_is_the_table_or_refused),
        cmocka_unit_test(test_lifecycle_and_token),
        cmocka_unit_test(test_lapse_records_the_token),
        cmocka_unit_test(test_copy_holds_the_window),
        cmocka_unit_test(test_pool_lists),
        cmocka_unit_test(test_get_put_excludes_get_and_put),
        cmocka_unit_test(test_get_put_lease_is_the_shorter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
