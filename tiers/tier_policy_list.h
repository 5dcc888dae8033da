/* tier_policy_list.h — the recency list shared by the lru and fifo policies
 * (internal to tiers/). A doubly linked list threaded through two uint32 links
 * per slot, newest at one end, oldest at the other. The ops below match the
 * tier_policy_ops_t fields; lru and fifo differ only in what touched() does. */
#ifndef KVT_TIER_POLICY_LIST_H
#define KVT_TIER_POLICY_LIST_H

#include "tier_policy.h"

size_t tier_policy_list_size(uint32_t capacity);
void tier_policy_list_init(void *st, uint32_t capacity);
/* admitted: slot becomes the newest. */
void tier_policy_list_push_newest(void *st, uint32_t slot);
/* lru touched: unlink and push newest. */
void tier_policy_list_move_newest(void *st, uint32_t slot);
/* fifo touched: nothing moves. */
void tier_policy_list_keep(void *st, uint32_t slot);
void tier_policy_list_unlink(void *st, uint32_t slot);
/* memo = the next older slot, or UINT32_MAX when slot is the oldest. */
uint64_t tier_policy_list_position(const void *st, uint32_t slot);
void tier_policy_list_restore(void *st, uint32_t slot, uint64_t memo);
/* Oldest slot that is evictable, scanning towards the newest. */
bool tier_policy_list_pick_oldest(void *st, tier_policy_evictable_fn evictable, const void *ctx,
                                  uint32_t *slot);

/* Oldest first, towards the newest (next_coldest). */
bool tier_policy_list_next_oldest(const void *st, uint64_t *cursor, uint32_t *slot);

#endif
