/* sched_requests.h — requests and their windows (sched_window.h), get / put / prefetch / get+put,
 * leases, the deferred put replies and prefetch copies through the migrator. Owns sched_requests_t
 * (sched_t.requests). Private to actors/sched_*.c; the top module: builds on reclaim
 * (sched_reclaim.h) and everything below it. */
#ifndef KVT_SCHED_REQUESTS_H
#define KVT_SCHED_REQUESTS_H

#include "sched_reclaim.h"

#define SCHED_COPY_JOBS 64u /* migrator jobs in flight (prefetch copies) */
#define SCHED_COPY_DISPATCH_MS                                                                     \
    10000 /* a pair not started by then fails (and a job at the                                    \
             migrator: its dispatch_within_ms) */
#define SCHED_COPY_LOST_MS                                                                         \
    60000 /* a job without a result by then failed: the dispatch                                   \
             bound plus the longest copy (copy_timeout_ms <= 50 s) */

typedef struct {
    bool used;
    uint32_t inst; /* instance index */
    char id[64];
    uint64_t hash;
    uint64_t ttl_ms;
    uint32_t total_blocks;
    uint32_t chain;
    int64_t last_ms; /* begin or the last window call (request_idle_ms) */
    sched_window_t win[SCHED_WIN_KINDS];
    sched_putmeta_t put_meta; /* the put window's parents and token ids (events on) */
    /* the prefetch window's copy through the migrator (CopyPrefetch) */
    bool copy_ran;     /* the scheduler copied this window: complete trusts only its copies */
    bool ended;        /* request_end came mid-copy: out of the map, freed when the copy ends */
    uint32_t copies;   /* migrator jobs in flight */
    bool copy_waiting; /* in the FIFO of windows waiting for free jobs */
    uint32_t client;   /* the client that began it (its open-request count) */
    int64_t copy_started_ms; /* the CopyPrefetch's arrival */
    zframe_t *copy_rid;      /* the CopyPrefetch caller, answered when the last job ends */
    uint64_t copy_corr;
    /* The last complete of each window kind that concluded OK (issue 9 §1): a resend
     * of it (its reply was lost) is answered again with these counts and applied
     * once. released: get, get+put; committed, failed: put, prefetch, get+put.
     * failed_token_id: the last one that concluded with an error (its tier went
     * down or timed out before confirming the headers): a resend of that one is
     * ABORTED ("concluded already and failed"), not "no open window". */
    struct {
        uint64_t token_id;
        uint32_t released, committed, failed;
        uint64_t failed_token_id;
        uint32_t failed_code; /* kvtier_StatusCode of that conclusion */
    } done[SCHED_WIN_KINDS];
} sched_request_t;

/* A prefetch copy at the migrator: pairs of one window (token key indices,
 * ascending), all from one source tier to the head tier. */
typedef struct {
    bool used;
    uint64_t job_id;
    uint32_t req;      /* request index */
    uint64_t token_id; /* its window's token: a result for another window is ignored */
    uint32_t src_tier_id, dst_tier_id; /* checked against the result */
    int64_t submitted_ms;
    uint32_t n;
    uint32_t pairs[MIGRATOR_MAX_JOB_SLOTS];
} sched_copy_t;

/* A complete_put waiting for its tier's PutHeader reply. */
typedef struct sched_put_op {
    bool used;
    sched_t *self;
    zframe_t *routing_id;
    uint64_t corr_id;
    uint32_t inst;
    uint32_t tier;
    uint16_t gen;
    uint32_t n_sent;      /* entries not flagged SKIP, in list order = header order */
    uint32_t failed;      /* failed before sending (mask, stale) */
    bool prefetch;        /* a complete_prefetch: entries also hold PIN entries (sources) */
    bool combined;        /* a complete (get+put window): the reply is a CompleteReply */
    uint32_t released;    /* ... with the pins its get part released */
    bool exclusive;       /* ... of an exclusive chain: a committed key's source is freed
                             when it lies on that chain (another branch's copy stays) */
    uint32_t chain;       /* the request's branch */
    sched_header_cb_t cb; /* the tier's answer to its headers */
    sched_list_t entries;
    sched_putmeta_t meta; /* a put's parents and token ids, one record per entry */
    uint32_t req;         /* its request (index) and window, for the resend rule: */
    uint64_t req_hash;    /* ... the request's hash when the op was taken */
    uint64_t token_id;    /* ... the window's token */
    uint8_t kind;         /* ... SCHED_WIN_* */
} sched_put_op_t;

/* The requests module's state (sched_t.requests): the request table, the
 * windows' entry pool, the complete_puts waiting for their tier, prefetch copies
 * at the migrator, and the envelope and mask of the replies it sends late. */
typedef struct {
    sched_request_t *reqs;
    uint32_t *req_free;
    uint32_t n_req_free;
    sched_map_t req_map;
    uint32_t scan_cursor;
    sched_pool_t pool;
    sched_tokpool_t tokpool; /* open puts' token ids and parents (events on) */
    sched_put_op_t *ops;
    uint32_t *op_free;
    uint32_t n_op_free;
    sched_copy_t copies[SCHED_COPY_JOBS];
    uint32_t *copy_wait; /* FIFO (max_requests) of windows with pairs waiting for a job */
    uint32_t copy_wait_head, n_copy_wait;
    kvtier_Envelope *op_rep; /* deferred replies (put ops, prefetch copies) */
    bool *copy_mask;         /* max_batch: the flags of a deferred CopyPrefetch reply */
    /* meta-plane clients (sched_clients.c): max_clients entries */
    struct sched_client *clients;
    uint32_t n_clients; /* entries ever used (the table's high-water mark) */
    sched_map_t client_map;
    uint64_t begun[SCHED_MAX_CHAINS]; /* requests begun per branch (stats branch.<name>.*) */
} sched_requests_t;

/* ---- sched_clients.c (issue 12 §3) ---- */

#define SCHED_RID_MAX 255 /* a ZeroMQ routing id's longest */

typedef struct sched_client {
    uint8_t rid[SCHED_RID_MAX];
    uint8_t rid_len;
    bool used;
    uint64_t hash;
    uint32_t open;   /* requests it began that are still open */
    int64_t last_ms; /* its last call */
} sched_client_t;

int sched_clients_init(sched_t *self);
void sched_clients_fini(sched_t *self);
/* The client CALL came from (by its routing id), entered when new: sets
 * call->client and returns true. When max_clients others are active (a call or an
 * open request within client_idle_ms), answers OVERLOADED and returns false. */
bool sched_client_enter(sched_t *self, sched_call_t *call, int64_t now);
/* A request begun by CLIENT was freed. */
void sched_client_request_done(sched_t *self, uint32_t client);
/* Clients with an entry now (active or not yet reused). */
uint32_t sched_clients_known(const sched_t *self);

/* ---- sched_requests.c ---- */
int sched_requests_init(sched_t *self);
void sched_requests_fini(sched_t *self);
sched_request_t *sched_request_find(sched_t *self, uint32_t inst, const char *id);
uint32_t sched_open_requests(const sched_t *self);
uint32_t sched_open_windows_keys(const sched_t *self);
void sched_on_begin(sched_t *self, sched_call_t *call);
void sched_on_end(sched_t *self, sched_call_t *call);
void sched_on_prepare_get(sched_t *self, sched_call_t *call);
void sched_on_complete_get(sched_t *self, sched_call_t *call);
void sched_on_prepare_put(sched_t *self, sched_call_t *call);
void sched_on_complete_put(sched_t *self, sched_call_t *call);
void sched_on_prepare_prefetch(sched_t *self, sched_call_t *call);
void sched_on_complete_prefetch(sched_t *self, sched_call_t *call);
/* A request in two round trips (issue 13 §2): the get+put window. */
void sched_on_prepare(sched_t *self, sched_call_t *call);
void sched_on_complete(sched_t *self, sched_call_t *call);
/* CopyPrefetch: the window's copies go to the migrator; answered when they end. */
void sched_on_copy_prefetch(sched_t *self, sched_call_t *call);
/* A prefetch copy's result (DemoteDone of priority MIGRATOR_PREFETCH, internal plane). */
void sched_on_copy_done(sched_t *self, sched_call_t *call);
/* Fails prefetch copies without a result after SCHED_COPY_LOST_MS. */
void sched_copy_tick(sched_t *self, int64_t now);
void sched_lease_scan(sched_t *self, int64_t now);

/* The chain of open request request_id of instance inst (touching it), or
 * SCHED_NONE: the index's sched_chain_fn. */
uint32_t sched_request_chain(sched_t *self, uint32_t inst, const char *request_id);

#endif
