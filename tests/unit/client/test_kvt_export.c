/* test_kvt_export.c — the codec of tokens and results across processes
 * (client/kvt_export.h, issue 11 §3). Rules: what is encoded decodes to the same
 * fields and bytes; every malformed input — cut at any length, any byte altered,
 * another magic, an unknown version or flag, a kind that is not exported, counts
 * and lengths that disagree, strings running past the end, a lease left above the
 * lease, layer-wise state out of bounds, unknown outcome bits — is refused with
 * a message saying what is wrong, never read past its end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>

#include "kvt_export.h"

#define T_N 5u

static uint8_t s_keys[T_N * 16];
static uint8_t s_payload[97];
static uint8_t s_out[T_N] = {1, 0, 3, 2, 1};
static uint64_t s_sums[T_N] = {11, 0, 0x8000000000000001ull, 4, 5};

static kvti_tokx_t s_tokx(void)
{
    for (size_t i = 0; i < sizeof s_keys; i++)
        s_keys[i] = (uint8_t)(i * 7 + 1);
    for (size_t i = 0; i < sizeof s_payload; i++)
        s_payload[i] = (uint8_t)(i ^ 0x5a);
    kvti_tokx_t x = {.kind = 2,
                     .n_keys = T_N,
                     .token_id = 0x1122334455667788ull,
                     .prepare_id = 99,
                     .lease_ms = 30000,
                     .remaining_ms = 29000,
                     .leader_epoch = 3,
                     .bytes_per_block = 8192,
                     .segments = 16,
                     .keys = s_keys,
                     .payload = s_payload,
                     .payload_len = sizeof s_payload};
    snprintf(x.cluster, sizeof x.cluster, "kvtier-prod");
    snprintf(x.instance_id, sizeof x.instance_id, "llama");
    snprintf(x.request_id, sizeof x.request_id, "req-1");
    return x;
}

static kvti_tokr_t s_tokr(void)
{
    (void)s_tokx();
    return (kvti_tokr_t){.kind = 2,
                         .n_keys = T_N,
                         .token_id = 0x1122334455667788ull,
                         .prepare_id = 99,
                         .segments = 16,
                         .seg_next = 8,
                         .seg_bytes = 512,
                         .keys = s_keys,
                         .outcome = s_out,
                         .sums = s_sums};
}

/* Rewrites the trailing checksum so a test reaches the check behind it. */
static void s_reseal(uint8_t *b, size_t len)
{
    uint64_t h = XXH3_64bits(b, len - 8);
    for (int i = 0; i < 8; i++)
        b[len - 8 + (size_t)i] = (uint8_t)(h >> (8 * i));
}

static void s_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void s_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static size_t s_encode_x(uint8_t *b, size_t cap)
{
    kvti_tokx_t x = s_tokx();
    size_t len = 0;
    char err[256];
    assert_int_equal(kvti_tokx_encode(&x, b, cap, &len, err, sizeof err), 0);
    assert_int_equal(len, kvti_tokx_size(&x));
    return len;
}

static size_t s_encode_r(uint8_t *b, size_t cap)
{
    kvti_tokr_t r = s_tokr();
    size_t len = 0;
    char err[256];
    assert_int_equal(kvti_tokr_encode(&r, b, cap, &len, err, sizeof err), 0);
    assert_int_equal(len, kvti_tokr_size(T_N));
    return len;
}

static void s_bad_x(const uint8_t *b, size_t len, const char *want)
{
    kvti_tokx_t x;
    char err[256] = "";
    assert_int_equal(kvti_tokx_decode(b, len, &x, err, sizeof err), -1);
    if (!strstr(err, want))
        fail_msg("token refused with \"%s\", expected it to say \"%s\"", err, want);
}

static void s_bad_r(const uint8_t *b, size_t len, const char *want)
{
    kvti_tokr_t r;
    char err[256] = "";
    assert_int_equal(kvti_tokr_decode(b, len, &r, err, sizeof err), -1);
    if (!strstr(err, want))
        fail_msg("result refused with \"%s\", expected it to say \"%s\"", err, want);
}

/* Rule: a token decodes to the fields it was encoded from. */
static void test_token_round_trip(void **state)
{
    (void)state;
    uint8_t b[1024];
    size_t len = s_encode_x(b, sizeof b);
    kvti_tokx_t y;
    char err[256];
    assert_int_equal(kvti_tokx_decode(b, len, &y, err, sizeof err), 0);
    kvti_tokx_t x = s_tokx();
    assert_int_equal(y.kind, x.kind);
    assert_int_equal(y.n_keys, x.n_keys);
    assert_true(y.token_id == x.token_id && y.prepare_id == x.prepare_id);
    assert_true(y.lease_ms == x.lease_ms && y.remaining_ms == x.remaining_ms);
    assert_true(y.leader_epoch == x.leader_epoch && y.bytes_per_block == x.bytes_per_block);
    assert_int_equal(y.segments, x.segments);
    assert_string_equal(y.cluster, "kvtier-prod");
    assert_string_equal(y.instance_id, "llama");
    assert_string_equal(y.request_id, "req-1");
    assert_memory_equal(y.keys, s_keys, sizeof s_keys);
    assert_int_equal(y.payload_len, sizeof s_payload);
    assert_memory_equal(y.payload, s_payload, sizeof s_payload);
    assert_memory_equal(b, "KVTX\x01\x00", 6);
    /* the size query and a buffer one byte short */
    size_t need = 0;
    assert_int_equal(kvti_tokx_encode(&x, NULL, 0, &need, err, sizeof err), -1);
    assert_int_equal(need, len);
    assert_int_equal(kvti_tokx_encode(&x, b, len - 1, &need, err, sizeof err), -1);
    assert_non_null(strstr(err, "bytes of room"));
}

/* Rule: an empty window (no keys, no payload) travels too. */
static void test_token_empty(void **state)
{
    (void)state;
    kvti_tokx_t x = s_tokx();
    x.n_keys = 0;
    x.payload_len = 0;
    uint8_t b[512];
    size_t len = 0;
    char err[256];
    assert_int_equal(kvti_tokx_encode(&x, b, sizeof b, &len, err, sizeof err), 0);
    kvti_tokx_t y;
    assert_int_equal(kvti_tokx_decode(b, len, &y, err, sizeof err), 0);
    assert_int_equal(y.n_keys, 0);
    assert_int_equal(y.payload_len, 0);
}

/* Rule: cut at any length, or any byte altered, is refused. */
static void test_token_cut_or_altered(void **state)
{
    (void)state;
    uint8_t b[1024];
    size_t len = s_encode_x(b, sizeof b);
    for (size_t l = 0; l < len; l++) {
        uint8_t *cut = malloc(l ? l : 1); /* exactly l bytes: ASan sees a read past them */
        memcpy(cut, b, l);
        kvti_tokx_t x;
        char err[256];
        assert_int_equal(kvti_tokx_decode(cut, l, &x, err, sizeof err), -1);
        free(cut);
    }
    for (size_t i = 0; i < len; i++) {
        uint8_t c[1024];
        memcpy(c, b, len);
        c[i] ^= 0x10;
        kvti_tokx_t x;
        char err[256];
        assert_int_equal(kvti_tokx_decode(c, len, &x, err, sizeof err), -1);
    }
    s_bad_x(b, len - 1, "checksum does not match");
    s_bad_x(b, 3, "too short");
    s_bad_x(NULL, 0, "too short");
}

/* Rule: another magic, another version, unknown flags, a kind not exported. */
static void test_token_magic_version_flags_kind(void **state)
{
    (void)state;
    uint8_t b[1024], c[1024];
    size_t len = s_encode_x(b, sizeof b);
    memcpy(c, b, len);
    memcpy(c, "KVTR", 4);
    s_bad_x(c, len, "not an exported token");
    memcpy(c, b, len);
    c[4] = 2;
    s_reseal(c, len);
    s_bad_x(c, len, "version 2: this library reads version 1 only");
    memcpy(c, b, len);
    c[8] = 1;
    s_reseal(c, len);
    s_bad_x(c, len, "flags 0x1 unknown");
    memcpy(c, b, len);
    c[6] = 4; /* get+put: never exported */
    s_reseal(c, len);
    s_bad_x(c, len, "kind 4 is not get");
    memcpy(c, b, len);
    s_put32(c + 12, 65537);
    s_reseal(c, len);
    s_bad_x(c, len, "65537 keys, at most");
}

/* Rule: lengths and counts that disagree with the bytes there are. */
static void test_token_lengths(void **state)
{
    (void)state;
    uint8_t b[1024], c[1024];
    size_t len = s_encode_x(b, sizeof b);
    memcpy(c, b, len);
    s_put32(c + 12, T_N + 1); /* one key more than there are bytes for */
    s_reseal(c, len);
    s_bad_x(c, len, "after its strings");
    memcpy(c, b, len);
    s_put32(c + 68, sizeof s_payload - 1);
    s_reseal(c, len);
    s_bad_x(c, len, "after its strings");
    memcpy(c, b, len);
    c[72] = 250; /* the cluster name runs past the end of these 90 bytes */
    s_reseal(c, 90);
    s_bad_x(c, 90, "cluster runs past the end");
    memcpy(c, b, len);
    c[72 + 1] = '\0'; /* a NUL inside the cluster name */
    s_reseal(c, len);
    s_bad_x(c, len, "holds a NUL byte");
    memcpy(c, b, len);
    s_put64(c + 40, 30001); /* more lease left than the lease */
    s_reseal(c, len);
    s_bad_x(c, len, "ms of lease left");
    memcpy(c, b, len);
    s_put32(c + 64, 5000); /* segments above KVT_MAX_SEGMENTS */
    s_reseal(c, len);
    s_bad_x(c, len, "segments of a");
    memcpy(c, b, len);
    s_put32(c + 64, 3); /* not a divisor of 8192 */
    s_reseal(c, len);
    s_bad_x(c, len, "segments of a");
}

/* Rule: the encoder refuses what the format cannot carry. */
static void test_token_encode_bounds(void **state)
{
    (void)state;
    uint8_t b[2048];
    size_t len;
    char err[256];
    kvti_tokx_t x = s_tokx();
    memset(x.cluster, 'a', 255);
    x.cluster[255] = '\0';
    assert_int_equal(kvti_tokx_encode(&x, b, sizeof b, &len, err, sizeof err), 0);
    x.kind = 5;
    assert_int_equal(kvti_tokx_encode(&x, b, sizeof b, &len, err, sizeof err), -1);
    x = s_tokx();
    x.remaining_ms = x.lease_ms + 1;
    assert_int_equal(kvti_tokx_encode(&x, b, sizeof b, &len, err, sizeof err), -1);
}

/* Rule: a result decodes to the fields it was encoded from. */
static void test_result_round_trip(void **state)
{
    (void)state;
    uint8_t b[1024];
    size_t len = s_encode_r(b, sizeof b);
    kvti_tokr_t r;
    char err[256];
    assert_int_equal(kvti_tokr_decode(b, len, &r, err, sizeof err), 0);
    assert_int_equal(r.kind, 2);
    assert_int_equal(r.n_keys, T_N);
    assert_true(r.token_id == 0x1122334455667788ull && r.prepare_id == 99);
    assert_int_equal(r.segments, 16);
    assert_int_equal(r.seg_next, 8);
    assert_int_equal(r.seg_bytes, 512);
    assert_memory_equal(r.keys, s_keys, sizeof s_keys);
    assert_memory_equal(r.outcome, s_out, T_N);
    for (uint32_t i = 0; i < T_N; i++)
        assert_true(kvti_tokr_checksum(&r, i) == s_sums[i]);
    assert_memory_equal(b, "KVTR\x01\x00", 6);
}

/* Rule: a malformed result is refused, whatever is wrong with it. */
static void test_result_malformed(void **state)
{
    (void)state;
    uint8_t b[1024], c[1024];
    size_t len = s_encode_r(b, sizeof b);
    for (size_t l = 0; l < len; l++) {
        uint8_t *cut = malloc(l ? l : 1);
        memcpy(cut, b, l);
        kvti_tokr_t r;
        char err[256];
        assert_int_equal(kvti_tokr_decode(cut, l, &r, err, sizeof err), -1);
        free(cut);
    }
    for (size_t i = 0; i < len; i++) {
        memcpy(c, b, len);
        c[i] ^= 0x01;
        kvti_tokr_t r;
        char err[256];
        assert_int_equal(kvti_tokr_decode(c, len, &r, err, sizeof err), -1);
    }
    s_bad_x(b, len, "not an exported token"); /* a result is not a token */
    uint8_t x[1024];
    size_t xl = s_encode_x(x, sizeof x);
    s_bad_r(x, xl, "not an exported result");
    memcpy(c, b, len);
    c[4] = 9;
    s_reseal(c, len);
    s_bad_r(c, len, "version 9");
    memcpy(c, b, len);
    s_put32(c + 12, T_N - 1);
    s_reseal(c, len);
    s_bad_r(c, len, "keys take");
    memcpy(c, b, len);
    s_put32(c + 36, 17); /* next segment past the segments */
    s_reseal(c, len);
    s_bad_r(c, len, "layer-wise state");
    memcpy(c, b, len);
    s_put64(c + 40, 0); /* segments without their size */
    s_reseal(c, len);
    s_bad_r(c, len, "layer-wise state");
    memcpy(c, b, len);
    c[48 + T_N * 16 + 2] = 0x07; /* an outcome bit nobody defined */
    s_reseal(c, len);
    s_bad_r(c, len, "unknown bits");
    memcpy(c, b, len);
    c[10] = 0x80;
    s_reseal(c, len);
    s_bad_r(c, len, "flags");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_round_trip),
        cmocka_unit_test(test_token_empty),
        cmocka_unit_test(test_token_cut_or_altered),
        cmocka_unit_test(test_token_magic_version_flags_kind),
        cmocka_unit_test(test_token_lengths),
        cmocka_unit_test(test_token_encode_bounds),
        cmocka_unit_test(test_result_round_trip),
        cmocka_unit_test(test_result_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
