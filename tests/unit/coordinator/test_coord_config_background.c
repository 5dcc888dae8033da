/* test_coord_config_background.c — the deployment file's keys for the background
 * actors (issue 4 §4, §5, §6 "invalid watermark configs rejected at start with the
 * key path"): tiers[i].high_watermark / low_watermark, gc.*, reclaimer.*, and the
 * per-instance "quotas" (issue 4 §4), and events.* (the leader's publisher). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>

#include <cmocka.h>

#include "config_testkit.h"
#include "coord_config.h"

static char g_err[1024];
static coord_config_t g_cfg;

#define TIER(extra)                                                                                \
    "{\"tiers\": [{\"name\": \"h\", \"kind\": \"host\", \"endpoint\": \"tcp://127.0.0.1:7710\", "  \
    "\"capacity\": 100" extra "}]}"

static void s_reject(const char *text, const char *path, const char *what)
{
    int rc = coord_config_load_string("t.json", ckit_full(text), &g_cfg, g_err, sizeof g_err);
    if (rc == 0)
        print_message("accepted: %s\n", text);
    assert_int_equal(rc, -EINVAL);
    char want[300];
    snprintf(want, sizeof want, "t.json: %s:", path);
    if (strncmp(g_err, want, strlen(want)) != 0 || !strstr(g_err, what))
        print_message("message \"%s\" lacks \"%s\" / \"%s\"\n", g_err, want, what);
    assert_true(strncmp(g_err, want, strlen(want)) == 0);
    assert_non_null(strstr(g_err, what));
}

static int s_load(const char *text)
{
    int rc = coord_config_load_string("t.json", ckit_full(text), &g_cfg, g_err, sizeof g_err);
    if (rc != 0)
        print_message("rejected: %s\n", g_err);
    return rc;
}

/* DESIGN §10: defaults are embedded (watermarks 0.97 / 0.94, gc and reclaimer). */
static void test_background_defaults_are_embedded(void **state)
{
    (void)state;
    assert_int_equal(s_load("{}"), 0);
    assert_true(g_cfg.tiers[0].high_watermark == 0.97);
    assert_true(g_cfg.tiers[0].low_watermark == 0.94);
    assert_int_equal(g_cfg.gc_interval_ms, 1000);
    assert_int_equal(g_cfg.gc_page, 64);
    assert_int_equal(g_cfg.gc_probe_timeout_ms, 2000);
    assert_int_equal(g_cfg.reclaim_interval_ms, 100);
    assert_int_equal(g_cfg.reclaim_delete_delay_ms, 1000);
    assert_int_equal(g_cfg.reclaim_max_pending, 4096);
    assert_true(g_cfg.reclaim_quota_low == 0.9);
    assert_int_equal(g_cfg.n_quotas, 0);
}

/* issue 4 §4: watermarks as fractions or percents. */
static void test_watermarks_as_fractions_or_percents(void **state)
{
    (void)state;
    assert_int_equal(s_load(TIER(", \"high_watermark\": 0.75, \"low_watermark\": 0.5")), 0);
    assert_true(g_cfg.tiers[0].high_watermark == 0.75);
    assert_true(g_cfg.tiers[0].low_watermark == 0.5);
    assert_int_equal(s_load(TIER(", \"high_watermark\": \"100%\", \"low_watermark\": \"62.5%\"")),
                     0);
    assert_true(g_cfg.tiers[0].high_watermark == 1.0);
    assert_true(g_cfg.tiers[0].low_watermark == 0.625);
    /* a high alone gets a low 0.03 below it; a tiny one, half of it */
    assert_int_equal(s_load(TIER(", \"high_watermark\": 0.5")), 0);
    assert_true(g_cfg.tiers[0].low_watermark > 0.469 && g_cfg.tiers[0].low_watermark < 0.471);
    assert_int_equal(s_load(TIER(", \"high_watermark\": 0.04")), 0);
    assert_true(g_cfg.tiers[0].low_watermark == 0.02);
}

/* issue 4 §6: invalid watermark configs rejected with the key path (0 < low < high <= 1). */
static void test_bad_watermarks_rejected_with_key_path(void **state)
{
    (void)state;
    s_reject(TIER(", \"high_watermark\": 1.5"), "tiers[0].high_watermark", "");
    s_reject(TIER(", \"high_watermark\": 0"), "tiers[0].high_watermark", "above 0");
    s_reject(TIER(", \"low_watermark\": \"0%\""), "tiers[0].low_watermark", "percent");
    s_reject(TIER(", \"low_watermark\": \"80\""), "tiers[0].low_watermark", "percent");
    s_reject(TIER(", \"high_watermark\": \"120%\""), "tiers[0].high_watermark", "percent");
    s_reject(TIER(", \"high_watermark\": 0.6, \"low_watermark\": 0.6"), "tiers[0].low_watermark",
             "below high_watermark");
    s_reject(TIER(", \"high_watermark\": 0.6, \"low_watermark\": 0.7"), "tiers[0].low_watermark",
             "below high_watermark");
    s_reject(TIER(", \"high_watermark\": true"), "tiers[0].high_watermark", "");
}

/* DESIGN §10: unknown keys and bad values of gc / reclaimer name their path. */
static void test_gc_and_reclaimer_keys_checked(void **state)
{
    (void)state;
    assert_int_equal(s_load("{\"gc\": {\"interval\": \"250ms\", \"page\": 8, \"probe_timeout\": "
                            "\"1s\"}, \"reclaimer\": {\"interval\": \"50ms\", \"delete_delay\": "
                            "\"2s\", \"max_pending\": 10}}"),
                     0);
    assert_int_equal(g_cfg.gc_interval_ms, 250);
    assert_int_equal(g_cfg.gc_page, 8);
    assert_int_equal(g_cfg.gc_probe_timeout_ms, 1000);
    assert_int_equal(g_cfg.reclaim_interval_ms, 50);
    assert_int_equal(g_cfg.reclaim_delete_delay_ms, 2000);
    assert_int_equal(g_cfg.reclaim_max_pending, 10);
    s_reject("{\"gc\": {\"page\": 65}}", "gc.page", "");
    s_reject("{\"gc\": {\"page\": 0}}", "gc.page", "");
    s_reject("{\"gc\": {\"rounds\": 3}}", "gc.rounds", "");
    s_reject("{\"gc\": {\"interval\": \"soon\"}}", "gc.interval", "");
    s_reject("{\"reclaimer\": {\"max_pending\": 0}}", "reclaimer.max_pending", "");
    s_reject("{\"reclaimer\": {\"delete_delay\": 0}}", "reclaimer.delete_delay", "at least");
    s_reject("{\"reclaimer\": {\"demote\": true}}", "reclaimer.demote", "");
}

/* Issue 4 §4: "quotas" entries name an instance or "*", max_blocks and / or
 * max_bytes (a size string); reclaimer.quota_low is a fraction or a percent. */
static void test_quotas_are_read_with_sizes_and_default(void **state)
{
    (void)state;
    assert_int_equal(s_load("{\"quotas\": [{\"instance\": \"llama-8b\", \"max_blocks\": 1000},"
                            " {\"instance\": \"*\", \"max_bytes\": \"64GiB\"},"
                            " {\"instance\": \"qwen/7b:a\", \"max_blocks\": 5, \"max_bytes\": "
                            "4096}], \"reclaimer\": {\"quota_low\": \"75%\"}}"),
                     0);
    assert_int_equal(g_cfg.n_quotas, 3);
    assert_string_equal(g_cfg.quotas[0].instance, "llama-8b");
    assert_int_equal(g_cfg.quotas[0].max_blocks, 1000);
    assert_int_equal(g_cfg.quotas[0].max_bytes, 0);
    assert_string_equal(g_cfg.quotas[1].instance, "*");
    assert_int_equal(g_cfg.quotas[1].max_blocks, 0);
    assert_int_equal(g_cfg.quotas[1].max_bytes, 64ull << 30);
    assert_string_equal(g_cfg.quotas[2].instance, "qwen/7b:a");
    assert_int_equal(g_cfg.quotas[2].max_blocks, 5);
    assert_int_equal(g_cfg.quotas[2].max_bytes, 4096);
    assert_true(g_cfg.reclaim_quota_low == 0.75);
    assert_int_equal(s_load("{\"quotas\": [], \"reclaimer\": {\"quota_low\": 1}}"), 0);
    assert_int_equal(g_cfg.n_quotas, 0);
    assert_true(g_cfg.reclaim_quota_low == 1.0);
}

/* Issue 4 §4: duplicate instances, unknown keys, bad sizes, entries without a limit
 * and too many entries are rejected at start with the key path. */
static void test_bad_quotas_rejected_with_key_path(void **state)
{
    (void)state;
    s_reject("{\"quotas\": [{\"instance\": \"a\", \"max_blocks\": 1}, {\"instance\": \"b\", "
             "\"max_blocks\": 2}, {\"instance\": \"a\", \"max_bytes\": \"1MiB\"}]}",
             "quotas[2].instance", "also quotas[0]");
    s_reject("{\"quotas\": [{\"instance\": \"*\", \"max_blocks\": 1}, {\"instance\": \"*\", "
             "\"max_blocks\": 2}]}",
             "quotas[1].instance", "second quota");
    s_reject("{\"quotas\": [{\"instance\": \"a\", \"max_block\": 1}]}", "quotas[0].max_block",
             "unknown key");
    s_reject("{\"quotas\": [{\"instance\": \"a\", \"max_bytes\": \"64XiB\"}]}",
             "quotas[0].max_bytes", "");
    s_reject("{\"quotas\": [{\"instance\": \"a\", \"max_bytes\": -5}]}", "quotas[0].max_bytes", "");
    s_reject("{\"quotas\": [{\"instance\": \"a\", \"max_blocks\": \"10\"}]}",
             "quotas[0].max_blocks", "");
    s_reject("{\"quotas\": [{\"instance\": \"a\", \"max_blocks\": 1}, {\"instance\": \"b\"}]}",
             "quotas[1]", "max_blocks");
    s_reject("{\"quotas\": [{\"instance\": \"a\", \"max_blocks\": 0, \"max_bytes\": 0}]}",
             "quotas[0]", "above 0");
    s_reject("{\"quotas\": [{\"max_blocks\": 1}]}", "quotas[0].instance", "");
    s_reject("{\"quotas\": [{\"instance\": \"\", \"max_blocks\": 1}]}", "quotas[0].instance",
             "empty");
    s_reject("{\"quotas\": [{\"instance\": \"a123456789a123456789a123456789a123456789a123456789a"
             "123456789abcd\", \"max_blocks\": 1}]}",
             "quotas[0].instance", "too long");
    s_reject("{\"quotas\": {\"instance\": \"a\"}}", "quotas", "");
    s_reject("{\"reclaimer\": {\"quota_low\": 0}}", "reclaimer.quota_low", "above 0");
    s_reject("{\"reclaimer\": {\"quota_low\": 1.5}}", "reclaimer.quota_low", "");
    s_reject("{\"reclaimer\": {\"quota_low\": \"120%\"}}", "reclaimer.quota_low", "percent");

    /* at most 64 entries */
    char text[8192];
    size_t off = (size_t)snprintf(text, sizeof text, "{\"quotas\": [");
    for (int i = 0; i < 65; i++)
        off += (size_t)snprintf(text + off, sizeof text - off,
                                "%s{\"instance\": \"i%d\", \"max_blocks\": 1}", i ? ", " : "", i);
    snprintf(text + off, sizeof text - off, "]}");
    s_reject(text, "quotas", "");
}

/* docs/EVENTS.md: events are on by default on loopback; "" turns them off; bad
 * values name their key path. */
static void test_events_keys(void **state)
{
    (void)state;
    assert_int_equal(s_load("{}"), 0);
    assert_string_equal(g_cfg.events_endpoint, "tcp://127.0.0.1:7701");
    assert_string_equal(g_cfg.events_replay, "tcp://127.0.0.1:7702");
    assert_int_equal(g_cfg.events_ring_batches, 4096);
    assert_int_equal(g_cfg.events_ring_bytes, 64u << 20);
    assert_int_equal(g_cfg.events_queue, 1024);
    assert_int_equal(g_cfg.events_snapshot_blocks, 4194304);
    assert_int_equal(g_cfg.events_subscriber_queue, 1000);
    assert_int_equal(g_cfg.events_put_tokens, 4194304);
    assert_string_equal(g_cfg.events_vllm, "tcp://127.0.0.1:7703");
    assert_string_equal(g_cfg.events_vllm_replay, "tcp://127.0.0.1:7704");
    assert_int_equal(g_cfg.events_vllm_layout, 0);
    assert_int_equal(s_load("{\"events\": {\"endpoint\": \"\", \"replay_endpoint\": \"\"}}"), 0);
    assert_string_equal(g_cfg.events_endpoint, "");
    assert_string_equal(g_cfg.events_vllm, ""); /* events off: the vLLM stream too */
    assert_int_equal(
        s_load("{\"events\": {\"vllm_layout\": \"array\", \"vllm_replay_endpoint\": \"\"}}"), 0);
    assert_int_equal(g_cfg.events_vllm_layout, 1);
    assert_string_equal(g_cfg.events_vllm_replay, "");
    s_reject("{\"events\": {\"vllm_layout\": \"list\"}}", "events.vllm_layout", "map");
    s_reject("{\"events\": {\"vllm_endpoint\": \"\"}}", "events.vllm_replay_endpoint",
             "needs events.vllm_endpoint");
    s_reject("{\"events\": {\"vllm_endpoint\": \"http://x\"}}", "events.vllm_endpoint", "");
    s_reject("{\"events\": {\"put_tokens\": 67108865}}", "events.put_tokens", "out of range");
    s_reject("{\"events\": {\"subscriber_queue\": 0}}", "events.subscriber_queue",
             "out of range 1..");
    s_reject("{\"events\": {\"snapshot_blocks\": 0}}", "events.snapshot_blocks",
             "out of range 1..");
    assert_int_equal(s_load("{\"events\": {\"endpoint\": \"ipc:///tmp/kvt-ev\", \"queue\": 8, "
                            "\"ring_batches\": 16, \"ring_bytes\": \"2MiB\"}}"),
                     0);
    assert_string_equal(g_cfg.events_endpoint, "ipc:///tmp/kvt-ev");
    assert_int_equal(g_cfg.events_queue, 8);
    assert_int_equal(g_cfg.events_ring_bytes, 2u << 20);
    s_reject("{\"events\": {\"endpoint\": \"\"}}", "events.replay_endpoint",
             "needs events.endpoint");
    s_reject("{\"events\": {\"endpoint\": \"http://x\"}}", "events.endpoint", "");
    s_reject("{\"events\": {\"ring_batches\": 0}}", "events.ring_batches", "range");
    s_reject("{\"events\": {\"ring_bytes\": \"1KiB\"}}", "events.ring_bytes", "1MiB");
    s_reject("{\"events\": {\"queue\": 0}}", "events.queue", "range");
    s_reject("{\"events\": {\"topics\": 3}}", "events.topics", "");
}

/* Two tiers h -> n (an nvme file path is not opened by the parser). */
#define CHAIN(tier_extra, chain_extra)                                                             \
    "{\"tiers\": [{\"name\": \"h\", \"kind\": \"host\", \"endpoint\": \"tcp://127.0.0.1:7710\", "  \
    "\"capacity\": 100" tier_extra "}, {\"name\": \"n\", \"kind\": \"nvme\", \"endpoint\": "       \
    "\"tcp://127.0.0.1:7711\", \"capacity\": 400, \"path\": \"/tmp/kvt-never-opened.dat\"}], "     \
    "\"chains\": [{\"name\": \"c\", \"tiers\": [\"h\", \"n\"]" chain_extra "}]}"

/* issue 14 §1: chains[i].placement, exclusive by default; tiers[i].reclaim: by
 * default ahead (watermarks) on a tier with a next tier, on demand on a last one;
 * bad values name their key path. */
static void test_placement_and_reclaim_keys(void **state)
{
    (void)state;
    assert_int_equal(s_load(CHAIN("", "")), 0);
    assert_int_equal(g_cfg.chains[0].placement, COORD_PLACEMENT_EXCLUSIVE);
    assert_int_equal(g_cfg.tiers[0].reclaim, COORD_RECLAIM_AUTO);
    assert_true(coord_tier_reclaims_ahead(&g_cfg, &g_cfg.tiers[0]));  /* the head */
    assert_false(coord_tier_reclaims_ahead(&g_cfg, &g_cfg.tiers[1])); /* the last tier */
    assert_int_equal(s_load(CHAIN("", ", \"placement\": \"inclusive\"")), 0);
    assert_int_equal(g_cfg.chains[0].placement, COORD_PLACEMENT_INCLUSIVE);
    assert_int_equal(s_load(CHAIN("", ", \"placement\": \"exclusive\"")), 0);
    assert_int_equal(g_cfg.chains[0].placement, COORD_PLACEMENT_EXCLUSIVE);
    assert_int_equal(s_load(CHAIN(", \"reclaim\": \"on_demand\"", "")), 0);
    assert_false(coord_tier_reclaims_ahead(&g_cfg, &g_cfg.tiers[0]));
    /* a single tier is its chain's last: on demand unless told */
    assert_int_equal(s_load(TIER("")), 0);
    assert_false(coord_tier_reclaims_ahead(&g_cfg, &g_cfg.tiers[0]));
    assert_int_equal(g_cfg.chains[0].placement, COORD_PLACEMENT_EXCLUSIVE); /* implied chain */
    assert_int_equal(s_load(TIER(", \"reclaim\": \"ahead\"")), 0);
    assert_true(coord_tier_reclaims_ahead(&g_cfg, &g_cfg.tiers[0]));

    s_reject(CHAIN("", ", \"placement\": \"both\""), "chains[0].placement",
             "unknown placement \"both\"");
    s_reject(CHAIN("", ", \"placement\": 1"), "chains[0].placement", "string");
    s_reject(CHAIN(", \"reclaim\": \"later\"", ""), "tiers[0].reclaim",
             "unknown reclaim \"later\"");
    s_reject(CHAIN(", \"reclaim\": \"\"", ""), "tiers[0].reclaim", "unknown reclaim \"\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_background_defaults_are_embedded),
        cmocka_unit_test(test_watermarks_as_fractions_or_percents),
        cmocka_unit_test(test_bad_watermarks_rejected_with_key_path),
        cmocka_unit_test(test_gc_and_reclaimer_keys_checked),
        cmocka_unit_test(test_quotas_are_read_with_sizes_and_default),
        cmocka_unit_test(test_bad_quotas_rejected_with_key_path),
        cmocka_unit_test(test_events_keys),
        cmocka_unit_test(test_placement_and_reclaim_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
