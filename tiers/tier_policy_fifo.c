/* tier_policy_fifo.c — first in, first out: order of admission only; touches
 * do not move a slot. The victim is the earliest admitted evictable slot. */
#include "tier_policy_list.h"

const tier_policy_ops_t tier_policy_fifo = {
    .name = "fifo",
    .state_size = tier_policy_list_size,
    .init = tier_policy_list_init,
    .admitted = tier_policy_list_push_newest,
    .touched = tier_policy_list_keep,
    .released = tier_policy_list_unlink,
    .position = tier_policy_list_position,
    .restore = tier_policy_list_restore,
    .pick_victim = tier_policy_list_pick_oldest,
    .next_coldest = tier_policy_list_next_oldest,
};
