/* tier_nvme.c — the nvme tier backend (layout and rules in tier_nvme.h).
 * Owns one file: its superblock, its slot header records and its slot bytes,
 * plus an in-memory mirror of every header. All I/O after open goes through
 * the tier_uring engine in bounded groups of blocks, with one bounce buffer
 * and one header buffer per queue slot, so nothing is allocated per op.
 * Never serves bytes it has not verified against the header's checksum, and
 * never formats a file it did not create unless told to. Fault points
 * (bus_fault.h): nvme.write, nvme.read (a flip lands before the check) and
 * nvme.fsync, each acted on where the engine reports the op done. */
#include "tier_nvme.h"

#include "bus_fault.h"
#include "tier_checksum.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define S_GROUP 64u              /* blocks per engine run of a batch */
#define S_PAGE 4096u             /* slot stride and buffer alignment */
#define S_DATA_ALIGN (1u << 20)  /* start of the data area */
#define S_CHUNK_MAX (256u << 20) /* bound on chunk_bytes */
#define S_SUPER_SUMMED 160u      /* superblock bytes covered by its checksum */
#define S_REC_SUMMED 96u         /* record bytes covered by rec_checksum */
#define S_PIECES 8u              /* a lone block's read: pieces hashed as they arrive */
#define S_PIECE_MIN (64u << 10)

struct s_super {
    uint64_t magic;
    uint32_t version;
    uint32_t record_bytes;
    uint64_t slot_size;
    uint64_t capacity;
    uint64_t slot_stride;
    uint64_t headers_off;
    uint64_t data_off;
    uint64_t file_size;
    uint8_t uuid[16];
    uint64_t format_ms;
    uint64_t reserved;
    char name[64];
    uint64_t checksum;
};

struct s_rec {
    uint32_t magic;
    uint32_t state;
    uint64_t slot;
    uint64_t seq;
    uint8_t uuid[16];
    uint8_t key[16];
    uint32_t instance;
    uint32_t reserved;
    uint64_t size;
    uint64_t checksum;
    uint64_t deadline_ms;
    uint64_t written_ms;
    uint64_t rec_checksum;
};

/* The file layout is persistent: pin it to the offsets documented in the header. */
_Static_assert(offsetof(struct s_super, uuid) == 64, "superblock layout");
_Static_assert(offsetof(struct s_super, name) == 96, "superblock layout");
_Static_assert(offsetof(struct s_super, checksum) == S_SUPER_SUMMED, "superblock layout");
_Static_assert(offsetof(struct s_rec, key) == 40, "record layout");
_Static_assert(offsetof(struct s_rec, size) == 64, "record layout");
_Static_assert(offsetof(struct s_rec, rec_checksum) == S_REC_SUMMED, "record layout");
_Static_assert(sizeof(struct s_rec) == S_REC_SUMMED + 8, "record layout");

/* In-memory mirror of a slot: h is what its on-disk header says; pending
 * means write() put bytes there in this process that no header covers yet. */
struct s_slot {
    tier_slot_header_t h;
    uint64_t pend_size;
    uint64_t pend_sum;
    uint32_t mark; /* batch epoch: catches a slot repeated within a batch */
    bool pending;
    bool stale; /* the file's record may say more than h: listed in s_nvme.stale */
};

_Static_assert(sizeof(struct s_slot) <= 72, "memory per slot as documented in tier_nvme.h");

/* One block of a transfer group. */
struct s_blk {
    uint64_t slot;
    const struct iovec *iov; /* the caller's; written through only for reads */
    int n;
    uint64_t len;
    bool direct;
    bool hdone;       /* header run: its record reached the file */
    bool put;         /* write run: h is SERVING, committed by the same write */
    bool started;     /* write run: the piece carrying its record was produced */
    bool summed;      /* write: h.checksum computed; read: bytes verified */
    bool bad;         /* read: checksum mismatch, to be dropped after the run */
    uint64_t flip;    /* read: a fault flips bit (flip - 1) mod 8*len before the check */
    uint64_t got;     /* data bytes completed */
    uint64_t arrived; /* a split read: bit i, piece i is in */
    uint32_t hashed;  /* a split read: pieces [0, hashed) are in the hash state */
    int rc;
    tier_slot_header_t h; /* the header to persist (header runs) */
};

/* What the op holding a tag is doing. */
struct s_tagrec {
    uint32_t bi;
    uint32_t len; /* data bytes of the piece (before O_DIRECT padding) */
    uint64_t pos; /* byte offset within the block, or file offset for scans */
    bool bounce;
};

typedef struct s_nvme {
    char name[TIER_NAME_MAX];
    char path[TIER_PATH_MAX];
    tier_nvme_opts_t opts;
    int fd;
    uint64_t capacity, slot_size, stride, hdr_off, data_off, file_size;
    uint32_t rec, mem_align, off_align, chunk, depth;
    uint8_t uuid[16];
    uint64_t seq;
    uint32_t epoch;
    struct s_slot *slots;
    /* depth slabs of S_PAGE + chunk bytes: a record page, then the bounce
     * buffer, so a record and the first bounced piece are one fixed write */
    uint8_t *pool;
    size_t pool_len;
    tier_uring_t *io;
    struct s_tagrec *tags;
    struct s_blk blk[S_GROUP];
    struct s_blk aux[S_GROUP];           /* drops beside a running group */
    struct iovec xiov[TIER_MAX_IOV + 1]; /* the segments of the op being produced */
    /* A read run of one block is cut in pieces of xpiece bytes (0: not cut), each
     * hashed into hst as soon as it and those before it are in, so the checksum
     * of a lone block overlaps its own read. */
    uint64_t xpiece;
    tier_checksum_state_t *hst;
    /* slots whose write failed after its record went out: cleared to EMPTY in
     * the file (s_clear_stale) so a restart does not bring back what failed */
    uint64_t stale[S_GROUP];
    size_t nstale;
    /* cursor of the run in progress (one at a time) */
    struct s_blk *xb;
    size_t xn, xi;
    uint64_t xpos, xend;
    bool xwrite;
    int scan_err;
    tier_nvme_stats_t st;
} s_nvme_t;

/* ---- small helpers ------------------------------------------------------- */

static uint64_t s_round_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

static uint64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static const char *s_human(uint64_t bytes, char *buf, size_t len)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, len, "%.1f %s", v, unit[u]);
    return buf;
}

static uint64_t s_sum(const void *p, size_t len)
{
    struct iovec v = {.iov_base = (void *)p, .iov_len = len};
    return tier_checksum(&v, 1);
}

static void s_default_log(void *arg, const char *line)
{
    (void)arg;
    fprintf(stderr, "%s\n", line);
}

__attribute__((format(printf, 2, 3))) static void s_log(s_nvme_t *nv, const char *fmt, ...)
{
    char line[512];
    int k = snprintf(line, sizeof line, "tier %s: ", nv->name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + k, sizeof line - (size_t)k, fmt, ap);
    va_end(ap);
    nv->opts.log(nv->opts.log_arg, line);
}

/* An open failure: "tier NAME: PATH: what", to err and to the log. */
__attribute__((format(printf, 5, 6))) static int s_fail(s_nvme_t *nv, char *err, size_t errlen,
                                                        int rc, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (err && errlen)
        snprintf(err, errlen, "tier %s: %s: %s", nv->name, nv->path, msg);
    s_log(nv, "%s: %s", nv->path, msg);
    return rc;
}

static uint8_t *s_slab(s_nvme_t *nv, unsigned tag)
{
    return nv->pool + (size_t)tag * (S_PAGE + nv->chunk);
}

static uint8_t *s_bounce(s_nvme_t *nv, unsigned tag)
{
    return s_slab(nv, tag) + S_PAGE;
}

/* The record buffer of a tag: the rec bytes right before its bounce buffer. */
static uint8_t *s_hdrbuf(s_nvme_t *nv, unsigned tag)
{
    assert(nv->rec <= S_PAGE); /* open refuses more */
    return s_bounce(nv, tag) - nv->rec;
}

/* Where slot's record lies; its bytes follow the record. */
static uint64_t s_rec_off(const s_nvme_t *nv, uint64_t slot)
{
    return nv->data_off + slot * nv->stride;
}

static uint64_t s_bytes_off(const s_nvme_t *nv, uint64_t slot)
{
    return s_rec_off(nv, slot) + nv->rec;
}

static uint64_t s_iov_total(const struct iovec *iov, int n)
{
    uint64_t total = 0;
    for (int i = 0; i < n; i++)
        total += iov[i].iov_len;
    return total;
}

/* Segment and offset holding byte pos of the iov. */
static void s_iov_seek(const struct iovec *iov, int n, uint64_t pos, int *seg, uint64_t *off)
{
    int i = 0;
    while (i < n - 1 && pos >= iov[i].iov_len) {
        pos -= iov[i].iov_len;
        i++;
    }
    *seg = i;
    *off = pos;
}

static void s_gather(const struct iovec *iov, int n, uint64_t pos, uint8_t *dst, uint64_t len)
{
    int i;
    uint64_t off;
    s_iov_seek(iov, n, pos, &i, &off);
    for (; len && i < n; i++, off = 0) {
        uint64_t k = iov[i].iov_len - off < len ? iov[i].iov_len - off : len;
        memcpy(dst, (const uint8_t *)iov[i].iov_base + off, k);
        dst += k;
        len -= k;
    }
}

static void s_scatter(const struct iovec *iov, int n, uint64_t pos, const uint8_t *src,
                      uint64_t len)
{
    int i;
    uint64_t off;
    s_iov_seek(iov, n, pos, &i, &off);
    for (; len && i < n; i++, off = 0) {
        uint64_t k = iov[i].iov_len - off < len ? iov[i].iov_len - off : len;
        memcpy((uint8_t *)iov[i].iov_base + off, src, k);
        src += k;
        len -= k;
    }
}

/* The first len bytes of iov as segments (at most TIER_MAX_IOV); the count. */
static int s_iov_trim(const struct iovec *iov, int n, uint64_t len, struct iovec *out)
{
    int k = 0;
    for (int i = 0; i < n && len; i++) {
        uint64_t take = iov[i].iov_len < len ? iov[i].iov_len : len;
        out[k].iov_base = iov[i].iov_base;
        out[k++].iov_len = take;
        len -= take;
    }
    return k;
}

/* O_DIRECT straight from/to the caller's memory: every segment of the first
 * len bytes starts and ends on the alignment. */
static bool s_direct_ok(const s_nvme_t *nv, const struct iovec *iov, int n, uint64_t len)
{
    for (int i = 0; i < n && len; i++) {
        uint64_t take = iov[i].iov_len < len ? iov[i].iov_len : len;
        if ((uintptr_t)iov[i].iov_base % nv->mem_align || take % nv->off_align)
            return false;
        len -= take;
    }
    return true;
}

static void s_set_hdr(s_nvme_t *nv, uint64_t slot, const tier_slot_header_t *h)
{
    struct s_slot *s = &nv->slots[slot];
    if (s->h.state == TIER_SLOT_SERVING)
        nv->st.serving--;
    s->h = *h;
    if (h->state == TIER_SLOT_SERVING)
        nv->st.serving++;
}

/* ---- faults on purpose (bus_fault.h; docs/RELIABILITY.md "Faults") ---------- */

/* Inverts one bit of the bytes read: the check that follows must catch it. */
static void s_flip_bit(const struct iovec *v, int k, uint64_t bit)
{
    uint64_t byte = bit / 8;
    for (int j = 0; j < k; j++) {
        if (byte < v[j].iov_len) {
            ((uint8_t *)v[j].iov_base)[byte] ^= (uint8_t)(1u << (bit % 8));
            return;
        }
        byte -= v[j].iov_len;
    }
}

static void s_fault_sleep(uint32_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* The result of a completed op as the faults armed at its points make it: an
 * error in place of success, a delay (a slow disk), a read cut short (*short_by
 * bytes missing) or flipped (*flip: which injection). Off: one branch each. */
static int s_fault_io(const tier_uring_op_t *op, uint32_t *short_by, uint64_t *flip)
{
    bus_fault_hit_t hit;
    int res = op->res;
    if (res < 0)
        return res;
    if (op->dsync && bus_fault_fire(BUS_FAULT_NVME_FSYNC, &hit)) {
        if (hit.action == BUS_FAULT_DELAY)
            s_fault_sleep(hit.ms);
        else
            return -hit.err;
    }
    if (!bus_fault_fire(op->write ? BUS_FAULT_NVME_WRITE : BUS_FAULT_NVME_READ, &hit))
        return res;
    switch (hit.action) {
    case BUS_FAULT_ERROR:
        return -hit.err;
    case BUS_FAULT_DELAY:
        s_fault_sleep(hit.ms);
        break;
    case BUS_FAULT_SHORT:
        *short_by = op->len - op->len / 2;
        break;
    case BUS_FAULT_FLIP:
        *flip = hit.n;
        break;
    default:
        break;
    }
    return res;
}

static int s_barrier(s_nvme_t *nv)
{
    if (nv->opts.sync != TIER_NVME_SYNC_FDATASYNC)
        return 0;
    bus_fault_hit_t hit;
    if (bus_fault_fire(BUS_FAULT_NVME_FSYNC, &hit)) {
        if (hit.action == BUS_FAULT_ERROR) {
            nv->st.io_errors++;
            return -hit.err;
        }
        s_fault_sleep(hit.ms);
    }
    return tier_uring_datasync(nv->io);
}

/* ---- data transfers -------------------------------------------------------- */

/* Checks a block read against its header; a mismatch is zeroed at once (the
 * caller never sees the bytes) and dropped after the run. */
static void s_verify_blk(s_nvme_t *nv, struct s_blk *b, const uint64_t *sum)
{
    struct iovec v[TIER_MAX_IOV] = {{0}};
    int k = s_iov_trim(b->iov, b->n, b->len, v);
    b->summed = true;
    if (b->flip && b->len) {
        s_flip_bit(v, k, (b->flip - 1) % (b->len * 8));
        sum = NULL; /* the bytes changed after they were hashed */
    }
    b->h.checksum = sum ? *sum : tier_checksum(v, k);
    if (b->h.checksum == nv->slots[b->slot].h.checksum)
        return;
    for (int j = 0; j < k; j++)
        memset(v[j].iov_base, 0, v[j].iov_len);
    b->bad = true;
    b->rc = -EBADMSG;
}

static void s_rec_build(s_nvme_t *nv, uint64_t slot, const tier_slot_header_t *h, uint8_t *buf);

/* A write's first piece: the block's checksum (here rather than before the
 * run: it overlaps the I/O in flight), then its record, which goes to the file
 * in the same op as the bytes. 0, or the item's error (no I/O for it). */
static int s_write_start(s_nvme_t *nv, struct s_blk *b, unsigned tag)
{
    b->started = true;
    uint64_t want = b->h.checksum;
    b->h.checksum = tier_checksum(b->iov, b->n);
    b->summed = true;
    if (b->put && want && want != b->h.checksum)
        return -EBADMSG; /* bytes other than the caller described: not written */
    /* The old block stops being served before new bytes go over it. */
    struct s_slot *s = &nv->slots[b->slot];
    if (!b->put) { /* pending: WRITING with the new size and checksum, the old key */
        uint64_t sum = b->h.checksum;
        b->h = s->h;
        b->h.state = TIER_SLOT_WRITING;
        b->h.size = b->len;
        b->h.checksum = sum;
    }
    s->pending = false;
    if (s->h.state == TIER_SLOT_SERVING) {
        tier_slot_header_t h = s->h;
        h.state = TIER_SLOT_WRITING;
        s_set_hdr(nv, b->slot, &h);
    }
    s_rec_build(nv, b->slot, &b->h, s_hdrbuf(nv, tag));
    return 0;
}

static int s_data_fill(void *arg, unsigned tag, tier_uring_op_t *op)
{
    s_nvme_t *nv = arg;
    for (;; nv->xi++, nv->xpos = 0) {
        if (nv->xi >= nv->xn)
            return 0;
        struct s_blk *b = &nv->xb[nv->xi];
        if (b->rc < 0)
            continue;
        if (nv->xwrite && !b->started && (b->rc = s_write_start(nv, b, tag)) < 0)
            continue;
        if (nv->xpos < b->len || (nv->xwrite && nv->xpos == 0 && !b->hdone))
            break;
    }
    struct s_blk *b = &nv->xb[nv->xi];
    /* A write's first piece carries the record in the rec bytes before it. */
    bool with_rec = nv->xwrite && nv->xpos == 0;
    uint64_t len;
    struct s_tagrec *tr = &nv->tags[tag];
    tr->bi = (uint32_t)nv->xi;
    tr->pos = nv->xpos;
    tr->bounce = !b->direct;
    if (b->direct) {                /* the rest of the block in one op, from the caller's memory */
        struct iovec *v = nv->xiov; /* the engine copies it when it queues the op */
        unsigned k = 0;
        if (with_rec)
            v[k++] = (struct iovec){.iov_base = s_hdrbuf(nv, tag), .iov_len = nv->rec};
        int seg;
        uint64_t off;
        s_iov_seek(b->iov, b->n, nv->xpos, &seg, &off);
        uint64_t end = b->len;
        if (nv->xpiece && end - nv->xpos > nv->xpiece)
            end = nv->xpos + nv->xpiece;
        len = 0;
        for (; seg < b->n && nv->xpos + len < end; seg++, off = 0) {
            uint64_t take = b->iov[seg].iov_len - off;
            if (take > end - nv->xpos - len)
                take = end - nv->xpos - len;
            if (take)
                v[k++] = (struct iovec){.iov_base = (uint8_t *)b->iov[seg].iov_base + off,
                                        .iov_len = take};
            len += take;
        }
        if (k == 1 && !with_rec) {
            op->buf = v[0].iov_base;
            op->len = (uint32_t)v[0].iov_len;
        } else {
            op->iov = v;
            op->niov = k;
        }
    } else {
        len = b->len - nv->xpos < nv->chunk ? b->len - nv->xpos : nv->chunk;
        uint8_t *buf = s_bounce(nv, tag);
        uint64_t alen = s_round_up(len, nv->off_align);
        if (nv->xwrite) {
            s_gather(b->iov, b->n, nv->xpos, buf, len);
            memset(buf + len, 0, alen - len);
        }
        op->buf = with_rec ? buf - nv->rec : buf;
        op->len = (uint32_t)(alen + (with_rec ? nv->rec : 0));
        op->fixed = true;
    }
    tr->len = (uint32_t)len;
    op->off = s_bytes_off(nv, b->slot) + nv->xpos - (with_rec ? nv->rec : 0);
    op->write = nv->xwrite;
    op->dsync = nv->xwrite && nv->opts.sync == TIER_NVME_SYNC_DSYNC;
    if (with_rec)
        b->hdone = true; /* its record is in this op: not produced again */
    if (op->write)
        nv->st.write_ops++;
    nv->xpos += len;
    return 1;
}

static void s_data_done(void *arg, unsigned tag, const tier_uring_op_t *op)
{
    s_nvme_t *nv = arg;
    const struct s_tagrec *tr = &nv->tags[tag];
    struct s_blk *b = &nv->xb[tr->bi];
    uint32_t short_by = 0;
    int res = s_fault_io(op, &short_by, &b->flip);
    if (res < 0) {
        nv->st.io_errors++;
        if (b->rc == 0)
            b->rc = res;
        return;
    }
    uint32_t len = short_by < tr->len ? tr->len - short_by : 0;
    if (!nv->xwrite && tr->bounce)
        s_scatter(b->iov, b->n, tr->pos, s_bounce(nv, tag), len);
    if (short_by)
        nv->st.short_reads++;
    b->got += len;
    if (!nv->xwrite && nv->xpiece && b->rc == 0 && len == tr->len) {
        b->arrived |= 1ull << (tr->pos / nv->xpiece);
        while (b->arrived >> b->hashed & 1u) { /* the pieces in order, as they are in */
            uint64_t at = (uint64_t)b->hashed++ * nv->xpiece;
            uint64_t left = b->len - at < nv->xpiece ? b->len - at : nv->xpiece;
            int seg;
            uint64_t off;
            s_iov_seek(b->iov, b->n, at, &seg, &off);
            for (; left && seg < b->n; seg++, off = 0) {
                uint64_t k = b->iov[seg].iov_len - off < left ? b->iov[seg].iov_len - off : left;
                tier_checksum_update(nv->hst, (const uint8_t *)b->iov[seg].iov_base + off, k);
                left -= k;
            }
        }
    }
    if (!nv->xwrite && b->got == b->len && b->rc == 0) {
        uint64_t sum = nv->xpiece ? tier_checksum_digest(nv->hst) : 0;
        s_verify_blk(nv, b, nv->xpiece ? &sum : NULL); /* overlaps the I/O still in flight */
    }
}

static int s_data_run(s_nvme_t *nv, struct s_blk *b, size_t n, bool write)
{
    for (size_t i = 0; i < n; i++) {
        if (b[i].rc < 0)
            continue;
        b[i].direct = s_direct_ok(nv, b[i].iov, b[i].n, b[i].len);
        if (b[i].direct)
            nv->st.direct_blocks++;
        else
            nv->st.bounced_blocks++;
    }
    for (size_t i = 0; i < n; i++) {
        b[i].started = b[i].hdone = false;
        b[i].arrived = 0;
        b[i].hashed = 0;
    }
    /* A lone direct read in pieces, hashed as they come (in a group of several
     * blocks each block's check already overlaps the others' reads). */
    nv->xpiece = 0;
    if (!write && n == 1 && b[0].rc == 0 && b[0].direct && b[0].len > S_PIECE_MIN &&
        tier_uring_is_ring(nv->io)) { /* pread/pwrite would run the pieces one by one */
        nv->xpiece = s_round_up((b[0].len + S_PIECES - 1) / S_PIECES, S_PAGE);
        if (nv->xpiece < S_PIECE_MIN)
            nv->xpiece = S_PIECE_MIN;
        tier_checksum_reset(nv->hst);
    }
    nv->xb = b;
    nv->xn = n;
    nv->xi = 0;
    nv->xpos = 0;
    nv->xwrite = write;
    int rc = tier_uring_run(nv->io, s_data_fill, s_data_done, nv);
    nv->xb = NULL;
    nv->xpiece = 0;
    for (size_t i = 0; i < n; i++) {
        if (b[i].rc < 0)
            continue;
        if (rc < 0 || b[i].got != b[i].len || (write && !b[i].hdone))
            b[i].rc = rc < 0 ? rc : -EIO; /* ring trouble: not all bytes moved */
        else if (!write && !b[i].summed)  /* empty blocks have no piece */
            s_verify_blk(nv, &b[i], NULL);
    }
    return rc;
}

/* ---- header records -------------------------------------------------------- */

static void s_rec_build(s_nvme_t *nv, uint64_t slot, const tier_slot_header_t *h, uint8_t *buf)
{
    struct s_rec r;
    memset(&r, 0, sizeof r);
    r.magic = TIER_NVME_REC_MAGIC;
    r.state = h->state;
    r.slot = slot;
    r.seq = nv->seq++;
    memcpy(r.uuid, nv->uuid, sizeof r.uuid);
    memcpy(r.key, h->key.b, sizeof r.key);
    r.instance = h->instance;
    r.size = h->size;
    r.checksum = h->checksum;
    r.deadline_ms = h->deadline_ms;
    r.written_ms = s_now_ms();
    r.rec_checksum = s_sum(&r, S_REC_SUMMED);
    memset(buf, 0, nv->rec);
    memcpy(buf, &r, sizeof r);
}

static int s_hdr_fill(void *arg, unsigned tag, tier_uring_op_t *op)
{
    s_nvme_t *nv = arg;
    while (nv->xi < nv->xn && nv->xb[nv->xi].rc < 0)
        nv->xi++;
    if (nv->xi >= nv->xn)
        return 0;
    struct s_blk *b = &nv->xb[nv->xi];
    nv->tags[tag].bi = (uint32_t)nv->xi++;
    s_rec_build(nv, b->slot, &b->h, s_hdrbuf(nv, tag));
    op->buf = s_hdrbuf(nv, tag);
    op->len = nv->rec;
    op->off = s_rec_off(nv, b->slot);
    op->fixed = true;
    op->write = true;
    nv->st.write_ops++;
    op->dsync = nv->opts.sync == TIER_NVME_SYNC_DSYNC;
    return 1;
}

static void s_hdr_done(void *arg, unsigned tag, const tier_uring_op_t *op)
{
    s_nvme_t *nv = arg;
    struct s_blk *b = &nv->xb[nv->tags[tag].bi];
    uint32_t short_by = 0;
    uint64_t flip = 0;
    int res = s_fault_io(op, &short_by, &flip);
    if (res < 0) {
        nv->st.io_errors++;
        b->rc = res;
        return;
    }
    nv->st.headers++;
    b->hdone = true;
    s_set_hdr(nv, b->slot, &b->h);
    nv->slots[b->slot].stale = false;
}

/* Persists b[i].h for every block without an error; the mirror follows
 * each record that reached the file. */
static int s_hdr_run(s_nvme_t *nv, struct s_blk *b, size_t n)
{
    nv->xb = b;
    nv->xn = n;
    nv->xi = 0;
    for (size_t i = 0; i < n; i++)
        b[i].hdone = false;
    int rc = tier_uring_run(nv->io, s_hdr_fill, s_hdr_done, nv);
    nv->xb = NULL;
    if (rc < 0) /* ring trouble: records never submitted did not reach the file */
        for (size_t i = 0; i < n; i++)
            if (b[i].rc == 0 && !b[i].hdone)
                b[i].rc = rc;
    return rc;
}

/* Drops a slot whose bytes or header cannot be trusted: counted, logged,
 * and its record rewritten as EMPTY so the drop survives a restart. */
__attribute__((format(printf, 4, 5))) static void s_drop(s_nvme_t *nv, uint64_t slot, bool say,
                                                         const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    nv->st.dropped_slots++;
    nv->slots[slot].pending = false;
    if (say)
        s_log(nv, "slot %llu: %s: dropped, never served", (unsigned long long)slot, why);
    struct s_blk *d = &nv->aux[0];
    memset(d, 0, sizeof *d);
    d->slot = slot;
    d->h.state = TIER_SLOT_EMPTY;
    s_hdr_run(nv, d, 1);
    if (d->rc < 0) {
        /* The mirror must not keep serving it even if the file kept the old record. */
        tier_slot_header_t empty = {.state = TIER_SLOT_EMPTY};
        s_set_hdr(nv, slot, &empty);
        s_log(nv, "slot %llu: could not persist the drop: %s", (unsigned long long)slot,
              strerror(-d->rc));
    }
}

/* ---- writes ----------------------------------------------------------------- */

/* A new batch epoch; marks restart from zero when the counter wraps. */
static void s_next_epoch(s_nvme_t *nv)
{
    if (++nv->epoch == 0 || nv->epoch == UINT32_MAX) {
        for (uint64_t i = 0; i < nv->capacity; i++)
            nv->slots[i].mark = 0;
        nv->epoch = 1;
    }
}

static int s_check_item(s_nvme_t *nv, uint64_t slot, const struct iovec *iov, int n)
{
    if (slot >= nv->capacity)
        return -ERANGE;
    if (!iov || n <= 0 || n > TIER_MAX_IOV)
        return -EINVAL;
    if (s_iov_total(iov, n) > nv->slot_size)
        return -EMSGSIZE;
    if (nv->slots[slot].mark == nv->epoch)
        return -EINVAL; /* the same slot twice in one batch */
    nv->slots[slot].mark = nv->epoch;
    return 0;
}

/* Writes EMPTY records over the stale slots still listed; those that fail
 * stay listed for the next try (after the next write group, at close). */
static void s_clear_stale(s_nvme_t *nv)
{
    size_t k = 0;
    for (size_t i = 0; i < nv->nstale; i++) {
        if (!nv->slots[nv->stale[i]].stale)
            continue; /* a record written since replaced it */
        struct s_blk *d = &nv->aux[k++];
        memset(d, 0, sizeof *d);
        d->slot = nv->stale[i];
        d->h.state = TIER_SLOT_EMPTY;
    }
    s_hdr_run(nv, nv->aux, k);
    /* durable like a commit: under fdatasync a barrier after the clears (dsync
     * writes them durable one by one), else a failed put's old record could
     * outlive its clear in the device's cache and come back at a restart */
    bool durable = k == 0 || nv->opts.sync != TIER_NVME_SYNC_FDATASYNC || s_barrier(nv) >= 0;
    nv->nstale = 0;
    for (size_t i = 0; i < k; i++)
        if (nv->aux[i].rc < 0 || !durable)
            nv->stale[nv->nstale++] = nv->aux[i].slot;
}

/* A write that failed after its record went out: the mirror stops serving the
 * slot at once, and its record in the file is cleared (or listed to be). */
static void s_forget(s_nvme_t *nv, uint64_t slot)
{
    struct s_slot *s = &nv->slots[slot];
    tier_slot_header_t empty = {.state = TIER_SLOT_EMPTY};
    s_set_hdr(nv, slot, &empty);
    s->pending = false;
    if (s->stale)
        return;
    if (nv->nstale == S_GROUP)
        s_clear_stale(nv);
    if (nv->nstale == S_GROUP) { /* a failing disk: the checksum still guards its bytes */
        s_log(nv, "slot %llu: could not clear the record of a failed write",
              (unsigned long long)slot);
        return;
    }
    s->stale = true;
    nv->stale[nv->nstale++] = slot;
}

/* Writes the bytes of a group whose items passed s_check_item (b[i].rc 0),
 * each with its record in the same op (s_write_start): WRITING and pending
 * for a write, SERVING for a put (b[i].put, committed by that one write;
 * under fdatasync one barrier after the group makes them durable). */
static void s_write_group(s_nvme_t *nv, struct s_blk *b, size_t n)
{
    bool puts = false;
    s_data_run(nv, b, n, true);
    for (size_t i = 0; i < n; i++) {
        if (b[i].rc < 0) { /* s_write_start left it not serving, not pending */
            if (b[i].hdone)
                s_forget(nv, b[i].slot); /* its record may have reached the file */
            continue;
        }
        struct s_slot *s = &nv->slots[b[i].slot];
        s_set_hdr(nv, b[i].slot, &b[i].h); /* the mirror follows the record written */
        s->stale = false;
        nv->st.headers++;
        nv->st.writes++;
        nv->st.bytes_written += b[i].len;
        puts |= b[i].put;
        s->pending = !b[i].put;
        s->pend_size = b[i].len;
        s->pend_sum = b[i].h.checksum;
    }
    int rc = puts ? s_barrier(nv) : 0;
    for (size_t i = 0; i < n && rc < 0; i++) {
        if (b[i].rc == 0 && b[i].put) {
            b[i].rc = rc;
            s_forget(nv, b[i].slot); /* not acknowledged: not served, not recovered */
        }
    }
    if (nv->nstale)
        s_clear_stale(nv);
}

/* The header a put_header(SERVING) may persist: size and checksum come from
 * the bytes this tier wrote (or the SERVING header already there). */
static int s_serving_hdr(s_nvme_t *nv, uint64_t slot, const tier_slot_header_t *in,
                         tier_slot_header_t *out)
{
    const struct s_slot *s = &nv->slots[slot];
    uint64_t size, sum;
    if (s->pending) {
        size = s->pend_size;
        sum = s->pend_sum;
    } else if (s->h.state == TIER_SLOT_SERVING) {
        size = s->h.size;
        sum = s->h.checksum;
    } else {
        return -ENODATA;
    }
    if (in->size != size)
        return -EINVAL;
    if (in->checksum && in->checksum != sum)
        return -EBADMSG;
    *out = *in;
    out->checksum = sum;
    return 0;
}

/* Persists SERVING headers for the blocks without an error (per the sync
 * policy), then clears their pending state. */
static void s_commit_group(s_nvme_t *nv, struct s_blk *b, size_t n)
{
    int rc = s_barrier(nv);
    for (size_t i = 0; i < n && rc < 0; i++)
        if (b[i].rc == 0)
            b[i].rc = rc;
    s_hdr_run(nv, b, n);
    rc = s_barrier(nv);
    for (size_t i = 0; i < n; i++) {
        if (b[i].rc == 0 && rc < 0)
            b[i].rc = rc;
        if (b[i].rc == 0)
            nv->slots[b[i].slot].pending = false;
    }
}

static int s_put_group(s_nvme_t *nv, tier_nvme_put_t *items, size_t n)
{
    struct s_blk *b = nv->blk;
    for (size_t i = 0; i < n; i++) {
        tier_nvme_put_t *it = &items[i];
        memset(&b[i], 0, sizeof b[i]);
        b[i].slot = it->slot;
        b[i].iov = it->iov;
        b[i].n = it->n;
        b[i].rc = s_check_item(nv, it->slot, it->iov, it->n);
        if (b[i].rc < 0)
            continue;
        b[i].len = s_iov_total(it->iov, it->n);
        b[i].h = it->hdr; /* its checksum: 0 or the expected one (s_write_start) */
        b[i].h.state = TIER_SLOT_SERVING;
        b[i].h.size = b[i].len;
        b[i].put = true;
    }
    s_write_group(nv, b, n);
    int first = 0;
    for (size_t i = 0; i < n; i++) {
        items[i].rc = b[i].rc;
        if (b[i].rc == 0)
            items[i].hdr = b[i].h;
        else if (!first)
            first = b[i].rc;
    }
    return first;
}

/* ---- reads ------------------------------------------------------------------ */

static int s_check_get(s_nvme_t *nv, uint64_t slot, const struct iovec *iov, int n)
{
    if (slot >= nv->capacity)
        return -ERANGE;
    if (!iov || n <= 0 || n > TIER_MAX_IOV)
        return -EINVAL;
    const struct s_slot *s = &nv->slots[slot];
    if (s->h.state != TIER_SLOT_SERVING)
        return -ENODATA;
    if (s_iov_total(iov, n) < s->h.size)
        return -EMSGSIZE;
    return 0;
}

/* Counts what a read group verified and drops the slots that failed. */
/* A block whose bytes did not match its header is read once more before it is
 * dropped: a bit flipped in transit (memory, bus, controller) is not damage on the
 * disk, and dropping an acknowledged block for it would lose it. Only a block whose
 * re-read fails its check too is dropped. */
static void s_verify_group(s_nvme_t *nv, struct s_blk *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (b[i].bad) {
            nv->st.checksum_failures++;
            uint64_t first = b[i].h.checksum;
            struct s_blk *r = &b[i];
            *r = (struct s_blk){.slot = r->slot, .iov = r->iov, .n = r->n, .len = r->len};
            s_data_run(nv, r, 1, false);
            if (r->rc == 0) {
                nv->st.reread_recovered++;
                s_log(nv, "slot %llu: data checksum mismatch (header %016llx, bytes %016llx), "
                          "the re-read matched: served",
                      (unsigned long long)r->slot,
                      (unsigned long long)nv->slots[r->slot].h.checksum,
                      (unsigned long long)first);
            } else if (r->bad) {
                s_drop(nv, r->slot, true,
                       "data checksum mismatch (header %016llx, bytes %016llx, re-read %016llx)",
                       (unsigned long long)nv->slots[r->slot].h.checksum,
                       (unsigned long long)first, (unsigned long long)r->h.checksum);
            } /* the re-read failed otherwise (an I/O error): its rc, the slot kept */
        }
        if (b[i].rc == 0) {
            nv->st.reads++;
            nv->st.bytes_read += b[i].len;
        }
    }
}

static int s_get_group(s_nvme_t *nv, tier_nvme_get_t *items, size_t n)
{
    struct s_blk *b = nv->blk;
    for (size_t i = 0; i < n; i++) {
        tier_nvme_get_t *it = &items[i];
        memset(&b[i], 0, sizeof b[i]);
        b[i].slot = it->slot;
        b[i].iov = it->iov;
        b[i].n = it->n;
        b[i].rc = s_check_get(nv, it->slot, it->iov, it->n);
        if (b[i].rc == 0)
            b[i].len = nv->slots[it->slot].h.size;
    }
    s_data_run(nv, b, n, false);
    s_verify_group(nv, b, n);
    int first = 0;
    for (size_t i = 0; i < n; i++) {
        items[i].rc = b[i].rc;
        items[i].size = b[i].rc == 0 ? b[i].len : 0;
        if (b[i].rc < 0 && !first)
            first = b[i].rc;
    }
    return first;
}

/* ---- superblock and layout -------------------------------------------------- */

struct s_geom {
    uint64_t stride, hdr_off, data_off, file_size;
};

static int s_geom(uint64_t capacity, uint64_t slot_size, uint32_t rec, struct s_geom *g)
{
    uint64_t data_bytes;
    if (slot_size > UINT64_MAX - rec - S_PAGE)
        return -EOVERFLOW;
    g->stride = s_round_up(rec + slot_size, S_PAGE); /* the record, then the bytes */
    if (__builtin_mul_overflow(capacity, g->stride, &data_bytes))
        return -EOVERFLOW;
    g->data_off = s_round_up(TIER_NVME_SUPER_BYTES, S_DATA_ALIGN);
    g->hdr_off = g->data_off; /* records in line: slot i's at data_off + i * stride */
    if (__builtin_add_overflow(g->data_off, data_bytes, &g->file_size) ||
        g->file_size > (uint64_t)INT64_MAX)
        return -EOVERFLOW;
    return 0;
}

static int s_layout(s_nvme_t *nv, uint32_t rec)
{
    struct s_geom g;
    int rc = s_geom(nv->capacity, nv->slot_size, rec, &g);
    if (rc < 0)
        return rc;
    nv->rec = rec;
    nv->stride = g.stride;
    nv->hdr_off = g.hdr_off;
    nv->data_off = g.data_off;
    nv->file_size = g.file_size;
    return 0;
}

static void s_super_build(s_nvme_t *nv, uint8_t *buf)
{
    struct s_super sb;
    memset(&sb, 0, sizeof sb);
    sb.magic = TIER_NVME_MAGIC;
    sb.version = TIER_NVME_VERSION;
    sb.record_bytes = nv->rec;
    sb.slot_size = nv->slot_size;
    sb.capacity = nv->capacity;
    sb.slot_stride = nv->stride;
    sb.headers_off = nv->hdr_off;
    sb.data_off = nv->data_off;
    sb.file_size = nv->file_size;
    memcpy(sb.uuid, nv->uuid, sizeof sb.uuid);
    sb.format_ms = s_now_ms();
    snprintf(sb.name, sizeof sb.name, "%s", nv->name);
    sb.checksum = s_sum(&sb, S_SUPER_SUMMED);
    memset(buf, 0, TIER_NVME_SUPER_BYTES);
    memcpy(buf, &sb, sizeof sb);
}

static int s_pio(int fd, void *buf, size_t len, uint64_t off, bool write)
{
    size_t done = 0;
    while (done < len) {
        ssize_t k = write ? pwrite(fd, (uint8_t *)buf + done, len - done, (off_t)(off + done))
                          : pread(fd, (uint8_t *)buf + done, len - done, (off_t)(off + done));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -errno;
        if (k == 0)
            return (int)done;
        done += (size_t)k;
    }
    return (int)done;
}

/* Existing contents, checked against the config. Returns 0 when usable, 1
 * when it must be formatted (only with opts.format), or a negative error. */
static int s_super_load(s_nvme_t *nv, const struct stat *st, char *err, size_t errlen)
{
    char why[256];
    struct s_super sb;
    uint8_t *buf = s_bounce(nv, 0);
    int k = s_pio(nv->fd, buf, TIER_NVME_SUPER_BYTES, 0, false);
    if (k < 0)
        return s_fail(nv, err, errlen, k, "reading the superblock: %s", strerror(-k));
    memcpy(&sb, buf, sizeof sb);
    struct s_geom want;
    if (k < (int)TIER_NVME_SUPER_BYTES || sb.magic != TIER_NVME_MAGIC)
        snprintf(why, sizeof why, "not a kvtier nvme tier file (%lld bytes, no superblock)",
                 (long long)st->st_size);
    else if (sb.checksum != s_sum(&sb, S_SUPER_SUMMED))
        snprintf(why, sizeof why, "superblock checksum mismatch (corrupt)");
    else if (sb.version == 1)
        snprintf(why, sizeof why,
                 "file version 1 (header records apart from the bytes), this build reads "
                 "version %u only (each record in the same write as its bytes); version 1 "
                 "files are not migrated",
                 TIER_NVME_VERSION);
    else if (sb.version != TIER_NVME_VERSION)
        snprintf(why, sizeof why, "file version %u, this build reads version %u", sb.version,
                 TIER_NVME_VERSION);
    else if (sb.slot_size != nv->slot_size || sb.capacity != nv->capacity)
        snprintf(why, sizeof why,
                 "formatted for %llu slots of %llu bytes, config asks %llu slots of %llu bytes",
                 (unsigned long long)sb.capacity, (unsigned long long)sb.slot_size,
                 (unsigned long long)nv->capacity, (unsigned long long)nv->slot_size);
    else if (sb.record_bytes < nv->rec || sb.record_bytes > S_PAGE ||
             (sb.record_bytes & (sb.record_bytes - 1)))
        snprintf(why, sizeof why,
                 "header records of %u bytes do not suit O_DIRECT alignment %u here",
                 sb.record_bytes, nv->rec);
    else if (s_geom(sb.capacity, sb.slot_size, sb.record_bytes, &want) < 0 ||
             want.stride != sb.slot_stride || want.hdr_off != sb.headers_off ||
             want.data_off != sb.data_off || want.file_size != sb.file_size)
        snprintf(why, sizeof why, "superblock layout inconsistent (corrupt)");
    else if ((uint64_t)st->st_size < sb.file_size)
        snprintf(why, sizeof why, "truncated: %lld bytes, its layout needs %llu",
                 (long long)st->st_size, (unsigned long long)sb.file_size);
    else
        why[0] = '\0';
    if (why[0] && nv->opts.format) {
        s_log(nv, "%s: %s: formatting (format requested; its blocks are lost)", nv->path, why);
        return 1;
    }
    if (why[0])
        return s_fail(nv, err, errlen, -EINVAL,
                      "%s; refusing to use it (set format to reformat, destroying its blocks)",
                      why);
    s_layout(nv, sb.record_bytes);
    memcpy(nv->uuid, sb.uuid, sizeof nv->uuid);
    return 0;
}

/* Every record of a reused file zero (an empty slot): the slot area at once,
 * or record by record where the file system cannot zero a range. */
static int s_zero_headers(s_nvme_t *nv)
{
    uint64_t len = nv->file_size - nv->data_off;
    if (fallocate(nv->fd, FALLOC_FL_ZERO_RANGE, (off_t)nv->data_off, (off_t)len) == 0)
        return 0;
    uint8_t *buf = s_bounce(nv, 0);
    memset(buf, 0, nv->rec);
    for (uint64_t slot = 0; slot < nv->capacity; slot++) {
        int rc = s_pio(nv->fd, buf, nv->rec, s_rec_off(nv, slot), true);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int s_format(s_nvme_t *nv, const struct stat *st, bool created, char *err, size_t errlen)
{
    char need[32], avail[32];
    struct statvfs vfs;
    int rc;
    if (s_layout(nv, nv->rec) < 0)
        return s_fail(nv, err, errlen, -EOVERFLOW, "%llu slots of %llu bytes overflow a file",
                      (unsigned long long)nv->capacity, (unsigned long long)nv->slot_size);
    uint64_t have = (uint64_t)st->st_blocks * 512u;
    if (fstatvfs(nv->fd, &vfs) == 0) {
        uint64_t free_b = (uint64_t)vfs.f_bavail * vfs.f_frsize;
        if (nv->file_size > have && nv->file_size - have > free_b)
            return s_fail(nv, err, errlen, -ENOSPC, "need %s, %s free",
                          s_human(nv->file_size, need, sizeof need),
                          s_human(free_b, avail, sizeof avail));
    }
    if (fallocate(nv->fd, 0, 0, (off_t)nv->file_size) < 0) {
        rc = -errno;
        if (rc == -ENOSPC || rc == -EFBIG)
            return s_fail(nv, err, errlen, rc, "need %s: %s",
                          s_human(nv->file_size, need, sizeof need), strerror(-rc));
        return s_fail(nv, err, errlen, rc, "cannot preallocate %s (fallocate: %s)",
                      s_human(nv->file_size, need, sizeof need), strerror(-rc));
    }
    if ((uint64_t)st->st_size > nv->file_size && ftruncate(nv->fd, (off_t)nv->file_size) < 0)
        return s_fail(nv, err, errlen, -errno, "ftruncate: %s", strerror(errno));
    if (!created && (rc = s_zero_headers(nv)) < 0)
        return s_fail(nv, err, errlen, rc, "clearing the header area: %s", strerror(-rc));
    if (getrandom(nv->uuid, sizeof nv->uuid, 0) != (ssize_t)sizeof nv->uuid)
        return s_fail(nv, err, errlen, -EIO, "getrandom failed");
    s_super_build(nv, s_bounce(nv, 0));
    rc = s_pio(nv->fd, s_bounce(nv, 0), TIER_NVME_SUPER_BYTES, 0, true);
    if (rc >= 0 && fdatasync(nv->fd) < 0)
        rc = -errno;
    if (rc < 0)
        return s_fail(nv, err, errlen, rc, "writing the superblock: %s", strerror(-rc));
    return 0;
}

/* ---- inventory scan at open --------------------------------------------------- */

static bool s_is_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* Loads slot's record into the mirror. 1 = torn/damaged (to be dropped). */
static int s_rec_load(s_nvme_t *nv, uint64_t slot, const uint8_t *buf)
{
    struct s_rec r;
    if (s_is_zero(buf, sizeof r))
        return 0;
    memcpy(&r, buf, sizeof r);
    if (r.magic != TIER_NVME_REC_MAGIC || r.rec_checksum != s_sum(&r, S_REC_SUMMED))
        return 1;
    if (memcmp(r.uuid, nv->uuid, sizeof r.uuid) != 0)
        return 0; /* a record of an earlier format: nothing to recover */
    if (r.slot != slot || r.state > TIER_SLOT_DELETING || r.size > nv->slot_size)
        return 1;
    if (r.seq >= nv->seq)
        nv->seq = r.seq + 1;
    tier_slot_header_t h = {.instance = r.instance,
                            .state = r.state,
                            .size = r.size,
                            .checksum = r.checksum,
                            .deadline_ms = r.deadline_ms};
    memcpy(h.key.b, r.key, sizeof h.key.b);
    s_set_hdr(nv, slot, &h);
    if (h.state == TIER_SLOT_SERVING)
        nv->st.recovered++;
    return 0;
}

static int s_scan_fill(void *arg, unsigned tag, tier_uring_op_t *op)
{
    s_nvme_t *nv = arg;
    if (nv->xpos >= nv->capacity)
        return 0;
    nv->tags[tag].pos = nv->xpos; /* the slot */
    op->buf = s_hdrbuf(nv, tag);
    op->len = nv->rec;
    op->off = s_rec_off(nv, nv->xpos);
    op->fixed = true;
    nv->xpos++;
    return 1;
}

static void s_scan_done(void *arg, unsigned tag, const tier_uring_op_t *op)
{
    s_nvme_t *nv = arg;
    uint64_t slot = nv->tags[tag].pos;
    if (op->res < 0) {
        nv->st.io_errors++;
        nv->scan_err = op->res;
        s_log(nv, "reading the header record of slot %llu: %s", (unsigned long long)slot,
              strerror(-op->res));
        return;
    }
    if (s_rec_load(nv, slot, s_hdrbuf(nv, tag)))
        nv->slots[slot].mark = UINT32_MAX; /* torn: dropped after the scan */
}

static int s_scan(s_nvme_t *nv)
{
    nv->xpos = 0;
    nv->seq = 1;
    int rc = tier_uring_run(nv->io, s_scan_fill, s_scan_done, nv);
    if (rc < 0)
        return rc;
    if (nv->scan_err < 0)
        return nv->scan_err;
    uint64_t torn = 0;
    for (uint64_t i = 0; i < nv->capacity; i++) {
        if (nv->slots[i].mark != UINT32_MAX)
            continue;
        nv->slots[i].mark = 0;
        nv->st.torn_headers++;
        torn++;
        s_drop(nv, i, torn <= TIER_NVME_LOG_DROPS_AT_OPEN,
               "header record fails its own check (torn or damaged write)");
    }
    if (torn > TIER_NVME_LOG_DROPS_AT_OPEN)
        s_log(nv, "%llu torn header records dropped in all", (unsigned long long)torn);
    return 0;
}

/* Reads every SERVING slot in groups and drops those that fail their checksum. */
static int s_verify_all(s_nvme_t *nv)
{
    uint64_t each = s_round_up(nv->slot_size, S_PAGE);
    size_t per = (size_t)((uint64_t)nv->depth * nv->chunk / each);
    per = per < 1 ? 1 : (per > S_GROUP ? S_GROUP : per);
    size_t len = per * each;
    uint8_t *scratch = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (scratch == MAP_FAILED)
        return -ENOMEM;
    struct iovec v[S_GROUP];
    tier_nvme_get_t items[S_GROUP];
    uint64_t bad = nv->st.checksum_failures;
    for (uint64_t slot = 0; slot < nv->capacity;) {
        size_t k = 0;
        for (; slot < nv->capacity && k < per; slot++) {
            if (nv->slots[slot].h.state != TIER_SLOT_SERVING)
                continue;
            v[k].iov_base = scratch + k * each;
            v[k].iov_len = each;
            items[k] = (tier_nvme_get_t){.slot = slot, .iov = &v[k], .n = 1};
            k++;
        }
        if (k)
            s_get_group(nv, items, k);
    }
    munmap(scratch, len);
    s_log(nv, "verify on open: %llu slot(s) failed their checksum",
          (unsigned long long)(nv->st.checksum_failures - bad));
    return 0;
}

/* ---- open / close ------------------------------------------------------------- */

static void s_free(s_nvme_t *nv)
{
    if (!nv)
        return;
    tier_uring_destroy(&nv->io);
    if (nv->pool)
        munmap(nv->pool, nv->pool_len);
    free(nv->tags);
    free(nv->slots);
    free(nv->hst);
    if (nv->fd >= 0)
        close(nv->fd);
    free(nv);
}

static int s_engine_kind(s_nvme_t *nv, enum tier_uring_kind *kind, char *err, size_t errlen)
{
    *kind = nv->opts.engine;
    const char *env = getenv(TIER_NVME_ENV_ENGINE);
    if (*kind != TIER_URING_AUTO || !env || !env[0])
        return 0;
    if (strcmp(env, "auto") == 0)
        *kind = TIER_URING_AUTO;
    else if (strcmp(env, "uring") == 0)
        *kind = TIER_URING_RING;
    else if (strcmp(env, "sync") == 0)
        *kind = TIER_URING_SYNC;
    else
        return s_fail(nv, err, errlen, -EINVAL, "%s=%s: expected auto, uring or sync",
                      TIER_NVME_ENV_ENGINE, env);
    return 0;
}

/* O_DIRECT alignment of the file (statx), 4096 when the kernel does not say. */
static void s_dio_align(s_nvme_t *nv)
{
    nv->mem_align = S_PAGE;
    nv->off_align = S_PAGE;
#ifdef STATX_DIOALIGN
    struct statx sx;
    if (statx(nv->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
        (sx.stx_mask & STATX_DIOALIGN) && sx.stx_dio_offset_align && sx.stx_dio_mem_align) {
        nv->mem_align = sx.stx_dio_mem_align;
        nv->off_align = sx.stx_dio_offset_align;
    }
#endif
    uint32_t rec = nv->off_align > nv->mem_align ? nv->off_align : nv->mem_align;
    /* Version 2 records take a whole page (the bytes after them stay 4096-aligned);
     * an alignment above that is refused at open. */
    nv->rec = rec <= S_PAGE ? S_PAGE : rec;
}

static int s_open_file(s_nvme_t *nv, bool *created, char *err, size_t errlen)
{
    *created = false;
    nv->fd = open(nv->path, O_RDWR | O_DIRECT | O_CLOEXEC);
    if (nv->fd < 0 && errno == ENOENT) {
        nv->fd = open(nv->path, O_RDWR | O_DIRECT | O_CLOEXEC | O_CREAT | O_EXCL, 0600);
        *created = nv->fd >= 0;
        if (nv->fd < 0 && errno != EINVAL)
            return s_fail(nv, err, errlen, -errno, "cannot create: %s", strerror(errno));
    }
    if (nv->fd < 0 && errno == EINVAL)
        return s_fail(nv, err, errlen, -EOPNOTSUPP, "file system does not support O_DIRECT");
    if (nv->fd < 0)
        return s_fail(nv, err, errlen, -errno, "cannot open for reading and writing: %s",
                      strerror(errno));
    /* A process killed a moment ago can still hold the lock while the kernel
     * tears down its io_uring (requests in flight keep the file open). */
    const struct timespec step = {.tv_nsec = 10 * 1000 * 1000};
    for (uint32_t waited = 0; flock(nv->fd, LOCK_EX | LOCK_NB) < 0; waited += 10) {
        if (errno != EWOULDBLOCK || waited >= nv->opts.lock_wait_ms)
            return s_fail(nv, err, errlen, errno == EWOULDBLOCK ? -EBUSY : -errno,
                          "in use by another process (flock: %s)", strerror(errno));
        nanosleep(&step, NULL);
    }
    return 0;
}

static int s_alloc(s_nvme_t *nv, char *err, size_t errlen)
{
    /* Per tag a record page (the largest record, S_PAGE) and a bounce buffer. */
    nv->pool_len = (size_t)nv->depth * (S_PAGE + nv->chunk);
    /* Pre-faulted: first touches of fresh memory are slow (ENVIRONMENT.md). */
    nv->pool = mmap(NULL, nv->pool_len, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (nv->pool == MAP_FAILED)
        nv->pool = NULL;
    nv->tags = calloc(nv->depth, sizeof *nv->tags);
    nv->slots = calloc(nv->capacity, sizeof *nv->slots);
    nv->hst = aligned_alloc(_Alignof(tier_checksum_state_t), sizeof *nv->hst);
    if (!nv->pool || !nv->tags || !nv->slots || !nv->hst)
        return s_fail(nv, err, errlen, -ENOMEM,
                      "out of memory (%u x %u bytes of buffers, %llu slots)", nv->depth, nv->chunk,
                      (unsigned long long)nv->capacity);
    return 0;
}

static int s_engine(s_nvme_t *nv, char *err, size_t errlen)
{
    enum tier_uring_kind kind;
    int rc = s_engine_kind(nv, &kind, err, errlen);
    if (rc < 0)
        return rc;
    struct iovec *bufs = calloc(nv->depth, sizeof *bufs);
    if (!bufs)
        return s_fail(nv, err, errlen, -ENOMEM, "out of memory");
    for (unsigned i = 0; i < nv->depth; i++) {
        bufs[i].iov_base = s_slab(nv, i); /* record page and bounce buffer */
        bufs[i].iov_len = S_PAGE + nv->chunk;
    }
    char why[200];
    nv->io = tier_uring_new(nv->fd, nv->depth, kind, bufs, why, sizeof why);
    free(bufs);
    if (!nv->io)
        return s_fail(nv, err, errlen, -EOPNOTSUPP, "I/O engine: %s", why);
    if (why[0])
        s_log(nv, "%s; using pread/pwrite (queue depth 1)", why);
    return 0;
}

static int s_check_cfg(s_nvme_t *nv, const tier_config_t *cfg, char *err, size_t errlen)
{
    if (!cfg->path[0])
        return s_fail(nv, err, errlen, -EINVAL, "no file path configured");
    if (cfg->capacity == 0 || cfg->slot_size == 0)
        return s_fail(nv, err, errlen, -EINVAL, "capacity and slot size must be positive");
    nv->depth = nv->opts.queue_depth ? nv->opts.queue_depth : TIER_NVME_DEFAULT_DEPTH;
    if (nv->depth > TIER_URING_DEPTH_MAX)
        return s_fail(nv, err, errlen, -EINVAL, "queue depth %u above the limit %u", nv->depth,
                      TIER_URING_DEPTH_MAX);
    if ((unsigned)nv->opts.engine > TIER_URING_SYNC ||
        (unsigned)nv->opts.sync > TIER_NVME_SYNC_NONE)
        return s_fail(nv, err, errlen, -EINVAL, "unknown engine %d or sync policy %d",
                      (int)nv->opts.engine, (int)nv->opts.sync);
    uint32_t chunk = nv->opts.chunk_bytes ? nv->opts.chunk_bytes : TIER_NVME_DEFAULT_CHUNK;
    if (chunk % S_PAGE || chunk > S_CHUNK_MAX)
        return s_fail(nv, err, errlen, -EINVAL, "chunk of %u bytes: need a multiple of %u up to %u",
                      chunk, S_PAGE, S_CHUNK_MAX);
    uint64_t stride = s_round_up(cfg->slot_size, S_PAGE);
    nv->chunk = stride < chunk ? (uint32_t)stride : chunk;
    return 0;
}

static int s_open_impl(tier_t *t, const tier_config_t *cfg, const tier_nvme_opts_t *opts, char *err,
                       size_t errlen)
{
    s_nvme_t *nv = calloc(1, sizeof *nv);
    if (!nv)
        return -ENOMEM;
    nv->fd = -1;
    nv->opts = *opts;
    if (!nv->opts.log)
        nv->opts.log = s_default_log;
    snprintf(nv->name, sizeof nv->name, "%s", cfg->name[0] ? cfg->name : "nvme");
    snprintf(nv->path, sizeof nv->path, "%s", cfg->path);
    nv->capacity = cfg->capacity;
    nv->slot_size = cfg->slot_size;
    bool created = false;
    struct stat st;
    int rc = s_check_cfg(nv, cfg, err, errlen);
    if (rc == 0)
        rc = s_open_file(nv, &created, err, errlen);
    if (rc < 0)
        goto out_free;
    if (fstat(nv->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        rc = s_fail(nv, err, errlen, -EINVAL, "not a regular file");
        goto out_unlink;
    }
    s_dio_align(nv);
    if (nv->rec > S_PAGE) {
        rc =
            s_fail(nv, err, errlen, -EOPNOTSUPP, "O_DIRECT alignment %u above %u", nv->rec, S_PAGE);
        goto out_unlink;
    }
    if (s_layout(nv, nv->rec) < 0) {
        rc = s_fail(nv, err, errlen, -EOVERFLOW, "%llu slots of %llu bytes overflow a file",
                    (unsigned long long)nv->capacity, (unsigned long long)nv->slot_size);
        goto out_unlink;
    }
    if ((rc = s_alloc(nv, err, errlen)) < 0 || (rc = s_engine(nv, err, errlen)) < 0)
        goto out_unlink;
    rc = st.st_size == 0 ? 1 : s_super_load(nv, &st, err, errlen);
    if (rc == 1)
        rc = s_format(nv, &st, created, err, errlen);
    if (rc < 0)
        goto out_unlink;
    if ((rc = s_scan(nv)) < 0) {
        rc = s_fail(nv, err, errlen, rc, "reading the slot headers: %s", strerror(-rc));
        goto out_free;
    }
    if (nv->opts.verify_on_open && (rc = s_verify_all(nv)) < 0) {
        rc = s_fail(nv, err, errlen, rc, "verify on open: %s", strerror(-rc));
        goto out_free;
    }
    s_log(nv,
          "%s: %llu slots of %llu bytes, %s queue depth %u, %llu block(s) recovered, %llu "
          "dropped",
          nv->path, (unsigned long long)nv->capacity, (unsigned long long)nv->slot_size,
          tier_uring_name(nv->io), nv->depth, (unsigned long long)nv->st.serving,
          (unsigned long long)nv->st.dropped_slots);
    t->priv = nv;
    return 0;

out_unlink:
    if (created)
        unlink(nv->path);
out_free:
    s_free(nv);
    return rc;
}

/* ---- ops table ------------------------------------------------------------------ */

void tier_nvme_opts_default(tier_nvme_opts_t *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->engine = TIER_URING_AUTO;
    opts->sync = TIER_NVME_SYNC_DSYNC;
    opts->chunk_bytes = TIER_NVME_DEFAULT_CHUNK;
    opts->lock_wait_ms = TIER_NVME_DEFAULT_LOCK_WAIT_MS;
}

static const char *const s_option_keys[] = {
    "queue_depth",    "engine",      "sync",         "format",
    "verify_on_open", "chunk_bytes", "lock_wait_ms", NULL};
static const char *const s_engines[] = {"auto", "uring", "sync", NULL};
static const char *const s_syncs[] = {"dsync", "fdatasync", "none", NULL};

/* The options of tier_nvme_opts_t from cfg's key/value options (tier.h). */
static int s_opts_from_config(const tier_config_t *cfg, tier_nvme_opts_t *o, char *err,
                              size_t errlen)
{
    uint64_t qd, chunk, wait;
    int engine, sync;
    tier_nvme_opts_default(o);
    /* queue_depth 0 is the default, as in the deployment file before options */
    int rc = tier_option_u64(cfg, "queue_depth", 0, TIER_URING_DEPTH_MAX, TIER_NVME_DEFAULT_DEPTH,
                             &qd, err, errlen);
    if (rc == 0 && qd == 0)
        qd = TIER_NVME_DEFAULT_DEPTH;
    if (rc == 0)
        rc = tier_option_enum(cfg, "engine", s_engines, TIER_URING_AUTO, &engine, err, errlen);
    if (rc == 0)
        rc = tier_option_enum(cfg, "sync", s_syncs, TIER_NVME_SYNC_DSYNC, &sync, err, errlen);
    if (rc == 0)
        rc = tier_option_bool(cfg, "format", false, &o->format, err, errlen);
    if (rc == 0)
        rc = tier_option_bool(cfg, "verify_on_open", false, &o->verify_on_open, err, errlen);
    if (rc == 0)
        rc = tier_option_u64(cfg, "chunk_bytes", S_PAGE, S_CHUNK_MAX, TIER_NVME_DEFAULT_CHUNK,
                             &chunk, err, errlen);
    if (rc == 0 && chunk % S_PAGE) {
        snprintf(err, errlen, "chunk_bytes: %llu is not a multiple of %u",
                 (unsigned long long)chunk, S_PAGE);
        rc = -EINVAL;
    }
    if (rc == 0)
        rc = tier_option_u64(cfg, "lock_wait_ms", 0, 3600000, TIER_NVME_DEFAULT_LOCK_WAIT_MS, &wait,
                             err, errlen);
    if (rc < 0)
        return rc;
    o->queue_depth = (uint32_t)qd;
    o->engine = tier_config_get(cfg, "engine") ? (enum tier_uring_kind)engine : TIER_URING_AUTO;
    o->sync = (enum tier_nvme_sync)sync;
    o->chunk_bytes = (uint32_t)chunk;
    o->lock_wait_ms = (uint32_t)wait;
    o->log = cfg->log;
    o->log_arg = cfg->log_arg;
    return 0;
}

static int s_op_configure(tier_config_t *cfg, char *err, size_t errlen)
{
    tier_nvme_opts_t o;
    if (!cfg->path[0]) {
        snprintf(err, errlen, "path: missing (an nvme tier needs a file path)");
        return -EINVAL;
    }
    return s_opts_from_config(cfg, &o, err, errlen);
}

static int s_op_clear_batch(tier_t *t, tier_io_t *items, size_t n);

static int s_op_open(tier_t *t, const tier_config_t *cfg, char *err, size_t errlen)
{
    tier_nvme_opts_t opts;
    int rc = s_opts_from_config(cfg, &opts, err, errlen);
    return rc < 0 ? rc : s_open_impl(t, cfg, &opts, err, errlen);
}

static void s_op_close(tier_t *t)
{
    s_nvme_t *nv = t->priv;
    if (!nv)
        return;
    if (nv->nstale)
        s_clear_stale(nv);
    if (nv->opts.sync != TIER_NVME_SYNC_DSYNC)
        tier_uring_datasync(nv->io);
    s_free(nv);
    t->priv = NULL;
}

static int s_op_write(tier_t *t, uint64_t slot, const struct iovec *iov, int n)
{
    s_nvme_t *nv = t->priv;
    struct s_blk *b = nv->blk;
    s_next_epoch(nv);
    memset(b, 0, sizeof *b);
    b->rc = s_check_item(nv, slot, iov, n);
    if (b->rc < 0)
        return b->rc;
    b->slot = slot;
    b->iov = iov;
    b->n = n;
    b->len = s_iov_total(iov, n);
    s_write_group(nv, b, 1);
    return b->rc;
}

static int s_op_read(tier_t *t, uint64_t slot, struct iovec *iov, int n)
{
    tier_nvme_get_t it = {.slot = slot, .iov = iov, .n = n};
    return s_get_group(t->priv, &it, 1);
}

static int s_op_put_header(tier_t *t, uint64_t slot, const tier_slot_header_t *h)
{
    s_nvme_t *nv = t->priv;
    struct s_blk *b = nv->blk;
    if (slot >= nv->capacity || h->state > TIER_SLOT_DELETING || h->size > nv->slot_size)
        return slot >= nv->capacity ? -ERANGE : -EINVAL;
    memset(b, 0, sizeof *b);
    b->slot = slot;
    if (h->state != TIER_SLOT_SERVING) {
        /* A pending write stays committable after a WRITING header. */
        b->h = *h;
        bool keep = h->state == TIER_SLOT_WRITING;
        s_hdr_run(nv, b, 1);
        if (b->rc == 0 && !keep)
            nv->slots[slot].pending = false;
        return b->rc;
    }
    b->rc = s_serving_hdr(nv, slot, h, &b->h);
    if (b->rc < 0)
        return b->rc;
    s_commit_group(nv, b, 1);
    return b->rc;
}

static int s_op_get_header(tier_t *t, uint64_t slot, tier_slot_header_t *h)
{
    s_nvme_t *nv = t->priv;
    if (slot >= nv->capacity)
        return -ERANGE;
    const struct s_slot *s = &nv->slots[slot];
    *h = s->h;
    if (s->pending && s->h.state != TIER_SLOT_SERVING) {
        h->state = TIER_SLOT_WRITING;
        h->size = s->pend_size;
        h->checksum = s->pend_sum;
    }
    return 0;
}

static int s_op_inventory(tier_t *t, uint64_t from, uint64_t to, tier_inventory_fn fn, void *arg)
{
    s_nvme_t *nv = t->priv;
    for (uint64_t i = from; i < to; i++) {
        if (nv->slots[i].h.state != TIER_SLOT_SERVING)
            continue;
        tier_slot_header_t h = nv->slots[i].h;
        int rc = fn(arg, i, &h);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int s_op_probe(tier_t *t, const uint64_t *slots, size_t n, bool *present)
{
    s_nvme_t *nv = t->priv;
    for (size_t i = 0; i < n; i++) {
        if (slots[i] >= nv->capacity)
            return -ERANGE;
        present[i] = nv->slots[slots[i]].h.state == TIER_SLOT_SERVING;
    }
    return 0;
}

tier_t *tier_nvme_open(const tier_config_t *cfg, const tier_nvme_opts_t *opts, char *err,
                       size_t errlen)
{
    tier_nvme_opts_t def;
    if (err && errlen)
        err[0] = '\0';
    if (!cfg) {
        if (err && errlen)
            snprintf(err, errlen, "tier ?: no config");
        return NULL;
    }
    if (!opts) {
        tier_nvme_opts_default(&def);
        opts = &def;
    }
    tier_t *t = calloc(1, sizeof *t);
    if (!t) {
        if (err && errlen)
            snprintf(err, errlen, "tier %s: out of memory", cfg->name);
        return NULL;
    }
    t->ops = &tier_nvme_ops;
    t->cfg = *cfg;
    snprintf(t->cfg.kind, sizeof t->cfg.kind, "%s", tier_nvme_ops.kind);
    if (s_open_impl(t, cfg, opts, err, errlen) < 0) {
        free(t);
        return NULL;
    }
    return t;
}

int tier_nvme_stats(const tier_t *t, tier_nvme_stats_t *out)
{
    if (!t || t->ops != &tier_nvme_ops || !t->priv || !out)
        return -EINVAL;
    const s_nvme_t *nv = t->priv;
    *out = nv->st;
    out->engine = tier_uring_name(nv->io);
    out->fixed_buffers = tier_uring_fixed_buffers(nv->io);
    out->queue_depth = nv->depth;
    out->record_bytes = nv->rec;
    out->dio_align = nv->off_align;
    return 0;
}

int tier_nvme_put_batch(tier_t *t, tier_nvme_put_t *items, size_t n)
{
    if (!t || t->ops != &tier_nvme_ops || !t->priv || (n && !items))
        return -EINVAL;
    int first = 0;
    s_next_epoch(t->priv); /* one epoch per call: repeats are caught across groups */
    for (size_t i = 0; i < n; i += S_GROUP) {
        size_t k = n - i < S_GROUP ? n - i : S_GROUP;
        int rc = s_put_group(t->priv, items + i, k);
        if (rc < 0 && !first)
            first = rc;
    }
    return first;
}

/* The write and commit batches stop where a one-by-one loop would: the items
 * after the first one refused before any I/O are not tried (-ECANCELED). */
static void s_cancel_after_first(struct s_blk *b, size_t n)
{
    size_t j = 0;
    while (j < n && b[j].rc == 0)
        j++;
    for (j++; j < n; j++)
        if (b[j].rc == 0)
            b[j].rc = -ECANCELED;
}

int tier_nvme_write_batch(tier_t *t, tier_nvme_write_t *items, size_t n)
{
    if (!t || t->ops != &tier_nvme_ops || !t->priv || (n && !items))
        return -EINVAL;
    s_nvme_t *nv = t->priv;
    int first = 0;
    s_next_epoch(nv); /* a slot repeated in the batch is refused, as by put_batch */
    for (size_t i = 0; i < n; i += S_GROUP) {
        size_t k = n - i < S_GROUP ? n - i : S_GROUP;
        struct s_blk *b = nv->blk;
        for (size_t j = 0; j < k; j++) {
            tier_nvme_write_t *it = &items[i + j];
            memset(&b[j], 0, sizeof b[j]);
            b[j].slot = it->slot;
            b[j].iov = it->iov;
            b[j].n = it->n;
            b[j].rc = s_check_item(nv, it->slot, it->iov, it->n);
            if (b[j].rc == 0)
                b[j].len = s_iov_total(it->iov, it->n);
            if (b[j].rc == 0 && it->hdr.state == TIER_SLOT_SERVING) { /* a put (tier.h) */
                b[j].put = true;
                b[j].h = it->hdr;
                b[j].h.size = b[j].len;
            }
        }
        s_cancel_after_first(b, k);
        s_write_group(nv, b, k);
        for (size_t j = 0; j < k; j++) {
            items[i + j].rc = b[j].rc;
            if (b[j].rc == 0 && b[j].put)
                items[i + j].hdr = b[j].h;
            if (b[j].rc < 0 && !first)
                first = b[j].rc;
        }
        if (first) { /* the items of later groups are not tried */
            for (size_t j = i + k; j < n; j++)
                items[j].rc = -ECANCELED;
            break;
        }
    }
    return first;
}

int tier_nvme_commit_batch(tier_t *t, tier_nvme_commit_t *items, size_t n)
{
    if (!t || t->ops != &tier_nvme_ops || !t->priv || (n && !items))
        return -EINVAL;
    s_nvme_t *nv = t->priv;
    int first = 0;
    s_next_epoch(nv);
    for (size_t i = 0; i < n; i += S_GROUP) {
        size_t k = n - i < S_GROUP ? n - i : S_GROUP;
        struct s_blk *b = nv->blk;
        for (size_t j = 0; j < k; j++) {
            tier_nvme_commit_t *it = &items[i + j];
            memset(&b[j], 0, sizeof b[j]);
            b[j].slot = it->slot;
            if (it->slot >= nv->capacity)
                b[j].rc = -ERANGE;
            else if (it->hdr.state != TIER_SLOT_SERVING || it->hdr.size > nv->slot_size ||
                     nv->slots[it->slot].mark == nv->epoch)
                b[j].rc = -EINVAL;
            else
                b[j].rc = s_serving_hdr(nv, it->slot, &it->hdr, &b[j].h);
            if (b[j].rc == 0)
                nv->slots[it->slot].mark = nv->epoch;
        }
        s_cancel_after_first(b, k);
        s_commit_group(nv, b, k);
        for (size_t j = 0; j < k; j++) {
            items[i + j].rc = b[j].rc;
            if (b[j].rc == 0)
                items[i + j].hdr = b[j].h;
            else if (!first)
                first = b[j].rc;
        }
        if (first) {
            for (size_t j = i + k; j < n; j++)
                items[j].rc = -ECANCELED;
            break;
        }
    }
    return first;
}

static int s_op_clear_batch(tier_t *t, tier_io_t *items, size_t n)
{
    if (!t || t->ops != &tier_nvme_ops || !t->priv || (n && !items))
        return -EINVAL;
    s_nvme_t *nv = t->priv;
    int first = 0;
    for (size_t i = 0; i < n; i += S_GROUP) {
        size_t k = n - i < S_GROUP ? n - i : S_GROUP;
        struct s_blk *b = nv->blk;
        for (size_t j = 0; j < k; j++) {
            memset(&b[j], 0, sizeof b[j]);
            b[j].slot = items[i + j].slot;
            b[j].h.state = TIER_SLOT_EMPTY;
            if (b[j].slot >= nv->capacity)
                b[j].rc = -ERANGE;
        }
        s_hdr_run(nv, b, k);
        for (size_t j = 0; j < k; j++) {
            items[i + j].rc = b[j].rc;
            if (b[j].rc == 0)
                nv->slots[b[j].slot].pending = false;
            else if (!first)
                first = b[j].rc;
        }
    }
    return first;
}

int tier_nvme_clear_batch(tier_t *t, const uint64_t *slots, int *rcs, size_t n)
{
    if (n && (!slots || !rcs))
        return -EINVAL;
    tier_io_t items[S_GROUP];
    int first = 0;
    for (size_t i = 0; i < n; i += S_GROUP) {
        size_t k = n - i < S_GROUP ? n - i : S_GROUP;
        for (size_t j = 0; j < k; j++)
            items[j] = (tier_io_t){.slot = slots[i + j]};
        int rc = s_op_clear_batch(t, items, k);
        for (size_t j = 0; j < k; j++)
            rcs[i + j] = items[j].rc;
        if (rc < 0 && !first)
            first = rc;
    }
    return first;
}

int tier_nvme_get_batch(tier_t *t, tier_nvme_get_t *items, size_t n)
{
    if (!t || t->ops != &tier_nvme_ops || !t->priv || (n && !items))
        return -EINVAL;
    int first = 0;
    for (size_t i = 0; i < n; i += S_GROUP) {
        size_t k = n - i < S_GROUP ? n - i : S_GROUP;
        int rc = s_get_group(t->priv, items + i, k);
        if (rc < 0 && !first)
            first = rc;
    }
    return first;
}

static int s_op_describe(tier_t *t, tier_desc_t *out)
{
    const s_nvme_t *nv = t->priv;
    out->access_kind = TIER_ACCESS_NONE;
    out->reads_verified = true; /* every read verifies the checksum (tier_nvme.h) */
    out->write_commits = true;  /* a put is its bytes and record in one write */
    snprintf(out->detail, sizeof out->detail, "%s, queue depth %u%s", tier_uring_name(nv->io),
             nv->depth, tier_uring_fixed_buffers(nv->io) ? ", fixed buffers" : "");
    return 0;
}

static void s_op_counters(tier_t *t, tier_counter_fn fn, void *arg)
{
    const s_nvme_t *nv = t->priv;
    const tier_nvme_stats_t *st = &nv->st;
    fn(arg, "reads", st->reads);
    fn(arg, "writes", st->writes);
    fn(arg, "headers", st->headers);
    fn(arg, "write_ops", st->write_ops);
    fn(arg, "bytes_read", st->bytes_read);
    fn(arg, "bytes_written", st->bytes_written);
    fn(arg, "direct_blocks", st->direct_blocks);
    fn(arg, "bounced_blocks", st->bounced_blocks);
    fn(arg, "checksum_failures", st->checksum_failures);
    fn(arg, "torn_headers", st->torn_headers);
    fn(arg, "dropped_slots", st->dropped_slots);
    fn(arg, "io_errors", st->io_errors);
    fn(arg, "short_reads", st->short_reads);
    fn(arg, "reread_recovered", st->reread_recovered);
    fn(arg, "recovered", st->recovered);
    fn(arg, "serving", st->serving);
}

const struct tier_ops tier_nvme_ops = {
    .version = TIER_OPS_VERSION,
    .kind = "nvme",
    .option_keys = s_option_keys,
    .path_key = "path",
    .configure = s_op_configure,
    .open = s_op_open,
    .close = s_op_close,
    .write = s_op_write,
    .read = s_op_read,
    .put_header = s_op_put_header,
    .get_header = s_op_get_header,
    .inventory = s_op_inventory,
    .probe = s_op_probe,
    .write_batch = tier_nvme_write_batch,
    .read_batch = tier_nvme_get_batch,
    .commit_batch = tier_nvme_commit_batch,
    .clear_batch = s_op_clear_batch,
    .describe = s_op_describe,
    .counters = s_op_counters,
};
