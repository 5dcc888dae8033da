/* test_sched_failover.c — the scheduler's rules that make libkvtier's calls safe to
 * send again across a lost reply or a leader change (issue 9 §1, docs/PROTOCOL.md
 * "Resends and failover"): the leader epoch on every reply, a resent prepare
 * (same job_id) cancels the window it opened and runs again, a
 * resent complete is answered with the same counts and applied once (UNAVAILABLE
 * while the first still concludes), a complete naming another
 * leader's epoch is ABORTED with nothing applied; the instance registry: a spec
 * handed to the etcd writer at registration only, and a new leader's preloaded
 * instances served at once. Over the meta plane against a fake tier actor
 * (tests/support/sched_fake_tier.h). */
#include "sched_testkit.h"

#include <unistd.h>

static int s_prepare_job(tk_t *t, pb_size_t tag, const char *req, uint8_t (*keys)[16], uint32_t n,
                         uint64_t job_id)
{
    kvtier_Envelope *e = tk_req(t, tag);
    if (tag == kvtier_Envelope_prepare_get_req_tag) {
        TK_FILL_IDS(&e->body.prepare_get_req, TK_INST, req);
        e->body.prepare_get_req.job_id = job_id;
    } else if (tag == kvtier_Envelope_prepare_put_req_tag) {
        TK_FILL_IDS(&e->body.prepare_put_req, TK_INST, req);
        e->body.prepare_put_req.job_id = job_id;
    } else {
        TK_FILL_IDS(&e->body.prepare_req, TK_INST, req);
        e->body.prepare_req.job_id = job_id;
        e->body.prepare_req.mode = kvtier_LookupMode_LOOKUP_MODE_PREFIX;
    }
    bus_arrays_t ra = tk_keys_arr(keys, n);
    return tk_call(t, &ra);
}

static int s_complete_get_epoch(tk_t *t, const char *req, uint64_t token_id, uint64_t epoch)
{
    kvtier_CompleteGetRequest *r =
        &tk_req(t, kvtier_Envelope_complete_get_req_tag)->body.complete_get_req;
    TK_FILL_IDS(r, TK_INST, req);
    r->token_id = token_id;
    r->leader_epoch = epoch;
    return tk_call(t, NULL);
}

/* Envelope.leader_epoch: every scheduler reply carries its epoch (7 in the
 * testkit), an error's and a rejection's too. */
static void test_replies_carry_the_leader_epoch(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(t->rep->leader_epoch, 7);
    t->rep->leader_epoch = 0;
    assert_int_equal(tk_begin(t, "ghost", "r1", 0), kvtier_StatusCode_STATUS_NOT_FOUND);
    assert_int_equal(t->rep->leader_epoch, 7);
    t->rep->leader_epoch = 0;
    tk_req(t, kvtier_Envelope_cluster_info_req_tag);
    assert_int_equal(tk_call(t, NULL), 0);
    assert_int_equal(t->rep->leader_epoch, 7);
    tk_env_stop(&e);
}

/* A prepare whose job_id is the one of the open window of its kind is a resend:
 * that window is cancelled (reservations aborted, pins released), the prepare
 * runs again with a new token; the old token no longer completes. Another job_id
 * with the window open stays INVALID_ARGUMENT. */
static void test_prepare_resend_reopens(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    tk_t *t = e.t;
    uint8_t keys[4][16];
    tk_keys(10, 4, keys);
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(s_prepare_job(t, kvtier_Envelope_prepare_put_req_tag, "r1", keys, 2, 42), 0);
    uint64_t t1 = t->rep->body.prepare_put_rep.token.token_id;
    assert_int_equal(tk_stat(t, "reserved"), 2);
    assert_int_equal(s_prepare_job(t, kvtier_Envelope_prepare_put_req_tag, "r1", keys, 2, 42), 0);
    uint64_t t2 = t->rep->body.prepare_put_rep.token.token_id;
    assert_true(t2 != t1);
    assert_int_equal(tk_stat(t, "reserved"), 2); /* the first reservations were aborted */
    assert_int_equal(s_prepare_job(t, kvtier_Envelope_prepare_put_req_tag, "r1", keys, 2, 43),
                     kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    uint64_t ck[2] = {1, 2};
    assert_int_equal(tk_complete_put(t, "r1", t1, NULL, 0, ck, 2),
                     kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_int_equal(tk_complete_put(t, "r1", t2, NULL, 0, ck, 2), 0);
    assert_int_equal(t->rep->body.complete_put_rep.committed, 2);
    assert_int_equal(tk_stat(t, "reserved"), 0);

    /* a get window: its pins are released and taken again, not doubled */
    assert_int_equal(s_prepare_job(t, kvtier_Envelope_prepare_get_req_tag, "r1", keys, 2, 44), 0);
    assert_int_equal(tk_stat(t, "pinned"), 2);
    assert_int_equal(s_prepare_job(t, kvtier_Envelope_prepare_get_req_tag, "r1", keys, 2, 44), 0);
    uint64_t g2 = t->rep->body.prepare_get_rep.token.token_id;
    assert_int_equal(tk_stat(t, "pinned"), 2);
    assert_int_equal(tk_complete(t, kvtier_Envelope_complete_get_req_tag, "r1", g2), 0);
    assert_int_equal(tk_stat(t, "pinned"), 0);

    /* a get+put window: the prefix's pins and the misses' reservations, once */
    assert_int_equal(s_prepare_job(t, kvtier_Envelope_prepare_req_tag, "r1", keys, 4, 45), 0);
    assert_int_equal(t->rep->body.prepare_rep.hit_count, 2);
    assert_int_equal(s_prepare_job(t, kvtier_Envelope_prepare_req_tag, "r1", keys, 4, 45), 0);
    assert_int_equal(tk_stat(t, "pinned"), 2);
    assert_int_equal(tk_stat(t, "reserved"), 2);
    assert_int_equal(tk_end(t, TK_INST, "r1"), 0);
    assert_int_equal(tk_stat(t, "pinned"), 0);
    assert_int_equal(tk_stat(t, "reserved"), 0);
    tk_env_stop(&e);
}

/* A complete_put whose token concluded already (the reply was lost) is answered
 * OK again with the same counts; nothing is committed twice. */
static void test_complete_resend_answers_again(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    tk_t *t = e.t;
    uint8_t keys[3][16];
    tk_keys(20, 3, keys);
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_prepare_put(t, "r1", keys, 3), 0);
    uint64_t tok = t->rep->body.prepare_put_rep.token.token_id;
    bool mask[3] = {true, false, true};
    uint64_t ck[3] = {1, 2, 3};
    assert_int_equal(tk_complete_put(t, "r1", tok, mask, 3, ck, 3), 0);
    assert_int_equal(t->rep->body.complete_put_rep.committed, 2);
    assert_int_equal(t->rep->body.complete_put_rep.failed, 1);
    uint64_t committed = tk_stat(t, "puts_committed");
    memset(&t->rep->body, 0, sizeof t->rep->body);
    assert_int_equal(tk_complete_put(t, "r1", tok, mask, 3, ck, 3), 0);
    assert_int_equal(t->rep->which_body, kvtier_Envelope_complete_put_rep_tag);
    assert_int_equal(t->rep->body.complete_put_rep.committed, 2);
    assert_int_equal(t->rep->body.complete_put_rep.failed, 1);
    assert_int_equal(tk_stat(t, "puts_committed"), committed);
    assert_int_equal(tk_stat(t, "blocks"), 2);
    tk_env_stop(&e);
}

/* A complete with the token of another leader (leader_epoch nonzero, not this
 * one's) is ABORTED, naming both epochs; nothing of it is applied (the window of
 * this leader stays open). Epoch 0 (unknown) or this leader's are served. */
static void test_foreign_epoch_is_aborted(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, NULL);
    tk_t *t = e.t;
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 30, 2), 0);
    uint8_t keys[2][16];
    tk_keys(30, 2, keys);
    assert_int_equal(tk_prepare_get(t, "r1", keys, 2), 0);
    uint64_t tok = t->rep->body.prepare_get_rep.token.token_id;
    assert_int_equal(s_complete_get_epoch(t, "r1", tok, 3), kvtier_StatusCode_STATUS_ABORTED);
    assert_non_null(strstr(t->msg, "epoch 3"));
    assert_non_null(strstr(t->msg, "epoch is 7"));
    assert_non_null(strstr(t->msg, "nothing of it is applied at this leader"));
    assert_int_equal(tk_stat(t, "pinned"), 2);
    assert_int_equal(s_complete_get_epoch(t, "r1", tok, 7), 0);
    assert_int_equal(tk_stat(t, "pinned"), 0);
    /* the other completes and CopyPrefetch follow the same rule */
    kvtier_CompletePutRequest *cp =
        &tk_req(t, kvtier_Envelope_complete_put_req_tag)->body.complete_put_req;
    TK_FILL_IDS(cp, TK_INST, "r1");
    cp->token_id = 99;
    cp->leader_epoch = 6;
    assert_int_equal(tk_call(t, NULL), kvtier_StatusCode_STATUS_ABORTED);
    kvtier_CopyPrefetchRequest *cf =
        &tk_req(t, kvtier_Envelope_copy_prefetch_req_tag)->body.copy_prefetch_req;
    TK_FILL_IDS(cf, TK_INST, "r1");
    cf->token_id = 99;
    cf->leader_epoch = 8;
    assert_int_equal(tk_call(t, NULL), kvtier_StatusCode_STATUS_ABORTED);
    tk_env_stop(&e);
}

static void s_slow_tier(sched_config_t *cfg)
{
    cfg->tier_timeout_ms = 600000; /* a muted tier's PutHeader stays unanswered */
}

/* Sends t->req, giving up after ms (the reply may come later, to nobody). */
static int s_call_ms(tk_t *t, bus_arrays_t *ra, uint32_t ms)
{
    kvtier_Status st;
    memset(&st, 0, sizeof st);
    bus_arrays_clear(t->arr);
    int rc = bus_client_call(t->c, t->req, ra, NULL, 0, ms, t->rep, t->arr, NULL, &st);
    snprintf(t->msg, sizeof t->msg, "%s", st.message);
    return rc < 0 ? -rc : 0;
}

static int s_complete_tok(tk_t *t, pb_size_t tag, uint64_t token_id, uint32_t ms)
{
    kvtier_Envelope *en = tk_req(t, tag);
    if (tag == kvtier_Envelope_complete_put_req_tag) {
        TK_FILL_IDS(&en->body.complete_put_req, TK_INST, "r1");
        en->body.complete_put_req.token_id = token_id;
    } else {
        TK_FILL_IDS(&en->body.complete_req, TK_INST, "r1");
        en->body.complete_req.token_id = token_id;
    }
    uint64_t ck[2] = {1, 2};
    bus_arrays_t ra = {.checksums = {.v = ck, .n = 2, .cap = 2}};
    return s_call_ms(t, &ra, ms);
}

/* A complete sent again while the first still waits on its tier's PutHeader (its
 * sender gave up waiting) is UNAVAILABLE "still completing", which libkvtier
 * retries, not INVALID_ARGUMENT (finding 3): a put window's and a get+put's. */
static void test_complete_resend_while_completing_is_unavailable(void **state)
{
    (void)state;
    static const pb_size_t prep[2] = {kvtier_Envelope_prepare_put_req_tag,
                                      kvtier_Envelope_prepare_req_tag};
    static const pb_size_t comp[2] = {kvtier_Envelope_complete_put_req_tag,
                                      kvtier_Envelope_complete_req_tag};
    for (int k = 0; k < 2; k++) {
        tk_env_t e;
        tk_env_start(&e, 16, s_slow_tier);
        tk_t *t = e.t;
        uint8_t keys[4][16];
        tk_keys(50, 4, keys);
        assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
        uint32_t n = 2;
        if (k == 1) { /* get+put: 2 prefix hits, 2 misses */
            assert_int_equal(tk_put(t, "r1", 50, 2), 0);
            n = 4;
        }
        assert_int_equal(s_prepare_job(t, prep[k], "r1", keys, n, 5), 0);
        uint64_t tok = k == 0 ? t->rep->body.prepare_put_rep.token.token_id
                              : t->rep->body.prepare_rep.token.token_id;
        sched_fake_tier_set_mute(e.ft, true);
        assert_int_equal(s_complete_tok(t, comp[k], tok, 300), kvtier_StatusCode_STATUS_TIMEOUT);
        assert_int_equal(tk_stat(t, "pending_puts"), 1);
        assert_int_equal(s_complete_tok(t, comp[k], tok, TK_CALL_MS),
                         kvtier_StatusCode_STATUS_UNAVAILABLE);
        assert_non_null(strstr(t->msg, "still completing"));
        /* another token is still no window's */
        assert_int_equal(s_complete_tok(t, comp[k], tok + 1000, TK_CALL_MS),
                         kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
        assert_int_equal(tk_stat(t, "pending_puts"), 1);
        sched_fake_tier_set_mute(e.ft, false);
        tk_env_stop(&e);
    }
}

static void s_quick_tier_timeout(sched_config_t *cfg)
{
    cfg->tier_timeout_ms = 300; /* a muted tier's PutHeader times out at once */
}

/* A complete whose conclusion failed (its tier did not confirm the headers) and is
 * then sent again — its reply lost, or retried by libkvtier while it settles after
 * a failover — is ABORTED "concluded already and failed", naming the first
 * failure, never INVALID_ARGUMENT "no open window" (found by the soak with two
 * coordinators); nothing is committed twice or late. */
static void test_complete_resend_after_failed_conclusion_is_aborted(void **state)
{
    (void)state;
    tk_env_t e;
    tk_env_start(&e, 16, s_quick_tier_timeout);
    tk_t *t = e.t;
    uint8_t keys[2][16];
    tk_keys(70, 2, keys);
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(s_prepare_job(t, kvtier_Envelope_prepare_put_req_tag, "r1", keys, 2, 9), 0);
    uint64_t tok = t->rep->body.prepare_put_rep.token.token_id;
    sched_fake_tier_set_mute(e.ft, true);
    assert_int_equal(s_complete_tok(t, kvtier_Envelope_complete_put_req_tag, tok, TK_CALL_MS),
                     kvtier_StatusCode_STATUS_TIMEOUT);
    assert_non_null(strstr(t->msg, "confirmed 0 of 2 block headers"));
    sched_fake_tier_set_mute(e.ft, false);
    assert_int_equal(s_complete_tok(t, kvtier_Envelope_complete_put_req_tag, tok, TK_CALL_MS),
                     kvtier_StatusCode_STATUS_ABORTED);
    assert_non_null(strstr(t->msg, "concluded already and failed (TIMEOUT"));
    assert_non_null(strstr(t->msg, "prepare again"));
    assert_int_equal(tk_stat(t, "puts_committed"), 0);
    /* a token that was never this request's is still INVALID_ARGUMENT */
    assert_int_equal(s_complete_tok(t, kvtier_Envelope_complete_put_req_tag, tok + 1000, TK_CALL_MS),
                     kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    /* the request goes on: a new put window commits */
    assert_int_equal(tk_put(t, "r1", 70, 2), 0);
    assert_int_equal(tk_stat(t, "blocks"), 2);
    tk_env_stop(&e);
}

static char s_registry_ep[64];
static kvtier_InstanceSpec s_preload[3];

static void s_with_registry(sched_config_t *cfg)
{
    snprintf(cfg->registry_output, sizeof cfg->registry_output, "%s", s_registry_ep);
}

/* Specs waiting on the registry writer's PULL (within wait_ms for the first). */
static int s_pulled(zsock_t *pull, int wait_ms, kvtier_InstanceSpec *last)
{
    int n = 0;
    zpoller_t *p = zpoller_new(pull, NULL);
    while (zpoller_wait(p, n ? 100 : wait_ms) == pull) {
        zframe_t *f = zframe_recv(pull);
        assert_int_equal(zframe_size(f), sizeof *last);
        memcpy(last, zframe_data(f), sizeof *last);
        zframe_destroy(&f);
        n++;
    }
    zpoller_destroy(&p);
    return n;
}

/* The instance registry is written at registration only (issue 9 §1): a created
 * instance's spec is handed to the writer once; an equal registration again, a
 * begin, a put are not. */
static void test_registry_written_at_registration_only(void **state)
{
    (void)state;
    snprintf(s_registry_ep, sizeof s_registry_ep, "inproc://test-registry-%d", (int)getpid());
    zsock_t *pull = zsock_new_pull(s_registry_ep);
    assert_non_null(pull);
    tk_env_t e;
    tk_env_start(&e, 16, s_with_registry); /* registers TK_INST */
    kvtier_InstanceSpec got;
    assert_int_equal(s_pulled(pull, 5000, &got), 1);
    assert_string_equal(got.instance_id, TK_INST);
    assert_int_equal(got.bytes_per_block, 4096);
    assert_int_equal(tk_register(e.t, TK_INST, 4096), 0); /* equal: not created */
    assert_int_equal(tk_begin(e.t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(e.t, "r1", 0, 2), 0);
    assert_int_equal(s_pulled(pull, 300, &got), 0);
    assert_int_equal(tk_register(e.t, "other", 4096), 0);
    assert_int_equal(s_pulled(pull, 5000, &got), 1);
    assert_string_equal(got.instance_id, "other");
    assert_int_equal(tk_stat(e.t, "registry_dropped"), 0);
    tk_env_stop(&e);
    zsock_destroy(&pull);
}

static void s_with_preload(sched_config_t *cfg)
{
    cfg->preload = s_preload;
    cfg->n_preload = 3;
}

/* A new leader registers the instances of the registry before it serves: a
 * request of one begins without its client registering it; a bad record
 * (bytes_per_block 0) is skipped; a registration with another spec is CONFLICT. */
static void test_preloaded_instances_are_served_at_once(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) {
        s_preload[i] = (kvtier_InstanceSpec)kvtier_InstanceSpec_init_zero;
        snprintf(s_preload[i].instance_id, sizeof s_preload[i].instance_id, "pre-%d", i);
        s_preload[i].tokens_per_block = 16;
        s_preload[i].bytes_per_block = i == 1 ? 0 : 2048;
    }
    tk_env_t e;
    tk_env_start(&e, 16, s_with_preload);
    assert_int_equal(tk_stat(e.t, "instances"), 3); /* pre-0, pre-2 and TK_INST */
    assert_int_equal(tk_begin(e.t, "pre-0", "r1", 0), 0);
    assert_int_equal(tk_begin(e.t, "pre-2", "r1", 0), 0);
    assert_int_equal(tk_begin(e.t, "pre-1", "r1", 0), kvtier_StatusCode_STATUS_NOT_FOUND);
    assert_int_equal(tk_register(e.t, "pre-0", 4096), kvtier_StatusCode_STATUS_CONFLICT);
    tk_env_stop(&e);
}

static void s_with_preload_and_registry(sched_config_t *cfg)
{
    s_with_preload(cfg);
    s_with_registry(cfg);
}

/* Review finding 5: a preloaded instance whose client registers it again has its
 * spec handed to the registry writer once (which then keeps its record fresh);
 * one whose client never comes back is not handed on, so its record ages out. */
static void test_preloaded_instance_back_is_handed_to_the_registry(void **state)
{
    (void)state;
    snprintf(s_registry_ep, sizeof s_registry_ep, "inproc://test-registry-pre-%d", (int)getpid());
    zsock_t *pull = zsock_new_pull(s_registry_ep);
    assert_non_null(pull);
    for (int i = 0; i < 3; i++) {
        s_preload[i] = (kvtier_InstanceSpec)kvtier_InstanceSpec_init_zero;
        snprintf(s_preload[i].instance_id, sizeof s_preload[i].instance_id, "pre-%d", i);
        snprintf(s_preload[i].model, sizeof s_preload[i].model, "llama-3-8b");
        snprintf(s_preload[i].dtype, sizeof s_preload[i].dtype, "bf16");
        s_preload[i].tokens_per_block = 16;
        s_preload[i].bytes_per_block = 2048;
    }
    tk_env_t e;
    tk_env_start(&e, 16, s_with_preload_and_registry); /* registers TK_INST: created */
    kvtier_InstanceSpec got;
    assert_int_equal(s_pulled(pull, 5000, &got), 1);
    assert_string_equal(got.instance_id, TK_INST);
    assert_int_equal(tk_register(e.t, "pre-0", 2048), 0); /* equal, preloaded: handed on */
    assert_int_equal(s_pulled(pull, 5000, &got), 1);
    assert_string_equal(got.instance_id, "pre-0");
    assert_int_equal(tk_register(e.t, "pre-0", 2048), 0); /* again: nothing */
    assert_int_equal(tk_register(e.t, TK_INST, 4096), 0);
    assert_int_equal(s_pulled(pull, 300, &got), 0);
    tk_env_stop(&e);
    zsock_destroy(&pull);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replies_carry_the_leader_epoch),
        cmocka_unit_test(test_prepare_resend_reopens),
        cmocka_unit_test(test_complete_resend_answers_again),
        cmocka_unit_test(test_foreign_epoch_is_aborted),
        cmocka_unit_test(test_complete_resend_while_completing_is_unavailable),
        cmocka_unit_test(test_complete_resend_after_failed_conclusion_is_aborted),
        cmocka_unit_test(test_registry_written_at_registration_only),
        cmocka_unit_test(test_preloaded_instance_back_is_handed_to_the_registry),
        cmocka_unit_test(test_preloaded_instances_are_served_at_once),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
