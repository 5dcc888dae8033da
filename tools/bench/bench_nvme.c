/* bench_nvme.c — `kvt-bench nvme`: put/get throughput of the nvme tier with
 * 256 KiB and 2 MiB blocks against raw sequential O_DIRECT I/O (io_uring at
 * the same queue depth, no checksum, no headers) on the same file system in
 * the same run, printed as ratios. Also compares the sync policies and the
 * bounce path (unaligned caller memory). Scratch files are removed at exit. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "tier.h"
#include "tier_checksum.h"
#include "tier_uring.h"

#define S_BATCH 32
#define S_SRC_BYTES (64u << 20) /* source/destination pool cycled through */

struct s_args {
    const char *dir;
    uint64_t total;
    uint32_t qd;
    uint32_t chunk;     /* bytes, 0 = the tier's default */
    const char *engine; /* the nvme tier's options (tier_nvme.h): auto|uring|sync */
    const char *sync;   /* dsync|fdatasync|none */
};

static const char *const s_syncs[] = {"dsync", "fdatasync", "none", NULL};

/* The raw baseline runs on the engine the tier is told to use. */
static enum tier_uring_kind s_engine(const struct s_args *a)
{
    return strcmp(a->engine, "sync") == 0    ? TIER_URING_SYNC
           : strcmp(a->engine, "uring") == 0 ? TIER_URING_RING
                                             : TIER_URING_AUTO;
}

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double s_gbps(uint64_t bytes, double secs)
{
    return secs > 0 ? (double)bytes / secs / 1e9 : 0.0;
}

/* ---- raw O_DIRECT baseline --------------------------------------------------- */

struct s_raw {
    uint8_t *buf; /* qd buffers of block bytes */
    uint64_t block, total, pos;
    bool write, dsync;
    bool sum;     /* reads: xxh3 of each block as it completes (what verification costs) */
    uint64_t acc; /* the sums, folded, so the work cannot be optimised away */
    int err;
};

static int s_raw_fill(void *arg, unsigned tag, tier_uring_op_t *op)
{
    struct s_raw *r = arg;
    if (r->pos >= r->total)
        return 0;
    op->buf = r->buf + (size_t)tag * r->block;
    op->len = (uint32_t)r->block;
    op->off = r->pos;
    op->write = r->write;
    op->dsync = r->dsync;
    r->pos += r->block;
    return 1;
}

static void s_raw_done(void *arg, unsigned tag, const tier_uring_op_t *op)
{
    struct s_raw *r = arg;
    (void)tag;
    if (op->res < 0 && !r->err)
        r->err = op->res;
    if (r->sum && op->res == 0) {
        struct iovec v = {op->buf, op->len};
        r->acc ^= tier_checksum(&v, 1);
    }
}

/* GB/s of one sequential pass over a preallocated O_DIRECT file. */
static double s_raw_pass(const struct s_args *a, uint64_t block, bool write, bool dsync, bool fresh,
                         bool sum)
{
    char path[512];
    snprintf(path, sizeof path, "%s/kvt-bench-raw.dat", a->dir);
    if (fresh)
        unlink(path);
    int fd = open(path, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
    if (fd < 0 || fallocate(fd, 0, 0, (off_t)a->total) < 0) {
        fprintf(stderr, "nvme bench: %s: %s\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    size_t len = (size_t)a->qd * block;
    struct s_raw r = {.block = block,
                      .total = a->total / block * block,
                      .write = write,
                      .dsync = dsync,
                      .sum = sum};
    r.buf =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    char why[200];
    tier_uring_t *io =
        r.buf == MAP_FAILED ? NULL : tier_uring_new(fd, a->qd, s_engine(a), NULL, why, sizeof why);
    double gbps = -1;
    if (io) {
        memset(r.buf, 0x5a, len);
        double t0 = s_now();
        int rc = tier_uring_run(io, s_raw_fill, s_raw_done, &r);
        double t1 = s_now();
        if (rc == 0 && r.err == 0)
            gbps = s_gbps(r.total, t1 - t0);
        else
            fprintf(stderr, "nvme bench: raw I/O failed: %s\n", strerror(-(rc ? rc : r.err)));
        tier_uring_destroy(&io);
    }
    if (r.buf != MAP_FAILED)
        munmap(r.buf, len);
    close(fd);
    return gbps;
}

/* The raw baseline for other parts (bench.h): one pass over DIR/kvt-bench-raw.dat,
 * which the caller removes when done. */
double bench_nvme_raw_pass(const char *dir, uint64_t total, uint64_t block, uint32_t qd, bool write,
                           bool dsync, bool fresh)
{
    struct s_args a = {.dir = dir, .total = total, .qd = qd, .engine = TIER_URING_AUTO};
    return s_raw_pass(&a, block, write, dsync, fresh, false);
}

/* ---- the tier ------------------------------------------------------------------ */

enum s_mode { S_OP, S_BATCH_MODE };

struct s_tier_run {
    tier_t *t;
    uint8_t *src; /* S_SRC_BYTES + 4096 */
    uint64_t block, nblocks;
};

static tier_t *s_tier_open(const struct s_args *a, uint64_t block, uint64_t nblocks,
                           const char *sync, bool fresh)
{
    char num[24];
    tier_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.name, sizeof cfg.name, "bench");
    snprintf(cfg.kind, sizeof cfg.kind, "nvme");
    snprintf(cfg.path, sizeof cfg.path, "%s/kvt-bench-tier.dat", a->dir);
    cfg.capacity = nblocks;
    cfg.slot_size = block;
    snprintf(num, sizeof num, "%u", a->qd);
    (void)tier_config_set(&cfg, "queue_depth", num);
    (void)tier_config_set(&cfg, "engine", a->engine);
    (void)tier_config_set(&cfg, "sync", sync);
    (void)tier_config_set(&cfg, "format", "true");
    if (a->chunk) {
        snprintf(num, sizeof num, "%u", a->chunk);
        (void)tier_config_set(&cfg, "chunk_bytes", num);
    }
    if (fresh) /* a new file: its extents are still unwritten */
        unlink(cfg.path);
    char err[512];
    tier_t *t = tier_open(&cfg, err, sizeof err);
    if (!t)
        fprintf(stderr, "nvme bench: %s\n", err);
    return t;
}

/* The tier's counters the bench checks after a run. */
struct s_counts {
    uint64_t checksum_failures, io_errors;
};

static void s_count(void *arg, const char *name, uint64_t value)
{
    struct s_counts *c = arg;
    if (strcmp(name, "checksum_failures") == 0)
        c->checksum_failures = value;
    else if (strcmp(name, "io_errors") == 0)
        c->io_errors = value;
}

static uint8_t *s_at(const struct s_tier_run *r, uint64_t i, size_t skew)
{
    uint64_t per = S_SRC_BYTES / r->block;
    return r->src + (i % per) * r->block + skew;
}

/* Steady state as after reclaim: every slot deleted (not timed). */
static int s_delete_all(struct s_tier_run *r)
{
    tier_slot_header_t empty = {.state = TIER_SLOT_EMPTY};
    for (uint64_t i = 0; i < r->nblocks; i++)
        if (tier_put_header(r->t, i, &empty) < 0)
            return -1;
    return 0;
}

static double s_put(struct s_tier_run *r, enum s_mode mode, size_t skew)
{
    double t0 = s_now();
    if (mode == S_OP) {
        for (uint64_t i = 0; i < r->nblocks; i++) {
            struct iovec v = {s_at(r, i, skew), r->block};
            tier_slot_header_t h = {.state = TIER_SLOT_SERVING, .size = r->block};
            memcpy(h.key.b, &i, sizeof i);
            if (tier_write(r->t, i, &v, 1) < 0 || tier_put_header(r->t, i, &h) < 0)
                return -1;
        }
    } else { /* as the tier actor does it: WriteSlots, then PutHeader(SERVING) */
        struct iovec v[S_BATCH];
        tier_io_t items[S_BATCH];
        for (uint64_t i = 0; i < r->nblocks; i += S_BATCH) {
            size_t k = 0;
            for (; k < S_BATCH && i + k < r->nblocks; k++) {
                v[k] = (struct iovec){s_at(r, i + k, skew), r->block};
                items[k] = (tier_io_t){.slot = i + k, .iov = &v[k], .n = 1};
                items[k].hdr.size = r->block;
                memcpy(items[k].hdr.key.b, &(uint64_t){i + k}, sizeof(uint64_t));
            }
            if (tier_write_batch(r->t, items, k) < 0 || tier_commit_batch(r->t, items, k) < 0)
                return -1;
        }
    }
    return s_gbps(r->nblocks * r->block, s_now() - t0);
}

static double s_get(struct s_tier_run *r, enum s_mode mode, size_t skew)
{
    double t0 = s_now();
    if (mode == S_OP) {
        for (uint64_t i = 0; i < r->nblocks; i++) {
            struct iovec v = {s_at(r, i, skew), r->block};
            if (tier_read(r->t, i, &v, 1) < 0)
                return -1;
        }
    } else {
        struct iovec v[S_BATCH];
        tier_io_t items[S_BATCH];
        for (uint64_t i = 0; i < r->nblocks; i += S_BATCH) {
            size_t k = 0;
            for (; k < S_BATCH && i + k < r->nblocks; k++) {
                v[k] = (struct iovec){s_at(r, i + k, skew), r->block};
                items[k] = (tier_io_t){.slot = i + k, .iov = &v[k], .n = 1};
            }
            if (tier_read_batch(r->t, items, k) < 0)
                return -1;
        }
    }
    return s_gbps(r->nblocks * r->block, s_now() - t0);
}

static void s_row(const char *what, double gbps, double base, const char *base_name)
{
    if (gbps < 0) {
        printf("  %-44s failed\n", what);
        return;
    }
    printf("  %-44s %6.2f GB/s   %5.2fx %s\n", what, gbps, base > 0 ? gbps / base : 0.0, base_name);
}

static int s_block_size(const struct s_args *a, uint64_t block, uint8_t *src)
{
    uint64_t nblocks = a->total / block;
    if (nblocks < S_BATCH) {
        fprintf(stderr, "nvme bench: --mib too small for %llu-byte blocks\n",
                (unsigned long long)block);
        return -1;
    }
    double raw_fresh = s_raw_pass(a, block, true, false, true, false);
    double raw_fresh_d = s_raw_pass(a, block, true, true, true, false);
    double raw_w = s_raw_pass(a, block, true, false, false, false);
    double raw_wd = s_raw_pass(a, block, true, true, false, false);
    double raw_r = s_raw_pass(a, block, false, false, false, false);
    /* the same reads, each block hashed as it completes: the cost of verifying */
    double raw_rs = s_raw_pass(a, block, false, false, false, true);
    printf("%llu KiB blocks, %llu MiB per pass, queue depth %u\n",
           (unsigned long long)(block >> 10), (unsigned long long)(a->total >> 20), a->qd);
    printf("  %-44s %6.2f GB/s\n", "raw O_DIRECT write, fresh file", raw_fresh);
    printf("  %-44s %6.2f GB/s\n", "raw O_DIRECT write + DSYNC, fresh file", raw_fresh_d);
    printf("  %-44s %6.2f GB/s\n", "raw O_DIRECT write", raw_w);
    printf("  %-44s %6.2f GB/s\n", "raw O_DIRECT write + RWF_DSYNC", raw_wd);
    printf("  %-44s %6.2f GB/s\n", "raw O_DIRECT read", raw_r);
    s_row("raw O_DIRECT read + xxh3 of each block", raw_rs, raw_r, "raw read");

    struct s_tier_run r = {.src = src, .block = block, .nblocks = nblocks};
    if (!(r.t = s_tier_open(a, block, nblocks, a->sync, true)))
        return -1;
    tier_desc_t d;
    tier_describe(r.t, &d);
    bool dsync = strcmp(a->sync, "dsync") == 0;
    double wbase = dsync ? raw_wd : raw_w;
    const char *wname = dsync ? "raw dsync write" : "raw write";
    char what[96];
    printf("  tier: %s, sync %s, chunk %u KiB\n", d.detail, a->sync,
           (a->chunk ? a->chunk : 1024u << 10) >> 10);
    double fbase = dsync ? raw_fresh_d : raw_fresh;
    snprintf(what, sizeof what, "tier put, batch %d, fresh file", S_BATCH);
    s_row(what, s_put(&r, S_BATCH_MODE, 0), fbase, dsync ? "raw dsync fresh" : "raw fresh");
    s_delete_all(&r);
    s_row("tier put, op (write + put_header)", s_put(&r, S_OP, 0), wbase, wname);
    s_row("tier get, op", s_get(&r, S_OP, 0), raw_r, "raw read");
    snprintf(what, sizeof what, "tier get, batch %d", S_BATCH);
    s_row(what, s_get(&r, S_BATCH_MODE, 0), raw_r, "raw read");
    s_row("tier get, batch, unaligned (bounce)", s_get(&r, S_BATCH_MODE, 1), raw_r, "raw read");
    s_delete_all(&r);
    snprintf(what, sizeof what, "tier put, batch %d", S_BATCH);
    s_row(what, s_put(&r, S_BATCH_MODE, 0), wbase, wname);
    s_row("tier put, batch, overwrite SERVING", s_put(&r, S_BATCH_MODE, 0), wbase, wname);
    s_delete_all(&r);
    s_row("tier put, batch, unaligned (bounce)", s_put(&r, S_BATCH_MODE, 1), wbase, wname);
    struct s_counts st = {0};
    tier_counters(r.t, s_count, &st);
    tier_close(&r.t);
    if (st.checksum_failures || st.io_errors) {
        fprintf(stderr, "nvme bench: %llu checksum failures, %llu I/O errors\n",
                (unsigned long long)st.checksum_failures, (unsigned long long)st.io_errors);
        return -1;
    }
    for (int s = 0; s_syncs[s]; s++) {
        if (strcmp(s_syncs[s], a->sync) == 0)
            continue;
        if (!(r.t = s_tier_open(a, block, nblocks, s_syncs[s], true)))
            return -1;
        snprintf(what, sizeof what, "tier put, batch %d, %s, fresh file", S_BATCH, s_syncs[s]);
        s_row(what, s_put(&r, S_BATCH_MODE, 0), raw_fresh, "raw fresh");
        s_delete_all(&r);
        snprintf(what, sizeof what, "tier put, batch %d, %s", S_BATCH, s_syncs[s]);
        s_row(what, s_put(&r, S_BATCH_MODE, 0), raw_w, "raw write");
        tier_close(&r.t);
    }
    return 0;
}

static void s_usage(void)
{
    fprintf(stderr, "usage: kvt-bench nvme [--dir DIR] [--mib N] [--qd N] [--chunk-kib N] "
                    "[--engine auto|uring|sync] [--sync dsync|fdatasync|none]\n"
                    "  DIR defaults to the current directory (it must support O_DIRECT);\n"
                    "  N MiB per pass (default 512); queue depth default 32;\n"
                    "  chunk = the tier's largest single I/O (default 1024 KiB).\n");
}

static int s_parse(int argc, char **argv, struct s_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!val)
            return -1;
        i++;
        if (strcmp(opt, "--dir") == 0)
            a->dir = val;
        else if (strcmp(opt, "--mib") == 0)
            a->total = strtoull(val, NULL, 10) << 20;
        else if (strcmp(opt, "--chunk-kib") == 0)
            a->chunk = (uint32_t)strtoul(val, NULL, 10) << 10;
        else if (strcmp(opt, "--qd") == 0)
            a->qd = (uint32_t)strtoul(val, NULL, 10);
        else if (strcmp(opt, "--engine") == 0)
            a->engine = val; /* the tier refuses a value it does not know */
        else if (strcmp(opt, "--sync") == 0)
            a->sync = val;
        else
            return -1;
    }
    return a->qd >= 1 && a->qd <= TIER_URING_DEPTH_MAX && a->total ? 0 : -1;
}

int bench_nvme(int argc, char **argv)
{
    struct s_args a = {
        .dir = ".", .total = 512ull << 20, .qd = 32, .engine = "auto", .sync = "dsync"};
    if (s_parse(argc, argv, &a) < 0) {
        s_usage();
        return 2;
    }
    uint8_t *src = mmap(NULL, S_SRC_BYTES + 4096, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (src == MAP_FAILED)
        return 1;
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i + 8 <= S_SRC_BYTES; i += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        memcpy(src + i, &x, 8);
    }
    printf("nvme tier vs raw O_DIRECT in %s (ratios against the same run)\n", a.dir);
    int rc = 0;
    static const uint64_t blocks[] = {256u << 10, 2u << 20};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0] && rc == 0; i++)
        rc = s_block_size(&a, blocks[i], src);
    munmap(src, S_SRC_BYTES + 4096);
    char path[512];
    snprintf(path, sizeof path, "%s/kvt-bench-raw.dat", a.dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/kvt-bench-tier.dat", a.dir);
    unlink(path);
    return rc < 0 ? 1 : 0;
}
