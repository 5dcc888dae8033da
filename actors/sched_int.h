/* sched_int.h — private to actors/sched_*.c: the scheduler actor's state and the
 * functions its files share. Nothing outside actors/sched_*.c includes this.
 *
 * Split: sched_actor.c (thread, loop, pipe, dispatch, replies, cluster info and
 * stats), sched_index.c (instances, hash maps, block lookup, Lookup / Touch /
 * Remove), sched_requests.c (requests, windows, get / put / prefetch, leases,
 * deferred put replies), sched_tiers.c (tier table, slot engines, tier clients,
 * membership, inventory, deletes, header writes), sched_internal.c (the internal
 * plane: GcScan / GcDrop / ReclaimCandidates, DELETING blocks and their delayed
 * free), sched_quota.c (QuotaEnforce: per-instance usage and quota reclaim).
 * This header holds the shared core types only; each module's functions are in
 * its own header (sched_index.h, sched_requests.h, sched_tiers.h,
 * sched_reclaim.h), which include this one and nothing of each other. */
#ifndef KVT_SCHED_INT_H
#define KVT_SCHED_INT_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "bus_arrays.h"
#include "bus_client.h"
#include "bus_server.h"
#include "bus_token.h"
#include "migrator.h"
#include "sched_actor.h"
#include "sched_window.h"
#include "tier_slots.h"

#define SCHED_NONE UINT32_MAX
#define SCHED_CHUNK 256u                      /* window entries per chunk of the window pool */
#define SCHED_DEL_BATCH 512u                  /* slots per DeleteSlots message */
#define SCHED_EXPIRE_BATCH 64u                /* expired blocks removed per tier per tick */
#define SCHED_INV_PAGE BUS_MAX_INVENTORY_PAGE /* InventoryReply.entries */
#define SCHED_INV_TRIES 5u                    /* failed inventory pages retried before giving up */
#define SCHED_DEMOTE_JOBS 16u                 /* migrator jobs in flight (demotion) */
#define SCHED_DEMOTE_JOB_BYTES (16u << 20)    /* slot bytes per demotion job, at most */
#define SCHED_ROOM_HOLD_MS 1000               /* room kept for a BUSY write that stopped retrying */
#define SCHED_COPY_JOBS 64u                   /* migrator jobs in flight (prefetch copies) */
#define SCHED_COPY_LOST_MS 60000              /* a prefetch copy without a result by then failed */

/* The index's key (tier_key_t) and the wire's key rows (bus_arrays.h) are the same
 * 16 bytes: copies between them are plain memcpy. */
_Static_assert(sizeof(tier_key_t) == BUS_KEY_LEN && TIER_KEY_BYTES == BUS_KEY_LEN,
               "one block key size on the server side");

/* ---- counters (Stats) ---- */

typedef struct {
    uint64_t lookups, lookup_keys, hit_keys, miss_keys;
    uint64_t gets, get_keys, get_not_found, get_released;
    uint64_t puts, put_keys, put_skipped, put_no_space, put_busy;
    uint64_t puts_committed, puts_failed;
    uint64_t prefetches, prefetch_keys, prefetch_committed, prefetch_failed;
    uint64_t touched, removed, remove_busy;
} sched_counters_t;

typedef struct {
    uint64_t evictions, expirations, dropped_by_tier;
    uint64_t pins_lapsed, reservations_lapsed, safety_net_windows;
    uint64_t tier_timeouts, tier_errors, deletes_sent, deletes_dropped;
    uint64_t adopted, invalid_requests, busy_refusals, requests_lapsed;
    uint64_t gc_scans, gc_dropped;
    uint64_t reclaim_marked, reclaimed, reclaim_stale, reclaim_backpressure;
    uint64_t demote_submitted, demoted, demote_failed, demote_stale;
    uint64_t quota_reclaimed;      /* blocks marked DELETING by quota enforcement */
    uint64_t quota_backpressure;   /* enforcements cut short by a full DELETING queue */
    uint64_t quota_over;           /* instances being brought down at the last enforcement */
    uint64_t room_demotions;       /* blocks demoted at once because a write found the head full */
    uint64_t prefetch_copy_jobs;   /* migrator jobs submitted for prefetch copies */
    uint64_t prefetch_copied;      /* blocks the migrator copied for a prefetch */
    uint64_t prefetch_copy_failed; /* blocks whose prefetch copy failed or was not submitted */
    uint64_t prefetch_copy_lost;   /* jobs without a result after SCHED_COPY_LOST_MS */
} sched_global_t;

/* ---- open-addressing hash map of u32 indices (instances, requests) ---- */

typedef struct {
    uint32_t *idx;  /* index + 1; 0 = empty bucket */
    uint64_t *hash; /* of the item in the bucket */
    uint32_t mask;  /* buckets - 1 (power of two, >= 2 x items) */
} sched_map_t;

typedef bool (*sched_map_eq_fn)(const void *ctx, uint32_t idx);

int sched_map_init(sched_map_t *m, uint32_t max_items);
void sched_map_fini(sched_map_t *m);
uint32_t sched_map_find(const sched_map_t *m, uint64_t hash, sched_map_eq_fn eq, const void *ctx);
void sched_map_insert(sched_map_t *m, uint64_t hash, uint32_t idx);
void sched_map_remove(sched_map_t *m, uint64_t hash, uint32_t idx);

/* ---- windows (sched_window.h): entries in chunks of a pool sized at start ---- */

typedef struct {
    bool used;
    char id[64];
    uint32_t number; /* slot-header instance number */
    uint64_t hash;
    kvtier_InstanceSpec spec;
    sched_counters_t c;
    /* quotas (sched_quota.c): as of the last enforcement */
    uint32_t q_entry;     /* 1 + index in cfg.quotas that applies; 0 unresolved; UINT32_MAX none */
    uint64_t q_usage;     /* locations over all tiers (DELETING excluded) */
    uint64_t q_limit;     /* limit in blocks (the tighter of max_blocks, max_bytes) */
    uint64_t q_over;      /* enforcements that found it above its limit */
    uint64_t q_reclaimed; /* blocks marked DELETING for its quota */
    bool q_draining;      /* went above its limit, not yet down to limit x low */
} sched_instance_t;

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
    /* the prefetch window's copy through the migrator (CopyPrefetch) */
    bool copy_ran;      /* the scheduler copied this window: complete trusts only its copies */
    bool ended;         /* request_end came mid-copy: out of the map, freed when the copy ends */
    uint32_t copies;    /* migrator jobs in flight */
    zframe_t *copy_rid; /* the CopyPrefetch caller, answered when the last job ends */
    uint64_t copy_corr;
} sched_request_t;

/* ---- tiers ---- */

typedef enum {
    SCHED_TIER_DOWN = 0,       /* no tier actor known: nothing stored, no puts */
    SCHED_TIER_RECOVERING = 1, /* paging its inventory: reads only */
    SCHED_TIER_UP = 2,
} sched_tier_state_t;

struct sched;

/* A block marked DELETING (reclaim, DESIGN §6): not served, not pinnable; its
 * slot is freed at `due` once no reader holds it. */
typedef struct {
    tier_key_t key;
    uint32_t number;
    uint32_t slot;
    int64_t due; /* monotonic ms */
} sched_deleting_t;

typedef struct sched_tier {
    struct sched *self;
    uint32_t idx;
    sched_tier_config_t cfg; /* capacity / slot_size as last announced */
    sched_tier_state_t state;
    uint64_t epoch;
    char endpoint[SCHED_ENDPOINT_MAX];
    char shm[64];
    char host[64];
    uint16_t gen; /* bumped whenever the engine is reset */
    tier_slots_t *slots;
    uint32_t *sizes;     /* per slot: block bytes of the committed block */
    uint64_t *checksums; /* per slot */
    bus_client_t *client;
    /* inventory paging (one page in flight) */
    bool inv_active, inv_in_flight;
    uint64_t inv_cursor;
    uint32_t inv_failures;
    uint64_t inv_adopted;
    /* DeleteSlots queued until the end of the current event */
    uint32_t n_del;
    uint64_t del_slots[SCHED_DEL_BATCH];
    uint8_t del_keys[SCHED_DEL_BATCH][BUS_KEY_LEN];
    uint64_t dropped; /* blocks dropped because the tier went down / changed epoch */
    /* DELETING blocks (bounded by cfg.max_pending_deletes) */
    uint32_t *del_mark; /* per slot: 1 + index in deleting[], 0 = not deleting */
    sched_deleting_t *deleting;
    uint32_t n_deleting;
    /* the largest write told BUSY lately (a keep tier): room is kept for it, so
     * smaller writes cannot take every freed slot first and starve it */
    uint32_t room_need;    /* its blocks; 0: none */
    uint64_t room_waiter;  /* its request's hash */
    int64_t room_asked_ms; /* its last try; forgotten SCHED_ROOM_HOLD_MS after */
} sched_tier_t;

/* A demotion job at the migrator: sources pinned, destinations reserved. */
typedef struct {
    bool used;
    uint64_t job_id;
    uint32_t src, dst; /* tier indices */
    uint16_t src_gen, dst_gen;
    uint32_t number; /* instance (one per job) */
    uint32_t n;
    int64_t submitted_ms; /* a slow job is logged */
    uint32_t src_slots[MIGRATOR_MAX_JOB_SLOTS];
    uint32_t dst_slots[MIGRATOR_MAX_JOB_SLOTS];
    tier_key_t keys[MIGRATOR_MAX_JOB_SLOTS];
} sched_demote_t;

/* A prefetch copy at the migrator: pairs of one window (token key indices,
 * ascending), all from one source tier to the head tier. */
typedef struct {
    bool used;
    uint64_t job_id;
    uint32_t req;      /* request index */
    uint64_t token_id; /* its window's token: a result for another window is ignored */
    int64_t submitted_ms;
    uint32_t n;
    uint32_t pairs[MIGRATOR_MAX_JOB_SLOTS];
} sched_copy_t;

/* A complete_put waiting for its tier's PutHeader reply. */
typedef struct {
    bool used;
    struct sched *self;
    zframe_t *routing_id;
    uint64_t corr_id;
    uint32_t inst;
    uint32_t tier;
    uint16_t gen;
    uint32_t n_sent; /* entries not flagged SKIP, in list order = header order */
    uint32_t failed; /* failed before sending (mask, stale) */
    bool prefetch;   /* a complete_prefetch: entries also hold PIN entries (sources) */
    sched_list_t entries;
} sched_put_op_t;

/* One request being served: the decoded request and its arrays, the reply being
 * built and its arrays, and the request's scratch (max_batch each). The actor
 * makes one at start (sched_call_new) and hands it to every handler; sched_t
 * holds nothing about the current request, so a nested call (a demotion started
 * by a put, a deferred reply) cannot reach a request's arrays by accident. */
typedef struct sched_call {
    bus_server_t *srv; /* the server the request came from (replies go back there) */
    bus_request_t req;
    bus_arrays_t *req_arr;
    kvtier_Envelope *rep;
    bus_arrays_t rep_arr;
    uint8_t (*rep_keys)[BUS_KEY_LEN];
    bool *rep_mask;
    uint32_t *rep_tiers;
    uint8_t *payload;
    size_t payload_cap;
    tier_key_t *keys;
    tier_resv_t *resv;
    tier_victim_t *victims;
    uint32_t *pos;
    bus_token_entry_t *tok;
    uint64_t *sizes, *checksums; /* per key sent to a tier (complete_put / prefetch) */
} sched_call_t;

typedef struct sched {
    sched_config_t cfg;
    zsock_t *pipe;
    zloop_t *loop;
    bus_server_t *server;
    bus_server_t *internal; /* internal plane (gc, reclaimer) */
    char endpoint[SCHED_ENDPOINT_MAX];
    char internal_ep[SCHED_ENDPOINT_MAX];
    uint64_t gc_cursor;
    uint64_t gc_seen_resv, gc_seen_pins; /* lapsed counters reported by the last GcScan */
    int64_t started_ms;
    uint64_t hash_seed;
    uint64_t next_token_id;
    uint64_t token_issuer; /* bus_token_meta_t.issuer of the tokens this scheduler mints */
    bool terminated;

    /* tier-plane messages built by sched_tiers.c (headers, deletes, inventory,
     * membership from the pipe), max_batch each: that module's own scratch */
    struct {
        kvtier_Envelope *env;
        uint64_t *slots, *sizes;
        uint8_t (*keys)[16];
        tier_victim_t victims[SCHED_EXPIRE_BATCH]; /* expired blocks of one tick */
    } tio;

    sched_instance_t *inst;
    uint32_t n_inst;
    sched_map_t inst_map;
    /* quotas (sched_quota.c): slot-header number -> 1 + instance index, rebuilt
     * per enforcement (open addressing, quota_mask + 1 buckets) */
    uint32_t *quota_map;
    uint32_t quota_mask;
    uint32_t quota_cursor; /* first instance examined by the next enforcement */

    sched_request_t *reqs;
    uint32_t *req_free;
    uint32_t n_req_free;
    sched_map_t req_map;
    uint32_t scan_cursor;

    sched_entry_t *pool;
    uint32_t *chunk_next;
    uint32_t *chunk_free;
    uint32_t n_chunks, n_chunk_free;

    sched_put_op_t *ops;
    kvtier_Envelope *op_rep; /* the envelope of deferred replies (put ops, prefetch copies) */
    bool *copy_mask;         /* max_batch: the success mask of a deferred CopyPrefetch reply */
    sched_copy_t copies[SCHED_COPY_JOBS];
    uint32_t *op_free;
    uint32_t n_op_free;

    /* demotion (cfg.demote): the migrator when this scheduler started it (NULL:
     * it runs beside, cfg.migrator_endpoint), the client to its jobs ROUTER (its
     * results come back as DemoteDone on the internal plane), jobs in flight */
    zactor_t *migrator;
    bus_client_t *mig_client;
    uint64_t next_job_id;
    sched_demote_t demotes[SCHED_DEMOTE_JOBS];
    /* sched_demote's own scratch: a demotion started in the middle of a request
     * (sched_make_room) never touches the request's keys / pos / resv / victims */
    struct {
        tier_key_t keys[MIGRATOR_MAX_JOB_SLOTS];
        uint32_t pos[MIGRATOR_MAX_JOB_SLOTS];
        tier_resv_t resv[MIGRATOR_MAX_JOB_SLOTS];
        tier_victim_t victims[MIGRATOR_MAX_JOB_SLOTS];
    } dm;

    uint32_t n_tiers;
    sched_tier_t tiers[SCHED_MAX_TIERS];

    sched_counters_t c;
    sched_global_t g;
} sched_t;

/* Copies src into dst[cap], truncating; always NUL-terminates. */
static inline void sched_strcpy(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* ---- sched_actor.c ---- */
/* A call context sized for max_batch keys, or NULL; destroy nulls *call. */
sched_call_t *sched_call_new(uint32_t max_batch);
void sched_call_destroy(sched_call_t **call);
int64_t sched_now(void);     /* monotonic ms (the slot engines' clock) */
int64_t sched_wall_ms(void); /* wall clock ms since the epoch (slot headers) */
void sched_reply(sched_t *self, sched_call_t *call);
void sched_reply_error(sched_t *self, sched_call_t *call, bus_code_t code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Starts the reply to the current request with body `tag` (status OK). */
kvtier_Envelope *sched_reply_begin(sched_t *self, sched_call_t *call, pb_size_t tag);

#endif
