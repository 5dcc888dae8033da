/* coord_config.c — deployment file → coord_config_t (see coord_config.h). Each
 * section has one reader; rules that span sections (unique names and endpoints,
 * chains naming tiers) run after all sections are read. */
#include "coord_config.h"
#include "coord_curve.h"
#include "coord_topology.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_config.h"
#include "bus_fault_admin.h"
#include "bus_limits.h"
#include "events_vllm.h"
#include "metrics_http.h"
#include "publisher_mirror.h"
#include "tier_policy.h"

/* The default deployment (wave-2 decisions): everything on this host, etcd
 * started by the supervisor (no endpoints), one host tier of 4096 x 256 KiB. */
static const char s_defaults[] =
    "{\n"
    "  \"cluster\": \"kvtier\",\n"
    "  \"etcd\": { \"endpoints\": [], \"lease_ttl\": \"3s\" },\n"
    "  \"coordinator\": { \"endpoint\": \"tcp://127.0.0.1:7700\",\n"
    "                   \"pin_lease\": \"30s\", \"write_grace\": \"30s\",\n"
    "                   \"max_batch\": 65536, \"max_requests\": 65536,\n"
    "                   \"max_instances\": 64, \"tier_timeout\": \"2s\",\n"
    "                   \"metrics\": \"127.0.0.1:0\" },\n"
    "  \"tiers\": [ { \"name\": \"host0\", \"kind\": \"host\",\n"
    "               \"endpoint\": \"tcp://127.0.0.1:7710\", \"capacity\": 4096,\n"
    "               \"slot_size\": \"256KiB\", \"policy\": \"lru\", \"prefault\": true } ],\n"
    "  \"gc\": { \"interval\": \"1s\", \"page\": 64, \"probe_timeout\": \"2s\" },\n"
    "  \"reclaimer\": { \"interval\": \"100ms\", \"delete_delay\": \"1s\",\n"
    "                 \"max_pending\": 4096, \"quota_low\": 0.9 },\n"
    "  \"events\": { \"endpoint\": \"tcp://127.0.0.1:7701\",\n"
    "              \"replay_endpoint\": \"tcp://127.0.0.1:7702\",\n"
    "              \"ring_batches\": 4096, \"ring_bytes\": \"64MiB\", \"queue\": 1024,\n"
    "              \"subscriber_queue\": 1000, \"snapshot_blocks\": 4194304,\n"
    "              \"put_tokens\": 4194304,\n"
    "              \"vllm_endpoint\": \"tcp://127.0.0.1:7703\",\n"
    "              \"vllm_replay_endpoint\": \"tcp://127.0.0.1:7704\",\n"
    "              \"vllm_layout\": \"map\" },\n"
    "  \"metrics\": { \"refresh\": \"1s\", \"sample_interval\": \"5s\", \"samples\": 360,\n"
    "               \"max_connections\": 16, \"timeout\": \"5s\", \"max_instances\": 16 },\n"
    "  \"optimizer\": { \"enabled\": true, \"every\": \"10s\", \"window\": 1048576,\n"
    "                 \"capacity\": 0 },\n"
    "  \"security\": { \"secret_file\": \"\", \"clock_skew\": \"5s\" }\n"
    "}\n";

const char *coord_config_defaults(void)
{
    return s_defaults;
}

int coord_cluster_key(char *buf, size_t len, const char *cluster, const char *suffix)
{
    int n = snprintf(buf, len, "/kvtier/%s/%s", cluster, suffix ? suffix : "");
    if (n < 0 || (size_t)n >= len) {
        if (len)
            buf[0] = '\0';
        return -ENAMETOOLONG;
    }
    return 0;
}

int64_t coord_config_lease_ttl_s(const coord_config_t *cfg)
{
    int64_t s = (int64_t)((cfg->lease_ttl_ms + 999) / 1000);
    return s < 1 ? 1 : s;
}

/* ---- small rules ----------------------------------------------------------- */

/* Names end up in etcd keys, shm names and logs: letters, digits, '_', '-', '.'
 * (a leading letter or digit). */
static bool s_name_ok(const char *s)
{
    if (!isalnum((unsigned char)s[0]))
        return false;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.')
            return false;
    return true;
}

static int s_get_name(const bus_config_node_t *node, const char *path, char *out, size_t outsz,
                      char *err, size_t errlen)
{
    int rc = bus_config_get_string(node, path, out, outsz, err, errlen);
    if (rc < 0)
        return rc;
    if (!s_name_ok(out))
        return bus_config_error(node, path, err, errlen,
                                "\"%s\": a name is 1..%zu letters, digits, '_', '-' or '.', "
                                "starting with a letter or digit",
                                out, outsz - 1);
    return 0;
}

/* "http://host[:port]" or "https://...", as coord_etcd takes them. */
static int s_check_etcd_url(const char *url, char *why, size_t whylen)
{
    const char *rest = NULL;
    if (strncmp(url, "http://", 7) == 0)
        rest = url + 7;
    else if (strncmp(url, "https://", 8) == 0)
        rest = url + 8;
    if (!rest) {
        snprintf(why, whylen, "\"%s\": an etcd endpoint is an http:// or https:// URL", url);
        return -EINVAL;
    }
    if (!rest[0] || rest[0] == ':' || rest[0] == '/') {
        snprintf(why, whylen, "\"%s\": no host", url);
        return -EINVAL;
    }
    for (const char *p = url; *p; p++)
        if (!isgraph((unsigned char)*p)) {
            snprintf(why, whylen, "\"%s\": spaces or control characters", url);
            return -EINVAL;
        }
    if (strlen(url) >= COORD_ETCD_ENDPOINT_MAX) {
        snprintf(why, whylen, "\"%.40s...\": longer than %d bytes", url,
                 COORD_ETCD_ENDPOINT_MAX - 1);
        return -EINVAL;
    }
    return 0;
}

/* An endpoint as bus_config reads it, short enough for the wire (TierInfo.endpoint,
 * Envelope.leader_endpoint: 127 bytes). */
static int s_endpoint(const bus_config_node_t *node, const char *path, char *out, size_t outsz,
                      char *err, size_t errlen)
{
    int rc = bus_config_get_endpoint(node, path, BUS_ENDPOINT_BIND, out, outsz, err, errlen);
    if (rc == 0 && strlen(out) > COORD_WIRE_ENDPOINT_MAX)
        rc = bus_config_error(node, path, err, errlen, "longer than %u bytes",
                              COORD_WIRE_ENDPOINT_MAX);
    return rc;
}

static int s_duration(const bus_config_node_t *node, const char *path, uint64_t min_ms,
                      uint64_t *out, char *err, size_t errlen)
{
    int rc = bus_config_get_duration_ms(node, path, out, err, errlen);
    if (rc < 0)
        return rc;
    if (*out < min_ms)
        return bus_config_error(node, path, err, errlen, "must be at least %llums, got %llums",
                                (unsigned long long)min_ms, (unsigned long long)*out);
    return 0;
}

static int s_u32(const bus_config_node_t *node, const char *path, uint32_t max, uint32_t *out,
                 char *err, size_t errlen)
{
    uint64_t v = 0;
    int rc = bus_config_get_u64(node, path, 1, max, &v, err, errlen);
    *out = (uint32_t)v;
    return rc;
}

/* Two endpoints that would bind the same address (ephemeral ports and ipc "*"
 * never collide). */
static bool s_same_endpoint(const char *a, const char *b)
{
    bus_endpoint_t ea, eb;
    if (bus_endpoint_parse(a, &ea, NULL, 0) < 0 || bus_endpoint_parse(b, &eb, NULL, 0) < 0)
        return false;
    if (ea.ephemeral_port || eb.ephemeral_port || ea.wildcard_ipc || eb.wildcard_ipc)
        return false;
    return strcmp(a, b) == 0;
}

/* "host": a host name (bus_host.h), "" when absent. */
static int s_host(const bus_config_node_t *node, char *out, size_t outsz, char *err, size_t errlen)
{
    int rc = bus_config_opt_string(node, "host", "", out, outsz, err, errlen);
    if (rc == 0 && bus_config_has(node, "host") && !bus_host_name_ok(out))
        rc = bus_config_error(node, "host", err, errlen,
                              "\"%s\": a host name is 1..%d letters, digits, '_', '-' or '.', "
                              "starting with a letter or digit",
                              out, BUS_HOST_NAME_MAX - 1);
    return rc;
}

/* ---- sections ------------------------------------------------------------- */

/* etcd.tls: {"ca", "cert", "key"} (files checked when a process applies them). */
static int s_read_etcd_tls(const bus_config_node_t *etcd, coord_config_t *c, char *err,
                           size_t errlen)
{
    static const char *const keys[] = {"ca", "cert", "key", NULL};
    bus_config_node_t tn;
    if (!bus_config_has(etcd, "tls"))
        return 0;
    int rc = bus_config_get_object(etcd, "tls", 4, &tn, err, errlen);
    if (rc == 0)
        rc = bus_config_check_keys(&tn, "", keys, err, errlen);
    if (rc == 0)
        rc = bus_config_opt_string(&tn, "ca", "", c->etcd_ca, sizeof c->etcd_ca, err, errlen);
    if (rc == 0)
        rc = bus_config_opt_string(&tn, "cert", "", c->etcd_cert, sizeof c->etcd_cert, err, errlen);
    if (rc == 0)
        rc = bus_config_opt_string(&tn, "key", "", c->etcd_key, sizeof c->etcd_key, err, errlen);
    if (rc == 0 && !c->etcd_cert[0] != !c->etcd_key[0])
        rc = bus_config_error(&tn, c->etcd_cert[0] ? "key" : "cert", err, errlen,
                              "missing: a client certificate needs its key");
    return rc;
}

static int s_read_etcd(const bus_config_node_t *root, coord_config_t *c, char *err, size_t errlen)
{
    static const char *const keys[] = {"endpoints", "lease_ttl", "tls", "host", NULL};
    bus_config_node_t etcd, arr, el;
    size_t n = 0;
    int rc = bus_config_get_object(root, "etcd", 16, &etcd, err, errlen);
    if (rc == 0)
        rc = bus_config_check_keys(&etcd, "", keys, err, errlen);
    if (rc == 0)
        rc = bus_config_get_array(&etcd, "endpoints", COORD_ETCD_MAX_ENDPOINTS, &arr, &n, err,
                                  errlen);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char why[COORD_ETCD_ENDPOINT_MAX + 96];
        char idx[24];
        snprintf(idx, sizeof idx, "[%zu]", i);
        rc = bus_config_array_elem(&arr, i, &el, err, errlen);
        if (rc == 0)
            rc = bus_config_get_string(&el, "", c->etcd[i], sizeof c->etcd[i], err, errlen);
        if (rc == 0 && s_check_etcd_url(c->etcd[i], why, sizeof why) < 0)
            rc = bus_config_error(&arr, idx, err, errlen, "%s", why);
    }
    c->n_etcd = (uint32_t)n;
    if (rc == 0)
        rc = s_duration(&etcd, "lease_ttl", 1000, &c->lease_ttl_ms, err, errlen);
    if (rc == 0 && c->lease_ttl_ms > 3600000)
        rc = bus_config_error(&etcd, "lease_ttl", err, errlen, "must be at most 1h");
    if (rc == 0)
        rc = s_read_etcd_tls(&etcd, c, err, errlen);
    if (rc == 0)
        rc = s_host(&etcd, c->etcd_host, sizeof c->etcd_host, err, errlen);
    return rc;
}

/* A metrics HTTP address "IPV4:PORT" (port 0: the kernel picks), or "" (off). */
static int s_metrics_addr(const bus_config_node_t *node, const char *path, const char *dflt,
                          char *out, size_t outsz, char *err, size_t errlen)
{
    int rc = bus_config_opt_string(node, path, dflt, out, outsz, err, errlen);
    struct sockaddr_in sa;
    char why[160];
    if (rc == 0 && out[0] && metrics_http_parse_addr(out, &sa, why, sizeof why) < 0)
        rc = bus_config_error(node, path, err, errlen, "%s", why);
    return rc;
}

/* A wildcard address ("*", 0.0.0.0, [::]) binds every interface: no peer can
 * connect to it. */
static bool s_wildcard_host(const bus_endpoint_t *ep)
{
    return ep->transport == BUS_ENDPOINT_TCP &&
           (ep->wildcard_host || !strcmp(ep->address, "0.0.0.0") || !strcmp(ep->address, "::"));
}

/* "advertise": where peers connect (etcd, redirects, ClusterInfo). Absent: BIND
 * itself, which must then be connectable (an ephemeral port is resolved at bind
 * time). Present: a connect endpoint naming one peer. */
static int s_advertise(const bus_config_node_t *node, const char *bind, char *out, size_t outsz,
                       char *err, size_t errlen)
{
    bus_endpoint_t b, a;
    char why[BUS_ENDPOINT_MAX + 96];
    if (bus_endpoint_parse(bind, &b, NULL, 0) < 0)
        return bus_config_error(node, "endpoint", err, errlen, "\"%s\": not an endpoint", bind);
    if (!bus_config_has(node, "advertise")) {
        if (s_wildcard_host(&b))
            return bus_config_error(node, "endpoint", err, errlen,
                                    "%s binds every interface: set \"advertise\" to the "
                                    "address peers connect to (tcp://HOST:PORT)",
                                    bind);
        snprintf(out, outsz, "%s", bind);
        return 0;
    }
    int rc = bus_config_get_string(node, "advertise", out, outsz, err, errlen);
    if (rc < 0)
        return rc;
    if (bus_endpoint_parse(out, &a, why, sizeof why) < 0)
        return bus_config_error(node, "advertise", err, errlen, "%s", why);
    if (s_wildcard_host(&a) || bus_endpoint_is_bind_only(&a))
        return bus_config_error(node, "advertise", err, errlen,
                                "%s is a wildcard: an advertised endpoint names the one host "
                                "and port peers connect to",
                                out);
    if (a.transport == BUS_ENDPOINT_INPROC)
        return bus_config_error(node, "advertise", err, errlen,
                                "%s: inproc:// cannot be reached by another process", out);
    if (strlen(out) > COORD_WIRE_ENDPOINT_MAX)
        return bus_config_error(node, "advertise", err, errlen, "longer than %u bytes",
                                COORD_WIRE_ENDPOINT_MAX);
    if (b.ephemeral_port || b.wildcard_ipc)
        return bus_config_error(node, "advertise", err, errlen,
                                "\"endpoint\" %s lets the kernel pick the port: the advertised "
                                "one could not match it; bind a fixed port",
                                bind);
    if (a.transport != b.transport)
        return bus_config_error(node, "advertise", err, errlen,
                                "%s and the bound %s are not the same transport", out, bind);
    return 0;
}

static int s_read_coordinator(const bus_config_node_t *root, coord_config_t *c, char *err,
                              size_t errlen)
{
    static const char *const keys[] = {"endpoint",
                                       "pin_lease",
                                       "write_grace",
                                       "request_idle",
                                       "max_batch",
                                       "max_requests",
                                       "max_instances",
                                       "tier_timeout",
                                       "metrics",
                                       "max_clients",
                                       "max_requests_per_client",
                                       "client_idle",
                                       "max_connections",
                                       "advertise",
                                       "host",
                                       NULL};
    bus_config_node_t co;
    int rc = bus_config_get_object(root, "coordinator", 32, &co, err, errlen);
    if (rc == 0)
        rc = bus_config_check_keys(&co, "", keys, err, errlen);
    if (rc == 0)
        rc = s_endpoint(&co, "endpoint", c->endpoint, sizeof c->endpoint, err, errlen);
    if (rc == 0)
        rc = s_duration(&co, "pin_lease", 1, &c->pin_lease_ms, err, errlen);
    if (rc == 0)
        rc = s_duration(&co, "write_grace", 1, &c->write_grace_ms, err, errlen);
    if (rc == 0 && bus_config_has(&co, "request_idle"))
        rc = s_duration(&co, "request_idle", 1, &c->request_idle_ms, err, errlen);
    if (rc == 0)
        rc = s_u32(&co, "max_batch", COORD_MAX_BATCH, &c->max_batch, err, errlen);
    if (rc == 0)
        rc = s_u32(&co, "max_requests", 1u << 24, &c->max_requests, err, errlen);
    if (rc == 0)
        rc = s_u32(&co, "max_instances", 1u << 16, &c->max_instances, err, errlen);
    if (rc == 0)
        rc = s_duration(&co, "tier_timeout", 1, &c->tier_timeout_ms, err, errlen);
    /* client bounds (issue 12 §3): absent = the scheduler's defaults */
    if (rc == 0 && bus_config_has(&co, "max_clients"))
        rc = s_u32(&co, "max_clients", 1u << 16, &c->max_clients, err, errlen);
    if (rc == 0 && bus_config_has(&co, "max_requests_per_client"))
        rc = s_u32(&co, "max_requests_per_client", 1u << 24, &c->max_requests_per_client, err,
                   errlen);
    if (rc == 0 && c->max_requests_per_client > c->max_requests)
        rc = bus_config_error(&co, "max_requests_per_client", err, errlen,
                              "%u is more than max_requests (%u)", c->max_requests_per_client,
                              c->max_requests);
    if (rc == 0 && bus_config_has(&co, "client_idle"))
        rc = s_duration(&co, "client_idle", 1, &c->client_idle_ms, err, errlen);
    if (rc == 0 && bus_config_has(&co, "max_connections"))
        rc = s_u32(&co, "max_connections", 1u << 20, &c->max_connections, err, errlen);
    if (rc == 0)
        rc = s_metrics_addr(&co, "metrics", "127.0.0.1:0", c->metrics, sizeof c->metrics, err,
                            errlen);
    /* the shorthand's one entry (s_read_coordinators replaces it by the list) */
    coord_coordinator_config_t *e = &c->coordinators[0];
    snprintf(e->name, sizeof e->name, "coordinator");
    snprintf(e->endpoint, sizeof e->endpoint, "%s", c->endpoint);
    snprintf(e->metrics, sizeof e->metrics, "%s", c->metrics);
    if (rc == 0)
        rc = s_advertise(&co, e->endpoint, e->advertise, sizeof e->advertise, err, errlen);
    if (rc == 0)
        rc = s_host(&co, e->host, sizeof e->host, err, errlen);
    c->n_coordinators = 1;
    return rc;
}

static int s_read_coordinator_entry(const bus_config_node_t *en, const coord_config_t *c,
                                    coord_coordinator_config_t *e, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "endpoint", "advertise", "host", "metrics", NULL};
    int rc = bus_config_check_keys(en, "", keys, err, errlen);
    if (rc == 0)
        rc = s_get_name(en, "name", e->name, sizeof e->name, err, errlen);
    if (rc == 0)
        rc = s_endpoint(en, "endpoint", e->endpoint, sizeof e->endpoint, err, errlen);
    if (rc == 0)
        rc = s_advertise(en, e->endpoint, e->advertise, sizeof e->advertise, err, errlen);
    if (rc == 0)
        rc = s_host(en, e->host, sizeof e->host, err, errlen);
    if (rc == 0)
        rc = s_metrics_addr(en, "metrics", c->metrics, e->metrics, sizeof e->metrics, err, errlen);
    return rc;
}

/* A metrics address whose port the kernel picks ("IPV4:0"). */
static bool s_any_port(const char *addr)
{
    const char *colon = strrchr(addr, ':');
    return colon && strcmp(colon + 1, "0") == 0;
}

/* Two entries that would bind one address: the same bind endpoint on one host (an
 * entry without a host runs on every supervisor's, so it meets every other). */
static bool s_same_host(const char *a, const char *b)
{
    return !a[0] || !b[0] || strcmp(a, b) == 0;
}

static int s_check_coordinator_unique(const bus_config_node_t *arr, const coord_config_t *c,
                                      uint32_t i, char *err, size_t errlen)
{
    const coord_coordinator_config_t *e = &c->coordinators[i];
    char path[48];
    for (uint32_t j = 0; j < i; j++) {
        const coord_coordinator_config_t *o = &c->coordinators[j];
        if (strcmp(o->name, e->name) == 0) {
            snprintf(path, sizeof path, "[%u].name", i);
            return bus_config_error(arr, path, err, errlen,
                                    "duplicate coordinator name \"%s\" (also coordinators[%u])",
                                    e->name, j);
        }
        if (s_same_host(o->host, e->host) && s_same_endpoint(o->endpoint, e->endpoint)) {
            snprintf(path, sizeof path, "[%u].endpoint", i);
            return bus_config_error(arr, path, err, errlen,
                                    "endpoint %s is also coordinators[%u]'s (%s) on the same "
                                    "host: give each its own port, or each its own \"host\"",
                                    e->endpoint, j, o->name);
        }
        if (s_same_host(o->host, e->host) && e->metrics[0] && strcmp(o->metrics, e->metrics) == 0 &&
            !s_any_port(e->metrics)) {
            snprintf(path, sizeof path, "[%u].metrics", i);
            return bus_config_error(arr, path, err, errlen,
                                    "%s is also coordinators[%u]'s (%s) on the same host: give "
                                    "each its own \"metrics\" port (or port 0)",
                                    e->metrics, j, o->name);
        }
        if (strcmp(o->advertise, e->advertise) == 0 && !strchr(e->advertise, '*')) {
            snprintf(path, sizeof path, "[%u].advertise", i);
            return bus_config_error(arr, path, err, errlen,
                                    "advertised endpoint %s is also coordinators[%u]'s (%s): "
                                    "clients could not tell them apart",
                                    e->advertise, j, o->name);
        }
    }
    return 0;
}

/* "coordinators": [{name, endpoint, advertise?, host?, metrics?}], 1..8 entries. */
static int s_read_coordinators(const bus_config_node_t *root, coord_config_t *c, char *err,
                               size_t errlen)
{
    bus_config_node_t arr, en;
    size_t n = 0;
    if (!bus_config_has(root, "coordinators"))
        return 0;
    c->coordinators_listed = true;
    int rc =
        bus_config_get_array(root, "coordinators", COORD_MAX_COORDINATORS, &arr, &n, err, errlen);
    char scratch[BUS_CONFIG_ERR_MAX];
    if (rc < 0 &&
        bus_config_get_array(root, "coordinators", SIZE_MAX, &arr, &n, scratch, sizeof scratch) ==
            0 &&
        n > COORD_MAX_COORDINATORS)
        return bus_config_error(root, "coordinators", err, errlen,
                                "%zu entries: a deployment has at most %d coordinators", n,
                                COORD_MAX_COORDINATORS);
    if (rc == 0 && n == 0)
        rc = bus_config_error(root, "coordinators", err, errlen,
                              "empty: list at least one coordinator, or leave the key out "
                              "(\"coordinator.endpoint\" is then the only one)");
    memset(c->coordinators, 0, sizeof c->coordinators);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = bus_config_array_elem(&arr, i, &en, err, errlen);
        if (rc == 0)
            rc = s_read_coordinator_entry(&en, c, &c->coordinators[i], err, errlen);
        if (rc == 0)
            c->n_coordinators = (uint32_t)i + 1;
        if (rc == 0)
            rc = s_check_coordinator_unique(&arr, c, (uint32_t)i, err, errlen);
    }
    /* "the coordinator endpoint" of one-coordinator callers: the first one's */
    if (rc == 0)
        snprintf(c->endpoint, sizeof c->endpoint, "%s", c->coordinators[0].advertise);
    return rc;
}

static int s_policy_error(const bus_config_node_t *tn, const char *name, char *err, size_t errlen)
{
    char known[128] = "";
    size_t off = 0;
    for (size_t i = 0; i < tier_policy_count() && off < sizeof known; i++) {
        int n = snprintf(known + off, sizeof known - off, "%s\"%s\"", i ? ", " : "",
                         tier_policy_at(i)->name);
        if (n < 0)
            break;
        off += (size_t)n;
    }
    return bus_config_error(tn, "policy", err, errlen, "unknown policy \"%s\" (known: %s)", name,
                            known);
}

/* The keys of a tier entry read here; every other key goes to the backend. */
static const char *const s_tier_keys[] = {
    "name",           "kind",          "plugin",    "endpoint", "capacity", "policy",
    "high_watermark", "low_watermark", "slot_size", "metrics",  "reclaim",  "max_connections",
    "advertise",      "host",          NULL};

static bool s_generic_key(const char *key)
{
    for (size_t i = 0; s_tier_keys[i]; i++)
        if (strcmp(s_tier_keys[i], key) == 0)
            return true;
    return false;
}

/* The kind: a registered one, or the one "plugin" loads (tier_load). */
static int s_read_kind(const bus_config_node_t *tn, coord_tier_config_t *t,
                       const struct tier_ops **ops, char *err, size_t errlen)
{
    int rc = bus_config_get_string(tn, "kind", t->kind_name, sizeof t->kind_name, err, errlen);
    if (rc == 0)
        rc = bus_config_opt_string(tn, "plugin", "", t->plugin, sizeof t->plugin, err, errlen);
    if (rc < 0)
        return rc;
    if (t->plugin[0]) {
        char why[BUS_CONFIG_ERR_MAX];
        const struct tier_ops *p = tier_load(t->plugin, why, sizeof why);
        if (!p)
            return bus_config_error(tn, "plugin", err, errlen, "%s", why);
        if (strcmp(p->kind, t->kind_name) != 0)
            return bus_config_error(tn, "kind", err, errlen,
                                    "\"%s\", but the plugin %s serves kind \"%s\"", t->kind_name,
                                    t->plugin, p->kind);
    }
    *ops = tier_find(t->kind_name);
    if (!*ops)
        return bus_config_error(
            tn, "kind", err, errlen,
            "unknown kind \"%s\" (built in: \"host\", \"nvme\", \"remote\"; others "
            "come from a \"plugin\")",
            t->kind_name);
    return 0;
}

/* The entry's keys are this file's and the backend's (its address key, its
 * option keys); anything else is a typo, reported before any value. */
static bool s_pool_only_key(const char *key)
{
    return strcmp(key, "max_members") == 0 || strcmp(key, "members") == 0;
}

/* Keys of a tier entry a pool entry does not take: each member has its own. */
static bool s_member_key(const char *key)
{
    return strcmp(key, "endpoint") == 0 || strcmp(key, "advertise") == 0 ||
           strcmp(key, "host") == 0;
}

static int s_check_tier_keys(const bus_config_node_t *tn, const struct tier_ops *ops, bool pool,
                             char *err, size_t errlen)
{
    const char *allowed[sizeof s_tier_keys / sizeof s_tier_keys[0] + TIER_MAX_OPTIONS + 3];
    size_t na = 0;
    for (size_t i = 0; s_tier_keys[i]; i++)
        if (!pool || !s_member_key(s_tier_keys[i]))
            allowed[na++] = s_tier_keys[i];
    if (pool) {
        allowed[na++] = "max_members";
        allowed[na++] = "members";
        const char *bad[] = {"endpoint", "advertise", "host"};
        for (size_t i = 0; i < 3; i++)
            if (bus_config_has(tn, bad[i]))
                return bus_config_error(tn, bad[i], err, errlen,
                                        "a pool's members each have their own (kvtier tier --pool "
                                        "NAME --name N --endpoint EP [--advertise EP] [--host H])");
    }
    if (ops->path_key)
        allowed[na++] = ops->path_key;
    size_t room = sizeof allowed / sizeof allowed[0] - 1; /* the NULL */
    for (size_t i = 0; ops->option_keys && ops->option_keys[i] && na < room; i++)
        allowed[na++] = ops->option_keys[i];
    allowed[na] = NULL;
    return bus_config_check_keys(tn, "", allowed, err, errlen);
}

/* One backend key as text: a string as is, true/false, an integer. */
static int s_backend_value(const bus_config_node_t *tn, const char *key, char *out, size_t len,
                           char *err, size_t errlen)
{
    char scratch[BUS_CONFIG_ERR_MAX];
    bool b;
    uint64_t u;
    if (bus_config_get_string(tn, key, out, len, scratch, sizeof scratch) == 0)
        return 0;
    if (bus_config_get_bool(tn, key, &b, scratch, sizeof scratch) == 0) {
        snprintf(out, len, "%s", b ? "true" : "false");
        return 0;
    }
    if (bus_config_get_u64(tn, key, 0, UINT64_MAX, &u, scratch, sizeof scratch) == 0) {
        snprintf(out, len, "%llu", (unsigned long long)u);
        return 0;
    }
    return bus_config_error(tn, key, err, errlen,
                            "expected a string, true/false or a non-negative integer (at most "
                            "%zu bytes)",
                            len - 1);
}

/* The backend's part of a tier entry: its address key into backend.path, the
 * other keys as options, then the backend's own checks (tier_configure). */
static int s_read_backend(const bus_config_node_t *tn, const coord_config_t *c,
                          const struct tier_ops *ops, coord_tier_config_t *t, char *err,
                          size_t errlen)
{
    tier_config_t *b = &t->backend;
    snprintf(b->name, sizeof b->name, "%s", t->name);
    snprintf(b->kind, sizeof b->kind, "%s", t->kind_name);
    snprintf(b->scope, sizeof b->scope, "kvtier-%s-%s", c->cluster, t->name);
    b->capacity = t->capacity;
    b->slot_size = t->slot_size;
    bus_config_node_t obj, child;
    int rc = bus_config_get_object(tn, "", SIZE_MAX, &obj, err, errlen);
    void *it = NULL;
    const char *key;
    while (rc == 0 && bus_config_object_next(&obj, &it, &key, &child)) {
        if (s_generic_key(key) || s_pool_only_key(key))
            continue;
        if (ops->path_key && strcmp(key, ops->path_key) == 0) {
            rc = s_backend_value(tn, key, b->path, sizeof b->path, err, errlen);
            continue;
        }
        char value[TIER_OPTION_VALUE_MAX];
        rc = s_backend_value(tn, key, value, sizeof value, err, errlen);
        int set = rc == 0 ? tier_config_set(b, key, value) : 0;
        if (set == -ENOSPC)
            rc = bus_config_error(tn, key, err, errlen, "more than %d backend options",
                                  TIER_MAX_OPTIONS);
        else if (set < 0)
            rc = bus_config_error(tn, key, err, errlen, "too long (at most %d bytes)",
                                  TIER_OPTION_VALUE_MAX - 1);
    }
    char why[BUS_CONFIG_ERR_MAX];
    if (rc == 0 && tier_configure(b, why, sizeof why) < 0) {
        /* "KEY: why" names the key when the backend's message starts with one */
        const char *colon = strchr(why, ':');
        char bad[TIER_OPTION_KEY_MAX] = "";
        if (colon && (size_t)(colon - why) < sizeof bad)
            snprintf(bad, sizeof bad, "%.*s", (int)(colon - why), why);
        bool named = bad[0] && (bus_config_has(tn, bad) ||
                                (ops->path_key && strcmp(bad, ops->path_key) == 0));
        rc = named
                 ? bus_config_error(tn, bad, err, errlen, "%s",
                                    colon[1] ? colon + 1 + (colon[1] == ' ') : "invalid")
                 : bus_config_error(
                       tn,
                       ops->path_key && !bus_config_has(tn, ops->path_key) ? ops->path_key : "kind",
                       err, errlen, "%s", why);
    }
    /* a same-host segment's name travels in TierInfo.shm and tokens: it must fit */
    if (rc == 0 && ops->path_access == TIER_ACCESS_SHM && strlen(b->path) >= BUS_TIER_SHM_MAX)
        rc = bus_config_error(tn, ops->path_key ? ops->path_key : "kind", err, errlen,
                              bus_config_has(tn, ops->path_key ? ops->path_key : "")
                                  ? "\"%s\" is longer than %u bytes"
                                  : "the default name \"%s\" is longer than %u bytes: set \"shm\"",
                              b->path, BUS_TIER_SHM_MAX - 1);
    return rc;
}

/* A watermark: a JSON number in (0, 1] or a string "NN%" / "NN.N%" in (0%, 100%]. */
static int s_watermark(const bus_config_node_t *tn, const char *path, double dflt, double *out,
                       char *err, size_t errlen)
{
    *out = dflt;
    if (!bus_config_has(tn, path))
        return 0;
    char text[32], scratch[BUS_CONFIG_ERR_MAX];
    if (bus_config_get_string(tn, path, text, sizeof text, scratch, sizeof scratch) == 0) {
        char *end = NULL;
        double v = strtod(text, &end);
        if (end == text || !end || strcmp(end, "%") != 0 || !(v > 0.0 && v <= 100.0))
            return bus_config_error(tn, path, err, errlen,
                                    "\"%s\": expected a fraction in (0, 1] or a percent "
                                    "string in (0%%, 100%%] such as \"90%%\"",
                                    text);
        *out = v / 100.0;
        return 0;
    }
    int rc = bus_config_get_double(tn, path, 0.0, 1.0, out, err, errlen);
    if (rc == 0 && !(*out > 0.0))
        rc = bus_config_error(tn, path, err, errlen, "must be above 0, got %g", *out);
    return rc;
}

/* A tier entry, or (pool) a pool entry's member defaults: no endpoint, advertise
 * or host (each member has its own), a kind without an address. */
static int s_read_tier_entry(const bus_config_node_t *tn, const coord_config_t *c, uint32_t id,
                             bool pool, coord_tier_config_t *t, char *err, size_t errlen)
{
    const struct tier_ops *ops = NULL;
    t->id = id;
    int rc = s_get_name(tn, "name", t->name, sizeof t->name, err, errlen);
    if (rc == 0)
        rc = s_read_kind(tn, t, &ops, err, errlen);
    if (rc == 0 && pool && ops->path_key)
        rc = bus_config_error(tn, "kind", err, errlen,
                              "\"%s\" takes an address of its own per tier (\"%s\"), but a "
                              "pool's members share one entry: a pool's kind is one without "
                              "(\"remote\", or a plug-in kind without an address key)",
                              t->kind_name, ops->path_key);
    if (rc == 0)
        rc = s_check_tier_keys(tn, ops, pool, err, errlen);
    if (rc == 0 && !pool)
        rc = s_endpoint(tn, "endpoint", t->endpoint, sizeof t->endpoint, err, errlen);
    if (rc == 0 && !pool)
        rc = s_advertise(tn, t->endpoint, t->advertise, sizeof t->advertise, err, errlen);
    if (rc == 0 && !bus_config_has(tn, "advertise"))
        t->advertise[0] = '\0'; /* the bound endpoint, resolved at bind time */
    if (rc == 0 && !pool)
        rc = s_host(tn, t->host, sizeof t->host, err, errlen);
    if (rc == 0)
        rc = bus_config_get_u64(tn, "capacity", 1, COORD_MAX_CAPACITY, &t->capacity, err, errlen);
    if (rc == 0)
        rc = bus_config_opt_size(tn, "slot_size", 256u << 10, &t->slot_size, err, errlen);
    if (rc == 0 && (t->slot_size == 0 || t->slot_size > COORD_MAX_SLOT_SIZE))
        rc =
            bus_config_error(tn, "slot_size", err, errlen, "must be 1 byte .. 1GiB, got %llu bytes",
                             (unsigned long long)t->slot_size);
    if (rc == 0)
        rc = bus_config_opt_string(tn, "policy", "lru", t->policy, sizeof t->policy, err, errlen);
    if (rc == 0 && !tier_policy_find(t->policy))
        rc = s_policy_error(tn, t->policy, err, errlen);
    /* defaults 0.97 / 0.94 (a tier reclaimed ahead keeps 3-6% free: a chain's head,
     * whose free slots the chain does not use); a high alone gets a low 0.03 below
     * it (half of it, for a high under 0.06) */
    if (rc == 0)
        rc = s_watermark(tn, "high_watermark", 0.97, &t->high_watermark, err, errlen);
    if (rc == 0) {
        double hi = t->high_watermark, low = hi < 0.06 ? hi / 2 : hi - 0.03;
        rc = s_watermark(tn, "low_watermark", bus_config_has(tn, "high_watermark") ? low : 0.94,
                         &t->low_watermark, err, errlen);
    }
    if (rc == 0 && !(t->low_watermark < t->high_watermark))
        rc = bus_config_error(tn, "low_watermark", err, errlen,
                              "must be below high_watermark (%g), got %g", t->high_watermark,
                              t->low_watermark);
    char reclaim[16];
    if (rc == 0)
        rc = bus_config_opt_string(tn, "reclaim", "", reclaim, sizeof reclaim, err, errlen);
    if (rc == 0) {
        if (!reclaim[0] && !bus_config_has(tn, "reclaim"))
            t->reclaim = COORD_RECLAIM_AUTO;
        else if (strcmp(reclaim, "ahead") == 0)
            t->reclaim = COORD_RECLAIM_AHEAD;
        else if (strcmp(reclaim, "on_demand") == 0)
            t->reclaim = COORD_RECLAIM_ON_DEMAND;
        else
            rc = bus_config_error(tn, "reclaim", err, errlen,
                                  "unknown reclaim \"%s\": \"ahead\" (between the watermarks) "
                                  "or \"on_demand\" (evicted when a write needs the slot); "
                                  "absent: on_demand on a chain's last tier, ahead above it",
                                  reclaim);
    }
    if (rc == 0)
        rc = s_metrics_addr(tn, "metrics", "127.0.0.1:0", t->metrics, sizeof t->metrics, err,
                            errlen);
    if (rc == 0 && bus_config_has(tn, "max_connections"))
        rc = s_u32(tn, "max_connections", 1u << 20, &t->max_connections, err, errlen);
    if (rc == 0)
        rc = s_read_backend(tn, c, ops, t, err, errlen);
    return rc;
}

static int s_read_tier(const bus_config_node_t *tn, const coord_config_t *c, uint32_t index,
                       coord_tier_config_t *t, char *err, size_t errlen)
{
    return s_read_tier_entry(tn, c, index + 1, false, t, err, errlen);
}

static int s_check_tier_unique(const bus_config_node_t *arr, const coord_config_t *c, uint32_t i,
                               char *err, size_t errlen)
{
    const coord_tier_config_t *t = &c->tiers[i];
    char path[48];
    for (uint32_t j = 0; j < i; j++) {
        const coord_tier_config_t *o = &c->tiers[j];
        if (strcmp(o->name, t->name) == 0) {
            snprintf(path, sizeof path, "[%u].name", i);
            return bus_config_error(arr, path, err, errlen,
                                    "duplicate tier name \"%s\" (also tiers[%u])", t->name, j);
        }
        if (s_same_endpoint(o->endpoint, t->endpoint)) {
            snprintf(path, sizeof path, "[%u].endpoint", i);
            return bus_config_error(arr, path, err, errlen, "endpoint %s is also tiers[%u]'s (%s)",
                                    t->endpoint, j, o->name);
        }
        /* two tiers of one kind on one address would share the medium */
        const struct tier_ops *ops = tier_find(t->kind_name);
        if (ops && ops->path_key && t->backend.path[0] && strcmp(o->kind_name, t->kind_name) == 0 &&
            strcmp(o->backend.path, t->backend.path) == 0) {
            snprintf(path, sizeof path, "[%u].%s", i, ops->path_key);
            return bus_config_error(arr, path, err, errlen, "%s %s is also tiers[%u]'s (%s)",
                                    ops->path_key, t->backend.path, j, o->name);
        }
    }
    for (uint32_t j = 0; j < c->n_coordinators; j++) {
        const coord_coordinator_config_t *e = &c->coordinators[j];
        if (s_same_host(e->host, t->host) && s_same_endpoint(e->endpoint, t->endpoint)) {
            snprintf(path, sizeof path, "[%u].endpoint", i);
            return c->coordinators_listed
                       ? bus_config_error(arr, path, err, errlen,
                                          "endpoint %s is also coordinators[%u]'s (%s)",
                                          t->endpoint, j, e->name)
                       : bus_config_error(arr, path, err, errlen,
                                          "endpoint %s is also the coordinator's "
                                          "(coordinator.endpoint)",
                                          t->endpoint);
        }
    }
    return 0;
}

static int s_read_tiers(const bus_config_node_t *root, coord_config_t *c, char *err, size_t errlen)
{
    bus_config_node_t arr, tn;
    size_t n = 0;
    int rc = bus_config_get_array(root, "tiers", COORD_MAX_TIERS, &arr, &n, err, errlen);
    if (rc == 0 && n == 0)
        rc = bus_config_error(root, "tiers", err, errlen, "at least one tier is needed");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = bus_config_array_elem(&arr, i, &tn, err, errlen);
        if (rc == 0)
            rc = s_read_tier(&tn, c, (uint32_t)i, &c->tiers[i], err, errlen);
        if (rc == 0)
            c->n_tiers = (uint32_t)i + 1;
        if (rc == 0)
            rc = s_check_tier_unique(&arr, c, (uint32_t)i, err, errlen);
    }
    return rc;
}

/* Is NAME taken by a tier, a pool, or a member listed before (the members of
 * pools[0..np), then members[0..nm) of pools[np])? */
static bool s_name_taken(const coord_config_t *c, uint32_t np, uint32_t nm, const char *name)
{
    if (coord_config_tier(c, name))
        return true;
    for (uint32_t i = 0; i <= np && i < COORD_MAX_POOLS; i++) {
        const coord_pool_config_t *p = &c->pools[i];
        if (!strcmp(p->name, name))
            return true;
        for (uint32_t k = 0; k < (i < np ? p->n_members : nm); k++)
            if (!strcmp(p->members[k].name, name))
                return true;
    }
    return false;
}

/* pools[i].members: the members a supervisor starts. */
static int s_read_pool_members(const bus_config_node_t *pn, coord_config_t *c, uint32_t pi,
                               char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "endpoint", "advertise", "host", "capacity", NULL};
    coord_pool_config_t *p = &c->pools[pi];
    bus_config_node_t arr, mn;
    size_t n = 0;
    if (!bus_config_has(pn, "members"))
        return 0;
    int rc = bus_config_get_array(pn, "members", COORD_MAX_TIERS, &arr, &n, err, errlen);
    if (rc == 0 && n > p->max_members)
        rc = bus_config_error(pn, "members", err, errlen,
                              "%zu members listed, but max_members is %u", n, p->max_members);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        coord_pool_member_t *m = &p->members[i];
        rc = bus_config_array_elem(&arr, i, &mn, err, errlen);
        if (rc == 0)
            rc = bus_config_check_keys(&mn, "", keys, err, errlen);
        if (rc == 0)
            rc = s_get_name(&mn, "name", m->name, sizeof m->name, err, errlen);
        if (rc == 0 && s_name_taken(c, pi, (uint32_t)i, m->name))
            rc = bus_config_error(&mn, "name", err, errlen,
                                  "\"%s\" is already a tier's, a pool's or a member's name",
                                  m->name);
        if (rc == 0)
            rc = s_endpoint(&mn, "endpoint", m->endpoint, sizeof m->endpoint, err, errlen);
        if (rc == 0)
            rc = s_advertise(&mn, m->endpoint, m->advertise, sizeof m->advertise, err, errlen);
        if (rc == 0 && !bus_config_has(&mn, "advertise"))
            m->advertise[0] = '\0';
        if (rc == 0)
            rc = s_host(&mn, m->host, sizeof m->host, err, errlen);
        if (rc == 0 && bus_config_has(&mn, "capacity"))
            rc = bus_config_get_u64(&mn, "capacity", 1, COORD_MAX_CAPACITY, &m->capacity, err,
                                    errlen);
        if (rc == 0)
            p->n_members = (uint32_t)i + 1;
    }
    return rc;
}

/* "pools" (coord_pool_config_t): after "tiers", whose ids come first. */
static int s_read_pools(const bus_config_node_t *root, coord_config_t *c, char *err, size_t errlen)
{
    bus_config_node_t arr, pn;
    size_t n = 0;
    if (!bus_config_has(root, "pools"))
        return 0;
    int rc = bus_config_get_array(root, "pools", COORD_MAX_POOLS, &arr, &n, err, errlen);
    uint32_t next_id = c->n_tiers + 1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        coord_pool_config_t *p = &c->pools[i];
        char path[48];
        rc = bus_config_array_elem(&arr, i, &pn, err, errlen);
        if (rc == 0)
            rc = s_read_tier_entry(&pn, c, next_id, true, &p->member, err, errlen);
        if (rc < 0)
            break;
        /* both inside *c: a copy, not snprintf (gcc's -Werror=restrict in sanitizer builds) */
        size_t nl = strnlen(p->member.name, sizeof p->name - 1);
        memcpy(p->name, p->member.name, nl);
        p->name[nl] = '\0';
        uint32_t room = COORD_MAX_TIERS >= next_id ? COORD_MAX_TIERS - next_id + 1 : 0;
        uint64_t m = 0;
        rc = bus_config_get_u64(&pn, "max_members", 1, UINT32_MAX, &m, err, errlen);
        if (rc == 0 && m > room)
            rc = bus_config_error(&pn, "max_members", err, errlen,
                                  "%llu members do not fit: tier ids are 1..%d, %u taken by "
                                  "\"tiers\" and the pools before this one, so this pool has "
                                  "at most %u",
                                  (unsigned long long)m, COORD_MAX_TIERS, next_id - 1, room);
        if (rc < 0)
            break;
        p->first_id = next_id;
        p->max_members = (uint32_t)m;
        next_id += p->max_members;
        c->n_pools = (uint32_t)i + 1;
        for (uint32_t j = 0; j < c->n_tiers && rc == 0; j++)
            if (strcmp(c->tiers[j].name, p->name) == 0) {
                snprintf(path, sizeof path, "[%zu].name", i);
                rc = bus_config_error(&arr, path, err, errlen,
                                      "\"%s\" is also tiers[%u]'s name: a chain names a pool "
                                      "or a tier by its name, so they are unique together",
                                      p->name, j);
            }
        for (size_t j = 0; j < i && rc == 0; j++)
            if (strcmp(c->pools[j].name, p->name) == 0) {
                snprintf(path, sizeof path, "[%zu].name", i);
                rc = bus_config_error(&arr, path, err, errlen,
                                      "duplicate pool name \"%s\" (also pools[%zu])", p->name, j);
            }
        for (size_t j = 0; j < i && rc == 0; j++)
            for (uint32_t k = 0; k < c->pools[j].n_members && rc == 0; k++)
                if (strcmp(c->pools[j].members[k].name, p->name) == 0) {
                    snprintf(path, sizeof path, "[%zu].name", i);
                    rc = bus_config_error(&arr, path, err, errlen,
                                          "\"%s\" is also a member of pool %s", p->name,
                                          c->pools[j].name);
                }
        if (rc == 0)
            rc = s_read_pool_members(&pn, c, (uint32_t)i, err, errlen);
    }
    return rc;
}

int coord_config_get_name(const bus_config_node_t *node, const char *path, char *out, size_t outsz,
                          char *err, size_t errlen)
{
    return s_get_name(node, path, out, outsz, err, errlen);
}

int coord_config_get_placement(const bus_config_node_t *node, const char *path, uint32_t *out,
                               char *err, size_t errlen)
{
    char placement[16];
    int rc = bus_config_opt_string(node, path, COORD_PLACEMENT_DEFAULT_NAME, placement,
                                   sizeof placement, err, errlen);
    if (rc < 0)
        return rc;
    if (strcmp(placement, "exclusive") == 0)
        *out = COORD_PLACEMENT_EXCLUSIVE;
    else if (strcmp(placement, "inclusive") == 0)
        *out = COORD_PLACEMENT_INCLUSIVE;
    else
        return bus_config_error(node, path, err, errlen,
                                "unknown placement \"%s\": \"exclusive\" (a promoted block "
                                "moves to the head) or \"inclusive\" (its lower copy stays)",
                                placement);
    return 0;
}

int coord_config_chain_tier(const bus_config_node_t *node, const char *path, coord_config_t *c,
                            coord_chain_config_t *ch, char *err, size_t errlen)
{
    char name[COORD_TIER_NAME_MAX];
    int rc = bus_config_get_string(node, path, name, sizeof name, err, errlen);
    if (rc < 0)
        return rc;
    const coord_tier_config_t *t = coord_config_tier(c, name);
    const coord_pool_config_t *pool = t ? NULL : coord_config_pool(c, name);
    if (pool)
        t = &pool->member; /* the level: its first id stands for every member */
    if (!t)
        return bus_config_error(node, path, err, errlen,
                                c->n_pools ? "no tier or pool named \"%s\" in \"tiers\" or "
                                             "\"pools\""
                                           : "no tier named \"%s\" in \"tiers\"",
                                name);
    for (uint32_t j = 0; j < ch->n_tiers; j++)
        if (ch->tier_ids[j] == t->id)
            return bus_config_error(node, path, err, errlen,
                                    "tier \"%s\" appears twice in the chain", name);
    if (ch->n_tiers == COORD_CHAIN_MAX_TIERS)
        return bus_config_error(node, path, err, errlen, "more than %d tiers in a chain",
                                COORD_CHAIN_MAX_TIERS);
    ch->tier_ids[ch->n_tiers++] = t->id;
    return 0;
}

int coord_config_chain_tiers(const bus_config_node_t *cn, const char *key, coord_config_t *c,
                             coord_chain_config_t *ch, char *err, size_t errlen)
{
    bus_config_node_t arr;
    size_t n = 0;
    int rc = bus_config_get_array(cn, key, COORD_CHAIN_MAX_TIERS, &arr, &n, err, errlen);
    if (rc == 0 && n == 0)
        rc = bus_config_error(cn, key, err, errlen, "a chain names at least one tier");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char idx[24];
        snprintf(idx, sizeof idx, "[%zu]", i);
        rc = coord_config_chain_tier(&arr, idx, c, ch, err, errlen);
    }
    return rc;
}

static int s_read_chain(const bus_config_node_t *cn, coord_config_t *c, coord_chain_config_t *ch,
                        char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "tiers", "placement", NULL};
    int rc = bus_config_check_keys(cn, "", keys, err, errlen);
    if (rc == 0)
        rc = s_get_name(cn, "name", ch->name, sizeof ch->name, err, errlen);
    if (rc == 0)
        rc = coord_config_get_placement(cn, "placement", &ch->placement, err, errlen);
    if (rc == 0)
        rc = coord_config_chain_tiers(cn, "tiers", c, ch, err, errlen);
    return rc;
}

/* Absent "chains": one chain "default" over every tier in file order. */
static int s_default_chain(coord_config_t *c, const bus_config_node_t *root, char *err,
                           size_t errlen)
{
    if (c->n_tiers + c->n_pools > COORD_CHAIN_MAX_TIERS)
        return bus_config_error(root, "chains", err, errlen,
                                "more than %d tiers and pools: name the chains explicitly",
                                COORD_CHAIN_MAX_TIERS);
    coord_chain_config_t *ch = &c->chains[0];
    snprintf(ch->name, sizeof ch->name, "default");
    ch->placement = COORD_PLACEMENT_DEFAULT;
    for (uint32_t i = 0; i < c->n_tiers; i++)
        ch->tier_ids[i] = c->tiers[i].id;
    for (uint32_t i = 0; i < c->n_pools; i++) /* the pools below the tiers, in file order */
        ch->tier_ids[c->n_tiers + i] = c->pools[i].first_id;
    ch->n_tiers = c->n_tiers + c->n_pools;
    c->n_chains = 1;
    return 0;
}

static int s_read_chains(const bus_config_node_t *root, coord_config_t *c, char *err, size_t errlen)
{
    bus_config_node_t arr, cn;
    size_t n = 0;
    if (bus_config_has(root, "topology") && bus_config_has(root, "chains"))
        return bus_config_error(root, "topology", err, errlen,
                                "the tiers' arrangement is given once: \"topology\" or the flat "
                                "\"chains\", not both");
    if (bus_config_has(root, "topology"))
        return coord_topology_read(root, c, err, errlen);
    if (!bus_config_has(root, "chains"))
        return s_default_chain(c, root, err, errlen);
    int rc = bus_config_get_array(root, "chains", COORD_MAX_CHAINS, &arr, &n, err, errlen);
    if (rc == 0 && n == 0)
        rc = bus_config_error(root, "chains", err, errlen, "at least one chain is needed");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = bus_config_array_elem(&arr, i, &cn, err, errlen);
        if (rc == 0)
            rc = s_read_chain(&cn, c, &c->chains[i], err, errlen);
        for (size_t j = 0; rc == 0 && j < i; j++)
            if (strcmp(c->chains[j].name, c->chains[i].name) == 0) {
                char path[32];
                snprintf(path, sizeof path, "[%zu].name", i);
                rc = bus_config_error(&arr, path, err, errlen,
                                      "duplicate chain name \"%s\" (also chains[%zu])",
                                      c->chains[i].name, j);
            }
        if (rc == 0)
            c->n_chains = (uint32_t)i + 1;
    }
    return rc;
}

static int s_read_gc(const bus_config_node_t *root, coord_config_t *c, char *err, size_t errlen)
{
    static const char *const keys[] = {"interval", "page", "probe_timeout", NULL};
    bus_config_node_t gc;
    int rc = bus_config_get_object(root, "gc", 8, &gc, err, errlen);
    if (rc == 0)
        rc = bus_config_check_keys(&gc, "", keys, err, errlen);
    if (rc == 0)
        rc = s_duration(&gc, "interval", 1, &c->gc_interval_ms, err, errlen);
    if (rc == 0 && c->gc_interval_ms > UINT32_MAX)
        rc = bus_config_error(&gc, "interval", err, errlen, "too long");
    if (rc == 0)
        rc = s_u32(&gc, "page", 64, &c->gc_page, err, errlen);
    if (rc == 0)
        rc = s_duration(&gc, "probe_timeout", 1, &c->gc_probe_timeout_ms, err, errlen);
    if (rc == 0 && c->gc_probe_timeout_ms > UINT32_MAX)
        rc = bus_config_error(&gc, "probe_timeout", err, errlen, "too long");
    return rc;
}

static int s_read_reclaimer(const bus_config_node_t *root, coord_config_t *c, char *err,
                            size_t errlen)
{
    static const char *const keys[] = {"interval", "delete_delay", "max_pending", "quota_low",
                                       NULL};
    bus_config_node_t rn;
    int rc = bus_config_get_object(root, "reclaimer", 8, &rn, err, errlen);
    if (rc == 0)
        rc = bus_config_check_keys(&rn, "", keys, err, errlen);
    if (rc == 0)
        rc = s_duration(&rn, "interval", 1, &c->reclaim_interval_ms, err, errlen);
    if (rc == 0 && c->reclaim_interval_ms > UINT32_MAX)
        rc = bus_config_error(&rn, "interval", err, errlen, "too long");
    if (rc == 0)
        rc = s_duration(&rn, "delete_delay", 1, &c->reclaim_delete_delay_ms, err, errlen);
    if (rc == 0)
        rc = s_u32(&rn, "max_pending", 1u << 24, &c->reclaim_max_pending, err, errlen);
    if (rc == 0)
        rc = s_watermark(&rn, "quota_low", 0.9, &c->reclaim_quota_low, err, errlen);
    return rc;
}

/* One "quotas" entry: { "instance": id | "*", "max_blocks": N, "max_bytes": size }. */
/* An endpoint to bind, or "" (off). */
static int s_opt_endpoint(const bus_config_node_t *node, const char *path, char *out, size_t outsz,
                          char *err, size_t errlen)
{
    int rc = bus_config_get_string(node, path, out, outsz, err, errlen);
    if (rc == 0 && out[0])
        rc = s_endpoint(node, path, out, outsz, err, errlen);
    return rc;
}

/* events.vllm_*: the msgpack stream in vLLM's layout (actors/events_vllm.h). */
static int s_read_events_vllm(const bus_config_node_t *en, coord_config_t *c, char *err,
                              size_t errlen)
{
    int rc =
        s_opt_endpoint(en, "vllm_endpoint", c->events_vllm, sizeof c->events_vllm, err, errlen);
    if (rc == 0)
        rc = s_opt_endpoint(en, "vllm_replay_endpoint", c->events_vllm_replay,
                            sizeof c->events_vllm_replay, err, errlen);
    if (rc == 0 && c->events_vllm_replay[0] && !c->events_vllm[0])
        rc = bus_config_error(en, "vllm_replay_endpoint", err, errlen,
                              "needs events.vllm_endpoint (the replay socket resends its batches)");
    if (rc == 0 && !c->events_endpoint[0]) /* events off: the vLLM stream derives from them */
        c->events_vllm[0] = c->events_vllm_replay[0] = '\0';
    char layout[16];
    if (rc == 0)
        rc = bus_config_get_string(en, "vllm_layout", layout, sizeof layout, err, errlen);
    events_vllm_layout_t l = EVENTS_VLLM_MAP;
    if (rc == 0 && events_vllm_layout_parse(layout, &l) < 0)
        rc = bus_config_error(en, "vllm_layout", err, errlen,
                              "must be \"map\" (vLLM's current layout) or \"array\" (older "
                              "array_like layout)");
    c->events_vllm_layout = (int)l;
    return rc;
}

static int s_read_events(const bus_config_node_t *root, coord_config_t *c, char *err, size_t errlen)
{
    static const char *const keys[] = {
        "endpoint",    "replay_endpoint",  "ring_batches",  "ring_bytes",
        "queue",       "snapshot_blocks",  "vllm_endpoint", "vllm_replay_endpoint",
        "vllm_layout", "subscriber_queue", "put_tokens",    NULL};
    bus_config_node_t en;
    int rc = bus_config_get_object(root, "events", 16, &en, err, errlen);
    if (rc == 0)
        rc = bus_config_check_keys(&en, "", keys, err, errlen);
    if (rc == 0)
        rc = s_opt_endpoint(&en, "endpoint", c->events_endpoint, sizeof c->events_endpoint, err,
                            errlen);
    if (rc == 0)
        rc = s_opt_endpoint(&en, "replay_endpoint", c->events_replay, sizeof c->events_replay, err,
                            errlen);
    if (rc == 0 && !c->events_endpoint[0] && c->events_replay[0])
        rc = bus_config_error(&en, "replay_endpoint", err, errlen,
                              "needs events.endpoint (the replay socket resends its batches)");
    if (rc == 0)
        rc = s_u32(&en, "ring_batches", 1u << 20, &c->events_ring_batches, err, errlen);
    if (rc == 0 && c->events_ring_batches == 0)
        rc = bus_config_error(&en, "ring_batches", err, errlen, "must be at least 1");
    if (rc == 0)
        rc = bus_config_get_size(&en, "ring_bytes", &c->events_ring_bytes, err, errlen);
    if (rc == 0 && (c->events_ring_bytes < (1u << 20) || c->events_ring_bytes > (16ull << 30)))
        rc = bus_config_error(&en, "ring_bytes", err, errlen, "must be 1MiB..16GiB");
    if (rc == 0)
        rc = s_u32(&en, "queue", 65536, &c->events_queue, err, errlen);
    if (rc == 0 && c->events_queue == 0)
        rc = bus_config_error(&en, "queue", err, errlen, "must be at least 1");
    if (rc == 0)
        rc = s_u32(&en, "snapshot_blocks", PUBLISHER_MIRROR_MAX_BLOCKS, &c->events_snapshot_blocks,
                   err, errlen);
    if (rc == 0)
        rc = s_u32(&en, "subscriber_queue", 1000000, &c->events_subscriber_queue, err, errlen);
    if (rc == 0)
        rc = s_u32(&en, "put_tokens", 64u << 20, &c->events_put_tokens, err, errlen);
    if (rc == 0)
        rc = s_read_events_vllm(&en, c, err, errlen);
    return rc;
}

static int s_read_metrics(const bus_config_node_t *root, coord_config_t *c, char *err,
                          size_t errlen)
{
    static const char *const keys[] = {"refresh", "sample_interval", "samples", "max_connections",
                                       "timeout", "max_instances",   NULL};
    bus_config_node_t mn;
    uint64_t v = 0;
    int rc = bus_config_get_object(root, "metrics", 8, &mn, err, errlen);
    if (rc == 0)
        rc = bus_config_check_keys(&mn, "", keys, err, errlen);
    if (rc == 0)
        rc = s_duration(&mn, "refresh", 100, &v, err, errlen);
    if (rc == 0 && v > 60000)
        rc = bus_config_error(&mn, "refresh", err, errlen, "at most 60s");
    c->metrics_refresh_ms = (uint32_t)v;
    if (rc == 0)
        rc = s_duration(&mn, "sample_interval", 100, &v, err, errlen);
    if (rc == 0 && v > 3600000)
        rc = bus_config_error(&mn, "sample_interval", err, errlen, "at most 1h");
    c->metrics_sample_ms = (uint32_t)v;
    if (rc == 0)
        rc = s_u32(&mn, "samples", 4096, &c->metrics_samples, err, errlen);
    if (rc == 0)
        rc = s_u32(&mn, "max_connections", 1024, &c->metrics_max_connections, err, errlen);
    if (rc == 0)
        rc = s_duration(&mn, "timeout", 1000, &v, err, errlen);
    if (rc == 0 && v > 600000)
        rc = bus_config_error(&mn, "timeout", err, errlen, "at most 600s");
    c->metrics_timeout_s = (uint32_t)(v / 1000);
    if (rc == 0)
        rc = s_u32(&mn, "max_instances", BUS_STATS_INSTANCES_MAX, &c->metrics_max_instances, err,
                   errlen);
    return rc;
}

static int s_read_quota(const bus_config_node_t *qn, coord_quota_config_t *q, char *err,
                        size_t errlen)
{
    static const char *const keys[] = {"instance", "max_blocks", "max_bytes", NULL};
    int rc = bus_config_check_keys(qn, "", keys, err, errlen);
    if (rc == 0)
        rc = bus_config_get_string(qn, "instance", q->instance, sizeof q->instance, err, errlen);
    if (rc == 0 && !q->instance[0])
        rc = bus_config_error(qn, "instance", err, errlen,
                              "empty: an instance id, or \"*\" for instances without their "
                              "own quota");
    if (rc == 0)
        rc = bus_config_opt_u64(qn, "max_blocks", 0, INT64_MAX, 0, &q->max_blocks, err, errlen);
    if (rc == 0)
        rc = bus_config_opt_size(qn, "max_bytes", 0, &q->max_bytes, err, errlen);
    if (rc == 0 && !q->max_blocks && !q->max_bytes)
        rc = bus_config_error(qn, "", err, errlen,
                              "a quota needs \"max_blocks\" or \"max_bytes\" above 0");
    return rc;
}

static int s_read_quotas(const bus_config_node_t *root, coord_config_t *c, char *err, size_t errlen)
{
    bus_config_node_t arr, qn;
    size_t n = 0;
    if (!bus_config_has(root, "quotas"))
        return 0;
    int rc = bus_config_get_array(root, "quotas", COORD_MAX_QUOTAS, &arr, &n, err, errlen);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = bus_config_array_elem(&arr, i, &qn, err, errlen);
        if (rc == 0)
            rc = s_read_quota(&qn, &c->quotas[i], err, errlen);
        for (size_t j = 0; rc == 0 && j < i; j++)
            if (strcmp(c->quotas[j].instance, c->quotas[i].instance) == 0) {
                char path[32];
                snprintf(path, sizeof path, "[%zu].instance", i);
                rc = bus_config_error(&arr, path, err, errlen,
                                      "a second quota for \"%s\" (also quotas[%zu])",
                                      c->quotas[i].instance, j);
            }
        if (rc == 0)
            c->n_quotas = (uint32_t)i + 1;
    }
    return rc;
}

/* optimizer.*: the live optimizer deploy/supervise runs (docs/OPTIMIZER.md). */
static int s_read_optimizer(const bus_config_node_t *root, coord_config_t *c, char *err,
                            size_t errlen)
{
    static const char *const keys[] = {"enabled", "every", "window", "capacity", "host", NULL};
    bus_config_node_t on;
    int rc = bus_config_get_object(root, "optimizer", 8, &on, err, errlen);
    if (rc == 0)
        rc = bus_config_check_keys(&on, "", keys, err, errlen);
    if (rc == 0)
        rc = bus_config_get_bool(&on, "enabled", &c->optimizer_enabled, err, errlen);
    if (rc == 0)
        rc = bus_config_get_duration_ms(&on, "every", &c->optimizer_every_ms, err, errlen);
    if (rc == 0 && (c->optimizer_every_ms < 1000 || c->optimizer_every_ms > 3600000 ||
                    c->optimizer_every_ms % 1000))
        rc = bus_config_error(&on, "every", err, errlen, "must be whole seconds, 1s..1h");
    if (rc == 0)
        rc = bus_config_get_u64(&on, "window", 1, 1u << 26, &c->optimizer_window, err, errlen);
    if (rc == 0)
        rc =
            bus_config_get_u64(&on, "capacity", 0, UINT32_MAX, &c->optimizer_capacity, err, errlen);
    if (rc == 0)
        rc = s_host(&on, c->optimizer_host, sizeof c->optimizer_host, err, errlen);
    return rc;
}

/* "security" (docs/SECURITY.md): the tier-plane token keys. */
static int s_read_security_tokens(const bus_config_node_t *sn, coord_config_t *c, char *err,
                                  size_t errlen)
{
    int rc = 0;
    if (bus_config_has(sn, "secret_file"))
        rc = bus_config_get_string(sn, "secret_file", c->secret_file, sizeof c->secret_file, err,
                                   errlen);
    if (rc == 0 && bus_config_has(sn, "clock_skew"))
        rc = s_duration(sn, "clock_skew", 0, &c->clock_skew_ms, err, errlen);
    if (rc == 0 && c->clock_skew_ms > 600000)
        rc = bus_config_error(sn, "clock_skew", err, errlen,
                              "at most 10min (synchronise the clocks instead)");
    return rc;
}

/* security.*: each key read by its own function (security.curve: coord_curve.c). */
static int s_read_security(const bus_config_node_t *root, coord_config_t *c, char *err,
                           size_t errlen)
{
    static const char *const keys[] = {"curve", "secret_file", "clock_skew", NULL};
    bus_config_node_t sn;
    if (!bus_config_has(root, "security"))
        return 0;
    int rc = bus_config_get_object(root, "security", 16, &sn, err, errlen);
    if (rc == 0)
        rc = bus_config_check_keys(&sn, "", keys, err, errlen);
    if (rc == 0)
        rc = coord_curve_read(&sn, &c->curve, err, errlen);
    if (rc == 0)
        rc = s_read_security_tokens(&sn, c, err, errlen);
    return rc;
}

/* A tier actor accepts a token up to security.clock_skew past its expiry, and the
 * scheduler mints it that much before the lease's end only when the lease is longer
 * than twice the skew: a shorter lease would let a writer late past its window write
 * into a slot given to another block (issue 12 §4). */
static int s_check_leases(const bus_config_node_t *root, const coord_config_t *c, char *err,
                          size_t errlen)
{
    uint64_t skew = c->clock_skew_ms ? c->clock_skew_ms : 5000;
    static const char *const names[] = {"coordinator.write_grace", "coordinator.pin_lease"};
    const uint64_t leases[] = {c->write_grace_ms, c->pin_lease_ms};
    for (int i = 0; i < 2; i++)
        if (leases[i] <= 2 * skew)
            return bus_config_error(root, names[i], err, errlen,
                                    "%llu ms must be more than twice security.clock_skew (%llu "
                                    "ms): lengthen it, or shorten clock_skew if the hosts' "
                                    "clocks agree that closely",
                                    (unsigned long long)leases[i], (unsigned long long)skew);
    return 0;
}

/* The leader binds the event sockets beside its meta endpoint, whichever coordinator
 * it is: no coordinator may bind one of them. */
static int s_check_events_vs_coordinators(const bus_config_node_t *root, const coord_config_t *c,
                                          char *err, size_t errlen)
{
    const struct {
        const char *key, *ep;
    } ev[] = {{"events.endpoint", c->events_endpoint},
              {"events.replay_endpoint", c->events_replay},
              {"events.vllm_endpoint", c->events_vllm},
              {"events.vllm_replay_endpoint", c->events_vllm_replay}};
    for (uint32_t i = 0; i < c->n_coordinators; i++)
        for (size_t k = 0; k < sizeof ev / sizeof ev[0]; k++) {
            const coord_coordinator_config_t *e = &c->coordinators[i];
            if (!ev[k].ep[0] || !s_same_endpoint(e->endpoint, ev[k].ep))
                continue;
            char path[48];
            if (c->coordinators_listed)
                snprintf(path, sizeof path, "coordinators[%u].endpoint", i);
            else
                snprintf(path, sizeof path, "coordinator.endpoint");
            return bus_config_error(root, path, err, errlen,
                                    "%s is also %s, which the leader binds: give the "
                                    "coordinator another port",
                                    e->endpoint, ev[k].key);
        }
    return 0;
}

/* first_host, and the etcd and optimizer hosts that default to it. */
static void s_resolve_hosts(coord_config_t *c)
{
    const char *first = "";
    for (uint32_t i = 0; !first[0] && i < c->n_coordinators; i++)
        first = c->coordinators[i].host;
    for (uint32_t i = 0; !first[0] && i < c->n_tiers; i++)
        first = c->tiers[i].host;
    for (uint32_t i = 0; !first[0] && i < c->n_pools; i++)
        for (uint32_t k = 0; !first[0] && k < c->pools[i].n_members; k++)
            first = c->pools[i].members[k].host;
    snprintf(c->first_host, sizeof c->first_host, "%s", first);
    if (!c->etcd_host[0])
        snprintf(c->etcd_host, sizeof c->etcd_host, "%s", c->first_host);
    if (!c->optimizer_host[0])
        snprintf(c->optimizer_host, sizeof c->optimizer_host, "%s", c->first_host);
}

static int s_read(const bus_config_t *doc, coord_config_t *c, char *err, size_t errlen)
{
    static const char *const keys[] = {
        "cluster",  "etcd",      "coordinator", "tiers",  "chains",  "coordinators",
        "gc",       "reclaimer", "quotas",      "events", "metrics", "optimizer",
        "security", "faults",    "topology",    "pools",  NULL};
    const bus_config_node_t *root = bus_config_root(doc);
    int rc = bus_config_check_keys(root, "", keys, err, errlen);
    if (rc == 0)
        rc = s_get_name(root, "cluster", c->cluster, sizeof c->cluster, err, errlen);
    if (rc == 0)
        rc = s_read_etcd(root, c, err, errlen);
    if (rc == 0)
        rc = s_read_coordinator(root, c, err, errlen);
    if (rc == 0)
        rc = s_read_coordinators(root, c, err, errlen);
    if (rc == 0)
        rc = s_read_tiers(root, c, err, errlen);
    if (rc == 0)
        rc = s_read_pools(root, c, err, errlen);
    if (rc == 0)
        rc = s_read_chains(root, c, err, errlen);
    if (rc == 0)
        rc = coord_topology_check_next(root, c, err, errlen);
    if (rc == 0)
        rc = s_read_gc(root, c, err, errlen);
    if (rc == 0)
        rc = s_read_reclaimer(root, c, err, errlen);
    if (rc == 0)
        rc = s_read_quotas(root, c, err, errlen);
    if (rc == 0)
        rc = s_read_events(root, c, err, errlen);
    if (rc == 0)
        rc = s_read_metrics(root, c, err, errlen);
    if (rc == 0)
        rc = s_read_optimizer(root, c, err, errlen);
    if (rc == 0)
        rc = s_read_security(root, c, err, errlen);
    if (rc == 0)
        rc = s_check_leases(root, c, err, errlen);
    if (rc == 0) /* faults.*: issue 12 §6, bus_fault_admin.h */
        rc = bus_fault_config_read(root, &c->faults, err, errlen);
    if (rc == 0)
        rc = s_check_events_vs_coordinators(root, c, err, errlen);
    if (rc == 0)
        s_resolve_hosts(c);
    return rc;
}

/* Prefixes ERR with the source name (bus_config's getters give only the path). */
static void s_prefix_source(const bus_config_t *doc, char *err, size_t errlen)
{
    if (!err || !errlen)
        return;
    char tmp[BUS_CONFIG_ERR_MAX];
    snprintf(tmp, sizeof tmp, "%s", err);
    snprintf(err, errlen, "%s: %s", bus_config_source(doc), tmp);
}

/* Sections a deployment document must have itself: the embedded defaults fill
 * every other one, but a default cluster name makes two deployments on one host
 * or one etcd serve each other, and default tiers hide a typo (the error would
 * point at the first chain naming a tier). */
static int s_check_required(const bus_config_t *doc, char *err, size_t errlen)
{
    static const struct {
        const char *key, *why;
    } req[] = {
        {"cluster", "name the deployment (\"cluster\": \"NAME\"): deployments that share a "
                    "name on one etcd or one host serve each other"},
        {"tiers", "list the deployment's tiers (\"tiers\": [{\"name\": ..., \"kind\": "
                  "\"host\" | \"nvme\", ...}], as in deploy/default.json)"},
    };
    const bus_config_node_t *root = bus_config_root(doc);
    static const char *const per_entry[] = {"endpoint", "advertise", "host"};
    for (size_t i = 0; bus_config_has(root, "coordinators") && i < 3; i++) {
        char path[48];
        snprintf(path, sizeof path, "coordinator.%s", per_entry[i]);
        if (bus_config_has(root, path)) {
            snprintf(err, errlen,
                     "%s: set per coordinator in \"coordinators\" (\"coordinator\" then holds "
                     "only the settings they share)",
                     path);
            return -EINVAL;
        }
    }
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++)
        if (!bus_config_has(root, req[i].key)) {
            snprintf(err, errlen, "%s: the required section is missing: %s", req[i].key,
                     req[i].why);
            return -EINVAL;
        }
    return 0;
}

static int s_load(bus_config_t *doc, coord_config_t *out, char *err, size_t errlen)
{
    int rc = s_check_required(doc, err, errlen);
    if (rc < 0) {
        s_prefix_source(doc, err, errlen);
        memset(out, 0, sizeof *out);
        return -EINVAL;
    }
    char dname[] = "<defaults>";
    bus_config_t *defaults = bus_config_load_string(dname, s_defaults, err, errlen);
    if (!defaults)
        return -EINVAL;
    rc = bus_config_merge_defaults(doc, defaults, err, errlen);
    if (rc == 0)
        rc = s_read(doc, out, err, errlen);
    if (rc < 0) {
        s_prefix_source(doc, err, errlen);
        memset(out, 0, sizeof *out);
        rc = -EINVAL;
    }
    bus_config_destroy(&defaults);
    return rc;
}

int coord_config_load_file(const char *filename, coord_config_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    bus_config_t *doc = bus_config_load_file(filename, 0, err, errlen);
    if (!doc)
        return -EINVAL;
    int rc = s_load(doc, out, err, errlen);
    bus_config_destroy(&doc);
    return rc;
}

int coord_config_load_string(const char *name, const char *text, coord_config_t *out, char *err,
                             size_t errlen)
{
    memset(out, 0, sizeof *out);
    bus_config_t *doc = bus_config_load_string(name, text, err, errlen);
    if (!doc)
        return -EINVAL;
    int rc = s_load(doc, out, err, errlen);
    bus_config_destroy(&doc);
    return rc;
}

int coord_config_set_etcd(coord_config_t *cfg, const char *urls, char *err, size_t errlen)
{
    char list[COORD_ETCD_MAX_ENDPOINTS][COORD_ETCD_ENDPOINT_MAX];
    uint32_t n = 0;
    const char *p = urls ? urls : "";
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0) {
            char why[COORD_ETCD_ENDPOINT_MAX + 96];
            if (n == COORD_ETCD_MAX_ENDPOINTS) {
                snprintf(err, errlen, "--etcd: more than %d endpoints", COORD_ETCD_MAX_ENDPOINTS);
                return -EINVAL;
            }
            if (len >= COORD_ETCD_ENDPOINT_MAX) {
                snprintf(err, errlen, "--etcd: an endpoint is longer than %d bytes",
                         COORD_ETCD_ENDPOINT_MAX - 1);
                return -EINVAL;
            }
            memcpy(list[n], p, len);
            list[n][len] = '\0';
            if (s_check_etcd_url(list[n], why, sizeof why) < 0) {
                snprintf(err, errlen, "--etcd: %s", why);
                return -EINVAL;
            }
            n++;
        }
        p += len + (end ? 1 : 0);
    }
    if (n == 0) {
        snprintf(err, errlen, "--etcd: no endpoint given");
        return -EINVAL;
    }
    memcpy(cfg->etcd, list, sizeof list[0] * n);
    cfg->n_etcd = n;
    return 0;
}

const coord_tier_config_t *coord_config_tier(const coord_config_t *cfg, const char *name)
{
    for (uint32_t i = 0; name && i < cfg->n_tiers; i++)
        if (strcmp(cfg->tiers[i].name, name) == 0)
            return &cfg->tiers[i];
    return NULL;
}

const coord_coordinator_config_t *coord_config_coordinator(const coord_config_t *cfg,
                                                           const char *name)
{
    for (uint32_t i = 0; name && i < cfg->n_coordinators; i++)
        if (strcmp(cfg->coordinators[i].name, name) == 0)
            return &cfg->coordinators[i];
    return NULL;
}

const coord_tier_config_t *coord_config_tier_by_id(const coord_config_t *cfg, uint32_t id)
{
    if (id >= 1 && id <= cfg->n_tiers)
        return &cfg->tiers[id - 1];
    const coord_pool_config_t *p = coord_config_pool_of_id(cfg, id);
    return p ? &p->member : NULL;
}

const coord_pool_config_t *coord_config_pool(const coord_config_t *cfg, const char *name)
{
    for (uint32_t i = 0; name && i < cfg->n_pools; i++)
        if (strcmp(cfg->pools[i].name, name) == 0)
            return &cfg->pools[i];
    return NULL;
}

const coord_pool_config_t *coord_config_pool_of_id(const coord_config_t *cfg, uint32_t id)
{
    for (uint32_t i = 0; i < cfg->n_pools; i++) {
        const coord_pool_config_t *p = &cfg->pools[i];
        if (id >= p->first_id && id - p->first_id < p->max_members)
            return p;
    }
    return NULL;
}

const coord_pool_member_t *coord_config_pool_entry(const coord_config_t *cfg, const char *name,
                                                   const coord_pool_config_t **pool)
{
    for (uint32_t i = 0; name && i < cfg->n_pools; i++)
        for (uint32_t k = 0; k < cfg->pools[i].n_members; k++)
            if (strcmp(cfg->pools[i].members[k].name, name) == 0) {
                if (pool)
                    *pool = &cfg->pools[i];
                return &cfg->pools[i].members[k];
            }
    return NULL;
}

uint32_t coord_config_level_id(const coord_config_t *cfg, uint32_t id)
{
    const coord_pool_config_t *p = coord_config_pool_of_id(cfg, id);
    return p ? p->first_id : id;
}

int coord_config_pool_member(const coord_config_t *cfg, const coord_pool_config_t *pool,
                             const char *name, uint32_t id, const char *endpoint,
                             const char *advertise, const char *host, uint64_t capacity,
                             coord_tier_config_t *out, char *err, size_t errlen)
{
    *out = pool->member;
    bus_endpoint_t ep;
    char why[BUS_CONFIG_ERR_MAX] = "";
    if (!name || !s_name_ok(name) || strlen(name) >= sizeof out->name) {
        snprintf(err, errlen,
                 "--name \"%s\": a name is 1..%zu letters, digits, '_', '-' or '.', starting "
                 "with a letter or digit",
                 name ? name : "", sizeof out->name - 1);
        return -EINVAL;
    }
    if (coord_config_tier(cfg, name) || coord_config_pool(cfg, name)) {
        snprintf(err, errlen,
                 "--name %s: the deployment has a tier or pool of that name; a member's name is "
                 "its own",
                 name);
        return -EINVAL;
    }
    if (id < pool->first_id || id - pool->first_id >= pool->max_members) {
        snprintf(err, errlen, "tier id %u is not pool %s's (%u..%u)", id, pool->name,
                 pool->first_id, pool->first_id + pool->max_members - 1);
        return -EINVAL;
    }
    if (!endpoint || strlen(endpoint) > COORD_WIRE_ENDPOINT_MAX ||
        bus_endpoint_parse(endpoint, &ep, why, sizeof why) < 0) {
        snprintf(err, errlen, "--endpoint \"%s\": %s", endpoint ? endpoint : "",
                 why[0] ? why : "longer than the wire's 127 bytes");
        return -EINVAL;
    }
    if (advertise && advertise[0] &&
        (strlen(advertise) > COORD_WIRE_ENDPOINT_MAX ||
         bus_endpoint_parse(advertise, &ep, why, sizeof why) < 0 || ep.ephemeral_port)) {
        snprintf(err, errlen, "--advertise \"%s\": %s", advertise,
                 why[0] ? why : "a concrete endpoint others connect to (no '*' port)");
        return -EINVAL;
    }
    if (capacity > COORD_MAX_CAPACITY) {
        snprintf(err, errlen, "--capacity %llu: at most %llu slots", (unsigned long long)capacity,
                 (unsigned long long)COORD_MAX_CAPACITY);
        return -EINVAL;
    }
    out->id = id;
    snprintf(out->name, sizeof out->name, "%s", name);
    snprintf(out->endpoint, sizeof out->endpoint, "%s", endpoint);
    snprintf(out->advertise, sizeof out->advertise, "%s", advertise ? advertise : "");
    snprintf(out->host, sizeof out->host, "%s", host ? host : "");
    if (capacity)
        out->capacity = capacity;
    tier_config_t *b = &out->backend;
    snprintf(b->name, sizeof b->name, "%s", out->name);
    snprintf(b->scope, sizeof b->scope, "kvtier-%s-%s", cfg->cluster, out->name);
    b->capacity = out->capacity;
    if (tier_configure(b, why, sizeof why) < 0) {
        snprintf(err, errlen, "pool %s member %s: %s", pool->name, name, why);
        return -EINVAL;
    }
    return 0;
}

bool coord_tier_has_next(const coord_config_t *cfg, uint32_t id)
{
    id = coord_config_level_id(cfg, id);
    for (uint32_t c = 0; c < cfg->n_chains; c++)
        for (uint32_t j = 0; j + 1 < cfg->chains[c].n_tiers; j++)
            if (cfg->chains[c].tier_ids[j] == id)
                return true;
    return false;
}

bool coord_tier_reclaims_ahead(const coord_config_t *cfg, const coord_tier_config_t *t)
{
    if (t->reclaim != COORD_RECLAIM_AUTO)
        return t->reclaim == COORD_RECLAIM_AHEAD;
    return coord_tier_has_next(cfg, t->id);
}
