/* test_kvt_integrity.c — integrity end to end (issue 12 §4) with libkvtier, the
 * real scheduler and a real host tier actor in this process: a bit flipped in 1 in
 * 10,000 blocks the tier actor serves (fault point host.read, bus_fault.h) over
 * 20,480 block reads through frames is always detected and never delivered:
 * - verify_reads off (the default): the client checks each block that arrived
 *   against the checksum the tier sent with it (ReadSlotsReply.checksums) and
 *   fails that key; failed keys == flips injected;
 * - verify_reads on (the host tier's option): the tier actor checks the bytes
 *   before it sends and refuses the request (nothing sent); failed requests ==
 *   flips injected; and a same-host client copying out of the segment checks
 *   each block (the segment's flag), failed keys == flips injected.
 * Every key delivered is byte-exact; a key not delivered has an untouched
 * (zeroed) buffer. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus_fault.h"
#include "bus_host.h"
#include "client_testkit.h"
#include "kvtier.h"
#include "sched_actor.h"
#include "tier_actor.h"
#include "tier_seg.h"

#define T_BLOCK 4096u /* small blocks: 20,480 reads stay quick */
#define T_SLOT 4096u
#define T_CAPACITY 64u
#define T_TPB 16u
#define T_INST "llama-test"
#define T_MAXK 32
#define T_GETS 640u /* x T_MAXK keys = 20,480 block reads */
#define T_WRITE_GRACE_MS 3000

typedef struct {
    ck_service_t svc;
    kvt_client_t *c;  /* shared memory allowed */
    kvt_client_t *cf; /* frames only */
    uint8_t *src[T_MAXK], *dst[T_MAXK];
    uint32_t seq;
} t_env_t;

static kvt_client_t *t_client(t_env_t *e, bool disable_shm)
{
    char err[512];
    kvt_options_t o = {
        .coordinators = e->svc.sched_ep, .timeout_ms = 5000, .disable_shm = disable_shm};
    kvt_client_t *c = kvt_connect(&o, err, sizeof err);
    if (!c)
        fprintf(stderr, "connect: %s\n", err);
    return c;
}

static int s_setup_env(void **state, bool verify_reads)
{
    t_env_t *e = calloc(1, sizeof *e);
    /* verify_reads: the host tier's option, as a deployment file gives it */
    if (ck_tier_start_with(&e->svc, "integ", T_CAPACITY, T_SLOT,
                           verify_reads ? "verify_reads" : NULL, "true") < 0)
        return -1;
    sched_config_t sc;
    ck_sched_config(&sc, "e2e", T_CAPACITY, T_SLOT);
    sc.write_grace_ms = T_WRITE_GRACE_MS; /* short, for the stale-token rule below */
    e->svc.sched = sched_actor_new(&sc);
    if (!e->svc.sched)
        return -1;
    sched_actor_endpoint(e->svc.sched, e->svc.sched_ep, sizeof e->svc.sched_ep);
    if (ck_announce(e->svc.sched, &e->svc) < 0)
        return -1;

    e->c = t_client(e, false);
    e->cf = t_client(e, true);
    if (!e->c || !e->cf)
        return -1;
    /* the scheduler reads the tier's inventory before it accepts writes: wait for it */
    kvt_cluster_info_t ci;
    for (int i = 0; i < 500; i++) {
        if (kvt_cluster_info(e->c, &ci) == 0 && ci.n_tiers == 1 && ci.tiers[0].up)
            break;
        zclock_sleep(10);
    }
    kvt_instance_t spec = {.instance_id = T_INST,
                           .model = "llama",
                           .dtype = "fp16",
                           .tokens_per_block = T_TPB,
                           .bytes_per_block = T_BLOCK};
    if (kvt_register_instance(e->c, &spec) != 0) {
        fprintf(stderr, "register: %s\n", kvt_last_error(e->c));
        return -1;
    }
    for (int i = 0; i < T_MAXK; i++) {
        e->src[i] = malloc(T_BLOCK);
        e->dst[i] = malloc(T_BLOCK);
    }
    *state = e;
    return 0;
}

static int s_teardown(void **state)
{
    t_env_t *e = *state;
    kvt_close(&e->c);
    kvt_close(&e->cf);
    ck_stop(&e->svc);
    for (int i = 0; i < T_MAXK; i++) {
        free(e->src[i]);
        free(e->dst[i]);
    }
    free(e);
    return 0;
}

static int s_setup_plain(void **state)
{
    return s_setup_env(state, false);
}

static int s_setup_verify(void **state)
{
    return s_setup_env(state, true);
}

/* Stores T_MAXK random blocks through frames; their keys in keys. */
static void s_store(t_env_t *e, kvt_key_t *keys)
{
    uint32_t tokens[T_MAXK * T_TPB];
    for (uint32_t i = 0; i < T_MAXK * T_TPB; i++)
        tokens[i] = 7000000u + i;
    assert_int_equal(kvt_block_keys(tokens, T_MAXK * T_TPB, T_TPB, NULL, keys, T_MAXK), T_MAXK);
    for (uint32_t i = 0; i < T_MAXK; i++)
        for (uint32_t b = 0; b < T_BLOCK; b++)
            e->src[i][b] = (uint8_t)(rand() | 1); /* never all zero */
    kvt_request_t r = {.instance_id = T_INST, .request_id = "store"};
    assert_int_equal(kvt_request_begin(e->cf, &r), 0);
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_put(e->cf, T_INST, "store", keys, T_MAXK, &tok), 0);
    assert_int_equal(kvt_token_count(tok), T_MAXK);
    const kvt_key_t *tk = kvt_token_keys(tok);
    const void *bufs[T_MAXK];
    for (uint32_t i = 0; i < T_MAXK; i++)
        for (uint32_t k = 0; k < T_MAXK; k++)
            if (memcmp(&tk[i], &keys[k], sizeof keys[k]) == 0)
                bufs[i] = e->src[k];
    memcpy(keys, tk, T_MAXK * sizeof *keys); /* token order from here on */
    uint8_t *ordered[T_MAXK];
    for (uint32_t i = 0; i < T_MAXK; i++)
        ordered[i] = (uint8_t *)bufs[i];
    memcpy(e->src, ordered, sizeof ordered);
    assert_int_equal(kvt_submit_put(e->cf, 1, tok, bufs, T_BLOCK), 0);
    kvt_job_result_t res;
    uint64_t job = 1;
    assert_int_equal(kvt_wait(e->cf, &job, 1, 10000, &res), 0);
    assert_int_equal(res.n_failed, 0);
    assert_int_equal(kvt_complete_put(e->cf, &tok, NULL), 0);
    kvt_request_end_info_t info;
    assert_int_equal(kvt_request_end(e->cf, T_INST, "store", &info), 0);
}

typedef struct {
    uint64_t failed_jobs, failed_keys, zeroed, exact, wrong;
} s_tally_t;

/* T_GETS gets of every key through frames (or shared memory), under the armed fault. */
static void s_read_with(t_env_t *e, kvt_client_t *c, const kvt_key_t *keys, s_tally_t *t)
{
    kvt_request_t r = {.instance_id = T_INST, .request_id = "reads"};
    assert_int_equal(kvt_request_begin(c, &r), 0);
    for (uint32_t g = 0; g < T_GETS; g++) {
        kvt_token_t *tok = NULL;
        assert_int_equal(kvt_prepare_get(c, T_INST, "reads", keys, T_MAXK, &tok), 0);
        assert_int_equal(kvt_token_count(tok), T_MAXK);
        for (uint32_t i = 0; i < T_MAXK; i++)
            memset(e->dst[i], 0, T_BLOCK);
        uint64_t job = 100 + g;
        assert_int_equal(kvt_submit_get(c, job, tok, (void *const *)e->dst, T_BLOCK), 0);
        kvt_job_result_t res;
        assert_int_equal(kvt_wait(c, &job, 1, 10000, &res), 0);
        (void)kvt_complete_get(c, &tok, NULL);
        t->failed_jobs += res.n_failed > 0;
        t->failed_keys += res.n_failed;
        static const uint8_t zero[T_BLOCK];
        for (uint32_t i = 0; i < T_MAXK; i++) {
            if (memcmp(e->dst[i], e->src[i], T_BLOCK) == 0)
                t->exact++;
            else if (memcmp(e->dst[i], zero, T_BLOCK) == 0)
                t->zeroed++;
            else
                t->wrong++;
        }
    }
    kvt_request_end_info_t info;
    assert_int_equal(kvt_request_end(c, T_INST, "reads", &info), 0);
}

static void s_read_all(t_env_t *e, const kvt_key_t *keys, s_tally_t *t)
{
    s_read_with(e, e->cf, keys, t);
}

static void s_arm_flips(void)
{
    bus_fault_enable();
    bus_fault_reset();
    bus_fault_rule_t rule;
    char err[256];
    assert_int_equal(bus_fault_rule_parse("flip", "1/10000", &rule, err, sizeof err), 0);
    assert_int_equal(bus_fault_set(BUS_FAULT_HOST_READ, &rule, err, sizeof err), 0);
}

static uint64_t s_injected(void)
{
    bus_fault_state_t st;
    bus_fault_show(BUS_FAULT_HOST_READ, &st);
    bus_fault_clear(BUS_FAULT_N_POINTS);
    return st.injected;
}

static void flips_in_transit_are_caught_by_the_client(void **state)
{
    t_env_t *e = *state;
    kvt_key_t keys[T_MAXK];
    s_store(e, keys);
    s_arm_flips();
    s_tally_t t = {0};
    s_read_all(e, keys, &t);
    uint64_t injected = s_injected();
    print_message("      %u block reads: %" PRIu64 " flips injected, %" PRIu64
                  " keys failed, %" PRIu64 " exact, %" PRIu64 " wrong\n",
                  T_GETS * T_MAXK, injected, t.failed_keys, t.exact, t.wrong);
    assert_true(injected > 0);
    assert_int_equal(t.wrong, 0);
    assert_int_equal(t.failed_keys, injected);
    assert_int_equal(t.zeroed, injected);
    assert_int_equal(t.exact, T_GETS * T_MAXK - injected);
}

static void flips_are_refused_by_a_tier_that_verifies_reads(void **state)
{
    t_env_t *e = *state;
    kvt_key_t keys[T_MAXK];
    s_store(e, keys);
    s_arm_flips();
    s_tally_t t = {0};
    s_read_all(e, keys, &t);
    uint64_t injected = s_injected();
    tier_actor_stats_t st;
    assert_int_equal(tier_actor_stats(e->svc.tier, &st), 0);
    print_message("      %u block reads: %" PRIu64 " flips injected, %" PRIu64
                  " requests refused by the tier (%" PRIu64 " checksum failures), %" PRIu64
                  " wrong\n",
                  T_GETS * T_MAXK, injected, t.failed_jobs, st.checksum_failures, t.wrong);
    assert_true(injected > 0);
    assert_int_equal(t.wrong, 0);
    assert_int_equal(t.failed_jobs, injected);
    assert_int_equal(st.checksum_failures, injected);
}

static void flips_in_shared_memory_are_caught_when_the_tier_asks(void **state)
{
    t_env_t *e = *state;
    kvt_key_t keys[T_MAXK];
    s_store(e, keys);
    s_arm_flips();
    s_tally_t t = {0};
    s_read_with(e, e->c, keys, &t); /* same host: copies out of the segment */
    uint64_t injected = s_injected();
    print_message("      %u shared-memory block reads: %" PRIu64 " flips injected, %" PRIu64
                  " keys failed, %" PRIu64 " wrong\n",
                  T_GETS * T_MAXK, injected, t.failed_keys, t.wrong);
    assert_true(injected > 0);
    assert_int_equal(t.wrong, 0);
    assert_int_equal(t.failed_keys, injected);
    assert_int_equal(t.zeroed, injected);
}

/* issue 12 §4, "a slot that a tier drops leaves the index at once", for the host
 * tier's verify_reads: blocks damaged in the segment itself are refused on read,
 * dropped by the tier actor (the whole request checked, each one dropped) and told
 * to the scheduler, so the next lookup misses them; a copy that failed while the
 * block is whole (the flips above) drops nothing. */
static void damaged_blocks_in_memory_leave_the_index_when_the_tier_verifies(void **state)
{
    t_env_t *e = *state;
    kvt_key_t keys[T_MAXK];
    s_store(e, keys);
    char shm[64], err[256];
    snprintf(shm, sizeof shm, "/kvtc-integ-%d", (int)getpid());
    tier_seg_t *seg = NULL;
    assert_int_equal(tier_seg_attach(shm, T_SLOT, T_CAPACITY, &seg, err, sizeof err), 0);
    uint32_t damaged = 0;
    for (uint64_t slot = 0; slot < T_CAPACITY; slot++) {
        if (!tier_seg_serving(seg, slot))
            continue;
        ((volatile uint8_t *)tier_seg_slot(seg, slot))[17] ^= 0x40; /* the bytes, not the header */
        damaged++;
    }
    tier_seg_detach(&seg);
    assert_int_equal(damaged, T_MAXK);

    kvt_request_t r = {.instance_id = T_INST, .request_id = "damaged"};
    assert_int_equal(kvt_request_begin(e->cf, &r), 0);
    kvt_token_t *tok = NULL;
    assert_int_equal(kvt_prepare_get(e->cf, T_INST, "damaged", keys, T_MAXK, &tok), 0);
    uint64_t job = 7;
    assert_int_equal(kvt_submit_get(e->cf, job, tok, (void *const *)e->dst, T_BLOCK), 0);
    kvt_job_result_t res;
    assert_int_equal(kvt_wait(e->cf, &job, 1, 10000, &res), 0);
    assert_int_equal(res.n_failed, T_MAXK); /* nothing was sent */
    (void)kvt_complete_get(e->cf, &tok, NULL);
    kvt_request_end_info_t info;
    assert_int_equal(kvt_request_end(e->cf, T_INST, "damaged", &info), 0);

    tier_actor_stats_t st;
    assert_int_equal(tier_actor_stats(e->svc.tier, &st), 0);
    assert_int_equal(st.checksum_failures, T_MAXK);
    assert_int_equal(st.drops_noticed, T_MAXK);
    /* the scheduler takes them out on the notice, not at a gc round (none runs here) */
    bool hit[T_MAXK];
    kvt_lookup_result_t lr = {.hit = hit};
    for (int i = 0; i < 200; i++) {
        assert_int_equal(kvt_lookup(e->c, T_INST, NULL, KVT_LOOKUP_PER_KEY, 0, keys, T_MAXK, &lr),
                         0);
        if (lr.hit_count == 0)
            break;
        zclock_sleep(10);
    }
    assert_int_equal(lr.hit_count, 0);
    /* stored again, they read back whole */
    s_tally_t t = {0};
    s_store(e, keys);
    s_read_with(e, e->cf, keys, &t);
    assert_int_equal(t.wrong, 0);
    assert_int_equal(t.failed_keys, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(flips_in_transit_are_caught_by_the_client, s_setup_plain,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(flips_are_refused_by_a_tier_that_verifies_reads,
                                        s_setup_verify, s_teardown),
        cmocka_unit_test_setup_teardown(flips_in_shared_memory_are_caught_when_the_tier_asks,
                                        s_setup_verify, s_teardown),
        cmocka_unit_test_setup_teardown(
            damaged_blocks_in_memory_leave_the_index_when_the_tier_verifies, s_setup_verify,
            s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
