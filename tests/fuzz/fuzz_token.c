/* fuzz_token.c — libFuzzer harness for the token payload (bus/bus_token.c), as
 * the client's data plane opens a token the scheduler minted (kvt_control.c:
 * bus_token_decode over Token.payload, at most BUS_MAX_BLOB bytes). Properties:
 * every entry of an accepted payload names tiers inside its table, and an accepted
 * payload (MAC none, the only algorithm) re-encodes to exactly its own bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_arrays.h"
#include "bus_token.h"

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
    if (rc < 0 || len != size || memcmp(s_out, data, size) != 0) {
        fprintf(stderr, "accepted token does not re-encode to its bytes (rc %d, %zu vs %zu)\n", rc,
                len, size);
        abort();
    }
    return 0;
}
