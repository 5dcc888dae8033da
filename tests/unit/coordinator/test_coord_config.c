/* test_coord_config.c — the deployment file (DESIGN.md §10: "a bad file is
 * rejected at start with the path of the offending key"; wave-2 layout and
 * defaults; tier ids are 1 + index). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>

#include <cmocka.h>

#include "config_testkit.h"
#include "coord_config.h"

static char g_err[1024];
static coord_config_t g_cfg;

/* The repository root, from this file's path (CMake compiles absolute paths). */
static void s_repo_path(const char *rel, char *out, size_t len)
{
    const char *me = __FILE__;
    const char *cut = strstr(me, "tests/unit/coordinator/");
    assert_non_null(cut);
    snprintf(out, len, "%.*s%s", (int)(cut - me), me, rel);
}

/* Loads TEXT and expects a rejection whose message names PATH and says WHAT. */
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

static int s_load(const char *text)
{
    int rc = coord_config_load_string("t.json", ckit_full(text), &g_cfg, g_err, sizeof g_err);
    if (rc != 0)
        print_message("rejected: %s\n", g_err);
    return rc;
}

/* wave-2: deploy/default.json is the default deployment and parses. */
static void test_default_file_parses(void **state)
{
    (void)state;
    char path[1024];
    s_repo_path("deploy/default.json", path, sizeof path);
    int rc = coord_config_load_file(path, &g_cfg, g_err, sizeof g_err);
    if (rc)
        print_message("%s\n", g_err);
    assert_int_equal(rc, 0);
    assert_string_equal(g_cfg.cluster, "kvtier");
    assert_int_equal(g_cfg.n_etcd, 0); /* the supervisor starts the embedded etcd */
    assert_string_equal(g_cfg.endpoint, "tcp://127.0.0.1:7700");
    assert_int_equal(g_cfg.n_tiers, 2);
    const coord_tier_config_t *t = coord_config_tier(&g_cfg, "host0");
    assert_non_null(t);
    assert_int_equal(t->id, 1);
    assert_string_equal(t->kind_name, "host");
    assert_string_equal(t->endpoint, "tcp://127.0.0.1:7710");
    assert_int_equal(t->capacity, 2048);
    assert_int_equal(t->slot_size, 256 * 1024);
    assert_string_equal(t->backend.path, "/kvtier-kvtier-host0");
    /* issue 4: the default chain goes on to an nvme tier */
    t = coord_config_tier(&g_cfg, "nvme0");
    assert_non_null(t);
    assert_int_equal(t->id, 2);
    assert_string_equal(t->kind_name, "nvme");
    assert_int_equal(t->capacity, 16384);
    assert_int_equal(t->slot_size, 64 * 1024);
    assert_string_equal(t->backend.path, "run/nvme0.dat");
    assert_int_equal(g_cfg.n_chains, 1);
    assert_int_equal(g_cfg.chains[0].n_tiers, 2);
    assert_int_equal(g_cfg.chains[0].tier_ids[0], 1);
    assert_int_equal(g_cfg.chains[0].tier_ids[1], 2);
    assert_int_equal(coord_config_lease_ttl_s(&g_cfg), 3);
    /* issue 10: the metrics addresses of the default deployment (README) */
    assert_string_equal(g_cfg.metrics, "127.0.0.1:7790");
    assert_string_equal(coord_config_tier(&g_cfg, "host0")->metrics, "127.0.0.1:7791");
    assert_string_equal(coord_config_tier(&g_cfg, "nvme0")->metrics, "127.0.0.1:7792");
    assert_int_equal(g_cfg.metrics_sample_ms, 5000);
}

/* DESIGN §10: defaults are embedded — the embedded document is the default
 * deployment, and what a file leaves out (besides cluster and tiers) is taken from it. */
static void test_empty_file_is_the_embedded_default(void **state)
{
    (void)state;
    assert_int_equal(coord_config_load_string("<defaults>", coord_config_defaults(), &g_cfg, g_err,
                                              sizeof g_err),
                     0);
    assert_string_equal(g_cfg.cluster, "kvtier");
    assert_int_equal(s_load("{}"), 0);
    assert_int_equal(g_cfg.lease_ttl_ms, 3000);
    assert_int_equal(g_cfg.pin_lease_ms, 30000);
    assert_int_equal(g_cfg.write_grace_ms, 30000);
    assert_int_equal(g_cfg.max_batch, 65536);
    assert_int_equal(g_cfg.max_instances, 64);
    assert_int_equal(g_cfg.tier_timeout_ms, 2000);
    assert_int_equal(g_cfg.n_tiers, 1);
    assert_string_equal(g_cfg.tiers[0].name, "host0");
    assert_string_equal(g_cfg.tiers[0].policy, "lru");
    assert_string_equal(tier_config_get(&g_cfg.tiers[0].backend, "prefault"), "true");
    assert_string_equal(g_cfg.chains[0].name, "default");
    /* A partial section keeps the other defaults. */
    assert_int_equal(s_load("{\"coordinator\":{\"max_batch\":128},\"cluster\":\"c2\"}"), 0);
    assert_int_equal(g_cfg.max_batch, 128);
    assert_int_equal(g_cfg.pin_lease_ms, 30000);
    assert_string_equal(g_cfg.tiers[0].backend.path, "/kvtier-c2-host0");
}

/* wave-2: tier ids are 1 + the index in "tiers"; absent chains = one over all. */
static void test_tier_ids_follow_file_order_and_default_chain_covers_all(void **state)
{
    (void)state;
    assert_int_equal(
        s_load("{\"tiers\":["
               "{\"name\":\"h\",\"kind\":\"host\",\"endpoint\":\"tcp://127.0.0.1:*\","
               "\"capacity\":8,\"slot_size\":4096,\"policy\":\"clock\",\"prefault\":false},"
               "{\"name\":\"n\",\"kind\":\"nvme\",\"endpoint\":\"ipc:///tmp/x.sock\","
               "\"capacity\":16,\"slot_size\":\"1MiB\",\"path\":\"/tmp/n.dat\","
               "\"queue_depth\":32}]}"),
        0);
    assert_int_equal(g_cfg.n_tiers, 2);
    assert_int_equal(coord_config_tier(&g_cfg, "h")->id, 1);
    assert_int_equal(coord_config_tier(&g_cfg, "n")->id, 2);
    assert_ptr_equal(coord_config_tier_by_id(&g_cfg, 2), coord_config_tier(&g_cfg, "n"));
    assert_null(coord_config_tier_by_id(&g_cfg, 0));
    assert_null(coord_config_tier_by_id(&g_cfg, 3));
    assert_null(coord_config_tier(&g_cfg, "x"));
    const coord_tier_config_t *n = coord_config_tier(&g_cfg, "n");
    assert_string_equal(n->kind_name, "nvme");
    assert_string_equal(n->backend.path, "/tmp/n.dat");
    assert_string_equal(tier_config_get(&n->backend, "queue_depth"), "32");
    assert_int_equal(n->slot_size, 1u << 20);
    assert_string_equal(tier_config_get(&coord_config_tier(&g_cfg, "h")->backend, "prefault"),
                        "false");
    assert_int_equal(g_cfg.n_chains, 1);
    assert_int_equal(g_cfg.chains[0].n_tiers, 2);
    assert_int_equal(g_cfg.chains[0].tier_ids[0], 1);
    assert_int_equal(g_cfg.chains[0].tier_ids[1], 2);
}

/* DESIGN §10: each bad file is rejected naming the key path. */
static void test_duplicate_tier_name_is_rejected_with_path(void **state)
{
    (void)state;
    s_reject("{\"tiers\":[{\"name\":\"a\",\"kind\":\"host\",\"endpoint\":\"tcp://127.0.0.1:1\","
             "\"capacity\":1},{\"name\":\"a\",\"kind\":\"host\",\"endpoint\":"
             "\"tcp://127.0.0.1:2\",\"capacity\":1,\"shm\":\"/other\"}]}",
             "tiers[1].name", "duplicate tier name \"a\"");
}

static void test_unknown_kind_is_rejected_with_path(void **state)
{
    (void)state;
    s_reject("{\"tiers\":[{\"name\":\"a\",\"kind\":\"ssd\",\"endpoint\":\"tcp://127.0.0.1:1\","
             "\"capacity\":1}]}",
             "tiers[0].kind", "ssd");
}

static void test_chain_naming_a_missing_tier_is_rejected_with_path(void **state)
{
    (void)state;
    s_reject("{\"chains\":[{\"name\":\"c\",\"tiers\":[\"host0\",\"nvme9\"]}]}",
             "chains[0].tiers[1]", "no tier named \"nvme9\"");
    s_reject("{\"chains\":[{\"name\":\"c\",\"tiers\":[\"host0\",\"host0\"]}]}",
             "chains[0].tiers[1]", "twice");
    s_reject("{\"chains\":[{\"name\":\"c\",\"tiers\":[]}]}", "chains[0].tiers",
             "at least one tier");
    s_reject("{\"chains\":[{\"name\":\"c\",\"tiers\":[\"host0\"]},{\"name\":\"c\",\"tiers\":"
             "[\"host0\"]}]}",
             "chains[1].name", "duplicate chain name");
}

static void test_bad_endpoint_is_rejected_with_path(void **state)
{
    (void)state;
    s_reject("{\"tiers\":[{\"name\":\"a\",\"kind\":\"host\",\"endpoint\":"
             "\"tcp://127.0.0.1:99999\",\"capacity\":1}]}",
             "tiers[0].endpoint", "port");
    s_reject("{\"coordinator\":{\"endpoint\":\"http://x\"}}", "coordinator.endpoint", "http://x");
    s_reject("{\"tiers\":[{\"name\":\"a\",\"kind\":\"host\",\"endpoint\":"
             "\"tcp://127.0.0.1:7700\",\"capacity\":1}]}",
             "tiers[0].endpoint", "coordinator");
    s_reject("{\"tiers\":[{\"name\":\"a\",\"kind\":\"host\",\"endpoint\":\"tcp://127.0.0.1:1\","
             "\"capacity\":1},{\"name\":\"b\",\"kind\":\"host\",\"endpoint\":"
             "\"tcp://127.0.0.1:1\",\"capacity\":1}]}",
             "tiers[1].endpoint", "also tiers[0]");
    s_reject("{\"etcd\":{\"endpoints\":[\"127.0.0.1:2379\"]}}", "etcd.endpoints[0]", "http://");
}

static void test_zero_capacity_is_rejected_with_path(void **state)
{
    (void)state;
    s_reject("{\"tiers\":[{\"name\":\"a\",\"kind\":\"host\",\"endpoint\":\"tcp://127.0.0.1:1\","
             "\"capacity\":0}]}",
             "tiers[0].capacity", "0 out of range");
    s_reject("{\"tiers\":[{\"name\":\"a\",\"kind\":\"host\",\"endpoint\":\"tcp://127.0.0.1:1\","
             "\"capacity\":4,\"slot_size\":0}]}",
             "tiers[0].slot_size", "1 byte");
    s_reject("{\"tiers\":[]}", "tiers", "at least one tier");
    s_reject("{\"coordinator\":{\"max_batch\":0}}", "coordinator.max_batch", "out of range");
    s_reject("{\"coordinator\":{\"max_batch\":65537}}", "coordinator.max_batch", "out of range");
}

static void test_unknown_key_is_rejected_with_path(void **state)
{
    (void)state;
    s_reject("{\"tiers\":[{\"name\":\"a\",\"kind\":\"host\",\"endpoint\":\"tcp://127.0.0.1:1\","
             "\"capacty\":1}]}",
             "tiers[0].capacty", "unknown key");
    s_reject("{\"bogus\":1}", "bogus", "unknown key");
    s_reject("{\"coordinator\":{\"pin_leas\":\"1s\"}}", "coordinator.pin_leas", "unknown key");
    /* Keys of the other kind are unknown for this one. */
    s_reject("{\"tiers\":[{\"name\":\"a\",\"kind\":\"host\",\"endpoint\":\"tcp://127.0.0.1:1\","
             "\"capacity\":1,\"path\":\"/x\"}]}",
             "tiers[0].path", "unknown key");
    s_reject("{\"chains\":[{\"name\":\"c\",\"tiers\":[\"host0\"],\"x\":1}]}", "chains[0].x",
             "unknown key");
}

static void test_other_bad_values_are_rejected_with_path(void **state)
{
    (void)state;
    s_reject("{\"tiers\":[{\"name\":\"a\",\"kind\":\"host\",\"endpoint\":\"tcp://127.0.0.1:1\","
             "\"capacity\":1,\"policy\":\"mru\"}]}",
             "tiers[0].policy", "unknown policy \"mru\"");
    s_reject("{\"tiers\":[{\"name\":\"a\",\"kind\":\"nvme\",\"endpoint\":\"tcp://127.0.0.1:1\","
             "\"capacity\":1}]}",
             "tiers[0].path", "missing");
    s_reject("{\"tiers\":[{\"name\":\"a/b\",\"kind\":\"host\",\"endpoint\":"
             "\"tcp://127.0.0.1:1\",\"capacity\":1}]}",
             "tiers[0].name", "a name is");
    s_reject("{\"tiers\":[{\"name\":\"a\",\"kind\":\"host\",\"endpoint\":\"tcp://127.0.0.1:1\","
             "\"capacity\":1,\"shm\":\"noslash\"}]}",
             "tiers[0].shm", "shared-memory name");
    s_reject("{\"tiers\":[{\"name\":\"a\",\"kind\":\"host\",\"endpoint\":\"tcp://127.0.0.1:1\","
             "\"capacity\":2147483649}]}",
             "tiers[0].capacity", "out of range");
    /* a same-host segment's name must fit TierInfo.shm (63 bytes) */
    s_reject("{\"tiers\":[{\"name\":\"a\",\"kind\":\"host\",\"endpoint\":\"tcp://127.0.0.1:1\","
             "\"capacity\":1,\"shm\":\"/"
             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}]}",
             "tiers[0].shm", "longer than 63 bytes");
    s_reject("{\"cluster\":\"cccccccccccccccccccccccccccccccccccccccccccccccccccccc\","
             "\"tiers\":[{\"name\":\"host0\",\"kind\":\"host\",\"endpoint\":\"tcp://127.0.0.1:1\","
             "\"capacity\":1}]}",
             "tiers[0].shm", "set \"shm\"");
    /* backend options are the backend's to check, under their key path */
    s_reject("{\"tiers\":[{\"name\":\"a\",\"kind\":\"nvme\",\"endpoint\":\"tcp://127.0.0.1:1\","
             "\"capacity\":1,\"path\":\"/tmp/x.dat\",\"sync\":\"maybe\"}]}",
             "tiers[0].sync", "\"maybe\" is not one of");
    s_reject("{\"tiers\":[{\"name\":\"a\",\"kind\":\"nvme\",\"endpoint\":\"tcp://127.0.0.1:1\","
             "\"capacity\":1,\"path\":\"/tmp/x.dat\",\"queue_depth\":5000}]}",
             "tiers[0].queue_depth", "0..1024");
    s_reject("{\"tiers\":[{\"name\":\"a\",\"kind\":\"host\",\"endpoint\":\"tcp://127.0.0.1:1\","
             "\"capacity\":1,\"prefault\":\"often\"}]}",
             "tiers[0].prefault", "true or false");
    s_reject("{\"tiers\":[{\"name\":\"a\",\"kind\":\"host\",\"plugin\":\"/nonexistent.so\","
             "\"endpoint\":\"tcp://127.0.0.1:1\",\"capacity\":1}]}",
             "tiers[0].plugin", "file not found");
    s_reject("{\"etcd\":{\"lease_ttl\":\"500ms\"}}", "etcd.lease_ttl", "at least 1000ms");
    s_reject("{\"coordinator\":{\"request_idle\":\"soon\"}}", "coordinator.request_idle",
             "duration");
    assert_int_equal(s_load("{\"coordinator\":{\"request_idle\":\"2m\"}}"), 0);
    assert_int_equal(g_cfg.request_idle_ms, 120000);
    s_reject("{\"cluster\":\"\"}", "cluster", "a name is");
    s_reject("{\"cluster\":7}", "cluster", "string");
    s_reject("{\"etcd\":[]}", "etcd", "object");
    assert_int_equal(coord_config_load_string("t.json", "{", &g_cfg, g_err, sizeof g_err), -EINVAL);
    assert_non_null(strstr(g_err, "t.json"));
    assert_int_equal(coord_config_load_file("/nonexistent/x.json", &g_cfg, g_err, sizeof g_err),
                     -EINVAL);
    assert_non_null(strstr(g_err, "/nonexistent/x.json"));
}

/* wave-2: --etcd overrides the file's endpoints; a bad URL is named. */
/* Issue 12 §8: a file must name its cluster and its tiers; a missing one is an error
 * naming that section (not a silent default, nor an error about the chain that then
 * names a tier the defaults lack). */
static void test_missing_required_section_is_named(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"{}", "t.json: cluster: the required section is missing"},
        {"{\"tiers\": [{\"name\": \"h\", \"kind\": \"host\"}]}",
         "t.json: cluster: the required section is missing"},
        {"{\"cluster\": \"a\"}", "t.json: tiers: the required section is missing"},
        {"{\"cluster\": \"a\", \"chains\": [{\"name\": \"c\", \"tiers\": [\"host0\", "
         "\"nvme0\"]}]}",
         "t.json: tiers: the required section is missing"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(
            coord_config_load_string("t.json", cases[i][0], &g_cfg, g_err, sizeof g_err), -EINVAL);
        if (strncmp(g_err, cases[i][1], strlen(cases[i][1])) != 0)
            print_message("%s: got \"%s\"\n", cases[i][0], g_err);
        assert_int_equal(strncmp(g_err, cases[i][1], strlen(cases[i][1])), 0);
    }
}

/* Issue 12 §3: the client bounds of the coordinator section. */
static void test_client_bounds(void **state)
{
    (void)state;
    assert_int_equal(s_load("{}"), 0);
    assert_int_equal(g_cfg.max_clients, 0); /* the scheduler's defaults */
    assert_int_equal(s_load("{\"coordinator\":{\"max_clients\":8,\"max_requests\":100,"
                            "\"max_requests_per_client\":10,\"client_idle\":\"5s\"}}"),
                     0);
    assert_int_equal(g_cfg.max_clients, 8);
    assert_int_equal(g_cfg.max_requests_per_client, 10);
    assert_int_equal(g_cfg.client_idle_ms, 5000);
    s_reject("{\"coordinator\":{\"max_requests\":10,\"max_requests_per_client\":11}}",
             "coordinator.max_requests_per_client", "more than max_requests");
    s_reject("{\"coordinator\":{\"max_clients\":0}}", "coordinator.max_clients", "");
    s_reject("{\"coordinator\":{\"max_clients\":70000}}", "coordinator.max_clients", "");
}

/* Issue 12 §4: a lease must outlast twice the tier actors' clock skew, or a late
 * writer's token would still be accepted after its window lapsed. */
static void test_leases_outlast_twice_the_clock_skew(void **state)
{
    (void)state;
    s_reject("{\"coordinator\":{\"write_grace\":\"10s\"}}", "coordinator.write_grace",
             "more than twice security.clock_skew (5000 ms)");
    s_reject("{\"coordinator\":{\"pin_lease\":\"3s\"},\"security\":{\"clock_skew\":\"2s\"}}",
             "coordinator.pin_lease", "more than twice security.clock_skew (2000 ms)");
    assert_int_equal(s_load("{\"coordinator\":{\"write_grace\":\"3s\",\"pin_lease\":\"3s\"},"
                            "\"security\":{\"clock_skew\":\"1s\"}}"),
                     0);
}

static void test_etcd_flag_overrides_endpoints(void **state)
{
    (void)state;
    assert_int_equal(s_load("{\"etcd\":{\"endpoints\":[\"http://a:1\"]}}"), 0);
    assert_int_equal(g_cfg.n_etcd, 1);
    assert_int_equal(
        coord_config_set_etcd(&g_cfg, "http://127.0.0.1:2379,,https://b:2", g_err, sizeof g_err),
        0);
    assert_int_equal(g_cfg.n_etcd, 2);
    assert_string_equal(g_cfg.etcd[0], "http://127.0.0.1:2379");
    assert_string_equal(g_cfg.etcd[1], "https://b:2");
    assert_int_equal(coord_config_set_etcd(&g_cfg, "ftp://x", g_err, sizeof g_err), -EINVAL);
    assert_non_null(strstr(g_err, "ftp://x"));
    assert_int_equal(coord_config_set_etcd(&g_cfg, ",", g_err, sizeof g_err), -EINVAL);
    assert_int_equal(g_cfg.n_etcd, 2); /* unchanged by a failed override */
}

static void test_cluster_keys_are_under_the_cluster_prefix(void **state)
{
    (void)state;
    char k[64];
    assert_int_equal(coord_cluster_key(k, sizeof k, "c1", "leader"), 0);
    assert_string_equal(k, "/kvtier/c1/leader");
    assert_int_equal(coord_cluster_key(k, sizeof k, "c1", ""), 0);
    assert_string_equal(k, "/kvtier/c1/");
    assert_int_equal(coord_cluster_key(k, 10, "c1", "leader"), -ENAMETOOLONG);
    assert_string_equal(k, "");
}

/* Issue 10 §2: metrics addresses are IPV4:PORT (port 0 allowed: the kernel
 * picks), loopback by default; a bad one, or a bad metrics bound, is refused at
 * start naming its key path. */
static void test_metrics_keys(void **state)
{
    (void)state;
    assert_int_equal(s_load("{}"), 0);
    assert_string_equal(g_cfg.metrics, "127.0.0.1:0");
    assert_string_equal(g_cfg.tiers[0].metrics, "127.0.0.1:0");
    assert_int_equal(g_cfg.metrics_refresh_ms, 1000);
    assert_int_equal(g_cfg.metrics_samples, 360);
    assert_int_equal(g_cfg.metrics_max_connections, 16);
    assert_int_equal(g_cfg.metrics_timeout_s, 5);
    assert_int_equal(g_cfg.metrics_max_instances, 16);
    assert_int_equal(s_load("{\"coordinator\":{\"metrics\":\"\"},"
                            "\"tiers\":[{\"name\":\"h\",\"kind\":\"host\",\"capacity\":4,"
                            "\"endpoint\":\"tcp://127.0.0.1:*\","
                            "\"metrics\":\"*:9100\"}]}"),
                     0);
    assert_string_equal(g_cfg.metrics, "");
    assert_string_equal(g_cfg.tiers[0].metrics, "*:9100");
    s_reject("{\"coordinator\":{\"metrics\":\"127.0.0.1\"}}", "coordinator.metrics",
             "expected HOST:PORT");
    s_reject("{\"coordinator\":{\"metrics\":\"127.0.0.1:99999\"}}", "coordinator.metrics",
             "0..65535");
    s_reject("{\"coordinator\":{\"metrics\":\"tcp://127.0.0.1:1\"}}", "coordinator.metrics",
             "IPv4");
    s_reject("{\"coordinator\":{\"metrics\":7790}}", "coordinator.metrics", "string");
    s_reject("{\"tiers\":[{\"name\":\"h\",\"kind\":\"host\",\"capacity\":4,"
             "\"endpoint\":\"tcp://127.0.0.1:*\",\"metrics\":\"nohost:1\"}]}",
             "tiers[0].metrics", "IPv4");
    s_reject("{\"metrics\":{\"refresh\":\"10ms\"}}", "metrics.refresh", "at least");
    s_reject("{\"metrics\":{\"samples\":0}}", "metrics.samples", "");
    s_reject("{\"metrics\":{\"max_instances\":17}}", "metrics.max_instances", "");
    s_reject("{\"metrics\":{\"bogus\":1}}", "metrics.bogus", "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_file_parses),
        cmocka_unit_test(test_empty_file_is_the_embedded_default),
        cmocka_unit_test(test_missing_required_section_is_named),
        cmocka_unit_test(test_client_bounds),
        cmocka_unit_test(test_leases_outlast_twice_the_clock_skew),
        cmocka_unit_test(test_tier_ids_follow_file_order_and_default_chain_covers_all),
        cmocka_unit_test(test_duplicate_tier_name_is_rejected_with_path),
        cmocka_unit_test(test_unknown_kind_is_rejected_with_path),
        cmocka_unit_test(test_chain_naming_a_missing_tier_is_rejected_with_path),
        cmocka_unit_test(test_bad_endpoint_is_rejected_with_path),
        cmocka_unit_test(test_zero_capacity_is_rejected_with_path),
        cmocka_unit_test(test_unknown_key_is_rejected_with_path),
        cmocka_unit_test(test_other_bad_values_are_rejected_with_path),
        cmocka_unit_test(test_etcd_flag_overrides_endpoints),
        cmocka_unit_test(test_cluster_keys_are_under_the_cluster_prefix),
        cmocka_unit_test(test_metrics_keys),
    };
    return cmocka_run_group_tests_name("coord_config", tests, NULL, NULL);
}
