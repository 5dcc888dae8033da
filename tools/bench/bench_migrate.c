/* bench_migrate.c — `kvt-bench migrate`: demotion and promotion throughput
 * between real tier actors. A host tier actor (shm) and an nvme tier actor (a
 * preallocated O_DIRECT file in a scratch directory) serve on tcp://127.0.0.1:*,
 * and the real migrator actor runs CopySlots jobs between them the way the
 * scheduler submits demotions (sched_demote.c): N SERVING blocks are copied
 * host -> nvme (demotion), the host copies are deleted, and the nvme copies are
 * copied back into other host slots (promotion). Baselines in the same run: raw
 * sequential O_DIRECT write and read of the same bytes on the same file system
 * (bench_nvme_raw_pass). Every promoted block is read back and compared byte for
 * byte, so a copy that does nothing cannot pass; any failure is printed and the
 * part exits non-zero. Reports only; no thresholds. Removes its scratch
 * directory and shm segment at exit. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "bench.h"
#include "bus_client.h"
#include "migrator.h"
#include "tier_actor.h"
#include "tier_checksum.h"
#include "tier_uring.h"

#define S_HOST_ID 1u
#define S_NVME_ID 2u
#define S_INST "bench-migrate"
#define S_CALL_MS 60000u         /* setup and verification calls: generous, never a threshold */
#define S_DEFAULT_COPY_MS 60000u /* per copy: long enough to measure, see --copy-timeout-ms */
#define S_BATCH_BYTES (32ull << 20)
#define S_BATCH_SLOTS 64u
#define S_MAX_FAIL_LINES 8
#define S_MMAP_THRESHOLD (64 << 20) /* as the data part: block-sized buffers reuse the heap */
#define S_TRIM_THRESHOLD (1 << 30)

struct s_args {
    const char *dir;
    uint64_t total; /* bytes per block size */
    uint64_t block; /* 0: every default size */
    uint32_t qd, job_slots, in_flight, per_source, rounds;
    uint32_t copy_ms; /* tier actors' copy_timeout_ms; 0: the service's defaults */
    const char *sync; /* the nvme tier's "sync" option: dsync, fdatasync, none */
    bool default_malloc;
};

typedef struct {
    const struct s_args *a;
    const char *dir; /* the scratch directory */
    uint64_t block, n;
    zactor_t *host, *nvme, *mig;
    char host_ep[TIER_ACTOR_ENDPOINT_MAX], nvme_ep[TIER_ACTOR_ENDPOINT_MAX];
    bus_client_t *hc;  /* to the host tier actor: fill, delete, verify */
    bus_server_t *res; /* migrator results (DemoteDone) */
    bus_client_t *mc;  /* to the migrator's jobs ROUTER */
    uint32_t batch;    /* slots per fill / delete / verify request */
    uint8_t *buf;      /* batch * block */
    uint64_t *slots, *sizes, *sums;
    uint8_t (*keys)[16];
    kvtier_Envelope req, rep;
    uint32_t fail_lines;
    uint32_t round;   /* 0-based: blocks start round r in host slots s_slot(r) */
    uint32_t mig_ms;  /* the migrator's copy_timeout_ms in effect */
    double *sent_at;  /* per job (first block / job_slots): submission time */
    double job_max_s; /* slowest job of the last phase, submission to result */
    double cpu_s;     /* process CPU seconds of the last phase */
} s_env_t;

/* CPU seconds of the whole process (every actor thread and libzmq's). */
static double s_cpu(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- blocks: bytes and keys derive from (block size, id) ---- */

static void s_fill(uint8_t *p, uint64_t len, uint64_t block, uint64_t id)
{
    uint64_t x =
        0x9E3779B97F4A7C15ull ^ (block * 0x100000001B3ull) ^ (id + 1) * 0xD1B54A32D192ED03ull;
    uint64_t i = 0;
    for (; i + 8 <= len; i += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        memcpy(p + i, &x, 8);
    }
    for (; i < len; i++)
        p[i] = (uint8_t)(x >> (8 * (i & 7)));
}

static void s_key(uint64_t block, uint64_t id, uint8_t out[16])
{
    uint64_t in[2] = {block, id};
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(in, sizeof in));
    memcpy(out, c.digest, 16);
}

/* Where block `id` lies after r rounds: each round moves it by n/2 slots on both
 * tiers, so no copy ever lands on a slot that already holds the same block (a
 * copy that did nothing would leave another block's bytes there). */
static uint64_t s_slot(const s_env_t *e, uint64_t id, uint32_t r)
{
    return (id + (uint64_t)r * (e->n / 2)) % e->n;
}

/* ---- setup ---- */

/* The two tiers of the bench: a pre-faulted host tier and a fresh nvme file. */
static tier_config_t s_tier_cfg(s_env_t *e, bool host)
{
    static unsigned s_seq;
    char qd[16];
    tier_config_t t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s0", host ? "host" : "nvme");
    snprintf(t.kind, sizeof t.kind, "%s", host ? "host" : "nvme");
    t.capacity = e->n;
    t.slot_size = e->block;
    snprintf(qd, sizeof qd, "%u", e->a->qd);
    if (host) {
        snprintf(t.path, sizeof t.path, "/kvt-bench-migrate-%d-%u", (int)getpid(), s_seq++);
        (void)tier_config_set(&t, "prefault", "true");
    } else {
        snprintf(t.path, sizeof t.path, "%s/nvme0.dat", e->dir);
        (void)tier_config_set(&t, "queue_depth", qd);
        (void)tier_config_set(&t, "sync", e->a->sync);
        (void)tier_config_set(&t, "format", "true");
    }
    return t;
}

static zactor_t *s_tier_start(s_env_t *e, const tier_config_t *tc, uint32_t id, char *ep,
                              size_t eplen)
{
    tier_actor_config_t c;
    memset(&c, 0, sizeof c);
    c.tier = *tc;
    c.tier_id = id;
    c.endpoint = "tcp://127.0.0.1:*";
    c.copy_timeout_ms = e->a->copy_ms;
    /* a job's bytes fit one copy however the bounds are set */
    uint64_t inflight = (uint64_t)e->a->in_flight * e->a->job_slots * e->block;
    c.max_bytes = inflight > TIER_ACTOR_DEFAULT_MAX_BYTES ? inflight : 0;
    zactor_t *t = tier_actor_new(&c);
    if (!t || tier_actor_endpoint(t, ep, eplen) != 0) {
        fprintf(stderr,
                "migrate bench: cannot start the %s tier actor (%s, %" PRIu64 " x %" PRIu64 " B)\n",
                tc->kind, c.tier.path, e->n, e->block);
        zactor_destroy(&t);
    }
    return t;
}

static int s_env_start(s_env_t *e)
{
    static unsigned s_seq;
    e->batch = (uint32_t)(S_BATCH_BYTES / e->block);
    e->batch = e->batch < 1 ? 1 : e->batch > S_BATCH_SLOTS ? S_BATCH_SLOTS : e->batch;
    e->buf = malloc((size_t)e->batch * e->block);
    e->slots = calloc(e->batch, sizeof *e->slots);
    e->sizes = calloc(e->batch, sizeof *e->sizes);
    e->sums = calloc(e->batch, sizeof *e->sums);
    e->keys = calloc(e->batch, sizeof *e->keys);
    e->sent_at = calloc(e->n / e->a->job_slots + 1, sizeof *e->sent_at);
    if (!e->buf || !e->slots || !e->sizes || !e->sums || !e->keys || !e->sent_at)
        return -1;
    tier_config_t host = s_tier_cfg(e, true), nvme = s_tier_cfg(e, false);
    e->host = s_tier_start(e, &host, S_HOST_ID, e->host_ep, sizeof e->host_ep);
    e->nvme = s_tier_start(e, &nvme, S_NVME_ID, e->nvme_ep, sizeof e->nvme_ep);
    if (!e->host || !e->nvme)
        return -1;
    bus_client_config_t cc = {.name = "bench-migrate", .default_timeout_ms = S_CALL_MS};
    e->hc = bus_client_new(e->host_ep, &cc);
    char rep[64];
    snprintf(rep, sizeof rep, "inproc://kvt-bench-migrate-%d-%u", (int)getpid(), s_seq++);
    e->res = bus_server_new(rep, "bench-results");
    if (!e->hc || !e->res)
        return -1;
    char jobs[64];
    snprintf(jobs, sizeof jobs, "inproc://kvt-bench-migrate-jobs-%d-%u", (int)getpid(), s_seq++);
    /* the migrator's deadline stays above the tier actors' (migrator.h) */
    e->mig_ms = e->a->copy_ms ? e->a->copy_ms + e->a->copy_ms / 2 : MIGRATOR_DEFAULT_TIMEOUT_MS;
    migrator_config_t mc = {.name = "bench-migrator",
                            .endpoint = jobs,
                            .results_endpoint = rep,
                            .max_in_flight = e->a->in_flight,
                            .max_per_source = e->a->per_source,
                            .copy_timeout_ms = e->a->copy_ms ? e->mig_ms : 0};
    e->mig = migrator_new(&mc);
    if (!e->mig) {
        fprintf(stderr, "migrate bench: cannot start the migrator\n");
        return -1;
    }
    e->mc = bus_client_new(jobs, &(bus_client_config_t){.name = "bench-migrate"});
    return e->mc ? 0 : -1;
}

static void s_env_stop(s_env_t *e)
{
    bus_client_destroy(&e->mc);
    zactor_destroy(&e->mig);
    bus_server_destroy(&e->res);
    bus_client_destroy(&e->hc);
    zactor_destroy(&e->nvme);
    zactor_destroy(&e->host);
    free(e->buf);
    free(e->slots);
    free(e->sizes);
    free(e->sums);
    free(e->keys);
    free(e->sent_at);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/nvme0.dat", e->dir);
    unlink(path);
}

/* ---- the host tier through the tier plane ---- */

static int s_call(s_env_t *e, bus_arrays_t *arr, const bus_payload_t *pl, uint32_t npl,
                  bus_arrays_t *rarr, zmsg_t **payload, const char *what)
{
    kvtier_Status st = {0};
    memset(&e->rep, 0, sizeof e->rep);
    int rc = bus_client_call(e->hc, &e->req, arr, pl, npl, S_CALL_MS, &e->rep, rarr, payload, &st);
    if (rc != 0)
        fprintf(stderr, "migrate bench: %s: %s\n", what, st.message);
    return rc;
}

/* Blocks [first, first + m) into host slots of the same number, committed SERVING
 * with their checksums, as a client's put leaves them. */
static int s_fill_batch(s_env_t *e, uint64_t first, uint32_t m)
{
    bus_payload_t pl[S_BATCH_SLOTS];
    for (uint32_t k = 0; k < m; k++) {
        uint8_t *p = e->buf + (size_t)k * e->block;
        s_fill(p, e->block, e->block, first + k);
        struct iovec v = {p, e->block};
        e->slots[k] = s_slot(e, first + k, 0);
        e->sizes[k] = e->block;
        e->sums[k] = tier_checksum(&v, 1);
        s_key(e->block, first + k, e->keys[k]);
        pl[k] = (bus_payload_t){p, e->block, NULL, NULL};
    }
    bus_env_init(&e->req, kvtier_Envelope_write_slots_req_tag, "bench-migrate");
    e->req.body.write_slots_req.tier_id = S_HOST_ID;
    bus_arrays_t w = {.slots = {e->slots, m, m}, .sizes = {e->sizes, m, m}};
    if (s_call(e, &w, pl, m, NULL, NULL, "fill WriteSlots") != 0)
        return -1;
    bus_env_init(&e->req, kvtier_Envelope_put_header_req_tag, "bench-migrate");
    kvtier_PutHeaderRequest *p = &e->req.body.put_header_req;
    p->tier_id = S_HOST_ID;
    snprintf(p->instance_id, sizeof p->instance_id, "%s", S_INST);
    p->state = kvtier_LocationState_LOCATION_SERVING;
    bus_arrays_t h = {.slots = {e->slots, m, m},
                      .keys = {e->keys, m, m},
                      .sizes = {e->sizes, m, m},
                      .checksums = {e->sums, m, m}};
    return s_call(e, &h, NULL, 0, NULL, NULL, "fill PutHeader");
}

/* The demoted sources go, as the scheduler frees them after the switch (keyed). */
static int s_delete_batch(s_env_t *e, uint64_t first, uint32_t m)
{
    for (uint32_t k = 0; k < m; k++) {
        e->slots[k] = s_slot(e, first + k, e->round);
        s_key(e->block, first + k, e->keys[k]);
    }
    bus_env_init(&e->req, kvtier_Envelope_delete_slots_req_tag, "bench-migrate");
    e->req.body.delete_slots_req.tier_id = S_HOST_ID;
    bus_arrays_t d = {.slots = {e->slots, m, m}, .keys = {e->keys, m, m}};
    if (s_call(e, &d, NULL, 0, NULL, NULL, "DeleteSlots") != 0)
        return -1;
    if (e->rep.body.delete_slots_rep.deleted != m) {
        fprintf(stderr, "migrate bench: DeleteSlots deleted %u of %u host sources\n",
                e->rep.body.delete_slots_rep.deleted, m);
        return -1;
    }
    return 0;
}

/* Reads the promoted blocks [first, first + m) from their host slots by key and
 * compares every byte; returns the number that matched. */
static uint32_t s_verify_batch(s_env_t *e, uint64_t first, uint32_t m)
{
    uint64_t rsizes[S_BATCH_SLOTS];
    for (uint32_t k = 0; k < m; k++) {
        e->slots[k] = s_slot(e, first + k, e->round + 1);
        s_key(e->block, first + k, e->keys[k]);
    }
    bus_env_init(&e->req, kvtier_Envelope_read_slots_req_tag, "bench-migrate");
    e->req.body.read_slots_req.tier_id = S_HOST_ID;
    bus_arrays_t r = {.slots = {e->slots, m, m}, .keys = {e->keys, m, m}};
    bus_arrays_t rr = {.sizes = {rsizes, 0, S_BATCH_SLOTS}};
    zmsg_t *payload = NULL;
    uint32_t good = 0;
    if (s_call(e, &r, NULL, 0, &rr, &payload, "verify ReadSlots") == 0 && payload &&
        zmsg_size(payload) == m) {
        zframe_t *f = zmsg_first(payload);
        for (uint32_t k = 0; k < m; k++, f = zmsg_next(payload)) {
            s_fill(e->buf, e->block, e->block, first + k);
            bool same = zframe_size(f) == e->block && memcmp(zframe_data(f), e->buf, e->block) == 0;
            good += same;
            if (!same && e->fail_lines++ < S_MAX_FAIL_LINES)
                fprintf(stderr,
                        "migrate bench: block %" PRIu64 " in host slot %" PRIu64
                        " differs after promotion\n",
                        first + k, e->slots[k]);
        }
    }
    zmsg_destroy(&payload);
    return good;
}

typedef int (*s_batch_fn)(s_env_t *e, uint64_t first, uint32_t m);

static int s_each_batch(s_env_t *e, s_batch_fn fn)
{
    for (uint64_t i = 0; i < e->n; i += e->batch) {
        uint32_t m = e->n - i < e->batch ? (uint32_t)(e->n - i) : e->batch;
        if (fn(e, i, m) != 0)
            return -1;
    }
    return 0;
}

/* ---- the migrator ---- */

static void s_job(s_env_t *e, bool demote, uint64_t first, uint32_t m, migrator_job_t *j)
{
    memset(j, 0, sizeof *j);
    j->job_id = first;
    j->priority = demote ? MIGRATOR_DEMOTE : MIGRATOR_PREFETCH;
    j->src_tier_id = demote ? S_HOST_ID : S_NVME_ID;
    j->dst_tier_id = demote ? S_NVME_ID : S_HOST_ID;
    snprintf(j->src_endpoint, sizeof j->src_endpoint, "%.*s", MIGRATOR_ENDPOINT_MAX - 1,
             demote ? e->host_ep : e->nvme_ep);
    snprintf(j->dst_endpoint, sizeof j->dst_endpoint, "%.*s", MIGRATOR_ENDPOINT_MAX - 1,
             demote ? e->nvme_ep : e->host_ep);
    j->dst_state = kvtier_LocationState_LOCATION_SERVING;
    j->n = m;
    for (uint32_t k = 0; k < m; k++) {
        uint64_t id = first + k;
        /* round r: host s_slot(r) -> nvme s_slot(r) -> host s_slot(r + 1) */
        j->src_slots[k] = s_slot(e, id, e->round);
        j->dst_slots[k] = demote ? s_slot(e, id, e->round) : s_slot(e, id, e->round + 1);
        s_key(e->block, id, j->keys[k]);
    }
}

static void s_report_failed(s_env_t *e, const migrator_result_t *r)
{
    if (e->fail_lines++ >= S_MAX_FAIL_LINES)
        return;
    char slots[160] = "";
    size_t len = 0;
    for (uint32_t k = 0; k < r->n && len + 24 < sizeof slots; k++)
        if (!r->ok[k])
            len += (size_t)snprintf(slots + len, sizeof slots - len, " %" PRIu64, r->job_id + k);
    fprintf(stderr, "migrate bench: job %" PRIu64 " copied %u of %u (status %u: %s); failed:%s\n",
            r->job_id, r->copied, r->n, r->status, r->message, slots);
}

/* Copies every block through the migrator; seconds from the first submission to
 * the last result, or -1 (after printing why) when any block failed. */
static double s_migrate(s_env_t *e, bool demote)
{
    uint64_t next = 0, copied = 0;
    uint32_t sent = 0, received = 0;
    bool broken = false;
    migrator_job_t job; /* ~2 KiB */
    e->job_max_s = 0;
    double c0 = s_cpu();
    double t0 = s_now();
    while (!broken && (next < e->n || received < sent)) {
        if (next < e->n) {
            uint32_t m = e->n - next < e->a->job_slots ? (uint32_t)(e->n - next) : e->a->job_slots;
            char why[256];
            s_job(e, demote, next, m, &job);
            int rc = migrator_submit(e->mc, &job, 0, why, sizeof why);
            if (rc == 0) {
                e->sent_at[next / e->a->job_slots] = s_now();
                sent++;
                next += m;
                continue;
            }
            if (rc != -(int)kvtier_StatusCode_STATUS_UNAVAILABLE || received == sent) {
                fprintf(stderr, "migrate bench: submit: %s\n", why);
                broken = true;
                break;
            }
            /* the migrator's queue is full: take a result, then retry */
        }
        migrator_result_t r;
        if (migrator_result_recv(e->res, (int)e->mig_ms + 10000, &r) != 0) {
            fprintf(stderr, "migrate bench: no migrator result within %u ms\n", e->mig_ms + 10000);
            broken = true;
            break;
        }
        received++;
        copied += r.copied;
        double lat = s_now() - e->sent_at[r.job_id / e->a->job_slots];
        e->job_max_s = lat > e->job_max_s ? lat : e->job_max_s;
        if (r.copied != r.n)
            s_report_failed(e, &r);
    }
    double secs = s_now() - t0;
    e->cpu_s = s_cpu() - c0;
    if (broken || copied != e->n) {
        fprintf(stderr, "migrate bench: %s copied %" PRIu64 " of %" PRIu64 " blocks\n",
                demote ? "demotion" : "promotion", copied, e->n);
        return -1;
    }
    return secs;
}

/* ---- one block size ---- */

typedef struct {
    double w_fresh, wd_fresh, w, wd, r; /* GB/s: write, write + RWF_DSYNC (fresh file, then
                                           overwriting it), read */
} s_raw_t;

static void s_row(const char *what, uint64_t n, uint64_t bytes, double secs, double cpu)
{
    printf("  %-32s %7.0f blocks/s %6.2f GB/s %5.1f cpu-s/GB", what,
           secs > 0 ? (double)n / secs : 0.0, secs > 0 ? (double)bytes / secs / 1e9 : 0.0,
           cpu / ((double)bytes / 1e9));
}

static void s_ratio(double gbps, double base, const char *name)
{
    if (base > 0)
        printf("   %5.2fx %s", gbps / base, name);
}

/* Round r: demotion, the host sources deleted, promotion into other host slots,
 * every promoted block compared. Round 0 writes into a fresh nvme file (as the
 * fresh raw passes); later rounds overwrite SERVING nvme slots (steady state). */
static int s_round(s_env_t *e, const s_raw_t *raw)
{
    uint64_t bytes = e->n * e->block;
    bool fresh = e->round == 0, dsync = strcmp(e->a->sync, "dsync") == 0;
    double w = fresh ? raw->w_fresh : raw->w, wd = fresh ? raw->wd_fresh : raw->wd;
    char what[64];
    double dt = s_migrate(e, true);
    if (dt < 0)
        return -1;
    double djob = e->job_max_s;
    snprintf(what, sizeof what, "%u: demotion host -> nvme", e->round + 1);
    s_row(what, e->n, bytes, dt, e->cpu_s);
    s_ratio((double)bytes / dt / 1e9, dsync ? wd : w, dsync ? "raw dsync write" : "raw write");
    if (dsync)
        s_ratio((double)bytes / dt / 1e9, w, "raw write");
    printf("\n");
    fflush(stdout);
    if (s_each_batch(e, s_delete_batch) != 0)
        return -1;
    double pt = s_migrate(e, false);
    if (pt < 0)
        return -1;
    snprintf(what, sizeof what, "%u: promotion nvme -> host", e->round + 1);
    s_row(what, e->n, bytes, pt, e->cpu_s);
    s_ratio((double)bytes / pt / 1e9, raw->r, "raw read");
    printf("\n");
    uint64_t good = 0;
    for (uint64_t i = 0; i < e->n; i += e->batch)
        good += s_verify_batch(e, i, e->n - i < e->batch ? (uint32_t)(e->n - i) : e->batch);
    printf("     slowest job, submission to result (migrator queue included): demotion %.2f s, "
           "promotion %.2f s; %" PRIu64 "/%" PRIu64 " promoted blocks byte-exact\n",
           djob, e->job_max_s, good, e->n);
    fflush(stdout);
    e->round++;
    return good == e->n ? 0 : -1;
}

static int s_run_rounds(s_env_t *e, const s_raw_t *raw)
{
    double t0 = s_now();
    if (s_each_batch(e, s_fill_batch) != 0)
        return -1;
    printf("  host tier filled: %" PRIu64 " SERVING blocks in %.2f s (not timed)\n", e->n,
           s_now() - t0);
    fflush(stdout);
    for (uint32_t r = 0; r < e->a->rounds; r++)
        if (s_round(e, raw) != 0)
            return -1;
    tier_actor_stats_t hs, ns;
    if (tier_actor_stats(e->host, &hs) != 0 || tier_actor_stats(e->nvme, &ns) != 0)
        return -1;
    printf("  tier actors: copies %" PRIu64 " from host, %" PRIu64 " from nvme, refused %" PRIu64
           ", slot failures %" PRIu64 ", nvme checksum failures %" PRIu64 "\n",
           hs.copies, ns.copies, hs.copies_refused + ns.copies_refused,
           hs.copy_slot_failures + ns.copy_slot_failures, ns.checksum_failures);
    return ns.checksum_failures == 0 ? 0 : -1;
}

static int s_block_size(const struct s_args *a, const char *dir, uint64_t block)
{
    uint64_t n = a->total / block;
    if (n < 2) {
        fprintf(stderr, "migrate bench: --mib too small for %" PRIu64 " KiB blocks\n", block >> 10);
        return -1;
    }
    uint64_t bytes = n * block;
    s_raw_t raw;
    raw.w_fresh = bench_nvme_raw_pass(dir, bytes, block, a->qd, true, false, true);
    raw.wd_fresh = bench_nvme_raw_pass(dir, bytes, block, a->qd, true, true, true);
    raw.wd = bench_nvme_raw_pass(dir, bytes, block, a->qd, true, true, false);
    raw.w = bench_nvme_raw_pass(dir, bytes, block, a->qd, true, false, false);
    raw.r = bench_nvme_raw_pass(dir, bytes, block, a->qd, false, false, false);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/kvt-bench-raw.dat", dir);
    unlink(path);
    printf("%" PRIu64 " KiB blocks: %" PRIu64 " blocks, %" PRIu64 " MiB, jobs of %u blocks\n",
           block >> 10, n, bytes >> 20, a->job_slots);
    printf("  raw O_DIRECT, qd %u: write %.2f / +RWF_DSYNC %.2f GB/s (fresh file), %.2f / %.2f "
           "GB/s (overwrite); read %.2f GB/s\n",
           a->qd, raw.w_fresh, raw.wd_fresh, raw.w, raw.wd, raw.r);
    fflush(stdout);
    if (raw.w_fresh < 0 || raw.wd_fresh < 0 || raw.w < 0 || raw.wd < 0 || raw.r < 0)
        return -1;
    s_env_t *e = calloc(1, sizeof *e);
    if (!e)
        return -1;
    *e = (s_env_t){.a = a, .dir = dir, .block = block, .n = n};
    int rc = s_env_start(e) == 0 ? s_run_rounds(e, &raw) : -1;
    s_env_stop(e);
    free(e);
    return rc;
}

/* ---- options ---- */

static void s_usage(void)
{
    fprintf(stderr,
            "usage: kvt-bench migrate [--dir DIR] [--mib N] [--kib N] [--rounds N] [--qd N]\n"
            "                         [--job-slots N] [--in-flight N] [--per-source N]\n"
            "                         [--copy-timeout-ms N] [--sync dsync|fdatasync|none]\n"
            "                         [--default-malloc]\n"
            "  DIR: where the scratch directory goes (default: the current directory, as\n"
            "  the nvme part; it must support O_DIRECT). N MiB per block size (default\n"
            "  256); --kib: one block size (default 256 and 2048 KiB; 64 works too);\n"
            "  rounds of demotion + promotion (default 2: the first fills a fresh nvme\n"
            "  file, later ones overwrite). nvme queue depth default 32; jobs of 64\n"
            "  blocks; migrator 4 copies in flight, 2 per source (its defaults); copy\n"
            "  deadline per job 60000 ms (0: the service's, 5 s per copy); the nvme\n"
            "  tier's sync policy (default dsync, as the service). Like the data part it\n"
            "  sets mallopt(M_MMAP_THRESHOLD, 64 MiB) and (M_TRIM_THRESHOLD, 1 GiB) unless\n"
            "  --default-malloc (as the kvtier executable does at start).\n");
}

static int s_parse(int argc, char **argv, struct s_args *a)
{
    for (int i = 1; i < argc; i += 2) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(opt, "--default-malloc") == 0) {
            a->default_malloc = true;
            i--;
            continue;
        }
        if (!val)
            return -1;
        unsigned long long v = strtoull(val, NULL, 10);
        if (strcmp(opt, "--dir") == 0)
            a->dir = val;
        else if (strcmp(opt, "--mib") == 0)
            a->total = v << 20;
        else if (strcmp(opt, "--kib") == 0)
            a->block = v << 10;
        else if (strcmp(opt, "--qd") == 0)
            a->qd = (uint32_t)v;
        else if (strcmp(opt, "--job-slots") == 0)
            a->job_slots = (uint32_t)v;
        else if (strcmp(opt, "--in-flight") == 0)
            a->in_flight = (uint32_t)v;
        else if (strcmp(opt, "--per-source") == 0)
            a->per_source = (uint32_t)v;
        else if (strcmp(opt, "--rounds") == 0)
            a->rounds = (uint32_t)v;
        else if (strcmp(opt, "--copy-timeout-ms") == 0)
            a->copy_ms = (uint32_t)v;
        else if (strcmp(opt, "--sync") == 0 &&
                 (strcmp(val, "dsync") == 0 || strcmp(val, "fdatasync") == 0 ||
                  strcmp(val, "none") == 0))
            a->sync = val;
        else
            return -1;
    }
    bool ok = a->total && a->qd >= 1 && a->qd <= TIER_URING_DEPTH_MAX && a->job_slots >= 1 &&
              a->rounds >= 1 && a->job_slots <= MIGRATOR_MAX_JOB_SLOTS && a->in_flight >= 1 &&
              a->in_flight <= BUS_CLIENT_MAX_IN_FLIGHT && a->per_source >= 1 &&
              (a->block == 0 || a->block % 4096 == 0);
    return ok ? 0 : -1;
}

static const char *s_fs_name(const char *dir)
{
    struct statfs s;
    if (statfs(dir, &s) != 0)
        return "unknown";
    switch ((unsigned long)s.f_type) {
    case 0xEF53ul:
        return "ext4";
    case 0x58465342ul:
        return "xfs";
    case 0x9123683Eul:
        return "btrfs";
    case 0x01021994ul:
        return "tmpfs";
    case 0x794c7630ul:
        return "overlayfs";
    default:
        return "other";
    }
}

int bench_migrate(int argc, char **argv)
{
    struct s_args a = {.dir = ".",
                       .total = 256ull << 20,
                       .qd = 32,
                       .job_slots = MIGRATOR_MAX_JOB_SLOTS,
                       .in_flight = MIGRATOR_DEFAULT_IN_FLIGHT,
                       .per_source = MIGRATOR_DEFAULT_PER_SOURCE,
                       .copy_ms = S_DEFAULT_COPY_MS,
                       .rounds = 2,
                       .sync = "dsync"};
    if (s_parse(argc, argv, &a) < 0) {
        s_usage();
        return 2;
    }
    if (a.default_malloc) {
        printf("malloc: glibc defaults (--default-malloc)\n");
    } else {
        int m1 = mallopt(M_MMAP_THRESHOLD, S_MMAP_THRESHOLD);
        int m2 = mallopt(M_TRIM_THRESHOLD, S_TRIM_THRESHOLD);
        printf("malloc: mallopt(M_MMAP_THRESHOLD, 64 MiB) %s, mallopt(M_TRIM_THRESHOLD, 1 GiB) "
               "%s\n",
               m1 ? "set" : "REFUSED", m2 ? "set" : "REFUSED");
    }
    char tmpl[PATH_MAX], real[PATH_MAX];
    snprintf(tmpl, sizeof tmpl, "%s/kvt-bench-migrate-XXXXXX", a.dir);
    if (!mkdtemp(tmpl)) {
        fprintf(stderr, "migrate bench: cannot create a scratch directory in %s: %s\n", a.dir,
                strerror(errno));
        return 1;
    }
    if (!realpath(tmpl, real))
        snprintf(real, sizeof real, "%s", tmpl);
    struct stat st;
    unsigned maj = 0, min = 0;
    if (stat(real, &st) == 0)
        maj = major(st.st_dev), min = minor(st.st_dev);
    printf("migrator copies between tier actors: host (shm) <-> nvme (O_DIRECT file, sync %s, "
           "queue depth %u)\n"
           "scratch directory %s (%s, device %u:%u)\n"
           "migrator %u in flight, %u per source; copy deadline %u ms%s; ratios against the "
           "same run\n",
           a.sync, a.qd, real, s_fs_name(real), maj, min, a.in_flight, a.per_source,
           a.copy_ms ? a.copy_ms : TIER_ACTOR_DEFAULT_COPY_TIMEOUT_MS,
           a.copy_ms ? "" : " (the service's defaults)");
    static const uint64_t blocks[] = {256u << 10, 2u << 20};
    int rc = 0;
    if (a.block)
        rc = s_block_size(&a, real, a.block);
    for (size_t i = 0; !a.block && i < sizeof blocks / sizeof blocks[0] && rc == 0; i++)
        rc = s_block_size(&a, real, blocks[i]);
    if (rmdir(real) != 0)
        fprintf(stderr, "migrate bench: %s left behind: %s\n", real, strerror(errno));
    return rc < 0 ? 1 : 0;
}
