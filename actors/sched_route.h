/* sched_route.h — which branch (chain) a request uses: the router of
 * sched_config_t.route (sched_actor.h; UCM's StorePeer and its routing
 * strategies, docs/SCHEDULER.md "Branches").
 *
 * The choice is made once, at request_begin, from the request's facts only
 * (instance, ttl_ms, total_blocks): no state, no clock, no load figure, so the
 * same request begun again at another leader with the same config lands on the
 * same branch. Nothing here allocates or logs. */
#ifndef KVT_SCHED_ROUTE_H
#define KVT_SCHED_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "sched_actor.h"

/* The chain index (< cfg->n_chains) for a request of instance_id with these
 * facts (ttl_ms 0: no TTL; total_blocks 0: unknown). cfg has passed
 * sched_route_check. */
uint32_t sched_route_select(const sched_config_t *cfg, const char *instance_id, uint64_t ttl_ms,
                            uint32_t total_blocks);

/* The router's rules: a known kind; a fallback among the chains; TTL / LENGTH
 * bounds strictly decreasing over the chains in order (the fallback's 0);
 * INSTANCE entries unique, non-empty, naming a chain other than the fallback,
 * and every other chain named by one (a branch nothing reaches is a mistake).
 * 0, or -EINVAL with a message naming the chain in err. */
int sched_route_check(const sched_config_t *cfg, char *err, size_t errlen);

/* "none", "ttl", "length", "instance" (what StatsRequest and logs print). */
const char *sched_route_kind_name(uint32_t kind);

#endif
