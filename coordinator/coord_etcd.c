/* coord_etcd.c — etcd v3 JSON-gateway client: unary calls on one reused curl easy
 * handle, and a streaming watch on its own thread and curl multi handle.
 * Owns the HTTP transport, endpoint fail-over and error messages; parsing lives in
 * coord_etcd_json.c. Never retries on another endpoint once a request may have
 * reached etcd (only connection failures move on), never waits past the
 * configured timeout, never trusts an answer. */
#include "coord_etcd.h"

#include <curl/curl.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bus_fault.h"
#include "coord_base64.h"
#include "coord_etcd_json.h"

/* TLS files of a handle or of the process; "" = not set. */
typedef struct {
    char ca[COORD_ETCD_TLS_PATH_MAX];
    char cert[COORD_ETCD_TLS_PATH_MAX];
    char key[COORD_ETCD_TLS_PATH_MAX];
} s_tls_files_t;

struct coord_etcd {
    char endpoints[COORD_ETCD_MAX_ENDPOINTS][COORD_ETCD_ENDPOINT_MAX];
    size_t n_endpoints;
    size_t cur; /* endpoint tried first: the last one that could be reached */
    int timeout_ms;
    int connect_timeout_ms;
    size_t max_response;
    size_t range_limit;
    CURL *curl;
    struct curl_slist *headers;
    s_tls_files_t tls;
    char *resp; /* answer of the current call, NUL-terminated */
    size_t resp_len;
    size_t resp_cap;
    bool resp_overflow;
    coord_scratch_t scratch;
    char curl_err[CURL_ERROR_SIZE];
    char err[COORD_ETCD_ERR_MAX];
    uint64_t cluster_id; /* header.cluster_id of the last answer (0: none yet) */
};

/* ---- shared helpers ------------------------------------------------------- */

static pthread_once_t s_curl_once = PTHREAD_ONCE_INIT;
static CURLcode s_curl_init_rc = CURLE_FAILED_INIT;

/* curl_global_init is not safe to race with other threads using curl: run it
 * once, before the first handle exists. Never cleaned up (process lifetime). */
static void s_curl_global_init(void)
{
    s_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int s_curl_ready(void)
{
    pthread_once(&s_curl_once, s_curl_global_init);
    return s_curl_init_rc == CURLE_OK ? 0 : -ENOMEM;
}

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Copies and checks the endpoint list: non-empty, bounded, trailing '/' removed. */
static int s_copy_endpoints(const coord_etcd_config_t *cfg, char out[][COORD_ETCD_ENDPOINT_MAX],
                            size_t *n)
{
    if (!cfg || !cfg->endpoints || cfg->n_endpoints == 0 ||
        cfg->n_endpoints > COORD_ETCD_MAX_ENDPOINTS)
        return -EINVAL;
    for (size_t i = 0; i < cfg->n_endpoints; i++) {
        const char *ep = cfg->endpoints[i];
        size_t len = ep ? strlen(ep) : 0;
        while (len > 0 && ep[len - 1] == '/')
            len--;
        if (len == 0 || len >= COORD_ETCD_ENDPOINT_MAX)
            return -EINVAL;
        memcpy(out[i], ep, len);
        out[i][len] = '\0';
    }
    *n = cfg->n_endpoints;
    return 0;
}

/* Lower-case first letter so strerror() reads well inside a sentence. */
static void s_reason_errno(char *buf, size_t cap, int err)
{
    snprintf(buf, cap, "%s", strerror(err));
    if (buf[0])
        buf[0] = (char)tolower((unsigned char)buf[0]);
}

/* Maps a failed transfer to a code and a reason. *conn_failed says the request
 * never reached the server, so another endpoint may be tried safely. */
static int s_curl_failure(CURL *c, CURLcode rc, const char *curl_err, char *reason, size_t cap,
                          bool *conn_failed)
{
    long os_err = 0, sent = 0;
    curl_off_t connect_us = 0;
    curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &os_err);
    curl_easy_getinfo(c, CURLINFO_CONNECT_TIME_T, &connect_us);
    /* A reused connection reports a connect time of 0 too: only "no request byte
     * sent" proves etcd cannot have acted on the request. */
    curl_easy_getinfo(c, CURLINFO_REQUEST_SIZE, &sent);
    *conn_failed = false;
    switch (rc) {
    case CURLE_COULDNT_CONNECT: {
        int e = os_err > 0 ? (int)os_err : ECONNREFUSED;
        *conn_failed = true;
        s_reason_errno(reason, cap, e);
        return -e;
    }
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        *conn_failed = true;
        snprintf(reason, cap, "cannot resolve host (%s)", curl_err[0] ? curl_err : "no detail");
        return -EHOSTUNREACH;
    case CURLE_OPERATION_TIMEDOUT:
        *conn_failed = connect_us == 0 && sent == 0;
        snprintf(reason, cap, "%s", *conn_failed ? "connect timed out" : "timed out");
        return -ETIMEDOUT;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
        snprintf(reason, cap, "connection broken (%s)", curl_err[0] ? curl_err : "no detail");
        return -ECONNRESET;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
        snprintf(reason, cap, "bad endpoint URL (%s)", curl_err[0] ? curl_err : "no detail");
        return -EINVAL;
    case CURLE_OUT_OF_MEMORY:
        snprintf(reason, cap, "out of memory");
        return -ENOMEM;
    default:
        snprintf(reason, cap, "%s", curl_err[0] ? curl_err : curl_easy_strerror(rc));
        return -EIO;
    }
}

/* ---- handle --------------------------------------------------------------- */

static size_t s_write_cb(char *data, size_t size, size_t nmemb, void *arg)
{
    coord_etcd_t *e = arg;
    size_t n = size * nmemb;
    if (n > e->max_response - e->resp_len) {
        e->resp_overflow = true;
        return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
    }
    if (e->resp_len + n + 1 > e->resp_cap) {
        size_t cap = e->resp_cap ? e->resp_cap : 4096;
        while (cap < e->resp_len + n + 1)
            cap *= 2;
        char *b = realloc(e->resp, cap);
        if (!b)
            return 0;
        e->resp = b;
        e->resp_cap = cap;
    }
    memcpy(e->resp + e->resp_len, data, n);
    e->resp_len += n;
    e->resp[e->resp_len] = '\0';
    return n;
}

/* The process's TLS files (coord_etcd_set_tls); "" = not set. */
static s_tls_files_t s_tls;

static int s_tls_file(const char *what, const char *file, char *out, char *err, size_t errlen)
{
    out[0] = '\0';
    if (!file || !file[0])
        return 0;
    if (strlen(file) >= COORD_ETCD_TLS_PATH_MAX) {
        snprintf(err, errlen, "etcd tls %s: path longer than %d bytes", what,
                 COORD_ETCD_TLS_PATH_MAX - 1);
        return -EINVAL;
    }
    if (access(file, R_OK) != 0) {
        snprintf(err, errlen, "etcd tls %s: %s: %s", what, file, strerror(errno));
        return -EINVAL;
    }
    snprintf(out, COORD_ETCD_TLS_PATH_MAX, "%s", file);
    return 0;
}

/* Checks tls and copies it into out (all "" on failure). */
static int s_tls_set(s_tls_files_t *out, const coord_etcd_tls_t *tls, char *err, size_t errlen)
{
    bool cert = tls && tls->cert_file && tls->cert_file[0];
    bool key = tls && tls->key_file && tls->key_file[0];
    if (cert != key) {
        snprintf(err, errlen, "etcd tls: a client certificate needs its key (%s is missing)",
                 cert ? "key" : "cert");
        out->ca[0] = out->cert[0] = out->key[0] = '\0';
        return -EINVAL;
    }
    if (s_tls_file("ca", tls ? tls->ca_file : NULL, out->ca, err, errlen) < 0 ||
        s_tls_file("cert", tls ? tls->cert_file : NULL, out->cert, err, errlen) < 0 ||
        s_tls_file("key", tls ? tls->key_file : NULL, out->key, err, errlen) < 0) {
        out->ca[0] = out->cert[0] = out->key[0] = '\0';
        return -EINVAL;
    }
    return 0;
}

int coord_etcd_set_tls(const coord_etcd_tls_t *tls, char *err, size_t errlen)
{
    return s_tls_set(&s_tls, tls, err, errlen);
}

int coord_etcd_tls_check(const coord_etcd_tls_t *tls, char *err, size_t errlen)
{
    s_tls_files_t scratch;
    return s_tls_set(&scratch, tls, err, errlen);
}

/* A handle's files: its own (cfg->tls, checked) or the process's. */
static int s_tls_pick(const coord_etcd_config_t *cfg, s_tls_files_t *out)
{
    if (!cfg->tls) {
        *out = s_tls;
        return 0;
    }
    char err[COORD_ETCD_ERR_MAX];
    return s_tls_set(out, cfg->tls, err, sizeof err);
}

static void s_apply_tls(CURL *c, const s_tls_files_t *tls)
{
    if (tls->ca[0])
        curl_easy_setopt(c, CURLOPT_CAINFO, tls->ca);
    if (tls->cert[0]) {
        curl_easy_setopt(c, CURLOPT_SSLCERT, tls->cert);
        curl_easy_setopt(c, CURLOPT_SSLKEY, tls->key);
    }
}

coord_etcd_t *coord_etcd_new(const coord_etcd_config_t *cfg)
{
    if (s_curl_ready() < 0)
        return NULL;
    coord_etcd_t *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    if (s_copy_endpoints(cfg, e->endpoints, &e->n_endpoints) < 0 || s_tls_pick(cfg, &e->tls) < 0)
        goto out_free;
    e->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : COORD_ETCD_TIMEOUT_MS_DEFAULT;
    e->connect_timeout_ms =
        cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : COORD_ETCD_CONNECT_MS_DEFAULT;
    e->max_response = cfg->max_response ? cfg->max_response : COORD_ETCD_MAX_RESPONSE_DEFAULT;
    e->range_limit = cfg->range_limit ? cfg->range_limit : COORD_ETCD_RANGE_LIMIT_DEFAULT;
    e->scratch.max = e->max_response;
    e->curl = curl_easy_init();
    if (!e->curl)
        goto out_free;
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    /* Go's server answers 100-continue, but the extra round trip is useless here. */
    struct curl_slist *h2 = h ? curl_slist_append(h, "Expect:") : NULL;
    if (!h2) {
        curl_slist_free_all(h);
        goto out_curl;
    }
    e->headers = h2;
    curl_easy_setopt(e->curl, CURLOPT_HTTPHEADER, e->headers);
    s_apply_tls(e->curl, &e->tls);
    curl_easy_setopt(e->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e->curl, CURLOPT_PROXY, ""); /* ignore http_proxy for etcd */
    curl_easy_setopt(e->curl, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e->curl, CURLOPT_WRITEFUNCTION, s_write_cb);
    curl_easy_setopt(e->curl, CURLOPT_WRITEDATA, e);
    curl_easy_setopt(e->curl, CURLOPT_ERRORBUFFER, e->curl_err);
    return e;
out_curl:
    curl_easy_cleanup(e->curl);
out_free:
    free(e);
    return NULL;
}

void coord_etcd_destroy(coord_etcd_t **pe)
{
    if (!pe || !*pe)
        return;
    coord_etcd_t *e = *pe;
    curl_easy_cleanup(e->curl);
    curl_slist_free_all(e->headers);
    free(e->resp);
    coord_scratch_free(&e->scratch);
    free(e);
    *pe = NULL;
}

const char *coord_etcd_last_error(const coord_etcd_t *e)
{
    return e ? e->err : "no etcd handle";
}

const char *coord_etcd_endpoint(const coord_etcd_t *e)
{
    return e ? e->endpoints[e->cur] : "";
}

static int s_fail(coord_etcd_t *e, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_fail(coord_etcd_t *e, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof e->err, fmt, ap);
    va_end(ap);
    return rc;
}

/* One attempt on endpoint ep. Returns 0 with the answer in e->resp, or a code
 * (*conn_failed when the request never left). */
static int s_attempt(coord_etcd_t *e, const char *ep, const char *path, const char *body,
                     size_t body_len, int64_t remaining_ms, long *http, char *reason, size_t cap,
                     bool *conn_failed)
{
    char url[COORD_ETCD_ENDPOINT_MAX + 64];
    snprintf(url, sizeof url, "%s/v3/%s", ep, path);
    e->resp_len = 0;
    e->resp_overflow = false;
    e->curl_err[0] = '\0';
    long connect_ms =
        remaining_ms < e->connect_timeout_ms ? (long)remaining_ms : (long)e->connect_timeout_ms;
    curl_easy_setopt(e->curl, CURLOPT_URL, url);
    curl_easy_setopt(e->curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    curl_easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, (long)remaining_ms);
    curl_easy_setopt(e->curl, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    CURLcode rc = curl_easy_perform(e->curl);
    *conn_failed = false;
    if (rc == CURLE_WRITE_ERROR && e->resp_overflow) {
        snprintf(reason, cap, "answer larger than %zu bytes", e->max_response);
        return -EMSGSIZE;
    }
    if (rc != CURLE_OK)
        return s_curl_failure(e->curl, rc, e->curl_err, reason, cap, conn_failed);
    curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, http);
    if (!e->resp) { /* empty body: keep e->resp a valid string */
        e->resp = calloc(1, 64);
        e->resp_cap = e->resp ? 64 : 0;
    }
    return e->resp ? 0 : -ENOMEM;
}

/* Faults on purpose at etcd.request (bus_fault.h): 0 to go on (after a delay),
 * or the injected failure, as a real one would read (with "injected" in it). */
static int s_fault(coord_etcd_t *e, const char *path)
{
    bus_fault_hit_t hit;
    if (!bus_fault_fire(BUS_FAULT_ETCD_REQUEST, &hit))
        return 0;
    uint32_t ms = hit.ms && hit.ms < (uint32_t)e->timeout_ms ? hit.ms : (uint32_t)e->timeout_ms;
    if (hit.action == BUS_FAULT_DELAY || hit.action == BUS_FAULT_TIMEOUT) {
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
    if (hit.action == BUS_FAULT_TIMEOUT)
        return s_fail(e, -ETIMEDOUT, "etcd %s: %s: timed out after %u ms (injected fault)",
                      e->endpoints[e->cur], path, ms);
    if (hit.action == BUS_FAULT_ERROR)
        return s_fail(e, -hit.err, "etcd %s: %s: %s (injected fault)", e->endpoints[e->cur], path,
                      strerror(hit.err));
    return 0;
}

/* POSTs body to /v3/<path>, trying endpoints from the current one on connection
 * failures, within the handle's timeout. On success *root is the answer (a JSON
 * object without an "error" member); the caller owns it. */
static int s_call(coord_etcd_t *e, const char *path, json_t *req, json_t **root)
{
    *root = NULL;
    e->err[0] = '\0';
    int frc = s_fault(e, path);
    if (frc < 0)
        return frc;
    char *body = json_dumps(req, JSON_COMPACT);
    if (!body)
        return s_fail(e, -ENOMEM, "etcd %s: out of memory", path);
    int64_t deadline = s_now_ms() + e->timeout_ms;
    char reason[COORD_ETCD_ERR_MAX / 2] = "";
    int rc = -ETIMEDOUT;
    size_t unreachable = 0; /* endpoints that refused or did not answer the connect */
    const char *ep = e->endpoints[e->cur];
    long http = 0;
    while (unreachable < e->n_endpoints) {
        int64_t remaining = deadline - s_now_ms();
        if (remaining <= 0) {
            rc = -ETIMEDOUT;
            snprintf(reason, sizeof reason, "timed out after %d ms", e->timeout_ms);
            break;
        }
        ep = e->endpoints[e->cur];
        bool conn_failed = false;
        rc = s_attempt(e, ep, path, body, strlen(body), remaining, &http, reason, sizeof reason,
                       &conn_failed);
        if (rc == 0 || !conn_failed)
            break;
        unreachable++;
        e->cur = (e->cur + 1) % e->n_endpoints;
    }
    free(body);
    if (rc < 0)
        return s_fail(e, rc, "etcd %s: %s: %s%s", ep, path, reason,
                      unreachable > 1 ? " (no endpoint could be reached)" : "");
    char jerr[256];
    rc = coord_json_load(e->resp, e->resp_len, root, jerr, sizeof jerr);
    if (rc < 0) {
        if (http != 200)
            return s_fail(e, -EPROTO, "etcd %s: %s: HTTP %ld (not an etcd >= 3.4 JSON gateway?)",
                          ep, path, http);
        return s_fail(e, rc, "etcd %s: %s: %s", ep, path, jerr);
    }
    char msg[256] = "";
    rc = coord_json_error(*root, msg, sizeof msg);
    if (rc == 0 && http != 200)
        rc = -EPROTO;
    if (rc < 0) {
        json_decref(*root);
        *root = NULL;
        return s_fail(e, rc, "etcd %s: %s: %s (HTTP %ld)", ep, path, msg[0] ? msg : "error", http);
    }
    /* which etcd cluster answered: the gateway writes the uint64 as a string */
    const json_t *cid = json_object_get(json_object_get(*root, "header"), "cluster_id");
    if (json_is_string(cid)) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(json_string_value(cid), &end, 10);
        if (!errno && end && !*end)
            e->cluster_id = (uint64_t)v;
    } else if (json_is_integer(cid) && json_integer_value(cid) > 0) {
        e->cluster_id = (uint64_t)json_integer_value(cid);
    }
    return 0;
}

uint64_t coord_etcd_cluster_id(const coord_etcd_t *e)
{
    return e ? e->cluster_id : 0;
}

static int s_bad_answer(coord_etcd_t *e, const char *path, int rc)
{
    if (rc == -EMSGSIZE)
        return s_fail(e, rc, "etcd %s: %s: decoded answer larger than %zu bytes",
                      e->endpoints[e->cur], path, e->max_response);
    return s_fail(e, rc < 0 ? rc : -EBADMSG, "etcd %s: %s: malformed answer", e->endpoints[e->cur],
                  path);
}

/* ---- request building ----------------------------------------------------- */

/* A JSON string holding the base64 of n bytes (NULL when out of memory). */
static json_t *s_b64(const void *p, size_t n)
{
    size_t len = coord_base64_encoded_len(n);
    char *buf = malloc(len + 1);
    if (!buf)
        return NULL;
    coord_base64_encode(p, n, buf, len + 1);
    json_t *s = json_stringn(buf, len);
    free(buf);
    return s;
}

/* int64 as the gateway wants it: a decimal string. */
static json_t *s_i64(int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return json_string(buf);
}

/* Sets obj[name] and consumes v; -ENOMEM if v is NULL or the set fails. */
static int s_set(json_t *obj, const char *name, json_t *v)
{
    if (!v)
        return -ENOMEM;
    return json_object_set_new(obj, name, v) == 0 ? 0 : -ENOMEM;
}

/* The end of the range covering every key that starts with p[0..n): p with its
 * last byte below 0xff incremented and what follows dropped; "\0" (every key from
 * p on) when there is no such byte. out holds n bytes; returns the length. */
static size_t s_prefix_end(const char *p, size_t n, char *out)
{
    memcpy(out, p, n);
    for (size_t i = n; i > 0; i--) {
        if ((unsigned char)out[i - 1] != 0xff) {
            out[i - 1] = (char)((unsigned char)out[i - 1] + 1);
            return i;
        }
    }
    out[0] = '\0';
    return 1;
}

static int s_check_key(coord_etcd_t *e, const char *key, bool allow_empty)
{
    size_t n = key ? strlen(key) : 0;
    if (!key || (n == 0 && !allow_empty) || n > COORD_ETCD_KEY_MAX)
        return s_fail(e, -EINVAL, "etcd: key missing, empty or longer than %d bytes",
                      COORD_ETCD_KEY_MAX);
    return 0;
}

/* Adds "key" (and "range_end" for a prefix) to req. */
static int s_set_key(json_t *req, const char *key, bool prefix)
{
    size_t n = strlen(key);
    int rc = s_set(req, "key", n ? s_b64(key, n) : s_b64("", 1));
    if (rc < 0 || !prefix)
        return rc;
    char end[COORD_ETCD_KEY_MAX + 1];
    size_t elen = n ? s_prefix_end(key, n, end) : (end[0] = '\0', 1);
    return s_set(req, "range_end", s_b64(end, elen));
}

/* ---- leases --------------------------------------------------------------- */

int coord_etcd_lease_grant(coord_etcd_t *e, int64_t ttl_s, int64_t want_id, int64_t *id,
                           int64_t *granted_ttl_s)
{
    if (!e || ttl_s <= 0 || want_id < 0 || !id)
        return e ? s_fail(e, -EINVAL, "etcd lease/grant: bad argument") : -EINVAL;
    json_t *req = json_object(), *root = NULL;
    int rc = req ? s_set(req, "TTL", s_i64(ttl_s)) : -ENOMEM;
    if (rc == 0 && want_id)
        rc = s_set(req, "ID", s_i64(want_id));
    if (rc < 0)
        goto out;
    rc = s_call(e, "lease/grant", req, &root);
    if (rc == -EPERM && strstr(e->err, "already exists"))
        rc = -EEXIST; /* FAILED_PRECONDITION here means the requested ID is taken */
    if (rc < 0)
        goto out;
    int64_t ttl = 0;
    rc = coord_json_lease_grant(root, id, &ttl);
    if (rc < 0) {
        rc = s_bad_answer(e, "lease/grant", rc);
        goto out;
    }
    if (granted_ttl_s)
        *granted_ttl_s = ttl;
out:
    json_decref(root);
    json_decref(req);
    return rc == -ENOMEM ? s_fail(e, rc, "etcd lease/grant: out of memory") : rc;
}

static int s_lease_call(coord_etcd_t *e, const char *path, int64_t id, json_t **root)
{
    json_t *req = json_object();
    int rc = req ? s_set(req, "ID", s_i64(id)) : -ENOMEM;
    if (rc == 0)
        rc = s_call(e, path, req, root);
    else
        s_fail(e, rc, "etcd %s: out of memory", path);
    json_decref(req);
    return rc;
}

int coord_etcd_lease_keepalive(coord_etcd_t *e, int64_t id, int64_t *ttl_s)
{
    if (!e || id <= 0)
        return e ? s_fail(e, -EINVAL, "etcd lease/keepalive: bad lease id") : -EINVAL;
    json_t *root = NULL;
    int rc = s_lease_call(e, "lease/keepalive", id, &root);
    if (rc < 0)
        return rc;
    int64_t ttl = 0;
    rc = coord_json_lease_keepalive(root, &ttl);
    json_decref(root);
    if (rc == -ENOENT)
        return s_fail(e, rc, "etcd %s: lease %" PRId64 " is gone (expired or revoked)",
                      e->endpoints[e->cur], id);
    if (rc < 0)
        return s_bad_answer(e, "lease/keepalive", rc);
    if (ttl_s)
        *ttl_s = ttl;
    return 0;
}

int coord_etcd_lease_revoke(coord_etcd_t *e, int64_t id)
{
    if (!e || id <= 0)
        return e ? s_fail(e, -EINVAL, "etcd lease/revoke: bad lease id") : -EINVAL;
    json_t *root = NULL;
    int rc = s_lease_call(e, "lease/revoke", id, &root);
    json_decref(root);
    return rc;
}

/* ---- keys ----------------------------------------------------------------- */

static int s_copy_value(const coord_etcd_kv_t *kv, void *buf, size_t cap, size_t *len);

/* One kv/put (prev_kv: etcd returns the old pair too); *out gets the answer, the
 * caller's to free, when out is not NULL. */
static int s_put(coord_etcd_t *e, const char *key, const void *value, size_t len, int64_t lease,
                 int64_t *revision, bool prev_kv, json_t **out)
{
    if (!e)
        return -EINVAL;
    if (s_check_key(e, key, false) < 0)
        return -EINVAL;
    if ((len > 0 && !value) || len > COORD_ETCD_VALUE_MAX || lease < 0)
        return s_fail(e, -EINVAL, "etcd kv/put %s: bad value or lease (values up to %u bytes)", key,
                      COORD_ETCD_VALUE_MAX);
    json_t *req = json_object(), *root = NULL;
    int rc = req ? s_set_key(req, key, false) : -ENOMEM;
    if (rc == 0)
        rc = s_set(req, "value", s_b64(value ? value : "", len));
    if (rc == 0 && lease)
        rc = s_set(req, "lease", s_i64(lease));
    if (rc == 0 && prev_kv)
        rc = s_set(req, "prev_kv", json_true());
    if (rc < 0) {
        s_fail(e, rc, "etcd kv/put: out of memory");
        goto out;
    }
    rc = s_call(e, "kv/put", req, &root);
    if (rc < 0)
        goto out;
    int64_t rev = 0;
    if (coord_json_header_revision(root, &rev) < 0 || rev <= 0) {
        rc = s_bad_answer(e, "kv/put", -EBADMSG);
        goto out;
    }
    if (revision)
        *revision = rev;
    if (out) {
        *out = root;
        root = NULL;
    }
out:
    json_decref(root);
    json_decref(req);
    return rc;
}

int coord_etcd_put(coord_etcd_t *e, const char *key, const void *value, size_t len, int64_t lease,
                   int64_t *revision)
{
    return s_put(e, key, value, len, lease, revision, false, NULL);
}

int coord_etcd_put_prev(coord_etcd_t *e, const char *key, const void *value, size_t len,
                        int64_t lease, void *prev, size_t prev_cap, size_t *prev_len,
                        bool *had_prev)
{
    if (!had_prev)
        return e ? s_fail(e, -EINVAL, "etcd kv/put %s: bad argument", key ? key : "(null)")
                 : -EINVAL;
    *had_prev = false;
    json_t *root = NULL;
    int rc = s_put(e, key, value, len, lease, NULL, true, &root);
    if (rc < 0)
        return rc;
    const json_t *pk = json_object_get(root, "prev_kv");
    if (pk) {
        coord_etcd_kv_t kv;
        rc = coord_json_kv(pk, &e->scratch, &kv);
        if (rc < 0) {
            rc = s_bad_answer(e, "kv/put", rc);
        } else {
            *had_prev = true;
            rc = s_copy_value(&kv, prev, prev_cap, prev_len);
            if (rc < 0)
                s_fail(e, rc, "etcd: old value of %s is %zu bytes, buffer holds %zu", key,
                       kv.value_len, prev_cap);
        }
    }
    json_decref(root);
    return rc;
}

static void s_meta_from_kv(coord_etcd_meta_t *m, const coord_etcd_kv_t *kv)
{
    if (!m)
        return;
    m->create_revision = kv->create_revision;
    m->mod_revision = kv->mod_revision;
    m->version = kv->version;
    m->lease = kv->lease;
}

/* Copies kv's value to buf, or reports the size needed. */
static int s_copy_value(const coord_etcd_kv_t *kv, void *buf, size_t cap, size_t *len)
{
    if (len)
        *len = kv->value_len;
    if (!buf && cap == 0)
        return 0;
    if (kv->value_len > cap || (kv->value_len > 0 && !buf))
        return -ENOBUFS;
    if (kv->value_len)
        memcpy(buf, kv->value, kv->value_len);
    return 0;
}

typedef struct {
    bool found;
    coord_etcd_kv_t kv;
} s_one_t;

static int s_take_one(const coord_etcd_kv_t *kv, void *arg)
{
    s_one_t *one = arg;
    one->found = true;
    one->kv = *kv;
    return 1; /* the first key is all a get wants */
}

int coord_etcd_get(coord_etcd_t *e, const char *key, void *buf, size_t cap, size_t *len,
                   coord_etcd_meta_t *meta)
{
    if (!e)
        return -EINVAL;
    if (s_check_key(e, key, false) < 0)
        return -EINVAL;
    json_t *req = json_object(), *root = NULL;
    int rc = req ? s_set_key(req, key, false) : -ENOMEM;
    if (rc < 0) {
        s_fail(e, rc, "etcd kv/range: out of memory");
        goto out;
    }
    rc = s_call(e, "kv/range", req, &root);
    if (rc < 0)
        goto out;
    s_one_t one = {.found = false};
    rc = coord_json_range(root, &e->scratch, s_take_one, &one, NULL, NULL, NULL);
    if (rc < 0) {
        rc = s_bad_answer(e, "kv/range", rc);
        goto out;
    }
    if (!one.found || one.kv.key_len != strlen(key) || memcmp(one.kv.key, key, one.kv.key_len)) {
        rc = s_fail(e, -ENOENT, "etcd %s: key %s not found", e->endpoints[e->cur], key);
        goto out;
    }
    s_meta_from_kv(meta, &one.kv);
    rc = s_copy_value(&one.kv, buf, cap, len);
    if (rc < 0)
        s_fail(e, rc, "etcd: value of %s is %zu bytes, buffer holds %zu", key, one.kv.value_len,
               cap);
out:
    json_decref(root);
    json_decref(req);
    return rc;
}

/* Builds the range request for prefix/opts: key = prefix or after_key + "\0". */
static int s_range_req(coord_etcd_t *e, json_t *req, const char *prefix,
                       const coord_etcd_range_opts_t *o)
{
    size_t plen = strlen(prefix);
    int rc = 0;
    if (o && o->after_key) {
        size_t alen = strlen(o->after_key);
        if (alen < plen || alen > COORD_ETCD_KEY_MAX || memcmp(o->after_key, prefix, plen) != 0)
            return s_fail(e, -EINVAL, "etcd kv/range: after_key %s is not under prefix %s",
                          o->after_key, prefix);
        char start[COORD_ETCD_KEY_MAX + 1];
        memcpy(start, o->after_key, alen);
        start[alen] = '\0'; /* the smallest key greater than after_key */
        rc = s_set(req, "key", s_b64(start, alen + 1));
    } else {
        rc = s_set(req, "key", s_b64(plen ? prefix : "", plen ? plen : 1));
    }
    char end[COORD_ETCD_KEY_MAX + 1];
    size_t elen = plen ? s_prefix_end(prefix, plen, end) : (end[0] = '\0', 1);
    size_t limit = o && o->limit ? o->limit : e->range_limit;
    if (rc == 0)
        rc = s_set(req, "range_end", s_b64(end, elen));
    if (rc == 0)
        rc = s_set(req, "limit", s_i64((int64_t)limit));
    if (rc == 0 && o && o->revision > 0)
        rc = s_set(req, "revision", s_i64(o->revision));
    return rc < 0 ? s_fail(e, rc, "etcd kv/range: out of memory") : 0;
}

int coord_etcd_range(coord_etcd_t *e, const char *prefix, const coord_etcd_range_opts_t *opts,
                     coord_etcd_kv_fn fn, void *arg, coord_etcd_range_info_t *info)
{
    if (!e)
        return -EINVAL;
    if (s_check_key(e, prefix, true) < 0 || !fn)
        return s_fail(e, -EINVAL, "etcd kv/range: bad prefix or no callback");
    if (opts && (opts->revision < 0 || opts->limit > INT64_MAX))
        return s_fail(e, -EINVAL, "etcd kv/range: bad revision or limit");
    json_t *req = json_object(), *root = NULL;
    int rc = req ? s_range_req(e, req, prefix, opts) : s_fail(e, -ENOMEM, "etcd: out of memory");
    if (rc < 0)
        goto out;
    rc = s_call(e, "kv/range", req, &root);
    if (rc < 0)
        goto out;
    coord_etcd_range_info_t in = {0};
    rc = coord_json_range(root, &e->scratch, fn, arg, &in.count, &in.more, &in.revision);
    if (rc < 0 && (rc == -EBADMSG || rc == -EMSGSIZE))
        rc = s_bad_answer(e, "kv/range", rc);
    if (info)
        *info = in;
out:
    json_decref(root);
    json_decref(req);
    return rc;
}

static int s_delete(coord_etcd_t *e, const char *key, bool prefix, int64_t *deleted)
{
    if (!e)
        return -EINVAL;
    if (s_check_key(e, key, prefix) < 0)
        return -EINVAL;
    json_t *req = json_object(), *root = NULL;
    int rc = req ? s_set_key(req, key, prefix) : -ENOMEM;
    if (rc < 0) {
        s_fail(e, rc, "etcd kv/deleterange: out of memory");
        goto out;
    }
    rc = s_call(e, "kv/deleterange", req, &root);
    if (rc < 0)
        goto out;
    int64_t d = 0;
    if (coord_json_deleted(root, &d) < 0) {
        rc = s_bad_answer(e, "kv/deleterange", -EBADMSG);
        goto out;
    }
    if (deleted)
        *deleted = d;
out:
    json_decref(root);
    json_decref(req);
    return rc;
}

int coord_etcd_delete(coord_etcd_t *e, const char *key, int64_t *deleted)
{
    return s_delete(e, key, false, deleted);
}

int coord_etcd_delete_prefix(coord_etcd_t *e, const char *prefix, int64_t *deleted)
{
    if (e && prefix && !prefix[0])
        return s_fail(e, -EINVAL, "etcd kv/deleterange: refusing an empty prefix (every key)");
    return s_delete(e, prefix, true, deleted);
}

/* {"compare":[{key, CREATE, EQUAL, create_revision 0}],
 *  "success":[{put key=value lease}, {range key}], "failure":[{range key}]}
 * Both branches end with a range so the answer always carries the key as it is. */
static json_t *s_txn_create_req(const char *key, const void *value, size_t len, int64_t lease)
{
    json_t *k = s_b64(key, strlen(key));
    json_t *put = json_pack("{s:O, s:o}", "key", k, "value", s_b64(value ? value : "", len));
    if (put && lease)
        s_set(put, "lease", s_i64(lease));
    json_t *req = json_pack("{s:[{s:O, s:s, s:s, s:s}], s:[{s:o}, {s:{s:O}}], s:[{s:{s:O}}]}",
                            "compare", "key", k, "target", "CREATE", "result", "EQUAL",
                            "create_revision", "0", "success", "request_put", put, "request_range",
                            "key", k, "failure", "request_range", "key", k);
    json_decref(k);
    return req;
}

int coord_etcd_create_if_absent(coord_etcd_t *e, const char *key, const void *value, size_t len,
                                int64_t lease, bool *won, void *cur, size_t cur_cap,
                                size_t *cur_len, coord_etcd_meta_t *cur_meta)
{
    if (!e)
        return -EINVAL;
    if (s_check_key(e, key, false) < 0)
        return -EINVAL;
    if (!won || (len > 0 && !value) || len > COORD_ETCD_VALUE_MAX || lease < 0)
        return s_fail(e, -EINVAL, "etcd kv/txn %s: bad argument", key);
    json_t *req = s_txn_create_req(key, value, len, lease), *root = NULL;
    int rc = req ? 0 : s_fail(e, -ENOMEM, "etcd kv/txn: out of memory");
    if (rc < 0)
        goto out;
    rc = s_call(e, "kv/txn", req, &root);
    if (rc < 0)
        goto out;
    coord_etcd_kv_t kv;
    rc = coord_json_txn_create(root, &e->scratch, won, &kv);
    if (rc < 0) {
        rc = s_bad_answer(e, "kv/txn", rc);
        goto out;
    }
    s_meta_from_kv(cur_meta, &kv);
    rc = s_copy_value(&kv, cur, cur_cap, cur_len);
    if (rc < 0)
        s_fail(e, rc, "etcd: value of %s is %zu bytes, buffer holds %zu", key, kv.value_len,
               cur_cap);
out:
    json_decref(root);
    json_decref(req);
    return rc;
}

int coord_etcd_delete_if_value(coord_etcd_t *e, const char *key, const void *value, size_t len,
                               bool *deleted)
{
    if (!e)
        return -EINVAL;
    if (s_check_key(e, key, false) < 0)
        return -EINVAL;
    if ((len > 0 && !value) || len > COORD_ETCD_VALUE_MAX)
        return s_fail(e, -EINVAL, "etcd kv/txn %s: bad argument", key);
    json_t *k = s_b64(key, strlen(key));
    json_t *req =
        k ? json_pack("{s:[{s:O, s:s, s:s, s:o}], s:[{s:{s:O}}]}", "compare", "key", k, "target",
                      "VALUE", "result", "EQUAL", "value", s_b64(value ? value : "", len),
                      "success", "request_delete_range", "key", k)
          : NULL;
    json_decref(k);
    json_t *root = NULL;
    int rc =
        req ? s_call(e, "kv/txn", req, &root) : s_fail(e, -ENOMEM, "etcd kv/txn: out of memory");
    bool ok = false;
    /* a losing txn has no "succeeded" field: false */
    if (rc == 0 && coord_json_bool(root, "succeeded", &ok) < 0)
        rc = s_bad_answer(e, "kv/txn", -EBADMSG);
    if (deleted)
        *deleted = rc == 0 && ok;
    json_decref(root);
    json_decref(req);
    return rc;
}

int coord_etcd_compact(coord_etcd_t *e, int64_t revision)
{
    if (!e || revision <= 0)
        return e ? s_fail(e, -EINVAL, "etcd kv/compaction: bad revision") : -EINVAL;
    json_t *req = json_object(), *root = NULL;
    int rc = req ? s_set(req, "revision", s_i64(revision)) : -ENOMEM;
    if (rc == 0)
        rc = s_call(e, "kv/compaction", req, &root);
    else
        s_fail(e, rc, "etcd kv/compaction: out of memory");
    json_decref(root);
    json_decref(req);
    return rc;
}

/* ---- watch ---------------------------------------------------------------- */

typedef enum { S_WATCH_CONNECTING, S_WATCH_CREATED, S_WATCH_ENDED } s_watch_state_t;

struct coord_etcd_watch {
    char endpoints[COORD_ETCD_MAX_ENDPOINTS][COORD_ETCD_ENDPOINT_MAX];
    size_t n_endpoints;
    int connect_timeout_ms;
    coord_etcd_watch_spec_t spec;
    char *key; /* copy of spec.key */
    char *body;
    CURLM *multi;
    CURL *curl;
    struct curl_slist *headers;
    s_tls_files_t tls;
    pthread_t thread;
    atomic_bool stop;
    coord_linebuf_t lines;
    coord_scratch_t scratch;
    /* End of the stream as seen by the thread. */
    int end_err;
    bool ended;
    int64_t last_revision;
    int64_t compact_revision;
    char curl_err[CURL_ERROR_SIZE];
    char msg[COORD_ETCD_ERR_MAX];
    /* Shared with coord_etcd_watch_wait_created. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    s_watch_state_t state;
    int state_err;
};

static void s_watch_set_state(coord_etcd_watch_t *w, s_watch_state_t st, int err)
{
    pthread_mutex_lock(&w->mu);
    if (w->state != S_WATCH_ENDED) {
        w->state = st;
        w->state_err = err;
    }
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Records why the stream ends (first reason wins); returns the value that stops
 * the line splitter. */
static int s_watch_end(coord_etcd_watch_t *w, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_watch_end(coord_etcd_watch_t *w, int err, const char *fmt, ...)
{
    if (w->ended)
        return 1;
    w->ended = true;
    w->end_err = err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
    return 1;
}

static int s_watch_events(coord_etcd_watch_t *w, const json_t *events)
{
    size_t n = events ? json_array_size(events) : 0;
    for (size_t i = 0; i < n; i++) {
        coord_etcd_event_t ev;
        int rc = coord_json_event(json_array_get(events, i), &w->scratch, &ev);
        if (rc < 0)
            return s_watch_end(w, rc, "etcd watch %s: malformed event%s", w->key,
                               rc == -EMSGSIZE ? " (too large)" : "");
        rc = w->spec.on_event(&ev, w->spec.arg);
        if (ev.kv.mod_revision > w->last_revision)
            w->last_revision = ev.kv.mod_revision;
        if (rc != 0)
            return s_watch_end(w, rc, "etcd watch %s: ended by the event callback (%d)", w->key,
                               rc);
    }
    return 0;
}

static int s_watch_line(char *line, size_t len, void *arg)
{
    coord_etcd_watch_t *w = arg;
    json_t *root = NULL;
    char jerr[200];
    int rc = coord_json_load(line, len, &root, jerr, sizeof jerr);
    if (rc < 0) {
        long http = 0;
        curl_easy_getinfo(w->curl, CURLINFO_RESPONSE_CODE, &http);
        if (http != 200)
            return s_watch_end(w, -EPROTO,
                               "etcd watch %s: HTTP %ld (not an etcd >= 3.4 JSON gateway?)", w->key,
                               http);
        return s_watch_end(w, rc, "etcd watch %s: %s", w->key, jerr);
    }
    coord_watch_msg_t m;
    rc = coord_json_watch_msg(root, &m);
    if (rc < 0) {
        s_watch_end(w, rc, "etcd watch %s: %s", w->key, m.reason[0] ? m.reason : "malformed line");
        goto out;
    }
    if (m.created && w->last_revision == 0 && w->spec.start_revision == 0)
        w->last_revision = m.header_revision;
    if (m.canceled) {
        w->compact_revision = m.compact_revision;
        if (m.compact_revision > 0)
            rc = s_watch_end(w, -ERANGE,
                             "etcd watch %s: revision %" PRId64
                             " compacted (oldest available %" PRId64 ")",
                             w->key, w->last_revision + 1, m.compact_revision);
        else
            rc = s_watch_end(w, -ECANCELED, "etcd watch %s: canceled by etcd: %s", w->key,
                             m.reason[0] ? m.reason : "no reason given");
        goto out;
    }
    if (m.created)
        s_watch_set_state(w, S_WATCH_CREATED, 0);
    rc = s_watch_events(w, m.events);
out:
    json_decref(root);
    return rc;
}

static size_t s_watch_write(char *data, size_t size, size_t nmemb, void *arg)
{
    coord_etcd_watch_t *w = arg;
    size_t n = size * nmemb;
    if (w->ended || atomic_load(&w->stop))
        return 0;
    int rc = coord_linebuf_feed(&w->lines, data, n, s_watch_line, w);
    if (rc == -EMSGSIZE)
        s_watch_end(w, rc, "etcd watch %s: stream line longer than %zu bytes", w->key,
                    w->lines.cap);
    return rc == 0 ? n : 0;
}

/* Runs one connection to ep until it ends or stop is set; returns the curl code. */
static CURLcode s_watch_run(coord_etcd_watch_t *w, const char *ep)
{
    char url[COORD_ETCD_ENDPOINT_MAX + 16];
    snprintf(url, sizeof url, "%s/v3/watch", ep);
    w->curl_err[0] = '\0';
    w->lines.len = 0;
    curl_easy_setopt(w->curl, CURLOPT_URL, url);
    if (curl_multi_add_handle(w->multi, w->curl) != CURLM_OK)
        return CURLE_OUT_OF_MEMORY;
    CURLcode result = CURLE_OK;
    int running = 1;
    while (running && !atomic_load(&w->stop)) {
        if (curl_multi_perform(w->multi, &running) != CURLM_OK)
            break;
        if (running && curl_multi_poll(w->multi, NULL, 0, 1000, NULL) != CURLM_OK)
            break;
    }
    int left = 0;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(w->multi, &left)))
        if (msg->msg == CURLMSG_DONE)
            result = msg->data.result;
    curl_multi_remove_handle(w->multi, w->curl);
    return result;
}

static void s_watch_finish(coord_etcd_watch_t *w, CURLcode rc, const char *ep, bool conn_failed,
                           int err, const char *reason)
{
    if (w->ended)
        return;
    if (atomic_load(&w->stop)) {
        s_watch_end(w, 0, "%s", "");
        return;
    }
    if (rc == CURLE_OK) {
        /* A final line without '\n' may carry etcd's error. */
        coord_linebuf_flush(&w->lines, s_watch_line, w);
        if (!w->ended)
            s_watch_end(w, -ECONNRESET, "etcd %s: watch %s: stream closed by etcd", ep, w->key);
        return;
    }
    s_watch_end(w, err, "etcd %s: watch %s: %s%s", ep, w->key, reason,
                conn_failed && w->n_endpoints > 1 ? " (after trying every endpoint)" : "");
}

static void *s_watch_thread(void *arg)
{
    coord_etcd_watch_t *w = arg;
    for (size_t i = 0; i < w->n_endpoints; i++) {
        const char *ep = w->endpoints[i];
        CURLcode rc = s_watch_run(w, ep);
        char reason[COORD_ETCD_ERR_MAX / 2] = "";
        bool conn_failed = false;
        int err = 0;
        if (rc != CURLE_OK && !w->ended)
            err = s_curl_failure(w->curl, rc, w->curl_err, reason, sizeof reason, &conn_failed);
        bool created = false;
        pthread_mutex_lock(&w->mu);
        created = w->state == S_WATCH_CREATED;
        pthread_mutex_unlock(&w->mu);
        if (conn_failed && !created && !atomic_load(&w->stop) && i + 1 < w->n_endpoints)
            continue;
        s_watch_finish(w, rc, ep, conn_failed, err, reason);
        break;
    }
    s_watch_set_state(w, S_WATCH_ENDED, w->end_err ? w->end_err : -ECANCELED);
    if (w->spec.on_end) {
        coord_etcd_watch_end_t end = {.err = w->end_err,
                                      .last_revision = w->last_revision,
                                      .compact_revision = w->compact_revision,
                                      .message = w->msg};
        w->spec.on_end(&end, w->spec.arg);
    }
    return NULL;
}

static char *s_watch_body(const coord_etcd_watch_spec_t *spec)
{
    json_t *cr = json_object();
    int rc = cr ? s_set_key(cr, spec->key, spec->prefix) : -ENOMEM;
    if (rc == 0 && spec->start_revision > 0)
        rc = s_set(cr, "start_revision", s_i64(spec->start_revision));
    json_t *req = rc == 0 ? json_pack("{s:O}", "create_request", cr) : NULL;
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    json_decref(cr);
    return body;
}

static void s_watch_free(coord_etcd_watch_t *w)
{
    if (w->curl)
        curl_easy_cleanup(w->curl);
    if (w->multi)
        curl_multi_cleanup(w->multi);
    curl_slist_free_all(w->headers);
    coord_linebuf_free(&w->lines);
    coord_scratch_free(&w->scratch);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w->body);
    free(w->key);
    free(w);
}

static int s_watch_setup_curl(coord_etcd_watch_t *w)
{
    w->multi = curl_multi_init();
    w->curl = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    w->headers = h ? curl_slist_append(h, "Expect:") : NULL;
    if (!w->headers)
        curl_slist_free_all(h);
    if (!w->multi || !w->curl || !w->headers)
        return -ENOMEM;
    curl_easy_setopt(w->curl, CURLOPT_HTTPHEADER, w->headers);
    s_apply_tls(w->curl, &w->tls);
    curl_easy_setopt(w->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(w->curl, CURLOPT_PROXY, "");
    curl_easy_setopt(w->curl, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(w->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)w->connect_timeout_ms);
    curl_easy_setopt(w->curl, CURLOPT_POSTFIELDS, w->body);
    curl_easy_setopt(w->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(w->body));
    curl_easy_setopt(w->curl, CURLOPT_WRITEFUNCTION, s_watch_write);
    curl_easy_setopt(w->curl, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(w->curl, CURLOPT_ERRORBUFFER, w->curl_err);
    return 0;
}

coord_etcd_watch_t *coord_etcd_watch_new(const coord_etcd_config_t *cfg,
                                         const coord_etcd_watch_spec_t *spec)
{
    if (!spec || !spec->key || !spec->on_event || spec->start_revision < 0 ||
        strlen(spec->key) > COORD_ETCD_KEY_MAX || (!spec->prefix && !spec->key[0]))
        return NULL;
    if (s_curl_ready() < 0)
        return NULL;
    coord_etcd_watch_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&w->stop, false);
    if (s_copy_endpoints(cfg, w->endpoints, &w->n_endpoints) < 0 || s_tls_pick(cfg, &w->tls) < 0)
        goto out_free;
    w->connect_timeout_ms =
        cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : COORD_ETCD_CONNECT_MS_DEFAULT;
    size_t max = cfg->max_response ? cfg->max_response : COORD_ETCD_MAX_RESPONSE_DEFAULT;
    w->spec = *spec;
    w->key = strdup(spec->key);
    w->spec.key = w->key;
    w->body = w->key ? s_watch_body(spec) : NULL;
    w->scratch.max = max;
    w->last_revision = spec->start_revision > 0 ? spec->start_revision - 1 : 0;
    if (!w->body || coord_linebuf_init(&w->lines, max) < 0 || s_watch_setup_curl(w) < 0)
        goto out_free;
    if (pthread_create(&w->thread, NULL, s_watch_thread, w) != 0)
        goto out_free;
    return w;
out_free:
    s_watch_free(w);
    return NULL;
}

int coord_etcd_watch_wait_created(coord_etcd_watch_t *w, int timeout_ms)
{
    if (!w)
        return -EINVAL;
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    int rc = 0;
    pthread_mutex_lock(&w->mu);
    while (w->state == S_WATCH_CONNECTING && rc == 0)
        rc = pthread_cond_timedwait(&w->cv, &w->mu, &dl);
    int out = w->state == S_WATCH_CREATED ? 0
              : w->state == S_WATCH_ENDED ? w->state_err
                                          : -ETIMEDOUT;
    pthread_mutex_unlock(&w->mu);
    return out;
}

void coord_etcd_watch_destroy(coord_etcd_watch_t **pw)
{
    if (!pw || !*pw)
        return;
    coord_etcd_watch_t *w = *pw;
    atomic_store(&w->stop, true);
    curl_multi_wakeup(w->multi);
    pthread_join(w->thread, NULL);
    s_watch_free(w);
    *pw = NULL;
}
