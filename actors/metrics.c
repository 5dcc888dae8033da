/* metrics.c — the metrics actor (see metrics.h): a zloop with a refresh timer and
 * a sample timer; each refresh collects (coordinator: ClusterInfo and Stats over
 * its own DEALER, with a timeout; tier: what the main sent), renders every
 * document and publishes it to the HTTP server. Blocking calls are bounded by the
 * call timeout and made only on this actor's thread, which no other actor waits
 * on (its pipe messages are fire-and-forget). */
#include "metrics.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "bus_actor.h"
#include "bus_client.h"
#include "bus_limits.h"
#include "bus_log.h"
#include "metrics_expo.h"
#include "metrics_page.h"
#include "sched_actor.h"

#define S_LOG "metrics"
#define S_VERSION "0.1.0"
#define S_MAX_STATS 1024 /* counters of one detail Stats round */
#define S_INST_STATS 64  /* counters of one instance */
#define S_MAX_SAMPLES 4096
#define S_TEXT_MAX (4u << 20)

typedef struct {
    char name[BUS_STAT_NAME_MAX];
    uint64_t v;
} s_stat_t;

typedef struct {
    char id[METRICS_LABEL_VALUE_MAX];
    uint32_t n;
    s_stat_t st[S_INST_STATS];
} s_inst_t;

typedef struct {
    metrics_config_t cfg;
    char name[METRICS_NAME_MAX], cluster[64], bind[METRICS_HTTP_ADDR_MAX], sched_ep[256];
    zsock_t *pipe;
    zloop_t *loop;
    metrics_http_t *http;
    bus_client_t *client;
    kvtier_Envelope *req, *rep;
    uint32_t call_ms;
    /* coordinator: role (from the main) and the last collection */
    bool leader, sched_running;
    uint64_t epoch;
    char leader_ep[256];
    bool have_stats; /* the last Stats round succeeded */
    uint64_t failures;
    uint32_t n_stats;
    s_stat_t *stats; /* S_MAX_STATS */
    uint32_t n_inst, inst_total;
    s_inst_t *inst; /* BUS_STATS_INSTANCES_MAX */
    metrics_labelset_t inst_labels;
    uint32_t n_tiers;
    metrics_page_tier_t tiers[BUS_MAX_TIERS];
    metrics_target_t targets[METRICS_MAX_TARGETS];
    uint32_t n_targets;
    bool have_opt, opt_bad_logged;
    metrics_opt_t *opt;
    metrics_page_point_t *ring; /* cfg.samples, oldest at ring_head when full */
    uint32_t ring_n, ring_head;
    bool have_prev;
    uint64_t prev_keys, prev_hits;
    /* tier process */
    tier_actor_stats_t tst;
    bool tier_ok, registered;
    char kind[32];
    uint64_t slot_bytes;
    metrics_buf_t text;
} self_t;

/* ---- stats lookups ---- */

static const s_stat_t *s_find(const s_stat_t *st, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(st[i].name, name) == 0)
            return &st[i];
    return NULL;
}

static uint64_t s_val(const s_stat_t *st, uint32_t n, const char *name)
{
    const s_stat_t *s = s_find(st, n, name);
    return s ? s->v : 0;
}

/* ---- collection (coordinator) ---- */

static int s_call(self_t *self, kvtier_Status *st)
{
    return bus_client_call(self->client, self->req, NULL, NULL, 0, self->call_ms, self->rep, NULL,
                           NULL, st);
}

static void s_collect_info(self_t *self)
{
    kvtier_Status st;
    bus_env_init(self->req, kvtier_Envelope_cluster_info_req_tag, "metrics");
    if (s_call(self, &st) < 0 || self->rep->which_body != kvtier_Envelope_cluster_info_rep_tag)
        return;
    const kvtier_ClusterInfoReply *r = &self->rep->body.cluster_info_rep;
    self->n_tiers = 0;
    for (pb_size_t i = 0; i < r->tiers_count && i < BUS_MAX_TIERS; i++) {
        metrics_page_tier_t *t = &self->tiers[self->n_tiers++];
        const kvtier_TierInfo *ti = &r->tiers[i];
        snprintf(t->name, sizeof t->name, "%s", ti->name);
        snprintf(t->kind, sizeof t->kind, "%s", ti->kind_name);
        t->up = ti->up;
        t->used = ti->used_slots;
        t->capacity = ti->capacity_slots;
        t->slot_bytes = ti->slot_bytes;
        t->hits = 0;
        snprintf(t->pool, sizeof t->pool, "%s", ti->pool);
    }
}

/* Every page of one StatsRequest into out[0..cap); the count, or -1. */
static int s_stats_pages(self_t *self, const char *instance, bool detail, s_stat_t *out,
                         uint32_t cap, kvtier_Status *st)
{
    uint32_t n = 0, off = 0, total = 1;
    for (int pages = 0; off < total && pages < 64; pages++) {
        bus_env_init(self->req, kvtier_Envelope_stats_req_tag, "metrics");
        kvtier_StatsRequest *q = &self->req->body.stats_req;
        snprintf(q->instance_id, sizeof q->instance_id, "%s", instance);
        q->offset = off;
        q->detail = detail;
        if (s_call(self, st) < 0 || self->rep->which_body != kvtier_Envelope_stats_rep_tag)
            return -1;
        const kvtier_StatsReply *r = &self->rep->body.stats_rep;
        for (pb_size_t i = 0; i < r->counters_count && n < cap; i++) {
            snprintf(out[n].name, sizeof out[n].name, "%s", r->counters[i].name);
            out[n++].v = r->counters[i].value;
        }
        if (detail && off == 0) {
            self->inst_total = r->instance_total;
            for (pb_size_t i = 0; i < r->instance_ids_count; i++)
                (void)metrics_labelset_index(&self->inst_labels, r->instance_ids[i]);
        }
        total = r->total;
        if (r->next_offset <= off)
            break;
        off = r->next_offset;
    }
    return (int)n;
}

/* Instances first (the ones named by the last round), then the totals: a total is
 * then never below the sum of the instances read before it. */
static void s_collect_stats(self_t *self)
{
    kvtier_Status st;
    self->n_inst = 0;
    bool ok = true;
    for (uint32_t i = 0; i < self->inst_labels.n && ok; i++) {
        s_inst_t *in = &self->inst[self->n_inst];
        snprintf(in->id, sizeof in->id, "%s", self->inst_labels.values[i]);
        int n = s_stats_pages(self, in->id, false, in->st, S_INST_STATS, &st);
        if (n >= 0) {
            in->n = (uint32_t)n;
            self->n_inst++;
        } else if (st.code != kvtier_StatusCode_STATUS_NOT_FOUND) {
            ok = false; /* a former leader's instance may be unknown here: skipped */
        }
    }
    int n = ok ? s_stats_pages(self, "", true, self->stats, S_MAX_STATS, &st) : -1;
    bool was = self->have_stats;
    self->have_stats = n >= 0;
    if (n >= 0) {
        self->n_stats = (uint32_t)n;
        return;
    }
    self->n_stats = 0;
    self->n_inst = 0;
    if (self->leader) {
        self->failures++;
        if (was)
            bus_warn(S_LOG, "the scheduler does not answer Stats: %s", st.message);
    }
}

/* ---- /metrics (coordinator) ---- */

typedef struct {
    const char *stat, *metric, *help;
} s_map_t;

/* Scheduler counters whose metric is not kvtier_<stat>_total. */
static const s_map_t s_gauges[] = {
    {"blocks", "kvtier_blocks", "blocks stored over all tiers (SERVING)"},
    {"pinned", "kvtier_pinned_blocks", "stored blocks pinned by an open get window"},
    {"reserved", "kvtier_reserved_blocks", "slots reserved for writes (WRITING)"},
    {"deleting", "kvtier_deleting_blocks", "blocks DELETING, waiting for their slot to be freed"},
    {"instances", "kvtier_instances", "registered instances"},
    {"open_requests", "kvtier_open_requests", "open requests"},
    {"window_keys", "kvtier_window_keys", "keys held by open windows"},
    {"pending_puts", "kvtier_pending_puts", "complete_put replies waiting for a tier"},
    {"quota_over_instances", "kvtier_quota_over_instances",
     "instances above their quota at the last enforcement"},
    {NULL, NULL, NULL}};

static const s_map_t s_renamed[] = {
    {"hits", "kvtier_lookup_hit_keys_total", "looked-up keys found (hits)"},
    {"misses", "kvtier_lookup_miss_keys_total", "looked-up keys not found"},
    {"put_no_space", "kvtier_put_no_space_total", "prepare_put answered NO_SPACE"},
    {"put_busy", "kvtier_put_busy_total", "prepare_put answered BUSY (room being made)"},
    {"busy_refusals", "kvtier_busy_refusals_total", "requests answered BUSY"},
    {"events_dropped", "kvtier_events_dropped_total",
     "event batches dropped at the publisher's full queue (subscribers see a gap)"},
    {"events_recorded", "kvtier_events_recorded_total", "events recorded by the scheduler"},
    {"events_tokens_dropped", "kvtier_events_tokens_dropped_total",
     "puts whose token ids were not kept for the events (their pool was full)"},
    {"events_batches", "kvtier_events_batches_total", "event batches handed to the publisher"},
    {NULL, NULL, NULL}};

static const s_map_t *s_map(const s_map_t *m, const char *stat)
{
    for (; m->stat; m++)
        if (strcmp(m->stat, stat) == 0)
            return m;
    return NULL;
}

static void s_scalar_counters(self_t *self, metrics_buf_t *b)
{
    for (uint32_t i = 0; i < self->n_stats; i++) {
        const s_stat_t *s = &self->stats[i];
        if (strchr(s->name, '.'))
            continue;
        char metric[96], help[160];
        const s_map_t *g = s_map(s_gauges, s->name), *r = s_map(s_renamed, s->name);
        if (g || r) {
            snprintf(metric, sizeof metric, "%s", (g ? g : r)->metric);
            snprintf(help, sizeof help, "%s", (g ? g : r)->help);
        } else {
            snprintf(metric, sizeof metric, "kvtier_%s_total", s->name);
            snprintf(help, sizeof help, "scheduler counter %s (kvtier status)", s->name);
        }
        metrics_expo_family(b, metric, g ? "gauge" : "counter", help);
        metrics_expo_u64(b, metric, NULL, 0, s->v);
    }
}

static const struct {
    const char *what, *metric, *type, *help;
} s_tier_fams[] = {
    {"used", "kvtier_tier_used_slots", "gauge", "slots in use (stored or being written)"},
    {"capacity", "kvtier_tier_capacity_slots", "gauge", "slots of the tier"},
    {"blocks", "kvtier_tier_blocks", "gauge", "blocks stored on the tier (SERVING)"},
    {"slot_bytes", "kvtier_tier_slot_bytes", "gauge", "bytes per slot"},
    {"hits", "kvtier_tier_hits_total", "counter", "looked-up keys found on the tier"},
    {"evictions", "kvtier_tier_evictions_total", "counter", "blocks evicted by the tier policy"},
    {"up", "kvtier_tier_up", "gauge", "1 while the tier actor is registered and serving"},
};

static void s_tier_metrics(self_t *self, metrics_buf_t *b)
{
    /* tier names from the counters "tier.<name>.capacity" (a name may hold dots) */
    const char *names[BUS_MAX_TIERS];
    char store[BUS_MAX_TIERS][BUS_STAT_NAME_MAX];
    uint32_t nt = 0;
    for (uint32_t i = 0; i < self->n_stats && nt < BUS_MAX_TIERS; i++) {
        const char *n = self->stats[i].name;
        size_t l = strlen(n);
        if (strncmp(n, "tier.", 5) != 0 || l < 14 || strcmp(n + l - 9, ".capacity") != 0)
            continue;
        snprintf(store[nt], sizeof store[nt], "%.*s", (int)(l - 14), n + 5);
        names[nt] = store[nt];
        nt++;
    }
    char key[BUS_STAT_NAME_MAX + 16];
    for (size_t f = 0; f < sizeof s_tier_fams / sizeof s_tier_fams[0]; f++) {
        metrics_expo_family(b, s_tier_fams[f].metric, s_tier_fams[f].type, s_tier_fams[f].help);
        for (uint32_t t = 0; t < nt; t++) {
            snprintf(key, sizeof key, "tier.%s.%s", names[t], s_tier_fams[f].what);
            metrics_label_t l = {"tier", names[t]};
            metrics_expo_u64(b, s_tier_fams[f].metric, &l, 1,
                             s_val(self->stats, self->n_stats, key));
        }
    }
    metrics_expo_family(b, "kvtier_tier_capacity_bytes", "gauge", "capacity x slot size");
    for (uint32_t t = 0; t < nt; t++) {
        snprintf(key, sizeof key, "tier.%s.capacity", names[t]);
        uint64_t cap = s_val(self->stats, self->n_stats, key);
        snprintf(key, sizeof key, "tier.%s.slot_bytes", names[t]);
        metrics_label_t l = {"tier", names[t]};
        metrics_expo_u64(b, "kvtier_tier_capacity_bytes", &l, 1,
                         cap * s_val(self->stats, self->n_stats, key));
    }
    metrics_expo_family(b, "kvtier_tier_used_bytes", "gauge", "used slots x slot size");
    for (uint32_t t = 0; t < nt; t++) {
        snprintf(key, sizeof key, "tier.%s.used", names[t]);
        uint64_t used = s_val(self->stats, self->n_stats, key);
        snprintf(key, sizeof key, "tier.%s.slot_bytes", names[t]);
        metrics_label_t l = {"tier", names[t]};
        metrics_expo_u64(b, "kvtier_tier_used_bytes", &l, 1,
                         used * s_val(self->stats, self->n_stats, key));
    }
}

/* Pools (issue 9 §3, docs/OPERATIONS.md "Pools"), from the counters
 * "pool.<name>.{members,max,capacity,used}"; each member is a tier above too. */
static void s_pool_metrics(self_t *self, metrics_buf_t *b)
{
    static const struct {
        const char *what, *metric, *help;
    } fams[] = {
        {"members", "kvtier_pool_members", "members registered (up or recovering)"},
        {"max", "kvtier_pool_max_members", "members the pool takes at most (max_members)"},
        {"capacity", "kvtier_pool_capacity_slots", "slots of the members up, summed"},
        {"used", "kvtier_pool_used_slots", "slots in use on the members up, summed"},
    };
    char name[BUS_STAT_NAME_MAX], key[BUS_STAT_NAME_MAX + 16];
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
        metrics_expo_family(b, fams[f].metric, "gauge", fams[f].help);
        for (uint32_t i = 0; i < self->n_stats; i++) {
            const char *n = self->stats[i].name;
            size_t l = strlen(n);
            if (strncmp(n, "pool.", 5) != 0 || l < 10 || strcmp(n + l - 4, ".max") != 0)
                continue;
            snprintf(name, sizeof name, "%.*s", (int)(l - 9), n + 5);
            snprintf(key, sizeof key, "pool.%s.%s", name, fams[f].what);
            metrics_label_t lb = {"pool", name};
            metrics_expo_u64(b, fams[f].metric, &lb, 1, s_val(self->stats, self->n_stats, key));
        }
    }
}

/* Requests begun per branch, from the counters "branch.<name>.requests"
 * (docs/SCHEDULER.md "Branches"). */
static void s_branch_metrics(self_t *self, metrics_buf_t *b)
{
    metrics_expo_family(b, "kvtier_branch_requests_total", "counter",
                        "requests begun on the branch (the router's choice)");
    char name[BUS_STAT_NAME_MAX];
    for (uint32_t i = 0; i < self->n_stats; i++) {
        const char *n = self->stats[i].name;
        size_t l = strlen(n);
        if (strncmp(n, "branch.", 7) != 0 || l < 17 || strcmp(n + l - 9, ".requests") != 0)
            continue;
        snprintf(name, sizeof name, "%.*s", (int)(l - 16), n + 7);
        metrics_label_t lb = {"branch", name};
        metrics_expo_u64(b, "kvtier_branch_requests_total", &lb, 1, self->stats[i].v);
    }
}

static void s_latency(self_t *self, metrics_buf_t *b)
{
    static const uint32_t bounds_us[SCHED_LAT_BUCKETS] = SCHED_LAT_BOUNDS_US;
    double bounds[SCHED_LAT_BUCKETS];
    for (int i = 0; i < SCHED_LAT_BUCKETS; i++)
        bounds[i] = bounds_us[i] / 1e6;
    metrics_expo_family(b, "kvtier_meta_request_duration_seconds", "histogram",
                        "time the scheduler spent handling a meta-plane call, per call kind");
    char key[BUS_STAT_NAME_MAX];
    for (uint32_t c = 0; c < SCHED_LAT_CALLS; c++) {
        uint64_t buckets[SCHED_LAT_BUCKETS + 1];
        for (uint32_t i = 0; i <= SCHED_LAT_BUCKETS; i++) {
            snprintf(key, sizeof key, "lat.%s.b%u", sched_lat_call_names[c], i);
            buckets[i] = s_val(self->stats, self->n_stats, key);
        }
        snprintf(key, sizeof key, "lat.%s.sum_us", sched_lat_call_names[c]);
        double sum = (double)s_val(self->stats, self->n_stats, key) / 1e6;
        metrics_label_t l = {"call", sched_lat_call_names[c]};
        metrics_expo_histogram(b, "kvtier_meta_request_duration_seconds", &l, 1, bounds, buckets,
                               SCHED_LAT_BUCKETS, sum);
    }
}

/* The per-instance counters (sched_counters_t, the same names as the totals). */
static const char *const s_inst_counters[] = {"lookups",
                                              "lookup_keys",
                                              "hits",
                                              "misses",
                                              "gets",
                                              "get_keys",
                                              "get_not_found",
                                              "get_released",
                                              "puts",
                                              "put_keys",
                                              "put_skipped",
                                              "put_no_space",
                                              "put_busy",
                                              "puts_committed",
                                              "puts_failed",
                                              "prefetches",
                                              "prefetch_keys",
                                              "prefetch_committed",
                                              "prefetch_failed",
                                              "touched",
                                              "removed",
                                              "remove_busy",
                                              "prepares",
                                              "completes",
                                              NULL};

static void s_instance_metrics(self_t *self, metrics_buf_t *b)
{
    bool other = self->inst_total > self->n_inst; /* instances beyond the label bound */
    for (size_t k = 0; s_inst_counters[k]; k++) {
        const char *c = s_inst_counters[k];
        char metric[96];
        snprintf(metric, sizeof metric, "kvtier_instance_%s_total", c);
        char help[128];
        snprintf(help, sizeof help,
                 "%s of one instance (instance_id \"other\": the instances "
                 "beyond the label bound)",
                 c);
        metrics_expo_family(b, metric, "counter", help);
        uint64_t sum = 0;
        for (uint32_t i = 0; i < self->n_inst; i++) {
            uint64_t v = s_val(self->inst[i].st, self->inst[i].n, c);
            sum += v;
            metrics_label_t l = {"instance_id", self->inst[i].id};
            metrics_expo_u64(b, metric, &l, 1, v);
        }
        if (other) {
            uint64_t tot = s_val(self->stats, self->n_stats, c);
            metrics_label_t l = {"instance_id", "other"};
            metrics_expo_u64(b, metric, &l, 1, tot > sum ? tot - sum : 0);
        }
    }
    metrics_expo_family(b, "kvtier_instance_quota_usage_blocks", "gauge",
                        "locations of one instance over all tiers at the last quota enforcement");
    for (uint32_t i = 0; i < self->n_inst; i++) {
        metrics_label_t l = {"instance_id", self->inst[i].id};
        metrics_expo_u64(b, "kvtier_instance_quota_usage_blocks", &l, 1,
                         s_val(self->inst[i].st, self->inst[i].n, "quota_usage_blocks"));
    }
}

static void s_common(self_t *self, metrics_buf_t *b, const char *role)
{
    metrics_expo_family(b, "kvtier_build_info", "gauge", "1, labelled with the version and role");
    metrics_label_t l[] = {{"version", S_VERSION}, {"role", role}};
    metrics_expo_u64(b, "kvtier_build_info", l, 2, 1);
    metrics_http_stats_t hs;
    metrics_http_stats(self->http, &hs);
    metrics_expo_family(b, "kvtier_http_requests_total", "counter",
                        "HTTP requests answered by this process's metrics server");
    metrics_expo_u64(b, "kvtier_http_requests_total", NULL, 0, hs.requests);
    metrics_expo_family(b, "kvtier_http_refused_total", "counter",
                        "HTTP requests refused (404, 405, 414)");
    metrics_expo_u64(b, "kvtier_http_refused_total", NULL, 0, hs.not_found + hs.refused);
}

static void s_optimizer_metrics(self_t *self, metrics_buf_t *b)
{
    if (!self->have_opt)
        return;
    const metrics_opt_t *o = self->opt;
    const struct {
        const char *m, *h;
        double v;
    } g[] = {
        {"kvtier_optimizer_live_hit_ratio", "the optimizer's live hit rate (retrospective)",
         o->live},
        {"kvtier_optimizer_lru_hit_ratio", "LRU at the same capacity over the same window", o->lru},
        {"kvtier_optimizer_belady_hit_ratio", "the Belady reference over the same window",
         o->belady},
        {"kvtier_optimizer_capacity_blocks", "the capacity the optimizer evaluated",
         (double)o->capacity_blocks},
        {"kvtier_optimizer_window_requests", "requests in the optimizer's window",
         (double)o->window_requests},
        {"kvtier_optimizer_timestamp_seconds", "when the optimizer wrote its figures",
         (double)o->ts_ms / 1000.0}};
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        metrics_expo_family(b, g[i].m, "gauge", g[i].h);
        metrics_expo_double(b, g[i].m, NULL, 0, g[i].v);
    }
}

static void s_render_coordinator(self_t *self, metrics_buf_t *b)
{
    s_common(self, b, "coordinator");
    metrics_expo_family(b, "kvtier_leader", "gauge", "1 when this coordinator is the leader");
    metrics_label_t l = {"coordinator", self->name};
    metrics_expo_u64(b, "kvtier_leader", &l, 1, self->leader);
    metrics_expo_family(b, "kvtier_leader_epoch", "gauge",
                        "the leader's epoch as this coordinator knows it (0: none)");
    metrics_expo_u64(b, "kvtier_leader_epoch", NULL, 0, self->epoch);
    metrics_expo_family(b, "kvtier_scheduler_running", "gauge",
                        "1 when this coordinator runs the scheduler");
    metrics_expo_u64(b, "kvtier_scheduler_running", NULL, 0, self->sched_running);
    metrics_expo_family(b, "kvtier_metrics_collect_failures_total", "counter",
                        "refreshes in which the leader's scheduler did not answer Stats");
    metrics_expo_u64(b, "kvtier_metrics_collect_failures_total", NULL, 0, self->failures);
    if (self->have_stats) {
        s_scalar_counters(self, b);
        s_tier_metrics(self, b);
        s_pool_metrics(self, b);
        s_branch_metrics(self, b);
        s_latency(self, b);
        s_instance_metrics(self, b);
    }
    s_optimizer_metrics(self, b);
}

/* ---- /metrics (tier process) ---- */

static void s_render_tier(self_t *self, metrics_buf_t *b)
{
    s_common(self, b, "tier");
    metrics_label_t l = {"tier", self->name};
    const tier_actor_stats_t *s = &self->tst;
    const struct {
        const char *m, *type, *h;
        uint64_t v;
    } f[] = {
        {"kvtier_tier_actor_up", "gauge", "1 when the tier actor answered its last stats ask",
         self->tier_ok},
        {"kvtier_tier_registered", "gauge", "1 while the tier is registered in etcd",
         self->registered},
        {"kvtier_tier_actor_requests_total", "counter", "tier-plane requests handled", s->requests},
        {"kvtier_tier_actor_errors_total", "counter", "requests answered with an error", s->errors},
        {"kvtier_tier_actor_rejected_total", "counter", "input refused before any handler",
         s->rejected},
        {"kvtier_tier_actor_slots_written_total", "counter", "slots written", s->slots_written},
        {"kvtier_tier_actor_written_bytes_total", "counter", "bytes written", s->bytes_written},
        {"kvtier_tier_actor_slots_read_total", "counter", "slots read", s->slots_read},
        {"kvtier_tier_actor_read_bytes_total", "counter", "bytes read", s->bytes_read},
        {"kvtier_tier_actor_headers_put_total", "counter", "slot headers written", s->headers_put},
        {"kvtier_tier_actor_slots_deleted_total", "counter", "slot headers emptied",
         s->slots_deleted},
        {"kvtier_tier_actor_probes_total", "counter", "slots probed", s->probes},
        {"kvtier_tier_actor_inventory_pages_total", "counter", "inventory pages served",
         s->inventory_pages},
        {"kvtier_tier_actor_checksum_failures_total", "counter", "reads refused for a bad checksum",
         s->checksum_failures},
        {"kvtier_tier_actor_arrivals_verified_total", "counter",
         "blocks that arrived over the network checked against their checksum at commit",
         s->arrivals_verified},
        {"kvtier_tier_actor_drops_noticed_total", "counter",
         "dropped blocks told to the scheduler at once", s->drops_noticed},
        {"kvtier_tier_actor_drops_unnoticed_total", "counter",
         "dropped blocks no scheduler could be told of (the gc finds them)", s->drops_unnoticed},
        {"kvtier_tier_actor_copies_total", "counter", "tier-to-tier copies accepted", s->copies},
        {"kvtier_tier_actor_copies_refused_total", "counter", "copies refused at the bounds",
         s->copies_refused},
        {"kvtier_tier_actor_slots_copied_total", "counter", "slots copied", s->slots_copied},
        {"kvtier_tier_actor_copy_slot_failures_total", "counter", "slots whose copy failed",
         s->copy_slot_failures},
        {"kvtier_tier_actor_ucx_written_bytes_total", "counter",
         "bytes written from UCX staging regions (transport ucx)", s->ucx_bytes_written},
        {"kvtier_tier_actor_ucx_read_bytes_total", "counter",
         "bytes read into UCX staging regions (transport ucx)", s->ucx_bytes_read},
        {"kvtier_tier_actor_ucx_regions_granted_total", "counter",
         "UCX staging regions handed to peers", s->ucx_regions_granted},
        {"kvtier_tier_actor_ucx_copy_bytes_total", "counter",
         "copy bytes this tier actor put into destinations over UCX", s->ucx_copy_bytes},
        {"kvtier_tier_actor_capacity_slots", "gauge", "slots of the tier", s->capacity},
        {"kvtier_tier_actor_used_slots", "gauge", "SERVING slots", s->used_slots},
        {"kvtier_tier_actor_capacity_bytes", "gauge", "capacity x slot size",
         s->capacity * self->slot_bytes},
        {"kvtier_tier_actor_used_bytes", "gauge", "SERVING slots x slot size",
         s->used_slots * self->slot_bytes},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        metrics_expo_family(b, f[i].m, f[i].type, f[i].h);
        metrics_expo_u64(b, f[i].m, &l, 1, f[i].v);
    } /* one series per reason: their sum is every refusal (docs/SECURITY.md) */
    const char *rm = "kvtier_tier_actor_token_refusals_total";
    metrics_expo_family(b, rm, "counter", "requests refused for their token, by reason");
    for (uint32_t r = 0; r < TIER_REFUSAL_COUNT; r++) {
        metrics_label_t rl[2] = {l, {"reason", tier_refusal_name((tier_refusal_t)r)}};
        metrics_expo_u64(b, rm, rl, 2, s->refusals[r]);
    }
    metrics_expo_family(b, "kvtier_tier_actor_leader_epoch", "gauge",
                        "highest leader epoch of a token this tier accepted (its fence)");
    metrics_expo_u64(b, "kvtier_tier_actor_leader_epoch", &l, 1, s->leader_seen);
}

/* ---- the other documents ---- */

static void s_publish(self_t *self, const char *path, unsigned status, const char *ctype,
                      const metrics_buf_t *b)
{
    if (metrics_http_publish(self->http, path, status, ctype, b->buf ? b->buf : "", b->len) < 0)
        bus_warn(S_LOG, "cannot publish %s (out of memory)", path);
}

static void s_readyz(self_t *self)
{
    metrics_buf_t *b = &self->text;
    metrics_buf_reset(b);
    bool ready;
    if (self->cfg.role == METRICS_ROLE_TIER) {
        ready = self->tier_ok && self->registered;
        metrics_buf_printf(b, "%s: tier %s%s\n", ready ? "ready" : "not ready", self->name,
                           ready            ? " serving and registered"
                           : !self->tier_ok ? ": the tier actor does not answer"
                                            : ": not registered in etcd");
    } else if (self->leader) {
        ready = self->sched_running && self->have_stats;
        metrics_buf_printf(b, "%s: leader, epoch %" PRIu64 "%s\n", ready ? "ready" : "not ready",
                           self->epoch,
                           ready                  ? ", scheduler serving"
                           : !self->sched_running ? ", but the scheduler is not running"
                                                  : ", but the scheduler does not answer Stats");
    } else {
        ready = self->epoch != 0;
        if (ready)
            metrics_buf_printf(b, "ready: standby, leader epoch %" PRIu64 " at %s\n", self->epoch,
                               self->leader_ep);
        else
            metrics_buf_puts(b, "not ready: standby, no leader known\n");
    }
    s_publish(self, "/readyz", ready ? 200 : 503, "text/plain; charset=utf-8", b);
}

static void s_sd(self_t *self)
{
    json_t *arr = json_array();
    const char *me = metrics_http_address(self->http);
    bool listed = false;
    for (uint32_t i = 0; i < self->n_targets; i++)
        listed |= strcmp(self->targets[i].address, me) == 0;
    for (uint32_t i = 0; i <= self->n_targets; i++) {
        const char *role, *name, *addr;
        if (i == self->n_targets) {
            if (listed)
                break;
            role = "coordinator", name = self->name, addr = me;
        } else {
            role = self->targets[i].role, name = self->targets[i].name;
            addr = self->targets[i].address;
        }
        json_t *g =
            json_pack("{s:[s], s:{s:s, s:s, s:s}}", "targets", addr, "labels", "kvtier_cluster",
                      self->cluster, "kvtier_role", role, "kvtier_process", name);
        if (g)
            json_array_append_new(arr, g);
    }
    char *s = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    if (s) {
        (void)metrics_http_publish(self->http, "/sd", 200, "application/json", s, strlen(s));
        free(s);
    }
}

static void s_page(self_t *self)
{
    metrics_page_tier_t tiers[BUS_MAX_TIERS];
    memcpy(tiers, self->tiers, sizeof tiers[0] * self->n_tiers);
    char key[128];
    for (uint32_t i = 0; i < self->n_tiers; i++) {
        snprintf(key, sizeof key, "tier.%.63s.hits", tiers[i].name);
        tiers[i].hits = s_val(self->stats, self->n_stats, key);
    }
    metrics_page_point_t *pts = calloc(self->ring_n ? self->ring_n : 1, sizeof *pts);
    if (!pts)
        return;
    for (uint32_t i = 0; i < self->ring_n; i++)
        pts[i] = self->ring[(self->ring_head + i) % self->cfg.samples];
    metrics_page_t p = {.cluster = self->cluster,
                        .name = self->name,
                        .leader = self->leader,
                        .epoch = self->epoch,
                        .leader_ep = self->leader_ep,
                        .have_stats = self->have_stats,
                        .lookups = s_val(self->stats, self->n_stats, "lookups"),
                        .lookup_keys = s_val(self->stats, self->n_stats, "lookup_keys"),
                        .hits = s_val(self->stats, self->n_stats, "hits"),
                        .tiers = tiers,
                        .n_tiers = self->n_tiers,
                        .points = pts,
                        .n_points = self->ring_n,
                        .sample_ms = self->cfg.sample_ms,
                        .opt = self->have_opt ? self->opt : NULL,
                        .now_ms = zclock_time(),
                        .refresh_s = 10};
    metrics_buf_t *b = &self->text;
    metrics_buf_reset(b);
    metrics_page_render(b, &p);
    free(pts);
    s_publish(self, "/", 200, "text/html; charset=utf-8", b);
}

static void s_render(self_t *self)
{
    metrics_buf_t *b = &self->text;
    metrics_buf_reset(b);
    if (self->cfg.role == METRICS_ROLE_TIER)
        s_render_tier(self, b);
    else
        s_render_coordinator(self, b);
    if (b->overflow)
        bus_warn(S_LOG, "/metrics cut at %zu bytes", b->len);
    s_publish(self, "/metrics", 200, "text/plain; version=0.0.4; charset=utf-8", b);
    s_readyz(self);
    if (self->cfg.role == METRICS_ROLE_COORDINATOR) {
        s_sd(self);
        s_page(self);
    }
}

/* ---- timers ---- */

static int s_on_refresh(zloop_t *loop, int timer_id, void *arg)
{
    (void)loop;
    (void)timer_id;
    self_t *self = arg;
    if (self->client) {
        s_collect_info(self);
        s_collect_stats(self);
    }
    s_render(self);
    return 0;
}

static void s_ring_push(self_t *self, metrics_page_point_t pt)
{
    uint32_t cap = self->cfg.samples;
    if (self->ring_n < cap)
        self->ring[(self->ring_head + self->ring_n++) % cap] = pt;
    else {
        self->ring[self->ring_head] = pt;
        self->ring_head = (self->ring_head + 1) % cap;
    }
}

static int s_on_sample(zloop_t *loop, int timer_id, void *arg)
{
    (void)loop;
    (void)timer_id;
    self_t *self = arg;
    metrics_page_point_t pt = {.t_ms = zclock_time()};
    if (self->have_stats) {
        uint64_t keys = s_val(self->stats, self->n_stats, "lookup_keys");
        uint64_t hits = s_val(self->stats, self->n_stats, "hits");
        if (self->have_prev && keys > self->prev_keys && hits >= self->prev_hits) {
            pt.valid = true;
            pt.rate = (double)(hits - self->prev_hits) / (double)(keys - self->prev_keys);
        }
        self->have_prev = true; /* counters that went back (a new leader): a new baseline */
        self->prev_keys = keys;
        self->prev_hits = hits;
    } else {
        self->have_prev = false;
    }
    s_ring_push(self, pt);
    return 0;
}

/* ---- pipe ---- */

/* The pipe's commands carry arguments, so they are read here whole (one message:
 * the command, then its frames) rather than through bus_actor_pipe_cmds. */
static void s_cmd_role(self_t *self, zmsg_t *m)
{
    char *leader = zmsg_popstr(m), *running = zmsg_popstr(m), *epoch = zmsg_popstr(m);
    char *ep = zmsg_popstr(m);
    if (leader && running && epoch && ep) {
        self->leader = leader[0] == '1';
        self->sched_running = running[0] == '1';
        self->epoch = strtoull(epoch, NULL, 10);
        snprintf(self->leader_ep, sizeof self->leader_ep, "%s", ep);
        s_readyz(self);
    }
    zstr_free(&leader);
    zstr_free(&running);
    zstr_free(&epoch);
    zstr_free(&ep);
}

static void s_cmd_tier(self_t *self, zmsg_t *m)
{
    zframe_t *st = zmsg_pop(m);
    char *flags = zmsg_popstr(m), *kind = zmsg_popstr(m), *slot = zmsg_popstr(m);
    if (st && flags && kind && slot && strlen(flags) == 2) {
        self->tier_ok = flags[0] == '1' && zframe_size(st) == sizeof self->tst;
        if (self->tier_ok)
            memcpy(&self->tst, zframe_data(st), sizeof self->tst);
        self->registered = flags[1] == '1';
        snprintf(self->kind, sizeof self->kind, "%s", kind);
        self->slot_bytes = strtoull(slot, NULL, 10);
    }
    zframe_destroy(&st);
    zstr_free(&flags);
    zstr_free(&kind);
    zstr_free(&slot);
}

static void s_cmd_targets(self_t *self, zmsg_t *m)
{
    zframe_t *f = zmsg_pop(m);
    if (f && zframe_size(f) % sizeof(metrics_target_t) == 0) {
        size_t n = zframe_size(f) / sizeof(metrics_target_t);
        self->n_targets = (uint32_t)(n > METRICS_MAX_TARGETS ? METRICS_MAX_TARGETS : n);
        memcpy(self->targets, zframe_data(f), self->n_targets * sizeof(metrics_target_t));
        for (uint32_t i = 0; i < self->n_targets; i++) { /* terminated whatever was sent */
            metrics_target_t *t = &self->targets[i];
            t->role[sizeof t->role - 1] = t->name[sizeof t->name - 1] = '\0';
            t->address[sizeof t->address - 1] = '\0';
        }
    }
    zframe_destroy(&f);
}

static void s_cmd_optimizer(self_t *self, zmsg_t *m)
{
    zframe_t *f = zmsg_pop(m);
    if (!f)
        return;
    if (zframe_size(f) == 0) {
        self->have_opt = false;
    } else {
        char why[160];
        if (metrics_opt_parse((const char *)zframe_data(f), zframe_size(f), self->opt, why,
                              sizeof why) == 0) {
            self->have_opt = true;
            self->opt_bad_logged = false;
        } else {
            self->have_opt = false;
            if (!self->opt_bad_logged)
                bus_warn(S_LOG, "the optimizer's record is ignored: %s", why);
            self->opt_bad_logged = true;
        }
    }
    zframe_destroy(&f);
}

static int s_on_pipe(zloop_t *loop, zsock_t *pipe, void *arg)
{
    (void)loop;
    self_t *self = arg;
    zmsg_t *m = zmsg_recv(pipe);
    if (!m)
        return -1;
    char *cmd = zmsg_popstr(m);
    int rc = 0;
    if (!cmd || streq(cmd, "$TERM"))
        rc = -1;
    else if (streq(cmd, "ADDRESS"))
        zstr_send(pipe, metrics_http_address(self->http));
    else if (streq(cmd, "ROLE"))
        s_cmd_role(self, m);
    else if (streq(cmd, "TIER"))
        s_cmd_tier(self, m);
    else if (streq(cmd, "TARGETS"))
        s_cmd_targets(self, m);
    else if (streq(cmd, "OPTIMIZER"))
        s_cmd_optimizer(self, m);
    else
        bus_warn(S_LOG, "unknown pipe command '%s' ignored", cmd);
    zstr_free(&cmd);
    zmsg_destroy(&m);
    return rc;
}

/* ---- construction ---- */

static void s_self_destroy(self_t **p)
{
    self_t *self = *p;
    if (!self)
        return;
    metrics_http_destroy(&self->http); /* first: its thread reads nothing more */
    zloop_destroy(&self->loop);
    bus_client_destroy(&self->client);
    free(self->req);
    free(self->rep);
    free(self->stats);
    free(self->inst);
    free(self->opt);
    free(self->ring);
    metrics_buf_free(&self->text);
    free(self);
    *p = NULL;
}

static int s_copy_cfg(self_t *self, const metrics_config_t *cfg)
{
    self->cfg = *cfg;
    snprintf(self->name, sizeof self->name, "%s", cfg->name ? cfg->name : "kvtier");
    snprintf(self->cluster, sizeof self->cluster, "%s", cfg->cluster ? cfg->cluster : "kvtier");
    snprintf(self->bind, sizeof self->bind, "%s", cfg->bind ? cfg->bind : "");
    snprintf(self->sched_ep, sizeof self->sched_ep, "%s",
             cfg->sched_endpoint ? cfg->sched_endpoint : "");
    metrics_config_t *c = &self->cfg;
    c->refresh_ms = c->refresh_ms ? c->refresh_ms : 1000;
    c->sample_ms = c->sample_ms ? c->sample_ms : 5000;
    c->samples = c->samples ? c->samples : 360;
    c->max_instances = c->max_instances ? c->max_instances : METRICS_DEFAULT_INSTANCES;
    if (c->samples > S_MAX_SAMPLES || c->max_instances > BUS_STATS_INSTANCES_MAX ||
        (c->role != METRICS_ROLE_COORDINATOR && c->role != METRICS_ROLE_TIER) ||
        (c->role == METRICS_ROLE_COORDINATOR && !self->sched_ep[0])) {
        bus_error(S_LOG,
                  "bad config (role, samples <= %u, max_instances <= %u, a coordinator "
                  "needs its meta endpoint)",
                  S_MAX_SAMPLES, BUS_STATS_INSTANCES_MAX);
        return -1;
    }
    self->call_ms = c->refresh_ms < 1000 ? c->refresh_ms : 1000;
    if (self->call_ms < 100)
        self->call_ms = 100;
    return 0;
}

static self_t *s_self_new(zsock_t *pipe, const metrics_config_t *cfg)
{
    self_t *self = calloc(1, sizeof *self);
    if (!self || s_copy_cfg(self, cfg) < 0)
        goto out_fail;
    self->pipe = pipe;
    metrics_buf_init(&self->text, S_TEXT_MAX);
    metrics_labelset_init(&self->inst_labels, self->cfg.max_instances);
    self->stats = calloc(S_MAX_STATS, sizeof *self->stats);
    self->inst = calloc(BUS_STATS_INSTANCES_MAX, sizeof *self->inst);
    self->opt = calloc(1, sizeof *self->opt);
    self->ring = calloc(self->cfg.samples, sizeof *self->ring);
    self->req = calloc(1, sizeof *self->req);
    self->rep = calloc(1, sizeof *self->rep);
    self->loop = zloop_new();
    if (!self->stats || !self->inst || !self->opt || !self->ring || !self->req || !self->rep ||
        !self->loop)
        goto out_fail;
    char err[256];
    metrics_http_config_t hc = {
        .bind = self->bind, .max_connections = cfg->max_connections, .timeout_s = cfg->timeout_s};
    self->http = metrics_http_new(&hc, err, sizeof err);
    if (!self->http) {
        bus_error(S_LOG, "%s", err);
        goto out_fail;
    }
    if (self->cfg.role == METRICS_ROLE_COORDINATOR) {
        bus_client_config_t cc = {
            .name = "metrics", .max_in_flight = 4, .default_timeout_ms = self->call_ms};
        self->client = bus_client_new(self->sched_ep, &cc);
        if (!self->client)
            goto out_fail;
    }
    metrics_buf_t ok;
    metrics_buf_init(&ok, 0);
    metrics_buf_puts(&ok, "ok\n");
    s_publish(self, "/healthz", 200, "text/plain; charset=utf-8", &ok);
    metrics_buf_free(&ok);
    s_render(self);
    zloop_set_nonstop(self->loop, true);
    if (zloop_reader(self->loop, pipe, s_on_pipe, self) < 0 ||
        zloop_timer(self->loop, self->cfg.refresh_ms, 0, s_on_refresh, self) < 0 ||
        (self->cfg.role == METRICS_ROLE_COORDINATOR &&
         zloop_timer(self->loop, self->cfg.sample_ms, 0, s_on_sample, self) < 0))
        goto out_fail;
    return self;
out_fail:
    s_self_destroy(&self);
    return NULL;
}

static void s_actor(zsock_t *pipe, void *args)
{
    self_t *self = s_self_new(pipe, args);
    if (bus_actor_ready(pipe, self != NULL) < 0)
        return;
    bus_info(S_LOG, "%s %s: http://%s/metrics",
             self->cfg.role == METRICS_ROLE_TIER ? "tier" : "coordinator", self->name,
             metrics_http_address(self->http));
    zloop_start(self->loop);
    s_self_destroy(&self);
}

zactor_t *metrics_new(const metrics_config_t *cfg)
{
    return cfg ? bus_actor_new(s_actor, (void *)cfg) : NULL;
}

int metrics_address(zactor_t *actor, char *buf, size_t len)
{
    if (!buf || !len || bus_actor_ask(actor, BUS_ACTOR_ASK_MS, "s", "ADDRESS") < 0)
        return -1;
    char *a = zstr_recv(actor);
    if (!a)
        return -1;
    snprintf(buf, len, "%s", a);
    zstr_free(&a);
    return 0;
}

int metrics_set_role(zactor_t *actor, bool leader, bool sched_running, uint64_t epoch,
                     const char *leader_ep)
{
    if (!actor)
        return -1;
    char e[24];
    snprintf(e, sizeof e, "%" PRIu64, epoch);
    return zstr_sendx(actor, "ROLE", leader ? "1" : "0", sched_running ? "1" : "0", e,
                      leader_ep ? leader_ep : "", NULL);
}

int metrics_set_tier(zactor_t *actor, const tier_actor_stats_t *st, bool ok, bool registered,
                     const char *kind, uint64_t slot_bytes)
{
    if (!actor || !st)
        return -1;
    zframe_t *f = zframe_new(st, sizeof *st);
    char flags[3] = {ok ? '1' : '0', registered ? '1' : '0', '\0'};
    char slot[24];
    snprintf(slot, sizeof slot, "%" PRIu64, slot_bytes);
    int rc = zsock_send(actor, "sfsss", "TIER", f, flags, kind ? kind : "", slot);
    zframe_destroy(&f);
    return rc;
}

int metrics_set_targets(zactor_t *actor, const metrics_target_t *t, uint32_t n)
{
    if (!actor)
        return -1;
    zframe_t *f = zframe_new(t, (size_t)n * sizeof *t);
    int rc = zsock_send(actor, "sf", "TARGETS", f);
    zframe_destroy(&f);
    return rc;
}

int metrics_set_optimizer(zactor_t *actor, const char *json, size_t len)
{
    if (!actor)
        return -1;
    zframe_t *f = zframe_new(json, json ? len : 0);
    int rc = zsock_send(actor, "sf", "OPTIMIZER", f);
    zframe_destroy(&f);
    return rc;
}
