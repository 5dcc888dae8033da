/* reclaimer.c — the reclaimer actor (see reclaimer.h): a timer starts a pass — a
 * QuotaEnforce when quotas are set, then the configured tiers — one request
 * (QuotaEnforce or ReclaimCandidates) in flight at a time, and keeps per tier whether it is
 * draining (hysteresis between the watermarks). Owns one bus_client to the
 * scheduler's internal plane; allocates nothing after start. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_client.h"
#include "bus_actor.h"
#include "bus_log.h"
#include "reclaimer.h"

#define S_LOG "reclaimer"

typedef struct {
    zsock_t *pipe;
    zloop_t *loop;
    reclaimer_config_t cfg;
    bus_client_t *sched;
    kvtier_Envelope *env;
    bool in_flight;
    uint32_t cur;         /* config index of the tier being served in this pass */
    uint32_t burst;       /* requests sent for it in this pass */
    bool pass;            /* a pass over the tiers is running */
    uint32_t quota_burst; /* QuotaEnforce requests sent in this pass */
    bool draining[RECLAIMER_MAX_TIERS];
    bool has_next[RECLAIMER_MAX_TIERS]; /* learnt from the replies' next_tier_id */
    reclaimer_stats_t st;
} s_self_t;

static int s_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

int reclaimer_config_check(const reclaimer_config_t *c, char *err, size_t errlen)
{
    if (!c || !c->sched_endpoint[0])
        return s_fail(err, errlen, "reclaimer: no scheduler endpoint");
    if (c->quota_low_permille > 1000)
        return s_fail(err, errlen, "reclaimer: quota_low %u permille above 1000",
                      c->quota_low_permille);
    if (c->batch > RECLAIMER_MAX_BATCH)
        return s_fail(err, errlen, "reclaimer: batch %u above %u", c->batch, RECLAIMER_MAX_BATCH);
    if (c->n_tiers > RECLAIMER_MAX_TIERS)
        return s_fail(err, errlen, "reclaimer: %u tiers, at most %u", c->n_tiers,
                      RECLAIMER_MAX_TIERS);
    for (uint32_t i = 0; i < c->n_tiers; i++) {
        const reclaimer_tier_t *t = &c->tiers[i];
        if (t->tier_id < 1 || t->tier_id > RECLAIMER_MAX_TIERS)
            return s_fail(err, errlen, "reclaimer: tiers[%u].tier_id %u out of 1..%u", i,
                          t->tier_id, RECLAIMER_MAX_TIERS);
        for (uint32_t j = 0; j < i; j++)
            if (c->tiers[j].tier_id == t->tier_id)
                return s_fail(err, errlen, "reclaimer: tier id %u listed twice", t->tier_id);
        if (!(t->low_permille > 0 && t->low_permille < t->high_permille &&
              t->high_permille <= 1000))
            return s_fail(err, errlen,
                          "reclaimer: tier id %u watermarks low %u / high %u permille: need "
                          "0 < low < high <= 1000",
                          t->tier_id, t->low_permille, t->high_permille);
    }
    return 0;
}

static void s_next(s_self_t *self);
static void s_send(s_self_t *self);

/* After the quota step: the watermark pass over the tiers. */
static void s_tiers_start(s_self_t *self)
{
    self->cur = 0;
    self->burst = 0;
    if (self->cfg.n_tiers == 0) {
        self->pass = false;
        return;
    }
    s_send(self);
}

static void s_send_quota(s_self_t *self);

static void s_quota_done(void *arg, bus_reply_t *r)
{
    s_self_t *self = arg;
    self->in_flight = false;
    if (r->status.code != kvtier_StatusCode_STATUS_OK || !r->env ||
        r->env->which_body != kvtier_Envelope_quota_enforce_rep_tag) {
        self->st.failures++;
        bus_debug(S_LOG, "QuotaEnforce failed: %s", r->status.message);
        s_tiers_start(self);
        return;
    }
    const kvtier_QuotaEnforceReply *rep = &r->env->body.quota_enforce_rep;
    self->st.quota_marked += rep->marked;
    self->st.quota_over = rep->over;
    if (rep->backpressure)
        self->st.quota_backpressure++;
    if (rep->marked)
        bus_debug(S_LOG, "quotas: %u instances over, %u blocks marked", rep->over, rep->marked);
    if (rep->more && rep->marked > 0 && !rep->backpressure && self->quota_burst < self->cfg.burst)
        s_send_quota(self);
    else
        s_tiers_start(self);
}

static void s_send_quota(s_self_t *self)
{
    kvtier_Envelope *env = self->env;
    bus_env_init(env, kvtier_Envelope_quota_enforce_req_tag, "reclaimer");
    env->body.quota_enforce_req.max_blocks = self->cfg.batch;
    env->body.quota_enforce_req.low_permille = self->cfg.quota_low_permille;
    kvtier_Status st;
    self->st.quota_requests++;
    self->quota_burst++;
    if (bus_client_send(self->sched, env, NULL, NULL, 0, self->cfg.call_timeout_ms, NULL,
                        s_quota_done, self, NULL, &st) < 0) {
        self->st.failures++;
        bus_debug(S_LOG, "QuotaEnforce not sent: %s", st.message);
        self->pass = false; /* retried at the next interval */
        return;
    }
    self->in_flight = true;
}

static void s_done(void *arg, bus_reply_t *r)
{
    s_self_t *self = arg;
    self->in_flight = false;
    uint32_t i = self->cur;
    const reclaimer_tier_t *t = &self->cfg.tiers[i];
    if (r->status.code != kvtier_StatusCode_STATUS_OK || !r->env ||
        r->env->which_body != kvtier_Envelope_reclaim_candidates_rep_tag) {
        self->st.failures++;
        bus_debug(S_LOG, "tier id %u: ReclaimCandidates failed: %s", t->tier_id, r->status.message);
        self->burst = self->cfg.burst; /* this tier waits for the next interval */
        s_next(self);
        return;
    }
    const kvtier_ReclaimCandidatesReply *rep = &r->env->body.reclaim_candidates_rep;
    self->st.fill_permille[i] = rep->fill_permille;
    if (rep->next_tier_id) {
        /* demoted, not deleted: the scheduler's migrator copies them down */
        self->has_next[i] = true;
        self->st.not_last++;
    }
    self->st.marked += rep->marked;
    if (rep->backpressure)
        self->st.backpressure++;
    if (!self->draining[i] && rep->fill_permille > t->high_permille && !t->on_demand) {
        self->draining[i] = true;
        self->st.drains++;
        bus_info(S_LOG, "tier id %u at %u permille (high %u): reclaiming down to %u", t->tier_id,
                 rep->fill_permille, t->high_permille, t->low_permille);
    } else if (self->draining[i] && rep->fill_permille <= t->low_permille) {
        self->draining[i] = false;
    } else if (self->draining[i] && (rep->marked == 0 || rep->backpressure)) {
        self->burst = self->cfg.burst; /* nothing more to take now: next interval */
    }
    if (!self->draining[i])
        self->burst = self->cfg.burst;
    s_next(self);
}

static void s_send(s_self_t *self)
{
    const reclaimer_tier_t *t = &self->cfg.tiers[self->cur];
    bool drain = self->draining[self->cur];
    kvtier_Envelope *env = self->env;
    bus_env_init(env, kvtier_Envelope_reclaim_candidates_req_tag, "reclaimer");
    kvtier_ReclaimCandidatesRequest *r = &env->body.reclaim_candidates_req;
    r->tier_id = t->tier_id;
    r->max_blocks = drain ? self->cfg.batch : 0;
    r->mark_deleting = drain && !self->has_next[self->cur];
    r->demote = drain && self->has_next[self->cur];
    r->low_permille = t->low_permille;
    kvtier_Status st;
    self->st.requests++;
    self->burst++;
    if (bus_client_send(self->sched, env, NULL, NULL, 0, self->cfg.call_timeout_ms, NULL, s_done,
                        self, NULL, &st) < 0) {
        self->st.failures++;
        bus_debug(S_LOG, "ReclaimCandidates not sent: %s", st.message);
        self->pass = false; /* retried at the next interval */
        return;
    }
    self->in_flight = true;
}

/* Continues the pass: the same tier while it drains and its burst lasts, else the
 * next one; the pass ends after the last tier. */
static void s_next(s_self_t *self)
{
    if (self->burst >= self->cfg.burst) {
        self->cur++;
        self->burst = 0;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < self->cfg.n_tiers; i++)
        n += self->draining[i];
    self->st.draining = n;
    if (self->cur >= self->cfg.n_tiers) {
        self->pass = false;
        return;
    }
    s_send(self);
}

static int s_on_tick(zloop_t *loop, int timer_id, void *arg)
{
    (void)loop;
    (void)timer_id;
    s_self_t *self = arg;
    bus_client_dispatch(self->sched, 0); /* deadlines */
    if (self->pass || self->in_flight || (self->cfg.n_tiers == 0 && !self->cfg.quota_low_permille))
        return 0;
    self->pass = true;
    self->quota_burst = 0;
    if (self->cfg.quota_low_permille)
        s_send_quota(self); /* quotas first: what they free lowers the tiers' fill */
    else
        s_tiers_start(self);
    return 0;
}

static int s_on_client(zloop_t *loop, zsock_t *sock, void *arg)
{
    (void)loop;
    (void)sock;
    s_self_t *self = arg;
    bus_client_dispatch(self->sched, 0);
    return 0;
}

static int s_on_pipe(zloop_t *loop, zsock_t *pipe, void *arg)
{
    (void)loop;
    s_self_t *self = arg;
    return bus_actor_pipe(pipe, S_LOG, &self->st, sizeof self->st);
}

static void s_self_destroy(s_self_t **self_p)
{
    s_self_t *self = *self_p;
    if (!self)
        return;
    zloop_destroy(&self->loop);
    bus_client_destroy(&self->sched);
    free(self->env);
    free(self);
    *self_p = NULL;
}

static s_self_t *s_self_new(zsock_t *pipe, const reclaimer_config_t *cfg)
{
    char err[256];
    if (reclaimer_config_check(cfg, err, sizeof err) < 0) {
        bus_error(S_LOG, "%s", err);
        return NULL;
    }
    s_self_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->cfg = *cfg;
    if (!self->cfg.interval_ms)
        self->cfg.interval_ms = 100;
    if (!self->cfg.batch)
        self->cfg.batch = RECLAIMER_MAX_BATCH;
    if (!self->cfg.burst)
        self->cfg.burst = 16;
    if (!self->cfg.call_timeout_ms)
        self->cfg.call_timeout_ms = 2000;
    self->pipe = pipe;
    self->env = calloc(1, sizeof *self->env);
    self->loop = zloop_new();
    bus_client_config_t cc = {
        .name = "reclaimer", .max_in_flight = 4, .default_timeout_ms = self->cfg.call_timeout_ms};
    self->sched = bus_client_new(self->cfg.sched_endpoint, &cc);
    if (!self->env || !self->loop || !self->sched ||
        zloop_reader(self->loop, pipe, s_on_pipe, self) < 0 ||
        zloop_reader(self->loop, bus_client_sock(self->sched), s_on_client, self) < 0 ||
        zloop_timer(self->loop, self->cfg.interval_ms, 0, s_on_tick, self) < 0) {
        bus_error(S_LOG, "cannot start (scheduler endpoint '%s')", self->cfg.sched_endpoint);
        s_self_destroy(&self);
        return NULL;
    }
    zloop_set_nonstop(self->loop, true);
    return self;
}

static void s_actor(zsock_t *pipe, void *args)
{
    s_self_t *self = s_self_new(pipe, args);
    if (bus_actor_ready(pipe, self != NULL) < 0)
        return;
    bus_info(S_LOG, "watching %u tiers%s every %u ms (scheduler %s)", self->cfg.n_tiers,
             self->cfg.quota_low_permille ? ", quotas and trims" : "", self->cfg.interval_ms,
             self->cfg.sched_endpoint);
    zloop_start(self->loop);
    s_self_destroy(&self);
}

zactor_t *reclaimer_actor_new(const reclaimer_config_t *cfg)
{
    return bus_actor_new(s_actor, (void *)cfg);
}

int reclaimer_actor_stats(zactor_t *actor, reclaimer_stats_t *out)
{
    return bus_actor_stats(actor, out, sizeof *out);
}
