/* kvt_export.c — the codec of kvt_export.h: a token and its result as bytes
 * between processes. Owns the layout and its checks only; what the fields mean
 * to a handle (cluster, leader epoch, the token they name) is kvt_handover.c's.
 * Never reads past the bytes it is given, never trusts a length or count it has
 * not checked against what is left, never allocates. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <xxhash.h>

#include "bus_le.h"
#include "kvt_export.h"
#include "kvtier.h"

#define S_KEY 16u
#define S_SUM 8u

static void s_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void s_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static bool s_kind_ok(uint16_t kind)
{
    return kind >= 1 && kind <= 3; /* get, put, prefetch: the kinds a handle exports */
}

/* ---- token ---------------------------------------------------------------------- */

size_t kvti_tokx_size(const kvti_tokx_t *x)
{
    size_t a = strlen(x->cluster), b = strlen(x->instance_id), c = strlen(x->request_id);
    if (a > KVTI_EXPORT_STR_MAX || b > KVTI_EXPORT_STR_MAX || c > KVTI_EXPORT_STR_MAX ||
        x->n_keys > KVT_MAX_KEYS)
        return 0;
    return KVTI_TOKX_HEADER + 3 + a + b + c + (size_t)x->n_keys * S_KEY + x->payload_len + S_SUM;
}

int kvti_tokx_encode(const kvti_tokx_t *x, uint8_t *buf, size_t cap, size_t *len, char *err,
                     size_t errlen)
{
    size_t need = kvti_tokx_size(x);
    if (need == 0 || !s_kind_ok(x->kind) || x->remaining_ms > x->lease_ms) {
        s_err(err, errlen, "a field is beyond the format's bounds");
        return -1;
    }
    if (len)
        *len = need;
    if (!buf || cap < need) {
        s_err(err, errlen, "%zu bytes of room, the token takes %zu", cap, need);
        return -1;
    }
    memcpy(buf, KVTI_TOKX_MAGIC, 4);
    bus_le_put16(buf + 4, KVTI_TOKX_VERSION);
    bus_le_put16(buf + 6, x->kind);
    bus_le_put32(buf + 8, 0);
    bus_le_put32(buf + 12, x->n_keys);
    bus_le_put64(buf + 16, x->token_id);
    bus_le_put64(buf + 24, x->prepare_id);
    bus_le_put64(buf + 32, x->lease_ms);
    bus_le_put64(buf + 40, x->remaining_ms);
    bus_le_put64(buf + 48, x->leader_epoch);
    bus_le_put64(buf + 56, x->bytes_per_block);
    bus_le_put32(buf + 64, x->segments);
    bus_le_put32(buf + 68, x->payload_len);
    size_t o = KVTI_TOKX_HEADER;
    const char *strs[3] = {x->cluster, x->instance_id, x->request_id};
    for (int i = 0; i < 3; i++) {
        size_t l = strlen(strs[i]);
        buf[o++] = (uint8_t)l;
        memcpy(buf + o, strs[i], l);
        o += l;
    }
    if (x->n_keys)
        memcpy(buf + o, x->keys, (size_t)x->n_keys * S_KEY);
    o += (size_t)x->n_keys * S_KEY;
    if (x->payload_len)
        memcpy(buf + o, x->payload, x->payload_len);
    o += x->payload_len;
    bus_le_put64(buf + o, XXH3_64bits(buf, o));
    return 0;
}

/* Magic, version, flags and the trailing checksum, common to both formats. */
static int s_frame(const uint8_t *buf, size_t len, const char *magic, uint16_t version,
                   size_t header, const char *what, char *err, size_t errlen)
{
    if (!buf || len < 6) {
        s_err(err, errlen, "%zu bytes: too short to be %s (cut off?)", buf ? len : 0, what);
        return -1;
    }
    if (memcmp(buf, magic, 4) != 0) {
        s_err(err, errlen, "not %s: the bytes begin %02x %02x %02x %02x, not \"%s\"", what, buf[0],
              buf[1], buf[2], buf[3], magic);
        return -1;
    }
    if (bus_le_get16(buf + 4) != version) {
        s_err(err, errlen, "%s version %u: this library reads version %u only", what,
              bus_le_get16(buf + 4), version);
        return -1;
    }
    if (len < header + S_SUM) {
        s_err(err, errlen, "%zu bytes: shorter than %s's header (cut off?)", len, what);
        return -1;
    }
    if (bus_le_get64(buf + len - S_SUM) != XXH3_64bits(buf, len - S_SUM)) {
        s_err(err, errlen, "%s: the checksum does not match its bytes (altered, or cut off)", what);
        return -1;
    }
    if (bus_le_get32(buf + 8) != 0) {
        s_err(err, errlen, "%s: flags 0x%x unknown to version %u", what, bus_le_get32(buf + 8),
              version);
        return -1;
    }
    if (!s_kind_ok(bus_le_get16(buf + 6))) {
        s_err(err, errlen, "%s: kind %u is not get (1), put (2) or prefetch (3)", what,
              bus_le_get16(buf + 6));
        return -1;
    }
    if (bus_le_get32(buf + 12) > KVT_MAX_KEYS) {
        s_err(err, errlen, "%s: %u keys, at most %u", what, bus_le_get32(buf + 12), KVT_MAX_KEYS);
        return -1;
    }
    return 0;
}

int kvti_tokx_decode(const uint8_t *buf, size_t len, kvti_tokx_t *out, char *err, size_t errlen)
{
    const char *W = "an exported token";
    if (s_frame(buf, len, KVTI_TOKX_MAGIC, KVTI_TOKX_VERSION, KVTI_TOKX_HEADER, W, err, errlen) < 0)
        return -1;
    memset(out, 0, sizeof *out);
    out->kind = bus_le_get16(buf + 6);
    out->n_keys = bus_le_get32(buf + 12);
    out->token_id = bus_le_get64(buf + 16);
    out->prepare_id = bus_le_get64(buf + 24);
    out->lease_ms = bus_le_get64(buf + 32);
    out->remaining_ms = bus_le_get64(buf + 40);
    out->leader_epoch = bus_le_get64(buf + 48);
    out->bytes_per_block = bus_le_get64(buf + 56);
    out->segments = bus_le_get32(buf + 64);
    out->payload_len = bus_le_get32(buf + 68);
    if (out->remaining_ms > out->lease_ms) {
        s_err(err, errlen, "%s: %" PRIu64 " ms of lease left of a %" PRIu64 " ms lease", W,
              out->remaining_ms, out->lease_ms);
        return -1;
    }
    if (out->segments > KVT_MAX_SEGMENTS ||
        (out->segments > 1 && out->bytes_per_block % out->segments != 0)) {
        s_err(err, errlen, "%s: %u segments of a %" PRIu64 "-byte block (at most %u, a divisor)", W,
              out->segments, out->bytes_per_block, KVT_MAX_SEGMENTS);
        return -1;
    }
    size_t end = len - S_SUM, o = KVTI_TOKX_HEADER;
    char *strs[3] = {out->cluster, out->instance_id, out->request_id};
    static const char *names[3] = {"cluster", "instance_id", "request_id"};
    for (int i = 0; i < 3; i++) {
        size_t l = o < end ? buf[o] : 0;
        if (o >= end || l > end - o - 1) {
            s_err(err, errlen, "%s: its %s runs past the end", W, names[i]);
            return -1;
        }
        memcpy(strs[i], buf + o + 1, l);
        strs[i][l] = '\0';
        if (memchr(strs[i], '\0', l)) {
            s_err(err, errlen, "%s: its %s holds a NUL byte", W, names[i]);
            return -1;
        }
        o += 1 + l;
    }
    size_t keys = (size_t)out->n_keys * S_KEY;
    if (end - o != keys + out->payload_len) {
        s_err(err, errlen,
              "%s: %zu bytes after its strings, %u keys and a %u-byte payload take %zu", W, end - o,
              out->n_keys, out->payload_len, keys + out->payload_len);
        return -1;
    }
    out->keys = buf + o;
    out->payload = buf + o + keys;
    return 0;
}

/* ---- result --------------------------------------------------------------------- */

size_t kvti_tokr_size(uint32_t n_keys)
{
    if (n_keys > KVT_MAX_KEYS)
        return 0;
    return KVTI_TOKR_HEADER + (size_t)n_keys * (S_KEY + 1 + S_SUM) + S_SUM;
}

int kvti_tokr_encode(const kvti_tokr_t *r, uint8_t *buf, size_t cap, size_t *len, char *err,
                     size_t errlen)
{
    size_t need = kvti_tokr_size(r->n_keys);
    if (need == 0 || !s_kind_ok(r->kind) || r->seg_next > r->segments ||
        r->segments > KVT_MAX_SEGMENTS) {
        s_err(err, errlen, "a field is beyond the format's bounds");
        return -1;
    }
    if (len)
        *len = need;
    if (!buf || cap < need) {
        s_err(err, errlen, "%zu bytes of room, the result takes %zu", cap, need);
        return -1;
    }
    memcpy(buf, KVTI_TOKR_MAGIC, 4);
    bus_le_put16(buf + 4, KVTI_TOKR_VERSION);
    bus_le_put16(buf + 6, r->kind);
    bus_le_put32(buf + 8, 0);
    bus_le_put32(buf + 12, r->n_keys);
    bus_le_put64(buf + 16, r->token_id);
    bus_le_put64(buf + 24, r->prepare_id);
    bus_le_put32(buf + 32, r->segments);
    bus_le_put32(buf + 36, r->seg_next);
    bus_le_put64(buf + 40, r->segments ? r->seg_bytes : 0);
    size_t o = KVTI_TOKR_HEADER, n = r->n_keys;
    if (n) {
        memcpy(buf + o, r->keys, n * S_KEY);
        memcpy(buf + o + n * S_KEY, r->outcome, n);
    }
    o += n * (S_KEY + 1);
    for (size_t i = 0; i < n; i++)
        bus_le_put64(buf + o + i * S_SUM, r->sums ? r->sums[i] : 0);
    o += n * S_SUM;
    bus_le_put64(buf + o, XXH3_64bits(buf, o));
    return 0;
}

int kvti_tokr_decode(const uint8_t *buf, size_t len, kvti_tokr_t *out, char *err, size_t errlen)
{
    const char *W = "an exported result";
    if (s_frame(buf, len, KVTI_TOKR_MAGIC, KVTI_TOKR_VERSION, KVTI_TOKR_HEADER, W, err, errlen) < 0)
        return -1;
    memset(out, 0, sizeof *out);
    out->kind = bus_le_get16(buf + 6);
    out->n_keys = bus_le_get32(buf + 12);
    out->token_id = bus_le_get64(buf + 16);
    out->prepare_id = bus_le_get64(buf + 24);
    out->segments = bus_le_get32(buf + 32);
    out->seg_next = bus_le_get32(buf + 36);
    out->seg_bytes = bus_le_get64(buf + 40);
    if (len != kvti_tokr_size(out->n_keys)) {
        s_err(err, errlen, "%s: %zu bytes, %u keys take %zu", W, len, out->n_keys,
              kvti_tokr_size(out->n_keys));
        return -1;
    }
    if (out->segments > KVT_MAX_SEGMENTS || out->seg_next > out->segments ||
        (out->segments == 0) != (out->seg_bytes == 0)) {
        s_err(err, errlen,
              "%s: layer-wise state %u of %u segments of %" PRIu64
              " bytes is not one (at most %u segments, the next one within them)",
              W, out->seg_next, out->segments, out->seg_bytes, KVT_MAX_SEGMENTS);
        return -1;
    }
    size_t n = out->n_keys;
    out->keys = buf + KVTI_TOKR_HEADER;
    out->outcome = out->keys + n * S_KEY;
    out->checksums = out->outcome + n;
    for (size_t i = 0; i < n; i++)
        if (out->outcome[i] & ~(KVTI_OUT_MOVED | KVTI_OUT_SEG_FAILED)) {
            s_err(err, errlen, "%s: key %zu's outcome 0x%02x has unknown bits", W, i,
                  out->outcome[i]);
            return -1;
        }
    return 0;
}

uint64_t kvti_tokr_checksum(const kvti_tokr_t *r, uint32_t i)
{
    return bus_le_get64(r->checksums + (size_t)i * S_SUM);
}
