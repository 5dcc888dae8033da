/* tier_actor_int.h — state shared by the tier actor's two files: tier_actor.c
 * (lifecycle, pipe, loop, dispatch) and tier_actor_serve.c (one handler per
 * tier-plane request). Private to actors/tier_actor*.c: nothing else includes it.
 * All scratch space is allocated at start from the configured bounds, so serving a
 * request allocates only what libzmq and nvme reply buffers need. */
#ifndef KVT_TIER_ACTOR_INT_H
#define KVT_TIER_ACTOR_INT_H

#include "bus_server.h"
#include "tier_actor.h"

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

    /* instance ids seen in PutHeader */
    tier_actor_instance_t *instances;
    uint32_t ninstances, max_instances;

    uint64_t used_slots; /* SERVING, as of the last count */
    tier_actor_stats_t stats;

    zpoller_t *poller;       /* the loop's; copy clients' sockets are added to it */
    tier_actor_copy_t *copy; /* CopySlots in flight */

    zframe_t *sched_peer; /* routing id of the last scheduler-only request (notices) */
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

/* ---- notices to the scheduler (tier_actor_notice.c) ---- */

/* Remembers the peer of REQ as the scheduler to tell, when REQ is a request only a
 * scheduler sends (PutHeader, DeleteSlots, Inventory). */
void tier_actor_notice_peer(tier_actor_self_t *self, const bus_request_t *req);
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
/* Starts a validated CopySlots (dst state already mapped to a header state). 0:
 * accepted, the reply follows (maybe already sent); < 0: refused with st set and
 * nothing done (the caller replies). */
int tier_actor_copy_start(tier_actor_self_t *self, bus_request_t *req, kvtier_Status *st);
/* Runs completions of the destination clients and expires their deadlines; call
 * after every wake-up of the loop. */
void tier_actor_copy_service(tier_actor_self_t *self);
/* Milliseconds until the next copy deadline, -1 when none is in flight. */
int tier_actor_copy_wait_ms(tier_actor_self_t *self);

#endif
