/* publisher_mirror.h — the publisher's own copy of the block index, rebuilt from
 * the event batches it publishes (docs/EVENTS.md "Snapshot"), so that a
 * subscriber that fell behind the replay ring can ask for the whole index
 * without the scheduler being asked anything.
 *
 * A location is (instance, key, tier); the mirror applies, in sequence order:
 *   stored   add (or refresh) the location, with its medium, bytes and tokens
 *   removed  drop it
 *   moved    drop the source location, add the destination (same bytes, tokens)
 *   tier     down: drop every location on that tier
 *   leader   a new term: drop everything (the new leader's index is rebuilt from
 *            the tiers' inventories, and their stores follow)
 *   cleared  drop everything
 *   lookup   nothing
 *
 * Bounded: at most max_blocks locations and PUBLISHER_MIRROR_INSTANCES instance
 * ids. What the mirror cannot follow makes it STALE, never silently wrong:
 * a location beyond the bound, an instance beyond the table, or a batch the
 * caller could not decode (publisher_mirror_lost). A stale mirror serves no
 * snapshot until the next term (LeaderChanged) or AllCleared empties it.
 * Memory: one 40-byte slot per location at most twice the count (open
 * addressing, grows by doubling), allocated as it grows; never shrinks.
 *
 * Not thread-safe: the publisher's thread owns it. */
#ifndef KVT_PUBLISHER_MIRROR_H
#define KVT_PUBLISHER_MIRROR_H

#include <stdbool.h>
#include <stdint.h>

#include "bus_events.h"
#include "bus_limits.h"

#define PUBLISHER_MIRROR_INSTANCES 4096u
#define PUBLISHER_MIRROR_DEFAULT_BLOCKS (1u << 22)
#define PUBLISHER_MIRROR_MAX_BLOCKS (1u << 28)

typedef struct publisher_mirror_t publisher_mirror_t;

/* One location, as a snapshot lists it. */
typedef struct {
    uint8_t key[BUS_KEY_LEN];
    uint16_t instance; /* index into the instance table (publisher_mirror_instance) */
    uint8_t medium;    /* kvtier_Medium */
    uint8_t used;      /* internal: 1 in the table */
    uint32_t tier_id;
    uint32_t tokens; /* tokens per block (0: unknown) */
    uint64_t bytes;  /* block bytes */
} publisher_mirror_loc_t;

/* max_blocks: 0 = PUBLISHER_MIRROR_DEFAULT_BLOCKS, at most
 * PUBLISHER_MIRROR_MAX_BLOCKS. NULL on a bad bound or no memory. */
publisher_mirror_t *publisher_mirror_new(uint32_t max_blocks);
void publisher_mirror_destroy(publisher_mirror_t **self_p);

/* Applies one decoded batch (bus_events_decode) of sequence seq. */
void publisher_mirror_apply(publisher_mirror_t *self, uint64_t seq, const kvtier_EventBatch *b,
                            const bus_event_t *events, uint32_t n);

/* A batch of sequence seq could not be applied (undecodable, lost before the
 * publisher): the mirror is stale from there. why is kept for the error text. */
void publisher_mirror_lost(publisher_mirror_t *self, uint64_t seq, const char *why);

/* Locations now. */
uint32_t publisher_mirror_count(const publisher_mirror_t *self);

/* NULL when the mirror can serve a snapshot, else why not (a sentence). */
const char *publisher_mirror_stale(const publisher_mirror_t *self);

/* The instance id of table index i ("" when unknown). */
const char *publisher_mirror_instance(const publisher_mirror_t *self, uint16_t i);

/* A copy of the instance table (*n ids of BUS_INSTANCE_ID_MAX bytes; the caller
 * frees *out; NULL with *n = 0 when empty): a snapshot names its locations'
 * instances from it, since a clear while it is sent reuses the live table. 0 or -1. */
int publisher_mirror_copy_instances(const publisher_mirror_t *self,
                                    char (**out)[BUS_INSTANCE_ID_MAX], uint32_t *n);

/* Copies every location into a new array *out (the caller frees it; NULL when
 * empty), sorted by (instance, tier, medium, bytes, tokens) so that runs make
 * few events; *n set. 0, or -1 on no memory. */
int publisher_mirror_copy(const publisher_mirror_t *self, publisher_mirror_loc_t **out,
                          uint32_t *n);

#endif
