/* test_metrics_page.c — the status page and the optimizer's record (issue 10 §3):
 * a valid record is read, every malformed one refused with the field named (and
 * never crashes: bounds on size and curve length); the page is self-contained
 * (no external asset), says "no optimizer figures yet" without a record, escapes
 * every string, and marks the current capacity on the curve. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "metrics_page.h"

static const char s_good[] = "{\"ts_ms\":1000,\"window_requests\":50,\"capacity_blocks\":100,"
                             "\"live_hit_rate\":0.5,\"lru_hit_rate\":0.4,\"belady_hit_rate\":0.6,"
                             "\"curve\":[[0,0],[100,0.4],[200,0.55]],\"future\":1}";

static void test_optimizer_record(void **state)
{
    (void)state;
    metrics_opt_t o;
    char why[160];
    assert_int_equal(metrics_opt_parse(s_good, strlen(s_good), &o, why, sizeof why), 0);
    assert_int_equal(o.capacity_blocks, 100);
    assert_int_equal(o.n_curve, 3);
    assert_int_equal(o.curve_cap[2], 200);
    assert_true(o.belady == 0.6);
    const struct {
        const char *json, *what;
    } bad[] = {
        {"[]", "not a JSON object"},
        {"{\"ts_ms\":", "not a JSON object"},
        {"{\"window_requests\":1}", "ts_ms"},
        {"{\"ts_ms\":-1}", "ts_ms"},
        {"{\"ts_ms\":1,\"window_requests\":1,\"capacity_blocks\":1,\"live_hit_rate\":1.5}",
         "live_hit_rate"},
        {"{\"ts_ms\":1,\"window_requests\":1,\"capacity_blocks\":1,\"live_hit_rate\":0.1,"
         "\"lru_hit_rate\":\"x\"}",
         "lru_hit_rate"},
        {"{\"ts_ms\":1,\"window_requests\":1,\"capacity_blocks\":1,\"live_hit_rate\":0.1,"
         "\"lru_hit_rate\":0.1,\"belady_hit_rate\":0.1,\"curve\":[[1,0.1],[2]]}",
         "curve[1]"},
        {"{\"ts_ms\":1,\"window_requests\":1,\"capacity_blocks\":1,\"live_hit_rate\":0.1,"
         "\"lru_hit_rate\":0.1,\"belady_hit_rate\":0.1,\"curve\":[[1,2]]}",
         "curve[0]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        assert_int_not_equal(
            metrics_opt_parse(bad[i].json, strlen(bad[i].json), &o, why, sizeof why), 0);
        if (!strstr(why, bad[i].what))
            print_message("%s -> %s\n", bad[i].json, why);
        assert_non_null(strstr(why, bad[i].what));
    }
    /* 257 points, and a record over 64 KiB */
    char *big = malloc(METRICS_OPT_MAX_BYTES + 100);
    int n = snprintf(big, 200,
                     "{\"ts_ms\":1,\"window_requests\":1,\"capacity_blocks\":1,"
                     "\"live_hit_rate\":0,\"lru_hit_rate\":0,\"belady_hit_rate\":0,"
                     "\"curve\":[");
    for (int i = 0; i < 257; i++)
        n += snprintf(big + n, 32, "%s[%d,0.5]", i ? "," : "", i);
    n += snprintf(big + n, 8, "]}");
    assert_int_not_equal(metrics_opt_parse(big, (size_t)n, &o, why, sizeof why), 0);
    assert_non_null(strstr(why, "256"));
    memset(big, ' ', METRICS_OPT_MAX_BYTES + 10);
    assert_int_not_equal(metrics_opt_parse(big, METRICS_OPT_MAX_BYTES + 10, &o, why, sizeof why),
                         0);
    free(big);
}

static void test_page_is_self_contained_and_escaped(void **state)
{
    (void)state;
    metrics_page_tier_t tiers[] = {
        {.name = "host0", .kind = "host", .up = true, .used = 5, .capacity = 10},
        {.name = "<b>x&y</b>", .kind = "\"nvme\"", .up = false, .used = 0, .capacity = 4},
        {.name = "r1", .kind = "remote", .up = true, .used = 1, .capacity = 8, .pool = "p<1>"}};
    metrics_page_point_t pts[] = {{.valid = false}, {.valid = true, .rate = 0.5}};
    metrics_page_t p = {.cluster = "c<1>",
                        .name = "coord'1",
                        .leader = true,
                        .epoch = 9,
                        .have_stats = true,
                        .lookups = 3,
                        .lookup_keys = 10,
                        .hits = 4,
                        .tiers = tiers,
                        .n_tiers = 3,
                        .points = pts,
                        .n_points = 2,
                        .sample_ms = 5000,
                        .now_ms = 2000};
    metrics_buf_t b;
    metrics_buf_init(&b, 0);
    metrics_page_render(&b, &p);
    const char *h = b.buf;
    assert_non_null(strstr(h, "no optimizer figures yet"));
    assert_non_null(strstr(h, "c&lt;1&gt;"));
    assert_non_null(strstr(h, "coord&#39;1"));
    assert_non_null(strstr(h, "&lt;b&gt;x&amp;y&lt;/b&gt;"));
    assert_non_null(strstr(h, "&quot;nvme&quot;"));
    assert_null(strstr(h, "<b>x"));
    assert_non_null(strstr(h, "5 / 10 slots (50.0%)"));
    assert_non_null(strstr(h, "40.0%")); /* 4 of 10 keys */
    assert_non_null(strstr(h, "DOWN"));
    /* a pool's member says which pool (escaped like every name) */
    assert_non_null(strstr(h, "remote, member of pool <span class=\"pool\">p&lt;1&gt;</span>"));
    assert_null(strstr(h, "host, member of pool"));
    /* no external asset: no script/link/img source, nothing fetched */
    assert_null(strstr(h, "src="));
    assert_null(strstr(h, "<link"));
    assert_null(strstr(h, "<script"));
    metrics_opt_t o;
    assert_int_equal(metrics_opt_parse(s_good, strlen(s_good), &o, NULL, 0), 0);
    p.opt = &o;
    metrics_buf_reset(&b);
    metrics_page_render(&b, &p);
    h = b.buf;
    assert_null(strstr(h, "no optimizer figures yet"));
    assert_non_null(strstr(h, "id=\"capacity\""));
    assert_non_null(strstr(h, "capacity 100"));
    assert_non_null(strstr(h, "live <b>50.0%</b>"));
    metrics_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optimizer_record),
        cmocka_unit_test(test_page_is_self_contained_and_escaped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
