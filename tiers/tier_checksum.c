/* tier_checksum.c — xxh3-64 compiled into this file (XXH_INLINE_ALL), so the
 * hashing loops get this file's -O3 code generation whatever the build type; a
 * single segment takes the one-shot path, which gives the same value. */
#include "tier_checksum.h"

#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* The piece tier_checksum_copy copies then hashes: small enough that it is still
 * in L1 when hashed (48 KiB L1d here), large enough that the per-call overhead of
 * the update is noise. 8 KiB measured best of 4..32 KiB (docs/PERFORMANCE.md). */
#define S_COPY_PIECE (8u << 10)

_Static_assert(sizeof(XXH3_state_t) <= TIER_CHECKSUM_STATE_BYTES,
               "tier_checksum_state_t is smaller than xxhash's XXH3_state_t");
_Static_assert(_Alignof(XXH3_state_t) <= _Alignof(tier_checksum_state_t),
               "tier_checksum_state_t is less aligned than xxhash's XXH3_state_t");

static XXH3_state_t *s_state(tier_checksum_state_t *st)
{
    return (XXH3_state_t *)(void *)st->opaque;
}

uint64_t tier_checksum(const struct iovec *iov, int n)
{
    if (!iov || n <= 0)
        return XXH3_64bits(NULL, 0);
    if (n == 1)
        return XXH3_64bits(iov[0].iov_base, iov[0].iov_len);

    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    for (int i = 0; i < n; i++)
        if (iov[i].iov_len)
            XXH3_64bits_update(&state, iov[i].iov_base, iov[i].iov_len);
    return XXH3_64bits_digest(&state);
}

uint64_t tier_checksum_buf(const void *p, size_t len)
{
    return XXH3_64bits(len ? p : NULL, len);
}

void tier_checksum_reset(tier_checksum_state_t *st)
{
    XXH3_64bits_reset(s_state(st));
}

void tier_checksum_update(tier_checksum_state_t *st, const void *p, size_t len)
{
    if (len)
        XXH3_64bits_update(s_state(st), p, len);
}

uint64_t tier_checksum_digest(const tier_checksum_state_t *st)
{
    return XXH3_64bits_digest((const XXH3_state_t *)(const void *)st->opaque);
}

void tier_checksum_copy(tier_checksum_state_t *st, void *dst, const void *src, size_t len)
{
    XXH3_state_t *h = s_state(st);
    for (size_t off = 0; off < len; off += S_COPY_PIECE) {
        size_t n = len - off < S_COPY_PIECE ? len - off : S_COPY_PIECE;
        memcpy((uint8_t *)dst + off, (const uint8_t *)src + off, n);
        XXH3_64bits_update(h, (const uint8_t *)src + off, n);
    }
}
