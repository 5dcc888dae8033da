/* bench_slots.c — `kvt-bench slots`: throughput of the slot engine (DESIGN.md
 * §8) per policy, each figure also given as a ratio to a plain open-addressing
 * hash lookup of the same 16-byte keys measured in the same run, just before
 * each row (the floor any index over these keys pays: one hash, one miss).
 *
 * Measured per policy, with and without TTL deadlines, pool full, keys in
 * random order (read from a pre-shuffled array, so fetching the key itself is
 * a sequential stream for both the engine and the baseline):
 *   reserve+commit  a new key per reserve (batch 1), each evicting a victim
 *   batch32         the same in batches of 32 keys, per key
 *   lookup          hits on committed keys
 *   lookup x256     the same through tier_slots_lookup_batch, 256 keys a call (a
 *                   meta-plane lookup's size; its prefetching overlaps the misses)
 *   pin+unpin       one pin and one unpin per op
 * All memory (engine, baseline table, keys) is written before timing. Each
 * figure is the best of three runs timed in thread CPU time (the machine may
 * be shared). Never used by the service; prints a table and returns 0, 1 if
 * setup fails, 2 on bad arguments.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tier_key.h"
#include "tier_slots.h"

int bench_slots(int argc, char **argv);

#define S_BATCH 32

typedef struct {
    tier_key_t key;
    uint32_t value;
    uint32_t used;
} s_base_ent_t;

/* The baseline: linear probing, power-of-two table at load <= 0.5. */
typedef struct {
    s_base_ent_t *ents;
    uint64_t mask;
} s_base_t;

static uint64_t s_mix(const tier_key_t *key)
{
    uint64_t a, b;
    memcpy(&a, key->b, 8);
    memcpy(&b, key->b + 8, 8);
    uint64_t h = a ^ (b * 0x9e3779b97f4a7c15ull);
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ull;
    h ^= h >> 32;
    return h;
}

static int s_base_init(s_base_t *t, uint32_t n)
{
    uint64_t size = 1;
    while (size < 2 * (uint64_t)n)
        size <<= 1;
    t->ents = calloc(size, sizeof(s_base_ent_t));
    t->mask = size - 1;
    if (!t->ents)
        return -1;
    memset(t->ents, 0, size * sizeof(s_base_ent_t)); /* pre-fault */
    return 0;
}

static void s_base_put(s_base_t *t, const tier_key_t *key, uint32_t value)
{
    uint64_t i = s_mix(key) & t->mask;
    while (t->ents[i].used && !tier_key_eq(&t->ents[i].key, key))
        i = (i + 1) & t->mask;
    t->ents[i] = (s_base_ent_t){*key, value, 1};
}

static uint32_t s_base_get(const s_base_t *t, const tier_key_t *key)
{
    uint64_t i = s_mix(key) & t->mask;
    while (t->ents[i].used) {
        if (tier_key_eq(&t->ents[i].key, key))
            return t->ents[i].value;
        i = (i + 1) & t->mask;
    }
    return UINT32_MAX;
}

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t s_rng_state = 0x853c49e6748fea9bull;

static uint64_t s_rand(void)
{
    uint64_t z = (s_rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct {
    uint32_t n;
    tier_key_t *keys;  /* 2n distinct keys: [0, n) fill, [n, 2n) newcomers */
    tier_key_t *probe; /* keys[0, n) in a random order */
    tier_resv_t out[S_BATCH];
    tier_victim_t victims[S_BATCH];
    volatile uint64_t sink;
} s_bench_t;

static double s_best_of(double a, double b)
{
    return a > b ? a : b;
}

static double s_base_lookups(s_bench_t *b, const s_base_t *t)
{
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        uint64_t sum = 0;
        double t0 = s_now();
        for (uint32_t i = 0; i < b->n; i++)
            sum += s_base_get(t, &b->probe[i]);
        best = s_best_of(best, b->n / (s_now() - t0));
        b->sink += sum;
    }
    return best;
}

/* Fills the pool with keys[0, n) (batch 1). */
static int s_fill(s_bench_t *b, tier_slots_t *s, uint64_t deadline)
{
    for (uint32_t i = 0; i < b->n; i++) {
        if (tier_slots_reserve(s, 1, &b->keys[i], 1, deadline, 1, 0, b->out, NULL, NULL) != 0 ||
            tier_slots_commit(s, 1, &b->keys[i], true, 1, NULL) != 0)
            return -1;
    }
    return 0;
}

static double s_lookups(s_bench_t *b, tier_slots_t *s)
{
    double best = 0;
    tier_slot_info_t info;
    for (int rep = 0; rep < 3; rep++) {
        uint64_t sum = 0;
        double t0 = s_now();
        for (uint32_t i = 0; i < b->n; i++)
            if (tier_slots_lookup(s, 1, &b->probe[i], 1, &info) == 0)
                sum += info.slot;
        best = s_best_of(best, b->n / (s_now() - t0));
        b->sink += sum;
    }
    return best;
}

#define S_LOOKUP_BATCH 256u

static double s_batch_lookups(s_bench_t *b, tier_slots_t *s)
{
    double best = 0;
    tier_slot_info_t info[S_LOOKUP_BATCH];
    int rc[S_LOOKUP_BATCH];
    for (int rep = 0; rep < 3; rep++) {
        uint64_t sum = 0;
        double t0 = s_now();
        for (uint32_t i = 0; i < b->n; i += S_LOOKUP_BATCH) {
            uint32_t m = b->n - i < S_LOOKUP_BATCH ? b->n - i : S_LOOKUP_BATCH;
            (void)tier_slots_lookup_batch(s, 1, &b->probe[i], m, 1, info, rc);
            for (uint32_t k = 0; k < m; k++)
                if (rc[k] == 0)
                    sum += info[k].slot;
        }
        best = s_best_of(best, b->n / (s_now() - t0));
        b->sink += sum;
    }
    return best;
}

static double s_pins(s_bench_t *b, tier_slots_t *s)
{
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        uint64_t sum = 0;
        double t0 = s_now();
        for (uint32_t i = 0; i < b->n; i++) {
            const tier_key_t *k = &b->probe[i];
            uint32_t slot = 0;
            sum += (uint64_t)tier_slots_pin(s, 1, k, 1, &slot) + slot;
            sum += (uint64_t)tier_slots_unpin(s, 1, k);
        }
        best = s_best_of(best, b->n / (s_now() - t0));
        b->sink += sum;
    }
    return best;
}

/* Reserves and commits count keys starting at keys[first], batch keys per
 * reserve; the pool is full, so every key evicts one victim. Best of three
 * runs of count / 3 keys each (the state stays a full pool throughout). */
static double s_churn(s_bench_t *b, tier_slots_t *s, uint32_t first, uint32_t count, uint32_t batch,
                      uint64_t deadline)
{
    size_t nv;
    uint32_t per_run = count / 3 / batch * batch;
    double best = 0;
    for (uint32_t rep = 0; rep < 3; rep++) {
        double t0 = s_now();
        for (uint32_t i = 0; i < per_run; i += batch) {
            const tier_key_t *keys = &b->keys[first + rep * per_run + i];
            if (tier_slots_reserve(s, 1, keys, batch, deadline, 1, 0, b->out, b->victims, &nv) != 0)
                return -1;
            for (uint32_t j = 0; j < batch; j++)
                tier_slots_commit(s, 1, &keys[j], true, 1, NULL);
            b->sink += nv;
        }
        best = s_best_of(best, per_run / (s_now() - t0));
    }
    return best;
}

static int s_usage(void)
{
    fprintf(stderr, "usage: kvt-bench slots [--slots N]   (default 1048576, at least 4096)\n");
    return 2;
}

int bench_slots(int argc, char **argv)
{
    uint32_t n = 1u << 20;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--slots") == 0 && i + 1 < argc) {
            char *end;
            unsigned long v = strtoul(argv[++i], &end, 10);
            if (*end || v < 4096 || v > (1ul << 26))
                return s_usage();
            n = (uint32_t)v;
        } else {
            return s_usage();
        }
    }
    n -= n % (2 * S_BATCH); /* whole batches over both key halves */

    int rc = 1;
    s_bench_t *b = calloc(1, sizeof(*b));
    s_base_t base = {0};
    if (!b)
        return 1;
    b->n = n;
    b->keys = malloc(2 * (size_t)n * sizeof(tier_key_t));
    b->probe = malloc((size_t)n * sizeof(tier_key_t));
    if (!b->keys || !b->probe || s_base_init(&base, n) != 0)
        goto out;
    for (uint64_t i = 0; i < 2 * (uint64_t)n; i++) {
        uint64_t x = s_rand(), y = s_rand();
        memcpy(b->keys[i].b, &x, 8);
        memcpy(b->keys[i].b + 8, &y, 8);
    }
    memcpy(b->probe, b->keys, (size_t)n * sizeof(tier_key_t));
    for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t j = (uint32_t)(s_rand() % (i + 1));
        tier_key_t t = b->probe[i];
        b->probe[i] = b->probe[j];
        b->probe[j] = t;
    }
    for (uint32_t i = 0; i < n; i++)
        s_base_put(&base, &b->keys[i], i);

    printf("slot engine: %u slots, 16-byte keys, random order, pool full (every reserve "
           "evicts).\nMops/s in thread CPU time, best of 3; ratio = ops/s / baseline "
           "lookups/s, baseline =\nopen-addressing hash lookup of the same keys, measured "
           "before each row\n",
           n);
    printf("%-10s %8s %20s %20s %20s %20s %20s\n", "policy", "baseline", "reserve+commit",
           "batch32 (per key)", "lookup", "lookup x256", "pin+unpin");
    const char *policies[3] = {"lru", "clock", "fifo"};
    for (int ttl = 0; ttl < 2; ttl++) {
        for (int p = 0; p < 3; p++) {
            tier_slots_config_t cfg = {.policy = policies[p], .capacity = n, .max_batch = S_BATCH};
            double base_ops = s_base_lookups(b, &base);
            tier_slots_t *s = tier_slots_new(&cfg);
            uint64_t deadline = ttl ? 1u << 30 : 0; /* far away: heap work, no expiry */
            if (!s || s_fill(b, s, deadline) != 0) {
                tier_slots_destroy(&s);
                goto out;
            }
            double look = s_lookups(b, s);
            double lookb = s_batch_lookups(b, s);
            double pins = s_pins(b, s);
            double churn1 = s_churn(b, s, n, n / 2, 1, deadline);
            double churn32 = s_churn(b, s, n + n / 2, n / 2, S_BATCH, deadline);
            tier_slots_destroy(&s);
            if (churn1 < 0 || churn32 < 0)
                goto out;
            char name[16];
            snprintf(name, sizeof(name), "%s%s", policies[p], ttl ? "+ttl" : "");
            printf("%-10s %8.2f %12.2f %6.2fx %12.2f %6.2fx %12.2f %6.2fx %12.2f %6.2fx %12.2f "
                   "%6.2fx\n",
                   name, base_ops / 1e6, churn1 / 1e6, churn1 / base_ops, churn32 / 1e6,
                   churn32 / base_ops, look / 1e6, look / base_ops, lookb / 1e6, lookb / base_ops,
                   pins / 1e6, pins / base_ops);
        }
    }
    rc = 0;
out:
    if (rc != 0)
        fprintf(stderr, "bench slots: setup failed (out of memory?)\n");
    free(base.ents);
    free(b->keys);
    free(b->probe);
    free(b);
    return rc;
}
