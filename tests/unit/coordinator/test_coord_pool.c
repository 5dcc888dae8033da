/* test_coord_pool.c — pools (issue 9 §3) in the coordinator: the deployment's
 * "pools" (ids after the tiers', chains naming a pool, the member defaults, every
 * bad value refused with its key path), a member's entry as `kvtier tier --pool`
 * runs it (coord_config_pool_member), the record's "pool" field, and tier id
 * allocation in a real etcd (coord_pool_claim_id: lowest free id, the same member
 * again, a full pool refused naming the holders, an id freed with its lease). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config_testkit.h"
#include "coord_config.h"
#include "coord_etcd.h"
#include "coord_membership.h"
#include "etcd_fixture.h"

static coord_config_t g_cfg;
static char g_err[512];
static etcd_fixture_t *g_etcd;

#define S_TIERS                                                                                    \
    "\"tiers\":[{\"name\":\"host0\",\"kind\":\"host\",\"endpoint\":\"tcp://127.0.0.1:7710\","      \
    "\"capacity\":64},{\"name\":\"host1\",\"kind\":\"host\",\"endpoint\":"                         \
    "\"tcp://127.0.0.1:7711\",\"capacity\":64,\"shm\":\"/t-host1\"}]"
#define S_POOL(extra)                                                                              \
    "\"pools\":[{\"name\":\"remote\",\"kind\":\"remote\",\"max_members\":4,\"capacity\":128,"      \
    "\"slot_size\":\"64KiB\",\"prefault\":false" extra "}]"

static int s_load(const char *text)
{
    int rc = coord_config_load_string("t.json", ckit_full(text), &g_cfg, g_err, sizeof g_err);
    if (rc != 0)
        print_message("rejected: %s\n", g_err);
    return rc;
}

static void s_reject(const char *text, const char *path, const char *what)
{
    int rc = coord_config_load_string("t.json", ckit_full(text), &g_cfg, g_err, sizeof g_err);
    if (rc == 0)
        print_message("accepted: %s\n", text);
    assert_int_equal(rc, -EINVAL);
    char want[300];
    snprintf(want, sizeof want, "t.json: %s:", path);
    if (strncmp(g_err, want, strlen(want)) != 0 || !strstr(g_err, what))
        print_message("message \"%s\" lacks \"%s\" / \"%s\"\n", g_err, want, what);
    assert_true(strncmp(g_err, want, strlen(want)) == 0);
    assert_non_null(strstr(g_err, what));
}

/* Ids follow the tiers'; a chain names the pool by its first id; the default
 * chain puts the pools below the tiers; every id of the range answers the
 * member defaults. */
static void test_pool_ids_and_chains(void **state)
{
    (void)state;
    assert_int_equal(s_load("{" S_TIERS ", " S_POOL(
                         ", \"high_watermark\": 0.8") ", "
                                                      "\"chains\":[{\"name\":\"c\",\"tiers\":["
                                                      "\"host0\",\"remote\"]}]}"),
                     0);
    assert_int_equal(g_cfg.n_pools, 1);
    const coord_pool_config_t *p = coord_config_pool(&g_cfg, "remote");
    assert_non_null(p);
    assert_int_equal(p->first_id, 3);
    assert_int_equal(p->max_members, 4);
    assert_int_equal(p->member.capacity, 128);
    assert_int_equal(p->member.slot_size, 64 << 10);
    assert_true(p->member.high_watermark > 0.79 && p->member.high_watermark < 0.81);
    assert_int_equal(g_cfg.chains[0].n_tiers, 2);
    assert_int_equal(g_cfg.chains[0].tier_ids[1], 3);
    for (uint32_t id = 3; id <= 6; id++) {
        assert_ptr_equal(coord_config_pool_of_id(&g_cfg, id), p);
        assert_ptr_equal(coord_config_tier_by_id(&g_cfg, id), &p->member);
        assert_int_equal(coord_config_level_id(&g_cfg, id), 3);
    }
    assert_null(coord_config_tier_by_id(&g_cfg, 7));
    assert_null(coord_config_pool_of_id(&g_cfg, 2));
    /* host0 has the pool below it: reclaimed ahead; the pool is the last level */
    assert_true(coord_tier_has_next(&g_cfg, 1));
    assert_false(coord_tier_has_next(&g_cfg, 5));

    assert_int_equal(s_load("{" S_TIERS ", " S_POOL("") "}"), 0); /* no chains */
    assert_int_equal(g_cfg.chains[0].n_tiers, 3);
    assert_int_equal(g_cfg.chains[0].tier_ids[2], 3);
    /* the largest pool: 32 ids less the tiers' */
    assert_int_equal(s_load("{" S_TIERS
                            ", \"pools\":[{\"name\":\"p\",\"kind\":\"remote\",\"max_members\":30,"
                            "\"capacity\":8}]}"),
                     0);
    assert_int_equal(g_cfg.pools[0].max_members, 30);
}

static void test_bad_pools_are_refused_with_path(void **state)
{
    (void)state;
    s_reject("{" S_TIERS ", \"pools\":[{\"name\":\"p\",\"kind\":\"remote\",\"max_members\":31,"
             "\"capacity\":8}]}",
             "pools[0].max_members",
             "31 members do not fit: tier ids are 1..32, 2 taken by \"tiers\" and the pools before "
             "this one, so this pool has at most 30");
    s_reject("{" S_TIERS ", \"pools\":[{\"name\":\"p\",\"kind\":\"remote\",\"max_members\":20,"
             "\"capacity\":8},{\"name\":\"q\",\"kind\":\"remote\",\"max_members\":11,"
             "\"capacity\":8}]}",
             "pools[1].max_members", "so this pool has at most 10");
    s_reject("{" S_TIERS ", \"pools\":[{\"name\":\"p\",\"kind\":\"remote\",\"max_members\":0,"
             "\"capacity\":8}]}",
             "pools[0].max_members", "");
    s_reject("{" S_TIERS ", \"pools\":[{\"name\":\"p\",\"kind\":\"remote\",\"capacity\":8}]}",
             "pools[0].max_members", "");
    s_reject("{" S_TIERS ", \"pools\":[{\"name\":\"host1\",\"kind\":\"remote\","
             "\"max_members\":2,\"capacity\":8}]}",
             "pools[0].name", "\"host1\" is also tiers[1]'s name");
    s_reject("{" S_TIERS ", \"pools\":[{\"name\":\"p\",\"kind\":\"remote\",\"max_members\":2,"
             "\"capacity\":8},{\"name\":\"p\",\"kind\":\"remote\",\"max_members\":2,"
             "\"capacity\":8}]}",
             "pools[1].name", "duplicate pool name \"p\"");
    s_reject("{" S_TIERS ", \"pools\":[{\"name\":\"p\",\"kind\":\"host\",\"max_members\":2,"
             "\"capacity\":8}]}",
             "pools[0].kind", "\"host\" takes an address of its own per tier (\"shm\")");
    s_reject("{" S_TIERS ", \"pools\":[{\"name\":\"p\",\"kind\":\"remote\",\"max_members\":2,"
             "\"capacity\":8,\"endpoint\":\"tcp://127.0.0.1:1\"}]}",
             "pools[0].endpoint", "a pool's members each have their own");
    s_reject("{" S_TIERS ", \"pools\":[{\"name\":\"p\",\"kind\":\"remote\",\"max_members\":2,"
             "\"capacity\":8,\"host\":\"h1\"}]}",
             "pools[0].host", "a pool's members each have their own");
    s_reject("{" S_TIERS ", \"pools\":[{\"name\":\"p\",\"kind\":\"remote\",\"max_members\":2,"
             "\"capacity\":8,\"bogus\":1}]}",
             "pools[0].bogus", "");
    s_reject("{" S_TIERS ", \"pools\":[{\"name\":\"p\",\"kind\":\"remote\",\"max_members\":2,"
             "\"capacity\":0}]}",
             "pools[0].capacity", "");
    s_reject("{" S_TIERS ", \"pools\":[{\"name\":\"p\",\"kind\":\"remote\",\"max_members\":2,"
             "\"capacity\":8,\"transport\":\"rdma\"}]}",
             "pools[0].transport", "ucx"); /* the member options are the kind's */
    s_reject("{" S_TIERS ", " S_POOL("") ", \"chains\":[{\"name\":\"c\",\"tiers\":[\"host0\","
                                         "\"remot\"]}]}",
             "chains[0].tiers[1]", "no tier or pool named \"remot\"");
    s_reject("{" S_TIERS ", " S_POOL("") ", \"chains\":[{\"name\":\"c\",\"tiers\":[\"remote\","
                                         "\"remote\"]}]}",
             "chains[0].tiers[1]", "twice");
}

/* "members": the members deploy/supervise starts, checked like tiers' entries. */
static void test_listed_members(void **state)
{
    (void)state;
    assert_int_equal(s_load("{" S_TIERS ", " S_POOL(", \"members\": [{\"name\": \"m1\", "
                                                    "\"endpoint\": \"tcp://0.0.0.0:7301\", "
                                                    "\"advertise\": \"tcp://10.0.0.2:7301\", "
                                                    "\"host\": \"h2\"}, {\"name\": \"m2\", "
                                                    "\"endpoint\": \"tcp://127.0.0.1:7302\", "
                                                    "\"capacity\": 512}]") "}"),
                     0);
    const coord_pool_config_t *p = NULL;
    const coord_pool_member_t *m = coord_config_pool_entry(&g_cfg, "m2", &p);
    assert_non_null(m);
    assert_ptr_equal(p, &g_cfg.pools[0]);
    assert_int_equal(p->n_members, 2);
    assert_int_equal(m->capacity, 512);
    assert_string_equal(m->advertise, "");
    m = coord_config_pool_entry(&g_cfg, "m1", NULL);
    assert_string_equal(m->host, "h2");
    assert_string_equal(m->advertise, "tcp://10.0.0.2:7301");
    assert_null(coord_config_pool_entry(&g_cfg, "host0", NULL));
    assert_string_equal(g_cfg.first_host, "h2"); /* no tier names a host */

    s_reject("{" S_TIERS ", " S_POOL(", \"members\": [{\"name\": \"host0\", \"endpoint\": "
                                     "\"tcp://127.0.0.1:1\"}]") "}",
             "pools[0].members[0].name", "\"host0\" is already a tier's, a pool's or a member's");
    s_reject("{" S_TIERS ", " S_POOL(", \"members\": [{\"name\": \"remote\", \"endpoint\": "
                                     "\"tcp://127.0.0.1:1\"}]") "}",
             "pools[0].members[0].name", "already");
    s_reject("{" S_TIERS ", " S_POOL(", \"members\": [{\"name\": \"a\", \"endpoint\": "
                                     "\"tcp://127.0.0.1:1\"}, {\"name\": \"a\", \"endpoint\": "
                                     "\"tcp://127.0.0.1:2\"}]") "}",
             "pools[0].members[1].name", "already");
    s_reject("{" S_TIERS ", " S_POOL(", \"members\": [{\"name\": \"a\"}]") "}",
             "pools[0].members[0].endpoint", "");
    s_reject("{" S_TIERS ", " S_POOL(", \"members\": [{\"name\": \"a\", \"endpoint\": "
                                     "\"tcp://127.0.0.1:1\", \"shm\": \"/x\"}]") "}",
             "pools[0].members[0].shm", "");
    s_reject("{" S_TIERS ", \"pools\":[{\"name\":\"p\",\"kind\":\"remote\",\"max_members\":1,"
             "\"capacity\":8,\"members\":[{\"name\":\"a\",\"endpoint\":\"tcp://127.0.0.1:1\"},"
             "{\"name\":\"b\",\"endpoint\":\"tcp://127.0.0.1:2\"}]}]}",
             "pools[0].members", "2 members listed, but max_members is 1");
}

/* A member's entry: the pool's defaults, its own name, id, endpoint, capacity;
 * bad values named. */
static void test_member_entry(void **state)
{
    (void)state;
    assert_int_equal(s_load("{" S_TIERS ", " S_POOL("") "}"), 0);
    const coord_pool_config_t *p = coord_config_pool(&g_cfg, "remote");
    coord_tier_config_t m;
    assert_int_equal(coord_config_pool_member(&g_cfg, p, "m1", 4, "tcp://0.0.0.0:7301",
                                              "tcp://10.0.0.2:7301", "h2", 0, &m, g_err,
                                              sizeof g_err),
                     0);
    assert_string_equal(m.name, "m1");
    assert_int_equal(m.id, 4);
    assert_string_equal(m.kind_name, "remote");
    assert_string_equal(m.endpoint, "tcp://0.0.0.0:7301");
    assert_string_equal(m.advertise, "tcp://10.0.0.2:7301");
    assert_string_equal(m.host, "h2");
    assert_int_equal(m.capacity, 128);
    assert_int_equal(m.backend.capacity, 128);
    assert_string_equal(m.backend.name, "m1");
    assert_int_equal(coord_config_pool_member(&g_cfg, p, "m1", 4, "tcp://127.0.0.1:*", NULL, NULL,
                                              512, &m, g_err, sizeof g_err),
                     0);
    assert_int_equal(m.capacity, 512);
    assert_int_equal(m.backend.capacity, 512);

    assert_int_equal(coord_config_pool_member(&g_cfg, p, "host0", 4, "tcp://127.0.0.1:*", NULL,
                                              NULL, 0, &m, g_err, sizeof g_err),
                     -EINVAL);
    assert_non_null(strstr(g_err, "the deployment has a tier or pool of that name"));
    assert_int_equal(coord_config_pool_member(&g_cfg, p, "bad name", 4, "tcp://127.0.0.1:*", NULL,
                                              NULL, 0, &m, g_err, sizeof g_err),
                     -EINVAL);
    assert_non_null(strstr(g_err, "--name \"bad name\""));
    assert_int_equal(coord_config_pool_member(&g_cfg, p, "m1", 7, "tcp://127.0.0.1:*", NULL, NULL,
                                              0, &m, g_err, sizeof g_err),
                     -EINVAL);
    assert_non_null(strstr(g_err, "tier id 7 is not pool remote's (3..6)"));
    assert_int_equal(coord_config_pool_member(&g_cfg, p, "m1", 4, "udp://x", NULL, NULL, 0, &m,
                                              g_err, sizeof g_err),
                     -EINVAL);
    assert_non_null(strstr(g_err, "--endpoint \"udp://x\""));
    assert_int_equal(coord_config_pool_member(&g_cfg, p, "m1", 4, "tcp://127.0.0.1:*",
                                              "tcp://10.0.0.2:*", NULL, 0, &m, g_err, sizeof g_err),
                     -EINVAL);
    assert_non_null(strstr(g_err, "--advertise"));
}

/* The record carries the pool; a record without one is a deployment tier's. */
static void test_record_pool_field(void **state)
{
    (void)state;
    kvtier_TierInfo in = kvtier_TierInfo_init_zero, out;
    in.tier_id = 3;
    snprintf(in.name, sizeof in.name, "m1");
    snprintf(in.kind_name, sizeof in.kind_name, "remote");
    snprintf(in.endpoint, sizeof in.endpoint, "tcp://127.0.0.1:7301");
    snprintf(in.pool, sizeof in.pool, "remote");
    in.epoch = 5;
    in.capacity_slots = 8;
    in.slot_bytes = 4096;
    char buf[COORD_TIER_VALUE_MAX];
    size_t len = 0;
    assert_int_equal(coord_tier_value_encode(&in, buf, sizeof buf, &len), 0);
    assert_int_equal(coord_tier_value_decode(buf, len, &out, g_err, sizeof g_err), 0);
    assert_string_equal(out.pool, "remote");
    in.pool[0] = '\0';
    assert_int_equal(coord_tier_value_encode(&in, buf, sizeof buf, &len), 0);
    assert_null(memmem(buf, len, "\"pool\"", 6));
    assert_int_equal(coord_tier_value_decode(buf, len, &out, g_err, sizeof g_err), 0);
    assert_string_equal(out.pool, "");
    const char *empty = "{\"name\":\"m1\",\"kind\":\"remote\",\"tier_id\":3,\"endpoint\":\"tcp://"
                        "127.0.0.1:1\",\"shm\":\"\",\"host\":\"\",\"epoch\":\"5\",\"capacity\":8,"
                        "\"slot_size\":4096,\"pool\":\"\"}";
    assert_int_equal(coord_tier_value_decode(empty, strlen(empty), &out, g_err, sizeof g_err),
                     -EBADMSG);
    assert_non_null(strstr(g_err, "\"pool\" is empty"));
}

static coord_etcd_t *s_etcd(void)
{
    static const char *eps[1];
    eps[0] = etcd_fixture_url(g_etcd);
    coord_etcd_config_t c = {.endpoints = eps, .n_endpoints = 1, .timeout_ms = 10000};
    coord_etcd_t *e = coord_etcd_new(&c);
    assert_non_null(e);
    return e;
}

static int64_t s_lease(coord_etcd_t *e)
{
    int64_t id = 0, ttl = 0;
    assert_int_equal(coord_etcd_lease_grant(e, 30, 0, &id, &ttl), 0);
    return id;
}

/* Ids in a real etcd: the lowest free one; the same member again gets its own
 * back under its new lease; a full pool is refused naming the holders; an id is
 * free again once its member's lease is revoked. */
static void test_claim_ids(void **state)
{
    (void)state;
    coord_etcd_t *e = s_etcd();
    char why[512];
    uint32_t id = 0;
    int64_t l1 = s_lease(e), l2 = s_lease(e), l3 = s_lease(e);
    assert_int_equal(
        coord_pool_claim_id(e, "cp1", "remote", 3, 2, "m1", l1, 0, &id, why, sizeof why), 0);
    assert_int_equal(id, 3);
    assert_int_equal(
        coord_pool_claim_id(e, "cp1", "remote", 3, 2, "m2", l2, 0, &id, why, sizeof why), 0);
    assert_int_equal(id, 4);
    assert_int_equal(
        coord_pool_claim_id(e, "cp1", "remote", 3, 2, "m3", l3, 0, &id, why, sizeof why), -EBUSY);
    assert_string_equal(why, "pool remote is full: 2 of 2 members (id 3: "
                             "{\"name\":\"m1\",\"pool\":\"remote\"}, id 4: "
                             "{\"name\":\"m2\",\"pool\":\"remote\"}); raise pools[].max_members "
                             "in the deployment or retire a member (kvtier drain, then stop it)");
    /* m1 restarted before its old lease lapsed: its own id, now under the new lease */
    int64_t l1b = s_lease(e);
    assert_int_equal(
        coord_pool_claim_id(e, "cp1", "remote", 3, 2, "m1", l1b, 0, &id, why, sizeof why), 0);
    assert_int_equal(id, 3);
    assert_int_equal(coord_etcd_lease_revoke(e, l1), 0); /* the old lease goes: the id stays */
    coord_etcd_meta_t meta;
    char val[128];
    size_t vlen = 0;
    assert_int_equal(coord_etcd_get(e, "/kvtier/cp1/tier_ids/3", val, sizeof val, &vlen, &meta), 0);
    assert_int_equal(meta.lease, l1b);
    /* WANT: that id only (a new lease for the id held); another's is refused */
    assert_int_equal(
        coord_pool_claim_id(e, "cp1", "remote", 3, 2, "m2", l2, 3, &id, why, sizeof why), -EBUSY);
    assert_non_null(strstr(why, "tier id 3 of pool remote was taken by another member"));
    /* m2 leaves (its lease revoked): m3 gets its id */
    assert_int_equal(coord_etcd_lease_revoke(e, l2), 0);
    assert_int_equal(
        coord_pool_claim_id(e, "cp1", "remote", 3, 2, "m3", l3, 0, &id, why, sizeof why), 0);
    assert_int_equal(id, 4);
    /* another cluster's ids are its own */
    assert_int_equal(
        coord_pool_claim_id(e, "cp2", "remote", 3, 2, "m1", l3, 0, &id, why, sizeof why), 0);
    assert_int_equal(id, 3);
    coord_etcd_destroy(&e);
}

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_ids_and_chains),
        cmocka_unit_test(test_bad_pools_are_refused_with_path),
        cmocka_unit_test(test_listed_members),
        cmocka_unit_test(test_member_entry),
        cmocka_unit_test(test_record_pool_field),
        cmocka_unit_test(test_claim_ids),
    };
    return cmocka_run_group_tests_name("coord_pool", tests, s_group_setup, s_group_teardown);
}
