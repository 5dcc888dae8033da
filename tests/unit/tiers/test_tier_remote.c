/* test_tier_remote.c — the remote tier backend (tier_remote.h, issue 9 §4): the
 * kind is built in with its wire number, it takes no address and advertises no
 * same-host access (nothing appears in /dev/shm), bytes and headers round-trip,
 * inventory and probe see what is SERVING, a restart is a new epoch with nothing
 * in it, and its options are checked: "ucx" is taken where the build has UCX (its
 * staging regions are described for the tier actor) and refused with a message
 * naming the way out where it has not. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cmocka.h>

#include "tier.h"
#include "tier_checksum.h"

#define SLOT_SIZE (64 * 1024 + 100) /* not a multiple of the alignment */
#define CAPACITY 8

static tier_config_t s_cfg(const char *transport)
{
    tier_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.name, sizeof cfg.name, "remote0");
    snprintf(cfg.kind, sizeof cfg.kind, "remote");
    cfg.capacity = CAPACITY;
    cfg.slot_size = SLOT_SIZE;
    if (transport)
        assert_int_equal(tier_config_set(&cfg, "transport", transport), 0);
    return cfg;
}

static tier_t *s_open(void)
{
    char err[256] = "";
    tier_config_t cfg = s_cfg(NULL);
    assert_int_equal(tier_configure(&cfg, err, sizeof err), 0);
    tier_t *t = tier_open(&cfg, err, sizeof err);
    if (!t)
        fail_msg("tier_open: %s", err);
    return t;
}

/* Mappings of this process backed by a file in /dev/shm (a shared segment). Only
 * this process's own: other processes creating files there do not count. */
static int s_shm_mappings(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, "/dev/shm/") != NULL;
    fclose(f);
    return n;
}

static int s_count(void *arg, uint64_t slot, const tier_slot_header_t *h)
{
    (void)h;
    uint64_t *seen = arg;
    seen[0]++;
    seen[1] = slot;
    return 0;
}

static void test_kind_is_built_in(void **state)
{
    (void)state;
    const struct tier_ops *ops = tier_find("remote");
    assert_non_null(ops);
    assert_null(ops->path_key); /* no shm name, no file */
    assert_int_equal(ops->path_access, TIER_ACCESS_NONE);
    assert_int_equal(tier_kind_wire("remote"), 4); /* schemas/common.proto TIER_KIND_REMOTE */
    assert_string_equal(tier_kind_name(4), "remote");
}

static void test_options(void **state)
{
    (void)state;
    char err[256] = "";
    tier_config_t cfg = s_cfg(NULL);
    assert_int_equal(tier_configure(&cfg, err, sizeof err), 0);
    assert_string_equal(tier_config_get(&cfg, "transport"), "zmq"); /* the default, written */
    assert_string_equal(tier_config_get(&cfg, "prefault"), "true");

    cfg = s_cfg("ucx");
#ifdef KVT_HAVE_UCX
    assert_int_equal(tier_config_set(&cfg, "ucx_regions", "3"), 0);
    assert_int_equal(tier_config_set(&cfg, "ucx_region_mib", "2"), 0);
    assert_int_equal(tier_configure(&cfg, err, sizeof err), 0);
    tier_t *t = tier_open(&cfg, err, sizeof err);
    assert_non_null(t);
    tier_desc_t d;
    tier_describe(t, &d);
    assert_int_equal(d.ucx_regions, 3); /* what the tier actor starts UCX with */
    assert_int_equal(d.ucx_region_bytes, 2u << 20);
    assert_non_null(strstr(d.detail, "UCX"));
    tier_close(&t);
    /* a region must hold one slot at least */
    cfg = s_cfg("ucx");
    cfg.slot_size = 3u << 20;
    assert_int_equal(tier_config_set(&cfg, "ucx_region_mib", "2"), 0);
    assert_true(tier_configure(&cfg, err, sizeof err) < 0);
    assert_non_null(strstr(err, "ucx_region_mib"));
    /* frames only: no regions */
    cfg = s_cfg("zmq");
    assert_int_equal(tier_configure(&cfg, err, sizeof err), 0);
    t = tier_open(&cfg, err, sizeof err);
    assert_non_null(t);
    tier_describe(t, &d);
    assert_int_equal(d.ucx_regions, 0);
    tier_close(&t);
#else
    assert_true(tier_configure(&cfg, err, sizeof err) < 0);
    assert_non_null(strstr(err, "not in this build"));
    assert_non_null(strstr(err, "zmq"));
#endif

    cfg = s_cfg("rdma");
    err[0] = '\0';
    assert_true(tier_configure(&cfg, err, sizeof err) < 0);
    assert_non_null(strstr(err, "transport"));

    cfg = s_cfg(NULL);
    assert_int_equal(tier_config_set(&cfg, "shm_group", "kvtier"), 0); /* a host tier's option */
    err[0] = '\0';
    assert_true(tier_configure(&cfg, err, sizeof err) < 0);
    assert_non_null(strstr(err, "shm_group"));
}

static void test_round_trip_and_no_shared_memory(void **state)
{
    (void)state;
    int shm_before = s_shm_mappings();
    tier_t *t = s_open();
    assert_true(shm_before >= 0);
    assert_int_equal(s_shm_mappings(), shm_before); /* nothing another process could map */

    tier_desc_t d;
    tier_describe(t, &d);
    assert_int_equal(d.access_kind, TIER_ACCESS_NONE);
    assert_string_equal(d.access, "");
    assert_true(d.epoch != 0);
    assert_non_null(strstr(d.detail, "frames"));

    static uint8_t in[SLOT_SIZE], out[SLOT_SIZE];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (uint8_t)(i * 31 + 7);
    struct iovec iv = {in, sizeof in};
    assert_int_equal(tier_write(t, 3, &iv, 1), 0);
    tier_slot_header_t h = {.instance = 9, .state = TIER_SLOT_SERVING, .size = sizeof in};
    memset(h.key.b, 0xab, sizeof h.key.b);
    struct iovec cv = {in, sizeof in};
    h.checksum = tier_checksum(&cv, 1);
    assert_int_equal(tier_put_header(t, 3, &h), 0);

    struct iovec ov = {out, sizeof out};
    assert_int_equal(tier_read(t, 3, &ov, 1), 0);
    assert_memory_equal(in, out, sizeof in);
    tier_slot_header_t g;
    assert_int_equal(tier_get_header(t, 3, &g), 0);
    assert_int_equal(g.state, TIER_SLOT_SERVING);
    assert_int_equal(g.checksum, h.checksum);
    assert_memory_equal(g.key.b, h.key.b, sizeof g.key.b);

    uint64_t slots[2] = {3, 4};
    bool present[2];
    assert_int_equal(tier_probe(t, slots, 2, present), 0);
    assert_true(present[0]);
    assert_false(present[1]);
    uint64_t far = CAPACITY;
    assert_true(tier_probe(t, &far, 1, present) < 0);
    uint64_t seen[2] = {0, 0};
    assert_int_equal(tier_inventory(t, s_count, seen), 0);
    assert_int_equal(seen[0], 1); /* the one SERVING slot, and only it */
    assert_int_equal(seen[1], 3);

    /* a restart is new memory: a new epoch, nothing served */
    uint64_t epoch = d.epoch;
    tier_close(&t);
    t = s_open();
    tier_describe(t, &d);
    assert_true(d.epoch != epoch);
    assert_int_equal(tier_get_header(t, 3, &g), 0);
    assert_int_not_equal(g.state, TIER_SLOT_SERVING);
    tier_close(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kind_is_built_in),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_round_trip_and_no_shared_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
