/* test_tier_nvme.c — the nvme tier backend (DESIGN.md §4, §7; the nvme issue):
 * round trips under both I/O engines, restart recovery, crash (kill -9)
 * safety, corruption and torn headers dropped and never served, clear errors
 * for bad paths, too-small file systems and config mismatches. Real files in
 * a mkdtemp directory under /tmp (ext4 here, O_DIRECT capable), a few MiB. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

#include <cmocka.h>

#include "tier.h"
#include "tier_checksum.h"
#include "tier_nvme.h"

#define SLOT (256u * 1024u)
#define CAP 16u

static char s_dir[128];

/* ---- fixtures and helpers ------------------------------------------------- */

struct s_logcap {
    char buf[32768];
    size_t len;
    unsigned lines;
};
static struct s_logcap s_logs;

static void s_cap_log(void *arg, const char *line)
{
    struct s_logcap *c = arg;
    int k = snprintf(c->buf + c->len, sizeof c->buf - c->len, "%s\n", line);
    if (k > 0 && c->len + (size_t)k < sizeof c->buf)
        c->len += (size_t)k;
    c->lines++;
}

static void s_quiet_log(void *arg, const char *line)
{
    (void)arg;
    (void)line;
}

static bool s_logged(const char *needle)
{
    return strstr(s_logs.buf, needle) != NULL;
}

static int s_group_setup(void **state)
{
    (void)state;
    snprintf(s_dir, sizeof s_dir, "/tmp/kvt-nvme-XXXXXX");
    if (!mkdtemp(s_dir))
        return -1;
    int rc = tier_register(&tier_nvme_ops);
    return rc == 0 || rc == -EEXIST ? 0 : -1;
}

static int s_group_teardown(void **state)
{
    (void)state;
    char cmd[320];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static int s_setup(void **state)
{
    (void)state;
    memset(&s_logs, 0, sizeof s_logs);
    unsetenv(TIER_NVME_ENV_ENGINE);
    return 0;
}

static tier_config_t s_cfg(const char *file, uint64_t cap, uint64_t slot_size)
{
    tier_config_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "nvme0");
    snprintf(c.kind, sizeof c.kind, "nvme");
    int k = snprintf(c.path, sizeof c.path, "%s/%s", s_dir, file);
    assert_true(k > 0 && (size_t)k < sizeof c.path);
    c.capacity = cap;
    c.slot_size = slot_size;
    assert_int_equal(tier_config_set(&c, "queue_depth", "8"), 0);
    return c;
}

static tier_nvme_opts_t s_opts(enum tier_uring_kind engine)
{
    tier_nvme_opts_t o;
    tier_nvme_opts_default(&o);
    o.engine = engine;
    o.queue_depth = 8;
    o.log = s_cap_log;
    o.log_arg = &s_logs;
    o.chunk_bytes = 64u * 1024u; /* several chunks per 256 KiB slot */
    return o;
}

static tier_t *s_open(const tier_config_t *cfg, const tier_nvme_opts_t *o)
{
    char err[512];
    tier_t *t = tier_nvme_open(cfg, o, err, sizeof err);
    if (!t)
        print_error("open failed: %s\n", err);
    return t;
}

static uint64_t s_mix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void s_fill(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t x = seed;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = s_mix(&x);
        memcpy(p + i, &v, n - i < 8 ? n - i : 8);
    }
}

static tier_key_t s_key(uint64_t a, uint64_t b)
{
    tier_key_t k;
    memcpy(k.b, &a, 8);
    memcpy(k.b + 8, &b, 8);
    return k;
}

/* A page-aligned buffer of n bytes (+ slack) whose usable start is base+off. */
static uint8_t *s_buf(size_t n, size_t off, void **mem)
{
    *mem = aligned_alloc(4096, (n + off + 4096 + 4095) / 4096 * 4096);
    assert_non_null(*mem);
    return (uint8_t *)*mem + off;
}

/* Splits p[0..n) into up to nseg segments; aligned cuts fall on 4096. */
static int s_split(uint8_t *p, size_t n, int nseg, bool aligned, uint64_t *rng, struct iovec *iov)
{
    size_t pos = 0;
    int k = 0;
    for (int i = 0; i < nseg - 1 && pos < n; i++) {
        size_t left = n - pos;
        size_t cut = (size_t)(s_mix(rng) % (left + 1));
        if (aligned)
            cut = cut / 4096 * 4096;
        iov[k].iov_base = p + pos;
        iov[k++].iov_len = cut;
        pos += cut;
    }
    iov[k].iov_base = p + pos;
    iov[k++].iov_len = n - pos;
    return k;
}

static int s_put(tier_t *t, uint64_t slot, const struct iovec *iov, int n, tier_key_t key,
                 uint32_t instance, uint64_t deadline)
{
    int rc = tier_write(t, slot, iov, n);
    if (rc < 0)
        return rc;
    uint64_t size = 0;
    for (int i = 0; i < n; i++)
        size += iov[i].iov_len;
    tier_slot_header_t h = {.key = key,
                            .instance = instance,
                            .state = TIER_SLOT_SERVING,
                            .size = size,
                            .deadline_ms = deadline};
    return tier_put_header(t, slot, &h);
}

/* Writes a block of `size` bytes with content seed (slot, gen) and commits it. */
static void s_put_simple(tier_t *t, uint64_t slot, size_t size, uint64_t gen)
{
    void *mem;
    uint8_t *p = s_buf(size, 0, &mem);
    s_fill(p, size, slot * 1000003u + gen);
    struct iovec v = {.iov_base = p, .iov_len = size};
    assert_int_equal(s_put(t, slot, &v, 1, s_key(slot, gen), 7, 0), 0);
    free(mem);
}

/* Reads slot and checks it holds content seed (slot, gen) of `size` bytes. */
static int s_check_simple(tier_t *t, uint64_t slot, size_t size, uint64_t gen)
{
    void *m1, *m2;
    uint8_t *got = s_buf(size, 3, &m1); /* unaligned: bounce path */
    uint8_t *want = s_buf(size, 0, &m2);
    s_fill(want, size, slot * 1000003u + gen);
    struct iovec v = {.iov_base = got, .iov_len = size};
    int rc = tier_read(t, slot, &v, 1);
    if (rc == 0 && memcmp(got, want, size) != 0)
        rc = -EILSEQ;
    free(m1);
    free(m2);
    return rc;
}

struct s_inv {
    uint64_t n;
    uint64_t slots[CAP * 4];
    tier_slot_header_t h[CAP * 4];
};

static int s_inv_fn(void *arg, uint64_t slot, const tier_slot_header_t *h)
{
    struct s_inv *inv = arg;
    if (inv->n >= CAP * 4)
        return -ENOSPC;
    inv->slots[inv->n] = slot;
    inv->h[inv->n++] = *h;
    return 0;
}

static bool s_inv_has(const struct s_inv *inv, uint64_t slot)
{
    for (uint64_t i = 0; i < inv->n; i++)
        if (inv->slots[i] == slot)
            return true;
    return false;
}

/* Superblock fields, read as the documented layout says. */
static uint64_t s_sb_u64(const char *path, off_t off)
{
    uint64_t v = 0;
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, &v, sizeof v, off), (ssize_t)sizeof v);
    close(fd);
    return v;
}

static uint32_t s_sb_u32(const char *path, off_t off)
{
    uint32_t v = 0;
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, &v, sizeof v, off), (ssize_t)sizeof v);
    close(fd);
    return v;
}

static void s_scribble(const char *path, off_t off, size_t len, uint8_t byte)
{
    uint8_t junk[512];
    assert_true(len <= sizeof junk);
    memset(junk, byte, len);
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, junk, len, off), (ssize_t)len);
    assert_int_equal(fdatasync(fd), 0);
    close(fd);
}

/* ---- round trips ---------------------------------------------------------------- */

/* Random blocks (256 KiB and smaller, 1..16 segments, aligned and unaligned
 * caller memory) written and read back byte-exact with their headers. */
static void s_round_trip(tier_t *t)
{
    static const size_t sizes[] = {SLOT, SLOT, SLOT - 1, 200000, 65536, 4096, 4097, 1, 0, 131072};
    uint64_t rng = 42;
    for (unsigned i = 0; i < 2 * CAP; i++) {
        uint64_t slot = i % CAP;
        size_t size = sizes[i % (sizeof sizes / sizeof sizes[0])];
        bool aligned_w = i % 2 == 0, aligned_r = i % 3 == 0;
        void *mw, *mr;
        uint8_t *w = s_buf(size, aligned_w ? 0 : 1 + s_mix(&rng) % 4095, &mw);
        uint8_t *r = s_buf(size + 100, aligned_r ? 0 : 1 + s_mix(&rng) % 4095, &mr);
        s_fill(w, size, rng + i);
        memset(r, 0xAA, size + 100);
        struct iovec wv[TIER_MAX_IOV], rv[TIER_MAX_IOV];
        int wn = s_split(w, size, 1 + (int)(s_mix(&rng) % TIER_MAX_IOV), aligned_w, &rng, wv);
        /* the dispatcher caps an iov at the slot size */
        size_t extra = aligned_r ? 0 : (SLOT - size < 100 ? SLOT - size : 100);
        int rn =
            s_split(r, size + extra, 1 + (int)(s_mix(&rng) % TIER_MAX_IOV), aligned_r, &rng, rv);
        uint64_t deadline = 1700000000000ULL + i;
        assert_int_equal(s_put(t, slot, wv, wn, s_key(i, 99), 3 + i, deadline), 0);

        assert_int_equal(tier_read(t, slot, rv, rn), 0);
        assert_memory_equal(r, w, size);
        for (size_t j = size; j < size + extra; j++)
            assert_int_equal(r[j], 0xAA); /* beyond the block: untouched */

        tier_slot_header_t h;
        assert_int_equal(tier_get_header(t, slot, &h), 0);
        assert_int_equal(h.state, TIER_SLOT_SERVING);
        assert_int_equal(h.size, size);
        assert_int_equal(h.instance, 3 + i);
        assert_int_equal(h.deadline_ms, deadline);
        tier_key_t k = s_key(i, 99);
        assert_true(tier_key_eq(&h.key, &k));
        struct iovec one = {.iov_base = w, .iov_len = size};
        assert_int_equal(h.checksum, tier_checksum(&one, 1));
        free(mw);
        free(mr);
    }
    tier_nvme_stats_t st;
    assert_int_equal(tier_nvme_stats(t, &st), 0);
    assert_true(st.direct_blocks > 0);
    assert_true(st.bounced_blocks > 0);
    assert_int_equal(st.writes, 2 * CAP);
    assert_int_equal(st.reads, 2 * CAP);
    assert_int_equal(st.checksum_failures, 0);
    assert_int_equal(st.serving, CAP);
}

/* Issue: io_uring with a pread/pwrite fallback; both engines round-trip
 * (engine forced through $KVT_NVME_ENGINE and the ops table). */
static void test_round_trip_random_blocks_under_both_engines(void **state)
{
    (void)state;
    static const char *const engines[] = {"uring", "sync"};
    static const char *const names[] = {"io_uring", "pread/pwrite"};
    for (int e = 0; e < 2; e++) {
        char file[32];
        snprintf(file, sizeof file, "rt-%s", engines[e]);
        tier_config_t cfg = s_cfg(file, CAP, SLOT);
        setenv(TIER_NVME_ENV_ENGINE, engines[e], 1);
        char err[256];
        tier_t *t = tier_open(&cfg, err, sizeof err);
        assert_non_null(t);
        tier_nvme_stats_t st;
        assert_int_equal(tier_nvme_stats(t, &st), 0);
        assert_string_equal(st.engine, names[e]);
        s_round_trip(t);
        tier_close(&t);
        assert_null(t);
    }
}

/* The batch API gives the same result as write + put_header per item, under
 * both engines, with the I/O of all items overlapped. */
static void test_batch_put_get_round_trip(void **state)
{
    (void)state;
    for (int e = TIER_URING_RING; e <= TIER_URING_SYNC; e++) {
        char file[32];
        snprintf(file, sizeof file, "batch-%d", e);
        tier_config_t cfg = s_cfg(file, CAP, SLOT);
        tier_nvme_opts_t o = s_opts((enum tier_uring_kind)e);
        tier_t *t = s_open(&cfg, &o);
        assert_non_null(t);
        void *mw, *mr;
        uint8_t *w = s_buf((size_t)CAP * SLOT, e == TIER_URING_RING ? 0 : 5, &mw);
        uint8_t *r = s_buf((size_t)CAP * SLOT, e == TIER_URING_RING ? 7 : 0, &mr);
        s_fill(w, (size_t)CAP * SLOT, 7);
        struct iovec wv[CAP], rv[CAP];
        tier_nvme_put_t puts[CAP];
        tier_nvme_get_t gets[CAP];
        for (unsigned i = 0; i < CAP; i++) {
            size_t size = SLOT - i * 1000;
            wv[i] = (struct iovec){.iov_base = w + (size_t)i * SLOT, .iov_len = size};
            rv[i] = (struct iovec){.iov_base = r + (size_t)i * SLOT, .iov_len = SLOT};
            puts[i] = (tier_nvme_put_t){.slot = CAP - 1 - i, .iov = &wv[i], .n = 1};
            puts[i].hdr.key = s_key(i, 1);
            gets[i] = (tier_nvme_get_t){.slot = CAP - 1 - i, .iov = &rv[i], .n = 1};
        }
        assert_int_equal(tier_nvme_put_batch(t, puts, CAP), 0);
        assert_int_equal(tier_nvme_get_batch(t, gets, CAP), 0);
        for (unsigned i = 0; i < CAP; i++) {
            assert_int_equal(puts[i].rc, 0);
            assert_int_equal(puts[i].hdr.state, TIER_SLOT_SERVING);
            assert_int_equal(puts[i].hdr.size, SLOT - i * 1000);
            assert_int_equal(gets[i].rc, 0);
            assert_int_equal(gets[i].size, SLOT - i * 1000);
            assert_memory_equal(r + (size_t)i * SLOT, w + (size_t)i * SLOT, SLOT - i * 1000);
        }
        free(mw);
        free(mr);
        tier_close(&t);
    }
}

/* The write and commit batches (the tier actor's WriteSlots / PutHeader path)
 * give the result of tier_write + tier_put_header(SERVING) per item under both
 * engines: SERVING headers with the bytes' size and checksum, byte-exact reads,
 * a rewrite of a SERVING slot not recovered before its commit, an item's error
 * its own (commit without bytes: -ENODATA; wrong size: -EINVAL; a repeat: -EINVAL);
 * the clear batch (deletes) empties headers for good. */
static void test_write_and_commit_batches_match_one_by_one(void **state)
{
    (void)state;
    for (int e = TIER_URING_RING; e <= TIER_URING_SYNC; e++) {
        char file[32];
        snprintf(file, sizeof file, "wcb-%d", e);
        tier_config_t cfg = s_cfg(file, CAP, SLOT);
        tier_nvme_opts_t o = s_opts((enum tier_uring_kind)e);
        tier_t *t = s_open(&cfg, &o);
        assert_non_null(t);
        s_put_simple(t, 0, 65536, 1); /* SERVING before: rewritten by the batch */
        void *mw, *mr;
        uint8_t *w = s_buf((size_t)CAP * SLOT, 0, &mw);
        uint8_t *r = s_buf((size_t)CAP * SLOT, 0, &mr);
        s_fill(w, (size_t)CAP * SLOT, 11 + (unsigned)e);
        struct iovec wv[CAP], rv[CAP];
        tier_nvme_write_t wr[CAP];
        tier_nvme_commit_t cm[CAP];
        for (unsigned i = 0; i < CAP; i++) { /* slot CAP - 1 is never written */
            size_t size = SLOT - i * 700;
            wv[i] = (struct iovec){.iov_base = w + (size_t)i * SLOT, .iov_len = size};
            rv[i] = (struct iovec){.iov_base = r + (size_t)i * SLOT, .iov_len = SLOT};
            wr[i] = (tier_nvme_write_t){.slot = i, .iov = &wv[i], .n = 1};
            cm[i] = (tier_nvme_commit_t){.slot = i};
            cm[i].hdr = (tier_slot_header_t){
                .key = s_key(i, 5), .instance = 9, .state = TIER_SLOT_SERVING, .size = size};
        }
        assert_int_equal(tier_nvme_write_batch(t, wr, CAP - 1), 0);
        for (unsigned i = 0; i < CAP - 1; i++)
            assert_int_equal(wr[i].rc, 0);
        tier_slot_header_t h;
        assert_int_equal(tier_get_header(t, 0, &h), 0);
        assert_int_equal(h.state, TIER_SLOT_WRITING); /* not served before its commit */
        cm[2].hdr.size += 1;                          /* not the size written */
        assert_int_equal(tier_nvme_commit_batch(t, cm, CAP - 1), -EINVAL);
        for (unsigned i = 0; i < CAP - 1; i++) /* stopped at slot 2, as one by one */
            assert_int_equal(cm[i].rc, i < 2 ? 0 : i == 2 ? -EINVAL : -ECANCELED);
        assert_int_equal(tier_get_header(t, 3, &h), 0);
        assert_int_not_equal(h.state, TIER_SLOT_SERVING); /* not committed */
        cm[2].hdr.size -= 1;
        assert_int_equal(tier_nvme_commit_batch(t, &cm[2], CAP - 3), 0);
        for (unsigned i = 0; i < CAP - 1; i++) {
            assert_int_equal(cm[i].rc, 0);
            assert_int_equal(tier_get_header(t, i, &h), 0);
            assert_int_equal(h.state, TIER_SLOT_SERVING);
            assert_int_equal(h.size, SLOT - i * 700);
            assert_int_equal(h.checksum, tier_checksum(&wv[i], 1));
            assert_int_equal(cm[i].hdr.checksum, h.checksum);
            assert_int_equal(tier_read(t, i, &rv[i], 1), 0);
            assert_memory_equal(r + (size_t)i * SLOT, w + (size_t)i * SLOT, SLOT - i * 700);
        }
        /* a repeat within one batch, and a commit without bytes written */
        tier_nvme_commit_t bad[2] = {{.slot = 3}, {.slot = 3}};
        bad[0].hdr = cm[3].hdr;
        bad[1].hdr = cm[3].hdr;
        assert_int_equal(tier_nvme_commit_batch(t, bad, 2), -EINVAL);
        assert_int_equal(bad[0].rc, 0);
        assert_int_equal(bad[1].rc, -EINVAL);
        assert_int_equal(tier_nvme_commit_batch(t, &cm[CAP - 1], 1), -ENODATA);
        tier_nvme_write_t rep[2] = {{.slot = 1, .iov = &wv[1], .n = 1},
                                    {.slot = 1, .iov = &wv[1], .n = 1}};
        assert_int_equal(tier_nvme_write_batch(t, rep, 2), -EINVAL);
        assert_int_equal(rep[0].rc, 0);
        assert_int_equal(rep[1].rc, -EINVAL);
        /* a refused item stops the batch: the ones after it are not written */
        tier_nvme_write_t stop[3] = {{.slot = 6, .iov = &wv[6], .n = 1},
                                     {.slot = CAP + 1, .iov = &wv[7], .n = 1},
                                     {.slot = 7, .iov = &wv[7], .n = 1}};
        assert_int_equal(tier_nvme_write_batch(t, stop, 3), -ERANGE);
        assert_int_equal(stop[0].rc, 0);
        assert_int_equal(stop[2].rc, -ECANCELED);
        assert_int_equal(tier_get_header(t, 7, &h), 0);
        assert_int_equal(h.state, TIER_SLOT_SERVING); /* untouched */
        /* deletes: EMPTY headers, overlapped; an out-of-range slot fails alone */
        uint64_t del[3] = {3, CAP + 5, 4};
        int drc[3];
        assert_int_equal(tier_nvme_clear_batch(t, del, drc, 3), -ERANGE);
        assert_int_equal(drc[0], 0);
        assert_int_equal(drc[1], -ERANGE);
        assert_int_equal(drc[2], 0);
        assert_int_equal(tier_get_header(t, 3, &h), 0);
        assert_int_equal(h.state, TIER_SLOT_EMPTY);
        assert_int_equal(tier_read(t, 4, &rv[4], 1), -ENODATA);
        free(mw);
        free(mr);
        tier_close(&t);
        /* after a restart the committed slots are the inventory */
        t = s_open(&cfg, &o);
        assert_non_null(t);
        struct s_inv inv = {0};
        assert_int_equal(tier_inventory(t, s_inv_fn, &inv), 0);
        assert_false(s_inv_has(&inv, 1)); /* rewritten (pending) when the tier closed */
        assert_true(s_inv_has(&inv, 0));
        assert_true(s_inv_has(&inv, 2));
        assert_false(s_inv_has(&inv, 3)); /* deleted */
        assert_false(s_inv_has(&inv, 4));
        assert_true(s_inv_has(&inv, 5));
        tier_close(&t);
    }
}

/* A slot repeated within one batch is rejected for the repeat only. */
static void test_batch_repeated_slot_rejected(void **state)
{
    (void)state;
    tier_config_t cfg = s_cfg("dup", CAP, SLOT);
    tier_nvme_opts_t o = s_opts(TIER_URING_AUTO);
    tier_t *t = s_open(&cfg, &o);
    assert_non_null(t);
    uint8_t a[4096] = {1}, b[4096] = {2};
    struct iovec va = {a, sizeof a}, vb = {b, sizeof b};
    tier_nvme_put_t puts[2] = {{.slot = 3, .iov = &va, .n = 1}, {.slot = 3, .iov = &vb, .n = 1}};
    assert_int_equal(tier_nvme_put_batch(t, puts, 2), -EINVAL);
    assert_int_equal(puts[0].rc, 0);
    assert_int_equal(puts[1].rc, -EINVAL);
    uint8_t got[4096];
    struct iovec vg = {got, sizeof got};
    assert_int_equal(tier_read(t, 3, &vg, 1), 0);
    assert_memory_equal(got, a, sizeof a);
    tier_close(&t);

    /* Also across the internal groups of a long batch. */
    tier_config_t many = s_cfg("dup-many", 80, 4096);
    t = s_open(&many, &o);
    assert_non_null(t);
    tier_nvme_put_t items[70];
    for (unsigned i = 0; i < 70; i++)
        items[i] = (tier_nvme_put_t){.slot = i, .iov = &va, .n = 1};
    items[69].slot = 0;
    assert_int_equal(tier_nvme_put_batch(t, items, 70), -EINVAL);
    for (unsigned i = 0; i < 69; i++)
        assert_int_equal(items[i].rc, 0);
    assert_int_equal(items[69].rc, -EINVAL);
    tier_close(&t);
}

/* The header records what the tier wrote: SERVING needs bytes written, the
 * same size, and a checksum that is 0 or matches; reads need SERVING. */
static void test_put_header_requires_the_written_bytes(void **state)
{
    (void)state;
    tier_config_t cfg = s_cfg("hdr", CAP, SLOT);
    tier_nvme_opts_t o = s_opts(TIER_URING_AUTO);
    tier_t *t = s_open(&cfg, &o);
    assert_non_null(t);
    uint8_t buf[8192];
    s_fill(buf, sizeof buf, 5);
    struct iovec v = {buf, sizeof buf};
    tier_slot_header_t h = {.state = TIER_SLOT_SERVING, .size = sizeof buf};
    assert_int_equal(tier_put_header(t, 1, &h), -ENODATA);
    assert_int_equal(tier_read(t, 1, &v, 1), -ENODATA);
    assert_int_equal(tier_write(t, 1, &v, 1), 0);
    tier_slot_header_t g;
    assert_int_equal(tier_get_header(t, 1, &g), 0);
    assert_int_equal(g.state, TIER_SLOT_WRITING);
    assert_int_equal(tier_read(t, 1, &v, 1), -ENODATA); /* not committed: never served */
    h.size = sizeof buf - 1;
    assert_int_equal(tier_put_header(t, 1, &h), -EINVAL);
    h.size = sizeof buf;
    h.checksum = tier_checksum(&v, 1) ^ 1;
    assert_int_equal(tier_put_header(t, 1, &h), -EBADMSG);
    h.checksum = tier_checksum(&v, 1);
    assert_int_equal(tier_put_header(t, 1, &h), 0);
    struct iovec small = {buf, sizeof buf - 1};
    assert_int_equal(tier_read(t, 1, &small, 1), -EMSGSIZE);
    bool present[2];
    uint64_t slots[2] = {1, 2};
    assert_int_equal(tier_probe(t, slots, 2, present), 0);
    assert_true(present[0]);
    assert_false(present[1]);
    /* Deleting is a header write: gone from probe and reads. */
    tier_slot_header_t del = {.state = TIER_SLOT_EMPTY};
    assert_int_equal(tier_put_header(t, 1, &del), 0);
    assert_int_equal(tier_probe(t, slots, 1, present), 0);
    assert_false(present[0]);
    assert_int_equal(tier_read(t, 1, &v, 1), -ENODATA);
    tier_close(&t);
}

/* ---- restart ----------------------------------------------------------------------- */

/* DESIGN §4: the nvme tier survives restarts; a reopen rebuilds the same
 * inventory from the slot headers, and the bytes read back byte-exact. */
static void test_reopen_rebuilds_the_same_inventory(void **state)
{
    (void)state;
    tier_config_t cfg = s_cfg("reopen", CAP, SLOT);
    tier_nvme_opts_t o = s_opts(TIER_URING_AUTO);
    tier_t *t = s_open(&cfg, &o);
    assert_non_null(t);
    for (uint64_t s = 0; s < CAP; s += 2)
        s_put_simple(t, s, SLOT - s * 77, 1);
    tier_slot_header_t del = {.state = TIER_SLOT_DELETING};
    assert_int_equal(tier_put_header(t, 4, &del), 0); /* deleted: not recovered */
    uint8_t b[4096] = {9};
    struct iovec v = {b, sizeof b};
    assert_int_equal(tier_write(t, 5, &v, 1), 0); /* never committed: not recovered */
    struct s_inv before = {0};
    assert_int_equal(tier_inventory(t, s_inv_fn, &before), 0);
    assert_int_equal(before.n, CAP / 2 - 1);
    tier_close(&t);

    t = s_open(&cfg, &o);
    assert_non_null(t);
    struct s_inv after = {0};
    assert_int_equal(tier_inventory(t, s_inv_fn, &after), 0);
    assert_int_equal(after.n, before.n);
    for (uint64_t i = 0; i < after.n; i++) {
        assert_int_equal(after.slots[i], before.slots[i]);
        assert_memory_equal(&after.h[i], &before.h[i], sizeof after.h[i]);
        assert_int_equal(s_check_simple(t, after.slots[i], SLOT - after.slots[i] * 77, 1), 0);
    }
    assert_false(s_inv_has(&after, 4));
    assert_false(s_inv_has(&after, 5));
    tier_nvme_stats_t st;
    assert_int_equal(tier_nvme_stats(t, &st), 0);
    assert_int_equal(st.recovered, before.n);
    assert_int_equal(st.torn_headers, 0);
    tier_close(&t);
}

/* Each sync policy (dsync, fdatasync, none) commits blocks that a reopen
 * recovers byte-exact, through the ops table and the batch API alike. */
static void test_each_sync_policy_commits_recoverable_blocks(void **state)
{
    (void)state;
    for (int p = TIER_NVME_SYNC_DSYNC; p <= TIER_NVME_SYNC_NONE; p++) {
        char file[32];
        snprintf(file, sizeof file, "sync-%d", p);
        tier_config_t cfg = s_cfg(file, CAP, SLOT);
        tier_nvme_opts_t o =
            s_opts(p == TIER_NVME_SYNC_FDATASYNC ? TIER_URING_SYNC : TIER_URING_RING);
        o.sync = (enum tier_nvme_sync)p;
        tier_t *t = s_open(&cfg, &o);
        assert_non_null(t);
        s_put_simple(t, 0, 70000, 4);
        void *mem;
        uint8_t *w = s_buf(3 * 8192, 0, &mem);
        struct iovec v[3];
        tier_nvme_put_t puts[3];
        for (int i = 0; i < 3; i++) {
            s_fill(w + i * 8192, 8192, (uint64_t)(i + 1) * 1000003u + 4);
            v[i] = (struct iovec){w + i * 8192, 8192};
            puts[i] = (tier_nvme_put_t){.slot = (uint64_t)i + 1, .iov = &v[i], .n = 1};
        }
        assert_int_equal(tier_nvme_put_batch(t, puts, 3), 0);
        free(mem);
        tier_close(&t);
        t = s_open(&cfg, &o);
        assert_non_null(t);
        assert_int_equal(s_check_simple(t, 0, 70000, 4), 0);
        for (uint64_t i = 1; i <= 3; i++)
            assert_int_equal(s_check_simple(t, i, 8192, 4), 0);
        tier_close(&t);
    }
}

/* Write ordering: new bytes over a SERVING slot first turn its header to
 * WRITING, so a crash before the new header never recovers the old one over
 * half-replaced bytes. */
static void test_rewrite_of_serving_slot_is_not_recovered_before_commit(void **state)
{
    (void)state;
    tier_config_t cfg = s_cfg("rewrite", CAP, SLOT);
    tier_nvme_opts_t o = s_opts(TIER_URING_AUTO);
    tier_t *t = s_open(&cfg, &o);
    assert_non_null(t);
    s_put_simple(t, 1, 65536, 1);
    s_put_simple(t, 2, 65536, 1);
    uint8_t b[65536];
    s_fill(b, sizeof b, 77);
    struct iovec v = {b, sizeof b};
    assert_int_equal(tier_write(t, 1, &v, 1), 0);
    tier_close(&t); /* "crash" before put_header */
    t = s_open(&cfg, &o);
    assert_non_null(t);
    struct s_inv inv = {0};
    assert_int_equal(tier_inventory(t, s_inv_fn, &inv), 0);
    assert_false(s_inv_has(&inv, 1));
    assert_true(s_inv_has(&inv, 2));
    tier_close(&t);
}

/* Crash safety: a child writing blocks is SIGKILLed mid-stream; after reopen
 * every block whose header is SERVING reads byte-exact, and every commit the
 * child reported is there (except at most the slot it was rewriting). */
static void test_kill9_mid_stream_every_serving_block_reads_exact(void **state)
{
    (void)state;
    const size_t size = 65536;
    tier_config_t cfg = s_cfg("kill9", CAP, size);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        tier_nvme_opts_t o = s_opts(TIER_URING_AUTO);
        o.log = s_quiet_log;
        tier_t *t = tier_nvme_open(&cfg, &o, NULL, 0);
        if (!t)
            _exit(2);
        void *mem;
        uint8_t *p = s_buf(size, 0, &mem);
        for (uint64_t gen = 1; gen < 100000; gen++) {
            for (uint64_t s = 0; s < CAP; s++) {
                s_fill(p, size, s * 1000003u + gen);
                struct iovec v = {p, size};
                if (s_put(t, s, &v, 1, s_key(s, gen), 1, 0) < 0)
                    _exit(3);
                uint64_t msg[2] = {s, gen};
                if (write(pfd[1], msg, sizeof msg) != (ssize_t)sizeof msg)
                    _exit(4);
            }
        }
        _exit(5);
    }
    close(pfd[1]);
    uint64_t committed[CAP] = {0}, seen = 0, msg[2];
    while (seen < CAP + CAP / 2 && read(pfd[0], msg, sizeof msg) == (ssize_t)sizeof msg) {
        committed[msg[0]] = msg[1];
        seen++;
    }
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    while (read(pfd[0], msg, sizeof msg) == (ssize_t)sizeof msg) /* drain to EOF */
        committed[msg[0]] = msg[1];
    close(pfd[0]);
    assert_true(seen >= CAP + CAP / 2);

    tier_nvme_opts_t o = s_opts(TIER_URING_AUTO);
    o.verify_on_open = true;
    tier_t *t = s_open(&cfg, &o);
    assert_non_null(t);
    struct s_inv inv = {0};
    assert_int_equal(tier_inventory(t, s_inv_fn, &inv), 0);
    unsigned missing = 0;
    for (uint64_t s = 0; s < CAP; s++)
        if (committed[s] && !s_inv_has(&inv, s))
            missing++;
    assert_true(missing <= 1);
    for (uint64_t i = 0; i < inv.n; i++) {
        uint64_t s, gen;
        memcpy(&s, inv.h[i].key.b, 8);
        memcpy(&gen, inv.h[i].key.b + 8, 8);
        assert_int_equal(s, inv.slots[i]);
        assert_true(gen == committed[s] || gen == committed[s] + 1);
        assert_int_equal(s_check_simple(t, s, size, gen), 0);
    }
    tier_nvme_stats_t st;
    assert_int_equal(tier_nvme_stats(t, &st), 0);
    assert_int_equal(st.checksum_failures, 0);
    tier_close(&t);
}

/* ---- layout version 2: a put is one write (issue 13 §4) ------------------------------- */

/* A file range, read or written as it is on disk (a crash's leftovers). */
static void s_file_io(const char *path, off_t off, void *buf, size_t len, bool write)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    ssize_t k = write ? pwrite(fd, buf, len, off) : pread(fd, buf, len, off);
    assert_int_equal(k, (ssize_t)len);
    if (write)
        assert_int_equal(fdatasync(fd), 0);
    close(fd);
}

static int s_put_one(tier_t *t, uint64_t slot, uint8_t *p, size_t size, uint64_t gen)
{
    s_fill(p, size, slot * 1000003u + gen);
    struct iovec v = {.iov_base = p, .iov_len = size};
    tier_io_t it = {.slot = slot, .iov = &v, .n = 1};
    it.hdr.key = s_key(slot, gen);
    it.hdr.instance = 7;
    return tier_put_batch(t, &it, 1);
}

/* Through the ops table, a put of an aligned block is one write I/O: its bytes
 * and its SERVING header record together, under each sync policy; a batch is one
 * write per block; a put survives a restart byte-exact with its header. */
static void test_put_is_one_write_of_bytes_and_header(void **state)
{
    (void)state;
    static const char *const syncs[] = {"dsync", "fdatasync", "none"};
    for (size_t m = 0; m < 3; m++) {
        char name[32];
        snprintf(name, sizeof name, "onewrite-%s", syncs[m]);
        tier_config_t cfg = s_cfg(name, CAP, SLOT);
        assert_int_equal(tier_config_set(&cfg, "sync", syncs[m]), 0);
        char err[512];
        tier_t *t = tier_open(&cfg, err, sizeof err);
        assert_non_null(t);
        tier_desc_t d;
        tier_describe(t, &d);
        assert_true(d.write_commits);
        void *mem;
        uint8_t *p = s_buf(SLOT, 0, &mem);
        tier_nvme_stats_t a, b;
        assert_int_equal(tier_nvme_stats(t, &a), 0);
        assert_int_equal(s_put_one(t, 3, p, 100000, 1), 0);
        assert_int_equal(tier_nvme_stats(t, &b), 0);
        assert_int_equal(b.write_ops - a.write_ops, 1);
        assert_int_equal(b.headers - a.headers, 1);
        assert_int_equal(b.serving, 1);
        /* a batch of 8, overwriting the first: 8 writes, no separate header write */
        struct iovec v[8];
        tier_io_t items[8];
        void *mem2;
        uint8_t *q = s_buf(8 * 65536, 0, &mem2);
        for (int i = 0; i < 8; i++) {
            s_fill(q + i * 65536, 65536, (3 + i) * 1000003u + 2);
            v[i] = (struct iovec){.iov_base = q + i * 65536, .iov_len = 65536};
            items[i] = (tier_io_t){.slot = 3 + (uint64_t)i, .iov = &v[i], .n = 1};
            items[i].hdr.key = s_key(3 + (uint64_t)i, 2);
        }
        assert_int_equal(tier_put_batch(t, items, 8), 0);
        assert_int_equal(tier_nvme_stats(t, &a), 0);
        assert_int_equal(a.write_ops - b.write_ops, 8);
        for (int i = 0; i < 8; i++) {
            assert_int_equal(items[i].rc, 0);
            assert_int_equal(items[i].hdr.state, TIER_SLOT_SERVING);
            assert_int_equal(items[i].hdr.size, 65536);
            assert_int_equal(items[i].hdr.checksum, tier_checksum(&v[i], 1));
        }
        /* the caller's checksum, when given, must match the bytes */
        items[0].hdr.checksum ^= 1;
        items[0].rc = 1;
        assert_int_equal(tier_put_batch(t, items, 1), -EBADMSG);
        assert_int_equal(s_check_simple(t, 3, 65536, 2), 0); /* untouched */
        free(mem);
        free(mem2);
        tier_close(&t);
        t = tier_open(&cfg, err, sizeof err);
        assert_non_null(t);
        struct s_inv inv = {0};
        assert_int_equal(tier_inventory(t, s_inv_fn, &inv), 0);
        assert_int_equal(inv.n, 8);
        for (uint64_t i = 0; i < 8; i++) {
            assert_int_equal(inv.slots[i], 3 + i);
            assert_memory_equal(inv.h[i].key.b, s_key(3 + i, 2).b, 16);
            assert_int_equal(s_check_simple(t, 3 + i, 65536, 2), 0);
        }
        tier_close(&t);
        unlink(cfg.path);
    }
}

/* A crash inside the one write of a put leaves its record and its bytes from
 * different generations; the checksum in the record covers the bytes, so
 * neither mix is ever served: the read fails (-EBADMSG, bytes zeroed), the
 * slot is dropped, counted, and stays dropped. (a) new record, half of the
 * bytes still old; (b) old record, bytes partly new. */
static void test_torn_put_never_serves_wrong_bytes(void **state)
{
    (void)state;
    const size_t size = 3 * 65536;
    tier_config_t cfg = s_cfg("tornput", CAP, SLOT);
    tier_nvme_opts_t o = s_opts(TIER_URING_AUTO);
    tier_t *t = s_open(&cfg, &o);
    assert_non_null(t);
    void *mem;
    uint8_t *p = s_buf(SLOT, 0, &mem);
    assert_int_equal(s_put_one(t, 1, p, size, 1), 0);
    assert_int_equal(s_put_one(t, 2, p, size, 1), 0);
    tier_close(&t);
    uint64_t data_off = s_sb_u64(cfg.path, 48), stride = s_sb_u64(cfg.path, 32);
    uint32_t rec = s_sb_u32(cfg.path, 12);
    static uint8_t old1[3 * 65536], rec2[4096];
    s_file_io(cfg.path, (off_t)(data_off + 1 * stride + rec), old1, size, false);
    s_file_io(cfg.path, (off_t)(data_off + 2 * stride), rec2, rec, false);

    t = s_open(&cfg, &o);
    assert_non_null(t);
    assert_int_equal(s_put_one(t, 1, p, size, 2), 0);
    assert_int_equal(s_put_one(t, 2, p, size, 2), 0);
    tier_close(&t);
    /* (a) slot 1: the second half of its bytes never reached the disk */
    s_file_io(cfg.path, (off_t)(data_off + 1 * stride + rec + size / 2), old1 + size / 2, size / 2,
              true);
    /* (b) slot 2: its new record never reached the disk (the old one is there) */
    s_file_io(cfg.path, (off_t)(data_off + 2 * stride), rec2, rec, true);

    t = s_open(&cfg, &o);
    assert_non_null(t);
    for (uint64_t slot = 1; slot <= 2; slot++) {
        memset(p, 0x77, size);
        struct iovec v = {.iov_base = p, .iov_len = size};
        assert_int_equal(tier_read(t, slot, &v, 1), -EBADMSG);
        for (size_t i = 0; i < size; i++)
            assert_int_equal(p[i], 0);
        assert_int_equal(s_check_simple(t, slot, size, 2), -ENODATA);
        assert_int_equal(s_check_simple(t, slot, size, 1), -ENODATA);
    }
    tier_nvme_stats_t st;
    assert_int_equal(tier_nvme_stats(t, &st), 0);
    assert_int_equal(st.checksum_failures, 2);
    assert_int_equal(st.dropped_slots, 2);
    tier_close(&t);
    t = s_open(&cfg, &o);
    assert_non_null(t);
    struct s_inv inv = {0};
    assert_int_equal(tier_inventory(t, s_inv_fn, &inv), 0);
    assert_int_equal(inv.n, 0);
    tier_close(&t);
    free(mem);
}

/* Restart under layout version 2: a child putting batches of one-write puts
 * (dsync) is SIGKILLed mid-stream; after reopen every put it was told had
 * succeeded is there, every SERVING block reads byte-exact (verified on open and
 * on read), and only the batch in flight may be missing or dropped. */
static void test_kill9_during_one_write_puts_restart_serves_exact(void **state)
{
    (void)state;
    const size_t size = 65536;
    enum { B = 4 };
    tier_config_t cfg = s_cfg("kill9put", CAP, size);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        tier_nvme_opts_t o = s_opts(TIER_URING_AUTO);
        o.log = s_quiet_log;
        char err[256];
        tier_t *t = tier_nvme_open(&cfg, &o, err, sizeof err);
        if (!t)
            _exit(2);
        void *mem;
        uint8_t *p = s_buf(B * size, 0, &mem);
        struct iovec v[B];
        tier_io_t items[B];
        for (uint64_t gen = 1; gen < 100000; gen++) {
            for (uint64_t s0 = 0; s0 < CAP; s0 += B) {
                for (uint64_t j = 0; j < B; j++) {
                    uint64_t s = s0 + j;
                    s_fill(p + j * size, size, s * 1000003u + gen);
                    v[j] = (struct iovec){.iov_base = p + j * size, .iov_len = size};
                    items[j] = (tier_io_t){.slot = s, .iov = &v[j], .n = 1};
                    items[j].hdr.key = s_key(s, gen);
                    items[j].hdr.instance = 7;
                }
                if (tier_put_batch(t, items, B) < 0)
                    _exit(3);
                uint64_t msg[2] = {s0, gen};
                if (write(pfd[1], msg, sizeof msg) != (ssize_t)sizeof msg)
                    _exit(4);
            }
        }
        _exit(5);
    }
    close(pfd[1]);
    uint64_t committed[CAP] = {0}, seen = 0, msg[2];
    while (seen < 3 * CAP / B && read(pfd[0], msg, sizeof msg) == (ssize_t)sizeof msg) {
        for (uint64_t j = 0; j < B; j++)
            committed[msg[0] + j] = msg[1];
        seen++;
    }
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    while (read(pfd[0], msg, sizeof msg) == (ssize_t)sizeof msg)
        for (uint64_t j = 0; j < B; j++)
            committed[msg[0] + j] = msg[1];
    close(pfd[0]);
    assert_true(seen >= 3 * CAP / B);

    assert_int_equal(s_sb_u32(cfg.path, 8), 2); /* layout version 2 */
    tier_nvme_opts_t o = s_opts(TIER_URING_AUTO);
    o.verify_on_open = true;
    tier_t *t = s_open(&cfg, &o);
    assert_non_null(t);
    tier_nvme_stats_t st;
    assert_int_equal(tier_nvme_stats(t, &st), 0);
    assert_true(st.checksum_failures <= B); /* the batch in flight, at most */
    struct s_inv inv = {0};
    assert_int_equal(tier_inventory(t, s_inv_fn, &inv), 0);
    unsigned missing = 0;
    for (uint64_t s = 0; s < CAP; s++)
        if (committed[s] && !s_inv_has(&inv, s))
            missing++;
    assert_true(missing <= B);
    for (uint64_t i = 0; i < inv.n; i++) {
        uint64_t s, gen;
        memcpy(&s, inv.h[i].key.b, 8);
        memcpy(&gen, inv.h[i].key.b + 8, 8);
        assert_int_equal(s, inv.slots[i]);
        assert_true(gen == committed[s] || gen == committed[s] + 1);
        assert_int_equal(s_check_simple(t, s, size, gen), 0);
    }
    tier_close(&t);
}

/* ---- corruption ----------------------------------------------------------------------- */

static void s_make_four(const tier_config_t *cfg)
{
    tier_nvme_opts_t o = s_opts(TIER_URING_AUTO);
    tier_t *t = s_open(cfg, &o);
    assert_non_null(t);
    for (uint64_t s = 0; s < 4; s++)
        s_put_simple(t, s, 100000, 1);
    tier_close(&t);
}

/* A corrupted slot is detected on read (-EBADMSG), dropped, counted, logged,
 * never served (the caller's bytes are zeroed), and stays dropped. */
static void test_corrupted_bytes_detected_on_read_and_dropped(void **state)
{
    (void)state;
    tier_config_t cfg = s_cfg("corrupt", CAP, SLOT);
    s_make_four(&cfg);
    uint64_t data_off = s_sb_u64(cfg.path, 48), stride = s_sb_u64(cfg.path, 32);
    s_scribble(cfg.path, (off_t)(data_off + 3 * stride + 5000), 64, 0x5a);

    tier_nvme_opts_t o = s_opts(TIER_URING_AUTO);
    tier_t *t = s_open(&cfg, &o);
    assert_non_null(t);
    void *mem;
    uint8_t *got = s_buf(100000, 0, &mem);
    struct iovec v = {got, 100000};
    assert_int_equal(tier_read(t, 3, &v, 1), -EBADMSG);
    for (size_t i = 0; i < 100000; i++)
        assert_int_equal(got[i], 0);
    free(mem);
    tier_nvme_stats_t st;
    assert_int_equal(tier_nvme_stats(t, &st), 0);
    assert_int_equal(st.checksum_failures, 1);
    assert_int_equal(st.dropped_slots, 1);
    assert_true(s_logged("slot 3: data checksum mismatch"));
    assert_true(s_logged("dropped, never served"));
    assert_int_equal(s_check_simple(t, 3, 100000, 1), -ENODATA);
    for (uint64_t s = 0; s < 3; s++)
        assert_int_equal(s_check_simple(t, s, 100000, 1), 0);
    tier_close(&t);

    t = s_open(&cfg, &o); /* the drop survives a restart */
    assert_non_null(t);
    struct s_inv inv = {0};
    assert_int_equal(tier_inventory(t, s_inv_fn, &inv), 0);
    assert_int_equal(inv.n, 3);
    assert_false(s_inv_has(&inv, 3));
    tier_close(&t);
}

/* With verify-on-open, a corrupted slot is dropped before anyone asks. */
static void test_corrupted_bytes_dropped_at_open_with_verify(void **state)
{
    (void)state;
    tier_config_t cfg = s_cfg("verify", CAP, SLOT);
    s_make_four(&cfg);
    uint64_t data_off = s_sb_u64(cfg.path, 48), stride = s_sb_u64(cfg.path, 32);
    s_scribble(cfg.path, (off_t)(data_off + 1 * stride + 99999), 1, 0xff);

    tier_nvme_opts_t o = s_opts(TIER_URING_SYNC);
    o.verify_on_open = true;
    tier_t *t = s_open(&cfg, &o);
    assert_non_null(t);
    tier_nvme_stats_t st;
    assert_int_equal(tier_nvme_stats(t, &st), 0);
    assert_int_equal(st.recovered, 4);
    assert_int_equal(st.checksum_failures, 1);
    assert_int_equal(st.dropped_slots, 1);
    assert_int_equal(st.serving, 3);
    assert_true(s_logged("slot 1: data checksum mismatch"));
    struct s_inv inv = {0};
    assert_int_equal(tier_inventory(t, s_inv_fn, &inv), 0);
    assert_false(s_inv_has(&inv, 1));
    assert_int_equal(s_check_simple(t, 1, 100000, 1), -ENODATA);
    tier_close(&t);
}

/* A torn header record (damaged bytes, or a half-written record) fails its
 * own checksum and is dropped at open. */
static void test_torn_header_dropped_at_open(void **state)
{
    (void)state;
    tier_config_t cfg = s_cfg("torn", CAP, SLOT);
    s_make_four(&cfg);
    /* version 2: slot i's record at headers_off (= data_off) + i * stride */
    uint64_t hdr_off = s_sb_u64(cfg.path, 40), stride = s_sb_u64(cfg.path, 32);
    uint32_t rec = s_sb_u32(cfg.path, 12);
    assert_int_equal(s_sb_u32(cfg.path, 8), 2);
    assert_int_equal(hdr_off, s_sb_u64(cfg.path, 48));
    assert_int_equal(rec, 4096);
    s_scribble(cfg.path, (off_t)(hdr_off + 2 * stride + 70), 3, 0x33);  /* damaged */
    s_scribble(cfg.path, (off_t)(hdr_off + 0 * stride + 48), 56, 0x00); /* second half lost */

    tier_nvme_opts_t o = s_opts(TIER_URING_AUTO);
    tier_t *t = s_open(&cfg, &o);
    assert_non_null(t);
    tier_nvme_stats_t st;
    assert_int_equal(tier_nvme_stats(t, &st), 0);
    assert_int_equal(st.torn_headers, 2);
    assert_int_equal(st.dropped_slots, 2);
    assert_true(s_logged("slot 2: header record fails its own check"));
    struct s_inv inv = {0};
    assert_int_equal(tier_inventory(t, s_inv_fn, &inv), 0);
    assert_int_equal(inv.n, 2);
    assert_true(s_inv_has(&inv, 1) && s_inv_has(&inv, 3));
    assert_int_equal(s_check_simple(t, 2, 100000, 1), -ENODATA);
    assert_int_equal(s_check_simple(t, 1, 100000, 1), 0);
    tier_close(&t);
}

/* ---- clear errors ------------------------------------------------------------------------ */

static tier_t *s_open_err(const tier_config_t *cfg, const tier_nvme_opts_t *o, char *err,
                          size_t len)
{
    return tier_nvme_open(cfg, o, err, len);
}

/* Issue: an NVMe path that is unwritable gives a clear error. */
static void test_unwritable_path_gives_clear_error(void **state)
{
    (void)state;
    char err[512];
    tier_nvme_opts_t o = s_opts(TIER_URING_AUTO);
    tier_config_t cfg = s_cfg("no-such-dir/tier.dat", CAP, SLOT);
    assert_null(s_open_err(&cfg, &o, err, sizeof err));
    assert_non_null(strstr(err, "cannot create: No such file or directory"));
    assert_non_null(strstr(err, cfg.path));

    snprintf(cfg.path, sizeof cfg.path, "/sys/kernel/kvt-nvme-test"); /* EACCES even as root */
    assert_null(s_open_err(&cfg, &o, err, sizeof err));
    assert_non_null(strstr(err, "cannot create: Permission denied"));

    snprintf(cfg.path, sizeof cfg.path, "%s", s_dir);
    assert_null(s_open_err(&cfg, &o, err, sizeof err));
    assert_non_null(strstr(err, "Is a directory"));

    snprintf(cfg.path, sizeof cfg.path, "/proc/version"); /* procfs: no O_DIRECT */
    assert_null(s_open_err(&cfg, &o, err, sizeof err));
    assert_non_null(strstr(err, "does not support O_DIRECT"));

    /* The ops-table path reports failure too (message on stderr). */
    cfg = s_cfg("no-such-dir/tier.dat", CAP, SLOT);
    assert_null(tier_open(&cfg, err, sizeof err));
}

/* An unprivileged process gets EACCES on a directory it may not write. */
static void test_permission_denied_gives_clear_error(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip(); /* needs root to drop to another uid */
    char dir[300];
    snprintf(dir, sizeof dir, "%s/locked", s_dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setgid(65534) < 0 || setuid(65534) < 0)
            _exit(77);
        tier_config_t cfg = s_cfg("locked/tier.dat", CAP, SLOT);
        tier_nvme_opts_t o = s_opts(TIER_URING_AUTO);
        o.log = s_quiet_log;
        char err[512];
        tier_t *t = tier_nvme_open(&cfg, &o, err, sizeof err);
        _exit(!t && strstr(err, "Permission denied") ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77)
        skip();
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* Issue: a too-small file system gives a clear error ("need X, Y free") and
 * leaves no file behind. */
static void test_too_small_filesystem_gives_clear_error(void **state)
{
    (void)state;
    char err[512];
    tier_nvme_opts_t o = s_opts(TIER_URING_AUTO);
    tier_config_t cfg = s_cfg("huge", 1u << 20, 64u << 20); /* 64 TiB */
    assert_null(s_open_err(&cfg, &o, err, sizeof err));
    assert_non_null(strstr(err, "need 64.0 TiB"));
    assert_non_null(strstr(err, " free"));
    struct stat st;
    assert_int_equal(stat(cfg.path, &st), -1);
    assert_int_equal(errno, ENOENT);

    cfg = s_cfg("overflow", UINT64_MAX / 2, 1u << 20);
    assert_null(s_open_err(&cfg, &o, err, sizeof err));
    assert_non_null(strstr(err, "overflow"));
}

/* A file shorter than its superblock says (truncated) is refused. */
static void test_truncated_file_rejected(void **state)
{
    (void)state;
    tier_config_t cfg = s_cfg("trunc", CAP, SLOT);
    s_make_four(&cfg);
    assert_int_equal(truncate(cfg.path, (off_t)s_sb_u64(cfg.path, 56) / 2), 0);
    char err[512];
    tier_nvme_opts_t o = s_opts(TIER_URING_AUTO);
    assert_null(s_open_err(&cfg, &o, err, sizeof err));
    assert_non_null(strstr(err, "truncated"));
}

/* A reopen with another geometry is rejected, never silently reformatted;
 * format (explicit) reformats. A foreign file is never overwritten. */
static void test_config_mismatch_on_reopen_rejected(void **state)
{
    (void)state;
    char err[512];
    tier_config_t cfg = s_cfg("mismatch", 8, SLOT);
    tier_nvme_opts_t o = s_opts(TIER_URING_AUTO);
    tier_t *t = s_open(&cfg, &o);
    assert_non_null(t);
    s_put_simple(t, 0, 4096, 1);
    tier_close(&t);

    tier_config_t big = s_cfg("mismatch", 16, SLOT);
    assert_null(s_open_err(&big, &o, err, sizeof err));
    assert_non_null(strstr(err, "formatted for 8 slots of 262144 bytes, config asks 16 slots"));
    tier_config_t other = s_cfg("mismatch", 8, SLOT / 2);
    assert_null(s_open_err(&other, &o, err, sizeof err));

    t = s_open(&cfg, &o); /* still intact */
    assert_non_null(t);
    assert_int_equal(s_check_simple(t, 0, 4096, 1), 0);
    tier_close(&t);

    o.format = true;
    t = s_open(&big, &o);
    assert_non_null(t);
    struct s_inv inv = {0};
    assert_int_equal(tier_inventory(t, s_inv_fn, &inv), 0);
    assert_int_equal(inv.n, 0);
    tier_close(&t);

    /* A file that is not ours. */
    tier_config_t foreign = s_cfg("foreign", 8, SLOT);
    FILE *f = fopen(foreign.path, "w");
    assert_non_null(f);
    fputs("precious data, not a tier\n", f);
    fclose(f);
    o.format = false;
    assert_null(s_open_err(&foreign, &o, err, sizeof err));
    assert_non_null(strstr(err, "not a kvtier nvme tier file"));
    char back[64] = {0};
    f = fopen(foreign.path, "r");
    assert_non_null(f);
    assert_non_null(fgets(back, sizeof back, f));
    fclose(f);
    assert_string_equal(back, "precious data, not a tier\n");
}

/* One process per tier file: a second open while it is in use is refused. */
static void test_file_in_use_rejected(void **state)
{
    (void)state;
    char err[512];
    tier_config_t cfg = s_cfg("busy", CAP, SLOT);
    tier_nvme_opts_t o = s_opts(TIER_URING_AUTO);
    o.lock_wait_ms = 20;
    tier_t *t = s_open(&cfg, &o);
    assert_non_null(t);
    assert_null(s_open_err(&cfg, &o, err, sizeof err));
    assert_non_null(strstr(err, "in use by another process"));
    tier_close(&t);
    t = s_open(&cfg, &o);
    assert_non_null(t);
    tier_close(&t);
}

/* Issue: the fallback is chosen automatically and logged when io_uring is
 * unavailable. A seccomp filter makes io_uring_setup fail with ENOSYS in a
 * child, as a kernel without io_uring (or a container blocking it) would. */
static void test_fallback_chosen_and_logged_when_io_uring_unavailable(void **state)
{
    (void)state;
    tier_config_t cfg = s_cfg("fallback", CAP, SLOT);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct sock_filter f[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
            _exit(77);
        tier_nvme_opts_t o = s_opts(TIER_URING_RING); /* forced: must fail clearly */
        char err[512];
        if (tier_nvme_open(&cfg, &o, err, sizeof err) || !strstr(err, "io_uring_queue_init"))
            _exit(1);
        o = s_opts(TIER_URING_AUTO);
        tier_t *t = tier_nvme_open(&cfg, &o, err, sizeof err);
        if (!t)
            _exit(2);
        tier_nvme_stats_t st;
        tier_nvme_stats(t, &st);
        if (strcmp(st.engine, "pread/pwrite") != 0)
            _exit(3);
        if (!s_logged("io_uring unavailable") || !s_logged("using pread/pwrite"))
            _exit(4);
        s_put_simple(t, 2, 5000, 3);
        if (s_check_simple(t, 2, 5000, 3) != 0)
            _exit(5);
        tier_close(&t);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77)
        skip(); /* no seccomp here */
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_round_trip_random_blocks_under_both_engines, s_setup),
        cmocka_unit_test_setup(test_batch_put_get_round_trip, s_setup),
        cmocka_unit_test_setup(test_write_and_commit_batches_match_one_by_one, s_setup),
        cmocka_unit_test_setup(test_batch_repeated_slot_rejected, s_setup),
        cmocka_unit_test_setup(test_put_header_requires_the_written_bytes, s_setup),
        cmocka_unit_test_setup(test_reopen_rebuilds_the_same_inventory, s_setup),
        cmocka_unit_test_setup(test_each_sync_policy_commits_recoverable_blocks, s_setup),
        cmocka_unit_test_setup(test_rewrite_of_serving_slot_is_not_recovered_before_commit,
                               s_setup),
        cmocka_unit_test_setup(test_kill9_mid_stream_every_serving_block_reads_exact, s_setup),
        cmocka_unit_test_setup(test_put_is_one_write_of_bytes_and_header, s_setup),
        cmocka_unit_test_setup(test_torn_put_never_serves_wrong_bytes, s_setup),
        cmocka_unit_test_setup(test_kill9_during_one_write_puts_restart_serves_exact, s_setup),
        cmocka_unit_test_setup(test_corrupted_bytes_detected_on_read_and_dropped, s_setup),
        cmocka_unit_test_setup(test_corrupted_bytes_dropped_at_open_with_verify, s_setup),
        cmocka_unit_test_setup(test_torn_header_dropped_at_open, s_setup),
        cmocka_unit_test_setup(test_unwritable_path_gives_clear_error, s_setup),
        cmocka_unit_test_setup(test_permission_denied_gives_clear_error, s_setup),
        cmocka_unit_test_setup(test_too_small_filesystem_gives_clear_error, s_setup),
        cmocka_unit_test_setup(test_truncated_file_rejected, s_setup),
        cmocka_unit_test_setup(test_config_mismatch_on_reopen_rejected, s_setup),
        cmocka_unit_test_setup(test_file_in_use_rejected, s_setup),
        cmocka_unit_test_setup(test_fallback_chosen_and_logged_when_io_uring_unavailable, s_setup),
    };
    return cmocka_run_group_tests(tests, s_group_setup, s_group_teardown);
}
