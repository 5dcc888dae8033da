/* sched_fake_tier.h — a controllable stand-in for a tier actor in scheduler tests:
 * a real ROUTER peer (bus_server on tcp://127.0.0.1:*) on its own thread that keeps
 * slot headers in memory and answers PutHeader, DeleteSlots and Inventory like
 * actors/tier_actor.h documents (headers by slot, deletes matching keys, inventory
 * pages of SERVING slots). Tests preload headers, read them back, count requests,
 * and can mute it (requests are read and never answered: the scheduler's tier
 * timeout fires). Test support only: a mutex guards the shared state. */
#ifndef KVT_SCHED_FAKE_TIER_H
#define KVT_SCHED_FAKE_TIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sched_fake_tier sched_fake_tier_t;

typedef struct {
    uint64_t requests;    /* every request read */
    uint64_t put_headers; /* PutHeader requests answered */
    uint64_t headers;     /* headers written */
    uint64_t deletes;     /* DeleteSlots requests answered */
    uint64_t slots_deleted;
    uint64_t inventories; /* Inventory pages answered */
    uint64_t last_epoch;  /* epoch fence of the last PutHeader / DeleteSlots */
} sched_fake_tier_stats_t;

typedef struct {
    bool serving;
    uint8_t key[16];
    char instance_id[64];
    uint64_t size, checksum, deadline_ms;
} sched_fake_slot_t;

/* How Inventory pages are answered (sched_fake_tier_set_inventory). By default as
 * actors/tier_actor.h says: windows [cursor, end), records when asked for. */
typedef enum {
    SCHED_FAKE_BAD_NONE = 0,
    SCHED_FAKE_BAD_LENGTH,  /* records field one byte short of whole records */
    SCHED_FAKE_BAD_OUTSIDE, /* the last record names a slot past the window */
    SCHED_FAKE_BAD_EPOCH,   /* TierInfo.epoch is not the configured one */
    SCHED_FAKE_BAD_STATUS,  /* answered UNAVAILABLE */
} sched_fake_bad_t;

typedef struct {
    bool legacy;        /* an actor from before records: end and records ignored,
                           pages of at most 128 entries, done only at the capacity */
    uint64_t epoch;     /* reported in TierInfo (0: none) */
    uint64_t mute_from; /* pages from this slot on go unanswered (0: none) */
    sched_fake_bad_t bad;
    uint32_t bad_from, bad_count; /* pages bad_from .. bad_from + bad_count - 1 (1-based) */
    /* called under the fake's lock before page `page` (1-based) is built: may change
     * slots[0..capacity) (a tier whose inventory changes during a rebuild) */
    void (*on_page)(void *arg, uint32_t page, sched_fake_slot_t *slots, uint64_t capacity);
    void *arg;
} sched_fake_inv_t;

/* Binds tcp://127.0.0.1:* and serves tier `tier_id` of `capacity` slots. NULL on failure. */
sched_fake_tier_t *sched_fake_tier_new(uint32_t tier_id, uint64_t capacity);
void sched_fake_tier_destroy(sched_fake_tier_t **self_p);
const char *sched_fake_tier_endpoint(const sched_fake_tier_t *self);

/* Sets how Inventory pages are answered and restarts the page count. */
void sched_fake_tier_set_inventory(sched_fake_tier_t *self, const sched_fake_inv_t *inv);
/* Inventory requests that asked for records, and the largest max_entries asked for. */
void sched_fake_tier_inventory_asks(sched_fake_tier_t *self, uint64_t *records_pages,
                                    uint64_t *max_entries);

/* bytes > 0: WriteSlots and ReadSlots are answered OK with one payload frame of
 * that many bytes (a tier whose reply frame is larger than its slots); 0 (the
 * default): refused INVALID_ARGUMENT, as every other request it does not serve. */
void sched_fake_tier_set_oversize(sched_fake_tier_t *self, size_t bytes);
/* Muted: requests are read and dropped without a reply. */
void sched_fake_tier_set_mute(sched_fake_tier_t *self, bool mute);
/* Sets (serving) or clears slot `slot`'s header; -1 if out of range. */
int sched_fake_tier_set(sched_fake_tier_t *self, uint64_t slot, const sched_fake_slot_t *h);
/* Reads slot `slot`'s header; -1 if out of range. */
int sched_fake_tier_get(sched_fake_tier_t *self, uint64_t slot, sched_fake_slot_t *out);
/* Empties every slot (a restarted host tier). */
void sched_fake_tier_clear(sched_fake_tier_t *self);
void sched_fake_tier_stats(sched_fake_tier_t *self, sched_fake_tier_stats_t *out);
/* Number of SERVING slots whose key is `key`. */
uint32_t sched_fake_tier_count_key(sched_fake_tier_t *self, const uint8_t key[16]);

#endif
