/* test_coord_coordinators.c — several coordinators in one deployment and the host
 * names (issue 9 §1, §3; docs/OPERATIONS.md "Several coordinators", "Hosts"): the
 * "coordinators" list beside the "coordinator" shorthand, advertised endpoints of
 * coordinators and tiers, "host" fields, and every rule's error naming its key. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "bus_host.h"
#include "config_testkit.h"
#include "coord_config.h"

static char g_err[1024];
static coord_config_t g_cfg;

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

#define C_A "{\"name\":\"a\",\"endpoint\":\"tcp://127.0.0.1:7801\"}"
#define C_B "{\"name\":\"b\",\"endpoint\":\"tcp://127.0.0.1:7802\"}"

/* Without a list, "coordinator" is the one entry, named "coordinator". */
static void test_shorthand_is_one_entry(void **state)
{
    (void)state;
    assert_int_equal(s_load("{\"coordinator\":{\"endpoint\":\"tcp://127.0.0.1:7800\"}}"), 0);
    assert_false(g_cfg.coordinators_listed);
    assert_int_equal(g_cfg.n_coordinators, 1);
    assert_string_equal(g_cfg.coordinators[0].name, "coordinator");
    assert_string_equal(g_cfg.coordinators[0].endpoint, "tcp://127.0.0.1:7800");
    assert_string_equal(g_cfg.coordinators[0].advertise, "tcp://127.0.0.1:7800");
    assert_string_equal(g_cfg.coordinators[0].host, "");
    assert_string_equal(g_cfg.endpoint, "tcp://127.0.0.1:7800");
    assert_string_equal(g_cfg.first_host, "");
    /* the shorthand takes an advertise and a host too */
    assert_int_equal(s_load("{\"coordinator\":{\"endpoint\":\"tcp://*:7800\","
                            "\"advertise\":\"tcp://10.0.0.5:7800\",\"host\":\"gpu1\"}}"),
                     0);
    assert_string_equal(g_cfg.coordinators[0].advertise, "tcp://10.0.0.5:7800");
    assert_string_equal(g_cfg.first_host, "gpu1");
}

/* The list: entries as given, shared settings from "coordinator", metrics default
 * coordinator.metrics, advertise default the endpoint. */
static void test_list_is_read(void **state)
{
    (void)state;
    assert_int_equal(s_load("{\"coordinator\":{\"max_batch\":128,\"metrics\":\"127.0.0.1:0\"},"
                            "\"coordinators\":[" C_A
                            ",{\"name\":\"b\",\"endpoint\":\"tcp://0.0.0.0:7802\","
                            "\"advertise\":\"tcp://"
                            "10.1.2.3:7802\",\"host\":\"h2\",\"metrics\":\"127.0.0.1:9100\"}]}"),
                     0);
    assert_true(g_cfg.coordinators_listed);
    assert_int_equal(g_cfg.n_coordinators, 2);
    assert_int_equal(g_cfg.max_batch, 128);
    const coord_coordinator_config_t *a = coord_config_coordinator(&g_cfg, "a");
    const coord_coordinator_config_t *b = coord_config_coordinator(&g_cfg, "b");
    assert_non_null(a);
    assert_non_null(b);
    assert_null(coord_config_coordinator(&g_cfg, "c"));
    assert_string_equal(a->advertise, "tcp://127.0.0.1:7801");
    assert_string_equal(a->metrics, "127.0.0.1:0");
    assert_string_equal(a->host, "");
    assert_string_equal(b->endpoint, "tcp://0.0.0.0:7802");
    assert_string_equal(b->advertise, "tcp://10.1.2.3:7802");
    assert_string_equal(b->host, "h2");
    assert_string_equal(b->metrics, "127.0.0.1:9100");
    /* one-coordinator callers get the first one's advertised endpoint */
    assert_string_equal(g_cfg.endpoint, "tcp://127.0.0.1:7801");
    /* a process without a host runs on the first host named */
    assert_string_equal(g_cfg.first_host, "h2");
    assert_string_equal(g_cfg.etcd_host, "h2");
    assert_string_equal(g_cfg.optimizer_host, "h2");
}

static void test_list_rules(void **state)
{
    (void)state;
    s_reject("{\"coordinators\":[" C_A ",{\"name\":\"a\",\"endpoint\":\"tcp://127.0.0.1:7803\"}]}",
             "coordinators[1].name", "duplicate coordinator name \"a\" (also coordinators[0])");
    s_reject("{\"coordinators\":[" C_A ",{\"name\":\"b\",\"endpoint\":\"tcp://127.0.0.1:7801\"}]}",
             "coordinators[1].endpoint", "is also coordinators[0]'s (a) on the same host");
    s_reject("{\"coordinators\":[" C_A ",{\"name\":\"b\",\"endpoint\":\"tcp://127.0.0.1:7809\","
             "\"advertise\":\"tcp://127.0.0.1:7801\"}]}",
             "coordinators[1].advertise", "also coordinators[0]'s (a): clients could not tell");
    s_reject("{\"coordinators\":[{\"name\":\"a\",\"endpoint\":\"tcp://127.0.0.1:99999\"}]}",
             "coordinators[0].endpoint", "port");
    s_reject("{\"coordinators\":[{\"name\":\"a\",\"endpoint\":\"tcp://127.0.0.1:7801\","
             "\"advertise\":\"tcp://*:7801\"}]}",
             "coordinators[0].advertise", "wildcard");
    s_reject("{\"coordinators\":[{\"name\":\"a\",\"endpoint\":\"tcp://127.0.0.1:7801\","
             "\"advertise\":\"tcp://0.0.0.0:7801\"}]}",
             "coordinators[0].advertise", "wildcard");
    s_reject("{\"coordinators\":[{\"name\":\"a\",\"endpoint\":\"tcp://0.0.0.0:7801\"}]}",
             "coordinators[0].endpoint", "binds every interface: set \"advertise\"");
    s_reject("{\"coordinators\":[{\"name\":\"a\",\"endpoint\":\"tcp://127.0.0.1:*\","
             "\"advertise\":\"tcp://127.0.0.1:7801\"}]}",
             "coordinators[0].advertise", "lets the kernel pick the port");
    s_reject("{\"coordinators\":[{\"name\":\"a b\",\"endpoint\":\"tcp://127.0.0.1:7801\"}]}",
             "coordinators[0].name", "a name is 1..");
    s_reject("{\"coordinators\":[{\"name\":\"a\",\"endpoint\":\"tcp://127.0.0.1:7801\","
             "\"host\":\"-h\"}]}",
             "coordinators[0].host", "a host name is 1..46");
    s_reject("{\"coordinators\":[{\"name\":\"a\",\"endpoint\":\"tcp://127.0.0.1:7801\","
             "\"port\":1}]}",
             "coordinators[0].port", "");
    s_reject(
        "{\"coordinator\":{\"metrics\":\"127.0.0.1:9100\"},\"coordinators\":[" C_A "," C_B "]}",
        "coordinators[1].metrics", "127.0.0.1:9100 is also coordinators[0]'s (a) on the same host");
    s_reject("{\"coordinators\":[]}", "coordinators", "empty: list at least one coordinator");
    s_reject("{\"coordinator\":{\"endpoint\":\"tcp://127.0.0.1:7800\"},\"coordinators\":[" C_A "]}",
             "coordinator.endpoint", "set per coordinator in \"coordinators\"");
    s_reject("{\"events\":{\"endpoint\":\"tcp://127.0.0.1:7802\"},\"coordinators\":[" C_A "," C_B
             "]}",
             "coordinators[1].endpoint",
             "tcp://127.0.0.1:7802 is also events.endpoint, which the leader binds");
    s_reject(
        "{\"coordinator\":{\"endpoint\":\"tcp://127.0.0.1:7802\"},\"events\":{\"replay_endpoint\":"
        "\"tcp://127.0.0.1:7802\"}}",
        "coordinator.endpoint", "is also events.replay_endpoint");
    /* at most COORD_MAX_COORDINATORS (8) */
    char text[2048];
    size_t off = (size_t)snprintf(text, sizeof text, "{\"coordinators\":[");
    for (int i = 0; i <= COORD_MAX_COORDINATORS; i++)
        off += (size_t)snprintf(text + off, sizeof text - off,
                                "%s{\"name\":\"c%d\",\"endpoint\":\"tcp://127.0.0.1:%d\"}",
                                i ? "," : "", i, 7900 + i);
    snprintf(text + off, sizeof text - off, "]}");
    s_reject(text, "coordinators", "9 entries: a deployment has at most 8 coordinators");
    /* the same bind endpoint on two named hosts is fine; its advertise differs */
    assert_int_equal(
        s_load("{\"coordinators\":[{\"name\":\"a\",\"endpoint\":\"tcp://0.0.0.0:7801\","
               "\"advertise\":\"tcp://10.0.0.1:7801\",\"host\":\"h1\"},{\"name\":\"b\","
               "\"endpoint\":\"tcp://0.0.0.0:7801\",\"advertise\":\"tcp://10.0.0.2:7801\","
               "\"host\":\"h2\"}]}"),
        0);
}

/* A tier's advertise and host; its endpoint must not be a coordinator's. */
static void test_tier_advertise_and_host(void **state)
{
    (void)state;
    assert_int_equal(s_load("{\"tiers\":[{\"name\":\"t\",\"kind\":\"host\",\"capacity\":8,"
                            "\"endpoint\":\"tcp://0.0.0.0:7810\",\"advertise\":"
                            "\"tcp://10.0.0.7:7810\",\"host\":\"h7\"}]}"),
                     0);
    assert_string_equal(g_cfg.tiers[0].advertise, "tcp://10.0.0.7:7810");
    assert_string_equal(g_cfg.tiers[0].host, "h7");
    assert_string_equal(g_cfg.first_host, "h7");
    assert_int_equal(s_load("{\"tiers\":[{\"name\":\"t\",\"kind\":\"host\",\"capacity\":8,"
                            "\"endpoint\":\"tcp://127.0.0.1:7810\"}]}"),
                     0);
    assert_string_equal(g_cfg.tiers[0].advertise, ""); /* the bound endpoint */
    s_reject("{\"tiers\":[{\"name\":\"t\",\"kind\":\"host\",\"capacity\":8,"
             "\"endpoint\":\"tcp://*:7810\"}]}",
             "tiers[0].endpoint", "binds every interface");
    s_reject("{\"tiers\":[{\"name\":\"t\",\"kind\":\"host\",\"capacity\":8,"
             "\"endpoint\":\"tcp://127.0.0.1:7810\",\"advertise\":\"tcp://*:7810\"}]}",
             "tiers[0].advertise", "wildcard");
    s_reject("{\"tiers\":[{\"name\":\"t\",\"kind\":\"host\",\"capacity\":8,"
             "\"endpoint\":\"tcp://127.0.0.1:7810\",\"host\":\"h/1\"}]}",
             "tiers[0].host", "a host name is");
    s_reject("{\"coordinators\":[" C_A "],\"tiers\":[{\"name\":\"t\",\"kind\":\"host\","
             "\"capacity\":8,\"endpoint\":\"tcp://127.0.0.1:7801\"}]}",
             "tiers[0].endpoint", "is also coordinators[0]'s (a)");
    /* etcd.host and optimizer.host are host names too */
    s_reject("{\"etcd\":{\"host\":\"x y\"}}", "etcd.host", "a host name is");
    assert_int_equal(s_load("{\"coordinators\":[" C_A "," C_B "],\"etcd\":{\"host\":\"e1\"},"
                            "\"optimizer\":{\"host\":\"o1\"}}"),
                     0);
    assert_string_equal(g_cfg.etcd_host, "e1");
    assert_string_equal(g_cfg.optimizer_host, "o1");
}

/* deploy/examples/two-coordinators.json parses: two coordinators on one host. */
static void test_example_file(void **state)
{
    (void)state;
    char path[1024];
    const char *me = __FILE__, *cut = strstr(me, "tests/unit/coordinator/");
    assert_non_null(cut);
    snprintf(path, sizeof path, "%.*sdeploy/examples/two-coordinators.json", (int)(cut - me), me);
    int rc = coord_config_load_file(path, &g_cfg, g_err, sizeof g_err);
    if (rc)
        print_message("%s\n", g_err);
    assert_int_equal(rc, 0);
    assert_true(g_cfg.coordinators_listed);
    assert_int_equal(g_cfg.n_coordinators, 2);
    assert_string_equal(g_cfg.coordinators[1].advertise, "tcp://127.0.0.1:7705");
}

/* The identity a tier registers: "<name>/<16 hex>"; the name tells hosts apart. */
static void test_host_identity(void **state)
{
    (void)state;
    char a[BUS_HOST_ID_MAX], b[BUS_HOST_ID_MAX], d[BUS_HOST_NAME_MAX];
    assert_int_equal(bus_host_identity("alpha", a, sizeof a), 0);
    assert_int_equal(bus_host_identity("beta", b, sizeof b), 0);
    assert_int_equal(strncmp(a, "alpha/", 6), 0);
    assert_int_equal(strlen(a), 6 + 16);
    assert_string_equal(a + 6, b + 5); /* one machine: the same boot part */
    assert_string_not_equal(a, b);
    char longest[BUS_HOST_NAME_MAX];
    memset(longest, 'h', sizeof longest - 1);
    longest[sizeof longest - 1] = '\0';
    assert_int_equal(bus_host_identity(longest, a, sizeof a), 0); /* 46 + 1 + 16 fit */
    assert_true(strlen(a) < BUS_HOST_ID_MAX);
    assert_int_equal(bus_host_identity("a b", a, sizeof a), -EINVAL);
    assert_string_equal(a, "");
    assert_false(bus_host_name_ok("x/y"));
    assert_false(bus_host_name_ok(""));
    assert_true(bus_host_name_ok("node-1.rack2"));
    /* the default: the machine's name up to its first '.' */
    assert_int_equal(bus_host_default_name(d, sizeof d), 0);
    assert_true(bus_host_name_ok(d));
    assert_null(strchr(d, '.'));
    assert_int_equal(bus_host_identity(NULL, a, sizeof a), 0);
    assert_int_equal(strncmp(a, d, strlen(d)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shorthand_is_one_entry),
        cmocka_unit_test(test_list_is_read),
        cmocka_unit_test(test_list_rules),
        cmocka_unit_test(test_tier_advertise_and_host),
        cmocka_unit_test(test_example_file),
        cmocka_unit_test(test_host_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
