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
#include <string.h>

static const char *const s_role_names[BUS_ROLE_COUNT] = {
    [BUS_ROLE_KEYS] = "keys",           [BUS_ROLE_TIER_IDS] = "tier_ids",
    [BUS_ROLE_SLOTS] = "slots",         [BUS_ROLE_DST_SLOTS] = "dst_slots",
    [BUS_ROLE_SIZES] = "sizes",         [BUS_ROLE_CHECKSUMS] = "checksums",
    [BUS_ROLE_MASK] = "mask",           [BUS_ROLE_PAYLOAD] = "payload",
    [BUS_ROLE_TOKEN_IDS] = "token_ids",
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

/* ---- decoders ----
 * nanopb calls a decoder once per element of a repeated bytes field (keys) and,
 * for packed scalars, again and again while bytes of the field remain. Each
 * s_*_one function takes exactly one element through nanopb's own primitives:
 * it is the reference for every verdict (bounds, truncation, overlong varints).
 * Over memory (pb_istream_from_buffer, which is how frame 0 is decoded) the
 * scalar decoders first parse a run of elements in their common form straight
 * from the bytes, then leave any element that is not in that form to s_*_one. */

/* A stream over memory: nanopb's buffer reader is its callback and its state is
 * the address of the next unread byte (pb_istream_from_buffer). */
static bool s_over_memory(const pb_istream_t *stream)
{
    pb_istream_t probe = pb_istream_from_buffer(NULL, 0);
    return stream->callback == probe.callback && stream->state != NULL;
}

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

static bool s_u64_one(pb_istream_t *stream, bool fixed, bus_u64s_t *a, uint32_t cap,
                      bus_array_error_t *err, bus_role_t role)
{
    if (a->n >= cap) {
        s_fault(err, BUS_ARRAY_OVERFLOW, role, a->n, cap, 0);
        PB_RETURN_ERROR(stream, "too many elements");
    }
    uint64_t v = 0;
    bool ok = fixed ? pb_decode_fixed64(stream, &v) : pb_decode_varint(stream, &v);
    if (!ok) {
        s_fault(err, BUS_ARRAY_MALFORMED, role, a->n, cap, 0);
        return false;
    }
    a->v[a->n++] = v;
    return true;
}

static bool s_u32_one(pb_istream_t *stream, bus_u32s_t *a, uint32_t cap, bus_array_error_t *err,
                      bus_role_t role)
{
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

static bool s_bools_one(pb_istream_t *stream, bus_bools_t *a, uint32_t cap, bus_array_error_t *err,
                        bus_role_t role)
{
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

/* Common forms, which nanopb accepts with the same value: a varint of at most 5
 * bytes below 2^32 (varint32), at most 9 bytes (varint64, < 2^63), a one-byte
 * bool, 8 bytes of fixed64. Each returns the bytes used, 0 for "not common". */
static inline size_t s_peek_varint32(const pb_byte_t *p, size_t left, uint32_t *out)
{
    uint32_t v = 0;
    for (size_t i = 0; i < left && i < 5; i++) {
        if (i == 4) {
            if (p[4] > 0x0F)
                return 0;
            *out = v | (uint32_t)p[4] << 28;
            return 5;
        }
        v |= (uint32_t)(p[i] & 0x7F) << (7 * i);
        if (p[i] < 0x80) {
            *out = v;
            return i + 1;
        }
    }
    return 0;
}

static inline size_t s_peek_varint64(const pb_byte_t *p, size_t left, uint64_t *out)
{
    uint64_t v = 0;
    for (size_t i = 0; i < left && i < 9; i++) {
        v |= (uint64_t)(p[i] & 0x7F) << (7 * i);
        if (p[i] < 0x80) {
            *out = v;
            return i + 1;
        }
    }
    return 0;
}

static inline uint64_t s_load_le64(const pb_byte_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

typedef enum { S_VARINT32, S_VARINT64, S_FIXED64, S_BOOL } s_elem_t;

/* Parses common-form elements of one kind from a memory stream into dst[*n..],
 * stopping at the end of the field, at cap, or before an element that is not in
 * common form; advances the stream past what it parsed. */
static bool s_run(pb_istream_t *stream, s_elem_t kind, void *dst, uint32_t *n, uint32_t cap)
{
    const pb_byte_t *p = stream->state;
    size_t left = stream->bytes_left, pos = 0, used = 1;
    uint32_t i = *n;
    switch (kind) {
    case S_VARINT32: {
        uint32_t *v = dst;
        while (pos < left && i < cap && (used = s_peek_varint32(p + pos, left - pos, &v[i])) > 0) {
            pos += used;
            i++;
        }
        break;
    }
    case S_VARINT64: {
        uint64_t *v = dst;
        while (pos < left && i < cap && (used = s_peek_varint64(p + pos, left - pos, &v[i])) > 0) {
            pos += used;
            i++;
        }
        break;
    }
    case S_FIXED64: {
        uint64_t *v = dst;
        while (left - pos >= 8 && i < cap) {
            v[i++] = s_load_le64(p + pos);
            pos += 8;
        }
        break;
    }
    case S_BOOL: {
        bool *v = dst;
        while (pos < left && i < cap && p[pos] < 0x80) {
            v[i++] = p[pos] != 0;
            pos++;
        }
        break;
    }
    }
    *n = i;
    return pb_read(stream, NULL, pos);
}

/* Whether the fast run may take this call. nanopb calls back while bytes of a
 * packed field remain, but only once for an element sent unpacked, and then it
 * hands over a copy of the raw value: one varint (taken whole by a run), or the
 * 4 or 8 bytes of a 32/64-bit wire type, of which only the first element counts.
 * Those sizes therefore go through s_*_one (a packed field of that size is just
 * taken one element per call), and so does fixed64 data that is not whole
 * elements. An empty field reaches s_*_one too, which refuses it as it always did.
 * After a run, at most one element goes through s_*_one per call, and the next
 * call resumes the run. */
static bool s_fast(const pb_istream_t *stream, s_elem_t kind)
{
    size_t left = stream->bytes_left;
    if (left == 0 || !s_over_memory(stream))
        return false;
    if (kind == S_FIXED64)
        return left % 8u == 0;
    return left != 4 && left != 8;
}

static bool s_u64_decode(pb_istream_t *stream, const pb_field_t *field, bus_u64s_t *a,
                         bus_array_error_t *err, bus_role_t role)
{
    uint32_t cap = s_cap(a->cap, a->v, BUS_MAX_ARRAY);
    bool fixed = PB_LTYPE(field->type) == PB_LTYPE_FIXED64;
    s_elem_t kind = fixed ? S_FIXED64 : S_VARINT64;
    if (s_fast(stream, kind)) {
        if (!s_run(stream, kind, a->v, &a->n, cap))
            return false;
        if (stream->bytes_left == 0)
            return true;
    }
    return s_u64_one(stream, fixed, a, cap, err, role);
}

static bool s_u32_decode(pb_istream_t *stream, bus_u32s_t *a, bus_array_error_t *err,
                         bus_role_t role)
{
    uint32_t cap = s_cap(a->cap, a->v, BUS_MAX_ARRAY);
    if (s_fast(stream, S_VARINT32)) {
        if (!s_run(stream, S_VARINT32, a->v, &a->n, cap))
            return false;
        if (stream->bytes_left == 0)
            return true;
    }
    return s_u32_one(stream, a, cap, err, role);
}

static bool s_bools_decode(pb_istream_t *stream, bus_bools_t *a, bus_array_error_t *err,
                           bus_role_t role)
{
    uint32_t cap = s_cap(a->cap, a->v, BUS_MAX_ARRAY);
    if (s_fast(stream, S_BOOL)) {
        if (!s_run(stream, S_BOOL, a->v, &a->n, cap))
            return false;
        if (stream->bytes_left == 0)
            return true;
    }
    return s_bools_one(stream, a, cap, err, role);
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

/* ---- encoders ----
 * Elements are assembled in a bounded stack chunk and written with one pb_write
 * per chunk (a write per tag, length and key made keys cost ~30 ns each). A
 * sizing stream (callback NULL, PB_OSTREAM_SIZING) only counts: it is handed the
 * total at once. The bytes are those nanopb's own encoders write element by
 * element: minimal varints, little-endian fixed64. */

#define S_CHUNK 4096u /* stack bytes per write */

/* Bytes of the varints of v[0..n): one plus one per 7-bit step the value
 * reaches, written as comparisons so that the compiler can vectorise the loop. */
static size_t s_varints_size32(const uint32_t *v, uint32_t n)
{
    size_t size = n;
    for (uint32_t i = 0; i < n; i++)
        size += (size_t)(v[i] >= 1u << 7) + (v[i] >= 1u << 14) + (v[i] >= 1u << 21) +
                (v[i] >= 1u << 28);
    return size;
}

static size_t s_varints_size64(const uint64_t *v, uint32_t n)
{
    size_t size = n;
    for (uint32_t i = 0; i < n; i++)
        for (unsigned k = 7; k < 64; k += 7)
            size += v[i] >= (uint64_t)1 << k;
    return size;
}

static inline size_t s_put_varint(pb_byte_t *o, uint64_t v)
{
    size_t i = 0;
    while (v >= 0x80) {
        o[i++] = (pb_byte_t)(v | 0x80);
        v >>= 7;
    }
    o[i++] = (pb_byte_t)v;
    return i;
}

static inline void s_store_le64(pb_byte_t *o, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        o[i] = (pb_byte_t)(v >> (8 * i));
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

/* One length-delimited field per key: [tag][16][key bytes], the tag computed once. */
static bool s_keys_encode(pb_ostream_t *stream, const pb_field_t *field, const bus_keys_t *k,
                          bus_array_error_t *err, bus_role_t role)
{
    if (!s_check_encode(stream, k->n, k->keys, err, role))
        return false;
    if (k->n == 0)
        return true;
    pb_byte_t head[8] = {0}; /* tag (at most 5 bytes) + length byte */
    pb_ostream_t hs = pb_ostream_from_buffer(head, sizeof head - 1);
    if (!pb_encode_tag_for_field(&hs, field))
        PB_RETURN_ERROR(stream, PB_GET_ERROR(&hs));
    size_t hlen = hs.bytes_written;
    head[hlen++] = BUS_KEY_LEN;
    size_t rec = hlen + BUS_KEY_LEN;
    if (!stream->callback)
        return pb_write(stream, NULL, rec * k->n);
    pb_byte_t chunk[S_CHUNK];
    uint32_t per = (uint32_t)(S_CHUNK / rec);
    for (uint32_t i = 0; i < k->n;) {
        uint32_t m = k->n - i < per ? k->n - i : per;
        pb_byte_t *o = chunk;
        for (uint32_t j = 0; j < m; j++, o += rec) {
            /* fixed-size copies the compiler inlines: the key overwrites the head's
             * excess bytes (a record, >= 18 bytes, always has room for 8) */
            memcpy(o, head, sizeof head);
            memcpy(o + hlen, k->keys[i + j], BUS_KEY_LEN);
        }
        if (!pb_write(stream, chunk, (size_t)(o - chunk)))
            return false;
        i += m;
    }
    return true;
}

/* Packed field header: tag (wire type 2) and the byte length of the elements. */
static bool s_packed_head(pb_ostream_t *stream, const pb_field_t *field, size_t size)
{
    return pb_encode_tag(stream, PB_WT_STRING, field->tag) && pb_encode_varint(stream, size);
}

/* Packed uint64 (varint) or fixed64. A real stream gets arrays that fit one
 * chunk encoded first, so that their byte length is known without a sizing loop. */
static bool s_u64_encode(pb_ostream_t *stream, const pb_field_t *field, const bus_u64s_t *a,
                         bus_array_error_t *err, bus_role_t role)
{
    if (!s_check_encode(stream, a->n, a->v, err, role))
        return false;
    if (a->n == 0)
        return true;
    bool fixed = PB_LTYPE(field->type) == PB_LTYPE_FIXED64;
    pb_byte_t chunk[S_CHUNK];
    size_t len = 0;
    if (stream->callback && a->n <= S_CHUNK / 10u) {
        for (uint32_t i = 0; i < a->n; i++) {
            if (fixed)
                s_store_le64(chunk + len, a->v[i]);
            len += fixed ? 8u : s_put_varint(chunk + len, a->v[i]);
        }
        return s_packed_head(stream, field, len) && pb_write(stream, chunk, len);
    }
    size_t size = fixed ? (size_t)a->n * 8u : s_varints_size64(a->v, a->n);
    if (!s_packed_head(stream, field, size))
        return false;
    if (!stream->callback)
        return pb_write(stream, NULL, size);
    for (uint32_t i = 0; i < a->n; i++) {
        if (fixed)
            s_store_le64(chunk + len, a->v[i]);
        len += fixed ? 8u : s_put_varint(chunk + len, a->v[i]);
        if (len > S_CHUNK - 10u) {
            if (!pb_write(stream, chunk, len))
                return false;
            len = 0;
        }
    }
    return len == 0 || pb_write(stream, chunk, len);
}

static bool s_u32_encode(pb_ostream_t *stream, const pb_field_t *field, const bus_u32s_t *a,
                         bus_array_error_t *err, bus_role_t role)
{
    if (!s_check_encode(stream, a->n, a->v, err, role))
        return false;
    if (a->n == 0)
        return true;
    pb_byte_t chunk[S_CHUNK];
    size_t len = 0;
    if (stream->callback && a->n <= S_CHUNK / 5u) {
        for (uint32_t i = 0; i < a->n; i++)
            len += s_put_varint(chunk + len, a->v[i]);
        return s_packed_head(stream, field, len) && pb_write(stream, chunk, len);
    }
    size_t size = s_varints_size32(a->v, a->n);
    if (!s_packed_head(stream, field, size))
        return false;
    if (!stream->callback)
        return pb_write(stream, NULL, size);
    for (uint32_t i = 0; i < a->n; i++) {
        len += s_put_varint(chunk + len, a->v[i]);
        if (len > S_CHUNK - 5u) {
            if (!pb_write(stream, chunk, len))
                return false;
            len = 0;
        }
    }
    return len == 0 || pb_write(stream, chunk, len);
}

static bool s_bools_encode(pb_ostream_t *stream, const pb_field_t *field, const bus_bools_t *a,
                           bus_array_error_t *err, bus_role_t role)
{
    if (!s_check_encode(stream, a->n, a->v, err, role))
        return false;
    if (a->n == 0)
        return true;
    if (!s_packed_head(stream, field, a->n))
        return false;
    if (!stream->callback)
        return pb_write(stream, NULL, a->n);
    pb_byte_t chunk[S_CHUNK];
    for (uint32_t i = 0; i < a->n;) {
        uint32_t m = a->n - i < S_CHUNK ? a->n - i : S_CHUNK;
        for (uint32_t j = 0; j < m; j++)
            chunk[j] = a->v[i + j] ? 1u : 0u;
        if (!pb_write(stream, chunk, m))
            return false;
        i += m;
    }
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
S_ROLE_CALLBACKS(token_ids, BUS_ROLE_TOKEN_IDS, u32)

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
    [BUS_ROLE_TOKEN_IDS] = {s_dec_token_ids, s_enc_token_ids},
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

/* ---- standalone uint32 arrays (events) ---- */

static bool s_u32s_plain_encode(pb_ostream_t *stream, const pb_field_t *field, void *const *arg)
{
    return s_u32_encode(stream, field, *arg, NULL, BUS_ROLE_TOKEN_IDS);
}

static bool s_u32s_sink_decode(pb_istream_t *stream, const pb_field_t *field, void **arg)
{
    bus_u32s_sink_t *sink = *arg;
    (void)field;
    return s_u32_decode(stream, sink->v, sink->err, BUS_ROLE_TOKEN_IDS);
}

void bus_u32s_bind_encode(pb_callback_t *cb, const bus_u32s_t *v)
{
    cb->funcs.encode = v ? s_u32s_plain_encode : NULL;
    cb->arg = (void *)v;
}

void bus_u32s_bind_decode(pb_callback_t *cb, bus_u32s_sink_t *sink)
{
    cb->funcs.decode = sink ? s_u32s_sink_decode : s_dec_refuse;
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
    self->token_ids.v = calloc(n, sizeof(uint32_t));
    if (!self->token_ids.v || !self->keys.keys || !self->tier_ids.v || !self->slots.v ||
        !self->dst_slots.v || !self->sizes.v || !self->checksums.v || !self->mask.v ||
        !self->payload.data) {
        bus_arrays_destroy(&self);
        return NULL;
    }
    self->keys.cap = self->tier_ids.cap = self->slots.cap = self->dst_slots.cap = cap;
    self->sizes.cap = self->checksums.cap = self->mask.cap = self->token_ids.cap = cap;
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
    free(self->token_ids.v);
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
    self->token_ids.n = 0;
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
    case BUS_ROLE_TOKEN_IDS:
        return self->token_ids.n;
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
