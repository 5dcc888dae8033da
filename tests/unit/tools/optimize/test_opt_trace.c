/* test_opt_trace.c — the optimizer's input (tools/optimize/opt_trace.h): Mooncake
 * traces and event recordings as `kvtier events` prints them (issue 10 §4 input),
 * chosen by sniffing or named; other event kinds and unknown fields are tolerated;
 * every malformed line is an error naming the file, the line and what was wrong
 * (STYLE.md rule 5); inputs over their bounds are refused (rule 7). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opt_trace.h"

static char s_dir[] = "/tmp/kvt-opt-trace-XXXXXX";

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

#define K1 "000102030405060708090a0b0c0d0e0f"
#define K2 "ffeeddccbbaa99887766554433221100"
#define K3 "00000000000000000000000000000001"

/* traces/README.md: hash_ids in prefix order; input_length is the prompt's tokens;
 * ids become dense in order of first use. */
static void test_mooncake_trace_is_read_with_dense_ids(void **state)
{
    (void)state;
    const char *p = s_write("t.jsonl", "{\"timestamp\": 0, \"input_length\": 1000, "
                                       "\"output_length\": 5, \"hash_ids\": [7, 9]}\n"
                                       "\n"
                                       "{\"hash_ids\": [9, 7, 3], \"extra\": {\"x\": 1}}\n");
    char err[512] = "";
    opt_trace_t *t = opt_trace_load(p, NULL, err, sizeof err);
    assert_non_null(t);
    assert_int_equal(opt_trace_format(t), OPT_FORMAT_MOONCAKE);
    assert_int_equal(opt_trace_requests(t), 2);
    assert_int_equal(opt_trace_refs(t), 5);
    assert_int_equal(opt_trace_distinct(t), 3);
    uint32_t n;
    const uint32_t *b = opt_trace_blocks(t, 1, &n);
    assert_int_equal(n, 3);
    assert_int_equal(b[0], 1);
    assert_int_equal(b[1], 0);
    assert_int_equal(b[2], 2);
    assert_int_equal(opt_trace_tokens(t, 0), 1000);
    assert_int_equal(opt_trace_tokens(t, 1), 3 * 512); /* no input_length */
    assert_int_equal(opt_trace_first_ref(t, 1), 2);
    assert_false(opt_trace_has_observed(t));
    const uint8_t *k = opt_trace_key(t, 0, NULL);
    assert_int_equal(k[0], 7); /* little-endian id */
    opt_trace_destroy(&t);
    assert_null(t);
    opt_trace_destroy(&t);
}

/* Issue 10 §4: a recording's "lookup" lines are the requests (keys in prefix order,
 * the service's hits); other kinds, other lookup modes and unknown fields are
 * skipped; instances keep their blocks apart. */
static void test_event_recording_lookups_are_the_requests(void **state)
{
    (void)state;
    const char *p = s_write(
        "e.jsonl",
        "{\"seq\":1,\"topic\":\"stored/a\",\"epoch\":1,\"ts_us\":5,\"instance\":\"a\","
        "\"kind\":\"stored\",\"tier\":1,\"bytes\":64,\"medium\":1,\"keys\":[\"" K1 "\"]}\n"
        "{\"seq\":2,\"topic\":\"lookup/a\",\"epoch\":1,\"ts_us\":6,\"instance\":\"a\","
        "\"kind\":\"lookup\",\"request\":\"r1\",\"mode\":0,\"hits\":1,\"head_hits\":0,"
        "\"tier_hits\":{\"2\":1},\"keys\":[\"" K1 "\",\"" K2 "\"],\"future\":[1,2]}\n"
        "{\"seq\":3,\"topic\":\"lookup/a\",\"epoch\":1,\"ts_us\":7,\"instance\":\"a\","
        "\"kind\":\"lookup\",\"request\":\"r2\",\"mode\":2,\"hits\":0,\"keys\":[\"" K3 "\"]}\n"
        "{\"seq\":4,\"kind\":\"lookup\",\"instance\":\"b\",\"mode\":0,\"hits\":2,"
        "\"keys\":[\"" K1 "\",\"" K2 "\"]}\n"
        "{\"seq\":5,\"kind\":\"leader\",\"node\":\"n\",\"leader_epoch\":2,\"keys\":[]}\n");
    char err[512] = "";
    opt_trace_t *t = opt_trace_load(p, NULL, err, sizeof err);
    assert_non_null(t);
    assert_int_equal(opt_trace_format(t), OPT_FORMAT_EVENTS);
    assert_int_equal(opt_trace_requests(t), 2);
    assert_int_equal(opt_trace_distinct(t), 4); /* (a,K1) (a,K2) (b,K1) (b,K2) */
    assert_int_equal(opt_trace_skipped_events(t), 2);
    assert_int_equal(opt_trace_skipped_modes(t), 1);
    assert_true(opt_trace_has_observed(t));
    uint32_t h, head;
    opt_trace_observed(t, 0, &h, &head);
    assert_int_equal(h, 1);
    assert_int_equal(head, 0);
    opt_trace_observed(t, 1, &h, &head);
    assert_int_equal(h, 2);
    assert_int_equal(head, 2); /* no head_hits: all on the head */
    uint32_t inst;
    const uint8_t *k = opt_trace_key(t, 1, &inst);
    assert_int_equal(k[0], 0xff);
    assert_int_equal(inst, 0);
    opt_trace_key(t, 2, &inst);
    assert_int_equal(inst, 1);
    opt_trace_destroy(&t);
    /* --instance: only that instance's lookups */
    opt_load_config_t cfg = {.instance = "b"};
    t = opt_trace_load(p, &cfg, err, sizeof err);
    assert_non_null(t);
    assert_int_equal(opt_trace_requests(t), 1);
    assert_int_equal(opt_trace_skipped_events(t), 3);
    opt_trace_destroy(&t);
}

/* Every malformed line is refused with "FILE:LINE: what". */
static void test_bad_lines_are_errors_naming_the_line(void **state)
{
    (void)state;
    static const struct {
        opt_format_t format;
        const char *text;
        const char *want;
    } cases[] = {
        {OPT_FORMAT_AUTO, "{\"hash_ids\": [1]}\n{\"hash_ids\": [1, -2]}\n",
         ":2: hash_ids[1]: expected a non-negative integer"},
        {OPT_FORMAT_AUTO, "\n{\"hash_ids\": [1]\n", ":2: invalid JSON"},
        {OPT_FORMAT_AUTO, "[1, 2]\n", ":1: expected a JSON object"},
        {OPT_FORMAT_AUTO, "{\"foo\": 1}\n", ":1: neither a trace line"},
        {OPT_FORMAT_MOONCAKE, "{\"kind\": \"lookup\"}\n", ":1: expected an object with a"},
        {OPT_FORMAT_AUTO, "{\"hash_ids\": [1], \"input_length\": \"x\"}\n",
         ":1: input_length: expected"},
        {OPT_FORMAT_AUTO, "{\"kind\":\"lookup\",\"hits\":0,\"keys\":[\"" K1 "\"]}\n{\"x\":1}\n",
         ":2: expected an event object with a \"kind\" string"},
        {OPT_FORMAT_EVENTS, "{\"kind\":\"lookup\",\"hits\":0,\"keys\":[\"abc\"]}\n",
         ":1: keys[0]: expected a string of 32 hex digits"},
        {OPT_FORMAT_EVENTS, "{\"kind\":\"lookup\",\"hits\":2,\"keys\":[\"" K1 "\"]}\n",
         ":1: lookup: \"hits\": expected an integer from 0 to 1"},
        {OPT_FORMAT_EVENTS, "{\"kind\":\"lookup\",\"hits\":1}\n",
         ":1: lookup: expected a \"keys\""},
        {OPT_FORMAT_EVENTS,
         "{\"kind\":\"lookup\",\"hits\":1,\"head_hits\":2,\"keys\":[\"" K1 "\"]}\n",
         ":1: lookup: \"head_hits\""},
        {OPT_FORMAT_EVENTS, "{\"kind\":\"stored\",\"keys\":[]}\n", "no prefix lookup events"},
        {OPT_FORMAT_AUTO, "\n\n", "no requests in the trace"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = s_write("bad.jsonl", cases[i].text);
        char err[512] = "";
        opt_load_config_t cfg = {.format = cases[i].format};
        opt_trace_t *t = opt_trace_load(p, &cfg, err, sizeof err);
        if (t || !strstr(err, cases[i].want) || strncmp(err, p, strlen(p)) != 0)
            fail_msg("case %zu: got \"%s\", want \"%s\"", i, err, cases[i].want);
    }
    char err[512] = "";
    assert_null(opt_trace_load("/nonexistent/x.jsonl", NULL, err, sizeof err));
    assert_non_null(strstr(err, "cannot open"));
}

/* STYLE.md rule 7: a trace over its bound is refused with the bound and the flag. */
static void test_inputs_over_their_bounds_are_refused(void **state)
{
    (void)state;
    const char *p = s_write("big.jsonl", "{\"hash_ids\": [1, 2, 3]}\n{\"hash_ids\": [4, 5]}\n");
    char err[512] = "";
    opt_load_config_t cfg = {.max_refs = 4};
    assert_null(opt_trace_load(p, &cfg, err, sizeof err));
    assert_non_null(strstr(err, ":2: more than 4 block references"));
    assert_non_null(strstr(err, "--max-refs"));
    cfg.max_refs = 5;
    opt_trace_t *t = opt_trace_load(p, &cfg, err, sizeof err);
    assert_non_null(t);
    opt_trace_destroy(&t);
    /* a line longer than OPT_TRACE_MAX_LINE */
    size_t len = OPT_TRACE_MAX_LINE + 16;
    char *line = malloc(len + 1);
    assert_non_null(line);
    memset(line, ' ', len);
    memcpy(line, "{\"hash_ids\": [1]}", 17);
    line[len - 1] = '\n';
    line[len] = '\0';
    p = s_write("long.jsonl", line);
    free(line);
    assert_null(opt_trace_load(p, NULL, err, sizeof err));
    assert_non_null(strstr(err, ":1: line longer than"));
}

/* Fuzzing (issue 12 §5, tests/fuzz/corpus/trace/regress_empty_requests): a trace
 * whose every request is empty has no reference array; reading a request's blocks
 * must still give a valid (empty) array, not NULL + 0 (undefined behaviour). */
static void test_trace_of_empty_requests_has_empty_blocks(void **state)
{
    (void)state;
    const char *p = s_write("empty.jsonl", "{\"mth\": 3, \"hash_ids\":[]}\n");
    char err[512] = "";
    opt_trace_t *t = opt_trace_load(p, NULL, err, sizeof err);
    assert_non_null(t);
    assert_int_equal(opt_trace_requests(t), 1);
    uint32_t n = 7;
    const uint32_t *b = opt_trace_blocks(t, 0, &n);
    assert_int_equal(n, 0);
    assert_non_null(b);
    opt_trace_destroy(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mooncake_trace_is_read_with_dense_ids),
        cmocka_unit_test(test_event_recording_lookups_are_the_requests),
        cmocka_unit_test(test_bad_lines_are_errors_naming_the_line),
        cmocka_unit_test(test_inputs_over_their_bounds_are_refused),
        cmocka_unit_test(test_trace_of_empty_requests_has_empty_blocks),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
