/* test_kvt_frame_bound.c — libkvtier's frame path bounds the frames it accepts
 * (issue 12): a tier actor that answers a WriteSlots with a frame above the bound
 * (the tier's slot size or BUS_MAX_FRAME0, whichever is larger) costs the client
 * that connection, not the frame's memory. The tier is a fake tier actor
 * (tests/support/sched_fake_tier: a real ROUTER that answers Inventory, and here
 * WriteSlots with a 48 MiB frame) in a child process, so the frame's bytes are
 * never in this process unless libkvtier takes them in; the scheduler is the real
 * one in this process, the client a real libkvtier handle on the frame path.
 * The put job fails with TIMEOUT and a message that names the bound, and this
 * process's peak RSS (VmHWM) did not grow by the frame. */
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus_envelope.h"
#include "bus_host.h"
#include "kvtier.h"
#include "sched_actor.h"
#include "sched_fake_tier.h"

#define T_BLOCK 4096u
#define T_TPB 16u
#define T_INST "llama-fb"
#define T_BIG ((size_t)48 << 20) /* the fake tier's reply frame: 3 x BUS_MAX_FRAME0 */

_Static_assert(T_BIG > 2 * (size_t)BUS_MAX_FRAME0, "the frame is well above the bound");

static char t_tier_ep[128];
static pid_t t_child = -1;
static int t_go = -1; /* the child runs until this pipe's write end closes */

/* The child: a fake tier whose WriteSlots replies carry a T_BIG frame. */
static void t_child_main(int ep_fd, int go_fd)
{
    sched_fake_tier_t *ft = sched_fake_tier_new(1, 64);
    if (ft) {
        sched_fake_tier_set_oversize(ft, T_BIG);
        snprintf(t_tier_ep, sizeof t_tier_ep, "%s", sched_fake_tier_endpoint(ft));
    }
    if (write(ep_fd, t_tier_ep, sizeof t_tier_ep) != (ssize_t)sizeof t_tier_ep)
        _exit(2);
    char b;
    while (read(go_fd, &b, 1) > 0)
        ;
    sched_fake_tier_destroy(&ft);
    _exit(ft ? 0 : 1);
}

/* Peak resident set of this process, in KiB (VmHWM). */
static uint64_t t_hwm_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %" SCNu64, &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

static void test_oversized_reply_frame_is_refused(void **state)
{
    (void)state;
    assert_true(t_tier_ep[0]);
    sched_config_t sc;
    sched_config_defaults(&sc);
    sc.n_tiers = 1;
    sc.tiers[0] = (sched_tier_config_t){.tier_id = 1, .capacity = 64, .slot_size = T_BLOCK};
    snprintf(sc.tiers[0].name, sizeof sc.tiers[0].name, "host0");
    snprintf(sc.tiers[0].kind, sizeof sc.tiers[0].kind, "host");
    sc.n_chains = 1;
    snprintf(sc.chains[0].name, sizeof sc.chains[0].name, "default");
    sc.chains[0].n_tiers = 1;
    sc.chains[0].tier_ids[0] = 1;
    zactor_t *sched = sched_actor_new(&sc);
    assert_non_null(sched);
    char sched_ep[256];
    sched_actor_endpoint(sched, sched_ep, sizeof sched_ep);
    kvtier_TierInfo ti = kvtier_TierInfo_init_zero;
    ti.tier_id = 1;
    snprintf(ti.name, sizeof ti.name, "host0");
    ti.kind = kvtier_TierKind_TIER_KIND_HOST;
    snprintf(ti.endpoint, sizeof ti.endpoint, "%s", t_tier_ep);
    bus_host_identity(NULL, ti.host, sizeof ti.host);
    ti.epoch = 1;
    ti.capacity_slots = 64;
    ti.slot_bytes = T_BLOCK;
    ti.up = true;
    assert_int_equal(sched_actor_tier_change(sched, true, &ti), 0);

    char err[512];
    kvt_options_t o = {.coordinators = sched_ep, .timeout_ms = 1000, .disable_shm = true};
    kvt_client_t *c = kvt_connect(&o, err, sizeof err);
    if (!c)
        fail_msg("connect: %s", err);
    kvt_cluster_info_t ci;
    for (int i = 0; i < 500; i++) {
        if (kvt_cluster_info(c, &ci) == 0 && ci.n_tiers == 1 && ci.tiers[0].up)
            break;
        zclock_sleep(10);
    }
    kvt_instance_t spec = {.instance_id = T_INST,
                           .model = "llama",
                           .dtype = "fp16",
                           .tokens_per_block = T_TPB,
                           .bytes_per_block = T_BLOCK};
    int rc = -1;
    for (int i = 0; i < 500 && rc != 0; i++)
        if ((rc = kvt_register_instance(c, &spec)) != 0)
            zclock_sleep(10);
    assert_int_equal(rc, 0);
    uint32_t tokens[T_TPB];
    for (uint32_t i = 0; i < T_TPB; i++)
        tokens[i] = 4242u + i;
    kvt_key_t key;
    assert_int_equal(kvt_block_keys(tokens, T_TPB, T_TPB, NULL, &key, 1), 1);
    kvt_request_t r = {.instance_id = T_INST, .request_id = "fb"};
    assert_int_equal(kvt_request_begin(c, &r), 0);
    kvt_token_t *tok = NULL;
    if (kvt_prepare_put(c, T_INST, "fb", &key, 1, &tok) != 0)
        fail_msg("prepare_put: %s", kvt_last_error(c));
    static uint8_t block[T_BLOCK];
    const void *bufs[1] = {block};

    uint64_t hwm0 = t_hwm_kib();
    uint64_t job = 1;
    assert_int_equal(kvt_submit_put(c, job, tok, bufs, T_BLOCK), 0);
    kvt_job_result_t res;
    assert_int_equal(kvt_wait(c, &job, 1, 20000, &res), 0);
    uint64_t hwm1 = t_hwm_kib();
    assert_int_equal(res.status, -KVT_TIMEOUT);
    assert_int_equal(res.n_failed, 1);
    const char *msg = kvt_last_error(c);
    if (!strstr(msg, "bytes, this connection's bound for slots of 4096 bytes"))
        fail_msg("the job's error does not name the bound: %s", msg);
    char bound[64];
    snprintf(bound, sizeof bound, "above %u bytes", (unsigned)BUS_MAX_FRAME0);
    if (!strstr(msg, bound))
        fail_msg("the job's error does not say \"%s\": %s", bound, msg);
    /* the frame never landed here: the peak grew by less than it */
    if ((hwm1 - hwm0) * 1024 >= T_BIG)
        fail_msg("peak RSS grew by %" PRIu64 " KiB, the frame is %zu KiB", hwm1 - hwm0,
                 T_BIG >> 10);
    print_message("put job: %s; peak RSS %" PRIu64 " -> %" PRIu64 " KiB\n", msg, hwm0, hwm1);
    kvt_complete_put(c, &tok, NULL);
    kvt_request_end(c, T_INST, "fb", NULL);
    kvt_close(&c);
    zactor_destroy(&sched);
}

int main(void)
{
    /* the child forks before this process has a ZeroMQ context or a thread */
    int ep[2], go[2];
    if (pipe(ep) != 0 || pipe(go) != 0)
        return 1;
    t_child = fork();
    if (t_child < 0)
        return 1;
    if (t_child == 0) {
        close(ep[0]);
        close(go[1]);
        t_child_main(ep[1], go[0]);
    }
    close(ep[1]);
    close(go[0]);
    t_go = go[1];
    if (read(ep[0], t_tier_ep, sizeof t_tier_ep) != (ssize_t)sizeof t_tier_ep)
        t_tier_ep[0] = 0;
    close(ep[0]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oversized_reply_frame_is_refused),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    close(t_go);
    int st = 0;
    waitpid(t_child, &st, 0);
    return failed;
}
