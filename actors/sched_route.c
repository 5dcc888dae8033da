/* sched_route.c — the request router (sched_route.h): a pure function of a
 * request's facts and the config, and the config's rules.
 *
 * Semantics (UCM's ttl / length strategies): bounds are strictly decreasing in
 * chain order, so the first chain whose bound the fact exceeds is the one with
 * the largest bound below it; a request without the fact, or at or below every
 * bound, goes to the fallback. An instance router is a table lookup; an
 * instance it does not list goes to the fallback. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "sched_route.h"

#define S_MAX_TTL_MS (1ull << 40) /* as request_begin's ctx.ttl_ms bound */

const char *sched_route_kind_name(uint32_t kind)
{
    switch (kind) {
    case SCHED_ROUTE_NONE:
        return "none";
    case SCHED_ROUTE_TTL:
        return "ttl";
    case SCHED_ROUTE_LENGTH:
        return "length";
    case SCHED_ROUTE_INSTANCE:
        return "instance";
    default:
        return "?";
    }
}

static uint32_t s_by_bound(const sched_config_t *cfg, uint64_t fact)
{
    const sched_route_config_t *r = &cfg->route;
    if (fact == 0)
        return r->fallback;
    for (uint32_t i = 0; i < cfg->n_chains; i++)
        if (i != r->fallback && fact > cfg->chains[i].above)
            return i;
    return r->fallback;
}

uint32_t sched_route_select(const sched_config_t *cfg, const char *instance_id, uint64_t ttl_ms,
                            uint32_t total_blocks)
{
    const sched_route_config_t *r = &cfg->route;
    switch (r->kind) {
    case SCHED_ROUTE_TTL:
        return s_by_bound(cfg, ttl_ms);
    case SCHED_ROUTE_LENGTH:
        return s_by_bound(cfg, total_blocks);
    case SCHED_ROUTE_INSTANCE:
        for (uint32_t i = 0; instance_id && i < r->n_instances; i++)
            if (strcmp(r->instances[i].instance, instance_id) == 0)
                return r->instances[i].chain;
        return r->fallback;
    default:
        return 0;
    }
}

static int s_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static int s_check_bounds(const sched_config_t *cfg, char *err, size_t errlen)
{
    const sched_route_config_t *r = &cfg->route;
    const char *what = r->kind == SCHED_ROUTE_TTL ? "ttl_ms" : "total_blocks";
    uint64_t max = r->kind == SCHED_ROUTE_TTL ? S_MAX_TTL_MS : UINT32_MAX;
    uint32_t prev = SCHED_MAX_CHAINS;
    if (r->n_instances)
        return s_fail(err, errlen, "scheduler: a %s router lists no instances (%u given)",
                      sched_route_kind_name(r->kind), r->n_instances);
    for (uint32_t i = 0; i < cfg->n_chains; i++) {
        const sched_chain_config_t *ch = &cfg->chains[i];
        if (i == r->fallback) {
            if (ch->above)
                return s_fail(err, errlen,
                              "scheduler: chain %u (%s) is the fallback and has a bound (%" PRIu64
                              "): it takes what no other branch takes",
                              i, ch->name, ch->above);
            continue;
        }
        if (ch->above >= max)
            return s_fail(err, errlen,
                          "scheduler: chain %u (%s) bound %s > %" PRIu64 " is out of range "
                          "(below %" PRIu64 ")",
                          i, ch->name, what, ch->above, max);
        if (prev != SCHED_MAX_CHAINS && ch->above >= cfg->chains[prev].above)
            return s_fail(err, errlen,
                          "scheduler: chain %u (%s) bound %s > %" PRIu64
                          " is not below chain %u (%s)'s %" PRIu64 ": bounds must decrease "
                          "strictly in chain order",
                          i, ch->name, what, ch->above, prev, cfg->chains[prev].name,
                          cfg->chains[prev].above);
        prev = i;
    }
    return 0;
}

static int s_check_instances(const sched_config_t *cfg, char *err, size_t errlen)
{
    const sched_route_config_t *r = &cfg->route;
    bool named[SCHED_MAX_CHAINS] = {false};
    if (r->n_instances > SCHED_ROUTE_MAX_INSTANCES)
        return s_fail(err, errlen, "scheduler: %u routed instances, at most %d", r->n_instances,
                      SCHED_ROUTE_MAX_INSTANCES);
    for (uint32_t i = 0; i < r->n_instances; i++) {
        const sched_route_instance_t *in = &r->instances[i];
        if (!in->instance[0] || strnlen(in->instance, SCHED_INSTANCE_MAX) >= SCHED_INSTANCE_MAX)
            return s_fail(err, errlen, "scheduler: route instance %u empty or too long", i);
        if (in->chain >= cfg->n_chains || in->chain == r->fallback)
            return s_fail(err, errlen,
                          "scheduler: instance '%s' routed to chain %u: expected a chain "
                          "below %u other than the fallback %u",
                          in->instance, in->chain, cfg->n_chains, r->fallback);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(r->instances[j].instance, in->instance) == 0)
                return s_fail(err, errlen, "scheduler: instance '%s' routed twice", in->instance);
        named[in->chain] = true;
    }
    for (uint32_t c = 0; c < cfg->n_chains; c++) {
        if (cfg->chains[c].above)
            return s_fail(err, errlen,
                          "scheduler: chain %u (%s) has a bound under an instance router", c,
                          cfg->chains[c].name);
        if (c != r->fallback && !named[c])
            return s_fail(err, errlen,
                          "scheduler: chain %u (%s) is neither the fallback nor named by an "
                          "instance: no request would reach it",
                          c, cfg->chains[c].name);
    }
    return 0;
}

int sched_route_check(const sched_config_t *cfg, char *err, size_t errlen)
{
    const sched_route_config_t *r = &cfg->route;
    switch (r->kind) {
    case SCHED_ROUTE_NONE:
        if (r->n_instances || r->fallback)
            return s_fail(err, errlen,
                          "scheduler: no router, yet a fallback (%u) or instances (%u) are set",
                          r->fallback, r->n_instances);
        for (uint32_t c = 0; c < cfg->n_chains; c++)
            if (cfg->chains[c].above)
                return s_fail(err, errlen, "scheduler: chain %u (%s) has a bound but no router", c,
                              cfg->chains[c].name);
        return 0;
    case SCHED_ROUTE_TTL:
    case SCHED_ROUTE_LENGTH:
    case SCHED_ROUTE_INSTANCE:
        if (r->fallback >= cfg->n_chains)
            return s_fail(err, errlen, "scheduler: fallback chain %u, expected below %u",
                          r->fallback, cfg->n_chains);
        return r->kind == SCHED_ROUTE_INSTANCE ? s_check_instances(cfg, err, errlen)
                                               : s_check_bounds(cfg, err, errlen);
    default:
        return s_fail(err, errlen, "scheduler: router kind %u, expected 0..%d", r->kind,
                      SCHED_ROUTE_INSTANCE);
    }
}
