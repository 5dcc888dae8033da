/* cli_replay.c — `kvtier replay TRACE`: the demo workload. Replays a trace as an
 * engine would: per request, look up the cached prefix of its block keys, promote
 * hits that live only below the head tier when the lookup advises it (prefetch:
 * copied tier to tier; --no-promote loads them from where they are), load the hits
 * and check every byte, write the misses with bytes derived from their keys.
 * --combined runs each request in two meta round trips instead (kvt_prepare pins
 * the prefix and reserves the misses, kvt_complete concludes both; issue 13 §2):
 * no lookup, so no promotion advice (hits load from where they are). The report
 * counts the meta round trips each request cost (kvt_meta_round_trips).
 * K worker threads (--in-flight), one libkvtier handle each (handles are
 * single-threaded), take requests in trace order.
 *
 * --log FILE writes a timeline, one line per event, wall-clock milliseconds (the
 * clock `date +%s%3N` reads, so a script can put its own events beside them):
 *   begin MS IDX            request IDX (0-based in the trace) begun
 *   end MS IDX ok|failed    and ended
 *   stored MS KEY           KEY (32 hex digits) acknowledged: its put and the
 *                           complete that commits it succeeded
 *   leader MS EPOCH         the first call any connection saw served by a leader of
 *                           a higher epoch than all before (kvt_leader_epoch after a
 *                           call that succeeded); the first line is the leader at start
 * Lines of different connections interleave; each is written whole.
 *
 * Owns: the per-worker buffers (allocated once, sized for the largest request), the
 * counters and the report. Errors of one request are counted and reported, never
 * fatal; S_ABORT_AFTER consecutive failed requests stop the replay (the service is
 * gone). Never retries a request. */
#include "cli_common.h"
#include "cli_trace.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define S_MAX_IN_FLIGHT 64
#define S_MAX_TIER_ID KVT_MAX_TIERS /* tier ids are 1..tiers of the cluster */
#define S_N_STATUS 16
#define S_WAIT_MS 60000
#define S_ABORT_AFTER 32                       /* consecutive failed requests */
#define S_MAX_WORKER_BYTES (4ull << 30)        /* data buffer per worker */
#define S_PROGRESS_TICK_NS (100 * 1000 * 1000) /* progress refresh */

enum {
    S_OPT_REQUESTS = CLI_OPT_FIRST_COMMAND_OPT,
    S_OPT_OFFSET,
    S_OPT_IN_FLIGHT,
    S_OPT_TTL,
    S_OPT_NO_PROGRESS,
    S_OPT_NO_PROMOTE,
    S_OPT_PROMOTE_WAIT,
    S_OPT_COMBINED,
    S_OPT_LOG,
};

typedef struct {
    uint64_t requests; /* 0: all from offset */
    uint64_t offset;
    uint32_t in_flight;
    uint64_t ttl_ms;
    bool no_progress;
    bool no_promote;
    uint64_t promote_wait_ms; /* a BUSY prefetch is asked again within this (0: not) */
    bool combined;            /* kvt_prepare / kvt_complete: two meta round trips */
    const char *log_path;     /* --log: the timeline (NULL: none) */
} s_args_t;

/* What each worker counts; summed at the end. */
typedef struct {
    uint64_t requests;
    uint64_t failed_requests;
    uint64_t blocks;       /* looked up */
    uint64_t hits;         /* prefix hits */
    uint64_t loaded;       /* blocks read and checked */
    uint64_t stored;       /* blocks written */
    uint64_t skipped;      /* misses already stored by someone else (prepare_put left them out) */
    uint64_t not_granted;  /* hits prepare_get did not grant (gone since the lookup) */
    uint64_t load_failed;  /* blocks a get job reported failed */
    uint64_t store_failed; /* blocks a put job reported failed */
    uint64_t verify_failures;
    uint64_t promoted;        /* hits copied up to the head tier before their load */
    uint64_t promote_failed;  /* hits whose promotion failed or was refused (loaded below) */
    uint64_t promote_retries; /* prefetches asked again after BUSY (--promote-wait) */
    uint64_t tier_hits[S_MAX_TIER_ID + 1]; /* [0]: tier ids out of range */
    uint64_t status[S_N_STATUS];           /* failed calls by status code */
    uint64_t round_trips;                  /* meta-plane requests the worker's handle sent */
} s_counts_t;

typedef struct s_shared s_shared_t;

typedef struct {
    s_shared_t *sh;
    pthread_t thread;
    kvt_client_t *c;
    kvt_key_t *keys;
    kvt_key_t *acked; /* --log: a put window's keys, kept past its complete */
    bool *hit;
    uint32_t *tier_ids;
    void **bufs;
    uint8_t *data;
    uint64_t next_job;
    uint64_t trips0; /* round trips of the connection itself */
    int consecutive_failures;
    s_counts_t n;
} s_worker_t;

struct s_shared {
    cli_common_t *o;
    const s_args_t *a;
    const cli_trace_t *trace;
    const char *trace_path;
    size_t first;
    size_t count;
    size_t max_blocks;
    atomic_size_t next;
    atomic_size_t done;
    atomic_uint_fast64_t progress_blocks;
    atomic_uint_fast64_t progress_hits;
    atomic_bool abort;
    double *lookup_ms; /* per request; NAN where the lookup (--combined: prepare) failed */
    pthread_mutex_t err_lock;
    char first_error[512];
    FILE *log; /* --log, written under log_lock */
    pthread_mutex_t log_lock;
    atomic_uint_fast64_t log_epoch; /* the highest leader epoch logged */
    s_worker_t workers[S_MAX_IN_FLIGHT];
};

/* ---- the timeline (--log) ------------------------------------------------------ */

static long long s_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One timeline line: WHAT, the time, then FMT's fields. */
static void s_log(s_shared_t *sh, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void s_log(s_shared_t *sh, const char *what, const char *fmt, ...)
{
    if (!sh->log)
        return;
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&sh->log_lock);
    fprintf(sh->log, "%s %lld ", what, s_wall_ms());
    vfprintf(sh->log, fmt, ap);
    fputc('\n', sh->log);
    fflush(sh->log);
    pthread_mutex_unlock(&sh->log_lock);
    va_end(ap);
}

/* After a call of W's handle succeeded: its leader's epoch, logged when no
 * connection saw one as high before (the first call a new leader served). */
static void s_note_leader(s_worker_t *w)
{
    s_shared_t *sh = w->sh;
    uint_fast64_t e = kvt_leader_epoch(w->c), seen = atomic_load(&sh->log_epoch);
    if (!sh->log || e == 0)
        return;
    while (e > seen)
        if (atomic_compare_exchange_weak(&sh->log_epoch, &seen, e)) {
            s_log(sh, "leader", "%llu", (unsigned long long)e);
            return;
        }
}

/* The keys of a put window that committed whole. */
static void s_log_stored(s_shared_t *sh, const kvt_key_t *keys, uint32_t n)
{
    char hex[2 * KVT_KEY_BYTES + 1];
    for (uint32_t i = 0; sh->log && i < n; i++) {
        cli_key_format_hex(&keys[i], hex);
        s_log(sh, "stored", "%s", hex);
    }
}

/* ---- one request ----------------------------------------------------------- */

static void s_fail(s_worker_t *w, size_t idx, const char *what, int rc)
{
    int code = rc < 0 ? -rc : rc;
    w->n.status[code < S_N_STATUS ? code : 0]++;
    pthread_mutex_lock(&w->sh->err_lock);
    if (!w->sh->first_error[0])
        snprintf(w->sh->first_error, sizeof w->sh->first_error, "request %zu: %s: %s: %s", idx,
                 what, kvt_status_name(rc), kvt_last_error(w->c));
    pthread_mutex_unlock(&w->sh->err_lock);
}

/* Submits a data job for TOK's keys (buffers already bound) and waits for it.
 * Returns how many keys failed (all of them when no result came back); *RC_OUT gets
 * the job's status, and *DONE whether the job ran (its buffers may be checked). */
static uint32_t s_move(s_worker_t *w, size_t idx, bool put, kvt_token_t *tok, uint32_t cnt,
                       int *rc_out, bool *done)
{
    uint64_t bs = w->sh->o->block_size;
    uint64_t job = ++w->next_job;
    int rc = put ? kvt_submit_put(w->c, job, tok, (const void *const *)w->bufs, bs)
                 : kvt_submit_get(w->c, job, tok, w->bufs, bs);
    kvt_job_result_t res = {0};
    if (rc == 0)
        rc = kvt_wait(w->c, &job, 1, S_WAIT_MS, &res);
    *done = rc == 0;
    if (rc < 0) {
        *rc_out = rc;
        s_fail(w, idx, put ? "put submit/wait" : "get submit/wait", rc);
        return cnt;
    }
    *rc_out = res.status;
    if (res.status < 0)
        s_fail(w, idx, put ? "put transfer" : "get transfer", res.status);
    uint32_t failed = res.status < 0 && res.n_failed == 0 ? cnt : res.n_failed;
    return failed < cnt ? failed : cnt;
}

/* Loads the N leading hits and checks every byte. */
static int s_load(s_worker_t *w, size_t idx, const char *rid, uint32_t n)
{
    const cli_common_t *o = w->sh->o;
    kvt_token_t *tok = NULL;
    int rc = kvt_prepare_get(w->c, o->instance, rid, w->keys, n, &tok);
    if (rc < 0) {
        s_fail(w, idx, "prepare get", rc);
        return rc;
    }
    s_note_leader(w);
    uint32_t cnt = kvt_token_count(tok);
    const kvt_key_t *tk = kvt_token_keys(tok);
    w->n.not_granted += n > cnt ? n - cnt : 0;
    int move_rc = 0;
    bool done = false;
    uint32_t failed = cnt ? s_move(w, idx, false, tok, cnt, &move_rc, &done) : 0;
    /* A key the job reports failed holds no data; only mismatches beyond those are
     * wrong bytes served as good. */
    uint32_t bad = 0;
    for (uint32_t i = 0; i < cnt && done; i++)
        bad += !cli_block_verify(&tk[i], w->bufs[i], o->block_size);
    w->n.verify_failures += bad > failed ? bad - failed : 0;
    w->n.load_failed += failed;
    w->n.loaded += cnt - failed;
    rc = kvt_complete_get(w->c, &tok, NULL);
    if (rc < 0)
        s_fail(w, idx, "complete get", rc);
    else
        s_note_leader(w);
    return move_rc < 0 ? move_rc : rc;
}

/* Writes the misses KEYS[0..N) (those not stored meanwhile). */
static int s_store(s_worker_t *w, size_t idx, const char *rid, const kvt_key_t *keys, uint32_t n)
{
    const cli_common_t *o = w->sh->o;
    kvt_token_t *tok = NULL;
    int rc = kvt_prepare_put(w->c, o->instance, rid, keys, n, &tok);
    if (rc < 0) {
        s_fail(w, idx, "prepare put", rc);
        return rc;
    }
    s_note_leader(w);
    uint32_t cnt = kvt_token_count(tok);
    const kvt_key_t *tk = kvt_token_keys(tok);
    w->n.skipped += n > cnt ? n - cnt : 0;
    for (uint32_t i = 0; i < cnt; i++)
        cli_block_fill(&tk[i], w->bufs[i], o->block_size);
    int move_rc = 0;
    bool done = false;
    uint32_t failed = cnt ? s_move(w, idx, true, tok, cnt, &move_rc, &done) : 0;
    w->n.store_failed += failed;
    w->n.stored += cnt - failed;
    bool whole = failed == 0 && move_rc == 0;
    if (whole && w->sh->log)
        memcpy(w->acked, tk, cnt * sizeof *tk);
    rc = kvt_complete_put(w->c, &tok, NULL);
    if (rc < 0) {
        s_fail(w, idx, "complete put", rc);
    } else {
        s_note_leader(w);
        if (whole)
            s_log_stored(w->sh, w->acked, cnt);
    }
    return move_rc < 0 ? move_rc : rc;
}

/* Promotes the lower-tier blocks among the N leading hits to the head tier
 * (prepare_prefetch takes only those; the copy goes tier actor to tier actor).
 * A refusal or a failed copy is counted, never fatal: the load then reads the
 * blocks where they are. */
static void s_promote(s_worker_t *w, size_t idx, const char *rid, uint32_t n)
{
    const cli_common_t *o = w->sh->o;
    kvt_token_t *tok = NULL;
    int rc = kvt_prepare_prefetch(w->c, o->instance, rid, w->keys, n, &tok);
    /* --promote-wait: BUSY means the head is demoting to make room; asked again
     * (backing off 1, 2, 4 .. 32 ms) as libkvtier does for a put */
    double give_up = cli_now() + (double)w->sh->a->promote_wait_ms / 1e3;
    for (unsigned pause = 1; rc == -KVT_BUSY && cli_now() + pause / 1e3 <= give_up;
         pause = pause < 32 ? 2 * pause : 32) {
        usleep(pause * 1000u);
        w->n.promote_retries++;
        rc = kvt_prepare_prefetch(w->c, o->instance, rid, w->keys, n, &tok);
    }
    if (rc < 0) {
        w->n.promote_failed += n;
        if (rc != -KVT_BUSY) /* BUSY: the head is making room; not an error */
            s_fail(w, idx, "prepare prefetch", rc);
        return;
    }
    uint32_t cnt = kvt_token_count(tok);
    uint64_t job = ++w->next_job;
    kvt_job_result_t res = {0};
    rc = cnt ? kvt_submit_prefetch(w->c, job, tok) : 0;
    if (rc == 0 && cnt)
        rc = kvt_wait(w->c, &job, 1, S_WAIT_MS, &res);
    if (rc < 0)
        s_fail(w, idx, "prefetch submit/wait", rc);
    uint32_t failed = rc < 0 ? cnt : res.status < 0 && res.n_failed == 0 ? cnt : res.n_failed;
    failed = failed < cnt ? failed : cnt;
    rc = kvt_complete_prefetch(w->c, &tok, NULL);
    if (rc < 0) {
        s_fail(w, idx, "complete prefetch", rc);
        failed = cnt;
    }
    w->n.promoted += cnt - failed;
    w->n.promote_failed += failed;
}

static void s_count_hits(s_worker_t *w, uint32_t h)
{
    w->n.hits += h;
    for (uint32_t i = 0; i < h; i++)
        w->n.tier_hits[w->tier_ids[i] <= S_MAX_TIER_ID ? w->tier_ids[i] : 0]++;
}

/* The hits of a combined token: loaded from where they are and checked. */
static int s_load_half(s_worker_t *w, size_t idx, kvt_token_t *g)
{
    uint32_t cnt = kvt_token_count(g);
    const kvt_key_t *tk = kvt_token_keys(g);
    int move_rc = 0;
    bool done = false;
    uint32_t failed = cnt ? s_move(w, idx, false, g, cnt, &move_rc, &done) : 0;
    uint32_t bad = 0;
    for (uint32_t i = 0; i < cnt && done; i++)
        bad += !cli_block_verify(&tk[i], w->bufs[i], w->sh->o->block_size);
    w->n.verify_failures += bad > failed ? bad - failed : 0;
    w->n.load_failed += failed;
    w->n.loaded += cnt - failed;
    return move_rc;
}

/* The misses of a combined token: filled from their keys and stored. */
static int s_store_half(s_worker_t *w, size_t idx, kvt_token_t *p)
{
    uint32_t cnt = kvt_token_count(p);
    const kvt_key_t *tk = kvt_token_keys(p);
    for (uint32_t i = 0; i < cnt; i++)
        cli_block_fill(&tk[i], w->bufs[i], w->sh->o->block_size);
    int move_rc = 0;
    bool done = false;
    uint32_t failed = cnt ? s_move(w, idx, true, p, cnt, &move_rc, &done) : 0;
    w->n.store_failed += failed;
    w->n.stored += cnt - failed;
    return move_rc;
}

/* --combined: the request's lookup, get and put in one window, two round trips. */
static int s_combined(s_worker_t *w, size_t idx, const char *rid, uint32_t n)
{
    s_shared_t *sh = w->sh;
    kvt_token_t *tok = NULL;
    kvt_prepare_info_t pi;
    double t0 = cli_now();
    int rc = kvt_prepare(w->c, sh->o->instance, rid, w->keys, n, NULL, &tok, &pi);
    if (rc < 0) {
        s_fail(w, idx, "prepare", rc);
        return rc;
    }
    s_note_leader(w);
    sh->lookup_ms[idx - sh->first] = (cli_now() - t0) * 1e3;
    kvt_token_t *g = kvt_token_half(tok, KVT_HALF_GET), *p = kvt_token_half(tok, KVT_HALF_PUT);
    uint32_t h = pi.hit_count;
    for (uint32_t i = 0; i < h; i++)
        w->tier_ids[i] = kvt_token_tier(g, i);
    w->n.blocks += n;
    s_count_hits(w, h);
    w->n.skipped += pi.skipped;
    atomic_fetch_add(&sh->progress_blocks, n);
    atomic_fetch_add(&sh->progress_hits, h);
    int err = s_load_half(w, idx, g);
    uint64_t store_failed = w->n.store_failed;
    rc = s_store_half(w, idx, p);
    bool whole = rc == 0 && w->n.store_failed == store_failed;
    uint32_t pcnt = kvt_token_count(p);
    if (whole && sh->log)
        memcpy(w->acked, kvt_token_keys(p), pcnt * sizeof *w->acked);
    err = err ? err : rc;
    rc = kvt_complete(w->c, &tok, NULL, NULL, NULL);
    if (rc < 0) {
        s_fail(w, idx, "complete", rc);
    } else {
        s_note_leader(w);
        if (whole)
            s_log_stored(sh, w->acked, pcnt);
    }
    return err ? err : rc;
}

/* One trace request, as an engine runs it. 0, or the first error. */
static int s_replay_one(s_worker_t *w, size_t idx)
{
    s_shared_t *sh = w->sh;
    const cli_common_t *o = sh->o;
    size_t n = 0;
    const uint64_t *ids = cli_trace_ids(sh->trace, idx, &n);
    char rid[96];
    cli_request_id(rid, sizeof rid, "replay");
    cli_trace_chain_keys(ids, n, w->keys);
    kvt_request_t req = {.instance_id = o->instance,
                         .request_id = rid,
                         .ttl_ms = sh->a->ttl_ms,
                         .total_blocks = (uint32_t)n};
    int rc = kvt_request_begin(w->c, &req);
    if (rc < 0) {
        s_fail(w, idx, "request begin", rc);
        return rc;
    }
    s_note_leader(w);
    kvt_lookup_result_t r = {.hit = w->hit, .tier_ids = w->tier_ids};
    memset(w->tier_ids, 0, n * sizeof *w->tier_ids);
    double t0 = cli_now();
    int err = 0;
    if (sh->a->combined)
        err = s_combined(w, idx, rid, (uint32_t)n);
    else if ((err = kvt_lookup(w->c, o->instance, rid, KVT_LOOKUP_PREFIX, 0, w->keys, (uint32_t)n,
                               &r)) == 0) {
        sh->lookup_ms[idx - sh->first] = (cli_now() - t0) * 1e3;
        s_note_leader(w);
        uint32_t h = r.hit_count < n ? r.hit_count : (uint32_t)n;
        w->n.blocks += n;
        s_count_hits(w, h);
        atomic_fetch_add(&sh->progress_blocks, n);
        atomic_fetch_add(&sh->progress_hits, h);
        if (h > 0 && r.prefetch_advised && !sh->a->no_promote)
            s_promote(w, idx, rid, h);
        if (h > 0)
            err = s_load(w, idx, rid, h);
        if (h < n) {
            rc = s_store(w, idx, rid, w->keys + h, (uint32_t)(n - h));
            err = err ? err : rc;
        }
    } else {
        s_fail(w, idx, "lookup", err);
    }
    rc = kvt_request_end(w->c, o->instance, rid, NULL);
    if (rc < 0)
        s_fail(w, idx, "request end", rc);
    else
        s_note_leader(w);
    return err ? err : rc;
}

static void *s_worker_run(void *arg)
{
    s_worker_t *w = arg;
    s_shared_t *sh = w->sh;
    while (!atomic_load(&sh->abort)) {
        size_t i = atomic_fetch_add(&sh->next, 1);
        if (i >= sh->count)
            break;
        w->n.requests++;
        s_log(sh, "begin", "%zu", sh->first + i);
        int rc = s_replay_one(w, sh->first + i);
        s_log(sh, "end", "%zu %s", sh->first + i, rc < 0 ? "failed" : "ok");
        if (rc < 0) {
            w->n.failed_requests++;
            if (++w->consecutive_failures >= S_ABORT_AFTER)
                atomic_store(&sh->abort, true);
        } else {
            w->consecutive_failures = 0;
        }
        atomic_fetch_add(&sh->done, 1);
    }
    w->n.round_trips = kvt_meta_round_trips(w->c) - w->trips0;
    return NULL;
}

/* ---- workers ------------------------------------------------------------------ */

static int s_worker_init(s_worker_t *w, s_shared_t *sh, uint32_t index)
{
    size_t mb = sh->max_blocks ? sh->max_blocks : 1;
    uint64_t bs = sh->o->block_size;
    w->sh = sh;
    w->keys = calloc(mb, sizeof *w->keys);
    w->acked = calloc(mb, sizeof *w->acked);
    w->hit = calloc(mb, sizeof *w->hit);
    w->tier_ids = calloc(mb, sizeof *w->tier_ids);
    w->bufs = calloc(mb, sizeof *w->bufs);
    w->data = malloc(mb * bs);
    if (!w->keys || !w->acked || !w->hit || !w->tier_ids || !w->bufs || !w->data) {
        fprintf(stderr, "kvtier replay: cannot allocate %zu blocks of %llu bytes\n", mb,
                (unsigned long long)bs);
        return -1;
    }
    /* Touch the buffers now: first-touch page faults would otherwise be timed. */
    memset(w->data, 0, mb * bs);
    for (size_t i = 0; i < mb; i++)
        w->bufs[i] = w->data + i * bs;
    char name[64];
    snprintf(name, sizeof name, "kvtier-replay-%u", index);
    w->c = cli_connect(sh->o, name);
    /* each connection registers the instance as an engine would (an equal spec: OK),
     * so that it tells a new leader again after a failover (kvtier.h "Failover") */
    if (!w->c || cli_register(w->c, sh->o) < 0)
        return -1;
    w->trips0 = kvt_meta_round_trips(w->c); /* the connection's own are not a request's */
    s_note_leader(w);                       /* the leader at start */
    return 0;
}

static void s_worker_fini(s_worker_t *w)
{
    kvt_close(&w->c);
    free(w->data);
    free(w->bufs);
    free(w->tier_ids);
    free(w->hit);
    free(w->acked);
    free(w->keys);
}

static void s_sum(s_counts_t *t, const s_counts_t *w)
{
    const uint64_t *src = (const uint64_t *)w;
    uint64_t *dst = (uint64_t *)t;
    for (size_t i = 0; i < sizeof *t / sizeof(uint64_t); i++)
        dst[i] += src[i];
}

/* ---- progress and report --------------------------------------------------------- */

static void s_progress(s_shared_t *sh, bool tty, int *last_decile, bool final)
{
    size_t done = atomic_load(&sh->done);
    uint64_t blocks = atomic_load(&sh->progress_blocks);
    uint64_t hits = atomic_load(&sh->progress_hits);
    double pct = sh->count ? 100.0 * (double)done / (double)sh->count : 100.0;
    double hit_pct = blocks ? 100.0 * (double)hits / (double)blocks : 0.0;
    if (tty) {
        char bar[41];
        int fill = (int)(pct * 40 / 100);
        for (int i = 0; i < 40; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[40] = '\0';
        fprintf(stderr, "\rreplay [%s] %zu/%zu %5.1f%%  hit rate %.1f%%%s", bar, done, sh->count,
                pct, hit_pct, final ? "\n" : "");
        return;
    }
    int decile = (int)(pct / 10);
    if (decile > *last_decile) {
        *last_decile = decile;
        fprintf(stderr, "replay: %3d%% (%zu/%zu requests), hit rate %.1f%%\n", decile * 10, done,
                sh->count, hit_pct);
    }
}

static int s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of the measured lookups (NAN entries skipped, array reordered). */
static void s_percentiles(double *v, size_t n, double *p50, double *p99)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i]))
            v[m++] = v[i];
    *p50 = *p99 = 0.0;
    if (!m)
        return;
    qsort(v, m, sizeof *v, s_cmp_double);
    *p50 = v[(size_t)ceil(0.50 * (double)m) - 1];
    *p99 = v[(size_t)ceil(0.99 * (double)m) - 1];
}

static void s_print_errors(const s_shared_t *sh, const s_counts_t *t)
{
    uint64_t total = 0;
    for (int i = 0; i < S_N_STATUS; i++)
        total += t->status[i];
    printf("errors        %llu failed calls", (unsigned long long)total);
    for (int i = 0; i < S_N_STATUS; i++)
        if (t->status[i])
            printf(", %s %llu", i ? kvt_status_name(i) : "OTHER", (unsigned long long)t->status[i]);
    printf("\n");
    if (sh->first_error[0])
        printf("first error   %s\n", sh->first_error);
}

static void s_print_tier_hits(const s_counts_t *t, const kvt_cluster_info_t *ci)
{
    bool printed[S_MAX_TIER_ID + 1] = {false};
    for (uint32_t i = 0; ci && i < ci->n_tiers && i < 32; i++) {
        uint32_t id = ci->tiers[i].tier_id;
        if (id == 0 || id > S_MAX_TIER_ID)
            continue;
        printf("tier %s: %llu hits\n", ci->tiers[i].name, (unsigned long long)t->tier_hits[id]);
        printed[id] = true;
    }
    for (uint32_t id = 1; id <= S_MAX_TIER_ID; id++)
        if (!printed[id] && t->tier_hits[id])
            printf("tier %u: %llu hits\n", id, (unsigned long long)t->tier_hits[id]);
    if (t->tier_hits[0])
        printf("tier ?: %llu hits (tier id out of range)\n", (unsigned long long)t->tier_hits[0]);
}

static void s_report(s_shared_t *sh, const s_counts_t *t, double secs, const kvt_cluster_info_t *ci)
{
    uint64_t bs = sh->o->block_size;
    double loaded_gb = (double)(t->loaded * bs) / 1e9;
    double stored_gb = (double)(t->stored * bs) / 1e9;
    double hit_pct = t->blocks ? 100.0 * (double)t->hits / (double)t->blocks : 0.0;
    double p50, p99;
    s_percentiles(sh->lookup_ms, sh->count, &p50, &p99);
    printf("requests      %llu replayed, %llu failed%s\n", (unsigned long long)t->requests,
           (unsigned long long)t->failed_requests,
           atomic_load(&sh->abort) ? " (ABORTED: too many consecutive failures)" : "");
    printf("blocks        %llu looked up, %llu hit (%.1f%%), %llu loaded, %llu stored, "
           "%llu already stored\n",
           (unsigned long long)t->blocks, (unsigned long long)t->hits, hit_pct,
           (unsigned long long)t->loaded, (unsigned long long)t->stored,
           (unsigned long long)t->skipped);
    printf("failures      %llu hits not granted, %llu loads failed, %llu stores failed, "
           "%llu verify failures\n",
           (unsigned long long)t->not_granted, (unsigned long long)t->load_failed,
           (unsigned long long)t->store_failed, (unsigned long long)t->verify_failures);
    printf("promotion     %llu hits copied up to the head tier before their load, %llu not "
           "(head tier busy making room, or copy failed: loaded below); %llu BUSY retries\n",
           (unsigned long long)t->promoted, (unsigned long long)t->promote_failed,
           (unsigned long long)t->promote_retries);
    printf("%s p50 %.3f ms, p99 %.3f ms\n", sh->a->combined ? "prepare      " : "lookup       ",
           p50, p99);
    uint64_t trips = t->round_trips;
    double per = t->requests ? (double)trips / (double)t->requests : 0;
    printf("meta calls    %.2f round trips per request (%s; %.2f without request "
           "begin/end), %llu in all\n",
           per,
           sh->a->combined ? "combined: prepare, complete"
                           : "lookup, prepare/complete get and put, prefetch",
           per >= 2 ? per - 2 : 0.0, (unsigned long long)trips);
    printf("data          %.2f GB loaded, %.2f GB stored in %.2f s (%.2f GB/s)\n", loaded_gb,
           stored_gb, secs, secs > 0 ? (loaded_gb + stored_gb) / secs : 0.0);
    s_print_errors(sh, t);
    s_print_tier_hits(t, ci);
    printf("replay: %llu requests, hit rate %.1f%%, loaded %.2f GB, stored %.2f GB, "
           "verify failures %llu\n",
           (unsigned long long)t->requests, hit_pct, loaded_gb, stored_gb,
           (unsigned long long)t->verify_failures);
    fflush(stdout);
}

/* ---- command ------------------------------------------------------------------- */

static int s_opt(void *ctx, int opt, const char *arg)
{
    s_args_t *a = ctx;
    uint64_t v = 0;
    switch (opt) {
    case S_OPT_REQUESTS:
        return cli_parse_u64("--requests", arg, 0, UINT32_MAX, &a->requests);
    case S_OPT_OFFSET:
        return cli_parse_u64("--offset", arg, 0, UINT32_MAX, &a->offset);
    case S_OPT_IN_FLIGHT:
        if (cli_parse_u64("--in-flight", arg, 1, S_MAX_IN_FLIGHT, &v) < 0)
            return -1;
        a->in_flight = (uint32_t)v;
        return 0;
    case S_OPT_TTL:
        return cli_parse_u64("--ttl", arg, 0, UINT64_MAX, &a->ttl_ms);
    case S_OPT_NO_PROGRESS:
        a->no_progress = true;
        return 0;
    case S_OPT_NO_PROMOTE:
        a->no_promote = true;
        return 0;
    case S_OPT_PROMOTE_WAIT:
        return cli_parse_u64("--promote-wait", arg, 0, 60000, &a->promote_wait_ms);
    case S_OPT_COMBINED:
        a->combined = true;
        return 0;
    case S_OPT_LOG:
        a->log_path = arg;
        return 0;
    default:
        return -1;
    }
}

static int s_usage(bool help)
{
    fprintf(help ? stdout : stderr,
            "usage: kvtier replay TRACE [--requests N] [--offset I] [--in-flight K] "
            "[--ttl MS] [--no-promote] [--promote-wait MS] [--combined] [--log FILE]\n"
            "  replays TRACE (traces/README.md format) as an engine would: per request,\n"
            "  look up the cached prefix, load and verify the hits, store the misses\n"
            "  --requests N   replay N requests (default: all from --offset)\n"
            "  --offset I     start at request I (0-based, default 0)\n"
            "  --in-flight K  requests in flight, one connection each (default 4, max 64)\n"
            "  --ttl MS       deadline of the blocks written (default 0: none)\n"
            "  --no-progress  no progress on stderr\n"
            "  --no-promote   load hits from the tier they are on; by default hits that\n"
            "                 live only below the head tier are prefetched up first\n"
            "  --promote-wait MS  a prefetch refused BUSY (the head is making room) is\n"
            "                 asked again within MS (default 0: loaded below at once)\n"
            "  --combined     each request in two meta round trips (kvt_prepare pins the\n"
            "                 cached prefix and reserves the misses, kvt_complete ends\n"
            "                 both): no lookup, so hits load from where they are\n"
            "  --log FILE     a timeline, wall-clock ms: begin MS IDX, end MS IDX ok|failed,\n"
            "                 stored MS KEY (acknowledged), leader MS EPOCH (the first call\n"
            "                 a leader of a higher epoch served)\n"
            "  exit 1 when a load returned wrong bytes, or the replay could not "
            "run\n" CLI_COMMON_USAGE);
    return help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}

/* Requests [first, first+count) of the trace and their largest block count. */
static int s_select(s_shared_t *sh, const s_args_t *a)
{
    size_t total = cli_trace_requests(sh->trace);
    if (a->offset >= total) {
        fprintf(stderr, "kvtier replay: --offset %llu: the trace has %zu requests\n",
                (unsigned long long)a->offset, total);
        return -1;
    }
    sh->first = (size_t)a->offset;
    sh->count = total - sh->first;
    if (a->requests && a->requests < sh->count)
        sh->count = (size_t)a->requests;
    for (size_t i = 0; i < sh->count; i++) {
        size_t n = 0;
        cli_trace_ids(sh->trace, sh->first + i, &n);
        if (n > sh->max_blocks)
            sh->max_blocks = n;
    }
    if ((uint64_t)sh->max_blocks * sh->o->block_size > S_MAX_WORKER_BYTES) {
        fprintf(stderr,
                "kvtier replay: a request of %zu blocks of %llu bytes needs more than %llu GiB "
                "of buffers per connection: lower --block-size\n",
                sh->max_blocks, (unsigned long long)sh->o->block_size,
                (unsigned long long)(S_MAX_WORKER_BYTES >> 30));
        return -1;
    }
    return 0;
}

/* Starts the workers, shows progress until they finish; the number started. */
static uint32_t s_run_workers(s_shared_t *sh, const s_args_t *a)
{
    uint32_t started = 0;
    for (; started < a->in_flight; started++) {
        s_worker_t *w = &sh->workers[started];
        if (s_worker_init(w, sh, started) < 0 ||
            pthread_create(&w->thread, NULL, s_worker_run, w) != 0) {
            s_worker_fini(w);
            atomic_store(&sh->abort, true);
            break;
        }
    }
    bool tty = isatty(STDERR_FILENO) && !a->no_progress;
    int last_decile = 0;
    while (started && atomic_load(&sh->done) < sh->count && !atomic_load(&sh->abort)) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = S_PROGRESS_TICK_NS};
        nanosleep(&ts, NULL);
        if (!a->no_progress)
            s_progress(sh, tty, &last_decile, false);
    }
    for (uint32_t i = 0; i < started; i++)
        pthread_join(sh->workers[i].thread, NULL);
    if (!a->no_progress && started)
        s_progress(sh, tty, &last_decile, true);
    return started;
}

static int s_replay(s_shared_t *sh, const s_args_t *a)
{
    kvt_cluster_info_t *ci = calloc(1, sizeof *ci);
    kvt_client_t *ctl = cli_connect(sh->o, "kvtier-replay");
    int status = CLI_EXIT_FAIL;
    if (!ci || !ctl || cli_register(ctl, sh->o) < 0)
        goto out;
    int rc = kvt_cluster_info(ctl, ci);
    if (rc < 0) {
        cli_report_error("replay", "cluster info", ctl, rc);
        goto out;
    }
    printf("replay        %zu requests of %s from #%zu, instance %s, block %llu bytes, "
           "%u in flight%s\n",
           sh->count, sh->trace_path, sh->first, sh->o->instance,
           (unsigned long long)sh->o->block_size, a->in_flight,
           a->combined ? ", combined windows" : "");
    fflush(stdout);
    double t0 = cli_now();
    uint32_t started = s_run_workers(sh, a);
    double secs = cli_now() - t0;
    s_counts_t t = {0};
    for (uint32_t i = 0; i < started; i++) {
        s_sum(&t, &sh->workers[i].n);
        s_worker_fini(&sh->workers[i]);
    }
    if (!started) {
        fprintf(stderr, "kvtier replay: no connection could be set up\n");
        goto out;
    }
    s_report(sh, &t, secs, ci);
    status = t.verify_failures || atomic_load(&sh->abort) ? CLI_EXIT_FAIL : CLI_EXIT_OK;
out:
    kvt_close(&ctl);
    free(ci);
    return status;
}

int cli_cmd_replay(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_COMMON_LONGOPTS,
        {"requests", required_argument, NULL, S_OPT_REQUESTS},
        {"offset", required_argument, NULL, S_OPT_OFFSET},
        {"in-flight", required_argument, NULL, S_OPT_IN_FLIGHT},
        {"ttl", required_argument, NULL, S_OPT_TTL},
        {"no-progress", no_argument, NULL, S_OPT_NO_PROGRESS},
        {"no-promote", no_argument, NULL, S_OPT_NO_PROMOTE},
        {"promote-wait", required_argument, NULL, S_OPT_PROMOTE_WAIT},
        {"combined", no_argument, NULL, S_OPT_COMBINED},
        {"log", required_argument, NULL, S_OPT_LOG},
        {0, 0, 0, 0}};
    cli_common_t o;
    s_args_t a = {.in_flight = 4};
    cli_common_init(&o);
    int first = cli_parse(argc, argv, "c:", longopts, &o, s_opt, &a);
    if (first < 0 || o.help || first != argc - 1)
        return s_usage(o.help);
    char err[600];
    cli_trace_t *trace = cli_trace_load(argv[first], err, sizeof err);
    if (!trace) {
        fprintf(stderr, "kvtier replay: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    int status = CLI_EXIT_FAIL;
    s_shared_t *sh = calloc(1, sizeof *sh);
    if (!sh)
        goto out;
    sh->o = &o;
    sh->a = &a;
    sh->trace = trace;
    sh->trace_path = argv[first];
    pthread_mutex_init(&sh->err_lock, NULL);
    pthread_mutex_init(&sh->log_lock, NULL);
    if (a.log_path && !(sh->log = fopen(a.log_path, "w"))) {
        fprintf(stderr, "kvtier replay: --log %s: %s\n", a.log_path, strerror(errno));
        goto out_sh;
    }
    if (s_select(sh, &a) < 0)
        goto out_sh;
    sh->lookup_ms = malloc(sh->count * sizeof *sh->lookup_ms);
    if (!sh->lookup_ms)
        goto out_sh;
    for (size_t i = 0; i < sh->count; i++)
        sh->lookup_ms[i] = NAN;
    status = s_replay(sh, &a);
out_sh:
    free(sh->lookup_ms);
    if (sh->log)
        fclose(sh->log);
    pthread_mutex_destroy(&sh->log_lock);
    pthread_mutex_destroy(&sh->err_lock);
    free(sh);
out:
    cli_trace_destroy(&trace);
    return status;
}
