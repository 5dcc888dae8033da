/* test_bus_token.c — the token payload codec (bus/bus_token.h, version 2): a round
 * trip keeps every field and the metadata, the encoded bytes follow the documented
 * little-endian layout, decoding refuses every malformed payload (DESIGN.md §5:
 * never trust input) without reading past its length, and refuses what it does not
 * understand (bus_token.h forward compatibility rule; DESIGN.md §14: one versioned
 * format) with a message a person can act on. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus_token.h"
#include "bus_token_mac.h"

static void s_tiers(bus_token_tier_t t[2])
{
    memset(t, 0, 2 * sizeof t[0]);
    t[0].tier_id = 1;
    t[0].slot_size = 262144;
    t[0].epoch = 0x1122334455667788ull;
    strcpy(t[0].endpoint, "tcp://127.0.0.1:7710");
    strcpy(t[0].shm, "/kvtier-kvtier-host0");
    strcpy(t[0].host, "6a1c0f3e-0000-4000-8000-000000000001");
    t[1].tier_id = 2;
    t[1].slot_size = 2u << 20;
    t[1].epoch = 7;
    strcpy(t[1].endpoint, "tcp://10.0.0.2:7711");
}

static const bus_token_meta_t s_meta = {.flags = BUS_TOKEN_F_EXPORTABLE,
                                        .token_id = 0x0102030405060708ull,
                                        .issuer = 0xA1A2A3A4A5A6A7A8ull,
                                        .leader_epoch = 0xB1B2B3B4B5B6B7B8ull,
                                        .expiry_ms = 1700000000123ull,
                                        .instance = 0xC1C2C3C4u};

static size_t s_encode(bus_token_kind_t kind, const bus_token_entry_t *e, uint32_t n, uint8_t *buf,
                       size_t cap)
{
    bus_token_tier_t t[2];
    s_tiers(t);
    size_t len = 0;
    assert_int_equal(bus_token_encode(kind, &s_meta, t, 2, e, n, buf, cap, &len), 0);
    assert_int_equal(len, bus_token_encoded_size(t, 2, n));
    return len;
}

/* bus_token.h: a decoded payload gives back every tier and entry field and every
 * metadata field encoded (flags, token id, issuer, leader epoch, expiry, instance),
 * with MAC none covering everything before the trailer. */
static void test_round_trip_keeps_every_field(void **state)
{
    (void)state;
    bus_token_entry_t e[3] = {
        {.tier = 0, .src_tier = BUS_TOKEN_NO_TIER, .size = 4096, .slot = 5},
        {.tier = 1, .src_tier = BUS_TOKEN_NO_TIER, .size = 1, .slot = 0xFFFFFFFFull + 3},
        {.tier = 0, .src_tier = BUS_TOKEN_NO_TIER, .size = 0xFFFFFFFFu, .slot = 0},
    };
    uint8_t buf[2048];
    size_t len = s_encode(BUS_TOKEN_GET, e, 3, buf, sizeof buf);

    bus_token_view_t v;
    char err[128];
    assert_int_equal(bus_token_decode(buf, len, &v, err, sizeof err), 0);
    assert_int_equal(v.kind, BUS_TOKEN_GET);
    assert_int_equal(v.meta.flags, BUS_TOKEN_F_EXPORTABLE);
    assert_int_equal(v.meta.n_get, 0);
    assert_true(v.meta.token_id == s_meta.token_id);
    assert_true(v.meta.issuer == s_meta.issuer);
    assert_true(v.meta.leader_epoch == s_meta.leader_epoch);
    assert_true(v.meta.expiry_ms == s_meta.expiry_ms);
    assert_int_equal(v.meta.instance, s_meta.instance);
    assert_int_equal(v.mac_alg, BUS_TOKEN_MAC_NONE);
    assert_int_equal(v.mac_len, 0);
    assert_null(v.mac);
    assert_int_equal(v.mac_covered, len - BUS_TOKEN_TRAILER_BYTES);
    assert_int_equal(v.n_tiers, 2);
    assert_int_equal(v.n_entries, 3);
    bus_token_tier_t t[2];
    s_tiers(t);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(v.tiers[i].tier_id, t[i].tier_id);
        assert_true(v.tiers[i].slot_size == t[i].slot_size);
        assert_true(v.tiers[i].epoch == t[i].epoch);
        assert_string_equal(v.tiers[i].endpoint, t[i].endpoint);
        assert_string_equal(v.tiers[i].shm, t[i].shm);
        assert_string_equal(v.tiers[i].host, t[i].host);
    }
    for (uint32_t i = 0; i < 3; i++) {
        bus_token_entry_t got;
        bus_token_entry_at(&v, i, &got);
        assert_int_equal(got.tier, e[i].tier);
        assert_int_equal(got.src_tier, e[i].src_tier);
        assert_int_equal(got.size, e[i].size);
        assert_true(got.slot == e[i].slot);
        assert_true(got.src_slot == e[i].src_slot);
    }
}

/* bus_token.h layout v2: a 64-byte header ("KVT1", u16 version 2, u16 kind, u32
 * flags, u16 n_tiers, u16 0, u32 n_entries, u32 n_get, u64 token_id, u64 issuer,
 * u64 leader_epoch, u64 expiry_ms, u32 instance, u32 0), the tier table, 24-byte
 * entries, then the MAC trailer (u16 alg 0, u16 len 0), little-endian. */
static void test_encoding_follows_the_documented_layout(void **state)
{
    (void)state;
    bus_token_entry_t e = {
        .tier = 1, .src_tier = 0, .size = 0x01020304, .slot = 0x0A0B, .src_slot = 9};
    uint8_t buf[1024];
    size_t len = s_encode(BUS_TOKEN_PREFETCH, &e, 1, buf, sizeof buf);
    const uint8_t hdr[BUS_TOKEN_HEADER_BYTES] = {
        'K',  'V',  'T',  '1',  2,    0,    3,    0,    1,    0,    0,    0,    2,
        0,    0,    0,    1,    0,    0,    0,    0,    0,    0,    0,    8,    7,
        6,    5,    4,    3,    2,    1,    0xA8, 0xA7, 0xA6, 0xA5, 0xA4, 0xA3, 0xA2,
        0xA1, 0xB8, 0xB7, 0xB6, 0xB5, 0xB4, 0xB3, 0xB2, 0xB1, 0x7B, 0x68, 0xE5, 0xCF,
        0x8B, 0x01, 0,    0,    0xC4, 0xC3, 0xC2, 0xC1, 0,    0,    0,    0};
    assert_memory_equal(buf, hdr, sizeof hdr);
    /* first tier: u32 id = 1 right after the header */
    assert_int_equal(buf[BUS_TOKEN_HEADER_BYTES], 1);
    const uint8_t *p = buf + len - BUS_TOKEN_TRAILER_BYTES - BUS_TOKEN_ENTRY_BYTES;
    const uint8_t want[24] = {1, 0, 0, 0, 4, 3, 2, 1, 0x0B, 0x0A, 0, 0,
                              0, 0, 0, 0, 9, 0, 0, 0, 0,    0,    0, 0};
    assert_memory_equal(p, want, sizeof want);
    const uint8_t trailer[4] = {0, 0, 0, 0};
    assert_memory_equal(buf + len - 4, trailer, 4);
}

/* A token with no entries (single-tier prefetch: nothing to promote) is valid. */
static void test_empty_token_round_trips(void **state)
{
    (void)state;
    uint8_t buf[128];
    size_t len = 0;
    assert_int_equal(
        bus_token_encode(BUS_TOKEN_PREFETCH, NULL, NULL, 0, NULL, 0, buf, sizeof buf, &len), 0);
    assert_int_equal(len, BUS_TOKEN_HEADER_BYTES + BUS_TOKEN_TRAILER_BYTES);
    bus_token_view_t v;
    assert_int_equal(bus_token_decode(buf, len, &v, NULL, 0), 0);
    assert_int_equal(v.n_entries, 0);
    assert_int_equal(v.n_tiers, 0);
    assert_true(v.meta.token_id == 0 && v.meta.leader_epoch == 0 && v.meta.expiry_ms == 0);
}

/* Encode refuses what it could not represent: bad kind, entry naming no tier, a get
 * entry with a source, unterminated strings, too many tiers, a short buffer; and
 * what v2 reserves: unknown flag bits, n_get outside get+put. */
static void test_encode_refuses_bad_input(void **state)
{
    (void)state;
    bus_token_tier_t t[2];
    s_tiers(t);
    uint8_t buf[2048];
    size_t len;
    bus_token_entry_t e = {.tier = 0, .src_tier = BUS_TOKEN_NO_TIER};
    assert_int_equal(
        bus_token_encode((bus_token_kind_t)9, NULL, t, 2, &e, 1, buf, sizeof buf, &len), -EINVAL);
    bus_token_meta_t m = {.flags = 0x2};
    assert_int_equal(bus_token_encode(BUS_TOKEN_GET, &m, t, 2, &e, 1, buf, sizeof buf, &len),
                     -EINVAL);
    m = (bus_token_meta_t){.n_get = 1};
    assert_int_equal(bus_token_encode(BUS_TOKEN_GET, &m, t, 2, &e, 1, buf, sizeof buf, &len),
                     -EINVAL);
    e.tier = 2;
    assert_int_equal(bus_token_encode(BUS_TOKEN_GET, NULL, t, 2, &e, 1, buf, sizeof buf, &len),
                     -EINVAL);
    e.tier = 0;
    e.src_tier = 1;
    assert_int_equal(bus_token_encode(BUS_TOKEN_PUT, NULL, t, 2, &e, 1, buf, sizeof buf, &len),
                     -EINVAL);
    e.src_tier = BUS_TOKEN_NO_TIER;
    assert_int_equal(bus_token_encode(BUS_TOKEN_PREFETCH, NULL, t, 2, &e, 1, buf, sizeof buf, &len),
                     -EINVAL);
    memset(t[1].shm, 'x', sizeof t[1].shm);
    assert_int_equal(bus_token_encoded_size(t, 2, 1), 0);
    assert_int_equal(bus_token_encode(BUS_TOKEN_GET, NULL, t, 2, &e, 1, buf, sizeof buf, &len),
                     -EINVAL);
    s_tiers(t);
    assert_int_equal(bus_token_encoded_size(t, BUS_TOKEN_MAX_TIERS + 1, 0), 0);
    assert_int_equal(bus_token_encode(BUS_TOKEN_GET, NULL, t, 2, &e, 1, buf, 20, &len), -ENOSPC);
    assert_int_equal(len, 0);
    /* the size bound the scheduler and client allocate by holds the longest token */
    for (int i = 0; i < 2; i++) {
        memset(t[i].endpoint, 'e', BUS_TOKEN_ENDPOINT_MAX - 1);
        memset(t[i].shm, 's', BUS_TOKEN_NAME_MAX - 1);
        memset(t[i].host, 'h', BUS_TOKEN_NAME_MAX - 1);
    }
    assert_true(bus_token_encoded_size(t, 2, 5) + BUS_TOKEN_MAC_MAX == BUS_TOKEN_MAX_BYTES(2, 5));
}

static void s_expect_bad(const uint8_t *buf, size_t len, const char *needle)
{
    bus_token_view_t v;
    char err[160];
    assert_int_equal(bus_token_decode(buf, len, &v, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, needle));
    assert_int_equal(v.n_entries, 0);
    assert_null(v.entries);
}

/* Offsets in a payload from s_encode with 2 entries (s_tiers strings). */
#define S_T0 BUS_TOKEN_HEADER_BYTES /* tier 0 */
#define S_T0_EP_LEN (S_T0 + 20)     /* tier 0 endpoint length */

/* Decode checks every length and index (bus_token.h): each mutation is refused with
 * a message naming what is wrong. */
static void test_decode_refuses_malformed_payloads(void **state)
{
    (void)state;
    bus_token_entry_t e[2] = {{.tier = 0, .src_tier = BUS_TOKEN_NO_TIER, .slot = 1},
                              {.tier = 1, .src_tier = BUS_TOKEN_NO_TIER, .slot = 2}};
    uint8_t good[1024], b[1024];
    size_t len = s_encode(BUS_TOKEN_PUT, e, 2, good, sizeof good);
    size_t last = len - BUS_TOKEN_TRAILER_BYTES - BUS_TOKEN_ENTRY_BYTES; /* entry 1 */

    s_expect_bad(good, 5, "header");
    s_expect_bad(good, 10, "header");
    memcpy(b, good, len);
    b[0] = 'X';
    s_expect_bad(b, len, "magic");
    memcpy(b, good, len);
    b[4] = 0;
    s_expect_bad(b, len, "version 0");
    memcpy(b, good, len);
    b[6] = 7;
    s_expect_bad(b, len, "kind");
    memcpy(b, good, len);
    b[12] = 40;
    s_expect_bad(b, len, "tiers");
    memcpy(b, good, len);
    b[14] = 1;
    s_expect_bad(b, len, "reserved");
    memcpy(b, good, len);
    b[63] = 1;
    s_expect_bad(b, len, "reserved");
    memcpy(b, good, len);
    b[16] = 3; /* claims 3 entries, carries 2 */
    s_expect_bad(b, len, "entry bytes");
    s_expect_bad(good, len - 5, "entry bytes"); /* truncated entry */
    memcpy(b, good, len);
    b[len] = 0;
    s_expect_bad(b, len + 1, "entry bytes"); /* trailing byte */
    memcpy(b, good, len);
    b[last] = 5; /* entry 1 names tier 5 of 2 */
    s_expect_bad(b, len, "entry 1");
    memcpy(b, good, len);
    b[last + 2] = 0; /* a put entry with a source */
    b[last + 3] = 0;
    s_expect_bad(b, len, "entry 1");
    /* tier 0 endpoint length 300 */
    memcpy(b, good, len);
    b[S_T0_EP_LEN] = 0x2C;
    b[S_T0_EP_LEN + 1] = 0x01;
    s_expect_bad(b, len, "endpoint");
    /* NUL inside the endpoint */
    memcpy(b, good, len);
    b[S_T0_EP_LEN + 2 + 3] = 0;
    s_expect_bad(b, len, "NUL");
    /* cut inside the tier table */
    s_expect_bad(good, S_T0 + 30, "cut short");
    s_expect_bad(good, S_T0 + 5, "cut short");
    s_expect_bad(NULL, 0, "header");
}

/* bus_token.h: version 1 (an older coordinator's 16-byte header) is refused by
 * name with what to do, never read as v2; so is a version newer than this build. */
static void test_v1_and_newer_versions_are_refused(void **state)
{
    (void)state;
    /* a whole v1 get token, hand-built: header, one tier (id 1, slot 4096, epoch 1,
     * endpoint "tcp://h:1", no shm, no host), one entry (tier 0, slot 5, 4096 bytes) */
    const uint8_t v1[] = {'K', 'V', 'T', '1', 1, 0, 1,    0, 1,    0,    0,   0,    1,   0,   0,
                          0,   1,   0,   0,   0, 0, 0x10, 0, 0,    0,    0,   0,    0,   1,   0,
                          0,   0,   0,   0,   0, 0, 9,    0, 't',  'c',  'p', ':',  '/', '/', 'h',
                          ':', '1', 0,   0,   0, 0, 0,    0, 0xFF, 0xFF, 0,   0x10, 0,   0,   5,
                          0,   0,   0,   0,   0, 0, 0,    0, 0,    0,    0,   0,    0,   0,   0};
    s_expect_bad(v1, sizeof v1, "token version 1 is from an older coordinator");
    s_expect_bad(v1, sizeof v1, "prepare again");
    s_expect_bad(v1, 16, "token version 1 is from an older coordinator"); /* empty v1 token */
    s_expect_bad(v1, 6, "token version 1"); /* named as soon as the version is there */

    uint8_t good[1024];
    bus_token_entry_t e = {.tier = 0, .src_tier = BUS_TOKEN_NO_TIER};
    size_t len = s_encode(BUS_TOKEN_GET, &e, 1, good, sizeof good);
    good[4] = 3;
    s_expect_bad(good, len, "token version 3 is from a newer coordinator");
}

/* bus_token.h forward compatibility: any flag bit this build does not know is
 * refused (EXPORTABLE is known and carried). */
static void test_unknown_flag_bits_are_refused(void **state)
{
    (void)state;
    uint8_t good[1024], b[1024];
    bus_token_entry_t e = {.tier = 0, .src_tier = BUS_TOKEN_NO_TIER};
    size_t len = s_encode(BUS_TOKEN_GET, &e, 1, good, sizeof good);
    for (int bit = 1; bit < 32; bit++) {
        memcpy(b, good, len);
        b[8 + bit / 8] |= (uint8_t)(1u << (bit % 8));
        s_expect_bad(b, len, "unknown flag bits");
    }
    memcpy(b, good, len);
    b[8] = 0; /* EXPORTABLE cleared: still a valid token */
    bus_token_view_t v;
    assert_int_equal(bus_token_decode(b, len, &v, NULL, 0), 0);
    assert_int_equal(v.meta.flags, 0);
}

/* bus_token.h, kind 4: a get+put token splits its entries at n_get: [0, n_get)
 * the pinned hits, [n_get, n) the reserved misses; the split round-trips, and
 * n_get 0 (all misses) and n (all hits) are tokens too. */
static void test_get_put_splits_its_entries(void **state)
{
    (void)state;
    bus_token_tier_t t[2];
    s_tiers(t);
    bus_token_entry_t e[3] = {{.tier = 1, .src_tier = BUS_TOKEN_NO_TIER, .size = 7, .slot = 11},
                              {.tier = 0, .src_tier = BUS_TOKEN_NO_TIER, .size = 8, .slot = 12},
                              {.tier = 0, .src_tier = BUS_TOKEN_NO_TIER, .size = 9, .slot = 13}};
    uint8_t buf[2048];
    for (uint32_t n_get = 0; n_get <= 3; n_get++) {
        bus_token_meta_t m = {.n_get = n_get, .token_id = 5, .issuer = 6, .expiry_ms = 7};
        size_t len = 0;
        assert_int_equal(bus_token_encode(BUS_TOKEN_GET_PUT, &m, t, 2, e, 3, buf, sizeof buf, &len),
                         0);
        assert_int_equal(buf[6], BUS_TOKEN_GET_PUT);
        assert_int_equal(buf[20], n_get);
        bus_token_view_t v;
        char err[160];
        assert_int_equal(bus_token_decode(buf, len, &v, err, sizeof err), 0);
        assert_int_equal(v.kind, BUS_TOKEN_GET_PUT);
        assert_int_equal(v.meta.n_get, n_get);
        assert_int_equal(v.n_entries, 3);
        for (uint32_t i = 0; i < 3; i++) {
            bus_token_entry_t o;
            bus_token_entry_at(&v, i, &o);
            assert_true(o.slot == e[i].slot && o.size == e[i].size && o.tier == e[i].tier);
        }
    }
}

/* A get+put token's split is checked both ways: n_get above n_entries or an
 * EXPORTABLE combined token is refused by encode and decode, and n_get is
 * refused on any other kind. */
static void test_get_put_split_is_checked(void **state)
{
    (void)state;
    bus_token_tier_t t[2];
    s_tiers(t);
    bus_token_entry_t e = {.tier = 0, .src_tier = BUS_TOKEN_NO_TIER, .size = 4, .slot = 1};
    uint8_t buf[2048], b[2048];
    size_t len = 0;
    bus_token_meta_t m = {.n_get = 2};
    assert_int_equal(bus_token_encode(BUS_TOKEN_GET_PUT, &m, t, 2, &e, 1, buf, sizeof buf, &len),
                     -EINVAL);
    m = (bus_token_meta_t){.n_get = 1, .flags = BUS_TOKEN_F_EXPORTABLE};
    assert_int_equal(bus_token_encode(BUS_TOKEN_GET_PUT, &m, t, 2, &e, 1, buf, sizeof buf, &len),
                     -EINVAL);
    e.src_tier = 1; /* a get+put entry has no source */
    m.flags = 0;
    assert_int_equal(bus_token_encode(BUS_TOKEN_GET_PUT, &m, t, 2, &e, 1, buf, sizeof buf, &len),
                     -EINVAL);
    e.src_tier = BUS_TOKEN_NO_TIER;
    assert_int_equal(bus_token_encode(BUS_TOKEN_GET_PUT, &m, t, 2, &e, 1, buf, sizeof buf, &len),
                     0);
    memcpy(b, buf, len);
    b[20] = 2;
    s_expect_bad(b, len, "n_get 2 of 1 entries");
    memcpy(b, buf, len);
    b[8] = BUS_TOKEN_F_EXPORTABLE;
    s_expect_bad(b, len, "exportable");
    size_t glen = s_encode(BUS_TOKEN_GET, &e, 1, b, sizeof b);
    b[20] = 1;
    s_expect_bad(b, glen, "n_get 1");
}

/* The MAC covers n_get: a sealed get+put token whose split is moved (a reader
 * widening its reads into the put half) no longer verifies. */
static void test_get_put_split_is_sealed(void **state)
{
    (void)state;
    static const uint8_t secret[BUS_SECRET_BYTES] = "unit-test-secret-of-32-bytes-ok";
    bus_token_tier_t t[2];
    s_tiers(t);
    bus_token_entry_t e[2] = {{.tier = 0, .src_tier = BUS_TOKEN_NO_TIER, .size = 4, .slot = 1},
                              {.tier = 0, .src_tier = BUS_TOKEN_NO_TIER, .size = 4, .slot = 2}};
    bus_token_meta_t m = {.n_get = 1, .expiry_ms = 99};
    uint8_t buf[2048];
    size_t len = 0;
    assert_int_equal(bus_token_encode(BUS_TOKEN_GET_PUT, &m, t, 2, e, 2, buf, sizeof buf, &len), 0);
    bus_token_key_t key;
    assert_int_equal(bus_token_key_derive(secret, "c1", &key), 0);
    assert_int_equal(bus_token_seal(&key, buf, sizeof buf, &len), 0);
    bus_token_view_t v;
    assert_int_equal(bus_token_decode(buf, len, &v, NULL, 0), 0);
    assert_int_equal(bus_token_verify(&key, &v, buf), 0);
    buf[20] = 2; /* both entries as gets */
    assert_int_equal(bus_token_decode(buf, len, &v, NULL, 0), 0);
    assert_int_equal(bus_token_verify(&key, &v, buf), -EBADMSG);
}

/* Appends a MAC trailer of algorithm alg and mac_len bytes (carrying `carry`
 * of them) to a good payload whose own trailer is cut off; returns the length. */
static size_t s_with_trailer(const uint8_t *good, size_t len, uint16_t alg, uint16_t mac_len,
                             size_t carry, uint8_t *b)
{
    size_t n = len - BUS_TOKEN_TRAILER_BYTES;
    memcpy(b, good, n);
    b[n] = (uint8_t)alg;
    b[n + 1] = (uint8_t)(alg >> 8);
    b[n + 2] = (uint8_t)mac_len;
    b[n + 3] = (uint8_t)(mac_len >> 8);
    memset(b + n + 4, 0x5A, carry);
    return n + 4 + carry;
}

/* bus_token.h forward compatibility: a MAC algorithm this build does not know is
 * refused, whatever its MAC; algorithm 0 (none) carries no MAC bytes. */
static void test_unknown_mac_algorithms_are_refused(void **state)
{
    (void)state;
    uint8_t good[1024], b[1200];
    bus_token_entry_t e = {.tier = 0, .src_tier = BUS_TOKEN_NO_TIER};
    size_t len = s_encode(BUS_TOKEN_GET, &e, 1, good, sizeof good);
    s_expect_bad(b, s_with_trailer(good, len, 2, 32, 32, b), "MAC algorithm 2 is unknown");
    s_expect_bad(b, s_with_trailer(good, len, 0xFFFF, 16, 16, b), "MAC algorithm 65535");
    s_expect_bad(b, s_with_trailer(good, len, 0, 8, 8, b), "(none) with a 8-byte MAC");
    /* algorithm 1 (HMAC-SHA-512/256) has exactly 32 MAC bytes */
    s_expect_bad(b, s_with_trailer(good, len, 1, 0, 0, b), "with a 0-byte MAC, it has 32");
    s_expect_bad(b, s_with_trailer(good, len, 1, 16, 16, b), "with a 16-byte MAC, it has 32");
    bus_token_view_t v;
    char err[256];
    size_t n = s_with_trailer(good, len, 1, 32, 32, b);
    assert_int_equal(bus_token_decode(b, n, &v, err, sizeof err), 0);
    assert_int_equal(v.mac_alg, BUS_TOKEN_MAC_HMAC512_256);
    assert_int_equal(v.mac_len, 32);
}

/* bus_token_mac.h: a sealed token verifies under its cluster's key only, and any
 * byte changed under the MAC (or in it) makes it fail. */
static void test_seal_and_verify(void **state)
{
    (void)state;
    static const uint8_t secret[BUS_SECRET_BYTES] = "unit-test-secret-of-32-bytes-ok";
    uint8_t buf[1200];
    bus_token_entry_t e = {.tier = 0, .src_tier = BUS_TOKEN_NO_TIER, .size = 9, .slot = 4};
    size_t len = s_encode(BUS_TOKEN_PUT, &e, 1, buf, sizeof buf);
    bus_token_key_t key, other;
    assert_int_equal(bus_token_key_derive(secret, "c1", &key), 0);
    assert_int_equal(bus_token_key_derive(secret, "c2", &other), 0);
    assert_memory_not_equal(key.k, other.k, sizeof key.k);
    bus_token_view_t v;
    char err[256];
    assert_int_equal(bus_token_decode(buf, len, &v, err, sizeof err), 0);
    assert_int_equal(bus_token_verify(&key, &v, buf), -EPERM); /* MAC none */
    assert_int_equal(bus_token_seal(&key, buf, len + 31, &len), -ENOSPC);
    size_t plain = len;
    assert_int_equal(bus_token_seal(&key, buf, sizeof buf, &len), 0);
    assert_int_equal(len, plain + BUS_TOKEN_MAC_HMAC_BYTES);
    assert_int_equal(bus_token_seal(&key, buf, sizeof buf, &len), -EINVAL); /* sealed already */
    assert_int_equal(bus_token_decode(buf, len, &v, err, sizeof err), 0);
    assert_int_equal(bus_token_verify(&key, &v, buf), 0);
    assert_int_equal(bus_token_verify(&other, &v, buf), -EBADMSG);
    for (size_t i = 0; i < len; i++) {
        buf[i] ^= 0x40;
        if (bus_token_decode(buf, len, &v, err, sizeof err) == 0)
            assert_int_equal(bus_token_verify(&key, &v, buf), -EBADMSG);
        buf[i] ^= 0x40;
    }
}

/* The secret file: exactly 32 bytes, readable by its owner only; keygen never
 * overwrites. */
static void test_secret_file_rules(void **state)
{
    (void)state;
    char dir[] = "/tmp/kvt-secret-XXXXXX", path[64], err[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/secret", dir);
    uint8_t s[BUS_SECRET_BYTES], t[BUS_SECRET_BYTES];
    assert_int_equal(bus_secret_load(path, s, err, sizeof err), -1);
    assert_non_null(strstr(err, "kvtier keygen --secret"));
    assert_int_equal(bus_secret_create(path, err, sizeof err), 0);
    assert_int_equal(bus_secret_create(path, err, sizeof err), -1);
    assert_non_null(strstr(err, "never overwritten"));
    assert_int_equal(bus_secret_load(path, s, err, sizeof err), 0);
    assert_int_equal(chmod(path, 0640), 0);
    assert_int_equal(bus_secret_load(path, t, err, sizeof err), -1);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "chmod 600"));
    assert_int_equal(chmod(path, 0600), 0);
    FILE *f = fopen(path, "ab");
    assert_non_null(f);
    fputc('x', f);
    fclose(f);
    assert_int_equal(bus_secret_load(path, t, err, sizeof err), -1);
    assert_non_null(strstr(err, "33 bytes"));
    unlink(path);
    rmdir(dir);
}

/* bus_token.h: the payload ends exactly after the MAC; a trailer cut short, or
 * one that claims more (or fewer) MAC bytes than follow, is refused. */
static void test_truncated_mac_trailer_is_refused(void **state)
{
    (void)state;
    uint8_t good[1024], b[1200];
    bus_token_entry_t e = {.tier = 0, .src_tier = BUS_TOKEN_NO_TIER};
    size_t len = s_encode(BUS_TOKEN_GET, &e, 1, good, sizeof good);
    for (size_t cut = 1; cut <= BUS_TOKEN_TRAILER_BYTES; cut++)
        s_expect_bad(good, len - cut, "MAC trailer");
    s_expect_bad(b, s_with_trailer(good, len, 0, 16, 8, b), "MAC trailer of 4 + 16");
    s_expect_bad(b, s_with_trailer(good, len, 1, 16, 8, b), "MAC trailer of 4 + 16");
    s_expect_bad(b, s_with_trailer(good, len, 0, 0, 3, b), "MAC trailer of 4 + 0");
}

/* Every truncation of a valid payload is refused (never read past len: ASan checks). */
static void test_every_truncation_is_refused(void **state)
{
    (void)state;
    bus_token_entry_t e[2] = {{.tier = 1, .src_tier = BUS_TOKEN_NO_TIER, .slot = 3},
                              {.tier = 0, .src_tier = BUS_TOKEN_NO_TIER, .slot = 4}};
    uint8_t good[1024];
    size_t len = s_encode(BUS_TOKEN_GET, e, 2, good, sizeof good);
    for (size_t n = 0; n < len; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, good, n);
        bus_token_view_t v;
        assert_int_equal(bus_token_decode(copy, n, &v, NULL, 0), -EINVAL);
        free(copy);
    }
}

/* Decode checks every length (bus_token.h): any change to any byte of any length
 * field (n_tiers, n_entries, n_get, each tier's three string lengths, mac_len) is
 * refused, never read as another valid token (ASan checks no read past len). */
static void test_mutated_length_fields_are_refused(void **state)
{
    (void)state;
    bus_token_entry_t e[2] = {{.tier = 0, .src_tier = BUS_TOKEN_NO_TIER, .slot = 1},
                              {.tier = 1, .src_tier = BUS_TOKEN_NO_TIER, .slot = 2}};
    uint8_t good[1024];
    size_t len = s_encode(BUS_TOKEN_GET, e, 2, good, sizeof good);
    size_t field[16], width[16], nf = 0;
    field[nf] = 12, width[nf++] = 2; /* n_tiers */
    field[nf] = 16, width[nf++] = 4; /* n_entries */
    field[nf] = 20, width[nf++] = 4; /* n_get */
    size_t off = BUS_TOKEN_HEADER_BYTES;
    for (int t = 0; t < 2; t++) {
        off += 20;
        for (int str = 0; str < 3; str++) {
            field[nf] = off, width[nf++] = 2;
            off += 2 + (size_t)(good[off] | good[off + 1] << 8);
        }
    }
    assert_int_equal(off + 2 * BUS_TOKEN_ENTRY_BYTES + BUS_TOKEN_TRAILER_BYTES, len);
    field[nf] = len - 2, width[nf++] = 2; /* mac_len */
    const uint8_t deltas[] = {0x01, 0x02, 0x80, 0xFF};
    for (size_t f = 0; f < nf; f++)
        for (size_t byte = 0; byte < width[f]; byte++)
            for (size_t d = 0; d < sizeof deltas; d++) {
                uint8_t *b = malloc(len);
                memcpy(b, good, len);
                b[field[f] + byte] ^= deltas[d];
                bus_token_view_t v;
                int rc = bus_token_decode(b, len, &v, NULL, 0);
                if (rc != -EINVAL)
                    fail_msg("length field at %zu, byte %zu ^ 0x%02x decoded", field[f], byte,
                             deltas[d]);
                free(b);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_keeps_every_field),
        cmocka_unit_test(test_encoding_follows_the_documented_layout),
        cmocka_unit_test(test_empty_token_round_trips),
        cmocka_unit_test(test_encode_refuses_bad_input),
        cmocka_unit_test(test_decode_refuses_malformed_payloads),
        cmocka_unit_test(test_v1_and_newer_versions_are_refused),
        cmocka_unit_test(test_unknown_flag_bits_are_refused),
        cmocka_unit_test(test_get_put_splits_its_entries),
        cmocka_unit_test(test_get_put_split_is_checked),
        cmocka_unit_test(test_get_put_split_is_sealed),
        cmocka_unit_test(test_unknown_mac_algorithms_are_refused),
        cmocka_unit_test(test_seal_and_verify),
        cmocka_unit_test(test_secret_file_rules),
        cmocka_unit_test(test_truncated_mac_trailer_is_refused),
        cmocka_unit_test(test_every_truncation_is_refused),
        cmocka_unit_test(test_mutated_length_fields_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
