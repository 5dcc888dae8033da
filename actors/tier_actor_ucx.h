/* tier_actor_ucx.h — the tier actor's UCX side (tier_actor_ucx.c): a worker, a
 * listener beside the tier-plane endpoint, peer endpoints (at most 64) and the
 * staging regions Probe{ucx} hands out. Private to actors/tier_actor*.c. */
#ifndef KVT_TIER_ACTOR_UCX_H
#define KVT_TIER_ACTOR_UCX_H

#include <stddef.h>
#include <stdint.h>

typedef struct tier_actor_ucx tier_actor_ucx_t;

/* What Probe{ucx} gives a peer: its region's id, remote address and key. */
typedef struct {
    uint64_t id, base, length;
    const void *rkey;
    size_t rkey_len;
} tier_actor_ucx_region_t;

/* Starts UCX for tier `name` (regions of region_bytes each) with a listener on
 * the host of `endpoint` (the tier-plane's tcp endpoint). regions 0: nothing, 0 and
 * *out NULL. -1 with why filled ("tier NAME: UCX: ...") when UCX cannot run. */
int tier_actor_ucx_new(tier_actor_ucx_t **out, const char *name, const char *endpoint,
                       uint32_t regions, uint64_t region_bytes, char *why, size_t len);
void tier_actor_ucx_destroy(tier_actor_ucx_t **xp);

/* "ip:port" of the listener ("" without UCX). */
const char *tier_actor_ucx_address(const tier_actor_ucx_t *x);
/* The worker's event fd, as zpoller_add takes a file handle; NULL without UCX. */
int *tier_actor_ucx_fd(tier_actor_ucx_t *x);
/* Bounded progress, closes endpoints whose peer went, arms the fd. The loop's
 * next wait in ms: -1 (armed: sleep), 0 (more to do now). */
int tier_actor_ucx_service(tier_actor_ucx_t *x);

/* A region for a new holder: a free one, else the one idle longest if idle for
 * 10 s (its holder's key and id stop working). -EBUSY when every region is in
 * use; why filled. */
int tier_actor_ucx_grant(tier_actor_ucx_t *x, int64_t now_ms, tier_actor_ucx_region_t *out,
                         char *why, size_t len);
/* The bytes [offset, offset + len) of region id, or NULL (why filled) when the id
 * is not a current region or the range does not fit it. Marks the region used. */
uint8_t *tier_actor_ucx_range(tier_actor_ucx_t *x, uint64_t id, uint64_t offset, uint64_t len,
                              int64_t now_ms, char *why, size_t whylen);

#endif
