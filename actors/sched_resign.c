/* sched_resign.c — `kvtier leader resign` (issue 9 §3; docs/OPERATIONS.md "Handing
 * leadership over"): the leader's side of a planned hand-over to a standby.
 *
 * On an AdminResignRequest the scheduler checks that somebody can take over (the
 * elector's count of the other coordinators registered in etcd, cfg.standbys) and
 * then, until the hand-over:
 *   - refuses every new window (prepare_get / _put / _prefetch, prepare) with
 *     NOT_LEADER carrying no leader epoch: libkvtier looks for the leader again
 *     with back-off and, the epoch not being a deposed leader's, keeps its open
 *     windows (a NOT_LEADER with this epoch would mark their tokens stale);
 *   - serves everything else, the completes of the open windows first of all;
 *   - hands over at the first tick that finds every window open at the request
 *     closed, or past the wait: it answers the request (what finished, what is
 *     left to lapse), stops leading (sched_t.lapsed: NOT_LEADER from then on, as
 *     a lapsed lease) and pushes "RESIGN" to the elector (cfg.resign_endpoint),
 *     which revokes the lease and holds off one lease TTL so that a standby wins.
 * The windows still open at the hand-over are left to lapse: the new leader
 * knows nothing of them (their completes end ABORTED at the client).
 * Never: hands over while nobody is registered to take over, or waits past
 * SCHED_RESIGN_WAIT_MAX_S. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>

#include "bus_log.h"
#include "sched_int.h"

#define S_LOG "sched"

uint32_t sched_open_windows(const sched_t *self)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < self->cfg.max_requests; i++) {
        const sched_request_t *q = &self->requests.reqs[i];
        if (!q->used)
            continue;
        for (uint32_t k = 0; k < SCHED_WIN_KINDS; k++)
            n += q->win[k].state != SCHED_WIN_CLOSED;
    }
    return n;
}

void sched_on_admin_resign(sched_t *self, sched_call_t *call)
{
    const kvtier_AdminResignRequest *r = &call->req.env.body.admin_resign_req;
    const char *me = self->cfg.node_name;
    if (r->wait_s > SCHED_RESIGN_WAIT_MAX_S) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "AdminResignRequest.wait_s %" PRIu32 ": at most %u seconds (0: %u)",
                          r->wait_s, SCHED_RESIGN_WAIT_MAX_S, SCHED_RESIGN_WAIT_DEFAULT_S);
        return;
    }
    int64_t now = sched_now();
    if (self->resign.on) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_CONFLICT,
                          "coordinator %s is already resigning (since %" PRId64
                          " ms, %u windows open at its start, hands over within %" PRId64 " ms)",
                          me, now - self->resign.started_ms, self->resign.windows_open,
                          self->resign.until_ms > now ? self->resign.until_ms - now : 0);
        return;
    }
    if (!self->cfg.standbys) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_CONFLICT,
                          "coordinator %s runs without an elector: there is no standby to hand "
                          "leadership to; it stays the leader",
                          me);
        return;
    }
    uint32_t standbys = atomic_load(self->cfg.standbys);
    if (standbys == 0) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_CONFLICT,
                          "no standby: no other coordinator is registered in etcd under "
                          "/kvtier/%s/coordinators/, so nobody could take over; start another "
                          "coordinator of this cluster first. %s stays the leader (epoch %" PRIu64
                          ")",
                          self->cfg.cluster, me, self->cfg.leader_epoch);
        return;
    }
    zframe_t *rid = zframe_dup(call->req.routing_id);
    if (!rid) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INTERNAL,
                          "out of memory keeping the caller of AdminResignRequest");
        return;
    }
    uint32_t wait_s = r->wait_s ? r->wait_s : SCHED_RESIGN_WAIT_DEFAULT_S;
    self->resign = (sched_resign_t){.on = true,
                                    .started_ms = now,
                                    .until_ms = now + (int64_t)wait_s * 1000,
                                    .windows_open = sched_open_windows(self),
                                    .rid = rid,
                                    .corr_id = call->req.env.corr_id,
                                    .srv = call->srv};
    bus_info(S_LOG,
             "%s: resigning leadership (epoch %" PRIu64 "): no new windows; %u open may finish "
             "within %" PRIu32 " s; %" PRIu32 " standbys registered",
             me, self->cfg.leader_epoch, self->resign.windows_open, wait_s, standbys);
    sched_resign_tick(self, now); /* nothing open: at once */
}

bool sched_resign_refuses(sched_t *self, sched_call_t *call)
{
    if (!self->resign.on)
        return false;
    pb_size_t tag = call->req.env.which_body;
    if (tag != kvtier_Envelope_prepare_get_req_tag && tag != kvtier_Envelope_prepare_put_req_tag &&
        tag != kvtier_Envelope_prepare_prefetch_req_tag && tag != kvtier_Envelope_prepare_req_tag)
        return false;
    /* no epoch on this one (see the file comment): the open windows stand */
    bus_server_set_leader_epoch(call->srv, 0);
    sched_reply_error(self, call, kvtier_StatusCode_STATUS_NOT_LEADER,
                      "%s: coordinator %s is handing its leadership to a standby (kvtier leader "
                      "resign): no new windows here; ask the coordinator list or etcd for the "
                      "new leader",
                      bus_body_name(tag), self->cfg.node_name);
    bus_server_set_leader_epoch(call->srv, self->cfg.leader_epoch);
    return true;
}

/* The answer to the resign's caller, sent before the hand-over. */
static void s_answer(sched_t *self, uint32_t open, int64_t now, uint32_t standbys)
{
    sched_resign_t *rs = &self->resign;
    kvtier_Envelope *rep = self->requests.op_rep;
    bus_env_init(rep, kvtier_Envelope_admin_resign_rep_tag, self->cfg.node_name);
    rep->corr_id = rs->corr_id;
    kvtier_AdminResignReply *p = &rep->body.admin_resign_rep;
    sched_strcpy(p->node_id, sizeof p->node_id, self->cfg.node_name);
    p->windows_open = rs->windows_open;
    p->windows_lapsed = open < rs->windows_open ? open : rs->windows_open;
    p->windows_finished = rs->windows_open - p->windows_lapsed;
    p->standbys = standbys;
    p->waited_ms = (uint64_t)(now - rs->started_ms);
    kvtier_Status st;
    if (bus_server_reply(rs->srv, rs->rid, rep, NULL, NULL, 0, &st) < 0)
        bus_warn(S_LOG, "the answer to kvtier leader resign was not sent: %s", st.message);
    zframe_destroy(&rs->rid);
}

/* Tells the elector to let go of the lease (coord_elector.h "RESIGN"; the elector
 * inbox's picture: command, epoch, error, revision, text). */
static void s_push_resign(sched_t *self)
{
    const char *ep = self->cfg.resign_endpoint;
    if (!ep[0])
        return;
    zsock_t *push = zsock_new_push(ep);
    if (!push) {
        bus_error(S_LOG,
                  "%s: cannot reach the elector at %s to hand over: it stops leading "
                  "and its lease lapses by itself",
                  self->cfg.node_name, ep);
        return;
    }
    if (zsock_send(push, "s8i8s", "RESIGN", self->cfg.leader_epoch, 0, (uint64_t)0,
                   self->cfg.node_name) < 0)
        bus_error(S_LOG, "%s: the hand-over to the elector was not sent", self->cfg.node_name);
    zsock_set_linger(push, 1000); /* inproc: already in the elector's queue; bounded anyway */
    zsock_destroy(&push);
}

void sched_resign_tick(sched_t *self, int64_t now)
{
    sched_resign_t *rs = &self->resign;
    if (!rs->on)
        return;
    uint32_t open = sched_open_windows(self);
    if (open > 0 && now < rs->until_ms)
        return;
    uint32_t standbys = self->cfg.standbys ? atomic_load(self->cfg.standbys) : 0;
    rs->on = false;
    rs->handed = true;
    self->lapsed = true; /* from here on NOT_LEADER, as past a lease: it leads no more */
    s_answer(self, open, now, standbys);
    bus_info(S_LOG,
             "%s: resigned leadership (epoch %" PRIu64 ") after %" PRId64
             " ms: %u windows finished, %u left to lapse; handing over to one of %" PRIu32
             " standbys",
             self->cfg.node_name, self->cfg.leader_epoch, now - rs->started_ms,
             rs->windows_open - (open < rs->windows_open ? open : rs->windows_open),
             open < rs->windows_open ? open : rs->windows_open, standbys);
    s_push_resign(self);
}

void sched_resign_fini(sched_t *self)
{
    zframe_destroy(&self->resign.rid);
}
