/* test_tier_nvme_faults.c — the nvme backend under faults on purpose (issue 12
 * §6 and §4; bus_fault.h): a write, header or fsync error fails the put and
 * nothing is acknowledged (the slot is not SERVING, and not after a reopen
 * either); a read error or a short read fails the read, and the block is served
 * again once the fault is gone; a bit flipped in 1 of 10,000 reads is detected
 * every time (each mismatch counted) and never returned as a success; a
 * flip is read again and served (a flip in transit), a block whose re-read
 * mismatches too, or whose bytes are corrupt on the disk, is dropped;
 * a slow disk only slows. Real files in a mkdtemp directory, O_DIRECT, the
 * io_uring engine (pread/pwrite where io_uring is not available). */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bus_fault.h"
#include "tier.h"
#include "tier_nvme.h"

#define SLOT 4096u /* small blocks: 20,000 reads stay quick */
#define CAP 64u
#define FLIP_READS 20000u
#define FLIP_ONE_IN 10000u

static char s_dir[128];
static unsigned s_file;

static void s_quiet(void *arg, const char *line)
{
    (void)arg;
    (void)line;
}

static int s_group_setup(void **state)
{
    (void)state;
    snprintf(s_dir, sizeof s_dir, "/tmp/kvt-nvme-faults-XXXXXX");
    if (!mkdtemp(s_dir))
        return -1;
    bus_fault_enable();
    int rc = tier_register(&tier_nvme_ops);
    return rc == 0 || rc == -EEXIST ? 0 : -1;
}

static int s_group_teardown(void **state)
{
    (void)state;
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static int s_setup(void **state)
{
    (void)state;
    bus_fault_reset();
    return 0;
}

typedef struct {
    tier_config_t cfg;
    tier_nvme_opts_t opts;
    tier_t *t;
    uint8_t *buf; /* CAP blocks, page aligned */
} s_fix_t;

static void s_open(s_fix_t *f)
{
    char err[512];
    f->t = tier_nvme_open(&f->cfg, &f->opts, err, sizeof err);
    if (!f->t)
        print_error("open failed: %s\n", err);
    assert_non_null(f->t);
}

static void s_new(s_fix_t *f, enum tier_nvme_sync sync)
{
    memset(f, 0, sizeof *f);
    snprintf(f->cfg.name, sizeof f->cfg.name, "nvme0");
    snprintf(f->cfg.kind, sizeof f->cfg.kind, "nvme");
    snprintf(f->cfg.path, sizeof f->cfg.path, "%s/t%u.dat", s_dir, s_file++);
    f->cfg.capacity = CAP;
    f->cfg.slot_size = SLOT;
    tier_nvme_opts_default(&f->opts);
    f->opts.queue_depth = 8;
    f->opts.sync = sync;
    f->opts.log = s_quiet;
    s_open(f);
    f->buf = aligned_alloc(4096, (size_t)CAP * SLOT);
    assert_non_null(f->buf);
}

static void s_free(s_fix_t *f)
{
    tier_close(&f->t);
    free(f->buf);
}

static void s_reopen(s_fix_t *f)
{
    tier_close(&f->t);
    s_open(f);
}

/* The bytes of block (slot, gen): every byte depends on both. */
static void s_pattern(uint8_t *p, uint64_t slot, uint64_t gen)
{
    for (uint32_t i = 0; i < SLOT; i++)
        p[i] = (uint8_t)(slot * 131u + gen * 7u + i * 31u + (i >> 8));
}

static int s_put(s_fix_t *f, uint64_t slot, uint64_t gen)
{
    uint8_t *p = f->buf + slot * SLOT;
    s_pattern(p, slot, gen);
    struct iovec iov = {p, SLOT};
    tier_nvme_put_t it = {.slot = slot, .iov = &iov, .n = 1};
    it.hdr.key.b[0] = (uint8_t)slot;
    it.hdr.key.b[1] = (uint8_t)gen;
    return tier_nvme_put_batch(f->t, &it, 1);
}

static bool s_serving(s_fix_t *f, uint64_t slot)
{
    tier_slot_header_t h;
    return tier_get_header(f->t, slot, &h) == 0 && h.state == TIER_SLOT_SERVING;
}

static void s_set(bus_fault_point_t point, const char *action, const char *rate)
{
    bus_fault_rule_t r;
    char err[256];
    assert_int_equal(bus_fault_rule_parse(action, rate, &r, err, sizeof err), 0);
    assert_int_equal(bus_fault_set(point, &r, err, sizeof err), 0);
}

static uint64_t s_injected(bus_fault_point_t point)
{
    bus_fault_state_t st;
    bus_fault_show(point, &st);
    return st.injected;
}

/* Reads slot into a scratch buffer: its rc, and whether the bytes are right. */
static int s_read(s_fix_t *f, uint64_t slot, uint64_t gen, uint8_t *scratch, bool *right)
{
    uint8_t want[SLOT];
    struct iovec iov = {scratch, SLOT};
    memset(scratch, 0xee, SLOT);
    int rc = tier_read(f->t, slot, &iov, 1);
    s_pattern(want, slot, gen);
    *right = memcmp(scratch, want, SLOT) == 0;
    return rc;
}

static void test_write_error_fails_the_put_and_acknowledges_nothing(void **state)
{
    (void)state;
    s_fix_t f;
    s_new(&f, TIER_NVME_SYNC_DSYNC);
    assert_int_equal(s_put(&f, 1, 1), 0);
    s_set(BUS_FAULT_NVME_WRITE, "error:EIO", "always");
    assert_int_equal(s_put(&f, 2, 1), -EIO);
    assert_int_equal(s_put(&f, 1, 2), -EIO); /* an overwrite: the old block stops serving */
    assert_false(s_serving(&f, 2));
    s_set(BUS_FAULT_NVME_WRITE, "error:ENOSPC", "next:1"); /* the errno is the caller's */
    assert_int_equal(s_put(&f, 3, 1), -ENOSPC);
    assert_false(s_serving(&f, 3));
    assert_true(s_injected(BUS_FAULT_NVME_WRITE) >= 3);
    s_reopen(&f); /* nothing unacknowledged comes back after a restart */
    assert_false(s_serving(&f, 2));
    assert_false(s_serving(&f, 3));
    tier_nvme_stats_t st;
    assert_int_equal(tier_nvme_stats(f.t, &st), 0);
    assert_int_equal(st.serving, s_serving(&f, 1) ? 1 : 0);
    s_free(&f);
}

static void test_fsync_error_leaves_the_put_unacknowledged(void **state)
{
    (void)state;
    enum tier_nvme_sync modes[] = {TIER_NVME_SYNC_DSYNC, TIER_NVME_SYNC_FDATASYNC};
    for (size_t m = 0; m < 2; m++) {
        s_fix_t f;
        s_new(&f, modes[m]);
        assert_int_equal(s_put(&f, 5, 1), 0);
        s_set(BUS_FAULT_NVME_FSYNC, "error:EIO", "always");
        assert_int_equal(s_put(&f, 6, 1), -EIO);
        assert_false(s_serving(&f, 6));
        assert_true(s_injected(BUS_FAULT_NVME_FSYNC) >= 1);
        bus_fault_clear(BUS_FAULT_N_POINTS);
        s_reopen(&f);
        assert_false(s_serving(&f, 6));
        assert_true(s_serving(&f, 5)); /* the acknowledged one is kept */
        uint8_t got[SLOT];
        bool right;
        assert_int_equal(s_read(&f, 5, 1, got, &right), 0);
        assert_true(right);
        s_free(&f);
        bus_fault_reset();
    }
}

static void test_read_error_and_short_read_fail_and_serve_nothing(void **state)
{
    (void)state;
    s_fix_t f;
    s_new(&f, TIER_NVME_SYNC_DSYNC);
    assert_int_equal(s_put(&f, 7, 1), 0);
    uint8_t got[SLOT];
    bool right;
    s_set(BUS_FAULT_NVME_READ, "error:EIO", "next:1");
    assert_int_equal(s_read(&f, 7, 1, got, &right), -EIO);
    s_set(BUS_FAULT_NVME_READ, "short", "next:1");
    assert_int_equal(s_read(&f, 7, 1, got, &right), -EIO);
    tier_nvme_stats_t st;
    assert_int_equal(tier_nvme_stats(f.t, &st), 0);
    assert_int_equal(st.short_reads, 1);
    assert_int_equal(st.checksum_failures, 0);
    /* an I/O error says nothing about the bytes on the medium: still served */
    assert_true(s_serving(&f, 7));
    assert_int_equal(s_read(&f, 7, 1, got, &right), 0);
    assert_true(right);
    s_free(&f);
}

static void test_bit_flip_1_in_10000_is_always_detected(void **state)
{
    (void)state;
    s_fix_t f;
    s_new(&f, TIER_NVME_SYNC_NONE);
    uint64_t gen[CAP];
    for (uint64_t s = 0; s < CAP; s++) {
        gen[s] = 1;
        assert_int_equal(s_put(&f, s, 1), 0);
    }
    s_set(BUS_FAULT_NVME_READ, "flip", "1/10000");
    uint8_t *rd = aligned_alloc(4096, (size_t)CAP * SLOT);
    assert_non_null(rd);
    uint64_t ok = 0, detected = 0, wrong = 0;
    for (uint32_t done = 0; done < FLIP_READS; done += CAP) {
        tier_nvme_get_t g[CAP];
        struct iovec iov[CAP];
        for (uint64_t s = 0; s < CAP; s++) {
            iov[s] = (struct iovec){rd + s * SLOT, SLOT};
            g[s] = (tier_nvme_get_t){.slot = s, .iov = &iov[s], .n = 1};
        }
        (void)tier_nvme_get_batch(f.t, g, CAP);
        for (uint64_t s = 0; s < CAP; s++) {
            uint8_t want[SLOT];
            s_pattern(want, s, gen[s]);
            if (g[s].rc == 0) {
                ok++;
                wrong += memcmp(rd + s * SLOT, want, SLOT) != 0;
                continue;
            }
            /* a flip is re-read and served; only a block whose re-read flipped too
             * (1 in 10,000 of the flips) fails, and is dropped */
            assert_int_equal(g[s].rc, -EBADMSG); /* the only failure there is here */
            detected++;
            assert_false(s_serving(&f, s)); /* dropped, never served */
            gen[s]++;                       /* stored again, as the service would */
            bus_fault_clear(BUS_FAULT_NVME_READ);
            assert_int_equal(s_put(&f, s, gen[s]), 0);
            s_set(BUS_FAULT_NVME_READ, "flip", "1/10000");
        }
    }
    tier_nvme_stats_t st;
    assert_int_equal(tier_nvme_stats(f.t, &st), 0);
    bus_fault_state_t fs;
    bus_fault_show(BUS_FAULT_NVME_READ, &fs);
    print_message("      %" PRIu64 " reads: %" PRIu64 " served right, %" PRIu64
                  " flips injected, %" PRIu64 " recovered by the re-read, %" PRIu64
                  " dropped (both reads flipped)\n",
                  ok + detected, ok, fs.injected, st.reread_recovered, detected);
    assert_true(fs.injected > 0);
    assert_int_equal(wrong, 0);
    /* every flip was caught; each either recovered by its re-read or, flipped twice, dropped */
    assert_int_equal(st.checksum_failures, st.reread_recovered + detected);
    assert_int_equal(st.reread_recovered + 2 * detected, fs.injected);
    free(rd);
    s_free(&f);
}

/* Flips a bit of slot's block (slot, gen) in the file itself: corruption on the disk. */
static void s_corrupt_on_disk(s_fix_t *f, uint64_t slot, uint64_t gen)
{
    uint8_t want[SLOT];
    s_pattern(want, slot, gen);
    FILE *fp = fopen(f->cfg.path, "r+b");
    assert_non_null(fp);
    static uint8_t page[SLOT];
    long at = -1;
    for (long off = 0; at < 0 && fseek(fp, off, SEEK_SET) == 0 &&
                       fread(page, 1, SLOT, fp) == SLOT;
         off += SLOT)
        if (memcmp(page, want, SLOT) == 0)
            at = off; /* blocks are page aligned in the file */
    assert_true(at >= 0);
    page[100] ^= 0x10;
    assert_int_equal(fseek(fp, at, SEEK_SET), 0);
    assert_int_equal(fwrite(page, 1, SLOT, fp), SLOT);
    assert_int_equal(fclose(fp), 0);
}

/* One flip in transit (the next read only) is not damage: the block is read once
 * more, served right, and stays SERVING; a block whose every read mismatches (the
 * fault on both reads, or its bytes corrupt on the disk) is dropped (-EBADMSG). */
static void test_one_flip_is_reread_and_corruption_dropped(void **state)
{
    (void)state;
    s_fix_t f;
    s_new(&f, TIER_NVME_SYNC_DSYNC);
    for (uint64_t s = 0; s < 3; s++)
        assert_int_equal(s_put(&f, s, 1), 0);
    uint8_t got[SLOT];
    bool right;
    s_set(BUS_FAULT_NVME_READ, "flip", "next:1");
    assert_int_equal(s_read(&f, 0, 1, got, &right), 0);
    assert_true(right);
    assert_true(s_serving(&f, 0));
    assert_int_equal(s_injected(BUS_FAULT_NVME_READ), 1);
    tier_nvme_stats_t st;
    assert_int_equal(tier_nvme_stats(f.t, &st), 0);
    assert_int_equal(st.checksum_failures, 1);
    assert_int_equal(st.reread_recovered, 1);
    assert_int_equal(st.dropped_slots, 0);
    /* both reads flipped: dropped */
    s_set(BUS_FAULT_NVME_READ, "flip", "next:2");
    assert_int_equal(s_read(&f, 1, 1, got, &right), -EBADMSG);
    assert_false(right);
    assert_false(s_serving(&f, 1));
    bus_fault_clear(BUS_FAULT_NVME_READ);
    /* corrupt on the disk: every read mismatches, dropped */
    s_corrupt_on_disk(&f, 2, 1);
    assert_int_equal(s_read(&f, 2, 1, got, &right), -EBADMSG);
    assert_false(right);
    assert_false(s_serving(&f, 2));
    assert_int_equal(tier_nvme_stats(f.t, &st), 0);
    assert_int_equal(st.checksum_failures, 3);
    assert_int_equal(st.reread_recovered, 1);
    assert_int_equal(st.dropped_slots, 2);
    assert_true(s_serving(&f, 0)); /* the recovered block is still served after all that */
    assert_int_equal(s_read(&f, 0, 1, got, &right), 0);
    assert_true(right);
    s_free(&f);
}

static void test_slow_disk_only_slows(void **state)
{
    (void)state;
    s_fix_t f;
    s_new(&f, TIER_NVME_SYNC_DSYNC);
    s_set(BUS_FAULT_NVME_WRITE, "delay:5", "next:4");
    s_set(BUS_FAULT_NVME_READ, "delay:5", "next:4");
    for (uint64_t s = 0; s < 4; s++)
        assert_int_equal(s_put(&f, s, 3), 0);
    for (uint64_t s = 0; s < 4; s++) {
        uint8_t got[SLOT];
        bool right;
        assert_int_equal(s_read(&f, s, 3, got, &right), 0);
        assert_true(right);
    }
    assert_int_equal(s_injected(BUS_FAULT_NVME_WRITE), 4);
    assert_int_equal(s_injected(BUS_FAULT_NVME_READ), 4);
    s_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_write_error_fails_the_put_and_acknowledges_nothing, s_setup),
        cmocka_unit_test_setup(test_fsync_error_leaves_the_put_unacknowledged, s_setup),
        cmocka_unit_test_setup(test_read_error_and_short_read_fail_and_serve_nothing, s_setup),
        cmocka_unit_test_setup(test_bit_flip_1_in_10000_is_always_detected, s_setup),
        cmocka_unit_test_setup(test_one_flip_is_reread_and_corruption_dropped, s_setup),
        cmocka_unit_test_setup(test_slow_disk_only_slows, s_setup),
    };
    return cmocka_run_group_tests(tests, s_group_setup, s_group_teardown);
}
