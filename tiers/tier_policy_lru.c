/* tier_policy_lru.c — least recently used: admit and touch make a slot the
 * newest; the victim is the oldest evictable slot. */
#include "tier_policy_list.h"

const tier_policy_ops_t tier_policy_lru = {
    .name = "lru",
    .state_size = tier_policy_list_size,
    .init = tier_policy_list_init,
    .admitted = tier_policy_list_push_newest,
    .touched = tier_policy_list_move_newest,
    .released = tier_policy_list_unlink,
    .position = tier_policy_list_position,
    .restore = tier_policy_list_restore,
    .pick_victim = tier_policy_list_pick_oldest,
    .next_coldest = tier_policy_list_next_oldest,
};
