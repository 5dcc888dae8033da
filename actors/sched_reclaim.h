/* sched_reclaim.h — reclaim, demotion and quotas: the internal plane (GcScan / GcDrop /
 * ReclaimCandidates / DemoteDone), DELETING blocks, room making, QuotaEnforce, demotion jobs.
 * Owns sched_reclaim_t (sched_t.reclaim). Private to actors/sched_*.c; builds on the index
 * (sched_index.h) and the tier set below it. */
#ifndef KVT_SCHED_RECLAIM_H
#define KVT_SCHED_RECLAIM_H

#include "sched_index.h"

#define SCHED_DEMOTE_JOBS 16u              /* migrator jobs in flight (demotion) */
#define SCHED_DEMOTE_JOB_BYTES (16u << 20) /* slot bytes per demotion job, at most */

/* A demotion job at the migrator: sources pinned, destinations reserved. */
typedef struct {
    bool used;
    uint64_t job_id;
    uint32_t src, dst; /* tier indices */
    uint16_t src_gen, dst_gen;
    uint32_t number; /* instance (one per job) */
    uint32_t n;
    int64_t submitted_ms; /* a slow job is logged */
    uint32_t src_slots[MIGRATOR_MAX_JOB_SLOTS];
    uint32_t dst_slots[MIGRATOR_MAX_JOB_SLOTS];
    tier_key_t keys[MIGRATOR_MAX_JOB_SLOTS];
} sched_demote_t;

/* Reclaim's state (sched_t.reclaim): gc's cursor, quota enforcement, and the
 * migrator with the demotions in flight. */
#define SCHED_GC_SUSPECTS 64u /* locations a failed load named, probed first */

typedef struct {
    uint64_t gc_cursor;
    /* locations whose load failed (CompleteGet): the next GcScan hands them to the
     * gc before its scan, so a block its tier dropped (damaged bytes) leaves the
     * index within one gc round instead of whenever the scan reaches it */
    struct {
        uint32_t tier; /* index */
        uint32_t slot;
        uint16_t gen;
    } suspects[SCHED_GC_SUSPECTS];
    uint32_t n_suspects;
    uint64_t gc_seen_resv, gc_seen_pins; /* lapsed counters reported by the last GcScan */
    /* quotas (sched_quota.c): slot-header number -> 1 + instance index, rebuilt
     * per enforcement (open addressing, quota_mask + 1 buckets) */
    uint32_t *quota_map;
    uint32_t quota_mask;
    uint32_t quota_cursor;   /* first instance examined by the next enforcement */
    uint32_t n_trims;        /* instances with an operator's trim in progress */
    int64_t trim_counted_ms; /* when an AdminTrim last counted the locations (0: never) */
    /* the migrator when this scheduler started it (NULL: it runs beside,
     * cfg.migrator_endpoint), the client to its jobs ROUTER (results come back as
     * DemoteDone on the internal plane), demotions in flight */
    zactor_t *migrator;
    bus_client_t *mig_client;
    uint64_t next_job_id;
    sched_demote_t demotes[SCHED_DEMOTE_JOBS];
    /* sched_demote's own scratch: a demotion started in the middle of a request
     * (sched_make_room) never touches the request's keys / pos / resv / victims */
    struct {
        tier_key_t keys[MIGRATOR_MAX_JOB_SLOTS];
        uint32_t pos[MIGRATOR_MAX_JOB_SLOTS];
        tier_resv_t resv[MIGRATOR_MAX_JOB_SLOTS];
        tier_victim_t victims[MIGRATOR_MAX_JOB_SLOTS];
    } dm;
} sched_reclaim_t;

/* ---- sched_internal.c ---- */
void sched_on_internal(sched_t *self, sched_call_t *call); /* one internal-plane request */
/* Before reserving keys[0..n) on t: finishes the deletion of those marked
 * DELETING and unheld, so a put stores them again instead of skipping them. */
void sched_deleting_settle(sched_t *self, sched_tier_t *t, uint32_t number, const tier_key_t *keys,
                           uint32_t n);
/* Frees DELETING blocks whose delay passed and that no reader holds. */
void sched_deleting_tick(sched_t *self, int64_t now);
uint32_t sched_deleting_count(const sched_t *self);
/* A reclaim candidate: its rank (sched_reclaim_rank) and slot. */
typedef struct {
    uint64_t rank;
    uint32_t slot;
} sched_cand_t;

/* Keeps best[0..*n) the max lowest ranks, lowest first: inserts (rank, slot)
 * unless the list is full of lower ranks (the warmest drops out when full). */
static inline void sched_cand_insert(sched_cand_t *best, uint32_t *n, uint32_t max, uint64_t rank,
                                     uint32_t slot)
{
    if (max == 0 || (*n == max && rank >= best[*n - 1].rank))
        return;
    uint32_t j = *n < max ? (*n)++ : *n - 1;
    while (j > 0 && best[j - 1].rank > rank) {
        best[j] = best[j - 1];
        j--;
    }
    best[j] = (sched_cand_t){.rank = rank, .slot = slot};
}

/* Reclaim order (ReclaimCandidates, QuotaEnforce, room): a committed block nobody
 * holds (no pin, no rewriter) and not DELETING ranks 0 when expired, else 1 + its
 * place in the tier policy's order (tier_slots_walk_coldest: lower = colder).
 * false: not a candidate. */
static inline bool sched_reclaim_rank(const sched_tier_t *t, const tier_slot_info_t *info,
                                      uint32_t slot, int64_t now, uint64_t order, uint64_t *rank)
{
    if (info->state != TIER_SLOT_COMMITTED || info->pins || info->refs ||
        (t->del_mark[slot] && sched_is_deleting(t, info->instance, &info->key, slot)))
        return false;
    bool expired = info->expired || (info->deadline_ms && info->deadline_ms <= (uint64_t)now);
    *rank = expired ? 0 : order + 1;
    return true;
}
/* A BlockRef naming (number, key) at slot of t (the instance id, or "#xxxxxxxx"). */
void sched_block_ref(sched_t *self, const sched_tier_t *t, uint32_t number, const tier_key_t *key,
                     uint32_t slot, kvtier_BlockRef *out);
/* Marks a committed block DELETING (freed after the delete delay once unheld):
 * it is gone for lookups, so a BlockRemoved of `reason` is recorded (0: none,
 * the caller records what happened). false when the tier's DELETING queue is full
 * or it already is. */
bool sched_deleting_mark(sched_t *self, sched_tier_t *t, uint32_t number, const tier_key_t *key,
                         uint32_t slot, int64_t now, uint32_t reason);

/* Does a full tier t keep its live blocks (demoted to the next tier of its
 * chain, never dropped to make room)? Only when the migrator runs and the next
 * tier is UP; otherwise its writes evict as on a last tier. */
bool sched_keeps_victims(const sched_t *self, const sched_tier_t *t);
/* The id of the tier below T that takes its blocks (the next tier of its chain
 * that is not drained), 0: none. */
uint32_t sched_next_tier(const sched_t *self, const sched_tier_t *t);
/* The coldest reclaimable blocks of T (at most max, capped at one ReclaimCandidates
 * batch) into best, coldest first: the reclaimer's choice (pinned, DELETING and
 * blocks being demoted left out). */
uint32_t sched_candidates(sched_t *self, sched_tier_t *t, uint32_t max, int64_t now,
                          sched_cand_t *best);
/* A write found tier t full (reserve with TIER_RESERVE_NO_EVICT failed): starts
 * demoting up to NEED of its coldest unheld blocks now (and a sixteenth of the
 * tier more, unless cfg.room_on_demand), without waiting for the reclaimer's next
 * pass. Returns how many blocks of t are on their way out
 * (demotions in flight and DELETING, counting those started); 0 when nothing can
 * make room (all held, or the next tier cannot take any). */
uint32_t sched_make_room(sched_t *self, sched_tier_t *t, uint32_t need);
/* A load of tier index `tier`'s `slot` (engine generation gen) failed: probe it in
 * the next gc round. Bounded (SCHED_GC_SUSPECTS; beyond, counted in
 * gc_suspects_dropped: the scan reaches it in time). */
void sched_gc_suspect(sched_t *self, uint32_t tier, uint32_t slot, uint16_t gen);
/* Tier t told us (TierNotice, issue 12 §4) that it dropped blocks whose bytes failed
 * their checksum: each still indexed there with the same key leaves the index now
 * (DELETING while a reader holds it), reported removed as DAMAGED. A notice of
 * another tier id or epoch, or for a slot that holds another block now, changes
 * nothing. Returns how many left. */
uint32_t sched_tier_dropped(sched_t *self, sched_tier_t *t, const kvtier_TierNotice *n);
/* The source of a finished move (a demotion: its block now serves from the next
 * tier; an exclusive promotion: from the head): freed at once when no reader holds
 * it, else DELETING and freed once released. No delete delay: the block is moved,
 * not deleted, and every reader pins. Records no event (the caller records the
 * move). true when it left the index now (freed, or DELETING); false when it was
 * not that serving block any more (freed, reused, or DELETING already: its removal
 * was recorded then) or stays serving (a full DELETING queue). */
bool sched_release_demoted(sched_t *self, sched_tier_t *t, uint32_t number, const tier_key_t *key,
                           uint32_t slot, int64_t now);

/* ---- sched_quota.c ---- */
int sched_quota_init(sched_t *self); /* 0 or -1 (allocation at start) */
void sched_quota_fini(sched_t *self);
void sched_on_quota(sched_t *self, sched_call_t *call); /* QuotaEnforce (internal plane) */
/* AdminTrimRequest (meta plane): starts, cancels or reports an operator's trim of an
 * instance, carried out by the quota rounds (internal.proto). */
void sched_on_admin_trim(sched_t *self, sched_call_t *call);

/* ---- sched_demote.c ---- */
int sched_demote_init(sched_t *self); /* starts or connects the migrator; 0 or -1 */
void sched_demote_fini(sched_t *self);
/* DemoteDone from the migrator (internal plane): switches or rolls back the
 * job's blocks and answers DemoteDoneReply. */
void sched_on_demote_done(sched_t *self, sched_call_t *call);
/* Blocks of tier t being demoted now (sources of jobs in flight). */
uint32_t sched_demote_in_flight(const sched_t *self, const sched_tier_t *t);
/* Demotes the blocks at slots[0..n) of t to dst (same instance as the first;
 * others wait for a later call): pins the sources, reserves on dst all or
 * nothing, submits one migrator job. Blocks already SERVING on dst are marked
 * DELETING at once. Returns the blocks taken; their slots are written to
 * taken[]. *backpressure: nothing could be taken now (no job slot, dst full,
 * migrator queue full). */
uint32_t sched_demote(sched_t *self, sched_tier_t *t, sched_tier_t *dst, const uint32_t *slots,
                      uint32_t n, uint32_t *taken, bool *backpressure);
/* Slots per migrator job from tier t: MIGRATOR_MAX_JOB_SLOTS, SCHED_DEMOTE_JOB_BYTES
 * of its slots and max_batch, whichever is least (at least 1). */
uint32_t sched_job_slots(const sched_t *self, const sched_tier_t *t);
/* Submits mj (job_id set here) to the migrator: 0, or -1 with why filled. */
int sched_migrate_submit(sched_t *self, migrator_job_t *mj, char *why, size_t len);

#endif
