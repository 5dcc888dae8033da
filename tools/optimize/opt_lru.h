/* opt_lru.h — the exact prefix-hit LRU hit count at every capacity, in one pass
 * (Mattson's stack distances, counted with a Fenwick tree over reference times,
 * as the Tair KVCache manager's LiteHit does).
 *
 * Semantics (traces/README.md, tools/trace/lru_prefix.py): a request hits its
 * leading blocks up to the first miss, judged against the cache as it was before
 * the request; then all its blocks are accessed in order (inserted or touched).
 * Block i of a request hits at capacity C iff the largest stack distance among
 * blocks 0..i, all taken before the request, is <= C (LRU's inclusion property:
 * the cache of capacity C holds exactly the C most recently used blocks). A block
 * repeated in one request gets the same pre-request distance, as in the reference.
 *
 * Owns: the cumulative hit counts (8 bytes per distinct block). The pass itself
 * takes 4 bytes per reference and 4 per distinct block, freed before returning.
 * O(references x log references) time. */
#ifndef KVT_OPT_LRU_H
#define KVT_OPT_LRU_H

#include <stdint.h>

#include "opt_trace.h"

typedef struct opt_curve opt_curve_t;

/* Computes the curve of T; NULL when out of memory. */
opt_curve_t *opt_curve_new(const opt_trace_t *t);
void opt_curve_destroy(opt_curve_t **c);

/* Block hits at CAPACITY blocks (any value; beyond the distinct count it is the
 * unbounded figure). */
uint64_t opt_curve_hits(const opt_curve_t *c, uint64_t capacity);
/* The capacity from which the curve is flat (the distinct blocks). */
uint32_t opt_curve_max_capacity(const opt_curve_t *c);
/* The smallest capacity with hits(capacity) >= HITS (0 for 0 hits); 0 when never. */
uint32_t opt_curve_capacity_for(const opt_curve_t *c, uint64_t hits);

/* Each request's hits at CAPACITY (REQ_HITS: one per request), by the same pass
 * (no cache is simulated: 4 bytes per reference and 12 per distinct block, freed).
 * 0, or -1 when out of memory. */
int opt_lru_request_hits(const opt_trace_t *t, uint64_t capacity, uint32_t *req_hits);

#endif
