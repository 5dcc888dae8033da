/* test_kvt_curve.c — libkvtier's CURVE options (client/kvtier.h, docs/SECURITY.md):
 * curve_cert and curve_server_key go together, a missing or readable secret and a
 * bad server key are refused by kvt_connect with INVALID_ARGUMENT naming the file,
 * before anything connects. (Connecting over CURVE: tests/integration/test_curve.sh.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus_curve.h"
#include "kvtier.h"

static char g_err[1024];

static void s_refused(const kvt_options_t *o, const char *what)
{
    kvt_client_t *c = kvt_connect(o, g_err, sizeof g_err);
    assert_null(c);
    if (!strstr(g_err, what))
        print_message("\"%s\" lacks \"%s\"\n", g_err, what);
    assert_non_null(strstr(g_err, "INVALID_ARGUMENT"));
    assert_non_null(strstr(g_err, what));
}

static void test_options_checked(void **state)
{
    (void)state;
    char dir[64], cert[128], server[128];
    snprintf(dir, sizeof dir, "/tmp/kvt-ccli-%d-XXXXXX", (int)getpid());
    assert_non_null(mkdtemp(dir));
    assert_int_equal(bus_curve_keygen(dir, "alice", NULL, g_err, sizeof g_err), 0);
    assert_int_equal(bus_curve_keygen(dir, "server", NULL, g_err, sizeof g_err), 0);
    snprintf(cert, sizeof cert, "%s/alice.key", dir);
    snprintf(server, sizeof server, "%s/server.key", dir);
    /* nobody listens there: every refusal below comes before any connect */
    kvt_options_t o = {.coordinators = "tcp://127.0.0.1:1", .timeout_ms = 200};
    o.curve_cert = cert;
    s_refused(&o, "curve_server_key is missing");
    o.curve_cert = NULL;
    o.curve_server_key = server;
    s_refused(&o, "curve_cert is missing");
    o.curve_cert = "/nonexistent/bob.key";
    s_refused(&o, "/nonexistent/bob.key_secret");
    o.curve_cert = cert;
    o.curve_server_key = "not a key";
    s_refused(&o, "curve_server_key");
    char secret[160];
    snprintf(secret, sizeof secret, "%s_secret", cert);
    assert_int_equal(chmod(secret, 0640), 0);
    o.curve_server_key = server;
    s_refused(&o, "chmod 600");
    assert_int_equal(chmod(secret, 0600), 0);
    /* valid keys: the options pass and the connect itself times out (nobody there) */
    kvt_client_t *c = kvt_connect(&o, g_err, sizeof g_err);
    assert_null(c);
    assert_null(strstr(g_err, "INVALID_ARGUMENT"));
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_options_checked)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
