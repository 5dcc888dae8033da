/* gc.h — the gc actor (DESIGN.md §6 "GC"; issue 4 §5): confirms, in small bounded
 * rounds with a cooldown, that the SERVING locations in the scheduler's index still
 * hold their blocks, and has the scheduler drop those a tier actor says it does not.
 *
 * One round: GcScan (a page of at most `page` SERVING locations, from a cursor
 * that walks every tier and wraps) and ClusterInfo over the scheduler's internal
 * plane (sched_actor_internal_endpoint), ProbeRequest (expected keys) to each tier
 * actor named on the page, GcDrop of the locations a probe reported not present,
 * tagged with the tier epoch seen at the scan (the scheduler keeps a location whose
 * tier changed incarnation meanwhile). Each probe is followed, on the same
 * connection, by an empty Inventory page whose TierInfo.epoch must be the scanned
 * epoch (ProbeRequest has no epoch fence of its own). Only a definite "not present"
 * from that incarnation drops: a probe that times out or fails, or an answer from
 * another actor now bound at the endpoint, drops nothing. Writes past their grace and lapsed pins
 * are released by the scheduler's own lease scan (write_grace, pin_lease); the gc
 * counts what GcScan reports of them.
 *
 * Never holds the scheduler for long (one page per message, bounded scan) and never
 * blocks: every exchange is asynchronous on the actor's loop, at most one round in
 * flight, `interval_ms` between the end of a round and the next one.
 *
 * Pipe protocol: "$TERM"; "STATS" -> picture "b", a gc_stats_t (gc_actor_stats). */
#ifndef KVT_GC_H
#define KVT_GC_H

#include <czmq.h>
#include <stdint.h>

#include "bus_limits.h"

#define GC_ENDPOINT_MAX 256
#define GC_MAX_PAGE BUS_MAX_GC_PAGE /* GcScanReply.to_probe */

typedef struct {
    char sched_endpoint[GC_ENDPOINT_MAX]; /* the scheduler's internal plane */
    uint32_t interval_ms;                 /* cooldown between rounds (0: 1000) */
    uint32_t page;                        /* locations per round, 1..64 (0: 64) */
    uint32_t probe_timeout_ms;            /* per probe and scheduler call (0: 2000) */
} gc_config_t;

typedef struct {
    uint64_t rounds;           /* rounds finished (successful or not) */
    uint64_t passes;           /* scans that wrapped (every tier covered once more) */
    uint64_t probed;           /* locations probed with an answer */
    uint64_t missing;          /* reported not present by their tier actor */
    uint64_t dropped;          /* dropped by the scheduler (GcDrop) */
    uint64_t probe_failures;   /* probes that failed or timed out (nothing dropped) */
    uint64_t epoch_mismatches; /* answered by another incarnation (nothing dropped) */
    uint64_t sched_failures;   /* GcScan / ClusterInfo / GcDrop that failed */
    uint64_t aborted_writes;   /* reported by GcScan (scheduler lease scan) */
    uint64_t released_pins;    /* idem */
} gc_stats_t;

/* Starts the actor. NULL (after logging why) on a bad config. */
zactor_t *gc_actor_new(const gc_config_t *cfg);
/* A snapshot of the counters. 0, or -1 when the actor does not answer. */
int gc_actor_stats(zactor_t *actor, gc_stats_t *out);

#endif
