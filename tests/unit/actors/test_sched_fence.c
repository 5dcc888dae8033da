/* test_sched_fence.c — leader fencing between two schedulers and a real tier
 * actor (issue 9 §2, docs/SECURITY.md): both schedulers and the tier actor have
 * the cluster secret, over real ZeroMQ sockets.
 *  - a leader raises the tier's fence as the tier comes up, before it has sent
 *    the tier any request of its own (an empty DeleteSlots under its admin token);
 *  - once a newer leader did, the deposed one changes nothing there: its header
 *    writes and deletes are refused as fenced (counted under reason old_leader)
 *    and the blocks stay as they were;
 *  - a scheduler whose lease bound has passed (sched_config_t.lease_until_ms)
 *    answers NOT_LEADER to the meta plane and mints no token, while ClusterInfo
 *    still answers. */
#include <stdatomic.h>
#include <unistd.h>

#include "sched_testkit.h"
#include "tier_actor.h"

#define CLUSTER "fence-test"
#define CAP 32u
#define SLOT 4096u

static const uint8_t s_secret[BUS_SECRET_BYTES] = "sched-fence-test-secret-32bytes";

typedef struct {
    zactor_t *ta;
    char ep[256];
    uint64_t epoch;
} t_tier_t;

static void t_tier_start(t_tier_t *t)
{
    tier_actor_config_t tc;
    memset(&tc, 0, sizeof tc);
    snprintf(tc.tier.name, sizeof tc.tier.name, "host0");
    snprintf(tc.tier.kind, sizeof tc.tier.kind, "host");
    snprintf(tc.tier.path, sizeof tc.tier.path, "/kvt-fencetest-%d", (int)getpid());
    tc.tier.capacity = CAP;
    tc.tier.slot_size = SLOT;
    tc.tier_id = 1;
    tc.endpoint = "tcp://127.0.0.1:*";
    tc.secret = s_secret;
    tc.cluster = CLUSTER;
    t->ta = tier_actor_new(&tc);
    assert_non_null(t->ta);
    assert_int_equal(tier_actor_endpoint(t->ta, t->ep, sizeof t->ep), 0);
    t->epoch = tier_actor_epoch(t->ta);
    assert_true(t->epoch != 0);
}

static tier_actor_stats_t t_stats(t_tier_t *t)
{
    tier_actor_stats_t s;
    assert_int_equal(tier_actor_stats(t->ta, &s), 0);
    return s;
}

/* Polls the tier's stats until `ok` holds (a bound on waiting, not on timing). */
static tier_actor_stats_t t_until(t_tier_t *t, bool (*ok)(const tier_actor_stats_t *, uint64_t),
                                  uint64_t arg)
{
    int64_t until = zclock_mono() + TK_POLL_MS;
    tier_actor_stats_t s = t_stats(t);
    while (!ok(&s, arg) && zclock_mono() < until) {
        zclock_sleep(5);
        s = t_stats(t);
    }
    assert_true(ok(&s, arg));
    return s;
}

static bool t_seen(const tier_actor_stats_t *s, uint64_t epoch)
{
    return s->leader_seen == epoch;
}

static bool t_fenced(const tier_actor_stats_t *s, uint64_t n)
{
    return s->refusals[TIER_REFUSAL_OLD_LEADER] >= n;
}

static void t_config(sched_config_t *cfg, uint64_t leader_epoch, const _Atomic int64_t *until)
{
    tk_config(cfg, CAP, SLOT);
    snprintf(cfg->cluster, sizeof cfg->cluster, CLUSTER);
    cfg->has_secret = true;
    memcpy(cfg->secret, s_secret, sizeof cfg->secret);
    cfg->leader_epoch = leader_epoch;
    cfg->lease_until_ms = until;
}

static void test_new_leader_fences_the_deposed_one(void **state)
{
    (void)state;
    t_tier_t tier;
    t_tier_start(&tier);
    sched_config_t *cfg = calloc(1, sizeof *cfg);
    assert_non_null(cfg);

    /* the old leader (epoch 7): its fence rises with the tier, then 4 blocks */
    t_config(cfg, 7, NULL);
    tk_t *old = tk_new(cfg);
    tk_tier_up(old, 1, tier.ep, tier.epoch, CAP, SLOT);
    (void)t_until(&tier, t_seen, 7);
    assert_int_equal(tk_register(old, TK_INST, SLOT), 0);
    assert_int_equal(tk_begin(old, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(old, "r1", 0, 4), 0);
    assert_int_equal(t_stats(&tier).headers_put, 4);

    /* the new leader (epoch 9) reads the tier: the fence is up before it serves */
    t_config(cfg, 9, NULL);
    tk_t *neu = tk_new(cfg);
    tk_tier_up(neu, 1, tier.ep, tier.epoch, CAP, SLOT);
    tier_actor_stats_t before = t_until(&tier, t_seen, 9);
    assert_int_equal(before.slots_deleted, 0); /* the fence deleted nothing */

    /* the old leader resumes: a put's header write and a remove's delete */
    assert_int_equal(tk_begin(old, TK_INST, "r2", 0), 0);
    int rc = tk_put(old, "r2", 10, 2);
    assert_int_not_equal(rc, 0);
    uint8_t keys[4][16];
    tk_keys(0, 4, keys);
    assert_int_equal(tk_remove(old, keys, 2), 0); /* its index forgets; the tier refuses */
    tier_actor_stats_t after =
        t_until(&tier, t_fenced, before.refusals[TIER_REFUSAL_OLD_LEADER] + 2);
    assert_int_equal(after.headers_put, before.headers_put);
    assert_int_equal(after.slots_deleted, 0);
    assert_int_equal(after.leader_seen, 9);

    /* the new leader still has all 4 blocks, adopted from the untouched headers */
    assert_int_equal(tk_register(neu, TK_INST, SLOT), 0);
    assert_int_equal(tk_prefix(neu, keys, 4), 4);
    tk_destroy(&old);
    tk_destroy(&neu);
    free(cfg);
    zactor_destroy(&tier.ta);
}

static void test_scheduler_past_its_lease_is_no_leader(void **state)
{
    (void)state;
    t_tier_t tier;
    t_tier_start(&tier);
    sched_config_t *cfg = calloc(1, sizeof *cfg);
    assert_non_null(cfg);
    _Atomic int64_t until = 0; /* not confirmed yet: valid */
    t_config(cfg, 7, &until);
    tk_t *t = tk_new(cfg);
    tk_tier_up(t, 1, tier.ep, tier.epoch, CAP, SLOT);
    assert_int_equal(tk_register(t, TK_INST, SLOT), 0);
    atomic_store(&until, sched_lease_word(7, zclock_mono() + 600000)); /* confirmed: valid */
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    assert_int_equal(tk_put(t, "r1", 0, 2), 0);
    uint64_t headers = t_stats(&tier).headers_put;
    tk_req(t, kvtier_Envelope_cluster_info_req_tag); /* it names itself while it leads */
    assert_int_equal(tk_call(t, NULL), 0);
    assert_true(t->rep->body.cluster_info_rep.leader_endpoint[0] != '\0');
    assert_int_equal(t->rep->body.cluster_info_rep.leader_epoch, 7);

    atomic_store(&until, sched_lease_word(7, SCHED_LEASE_STEPPED_DOWN)); /* it stepped down */
    assert_int_equal(tk_begin(t, TK_INST, "r2", 0), kvtier_StatusCode_STATUS_NOT_LEADER);
    assert_non_null(strstr(t->msg, "no longer the leader"));
    uint8_t keys[2][16];
    tk_keys(0, 2, keys);
    assert_int_equal(tk_prepare_put(t, "r1", keys, 2), kvtier_StatusCode_STATUS_NOT_LEADER);
    assert_int_equal(tk_remove(t, keys, 2), kvtier_StatusCode_STATUS_NOT_LEADER);
    /* sticky: a bound written later (a new lease of this process) does not revive it */
    atomic_store(&until, sched_lease_word(7, zclock_mono() + 600000));
    assert_int_equal(tk_prefix(t, keys, 2), -kvtier_StatusCode_STATUS_NOT_LEADER);
    /* what it says about itself still answers, naming no leader (discovery then
     * takes another coordinator's answer, not this NOT_LEADER one) */
    tk_req(t, kvtier_Envelope_cluster_info_req_tag);
    assert_int_equal(tk_call(t, NULL), 0);
    assert_string_equal(t->rep->body.cluster_info_rep.leader_endpoint, "");
    assert_int_equal(t->rep->body.cluster_info_rep.leader_epoch, 0);
    assert_int_equal(t->rep->body.cluster_info_rep.total_tiers, 1);
    tier_actor_stats_t s = t_stats(&tier);
    assert_int_equal(s.headers_put, headers);
    assert_int_equal(s.slots_deleted, 0);
    tk_destroy(&t);
    free(cfg);
    zactor_destroy(&tier.ta);
}

/* Review finding 4: the lease word is tied to one term. A scheduler of epoch 7
 * whose word carries another epoch's bound (a later term of the same
 * coordinator, or a keepalive of a new lease) is no leader, however far in the
 * future that bound lies. */
static void test_scheduler_of_another_term_is_no_leader(void **state)
{
    (void)state;
    t_tier_t tier;
    t_tier_start(&tier);
    sched_config_t *cfg = calloc(1, sizeof *cfg);
    assert_non_null(cfg);
    _Atomic int64_t until = sched_lease_word(7, zclock_mono() + 600000);
    t_config(cfg, 7, &until);
    tk_t *t = tk_new(cfg);
    tk_tier_up(t, 1, tier.ep, tier.epoch, CAP, SLOT);
    assert_int_equal(tk_register(t, TK_INST, SLOT), 0);
    assert_int_equal(tk_begin(t, TK_INST, "r1", 0), 0);
    atomic_store(&until, sched_lease_word(9, zclock_mono() + 600000)); /* term 9's bound */
    assert_int_equal(tk_begin(t, TK_INST, "r2", 0), kvtier_StatusCode_STATUS_NOT_LEADER);
    assert_non_null(strstr(t->msg, "no longer the leader"));
    atomic_store(&until, sched_lease_word(7, zclock_mono() + 600000)); /* sticky */
    assert_int_equal(tk_begin(t, TK_INST, "r3", 0), kvtier_StatusCode_STATUS_NOT_LEADER);
    tk_destroy(&t);
    free(cfg);
    zactor_destroy(&tier.ta);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_leader_fences_the_deposed_one),
        cmocka_unit_test(test_scheduler_past_its_lease_is_no_leader),
        cmocka_unit_test(test_scheduler_of_another_term_is_no_leader),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
