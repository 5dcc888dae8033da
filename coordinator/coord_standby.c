/* coord_standby.c — the standby meta-plane responder (see coord_standby.h). One
 * thread: a zpoller over the pipe (leader and tier updates, answered with a
 * signal so callers know they are applied) and the ROUTER of bus_server. */
#include "coord_standby.h"

#include <errno.h>
#include <inttypes.h>
#include <pb_decode.h>
#include <pb_encode.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bus_actor.h"
#include "bus_envelope.h"
#include "bus_log.h"
#include "bus_server.h"
#include "coord_proc.h"

#define S_COMP "standby"
/* Pipe commands: "LEADER" endpoint epoch etcd-cluster-id | "TIER" up(1/0) encoded-TierInfo | "ENDPOINT". */

typedef struct {
    zsock_t *pipe;
    bus_server_t *server;
    bus_arrays_t *arr;
    bus_request_t req;
    kvtier_Envelope rep;
    char name[64];
    char cluster[64];
    char leader[sizeof(((kvtier_Envelope *)0)->leader_endpoint)];
    uint64_t epoch;
    uint64_t etcd_cluster_id; /* the etcd electing us (ClusterInfo; 0: unknown) */
    uint32_t n_tiers;
    kvtier_TierInfo tiers[COORD_STANDBY_MAX_TIERS];
    /* tiers up but not listed (the table was full): ClusterInfo counts them in
     * total_tiers, so the cut is reported; remembered up to the same bound */
    uint32_t n_unlisted;
    char unlisted[COORD_STANDBY_MAX_TIERS][BUS_TIER_NAME_MAX];
    uint64_t answered, redirected;
} self_t;

static void s_nap_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Remembers (up) or forgets a tier the full table could not list. */
static void s_set_unlisted(self_t *self, bool up, const char *name)
{
    uint32_t i = 0;
    while (i < self->n_unlisted && strcmp(self->unlisted[i], name) != 0)
        i++;
    if (!up && i < self->n_unlisted)
        memcpy(self->unlisted[i], self->unlisted[--self->n_unlisted], sizeof self->unlisted[i]);
    else if (up && i == self->n_unlisted && i < COORD_STANDBY_MAX_TIERS)
        snprintf(self->unlisted[self->n_unlisted++], sizeof self->unlisted[0], "%s", name);
}

static void s_set_tier(self_t *self, bool up, const kvtier_TierInfo *t)
{
    uint32_t i = 0;
    while (i < self->n_tiers && strcmp(self->tiers[i].name, t->name) != 0)
        i++;
    if (!up) {
        if (i < self->n_tiers)
            self->tiers[i] = self->tiers[--self->n_tiers];
        s_set_unlisted(self, false, t->name);
        return;
    }
    if (i == self->n_tiers) {
        if (self->n_tiers == COORD_STANDBY_MAX_TIERS) {
            bus_warn(S_COMP, "%s: more than %u tiers: %s not listed", self->name,
                     COORD_STANDBY_MAX_TIERS, t->name);
            s_set_unlisted(self, true, t->name);
            return;
        }
        self->n_tiers++;
    }
    self->tiers[i] = *t;
    self->tiers[i].up = true;
}

/* Returns -1 on $TERM. */
static int s_on_pipe(self_t *self)
{
    zmsg_t *msg = zmsg_recv(self->pipe);
    if (!msg)
        return -1;
    char *cmd = zmsg_popstr(msg);
    int rc = 0;
    if (!cmd || streq(cmd, "$TERM")) {
        rc = -1;
    } else if (streq(cmd, "ENDPOINT")) {
        zstr_send(self->pipe, bus_server_endpoint(self->server));
    } else if (streq(cmd, "LEADER")) {
        char *ep = zmsg_popstr(msg), *epoch = zmsg_popstr(msg), *eid = zmsg_popstr(msg);
        snprintf(self->leader, sizeof self->leader, "%s", ep ? ep : "");
        self->epoch = epoch ? strtoull(epoch, NULL, 10) : 0;
        self->etcd_cluster_id = eid ? strtoull(eid, NULL, 10) : 0;
        zstr_free(&ep);
        zstr_free(&epoch);
        zstr_free(&eid);
        zsock_signal(self->pipe, 0);
    } else if (streq(cmd, "TIER")) {
        char *up = zmsg_popstr(msg);
        zframe_t *f = zmsg_pop(msg);
        kvtier_TierInfo t = kvtier_TierInfo_init_zero;
        pb_istream_t is = pb_istream_from_buffer(f ? zframe_data(f) : NULL, f ? zframe_size(f) : 0);
        bool ok = up && f && pb_decode(&is, kvtier_TierInfo_fields, &t);
        if (ok)
            s_set_tier(self, streq(up, "1"), &t);
        zstr_free(&up);
        zframe_destroy(&f);
        zsock_signal(self->pipe, ok ? 0 : 1);
    }
    zstr_free(&cmd);
    zmsg_destroy(&msg);
    return rc;
}

static void s_answer_cluster_info(self_t *self)
{
    kvtier_Envelope *rep = &self->rep;
    bus_env_init_reply(rep, &self->req.env, kvtier_Envelope_cluster_info_rep_tag, self->name);
    kvtier_ClusterInfoReply *ci = &rep->body.cluster_info_rep;
    snprintf(ci->cluster, sizeof ci->cluster, "%s", self->cluster);
    snprintf(ci->leader_endpoint, sizeof ci->leader_endpoint, "%s", self->leader);
    ci->leader_epoch = self->epoch;
    ci->tiers_count = (pb_size_t)self->n_tiers;
    memcpy(ci->tiers, self->tiers, sizeof self->tiers[0] * self->n_tiers);
    ci->total_tiers = self->n_tiers + self->n_unlisted;
    ci->etcd_cluster_id = self->etcd_cluster_id;
    kvtier_Status st;
    if (bus_server_reply(self->server, self->req.routing_id, rep, NULL, NULL, 0, &st) < 0)
        bus_warn(S_COMP, "%s: ClusterInfo reply: %s", self->name, st.message);
    self->answered++;
}

static void s_answer_not_leader(self_t *self)
{
    kvtier_Envelope *rep = &self->rep;
    bus_env_init_reply(rep, &self->req.env, 0, self->name);
    rep->has_status = true;
    rep->status.code = kvtier_StatusCode_STATUS_NOT_LEADER;
    snprintf(rep->leader_endpoint, sizeof rep->leader_endpoint, "%s", self->leader);
    if (self->leader[0])
        snprintf(rep->status.message, sizeof rep->status.message,
                 "coordinator %s is not the leader; the leader is at %s (epoch %" PRIu64 ")",
                 self->name, self->leader, self->epoch);
    else
        snprintf(rep->status.message, sizeof rep->status.message,
                 "coordinator %s is not the leader and no leader is elected yet; retry",
                 self->name);
    kvtier_Status st;
    if (bus_server_reply(self->server, self->req.routing_id, rep, NULL, NULL, 0, &st) < 0)
        bus_warn(S_COMP, "%s: NOT_LEADER reply: %s", self->name, st.message);
    self->redirected++;
}

static void s_on_request(self_t *self)
{
    int rc = bus_server_recv(self->server, 0, &self->req, self->arr);
    if (rc == 1) {
        if (self->req.env.which_body == kvtier_Envelope_cluster_info_req_tag)
            s_answer_cluster_info(self);
        else
            s_answer_not_leader(self);
    }
    bus_request_reset(&self->req);
}

static void s_self_destroy(self_t **self_p)
{
    self_t *self = *self_p;
    if (!self)
        return;
    bus_request_reset(&self->req);
    bus_server_destroy(&self->server);
    bus_arrays_destroy(&self->arr);
    free(self);
    *self_p = NULL;
}

/* SIGINT/SIGTERM go to the process main (which stops the actors): a signal
 * landing here would only cut a poll short (zloop ends on EINTR). Threads this
 * actor starts inherit the mask. */
static void s_actor(zsock_t *pipe, void *arg)
{
    self_t *self = arg;
    coord_proc_block_signals(true);
    self->pipe = pipe;
    zsock_t *watch = bus_server_monitor_sock(self->server);
    zpoller_t *poller = zpoller_new(pipe, bus_server_sock(self->server), watch, NULL);
    if (!poller)
        bus_error(S_COMP, "%s: cannot start: no poller", self->name);
    if (bus_actor_ready(pipe, poller != NULL) < 0)
        return; /* self is left to coord_standby_new */
    /* the owner decides when to stop (a signal reaches it, then $TERM us) */
    zpoller_set_nonstop(poller, true);
    while (true) {
        void *which = zpoller_wait(poller, -1);
        if (which == pipe) {
            if (s_on_pipe(self) < 0)
                break;
        } else if (which == watch) {
            bus_server_watch(self->server); /* the bound on connections */
        } else if (which) {
            s_on_request(self);
        }
    }
    zpoller_destroy(&poller);
    s_self_destroy(&self);
}

zactor_t *coord_standby_new(const coord_standby_config_t *cfg)
{
    if (!cfg || !cfg->endpoint || !cfg->cluster)
        return NULL;
    self_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    snprintf(self->name, sizeof self->name, "%s", cfg->name ? cfg->name : "standby");
    snprintf(self->cluster, sizeof self->cluster, "%s", cfg->cluster);
    /* Any request must decode so that it can be told NOT_LEADER, hence full arrays. */
    self->arr = bus_arrays_new(BUS_MAX_ARRAY, BUS_MAX_BLOB);
    int attempts = cfg->bind_attempts > 0 ? cfg->bind_attempts : 100;
    int nap = cfg->bind_retry_ms > 0 ? cfg->bind_retry_ms : 20;
    /* The socket is made here and handed to the actor thread (bus_actor_new is a
     * full barrier): a bind failure is then known before the actor exists. A
     * socket closed just before in this process releases its address in
     * ZeroMQ's I/O thread, a moment later: hence the bounded retries. */
    for (int i = 0; self->arr && i < attempts && !self->server; i++) {
        self->server = bus_server_new(cfg->endpoint, self->name);
        if (!self->server && i + 1 < attempts)
            s_nap_ms(nap);
    }
    if (self->server)
        bus_server_set_max_connections(self->server, cfg->max_connections);
    if (!self->server) {
        bus_error(S_COMP, "%s: cannot bind %s (%s)", self->name, cfg->endpoint,
                  self->arr ? zmq_strerror(zmq_errno()) : "out of memory");
        s_self_destroy(&self);
        return NULL;
    }
    zactor_t *actor = bus_actor_new(s_actor, self);
    if (!actor) { /* the actor has ended, or never ran */
        s_self_destroy(&self);
        return NULL;
    }
    bus_info(S_COMP, "%s: standby responder on %s", self->name, bus_server_endpoint(self->server));
    return actor;
}

void coord_standby_destroy(zactor_t **pa)
{
    zactor_destroy(pa);
}

int coord_standby_endpoint(zactor_t *standby, char *buf, size_t len)
{
    if (bus_actor_ask(standby, BUS_ACTOR_ASK_MS, "s", "ENDPOINT") < 0)
        return -1;
    char *ep = zstr_recv(standby);
    if (!ep)
        return -1;
    snprintf(buf, len, "%s", ep);
    zstr_free(&ep);
    return 0;
}

int coord_standby_set_leader(zactor_t *standby, const char *endpoint, uint64_t epoch,
                             uint64_t etcd_cluster_id)
{
    char num[24], eid[24];
    snprintf(num, sizeof num, "%" PRIu64, epoch);
    snprintf(eid, sizeof eid, "%" PRIu64, etcd_cluster_id);
    const char *ep = endpoint ? endpoint : "";
    if (bus_actor_ask(standby, BUS_ACTOR_ASK_MS, "ssss", "LEADER", ep, num, eid) < 0)
        return -1;
    return zsock_wait(standby) == 0 ? 0 : -1;
}

int coord_standby_tier(zactor_t *standby, bool up, const kvtier_TierInfo *tier)
{
    uint8_t buf[kvtier_TierInfo_size];
    pb_ostream_t os = pb_ostream_from_buffer(buf, sizeof buf);
    if (!tier || !pb_encode(&os, kvtier_TierInfo_fields, tier))
        return -1;
    if (bus_actor_ask(standby, BUS_ACTOR_ASK_MS, "ssb", "TIER", up ? "1" : "0", buf,
                      os.bytes_written) < 0)
        return -1;
    return zsock_wait(standby) == 0 ? 0 : -1;
}
