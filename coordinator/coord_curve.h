/* coord_curve.h — "security.curve" of the deployment (docs/SECURITY.md "Keys and
 * sockets"): reading it, turning CURVE on in a process (bus_curve.h) with the
 * process's own pair, and resolving the per-instance key lists for the scheduler.
 *
 *   "security": { "curve": {
 *       "keys": "run/keys",              pairs: server.key (every server), NAME.key
 *       "clients": "run/keys/clients",   admitted public keys (default <keys>/clients)
 *       "auto": true,                    deploy/supervise makes the missing pairs
 *       "instances": { "tenant-a": ["alice"], "*": ["admin", "<Z85 key>"] } } }
 *
 * Owns: the section's rules and the file layout of the keys directory. Never
 * logs; the caller prints the message. */
#ifndef KVT_COORD_CURVE_H
#define KVT_COORD_CURVE_H

#include <stddef.h>

#include "bus_config.h"
#include "coord_config.h"
#include "sched_actor.h"

/* Reads SECURITY's "curve" (absent: out->on false). 0, or BUS_CONFIG_EINVALID with
 * "security.curve.<key>: <problem>" in err. */
int coord_curve_read(const bus_config_node_t *security, coord_curve_config_t *out, char *err,
                     size_t errlen);

/* Turns CURVE on for this process when the deployment asks for it: its pair is
 * CERT (a --cert flag) or <keys>/<NAME>.key; SERVES: it binds tcp sockets (it
 * then holds <keys>/server.key's pair too). 0 (also when CURVE is off), or -1
 * with err naming the file and what to do. */
int coord_curve_start(const coord_curve_config_t *cc, const char *name, const char *cert,
                      bool serves, char *err, size_t errlen);

/* The scheduler's per-instance grants from "instances" (at most SCHED_ACL_MAX
 * into ACL, their number in *N; *ON: isolation is on): names resolved to Z85
 * through <clients>/<name>.key. 0, or -1 with err naming the entry. */
int coord_curve_sched_acl(const coord_curve_config_t *cc, bool *on, sched_acl_entry_t *acl,
                          uint32_t *n, char *err, size_t errlen);

/* The keys a tier actor serves an Inventory to under per-instance isolation
 * (tier_actor_config_t.meta_keys_only): the coordinators' pairs that exist —
 * <keys>/coordinator.key (deploy/supervise gives it to every coordinator) and
 * <keys>/<NAME>.key for each of NAMES (a coordinator started with --name and no
 * --cert) — and every key granted "*". *ON false (and *N 0) without
 * security.curve.instances. At most CAP into KEYS. 0, or -1 with err naming the file
 * or the entry (no coordinator pair at all is an error). */
int coord_curve_meta_keys(const coord_curve_config_t *cc, const char *const *names,
                          uint32_t n_names, bool *on, char (*keys)[BUS_CURVE_KEY_TXT],
                          uint32_t cap, uint32_t *n, char *err, size_t errlen);
#endif
