/* tier_bad.c — plug-ins the loader must refuse, one per build define:
 * TIER_BAD_NOSYM exports no entry symbol; TIER_BAD_OLDVERSION returns a table of
 * ops version 1; TIER_BAD_REFUSES returns NULL (it cannot serve this host);
 * TIER_BAD_NOOPEN returns a table without the required ops. Built by
 * tests/CMakeLists.txt for test_tier_plugin.c. */
#include <stddef.h>
#include <stdint.h>

#include "tier.h"

#define S_EXPORT __attribute__((visibility("default")))

#if defined(TIER_BAD_NOSYM)
S_EXPORT int kvtier_not_the_entry(void);
int kvtier_not_the_entry(void)
{
    return 0;
}
#else
static const struct tier_ops s_ops = {
#if defined(TIER_BAD_OLDVERSION)
    .version = 1,
#else
    .version = TIER_OPS_VERSION,
#endif
    .kind = "bad",
};

S_EXPORT const struct tier_ops *kvtier_tier_entry(uint32_t version);
const struct tier_ops *kvtier_tier_entry(uint32_t version)
{
    (void)version;
#if defined(TIER_BAD_REFUSES)
    return version == 0 ? &s_ops : NULL; /* never 0: it refuses every host */
#else
    return &s_ops;
#endif
}
#endif
