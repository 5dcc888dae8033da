/* kvt_transport.h — how the client's data path moves a job's bytes: a job (what
 * kvt_data.c submits and completes) and the ops table of a transport (one file
 * each: kvt_transport_shm.c, kvt_transport_frames.c). Private to client/; never
 * installed. kvt_data.c holds the table in preference order and, per tier of a
 * token, picks the first transport that has the job's move op, finds the tier
 * usable and attaches; the choice is stored in the job. Nothing outside a
 * transport's file asks which transport it is talking to (STYLE.md rule 14).
 *
 * A transport never finishes a job itself: it records failures with
 * kvti_job_error, marks each key it moved in tok->ok, counts the parts it still
 * owes in job->open and calls kvti_job_part_done as each part ends. */
#ifndef KVT_TRANSPORT_H
#define KVT_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bus_token.h"
#include "kvt_internal.h"

typedef struct kvti_transport kvti_transport_t;

/* One job slot of a handle: from submit until collected. */
typedef struct kvti_job {
    struct kvt_data *owner;
    bool used;
    bool finished;
    uint64_t id;
    uint64_t seq; /* the handle's submit count at this submit (recency stamp) */
    bus_token_kind_t kind;
    struct kvt_token *tok;
    void **bufs;
    uint32_t bufs_cap;
    size_t len;
    /* Layer-wise (kvt_submit_*_segments): segments [seg_first, seg_first +
     * seg_count) of each key, key i's segment seg_first + s at seg_ptrs[i * seg_count
     * + s], tok->segs->seg_bytes each. seg_count 0: whole blocks (bufs). A transport
     * with `segments` moves the ranges itself and skips keys kvti_job_skips names;
     * for the others kvt_data.c stages whole blocks in tok->segs->stage and hands
     * them bufs into it. */
    uint32_t seg_first, seg_count;
    void **seg_ptrs;
    uint32_t seg_ptrs_cap;
    bool seg_fetch; /* a layer-wise get that fetches whole blocks into the stage */
    /* Device buffers (kvt_device.c): the caller's device pointers (n, or n x
     * seg_count for a layer-wise job), while bufs / seg_ptrs point into the job
     * slot's pinned staging; dev_phase says which copy runs (KVTI_DEV_*). */
    uint8_t dev_phase;
    struct kvti_dev *dev; /* the handle's runtime (kvt_device.c) */
    void **dev_ptrs;
    uint32_t dev_ptrs_cap;
    uint8_t *dstage; /* pinned staging, kept by the slot across jobs */
    uint64_t dstage_cap;
    void *dstream, *dwait, *ddone; /* the caller's stream and events (NULL: none) */
    void *devent;                  /* the slot's own event: its copies are done */
    bool *ddirect;     /* per key: a transport copied it straight into device memory */
    uint32_t ddirect_cap;
    bool dwaited;      /* the job's stream waits for dwait already */
    bool dqueued;      /* a transport queued a direct copy (host part still running) */
    /* per token tier: the transport chosen at submit and what its attach gave */
    const kvti_transport_t *via[BUS_TOKEN_MAX_TIERS];
    void *at[BUS_TOKEN_MAX_TIERS];
    uint32_t open; /* parts not done (frames: chunks), + 1 while submit runs */
    int64_t deadline;
    int status;
    uint32_t n_keys, n_failed; /* set when it finishes: the token may be completed
                                  (and reused) before the job is collected */
    char msg[256];
    int32_t fin_prev, fin_next;
} kvti_job_t;

/* Moves the keys of job j whose tier chose this transport (mine[tier]). */
typedef void (*kvti_move_fn)(void *xs, kvti_job_t *j, const bool mine[BUS_TOKEN_MAX_TIERS]);

/* A transport. NULL ops are optional; the dispatcher (kvt_data.c) checks them. */
struct kvti_transport {
    const char *name;
    /* put / get move a layer-wise job's segment ranges themselves (see kvti_job_t) */
    bool segments;
    /* The transport's state for one handle (jobs: the handle's job table of cap
     * slots, for the transport's per-job records), or NULL when out of memory. */
    void *(*open)(kvt_client_t *c, kvti_job_t *jobs, uint32_t cap);
    /* Detaches and closes everything; requests in flight are dropped without
     * callbacks. Idempotent, nulls *xs. */
    void (*close)(void **xs);
    /* Optional: grows the per-job records of job slot `job` for n keys, before the
     * job starts. -1 when out of memory. */
    int (*reserve)(void *xs, uint32_t job, uint32_t n);
    /* Optional: whether token tier t can go this way for client c, from the token
     * and the options alone. NULL: every tier can. */
    bool (*usable)(kvt_client_t *c, const bus_token_tier_t *t);
    /* Optional: what this transport needs for tier t during job j (kept across
     * jobs as the transport sees fit), or NULL when it cannot be used now. */
    void *(*attach)(void *xs, const kvti_job_t *j, const bus_token_tier_t *t);
    /* Per job kind; NULL: this transport does not move that kind. */
    kvti_move_fn put, get, prefetch;
    /* Optional: sends what waits, waits up to wait_ms (0: none, only while a job
     * is open) for replies and handles them. Only one transport may wait: when a
     * second one needs to, this op becomes one that hands out poll items. */
    void (*progress)(void *xs, int wait_ms);
};

extern const kvti_transport_t kvti_transport_cuda;
extern const kvti_transport_t kvti_transport_shm;
extern const kvti_transport_t kvti_transport_frames;

/* The registry (kvt_transport.c): every transport, in preference order; the last
 * one moves every kind and needs neither usable nor attach, so every tier has one. */
#define KVTI_N_TRANSPORTS 3
extern const kvti_transport_t *const kvti_transports[KVTI_N_TRANSPORTS];

/* The transport's op for a job kind (NULL: it does not move that kind). */
kvti_move_fn kvti_transport_move_op(const kvti_transport_t *x, bus_token_kind_t kind);

/* The choice rule for token tier t of job j: the index in kvti_transports of the
 * first transport that has the kind's move op, finds t usable for c and attaches
 * (*at gets what attach gave, NULL without the op); -1 when none does. xs: each
 * transport's state for the handle, in table order. */
int kvti_transport_choose(void *const xs[KVTI_N_TRANSPORTS], kvt_client_t *c, const kvti_job_t *j,
                          const bus_token_tier_t *t, void **at);

/* A layer-wise job leaves key i alone: it failed in an earlier job of the token. */
static inline bool kvti_job_skips(const kvti_job_t *j, uint32_t i)
{
    return j->seg_count > 0 && j->tok->segs->failed[i];
}

/* Records the first failure of a job (its status and message). */
void kvti_job_error(kvti_job_t *j, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One part of the job ended: job->open drops by one; at 0 the job finishes. */
void kvti_job_part_done(kvti_job_t *j);

/* Grows *p to hold `want` elements of `elem` bytes (at least 64). 0 or -1. */
int kvti_grow(void **p, uint32_t *cap, uint32_t want, size_t elem);

#endif
