/* coord_registry.c — the instance registry in etcd (see coord_registry.h). One
 * thread: the scheduler's specs arrive on a PULL, each written at once (a few
 * tries, bounded by the etcd handle's timeout); the main thread's LOAD is a paged
 * range over the prefix. Never: writes per request, keeps a lease, or trusts a
 * record it read (each is parsed and checked, and skipped when it does not hold),
 * loads a record older than COORD_REGISTRY_MAX_AGE_MS, or loads two records with
 * one slot-header number. */
#include "coord_registry.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bus_actor.h"
#include "bus_limits.h"
#include "bus_log.h"
#include "coord_config.h"
#include "coord_etcd.h"
#include "tier_key.h"

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
    /* the instances this leader's scheduler registered (or saw registered again)
     * since the last LOAD: id -> s_live_t; their records are refreshed */
    zhashx_t *live;
    uint64_t load_seq; /* the LOAD being answered (coord_registry_load's tag) */
} s_reg_t;

typedef struct {
    kvtier_InstanceSpec spec;
    int64_t written_ms; /* wall ms of our last write of its record; 0: none yet */
} s_live_t;

/* ---- records ---- */

int coord_registry_json(const kvtier_InstanceSpec *s, int64_t written_ms, char *buf, size_t len)
{
    json_t *seg = json_array();
    for (pb_size_t i = 0; seg && i < s->segment_bytes_count; i++)
        json_array_append_new(seg, json_integer((json_int_t)s->segment_bytes[i]));
    json_t *o = seg ? json_pack("{s:s, s:s, s:s, s:I, s:I, s:o, s:I, s:I, s:I}", "instance_id",
                                s->instance_id, "model", s->model, "dtype", s->dtype,
                                "tokens_per_block", (json_int_t)s->tokens_per_block,
                                "bytes_per_block", (json_int_t)s->bytes_per_block, "segment_bytes",
                                seg, "segments", (json_int_t)s->segments, "number",
                                (json_int_t)tier_instance_hash(s->instance_id), "written_ms",
                                (json_int_t)(written_ms > 0 ? written_ms : 0))
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
                         int64_t *written_ms, char *why, size_t whylen)
{
    if (written_ms)
        *written_ms = 0;
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
    /* optional (a record written before segments has none); 0: one part */
    uint64_t nparts = 0;
    json_t *parts = json_object_get(o, "segments");
    if (parts && !(json_is_integer(parts) && json_integer_value(parts) == 0) &&
        s_uint(o, "segments", BUS_MAX_BLOCK_SEGMENTS, &nparts, why, whylen) < 0)
        goto out;
    s->segments = (uint32_t)nparts;
    if (key_id && strcmp(key_id, s->instance_id) != 0) {
        snprintf(why, whylen, "its instance_id \"%s\" is not its key's", s->instance_id);
        goto out;
    }
    /* both optional: a record an older coordinator wrote has neither */
    json_t *num = json_object_get(o, "number");
    uint32_t want = tier_instance_hash(s->instance_id);
    if (num && (!json_is_integer(num) || json_integer_value(num) != (json_int_t)want)) {
        snprintf(why, whylen,
                 "its \"number\" is not the slot-header number of its instance_id (%08x)", want);
        goto out;
    }
    json_t *when = json_object_get(o, "written_ms");
    if (when && (!json_is_integer(when) || json_integer_value(when) < 0)) {
        snprintf(why, whylen, "\"written_ms\" is not a non-negative integer");
        goto out;
    }
    if (written_ms && when)
        *written_ms = (int64_t)json_integer_value(when);
    rc = 0;
out:
    json_decref(o);
    return rc;
}

/* ---- writes ---- */

typedef struct {
    const char *prefix;
    coord_etcd_kv_fn fn;
    void *arg;
    char last[COORD_ETCD_KEY_MAX + S_ID_MAX];
} s_scan_t;

static int s_scan_one(const coord_etcd_kv_t *kv, void *arg)
{
    s_scan_t *sc = arg;
    snprintf(sc->last, sizeof sc->last, "%s", kv->key);
    return sc->fn(kv, sc->arg);
}

/* Every record under the prefix, in pages at one revision: 0, or -1 (logged). */
static int s_scan(s_reg_t *r, coord_etcd_kv_fn fn, void *arg)
{
    s_scan_t sc = {.prefix = r->prefix, .fn = fn, .arg = arg};
    coord_etcd_range_info_t info = {0};
    coord_etcd_range_opts_t opts = {.limit = S_PAGE};
    int64_t rev = 0;
    do {
        opts.after_key = sc.last[0] ? sc.last : NULL;
        opts.revision = rev;
        if (coord_etcd_range(r->etcd, r->prefix, &opts, s_scan_one, &sc, &info) < 0) {
            bus_warn(S_COMP, "cannot read %s: %s", r->prefix, coord_etcd_last_error(r->etcd));
            return -1;
        }
        rev = info.revision;
    } while (info.more);
    return 0;
}

static bool s_stale(int64_t written_ms, int64_t now)
{
    return written_ms > 0 && now - written_ms > COORD_REGISTRY_MAX_AGE_MS;
}

/* Another instance's record whose slot-header number is ours (a 32-bit
 * collision): found (its key and value, to delete it only as it is) or not. */
typedef struct {
    s_reg_t *r;
    const char *id;
    uint32_t number;
    int64_t now;
    bool found, stale;
    char key[COORD_ETCD_KEY_MAX + S_ID_MAX];
    char value[COORD_REGISTRY_JSON_MAX];
    size_t value_len;
} s_clash_t;

static int s_on_clash(const coord_etcd_kv_t *kv, void *arg)
{
    s_clash_t *c = arg;
    const char *id = kv->key + strlen(c->r->prefix);
    kvtier_InstanceSpec s;
    int64_t when = 0;
    char why[200];
    if (c->found || strcmp(id, c->id) == 0 || tier_instance_hash(id) != c->number ||
        kv->value_len >= sizeof c->value ||
        coord_registry_parse((const char *)kv->value, kv->value_len, id, &s, &when, why,
                             sizeof why) < 0)
        return 0;
    c->found = true;
    c->stale = s_stale(when, c->now);
    snprintf(c->key, sizeof c->key, "%s", kv->key);
    memcpy(c->value, kv->value, kv->value_len);
    c->value_len = kv->value_len;
    return 0;
}

/* A first write of an id: refused (false) while a live record of another
 * instance has its slot-header number; a stale one is deleted first. */
static bool s_number_free(s_reg_t *r, const kvtier_InstanceSpec *s, int64_t now)
{
    s_clash_t c = {
        .r = r, .id = s->instance_id, .number = tier_instance_hash(s->instance_id), .now = now};
    if (s_scan(r, s_on_clash, &c) < 0 || !c.found)
        return true; /* unreadable: the load's check still holds */
    if (!c.stale) {
        bus_warn(S_COMP,
                 "instance %s not recorded in etcd: its slot-header number %08x is that of %s, "
                 "recorded there (a 32-bit collision; choose another id, or delete that key if "
                 "the instance is gone)",
                 s->instance_id, c.number, c.key);
        return false;
    }
    bool deleted = false;
    if (coord_etcd_delete_if_value(r->etcd, c.key, c.value, c.value_len, &deleted) == 0 && deleted)
        bus_info(S_COMP, "%s deleted: stale, and its number %08x is %s's", c.key, c.number,
                 s->instance_id);
    return true;
}

static void s_write(s_reg_t *r, const kvtier_InstanceSpec *s, bool first)
{
    char key[COORD_ETCD_KEY_MAX + S_ID_MAX], rec[COORD_REGISTRY_JSON_MAX];
    int64_t now = zclock_time();
    if (snprintf(key, sizeof key, "%s%s", r->prefix, s->instance_id) >= (int)sizeof key ||
        coord_registry_json(s, now, rec, sizeof rec) < 0) {
        bus_warn(S_COMP, "instance %.64s: its record does not fit: not written", s->instance_id);
        r->failed++;
        return;
    }
    if (first && !s_number_free(r, s, now)) {
        r->failed++;
        return;
    }
    for (int i = 0; i < COORD_REGISTRY_TRIES; i++) {
        if (i)
            zclock_sleep(S_RETRY_MS);
        if (coord_etcd_put(r->etcd, key, rec, strlen(rec), 0, NULL) == 0) {
            r->written++;
            s_live_t *l = zhashx_lookup(r->live, s->instance_id);
            if (l)
                l->written_ms = now;
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

/* A spec from the scheduler: a new instance, or one registered again (at a new
 * leader, a new handle). Written when new to this term or when its record is
 * older than the refresh period; an equal one inside it writes nothing. */
static void s_on_spec(s_reg_t *r, const kvtier_InstanceSpec *s)
{
    s_live_t *l = zhashx_lookup(r->live, s->instance_id);
    bool first = !l || l->written_ms == 0; /* (a first write refused or failed) */
    if (!l) {
        l = calloc(1, sizeof *l);
        if (!l || zhashx_insert(r->live, s->instance_id, l) < 0) {
            free(l);
            s_write(r, s, true);
            return;
        }
    } else if (memcmp(&l->spec, s, sizeof *s) == 0 &&
               zclock_time() - l->written_ms < COORD_REGISTRY_REFRESH_MS) {
        return;
    }
    l->spec = *s;
    s_write(r, s, first);
}

/* Every COORD_REGISTRY_REFRESH_MS: the records of this term's instances get a
 * fresh written_ms, so only records nobody registered lately age out. */
static void s_refresh(s_reg_t *r)
{
    int64_t now = zclock_time();
    for (s_live_t *l = zhashx_first(r->live); l; l = zhashx_next(r->live))
        if (now - l->written_ms >= COORD_REGISTRY_REFRESH_MS)
            s_write(r, &l->spec, l->written_ms == 0);
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
        s_on_spec(r, &s);
    } else if (m) {
        bus_warn(S_COMP, "input: a frame that is not an instance spec: dropped");
    }
    zmsg_destroy(&m);
}

/* ---- loads ---- */

typedef struct {
    s_reg_t *r;
    kvtier_InstanceSpec *out;
    int64_t *when;     /* out[i]'s written_ms (0: an older coordinator's record) */
    uint32_t *numbers; /* out[i]'s slot-header number */
    uint32_t max, n, skipped, excess, stale, clashes, deleted;
    int64_t now;
    zlistx_t *old_keys; /* stale records, deleted after the read (key \0 value) */
} s_load_t;

/* Where a record of written_ms `when` goes in out: a free place, the oldest one
 * when full and it is newer (the newest `max` are kept), or -1. */
static int s_load_place(s_load_t *l, int64_t when)
{
    if (l->n < l->max)
        return (int)l->n++;
    uint32_t oldest = 0;
    for (uint32_t i = 1; i < l->n; i++)
        if (l->when[i] < l->when[oldest])
            oldest = i;
    l->excess++; /* one of the two is left out */
    if (l->n == 0 || l->when[oldest] >= when)
        return -1;
    return (int)oldest;
}

static int s_on_record(const coord_etcd_kv_t *kv, void *arg)
{
    s_load_t *l = arg;
    const char *id = kv->key + strlen(l->r->prefix);
    char why[200];
    kvtier_InstanceSpec s;
    int64_t when = 0;
    if (coord_registry_parse((const char *)kv->value, kv->value_len, id, &s, &when, why,
                             sizeof why) < 0) {
        l->skipped++;
        bus_warn(S_COMP, "%s: malformed record skipped: %s", kv->key, why);
        return 0;
    }
    if (s_stale(when, l->now)) {
        l->stale++;
        size_t klen = strlen(kv->key);
        char *kv2 = malloc(klen + 1 + kv->value_len + 1);
        if (kv2) {
            memcpy(kv2, kv->key, klen + 1);
            memcpy(kv2 + klen + 1, kv->value, kv->value_len);
            kv2[klen + 1 + kv->value_len] = '\0';
            if (!zlistx_add_end(l->old_keys, kv2))
                free(kv2);
        }
        return 0;
    }
    uint32_t number = tier_instance_hash(s.instance_id);
    for (uint32_t i = 0; i < l->n; i++) {
        if (l->numbers[i] != number)
            continue;
        /* two records with one slot-header number: the newer is kept */
        l->clashes++;
        bool newer = when > l->when[i];
        bus_warn(S_COMP,
                 "%s and instance %s have the same slot-header number %08x: %s skipped (the "
                 "older record)",
                 kv->key, l->out[i].instance_id, number, newer ? l->out[i].instance_id : id);
        if (newer) {
            l->out[i] = s;
            l->when[i] = when;
        }
        return 0;
    }
    int at = s_load_place(l, when);
    if (at < 0)
        return 0;
    l->out[at] = s;
    l->when[at] = when;
    l->numbers[at] = number;
    return 0;
}

static void s_free_str(void **item)
{
    free(*item);
    *item = NULL;
}

/* The stale records read, deleted only as read (a record rewritten since stays). */
static void s_load_delete_stale(s_load_t *l)
{
    for (char *k = zlistx_first(l->old_keys); k; k = zlistx_next(l->old_keys)) {
        const char *v = k + strlen(k) + 1;
        bool deleted = false;
        if (coord_etcd_delete_if_value(l->r->etcd, k, v, strlen(v), &deleted) == 0 && deleted)
            l->deleted++;
    }
}

static int s_load(s_reg_t *r, kvtier_InstanceSpec *out, uint32_t max, uint32_t *n)
{
    s_load_t l = {.r = r,
                  .out = out,
                  .max = max,
                  .now = zclock_time(),
                  .when = calloc(max ? max : 1, sizeof(int64_t)),
                  .numbers = calloc(max ? max : 1, sizeof(uint32_t)),
                  .old_keys = zlistx_new()};
    int rc = -1;
    *n = 0;
    if (!l.when || !l.numbers || !l.old_keys)
        goto out;
    zlistx_set_destructor(l.old_keys, s_free_str);
    if (s_scan(r, s_on_record, &l) < 0)
        goto out;
    s_load_delete_stale(&l);
    if (l.excess)
        bus_warn(S_COMP, "%u instance records past max_instances %u: the oldest skipped", l.excess,
                 max);
    bus_info(S_COMP,
             "%s: %u instances read (%u malformed, %u older than %d h (%u deleted), %u "
             "slot-header number clashes skipped)",
             r->prefix, l.n, l.skipped, l.stale, COORD_REGISTRY_MAX_AGE_MS / 3600000, l.deleted,
             l.clashes);
    /* a new term: its instances are those registered from now on; a record an
     * older coordinator wrote (no written_ms) is stamped now, so it ages out too */
    zhashx_purge(r->live);
    for (uint32_t i = 0; i < l.n; i++)
        if (l.when[i] == 0)
            s_write(r, &out[i], false);
    *n = l.n;
    rc = 0;
out:
    free(l.when);
    free(l.numbers);
    zlistx_destroy(&l.old_keys);
    return rc;
}

static void s_on_load(s_reg_t *r, zsock_t *pipe, const char *arg, const char *seq)
{
    uint32_t max = arg ? (uint32_t)strtoul(arg, NULL, 10) : 0;
    if (max > (1u << 16))
        max = 1u << 16;
    kvtier_InstanceSpec *out = max ? calloc(max, sizeof *out) : NULL;
    uint32_t n = 0;
    int rc = max && !out ? -1 : s_load(r, out, max, &n);
    zmsg_t *m = zmsg_new();
    zmsg_addstr(m, seq ? seq : "");
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
    zhashx_destroy(&r->live);
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
    r->live = zhashx_new();
    if (r->live)
        zhashx_set_destructor(r->live, s_free_str);
    if (!r->etcd || !r->input || !r->live || zsock_bind(r->input, "%s", r->endpoint) < 0 ||
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
    int64_t next_refresh = zclock_mono() + COORD_REGISTRY_REFRESH_MS;
    while (poller) {
        int64_t wait = next_refresh - zclock_mono();
        void *which = zpoller_wait(poller, wait > 0 ? (int)(wait < 60000 ? wait : 60000) : 0);
        if (zclock_mono() >= next_refresh) {
            s_refresh(r);
            next_refresh = zclock_mono() + COORD_REGISTRY_REFRESH_MS;
        }
        if (!which && zpoller_expired(poller))
            continue;
        if (which == r->input) {
            s_on_input(r);
            continue;
        }
        if (which != pipe)
            break;
        zmsg_t *msg = zmsg_recv(pipe);
        char *cmd = msg ? zmsg_popstr(msg) : NULL;
        char *arg = msg ? zmsg_popstr(msg) : NULL;
        char *seq = msg ? zmsg_popstr(msg) : NULL;
        zmsg_destroy(&msg);
        bool stop = !cmd || strcmp(cmd, "$TERM") == 0;
        if (stop)
            ;
        else if (strcmp(cmd, "ENDPOINT") == 0)
            zstr_send(pipe, r->endpoint);
        else if (strcmp(cmd, "LOAD") == 0)
            s_on_load(r, pipe, arg, seq);
        else if (strcmp(cmd, "END") == 0) {
            while (zsock_events(r->input) & ZMQ_POLLIN) /* the term's last specs first */
                s_on_input(r);
            zhashx_purge(r->live); /* no leader here: nothing refreshed any more */
        } else
            bus_warn(S_COMP, "unknown pipe command '%s' ignored", cmd);
        zstr_free(&cmd);
        zstr_free(&arg);
        zstr_free(&seq);
        if (stop)
            break;
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

void coord_registry_end_term(zactor_t *a)
{
    if (a)
        zstr_send(a, "END");
}

int coord_registry_load(zactor_t *a, kvtier_InstanceSpec *out, uint32_t max, uint32_t *n)
{
    *n = 0;
    static _Atomic uint64_t s_seq;
    char arg[16], seq[24];
    snprintf(arg, sizeof arg, "%u", max);
    snprintf(seq, sizeof seq, "%" PRIu64, atomic_fetch_add(&s_seq, 1) + 1);
    if (!a || zsock_send(a, "sss", "LOAD", arg, seq) < 0)
        return -1;
    int64_t deadline = zclock_mono() + COORD_REGISTRY_LOAD_MS;
    zpoller_t *p = zpoller_new(a, NULL);
    if (!p)
        return -1;
    zpoller_set_nonstop(p, true); /* a signal to the process is not the answer */
    int rc = -1;
    for (;;) {
        int64_t left = deadline - zclock_mono();
        if (left <= 0 || zpoller_wait(p, (int)left) != a)
            break;
        zmsg_t *m = zmsg_recv(a);
        char *tag = m ? zmsg_popstr(m) : NULL;
        if (!tag || strcmp(tag, seq) != 0) {
            /* an earlier load's late answer (it timed out): not this term's snapshot */
            bus_info(S_COMP, "a late registry load answer (load %s) dropped", tag ? tag : "?");
            zstr_free(&tag);
            zmsg_destroy(&m);
            continue; /* (or interrupted): wait on until the deadline */
        }
        char *cnt = zmsg_popstr(m);
        zframe_t *f = zmsg_pop(m);
        int got = cnt ? atoi(cnt) : -1;
        if (got >= 0 && (uint32_t)got <= max && f && zframe_size(f) == (size_t)got * sizeof *out) {
            if (got)
                memcpy(out, zframe_data(f), zframe_size(f));
            *n = (uint32_t)got;
            rc = 0;
        }
        zstr_free(&tag);
        zstr_free(&cnt);
        zframe_destroy(&f);
        zmsg_destroy(&m);
        break;
    }
    zpoller_destroy(&p);
    return rc;
}
