/* test_kvt_routing.c — branches through libkvtier (issue 11 §4; docs/SCHEDULER.md
 * "Branches"): two real host tier actors and a real scheduler routing by TTL
 * (branch "long": host0, TTLs above a minute; "short": host1, the fallback) in
 * this process, over real ZeroMQ and shared memory. Rules: kvt_request_begin_ex
 * says which branch, its name and head; a put through a branch lands on that
 * branch's tier and is read back byte-exact, by a request of the other branch
 * too (lookups and gets search every branch); after a leader change the handle
 * begins its request again and the new leader, with the same topology, routes
 * it to the same branch, so its next put lands on the same tier; a new leader
 * configured otherwise routes it by its own rules (logged by the handle). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus_host.h"
#include "kvtier.h"
#include "sched_actor.h"
#include "tier_actor.h"

#define T_BLOCK 8192u
#define T_CAPACITY 64u
#define T_TPB 16u
#define T_INST "llama-route"
#define T_N 4
#define T_HOUR 3600000u

typedef struct {
    zactor_t *tier[2];
    zactor_t *sched;
    char shm[2][64];
    char tier_ep[2][128];
    char ep_a[128], ep_b[128];
    kvt_client_t *c;
    uint8_t *src[2][T_N], *dst[T_N];
} t_env_t;

static void t_free_endpoint(char *out, size_t len)
{
    /* An abstract ipc name of this process: a tcp port picked free and bound later
     * (the second leader's, after a failover) can be taken meanwhile by another
     * test process, whose scheduler this client would then talk to. */
    static unsigned n;
    snprintf(out, len, "ipc://@kvtc-%s-%d-%u", "route", (int)getpid(), n++);
}

/* The topology both leaders share: long (host0, ttl > 1 min), short (host1, fallback);
 * swapped: the same chains with the bound on short and long the fallback (a leader
 * configured otherwise). */
static zactor_t *t_sched_as(t_env_t *e, const char *ep, uint64_t epoch, bool swapped)
{
    sched_config_t sc;
    sched_config_defaults(&sc);
    snprintf(sc.cluster, sizeof sc.cluster, "route");
    snprintf(sc.endpoint, sizeof sc.endpoint, "%s", ep);
    sc.leader_epoch = epoch;
    sc.n_tiers = 2;
    sc.n_chains = 2;
    static const char *const tiers[] = {"host0", "host1"}, *const chains[] = {"long", "short"};
    for (uint32_t i = 0; i < 2; i++) {
        sc.tiers[i] =
            (sched_tier_config_t){.tier_id = i + 1, .capacity = T_CAPACITY, .slot_size = T_BLOCK};
        snprintf(sc.tiers[i].name, sizeof sc.tiers[i].name, "%s", tiers[i]);
        snprintf(sc.tiers[i].kind, sizeof sc.tiers[i].kind, "host");
        sc.chains[i] = (sched_chain_config_t){.n_tiers = 1, .tier_ids = {i + 1}};
        snprintf(sc.chains[i].name, sizeof sc.chains[i].name, "%s", chains[i]);
    }
    sc.chains[swapped ? 1 : 0].above = 60000;
    sc.route = (sched_route_config_t){.kind = SCHED_ROUTE_TTL, .fallback = swapped ? 0 : 1};
    zactor_t *s = NULL;
    for (int i = 0; i < 100 && !s; i++) { /* the last one's port is released shortly */
        s = sched_actor_new(&sc);
        if (!s)
            zclock_sleep(20);
    }
    assert_non_null(s);
    for (uint32_t i = 0; i < 2; i++) {
        kvtier_TierInfo ti = kvtier_TierInfo_init_zero;
        ti.tier_id = i + 1;
        snprintf(ti.name, sizeof ti.name, "%s", tiers[i]);
        ti.kind = kvtier_TierKind_TIER_KIND_HOST;
        snprintf(ti.endpoint, sizeof ti.endpoint, "%s", e->tier_ep[i]);
        bus_host_id(ti.host, sizeof ti.host);
        snprintf(ti.shm, sizeof ti.shm, "%s", e->shm[i]);
        ti.epoch = tier_actor_epoch(e->tier[i]);
        ti.capacity_slots = T_CAPACITY;
        ti.slot_bytes = T_BLOCK;
        ti.up = true;
        assert_int_equal(sched_actor_tier_change(s, true, &ti), 0);
    }
    return s;
}

static zactor_t *t_sched(t_env_t *e, const char *ep, uint64_t epoch)
{
    return t_sched_as(e, ep, epoch, false);
}

/* Both tiers up at the current leader (their inventories read). */
static void t_wait_tiers(t_env_t *e)
{
    kvt_cluster_info_t ci;
    for (int i = 0; i < 1000; i++) {
        if (kvt_cluster_info(e->c, &ci) == 0 && ci.n_tiers == 2 && ci.tiers[0].up && ci.tiers[1].up)
            return;
        zclock_sleep(10);
    }
    fail_msg("the tiers did not come up");
}

static int setup(void **state)
{
    t_env_t *e = calloc(1, sizeof *e);
    for (uint32_t i = 0; i < 2; i++) {
        snprintf(e->shm[i], sizeof e->shm[i], "/kvtc-route-%d-%u", (int)getpid(), i);
        tier_actor_config_t tc = {.tier_id = i + 1, .endpoint = "tcp://127.0.0.1:*"};
        snprintf(tc.tier.name, sizeof tc.tier.name, "host%u", i);
        snprintf(tc.tier.kind, sizeof tc.tier.kind, "host");
        snprintf(tc.tier.path, sizeof tc.tier.path, "%s", e->shm[i]);
        tc.tier.capacity = T_CAPACITY;
        tc.tier.slot_size = T_BLOCK;
        e->tier[i] = tier_actor_new(&tc);
        if (!e->tier[i])
            return -1;
        tier_actor_endpoint(e->tier[i], e->tier_ep[i], sizeof e->tier_ep[i]);
    }
    t_free_endpoint(e->ep_a, sizeof e->ep_a);
    t_free_endpoint(e->ep_b, sizeof e->ep_b);
    e->sched = t_sched(e, e->ep_a, 1);
    char list[300], err[512];
    snprintf(list, sizeof list, "%s,%s", e->ep_a, e->ep_b);
    kvt_options_t o = {
        .coordinators = list, .timeout_ms = 1000, .failover_ms = 20000, .name = "route"};
    e->c = kvt_connect(&o, err, sizeof err);
    if (!e->c) {
        fprintf(stderr, "connect: %s\n", err);
        return -1;
    }
    kvt_instance_t spec = {.instance_id = T_INST,
                           .model = "llama",
                           .dtype = "fp16",
                           .tokens_per_block = T_TPB,
                           .bytes_per_block = T_BLOCK};
    int rc = -1;
    for (int i = 0; i < 500 && rc != 0; i++)
        if ((rc = kvt_register_instance(e->c, &spec)) != 0)
            zclock_sleep(10);
    if (rc != 0)
        return -1;
    t_wait_tiers(e);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < T_N; i++) {
            e->src[b][i] = malloc(T_BLOCK);
            for (uint32_t k = 0; k < T_BLOCK; k++)
                e->src[b][i][k] = (uint8_t)(rand() & 0xff);
        }
    for (int i = 0; i < T_N; i++)
        e->dst[i] = calloc(1, T_BLOCK);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    t_env_t *e = *state;
    kvt_close(&e->c);
    zactor_destroy(&e->sched);
    for (int i = 0; i < 2; i++)
        zactor_destroy(&e->tier[i]);
    for (int i = 0; i < T_N; i++) {
        free(e->src[0][i]);
        free(e->src[1][i]);
        free(e->dst[i]);
    }
    free(e);
    return 0;
}

static void t_keys(kvt_key_t *keys, uint32_t seed)
{
    uint32_t tokens[T_N * T_TPB];
    for (uint32_t i = 0; i < T_N * T_TPB; i++)
        tokens[i] = seed * 100000u + i;
    assert_int_equal(kvt_block_keys(tokens, T_N * T_TPB, T_TPB, NULL, keys, T_N), T_N);
}

static void t_begin(t_env_t *e, const char *rid, uint64_t ttl_ms, uint32_t branch, const char *name)
{
    kvt_request_t r = {.instance_id = T_INST, .request_id = rid, .ttl_ms = ttl_ms};
    kvt_request_begin_info_t info;
    memset(&info, 0xff, sizeof info);
    assert_int_equal(kvt_request_begin_ex(e->c, &r, &info), 0);
    assert_int_equal(info.branch, branch);
    assert_string_equal(info.branch_name, name);
    assert_int_equal(info.head_tier_id, branch + 1);
}

static void t_put(t_env_t *e, const char *rid, const kvt_key_t *keys, uint8_t *const *src)
{
    kvt_token_t *tok = NULL;
    int rc = kvt_prepare_put(e->c, T_INST, rid, keys, T_N, &tok);
    if (rc != 0)
        fail_msg("prepare_put %s: %s", rid, kvt_last_error(e->c));
    assert_int_equal(kvt_token_count(tok), T_N);
    uint64_t job = 1;
    assert_int_equal(kvt_submit_put(e->c, job, tok, (const void *const *)src, T_BLOCK), 0);
    kvt_job_result_t res;
    assert_int_equal(kvt_wait(e->c, &job, 1, 10000, &res), 0);
    assert_int_equal(res.status, 0);
    assert_int_equal(kvt_complete_put(e->c, &tok, NULL), 0);
}

/* Every key of keys lives on tier_id (a per-key lookup outside a request). */
static void t_on_tier(t_env_t *e, const kvt_key_t *keys, uint32_t tier_id)
{
    bool hit[T_N];
    uint32_t tiers[T_N];
    kvt_lookup_result_t lr = {.hit = hit, .tier_ids = tiers};
    assert_int_equal(kvt_lookup(e->c, T_INST, NULL, KVT_LOOKUP_PER_KEY, 0, keys, T_N, &lr), 0);
    assert_int_equal(lr.hit_count, T_N);
    for (int i = 0; i < T_N; i++)
        assert_int_equal(tiers[i], tier_id);
}

/* Reads keys back in request rid and compares them with src. */
static void t_get_exact(t_env_t *e, const char *rid, const kvt_key_t *keys, uint8_t *const *src)
{
    for (int i = 0; i < T_N; i++)
        memset(e->dst[i], 0, T_BLOCK);
    kvt_token_t *tok = NULL;
    int rc = kvt_prepare_get(e->c, T_INST, rid, keys, T_N, &tok);
    if (rc != 0)
        fail_msg("prepare_get %s: %s", rid, kvt_last_error(e->c));
    uint64_t job = 2;
    assert_int_equal(kvt_submit_get(e->c, job, tok, (void *const *)e->dst, T_BLOCK), 0);
    kvt_job_result_t res;
    assert_int_equal(kvt_wait(e->c, &job, 1, 10000, &res), 0);
    assert_int_equal(res.status, 0);
    assert_int_equal(kvt_complete_get(e->c, &tok, NULL), 0);
    for (int i = 0; i < T_N; i++)
        assert_memory_equal(e->dst[i], src[i], T_BLOCK);
}

/* issue 11 §4: a put via one branch lands on that branch's tier and reads back
 * byte-exact, from a request of either branch. */
static void put_lands_on_its_branch(void **state)
{
    t_env_t *e = *state;
    kvt_key_t long_keys[T_N], short_keys[T_N];
    t_keys(long_keys, 1);
    t_keys(short_keys, 2);
    t_begin(e, "long-lived", T_HOUR, 0, "long");
    t_begin(e, "brief", 1000, 1, "short");
    t_begin(e, "untimed", 0, 1, "short"); /* no TTL: the fallback */
    assert_int_equal(kvt_request_begin(e->c, &(kvt_request_t){.instance_id = T_INST,
                                                              .request_id = "long-lived",
                                                              .ttl_ms = T_HOUR}),
                     0); /* a resend: OK, same branch (NULL info is fine) */
    t_put(e, "long-lived", long_keys, e->src[0]);
    t_put(e, "brief", short_keys, e->src[1]);
    t_on_tier(e, long_keys, 1);
    t_on_tier(e, short_keys, 2);
    t_get_exact(e, "long-lived", long_keys, e->src[0]);
    t_get_exact(e, "brief", short_keys, e->src[1]);
    t_get_exact(e, "untimed", long_keys, e->src[0]); /* another branch's tier */
    for (int i = 0; i < 3; i++)
        assert_int_equal(kvt_request_end(e->c, T_INST,
                                         (const char *[]){"long-lived", "brief", "untimed"}[i],
                                         NULL),
                         0);
}

/* A leader change: the handle begins its open request again at the new leader
 * (same topology), which routes it to the same branch: the next put of the
 * request lands on the same tier, and what it put before reads back. */
static void begun_again_on_the_same_branch(void **state)
{
    t_env_t *e = *state;
    kvt_key_t first[T_N], second[T_N];
    t_keys(first, 3);
    t_keys(second, 4);
    t_begin(e, "r", T_HOUR, 0, "long");
    t_put(e, "r", first, e->src[0]);

    zactor_destroy(&e->sched);
    e->sched = t_sched(e, e->ep_b, 2);
    t_wait_tiers(e);
    t_put(e, "r", second, e->src[1]); /* re-begun by the handle on the way */
    t_on_tier(e, first, 1);
    t_on_tier(e, second, 1);
    t_get_exact(e, "r", first, e->src[0]);
    t_get_exact(e, "r", second, e->src[1]);
    kvt_cluster_info_t ci;
    assert_int_equal(kvt_cluster_info(e->c, &ci), 0);
    assert_int_equal(ci.leader_epoch, 2);
    assert_int_equal(kvt_request_end(e->c, T_INST, "r", NULL), 0);
}

/* A new leader configured with another topology routes the request begun again
 * by its own rules (libkvtier logs the change): the request's next put lands on
 * the new branch, and what it put before is still read back from the old one. */
static void begun_again_elsewhere_follows_the_new_leader(void **state)
{
    t_env_t *e = *state;
    kvt_key_t first[T_N], second[T_N];
    t_keys(first, 5);
    t_keys(second, 6);
    t_begin(e, "r", T_HOUR, 0, "long");
    t_put(e, "r", first, e->src[0]);

    zactor_destroy(&e->sched);
    e->sched = t_sched_as(e, e->ep_b, 2, true);
    t_wait_tiers(e);
    t_put(e, "r", second, e->src[1]); /* re-begun on the way: now on short */
    t_on_tier(e, first, 1);
    t_on_tier(e, second, 2);
    t_get_exact(e, "r", first, e->src[0]);
    t_get_exact(e, "r", second, e->src[1]);
    assert_int_equal(kvt_request_end(e->c, T_INST, "r", NULL), 0);
}

/* Bad input: no request, and the info zeroed on failure. */
static void bad_begin_zeroes_info(void **state)
{
    t_env_t *e = *state;
    kvt_request_begin_info_t info;
    memset(&info, 0xff, sizeof info);
    assert_int_equal(kvt_request_begin_ex(e->c, NULL, &info), -KVT_INVALID_ARGUMENT);
    assert_int_equal(info.branch, 0);
    assert_string_equal(info.branch_name, "");
    kvt_request_t r = {.instance_id = T_INST, .request_id = ""};
    assert_int_equal(kvt_request_begin_ex(e->c, &r, &info), -KVT_INVALID_ARGUMENT);
    assert_non_null(strstr(kvt_last_error(e->c), "request_id"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(put_lands_on_its_branch, setup, teardown),
        cmocka_unit_test_setup_teardown(begun_again_on_the_same_branch, setup, teardown),
        cmocka_unit_test_setup_teardown(begun_again_elsewhere_follows_the_new_leader, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(bad_begin_zeroes_info, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
