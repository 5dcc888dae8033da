/* tier_policy.h — replacement policies of the slot engine (DESIGN.md §8): a
 * policy is a const ops table registered by name ("lru", "clock", "fifo",
 * "s3fifo").
 *
 * A policy only orders slots. It never sees keys, states, pins or deadlines:
 * the engine tells it when a slot is admitted (becomes committed), touched,
 * released (leaves committed), and asks it for a victim, passing a predicate
 * that says which slots may be taken (pinned, re-admitted and protected slots
 * are skipped). Its state lives in one block the engine allocates at creation
 * (state_size bytes, suitably aligned), so no op allocates.
 *
 * Eviction rollback: before releasing a victim the engine asks for its
 * position memo; restore(slot, memo) puts it back. The engine restores victims
 * in the reverse order of their eviction and changes nothing else in the order
 * in between, so list policies restore the exact position; clock restores the
 * slot and its reference bit but not the hand; s3fifo restores the victim's
 * queue, count and place but not the picks' moves to M and lowered counts, nor
 * the ghost's other changes (its epoch, a bucket entry the insertion
 * overwrote) — it only takes the victim's own fingerprint out again — and a
 * victim whose older neighbour a later pick moved goes back at S's oldest end
 * or next to that neighbour in M (each documented in its file, and replicated
 * by the differential test's model).
 *
 * Registry: built-in policies are always found; tier_policy_register adds up
 * to TIER_POLICY_MAX_EXTRA more (out-of-tree), typically at start-up — the
 * registry is not thread-safe for registration.
 */
#ifndef KVT_TIER_POLICY_H
#define KVT_TIER_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TIER_POLICY_MAX_EXTRA 8

/* May slot be taken as a victim now? ctx is the engine. */
typedef bool (*tier_policy_evictable_fn)(const void *ctx, uint32_t slot);

/* What the engine knows of a block as it is admitted, for a policy that needs
 * more than slot numbers (tier_policy_ops_t.admitted_facts): no key, only its
 * hash (a ghost list or a frequency sketch keeps fingerprints), and the reserve
 * batch that placed it. A batch is one put of one request, its keys in prefix
 * order, and the scheduler commits them in that order, so consecutive
 * admissions of one batch run from the prefix's head towards its tail. */
typedef struct {
    uint64_t key_hash; /* tier_slots_key_hash(engine, instance, key) */
    uint32_t batch;    /* stamp of the reserve batch, 0 when none (an adopted block) */
} tier_policy_facts_t;

typedef struct tier_policy_ops {
    const char *name;
    /* Bytes of state for capacity slots; the engine aligns the block to 8. */
    size_t (*state_size)(uint32_t capacity);
    /* Initialise state: no slot ordered yet. */
    void (*init)(void *st, uint32_t capacity);
    /* slot became committed: now the newest / most recent. */
    void (*admitted)(void *st, uint32_t slot);
    /* Optional; when set the engine calls it instead of admitted (which may
     * then be NULL), with the block's facts. */
    void (*admitted_facts)(void *st, uint32_t slot, const tier_policy_facts_t *facts);
    /* slot was used (a hit): refresh its rank if the policy cares. */
    void (*touched)(void *st, uint32_t slot);
    /* slot left the committed state: forget it. */
    void (*released)(void *st, uint32_t slot);
    /* Opaque memo of slot's position, taken just before released(). */
    uint64_t (*position)(const void *st, uint32_t slot);
    /* Put a released slot back where position() said it was. */
    void (*restore)(void *st, uint32_t slot, uint64_t memo);
    /* Choose the victim among ordered slots for which evictable() holds;
     * false when there is none. May update the policy's own bookkeeping. */
    bool (*pick_victim)(void *st, tier_policy_evictable_fn evictable, const void *ctx,
                        uint32_t *slot);
    /* The order itself, without changing it: the ordered slots from the next
     * victim towards the newest (clock: from the hand, first the slots without
     * their reference bit, then those with it; s3fifo: an approximation, each
     * queue's untouched blocks before its touched ones, the queue a pick takes
     * first before the other, without the switch a pick makes when S falls
     * below its share). *cursor is 0 to start; each call
     * sets *slot and returns true, false at the end. Valid while the order does
     * not change (the engine walks it inside one call). */
    bool (*next_coldest)(const void *st, uint64_t *cursor, uint32_t *slot);
} tier_policy_ops_t;

extern const tier_policy_ops_t tier_policy_lru;
extern const tier_policy_ops_t tier_policy_clock;
extern const tier_policy_ops_t tier_policy_fifo;
extern const tier_policy_ops_t tier_policy_s3fifo;

/* The policy registered under name, or NULL (unknown name or NULL). */
const tier_policy_ops_t *tier_policy_find(const char *name);

/* Adds an out-of-tree policy. 0, or -EINVAL (missing op or name; one of
 * admitted and admitted_facts is enough), -EEXIST
 * (name taken), -ENOSPC (TIER_POLICY_MAX_EXTRA reached). */
int tier_policy_register(const tier_policy_ops_t *ops);

/* Registered policies, built-ins first: index 0..count-1, NULL past the end.
 * For listing the known names in a configuration error. */
size_t tier_policy_count(void);
const tier_policy_ops_t *tier_policy_at(size_t index);

#endif
