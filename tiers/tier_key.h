/* tier_key.h — the 16-byte block key as it travels inside tiers/ (slot engine,
 * slot headers), plain value type (equal bytes mean equal prefixes), and the
 * instance number slot headers store for an instance id: the service's one
 * instance hash, which the scheduler and every tier actor must compute alike. */
#ifndef KVT_TIER_KEY_H
#define KVT_TIER_KEY_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define TIER_KEY_BYTES 16

typedef struct {
    uint8_t b[TIER_KEY_BYTES];
} tier_key_t;

static inline bool tier_key_eq(const tier_key_t *a, const tier_key_t *b)
{
    return memcmp(a->b, b->b, TIER_KEY_BYTES) == 0;
}

/* The uint32 a slot header stores for an instance id: the low 32 bits of
 * tier_checksum (XXH3_64bits, seed 0) over the id's bytes without the NUL; NULL
 * and "" are 0, and a non-empty id that would hash to 0 becomes 1. */
uint32_t tier_instance_hash(const char *instance_id);

/* Writes 32 lowercase hex digits and a NUL into out (33 bytes); returns out. */
char *tier_key_hex(const tier_key_t *key, char out[2 * TIER_KEY_BYTES + 1]);

#endif
