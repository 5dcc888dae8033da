/* coord_registry.h — the instance registry in etcd (issue 9 §1; docs/OPERATIONS.md
 * "etcd keys"): what a new leader needs about the clients' instances and the tier
 * inventories cannot give it.
 *
 * The leader's scheduler pushes the spec of each instance it registers (created,
 * never an equal re-registration, never per request) to this actor's input
 * (sched_config_t.registry_output); the actor writes
 *   /kvtier/<cluster>/instances/<instance_id> = {"instance_id","model","dtype",
 *     "tokens_per_block","bytes_per_block","segment_bytes":[...]}
 * without a lease (it outlives the leader that wrote it; readable with etcdctl). A
 * write etcd refuses is tried COORD_REGISTRY_TRIES times, then logged. A new leader
 * reads the prefix when it takes office (coord_registry_load) and hands the specs
 * to its scheduler (sched_config_t.preload), which registers them before serving:
 * the clients' instances, their quotas and the blocks adopted for them are known
 * at once. At most `max` records are loaded; a malformed one, or one past `max`,
 * is logged and skipped.
 *
 * Its own thread and etcd handle: the scheduler never waits for etcd, the main
 * thread only for a bounded load at a term's start. Pipe: "$TERM"; "ENDPOINT" ->
 * the input endpoint; "LOAD" + max -> a count and a frame of kvtier_InstanceSpec. */
#ifndef KVT_COORD_REGISTRY_H
#define KVT_COORD_REGISTRY_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

#include "common.pb.h"

#define COORD_REGISTRY_TRIES 3       /* writes of one spec before it is given up */
#define COORD_REGISTRY_LOAD_MS 10000 /* coord_registry_load's wait for the actor */
#define COORD_REGISTRY_JSON_MAX 2048 /* one record */

typedef struct {
    const char *const *etcd_endpoints;
    uint32_t n_etcd;
    const char *cluster;
} coord_registry_config_t;

/* Starts the actor (its input bound, an etcd handle made), or NULL. */
zactor_t *coord_registry_new(const coord_registry_config_t *cfg);
/* The input endpoint (inproc) for sched_config_t.registry_output. 0 or -1. */
int coord_registry_endpoint(zactor_t *a, char *buf, size_t len);
/* Reads the registry: at most max specs into out, *n of them. 0, or -1 when etcd
 * (or the actor) did not answer within its timeouts (*n = 0). */
int coord_registry_load(zactor_t *a, kvtier_InstanceSpec *out, uint32_t max, uint32_t *n);

/* A spec as its record (NUL-terminated JSON): 0, or -1 when it does not fit. */
int coord_registry_json(const kvtier_InstanceSpec *s, char *buf, size_t len);
/* A record back into *s: 0, or -1 with why (not JSON, a field missing or out of
 * range, an id that is not the key's). key_id may be NULL (not checked). */
int coord_registry_parse(const char *json, size_t len, const char *key_id, kvtier_InstanceSpec *s,
                         char *why, size_t whylen);

#endif
