/* cli_optimize_live.c — `kvtier optimize --subscribe`: lookups from the leader's event
 * socket (docs/EVENTS.md; the "lookup/" topics) kept in a bounded window (the most
 * recent lookups holding at most window_refs block references; older ones are
 * dropped), and every every_ms one line: the service's hit rate over the window, the
 * exact LRU and the Belady reference at the capacity over the same requests. The
 * figures are retrospective (about the window, not the cache now) and say so.
 *
 * Owns: the window (a ring of records and a ring of keys, allocated once), the
 * decode buffers. Never blocks longer than a poll tick (200 ms); sequence gaps are
 * counted and printed (the window then misses lookups).
 *
 * --publish (how deploy/supervise runs it): each figure also goes to etcd as
 * /kvtier/<cluster>/optimizer = {"ts_ms", "last_event_ms", "window_requests",
 * "capacity_blocks",
 * "live_hit_rate", "lru_hit_rate", "belady_hit_rate", "curve": [[blocks, rate]...],
 * "gaps", "retrospective": true} under a lease of 3 reports (a dead optimizer's
 * figures go with it), which the coordinator's metrics and status page and
 * `kvtier status` read. Until the leader answers it retries every second. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <czmq.h>
#include <jansson.h>
#include <math.h>

#include "bus_events.h"
#include "coord_config.h"
#include "coord_etcd.h"
#include "cli_optimize_live.h"
#include "opt_belady.h"
#include "opt_lru.h"
#include "opt_trace.h"

#define S_MAX_KEYS 65536u /* decode pool, as kvtier events */
#define S_MAX_INSTANCES 1024u

typedef struct {
    uint64_t key0; /* index of its first key in the key ring (monotonic) */
    uint32_t n, hits, head, inst;
} s_rec_t;

typedef struct {
    const cli_live_args_t *a;
    uint8_t (*keys)[OPT_KEY_BYTES]; /* ring of window_refs keys */
    s_rec_t *recs;                  /* ring of window_refs records */
    uint64_t rec_head, rec_tail;    /* [tail, head) live, monotonic */
    uint64_t key_head, key_tail;
    char *instances[S_MAX_INSTANCES];
    uint32_t n_instances;
    uint64_t lookups, too_long, gaps, missing, bad;
    uint8_t (*scratch)[OPT_KEY_BYTES]; /* one lookup's keys, contiguous */
    coord_etcd_t *etcd;                /* --publish */
    char key[COORD_ETCD_KEY_MAX];
    int64_t lease;
    bool warned;
    int64_t last_event_ms; /* zclock_time of the last message (0: none) */
    char replay_ep[256];   /* the leader's replay socket ("" : none) */
    bool replaying;
    const bus_curve_client_t *curve; /* --cert: this client's keys; NULL: none */
} s_live_t;

static volatile sig_atomic_t s_stop;

static void s_on_signal(int sig)
{
    (void)sig;
    s_stop = 1;
}

static uint32_t s_instance(s_live_t *l, const char *name)
{
    for (uint32_t i = 0; i < l->n_instances; i++)
        if (!strcmp(l->instances[i], name))
            return i;
    if (l->n_instances == S_MAX_INSTANCES || !(l->instances[l->n_instances] = strdup(name)))
        return UINT32_MAX;
    return l->n_instances++;
}

/* Appends one prefix lookup, dropping the oldest ones to make room. */
static void s_add(s_live_t *l, const char *inst_name, const uint8_t (*keys)[BUS_KEY_LEN],
                  uint32_t n, uint32_t hits, uint32_t head)
{
    uint64_t w = l->a->window_refs;
    uint32_t inst = s_instance(l, inst_name);
    if (n == 0 || n > w || n > S_MAX_KEYS || inst == UINT32_MAX) {
        l->too_long += n > 0;
        return;
    }
    while (l->key_head + n - l->key_tail > w || l->rec_head - l->rec_tail == w) {
        l->key_tail += l->recs[l->rec_tail % w].n;
        l->rec_tail++;
    }
    for (uint32_t i = 0; i < n; i++)
        memcpy(l->keys[(l->key_head + i) % w], keys[i], OPT_KEY_BYTES);
    l->recs[l->rec_head % w] = (s_rec_t){.key0 = l->key_head,
                                         .n = n,
                                         .hits = hits < n ? hits : n,
                                         .head = head < hits ? head : hits,
                                         .inst = inst};
    l->rec_head++;
    l->key_head += n;
    l->lookups++;
}

/* The window as a trace; NULL when empty or out of memory. */
static opt_trace_t *s_window(s_live_t *l)
{
    uint64_t w = l->a->window_refs;
    if (l->rec_head == l->rec_tail)
        return NULL;
    opt_trace_t *t = opt_trace_new(w, l->a->tokens_per_block);
    char err[128];
    for (uint64_t r = l->rec_tail; t && r < l->rec_head; r++) {
        const s_rec_t *rec = &l->recs[r % w];
        for (uint32_t i = 0; i < rec->n; i++)
            memcpy(l->scratch[i], l->keys[(rec->key0 + i) % w], OPT_KEY_BYTES);
        if (opt_trace_add(t, rec->inst, (const uint8_t(*)[OPT_KEY_BYTES])l->scratch, rec->n, 0,
                          rec->hits, rec->head, err, sizeof err) < 0)
            opt_trace_destroy(&t);
    }
    return t;
}

static double s_pct(uint64_t x, uint64_t of)
{
    return of ? 100.0 * (double)x / (double)of : 0.0;
}

/* The figure as the record docs/OPTIMIZER.md describes, under a lease of three
 * report intervals (granted again when lost). Failures are printed once. */
static void s_publish(s_live_t *l, const opt_curve_t *c, uint64_t refs, size_t requests,
                      uint64_t obs, int64_t bel)
{
    uint64_t cap = l->a->capacity, top = opt_curve_max_capacity(c);
    if (top < cap * 2)
        top = cap * 2;
    json_t *curve = json_array();
    uint64_t prev = 0;
    for (uint32_t i = 0; curve && i < CLI_LIVE_CURVE_POINTS; i++) {
        /* log-spaced from 1 to top, the capacity itself among them */
        uint64_t x = (uint64_t)llround(pow((double)top, (double)i / (CLI_LIVE_CURVE_POINTS - 1)));
        if (prev < cap && x > cap) {
            x = cap;
            i--;
        }
        if (x <= prev)
            continue;
        prev = x;
        json_array_append_new(
            curve, json_pack("[I, f]", (json_int_t)x, (double)opt_curve_hits(c, x) / (double)refs));
    }
    json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:o, s:I, s:b}", "ts_ms",
                          (json_int_t)zclock_time(), "last_event_ms", (json_int_t)l->last_event_ms,
                          "window_requests", (json_int_t)requests, "capacity_blocks",
                          (json_int_t)cap, "live_hit_rate", (double)obs / (double)refs,
                          "lru_hit_rate", (double)opt_curve_hits(c, cap) / (double)refs,
                          "belady_hit_rate", bel >= 0 ? (double)bel / (double)refs : 0.0, "curve",
                          curve, "gaps", (json_int_t)l->gaps, "retrospective", 1);
    char *rec = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    int64_t ttl_s = (int64_t)(3 * l->a->every_ms / 1000) + 1, left = 0;
    int rc = rec ? 0 : -ENOMEM;
    if (rc == 0 && l->lease && coord_etcd_lease_keepalive(l->etcd, l->lease, &left) < 0)
        l->lease = 0;
    if (rc == 0 && !l->lease)
        rc = coord_etcd_lease_grant(l->etcd, ttl_s, 0, &l->lease, &left);
    if (rc == 0)
        rc = coord_etcd_put(l->etcd, l->key, rec, strlen(rec), l->lease, NULL);
    if (rc < 0 && !l->warned)
        fprintf(stderr, "kvtier optimize: cannot publish to etcd %s: %s (retrying)\n", l->key,
                coord_etcd_last_error(l->etcd));
    l->warned = rc < 0;
    free(rec);
}

static void s_report(s_live_t *l, bool final)
{
    opt_trace_t *t = s_window(l);
    if (!t) {
        printf("live: no lookups yet (gaps %" PRIu64 ")\n", l->gaps);
        fflush(stdout);
        return;
    }
    uint64_t refs = opt_trace_refs(t), obs = 0, head = 0, cap = l->a->capacity;
    for (size_t r = 0; r < opt_trace_requests(t); r++) {
        uint32_t h, hh;
        opt_trace_observed(t, r, &h, &hh);
        obs += h;
        head += hh;
    }
    opt_curve_t *c = opt_curve_new(t);
    opt_belady_t *b = opt_belady_new(t);
    int64_t bel = b ? opt_belady_run(b, cap, NULL) : -1;
    printf("live%s: window %zu lookups, %" PRIu64 " refs; service %.2f%% (head %.2f%%); "
           "lru at %" PRIu64 " %.2f%%; belady reference at %" PRIu64 " %.2f%% "
           "(retrospective over the window; gaps %" PRIu64 ", %" PRIu64 " events missing)\n",
           final ? " (final)" : "", opt_trace_requests(t), refs, s_pct(obs, refs),
           s_pct(head, refs), cap, c ? s_pct(opt_curve_hits(c, cap), refs) : 0.0, cap,
           bel >= 0 ? s_pct((uint64_t)bel, refs) : 0.0, l->gaps, l->missing);
    fflush(stdout);
    if (l->etcd && c && refs && bel >= 0) /* a figure that failed is not published as 0 */
        s_publish(l, c, refs, opt_trace_requests(t), obs, bel);
    opt_belady_destroy(&b);
    opt_curve_destroy(&c);
    opt_trace_destroy(&t);
}

static void s_on_batch(s_live_t *l, const kvtier_EventBatch *b, const bus_event_t *ev, uint32_t n)
{
    (void)b;
    for (uint32_t i = 0; i < n; i++) {
        if (ev[i].ev.which_kind != kvtier_Event_cache_get_tag)
            continue;
        const kvtier_CacheGet *g = &ev[i].ev.kind.cache_get;
        if (g->mode != kvtier_LookupMode_LOOKUP_MODE_PREFIX ||
            (l->a->instance && strcmp(ev[i].ev.instance_id, l->a->instance) != 0))
            continue;
        s_add(l, ev[i].ev.instance_id, (const uint8_t(*)[BUS_KEY_LEN])ev[i].keys.keys, ev[i].keys.n,
              g->hit_count, g->head_hits);
    }
}

/* The leader's event endpoint (its replay socket into REPLAY, REPLAY_LEN bytes)
 * and, when CAP is 0, the capacity of all its tiers. */
static int s_cluster(cli_common_t *o, char *ep, size_t len, uint64_t *cap, char *replay,
                     size_t replay_len)
{
    kvt_client_t *c = cli_connect(o, "kvtier-optimize");
    if (!c)
        return -1;
    kvt_cluster_info_t *ci = calloc(1, sizeof *ci);
    int rc = ci ? kvt_cluster_info(c, ci) : -KVT_INTERNAL;
    uint64_t sum = 0;
    if (rc < 0) {
        cli_report_error("optimize", "cluster info", c, rc);
    } else if (!ci->event_endpoint[0]) {
        fprintf(stderr, "kvtier optimize: the leader publishes no events (events.endpoint)\n");
        rc = -1;
    } else {
        if (!ep[0])
            snprintf(ep, len, "%s", ci->event_endpoint);
        if (!replay[0])
            snprintf(replay, replay_len, "%s", ci->event_replay_endpoint);
        /* the service's hits come from every tier of its chains: compare with an LRU
         * of all of them, not of the head alone */
        for (uint32_t i = 0; *cap == 0 && i < ci->n_tiers; i++)
            sum += ci->tiers[i].capacity;
        if (*cap == 0 && sum) {
            *cap = sum;
            printf("live: capacity %" PRIu64 " (the %u tiers' slots; --capacity to choose)\n", *cap,
                   ci->n_tiers);
        }
    }
    free(ci);
    kvt_close(&c);
    return rc < 0 ? -1 : 0;
}

static void s_on_message(s_live_t *l, zmsg_t *m, uint64_t *last, bus_event_t *events,
                         bus_keys_t *pool);

/* Replays the ring from seq FROM (docs/EVENTS.md "Replay") into the window: a
 * term's lookups that went out before this subscriber joined it. Best effort:
 * a failure leaves the live stream as it was. */
static void s_catch_up(s_live_t *l, uint64_t from, uint64_t *last, bus_event_t *events,
                       bus_keys_t *pool)
{
    zsock_t *d = cli_socket("kvtier optimize: replay socket", l->curve, ZMQ_DEALER, l->replay_ep);
    if (!d)
        return;
    l->replaying = true;
    uint8_t be[8];
    bus_events_seq_put(be, from);
    zmsg_t *req = zmsg_new();
    zmsg_addstr(req, "REPLAY");
    zmsg_addmem(req, be, 8);
    zpoller_t *p = zmsg_send(&req, d) == 0 ? zpoller_new(d, NULL) : NULL;
    uint64_t got = 0;
    while (p && zpoller_wait(p, 5000)) {
        zmsg_t *m = zmsg_recv(d);
        char *verb = m ? zmsg_popstr(m) : NULL;
        bool batch = verb && strcmp(verb, "BATCH") == 0,
             more = batch || (verb && !strcmp(verb, "GAP"));
        if (batch) {
            bus_keys_t keys = {.keys = pool->keys, .cap = pool->cap};
            s_on_message(l, m, last, events, &keys);
            got++;
        }
        zstr_free(&verb);
        zmsg_destroy(&m);
        if (!more)
            break; /* END, ERROR or nothing */
    }
    zpoller_destroy(&p);
    zsock_destroy(&d);
    l->replaying = false;
    printf("live: caught up with %" PRIu64 " batches of the term from the replay socket\n", got);
    fflush(stdout);
}

/* One message: [topic][8-byte sequence][batch]; printed once by seq (replayed and
 * live batches overlap); gaps within a leader's term counted. The first batch of a
 * term seen live that is not the term's first has the ring replayed first. */
static void s_on_message(s_live_t *l, zmsg_t *m, uint64_t *last, bus_event_t *events,
                         bus_keys_t *pool)
{
    zframe_t *t = zmsg_first(m), *s = zmsg_next(m), *p = zmsg_next(m);
    if (zmsg_size(m) != 3 || zframe_size(s) != 8) {
        l->bad++;
        return;
    }
    uint64_t seq = bus_events_seq_get(zframe_data(s));
    if (*last && seq <= *last)
        return; /* seen already (replayed) */
    if (!l->replaying && l->replay_ep[0] && BUS_EVENTS_SEQ_TERM(seq) > BUS_EVENTS_SEQ_TERM(*last) &&
        seq != BUS_EVENTS_SEQ_FIRST(BUS_EVENTS_SEQ_TERM(seq))) {
        s_catch_up(l, BUS_EVENTS_SEQ_FIRST(BUS_EVENTS_SEQ_TERM(seq)), last, events, pool);
        if (*last && seq <= *last)
            return;
    }
    /* every topic is subscribed so that gaps are real (a lookup-only subscription
     * would see the other kinds' sequences as gaps); only lookups are decoded */
    if (*last && BUS_EVENTS_SEQ_TERM(seq) == BUS_EVENTS_SEQ_TERM(*last) && seq > *last + 1) {
        l->gaps++;
        l->missing += seq - *last - 1;
    }
    *last = seq;
    static const char lookup[] = "lookup/";
    if (zframe_size(t) < sizeof lookup - 1 || memcmp(zframe_data(t), lookup, sizeof lookup - 1))
        return;
    kvtier_EventBatch b;
    uint32_t n = 0;
    kvtier_Status st;
    if (bus_events_decode(zframe_data(p), zframe_size(p), &b, events, BUS_MAX_EVENTS, &n, pool,
                          &st) < 0)
        l->bad++;
    else
        s_on_batch(l, &b, events, n);
}

static int s_loop(s_live_t *l, zsock_t *sub)
{
    bus_event_t *events = calloc(BUS_MAX_EVENTS, sizeof *events);
    uint8_t(*pool)[BUS_KEY_LEN] = calloc(S_MAX_KEYS, BUS_KEY_LEN);
    zpoller_t *poller = zpoller_new(sub, NULL);
    if (!events || !pool || !poller) {
        fprintf(stderr, "kvtier optimize: out of memory\n");
        free(events);
        free(pool);
        zpoller_destroy(&poller);
        return CLI_EXIT_FAIL;
    }
    int64_t start = zclock_mono(), next = start + (int64_t)l->a->every_ms;
    int64_t until = l->a->for_ms ? start + (int64_t)l->a->for_ms : INT64_MAX;
    uint64_t last = 0;
    /* zsys_interrupted too: a SIGTERM that came while czmq's own handler was in
     * (between a connect and our handlers going back in) lands there, not in s_stop */
    while (!s_stop && !zsys_interrupted && zclock_mono() < until) {
        if (zpoller_wait(poller, 200)) {
            zmsg_t *m = zmsg_recv(sub);
            bus_keys_t keys = {.keys = pool, .cap = S_MAX_KEYS};
            if (m) {
                s_on_message(l, m, &last, events, &keys);
                l->last_event_ms = zclock_time();
            }
            zmsg_destroy(&m);
        }
        if (zclock_mono() >= next) {
            s_report(l, false);
            next += (int64_t)l->a->every_ms;
        }
    }
    s_report(l, true);
    zpoller_destroy(&poller);
    free(events);
    free(pool);
    return CLI_EXIT_OK;
}

/* --publish: etcd from --etcd or $KVTIER_ETCD, the cluster from --cluster, the
 * deployment file or "kvtier". 0, or -1 (printed). */
static int s_etcd_open(s_live_t *l, const cli_common_t *o)
{
    const char *cluster = o->cluster ? o->cluster : o->cfg_cluster[0] ? o->cfg_cluster : "kvtier";
    l->etcd = cli_etcd_open(o, 2000);
    if (!l->etcd || coord_cluster_key(l->key, sizeof l->key, cluster, "optimizer") < 0) {
        fprintf(stderr,
                "kvtier optimize: --publish needs etcd: --etcd URLS or $KVTIER_ETCD "
                "(usable URLs), and a cluster name (%s)\n",
                cluster);
        return -1;
    }
    printf("live: publishing to etcd %s\n", l->key);
    return 0;
}

int cli_optimize_live(cli_common_t *o, const cli_live_args_t *a)
{
    cli_live_args_t args = *a;
    char ep[256] = "";
    if (a->endpoint)
        snprintf(ep, sizeof ep, "%s", a->endpoint);
    /* published (a service): the leader may not be up yet, so wait for it. The
     * handlers go in after each connect: czmq installs its own at its start */
    signal(SIGINT, s_on_signal);
    signal(SIGTERM, s_on_signal);
    char replay[256] = "";
    while ((!ep[0] || !args.capacity) &&
           s_cluster(o, ep, sizeof ep, &args.capacity, replay, sizeof replay) < 0) {
        signal(SIGINT, s_on_signal);
        signal(SIGTERM, s_on_signal);
        if (args.publish && (s_stop || zsys_interrupted))
            return CLI_EXIT_OK; /* stopped while waiting: a clean stop */
        if (!args.publish)
            return CLI_EXIT_FAIL;
        zclock_sleep(1000);
    }
    signal(SIGINT, s_on_signal);
    signal(SIGTERM, s_on_signal);
    if (!args.capacity) {
        fprintf(stderr, "kvtier optimize: --subscribe: no capacity (give --capacity)\n");
        return CLI_EXIT_USAGE;
    }
    bus_curve_client_t keys;
    bool curve = false;
    if (cli_curve_keys(o, &curve, &keys) < 0)
        return CLI_EXIT_USAGE;
    s_live_t l = {.a = &args, .curve = curve ? &keys : NULL};
    snprintf(l.replay_ep, sizeof l.replay_ep, "%s", replay);
    if (args.publish && s_etcd_open(&l, o) < 0)
        return CLI_EXIT_USAGE;
    uint64_t w = args.window_refs;
    l.keys = malloc(w * OPT_KEY_BYTES);
    l.recs = malloc(w * sizeof *l.recs);
    l.scratch = malloc(S_MAX_KEYS * OPT_KEY_BYTES);
    zsock_t *sub = cli_socket("kvtier optimize", l.curve, ZMQ_SUB, ep);
    int status = CLI_EXIT_FAIL;
    if (!l.keys || !l.recs || !l.scratch || !sub) {
        fprintf(stderr, "kvtier optimize: cannot subscribe to %s (or out of memory)\n", ep);
        goto out;
    }
    zsock_set_subscribe(sub, "");
    printf("live: %s, instance %s, window %" PRIu64 " references, a line every %" PRIu64 " ms\n",
           ep, args.instance ? args.instance : "(all)", w, args.every_ms);
    fflush(stdout);
    status = s_loop(&l, sub);
out:
    if (l.etcd && l.lease)
        (void)coord_etcd_lease_revoke(l.etcd, l.lease); /* the figures go with us */
    coord_etcd_destroy(&l.etcd);
    zsock_destroy(&sub);
    for (uint32_t i = 0; i < l.n_instances; i++)
        free(l.instances[i]);
    free(l.keys);
    free(l.recs);
    free(l.scratch);
    return status;
}
