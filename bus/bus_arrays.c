/* bus_arrays.c — nanopb callbacks for the long arrays of wire messages.
 * Decoders write into caller arrays and stop at min(cap, protocol bound); they
 * never allocate and never trust a length from the wire. Encoders write packed
 * scalars (proto3 default) and one field per key, so any protobuf reader agrees.
 * Must never be handed network-derived capacities: `cap` is the caller's own. */
#include "bus_arrays.h"

#include <inttypes.h>
#include <pb_decode.h>
#include <pb_encode.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const s_role_names[BUS_ROLE_COUNT] = {
    [BUS_ROLE_KEYS] = "keys",   [BUS_ROLE_TIER_IDS] = "tier_ids",
    [BUS_ROLE_SLOTS] = "slots", [BUS_ROLE_DST_SLOTS] = "dst_slots",
    [BUS_ROLE_SIZES] = "sizes", [BUS_ROLE_CHECKSUMS] = "checksums",
    [BUS_ROLE_MASK] = "mask",   [BUS_ROLE_PAYLOAD] = "payload",
};

const char *bus_role_name(bus_role_t role)
{
    if ((unsigned)role >= BUS_ROLE_COUNT)
        return "?";
    return s_role_names[role];
}

static uint32_t s_cap(uint32_t cap, const void *storage, uint32_t limit)
{
    if (!storage)
        return 0;
    return cap < limit ? cap : limit;
}

/* Records the first failure only: later callbacks must not hide the cause. */
static void s_fault(bus_array_error_t *err, bus_array_fault_t fault, bus_role_t role,
                    uint32_t index, uint32_t cap, uint64_t value)
{
    if (!err || err->fault != BUS_ARRAY_OK)
        return;
    err->fault = fault;
    err->role = role;
    err->index = index;
    err->cap = cap;
    err->value = value;
}

/* ---- decoders: one element per call (nanopb loops over packed data) ---- */

static bool s_keys_decode(pb_istream_t *stream, bus_keys_t *k, bus_array_error_t *err,
                          bus_role_t role)
{
    uint32_t cap = s_cap(k->cap, k->keys, BUS_MAX_ARRAY);
    if (stream->bytes_left != BUS_KEY_LEN) {
        s_fault(err, BUS_ARRAY_KEY_LENGTH, role, k->n, cap, stream->bytes_left);
        PB_RETURN_ERROR(stream, "block key is not 16 bytes");
    }
    if (k->n >= cap) {
        s_fault(err, BUS_ARRAY_OVERFLOW, role, k->n, cap, 0);
        PB_RETURN_ERROR(stream, "too many keys");
    }
    if (!pb_read(stream, k->keys[k->n], BUS_KEY_LEN)) {
        s_fault(err, BUS_ARRAY_MALFORMED, role, k->n, cap, 0);
        return false;
    }
    k->n++;
    return true;
}

static bool s_u64_decode(pb_istream_t *stream, const pb_field_t *field, bus_u64s_t *a,
                         bus_array_error_t *err, bus_role_t role)
{
    uint32_t cap = s_cap(a->cap, a->v, BUS_MAX_ARRAY);
    if (a->n >= cap) {
        s_fault(err, BUS_ARRAY_OVERFLOW, role, a->n, cap, 0);
        PB_RETURN_ERROR(stream, "too many elements");
    }
    uint64_t v = 0;
    bool ok = PB_LTYPE(field->type) == PB_LTYPE_FIXED64 ? pb_decode_fixed64(stream, &v)
                                                        : pb_decode_varint(stream, &v);
    if (!ok) {
        s_fault(err, BUS_ARRAY_MALFORMED, role, a->n, cap, 0);
        return false;
    }
    a->v[a->n++] = v;
    return true;
}

static bool s_u32_decode(pb_istream_t *stream, bus_u32s_t *a, bus_array_error_t *err,
                         bus_role_t role)
{
    uint32_t cap = s_cap(a->cap, a->v, BUS_MAX_ARRAY);
    if (a->n >= cap) {
        s_fault(err, BUS_ARRAY_OVERFLOW, role, a->n, cap, 0);
        PB_RETURN_ERROR(stream, "too many elements");
    }
    uint32_t v = 0;
    if (!pb_decode_varint32(stream, &v)) {
        s_fault(err, BUS_ARRAY_MALFORMED, role, a->n, cap, 0);
        return false;
    }
    a->v[a->n++] = v;
    return true;
}

static bool s_bools_decode(pb_istream_t *stream, bus_bools_t *a, bus_array_error_t *err,
                           bus_role_t role)
{
    uint32_t cap = s_cap(a->cap, a->v, BUS_MAX_ARRAY);
    if (a->n >= cap) {
        s_fault(err, BUS_ARRAY_OVERFLOW, role, a->n, cap, 0);
        PB_RETURN_ERROR(stream, "too many elements");
    }
    bool v = false;
    if (!pb_decode_bool(stream, &v)) {
        s_fault(err, BUS_ARRAY_MALFORMED, role, a->n, cap, 0);
        return false;
    }
    a->v[a->n++] = v;
    return true;
}

/* Bytes fields are last-one-wins in protobuf: a repeat replaces the value. */
static bool s_blob_decode(pb_istream_t *stream, bus_blob_t *b, bus_array_error_t *err,
                          bus_role_t role)
{
    uint32_t cap = s_cap(b->cap, b->data, BUS_MAX_BLOB);
    size_t len = stream->bytes_left;
    if (len > cap) {
        s_fault(err, BUS_ARRAY_OVERFLOW, role, 0, cap, len);
        PB_RETURN_ERROR(stream, "payload too large");
    }
    if (!pb_read(stream, b->data, len)) {
        s_fault(err, BUS_ARRAY_MALFORMED, role, 0, cap, len);
        return false;
    }
    b->len = (uint32_t)len;
    return true;
}

/* ---- encoders ---- */

static size_t s_varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static bool s_check_encode(pb_ostream_t *stream, uint32_t n, const void *storage,
                           bus_array_error_t *err, bus_role_t role)
{
    if (n > BUS_MAX_ARRAY) {
        s_fault(err, BUS_ARRAY_OVERFLOW, role, BUS_MAX_ARRAY, BUS_MAX_ARRAY, n);
        PB_RETURN_ERROR(stream, "array over the protocol bound");
    }
    if (n > 0 && !storage) {
        s_fault(err, BUS_ARRAY_MISSING, role, 0, 0, n);
        PB_RETURN_ERROR(stream, "array without storage");
    }
    return true;
}

static bool s_keys_encode(pb_ostream_t *stream, const pb_field_t *field, const bus_keys_t *k,
                          bus_array_error_t *err, bus_role_t role)
{
    if (!s_check_encode(stream, k->n, k->keys, err, role))
        return false;
    for (uint32_t i = 0; i < k->n; i++) {
        if (!pb_encode_tag_for_field(stream, field) ||
            !pb_encode_string(stream, k->keys[i], BUS_KEY_LEN))
            return false;
    }
    return true;
}

static bool s_u64_encode(pb_ostream_t *stream, const pb_field_t *field, const bus_u64s_t *a,
                         bus_array_error_t *err, bus_role_t role)
{
    if (!s_check_encode(stream, a->n, a->v, err, role))
        return false;
    if (a->n == 0)
        return true;
    bool fixed = PB_LTYPE(field->type) == PB_LTYPE_FIXED64;
    size_t size = 0;
    if (fixed) {
        size = (size_t)a->n * 8u;
    } else {
        for (uint32_t i = 0; i < a->n; i++)
            size += s_varint_len(a->v[i]);
    }
    if (!pb_encode_tag(stream, PB_WT_STRING, field->tag) || !pb_encode_varint(stream, size))
        return false;
    for (uint32_t i = 0; i < a->n; i++) {
        bool ok = fixed ? pb_encode_fixed64(stream, &a->v[i]) : pb_encode_varint(stream, a->v[i]);
        if (!ok)
            return false;
    }
    return true;
}

static bool s_u32_encode(pb_ostream_t *stream, const pb_field_t *field, const bus_u32s_t *a,
                         bus_array_error_t *err, bus_role_t role)
{
    if (!s_check_encode(stream, a->n, a->v, err, role))
        return false;
    if (a->n == 0)
        return true;
    size_t size = 0;
    for (uint32_t i = 0; i < a->n; i++)
        size += s_varint_len(a->v[i]);
    if (!pb_encode_tag(stream, PB_WT_STRING, field->tag) || !pb_encode_varint(stream, size))
        return false;
    for (uint32_t i = 0; i < a->n; i++)
        if (!pb_encode_varint(stream, a->v[i]))
            return false;
    return true;
}

static bool s_bools_encode(pb_ostream_t *stream, const pb_field_t *field, const bus_bools_t *a,
                           bus_array_error_t *err, bus_role_t role)
{
    if (!s_check_encode(stream, a->n, a->v, err, role))
        return false;
    if (a->n == 0)
        return true;
    if (!pb_encode_tag(stream, PB_WT_STRING, field->tag) || !pb_encode_varint(stream, a->n))
        return false;
    for (uint32_t i = 0; i < a->n; i++)
        if (!pb_encode_varint(stream, a->v[i] ? 1u : 0u))
            return false;
    return true;
}

static bool s_blob_encode(pb_ostream_t *stream, const pb_field_t *field, const bus_blob_t *b,
                          bus_array_error_t *err, bus_role_t role)
{
    if (b->len > BUS_MAX_BLOB) {
        s_fault(err, BUS_ARRAY_OVERFLOW, role, 0, BUS_MAX_BLOB, b->len);
        PB_RETURN_ERROR(stream, "payload over the protocol bound");
    }
    if (b->len > 0 && !b->data) {
        s_fault(err, BUS_ARRAY_MISSING, role, 0, 0, b->len);
        PB_RETURN_ERROR(stream, "payload without storage");
    }
    if (b->len == 0)
        return true;
    return pb_encode_tag_for_field(stream, field) && pb_encode_string(stream, b->data, b->len);
}

/* ---- one callback per role: the role says which member of bus_arrays_t ---- */

#define S_ROLE_CALLBACKS(member, role, kind)                                                       \
    static bool s_dec_##member(pb_istream_t *stream, const pb_field_t *field, void **arg)          \
    {                                                                                              \
        bus_arrays_t *a = *arg;                                                                    \
        (void)field;                                                                               \
        return S_DEC_##kind(stream, field, &a->member, &a->error, role);                           \
    }                                                                                              \
    static bool s_enc_##member(pb_ostream_t *stream, const pb_field_t *field, void *const *arg)    \
    {                                                                                              \
        bus_arrays_t *a = *arg;                                                                    \
        return s_##kind##_encode(stream, field, &a->member, &a->error, role);                      \
    }

#define S_DEC_keys(s, f, a, e, r) s_keys_decode(s, a, e, r)
#define S_DEC_u64(s, f, a, e, r) s_u64_decode(s, f, a, e, r)
#define S_DEC_u32(s, f, a, e, r) s_u32_decode(s, a, e, r)
#define S_DEC_bools(s, f, a, e, r) s_bools_decode(s, a, e, r)
#define S_DEC_blob(s, f, a, e, r) s_blob_decode(s, a, e, r)

S_ROLE_CALLBACKS(keys, BUS_ROLE_KEYS, keys)
S_ROLE_CALLBACKS(tier_ids, BUS_ROLE_TIER_IDS, u32)
S_ROLE_CALLBACKS(slots, BUS_ROLE_SLOTS, u64)
S_ROLE_CALLBACKS(dst_slots, BUS_ROLE_DST_SLOTS, u64)
S_ROLE_CALLBACKS(sizes, BUS_ROLE_SIZES, u64)
S_ROLE_CALLBACKS(checksums, BUS_ROLE_CHECKSUMS, u64)
S_ROLE_CALLBACKS(mask, BUS_ROLE_MASK, bools)
S_ROLE_CALLBACKS(payload, BUS_ROLE_PAYLOAD, blob)

typedef bool (*s_dec_fn)(pb_istream_t *, const pb_field_t *, void **);
typedef bool (*s_enc_fn)(pb_ostream_t *, const pb_field_t *, void *const *);

static const struct {
    s_dec_fn dec;
    s_enc_fn enc;
} s_roles[BUS_ROLE_COUNT] = {
    [BUS_ROLE_KEYS] = {s_dec_keys, s_enc_keys},
    [BUS_ROLE_TIER_IDS] = {s_dec_tier_ids, s_enc_tier_ids},
    [BUS_ROLE_SLOTS] = {s_dec_slots, s_enc_slots},
    [BUS_ROLE_DST_SLOTS] = {s_dec_dst_slots, s_enc_dst_slots},
    [BUS_ROLE_SIZES] = {s_dec_sizes, s_enc_sizes},
    [BUS_ROLE_CHECKSUMS] = {s_dec_checksums, s_enc_checksums},
    [BUS_ROLE_MASK] = {s_dec_mask, s_enc_mask},
    [BUS_ROLE_PAYLOAD] = {s_dec_payload, s_enc_payload},
};

static bool s_dec_refuse(pb_istream_t *stream, const pb_field_t *field, void **arg)
{
    (void)field;
    (void)arg;
    PB_RETURN_ERROR(stream, "array element but no storage given");
}

void bus_arrays_bind_encode(pb_callback_t *cb, bus_arrays_t *arr, bus_role_t role)
{
    cb->funcs.encode = (arr && (unsigned)role < BUS_ROLE_COUNT) ? s_roles[role].enc : NULL;
    cb->arg = arr;
}

void bus_arrays_bind_decode(pb_callback_t *cb, bus_arrays_t *arr, bus_role_t role)
{
    cb->funcs.decode = (arr && (unsigned)role < BUS_ROLE_COUNT) ? s_roles[role].dec : s_dec_refuse;
    cb->arg = arr;
}

/* ---- standalone keys (events) ---- */

static bool s_keys_plain_encode(pb_ostream_t *stream, const pb_field_t *field, void *const *arg)
{
    return s_keys_encode(stream, field, *arg, NULL, BUS_ROLE_KEYS);
}

static bool s_keys_sink_decode(pb_istream_t *stream, const pb_field_t *field, void **arg)
{
    bus_keys_sink_t *sink = *arg;
    (void)field;
    return s_keys_decode(stream, sink->keys, sink->err, BUS_ROLE_KEYS);
}

void bus_keys_bind_encode(pb_callback_t *cb, const bus_keys_t *keys)
{
    cb->funcs.encode = keys ? s_keys_plain_encode : NULL;
    cb->arg = (void *)keys;
}

void bus_keys_bind_decode(pb_callback_t *cb, bus_keys_sink_t *sink)
{
    cb->funcs.decode = sink ? s_keys_sink_decode : s_dec_refuse;
    cb->arg = sink;
}

/* ---- lifetime and helpers ---- */

bus_arrays_t *bus_arrays_new(uint32_t cap, uint32_t payload_cap)
{
    if (cap > BUS_MAX_ARRAY)
        cap = BUS_MAX_ARRAY;
    if (payload_cap > BUS_MAX_BLOB)
        payload_cap = BUS_MAX_BLOB;
    bus_arrays_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    size_t n = cap ? cap : 1;
    self->keys.keys = calloc(n, BUS_KEY_LEN);
    self->tier_ids.v = calloc(n, sizeof(uint32_t));
    self->slots.v = calloc(n, sizeof(uint64_t));
    self->dst_slots.v = calloc(n, sizeof(uint64_t));
    self->sizes.v = calloc(n, sizeof(uint64_t));
    self->checksums.v = calloc(n, sizeof(uint64_t));
    self->mask.v = calloc(n, sizeof(bool));
    self->payload.data = calloc(payload_cap ? payload_cap : 1, 1);
    if (!self->keys.keys || !self->tier_ids.v || !self->slots.v || !self->dst_slots.v ||
        !self->sizes.v || !self->checksums.v || !self->mask.v || !self->payload.data) {
        bus_arrays_destroy(&self);
        return NULL;
    }
    self->keys.cap = self->tier_ids.cap = self->slots.cap = self->dst_slots.cap = cap;
    self->sizes.cap = self->checksums.cap = self->mask.cap = cap;
    self->payload.cap = payload_cap;
    return self;
}

void bus_arrays_destroy(bus_arrays_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    bus_arrays_t *self = *self_p;
    free(self->keys.keys);
    free(self->tier_ids.v);
    free(self->slots.v);
    free(self->dst_slots.v);
    free(self->sizes.v);
    free(self->checksums.v);
    free(self->mask.v);
    free(self->payload.data);
    free(self);
    *self_p = NULL;
}

void bus_arrays_clear(bus_arrays_t *self)
{
    if (!self)
        return;
    self->keys.n = 0;
    self->tier_ids.n = 0;
    self->slots.n = 0;
    self->dst_slots.n = 0;
    self->sizes.n = 0;
    self->checksums.n = 0;
    self->mask.n = 0;
    self->payload.len = 0;
    self->error = (bus_array_error_t){0};
}

uint32_t bus_arrays_count(const bus_arrays_t *self, bus_role_t role)
{
    if (!self)
        return 0;
    switch (role) {
    case BUS_ROLE_KEYS:
        return self->keys.n;
    case BUS_ROLE_TIER_IDS:
        return self->tier_ids.n;
    case BUS_ROLE_SLOTS:
        return self->slots.n;
    case BUS_ROLE_DST_SLOTS:
        return self->dst_slots.n;
    case BUS_ROLE_SIZES:
        return self->sizes.n;
    case BUS_ROLE_CHECKSUMS:
        return self->checksums.n;
    case BUS_ROLE_MASK:
        return self->mask.n;
    case BUS_ROLE_PAYLOAD:
        return self->payload.len;
    default:
        return 0;
    }
}

const char *bus_arrays_error_text(const bus_arrays_t *self, const char *where, char *buf,
                                  size_t len)
{
    const bus_array_error_t *e = &self->error;
    if (!where)
        where = bus_role_name(e->role);
    switch (e->fault) {
    case BUS_ARRAY_OK:
        snprintf(buf, len, "%s: no array error", where);
        break;
    case BUS_ARRAY_OVERFLOW:
        if (e->role == BUS_ROLE_PAYLOAD)
            snprintf(buf, len, "%s: %" PRIu64 " bytes exceed the capacity of %u bytes", where,
                     e->value, e->cap);
        else if (e->value > 0)
            snprintf(buf, len, "%s: %" PRIu64 " elements exceed the protocol bound of %u", where,
                     e->value, e->cap);
        else
            snprintf(buf, len, "%s: more than %u elements (receiver capacity %u)", where, e->cap,
                     e->cap);
        break;
    case BUS_ARRAY_KEY_LENGTH:
        snprintf(buf, len, "%s[%u]: key is %" PRIu64 " bytes, a block key is exactly %d", where,
                 e->index, e->value, BUS_KEY_LEN);
        break;
    case BUS_ARRAY_MALFORMED:
        snprintf(buf, len, "%s[%u]: malformed element (truncated or wrong wire type)", where,
                 e->index);
        break;
    case BUS_ARRAY_MISSING:
        snprintf(buf, len, "%s: %" PRIu64 " elements declared but no storage pointer given", where,
                 e->value);
        break;
    }
    return buf;
}
