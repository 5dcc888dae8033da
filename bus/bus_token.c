/* bus_token.c — codec of the token payload (layout, version 2, in bus_token.h).
 * Owns only the byte layout: little-endian integers written and read byte by
 * byte, so it does not depend on host endianness or alignment. Encoders write
 * version 2 only. Never trusts a payload: decode checks magic, version, kind,
 * flags, reserved fields, every length, every string, every tier index and the
 * MAC trailer before a view is handed out, and never reads past `len`. It does
 * not verify a MAC (bus_token_mac.c does, with the key this file never sees). */
#include "bus_token.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "bus_le.h"

#define S_MAGIC "KVT1"
#define S_PREFIX_BYTES 6u /* magic + version: where they are in every version */

_Static_assert(BUS_TOKEN_ENDPOINT_MAX >= BUS_TIER_ENDPOINT_MAX &&
                   BUS_TOKEN_NAME_MAX >= BUS_TIER_SHM_MAX &&
                   BUS_TOKEN_NAME_MAX >= BUS_TIER_HOST_MAX,
               "a token tier record holds every TierInfo string it copies");
/* u32 tier_id, u64 slot_size, u64 epoch, then three u16-prefixed strings */
#define S_TIER_FIXED_BYTES (4u + 8u + 8u + 3u * 2u)

/* Kinds this build reads and writes. */
static bool s_kind_ok(uint32_t kind)
{
    return kind == BUS_TOKEN_GET || kind == BUS_TOKEN_PUT || kind == BUS_TOKEN_PREFETCH ||
           kind == BUS_TOKEN_GET_PUT || kind == BUS_TOKEN_ADMIN || kind == BUS_TOKEN_COPY;
}

/* n_get splits a get+put token's entries (at most all of them are gets) and is
 * 0 on every other kind; a combined window is never exportable (its halves share
 * one lease and one complete at the scheduler that minted it). */
static bool s_split_ok(uint32_t kind, uint32_t flags, uint32_t n_get, uint32_t n_entries)
{
    if (kind != BUS_TOKEN_GET_PUT)
        return n_get == 0;
    return n_get <= n_entries && !(flags & BUS_TOKEN_F_EXPORTABLE);
}

/* Length of a NUL-terminated string field of capacity max; max when unterminated. */
static size_t s_field_len(const char *s, size_t max)
{
    return strnlen(s, max);
}

static size_t s_tier_bytes(const bus_token_tier_t *t)
{
    size_t e = s_field_len(t->endpoint, BUS_TOKEN_ENDPOINT_MAX);
    size_t s = s_field_len(t->shm, BUS_TOKEN_NAME_MAX);
    size_t h = s_field_len(t->host, BUS_TOKEN_NAME_MAX);
    if (e >= BUS_TOKEN_ENDPOINT_MAX || s >= BUS_TOKEN_NAME_MAX || h >= BUS_TOKEN_NAME_MAX)
        return 0;
    return S_TIER_FIXED_BYTES + e + s + h;
}

size_t bus_token_encoded_size(const bus_token_tier_t *tiers, uint32_t n_tiers, uint32_t n_entries)
{
    if (n_tiers > BUS_TOKEN_MAX_TIERS || (n_tiers > 0 && !tiers))
        return 0;
    size_t total = BUS_TOKEN_HEADER_BYTES;
    for (uint32_t i = 0; i < n_tiers; i++) {
        size_t b = s_tier_bytes(&tiers[i]);
        if (b == 0)
            return 0;
        total += b;
    }
    return total + (size_t)n_entries * BUS_TOKEN_ENTRY_BYTES + BUS_TOKEN_TRAILER_BYTES;
}

/* A token entry must name a tier of the table; only prefetch and copy entries have a
 * source. */
static bool s_entry_ok(bus_token_kind_t kind, uint32_t n_tiers, uint16_t tier, uint16_t src)
{
    if (tier >= n_tiers)
        return false;
    if (kind == BUS_TOKEN_PREFETCH || kind == BUS_TOKEN_COPY)
        return src < n_tiers;
    return src == BUS_TOKEN_NO_TIER;
}

static uint8_t *s_put_str(uint8_t *p, const char *s, size_t max)
{
    size_t n = s_field_len(s, max);
    bus_le_put16(p, (uint16_t)n);
    memcpy(p + 2, s, n);
    return p + 2 + n;
}

static uint8_t *s_put_header(uint8_t *p, bus_token_kind_t kind, const bus_token_meta_t *m,
                             uint32_t n_tiers, uint32_t n_entries)
{
    memcpy(p, S_MAGIC, 4);
    bus_le_put16(p + 4, BUS_TOKEN_VERSION);
    bus_le_put16(p + 6, (uint16_t)kind);
    bus_le_put32(p + 8, m->flags);
    bus_le_put16(p + 12, (uint16_t)n_tiers);
    bus_le_put16(p + 14, 0);
    bus_le_put32(p + 16, n_entries);
    bus_le_put32(p + 20, m->n_get);
    bus_le_put64(p + 24, m->token_id);
    bus_le_put64(p + 32, m->issuer);
    bus_le_put64(p + 40, m->leader_epoch);
    bus_le_put64(p + 48, m->expiry_ms);
    bus_le_put32(p + 56, m->instance);
    bus_le_put32(p + 60, 0);
    return p + BUS_TOKEN_HEADER_BYTES;
}

static uint8_t *s_put_tier(uint8_t *p, const bus_token_tier_t *t)
{
    bus_le_put32(p, t->tier_id);
    bus_le_put64(p + 4, t->slot_size);
    bus_le_put64(p + 12, t->epoch);
    p += 20;
    p = s_put_str(p, t->endpoint, BUS_TOKEN_ENDPOINT_MAX);
    p = s_put_str(p, t->shm, BUS_TOKEN_NAME_MAX);
    return s_put_str(p, t->host, BUS_TOKEN_NAME_MAX);
}

static uint8_t *s_put_entry(uint8_t *p, const bus_token_entry_t *e)
{
    bus_le_put16(p, e->tier);
    bus_le_put16(p + 2, e->src_tier);
    bus_le_put32(p + 4, e->size);
    bus_le_put64(p + 8, e->slot);
    bus_le_put64(p + 16, e->src_slot);
    return p + BUS_TOKEN_ENTRY_BYTES;
}

int bus_token_encode(bus_token_kind_t kind, const bus_token_meta_t *meta,
                     const bus_token_tier_t *tiers, uint32_t n_tiers,
                     const bus_token_entry_t *entries, uint32_t n_entries, uint8_t *buf, size_t cap,
                     size_t *len)
{
    static const bus_token_meta_t none = {0};
    const bus_token_meta_t *m = meta ? meta : &none;
    if (len)
        *len = 0;
    if (!s_kind_ok(kind) || (n_entries > 0 && !entries) || !len)
        return -EINVAL;
    if ((m->flags & ~BUS_TOKEN_F_KNOWN) != 0 || !s_split_ok(kind, m->flags, m->n_get, n_entries))
        return -EINVAL;
    size_t need = bus_token_encoded_size(tiers, n_tiers, n_entries);
    if (need == 0)
        return -EINVAL;
    for (uint32_t i = 0; i < n_entries; i++)
        if (!s_entry_ok(kind, n_tiers, entries[i].tier, entries[i].src_tier))
            return -EINVAL;
    if (!buf || cap < need)
        return -ENOSPC;

    uint8_t *p = s_put_header(buf, kind, m, n_tiers, n_entries);
    for (uint32_t i = 0; i < n_tiers; i++)
        p = s_put_tier(p, &tiers[i]);
    for (uint32_t i = 0; i < n_entries; i++)
        p = s_put_entry(p, &entries[i]);
    bus_le_put16(p, BUS_TOKEN_MAC_NONE);
    bus_le_put16(p + 2, 0);
    p += BUS_TOKEN_TRAILER_BYTES;
    *len = (size_t)(p - buf);
    return 0;
}

static int s_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int s_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

/* Reads one u16-prefixed string at *off into out (capacity max, NUL-terminated). */
static int s_get_str(const uint8_t *buf, size_t len, size_t *off, char *out, size_t max,
                     uint32_t tier, const char *what, char *err, size_t errlen)
{
    if (len - *off < 2)
        return s_fail(err, errlen, "token payload: tier %u %s length cut short", tier, what);
    size_t n = bus_le_get16(buf + *off);
    *off += 2;
    if (n >= max)
        return s_fail(err, errlen, "token payload: tier %u %s is %zu bytes, at most %zu", tier,
                      what, n, max - 1);
    if (len - *off < n)
        return s_fail(err, errlen, "token payload: tier %u %s cut short", tier, what);
    if (n > 0 && memchr(buf + *off, 0, n))
        return s_fail(err, errlen, "token payload: tier %u %s contains a NUL byte", tier, what);
    memcpy(out, buf + *off, n);
    out[n] = '\0';
    *off += n;
    return 0;
}

static int s_decode_tiers(const uint8_t *buf, size_t len, size_t *off, bus_token_view_t *view,
                          char *err, size_t errlen)
{
    for (uint32_t i = 0; i < view->n_tiers; i++) {
        bus_token_tier_t *t = &view->tiers[i];
        if (len - *off < 20)
            return s_fail(err, errlen, "token payload: tier %u cut short", i);
        t->tier_id = bus_le_get32(buf + *off);
        t->slot_size = bus_le_get64(buf + *off + 4);
        t->epoch = bus_le_get64(buf + *off + 12);
        *off += 20;
        int rc = s_get_str(buf, len, off, t->endpoint, BUS_TOKEN_ENDPOINT_MAX, i, "endpoint", err,
                           errlen);
        if (rc == 0)
            rc = s_get_str(buf, len, off, t->shm, BUS_TOKEN_NAME_MAX, i, "shm name", err, errlen);
        if (rc == 0)
            rc = s_get_str(buf, len, off, t->host, BUS_TOKEN_NAME_MAX, i, "host id", err, errlen);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Magic and version sit at the same offsets in every version, so a payload of
 * another version is named, not misread. */
static int s_check_prefix(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    if (!buf || len < S_PREFIX_BYTES)
        return s_fail(err, errlen, "token payload: %zu bytes, shorter than its %u-byte header",
                      buf ? len : 0, BUS_TOKEN_HEADER_BYTES);
    if (memcmp(buf, S_MAGIC, 4) != 0)
        return s_fail(err, errlen, "token payload: bad magic (not a kvtier token)");
    uint16_t version = bus_le_get16(buf + 4);
    if (version == 1)
        return s_fail(err, errlen,
                      "token payload: token version 1 is from an older coordinator (this build "
                      "reads version %u): prepare again at an upgraded coordinator",
                      BUS_TOKEN_VERSION);
    if (version > BUS_TOKEN_VERSION)
        return s_fail(err, errlen,
                      "token payload: token version %u is from a newer coordinator (this build "
                      "reads version %u): upgrade this client",
                      version, BUS_TOKEN_VERSION);
    if (version != BUS_TOKEN_VERSION)
        return s_fail(err, errlen, "token payload: version %u, this build reads %u", version,
                      BUS_TOKEN_VERSION);
    return 0;
}

static int s_decode_header(const uint8_t *buf, size_t len, bus_token_view_t *view,
                           uint32_t *n_entries, char *err, size_t errlen)
{
    if (len < BUS_TOKEN_HEADER_BYTES)
        return s_fail(err, errlen, "token payload: %zu bytes, shorter than its %u-byte header", len,
                      BUS_TOKEN_HEADER_BYTES);
    uint16_t kind = bus_le_get16(buf + 6);
    if (!s_kind_ok(kind))
        return s_fail(err, errlen, "token payload: unknown kind %u", kind);
    uint32_t flags = bus_le_get32(buf + 8);
    if ((flags & ~BUS_TOKEN_F_KNOWN) != 0)
        return s_fail(err, errlen,
                      "token payload: unknown flag bits 0x%x (this build knows 0x%x): minted by "
                      "a newer coordinator",
                      flags & ~BUS_TOKEN_F_KNOWN, BUS_TOKEN_F_KNOWN);
    uint16_t n_tiers = bus_le_get16(buf + 12);
    if (n_tiers > BUS_TOKEN_MAX_TIERS)
        return s_fail(err, errlen, "token payload: %u tiers, at most %u", n_tiers,
                      BUS_TOKEN_MAX_TIERS);
    if (bus_le_get16(buf + 14) != 0 || bus_le_get32(buf + 60) != 0)
        return s_fail(err, errlen, "token payload: reserved header field is not 0");
    uint32_t n_get = bus_le_get32(buf + 20), n = bus_le_get32(buf + 16);
    if (kind != BUS_TOKEN_GET_PUT && n_get != 0)
        return s_fail(err, errlen,
                      "token payload: n_get %u on a kind %u token (only get+put windows split "
                      "their entries)",
                      n_get, kind);
    if (!s_split_ok(kind, flags, n_get, n))
        return s_fail(err, errlen, "token payload: a get+put token with n_get %u of %u entries%s",
                      n_get, n,
                      n_get <= n ? " marked exportable (a combined window never is)" : "");
    view->kind = (bus_token_kind_t)kind;
    view->n_tiers = n_tiers;
    view->meta = (bus_token_meta_t){.flags = flags,
                                    .n_get = n_get,
                                    .token_id = bus_le_get64(buf + 24),
                                    .issuer = bus_le_get64(buf + 32),
                                    .leader_epoch = bus_le_get64(buf + 40),
                                    .expiry_ms = bus_le_get64(buf + 48),
                                    .instance = bus_le_get32(buf + 56)};
    *n_entries = bus_le_get32(buf + 16);
    return 0;
}

/* Entries then the MAC trailer must fill the rest of the payload exactly. */
static int s_decode_rest(const uint8_t *buf, size_t len, size_t off, uint32_t n_entries,
                         bus_token_view_t *view, char *err, size_t errlen)
{
    uint64_t rest = len - off;
    uint64_t ebytes = (uint64_t)n_entries * BUS_TOKEN_ENTRY_BYTES;
    if (rest < ebytes + BUS_TOKEN_TRAILER_BYTES)
        return s_fail(err, errlen,
                      "token payload: %zu entry bytes for %u entries of %u bytes and the %u-byte "
                      "MAC trailer",
                      len - off, n_entries, BUS_TOKEN_ENTRY_BYTES, BUS_TOKEN_TRAILER_BYTES);
    const uint8_t *t = buf + off + ebytes;
    uint16_t alg = bus_le_get16(t), mac_len = bus_le_get16(t + 2);
    if (rest != ebytes + BUS_TOKEN_TRAILER_BYTES + mac_len)
        return s_fail(err, errlen,
                      "token payload: %zu entry bytes for %u entries of %u bytes and a MAC "
                      "trailer of %u + %u bytes",
                      len - off, n_entries, BUS_TOKEN_ENTRY_BYTES, BUS_TOKEN_TRAILER_BYTES,
                      mac_len);
    if (alg != BUS_TOKEN_MAC_NONE && alg != BUS_TOKEN_MAC_HMAC512_256)
        return s_fail(err, errlen,
                      "token payload: MAC algorithm %u is unknown to this build (it knows 0: "
                      "none, 1: HMAC-SHA-512/256)",
                      alg);
    if (alg == BUS_TOKEN_MAC_NONE && mac_len != 0)
        return s_fail(err, errlen, "token payload: MAC algorithm 0 (none) with a %u-byte MAC",
                      mac_len);
    if (alg == BUS_TOKEN_MAC_HMAC512_256 && mac_len != BUS_TOKEN_MAC_HMAC_BYTES)
        return s_fail(err, errlen,
                      "token payload: MAC algorithm 1 (HMAC-SHA-512/256) with a %u-byte MAC, "
                      "it has %u",
                      mac_len, BUS_TOKEN_MAC_HMAC_BYTES);
    for (uint32_t i = 0; i < n_entries; i++) {
        const uint8_t *e = buf + off + (size_t)i * BUS_TOKEN_ENTRY_BYTES;
        uint16_t tier = bus_le_get16(e), src = bus_le_get16(e + 2);
        if (!s_entry_ok(view->kind, view->n_tiers, tier, src))
            return s_fail(err, errlen,
                          "token payload: entry %u names tier %u / source %u (%u tiers, kind %u)",
                          i, tier, src, view->n_tiers, (unsigned)view->kind);
    }
    view->n_entries = n_entries;
    view->entries = buf + off;
    view->mac_alg = alg;
    view->mac_len = mac_len;
    view->mac = mac_len ? t + BUS_TOKEN_TRAILER_BYTES : NULL;
    view->mac_covered = (size_t)(t - buf);
    return 0;
}

int bus_token_decode(const uint8_t *buf, size_t len, bus_token_view_t *view, char *err,
                     size_t errlen)
{
    if (err && errlen > 0)
        err[0] = '\0';
    if (!view)
        return s_fail(err, errlen, "token payload: no view");
    memset(view, 0, sizeof *view);
    uint32_t n_entries = 0;
    size_t off = BUS_TOKEN_HEADER_BYTES;
    int rc = s_check_prefix(buf, len, err, errlen);
    if (rc == 0)
        rc = s_decode_header(buf, len, view, &n_entries, err, errlen);
    if (rc == 0)
        rc = s_decode_tiers(buf, len, &off, view, err, errlen);
    if (rc == 0)
        rc = s_decode_rest(buf, len, off, n_entries, view, err, errlen);
    if (rc < 0)
        memset(view, 0, sizeof *view);
    return rc;
}

void bus_token_entry_at(const bus_token_view_t *view, uint32_t i, bus_token_entry_t *out)
{
    memset(out, 0, sizeof *out);
    if (!view || i >= view->n_entries || !view->entries)
        return;
    const uint8_t *e = view->entries + (size_t)i * BUS_TOKEN_ENTRY_BYTES;
    out->tier = bus_le_get16(e);
    out->src_tier = bus_le_get16(e + 2);
    out->size = bus_le_get32(e + 4);
    out->slot = bus_le_get64(e + 8);
    out->src_slot = bus_le_get64(e + 16);
}
