/* test_bus_endpoint.c — rules of bus_endpoint (issue 2 §3: endpoint strings
 * inproc://, ipc://, tcp:// with bind-only wildcard forms; errors name what is
 * wrong). Each test is named after the rule it checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "bus_endpoint.h"
#include "bus_status.h"

#include <stdio.h>
#include <string.h>

#define EINVAL_RC (-(int)kvtier_StatusCode_STATUS_INVALID_ARGUMENT)

#define assert_err_contains(err, needle)                                                           \
    do {                                                                                           \
        if (!strstr((err), (needle))) {                                                            \
            print_error("message \"%s\" lacks \"%s\"\n", (err), (needle));                         \
            fail();                                                                                \
        }                                                                                          \
    } while (0)

/* Rule: every documented form parses into its parts. */
static void test_valid_forms_parse_into_parts(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        bus_endpoint_transport_t transport;
        const char *address;
        uint16_t port;
        bool bind_only;
    } cases[] = {
        {"inproc://scheduler", BUS_ENDPOINT_INPROC, "scheduler", 0, false},
        {"inproc://a/b-c.d", BUS_ENDPOINT_INPROC, "a/b-c.d", 0, false},
        {"ipc:///tmp/kvt/tier0.sock", BUS_ENDPOINT_IPC, "/tmp/kvt/tier0.sock", 0, false},
        {"ipc://relative.sock", BUS_ENDPOINT_IPC, "relative.sock", 0, false},
        {"ipc://@abstract", BUS_ENDPOINT_IPC, "@abstract", 0, false},
        {"ipc://*", BUS_ENDPOINT_IPC, "*", 0, true},
        {"tcp://127.0.0.1:5555", BUS_ENDPOINT_TCP, "127.0.0.1", 5555, false},
        {"tcp://node-1.example_net:1", BUS_ENDPOINT_TCP, "node-1.example_net", 1, false},
        {"tcp://localhost:65535", BUS_ENDPOINT_TCP, "localhost", 65535, false},
        {"tcp://[::1]:7000", BUS_ENDPOINT_TCP, "::1", 7000, false},
        {"tcp://[fe80::1%eth0]:7000", BUS_ENDPOINT_TCP, "fe80::1%eth0", 7000, false},
        {"tcp://*:5601", BUS_ENDPOINT_TCP, "*", 5601, true},
        {"tcp://127.0.0.1:*", BUS_ENDPOINT_TCP, "127.0.0.1", 0, true},
        {"tcp://*:*", BUS_ENDPOINT_TCP, "*", 0, true},
    };
    char err[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bus_endpoint_t ep;
        int rc = bus_endpoint_parse(cases[i].text, &ep, err, sizeof err);
        if (rc != 0)
            print_error("%s\n", err);
        assert_int_equal(rc, 0);
        assert_int_equal(ep.transport, cases[i].transport);
        assert_string_equal(ep.address, cases[i].address);
        assert_int_equal(ep.port, cases[i].port);
        assert_int_equal(bus_endpoint_is_bind_only(&ep), cases[i].bind_only);
        assert_int_equal(bus_endpoint_check(cases[i].text, BUS_ENDPOINT_BIND, err, sizeof err), 0);
    }
}

/* Rule: a bad endpoint is rejected with a message that starts with it and names the problem. */
static void test_invalid_forms_name_the_problem(void **state)
{
    (void)state;
    static const struct {
        const char *text, *message;
    } bad[] = {
        {"tcp://127.0.0.1:99999", "tcp://127.0.0.1:99999: port out of range 1..65535"},
        {"tcp://127.0.0.1:0", "tcp://127.0.0.1:0: port out of range 1..65535"},
        {"tcp://127.0.0.1:123456789012345678901234567890",
         "tcp://127.0.0.1:123456789012345678901234567890: port out of range 1..65535"},
        {"tcp://host:http", "tcp://host:http: port is not a number (expected 1..65535 or *)"},
        {"tcp://host:", "tcp://host:: missing port (expected 1..65535 or *)"},
        {"tcp://host", "tcp://host: missing port (expected tcp://HOST:PORT)"},
        {"tcp://:5555", "tcp://:5555: missing host (expected tcp://HOST:PORT)"},
        {"tcp://10.0.0.300:5555",
         "tcp://10.0.0.300:5555: bad IPv4 address (four numbers 0..255: A.B.C.D)"},
        {"tcp://10.0.1:5555", "tcp://10.0.1:5555: bad IPv4 address (four numbers 0..255: A.B.C.D)"},
        {"tcp://1.2.3.4.5:5555",
         "tcp://1.2.3.4.5:5555: bad IPv4 address (four numbers 0..255: A.B.C.D)"},
        {"tcp://::1:5555", "tcp://::1:5555: an IPv6 address must be in brackets ([ADDR]:PORT)"},
        {"tcp://[::1:5555", "tcp://[::1:5555: missing ']' after IPv6 address"},
        {"tcp://[::1]5555", "tcp://[::1]5555: missing port (expected tcp://[ADDR]:PORT)"},
        {"tcp://[]:5555", "tcp://[]:5555: bad IPv6 address"},
        {"tcp://[1.2.3.4]:5555", "tcp://[1.2.3.4]:5555: bad IPv6 address"},
        {"tcp://ho/st:5555",
         "tcp://ho/st:5555: bad host (letters, digits, '.', '-', '_', [IPv6] or *)"},
        {"tcp://eth0;10.0.0.1:5555",
         "tcp://eth0;10.0.0.1:5555: bad host (letters, digits, '.', '-', '_', [IPv6] or *)"},
        {"udp://1.2.3.4:5", "udp://1.2.3.4:5: unsupported transport \"udp\" (expected inproc, ipc "
                            "or tcp)"},
        {"TCP://1.2.3.4:5", "TCP://1.2.3.4:5: unsupported transport \"TCP\" (expected inproc, ipc "
                            "or tcp)"},
        {"127.0.0.1:5555",
         "127.0.0.1:5555: missing transport (expected inproc://, ipc:// or tcp://)"},
        {"inproc://", "inproc://: missing inproc name"},
        {"ipc://", "ipc://: missing ipc path"},
        {"tcp://host :5", "tcp://host :5: contains a space or control character at byte 10"},
        {"inproc://a\nb", "inproc://a\\x0ab: contains a space or control character at byte 10"},
        {"", "(endpoint): empty endpoint"},
    };
    char err[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bus_endpoint_t ep;
        memset(&ep, 0x5a, sizeof ep);
        int rc = bus_endpoint_parse(bad[i].text, &ep, err, sizeof err);
        assert_int_equal(rc, EINVAL_RC);
        assert_string_equal(err, bad[i].message);
        assert_int_equal(((unsigned char *)&ep)[0], 0x5a); /* OUT untouched on error */
    }
    assert_int_equal(bus_endpoint_parse(NULL, NULL, err, sizeof err), EINVAL_RC);
    assert_string_equal(err, "(endpoint): empty endpoint");
    /* ERR may be NULL. */
    assert_int_equal(bus_endpoint_parse("nope", NULL, NULL, 0), EINVAL_RC);
}

/* Rule: lengths are bounded: the whole string, and the ipc path by the Unix socket limit. */
static void test_length_limits_are_enforced(void **state)
{
    (void)state;
    char text[BUS_ENDPOINT_MAX + 16], err[512];
    /* ipc path of exactly the limit passes, one more byte fails. */
    memset(text, 0, sizeof text);
    memcpy(text, "ipc://", 6);
    memset(text + 6, 'p', BUS_ENDPOINT_IPC_PATH_MAX);
    assert_int_equal(bus_endpoint_parse(text, NULL, err, sizeof err), 0);
    text[6 + BUS_ENDPOINT_IPC_PATH_MAX] = 'p';
    assert_int_equal(bus_endpoint_parse(text, NULL, err, sizeof err), EINVAL_RC);
    assert_err_contains(err, "ipc path too long (108 bytes, max 107)");
    /* inproc names may use the whole BUS_ENDPOINT_MAX - 1 bytes, not more. */
    memset(text, 0, sizeof text);
    memcpy(text, "inproc://", 9);
    memset(text + 9, 'n', BUS_ENDPOINT_MAX - 1 - 9);
    assert_int_equal(bus_endpoint_parse(text, NULL, err, sizeof err), 0);
    text[BUS_ENDPOINT_MAX - 1] = 'n';
    assert_int_equal(bus_endpoint_parse(text, NULL, err, sizeof err), EINVAL_RC);
    assert_err_contains(err, "endpoint too long (max 255 bytes)");
    /* The echo of a long endpoint is cut. */
    assert_err_contains(err, "...");
    assert_true(strlen(err) < 160);
}

/* Rule: connect endpoints must name one peer; wildcard forms are bind only. */
static void test_wildcards_are_bind_only(void **state)
{
    (void)state;
    char err[256];
    assert_int_equal(bus_endpoint_check("tcp://*:5555", BUS_ENDPOINT_CONNECT, err, sizeof err),
                     EINVAL_RC);
    assert_string_equal(err, "tcp://*:5555: a wildcard host can only be bound, not connected to");
    assert_int_equal(bus_endpoint_check("tcp://10.0.0.1:*", BUS_ENDPOINT_CONNECT, err, sizeof err),
                     EINVAL_RC);
    assert_string_equal(err,
                        "tcp://10.0.0.1:*: an ephemeral port can only be bound, not connected to");
    assert_int_equal(bus_endpoint_check("ipc://*", BUS_ENDPOINT_CONNECT, err, sizeof err),
                     EINVAL_RC);
    assert_string_equal(err, "ipc://*: a wildcard ipc path can only be bound, not connected to");
    assert_int_equal(
        bus_endpoint_check("tcp://10.0.0.1:5555", BUS_ENDPOINT_CONNECT, err, sizeof err), 0);
    assert_int_equal(bus_endpoint_check("inproc://x", BUS_ENDPOINT_CONNECT, err, sizeof err), 0);
    assert_int_equal(bus_endpoint_check("tcp://*:*", BUS_ENDPOINT_BIND, err, sizeof err), 0);
    assert_int_equal(bus_endpoint_check("tcp://*:*", BUS_ENDPOINT_ANY, err, sizeof err), 0);
    /* Syntax errors come first whatever the use. */
    assert_int_equal(bus_endpoint_check("tcp://*:0", BUS_ENDPOINT_BIND, err, sizeof err),
                     EINVAL_RC);
    assert_string_equal(err, "tcp://*:0: port out of range 1..65535");
}

/* Rule: format gives back the canonical string, and it parses to the same endpoint. */
static void test_format_round_trips(void **state)
{
    (void)state;
    static const char *const texts[] = {
        "inproc://scheduler", "ipc:///tmp/x.sock", "ipc://*",      "tcp://127.0.0.1:5555",
        "tcp://[::1]:7000",   "tcp://*:*",         "tcp://host:*", NULL};
    char err[256], buf[BUS_ENDPOINT_MAX], small[10];
    for (size_t i = 0; texts[i]; i++) {
        bus_endpoint_t ep, again;
        assert_int_equal(bus_endpoint_parse(texts[i], &ep, err, sizeof err), 0);
        assert_int_equal(bus_endpoint_format(&ep, buf, sizeof buf), 0);
        assert_string_equal(buf, texts[i]);
        assert_int_equal(bus_endpoint_parse(buf, &again, err, sizeof err), 0);
        assert_int_equal(again.transport, ep.transport);
        assert_string_equal(again.address, ep.address);
        assert_int_equal(again.port, ep.port);
        assert_int_equal(bus_endpoint_is_bind_only(&again), bus_endpoint_is_bind_only(&ep));
    }
    bus_endpoint_t ep;
    assert_int_equal(bus_endpoint_parse("tcp://127.0.0.1:5555", &ep, err, sizeof err), 0);
    assert_int_equal(bus_endpoint_format(&ep, small, sizeof small), EINVAL_RC);
    assert_string_equal(small, "");
    assert_string_equal(bus_endpoint_transport_name(BUS_ENDPOINT_IPC), "ipc");
}

/* Rule: builders write bounded, valid strings or fail with a reason and an empty buffer. */
static void test_builders_are_bounded_and_validated(void **state)
{
    (void)state;
    char buf[BUS_ENDPOINT_MAX], small[16], err[256];
    assert_int_equal(bus_endpoint_tcp(buf, sizeof buf, "127.0.0.1", 5555, err, sizeof err), 0);
    assert_string_equal(buf, "tcp://127.0.0.1:5555");
    assert_int_equal(bus_endpoint_tcp(buf, sizeof buf, "*", 0, err, sizeof err), 0);
    assert_string_equal(buf, "tcp://*:*");
    assert_int_equal(bus_endpoint_tcp(buf, sizeof buf, "::1", 80, err, sizeof err), 0);
    assert_string_equal(buf, "tcp://[::1]:80");
    assert_int_equal(bus_endpoint_ipc(buf, sizeof buf, "/tmp/a.sock", err, sizeof err), 0);
    assert_string_equal(buf, "ipc:///tmp/a.sock");
    assert_int_equal(bus_endpoint_inproc(buf, sizeof buf, "gc", err, sizeof err), 0);
    assert_string_equal(buf, "inproc://gc");

    /* Too small a buffer: an error, never a cut endpoint. */
    assert_int_equal(bus_endpoint_tcp(small, sizeof small, "127.0.0.1", 5555, err, sizeof err),
                     EINVAL_RC);
    assert_string_equal(small, "");
    assert_err_contains(err, "endpoint does not fit");
    /* Over BUS_ENDPOINT_MAX even with a big buffer. */
    char host[300], big[600];
    memset(host, 'h', sizeof host - 1);
    host[sizeof host - 1] = '\0';
    assert_int_equal(bus_endpoint_tcp(big, sizeof big, host, 1, err, sizeof err), EINVAL_RC);
    assert_string_equal(big, "");
    /* Built strings are validated like parsed ones. */
    assert_int_equal(bus_endpoint_tcp(buf, sizeof buf, "bad host", 1, err, sizeof err), EINVAL_RC);
    assert_string_equal(buf, "");
    assert_err_contains(err, "tcp://bad host:1: contains a space");
    assert_int_equal(bus_endpoint_inproc(buf, sizeof buf, "", err, sizeof err), EINVAL_RC);
    assert_string_equal(err, "inproc://: missing inproc name");
    assert_int_equal(bus_endpoint_ipc(buf, sizeof buf, NULL, err, sizeof err), EINVAL_RC);
    assert_int_equal(bus_endpoint_tcp(buf, sizeof buf, NULL, 1, err, sizeof err), EINVAL_RC);
    assert_int_equal(bus_endpoint_tcp(buf, 0, "h", 1, NULL, 0), EINVAL_RC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_forms_parse_into_parts),
        cmocka_unit_test(test_invalid_forms_name_the_problem),
        cmocka_unit_test(test_length_limits_are_enforced),
        cmocka_unit_test(test_wildcards_are_bind_only),
        cmocka_unit_test(test_format_round_trips),
        cmocka_unit_test(test_builders_are_bounded_and_validated),
    };
    return cmocka_run_group_tests_name("bus_endpoint", tests, NULL, NULL);
}
