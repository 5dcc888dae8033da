/* coord_config.h — the deployment file (DESIGN.md §10) as plain structs: cluster
 * name, etcd endpoints and lease TTL, the coordinator's meta endpoint and bounds,
 * the tier table and the chains with their router (the flat "chains" list, or the
 * nested "topology": coord_topology.h). Parsed with bus_config over embedded defaults,
 * validated as a whole (unique names, endpoints, known kinds and policies, chains
 * naming existing tiers, quotas); every error names the offending key path
 * ("tiers[1].capacity: expected a positive integer, got 0").
 *
 * Owns: the parsing and validation rules and the embedded defaults. Never opens a
 * tier, talks to etcd or logs: the caller decides what to do with a message.
 * A coord_config_t is plain data (no pointers): copy it freely.
 *
 * Tier ids are 1 + the index in "tiers" (0 = none), identical in every process
 * that reads the same file. */
#ifndef KVT_COORD_CONFIG_H
#define KVT_COORD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bus_endpoint.h"
#include "bus_fault.h"
#include "bus_host.h"
#include "bus_limits.h"
#include "coord_etcd.h"
#include "metrics_http.h"
#include "tier.h"

/* Bounds that travel on the wire come from the .options of schemas/ (bus_limits.h). */
#define COORD_CLUSTER_MAX BUS_CLUSTER_MAX     /* bytes of the cluster name, NUL included */
#define COORD_TIER_NAME_MAX BUS_TIER_NAME_MAX /* tier or chain name, NUL included */
#define COORD_TIER_KIND_MAX BUS_TIER_KIND_MAX /* kind name, NUL included (TierInfo.kind_name) */
#define COORD_POLICY_MAX 16                   /* bytes of a policy name, NUL included */
#define COORD_PATH_MAX 256                    /* bytes of a file path, NUL included */
#define COORD_MAX_TIERS BUS_MAX_TIERS         /* tiers per deployment (ClusterInfoReply.tiers) */
#define COORD_MAX_CHAINS 8                    /* chains per deployment */
#define COORD_CHAIN_MAX_TIERS 8               /* tiers per chain */
#define COORD_MAX_CAPACITY (1ull << 31)       /* slots per tier (the slot engine's bound) */
#define COORD_MAX_SLOT_SIZE (1ull << 30)      /* bytes per slot */
#define COORD_MAX_BATCH 65536u                /* keys per request (BUS_MAX_ARRAY) */
#define COORD_WIRE_ENDPOINT_MAX (BUS_TIER_ENDPOINT_MAX - 1) /* bytes on the wire (TierInfo) */
#define COORD_MAX_QUOTAS 64                    /* entries of "quotas" (SCHED_MAX_QUOTAS) */
#define COORD_INSTANCE_MAX BUS_INSTANCE_ID_MAX /* bytes of an instance id, NUL included */
#define COORD_MAX_COORDINATORS 8               /* entries of "coordinators" */
#define COORD_HOST_NAME_MAX BUS_HOST_NAME_MAX  /* a "host" name, NUL included (46 bytes) */
#define COORD_MAX_POOLS 8                      /* entries of "pools" */

typedef struct {
    uint32_t id; /* 1 + index in "tiers" */
    char name[COORD_TIER_NAME_MAX];
    char kind_name[COORD_TIER_KIND_MAX]; /* a registered kind (tiers/tier.h): "host", "nvme"... */
    char plugin[COORD_PATH_MAX];         /* "plugin": the shared object the kind comes from */
    char endpoint[BUS_ENDPOINT_MAX];     /* where the tier actor binds (tier plane) */
    char advertise[BUS_ENDPOINT_MAX];    /* "advertise": what it registers in etcd for others
                                            to connect to; "" = the bound endpoint */
    char host[COORD_HOST_NAME_MAX];      /* "host": the host it runs on (deploy/supervise
                                            --host; its shm is used only by clients of that
                                            host name); "" = this machine's (bus_host.h) */
    uint32_t max_connections;            /* "max_connections": tier-plane connections; 0: 1024 */
    char metrics[METRICS_HTTP_ADDR_MAX]; /* "metrics": the tier process's HTTP address
                                            ("127.0.0.1:0" default: the kernel picks, advertised
                                            in its etcd record); "" = none */
    uint64_t capacity;                   /* slots, 1..COORD_MAX_CAPACITY */
    uint64_t slot_size;                  /* bytes, 1..COORD_MAX_SLOT_SIZE (default 256 KiB) */
    char policy[COORD_POLICY_MAX];       /* replacement policy (tier_policy_find), default "lru" */
    /* What the tier process opens: name, kind and geometry as above; the address
     * (the backend's path_key: "shm" for host, "path" for nvme) and every other key
     * of the entry as the backend's options, checked by its configure (defaults
     * filled in: a host tier's shm name is "/kvtier-<cluster>-<name>"). */
    tier_config_t backend;
    /* reclaim (DESIGN §6): fractions of capacity, 0 < low < high <= 1. The file
     * takes a number (0.9) or a percent string ("90%"); defaults 0.97 / 0.94 (a
     * high alone: low = high - 0.03). Used when the tier reclaims ahead. */
    double high_watermark;
    double low_watermark;
    /* "reclaim": when the reclaimer frees slots (coord_reclaim_t); absent = AUTO */
    uint32_t reclaim;
} coord_tier_config_t;

/* One entry of "pools" (docs/OPERATIONS.md "Pools"): a chain level whose tiers
 * join at run time. Its members are tier processes started with `kvtier tier
 * --pool NAME` that take an id of [first_id, first_id + max_members) when they
 * register (an etcd transaction on /kvtier/<cluster>/tier_ids/<id>, under their
 * lease) and leave when their lease lapses. The ids follow the static tiers',
 * pool after pool in file order, so static tiers + every max_members <= 32
 * (the tier id space: tokens, ClusterInfoReply.tiers). `member` holds what every
 * member runs (kind, capacity, slot_size, policy, watermarks, reclaim, metrics,
 * backend options); its id is first_id and its name the pool's, which is how a
 * chain names the level (coord_config_tier_by_id answers it for every id of the
 * range). Its kind takes no address of its own ("remote", a plug-in kind without
 * a path key): members share the entry. */
typedef struct {
    char name[COORD_TIER_NAME_MAX];
    char endpoint[BUS_ENDPOINT_MAX];  /* what it binds */
    char advertise[BUS_ENDPOINT_MAX]; /* "" = the bound endpoint */
    char host[COORD_HOST_NAME_MAX];   /* "" = every supervisor's host (first_host) */
    uint64_t capacity;                /* 0 = the pool's */
} coord_pool_member_t;

typedef struct {
    char name[COORD_TIER_NAME_MAX];
    uint32_t first_id;
    uint32_t max_members; /* 1..32 - static tiers - the pools before */
    coord_tier_config_t member;
    /* "members": the members deploy/supervise starts (on their "host"), as
     * `kvtier tier -c FILE --name NAME` does; others join by hand with --pool */
    uint32_t n_members;
    coord_pool_member_t members[COORD_MAX_TIERS];
} coord_pool_config_t;

/* tiers[i].reclaim (docs/SCHEDULER.md "Chains"). AHEAD: the reclaimer keeps the tier
 * between its watermarks (demoting to the next tier, or marking DELETING on a last
 * tier). ON_DEMAND: the reclaimer only watches it; slots are freed when a write or a
 * demotion needs them (the slot engine's victim at reserve time on a last tier, a
 * demotion started by the write above it), so the tier fills to its capacity. AUTO:
 * ON_DEMAND on a tier that has no next tier in any chain, AHEAD on the others (a
 * head must keep room for puts, or writes wait as BUSY). coord_tier_reclaims_ahead
 * resolves it. */
typedef enum {
    COORD_RECLAIM_AUTO = 0,
    COORD_RECLAIM_AHEAD = 1,
    COORD_RECLAIM_ON_DEMAND = 2,
} coord_reclaim_t;

/* chains[i].placement (docs/SCHEDULER.md "Chains"): "exclusive" (default) moves a
 * promoted block to the head (its lower copy is freed); "inclusive" copies it. */
typedef enum {
    COORD_PLACEMENT_EXCLUSIVE = 1, /* = SCHED_PLACEMENT_EXCLUSIVE */
    COORD_PLACEMENT_INCLUSIVE = 2, /* = SCHED_PLACEMENT_INCLUSIVE */
} coord_placement_t;
#define COORD_PLACEMENT_DEFAULT COORD_PLACEMENT_EXCLUSIVE
#define COORD_PLACEMENT_DEFAULT_NAME "exclusive"

typedef struct {
    char name[COORD_TIER_NAME_MAX];
    uint32_t n_tiers;
    uint32_t tier_ids[COORD_CHAIN_MAX_TIERS]; /* head first */
    uint32_t placement;                       /* coord_placement_t */
    /* a branch of a "ttl" / "length" route (coord_topology.h): requests whose
     * TTL (ms) / predicted total blocks is above this; 0 on the fallback */
    uint64_t above;
} coord_chain_config_t;

/* How requests pick a chain (topology.route, coord_topology.h; the scheduler's
 * sched_route_kind_t, same values). NONE: every request on chains[0] (the flat
 * "chains" form, or a topology of one store or chain). */
typedef enum {
    COORD_ROUTE_NONE = 0,
    COORD_ROUTE_TTL = 1,
    COORD_ROUTE_LENGTH = 2,
    COORD_ROUTE_INSTANCE = 3,
} coord_route_t;

#define COORD_ROUTE_MAX_INSTANCES 64 /* instances named by all branches of an instance route */

typedef struct {
    char instance[COORD_INSTANCE_MAX];
    uint32_t chain; /* index in chains[] */
} coord_route_instance_t;

/* One entry of "quotas" (issue 4 §4, soft: the reclaimer enforces it). */
typedef struct {
    char instance[COORD_INSTANCE_MAX]; /* an instance id, or "*": the default */
    uint64_t max_blocks;               /* 0: not set */
    uint64_t max_bytes;                /* 0: not set ("64GiB" in the file) */
} coord_quota_config_t;

/* One coordinator process (docs/OPERATIONS.md "Several coordinators"). The
 * "coordinators" list names them; without it, "coordinator" is the one-coordinator
 * shorthand and the list holds that one entry (name "coordinator", listed false).
 * Either way "coordinator" holds the settings they share (bounds, leases). */
typedef struct {
    char name[COORD_TIER_NAME_MAX];      /* its name in etcd, logs, --name */
    char endpoint[BUS_ENDPOINT_MAX];     /* the meta endpoint it binds */
    char advertise[BUS_ENDPOINT_MAX];    /* what it advertises (etcd leader key, NOT_LEADER
                                            redirects, ClusterInfo): "advertise", default
                                            the endpoint (its bound port when "*") */
    char host[COORD_HOST_NAME_MAX];      /* "host": where deploy/supervise --host starts it;
                                            "" = every supervisor's host */
    char metrics[METRICS_HTTP_ADDR_MAX]; /* "metrics", default coordinator.metrics */
} coord_coordinator_config_t;

/* "security.curve" (docs/SECURITY.md): CurveZMQ on every tcp socket. Parsed by
 * coord_curve_read (coord_curve.h); plain data like the rest. */
#define COORD_CURVE_MAX_ACL 256 /* (instance, key) pairs of "security.curve.instances" */
#define COORD_CURVE_NAME_MAX 64 /* a key's name (the file <clients>/<name>.key), NUL included */

typedef struct {
    char instance[COORD_INSTANCE_MAX]; /* an instance id, or "*": every instance */
    char key[COORD_CURVE_NAME_MAX];    /* a Z85 public key, or the name of one in "clients" */
} coord_curve_acl_t;

typedef struct {
    bool on;                      /* "security.curve" is present */
    bool autogen;                 /* "auto": deploy/supervise makes the missing pairs */
    char keys[COORD_PATH_MAX];    /* "keys": the pairs: server.key, <process>.key, ... */
    char clients[COORD_PATH_MAX]; /* "clients": admitted public keys ("<keys>/clients") */
    bool acl_on;                  /* "instances" is present: per-instance isolation */
    uint32_t n_acl;
    coord_curve_acl_t acl[COORD_CURVE_MAX_ACL];
} coord_curve_config_t;

typedef struct {
    char cluster[COORD_CLUSTER_MAX]; /* etcd prefix /kvtier/<cluster>/ */

    /* etcd: no endpoints means "the supervisor starts the embedded one" and the
     * process needs --etcd. */
    uint32_t n_etcd;
    char etcd[COORD_ETCD_MAX_ENDPOINTS][COORD_ETCD_ENDPOINT_MAX];
    uint64_t lease_ttl_ms; /* >= 1000; etcd counts whole seconds (rounded up) */
    /* hosts (deploy/supervise --host): "etcd.host" (where the supervisor starts the
     * embedded etcd) and "optimizer.host", each defaulting to first_host: the first
     * "host" of coordinators then tiers ("" when none names one: one host). A process
     * without a host runs on first_host. */
    char first_host[COORD_HOST_NAME_MAX];
    char etcd_host[COORD_HOST_NAME_MAX];
    char optimizer_host[COORD_HOST_NAME_MAX];
    /* "etcd.tls" (https:// endpoints, docs/SECURITY.md "etcd"): PEM files; "" = not set */
    char etcd_ca[COORD_PATH_MAX];   /* "ca": the CA of etcd's certificate (else the system's) */
    char etcd_cert[COORD_PATH_MAX]; /* "cert" + "key": this process's client certificate */
    char etcd_key[COORD_PATH_MAX];

    /* coordinator (meta plane) */
    char endpoint[BUS_ENDPOINT_MAX];
    uint64_t pin_lease_ms;
    uint64_t write_grace_ms;
    uint64_t request_idle_ms; /* 0: the scheduler's default (4 x the longer lease, >= 60 s) */
    uint32_t max_batch;       /* keys per request, 1..COORD_MAX_BATCH */
    uint32_t max_requests;    /* open requests */
    uint32_t max_clients;     /* "max_clients": active meta-plane clients; 0: 1024 */
    uint32_t max_requests_per_client; /* open requests per client; 0: max_requests / 4 */
    uint64_t client_idle_ms;          /* "client_idle": a client's place is given up; 0: 60 s */
    uint32_t max_connections; /* "max_connections": meta-plane connections; 0: max_clients + 64 */
    uint32_t max_instances;   /* registered instances */
    uint64_t tier_timeout_ms;
    char metrics[METRICS_HTTP_ADDR_MAX]; /* "coordinator.metrics": HTTP "IPV4:PORT", "" = off */
    /* the coordinators: at least one; endpoint above = coordinators[0]'s advertise */
    bool coordinators_listed; /* the file has "coordinators" (false: the shorthand) */
    uint32_t n_coordinators;
    coord_coordinator_config_t coordinators[COORD_MAX_COORDINATORS];

    uint32_t n_tiers;
    coord_tier_config_t tiers[COORD_MAX_TIERS];
    uint32_t n_pools; /* "pools": their ids follow the tiers' (coord_pool_config_t) */
    coord_pool_config_t pools[COORD_MAX_POOLS];
    uint32_t n_chains;
    coord_chain_config_t chains[COORD_MAX_CHAINS];
    /* the router over the chains (from "topology"; NONE with "chains") */
    bool topology;           /* the file described the tiers' arrangement with "topology" */
    uint32_t route;          /* coord_route_t */
    uint32_t route_fallback; /* chain index of the fallback branch (not NONE) */
    uint32_t n_route_instances;
    coord_route_instance_t route_instances[COORD_ROUTE_MAX_INSTANCES];

    /* gc actor (DESIGN §6 "GC"): a round of `gc_page` locations every gc_interval_ms */
    uint64_t gc_interval_ms;      /* "gc.interval", default 1s */
    uint32_t gc_page;             /* "gc.page", 1..64, default 64 */
    uint64_t gc_probe_timeout_ms; /* "gc.probe_timeout", default 2s */
    /* reclaimer actor (DESIGN §6 "Reclaim") */
    uint64_t reclaim_interval_ms;     /* "reclaimer.interval", default 100ms */
    uint64_t reclaim_delete_delay_ms; /* "reclaimer.delete_delay": DELETING -> freed, 1s */
    uint32_t reclaim_max_pending;     /* "reclaimer.max_pending": DELETING per tier, 4096 */
    double reclaim_quota_low;         /* "reclaimer.quota_low": quota x this is the target, 0.9 */
    /* events (DESIGN §13, docs/EVENTS.md): the leader's publisher */
    char events_endpoint[BUS_ENDPOINT_MAX]; /* "events.endpoint": XPUB bind; "" = no events */
    char events_replay[BUS_ENDPOINT_MAX];   /* "events.replay_endpoint": ROUTER; "" = none */
    uint32_t events_ring_batches;           /* "events.ring_batches", default 4096 */
    uint64_t events_ring_bytes;             /* "events.ring_bytes", default 64MiB */
    uint32_t events_queue;                  /* "events.queue": batches waiting, default 1024 */
    /* optimizer (docs/OPTIMIZER.md "Live"): deploy/supervise runs kvtier optimize
     * --subscribe --publish when events are on and this is enabled */
    bool optimizer_enabled;             /* "optimizer.enabled", default true */
    uint64_t optimizer_every_ms;        /* "optimizer.every", default 10s (1s..1h) */
    uint64_t optimizer_window;          /* "optimizer.window": block references, default 1048576 */
    uint64_t optimizer_capacity;        /* "optimizer.capacity": blocks; 0 = all tiers' */
    uint32_t events_put_tokens;         /* "events.put_tokens": words, 4194304 (16 MiB) */
    uint32_t events_subscriber_queue;   /* "events.subscriber_queue": XPUB HWM, 1000 */
    uint32_t events_snapshot_blocks;    /* "events.snapshot_blocks": mirror bound, 4194304 */
    char events_vllm[BUS_ENDPOINT_MAX]; /* "events.vllm_endpoint": XPUB, msgpack; "" = none */
    char events_vllm_replay[BUS_ENDPOINT_MAX]; /* "events.vllm_replay_endpoint"; "" = none */
    int events_vllm_layout;                    /* "events.vllm_layout": "map" (0) / "array" (1) */

    /* metrics actors (issue 10 §2; docs/OPERATIONS.md): "metrics" section */
    uint32_t metrics_refresh_ms;      /* "metrics.refresh": figures refreshed, default 1s */
    uint32_t metrics_sample_ms;       /* "metrics.sample_interval": a hit-rate point, 5s */
    uint32_t metrics_samples;         /* "metrics.samples": hit-rate points kept, 360 */
    uint32_t metrics_max_connections; /* "metrics.max_connections": HTTP, 16 */
    uint32_t metrics_timeout_s;       /* "metrics.timeout": HTTP idle, 5s */
    uint32_t metrics_max_instances;   /* "metrics.max_instances": instance_id values, 16 */

    /* security, tier-plane tokens (docs/SECURITY.md) */
    char secret_file[COORD_PATH_MAX]; /* "security.secret_file": the cluster secret; "" = none
                                         (--secret FILE; deploy/supervise makes one) */
    uint64_t clock_skew_ms;           /* "security.clock_skew": token expiry slack, 5s */

    /* per-instance quotas ("quotas", top level next to "tiers" and "chains"):
     * instance ids unique, "*" at most once, each with at least one limit */
    uint32_t n_quotas;
    coord_quota_config_t quotas[COORD_MAX_QUOTAS];

    /* "security" (docs/SECURITY.md) */
    coord_curve_config_t curve; /* "security.curve"; off when absent */
    /* faults on purpose (issue 12 §6; bus_fault_admin.h): the "faults" section */
    bus_fault_config_t faults;
} coord_config_t;

/* The embedded defaults (a JSON document, itself the default deployment: one host
 * tier "host0"). A file must name "cluster" and "tiers" itself (a missing one is an
 * error naming it); every other section it leaves out is taken from here. */
const char *coord_config_defaults(void);

/* Loads and validates a deployment file. 0, or a negative code with ERR set to
 * "<file>: <key path>: <problem>" (or "<file>: cannot open: ..."). *out is
 * zeroed first and meaningful only on success. */
int coord_config_load_file(const char *filename, coord_config_t *out, char *err, size_t errlen);

/* Same for TEXT; NAME stands for the file in messages. */
int coord_config_load_string(const char *name, const char *text, coord_config_t *out, char *err,
                             size_t errlen);

/* Replaces the etcd endpoints with a comma-separated list of URLs (the --etcd
 * flag). 0, or -EINVAL with ERR naming the bad URL. */
int coord_config_set_etcd(coord_config_t *cfg, const char *urls, char *err, size_t errlen);

/* The tier named NAME, or NULL. */
const coord_tier_config_t *coord_config_tier(const coord_config_t *cfg, const char *name);
/* The tier with id ID (1-based), or NULL. An id of a pool's range answers the
 * pool's member defaults (name: the pool's; id: its first_id). */
const coord_tier_config_t *coord_config_tier_by_id(const coord_config_t *cfg, uint32_t id);
/* The pool named NAME / whose id range holds ID, or NULL. */
const coord_pool_config_t *coord_config_pool(const coord_config_t *cfg, const char *name);
const coord_pool_config_t *coord_config_pool_of_id(const coord_config_t *cfg, uint32_t id);
/* The "members" entry named NAME of any pool (its pool into *pool), or NULL. */
const coord_pool_member_t *coord_config_pool_entry(const coord_config_t *cfg, const char *name,
                                                   const coord_pool_config_t **pool);
/* The id a chain names for tier id ID: its pool's first_id for a member, else ID. */
uint32_t coord_config_level_id(const coord_config_t *cfg, uint32_t id);
/* A member of pool POOL as its process runs it: the pool's defaults with NAME,
 * ID (of the pool's range), ENDPOINT (bound), ADVERTISE ("" = the bound one), HOST
 * ("" = this machine's) and CAPACITY (0 = the pool's), its backend configured
 * again for that name. 0, or -EINVAL with ERR naming the bad value. */
int coord_config_pool_member(const coord_config_t *cfg, const coord_pool_config_t *pool,
                             const char *name, uint32_t id, const char *endpoint,
                             const char *advertise, const char *host, uint64_t capacity,
                             coord_tier_config_t *out, char *err, size_t errlen);
/* The coordinator named NAME, or NULL. */
const coord_coordinator_config_t *coord_config_coordinator(const coord_config_t *cfg,
                                                           const char *name);
/* Does tier id ID have a next tier in some chain (demotes rather than deletes)? */
bool coord_tier_has_next(const coord_config_t *cfg, uint32_t id);
/* Does the reclaimer keep tier T between its watermarks (t->reclaim resolved:
 * AUTO is ahead exactly when the tier has a next tier)? */
bool coord_tier_reclaims_ahead(const coord_config_t *cfg, const coord_tier_config_t *t);

/* etcd lease TTL in whole seconds (lease_ttl_ms rounded up, at least 1). */
int64_t coord_config_lease_ttl_s(const coord_config_t *cfg);

/* Writes the etcd key "/kvtier/<cluster>/<suffix>" into BUF (suffix may be ""
 * for the cluster's prefix). 0, or -ENAMETOOLONG. */
int coord_cluster_key(char *buf, size_t len, const char *cluster, const char *suffix);

#endif
