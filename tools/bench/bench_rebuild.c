/* bench_rebuild.c — `kvt-bench rebuild`: how long a new leader's scheduler takes to
 * rebuild its index from the tier actors' inventories (issue 13 §5; what a failover
 * waits for), at 100k and 1M blocks. The tiers are real tier actors on the
 * in-memory fake backend (tests/support/tier_fake.c, kind "fake"), filled with
 * SERVING headers through PutHeader; the scheduler is the real actor, started
 * fresh for every measurement, and the clock runs from the membership hand-over
 * until ClusterInfo reports every tier up (polled each millisecond) with every
 * block adopted. Baselines in the same run: the protocol before records (pages of
 * 128 InventoryEntry, one in flight: cfg.inventory_entries), and the floor of
 * decoding the same records from memory and adopting them into a slot engine (no
 * bus, no tier actor). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "bench_svc.h"
#include "bus_client.h"
#include "bus_inventory.h"
#include "bus_log.h"
#include "bus_limits.h"
#include "kvtier.h"
#include "sched_actor.h"
#include "tier_actor.h"
#include "tier_fake.h"
#include "tier_slots.h"

#define S_SLOT_SIZE 64u     /* bytes per fake slot: the bench moves headers, not bytes */
#define S_FILL_BATCH 65536u /* headers per PutHeader while filling */
#define S_POLL_MS 1         /* ClusterInfo period while waiting for the tiers */
#define S_WAIT_MS 120000    /* a rebuild that takes longer is a failure */
#define S_MAX_TIERS 8u
#define S_INSTANCE "bench-llama"

typedef struct {
    uint32_t ntiers;
    uint64_t per_tier; /* blocks (= slots) per tier */
    zactor_t *tier[S_MAX_TIERS];
    char ep[S_MAX_TIERS][256];
    uint64_t epoch[S_MAX_TIERS];
} s_fleet_t;

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void s_key(uint32_t tier, uint64_t id, uint8_t out[16])
{
    kvt_key_t k;
    bench_svc_key(0x5ca1e0000ull + tier, id, &k);
    memcpy(out, k.b, 16);
}

/* Writes SERVING headers into slots [0, n) of one tier actor. */
static int s_fill(const char *ep, uint32_t tier, uint64_t n)
{
    bus_client_config_t cc = {.name = "bench-fill", .max_in_flight = 4};
    bus_client_t *c = bus_client_new(ep, &cc);
    uint64_t *slots = calloc(S_FILL_BATCH, sizeof *slots);
    uint64_t *sizes = calloc(S_FILL_BATCH, sizeof *sizes);
    uint64_t *sums = calloc(S_FILL_BATCH, sizeof *sums);
    uint8_t(*keys)[16] = calloc(S_FILL_BATCH, 16);
    kvtier_Envelope *req = calloc(2, sizeof *req), *rep = req ? req + 1 : NULL;
    int rc = c && slots && sizes && sums && keys && req ? 0 : -1;
    for (uint64_t at = 0; rc == 0 && at < n; at += S_FILL_BATCH) {
        uint32_t m = n - at < S_FILL_BATCH ? (uint32_t)(n - at) : S_FILL_BATCH;
        for (uint32_t i = 0; i < m; i++) {
            slots[i] = at + i;
            sizes[i] = S_SLOT_SIZE;
            sums[i] = at + i + 1;
            s_key(tier, at + i, keys[i]);
        }
        bus_env_init(req, kvtier_Envelope_put_header_req_tag, "bench");
        kvtier_PutHeaderRequest *ph = &req->body.put_header_req;
        snprintf(ph->instance_id, sizeof ph->instance_id, S_INSTANCE);
        ph->state = kvtier_LocationState_LOCATION_SERVING;
        bus_arrays_t arr = {.slots = {slots, m, m},
                            .keys = {keys, m, m},
                            .sizes = {sizes, m, m},
                            .checksums = {sums, m, m}};
        kvtier_Status st;
        rc = bus_client_call(c, req, &arr, NULL, 0, 30000, rep, NULL, NULL, &st);
        if (rc == 0 && rep->body.put_header_rep.written != m)
            rc = -1, snprintf(st.message, sizeof st.message, "%u of %u headers written",
                              rep->body.put_header_rep.written, m);
        if (rc < 0)
            fprintf(stderr, "bench rebuild: PutHeader: %s\n", st.message);
    }
    bus_client_destroy(&c);
    free(slots);
    free(sizes);
    free(sums);
    free(keys);
    free(req);
    return rc;
}

static void s_fleet_stop(s_fleet_t *f)
{
    for (uint32_t i = 0; i < f->ntiers; i++)
        zactor_destroy(&f->tier[i]);
}

/* ntiers fake tier actors of per_tier slots each, every slot a SERVING block. */
static int s_fleet_start(s_fleet_t *f, uint32_t ntiers, uint64_t per_tier)
{
    memset(f, 0, sizeof *f);
    f->ntiers = ntiers;
    f->per_tier = per_tier;
    for (uint32_t i = 0; i < ntiers; i++) {
        tier_actor_config_t tc = {
            .tier_id = i + 1, .endpoint = "tcp://127.0.0.1:*", .max_slots = S_FILL_BATCH};
        snprintf(tc.tier.name, sizeof tc.tier.name, "fake%u", i);
        snprintf(tc.tier.kind, sizeof tc.tier.kind, TIER_FAKE_KIND);
        tc.tier.capacity = per_tier;
        tc.tier.slot_size = S_SLOT_SIZE;
        char v[32];
        snprintf(v, sizeof v, "%" PRIu64, per_tier * S_SLOT_SIZE + 1);
        (void)tier_config_set(&tc.tier, "max_bytes", v);
        f->tier[i] = tier_actor_new(&tc);
        if (!f->tier[i] || tier_actor_endpoint(f->tier[i], f->ep[i], sizeof f->ep[i]) != 0 ||
            s_fill(f->ep[i], i, per_tier) != 0) {
            fprintf(stderr, "bench rebuild: fake tier %u of %" PRIu64 " slots failed\n", i,
                    per_tier);
            s_fleet_stop(f);
            return -1;
        }
        f->epoch[i] = tier_actor_epoch(f->tier[i]);
    }
    return 0;
}

static zactor_t *s_sched_new(const s_fleet_t *f, uint32_t page, uint32_t in_flight, bool entries)
{
    sched_config_t sc;
    sched_config_defaults(&sc);
    snprintf(sc.cluster, sizeof sc.cluster, "bench");
    sc.n_tiers = f->ntiers;
    sc.chains[0].n_tiers = 0;
    for (uint32_t i = 0; i < f->ntiers; i++) {
        sc.tiers[i] = (sched_tier_config_t){
            .tier_id = i + 1, .capacity = f->per_tier, .slot_size = S_SLOT_SIZE};
        snprintf(sc.tiers[i].name, sizeof sc.tiers[i].name, "fake%u", i);
        snprintf(sc.tiers[i].kind, sizeof sc.tiers[i].kind, "host");
        if (i < SCHED_CHAIN_MAX_TIERS)
            sc.chains[0].tier_ids[sc.chains[0].n_tiers++] = i + 1;
    }
    sc.inventory_page = page;
    sc.inventory_in_flight = in_flight;
    sc.inventory_entries = entries;
    sc.tier_timeout_ms = 30000;
    return sched_actor_new(&sc);
}

/* Seconds from the membership hand-over until every tier is up with every block;
 * -1 on failure. */
static double s_rebuild(const s_fleet_t *f, uint32_t page, uint32_t in_flight, bool entries)
{
    zactor_t *sched = s_sched_new(f, page, in_flight, entries);
    char ep[256];
    kvt_client_t *c = NULL;
    kvt_cluster_info_t *ci = malloc(sizeof *ci);
    double secs = -1;
    if (!sched || !ci || sched_actor_endpoint(sched, ep, sizeof ep) != 0)
        goto out;
    char err[256];
    kvt_options_t o = {.coordinators = ep, .name = "bench-rebuild", .timeout_ms = 30000};
    c = kvt_connect(&o, err, sizeof err);
    if (!c || kvt_cluster_info(c, ci) != 0) { /* connected before the clock starts */
        fprintf(stderr, "bench rebuild: kvt_connect %s: %s\n", ep, c ? kvt_last_error(c) : err);
        goto out;
    }
    double t0 = s_now();
    for (uint32_t i = 0; i < f->ntiers; i++) {
        kvtier_TierInfo ti = kvtier_TierInfo_init_zero;
        ti.tier_id = i + 1;
        snprintf(ti.name, sizeof ti.name, "fake%u", i);
        snprintf(ti.endpoint, sizeof ti.endpoint, "%.*s", (int)sizeof ti.endpoint - 1, f->ep[i]);
        ti.epoch = f->epoch[i];
        ti.capacity_slots = f->per_tier;
        ti.slot_bytes = S_SLOT_SIZE;
        ti.up = true;
        if (sched_actor_tier_change(sched, true, &ti) != 0)
            goto out;
    }
    for (;;) {
        if (kvt_cluster_info(c, ci) != 0) {
            fprintf(stderr, "bench rebuild: ClusterInfo: %s\n", kvt_last_error(c));
            goto out;
        }
        uint32_t up = 0;
        uint64_t used = 0;
        for (uint32_t i = 0; i < ci->n_tiers; i++) {
            up += ci->tiers[i].up;
            used += ci->tiers[i].used;
        }
        if (up == f->ntiers) {
            secs = s_now() - t0;
            if (used != f->ntiers * f->per_tier) {
                fprintf(stderr, "bench rebuild: %" PRIu64 " of %" PRIu64 " blocks adopted\n", used,
                        f->ntiers * f->per_tier);
                secs = -1;
            }
            break;
        }
        if (s_now() - t0 > S_WAIT_MS / 1000.0) {
            fprintf(stderr, "bench rebuild: the tiers never came up\n");
            break;
        }
        zclock_sleep(S_POLL_MS);
    }
out:
    kvt_close(&c);
    free(ci);
    zactor_destroy(&sched);
    return secs;
}

/* The floor: the same blocks as records in memory (encoded before the clock
 * starts), decoded and adopted into fresh slot engines, as the scheduler does
 * with a page, without the bus and the tier actor. */
static double s_adopt_floor(const s_fleet_t *f)
{
    double total = 0;
    uint8_t *rec = malloc(f->per_tier * BUS_INVENTORY_RECORD_BYTES);
    uint32_t *sizes = calloc(f->per_tier, sizeof *sizes);
    uint64_t *sums = calloc(f->per_tier, sizeof *sums);
    uint32_t number = sched_instance_number(S_INSTANCE);
    for (uint32_t i = 0; rec && sizes && sums && i < f->ntiers; i++) {
        tier_slots_config_t sc = {.policy = "lru",
                                  .capacity = (uint32_t)f->per_tier,
                                  .max_batch = BUS_MAX_ARRAY,
                                  .hash_seed = 0x51ED270B27A3C1ull * (i + 1)};
        tier_slots_t *s = tier_slots_new(&sc);
        if (!s) {
            total = -1;
            break;
        }
        for (uint64_t k = 0; k < f->per_tier; k++) {
            bus_inv_record_t r = {.slot = k,
                                  .size = S_SLOT_SIZE,
                                  .checksum = k + 1,
                                  .instance = number,
                                  .state = kvtier_LocationState_LOCATION_SERVING};
            s_key(i, k, r.key);
            bus_inv_record_put(rec, (uint32_t)k, &r);
        }
        memset(sizes, 0, f->per_tier * sizeof *sizes); /* faulted in, as the scheduler's are */
        memset(sums, 0, f->per_tier * sizeof *sums);
        double t0 = s_now();
        for (uint64_t k = 0; k < f->per_tier; k++) {
            bus_inv_record_t r;
            bus_inv_record_get(rec, (uint32_t)k, &r);
            tier_key_t key;
            memcpy(key.b, r.key, sizeof key.b);
            if (tier_slots_adopt(s, r.instance, &key, (uint32_t)r.slot, 0, 1) == 0) {
                sizes[r.slot] = (uint32_t)r.size;
                sums[r.slot] = r.checksum;
            }
        }
        total += s_now() - t0;
        tier_slots_destroy(&s);
    }
    if (!rec || !sizes || !sums)
        total = -1;
    free(rec);
    free(sizes);
    free(sums);
    return total;
}

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Best and median of `reps` rebuilds; -1 on failure. */
static int s_measure(const s_fleet_t *f, uint32_t page, uint32_t in_flight, bool entries,
                     uint32_t reps, double *best, double *median)
{
    double v[16];
    for (uint32_t r = 0; r < reps; r++)
        if ((v[r] = s_rebuild(f, page, in_flight, entries)) < 0)
            return -1;
    qsort(v, reps, sizeof v[0], s_cmp);
    *best = v[0];
    *median = v[reps / 2];
    return 0;
}

static void s_usage(void)
{
    fprintf(stderr,
            "usage: kvt-bench rebuild [--blocks N[,N...]] [--tiers T] [--page P] [--in-flight D]\n"
            "                         [--reps R] [--after-only]\n"
            "  index rebuild from fake tier actors' inventories: records pages (P slots a window,\n"
            "  D pages in flight per tier, tiers in parallel) vs the protocol before records\n"
            "  (128-entry pages, one in flight) and the adoption floor (same blocks from memory).\n"
            "  --after-only: records only (no baselines; for a profiler)\n"
            "  defaults: --blocks 100000,1000000 --tiers 1 --page %u --in-flight %u --reps 3\n",
            SCHED_INV_PAGE_DEFAULT, SCHED_INV_IN_FLIGHT_DEFAULT);
}

int bench_rebuild(int argc, char **argv)
{
    uint64_t blocks[8] = {100000, 1000000};
    uint32_t nblocks = 2, ntiers = 1, page = SCHED_INV_PAGE_DEFAULT,
             in_flight = SCHED_INV_IN_FLIGHT_DEFAULT, reps = 3;
    bool after_only = false; /* for a profiler: no baselines, no fill in the profile's way */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--blocks") == 0 && v) {
            nblocks = 0;
            for (char *p = (char *)v; *p && nblocks < 8;) {
                blocks[nblocks++] = strtoull(p, &p, 10);
                if (*p == ',')
                    p++;
            }
            i++;
        } else if (strcmp(a, "--tiers") == 0 && v) {
            ntiers = (uint32_t)strtoul(v, NULL, 10), i++;
        } else if (strcmp(a, "--page") == 0 && v) {
            page = (uint32_t)strtoul(v, NULL, 10), i++;
        } else if (strcmp(a, "--in-flight") == 0 && v) {
            in_flight = (uint32_t)strtoul(v, NULL, 10), i++;
        } else if (strcmp(a, "--after-only") == 0) {
            after_only = true;
        } else if (strcmp(a, "--reps") == 0 && v) {
            reps = (uint32_t)strtoul(v, NULL, 10), i++;
        } else {
            s_usage();
            return strcmp(a, "--help") == 0 ? 0 : 2;
        }
    }
    if (ntiers < 1 || ntiers > S_MAX_TIERS || reps < 1 || reps > 16 || page < 1 ||
        page > BUS_MAX_INVENTORY_RECORDS || in_flight < 1 || in_flight > SCHED_INV_MAX_IN_FLIGHT) {
        fprintf(stderr,
                "kvt-bench rebuild: --tiers 1..%u, --reps 1..16, --page 1..%u, "
                "--in-flight 1..%u\n",
                S_MAX_TIERS, BUS_MAX_INVENTORY_RECORDS, SCHED_INV_MAX_IN_FLIGHT);
        return 2;
    }
    bus_log_level_t level = bus_log_level();
    if (level < BUS_LOG_WARN && !getenv("KVT_LOG_LEVEL"))
        bus_log_set_level(BUS_LOG_WARN); /* a line per scheduler start otherwise */
    if (tier_register(&tier_fake_ops) != 0 && !tier_find(TIER_FAKE_KIND)) {
        fprintf(stderr, "kvt-bench rebuild: cannot register the fake tier\n");
        return 1;
    }
    printf("index rebuild from %u fake tier actor(s), best / median of %u, records: %u-slot "
           "windows, %u in flight per tier\n",
           ntiers, reps, page, in_flight);
    printf("%10s %12s %12s %12s %12s %8s %10s\n", "blocks", "floor ms", "before ms", "after ms",
           "after med", "ratio", "Mblocks/s");
    int rc = 0;
    for (uint32_t b = 0; b < nblocks; b++) {
        s_fleet_t f;
        if (blocks[b] < ntiers || s_fleet_start(&f, ntiers, blocks[b] / ntiers) != 0) {
            rc = 1;
            continue;
        }
        uint64_t n = f.per_tier * ntiers;
        double floor = 1, old_best = 1, old_med = 1, new_best, new_med;
        if (!after_only)
            floor = s_adopt_floor(&f);
        if ((!after_only && s_measure(&f, page, in_flight, true, reps, &old_best, &old_med) != 0) ||
            s_measure(&f, page, in_flight, false, reps, &new_best, &new_med) != 0) {
            rc = 1;
        } else {
            printf("%10" PRIu64 " %12.1f %12.1f %12.1f %12.1f %7.1fx %10.2f\n", n, floor * 1e3,
                   old_best * 1e3, new_best * 1e3, new_med * 1e3, old_best / new_best,
                   (double)n / new_best / 1e6);
            printf("%10s (before median %.1f ms; after / floor %.2fx)\n", "", old_med * 1e3,
                   new_best / floor);
        }
        fflush(stdout);
        s_fleet_stop(&f);
    }
    bus_log_set_level(level);
    return rc;
}

/* ---- kvt-bench index: index memory per slot, meta-plane calls at scale ---- */

static uint64_t s_rss(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, res = 0;
    if (f) {
        if (fscanf(f, "%llu %llu", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

typedef struct {
    uint64_t slots;
    double growth; /* bytes of RSS the scheduler added with every slot adopted */
    s_fleet_t f;
    zactor_t *sched;
    char ep[256];
    kvt_client_t *c;
    uint64_t x;        /* the key stream's state */
    uint64_t calls[2]; /* 256-key lookups; 32-key prepare_get + complete_get */
    double secs[2];
} s_scale_t;

static uint64_t s_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* `secs` of one call kind on s: 0 = lookups of 256 random adopted keys (per key),
 * 1 = prepare_get + complete_get of 32 of them. */
static int s_slice(s_scale_t *s, int kind, double secs)
{
    kvt_key_t keys[256];
    bool ok[32];
    uint32_t n = kind == 0 ? 256 : 32;
    for (uint32_t i = 0; i < 32; i++)
        ok[i] = true;
    uint64_t calls = 0;
    double t0 = s_now(), t = t0;
    for (; t - t0 < secs; calls++) {
        for (uint32_t i = 0; i < n; i++)
            bench_svc_key(0x5ca1e0000ull, s_rand(&s->x) % s->slots, &keys[i]);
        if (kind == 0) {
            kvt_lookup_result_t res = {0};
            if (kvt_lookup(s->c, S_INSTANCE, NULL, KVT_LOOKUP_PER_KEY, 0, keys, n, &res) != 0 ||
                res.hit_count != n) {
                fprintf(stderr, "bench index: lookup: %s (%u hits)\n", kvt_last_error(s->c),
                        res.hit_count);
                return -1;
            }
        } else {
            kvt_token_t *tok = NULL;
            if (kvt_prepare_get(s->c, S_INSTANCE, "bench-index", keys, n, &tok) != 0 ||
                kvt_complete_get(s->c, &tok, ok) != 0) {
                fprintf(stderr, "bench index: prepare_get / complete_get: %s\n",
                        kvt_last_error(s->c));
                return -1;
            }
        }
        if ((calls & 7) == 0)
            t = s_now();
    }
    s->calls[kind] += calls;
    s->secs[kind] += s_now() - t0;
    return 0;
}

/* Mean handler time in us of `call` ("lookup", "prepare_get", ...) on the scheduler at
 * ep, from its own latency counters (a detail StatsRequest): the index's part of a
 * call, without the round trip and the client. -1 when not found. */
static double s_handler_us(const char *ep, const char *call)
{
    bus_client_config_t cc = {.name = "bench-stats", .max_in_flight = 1};
    bus_client_t *c = bus_client_new(ep, &cc);
    kvtier_Envelope *req = calloc(2, sizeof *req), *rep = req ? req + 1 : NULL;
    char cnt[64], sum[64];
    snprintf(cnt, sizeof cnt, "lat.%s.count", call);
    snprintf(sum, sizeof sum, "lat.%s.sum_us", call);
    double n = -1, us = -1;
    for (uint32_t off = 0; c && req;) {
        bus_env_init(req, kvtier_Envelope_stats_req_tag, "bench");
        req->body.stats_req.detail = true;
        req->body.stats_req.offset = off;
        kvtier_Status st;
        if (bus_client_call(c, req, NULL, NULL, 0, 10000, rep, NULL, NULL, &st) != 0)
            break;
        const kvtier_StatsReply *r = &rep->body.stats_rep;
        for (pb_size_t i = 0; i < r->counters_count; i++) {
            if (strcmp(r->counters[i].name, cnt) == 0)
                n = (double)r->counters[i].value;
            else if (strcmp(r->counters[i].name, sum) == 0)
                us = (double)r->counters[i].value;
        }
        off += r->counters_count;
        if (r->counters_count == 0 || off >= r->total)
            break;
    }
    bus_client_destroy(&c);
    free(req);
    return n > 0 && us >= 0 ? us / n : -1;
}

static void s_scale_stop(s_scale_t *s)
{
    if (s->c)
        (void)kvt_request_end(s->c, S_INSTANCE, "bench-index", NULL);
    kvt_close(&s->c);
    zactor_destroy(&s->sched);
    s_fleet_stop(&s->f);
}

/* One fake tier of `slots` blocks and a fresh scheduler rebuilt from it (RSS before
 * the scheduler starts and after every block is adopted), with a client that has
 * registered the instance and begun a request. */
static int s_scale_start(s_scale_t *s, uint64_t slots)
{
    memset(s, 0, sizeof *s);
    s->slots = slots;
    s->x = 0x9e3779b97f4a7c15ull ^ slots;
    if (s_fleet_start(&s->f, 1, slots) != 0)
        return -1;
    int rc = -1;
    uint64_t rss0 = s_rss();
    s->sched = s_sched_new(&s->f, SCHED_INV_PAGE_DEFAULT, SCHED_INV_IN_FLIGHT_DEFAULT, false);
    char err[256];
    kvt_cluster_info_t *ci = malloc(sizeof *ci);
    if (!s->sched || !ci || sched_actor_endpoint(s->sched, s->ep, sizeof s->ep) != 0)
        goto out;
    kvt_options_t o = {.coordinators = s->ep, .name = "bench-index", .timeout_ms = 30000};
    s->c = kvt_connect(&o, err, sizeof err);
    if (!s->c) {
        fprintf(stderr, "bench index: kvt_connect: %s\n", err);
        goto out;
    }
    kvtier_TierInfo ti = kvtier_TierInfo_init_zero;
    ti.tier_id = 1;
    snprintf(ti.name, sizeof ti.name, "fake0");
    snprintf(ti.endpoint, sizeof ti.endpoint, "%.*s", (int)sizeof ti.endpoint - 1, s->f.ep[0]);
    ti.epoch = s->f.epoch[0];
    ti.capacity_slots = slots;
    ti.slot_bytes = S_SLOT_SIZE;
    ti.up = true;
    if (sched_actor_tier_change(s->sched, true, &ti) != 0)
        goto out;
    double t0 = s_now();
    while (kvt_cluster_info(s->c, ci) == 0 && !(ci->n_tiers == 1 && ci->tiers[0].up) &&
           s_now() - t0 < S_WAIT_MS / 1000.0)
        zclock_sleep(10);
    if (ci->n_tiers != 1 || ci->tiers[0].used != slots) {
        fprintf(stderr, "bench index: %" PRIu64 " of %" PRIu64 " blocks adopted\n",
                ci->n_tiers ? ci->tiers[0].used : 0, slots);
        goto out;
    }
    s->growth = (double)(s_rss() - rss0);
    kvt_instance_t spec = {.instance_id = S_INSTANCE,
                           .model = "llama-bench",
                           .dtype = "fp16",
                           .tokens_per_block = 16,
                           .bytes_per_block = S_SLOT_SIZE};
    kvt_request_t rq = {.instance_id = S_INSTANCE, .request_id = "bench-index"};
    if (kvt_register_instance(s->c, &spec) != 0 || kvt_request_begin(s->c, &rq) != 0) {
        fprintf(stderr, "bench index: %s\n", kvt_last_error(s->c));
        goto out;
    }
    rc = 0;
out:
    free(ci);
    if (rc != 0)
        s_scale_stop(s);
    return rc;
}

int bench_index(int argc, char **argv)
{
    uint64_t small = 65536, large = 10000000;
    uint32_t rounds = 8;
    double slice = 0.25;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--slots") == 0 && v)
            large = strtoull(v, NULL, 10), i++;
        else if (strcmp(a, "--base") == 0 && v)
            small = strtoull(v, NULL, 10), i++;
        else if (strcmp(a, "--rounds") == 0 && v)
            rounds = (uint32_t)strtoul(v, NULL, 10), i++;
        else {
            fprintf(stderr,
                    "usage: kvt-bench index [--slots N] [--base M] [--rounds R]\n"
                    "  the scheduler's RSS growth per adopted slot and its meta-plane calls\n"
                    "  (256-key per-key lookups, 32-key prepare_get + complete_get of random\n"
                    "  adopted keys) with an index of N slots (default 10000000) vs M (default\n"
                    "  65536): one fake tier actor full of blocks each, both schedulers up,\n"
                    "  R rounds (default 8) of %.2f s slices alternating between them; the\n"
                    "  handler time is the scheduler's own (its lat.<call> counters)\n",
                    slice);
            return strcmp(a, "--help") == 0 ? 0 : 2;
        }
    }
    if (small < 1 || large <= small || large > SCHED_MAX_CAPACITY || rounds < 1) {
        fprintf(stderr, "kvt-bench index: 1 <= --base < --slots <= %llu, --rounds >= 1\n",
                (unsigned long long)SCHED_MAX_CAPACITY);
        return 2;
    }
    bus_log_level_t level = bus_log_level();
    if (level < BUS_LOG_WARN && !getenv("KVT_LOG_LEVEL"))
        bus_log_set_level(BUS_LOG_WARN);
    if (tier_register(&tier_fake_ops) != 0 && !tier_find(TIER_FAKE_KIND)) {
        fprintf(stderr, "kvt-bench index: cannot register the fake tier\n");
        return 1;
    }
    s_scale_t *s = calloc(2, sizeof *s);
    int rc = s && s_scale_start(&s[0], small) == 0 ? 0 : 1;
    if (rc == 0 && s_scale_start(&s[1], large) != 0) {
        s_scale_stop(&s[0]);
        rc = 1;
    }
    for (uint32_t r = 0; rc == 0 && r < rounds; r++)
        for (int kind = 0; rc == 0 && kind < 2; kind++)
            for (int k = 0; rc == 0 && k < 2; k++)
                rc = s_slice(&s[(r & 1) ? 1 - k : k], kind, slice);
    bus_log_set_level(level);
    if (s && rc == 0) {
        printf("scheduler index of one fake tier, every slot a block (RSS growth from before "
               "the scheduler started to the rebuilt index)\n");
        printf("%12s %10s %9s %11s %11s %11s %11s\n", "slots", "RSS MB", "B/slot", "lookups/s",
               "lookup us", "prep+cmpl/s", "prepare us");
        double rate[2][2], us[2][2];
        for (int i = 0; i < 2; i++) {
            for (int kind = 0; kind < 2; kind++)
                rate[i][kind] = (double)s[i].calls[kind] / s[i].secs[kind];
            us[i][0] = s_handler_us(s[i].ep, "lookup");
            us[i][1] = s_handler_us(s[i].ep, "prepare_get") + s_handler_us(s[i].ep, "complete_get");
            printf("%12" PRIu64 " %10.1f %9.1f %11.0f %11.1f %11.0f %11.1f\n", s[i].slots,
                   s[i].growth / 1e6, s[i].growth / (double)s[i].slots, rate[i][0], us[i][0],
                   rate[i][1], us[i][1]);
        }
        printf("per slot (slope %" PRIu64 " -> %" PRIu64 "): %.1f bytes\n", s[0].slots, s[1].slots,
               (s[1].growth - s[0].growth) / (double)(s[1].slots - s[0].slots));
        printf("at %" PRIu64 " vs %" PRIu64 ": lookups/s %.2fx (handler time %.2fx), "
               "prepare_get+complete_get/s %.2fx (handler time %.2fx)\n",
               s[1].slots, s[0].slots, rate[1][0] / rate[0][0], us[0][0] / us[1][0],
               rate[1][1] / rate[0][1], us[0][1] / us[1][1]);
    }
    if (s && rc == 0) {
        s_scale_stop(&s[1]);
        s_scale_stop(&s[0]);
    }
    free(s);
    return rc;
}
