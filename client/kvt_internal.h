/* kvt_internal.h — what the files of libkvtier share and engines never see: the
 * handle, the token, the meta-plane call with its retry rule, and the data role's
 * entry points. Never installed, never included outside client/. Functions shared
 * between client/ files are kvti_*: kvt_* is the public API of kvtier.h alone, the
 * names libkvtier.map exports (STYLE.md rule 17). */
#ifndef KVT_INTERNAL_H
#define KVT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bus_client.h"
#include "bus_endpoint.h"
#include "bus_host.h"
#include "bus_limits.h"
#include "bus_token.h"
#include "coord_etcd.h"
#include "kvtier.h"

#define KVT_MAX_COORDINATORS 16
#define KVT_ERR_MAX 512
#define KVT_DEFAULT_TIMEOUT_MS 5000u
#define KVT_MAX_TIMEOUT_MS 3600000u /* one hour: anything longer is a mistake */
#define KVT_DEFAULT_IN_FLIGHT 64u
#define KVT_ID_MAX ((int)BUS_INSTANCE_ID_MAX - 1) /* instance and request ids, NUL excluded */
#define KVT_TOKEN_KEEP 16                         /* completed tokens kept for reuse per handle */
/* Longest token payload for n keys: header, a full tier table, n entries, MAC. */
#define KVT_TOKEN_PAYLOAD_MAX(n) BUS_TOKEN_MAX_BYTES(BUS_TOKEN_MAX_TIERS, n)
/* Why a complete refuses an imported token (kvt_control.c). */
#define KVTI_IMPORTED_NO_COMPLETE                                                                  \
    "the token was imported (kvt_token_import): the process that prepared it completes it; "      \
    "send it the result (kvt_token_result_export) and free this copy with kvt_token_release"

_Static_assert(BUS_FIELD_SIZE(kvtier_RequestContext, request_id) == BUS_INSTANCE_ID_MAX &&
                   BUS_FIELD_SIZE(kvtier_LookupRequest, request_id) == BUS_INSTANCE_ID_MAX,
               "request ids have the bound of instance ids (KVT_ID_MAX)");

struct kvt_data;

_Static_assert(KVT_MAX_SEGMENTS == BUS_MAX_BLOCK_SEGMENTS, "kvtier.h keeps bus_limits.h's bound");

/* A token's layer-wise state (kvt_submit_*_segments, kvt_data.c), allocated on its
 * first layer-wise job and kept with the token in the pool; segments == 0 means
 * unused since the token was handed out. Arrays hold cap keys. */
typedef struct kvti_segs {
    uint32_t segments; /* the instance's, fixed at the token's first layer-wise job */
    uint64_t seg_bytes;
    uint32_t next; /* put: the segment the next job starts at */
    uint32_t cap;
    bool *failed; /* per key: failed in an earlier job of the token, not moved again */
    void *hash;   /* put over shm: per key a tier_checksum_state_t (kvt_transport_shm.c) */
    size_t hash_size;
    uint8_t *stage; /* keys over frames: n x block bytes (kvtier.h staging rule) */
    uint64_t stage_cap;
    bool *staged;     /* get over frames: the key's block is in stage */
    bool *fetching;   /* get over frames: the running job fetches the key's block */
} kvti_segs_t;

/* A prepared window: the keys, the decoded payload and the per-key outcome the
 * data role records (complete(…, NULL) sends it). Pooled per handle: arrays grow
 * to the largest token seen and are reused. */
struct kvt_token {
    kvt_client_t *owner;
    struct kvt_token *prev, *next; /* the handle's live list, or its free list */
    bool live;                     /* handed out to the caller */
    bus_token_kind_t kind;
    char instance_id[KVT_ID_MAX + 1];
    char request_id[KVT_ID_MAX + 1];
    uint64_t token_id;
    uint64_t prepare_id; /* PrepareXRequest.job_id, echoed in the complete */
    uint64_t lease_ms;
    int64_t minted_ms;     /* zclock_mono() when the prepare's reply arrived */
    uint64_t leader_epoch; /* of the leader that answered the prepare (0: unknown) */
    bool stale;            /* that leader is gone (another epoch seen): the window with it */
    uint32_t n;            /* keys covered */
    uint32_t cap;          /* keys the arrays hold */
    kvt_key_t *keys;
    bool *ok;            /* per key: the last job moved it */
    uint64_t *checksums; /* per key (put): xxh3-64 of the bytes written */
    uint8_t *payload;
    uint32_t payload_len, payload_cap;
    uint32_t jobs;         /* data jobs in flight on this token (0 or 1) */
    bus_token_view_t view; /* decoded payload (entries point into payload) */
    /* A get+put token (kvt_prepare): n_get of its keys are the get half. Its halves
     * (allocated with it, pooled with it) are views of kind GET and PUT over its
     * arrays, payload and view; a half has parent set and owns nothing. */
    uint32_t n_get;
    struct kvt_token *halves; /* [2], or NULL until a get+put token used this one */
    struct kvt_token *parent; /* a half: the token it belongs to */
    kvti_segs_t *segs;        /* layer-wise state, or NULL until a layer-wise job */
    /* Imported from another process (kvt_token_import): jobs run here, the window
     * is completed by the exporter (kvt_token_result_import there); x_segments /
     * x_bpb: the instance's segments and block size as the exporter knew them (0:
     * unknown), for layer-wise jobs on a handle that did not register it. */
    bool imported;
    uint32_t x_segments;
    uint64_t x_bpb;
};

/* Has the token's lease lapsed, as far as a transfer may rely on it? The scheduler
 * closes a window whose lease lapsed and may hand its slots to someone else, so a
 * transfer keeps a tenth of the lease (at least 1 s, which also covers the prepare
 * reply's trip) as margin. *age_ms (may be NULL) gets the token's age. */
static inline bool kvti_token_lapsed(const struct kvt_token *tok, int64_t *age_ms)
{
    int64_t age = zclock_mono() - tok->minted_ms;
    if (age_ms)
        *age_ms = age;
    if (tok->lease_ms == 0)
        return false;
    int64_t margin = (int64_t)(tok->lease_ms / 10 > 1000 ? tok->lease_ms / 10 : 1000);
    return age > (int64_t)tok->lease_ms - margin;
}

/* A tier's same-host device access as ClusterInfo announces it (a gpu tier's CUDA
 * IPC handle, GPU UUID and slot stride; kvt_transport_cuda.c). */
typedef struct {
    uint64_t epoch;
    char host[64];
    uint8_t ipc_handle[64];
    uint32_t ipc_handle_len; /* 0: the tier gives none (frames only) */
    uint8_t gpu_uuid[16];
    uint64_t slot_stride;
} kvti_tier_access_t;

/* Asks the leader (ClusterInfo) for tier tier_id's access. 0, -KVT_NOT_FOUND when
 * the leader lists no such tier, or the call's status (the handle's error set). */
int kvti_tier_access(kvt_client_t *c, uint32_t tier_id, kvti_tier_access_t *out);

/* An open request, as begun: begun again at a new leader (kvti_recover). */
typedef struct {
    char instance_id[KVT_ID_MAX + 1];
    char request_id[KVT_ID_MAX + 1];
    uint64_t ttl_ms;
    uint32_t total_blocks;
    uint32_t branch;                       /* where the leader routed it: a new */
    char branch_name[KVT_BRANCH_NAME_MAX]; /* leader routing it elsewhere is logged */
    int64_t last_ms; /* zclock_mono() of its begin or last call (KVT_RECOVER_IDLE_MS) */
} kvti_open_req_t;

/* Back-off between rounds of finding a leader (jittered: half fixed, half random). */
#define KVT_BACKOFF_MIN_MS 20
#define KVT_BACKOFF_MAX_MS 1000
/* ... and its cap when discovery asks the coordinator list (a probe per listed
 * coordinator, not etcd): a round within a quarter of a 1 s lease of the new
 * leader serving, where 1 s left the failover p99 above 2 s (PERFORMANCE.md) */
#define KVT_BACKOFF_MAX_LIST_MS 250
/* A resend during failover waits this long first, doubling to timeout_ms: a dead
 * leader costs little, a slow one gets its time back. */
#define KVT_RESEND_MIN_TIMEOUT_MS 1000u

struct kvt_client {
    /* options, copied */
    char cuda_library[256]; /* kvt_options_t.cuda_library, "" for the defaults */
    uint64_t device_staging;
    struct kvti_dev *dev;   /* the CUDA runtime and staging of device jobs, or NULL
                               until the first device submit (kvt_device.c) */
    char coordinators[KVT_MAX_COORDINATORS][BUS_ENDPOINT_MAX];
    uint32_t n_coordinators;
    char etcd_urls[COORD_ETCD_MAX_ENDPOINTS][COORD_ETCD_ENDPOINT_MAX];
    uint32_t n_etcd;
    /* kvt_options etcd_*_file ("" = not set); etcd_tls_set: any of them given */
    char etcd_ca[COORD_ETCD_TLS_PATH_MAX], etcd_cert[COORD_ETCD_TLS_PATH_MAX],
        etcd_key[COORD_ETCD_TLS_PATH_MAX];
    bool etcd_tls_set;
    char cluster[64];
    char name[64];
    uint32_t timeout_ms;
    uint32_t failover_ms;
    uint32_t max_in_flight;
    bool disable_shm;
    bool curve_on; /* curve_cert and curve_server_key given */
    bus_curve_client_t curve;

    char host_name[BUS_HOST_NAME_MAX]; /* kvt_options_t.host / $KVTIER_HOST; "": default */
    char host_id[BUS_HOST_ID_MAX];     /* its identity (bus_host_identity), "" = none */
    uint64_t host_refusals_logged;     /* tier ids (bit id % 64) whose other host was logged */
    coord_etcd_t *etcd;                /* discovery through etcd, or NULL */
    bus_client_t *meta;                /* DEALER to the leader's meta endpoint */
    char leader[BUS_ENDPOINT_MAX];
    uint64_t leader_epoch; /* the latest any reply, redirect or discovery showed (0: unknown) */
    char leader_cluster[BUS_CLUSTER_MAX]; /* the cluster its ClusterInfo names (token export) */
    bool cluster_given; /* kvt_options_t.cluster was set: a leader of another is refused */
    /* the leader last told what this handle holds (s_recover): told again whenever
     * leader / leader_epoch differ from it, until a recovery gets through */
    char recovered_leader[BUS_ENDPOINT_MAX];
    uint64_t recovered_epoch;
    bool connected;       /* kvt_connect found the leader: from then on, new ones are told */
    uint64_t prepare_seq; /* the last job_id; from a random base (unique across handles) */
    uint64_t round_trips; /* meta-plane requests sent (kvt_meta_round_trips) */

    /* what a new leader is told again (kvti_recover), bounded (kvtier.h) */
    kvtier_InstanceSpec *insts; /* KVT_RECOVER_INSTANCES */
    uint32_t n_insts;
    kvti_open_req_t *open_reqs; /* KVT_RECOVER_REQUESTS */
    uint32_t n_open_reqs;
    bool warned_insts, warned_reqs; /* a bound above was hit and logged (once) */
    uint64_t recoveries;            /* new leaders told */
    int64_t settle_until;           /* failover_ms after the last one: its UNAVAILABLE waited out */
    kvtier_Envelope *rreq, *rrep;   /* recovery's calls: c->req is kept to send again */

    kvtier_Envelope *req; /* scratch envelopes (16 KiB each), one call at a time */
    kvtier_Envelope *rep;
    kvtier_Envelope *probe; /* discovery's request: c->req may hold one to send again */
    bool *scratch_hit;      /* lookups without caller arrays; KVT_MAX_KEYS, lazily */
    uint32_t *scratch_tiers;

    struct kvt_token *live_tokens;
    struct kvt_token *free_tokens;
    uint32_t n_free_tokens;

    struct kvt_data *data;
    char err[KVT_ERR_MAX];
};

/* The keys of the handle's tcp connections (NULL: the process's, if any). */
static inline const bus_curve_client_t *kvti_curve(const kvt_client_t *c)
{
    return c->curve_on ? &c->curve : NULL;
}

/* Sets the handle's message ("what: CODE: detail") and returns -code. */
int kvti_fail(kvt_client_t *c, int code, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Clears the message (a call that succeeds leaves "" behind). */
void kvti_clear_error(kvt_client_t *c);

/* Checks an instance/request id: non-NULL (unless optional), at most KVT_ID_MAX
 * bytes. 0 or -KVT_INVALID_ARGUMENT with the message set. */
int kvti_check_id(kvt_client_t *c, const char *what, const char *field, const char *id,
                  bool optional);

/* One meta-plane request/reply on c->req / c->rep (the caller fills c->req with
 * bus_env_init and the body). NOT_LEADER: follow the named leader (or rediscover)
 * and send again — a standby did not act on it, so this is safe for every call.
 * No reply (UNAVAILABLE / TIMEOUT): find the leader again (back-off, within
 * failover_ms) and send again only when `retry` (the scheduler answers the resend
 * as it did the first, kvtier.h "Failover"). At another leader, the remembered
 * instances and requests are carried over first (kvti_recover); NOT_FOUND for one
 * of them does the same once. Returns 0 or -code with the message set ("what:
 * CODE: server message"). */
int kvti_meta_call(kvt_client_t *c, const char *what, bool idempotent, bus_arrays_t *req_arr,
                   bus_arrays_t *rep_arr);

/* What a new leader must be told again (kvt_client.c): an instance registered, a
 * request begun, touched (a window or lookup call naming it) or ended. Past the
 * bounds of kvtier.h a spec or request is not remembered (logged once per handle,
 * for each of the two bounds). age: drops the requests with no call for
 * KVT_RECOVER_IDLE_MS and no live token (the scheduler ended them by now). */
void kvti_remember_instance(kvt_client_t *c, const kvtier_InstanceSpec *spec);
void kvti_remember_request(kvt_client_t *c, const char *instance_id, const char *request_id,
                           uint64_t ttl_ms, uint32_t total_blocks, uint32_t branch,
                           const char *branch_name);
void kvti_forget_request(kvt_client_t *c, const char *instance_id, const char *request_id);
void kvti_touch_request(kvt_client_t *c, const char *instance_id, const char *request_id);
void kvti_age_requests(kvt_client_t *c);

/* The token that owns t's window (t itself, or the get+put token of a half). */
static inline const struct kvt_token *kvti_token_root(const struct kvt_token *t)
{
    return t->parent ? t->parent : t;
}

/* Token pool (kvt_control.c). acquire: a token whose arrays hold cap keys, NULL
 * when out of memory. release: back to the pool (or freed past KVT_TOKEN_KEEP). */
struct kvt_token *kvti_token_acquire(kvt_client_t *c, uint32_t cap);
void kvti_token_release(kvt_client_t *c, struct kvt_token *tok);
void kvti_tokens_free_all(kvt_client_t *c);
void kvti_segs_free(kvti_segs_t **segs);
/* The segments of instance_id as this handle registered it (0: not registered here). */
uint32_t kvti_instance_segments(const kvt_client_t *c, const char *instance_id,
                                uint64_t *bytes_per_block);

/* Data role (kvt_data.c). */
struct kvt_data *kvti_data_new(kvt_client_t *c);
/* Gives tok the layer-wise state another process's jobs left (a token's result,
 * kvt_token_result_import): segments of seg_bytes, a put's next segment, and per
 * key whether it failed (failed: tok->n flags). 0, or -1 when out of memory
 * (nothing changed). */
int kvti_segs_adopt(struct kvt_token *tok, uint32_t segments, uint64_t seg_bytes, uint32_t next,
                    const bool *failed);
/* Asks the leader ClusterInfo (learning its epoch and cluster name). 0 or -code. */
int kvti_refresh_leader(kvt_client_t *c, const char *what);
void kvti_data_destroy(struct kvt_data **d);

#endif
