/* test_opt_hand.c — every figure of the optimizer (issue 10 §4) on a hand-made trace,
 * each against a hand computation written out below: the exact LRU curve, the Belady
 * reference, the slot-engine policies replayed through tiers/, ARC, the host -> nvme
 * chain per tier, and the TTFT model; plus why the Belady reference is not a bound
 * (an exhaustive search beats it) and how a block repeated in a request counts.
 *
 * The trace H (blocks A..E, dense ids 0..4 in order of first use; 16 references):
 *   R0 [A B C]  R1 [A B D]  R2 [C A]  R3 [A B C D]  R4 [E A]  R5 [A B]
 * Global reference indices: R0 0-2, R1 3-5, R2 6-7, R3 8-11, R4 12-13, R5 14-15. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "opt_arc.h"
#include "opt_belady.h"
#include "opt_lru.h"
#include "opt_replay.h"
#include "opt_trace.h"
#include "opt_ttft.h"
#include "tier_policy.h"

enum { A = 10, B = 20, C = 30, D = 40, E = 50 }; /* Mooncake ids */

static opt_trace_t *s_trace(const uint64_t *const *reqs, const size_t *lens, size_t n, uint32_t tpb)
{
    opt_trace_t *t = opt_trace_new(0, tpb);
    char err[128];
    assert_non_null(t);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(opt_trace_add_ids(t, reqs[i], lens[i], 0, err, sizeof err), 0);
    return t;
}

static opt_trace_t *s_trace_h(uint32_t tpb)
{
    static const uint64_t r0[] = {A, B, C}, r1[] = {A, B, D}, r2[] = {C, A}, r3[] = {A, B, C, D},
                          r4[] = {E, A}, r5[] = {A, B};
    static const uint64_t *const reqs[] = {r0, r1, r2, r3, r4, r5};
    static const size_t lens[] = {3, 3, 2, 4, 2, 2};
    return s_trace(reqs, lens, 6, tpb);
}

/* Stack distances (1 = most recent), all taken before the request, and their prefix
 * maximum (inf: never seen):
 *   R0 A inf ...                       -> 0 hits anywhere
 *   R1 A 3, B 2, D inf; max 3 3 inf   -> 2 hits from capacity 3
 *   R2 C 4, A 3;      max 4 4         -> 2 hits from 4
 *   R3 A 1, B 4, C 2, D 3; max 1 4 4 4 -> 1 hit from 1, 4 hits from 4
 *   R4 E inf                           -> 0
 *   R5 A 1, B 5;      max 1 5         -> 1 hit from 1, 2 from 5
 * Capacity 1: 2; 2: 2; 3: 4; 4: 9; 5 (every block): 10. */
static void test_lru_curve_equals_hand_distances(void **state)
{
    (void)state;
    opt_trace_t *t = s_trace_h(0);
    assert_int_equal(opt_trace_refs(t), 16);
    assert_int_equal(opt_trace_distinct(t), 5);
    opt_curve_t *c = opt_curve_new(t);
    assert_non_null(c);
    static const uint64_t want[] = {0, 2, 2, 4, 9, 10, 10, 10};
    for (uint64_t cap = 0; cap < 8; cap++)
        assert_int_equal(opt_curve_hits(c, cap), want[cap]);
    assert_int_equal(opt_curve_hits(c, 1u << 31), 10);
    assert_int_equal(opt_curve_max_capacity(c), 5);
    assert_int_equal(opt_curve_capacity_for(c, 5), 4);
    assert_int_equal(opt_curve_capacity_for(c, 11), 0);
    /* per request at capacity 3: R1 2, R3 1, R5 1 */
    uint32_t per[6];
    static const uint32_t want3[] = {0, 2, 0, 1, 0, 1};
    assert_int_equal(opt_lru_request_hits(t, 3, per), 0);
    assert_memory_equal(per, want3, sizeof want3);
    opt_curve_destroy(&c);
    assert_null(c);
    opt_trace_destroy(&t);
}

/* Belady reference, capacity 2 (next-use keys: a position, or 16 + dense id):
 *   R0: A in (next 3), B in (4), C (6) > every cached -> bypassed.
 *   R1: A, B hit, D absent: 2 hits. A -> 7, B -> 9, D (11) > 9 bypassed.
 *   R2: C absent: 0. C (10) > 9 bypassed; A -> 8.
 *   R3: A, B hit, C absent: 2. A -> 13, B -> 15, C (never, 18) and D (19) bypassed.
 *   R4: E absent: 0. E (20) bypassed; A -> 14.
 *   R5: A, B hit: 2.                      Total 6 (LRU at 2: 2).
 * Capacity 1: A kept throughout (every other block's next use is later): hits in R1,
 * R3, R5: 3. Capacity 3: R0 keeps A B C; R1 2 hits (D bypassed); R2 2 (C, A);
 * R3 3 (D bypassed); R4 0; R5 2: 9. */
static void test_belady_reference_equals_hand_run(void **state)
{
    (void)state;
    opt_trace_t *t = s_trace_h(0);
    opt_belady_t *b = opt_belady_new(t);
    assert_non_null(b);
    uint32_t per[6];
    assert_int_equal(opt_belady_run(b, 2, per), 6);
    static const uint32_t want2[] = {0, 2, 0, 2, 0, 2};
    assert_memory_equal(per, want2, sizeof want2);
    assert_int_equal(opt_belady_run(b, 1, NULL), 3);
    assert_int_equal(opt_belady_run(b, 3, NULL), 9);
    assert_int_equal(opt_belady_run(b, 5, NULL), 10); /* holds every block: all but first uses */
    opt_belady_destroy(&b);
    opt_trace_destroy(&t);
}

/* The best schedule of a tiny trace, by trying every choice at every access (insert
 * or bypass a missing block; when full, which block goes). */
static uint32_t s_best(const uint32_t *const *reqs, const uint32_t *lens, uint32_t nreq, uint32_t r,
                       uint32_t j, uint32_t cache, uint32_t cap)
{
    if (r == nreq)
        return 0;
    uint32_t gain = 0;
    if (j == 0) /* hits of request r: judged before it */
        while (gain < lens[r] && (cache >> reqs[r][gain] & 1))
            gain++;
    if (j == lens[r])
        return s_best(reqs, lens, nreq, r + 1, 0, cache, cap);
    uint32_t b = reqs[r][j], best;
    if (cache >> b & 1) {
        best = s_best(reqs, lens, nreq, r, j + 1, cache, cap);
    } else {
        best = s_best(reqs, lens, nreq, r, j + 1, cache, cap); /* bypass */
        if ((uint32_t)__builtin_popcount(cache) < cap) {
            uint32_t v = s_best(reqs, lens, nreq, r, j + 1, cache | 1u << b, cap);
            best = v > best ? v : best;
        } else {
            for (uint32_t x = 0; x < 32; x++)
                if (cache >> x & 1) {
                    uint32_t v =
                        s_best(reqs, lens, nreq, r, j + 1, (cache & ~(1u << x)) | 1u << b, cap);
                    best = v > best ? v : best;
                }
        }
    }
    return gain + best;
}

/* docs/OPTIMIZER.md: under prefix hits farthest-next-use is not optimal, so the
 * Belady reference is not a bound. Capacity 1, R0 [x y], R1 [z y], R2 [x]:
 * Belady keeps y (next use 3, before x's 4), but y's use in R1 follows the miss of
 * z and cannot hit: 0 hits. Keeping x (bypassing y and z) hits x in R2: 1. */
static void test_belady_reference_is_not_a_bound(void **state)
{
    (void)state;
    static const uint64_t r0[] = {1, 2}, r1[] = {3, 2}, r2[] = {1};
    static const uint64_t *const reqs[] = {r0, r1, r2};
    static const size_t lens[] = {2, 2, 1};
    opt_trace_t *t = s_trace(reqs, lens, 3, 0);
    opt_belady_t *b = opt_belady_new(t);
    assert_int_equal(opt_belady_run(b, 1, NULL), 0);
    const uint32_t *dr[3];
    uint32_t dl[3];
    for (uint32_t i = 0; i < 3; i++)
        dr[i] = opt_trace_blocks(t, i, &dl[i]);
    assert_int_equal(s_best(dr, dl, 3, 0, 0, 0, 1), 1);
    /* and on H the exhaustive optimum is at least the reference at every capacity */
    opt_trace_t *h = s_trace_h(0);
    opt_belady_t *bh = opt_belady_new(h);
    const uint32_t *hr[6];
    uint32_t hl[6];
    for (uint32_t i = 0; i < 6; i++)
        hr[i] = opt_trace_blocks(h, i, &hl[i]);
    for (uint32_t cap = 1; cap <= 3; cap++)
        assert_true(s_best(hr, hl, 6, 0, 0, 0, cap) >= (uint32_t)opt_belady_run(bh, cap, NULL));
    opt_belady_destroy(&bh);
    opt_trace_destroy(&h);
    opt_belady_destroy(&b);
    opt_trace_destroy(&t);
}

/* The slot engine's policies (slots handed out 0, 1, 2 in order; clock's hand at 0,
 * admission without reference bit, a touch sets it):
 *   lru: equals the curve: 2 at capacity 2, 4 at 3.
 *   fifo, capacity 3 (queue oldest first): R0 [A B C]; R1 A B hit (2), D evicts A
 *     [B C D]; R2 C hits, A absent (1), A evicts B [C D A]; R3 A hits, B absent (1),
 *     B, C, D evict C, D, A [B C D]; R4 0, E, A evict B, C [D E A]; R5 A hits (1): 5.
 *   fifo, capacity 2: R3 and R5 hit A only: 2.
 *   clock, capacity 3: R0 A B C in s0 s1 s2; R1 A B hit (2), touched; D: the hand
 *     clears s0, s1 and takes s2 (C), hand 0; R2 C absent (0); C takes s0 (A), A takes
 *     s1 (B), hand 2; R3 A hits (1), touched; B takes s2 (D); C (s0) touched; D: hand
 *     0 clears s0, s1, takes s2 (B); R4 0, E takes s0 (C), A touched; R5 A hits (1): 4.
 *   clock, capacity 2: every victim is the slot under the hand: R3 and R5 hit A: 2. */
static void test_policies_replay_equals_hand_runs(void **state)
{
    (void)state;
    opt_trace_t *t = s_trace_h(0);
    static const struct {
        const char *policy;
        uint64_t cap;
        int64_t hits;
    } want[] = {{"lru", 2, 2},  {"lru", 3, 4},   {"fifo", 2, 2},
                {"fifo", 3, 5}, {"clock", 2, 2}, {"clock", 3, 4}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_int_equal(opt_replay_policy(t, want[i].policy, want[i].cap, NULL), want[i].hits);
    /* every registered policy replays (the optimizer asks the registry, not a list) */
    for (size_t i = 0; i < tier_policy_count(); i++) {
        int64_t h = opt_replay_policy(t, tier_policy_at(i)->name, 3, NULL);
        assert_true(h >= 0 && h <= 10);
        assert_int_equal(opt_replay_policy(t, tier_policy_at(i)->name, 5, NULL), 10);
    }
    assert_int_equal(opt_replay_policy(t, "no-such-policy", 3, NULL), -1);
    /* lru through the engine equals the exact curve at every capacity */
    opt_curve_t *c = opt_curve_new(t);
    for (uint64_t cap = 1; cap <= 6; cap++)
        assert_int_equal(opt_replay_policy(t, "lru", cap, NULL), (int64_t)opt_curve_hits(c, cap));
    opt_curve_destroy(&c);
    opt_trace_destroy(&t);
}

/* ARC, c = 2, p = 0 (lists MRU first):
 *   R0: A, B into T1; C: |T1| + |B1| = 2 = c and |T1| = c: T1's LRU (A) is dropped;
 *       T1 [C B].
 *   R1: 0 hits; A, B, D each drop T1's LRU: T1 [D B].
 *   R2: 0 hits; C, A likewise: T1 [A C].
 *   R3: A hits, B absent: 1. A -> T2 [A]; B: case IV(B), REPLACE: |T1| = 1 > p, C -> B1;
 *       T1 [B]. C in B1: p = 0 + max(0/1, 1) = 1; REPLACE: |T1| = 1 not > 1, A -> B2;
 *       C -> T2 [C]. D: case IV(B), REPLACE: C -> B2 [C A]; T1 [D B].
 *   R4: 0 hits; E: case IV(A), |T1| = c: B dropped, T1 [E D]; A in B2:
 *       p = max(0, 1 - max(0/2, 1)) = 0; REPLACE: |T1| = 2 > 0, D -> B1; A -> T2 [A].
 *   R5: A hits (T2), B not cached: 1.                      Total 2. */
static void test_arc_equals_hand_run(void **state)
{
    (void)state;
    opt_trace_t *t = s_trace_h(0);
    uint32_t per[6];
    assert_int_equal(opt_arc_run(t, 2, per), 2);
    static const uint32_t want[] = {0, 0, 0, 1, 0, 1};
    assert_memory_equal(per, want, sizeof want);
    assert_int_equal(opt_arc_run(t, 5, NULL), 10); /* holds every block */
    opt_trace_destroy(&t);
}

/* Chain host 1 -> nvme 3, inclusive (lru both; L2 order MRU first):
 *   R0: A, B, C put on host; A, B demoted: nvme [B A], host C.
 *   R1: A, B hit on nvme (2), touched: [B A]. Promote A: host victim C demoted
 *       [C B A]; promote B: host victim A is on nvme (released only); D put: victim B
 *       on nvme (released). host D.
 *   R2: C, A hit on nvme (2), touched [A C B]. Promote C: D demoted, B dropped
 *       [D A C]; promote A: C released. host A.
 *   R3: A hits on host (1); B put (A released); C, D on nvme: skipped. host B.
 *   R4: E put: B demoted, C dropped [B D A]; A on nvme: skipped. host E.
 *   R5: A, B hit on nvme (2), touched [B A D]. Promote A: E demoted, D dropped;
 *       promote B: A released.
 * host 1, nvme 6, promoted 6, demoted 6 (A B C D B E), dropped 3 (B C D). */
static void test_chain_equals_hand_run(void **state)
{
    (void)state;
    opt_trace_t *t = s_trace_h(0);
    opt_chain_config_t cfg = {.capacity = {1, 3}, .inclusive = true};
    opt_chain_result_t res;
    uint32_t per[12];
    assert_int_equal(opt_replay_chain(t, &cfg, &res, per), 0);
    assert_int_equal(res.hits[0], 1);
    assert_int_equal(res.hits[1], 6);
    assert_int_equal(res.promoted, 6);
    assert_int_equal(res.demoted, 6);
    assert_int_equal(res.dropped, 3);
    static const uint32_t want[] = {0, 0, 0, 2, 0, 2, 1, 0, 0, 0, 0, 2};
    assert_memory_equal(per, want, sizeof want);
    cfg.policy[1] = "no-such-policy";
    assert_int_equal(opt_replay_chain(t, &cfg, &res, NULL), -1);
    opt_trace_destroy(&t);
}

/* The same chain, exclusive (a promoted block moves: its nvme copy goes first):
 *   R0: A, B, C put on host; A, B demoted: nvme [B A], host C.
 *   R1: A, B hit on nvme (2), touched [B A]. Promote A: A leaves nvme [B], host
 *       victim C demoted [C B]; promote B: [C], A demoted [A C]; D put: B demoted
 *       [B A C]. host D.
 *   R2: C, A hit on nvme (2), touched [A C B]. Promote C: [A B], D demoted [D A B];
 *       promote A: [D B], C demoted [C D B]. host A.
 *   R3: A on host, B, C, D on nvme: 4 hits (1, 3), touched [D C B]. Promote B: A
 *       demoted [A D C]; C: B demoted [B A D]; D: C demoted [C B A]. host D.
 *   R4: E put: D demoted, A dropped [D C B]; A (gone) put: E demoted, B dropped
 *       [E D C]. host A.
 *   R5: A hits on host (1); B (gone) put: A demoted, C dropped [A E D].
 * host 2, nvme 7 = 9, the LRU of 4 blocks (above); promoted 7, demoted 13, dropped 3. */
static void test_exclusive_chain_equals_hand_run_and_lru(void **state)
{
    (void)state;
    opt_trace_t *t = s_trace_h(0);
    opt_chain_config_t cfg = {.capacity = {1, 3}};
    opt_chain_result_t res;
    uint32_t per[12];
    assert_int_equal(opt_replay_chain(t, &cfg, &res, per), 0);
    assert_int_equal(res.hits[0], 2);
    assert_int_equal(res.hits[1], 7);
    assert_int_equal(res.promoted, 7);
    assert_int_equal(res.demoted, 13);
    assert_int_equal(res.dropped, 3);
    static const uint32_t want[] = {0, 0, 0, 2, 0, 2, 1, 3, 0, 0, 1, 0};
    assert_memory_equal(per, want, sizeof want);
    assert_int_equal(opt_replay_policy(t, "lru", 4, NULL), 9);
    opt_trace_destroy(&t);
}

/* TTFT, 2 tokens per block, 1 FLOP per token at 1 FLOP/s (1 s a token), 1-byte
 * blocks at 2 B/s from host (0.5 s a block) and 1 B/s from nvme (1 s), with the
 * chain's hits above (host, nvme): R0 (0,0) R1 (0,2) R2 (0,2) R3 (1,0) R4 (0,0) R5 (0,2).
 *   without: 6 6 4 8 4 4 s                         mean 32/6, p50 4, p99 8
 *   with:    R0 6; R1 (6-4) + 2 = 4; R2 max(4-4, 1) + 2 = 3; R3 (8-2) + 0.5 = 6.5;
 *            R4 4; R5 1 + 2 = 3                     mean 26.5/6, p50 4, p99 6.5
 *   load 2 + 2 + 0.5 + 2 = 6.5 s, prefill 6 + 2 + 1 + 6 + 4 + 1 = 20 s. */
static void test_ttft_equals_hand_model(void **state)
{
    (void)state;
    opt_trace_t *t = s_trace_h(2);
    static const uint32_t hits2[] = {0, 0, 0, 2, 0, 2, 1, 0, 0, 0, 0, 2};
    opt_ttft_model_t m = {.params = 0.5, .gpu_flops = 1, .block_bytes = 1, .bw = {2, 1}};
    opt_ttft_result_t r;
    assert_int_equal(opt_ttft_run(t, &m, hits2, &r), 0);
    assert_float_equal(r.without.mean, 32.0 / 6, 1e-9);
    assert_float_equal(r.without.p50, 4, 1e-9);
    assert_float_equal(r.without.p99, 8, 1e-9);
    assert_float_equal(r.with.mean, 26.5 / 6, 1e-9);
    assert_float_equal(r.with.p50, 4, 1e-9);
    assert_float_equal(r.with.p99, 6.5, 1e-9);
    assert_float_equal(r.load_s, 6.5, 1e-9);
    assert_float_equal(r.prefill_s, 20, 1e-9);
    /* defaults: 2 x 8e9 FLOPs a token at 400 TFLOP/s; 128 KiB of KV a token */
    opt_ttft_defaults(&m);
    assert_float_equal(opt_ttft_prefill_s(&m, 512), 512 * 16e9 / 400e12, 1e-12);
    assert_float_equal(opt_ttft_block_bytes(&m, t), 2 * 131072.0, 1e-9);
    opt_trace_destroy(&t);
}

/* A block twice in one request (tools/trace/lru_prefix.py): both occurrences are
 * judged before the request, then accessed in order. R0 [A A B], R1 [A B A]:
 * capacity 1: R0 leaves [B]; R1 A absent: 0. Capacity 2: R1's distances A 2, B 1,
 * A 2: 3 hits. */
static void test_repeated_block_counts_as_the_reference_does(void **state)
{
    (void)state;
    static const uint64_t r0[] = {A, A, B}, r1[] = {A, B, A};
    static const uint64_t *const reqs[] = {r0, r1};
    static const size_t lens[] = {3, 3};
    opt_trace_t *t = s_trace(reqs, lens, 2, 0);
    opt_curve_t *c = opt_curve_new(t);
    assert_int_equal(opt_curve_hits(c, 1), 0);
    assert_int_equal(opt_curve_hits(c, 2), 3);
    for (uint64_t cap = 1; cap <= 2; cap++)
        assert_int_equal(opt_replay_policy(t, "lru", cap, NULL), (int64_t)opt_curve_hits(c, cap));
    opt_curve_destroy(&c);
    opt_trace_destroy(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lru_curve_equals_hand_distances),
        cmocka_unit_test(test_belady_reference_equals_hand_run),
        cmocka_unit_test(test_belady_reference_is_not_a_bound),
        cmocka_unit_test(test_policies_replay_equals_hand_runs),
        cmocka_unit_test(test_arc_equals_hand_run),
        cmocka_unit_test(test_chain_equals_hand_run),
        cmocka_unit_test(test_exclusive_chain_equals_hand_run_and_lru),
        cmocka_unit_test(test_ttft_equals_hand_model),
        cmocka_unit_test(test_repeated_block_counts_as_the_reference_does),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
