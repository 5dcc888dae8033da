/* reclaimer.h — the reclaimer actor (DESIGN.md §6 "Reclaim and demotion"; issue 4
 * §4): keeps each tier's fill between its watermarks. Every `interval_ms` it asks the
 * scheduler (ReclaimCandidates over the internal plane, sched_actor_internal_endpoint)
 * for each configured tier's fill; above `high` the tier drains: on the last tier of
 * its chain the scheduler marks the coldest unpinned SERVING blocks DELETING (expired
 * first, then the tier's policy order; at most `batch` per request) until the fill,
 * DELETING blocks excluded, is at or below `low`. The scheduler frees a DELETING
 * block's slot after its delete delay, once no reader holds it, and sends DeleteSlots
 * to the tier actor. On a tier with a next tier (the reply names it) the
 * requests ask for demotion instead (ReclaimCandidates.demote): the scheduler
 * has its migrator copy the blocks down and switches their location when the
 * copy is done (sched_actor.h cfg.demote; without it nothing happens and the
 * tier is only watched). Counted in not_last; submitted blocks in marked.
 * A tier configured on_demand (by default a chain's last tier, coord_config.h
 * "reclaim") is only watched: it fills to its capacity, and a write or a
 * demotion into it evicts the slot engine's victim when it needs the slot.
 *
 * Quotas (issue 4 §4): with `quota_low_permille` set, each pass starts with a
 * QuotaEnforce: the scheduler brings every instance above its quota (its config's
 * `quotas`) down to quota x low, coldest blocks of the last tier first, through the
 * same DELETING path; repeated (up to `burst` times) while the reply says a bound
 * cut it short and blocks were marked.
 *
 * Bounded: one request in flight, at most `burst` requests per tier per interval;
 * the scheduler bounds the DELETING blocks per tier (its max_pending_deletes) and
 * reports backpressure, counted here, when that queue is full.
 *
 * Pipe protocol: "$TERM"; "STATS" -> picture "b", a reclaimer_stats_t. */
#ifndef KVT_RECLAIMER_H
#define KVT_RECLAIMER_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

#include "bus_limits.h"

#define RECLAIMER_ENDPOINT_MAX 256
#define RECLAIMER_MAX_TIERS BUS_MAX_TIERS
#define RECLAIMER_MAX_BATCH BUS_MAX_RECLAIM_BATCH /* ReclaimCandidatesReply.blocks */

typedef struct {
    uint32_t tier_id;       /* 1-based */
    uint32_t high_permille; /* drain above this fill (1..1000) */
    uint32_t low_permille;  /* ... down to this one (1..high-1) */
    /* only watched, never drained: its slots are freed when a write or a demotion
     * needs them (the coordinator sets it on a chain's last tier: a tier resting
     * at its low watermark holds fewer blocks than its slots) */
    bool on_demand;
} reclaimer_tier_t;

typedef struct {
    char sched_endpoint[RECLAIMER_ENDPOINT_MAX]; /* the scheduler's internal plane */
    uint32_t interval_ms;                        /* 0: 100 */
    uint32_t batch;                              /* blocks per request, 1..64 (0: 64) */
    uint32_t burst;                              /* requests per tier per interval (0: 16) */
    uint32_t call_timeout_ms;                    /* 0: 2000 */
    /* quotas: 0 = the scheduler has none (no QuotaEnforce sent); else the target
     * as a fraction of each quota, 1..1000 permille */
    uint32_t quota_low_permille;
    uint32_t n_tiers;
    reclaimer_tier_t tiers[RECLAIMER_MAX_TIERS];
} reclaimer_config_t;

typedef struct {
    uint64_t requests;           /* ReclaimCandidates sent */
    uint64_t failures;           /* ... that failed or timed out */
    uint64_t drains;             /* times a tier went above its high watermark */
    uint64_t marked;             /* blocks marked DELETING */
    uint64_t backpressure;       /* replies saying the DELETING queue was full */
    uint64_t not_last;           /* replies for a tier with a next tier (demotion, not deletion) */
    uint32_t draining;           /* tiers draining now */
    uint64_t quota_requests;     /* QuotaEnforce sent (failures counted in failures) */
    uint64_t quota_marked;       /* blocks marked DELETING for quotas */
    uint64_t quota_backpressure; /* QuotaEnforce replies saying a DELETING queue was full */
    uint32_t quota_over;         /* instances above a quota in the last reply */
    uint32_t fill_permille[RECLAIMER_MAX_TIERS]; /* last fill seen, by config index */
} reclaimer_stats_t;

/* Checks a config: watermarks 0 < low < high <= 1000, tier ids 1..32 and unique,
 * batch <= 64, quota_low_permille <= 1000. 0, or -EINVAL with a message in err. */
int reclaimer_config_check(const reclaimer_config_t *cfg, char *err, size_t errlen);

/* Starts the actor. NULL (after logging why) on a bad config. */
zactor_t *reclaimer_actor_new(const reclaimer_config_t *cfg);
/* A snapshot of the counters. 0, or -1 when the actor does not answer. */
int reclaimer_actor_stats(zactor_t *actor, reclaimer_stats_t *out);

#endif
