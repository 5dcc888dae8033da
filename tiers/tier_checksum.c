/* tier_checksum.c — streaming xxh3-64 over an iovec. The state lives on the
 * stack (no allocation on the hot path); a single segment takes the one-shot
 * path, which gives the same value. */
#include "tier_checksum.h"

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

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
