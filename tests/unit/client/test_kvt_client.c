/* test_kvt_client.c — libkvtier's connection and control role against scripted
 * coordinators (fake_coord.h: real bus_servers on loopback) and a real etcd:
 * option checks, discovery (static list and etcd), NOT_LEADER following,
 * rediscovery and the retry rule, token decoding errors, control-call results. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coord_etcd.h"
#include "etcd_fixture.h"
#include "fake_coord.h"
#include "kvtier.h"

#define T_TIMEOUT_MS 500   /* short per-call timeout: the hung-coordinator tests wait it out */
#define T_FAILOVER_MS 1500 /* ... and the failover budget after it */

static kvt_client_t *t_connect(const char *coordinators, char *err, size_t errlen)
{
    kvt_options_t o = {.coordinators = coordinators,
                       .timeout_ms = T_TIMEOUT_MS,
                       .failover_ms = T_FAILOVER_MS,
                       .name = "t"};
    return kvt_connect(&o, err, errlen);
}

static void t_key(kvt_key_t *k, uint8_t first, uint8_t second)
{
    memset(k, 0, sizeof *k);
    k->b[0] = first;
    k->b[1] = second;
}

/* ---- options --------------------------------------------------------------------- */

/* issue 3 §3 "Errors": no discovery source is a clear INVALID_ARGUMENT at connect. */
static void connect_without_discovery_source_is_rejected(void **state)
{
    (void)state;
    char err[512];
    kvt_options_t o = {0};
    assert_null(kvt_connect(&o, err, sizeof err));
    assert_non_null(strstr(err, "INVALID_ARGUMENT"));
    assert_non_null(strstr(err, "no coordinators and no etcd_endpoints"));
    o.coordinators = " , ";
    assert_null(kvt_connect(&o, err, sizeof err));
    assert_non_null(strstr(err, "lists no endpoint"));
    assert_null(kvt_connect(NULL, err, sizeof err));
    assert_non_null(strstr(err, "no options"));
    assert_non_null(kvt_last_error(NULL));
}

/* issue 3 §3 "Errors": a bad coordinator endpoint is named in the message. */
static void connect_rejects_bad_coordinator_endpoints(void **state)
{
    (void)state;
    char err[512];
    assert_null(t_connect("tcp://127.0.0.1:99999", err, sizeof err));
    assert_non_null(strstr(err, "INVALID_ARGUMENT"));
    assert_non_null(strstr(err, "99999"));
    assert_null(t_connect("tcp://*:7700", err, sizeof err));
    assert_non_null(strstr(err, "wildcard"));
    assert_null(t_connect("tcp://127.0.0.1:7700,bogus", err, sizeof err));
    assert_non_null(strstr(err, "bogus"));
    char many[2048] = "";
    for (int i = 0; i < 17; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%stcp://127.0.0.1:%d",
                 i ? "," : "", 7000 + i);
    assert_null(t_connect(many, err, sizeof err));
    assert_non_null(strstr(err, "more than 16"));
}

/* issue 3 §3 "Errors": every other option is checked before any connection. */
static void connect_rejects_bad_options(void **state)
{
    (void)state;
    char err[512];
    kvt_options_t o = {.etcd_endpoints = "ftp://127.0.0.1:2379"};
    assert_null(kvt_connect(&o, err, sizeof err));
    assert_non_null(strstr(err, "not an http:// or https:// URL"));
    kvt_options_t o2 = {.coordinators = "tcp://127.0.0.1:7700", .cluster = "a/b"};
    assert_null(kvt_connect(&o2, err, sizeof err));
    assert_non_null(strstr(err, "cluster"));
    kvt_options_t o3 = {.coordinators = "tcp://127.0.0.1:7700", .max_in_flight = 1u << 20};
    assert_null(kvt_connect(&o3, err, sizeof err));
    assert_non_null(strstr(err, "max_in_flight"));
    kvt_options_t o4 = {.coordinators = "tcp://127.0.0.1:7700", .timeout_ms = 4000000000u};
    assert_null(kvt_connect(&o4, err, sizeof err));
    assert_non_null(strstr(err, "timeout_ms"));
    /* issue 9 §3: the host name, given or from $KVTIER_HOST */
    kvt_options_t o5 = {.coordinators = "tcp://127.0.0.1:7700", .host = "a b"};
    assert_null(kvt_connect(&o5, err, sizeof err));
    assert_non_null(strstr(err, "host \"a b\": a host name is 1..46"));
    setenv("KVTIER_HOST", "-x", 1);
    kvt_options_t o6 = {.coordinators = "tcp://127.0.0.1:7700"};
    assert_null(kvt_connect(&o6, err, sizeof err));
    unsetenv("KVTIER_HOST");
    assert_non_null(strstr(err, "host \"-x\" ($KVTIER_HOST)"));
}

/* issue 3 §5 / brief: a coordinator endpoint with nobody listening gives
 * TIMEOUT or UNAVAILABLE (within the timeout), not a hang. */
static void unreachable_coordinator_fails_with_timeout(void **state)
{
    (void)state;
    char ep[64], err[512];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%u", etcd_fixture_free_port());
    assert_null(t_connect(ep, err, sizeof err));
    assert_true(strstr(err, "TIMEOUT") || strstr(err, "UNAVAILABLE"));
    assert_non_null(strstr(err, ep));
}

/* ---- discovery and NOT_LEADER ------------------------------------------------------ */

/* DESIGN.md §3: any coordinator answers cluster info; a standby names the leader. */
static void connect_follows_standby_to_leader(void **state)
{
    (void)state;
    zactor_t *a = fc_new(), *b = fc_new();
    char ea[128], eb[128], err[512];
    fc_endpoint(a, ea, sizeof ea);
    fc_endpoint(b, eb, sizeof eb);
    fc_set_mode(a, FC_STANDBY, eb);
    kvt_client_t *c = t_connect(ea, err, sizeof err);
    assert_non_null(c);
    kvt_cluster_info_t ci;
    assert_int_equal(kvt_cluster_info(c, &ci), 0);
    assert_string_equal(ci.leader_endpoint, eb);
    assert_int_equal(ci.leader_epoch, 7);
    assert_int_equal(ci.n_tiers, 1);
    assert_string_equal(ci.tiers[0].name, "host0");
    assert_string_equal(ci.tiers[0].kind, "host");
    assert_true(ci.tiers[0].up);
    assert_int_equal(fc_stats(a).served, 0);
    kvt_close(&c);
    assert_null(c);
    kvt_close(&c); /* idempotent */
    zactor_destroy(&a);
    zactor_destroy(&b);
}

/* DESIGN.md §6 Failover: NOT_LEADER with the leader's endpoint is followed and the
 * call sent again (safe for every call: a standby acted on nothing). */
static void not_leader_reply_is_followed(void **state)
{
    (void)state;
    zactor_t *a = fc_new(), *b = fc_new();
    char ea[128], eb[128], err[512];
    fc_endpoint(a, ea, sizeof ea);
    fc_endpoint(b, eb, sizeof eb);
    fc_set_mode(b, FC_STANDBY, ea);
    kvt_client_t *c = t_connect(eb, err, sizeof err); /* leader is a */
    assert_non_null(c);
    /* leadership moves to b; a now answers NOT_LEADER naming b */
    fc_set_mode(a, FC_STANDBY, eb);
    fc_set_mode(b, FC_LEADER, NULL);
    kvt_request_t r = {.instance_id = "inst", .request_id = "r1"};
    assert_int_equal(kvt_request_begin(c, &r), 0);
    assert_int_equal(fc_stats(a).not_leader, 1);
    assert_int_equal(fc_stats(b).begins, 1);
    kvt_close(&c);
    zactor_destroy(&a);
    zactor_destroy(&b);
}

/* DESIGN.md §6 Failover: a leader that stops answering -> TIMEOUT, the client
 * rediscovers, and an idempotent call (lookup) is sent again to the new leader. */
static void idempotent_call_retried_after_rediscovery(void **state)
{
    (void)state;
    zactor_t *a = fc_new(), *b = fc_new();
    char ea[128], eb[128], list[300], err[512];
    fc_endpoint(a, ea, sizeof ea);
    fc_endpoint(b, eb, sizeof eb);
    fc_set_mode(b, FC_STANDBY, ea);
    snprintf(list, sizeof list, "%s,%s", ea, eb);
    kvt_client_t *c = t_connect(list, err, sizeof err);
    assert_non_null(c);
    /* connect probed both in parallel and kept a's answer: b's probe is either
     * dropped with the closed socket or read by b soon after; let it be read (up
     * to 1 s) before b turns leader, or a late one would count as served below */
    for (int i = 0; i < 100 && fc_stats(b).requests < 1; i++)
        zclock_sleep(10);
    fc_set_mode(a, FC_SILENT, NULL);
    fc_set_mode(b, FC_LEADER, NULL);
    kvt_key_t keys[4];
    for (int i = 0; i < 4; i++)
        t_key(&keys[i], (uint8_t)i, 0);
    bool hit[4];
    uint32_t tiers[4];
    kvt_lookup_result_t res = {.hit = hit, .tier_ids = tiers};
    assert_int_equal(kvt_lookup(c, "inst", NULL, KVT_LOOKUP_PER_KEY, 0, keys, 4, &res), 0);
    assert_int_equal(res.hit_count, 2);
    assert_false(hit[0]);
    assert_true(hit[1]);
    assert_int_equal(tiers[1], 1);
    assert_int_equal(tiers[2], 0);
    assert_int_equal(fc_stats(b).served, 2); /* ClusterInfo of the rediscovery + lookup */
    kvt_close(&c);
    zactor_destroy(&a);
    zactor_destroy(&b);
}

/* kvtier.h "Failover" (issue 9 §1): request_begin is safe to send again (a begin
 * of an open request with the same context answers OK), so after a TIMEOUT it is
 * sent to the new leader; remove is not (its count), and says "not retried". */
static void begin_retried_after_timeout_remove_not(void **state)
{
    (void)state;
    zactor_t *a = fc_new(), *b = fc_new();
    char ea[128], eb[128], list[300], err[512];
    fc_endpoint(a, ea, sizeof ea);
    fc_endpoint(b, eb, sizeof eb);
    fc_set_mode(b, FC_STANDBY, ea);
    snprintf(list, sizeof list, "%s,%s", ea, eb);
    kvt_client_t *c = t_connect(list, err, sizeof err);
    assert_non_null(c);
    fc_set_mode(a, FC_SILENT, NULL);
    fc_set_mode(b, FC_LEADER, NULL);
    kvt_request_t r = {.instance_id = "inst", .request_id = "r1"};
    assert_int_equal(kvt_request_begin(c, &r), 0);
    assert_string_equal(kvt_last_error(c), "");
    assert_int_equal(fc_stats(b).begins, 1);
    /* back to a: remove is not sent again after its TIMEOUT */
    fc_set_mode(b, FC_SILENT, NULL);
    fc_set_mode(a, FC_LEADER, NULL);
    kvt_key_t k;
    t_key(&k, 1, 2);
    uint32_t removed = 0;
    assert_int_equal(kvt_remove(c, "inst", &k, 1, &removed), -KVT_TIMEOUT);
    assert_non_null(strstr(kvt_last_error(c), "remove: TIMEOUT"));
    assert_non_null(strstr(kvt_last_error(c), "not retried"));
    kvt_close(&c);
    zactor_destroy(&a);
    zactor_destroy(&b);
}

/* DESIGN.md §6: with no coordinator answering, the call fails with its status and
 * says that finding the leader failed too. */
static void no_leader_anywhere_reports_both_failures(void **state)
{
    (void)state;
    zactor_t *a = fc_new();
    char ea[128], err[512];
    fc_endpoint(a, ea, sizeof ea);
    kvt_client_t *c = t_connect(ea, err, sizeof err);
    assert_non_null(c);
    fc_set_mode(a, FC_SILENT, NULL);
    kvt_cluster_info_t ci;
    assert_int_equal(kvt_cluster_info(c, &ci), -KVT_TIMEOUT);
    assert_non_null(strstr(kvt_last_error(c), "no leader answered within failover_ms"));
    /* it answers again: the handle recovers */
    fc_set_mode(a, FC_LEADER, NULL);
    assert_int_equal(kvt_cluster_info(c, &ci), 0);
    kvt_close(&c);
    zactor_destroy(&a);
}

/* DESIGN.md §3: discovery through etcd reads /kvtier/<cluster>/leader. */
static void connect_discovers_leader_through_etcd(void **state)
{
    (void)state;
    etcd_fixture_t *f = etcd_fixture_start(NULL);
    assert_non_null(f);
    zactor_t *a = fc_new();
    char ea[128], err[512];
    fc_endpoint(a, ea, sizeof ea);
    kvt_options_t o = {
        .etcd_endpoints = etcd_fixture_url(f), .cluster = "test", .timeout_ms = 2000};
    assert_null(kvt_connect(&o, err, sizeof err));
    assert_non_null(strstr(err, "UNAVAILABLE"));
    assert_non_null(strstr(err, "/kvtier/test/leader"));

    const char *url = etcd_fixture_url(f);
    coord_etcd_config_t ecfg = {.endpoints = &url, .n_endpoints = 1};
    coord_etcd_t *e = coord_etcd_new(&ecfg);
    assert_non_null(e);
    assert_int_equal(coord_etcd_put(e, "/kvtier/test/leader", "{nope", 5, 0, NULL), 0);
    assert_null(kvt_connect(&o, err, sizeof err));
    assert_non_null(strstr(err, "is not {"));
    char val[256];
    int n = snprintf(val, sizeof val, "{\"name\":\"c1\",\"endpoint\":\"%s\",\"epoch\":5}", ea);
    assert_int_equal(coord_etcd_put(e, "/kvtier/test/leader", val, (size_t)n, 0, NULL), 0);
    kvt_client_t *c = kvt_connect(&o, err, sizeof err);
    assert_non_null(c);
    kvt_cluster_info_t ci;
    assert_int_equal(kvt_cluster_info(c, &ci), 0);
    assert_string_equal(ci.leader_endpoint, ea);
    kvt_close(&c);
    coord_etcd_destroy(&e);
    zactor_destroy(&a);
    etcd_fixture_destroy(&f);
}

/* ---- control role ------------------------------------------------------------------- */

/* DESIGN.md §9: the control calls return what the scheduler answered. */
static void control_calls_return_reply_fields(void **state)
{
    (void)state;
    zactor_t *a = fc_new();
    char ea[128], err[512];
    fc_endpoint(a, ea, sizeof ea);
    kvt_client_t *c = t_connect(ea, err, sizeof err);
    assert_non_null(c);
    kvt_instance_t spec = {.instance_id = "inst",
                           .model = "m",
                           .dtype = "fp16",
                           .tokens_per_block = 16,
                           .bytes_per_block = 4096};
    assert_int_equal(kvt_register_instance(c, &spec), 0);
    kvt_key_t keys[3];
    for (int i = 0; i < 3; i++)
        t_key(&keys[i], (uint8_t)(i + 1), 0);
    kvt_lookup_result_t res = {0}; /* no caller arrays: counts only */
    assert_int_equal(kvt_lookup(c, "inst", "r", KVT_LOOKUP_PREFIX, 0, keys, 3, &res), 0);
    assert_int_equal(res.hit_count, 2);
    uint32_t count = 0;
    assert_int_equal(kvt_touch(c, "inst", keys, 3, 1000, &count), 0);
    assert_int_equal(count, 3);
    assert_int_equal(kvt_remove(c, "inst", keys, 2, &count), 0);
    assert_int_equal(count, 2);
    kvt_stat_t st[4];
    uint32_t n = 0;
    assert_int_equal(kvt_stats(c, NULL, st, 4, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(st[0].name, "lookups");
    assert_int_equal(st[0].value, 11);
    assert_int_equal(kvt_stats(c, "inst", st, 1, &n), 0);
    assert_int_equal(n, 1);
    kvt_request_end_info_t info;
    assert_int_equal(kvt_request_end(c, "inst", "r", &info), 0);
    assert_int_equal(info.released_pins, 3);
    kvt_close(&c);
    zactor_destroy(&a);
}

/* ---- stats pages (issue "one source for shared identities and limits") ----------- */

#define T_COUNTERS 300u /* more than two StatsReply pages (KVT_STATS_PAGE each) */

static void t_check_counters(const kvt_stat_t *st, uint32_t first, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        char want[16];
        snprintf(want, sizeof want, "c%u", first + i);
        assert_string_equal(st[i].name, want);
        assert_int_equal(st[i].value, 1000 + first + i);
    }
}

/* Rule: every caller gets every counter. A scheduler with more counters than one
 * reply holds is paged through by kvt_stats: all of them arrive, in order, one
 * request per page; kvt_stats_page reports the same total. */
static void stats_beyond_one_reply_are_paged(void **state)
{
    (void)state;
    zactor_t *a = fc_new();
    char ea[128], err[512];
    fc_endpoint(a, ea, sizeof ea);
    fc_set_counters(a, T_COUNTERS, false);
    kvt_client_t *c = t_connect(ea, err, sizeof err);
    assert_non_null(c);
    static kvt_stat_t st[T_COUNTERS + 10];
    uint32_t n = 0, total = 0;
    uint64_t before = fc_stats(a).stats_reqs;
    assert_int_equal(kvt_stats(c, NULL, st, T_COUNTERS + 10, &n), 0);
    assert_int_equal(n, T_COUNTERS);
    t_check_counters(st, 0, n);
    assert_int_equal(fc_stats(a).stats_reqs - before,
                     (T_COUNTERS + KVT_STATS_PAGE - 1) / KVT_STATS_PAGE);
    assert_int_equal(kvt_stats_page(c, NULL, 0, st, T_COUNTERS, &n, &total), 0);
    assert_int_equal(n, T_COUNTERS);
    assert_int_equal(total, T_COUNTERS);
    kvt_close(&c);
    zactor_destroy(&a);
}

/* Rule: a bound that is reached is reported, never cut silently. kvt_stats_page
 * with a capacity below the total writes cap counters and returns the total (like
 * snprintf), so the caller can ask for the rest from offset + n or size its array;
 * cap 0 asks for the total alone; an offset near the end gets what is left. */
static void stats_small_capacity_returns_the_total(void **state)
{
    (void)state;
    zactor_t *a = fc_new();
    char ea[128], err[512];
    fc_endpoint(a, ea, sizeof ea);
    fc_set_counters(a, T_COUNTERS, false);
    kvt_client_t *c = t_connect(ea, err, sizeof err);
    assert_non_null(c);
    kvt_stat_t st[10];
    uint32_t n = 0, total = 0;
    uint64_t before = fc_stats(a).stats_reqs;
    assert_int_equal(kvt_stats_page(c, NULL, 0, st, 10, &n, &total), 0);
    assert_int_equal(n, 10);
    assert_int_equal(total, T_COUNTERS);
    t_check_counters(st, 0, 10);
    assert_int_equal(fc_stats(a).stats_reqs - before, 1); /* a page of 10 was asked for */
    assert_int_equal(kvt_stats_page(c, NULL, T_COUNTERS - 5, st, 10, &n, &total), 0);
    assert_int_equal(n, 5);
    assert_int_equal(total, T_COUNTERS);
    t_check_counters(st, T_COUNTERS - 5, 5);
    assert_int_equal(kvt_stats_page(c, "inst", 0, NULL, 0, &n, &total), 0);
    assert_int_equal(n, 0);
    assert_int_equal(total, T_COUNTERS);
    /* paging by hand, 10 at a time, gets every counter once */
    uint32_t off = 0;
    while (off < total) {
        assert_int_equal(kvt_stats_page(c, NULL, off, st, 10, &n, &total), 0);
        assert_true(n > 0);
        t_check_counters(st, off, n);
        off += n;
    }
    assert_int_equal(off, T_COUNTERS);
    kvt_close(&c);
    zactor_destroy(&a);
}

/* Rule: the pages of one call are of one list. When the list changes length
 * between pages the call starts over, and after a bounded number of tries fails
 * with CONFLICT (nothing reported written) rather than mix two lists. A call that
 * needs one page only is not affected. An older scheduler (no total, no paging)
 * still yields a total: the length of its one list. */
static void stats_list_changing_while_paged_is_a_conflict(void **state)
{
    (void)state;
    zactor_t *a = fc_new();
    char ea[128], err[512];
    fc_endpoint(a, ea, sizeof ea);
    kvt_client_t *c = t_connect(ea, err, sizeof err);
    assert_non_null(c);
    static kvt_stat_t st[T_COUNTERS * 2];
    uint32_t n = 0, total = 0;
    assert_int_equal(kvt_stats_page(c, NULL, 0, st, 1, &n, &total), 0);
    assert_int_equal(n, 1);
    assert_int_equal(total, 2); /* the unpaged fake: its two counters */
    kvt_cluster_info_t ci;
    assert_int_equal(kvt_cluster_info(c, &ci), 0);
    assert_int_equal(ci.total_tiers, ci.n_tiers); /* no total_tiers sent: the list is all */
    fc_set_counters(a, T_COUNTERS, true);
    assert_int_equal(kvt_stats_page(c, NULL, 0, st, T_COUNTERS * 2, &n, &total), -KVT_CONFLICT);
    assert_int_equal(n, 0);
    assert_non_null(strstr(kvt_last_error(c), "changed length"));
    assert_int_equal(kvt_stats_page(c, NULL, 0, st, KVT_STATS_PAGE, &n, &total), 0);
    assert_int_equal(n, KVT_STATS_PAGE);
    assert_true(total > T_COUNTERS);
    kvt_close(&c);
    zactor_destroy(&a);
}

/* issue 3 §3 "Errors": arguments the client can see are wrong are refused locally
 * with INVALID_ARGUMENT and a message; nothing is sent. */
static void bad_arguments_refused_without_a_request(void **state)
{
    (void)state;
    zactor_t *a = fc_new();
    char ea[128], err[512];
    fc_endpoint(a, ea, sizeof ea);
    kvt_client_t *c = t_connect(ea, err, sizeof err);
    assert_non_null(c);
    uint64_t before = fc_stats(a).requests;
    kvt_key_t k[1];
    t_key(&k[0], 1, 0);
    kvt_lookup_result_t res = {0};
    char longid[80];
    memset(longid, 'x', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    assert_int_equal(kvt_lookup(c, longid, NULL, KVT_LOOKUP_PREFIX, 0, k, 1, &res),
                     -KVT_INVALID_ARGUMENT);
    assert_non_null(strstr(kvt_last_error(c), "instance_id is longer than 63"));
    assert_int_equal(kvt_lookup(c, "inst", NULL, KVT_LOOKUP_PREFIX, 0, NULL, 1, &res),
                     -KVT_INVALID_ARGUMENT);
    assert_int_equal(kvt_lookup(c, "inst", NULL, KVT_LOOKUP_PREFIX, 0, k, KVT_MAX_KEYS + 1, &res),
                     -KVT_INVALID_ARGUMENT);
    assert_int_equal(kvt_lookup(c, "inst", NULL, (kvt_lookup_mode_t)7, 0, k, 1, &res),
                     -KVT_INVALID_ARGUMENT);
    assert_non_null(strstr(kvt_last_error(c), "unknown lookup mode"));
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_get(c, "inst", NULL, k, 1, &tok), -KVT_INVALID_ARGUMENT);
    assert_null(tok);
    assert_int_equal(kvt_complete_get(c, &tok, NULL), -KVT_INVALID_ARGUMENT);
    kvt_instance_t spec = {.instance_id = "inst", .tokens_per_block = 0, .bytes_per_block = 1};
    assert_int_equal(kvt_register_instance(c, &spec), -KVT_INVALID_ARGUMENT);
    assert_int_equal(kvt_request_begin(c, NULL), -KVT_INVALID_ARGUMENT);
    uint32_t n;
    assert_int_equal(kvt_stats(c, NULL, NULL, 4, &n), -KVT_INVALID_ARGUMENT);
    assert_int_equal(fc_stats(a).requests, before);
    assert_int_equal(kvt_lookup(NULL, "inst", NULL, KVT_LOOKUP_PREFIX, 0, k, 1, &res),
                     -KVT_INVALID_ARGUMENT);
    kvt_close(&c);
    zactor_destroy(&a);
}

/* Issue 10 §1: a put's token ids over KVT_MAX_TOKEN_IDS, not a whole number per
 * key, or missing are refused locally (INVALID_ARGUMENT, a message naming the
 * bound); nothing is sent, so nothing is reserved. A NULL meta is kvt_prepare_put. */
static void put_meta_bad_token_counts_refused_without_a_request(void **state)
{
    (void)state;
    zactor_t *a = fc_new();
    char ea[128], err[512];
    fc_endpoint(a, ea, sizeof ea);
    kvt_client_t *c = t_connect(ea, err, sizeof err);
    assert_non_null(c);
    kvt_key_t k[2];
    t_key(&k[0], 1, 0);
    t_key(&k[1], 2, 0);
    uint32_t *ids = calloc(KVT_MAX_TOKEN_IDS + 2, sizeof *ids);
    uint64_t before = fc_stats(a).requests;
    kvt_token_t *tok = NULL;
    kvt_put_meta_t m = {.token_ids = ids, .n_token_ids = KVT_MAX_TOKEN_IDS + 2};
    assert_int_equal(kvt_prepare_put_ex(c, "inst", "r", k, 2, &m, &tok), -KVT_INVALID_ARGUMENT);
    assert_non_null(strstr(kvt_last_error(c), "at most 65536"));
    m.n_token_ids = 31;
    assert_int_equal(kvt_prepare_put_ex(c, "inst", "r", k, 2, &m, &tok), -KVT_INVALID_ARGUMENT);
    assert_non_null(strstr(kvt_last_error(c), "31 token ids for 2 keys"));
    m = (kvt_put_meta_t){.token_ids = NULL, .n_token_ids = 32};
    assert_int_equal(kvt_prepare_put_ex(c, "inst", "r", k, 2, &m, &tok), -KVT_INVALID_ARGUMENT);
    assert_null(tok);
    assert_int_equal(fc_stats(a).requests, before);
    /* NULL meta and a good one reach the coordinator */
    assert_int_equal(kvt_prepare_put_ex(c, "inst", "r", k, 2, NULL, &tok), 0);
    assert_int_equal(kvt_complete_put(c, &tok, NULL), 0);
    m = (kvt_put_meta_t){.parent = &k[0], .token_ids = ids, .n_token_ids = 32};
    assert_int_equal(kvt_prepare_put_ex(c, "inst", "r", k + 1, 1, &m, &tok), 0);
    assert_int_equal(kvt_complete_put(c, &tok, NULL), 0);
    free(ids);
    kvt_close(&c);
    zactor_destroy(&a);
}

/* DESIGN.md §2 token; bus_token.h: a payload that does not decode is refused
 * (INTERNAL), no token is handed out, and the opened window is closed at once
 * with every key failed. */
static void undecodable_token_closes_the_window(void **state)
{
    (void)state;
    zactor_t *a = fc_new();
    char ea[128], err[512];
    fc_endpoint(a, ea, sizeof ea);
    kvt_client_t *c = t_connect(ea, err, sizeof err);
    assert_non_null(c);
    bus_token_tier_t tier = {.tier_id = 1, .slot_size = 4096, .epoch = 1};
    snprintf(tier.endpoint, sizeof tier.endpoint, "tcp://127.0.0.1:1");
    fc_set_tier(a, &tier, 4096, false);
    kvt_key_t k[3];
    for (int i = 0; i < 3; i++)
        t_key(&k[i], (uint8_t)i, 0);
    const struct {
        fc_token_mode_t mode;
        const char *says;
    } cases[] = {{FC_TOKEN_GARBAGE, "does not decode"},
                 {FC_TOKEN_SHORT, "2 entries for 3 keys"},
                 {FC_TOKEN_WRONG_KIND, "of kind"},
                 /* bus_token.h: the client refuses a v1 token, never misreads it */
                 {FC_TOKEN_V1, "version 1 is from an older coordinator"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fc_set_token_mode(a, cases[i].mode);
        uint64_t completes = fc_stats(a).completes;
        kvt_token_t *tok = (kvt_token_t *)&tok; /* must be overwritten */
        assert_int_equal(kvt_prepare_get(c, "inst", "r", k, 3, &tok), -KVT_INTERNAL);
        assert_null(tok);
        assert_non_null(strstr(kvt_last_error(c), "prepare_get: INTERNAL"));
        assert_non_null(strstr(kvt_last_error(c), cases[i].says));
        fc_stats_t st = fc_stats(a);
        assert_int_equal(st.completes, completes + 1);
        assert_int_equal(st.last_success_n, 3);
        assert_int_equal(st.last_success_true, 0);
    }
    fc_set_token_mode(a, FC_TOKEN_GOOD);
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_get(c, "inst", "r", k, 3, &tok), 0);
    assert_int_equal(kvt_token_count(tok), 3);
    assert_memory_equal(kvt_token_keys(tok), k, sizeof k);
    assert_int_equal(kvt_token_tier(tok, 2), 1);
    assert_int_equal(kvt_token_tier(tok, 3), 0);
    kvt_token_t *keep = tok;
    /* the wrong complete keeps the token */
    assert_int_equal(kvt_complete_put(c, &tok, NULL), -KVT_INVALID_ARGUMENT);
    assert_ptr_equal(tok, keep);
    /* complete(NULL) sends the recorded outcome: nothing was transferred */
    assert_int_equal(kvt_complete_get(c, &tok, NULL), 0);
    assert_null(tok);
    assert_int_equal(fc_stats(a).last_success_true, 0);
    /* a caller mask is sent as given */
    bool ok[3] = {true, false, true};
    assert_int_equal(kvt_prepare_get(c, "inst", "r", k, 3, &tok), 0);
    assert_int_equal(kvt_complete_get(c, &tok, ok), 0);
    assert_int_equal(fc_stats(a).last_success_true, 2);
    kvt_close(&c);
    zactor_destroy(&a);
}

/* kvtier.h: tokens are pooled; many prepare/complete rounds reuse them and a
 * handle closed with tokens outstanding frees them (ASan checks the leak). */
static void tokens_outstanding_at_close_are_freed(void **state)
{
    (void)state;
    zactor_t *a = fc_new();
    char ea[128], err[512];
    fc_endpoint(a, ea, sizeof ea);
    kvt_client_t *c = t_connect(ea, err, sizeof err);
    assert_non_null(c);
    bus_token_tier_t tier = {.tier_id = 1, .slot_size = 4096, .epoch = 1};
    snprintf(tier.endpoint, sizeof tier.endpoint, "tcp://127.0.0.1:1");
    fc_set_tier(a, &tier, 4096, false);
    kvt_key_t k[2];
    t_key(&k[0], 1, 0);
    t_key(&k[1], 2, 0);
    kvt_token_t *toks[20];
    for (int i = 0; i < 20; i++)
        assert_int_equal(kvt_prepare_put(c, "inst", "r", k, 2, &toks[i]), 0);
    for (int i = 0; i < 18; i++)
        assert_int_equal(kvt_complete_put(c, &toks[i], NULL), 0);
    kvt_close(&c); /* toks[18], toks[19] outstanding */
    zactor_destroy(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(connect_without_discovery_source_is_rejected),
        cmocka_unit_test(connect_rejects_bad_coordinator_endpoints),
        cmocka_unit_test(connect_rejects_bad_options),
        cmocka_unit_test(unreachable_coordinator_fails_with_timeout),
        cmocka_unit_test(connect_follows_standby_to_leader),
        cmocka_unit_test(not_leader_reply_is_followed),
        cmocka_unit_test(idempotent_call_retried_after_rediscovery),
        cmocka_unit_test(begin_retried_after_timeout_remove_not),
        cmocka_unit_test(no_leader_anywhere_reports_both_failures),
        cmocka_unit_test(connect_discovers_leader_through_etcd),
        cmocka_unit_test(control_calls_return_reply_fields),
        cmocka_unit_test(stats_beyond_one_reply_are_paged),
        cmocka_unit_test(stats_small_capacity_returns_the_total),
        cmocka_unit_test(stats_list_changing_while_paged_is_a_conflict),
        cmocka_unit_test(bad_arguments_refused_without_a_request),
        cmocka_unit_test(put_meta_bad_token_counts_refused_without_a_request),
        cmocka_unit_test(undecodable_token_closes_the_window),
        cmocka_unit_test(tokens_outstanding_at_close_are_freed),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
