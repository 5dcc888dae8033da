/* migrator.c — the migrator actor (rules and protocol in migrator.h): a job pool
 * and two FIFO queues (prefetch, demotion), one bus_client per source tier
 * actor, and a zpoller loop that takes MigrateJob envelopes on its ROUTER,
 * completions from the source clients, and dispatches what the bounds allow
 * after every wake-up. Owns its queues, clients and its DemoteDone client; never touches bytes or
 * locations, never blocks on a tier actor, and reports every queued job exactly
 * once. Everything is allocated at start from the configured bounds. */
#include "migrator.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_actor.h"
#include "bus_client.h"
#include "bus_log.h"
#include "bus_server.h"
#include "bus_token.h"

#define S_LOG "migrator"

_Static_assert(sizeof(((kvtier_MigrateJobRequest *)0)->token.bytes) == MIGRATOR_TOKEN_MAX,
               "MIGRATOR_TOKEN_MAX is the MigrateJobRequest.token bound");
_Static_assert(BUS_TOKEN_MAX_BYTES(2, MIGRATOR_MAX_JOB_SLOTS) <= MIGRATOR_TOKEN_MAX,
               "a job's copy token fits MigrateJobRequest.token");
#define S_DISPATCH_ROUNDS 8
#define S_OK kvtier_StatusCode_STATUS_OK
#define S_INVALID kvtier_StatusCode_STATUS_INVALID_ARGUMENT
#define S_TIMEOUT kvtier_StatusCode_STATUS_TIMEOUT
#define S_UNAVAILABLE kvtier_StatusCode_STATUS_UNAVAILABLE

typedef struct {
    char ep[MIGRATOR_ENDPOINT_MAX];
    bus_client_t *client; /* NULL: entry free */
    uint32_t in_flight;
    int64_t last_used;
    bool broken; /* a CopySlots timed out: failed and closed on the next service */
} s_src_t;

struct s_self;

typedef struct {
    struct s_self *owner;
    migrator_job_t job;
    bool busy;         /* queued or in flight */
    int64_t queued_ms; /* arrival (dispatch_within_ms counts from here) */
    s_src_t *src;      /* in flight through it */
    bool mask[MIGRATOR_MAX_JOB_SLOTS];
    bus_arrays_t rarr; /* the CopySlots reply's success flags land in mask */
} s_job_t;

typedef struct s_self {
    zsock_t *pipe;
    bus_server_t *server;  /* MigrateJob in */
    bus_arrays_t *arr;     /* the server's decode arrays (MigrateJob has none) */
    bus_request_t req;     /* the request being served */
    bus_client_t *results; /* DemoteDone out */
    zpoller_t *poller;
    bool terminated;
    char name[64];
    uint32_t max_in_flight, max_per_source, max_queued, max_sources, timeout_ms;
    s_job_t *jobs; /* max_queued + max_in_flight */
    uint32_t njobs;
    uint32_t *queue[2]; /* job indexes, FIFO, per priority */
    uint32_t qlen[2];
    s_src_t *srcs;
    uint32_t in_flight;
    migrator_stats_t stats;
    kvtier_Envelope env;
} self_t;

/* ---- construction ---- */

static int s_check_config(const migrator_config_t *cfg, char *why, size_t len)
{
    if (!cfg) {
        snprintf(why, len, "migrator: no config");
        return -1;
    }
    if (!cfg->endpoint || !cfg->endpoint[0]) {
        snprintf(why, len, "migrator: endpoint is required (the jobs ROUTER binds there)");
        return -1;
    }
    if (!cfg->results_endpoint || !cfg->results_endpoint[0]) {
        snprintf(why, len, "migrator: results_endpoint is required (a ROUTER serving DemoteDone)");
        return -1;
    }
    if (cfg->max_in_flight > BUS_CLIENT_MAX_IN_FLIGHT) {
        snprintf(why, len, "migrator: max_in_flight %u is above %u", cfg->max_in_flight,
                 BUS_CLIENT_MAX_IN_FLIGHT);
        return -1;
    }
    return 0;
}

static void s_self_destroy(self_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    self_t *self = *self_p;
    for (uint32_t i = 0; self->srcs && i < self->max_sources; i++)
        bus_client_destroy(&self->srcs[i].client);
    bus_client_destroy(&self->results);
    bus_request_reset(&self->req);
    bus_server_destroy(&self->server);
    bus_arrays_destroy(&self->arr);
    free(self->jobs);
    free(self->queue[0]);
    free(self->queue[1]);
    free(self->srcs);
    free(self);
    *self_p = NULL;
}

static self_t *s_self_new(zsock_t *pipe, const migrator_config_t *cfg, char *why, size_t len)
{
    if (s_check_config(cfg, why, len) < 0)
        return NULL;
    self_t *self = calloc(1, sizeof *self);
    if (!self) {
        snprintf(why, len, "migrator: out of memory");
        return NULL;
    }
    self->pipe = pipe;
    snprintf(self->name, sizeof self->name, "%s", cfg->name ? cfg->name : "migrator");
    self->max_in_flight = cfg->max_in_flight ? cfg->max_in_flight : MIGRATOR_DEFAULT_IN_FLIGHT;
    self->max_per_source = cfg->max_per_source ? cfg->max_per_source : MIGRATOR_DEFAULT_PER_SOURCE;
    self->max_queued = cfg->max_queued ? cfg->max_queued : MIGRATOR_DEFAULT_QUEUED;
    self->max_sources = cfg->max_sources ? cfg->max_sources : MIGRATOR_DEFAULT_SOURCES;
    self->timeout_ms = cfg->copy_timeout_ms ? cfg->copy_timeout_ms : MIGRATOR_DEFAULT_TIMEOUT_MS;
    self->njobs = self->max_queued + self->max_in_flight;
    self->jobs = calloc(self->njobs, sizeof *self->jobs);
    self->queue[0] = calloc(self->max_queued, sizeof *self->queue[0]);
    self->queue[1] = calloc(self->max_queued, sizeof *self->queue[1]);
    self->srcs = calloc(self->max_sources, sizeof *self->srcs);
    if (!self->jobs || !self->queue[0] || !self->queue[1] || !self->srcs) {
        snprintf(why, len, "%s: out of memory for %u jobs", self->name, self->njobs);
        goto out_fail;
    }
    for (uint32_t i = 0; i < self->njobs; i++)
        self->jobs[i].owner = self;
    self->server = bus_server_new(cfg->endpoint, self->name);
    self->arr = bus_arrays_new(MIGRATOR_MAX_JOB_SLOTS, 0);
    if (!self->server || !self->arr) {
        snprintf(why, len, "%s: cannot bind the jobs endpoint %s", self->name, cfg->endpoint);
        goto out_fail;
    }
    /* one result per job at most is outstanding: the pool's size bounds them */
    bus_client_config_t rc = {
        .name = self->name, .max_in_flight = self->njobs, .default_timeout_ms = self->timeout_ms};
    self->results = bus_client_new(cfg->results_endpoint, &rc);
    if (!self->results) {
        snprintf(why, len, "%s: cannot connect the results to %s", self->name,
                 cfg->results_endpoint);
        goto out_fail;
    }
    return self;

out_fail:
    s_self_destroy(&self);
    return NULL;
}

/* ---- sources ---- */

static s_src_t *s_src_find(self_t *self, const char *ep)
{
    for (uint32_t i = 0; i < self->max_sources; i++) {
        s_src_t *s = &self->srcs[i];
        if (s->client && !s->broken && strcmp(s->ep, ep) == 0)
            return s;
    }
    return NULL;
}

/* A free entry, or the idle one used longest ago; NULL when all are busy. */
static s_src_t *s_src_spare(self_t *self)
{
    s_src_t *idle = NULL;
    for (uint32_t i = 0; i < self->max_sources; i++) {
        s_src_t *s = &self->srcs[i];
        if (!s->client)
            return s;
        if (s->in_flight == 0 && !s->broken && (!idle || s->last_used < idle->last_used))
            idle = s;
    }
    return idle;
}

static void s_src_close(self_t *self, s_src_t *s)
{
    if (!s->client)
        return;
    zpoller_remove(self->poller, bus_client_sock(s->client));
    bus_client_destroy(&s->client);
    memset(s, 0, sizeof *s);
}

static s_src_t *s_src_get(self_t *self, const char *ep)
{
    s_src_t *s = s_src_find(self, ep);
    if (s)
        return s;
    s = s_src_spare(self);
    if (!s)
        return NULL;
    s_src_close(self, s);
    bus_client_config_t cc = {.name = self->name,
                              .max_in_flight = self->max_per_source,
                              .default_timeout_ms = self->timeout_ms};
    s->client = bus_client_new(ep, &cc);
    if (!s->client)
        return NULL;
    zpoller_add(self->poller, bus_client_sock(s->client));
    snprintf(s->ep, sizeof s->ep, "%s", ep);
    return s;
}

/* Can a job from ep be dispatched now? */
static bool s_src_room(self_t *self, const char *ep)
{
    s_src_t *s = s_src_find(self, ep);
    if (s)
        return s->in_flight < self->max_per_source;
    return s_src_spare(self) != NULL;
}

/* ---- results ---- */

static void s_result_acked(void *arg, bus_reply_t *r)
{
    self_t *self = arg;
    if (r->status.code != S_OK) {
        self->stats.results_lost++;
        bus_error(S_LOG, "%s: a result was not taken: %s", self->name, r->status.message);
    }
}

static void s_result_send(self_t *self, s_job_t *j, const kvtier_Status *st, bool from_mask)
{
    const migrator_job_t *job = &j->job;
    bus_env_init(&self->env, kvtier_Envelope_demote_done_req_tag, self->name);
    kvtier_DemoteDoneRequest *d = &self->env.body.demote_done_req;
    d->job_id = job->job_id;
    d->priority = job->priority;
    d->src_tier_id = job->src_tier_id;
    d->dst_tier_id = job->dst_tier_id;
    d->has_status = true;
    d->status = *st;
    bool all = from_mask && j->rarr.mask.n == job->n;
    if (from_mask && !all) /* a reply that does not say which slots: none counts */
        bus_status_set(&d->status, kvtier_StatusCode_STATUS_INTERNAL,
                       "CopySlots reply from %.96s has %u flags for %u slots", job->src_endpoint,
                       j->rarr.mask.n, job->n);
    uint32_t copied = 0;
    d->results_count = (pb_size_t)job->n;
    for (uint32_t i = 0; i < job->n; i++) {
        kvtier_DemoteResult *r = &d->results[i];
        r->has_block = true;
        r->block.tier_id = job->src_tier_id;
        r->block.slot = job->src_slots[i];
        memcpy(r->block.key, job->keys[i], 16);
        r->dst_slot = job->dst_slots[i];
        r->ok = all && j->mask[i];
        copied += r->ok;
    }
    self->stats.completed++;
    self->stats.slots_copied += copied;
    self->stats.slots_failed += job->n - copied;
    kvtier_Status sst;
    if (bus_client_send(self->results, &self->env, NULL, NULL, 0, 0, NULL, s_result_acked, self,
                        NULL, &sst) < 0) {
        self->stats.results_lost++;
        bus_error(S_LOG, "%s: result of job %" PRIu64 " could not be sent: %s", self->name,
                  job->job_id, sst.message);
    }
    j->busy = false;
    j->src = NULL;
}

/* ---- submissions ---- */

static bool s_endpoint_ok(const char *ep)
{
    size_t n = strnlen(ep, MIGRATOR_ENDPOINT_MAX);
    return n > 0 && n < MIGRATOR_ENDPOINT_MAX;
}

static int s_job_check(const migrator_job_t *j, char *why, size_t len)
{
    if (j->n == 0 || j->n > MIGRATOR_MAX_JOB_SLOTS)
        snprintf(why, len, "job %" PRIu64 ": %u slots, give 1..%u", j->job_id, j->n,
                 MIGRATOR_MAX_JOB_SLOTS);
    else if (j->priority != MIGRATOR_PREFETCH && j->priority != MIGRATOR_DEMOTE)
        snprintf(why, len, "job %" PRIu64 ": priority %u is neither prefetch (0) nor demote (1)",
                 j->job_id, j->priority);
    else if (!s_endpoint_ok(j->src_endpoint) || !s_endpoint_ok(j->dst_endpoint))
        snprintf(why, len, "job %" PRIu64 ": source and destination endpoints must be 1..%d bytes",
                 j->job_id, MIGRATOR_ENDPOINT_MAX - 1);
    else if (j->src_tier_id == 0 || j->dst_tier_id == 0)
        snprintf(why, len, "job %" PRIu64 ": tier id 0 (source %u, destination %u)", j->job_id,
                 j->src_tier_id, j->dst_tier_id);
    else if (j->dst_state < kvtier_LocationState_LOCATION_WRITING ||
             j->dst_state > kvtier_LocationState_LOCATION_DELETING)
        snprintf(why, len,
                 "job %" PRIu64 ": destination state %u is not WRITING, SERVING or "
                 "DELETING",
                 j->job_id, j->dst_state);
    else
        return 0;
    return -1;
}

static void s_on_job(self_t *self, const kvtier_MigrateJobRequest *in)
{
    char why[256] = "queued";
    int code = S_OK;
    migrator_job_t job;
    if (migrator_job_decode(in, &job, why, sizeof why) < 0) {
        code = S_INVALID;
    } else if (self->qlen[0] + self->qlen[1] >= self->max_queued) {
        code = S_UNAVAILABLE;
        snprintf(why, sizeof why,
                 "%s: %u jobs already queued (max_queued); retry after results arrive", self->name,
                 self->max_queued);
    }
    /* the pool holds max_queued + max_in_flight entries: one is free whenever
     * fewer than max_queued jobs wait */
    uint32_t k = 0;
    while (code == S_OK && k < self->njobs && self->jobs[k].busy)
        k++;
    if (code == S_OK && k == self->njobs) {
        code = kvtier_StatusCode_STATUS_INTERNAL;
        snprintf(why, sizeof why, "%s: job pool exhausted", self->name);
    }
    if (code == S_OK) {
        s_job_t *j = &self->jobs[k];
        j->job = job;
        j->busy = true;
        j->src = NULL;
        j->queued_ms = zclock_mono();
        uint32_t p = j->job.priority;
        self->queue[p][self->qlen[p]++] = k;
        self->stats.submitted++;
    } else if (code == S_UNAVAILABLE) {
        self->stats.refused_full++;
    } else {
        self->stats.refused_invalid++;
    }
    if (code != S_OK) {
        bus_server_reply_error(self->server, self->req.routing_id, self->req.env.corr_id,
                               (bus_code_t)code, "%s", why);
        return;
    }
    kvtier_Envelope *rep = &self->env;
    bus_env_init_reply(rep, &self->req.env, kvtier_Envelope_migrate_job_rep_tag, self->name);
    rep->body.migrate_job_rep.queued = self->qlen[0] + self->qlen[1];
    (void)bus_server_reply(self->server, self->req.routing_id, rep, NULL, NULL, 0, NULL);
}

/* Requests on the jobs ROUTER: MigrateJob only (the server has already
 * answered what does not decode). */
static void s_on_server(self_t *self)
{
    for (int round = 0; round < S_DISPATCH_ROUNDS; round++) {
        if (bus_server_recv(self->server, 0, &self->req, self->arr) <= 0)
            break;
        if (self->req.env.which_body == kvtier_Envelope_migrate_job_req_tag)
            s_on_job(self, &self->req.env.body.migrate_job_req);
        else
            bus_server_reply_error(self->server, self->req.routing_id, self->req.env.corr_id,
                                   S_INVALID, "%s serves MigrateJobRequest only, not %s",
                                   self->name, bus_body_name(self->req.env.which_body));
        bus_request_reset(&self->req);
    }
}

/* ---- dispatch ---- */

static void s_on_copied(void *arg, bus_reply_t *r);

static bool s_prefetch_waits(self_t *self, const char *ep)
{
    for (uint32_t q = 0; q < self->qlen[MIGRATOR_PREFETCH]; q++)
        if (strcmp(self->jobs[self->queue[MIGRATOR_PREFETCH][q]].job.src_endpoint, ep) == 0)
            return true;
    return false;
}

/* The next job to dispatch: prefetch first (FIFO), then demotions whose source
 * has room and no waiting prefetch. false when none can go now. */
static bool s_pick(self_t *self, uint32_t *prio, uint32_t *pos)
{
    for (uint32_t p = 0; p < 2; p++)
        for (uint32_t q = 0; q < self->qlen[p]; q++) {
            const char *ep = self->jobs[self->queue[p][q]].job.src_endpoint;
            if (!s_src_room(self, ep))
                continue;
            if (p == MIGRATOR_DEMOTE && s_prefetch_waits(self, ep))
                continue;
            *prio = p;
            *pos = q;
            return true;
        }
    return false;
}

static void s_dispatch(self_t *self, s_job_t *j)
{
    kvtier_Status st = {0};
    const migrator_job_t *job = &j->job;
    s_src_t *s = s_src_get(self, job->src_endpoint);
    if (!s) {
        bus_status_set(&st, S_INVALID, "%s: cannot connect to the source %s", self->name,
                       job->src_endpoint);
        s_result_send(self, j, &st, false);
        return;
    }
    bus_env_init(&self->env, kvtier_Envelope_copy_slots_req_tag, self->name);
    kvtier_CopySlotsRequest *c = &self->env.body.copy_slots_req;
    c->tier_id = job->src_tier_id;
    c->dst_tier_id = job->dst_tier_id;
    snprintf(c->dst_endpoint, sizeof c->dst_endpoint, "%s", job->dst_endpoint);
    c->dst_state = (kvtier_LocationState)job->dst_state;
    uint32_t n = job->n;
    bus_arrays_t arr = {.slots = {(uint64_t *)job->src_slots, n, n},
                        .dst_slots = {(uint64_t *)job->dst_slots, n, n},
                        .keys = {(uint8_t(*)[BUS_KEY_LEN])job->keys, n, n},
                        .payload = {(uint8_t *)job->token, job->token_len, job->token_len}};
    j->rarr = (bus_arrays_t){.mask = {j->mask, 0, MIGRATOR_MAX_JOB_SLOTS}};
    s->last_used = zclock_mono();
    if (bus_client_send(s->client, &self->env, &arr, NULL, 0, self->timeout_ms, &j->rarr,
                        s_on_copied, j, NULL, &st) < 0) {
        s_result_send(self, j, &st, false);
        return;
    }
    j->src = s;
    s->in_flight++;
    self->in_flight++;
    self->stats.dispatched++;
}

/* Fails the queued jobs past their dispatch_within_ms (nothing was copied). */
static void s_expire(self_t *self)
{
    int64_t now = zclock_mono();
    for (uint32_t p = 0; p < 2; p++)
        for (uint32_t q = 0; q < self->qlen[p];) {
            s_job_t *j = &self->jobs[self->queue[p][q]];
            uint32_t within = j->job.dispatch_within_ms;
            if (!within || now - j->queued_ms <= (int64_t)within) {
                q++;
                continue;
            }
            memmove(&self->queue[p][q], &self->queue[p][q + 1],
                    (self->qlen[p] - q - 1) * sizeof self->queue[p][0]);
            self->qlen[p]--;
            self->stats.expired++;
            kvtier_Status st = {0};
            bus_status_set(&st, S_TIMEOUT, "%s: job %" PRIu64 " not dispatched within %u ms",
                           self->name, j->job.job_id, within);
            s_result_send(self, j, &st, false);
        }
}

/* The time until the first queued job's dispatch deadline (-1: none). */
static int64_t s_next_expiry(const self_t *self)
{
    int64_t best = -1, now = zclock_mono();
    for (uint32_t p = 0; p < 2; p++)
        for (uint32_t q = 0; q < self->qlen[p]; q++) {
            const s_job_t *j = &self->jobs[self->queue[p][q]];
            if (!j->job.dispatch_within_ms)
                continue;
            int64_t t = j->queued_ms + j->job.dispatch_within_ms + 1 - now;
            if (t < 0)
                t = 0;
            if (best < 0 || t < best)
                best = t;
        }
    return best;
}

static void s_pump(self_t *self)
{
    uint32_t p, q;
    s_expire(self);
    while (self->in_flight < self->max_in_flight && s_pick(self, &p, &q)) {
        s_job_t *j = &self->jobs[self->queue[p][q]];
        memmove(&self->queue[p][q], &self->queue[p][q + 1],
                (self->qlen[p] - q - 1) * sizeof self->queue[p][0]);
        self->qlen[p]--;
        s_dispatch(self, j);
    }
}

static void s_on_copied(void *arg, bus_reply_t *r)
{
    s_job_t *j = arg;
    self_t *self = j->owner;
    s_src_t *s = j->src;
    bool body = r->env && r->env->which_body == kvtier_Envelope_copy_slots_rep_tag;
    if (r->status.code == S_TIMEOUT && !r->env) {
        s->broken = true;
        self->stats.timeouts++;
    }
    s->in_flight--;
    self->in_flight--;
    s_result_send(self, j, &r->status, body);
}

/* Completions of every source, then closes sources that timed out (their
 * queued requests are dropped, never delivered late), then dispatches. */
static void s_service(self_t *self)
{
    for (int round = 0; round < S_DISPATCH_ROUNDS; round++)
        if (bus_client_dispatch(self->results, 0) <= 0)
            break;
    for (uint32_t i = 0; i < self->max_sources; i++) {
        s_src_t *s = &self->srcs[i];
        if (!s->client)
            continue;
        for (int round = 0; round < S_DISPATCH_ROUNDS; round++)
            if (bus_client_dispatch(s->client, 0) <= 0)
                break;
        if (!s->broken)
            continue;
        bus_client_fail_all(s->client, S_UNAVAILABLE,
                            "the source tier actor timed out on an earlier copy; client closed");
        if (s->in_flight == 0) {
            bus_warn(S_LOG, "%s: source %s timed out; client closed", self->name, s->ep);
            s_src_close(self, s);
        }
    }
    s_pump(self);
}

static int s_wait_ms(self_t *self)
{
    int64_t best = bus_client_next_timeout_ms(self->results);
    int64_t ex = s_next_expiry(self);
    if (ex >= 0 && (best < 0 || ex < best))
        best = ex;
    for (uint32_t i = 0; i < self->max_sources; i++) {
        s_src_t *s = &self->srcs[i];
        if (!s->client)
            continue;
        if (s->broken)
            return 0;
        int64_t t = bus_client_next_timeout_ms(s->client);
        if (t >= 0 && (best < 0 || t < best))
            best = t;
    }
    return best > INT_MAX ? INT_MAX : (int)best;
}

/* ---- pipe and loop ---- */

static void s_cmd_endpoint(zsock_t *pipe, void *arg)
{
    self_t *self = arg;
    zstr_send(pipe, bus_server_endpoint(self->server));
}

static void s_cmd_stats(zsock_t *pipe, void *arg)
{
    self_t *self = arg;
    self->stats.queued_prefetch = self->qlen[MIGRATOR_PREFETCH];
    self->stats.queued_demote = self->qlen[MIGRATOR_DEMOTE];
    self->stats.in_flight = self->in_flight;
    zsock_send(pipe, "b", &self->stats, sizeof self->stats);
}

static const bus_actor_cmd_t s_cmds[] = {
    {"ENDPOINT", s_cmd_endpoint},
    {"STATS", s_cmd_stats},
    {NULL, NULL},
};

static void s_on_pipe(self_t *self)
{
    if (bus_actor_pipe_cmds(self->pipe, S_LOG, s_cmds, self) < 0)
        self->terminated = true;
}

static void s_run(self_t *self)
{
    while (!self->terminated) {
        void *which = zpoller_wait(self->poller, s_wait_ms(self));
        if (which == self->pipe)
            s_on_pipe(self);
        else if (which == bus_server_sock(self->server))
            s_on_server(self);
        else if (!which && zpoller_terminated(self->poller) && errno == ETERM)
            break;
        if (!self->terminated)
            s_service(self);
    }
}

static void s_actor(zsock_t *pipe, void *args)
{
    char why[512] = "";
    self_t *self = s_self_new(pipe, args, why, sizeof why);
    if (self) {
        self->poller =
            zpoller_new(pipe, bus_server_sock(self->server), bus_client_sock(self->results), NULL);
        if (!self->poller)
            snprintf(why, sizeof why, "%s: no poller", self->name);
    }
    if (!self || !self->poller) {
        bus_error(S_LOG, "%s", why);
        s_self_destroy(&self);
    }
    if (bus_actor_ready(pipe, self != NULL) < 0)
        return;
    zpoller_set_nonstop(self->poller, true);
    s_run(self);
    /* requests in flight are dropped with their clients; results stop here */
    for (uint32_t i = 0; i < self->max_sources; i++)
        s_src_close(self, &self->srcs[i]);
    zpoller_destroy(&self->poller);
    s_self_destroy(&self);
}

zactor_t *migrator_new(const migrator_config_t *cfg)
{
    return bus_actor_new(s_actor, (void *)cfg);
}

/* ---- wrappers ---- */

int migrator_endpoint(zactor_t *migrator, char *buf, size_t len)
{
    if (!migrator || !buf || !len || bus_actor_ask(migrator, BUS_ACTOR_ASK_MS, "s", "ENDPOINT") < 0)
        return -1;
    char *ep = zstr_recv(migrator);
    if (!ep)
        return -1;
    snprintf(buf, len, "%s", ep);
    zstr_free(&ep);
    return 0;
}

void migrator_job_encode(const migrator_job_t *job, kvtier_Envelope *env, const char *sender)
{
    bus_env_init(env, kvtier_Envelope_migrate_job_req_tag, sender);
    kvtier_MigrateJobRequest *m = &env->body.migrate_job_req;
    uint32_t n = job->n < MIGRATOR_MAX_JOB_SLOTS ? job->n : MIGRATOR_MAX_JOB_SLOTS;
    m->job_id = job->job_id;
    m->priority = job->priority;
    m->src_tier_id = job->src_tier_id;
    snprintf(m->src_endpoint, sizeof m->src_endpoint, "%.*s", (int)sizeof m->src_endpoint - 1,
             job->src_endpoint);
    m->dst_tier_id = job->dst_tier_id;
    snprintf(m->dst_endpoint, sizeof m->dst_endpoint, "%.*s", (int)sizeof m->dst_endpoint - 1,
             job->dst_endpoint);
    m->dst_state = (kvtier_LocationState)job->dst_state;
    m->dispatch_within_ms = job->dispatch_within_ms;
    m->src_slots_count = m->dst_slots_count = m->keys_count = (pb_size_t)n;
    for (uint32_t i = 0; i < n; i++) {
        m->src_slots[i] = job->src_slots[i];
        m->dst_slots[i] = job->dst_slots[i];
        memcpy(m->keys[i], job->keys[i], 16);
    }
    m->token.size = (pb_size_t)(job->token_len <= sizeof m->token.bytes ? job->token_len : 0);
    memcpy(m->token.bytes, job->token, m->token.size);
}

int migrator_job_decode(const kvtier_MigrateJobRequest *in, migrator_job_t *out, char *why,
                        size_t len)
{
    memset(out, 0, sizeof *out);
    uint32_t n = in->src_slots_count;
    if (in->dst_slots_count != n || in->keys_count != n) {
        snprintf(why, len, "job %" PRIu64 ": %u source slots, %u destination slots, %u keys",
                 in->job_id, n, (unsigned)in->dst_slots_count, (unsigned)in->keys_count);
        return -S_INVALID;
    }
    if (n > MIGRATOR_MAX_JOB_SLOTS) /* nanopb bounds it already; checked all the same */
        n = MIGRATOR_MAX_JOB_SLOTS + 1;
    out->job_id = in->job_id;
    out->priority = in->priority;
    out->src_tier_id = in->src_tier_id;
    out->dst_tier_id = in->dst_tier_id;
    out->dst_state = (uint32_t)in->dst_state;
    out->dispatch_within_ms = in->dispatch_within_ms;
    out->n = n;
    snprintf(out->src_endpoint, sizeof out->src_endpoint, "%.*s",
             (int)strnlen(in->src_endpoint, sizeof out->src_endpoint - 1), in->src_endpoint);
    snprintf(out->dst_endpoint, sizeof out->dst_endpoint, "%.*s",
             (int)strnlen(in->dst_endpoint, sizeof out->dst_endpoint - 1), in->dst_endpoint);
    if (s_job_check(out, why, len) < 0)
        return -S_INVALID;
    for (uint32_t i = 0; i < n; i++) {
        out->src_slots[i] = in->src_slots[i];
        out->dst_slots[i] = in->dst_slots[i];
        memcpy(out->keys[i], in->keys[i], 16);
    }
    out->token_len = in->token.size <= sizeof out->token ? in->token.size : 0;
    memcpy(out->token, in->token.bytes, out->token_len);
    return 0;
}

int migrator_result_decode(const kvtier_DemoteDoneRequest *in, migrator_result_t *out, char *why,
                           size_t len)
{
    memset(out, 0, sizeof *out);
    if (in->results_count > MIGRATOR_MAX_JOB_SLOTS) {
        snprintf(why, len, "DemoteDone of job %" PRIu64 ": %u results, at most %u", in->job_id,
                 (unsigned)in->results_count, MIGRATOR_MAX_JOB_SLOTS);
        return -S_INVALID;
    }
    if (in->priority != MIGRATOR_PREFETCH && in->priority != MIGRATOR_DEMOTE) {
        snprintf(why, len, "DemoteDone of job %" PRIu64 ": priority %u", in->job_id, in->priority);
        return -S_INVALID;
    }
    out->job_id = in->job_id;
    out->priority = in->priority;
    out->src_tier_id = in->src_tier_id;
    out->dst_tier_id = in->dst_tier_id;
    out->n = in->results_count;
    out->status = in->has_status ? (uint32_t)in->status.code : S_OK;
    if (in->has_status)
        snprintf(out->message, sizeof out->message, "%.*s", (int)sizeof out->message - 1,
                 in->status.message);
    for (uint32_t i = 0; i < out->n; i++) {
        out->ok[i] = in->results[i].ok;
        out->copied += out->ok[i];
    }
    return 0;
}

int migrator_submit(bus_client_t *migrator, const migrator_job_t *job, uint32_t timeout_ms,
                    char *why, size_t len)
{
    static _Thread_local kvtier_Envelope req, rep; /* ~ several KiB each: off the stack */
    kvtier_Status st = {0};
    if (!migrator || !job) {
        if (why && len)
            snprintf(why, len, "migrator: no client or no job");
        return -S_UNAVAILABLE;
    }
    if (job->n == 0 || job->n > MIGRATOR_MAX_JOB_SLOTS) { /* the wire cannot carry it */
        if (why && len)
            snprintf(why, len, "job %" PRIu64 ": %u slots, give 1..%u", job->job_id, job->n,
                     MIGRATOR_MAX_JOB_SLOTS);
        return -S_INVALID;
    }
    migrator_job_encode(job, &req, "sched");
    int rc = bus_client_call(migrator, &req, NULL, NULL, 0,
                             timeout_ms ? timeout_ms : BUS_ACTOR_ASK_MS, &rep, NULL, NULL, &st);
    if (why && len)
        snprintf(why, len, "%s", rc == 0 ? "queued" : st.message);
    if (rc == 0)
        return 0;
    return st.code ? -(int)st.code : -S_UNAVAILABLE;
}

int migrator_stats(zactor_t *migrator, migrator_stats_t *out)
{
    return bus_actor_stats(migrator, out, sizeof *out);
}

int migrator_result_recv(bus_server_t *srv, int wait_ms, migrator_result_t *out)
{
    static _Thread_local bus_request_t req;
    static _Thread_local kvtier_Envelope rep;
    bus_arrays_t *arr = bus_arrays_new(MIGRATOR_MAX_JOB_SLOTS, 0);
    int rc = -1;
    char why[160];
    if (arr && bus_server_recv(srv, wait_ms, &req, arr) == 1) {
        if (req.env.which_body == kvtier_Envelope_demote_done_req_tag &&
            migrator_result_decode(&req.env.body.demote_done_req, out, why, sizeof why) == 0) {
            bus_env_init_reply(&rep, &req.env, kvtier_Envelope_demote_done_rep_tag, "consumer");
            (void)bus_server_reply(srv, req.routing_id, &rep, NULL, NULL, 0, NULL);
            rc = 0;
        } else {
            (void)bus_server_reply_error(srv, req.routing_id, req.env.corr_id,
                                         kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                                         "not a valid DemoteDone");
        }
    }
    bus_request_reset(&req);
    bus_arrays_destroy(&arr);
    return rc;
}
