/* test_kvt_keys.c — kvt_block_keys and kvt_status_name (client/kvt_keys.c).
 * The expected keys are computed here independently, with one-shot XXH3_128bits
 * over a hand-assembled buffer (parent canonical bytes || tokens as u32 LE), and
 * one value is pinned as hex so engines in other languages can check theirs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>

#include "kvtier.h"

/* key = XXH3_128(parent || le32(tokens[0..n))) in canonical (big-endian) form */
static void ref_key(const uint8_t parent[16], const uint32_t *tokens, uint32_t n, uint8_t out[16])
{
    uint8_t buf[16 + 4 * 1024];
    assert_true(n <= 1024);
    memcpy(buf, parent, 16);
    for (uint32_t i = 0; i < n; i++) {
        buf[16 + 4 * i] = (uint8_t)(tokens[i] & 0xff);
        buf[16 + 4 * i + 1] = (uint8_t)((tokens[i] >> 8) & 0xff);
        buf[16 + 4 * i + 2] = (uint8_t)((tokens[i] >> 16) & 0xff);
        buf[16 + 4 * i + 3] = (uint8_t)((tokens[i] >> 24) & 0xff);
    }
    XXH128_hash_t h = XXH3_128bits(buf, 16 + 4 * (size_t)n);
    /* canonical = high64 big-endian, then low64 big-endian */
    for (int i = 0; i < 8; i++) {
        out[i] = (uint8_t)(h.high64 >> (56 - 8 * i));
        out[8 + i] = (uint8_t)(h.low64 >> (56 - 8 * i));
    }
}

static void hex(const uint8_t k[16], char out[33])
{
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", k[i]);
}

/* DESIGN.md §2: key[i] = H(key[i-1], tokens[i]); key[-1] = 16 zero bytes. */
static void block_keys_match_reference_chain(void **state)
{
    (void)state;
    uint32_t tokens[64];
    for (uint32_t i = 0; i < 64; i++)
        tokens[i] = 1000003u * i + 7u; /* spans all four bytes of a u32 */
    kvt_key_t out[4];
    assert_int_equal(kvt_block_keys(tokens, 64, 16, NULL, out, 4), 4);
    uint8_t prev[16] = {0}, want[16];
    for (int b = 0; b < 4; b++) {
        ref_key(prev, tokens + 16 * b, 16, want);
        assert_memory_equal(out[b].b, want, 16);
        memcpy(prev, want, 16);
    }
}

/* kvtier.h: a pinned vector (tokens 0..15, 16 per block, no parent) for other
 * languages: the value is XXH3_128bits of 16 zero bytes || le32(0..15). */
static void block_keys_pinned_vector(void **state)
{
    (void)state;
    uint32_t tokens[16];
    for (uint32_t i = 0; i < 16; i++)
        tokens[i] = i;
    kvt_key_t out[1];
    assert_int_equal(kvt_block_keys(tokens, 16, 16, NULL, out, 1), 1);
    uint8_t zero[16] = {0}, want[16];
    ref_key(zero, tokens, 16, want);
    assert_memory_equal(out[0].b, want, 16);
    char h[33];
    hex(out[0].b, h);
    /* also what `xxhsum -H2` prints for that 80-byte buffer */
    assert_string_equal(h, "16d310809c3605d60b49a1755bdbc8b2");
}

/* kvtier.h: the parent argument continues a chain: keys of the second half given
 * the first half's last key equal the tail of the whole chain. */
static void block_keys_parent_continues_chain(void **state)
{
    (void)state;
    uint32_t tokens[96];
    for (uint32_t i = 0; i < 96; i++)
        tokens[i] = i * 31u + 5u;
    kvt_key_t all[6], tail[3];
    assert_int_equal(kvt_block_keys(tokens, 96, 16, NULL, all, 6), 6);
    assert_int_equal(kvt_block_keys(tokens + 48, 48, 16, &all[2], tail, 3), 3);
    assert_memory_equal(tail, &all[3], 3 * sizeof(kvt_key_t));
    /* a different parent gives different keys */
    kvt_key_t other[1];
    assert_int_equal(kvt_block_keys(tokens + 48, 16, 16, &all[1], other, 1), 1);
    assert_memory_not_equal(other[0].b, all[3].b, 16);
}

/* kvtier.h: a trailing partial block has no key; the return value counts full blocks. */
static void block_keys_partial_block_has_no_key(void **state)
{
    (void)state;
    uint32_t tokens[40] = {0};
    for (uint32_t i = 0; i < 40; i++)
        tokens[i] = i;
    kvt_key_t out[4];
    memset(out, 0xAB, sizeof out);
    assert_int_equal(kvt_block_keys(tokens, 40, 16, NULL, out, 4), 2);
    uint8_t untouched[16];
    memset(untouched, 0xAB, 16);
    assert_memory_equal(out[2].b, untouched, 16);
    assert_int_equal(kvt_block_keys(tokens, 15, 16, NULL, out, 4), 0);
    assert_int_equal(kvt_block_keys(NULL, 0, 16, NULL, NULL, 0), 0);
}

/* kvtier.h: at most max_out keys are written; the count of full blocks is returned. */
static void block_keys_max_out_bounds_writes(void **state)
{
    (void)state;
    uint32_t tokens[64];
    for (uint32_t i = 0; i < 64; i++)
        tokens[i] = i;
    kvt_key_t out[3];
    memset(out, 0xCD, sizeof out);
    assert_int_equal(kvt_block_keys(tokens, 64, 16, NULL, out, 2), 4);
    kvt_key_t full[4];
    assert_int_equal(kvt_block_keys(tokens, 64, 16, NULL, full, 4), 4);
    assert_memory_equal(out, full, 2 * sizeof(kvt_key_t));
    uint8_t untouched[16];
    memset(untouched, 0xCD, 16);
    assert_memory_equal(out[2].b, untouched, 16);
    /* counting only */
    assert_int_equal(kvt_block_keys(tokens, 64, 16, NULL, NULL, 0), 4);
}

/* kvtier.h: bad arguments are -KVT_INVALID_ARGUMENT. */
static void block_keys_bad_arguments(void **state)
{
    (void)state;
    uint32_t tokens[16] = {0};
    kvt_key_t out[1];
    assert_int_equal(kvt_block_keys(tokens, 16, 0, NULL, out, 1), -KVT_INVALID_ARGUMENT);
    assert_int_equal(kvt_block_keys(NULL, 16, 16, NULL, out, 1), -KVT_INVALID_ARGUMENT);
    assert_int_equal(kvt_block_keys(tokens, 16, 16, NULL, NULL, 1), -KVT_INVALID_ARGUMENT);
}

/* Large blocks hash the same as one buffer (tokens go through a bounce buffer). */
static void block_keys_large_block(void **state)
{
    (void)state;
    static uint32_t tokens[1000];
    for (uint32_t i = 0; i < 1000; i++)
        tokens[i] = 0xFFFFFFFFu - i;
    kvt_key_t out[1];
    assert_int_equal(kvt_block_keys(tokens, 1000, 1000, NULL, out, 1), 1);
    uint8_t zero[16] = {0}, want[16];
    ref_key(zero, tokens, 1000, want);
    assert_memory_equal(out[0].b, want, 16);
}

/* kvtier.h: status names for a code or its negative; "UNKNOWN" outside the enum. */
static void status_names_for_codes_and_negatives(void **state)
{
    (void)state;
    assert_string_equal(kvt_status_name(KVT_OK), "OK");
    assert_string_equal(kvt_status_name(-KVT_INVALID_ARGUMENT), "INVALID_ARGUMENT");
    assert_string_equal(kvt_status_name(KVT_INVALID_ARGUMENT), "INVALID_ARGUMENT");
    assert_string_equal(kvt_status_name(-KVT_NOT_LEADER), "NOT_LEADER");
    assert_string_equal(kvt_status_name(-KVT_NO_SPACE), "NO_SPACE");
    assert_string_equal(kvt_status_name(-KVT_TIMEOUT), "TIMEOUT");
    assert_string_equal(kvt_status_name(-KVT_UNAVAILABLE), "UNAVAILABLE");
    assert_string_equal(kvt_status_name(-KVT_EXPIRED), "EXPIRED");
    assert_string_equal(kvt_status_name(KVT_ALREADY_EXISTS), "ALREADY_EXISTS");
    assert_string_equal(kvt_status_name(-KVT_BUSY), "BUSY");
    assert_string_equal(kvt_status_name(KVT_PERMISSION_DENIED), "PERMISSION_DENIED");
    assert_string_equal(kvt_status_name(-KVT_OVERLOADED), "OVERLOADED");
    assert_string_equal(kvt_status_name(-KVT_ABORTED), "ABORTED");
    assert_string_equal(kvt_status_name(99), "UNKNOWN");
    assert_string_equal(kvt_status_name(-99), "UNKNOWN");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(block_keys_match_reference_chain),
        cmocka_unit_test(block_keys_pinned_vector),
        cmocka_unit_test(block_keys_parent_continues_chain),
        cmocka_unit_test(block_keys_partial_block_has_no_key),
        cmocka_unit_test(block_keys_max_out_bounds_writes),
        cmocka_unit_test(block_keys_bad_arguments),
        cmocka_unit_test(block_keys_large_block),
        cmocka_unit_test(status_names_for_codes_and_negatives),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
