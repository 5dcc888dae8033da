/* tier_key.h — the 16-byte block key as it travels inside tiers/ (slot engine,
 * slot headers). Plain value type; equal bytes mean equal prefixes. */
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

/* Writes 32 lowercase hex digits and a NUL into out (33 bytes); returns out. */
char *tier_key_hex(const tier_key_t *key, char out[2 * TIER_KEY_BYTES + 1]);

#endif
