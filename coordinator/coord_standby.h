/* coord_standby.h — the meta-plane responder of a coordinator that is not the
 * leader (DESIGN.md §3: "a standby answers client requests with NOT_LEADER plus
 * the leader's endpoint"), as a czmq actor that binds the meta endpoint.
 *
 * ClusterInfo is answered (cluster, leader endpoint and epoch, the tiers known
 * from membership, marked up); every other valid request gets NOT_LEADER with the
 * leader's endpoint in Envelope.leader_endpoint ("" while no leader is known);
 * malformed input gets INVALID_ARGUMENT (bus_server). It never blocks on anything
 * but its two sockets and keeps no per-client state.
 *
 * Bounds: COORD_STANDBY_MAX_TIERS tiers (ClusterInfoReply.tiers); more are
 * dropped with a warning. */
#ifndef KVT_COORD_STANDBY_H
#define KVT_COORD_STANDBY_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bus_limits.h"
#include "common.pb.h"

#define COORD_STANDBY_MAX_TIERS BUS_MAX_TIERS

typedef struct {
    const char *endpoint; /* meta endpoint to bind ("tcp://127.0.0.1:*" picks a port) */
    uint32_t
        max_connections; /* connections kept open (bus_server_set_max_connections); 0: default */
    const char *cluster; /* ClusterInfoReply.cluster */
    const char *name;    /* Envelope.sender of replies */
    int bind_attempts;   /* tries while the address is still held by a socket closing
                            in this process (the scheduler's); 0: 50 */
    int bind_retry_ms;   /* between tries; 0: 20 */
} coord_standby_config_t;

/* Binds and starts answering. NULL (and a log line) when the endpoint cannot be
 * bound after bind_attempts tries, or the actor does not start. */
zactor_t *coord_standby_new(const coord_standby_config_t *cfg);
void coord_standby_destroy(zactor_t **pa);

/* The calls below wait at most BUS_ACTOR_ASK_MS for the actor: -1 when it does
 * not answer in time. */

/* The endpoint actually bound (ephemeral port resolved) into buf. 0 or -1. */
int coord_standby_endpoint(zactor_t *standby, char *buf, size_t len);

/* Where the leader is now (endpoint "" and epoch 0: unknown), and the etcd
 * cluster electing it (ClusterInfo.etcd_cluster_id; 0: unknown). 0 or -1. */
int coord_standby_set_leader(zactor_t *standby, const char *endpoint, uint64_t epoch,
                             uint64_t etcd_cluster_id);

/* A tier came up (added or replaced by name) or went down (removed). 0 or -1. */
int coord_standby_tier(zactor_t *standby, bool up, const kvtier_TierInfo *tier);

#endif
