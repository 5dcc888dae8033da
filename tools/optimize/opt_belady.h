/* opt_belady.h — the "Belady reference" (an OPT heuristic, NOT a bound) under the
 * trace's prefix-hit semantics, at a chosen capacity. docs/OPTIMIZER.md defines it
 * and shows a trace on which another schedule beats it.
 *
 * Definition. Requests are served as for LRU (opt_lru.h): the hits of a request
 * are its leading blocks present before the request; then its blocks are accessed
 * in order. A block's next use is the position (global reference index) of its next
 * reference after the current one; a block never referenced again has next use
 * "never", ordered after every position and, among themselves, by larger dense id
 * first. At an access of block b:
 *   - b cached: its next use is updated (nothing moves);
 *   - b absent and the cache not full: b is inserted;
 *   - b absent and full (bypass allowed): if b's next use is later than that of
 *     every cached block, b is not inserted; otherwise the cached block with the
 *     latest next use is evicted and b inserted.
 *
 * Owns: the next-use table (4 bytes per reference). A run takes 1 byte and 8 per
 * distinct block and a heap of at most 2 x capacity + 1024 entries (16 bytes),
 * O(references x log capacity). */
#ifndef KVT_OPT_BELADY_H
#define KVT_OPT_BELADY_H

#include <stdint.h>

#include "opt_trace.h"

typedef struct opt_belady opt_belady_t;

/* Precomputes next uses for T (kept by reference: T must outlive it); NULL: no memory. */
opt_belady_t *opt_belady_new(const opt_trace_t *t);
void opt_belady_destroy(opt_belady_t **b);

/* Block hits at CAPACITY (>= 1); REQ_HITS (NULL or one per request) gets each
 * request's hits. -1 when out of memory. */
int64_t opt_belady_run(const opt_belady_t *b, uint64_t capacity, uint32_t *req_hits);

#endif
