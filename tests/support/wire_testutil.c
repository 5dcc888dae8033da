/* wire_testutil.c — the helpers of wire_testutil.h. Test use only. */
#include "wire_testutil.h"

#include <pb_common.h>
#include <string.h>

/* Key i: 16 bytes that differ in every position from key i+1. */
void tu_key(uint32_t i, uint8_t out[BUS_KEY_LEN])
{
    for (uint32_t j = 0; j < BUS_KEY_LEN; j++)
        out[j] = (uint8_t)(i * 131u + j * 7u + (i >> 8) + (i >> 16) * 3u);
}

/* Fills every role of arr with n elements (payload: blob_len bytes) from seed. */
void tu_arrays_fill(bus_arrays_t *a, uint32_t n, uint32_t blob_len, uint32_t seed)
{
    bus_arrays_clear(a);
    for (uint32_t i = 0; i < n; i++) {
        tu_key(seed + i, a->keys.keys[i]);
        a->tier_ids.v[i] = (seed + i) % 7u;
        a->slots.v[i] = (uint64_t)(seed + i) * 1000003u;
        a->dst_slots.v[i] = (uint64_t)(seed + i) * 17u + 1u;
        a->sizes.v[i] = (uint64_t)(seed + i) % 5000u;
        a->checksums.v[i] = ((uint64_t)(seed + i) * 0x9E3779B97F4A7C15ull) ^ 0xFFull;
        a->mask.v[i] = ((seed + i) % 3u) != 0;
        a->token_ids.v[i] = (seed + i) * 50021u;
    }
    a->keys.n = a->tier_ids.n = a->slots.n = a->dst_slots.n = n;
    a->sizes.n = a->checksums.n = a->mask.n = a->token_ids.n = n;
    for (uint32_t i = 0; i < blob_len; i++)
        a->payload.data[i] = (uint8_t)(seed * 13u + i);
    a->payload.len = blob_len;
}

/* Does role r hold the same elements in a and b? */
bool tu_role_equal(const bus_arrays_t *a, const bus_arrays_t *b, bus_role_t r)
{
    if (bus_arrays_count(a, r) != bus_arrays_count(b, r))
        return false;
    uint32_t n = bus_arrays_count(a, r);
    switch (r) {
    case BUS_ROLE_KEYS:
        return n == 0 || memcmp(a->keys.keys, b->keys.keys, (size_t)n * BUS_KEY_LEN) == 0;
    case BUS_ROLE_TIER_IDS:
        return n == 0 || memcmp(a->tier_ids.v, b->tier_ids.v, n * sizeof(uint32_t)) == 0;
    case BUS_ROLE_SLOTS:
        return n == 0 || memcmp(a->slots.v, b->slots.v, n * sizeof(uint64_t)) == 0;
    case BUS_ROLE_DST_SLOTS:
        return n == 0 || memcmp(a->dst_slots.v, b->dst_slots.v, n * sizeof(uint64_t)) == 0;
    case BUS_ROLE_SIZES:
        return n == 0 || memcmp(a->sizes.v, b->sizes.v, n * sizeof(uint64_t)) == 0;
    case BUS_ROLE_CHECKSUMS:
        return n == 0 || memcmp(a->checksums.v, b->checksums.v, n * sizeof(uint64_t)) == 0;
    case BUS_ROLE_MASK:
        return n == 0 || memcmp(a->mask.v, b->mask.v, n * sizeof(bool)) == 0;
    case BUS_ROLE_PAYLOAD:
        return n == 0 || memcmp(a->payload.data, b->payload.data, n) == 0;
    case BUS_ROLE_TOKEN_IDS:
        return n == 0 || memcmp(a->token_ids.v, b->token_ids.v, n * sizeof(uint32_t)) == 0;
    default:
        return false;
    }
}

static void s_fill_value(const pb_field_iter_t *it, void *p, uint32_t seed)
{
    switch (PB_LTYPE(it->type)) {
    case PB_LTYPE_BOOL:
        *(bool *)p = true;
        break;
    case PB_LTYPE_VARINT:
    case PB_LTYPE_UVARINT:
    case PB_LTYPE_SVARINT:
    case PB_LTYPE_FIXED32:
    case PB_LTYPE_FIXED64:
        if (it->data_size == 8) {
            uint64_t v = (uint64_t)seed * 0x9E3779B97F4A7C15ull;
            memcpy(p, &v, 8);
        } else if (it->data_size == 4) {
            /* small and non-zero: valid for every enum of the schemas */
            uint32_t v = seed % 3u + 1u;
            memcpy(p, &v, 4);
        } else if (it->data_size == 2) {
            uint16_t v = (uint16_t)(seed % 3u + 1u);
            memcpy(p, &v, 2);
        } else {
            *(uint8_t *)p = (uint8_t)(seed % 3u + 1u);
        }
        break;
    case PB_LTYPE_STRING: {
        char *s = p;
        for (pb_size_t i = 0; i + 1 < it->data_size; i++)
            s[i] = (char)('a' + (seed + i) % 26u);
        s[it->data_size - 1] = '\0';
        break;
    }
    case PB_LTYPE_BYTES: {
        pb_bytes_array_t *b = p;
        pb_size_t max = (pb_size_t)(it->data_size - offsetof(pb_bytes_array_t, bytes));
        b->size = max;
        for (pb_size_t i = 0; i < max; i++)
            b->bytes[i] = (pb_byte_t)(seed + i);
        break;
    }
    case PB_LTYPE_FIXED_LENGTH_BYTES:
        for (pb_size_t i = 0; i < it->data_size; i++)
            ((uint8_t *)p)[i] = (uint8_t)(seed * 3u + i);
        break;
    case PB_LTYPE_SUBMESSAGE:
    case PB_LTYPE_SUBMSG_W_CB:
        tu_fill_msg(it->submsg_desc, p, seed * 7u + 1u);
        break;
    default:
        break;
    }
}

/* Sets every static field (repeated ones to their max count) to a non-default
 * value; callback fields and oneofs are left alone. */
void tu_fill_msg(const pb_msgdesc_t *desc, void *msg, uint32_t seed)
{
    pb_field_iter_t it;
    if (!pb_field_iter_begin(&it, desc, msg))
        return;
    do {
        if (PB_ATYPE(it.type) != PB_ATYPE_STATIC || PB_HTYPE(it.type) == PB_HTYPE_ONEOF)
            continue;
        pb_size_t count = 1;
        if (PB_HTYPE(it.type) == PB_HTYPE_REPEATED) {
            count = it.array_size;
            *(pb_size_t *)it.pSize = count;
        } else if (PB_HTYPE(it.type) == PB_HTYPE_OPTIONAL && it.pSize) {
            *(bool *)it.pSize = true;
        }
        for (pb_size_t i = 0; i < count; i++)
            s_fill_value(&it, (uint8_t *)it.pData + (size_t)i * it.data_size,
                         seed + it.tag * 31u + i);
    } while (pb_field_iter_next(&it));
}

/* Descriptor of the body with field number tag (NULL if none). */
const pb_msgdesc_t *tu_body_desc(pb_size_t tag)
{
    kvtier_Envelope dummy;
    pb_field_iter_t it;
    if (!pb_field_iter_begin(&it, kvtier_Envelope_fields, &dummy) || !pb_field_iter_find(&it, tag))
        return NULL;
    return it.submsg_desc;
}

void tu_w_init(tu_writer_t *w)
{
    w->s = pb_ostream_from_buffer(w->buf, sizeof w->buf);
}

void tu_w_varint(tu_writer_t *w, uint32_t tag, uint64_t v)
{
    (void)pb_encode_tag(&w->s, PB_WT_VARINT, tag);
    (void)pb_encode_varint(&w->s, v);
}

void tu_w_bytes(tu_writer_t *w, uint32_t tag, const void *p, size_t n)
{
    (void)pb_encode_tag(&w->s, PB_WT_STRING, tag);
    (void)pb_encode_string(&w->s, p, n);
}

size_t tu_w_len(const tu_writer_t *w)
{
    return w->s.bytes_written;
}

/* Header of a hand-made envelope: corr_id and version. */
void tu_w_header(tu_writer_t *w, uint64_t corr_id, uint32_t version)
{
    tu_w_init(w);
    tu_w_varint(w, kvtier_Envelope_corr_id_tag, corr_id);
    tu_w_varint(w, kvtier_Envelope_version_tag, version);
}
