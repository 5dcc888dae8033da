/* test_bus_actor.c — how kvtier's actors start and are asked (bus_actor.h): a
 * start the actor reports as failed is NULL from bus_actor_new (czmq 4.2.1's
 * zactor_new alone returns the actor anyway), a question is bounded by its
 * timeout, STATS is answered with the stats struct, an unknown command is ignored
 * (the actor keeps serving), $TERM ends the loop, and a size mismatch or no actor
 * is an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
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

/* Serves STATS; its stats start from *args, read before the start is reported. */
static void s_actor(zsock_t *pipe, void *args)
{
    s_stats_t st = *(const s_stats_t *)args;
    zloop_t *loop = zloop_new();
    bool ok = loop && zloop_reader(loop, pipe, s_on_pipe, &st) == 0;
    if (bus_actor_ready(pipe, ok) == 0)
        zloop_start(loop);
    zloop_destroy(&loop);
}

static zactor_t *s_stats_actor(void)
{
    s_stats_t init = {.a = 0, .b = 42}; /* lives only until bus_actor_new returns */
    return bus_actor_new(s_actor, &init);
}

/* Reports a failed start; *args is what bus_actor_ready returned, once it has. */
static void s_failing_actor(zsock_t *pipe, void *args)
{
    atomic_int *ready_rc = args;
    atomic_store(ready_rc, bus_actor_ready(pipe, false));
}

/* The czmq contract alone: signal 1 on a failed start, then wait for $TERM. */
static void s_plain_failing_actor(zsock_t *pipe, void *args)
{
    (void)args;
    zsock_signal(pipe, 1);
    char *cmd = zstr_recv(pipe);
    zstr_free(&cmd);
}

/* Started, then reads every command and answers none. */
static void s_mute_actor(zsock_t *pipe, void *args)
{
    (void)args;
    bus_actor_ready(pipe, true);
    while (true) {
        char *cmd = zstr_recv(pipe);
        bool term = !cmd || streq(cmd, "$TERM");
        zstr_free(&cmd);
        if (term)
            return;
    }
}

/* Issue "actor start": zactor_new consumes the actor's first signal and drops its
 * status (czmq 4.2.1), so an actor that fails its start is still returned. The
 * first half shows that premise; the second is the rule: bus_actor_new returns
 * NULL, and the actor has ended when it does. With plain zactor_new in place of
 * bus_actor_new the second half fails (the actor is returned). */
static void test_failed_start_is_null(void **state)
{
    (void)state;
    zactor_t *plain = zactor_new(s_plain_failing_actor, NULL);
    assert_non_null(plain); /* the status 1 was dropped */
    zactor_destroy(&plain);

    atomic_int ready_rc = 1;
    assert_null(bus_actor_new(s_failing_actor, &ready_rc));
    assert_int_equal(atomic_load(&ready_rc), -1); /* it waited for $TERM and returned */
}

/* A started actor is returned, serving; its start read args before it returned. */
static void test_started_actor_serves(void **state)
{
    (void)state;
    zactor_t *actor = s_stats_actor();
    assert_non_null(actor);
    s_stats_t out = {0};
    assert_int_equal(bus_actor_stats(actor, &out, sizeof out), 0);
    assert_int_equal(out.b, 42);
    zactor_destroy(&actor);
    assert_null(actor);
}

/* Issue "actor start": a question to an actor is bounded; an actor that never
 * answers is -1 when the timeout passes, not a hang. One that answers is 0, with
 * the answer there to be read. */
static void test_ask_times_out_on_a_mute_actor(void **state)
{
    (void)state;
    zactor_t *mute = bus_actor_new(s_mute_actor, NULL);
    assert_non_null(mute);
    assert_int_equal(bus_actor_ask(mute, 100, "s", "STATS"), -1);
    zactor_destroy(&mute);

    zactor_t *actor = s_stats_actor();
    assert_non_null(actor);
    assert_int_equal(bus_actor_ask(actor, 5000, "s", "STATS"), 0);
    zframe_t *f = zframe_recv(actor);
    assert_non_null(f);
    assert_int_equal(zframe_size(f), sizeof(s_stats_t));
    zframe_destroy(&f);
    assert_int_equal(bus_actor_ask(NULL, 100, "s", "STATS"), -1);
    zactor_destroy(&actor);
}

/* STATS answers the struct; an unknown command is ignored; the actor goes on. */
static void test_stats_answered_unknown_ignored(void **state)
{
    (void)state;
    zactor_t *actor = s_stats_actor();
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
    zactor_t *actor = s_stats_actor();
    assert_non_null(actor);
    uint64_t small = 7;
    assert_int_equal(bus_actor_stats(actor, &small, sizeof small), -1);
    assert_int_equal(small, 7);
    assert_int_equal(bus_actor_stats(NULL, &small, sizeof small), -1);
    zactor_destroy(&actor);
}

/* bus_actor_pipe_cmds: each table entry answers its command, an unknown or empty
 * one is ignored, $TERM ends the loop. */
static void s_cmd_ping(zsock_t *pipe, void *arg)
{
    (*(int *)arg)++;
    zstr_send(pipe, "pong");
}

static void s_table_actor(zsock_t *pipe, void *args)
{
    (void)args;
    static const bus_actor_cmd_t cmds[] = {{"PING", s_cmd_ping}, {NULL, NULL}};
    int pings = 0;
    if (bus_actor_ready(pipe, true) < 0)
        return;
    while (bus_actor_pipe_cmds(pipe, "test", cmds, &pings) == 0)
        ;
}

static void test_command_table(void **state)
{
    (void)state;
    zactor_t *actor = bus_actor_new(s_table_actor, NULL);
    assert_non_null(actor);
    assert_int_equal(zstr_send(actor, "NONSENSE"), 0); /* ignored: no answer */
    assert_int_equal(zstr_send(actor, ""), 0);         /* ignored too */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(bus_actor_ask(actor, BUS_ACTOR_ASK_MS, "s", "PING"), 0);
        char *pong = zstr_recv(actor);
        assert_string_equal(pong, "pong");
        zstr_free(&pong);
    }
    zactor_destroy(&actor); /* $TERM: the loop ends and destroy returns */
    assert_null(actor);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failed_start_is_null),
        cmocka_unit_test(test_started_actor_serves),
        cmocka_unit_test(test_ask_times_out_on_a_mute_actor),
        cmocka_unit_test(test_stats_answered_unknown_ignored),
        cmocka_unit_test(test_size_mismatch_and_no_actor_fail),
        cmocka_unit_test(test_command_table),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
