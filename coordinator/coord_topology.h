/* coord_topology.h — the deployment's "topology": how its tiers are arranged
 * into chains and which chain (branch) a request uses, as one nested
 * description (issue 11 §4; UCM's StoreAssembler: store / pipe / peer).
 *
 *   topology := { "type": "store",    "tier": T, "name"? }                 one tier
 *             | { "type": "chain",    "tiers": [T, ...], "placement"?, "name"? }
 *             | { "type": "branches", "route": "ttl" | "length" | "instance",
 *                 "branches": [branch, ...] }                               1..8 branches
 *   branch   := a store or chain node with a "name" (unique) and its condition:
 *               "ttl_above": DURATION   (route "ttl": requests whose TTL is above it)
 *               "blocks_above": N       (route "length": predicted total blocks above N)
 *               "instances": [ID, ...]  (route "instance": requests of these instances)
 *               or "fallback": true     (exactly one: what no other branch takes,
 *                                        requests without the fact among them)
 *
 * UCM's semantics: bounds decrease strictly in branch order (the fallback
 * skipped) and the first branch whose bound a request's fact is above takes it;
 * a branch cannot itself have branches ("flatten them into a wider branches").
 * A single store or chain routes nothing (every request on it). The flat
 * "chains" list stays accepted (one chain per entry, every request on the
 * first); a file gives one of the two forms.
 *
 * Every error names its key path: "topology.branches[1].ttl_above: 30s is not
 * below branches[0]'s 10s (...)". Private to coordinator/ (coord_config.c). */
#ifndef KVT_COORD_TOPOLOGY_H
#define KVT_COORD_TOPOLOGY_H

#include <stddef.h>
#include <stdint.h>

#include "bus_config.h"
#include "coord_config.h"

/* Reads root's "topology" into c->chains and c->route* (c->tiers read before).
 * 0 or BUS_CONFIG_EINVALID with the message in err. */
int coord_topology_read(const bus_config_node_t *root, coord_config_t *c, char *err, size_t errlen);

/* Branches (or flat chains) may share tiers, but a tier has the same next tier
 * (or none) in every chain naming it: reclaim and demotion act on a tier, not on
 * the branch that wrote a block. The error names the second chain's entry. */
int coord_topology_check_next(const bus_config_node_t *root, const coord_config_t *c, char *err,
                              size_t errlen);

/* coord_config.c's readers, shared with the topology. */
int coord_config_get_name(const bus_config_node_t *node, const char *path, char *out, size_t outsz,
                          char *err, size_t errlen);
int coord_config_get_placement(const bus_config_node_t *node, const char *path, uint32_t *out,
                               char *err, size_t errlen);
/* The tier named at path appended to ch (known, not twice, within bounds). */
int coord_config_chain_tier(const bus_config_node_t *node, const char *path, coord_config_t *c,
                            coord_chain_config_t *ch, char *err, size_t errlen);
/* The array of tier names at key (at least one) appended to ch. */
int coord_config_chain_tiers(const bus_config_node_t *cn, const char *key, coord_config_t *c,
                             coord_chain_config_t *ch, char *err, size_t errlen);

#endif
