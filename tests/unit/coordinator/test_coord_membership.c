/* test_coord_membership.c — tier membership from etcd against a real etcd
 * (DESIGN.md §3: "tier actors appear and disappear by their leases"; issue 3 §1;
 * wave-2 tier record). A tier key put under a lease is UP, revoking the lease is
 * DOWN, a re-registration with a new epoch is UP with that epoch, and a watch that
 * ends (etcd restarted) loses no change. Waits poll with generous upper bounds. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <czmq.h>

#include "coord_config.h"
#include "coord_etcd.h"
#include "coord_membership.h"
#include "etcd_fixture.h"

#define WAIT_MS 20000 /* upper bound of every wait; never a timing assertion */

static etcd_fixture_t *g_etcd;
static int g_cluster_seq;

typedef struct {
    char cluster[32];
    coord_etcd_t *etcd;
    zactor_t *m;
} fx_t;

static int s_group_setup(void **state)
{
    (void)state;
    g_etcd = etcd_fixture_start(NULL);
    return g_etcd ? 0 : -1;
}

static int s_group_teardown(void **state)
{
    (void)state;
    etcd_fixture_destroy(&g_etcd);
    return 0;
}

static coord_etcd_config_t s_ecfg(const char **eps)
{
    eps[0] = etcd_fixture_url(g_etcd);
    return (coord_etcd_config_t){.endpoints = eps, .n_endpoints = 1, .timeout_ms = 10000};
}

static int s_setup(void **state)
{
    fx_t *fx = calloc(1, sizeof *fx);
    snprintf(fx->cluster, sizeof fx->cluster, "mb%d", ++g_cluster_seq);
    const char *eps[1];
    coord_etcd_config_t cfg = s_ecfg(eps);
    fx->etcd = coord_etcd_new(&cfg);
    assert_non_null(fx->etcd);
    *state = fx;
    return 0;
}

static int s_teardown(void **state)
{
    fx_t *fx = *state;
    coord_membership_destroy(&fx->m);
    coord_etcd_destroy(&fx->etcd);
    free(fx);
    return 0;
}

static void s_start(fx_t *fx)
{
    const char *eps[] = {etcd_fixture_url(g_etcd)};
    coord_membership_config_t cfg = {.etcd_endpoints = eps, .n_etcd = 1, .cluster = fx->cluster};
    fx->m = coord_membership_new(&cfg);
    assert_non_null(fx->m);
}

static kvtier_TierInfo s_tier(const char *name, uint32_t id, uint64_t epoch)
{
    kvtier_TierInfo t = kvtier_TierInfo_init_zero;
    t.tier_id = id;
    snprintf(t.name, sizeof t.name, "%s", name);
    t.kind = kvtier_TierKind_TIER_KIND_HOST;
    snprintf(t.endpoint, sizeof t.endpoint, "tcp://127.0.0.1:%u", 7000 + id);
    snprintf(t.shm, sizeof t.shm, "/kvt-%s", name);
    snprintf(t.host, sizeof t.host, "host-a");
    t.epoch = epoch;
    t.capacity_slots = 64;
    t.slot_bytes = 4096;
    t.up = true;
    return t;
}

/* Registers T the way `kvtier tier` does: a fresh lease, the record under it. */
static int64_t s_register(fx_t *fx, const kvtier_TierInfo *t)
{
    char key[128], suffix[64], val[COORD_TIER_VALUE_MAX];
    size_t len = 0;
    int64_t lease = 0, ttl = 0;
    snprintf(suffix, sizeof suffix, "tiers/%s", t->name);
    coord_cluster_key(key, sizeof key, fx->cluster, suffix);
    assert_int_equal(coord_tier_value_encode(t, val, sizeof val, &len), 0);
    assert_int_equal(coord_etcd_lease_grant(fx->etcd, 30, 0, &lease, &ttl), 0);
    assert_int_equal(coord_etcd_put(fx->etcd, key, val, len, lease, NULL), 0);
    return lease;
}

static void s_put_raw(fx_t *fx, const char *name, const char *value)
{
    char key[128], suffix[64];
    snprintf(suffix, sizeof suffix, "tiers/%s", name);
    coord_cluster_key(key, sizeof key, fx->cluster, suffix);
    assert_int_equal(coord_etcd_put(fx->etcd, key, value, strlen(value), 0, NULL), 0);
}

static coord_tier_change_t s_next(fx_t *fx)
{
    coord_tier_change_t ch;
    zpoller_t *p = zpoller_new(fx->m, NULL);
    void *which = zpoller_wait(p, WAIT_MS);
    zpoller_destroy(&p);
    assert_ptr_equal(which, fx->m);
    assert_int_equal(coord_membership_recv(fx->m, &ch), 0);
    return ch;
}

static bool s_quiet(fx_t *fx)
{
    zpoller_t *p = zpoller_new(fx->m, NULL);
    void *which = zpoller_wait(p, 0);
    zpoller_destroy(&p);
    return which == NULL;
}

static void s_assert_tier(const kvtier_TierInfo *got, const kvtier_TierInfo *want)
{
    assert_int_equal(got->tier_id, want->tier_id);
    assert_string_equal(got->name, want->name);
    assert_int_equal(got->kind, want->kind);
    assert_string_equal(got->endpoint, want->endpoint);
    assert_string_equal(got->shm, want->shm);
    assert_string_equal(got->host, want->host);
    assert_true(got->epoch == want->epoch);
    assert_int_equal(got->capacity_slots, want->capacity_slots);
    assert_int_equal(got->slot_bytes, want->slot_bytes);
}

/* wave-2 record: round trip (epoch above 2^63 survives as a decimal string);
 * every malformed record is refused with a reason. */
static void test_tier_record_codec(void **state)
{
    (void)state;
    kvtier_TierInfo t = s_tier("host0", 3, UINT64_MAX - 5), back;
    char buf[COORD_TIER_VALUE_MAX], err[160];
    size_t len = 0;
    assert_int_equal(coord_tier_value_encode(&t, buf, sizeof buf, &len), 0);
    assert_non_null(strstr(buf, "\"epoch\":\"18446744073709551610\""));
    assert_int_equal(coord_tier_value_decode(buf, len, &back, err, sizeof err), 0);
    s_assert_tier(&back, &t);
    assert_true(back.up);
    char m[64];
    assert_int_equal(coord_tier_value_metrics(buf, len, m, sizeof m), -ENOENT);
    /* issue 10: the metrics address rides along; a reader that ignores it decodes
     * the same record */
    assert_int_equal(coord_tier_value_encode_metrics(&t, "127.0.0.1:7791", buf, sizeof buf, &len),
                     0);
    assert_int_equal(coord_tier_value_decode(buf, len, &back, err, sizeof err), 0);
    s_assert_tier(&back, &t);
    assert_int_equal(coord_tier_value_metrics(buf, len, m, sizeof m), 0);
    assert_string_equal(m, "127.0.0.1:7791");
    assert_int_equal(coord_tier_value_metrics("{\"metrics\":7}", 13, m, sizeof m), -ENOENT);
    /* issue 11: a gpu tier's device access (IPC handle, GPU UUID, stride) rides along */
    kvtier_TierInfo g = s_tier("gpu0", 4, 99);
    g.cuda_ipc_handle.size = sizeof g.cuda_ipc_handle.bytes;
    for (size_t i = 0; i < sizeof g.cuda_ipc_handle.bytes; i++)
        g.cuda_ipc_handle.bytes[i] = (uint8_t)(i * 37 + 1);
    g.gpu_uuid.size = sizeof g.gpu_uuid.bytes;
    memset(g.gpu_uuid.bytes, 0xa5, sizeof g.gpu_uuid.bytes);
    g.slot_stride = 69632;
    assert_int_equal(coord_tier_value_encode(&g, buf, sizeof buf, &len), 0);
    assert_int_equal(coord_tier_value_decode(buf, len, &back, err, sizeof err), 0);
    assert_int_equal(back.cuda_ipc_handle.size, sizeof g.cuda_ipc_handle.bytes);
    assert_memory_equal(back.cuda_ipc_handle.bytes, g.cuda_ipc_handle.bytes,
                        sizeof g.cuda_ipc_handle.bytes);
    assert_int_equal(back.gpu_uuid.size, 16);
    assert_memory_equal(back.gpu_uuid.bytes, g.gpu_uuid.bytes, 16);
    assert_int_equal(back.slot_stride, 69632);
    assert_int_equal(coord_tier_value_encode(&t, buf, 10, &len), -ENOBUFS);
    t.kind = kvtier_TierKind_TIER_KIND_UNSPECIFIED;
    assert_int_equal(coord_tier_value_encode(&t, buf, sizeof buf, &len), -EINVAL);
    const char *good = "{\"name\":\"n\",\"kind\":\"nvme\",\"tier_id\":2,\"endpoint\":\"e\","
                       "\"shm\":\"\",\"host\":\"h\",\"epoch\":7,\"capacity\":1,\"slot_size\":1}";
    assert_int_equal(coord_tier_value_decode(good, strlen(good), &back, err, sizeof err), 0);
    assert_int_equal(back.kind, kvtier_TierKind_TIER_KIND_NVME);
    assert_int_equal(back.epoch, 7);
    const struct {
        const char *text, *why;
    } bad[] = {
        {"nope", "JSON"},
        {"{\"kind\":\"host\"}", "missing \"name\""},
        {"{\"name\":\"n\",\"kind\":\"ssd\"}", "unknown kind"},
        {"{\"name\":\"n\",\"kind\":\"host\",\"tier_id\":0}", "tier_id"},
        {"{\"name\":\"n\",\"kind\":\"host\",\"tier_id\":1,\"endpoint\":\"\"}", "empty"},
        {"{\"name\":\"n\",\"kind\":\"host\",\"tier_id\":1,\"endpoint\":\"e\",\"shm\":1}", "shm"},
        {"{\"name\":\"n\",\"kind\":\"host\",\"tier_id\":1,\"endpoint\":\"e\",\"shm\":\"\","
         "\"host\":\"h\",\"epoch\":\"18446744073709551616\"}",
         "epoch"},
        {"{\"name\":\"n\",\"kind\":\"host\",\"tier_id\":1,\"endpoint\":\"e\",\"shm\":\"\","
         "\"host\":\"h\",\"epoch\":\"1\",\"capacity\":0,\"slot_size\":1}",
         "capacity"},
        {"{\"name\":\"n\",\"kind\":\"host\",\"tier_id\":1,\"endpoint\":\"e\",\"shm\":\"\","
         "\"host\":\"h\",\"epoch\":\"1\",\"capacity\":1}",
         "slot_size"},
        {"{\"name\":\"0123456789012345678901234567890123456789\"}", "name"},
        {"{\"name\":\"n\",\"kind\":\"host\",\"tier_id\":1,\"endpoint\":\"e\",\"shm\":\"\","
         "\"host\":\"h\",\"epoch\":\"1\",\"capacity\":1,\"slot_size\":1,\"gpu_uuid\":\"0g\"}",
         "gpu_uuid"},
        {"{\"name\":\"n\",\"kind\":\"host\",\"tier_id\":1,\"endpoint\":\"e\",\"shm\":\"\","
         "\"host\":\"h\",\"epoch\":\"1\",\"capacity\":1,\"slot_size\":1,"
         "\"cuda_ipc_handle\":\"00\"}",
         "cuda_ipc_handle"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(
            coord_tier_value_decode(bad[i].text, strlen(bad[i].text), &back, err, sizeof err),
            -EBADMSG);
        if (!strstr(err, bad[i].why))
            print_message("%s -> %s\n", bad[i].text, err);
        assert_non_null(strstr(err, bad[i].why));
    }
}

/* DESIGN §3: a tier key put under a lease is UP; revoking the lease is DOWN. */
static void test_tier_key_under_lease_is_up_then_down_on_revoke(void **state)
{
    fx_t *fx = *state;
    s_start(fx);
    kvtier_TierInfo t = s_tier("host0", 1, 1234);
    int64_t lease = s_register(fx, &t);
    coord_tier_change_t ch = s_next(fx);
    assert_true(ch.up);
    assert_true(ch.revision > 0);
    s_assert_tier(&ch.tier, &t);
    assert_int_equal(coord_etcd_lease_revoke(fx->etcd, lease), 0);
    ch = s_next(fx);
    assert_false(ch.up);
    assert_string_equal(ch.tier.name, "host0");
    assert_int_equal(ch.tier.tier_id, 1); /* the last record, for the scheduler */
    assert_true(s_quiet(fx));
}

/* Issue 3 §5: a re-registered tier (new lease, new epoch: its memory is gone) is
 * UP with the new epoch; rewriting the same record reports nothing. */
static void test_reregistered_tier_is_up_with_new_epoch(void **state)
{
    fx_t *fx = *state;
    s_start(fx);
    kvtier_TierInfo t = s_tier("host0", 1, 100);
    int64_t lease = s_register(fx, &t);
    assert_true(s_next(fx).up);
    /* The same record again (a lease renewal that re-puts) is no change. */
    char key[128], val[COORD_TIER_VALUE_MAX];
    size_t len = 0;
    coord_cluster_key(key, sizeof key, fx->cluster, "tiers/host0");
    coord_tier_value_encode(&t, val, sizeof val, &len);
    assert_int_equal(coord_etcd_put(fx->etcd, key, val, len, lease, NULL), 0);
    /* Then a restart: a new record with a new epoch under a new lease replaces it. */
    kvtier_TierInfo t2 = s_tier("host0", 1, 200);
    int64_t lease2 = s_register(fx, &t2);
    coord_tier_change_t ch = s_next(fx);
    assert_true(ch.up);
    assert_true(ch.tier.epoch == 200);
    assert_int_equal(coord_etcd_lease_revoke(fx->etcd, lease), 0); /* key already moved */
    assert_int_equal(coord_etcd_lease_revoke(fx->etcd, lease2), 0);
    ch = s_next(fx);
    assert_false(ch.up);
    assert_true(ch.tier.epoch == 200);
    assert_true(s_quiet(fx));
}

/* Tiers registered before the coordinator starts are listed as UP. */
static void test_tiers_present_at_start_are_listed(void **state)
{
    fx_t *fx = *state;
    kvtier_TierInfo a = s_tier("a", 1, 1), b = s_tier("b", 2, 2);
    s_register(fx, &a);
    s_register(fx, &b);
    s_put_raw(fx, "junk", "not a record"); /* logged and ignored */
    s_start(fx);
    coord_tier_change_t c1 = s_next(fx), c2 = s_next(fx);
    assert_true(c1.up && c2.up);
    assert_string_equal(c1.tier.name, "a"); /* ascending key order */
    assert_string_equal(c2.tier.name, "b");
    assert_int_equal(c1.revision, c2.revision); /* one consistent list */
    assert_true(s_quiet(fx));
}

/* A record that stops parsing is treated as absent: DOWN, and UP again once fixed. */
static void test_bad_record_counts_as_absent(void **state)
{
    fx_t *fx = *state;
    s_start(fx);
    kvtier_TierInfo t = s_tier("host0", 1, 5);
    s_register(fx, &t);
    assert_true(s_next(fx).up);
    s_put_raw(fx, "host0", "{\"name\":\"host0\"}");
    assert_false(s_next(fx).up);
    s_put_raw(fx, "other", "{\"name\":\"host0\",\"kind\":\"host\"}"); /* name mismatch: ignored */
    s_register(fx, &t);
    coord_tier_change_t ch = s_next(fx);
    assert_true(ch.up);
    assert_string_equal(ch.tier.name, "host0");
    assert_true(s_quiet(fx));
}

/* coord_membership.h: when the watch ends (etcd restarted), it lists again and
 * watches on: a tier that left meanwhile is DOWN, a new one is UP. */
static void test_watch_end_relists_and_reports_the_difference(void **state)
{
    fx_t *fx = *state;
    s_start(fx);
    kvtier_TierInfo a = s_tier("a", 1, 1), b = s_tier("b", 2, 2), c = s_tier("c", 3, 3);
    int64_t la = s_register(fx, &a);
    s_register(fx, &b);
    assert_true(s_next(fx).up);
    assert_true(s_next(fx).up);
    assert_int_equal(etcd_fixture_stop(g_etcd), 0);
    assert_int_equal(etcd_fixture_restart(g_etcd), 0);
    /* Changes made right after the restart, possibly before the watch is back. */
    assert_int_equal(coord_etcd_lease_revoke(fx->etcd, la), 0);
    s_register(fx, &c);
    bool a_down = false, c_up = false;
    for (int i = 0; i < 2; i++) {
        coord_tier_change_t ch = s_next(fx);
        if (!ch.up && strcmp(ch.tier.name, "a") == 0)
            a_down = true;
        if (ch.up && strcmp(ch.tier.name, "c") == 0)
            c_up = true;
    }
    assert_true(a_down);
    assert_true(c_up);
    /* And the watch works after the re-list. */
    kvtier_TierInfo b2 = s_tier("b", 2, 22);
    s_register(fx, &b2);
    coord_tier_change_t ch = s_next(fx);
    assert_true(ch.up);
    assert_true(ch.tier.epoch == 22);
    assert_true(s_quiet(fx));
}

/* Issue "actor start": the config passes coord_membership_new's checks but the
 * actor's start fails (an etcd endpoint that is empty once its trailing '/' are
 * cut gets no etcd handle): NULL, where zactor_new alone returned an actor that
 * never lists. */
static void test_failed_start_is_null(void **state)
{
    (void)state;
    const char *eps[] = {"//"};
    coord_membership_config_t cfg = {.etcd_endpoints = eps, .n_etcd = 1, .cluster = "mbx"};
    assert_null(coord_membership_new(&cfg));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tier_record_codec),
        cmocka_unit_test(test_failed_start_is_null),
        cmocka_unit_test_setup_teardown(test_tier_key_under_lease_is_up_then_down_on_revoke,
                                        s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_reregistered_tier_is_up_with_new_epoch, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_tiers_present_at_start_are_listed, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_bad_record_counts_as_absent, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_watch_end_relists_and_reports_the_difference, s_setup,
                                        s_teardown),
    };
    int rc =
        cmocka_run_group_tests_name("coord_membership", tests, s_group_setup, s_group_teardown);
    zsys_shutdown();
    return rc;
}
