/* bench_nvme.c — `kvt-bench nvme`: put/get throughput of the nvme tier with
 * 256 KiB and 2 MiB blocks against raw O_DIRECT I/O of the same kind (io_uring,
 * no checksum, no headers) on the same file system in the same run, printed as
 * ratios: batches of 32 blocks against raw batches of 32 (all submitted, all
 * awaited), one block per call against one raw I/O per block, durable writes
 * against RWF_DSYNC writes. The machine is shared, so the tier and its baseline
 * run interleaved, --rounds times, and the medians are printed (the ratio is the
 * median of each round's ratio). Also: a raw stream at the queue depth, the
 * two-phase put the tier actor does (write, then commit), the sync policies and
 * the bounce path (unaligned caller memory). Scratch files are removed at exit. */
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
#define S_ROUNDS_MAX 15

struct s_args {
    const char *dir;
    uint64_t total;
    uint32_t qd;
    uint32_t chunk;     /* bytes, 0 = the tier's default */
    const char *engine; /* the nvme tier's options (tier_nvme.h): auto|uring|sync */
    const char *sync;   /* dsync|fdatasync|none */
    uint32_t rounds;    /* interleaved rounds, medians printed */
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
    /* nbuf buffers of block bytes, cycled through like the tier's source pool
     * (S_SRC_BYTES), so the baseline moves and hashes memory as cold as the tier's */
    uint8_t *buf;
    uint64_t nbuf;
    uint64_t block, total, pos;
    uint64_t end; /* of the batch being submitted */
    bool write, dsync;
    /* xxh3 of each block: reads as it completes (what verification costs), writes
     * before it is submitted (what a put's checksum costs) */
    bool sum;
    uint64_t acc; /* the sums, folded, so the work cannot be optimised away */
    int err;
};

static int s_raw_fill(void *arg, unsigned tag, tier_uring_op_t *op)
{
    struct s_raw *r = arg;
    if (r->pos >= r->end)
        return 0;
    (void)tag;
    op->buf = r->buf + (size_t)(r->pos / r->block % r->nbuf) * r->block;
    op->len = (uint32_t)r->block;
    if (r->sum && r->write) {
        struct iovec v = {op->buf, op->len};
        r->acc ^= tier_checksum(&v, 1);
    }
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
    if (r->sum && !r->write && op->res == 0) {
        struct iovec v = {op->buf, op->len};
        r->acc ^= tier_checksum(&v, 1);
    }
}

/* GB/s of one sequential pass over a preallocated O_DIRECT file, in batches of
 * `batch` blocks (each submitted together and awaited before the next; 0: one
 * stream at the queue depth). */
static double s_raw_batches(const struct s_args *a, uint64_t block, bool write, bool dsync,
                            bool fresh, bool sum, uint32_t batch)
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
    size_t len = (size_t)a->qd * block > S_SRC_BYTES ? (size_t)a->qd * block : S_SRC_BYTES;
    struct s_raw r = {.block = block,
                      .nbuf = len / block,
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
        uint64_t step = batch ? batch * block : r.total;
        int rc = 0;
        double t0 = s_now();
        while (rc == 0 && r.err == 0 && r.pos < r.total) {
            r.end = r.pos + step < r.total ? r.pos + step : r.total;
            rc = tier_uring_run(io, s_raw_fill, s_raw_done, &r);
        }
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

static double s_raw_pass(const struct s_args *a, uint64_t block, bool write, bool dsync, bool fresh,
                         bool sum)
{
    return s_raw_batches(a, block, write, dsync, fresh, sum, 0);
}

/* The raw baseline for other parts (bench.h): one pass over DIR/kvt-bench-raw.dat,
 * which the caller removes when done. */
double bench_nvme_raw_pass(const char *dir, uint64_t total, uint64_t block, uint32_t qd, bool write,
                           bool dsync, bool fresh)
{
    struct s_args a = {.dir = dir, .total = total, .qd = qd, .engine = "auto"};
    return s_raw_pass(&a, block, write, dsync, fresh, false);
}

/* ---- the tier ------------------------------------------------------------------ */

/* S_OP: one block per call; S_BATCH_MODE: 32 per call. A put is tier_put_batch
 * (bytes and header together); S_TWO_PHASE is the tier actor's WriteSlots then
 * PutHeader(SERVING): tier_write_batch, then tier_commit_batch. */
enum s_mode { S_OP, S_BATCH_MODE, S_TWO_PHASE };

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
    struct iovec v[S_BATCH];
    tier_io_t items[S_BATCH];
    size_t per = mode == S_OP ? 1 : S_BATCH;
    double t0 = s_now();
    for (uint64_t i = 0; i < r->nblocks; i += per) {
        size_t k = 0;
        for (; k < per && i + k < r->nblocks; k++) {
            v[k] = (struct iovec){s_at(r, i + k, skew), r->block};
            items[k] = (tier_io_t){.slot = i + k, .iov = &v[k], .n = 1};
            items[k].hdr.size = r->block;
            memcpy(items[k].hdr.key.b, &(uint64_t){i + k}, sizeof(uint64_t));
        }
        int rc =
            mode == S_TWO_PHASE ? tier_write_batch(r->t, items, k) : tier_put_batch(r->t, items, k);
        if (rc == 0 && mode == S_TWO_PHASE)
            rc = tier_commit_batch(r->t, items, k);
        if (rc < 0)
            return -1;
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
        printf("  %-46s failed\n", what);
        return;
    }
    printf("  %-46s %6.2f GB/s   %5.2fx %s\n", what, gbps, base > 0 ? gbps / base : 0.0, base_name);
}

/* The figures of one round; the baseline each is compared with. */
enum {
    X_RAW_WB, /* raw write (+RWF_DSYNC when the tier syncs so), batches of 32 */
    X_PUT_B,
    X_RAW_W1, /* the same, one block per I/O, one at a time */
    X_PUT_1,
    X_PUT_2P, /* write_batch + commit_batch, as the tier actor does */
    X_PUT_BOUNCE,
    X_RAW_RB,
    X_GET_B,
    X_RAW_R1,
    X_GET_1,
    X_GET_BOUNCE,
    X_RAW_WS, /* raw write stream at the queue depth */
    X_RAW_RS,
    X_RAW_W1S, /* one block per I/O, xxh3 of each before its write: a put's floor */
    X_RAW_R1S, /* one block per I/O, xxh3 of each after its read: a get's floor */
    X_N
};

static int s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double s_median(const double *v, uint32_t n)
{
    double tmp[S_ROUNDS_MAX];
    memcpy(tmp, v, n * sizeof *v);
    qsort(tmp, n, sizeof *tmp, s_cmp_double);
    return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

/* One row: the median GB/s over the rounds and the median of the per-round
 * ratios against the baseline (base < 0: none). */
static void s_mrow(const char *what, const double (*x)[X_N], uint32_t n, int row, int base,
                   const char *base_name)
{
    double g[S_ROUNDS_MAX], q[S_ROUNDS_MAX];
    for (uint32_t i = 0; i < n; i++) {
        if (x[i][row] < 0 || (base >= 0 && x[i][base] <= 0)) {
            printf("  %-46s failed\n", what);
            return;
        }
        g[i] = x[i][row];
        q[i] = base >= 0 ? x[i][row] / x[i][base] : 0;
    }
    if (base < 0)
        printf("  %-46s %6.2f GB/s\n", what, s_median(g, n));
    else
        printf("  %-46s %6.2f GB/s   %5.2fx %s\n", what, s_median(g, n), s_median(q, n), base_name);
}

static int s_block_size(const struct s_args *a, uint64_t block, uint8_t *src)
{
    uint64_t nblocks = a->total / block;
    if (nblocks < S_BATCH) {
        fprintf(stderr, "nvme bench: --mib too small for %llu-byte blocks\n",
                (unsigned long long)block);
        return -1;
    }
    bool dsync = strcmp(a->sync, "dsync") == 0;
    double raw_fresh = s_raw_pass(a, block, true, false, true, false);
    double raw_fresh_d = s_raw_pass(a, block, true, true, true, false);
    double raw_r = s_raw_pass(a, block, false, false, false, false);
    /* the same reads, each block hashed as it completes: the cost of verifying */
    double raw_rs = s_raw_pass(a, block, false, false, false, true);

    struct s_tier_run r = {.src = src, .block = block, .nblocks = nblocks};
    if (!(r.t = s_tier_open(a, block, nblocks, a->sync, true)))
        return -1;
    tier_desc_t d;
    tier_describe(r.t, &d);
    double fresh_put = s_put(&r, S_BATCH_MODE, 0); /* also the warm-up: extents written */
    double(*x)[X_N] = calloc(a->rounds, sizeof *x);
    if (!x)
        return -1;
    for (uint32_t i = 0; i < a->rounds; i++) {
        double *v = x[i];
        v[X_RAW_WB] = s_raw_batches(a, block, true, dsync, false, false, S_BATCH);
        s_delete_all(&r);
        v[X_PUT_B] = s_put(&r, S_BATCH_MODE, 0);
        v[X_RAW_W1] = s_raw_batches(a, block, true, dsync, false, false, 1);
        s_delete_all(&r);
        v[X_PUT_1] = s_put(&r, S_OP, 0);
        s_delete_all(&r);
        v[X_PUT_2P] = s_put(&r, S_TWO_PHASE, 0);
        s_delete_all(&r);
        v[X_PUT_BOUNCE] = s_put(&r, S_BATCH_MODE, 1);
        s_put(&r, S_BATCH_MODE, 0); /* aligned bytes again for the gets */
        v[X_RAW_RB] = s_raw_batches(a, block, false, false, false, false, S_BATCH);
        v[X_GET_B] = s_get(&r, S_BATCH_MODE, 0);
        v[X_RAW_R1] = s_raw_batches(a, block, false, false, false, false, 1);
        v[X_GET_1] = s_get(&r, S_OP, 0);
        v[X_GET_BOUNCE] = s_get(&r, S_BATCH_MODE, 1);
        v[X_RAW_WS] = s_raw_batches(a, block, true, dsync, false, false, 0);
        v[X_RAW_RS] = s_raw_batches(a, block, false, false, false, false, 0);
        v[X_RAW_W1S] = s_raw_batches(a, block, true, dsync, false, true, 1);
        v[X_RAW_R1S] = s_raw_batches(a, block, false, false, false, true, 1);
    }
    const char *w = dsync ? "raw dsync write" : "raw write";
    char what[96], base[64];
    printf("%llu KiB blocks, %llu MiB per pass, queue depth %u, %u rounds (medians)\n",
           (unsigned long long)(block >> 10), (unsigned long long)(a->total >> 20), a->qd,
           a->rounds);
    printf("  tier: %s, sync %s, chunk %u KiB\n", d.detail, a->sync,
           (a->chunk ? a->chunk : 1024u << 10) >> 10);
    snprintf(what, sizeof what, "%s, batches of %d", w, S_BATCH);
    s_mrow(what, x, a->rounds, X_RAW_WB, -1, "");
    snprintf(what, sizeof what, "tier put, batch %d (tier_put_batch)", S_BATCH);
    snprintf(base, sizeof base, "%s, batch", w);
    s_mrow(what, x, a->rounds, X_PUT_B, X_RAW_WB, base);
    snprintf(what, sizeof what, "%s, one block per I/O", w);
    s_mrow(what, x, a->rounds, X_RAW_W1, -1, "");
    snprintf(base, sizeof base, "%s, one", w);
    s_mrow("tier put, one block per call", x, a->rounds, X_PUT_1, X_RAW_W1, base);
    snprintf(base, sizeof base, "%s, batch", w);
    s_mrow("tier put, batch, write + commit (tier actor)", x, a->rounds, X_PUT_2P, X_RAW_WB, base);
    s_mrow("tier put, batch, unaligned (bounce)", x, a->rounds, X_PUT_BOUNCE, X_RAW_WB, base);
    snprintf(what, sizeof what, "raw read, batches of %d", S_BATCH);
    s_mrow(what, x, a->rounds, X_RAW_RB, -1, "");
    snprintf(what, sizeof what, "tier get, batch %d", S_BATCH);
    s_mrow(what, x, a->rounds, X_GET_B, X_RAW_RB, "raw read, batch");
    s_mrow("raw read, one block per I/O", x, a->rounds, X_RAW_R1, -1, "");
    s_mrow("tier get, one block per call", x, a->rounds, X_GET_1, X_RAW_R1, "raw read, one");
    s_mrow("tier get, batch, unaligned (bounce)", x, a->rounds, X_GET_BOUNCE, X_RAW_RB,
           "raw read, batch");
    snprintf(what, sizeof what, "%s, stream at queue depth %u", w, a->qd);
    s_mrow(what, x, a->rounds, X_RAW_WS, -1, "");
    snprintf(what, sizeof what, "tier put, batch %d, against the stream", S_BATCH);
    s_mrow(what, x, a->rounds, X_PUT_B, X_RAW_WS, "raw stream");
    snprintf(what, sizeof what, "raw read, stream at queue depth %u", a->qd);
    s_mrow(what, x, a->rounds, X_RAW_RS, -1, "");
    /* where a lone block's time goes: the raw I/O with the same xxh3 pass in series */
    snprintf(what, sizeof what, "%s, one, xxh3 before each", w);
    snprintf(base, sizeof base, "%s, one", w);
    s_mrow(what, x, a->rounds, X_RAW_W1S, X_RAW_W1, base);
    s_mrow("tier put, one block per call, vs that", x, a->rounds, X_PUT_1, X_RAW_W1S,
           "raw one + xxh3");
    s_mrow("raw read, one, xxh3 after each", x, a->rounds, X_RAW_R1S, X_RAW_R1, "raw read, one");
    s_mrow("tier get, one block per call, vs that", x, a->rounds, X_GET_1, X_RAW_R1S,
           "raw one + xxh3");
    free(x);
    printf("  once:\n");
    printf("  %-46s %6.2f GB/s\n", "raw O_DIRECT write, fresh file", raw_fresh);
    printf("  %-46s %6.2f GB/s\n", "raw O_DIRECT write + DSYNC, fresh file", raw_fresh_d);
    s_row("raw O_DIRECT read + xxh3 of each block", raw_rs, raw_r, "raw read");
    snprintf(what, sizeof what, "tier put, batch %d, fresh file", S_BATCH);
    s_row(what, fresh_put, dsync ? raw_fresh_d : raw_fresh,
          dsync ? "raw dsync fresh" : "raw fresh");
    struct s_counts st = {0};
    tier_counters(r.t, s_count, &st);
    tier_close(&r.t);
    if (st.checksum_failures || st.io_errors) {
        fprintf(stderr, "nvme bench: %llu checksum failures, %llu I/O errors\n",
                (unsigned long long)st.checksum_failures, (unsigned long long)st.io_errors);
        return -1;
    }
    double raw_w = s_raw_batches(a, block, true, false, false, false, S_BATCH);
    for (int k = 0; s_syncs[k]; k++) {
        if (strcmp(s_syncs[k], a->sync) == 0)
            continue;
        if (!(r.t = s_tier_open(a, block, nblocks, s_syncs[k], true)))
            return -1;
        snprintf(what, sizeof what, "tier put, batch %d, %s, fresh file", S_BATCH, s_syncs[k]);
        s_row(what, s_put(&r, S_BATCH_MODE, 0), raw_fresh, "raw fresh");
        s_delete_all(&r);
        snprintf(what, sizeof what, "tier put, batch %d, %s", S_BATCH, s_syncs[k]);
        s_row(what, s_put(&r, S_BATCH_MODE, 0), raw_w, "raw write, batch");
        tier_close(&r.t);
    }
    return 0;
}

static void s_usage(void)
{
    fprintf(stderr, "usage: kvt-bench nvme [--dir DIR] [--mib N] [--qd N] [--chunk-kib N] "
                    "[--engine auto|uring|sync] [--sync dsync|fdatasync|none] [--rounds N]\n"
                    "  DIR defaults to the current directory (it must support O_DIRECT);\n"
                    "  N MiB per pass (default 512); queue depth default 32;\n"
                    "  chunk = the tier's bounce buffer (default 1024 KiB);\n"
                    "  rounds of tier and baseline interleaved, medians printed (default 3, "
                    "at most 15).\n");
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
        else if (strcmp(opt, "--rounds") == 0)
            a->rounds = (uint32_t)strtoul(val, NULL, 10);
        else
            return -1;
    }
    return a->qd >= 1 && a->qd <= TIER_URING_DEPTH_MAX && a->total && a->rounds >= 1 &&
                   a->rounds <= S_ROUNDS_MAX
               ? 0
               : -1;
}

int bench_nvme(int argc, char **argv)
{
    struct s_args a = {.dir = ".",
                       .total = 512ull << 20,
                       .qd = 32,
                       .engine = "auto",
                       .sync = "dsync",
                       .rounds = 3};
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
