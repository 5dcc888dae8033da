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
#include "reqrep_kit.h"

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
