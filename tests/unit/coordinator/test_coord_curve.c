/* test_coord_curve.c — "security.curve" of the deployment (docs/SECURITY.md): the
 * section parses with its defaults, a bad one is rejected naming the key, absent
 * means off; a process whose pair is missing does not start and is told which
 * file and how to make it; the per-instance grants resolve key names through the
 * clients directory. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus_curve.h"
#include "coord_config.h"
#include "coord_curve.h"

static char g_err[1024];
static coord_config_t g_cfg;

/* A whole deployment (a cluster and a tier: required sections) with the keys of
 * FRAG ("{...}", its braces dropped) added. */
static const char *s_doc(const char *frag)
{
    static char buf[2048];
    const char *body = strchr(frag, '{') + 1;
    size_t n = strlen(body) - 1; /* without the closing brace */
    snprintf(buf, sizeof buf,
             "{\"cluster\": \"t\", \"tiers\": [{\"name\": \"host0\", \"kind\": "
             "\"host\", \"endpoint\": \"tcp://127.0.0.1:7710\", \"capacity\": 64}]%s%.*s}",
             n ? ", " : "", (int)n, body);
    return buf;
}

static int s_load(const char *text)
{
    int rc = coord_config_load_string("t.json", s_doc(text), &g_cfg, g_err, sizeof g_err);
    if (rc != 0)
        print_message("rejected: %s\n", g_err);
    return rc;
}

static void s_reject(const char *text, const char *what)
{
    assert_int_equal(coord_config_load_string("t.json", s_doc(text), &g_cfg, g_err, sizeof g_err),
                     -EINVAL);
    if (!strstr(g_err, what))
        print_message("message \"%s\" lacks \"%s\"\n", g_err, what);
    assert_non_null(strstr(g_err, what));
}

/* Rule: no security section, no CURVE (behaviour unchanged). */
static void test_absent_is_off(void **state)
{
    (void)state;
    assert_int_equal(s_load("{}"), 0);
    assert_false(g_cfg.curve.on);
    assert_int_equal(s_load("{\"security\": {}}"), 0);
    assert_false(g_cfg.curve.on);
}

static void test_parses_with_defaults(void **state)
{
    (void)state;
    assert_int_equal(s_load("{\"security\": {\"curve\": {\"keys\": \"run/k\"}}}"), 0);
    assert_true(g_cfg.curve.on);
    assert_string_equal(g_cfg.curve.keys, "run/k");
    assert_string_equal(g_cfg.curve.clients, "run/k/clients");
    assert_false(g_cfg.curve.autogen);
    assert_false(g_cfg.curve.acl_on);
    assert_int_equal(s_load("{\"security\": {\"curve\": {\"keys\": \"k\", \"clients\": \"c\", "
                            "\"auto\": true, \"instances\": {\"a\": [\"alice\", "
                            "\"AX2sU^KsZj}CbujT]FCybL%&Q)htV]w(D{6XG)Cl\"], \"*\": "
                            "[\"admin\"]}}}}"),
                     0);
    assert_true(g_cfg.curve.autogen && g_cfg.curve.acl_on);
    assert_string_equal(g_cfg.curve.clients, "c");
    assert_int_equal(g_cfg.curve.n_acl, 3);
    assert_string_equal(g_cfg.curve.acl[1].instance, "a");
    assert_string_equal(g_cfg.curve.acl[2].instance, "*");
    assert_string_equal(g_cfg.curve.acl[2].key, "admin");
}

/* Rule: a bad section is refused at start, naming the key. */
static void test_bad_section_rejected(void **state)
{
    (void)state;
    s_reject("{\"security\": {\"curve\": {}}}", "security.curve.keys");
    s_reject("{\"security\": {\"curve\": {\"keys\": \"\"}}}", "empty");
    s_reject("{\"security\": {\"curve\": {\"keys\": \"k\", \"key\": 1}}}", "unknown key");
    s_reject("{\"security\": {\"curv\": {}}}", "security.curv");
    s_reject("{\"security\": {\"curve\": {\"keys\": \"k\", \"instances\": {\"a\": []}}}}",
             "no key listed");
    s_reject("{\"security\": {\"curve\": {\"keys\": \"k\", \"instances\": {\"a\": [\"../x\"]}}}}",
             "neither a Z85 public key");
    s_reject("{\"security\": {\"curve\": {\"keys\": \"k\", \"instances\": [\"a\"]}}}",
             "security.curve.instances");
}

/* Rule: a process without its pair does not start, and the message says which file
 * and how to make one; with the pairs it starts and resolves names to keys. */
static void test_start_and_grants(void **state)
{
    (void)state;
    char dir[64], text[512], err[1024], pub[BUS_CURVE_KEY_TXT], sub[128];
    snprintf(dir, sizeof dir, "/tmp/kvt-ccurve-%d-XXXXXX", (int)getpid());
    assert_non_null(mkdtemp(dir));
    snprintf(text, sizeof text,
             "{\"security\": {\"curve\": {\"keys\": \"%s\", \"instances\": {\"a\": "
             "[\"alice\"]}}}}",
             dir);
    assert_int_equal(s_load(text), 0);
    assert_int_equal(coord_curve_start(&g_cfg.curve, "tier0", NULL, true, err, sizeof err), -1);
    assert_non_null(strstr(err, "tier0.key_secret"));
    assert_non_null(strstr(err, "kvtier keygen"));
    assert_int_equal(bus_curve_keygen(dir, "tier0", NULL, err, sizeof err), 0);
    assert_int_equal(bus_curve_keygen(dir, "server", NULL, err, sizeof err), 0);
    snprintf(sub, sizeof sub, "%s/clients", dir);
    assert_int_equal(bus_curve_keygen(sub, "alice", pub, err, sizeof err), 0);
    assert_int_equal(coord_curve_start(&g_cfg.curve, "tier0", NULL, true, err, sizeof err), 0);
    assert_true(bus_curve_on());
    bus_curve_stop();

    bool on = false;
    uint32_t n = 0;
    sched_acl_entry_t acl[SCHED_ACL_MAX];
    assert_int_equal(coord_curve_sched_acl(&g_cfg.curve, &on, acl, &n, err, sizeof err), 0);
    assert_true(on);
    assert_int_equal(n, 1);
    assert_string_equal(acl[0].instance, "a");
    assert_string_equal(acl[0].key, pub);
    /* a granted name without its key file is refused, naming the entry */
    snprintf(text, sizeof text,
             "{\"security\": {\"curve\": {\"keys\": \"%s\", \"instances\": {\"b\": "
             "[\"bob\"]}}}}",
             dir);
    assert_int_equal(s_load(text), 0);
    assert_int_equal(coord_curve_sched_acl(&g_cfg.curve, &on, acl, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "instances.b"));
    assert_non_null(strstr(err, "bob.key"));

    /* the keys a tier serves an Inventory to: the coordinators' pair and "*" grants
     * (not alice's, granted one instance); without coordinator.key a clear error */
    char mkeys[4][BUS_CURVE_KEY_TXT], cpub[BUS_CURVE_KEY_TXT], carol[BUS_CURVE_KEY_TXT];
    char c1pub[BUS_CURVE_KEY_TXT];
    const char *names[] = {"c1"}; /* a coordinator of the deployment, its own pair made below */
    snprintf(text, sizeof text,
             "{\"security\": {\"curve\": {\"keys\": \"%s\", \"instances\": {\"a\": "
             "[\"alice\"], \"*\": [\"carol\"]}}}}",
             dir);
    assert_int_equal(s_load(text), 0);
    assert_int_equal(bus_curve_keygen(sub, "carol", carol, err, sizeof err), 0);
    assert_int_equal(coord_curve_meta_keys(&g_cfg.curve, names, 1, &on, mkeys, 4, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "coordinator.key"));
    assert_non_null(strstr(err, "no coordinator key"));
    assert_int_equal(bus_curve_keygen(dir, "coordinator", cpub, err, sizeof err), 0);
    assert_int_equal(coord_curve_meta_keys(&g_cfg.curve, names, 1, &on, mkeys, 4, &n, err, sizeof err), 0);
    assert_true(on);
    assert_int_equal(n, 2);
    assert_string_equal(mkeys[0], cpub);
    assert_string_equal(mkeys[1], carol);
    assert_int_equal(coord_curve_meta_keys(&g_cfg.curve, names, 1, &on, mkeys, 1, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "at most 1 keys"));
    /* a coordinator started with --name c1 and no --cert uses <keys>/c1.key: listed too */
    assert_int_equal(bus_curve_keygen(dir, "c1", c1pub, err, sizeof err), 0);
    assert_int_equal(coord_curve_meta_keys(&g_cfg.curve, names, 1, &on, mkeys, 4, &n, err, sizeof err), 0);
    assert_int_equal(n, 3);
    assert_string_equal(mkeys[0], cpub);
    assert_string_equal(mkeys[1], c1pub);
    assert_string_equal(mkeys[2], carol);
    snprintf(text, sizeof text, "{\"security\": {\"curve\": {\"keys\": \"%s\"}}}", dir);
    assert_int_equal(s_load(text), 0); /* no "instances": no isolation, nothing asked */
    assert_int_equal(coord_curve_meta_keys(&g_cfg.curve, names, 1, &on, mkeys, 4, &n, err, sizeof err), 0);
    assert_false(on);
    assert_int_equal(n, 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_absent_is_off),
        cmocka_unit_test(test_parses_with_defaults),
        cmocka_unit_test(test_bad_section_rejected),
        cmocka_unit_test(test_start_and_grants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
