/* opt_ttft.c — the TTFT model: per-request times, then mean and nearest-rank
 * percentiles. */
#include "opt_ttft.h"

#include <math.h>
#include <stdlib.h>

void opt_ttft_defaults(opt_ttft_model_t *m)
{
    *m = (opt_ttft_model_t){
        .params = OPT_TTFT_DEFAULT_PARAMS,
        .gpu_flops = OPT_TTFT_DEFAULT_GPU_FLOPS,
        .bw = {OPT_TTFT_DEFAULT_HOST_BW, OPT_TTFT_DEFAULT_NVME_BW},
    };
}

double opt_ttft_prefill_s(const opt_ttft_model_t *m, double tokens)
{
    double fpt = m->flops_per_token > 0 ? m->flops_per_token : 2.0 * m->params;
    return tokens * fpt / m->gpu_flops;
}

double opt_ttft_block_bytes(const opt_ttft_model_t *m, const opt_trace_t *t)
{
    return m->block_bytes > 0
               ? m->block_bytes
               : (double)OPT_TTFT_DEFAULT_KV_PER_TOKEN * opt_trace_tokens_per_block(t);
}

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void s_stats(double *v, size_t n, opt_ttft_stats_t *st)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    qsort(v, n, sizeof *v, s_cmp);
    st->mean = n ? sum / (double)n : 0;
    st->p50 = n ? v[(size_t)ceil(0.50 * (double)n) - 1] : 0;
    st->p99 = n ? v[(size_t)ceil(0.99 * (double)n) - 1] : 0;
}

int opt_ttft_run(const opt_trace_t *t, const opt_ttft_model_t *m, const uint32_t *hits2,
                 opt_ttft_result_t *out)
{
    size_t n = opt_trace_requests(t);
    double *without = malloc((n ? n : 1) * sizeof *without);
    double *with = malloc((n ? n : 1) * sizeof *with);
    if (!without || !with) {
        free(without);
        free(with);
        return -1;
    }
    double bb = opt_ttft_block_bytes(m, t), tpb = opt_trace_tokens_per_block(t);
    out->load_s = out->prefill_s = 0;
    for (size_t r = 0; r < n; r++) {
        double tokens = (double)opt_trace_tokens(t, r);
        double h1 = hits2[2 * r], h2 = hits2[2 * r + 1];
        double hit_tokens = fmin((h1 + h2) * tpb, tokens);
        double rest = tokens > 0 ? fmax(tokens - hit_tokens, 1.0) : 0.0;
        double load = h1 * bb / m->bw[0] + h2 * bb / m->bw[1];
        double pre = opt_ttft_prefill_s(m, rest);
        without[r] = opt_ttft_prefill_s(m, tokens);
        with[r] = pre + load;
        out->load_s += load;
        out->prefill_s += pre;
    }
    s_stats(without, n, &out->without);
    s_stats(with, n, &out->with);
    free(without);
    free(with);
    return 0;
}
