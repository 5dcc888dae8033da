/* test_cli_trace.c — the replay's data rules (tools/kvtier/cli_trace.h): trace
 * parsing with errors naming the line, chained block keys (traces/README.md),
 * key-derived block bytes that catch any changed byte, hex keys. Unit tests of the
 * CLI's pure parts; the CLI against a real service is in the integration scripts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "cli_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

static char s_dir[] = "/tmp/kvt-cli-trace-XXXXXX";

static int s_setup(void **state)
{
    (void)state;
    return mkdtemp(s_dir) ? 0 : -1;
}

static int s_teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *s_write(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", s_dir, name);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
    return path;
}

/* traces/README.md: one object per line, hash_ids in prefix order; blank lines skipped. */
static void test_trace_load_reads_hash_ids_per_line(void **state)
{
    (void)state;
    const char *p = s_write("ok.jsonl", "{\"timestamp\": 1, \"hash_ids\": [1, 2, 3]}\n"
                                        "\n"
                                        "{\"timestamp\": 2, \"hash_ids\": []}\n"
                                        "{\"hash_ids\": [7]}");
    char err[256] = "";
    cli_trace_t *t = cli_trace_load(p, err, sizeof err);
    assert_non_null(t);
    assert_int_equal(cli_trace_requests(t), 3);
    assert_int_equal(cli_trace_max_blocks(t), 3);
    assert_int_equal(cli_trace_total_blocks(t), 4);
    size_t n = 0;
    const uint64_t *ids = cli_trace_ids(t, 0, &n);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[2], 3);
    cli_trace_ids(t, 1, &n);
    assert_int_equal(n, 0);
    ids = cli_trace_ids(t, 2, &n);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 7);
    assert_null(cli_trace_ids(t, 3, &n));
    cli_trace_destroy(&t);
    assert_null(t);
    cli_trace_destroy(&t); /* idempotent */
}

/* STYLE.md rule 5: bad file content is an error naming the line, never a crash. */
static void test_trace_load_rejects_bad_lines_with_their_number(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *expect;
    } cases[] = {
        {"{\"hash_ids\": [1]}\n{\"hash_ids\": [1, -2]}\n", ":2: hash_ids[1]"},
        {"{\"hash_ids\": [1]}\nnot json\n", ":2: invalid JSON"},
        {"{\"hash_ids\": \"x\"}\n", ":1: expected an object"},
        {"[1, 2]\n", ":1: expected an object"},
        {"{\"hash_ids\": [1.5]}\n", ":1: hash_ids[0]"},
        {"\n\n", "no requests"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = s_write("bad.jsonl", cases[i].text);
        char err[256] = "";
        cli_trace_t *t = cli_trace_load(p, err, sizeof err);
        assert_null(t);
        if (!strstr(err, cases[i].expect))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err, cases[i].expect);
    }
    char err[256] = "";
    assert_null(cli_trace_load("/nonexistent/trace.jsonl", err, sizeof err));
    assert_non_null(strstr(err, "cannot open"));
}

/* wave 2 "Block keys": key[i] = XXH3_128(key[i-1] || u64le id), key[-1] = 0, canonical bytes. */
static void test_chain_keys_follow_the_documented_formula(void **state)
{
    (void)state;
    const uint64_t ids[3] = {46, 47, 0x0102030405060708ull};
    kvt_key_t keys[3];
    cli_trace_chain_keys(ids, 3, keys);
    uint8_t buf[24] = {0};
    for (int i = 0; i < 3; i++) {
        for (int b = 0; b < 8; b++)
            buf[16 + b] = (uint8_t)(ids[i] >> (8 * b));
        XXH128_hash_t h = XXH3_128bits(buf, sizeof buf);
        /* canonical = big-endian high64 then low64 */
        uint8_t want[16];
        for (int b = 0; b < 8; b++) {
            want[b] = (uint8_t)(h.high64 >> (56 - 8 * b));
            want[8 + b] = (uint8_t)(h.low64 >> (56 - 8 * b));
        }
        assert_memory_equal(keys[i].b, want, 16);
        memcpy(buf, want, 16);
    }
}

/* traces/README.md: equal id prefixes give equal keys; a different parent changes the key. */
static void test_chain_keys_equal_prefixes_give_equal_keys(void **state)
{
    (void)state;
    const uint64_t a[4] = {1, 2, 3, 4};
    const uint64_t b[4] = {1, 2, 9, 4};
    kvt_key_t ka[4], kb[4];
    cli_trace_chain_keys(a, 4, ka);
    cli_trace_chain_keys(b, 4, kb);
    assert_memory_equal(ka, kb, 2 * sizeof(kvt_key_t));
    assert_memory_not_equal(&ka[2], &kb[2], sizeof(kvt_key_t));
    /* same id 4 at position 3, different prefix: different key */
    assert_memory_not_equal(&ka[3], &kb[3], sizeof(kvt_key_t));
}

/* issue 3 §4: block bytes derived from the key, so every load is verified byte-exact. */
static void test_block_bytes_detect_any_changed_byte(void **state)
{
    (void)state;
    const size_t lens[] = {1, 7, 8, 13, 4096, 65536 + 5};
    kvt_key_t k1 = {{1, 2, 3}}, k2 = {{1, 2, 4}};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        size_t len = lens[li];
        uint8_t *buf = malloc(len);
        assert_non_null(buf);
        cli_block_fill(&k1, buf, len);
        assert_true(cli_block_verify(&k1, buf, len));
        assert_false(len >= 8 && cli_block_verify(&k2, buf, len));
        size_t positions[3] = {0, len / 2, len - 1};
        for (int p = 0; p < 3; p++) {
            buf[positions[p]] ^= 0x10;
            assert_false(cli_block_verify(&k1, buf, len));
            buf[positions[p]] ^= 0x10;
        }
        assert_true(cli_block_verify(&k1, buf, len));
        free(buf);
    }
}

/* Different keys give different streams (a block from another key is not accepted). */
static void test_block_bytes_differ_between_keys(void **state)
{
    (void)state;
    kvt_key_t a = {{0}}, b = {{0}};
    b.b[15] = 1;
    uint8_t x[256], y[256];
    cli_block_fill(&a, x, sizeof x);
    cli_block_fill(&b, y, sizeof y);
    assert_memory_not_equal(x, y, sizeof x);
    assert_false(cli_block_verify(&a, y, sizeof y));
}

/* CLI keys are 32 hex digits, either case; anything else is INVALID_ARGUMENT. */
static void test_key_hex_round_trips_and_rejects_bad_text(void **state)
{
    (void)state;
    kvt_key_t k;
    assert_int_equal(cli_key_parse_hex("000102030405060708090A0b0c0d0e0F", &k), 0);
    for (int i = 0; i < 16; i++)
        assert_int_equal(k.b[i], i);
    char hex[33];
    cli_key_format_hex(&k, hex);
    assert_string_equal(hex, "000102030405060708090a0b0c0d0e0f");
    assert_int_equal(cli_key_parse_hex("000102030405060708090a0b0c0d0e0", &k),
                     -KVT_INVALID_ARGUMENT);
    assert_int_equal(cli_key_parse_hex("000102030405060708090a0b0c0d0e0f0", &k),
                     -KVT_INVALID_ARGUMENT);
    assert_int_equal(cli_key_parse_hex("g00102030405060708090a0b0c0d0e0f", &k),
                     -KVT_INVALID_ARGUMENT);
    assert_int_equal(cli_key_parse_hex(NULL, &k), -KVT_INVALID_ARGUMENT);
}

/* The shipped trace loads whole, with the totals traces/README.md states. */
static void test_shipped_trace_has_documented_totals(void **state)
{
    (void)state;
    const char *src = getenv("KVT_SOURCE_DIR");
    if (!src)
        skip();
    char path[512], err[256] = "";
    snprintf(path, sizeof path, "%s/traces/synthetic_trace.jsonl", src);
    cli_trace_t *t = cli_trace_load(path, err, sizeof err);
    if (!t)
        fail_msg("%s", err);
    assert_int_equal(cli_trace_requests(t), 3993);
    assert_int_equal(cli_trace_total_blocks(t), 121877);
    assert_int_equal(cli_trace_max_blocks(t), 374);
    cli_trace_destroy(&t);
}

/* Fuzzing (issue 12 §5, tests/fuzz/corpus/trace/regress_empty_requests): a trace
 * whose every request is empty has no id array; a request's ids must still be a
 * valid (empty) array, not NULL + 0 (undefined behaviour). */
static void test_trace_of_empty_requests_has_empty_ids(void **state)
{
    (void)state;
    const char *p = s_write("empty.jsonl", "{\"mth\": 3, \"hash_ids\":[]}\n");
    char err[512] = "";
    cli_trace_t *t = cli_trace_load(p, err, sizeof err);
    assert_non_null(t);
    assert_int_equal(cli_trace_requests(t), 1);
    size_t n = 7;
    assert_non_null(cli_trace_ids(t, 0, &n));
    assert_int_equal(n, 0);
    cli_trace_destroy(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_load_reads_hash_ids_per_line),
        cmocka_unit_test(test_trace_load_rejects_bad_lines_with_their_number),
        cmocka_unit_test(test_trace_of_empty_requests_has_empty_ids),
        cmocka_unit_test(test_chain_keys_follow_the_documented_formula),
        cmocka_unit_test(test_chain_keys_equal_prefixes_give_equal_keys),
        cmocka_unit_test(test_block_bytes_detect_any_changed_byte),
        cmocka_unit_test(test_block_bytes_differ_between_keys),
        cmocka_unit_test(test_key_hex_round_trips_and_rejects_bad_text),
        cmocka_unit_test(test_shipped_trace_has_documented_totals),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
