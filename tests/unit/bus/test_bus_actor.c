/* test_bus_actor.c — the background actors' pipe protocol (bus_actor.h): STATS is
 * answered with the stats struct, an unknown command is ignored (the actor keeps
 * serving), $TERM ends the loop, and a size mismatch or no actor is an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bus_actor.h"

typedef struct {
    uint64_t a, b;
} s_stats_t;

static int s_on_pipe(zloop_t *loop, zsock_t *pipe, void *arg)
{
    (void)loop;
    s_stats_t *st = arg;
    st->a++; /* counts the commands read: STATS shows how many came before */
    return bus_actor_pipe(pipe, "test", st, sizeof *st);
}

static void s_actor(zsock_t *pipe, void *args)
{
    (void)args;
    s_stats_t st = {.a = 0, .b = 42};
    zloop_t *loop = zloop_new();
    zloop_reader(loop, pipe, s_on_pipe, &st);
    zsock_signal(pipe, 0);
    zloop_start(loop);
    zloop_destroy(&loop);
}

/* STATS answers the struct; an unknown command is ignored; the actor goes on. */
static void test_stats_answered_unknown_ignored(void **state)
{
    (void)state;
    zactor_t *actor = zactor_new(s_actor, NULL);
    assert_non_null(actor);
    s_stats_t out = {0};
    assert_int_equal(bus_actor_stats(actor, &out, sizeof out), 0);
    assert_int_equal(out.a, 1);
    assert_int_equal(out.b, 42);
    assert_int_equal(zstr_send(actor, "NONSENSE"), 0);
    assert_int_equal(bus_actor_stats(actor, &out, sizeof out), 0);
    assert_int_equal(out.a, 3); /* NONSENSE was read and ignored */
    zactor_destroy(&actor);     /* $TERM ends the loop: destroy returns */
    assert_null(actor);
}

/* An answer of another size than asked, or no actor: -1, nothing copied. */
static void test_size_mismatch_and_no_actor_fail(void **state)
{
    (void)state;
    zactor_t *actor = zactor_new(s_actor, NULL);
    assert_non_null(actor);
    uint64_t small = 7;
    assert_int_equal(bus_actor_stats(actor, &small, sizeof small), -1);
    assert_int_equal(small, 7);
    assert_int_equal(bus_actor_stats(NULL, &small, sizeof small), -1);
    zactor_destroy(&actor);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats_answered_unknown_ignored),
        cmocka_unit_test(test_size_mismatch_and_no_actor_fail),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
