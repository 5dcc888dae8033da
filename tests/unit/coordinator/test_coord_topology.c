/* test_coord_topology.c — the deployment's "topology" (issue 11 §4, §6;
 * coordinator/coord_topology.h; UCM's StoreAssembler): one nested description
 * of store / chain / branches read into the chains and the router, and every
 * rule it breaks rejected with the key path of the offending entry (bounds out
 * of order, an unknown tier, a missing or second fallback, duplicate names,
 * keys of the wrong type or of another route, nested branches, a tier followed
 * by two different tiers), while the flat "chains" form keeps working.
 * JSON is written with ' for " (s_q) to stay readable. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "coord_config.h"

static char g_err[1024];
static coord_config_t g_cfg;

/* Three tiers (host0, host1, nvme0) and TOPO (the rest of the document, ' for "). */
static const char *s_q(const char *topo)
{
    static char buf[8192];
    snprintf(buf, sizeof buf,
             "{'cluster': 't', 'tiers': ["
             "{'name': 'host0', 'kind': 'host', 'endpoint': 'tcp://127.0.0.1:7710', "
             "'capacity': 64, 'slot_size': 4096},"
             "{'name': 'host1', 'kind': 'host', 'endpoint': 'tcp://127.0.0.1:7712', "
             "'capacity': 64, 'slot_size': 4096},"
             "{'name': 'nvme0', 'kind': 'nvme', 'endpoint': 'tcp://127.0.0.1:7711', "
             "'capacity': 256, 'slot_size': 4096, 'path': '/tmp/kvt-topo-nvme0.dat'}], %s}",
             topo);
    for (char *p = buf; *p; p++)
        if (*p == '\'')
            *p = '"';
    return buf;
}

static int s_load(const char *topo)
{
    int rc = coord_config_load_string("t.json", s_q(topo), &g_cfg, g_err, sizeof g_err);
    if (rc != 0)
        print_message("rejected: %s\n", g_err);
    return rc;
}

/* Loads TOPO and expects a rejection whose message starts with PATH and says WHAT. */
static void s_reject(const char *topo, const char *path, const char *what)
{
    int rc = coord_config_load_string("t.json", s_q(topo), &g_cfg, g_err, sizeof g_err);
    if (rc == 0)
        print_message("accepted: %s\n", topo);
    assert_int_equal(rc, -EINVAL);
    char want[300];
    snprintf(want, sizeof want, "t.json: %s:", path);
    if (strncmp(g_err, want, strlen(want)) != 0 || !strstr(g_err, what))
        print_message("message \"%s\" lacks \"%s\" / \"%s\"\n", g_err, want, what);
    assert_true(strncmp(g_err, want, strlen(want)) == 0);
    assert_non_null(strstr(g_err, what));
}

#define S_TTL3                                                                                     \
    "'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["                               \
    "{'name': 'long', 'type': 'chain', 'tiers': ['host0', 'nvme0'], 'placement': 'inclusive', "    \
    "'ttl_above': '10m'},"                                                                         \
    "{'name': 'mid', 'type': 'store', 'tier': 'host1', 'ttl_above': 60000},"                       \
    "{'name': 'short', 'type': 'chain', 'tiers': ['nvme0'], 'fallback': true}]}"

/* A ttl route of three branches: chains in branch order, bounds, fallback, tiers. */
static void test_ttl_branches_become_chains_and_a_router(void **state)
{
    (void)state;
    assert_int_equal(s_load(S_TTL3), 0);
    assert_true(g_cfg.topology);
    assert_int_equal(g_cfg.route, COORD_ROUTE_TTL);
    assert_int_equal(g_cfg.n_chains, 3);
    assert_int_equal(g_cfg.route_fallback, 2);
    assert_string_equal(g_cfg.chains[0].name, "long");
    assert_int_equal(g_cfg.chains[0].n_tiers, 2);
    assert_int_equal(g_cfg.chains[0].tier_ids[0], 1);
    assert_int_equal(g_cfg.chains[0].tier_ids[1], 3);
    assert_int_equal(g_cfg.chains[0].placement, COORD_PLACEMENT_INCLUSIVE);
    assert_int_equal(g_cfg.chains[0].above, 600000);
    assert_string_equal(g_cfg.chains[1].name, "mid");
    assert_int_equal(g_cfg.chains[1].n_tiers, 1);
    assert_int_equal(g_cfg.chains[1].tier_ids[0], 2);
    assert_int_equal(g_cfg.chains[1].above, 60000);
    assert_int_equal(g_cfg.chains[1].placement, COORD_PLACEMENT_EXCLUSIVE);
    assert_int_equal(g_cfg.chains[2].above, 0);
    assert_int_equal(g_cfg.chains[2].tier_ids[0], 3);
    /* host0 and host1 demote (nvme0 follows host0; host1 has no next) */
    assert_true(coord_tier_has_next(&g_cfg, 1));
    assert_false(coord_tier_has_next(&g_cfg, 2));
    assert_false(coord_tier_has_next(&g_cfg, 3));
}

static void test_length_and_instance_routes(void **state)
{
    (void)state;
    assert_int_equal(s_load("'topology': {'type': 'branches', 'route': 'length', 'branches': ["
                            "{'name': 'small', 'type': 'store', 'tier': 'host1', 'fallback': true},"
                            "{'name': 'big', 'type': 'store', 'tier': 'nvme0', "
                            "'blocks_above': 4096},"
                            "{'name': 'mid', 'type': 'store', 'tier': 'host0', "
                            "'blocks_above': 256}]}"),
                     0);
    assert_int_equal(g_cfg.route, COORD_ROUTE_LENGTH);
    assert_int_equal(g_cfg.route_fallback, 0); /* the fallback may come first */
    assert_int_equal(g_cfg.chains[1].above, 4096);
    assert_int_equal(g_cfg.chains[2].above, 256);

    assert_int_equal(s_load("'topology': {'type': 'branches', 'route': 'instance', 'branches': ["
                            "{'name': 'big', 'type': 'store', 'tier': 'nvme0', "
                            "'instances': ['llama-70b', 'qwen-72b']},"
                            "{'name': 'rest', 'type': 'store', 'tier': 'host0', "
                            "'fallback': true}]}"),
                     0);
    assert_int_equal(g_cfg.route, COORD_ROUTE_INSTANCE);
    assert_int_equal(g_cfg.route_fallback, 1);
    assert_int_equal(g_cfg.n_route_instances, 2);
    assert_string_equal(g_cfg.route_instances[1].instance, "qwen-72b");
    assert_int_equal(g_cfg.route_instances[1].chain, 0);
}

/* A topology of one store or one chain routes nothing; the flat form still works. */
static void test_single_nodes_and_the_flat_form(void **state)
{
    (void)state;
    assert_int_equal(s_load("'topology': {'type': 'store', 'tier': 'host1'}"), 0);
    assert_int_equal(g_cfg.n_chains, 1);
    assert_int_equal(g_cfg.route, COORD_ROUTE_NONE);
    assert_string_equal(g_cfg.chains[0].name, "default");
    assert_int_equal(g_cfg.chains[0].tier_ids[0], 2);
    assert_int_equal(
        s_load("'topology': {'type': 'chain', 'name': 'main', 'tiers': ['host0', 'nvme0']}"), 0);
    assert_string_equal(g_cfg.chains[0].name, "main");
    assert_int_equal(g_cfg.chains[0].n_tiers, 2);
    assert_int_equal(s_load("'chains': [{'name': 'a', 'tiers': ['host0', 'nvme0']}, "
                            "{'name': 'b', 'tiers': ['host1']}]"),
                     0);
    assert_false(g_cfg.topology);
    assert_int_equal(g_cfg.route, COORD_ROUTE_NONE);
    assert_int_equal(g_cfg.n_chains, 2);
}

/* issue 11 §6 "thresholds out of order": equal or increasing bounds, each named. */
static void test_bounds_out_of_order_are_rejected_with_path(void **state)
{
    (void)state;
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
             "{'name': 'a', 'type': 'store', 'tier': 'host0', 'ttl_above': '1m'},"
             "{'name': 'b', 'type': 'store', 'tier': 'host1', 'ttl_above': '30s'},"
             "{'name': 'c', 'type': 'store', 'tier': 'nvme0', 'ttl_above': '30s'},"
             "{'name': 'd', 'type': 'chain', 'tiers': ['host0'], 'fallback': true}]}",
             "topology.branches[2].ttl_above", "30s is not below branches[1]'s 30s");
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
             "{'name': 'a', 'type': 'store', 'tier': 'host0', 'ttl_above': '30s'},"
             "{'name': 'f', 'type': 'store', 'tier': 'nvme0', 'fallback': true},"
             "{'name': 'b', 'type': 'store', 'tier': 'host1', 'ttl_above': '1m'}]}",
             "topology.branches[2].ttl_above", "1m is not below branches[0]'s 30s");
    s_reject("'topology': {'type': 'branches', 'route': 'length', 'branches': ["
             "{'name': 'a', 'type': 'store', 'tier': 'host0', 'blocks_above': 100},"
             "{'name': 'b', 'type': 'store', 'tier': 'host1', 'blocks_above': 1000},"
             "{'name': 'f', 'type': 'store', 'tier': 'nvme0', 'fallback': true}]}",
             "topology.branches[1].blocks_above", "1000 is not below branches[0]'s 100");
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
             "{'name': 'a', 'type': 'store', 'tier': 'host0', 'ttl_above': '400000h'},"
             "{'name': 'f', 'type': 'store', 'tier': 'nvme0', 'fallback': true}]}",
             "topology.branches[0].ttl_above", "a TTL bound is below");
}

static void test_fallback_rules_are_rejected_with_path(void **state)
{
    (void)state;
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
             "{'name': 'a', 'type': 'store', 'tier': 'host0', 'ttl_above': '1m'},"
             "{'name': 'b', 'type': 'store', 'tier': 'host1', 'ttl_above': '1s'}]}",
             "topology.branches", "no fallback branch");
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
             "{'name': 'a', 'type': 'store', 'tier': 'host0', 'fallback': true},"
             "{'name': 'b', 'type': 'store', 'tier': 'host1', 'ttl_above': '1s'},"
             "{'name': 'c', 'type': 'store', 'tier': 'nvme0', 'fallback': true}]}",
             "topology.branches[2].fallback", "a second fallback branch (branches[0] is one)");
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
             "{'name': 'a', 'type': 'store', 'tier': 'host0', 'ttl_above': '1m'},"
             "{'name': 'b', 'type': 'store', 'tier': 'host1', 'ttl_above': '1s', "
             "'fallback': true}]}",
             "topology.branches[1].ttl_above", "the fallback branch takes what no other");
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
             "{'name': 'a', 'type': 'store', 'tier': 'host0'},"
             "{'name': 'b', 'type': 'store', 'tier': 'host1', 'fallback': true}]}",
             "topology.branches[0]", "needs \"ttl_above\" (or \"fallback\": true)");
}

/* An unknown tier, a duplicate branch name, a missing name, another route's key. */
static void test_names_and_tiers_are_rejected_with_path(void **state)
{
    (void)state;
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
             "{'name': 'a', 'type': 'chain', 'tiers': ['host0', 'nvme9'], 'ttl_above': '1m'},"
             "{'name': 'b', 'type': 'store', 'tier': 'host1', 'fallback': true}]}",
             "topology.branches[0].tiers[1]", "no tier named \"nvme9\"");
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
             "{'name': 'a', 'type': 'store', 'tier': 'host0', 'ttl_above': '1m'},"
             "{'name': 'b', 'type': 'store', 'tier': 'ssd0', 'fallback': true}]}",
             "topology.branches[1].tier", "no tier named \"ssd0\"");
    s_reject("'topology': {'type': 'store', 'tier': 'host7'}", "topology.tier",
             "no tier named \"host7\"");
    s_reject("'topology': {'type': 'chain', 'tiers': []}", "topology.tiers", "at least one tier");
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
             "{'name': 'a', 'type': 'store', 'tier': 'host0', 'ttl_above': '1m'},"
             "{'name': 'a', 'type': 'store', 'tier': 'host1', 'fallback': true}]}",
             "topology.branches[1].name", "duplicate branch name \"a\" (also branches[0])");
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
             "{'type': 'store', 'tier': 'host0', 'ttl_above': '1m'},"
             "{'name': 'b', 'type': 'store', 'tier': 'host1', 'fallback': true}]}",
             "topology.branches[0].name", "missing");
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
             "{'name': 'a', 'type': 'store', 'tier': 'host0', 'blocks_above': 10},"
             "{'name': 'b', 'type': 'store', 'tier': 'host1', 'fallback': true}]}",
             "topology.branches[0].blocks_above", "not a condition of a \"ttl\" route");
    s_reject("'topology': {'type': 'branches', 'route': 'instance', 'branches': ["
             "{'name': 'a', 'type': 'store', 'tier': 'host0', 'instances': ['x']},"
             "{'name': 'b', 'type': 'store', 'tier': 'host1', 'instances': ['y', 'x']},"
             "{'name': 'c', 'type': 'store', 'tier': 'nvme0', 'fallback': true}]}",
             "topology.branches[1].instances[1]", "instance \"x\" is routed by branches[0]");
    s_reject("'topology': {'type': 'branches', 'route': 'instance', 'branches': ["
             "{'name': 'a', 'type': 'store', 'tier': 'host0', 'instances': []},"
             "{'name': 'c', 'type': 'store', 'tier': 'nvme0', 'fallback': true}]}",
             "topology.branches[0].instances", "at least one instance");
}

/* Keys of the wrong type, unknown keys and node types, nesting, both forms. */
static void test_bad_keys_are_rejected_with_path(void **state)
{
    (void)state;
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
             "{'name': 'a', 'type': 'store', 'tier': 'host0', 'ttl_above': 'soon'},"
             "{'name': 'b', 'type': 'store', 'tier': 'host1', 'fallback': true}]}",
             "topology.branches[0].ttl_above", "soon");
    s_reject("'topology': {'type': 'branches', 'route': 'length', 'branches': ["
             "{'name': 'a', 'type': 'store', 'tier': 'host0', 'blocks_above': '10'},"
             "{'name': 'b', 'type': 'store', 'tier': 'host1', 'fallback': true}]}",
             "topology.branches[0].blocks_above", "integer");
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
             "{'name': 'a', 'type': 'store', 'tier': 'host0', 'ttl_above': '1m'},"
             "{'name': 'b', 'type': 'store', 'tier': 'host1', 'fallback': 'yes'}]}",
             "topology.branches[1].fallback", "");
    s_reject("'topology': {'type': 'branches', 'route': 'instance', 'branches': ["
             "{'name': 'a', 'type': 'store', 'tier': 'host0', 'instances': 'x'},"
             "{'name': 'b', 'type': 'store', 'tier': 'host1', 'fallback': true}]}",
             "topology.branches[0].instances", "");
    s_reject("'topology': {'type': 'store', 'tier': 7}", "topology.tier", "");
    s_reject("'topology': {'type': 'branches', 'route': 3, 'branches': []}", "topology.route", "");
    s_reject("'topology': {'type': 'branches', 'route': 'random', 'branches': []}",
             "topology.route", "\"ttl\"");
    s_reject("'topology': {'type': 'branches', 'branches': []}", "topology.route", "missing");
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': {}}",
             "topology.branches", "");
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': []}",
             "topology.branches", "at least one branch");
    s_reject("'topology': {'type': 'peer', 'branches': []}", "topology.type", "\"branches\"");
    s_reject("'topology': {'tier': 'host0'}", "topology.type", "missing");
    s_reject("'topology': ['host0']", "topology", "");
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
             "{'name': 'a', 'type': 'store', 'tier': 'host0', 'ttl_abov': '1m'},"
             "{'name': 'b', 'type': 'store', 'tier': 'host1', 'fallback': true}]}",
             "topology.branches[0].ttl_abov", "unknown key");
    s_reject("'topology': {'type': 'store', 'tier': 'host0', 'tiers': ['host1']}", "topology.tiers",
             "unknown key");
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
             "{'name': 'a', 'type': 'branches', 'route': 'ttl', 'branches': [], "
             "'ttl_above': '1m'},"
             "{'name': 'b', 'type': 'store', 'tier': 'host1', 'fallback': true}]}",
             "topology.branches[0].type", "flatten them into one wider \"branches\"");
    s_reject("'topology': {'type': 'store', 'tier': 'host0'}, "
             "'chains': [{'name': 'a', 'tiers': ['host0']}]",
             "topology", "not both");
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
             "{'name': 'a1', 'type': 'store', 'tier': 'host0', 'ttl_above': '9m'},"
             "{'name': 'a2', 'type': 'store', 'tier': 'host0', 'ttl_above': '8m'},"
             "{'name': 'a3', 'type': 'store', 'tier': 'host0', 'ttl_above': '7m'},"
             "{'name': 'a4', 'type': 'store', 'tier': 'host0', 'ttl_above': '6m'},"
             "{'name': 'a5', 'type': 'store', 'tier': 'host0', 'ttl_above': '5m'},"
             "{'name': 'a6', 'type': 'store', 'tier': 'host0', 'ttl_above': '4m'},"
             "{'name': 'a7', 'type': 'store', 'tier': 'host0', 'ttl_above': '3m'},"
             "{'name': 'a8', 'type': 'store', 'tier': 'host0', 'ttl_above': '2m'},"
             "{'name': 'b', 'type': 'store', 'tier': 'host1', 'fallback': true}]}",
             "topology.branches", "");
}

/* Branches may share tiers when what follows them agrees (both end on nvme0);
 * a tier followed by another tier, or by none, elsewhere is rejected, in the
 * flat form too. */
static void test_a_shared_tier_has_one_next_tier(void **state)
{
    (void)state;
    assert_int_equal(s_load("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
                            "{'name': 'a', 'type': 'chain', 'tiers': ['host0', 'nvme0'], "
                            "'ttl_above': '1m'},"
                            "{'name': 'b', 'type': 'chain', 'tiers': ['host1', 'nvme0'], "
                            "'fallback': true}]}"),
                     0);
    s_reject("'topology': {'type': 'branches', 'route': 'ttl', 'branches': ["
             "{'name': 'a', 'type': 'chain', 'tiers': ['host0', 'nvme0'], 'ttl_above': '1m'},"
             "{'name': 'b', 'type': 'store', 'tier': 'host0', 'fallback': true}]}",
             "topology.branches[1].tier",
             "tier \"host0\" is followed by nothing here but by \"nvme0\" at "
             "topology.branches[0].tiers[0]");
    s_reject("'chains': [{'name': 'a', 'tiers': ['host0', 'nvme0']}, "
             "{'name': 'b', 'tiers': ['host0', 'host1']}]",
             "chains[1].tiers[0]", "followed by \"host1\" here but by \"nvme0\" at chains[0]");
}

/* deploy/examples/branches-ttl.json (docs/OPERATIONS.md "Branches") parses: long
 * TTLs on host0 -> nvme0, every other TTL on host1, no TTL on host0 -> nvme0. */
static void test_example_file_parses(void **state)
{
    (void)state;
    const char *me = __FILE__;
    const char *cut = strstr(me, "tests/unit/coordinator/");
    assert_non_null(cut);
    char path[1024];
    snprintf(path, sizeof path, "%.*sdeploy/examples/branches-ttl.json", (int)(cut - me), me);
    int rc = coord_config_load_file(path, &g_cfg, g_err, sizeof g_err);
    if (rc)
        print_message("%s\n", g_err);
    assert_int_equal(rc, 0);
    assert_int_equal(g_cfg.route, COORD_ROUTE_TTL);
    assert_int_equal(g_cfg.n_chains, 3);
    assert_int_equal(g_cfg.chains[0].above, 600000);
    assert_int_equal(g_cfg.chains[1].above, 0);
    assert_int_equal(g_cfg.route_fallback, 2);
    assert_string_equal(g_cfg.chains[2].name, "untimed");
    assert_int_equal(g_cfg.chains[2].n_tiers, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ttl_branches_become_chains_and_a_router),
        cmocka_unit_test(test_length_and_instance_routes),
        cmocka_unit_test(test_single_nodes_and_the_flat_form),
        cmocka_unit_test(test_bounds_out_of_order_are_rejected_with_path),
        cmocka_unit_test(test_fallback_rules_are_rejected_with_path),
        cmocka_unit_test(test_names_and_tiers_are_rejected_with_path),
        cmocka_unit_test(test_bad_keys_are_rejected_with_path),
        cmocka_unit_test(test_a_shared_tier_has_one_next_tier),
        cmocka_unit_test(test_example_file_parses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
