/* sched_int.h — private to actors/sched_*.c: the scheduler (struct sched), the
 * states of its modules together (sched_types.h lists them, lowest first).
 * sched_actor.c owns it: the thread, the loop, the pipe, the dispatch, replies,
 * cluster info and stats; each module initialises and finalises its own part.
 * Nothing outside actors/sched_*.c includes this. */
#ifndef KVT_SCHED_INT_H
#define KVT_SCHED_INT_H

#include "sched_requests.h"

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
};

/* True once cfg.lease_until_ms has passed: nothing leader-only is done any more
 * (logged the first time). sched_actor.c */
bool sched_lease_lapsed(sched_t *self);

#endif
