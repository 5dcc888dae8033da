/* sched_events.h — the scheduler's changes as events (DESIGN.md §13, docs/EVENTS.md):
 * blocks stored, removed (with the reason), moved, lookups, tiers up / down, the
 * leader, all cleared. The modules record what happens while they serve an event
 * of the loop; the actor flushes at the end of it (and at each tick): each run of
 * consecutive records of one (kind, instance) becomes one EventBatch
 * (schemas/events.proto), so batches keep the order things happened in,
 * numbered, and handed to the publisher (actors/publisher.h) over its input
 * socket as [topic][8-byte big-endian sequence][EventBatch]. The scheduler never
 * waits on the publisher: the hand-over does not block, and a batch that does not
 * fit is dropped and counted; its sequence number is used all the same, so a
 * subscriber sees the gap.
 *
 * Topics: "<kind>/<instance id>" for block and lookup events (kind: stored,
 * removed, moved, lookup), "tier", "leader" and "cleared" for the others, so a
 * SUB filters by kind or by kind and instance with a prefix.
 *
 * Sequences: (leader epoch << 40) + n, n counting from 1 at start: they grow
 * across leaders as the epoch does, with no write to etcd per batch.
 *
 * Bounded: SCHED_EV_RECORDS records, SCHED_EV_KEYS keys and SCHED_EV_TOKENS token
 * ids between flushes (a record that does not fit flushes first; a block with
 * more token ids than the whole pool is recorded without them, counted in
 * tokens_dropped); never allocates after init. Off (every
 * call returns at once) when no input endpoint is configured. Builds on the core
 * (sched_types.h) only: instance ids come from the resolver the actor gives it. */
#ifndef KVT_SCHED_EVENTS_H
#define KVT_SCHED_EVENTS_H

#include "bus_events.h"
#include "sched_types.h"

#define SCHED_EV_RECORDS 512u   /* records between flushes */
#define SCHED_EV_KEYS 16384u    /* keys between flushes */
#define SCHED_EV_TIER_HITS 16u  /* tiers with hits reported per lookup */
#define SCHED_EV_TOKENS 262144u /* token ids between flushes (1 MiB) */

typedef enum {
    SCHED_EV_STORED = 0,
    SCHED_EV_REMOVED,
    SCHED_EV_MOVED,
    SCHED_EV_LOOKUP,
    SCHED_EV_TIER,
    SCHED_EV_LEADER,
    SCHED_EV_CLEARED,
    SCHED_EV_KINDS,
} sched_ev_kind_t;

/* One recorded change; consecutive records that differ only in their keys merge. */
typedef struct {
    uint8_t kind;     /* sched_ev_kind_t */
    uint8_t reason;   /* removed: kvtier_RemoveReason; moved: kvtier_MoveReason;
                         tier: 1 up, 0 down */
    uint8_t medium;   /* kvtier_Medium (moved: the source's) */
    uint8_t medium2;  /* moved: the destination's */
    uint32_t number;  /* instance (slot-header number); 0: none */
    uint32_t tier;    /* tier id (moved: source) */
    uint32_t tier2;   /* moved: destination tier id; lookup: mode */
    uint64_t a;       /* stored: block bytes; tier: capacity slots; leader: epoch;
                         lookup: hit count */
    uint64_t b;       /* tier: slot bytes; lookup: head hits; leader: previous epoch */
    uint64_t c;       /* tier: the tier actor's epoch; lookup: keys looked up */
    uint32_t key_off; /* first key in the key pool */
    uint32_t n_keys;
    uint32_t hits_off, n_hits; /* lookup: (tier id, hits) pairs in the hits pool */
    uint32_t tok_off, n_tok;   /* stored: token ids in the token pool (0: none known) */
    bool has_parent;           /* stored: parent holds the block before keys[0] */
    tier_key_t parent;
    uint64_t ts_us;
    char text[64]; /* lookup: request id; tier: name; leader: endpoint */
} sched_ev_rec_t;

typedef const char *(*sched_name_fn)(sched_t *self, uint32_t number);
/* Tokens per block of an instance (its spec); 0 when unknown. */
typedef uint32_t (*sched_tokens_fn)(sched_t *self, uint32_t number);

/* The events module's state (sched_t.events). */
typedef struct {
    void *push; /* zsock_t *: PUSH to the publisher's input; NULL: events off */
    sched_name_fn name_of;
    sched_tokens_fn tokens_of;
    uint64_t epoch;
    uint64_t next; /* the next batch's number within the epoch (from 1) */
    uint32_t n_rec, n_keys, n_hits, n_tok;
    sched_ev_rec_t *rec;     /* SCHED_EV_RECORDS */
    tier_key_t *keys;        /* SCHED_EV_KEYS */
    uint32_t *hits;          /* 2 x SCHED_EV_TIER_HITS x SCHED_EV_RECORDS */
    uint32_t *tokens;        /* SCHED_EV_TOKENS */
    bus_event_t *events;     /* encode scratch, SCHED_EV_RECORDS */
    uint64_t records;        /* recorded */
    uint64_t handed;         /* batches handed to the publisher */
    uint64_t dropped;        /* batches not handed (its input was full): a gap */
    uint64_t events_out;     /* events in the batches handed */
    uint64_t tokens_dropped; /* puts (or blocks) whose token ids were not kept */
} sched_events_t;

/* Connects to the publisher's input at endpoint ("" or NULL: events off) and
 * records the leader's first event. 0 or -1 (allocation, socket). */
int sched_events_init(sched_t *self, const char *endpoint, uint32_t queue, uint64_t epoch,
                      uint64_t previous_epoch,
                      const char *leader, sched_name_fn name_of, sched_tokens_fn tokens_of);
void sched_events_fini(sched_t *self);
bool sched_events_on(const sched_t *self);

/* Records (keys: n block keys; each copies what it needs). */
void sched_ev_stored(sched_t *self, uint32_t number, uint32_t tier_id, uint32_t medium,
                     uint64_t block_bytes, const tier_key_t *keys, uint32_t n);
/* One block of a put's run (one call per committed key, in the put's order):
 * parent (NULL: none known) is the block before it, tokens its n_tok token ids
 * (0: none). It extends the last record when that one is the same kind of store
 * and ends with parent (a chain); otherwise it starts a record whose parent it
 * gives. */
void sched_ev_stored_chain(sched_t *self, uint32_t number, uint32_t tier_id, uint32_t medium,
                           uint64_t block_bytes, const tier_key_t *key, const tier_key_t *parent,
                           const uint32_t *tokens, uint32_t n_tok);
void sched_ev_removed(sched_t *self, uint32_t number, uint32_t tier_id, uint32_t medium,
                      uint32_t reason, const tier_key_t *keys, uint32_t n);
/* reason: kvtier_MoveReason (DEMOTED down the chain, PROMOTED up by an exclusive
 * chain's prefetch). */
void sched_ev_moved(sched_t *self, uint32_t number, uint32_t src_tier_id, uint32_t src_medium,
                    uint32_t dst_tier_id, uint32_t dst_medium, uint32_t reason,
                    const tier_key_t *keys, uint32_t n);
/* tier_hits: n_tiers (tier id, hits) pairs. */
void sched_ev_lookup(sched_t *self, uint32_t number, const char *request_id, uint32_t mode,
                     uint32_t hit_count, uint32_t head_hits, const tier_key_t *keys, uint32_t n,
                     const uint32_t (*tier_hits)[2], uint32_t n_tiers);
void sched_ev_tier(sched_t *self, uint32_t tier_id, const char *name, uint32_t medium, bool up,
                   uint64_t capacity_slots, uint64_t slot_bytes, uint64_t epoch);
void sched_ev_cleared(sched_t *self);

/* Hands what was recorded to the publisher. */
void sched_events_flush(sched_t *self);

/* The Medium (schemas/events.proto) of a wire tier kind (schemas/common.proto). */
uint32_t sched_ev_medium(uint32_t wire_kind);

#endif
