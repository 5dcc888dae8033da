/* coord_etcd.h — a small etcd v3 client over etcd's JSON gateway (/v3/, etcd >= 3.4):
 * leases, keys, the create-if-absent transaction used for elections, and a
 * streaming watch. It is what the elector, tier registration, the membership
 * watch and the client library's discovery stand on.
 *
 * Owns: one curl easy handle per coord_etcd_t (connections are reused across
 * calls), one thread + curl handle per coord_etcd_watch_t.
 * Never: asserts on what etcd answers (a malformed answer is -EBADMSG), retries a
 * request that may have reached etcd on another endpoint (only connection
 * failures move to the next endpoint), or blocks longer than the per-call timeout.
 *
 * Threads: a coord_etcd_t is NOT thread-safe; give each thread its own handle
 * (a blocking call on one handle never stalls another, so e.g. a lease keepalive
 * loop keeps its own handle). A coord_etcd_watch_t runs its callbacks on its own
 * thread.
 *
 * Errors: every call returns 0 or a negative errno-style code; the handle keeps a
 * message a person can act on (coord_etcd_last_error), e.g.
 * "etcd http://127.0.0.1:2379: kv/put: connection refused". Codes:
 *   -ECONNREFUSED / -EHOSTUNREACH / -ENETUNREACH  no endpoint could be reached
 *   -ETIMEDOUT   the call did not finish within the timeout
 *   -ECONNRESET  the connection broke mid-answer
 *   -ENOENT      key or lease not found (keepalive: the lease is gone)
 *   -EEXIST      lease_grant with an id that already exists
 *   -ENOBUFS     caller buffer too small (the needed size is reported)
 *   -EMSGSIZE    an answer or watch line larger than max_response
 *   -EBADMSG     etcd's answer is not what the gateway documents
 *   -ERANGE      revision compacted (or in the future)
 *   -EINVAL      bad argument (or etcd said INVALID_ARGUMENT)
 *   -EAGAIN      etcd unavailable for now (no leader, leader changed)
 *   -EPROTO      unexpected HTTP status (not an etcd >= 3.4 gateway?)
 *   others       mapped from etcd's gRPC code (-EACCES, -ENOSPC, -EPERM, -EIO, ...)
 */
#ifndef KVT_COORD_ETCD_H
#define KVT_COORD_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define COORD_ETCD_MAX_ENDPOINTS 16 /* endpoints per handle */
#define COORD_ETCD_ENDPOINT_MAX 256 /* bytes of one endpoint URL, NUL included */
#define COORD_ETCD_KEY_MAX 4096     /* bytes of a key we send */
#define COORD_ETCD_VALUE_MAX                                                                       \
    (1u << 20)                                     /* bytes of a value we send (etcd's request     \
                                                      limit is 1.5 MiB after base64) */
#define COORD_ETCD_TIMEOUT_MS_DEFAULT 2000         /* one call, all endpoint attempts together */
#define COORD_ETCD_CONNECT_MS_DEFAULT 500          /* one connection attempt */
#define COORD_ETCD_MAX_RESPONSE_DEFAULT (4u << 20) /* one answer / one watch line */
#define COORD_ETCD_RANGE_LIMIT_DEFAULT 1024        /* keys per range call when none given */
#define COORD_ETCD_ERR_MAX 512                     /* bytes of the last-error message */

/* TLS towards etcd (https:// endpoints; docs/SECURITY.md "etcd"): the CA that signed
 * etcd's certificate (NULL: the system's store) and this process's client
 * certificate and key (etcd --client-cert-auth; NULL: none), PEM files. Two scopes:
 * coord_etcd_set_tls sets the process's (on the main thread before any handle or
 * watch is made; those made after use it), and coord_etcd_config_t.tls gives one
 * handle or watch its own instead (libkvtier's kvt_options etcd_*_file).
 * 0, or -EINVAL with err naming the file that cannot be read, or a cert without its key. */
#define COORD_ETCD_TLS_PATH_MAX 256 /* bytes of a TLS file path, NUL included */

typedef struct {
    const char *ca_file;
    const char *cert_file;
    const char *key_file;
} coord_etcd_tls_t;

typedef struct {
    const char *const *endpoints; /* "http://host:port" each; tried in order */
    size_t n_endpoints;           /* 1..COORD_ETCD_MAX_ENDPOINTS */
    int timeout_ms;               /* per call; 0: COORD_ETCD_TIMEOUT_MS_DEFAULT */
    int connect_timeout_ms;       /* per endpoint attempt; 0: COORD_ETCD_CONNECT_MS_DEFAULT */
    size_t max_response;          /* bytes; 0: COORD_ETCD_MAX_RESPONSE_DEFAULT */
    size_t range_limit;           /* 0: COORD_ETCD_RANGE_LIMIT_DEFAULT */
    /* this handle's TLS files, checked as coord_etcd_set_tls checks them (a bad one:
     * coord_etcd_new / coord_etcd_watch_new return NULL); NULL: the process's */
    const coord_etcd_tls_t *tls;
} coord_etcd_config_t;

typedef struct coord_etcd coord_etcd_t;

/* One key/value as etcd stores it. Pointers are valid only during the callback
 * (or until the next call on the handle); key is NUL-terminated for convenience
 * (key_len excludes the NUL; etcd keys may contain NUL bytes). */
typedef struct {
    const char *key;
    size_t key_len;
    const uint8_t *value;
    size_t value_len;
    int64_t create_revision;
    int64_t mod_revision;
    int64_t version;
    int64_t lease; /* 0: none */
} coord_etcd_kv_t;

/* Revisions and lease of a key read by get / create_if_absent. */
typedef struct {
    int64_t create_revision;
    int64_t mod_revision;
    int64_t version;
    int64_t lease;
} coord_etcd_meta_t;

int coord_etcd_set_tls(const coord_etcd_tls_t *tls, char *err, size_t errlen);

/* The same checks without setting anything (a handle's own files, before
 * coord_etcd_config_t.tls names them). */
int coord_etcd_tls_check(const coord_etcd_tls_t *tls, char *err, size_t errlen);

/* Returns NULL on a bad config (no or too many endpoints, an endpoint too long)
 * or when out of memory. Endpoints are copied. */
coord_etcd_t *coord_etcd_new(const coord_etcd_config_t *cfg);
/* Frees the handle and nulls *pe; NULL-safe and idempotent. */
void coord_etcd_destroy(coord_etcd_t **pe);

/* Message for the last failing call ("" when the last call succeeded). Never NULL. */
const char *coord_etcd_last_error(const coord_etcd_t *e);

/* The etcd cluster's id (ResponseHeader.cluster_id: etcd derives it from the
 * initial members' peer URLs and --initial-cluster-token, which deploy/supervise
 * makes unique per start of its embedded etcd) of the
 * last answer this handle got; 0 before any. Two deployments with the same cluster
 * name but their own etcd differ here (kvtier status --check compares it). */
uint64_t coord_etcd_cluster_id(const coord_etcd_t *e);
/* Endpoint the handle talks to now (the last one that could be reached). */
const char *coord_etcd_endpoint(const coord_etcd_t *e);

/* Leases. IDs are etcd's int64 (they exceed 2^53; never round them through a
 * double). want_id 0 lets etcd choose; -EEXIST when want_id is taken.
 * etcd raises TTLs below its minimum (about 1 s with a 100 ms election timeout). */
int coord_etcd_lease_grant(coord_etcd_t *e, int64_t ttl_s, int64_t want_id, int64_t *id,
                           int64_t *granted_ttl_s);
/* One keepalive round; *ttl_s gets the remaining TTL. -ENOENT: the lease is gone
 * (expired or revoked) — everything attached to it has been deleted. */
int coord_etcd_lease_keepalive(coord_etcd_t *e, int64_t id, int64_t *ttl_s);
/* Revokes the lease and deletes its keys. -ENOENT when it does not exist. */
int coord_etcd_lease_revoke(coord_etcd_t *e, int64_t id);

/* Puts value (len bytes, may contain zeros; value may be NULL when len is 0)
 * under key, attached to lease (0: none). *revision (optional) gets the
 * revision of the write. -ENOENT: the lease does not exist. */
int coord_etcd_put(coord_etcd_t *e, const char *key, const void *value, size_t len, int64_t lease,
                   int64_t *revision);

/* coord_etcd_put that also returns, from the same write, the value the key held
 * before it: into prev (prev_cap bytes; *prev_len its size, -ENOBUFS when it does
 * not fit, the write done all the same); *had_prev false when the key was new. */
int coord_etcd_put_prev(coord_etcd_t *e, const char *key, const void *value, size_t len,
                        int64_t lease, void *prev, size_t prev_cap, size_t *prev_len,
                        bool *had_prev);

/* Reads key into buf (cap bytes). *len gets the value's size; -ENOBUFS when cap
 * is smaller (nothing copied, *len says what is needed; buf may be NULL with cap
 * 0 to ask for the size only). -ENOENT when absent. meta is optional. */
int coord_etcd_get(coord_etcd_t *e, const char *key, void *buf, size_t cap, size_t *len,
                   coord_etcd_meta_t *meta);

/* Range over every key starting with prefix ("" = all keys), ascending by key. */
typedef struct {
    const char *after_key; /* NULL: from the start of the prefix; else strictly after
                              this key (paging: pass the last key seen) */
    size_t limit;          /* keys this call; 0: the handle's range_limit */
    int64_t revision;      /* 0: latest; else read at this revision (consistent pages) */
} coord_etcd_range_opts_t;

typedef struct {
    size_t count;     /* keys delivered */
    bool more;        /* keys remain after the last one delivered */
    int64_t revision; /* store revision the read saw: watch from revision + 1 */
} coord_etcd_range_info_t;

/* fn returns 0 to go on; any other value stops the range, which returns it. */
typedef int (*coord_etcd_kv_fn)(const coord_etcd_kv_t *kv, void *arg);

/* opts and info are optional. */
int coord_etcd_range(coord_etcd_t *e, const char *prefix, const coord_etcd_range_opts_t *opts,
                     coord_etcd_kv_fn fn, void *arg, coord_etcd_range_info_t *info);

/* Delete one key / every key under prefix (an empty prefix is refused: -EINVAL).
 * *deleted (optional) gets the count (0 is not an error). */
int coord_etcd_delete(coord_etcd_t *e, const char *key, int64_t *deleted);
int coord_etcd_delete_prefix(coord_etcd_t *e, const char *prefix, int64_t *deleted);

/* Deletes key only while its value is exactly value[0..len) (one transaction:
 * compare VALUE, then delete), so a record another writer replaced survives.
 * *deleted (optional): whether it was deleted. 0, or a negative errno. */
int coord_etcd_delete_if_value(coord_etcd_t *e, const char *key, const void *value, size_t len,
                               bool *deleted);

/* The non-blocking election primitive: one transaction that puts key = value
 * (with lease) only if the key does not exist (create_revision == 0), and
 * otherwise reads it. *won says which; cur/cur_meta get the key as it is after
 * the transaction (ours when won, the holder's when lost). cur may be NULL with
 * cur_cap 0 when only *cur_len is wanted. When cur is too small the call returns
 * -ENOBUFS with *won and *cur_len still set (the transaction did happen). */
int coord_etcd_create_if_absent(coord_etcd_t *e, const char *key, const void *value, size_t len,
                                int64_t lease, bool *won, void *cur, size_t cur_cap,
                                size_t *cur_len, coord_etcd_meta_t *cur_meta);

/* Compacts the key history up to revision (watches from older revisions then
 * fail with -ERANGE). */
int coord_etcd_compact(coord_etcd_t *e, int64_t revision);

/* ---- watch ----------------------------------------------------------------- */

typedef enum { COORD_ETCD_EVENT_PUT = 0, COORD_ETCD_EVENT_DELETE = 1 } coord_etcd_event_type_t;

/* For DELETE the value is empty and kv.mod_revision is the deletion's revision. */
typedef struct {
    coord_etcd_event_type_t type;
    coord_etcd_kv_t kv;
} coord_etcd_event_t;

typedef struct {
    int err;                  /* 0: stopped by coord_etcd_watch_destroy; the event
                                 callback's non-zero return; or a negative code */
    int64_t last_revision;    /* everything up to here was delivered: resume the watch
                                 from last_revision + 1 */
    int64_t compact_revision; /* err == -ERANGE: oldest revision still available */
    const char *message;      /* what happened, for a person ("" when stopped) */
} coord_etcd_watch_end_t;

/* Run on the watch thread. Return 0 to go on, non-zero to end the watch. Must not
 * destroy the watch it belongs to. */
typedef int (*coord_etcd_event_fn)(const coord_etcd_event_t *ev, void *arg);
/* Run once on the watch thread, last; err as in coord_etcd_watch_end_t. */
typedef void (*coord_etcd_watch_end_fn)(const coord_etcd_watch_end_t *end, void *arg);

typedef struct {
    const char *key;                /* the key, or the prefix when prefix is true */
    bool prefix;                    /* watch every key starting with key ("" = all) */
    int64_t start_revision;         /* 0: from now; else from this revision on */
    coord_etcd_event_fn on_event;   /* required */
    coord_etcd_watch_end_fn on_end; /* optional */
    void *arg;
} coord_etcd_watch_spec_t;

typedef struct coord_etcd_watch coord_etcd_watch_t;

/* Starts the watch on its own thread and connection (endpoints, connect timeout
 * and max_response — the longest accepted stream line — come from cfg; the stream
 * itself has no timeout). Returns NULL on bad arguments or when out of memory;
 * connection and etcd errors end the watch through on_end. */
coord_etcd_watch_t *coord_etcd_watch_new(const coord_etcd_config_t *cfg,
                                         const coord_etcd_watch_spec_t *spec);
/* Waits until etcd confirmed the watch (events after that are not missed even
 * with start_revision 0). 0 when created, -ETIMEDOUT, or the error that ended it. */
int coord_etcd_watch_wait_created(coord_etcd_watch_t *w, int timeout_ms);
/* Stops the watch (wakes its thread at once, not at the next poll tick), joins it
 * — on_end has run when this returns — frees it and nulls *pw. NULL-safe. */
void coord_etcd_watch_destroy(coord_etcd_watch_t **pw);

#endif
