/* opt_synth.c — the trace generator: a xoshiro256** stream, a Zipf table over the
 * shared prefixes, and a ring of recent requests to continue. */
#include "opt_synth.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t s[4];
} s_rng_t;

static uint64_t s_splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t s_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* xoshiro256** (Blackman, Vigna 2018). */
static uint64_t s_next(s_rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t res = s_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = s_rotl(s[3], 45);
    return res;
}

static double s_unit(s_rng_t *r) /* [0, 1) */
{
    return (double)(s_next(r) >> 11) * 0x1.0p-53;
}

/* Geometric on 0, 1, 2, ... with mean M. */
static uint64_t s_geom(s_rng_t *r, double m)
{
    if (m <= 0)
        return 0;
    double q = 1.0 / (m + 1.0);
    return (uint64_t)floor(log(1.0 - s_unit(r)) / log(1.0 - q));
}

void opt_synth_defaults(opt_synth_config_t *c)
{
    *c = (opt_synth_config_t){
        .seed = 1,
        .requests = 10000,
        .prefixes = 100,
        .share = 0.5,
        .zipf = 1.0,
        .prefix_blocks = 8,
        .reuse = 0.3,
        .reuse_distance = 50,
        .blocks = 6,
        .max_blocks = 256,
        .scan_rate = 0.002,
        .scan_len = 50,
        .scan_blocks = 32,
        .interval_ms = 20,
        .tokens_per_block = 512,
    };
}

int opt_synth_check(const opt_synth_config_t *c, char *err, size_t errlen)
{
    const char *bad = NULL;
    if (c->requests < 1 || c->requests > OPT_SYNTH_MAX_REQUESTS)
        bad = "--requests: 1 .. 100000000";
    else if (c->prefixes > OPT_SYNTH_MAX_PREFIXES)
        bad = "--prefixes: 0 .. 1000000";
    else if (!(c->share >= 0 && c->share <= 1) || !(c->reuse >= 0 && c->reuse <= 1) ||
             !(c->scan_rate >= 0 && c->scan_rate <= 1))
        bad = "--share, --reuse and --scan-rate are probabilities (0 .. 1)";
    else if (!(c->zipf >= 0 && c->zipf <= 10))
        bad = "--zipf: 0 .. 10";
    else if (c->max_blocks < 1 || c->max_blocks > OPT_SYNTH_MAX_BLOCKS)
        bad = "--max-blocks: 1 .. 4096";
    else if (c->blocks < 1 || c->prefix_blocks < 1 || c->reuse_distance < 1 || c->blocks > 100000 ||
             c->prefix_blocks > 100000 || c->reuse_distance > 100000)
        bad = "--blocks, --prefix-blocks, --reuse-distance: 1 .. 100000";
    else if (c->scan_len > 100000 || c->scan_blocks > OPT_SYNTH_MAX_BLOCKS)
        bad = "--scan-len: 0 .. 100000, --scan-blocks: 0 .. 4096";
    else if (c->tokens_per_block < 1 || c->tokens_per_block > 1000000 || c->interval_ms > 3600000)
        bad = "--tokens-per-block: 1 .. 1000000, --interval: 0 .. 3600000 ms";
    if (bad) {
        snprintf(err, errlen, "%s", bad);
        return -1;
    }
    return 0;
}

typedef struct {
    const opt_synth_config_t *c;
    s_rng_t rng;
    double *zipf_cdf;
    uint64_t *prefix_first; /* prefix p: ids prefix_first[p] .. prefix_first[p + 1] - 1 */
    uint64_t next_id;
    uint64_t *hist[OPT_SYNTH_HISTORY];
    uint32_t hist_n[OPT_SYNTH_HISTORY];
    uint64_t hist_count;
    uint64_t *ids;
    uint32_t n;
    uint32_t scan_left;
} s_gen_t;

static int s_gen_init(s_gen_t *g, const opt_synth_config_t *c)
{
    memset(g, 0, sizeof *g);
    g->c = c;
    uint64_t x = c->seed;
    for (int i = 0; i < 4; i++)
        g->rng.s[i] = s_splitmix(&x);
    g->ids = malloc(c->max_blocks * sizeof *g->ids);
    g->zipf_cdf = malloc(((size_t)c->prefixes + 1) * sizeof *g->zipf_cdf);
    g->prefix_first = malloc(((size_t)c->prefixes + 1) * sizeof *g->prefix_first);
    if (!g->ids || !g->zipf_cdf || !g->prefix_first)
        return -1;
    double sum = 0;
    for (uint32_t p = 0; p < c->prefixes; p++) {
        sum += 1.0 / pow((double)p + 1.0, c->zipf);
        g->zipf_cdf[p] = sum;
        g->prefix_first[p] = g->next_id;
        g->next_id += 1 + s_geom(&g->rng, (double)c->prefix_blocks - 1.0);
    }
    g->prefix_first[c->prefixes] = g->next_id;
    for (uint32_t p = 0; p < c->prefixes; p++)
        g->zipf_cdf[p] /= sum;
    return 0;
}

static void s_gen_fini(s_gen_t *g)
{
    for (uint32_t i = 0; i < OPT_SYNTH_HISTORY; i++)
        free(g->hist[i]);
    free(g->ids);
    free(g->zipf_cdf);
    free(g->prefix_first);
}

static void s_append_fresh(s_gen_t *g, uint64_t k)
{
    for (uint64_t i = 0; i < k && g->n < g->c->max_blocks; i++)
        g->ids[g->n++] = g->next_id++;
}

static void s_append_prefix(s_gen_t *g)
{
    double u = s_unit(&g->rng);
    uint32_t lo = 0, hi = g->c->prefixes - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (g->zipf_cdf[mid] > u)
            hi = mid;
        else
            lo = mid + 1;
    }
    for (uint64_t id = g->prefix_first[lo]; id < g->prefix_first[lo + 1] && g->n < g->c->max_blocks;
         id++)
        g->ids[g->n++] = id;
}

/* Fills g->ids with the next request; true when it may be continued later. */
static bool s_request(s_gen_t *g)
{
    const opt_synth_config_t *c = g->c;
    g->n = 0;
    if (g->scan_left == 0 && c->scan_len > 0 && s_unit(&g->rng) < c->scan_rate)
        g->scan_left = c->scan_len;
    if (g->scan_left > 0) {
        g->scan_left--;
        s_append_fresh(g, c->scan_blocks ? c->scan_blocks : 1);
        return false;
    }
    if (g->hist_count > 0 && s_unit(&g->rng) < c->reuse) {
        uint64_t avail = g->hist_count < OPT_SYNTH_HISTORY ? g->hist_count : OPT_SYNTH_HISTORY;
        uint64_t d = 1 + s_geom(&g->rng, (double)c->reuse_distance - 1.0);
        if (d > avail)
            d = avail;
        uint64_t slot = (g->hist_count - d) % OPT_SYNTH_HISTORY;
        memcpy(g->ids, g->hist[slot], g->hist_n[slot] * sizeof *g->ids);
        g->n = g->hist_n[slot];
    } else if (c->prefixes > 0 && s_unit(&g->rng) < c->share) {
        s_append_prefix(g);
    }
    s_append_fresh(g, 1 + s_geom(&g->rng, (double)c->blocks - 1.0));
    return true;
}

static int s_remember(s_gen_t *g)
{
    uint64_t slot = g->hist_count % OPT_SYNTH_HISTORY;
    if (!g->hist[slot] && !(g->hist[slot] = malloc(g->c->max_blocks * sizeof(uint64_t))))
        return -1;
    memcpy(g->hist[slot], g->ids, g->n * sizeof *g->ids);
    g->hist_n[slot] = g->n;
    g->hist_count++;
    return 0;
}

int opt_synth_write(const opt_synth_config_t *c, FILE *out, uint64_t *refs, char *err,
                    size_t errlen)
{
    if (opt_synth_check(c, err, errlen) < 0)
        return -1;
    s_gen_t *g = malloc(sizeof *g);
    int rc = -1;
    if (!g || s_gen_init(g, c) < 0) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    uint64_t ts = 0, total = 0;
    for (uint64_t r = 0; r < c->requests; r++) {
        if (s_request(g) && s_remember(g) < 0) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        uint64_t tokens =
            (uint64_t)g->n * c->tokens_per_block - s_next(&g->rng) % c->tokens_per_block;
        unsigned output = 1 + (unsigned)(s_next(&g->rng) % 512);
        fprintf(out,
                "{\"timestamp\": %llu, \"input_length\": %llu, \"output_length\": %u, "
                "\"hash_ids\": [",
                (unsigned long long)ts, (unsigned long long)tokens, output);
        for (uint32_t i = 0; i < g->n; i++)
            fprintf(out, i ? ", %llu" : "%llu", (unsigned long long)g->ids[i]);
        fputs("]}\n", out);
        total += g->n;
        ts += s_geom(&g->rng, (double)c->interval_ms);
    }
    if (fflush(out) != 0 || ferror(out)) {
        snprintf(err, errlen, "write error");
        goto out;
    }
    if (refs)
        *refs = total;
    rc = 0;
out:
    if (g)
        s_gen_fini(g);
    free(g);
    return rc;
}
