/* opt_lru.c — stack distances with a Fenwick tree: position p (1-based reference
 * time) holds 1 while it is the last access of some block, so the distance of a
 * block last accessed at time p is the number of marks in [p, now]. */
#include "opt_lru.h"

#include <stdlib.h>

struct opt_curve {
    uint32_t distinct;
    uint64_t *cum; /* cum[c]: hits at capacity c, c = 0..distinct */
};

static void s_fen_add(int32_t *fen, uint64_t n, uint64_t i, int32_t v)
{
    for (; i <= n; i += i & (~i + 1))
        fen[i] += v;
}

static uint32_t s_fen_prefix(const int32_t *fen, uint64_t i)
{
    int64_t s = 0;
    for (; i > 0; i -= i & (~i + 1))
        s += fen[i];
    return (uint32_t)s;
}

/* Adds request R's distances to HIST (index distinct + 1: never seen), against the
 * stack before R; HIST[d] counts blocks whose prefix maximum distance is d. Returns
 * the request's hits at capacity CAP. */
static uint32_t s_request_distances(const uint32_t *blocks, uint32_t n, const int32_t *fen,
                                    const uint32_t *last, uint32_t marked, uint32_t inf,
                                    uint64_t *hist, uint64_t cap)
{
    uint32_t pm = 0, hits = 0;
    for (uint32_t j = 0; j < n; j++) {
        uint32_t p = last[blocks[j]];
        uint32_t d = p ? marked - s_fen_prefix(fen, p - 1) : inf;
        if (d > pm)
            pm = d;
        if (pm == inf) { /* a block never seen: the rest of the request misses everywhere */
            hist[inf] += n - j;
            return hits;
        }
        hist[pm]++;
        hits += pm <= cap;
    }
    return hits;
}

/* The one pass: fills HIST (distinct + 2 entries) and, when REQ_HITS is not NULL,
 * each request's hits at CAP. 0, or -1 when out of memory. */
static int s_pass(const opt_trace_t *t, uint64_t *hist, uint64_t cap, uint32_t *req_hits)
{
    uint64_t refs = opt_trace_refs(t);
    uint32_t distinct = opt_trace_distinct(t);
    int32_t *fen = calloc(refs + 1, sizeof *fen);
    uint32_t *last = calloc((size_t)distinct + 1, sizeof *last); /* 0: never accessed */
    if (!fen || !last) {
        free(fen);
        free(last);
        return -1;
    }
    uint32_t inf = distinct + 1, marked = 0, now = 0;
    for (size_t r = 0; r < opt_trace_requests(t); r++) {
        uint32_t n;
        const uint32_t *blocks = opt_trace_blocks(t, r, &n);
        uint32_t h = s_request_distances(blocks, n, fen, last, marked, inf, hist, cap);
        if (req_hits)
            req_hits[r] = h;
        for (uint32_t j = 0; j < n; j++) {
            uint32_t b = blocks[j];
            if (last[b])
                s_fen_add(fen, refs, last[b], -1);
            else
                marked++;
            last[b] = ++now;
            s_fen_add(fen, refs, now, 1);
        }
    }
    free(fen);
    free(last);
    return 0;
}

opt_curve_t *opt_curve_new(const opt_trace_t *t)
{
    uint32_t distinct = opt_trace_distinct(t);
    opt_curve_t *c = calloc(1, sizeof *c);
    uint64_t *hist = calloc((size_t)distinct + 2, sizeof *hist);
    if (!c || !hist || s_pass(t, hist, 0, NULL) < 0) {
        free(hist);
        free(c);
        return NULL;
    }
    c->distinct = distinct;
    /* hist[0] stays 0: a distance is at least 1 */
    for (uint32_t d = 1; d <= distinct; d++)
        hist[d] += hist[d - 1];
    c->cum = hist;
    return c;
}

int opt_lru_request_hits(const opt_trace_t *t, uint64_t capacity, uint32_t *req_hits)
{
    uint64_t *hist = calloc((size_t)opt_trace_distinct(t) + 2, sizeof *hist);
    int rc = hist ? s_pass(t, hist, capacity, req_hits) : -1;
    free(hist);
    return rc;
}

void opt_curve_destroy(opt_curve_t **c)
{
    if (!c || !*c)
        return;
    free((*c)->cum);
    free(*c);
    *c = NULL;
}

uint64_t opt_curve_hits(const opt_curve_t *c, uint64_t capacity)
{
    return c->cum[capacity < c->distinct ? capacity : c->distinct];
}

uint32_t opt_curve_max_capacity(const opt_curve_t *c)
{
    return c->distinct;
}

uint32_t opt_curve_capacity_for(const opt_curve_t *c, uint64_t hits)
{
    if (hits > c->cum[c->distinct])
        return 0;
    uint32_t lo = 0, hi = c->distinct;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (c->cum[mid] >= hits)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}
