/* bench_ops.c — `kvt-bench ops MODE N`: N single operations against the in-process
 * service (bench_svc: a host tier actor and the scheduler), for counting
 * instructions per operation under callgrind, the stable second figure beside the
 * wall-clock parts (docs/PERFORMANCE.md). It fills 8 prompts of 256 keys (4 KiB
 * blocks) through shared memory, does 20 warm-up operations, then zeroes the
 * callgrind counters, runs N operations and dumps them as "region":
 *   lookup    kvt_lookup(PREFIX) of a cached 256-key prompt
 *   putpair   kvt_prepare_put of 32 fresh keys + kvt_complete_put (all failed: the
 *             reservation is aborted, no bytes move)
 *   getpair   kvt_prepare_get of 32 cached keys + kvt_complete_get (no bytes move)
 *   bothpair  kvt_prepare of 32 cached keys then 32 fresh ones (one get+put window)
 *             + kvt_complete (gets released, puts all failed): getpair + putpair's
 *             work in two calls instead of four (issue 13 §1, §2)
 *   shmget    kvt_submit_get + kvt_wait of 32 cached blocks on one token (shm path)
 *   shmput    kvt_submit_put + kvt_wait of 32 blocks on one put token (shm path)
 * Per operation = (totals at 2N - totals at N) / N removes the start-up. Without
 * valgrind the callgrind requests do nothing and it prints the wall time.
 * --events runs the same on a service with events on (bench_svc_start_events:
 * publisher, mirror, vLLM stream and a subscriber, all counted). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_ZERO_STATS
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS_AT(s) ((void)(s))
#endif

#include "bench.h"
#include "bench_svc.h"

#define S_BLOCK 4096u
#define S_PROMPT 256u
#define S_BATCH 32u
#define S_PROMPTS 8u
#define S_WARM 20u

typedef struct {
    kvt_client_t *c;
    uint64_t job, fresh;
    const void *src[S_PROMPT];
    void *dst[S_PROMPT];
    kvt_key_t keys[S_PROMPTS][S_PROMPT];
} s_ops_t;

static const char *const s_rid = "ops-req";

static int s_fail(s_ops_t *o, const char *what)
{
    fprintf(stderr, "ops bench: %s: %s\n", what, kvt_last_error(o->c));
    return -1;
}

static int s_wait(s_ops_t *o, const char *what)
{
    kvt_job_result_t r;
    if (kvt_wait(o->c, &o->job, 1, 10000, &r) != 0 || r.status != 0 || r.n_failed)
        return s_fail(o, what);
    return 0;
}

static int s_put_prompt(s_ops_t *o, const kvt_key_t *k, uint32_t n)
{
    kvt_token_t *t = NULL;
    if (kvt_prepare_put(o->c, BENCH_SVC_INSTANCE, s_rid, k, n, &t) != 0 || kvt_token_count(t) != n)
        return s_fail(o, "prepare_put");
    if (kvt_submit_put(o->c, ++o->job, t, o->src, S_BLOCK) != 0 || s_wait(o, "put") < 0)
        return s_fail(o, "submit_put");
    return kvt_complete_put(o->c, &t, NULL) == 0 ? 0 : s_fail(o, "complete_put");
}

static void s_fresh_keys(s_ops_t *o, kvt_key_t *k)
{
    for (unsigned i = 0; i < S_BATCH; i++)
        bench_svc_key(9, o->fresh++, &k[i]);
}

/* One operation of mode; tok is the shm modes' token. */
static int s_one(s_ops_t *o, const char *mode, unsigned it, kvt_token_t *tok)
{
    static bool hit[S_PROMPT], ok[S_PROMPT] = {true};
    static uint32_t tiers[S_PROMPT];
    kvt_token_t *t = NULL;
    kvt_key_t k[S_BATCH];
    if (strcmp(mode, "lookup") == 0) {
        kvt_lookup_result_t r = {.hit = hit, .tier_ids = tiers};
        if (kvt_lookup(o->c, BENCH_SVC_INSTANCE, NULL, KVT_LOOKUP_PREFIX, 0,
                       o->keys[it % S_PROMPTS], S_PROMPT, &r) != 0 ||
            r.hit_count != S_PROMPT)
            return s_fail(o, "lookup");
    } else if (strcmp(mode, "putpair") == 0) {
        bool no[S_BATCH] = {false};
        s_fresh_keys(o, k);
        if (kvt_prepare_put(o->c, BENCH_SVC_INSTANCE, s_rid, k, S_BATCH, &t) != 0 ||
            kvt_complete_put(o->c, &t, no) != 0)
            return s_fail(o, "prepare_put / complete_put");
    } else if (strcmp(mode, "getpair") == 0) {
        for (unsigned i = 0; i < S_BATCH; i++)
            ok[i] = true;
        if (kvt_prepare_get(o->c, BENCH_SVC_INSTANCE, s_rid, o->keys[it % S_PROMPTS], S_BATCH,
                            &t) != 0 ||
            kvt_complete_get(o->c, &t, ok) != 0)
            return s_fail(o, "prepare_get / complete_get");
    } else if (strcmp(mode, "bothpair") == 0) {
        static kvt_key_t both[2 * S_BATCH];
        static bool no[S_BATCH];
        memcpy(both, o->keys[it % S_PROMPTS], S_BATCH * sizeof both[0]);
        s_fresh_keys(o, both + S_BATCH);
        for (unsigned i = 0; i < S_BATCH; i++)
            ok[i] = true;
        kvt_prepare_info_t info;
        if (kvt_prepare(o->c, BENCH_SVC_INSTANCE, s_rid, both, 2 * S_BATCH, NULL, &t, &info) != 0 ||
            info.hit_count != S_BATCH || kvt_complete(o->c, &t, ok, no, NULL) != 0)
            return s_fail(o, "prepare / complete (get+put)");
    } else if (strcmp(mode, "shmget") == 0) {
        if (kvt_submit_get(o->c, ++o->job, tok, o->dst, S_BLOCK) != 0 || s_wait(o, "get") < 0)
            return s_fail(o, "submit_get");
    } else {
        if (kvt_submit_put(o->c, ++o->job, tok, o->src, S_BLOCK) != 0 || s_wait(o, "put") < 0)
            return s_fail(o, "submit_put");
    }
    return 0;
}

static int s_run(s_ops_t *o, const char *mode, unsigned n)
{
    kvt_token_t *tok = NULL;
    kvt_key_t k[S_BATCH];
    int rc = 0;
    if (strcmp(mode, "shmget") == 0)
        rc = kvt_prepare_get(o->c, BENCH_SVC_INSTANCE, s_rid, o->keys[0], S_BATCH, &tok);
    else if (strcmp(mode, "shmput") == 0) {
        s_fresh_keys(o, k);
        rc = kvt_prepare_put(o->c, BENCH_SVC_INSTANCE, s_rid, k, S_BATCH, &tok);
    }
    if (rc != 0)
        return s_fail(o, "prepare");
    struct timespec t0, t1;
    for (unsigned it = 0; it < S_WARM + n && rc == 0; it++) {
        if (it == S_WARM) {
            CALLGRIND_ZERO_STATS;
            clock_gettime(CLOCK_MONOTONIC, &t0);
        }
        rc = s_one(o, mode, it, tok);
    }
    CALLGRIND_DUMP_STATS_AT("region");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (tok && strcmp(mode, "shmget") == 0)
        (void)kvt_complete_get(o->c, &tok, NULL);
    else if (tok)
        (void)kvt_complete_put(o->c, &tok, NULL);
    double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 1e3;
    if (rc == 0)
        printf("ops %s: %u operations, %.1f us each (wall clock; count instructions under "
               "callgrind)\n",
               mode, n, n ? us / n : 0.0);
    return rc;
}

static int s_mode(const char *mode, unsigned n, bool events)
{
    static s_ops_t o;
    memset(&o, 0, sizeof o);
    static uint8_t *src, *dst;
    src = aligned_alloc(4096, (size_t)S_PROMPT * S_BLOCK);
    dst = aligned_alloc(4096, (size_t)S_PROMPT * S_BLOCK);
    bench_svc_t *svc = !src || !dst ? NULL
                       : events     ? bench_svc_start_events("ops", S_BLOCK, 16384, true)
                                    : bench_svc_start("ops", S_BLOCK, 16384);
    o.c = svc ? bench_svc_connect(svc, false, "ops") : NULL;
    int rc = o.c ? 0 : -1;
    kvt_request_t rq = {.instance_id = BENCH_SVC_INSTANCE, .request_id = s_rid};
    if (rc == 0 && kvt_request_begin(o.c, &rq) != 0)
        rc = s_fail(&o, "request_begin");
    if (rc == 0) {
        memset(src, 0x5a, (size_t)S_PROMPT * S_BLOCK);
        for (unsigned i = 0; i < S_PROMPT; i++) {
            o.src[i] = src + (size_t)i * S_BLOCK;
            o.dst[i] = dst + (size_t)i * S_BLOCK;
        }
        o.fresh = 1u << 20;
    }
    for (unsigned p = 0; rc == 0 && p < S_PROMPTS; p++) {
        for (unsigned i = 0; i < S_PROMPT; i++)
            bench_svc_key(7, (uint64_t)p * S_PROMPT + i, &o.keys[p][i]);
        rc = s_put_prompt(&o, o.keys[p], S_PROMPT);
    }
    if (rc == 0)
        rc = s_run(&o, mode, n);
    if (o.c)
        (void)kvt_request_end(o.c, BENCH_SVC_INSTANCE, s_rid, NULL);
    kvt_close(&o.c);
    bench_svc_stop(&svc);
    free(src);
    free(dst);
    return rc == 0 ? 0 : 1;
}

/* `kvt-bench ops` alone (as `all` runs it): every mode, 200 operations. */
int bench_ops(int argc, char **argv)
{
    static const char *const modes[] = {"lookup", "putpair", "getpair", "bothpair", "shmget",
                                        "shmput"};
    if (argc == 1) {
        int rc = 0;
        for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
            rc |= s_mode(modes[i], 200, false);
        return rc;
    }
    bool known = false;
    bool events = argc == 4 && strcmp(argv[3], "--events") == 0;
    for (size_t i = 0; (argc == 3 || events) && i < sizeof modes / sizeof modes[0]; i++)
        known = known || strcmp(argv[1], modes[i]) == 0;
    int n = argc >= 3 ? atoi(argv[2]) : 0;
    if (!known || n < 1 || n > 1000000) {
        fprintf(stderr, "usage: kvt-bench ops [lookup|putpair|getpair|bothpair|shmget|shmput N "
                        "(1..1000000) [--events]]\n");
        return 2;
    }
    return s_mode(argv[1], (unsigned)n, events);
}
