/* sched_tiers.h — the tier set: slot engines, tier clients, membership, inventory adoption, header
 * writes and deletes, and the DELETING marks of each tier. Owns sched_tierset_t (sched_t.tierset).
 * Private to actors/sched_*.c; builds on the core (sched_types.h) and the windows' entries
 * (sched_window.h) only. */
#ifndef KVT_SCHED_TIERS_H
#define KVT_SCHED_TIERS_H

#include "sched_events.h"
#include "sched_types.h"
#include "sched_window.h"

#define SCHED_DEL_BATCH 512u /* slots per DeleteSlots message */
/* Lifetimes of the tokens the scheduler mints for itself (docs/SECURITY.md): its
 * own PutHeader / DeleteSlots are sent at once; a copy job may wait in the
 * migrator's queue first. */
#define SCHED_ADMIN_TOKEN_MS 30000u
#define SCHED_COPY_TOKEN_MS 300000u
#define SCHED_EXPIRE_BATCH 64u                /* expired blocks removed per tier per tick */
#define SCHED_INV_PAGE BUS_MAX_INVENTORY_PAGE /* InventoryReply.entries (inventory_entries) */
#define SCHED_INV_TRIES 5u                    /* one window's page failing in a row: give up */
#define SCHED_ROOM_HOLD_MS 1000               /* room kept for a BUSY write that stopped retrying */

typedef enum {
    SCHED_TIER_DOWN = 0,       /* no tier actor known: nothing stored, no puts */
    SCHED_TIER_RECOVERING = 1, /* paging its inventory: reads only */
    SCHED_TIER_UP = 2,
} sched_tier_state_t;

/* A block marked DELETING (reclaim, DESIGN §6): not served, not pinnable; its
 * slot is freed at `due` once no reader holds it. */
typedef struct {
    tier_key_t key;
    uint32_t number;
    uint32_t slot;
    int64_t due; /* monotonic ms */
} sched_deleting_t;

/* One window of a tier's inventory being read: slots [cursor, end), one page in
 * flight at a time; its reply's records land in `records`. */
typedef struct sched_inv_stream {
    struct sched_tier *t;
    bool busy;      /* a window is assigned */
    bool in_flight; /* its page is on the wire: `records` must stay */
    uint64_t cursor, end;
    uint32_t failures; /* of this window's page, in a row */
    uint8_t *records;  /* inventory_page records (allocated while rebuilding) */
    bus_arrays_t arr;
} sched_inv_stream_t;

typedef struct sched_tier {
    sched_t *self;
    uint32_t idx;
    sched_tier_config_t cfg; /* capacity / slot_size as last announced */
    sched_tier_state_t state;
    uint64_t epoch;
    char endpoint[SCHED_ENDPOINT_MAX];
    char shm[64];
    char ucx_address[64]; /* transport ucx: the tier actor's UCX listener (TierInfo) */
    char host[64];
    /* a gpu tier's device access as announced (TierInfo, schemas/common.proto) */
    uint8_t cuda_ipc_handle[64];
    uint32_t cuda_ipc_handle_len;
    uint8_t gpu_uuid[16];
    uint32_t gpu_uuid_len;
    uint64_t slot_stride;
    uint16_t gen;    /* bumped whenever the engine is reset */
    uint32_t medium; /* kvtier_Medium of its kind (events) */
    tier_slots_t *slots;
    uint32_t *sizes;     /* per slot: block bytes of the committed block */
    uint64_t *checksums; /* per slot */
    bus_client_t *client;
    /* inventory paging: windows of cfg.inventory_page slots from inv_next on, one
     * stream per page in flight (cfg.inventory_in_flight of them) */
    bool inv_active;
    uint64_t inv_next;     /* first slot of the next window to hand out */
    uint32_t inv_failures; /* pages failed during this rebuild */
    uint64_t inv_adopted;
    uint64_t inv_pages;
    int64_t inv_started_ms;
    sched_inv_stream_t inv[SCHED_INV_MAX_IN_FLIGHT];
    /* DeleteSlots queued until the end of the current event */
    uint32_t n_del;
    uint64_t del_slots[SCHED_DEL_BATCH];
    uint8_t del_keys[SCHED_DEL_BATCH][BUS_KEY_LEN];
    uint64_t dropped; /* blocks dropped because the tier went down / changed epoch */
    uint64_t hits;    /* looked-up keys found on this tier (Stats "tier.<name>.hits") */
    /* DELETING blocks (bounded by cfg.max_pending_deletes) */
    uint32_t *del_mark; /* per slot: 1 + index in deleting[], 0 = not deleting */
    sched_deleting_t *deleting;
    uint32_t n_deleting;
    /* the largest write told BUSY lately (a keep tier): room is kept for it, so
     * smaller writes cannot take every freed slot first and starve it */
    uint32_t room_need;    /* its blocks; 0: none */
    uint64_t room_waiter;  /* its request's hash */
    int64_t room_asked_ms; /* its last try; forgotten SCHED_ROOM_HOLD_MS after */
    /* `kvtier drain` (sched_drain.c): kvtier_TierDrain; kept over resets of the
     * tier (a drained tier that comes back stays drained) */
    int drain;
    int64_t drain_started_ms;
    uint64_t drain_moved; /* blocks this drain moved down (switched below) */
} sched_tier_t;

/* The tier set (sched_t.tierset): every tier of the deployment, and the
 * module's own scratch for the tier-plane messages it builds (headers, deletes,
 * inventory, membership from the pipe), max_batch each. */
typedef struct {
    uint32_t n_tiers;
    sched_tier_t tiers[SCHED_MAX_TIERS];
    struct {
        kvtier_Envelope *env;
        uint64_t *slots, *sizes;
        uint8_t (*keys)[16];
        tier_victim_t victims[SCHED_EXPIRE_BATCH]; /* expired blocks of one tick */
        bus_token_entry_t *tok_entries;            /* the scheduler's own admin tokens */
        uint8_t *tok;
        size_t tok_cap;
    } tio;
} sched_tierset_t;

/* A completion embedded in the caller's record (the record is found back from
 * it with offsetof): a header batch's outcome, written = headers confirmed. */
typedef struct sched_header_cb {
    void (*done)(struct sched_header_cb *cb, const kvtier_Status *st, uint32_t written);
} sched_header_cb_t;

/* A batch of SERVING headers for one tier: the entries of a list flagged
 * neither SKIP nor PIN, in list order. */
typedef struct {
    const char *instance_id;
    uint64_t block_bytes;      /* each header's size when sizes is NULL */
    uint64_t deadline_wall_ms; /* 0: none */
    const uint64_t *checksums; /* one per header */
    const uint64_t *sizes;     /* one per header, or NULL */
    sched_header_cb_t *cb;     /* called once, with the tier's answer or the failure */
} sched_headers_t;

/* ---- sched_tiers.c ---- */
int sched_tiers_init(sched_t *self);
void sched_tiers_fini(sched_t *self);
void sched_tier_membership(sched_t *self, const kvtier_TierMembershipRequest *m);
void sched_tier_queue_delete(sched_tier_t *t, uint32_t slot, const tier_key_t *key);
void sched_tiers_flush(sched_t *self);
void sched_tiers_tick(sched_t *self, int64_t now);
void sched_tier_info(sched_t *self, const sched_tier_t *t, kvtier_TierInfo *out);
/* The pool t is a slot of ("": a deployment tier). A slot's cfg.name is "" while
 * it is vacant (no member): listings skip it. */
const char *sched_tier_pool_name(const sched_t *self, const sched_tier_t *t);
static inline bool sched_tier_vacant(const sched_tier_t *t)
{
    return t->cfg.pool && !t->cfg.name[0];
}
/* Is (number, key) at slot marked DELETING (hidden from lookups and pins)? The
 * marks are the tier's (sched_tier_t.del_mark / deleting); reclaim sets them. */
bool sched_is_deleting(const sched_tier_t *t, uint32_t number, const tier_key_t *key,
                       uint32_t slot);
/* Forgets DELETING entry i of t (swapped with the last). */
void sched_deleting_forget(sched_tier_t *t, uint32_t i);
/* A block the engine took back from t (a reservation's victim, an expired one):
 * its removal is recorded, or, when it was DELETING (recorded when it was
 * marked), its mark is dropped, so the DELETING queue holds only marked blocks.
 * Call before anything else is written to v->slot's side arrays. */
void sched_tier_victim(sched_t *self, sched_tier_t *t, const tier_victim_t *v);
/* Fills one token tier entry from the tier's announced identity. */
void sched_tier_token(const sched_tier_t *t, bus_token_tier_t *out);

/* Encodes a token of `kind` naming tiers[0..nt) (entries index into it) and
 * seals it when the scheduler has the cluster secret, expiring ttl_ms from now.
 * 0, or a negative errno (bus_token_encode's, or -ENOSPC from sealing). */
int sched_token_mint(sched_t *self, bus_token_kind_t kind, const sched_tier_t *const *tiers,
                     uint32_t nt, const bus_token_entry_t *entries, uint32_t n, uint64_t ttl_ms,
                     uint8_t *buf, size_t cap, size_t *len);
/* Sends PutHeader(SERVING) for h's entries of `entries` to t; h->cb is called
 * when it is answered. -1 (st set, no callback) when it cannot be sent. */
int sched_tier_put_headers(sched_t *self, sched_tier_t *t, const sched_pool_t *pool,
                           const sched_list_t *entries, const sched_headers_t *h,
                           kvtier_Status *st);
/* Re-sends one block's header (a shared reservation concluded by a failing sharer);
 * id: the instance's id (NULL: nothing is sent). */
void sched_tier_reput_header(sched_t *self, sched_tier_t *t, const char *id, uint32_t number,
                             uint32_t slot, const tier_key_t *key);
/* Rewrites the headers of n SERVING blocks (slots[i] holding keys[which[i]]) with the
 * deadline deadline_ms (the scheduler's clock; sent as wall clock): a touch that
 * extended them, so that an index rebuilt from the tier's inventory keeps it. At
 * most 256 slots a PutHeader; nothing is sent while t is not up or id is NULL. */
void sched_tier_reput_deadlines(sched_t *self, sched_tier_t *t, const char *id,
                                uint64_t deadline_ms, const uint32_t *slots, const tier_key_t *keys,
                                const uint32_t *which, uint32_t n);

#endif
