/* bench_meta.c — `kvt-bench meta`: the meta plane, lookups of 256-key prefixes
 * through libkvtier against the real scheduler started in this process
 * (bench_svc.h), vs Redis in the same run.
 *
 * Setup: --blocks keys are stored (4 KiB blocks, written through the shared
 * memory path in windows of one prompt), grouped in prompts of --prefix
 * consecutive keys. redis-server (--redis-server, default /usr/bin/redis-server)
 * is started on a free loopback port in a mkdtemp directory with --save "" and
 * --appendonly no, and loaded with the same 16-byte keys (MSET, value "1", the
 * tier id). Each operation picks a random prompt and asks for all its keys:
 *
 *   kvtier        kvt_lookup(PREFIX) of the prompt's keys: hit_count must be all;
 *   redis EXISTS  one EXISTS with all the prompt's keys (one round trip): the
 *                 count must be all;
 *   redis MGET    one MGET with all the prompt's keys: every value must be there
 *                 (per-key answers, like the lookup's hit and tier arrays).
 *
 * With 1 and 8 operations in flight: 8 threads, each with its own client handle
 * (the handle is single-threaded) or its own Redis connection, each one
 * operation at a time. A cell alternates --rounds slices of the three sides so
 * background load hits them alike; the first slice of each side starts after a
 * warm-up. keys/s counts operations completed inside the timed windows times
 * the prefix length; p50/p99 are per operation (send to verified answer).
 *
 * Everything stops by itself: slices are bounded by --seconds, threads are
 * joined, the actors stopped (the shm segment removed), redis-server is sent
 * SIGTERM (SIGKILL if it has not exited within 5 s) and its directory removed.
 * Returns 0, 1 when setup or any operation fails, 2 on bad arguments. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <fcntl.h>

#if KVT_BENCH_HIREDIS
#include <hiredis.h>
#endif

#include "bench.h"
#include "bench_svc.h"

#define S_BLOCK 4096u
#define S_MAX_THREADS 8u
#define S_FILL_BATCH 256u
#define S_MAX_PREFIX 4096u
#define S_SAMPLES_PER_SEC 200000u /* latency room per thread and timed second */
#define S_MAX_SAMPLES (8u << 20)
#define S_REDIS_START_MS 5000
#define S_REDIS_STOP_MS 5000
#define S_REDIS_PIPELINE 64u /* MSET commands in flight while loading */

static const uint32_t s_depths[] = {1, 8};

typedef enum { S_KVT, S_KVT_EV, S_EXISTS, S_MGET, S_NSIDES } s_kind_t;
static const char *const s_side_names[S_NSIDES] = {"kvtier lookup", "kvtier +events",
                                                   "redis EXISTS", "redis MGET"};

struct s_args {
    double seconds;
    uint32_t rounds;
    uint32_t blocks, prefix;
    const char *redis_server;
    bool events_subscriber; /* the events-on service has a local subscriber */
};

typedef struct {
    struct s_args a;
    uint32_t nprompts;
    kvt_key_t *keys; /* blocks keys, prompt p = keys[p * prefix ...] */
    double warmup;
    uint32_t cap; /* latency samples per thread and side */
} s_ctx_t;

static uint64_t s_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- workers: one thread, one handle or connection, one operation at a time ---- */

typedef struct {
    uint32_t *lat;
    uint32_t n;
    uint64_t ops; /* completed inside timed windows (counted even when lat is full) */
    uint64_t errors;
    bool full;
} s_samples_t;

typedef struct {
    const s_ctx_t *ctx;
    kvt_client_t *c;
    kvt_client_t *c_ev; /* on the events-on service */
#if KVT_BENCH_HIREDIS
    redisContext *r;
#endif
    const char **argv; /* prefix + 1 */
    size_t *argvlen;
    bool *hit;
    uint32_t *tiers;
    uint64_t rng;
    s_samples_t s[S_NSIDES];
    /* the slice being run */
    s_kind_t kind;
    uint64_t t_start, t_end;
    bool warned;
} s_worker_t;

static uint32_t s_pick(s_worker_t *w)
{
    w->rng ^= w->rng << 13, w->rng ^= w->rng >> 7, w->rng ^= w->rng << 17;
    return (uint32_t)(w->rng % w->ctx->nprompts);
}

static void s_warn(s_worker_t *w, const char *fmt, const char *detail)
{
    if (w->warned)
        return;
    w->warned = true;
    fprintf(stderr, "meta bench: %s: ", s_side_names[w->kind]);
    fprintf(stderr, fmt, detail);
    fputc('\n', stderr);
}

static int s_op_kvt(s_worker_t *w, const kvt_key_t *keys, uint32_t n)
{
    kvt_lookup_result_t res = {.hit = w->hit, .tier_ids = w->tiers};
    kvt_client_t *c = w->kind == S_KVT_EV ? w->c_ev : w->c;
    if (kvt_lookup(c, BENCH_SVC_INSTANCE, NULL, KVT_LOOKUP_PREFIX, 0, keys, n, &res) != 0) {
        s_warn(w, "lookup: %s", kvt_last_error(c));
        return -1;
    }
    if (res.hit_count != n || w->tiers[n - 1] != 1) {
        s_warn(w, "%s", "lookup: not every key of the prompt hit");
        return -1;
    }
    return 0;
}

#if KVT_BENCH_HIREDIS
static int s_op_redis(s_worker_t *w, const kvt_key_t *keys, uint32_t n)
{
    w->argv[0] = w->kind == S_EXISTS ? "EXISTS" : "MGET";
    w->argvlen[0] = strlen(w->argv[0]);
    for (uint32_t i = 0; i < n; i++)
        w->argv[i + 1] = (const char *)keys[i].b;
    redisReply *rep = redisCommandArgv(w->r, (int)n + 1, w->argv, w->argvlen);
    if (!rep) {
        s_warn(w, "connection: %s", w->r->errstr);
        return -1;
    }
    bool ok;
    if (w->kind == S_EXISTS) {
        ok = rep->type == REDIS_REPLY_INTEGER && rep->integer == (long long)n;
    } else {
        ok = rep->type == REDIS_REPLY_ARRAY && rep->elements == n;
        for (size_t i = 0; ok && i < n; i++)
            ok = rep->element[i]->type == REDIS_REPLY_STRING && rep->element[i]->len == 1;
    }
    freeReplyObject(rep);
    if (!ok)
        s_warn(w, "%s", "not every key of the prompt was found");
    return ok ? 0 : -1;
}
#endif

static int s_op(s_worker_t *w)
{
    uint32_t n = w->ctx->a.prefix;
    const kvt_key_t *keys = w->ctx->keys + (size_t)s_pick(w) * n;
#if KVT_BENCH_HIREDIS
    if (w->kind == S_EXISTS || w->kind == S_MGET)
        return s_op_redis(w, keys, n);
#endif
    return s_op_kvt(w, keys, n);
}

static void *s_worker_run(void *arg)
{
    s_worker_t *w = arg;
    s_samples_t *s = &w->s[w->kind];
    for (;;) {
        uint64_t t0 = s_now_ns();
        if (t0 >= w->t_end)
            break;
        if (s_op(w) != 0) {
            s->errors++;
            break;
        }
        uint64_t t1 = s_now_ns();
        if (t0 < w->t_start || t1 > w->t_end)
            continue;
        s->ops++;
        if (s->n == w->ctx->cap) {
            s->full = true;
            continue;
        }
        uint64_t d = t1 - t0;
        s->lat[s->n++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
    }
    return NULL;
}

/* Runs `depth` workers on one side for one slice; returns the timed ns. */
static uint64_t s_slice(s_worker_t *ws, uint32_t depth, s_kind_t kind, double warmup,
                        double seconds, int *rc)
{
    pthread_t th[S_MAX_THREADS];
    uint64_t start = s_now_ns() + (uint64_t)(warmup * 1e9);
    uint64_t end = start + (uint64_t)(seconds * 1e9);
    uint32_t started = 0;
    for (uint32_t i = 0; i < depth; i++) {
        ws[i].kind = kind;
        ws[i].t_start = start;
        ws[i].t_end = end;
        if (pthread_create(&th[i], NULL, s_worker_run, &ws[i]) != 0) {
            *rc = -1;
            break;
        }
        started++;
    }
    for (uint32_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    for (uint32_t i = 0; i < depth; i++)
        if (ws[i].s[kind].errors)
            *rc = -1;
    return end - start;
}

/* ---- Redis: a private redis-server on a free loopback port ---- */

typedef struct {
    pid_t pid;
    int port;
    char dir[256];
} s_redis_t;

static void s_rmdir_all(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char p[512];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    if (rmdir(dir) != 0)
        fprintf(stderr, "meta bench: cannot remove %s: %s\n", dir, strerror(errno));
}

/* A port nobody listens on now (bind to port 0, read it back, release it). */
static int s_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static void s_redis_stop(s_redis_t *r)
{
    if (r->pid > 0) {
        kill(r->pid, SIGTERM);
        int st;
        bool gone = false;
        for (int i = 0; i < S_REDIS_STOP_MS / 10 && !gone; i++) {
            gone = waitpid(r->pid, &st, WNOHANG) == r->pid;
            if (!gone)
                usleep(10000);
        }
        if (!gone) {
            fprintf(stderr, "meta bench: redis-server did not stop on SIGTERM; killing it\n");
            kill(r->pid, SIGKILL);
            waitpid(r->pid, &st, 0);
        }
        r->pid = 0;
    }
    if (r->dir[0]) {
        s_rmdir_all(r->dir);
        r->dir[0] = '\0';
    }
}

#if KVT_BENCH_HIREDIS
static void s_redis_log_tail(const s_redis_t *r)
{
    char p[300], line[512];
    snprintf(p, sizeof p, "%s/redis.log", r->dir);
    FILE *f = fopen(p, "r");
    while (f && fgets(line, sizeof line, f))
        fprintf(stderr, "  redis: %s", line);
    if (f)
        fclose(f);
}

static int s_redis_spawn(const struct s_args *a, s_redis_t *r)
{
    char port[16], log[300];
    snprintf(port, sizeof port, "%d", r->port);
    snprintf(log, sizeof log, "%s/redis.log", r->dir);
    char *argv[] = {(char *)a->redis_server,
                    "--port",
                    port,
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    r->dir,
                    "--logfile",
                    log,
                    "--daemonize",
                    "no",
                    NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    extern char **environ;
    int rc = posix_spawn(&r->pid, a->redis_server, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        fprintf(stderr, "meta bench: cannot start %s: %s\n", a->redis_server, strerror(rc));
        r->pid = 0;
        return -1;
    }
    return 0;
}

static redisContext *s_redis_connect(const s_redis_t *r)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", r->port, tv);
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    if (c)
        redisSetTimeout(c, (struct timeval){10, 0});
    return c;
}

/* Polls PING until redis answers; 0, or -1 when it exited or never answered. */
static int s_redis_wait_up(s_redis_t *r)
{
    for (int i = 0; i < S_REDIS_START_MS / 10; i++) {
        int st;
        if (waitpid(r->pid, &st, WNOHANG) == r->pid) {
            r->pid = 0;
            return -1;
        }
        redisContext *c = s_redis_connect(r);
        redisReply *rep = c ? redisCommand(c, "PING") : NULL;
        bool up = rep && rep->type == REDIS_REPLY_STATUS;
        if (rep)
            freeReplyObject(rep);
        if (c)
            redisFree(c);
        if (up)
            return 0;
        usleep(10000);
    }
    return -1;
}

static int s_redis_start(const struct s_args *a, s_redis_t *r)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(r->dir, sizeof r->dir, "%s/kvt-bench-redis-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(r->dir)) {
        fprintf(stderr, "meta bench: mkdtemp %s: %s\n", r->dir, strerror(errno));
        r->dir[0] = '\0';
        return -1;
    }
    /* the port may be taken between the probe and redis's bind: try a few */
    for (int attempt = 0; attempt < 3; attempt++) {
        r->port = s_free_port();
        if (r->port <= 0 || s_redis_spawn(a, r) != 0)
            break;
        if (s_redis_wait_up(r) == 0)
            return 0;
        s_redis_log_tail(r);
        if (r->pid > 0) {
            kill(r->pid, SIGKILL);
            waitpid(r->pid, NULL, 0);
            r->pid = 0;
        }
    }
    fprintf(stderr, "meta bench: redis-server did not come up\n");
    s_redis_stop(r);
    return -1;
}

/* MSET of every prompt's keys (value "1"), pipelined; checks DBSIZE. */
static int s_redis_load(const s_ctx_t *ctx, const s_redis_t *r)
{
    redisContext *c = s_redis_connect(r);
    uint32_t n = ctx->a.prefix;
    const char **argv = calloc(2 * n + 1, sizeof *argv);
    size_t *argvlen = calloc(2 * n + 1, sizeof *argvlen);
    int rc = c && argv && argvlen ? 0 : -1;
    uint32_t pending = 0;
    for (uint32_t p = 0; rc == 0 && p <= ctx->nprompts; p++) {
        if (p < ctx->nprompts) {
            argv[0] = "MSET", argvlen[0] = 4;
            for (uint32_t i = 0; i < n; i++) {
                argv[1 + 2 * i] = (const char *)ctx->keys[(size_t)p * n + i].b;
                argvlen[1 + 2 * i] = KVT_KEY_BYTES;
                argv[2 + 2 * i] = "1", argvlen[2 + 2 * i] = 1;
            }
            if (redisAppendCommandArgv(c, (int)(2 * n + 1), argv, argvlen) != REDIS_OK)
                rc = -1;
            pending++;
        }
        while (rc == 0 && pending > 0 && (pending >= S_REDIS_PIPELINE || p == ctx->nprompts)) {
            redisReply *rep = NULL;
            if (redisGetReply(c, (void **)&rep) != REDIS_OK || !rep ||
                rep->type != REDIS_REPLY_STATUS)
                rc = -1;
            if (rep)
                freeReplyObject(rep);
            pending--;
        }
    }
    redisReply *rep = rc == 0 ? redisCommand(c, "DBSIZE") : NULL;
    if (!rep || rep->type != REDIS_REPLY_INTEGER || rep->integer != (long long)ctx->a.blocks) {
        fprintf(stderr, "meta bench: loading redis failed (%s)\n",
                c && c->err ? c->errstr : "DBSIZE is not the number of keys");
        rc = -1;
    }
    if (rep)
        freeReplyObject(rep);
    if (c)
        redisFree(c);
    free(argv);
    free(argvlen);
    return rc;
}
#endif

/* ---- the kvtier side: fill ---- */

static int s_fill(const s_ctx_t *ctx, bench_svc_t *svc)
{
    kvt_client_t *c = bench_svc_connect(svc, false, "bench-fill");
    uint8_t *blk = calloc(1, S_BLOCK);
    const void **bufs = calloc(S_FILL_BATCH, sizeof *bufs);
    int rc = c && blk && bufs ? 0 : -1;
    kvt_request_t req = {.instance_id = BENCH_SVC_INSTANCE, .request_id = "meta-fill"};
    if (rc == 0 && kvt_request_begin(c, &req) != 0)
        rc = -1;
    for (uint32_t i = 0; rc == 0 && i < S_FILL_BATCH; i++)
        bufs[i] = blk;
    uint64_t job = 0;
    for (uint32_t off = 0; rc == 0 && off < ctx->a.blocks; off += S_FILL_BATCH) {
        uint32_t n = ctx->a.blocks - off < S_FILL_BATCH ? ctx->a.blocks - off : S_FILL_BATCH;
        kvt_token_t *tok = NULL;
        kvt_job_result_t res;
        job++;
        rc = kvt_prepare_put(c, BENCH_SVC_INSTANCE, "meta-fill", ctx->keys + off, n, &tok);
        if (rc == 0 && kvt_token_count(tok) != n)
            rc = -1;
        if (rc == 0)
            rc = kvt_submit_put(c, job, tok, bufs, S_BLOCK);
        if (rc == 0)
            rc = kvt_wait(c, &job, 1, (int)BENCH_SVC_TIMEOUT_MS, &res);
        if (rc == 0 && (res.status != 0 || res.n_failed != 0))
            rc = -1;
        if (tok && kvt_complete_put(c, &tok, NULL) != 0)
            rc = -1;
    }
    if (c && rc == 0 && kvt_request_end(c, BENCH_SVC_INSTANCE, "meta-fill", NULL) != 0)
        rc = -1;
    if (rc != 0)
        fprintf(stderr, "meta bench: filling the tier failed: %s\n",
                c ? kvt_last_error(c) : "no client");
    kvt_close(&c);
    free(blk);
    free(bufs);
    return rc;
}

/* ---- cells and report ---- */

static int s_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double ops_s, p50_us, p99_us;
    bool full;
} s_result_t;

/* Merges the workers' samples of one side into `all` (room for depth x cap). */
static s_result_t s_result(s_worker_t *ws, uint32_t depth, s_kind_t kind, uint64_t timed_ns,
                           uint32_t *all)
{
    s_result_t res = {0};
    uint64_t ops = 0;
    size_t n = 0;
    for (uint32_t i = 0; i < depth; i++) {
        s_samples_t *s = &ws[i].s[kind];
        ops += s->ops;
        memcpy(all + n, s->lat, (size_t)s->n * sizeof *all);
        n += s->n;
        res.full |= s->full;
    }
    res.ops_s = timed_ns ? (double)ops / ((double)timed_ns * 1e-9) : 0.0;
    if (n == 0)
        return res;
    qsort(all, n, sizeof *all, s_cmp_u32);
    res.p50_us = all[(n * 50 + 99) / 100 - 1] * 1e-3;
    res.p99_us = all[(n * 99 + 99) / 100 - 1] * 1e-3;
    return res;
}

static void s_row(uint32_t depth, s_kind_t kind, const s_result_t *r, const s_result_t *kvt,
                  uint32_t prefix)
{
    printf("%9u  %-14s %12.0f %10.0f %9.1f %9.1f %8.2f%s\n", depth, s_side_names[kind],
           r->ops_s * prefix, r->ops_s, r->p50_us, r->p99_us,
           r->ops_s > 0 ? kvt->ops_s / r->ops_s : 0.0, r->full ? "  (latency array full)" : "");
}

static int s_cell(const s_ctx_t *ctx, s_worker_t *ws, uint32_t depth, bool redis, uint32_t *all)
{
    int rc = 0;
    uint64_t timed[S_NSIDES] = {0};
    double slice = ctx->a.seconds / ctx->a.rounds;
    for (uint32_t i = 0; i < depth; i++)
        for (int k = 0; k < S_NSIDES; k++) {
            ws[i].s[k].n = 0;
            ws[i].s[k].ops = ws[i].s[k].errors = 0;
            ws[i].s[k].full = false;
        }
    for (uint32_t round = 0; rc == 0 && round < ctx->a.rounds; round++)
        for (int k = 0; rc == 0 && k < S_NSIDES; k++) {
            if ((k == S_EXISTS || k == S_MGET) && !redis)
                continue;
            timed[k] += s_slice(ws, depth, (s_kind_t)k, round == 0 ? ctx->warmup : 0.0, slice, &rc);
        }
    if (rc != 0)
        return -1;
    s_result_t res[S_NSIDES];
    for (int k = 0; k < S_NSIDES; k++)
        res[k] = s_result(ws, depth, (s_kind_t)k, timed[k], all);
    for (int k = 0; k < S_NSIDES; k++)
        if (k == S_KVT || k == S_KVT_EV || redis)
            s_row(depth, (s_kind_t)k, &res[k], &res[S_KVT], ctx->a.prefix);
    printf("%9u  events on / off: %.3f x keys/s\n", depth,
           res[S_KVT].ops_s > 0 ? res[S_KVT_EV].ops_s / res[S_KVT].ops_s : 0.0);
    fflush(stdout);
    return 0;
}

/* Workers with their own handles and connections, for the deepest cell. */
static int s_workers_open(const s_ctx_t *ctx, bench_svc_t *svc, bench_svc_t *svc_ev,
                          const s_redis_t *r, s_worker_t *ws)
{
    uint32_t n = ctx->a.prefix;
    for (uint32_t i = 0; i < S_MAX_THREADS; i++) {
        s_worker_t *w = &ws[i];
        char name[32];
        snprintf(name, sizeof name, "bench-meta-%u", i);
        w->ctx = ctx;
        w->rng = 0x9e3779b97f4a7c15ull * (i + 1);
        w->c = bench_svc_connect(svc, false, name);
        w->c_ev = bench_svc_connect(svc_ev, false, name);
        w->argv = calloc(n + 1, sizeof *w->argv);
        w->argvlen = calloc(n + 1, sizeof *w->argvlen);
        w->hit = calloc(n, sizeof *w->hit);
        w->tiers = calloc(n, sizeof *w->tiers);
        if (!w->c || !w->c_ev || !w->argv || !w->argvlen || !w->hit || !w->tiers)
            return -1;
        for (uint32_t k = 1; k <= n; k++)
            w->argvlen[k] = KVT_KEY_BYTES;
        for (int k = 0; k < S_NSIDES; k++) {
            w->s[k].lat = malloc((size_t)ctx->cap * sizeof *w->s[k].lat);
            if (!w->s[k].lat)
                return -1;
            memset(w->s[k].lat, 0, (size_t)ctx->cap * sizeof *w->s[k].lat); /* fault in */
        }
#if KVT_BENCH_HIREDIS
        if (r->pid > 0 && !(w->r = s_redis_connect(r)))
            return -1;
#else
        (void)r;
#endif
    }
    return 0;
}

static void s_workers_close(s_worker_t *ws)
{
    for (uint32_t i = 0; i < S_MAX_THREADS; i++) {
        s_worker_t *w = &ws[i];
        kvt_close(&w->c);
        kvt_close(&w->c_ev);
#if KVT_BENCH_HIREDIS
        if (w->r)
            redisFree(w->r);
        w->r = NULL;
#endif
        free(w->argv);
        free(w->argvlen);
        free(w->hit);
        free(w->tiers);
        for (int k = 0; k < S_NSIDES; k++)
            free(w->s[k].lat);
    }
}

/* ---- arguments ---- */

static void s_usage(void)
{
    fprintf(stderr,
            "usage: kvt-bench meta [--seconds S] [--rounds R] [--blocks N] [--prefix K]\n"
            "                      [--redis-server PATH] [--events-subscriber yes|no]\n"
            "  S timed seconds per side and cell (default 3, 0.1..600), split into R\n"
            "  alternating kvtier / redis EXISTS / redis MGET slices (default 3, 1..100);\n"
            "  N keys stored (default 65536, a multiple of K); K keys per lookup (default\n"
            "  256, 1..%u); PATH default /usr/bin/redis-server.\n"
            "  Cells: 1 and 8 operations in flight (threads, one handle/connection each).\n"
            "  \"kvtier +events\": a second service with events on (publisher, mirror, vLLM\n"
            "  stream) in the same alternating slices; with a subscriber reading both\n"
            "  streams in this process (yes, the default) or none (no).\n",
            S_MAX_PREFIX);
}

static int s_parse(int argc, char **argv, struct s_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0)
            return 1;
        if (!val)
            return -1;
        i++;
        if (strcmp(opt, "--redis-server") == 0) {
            a->redis_server = val;
            continue;
        }
        if (strcmp(opt, "--events-subscriber") == 0) {
            if (strcmp(val, "yes") && strcmp(val, "no"))
                return -1;
            a->events_subscriber = strcmp(val, "yes") == 0;
            continue;
        }
        if (strcmp(opt, "--seconds") == 0) {
            a->seconds = strtod(val, &end);
        } else {
            unsigned long v = strtoul(val, &end, 10);
            if (strcmp(opt, "--rounds") == 0)
                a->rounds = v > 100 ? 0 : (uint32_t)v;
            else if (strcmp(opt, "--blocks") == 0)
                a->blocks = v > (1u << 24) ? 0 : (uint32_t)v;
            else if (strcmp(opt, "--prefix") == 0)
                a->prefix = v > S_MAX_PREFIX ? 0 : (uint32_t)v;
            else
                return -1;
        }
        if (end == val || *end != '\0')
            return -1;
    }
    bool ok = a->seconds >= 0.1 && a->seconds <= 600 && a->rounds >= 1 && a->prefix >= 1 &&
              a->blocks >= a->prefix && a->blocks % a->prefix == 0;
    return ok ? 0 : -1;
}

static int s_keys(s_ctx_t *ctx)
{
    ctx->keys = malloc((size_t)ctx->a.blocks * sizeof *ctx->keys);
    if (!ctx->keys)
        return -1;
    uint64_t nonce = s_now_ns();
    for (uint32_t i = 0; i < ctx->a.blocks; i++)
        bench_svc_key(nonce, i, &ctx->keys[i]);
    return 0;
}

int bench_meta(int argc, char **argv)
{
    s_ctx_t ctx = {.a = {.seconds = 3.0,
                         .rounds = 3,
                         .blocks = 65536,
                         .prefix = 256,
                         .redis_server = "/usr/bin/redis-server",
                         .events_subscriber = true}};
    int parsed = s_parse(argc, argv, &ctx.a);
    if (parsed != 0) {
        s_usage();
        return parsed > 0 ? 0 : 2;
    }
    signal(SIGPIPE, SIG_IGN); /* a dead redis-server is an error, not a signal */
    double w = ctx.a.seconds / 10;
    ctx.warmup = w < 0.2 ? 0.2 : w > 1.0 ? 1.0 : w;
    double room = ctx.a.seconds * S_SAMPLES_PER_SEC + 1024;
    ctx.cap = room > S_MAX_SAMPLES ? S_MAX_SAMPLES : (uint32_t)room;
    ctx.nprompts = ctx.a.blocks / ctx.a.prefix;

    s_redis_t redis = {0};
    bench_svc_t *svc = NULL, *svc_ev = NULL;
    s_worker_t *ws = calloc(S_MAX_THREADS, sizeof *ws);
    uint32_t *all = malloc((size_t)S_MAX_THREADS * ctx.cap * sizeof *all);
    int rc = -1;
    if (!ws || !all || s_keys(&ctx) != 0) {
        fprintf(stderr, "meta bench: out of memory\n");
        goto out;
    }
    bool have_redis = false;
#if KVT_BENCH_HIREDIS
    /* before any thread or ZeroMQ socket exists: the child inherits nothing of them */
    have_redis = s_redis_start(&ctx.a, &redis) == 0 && s_redis_load(&ctx, &redis) == 0;
#else
    fprintf(stderr, "meta bench: built without hiredis: no Redis baseline\n");
#endif
    uint64_t t0 = s_now_ns();
    svc = bench_svc_start("meta", S_BLOCK, ctx.a.blocks);
    if (!svc || s_fill(&ctx, svc) != 0)
        goto out;
    double fill_s = (double)(s_now_ns() - t0) * 1e-9;
    /* the same service with events on (publisher, mirror, vLLM stream, a
     * subscriber reading both), filled alike: its slices alternate with the rest */
    svc_ev = bench_svc_start_events("meta-ev", S_BLOCK, ctx.a.blocks, ctx.a.events_subscriber);
    if (!svc_ev || s_fill(&ctx, svc_ev) != 0)
        goto out;
    if (s_workers_open(&ctx, svc, svc_ev, &redis, ws) != 0) {
        fprintf(stderr, "meta bench: cannot open the clients / connections\n");
        goto out;
    }
    printf("meta plane: %u keys stored (%u prompts of %u; service start + fill %.1f s); "
           "redis-server %s\n",
           ctx.a.blocks, ctx.nprompts, ctx.a.prefix, fill_s,
           have_redis ? "on loopback, same keys" : "NOT RUNNING (no baseline)");
    printf("one operation = all %u keys of a random prompt; %.1f s per side and cell in %u "
           "alternating slices after %.1f s warm-up; ratio = kvtier / this row\n",
           ctx.a.prefix, ctx.a.seconds, ctx.a.rounds, ctx.warmup);
    printf("%9s  %-14s %12s %10s %9s %9s %8s\n", "in-flight", "side", "keys/s", "ops/s", "p50 us",
           "p99 us", "ratio");
    rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof s_depths / sizeof s_depths[0]; i++)
        rc = s_cell(&ctx, ws, s_depths[i], have_redis, all);
    uint64_t handed = 0, dropped = 0, pb = 0, vl = 0;
    usleep(500 * 1000); /* the last tick's batches reach the subscriber */
    if (rc == 0 && bench_svc_events(svc_ev, &handed, &dropped, &pb, &vl) == 0)
        printf("events: %" PRIu64 " batches handed to the publisher, %" PRIu64
               " dropped; the subscriber read %" PRIu64 " protobuf and %" PRIu64 " vLLM\n",
               handed, dropped, pb, vl);
    if (!have_redis)
        rc = -1;
out:
    if (ws)
        s_workers_close(ws);
    bench_svc_stop(&svc);
    bench_svc_stop(&svc_ev);
    s_redis_stop(&redis);
    free(ws);
    free(all);
    free(ctx.keys);
    return rc < 0 ? 1 : 0;
}
