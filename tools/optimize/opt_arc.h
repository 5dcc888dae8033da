/* opt_arc.h — ARC (Megiddo and Modha, "ARC: A Self-Tuning, Low Overhead Replacement
 * Cache", FAST 2003, figure 4) replayed offline at a chosen capacity under the
 * trace's prefix-hit semantics (hits: the leading blocks in T1 or T2 before the
 * request; then every block of the request is one ARC access, in order). The
 * adaptation target p is real-valued, as in the paper. A policy to compare the
 * slot engine's with; not a slot-engine policy itself.
 *
 * Owns nothing between calls: a run takes 9 bytes per distinct block, O(1) per
 * reference. */
#ifndef KVT_OPT_ARC_H
#define KVT_OPT_ARC_H

#include <stdint.h>

#include "opt_trace.h"

/* Block hits at CAPACITY (>= 1); REQ_HITS (NULL or one per request) gets each
 * request's hits. -1 when out of memory. */
int64_t opt_arc_run(const opt_trace_t *t, uint64_t capacity, uint32_t *req_hits);

#endif
