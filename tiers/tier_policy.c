/* tier_policy.c — the registry of replacement policies: the built-ins
 * (lru, clock, fifo, s3fifo) plus a small bounded table of registered extras.
 * Never allocates; registration is for start-up, not thread-safe. */
#include "tier_policy.h"

#include <errno.h>
#include <string.h>

static const tier_policy_ops_t *const s_builtin[] = {&tier_policy_lru, &tier_policy_clock,
                                                     &tier_policy_fifo, &tier_policy_s3fifo};
#define S_NBUILTIN (sizeof(s_builtin) / sizeof(s_builtin[0]))

static const tier_policy_ops_t *s_extra[TIER_POLICY_MAX_EXTRA];
static size_t s_nextra;

size_t tier_policy_count(void)
{
    return S_NBUILTIN + s_nextra;
}

const tier_policy_ops_t *tier_policy_at(size_t index)
{
    if (index < S_NBUILTIN)
        return s_builtin[index];
    index -= S_NBUILTIN;
    return index < s_nextra ? s_extra[index] : NULL;
}

const tier_policy_ops_t *tier_policy_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < tier_policy_count(); i++) {
        const tier_policy_ops_t *ops = tier_policy_at(i);
        if (strcmp(ops->name, name) == 0)
            return ops;
    }
    return NULL;
}

int tier_policy_register(const tier_policy_ops_t *ops)
{
    if (!ops || !ops->name || !ops->name[0] || !ops->state_size || !ops->init ||
        (!ops->admitted && !ops->admitted_facts) || !ops->touched || !ops->released ||
        !ops->position || !ops->restore || !ops->pick_victim || !ops->next_coldest)
        return -EINVAL;
    if (tier_policy_find(ops->name))
        return -EEXIST;
    if (s_nextra == TIER_POLICY_MAX_EXTRA)
        return -ENOSPC;
    s_extra[s_nextra++] = ops;
    return 0;
}
