/* fuzz_token.c — libFuzzer harness for the token payload (bus/bus_token.c), as
 * the client's data plane opens a token the scheduler minted (kvt_control.c:
 * bus_token_decode over Token.payload, at most BUS_MAX_BLOB bytes). Properties:
 * every entry of an accepted payload names tiers inside its table; an accepted
 * payload re-encodes to exactly its own bytes up to the MAC; and for MAC algorithm 1
 * the verify under the harness's key (the seeds' sealed tokens use it) agrees with
 * re-sealing: it succeeds exactly when sealing the re-encoding gives the input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_arrays.h"
#include "bus_token.h"
#include "bus_token_mac.h"

/* the key gen_seeds seals its "sealed_*" seeds with (tests/fuzz/gen_seeds.c) */
#define S_SECRET "kvtier fuzz seeds secret, 32 B!"
#define S_CLUSTER "fuzz"
static bus_token_key_t s_key;
static int s_key_ready;

static bus_token_entry_t s_entries[BUS_MAX_BLOB / BUS_TOKEN_ENTRY_BYTES];
static uint8_t s_out[BUS_MAX_BLOB];
static bus_token_view_t s_view;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    if (size > BUS_MAX_BLOB)
        return 0;
    if (bus_token_decode(data, size, &s_view, err, sizeof err) < 0)
        return 0;
    for (uint32_t i = 0; i < s_view.n_entries; i++) {
        bus_token_entry_at(&s_view, i, &s_entries[i]);
        const bus_token_entry_t *e = &s_entries[i];
        if (e->tier >= s_view.n_tiers ||
            (e->src_tier != BUS_TOKEN_NO_TIER && e->src_tier >= s_view.n_tiers)) {
            fprintf(stderr, "entry %u names tier %u / %u of %u\n", i, e->tier, e->src_tier,
                    s_view.n_tiers);
            abort();
        }
    }
    size_t len = 0;
    int rc = bus_token_encode(s_view.kind, &s_view.meta, s_view.tiers, s_view.n_tiers, s_entries,
                              s_view.n_entries, s_out, sizeof s_out, &len);
    if (rc < 0 || len != s_view.mac_covered + BUS_TOKEN_TRAILER_BYTES ||
        memcmp(s_out, data, s_view.mac_covered) != 0) {
        fprintf(stderr, "accepted token does not re-encode to its bytes (rc %d, %zu vs %zu)\n", rc,
                len, size);
        abort();
    }
    if (s_view.mac_alg == BUS_TOKEN_MAC_NONE) {
        if (len != size || memcmp(s_out, data, size) != 0)
            abort();
        return 0;
    }
    if (!s_key_ready && bus_token_key_derive((const uint8_t *)S_SECRET, S_CLUSTER, &s_key) == 0)
        s_key_ready = 1;
    int verified = bus_token_verify(&s_key, &s_view, data) == 0;
    int resealed = bus_token_seal(&s_key, s_out, sizeof s_out, &len) == 0 && len == size &&
                   memcmp(s_out, data, size) == 0;
    if (verified != resealed) {
        fprintf(stderr, "verify (%d) disagrees with re-sealing (%d)\n", verified, resealed);
        abort();
    }
    return 0;
}
