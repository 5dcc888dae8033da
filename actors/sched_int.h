/* sched_int.h — private to actors/sched_*.c: the scheduler (struct sched), the
 * states of its modules together (sched_types.h lists them, lowest first).
 * sched_actor.c owns it: the thread, the loop, the pipe, the dispatch, replies,
 * cluster info and stats; each module initialises and finalises its own part.
 * Nothing outside actors/sched_*.c includes this. */
#ifndef KVT_SCHED_INT_H
#define KVT_SCHED_INT_H

#include "sched_requests.h"

/* A `kvtier leader resign` in progress (sched_resign.c). */
typedef struct {
    bool on;               /* waiting for the windows open at the request */
    bool handed;           /* handed over: this scheduler leads no more */
    int64_t started_ms;    /* sched_now() at the request */
    int64_t until_ms;      /* ... plus its wait */
    uint32_t windows_open; /* open at the request */
    zframe_t *rid;         /* the caller, answered at the hand-over */
    uint64_t corr_id;
    bus_server_t *srv;
} sched_resign_t;

struct sched {
    sched_config_t cfg;
    zsock_t *pipe;
    zloop_t *loop;
    bus_server_t *server;
    bus_server_t *internal; /* internal plane (gc, reclaimer, migrator results) */
    char endpoint[SCHED_ENDPOINT_MAX];
    char internal_ep[SCHED_ENDPOINT_MAX];
    int64_t started_ms;
    uint64_t hash_seed;
    uint64_t next_token_id;
    uint64_t token_issuer; /* bus_token_meta_t.issuer of the tokens this scheduler mints */
    bool seal;             /* cfg.has_secret: tokens are sealed under token_key */
    bus_token_key_t token_key;
    bool terminated;
    bool lapsed;         /* the leader's lease ran out (sched_lease_lapsed): logged once */
    bool serving_logged; /* "serving after N ms of rebuild" was logged (sched_tiers.c) */

    sched_events_t events;     /* sched_events.c */
    sched_tierset_t tierset;   /* sched_tiers.c */
    sched_index_t index;       /* sched_index.c */
    sched_reclaim_t reclaim;   /* sched_internal.c, sched_quota.c, sched_demote.c */
    sched_requests_t requests; /* sched_requests.c */

    sched_counters_t c;
    sched_global_t g;
    sched_lat_t lat[SCHED_LAT_CALLS]; /* sched_actor.c: per meta-plane call kind */
    sched_resign_t resign;            /* sched_resign.c */
};

/* True once cfg.lease_until_ms has passed: nothing leader-only is done any more
 * (logged the first time). sched_actor.c */
bool sched_lease_lapsed(sched_t *self);

/* ---- sched_resign.c: `kvtier leader resign` (issue 9 §3) ---- */
#define SCHED_RESIGN_WAIT_DEFAULT_S 10u
#define SCHED_RESIGN_WAIT_MAX_S 300u
/* AdminResignRequest: refused (CONFLICT: no standby, one in progress; INVALID_ARGUMENT)
 * or started; answered at the hand-over. */
void sched_on_admin_resign(sched_t *self, sched_call_t *call);
/* While resigning, a new window (every prepare kind) is refused: true when CALL
 * was answered so. */
bool sched_resign_refuses(sched_t *self, sched_call_t *call);
/* Hands over once the windows open at the request are closed or the wait passed. */
void sched_resign_tick(sched_t *self, int64_t now);
/* Windows not CLOSED over all open requests. */
uint32_t sched_open_windows(const sched_t *self);
void sched_resign_fini(sched_t *self);

/* ---- sched_drain.c: `kvtier drain TIER` (issue 9 §3) ---- */
/* AdminDrainRequest: refused, started, cancelled or reported; answered at once. */
void sched_on_admin_drain(sched_t *self, sched_call_t *call);
/* Moves the blocks of the draining tiers down; retires those found empty. */
void sched_drain_tick(sched_t *self, int64_t now);
/* True when new blocks may be placed on T (not draining, not retired). */
bool sched_tier_placeable(const sched_t *self, const sched_tier_t *t);
/* The tier new blocks of chain CHAIN go to: its first placeable tier (a pool
 * level: sched_pool_pick, skipped when no member is up; the last tier of the
 * chain when all are drained: drain refuses that). */
sched_tier_t *sched_chain_head(sched_t *self, uint32_t chain);
/* Pools (issue 9 §3): the member of pool POOL (1-based) new blocks go to: the up,
 * placeable one with the largest free fraction, ties to the lowest id; EXCEPT is
 * never picked. NULL: none. */
sched_tier_t *sched_pool_pick(sched_t *self, uint32_t pool, const sched_tier_t *except);
/* Are a and b one level of a chain (the same tier, or members of one pool)? */
bool sched_same_level(const sched_tier_t *a, const sched_tier_t *b);
/* Where a drain of T moves its blocks: another member of its pool, else its
 * next tier (sched_next_tier); 0: nowhere now. */
uint32_t sched_drain_target(sched_t *self, const sched_tier_t *t);
/* A block moved T -> below by a demotion: counted for T's drain. */
void sched_drain_moved(sched_t *self, sched_tier_t *t, uint32_t n);

#endif
