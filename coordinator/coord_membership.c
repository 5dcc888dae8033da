/* coord_membership.c — tier membership actor and the tier record codec (see
 * coord_membership.h).
 *
 * Two threads: the actor (lists, keeps the table, reports) and coord_etcd's watch
 * thread, which forwards each event through a PUSH socket into the actor's PULL
 * inbox. The PUSH is created before the watch thread starts and closed after it
 * is joined; messages carry the watch generation so a finished watch's leftovers
 * are ignored. */
#include "coord_membership.h"
#include "tier.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pb_decode.h>
#include <pb_encode.h>
#include <stdatomic.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_actor.h"
#include "bus_log.h"
#include "coord_config.h"
#include "coord_etcd.h"
#include "coord_proc.h"

#define S_COMP "membership"
#define S_BACKOFF_MAX_MS 2000
/* Inbox messages: command, watch generation, error, revision, key, value bytes. */
#define S_INBOX_PIC "s8i8sb"
/* Pipe messages: "UP"/"DOWN", revision, encoded TierInfo. */
#define S_PIPE_PIC "s8b"
/* List pages per re-list (keys that are not tier names do not fill the table). */
#define S_MAX_PAGES 16

/* ---- tier record codec ----------------------------------------------------- */

static const char *s_hex(const uint8_t *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
    return out;
}

int coord_tier_value_encode(const kvtier_TierInfo *t, char *buf, size_t cap, size_t *len)
{
    return coord_tier_value_encode_metrics(t, NULL, buf, cap, len);
}

int coord_tier_value_encode_metrics(const kvtier_TierInfo *t, const char *metrics, char *buf,
                                    size_t cap, size_t *len)
{
    /* "kind" is the registered name (a plug-in's kind has no wire number) */
    const char *kind = t->kind_name[0] ? t->kind_name : tier_kind_name((uint32_t)t->kind);
    if (!kind)
        return -EINVAL;
    char epoch[24];
    snprintf(epoch, sizeof epoch, "%" PRIu64, t->epoch);
    json_t *v =
        json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:I, s:I}", "name", t->name, "kind", kind,
                  "tier_id", (json_int_t)t->tier_id, "endpoint", t->endpoint, "shm", t->shm, "host",
                  t->host, "epoch", epoch, "capacity", (json_int_t)(t->capacity_slots & INT64_MAX),
                  "slot_size", (json_int_t)(t->slot_bytes & INT64_MAX));
    if (!v)
        return -ENOMEM;
    if (metrics && metrics[0]) /* issue 10: a field older readers ignore */
        json_object_set_new(v, "metrics", json_string(metrics));
    /* issue 11: a gpu tier's device access (hex), fields older readers ignore */
    char hex[2 * sizeof t->cuda_ipc_handle.bytes + 1];
    /* only whole ones: the decoder takes exactly a handle's and a UUID's bytes */
    if (t->cuda_ipc_handle.size == sizeof t->cuda_ipc_handle.bytes)
        json_object_set_new(
            v, "cuda_ipc_handle",
            json_string(s_hex(t->cuda_ipc_handle.bytes, t->cuda_ipc_handle.size, hex)));
    if (t->gpu_uuid.size == sizeof t->gpu_uuid.bytes)
        json_object_set_new(v, "gpu_uuid",
                            json_string(s_hex(t->gpu_uuid.bytes, t->gpu_uuid.size, hex)));
    if (t->ucx_address[0]) /* issue 9 §4: a field older readers ignore */
        json_object_set_new(v, "ucx_address", json_string(t->ucx_address));
    if (t->pool[0]) /* issue 9 §3: a pool's member (a field older readers ignore) */
        json_object_set_new(v, "pool", json_string(t->pool));
    if (t->slot_stride)
        json_object_set_new(v, "slot_stride",
                            json_integer((json_int_t)(t->slot_stride & INT64_MAX)));
    size_t n = json_dumpb(v, NULL, 0, JSON_COMPACT);
    int rc = n == 0 ? -ENOMEM : n > cap ? -ENOBUFS : 0;
    if (len)
        *len = n;
    if (rc == 0)
        json_dumpb(v, buf, cap, JSON_COMPACT);
    json_decref(v);
    return rc;
}

int coord_tier_value_metrics(const void *buf, size_t len, char *out, size_t cap)
{
    json_error_t jerr;
    json_t *v = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    json_t *m = v ? json_object_get(v, "metrics") : NULL;
    int rc =
        json_is_string(m) && json_string_length(m) > 0 && json_string_length(m) < cap ? 0 : -ENOENT;
    if (cap)
        snprintf(out, cap, "%s", rc == 0 ? json_string_value(m) : "");
    json_decref(v);
    return rc;
}

static int s_bad(char *err, size_t errlen, const char *fmt, const char *field)
{
    if (err && errlen)
        snprintf(err, errlen, fmt, field);
    return -EBADMSG;
}

static int s_str(const json_t *o, const char *field, char *out, size_t cap, bool nonempty,
                 char *err, size_t errlen)
{
    const json_t *s = json_object_get(o, field);
    if (!s)
        return s_bad(err, errlen, "missing \"%s\"", field);
    if (!json_is_string(s))
        return s_bad(err, errlen, "\"%s\" is not a string", field);
    size_t n = json_string_length(s);
    if (n >= cap || memchr(json_string_value(s), '\0', n))
        return s_bad(err, errlen, "\"%s\" is too long or holds a NUL", field);
    if (nonempty && n == 0)
        return s_bad(err, errlen, "\"%s\" is empty", field);
    memcpy(out, json_string_value(s), n + 1);
    return 0;
}

static int s_uint(const json_t *o, const char *field, uint64_t min, uint64_t max, uint64_t *out,
                  char *err, size_t errlen)
{
    const json_t *v = json_object_get(o, field);
    if (!v)
        return s_bad(err, errlen, "missing \"%s\"", field);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) < min ||
        (uint64_t)json_integer_value(v) > max)
        return s_bad(err, errlen, "\"%s\" is not an integer in range", field);
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* An optional field of exactly n bytes as 2n hex digits (absent: size 0). */
static int s_hex_field(const json_t *o, const char *field, uint8_t *out, size_t n, pb_size_t *size,
                       char *err, size_t errlen)
{
    *size = 0;
    const json_t *v = json_object_get(o, field);
    if (!v)
        return 0;
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    if (!s || json_string_length(v) != 2 * n)
        return s_bad(err, errlen, "\"%s\" is not the hex of its bytes", field);
    for (size_t i = 0; i < 2 * n; i++) {
        char ch = s[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (d < 0)
            return s_bad(err, errlen, "\"%s\" is not the hex of its bytes", field);
        out[i / 2] = (uint8_t)(i % 2 ? out[i / 2] | d : d << 4);
    }
    *size = (pb_size_t)n;
    return 0;
}

/* epoch: a decimal string (as we write it) or a non-negative integer. */
static int s_epoch(const json_t *o, uint64_t *out, char *err, size_t errlen)
{
    const json_t *v = json_object_get(o, "epoch");
    if (!v)
        return s_bad(err, errlen, "missing \"%s\"", "epoch");
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    size_t n = s ? json_string_length(v) : 0;
    if (!s || n == 0 || n > 20)
        return s_bad(err, errlen, "\"%s\" is not a decimal u64", "epoch");
    uint64_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || acc > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
            return s_bad(err, errlen, "\"%s\" is not a decimal u64", "epoch");
        acc = acc * 10 + (uint64_t)(s[i] - '0');
    }
    *out = acc;
    return 0;
}

int coord_tier_value_decode(const void *buf, size_t len, kvtier_TierInfo *out, char *err,
                            size_t errlen)
{
    *out = (kvtier_TierInfo)kvtier_TierInfo_init_zero;
    json_error_t jerr;
    json_t *v = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!v || !json_is_object(v)) {
        json_decref(v);
        if (err && errlen)
            snprintf(err, errlen, "not a JSON object");
        return -EBADMSG;
    }
    uint64_t id = 0;
    int rc = s_str(v, "name", out->name, sizeof out->name, true, err, errlen);
    if (rc == 0)
        rc = s_str(v, "kind", out->kind_name, sizeof out->kind_name, true, err, errlen);
    /* a kind this process has not registered (built in, or a plug-in the
     * deployment file loads) cannot be served by it */
    if (rc == 0 && !tier_find(out->kind_name))
        rc = s_bad(err, errlen, "unknown kind \"%s\"", out->kind_name);
    out->kind = (kvtier_TierKind)tier_kind_wire(out->kind_name);
    if (rc == 0)
        rc = s_uint(v, "tier_id", 1, UINT32_MAX, &id, err, errlen);
    out->tier_id = (uint32_t)id;
    if (rc == 0)
        rc = s_str(v, "endpoint", out->endpoint, sizeof out->endpoint, true, err, errlen);
    if (rc == 0)
        rc = s_str(v, "shm", out->shm, sizeof out->shm, false, err, errlen);
    if (rc == 0)
        rc = s_str(v, "host", out->host, sizeof out->host, false, err, errlen);
    if (rc == 0 && json_object_get(v, "ucx_address")) /* optional: remote tiers over UCX */
        rc = s_str(v, "ucx_address", out->ucx_address, sizeof out->ucx_address, false, err, errlen);
    if (rc == 0)
        rc = s_epoch(v, &out->epoch, err, errlen);
    if (rc == 0)
        rc = s_uint(v, "capacity", 1, INT64_MAX, &out->capacity_slots, err, errlen);
    if (rc == 0)
        rc = s_uint(v, "slot_size", 1, INT64_MAX, &out->slot_bytes, err, errlen);
    if (rc == 0)
        rc =
            s_hex_field(v, "cuda_ipc_handle", out->cuda_ipc_handle.bytes,
                        sizeof out->cuda_ipc_handle.bytes, &out->cuda_ipc_handle.size, err, errlen);
    if (rc == 0)
        rc = s_hex_field(v, "gpu_uuid", out->gpu_uuid.bytes, sizeof out->gpu_uuid.bytes,
                         &out->gpu_uuid.size, err, errlen);
    if (rc == 0 && json_object_get(v, "pool"))
        rc = s_str(v, "pool", out->pool, sizeof out->pool, true, err, errlen);
    if (rc == 0 && json_object_get(v, "slot_stride"))
        rc = s_uint(v, "slot_stride", 1, INT64_MAX, &out->slot_stride, err, errlen);
    json_decref(v);
    if (rc < 0)
        *out = (kvtier_TierInfo)kvtier_TierInfo_init_zero;
    else
        out->up = true;
    return rc;
}

/* ---- pool members' tier ids ------------------------------------------------- */

int coord_pool_claim_id(coord_etcd_t *e, const char *cluster, const char *pool, uint32_t first_id,
                        uint32_t max_members, const char *name, int64_t lease, uint32_t want,
                        uint32_t *got, char *why, size_t whylen)
{
    char value[128];
    int vn = snprintf(value, sizeof value, "{\"name\":\"%s\",\"pool\":\"%s\"}", name, pool);
    if (vn < 0 || (size_t)vn >= sizeof value)
        return -ENAMETOOLONG;
    size_t vlen = (size_t)vn, off = 0;
    uint32_t held = 0;
    char holders[512] = "";
    for (uint32_t k = 0; k < max_members; k++) {
        uint32_t id = first_id + k;
        if (want && id != want)
            continue;
        char suffix[32], key[COORD_ETCD_KEY_MAX], cur[256];
        snprintf(suffix, sizeof suffix, "tier_ids/%u", id);
        if (coord_cluster_key(key, sizeof key, cluster, suffix) < 0)
            return -ENAMETOOLONG;
        bool won = false;
        size_t clen = 0;
        int rc = coord_etcd_create_if_absent(e, key, value, vlen, lease, &won, cur, sizeof cur - 1,
                                             &clen, NULL);
        if (rc < 0 && rc != -ENOBUFS)
            return rc;
        bool mine = won || (rc == 0 && clen == vlen && memcmp(cur, value, vlen) == 0);
        if (mine && !won) { /* our own older claim: moved to this lease */
            rc = coord_etcd_put(e, key, value, vlen, lease, NULL);
            if (rc < 0)
                return rc;
        }
        if (mine) {
            *got = id;
            return 0;
        }
        held++;
        cur[rc == 0 ? clen : 0] = '\0';
        int n = snprintf(holders + off, off < sizeof holders ? sizeof holders - off : 0,
                         "%sid %u: %s", held > 1 ? ", " : "", id, cur);
        if (n > 0)
            off += (size_t)n;
    }
    if (want)
        snprintf(why, whylen, "tier id %u of pool %s was taken by another member (%s)", want, pool,
                 holders);
    else
        snprintf(why, whylen,
                 "pool %s is full: %u of %u members (%s); raise pools[].max_members in the "
                 "deployment or retire a member (kvtier drain, then stop it)",
                 pool, held, max_members, holders);
    return -EBUSY;
}

/* ---- the actor --------------------------------------------------------------- */

typedef struct {
    bool used;
    char name[sizeof(((kvtier_TierInfo *)0)->name)];
    kvtier_TierInfo info;
    uint8_t value[COORD_TIER_VALUE_MAX];
    size_t len;
} s_entry_t;

typedef struct {
    zsock_t *push;
    uint64_t gen;
} s_watch_ctx_t;

typedef struct {
    zsock_t *pipe;
    zsock_t *inbox;
    char inbox_ep[64];
    zloop_t *loop;
    char eps[COORD_ETCD_MAX_ENDPOINTS][COORD_ETCD_ENDPOINT_MAX];
    const char *epp[COORD_ETCD_MAX_ENDPOINTS];
    coord_etcd_config_t ecfg;
    coord_etcd_t *etcd;
    char prefix[COORD_ETCD_KEY_MAX];
    size_t prefix_len;

    s_entry_t table[COORD_MEMBERSHIP_MAX];
    s_entry_t seen[COORD_MEMBERSHIP_MAX]; /* scratch of one list */
    size_t n_seen;
    bool seen_overflow;
    char last_key[COORD_ETCD_KEY_MAX]; /* paging: the last key a list page delivered */

    coord_etcd_watch_t *watch;
    s_watch_ctx_t wctx;
    uint64_t watch_gen;
    int retry_ms, backoff_ms, retry_timer;
} self_t;

static void s_report(self_t *self, bool up, int64_t rev, const kvtier_TierInfo *info)
{
    uint8_t buf[kvtier_TierInfo_size];
    pb_ostream_t os = pb_ostream_from_buffer(buf, sizeof buf);
    if (!pb_encode(&os, kvtier_TierInfo_fields, info)) {
        bus_error(S_COMP, "encoding tier %s: %s", info->name, PB_GET_ERROR(&os));
        return;
    }
    bus_info(S_COMP, "tier %s (id %u) %s at revision %" PRId64 ": %s epoch %" PRIu64, info->name,
             info->tier_id, up ? "UP" : "DOWN", rev, info->endpoint, info->epoch);
    zsock_send(self->pipe, S_PIPE_PIC, up ? "UP" : "DOWN", (uint64_t)rev, buf, os.bytes_written);
}

static s_entry_t *s_find(self_t *self, const char *name)
{
    for (size_t i = 0; i < COORD_MEMBERSHIP_MAX; i++)
        if (self->table[i].used && strcmp(self->table[i].name, name) == 0)
            return &self->table[i];
    return NULL;
}

/* The tier name of KEY under our prefix, or NULL when it is not one of ours. */
static const char *s_key_name(self_t *self, const char *key, size_t key_len)
{
    if (key_len <= self->prefix_len || memcmp(key, self->prefix, self->prefix_len) != 0 ||
        key_len - self->prefix_len >= sizeof(((s_entry_t *)0)->name) || memchr(key, '\0', key_len))
        return NULL;
    return key + self->prefix_len;
}

static void s_remove(self_t *self, s_entry_t *e, int64_t rev)
{
    kvtier_TierInfo info = e->info;
    info.up = false;
    e->used = false;
    s_report(self, false, rev, &info);
}

/* Applies the current record of NAME (value NULL: absent) and reports any change. */
static void s_apply(self_t *self, const char *name, const uint8_t *value, size_t len, int64_t rev)
{
    s_entry_t *e = s_find(self, name);
    if (!value) {
        if (e)
            s_remove(self, e, rev);
        return;
    }
    if (e && e->len == len && memcmp(e->value, value, len) == 0)
        return; /* rewritten unchanged */
    kvtier_TierInfo info;
    char why[160] = "";
    int rc = len > COORD_TIER_VALUE_MAX
                 ? -EMSGSIZE
                 : coord_tier_value_decode(value, len, &info, why, sizeof why);
    if (rc == 0 && strcmp(info.name, name) != 0) {
        snprintf(why, sizeof why, "record names \"%s\"", info.name);
        rc = -EBADMSG;
    }
    if (rc < 0) {
        bus_warn(S_COMP, "%s%s: bad tier record (%s): treated as absent", self->prefix, name,
                 rc == -EMSGSIZE ? "too large" : why);
        if (e)
            s_remove(self, e, rev);
        return;
    }
    if (!e) {
        for (size_t i = 0; i < COORD_MEMBERSHIP_MAX && !e; i++)
            if (!self->table[i].used)
                e = &self->table[i];
        if (!e) {
            bus_warn(S_COMP, "%s%s: more than %d tiers registered: ignored", self->prefix, name,
                     COORD_MEMBERSHIP_MAX);
            return;
        }
        e->used = true;
        snprintf(e->name, sizeof e->name, "%s", name);
    }
    memcpy(e->value, value, len);
    e->len = len;
    e->info = info;
    s_report(self, true, rev, &info);
}

/* --- retry --- */

static int s_relist(self_t *self);

static int s_on_retry(zloop_t *loop, int timer_id, void *arg)
{
    (void)loop;
    (void)timer_id;
    self_t *self = arg;
    self->retry_timer = -1;
    s_relist(self);
    return 0;
}

static void s_schedule_retry(self_t *self)
{
    if (self->retry_timer >= 0)
        return;
    self->retry_timer = zloop_timer(self->loop, (size_t)self->backoff_ms, 1, s_on_retry, self);
    self->backoff_ms =
        self->backoff_ms * 2 > S_BACKOFF_MAX_MS ? S_BACKOFF_MAX_MS : self->backoff_ms * 2;
}

/* --- watch --- */

static int s_on_watch_event(const coord_etcd_event_t *ev, void *arg)
{
    const s_watch_ctx_t *ctx = arg;
    bool put = ev->type == COORD_ETCD_EVENT_PUT;
    zsock_send(ctx->push, S_INBOX_PIC, put ? "PUT" : "DEL", ctx->gen, 0,
               (uint64_t)ev->kv.mod_revision, ev->kv.key, put ? ev->kv.value : NULL,
               put ? ev->kv.value_len : 0);
    return 0;
}

static void s_on_watch_end(const coord_etcd_watch_end_t *end, void *arg)
{
    const s_watch_ctx_t *ctx = arg;
    zsock_send(ctx->push, S_INBOX_PIC, "END", ctx->gen, end->err, (uint64_t)end->last_revision,
               end->message ? end->message : "", NULL, (size_t)0);
}

static void s_watch_stop(self_t *self)
{
    coord_etcd_watch_destroy(&self->watch);
    zsock_destroy(&self->wctx.push);
}

static int s_watch_start(self_t *self, int64_t from_rev)
{
    self->wctx.push = zsock_new_push(self->inbox_ep);
    if (!self->wctx.push)
        return -ENOMEM;
    zsock_set_linger(self->wctx.push, 0);
    self->wctx.gen = ++self->watch_gen;
    coord_etcd_watch_spec_t spec = {.key = self->prefix,
                                    .prefix = true,
                                    .start_revision = from_rev,
                                    .on_event = s_on_watch_event,
                                    .on_end = s_on_watch_end,
                                    .arg = &self->wctx};
    self->watch = coord_etcd_watch_new(&self->ecfg, &spec);
    if (!self->watch) {
        zsock_destroy(&self->wctx.push);
        return -ENOMEM;
    }
    return 0;
}

/* --- list --- */

static int s_on_listed(const coord_etcd_kv_t *kv, void *arg)
{
    self_t *self = arg;
    snprintf(self->last_key, sizeof self->last_key, "%s", kv->key);
    const char *name = s_key_name(self, kv->key, kv->key_len);
    if (!name)
        return 0;
    if (self->n_seen == COORD_MEMBERSHIP_MAX) {
        self->seen_overflow = true;
        return 0;
    }
    s_entry_t *s = &self->seen[self->n_seen];
    snprintf(s->name, sizeof s->name, "%s", name);
    /* An oversized record is kept as "too large" (len > max, bytes cut). */
    s->len = kv->value_len;
    memcpy(s->value, kv->value,
           kv->value_len < COORD_TIER_VALUE_MAX ? kv->value_len : COORD_TIER_VALUE_MAX);
    self->n_seen++;
    return 0;
}

/* Lists the prefix (consistent pages at one revision), reports the difference
 * with the table, and watches from the revision after the list. */
static int s_relist(self_t *self)
{
    s_watch_stop(self);
    self->n_seen = 0;
    self->seen_overflow = false;
    coord_etcd_range_info_t info = {0};
    coord_etcd_range_opts_t opts = {0};
    char after[COORD_ETCD_KEY_MAX];
    int64_t rev = 0;
    self->last_key[0] = '\0';
    int rc, pages = 0;
    do {
        rc = coord_etcd_range(self->etcd, self->prefix, &opts, s_on_listed, self, &info);
        if (rc < 0)
            break;
        rev = info.revision;
        opts.revision = rev;
        snprintf(after, sizeof after, "%s", self->last_key);
        opts.after_key = after;
    } while (info.more && !self->seen_overflow && info.count > 0 && ++pages < S_MAX_PAGES);
    if (rc < 0) {
        bus_warn(S_COMP, "listing %s: %s", self->prefix, coord_etcd_last_error(self->etcd));
        s_schedule_retry(self);
        return rc;
    }
    if (self->seen_overflow)
        bus_warn(S_COMP, "more than %d keys under %s: the rest are ignored", COORD_MEMBERSHIP_MAX,
                 self->prefix);
    for (size_t i = 0; i < COORD_MEMBERSHIP_MAX; i++) {
        s_entry_t *e = &self->table[i];
        bool found = false;
        for (size_t j = 0; e->used && j < self->n_seen && !found; j++)
            found = strcmp(self->seen[j].name, e->name) == 0;
        if (e->used && !found)
            s_remove(self, e, rev);
    }
    for (size_t j = 0; j < self->n_seen; j++)
        s_apply(self, self->seen[j].name, self->seen[j].value, self->seen[j].len, rev);
    self->backoff_ms = self->retry_ms;
    if (s_watch_start(self, rev + 1) < 0)
        s_schedule_retry(self);
    return 0;
}

/* --- sockets --- */

static int s_on_inbox(zloop_t *loop, zsock_t *sock, void *arg)
{
    (void)loop;
    self_t *self = arg;
    char *cmd = NULL, *key = NULL;
    uint64_t gen = 0, rev = 0;
    int err = 0;
    byte *value = NULL;
    size_t len = 0;
    if (zsock_recv(sock, S_INBOX_PIC, &cmd, &gen, &err, &rev, &key, &value, &len) < 0 || !cmd ||
        !key || gen != self->watch_gen)
        goto out;
    if (streq(cmd, "END")) {
        if (err != 0)
            bus_warn(S_COMP, "watch ended: %s; listing again", key);
        s_relist(self);
        goto out;
    }
    const char *name = s_key_name(self, key, strlen(key));
    if (!name)
        goto out;
    if (streq(cmd, "PUT"))
        s_apply(self, name, value ? value : (const uint8_t *)"", len, (int64_t)rev);
    else if (streq(cmd, "DEL"))
        s_apply(self, name, NULL, 0, (int64_t)rev);
out:
    zstr_free(&cmd);
    zstr_free(&key);
    free(value);
    return 0;
}

static int s_on_pipe(zloop_t *loop, zsock_t *sock, void *arg)
{
    (void)loop;
    (void)arg;
    char *cmd = zstr_recv(sock);
    int rc = !cmd || streq(cmd, "$TERM") ? -1 : 0;
    zstr_free(&cmd);
    return rc;
}

/* SIGINT/SIGTERM go to the process main (which stops the actors): a signal
 * landing here would only cut a poll short (zloop ends on EINTR). Threads this
 * actor starts inherit the mask. */
static void s_actor(zsock_t *pipe, void *arg)
{
    self_t *self = arg;
    coord_proc_block_signals(true);
    static atomic_uint counter;
    self->pipe = pipe;
    self->retry_timer = -1;
    self->backoff_ms = self->retry_ms;
    snprintf(self->inbox_ep, sizeof self->inbox_ep, "inproc://kvt-membership-%u-%p",
             atomic_fetch_add(&counter, 1), (void *)self);
    self->inbox = zsock_new_pull(self->inbox_ep);
    self->loop = zloop_new();
    self->etcd = coord_etcd_new(&self->ecfg);
    bool ok = self->inbox && self->loop && self->etcd &&
              zloop_reader(self->loop, pipe, s_on_pipe, self) == 0 &&
              zloop_reader(self->loop, self->inbox, s_on_inbox, self) == 0;
    if (!ok)
        bus_error(S_COMP, "cannot start: %s",
                  !self->inbox || !self->loop
                      ? "no inbox socket or loop"
                      : "no etcd handle (an etcd endpoint is empty, or curl could not start)");
    if (bus_actor_ready(pipe, ok) == 0) {
        zloop_set_nonstop(self->loop, true); /* stop on $TERM only: the owner decides */
        s_relist(self);
        zloop_start(self->loop);
    }
    s_watch_stop(self);
    coord_etcd_destroy(&self->etcd);
    zloop_destroy(&self->loop);
    zsock_destroy(&self->inbox);
    if (ok) /* a failed start leaves self to coord_membership_new */
        free(self);
}

zactor_t *coord_membership_new(const coord_membership_config_t *cfg)
{
    if (!cfg || !cfg->cluster || cfg->n_etcd == 0 || cfg->n_etcd > COORD_ETCD_MAX_ENDPOINTS)
        return NULL;
    self_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    for (size_t i = 0; i < cfg->n_etcd; i++) {
        if (!cfg->etcd_endpoints[i] || strlen(cfg->etcd_endpoints[i]) >= COORD_ETCD_ENDPOINT_MAX)
            goto out_free;
        snprintf(self->eps[i], sizeof self->eps[i], "%s", cfg->etcd_endpoints[i]);
        self->epp[i] = self->eps[i];
    }
    if (coord_cluster_key(self->prefix, sizeof self->prefix, cfg->cluster, "tiers/") < 0)
        goto out_free;
    self->prefix_len = strlen(self->prefix);
    int call_ms = cfg->etcd_timeout_ms > 0 ? cfg->etcd_timeout_ms : 2000;
    self->ecfg = (coord_etcd_config_t){.endpoints = self->epp,
                                       .n_endpoints = cfg->n_etcd,
                                       .timeout_ms = call_ms,
                                       .range_limit = COORD_MEMBERSHIP_MAX};
    self->retry_ms = cfg->retry_ms > 0 ? cfg->retry_ms : 100;
    zactor_t *actor = bus_actor_new(s_actor, self);
    if (!actor)
        goto out_free; /* the actor has ended, or never ran */
    return actor;
out_free:
    free(self);
    return NULL;
}

void coord_membership_destroy(zactor_t **pa)
{
    zactor_destroy(pa);
}

int coord_membership_recv(zactor_t *membership, coord_tier_change_t *out)
{
    char *kind = NULL;
    uint64_t rev = 0;
    byte *buf = NULL;
    size_t len = 0;
    int rc = -1;
    memset(out, 0, sizeof *out);
    if (zsock_recv(membership, S_PIPE_PIC, &kind, &rev, &buf, &len) < 0 || !kind || !buf)
        goto out;
    pb_istream_t is = pb_istream_from_buffer(buf, len);
    if ((!streq(kind, "UP") && !streq(kind, "DOWN")) ||
        !pb_decode(&is, kvtier_TierInfo_fields, &out->tier))
        goto out;
    out->up = streq(kind, "UP");
    out->revision = (int64_t)rev;
    rc = 0;
out:
    zstr_free(&kind);
    free(buf);
    return rc;
}
