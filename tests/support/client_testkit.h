/* client_testkit.h — the in-process service libkvtier's tests run against: one host
 * tier actor (tcp://127.0.0.1:*, its own shm segment "/kvtc-<tag>-<pid>") behind a
 * scheduler of one chain, told that the tier is up, over real ZeroMQ. Header-only
 * (static inline), test use only; a test that needs another shape (two tiers, a
 * leader change, a secret) builds on ck_sched_config / ck_announce. */
#ifndef KVT_CLIENT_TESTKIT_H
#define KVT_CLIENT_TESTKIT_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bus_host.h"
#include "sched_actor.h"
#include "tier_actor.h"

typedef struct {
    zactor_t *tier;
    zactor_t *sched;
    char shm[64];
    char tier_ep[128];
    char sched_ep[256];
    uint64_t capacity, slot_size;
} ck_service_t;

/* The scheduler's config: cluster, one host tier "host0" (id 1) of capacity slots of
 * slot_size bytes, one chain "default" of it. */
static inline void ck_sched_config(sched_config_t *sc, const char *cluster, uint64_t capacity,
                                   uint64_t slot_size)
{
    sched_config_defaults(sc);
    snprintf(sc->cluster, sizeof sc->cluster, "%s", cluster);
    sc->n_tiers = 1;
    sc->tiers[0] =
        (sched_tier_config_t){.tier_id = 1, .capacity = capacity, .slot_size = slot_size};
    snprintf(sc->tiers[0].name, sizeof sc->tiers[0].name, "host0");
    snprintf(sc->tiers[0].kind, sizeof sc->tiers[0].kind, "host");
    sc->n_chains = 1;
    snprintf(sc->chains[0].name, sizeof sc->chains[0].name, "default");
    sc->chains[0].n_tiers = 1;
    sc->chains[0].tier_ids[0] = 1;
}

/* The tier actor of s, with one backend option key = value when key is not NULL
 * (as a deployment file gives it: "verify_reads" = "true"): 0, or -1. */
static inline int ck_tier_start_with(ck_service_t *s, const char *tag, uint64_t capacity,
                                     uint64_t slot_size, const char *key, const char *value)
{
    snprintf(s->shm, sizeof s->shm, "/kvtc-%s-%d", tag, (int)getpid());
    s->capacity = capacity;
    s->slot_size = slot_size;
    tier_actor_config_t tc = {.tier_id = 1, .endpoint = "tcp://127.0.0.1:*"};
    snprintf(tc.tier.name, sizeof tc.tier.name, "host0");
    snprintf(tc.tier.kind, sizeof tc.tier.kind, "host");
    snprintf(tc.tier.path, sizeof tc.tier.path, "%s", s->shm);
    tc.tier.capacity = capacity;
    tc.tier.slot_size = slot_size;
    if (key && tier_config_set(&tc.tier, key, value) != 0)
        return -1;
    s->tier = tier_actor_new(&tc);
    if (!s->tier)
        return -1;
    tier_actor_endpoint(s->tier, s->tier_ep, sizeof s->tier_ep);
    return 0;
}

static inline int ck_tier_start(ck_service_t *s, const char *tag, uint64_t capacity,
                                uint64_t slot_size)
{
    return ck_tier_start_with(s, tag, capacity, slot_size, NULL, NULL);
}

/* Tells sched that s's tier is up (as the membership watcher would). 0, or -1. */
static inline int ck_announce(zactor_t *sched, const ck_service_t *s)
{
    kvtier_TierInfo ti = kvtier_TierInfo_init_zero;
    ti.tier_id = 1;
    snprintf(ti.name, sizeof ti.name, "host0");
    ti.kind = kvtier_TierKind_TIER_KIND_HOST;
    snprintf(ti.endpoint, sizeof ti.endpoint, "%s", s->tier_ep);
    bus_host_identity(NULL, ti.host, sizeof ti.host);
    snprintf(ti.shm, sizeof ti.shm, "%s", s->shm);
    ti.epoch = tier_actor_epoch(s->tier);
    ti.capacity_slots = s->capacity;
    ti.slot_bytes = s->slot_size;
    ti.up = true;
    return sched_actor_tier_change(sched, true, &ti) == 0 ? 0 : -1;
}

/* The whole service: tier, scheduler of cluster, announced. 0, or -1. */
static inline int ck_start(ck_service_t *s, const char *tag, const char *cluster, uint64_t capacity,
                           uint64_t slot_size)
{
    memset(s, 0, sizeof *s);
    if (ck_tier_start(s, tag, capacity, slot_size) < 0)
        return -1;
    sched_config_t sc;
    ck_sched_config(&sc, cluster, capacity, slot_size);
    s->sched = sched_actor_new(&sc);
    if (!s->sched)
        return -1;
    sched_actor_endpoint(s->sched, s->sched_ep, sizeof s->sched_ep);
    return ck_announce(s->sched, s);
}

static inline void ck_stop(ck_service_t *s)
{
    zactor_destroy(&s->sched);
    zactor_destroy(&s->tier);
}

#endif
