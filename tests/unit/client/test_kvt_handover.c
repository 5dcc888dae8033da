/* test_kvt_handover.c — tokens across processes (issue 11 §3, kvtier.h "Tokens
 * across processes"): this process is the control role against the real scheduler
 * and a real host tier actor in it over real ZeroMQ; a data-role process
 * (kvt_handover_worker, fork/exec, its own handle) imports the tokens it is
 * handed on stdin, runs their jobs and writes their result on stdout. Each test
 * names its rule: a put prepared here and written there (shared memory or frames)
 * commits when its result is imported here and the token completed; a get there
 * reads those bytes exact; a layer-wise put and get run there on the segments the
 * token carries; an imported token cannot be completed, only released; a worker
 * that dies leaves the window to the control side (complete: nothing committed);
 * bad bytes, another cluster's token, a result for another token or other keys
 * are INVALID_ARGUMENT, nothing applied; a token of an older leader is ABORTED, at
 * import and when a tier actor's leader fence refuses the worker's transfer. The
 * tier actor and the scheduler share the cluster secret: every transfer the worker
 * makes over frames is checked against the sealed token it imported. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus_host.h"
#include "bus_token.h"
#include "bus_token_mac.h"
#include "kvt_export.h"
#include "kvtier.h"
#include "sched_actor.h"
#include "tier_actor.h"

#define T_BLOCK 8192u
#define T_SEGS 16u
#define T_TPB 16u
#define T_INST "llama-x"
#define T_LAYERED "llama-x-lw"
#define T_CAP 64u
#define T_N 4u
#define T_EPOCH 5u
#define T_CLUSTER "tokx-e2e"

static const uint8_t t_secret[BUS_SECRET_BYTES] = "handover-e2e-secret-of-32-bytes";

typedef struct {
    char tier_ep[128];
    char shm[64];
    zactor_t *tier;
    zactor_t *sched;
    char sched_ep[256];
    kvt_client_t *c; /* the control role */
    kvt_client_t *w; /* another handle of this process, for in-process imports */
    uint64_t seq;
} t_env_t;

static uint8_t t_byte(uint32_t seed, uint32_t key, size_t j)
{
    return (uint8_t)(seed * 13u + key * 31u + (uint32_t)j * 7u + 1u); /* as the worker's */
}

static kvt_client_t *t_client(t_env_t *e, const char *name)
{
    char err[512];
    kvt_options_t o = {.coordinators = e->sched_ep, .name = name, .timeout_ms = 5000};
    kvt_client_t *c = kvt_connect(&o, err, sizeof err);
    if (!c)
        fprintf(stderr, "connect: %s\n", err);
    return c;
}

static int t_register(kvt_client_t *c, const char *id, uint32_t segments)
{
    kvt_instance_t spec = {.instance_id = id,
                           .model = "llama",
                           .dtype = "fp16",
                           .tokens_per_block = T_TPB,
                           .bytes_per_block = T_BLOCK,
                           .segments = segments};
    return kvt_register_instance(c, &spec);
}

/* A scheduler of `epoch` (sealing tokens with the secret), told the tier is up. */
static zactor_t *t_sched(t_env_t *e, uint64_t epoch)
{
    sched_config_t sc;
    sched_config_defaults(&sc);
    snprintf(sc.cluster, sizeof sc.cluster, T_CLUSTER);
    sc.leader_epoch = epoch;
    sc.has_secret = true;
    memcpy(sc.secret, t_secret, sizeof sc.secret);
    sc.n_tiers = 1;
    sc.tiers[0] = (sched_tier_config_t){.tier_id = 1, .capacity = T_CAP, .slot_size = T_BLOCK};
    snprintf(sc.tiers[0].name, sizeof sc.tiers[0].name, "host0");
    snprintf(sc.tiers[0].kind, sizeof sc.tiers[0].kind, "host");
    sc.n_chains = 1;
    snprintf(sc.chains[0].name, sizeof sc.chains[0].name, "default");
    sc.chains[0].n_tiers = 1;
    sc.chains[0].tier_ids[0] = 1;
    zactor_t *sched = sched_actor_new(&sc);
    if (!sched)
        return NULL;
    kvtier_TierInfo ti = kvtier_TierInfo_init_zero;
    ti.tier_id = 1;
    snprintf(ti.name, sizeof ti.name, "host0");
    ti.kind = kvtier_TierKind_TIER_KIND_HOST;
    snprintf(ti.endpoint, sizeof ti.endpoint, "%s", e->tier_ep);
    bus_host_identity(NULL, ti.host, sizeof ti.host);
    snprintf(ti.shm, sizeof ti.shm, "%s", e->shm);
    ti.epoch = tier_actor_epoch(e->tier);
    ti.capacity_slots = T_CAP;
    ti.slot_bytes = T_BLOCK;
    ti.up = true;
    if (sched_actor_tier_change(sched, true, &ti) != 0)
        zactor_destroy(&sched);
    return sched;
}

static int t_setup(void **state)
{
    t_env_t *e = calloc(1, sizeof *e);
    snprintf(e->shm, sizeof e->shm, "/kvtc-tokx-%d", (int)getpid());
    tier_actor_config_t tc = {
        .tier_id = 1, .endpoint = "tcp://127.0.0.1:*", .secret = t_secret, .cluster = T_CLUSTER};
    snprintf(tc.tier.name, sizeof tc.tier.name, "host0");
    snprintf(tc.tier.kind, sizeof tc.tier.kind, "host");
    snprintf(tc.tier.path, sizeof tc.tier.path, "%s", e->shm);
    tc.tier.capacity = T_CAP;
    tc.tier.slot_size = T_BLOCK;
    e->tier = tier_actor_new(&tc);
    if (!e->tier)
        return -1;
    tier_actor_endpoint(e->tier, e->tier_ep, sizeof e->tier_ep);
    e->sched = t_sched(e, T_EPOCH);
    if (!e->sched)
        return -1;
    sched_actor_endpoint(e->sched, e->sched_ep, sizeof e->sched_ep);
    e->c = t_client(e, "control");
    e->w = t_client(e, "worker-here");
    if (!e->c || !e->w)
        return -1;
    kvt_cluster_info_t ci;
    for (int i = 0; i < 500; i++) {
        if (kvt_cluster_info(e->c, &ci) == 0 && ci.n_tiers == 1 && ci.tiers[0].up)
            break;
        zclock_sleep(10);
    }
    if (t_register(e->c, T_INST, 0) != 0 || t_register(e->c, T_LAYERED, T_SEGS) != 0) {
        fprintf(stderr, "register: %s\n", kvt_last_error(e->c));
        return -1;
    }
    *state = e;
    return 0;
}

static int t_teardown(void **state)
{
    t_env_t *e = *state;
    kvt_close(&e->c);
    kvt_close(&e->w);
    zactor_destroy(&e->sched);
    zactor_destroy(&e->tier);
    free(e);
    return 0;
}

/* T_N keys no other test uses (seed), and a request begun for them. */
static void t_request(t_env_t *e, const char *inst, uint32_t seed, kvt_key_t *keys, char *rid,
                      size_t rlen)
{
    uint32_t tokens[T_N * T_TPB];
    for (uint32_t i = 0; i < T_N * T_TPB; i++)
        tokens[i] = seed * 100000u + i;
    assert_int_equal(kvt_block_keys(tokens, T_N * T_TPB, T_TPB, NULL, keys, T_N), (int)T_N);
    snprintf(rid, rlen, "r-%" PRIu64, ++e->seq);
    kvt_request_t r = {.instance_id = inst, .request_id = rid};
    assert_int_equal(kvt_request_begin(e->c, &r), 0);
}

static uint8_t *t_export(kvt_client_t *c, kvt_token_t *tok, size_t *len)
{
    size_t need = 0;
    assert_int_equal(kvt_token_export(c, tok, NULL, 0, &need), 0);
    assert_true(need > 0);
    uint8_t *b = malloc(need);
    if (kvt_token_export(c, tok, b, need, len) != 0)
        fail_msg("export: %s", kvt_last_error(c));
    assert_int_equal(*len, need);
    return b;
}

/* Runs the worker on `in`; its result lands in out (*out_len). Its exit status. */
static int t_worker(t_env_t *e, const char *mode, bool frames, uint32_t seed, uint32_t segs,
                    const uint8_t *in, size_t in_len, uint8_t *out, size_t cap, size_t *out_len)
{
    int to[2], from[2];
    assert_int_equal(pipe(to), 0);
    assert_int_equal(pipe(from), 0);
    char seed_s[16], block_s[16], segs_s[16];
    snprintf(seed_s, sizeof seed_s, "%u", seed);
    snprintf(block_s, sizeof block_s, "%u", T_BLOCK);
    snprintf(segs_s, sizeof segs_s, "%u", segs);
    char *argv[] = {KVT_HANDOVER_WORKER,
                    e->sched_ep,
                    (char *)mode,
                    frames ? "1" : "0",
                    seed_s,
                    block_s,
                    segs_s,
                    NULL};
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* only async-signal-safe calls before exec (this process has threads) */
        dup2(to[0], 0);
        dup2(from[1], 1);
        close(to[0]);
        close(to[1]);
        close(from[0]);
        close(from[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    for (size_t w = 0; w < in_len;) {
        ssize_t r = write(to[1], in + w, in_len - w);
        assert_true(r > 0);
        w += (size_t)r;
    }
    close(to[1]);
    size_t n = 0;
    for (ssize_t r; (r = read(from[0], out + n, cap - n)) > 0 || (r < 0 && errno == EINTR);)
        n += r > 0 ? (size_t)r : 0;
    close(from[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    *out_len = n;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Hands tok to a worker in `mode` and applies its result to tok here. */
static void t_handover(t_env_t *e, kvt_token_t *tok, const char *mode, bool frames, uint32_t seed,
                       uint32_t segs)
{
    size_t len = 0, rlen = 0;
    uint8_t *b = t_export(e->c, tok, &len);
    static uint8_t res[1 << 20];
    int st = t_worker(e, mode, frames, seed, segs, b, len, res, sizeof res, &rlen);
    free(b);
    if (st != 0)
        fail_msg("worker %s (%s) exited %d", mode, frames ? "frames" : "shm", st);
    if (kvt_token_result_import(e->c, tok, res, rlen) != 0)
        fail_msg("result import: %s", kvt_last_error(e->c));
}

/* The blocks of keys as this process reads them (shared memory), against seed. */
static void t_check_here(t_env_t *e, const char *inst, const char *rid, const kvt_key_t *keys,
                         uint32_t seed)
{
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_get(e->c, inst, rid, keys, T_N, &tok), 0);
    assert_int_equal(kvt_token_count(tok), T_N);
    uint8_t *bufs[T_N];
    for (uint32_t i = 0; i < T_N; i++)
        bufs[i] = calloc(1, T_BLOCK);
    uint64_t job = 900 + ++e->seq;
    assert_int_equal(kvt_submit_get(e->c, job, tok, (void *const *)bufs, T_BLOCK), 0);
    kvt_job_result_t r;
    assert_int_equal(kvt_wait(e->c, &job, 1, 10000, &r), 0);
    assert_int_equal(r.status, 0);
    for (uint32_t i = 0; i < T_N; i++) {
        for (size_t j = 0; j < T_BLOCK; j++)
            if (bufs[i][j] != t_byte(seed, i, j))
                fail_msg("key %u byte %zu: %u, stored %u", i, j, bufs[i][j], t_byte(seed, i, j));
        free(bufs[i]);
    }
    assert_int_equal(kvt_complete_get(e->c, &tok, NULL), 0);
}

static uint32_t t_hits(t_env_t *e, const char *inst, const kvt_key_t *keys)
{
    kvt_lookup_result_t lr = {0};
    assert_int_equal(kvt_lookup(e->c, inst, NULL, KVT_LOOKUP_PER_KEY, 0, keys, T_N, &lr), 0);
    return lr.hit_count;
}

/* Put prepared here, written by the worker, committed here; then read by a worker
 * the other way (frames after shm, shm after frames) and here, byte-exact. */
static void t_put_get(t_env_t *e, uint32_t seed, bool put_frames)
{
    kvt_key_t keys[T_N];
    char rid[32];
    t_request(e, T_INST, seed, keys, rid, sizeof rid);
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_put(e->c, T_INST, rid, keys, T_N, &tok), 0);
    assert_int_equal(kvt_token_count(tok), T_N);
    t_handover(e, tok, "put", put_frames, seed, 1);
    assert_int_equal(kvt_complete_put(e->c, &tok, NULL), 0);
    assert_null(tok);
    assert_int_equal(t_hits(e, T_INST, keys), T_N);
    assert_int_equal(kvt_prepare_get(e->c, T_INST, rid, keys, T_N, &tok), 0);
    t_handover(e, tok, "get", !put_frames, seed, 1);
    assert_int_equal(kvt_complete_get(e->c, &tok, NULL), 0);
    t_check_here(e, T_INST, rid, keys, seed);
    assert_int_equal(kvt_request_end(e->c, T_INST, rid, NULL), 0);
}

/* Rule (§3): a control process prepares, a data process moves the bytes over
 * shared memory; the result comes back and the control side completes. */
static void test_put_shm_get_frames(void **state)
{
    t_put_get(*state, 11, false);
}

/* Rule (§3): the same with the worker's put over frames (checksums computed there
 * travel back in the result: the tier checks them at complete). */
static void test_put_frames_get_shm(void **state)
{
    t_put_get(*state, 12, true);
}

/* Rule (§2 x §3): layer-wise jobs on an imported token, with the segments the
 * token carries (the worker registers nothing): a put in two ranges, gets in
 * reverse order, on shared memory and over frames (staged). */
static void test_layerwise_on_imported_tokens(void **state)
{
    t_env_t *e = *state;
    for (int frames = 0; frames <= 1; frames++) {
        uint32_t seed = 21u + (uint32_t)frames;
        kvt_key_t keys[T_N];
        char rid[32];
        t_request(e, T_LAYERED, seed, keys, rid, sizeof rid);
        kvt_token_t *tok = NULL;
        assert_int_equal(kvt_prepare_put(e->c, T_LAYERED, rid, keys, T_N, &tok), 0);
        t_handover(e, tok, "put-segs", frames, seed, T_SEGS);
        assert_int_equal(kvt_complete_put(e->c, &tok, NULL), 0);
        assert_int_equal(t_hits(e, T_LAYERED, keys), T_N);
        assert_int_equal(kvt_prepare_get(e->c, T_LAYERED, rid, keys, T_N, &tok), 0);
        t_handover(e, tok, "get-segs", !frames, seed, T_SEGS);
        assert_int_equal(kvt_complete_get(e->c, &tok, NULL), 0);
        t_check_here(e, T_LAYERED, rid, keys, seed);
        assert_int_equal(kvt_request_end(e->c, T_LAYERED, rid, NULL), 0);
    }
}

/* Rule: a put whose layer-wise result stopped short cannot commit by a success
 * flag here either (the progress travels back with the result). */
static void test_layerwise_progress_travels_back(void **state)
{
    t_env_t *e = *state;
    kvt_key_t keys[T_N];
    char rid[32];
    t_request(e, T_LAYERED, 23, keys, rid, sizeof rid);
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_put(e->c, T_LAYERED, rid, keys, T_N, &tok), 0);
    size_t len = 0;
    uint8_t *b = t_export(e->c, tok, &len);
    kvt_token_t *wt = NULL;
    assert_int_equal(kvt_token_import(e->w, b, len, &wt), 0);
    free(b);
    uint8_t *blk[T_N];
    void *ptrs[T_N * 4];
    for (uint32_t i = 0; i < T_N; i++) {
        blk[i] = calloc(1, T_BLOCK);
        for (uint32_t s = 0; s < 4; s++)
            ptrs[i * 4 + s] = blk[i] + (size_t)s * (T_BLOCK / T_SEGS);
    }
    uint64_t job = 77;
    assert_int_equal(kvt_submit_put_segments(e->w, job, wt, 0, 4, (const void *const *)ptrs), 0);
    kvt_job_result_t r;
    assert_int_equal(kvt_wait(e->w, &job, 1, 10000, &r), 0);
    uint8_t res[4096];
    assert_int_equal(kvt_token_result_export(e->w, wt, res, sizeof res, &len), 0);
    assert_int_equal(kvt_token_release(e->w, &wt), 0);
    assert_int_equal(kvt_token_result_import(e->c, tok, res, len), 0);
    bool yes[T_N] = {true, true, true, true};
    assert_int_equal(kvt_complete_put(e->c, &tok, yes), -KVT_INVALID_ARGUMENT);
    assert_non_null(strstr(kvt_last_error(e->c), "stopped at segment 4 of 16"));
    assert_int_equal(kvt_complete_put(e->c, &tok, NULL), 0);
    assert_int_equal(t_hits(e, T_LAYERED, keys), 0);
    for (uint32_t i = 0; i < T_N; i++)
        free(blk[i]);
    assert_int_equal(kvt_request_end(e->c, T_LAYERED, rid, NULL), 0);
}

/* Rules: an imported token is never completed where it was imported (it is
 * released); a token this handle prepared is never released (it is completed);
 * a worker that dies leaves the window to the control side: completing it with
 * what was recorded (nothing came back) commits nothing, and the keys can be put
 * again. */
static void test_refused_release_and_dead_worker(void **state)
{
    t_env_t *e = *state;
    kvt_key_t keys[T_N];
    char rid[32];
    t_request(e, T_INST, 31, keys, rid, sizeof rid);
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_put(e->c, T_INST, rid, keys, T_N, &tok), 0);
    assert_int_equal(kvt_token_release(e->c, &tok), -KVT_INVALID_ARGUMENT);
    assert_non_null(strstr(kvt_last_error(e->c), "complete it"));
    assert_non_null(tok);
    size_t len = 0, rlen = 0;
    uint8_t *b = t_export(e->c, tok, &len);
    static uint8_t res[4096];
    assert_int_equal(t_worker(e, "refuse", false, 31, 1, b, len, res, sizeof res, &rlen), 0);
    assert_int_equal(t_worker(e, "die", false, 31, 1, b, len, res, sizeof res, &rlen), 3);
    assert_int_equal(rlen, 0);
    free(b);
    assert_int_equal(kvt_complete_put(e->c, &tok, NULL), 0);
    assert_int_equal(t_hits(e, T_INST, keys), 0);
    assert_int_equal(kvt_prepare_put(e->c, T_INST, rid, keys, T_N, &tok), 0);
    assert_int_equal(kvt_token_count(tok), T_N);
    t_handover(e, tok, "put", false, 31, 1);
    assert_int_equal(kvt_complete_put(e->c, &tok, NULL), 0);
    t_check_here(e, T_INST, rid, keys, 31);
    assert_int_equal(kvt_request_end(e->c, T_INST, rid, NULL), 0);
}

static void t_expect(kvt_client_t *c, int rc, int want, const char *says)
{
    if (rc != want || !strstr(kvt_last_error(c), says))
        fail_msg("got %d \"%s\", expected %d saying \"%s\"", rc, kvt_last_error(c), want, says);
}

/* Re-encodes exported bytes with some fields changed (a consistent forgery: the
 * payload re-encoded too, checksums right), to reach the checks behind the codec. */
static size_t t_forge(const uint8_t *b, size_t len, const char *cluster, uint64_t epoch,
                      uint8_t *out, size_t cap)
{
    kvti_tokx_t x;
    char err[256];
    assert_int_equal(kvti_tokx_decode(b, len, &x, err, sizeof err), 0);
    bus_token_view_t v;
    assert_int_equal(bus_token_decode(x.payload, x.payload_len, &v, err, sizeof err), 0);
    bus_token_entry_t ents[T_N];
    for (uint32_t i = 0; i < v.n_entries; i++)
        bus_token_entry_at(&v, i, &ents[i]);
    static uint8_t payload[65536];
    size_t plen = 0;
    v.meta.leader_epoch = epoch;
    assert_int_equal(bus_token_encode(v.kind, &v.meta, v.tiers, v.n_tiers, ents, v.n_entries,
                                      payload, sizeof payload, &plen),
                     0);
    if (cluster)
        snprintf(x.cluster, sizeof x.cluster, "%s", cluster);
    x.leader_epoch = epoch;
    x.payload = payload;
    x.payload_len = (uint32_t)plen;
    size_t n = 0;
    assert_int_equal(kvti_tokx_encode(&x, out, cap, &n, err, sizeof err), 0);
    return n;
}

/* Rules: bad bytes, another cluster's token, results for another token or other
 * keys are INVALID_ARGUMENT with what is wrong, and nothing is applied: the token
 * still completes with the right result; an older leader's token is ABORTED; a
 * newer epoch than the handle's leader, even after asking it, is UNAVAILABLE. */
static void test_bad_input(void **state)
{
    t_env_t *e = *state;
    kvt_key_t keys[T_N];
    char rid[32];
    t_request(e, T_INST, 41, keys, rid, sizeof rid);
    kvt_token_t *tok = NULL, *other = NULL, *wt = (kvt_token_t *)1;
    assert_int_equal(kvt_prepare_put(e->c, T_INST, rid, keys, T_N, &tok), 0);
    size_t len = 0;
    uint8_t *b = t_export(e->c, tok, &len);
    uint8_t small[8];
    size_t need = 0;
    t_expect(e->c, kvt_token_export(e->c, tok, small, sizeof small, &need), -KVT_INVALID_ARGUMENT,
             "bytes of room");
    assert_int_equal(need, len);

    t_expect(e->w, kvt_token_import(e->w, b, len - 1, &wt), -KVT_INVALID_ARGUMENT, "checksum");
    assert_null(wt);
    t_expect(e->w, kvt_token_import(e->w, b, 5, &wt), -KVT_INVALID_ARGUMENT, "too short");
    uint8_t *c = malloc(len + 4096);
    memcpy(c, b, len);
    c[len / 2] ^= 0xff;
    t_expect(e->w, kvt_token_import(e->w, c, len, &wt), -KVT_INVALID_ARGUMENT, "checksum");
    memcpy(c, "KVT1", 4);
    t_expect(e->w, kvt_token_import(e->w, c, len, &wt), -KVT_INVALID_ARGUMENT,
             "not an exported token");
    memcpy(c, b, len);
    c[4] = 7;
    t_expect(e->w, kvt_token_import(e->w, c, len, &wt), -KVT_INVALID_ARGUMENT, "version 7");
    size_t n = t_forge(b, len, "another-cluster", T_EPOCH, c, len + 4096);
    t_expect(e->w, kvt_token_import(e->w, c, n, &wt), -KVT_INVALID_ARGUMENT,
             "of cluster \"another-cluster\", this handle's leader serves \"" T_CLUSTER "\"");
    n = t_forge(b, len, NULL, T_EPOCH - 1, c, len + 4096);
    t_expect(e->w, kvt_token_import(e->w, c, n, &wt), -KVT_ABORTED,
             "minted by the leader of epoch 4, which is gone");
    n = t_forge(b, len, NULL, T_EPOCH + 1, c, len + 4096);
    t_expect(e->w, kvt_token_import(e->w, c, n, &wt), -KVT_UNAVAILABLE,
             "has not found the new leader");
    assert_null(wt);

    /* a combined window is never exported */
    char rid2[32];
    kvt_key_t keys2[T_N];
    t_request(e, T_INST, 42, keys2, rid2, sizeof rid2);
    assert_int_equal(kvt_prepare(e->c, T_INST, rid2, keys2, T_N, NULL, &other, NULL), 0);
    t_expect(e->c, kvt_token_export(e->c, other, c, len + 4096, &n), -KVT_INVALID_ARGUMENT,
             "never exported");
    t_expect(e->c, kvt_token_export(e->c, kvt_token_half(other, KVT_HALF_PUT), c, len + 4096, &n),
             -KVT_INVALID_ARGUMENT, "never exported");
    bool no[T_N] = {false};
    assert_int_equal(kvt_complete(e->c, &other, no, no, NULL), 0);
    assert_int_equal(kvt_request_end(e->c, T_INST, rid2, NULL), 0);

    /* the real token, imported here on another handle: its result, and forgeries of it */
    assert_int_equal(kvt_token_import(e->w, b, len, &wt), 0);
    assert_int_equal(kvt_token_count(wt), T_N);
    assert_memory_equal(kvt_token_keys(wt), keys, sizeof keys);
    t_expect(e->w, kvt_token_result_import(e->w, wt, b, len), -KVT_INVALID_ARGUMENT,
             "imported here");
    uint8_t *bufs[T_N];
    for (uint32_t i = 0; i < T_N; i++) {
        bufs[i] = malloc(T_BLOCK);
        for (size_t j = 0; j < T_BLOCK; j++)
            bufs[i][j] = t_byte(41, i, j);
    }
    uint64_t job = 5;
    assert_int_equal(kvt_submit_put(e->w, job, wt, (const void *const *)bufs, T_BLOCK), 0);
    kvt_job_result_t jr;
    assert_int_equal(kvt_wait(e->w, &job, 1, 10000, &jr), 0);
    assert_int_equal(jr.status, 0);
    static uint8_t res[4096], bad[4096];
    size_t rlen = 0;
    assert_int_equal(kvt_token_result_export(e->w, wt, res, sizeof res, &rlen), 0);
    assert_int_equal(kvt_token_release(e->w, &wt), 0);
    assert_null(wt);

    t_expect(e->c, kvt_token_result_import(e->c, tok, res, rlen - 3), -KVT_INVALID_ARGUMENT,
             "checksum");
    t_expect(e->c, kvt_token_result_import(e->c, tok, b, len), -KVT_INVALID_ARGUMENT,
             "not an exported result");
    kvti_tokr_t r;
    char err[256];
    assert_int_equal(kvti_tokr_decode(res, rlen, &r, err, sizeof err), 0);
    uint8_t fkeys[T_N * 16];
    uint64_t sums[T_N];
    for (uint32_t i = 0; i < T_N; i++)
        sums[i] = kvti_tokr_checksum(&r, i);
    memcpy(fkeys, r.keys, sizeof fkeys);
    kvti_tokr_t f = r;
    f.sums = sums;
    f.token_id++;
    size_t fl = 0;
    assert_int_equal(kvti_tokr_encode(&f, bad, sizeof bad, &fl, err, sizeof err), 0);
    t_expect(e->c, kvt_token_result_import(e->c, tok, bad, fl), -KVT_INVALID_ARGUMENT,
             "the result is of token");
    f = r;
    f.sums = sums;
    fkeys[2 * 16] ^= 1;
    f.keys = fkeys;
    assert_int_equal(kvti_tokr_encode(&f, bad, sizeof bad, &fl, err, sizeof err), 0);
    t_expect(e->c, kvt_token_result_import(e->c, tok, bad, fl), -KVT_INVALID_ARGUMENT,
             "key 2 of the result is not the token's key 2");
    f = r;
    f.sums = sums;
    f.kind = 1; /* a get's result for a put token */
    assert_int_equal(kvti_tokr_encode(&f, bad, sizeof bad, &fl, err, sizeof err), 0);
    t_expect(e->c, kvt_token_result_import(e->c, tok, bad, fl), -KVT_INVALID_ARGUMENT,
             "of kind 1 over");

    /* nothing of those was applied; the real result commits every key */
    assert_int_equal(kvt_token_result_import(e->c, tok, res, rlen), 0);
    assert_int_equal(kvt_complete_put(e->c, &tok, NULL), 0);
    assert_int_equal(t_hits(e, T_INST, keys), T_N);
    t_check_here(e, T_INST, rid, keys, 41);
    for (uint32_t i = 0; i < T_N; i++)
        free(bufs[i]);
    free(b);
    free(c);
    assert_int_equal(kvt_request_end(e->c, T_INST, rid, NULL), 0);
}

/* Rule (kvtier.h "Failover"): a worker's transfer of a token of a leader that is
 * gone ends ABORTED when the tier actor's leader fence refuses it, though the
 * worker's handle never heard of the new leader. A scheduler of the next epoch
 * raises the tier's fence; the worker imports the old leader's token (the old
 * scheduler still answers, as a deposed one may) and its put over frames is
 * refused by the tier: the job reports ABORTED, all keys failed, nothing written.
 * Last in the group: the old scheduler's tokens are fenced from here on. */
static void test_fenced_transfer_is_aborted(void **state)
{
    t_env_t *e = *state;
    kvt_key_t keys[T_N];
    char rid[32];
    t_request(e, T_INST, 51, keys, rid, sizeof rid);
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_put(e->c, T_INST, rid, keys, T_N, &tok), 0);
    size_t len = 0;
    uint8_t *b = t_export(e->c, tok, &len);
    zactor_t *next = t_sched(e, T_EPOCH + 1);
    assert_non_null(next);
    tier_actor_stats_t st = {0};
    for (int i = 0; i < 1000 && st.leader_seen != T_EPOCH + 1; i++) {
        assert_int_equal(tier_actor_stats(e->tier, &st), 0);
        if (st.leader_seen != T_EPOCH + 1)
            zclock_sleep(10);
    }
    assert_int_equal(st.leader_seen, T_EPOCH + 1);
    char err[512];
    kvt_options_t o = {.coordinators = e->sched_ep,
                       .name = "worker-frames",
                       .timeout_ms = 5000,
                       .disable_shm = true};
    kvt_client_t *wf = kvt_connect(&o, err, sizeof err);
    assert_non_null(wf);
    kvt_token_t *wt = NULL;
    if (kvt_token_import(wf, b, len, &wt) != 0)
        fail_msg("import at the old leader: %s", kvt_last_error(wf));
    uint8_t *bufs[T_N];
    for (uint32_t i = 0; i < T_N; i++)
        bufs[i] = calloc(1, T_BLOCK);
    uint64_t job = 51;
    assert_int_equal(kvt_submit_put(wf, job, wt, (const void *const *)bufs, T_BLOCK), 0);
    kvt_job_result_t r;
    assert_int_equal(kvt_wait(wf, &job, 1, 10000, &r), 0);
    assert_int_equal(r.status, -KVT_ABORTED);
    assert_int_equal(r.n_failed, T_N);
    assert_non_null(strstr(kvt_last_error(wf), "fenced"));
    assert_int_equal(kvt_token_release(wf, &wt), 0);
    kvt_close(&wf);
    bool no[T_N] = {false};
    (void)kvt_complete_put(e->c, &tok, no); /* the old leader's window: nothing to commit */
    assert_null(tok);
    for (uint32_t i = 0; i < T_N; i++)
        free(bufs[i]);
    free(b);
    zactor_destroy(&next);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_shm_get_frames),
        cmocka_unit_test(test_put_frames_get_shm),
        cmocka_unit_test(test_layerwise_on_imported_tokens),
        cmocka_unit_test(test_layerwise_progress_travels_back),
        cmocka_unit_test(test_refused_release_and_dead_worker),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_fenced_transfer_is_aborted),
    };
    return cmocka_run_group_tests(tests, t_setup, t_teardown);
}
