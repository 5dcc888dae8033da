/* bus_env_keys.c — frame 0 split into its block keys and the rest (bus_env_keys.h).
 * A hand scan of the protobuf wire format, two levels deep (the envelope, then its
 * body), that declines whatever it is not sure of. */
#include "bus_env_keys.h"

#include <string.h>

#define S_WT_VARINT 0u
#define S_WT_64BIT 1u
#define S_WT_LEN 2u
#define S_WT_32BIT 5u
#define S_KEY_LEN 16u

/* A varint at *pos (at most 10 bytes, within len): true and *v, *pos past it. */
static bool s_varint(const uint8_t *buf, size_t len, size_t *pos, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned i = 0; i < 10; i++) {
        if (*pos >= len)
            return false;
        uint8_t b = buf[(*pos)++];
        if (i == 9 && b > 1)
            return false; /* more than 64 bits */
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* One field at *pos: its number and wire type, where its value starts and where
 * it ends. false for anything malformed or of a wire type we do not skip (groups). */
typedef struct {
    uint32_t number, wt;
    size_t start, value, end;
} s_field_t;

static bool s_field(const uint8_t *buf, size_t len, size_t *pos, s_field_t *f)
{
    f->start = *pos;
    uint64_t tag, v;
    if (!s_varint(buf, len, pos, &tag) || tag > UINT32_MAX || (tag >> 3) == 0)
        return false;
    f->number = (uint32_t)(tag >> 3);
    f->wt = (uint32_t)(tag & 7);
    switch (f->wt) {
    case S_WT_VARINT:
        f->value = *pos;
        if (!s_varint(buf, len, pos, &v))
            return false;
        break;
    case S_WT_64BIT:
    case S_WT_32BIT: {
        size_t w = f->wt == S_WT_64BIT ? 8 : 4;
        f->value = *pos;
        if (len - *pos < w)
            return false;
        *pos += w;
        break;
    }
    case S_WT_LEN:
        if (!s_varint(buf, len, pos, &v) || v > len - *pos)
            return false;
        f->value = *pos;
        *pos += (size_t)v;
        break;
    default:
        return false;
    }
    f->end = *pos;
    return true;
}

static size_t s_varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static size_t s_put_varint(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

bool bus_env_keys_split(const uint8_t *buf, size_t len, uint32_t body_tag, uint32_t keys_field,
                        uint8_t (*keys)[16], uint32_t cap, uint32_t *n, uint8_t *rest,
                        size_t rest_cap, size_t *rest_len)
{
    if (!buf || !rest || !n || !rest_len || body_tag == 0 || keys_field == 0)
        return false;
    /* the envelope: exactly one occurrence of the body field (nanopb would merge two) */
    s_field_t f, body = {0};
    unsigned bodies = 0;
    for (size_t pos = 0; pos < len;) {
        if (!s_field(buf, len, &pos, &f))
            return false;
        if (f.number == body_tag) {
            if (f.wt != S_WT_LEN || ++bodies > 1)
                return false;
            body = f;
        }
    }
    if (bodies != 1)
        return false;
    /* the body: every key field 16 bytes, at most cap of them */
    uint32_t nk = 0;
    size_t key_bytes = 0;
    for (size_t pos = body.value; pos < body.end;) {
        if (!s_field(buf, body.end, &pos, &f))
            return false;
        if (f.number != keys_field)
            continue;
        if (f.wt != S_WT_LEN || f.end - f.value != S_KEY_LEN || nk >= cap)
            return false;
        nk++;
        key_bytes += f.end - f.start;
    }
    if (nk == 0)
        return false; /* nothing to gain */
    size_t body_rest = (body.end - body.value) - key_bytes;
    uint64_t tag = (uint64_t)body_tag << 3 | S_WT_LEN;
    size_t need =
        body.start + s_varint_len(tag) + s_varint_len(body_rest) + body_rest + (len - body.end);
    if (need > rest_cap)
        return false;
    /* write: the envelope before the body, the body without its keys, the rest */
    size_t o = 0;
    memcpy(rest, buf, body.start);
    o += body.start;
    o += s_put_varint(rest + o, tag);
    o += s_put_varint(rest + o, body_rest);
    uint32_t k = 0;
    for (size_t pos = body.value; pos < body.end;) {
        (void)s_field(buf, body.end, &pos, &f); /* checked above */
        if (f.number == keys_field) {
            memcpy(keys[k++], buf + f.value, S_KEY_LEN);
        } else {
            memcpy(rest + o, buf + f.start, f.end - f.start);
            o += f.end - f.start;
        }
    }
    memcpy(rest + o, buf + body.end, len - body.end);
    o += len - body.end;
    *n = k;
    *rest_len = o;
    return true;
}
