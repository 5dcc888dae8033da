/* test_bus_token.c — the token payload codec (bus/bus_token.h): a round trip keeps
 * every field, the encoded bytes follow the documented little-endian layout, and
 * decoding refuses every malformed payload (DESIGN.md §5: never trust input)
 * without reading past its length. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bus_token.h"

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

static size_t s_encode(bus_token_kind_t kind, const bus_token_entry_t *e, uint32_t n, uint8_t *buf,
                       size_t cap)
{
    bus_token_tier_t t[2];
    s_tiers(t);
    size_t len = 0;
    assert_int_equal(bus_token_encode(kind, t, 2, e, n, buf, cap, &len), 0);
    assert_int_equal(len, bus_token_encoded_size(t, 2, n));
    return len;
}

/* bus_token.h: a decoded payload gives back every tier and entry field encoded. */
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

/* bus_token.h layout: header "KVT1", u16 version, u16 kind, u16 n_tiers, u16 0, u32
 * n_entries; entries 24 bytes little-endian at the end. */
static void test_encoding_follows_the_documented_layout(void **state)
{
    (void)state;
    bus_token_entry_t e = {
        .tier = 1, .src_tier = 0, .size = 0x01020304, .slot = 0x0A0B, .src_slot = 9};
    uint8_t buf[1024];
    size_t len = s_encode(BUS_TOKEN_PREFETCH, &e, 1, buf, sizeof buf);
    const uint8_t hdr[16] = {'K', 'V', 'T', '1', 1, 0, 3, 0, 2, 0, 0, 0, 1, 0, 0, 0};
    assert_memory_equal(buf, hdr, sizeof hdr);
    /* first tier: u32 id = 1 right after the header */
    assert_int_equal(buf[16], 1);
    const uint8_t *p = buf + len - BUS_TOKEN_ENTRY_BYTES;
    const uint8_t want[24] = {1, 0, 0, 0, 4, 3, 2, 1, 0x0B, 0x0A, 0, 0,
                              0, 0, 0, 0, 9, 0, 0, 0, 0,    0,    0, 0};
    assert_memory_equal(p, want, sizeof want);
}

/* A token with no entries (single-tier prefetch: nothing to promote) is valid. */
static void test_empty_token_round_trips(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t len = 0;
    assert_int_equal(bus_token_encode(BUS_TOKEN_PREFETCH, NULL, 0, NULL, 0, buf, sizeof buf, &len),
                     0);
    assert_int_equal(len, 16);
    bus_token_view_t v;
    assert_int_equal(bus_token_decode(buf, len, &v, NULL, 0), 0);
    assert_int_equal(v.n_entries, 0);
    assert_int_equal(v.n_tiers, 0);
}

/* Encode refuses what it could not represent: bad kind, entry naming no tier, a get
 * entry with a source, unterminated strings, too many tiers, a short buffer. */
static void test_encode_refuses_bad_input(void **state)
{
    (void)state;
    bus_token_tier_t t[2];
    s_tiers(t);
    uint8_t buf[2048];
    size_t len;
    bus_token_entry_t e = {.tier = 0, .src_tier = BUS_TOKEN_NO_TIER};
    assert_int_equal(bus_token_encode((bus_token_kind_t)9, t, 2, &e, 1, buf, sizeof buf, &len),
                     -EINVAL);
    e.tier = 2;
    assert_int_equal(bus_token_encode(BUS_TOKEN_GET, t, 2, &e, 1, buf, sizeof buf, &len), -EINVAL);
    e.tier = 0;
    e.src_tier = 1;
    assert_int_equal(bus_token_encode(BUS_TOKEN_PUT, t, 2, &e, 1, buf, sizeof buf, &len), -EINVAL);
    e.src_tier = BUS_TOKEN_NO_TIER;
    assert_int_equal(bus_token_encode(BUS_TOKEN_PREFETCH, t, 2, &e, 1, buf, sizeof buf, &len),
                     -EINVAL);
    memset(t[1].shm, 'x', sizeof t[1].shm);
    assert_int_equal(bus_token_encoded_size(t, 2, 1), 0);
    assert_int_equal(bus_token_encode(BUS_TOKEN_GET, t, 2, &e, 1, buf, sizeof buf, &len), -EINVAL);
    s_tiers(t);
    assert_int_equal(bus_token_encoded_size(t, BUS_TOKEN_MAX_TIERS + 1, 0), 0);
    assert_int_equal(bus_token_encode(BUS_TOKEN_GET, t, 2, &e, 1, buf, 20, &len), -ENOSPC);
    assert_int_equal(len, 0);
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

/* Decode checks every length and index (bus_token.h): each mutation is refused with
 * a message naming what is wrong. */
static void test_decode_refuses_malformed_payloads(void **state)
{
    (void)state;
    bus_token_entry_t e[2] = {{.tier = 0, .src_tier = BUS_TOKEN_NO_TIER, .slot = 1},
                              {.tier = 1, .src_tier = BUS_TOKEN_NO_TIER, .slot = 2}};
    uint8_t good[1024], b[1024];
    size_t len = s_encode(BUS_TOKEN_PUT, e, 2, good, sizeof good);

    s_expect_bad(good, 10, "header");
    memcpy(b, good, len);
    b[0] = 'X';
    s_expect_bad(b, len, "magic");
    memcpy(b, good, len);
    b[4] = 2;
    s_expect_bad(b, len, "version");
    memcpy(b, good, len);
    b[6] = 7;
    s_expect_bad(b, len, "kind");
    memcpy(b, good, len);
    b[8] = 40;
    s_expect_bad(b, len, "tiers");
    memcpy(b, good, len);
    b[10] = 1;
    s_expect_bad(b, len, "reserved");
    memcpy(b, good, len);
    b[12] = 3; /* claims 3 entries, carries 2 */
    s_expect_bad(b, len, "entry bytes");
    s_expect_bad(good, len - 1, "entry bytes"); /* truncated entry */
    memcpy(b, good, len);
    b[len] = 0;
    s_expect_bad(b, len + 1, "entry bytes"); /* trailing byte */
    memcpy(b, good, len);
    b[len - BUS_TOKEN_ENTRY_BYTES] = 5; /* entry 1 names tier 5 of 2 */
    s_expect_bad(b, len, "entry 1");
    memcpy(b, good, len);
    b[len - BUS_TOKEN_ENTRY_BYTES + 2] = 0; /* a put entry with a source */
    b[len - BUS_TOKEN_ENTRY_BYTES + 3] = 0;
    s_expect_bad(b, len, "entry 1");
    /* tier 0 endpoint length 300 */
    memcpy(b, good, len);
    b[16 + 20] = 0x2C;
    b[16 + 21] = 0x01;
    s_expect_bad(b, len, "endpoint");
    /* NUL inside the endpoint */
    memcpy(b, good, len);
    b[16 + 22 + 3] = 0;
    s_expect_bad(b, len, "NUL");
    /* cut inside the tier table */
    s_expect_bad(good, 16 + 30, "cut short");
    s_expect_bad(good, 16 + 5, "cut short");
    s_expect_bad(NULL, 0, "header");
}

/* Every truncation of a valid payload is refused (never read past len: ASan checks). */
static void test_every_truncation_is_refused(void **state)
{
    (void)state;
    bus_token_entry_t e = {.tier = 1, .src_tier = BUS_TOKEN_NO_TIER, .slot = 3};
    uint8_t good[1024];
    size_t len = s_encode(BUS_TOKEN_GET, &e, 1, good, sizeof good);
    for (size_t n = 0; n < len; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, good, n);
        bus_token_view_t v;
        assert_int_equal(bus_token_decode(copy, n, &v, NULL, 0), -EINVAL);
        free(copy);
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
        cmocka_unit_test(test_every_truncation_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
