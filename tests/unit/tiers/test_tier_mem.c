/* test_tier_mem.c — tier_mem_calloc's promises: zeroed, 64-byte aligned, NULL on
 * overflow, and a large table that costs no resident memory until written, also
 * the second time one is made after another was freed (the case calloc gets
 * wrong: it clears reused memory and so touches every page). Residency is read
 * with mincore(2) (the residency checks only where large blocks are mapped:
 * under AddressSanitizer they are heap blocks, TIER_MEM_MAPS 0). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "tier_mem.h"

/* Pages of [p, p + len) resident now. */
static size_t s_resident(const void *p, size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)p & ~(uintptr_t)(page - 1);
    size_t n = ((uintptr_t)p + len - start + page - 1) / page;
    unsigned char vec[4096];
    assert_true(n <= sizeof vec);
    assert_int_equal(mincore((void *)start, n * page, vec), 0);
    size_t r = 0;
    for (size_t i = 0; i < n; i++)
        r += vec[i] & 1;
    return r;
}

static void test_small_is_zeroed_and_aligned(void **state)
{
    (void)state;
    for (size_t n = 1; n <= 4096; n *= 4) {
        uint8_t *p = tier_mem_calloc(n, 3);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 64, 0);
        for (size_t i = 0; i < n * 3; i++)
            assert_int_equal(p[i], 0);
        memset(p, 0xab, n * 3); /* the whole block is ours */
        tier_mem_free(p);
    }
}

static void test_large_stays_out_of_memory(void **state)
{
    (void)state;
    size_t len = 8u << 20;
    for (int round = 0; round < 3; round++) { /* made, written, freed, made again */
        uint8_t *p = tier_mem_calloc(len / 8, 8);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 64, 0);
        if (TIER_MEM_MAPS)                        /* under ASan a heap block, cleared: resident */
            assert_true(s_resident(p, len) <= 1); /* at most the header's page */
        assert_int_equal(p[0], 0);
        assert_int_equal(p[len - 1], 0);
        assert_int_equal(p[len / 2], 0);
        memset(p, 0x5a, len); /* every page touched: the next round must not inherit it */
        if (TIER_MEM_MAPS)
            assert_true(s_resident(p, len) >= len / (size_t)sysconf(_SC_PAGESIZE));
        tier_mem_free(p);
    }
}

static void test_overflow_and_null(void **state)
{
    (void)state;
    assert_null(tier_mem_calloc(SIZE_MAX / 2, 4));
    assert_null(tier_mem_calloc(SIZE_MAX, 1));
    tier_mem_free(NULL);
    void *z = tier_mem_calloc(0, 8); /* a valid, empty block */
    assert_non_null(z);
    tier_mem_free(z);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_is_zeroed_and_aligned),
        cmocka_unit_test(test_large_stays_out_of_memory),
        cmocka_unit_test(test_overflow_and_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
