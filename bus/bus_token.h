/* bus_token.h — the opaque payload of a prepare's Token (schemas/meta.proto):
 * where each covered key lives (get), goes (put) or comes from and goes to
 * (prefetch), and what the token is (metadata). Minted by the scheduler, read only
 * by the data plane (client worker role, migrator). The scheduler never trusts a
 * payload sent back to it.
 *
 * Layout, version 2 (all integers little-endian; DESIGN.md §14: the leader epoch,
 * the MAC, export / import and combined windows are fields of this one format):
 *   header  (64 bytes)
 *     0  4  magic "KVT1"         (magic and version stay at 0..5 in every version)
 *     4  2  version (2)
 *     6  2  kind: 1 get, 2 put, 3 prefetch, 4 get+put (a combined window: the
 *              pinned prefix hits then the reserved misses), 5 admin (the scheduler's own PutHeader
 * / DeleteSlots), 6 copy (a CopySlots and the copy's own requests at its destination) 8  4  flags:
 * bit 0 EXPORTABLE (may be imported by another process) 12  2  n_tiers (<= 32) 14  2  reserved, 0
 *    16  4  n_entries
 *    20  4  n_get: get+put only, entries [0, n_get) are the get part (reads
 *              only), [n_get, n_entries) the put part (writes only); else 0
 *    24  8  token_id      Token.token_id of the window (0: none)
 *    32  8  issuer        the minting scheduler's incarnation, random per start
 *    40  8  leader_epoch  the leader's epoch when minted (0: not set yet)
 *    48  8  expiry_ms     wall clock, ms since 1970 UTC, after which it grants
 *                         nothing (0: none)
 *    56  4  instance      slot-header number of the instance it was minted for
 *                         (0: not set)
 *    60  4  reserved, 0
 *   tiers   n_tiers x { u32 tier_id | u64 slot_size | u64 epoch |
 *                       u16 len + endpoint | u16 len + shm name | u16 len + host id }
 *   entries n_entries x { u16 tier (index into tiers) | u16 src_tier (index, or
 *                         0xFFFF: none) | u32 size (bytes of the block) |
 *                         u64 slot | u64 src_slot }           (24 bytes each)
 *   trailer u16 mac_alg | u16 mac_len | mac_len bytes: a MAC over every byte
 *           before mac_alg. Algorithm 0 = none (mac_len 0); 1 = HMAC-SHA-512/256
 *           (libsodium crypto_auth, mac_len 32) under a key derived from the
 *           cluster secret and the cluster name (bus_token_mac.h). The codec only
 *           checks the trailer's shape; bus_token_mac.h signs and verifies.
 * (issuer, token_id) names a token across processes (export / import), whatever
 * the leader epoch.
 *
 * Forward compatibility. A token grants access, so a reader refuses what it does
 * not understand rather than skip it: a v2 reader refuses any other version (1 is
 * from an older coordinator), an unknown kind (a reader built before combined
 * windows refuses 4), any flag bit it does not know, a non-zero reserved field,
 * n_get outside get+put or above n_entries, an unknown MAC algorithm, a mac_len other than the
 * algorithm's, and any length that does not match (the payload ends exactly after the MAC). What is
 * new therefore comes with a new flag bit, kind or MAC algorithm (older readers refuse it), or a
 * new version. Decoding checks every length and index; a payload that fails is INVALID_ARGUMENT. */
#ifndef KVT_BUS_TOKEN_H
#define KVT_BUS_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "bus_limits.h"

#define BUS_TOKEN_VERSION 2
#define BUS_TOKEN_MAX_TIERS BUS_MAX_TIERS /* a token names tiers of one cluster */
#define BUS_TOKEN_NO_TIER 0xFFFFu
/* The format's own string bounds (len <= 255 / 63), wide enough for TierInfo's. */
#define BUS_TOKEN_ENDPOINT_MAX 256
#define BUS_TOKEN_NAME_MAX 64
#define BUS_TOKEN_HEADER_BYTES 64u
#define BUS_TOKEN_ENTRY_BYTES 24
#define BUS_TOKEN_TRAILER_BYTES 4u /* u16 mac_alg, u16 mac_len */
#define BUS_TOKEN_MAC_MAX 64u      /* longest MAC any algorithm may carry */
/* A tier record at its longest (strings at their bounds, less the NUL). */
#define BUS_TOKEN_TIER_MAX_BYTES                                                                   \
    (4u + 8u + 8u + 3u * 2u + (BUS_TOKEN_ENDPOINT_MAX - 1u) + 2u * (BUS_TOKEN_NAME_MAX - 1u))
/* Longest payload with n_tiers tiers and n_entries entries: size buffers with it. */
#define BUS_TOKEN_MAX_BYTES(n_tiers, n_entries)                                                    \
    (BUS_TOKEN_HEADER_BYTES + (uint64_t)(n_tiers)*BUS_TOKEN_TIER_MAX_BYTES +                       \
     (uint64_t)(n_entries)*BUS_TOKEN_ENTRY_BYTES + BUS_TOKEN_TRAILER_BYTES + BUS_TOKEN_MAC_MAX)

typedef enum {
    BUS_TOKEN_GET = 1,
    BUS_TOKEN_PUT = 2,
    BUS_TOKEN_PREFETCH = 3,
    /* A combined window (PrepareRequest): meta.n_get splits the entries into the
     * get part [0, n_get) and the put part [n_get, n_entries); a tier actor reads
     * only the first and writes only the second. Never EXPORTABLE. */
    BUS_TOKEN_GET_PUT = 4,
    /* Minted by the scheduler for its own tier-plane requests (never handed to a
     * client): PutHeader and DeleteSlots on the entries' slots. */
    BUS_TOKEN_ADMIN = 5,
    /* Minted by the scheduler for a copy job (demotion, promotion): entries have
     * a source like prefetch's; the source tier actor takes CopySlots with it and
     * forwards it with the copy's WriteSlots / PutHeader / DeleteSlots. */
    BUS_TOKEN_COPY = 6,
} bus_token_kind_t;

/* flags: bits a v2 reader knows; any other bit is refused. */
#define BUS_TOKEN_F_EXPORTABLE 0x1u
#define BUS_TOKEN_F_KNOWN (BUS_TOKEN_F_EXPORTABLE)

/* MAC algorithms of the trailer; any other value is refused. */
#define BUS_TOKEN_MAC_NONE 0u
#define BUS_TOKEN_MAC_HMAC512_256 1u /* crypto_auth_hmacsha512256 */
#define BUS_TOKEN_MAC_HMAC_BYTES 32u

typedef struct bus_token_meta {
    uint32_t flags; /* BUS_TOKEN_F_* */
    uint32_t n_get; /* get+put only: entries [0, n_get) are gets, the rest puts; else 0 */
    uint64_t token_id;
    uint64_t issuer;
    uint64_t leader_epoch; /* 0: not set yet */
    uint64_t expiry_ms;    /* wall clock ms since 1970 UTC; 0: none */
    uint32_t instance;     /* slot-header instance number; 0: not set */
} bus_token_meta_t;

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
    uint16_t src_tier; /* prefetch, copy: index of the source tier, else BUS_TOKEN_NO_TIER */
    uint32_t size;     /* bytes of the block */
    uint64_t slot;
    uint64_t src_slot;
} bus_token_entry_t;

/* A decoded payload: the tier table is copied, entries and MAC are read in place. */
typedef struct bus_token_view {
    bus_token_kind_t kind;
    bus_token_meta_t meta;
    uint32_t n_tiers;
    bus_token_tier_t tiers[BUS_TOKEN_MAX_TIERS];
    uint32_t n_entries;
    const uint8_t *entries; /* n_entries x BUS_TOKEN_ENTRY_BYTES inside the payload */
    uint16_t mac_alg;       /* BUS_TOKEN_MAC_* */
    uint16_t mac_len;
    const uint8_t *mac; /* mac_len bytes inside the payload (NULL when 0) */
    size_t mac_covered; /* bytes from the payload's start the MAC covers */
} bus_token_view_t;

/* Bytes needed to encode (MAC none); 0 when the tier table is too large or a
 * string too long. */
size_t bus_token_encoded_size(const bus_token_tier_t *tiers, uint32_t n_tiers, uint32_t n_entries);

/* Encodes a version 2 payload (MAC none) into buf (cap bytes); *len gets the size.
 * meta NULL = all zero. -ENOSPC when cap is too small, -EINVAL for a bad kind,
 * flag, n_get (non-zero outside get+put, or above n_entries; an EXPORTABLE
 * get+put), tier index or string. */
int bus_token_encode(bus_token_kind_t kind, const bus_token_meta_t *meta,
                     const bus_token_tier_t *tiers, uint32_t n_tiers,
                     const bus_token_entry_t *entries, uint32_t n_entries, uint8_t *buf, size_t cap,
                     size_t *len);

/* Validates and opens a payload (buf must outlive the view). -EINVAL with a
 * message in err for anything malformed, of another version or not supported. */
int bus_token_decode(const uint8_t *buf, size_t len, bus_token_view_t *view, char *err,
                     size_t errlen);

/* Entry i of a decoded view (i < n_entries). */
void bus_token_entry_at(const bus_token_view_t *view, uint32_t i, bus_token_entry_t *out);

#endif
