/* test_sched_resign.c — the scheduler's side of `kvtier leader resign` (issue 9 §3,
 * actors/sched_resign.c): refused without a standby (the leader unchanged) and for
 * a wait past the bound; while resigning new windows are refused with NOT_LEADER
 * carrying no leader epoch (libkvtier keeps its open windows), the open windows'
 * completes are served, ClusterInfo and AdminStatus say resigning, a second
 * resign is CONFLICT; the answer comes when the last open window closes, with the
 * counts, and the hand-over reaches the elector's inbox ("RESIGN", the epoch);
 * after it the scheduler leads no more; a window still open at the bound is left
 * to lapse. Over the meta plane against a fake tier actor. */
#include "sched_testkit.h"

#include <stdatomic.h>

static _Atomic uint32_t s_standbys;
static char s_inbox[64];

static void s_tweak(sched_config_t *cfg)
{
    cfg->standbys = &s_standbys;
    snprintf(cfg->resign_endpoint, sizeof cfg->resign_endpoint, "%s", s_inbox);
}

/* The elector's inbox, as the test sees it: a PULL bound where the scheduler pushes. */
static zsock_t *s_inbox_new(void)
{
    static unsigned n;
    snprintf(s_inbox, sizeof s_inbox, "inproc://test-resign-%u", n++);
    zsock_t *pull = zsock_new_pull(s_inbox); /* binds (PULL's default) */
    assert_non_null(pull);
    return pull;
}

/* An AdminResign sent without waiting: its answer lands in `done` / `rep`. */
typedef struct {
    bool done;
    int code;
    kvtier_AdminResignReply rep;
    uint64_t epoch;
} s_pending_t;

static void s_on_reply(void *arg, bus_reply_t *r)
{
    s_pending_t *p = arg;
    p->done = true;
    p->code = (int)r->status.code;
    if (r->env && r->env->which_body == kvtier_Envelope_admin_resign_rep_tag) {
        p->rep = r->env->body.admin_resign_rep;
        p->epoch = r->env->leader_epoch;
    }
}

static void s_resign_async(tk_t *t, bus_client_t *cl, uint32_t wait_s, s_pending_t *p)
{
    kvtier_Envelope *req = tk_req(t, kvtier_Envelope_admin_resign_req_tag);
    req->body.admin_resign_req.wait_s = wait_s;
    kvtier_Status st;
    assert_int_equal(
        bus_client_send(cl, req, NULL, NULL, 0, 400000, NULL, s_on_reply, p, NULL, &st), 0);
}

static int s_resign(tk_t *t, uint32_t wait_s)
{
    tk_req(t, kvtier_Envelope_admin_resign_req_tag)->body.admin_resign_req.wait_s = wait_s;
    return tk_call(t, NULL);
}

static bool s_resigning(tk_t *t)
{
    tk_req(t, kvtier_Envelope_cluster_info_req_tag);
    assert_int_equal(tk_call(t, NULL), 0);
    return t->rep->body.cluster_info_rep.resigning;
}

static bool s_status_resigning(tk_t *t)
{
    tk_req(t, kvtier_Envelope_admin_status_req_tag);
    assert_int_equal(tk_call(t, NULL), 0);
    return t->rep->body.admin_status_rep.resigning;
}

static uint64_t s_put_token(tk_t *t)
{
    return t->rep->body.prepare_put_rep.token.token_id;
}

/* Waits (bounded) for the pending resign's answer. */
static void s_wait_answer(bus_client_t *cl, s_pending_t *p)
{
    int64_t until = zclock_mono() + TK_POLL_MS;
    while (!p->done && zclock_mono() < until)
        bus_client_dispatch(cl, 50);
    assert_true(p->done);
}

/* The hand-over the elector would read: "RESIGN", epoch, 0, 0, node name. */
static void s_expect_handover(zsock_t *inbox, uint64_t epoch)
{
    zsock_set_rcvtimeo(inbox, TK_POLL_MS);
    char *cmd = NULL, *who = NULL;
    uint64_t ep = 0, rev = 1;
    int err = 1;
    assert_int_equal(zsock_recv(inbox, "s8i8s", &cmd, &ep, &err, &rev, &who), 0);
    assert_string_equal(cmd, "RESIGN");
    assert_int_equal(ep, epoch);
    assert_string_equal(who, "test-coord");
    zstr_free(&cmd);
    zstr_free(&who);
}

static void test_resign_refused_without_a_standby(void **state)
{
    (void)state;
    zsock_t *inbox = s_inbox_new();
    atomic_store(&s_standbys, 0);
    tk_env_t e;
    tk_env_start(&e, 16, s_tweak);
    tk_t *t = e.t;
    assert_int_equal(s_resign(t, 0), kvtier_StatusCode_STATUS_CONFLICT);
    assert_non_null(strstr(t->msg, "no standby"));
    assert_non_null(strstr(t->msg, "stays the leader"));
    assert_int_equal(s_resign(t, 301), kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(t->msg, "at most 300"));
    /* the leader is unchanged: windows open as before, nothing was handed over */
    assert_false(s_resigning(t));
    assert_false(s_status_resigning(t));
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 1, 2), 0);
    tk_req(t, kvtier_Envelope_admin_status_req_tag);
    assert_int_equal(tk_call(t, NULL), 0);
    assert_true(t->rep->body.admin_status_rep.leader);
    zsock_set_rcvtimeo(inbox, 0);
    char *cmd = zstr_recv(inbox);
    assert_null(cmd);
    tk_env_stop(&e);
    zsock_destroy(&inbox);
}

/* Without an elector (cfg.standbys NULL) there is nobody to hand over to either. */
static void test_resign_refused_without_an_elector(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    assert_int_equal(s_resign(e.t, 5), kvtier_StatusCode_STATUS_CONFLICT);
    assert_non_null(strstr(e.t->msg, "without an elector"));
    tk_env_stop(&e);
}

static void test_resign_lets_open_windows_finish(void **state)
{
    (void)state;
    zsock_t *inbox = s_inbox_new();
    atomic_store(&s_standbys, 1);
    tk_env_t e;
    tk_env_start(&e, 16, s_tweak);
    tk_t *t = e.t;
    uint8_t keys[4][16];
    tk_keys(10, 4, keys);
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_begin(t, TK_INST, "r2", 0), 0);
    assert_int_equal(tk_put(t, "r2", 10, 2), 0); /* blocks for the get window */
    assert_int_equal(tk_prepare_put(t, "r1", keys + 2, 2), 0);
    uint64_t put_tok = s_put_token(t);
    assert_int_equal(tk_prepare_get(t, "r2", keys, 2), 0);
    uint64_t get_tok = t->rep->body.prepare_get_rep.token.token_id;

    bus_client_config_t cc = {.name = "operator", .default_timeout_ms = TK_CALL_MS};
    bus_client_t *op = bus_client_new(t->ep, &cc);
    assert_non_null(op);
    s_pending_t p = {0};
    s_resign_async(t, op, 30, &p);
    /* the scheduler has read it once it says resigning */
    for (int i = 0; i < 1000 && !s_resigning(t); i++)
        bus_client_dispatch(op, 5);
    assert_true(s_resigning(t));
    assert_true(s_status_resigning(t)); /* AdminStatus says so too */

    /* a new window of any kind: NOT_LEADER, without the leader's epoch */
    assert_int_equal(tk_begin(t, TK_INST, "r3", 0), 0);
    t->rep->leader_epoch = 99;
    assert_int_equal(tk_prepare_put(t, "r3", keys + 2, 2), kvtier_StatusCode_STATUS_NOT_LEADER);
    assert_int_equal(t->rep->leader_epoch, 0);
    assert_non_null(strstr(t->msg, "handing its leadership"));
    assert_int_equal(tk_prepare_get(t, "r3", keys, 2), kvtier_StatusCode_STATUS_NOT_LEADER);
    assert_int_equal(
        tk_prepare(t, kvtier_Envelope_prepare_prefetch_req_tag, TK_INST, "r3", keys, 2),
        kvtier_StatusCode_STATUS_NOT_LEADER);
    kvtier_Envelope *pr = tk_req(t, kvtier_Envelope_prepare_req_tag);
    TK_FILL_IDS(&pr->body.prepare_req, TK_INST, "r3");
    pr->body.prepare_req.mode = kvtier_LookupMode_LOOKUP_MODE_PREFIX;
    bus_arrays_t ra = tk_keys_arr(keys, 2);
    assert_int_equal(tk_call(t, &ra), kvtier_StatusCode_STATUS_NOT_LEADER);
    /* everything else is served; a second resign is refused */
    assert_int_equal(tk_lookup(t, TK_INST, "r3", kvtier_LookupMode_LOOKUP_MODE_PREFIX, 0, keys, 2),
                     0);
    assert_int_equal(s_resign(t, 5), kvtier_StatusCode_STATUS_CONFLICT);
    assert_non_null(strstr(t->msg, "already resigning"));

    /* the open windows complete; the answer waits for the last of them */
    uint64_t ck[2] = {1, 2};
    assert_int_equal(tk_complete_put(t, "r1", put_tok, NULL, 0, ck, 2), 0);
    assert_int_equal(t->rep->body.complete_put_rep.committed, 2);
    assert_int_equal(bus_client_dispatch(op, 0), 0);
    assert_false(p.done); /* the get window is still open */
    assert_int_equal(tk_complete(t, kvtier_Envelope_complete_get_req_tag, "r2", get_tok), 0);
    s_wait_answer(op, &p);
    assert_int_equal(p.code, 0);
    assert_string_equal(p.rep.node_id, "test-coord");
    assert_int_equal(p.rep.windows_open, 2);
    assert_int_equal(p.rep.windows_finished, 2);
    assert_int_equal(p.rep.windows_lapsed, 0);
    assert_int_equal(p.rep.standbys, 1);
    assert_int_equal(p.epoch, 7);
    s_expect_handover(inbox, 7);

    /* handed over: it leads no more */
    assert_int_equal(tk_prepare_put(t, "r3", keys + 2, 2), kvtier_StatusCode_STATUS_NOT_LEADER);
    assert_int_equal(t->rep->leader_epoch, 7); /* a deposed leader's: its tokens are gone */
    tk_req(t, kvtier_Envelope_admin_status_req_tag);
    assert_int_equal(tk_call(t, NULL), 0);
    assert_false(t->rep->body.admin_status_rep.leader);
    assert_false(t->rep->body.admin_status_rep.resigning);
    tk_req(t, kvtier_Envelope_cluster_info_req_tag);
    assert_int_equal(tk_call(t, NULL), 0);
    assert_string_equal(t->rep->body.cluster_info_rep.leader_endpoint, "");
    bus_client_destroy(&op);
    tk_env_stop(&e);
    zsock_destroy(&inbox);
}

/* A window not completed within the wait is left to lapse: the answer counts it,
 * and its complete after the hand-over is refused (the new leader has it not). */
static void test_resign_bound_lapses_open_windows(void **state)
{
    (void)state;
    zsock_t *inbox = s_inbox_new();
    atomic_store(&s_standbys, 2);
    tk_env_t e;
    tk_env_start(&e, 16, s_tweak);
    tk_t *t = e.t;
    uint8_t keys[3][16];
    tk_keys(40, 3, keys);
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_prepare_put(t, "r1", keys, 3), 0);
    uint64_t tok = s_put_token(t);

    bus_client_config_t cc = {.name = "operator", .default_timeout_ms = TK_CALL_MS};
    bus_client_t *op = bus_client_new(t->ep, &cc);
    assert_non_null(op);
    s_pending_t p = {0};
    s_resign_async(t, op, 1, &p);
    s_wait_answer(op, &p);
    assert_int_equal(p.code, 0);
    assert_int_equal(p.rep.windows_open, 1);
    assert_int_equal(p.rep.windows_finished, 0);
    assert_int_equal(p.rep.windows_lapsed, 1);
    assert_int_equal(p.rep.standbys, 2);
    assert_true(p.rep.waited_ms >= 1000);
    s_expect_handover(inbox, 7);
    uint64_t ck[3] = {1, 2, 3};
    assert_int_equal(tk_complete_put(t, "r1", tok, NULL, 0, ck, 3),
                     kvtier_StatusCode_STATUS_NOT_LEADER);
    bus_client_destroy(&op);
    tk_env_stop(&e);
    zsock_destroy(&inbox);
}

/* No window open: the hand-over is at once. */
static void test_resign_without_windows_hands_over_at_once(void **state)
{
    (void)state;
    zsock_t *inbox = s_inbox_new();
    atomic_store(&s_standbys, 1);
    tk_env_t e;
    tk_env_start(&e, 16, s_tweak);
    tk_t *t = e.t;
    assert_int_equal(s_resign(e.t, 0), 0);
    assert_int_equal(t->rep->body.admin_resign_rep.windows_open, 0);
    assert_int_equal(t->rep->body.admin_resign_rep.windows_lapsed, 0);
    s_expect_handover(inbox, 7);
    tk_env_stop(&e);
    zsock_destroy(&inbox);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resign_refused_without_a_standby),
        cmocka_unit_test(test_resign_refused_without_an_elector),
        cmocka_unit_test(test_resign_lets_open_windows_finish),
        cmocka_unit_test(test_resign_bound_lapses_open_windows),
        cmocka_unit_test(test_resign_without_windows_hands_over_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
