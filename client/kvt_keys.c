/* kvt_keys.c — the pure helpers of libkvtier: block keys (DESIGN.md §2) and status
 * names. No state, no allocation, safe from any thread. The key layout is a
 * contract with engines in other languages (kvtier.h documents it): change it
 * only with a new function name. */
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack: no allocation */
#include <xxhash.h>

#include <limits.h>
#include <string.h>

#include "bus_status.h"
#include "kvtier.h"

/* Tokens are serialised as u32 little-endian through this bounce buffer, so the
 * result does not depend on the host's byte order. */
#define S_TOKEN_CHUNK 256

const char *kvt_status_name(int code)
{
    return bus_status_name(code);
}

static void s_block_key(XXH3_state_t *st, const uint8_t parent[KVT_KEY_BYTES],
                        const uint32_t *tokens, uint32_t n, kvt_key_t *out)
{
    uint8_t le[S_TOKEN_CHUNK * 4];
    XXH3_128bits_reset(st);
    XXH3_128bits_update(st, parent, KVT_KEY_BYTES);
    for (uint32_t done = 0; done < n;) {
        uint32_t m = n - done < S_TOKEN_CHUNK ? n - done : S_TOKEN_CHUNK;
        for (uint32_t j = 0; j < m; j++) {
            uint32_t t = tokens[done + j];
            le[4 * j] = (uint8_t)t;
            le[4 * j + 1] = (uint8_t)(t >> 8);
            le[4 * j + 2] = (uint8_t)(t >> 16);
            le[4 * j + 3] = (uint8_t)(t >> 24);
        }
        XXH3_128bits_update(st, le, (size_t)m * 4);
        done += m;
    }
    XXH128_canonical_t canon;
    XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(st));
    memcpy(out->b, canon.digest, KVT_KEY_BYTES);
}

int kvt_block_keys(const uint32_t *tokens, size_t n_tokens, uint32_t tokens_per_block,
                   const kvt_key_t *parent, kvt_key_t *out, size_t max_out)
{
    if (tokens_per_block == 0 || (!tokens && n_tokens > 0) || (!out && max_out > 0))
        return -KVT_INVALID_ARGUMENT;
    size_t blocks = n_tokens / tokens_per_block;
    if (blocks > INT_MAX)
        return -KVT_INVALID_ARGUMENT;
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    uint8_t prev[KVT_KEY_BYTES] = {0};
    if (parent)
        memcpy(prev, parent->b, KVT_KEY_BYTES);
    size_t todo = blocks < max_out ? blocks : max_out;
    for (size_t i = 0; i < todo; i++) {
        s_block_key(&st, prev, tokens + i * tokens_per_block, tokens_per_block, &out[i]);
        memcpy(prev, out[i].b, KVT_KEY_BYTES);
    }
    return (int)blocks;
}
