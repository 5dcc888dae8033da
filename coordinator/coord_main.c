/* coord_main.c — `kvtier coordinator` (see coord_main.h). The main thread wires
 * the actors together and owns the process state: which of scheduler / standby
 * holds the meta endpoint, the leader last seen, and the tiers known from etcd.
 *
 * States: STANDBY (the standby responder binds the meta endpoint) and LEADER (the
 * scheduler actor binds it). Elector events move between them; membership changes
 * go to whichever runs. Never: runs the scheduler without being the elected
 * leader, or blocks on etcd (only the actors talk to it; a new term waits, bounded,
 * for the registry actor's read of the instances before its scheduler starts). */
#include "coord_main.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <czmq.h>
#include <jansson.h>

#include "bus_curve.h"
#include "bus_events.h"
#include "bus_fault_admin.h"
#include "bus_log.h"
#include "bus_token_mac.h"
#include "coord_config.h"
#include "coord_curve.h"
#include "coord_elector.h"
#include "coord_membership.h"
#include "coord_proc.h"
#include "coord_standby.h"
#include "coord_metrics_feed.h"
#include "gc.h"
#include "metrics.h"
#include "migrator.h"
#include "publisher.h"
#include "reclaimer.h"
#include "coord_registry.h"
#include "sched_actor.h"

#define S_COMP "coordinator"
#define S_POLL_MS 200             /* main loop wake-up to notice a signal */
#define S_SCHED_RETRY_FOR_MS 2000 /* scheduler start tries (the standby's socket closing) */
#define S_SCHED_RETRY_MS 20

typedef struct {
    bool up;
    kvtier_TierInfo info;
} s_tier_t;

typedef struct {
    coord_config_t cfg;
    char name[COORD_ELECTOR_NAME_MAX];
    char endpoint[BUS_ENDPOINT_MAX];  /* bound meta endpoint */
    char advertise[BUS_ENDPOINT_MAX]; /* advertised one (etcd, redirects, ClusterInfo) */
    bool advertise_bound;             /* advertise = the bound endpoint, once resolved */
    zactor_t *standby;
    zactor_t *sched;
    zactor_t *gc;        /* started next to the scheduler, stopped before it */
    zactor_t *reclaimer; /* idem */
    zactor_t *migrator;  /* idem; the scheduler connects to migrator_ep */
    char migrator_ep[64];
    zactor_t *publisher; /* started before the scheduler (it hands batches to events_ep),
                            stopped after it; NULL: events off */
    char events_ep[64];
    char events_xpub[BUS_ENDPOINT_MAX];   /* as bound (advertised in ClusterInfo) */
    char events_replay[BUS_ENDPOINT_MAX]; /* as bound; "" without a replay socket */
    char events_vxpub[BUS_ENDPOINT_MAX];  /* the vLLM stream as bound; "" = none */
    char events_vreplay[BUS_ENDPOINT_MAX];
    zactor_t *elector;
    zactor_t *membership;
    zactor_t *metrics;      /* HTTP /metrics, /readyz, /sd, / (issue 10); NULL: off */
    zactor_t *metrics_feed; /* its etcd reader; what it sends is forwarded to metrics */
    char metrics_addr[METRICS_HTTP_ADDR_MAX];
    bool leader;
    uint64_t epoch;
    uint64_t previous_epoch; /* the term before ours (LeaderChanged); 0: unknown */
    uint64_t etcd_cluster_id; /* the etcd cluster electing us (ClusterInfo); 0: unknown */
    /* the elector's bound on our lease (coord_elector.h's safety rule), tagged
     * with its term's epoch (sched_lease_word), read by the scheduler before
     * anything leader-only (sched_config_t.lease_until_ms) */
    _Atomic int64_t lease_until;
    /* kvtier leader resign: the other coordinators registered in etcd, as the
     * elector counts them while leading; the elector's inbox, where the scheduler
     * pushes its hand-over (coord_elector.h) */
    _Atomic uint32_t standbys;
    char elector_inbox[COORD_ELECTOR_INBOX_MAX];
    char leader_ep[BUS_ENDPOINT_MAX]; /* as last reported by the elector */
    uint64_t leader_epoch;
    s_tier_t tiers[COORD_MAX_TIERS]; /* by tier id - 1 */
    bool acl_on; /* security.curve.instances, resolved at start (coord_curve.h) */
    uint32_t n_acl;
    sched_acl_entry_t acl[SCHED_ACL_MAX];
    zactor_t *faults;   /* the fault admin socket (bus_fault_admin.h); NULL: faults off */
    zactor_t *registry; /* the instance registry in etcd (coord_registry.h) */
    char registry_ep[96];
    uint8_t secret[BUS_SECRET_BYTES]; /* the cluster secret: every token is sealed under it */
} s_proc_t;

static void s_usage(FILE *out)
{
    fprintf(out, "usage: kvtier coordinator -c FILE [--etcd URLS] [--name NAME] [--endpoint EP]\n"
                 "                          [--advertise EP] [--cert FILE] [--secret FILE]\n"
                 "  -c, --config FILE  deployment file (JSON)\n"
                 "  --secret FILE      cluster secret (overrides security.secret_file)\n"
                 "  --etcd URLS        comma-separated etcd URLs (overrides etcd.endpoints)\n"
                 "  --name NAME        coordinator name in etcd; with a \"coordinators\" list,\n"
                 "                     the entry it runs (its endpoint, advertise, metrics)\n"
                 "                     (default <hostname>-<pid>, coordinator.endpoint)\n"
                 "  --endpoint EP      meta endpoint to bind (overrides the entry's)\n"
                 "  --advertise EP     endpoint to advertise (default the entry's, or the\n"
                 "                     bound endpoint)\n"
                 "  --cert FILE        its CURVE pair when security.curve is on\n"
                 "                     (default <keys>/<NAME>.key, <keys>/coordinator.key)\n");
}

static void s_nap_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* --- the two holders of the meta endpoint --- */

static int s_start_standby(s_proc_t *p)
{
    coord_standby_config_t sc = {
        .endpoint = p->endpoint,
        .cluster = p->cfg.cluster,
        .name = p->name,
        /* the leader's bound (the scheduler's default: max_clients + 64) */
        .max_connections = p->cfg.max_connections
                               ? p->cfg.max_connections
                               : (p->cfg.max_clients ? p->cfg.max_clients : 1024) + 64};
    coord_proc_block_signals(true);
    p->standby = coord_standby_new(&sc);
    coord_proc_block_signals(false);
    if (!p->standby)
        return -1;
    coord_standby_set_leader(p->standby, p->leader_ep, p->leader_epoch, p->etcd_cluster_id);
    for (uint32_t i = 0; i < COORD_MAX_TIERS; i++)
        if (p->tiers[i].up)
            coord_standby_tier(p->standby, true, &p->tiers[i].info);
    return 0;
}

_Static_assert(COORD_MAX_QUOTAS <= SCHED_MAX_QUOTAS && COORD_INSTANCE_MAX <= SCHED_INSTANCE_MAX,
               "the deployment's quotas fit the scheduler's");

_Static_assert((int)COORD_ROUTE_TTL == (int)SCHED_ROUTE_TTL &&
                   (int)COORD_ROUTE_LENGTH == (int)SCHED_ROUTE_LENGTH &&
                   (int)COORD_ROUTE_INSTANCE == (int)SCHED_ROUTE_INSTANCE &&
                   COORD_ROUTE_MAX_INSTANCES <= SCHED_ROUTE_MAX_INSTANCES,
               "the deployment's router is the scheduler's");

static void s_sched_config(const s_proc_t *p, sched_config_t *sc)
{
    const coord_config_t *c = &p->cfg;
    sched_config_defaults(sc);
    snprintf(sc->cluster, sizeof sc->cluster, "%s", c->cluster);
    snprintf(sc->node_name, sizeof sc->node_name, "%s", p->name);
    snprintf(sc->endpoint, sizeof sc->endpoint, "%s", p->endpoint);
    snprintf(sc->advertised_endpoint, sizeof sc->advertised_endpoint, "%s", p->advertise);
    sc->leader_epoch = p->epoch;
    sc->previous_epoch = p->previous_epoch;
    sc->etcd_cluster_id = p->etcd_cluster_id;
    sc->lease_until_ms = &p->lease_until;
    sc->standbys = &p->standbys;
    snprintf(sc->resign_endpoint, sizeof sc->resign_endpoint, "%s", p->elector_inbox);
    sc->has_secret = true;
    memcpy(sc->secret, p->secret, sizeof sc->secret);
    sc->n_tiers = c->n_tiers;
    for (uint32_t i = 0; i < c->n_tiers; i++) {
        const coord_tier_config_t *t = &c->tiers[i];
        sched_tier_config_t *st = &sc->tiers[i];
        st->tier_id = t->id;
        snprintf(st->name, sizeof st->name, "%s", t->name);
        snprintf(st->kind, sizeof st->kind, "%s", t->kind_name);
        snprintf(st->policy, sizeof st->policy, "%s", t->policy);
        st->capacity = t->capacity;
        st->slot_size = t->slot_size;
        st->room_on_demand = !coord_tier_reclaims_ahead(c, t);
    }
    /* pools: one vacant slot per possible member, ids after the tiers' */
    sc->n_pools = c->n_pools;
    for (uint32_t pi = 0; pi < c->n_pools; pi++) {
        const coord_pool_config_t *pc = &c->pools[pi];
        snprintf(sc->pools[pi].name, sizeof sc->pools[pi].name, "%s", pc->name);
        sc->pools[pi].first_id = pc->first_id;
        sc->pools[pi].max_members = pc->max_members;
        for (uint32_t k = 0; k < pc->max_members; k++) {
            sched_tier_config_t *st = &sc->tiers[pc->first_id - 1 + k];
            st->tier_id = pc->first_id + k;
            st->pool = pi + 1;
            snprintf(st->kind, sizeof st->kind, "%s", pc->member.kind_name);
            snprintf(st->policy, sizeof st->policy, "%s", pc->member.policy);
            st->capacity = pc->member.capacity;
            st->slot_size = pc->member.slot_size;
            st->room_on_demand = !coord_tier_reclaims_ahead(c, &pc->member);
        }
        sc->n_tiers = pc->first_id - 1 + pc->max_members;
    }
    sc->n_chains = c->n_chains;
    for (uint32_t i = 0; i < c->n_chains; i++) {
        snprintf(sc->chains[i].name, sizeof sc->chains[i].name, "%s", c->chains[i].name);
        uint32_t n = 0; /* a pool's level: every slot of it, in id order */
        for (uint32_t j = 0; j < c->chains[i].n_tiers; j++) {
            uint32_t id = c->chains[i].tier_ids[j];
            const coord_pool_config_t *pc = coord_config_pool_of_id(c, id);
            for (uint32_t k = 0; k < (pc ? pc->max_members : 1) && n < SCHED_CHAIN_MAX_TIERS; k++)
                sc->chains[i].tier_ids[n++] = id + k;
        }
        sc->chains[i].n_tiers = n;
        sc->chains[i].placement = c->chains[i].placement == COORD_PLACEMENT_INCLUSIVE
                                      ? SCHED_PLACEMENT_INCLUSIVE
                                      : SCHED_PLACEMENT_EXCLUSIVE;
        sc->chains[i].above = c->chains[i].above;
    }
    sc->route.kind = c->route; /* coord_route_t and sched_route_kind_t share values */
    sc->route.fallback = c->route == COORD_ROUTE_NONE ? 0 : c->route_fallback;
    sc->route.n_instances = c->n_route_instances;
    for (uint32_t i = 0; i < c->n_route_instances; i++) {
        snprintf(sc->route.instances[i].instance, sizeof sc->route.instances[i].instance, "%s",
                 c->route_instances[i].instance);
        sc->route.instances[i].chain = c->route_instances[i].chain;
    }
    sc->pin_lease_ms = c->pin_lease_ms;
    sc->write_grace_ms = c->write_grace_ms;
    sc->clock_skew_ms = c->clock_skew_ms;
    sc->request_idle_ms = c->request_idle_ms;
    sc->tier_timeout_ms = c->tier_timeout_ms;
    sc->max_batch = c->max_batch;
    sc->max_requests = c->max_requests;
    sc->max_clients = c->max_clients;
    sc->max_requests_per_client = c->max_requests_per_client;
    sc->client_idle_ms = c->client_idle_ms;
    sc->max_connections = c->max_connections;
    sc->max_instances = c->max_instances;
    sc->delete_delay_ms = c->reclaim_delete_delay_ms;
    sc->max_pending_deletes = c->reclaim_max_pending;
    /* the scheduler demotes along the chains through the migrator started beside
     * it (s_start_background; issue 4 §4, DESIGN §3) */
    sc->demote = true;
    snprintf(sc->migrator_endpoint, sizeof sc->migrator_endpoint, "%s", p->migrator_ep);
    if (p->publisher) { /* events (DESIGN §13): batches to the publisher started beside */
        snprintf(sc->events_input, sizeof sc->events_input, "%s", p->events_ep);
        snprintf(sc->event_endpoint, sizeof sc->event_endpoint, "%s", p->events_xpub);
        snprintf(sc->event_replay_endpoint, sizeof sc->event_replay_endpoint, "%s",
                 p->events_replay);
        snprintf(sc->vllm_event_endpoint, sizeof sc->vllm_event_endpoint, "%s", p->events_vxpub);
        snprintf(sc->vllm_replay_endpoint, sizeof sc->vllm_replay_endpoint, "%s",
                 p->events_vreplay);
        sc->events_queue = c->events_queue;
        sc->events_put_tokens = c->events_put_tokens;
    }
    sc->n_quotas = c->n_quotas;
    for (uint32_t i = 0; i < c->n_quotas; i++) {
        const coord_quota_config_t *q = &c->quotas[i];
        snprintf(sc->quotas[i].instance, sizeof sc->quotas[i].instance, "%s", q->instance);
        sc->quotas[i].max_blocks = q->max_blocks;
        sc->quotas[i].max_bytes = q->max_bytes;
    }
    sc->acl_on = p->acl_on;
    sc->n_acl = p->n_acl;
    memcpy(sc->acl, p->acl, sizeof p->acl[0] * p->n_acl);
}

/* The background actors of the leader (DESIGN §3): they reach the scheduler over
 * its internal plane. 0, or -1 with *what naming the actor that did not start. */
static int s_start_background(s_proc_t *p, const char **what)
{
    const coord_config_t *c = &p->cfg;
    gc_config_t gc;
    memset(&gc, 0, sizeof gc);
    *what = "scheduler"; /* it does not answer */
    if (sched_actor_internal_endpoint(p->sched, gc.sched_endpoint, sizeof gc.sched_endpoint) < 0)
        return -1;
    *what = "migrator";
    migrator_config_t mc = {
        .name = "migrator", .endpoint = p->migrator_ep, .results_endpoint = gc.sched_endpoint};
    p->migrator = migrator_new(&mc);
    if (!p->migrator)
        return -1;
    gc.interval_ms = (uint32_t)c->gc_interval_ms;
    gc.page = c->gc_page;
    gc.probe_timeout_ms = (uint32_t)c->gc_probe_timeout_ms;
    *what = "gc";
    p->gc = gc_actor_new(&gc);
    if (!p->gc)
        return -1;

    *what = "reclaimer";
    reclaimer_config_t *rc = calloc(1, sizeof *rc);
    if (!rc)
        return -1;
    snprintf(rc->sched_endpoint, sizeof rc->sched_endpoint, "%s", gc.sched_endpoint);
    rc->interval_ms = (uint32_t)c->reclaim_interval_ms;
    /* every tier id, a pool's whole range among them (the defaults of its members):
     * a vacant slot answers no fill, a member that joins is watched from then on */
    rc->n_tiers = 0;
    for (uint32_t id = 1; id <= COORD_MAX_TIERS && rc->n_tiers < RECLAIMER_MAX_TIERS; id++) {
        const coord_tier_config_t *t = coord_config_tier_by_id(c, id);
        if (!t)
            break;
        uint32_t i = rc->n_tiers++;
        uint32_t hi = (uint32_t)(t->high_watermark * 1000.0 + 0.5);
        uint32_t lo = (uint32_t)(t->low_watermark * 1000.0 + 0.5);
        hi = hi < 2 ? 2 : hi > 1000 ? 1000 : hi;
        lo = lo < 1 ? 1 : lo >= hi ? hi - 1 : lo; /* fractions closer than 1 permille */
        rc->tiers[i] = (reclaimer_tier_t){.tier_id = id,
                                          .high_permille = hi,
                                          .low_permille = lo,
                                          .on_demand = !coord_tier_reclaims_ahead(c, t)};
    }
    /* always: quota rounds also carry out operators' trims (kvtier trim / remove);
     * without quotas or trims the scheduler answers one at once */
    uint32_t ql = (uint32_t)(c->reclaim_quota_low * 1000.0 + 0.5);
    rc->quota_low_permille = ql < 1 ? 1 : ql > 1000 ? 1000 : ql;
    p->reclaimer = reclaimer_actor_new(rc);
    free(rc);
    return p->reclaimer ? 0 : -1;
}

/* Advertises the leader's event endpoints in etcd (/kvtier/<cluster>/events,
 * through the metrics feed: under its lease) or withdraws them (up = false). */
static void s_advertise_events(s_proc_t *p, bool up)
{
    if (!p->metrics_feed)
        return;
    if (!up || !p->publisher) {
        (void)coord_metrics_feed_events(p->metrics_feed, NULL);
        return;
    }
    json_t *o =
        json_pack("{s:I, s:s, s:s, s:s, s:s, s:s}", "epoch", (json_int_t)p->epoch, "node", p->name,
                  "endpoint", p->events_xpub, "replay_endpoint", p->events_replay, "vllm_endpoint",
                  p->events_vxpub, "vllm_replay_endpoint", p->events_vreplay);
    char *rec = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (!rec || coord_metrics_feed_events(p->metrics_feed, rec) < 0)
        bus_warn(S_COMP, "cannot advertise the event endpoints in etcd");
    free(rec);
    json_decref(o);
}

static void s_stop_sched(s_proc_t *p)
{
    if (p->publisher)
        s_advertise_events(p, false);
    zactor_destroy(&p->reclaimer);
    zactor_destroy(&p->gc);
    zactor_destroy(&p->migrator);
    zactor_destroy(&p->sched);
    coord_registry_end_term(p->registry); /* after the scheduler's last specs */
    zactor_destroy(&p->publisher);        /* last: the scheduler's final batches are in */
}

/* The leader's publisher (DESIGN §13), before the scheduler: 0, or -1 (logged). */
static int s_start_publisher(s_proc_t *p)
{
    const coord_config_t *c = &p->cfg;
    if (!c->events_endpoint[0])
        return 0;
    static unsigned s_ev_seq; /* a fresh input name per term, as for the migrator */
    snprintf(p->events_ep, sizeof p->events_ep, "inproc://coord-events-%ld-%u", (long)getpid(),
             s_ev_seq++);
    publisher_config_t pc = {.name = "publisher",
                             .input_endpoint = p->events_ep,
                             .endpoint = c->events_endpoint,
                             .replay_endpoint = c->events_replay,
                             .ring_batches = c->events_ring_batches,
                             .ring_bytes = c->events_ring_bytes,
                             .first_seq_hint = BUS_EVENTS_SEQ_FIRST(p->epoch),
                             .snapshot_blocks = c->events_snapshot_blocks,
                             .xpub_hwm = (int)c->events_subscriber_queue,
                             .vllm_endpoint = c->events_vllm,
                             .vllm_replay_endpoint = c->events_vllm_replay,
                             .vllm_layout = c->events_vllm_layout};
    /* per-instance isolation: the streams carry every instance's events, so only
     * keys granted "*" (and this process's own) read them (docs/SECURITY.md) */
    char(*keys)[BUS_CURVE_KEY_TXT] = NULL;
    if (p->acl_on) {
        keys = calloc(p->n_acl ? p->n_acl : 1, sizeof *keys);
        if (!keys) {
            bus_error(S_COMP, "publisher: out of memory");
            return -1;
        }
        for (uint32_t i = 0; i < p->n_acl; i++)
            if (!strcmp(p->acl[i].instance, "*"))
                snprintf(keys[pc.n_keys++], sizeof keys[0], "%s", p->acl[i].key);
        pc.keys_only = true;
        pc.keys = (const char(*)[BUS_CURVE_KEY_TXT])keys;
    }
    /* the last term's publisher may still be releasing its ports (as for the
     * meta endpoint, s_start_sched): retried for a bounded time */
    int64_t deadline = coord_proc_now_ms() + S_SCHED_RETRY_FOR_MS;
    for (int i = 0; !p->publisher; i++) {
        p->publisher = publisher_new(&pc);
        if (p->publisher || (i > 0 && coord_proc_now_ms() >= deadline))
            break;
        s_nap_ms(S_SCHED_RETRY_MS);
    }
    free(keys); /* copied by the publisher at its start */
    if (!p->publisher ||
        publisher_endpoints(p->publisher, p->events_xpub, sizeof p->events_xpub, p->events_replay,
                            sizeof p->events_replay) < 0 ||
        publisher_vllm_endpoints(p->publisher, p->events_vxpub, sizeof p->events_vxpub,
                                 p->events_vreplay, sizeof p->events_vreplay) < 0) {
        zactor_destroy(&p->publisher);
        return -1;
    }
    const char *r = p->events_replay, *vx = p->events_vxpub, *vr = p->events_vreplay;
    bus_info(S_COMP, "events on %s (replay %s), vLLM events on %s (replay %s)", p->events_xpub,
             r[0] ? r : "none", vx[0] ? vx : "none", vr[0] ? vr : "none");
    return 0;
}

/* 0, or -1 with *what naming the actor that did not start. */
static int s_start_sched(s_proc_t *p, const char **what)
{
    *what = "scheduler";
    sched_config_t *sc = malloc(sizeof *sc);
    if (!sc)
        return -1;
    /* a fresh name per term: a migrator of the last term may still be unbinding */
    static unsigned s_mig_seq;
    snprintf(p->migrator_ep, sizeof p->migrator_ep, "inproc://coord-migrator-%ld-%u",
             (long)getpid(), s_mig_seq++);
    *what = "publisher";
    if (s_start_publisher(p) < 0) {
        free(sc);
        return -1;
    }
    *what = "scheduler";
    s_sched_config(p, sc);
    /* the instances the clients registered with earlier leaders, before serving */
    uint32_t max = sc->max_instances ? sc->max_instances : 64; /* the scheduler's default */
    kvtier_InstanceSpec *pre = calloc(max, sizeof *pre);
    uint32_t n_pre = 0;
    if (pre && coord_registry_load(p->registry, pre, max, &n_pre) < 0)
        bus_warn(S_COMP,
                 "%s: the instance registry could not be read: clients register their "
                 "instances again as they call",
                 p->name);
    sc->preload = pre;
    sc->n_preload = n_pre;
    snprintf(sc->registry_output, sizeof sc->registry_output, "%s", p->registry_ep);
    /* The standby's socket was just closed: its address is released by ZeroMQ's
     * I/O thread a moment later, hence retries for a bounded time. */
    coord_proc_block_signals(true);
    int64_t deadline = coord_proc_now_ms() + S_SCHED_RETRY_FOR_MS;
    for (int i = 0; !p->sched; i++) {
        p->sched = sched_actor_new(sc);
        if (p->sched || (i > 0 && coord_proc_now_ms() >= deadline))
            break;
        s_nap_ms(S_SCHED_RETRY_MS);
    }
    if (p->sched && s_start_background(p, what) < 0)
        s_stop_sched(p);
    coord_proc_block_signals(false);
    free(sc);
    free(pre);
    if (!p->sched) {
        zactor_destroy(&p->publisher);
        return -1;
    }
    for (uint32_t i = 0; i < COORD_MAX_TIERS; i++)
        if (p->tiers[i].up)
            sched_actor_tier_change(p->sched, true, &p->tiers[i].info);
    s_advertise_events(p, true);
    return 0;
}

/* --- elector events --- */

/* The metrics actor's view of the role (readiness, kvtier_leader). */
static void s_metrics_role(s_proc_t *p)
{
    if (p->metrics)
        (void)metrics_set_role(p->metrics, p->leader, p->sched != NULL,
                               p->leader ? p->epoch : p->leader_epoch, p->leader_ep);
}

static int s_on_elector_event(s_proc_t *p);

static int s_on_elector(s_proc_t *p)
{
    int rc = s_on_elector_event(p);
    s_metrics_role(p);
    return rc;
}

static int s_on_elector_event(s_proc_t *p)
{
    coord_elector_event_t ev;
    if (coord_elector_recv(p->elector, &ev) < 0)
        return 0;
    switch (ev.kind) {
    case COORD_ELECTOR_LEADER:
        snprintf(p->leader_ep, sizeof p->leader_ep, "%s", ev.endpoint);
        p->leader_epoch = ev.epoch;
        if (p->leader && p->epoch == ev.epoch)
            return 0;
        coord_standby_destroy(&p->standby);
        s_stop_sched(p);
        p->leader = true;
        p->epoch = ev.epoch;
        p->previous_epoch = ev.previous_epoch;
        p->etcd_cluster_id = ev.etcd_cluster_id;
        const char *what = NULL;
        if (s_start_sched(p, &what) < 0) {
            fprintf(stderr,
                    "kvtier coordinator: %s: elected (epoch %" PRIu64 ") but the %s actor did "
                    "not start (meta endpoint %s): exiting\n",
                    p->name, ev.epoch, what, p->endpoint);
            return -1;
        }
        bus_info(S_COMP, "%s: leader, epoch %" PRIu64 ", scheduler on %s", p->name, ev.epoch,
                 p->endpoint);
        return 0;
    case COORD_ELECTOR_LOST:
        p->leader = false;
        p->leader_ep[0] = '\0';
        p->leader_epoch = 0;
        s_stop_sched(p);
        bus_warn(S_COMP, "%s: leadership lost (epoch %" PRIu64 "): standby", p->name, ev.epoch);
        if (!p->standby && s_start_standby(p) < 0) {
            fprintf(stderr,
                    "kvtier coordinator: %s: the standby actor did not start (cannot bind %s?): "
                    "exiting\n",
                    p->name, p->endpoint);
            return -1;
        }
        return 0;
    case COORD_ELECTOR_FOLLOWER:
        snprintf(p->leader_ep, sizeof p->leader_ep, "%s", ev.endpoint);
        p->leader_epoch = ev.epoch;
        if (ev.etcd_cluster_id)
            p->etcd_cluster_id = ev.etcd_cluster_id;
        if (p->standby)
            coord_standby_set_leader(p->standby, ev.endpoint, ev.epoch, p->etcd_cluster_id);
        return 0;
    }
    return 0;
}

/* --- membership --- */

/* A pool member's registration must name a pool of the file, an id of its range
 * and its kind; its name must not be a tier's or a pool's. The tier id, or 0. */
static uint32_t s_check_member(const s_proc_t *p, const kvtier_TierInfo *t)
{
    const coord_pool_config_t *pool = coord_config_pool(&p->cfg, t->pool);
    if (!pool)
        bus_warn(S_COMP,
                 "tier %s registered as a member of pool %s, which the deployment file does not "
                 "have: ignored",
                 t->name, t->pool);
    else if (t->tier_id < pool->first_id || t->tier_id - pool->first_id >= pool->max_members)
        bus_warn(S_COMP,
                 "pool %s member %s registered with tier id %u, not of the pool's %u..%u: "
                 "ignored",
                 pool->name, t->name, t->tier_id, pool->first_id,
                 pool->first_id + pool->max_members - 1);
    else if (strcmp(t->kind_name, pool->member.kind_name) != 0)
        bus_warn(S_COMP, "pool %s member %s registered as kind %s, the pool's is %s: ignored",
                 pool->name, t->name, t->kind_name[0] ? t->kind_name : "?", pool->member.kind_name);
    else if (coord_config_pool(&p->cfg, t->name))
        bus_warn(S_COMP, "pool %s member %s has a pool's name: ignored", pool->name, t->name);
    else
        return t->tier_id;
    return 0;
}

/* A registration must match the deployment file (same name, id and kind). */
static const coord_tier_config_t *s_check_tier(const s_proc_t *p, const kvtier_TierInfo *t)
{
    const coord_tier_config_t *ct = coord_config_tier(&p->cfg, t->name);
    const char *kind = t->kind_name;
    if (!ct)
        bus_warn(S_COMP, "tier %s registered in etcd is not in the deployment file%s: ignored",
                 t->name, p->cfg.n_pools ? " nor a pool's member" : "");
    else if (t->pool[0])
        bus_warn(S_COMP,
                 "tier %s registered as a member of pool %s, but it is a tier of the "
                 "deployment file: ignored",
                 t->name, t->pool);
    else if (ct->id != t->tier_id)
        bus_warn(S_COMP, "tier %s registered with id %u, the deployment file says %u: ignored",
                 t->name, t->tier_id, ct->id);
    else if (strcmp(kind, ct->kind_name) != 0)
        bus_warn(S_COMP, "tier %s registered as kind %s, the deployment file says %s: ignored",
                 t->name, kind[0] ? kind : "?", ct->kind_name);
    else
        return ct;
    return NULL;
}

static void s_on_membership(s_proc_t *p)
{
    coord_tier_change_t ch;
    if (coord_membership_recv(p->membership, &ch) < 0)
        return;
    uint32_t id = 0;
    if (ch.tier.pool[0] && !coord_config_tier(&p->cfg, ch.tier.name))
        id = s_check_member(p, &ch.tier);
    else {
        const coord_tier_config_t *ct = s_check_tier(p, &ch.tier);
        id = ct ? ct->id : 0;
    }
    if (!id)
        return;
    s_tier_t *slot = &p->tiers[id - 1];
    if (!ch.up && !slot->up)
        return;
    /* a member's DOWN after another member took its id (the watch saw them in that
     * order) is the old one's: nothing to do */
    if (!ch.up && strcmp(slot->info.name, ch.tier.name) != 0)
        return;
    slot->up = ch.up;
    slot->info = ch.tier;
    slot->info.up = ch.up;
    if (p->sched)
        sched_actor_tier_change(p->sched, ch.up, &slot->info);
    if (p->standby)
        coord_standby_tier(p->standby, ch.up, &slot->info);
}

/* --- start and stop --- */

static int s_parse(int argc, char **argv, const char **file, const char **etcd, const char **name,
                   const char **endpoint, const char **advertise, const char **cert,
                   const char **secret)
{
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            s_usage(stdout);
            return 1;
        }
        if ((r = coord_proc_opt(argc, argv, &i, "--config", "-c", &v)) != 0)
            *file = v;
        else if ((r = coord_proc_opt(argc, argv, &i, "--etcd", NULL, &v)) != 0)
            *etcd = v;
        else if ((r = coord_proc_opt(argc, argv, &i, "--name", NULL, &v)) != 0)
            *name = v;
        else if ((r = coord_proc_opt(argc, argv, &i, "--endpoint", NULL, &v)) != 0)
            *endpoint = v;
        else if ((r = coord_proc_opt(argc, argv, &i, "--advertise", NULL, &v)) != 0)
            *advertise = v;
        else if ((r = coord_proc_opt(argc, argv, &i, "--cert", NULL, &v)) != 0)
            *cert = v;
        else if ((r = coord_proc_opt(argc, argv, &i, "--secret", NULL, &v)) != 0)
            *secret = v;
        else {
            fprintf(stderr, "kvtier coordinator: unknown option \"%s\"\n", argv[i]);
            s_usage(stderr);
            return -1;
        }
        if (r < 0) {
            fprintf(stderr, "kvtier coordinator: %s needs a value\n", argv[i]);
            return -1;
        }
    }
    if (!*file) {
        fprintf(stderr, "kvtier coordinator: -c FILE is required\n");
        s_usage(stderr);
        return -1;
    }
    return 0;
}

/* The names of the deployment's coordinators, for messages: "a, b, c". */
static void s_list_names(const coord_config_t *c, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < c->n_coordinators && off < len; i++) {
        int n = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", c->coordinators[i].name);
        if (n < 0)
            break;
        off += (size_t)n;
    }
}

/* The coordinator entry this process runs: --name's in a "coordinators" list (then
 * --name is required, unless --endpoint starts one by hand), else the shorthand's. */
static int s_pick_entry(const s_proc_t *p, const char *name, const char *endpoint,
                        const coord_coordinator_config_t **out)
{
    const coord_config_t *c = &p->cfg;
    char names[COORD_MAX_COORDINATORS * COORD_TIER_NAME_MAX];
    *out = c->coordinators_listed ? coord_config_coordinator(c, name) : &c->coordinators[0];
    if (*out || endpoint)
        return 0;
    s_list_names(c, names, sizeof names);
    if (name)
        fprintf(stderr,
                "kvtier coordinator: --name %s: the deployment lists no such coordinator "
                "(coordinators: %s); give one of them, or --endpoint EP for one started by "
                "hand\n",
                name, names);
    else
        fprintf(stderr,
                "kvtier coordinator: the deployment lists %u coordinators (%s): say which one "
                "this is with --name NAME\n",
                c->n_coordinators, names);
    return -1;
}

static int s_setup_names(s_proc_t *p, const char *name, const char *endpoint, const char *advertise)
{
    if (name) {
        if (!name[0] || strlen(name) >= sizeof p->name || strchr(name, '/')) {
            fprintf(stderr, "kvtier coordinator: --name: 1..%zu characters, no '/'\n",
                    sizeof p->name - 1);
            return -1;
        }
        snprintf(p->name, sizeof p->name, "%s", name);
    } else {
        char host[48] = "coordinator";
        gethostname(host, sizeof host);
        host[sizeof host - 1] = '\0';
        snprintf(p->name, sizeof p->name, "%s-%ld", host, (long)getpid());
    }
    const coord_coordinator_config_t *e = NULL;
    if (s_pick_entry(p, name, endpoint, &e) < 0)
        return -1;
    const char *ep = endpoint ? endpoint : e->endpoint;
    char why[BUS_ENDPOINT_MAX + 64];
    if (bus_endpoint_check(ep, BUS_ENDPOINT_BIND, why, sizeof why) < 0 ||
        strlen(ep) > COORD_WIRE_ENDPOINT_MAX) {
        fprintf(stderr, "kvtier coordinator: --endpoint: %s\n",
                strlen(ep) > COORD_WIRE_ENDPOINT_MAX ? "too long" : why);
        return -1;
    }
    snprintf(p->endpoint, sizeof p->endpoint, "%s", ep);
    /* the advertised endpoint: --advertise, else --endpoint's (bound), else the entry's */
    const char *adv = advertise ? advertise : endpoint ? endpoint : e->advertise;
    p->advertise_bound = strcmp(adv, ep) == 0;
    if (!p->advertise_bound &&
        (bus_endpoint_check(adv, BUS_ENDPOINT_CONNECT, why, sizeof why) < 0 ||
         strlen(adv) > COORD_WIRE_ENDPOINT_MAX)) {
        fprintf(stderr, "kvtier coordinator: --advertise: %s\n",
                strlen(adv) > COORD_WIRE_ENDPOINT_MAX ? "too long" : why);
        return -1;
    }
    snprintf(p->advertise, sizeof p->advertise, "%s", adv);
    if (e) /* the entry's metrics address (coordinator.metrics by default) */
        snprintf(p->cfg.metrics, sizeof p->cfg.metrics, "%s", e->metrics);
    return 0;
}

/* The metrics actor and its etcd reader (issue 10 §2), when coordinator.metrics
 * names an address. 0, or -1 after a stderr line. */
static int s_start_metrics(s_proc_t *p, const char *const *eps)
{
    const coord_config_t *c = &p->cfg;
    if (!c->metrics[0])
        return 0;
    /* its own meta endpoint as bound, unless that binds "*": then as advertised */
    const char *own = bus_endpoint_check(p->endpoint, BUS_ENDPOINT_CONNECT, NULL, 0) == 0
                          ? p->endpoint
                          : p->advertise;
    metrics_config_t mc = {.role = METRICS_ROLE_COORDINATOR,
                           .name = p->name,
                           .cluster = c->cluster,
                           .bind = c->metrics,
                           .sched_endpoint = own,
                           .max_connections = c->metrics_max_connections,
                           .timeout_s = c->metrics_timeout_s,
                           .refresh_ms = c->metrics_refresh_ms,
                           .sample_ms = c->metrics_sample_ms,
                           .samples = c->metrics_samples,
                           .max_instances = c->metrics_max_instances};
    coord_proc_block_signals(true);
    p->metrics = metrics_new(&mc);
    if (p->metrics && metrics_address(p->metrics, p->metrics_addr, sizeof p->metrics_addr) < 0)
        zactor_destroy(&p->metrics);
    coord_metrics_feed_config_t fc = {.etcd_endpoints = eps,
                                      .n_etcd = c->n_etcd,
                                      .cluster = c->cluster,
                                      .name = p->name,
                                      .address = p->metrics_addr,
                                      .lease_ttl_s = coord_config_lease_ttl_s(c),
                                      .interval_ms = c->metrics_refresh_ms};
    p->metrics_feed = p->metrics ? coord_metrics_feed_new(&fc) : NULL;
    coord_proc_block_signals(false);
    if (!p->metrics || !p->metrics_feed) {
        fprintf(stderr,
                "kvtier coordinator: coordinator.metrics: the metrics %s did not start "
                "(cannot listen on %s? see the log above)\n",
                p->metrics ? "feed" : "actor", c->metrics);
        return -1;
    }
    bus_info(S_COMP, "%s: metrics on http://%s/metrics", p->name, p->metrics_addr);
    s_metrics_role(p);
    return 0;
}

/* 0, or -1 after a stderr line naming the actor that did not start. */
static int s_start_actors(s_proc_t *p)
{
    if (s_start_standby(p) < 0) {
        fprintf(stderr,
                "kvtier coordinator: the standby actor did not start (cannot bind the meta "
                "endpoint %s?)\n",
                p->endpoint);
        return -1;
    }
    /* An ephemeral port is resolved now and stays ours: the scheduler binds it too. */
    if (coord_standby_endpoint(p->standby, p->endpoint, sizeof p->endpoint) < 0) {
        fprintf(stderr, "kvtier coordinator: the standby actor does not answer\n");
        return -1;
    }
    if (p->advertise_bound)
        snprintf(p->advertise, sizeof p->advertise, "%s", p->endpoint);
    const char *eps[COORD_ETCD_MAX_ENDPOINTS];
    for (uint32_t i = 0; i < p->cfg.n_etcd; i++)
        eps[i] = p->cfg.etcd[i];
    coord_membership_config_t mc = {
        .etcd_endpoints = eps, .n_etcd = p->cfg.n_etcd, .cluster = p->cfg.cluster};
    snprintf(p->elector_inbox, sizeof p->elector_inbox, "inproc://coord-elector-%ld",
             (long)getpid());
    coord_elector_config_t ec = {.etcd_endpoints = eps,
                                 .n_etcd = p->cfg.n_etcd,
                                 .cluster = p->cfg.cluster,
                                 .name = p->name,
                                 .endpoint = p->advertise,
                                 .lease_ttl_s = coord_config_lease_ttl_s(&p->cfg),
                                 .lease_until_ms = &p->lease_until,
                                 .standbys = &p->standbys,
                                 .inbox_endpoint = p->elector_inbox};
    /* Signals wait for the main loop: one during a start would cut its handshake short. */
    coord_registry_config_t regc = {
        .etcd_endpoints = eps, .n_etcd = p->cfg.n_etcd, .cluster = p->cfg.cluster};
    coord_proc_block_signals(true);
    p->membership = coord_membership_new(&mc);
    p->elector = p->membership ? coord_elector_new(&ec) : NULL;
    p->registry = p->elector ? coord_registry_new(&regc) : NULL;
    coord_proc_block_signals(false);
    if (!p->membership || !p->elector || !p->registry ||
        coord_registry_endpoint(p->registry, p->registry_ep, sizeof p->registry_ep) < 0) {
        fprintf(stderr, "kvtier coordinator: the %s actor did not start (see the log above)\n",
                !p->membership ? "membership"
                : !p->elector  ? "elector"
                               : "registry");
        return -1;
    }
    return s_start_metrics(p, eps);
}

static int s_run(s_proc_t *p)
{
    zpoller_t *poller = zpoller_new(p->elector, p->membership, NULL);
    if (!poller || (p->metrics_feed && zpoller_add(poller, p->metrics_feed) < 0)) {
        zpoller_destroy(&poller);
        return -1;
    }
    int rc = 0;
    while (rc == 0 && !coord_proc_interrupted()) {
        void *which = zpoller_wait(poller, S_POLL_MS);
        if (which == p->elector)
            rc = s_on_elector(p);
        else if (which == p->membership)
            s_on_membership(p);
        else if (which == p->metrics_feed && p->metrics_feed) {
            zmsg_t *m = zmsg_recv(p->metrics_feed); /* the metrics actor's own messages */
            if (m && zmsg_send(&m, p->metrics) < 0)
                zmsg_destroy(&m);
        }
    }
    zpoller_destroy(&poller);
    return rc;
}

static void s_stop(s_proc_t *p)
{
    s_stop_sched(p);
    coord_standby_destroy(&p->standby);
    coord_elector_destroy(&p->elector); /* revokes the lease: leader key gone at once */
    coord_membership_destroy(&p->membership);
    zactor_destroy(&p->registry); /* after the scheduler: its last specs are written */
    coord_metrics_feed_destroy(&p->metrics_feed);
    zactor_destroy(&p->metrics);
    zactor_destroy(&p->faults);
}

/* security.curve (coord_curve.h): CURVE on with this coordinator's pair (--cert,
 * or <keys>/<--name>.key, or <keys>/coordinator.key), the grants resolved. 0, or
 * -1 after a stderr line. */
static int s_start_curve(s_proc_t *p, const char *name, const char *cert)
{
    char why[768];
    if (coord_curve_start(&p->cfg.curve, name ? name : "coordinator", cert, true, why, sizeof why) <
            0 ||
        coord_curve_sched_acl(&p->cfg.curve, &p->acl_on, p->acl, &p->n_acl, why, sizeof why) < 0) {
        fprintf(stderr, "kvtier coordinator: %s\n", why);
        bus_curve_stop();
        return -1;
    }
    return 0;
}

/* glibc arenas for the coordinator's threads. Every leadership term starts a new
 * scheduler, publisher, gc, reclaimer and migrator thread, and glibc gives new
 * threads arenas of their own (up to 8 per core) that keep what they freed: an idle
 * coordinator measured 32 MiB at start, then 41, 55, 65, 74, 74, 80, 80, 80 MiB after
 * eight terms; with two arenas 43, 45, 48, then 48 MiB flat (etcd paused 5 s per
 * term). The actors allocate at start, not per request (STYLE.md), so two arenas
 * cost no contention worth measuring. */
#define S_MALLOC_ARENAS 2

int coord_main(int argc, char **argv)
{
    const char *file = NULL, *etcd = NULL, *name = NULL, *endpoint = NULL, *cert = NULL;
    const char *secret = NULL, *advertise = NULL;
    (void)mallopt(M_ARENA_MAX, S_MALLOC_ARENAS); /* before any thread starts */
    int r = s_parse(argc, argv, &file, &etcd, &name, &endpoint, &advertise, &cert, &secret);
    if (r != 0)
        return r > 0 ? COORD_EXIT_OK : COORD_EXIT_USAGE;
    s_proc_t *p = calloc(1, sizeof *p);
    if (!p)
        return COORD_EXIT_FAIL;
    int rc = COORD_EXIT_USAGE;
    if (coord_proc_config("kvtier coordinator", file, etcd, &p->cfg) < 0 ||
        coord_proc_secret("kvtier coordinator", &p->cfg, secret, p->secret) < 0 ||
        s_setup_names(p, name, endpoint, advertise) < 0 || s_start_curve(p, name, cert) < 0)
        goto out;
    zsys_init(); /* installs the SIGINT/SIGTERM handler that sets zsys_interrupted */
    rc = COORD_EXIT_FAIL;
    char ferr[BUS_CONFIG_ERR_MAX];
    if (bus_fault_start(&p->cfg.faults, name ? name : "coordinator", &p->faults, ferr,
                        sizeof ferr) < 0) {
        fprintf(stderr, "kvtier coordinator: %s\n", ferr);
        goto out_stop;
    }
    if (s_start_actors(p) < 0)
        goto out_stop;
    bus_info(S_COMP, "%s: cluster %s, meta endpoint %s (advertised %s), etcd %s%s", p->name,
             p->cfg.cluster, p->endpoint, p->advertise, p->cfg.etcd[0],
             p->cfg.n_etcd > 1 ? ",..." : "");
    rc = s_run(p) == 0 ? COORD_EXIT_OK : COORD_EXIT_FAIL;
    bus_info(S_COMP, "%s: stopping", p->name);
out_stop:
    s_stop(p);
out:
    bus_curve_stop();
    bus_secret_wipe(p->secret, sizeof p->secret);
    free(p);
    return rc;
}
