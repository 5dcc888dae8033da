/* tier_checksum.h — the block checksum stored in slot headers (DESIGN.md §4):
 * xxh3-64 (seed 0) over the block's bytes taken in iovec order, so a block
 * split into segments (one per layer group) hashes the same as its
 * concatenation. No allocation; safe from any thread (a state belongs to its
 * caller).
 *
 * Every hot-path hash of block bytes goes through here, not through libxxhash's
 * exported functions: this file compiles xxh3 inline at -O3 (tiers/CMakeLists.txt),
 * which on the 2-core VMs hashes at about 1.3x the distribution's -O2 library, and
 * tier_checksum_copy fuses the put's copy with its hash in L1-sized pieces. The
 * values are xxh3's, identical to XXH3_64bits of the same bytes (the algorithm is
 * specified; only the code generation differs). */
#ifndef KVT_TIER_CHECKSUM_H
#define KVT_TIER_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* A streaming hash (an XXH3_state_t inside; tier_checksum.c checks it fits). */
#define TIER_CHECKSUM_STATE_BYTES 640
typedef struct {
    _Alignas(64) unsigned char opaque[TIER_CHECKSUM_STATE_BYTES];
} tier_checksum_state_t;

/* XXH3_64bits of iov[0] || iov[1] || ... || iov[n-1]. n <= 0 or a NULL iov
 * hash the empty string; zero-length segments contribute nothing. */
uint64_t tier_checksum(const struct iovec *iov, int n);

/* XXH3_64bits of one buffer (len 0: the empty string; p may then be NULL). */
uint64_t tier_checksum_buf(const void *p, size_t len);

/* Streaming: reset, any number of updates, digest (the state stays usable: a
 * digest does not end it). */
void tier_checksum_reset(tier_checksum_state_t *st);
void tier_checksum_update(tier_checksum_state_t *st, const void *p, size_t len);
uint64_t tier_checksum_digest(const tier_checksum_state_t *st);

/* memcpy(dst, src, len) that also updates st with src's bytes, each piece hashed
 * right after it is copied, while it is still in L1: the checksum costs no second
 * trip through memory. dst and src must not overlap. */
void tier_checksum_copy(tier_checksum_state_t *st, void *dst, const void *src, size_t len);

#endif
