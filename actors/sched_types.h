/* sched_types.h — private to actors/sched_*.c: what every scheduler module shares
 * (the scheduler's handle, counters, the index map, a call context, the replies).
 * The modules build on it, each in its own header with the state it owns, and
 * each including only the ones below it (dependencies run one way):
 *
 *   sched_window.h   windows and their entry pool (knows nothing of the scheduler)
 *   sched_tiers.h    the tier set: slot engines, tier clients, membership, headers
 *   sched_index.h    instances and block lookup over the tier set
 *   sched_reclaim.h  reclaim, DELETING, demotion, quotas, gc (the internal plane)
 *   sched_requests.h requests, windows' get / put / prefetch, leases, copies
 *   sched_int.h      the scheduler (struct sched): the modules' states together
 *
 * Nothing outside actors/sched_*.c includes these. */
#ifndef KVT_SCHED_TYPES_H
#define KVT_SCHED_TYPES_H

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
#include "tier_slots.h"

#define SCHED_NONE UINT32_MAX

/* The index's key (tier_key_t) and the wire's key rows (bus_arrays.h) are the same
 * 16 bytes: copies between them are plain memcpy. */
_Static_assert(sizeof(tier_key_t) == BUS_KEY_LEN && TIER_KEY_BYTES == BUS_KEY_LEN,
               "one block key size on the server side");

typedef struct sched sched_t; /* sched_int.h */

/* ---- counters (Stats) ---- */

typedef struct {
    uint64_t lookups, lookup_keys, hit_keys, miss_keys;
    uint64_t gets, get_keys, get_not_found, get_released;
    uint64_t puts, put_keys, put_skipped, put_no_space, put_busy;
    uint64_t puts_committed, puts_failed;
    uint64_t prefetches, prefetch_keys, prefetch_committed, prefetch_failed;
    uint64_t touched, removed, remove_busy;
    uint64_t prepares, completes; /* get+put windows opened and completed (issue 13 §2) */
} sched_counters_t;

typedef struct {
    uint64_t evictions, expirations, dropped_by_tier;
    uint64_t pins_lapsed, reservations_lapsed, safety_net_windows;
    uint64_t tier_timeouts, tier_errors, deletes_sent, deletes_dropped;
    uint64_t adopted, invalid_requests, busy_refusals, requests_lapsed;
    uint64_t overloaded; /* calls answered OVERLOADED (clients or requests past a bound) */
    uint64_t gc_scans, gc_dropped;
    uint64_t damaged_dropped;                  /* blocks a tier told us it dropped (TierNotice) */
    uint64_t gc_suspects, gc_suspects_dropped; /* failed loads handed to the gc first */
    uint64_t reclaim_marked, reclaimed, reclaim_stale, reclaim_backpressure;
    uint64_t demote_submitted, demoted, demote_failed, demote_stale;
    uint64_t quota_reclaimed;      /* blocks marked DELETING by quota enforcement */
    uint64_t trim_removed;         /* ... by operators' trims (kvtier trim / remove) */
    uint64_t quota_backpressure;   /* enforcements cut short by a full DELETING queue */
    uint64_t quota_over;           /* instances being brought down at the last enforcement */
    uint64_t room_demotions;       /* blocks demoted at once because a write found the head full */
    uint64_t prefetch_copy_jobs;   /* migrator jobs submitted for prefetch copies */
    uint64_t prefetch_copied;      /* blocks the migrator copied for a prefetch */
    uint64_t prefetch_copy_failed; /* blocks whose prefetch copy failed or was not submitted */
    uint64_t prefetch_copy_lost;   /* jobs without a result after SCHED_COPY_LOST_MS */
    uint64_t prefetch_moved;       /* promoted blocks whose lower copy went (exclusive chains) */
    uint64_t touch_rewrites_skipped; /* touched headers not rewritten (tier client busy, send) */
    uint64_t registry_dropped;       /* instance specs not handed to the etcd registry */
} sched_global_t;

/* One meta-plane call kind's latency histogram (SCHED_LAT_BOUNDS_US). */
typedef struct {
    uint64_t count, sum_us;
    uint64_t buckets[SCHED_LAT_BUCKETS + 1];
} sched_lat_t;

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

/* One request being served: the decoded request and its arrays, the reply being
 * built and its arrays, and the request's scratch (max_batch each). The actor
 * makes one at start (sched_call_new) and hands it to every handler; sched_t
 * holds nothing about the current request, so a nested call (a demotion started
 * by a put, a deferred reply) cannot reach a request's arrays by accident. */
typedef struct sched_call {
    bus_server_t *srv; /* the server the request came from (replies go back there) */
    uint32_t client;   /* meta plane: index in the client table (sched_client_enter) */
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
