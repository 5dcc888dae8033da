/* opt_ttft.h — a time-to-first-token model in the spirit of the Tair KVCache
 * manager's HiSim: per request, the prefill of the prompt's tokens that did not hit,
 * plus the time to load the hit blocks from the tier each came from.
 *
 *   prefill(n tokens)  = n x flops_per_token / gpu_flops  (flops_per_token = 2 x params:
 *                        one multiply-add per parameter per token; attention's
 *                        quadratic term is left out, so long prompts are underestimated)
 *   without the cache  = prefill(tokens)
 *   with the cache     = prefill(max(tokens - hit_tokens, 1)) + sum over tiers of
 *                        hit_blocks[tier] x block_bytes / bandwidth[tier]
 *   hit_tokens         = min(hit blocks x tokens_per_block, tokens); at least one token
 *                        is always computed (it yields the first output token)
 * Load and compute do not overlap (a layer-wise pipelined engine would hide part of
 * the load). No queueing: each request runs alone, so these are service times.
 *
 * Owns nothing; a run allocates two doubles per request and frees them. */
#ifndef KVT_OPT_TTFT_H
#define KVT_OPT_TTFT_H

#include <stdint.h>

#include "opt_trace.h"

/* Defaults (docs/OPTIMIZER.md says where they come from). */
#define OPT_TTFT_DEFAULT_PARAMS 8e9       /* an 8B model (Llama-3-8B) */
#define OPT_TTFT_DEFAULT_GPU_FLOPS 400e12 /* ~40% of an H100's 989 TFLOP/s BF16 dense */
#define OPT_TTFT_DEFAULT_KV_PER_TOKEN                                                              \
    131072                              /* Llama-3-8B fp16: 32 layers x 8 heads x 128 x 2 x 2 */
#define OPT_TTFT_DEFAULT_HOST_BW 5.97e9 /* kvt-bench data: shm get, 256 KiB blocks */
#define OPT_TTFT_DEFAULT_NVME_BW 2.34e9 /* kvt-bench nvme: raw O_DIRECT read */

typedef struct {
    double params;          /* model parameters */
    double gpu_flops;       /* effective prefill FLOP/s */
    double flops_per_token; /* 0: 2 x params */
    double block_bytes;     /* KV bytes of one block; 0: kv_per_token x tokens_per_block */
    double bw[2];           /* bytes per second from level 1 (host), level 2 (nvme) */
} opt_ttft_model_t;

void opt_ttft_defaults(opt_ttft_model_t *m);

typedef struct {
    double mean, p50, p99; /* seconds */
} opt_ttft_stats_t;

typedef struct {
    opt_ttft_stats_t without, with;
    double load_s;    /* total time loading hits */
    double prefill_s; /* total prefill time with the cache */
} opt_ttft_result_t;

/* The model over T with per-request hits HITS2 ([2r] level 1, [2r+1] level 2).
 * 0, or -1 when out of memory. */
int opt_ttft_run(const opt_trace_t *t, const opt_ttft_model_t *m, const uint32_t *hits2,
                 opt_ttft_result_t *out);

/* Seconds to prefill N tokens / to load one block from LEVEL, under M and T's block size. */
double opt_ttft_prefill_s(const opt_ttft_model_t *m, double tokens);
double opt_ttft_block_bytes(const opt_ttft_model_t *m, const opt_trace_t *t);

#endif
