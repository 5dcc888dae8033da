/* opt_synth.h — a seeded generator of traces in the Mooncake format of traces/
 * (one JSON object per line: timestamp, input_length, output_length, hash_ids).
 *
 * Model, per request (in this order of choice):
 *   - a scan burst starts with probability scan_rate (when none is running): the
 *     next scan_len requests are scans, scan_blocks fresh blocks each, never reused;
 *   - otherwise, with probability reuse, it continues an earlier request (a
 *     multi-turn conversation): that request's blocks, then new ones; the earlier
 *     request is d back, d = 1 + geometric with mean reuse_distance - 1, at most
 *     OPT_SYNTH_HISTORY (and the requests so far);
 *   - otherwise, with probability share, it starts with one of `prefixes` shared
 *     prefixes (system prompts, documents) chosen with Zipf popularity (exponent
 *     zipf), each 1 + geometric(prefix_blocks - 1) blocks long, then new blocks;
 *   - otherwise it is new blocks only.
 *   New blocks: 1 + geometric(blocks - 1) fresh ids; a request is cut at max_blocks.
 *   input_length is the blocks x tokens_per_block minus a random part of the last
 *   block, output_length 1..512, arrivals geometric with mean interval_ms.
 * The same configuration and seed give the same bytes (xoshiro256**, seeded through
 * splitmix64; the geometric draws use libm's log, so the bytes are the same for the
 * same build and C library).
 *
 * Owns nothing between calls. Bounded: the history ring holds OPT_SYNTH_HISTORY
 * requests of at most max_blocks ids (8 bytes each). */
#ifndef KVT_OPT_SYNTH_H
#define KVT_OPT_SYNTH_H

#include <stdint.h>
#include <stdio.h>

#define OPT_SYNTH_HISTORY 4096u
#define OPT_SYNTH_MAX_REQUESTS 100000000ull
#define OPT_SYNTH_MAX_BLOCKS 4096u
#define OPT_SYNTH_MAX_PREFIXES 1000000u

typedef struct {
    uint64_t seed;             /* 1 */
    uint64_t requests;         /* 10000 */
    uint32_t prefixes;         /* 100 */
    double share;              /* 0.5 */
    double zipf;               /* 1.0 */
    uint32_t prefix_blocks;    /* 8 (mean) */
    double reuse;              /* 0.3 */
    uint32_t reuse_distance;   /* 50 (mean, requests) */
    uint32_t blocks;           /* 6 (mean new blocks per request) */
    uint32_t max_blocks;       /* 256 */
    double scan_rate;          /* 0.002 */
    uint32_t scan_len;         /* 50 */
    uint32_t scan_blocks;      /* 32 */
    uint32_t interval_ms;      /* 20 (mean) */
    uint32_t tokens_per_block; /* 512 */
} opt_synth_config_t;

void opt_synth_defaults(opt_synth_config_t *c);

/* Checks C's bounds: 0, or -1 with the flag-named reason in ERR. */
int opt_synth_check(const opt_synth_config_t *c, char *err, size_t errlen);

/* Writes the trace to OUT. *REFS (may be NULL) gets the block references written.
 * 0, or -1 with the reason in ERR (bad config, no memory, write error). */
int opt_synth_write(const opt_synth_config_t *c, FILE *out, uint64_t *refs, char *err,
                    size_t errlen);

#endif
