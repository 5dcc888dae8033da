/* bus_token_mac.h — the token's MAC (bus_token.h trailer, algorithm 1) and the
 * cluster secret it is keyed from (docs/SECURITY.md). The scheduler seals every
 * token it mints; a tier actor verifies one before it grants anything.
 *
 * Key: BLAKE2b-256 keyed with the 32-byte cluster secret over
 * "kvtier token mac v1" NUL cluster-name, so one secret shared by two clusters
 * still gives each its own key (a token of one cluster never verifies in another).
 * MAC: HMAC-SHA-512/256 (libsodium crypto_auth) of every payload byte before the
 * trailer's mac_alg, compared in constant time.
 *
 * Secret file: exactly 32 raw bytes, a regular file that neither group nor others
 * may read or write (mode 0600 or 0400); anything else is refused with a message
 * naming the path. bus_secret_create writes one with a fresh random secret
 * (O_EXCL: never overwrites). Owns no state; never logs. */
#ifndef KVT_BUS_TOKEN_MAC_H
#define KVT_BUS_TOKEN_MAC_H

#include <stddef.h>
#include <stdint.h>

#include "bus_token.h"

#define BUS_SECRET_BYTES 32u

typedef struct {
    uint8_t k[32];
} bus_token_key_t;

/* The MAC key of `cluster` under `secret` (BUS_SECRET_BYTES). 0, or -EINVAL
 * without a cluster name, -EIO when libsodium cannot start. */
int bus_token_key_derive(const uint8_t *secret, const char *cluster, bus_token_key_t *out);

/* Seals a payload that bus_token_encode wrote (MAC none, *len bytes in buf):
 * rewrites its trailer as algorithm 1 and appends the MAC; *len grows by
 * BUS_TOKEN_MAC_HMAC_BYTES. -ENOSPC when cap is too small, -EINVAL when buf does
 * not end in an empty MAC-none trailer. */
int bus_token_seal(const bus_token_key_t *key, uint8_t *buf, size_t cap, size_t *len);

/* Verifies a decoded view (bus_token_decode of buf) under key: 0 when its MAC is
 * algorithm 1 and matches; -EPERM when it carries no MAC; -EBADMSG when the MAC
 * does not match (forged, altered, another secret or another cluster). */
int bus_token_verify(const bus_token_key_t *key, const bus_token_view_t *view, const uint8_t *buf);

/* Reads the secret file at path into out (BUS_SECRET_BYTES). 0, or -1 with a
 * message naming the path and what to change in err. */
int bus_secret_load(const char *path, uint8_t *out, char *err, size_t errlen);

/* Creates path (O_EXCL, mode 0600) holding a fresh random secret. 0, or -1 with a
 * message in err (an existing file is never overwritten). */
int bus_secret_create(const char *path, char *err, size_t errlen);

/* Zeroes n bytes of key or secret material (sodium_memzero: never optimised away). */
void bus_secret_wipe(void *p, size_t n);

#endif
