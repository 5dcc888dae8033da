/* tier_actor_int.h — state shared by the tier actor's two files: tier_actor.c
 * (lifecycle, pipe, loop, dispatch) and tier_actor_serve.c (one handler per
 * tier-plane request). Private to actors/tier_actor*.c: nothing else includes it.
 * All scratch space is allocated at start from the configured bounds, so serving a
 * request allocates only what libzmq and nvme reply buffers need. */
#ifndef KVT_TIER_ACTOR_INT_H
#define KVT_TIER_ACTOR_INT_H

#include "bus_server.h"
#include "bus_token_mac.h"
#include "tier_actor.h"
#include "tier_actor_ucx.h"

typedef struct {
    uint32_t hash;
    char id[64]; /* PutHeaderRequest.instance_id bound */
} tier_actor_instance_t;

/* A reply buffer for tiers whose slots are not mapped (no slot_data op): the bytes of one block,
 * referenced by one payload frame per segment; freed by the last frame's free_fn,
 * which may run on a ZeroMQ I/O thread (hence the atomic count). */
typedef struct {
    int refs;
    size_t len;
    uint8_t *data; /* 4096-aligned (O_DIRECT without a bounce) */
} tier_actor_rbuf_t;

/* A request's slot (or source and destination slot) and its index, sorted
 * (tier_actor_auth.c). */
typedef struct {
    uint64_t a, b;
    uint32_t i;
} tier_actor_pair_t;

/* CopySlots state (tier_actor_copy.c): copies in flight, destination clients. */
typedef struct tier_actor_copy tier_actor_copy_t;

typedef struct tier_actor_self {
    zsock_t *pipe;
    tier_t *tier;
    bus_server_t *server;
    bool terminated;

    /* identity */
    uint32_t tier_id;
    char name[TIER_NAME_MAX];
    char host[64];
    uint64_t epoch;
    tier_desc_t desc; /* the backend's (tier_describe at start) */

    /* bounds */
    uint32_t max_slots;
    uint64_t max_bytes;
    uint32_t max_frames; /* reply frames: min(max_slots * TIER_MAX_IOV, BUS_MAX_ARRAY) */
    bool verify_put;
    bool verify_reads;
    /* A mapped tier (host, remote): one bit per slot, set when WriteSlots put bytes
     * into it over the network (frames or a UCX region), cleared by the slot's next
     * header. A SERVING header of a slot with the bit set is checked against its
     * bytes whatever verify_put says (issue 12 §4: every block that arrives over the
     * network is verified); bytes a same-host writer copied in never left memory.
     * NULL for an unmapped backend (it checks its own, tier.h). */
    uint8_t *net_written;

    /* per-request scratch, sized from the bounds */
    bus_request_t req;
    bus_arrays_t *arr;    /* request arrays (protocol bound) */
    bus_arrays_t rep_arr; /* reply arrays: sizes and mask point below */
    uint64_t *rep_sizes;  /* max_frames */
    bool *rep_mask;       /* max_slots */
    kvtier_Envelope rep;
    bus_payload_t *payload;   /* max_frames */
    uint64_t *block_size;     /* max_slots: bytes per slot of the current request */
    uint64_t *block_sum;      /* max_slots: its header's checksum (ReadSlots replies carry it) */
    tier_actor_rbuf_t **bufs; /* max_slots */
    tier_io_t *gets;          /* max_slots */
    struct iovec *get_iov;    /* max_slots */
    uint8_t *inv_records;     /* Inventory records of one page (grown to the largest asked) */
    size_t inv_records_cap;

    /* instance ids seen in PutHeader */
    tier_actor_instance_t *instances;
    uint32_t ninstances, max_instances;

    uint64_t used_slots; /* SERVING, as of the last count */
    tier_actor_stats_t stats;

    /* Inventory only for these CURVE keys (tier_actor_config_t.meta_keys_only) */
    bool meta_keys_only;
    uint32_t n_meta_keys;
    char (*meta_keys)[BUS_CURVE_KEY_TXT];
    uint64_t inventory_refused; /* logged at the first and every 1000th */

    /* tokens (tier_actor_auth.c): on when the actor has the cluster secret */
    bool auth;
    bus_token_key_t key;
    uint32_t clock_skew_ms;
    uint64_t leader_seen;     /* highest leader epoch of a token that verified */
    tier_refusal_t refusal;   /* the reason of the check under way (counted if it fails) */
    tier_actor_pair_t *pairs; /* max_slots */
    uint64_t *grant;          /* max_slots: 1 + the size a request's slot is granted, 0: none */

    zpoller_t *poller;       /* the loop's; copy clients' sockets are added to it */
    tier_actor_copy_t *copy; /* CopySlots in flight */

    zframe_t *sched_peer; /* routing id of the last scheduler-only request (notices) */

    tier_actor_ucx_t *ucx; /* transport ucx (tier_actor_ucx.c); NULL: frames only */
    int ucx_wait_ms;       /* the loop's wait bound it asks for (-1: none) */
} tier_actor_self_t;

/* Serves one decoded request (a reply is always sent). tier_actor_serve.c */
void tier_actor_serve(tier_actor_self_t *self, bus_request_t *req);

/* Fills st with code and "tier NAME: " + the formatted message; returns -code. */
int tier_actor_fail(tier_actor_self_t *self, kvtier_Status *st, bus_code_t code, const char *fmt,
                    ...) __attribute__((format(printf, 4, 5)));

/* Counts SERVING slots (one header read per slot) into self->used_slots. */
void tier_actor_count_used(tier_actor_self_t *self);

/* A block buffer whose payload frames free it (refs set by the caller, one per
 * frame); tier_actor_rbuf_unref is their bus_free_fn. tier_actor_serve.c */
tier_actor_rbuf_t *tier_actor_rbuf_new(uint64_t len);
void tier_actor_rbuf_unref(void *data, void *hint);

/* The instance id string stored for hash: the remembered string, "#xxxxxxxx", or
 * "" for 0. tier_actor_serve.c */
void tier_actor_instance_name(tier_actor_self_t *self, uint32_t hash, char *out, size_t len);

/* ---- tokens (tier_actor_auth.c) ---- */

typedef enum {
    TIER_AUTH_READ = 0,
    TIER_AUTH_WRITE,
    TIER_AUTH_HEADER,
    TIER_AUTH_DELETE,
    TIER_AUTH_COPY,
    TIER_AUTH_COUNT
} tier_actor_access_t;

/* One request's grant: on = a token was checked (the actor has the secret). */
typedef struct {
    bool on;
    bus_token_view_t view;   /* entries point into token */
    const bus_blob_t *token; /* the request's token bytes (its arrays' payload) */
    uint16_t here;           /* this tier's index in view.tiers */
    uint16_t dst;            /* CopySlots: the destination's index */
    uint32_t first, end;     /* the entries that grant this access: all of them, but a
                                get+put token's [0, n_get) to read, [n_get, n) to write */
} tier_actor_grant_t;

/* Key and scratch from cfg (nothing when cfg->secret is NULL), and the keys an
 * Inventory is served to; -1 (why filled). */
int tier_actor_auth_init(tier_actor_self_t *self, const tier_actor_config_t *cfg, char *why,
                         size_t len);
void tier_actor_auth_fini(tier_actor_self_t *self);
/* Checks the token of a request for `access` (dst_tier_id: CopySlots' destination)
 * into g; 0 and g->on false when tokens are off. < 0 with st set: refused. */
int tier_actor_auth(tier_actor_self_t *self, tier_actor_access_t access, const bus_blob_t *tok,
                    uint32_t dst_tier_id, tier_actor_grant_t *g, kvtier_Status *st);
/* Every slots->v[i] is a token entry on this tier (with sizes: sizes[i] at most
 * the entry's size). */
int tier_actor_auth_slots(tier_actor_self_t *self, const tier_actor_grant_t *g,
                          const bus_u64s_t *slots, const uint64_t *sizes, const char *what,
                          kvtier_Status *st);
/* meta_keys_only: REQ came on a connection whose CURVE key may list the tier
 * (what: the request's name). 0, or -1 with st PERMISSION_DENIED naming the key. */
int tier_actor_auth_meta(tier_actor_self_t *self, const bus_request_t *req, const char *what,
                         kvtier_Status *st);
/* Every (src->v[i], dst->v[i]) is a token entry from this tier to g->dst. */
int tier_actor_auth_pairs(tier_actor_self_t *self, const tier_actor_grant_t *g,
                          const bus_u64s_t *src, const bus_u64s_t *dst, kvtier_Status *st);

/* ---- notices to the scheduler (tier_actor_notice.c) ---- */

/* Remembers the peer of REQ as the scheduler to tell: called once a request only a
 * scheduler sends has passed its checks. With tokens on, only a PutHeader or
 * DeleteSlots under an admin token (the scheduler's own: a copy token comes from a
 * tier actor) qualifies (G: its grant); with tokens off (G NULL or off), those and an
 * Inventory do. */
void tier_actor_notice_peer(tier_actor_self_t *self, const bus_request_t *req,
                            const tier_actor_grant_t *g);
/* Tells the scheduler at once that SLOT (which held KEY, 16 bytes) was dropped for
 * CAUSE: a TierNotice with corr_id 0 (issue 12 §4). Best effort: counted as
 * unnoticed when no scheduler is known or the send fails (the gc still finds it). */
void tier_actor_notice_dropped(tier_actor_self_t *self, uint64_t slot, const uint8_t *key,
                               const char *cause);

/* ---- CopySlots (tier_actor_copy.c) ---- */

/* Allocates the copy state from cfg's bounds; -1 (why filled) on failure. */
int tier_actor_copy_new(tier_actor_self_t *self, const tier_actor_config_t *cfg, char *why,
                        size_t len);
/* Drops copies in flight (no replies) and closes the destination clients. */
void tier_actor_copy_destroy(tier_actor_self_t *self);
/* Slots one copy may carry. */
uint32_t tier_actor_copy_max_slots(tier_actor_self_t *self);
/* Starts a validated CopySlots (dst state already mapped to a header state) to
 * dst_ep (the token's destination endpoint, or the request's when tokens are off),
 * forwarding the request's token (may be empty) with the copy's own requests. 0:
 * accepted, the reply follows (maybe already sent); < 0: refused with st set and
 * nothing done (the caller replies). */
int tier_actor_copy_start(tier_actor_self_t *self, bus_request_t *req, const char *dst_ep,
                          const bus_blob_t *token, kvtier_Status *st);
/* Runs completions of the destination clients and expires their deadlines; call
 * after every wake-up of the loop. */
void tier_actor_copy_service(tier_actor_self_t *self);
/* Milliseconds until the next copy deadline, -1 when none is in flight. */
int tier_actor_copy_wait_ms(tier_actor_self_t *self);

#endif
