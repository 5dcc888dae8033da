/* kvt_client.c — a libkvtier handle: options, discovery of the leader (a static
 * list of coordinators, any of which answers ClusterInfo, or the leader key in
 * etcd), the meta-plane call with its failover (kvtier.h "Failover"), the
 * recovery at a new leader (instances registered and requests begun again),
 * errors, close.
 *
 * Owns the meta DEALER, the etcd handle, the handle's scratch envelopes and what
 * a new leader is told again (bounded: KVT_RECOVER_*). Never resends remove (its
 * count would be wrong), nor anything a server refused. Never blocks longer than
 * the bounds documented in kvtier.h (timeout_ms, failover_ms). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <zmq.h>

#include "bus_log.h"
#include "kvt_internal.h"

#define S_LEADER_JSON_MAX 4096

/* ---- errors --------------------------------------------------------------- */

int kvti_fail(kvt_client_t *c, int code, const char *what, const char *fmt, ...)
{
    if (code < 0)
        code = -code;
    char detail[KVT_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    /* Truncating a long server message is fine: the code and the call stay. */
    if (snprintf(c->err, sizeof c->err, "%s: %s: %s", what, kvt_status_name(code), detail) < 0)
        c->err[0] = '\0';
    return -code;
}

void kvti_clear_error(kvt_client_t *c)
{
    c->err[0] = '\0';
}

const char *kvt_last_error(const kvt_client_t *c)
{
    return c ? c->err : "no client handle (kvt_connect failed or the handle was closed)";
}

uint64_t kvt_meta_round_trips(const kvt_client_t *c)
{
    return c ? c->round_trips : 0;
}

uint64_t kvt_leader_epoch(const kvt_client_t *c)
{
    return c ? c->leader_epoch : 0;
}

int kvti_check_id(kvt_client_t *c, const char *what, const char *field, const char *id,
                  bool optional)
{
    if (!id) {
        if (optional)
            return 0;
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what, "%s is NULL", field);
    }
    size_t len = strnlen(id, KVT_ID_MAX + 1);
    if (len > KVT_ID_MAX)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what, "%s is longer than %d bytes", field,
                         KVT_ID_MAX);
    if (len == 0 && !optional)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what, "%s is empty", field);
    return 0;
}

/* ---- options -------------------------------------------------------------- */

/* Splits a comma list into out[max][width], trimming blanks and skipping empty
 * items. Returns the count, or -1 (too many / too long) with why set. */
static int s_split(const char *list, char *out, size_t width, uint32_t max, char *why,
                   size_t whylen)
{
    uint32_t n = 0;
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        const char *a = p, *b = end;
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        if (b > a) {
            if (n == max) {
                snprintf(why, whylen, "more than %u entries", max);
                return -1;
            }
            if ((size_t)(b - a) >= width) {
                snprintf(why, whylen, "'%.*s...' is longer than %zu bytes", 32, a, width - 1);
                return -1;
            }
            memcpy(out + n * width, a, (size_t)(b - a));
            out[n * width + (size_t)(b - a)] = '\0';
            n++;
        }
        p = *end ? end + 1 : end;
    }
    return (int)n;
}

static bool s_cluster_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

/* Copies and checks the options into c. 0 or -KVT_INVALID_ARGUMENT with c->err. */
/* curve_cert + curve_server_key: both or neither. */
static int s_options_curve(kvt_client_t *c, const kvt_options_t *o)
{
    const char *W = "kvt_connect";
    bool cert = o->curve_cert && o->curve_cert[0];
    bool server = o->curve_server_key && o->curve_server_key[0];
    if (!cert && !server)
        return 0;
    if (!cert || !server)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "curve_cert and curve_server_key go together (%s is missing)",
                         cert ? "curve_server_key" : "curve_cert");
    char why[600];
    if (bus_curve_load_pair(o->curve_cert, c->curve.public_key, c->curve.secret_key, why,
                            sizeof why) < 0)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "curve_cert: %s", why);
    if (bus_curve_load_public(o->curve_server_key, c->curve.server_key, why, sizeof why) < 0)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "curve_server_key: %s", why);
    c->curve_on = true;
    return 0;
}

static int s_options(kvt_client_t *c, const kvt_options_t *o)
{
    const char *W = "kvt_connect";
    char why[600];
    bool have_coord = o->coordinators && o->coordinators[0];
    bool have_etcd = o->etcd_endpoints && o->etcd_endpoints[0];
    if (!have_coord && !have_etcd)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "no coordinators and no etcd_endpoints: set kvt_options.coordinators "
                         "(\"tcp://host:7700,...\") or kvt_options.etcd_endpoints "
                         "(\"http://host:2379,...\")");
    if (have_coord) {
        int n = s_split(o->coordinators, &c->coordinators[0][0], BUS_ENDPOINT_MAX,
                        KVT_MAX_COORDINATORS, why, sizeof why);
        if (n < 0)
            return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "coordinators: %s", why);
        if (n == 0)
            return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "coordinators lists no endpoint");
        c->n_coordinators = (uint32_t)n;
        for (uint32_t i = 0; i < c->n_coordinators; i++) {
            char e[BUS_ENDPOINT_MAX + 64];
            if (bus_endpoint_check(c->coordinators[i], BUS_ENDPOINT_CONNECT, e, sizeof e) < 0)
                return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "coordinators: %s", e);
        }
    }
    if (have_etcd) {
        int n = s_split(o->etcd_endpoints, &c->etcd_urls[0][0], COORD_ETCD_ENDPOINT_MAX,
                        COORD_ETCD_MAX_ENDPOINTS, why, sizeof why);
        if (n < 0)
            return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "etcd_endpoints: %s", why);
        if (n == 0)
            return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "etcd_endpoints lists no URL");
        c->n_etcd = (uint32_t)n;
        for (uint32_t i = 0; i < c->n_etcd; i++)
            if (strncmp(c->etcd_urls[i], "http://", 7) != 0 &&
                strncmp(c->etcd_urls[i], "https://", 8) != 0)
                return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                                 "etcd_endpoints: '%s' is not an http:// or https:// URL",
                                 c->etcd_urls[i]);
    }
    const char *tls[3] = {o->etcd_ca_file, o->etcd_cert_file, o->etcd_key_file};
    char *const dst[3] = {c->etcd_ca, c->etcd_cert, c->etcd_key};
    for (int i = 0; i < 3; i++) {
        if (!tls[i] || !tls[i][0])
            continue;
        if (strlen(tls[i]) >= COORD_ETCD_TLS_PATH_MAX)
            return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "etcd %s file: path longer than %d bytes",
                             i == 0   ? "ca"
                             : i == 1 ? "cert"
                                      : "key",
                             COORD_ETCD_TLS_PATH_MAX - 1);
        snprintf(dst[i], COORD_ETCD_TLS_PATH_MAX, "%s", tls[i]);
        c->etcd_tls_set = true;
    }
    if (c->etcd_tls_set) {
        coord_etcd_tls_t t = {c->etcd_ca, c->etcd_cert, c->etcd_key};
        if (coord_etcd_tls_check(&t, why, sizeof why) < 0)
            return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "%s", why);
    }
    const char *cluster = o->cluster && o->cluster[0] ? o->cluster : "kvtier";
    if (!s_cluster_name_ok(cluster))
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "cluster '%.64s' must be 1..63 characters of [A-Za-z0-9._-]", cluster);
    snprintf(c->cluster, sizeof c->cluster, "%s", cluster);
    c->cluster_given = o->cluster && o->cluster[0];
    const char *name = o->name && o->name[0] ? o->name : "client";
    if (strlen(name) >= sizeof c->name)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "name is longer than %zu bytes",
                         sizeof c->name - 1);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->timeout_ms = o->timeout_ms ? o->timeout_ms : KVT_DEFAULT_TIMEOUT_MS;
    if (c->timeout_ms > KVT_MAX_TIMEOUT_MS)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "timeout_ms %u is above the limit %u",
                         c->timeout_ms, KVT_MAX_TIMEOUT_MS);
    c->failover_ms = o->failover_ms ? o->failover_ms : KVT_DEFAULT_FAILOVER_MS;
    if (c->failover_ms > KVT_MAX_TIMEOUT_MS)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "failover_ms %u is above the limit %u",
                         c->failover_ms, KVT_MAX_TIMEOUT_MS);
    c->max_in_flight = o->max_in_flight ? o->max_in_flight : KVT_DEFAULT_IN_FLIGHT;
    if (c->max_in_flight > BUS_CLIENT_MAX_IN_FLIGHT)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "max_in_flight %u is above the limit %u",
                         c->max_in_flight, BUS_CLIENT_MAX_IN_FLIGHT);
    c->disable_shm = o->disable_shm;
    if (o->cuda_library && strlen(o->cuda_library) >= sizeof c->cuda_library)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "cuda_library is longer than %zu bytes",
                         sizeof c->cuda_library - 1);
    snprintf(c->cuda_library, sizeof c->cuda_library, "%s", o->cuda_library ? o->cuda_library : "");
    c->device_staging = o->device_staging ? o->device_staging : KVT_DEFAULT_DEVICE_STAGING;
    if (c->device_staging > KVT_MAX_DEVICE_STAGING)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "device_staging %" PRIu64 " bytes is above the limit %llu",
                         c->device_staging, (unsigned long long)KVT_MAX_DEVICE_STAGING);
    const char *host = o->host && o->host[0] ? o->host : getenv("KVTIER_HOST");
    if (host && host[0] && !bus_host_name_ok(host))
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "host \"%.64s\"%s: a host name is 1..%d letters, digits, '_', '-' or "
                         "'.', starting with a letter or digit",
                         host, o->host && o->host[0] ? "" : " ($KVTIER_HOST)",
                         BUS_HOST_NAME_MAX - 1);
    snprintf(c->host_name, sizeof c->host_name, "%s", host ? host : "");
    return s_options_curve(c, o);
}

/* ---- discovery ------------------------------------------------------------ */

static int s_remaining_ms(int64_t deadline)
{
    int64_t left = deadline - zclock_mono();
    return left <= 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
}

/* A call's wait: `timeout`, cut to what is left before `deadline` (at least 1 ms). */
static uint32_t s_call_timeout(uint32_t timeout, int64_t deadline)
{
    uint32_t left = (uint32_t)s_remaining_ms(deadline);
    uint32_t t = left < timeout ? left : timeout;
    return t ? t : 1;
}

/* Marks the live tokens of another leader than the one known now: the window of
 * each went with that leader (its complete and its jobs end ABORTED). */
static void s_tokens_stale(kvt_client_t *c)
{
    for (struct kvt_token *t = c->live_tokens; t; t = t->next)
        if (t->leader_epoch != 0 && t->leader_epoch != c->leader_epoch)
            t->stale = true;
}

/* Learns the epoch of the leader a reply, a redirect or discovery showed (0: not
 * shown). Another epoch than the one known marks the live tokens of the earlier
 * leader stale at once, whether or not that new leader is told what this handle
 * holds (s_recover): a submit on one is refused from then on (review finding 1). */
static void s_learn_epoch(kvt_client_t *c, uint64_t epoch)
{
    if (epoch == 0 || epoch == c->leader_epoch)
        return;
    c->leader_epoch = epoch;
    s_tokens_stale(c);
}

/* A scheduler of `epoch` answered NOT_LEADER (its lease ran out): its windows are
 * gone with it, though it says nothing of the leader now. */
static void s_epoch_gone(kvt_client_t *c, uint64_t epoch)
{
    for (struct kvt_token *t = c->live_tokens; t; t = t->next)
        if (epoch != 0 && t->leader_epoch == epoch)
            t->stale = true;
}

/* Learns from a reply's leader epoch (`code` its status): another leader's, or a
 * deposed one's NOT_LEADER. */
static void s_reply_epoch(kvt_client_t *c, uint64_t epoch, int code)
{
    if (code == kvtier_StatusCode_STATUS_NOT_LEADER)
        s_epoch_gone(c, epoch);
    else
        s_learn_epoch(c, epoch);
}

/* Is the leader known now not the one last told what this handle holds (another
 * epoch, or another endpoint: a redirect, whose epoch s_recover asks)? Then it is
 * told. Not before kvt_connect returns: nothing is held yet. */
static bool s_need_recover(const kvt_client_t *c)
{
    return c->connected &&
           (c->leader_epoch != c->recovered_epoch || strcmp(c->leader, c->recovered_leader) != 0);
}

/* Points the meta DEALER at `endpoint` (a fresh socket: requests queued for an
 * old leader are dropped with it). */
static int s_connect_meta(kvt_client_t *c, const char *what, const char *endpoint, uint64_t epoch)
{
    char e[BUS_ENDPOINT_MAX + 64];
    if (bus_endpoint_check(endpoint, BUS_ENDPOINT_CONNECT, e, sizeof e) < 0)
        return kvti_fail(c, KVT_UNAVAILABLE, what, "the leader's endpoint is unusable: %s", e);
    /* a leader that dies fails the call in flight at once (its connection closes),
     * not at the call's timeout: the failover starts at the kill */
    bus_client_config_t cfg = {.name = c->name,
                               .max_in_flight = 16,
                               .default_timeout_ms = c->timeout_ms,
                               .curve = kvti_curve(c),
                               .fail_on_disconnect = true};
    bus_client_t *m = bus_client_new(endpoint, &cfg);
    if (!m)
        return kvti_fail(c, KVT_UNAVAILABLE, what, "cannot connect a socket to leader %s",
                         endpoint);
    bus_client_destroy(&c->meta);
    c->meta = m;
    snprintf(c->leader, sizeof c->leader, "%s", endpoint);
    if (epoch == 0) /* a redirect: the epoch is asked (s_recover) */
        c->leader_epoch = 0;
    else
        s_learn_epoch(c, epoch);
    return 0;
}

typedef struct {
    bool done;
    kvtier_StatusCode code;
    char leader[BUS_ENDPOINT_MAX];
    uint64_t epoch;
    char msg[300];
    const char *want_cluster; /* NULL: any */
    bool wrong_cluster;       /* it answered for another cluster */
} s_probe_t;

static void s_probe_done(void *arg, bus_reply_t *r)
{
    s_probe_t *p = arg;
    p->done = true;
    p->code = r->status.code;
    snprintf(p->msg, sizeof p->msg, "%s", r->status.message);
    if (!r->env)
        return;
    if (r->status.code == kvtier_StatusCode_STATUS_OK &&
        r->env->which_body == kvtier_Envelope_cluster_info_rep_tag) {
        const kvtier_ClusterInfoReply *ci = &r->env->body.cluster_info_rep;
        if (p->want_cluster && ci->cluster[0] && strcmp(ci->cluster, p->want_cluster) != 0) {
            /* another deployment on this endpoint: never its leader */
            snprintf(p->msg, sizeof p->msg, "serves cluster '%s', not '%s'", ci->cluster,
                     p->want_cluster);
            p->wrong_cluster = true;
            return;
        }
        snprintf(p->leader, sizeof p->leader, "%s", ci->leader_endpoint);
        p->epoch = ci->leader_epoch;
        if (!p->leader[0])
            snprintf(p->msg, sizeof p->msg, "answered but knows no leader yet");
    } else if (r->env->leader_endpoint[0]) {
        snprintf(p->leader, sizeof p->leader, "%s", r->env->leader_endpoint);
    }
}

/* Asks every coordinator at once; the first answer naming a leader wins. */
static int s_discover_static(kvt_client_t *c, const char *what, int64_t deadline)
{
    bus_client_t *cl[KVT_MAX_COORDINATORS] = {0};
    s_probe_t pr[KVT_MAX_COORDINATORS];
    memset(pr, 0, sizeof pr);
    uint32_t n = c->n_coordinators;
    for (uint32_t i = 0; i < n; i++)
        pr[i].want_cluster = c->cluster_given ? c->cluster : NULL;
    bus_client_config_t cfg = {.name = c->name, .max_in_flight = 1, .curve = kvti_curve(c)};
    for (uint32_t i = 0; i < n; i++) {
        cl[i] = bus_client_new(c->coordinators[i], &cfg);
        kvtier_Status st = {0};
        int rc = -1;
        if (cl[i]) {
            bus_env_init(c->probe, kvtier_Envelope_cluster_info_req_tag, c->name);
            uint32_t t = (uint32_t)s_remaining_ms(deadline);
            rc = bus_client_send(cl[i], c->probe, NULL, NULL, 0, t ? t : 1, NULL, s_probe_done,
                                 &pr[i], NULL, &st);
        }
        if (rc < 0) {
            pr[i].done = true;
            pr[i].code = cl[i] ? st.code : kvtier_StatusCode_STATUS_UNAVAILABLE;
            snprintf(pr[i].msg, sizeof pr[i].msg, "%s", cl[i] ? st.message : "cannot connect");
        }
    }
    int winner = -1;
    for (;;) {
        uint32_t open = 0;
        zmq_pollitem_t items[KVT_MAX_COORDINATORS];
        for (uint32_t i = 0; i < n; i++) {
            if (winner < 0 && pr[i].done && pr[i].leader[0])
                winner = (int)i;
            if (!pr[i].done)
                items[open++] =
                    (zmq_pollitem_t){zsock_resolve(bus_client_sock(cl[i])), 0, ZMQ_POLLIN, 0};
        }
        if (winner >= 0 || open == 0)
            break;
        int left = s_remaining_ms(deadline);
        if (zmq_poll(items, (int)open, left) < 0 && errno != EINTR)
            break;
        for (uint32_t i = 0; i < n; i++)
            if (!pr[i].done)
                bus_client_dispatch(cl[i], 0);
        if (left == 0) /* dispatch above expired what was due */
            for (uint32_t i = 0; i < n; i++)
                if (!pr[i].done)
                    bus_client_fail_all(cl[i], kvtier_StatusCode_STATUS_TIMEOUT,
                                        "no reply to ClusterInfo within the timeout");
    }
    int rc = 0;
    if (winner >= 0) {
        rc = s_connect_meta(c, what, pr[winner].leader, pr[winner].epoch);
    } else {
        char sum[KVT_ERR_MAX] = "";
        size_t off = 0;
        kvtier_StatusCode code = kvtier_StatusCode_STATUS_UNAVAILABLE;
        uint32_t wrong = 0;
        for (uint32_t i = 0; i < n; i++)
            wrong += pr[i].wrong_cluster;
        if (wrong == n) /* every one is another deployment's: an argument to fix */
            code = kvtier_StatusCode_STATUS_INVALID_ARGUMENT;
        for (uint32_t i = 0; i < n && off < sizeof sum; i++) {
            if (pr[i].code == kvtier_StatusCode_STATUS_TIMEOUT)
                code = kvtier_StatusCode_STATUS_TIMEOUT;
            int w = snprintf(sum + off, sizeof sum - off, "%s%s: %s%s%s", i ? "; " : "",
                             c->coordinators[i],
                             pr[i].wrong_cluster ? "" : bus_status_name((int)pr[i].code),
                             pr[i].wrong_cluster ? "" : " ", pr[i].msg);
            off += w > 0 ? (size_t)w : 0;
        }
        rc = kvti_fail(c, (int)code, what, "no coordinator named a leader (%s)", sum);
    }
    for (uint32_t i = 0; i < n; i++)
        bus_client_destroy(&cl[i]);
    return rc;
}

/* Reads /kvtier/<cluster>/leader = {"name","endpoint","epoch"}. */
static int s_discover_etcd(kvt_client_t *c, const char *what)
{
    char key[128];
    snprintf(key, sizeof key, "/kvtier/%s/leader", c->cluster);
    char buf[S_LEADER_JSON_MAX];
    size_t len = 0;
    int rc = coord_etcd_get(c->etcd, key, buf, sizeof buf - 1, &len, NULL);
    if (rc == -ENOENT)
        return kvti_fail(c, KVT_UNAVAILABLE, what, "no leader in etcd (%s is absent)", key);
    if (rc == -ETIMEDOUT)
        return kvti_fail(c, KVT_TIMEOUT, what, "%s", coord_etcd_last_error(c->etcd));
    if (rc < 0)
        return kvti_fail(c, KVT_UNAVAILABLE, what, "%s", coord_etcd_last_error(c->etcd));
    buf[len] = '\0';
    json_error_t jerr;
    json_t *root = json_loadb(buf, len, 0, &jerr);
    const char *ep = root ? json_string_value(json_object_get(root, "endpoint")) : NULL;
    json_t *jepoch = root ? json_object_get(root, "epoch") : NULL;
    uint64_t epoch = json_is_integer(jepoch) ? (uint64_t)json_integer_value(jepoch) : 0;
    if (!ep || !ep[0]) {
        rc = kvti_fail(c, KVT_UNAVAILABLE, what,
                       "etcd %s is not {\"name\",\"endpoint\",\"epoch\"}: '%.100s'", key, buf);
    } else {
        rc = s_connect_meta(c, what, ep, epoch);
    }
    json_decref(root);
    return rc;
}

static int s_discover(kvt_client_t *c, const char *what, int64_t deadline)
{
    if (c->n_coordinators > 0)
        return s_discover_static(c, what, deadline);
    return s_discover_etcd(c, what);
}

/* ---- what a new leader is told again ------------------------------------ */

void kvti_remember_instance(kvt_client_t *c, const kvtier_InstanceSpec *spec)
{
    for (uint32_t i = 0; i < c->n_insts; i++)
        if (strcmp(c->insts[i].instance_id, spec->instance_id) == 0) {
            c->insts[i] = *spec;
            return;
        }
    if (c->n_insts == KVT_RECOVER_INSTANCES) {
        if (!c->warned_insts)
            bus_warn("client",
                     "%s: instance %s is not carried over to a new leader: the handle "
                     "remembers %d (KVT_RECOVER_INSTANCES); logged once per handle",
                     c->name, spec->instance_id, KVT_RECOVER_INSTANCES);
        c->warned_insts = true;
        return;
    }
    c->insts[c->n_insts++] = *spec;
}

uint32_t kvti_instance_segments(const kvt_client_t *c, const char *instance_id,
                                uint64_t *bytes_per_block)
{
    for (uint32_t i = 0; i < c->n_insts; i++)
        if (strcmp(c->insts[i].instance_id, instance_id) == 0) {
            *bytes_per_block = c->insts[i].bytes_per_block;
            return c->insts[i].segments > 1 ? c->insts[i].segments : 1;
        }
    return 0;
}

static int s_find_request(const kvt_client_t *c, const char *inst, const char *req)
{
    for (uint32_t i = 0; i < c->n_open_reqs; i++)
        if (strcmp(c->open_reqs[i].request_id, req) == 0 &&
            strcmp(c->open_reqs[i].instance_id, inst) == 0)
            return (int)i;
    return -1;
}

/* Does a live token (an open window) name the request? Then it is not idle. */
static bool s_request_has_window(const kvt_client_t *c, const kvti_open_req_t *r)
{
    for (const struct kvt_token *t = c->live_tokens; t; t = t->next)
        if (strcmp(t->request_id, r->request_id) == 0 &&
            strcmp(t->instance_id, r->instance_id) == 0)
            return true;
    return false;
}

void kvti_age_requests(kvt_client_t *c)
{
    int64_t now = zclock_mono();
    for (uint32_t i = 0; i < c->n_open_reqs;) {
        kvti_open_req_t *r = &c->open_reqs[i];
        if (now - r->last_ms > (int64_t)KVT_RECOVER_IDLE_MS && !s_request_has_window(c, r)) {
            bus_debug("client", "%s: request %s/%s idle for %" PRId64 " ms: not carried over",
                      c->name, r->instance_id, r->request_id, now - r->last_ms);
            *r = c->open_reqs[--c->n_open_reqs];
            continue;
        }
        i++;
    }
}

void kvti_remember_request(kvt_client_t *c, const char *instance_id, const char *request_id,
                           uint64_t ttl_ms, uint32_t total_blocks, uint32_t branch,
                           const char *branch_name)
{
    int i = s_find_request(c, instance_id, request_id);
    if (i < 0 && c->n_open_reqs == KVT_RECOVER_REQUESTS)
        kvti_age_requests(c); /* room from requests the scheduler has ended by now */
    if (i < 0 && c->n_open_reqs == KVT_RECOVER_REQUESTS) {
        if (!c->warned_reqs)
            bus_warn("client",
                     "%s: request %s is not carried over to a new leader: %d are open "
                     "(KVT_RECOVER_REQUESTS); logged once per handle",
                     c->name, request_id, KVT_RECOVER_REQUESTS);
        c->warned_reqs = true;
        return;
    }
    kvti_open_req_t *r = &c->open_reqs[i < 0 ? c->n_open_reqs++ : (uint32_t)i];
    snprintf(r->instance_id, sizeof r->instance_id, "%s", instance_id);
    snprintf(r->request_id, sizeof r->request_id, "%s", request_id);
    r->ttl_ms = ttl_ms;
    r->total_blocks = total_blocks;
    r->branch = branch;
    snprintf(r->branch_name, sizeof r->branch_name, "%s", branch_name);
    r->last_ms = zclock_mono();
}

void kvti_touch_request(kvt_client_t *c, const char *instance_id, const char *request_id)
{
    int i = request_id && request_id[0] ? s_find_request(c, instance_id, request_id) : -1;
    if (i >= 0)
        c->open_reqs[i].last_ms = zclock_mono();
}

void kvti_forget_request(kvt_client_t *c, const char *instance_id, const char *request_id)
{
    int i = s_find_request(c, instance_id, request_id);
    if (i >= 0)
        c->open_reqs[i] = c->open_reqs[--c->n_open_reqs];
}

/* A request begun again routed as before? The router is a pure function of the
 * request's facts, so only leaders with different topologies disagree: its
 * blocks so far are on the first branch, its next puts go to the second. */
static void s_check_branch(kvt_client_t *c, const kvti_open_req_t *r)
{
    if (c->rrep->which_body != kvtier_Envelope_request_begin_rep_tag)
        return;
    const kvtier_RequestBeginReply *b = &c->rrep->body.request_begin_rep;
    if (b->branch == r->branch && strcmp(b->branch_name, r->branch_name) == 0)
        return;
    bus_warn("client",
             "%s: request %s/%s was on branch %u (%s) and leader %s puts it on branch %u (%s): "
             "the coordinators' topologies differ",
             c->name, r->instance_id, r->request_id, r->branch, r->branch_name, c->leader,
             b->branch, b->branch_name);
}

/* One recovery call on c->rreq / c->rrep: its status code (0: OK). */
static int s_recovery_call(kvt_client_t *c, uint32_t timeout, kvtier_Status *st)
{
    c->rrep->corr_id = 0;
    c->rrep->leader_epoch = 0;
    c->rrep->which_body = 0;
    c->round_trips++;
    int rc = bus_client_call(c->meta, c->rreq, NULL, NULL, 0, timeout, c->rrep, NULL, NULL, st);
    if (c->rrep->corr_id != 0)
        s_reply_epoch(c, c->rrep->leader_epoch, rc < 0 ? (int)st->code : 0);
    return rc < 0 ? (int)st->code : 0;
}

static bool s_transient(kvtier_StatusCode code)
{
    return code == kvtier_StatusCode_STATUS_UNAVAILABLE || code == kvtier_StatusCode_STATUS_TIMEOUT;
}

/* Tells the leader now connected what this handle holds: its instances registered
 * again, its open requests begun again (not those aged out: kvti_age_requests).
 * Every call waits at most `timeout`, and nothing is sent past `deadline` (the
 * caller's failover bound). 0 once that leader, of a known epoch, was told all;
 * or -code of a call that got no answer, a NOT_LEADER, a deadline passed or a
 * leader that changed meanwhile (the caller finds the leader again; the next
 * call at it tells it again: s_need_recover). A refusal (a spec in CONFLICT, a
 * request in ALREADY_EXISTS) is logged and skipped. */
static int s_recover(kvt_client_t *c, uint32_t timeout, int64_t deadline)
{
    uint32_t regs = 0, begun = 0;
    kvtier_Status st = {0};
    int code = 0;
    if (c->leader_epoch == 0) { /* reached by a redirect: ask which leader this is */
        if (s_remaining_ms(deadline) == 0)
            return -kvtier_StatusCode_STATUS_TIMEOUT;
        bus_env_init(c->rreq, kvtier_Envelope_cluster_info_req_tag, c->name);
        code = s_recovery_call(c, s_call_timeout(timeout, deadline), &st);
        if (code == 0 && c->rrep->which_body == kvtier_Envelope_cluster_info_rep_tag)
            s_learn_epoch(c, c->rrep->body.cluster_info_rep.leader_epoch);
        else if (s_transient((kvtier_StatusCode)code) ||
                 code == kvtier_StatusCode_STATUS_NOT_LEADER)
            return -code;
    }
    uint64_t epoch = c->leader_epoch; /* the leader being told */
    kvti_age_requests(c);
    for (uint32_t i = 0; i < c->n_insts; i++) {
        if (s_remaining_ms(deadline) == 0)
            return -kvtier_StatusCode_STATUS_TIMEOUT;
        bus_env_init(c->rreq, kvtier_Envelope_register_instance_req_tag, c->name);
        c->rreq->body.register_instance_req.has_spec = true;
        c->rreq->body.register_instance_req.spec = c->insts[i];
        code = s_recovery_call(c, s_call_timeout(timeout, deadline), &st);
        if (code == 0) {
            regs++;
            continue;
        }
        if (s_transient((kvtier_StatusCode)code) || code == kvtier_StatusCode_STATUS_NOT_LEADER)
            return -code;
        bus_warn("client", "%s: instance %s not registered again at leader %s: %s: %s", c->name,
                 c->insts[i].instance_id, c->leader, bus_status_name(code), st.message);
    }
    for (uint32_t i = 0; i < c->n_open_reqs; i++) {
        if (s_remaining_ms(deadline) == 0)
            return -kvtier_StatusCode_STATUS_TIMEOUT;
        const kvti_open_req_t *r = &c->open_reqs[i];
        bus_env_init(c->rreq, kvtier_Envelope_request_begin_req_tag, c->name);
        kvtier_RequestBeginRequest *b = &c->rreq->body.request_begin_req;
        snprintf(b->instance_id, sizeof b->instance_id, "%s", r->instance_id);
        b->has_ctx = true;
        snprintf(b->ctx.request_id, sizeof b->ctx.request_id, "%s", r->request_id);
        b->ctx.ttl_ms = r->ttl_ms;
        b->ctx.total_blocks = r->total_blocks;
        code = s_recovery_call(c, s_call_timeout(timeout, deadline), &st);
        if (code == 0) {
            s_check_branch(c, r);
            begun++;
            continue;
        }
        if (s_transient((kvtier_StatusCode)code) || code == kvtier_StatusCode_STATUS_NOT_LEADER)
            return -code;
        bus_warn("client", "%s: request %s/%s not begun again at leader %s: %s: %s", c->name,
                 r->instance_id, r->request_id, c->leader, bus_status_name(code), st.message);
    }
    if (c->leader_epoch != epoch) /* another leader answered meanwhile: tell that one */
        return -kvtier_StatusCode_STATUS_UNAVAILABLE;
    /* an epoch still unknown (a leader that does not say) is asked again next time;
     * tokens of an unknown leader are left to their complete */
    c->recovered_epoch = epoch;
    snprintf(c->recovered_leader, sizeof c->recovered_leader, "%s", c->leader);
    c->recoveries++;
    c->settle_until = zclock_mono() + c->failover_ms;
    if (regs + begun > 0)
        bus_info("client",
                 "%s: leader %s (epoch %" PRIu64 "): %u instances registered and %u requests "
                 "begun again",
                 c->name, c->leader, c->leader_epoch, regs, begun);
    return 0;
}

/* ---- the meta-plane call -------------------------------------------------- */

/* A jittered pause: half of `base`, plus up to the other half at random; `base`
 * doubles up to 1 s with etcd discovery, 250 ms with a coordinator list. */
static void s_backoff(const kvt_client_t *c, int *base)
{
    int max = c->n_etcd > 0 ? KVT_BACKOFF_MAX_MS : KVT_BACKOFF_MAX_LIST_MS;
    int b = *base < KVT_BACKOFF_MIN_MS ? KVT_BACKOFF_MIN_MS : *base > max ? max : *base;
    zclock_sleep(b / 2 + (int)randof(b / 2 + 1));
    *base = b * 2 > max ? max : b * 2;
}

/* Did a NOT_FOUND say that the leader does not know what this handle holds (a
 * new leader, or one that lost track of a request)? Then it is told again. */
static bool s_forgotten(const kvt_client_t *c, const char *msg)
{
    return (c->n_insts > 0 && strstr(msg, "is not registered")) ||
           (c->n_open_reqs > 0 && strstr(msg, "is not open"));
}

typedef struct {
    int64_t give_up;         /* failover_ms after the first failure */
    int backoff;             /* the next pause between rounds */
    uint32_t timeout;        /* the next attempt's */
    bool told;               /* recovered once for a NOT_FOUND */
    uint32_t resends;        /* after a lost reply */
    int code;                /* the first failure's */
    char first[KVT_ERR_MAX]; /* ... and its message */
} s_failover_t;

static int s_left(const s_failover_t *f)
{
    return s_remaining_ms(f->give_up);
}

/* Finds a leader (the redirect, else discovery rounds with back-off) and tells it
 * what this handle holds when it is not the leader known. 0, or -1 once
 * failover_ms has passed (c->err says what was tried). */
static int s_find_leader(kvt_client_t *c, const char *what, s_failover_t *f, const char *named)
{
    for (int round = 0;; round++) {
        int drc;
        if (round == 0 && named && named[0] && strcmp(named, c->leader) != 0) {
            drc = s_connect_meta(c, what, named, 0);
        } else {
            if (round > 0 || !named)
                s_backoff(c, &f->backoff);
            int64_t now = zclock_mono();
            int64_t d = now + (int64_t)f->timeout;
            drc = s_left(f) == 0 ? -1 : s_discover(c, what, d < f->give_up ? d : f->give_up);
        }
        /* a leader not told yet (recovery failed last round, or another one) is
         * told now; a recovery that fails is tried again next round */
        if (drc == 0 && (!s_need_recover(c) || s_recover(c, f->timeout, f->give_up) == 0))
            return 0;
        if (s_left(f) == 0)
            return -1;
    }
}

int kvti_meta_call(kvt_client_t *c, const char *what, bool retry, bus_arrays_t *req_arr,
                   bus_arrays_t *rep_arr)
{
    s_failover_t f = {.timeout = c->timeout_ms};
    for (;;) {
        kvtier_Status st = {0};
        c->rep->leader_endpoint[0] = '\0';
        c->rep->which_body = 0;
        c->rep->corr_id = 0; /* set again only by a reply that arrived */
        c->rep->leader_epoch = 0;
        if (rep_arr)
            bus_arrays_clear(rep_arr);
        c->round_trips++;
        int rc = bus_client_call(c->meta, c->req, req_arr, NULL, 0, f.timeout, c->rep, rep_arr,
                                 NULL, &st);
        /* A leader that answered UNAVAILABLE ("tier recovering, retry shortly") is
         * still the leader: only a missing reply sends us looking for another. */
        bool replied = c->rep->corr_id != 0;
        /* a reply of another leader (a new one on the same endpoint, or one not told
         * yet because its recovery failed): the old tokens are stale now, and it is
         * told what this handle holds, within failover_ms */
        bool moved = false;
        if (replied && c->rep->leader_epoch != 0) {
            int code = rc < 0 ? (int)st.code : 0;
            s_reply_epoch(c, c->rep->leader_epoch, code);
            if (code != kvtier_StatusCode_STATUS_NOT_LEADER && s_need_recover(c)) {
                moved = true;
                int64_t d = f.give_up ? f.give_up : zclock_mono() + c->failover_ms;
                (void)s_recover(c, c->timeout_ms, d);
            }
        }
        if (rc == 0) {
            kvti_clear_error(c);
            return 0;
        }
        kvtier_StatusCode code = st.code;
        bool not_leader = code == kvtier_StatusCode_STATUS_NOT_LEADER;
        bool lost = !replied && s_transient(code);
        bool forgot = replied && code == kvtier_StatusCode_STATUS_NOT_FOUND && !f.told &&
                      s_forgotten(c, st.message);
        /* a new leader still rebuilding its index answers UNAVAILABLE ("retry
         * shortly"), having done nothing: during a failover, and for failover_ms
         * after a new leader was told, that is waited out too */
        bool settling = replied && code == kvtier_StatusCode_STATUS_UNAVAILABLE && retry &&
                        (f.give_up != 0 ? s_left(&f) > 0 : zclock_mono() < c->settle_until);
        if (settling) {
            if (f.give_up == 0) { /* just after a new leader was told: within its bound */
                f.give_up = c->settle_until;
                f.code = (int)code;
                snprintf(f.first, sizeof f.first, "%s", st.message);
            }
            s_backoff(c, &f.backoff);
            continue;
        }
        if (!not_leader && !lost && !forgot)
            return kvti_fail(c, (int)code, what, "%s", st.message);
        if (f.give_up == 0) {
            f.give_up =
                zclock_mono() + (c->failover_ms > c->timeout_ms ? c->failover_ms : c->timeout_ms);
            f.code = (int)code;
            snprintf(f.first, sizeof f.first, "%s", st.message);
        }
        if (forgot) { /* the leader answered: tell it, send again at once */
            f.told = true;
            if (!moved || s_need_recover(c)) /* not told just now, or that failed */
                (void)s_recover(c, c->timeout_ms, f.give_up);
            continue;
        }
        if (lost && !retry) {
            int64_t deadline = zclock_mono() + c->timeout_ms;
            if (s_discover(c, what, deadline) == 0 && s_need_recover(c))
                (void)s_recover(c, c->timeout_ms, f.give_up);
            return kvti_fail(c, (int)code, what,
                             "%s (not retried: the request may have been applied; reconnected "
                             "to leader %s)",
                             f.first, c->leader);
        }
        /* a resend after a lost reply waits less at first (the leader may be dead),
         * then doubles back to timeout_ms (it may be slow) */
        if (lost) {
            uint32_t t = f.resends++ == 0 ? KVT_RESEND_MIN_TIMEOUT_MS : 2 * f.timeout;
            f.timeout = t < c->timeout_ms ? t : c->timeout_ms;
        }
        /* a NOT_LEADER naming no leader (none elected yet, or one handing over) is
         * discovery with back-off, as a lost reply */
        const char *named =
            not_leader && c->rep->leader_endpoint[0] ? c->rep->leader_endpoint : NULL;
        if (s_find_leader(c, what, &f, named) < 0) {
            char again[KVT_ERR_MAX];
            snprintf(again, sizeof again, "%s", c->err);
            return kvti_fail(c, f.code, what,
                             "%s (no leader answered within failover_ms %u; last: %s)", f.first,
                             c->failover_ms, again);
        }
        int left = s_left(&f);
        if (left == 0)
            return kvti_fail(c, f.code, what, "%s (failover_ms %u passed)", f.first,
                             c->failover_ms);
        if ((uint32_t)left < f.timeout)
            f.timeout = (uint32_t)left;
    }
}

/* ---- connect / close ------------------------------------------------------ */

static int s_open(kvt_client_t *c, const kvt_options_t *opts)
{
    int rc = s_options(c, opts);
    if (rc < 0)
        return rc;
    c->req = calloc(1, sizeof *c->req);
    c->rep = calloc(1, sizeof *c->rep);
    c->probe = calloc(1, sizeof *c->probe);
    c->rreq = calloc(1, sizeof *c->rreq);
    c->rrep = calloc(1, sizeof *c->rrep);
    c->insts = calloc(KVT_RECOVER_INSTANCES, sizeof *c->insts);
    c->open_reqs = calloc(KVT_RECOVER_REQUESTS, sizeof *c->open_reqs);
    if (!c->req || !c->rep || !c->probe || !c->rreq || !c->rrep || !c->insts || !c->open_reqs)
        return kvti_fail(c, KVT_INTERNAL, "kvt_connect", "out of memory");
    if (bus_host_identity(c->host_name, c->host_id, sizeof c->host_id) < 0)
        c->host_id[0] = '\0'; /* no shared-memory path without a host identity */
    if (c->n_etcd > 0) {
        const char *urls[COORD_ETCD_MAX_ENDPOINTS];
        for (uint32_t i = 0; i < c->n_etcd; i++)
            urls[i] = c->etcd_urls[i];
        coord_etcd_tls_t tls = {c->etcd_ca, c->etcd_cert, c->etcd_key};
        coord_etcd_config_t ecfg = {.endpoints = urls,
                                    .n_endpoints = c->n_etcd,
                                    .timeout_ms = (int)c->timeout_ms,
                                    .max_response = 64 * 1024,
                                    .tls = c->etcd_tls_set ? &tls : NULL};
        c->etcd = coord_etcd_new(&ecfg);
        if (!c->etcd)
            return kvti_fail(c, KVT_INVALID_ARGUMENT, "kvt_connect",
                             "etcd_endpoints not accepted by the etcd client");
    }
    c->data = kvti_data_new(c);
    if (!c->data)
        return kvti_fail(c, KVT_INTERNAL, "kvt_connect", "out of memory (data role)");
    rc = s_discover(c, "kvt_connect", zclock_mono() + c->timeout_ms);
    if (rc < 0)
        return rc;
    /* The leader answers for itself: a stale etcd key or a moved leader shows here. */
    bus_env_init(c->req, kvtier_Envelope_cluster_info_req_tag, c->name);
    rc = kvti_meta_call(c, "kvt_connect", true, NULL, NULL);
    if (rc < 0)
        return rc;
    if (c->rep->which_body == kvtier_Envelope_cluster_info_rep_tag) {
        s_learn_epoch(c, c->rep->body.cluster_info_rep.leader_epoch);
        snprintf(c->leader_cluster, sizeof c->leader_cluster, "%s",
                 c->rep->body.cluster_info_rep.cluster);
    }
    /* Two deployments on one host must not serve each other's clients (issue 12):
     * a handle told its cluster refuses a leader of another. */
    if (c->cluster_given && c->leader_cluster[0] && strcmp(c->leader_cluster, c->cluster) != 0)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, "kvt_connect",
                         "the leader at %s serves cluster '%s', not '%s' "
                         "(kvt_options_t.cluster): another deployment on these endpoints?",
                         c->leader, c->leader_cluster, c->cluster);
    /* nothing is held yet: this leader needs no telling */
    c->recovered_epoch = c->leader_epoch;
    snprintf(c->recovered_leader, sizeof c->recovered_leader, "%s", c->leader);
    c->connected = true;
    /* job_ids unique across handles (PROTOCOL.md §8.1): a random base, never 0 */
    if (getrandom(&c->prepare_seq, sizeof c->prepare_seq, GRND_NONBLOCK) !=
        (ssize_t)sizeof c->prepare_seq)
        c->prepare_seq = (uint64_t)zclock_usecs() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)c;
    return 0;
}

int kvti_refresh_leader(kvt_client_t *c, const char *what)
{
    bus_env_init(c->req, kvtier_Envelope_cluster_info_req_tag, c->name);
    int rc = kvti_meta_call(c, what, true, NULL, NULL);
    if (rc == 0 && c->rep->which_body == kvtier_Envelope_cluster_info_rep_tag) {
        s_learn_epoch(c, c->rep->body.cluster_info_rep.leader_epoch);
        snprintf(c->leader_cluster, sizeof c->leader_cluster, "%s",
                 c->rep->body.cluster_info_rep.cluster);
    }
    return rc;
}

kvt_client_t *kvt_connect(const kvt_options_t *opts, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!opts) {
        if (err && errlen)
            snprintf(err, errlen, "kvt_connect: INVALID_ARGUMENT: no options");
        return NULL;
    }
    kvt_client_t *c = calloc(1, sizeof *c);
    if (!c) {
        if (err && errlen)
            snprintf(err, errlen, "kvt_connect: INTERNAL: out of memory");
        return NULL;
    }
    if (s_open(c, opts) < 0) {
        if (err && errlen)
            snprintf(err, errlen, "%s", c->err);
        kvt_close(&c);
        return NULL;
    }
    bus_debug("client", "%s: connected to leader %s (epoch %" PRIu64 ")", c->name, c->leader,
              c->leader_epoch);
    return c;
}

void kvt_close(kvt_client_t **cp)
{
    if (!cp || !*cp)
        return;
    kvt_client_t *c = *cp;
    kvti_data_destroy(&c->data);
    kvti_tokens_free_all(c);
    bus_client_destroy(&c->meta);
    coord_etcd_destroy(&c->etcd);
    free(c->scratch_hit);
    free(c->scratch_tiers);
    free(c->req);
    free(c->rep);
    free(c->probe);
    free(c->rreq);
    free(c->rrep);
    free(c->insts);
    free(c->open_reqs);
    free(c);
    *cp = NULL;
}
