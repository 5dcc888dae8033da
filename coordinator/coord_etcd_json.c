/* coord_etcd_json.c — decoding of etcd JSON-gateway answers and watch-stream lines.
 * Pure functions over jansson trees and caller buffers: no I/O, no globals.
 * Never trusts the input: every field is type-checked, every number range-checked,
 * every decoded byte bounded by the caller's scratch limit. */
#include "coord_etcd_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord_base64.h"

int coord_scratch_reserve(coord_scratch_t *s, size_t n)
{
    if (n <= s->cap)
        return 0;
    if (n > s->max)
        return -EMSGSIZE;
    size_t cap = s->cap ? s->cap : 256;
    while (cap < n)
        cap = cap > s->max / 2 ? s->max : cap * 2;
    uint8_t *b = realloc(s->buf, cap);
    if (!b)
        return -ENOMEM;
    s->buf = b;
    s->cap = cap;
    return 0;
}

void coord_scratch_free(coord_scratch_t *s)
{
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
}

int coord_json_parse_int64(const char *s, size_t n, int64_t *out)
{
    if (!s || n == 0 || n > 20)
        return -EBADMSG;
    size_t i = 0;
    bool neg = false;
    if (s[0] == '-') {
        neg = true;
        i = 1;
        if (n == 1)
            return -EBADMSG;
    }
    if (s[i] == '0' && n - i > 1)
        return -EBADMSG;
    /* Accumulate as a negative number: INT64_MIN has no positive counterpart. */
    int64_t v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EBADMSG;
        int d = s[i] - '0';
        if (v < (INT64_MIN + d) / 10)
            return -EBADMSG;
        v = v * 10 - d;
    }
    if (!neg) {
        if (v == INT64_MIN)
            return -EBADMSG;
        v = -v;
    }
    *out = v;
    return 0;
}

int coord_json_int64(const json_t *obj, const char *name, int64_t *out)
{
    const json_t *v = json_object_get(obj, name);
    if (!v || json_is_null(v)) {
        *out = 0;
        return 0;
    }
    if (json_is_string(v))
        return coord_json_parse_int64(json_string_value(v), json_string_length(v), out);
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return 0;
    }
    return -EBADMSG;
}

int coord_json_bool(const json_t *obj, const char *name, bool *out)
{
    const json_t *v = json_object_get(obj, name);
    if (!v || json_is_null(v)) {
        *out = false;
        return 0;
    }
    if (!json_is_boolean(v))
        return -EBADMSG;
    *out = json_is_true(v);
    return 0;
}

int coord_json_load(const char *buf, size_t len, json_t **out, char *err, size_t err_cap)
{
    json_error_t je;
    *out = NULL;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        if (err)
            snprintf(err, err_cap, "malformed JSON answer: %s (at byte %d)", je.text, je.position);
        return -EBADMSG;
    }
    if (!json_is_object(root)) {
        if (err)
            snprintf(err, err_cap, "malformed answer: not a JSON object");
        json_decref(root);
        return -EBADMSG;
    }
    *out = root;
    return 0;
}

int coord_grpc_to_errno(int64_t code)
{
    switch (code) {
    case 1: /* CANCELLED */
        return -ECANCELED;
    case 3: /* INVALID_ARGUMENT */
        return -EINVAL;
    case 4: /* DEADLINE_EXCEEDED */
        return -ETIMEDOUT;
    case 5: /* NOT_FOUND */
        return -ENOENT;
    case 6: /* ALREADY_EXISTS */
        return -EEXIST;
    case 7:  /* PERMISSION_DENIED */
    case 16: /* UNAUTHENTICATED */
        return -EACCES;
    case 8: /* RESOURCE_EXHAUSTED (no space, too many requests) */
        return -ENOSPC;
    case 9: /* FAILED_PRECONDITION */
        return -EPERM;
    case 10: /* ABORTED */
    case 14: /* UNAVAILABLE (no leader, leader changed) */
        return -EAGAIN;
    case 11: /* OUT_OF_RANGE (compacted / future revision) */
        return -ERANGE;
    case 12: /* UNIMPLEMENTED */
        return -ENOSYS;
    default: /* UNKNOWN, INTERNAL, DATA_LOSS, a code we do not know, or 0 with an error */
        return -EIO;
    }
}

static void s_copy_msg(char *msg, size_t cap, const json_t *s, const char *fallback)
{
    if (!msg || cap == 0)
        return;
    if (json_is_string(s))
        snprintf(msg, cap, "%s", json_string_value(s));
    else
        snprintf(msg, cap, "%s", fallback);
}

int coord_json_error(const json_t *root, char *msg, size_t msg_cap)
{
    const json_t *err = json_object_get(root, "error");
    if (!err)
        return 0;
    int64_t code = 0;
    if (json_is_string(err)) {
        const json_t *m = json_object_get(root, "message");
        s_copy_msg(msg, msg_cap, json_is_string(m) ? m : err, "");
        if (coord_json_int64(root, "code", &code) < 0)
            return -EBADMSG;
        return coord_grpc_to_errno(code);
    }
    if (json_is_object(err)) {
        s_copy_msg(msg, msg_cap, json_object_get(err, "message"), "error without a message");
        if (coord_json_int64(err, "grpc_code", &code) < 0)
            return -EBADMSG;
        return coord_grpc_to_errno(code);
    }
    s_copy_msg(msg, msg_cap, NULL, "malformed error member");
    return -EBADMSG;
}

/* Decodes the base64 string member `name` (missing → empty) into dst. */
static int s_b64_member(const json_t *obj, const char *name, bool required, uint8_t *dst,
                        size_t cap, size_t *len)
{
    const json_t *v = json_object_get(obj, name);
    *len = 0;
    if (!v || json_is_null(v))
        return required ? -EBADMSG : 0;
    if (!json_is_string(v))
        return -EBADMSG;
    int rc = coord_base64_decode(json_string_value(v), json_string_length(v), dst, cap, len);
    return rc < 0 ? -EBADMSG : 0;
}

static size_t s_b64_need(const json_t *obj, const char *name)
{
    const json_t *v = json_object_get(obj, name);
    return json_is_string(v) ? coord_base64_decoded_max(json_string_length(v)) : 0;
}

int coord_json_kv(const json_t *obj, coord_scratch_t *s, coord_etcd_kv_t *kv)
{
    if (!json_is_object(obj))
        return -EBADMSG;
    size_t kmax = s_b64_need(obj, "key"), vmax = s_b64_need(obj, "value");
    int rc = coord_scratch_reserve(s, kmax + 1 + vmax);
    if (rc < 0)
        return rc;
    size_t klen = 0, vlen = 0;
    if (s_b64_member(obj, "key", true, s->buf, kmax, &klen) < 0 || klen == 0)
        return -EBADMSG;
    s->buf[klen] = '\0';
    uint8_t *vbuf = s->buf + klen + 1;
    if (s_b64_member(obj, "value", false, vbuf, vmax, &vlen) < 0)
        return -EBADMSG;
    memset(kv, 0, sizeof *kv);
    kv->key = (const char *)s->buf;
    kv->key_len = klen;
    kv->value = vbuf;
    kv->value_len = vlen;
    if (coord_json_int64(obj, "create_revision", &kv->create_revision) < 0 ||
        coord_json_int64(obj, "mod_revision", &kv->mod_revision) < 0 ||
        coord_json_int64(obj, "version", &kv->version) < 0 ||
        coord_json_int64(obj, "lease", &kv->lease) < 0)
        return -EBADMSG;
    if (kv->create_revision < 0 || kv->mod_revision < 0 || kv->version < 0 || kv->lease < 0)
        return -EBADMSG;
    return 0;
}

int coord_json_header_revision(const json_t *root, int64_t *rev)
{
    const json_t *h = json_object_get(root, "header");
    *rev = 0;
    if (!h)
        return 0;
    if (!json_is_object(h))
        return -EBADMSG;
    if (coord_json_int64(h, "revision", rev) < 0 || *rev < 0)
        return -EBADMSG;
    return 0;
}

int coord_json_lease_grant(const json_t *root, int64_t *id, int64_t *ttl)
{
    int64_t i = 0, t = 0;
    if (coord_json_int64(root, "ID", &i) < 0 || coord_json_int64(root, "TTL", &t) < 0)
        return -EBADMSG;
    if (i <= 0 || t <= 0)
        return -EBADMSG;
    *id = i;
    *ttl = t;
    return 0;
}

int coord_json_lease_keepalive(const json_t *root, int64_t *ttl)
{
    const json_t *r = json_object_get(root, "result");
    if (r && !json_is_object(r))
        return -EBADMSG;
    if (!r)
        r = root;
    int64_t t = 0;
    if (coord_json_int64(r, "TTL", &t) < 0)
        return -EBADMSG;
    if (t <= 0)
        return -ENOENT;
    *ttl = t;
    return 0;
}

int coord_json_range(const json_t *root, coord_scratch_t *s, coord_etcd_kv_fn fn, void *arg,
                     size_t *count, bool *more, int64_t *revision)
{
    int64_t rev = 0;
    bool m = false;
    if (coord_json_header_revision(root, &rev) < 0 || coord_json_bool(root, "more", &m) < 0)
        return -EBADMSG;
    const json_t *kvs = json_object_get(root, "kvs");
    if (kvs && !json_is_array(kvs))
        return -EBADMSG;
    if (count)
        *count = 0;
    if (more)
        *more = m;
    if (revision)
        *revision = rev;
    size_t n = kvs ? json_array_size(kvs) : 0;
    for (size_t i = 0; i < n; i++) {
        coord_etcd_kv_t kv;
        int rc = coord_json_kv(json_array_get(kvs, i), s, &kv);
        if (rc < 0)
            return rc;
        if (count)
            (*count)++;
        rc = fn ? fn(&kv, arg) : 0;
        if (rc != 0) {
            if (more)
                *more = m || i + 1 < n;
            return rc;
        }
    }
    return 0;
}

int coord_json_deleted(const json_t *root, int64_t *deleted)
{
    int64_t d = 0;
    if (coord_json_int64(root, "deleted", &d) < 0 || d < 0)
        return -EBADMSG;
    *deleted = d;
    return 0;
}

int coord_json_txn_create(const json_t *root, coord_scratch_t *s, bool *won, coord_etcd_kv_t *kv)
{
    bool ok = false;
    if (coord_json_bool(root, "succeeded", &ok) < 0)
        return -EBADMSG;
    const json_t *resps = json_object_get(root, "responses");
    size_t n = json_is_array(resps) ? json_array_size(resps) : 0;
    if (n == 0)
        return -EBADMSG;
    const json_t *last = json_array_get(resps, n - 1);
    const json_t *range = json_is_object(last) ? json_object_get(last, "response_range") : NULL;
    if (!json_is_object(range))
        return -EBADMSG;
    const json_t *kvs = json_object_get(range, "kvs");
    if (!json_is_array(kvs) || json_array_size(kvs) == 0)
        return -EBADMSG;
    int rc = coord_json_kv(json_array_get(kvs, 0), s, kv);
    if (rc < 0)
        return rc;
    *won = ok;
    return 0;
}

int coord_json_watch_msg(const json_t *root, coord_watch_msg_t *m)
{
    memset(m, 0, sizeof *m);
    const json_t *r = json_object_get(root, "result");
    if (!r) {
        int rc = coord_json_error(root, m->reason, sizeof m->reason);
        if (rc == 0) {
            snprintf(m->reason, sizeof m->reason, "watch line has neither result nor error");
            return -EBADMSG;
        }
        return rc;
    }
    if (!json_is_object(r))
        return -EBADMSG;
    if (coord_json_header_revision(r, &m->header_revision) < 0 ||
        coord_json_bool(r, "created", &m->created) < 0 ||
        coord_json_bool(r, "canceled", &m->canceled) < 0 ||
        coord_json_int64(r, "compact_revision", &m->compact_revision) < 0 ||
        m->compact_revision < 0)
        return -EBADMSG;
    const json_t *reason = json_object_get(r, "cancel_reason");
    if (reason && !json_is_string(reason))
        return -EBADMSG;
    if (reason)
        snprintf(m->reason, sizeof m->reason, "%s", json_string_value(reason));
    const json_t *ev = json_object_get(r, "events");
    if (ev && !json_is_array(ev))
        return -EBADMSG;
    m->events = ev;
    return 0;
}

int coord_json_event(const json_t *obj, coord_scratch_t *s, coord_etcd_event_t *ev)
{
    if (!json_is_object(obj))
        return -EBADMSG;
    const json_t *t = json_object_get(obj, "type");
    if (!t || json_is_null(t) || (json_is_string(t) && strcmp(json_string_value(t), "PUT") == 0) ||
        (json_is_integer(t) && json_integer_value(t) == 0))
        ev->type = COORD_ETCD_EVENT_PUT;
    else if ((json_is_string(t) && strcmp(json_string_value(t), "DELETE") == 0) ||
             (json_is_integer(t) && json_integer_value(t) == 1))
        ev->type = COORD_ETCD_EVENT_DELETE;
    else
        return -EBADMSG;
    return coord_json_kv(json_object_get(obj, "kv"), s, &ev->kv);
}

int coord_linebuf_init(coord_linebuf_t *lb, size_t cap)
{
    lb->buf = malloc(cap + 1);
    lb->len = 0;
    lb->cap = lb->buf ? cap : 0;
    return lb->buf ? 0 : -ENOMEM;
}

void coord_linebuf_free(coord_linebuf_t *lb)
{
    free(lb->buf);
    lb->buf = NULL;
    lb->len = lb->cap = 0;
}

static int s_line_out(coord_linebuf_t *lb, coord_line_fn fn, void *arg)
{
    size_t n = lb->len;
    lb->len = 0;
    if (n > 0 && lb->buf[n - 1] == '\r')
        n--;
    if (n == 0)
        return 0;
    lb->buf[n] = '\0';
    return fn(lb->buf, n, arg);
}

int coord_linebuf_feed(coord_linebuf_t *lb, const char *data, size_t n, coord_line_fn fn, void *arg)
{
    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        size_t seg = nl ? (size_t)(nl - data) : n;
        if (seg > lb->cap - lb->len)
            return -EMSGSIZE;
        memcpy(lb->buf + lb->len, data, seg);
        lb->len += seg;
        if (!nl)
            return 0;
        data += seg + 1;
        n -= seg + 1;
        int rc = s_line_out(lb, fn, arg);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int coord_linebuf_flush(coord_linebuf_t *lb, coord_line_fn fn, void *arg)
{
    return s_line_out(lb, fn, arg);
}
