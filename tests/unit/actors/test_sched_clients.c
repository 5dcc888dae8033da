/* test_sched_clients.c — the scheduler's client bounds (issue 12 §3): a client (one
 * meta-plane connection) may hold at most max_requests_per_client open requests, at
 * most max_clients clients are served at once, and past either bound the answer is
 * OVERLOADED — for that client only: the others keep being served. A client idle
 * with nothing open gives its place up; a client that floods requests and never
 * reads its replies does not stop the others. */
#include "sched_testkit.h"

static void s_bounds(sched_config_t *cfg)
{
    cfg->max_requests = 16;
    cfg->max_requests_per_client = 3;
    cfg->max_clients = 2;
    cfg->client_idle_ms = 200;
}

/* Runs the kit's calls through client C for a while. */
static bus_client_t *s_as(tk_t *t, bus_client_t *c)
{
    bus_client_t *old = t->c;
    t->c = c;
    return old;
}

static bus_client_t *s_client(tk_t *t, const char *name)
{
    bus_client_config_t cc = {.name = name, .max_in_flight = 16, .default_timeout_ms = TK_CALL_MS};
    bus_client_t *c = bus_client_new(t->ep, &cc);
    assert_non_null(c);
    return c;
}

static bool s_served(tk_t *t, void *arg)
{
    bus_client_t *old = s_as(t, arg);
    int rc = tk_begin(t, TK_INST, "late", 0);
    s_as(t, old);
    return rc == 0;
}

static void test_one_client_past_its_bound_leaves_the_others_served(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, s_bounds);
    tk_t *t = e.t; /* client A: registered the instance */
    assert_int_equal(tk_begin(t, TK_INST, "a1", 0), 0);
    assert_int_equal(tk_begin(t, TK_INST, "a2", 0), 0);
    assert_int_equal(tk_begin(t, TK_INST, "a3", 0), 0);
    assert_int_equal(tk_begin(t, TK_INST, "a4", 0), kvtier_StatusCode_STATUS_OVERLOADED);
    assert_non_null(strstr(t->msg, "max_requests_per_client"));

    bus_client_t *b = s_client(t, "b"), *c = s_client(t, "c");
    bus_client_t *a = s_as(t, b);
    assert_int_equal(tk_begin(t, TK_INST, "b1", 0), 0); /* B is not held back by A */
    uint8_t keys[2][16];
    tk_keys(1, 2, keys);
    assert_int_equal(tk_lookup(t, TK_INST, "b1", kvtier_LookupMode_LOOKUP_MODE_PER_KEY, 0, keys, 2),
                     0);
    s_as(t, c); /* a third client: past max_clients, while A and B are active */
    assert_int_equal(tk_begin(t, TK_INST, "c1", 0), kvtier_StatusCode_STATUS_OVERLOADED);
    assert_non_null(strstr(t->msg, "max_clients"));

    s_as(t, a); /* A ends one: it may begin one more */
    assert_int_equal(tk_end(t, TK_INST, "a1"), 0);
    assert_int_equal(tk_begin(t, TK_INST, "a4", 0), 0);
    s_as(t, b); /* B ends its request and goes idle: C gets its place */
    assert_int_equal(tk_end(t, TK_INST, "b1"), 0);
    s_as(t, a);
    assert_true(tk_poll(s_served, t, c));
    assert_true(tk_stat(t, "overloaded") >= 3);
    assert_int_equal(tk_stat(t, "clients"), 2);
    bus_client_destroy(&b);
    bus_client_destroy(&c);
    tk_env_stop(&e);
}

/* A client that sends thousands of lookups and never reads a reply: its replies
 * queue up to the socket's bound and are dropped there; the scheduler never waits
 * on it, and another client's calls are answered meanwhile. */
static void test_a_client_that_never_reads_does_not_stall_others(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    tk_t *t = e.t;
    zsock_t *flood = zsock_new_dealer(t->ep);
    assert_non_null(flood);
    kvtier_Envelope *env = calloc(1, sizeof *env);
    uint8_t keys[64][16];
    tk_keys(100, 64, keys);
    bus_arrays_t arr = tk_keys_arr(keys, 64);
    kvtier_Status st;
    uint32_t sent = 0;
    for (uint32_t i = 0; i < 20000; i++) {
        bus_env_init(env, kvtier_Envelope_lookup_req_tag, "flood");
        env->corr_id = i + 1;
        snprintf(env->body.lookup_req.instance_id, sizeof env->body.lookup_req.instance_id, "%s",
                 TK_INST);
        env->body.lookup_req.mode = kvtier_LookupMode_LOOKUP_MODE_PER_KEY;
        zmsg_t *m = NULL;
        if (bus_msg_encode(env, &arr, NULL, 0, &m, &st) < 0)
            break;
        zsock_set_sndtimeo(flood, i == 0 ? 5000 : 0); /* the first waits for the connection */
        int full = 0;
        while (zmsg_send(&m, flood) < 0 && ++full < 200)
            zclock_sleep(1); /* its queues are full for now: the scheduler drains them */
        if (full == 200) {
            zmsg_destroy(&m);
            break; /* full for 200 ms: that is the flood's ceiling */
        }
        sent++;
    }
    assert_true(sent > 1000);
    /* the kit's client is answered while the flood is queued and unread */
    for (int i = 0; i < 20; i++)
        assert_int_equal(tk_begin(t, TK_INST, i % 2 ? "x" : "y", 0) == 0 ||
                             tk_end(t, TK_INST, i % 2 ? "x" : "y") == 0,
                         1);
    assert_int_equal(
        tk_lookup(t, TK_INST, NULL, kvtier_LookupMode_LOOKUP_MODE_PER_KEY, 0, keys, 64), 0);
    free(env);
    zsock_destroy(&flood);
    tk_env_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_client_past_its_bound_leaves_the_others_served),
        cmocka_unit_test(test_a_client_that_never_reads_does_not_stall_others),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
