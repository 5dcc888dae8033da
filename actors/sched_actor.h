/* sched_actor.h — the scheduler actor (DESIGN.md §3, §4, §6, §8): the heart of the
 * meta plane. It binds the meta endpoint (a ROUTER served with bus_server) and
 * answers every meta-plane request of schemas/meta.proto plus AdminStatus; it owns
 * the instance registry, the open requests and their windows, and one slot engine
 * per tier (tiers/tier_slots.h), which is the block index. It talks to each tier
 * actor through one async bus_client (PutHeader before a block serves, DeleteSlots
 * when one is dropped, Inventory to rebuild the index).
 *
 * Runs only in the leader coordinator; everything happens on the actor's thread:
 * no locks, nothing blocking, no allocation per request (arrays are sized at start
 * from the bounds below; only tier membership changes allocate).
 *
 * Pipe protocol:
 *   "$TERM"      stop (czmq actor contract)
 *   "ENDPOINT"   -> one string frame: the bound meta endpoint ("tcp://127.0.0.1:41234")
 *   "INTERNAL"   -> one string frame: the bound internal-plane endpoint (gc, reclaimer)
 *   an encoded Envelope with a TierMembershipRequest body (see sched_actor_tier_change):
 *                ADDED/UPDATED = the tier actor is up (endpoint, shm, host, epoch,
 *                capacity, slot size); REMOVED = it is gone. No reply.
 * Bad pipe input is logged and dropped.
 *
 * Rules a client can rely on are documented in docs/SCHEDULER.md (window protocol,
 * lookup modes, leases, tier membership); this header holds the API only. */
#ifndef KVT_SCHED_ACTOR_H
#define KVT_SCHED_ACTOR_H

#include <czmq.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "bus_curve.h"
#include "bus_limits.h"
#include "bus_token_mac.h"
#include "common.pb.h"

#define SCHED_MAX_TIERS BUS_MAX_TIERS /* ClusterInfoReply.tiers, token tier table */
#define SCHED_MAX_CHAINS 8
#define SCHED_CHAIN_MAX_TIERS SCHED_MAX_TIERS /* positions: a pool level is all its slots */
#define SCHED_MAX_POOLS 8
#define SCHED_NAME_MAX BUS_TIER_NAME_MAX /* tier / chain name, NUL included */
#define SCHED_KIND_MAX BUS_TIER_KIND_MAX
#define SCHED_POLICY_MAX 16
#define SCHED_CLUSTER_MAX BUS_CLUSTER_MAX
#define SCHED_NODE_MAX 64
#define SCHED_ENDPOINT_MAX 256
#define SCHED_MAX_CAPACITY (1ull << 31)        /* slots per tier (slot engine bound) */
#define SCHED_MAX_QUOTAS 64                    /* quota entries (cfg.quotas) */
#define SCHED_INSTANCE_MAX BUS_INSTANCE_ID_MAX /* bytes of an instance id, NUL included */
#define SCHED_INV_PAGE_DEFAULT 16384u  /* slots per inventory window (one page of records) */
#define SCHED_INV_IN_FLIGHT_DEFAULT 4u /* inventory pages in flight per tier */
#define SCHED_INV_MAX_IN_FLIGHT 16u

/* Latency of the meta-plane calls, measured per call kind around the handler on
 * the scheduler's thread (a reply deferred to a tier's answer is timed until the
 * handler returned). Fixed buckets: upper bounds in microseconds; a detail
 * StatsRequest lists per call "lat.<call>.b<i>" (i = 0..SCHED_LAT_BUCKETS, the last
 * one above the last bound; not cumulative), "lat.<call>.count", ".sum_us". */
#define SCHED_LAT_BUCKETS 12
#define SCHED_LAT_BOUNDS_US                                                                        \
    {                                                                                              \
        10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 100000                          \
    }
#define SCHED_LAT_CALLS 18
/* The call kinds in the order of their counters: names as in "lat.<call>.*". */
extern const char *const sched_lat_call_names[SCHED_LAT_CALLS];

/* The lease word (sched_config_t.lease_until_ms): bits 63..40 hold the low 24
 * bits of the leader epoch the bound belongs to, bits 39..0 the bound (a
 * zclock_mono ms: 2^40 ms is 34 years of uptime). One 64-bit word, so the
 * elector changes epoch and bound together with one compare-and-swap. Two terms
 * 2^24 etcd revisions apart share a tag: a scheduler is stopped on LOST long
 * before that many revisions pass. */
#define SCHED_LEASE_UNTIL_BITS 40
#define SCHED_LEASE_UNTIL_MASK ((UINT64_C(1) << SCHED_LEASE_UNTIL_BITS) - 1)
#define SCHED_LEASE_STEPPED_DOWN 1 /* the until of a term whose leader stepped down */

static inline int64_t sched_lease_word(uint64_t epoch, int64_t until)
{
    uint64_t u = until < 0 ? 0 : (uint64_t)until & SCHED_LEASE_UNTIL_MASK;
    return (int64_t)((epoch << SCHED_LEASE_UNTIL_BITS) | u);
}

static inline uint64_t sched_lease_word_epoch(int64_t word)
{
    return (uint64_t)word >> SCHED_LEASE_UNTIL_BITS;
}

static inline int64_t sched_lease_word_until(int64_t word)
{
    return (int64_t)((uint64_t)word & SCHED_LEASE_UNTIL_MASK);
}

typedef struct {
    uint32_t tier_id; /* 1 + index in the deployment's "tiers"; tiers[i].tier_id == i + 1 */
    char name[SCHED_NAME_MAX];
    char kind[SCHED_KIND_MAX];     /* "host", "nvme", "gpu", "remote" */
    char policy[SCHED_POLICY_MAX]; /* slot engine policy; "" = "lru" */
    uint64_t capacity;             /* slots (the tier's registration may change it) */
    uint64_t slot_size;            /* bytes per slot (idem) */
    /* a tier with a next tier reclaimed on demand (deployment tiers[i].reclaim
     * "on_demand"): a write that finds it full has exactly what it needs demoted,
     * none ahead (false: its need and a sixteenth of the tier more) */
    bool room_on_demand;
    /* A slot of a pool (issue 9 §3, docs/SCHEDULER.md "Pools"): 1 + the index in
     * sched_config_t.pools; 0: a tier of the deployment. A slot is vacant (name
     * "", DOWN) until a member announces itself with its id, and vacant again once
     * it leaves; capacity here is the pool's default (a member announces its own). */
    uint32_t pool;
} sched_tier_config_t;

/* A pool: its slots are tier ids first_id .. first_id + max_members - 1, in the
 * table like any tier; a chain that names the pool lists all of them, in order,
 * at the pool's position (one level: new blocks go to one member of it). */
typedef struct {
    char name[SCHED_NAME_MAX];
    uint32_t first_id;
    uint32_t max_members;
} sched_tier_pool_config_t;

/* A per-instance quota (soft, enforced by the reclaimer; docs/SCHEDULER.md
 * "Quotas"): at least one limit > 0; 0 = that limit is not set. */
typedef struct {
    char instance[SCHED_INSTANCE_MAX]; /* an instance id, or "*": instances without their own */
    uint64_t max_blocks;               /* locations over all tiers */
    uint64_t max_bytes;                /* locations x the instance's bytes_per_block */
} sched_quota_config_t;

/* Where a promoted block lives (docs/SCHEDULER.md "Chains"): EXCLUSIVE moves it
 * (complete_prefetch frees the lower copy once the head copy commits and no reader
 * holds the lower one: one copy per block, the chain holds as many distinct blocks
 * as it has slots); INCLUSIVE copies it (the lower copy stays: a later demotion of
 * the head copy only drops it). 0 in a config means SCHED_PLACEMENT_DEFAULT. */
typedef enum {
    SCHED_PLACEMENT_EXCLUSIVE = 1,
    SCHED_PLACEMENT_INCLUSIVE = 2,
} sched_placement_t;
#define SCHED_PLACEMENT_DEFAULT SCHED_PLACEMENT_EXCLUSIVE

typedef struct {
    char name[SCHED_NAME_MAX];
    uint32_t n_tiers;
    uint32_t tier_ids[SCHED_CHAIN_MAX_TIERS]; /* head first */
    uint32_t placement;                       /* sched_placement_t; 0: the default */
    /* Routing by TTL or length (sched_route_config_t): this chain (a branch)
     * takes the requests whose fact is above `above` (ttl_ms, or total_blocks)
     * and that no branch before it took. Unused (0) on the fallback branch and
     * without such a router. */
    uint64_t above;
} sched_chain_config_t;

/* How a request is routed to a branch (one chain) at request_begin
 * (actors/sched_route.h, docs/SCHEDULER.md "Branches"; UCM's StorePeer): a pure
 * function of the request's facts (instance, ttl_ms, total_blocks), so a request
 * begun again after a failover lands on the same branch. NONE: every request on
 * chain 0 (the flat "chains" form). TTL / LENGTH: the first chain in order, the
 * fallback skipped, whose `above` its ttl_ms / total_blocks exceeds, the bounds
 * strictly decreasing; a request without the fact (0) or below every bound goes
 * to the fallback. INSTANCE: the chain listing the request's instance in
 * `instances`, others to the fallback. */
typedef enum {
    SCHED_ROUTE_NONE = 0,
    SCHED_ROUTE_TTL = 1,
    SCHED_ROUTE_LENGTH = 2,
    SCHED_ROUTE_INSTANCE = 3,
} sched_route_kind_t;

#define SCHED_ROUTE_MAX_INSTANCES 64 /* instance entries of an INSTANCE router */

typedef struct {
    char instance[SCHED_INSTANCE_MAX];
    uint32_t chain; /* index in chains[], not the fallback */
} sched_route_instance_t;

typedef struct {
    uint32_t kind;     /* sched_route_kind_t */
    uint32_t fallback; /* chain index: requests no other branch takes (any kind but NONE) */
    uint32_t n_instances;
    sched_route_instance_t instances[SCHED_ROUTE_MAX_INSTANCES]; /* INSTANCE only */
} sched_route_config_t;

/* One grant of per-instance isolation (docs/SECURITY.md "Isolation"): the CURVE
 * client key KEY may act on INSTANCE ("*": on every instance). */
#define SCHED_ACL_MAX 256
typedef struct {
    char instance[SCHED_INSTANCE_MAX];
    char key[BUS_CURVE_KEY_TXT]; /* Z85 */
} sched_acl_entry_t;

typedef struct {
    char cluster[SCHED_CLUSTER_MAX];
    char node_name[SCHED_NODE_MAX];    /* AdminStatus.node_id */
    char endpoint[SCHED_ENDPOINT_MAX]; /* meta endpoint to bind ("tcp://127.0.0.1:*" ok) */
    /* What ClusterInfo reports as the leader endpoint; "" = the bound endpoint. */
    char advertised_endpoint[SCHED_ENDPOINT_MAX];
    char event_endpoint[SCHED_ENDPOINT_MAX];        /* ClusterInfo.event_endpoint; may be "" */
    char event_replay_endpoint[SCHED_ENDPOINT_MAX]; /* ClusterInfo.*: "" = none */
    char vllm_event_endpoint[SCHED_ENDPOINT_MAX];
    char vllm_replay_endpoint[SCHED_ENDPOINT_MAX];
    uint64_t leader_epoch;
    /* The term before this one (coord_elector's previous_epoch), told in this
     * term's LeaderChanged (DESIGN.md §13); 0: none or unknown. */
    uint64_t previous_epoch;
    /* The etcd cluster that elected this leader (ResponseHeader.cluster_id), in
     * ClusterInfo so that a readiness check tells two deployments of one cluster
     * name apart; 0: unknown. */
    uint64_t etcd_cluster_id;
    /* The leader's lease as the elector last confirmed it (coord_elector.h), one
     * word tied to one term: sched_lease_word(epoch, until), until a zclock_mono
     * ms after which this scheduler is no leader any more, written by the elector,
     * read here before anything leader-only is done. A word of another epoch than
     * leader_epoch, an until of 1 (that term's leader stepped down) or an until
     * passed all lapse it: the meta plane answers NOT_LEADER, the internal plane
     * UNAVAILABLE, and no token is minted (the scheduler's own tier-plane requests
     * go out without one and are refused at the tier). 0 in it: not set yet (a
     * lease not confirmed yet counts as valid). NULL: no lease (tests, a
     * scheduler without etcd). */
    const _Atomic int64_t *lease_until_ms;
    /* The cluster secret (docs/SECURITY.md): when set, every token is sealed
     * (bus_token_mac.h, keyed for `cluster`) and the scheduler's own tier-plane
     * requests and copy jobs carry tokens it mints for them. Unset: tokens go
     * out unsealed and its own requests carry none (tier actors without the
     * secret, in-process tests). */
    bool has_secret;
    uint8_t secret[BUS_SECRET_BYTES];

    uint32_t n_tiers;
    sched_tier_config_t tiers[SCHED_MAX_TIERS];
    uint32_t n_pools;
    sched_tier_pool_config_t pools[SCHED_MAX_POOLS];
    uint32_t n_chains; /* >= 1: the branches; route says which one a request uses */
    sched_chain_config_t chains[SCHED_MAX_CHAINS];
    sched_route_config_t route; /* zero: every request on chain 0 */

    uint64_t pin_lease_ms;     /* an open get/prefetch window lapses after this (0: 30 s) */
    uint64_t write_grace_ms;   /* an open put window lapses after this (0: 30 s) */
    uint64_t clock_skew_ms;    /* tier actors accept a token this long past its expiry
                                  (security.clock_skew; 0: 5 s, as tier_actor.h): tokens
                                  of leases longer than twice it expire that much early,
                                  so a tier refuses a late writer when its window lapses */
    uint64_t request_idle_ms;  /* an open request without an open window and without a call
                                  for this long is ended, so a dead client's requests do not
                                  fill max_requests (0: 4 x the longer lease, >= 60 s) */
    uint64_t tier_timeout_ms;  /* a tier actor's reply deadline (0: 2 s) */
    uint32_t max_batch;        /* keys per request, <= 65536 (0: 65536) */
    uint32_t max_requests;     /* open requests (0: 65536) */
    uint32_t max_instances;    /* registered instances (0: 64) */
    uint32_t max_pending_puts; /* complete_put replies awaiting a tier (0: 1024) */
    uint32_t max_window_keys;  /* keys held by all open windows together (0: 4 Mi) */
    uint32_t tick_ms;          /* lease / expiry scan period (0: derived from the leases) */
    uint32_t scan_max;         /* requests examined per tick by the lease scan (0: 4096) */
    /* Index rebuild (sched_tiers.c, docs/PROTOCOL.md "Inventory"): a tier's slots are
     * read as windows of inventory_page slots, each one Inventory page of records,
     * inventory_in_flight pages at once per tier (tiers in parallel). inventory_entries:
     * pages of at most 128 InventoryEntry messages, one in flight, as before records
     * (a baseline for kvt-bench; an actor that predates records answers so anyway). */
    uint32_t inventory_page;      /* 0: SCHED_INV_PAGE_DEFAULT; 1..BUS_MAX_INVENTORY_RECORDS */
    uint32_t inventory_in_flight; /* 0: SCHED_INV_IN_FLIGHT_DEFAULT; 1..SCHED_INV_MAX_IN_FLIGHT */
    bool inventory_entries;
    /* Clients (issue 12 §3): a client is one meta-plane connection (its routing id).
     * A new one past max_clients active ones, and a request_begin past a client's
     * max_requests_per_client open requests (or past max_requests in all), is
     * answered OVERLOADED, which libkvtier never retries by itself. A client with no
     * open request and no call for client_idle_ms gives its place up. */
    uint32_t max_clients;             /* 0: 1024 (<= 65536) */
    uint32_t max_requests_per_client; /* 0: max_requests / 4, at least min(max_requests, 1024) */
    uint64_t client_idle_ms;          /* 0: 60 s */
    /* Meta-plane connections kept open (bus_server_set_max_connections): one
     * accepted past it is closed at once, so a flood of connections cannot take
     * the process's descriptors. 0: max_clients + 64 (the CLI, standbys). */
    uint32_t max_connections;

    /* Internal plane (gc, reclaimer; schemas/internal.proto): a second ROUTER
     * served by the same loop. "" = "inproc://sched-internal-<random>" (same
     * process). Read the bound one back with sched_actor_internal_endpoint. */
    char internal_endpoint[SCHED_ENDPOINT_MAX];
    uint64_t delete_delay_ms;     /* DELETING -> slot freed after this (0: 1 s) */
    uint32_t max_pending_deletes; /* DELETING blocks per tier awaiting their free (0: 4096) */
    uint32_t reclaim_scan;        /* slots examined per ReclaimCandidates / GcScan (0: 8192) */
    /* The migrator (actors/migrator.h) copies between tiers: prefetches (always)
     * and, with demote, ReclaimCandidates(demote) blocks to the next tier of their
     * chain. It is the one whose jobs ROUTER is at migrator_endpoint, running
     * beside the scheduler (its results come back on the internal plane); "" =
     * the scheduler starts one itself. demote false: demote requests do nothing
     * and a full tier evicts as a last tier does. */
    bool demote;
    char migrator_endpoint[SCHED_ENDPOINT_MAX];
    /* Events (DESIGN.md §13): the publisher's input (actors/publisher.h), where
     * the scheduler hands its batches; "" = no events. */
    char events_input[SCHED_ENDPOINT_MAX];
    uint32_t events_queue; /* batches waiting for the publisher before more drop (0: 1024) */
    /* Words (4 bytes) that open puts' token ids and parents may take while events
     * are on (0: SCHED_PUT_TOKEN_WORDS, 16 MiB); a put that does not fit keeps
     * no token ids (events_tokens_dropped). At most 64 Mi words. */
    uint32_t events_put_tokens;
    /* Per-instance quotas (issue 4 §4): enforced when the reclaimer sends
     * QuotaEnforce; instance ids unique, "*" at most once. */
    uint32_t n_quotas;
    sched_quota_config_t quotas[SCHED_MAX_QUOTAS];
    /* Per-instance isolation by CURVE key (actors/sched_acl.c): with acl_on, a
     * request naming an instance is served only for a key granted that instance or
     * "*" (or this process's own key); StatsRequest over all instances needs "*".
     * Anything else is PERMISSION_DENIED naming the instance and the key. */
    bool acl_on;
    uint32_t n_acl;
    sched_acl_entry_t acl[SCHED_ACL_MAX];
    /* The instance registry (issue 9 §1, docs/OPERATIONS.md "etcd keys"): each
     * instance registered (created, or a preloaded one its client registers
     * again; not an equal re-registration otherwise) has its spec,
     * a kvtier_InstanceSpec frame, pushed without waiting to this endpoint (the
     * coordinator's registry writer, coordinator/coord_registry.h); "" = none.
     * preload: the specs a new leader read from etcd, registered before it serves
     * (read during sched_actor_new only; bad or excess ones are logged, skipped). */
    char registry_output[SCHED_ENDPOINT_MAX];
    const kvtier_InstanceSpec *preload;
    uint32_t n_preload;
    /* `kvtier leader resign` (issue 9 §3, actors/sched_resign.c): standbys is the
     * number of other coordinators registered in etcd as the elector last read it
     * (NULL: not known, and a resign is refused); resign_endpoint is where the
     * hand-over is pushed once the open windows are done (the elector's inbox:
     * coord_elector.h "RESIGN"; "" = nowhere, the scheduler only stops leading). */
    const _Atomic uint32_t *standbys;
    char resign_endpoint[SCHED_ENDPOINT_MAX];
} sched_config_t;

/* Fills *cfg with the defaults above, one chain "default" of no tier, endpoint
 * "tcp://127.0.0.1:*", cluster "kvtier". Callers add tiers and chains. */
void sched_config_defaults(sched_config_t *cfg);

/* Checks a config (tier ids 1..n in order, chains naming known tiers, policies
 * known, capacities and bounds in range, pools' slots in range and listed
 * together by the chains naming them). 0, or -EINVAL with a message in err. */
int sched_config_check(const sched_config_t *cfg, char *err, size_t errlen);

/* Starts the actor: checks the config, allocates, binds. NULL (after logging
 * why) on a bad config or a failed bind. */
zactor_t *sched_actor_new(const sched_config_t *cfg);

/* The bound meta endpoint into buf. 0, or -1 when the actor does not answer. */
int sched_actor_endpoint(zactor_t *actor, char *buf, size_t len);

/* The bound internal-plane endpoint (GcScan, GcDrop, ReclaimCandidates) into buf.
 * 0, or -1 when the actor does not answer. */
int sched_actor_internal_endpoint(zactor_t *actor, char *buf, size_t len);

/* Tells the actor that a tier actor came up (up = true; info carries tier_id,
 * name, endpoint, shm, host, epoch, capacity_slots, slot_bytes) or went away
 * (up = false; tier_id is enough). Sends an encoded Envelope with a
 * TierMembershipRequest on the pipe; does not wait. 0 or -1. */
int sched_actor_tier_change(zactor_t *actor, bool up, const kvtier_TierInfo *info);

/* The 32-bit instance number stored in slot headers: tier_instance_hash
 * (tiers/tier_key.h), the one instance hash the tier actors use too. */
uint32_t sched_instance_number(const char *instance_id);

#endif
