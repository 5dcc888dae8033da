/* test_metrics_expo.c — the Prometheus text writer (issue 10 §2): label values
 * escaped (\\ \" \n, other bytes made valid UTF-8), HELP/TYPE once per family,
 * histogram buckets cumulative ending with +Inf and _count equal to it, _sum; the
 * buffer's bound cuts at a line end; label sets are bounded with "other". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "metrics_expo.h"

static void test_label_values_are_escaped(void **state)
{
    (void)state;
    metrics_buf_t b;
    metrics_buf_init(&b, 0);
    metrics_label_t l[] = {{"instance_id", "a\"b\\c\nd\te\xff"}, {"tier", "host0"}};
    metrics_expo_u64(&b, "kvtier_x_total", l, 2, 18446744073709551615ull);
    assert_string_equal(b.buf, "kvtier_x_total{instance_id=\"a\\\"b\\\\c\\nd?e?\",tier=\"host0\"} "
                               "18446744073709551615\n");
    metrics_buf_reset(&b);
    metrics_expo_u64(&b, "kvtier_up", NULL, 0, 1);
    assert_string_equal(b.buf, "kvtier_up 1\n");
    metrics_buf_reset(&b);
    metrics_expo_family(&b, "kvtier_y", "gauge", "two\nlines \\ here");
    assert_string_equal(b.buf, "# HELP kvtier_y two\\nlines \\\\ here\n# TYPE kvtier_y gauge\n");
    metrics_buf_reset(&b);
    metrics_expo_double(&b, "kvtier_r", NULL, 0, 0.25);
    assert_string_equal(b.buf, "kvtier_r 0.25\n");
    metrics_buf_reset(&b);
    metrics_expo_double(&b, "kvtier_r", NULL, 0, 0.21);
    assert_string_equal(b.buf, "kvtier_r 0.21\n");
    metrics_buf_free(&b);
}

static void test_histogram_is_cumulative_with_inf_sum_count(void **state)
{
    (void)state;
    metrics_buf_t b;
    metrics_buf_init(&b, 0);
    const double bounds[] = {0.001, 0.01};
    const uint64_t buckets[] = {2, 3, 4}; /* per bucket; 4 above the last bound */
    metrics_label_t l[] = {{"call", "lookup"}};
    metrics_expo_histogram(&b, "kvtier_meta_request_duration_seconds", l, 1, bounds, buckets, 2,
                           1.5);
    assert_string_equal(
        b.buf, "kvtier_meta_request_duration_seconds_bucket{call=\"lookup\",le=\"0.001\"} 2\n"
               "kvtier_meta_request_duration_seconds_bucket{call=\"lookup\",le=\"0.01\"} 5\n"
               "kvtier_meta_request_duration_seconds_bucket{call=\"lookup\",le=\"+Inf\"} 9\n"
               "kvtier_meta_request_duration_seconds_sum{call=\"lookup\"} 1.5\n"
               "kvtier_meta_request_duration_seconds_count{call=\"lookup\"} 9\n");
    metrics_buf_free(&b);
}

static void test_buffer_bound_cuts_at_a_line_end(void **state)
{
    (void)state;
    metrics_buf_t b;
    metrics_buf_init(&b, 40);
    metrics_expo_u64(&b, "kvtier_a", NULL, 0, 1);  /* 11 bytes */
    metrics_expo_u64(&b, "kvtier_b", NULL, 0, 22); /* 12 */
    assert_false(b.overflow);
    metrics_expo_u64(&b, "kvtier_c_longer_name", NULL, 0, 333);
    assert_true(b.overflow);
    assert_string_equal(b.buf, "kvtier_a 1\nkvtier_b 22\n");
    metrics_buf_free(&b);
}

static void test_html_escaping(void **state)
{
    (void)state;
    metrics_buf_t b;
    metrics_buf_init(&b, 0);
    metrics_buf_html(&b, "<script>alert('x' & \"y\")</script>");
    assert_string_equal(b.buf,
                        "&lt;script&gt;alert(&#39;x&#39; &amp; &quot;y&quot;)&lt;/script&gt;");
    metrics_buf_free(&b);
}

/* Label sets are bounded: the first max values keep their index for good, the
 * rest are "other". */
static void test_labelset_is_bounded(void **state)
{
    (void)state;
    metrics_labelset_t s;
    metrics_labelset_init(&s, 2);
    assert_int_equal(metrics_labelset_index(&s, "a"), 0);
    assert_int_equal(metrics_labelset_index(&s, "b"), 1);
    assert_int_equal(metrics_labelset_index(&s, "c"), METRICS_LABEL_OTHER);
    assert_int_equal(metrics_labelset_index(&s, "a"), 0);
    assert_int_equal(metrics_labelset_index(&s, "b"), 1);
    metrics_labelset_init(&s, 1000);
    assert_int_equal(s.max, METRICS_LABELSET_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_label_values_are_escaped),
        cmocka_unit_test(test_histogram_is_cumulative_with_inf_sum_count),
        cmocka_unit_test(test_buffer_bound_cuts_at_a_line_end),
        cmocka_unit_test(test_html_escaping),
        cmocka_unit_test(test_labelset_is_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
