/* sched_tiers.h — the tier set: slot engines, tier clients, membership, inventory adoption, header
 * writes and deletes. Private to actors/sched_*.c; includes only the core types (sched_int.h). */
#ifndef KVT_SCHED_TIERS_H
#define KVT_SCHED_TIERS_H

#include "sched_int.h"

/* ---- sched_tiers.c ---- */
int sched_tiers_init(sched_t *self);
void sched_tiers_fini(sched_t *self);
void sched_tier_membership(sched_t *self, const kvtier_TierMembershipRequest *m);
void sched_tier_queue_delete(sched_tier_t *t, uint32_t slot, const tier_key_t *key);
void sched_tiers_flush(sched_t *self);
void sched_tiers_tick(sched_t *self, int64_t now);
void sched_tier_info(sched_t *self, const sched_tier_t *t, kvtier_TierInfo *out);
/* Is (number, key) at slot marked DELETING (hidden from lookups and pins)? The
 * marks are the tier's (sched_tier_t.del_mark / deleting); reclaim sets them. */
bool sched_is_deleting(const sched_tier_t *t, uint32_t number, const tier_key_t *key,
                       uint32_t slot);
/* Fills one token tier entry from the tier's announced identity. */
void sched_tier_token(const sched_tier_t *t, bus_token_tier_t *out);
/* Sends PutHeader(SERVING) for entries of `list` flagged neither SKIP nor PIN
 * (done: op callback). sizes_by_entry NULL: the instance's block size. */
int sched_tier_put_headers(sched_t *self, sched_put_op_t *op, const char *instance_id,
                           uint64_t deadline_wall_ms, const uint64_t *checksums_by_entry,
                           const uint64_t *sizes_by_entry, kvtier_Status *st);
/* Re-sends one block's header (a shared reservation concluded by a failing sharer);
 * id: the instance's id (NULL: nothing is sent). */
void sched_tier_reput_header(sched_t *self, sched_tier_t *t, const char *id, uint32_t number,
                             uint32_t slot, const tier_key_t *key);

#endif
