/* tier_policy_clock.c — CLOCK (second chance) over the slot array: a hand
 * sweeps slot indices; an evictable slot with its reference bit set loses the
 * bit and is passed over, one without it is the victim. Admission leaves the
 * bit clear (a second chance is earned by a touch). Slots the engine may not
 * take are passed over untouched. Restore after a failed batch puts back the
 * slot and its bit, not the hand. Never allocates. */
#include "tier_policy.h"

enum { S_PRESENT = 1, S_REF = 2 };

typedef struct {
    uint32_t hand;
    uint32_t capacity;
    uint8_t bits[];
} s_clock_t;

static size_t s_size(uint32_t capacity)
{
    return sizeof(s_clock_t) + capacity;
}

static void s_init(void *st, uint32_t capacity)
{
    s_clock_t *c = st;
    c->hand = 0;
    c->capacity = capacity;
    for (uint32_t i = 0; i < capacity; i++)
        c->bits[i] = 0;
}

static void s_admitted(void *st, uint32_t slot)
{
    s_clock_t *c = st;
    c->bits[slot] = S_PRESENT;
}

static void s_touched(void *st, uint32_t slot)
{
    s_clock_t *c = st;
    c->bits[slot] |= S_REF;
}

static void s_released(void *st, uint32_t slot)
{
    s_clock_t *c = st;
    c->bits[slot] = 0;
}

static uint64_t s_position(const void *st, uint32_t slot)
{
    const s_clock_t *c = st;
    return c->bits[slot];
}

static void s_restore(void *st, uint32_t slot, uint64_t memo)
{
    s_clock_t *c = st;
    c->bits[slot] = (uint8_t)memo;
}

static bool s_pick_victim(void *st, tier_policy_evictable_fn evictable, const void *ctx,
                          uint32_t *slot)
{
    s_clock_t *c = st;
    /* Two laps suffice: the first clears every evictable slot's bit. */
    for (uint64_t step = 0; step < 2 * (uint64_t)c->capacity; step++) {
        uint32_t i = c->hand;
        c->hand = i + 1 == c->capacity ? 0 : i + 1;
        if (!(c->bits[i] & S_PRESENT) || !evictable(ctx, i))
            continue;
        if (c->bits[i] & S_REF) {
            c->bits[i] &= (uint8_t)~S_REF;
            continue;
        }
        *slot = i;
        return true;
    }
    return false;
}

/* Two laps from the hand: the slots a sweep would take first (no reference bit),
 * then those with one. cursor: the next lap x capacity + step to look at. */
static bool s_next_coldest(const void *st, uint64_t *cursor, uint32_t *slot)
{
    const s_clock_t *c = st;
    for (uint64_t k = *cursor; k < 2 * (uint64_t)c->capacity; k++) {
        uint32_t lap = (uint32_t)(k / c->capacity), step = (uint32_t)(k % c->capacity);
        uint32_t i = (uint32_t)(((uint64_t)c->hand + step) % c->capacity);
        bool ref = (c->bits[i] & S_REF) != 0;
        if (!(c->bits[i] & S_PRESENT) || ref != (lap == 1))
            continue;
        *slot = i;
        *cursor = k + 1;
        return true;
    }
    *cursor = 2 * (uint64_t)c->capacity;
    return false;
}

const tier_policy_ops_t tier_policy_clock = {
    .name = "clock",
    .state_size = s_size,
    .init = s_init,
    .admitted = s_admitted,
    .touched = s_touched,
    .released = s_released,
    .position = s_position,
    .restore = s_restore,
    .pick_victim = s_pick_victim,
    .next_coldest = s_next_coldest,
};
