/* test_bus_config.c — rules of bus_config (issue 2 §3; DESIGN.md §10: "a bad
 * file is rejected at start with the path of the offending key"). Each test is
 * named after the rule it checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "bus_config.h"

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ERRLEN BUS_CONFIG_ERR_MAX

/* Fails with the actual message when NEEDLE is not in ERR. */
#define assert_err_contains(err, needle)                                                           \
    do {                                                                                           \
        if (!strstr((err), (needle))) {                                                            \
            print_error("message \"%s\" lacks \"%s\"\n", (err), (needle));                         \
            fail();                                                                                \
        }                                                                                          \
    } while (0)

static char s_tmpdir[PATH_MAX];

static int s_group_setup(void **state)
{
    (void)state;
    snprintf(s_tmpdir, sizeof s_tmpdir, "/tmp/kvt_test_config_XXXXXX");
    return mkdtemp(s_tmpdir) ? 0 : -1;
}

static const char *const s_tmp_files[] = {"syntax.json", "big.json", "limit.json",
                                          "dup.json",    "top.json", NULL};

static int s_group_teardown(void **state)
{
    (void)state;
    char path[PATH_MAX + 32];
    for (size_t i = 0; s_tmp_files[i]; i++) {
        snprintf(path, sizeof path, "%s/%s", s_tmpdir, s_tmp_files[i]);
        unlink(path);
    }
    return rmdir(s_tmpdir);
}

/* Writes TEXT (LEN bytes) to a file in the temp dir; PATH receives its name. */
static void s_write_file(const char *name, const char *text, size_t len, char *path, size_t plen)
{
    snprintf(path, plen, "%s/%s", s_tmpdir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static bus_config_t *s_load(const char *json)
{
    char err[ERRLEN] = "";
    bus_config_t *cfg = bus_config_load_string("test", json, err, sizeof err);
    if (!cfg)
        print_error("load failed: %s\n", err);
    assert_non_null(cfg);
    return cfg;
}

/* data/good.json sits next to this source file. */
static void s_data_path(const char *name, char *out, size_t len)
{
    char src[PATH_MAX];
    snprintf(src, sizeof src, "%s", __FILE__);
    snprintf(out, len, "%s/data/%s", dirname(src), name);
}

/* Rule: a complete deployment file loads and every typed getter reads it. */
static void test_good_file_reads_every_type(void **state)
{
    (void)state;
    char path[PATH_MAX], err[ERRLEN] = "", s[64];
    s_data_path("good.json", path, sizeof path);
    bus_config_t *cfg = bus_config_load_file(path, 0, err, sizeof err);
    if (!cfg)
        print_error("%s\n", err);
    assert_non_null(cfg);
    assert_string_equal(bus_config_source(cfg), path);
    const bus_config_node_t *root = bus_config_root(cfg);
    static const char *const kinds[] = {"gpu", "host", "nvme", "remote", NULL};
    static const char *const policies[] = {"lru", "clock", "fifo", NULL};

    assert_int_equal(bus_config_get_string(root, "cluster", s, sizeof s, err, sizeof err), 0);
    assert_string_equal(s, "demo");
    assert_int_equal(bus_config_get_string(root, "etcd.endpoints[1]", s, sizeof s, err, sizeof err),
                     0);
    assert_string_equal(s, "http://127.0.0.1:22379");

    uint64_t u;
    assert_int_equal(bus_config_get_duration_ms(root, "etcd.lease_ttl", &u, err, sizeof err), 0);
    assert_int_equal(u, 10000);
    assert_int_equal(bus_config_get_positive(root, "tiers[1].capacity", &u, err, sizeof err), 0);
    assert_int_equal(u, 65536);
    assert_int_equal(bus_config_get_size(root, "tiers[0].slot_size", &u, err, sizeof err), 0);
    assert_int_equal(u, 256 * 1024);
    assert_int_equal(bus_config_get_size(root, "events.retain", &u, err, sizeof err), 0);
    assert_int_equal(u, 64ull << 20);
    assert_int_equal(bus_config_get_duration_ms(root, "reclaimer.interval", &u, err, sizeof err),
                     0);
    assert_int_equal(u, 90000);
    assert_int_equal(bus_config_get_duration_ms(root, "gc.grace", &u, err, sizeof err), 0);
    assert_int_equal(u, 2000);
    assert_int_equal(bus_config_get_u64(root, "gc.max_per_round", 1, 4096, &u, err, sizeof err), 0);
    assert_int_equal(u, 256);

    int64_t i;
    assert_int_equal(bus_config_get_i64(root, "priority", -10, 10, &i, err, sizeof err), 0);
    assert_int_equal(i, -5);
    double d;
    assert_int_equal(
        bus_config_get_double(root, "reclaimer.high_watermark", 0.0, 1.0, &d, err, sizeof err), 0);
    assert_true(d > 0.89 && d < 0.91);

    int e;
    assert_int_equal(bus_config_get_enum(root, "tiers[1].kind", kinds, &e, err, sizeof err), 0);
    assert_int_equal(e, 2);
    assert_int_equal(bus_config_get_enum(root, "tiers[1].policy", policies, &e, err, sizeof err),
                     0);
    assert_int_equal(e, 1);
    bool b;
    assert_int_equal(bus_config_get_bool(root, "tiers[0].shared", &b, err, sizeof err), 0);
    assert_true(b);

    char ep[BUS_ENDPOINT_MAX];
    assert_int_equal(bus_config_get_endpoint(root, "tiers[0].endpoint", BUS_ENDPOINT_BIND, ep,
                                             sizeof ep, err, sizeof err),
                     0);
    assert_string_equal(ep, "tcp://*:*");
    assert_int_equal(bus_config_get_endpoint(root, "events.endpoint", BUS_ENDPOINT_CONNECT, ep,
                                             sizeof ep, err, sizeof err),
                     0);
    assert_string_equal(ep, "tcp://127.0.0.1:5601");
    bus_config_destroy(&cfg);
}

/* Rule: a missing required key is named by its full path. */
static void test_missing_required_key_names_full_path(void **state)
{
    (void)state;
    bus_config_t *cfg = s_load("{\"etcd\": {\"lease_ttl\": \"10s\"}}");
    char err[ERRLEN], s[64];
    int rc =
        bus_config_get_string(bus_config_root(cfg), "etcd.endpoints", s, sizeof s, err, sizeof err);
    assert_int_equal(rc, BUS_CONFIG_EMISSING);
    assert_string_equal(err, "etcd.endpoints: missing required key");
    /* A missing parent object reads the same: the whole path is what to add. */
    rc = bus_config_get_string(bus_config_root(cfg), "events.endpoint", s, sizeof s, err,
                               sizeof err);
    assert_int_equal(rc, BUS_CONFIG_EMISSING);
    assert_string_equal(err, "events.endpoint: missing required key");
    bus_config_destroy(&cfg);
}

/* Rule: an index past the end is missing, and the message says how long the array is. */
static void test_missing_array_element_names_path_and_length(void **state)
{
    (void)state;
    bus_config_t *cfg = s_load("{\"tiers\": [{\"capacity\": 1}, {\"capacity\": 2}]}");
    char err[ERRLEN];
    uint64_t u;
    int rc =
        bus_config_get_positive(bus_config_root(cfg), "tiers[5].capacity", &u, err, sizeof err);
    assert_int_equal(rc, BUS_CONFIG_EMISSING);
    assert_string_equal(err, "tiers[5].capacity: missing required key (tiers has 2 elements)");
    bus_config_destroy(&cfg);
}

/* Rule (issue example): a non-integer capacity names the path and echoes the value. */
static void test_positive_integer_error_names_path_and_value(void **state)
{
    (void)state;
    bus_config_t *cfg = s_load("{\"tiers\": [{\"capacity\": 1}, {\"capacity\": \"12x\"}]}");
    char err[ERRLEN];
    uint64_t u = 7;
    int rc =
        bus_config_get_positive(bus_config_root(cfg), "tiers[1].capacity", &u, err, sizeof err);
    assert_int_equal(rc, BUS_CONFIG_EINVALID);
    assert_string_equal(err, "tiers[1].capacity: expected a positive integer, got \"12x\"");
    assert_int_equal(u, 7); /* untouched on error */
    bus_config_destroy(&cfg);
}

/* Rule: a positive integer is >= 1: zero, negatives and reals are rejected. */
static void test_positive_integer_rejects_zero_negative_and_real(void **state)
{
    (void)state;
    bus_config_t *cfg = s_load("{\"a\": 0, \"b\": -4, \"c\": 2.5, \"d\": 1}");
    const bus_config_node_t *r = bus_config_root(cfg);
    char err[ERRLEN];
    uint64_t u;
    assert_int_equal(bus_config_get_positive(r, "a", &u, err, sizeof err), BUS_CONFIG_EINVALID);
    assert_string_equal(err, "a: expected a positive integer, got 0");
    assert_int_equal(bus_config_get_positive(r, "b", &u, err, sizeof err), BUS_CONFIG_EINVALID);
    assert_string_equal(err, "b: expected a positive integer, got -4");
    assert_int_equal(bus_config_get_positive(r, "c", &u, err, sizeof err), BUS_CONFIG_EINVALID);
    assert_string_equal(err, "c: expected a positive integer, got 2.5");
    assert_int_equal(bus_config_get_positive(r, "d", &u, err, sizeof err), 0);
    assert_int_equal(u, 1);
    bus_config_destroy(&cfg);
}

/* Rule: each getter rejects a value of the wrong type, naming the exact path. */
static void test_type_errors_name_exact_path(void **state)
{
    (void)state;
    bus_config_t *cfg = s_load("{\"x\": {\"list\": [1, {\"s\": 5, \"b\": \"yes\", \"i\": 1.5, "
                               "\"u\": -1, \"d\": \"0.5\", \"n\": null, \"o\": []}]}}");
    const bus_config_node_t *r = bus_config_root(cfg);
    char err[ERRLEN], s[16];
    bool b;
    int64_t i;
    uint64_t u;
    double d;
    assert_int_equal(bus_config_get_string(r, "x.list[1].s", s, sizeof s, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "x.list[1].s: expected a string, got 5");
    assert_int_equal(bus_config_get_bool(r, "x.list[1].b", &b, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "x.list[1].b: expected true or false, got \"yes\"");
    assert_int_equal(
        bus_config_get_i64(r, "x.list[1].i", INT64_MIN, INT64_MAX, &i, err, sizeof err),
        BUS_CONFIG_EINVALID);
    assert_string_equal(err, "x.list[1].i: expected an integer, got 1.5");
    assert_int_equal(bus_config_get_u64(r, "x.list[1].u", 0, UINT64_MAX, &u, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "x.list[1].u: expected a non-negative integer, got -1");
    assert_int_equal(bus_config_get_double(r, "x.list[1].d", 0, 1, &d, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "x.list[1].d: expected a number, got \"0.5\"");
    /* null is a value of the wrong type, not an absent key. */
    assert_int_equal(bus_config_get_string(r, "x.list[1].n", s, sizeof s, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "x.list[1].n: expected a string, got null");
    assert_int_equal(bus_config_get_string(r, "x.list[1].o", s, sizeof s, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "x.list[1].o: expected a string, got an array");
    bus_config_destroy(&cfg);
}

/* Rule: a scalar where the path needs an object or array names the container's path. */
static void test_wrong_container_type_names_its_path(void **state)
{
    (void)state;
    bus_config_t *cfg = s_load("{\"tiers\": [\"host\"], \"gc\": 5}");
    const bus_config_node_t *r = bus_config_root(cfg);
    char err[ERRLEN];
    uint64_t u;
    assert_int_equal(bus_config_get_positive(r, "tiers[0].capacity", &u, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "tiers[0]: expected an object, got \"host\"");
    assert_int_equal(bus_config_get_positive(r, "gc[0]", &u, err, sizeof err), BUS_CONFIG_EINVALID);
    assert_string_equal(err, "gc: expected an array, got 5");
    /* An optional key below a wrong container is still an error, not a default. */
    assert_int_equal(bus_config_opt_positive(r, "gc.rounds", 3, &u, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "gc: expected an object, got 5");
    bus_config_destroy(&cfg);
}

/* Rule: a string longer than the caller's bound is rejected, not truncated. */
static void test_string_longer_than_max_is_rejected(void **state)
{
    (void)state;
    bus_config_t *cfg = s_load("{\"name\": \"abcdefgh\"}");
    char err[ERRLEN], s[9], small[8];
    assert_int_equal(
        bus_config_get_string(bus_config_root(cfg), "name", s, sizeof s, err, sizeof err), 0);
    assert_string_equal(s, "abcdefgh");
    assert_int_equal(
        bus_config_get_string(bus_config_root(cfg), "name", small, sizeof small, err, sizeof err),
        BUS_CONFIG_EINVALID);
    assert_string_equal(err, "name: string too long (8 bytes, max 7)");
    bus_config_destroy(&cfg);
}

/* Rule: integer and double getters enforce [min, max] and say the range. */
static void test_integer_and_double_ranges_are_enforced(void **state)
{
    (void)state;
    bus_config_t *cfg = s_load("{\"port\": 70000, \"neg\": -20, \"wm\": 1.5, \"big\": "
                               "9223372036854775807}");
    const bus_config_node_t *r = bus_config_root(cfg);
    char err[ERRLEN];
    uint64_t u;
    int64_t i;
    double d;
    assert_int_equal(bus_config_get_u64(r, "port", 1, 65535, &u, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "port: 70000 out of range 1..65535");
    assert_int_equal(bus_config_get_i64(r, "neg", -10, 10, &i, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "neg: -20 out of range -10..10");
    assert_int_equal(bus_config_get_double(r, "wm", 0.0, 1.0, &d, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "wm: 1.5 out of range 0..1");
    assert_int_equal(bus_config_get_u64(r, "big", 0, UINT64_MAX, &u, err, sizeof err), 0);
    assert_true(u == (uint64_t)INT64_MAX);
    /* An integer is a number too. */
    assert_int_equal(bus_config_get_double(r, "neg", -100, 100, &d, err, sizeof err), 0);
    assert_true(d == -20.0);
    bus_config_destroy(&cfg);
}

/* Rule: sizes accept bytes and binary/decimal units, case-insensitive, one space allowed. */
static void test_size_units_convert_to_bytes(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        uint64_t bytes;
    } cases[] = {
        {"4096", 4096},         {"0", 0},
        {"64MiB", 64ull << 20}, {"1GiB", 1ull << 30},
        {"1 GiB", 1ull << 30},  {"2gib", 2ull << 30},
        {"3KiB", 3072},         {"10KB", 10000},
        {"5MB", 5000000},       {"7B", 7},
        {"1TiB", 1ull << 40},   {"1PiB", 1ull << 50},
    };
    char err[ERRLEN];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t v = 0;
        int rc = bus_config_parse_size(cases[i].text, &v, err, sizeof err);
        if (rc != 0)
            print_error("%s: %s\n", cases[i].text, err);
        assert_int_equal(rc, 0);
        assert_true(v == cases[i].bytes);
    }
    /* The largest value that fits. */
    uint64_t v;
    assert_int_equal(bus_config_parse_size("18446744073709551615", &v, err, sizeof err), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(bus_config_parse_size("16383PiB", &v, err, sizeof err), 0);
    assert_true(v == 16383ull << 50);

    bus_config_t *cfg = s_load("{\"a\": \"64MiB\", \"b\": 4096}");
    assert_int_equal(bus_config_get_size(bus_config_root(cfg), "a", &v, err, sizeof err), 0);
    assert_true(v == 64ull << 20);
    assert_int_equal(bus_config_get_size(bus_config_root(cfg), "b", &v, err, sizeof err), 0);
    assert_true(v == 4096);
    bus_config_destroy(&cfg);
}

/* Rule: sizes reject garbage, negatives, fractions, unknown units and overflow. */
static void test_size_rejects_garbage_negative_and_overflow(void **state)
{
    (void)state;
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"12x", "unknown unit \"x\""},     {"-1MiB", "must not be negative"},
        {"+5", "expected a number"},       {"", "expected a number"},
        {"MiB", "expected a number"},      {"1.5GiB", "fractions are not supported"},
        {"64 ", "unknown unit \"\""},      {"64  MiB", "unknown unit"},
        {" 64", "expected a number"},      {"18446744073709551616", "overflows 64 bits"},
        {"16384PiB", "overflows 64 bits"}, {"99999999999TiB", "overflows 64 bits"},
        {"1KiBx", "unknown unit"},
    };
    char err[ERRLEN];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 42;
        assert_int_equal(bus_config_parse_size(bad[i].text, &v, err, sizeof err),
                         BUS_CONFIG_EINVALID);
        assert_err_contains(err, bad[i].needle);
        assert_int_equal(v, 42);
    }
    /* Through the getter the message names the key; JSON negatives and reals fail too. */
    bus_config_t *cfg = s_load("{\"t\": [{\"slot\": \"12x\", \"neg\": -1, \"r\": 1.5}]}");
    const bus_config_node_t *r = bus_config_root(cfg);
    uint64_t v;
    assert_int_equal(bus_config_get_size(r, "t[0].slot", &v, err, sizeof err), BUS_CONFIG_EINVALID);
    assert_string_equal(err, "t[0].slot: bad size \"12x\": unknown unit \"x\" (use B, KiB, MiB, "
                             "GiB, TiB, PiB, KB, MB, GB, TB, PB)");
    assert_int_equal(bus_config_get_size(r, "t[0].neg", &v, err, sizeof err), BUS_CONFIG_EINVALID);
    assert_string_equal(err,
                        "t[0].neg: expected a size (bytes, or a string like \"64MiB\"), got -1");
    assert_int_equal(bus_config_get_size(r, "t[0].r", &v, err, sizeof err), BUS_CONFIG_EINVALID);
    assert_err_contains(err, "t[0].r: expected a size");
    bus_config_destroy(&cfg);
}

/* Rule: durations take ms, s, m, h (combinable) and become milliseconds. */
static void test_duration_units_convert_to_ms(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        uint64_t ms;
    } cases[] = {
        {"30s", 30000}, {"500ms", 500},   {"2m", 120000}, {"1h", 3600000},
        {"0s", 0},      {"1m30s", 90000}, {"1 s", 1000},  {"1h1m1s1ms", 3661001},
    };
    char err[ERRLEN];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t v = 0;
        int rc = bus_config_parse_duration_ms(cases[i].text, &v, err, sizeof err);
        if (rc != 0)
            print_error("%s: %s\n", cases[i].text, err);
        assert_int_equal(rc, 0);
        assert_true(v == cases[i].ms);
    }
    bus_config_t *cfg = s_load("{\"gc\": {\"grace\": \"2m\", \"raw\": 250}}");
    uint64_t v;
    assert_int_equal(
        bus_config_get_duration_ms(bus_config_root(cfg), "gc.grace", &v, err, sizeof err), 0);
    assert_true(v == 120000);
    assert_int_equal(
        bus_config_get_duration_ms(bus_config_root(cfg), "gc.raw", &v, err, sizeof err), 0);
    assert_true(v == 250);
    bus_config_destroy(&cfg);
}

/* Rule: durations reject a missing or unknown unit, signs, fractions and overflow. */
static void test_duration_rejects_garbage_and_overflow(void **state)
{
    (void)state;
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"30", "missing unit"},
        {"30sec", "unknown unit \"sec\""},
        {"5d", "unknown unit \"d\""},
        {"-1s", "must not be negative"},
        {"", "empty"},
        {"1.5s", "fractions are not supported"},
        {"s", "expected a number"},
        {"1m 30s", "expected a number"},
        {"18446744073709551615h", "overflows 64 bits"},
        {"99999999999999999999ms", "overflows 64 bits"},
        {"18446744073709551615ms1ms", "overflows 64 bits"},
    };
    char err[ERRLEN];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 42;
        assert_int_equal(bus_config_parse_duration_ms(bad[i].text, &v, err, sizeof err),
                         BUS_CONFIG_EINVALID);
        assert_err_contains(err, bad[i].needle);
        assert_int_equal(v, 42);
    }
    bus_config_t *cfg = s_load("{\"gc\": {\"grace\": \"30\"}}");
    uint64_t v;
    assert_int_equal(
        bus_config_get_duration_ms(bus_config_root(cfg), "gc.grace", &v, err, sizeof err),
        BUS_CONFIG_EINVALID);
    assert_string_equal(err, "gc.grace: bad duration \"30\": missing unit (use ms, s, m, h)");
    bus_config_destroy(&cfg);
}

/* Rule: an enum error lists the allowed values (and suggests a near one). */
static void test_enum_error_lists_allowed_values(void **state)
{
    (void)state;
    static const char *const kinds[] = {"gpu", "host", "nvme", "remote", NULL};
    bus_config_t *cfg = s_load("{\"tiers\": [{\"kind\": \"ssd\"}, {\"kind\": \"nvm\"}, "
                               "{\"kind\": 3}]}");
    const bus_config_node_t *r = bus_config_root(cfg);
    char err[ERRLEN];
    int e = -1;
    assert_int_equal(bus_config_get_enum(r, "tiers[0].kind", kinds, &e, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "tiers[0].kind: expected one of \"gpu\", \"host\", \"nvme\", "
                             "\"remote\", got \"ssd\"");
    assert_int_equal(bus_config_get_enum(r, "tiers[1].kind", kinds, &e, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_err_contains(err, "(did you mean \"nvme\"?)");
    assert_int_equal(bus_config_get_enum(r, "tiers[2].kind", kinds, &e, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_err_contains(err, "tiers[2].kind: expected one of");
    assert_err_contains(err, "got 3");
    assert_int_equal(e, -1);
    assert_int_equal(bus_config_opt_enum(r, "tiers[0].policy", kinds, 1, &e, err, sizeof err), 0);
    assert_int_equal(e, 1);
    bus_config_destroy(&cfg);
}

/* Rule: arrays give their length and elements; a bound on the length is enforced. */
static void test_array_length_elements_and_bound(void **state)
{
    (void)state;
    bus_config_t *cfg = s_load("{\"etcd\": {\"endpoints\": [\"a\", \"b\", \"c\"]}, \"x\": 1}");
    const bus_config_node_t *r = bus_config_root(cfg);
    char err[ERRLEN], s[8];
    bus_config_node_t arr, el;
    size_t n = 0;
    assert_int_equal(bus_config_get_array(r, "etcd.endpoints", 8, &arr, &n, err, sizeof err), 0);
    assert_int_equal(n, 3);
    assert_string_equal(bus_config_node_path(&arr), "etcd.endpoints");
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(bus_config_array_elem(&arr, i, &el, err, sizeof err), 0);
        assert_int_equal(bus_config_get_string(&el, "", s, sizeof s, err, sizeof err), 0);
        assert_int_equal(s[0], 'a' + (int)i);
    }
    assert_int_equal(bus_config_array_elem(&arr, 3, &el, err, sizeof err), BUS_CONFIG_EMISSING);
    assert_string_equal(err, "etcd.endpoints[3]: missing (array has 3 elements)");
    assert_int_equal(bus_config_get_array(r, "etcd.endpoints", 2, &arr, &n, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "etcd.endpoints: too many elements (3, max 2)");
    assert_int_equal(bus_config_get_array(r, "x", 2, &arr, &n, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "x: expected an array, got 1");
    /* An element's own error carries the element path. */
    uint64_t u;
    assert_int_equal(bus_config_get_array(r, "etcd.endpoints", 8, &arr, &n, err, sizeof err), 0);
    assert_int_equal(bus_config_array_elem(&arr, 2, &arr, err, sizeof err), 0); /* reuse cursor */
    assert_int_equal(bus_config_get_positive(&arr, "", &u, err, sizeof err), BUS_CONFIG_EINVALID);
    assert_string_equal(err, "etcd.endpoints[2]: expected a positive integer, got \"c\"");
    bus_config_destroy(&cfg);
}

/* Rule: objects iterate in file order, with child paths (odd keys quoted). */
static void test_object_iteration_in_file_order(void **state)
{
    (void)state;
    bus_config_t *cfg = s_load("{\"chains\": {\"short\": 1, \"long\": 2, \"a.b\": 3}}");
    char err[ERRLEN];
    bus_config_node_t obj, child;
    assert_int_equal(
        bus_config_get_object(bus_config_root(cfg), "chains", 8, &obj, err, sizeof err), 0);
    static const char *const keys[] = {"short", "long", "a.b"};
    static const char *const paths[] = {"chains.short", "chains.long", "chains[\"a.b\"]"};
    void *it = NULL;
    const char *key;
    size_t n = 0;
    while (bus_config_object_next(&obj, &it, &key, &child)) {
        assert_true(n < 3);
        assert_string_equal(key, keys[n]);
        assert_string_equal(bus_config_node_path(&child), paths[n]);
        uint64_t u;
        assert_int_equal(bus_config_get_positive(&child, "", &u, err, sizeof err), 0);
        assert_int_equal(u, n + 1);
        n++;
    }
    assert_int_equal(n, 3);
    assert_int_equal(
        bus_config_get_object(bus_config_root(cfg), "chains", 2, &obj, err, sizeof err),
        BUS_CONFIG_EINVALID);
    assert_string_equal(err, "chains: too many keys (3, max 2)");
    bus_config_destroy(&cfg);
}

/* Rule: optional getters give the default for an absent key, and errors for bad values. */
static void test_optional_getters_default_only_when_absent(void **state)
{
    (void)state;
    bus_config_t *cfg = s_load("{\"gc\": {\"rounds\": \"many\", \"on\": null}}");
    const bus_config_node_t *r = bus_config_root(cfg);
    char err[ERRLEN], s[16];
    uint64_t u;
    int64_t i;
    double d;
    bool b;
    assert_int_equal(bus_config_opt_u64(r, "gc.batch", 1, 100, 32, &u, err, sizeof err), 0);
    assert_int_equal(u, 32);
    assert_int_equal(bus_config_opt_i64(r, "missing.deep.key", -5, 5, -3, &i, err, sizeof err), 0);
    assert_int_equal(i, -3);
    assert_int_equal(bus_config_opt_double(r, "gc.ratio", 0, 1, 0.5, &d, err, sizeof err), 0);
    assert_true(d == 0.5);
    assert_int_equal(bus_config_opt_string(r, "gc.name", "gc0", s, sizeof s, err, sizeof err), 0);
    assert_string_equal(s, "gc0");
    assert_int_equal(bus_config_opt_size(r, "gc.buf", 4096, &u, err, sizeof err), 0);
    assert_int_equal(u, 4096);
    assert_int_equal(bus_config_opt_duration_ms(r, "gc.tick", 100, &u, err, sizeof err), 0);
    assert_int_equal(u, 100);
    assert_int_equal(bus_config_opt_positive(r, "gc.rounds", 3, &u, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "gc.rounds: expected a positive integer, got \"many\"");
    assert_int_equal(bus_config_opt_bool(r, "gc.on", true, &b, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "gc.on: expected true or false, got null");
    assert_int_equal(bus_config_opt_bool(r, "gc.off", true, &b, err, sizeof err), 0);
    assert_true(b);
    assert_true(bus_config_has(r, "gc.on"));
    assert_false(bus_config_has(r, "gc.off"));
    assert_false(bus_config_has(r, "gc.rounds.x"));
    bus_config_destroy(&cfg);
}

/* Rule: an unknown key is rejected with its path and a suggestion when one is close. */
static void test_unknown_key_rejected_with_suggestion(void **state)
{
    (void)state;
    static const char *const allowed[] = {"kind", "capacity", "slot_size", "policy", NULL};
    bus_config_t *cfg = s_load("{\"tiers\": [{\"kind\": \"host\", \"capacty\": 4}, "
                               "{\"kind\": \"nvme\", \"capacity\": 4, \"polcy\": \"lru\"}]}");
    char err[ERRLEN];
    assert_int_equal(
        bus_config_check_keys(bus_config_root(cfg), "tiers[0]", allowed, err, sizeof err),
        BUS_CONFIG_EINVALID);
    assert_string_equal(err, "tiers[0].capacty: unknown key (did you mean \"capacity\"?)");
    assert_int_equal(
        bus_config_check_keys(bus_config_root(cfg), "tiers[1]", allowed, err, sizeof err),
        BUS_CONFIG_EINVALID);
    assert_string_equal(err, "tiers[1].polcy: unknown key (did you mean \"policy\"?)");
    bus_config_destroy(&cfg);
}

/* Rule: an unknown key with nothing close lists the allowed keys instead. */
static void test_unknown_key_without_near_match_lists_allowed(void **state)
{
    (void)state;
    static const char *const allowed[] = {"cluster", "etcd", "tiers", NULL};
    bus_config_t *cfg = s_load("{\"cluster\": \"c\", \"zz\": 1}");
    char err[ERRLEN];
    assert_int_equal(bus_config_check_keys(bus_config_root(cfg), "", allowed, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "zz: unknown key (allowed: cluster, etcd, tiers)");
    static const char *const all[] = {"cluster", "zz", NULL};
    assert_int_equal(bus_config_check_keys(bus_config_root(cfg), "", all, err, sizeof err), 0);
    bus_config_destroy(&cfg);
}

/* Rule: a missing key whose near miss is in the file says so. */
static void test_missing_key_points_at_near_miss(void **state)
{
    (void)state;
    bus_config_t *cfg = s_load("{\"tiers\": [{\"capacty\": 4}]}");
    char err[ERRLEN];
    uint64_t u;
    assert_int_equal(
        bus_config_get_positive(bus_config_root(cfg), "tiers[0].capacity", &u, err, sizeof err),
        BUS_CONFIG_EMISSING);
    assert_string_equal(err,
                        "tiers[0].capacity: missing required key (found \"capacty\": a typo?)");
    bus_config_destroy(&cfg);
}

/* Rule: a JSON syntax error names the file, line and column. */
static void test_syntax_error_names_file_and_line(void **state)
{
    (void)state;
    const char *text = "{\n  \"a\": 1,\n  \"b\": [1, 2,,]\n}\n";
    char path[PATH_MAX + 32], err[ERRLEN], want[PATH_MAX + 160];
    s_write_file("syntax.json", text, strlen(text), path, sizeof path);
    bus_config_t *cfg = bus_config_load_file(path, 0, err, sizeof err);
    assert_null(cfg);
    snprintf(want, sizeof want, "%s:3:", path);
    assert_err_contains(err, want);
    assert_err_contains(err, "invalid JSON");
    /* Strings report the name given for them. */
    cfg = bus_config_load_string("<defaults>", "{\"a\": }", err, sizeof err);
    assert_null(cfg);
    assert_err_contains(err, "<defaults>:1:");
}

/* Rule: duplicate keys are a syntax error (one of them would be silently lost). */
static void test_duplicate_key_is_rejected(void **state)
{
    (void)state;
    const char *text = "{\"a\": 1,\n \"a\": 2}";
    char path[PATH_MAX + 32], err[ERRLEN];
    s_write_file("dup.json", text, strlen(text), path, sizeof path);
    assert_null(bus_config_load_file(path, 0, err, sizeof err));
    assert_err_contains(err, "duplicate");
    assert_err_contains(err, ":2:");
}

/* Rule: the top level of a config is an object. */
static void test_top_level_must_be_object(void **state)
{
    (void)state;
    char path[PATH_MAX + 32], err[ERRLEN];
    s_write_file("top.json", "[1, 2]", 6, path, sizeof path);
    assert_null(bus_config_load_file(path, 0, err, sizeof err));
    assert_err_contains(err, path);
    assert_err_contains(err, "the top level must be a JSON object, got an array");
}

/* Rule: a file over the size limit is rejected before parsing; one at the limit loads. */
static void test_oversize_file_is_rejected(void **state)
{
    (void)state;
    char path[PATH_MAX + 32], err[ERRLEN], want[PATH_MAX + 160];
    /* Over the default 1 MiB limit: valid JSON padded with spaces. */
    size_t big = BUS_CONFIG_MAX_BYTES + 1;
    char *text = malloc(big);
    assert_non_null(text);
    memset(text, ' ', big);
    memcpy(text, "{}", 2);
    s_write_file("big.json", text, big, path, sizeof path);
    assert_null(bus_config_load_file(path, 0, err, sizeof err));
    snprintf(want, sizeof want, "%s: file too large (over 1048576 bytes)", path);
    assert_string_equal(err, want);
    /* A caller's smaller limit; a larger one is capped at the default. */
    assert_null(bus_config_load_file(path, 64, err, sizeof err));
    assert_err_contains(err, "file too large (over 64 bytes)");
    assert_null(bus_config_load_file(path, SIZE_MAX, err, sizeof err));
    assert_err_contains(err, "file too large (over 1048576 bytes)");
    /* Strings have the same bound. */
    text[big - 1] = '\0';
    bus_config_t *cfg = bus_config_load_string("s", text, err, sizeof err);
    assert_non_null(cfg); /* exactly 1 MiB of text */
    bus_config_destroy(&cfg);
    free(text);
    text = malloc(big + 1);
    assert_non_null(text);
    memset(text, ' ', big);
    memcpy(text, "{}", 2);
    text[big] = '\0';
    assert_null(bus_config_load_string("s", text, err, sizeof err));
    assert_err_contains(err, "too large");
    free(text);
    /* Exactly at a limit loads. */
    s_write_file("limit.json", "{\"a\": 1}", 8, path, sizeof path);
    cfg = bus_config_load_file(path, 8, err, sizeof err);
    assert_non_null(cfg);
    bus_config_destroy(&cfg);
}

/* Rule: a missing file is an error naming the file and the reason. */
static void test_missing_file_names_file(void **state)
{
    (void)state;
    char path[PATH_MAX + 32], err[ERRLEN], want[PATH_MAX + 160];
    snprintf(path, sizeof path, "%s/does-not-exist.json", s_tmpdir);
    assert_null(bus_config_load_file(path, 0, err, sizeof err));
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
    assert_string_equal(err, want);
    /* A directory is not a config file either. */
    assert_null(bus_config_load_file(s_tmpdir, 0, err, sizeof err));
    assert_err_contains(err, s_tmpdir);
    assert_err_contains(err, "cannot read");
}

/* Rule: embedded defaults fill what the file leaves out; the file wins. */
static void test_defaults_fill_missing_keys(void **state)
{
    (void)state;
    bus_config_t *defaults = s_load("{\"gc\": {\"grace\": \"30s\", \"batch\": 64}, "
                                    "\"events\": {\"endpoint\": \"tcp://*:5601\"}, "
                                    "\"tiers\": [{\"kind\": \"host\"}]}");
    bus_config_t *cfg = s_load("{\"gc\": {\"batch\": 8}, \"tiers\": []}");
    char err[ERRLEN], s[64];
    uint64_t u;
    size_t n = 9;
    bus_config_node_t arr;
    assert_int_equal(bus_config_merge_defaults(cfg, defaults, err, sizeof err), 0);
    const bus_config_node_t *r = bus_config_root(cfg);
    assert_int_equal(bus_config_get_duration_ms(r, "gc.grace", &u, err, sizeof err), 0);
    assert_int_equal(u, 30000);
    assert_int_equal(bus_config_get_positive(r, "gc.batch", &u, err, sizeof err), 0);
    assert_int_equal(u, 8);
    assert_int_equal(bus_config_get_string(r, "events.endpoint", s, sizeof s, err, sizeof err), 0);
    assert_string_equal(s, "tcp://*:5601");
    assert_int_equal(bus_config_get_array(r, "tiers", 4, &arr, &n, err, sizeof err), 0);
    assert_int_equal(n, 0); /* arrays are not merged */
    bus_config_destroy(&defaults);
    bus_config_destroy(&cfg);
}

/* Rule: a file value whose type contradicts a default object is rejected by path. */
static void test_defaults_type_conflict_names_path(void **state)
{
    (void)state;
    bus_config_t *defaults = s_load("{\"gc\": {\"limits\": {\"batch\": 64}}}");
    bus_config_t *cfg = s_load("{\"gc\": {\"limits\": \"none\"}}");
    char err[ERRLEN];
    assert_int_equal(bus_config_merge_defaults(cfg, defaults, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "gc.limits: expected an object, got \"none\"");
    bus_config_destroy(&defaults);
    bus_config_destroy(&cfg);
}

/* Rule: a cursor node and the root with the full path fail with the same message. */
static void test_cursor_and_root_give_same_path(void **state)
{
    (void)state;
    bus_config_t *cfg = s_load("{\"tiers\": [{}, {\"capacity\": \"12x\"}]}");
    char err1[ERRLEN], err2[ERRLEN];
    bus_config_node_t tier;
    uint64_t u;
    assert_int_equal(
        bus_config_get_node(bus_config_root(cfg), "tiers[1]", &tier, err1, sizeof err1), 0);
    assert_int_equal(bus_config_get_positive(&tier, "capacity", &u, err1, sizeof err1),
                     BUS_CONFIG_EINVALID);
    assert_int_equal(
        bus_config_get_positive(bus_config_root(cfg), "tiers[1].capacity", &u, err2, sizeof err2),
        BUS_CONFIG_EINVALID);
    assert_string_equal(err1, err2);
    assert_int_equal(bus_config_get_positive(&tier, "size", &u, err1, sizeof err1),
                     BUS_CONFIG_EMISSING);
    assert_string_equal(err1, "tiers[1].size: missing required key");
    bus_config_destroy(&cfg);
}

/* Rule: a malformed path is an error value, never a crash. */
static void test_bad_path_is_an_error(void **state)
{
    (void)state;
    bus_config_t *cfg = s_load("{\"a\": [1]}");
    const bus_config_node_t *r = bus_config_root(cfg);
    char err[ERRLEN];
    uint64_t u;
    static const char *const bad[] = {
        "a[", "a[x]", "a[0", ".a", "a..b", "a]", "a[0]b", "a[99999999999999999999999]", NULL};
    for (size_t i = 0; bad[i]; i++) {
        assert_int_equal(bus_config_get_u64(r, bad[i], 0, 10, &u, err, sizeof err),
                         BUS_CONFIG_EINVALID);
        assert_err_contains(err, "bad config path");
    }
    assert_int_equal(bus_config_get_u64(r, "a[0]", 0, 10, &u, err, sizeof err), 0);
    assert_int_equal(u, 1);
    /* Checked even where the key is absent: an opt_ getter must not hide a typo. */
    assert_int_equal(bus_config_opt_u64(r, "gc..batch", 0, 10, 5, &u, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "(root): bad config path \"gc..batch\" (expected key.key[N])");
    assert_false(bus_config_has(r, "a[0"));
    bus_config_destroy(&cfg);
}

/* Rule: callers' own checks carry the full path too. */
static void test_error_helper_prefixes_full_path(void **state)
{
    (void)state;
    bus_config_t *cfg = s_load("{\"reclaimer\": {\"low\": 0.9, \"high\": 0.5}}");
    bus_config_node_t rec;
    char err[ERRLEN];
    assert_int_equal(
        bus_config_get_object(bus_config_root(cfg), "reclaimer", 8, &rec, err, sizeof err), 0);
    assert_int_equal(
        bus_config_error(&rec, "low", err, sizeof err, "must be below %s", "reclaimer.high"),
        BUS_CONFIG_EINVALID);
    assert_string_equal(err, "reclaimer.low: must be below reclaimer.high");
    assert_int_equal(bus_config_error(bus_config_root(cfg), "", err, sizeof err, "empty"),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "(root): empty");
    bus_config_destroy(&cfg);
}

/* Rule: file content echoed in a message is escaped and cut (no forged log lines). */
static void test_echoed_values_are_escaped_and_bounded(void **state)
{
    (void)state;
    char json[512];
    char longv[201];
    memset(longv, 'v', 200);
    longv[200] = '\0';
    snprintf(json, sizeof json, "{\"a\": \"line1\\nFAKE LOG\\u0007\", \"b\": \"%s\", \"k\\nx\": 1}",
             longv);
    bus_config_t *cfg = s_load(json);
    const bus_config_node_t *r = bus_config_root(cfg);
    char err[ERRLEN];
    uint64_t u;
    assert_int_equal(bus_config_get_positive(r, "a", &u, err, sizeof err), BUS_CONFIG_EINVALID);
    assert_null(strchr(err, '\n'));
    assert_err_contains(err, "line1\\x0aFAKE LOG\\x07");
    assert_int_equal(bus_config_get_positive(r, "b", &u, err, sizeof err), BUS_CONFIG_EINVALID);
    assert_err_contains(err, "...");
    assert_true(strlen(err) < 120);
    static const char *const allowed[] = {"a", "b", NULL};
    assert_int_equal(bus_config_check_keys(r, "", allowed, err, sizeof err), BUS_CONFIG_EINVALID);
    assert_string_equal(err, "[\"k\\x0ax\"]: unknown key (allowed: a, b)");
    /* A small error buffer truncates but stays terminated. */
    char small[12];
    assert_int_equal(bus_config_get_positive(r, "a", &u, small, sizeof small), BUS_CONFIG_EINVALID);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_int_equal(bus_config_get_positive(r, "a", &u, NULL, 0), BUS_CONFIG_EINVALID);
    bus_config_destroy(&cfg);
}

/* Rule: paths deeper than BUS_CONFIG_PATH_MAX are cut with "..." (bounded, no overflow). */
static void test_long_paths_are_bounded(void **state)
{
    (void)state;
    /* 60 nested objects with 8-byte keys: the path is ~540 bytes. */
    char json[4096], path[1024];
    size_t o = 0, p = 0;
    for (int i = 0; i < 60; i++) {
        o += (size_t)snprintf(json + o, sizeof json - o, "{\"key%04d\": ", i);
        p += (size_t)snprintf(path + p, sizeof path - p, "%skey%04d", i ? "." : "", i);
    }
    o += (size_t)snprintf(json + o, sizeof json - o, "\"x\"");
    for (int i = 0; i < 60; i++)
        o += (size_t)snprintf(json + o, sizeof json - o, "}");
    bus_config_t *cfg = s_load(json);
    char err[ERRLEN * 4];
    uint64_t u;
    assert_int_equal(bus_config_get_positive(bus_config_root(cfg), path, &u, err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_err_contains(err, "key0000.key0001");
    assert_err_contains(err, "...: expected a positive integer");
    assert_true(strlen(err) < BUS_CONFIG_PATH_MAX + 64);
    bus_config_destroy(&cfg);
}

/* Rule: endpoint values are validated for their use and errors name the key. */
static void test_endpoint_value_checked_for_use(void **state)
{
    (void)state;
    bus_config_t *cfg = s_load("{\"events\": {\"endpoint\": \"tcp://127.0.0.1:99999\", "
                               "\"bind\": \"tcp://*:5601\"}}");
    const bus_config_node_t *r = bus_config_root(cfg);
    char err[ERRLEN], ep[BUS_ENDPOINT_MAX], tiny[8];
    assert_int_equal(bus_config_get_endpoint(r, "events.endpoint", BUS_ENDPOINT_ANY, ep, sizeof ep,
                                             err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_string_equal(err, "events.endpoint: tcp://127.0.0.1:99999: port out of range 1..65535");
    assert_int_equal(bus_config_get_endpoint(r, "events.bind", BUS_ENDPOINT_BIND, ep, sizeof ep,
                                             err, sizeof err),
                     0);
    assert_int_equal(bus_config_get_endpoint(r, "events.bind", BUS_ENDPOINT_CONNECT, ep, sizeof ep,
                                             err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_err_contains(err, "events.bind: tcp://*:5601: a wildcard host can only be bound");
    assert_int_equal(bus_config_get_endpoint(r, "events.bind", BUS_ENDPOINT_BIND, tiny, sizeof tiny,
                                             err, sizeof err),
                     BUS_CONFIG_EINVALID);
    assert_err_contains(err, "events.bind: string too long");
    bus_config_destroy(&cfg);
}

/* Rule (STYLE.md): destroy nulls the pointer and is idempotent. */
static void test_destroy_is_idempotent(void **state)
{
    (void)state;
    bus_config_t *cfg = s_load("{}");
    bus_config_destroy(&cfg);
    assert_null(cfg);
    bus_config_destroy(&cfg);
    bus_config_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_file_reads_every_type),
        cmocka_unit_test(test_missing_required_key_names_full_path),
        cmocka_unit_test(test_missing_array_element_names_path_and_length),
        cmocka_unit_test(test_positive_integer_error_names_path_and_value),
        cmocka_unit_test(test_positive_integer_rejects_zero_negative_and_real),
        cmocka_unit_test(test_type_errors_name_exact_path),
        cmocka_unit_test(test_wrong_container_type_names_its_path),
        cmocka_unit_test(test_string_longer_than_max_is_rejected),
        cmocka_unit_test(test_integer_and_double_ranges_are_enforced),
        cmocka_unit_test(test_size_units_convert_to_bytes),
        cmocka_unit_test(test_size_rejects_garbage_negative_and_overflow),
        cmocka_unit_test(test_duration_units_convert_to_ms),
        cmocka_unit_test(test_duration_rejects_garbage_and_overflow),
        cmocka_unit_test(test_enum_error_lists_allowed_values),
        cmocka_unit_test(test_array_length_elements_and_bound),
        cmocka_unit_test(test_object_iteration_in_file_order),
        cmocka_unit_test(test_optional_getters_default_only_when_absent),
        cmocka_unit_test(test_unknown_key_rejected_with_suggestion),
        cmocka_unit_test(test_unknown_key_without_near_match_lists_allowed),
        cmocka_unit_test(test_missing_key_points_at_near_miss),
        cmocka_unit_test(test_syntax_error_names_file_and_line),
        cmocka_unit_test(test_duplicate_key_is_rejected),
        cmocka_unit_test(test_top_level_must_be_object),
        cmocka_unit_test(test_oversize_file_is_rejected),
        cmocka_unit_test(test_missing_file_names_file),
        cmocka_unit_test(test_defaults_fill_missing_keys),
        cmocka_unit_test(test_defaults_type_conflict_names_path),
        cmocka_unit_test(test_cursor_and_root_give_same_path),
        cmocka_unit_test(test_bad_path_is_an_error),
        cmocka_unit_test(test_error_helper_prefixes_full_path),
        cmocka_unit_test(test_echoed_values_are_escaped_and_bounded),
        cmocka_unit_test(test_long_paths_are_bounded),
        cmocka_unit_test(test_endpoint_value_checked_for_use),
        cmocka_unit_test(test_destroy_is_idempotent),
    };
    return cmocka_run_group_tests_name("bus_config", tests, s_group_setup, s_group_teardown);
}
