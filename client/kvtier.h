/* kvtier.h — libkvtier, the client library engines link (DESIGN.md §9).
 *
 * Two roles, usable alone or together:
 *   control: register instances, begin/end requests, look up cached prefixes,
 *            open and close get/put/prefetch windows (prepare -> token -> complete),
 *            or a request's get and put in one window (kvt_prepare / kvt_complete:
 *            two meta round trips), touch, remove, stats, cluster info;
 *   data:    move block bytes for a token (submit_get / submit_put / submit_prefetch)
 *            and collect completions (get_finished / wait), each reported exactly once.
 *
 * Every call returns 0 (KVT_OK) or a negative status code (-KVT_INVALID_ARGUMENT, ...);
 * kvt_last_error() gives a message a person can act on for the last failed call
 * ("prepare_put: NO_SPACE: <the scheduler's message>"); a call that succeeds clears it,
 * except that get_finished / wait leave the message of a failed job they report.
 *
 * Timeouts and retries: each meta-plane call waits up to timeout_ms for its reply.
 * NOT_LEADER is followed (to the leader the reply names, else by discovery) and the
 * call is sent again, for every call: a standby acted on nothing.
 * Failover (issue 9 §1, docs/PROTOCOL.md "Resends and failover"): when no reply
 * comes (TIMEOUT, or UNAVAILABLE from the socket — the leader's connection closed,
 * or its endpoint refused the connect, with the call in flight: that fails at once,
 * not at timeout_ms; an UNAVAILABLE the leader answers is returned as is), the handle finds the leader again — the coordinator list or
 * the etcd key, with jittered exponential back-off (20 ms doubling to 1 s for etcd,
 * to 250 ms for a coordinator list) between
 * rounds — and sends the call again: register_instance, request_begin/end, lookup,
 * prepare_* / prepare (the same job_id), complete_* / complete (the same token),
 * touch, cluster_info and stats are all safe to send twice (the scheduler answers a
 * resend as it answered the first); remove is not retried ("not retried" in the
 * message). It keeps trying for failover_ms (default 15 s: a lease TTL, an
 * election and an index rebuild), each resend waiting 1 s doubling to timeout_ms,
 * then returns the first error with what it tried; meanwhile, and for failover_ms
 * after it told a new leader, an UNAVAILABLE the new leader answers (its index still
 * rebuilding) is waited out the same way. When it
 * finds itself talking to another leader (a reply's leader epoch differs from the
 * one it knew, a redirect, a rediscovery, or NOT_FOUND for an instance or request
 * it holds) it first registers again the instances it registered (at most
 * KVT_RECOVER_INSTANCES) and begins again its open requests (at most
 * KVT_RECOVER_REQUESTS; ones begun past that bound, or with no call naming them
 * for KVT_RECOVER_IDLE_MS and no window open, are not carried over and their calls
 * end NOT_FOUND), then sends the call again; that telling sends nothing past the
 * call's failover_ms, and when a reply of it is lost it is done again at the next
 * call. PERMISSION_DENIED, OVERLOADED, INVALID_ARGUMENT (and every other status a
 * server answered) are never retried.
 * A token minted by the earlier leader is gone with it, from the moment any reply,
 * redirect or discovery shows another leader epoch (whether or not that leader was
 * told anything yet): the engine's next call on it ends with -KVT_ABORTED — the
 * complete (which releases the token; nothing of the window is applied at the new
 * leader: prepare again; a complete whose reply was lost may have committed at the
 * old one), a job still moving its bytes (kvt_wait / kvt_get_finished report it
 * failed, all its keys failed; its completion is still reported exactly once), or a
 * submit (refused: its slots may be another's now; then complete it) — never wrong
 * bytes.
 * BUSY (a full head tier is demoting its coldest blocks to the next tier to make
 * room; nothing was reserved) is retried by prepare_put itself, backing off
 * 1 .. 32 ms, until timeout_ms has passed; then it returns -KVT_BUSY (so a
 * prepare_put takes at most timeout_ms of retries plus its last call's bound).
 * kvt_prepare is retried the same way (nothing was pinned or reserved).
 * prepare_prefetch returns -KVT_BUSY at once (load the blocks from the lower tier
 * meanwhile, or prefetch later).
 *
 * Thread-safety: a kvt_client_t is used by one thread at a time (calls on one handle
 * must be serialised by the caller). Use one handle per thread; handles are independent.
 * A token is used on the handle that prepared it or imported it: a get, put or
 * prefetch token may be exported as bytes (kvt_token_export) to another handle of
 * the same cluster, in this process or another, which imports it to run its jobs;
 * the window stays the preparing handle's, which completes it once the result came
 * back (see "Tokens across processes" below).
 *
 * Buffers are host pointers, or CUDA device pointers through the kvt_submit_*_ex
 * calls ("Device buffers" below).
 */
#ifndef KVTIER_H
#define KVTIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVT_KEY_BYTES 16
#define KVT_MAX_KEYS 65536 /* per call */
/* Copies of protocol bounds (schemas/meta.options; the library checks them at build
 * time): tiers one ClusterInfo reply lists, counters one stats page carries. */
#define KVT_MAX_TIERS 32
#define KVT_STATS_PAGE 128

/* Same numbers as the wire StatusCode (schemas/common.proto). */
typedef enum kvt_status {
    KVT_OK = 0,
    KVT_NOT_FOUND = 1,
    KVT_INVALID_ARGUMENT = 2,
    KVT_NOT_LEADER = 3,
    KVT_NO_SPACE = 4,
    KVT_TIMEOUT = 5,
    KVT_CONFLICT = 6,
    KVT_UNAVAILABLE = 7,
    KVT_INTERNAL = 8,
    KVT_EXPIRED = 9,
    KVT_ALREADY_EXISTS = 10,
    KVT_BUSY = 11,              /* a full tier is making room: retry shortly (prepare_put does) */
    KVT_PERMISSION_DENIED = 12, /* no grant, or one that does not cover this: do not retry */
    KVT_OVERLOADED = 13, /* a request or connection bound was hit: back off; never retried here */
    KVT_ABORTED = 14,    /* the window was opened at a leader that is gone: prepare again */
} kvt_status_t;

typedef struct {
    uint8_t b[KVT_KEY_BYTES];
} kvt_key_t;

typedef struct kvt_client kvt_client_t;
typedef struct kvt_token kvt_token_t;

/* ---- helpers ---- */

/* "INVALID_ARGUMENT" for -2 or 2; "UNKNOWN" outside the enum. Never NULL. */
const char *kvt_status_name(int code);

/* Block keys of a token sequence (DESIGN.md §2): for each full block i of
 * tokens_per_block tokens,
 *   key[i] = XXH3_128(key[i-1] || tokens of block i)
 * where key[-1] is *parent (or 16 zero bytes when parent is NULL), keys are
 * serialised as XXH128_canonical_t (big-endian high64 then low64) and tokens as
 * uint32 little-endian. A trailing partial block has no key. Writes at most
 * max_out keys; returns how many full blocks there are (which may exceed max_out),
 * or -KVT_INVALID_ARGUMENT.
 * Test vector: tokens 0..15, tokens_per_block 16, no parent -> one key,
 * 16d310809c3605d60b49a1755bdbc8b2 (hex of the 16 bytes; `xxhsum -H2` of the 80-byte
 * buffer 16 x 0x00 || le32(0) .. le32(15) prints the same). */
int kvt_block_keys(const uint32_t *tokens, size_t n_tokens, uint32_t tokens_per_block,
                   const kvt_key_t *parent, kvt_key_t *out, size_t max_out);

/* ---- connection ---- */

typedef struct kvt_options {
    const char *coordinators;   /* comma-separated meta endpoints ("tcp://h:7700,..."), or NULL */
    const char *etcd_endpoints; /* comma-separated etcd URLs, used when coordinators is NULL */
    const char *cluster;        /* cluster name in etcd (default "kvtier"); when set, a
                                   coordinator of another cluster is never taken for the
                                   leader (kvt_connect: INVALID_ARGUMENT naming both) */
    const char *name;           /* this client's name in logs (default "client") */
    uint32_t timeout_ms;        /* per call (default 5000) */
    uint32_t max_in_flight;     /* data-plane requests in flight per handle (default 64) */
    bool disable_shm;           /* force the frame path even on the tier's host */
    /* CurveZMQ (docs/SECURITY.md), for a deployment with security.curve: both set,
     * every tcp connection of the handle (meta, tier) authenticates with this
     * client's pair and encrypts; both NULL: none (refused by such a deployment:
     * kvt_connect ends in TIMEOUT, the handshake having failed). */
    const char *curve_cert;       /* this client's pair: the public zcert file
                                     ("keys/alice.key", its secret alice.key_secret beside
                                     it, mode 0600), made by kvtier keygen */
    const char *curve_server_key; /* the deployment's server public key: a file
                                     ("keys/server.key") or its 40 Z85 characters */
    /* TLS towards etcd (https:// etcd_endpoints, a deployment with etcd.tls): PEM
     * files of the CA that signed etcd's certificate (NULL: the system's store) and
     * of this client's certificate and key (etcd --client-cert-auth: both or
     * neither). Checked at kvt_connect: INVALID_ARGUMENT naming an unreadable file
     * or a certificate without its key. This handle's own: other handles and the
     * process are not affected. */
    const char *etcd_ca_file;
    const char *etcd_cert_file;
    const char *etcd_key_file;
    /* This client's host name (docs/OPERATIONS.md "Hosts"): a tier's shared memory
     * is used only when the tier registered this host name and this machine's boot
     * id; otherwise its bytes go as frames. NULL: $KVTIER_HOST, else the machine's
     * host name (up to the first '.'). 1..46 letters, digits, '_', '-', '.'
     * (INVALID_ARGUMENT otherwise). */
    const char *host;
    /* How long one call keeps finding a new leader and sending itself again after
     * the leader went away (see "Failover" above); 0: KVT_DEFAULT_FAILOVER_MS. At
     * most one hour. */
    uint32_t failover_ms;
    /* Device buffers ("Device buffers" below): the CUDA runtime this handle loads at
     * its first device submit, a path or a soname (NULL: $KVT_CUDA_LIBRARY, else
     * libcudart.so, libcudart.so.12, libcudart.so.11.0), and the pinned staging its
     * device jobs may hold at once (0: KVT_DEFAULT_DEVICE_STAGING; at most
     * KVT_MAX_DEVICE_STAGING). */
    const char *cuda_library;
    uint64_t device_staging;
} kvt_options_t;

#define KVT_DEFAULT_DEVICE_STAGING (256ull << 20)
#define KVT_MAX_DEVICE_STAGING (16ull << 30)

#define KVT_DEFAULT_FAILOVER_MS 15000u
/* What a handle remembers to carry over to a new leader (see "Failover"). */
#define KVT_RECOVER_INSTANCES 16  /* registered instance specs */
#define KVT_RECOVER_REQUESTS 1024 /* open requests (begun, not ended) */
/* A remembered request with no call naming it (begin, lookup, prepare, complete)
 * for this long and no window open is not carried over: the scheduler's
 * request_idle (default 4 x 30 s leases = 120 s) has ended it by then. */
#define KVT_RECOVER_IDLE_MS 120000u

/* Finds the leader and returns a handle, or NULL with a message in err. With
 * coordinators, every listed endpoint is asked ClusterInfo at once and the first
 * answer naming a leader wins (all within timeout_ms; nobody answering is TIMEOUT);
 * otherwise the etcd key /kvtier/<cluster>/leader ({"name","endpoint","epoch"}) is
 * read. The leader is then asked ClusterInfo itself. At most 16 coordinators and 16
 * etcd URLs. */
kvt_client_t *kvt_connect(const kvt_options_t *opts, char *err, size_t errlen);
/* Waits for no job: submitted jobs not collected are dropped. Idempotent; nulls *c. */
void kvt_close(kvt_client_t **c);
const char *kvt_last_error(const kvt_client_t *c);
/* Meta-plane requests this handle has sent to the leader: every call's, and each
 * of their retries (BUSY back-offs, a NOT_LEADER followed, a resend after a
 * timeout); discovery's own ClusterInfo probes are not counted. What a request
 * costs in round trips: compare before and after it. */
uint64_t kvt_meta_round_trips(const kvt_client_t *c);
/* The epoch of the leader this handle talks to: the latest any reply, redirect or
 * discovery showed (0 while unknown). Right after a call that succeeded it is the
 * epoch of the leader that served it, so a change seen there is the first call a
 * new leader served (kvtier replay --log records it; docs/OPERATIONS.md "Deploying
 * on several hosts"). */
uint64_t kvt_leader_epoch(const kvt_client_t *c);

/* ---- control role ---- */

typedef struct kvt_instance {
    const char *instance_id;
    const char *model;
    const char *dtype;
    uint32_t tokens_per_block;
    uint64_t bytes_per_block;
    /* A block made of equal segments (one per layer and K / V, say), bytes_per_block /
     * segments bytes each, stored one after another; 0 or 1: one. At most
     * KVT_MAX_SEGMENTS and a divisor of bytes_per_block (INVALID_ARGUMENT otherwise).
     * kvt_submit_get_segments / kvt_submit_put_segments move ranges of them. */
    uint32_t segments;
} kvt_instance_t;

#define KVT_MAX_SEGMENTS 4096u /* segments of a block (e.g. 2048 layers x K/V) */

/* Registering an equal spec again is OK; a different spec under the same id is
 * -KVT_CONFLICT. */
int kvt_register_instance(kvt_client_t *c, const kvt_instance_t *spec);

typedef struct kvt_request {
    const char *instance_id;
    const char *request_id;
    uint64_t ttl_ms;       /* deadline of the blocks it writes; 0: none */
    uint32_t total_blocks; /* predicted, 0: unknown */
} kvt_request_t;

/* What request_begin answered (docs/SCHEDULER.md "Branches"): the branch, one
 * of the deployment's chains, the scheduler routed the request to by its facts
 * (the deployment's "topology": by TTL, by predicted length or by instance;
 * branch 0 without a router). Fixed for the request's life: its puts land on
 * that branch's head and prefetches promote to it; lookups and gets search every
 * branch's tiers, the request's first. A request begun again at a new leader
 * (failover) lands on the same branch while the deployments agree. */
#define KVT_BRANCH_NAME_MAX 32 /* bytes of a branch name, NUL included */
typedef struct kvt_request_begin_info {
    uint32_t branch;       /* index of the chain in the deployment */
    uint32_t head_tier_id; /* where its puts land first */
    char branch_name[KVT_BRANCH_NAME_MAX];
} kvt_request_begin_info_t;

int kvt_request_begin(kvt_client_t *c, const kvt_request_t *req);
/* kvt_request_begin that also says where the request went (info NULL ok; zeroed
 * on failure). */
int kvt_request_begin_ex(kvt_client_t *c, const kvt_request_t *req, kvt_request_begin_info_t *info);

typedef struct kvt_request_end_info {
    uint32_t closed_windows; /* windows the safety net closed */
    uint32_t released_pins;
    uint32_t aborted_reservations;
} kvt_request_end_info_t;

int kvt_request_end(kvt_client_t *c, const char *instance_id, const char *request_id,
                    kvt_request_end_info_t *info /* NULL ok */);

typedef enum kvt_lookup_mode {
    KVT_LOOKUP_PREFIX = 0,  /* longest cached prefix */
    KVT_LOOKUP_REVERSE = 1, /* sliding window from the end (window blocks) */
    KVT_LOOKUP_PER_KEY = 2, /* each key independently */
} kvt_lookup_mode_t;

typedef struct kvt_lookup_result {
    uint32_t hit_count;    /* prefix modes: cached prefix length; per-key: hits */
    bool prefetch_advised; /* some hits live only below the head tier */
    bool *hit;             /* caller array of n, or NULL */
    uint32_t *tier_ids;    /* caller array of n (0 where no hit), or NULL */
} kvt_lookup_result_t;

int kvt_lookup(kvt_client_t *c, const char *instance_id, const char *request_id /* NULL ok */,
               kvt_lookup_mode_t mode, uint32_t window, const kvt_key_t *keys, uint32_t n,
               kvt_lookup_result_t *out);

/* Prepare opens the request's window of that kind (one per kind at a time) and
 * returns a token; complete closes it. success: one flag per token key, or NULL to
 * use the outcome the data role recorded for each key (a key never transferred
 * counts as failed). Complete consumes the token (*tok = NULL), except when it
 * returns -KVT_BUSY: nothing was concluded and the token is kept (a prefetch
 * window whose copy is still running; complete retries that within timeout_ms
 * first). */
int kvt_prepare_get(kvt_client_t *c, const char *instance_id, const char *request_id,
                    const kvt_key_t *keys, uint32_t n, kvt_token_t **tok);
int kvt_complete_get(kvt_client_t *c, kvt_token_t **tok, const bool *success);

/* Keys already SERVING are left out of the token (kvt_token_count tells how many remain). */
int kvt_prepare_put(kvt_client_t *c, const char *instance_id, const char *request_id,
                    const kvt_key_t *keys, uint32_t n, kvt_token_t **tok);
int kvt_complete_put(kvt_client_t *c, kvt_token_t **tok, const bool *success);
/* The commit counts of a complete_put are in kvt_complete_put_ex's info (declared
 * below, with kvt_complete_info_t). */

/* Optional facts about a put, for the event stream only (docs/EVENTS.md): they
 * become the BlockStored events' parent_key / token_ids (vLLM's
 * parent_block_hash / token_ids) when the blocks commit. Both are optional. */
#define KVT_MAX_TOKEN_IDS 65536 /* token ids per call */
typedef struct {
    const kvt_key_t *parent;   /* the block before keys[0] in the prompt; NULL: none known */
    const uint32_t *token_ids; /* the blocks' token ids, key order; NULL: none */
    uint32_t n_token_ids;      /* 0, or n x the instance's tokens_per_block (at most
                                  KVT_MAX_TOKEN_IDS) */
} kvt_put_meta_t;

/* kvt_prepare_put with meta (NULL: exactly kvt_prepare_put). A token count that
 * is not n x tokens_per_block, or above KVT_MAX_TOKEN_IDS: -KVT_INVALID_ARGUMENT,
 * nothing reserved. The service keeps the token ids in a bounded pool: when it is
 * full they are dropped (its events_tokens_dropped counts it), never the put. */
int kvt_prepare_put_ex(kvt_client_t *c, const char *instance_id, const char *request_id,
                       const kvt_key_t *keys, uint32_t n, const kvt_put_meta_t *meta,
                       kvt_token_t **tok);

int kvt_prepare_prefetch(kvt_client_t *c, const char *instance_id, const char *request_id,
                         const kvt_key_t *keys, uint32_t n, kvt_token_t **tok);
int kvt_complete_prefetch(kvt_client_t *c, kvt_token_t **tok, const bool *success);

/* ---- a request in two round trips (issue 13 §2) ----
 * An engine's request costs lookup, prepare_get, complete_get, prepare_put and
 * complete_put: five meta round trips. kvt_prepare does the first three's work and
 * the fourth's in one: it looks up the longest cached prefix of keys (the request's
 * blocks in prompt order), pins it and reserves the misses after it on the head tier
 * (keys already SERVING are left out, as prepare_put does; concurrent puts of a key
 * share one reservation), under one get+put window and one token. kvt_complete
 * concludes both halves in one more round trip, exactly once.
 *
 * The token has two halves, borrowed views of it (valid until it is completed):
 * kvt_token_half(tok, KVT_HALF_GET) covers the pinned hits, keys [0, hit_count) of
 * the request: load them with kvt_submit_get; KVT_HALF_PUT covers the misses to
 * write: store them with kvt_submit_put. kvt_token_count / _keys / _tier work on
 * the token (hits then misses) and on each half; a half is never completed itself.
 *
 * All or nothing: when the misses cannot be reserved nothing is pinned either and
 * the error is prepare_put's (BUSY is retried here within timeout_ms; NO_SPACE;
 * UNAVAILABLE when the head tier is down, even if there are hits: use prepare_get
 * then). -KVT_INVALID_ARGUMENT when the request has a get, put or get+put window
 * open (and prepare_get / prepare_put are refused while a get+put one is). The
 * window lapses at the shorter of the pin lease and the write grace: a complete
 * after that is -KVT_EXPIRED. A new leader knows nothing of the window: complete
 * answers -KVT_NOT_FOUND (the request is not open there); the tier actors refuse the
 * old leader's token once they have seen the new leader's. A combined token is never
 * exportable (one lease, one complete at the scheduler that minted it). */
typedef enum kvt_half {
    KVT_HALF_GET = 0, /* the pinned prefix hits */
    KVT_HALF_PUT = 1, /* the reserved misses */
} kvt_half_t;

typedef struct kvt_prepare_info {
    uint32_t hit_count; /* cached prefix length: the get half's keys */
    uint32_t skipped;   /* misses left out of the put half: already SERVING */
} kvt_prepare_info_t;

/* meta: as kvt_prepare_put_ex's, over the request's keys (NULL: none). */
int kvt_prepare(kvt_client_t *c, const char *instance_id, const char *request_id,
                const kvt_key_t *keys, uint32_t n, const kvt_put_meta_t *meta, kvt_token_t **tok,
                kvt_prepare_info_t *info /* NULL ok */);

/* A half of a kvt_prepare token (never NULL for one; NULL for any other token). */
kvt_token_t *kvt_token_half(kvt_token_t *tok, kvt_half_t half);

typedef struct kvt_complete_info {
    uint32_t released;  /* pins of the get half released */
    uint32_t committed; /* put half: blocks now SERVING */
    uint32_t failed;    /* put half: reservations released */
} kvt_complete_info_t;

/* Concludes both halves: get_success / put_success one flag per key of that half,
 * or NULL to use what the data role recorded. The put half's headers are written by
 * its tier before the reply (as complete_put). Consumes the token (*tok = NULL);
 * refused while a job on either half is in flight (the token is kept). */
int kvt_complete(kvt_client_t *c, kvt_token_t **tok, const bool *get_success,
                 const bool *put_success, kvt_complete_info_t *info /* NULL ok */);

/* kvt_complete_put that also returns the scheduler's counts (info NULL: exactly
 * kvt_complete_put): committed, the blocks now SERVING, and failed, the
 * reservations released (a key whose flag was false, or whose write the data role
 * recorded as failed); released is 0. A complete answered 0 can still have
 * failed > 0: only the committed blocks are stored, so a caller that acknowledges
 * a put must check failed == 0 (and committed == the token's count). On an error
 * info is all zero. */
int kvt_complete_put_ex(kvt_client_t *c, kvt_token_t **tok, const bool *success,
                        kvt_complete_info_t *info /* NULL ok */);

uint32_t kvt_token_count(const kvt_token_t *tok);
const kvt_key_t *kvt_token_keys(const kvt_token_t *tok);
/* Tier id each token key lives on (get) or is written to (put). */
uint32_t kvt_token_tier(const kvt_token_t *tok, uint32_t i);

int kvt_touch(kvt_client_t *c, const char *instance_id, const kvt_key_t *keys, uint32_t n,
              uint64_t ttl_ms, uint32_t *touched);
int kvt_remove(kvt_client_t *c, const char *instance_id, const kvt_key_t *keys, uint32_t n,
               uint32_t *removed);

/* An operator's trim (kvtier trim / kvtier remove): drop instance_id's blocks beyond
 * keep_blocks locations over all tiers (0: every one), coldest first in the quota
 * order (the deepest tier first, then each tier's policy order); pinned blocks and
 * blocks being written wait. The service carries it out in its reclaim rounds and
 * each removal is an event; kvt_trim returns at once with where it stands. One
 * trim per instance: a new call replaces it. flags: KVT_TRIM_STATUS only reports,
 * KVT_TRIM_CANCEL stops the one in progress (what is removed stays removed). */
#define KVT_TRIM_STATUS 1u
#define KVT_TRIM_CANCEL 2u
typedef struct kvt_trim_info {
    uint64_t blocks;      /* the instance's locations now */
    bool active;          /* a trim is in progress */
    uint64_t keep_blocks; /* its target, when active */
} kvt_trim_info_t;
int kvt_trim(kvt_client_t *c, const char *instance_id, uint64_t keep_blocks, unsigned flags,
             kvt_trim_info_t *out);

/* An operator's drain (kvtier drain; docs/OPERATIONS.md "Draining a tier"): retire
 * tier `tier` (its name) of a chain without losing its blocks. From the call on
 * nothing new is placed on it (puts go to the next tier of the chain) and the
 * leader moves its blocks down the chain, each removed from the tier only once
 * its copy below is SERVING (pinned blocks wait for their pins); once empty the
 * tier is retired: nothing is placed on it until KVT_DRAIN_CANCEL (or a new
 * leader: the drain is the leader's memory only). kvt_drain returns at once with
 * where it stands; poll with KVT_DRAIN_STATUS. KVT_NOT_FOUND: no such tier;
 * KVT_INVALID_ARGUMENT: the last tier of its chain (nothing below); KVT_CONFLICT:
 * already draining or retired, demotion off, or nothing placeable left below. */
#define KVT_DRAIN_STATUS 1u
#define KVT_DRAIN_CANCEL 2u
typedef enum kvt_tier_drain {
    KVT_TIER_SERVING = 0,  /* not drained */
    KVT_TIER_DRAINING = 1, /* no new blocks; its blocks are moving down */
    KVT_TIER_RETIRED = 2,  /* empty; nothing placed on it until cancelled */
} kvt_tier_drain_t;
typedef struct kvt_drain_info {
    uint32_t tier_id;
    kvt_tier_drain_t state; /* after the call */
    char next_tier[64];     /* where its blocks go, while draining */
    uint64_t blocks_left;   /* slots in use on the tier */
    uint64_t blocks_moved;  /* moved down by this drain so far */
    uint64_t elapsed_ms;    /* since the drain began (0: none) */
} kvt_drain_info_t;
int kvt_drain(kvt_client_t *c, const char *tier, unsigned flags, kvt_drain_info_t *out);

/* An operator's hand-over (kvtier leader resign; docs/OPERATIONS.md "Handing
 * leadership over"): the leader stops opening windows (every prepare kind is
 * answered NOT_LEADER without a leader epoch, which libkvtier waits out as a
 * failover: it looks for the leader again with back-off, keeping its open
 * windows), lets the windows already open complete for up to wait_s seconds
 * (0: KVT_RESIGN_WAIT_DEFAULT_S, at most KVT_RESIGN_WAIT_MAX_S), then answers,
 * revokes its etcd lease and holds off campaigning for one lease TTL, so that a
 * standby coordinator takes over; it stays up as a standby. Windows still open
 * then are left to lapse: their completes end -KVT_ABORTED. Keep wait_s under
 * the engines' failover_ms, or their prepares give up first (NOT_LEADER).
 * This call blocks until the hand-over (its one call waits timeout_ms + wait_s),
 * then up to failover_ms for the new leader to answer, and fills *out (NULL ok).
 * It is never sent twice (a resend could make the new leader resign as well).
 * Refused: -KVT_CONFLICT when no other coordinator is registered in etcd (nobody
 * could take over) or a resign is already in progress; the leader is unchanged.
 * -KVT_INVALID_ARGUMENT for wait_s past the bound. */
#define KVT_RESIGN_WAIT_DEFAULT_S 10u
#define KVT_RESIGN_WAIT_MAX_S 300u
typedef struct kvt_resign_info {
    char old_leader[64];       /* the coordinator that resigned */
    uint64_t old_epoch;        /* its epoch */
    uint32_t windows_open;     /* windows open when it began */
    uint32_t windows_finished; /* ... closed before the hand-over */
    uint32_t windows_lapsed;   /* ... still open at the bound: left to lapse */
    uint32_t standbys;         /* other coordinators registered at the hand-over */
    uint64_t waited_ms;        /* from the request to the hand-over */
    char new_leader[64];       /* the coordinator that took over; "" when none answered
                                  within failover_ms */
    char new_leader_endpoint[256];
    uint64_t new_epoch; /* 0: not seen */
} kvt_resign_info_t;
int kvt_leader_resign(kvt_client_t *c, uint32_t wait_s, kvt_resign_info_t *out);

typedef struct kvt_tier_info {
    uint32_t tier_id;
    char name[64];
    char kind[16];
    char endpoint[256];
    uint64_t capacity;  /* slots */
    uint64_t slot_size; /* bytes */
    uint64_t used;      /* slots in use */
    bool up;
    kvt_tier_drain_t drain; /* kvtier drain: draining / retired */
    char pool[32];          /* the pool it is a member of; "" = a deployment tier */
} kvt_tier_info_t;

typedef struct kvt_cluster_info {
    char cluster[64];
    char leader_endpoint[256];
    uint64_t leader_epoch;
    char event_endpoint[256];
    uint32_t n_tiers; /* entries of tiers[] filled */
    kvt_tier_info_t tiers[KVT_MAX_TIERS];
    uint32_t total_tiers;            /* tiers the coordinator knows; > n_tiers: the list is cut */
    char event_replay_endpoint[256]; /* docs/EVENTS.md: "" when the leader has none */
    char vllm_event_endpoint[256];
    char vllm_replay_endpoint[256];
    bool resigning; /* the leader is handing over (kvt_leader_resign): no new windows */
    uint64_t etcd_cluster_id; /* the etcd cluster that elected the leader (etcd's
                                 cluster_id; 0: unknown) */
} kvt_cluster_info_t;

/* A reply listing fewer tiers than it says the cluster has (total_tiers > n_tiers)
 * is still 0: the caller sees the cut in total_tiers. */
int kvt_cluster_info(kvt_client_t *c, kvt_cluster_info_t *out);

typedef struct kvt_stat {
    char name[64];
    uint64_t value;
} kvt_stat_t;

/* Counters of the scheduler (all instances when instance_id is NULL), in the
 * scheduler's fixed order. The scheduler sends at most KVT_STATS_PAGE per reply;
 * these calls ask page after page until cap is filled or the list ends.
 *
 * kvt_stats_page writes counters offset, offset + 1, ... into out[0 .. *n), at most
 * cap, and sets *total (NULL ok) to how many the scheduler has, whatever cap is:
 * like snprintf, *total > offset + *n means more follow; call again from
 * offset + *n, or with cap = *total to get them all (cap 0 asks for the total only).
 * When the list changes length between pages (a tier came or went) the call starts
 * again from offset, at most 4 times, then fails with -KVT_CONFLICT.
 * kvt_stats is kvt_stats_page from offset 0 without the total: *n is what was
 * written, so use kvt_stats_page to know whether cap cut the list. */
int kvt_stats(kvt_client_t *c, const char *instance_id, kvt_stat_t *out, uint32_t cap, uint32_t *n);
int kvt_stats_page(kvt_client_t *c, const char *instance_id, uint32_t offset, kvt_stat_t *out,
                   uint32_t cap, uint32_t *n, uint32_t *total);

/* ---- data role ----
 * For each tier of a token, a handle on the tier actor's host (same host name and
 * boot id, kvt_options_t.host) maps
 * its shared-memory segment and copies with memcpy inside submit (no message; the
 * job is finished when submit returns, and reported by get_finished / wait like any
 * other). Otherwise (another host, disable_shm, the segment's epoch is not the
 * token's) the bytes go as frames to the tier actor: put bytes are copied into the
 * messages as they are sent (in chunks, some possibly later, from get_finished /
 * wait), get bytes are copied out of the replies. Either way the caller's buffers
 * must stay valid and unchanged until the job has been collected. Replies are read
 * only inside get_finished / wait: call them to make progress.
 * A job is in flight from a successful submit until get_finished / wait reports
 * it; at most max_in_flight jobs per handle (more: -KVT_UNAVAILABLE). A token has at
 * most one job in flight, and its complete is refused (-KVT_INVALID_ARGUMENT, token
 * kept) until that job finished. A job's keys record their outcome on the token:
 * complete(…, NULL) sends it. A job whose messages get no reply finishes with
 * -KVT_TIMEOUT after about timeout_ms.
 */

typedef struct kvt_job_result {
    uint64_t job_id;
    int status;      /* 0 or -code for the job as a whole */
    uint32_t n_keys; /* keys in the job */
    uint32_t n_failed;
} kvt_job_result_t;

/* bufs: one host buffer per token key, each bytes_per_block long (len). A job id is
 * chosen by the caller and must be unique among the handle's jobs in flight.
 * Returning 0 means accepted; the outcome comes once through get_finished / wait. */
int kvt_submit_get(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok, void *const *bufs,
                   size_t len);
int kvt_submit_put(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok, const void *const *bufs,
                   size_t len);
/* The service copies the token's blocks from their lower tiers to the head (the
 * migrator, tier actor to tier actor, ahead of demotions); no bytes pass through
 * the caller. The job finishes once they are copied; complete_prefetch then
 * commits the copied ones on the head. */
int kvt_submit_prefetch(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok);

/* Layer-wise moves, for an instance registered with segments > 1 (on this handle:
 * a data-role process registers the same spec again, which is OK; or on the handle
 * that exported an imported token, which carries the segments): segments
 * [first, first + count) of every key of the token, ptrs[i * count + s] the
 * buffer of key i's segment first + s, each bytes_per_block / segments bytes
 * (scatter / gather over an engine's paged cache). Each call is one job, reported
 * once like any other, so an engine waits for layer i while layer i + 1 moves.
 * - Gets take any ranges, in any order, as often as wanted.
 * - A put's calls cover the segments in order: each range starts where the last
 *   one ended (a gap, an overlap or a restart is INVALID_ARGUMENT, nothing moved),
 *   and a key is written (its checksum, over the whole block, computed) once its
 *   last segment is: a complete before that fails the key. Until then its slot
 *   holds a block that is not served.
 * - A key that failed in one job of the token stays failed in its later jobs (it
 *   is not moved again); complete(…, NULL) uses the last job's outcome.
 * On a tier this process maps (shared memory) the segments are copied in place.
 * Over frames whole blocks move: a put's segments gather in a staging buffer of
 * the token (n x bytes_per_block, at most KVT_SEGMENT_STAGING_MAX: more is
 * INVALID_ARGUMENT) and go when the last one is in; a get fetches the blocks once
 * and serves every range from there. */
#define KVT_SEGMENT_STAGING_MAX (256ull << 20)
int kvt_submit_get_segments(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok, uint32_t first,
                            uint32_t count, void *const *ptrs);
int kvt_submit_put_segments(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok, uint32_t first,
                            uint32_t count, const void *const *ptrs);

/* ---- Device buffers ----
 * The _ex submits take where the buffers are (a kvt_xfer_t; NULL is host memory, as
 * the calls above). With KVT_MEM_CUDA every pointer is CUDA device memory (checked:
 * INVALID_ARGUMENT naming the first that is not, or when the CUDA runtime cannot be
 * loaded — the message says what is missing). The copies between the device and the
 * host go on `stream` (NULL: a non-blocking stream of the handle's own, made on the
 * calling thread's current device at the first device submit) through pinned staging
 * of the handle (at most kvt_options_t.device_staging bytes held by its jobs at once:
 * a job needing more than is free is BUSY — collect jobs and submit again; more than
 * the whole bound is INVALID_ARGUMENT), then move as host bytes by the same paths
 * (shared memory or frames), checksums included:
 * - a put: the copy out of the device starts after wait_event (the engine's event
 *   that its kernels wrote the buffers; NULL: at once) and done_event is recorded
 *   when it is done (the engine may then reuse its buffers); the bytes go to the
 *   tier once it is, from a later kvt_get_finished / kvt_wait;
 * - a get: the bytes come from the tier into the staging, and the copy into the
 *   device starts after wait_event (the engine's event that the pages are free to
 *   overwrite), then done_event is recorded (the engine's kernels wait for it).
 * A get from a gpu tier on this host whose GPU is the buffers' maps the tier's arena
 * (its CUDA IPC handle, from ClusterInfo, once per tier epoch) and copies device to
 * device on the stream instead, after wait_event; a tier without IPC, on another GPU
 * or host (or with disable_shm) goes through the staging. A get from the host tier's
 * segment copies straight from the slots (the handle registers the segment with the
 * runtime) unless the tier asks readers to verify. Puts go through the staging.
 * The job is reported (once) when its last copy is done: for a get, after the bytes
 * are in device memory. Once a handle has loaded the runtime, its host submits check
 * their pointers too: device memory passed as host memory is INVALID_ARGUMENT. A device job's keys that failed in the host part are not copied
 * into the device; a key copied straight from a slot whose copy ran after the
 * token's lease lapsed (it waited that long for wait_event) fails EXPIRED after the
 * copy, so its pages hold bytes nobody vouches for. The handle's calls stay on one thread; the events are the caller's (the
 * handle records and waits on them, never destroys them). */
typedef enum kvt_mem {
    KVT_MEM_HOST = 0,
    KVT_MEM_CUDA = 1,
} kvt_mem_t;

typedef struct kvt_xfer {
    kvt_mem_t mem;    /* where the job's buffers are */
    void *stream;     /* cudaStream_t of the copies, or NULL */
    void *wait_event; /* cudaEvent_t the copies wait for, or NULL */
    void *done_event; /* cudaEvent_t recorded when they are done, or NULL */
} kvt_xfer_t;

int kvt_submit_get_ex(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok, void *const *bufs,
                      size_t len, const kvt_xfer_t *x);
int kvt_submit_put_ex(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok, const void *const *bufs,
                      size_t len, const kvt_xfer_t *x);
int kvt_submit_get_segments_ex(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok, uint32_t first,
                               uint32_t count, void *const *ptrs, const kvt_xfer_t *x);
int kvt_submit_put_segments_ex(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok, uint32_t first,
                               uint32_t count, const void *const *ptrs, const kvt_xfer_t *x);

/* ---- tokens across processes (issue 11 §3, docs/PROTOCOL.md "Token export") ----
 * A control-role process prepares, a data-role process (its own handle, connected
 * to the same cluster) moves the bytes:
 *   control: kvt_prepare_put(..., &tok); kvt_token_export(c, tok, buf, cap, &len);
 *   worker:  kvt_token_import(w, buf, len, &wt); kvt_submit_put(w, job, wt, ...);
 *            kvt_wait(w, ...)  (each job reported once, in the process that ran it);
 *            kvt_token_result_export(w, wt, rbuf, rcap, &rlen); kvt_token_release(w, &wt);
 *   control: kvt_token_result_import(c, tok, rbuf, rlen); kvt_complete_put(c, &tok, NULL).
 * An imported token takes every data-role call (submit_get / submit_put /
 * submit_prefetch / submit_*_segments, frames or shared memory as for the worker's
 * own tokens); it cannot be completed where it was imported (INVALID_ARGUMENT: send
 * the result back) and is freed there by kvt_token_release. A get+put token and its
 * halves are never exported. The exported lease keeps running: the worker's
 * transfers respect what was left of it at export. A worker that dies leaves the
 * window to lapse by its lease, as for a dead client (or the control side completes
 * it with every key failed).
 * Bad bytes (cut, altered, another magic or version, counts that disagree), a
 * token of another cluster (the cluster name in the bytes vs the one the importing
 * handle's leader names) and a result for another token or other keys are
 * -KVT_INVALID_ARGUMENT with what is wrong; nothing is applied. A token of a leader
 * that is gone (its leader epoch below the one the importing handle knows, or a
 * tier actor's leader fence refusing its transfer) ends -KVT_ABORTED, as in
 * "Failover" above; an epoch above the importing handle's leader even after asking
 * it again is -KVT_UNAVAILABLE (that handle has not found the new leader yet).
 *
 * Both exports write into the caller's buffer: *len always gets the size the
 * bytes take; buf NULL with cap 0 only asks for it (returns 0); a smaller cap is
 * -KVT_INVALID_ARGUMENT. An export of a token with a job in flight is refused
 * (INVALID_ARGUMENT), and so is a put token with layer-wise progress (its segments
 * go in order, in one process). */
int kvt_token_export(kvt_client_t *c, const kvt_token_t *tok, uint8_t *buf, size_t cap,
                     size_t *len);
/* A token of another handle as this handle's own for data-role calls. */
int kvt_token_import(kvt_client_t *c, const uint8_t *bytes, size_t len, kvt_token_t **tok);
/* What the token's jobs recorded (per key: moved or not, a put's checksums, the
 * layer-wise progress) as bytes for the process that prepared it. */
int kvt_token_result_export(kvt_client_t *c, const kvt_token_t *tok, uint8_t *buf, size_t cap,
                            size_t *len);
/* Applies a result to the token it was exported from (this handle prepared it):
 * complete(..., NULL) then sends what the worker's jobs recorded. */
int kvt_token_result_import(kvt_client_t *c, kvt_token_t *tok, const uint8_t *bytes, size_t len);
/* Frees an imported token without completing it (*tok = NULL); refused for a
 * token this handle prepared (complete it) or with a job in flight (kept). */
int kvt_token_release(kvt_client_t *c, kvt_token_t **tok);

/* Collects up to cap finished jobs without waiting, oldest finished first. */
int kvt_get_finished(kvt_client_t *c, kvt_job_result_t *out, uint32_t cap, uint32_t *n);
/* Waits until every listed job finished (or timeout: -KVT_TIMEOUT, the jobs stay
 * pending); results[i] is job_ids[i]'s outcome, and those jobs are collected.
 * timeout_ms < 0 waits without limit; 0 only takes what has arrived. An id not in
 * flight (or listed twice) is -KVT_INVALID_ARGUMENT. Returns 0 even when jobs
 * failed: their status is in results. */
int kvt_wait(kvt_client_t *c, const uint64_t *job_ids, uint32_t n, int timeout_ms,
             kvt_job_result_t *results);

#ifdef __cplusplus
}
#endif

#endif
