/* opt_replay.h — the trace replayed through the real slot engine (tiers/tier_slots.h)
 * with one of its registered policies, at a chosen capacity; and through a chain of
 * two engines (host -> nvme) following the service's rules.
 *
 * One tier: the trace's semantics (opt_lru.h): hits are the leading blocks the
 * engine serves (tier_slots_lookup) before the request; then each block in order is
 * touched (tier_slots_touch) when present, else reserved alone (the policy picks the
 * victim) and committed. With "lru" this equals opt_lru's curve (tested).
 *
 * Chain (docs/SCHEDULER.md "Chains", actors/sched_demote.c): a lookup walks the
 * request's blocks while each is on level 1 or, failing that, level 2, and touches
 * each hit on the tier it was found on; a hit found only on level 2 is promoted
 * (moved into level 1 on an exclusive chain: its level-2 copy is removed first;
 * copied on an inclusive one: its level-2 copy stays); the blocks from the first miss on
 * that are on neither tier are put into level 1 (those already on a tier are
 * skipped, as prepare_put does). Level 1 never drops a live block: its policy's
 * victim is demoted into level 2 (reserved there with SKIP_SERVING: a block already
 * on level 2 is only released from level 1), and level 2, the last tier, evicts by
 * its own policy, when it needs the slot (as the service's last tier: reclaimed on
 * demand). The service's head demotes ahead of need in batches (a sixteenth of the
 * tier) and keeps watermarks; the model demotes exactly the victim, when room is
 * needed, so it is an upper reference for the service's chain, not a copy of it.
 *
 * Engines are created per run with a fixed hash seed (runs are reproducible) and
 * capacity min(capacity, distinct blocks) (the same figures: a cache that holds
 * every block never evicts). Memory: the engine's, about 100 bytes per slot. */
#ifndef KVT_OPT_REPLAY_H
#define KVT_OPT_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "opt_trace.h"

/* Block hits of policy POLICY (a registered name) at CAPACITY; REQ_HITS (NULL or
 * one per request) gets each request's hits. -1: unknown policy or no memory. */
int64_t opt_replay_policy(const opt_trace_t *t, const char *policy, uint64_t capacity,
                          uint32_t *req_hits);

typedef struct {
    uint64_t capacity[2];  /* level 1 (host), level 2 (nvme) */
    const char *policy[2]; /* NULL: "lru" */
    bool inclusive;        /* a promoted block keeps its level-2 copy (false: exclusive,
                              the service's default: it moves, the level-2 copy goes) */
} opt_chain_config_t;

typedef struct {
    uint64_t hits[2];  /* block hits served from each level */
    uint64_t promoted; /* level-2 hits copied into level 1 */
    uint64_t demoted;  /* level-1 victims written to level 2 */
    uint64_t dropped;  /* level-2 victims (gone from the chain) */
} opt_chain_result_t;

/* Replays the chain; REQ_HITS (NULL or 2 x requests: [2r] level 1, [2r+1] level 2)
 * gets each request's hits per level. 0, or -1 (bad policy, no memory). */
int opt_replay_chain(const opt_trace_t *t, const opt_chain_config_t *cfg, opt_chain_result_t *res,
                     uint32_t *req_hits);

#endif
