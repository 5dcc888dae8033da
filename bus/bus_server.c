/* bus_server.c — ROUTER request intake and replies. Rejects undecodable input
 * itself (INVALID_ARGUMENT, corr_id echoed when readable, warning rate-limited,
 * counted) so handlers only ever see validated requests. Never asserts on input. */
#include "bus_server.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "bus_curve.h"
#include "bus_fault.h"
#include "bus_log.h"
#include "bus_owner.h"

/* Warnings about rejected input: the first few, then every 1000th. */
#define S_WARN_FIRST 16

struct bus_server {
    zsock_t *sock;
    char name[64];
    char endpoint[256];
    bus_server_stats_t stats;
    kvtier_Envelope scratch; /* error replies */
};

bus_server_t *bus_server_new(const char *endpoint, const char *name)
{
    return bus_server_new_bounded(endpoint, name, BUS_MAX_FRAME0);
}

bus_server_t *bus_server_new_bounded(const char *endpoint, const char *name, uint64_t max_frame)
{
    if (!endpoint || max_frame == 0)
        return NULL;
    bus_server_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    snprintf(self->name, sizeof self->name, "%s", name ? name : "server");
    self->sock = zsock_new(ZMQ_ROUTER);
    if (!self->sock)
        goto out_fail;
    zsock_set_rcvtimeo(self->sock, 0);
    /* before the bind: libzmq applies it to the connections it accepts from then on */
    zsock_set_maxmsgsize(self->sock, max_frame > INT32_MAX ? INT32_MAX : (int)max_frame);
    char why[256];
    if (bus_curve_bind_setup(self->sock, endpoint, why, sizeof why) < 0) {
        bus_error("bus", "server %s: %s", self->name, why);
        goto out_fail;
    }
    if (zsock_bind(self->sock, "%s", endpoint) < 0) {
        int e = errno;
        char who[BUS_OWNER_MAX] = "";
        if (e == EADDRINUSE)
            (void)bus_owner_check_bind(endpoint, who, sizeof who);
        bus_error("bus", "server %s: cannot bind '%s': %s%s%s", self->name, endpoint,
                  zmq_strerror(e), who[0] ? ", held by " : "", who);
        goto out_fail;
    }
    char *last = zsock_last_endpoint(self->sock);
    snprintf(self->endpoint, sizeof self->endpoint, "%s", last ? last : endpoint);
    zstr_free(&last);
    return self;

out_fail:
    bus_server_destroy(&self);
    return NULL;
}

void bus_server_destroy(bus_server_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    bus_server_t *self = *self_p;
    zsock_destroy(&self->sock);
    free(self);
    *self_p = NULL;
}

zsock_t *bus_server_sock(bus_server_t *self)
{
    return self->sock;
}

const char *bus_server_endpoint(bus_server_t *self)
{
    return self->endpoint;
}

void bus_request_reset(bus_request_t *req)
{
    req->peer_key[0] = '\0';
    zframe_destroy(&req->routing_id);
    zmsg_destroy(&req->msg);
}

int bus_server_reply(bus_server_t *self, const zframe_t *routing_id, kvtier_Envelope *rep,
                     bus_arrays_t *arr, const bus_payload_t *payload, uint32_t npayload,
                     kvtier_Status *st)
{
    kvtier_Status scratch;
    if (!st)
        st = &scratch;
    if (rep->sender[0] == '\0')
        snprintf(rep->sender, sizeof rep->sender, "%s", self->name);
    bus_fault_hit_t hit; /* faults on purpose: a lost or slow reply (bus_fault.h) */
    if (bus_fault_fire(BUS_FAULT_SERVER_REPLY, &hit)) {
        if (hit.action == BUS_FAULT_DELAY) {
            zclock_sleep((int)hit.ms);
        } else {
            for (uint32_t i = 0; i < npayload; i++)
                if (payload[i].free_fn)
                    payload[i].free_fn((void *)payload[i].data, payload[i].hint);
            self->stats.replies++; /* as far as the handler knows, it went */
            return 0;
        }
    }
    int rc = bus_msg_send(self->sock, routing_id, rep, arr, payload, npayload, st);
    if (rc < 0) {
        self->stats.send_failures++;
        bus_warn("bus", "server %s: reply not sent: %s", self->name, st->message);
        return rc;
    }
    self->stats.replies++;
    return 0;
}

int bus_server_reply_error(bus_server_t *self, const zframe_t *routing_id, uint64_t corr_id,
                           bus_code_t code, const char *fmt, ...)
{
    kvtier_Envelope *rep = &self->scratch;
    bus_env_init(rep, 0, self->name);
    rep->corr_id = corr_id;
    rep->has_status = true;
    rep->status.code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rep->status.message, sizeof rep->status.message, fmt, ap);
    va_end(ap);
    return bus_server_reply(self, routing_id, rep, NULL, NULL, 0, NULL);
}

/* Answers input that did not validate and drops it. */
static void s_reject(bus_server_t *self, const zframe_t *routing_id, zmsg_t *msg,
                     const kvtier_Status *why)
{
    bus_env_header_t h = {0};
    zframe_t *f0 = zmsg_first(msg);
    if (f0)
        (void)bus_env_peek(zframe_data(f0), zframe_size(f0), &h);
    self->stats.rejected++;
    if (self->stats.rejected <= S_WARN_FIRST || self->stats.rejected % 1000 == 0) {
        char *peer = zframe_strhex((zframe_t *)routing_id);
        bus_warn("bus", "server %s: rejected input #%" PRIu64 " from peer %s: %s", self->name,
                 self->stats.rejected, peer ? peer : "?", why->message);
        zstr_free(&peer);
    }
    bus_server_reply_error(self, routing_id, h.corr_id, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                           "%s", why->message);
}

int bus_server_recv(bus_server_t *self, int wait_ms, bus_request_t *req, bus_arrays_t *arr)
{
    bus_request_reset(req);
    if (wait_ms != 0) {
        zmq_pollitem_t item = {zsock_resolve(self->sock), 0, ZMQ_POLLIN, 0};
        int r = zmq_poll(&item, 1, wait_ms < 0 ? -1 : (long)wait_ms);
        if (r < 0)
            return -(int)kvtier_StatusCode_STATUS_UNAVAILABLE;
        if (r == 0)
            return 0;
    }
    zmsg_t *msg = zmsg_recv(self->sock);
    if (!msg)
        return errno == EAGAIN ? 0 : -(int)kvtier_StatusCode_STATUS_UNAVAILABLE;
    self->stats.received++;
    zframe_t *rid = zmsg_pop(msg);
    kvtier_Status st;
    if (bus_msg_decode(msg, BUS_DIR_REQUEST, &req->env, arr, &st) < 0) {
        if (rid)
            s_reject(self, rid, msg, &st);
        zframe_destroy(&rid);
        zmsg_destroy(&msg);
        return 0;
    }
    req->routing_id = rid;
    req->msg = msg;
    const char *peer = bus_curve_peer_key(zmsg_first(msg));
    snprintf(req->peer_key, sizeof req->peer_key, "%s", peer ? peer : "");
    self->stats.accepted++;
    return 1;
}

void bus_server_stats(bus_server_t *self, bus_server_stats_t *stats)
{
    *stats = self->stats;
}
