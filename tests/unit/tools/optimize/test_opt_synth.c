/* test_opt_synth.c — `kvtier trace synth` (tools/optimize/opt_synth.h): the same
 * seed gives the same bytes, another seed other bytes, the output is a trace the
 * optimizer reads, and every model knob changes what it should; bad bounds are
 * refused naming the flag (issue 10 §4). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opt_lru.h"
#include "opt_synth.h"
#include "opt_trace.h"

static char *s_gen(const opt_synth_config_t *c, size_t *len, uint64_t *refs)
{
    char *buf = NULL, err[256];
    FILE *fp = open_memstream(&buf, len);
    assert_non_null(fp);
    assert_int_equal(opt_synth_write(c, fp, refs, err, sizeof err), 0);
    fclose(fp);
    return buf;
}

static void test_same_seed_same_bytes(void **state)
{
    (void)state;
    opt_synth_config_t c;
    opt_synth_defaults(&c);
    c.requests = 3000;
    size_t l1, l2, l3;
    uint64_t r1, r2, r3;
    char *a = s_gen(&c, &l1, &r1), *b = s_gen(&c, &l2, &r2);
    assert_int_equal(l1, l2);
    assert_int_equal(r1, r2);
    assert_memory_equal(a, b, l1);
    c.seed = 2;
    char *d = s_gen(&c, &l3, &r3);
    assert_true(l3 != l1 || memcmp(a, d, l1) != 0);
    free(a);
    free(b);
    free(d);
}

/* The output reads back as a trace with the references the generator counted; with
 * nothing reused (no sharing, no continuation) nothing hits at any capacity; with
 * reuse something does; scans add blocks that are never reused. */
static void test_output_is_a_trace_and_the_knobs_act(void **state)
{
    (void)state;
    opt_synth_config_t c;
    opt_synth_defaults(&c);
    c.requests = 2000;
    static const char *path = "/tmp/kvt-opt-synth-test.jsonl";
    for (int variant = 0; variant < 3; variant++) {
        if (variant == 1) {
            c.share = 0;
            c.reuse = 0;
            c.scan_rate = 0;
        }
        if (variant == 2) {
            c.scan_rate = 1;
            c.scan_len = 10;
            c.scan_blocks = 7;
        }
        FILE *fp = fopen(path, "w");
        assert_non_null(fp);
        char err[512];
        uint64_t refs = 0;
        assert_int_equal(opt_synth_write(&c, fp, &refs, err, sizeof err), 0);
        fclose(fp);
        opt_trace_t *t = opt_trace_load(path, NULL, err, sizeof err);
        assert_non_null(t);
        assert_int_equal(opt_trace_requests(t), 2000);
        assert_int_equal(opt_trace_refs(t), refs);
        opt_curve_t *cv = opt_curve_new(t);
        uint64_t unbounded = opt_curve_hits(cv, UINT32_MAX);
        if (variant == 0)
            assert_true(unbounded > refs / 10);
        else if (variant == 1)
            assert_int_equal(unbounded, 0);
        else /* every request a scan of 7 fresh blocks: nothing reused */
            assert_true(refs == 2000 * 7 && unbounded == 0);
        for (size_t r = 0; r < opt_trace_requests(t); r++)
            assert_true(opt_trace_tokens(t, r) > 0);
        opt_curve_destroy(&cv);
        opt_trace_destroy(&t);
    }
    remove(path);
}

static void test_bad_config_is_refused_naming_the_flag(void **state)
{
    (void)state;
    opt_synth_config_t c;
    char err[256];
    opt_synth_defaults(&c);
    assert_int_equal(opt_synth_check(&c, err, sizeof err), 0);
    c.share = 1.5;
    assert_int_equal(opt_synth_check(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "--share"));
    opt_synth_defaults(&c);
    c.requests = 0;
    assert_int_equal(opt_synth_write(&c, stdout, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "--requests"));
    opt_synth_defaults(&c);
    c.max_blocks = 100000;
    assert_int_equal(opt_synth_check(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "--max-blocks"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_seed_same_bytes),
        cmocka_unit_test(test_output_is_a_trace_and_the_knobs_act),
        cmocka_unit_test(test_bad_config_is_refused_naming_the_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
