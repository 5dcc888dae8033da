/* tier_slot_header.h — what a tier keeps about the block in one slot, shared by
 * the tier ops table (tier.h) and the host segment library (tier_seg.h). */
#ifndef KVT_TIER_SLOT_HEADER_H
#define KVT_TIER_SLOT_HEADER_H

#include <stdint.h>

#include "tier_key.h"

#define TIER_MAX_IOV 16 /* segments per block */

/* What a tier actor knows about the block in a slot. Persisted by tiers that
 * survive restarts. A slot whose header is not TIER_SLOT_SERVING is not served. */
enum tier_slot_state {
    TIER_SLOT_EMPTY = 0,
    TIER_SLOT_WRITING = 1,
    TIER_SLOT_SERVING = 2,
    TIER_SLOT_DELETING = 3,
};

typedef struct tier_slot_header {
    tier_key_t key;
    uint32_t instance;    /* scheduler-assigned instance id */
    uint32_t state;       /* enum tier_slot_state */
    uint64_t size;        /* bytes of the block, <= slot size */
    uint64_t checksum;    /* xxh3-64 of the block bytes */
    uint64_t deadline_ms; /* TTL deadline, wall-clock ms since the epoch; 0 = none */
} tier_slot_header_t;

#endif
