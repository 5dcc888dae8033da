/* coord_topology.c — "topology" → coord_config_t's chains and router (see
 * coord_topology.h for the description's grammar and rules). One reader per
 * node kind; the rules that span branches (names, bounds, instances, one
 * fallback) are checked as each branch is read, against those before it, so
 * each error names the later entry and the earlier one it clashes with. */
#include "coord_topology.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define S_MAX_TTL_MS (1ull << 40) /* request_begin's ctx.ttl_ms bound */

enum { S_STORE = 0, S_CHAIN = 1, S_BRANCHES = 2 };
static const char *const s_types[] = {"store", "chain", "branches", NULL};
/* index + 1 = coord_route_t */
static const char *const s_routes[] = {"ttl", "length", "instance", NULL};
/* the condition key of each route's branches (same order) */
static const char *const s_cond_keys[] = {"ttl_above", "blocks_above", "instances"};

/* ms as the file would say it: "90s", "10m", "1h", "1500ms". */
static const char *s_fmt_ms(uint64_t ms, char *buf, size_t len)
{
    if (ms && ms % 3600000 == 0)
        snprintf(buf, len, "%" PRIu64 "h", ms / 3600000);
    else if (ms && ms % 60000 == 0)
        snprintf(buf, len, "%" PRIu64 "m", ms / 60000);
    else if (ms && ms % 1000 == 0)
        snprintf(buf, len, "%" PRIu64 "s", ms / 1000);
    else
        snprintf(buf, len, "%" PRIu64 "ms", ms);
    return buf;
}

static int s_read_type(const bus_config_node_t *node, int *type, char *err, size_t errlen)
{
    if (!bus_config_has(node, "type"))
        return bus_config_error(node, "type", err, errlen,
                                "missing: a topology node is {\"type\": \"store\" | \"chain\" | "
                                "\"branches\", ...}");
    return bus_config_get_enum(node, "type", s_types, type, err, errlen);
}

/* A store ("tier") or chain ("tiers", "placement") node into ch; its name is
 * required in a branch (branch >= 0), else "default" unless given. extra: the
 * branch's condition keys allowed beside (NULL-terminated, or NULL). */
static int s_read_leaf(const bus_config_node_t *node, int type, int branch,
                       const char *const *extra, coord_config_t *c, coord_chain_config_t *ch,
                       char *err, size_t errlen)
{
    const char *keys[12];
    size_t nk = 0;
    keys[nk++] = "type";
    keys[nk++] = "name";
    if (type == S_STORE) {
        keys[nk++] = "tier";
    } else {
        keys[nk++] = "tiers";
        keys[nk++] = "placement";
    }
    for (size_t i = 0; extra && extra[i] && nk < 11; i++)
        keys[nk++] = extra[i];
    keys[nk] = NULL;
    int rc = bus_config_check_keys(node, "", keys, err, errlen);
    if (rc < 0)
        return rc;
    memset(ch, 0, sizeof *ch);
    if (branch >= 0 && !bus_config_has(node, "name"))
        return bus_config_error(node, "name", err, errlen,
                                "missing: a branch is named (the begin reply and the logs "
                                "name it)");
    if (bus_config_has(node, "name"))
        rc = coord_config_get_name(node, "name", ch->name, sizeof ch->name, err, errlen);
    else
        snprintf(ch->name, sizeof ch->name, "default");
    ch->placement = COORD_PLACEMENT_DEFAULT;
    if (rc == 0 && type == S_STORE)
        rc = coord_config_chain_tier(node, "tier", c, ch, err, errlen);
    if (rc == 0 && type == S_CHAIN)
        rc = coord_config_get_placement(node, "placement", &ch->placement, err, errlen);
    if (rc == 0 && type == S_CHAIN)
        rc = coord_config_chain_tiers(node, "tiers", c, ch, err, errlen);
    return rc;
}

/* The bound of branch i (ttl_above / blocks_above) into ch->above, strictly
 * below the previous bounded branch's (prev, or -1). */
static int s_read_bound(const bus_config_node_t *bn, uint32_t route, int prev, coord_config_t *c,
                        coord_chain_config_t *ch, char *err, size_t errlen)
{
    const char *key = s_cond_keys[route - 1];
    char a[32], b[32];
    uint64_t v = 0;
    int rc = route == COORD_ROUTE_TTL
                 ? bus_config_get_duration_ms(bn, key, &v, err, errlen)
                 : bus_config_get_u64(bn, key, 0, UINT32_MAX - 1u, &v, err, errlen);
    if (rc < 0)
        return rc;
    if (route == COORD_ROUTE_TTL && v >= S_MAX_TTL_MS)
        return bus_config_error(bn, key, err, errlen,
                                "%s: a TTL bound is below 2^40 ms (about 34 years), as a "
                                "request's TTL is",
                                s_fmt_ms(v, a, sizeof a));
    if (prev >= 0 && v >= c->chains[prev].above) {
        if (route == COORD_ROUTE_TTL)
            return bus_config_error(bn, key, err, errlen,
                                    "%s is not below branches[%d]'s %s: bounds decrease strictly "
                                    "in branch order (the first branch whose bound a request's "
                                    "TTL is above takes it)",
                                    s_fmt_ms(v, a, sizeof a), prev,
                                    s_fmt_ms(c->chains[prev].above, b, sizeof b));
        return bus_config_error(bn, key, err, errlen,
                                "%" PRIu64 " is not below branches[%d]'s %" PRIu64
                                ": bounds decrease strictly in branch order (the first branch "
                                "whose bound a request's predicted length is above takes it)",
                                v, prev, c->chains[prev].above);
    }
    ch->above = v;
    return 0;
}

/* Branch `chain`'s "instances" into c->route_instances. */
static int s_read_instances(const bus_config_node_t *bn, uint32_t chain, coord_config_t *c,
                            char *err, size_t errlen)
{
    bus_config_node_t arr;
    size_t n = 0;
    int rc =
        bus_config_get_array(bn, "instances", COORD_ROUTE_MAX_INSTANCES, &arr, &n, err, errlen);
    if (rc == 0 && n == 0)
        rc = bus_config_error(bn, "instances", err, errlen,
                              "a branch of an \"instance\" route lists at least one instance");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char idx[24];
        snprintf(idx, sizeof idx, "[%zu]", i);
        coord_route_instance_t *ri = &c->route_instances[c->n_route_instances];
        if (c->n_route_instances == COORD_ROUTE_MAX_INSTANCES)
            return bus_config_error(&arr, idx, err, errlen,
                                    "more than %d instances routed by all branches together",
                                    COORD_ROUTE_MAX_INSTANCES);
        rc = bus_config_get_string(&arr, idx, ri->instance, sizeof ri->instance, err, errlen);
        if (rc == 0 && !ri->instance[0])
            rc = bus_config_error(&arr, idx, err, errlen, "an instance id is not empty");
        for (uint32_t j = 0; rc == 0 && j < c->n_route_instances; j++)
            if (strcmp(c->route_instances[j].instance, ri->instance) == 0)
                rc = bus_config_error(&arr, idx, err, errlen,
                                      "instance \"%s\" is routed by branches[%u] already",
                                      ri->instance, c->route_instances[j].chain);
        if (rc == 0) {
            ri->chain = chain;
            c->n_route_instances++;
        }
    }
    return rc;
}

/* Branch i of a "branches" node: its node, name (unique), and condition or fallback. */
static int s_read_branch(const bus_config_node_t *bn, uint32_t i, int *prev, int *fallback,
                         coord_config_t *c, char *err, size_t errlen)
{
    const uint32_t route = c->route;
    const char *cond = s_cond_keys[route - 1];
    for (int r = 0; r < 3; r++)
        if (r != (int)route - 1 && bus_config_has(bn, s_cond_keys[r]))
            return bus_config_error(bn, s_cond_keys[r], err, errlen,
                                    "not a condition of a \"%s\" route (its branches take "
                                    "\"%s\" or \"fallback\": true)",
                                    s_routes[route - 1], cond);
    int type = 0;
    int rc = s_read_type(bn, &type, err, errlen);
    if (rc == 0 && type == S_BRANCHES)
        rc = bus_config_error(bn, "type", err, errlen,
                              "a branch cannot have branches of its own: flatten them into one "
                              "wider \"branches\"");
    const char *const extra[] = {cond, "fallback", NULL};
    coord_chain_config_t *ch = &c->chains[i];
    if (rc == 0)
        rc = s_read_leaf(bn, type, (int)i, extra, c, ch, err, errlen);
    for (uint32_t j = 0; rc == 0 && j < i; j++)
        if (strcmp(c->chains[j].name, ch->name) == 0)
            rc = bus_config_error(bn, "name", err, errlen,
                                  "duplicate branch name \"%s\" (also branches[%u])", ch->name, j);
    bool fb = false;
    if (rc == 0)
        rc = bus_config_opt_bool(bn, "fallback", false, &fb, err, errlen);
    if (rc < 0)
        return rc;
    bool has_cond = bus_config_has(bn, cond);
    if (fb && *fallback >= 0)
        return bus_config_error(bn, "fallback", err, errlen,
                                "a second fallback branch (branches[%d] is one): exactly one "
                                "takes what the others do not",
                                *fallback);
    if (fb && has_cond)
        return bus_config_error(bn, cond, err, errlen,
                                "the fallback branch takes what no other branch takes: it has "
                                "no \"%s\"",
                                cond);
    if (fb) {
        *fallback = (int)i;
        c->route_fallback = i;
        return 0;
    }
    if (!has_cond)
        return bus_config_error(bn, "", err, errlen,
                                "a branch of a \"%s\" route needs \"%s\" (or \"fallback\": true)",
                                s_routes[route - 1], cond);
    if (route == COORD_ROUTE_INSTANCE)
        return s_read_instances(bn, i, c, err, errlen);
    rc = s_read_bound(bn, route, *prev, c, ch, err, errlen);
    if (rc == 0)
        *prev = (int)i;
    return rc;
}

static int s_read_branches(const bus_config_node_t *topo, coord_config_t *c, char *err,
                           size_t errlen)
{
    static const char *const keys[] = {"type", "route", "branches", NULL};
    int rc = bus_config_check_keys(topo, "", keys, err, errlen);
    if (rc < 0)
        return rc;
    if (!bus_config_has(topo, "route"))
        return bus_config_error(topo, "route", err, errlen,
                                "missing: how requests pick a branch: \"ttl\", \"length\" or "
                                "\"instance\"");
    int route = 0;
    rc = bus_config_get_enum(topo, "route", s_routes, &route, err, errlen);
    if (rc < 0)
        return rc;
    c->route = (uint32_t)route + 1;
    bus_config_node_t arr, bn;
    size_t n = 0;
    rc = bus_config_get_array(topo, "branches", COORD_MAX_CHAINS, &arr, &n, err, errlen);
    if (rc == 0 && n == 0)
        rc = bus_config_error(topo, "branches", err, errlen, "at least one branch is needed");
    int prev = -1, fallback = -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = bus_config_array_elem(&arr, i, &bn, err, errlen);
        if (rc == 0)
            rc = s_read_branch(&bn, (uint32_t)i, &prev, &fallback, c, err, errlen);
        if (rc == 0)
            c->n_chains = (uint32_t)i + 1;
    }
    if (rc == 0 && fallback < 0)
        rc = bus_config_error(topo, "branches", err, errlen,
                              "no fallback branch: give the branch that takes the requests no "
                              "other branch takes (those without a %s too) \"fallback\": true",
                              c->route == COORD_ROUTE_TTL      ? "TTL"
                              : c->route == COORD_ROUTE_LENGTH ? "predicted length"
                                                               : "listed instance");
    return rc;
}

int coord_topology_read(const bus_config_node_t *root, coord_config_t *c, char *err, size_t errlen)
{
    bus_config_node_t topo;
    int rc = bus_config_get_object(root, "topology", 8, &topo, err, errlen);
    int type = 0;
    if (rc == 0)
        rc = s_read_type(&topo, &type, err, errlen);
    if (rc < 0)
        return rc;
    c->topology = true;
    c->route = COORD_ROUTE_NONE;
    c->route_fallback = 0;
    c->n_route_instances = 0;
    c->n_chains = 0;
    if (type == S_BRANCHES)
        return s_read_branches(&topo, c, err, errlen);
    rc = s_read_leaf(&topo, type, -1, NULL, c, &c->chains[0], err, errlen);
    if (rc == 0)
        c->n_chains = 1;
    return rc;
}

/* The key path, relative to root, of position j of chain i. */
static void s_entry_path(const bus_config_node_t *root, const coord_config_t *c, uint32_t i,
                         uint32_t j, char *buf, size_t len)
{
    char base[64];
    if (!c->topology)
        snprintf(base, sizeof base, "chains[%u]", i);
    else if (c->route == COORD_ROUTE_NONE)
        snprintf(base, sizeof base, "topology");
    else
        snprintf(base, sizeof base, "topology.branches[%u]", i);
    char tier[80];
    snprintf(tier, sizeof tier, "%s.tier", base);
    if (bus_config_has(root, tier))
        snprintf(buf, len, "%s", tier);
    else
        snprintf(buf, len, "%s.tiers[%u]", base, j);
}

static const char *s_next_name(const coord_config_t *c, const coord_chain_config_t *ch, uint32_t j)
{
    if (j + 1 >= ch->n_tiers)
        return NULL;
    const coord_tier_config_t *t = coord_config_tier_by_id(c, ch->tier_ids[j + 1]);
    return t ? t->name : "?";
}

int coord_topology_check_next(const bus_config_node_t *root, const coord_config_t *c, char *err,
                              size_t errlen)
{
    for (uint32_t a = 0; a < c->n_chains; a++)
        for (uint32_t j = 0; j < c->chains[a].n_tiers; j++)
            for (uint32_t b = 0; b < a; b++)
                for (uint32_t k = 0; k < c->chains[b].n_tiers; k++) {
                    if (c->chains[b].tier_ids[k] != c->chains[a].tier_ids[j])
                        continue;
                    const char *na = s_next_name(c, &c->chains[a], j);
                    const char *nb = s_next_name(c, &c->chains[b], k);
                    if ((!na && !nb) || (na && nb && strcmp(na, nb) == 0))
                        continue;
                    char path[128], other[128];
                    s_entry_path(root, c, a, j, path, sizeof path);
                    s_entry_path(root, c, b, k, other, sizeof other);
                    const coord_tier_config_t *t =
                        coord_config_tier_by_id(c, c->chains[a].tier_ids[j]);
                    char fa[72] = "by nothing", fb[72] = "by nothing";
                    if (na)
                        snprintf(fa, sizeof fa, "by \"%s\"", na);
                    if (nb)
                        snprintf(fb, sizeof fb, "by \"%s\"", nb);
                    return bus_config_error(root, path, err, errlen,
                                            "tier \"%s\" is followed %s here but %s at %s: a "
                                            "tier has one next tier in every chain naming it "
                                            "(reclaim and demotion act on the tier, whatever "
                                            "branch wrote a block)",
                                            t ? t->name : "?", fa, fb, other);
                }
    return 0;
}
