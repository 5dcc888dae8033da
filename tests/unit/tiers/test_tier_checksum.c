/* test_tier_checksum.c — tier_checksum's xxh3 (compiled inline at -O3) gives the
 * values of libxxhash's own XXH3_64bits for every length around the algorithm's
 * internal boundaries (16, 128, 240 bytes, stripes of 64, blocks of 1 KiB, the
 * streaming buffer of 256) and around tier_checksum_copy's 8 KiB pieces; a stream
 * split anywhere, an iovec of any parts, and a copy that hashes as it goes all
 * give the one-shot value, and the copy's bytes are the source's. A checksum that
 * drifted from xxh3 would fail every block already stored on nvme or in a peer's
 * segment, so the reference is the library, not this file's own one-shot. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tier_checksum.h"

#include <xxhash.h>

#define S_MAX (3u * 8192u + 1000u)

static uint8_t *s_bytes(size_t n, uint32_t seed)
{
    uint8_t *p = malloc(n ? n : 1);
    assert_non_null(p);
    uint32_t x = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
    return p;
}

static const size_t s_lengths[] = {0,    1,    3,    4,    8,     9,     16,    17,   128,
                                   129,  240,  241,  255,  256,   257,   1023,  1024, 1025,
                                   4096, 8191, 8192, 8193, 16383, 16384, 16385, S_MAX};

static void test_one_shot_matches_libxxhash(void **state)
{
    (void)state;
    uint8_t *p = s_bytes(S_MAX, 1);
    for (size_t i = 0; i < sizeof s_lengths / sizeof *s_lengths; i++) {
        size_t n = s_lengths[i];
        uint64_t want = XXH3_64bits(p, n);
        assert_int_equal(tier_checksum_buf(p, n), want);
        struct iovec v = {.iov_base = p, .iov_len = n};
        assert_int_equal(tier_checksum(&v, 1), want);
    }
    /* unaligned starts: the inline code's loads are not the library's */
    for (size_t off = 1; off < 8; off++)
        assert_int_equal(tier_checksum_buf(p + off, 8192), XXH3_64bits(p + off, 8192));
    assert_int_equal(tier_checksum_buf(NULL, 0), XXH3_64bits(NULL, 0));
    assert_int_equal(tier_checksum(NULL, 0), XXH3_64bits(NULL, 0));
    free(p);
}

static void test_stream_split_anywhere_matches(void **state)
{
    (void)state;
    uint8_t *p = s_bytes(S_MAX, 2);
    const size_t cuts[] = {1, 7, 63, 64, 65, 255, 256, 1000, 8192, 9000};
    for (size_t i = 0; i < sizeof s_lengths / sizeof *s_lengths; i++) {
        size_t n = s_lengths[i];
        uint64_t want = XXH3_64bits(p, n);
        for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
            tier_checksum_state_t st;
            tier_checksum_reset(&st);
            for (size_t off = 0; off < n; off += cuts[c])
                tier_checksum_update(&st, p + off, n - off < cuts[c] ? n - off : cuts[c]);
            tier_checksum_update(&st, p, 0); /* an empty update changes nothing */
            assert_int_equal(tier_checksum_digest(&st), want);
            assert_int_equal(tier_checksum_digest(&st), want); /* a digest does not end it */
        }
        /* three iovec parts, an empty one among them */
        size_t a = n / 3, b = n / 2;
        struct iovec v[4] = {{p, a}, {p + a, 0}, {p + a, b - a}, {p + b, n - b}};
        assert_int_equal(tier_checksum(v, 4), want);
    }
    free(p);
}

static void test_copy_copies_and_hashes(void **state)
{
    (void)state;
    uint8_t *p = s_bytes(S_MAX, 3);
    uint8_t *d = malloc(S_MAX + 16);
    assert_non_null(d);
    for (size_t i = 0; i < sizeof s_lengths / sizeof *s_lengths; i++) {
        size_t n = s_lengths[i];
        memset(d, 0xA5, S_MAX + 16);
        tier_checksum_state_t st;
        tier_checksum_reset(&st);
        tier_checksum_copy(&st, d + 3, p, n); /* an unaligned destination */
        assert_int_equal(tier_checksum_digest(&st), XXH3_64bits(p, n));
        if (n)
            assert_memory_equal(d + 3, p, n);
        assert_int_equal(d[2], 0xA5);     /* nothing before */
        assert_int_equal(d[3 + n], 0xA5); /* nothing after */
    }
    /* a copy in two calls continues one stream */
    tier_checksum_state_t st;
    tier_checksum_reset(&st);
    tier_checksum_copy(&st, d, p, 5000);
    tier_checksum_copy(&st, d + 5000, p + 5000, S_MAX - 5000);
    assert_int_equal(tier_checksum_digest(&st), XXH3_64bits(p, S_MAX));
    assert_memory_equal(d, p, S_MAX);
    free(d);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_shot_matches_libxxhash),
        cmocka_unit_test(test_stream_split_anywhere_matches),
        cmocka_unit_test(test_copy_copies_and_hashes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
