/* coord_registry.h — the instance registry in etcd (issue 9 §1; docs/OPERATIONS.md
 * "etcd keys"): what a new leader needs about the clients' instances and the tier
 * inventories cannot give it.
 *
 * The leader's scheduler pushes the spec of each instance it registers (created,
 * or registered again: an equal re-registration, never per request) to this
 * actor's input (sched_config_t.registry_output); the actor writes
 *   /kvtier/<cluster>/instances/<instance_id> = {"instance_id","model","dtype",
 *     "tokens_per_block","bytes_per_block","segment_bytes":[...],"segments",
 *     "number","written_ms"}
 * without a lease (it outlives the leader that wrote it; readable with etcdctl):
 * number is the instance's slot-header number (tier_instance_hash), written_ms the
 * wall-clock ms of the write. A spec is written when it is new to this term or its
 * record is older than COORD_REGISTRY_REFRESH_MS; an equal one inside that period
 * writes nothing; and every instance of this term has its record rewritten once a
 * period, so only records of instances no leader has seen registered lately age.
 * The first write of an id is refused (logged) while a record of another instance
 * with the same number, younger than the age bound, is there (a stale one is
 * deleted first). A write etcd refuses is tried COORD_REGISTRY_TRIES times, then
 * logged. A new leader reads the prefix when it takes office (coord_registry_load)
 * and hands the specs to its scheduler (sched_config_t.preload), which registers
 * them before serving: the clients' instances, their quotas and the blocks adopted
 * for them are known at once. Skipped and logged: a malformed record, one whose
 * number is not its id's, one older than COORD_REGISTRY_MAX_AGE_MS (and deleted,
 * only as read), the older of two with one number, and past `max` the oldest. A
 * record without written_ms (an older coordinator's) loads and is stamped then.
 *
 * Its own thread and etcd handle: the scheduler never waits for etcd, the main
 * thread only for a bounded load at a term's start. Pipe: "$TERM"; "END" (the
 * term is over: stop refreshing); "ENDPOINT" ->
 * the input endpoint; "LOAD" + max + tag -> the tag, a count and a frame of
 * kvtier_InstanceSpec (coord_registry_load drops an answer of another tag: a
 * late one of a load that timed out). */
#ifndef KVT_COORD_REGISTRY_H
#define KVT_COORD_REGISTRY_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

#include "common.pb.h"

#define COORD_REGISTRY_TRIES 3       /* writes of one spec before it is given up */
#define COORD_REGISTRY_LOAD_MS 10000 /* coord_registry_load's wait for the actor */
#define COORD_REGISTRY_JSON_MAX 2048 /* one record */
/* A record older than this is no instance any leader has seen registered for a
 * day (live ones are rewritten every COORD_REGISTRY_REFRESH_MS, and re-registered
 * at every new leader): its pod is gone (per-pod ids are never reused), and its
 * blocks are cold. A day leaves 23 refresh periods of margin for a leader that
 * cannot write etcd for a while, and dwarfs any wall-clock skew between hosts. */
#define COORD_REGISTRY_MAX_AGE_MS (24 * 3600 * 1000)
#define COORD_REGISTRY_REFRESH_MS (3600 * 1000)

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
/* This process leads no more (its scheduler is stopped): the records of its
 * term's instances are no longer refreshed (the next leader's are). */
void coord_registry_end_term(zactor_t *a);

/* A spec as its record written at written_ms (wall ms), NUL-terminated JSON: 0,
 * or -1 when it does not fit. */
int coord_registry_json(const kvtier_InstanceSpec *s, int64_t written_ms, char *buf, size_t len);
/* A record back into *s and *written_ms (0 when it has none; may be NULL): 0, or
 * -1 with why (not JSON, a field missing or out of range, an id that is not the
 * key's, a number that is not the id's). key_id may be NULL (not checked). */
int coord_registry_parse(const char *json, size_t len, const char *key_id, kvtier_InstanceSpec *s,
                         int64_t *written_ms, char *why, size_t whylen);

#endif
