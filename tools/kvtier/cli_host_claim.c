/* cli_host_claim.c — `kvtier host-claim -c FILE --host NAME`: one host name, one
 * supervisor (issue 9 §6, docs/OPERATIONS.md "Deploying on several hosts").
 * deploy/supervise --host NAME runs it before anything of the host starts: it puts
 * /kvtier/<cluster>/hosts/<NAME> = {"host","machine","netns","owner"} under a lease
 * of its own, only if the key is absent (one etcd transaction), prints
 * "host-claim: claimed KEY ..." and keeps the lease alive until SIGTERM/SIGINT,
 * when it revokes it (the key goes with it). A key held by anyone else — a second
 * supervisor given the same host name, on another machine or namespace or run dir —
 * is refused at once, naming the holder (exit 3); a claim with exactly this value
 * (the same supervisor's earlier claimer, restarted) is taken over. A lease lost
 * while running (etcd away past the TTL) is claimed again the same way. With
 * --watch-pid PID it lets go (revokes, exits 0) once PID is gone: a supervisor
 * killed with SIGKILL leaves no claimer holding its name.
 *
 * Owns: its etcd handle and lease. Never touches another key. */
#include "cli_common.h"
#include "coord_config.h"
#include "coord_etcd.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define S_EXIT_TAKEN 3
#define S_TTL_DEFAULT_S 5
#define S_VALUE_MAX 1024

enum { S_OPT_HOST = CLI_OPT_FIRST_COMMAND_OPT, S_OPT_OWNER, S_OPT_TTL, S_OPT_WATCH_PID };

typedef struct {
    const char *host;
    const char *owner;
    uint64_t ttl_s;
    uint64_t watch_pid; /* 0: none */
} s_args_t;

static volatile sig_atomic_t s_stop;

static void s_on_signal(int sig)
{
    (void)sig;
    s_stop = 1;
}

static int s_opt(void *ctx, int opt, const char *arg)
{
    s_args_t *a = ctx;
    switch (opt) {
    case S_OPT_HOST:
        a->host = arg;
        return 0;
    case S_OPT_OWNER:
        a->owner = arg;
        return 0;
    case S_OPT_TTL:
        return cli_parse_u64("--ttl", arg, 1, 3600, &a->ttl_s);
    case S_OPT_WATCH_PID:
        return cli_parse_u64("--watch-pid", arg, 1, INT32_MAX, &a->watch_pid);
    default:
        return -1;
    }
}

/* The claim's value: who holds the name, where. */
static int s_value(const s_args_t *a, char *out, size_t cap)
{
    char machine[256] = "?", netns[64] = "?";
    (void)gethostname(machine, sizeof machine - 1);
    ssize_t n = readlink("/proc/self/ns/net", netns, sizeof netns - 1);
    netns[n > 0 ? n : 1] = '\0';
    json_t *j = json_pack("{s:s, s:s, s:s, s:s}", "host", a->host, "machine", machine, "netns",
                          netns, "owner", a->owner ? a->owner : "");
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    int rc = s && strlen(s) < cap ? 0 : -1;
    if (rc == 0)
        snprintf(out, cap, "%s", s);
    free(s);
    return rc;
}

/* One attempt: a lease and the key under it if absent. 0 claimed (*lease set),
 * S_EXIT_TAKEN held by another (message printed), -1 etcd failed (ERR set). */
static int s_claim(coord_etcd_t *e, const char *key, const char *value, const s_args_t *a,
                   const char *cluster, int64_t *lease, char *err, size_t errlen)
{
    int64_t granted = 0;
    int rc = coord_etcd_lease_grant(e, (int64_t)a->ttl_s, 0, lease, &granted);
    if (rc < 0) {
        snprintf(err, errlen, "lease grant: %s", strerror(-rc));
        return -1;
    }
    for (int round = 0; round < 2; round++) {
        bool won = false;
        char cur[S_VALUE_MAX] = "";
        size_t cur_len = 0;
        rc = coord_etcd_create_if_absent(e, key, value, strlen(value), *lease, &won, cur,
                                         sizeof cur - 1, &cur_len, NULL);
        if (rc < 0 && rc != -ENOBUFS) {
            snprintf(err, errlen, "claim: %s", strerror(-rc));
            (void)coord_etcd_lease_revoke(e, *lease);
            return -1;
        }
        if (won) {
            printf("host-claim: claimed %s (lease %" PRIx64 ", TTL %" PRId64 " s): %s\n", key,
                   (uint64_t)*lease, granted, value);
            fflush(stdout);
            return 0;
        }
        cur[cur_len < sizeof cur ? cur_len : sizeof cur - 1] = '\0';
        bool deleted = false;
        /* our own earlier claim (the same supervisor, its claimer restarted): taken over */
        if (round == 0 && strcmp(cur, value) == 0 &&
            coord_etcd_delete_if_value(e, key, value, strlen(value), &deleted) == 0 && deleted)
            continue;
        fprintf(stderr,
                "kvtier host-claim: host %s of cluster %s is already claimed (%s = %s): "
                "two supervisors run under one host name. Give each host its own name "
                "(deploy/supervise --host NAME, the deployment's \"host\" keys), or stop the "
                "other; its claim lapses %" PRIu64 " s after it stops\n",
                a->host, cluster, key, cur, a->ttl_s);
        (void)coord_etcd_lease_revoke(e, *lease);
        return S_EXIT_TAKEN;
    }
    (void)coord_etcd_lease_revoke(e, *lease);
    snprintf(err, errlen, "claim: raced with another writer twice");
    return -1;
}

static const s_args_t *s_watched; /* --watch-pid */

/* Sleeps MS unless a signal asks to stop (or the watched process is gone). */
static void s_nap(int64_t ms)
{
    for (int64_t left = ms; left > 0 && !s_stop; left -= 50) {
        if (s_watched && s_watched->watch_pid && kill((pid_t)s_watched->watch_pid, 0) < 0 &&
            errno == ESRCH) {
            fprintf(stderr, "kvtier host-claim: pid %llu is gone: letting go of the claim\n",
                    (unsigned long long)s_watched->watch_pid);
            s_stop = 1;
            break;
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static int s_run(const cli_common_t *o, const s_args_t *a)
{
    coord_config_t *cfg = calloc(1, sizeof *cfg);
    char err[512], key[COORD_ETCD_KEY_MAX], value[S_VALUE_MAX], suffix[96];
    int status = CLI_EXIT_FAIL;
    coord_etcd_t *e = NULL;
    if (!cfg)
        return CLI_EXIT_FAIL;
    if (coord_config_load_file(o->config, cfg, err, sizeof err) < 0 ||
        (o->etcd && coord_config_set_etcd(cfg, o->etcd, err, sizeof err) < 0)) {
        fprintf(stderr, "kvtier host-claim: %s\n", err);
        goto out;
    }
    coord_etcd_tls_t tls = {
        .ca_file = cfg->etcd_ca, .cert_file = cfg->etcd_cert, .key_file = cfg->etcd_key};
    if (coord_etcd_set_tls(&tls, err, sizeof err) < 0) {
        fprintf(stderr, "kvtier host-claim: %s: %s\n", o->config, err);
        goto out;
    }
    if (cfg->n_etcd == 0) {
        fprintf(stderr, "kvtier host-claim: %s names no etcd endpoints: give --etcd URLS\n",
                o->config);
        goto out;
    }
    const char *eps[COORD_ETCD_MAX_ENDPOINTS];
    for (uint32_t i = 0; i < cfg->n_etcd; i++)
        eps[i] = cfg->etcd[i];
    coord_etcd_config_t ec = {.endpoints = eps, .n_endpoints = cfg->n_etcd, .timeout_ms = 2000};
    snprintf(suffix, sizeof suffix, "hosts/%s", a->host);
    if (!(e = coord_etcd_new(&ec)) ||
        coord_cluster_key(key, sizeof key, cfg->cluster, suffix) < 0 ||
        s_value(a, value, sizeof value) < 0) {
        fprintf(stderr, "kvtier host-claim: cannot set up the claim of host %s\n", a->host);
        goto out;
    }
    s_watched = a;
    signal(SIGTERM, s_on_signal);
    signal(SIGINT, s_on_signal);
    int64_t lease = 0;
    bool claimed = false, warned = false;
    while (!s_stop) {
        if (!claimed) {
            int rc = s_claim(e, key, value, a, cfg->cluster, &lease, err, sizeof err);
            if (rc == S_EXIT_TAKEN) {
                status = S_EXIT_TAKEN;
                goto out;
            }
            claimed = rc == 0;
            if (!claimed && !warned) {
                fprintf(stderr, "kvtier host-claim: etcd: %s (trying again every second)\n", err);
                warned = true;
            }
            if (claimed)
                warned = false;
            s_nap(claimed ? (int64_t)a->ttl_s * 1000 / 3 : 1000);
            continue;
        }
        int64_t left = 0;
        int rc = coord_etcd_lease_keepalive(e, lease, &left);
        if (rc == -ENOENT) {
            fprintf(stderr,
                    "kvtier host-claim: the lease of %s lapsed (etcd away past its TTL): "
                    "claiming it again\n",
                    key);
            claimed = false;
            continue;
        }
        if (rc < 0 && !warned) {
            fprintf(stderr, "kvtier host-claim: keepalive of %s: %s (trying again)\n", key,
                    strerror(-rc));
            warned = true;
        } else if (rc == 0) {
            warned = false;
        }
        s_nap(rc == 0 ? (int64_t)a->ttl_s * 1000 / 3 : 500);
    }
    if (claimed)
        (void)coord_etcd_lease_revoke(e, lease);
    printf("host-claim: released %s\n", key);
    status = CLI_EXIT_OK;
out:
    coord_etcd_destroy(&e);
    free(cfg);
    return status;
}

int cli_cmd_host_claim(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_COMMON_LONGOPTS,
        {"host", required_argument, NULL, S_OPT_HOST},
        {"owner", required_argument, NULL, S_OPT_OWNER},
        {"ttl", required_argument, NULL, S_OPT_TTL},
        {"watch-pid", required_argument, NULL, S_OPT_WATCH_PID},
        {0, 0, 0, 0}};
    cli_common_t o;
    s_args_t a = {.ttl_s = S_TTL_DEFAULT_S};
    cli_common_init(&o);
    int first = cli_parse(argc, argv, "c:", longopts, &o, s_opt, &a);
    if (first < 0 || o.help || first != argc || !a.host || !o.config) {
        fprintf(o.help ? stdout : stderr,
                "usage: kvtier host-claim -c FILE --host NAME [--etcd URLS] [--owner TEXT] "
                "[--ttl S] [--watch-pid PID]\n"
                "  claims host NAME of the deployment's cluster in etcd\n"
                "  (/kvtier/<cluster>/hosts/<NAME>, under a lease of S seconds, default %d)\n"
                "  and holds it until SIGTERM (or PID is gone); exit 3 when another holds it\n"
                "  (named)\n" CLI_COMMON_USAGE,
                S_TTL_DEFAULT_S);
        return o.help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    return s_run(&o, &a);
}
