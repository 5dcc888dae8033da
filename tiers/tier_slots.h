/* tier_slots.h — the per-tier slot engine (DESIGN.md §8): which block (instance,
 * key) occupies which slot of one tier, in which state, for how long, and who
 * is evicted when a new block needs room.
 *
 * Owns: a fixed pool of `capacity` slots (intrusive free list), a hash index
 * over (instance, key), pin and reservation counts, the TTL min-heap, the
 * replacement policy's state and the rollback journal of the batch reserve.
 * Everything is allocated by tier_slots_new; no other call allocates. Every
 * call is O(1) or O(log capacity), except the policy's victim scan, which
 * passes over slots that may not be taken (pinned, being rewritten), and the
 * heap compaction, amortised over the stale entries that caused it.
 * Single-threaded: one owner (the scheduler actor) calls it; no locks.
 *
 * Must never: block, log, allocate after creation, or serve a block that is
 * being written or has expired.
 *
 * Slot states: FREE -> RESERVED (being written, "WRITING"; shared by
 * `refs` concurrent reservations) -> COMMITTED ("SERVING") -> FREE. An evicted
 * slot goes straight from COMMITTED (old block) to RESERVED (new block).
 * A COMMITTED slot can also be re-admitted: same slot, still serving, held
 * against eviction by `refs` rewriters until they all commit.
 *
 * Time: callers pass `now_ms`, a monotonic clock in milliseconds; every call
 * taking it first advances the engine's clock, which never goes back (an
 * older now_ms counts as the latest seen).
 * Deadlines are absolute on that clock; 0 means none. A block is expired when
 * deadline != 0 && deadline <= now. Expiry is lazy: lookup, pin and touch
 * remove an expired block unless it is held (pinned or being rewritten); a
 * held one is not served, and once released it is removed like any expired
 * block, by the next lookup, sweep or expire round (deferred expiry).
 * Under pressure, reserve takes expired blocks before asking the policy.
 */
#ifndef KVT_TIER_SLOTS_H
#define KVT_TIER_SLOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tier_key.h"

typedef struct tier_slots tier_slots_t;

/* Results: 0 or one of these (negative). */
enum {
    TIER_SLOTS_ENOENT = -1,       /* no such block (a block being written is not visible) */
    TIER_SLOTS_EXPIRED = -2,      /* the block had expired and has just been removed */
    TIER_SLOTS_EXPIRED_HELD = -3, /* expired but pinned / being rewritten: not served,
                                     removable once released */
    TIER_SLOTS_ENOSPC = -4,       /* batch cannot be placed entirely; nothing changed */
    TIER_SLOTS_E2BIG = -5,        /* batch larger than the max_batch given at creation */
    TIER_SLOTS_EDUP = -6,         /* key twice in one batch, or adopt of a present key */
    TIER_SLOTS_EBUSY = -7,        /* pinned, being written or slot occupied */
    TIER_SLOTS_ESTATE = -8,       /* wrong state: unpin without pin, commit without
                                     reservation */
    TIER_SLOTS_EOVERFLOW = -9,    /* pin or sharer count at its limit */
    TIER_SLOTS_EINVAL = -10,      /* bad argument */
};

/* A human-readable name for a result above ("no space", ...). */
const char *tier_slots_strerror(int rc);

typedef enum {
    TIER_SLOT_FREE = 0,
    TIER_SLOT_RESERVED = 1,  /* WRITING */
    TIER_SLOT_COMMITTED = 2, /* SERVING */
} tier_slot_state_t;

typedef struct {
    const char *policy;        /* registered policy name; NULL means "lru" */
    uint32_t capacity;         /* slots, 1 .. 2^31 */
    uint32_t max_batch;        /* keys per reserve call, >= 1 (sizes the journal);
                                  more is refused with TIER_SLOTS_E2BIG */
    uint32_t heap_stale_bound; /* stale TTL-heap entries tolerated before compaction;
                                  0 = capacity / 4 + 16 */
    uint64_t hash_seed;        /* of the key index; 0 = a random one (keys come from
                                  clients: a secret seed keeps probe runs short) */
} tier_slots_config_t;

/* NULL on a bad config (zero capacity or batch, unknown policy) or no memory. */
tier_slots_t *tier_slots_new(const tier_slots_config_t *cfg);
/* Frees everything and sets *self to NULL; NULL or *self NULL is fine. */
void tier_slots_destroy(tier_slots_t **self);

/* ---- reserve / commit (two-phase admission) ---- */

enum {
    /* A live committed key is reported TIER_RESV_SERVING and nothing is
     * reserved for it (prepare_put skips serving keys). Without this flag it
     * is re-admitted. An expired committed key is re-admitted either way,
     * unless it is pinned: with this flag a pinned one is reported SERVING,
     * so no writer rewrites a slot a reader may be copying. */
    TIER_RESERVE_SKIP_SERVING = 1u << 0,
    /* Newcomers take free slots and expired unheld blocks only, never a live
     * block chosen by the policy: a tier whose live blocks must be demoted, not
     * dropped, fails the batch with TIER_SLOTS_ENOSPC instead (nothing changed). */
    TIER_RESERVE_NO_EVICT = 1u << 1,
};

typedef enum {
    TIER_RESV_NEW = 1,     /* newcomer in a free slot */
    TIER_RESV_EVICTED = 2, /* newcomer in a victim's slot (the victim is in victims[]) */
    TIER_RESV_SHARED = 3,  /* joined a reservation in flight (one more sharer) */
    TIER_RESV_READMIT = 4, /* committed key re-admitted: same slot, held for the rewrite */
    TIER_RESV_SERVING = 5, /* committed and live, nothing reserved (SKIP_SERVING) */
} tier_resv_kind_t;

typedef struct {
    uint32_t slot;
    uint32_t kind; /* tier_resv_kind_t */
} tier_resv_t;

/* A block the engine removed to make room (reserve) or because it expired. */
typedef struct {
    tier_key_t key;
    uint32_t instance;
    uint32_t slot;
    uint64_t deadline_ms;
    bool expired; /* taken because expired (else chosen by the policy) */
} tier_victim_t;

/* Reserves one slot for each of keys[0..n) of instance, all or nothing.
 *
 * Keys already known are settled first: one being written is shared (one
 * more sharer; its pending deadline becomes this one, last writer wins); a
 * committed one is re-admitted (same slot, held until its rewriters commit) or,
 * with TIER_RESERVE_SKIP_SERVING and when live, reported SERVING and protected
 * from this batch's evictions. Then newcomers take free slots, then expired
 * unheld blocks (earliest deadline first), then the policy's victims — never
 * a member of the batch. The outcome (kinds, victims) does not depend on the
 * order of keys in the batch; which free slot each newcomer gets does.
 *
 * On success out[i] tells slot and kind for keys[i]; victims[0..*n_victims)
 * the blocks evicted (in eviction order; victims needs room for n), each
 * reserved newcomer/sharer/rewriter owes exactly one tier_slots_commit.
 * On failure nothing changed (journal replayed in reverse: victims back in
 * their slots with their deadlines and policy positions, except clock's hand
 * and cleared reference bits, and expired held blocks met on the way stay
 * deferred), *n_victims = 0: TIER_SLOTS_ENOSPC, _E2BIG, _EDUP, _EOVERFLOW,
 * _EINVAL. deadline_ms is the blocks' deadline once committed (0 = none).
 * victims and n_victims may both be NULL when the caller does not need them. */
int tier_slots_reserve(tier_slots_t *self, uint32_t instance, const tier_key_t *keys, size_t n,
                       uint64_t deadline_ms, uint64_t now_ms, unsigned flags, tier_resv_t *out,
                       tier_victim_t *victims, size_t *n_victims);

typedef enum {
    TIER_COMMIT_PENDING = 1,   /* other sharers/rewriters still to commit */
    TIER_COMMIT_COMMITTED = 2, /* reservation concluded: block now serving */
    TIER_COMMIT_RELEASED = 3,  /* every sharer failed: slot freed */
    TIER_COMMIT_KEPT = 4,      /* re-admission concluded, block unchanged (a live block's
                                  deadline is extended only by touch) */
    TIER_COMMIT_REVIVED = 5,   /* re-admission succeeded on an expired block: it serves
                                  again with the new deadline */
} tier_commit_outcome_t;

/* Concludes one sharer's reservation (or one rewriter's re-admission). The
 * last one decides; if any of them succeeded the block commits. outcome may
 * be NULL. TIER_SLOTS_ENOENT (no such key), _ESTATE (nothing in flight). */
int tier_slots_commit(tier_slots_t *self, uint32_t instance, const tier_key_t *key, bool success,
                      uint64_t now_ms, tier_commit_outcome_t *outcome);

/* ---- read path ---- */

typedef struct {
    tier_key_t key;
    uint32_t instance;
    uint32_t slot;
    uint32_t state; /* tier_slot_state_t */
    uint32_t pins;
    uint32_t refs;                /* sharers (RESERVED) or rewriters (COMMITTED) */
    uint64_t deadline_ms;         /* COMMITTED: current deadline */
    uint64_t pending_deadline_ms; /* deadline the reservation / rewrite will apply */
    bool expired;
    bool deferred; /* expired while held: waits for release to be removed */
} tier_slot_info_t;

/* Serves a committed, live block: 0 and *info (may be NULL). An expired one
 * is removed now (TIER_SLOTS_EXPIRED, *info describes it as it was) or, if
 * held, TIER_SLOTS_EXPIRED_HELD. TIER_SLOTS_ENOENT when absent or being
 * written. Does not change the policy order (touch does). */
int tier_slots_lookup(tier_slots_t *self, uint32_t instance, const tier_key_t *key, uint64_t now_ms,
                      tier_slot_info_t *info);

/* n lookups at once, with exactly the results (and expiries) of n
 * tier_slots_lookup calls in key order: rc[i] and info[i] per key. The keys are
 * hashed a group at a time and their index entries, then their slot records,
 * prefetched, so the cache misses of a group overlap instead of following one
 * another. 0, or TIER_SLOTS_EINVAL (NULL arrays with n > 0). */
int tier_slots_lookup_batch(tier_slots_t *self, uint32_t instance, const tier_key_t *keys,
                            uint32_t n, uint64_t now_ms, tier_slot_info_t *info, int *rc);

/* Pins a committed live block against eviction (counted). Same results as
 * lookup, plus TIER_SLOTS_EOVERFLOW. slot may be NULL. */
int tier_slots_pin(tier_slots_t *self, uint32_t instance, const tier_key_t *key, uint64_t now_ms,
                   uint32_t *slot);

/* Drops one pin (also on an expired block). TIER_SLOTS_ENOENT, _ESTATE (not
 * pinned). The last unpin of an expired block makes it removable again. */
int tier_slots_unpin(tier_slots_t *self, uint32_t instance, const tier_key_t *key);

/* A hit: refreshes the block's policy rank and, when deadline_ms is later
 * than its current non-zero deadline, extends it (never shortens; a block
 * without deadline keeps none). Same results as lookup. */
int tier_slots_touch(tier_slots_t *self, uint32_t instance, const tier_key_t *key, uint64_t now_ms,
                     uint64_t deadline_ms);

/* Gives a live committed block exactly deadline_ms (0: none), earlier or later
 * than its own, without changing its policy rank: what the copy of a block
 * that carried a deadline needs (a demotion reserves its batch without one).
 * Same results as lookup. */
int tier_slots_set_deadline(tier_slots_t *self, uint32_t instance, const tier_key_t *key,
                            uint64_t now_ms, uint64_t deadline_ms);

/* touch of a key a lookup just found at slot: the record there is checked
 * (committed, this instance and key) instead of hashing the key again; any other
 * slot falls back to the lookup by key. Same results as touch. */
int tier_slots_touch_at(tier_slots_t *self, uint32_t slot, uint32_t instance, const tier_key_t *key,
                        uint64_t now_ms, uint64_t deadline_ms);

/* ---- removal, expiry, recovery ---- */

/* Removes a committed, unheld block (reclaim, delete, gc). TIER_SLOTS_ENOENT,
 * _EBUSY (pinned, being written or rewritten). */
int tier_slots_remove(tier_slots_t *self, uint32_t instance, const tier_key_t *key);

/* Removes up to max expired unheld blocks, earliest deadline first, into
 * victims[0..*n) (a bounded gc round). Expired held ones met are deferred. */
int tier_slots_expire(tier_slots_t *self, uint64_t now_ms, tier_victim_t *victims, size_t max,
                      size_t *n);

/* Recovery (a new leader rebuilding from a tier's inventory): places a
 * committed block at a given free slot. TIER_SLOTS_EINVAL (slot out of
 * range), _EBUSY (slot not free), _EDUP (key present). */
int tier_slots_adopt(tier_slots_t *self, uint32_t instance, const tier_key_t *key, uint32_t slot,
                     uint64_t deadline_ms, uint64_t now_ms);

/* ---- introspection (no side effects) ---- */

/* Any state, expired or not, no expiry applied. TIER_SLOTS_ENOENT. */
int tier_slots_peek(const tier_slots_t *self, uint32_t instance, const tier_key_t *key,
                    tier_slot_info_t *info);
/* By slot; a FREE slot reports state FREE. TIER_SLOTS_EINVAL out of range. */
int tier_slots_slot_info(const tier_slots_t *self, uint32_t slot, tier_slot_info_t *info);

/* Called per slot of the walk below; returning true stops it. */
typedef bool (*tier_slots_walk_fn)(void *arg, uint32_t slot);

/* The policy's order, coldest first (the next victim first), without changing
 * it: fn for each ordered (committed) slot, at most max_steps of them, until fn
 * returns true. Returns the slots visited. O(max_steps) for list policies,
 * O(capacity) at worst for clock. The caller filters (pins, expiry) itself. */
uint32_t tier_slots_walk_coldest(const tier_slots_t *self, uint32_t max_steps,
                                 tier_slots_walk_fn fn, void *arg);

typedef struct {
    uint32_t capacity;
    uint32_t used; /* reserved + committed */
    uint32_t free;
    uint32_t reserved;    /* WRITING */
    uint32_t committed;   /* SERVING (expired but not yet removed included) */
    uint32_t pinned;      /* committed with pins > 0 */
    uint32_t rewriting;   /* committed being re-admitted */
    uint32_t deferred;    /* expired while held, waiting for release */
    uint32_t evictable;   /* committed, unpinned, not being rewritten */
    uint64_t evictions;   /* blocks taken by the policy */
    uint64_t expirations; /* blocks removed because expired */
    uint64_t removals;    /* tier_slots_remove */
    uint64_t rollbacks;   /* failed reserve batches */
    uint32_t heap_len;
    uint32_t heap_stale;
    uint64_t heap_compactions;
    uint64_t now_ms; /* the engine's clock */
} tier_slots_stats_t;

void tier_slots_stats(const tier_slots_t *self, tier_slots_stats_t *st);

/* The policy in use ("lru", ...). */
const char *tier_slots_policy(const tier_slots_t *self);

/* The hash of (instance, key) the engine gives its policy at admission
 * (tier_policy_facts_t.key_hash): XXH3-64 under a seed derived from the
 * engine's hash seed, so equal seeds give equal hashes (tests, the optimizer);
 * 0 for a NULL argument. */
uint64_t tier_slots_key_hash(const tier_slots_t *self, uint32_t instance, const tier_key_t *key);

/* Checks every internal invariant, O(capacity + heap). 0 or a negative line
 * number of the failed check; for tests and debugging. */
int tier_slots_check(const tier_slots_t *self);

#endif
