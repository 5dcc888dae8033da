/* tier_fake.h — a tier backend in plain process memory, for tests: kind "fake".
 * It implements only the required single-slot ops (write, read, put_header,
 * get_header), so everything else the tier actor uses runs through tier.c's
 * fallbacks (batch loops, inventory and probe over get_header, a random epoch):
 * the tier actor's rules that are not about a medium are tested on it. The same
 * source is built as a plug-in (kvt_tier_fake.so, entry TIER_PLUGIN_ENTRY) that
 * the suite loads by path with tier_load.
 *
 * Options: "max_bytes" (default 1 GiB): capacity x slot size above it is refused
 * at configure. No address. Memory: capacity x slot size plus 64 bytes a slot,
 * allocated at open; nothing after. */
#ifndef KVT_TIER_FAKE_H
#define KVT_TIER_FAKE_H

#include "tier.h"

#define TIER_FAKE_KIND "fake"

/* The ops table (also what the plug-in's entry returns). */
extern const struct tier_ops tier_fake_ops;

#endif
