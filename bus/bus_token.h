/* bus_token.h — the opaque payload of a prepare's Token (schemas/meta.proto):
 * where each covered key lives (get), goes (put) or comes from and goes to
 * (prefetch). Minted by the scheduler, read only by the data plane (client worker
 * role, migrator). The scheduler never trusts a payload sent back to it.
 *
 * Layout (all integers little-endian):
 *   header  "KVT1" | u16 version (1) | u16 kind | u16 n_tiers | u16 0 | u32 n_entries
 *   tiers   n_tiers x { u32 tier_id | u64 slot_size | u64 epoch |
 *                       u16 len + endpoint | u16 len + shm name | u16 len + host id }
 *   entries n_entries x { u16 tier (index into tiers) | u16 src_tier (index, or
 *                         0xFFFF: none) | u32 size (bytes of the block) |
 *                         u64 slot | u64 src_slot }           (24 bytes each)
 * Decoding checks every length and index; a payload that fails is INVALID_ARGUMENT. */
#ifndef KVT_BUS_TOKEN_H
#define KVT_BUS_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "bus_limits.h"

#define BUS_TOKEN_VERSION 1
#define BUS_TOKEN_MAX_TIERS BUS_MAX_TIERS /* a token names tiers of one cluster */
#define BUS_TOKEN_NO_TIER 0xFFFFu
/* The format's own string bounds (len <= 255 / 63), wide enough for TierInfo's. */
#define BUS_TOKEN_ENDPOINT_MAX 256
#define BUS_TOKEN_NAME_MAX 64
#define BUS_TOKEN_ENTRY_BYTES 24

typedef enum {
    BUS_TOKEN_GET = 1,
    BUS_TOKEN_PUT = 2,
    BUS_TOKEN_PREFETCH = 3,
} bus_token_kind_t;

typedef struct bus_token_tier {
    uint32_t tier_id;
    uint64_t slot_size;
    uint64_t epoch; /* the tier actor's incarnation: a restarted actor has a new one */
    char endpoint[BUS_TOKEN_ENDPOINT_MAX]; /* tier-plane endpoint */
    char shm[BUS_TOKEN_NAME_MAX];          /* host tier: shm segment name, else "" */
    char host[BUS_TOKEN_NAME_MAX];         /* host id of the tier actor's machine */
} bus_token_tier_t;

typedef struct bus_token_entry {
    uint16_t tier;     /* index into the tier table */
    uint16_t src_tier; /* prefetch: index of the source tier, else BUS_TOKEN_NO_TIER */
    uint32_t size;     /* bytes of the block */
    uint64_t slot;
    uint64_t src_slot;
} bus_token_entry_t;

/* A decoded payload: the tier table is copied, entries are read in place. */
typedef struct bus_token_view {
    bus_token_kind_t kind;
    uint32_t n_tiers;
    bus_token_tier_t tiers[BUS_TOKEN_MAX_TIERS];
    uint32_t n_entries;
    const uint8_t *entries; /* n_entries x BUS_TOKEN_ENTRY_BYTES inside the payload */
} bus_token_view_t;

/* Bytes needed to encode; 0 when the tier table is too large or a string too long. */
size_t bus_token_encoded_size(const bus_token_tier_t *tiers, uint32_t n_tiers, uint32_t n_entries);

/* Encodes into buf (cap bytes); *len gets the size. -ENOSPC when cap is too small,
 * -EINVAL for a bad kind, tier index or string. */
int bus_token_encode(bus_token_kind_t kind, const bus_token_tier_t *tiers, uint32_t n_tiers,
                     const bus_token_entry_t *entries, uint32_t n_entries, uint8_t *buf,
                     size_t cap, size_t *len);

/* Validates and opens a payload (buf must outlive the view). -EINVAL with a
 * message in err for anything malformed. */
int bus_token_decode(const uint8_t *buf, size_t len, bus_token_view_t *view, char *err,
                     size_t errlen);

/* Entry i of a decoded view (i < n_entries). */
void bus_token_entry_at(const bus_token_view_t *view, uint32_t i, bus_token_entry_t *out);

#endif
