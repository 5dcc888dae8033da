/* test_coord_process.c — `kvtier coordinator` and `kvtier tier` as real processes
 * against a real etcd (issue 3 §1, §2; wave-2 etcd layout; DESIGN.md §6
 * Failover). Each process is a fork of this test that runs coord_main /
 * coord_tier_main, exactly what bin/kvtier runs; it is stopped with SIGTERM (or
 * killed) like the supervisor does. The test process itself never starts ZeroMQ
 * (a forked child must not inherit a live context): it checks etcd with the etcd
 * client, and talks to the service from forked checker children.
 * Waits poll with generous upper bounds; nothing asserts on timing. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <czmq.h>

#include "bus_token_mac.h"
#include "bus_client.h"
#include "coord_config.h"
#include "coord_elector.h"
#include "coord_etcd.h"
#include "coord_main.h"
#include "coord_membership.h"
#include "etcd_fixture.h"

#define WAIT_MS 30000 /* upper bound of every wait; never a timing assertion */

static etcd_fixture_t *g_etcd;
static coord_etcd_t *g_kv;
static char g_dir[256];
static char g_conf[320];
static char g_secret[320]; /* the cluster secret both processes load (docs/SECURITY.md) */
static char g_cluster[32];
static char g_shm[64];

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void s_nap(void)
{
    struct timespec ts = {0, 10 * 1000000L}; /* polling etcd, not synchronising */
    nanosleep(&ts, NULL);
}

static int s_group_setup(void **state)
{
    (void)state;
    g_etcd = etcd_fixture_start(NULL);
    if (!g_etcd)
        return -1;
    const char *eps[] = {etcd_fixture_url(g_etcd)};
    coord_etcd_config_t cfg = {.endpoints = eps, .n_endpoints = 1, .timeout_ms = 10000};
    g_kv = coord_etcd_new(&cfg);
    snprintf(g_dir, sizeof g_dir, "/tmp/kvt-coord-proc-XXXXXX");
    if (!g_kv || !mkdtemp(g_dir))
        return -1;
    snprintf(g_cluster, sizeof g_cluster, "pr%ld", (long)getpid());
    snprintf(g_shm, sizeof g_shm, "/kvt-test-%ld-h0", (long)getpid());
    snprintf(g_conf, sizeof g_conf, "%s/deploy.json", g_dir);
    snprintf(g_secret, sizeof g_secret, "%s/secret", g_dir);
    char err[512];
    if (bus_secret_create(g_secret, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    FILE *f = fopen(g_conf, "w");
    if (!f)
        return -1;
    fprintf(f,
            "{\"cluster\":\"%s\",\n"
            " \"security\":{\"secret_file\":\"secret\"},\n" /* beside the file */
            " \"etcd\":{\"endpoints\":[\"%s\"],\"lease_ttl\":\"2s\"},\n"
            " \"coordinator\":{\"endpoint\":\"tcp://127.0.0.1:*\"},\n"
            " \"events\":{\"endpoint\":\"tcp://127.0.0.1:*\",\"replay_endpoint\":\"tcp://"
            "127.0.0.1:*\",\n"
            "            \"vllm_endpoint\":\"tcp://127.0.0.1:*\",\"vllm_replay_endpoint\":\"tcp://"
            "127.0.0.1:*\"},\n" /* never the default ports: two runs at once never meet */
            " \"tiers\":[{\"name\":\"h0\",\"kind\":\"host\",\"endpoint\":\"tcp://127.0.0.1:*\",\n"
            "            \"capacity\":16,\"slot_size\":4096,\"shm\":\"%s\",\"prefault\":false}]}\n",
            g_cluster, etcd_fixture_url(g_etcd), g_shm);
    fclose(f);
    return 0;
}

static int s_group_teardown(void **state)
{
    (void)state;
    char cmd[300];
    shm_unlink(g_shm); /* left by the killed tier process, if any */
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (getenv("KVT_KEEP_TEST_DIR")) /* keep the process logs for a person to read */
        fprintf(stderr, "process logs kept in %s\n", g_dir);
    else if (g_dir[0] && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    coord_etcd_destroy(&g_kv);
    etcd_fixture_destroy(&g_etcd);
    return 0;
}

/* ---- processes ---------------------------------------------------------------- */

typedef int (*s_main_fn)(int argc, char **argv);

/* Children not reaped yet: a failing test must not leave processes behind. */
#define S_MAX_CHILDREN 16
static pid_t g_children[S_MAX_CHILDREN];

static void s_track(pid_t pid, bool add)
{
    for (int i = 0; i < S_MAX_CHILDREN; i++)
        if (g_children[i] == (add ? 0 : pid)) {
            g_children[i] = add ? pid : 0;
            return;
        }
}

/* Per-test teardown: SIGKILL and reap whatever a failed test left running. */
static int s_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < S_MAX_CHILDREN; i++)
        if (g_children[i] > 0) {
            kill(g_children[i], SIGKILL);
            waitpid(g_children[i], NULL, 0);
            g_children[i] = 0;
        }
    return 0;
}

/* Forks a child that runs MAIN(argv) with output in <dir>/<log>, and exits with
 * its return value. */
static pid_t s_spawn(s_main_fn main_fn, const char *log, char **argv)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char path[400];
        snprintf(path, sizeof path, "%s/%s", g_dir, log);
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        int argc = 0;
        while (argv[argc])
            argc++;
        exit(main_fn(argc, argv));
    }
    s_track(pid, true);
    return pid;
}

static pid_t s_tier(void)
{
    char *argv[] = {"tier", "-c", g_conf, "--name", "h0", NULL};
    return s_spawn(coord_tier_main, "tier.log", argv);
}

/* A loopback port that is free now, below the kernel's ephemeral range and
 * czmq's "*" range (49152..): a coordinator's scheduler and standby take turns
 * on its meta port, which another process binding "*" could otherwise grab in
 * between (coord_main.h). */
static uint16_t s_fixed_port(void)
{
    static unsigned seed;
    if (!seed)
        seed = (unsigned)getpid();
    for (int i = 0; i < 1000; i++) {
        uint16_t port = (uint16_t)(20000 + rand_r(&seed) % 12000);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
        if (fd >= 0)
            close(fd);
        if (ok)
            return port;
    }
    fail_msg("no free port");
    return 0;
}

static pid_t s_coord_run(s_main_fn main_fn, const char *name)
{
    char log[64], ep[64];
    snprintf(log, sizeof log, "coord-%s.log", name);
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%u", (unsigned)s_fixed_port());
    char *argv[] = {"coordinator", "-c", g_conf, "--name", (char *)name, "--endpoint", ep, NULL};
    return s_spawn(main_fn, log, argv);
}

static pid_t s_coord(const char *name)
{
    return s_coord_run(coord_main, name);
}

/* This test is linked with -Wl,--wrap=curl_easy_init (tests/CMakeLists.txt): in a
 * forked coordinator the g_curl_fail_from-th handle and every later one are not
 * made, so the actor that makes them (each etcd handle takes one) fails its
 * start. 0: never (the test process itself). */
static int g_curl_fail_from;
static atomic_int g_curl_calls;
CURL *__real_curl_easy_init(void);
CURL *__wrap_curl_easy_init(void);
CURL *__wrap_curl_easy_init(void)
{
    int n = atomic_fetch_add(&g_curl_calls, 1) + 1;
    if (g_curl_fail_from > 0 && n >= g_curl_fail_from)
        return NULL;
    return __real_curl_easy_init();
}

/* The first etcd handle of coord_main is the membership actor's (started first),
 * the second the elector's. */
static int s_main_no_membership(int argc, char **argv)
{
    atomic_store(&g_curl_calls, 0);
    g_curl_fail_from = 1;
    return coord_main(argc, argv);
}

static int s_main_no_elector(int argc, char **argv)
{
    atomic_store(&g_curl_calls, 0);
    g_curl_fail_from = 2;
    return coord_main(argc, argv);
}

/* The log of the child started by s_coord_run(.., NAME) into buf. */
static void s_read_log(const char *name, char *buf, size_t len)
{
    char path[400];
    snprintf(path, sizeof path, "%s/coord-%s.log", g_dir, name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Waits for PID to exit; returns its exit status (or 128 + signal). */
static int s_reap(pid_t pid)
{
    int64_t deadline = s_now_ms() + WAIT_MS;
    int st = 0;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (s_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            s_track(pid, false);
            fail_msg("process %ld did not exit", (long)pid);
        }
        s_nap();
    }
    s_track(pid, false);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int s_stop(pid_t pid)
{
    kill(pid, SIGTERM);
    return s_reap(pid);
}

/* ---- etcd checks ---------------------------------------------------------------- */

typedef struct {
    bool present;
    char value[COORD_TIER_VALUE_MAX];
    size_t len;
    coord_etcd_meta_t meta;
} s_key_t;

static s_key_t s_get(const char *suffix)
{
    s_key_t k = {0};
    char key[160];
    coord_cluster_key(key, sizeof key, g_cluster, suffix);
    int rc = coord_etcd_get(g_kv, key, k.value, sizeof k.value - 1, &k.len, &k.meta);
    k.present = rc == 0;
    if (k.present)
        k.value[k.len] = '\0';
    return k;
}

/* Polls until SUFFIX is present (want true) or absent (want false). */
static s_key_t s_wait_key(const char *suffix, bool want)
{
    int64_t deadline = s_now_ms() + WAIT_MS;
    for (;;) {
        s_key_t k = s_get(suffix);
        if (k.present == want)
            return k;
        if (s_now_ms() > deadline)
            fail_msg("key %s still %s", suffix, want ? "absent" : "present");
        s_nap();
    }
}

/* Polls until the leader key names NAME; returns its epoch and endpoint. */
static uint64_t s_wait_leader(const char *name, char *ep, size_t eplen)
{
    int64_t deadline = s_now_ms() + WAIT_MS;
    for (;;) {
        s_key_t k = s_get("leader");
        char n[64];
        uint64_t epoch = 0;
        if (k.present &&
            coord_leader_value_decode(k.value, k.len, n, sizeof n, ep, eplen, &epoch) == 0 &&
            strcmp(n, name) == 0 && epoch == (uint64_t)k.meta.create_revision)
            return epoch;
        if (s_now_ms() > deadline)
            fail_msg("%s never became leader", name);
        s_nap();
    }
}

/* ---- a checker child: asks ENDPOINT for ClusterInfo until TIER is listed up --- */

static int s_check_cluster_info(const char *endpoint, const char *tier, uint64_t epoch)
{
    bus_client_t *cli = bus_client_new(endpoint, NULL);
    kvtier_Envelope *req = calloc(1, sizeof *req), *rep = calloc(1, sizeof *rep);
    int rc = 1;
    int64_t deadline = s_now_ms() + WAIT_MS;
    while (cli && rc != 0 && s_now_ms() < deadline) {
        kvtier_Status st;
        bus_env_init(req, kvtier_Envelope_cluster_info_req_tag, "test");
        if (bus_client_call(cli, req, NULL, NULL, 0, 5000, rep, NULL, NULL, &st) == 0) {
            const kvtier_ClusterInfoReply *ci = &rep->body.cluster_info_rep;
            for (pb_size_t i = 0; i < ci->tiers_count; i++)
                if (strcmp(ci->tiers[i].name, tier) == 0 && ci->tiers[i].up &&
                    ci->tiers[i].epoch == epoch && ci->leader_epoch > 0)
                    rc = 0;
        }
        if (rc != 0)
            zclock_sleep(20);
    }
    free(req);
    free(rep);
    bus_client_destroy(&cli);
    zsys_shutdown();
    return rc;
}

static int s_checker(const char *endpoint, const char *tier, uint64_t epoch)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        exit(s_check_cluster_info(endpoint, tier, epoch));
    s_track(pid, true);
    return s_reap(pid);
}

/* ---- tests ------------------------------------------------------------------------ */

/* Issue 3 §2: the tier process registers tiers/<name> under a lease with the
 * wave-2 record; SIGTERM revokes it (the key goes at once) and exits 0. */
static void test_tier_process_registers_and_deregisters_on_sigterm(void **state)
{
    (void)state;
    pid_t t = s_tier();
    s_key_t k = s_wait_key("tiers/h0", true);
    kvtier_TierInfo info;
    char why[160];
    assert_int_equal(coord_tier_value_decode(k.value, k.len, &info, why, sizeof why), 0);
    assert_string_equal(info.name, "h0");
    assert_int_equal(info.tier_id, 1);
    assert_int_equal(info.kind, kvtier_TierKind_TIER_KIND_HOST);
    assert_non_null(strstr(info.endpoint, "tcp://127.0.0.1:"));
    assert_null(strchr(info.endpoint, '*')); /* the bound port, not the wildcard */
    assert_string_equal(info.shm, g_shm);
    assert_true(info.host[0] != '\0');
    assert_true(info.epoch != 0);
    assert_int_equal(info.capacity_slots, 16);
    assert_int_equal(info.slot_bytes, 4096);
    assert_true(k.meta.lease != 0);
    assert_int_equal(s_stop(t), 0);
    assert_false(s_get("tiers/h0").present);
}

/* coord_main.h: a tier whose lease is lost registers again under a new lease,
 * with the same record (its memory is intact, so the same epoch). */
static void test_tier_process_reregisters_when_its_lease_is_lost(void **state)
{
    (void)state;
    pid_t t = s_tier();
    s_key_t k1 = s_wait_key("tiers/h0", true);
    assert_int_equal(coord_etcd_lease_revoke(g_kv, k1.meta.lease), 0);
    s_key_t k2 = s_wait_key("tiers/h0", true);
    int64_t deadline = s_now_ms() + WAIT_MS;
    while (k2.present && k2.meta.lease == k1.meta.lease && s_now_ms() < deadline) {
        s_nap();
        k2 = s_get("tiers/h0");
    }
    assert_true(k2.present);
    assert_true(k2.meta.lease != k1.meta.lease);
    assert_true(k2.len == k1.len && memcmp(k2.value, k1.value, k1.len) == 0);
    assert_int_equal(s_stop(t), 0);
    assert_false(s_get("tiers/h0").present);
}

/* DESIGN §3: a tier process that dies without a word disappears when its lease
 * lapses. */
static void test_killed_tier_disappears_by_its_lease(void **state)
{
    (void)state;
    pid_t t = s_tier();
    s_wait_key("tiers/h0", true);
    kill(t, SIGKILL);
    assert_int_equal(s_reap(t), 128 + SIGKILL);
    s_wait_key("tiers/h0", false);
}

/* Issue 3 §1, wave-2: the coordinator registers coordinators/<name>, wins the
 * leader key, and its scheduler lists the tier it learned from etcd in
 * ClusterInfo; SIGTERM leaves no key behind and exits 0. */
static void test_coordinator_process_leads_and_cleans_up_on_sigterm(void **state)
{
    (void)state;
    pid_t c = s_coord("c1");
    pid_t t = s_tier();
    char ep[256];
    uint64_t epoch = s_wait_leader("c1", ep, sizeof ep);
    assert_true(epoch > 0);
    s_key_t reg = s_wait_key("coordinators/c1", true);
    assert_string_equal(reg.value, ep);
    assert_null(strchr(ep, '*'));
    s_key_t tk = s_wait_key("tiers/h0", true);
    kvtier_TierInfo info;
    assert_int_equal(coord_tier_value_decode(tk.value, tk.len, &info, NULL, 0), 0);
    assert_int_equal(s_checker(ep, "h0", info.epoch), 0);
    assert_int_equal(s_stop(t), 0);
    assert_int_equal(s_stop(c), 0);
    assert_false(s_get("leader").present);
    assert_false(s_get("coordinators/c1").present);
}

/* DESIGN §6 Failover: two coordinators, one leader; SIGTERM the leader and the
 * other takes over with a higher epoch; the survivor, a standby until then,
 * answers ClusterInfo as leader afterwards. */
static void test_second_coordinator_takes_over_when_leader_stops(void **state)
{
    (void)state;
    pid_t a = s_coord("a");
    char ep_a[256], ep_b[256];
    uint64_t ea = s_wait_leader("a", ep_a, sizeof ep_a);
    pid_t b = s_coord("b");
    s_wait_key("coordinators/b", true);
    pid_t t = s_tier();
    s_key_t tk = s_wait_key("tiers/h0", true);
    kvtier_TierInfo info;
    assert_int_equal(coord_tier_value_decode(tk.value, tk.len, &info, NULL, 0), 0);
    assert_int_equal(s_stop(a), 0);
    uint64_t eb = s_wait_leader("b", ep_b, sizeof ep_b);
    assert_true(eb > ea);
    assert_string_not_equal(ep_a, ep_b);
    assert_int_equal(s_checker(ep_b, "h0", info.epoch), 0);
    assert_int_equal(s_stop(t), 0);
    assert_int_equal(s_stop(b), 0);
    assert_false(s_get("leader").present);
}

/* coord_main.h exit codes: bad usage and a bad deployment file are 2, with the
 * key path on stderr. */
static void test_bad_usage_and_bad_file_exit_2(void **state)
{
    (void)state;
    char bad[400];
    snprintf(bad, sizeof bad, "%s/bad.json", g_dir);
    FILE *f = fopen(bad, "w");
    assert_non_null(f);
    fprintf(f, "{\"cluster\":\"c\",\"tiers\":[{\"name\":\"x\",\"kind\":\"tape\",\"endpoint\":\"tcp:"
               "//h:1\","
               "\"capacity\":1}]}");
    fclose(f);
    char *a1[] = {"coordinator", NULL};
    assert_int_equal(s_reap(s_spawn(coord_main, "usage.log", a1)), 2);
    char *a2[] = {"coordinator", "-c", bad, NULL};
    assert_int_equal(s_reap(s_spawn(coord_main, "usage.log", a2)), 2);
    char *a3[] = {"tier", "-c", g_conf, "--name", "nosuch", NULL};
    assert_int_equal(s_reap(s_spawn(coord_tier_main, "usage.log", a3)), 2);
    char *a4[] = {"coordinator", "--bogus", NULL};
    assert_int_equal(s_reap(s_spawn(coord_main, "usage.log", a4)), 2);
    char *a5[] = {"coordinator", "--help", NULL};
    assert_int_equal(s_reap(s_spawn(coord_main, "usage.log", a5)), 0);
    /* issue 12 §1: neither process starts without the cluster secret */
    char nosec[400];
    snprintf(nosec, sizeof nosec, "%s/nosecret.json", g_dir);
    f = fopen(nosec, "w");
    assert_non_null(f);
    fprintf(f,
            "{\"cluster\":\"%s-nosecret\",\"etcd\":{\"endpoints\":[\"%s\"]},\n"
            " \"tiers\":[{\"name\":\"host0\",\"kind\":\"host\",\"endpoint\":\"tcp://"
            "127.0.0.1:*\",\"capacity\":4}]}",
            g_cluster, etcd_fixture_url(g_etcd));
    fclose(f);
    char *a6[] = {"tier", "-c", nosec, "--name", "host0", NULL};
    assert_int_equal(s_reap(s_spawn(coord_tier_main, "usage.log", a6)), 2);
    char *a7[] = {"coordinator", "-c", nosec, NULL};
    assert_int_equal(s_reap(s_spawn(coord_main, "usage.log", a7)), 2);
    char log[400], text[8192] = "";
    snprintf(log, sizeof log, "%s/usage.log", g_dir);
    f = fopen(log, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    assert_non_null(strstr(text, "tiers[0].kind"));
    assert_non_null(strstr(text, "no tier named \"nosuch\""));
    assert_non_null(strstr(text, "kvtier tier: no cluster secret: set security.secret_file"));
    assert_non_null(strstr(text, "kvtier coordinator: no cluster secret"));
}

/* Issue "actor start": a coordinator whose membership or elector actor fails its
 * start reports it on stderr, naming the actor, and exits 1 (coord_main.h), rather
 * than running on without ever campaigning (what zactor_new alone gave). It never
 * touches etcd: no key is left. */
static void test_coordinator_exits_1_when_an_actor_does_not_start(void **state)
{
    (void)state;
    char text[8192];
    assert_int_equal(s_reap(s_coord_run(s_main_no_membership, "nomember")), 1);
    s_read_log("nomember", text, sizeof text);
    assert_non_null(strstr(text, "kvtier coordinator: the membership actor did not start"));
    assert_int_equal(s_reap(s_coord_run(s_main_no_elector, "noelector")), 1);
    s_read_log("noelector", text, sizeof text);
    assert_non_null(strstr(text, "kvtier coordinator: the elector actor did not start"));
    assert_false(s_get("coordinators/noelector").present);
    assert_false(s_get("leader").present);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_tier_process_registers_and_deregisters_on_sigterm,
                                  s_teardown),
        cmocka_unit_test_teardown(test_tier_process_reregisters_when_its_lease_is_lost, s_teardown),
        cmocka_unit_test_teardown(test_killed_tier_disappears_by_its_lease, s_teardown),
        cmocka_unit_test_teardown(test_coordinator_process_leads_and_cleans_up_on_sigterm,
                                  s_teardown),
        cmocka_unit_test_teardown(test_second_coordinator_takes_over_when_leader_stops, s_teardown),
        cmocka_unit_test_teardown(test_bad_usage_and_bad_file_exit_2, s_teardown),
        cmocka_unit_test_teardown(test_coordinator_exits_1_when_an_actor_does_not_start,
                                  s_teardown),
    };
    return cmocka_run_group_tests_name("coord_process", tests, s_group_setup, s_group_teardown);
}
