/* test_reqrep_faults.c — bus_client against a real bus_server with faults on
 * purpose on the bus (issue 12 §6; bus_fault.h): a reply the server drops or the
 * client loses completes its request with TIMEOUT exactly once and a retry gets
 * the right answer; a reply held back past its request's timeout (late) arrives
 * after the retry was answered, is dropped and counted as late, and never
 * completes the retried request. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "bus_client.h"
#include "bus_fault.h"
#include "wire_testserver.h"
#include "wire_testutil.h"

#define LONG_TIMEOUT_MS 30000u
#define N_KEYS 5u

typedef struct {
    uint32_t window; /* request index, echoed as hit_count */
    uint8_t keys[N_KEYS][BUS_KEY_LEN];
    bool mask[N_KEYS];
    uint32_t tiers[N_KEYS];
    bus_arrays_t reply_arr; /* points at mask/tiers */
    int completions;
    kvtier_Status status;
    uint32_t hit_count;
    bool arrays_ok;
    int order; /* completion rank */
} pending_t;

static int s_rank;

static void s_done(void *arg, bus_reply_t *r)
{
    pending_t *p = arg;
    p->completions++;
    p->status = r->status;
    p->order = s_rank++;
    if (!r->env)
        return;
    p->hit_count = r->env->body.lookup_rep.hit_count;
    p->arrays_ok = p->reply_arr.mask.n == N_KEYS && p->reply_arr.tier_ids.n == N_KEYS;
    for (uint32_t i = 0; p->arrays_ok && i < N_KEYS; i++)
        p->arrays_ok = p->mask[i] == (bool)(p->keys[i][0] & 1) && p->tiers[i] == p->keys[i][1];
}

/* Sends a LookupRequest with window `window` and 5 keys derived from it. */
static int s_send_lookup(bus_client_t *c, pending_t *p, uint32_t window, uint32_t timeout_ms,
                         kvtier_Status *st)
{
    memset(p, 0, sizeof *p);
    p->window = window;
    for (uint32_t i = 0; i < N_KEYS; i++)
        tu_key(window * 10 + i, p->keys[i]);
    p->reply_arr.mask = (bus_bools_t){.v = p->mask, .cap = N_KEYS};
    p->reply_arr.tier_ids = (bus_u32s_t){.v = p->tiers, .cap = N_KEYS};
    bus_arrays_t req_arr = {.keys = {.keys = p->keys, .n = N_KEYS, .cap = N_KEYS}};
    kvtier_Envelope *env = calloc(1, sizeof *env);
    bus_env_init(env, kvtier_Envelope_lookup_req_tag, NULL);
    strcpy(env->body.lookup_req.instance_id, "inst");
    env->body.lookup_req.window = window;
    int rc =
        bus_client_send(c, env, &req_arr, NULL, 0, timeout_ms, &p->reply_arr, s_done, p, NULL, st);
    free(env);
    return rc;
}

static void s_wait_all(bus_client_t *c, pending_t *p, uint32_t n)
{
    for (;;) {
        bool all = true;
        for (uint32_t i = 0; i < n; i++)
            all &= p[i].completions > 0;
        if (all)
            return;
        assert_true(bus_client_dispatch(c, -1) >= 0);
    }
}

typedef struct {
    zactor_t *server;
    char *endpoint;
    tu_server_args_t args;
} env_t;

static env_t *s_start(uint32_t reverse_batch)
{
    env_t *e = calloc(1, sizeof *e);
    e->args = (tu_server_args_t){.endpoint = "tcp://127.0.0.1:*", .reverse_batch = reverse_batch};
    e->server = tu_server_start(&e->args, &e->endpoint);
    assert_non_null(e->endpoint);
    return e;
}

static void s_stop(env_t **e_p)
{
    env_t *e = *e_p;
    zactor_destroy(&e->server);
    zstr_free(&e->endpoint);
    free(e);
    *e_p = NULL;
}

static void s_set(bus_fault_point_t point, const char *action, const char *rate)
{
    bus_fault_rule_t r;
    char err[256];
    assert_int_equal(bus_fault_rule_parse(action, rate, &r, err, sizeof err), 0);
    assert_int_equal(bus_fault_set(point, &r, err, sizeof err), 0);
}

static int s_setup(void **state)
{
    (void)state;
    bus_fault_enable();
    bus_fault_reset();
    return 0;
}

/* A request whose reply is lost times out once; the retry is answered right. */
static void s_lost_then_retried(bus_fault_point_t point)
{
    env_t *e = s_start(0);
    bus_client_t *c = bus_client_new(e->endpoint, NULL);
    pending_t p[2];
    kvtier_Status st;
    s_set(point, "drop", "next:1");
    assert_int_equal(s_send_lookup(c, &p[0], 7, 200, &st), 0);
    s_wait_all(c, &p[0], 1);
    assert_int_equal(p[0].status.code, kvtier_StatusCode_STATUS_TIMEOUT);
    assert_int_equal(s_send_lookup(c, &p[1], 7, LONG_TIMEOUT_MS, &st), 0);
    s_wait_all(c, &p[1], 1);
    assert_int_equal(p[1].status.code, kvtier_StatusCode_STATUS_OK);
    assert_int_equal(p[1].hit_count, 7);
    assert_true(p[1].arrays_ok);
    assert_int_equal(p[0].completions, 1);
    bus_fault_state_t fs;
    bus_fault_show(point, &fs);
    assert_int_equal(fs.injected, 1);
    bus_client_destroy(&c);
    s_stop(&e);
}

static void test_reply_dropped_by_the_server_times_out_and_a_retry_succeeds(void **state)
{
    (void)state;
    s_lost_then_retried(BUS_FAULT_SERVER_REPLY);
}

static void test_reply_lost_by_the_client_times_out_and_a_retry_succeeds(void **state)
{
    (void)state;
    s_lost_then_retried(BUS_FAULT_CLIENT_REPLY);
}

static void test_late_reply_never_completes_the_retried_request(void **state)
{
    (void)state;
    env_t *e = s_start(0);
    bus_client_t *c = bus_client_new(e->endpoint, NULL);
    pending_t p[2];
    kvtier_Status st;
    s_set(BUS_FAULT_CLIENT_REPLY, "late:400", "next:1");
    assert_int_equal(s_send_lookup(c, &p[0], 2, 100, &st), 0);
    s_wait_all(c, &p[0], 1);
    assert_int_equal(p[0].status.code, kvtier_StatusCode_STATUS_TIMEOUT);
    /* the retry: same question, new corr_id; its reply is not held */
    assert_int_equal(s_send_lookup(c, &p[1], 3, LONG_TIMEOUT_MS, &st), 0);
    s_wait_all(c, &p[1], 1);
    assert_int_equal(p[1].status.code, kvtier_StatusCode_STATUS_OK);
    assert_int_equal(p[1].hit_count, 3);
    assert_true(p[1].arrays_ok);
    /* the held reply comes out when its time is due (the client's next timeout says when) */
    bus_client_stats_t stats;
    for (int i = 0; i < 1000; i++) {
        bus_client_stats(c, &stats);
        if (stats.late == 1)
            break;
        int64_t due = bus_client_next_timeout_ms(c);
        assert_true(due >= 0); /* something is still due: the held reply */
        assert_true(bus_client_dispatch(c, (int)due + 1) >= 0);
    }
    bus_client_stats(c, &stats);
    assert_int_equal(stats.late, 1);
    assert_int_equal(stats.timeouts, 1);
    assert_int_equal(p[0].completions, 1);
    assert_int_equal(p[1].completions, 1);
    assert_int_equal(p[1].hit_count, 3);
    assert_int_equal(bus_client_next_timeout_ms(c), -1);
    bus_client_destroy(&c);
    s_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_reply_dropped_by_the_server_times_out_and_a_retry_succeeds,
                               s_setup),
        cmocka_unit_test_setup(test_reply_lost_by_the_client_times_out_and_a_retry_succeeds,
                               s_setup),
        cmocka_unit_test_setup(test_late_reply_never_completes_the_retried_request, s_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
