/* test_coord_standby.c — the standby responder (DESIGN.md §3: "a standby answers
 * client requests with NOT_LEADER plus the leader's endpoint"; any coordinator
 * answers ClusterInfo; wave-2 "who binds what"). Real sockets on loopback. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <czmq.h>

#include "bus_client.h"
#include "bus_envelope.h"
#include "coord_standby.h"

#define CALL_MS 10000 /* upper bound of one call; never a timing assertion */

typedef struct {
    zactor_t *sb;
    char ep[256];
    bus_client_t *cli;
    kvtier_Envelope *req, *rep;
} fx_t;

static int s_setup(void **state)
{
    fx_t *fx = calloc(1, sizeof *fx);
    coord_standby_config_t cfg = {.endpoint = "tcp://127.0.0.1:*", .cluster = "c1", .name = "sb1"};
    fx->sb = coord_standby_new(&cfg);
    assert_non_null(fx->sb);
    assert_int_equal(coord_standby_endpoint(fx->sb, fx->ep, sizeof fx->ep), 0);
    fx->cli = bus_client_new(fx->ep, NULL);
    assert_non_null(fx->cli);
    fx->req = calloc(1, sizeof *fx->req);
    fx->rep = calloc(1, sizeof *fx->rep);
    *state = fx;
    return 0;
}

static int s_teardown(void **state)
{
    fx_t *fx = *state;
    bus_client_destroy(&fx->cli);
    coord_standby_destroy(&fx->sb);
    free(fx->req);
    free(fx->rep);
    free(fx);
    return 0;
}

static int s_cluster_info(fx_t *fx)
{
    kvtier_Status st;
    bus_env_init(fx->req, kvtier_Envelope_cluster_info_req_tag, "test");
    int rc = bus_client_call(fx->cli, fx->req, NULL, NULL, 0, CALL_MS, fx->rep, NULL, NULL, &st);
    if (rc == 0)
        assert_int_equal(fx->rep->which_body, kvtier_Envelope_cluster_info_rep_tag);
    return rc;
}

/* Sends a Stats request; returns the reply status code. */
static int s_stats(fx_t *fx, kvtier_Status *st)
{
    bus_env_init(fx->req, kvtier_Envelope_stats_req_tag, "test");
    memset(fx->rep, 0, sizeof *fx->rep);
    (void)bus_client_call(fx->cli, fx->req, NULL, NULL, 0, CALL_MS, fx->rep, NULL, NULL, st);
    return (int)st->code;
}

static kvtier_TierInfo s_tier(const char *name, uint32_t id, uint64_t epoch)
{
    kvtier_TierInfo t = kvtier_TierInfo_init_zero;
    t.tier_id = id;
    snprintf(t.name, sizeof t.name, "%s", name);
    t.kind = kvtier_TierKind_TIER_KIND_HOST;
    snprintf(t.endpoint, sizeof t.endpoint, "tcp://127.0.0.1:%u", 7000 + id);
    snprintf(t.shm, sizeof t.shm, "/kvt-%s", name);
    t.epoch = epoch;
    t.capacity_slots = 64;
    t.slot_bytes = 4096;
    return t;
}

/* An ephemeral port is resolved, so the scheduler can later bind the same one. */
static void test_standby_binds_and_reports_resolved_endpoint(void **state)
{
    fx_t *fx = *state;
    assert_non_null(strstr(fx->ep, "tcp://127.0.0.1:"));
    assert_null(strchr(fx->ep, '*'));
}

/* Any coordinator answers ClusterInfo; before a leader is known it says so ("", 0). */
static void test_cluster_info_answered_without_a_leader(void **state)
{
    fx_t *fx = *state;
    assert_int_equal(s_cluster_info(fx), 0);
    kvtier_ClusterInfoReply *ci = &fx->rep->body.cluster_info_rep;
    assert_string_equal(ci->cluster, "c1");
    assert_string_equal(ci->leader_endpoint, "");
    assert_int_equal(ci->leader_epoch, 0);
    assert_int_equal(ci->tiers_count, 0);
}

/* DESIGN §3: everything else is NOT_LEADER with the leader's endpoint. */
static void test_other_requests_get_not_leader_with_leader_endpoint(void **state)
{
    fx_t *fx = *state;
    kvtier_Status st;
    assert_int_equal(s_stats(fx, &st), kvtier_StatusCode_STATUS_NOT_LEADER);
    assert_string_equal(fx->rep->leader_endpoint, "");
    assert_non_null(strstr(st.message, "no leader"));

    assert_int_equal(coord_standby_set_leader(fx->sb, "tcp://127.0.0.1:5555", 7, 0xfeedbeefcafe0001ull), 0);
    assert_int_equal(s_stats(fx, &st), kvtier_StatusCode_STATUS_NOT_LEADER);
    assert_string_equal(fx->rep->leader_endpoint, "tcp://127.0.0.1:5555");
    assert_non_null(strstr(st.message, "tcp://127.0.0.1:5555"));

    assert_int_equal(s_cluster_info(fx), 0);
    assert_string_equal(fx->rep->body.cluster_info_rep.leader_endpoint, "tcp://127.0.0.1:5555");
    assert_int_equal(fx->rep->body.cluster_info_rep.leader_epoch, 7);
    /* and which etcd elected that leader: kvtier status --check --etcd compares it */
    assert_true(fx->rep->body.cluster_info_rep.etcd_cluster_id == 0xfeedbeefcafe0001ull);

    /* A request with arrays (Lookup with keys) is told the same. */
    uint8_t keys[3][16] = {{1}, {2}, {3}};
    bus_arrays_t arr = {.keys = {.keys = keys, .n = 3, .cap = 3}};
    bus_env_init(fx->req, kvtier_Envelope_lookup_req_tag, "test");
    snprintf(fx->req->body.lookup_req.instance_id, sizeof fx->req->body.lookup_req.instance_id,
             "i1");
    int rc = bus_client_call(fx->cli, fx->req, &arr, NULL, 0, CALL_MS, fx->rep, NULL, NULL, &st);
    assert_true(rc < 0);
    assert_int_equal(st.code, kvtier_StatusCode_STATUS_NOT_LEADER);
    assert_string_equal(fx->rep->leader_endpoint, "tcp://127.0.0.1:5555");
}

/* ClusterInfo lists the tiers membership knows, marked up; DOWN removes one. */
static void test_cluster_info_lists_tiers_from_membership(void **state)
{
    fx_t *fx = *state;
    kvtier_TierInfo a = s_tier("host0", 1, 11), b = s_tier("host1", 2, 22);
    assert_int_equal(coord_standby_tier(fx->sb, true, &a), 0);
    assert_int_equal(coord_standby_tier(fx->sb, true, &b), 0);
    assert_int_equal(s_cluster_info(fx), 0);
    kvtier_ClusterInfoReply *ci = &fx->rep->body.cluster_info_rep;
    assert_int_equal(ci->tiers_count, 2);
    for (pb_size_t i = 0; i < ci->tiers_count; i++) {
        assert_true(ci->tiers[i].up);
        const kvtier_TierInfo *want = strcmp(ci->tiers[i].name, "host0") == 0 ? &a : &b;
        assert_int_equal(ci->tiers[i].tier_id, want->tier_id);
        assert_int_equal(ci->tiers[i].epoch, want->epoch);
        assert_string_equal(ci->tiers[i].endpoint, want->endpoint);
        assert_string_equal(ci->tiers[i].shm, want->shm);
    }
    /* Re-registration with a new epoch replaces the entry. */
    a.epoch = 12;
    assert_int_equal(coord_standby_tier(fx->sb, true, &a), 0);
    assert_int_equal(coord_standby_tier(fx->sb, false, &b), 0);
    assert_int_equal(s_cluster_info(fx), 0);
    assert_int_equal(ci->tiers_count, 1);
    assert_string_equal(ci->tiers[0].name, "host0");
    assert_int_equal(ci->tiers[0].epoch, 12);
}

/* Issue "one source for shared identities and limits": a bound that is reached is
 * reported, never cut silently. More tiers up than one ClusterInfoReply holds: the
 * reply lists BUS_MAX_TIERS and its total_tiers counts every tier up; one that goes
 * away leaves the total. */
static void test_cluster_info_reports_tiers_beyond_its_bound(void **state)
{
    fx_t *fx = *state;
    for (uint32_t i = 0; i < BUS_MAX_TIERS + 2; i++) {
        char name[16];
        snprintf(name, sizeof name, "host%u", i);
        kvtier_TierInfo t = s_tier(name, i + 1, 1);
        assert_int_equal(coord_standby_tier(fx->sb, true, &t), 0);
    }
    assert_int_equal(s_cluster_info(fx), 0);
    kvtier_ClusterInfoReply *ci = &fx->rep->body.cluster_info_rep;
    assert_int_equal(ci->tiers_count, BUS_MAX_TIERS);
    assert_int_equal(ci->total_tiers, BUS_MAX_TIERS + 2);
    char last[16];
    snprintf(last, sizeof last, "host%u", BUS_MAX_TIERS + 1);
    kvtier_TierInfo gone = s_tier(last, BUS_MAX_TIERS + 2, 1);
    assert_int_equal(coord_standby_tier(fx->sb, false, &gone), 0);
    assert_int_equal(s_cluster_info(fx), 0);
    assert_int_equal(ci->tiers_count, BUS_MAX_TIERS);
    assert_int_equal(ci->total_tiers, BUS_MAX_TIERS + 1);
}

/* DESIGN §5: malformed input gets INVALID_ARGUMENT and the standby goes on. */
static void test_malformed_input_is_rejected_and_standby_keeps_answering(void **state)
{
    fx_t *fx = *state;
    zsock_t *raw = zsock_new_dealer(fx->ep);
    assert_non_null(raw);
    zstr_send(raw, "\xff\xff\xff garbage");
    zsock_set_rcvtimeo(raw, CALL_MS);
    zmsg_t *m = zmsg_recv(raw);
    assert_non_null(m);
    kvtier_Envelope *env = fx->rep;
    kvtier_Status st;
    zframe_t *f = zmsg_first(m);
    assert_int_equal(bus_env_decode(zframe_data(f), zframe_size(f), BUS_DIR_REPLY, env, NULL, &st),
                     0);
    assert_true(env->has_status);
    assert_int_equal(env->status.code, kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    zmsg_destroy(&m);
    zsock_destroy(&raw);
    assert_int_equal(s_cluster_info(fx), 0);
}

/* One address, one holder: a second standby on a bound endpoint fails cleanly,
 * and after the first goes, the address can be bound again (scheduler/standby
 * hand-over inside one process). */
static void test_endpoint_is_rebindable_after_destroy(void **state)
{
    fx_t *fx = *state;
    coord_standby_config_t cfg = {
        .endpoint = fx->ep, .cluster = "c1", .name = "sb2", .bind_attempts = 2, .bind_retry_ms = 1};
    zactor_t *second = coord_standby_new(&cfg);
    assert_null(second);
    bus_client_destroy(&fx->cli);
    coord_standby_destroy(&fx->sb);
    cfg.bind_attempts = 0; /* default: bounded retries while the old socket closes */
    fx->sb = coord_standby_new(&cfg);
    assert_non_null(fx->sb);
    fx->cli = bus_client_new(fx->ep, NULL);
    assert_int_equal(s_cluster_info(fx), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_standby_binds_and_reports_resolved_endpoint, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_cluster_info_answered_without_a_leader, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_other_requests_get_not_leader_with_leader_endpoint,
                                        s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_cluster_info_lists_tiers_from_membership, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_cluster_info_reports_tiers_beyond_its_bound, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(
            test_malformed_input_is_rejected_and_standby_keeps_answering, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_endpoint_is_rebindable_after_destroy, s_setup,
                                        s_teardown),
    };
    int rc = cmocka_run_group_tests_name("coord_standby", tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
