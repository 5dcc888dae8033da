/* tier_actor.h — the tier actor (DESIGN.md §3, §4, §7): a czmq actor that owns one
 * tier of any registered kind (tiers/tier.h: it reaches the medium only through the
 * ops table) and serves the tier plane
 * (schemas/tier.proto) on a ROUTER (bus/bus_server.h): write and read slot bytes as
 * payload frames, put slot headers, delete, probe, inventory. It holds the bytes and
 * the slot headers and nothing else: it never knows etcd, the scheduler's index or
 * the instance registry, and it never serves bytes whose header is not SERVING.
 *
 * Blocking: nvme reads and writes run inside this actor's thread. That is accepted
 * here (STYLE.md §2) because the actor serves only its own tier: no other actor's
 * loop waits on it, and every peer waits on its reply with a timeout.
 *
 * Wire rules (what peers may rely on):
 * - Every reply carries a status; errors name the tier and what to change
 *   ("tier host0: slot 812 out of range (capacity 800)"). A reply to WriteSlots,
 *   PutHeader or DeleteSlots carries its body (the count applied) even when the
 *   status is not OK. Input that does not decode is answered INVALID_ARGUMENT by
 *   bus_server and never reaches a handler.
 * - tier_id 0 in a request means "this tier"; any other id must be this tier's
 *   (INVALID_ARGUMENT). epoch (WriteSlots, ReadSlots, PutHeader, DeleteSlots) is a
 *   fence: 0 means any, else it must be this actor's epoch (tier_actor_epoch);
 *   otherwise UNAVAILABLE and nothing is applied (the actor restarted: locations
 *   placed on its earlier incarnation are gone).
 * - Tokens (cfg.secret set; tier_actor_auth.c, docs/SECURITY.md): WriteSlots needs
 *   a put or copy token, ReadSlots a get token, PutHeader and DeleteSlots an admin
 *   or copy token, CopySlots a copy token; the token must verify under the
 *   cluster's key, name this tier with this actor's epoch (0 grants nothing: the
 *   request's own epoch no longer matters), be unexpired and not from a leader
 *   epoch below the highest seen, and list every requested slot (writes and
 *   headers: a size at most the entry's). Otherwise PERMISSION_DENIED (EXPIRED,
 *   or UNAVAILABLE for another epoch of this tier) and nothing is applied. Probe
 *   and Inventory are read-only metadata and take no token.
 * - Bounds per request: at most cfg.max_slots slots and cfg.max_bytes payload bytes
 *   (written or read), at most TIER_MAX_IOV segments per slot; over a bound the
 *   request is refused whole with INVALID_ARGUMENT and nothing is applied. Frames
 *   larger than max(slot size, BUS_MAX_FRAME0) make libzmq drop the connection
 *   (ZMQ_MAXMSGSIZE) instead of being buffered.
 * - Every request is validated whole before anything is applied. A failure while
 *   applying (an I/O error) stops at that slot: the status says which one and the
 *   reply's count says how many were applied before it.
 * - WriteSlots: slot i gets frames i*segments .. i*segments+segments-1 gathered in
 *   order (one block = one iovec). Before the bytes, the slot's header becomes
 *   WRITING (key zero), so a block evicted for this write is never served again
 *   (the backend's write op does it, tier.h).
 * - ReadSlots: only SERVING slots are read; a slot that is not, or whose key differs
 *   from keys[i] when keys are given, makes the request NOT_FOUND. Without sizes
 *   each slot is one frame of its stored size (segments must then be 0 or 1); with
 *   sizes (one per frame) a slot's sizes must add up to its stored size. An nvme
 *   checksum failure is INTERNAL (the slot is dropped by the backend; no bytes are
 *   sent).
 * - PutHeader: keys and sizes one per slot; checksums one per slot or none (a tier
 *   whose slots are mapped, tier_slot_data: the actor computes them from the
 *   mapped bytes; others: the backend's own). state
 *   must be WRITING, SERVING or DELETING (NONE is refused: use DeleteSlots). nvme
 *   accepts SERVING only for bytes written through this actor since it started,
 *   with the same size (NOT_FOUND / INVALID_ARGUMENT otherwise), and a given
 *   checksum must match the bytes (CONFLICT).
 * - DeleteSlots: the header becomes EMPTY; with keys, only where the stored key
 *   matches (WRITING headers carry key zero, so they never match). deleted counts
 *   the headers that changed.
 * - Probe: present[i] = SERVING and (no keys, or the key matches).
 * - Inventory: SERVING slots from `cursor` in slot order, before `end` (0: the
 *   capacity; a non-zero end at or below cursor: INVALID_ARGUMENT), at most
 *   max_entries (entries: 0 or more than 128 means 128; with `records`, 56-byte
 *   records in InventoryReply.records instead: 1..BUS_MAX_INVENTORY_RECORDS, 0 means
 *   all of them, more is INVALID_ARGUMENT; the buffer grows to the largest page asked
 *   and is kept) and at most TIER_ACTOR_INVENTORY_SCAN slots scanned per page; pass
 *   next_cursor back until done (no slot of [cursor, end) after the page). tier
 *   (TierInfo) carries id, name, kind,
 *   endpoint, host, capacity, slot size, shm name (tiers with shm access, from tier_describe),
 * epoch and up = true; its used_slots is counted on the page with cursor 0 and repeated on later
 * pages.
 * - CopySlots (issue 4 §2; the migrator's request): copies SERVING blocks of this
 *   tier, bytes and headers, to another tier actor, tier to tier: with tokens, the
 *   one the copy token's tier table names for dst_tier_id (a dst_endpoint in the
 *   request must be empty or that one, else PERMISSION_DENIED), and the token goes
 *   with the copy's WriteSlots / PutHeader / DeleteSlots; without, dst_endpoint.
 *   keys and dst_slots are required, one per slot; dst_state is WRITING, SERVING or
 *   DELETING; at most cfg.copy_max_slots slots and cfg.max_bytes bytes per copy
 *   (INVALID_ARGUMENT otherwise, nothing done). Per slot: the source header must be
 *   SERVING with keys[i] and its bytes must read back with their checksum (the
 *   unchanged-source check); then WriteSlots and PutHeader(dst_state, key, size,
 *   checksum, deadline, instance) go to the destination over a client the actor
 *   owns (one per destination endpoint, cfg.copy_max_dests cached, the idle one
 *   used longest ago is closed at the bound). After the destination answered, the
 *   source header must still be SERVING with the same key, size and checksum; a
 *   slot whose source changed meanwhile fails and its destination copy is deleted
 *   again (DeleteSlots with the key). The reply is sent when all that is done,
 *   while the actor keeps serving: success[i] per slot, copied = successes. Its
 *   status is OK when the destination answered everything it was sent, else the
 *   destination's failure ("copy to EP: ...": TIMEOUT after cfg.copy_timeout_ms for
 *   the whole copy, UNAVAILABLE, or the destination's own status), with the body
 *   present either way. A destination that timed out has its client closed (its
 *   queued requests are dropped, never delivered late). At most
 *   cfg.copy_max_in_flight copies and cfg.max_bytes bytes are in flight: beyond,
 *   or when every cached destination is busy, UNAVAILABLE (retry later) and
 *   nothing is done. A block's instance goes to the destination as its id string
 *   when this actor knows it, else as "#xxxxxxxx" (below).
 *
 * Instance ids: a slot header stores a uint32 (tier_slot_header_t.instance), the
 * wire carries the string. The actor stores tier_actor_instance_hash(instance_id)
 * and remembers up to cfg.max_instances strings it was given; Inventory reports the
 * remembered string, or "#" followed by 8 lowercase hex digits of the hash when it
 * does not know it (nvme blocks written before a restart): match those by hashing
 * the registered instance ids. Two ids with the same hash are refused (CONFLICT).
 * A PutHeader instance_id of exactly "#" and 8 lowercase hex digits (not 0) stores
 * that hash as given (how a copy carries an instance whose string it lacks).
 *
 * Pipe protocol (besides "$TERM"): "ENDPOINT" -> one string frame, the bound
 * endpoint; "EPOCH" -> picture "8", the tier epoch; "DESCRIBE" -> picture "b", a
 * tier_desc_t; "STATS" -> picture "b", a tier_actor_stats_t (same process only). The wrappers below
 * speak it. */
#ifndef KVT_TIER_ACTOR_H
#define KVT_TIER_ACTOR_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

#include "bus_curve.h"
#include "bus_limits.h"
#include "tier.h"

#define TIER_ACTOR_DEFAULT_MAX_SLOTS 4096u
#define TIER_ACTOR_DEFAULT_MAX_BYTES (256ull << 20)
#define TIER_ACTOR_DEFAULT_MAX_INSTANCES 256u
#define TIER_ACTOR_INVENTORY_PAGE BUS_MAX_INVENTORY_PAGE /* InventoryReply.entries */
#define TIER_ACTOR_INVENTORY_SCAN 65536u                 /* slots looked at per Inventory page */
#define TIER_ACTOR_ENDPOINT_MAX 256
#define TIER_ACTOR_DEFAULT_COPY_IN_FLIGHT 8u
#define TIER_ACTOR_DEFAULT_COPY_SLOTS 256u
#define TIER_ACTOR_DEFAULT_COPY_DESTS 8u
#define TIER_ACTOR_DEFAULT_COPY_TIMEOUT_MS 5000u
#define TIER_ACTOR_DEFAULT_CLOCK_SKEW_MS 5000u
#define TIER_ACTOR_MAX_META_KEYS 288u /* meta_keys_only: the keys allowed an Inventory */

typedef struct {
    tier_config_t tier; /* what to open: any registered kind, its options included */
    uint32_t tier_id;   /* 1 + index in the deployment's "tiers"; 0 is refused */
    /* ROUTER bind: tcp://ADDR:PORT (tcp://127.0.0.1:* picks a port), ipc://PATH,
     * inproc://NAME. Read the bound one back with tier_actor_endpoint. */
    const char *endpoint;
    uint32_t max_slots;     /* per request; 0: default; at most BUS_MAX_ARRAY */
    uint64_t max_bytes;     /* payload bytes per request; 0: default */
    uint32_t max_instances; /* instance id strings remembered; 0: default */
    /* connections the ROUTER keeps open; one accepted past it is closed at once
     * (bus_server_set_max_connections); 0: BUS_MAX_CONNECTIONS */
    uint32_t max_connections;
    /* mapped tiers (host): recompute each block's checksum at PutHeader(SERVING) and refuse a
     * mismatch (CONFLICT). Costs one pass over the bytes; off by default. */
    bool verify_put;
    /* backends whose reads are not verified by the backend itself (tier_desc_t
     * reads_verified false: host): check each block served by ReadSlots against its
     * header's checksum before it is sent, and refuse a mismatch (INTERNAL). One
     * pass over the bytes; off by default (those bytes never left memory). Also on
     * when the backend says so (tier_desc_t verify_reads: the host tier's
     * verify_reads option). */
    bool verify_reads;
    const char *host; /* TierInfo.host; NULL: bus_host_identity(NULL) */
    /* CopySlots bounds; 0: the TIER_ACTOR_DEFAULT_COPY_* values. copy_max_slots is
     * at most max_slots. copy_timeout_ms bounds a whole copy (every destination
     * round trip of it). */
    uint32_t copy_max_in_flight; /* copies in flight */
    uint32_t copy_max_slots;     /* slots per copy */
    uint32_t copy_max_dests;     /* destination clients kept */
    uint32_t copy_timeout_ms;
    /* Tokens (docs/SECURITY.md): with the cluster secret (BUS_SECRET_BYTES, copied
     * at start) every WriteSlots, ReadSlots, PutHeader, DeleteSlots and CopySlots
     * needs a token the scheduler sealed for `cluster`, this tier and this epoch.
     * NULL: no token is checked, the request's epoch is the only fence — for
     * in-process tests; the tier process (kvtier tier) never starts without one. */
    const uint8_t *secret;
    const char *cluster;
    uint32_t clock_skew_ms; /* wall clocks of scheduler and tier agree within; 0: default */
    /* Per-instance isolation (security.curve.instances, docs/SECURITY.md): an
     * Inventory lists every instance's keys, so with meta_keys_only it is served
     * only to a connection whose CURVE key is one of meta_keys[0..n_meta_keys)
     * (the coordinators' key and the keys granted "*"; copied at start, at most
     * TIER_ACTOR_MAX_META_KEYS); anyone else gets PERMISSION_DENIED naming the key. */
    bool meta_keys_only;
    uint32_t n_meta_keys;
    const char (*meta_keys)[BUS_CURVE_KEY_TXT];
} tier_actor_config_t;

/* Why a tier actor refused a request's token (docs/SECURITY.md): no token, a
 * malformed one, a MAC that does not verify (or none), a kind that does not open
 * the access, expired, minted by an older leader (fenced: a newer leader has
 * raised this actor's fence since), for another tier or incarnation, or not
 * granting the request's slots or sizes. */
typedef enum {
    TIER_REFUSAL_MISSING = 0,
    TIER_REFUSAL_MALFORMED,
    TIER_REFUSAL_MAC,
    TIER_REFUSAL_KIND,
    TIER_REFUSAL_EXPIRED,
    TIER_REFUSAL_OLD_LEADER,
    TIER_REFUSAL_TIER,
    TIER_REFUSAL_GRANT,
    TIER_REFUSAL_COUNT
} tier_refusal_t;

typedef struct {
    uint64_t requests;      /* requests handled (reached a handler) */
    uint64_t errors;        /* handled requests answered with a non-OK status */
    uint64_t rejected;      /* input bus_server refused before any handler */
    uint64_t slots_written; /* WriteSlots slots written */
    uint64_t bytes_written;
    uint64_t slots_read; /* ReadSlots slots sent */
    uint64_t bytes_read;
    uint64_t headers_put;   /* PutHeader headers written */
    uint64_t slots_deleted; /* DeleteSlots headers emptied */
    uint64_t probes;        /* slots probed */
    uint64_t inventory_pages;
    uint64_t checksum_failures;  /* reads refused for a bad checksum (nvme, verify_reads, copies) */
    uint64_t capacity;           /* slots */
    uint64_t used_slots;         /* SERVING slots, counted when STATS is asked */
    uint64_t copies;             /* CopySlots accepted (replied once done) */
    uint64_t copies_refused;     /* CopySlots refused at the in-flight bounds */
    uint64_t slots_copied;       /* slots a copy reported successful */
    uint64_t copy_slot_failures; /* slots a copy reported failed */
    uint64_t drops_noticed;      /* dropped slots told to the scheduler (TierNotice) */
    uint64_t drops_unnoticed;    /* dropped slots no scheduler was known to tell */
    uint64_t tokens_refused;     /* requests refused for their token (cfg.secret set) */
    uint64_t refusals[TIER_REFUSAL_COUNT]; /* tokens_refused by reason (tier_refusal_name) */
    uint64_t leader_seen; /* highest leader epoch of a token that verified (the fence) */
    /* transport ucx (also counted in slots/bytes written and read above) */
    uint64_t ucx_bytes_written; /* WriteSlots bytes taken from UCX staging regions */
    uint64_t ucx_bytes_read;    /* ReadSlots bytes placed in UCX staging regions */
    uint64_t ucx_regions_granted;
    uint64_t ucx_copy_bytes; /* CopySlots bytes this actor put into a destination over UCX */
    /* mapped tiers: SERVING headers of blocks that arrived over the network, checked
     * against their bytes (a mismatch is CONFLICT and counts in checksum_failures) */
    uint64_t arrivals_verified;
} tier_actor_stats_t;

/* Why a token was refused: kvtier_tier_actor_token_refusals_total{reason}. */
const char *tier_refusal_name(tier_refusal_t r);

/* Starts the actor: opens the tier, binds the endpoint. NULL (after logging why)
 * when the config is invalid, the tier does not open, or the bind fails. */
zactor_t *tier_actor_new(const tier_actor_config_t *cfg);

/* The bound endpoint into buf. 0, or -1 when the actor does not answer. */
int tier_actor_endpoint(zactor_t *actor, char *buf, size_t len);

/* The tier epoch: the backend's (tier_describe: a host tier reports its shm
 * segment's epoch, what a same-host client reads with tier_seg_epoch); a backend
 * without one gets a random u64 drawn at open. A restarted actor has a new one.
 * 0 when the actor does not answer. */
uint64_t tier_actor_epoch(zactor_t *actor);

/* The backend's description (epoch, same-host access descriptor, detail) into
 * out. 0, or -1 when the actor does not answer. */
int tier_actor_describe(zactor_t *actor, tier_desc_t *out);

/* The device access of a description (a gpu tier's CUDA IPC handle, GPU UUID and
 * slot stride) into the TierInfo a cluster announces (schemas/common.proto): left
 * empty for other kinds. The shm name is filled by the callers, as before. */
struct _kvtier_TierInfo;
void tier_actor_info_access(const tier_desc_t *d, struct _kvtier_TierInfo *out);

/* Counters (see tier_actor_stats_t). 0, or -1 when the actor does not answer. */
int tier_actor_stats(zactor_t *actor, tier_actor_stats_t *out);

/* The uint32 stored in slot headers for an instance id: tier_instance_hash
 * (tiers/tier_key.h), the one instance hash. */
uint32_t tier_actor_instance_hash(const char *instance_id);

#endif
