/* test_coord_etcd_tls.c — "etcd.tls" of the deployment and coord_etcd_set_tls
 * (docs/SECURITY.md "etcd"): the section parses, a certificate without its key or an
 * unknown key is refused naming the key path, a file that cannot be read is refused
 * naming it. The TLS handshake itself runs against a real etcd with
 * --client-cert-auth in tests/integration/test_etcd_tls.sh. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "coord_config.h"
#include "coord_etcd.h"

static char g_err[1024];
static coord_config_t g_cfg;

/* A whole deployment (a cluster and a tier: required sections) with the keys of
 * FRAG ("{...}", its braces dropped) added. */
static int s_load(const char *frag)
{
    char buf[1024];
    const char *body = strchr(frag, '{') + 1;
    size_t n = strlen(body) - 1; /* without the closing brace */
    snprintf(buf, sizeof buf,
             "{\"cluster\": \"t\", \"tiers\": [{\"name\": \"host0\", \"kind\": "
             "\"host\", \"endpoint\": \"tcp://127.0.0.1:7710\", \"capacity\": 64}]%s%.*s}",
             n ? ", " : "", (int)n, body);
    return coord_config_load_string("t.json", buf, &g_cfg, g_err, sizeof g_err);
}

static void test_section(void **state)
{
    (void)state;
    assert_int_equal(s_load("{}"), 0);
    assert_string_equal(g_cfg.etcd_ca, "");
    assert_int_equal(s_load("{\"etcd\": {\"tls\": {\"ca\": \"/p/ca.crt\", \"cert\": \"c.crt\", "
                            "\"key\": \"c.key\"}}}"),
                     0);
    assert_string_equal(g_cfg.etcd_ca, "/p/ca.crt");
    assert_string_equal(g_cfg.etcd_cert, "c.crt");
    assert_string_equal(g_cfg.etcd_key, "c.key");
    assert_int_equal(s_load("{\"etcd\": {\"tls\": {\"ca\": \"ca.crt\"}}}"), 0);
    assert_int_equal(s_load("{\"etcd\": {\"tls\": {\"cert\": \"c.crt\"}}}"), -EINVAL);
    assert_non_null(strstr(g_err, "etcd.tls.key: missing"));
    assert_int_equal(s_load("{\"etcd\": {\"tls\": {\"cafile\": \"x\"}}}"), -EINVAL);
    assert_non_null(strstr(g_err, "etcd.tls.cafile"));
}

static void test_set_tls(void **state)
{
    (void)state;
    coord_etcd_tls_t t = {.ca_file = "/nonexistent/ca.crt"};
    assert_int_equal(coord_etcd_set_tls(&t, g_err, sizeof g_err), -EINVAL);
    assert_non_null(strstr(g_err, "/nonexistent/ca.crt"));
    t = (coord_etcd_tls_t){.cert_file = __FILE__};
    assert_int_equal(coord_etcd_set_tls(&t, g_err, sizeof g_err), -EINVAL);
    assert_non_null(strstr(g_err, "needs its key"));
    t = (coord_etcd_tls_t){.ca_file = __FILE__, .cert_file = __FILE__, .key_file = __FILE__};
    assert_int_equal(coord_etcd_set_tls(&t, g_err, sizeof g_err), 0);
    assert_int_equal(coord_etcd_set_tls(NULL, g_err, sizeof g_err), 0); /* cleared */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_section),
        cmocka_unit_test(test_set_tls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
