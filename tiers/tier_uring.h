/* tier_uring.h — the nvme tier's I/O engine: runs a stream of positioned reads
 * and writes on one file descriptor with at most `depth` in flight, through
 * io_uring or, where io_uring cannot be set up, plain pread/pwrite (one at a
 * time). It knows nothing of slots, headers or checksums, never allocates
 * after tier_uring_new, and is used by one thread at a time.
 *
 * The caller streams ops through two callbacks. Each op in flight holds a tag
 * in 0..depth-1, and no two ops in flight share a tag, so a caller that keeps
 * one bounce buffer per tag never needs a free list: fill() may use buffer
 * `tag` for the op it produces, and the buffer is its own again once done()
 * has been called for that tag. Short transfers are resubmitted by the engine;
 * done() sees the op once, finished or failed. */
#ifndef KVT_TIER_URING_H
#define KVT_TIER_URING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define TIER_URING_DEPTH_MAX 1024u /* bound on queue depth (SQ entries) */
#define TIER_URING_IOV_MAX 18u     /* segments of one vectored op */

enum tier_uring_kind {
    TIER_URING_AUTO = 0, /* io_uring, else pread/pwrite (the caller logs why) */
    TIER_URING_RING = 1, /* io_uring only: fail when it cannot be set up */
    TIER_URING_SYNC = 2, /* pread/pwrite only */
};

typedef struct tier_uring_op {
    void *buf;
    uint32_t len; /* bytes; O_DIRECT needs it aligned like buf and off */
    /* A vectored op (readv/writev) when niov > 0: iov[0..niov) in place of buf
     * (copied by the engine when the op is queued; len is then their total, set
     * by the engine). Never fixed. */
    const struct iovec *iov;
    unsigned niov;
    uint64_t off;
    bool write;
    bool dsync; /* RWF_DSYNC: the op completes only once the bytes are durable */
    bool fixed; /* buf lies inside the registered buffer of this op's tag */
    int res;    /* set by the engine before done(): 0 or a negative errno */
} tier_uring_op_t;

/* Produces the next op into *op (zeroed by the engine). Returns 1 when it
 * produced one, 0 when there is no more, a negative errno to stop the run
 * (ops in flight are still completed and reported). */
typedef int (*tier_uring_fill_fn)(void *arg, unsigned tag, tier_uring_op_t *op);
/* Called once per op produced, with op->res set. */
typedef void (*tier_uring_done_fn)(void *arg, unsigned tag, const tier_uring_op_t *op);

typedef struct tier_uring tier_uring_t;

/* Engine for fd with queue depth `depth` (1..TIER_URING_DEPTH_MAX). bufs, when
 * given, are `depth` buffers, bufs[tag] for tag, registered with the ring so
 * ops marked `fixed` skip the per-op page pinning (a failed registration is
 * not an error: fixed ops then run as plain ones). Under TIER_URING_AUTO a
 * ring that cannot be set up falls back to pread/pwrite and `why` receives
 * the reason (empty when io_uring is in use). NULL on failure, reason in why. */
tier_uring_t *tier_uring_new(int fd, unsigned depth, enum tier_uring_kind kind,
                             const struct iovec *bufs, char *why, size_t whylen);
void tier_uring_destroy(tier_uring_t **io);

/* Runs fill/done until fill reports no more and every op has completed. Each
 * op is submitted as soon as fill produced it, so work fill does for the next op
 * (a checksum) overlaps the I/O of those already in flight.
 * Returns 0, or the error fill returned, or a negative errno when the ring
 * itself failed (every produced op is still reported through done()). */
int tier_uring_run(tier_uring_t *io, tier_uring_fill_fn fill, tier_uring_done_fn done, void *arg);

/* fdatasync of the file (both engines). 0 or a negative errno. */
int tier_uring_datasync(tier_uring_t *io);

/* "io_uring" or "pread/pwrite". */
const char *tier_uring_name(const tier_uring_t *io);
bool tier_uring_is_ring(const tier_uring_t *io);
unsigned tier_uring_depth(const tier_uring_t *io);
bool tier_uring_fixed_buffers(const tier_uring_t *io);

#endif
