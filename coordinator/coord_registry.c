/* coord_registry.c — the instance registry in etcd (see coord_registry.h). One
 * thread: the scheduler's specs arrive on a PULL, each written at once (a few
 * tries, bounded by the etcd handle's timeout); the main thread's LOAD is a paged
 * range over the prefix. Never: writes per request, keeps a lease, or trusts a
 * record it read (each is parsed and checked, and skipped when it does not hold). */
#include "coord_registry.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bus_actor.h"
#include "bus_limits.h"
#include "bus_log.h"
#include "coord_config.h"
#include "coord_etcd.h"

#define S_COMP "registry"
#define S_ETCD_MS 2000 /* one etcd call */
#define S_RETRY_MS 200 /* between tries of one write */
#define S_PAGE 256     /* records per range page */
#define S_ID_MAX 64    /* InstanceSpec.instance_id, NUL included */

typedef struct {
    coord_etcd_t *etcd;
    zsock_t *input; /* PULL, bound at endpoint */
    char endpoint[96];
    char prefix[COORD_ETCD_KEY_MAX]; /* /kvtier/<cluster>/instances/ */
    uint64_t written, failed;
} s_reg_t;

/* ---- records ---- */

int coord_registry_json(const kvtier_InstanceSpec *s, char *buf, size_t len)
{
    json_t *seg = json_array();
    for (pb_size_t i = 0; seg && i < s->segment_bytes_count; i++)
        json_array_append_new(seg, json_integer((json_int_t)s->segment_bytes[i]));
    json_t *o = seg ? json_pack("{s:s, s:s, s:s, s:I, s:I, s:o}", "instance_id", s->instance_id,
                                "model", s->model, "dtype", s->dtype, "tokens_per_block",
                                (json_int_t)s->tokens_per_block, "bytes_per_block",
                                (json_int_t)s->bytes_per_block, "segment_bytes", seg)
                    : NULL;
    if (!o) {
        json_decref(seg);
        return -1;
    }
    size_t n = json_dumpb(o, buf, len, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    if (n == 0 || n >= len)
        return -1;
    buf[n] = '\0';
    return 0;
}

static int s_str(json_t *o, const char *field, char *dst, size_t cap, bool need, char *why,
                 size_t whylen)
{
    json_t *v = json_object_get(o, field);
    if (!v && !need) {
        dst[0] = '\0';
        return 0;
    }
    const char *s = json_string_value(v);
    if (!s || strlen(s) >= cap || (need && !s[0])) {
        snprintf(why, whylen, "\"%s\" is not a string of 1..%zu bytes", field, cap - 1);
        return -1;
    }
    snprintf(dst, cap, "%s", s);
    return 0;
}

static int s_uint(json_t *o, const char *field, uint64_t max, uint64_t *out, char *why,
                  size_t whylen)
{
    json_t *v = json_object_get(o, field);
    if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
        (uint64_t)json_integer_value(v) > max) {
        snprintf(why, whylen, "\"%s\" is not an integer in 1..%" PRIu64, field, max);
        return -1;
    }
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

int coord_registry_parse(const char *json, size_t len, const char *key_id, kvtier_InstanceSpec *s,
                         char *why, size_t whylen)
{
    json_error_t jerr;
    json_t *o = json_loadb(json, len, 0, &jerr);
    int rc = -1;
    *s = (kvtier_InstanceSpec)kvtier_InstanceSpec_init_zero;
    uint64_t tpb = 0, bpb = 0;
    if (!json_is_object(o)) {
        snprintf(why, whylen, "not a JSON object (%s)", o ? "another value" : jerr.text);
        goto out;
    }
    if (s_str(o, "instance_id", s->instance_id, sizeof s->instance_id, true, why, whylen) < 0 ||
        s_str(o, "model", s->model, sizeof s->model, false, why, whylen) < 0 ||
        s_str(o, "dtype", s->dtype, sizeof s->dtype, false, why, whylen) < 0 ||
        s_uint(o, "tokens_per_block", UINT32_MAX, &tpb, why, whylen) < 0 ||
        s_uint(o, "bytes_per_block", 1ull << 40, &bpb, why, whylen) < 0)
        goto out;
    s->tokens_per_block = (uint32_t)tpb;
    s->bytes_per_block = bpb;
    json_t *seg = json_object_get(o, "segment_bytes");
    size_t nseg = seg ? json_array_size(seg) : 0;
    if (seg &&
        (!json_is_array(seg) || nseg > sizeof s->segment_bytes / sizeof s->segment_bytes[0])) {
        snprintf(why, whylen, "\"segment_bytes\" is not an array of at most %zu sizes",
                 sizeof s->segment_bytes / sizeof s->segment_bytes[0]);
        goto out;
    }
    for (size_t i = 0; i < nseg; i++) {
        json_t *v = json_array_get(seg, i);
        if (!json_is_integer(v) || json_integer_value(v) <= 0) {
            snprintf(why, whylen, "\"segment_bytes\"[%zu] is not a positive integer", i);
            goto out;
        }
        s->segment_bytes[i] = (uint64_t)json_integer_value(v);
    }
    s->segment_bytes_count = (pb_size_t)nseg;
    if (key_id && strcmp(key_id, s->instance_id) != 0) {
        snprintf(why, whylen, "its instance_id \"%s\" is not its key's", s->instance_id);
        goto out;
    }
    rc = 0;
out:
    json_decref(o);
    return rc;
}

/* ---- writes ---- */

static void s_write(s_reg_t *r, const kvtier_InstanceSpec *s)
{
    char key[COORD_ETCD_KEY_MAX + S_ID_MAX], rec[COORD_REGISTRY_JSON_MAX];
    if (snprintf(key, sizeof key, "%s%s", r->prefix, s->instance_id) >= (int)sizeof key ||
        coord_registry_json(s, rec, sizeof rec) < 0) {
        bus_warn(S_COMP, "instance %.64s: its record does not fit: not written", s->instance_id);
        r->failed++;
        return;
    }
    for (int i = 0; i < COORD_REGISTRY_TRIES; i++) {
        if (i)
            zclock_sleep(S_RETRY_MS);
        if (coord_etcd_put(r->etcd, key, rec, strlen(rec), 0, NULL) == 0) {
            r->written++;
            bus_debug(S_COMP, "%s = %s", key, rec);
            return;
        }
    }
    r->failed++;
    bus_warn(S_COMP,
             "instance %s not recorded in etcd after %d tries (%s): a new leader learns it when "
             "its client registers it again",
             s->instance_id, COORD_REGISTRY_TRIES, coord_etcd_last_error(r->etcd));
}

static void s_on_input(s_reg_t *r)
{
    zmsg_t *m = zmsg_recv(r->input);
    zframe_t *f = m ? zmsg_first(m) : NULL;
    if (f && zframe_size(f) == sizeof(kvtier_InstanceSpec)) {
        kvtier_InstanceSpec s;
        memcpy(&s, zframe_data(f), sizeof s);
        s.instance_id[sizeof s.instance_id - 1] = '\0';
        s.model[sizeof s.model - 1] = '\0';
        s.dtype[sizeof s.dtype - 1] = '\0';
        s_write(r, &s);
    } else if (m) {
        bus_warn(S_COMP, "input: a frame that is not an instance spec: dropped");
    }
    zmsg_destroy(&m);
}

/* ---- loads ---- */

typedef struct {
    s_reg_t *r;
    kvtier_InstanceSpec *out;
    uint32_t max, n, skipped, excess;
    char last[COORD_ETCD_KEY_MAX + S_ID_MAX];
} s_load_t;

static int s_on_record(const coord_etcd_kv_t *kv, void *arg)
{
    s_load_t *l = arg;
    snprintf(l->last, sizeof l->last, "%s", kv->key);
    const char *id = kv->key + strlen(l->r->prefix);
    char why[200];
    if (l->n == l->max) {
        l->excess++;
        return 0;
    }
    if (coord_registry_parse((const char *)kv->value, kv->value_len, id, &l->out[l->n], why,
                             sizeof why) < 0) {
        l->skipped++;
        bus_warn(S_COMP, "%s: malformed record skipped: %s", kv->key, why);
        return 0;
    }
    l->n++;
    return 0;
}

static int s_load(s_reg_t *r, kvtier_InstanceSpec *out, uint32_t max, uint32_t *n)
{
    s_load_t l = {.r = r, .out = out, .max = max};
    coord_etcd_range_info_t info = {0};
    coord_etcd_range_opts_t opts = {.limit = S_PAGE};
    int64_t rev = 0;
    do {
        opts.after_key = l.last[0] ? l.last : NULL;
        opts.revision = rev;
        if (coord_etcd_range(r->etcd, r->prefix, &opts, s_on_record, &l, &info) < 0) {
            bus_warn(S_COMP, "cannot read %s: %s", r->prefix, coord_etcd_last_error(r->etcd));
            *n = 0;
            return -1;
        }
        rev = info.revision;
    } while (info.more);
    if (l.excess)
        bus_warn(S_COMP, "%u instance records past max_instances %u: skipped", l.excess, max);
    bus_info(S_COMP, "%s: %u instances read (%u malformed skipped)", r->prefix, l.n, l.skipped);
    *n = l.n;
    return 0;
}

static void s_on_load(s_reg_t *r, zsock_t *pipe, const char *arg)
{
    uint32_t max = arg ? (uint32_t)strtoul(arg, NULL, 10) : 0;
    if (max > (1u << 16))
        max = 1u << 16;
    kvtier_InstanceSpec *out = max ? calloc(max, sizeof *out) : NULL;
    uint32_t n = 0;
    int rc = max && !out ? -1 : s_load(r, out, max, &n);
    zmsg_t *m = zmsg_new();
    zmsg_addstrf(m, "%d", rc < 0 ? -1 : (int)n);
    zmsg_addmem(m, out, (size_t)n * sizeof *out);
    if (zmsg_send(&m, pipe) < 0)
        zmsg_destroy(&m);
    free(out);
}

/* ---- the actor ---- */

static void s_destroy(s_reg_t **rp)
{
    s_reg_t *r = *rp;
    if (!r)
        return;
    zsock_destroy(&r->input);
    coord_etcd_destroy(&r->etcd);
    free(r);
    *rp = NULL;
}

static s_reg_t *s_new(const coord_registry_config_t *cfg)
{
    s_reg_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    static _Atomic unsigned seq;
    snprintf(r->endpoint, sizeof r->endpoint, "inproc://coord-registry-%ld-%u", (long)getpid(),
             seq++);
    coord_etcd_config_t ec = {.endpoints = cfg->etcd_endpoints,
                              .n_endpoints = cfg->n_etcd,
                              .timeout_ms = S_ETCD_MS,
                              .connect_timeout_ms = S_ETCD_MS};
    r->etcd = coord_etcd_new(&ec);
    r->input = zsock_new(ZMQ_PULL);
    if (!r->etcd || !r->input || zsock_bind(r->input, "%s", r->endpoint) < 0 ||
        coord_cluster_key(r->prefix, sizeof r->prefix, cfg->cluster, "instances/") < 0) {
        bus_error(S_COMP, "cannot start (no etcd handle, no input, or a cluster name too long)");
        s_destroy(&r);
    }
    return r;
}

static void s_actor(zsock_t *pipe, void *args)
{
    s_reg_t *r = s_new(args);
    if (bus_actor_ready(pipe, r != NULL) < 0)
        return;
    zpoller_t *poller = zpoller_new(pipe, r->input, NULL);
    while (poller) {
        void *which = zpoller_wait(poller, -1);
        if (which == r->input) {
            s_on_input(r);
            continue;
        }
        if (which != pipe)
            break;
        char *cmd = NULL, *arg = NULL;
        if (zsock_recv(pipe, "ss", &cmd, &arg) < 0 || !cmd || strcmp(cmd, "$TERM") == 0) {
            zstr_free(&cmd);
            zstr_free(&arg);
            break;
        }
        if (strcmp(cmd, "ENDPOINT") == 0)
            zstr_send(pipe, r->endpoint);
        else if (strcmp(cmd, "LOAD") == 0)
            s_on_load(r, pipe, arg);
        else
            bus_warn(S_COMP, "unknown pipe command '%s' ignored", cmd);
        zstr_free(&cmd);
        zstr_free(&arg);
    }
    /* specs still queued are written before the actor goes */
    while (zsock_events(r->input) & ZMQ_POLLIN)
        s_on_input(r);
    zpoller_destroy(&poller);
    s_destroy(&r);
}

zactor_t *coord_registry_new(const coord_registry_config_t *cfg)
{
    return cfg && cfg->n_etcd && cfg->cluster ? bus_actor_new(s_actor, (void *)cfg) : NULL;
}

int coord_registry_endpoint(zactor_t *a, char *buf, size_t len)
{
    if (!a || bus_actor_ask(a, BUS_ACTOR_ASK_MS, "ss", "ENDPOINT", "") < 0)
        return -1;
    char *ep = zstr_recv(a);
    if (!ep)
        return -1;
    snprintf(buf, len, "%s", ep);
    zstr_free(&ep);
    return 0;
}

int coord_registry_load(zactor_t *a, kvtier_InstanceSpec *out, uint32_t max, uint32_t *n)
{
    *n = 0;
    char arg[16];
    snprintf(arg, sizeof arg, "%u", max);
    if (!a || bus_actor_ask(a, COORD_REGISTRY_LOAD_MS, "ss", "LOAD", arg) < 0)
        return -1;
    zmsg_t *m = zmsg_recv(a);
    char *cnt = m ? zmsg_popstr(m) : NULL;
    zframe_t *f = m ? zmsg_pop(m) : NULL;
    int got = cnt ? atoi(cnt) : -1;
    int rc = -1;
    if (got >= 0 && (uint32_t)got <= max && f && zframe_size(f) == (size_t)got * sizeof *out) {
        memcpy(out, zframe_data(f), zframe_size(f));
        *n = (uint32_t)got;
        rc = 0;
    }
    zstr_free(&cnt);
    zframe_destroy(&f);
    zmsg_destroy(&m);
    return rc;
}
