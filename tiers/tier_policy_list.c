/* tier_policy_list.c — the recency list behind lru and fifo: O(1) admit,
 * touch, release and position restore; picking walks from the oldest end past
 * slots the engine says it may not take (pinned, re-admitted), so its cost is
 * the number of such slots at the cold end. Never allocates. */
#include "tier_policy_list.h"

#define S_NONE UINT32_MAX

typedef struct {
    uint32_t newest;
    uint32_t oldest;
    uint32_t capacity;
    uint32_t pad_;
    /* link[2 * slot] = next newer, link[2 * slot + 1] = next older */
    uint32_t link[];
} s_list_t;

#define S_NEWER(l, s) ((l)->link[2 * (size_t)(s)])
#define S_OLDER(l, s) ((l)->link[2 * (size_t)(s) + 1])

size_t tier_policy_list_size(uint32_t capacity)
{
    return sizeof(s_list_t) + 2 * (size_t)capacity * sizeof(uint32_t);
}

void tier_policy_list_init(void *st, uint32_t capacity)
{
    s_list_t *l = st;
    l->newest = l->oldest = S_NONE;
    l->capacity = capacity;
    for (size_t i = 0; i < 2 * (size_t)capacity; i++)
        l->link[i] = S_NONE;
}

/* Insert slot between older (S_NONE: at the oldest end) and its newer neighbour. */
static void s_insert_newer_than(s_list_t *l, uint32_t slot, uint32_t older)
{
    uint32_t newer = older == S_NONE ? l->oldest : S_NEWER(l, older);
    S_OLDER(l, slot) = older;
    S_NEWER(l, slot) = newer;
    if (older == S_NONE)
        l->oldest = slot;
    else
        S_NEWER(l, older) = slot;
    if (newer == S_NONE)
        l->newest = slot;
    else
        S_OLDER(l, newer) = slot;
}

void tier_policy_list_push_newest(void *st, uint32_t slot)
{
    s_list_t *l = st;
    s_insert_newer_than(l, slot, l->newest);
}

void tier_policy_list_unlink(void *st, uint32_t slot)
{
    s_list_t *l = st;
    uint32_t newer = S_NEWER(l, slot), older = S_OLDER(l, slot);
    if (newer == S_NONE)
        l->newest = older;
    else
        S_OLDER(l, newer) = older;
    if (older == S_NONE)
        l->oldest = newer;
    else
        S_NEWER(l, older) = newer;
    S_NEWER(l, slot) = S_OLDER(l, slot) = S_NONE;
}

void tier_policy_list_move_newest(void *st, uint32_t slot)
{
    s_list_t *l = st;
    if (l->newest == slot)
        return;
    tier_policy_list_unlink(st, slot);
    tier_policy_list_push_newest(st, slot);
}

void tier_policy_list_keep(void *st, uint32_t slot)
{
    (void)st;
    (void)slot;
}

uint64_t tier_policy_list_position(const void *st, uint32_t slot)
{
    const s_list_t *l = st;
    return S_OLDER(l, slot);
}

void tier_policy_list_restore(void *st, uint32_t slot, uint64_t memo)
{
    s_insert_newer_than(st, slot, (uint32_t)memo);
}

bool tier_policy_list_pick_oldest(void *st, tier_policy_evictable_fn evictable, const void *ctx,
                                  uint32_t *slot)
{
    s_list_t *l = st;
    for (uint32_t s = l->oldest; s != S_NONE; s = S_NEWER(l, s)) {
        if (evictable(ctx, s)) {
            *slot = s;
            return true;
        }
    }
    return false;
}

/* cursor: 0 before the first slot, else 1 + the slot returned last. */
bool tier_policy_list_next_oldest(const void *st, uint64_t *cursor, uint32_t *slot)
{
    const s_list_t *l = st;
    uint32_t s = *cursor == 0 ? l->oldest : S_NEWER(l, (uint32_t)(*cursor - 1));
    if (s == S_NONE)
        return false;
    *slot = s;
    *cursor = (uint64_t)s + 1;
    return true;
}
