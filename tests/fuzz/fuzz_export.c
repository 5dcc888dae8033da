/* fuzz_export.c — libFuzzer harness for the bytes a token and its result travel
 * in between processes (client/kvt_export.c), as kvt_token_import and
 * kvt_token_result_import decode them from another process. The first byte picks
 * the decoder (bit 0 clear: token "KVTX", set: result "KVTR") and, with bit 1, has
 * the harness restamp the trailing xxh3 checksum first, so mutations reach the
 * checks behind it (random bytes almost never carry a right checksum); the rest is
 * the input.
 * Properties: an accepted token's keys and payload lie inside the input and it
 * re-encodes to exactly the input; its payload goes on to bus_token_decode as the
 * import does (that decoder's own properties are fuzz_token.c's); an accepted
 * result re-encodes to exactly the input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "bus_arrays.h"
#include "bus_token.h"
#include "kvt_export.h"

#define S_MAX (1u << 20)

static uint8_t s_out[S_MAX + 64];
static uint8_t s_in[S_MAX];
static uint64_t s_sums[S_MAX / 8];
static bus_token_view_t s_view;

static void s_same(const uint8_t *in, size_t len, int rc, size_t olen, const char *what)
{
    if (rc != 0 || olen != len || memcmp(s_out, in, len) != 0) {
        fprintf(stderr, "accepted %s does not re-encode to its bytes (rc %d, %zu vs %zu)\n", what,
                rc, olen, len);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    if (size < 1 || size - 1 > S_MAX)
        return 0;
    const uint8_t *in = data + 1;
    size_t len = size - 1, olen = 0;
    if ((data[0] & 2) && len >= 8) {
        memcpy(s_in, in, len);
        uint64_t h = XXH3_64bits(s_in, len - 8);
        for (int i = 0; i < 8; i++)
            s_in[len - 8 + (size_t)i] = (uint8_t)(h >> (8 * i));
        in = s_in;
    }
    if ((data[0] & 1) == 0) {
        kvti_tokx_t x;
        if (kvti_tokx_decode(in, len, &x, err, sizeof err) < 0)
            return 0;
        if (x.keys < in || x.payload < x.keys || x.payload + x.payload_len > in + len ||
            (size_t)(x.payload - x.keys) != (size_t)x.n_keys * 16) {
            fprintf(stderr, "accepted token's keys or payload lie outside its bytes\n");
            abort();
        }
        s_same(in, len, kvti_tokx_encode(&x, s_out, sizeof s_out, &olen, err, sizeof err), olen,
               "token");
        if (x.payload_len <= BUS_MAX_BLOB)
            (void)bus_token_decode(x.payload, x.payload_len, &s_view, err, sizeof err);
        return 0;
    }
    kvti_tokr_t r;
    if (kvti_tokr_decode(in, len, &r, err, sizeof err) < 0)
        return 0;
    for (uint32_t i = 0; i < r.n_keys; i++)
        s_sums[i] = kvti_tokr_checksum(&r, i);
    r.sums = s_sums;
    s_same(in, len, kvti_tokr_encode(&r, s_out, sizeof s_out, &olen, err, sizeof err), olen,
           "result");
    return 0;
}
