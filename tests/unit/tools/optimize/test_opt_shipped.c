/* test_opt_shipped.c — the shipped trace (traces/synthetic_trace.jsonl): its exact
 * LRU curve equals the figures of traces/README.md (read from the README itself: the
 * block-hit counts exactly, the one-decimal rates within their rounding), and the
 * lru policy replayed through the real slot engine equals the curve (issue 10 §4). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opt_lru.h"
#include "opt_replay.h"
#include "opt_trace.h"

static opt_trace_t *s_trace;
static opt_curve_t *s_curve;
static char s_src[512];

static int s_setup(void **state)
{
    (void)state;
    const char *src = getenv("KVT_SOURCE_DIR");
    snprintf(s_src, sizeof s_src, "%s", src ? src : ".");
    char path[600], err[512];
    snprintf(path, sizeof path, "%s/traces/synthetic_trace.jsonl", s_src);
    s_trace = opt_trace_load(path, NULL, err, sizeof err);
    if (!s_trace) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    s_curve = opt_curve_new(s_trace);
    return s_curve ? 0 : -1;
}

static int s_teardown(void **state)
{
    (void)state;
    opt_curve_destroy(&s_curve);
    opt_trace_destroy(&s_trace);
    return 0;
}

/* The README row that starts with LABEL: its cells after the first, as numbers
 * (thousands separators and % dropped); returns how many. */
static size_t s_readme_row(const char *label, double *out, size_t max)
{
    char path[600], line[1024];
    snprintf(path, sizeof path, "%s/traces/README.md", s_src);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    size_t n = 0;
    while (fgets(line, sizeof line, fp))
        if (strncmp(line, label, strlen(label)) == 0) {
            char *cell = strchr(line + 1, '|');
            while (cell && n < max) {
                char num[64];
                size_t k = 0;
                for (char *c = cell + 1; *c && *c != '|' && k < sizeof num - 1; c++)
                    if ((*c >= '0' && *c <= '9') || *c == '.')
                        num[k++] = *c;
                num[k] = '\0';
                if (k)
                    out[n++] = atof(num);
                cell = strchr(cell + 1, '|');
            }
            break;
        }
    fclose(fp);
    return n;
}

static void test_curve_equals_trace_readme(void **state)
{
    (void)state;
    assert_int_equal(opt_trace_requests(s_trace), 3993);
    assert_int_equal(opt_trace_refs(s_trace), 121877);
    assert_int_equal(opt_trace_distinct(s_trace), 43924);
    double caps[8], rates[8], hits[8];
    assert_int_equal(s_readme_row("| capacity (blocks)", caps, 8), 4); /* + "unbounded" */
    assert_int_equal(s_readme_row("| LRU prefix hit rate", rates, 8), 5);
    assert_int_equal(s_readme_row("| LRU block hits", hits, 8), 5);
    caps[4] = 1e12; /* unbounded */
    for (int i = 0; i < 5; i++) {
        uint64_t h = opt_curve_hits(s_curve, (uint64_t)caps[i]);
        assert_int_equal(h, (uint64_t)hits[i]);
        double pct = 100.0 * (double)h / 121877.0;
        /* the README's one-decimal rate rounds the two-decimal one (8.25 -> 8.3) */
        double two = (double)(long)(pct * 100 + 0.5) / 100;
        assert_true(rates[i] - 0.05 - 1e-9 <= two && two < rates[i] + 0.05 - 1e-9);
    }
}

static void test_lru_through_the_slot_engine_equals_the_curve(void **state)
{
    (void)state;
    static const uint64_t caps[] = {1, 100, 1000, 3000, 10000, 30000, 43924};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
        assert_int_equal(opt_replay_policy(s_trace, "lru", caps[i], NULL),
                         (int64_t)opt_curve_hits(s_curve, caps[i]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_curve_equals_trace_readme),
        cmocka_unit_test(test_lru_through_the_slot_engine_equals_the_curve),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
