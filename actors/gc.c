/* gc.c — the gc actor (see gc.h): one round at a time — ClusterInfo and GcScan to
 * the scheduler's internal plane, Probe to the tier actors, GcDrop of what is
 * definitely missing — then a cooldown. Owns one bus_client to the scheduler and
 * one per tier actor endpoint; allocates only when a tier's endpoint changes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_client.h"
#include "bus_actor.h"
#include "bus_log.h"
#include "gc.h"

#define S_LOG "gc"
#define S_MAX_TIERS BUS_MAX_TIERS
#define S_EP_MAX BUS_TIER_ENDPOINT_MAX

_Static_assert(BUS_MAX_GC_DROP >= GC_MAX_PAGE, "a probed page fits one GcDrop");

typedef enum { S_IDLE = 0, S_INFO, S_SCAN, S_PROBE, S_DROP } s_phase_t;

struct gc;

typedef struct {
    struct gc *self;
    bool up;
    uint64_t epoch;
    char endpoint[S_EP_MAX];
    bus_client_t *client;
    char client_ep[S_EP_MAX];
    /* the probe of this round */
    uint32_t n;
    uint64_t slots[GC_MAX_PAGE];
    uint8_t keys[GC_MAX_PAGE][BUS_KEY_LEN];
    uint32_t ref[GC_MAX_PAGE]; /* index in gc.refs */
    bool present[GC_MAX_PAGE];
    bus_arrays_t rarr;
    uint32_t waiting;        /* replies still due: the probe and the epoch check */
    bool probe_ok, epoch_ok; /* the probe answered; the answering actor has t->epoch */
} s_tier_t;

typedef struct gc {
    gc_config_t cfg;
    zsock_t *pipe;
    zloop_t *loop;
    bus_client_t *sched;
    kvtier_Envelope *env;
    s_tier_t tiers[S_MAX_TIERS];
    s_phase_t phase;
    uint32_t outstanding;
    int64_t next_round;
    uint64_t cursor;
    uint32_t n_refs;
    kvtier_BlockRef refs[GC_MAX_PAGE];
    uint64_t epochs[GC_MAX_PAGE];
    bool missing[GC_MAX_PAGE];
    gc_stats_t st;
} gc_t;

static void s_round_end(gc_t *self, bool ok)
{
    if (!ok)
        self->st.sched_failures++;
    self->st.rounds++;
    self->phase = S_IDLE;
    self->next_round = zclock_mono() + self->cfg.interval_ms;
}

/* ---- drop ---- */

static void s_drop_done(void *arg, bus_reply_t *r)
{
    gc_t *self = arg;
    bool ok = r->status.code == kvtier_StatusCode_STATUS_OK && r->env &&
              r->env->which_body == kvtier_Envelope_gc_drop_rep_tag;
    if (ok)
        self->st.dropped += r->env->body.gc_drop_rep.dropped;
    else
        bus_warn(S_LOG, "GcDrop failed: %s", r->status.message);
    s_round_end(self, ok);
}

static void s_probes_done(gc_t *self)
{
    kvtier_Envelope *env = self->env;
    bus_env_init(env, kvtier_Envelope_gc_drop_req_tag, "gc");
    kvtier_GcDropRequest *d = &env->body.gc_drop_req;
    for (uint32_t i = 0; i < self->n_refs; i++) {
        if (!self->missing[i])
            continue;
        d->missing[d->missing_count++] = self->refs[i];
        d->epochs[d->epochs_count++] = self->epochs[i];
    }
    if (d->missing_count == 0) {
        s_round_end(self, true);
        return;
    }
    kvtier_Status st;
    if (bus_client_send(self->sched, env, NULL, NULL, 0, self->cfg.probe_timeout_ms, NULL,
                        s_drop_done, self, NULL, &st) < 0) {
        bus_warn(S_LOG, "GcDrop not sent: %s", st.message);
        s_round_end(self, false);
        return;
    }
    self->phase = S_DROP;
}

/* ---- probes ---- */

/* Both replies of a tier are in: its answers count only when the actor that
 * answered is the incarnation the scan saw (ProbeRequest carries no epoch fence:
 * another actor now bound at the same endpoint must not make blocks "missing"). */
static void s_tier_settle(gc_t *self, s_tier_t *t)
{
    if (t->probe_ok && !t->epoch_ok) {
        self->st.epoch_mismatches += t->n;
    } else if (t->probe_ok) {
        for (uint32_t i = 0; i < t->n; i++) {
            self->st.probed++;
            if (!t->present[i]) {
                self->missing[t->ref[i]] = true;
                self->st.missing++;
            }
        }
    } else {
        /* not an answer about the blocks: nothing is dropped */
        self->st.probe_failures += t->n;
    }
    t->n = 0;
    if (--self->outstanding == 0)
        s_probes_done(self);
}

static void s_probe_done(void *arg, bus_reply_t *r)
{
    s_tier_t *t = arg;
    t->probe_ok = r->status.code == kvtier_StatusCode_STATUS_OK && r->env &&
                  r->env->which_body == kvtier_Envelope_probe_rep_tag && t->rarr.mask.n == t->n;
    if (!t->probe_ok)
        bus_debug(S_LOG, "probe of %u locations at %s failed: %s", t->n, t->client_ep,
                  r->status.message);
    if (--t->waiting == 0)
        s_tier_settle(t->self, t);
}

static void s_epoch_done(void *arg, bus_reply_t *r)
{
    s_tier_t *t = arg;
    t->epoch_ok = r->status.code == kvtier_StatusCode_STATUS_OK && r->env &&
                  r->env->which_body == kvtier_Envelope_inventory_rep_tag &&
                  r->env->body.inventory_rep.has_tier &&
                  r->env->body.inventory_rep.tier.epoch == t->epoch;
    if (--t->waiting == 0)
        s_tier_settle(t->self, t);
}

static int s_on_client(zloop_t *loop, zsock_t *sock, void *arg)
{
    (void)loop;
    (void)sock;
    bus_client_dispatch(arg, 0);
    return 0;
}

static void s_client_close(gc_t *self, s_tier_t *t)
{
    if (!t->client)
        return;
    bus_client_fail_all(t->client, kvtier_StatusCode_STATUS_UNAVAILABLE, "gc stopping");
    zloop_reader_end(self->loop, bus_client_sock(t->client));
    bus_client_destroy(&t->client);
}

/* The tier's client, (re)opened when its endpoint changed. */
static bus_client_t *s_tier_client(gc_t *self, s_tier_t *t)
{
    if (t->client && strcmp(t->client_ep, t->endpoint) == 0)
        return t->client;
    s_client_close(self, t);
    bus_client_config_t cc = {
        .name = "gc", .max_in_flight = 4, .default_timeout_ms = self->cfg.probe_timeout_ms};
    t->client = bus_client_new(t->endpoint, &cc);
    if (!t->client)
        return NULL;
    if (zloop_reader(self->loop, bus_client_sock(t->client), s_on_client, t->client) < 0) {
        bus_client_destroy(&t->client);
        return NULL;
    }
    snprintf(t->client_ep, sizeof t->client_ep, "%s", t->endpoint);
    return t->client;
}

static void s_send_probes(gc_t *self)
{
    self->phase = S_PROBE;
    self->outstanding = 0;
    for (uint32_t i = 0; i < self->n_refs; i++) {
        const kvtier_BlockRef *b = &self->refs[i];
        s_tier_t *t =
            b->tier_id >= 1 && b->tier_id <= S_MAX_TIERS ? &self->tiers[b->tier_id - 1] : NULL;
        /* a tier that is not up, or that changed incarnation since the scan, is
         * probed in a later round */
        if (!t || !t->up || !t->endpoint[0] || t->epoch != self->epochs[i])
            continue;
        t->slots[t->n] = b->slot;
        memcpy(t->keys[t->n], b->key, 16);
        t->ref[t->n++] = i;
    }
    for (uint32_t k = 0; k < S_MAX_TIERS; k++) {
        s_tier_t *t = &self->tiers[k];
        if (t->n == 0)
            continue;
        bus_client_t *c = s_tier_client(self, t);
        kvtier_Envelope *env = self->env;
        bus_env_init(env, kvtier_Envelope_probe_req_tag, "gc");
        env->body.probe_req.tier_id = k + 1;
        bus_arrays_t arr = {
            .slots = {.v = t->slots, .n = t->n, .cap = GC_MAX_PAGE},
            .keys = {.keys = t->keys, .n = t->n, .cap = GC_MAX_PAGE},
        };
        t->rarr = (bus_arrays_t){.mask = {.v = t->present, .cap = GC_MAX_PAGE}};
        kvtier_Status st;
        if (!c || bus_client_send(c, env, &arr, NULL, 0, self->cfg.probe_timeout_ms, &t->rarr,
                                  s_probe_done, t, NULL, &st) < 0) {
            self->st.probe_failures += t->n;
            t->n = 0;
            continue;
        }
        self->outstanding++;
        t->probe_ok = t->epoch_ok = false;
        t->waiting = 2;
        /* then an empty Inventory page (cursor past the end): its TierInfo says which
         * incarnation answers on this connection, after the probe */
        bus_env_init(env, kvtier_Envelope_inventory_req_tag, "gc");
        env->body.inventory_req.tier_id = k + 1;
        env->body.inventory_req.cursor = UINT64_MAX;
        env->body.inventory_req.max_entries = 1;
        if (bus_client_send(c, env, NULL, NULL, 0, self->cfg.probe_timeout_ms, NULL, s_epoch_done,
                            t, NULL, &st) < 0)
            t->waiting = 1; /* epoch unknown: the probe's answer will not count */
    }
    if (self->outstanding == 0)
        s_probes_done(self);
}

/* ---- scan ---- */

static void s_scan_done(void *arg, bus_reply_t *r)
{
    gc_t *self = arg;
    if (r->status.code != kvtier_StatusCode_STATUS_OK || !r->env ||
        r->env->which_body != kvtier_Envelope_gc_scan_rep_tag) {
        bus_warn(S_LOG, "GcScan failed: %s", r->status.message);
        s_round_end(self, false);
        return;
    }
    const kvtier_GcScanReply *g = &r->env->body.gc_scan_rep;
    self->cursor = g->next_cursor;
    self->st.passes += g->wrapped;
    self->st.aborted_writes += g->aborted_writes;
    self->st.released_pins += g->released_pins;
    self->n_refs = 0;
    if (g->to_probe_epochs_count != g->to_probe_count) {
        bus_warn(S_LOG, "GcScan reply without one epoch per location: round skipped");
        s_round_end(self, false);
        return;
    }
    for (pb_size_t i = 0; i < g->to_probe_count && i < GC_MAX_PAGE; i++) {
        self->refs[i] = g->to_probe[i];
        self->epochs[i] = g->to_probe_epochs[i];
        self->missing[i] = false;
        self->n_refs++;
    }
    if (self->n_refs == 0) {
        s_round_end(self, true);
        return;
    }
    s_send_probes(self);
}

static void s_info_done(void *arg, bus_reply_t *r)
{
    gc_t *self = arg;
    if (r->status.code != kvtier_StatusCode_STATUS_OK || !r->env ||
        r->env->which_body != kvtier_Envelope_cluster_info_rep_tag) {
        bus_warn(S_LOG, "ClusterInfo failed: %s", r->status.message);
        s_round_end(self, false);
        return;
    }
    const kvtier_ClusterInfoReply *ci = &r->env->body.cluster_info_rep;
    for (uint32_t k = 0; k < S_MAX_TIERS; k++)
        self->tiers[k].up = false;
    for (pb_size_t i = 0; i < ci->tiers_count; i++) {
        const kvtier_TierInfo *ti = &ci->tiers[i];
        if (ti->tier_id < 1 || ti->tier_id > S_MAX_TIERS)
            continue;
        s_tier_t *t = &self->tiers[ti->tier_id - 1];
        t->up = ti->up;
        t->epoch = ti->epoch;
        snprintf(t->endpoint, sizeof t->endpoint, "%s", ti->endpoint);
    }
    kvtier_Envelope *env = self->env;
    bus_env_init(env, kvtier_Envelope_gc_scan_req_tag, "gc");
    env->body.gc_scan_req.cursor = self->cursor;
    env->body.gc_scan_req.max_entries = self->cfg.page;
    kvtier_Status st;
    if (bus_client_send(self->sched, env, NULL, NULL, 0, self->cfg.probe_timeout_ms, NULL,
                        s_scan_done, self, NULL, &st) < 0) {
        bus_warn(S_LOG, "GcScan not sent: %s", st.message);
        s_round_end(self, false);
        return;
    }
    self->phase = S_SCAN;
}

static void s_round_start(gc_t *self)
{
    kvtier_Envelope *env = self->env;
    bus_env_init(env, kvtier_Envelope_cluster_info_req_tag, "gc");
    kvtier_Status st;
    if (bus_client_send(self->sched, env, NULL, NULL, 0, self->cfg.probe_timeout_ms, NULL,
                        s_info_done, self, NULL, &st) < 0) {
        bus_warn(S_LOG, "ClusterInfo not sent: %s", st.message);
        s_round_end(self, false);
        return;
    }
    self->phase = S_INFO;
}

/* ---- loop ---- */

static int s_on_tick(zloop_t *loop, int timer_id, void *arg)
{
    (void)loop;
    (void)timer_id;
    gc_t *self = arg;
    bus_client_dispatch(self->sched, 0); /* deadlines */
    for (uint32_t k = 0; k < S_MAX_TIERS; k++)
        if (self->tiers[k].client)
            bus_client_dispatch(self->tiers[k].client, 0);
    if (self->phase == S_IDLE && zclock_mono() >= self->next_round)
        s_round_start(self);
    return 0;
}

static int s_on_pipe(zloop_t *loop, zsock_t *pipe, void *arg)
{
    (void)loop;
    gc_t *self = arg;
    return bus_actor_pipe(pipe, S_LOG, &self->st, sizeof self->st);
}

static void s_self_destroy(gc_t **self_p)
{
    gc_t *self = *self_p;
    if (!self)
        return;
    zloop_destroy(&self->loop);
    for (uint32_t k = 0; k < S_MAX_TIERS; k++)
        bus_client_destroy(&self->tiers[k].client);
    bus_client_destroy(&self->sched);
    free(self->env);
    free(self);
    *self_p = NULL;
}

static gc_t *s_self_new(zsock_t *pipe, const gc_config_t *cfg)
{
    if (!cfg || !cfg->sched_endpoint[0] || cfg->page > GC_MAX_PAGE) {
        bus_error(S_LOG, "no scheduler endpoint, or page above %u", GC_MAX_PAGE);
        return NULL;
    }
    gc_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->cfg = *cfg;
    if (!self->cfg.interval_ms)
        self->cfg.interval_ms = 1000;
    if (!self->cfg.page)
        self->cfg.page = GC_MAX_PAGE;
    if (!self->cfg.probe_timeout_ms)
        self->cfg.probe_timeout_ms = 2000;
    self->pipe = pipe;
    for (uint32_t k = 0; k < S_MAX_TIERS; k++)
        self->tiers[k].self = self;
    self->env = calloc(1, sizeof *self->env);
    self->loop = zloop_new();
    bus_client_config_t cc = {
        .name = "gc", .max_in_flight = 4, .default_timeout_ms = self->cfg.probe_timeout_ms};
    self->sched = bus_client_new(self->cfg.sched_endpoint, &cc);
    uint32_t tick =
        (self->cfg.interval_ms < self->cfg.probe_timeout_ms ? self->cfg.interval_ms
                                                            : self->cfg.probe_timeout_ms) /
        4;
    tick = tick < 5 ? 5 : tick > 100 ? 100 : tick;
    if (!self->env || !self->loop || !self->sched ||
        zloop_reader(self->loop, pipe, s_on_pipe, self) < 0 ||
        zloop_reader(self->loop, bus_client_sock(self->sched), s_on_client, self->sched) < 0 ||
        zloop_timer(self->loop, tick, 0, s_on_tick, self) < 0) {
        bus_error(S_LOG, "cannot start (scheduler endpoint '%s')", self->cfg.sched_endpoint);
        s_self_destroy(&self);
        return NULL;
    }
    zloop_set_nonstop(self->loop, true);
    self->next_round = zclock_mono() + self->cfg.interval_ms;
    return self;
}

static void s_actor(zsock_t *pipe, void *args)
{
    gc_t *self = s_self_new(pipe, args);
    if (bus_actor_ready(pipe, self != NULL) < 0)
        return;
    bus_info(S_LOG, "rounds of %u locations every %u ms (scheduler %s)", self->cfg.page,
             self->cfg.interval_ms, self->cfg.sched_endpoint);
    zloop_start(self->loop);
    s_self_destroy(&self);
}

zactor_t *gc_actor_new(const gc_config_t *cfg)
{
    return bus_actor_new(s_actor, (void *)cfg);
}

int gc_actor_stats(zactor_t *actor, gc_stats_t *out)
{
    return bus_actor_stats(actor, out, sizeof *out);
}
