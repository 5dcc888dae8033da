/* bench_request.c — `kvt-bench request`: an engine request in two meta round trips
 * (issue 13 §2) against the five-call path, in one run on one in-process service
 * (bench_svc.h: a host tier actor and the scheduler over tcp loopback, one
 * libkvtier handle on the shared-memory path). Each request covers --hits cached
 * prefix blocks (a pool of prefixes stored first, so they stay hot) and --misses
 * fresh blocks:
 *   five-call: request_begin, lookup, prepare_get, submit_get, complete_get,
 *              prepare_put, submit_put, complete_put, request_end (no put without
 *              misses);
 *   two-call:  request_begin, prepare, submit_get + submit_put, complete, request_end.
 * Alternating slices of --seconds, --rounds each; prints requests/s, p50 / p99 of a
 * request, meta round trips per request (kvt_meta_round_trips) and the two-call
 * path's ratios to the five-call one. Every hit is checked byte for byte. Never used
 * by the service; returns 0, 1 if setup or a request fails, 2 on bad arguments. */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "bench_svc.h"

#define S_MAX_KEYS 1024u
#define S_PREFIXES 16u           /* prefixes stored first, a request takes one */
#define S_MAX_SAMPLES (1u << 20) /* request latencies kept per path */

struct s_args {
    uint32_t hits, misses, block, rounds;
    double seconds;
};

typedef struct {
    const char *name;
    bool two;
    uint64_t requests, trips, ns;
    uint64_t *lat; /* ns per request */
    uint32_t n_lat;
} s_path_t;

typedef struct {
    struct s_args a;
    kvt_client_t *c;
    kvt_key_t keys[S_MAX_KEYS];
    uint8_t *src[S_MAX_KEYS], *dst[S_MAX_KEYS];
    uint64_t nonce, next_id, seq;
} s_ctx_t;

static uint64_t s_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Bytes of block id (prefix p's block i: ids below 2^32; fresh ones above). */
static void s_fill(uint8_t *b, uint32_t len, uint64_t id)
{
    for (uint32_t i = 0; i + 8 <= len; i += 8) {
        uint64_t v = (id + i) * 0x9e3779b97f4a7c15ull;
        memcpy(b + i, &v, 8);
    }
}

static int s_fail(s_ctx_t *x, const char *what, int rc)
{
    fprintf(stderr, "request bench: %s: %s: %s\n", what, kvt_status_name(rc), kvt_last_error(x->c));
    return -1;
}

/* Runs one job on tok (put: from bufs, get: into x->dst) and waits for it. */
static int s_job(s_ctx_t *x, bool put, kvt_token_t *tok, uint8_t *const *bufs)
{
    if (kvt_token_count(tok) == 0)
        return 0;
    uint64_t job = ++x->seq;
    int rc = put ? kvt_submit_put(x->c, job, tok, (const void *const *)bufs, x->a.block)
                 : kvt_submit_get(x->c, job, tok, (void *const *)x->dst, x->a.block);
    kvt_job_result_t res;
    if (rc == 0)
        rc = kvt_wait(x->c, &job, 1, (int)BENCH_SVC_TIMEOUT_MS, &res);
    if (rc == 0 && (res.status < 0 || res.n_failed))
        rc = res.status < 0 ? res.status : -KVT_INTERNAL;
    return rc < 0 ? s_fail(x, put ? "put job" : "get job", rc) : 0;
}

/* The request's keys: prefix p's --hits blocks, then --misses fresh ones; the
 * misses' bytes into x->src[hits..]. */
static void s_keys(s_ctx_t *x, uint32_t p)
{
    for (uint32_t i = 0; i < x->a.hits; i++)
        bench_svc_key(x->nonce, (uint64_t)p << 16 | i, &x->keys[i]);
    for (uint32_t i = 0; i < x->a.misses; i++) {
        uint64_t id = (1ull << 40) + x->next_id++;
        bench_svc_key(x->nonce, id, &x->keys[x->a.hits + i]);
        s_fill(x->src[x->a.hits + i], x->a.block, id);
    }
}

static int s_check_hits(s_ctx_t *x, uint32_t p, uint32_t n)
{
    static uint8_t want[1u << 20];
    for (uint32_t i = 0; i < n; i++) {
        s_fill(want, x->a.block, (uint64_t)p << 16 | i);
        if (memcmp(want, x->dst[i], x->a.block) != 0) {
            fprintf(stderr, "request bench: hit %u of prefix %u read back wrong bytes\n", i, p);
            return -1;
        }
    }
    return 0;
}

static int s_five(s_ctx_t *x, const char *rid, uint32_t p)
{
    const char *I = BENCH_SVC_INSTANCE;
    uint32_t n = x->a.hits + x->a.misses;
    kvt_lookup_result_t lr = {0};
    int rc = kvt_lookup(x->c, I, rid, KVT_LOOKUP_PREFIX, 0, x->keys, n, &lr);
    if (rc < 0)
        return s_fail(x, "lookup", rc);
    if (lr.hit_count != x->a.hits) {
        fprintf(stderr, "request bench: %u hits, want %u\n", lr.hit_count, x->a.hits);
        return -1;
    }
    kvt_token_t *tok = NULL;
    if ((rc = kvt_prepare_get(x->c, I, rid, x->keys, lr.hit_count, &tok)) < 0)
        return s_fail(x, "prepare_get", rc);
    if (s_job(x, false, tok, NULL) < 0 || s_check_hits(x, p, lr.hit_count) < 0)
        return -1;
    if ((rc = kvt_complete_get(x->c, &tok, NULL)) < 0)
        return s_fail(x, "complete_get", rc);
    if (n == lr.hit_count)
        return 0; /* all cached: an engine stores nothing */
    const kvt_key_t *miss = &x->keys[lr.hit_count];
    if ((rc = kvt_prepare_put(x->c, I, rid, miss, n - lr.hit_count, &tok)) < 0)
        return s_fail(x, "prepare_put", rc);
    /* the token covers the misses in order (fresh keys: none is stored already) */
    if (s_job(x, true, tok, &x->src[lr.hit_count]) < 0)
        return -1;
    if ((rc = kvt_complete_put(x->c, &tok, NULL)) < 0)
        return s_fail(x, "complete_put", rc);
    return 0;
}

static int s_two(s_ctx_t *x, const char *rid, uint32_t p)
{
    uint32_t n = x->a.hits + x->a.misses;
    kvt_token_t *tok = NULL;
    kvt_prepare_info_t pi;
    int rc = kvt_prepare(x->c, BENCH_SVC_INSTANCE, rid, x->keys, n, NULL, &tok, &pi);
    if (rc < 0)
        return s_fail(x, "prepare", rc);
    if (pi.hit_count != x->a.hits) {
        fprintf(stderr, "request bench: %u hits, want %u\n", pi.hit_count, x->a.hits);
        return -1;
    }
    if (s_job(x, false, kvt_token_half(tok, KVT_HALF_GET), NULL) < 0 ||
        s_check_hits(x, p, pi.hit_count) < 0)
        return -1;
    if (s_job(x, true, kvt_token_half(tok, KVT_HALF_PUT), &x->src[pi.hit_count]) < 0)
        return -1;
    if ((rc = kvt_complete(x->c, &tok, NULL, NULL, NULL)) < 0)
        return s_fail(x, "complete", rc);
    return 0;
}

static int s_request(s_ctx_t *x, s_path_t *path)
{
    uint32_t p = (uint32_t)(x->seq % S_PREFIXES);
    char rid[48];
    snprintf(rid, sizeof rid, "bench-%" PRIu64, x->seq);
    s_keys(x, p);
    uint64_t t0 = s_now_ns(), trips = kvt_meta_round_trips(x->c);
    kvt_request_t req = {.instance_id = BENCH_SVC_INSTANCE, .request_id = rid};
    int rc = kvt_request_begin(x->c, &req);
    if (rc < 0)
        return s_fail(x, "request_begin", rc);
    if ((path->two ? s_two(x, rid, p) : s_five(x, rid, p)) < 0)
        return -1;
    if ((rc = kvt_request_end(x->c, BENCH_SVC_INSTANCE, rid, NULL)) < 0)
        return s_fail(x, "request_end", rc);
    uint64_t ns = s_now_ns() - t0;
    path->requests++;
    path->trips += kvt_meta_round_trips(x->c) - trips;
    path->ns += ns;
    if (path->n_lat < S_MAX_SAMPLES)
        path->lat[path->n_lat++] = ns;
    return 0;
}

/* Stores the S_PREFIXES prefixes. */
static int s_store_prefixes(s_ctx_t *x)
{
    kvt_request_t req = {.instance_id = BENCH_SVC_INSTANCE, .request_id = "bench-fill"};
    int rc = kvt_request_begin(x->c, &req);
    for (uint32_t p = 0; p < S_PREFIXES && rc == 0; p++) {
        for (uint32_t i = 0; i < x->a.hits; i++) {
            bench_svc_key(x->nonce, (uint64_t)p << 16 | i, &x->keys[i]);
            s_fill(x->src[i], x->a.block, (uint64_t)p << 16 | i);
        }
        kvt_token_t *tok = NULL;
        if ((rc = kvt_prepare_put(x->c, BENCH_SVC_INSTANCE, "bench-fill", x->keys, x->a.hits,
                                  &tok)) < 0)
            return s_fail(x, "fill prepare_put", rc);
        if (s_job(x, true, tok, x->src) < 0)
            return -1;
        if ((rc = kvt_complete_put(x->c, &tok, NULL)) < 0)
            return s_fail(x, "fill complete_put", rc);
    }
    if (rc == 0)
        rc = kvt_request_end(x->c, BENCH_SVC_INSTANCE, "bench-fill", NULL);
    return rc < 0 ? s_fail(x, "fill", rc) : 0;
}

static int s_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static double s_pct(s_path_t *p, double q)
{
    if (!p->n_lat)
        return 0;
    qsort(p->lat, p->n_lat, sizeof *p->lat, s_cmp_u64);
    return (double)p->lat[(size_t)ceil(q * p->n_lat) - 1] / 1e3;
}

static void s_usage(void)
{
    fprintf(stderr, "usage: kvt-bench request [--hits H] [--misses M] [--block BYTES] "
                    "[--seconds S] [--rounds R]\n"
                    "  an engine request (H cached prefix blocks, M fresh ones) on the five-call\n"
                    "  path vs two round trips (kvt_prepare / kvt_complete), one shm client;\n"
                    "  defaults: 16 hits, 16 misses, 4096-byte blocks, 2 s slices, 3 rounds\n");
}

static int s_parse(int argc, char **argv, struct s_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help"))
            return 1;
        if (!v)
            return -1;
        char *end = NULL;
        double d = strtod(v, &end);
        if (*end || d < 0)
            return -1;
        if (!strcmp(o, "--hits"))
            a->hits = (uint32_t)d;
        else if (!strcmp(o, "--misses"))
            a->misses = (uint32_t)d;
        else if (!strcmp(o, "--block"))
            a->block = (uint32_t)d;
        else if (!strcmp(o, "--seconds"))
            a->seconds = d;
        else if (!strcmp(o, "--rounds"))
            a->rounds = (uint32_t)d;
        else
            return -1;
        i++;
    }
    if (a->hits + a->misses == 0 || a->hits + a->misses > S_MAX_KEYS || a->hits == 0 ||
        a->block < 64 || a->block > (1u << 20) || a->rounds == 0 || a->seconds <= 0)
        return -1;
    return 0;
}

int bench_request(int argc, char **argv)
{
    s_ctx_t *x = calloc(1, sizeof *x);
    if (!x)
        return 1;
    x->a = (struct s_args){.hits = 16, .misses = 16, .block = 4096, .rounds = 3, .seconds = 2.0};
    int parsed = s_parse(argc, argv, &x->a);
    if (parsed != 0) {
        s_usage();
        free(x);
        return parsed > 0 ? 0 : 2;
    }
    s_path_t paths[2] = {{.name = "five-call (lookup, get, put)", .two = false},
                         {.name = "two-call (prepare, complete)", .two = true}};
    int rc = 1;
    uint32_t n = x->a.hits + x->a.misses;
    /* a 256 MiB tier: the prefixes and some seconds of misses; the coldest go first */
    uint64_t cap = (256u << 20) / x->a.block;
    cap = cap < 4u * S_PREFIXES * n ? 4u * S_PREFIXES * n : cap;
    bench_svc_t *svc = bench_svc_start("request", x->a.block, cap);
    for (uint32_t i = 0; i < n; i++) {
        x->src[i] = malloc(x->a.block);
        x->dst[i] = malloc(x->a.block);
        if (!x->src[i] || !x->dst[i])
            goto out;
    }
    for (int k = 0; k < 2; k++)
        if (!(paths[k].lat = malloc(S_MAX_SAMPLES * sizeof *paths[k].lat)))
            goto out;
    if (!svc || !(x->c = bench_svc_connect(svc, false, "bench-request")))
        goto out;
    x->nonce = s_now_ns();
    if (s_store_prefixes(x) < 0)
        goto out;
    for (uint32_t r = 0; r < x->a.rounds; r++)
        for (int k = 0; k < 2; k++) {
            s_path_t *p = &paths[(r + (uint32_t)k) % 2]; /* alternate which goes first */
            uint64_t end = s_now_ns() + (uint64_t)(x->a.seconds * 1e9);
            while (s_now_ns() < end)
                if (s_request(x, p) < 0)
                    goto out;
        }
    printf("request: %u hits + %u misses of %u bytes, one shm client, %u rounds of %.1f s "
           "slices\n",
           x->a.hits, x->a.misses, x->a.block, x->a.rounds, x->a.seconds);
    double rate[2];
    for (int k = 0; k < 2; k++) {
        s_path_t *p = &paths[k];
        rate[k] = p->ns ? (double)p->requests * 1e9 / (double)p->ns : 0;
        printf("  %-30s %8.0f requests/s  p50 %7.1f us  p99 %7.1f us  %.2f meta round trips "
               "per request\n",
               p->name, rate[k], s_pct(p, 0.50), s_pct(p, 0.99),
               p->requests ? (double)p->trips / (double)p->requests : 0);
    }
    printf("  two-call / five-call: %.2fx requests/s\n", rate[0] > 0 ? rate[1] / rate[0] : 0);
    rc = 0;
out:
    kvt_close(&x->c);
    bench_svc_stop(&svc);
    for (uint32_t i = 0; i < n; i++) {
        free(x->src[i]);
        free(x->dst[i]);
    }
    free(paths[0].lat);
    free(paths[1].lat);
    free(x);
    return rc;
}
