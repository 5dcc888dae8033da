/* coord_membership.h — tier membership from etcd (DESIGN.md §3: "tier actors appear
 * and disappear by their leases"), as a czmq actor, plus the JSON record a tier
 * process registers under /kvtier/<cluster>/tiers/<name>.
 *
 * The actor lists the tiers/ prefix, then watches it from the revision after the
 * list; when the watch ends (etcd restarted, compaction, connection lost) it
 * lists again and reports the difference, so no change is lost and none is
 * reported twice. It reports on its pipe (read with coord_membership_recv):
 *   UP    a tier registered, or its record changed (e.g. a new epoch after the
 *         tier process restarted: its memory is gone)
 *   DOWN  a tier's key disappeared (lease expired or revoked), or its record no
 *         longer parses
 * A record that does not parse is logged and treated as absent.
 *
 * Bounds: at most COORD_MEMBERSHIP_MAX tiers are tracked; keys beyond are logged
 * and ignored. Never: blocks on etcd other than in its own thread, or trusts a
 * record's content (every field is checked). */
#ifndef KVT_COORD_MEMBERSHIP_H
#define KVT_COORD_MEMBERSHIP_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.pb.h"
#include "coord_etcd.h"

#define COORD_MEMBERSHIP_MAX 64   /* tiers tracked */
#define COORD_TIER_VALUE_MAX 1024 /* bytes of one tier record */

typedef struct {
    const char *const *etcd_endpoints;
    size_t n_etcd;
    const char *cluster;
    int etcd_timeout_ms; /* per list call; 0: 2000 */
    int retry_ms;        /* first backoff after a failed list, doubled up to 2 s; 0: 100 */
} coord_membership_config_t;

typedef struct {
    bool up;
    int64_t revision;     /* etcd revision of the change (of the list for re-list diffs) */
    kvtier_TierInfo tier; /* DOWN: the last record known for that tier */
} coord_tier_change_t;

/* NULL on a bad config or when its start fails (no etcd handle: an empty
 * endpoint, out of memory; logged); etcd unreachable is retried. */
zactor_t *coord_membership_new(const coord_membership_config_t *cfg);
/* Ends the watch and the actor. NULL-safe, idempotent, nulls *pa. */
void coord_membership_destroy(zactor_t **pa);
/* Reads one change (poll the actor first: this blocks). 0 or -1. */
int coord_membership_recv(zactor_t *membership, coord_tier_change_t *out);

/* The tier record (wave-2 layout):
 *   {"name","kind","tier_id","endpoint","shm","host","epoch","capacity","slot_size"}
 * plus "pool" for a pool's member (issue 9 §3; absent: a deployment tier);
 * kind is "host", "nvme", "gpu" or "remote"; epoch is a decimal STRING (a random
 * u64 does not fit a JSON integer); the rest are strings and integers. Encode:
 * 0 or -ENOBUFS (*len = size needed) / -EINVAL (bad kind). Decode: 0 or -EBADMSG
 * with a reason in err (missing field, wrong type, string too long, id 0...). */
int coord_tier_value_encode(const kvtier_TierInfo *t, char *buf, size_t cap, size_t *len);
/* The same with the tier process's metrics address as "metrics" (issue 10; NULL or
 * "": none). Readers that do not know the field ignore it. */
int coord_tier_value_encode_metrics(const kvtier_TierInfo *t, const char *metrics, char *buf,
                                    size_t cap, size_t *len);
/* The "metrics" field of a record into out[cap]: 0, or -ENOENT (absent, not a
 * string, too long, or the record does not parse; out is ""). */
int coord_tier_value_metrics(const void *buf, size_t len, char *out, size_t cap);
int coord_tier_value_decode(const void *buf, size_t len, kvtier_TierInfo *out, char *err,
                            size_t errlen);

/* A pool member's tier id (issue 9 §3): claims one of [first_id, first_id +
 * max_members) for member NAME of pool POOL under LEASE, one transaction per id
 * (create the key /kvtier/<cluster>/tier_ids/<id> = {"name":NAME,"pool":POOL} if
 * absent); a key already holding exactly that value (the same member, before its
 * old lease lapsed) is taken over with a put under LEASE. WANT 0: the lowest free
 * id; else that id only (a new lease for the id held). 0 with *got; -EBUSY with WHY
 * naming the holders ("pool P is full: N of M members (id I: {...}, ...)" or the
 * WANT id's holder); another negative errno: etcd failed (nothing was claimed). */
int coord_pool_claim_id(coord_etcd_t *e, const char *cluster, const char *pool, uint32_t first_id,
                        uint32_t max_members, const char *name, int64_t lease, uint32_t want,
                        uint32_t *got, char *why, size_t whylen);

#endif
