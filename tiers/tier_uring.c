/* tier_uring.c — io_uring / pread-pwrite engine for the nvme tier (see
 * tier_uring.h). Tags index a fixed array of op records and a free-tag stack
 * sized at creation, so a run never allocates. A ring that fails mid-run (an
 * error other than a retryable one from submit) is torn down — which waits for
 * the kernel to let go of every buffer — its ops reported as -EIO, and the
 * engine continues with pread/pwrite rather than leaving the tier unusable. */
#include "tier_uring.h"

#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct tier_uring {
    int fd;
    unsigned depth;
    bool ring_ok;
    bool fixed_ok;
    struct io_uring ring;
    tier_uring_op_t *ops; /* [depth], indexed by tag */
    uint32_t *xfer;       /* [depth], bytes done of a partly transferred op */
    /* [depth][TIER_URING_IOV_MAX]: a vectored op's segments as given, and the
     * rest of them past xfer (what the SQE points at until it completes) */
    struct iovec (*iov)[TIER_URING_IOV_MAX];
    struct iovec (*cur)[TIER_URING_IOV_MAX];
    unsigned *free_tags; /* stack of free tags */
    unsigned nfree;
};

tier_uring_t *tier_uring_new(int fd, unsigned depth, enum tier_uring_kind kind,
                             const struct iovec *bufs, char *why, size_t whylen)
{
    if (why && whylen)
        why[0] = '\0';
    if (fd < 0 || depth == 0 || depth > TIER_URING_DEPTH_MAX) {
        if (why)
            snprintf(why, whylen, "queue depth %u out of range 1..%u", depth, TIER_URING_DEPTH_MAX);
        return NULL;
    }
    tier_uring_t *io = calloc(1, sizeof *io);
    if (!io)
        goto out_nomem;
    io->fd = fd;
    io->depth = depth;
    io->ops = calloc(depth, sizeof *io->ops);
    io->xfer = calloc(depth, sizeof *io->xfer);
    io->free_tags = calloc(depth, sizeof *io->free_tags);
    io->iov = calloc(depth, sizeof *io->iov);
    io->cur = calloc(depth, sizeof *io->cur);
    if (!io->ops || !io->xfer || !io->free_tags || !io->iov || !io->cur)
        goto out_free;
    for (unsigned i = 0; i < depth; i++)
        io->free_tags[i] = depth - 1 - i; /* tag 0 on top: sync runs reuse one buffer */
    io->nfree = depth;

    if (kind != TIER_URING_SYNC) {
        int rc = io_uring_queue_init(depth, &io->ring, 0);
        if (rc == 0) {
            io->ring_ok = true;
            io->fixed_ok = bufs && io_uring_register_buffers(&io->ring, bufs, depth) == 0;
        } else if (kind == TIER_URING_RING) {
            if (why)
                snprintf(why, whylen, "io_uring_queue_init(%u): %s", depth, strerror(-rc));
            goto out_free;
        } else if (why) {
            snprintf(why, whylen, "io_uring unavailable (io_uring_queue_init: %s)", strerror(-rc));
        }
    }
    return io;

out_free:
    free(io->ops);
    free(io->xfer);
    free(io->free_tags);
    free(io->iov);
    free(io->cur);
    free(io);
    return NULL;
out_nomem:
    if (why)
        snprintf(why, whylen, "out of memory");
    return NULL;
}

void tier_uring_destroy(tier_uring_t **iop)
{
    if (!iop || !*iop)
        return;
    tier_uring_t *io = *iop;
    if (io->ring_ok)
        io_uring_queue_exit(&io->ring);
    free(io->ops);
    free(io->xfer);
    free(io->free_tags);
    free(io->iov);
    free(io->cur);
    free(io);
    *iop = NULL;
}

/* ---- vectored ops ----------------------------------------------------------- */

/* Takes a vectored op's segments into the tag's own array and sets its len;
 * -EINVAL for too many segments or a total over 4 GiB. */
static int s_take_iov(tier_uring_t *io, unsigned tag)
{
    tier_uring_op_t *op = &io->ops[tag];
    if (!op->niov)
        return 0;
    if (op->niov > TIER_URING_IOV_MAX || !op->iov)
        return -EINVAL;
    uint64_t total = 0;
    for (unsigned i = 0; i < op->niov; i++) {
        io->iov[tag][i] = op->iov[i];
        total += op->iov[i].iov_len;
    }
    if (total > UINT32_MAX)
        return -EINVAL;
    op->iov = io->iov[tag];
    op->len = (uint32_t)total;
    op->fixed = false;
    return 0;
}

/* The segments of a vectored op past its first `done` bytes, in cur[tag]. */
static unsigned s_rest(tier_uring_t *io, unsigned tag, uint32_t done)
{
    const tier_uring_op_t *op = &io->ops[tag];
    unsigned k = 0;
    for (unsigned i = 0; i < op->niov; i++) {
        struct iovec v = op->iov[i];
        if (done >= v.iov_len) {
            done -= (uint32_t)v.iov_len;
            continue;
        }
        v.iov_base = (char *)v.iov_base + done;
        v.iov_len -= done;
        done = 0;
        io->cur[tag][k++] = v;
    }
    return k;
}

/* ---- pread/pwrite ------------------------------------------------------- */

static int s_sync_rw(tier_uring_t *io, unsigned tag)
{
    const tier_uring_op_t *op = &io->ops[tag];
    int fd = io->fd;
    uint32_t done = 0;
    while (done < op->len) {
        struct iovec one = {.iov_base = (char *)op->buf + done, .iov_len = op->len - done};
        const struct iovec *v = &one;
        int nv = 1;
        if (op->niov) {
            nv = (int)s_rest(io, tag, done);
            v = io->cur[tag];
        }
        off_t off = (off_t)(op->off + done);
        ssize_t n = op->write ? pwritev2(fd, v, nv, off, op->dsync ? RWF_DSYNC : 0)
                              : preadv2(fd, v, nv, off, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EIO; /* the file is preallocated: no EOF inside it */
        done += (uint32_t)n;
    }
    return 0;
}

static int s_run_sync(tier_uring_t *io, tier_uring_fill_fn fill, tier_uring_done_fn done, void *arg)
{
    for (;;) {
        tier_uring_op_t *op = &io->ops[0];
        memset(op, 0, sizeof *op);
        int r = fill(arg, 0, op);
        if (r <= 0)
            return r;
        op->res = s_take_iov(io, 0);
        if (op->res == 0)
            op->res = s_sync_rw(io, 0);
        done(arg, 0, op);
    }
}

/* ---- io_uring ------------------------------------------------------------ */

static void s_prep(tier_uring_t *io, struct io_uring_sqe *sqe, unsigned tag)
{
    const tier_uring_op_t *op = &io->ops[tag];
    uint32_t x = io->xfer[tag];
    char *buf = (char *)op->buf + x;
    unsigned len = op->len - x;
    uint64_t off = op->off + x;
    bool fixed = io->fixed_ok && op->fixed;
    if (op->niov) {
        unsigned k = s_rest(io, tag, x);
        if (op->write)
            io_uring_prep_writev(sqe, io->fd, io->cur[tag], k, off);
        else
            io_uring_prep_readv(sqe, io->fd, io->cur[tag], k, off);
    } else if (op->write && fixed)
        io_uring_prep_write_fixed(sqe, io->fd, buf, len, off, (int)tag);
    else if (op->write)
        io_uring_prep_write(sqe, io->fd, buf, len, off);
    else if (fixed)
        io_uring_prep_read_fixed(sqe, io->fd, buf, len, off, (int)tag);
    else
        io_uring_prep_read(sqe, io->fd, buf, len, off);
    if (op->write && op->dsync)
        sqe->rw_flags = RWF_DSYNC;
    io_uring_sqe_set_data64(sqe, tag);
}

/* An SQE for tag: the SQ has `depth` entries and at most `depth` ops are
 * unsubmitted, so one submit always frees an entry. */
static int s_queue(tier_uring_t *io, unsigned tag)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
    if (!sqe) {
        int rc = io_uring_submit(&io->ring);
        if (rc < 0)
            return rc;
        sqe = io_uring_get_sqe(&io->ring);
        if (!sqe)
            return -EBUSY;
    }
    s_prep(io, sqe, tag);
    return 0;
}

static void s_finish(tier_uring_t *io, unsigned tag, int res, tier_uring_done_fn done, void *arg)
{
    io->ops[tag].res = res;
    done(arg, tag, &io->ops[tag]);
    io->free_tags[io->nfree++] = tag;
}

/* Reaps what completed; resubmits the rest of a short transfer. */
static int s_reap(tier_uring_t *io, tier_uring_done_fn done, void *arg, unsigned *inflight)
{
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;
    int err = 0;
    io_uring_for_each_cqe(&io->ring, head, cqe)
    {
        unsigned tag = (unsigned)cqe->user_data;
        int res = cqe->res;
        seen++;
        if (tag >= io->depth)
            continue;
        tier_uring_op_t *op = &io->ops[tag];
        if (res > 0 && io->xfer[tag] + (uint32_t)res < op->len) {
            io->xfer[tag] += (uint32_t)res;
            int rc = s_queue(io, tag);
            if (rc == 0)
                continue;
            err = rc;
            res = rc;
        }
        (*inflight)--;
        s_finish(io, tag, res < 0 ? res : (res == 0 ? -EIO : 0), done, arg);
    }
    io_uring_cq_advance(&io->ring, seen);
    return err;
}

/* The ring failed under us: exit waits for the kernel to drop every request,
 * after which the buffers of ops in flight are the caller's again. */
static void s_ring_teardown(tier_uring_t *io, tier_uring_done_fn done, void *arg)
{
    io_uring_queue_exit(&io->ring);
    io->ring_ok = false;
    io->fixed_ok = false;
    bool is_free[TIER_URING_DEPTH_MAX] = {false};
    for (unsigned i = 0; i < io->nfree; i++)
        is_free[io->free_tags[i]] = true;
    for (unsigned tag = 0; tag < io->depth; tag++)
        if (!is_free[tag])
            s_finish(io, tag, -EIO, done, arg);
}

static int s_run_ring(tier_uring_t *io, tier_uring_fill_fn fill, tier_uring_done_fn done, void *arg)
{
    int err = 0;
    bool more = true;
    unsigned inflight = 0;
    while (more || inflight) {
        while (more && io->nfree > 0) {
            unsigned tag = io->free_tags[io->nfree - 1];
            tier_uring_op_t *op = &io->ops[tag];
            memset(op, 0, sizeof *op);
            int r = fill(arg, tag, op);
            if (r <= 0) {
                err = r;
                more = false;
                break;
            }
            io->nfree--;
            io->xfer[tag] = 0;
            int rc = s_take_iov(io, tag);
            if (rc == 0)
                rc = s_queue(io, tag);
            if (rc < 0) {
                io->nfree++;
                op->res = rc;
                done(arg, tag, op);
                err = rc;
                more = false;
                break;
            }
            inflight++;
            /* At once: the next fill (a checksum) overlaps this op's I/O. A
             * ring failure shows again in the wait below, which tears it down. */
            int k = io_uring_submit(&io->ring);
            if (k < 0 && k != -EAGAIN && k != -EBUSY && k != -EINTR) {
                more = false;
                break;
            }
        }
        if (!inflight)
            break;
        int rc = io_uring_submit_and_wait(&io->ring, 1);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
            s_ring_teardown(io, done, arg);
            return rc;
        }
        rc = s_reap(io, done, arg, &inflight);
        if (rc < 0 && !err) {
            err = rc;
            more = false;
        }
    }
    return err;
}

int tier_uring_run(tier_uring_t *io, tier_uring_fill_fn fill, tier_uring_done_fn done, void *arg)
{
    if (!io || !fill || !done)
        return -EINVAL;
    return io->ring_ok ? s_run_ring(io, fill, done, arg) : s_run_sync(io, fill, done, arg);
}

int tier_uring_datasync(tier_uring_t *io)
{
    if (!io)
        return -EINVAL;
    while (fdatasync(io->fd) < 0)
        if (errno != EINTR)
            return -errno;
    return 0;
}

const char *tier_uring_name(const tier_uring_t *io)
{
    return io && io->ring_ok ? "io_uring" : "pread/pwrite";
}

bool tier_uring_is_ring(const tier_uring_t *io)
{
    return io && io->ring_ok;
}

unsigned tier_uring_depth(const tier_uring_t *io)
{
    return io ? io->depth : 0;
}

bool tier_uring_fixed_buffers(const tier_uring_t *io)
{
    return io && io->fixed_ok;
}
