/* tier_checksum.h — the block checksum stored in slot headers (DESIGN.md §4):
 * xxh3-64 (seed 0) over the block's bytes taken in iovec order, so a block
 * split into segments (one per layer group) hashes the same as its
 * concatenation. Pure function: no allocation, no state, safe from any thread. */
#ifndef KVT_TIER_CHECKSUM_H
#define KVT_TIER_CHECKSUM_H

#include <stdint.h>
#include <sys/uio.h>

/* XXH3_64bits of iov[0] || iov[1] || ... || iov[n-1]. n <= 0 or a NULL iov
 * hash the empty string; zero-length segments contribute nothing. */
uint64_t tier_checksum(const struct iovec *iov, int n);

#endif
