/* bus_client.c — DEALER request/reply with correlation ids, per-request
 * deadlines and a bounded in-flight table. A corr_id is (sequence << 24 | slot):
 * a reply finds its slot in O(1), and a late reply to a reused slot fails the
 * full-id comparison and is dropped. Never blocks on send; never allocates per
 * request (the table and the reply scratch envelope are allocated once). */
#include "bus_client.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "bus_fault.h"
#include "bus_log.h"

#define S_SLOT_BITS 24
#define S_SLOT_MASK ((UINT64_C(1) << S_SLOT_BITS) - 1)
/* Replies handled per dispatch before returning, so timers still get a turn. */
#define S_DRAIN_MAX 4096
/* Warnings about bad replies: the first few, then every 1000th. */
#define S_WARN_FIRST 16
/* Replies held back by a bus.client.reply late fault (bus_fault.h); when full, the
 * next one is delivered on time. */
#define S_HELD_MAX 16

typedef struct {
    uint64_t corr_id; /* 0: slot free */
    int64_t deadline; /* zclock_mono ms */
    uint32_t timeout_ms;
    pb_size_t req_tag;
    bus_client_done_fn *done;
    void *arg;
    bus_arrays_t *reply_arr;
} s_pending_t;

struct bus_client {
    zsock_t *sock;
    zsock_t *monitor; /* fail_on_disconnect: the PAIR of its socket monitor; else NULL */
    bool connected;   /* the monitor saw a connection up (and none down since) */
    char endpoint[256];
    char name[64];
    uint32_t cap;
    uint32_t default_timeout_ms;
    s_pending_t *pending;
    uint32_t *free_slots;
    uint32_t nfree;
    uint64_t seq;
    int64_t earliest; /* no deadline before this; INT64_MAX when none */
    int callback_depth;
    bus_client_stats_t stats;
    kvtier_Envelope reply;        /* decoded reply, valid during its callback */
    bus_client_notice_fn *notice; /* unsolicited messages (corr_id 0); NULL: dropped */
    void *notice_arg;
    zmsg_t *held[S_HELD_MAX]; /* late replies (faults on purpose), oldest first */
    int64_t held_until[S_HELD_MAX];
    uint32_t nheld;
};

bus_client_t *bus_client_new(const char *endpoint, const bus_client_config_t *cfg)
{
    uint32_t cap = cfg && cfg->max_in_flight ? cfg->max_in_flight : BUS_CLIENT_DEFAULT_IN_FLIGHT;
    if (!endpoint || cap > BUS_CLIENT_MAX_IN_FLIGHT) {
        bus_error("bus", "bus_client_new: %s",
                  !endpoint ? "no endpoint" : "max_in_flight too large");
        return NULL;
    }
    bus_client_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    snprintf(self->name, sizeof self->name, "%s", cfg && cfg->name ? cfg->name : "client");
    self->cap = cap;
    self->default_timeout_ms =
        cfg && cfg->default_timeout_ms ? cfg->default_timeout_ms : BUS_CLIENT_DEFAULT_TIMEOUT_MS;
    self->earliest = INT64_MAX;
    self->pending = calloc(cap, sizeof *self->pending);
    self->free_slots = calloc(cap, sizeof *self->free_slots);
    self->sock = zsock_new(ZMQ_DEALER);
    if (!self->pending || !self->free_slots || !self->sock)
        goto out_fail;
    zsock_set_rcvtimeo(self->sock, 0);
    uint64_t max = cfg && cfg->max_frame ? cfg->max_frame : BUS_MAX_FRAME0;
    if (max != BUS_CLIENT_UNBOUNDED) /* before the connect, so that it holds */
        zsock_set_maxmsgsize(self->sock, max > INT32_MAX ? INT32_MAX : (int)max);
    char why[256];
    if (bus_curve_connect_setup(self->sock, endpoint, cfg ? cfg->curve : NULL, why, sizeof why) <
        0) {
        bus_error("bus", "client %s: %s", self->name, why);
        goto out_fail;
    }
    snprintf(self->endpoint, sizeof self->endpoint, "%s", endpoint);
    if (cfg && cfg->fail_on_disconnect) { /* before the connect: its drop is seen */
        static _Atomic unsigned s_mon_seq;
        char mep[96];
        snprintf(mep, sizeof mep, "inproc://bus-client-monitor-%p-%u", (void *)self,
                 atomic_fetch_add(&s_mon_seq, 1));
        if (zmq_socket_monitor(zsock_resolve(self->sock), mep,
                               ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED |
                                   ZMQ_EVENT_CONNECT_RETRIED) != 0 ||
            !(self->monitor = zsock_new_pair(mep))) {
            bus_error("bus", "client %s: cannot monitor its connection to '%s'", self->name,
                      endpoint);
            goto out_fail;
        }
        zsock_set_rcvtimeo(self->monitor, 0);
    }
    if (zsock_connect(self->sock, "%s", endpoint) != 0) {
        bus_error("bus", "client %s: cannot connect to '%s': %s", self->name, endpoint,
                  zmq_strerror(errno));
        goto out_fail;
    }
    for (uint32_t i = 0; i < cap; i++)
        self->free_slots[i] = cap - 1 - i;
    self->nfree = cap;
    return self;

out_fail:
    bus_client_destroy(&self);
    return NULL;
}

void bus_client_destroy(bus_client_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    bus_client_t *self = *self_p;
    for (uint32_t i = 0; i < self->nheld; i++)
        zmsg_destroy(&self->held[i]);
    if (self->monitor)
        (void)zmq_socket_monitor(zsock_resolve(self->sock), NULL, 0);
    zsock_destroy(&self->monitor);
    zsock_destroy(&self->sock);
    free(self->pending);
    free(self->free_slots);
    free(self);
    *self_p = NULL;
}

zsock_t *bus_client_sock(bus_client_t *self)
{
    return self->sock;
}

static void s_release_slot(bus_client_t *self, uint32_t slot)
{
    self->pending[slot].corr_id = 0;
    self->free_slots[self->nfree++] = slot;
}

static void s_complete(bus_client_t *self, const s_pending_t *p, bus_reply_t *r)
{
    self->stats.completed++;
    if (r->status.code == kvtier_StatusCode_STATUS_TIMEOUT && !r->env)
        self->stats.timeouts++;
    self->callback_depth++;
    p->done(p->arg, r);
    self->callback_depth--;
    zmsg_destroy(&r->msg);
}

/* Completes the request in `slot` without a reply. */
static void s_fail_slot(bus_client_t *self, uint32_t slot, bus_code_t code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void s_fail_slot(bus_client_t *self, uint32_t slot, bus_code_t code, const char *fmt, ...)
{
    s_pending_t p = self->pending[slot];
    bus_reply_t r = {.corr_id = p.corr_id, .req_tag = p.req_tag};
    r.status.code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r.status.message, sizeof r.status.message, fmt, ap);
    va_end(ap);
    s_release_slot(self, slot);
    s_complete(self, &p, &r);
}

int bus_client_send(bus_client_t *self, kvtier_Envelope *req, bus_arrays_t *req_arr,
                    const bus_payload_t *payload, uint32_t npayload, uint32_t timeout_ms,
                    bus_arrays_t *reply_arr, bus_client_done_fn *done, void *arg,
                    uint64_t *corr_id_out, kvtier_Status *st)
{
    kvtier_Status scratch;
    if (!st)
        st = &scratch;
    if (!req || !done || bus_body_dir(req->which_body) != BUS_DIR_REQUEST) {
        bus_payload_release(payload, npayload);
        self->stats.refused++;
        return bus_status_set(st, kvtier_StatusCode_STATUS_INVALID_ARGUMENT, "client %s: %s",
                              self->name,
                              !req    ? "no request envelope"
                              : !done ? "no completion callback"
                                      : "the envelope's body kind is not a request");
    }
    if (self->nfree == 0) {
        bus_payload_release(payload, npayload);
        self->stats.refused++;
        return bus_status_set(st, kvtier_StatusCode_STATUS_UNAVAILABLE,
                              "client %s: %u requests in flight (max_in_flight %u); %s refused, "
                              "retry after completions",
                              self->name, self->cap, self->cap, bus_body_name(req->which_body));
    }
    uint32_t slot = self->free_slots[--self->nfree];
    uint64_t corr_id = (++self->seq << S_SLOT_BITS) | slot;
    req->corr_id = corr_id;
    if (req->version == 0)
        req->version = BUS_PROTOCOL_VERSION;
    if (req->sender[0] == '\0')
        snprintf(req->sender, sizeof req->sender, "%s", self->name);

    int rc = bus_msg_send(self->sock, NULL, req, req_arr, payload, npayload, st);
    if (rc < 0) {
        self->free_slots[self->nfree++] = slot;
        self->stats.refused++;
        return rc;
    }
    uint32_t timeout = timeout_ms ? timeout_ms : self->default_timeout_ms;
    s_pending_t *p = &self->pending[slot];
    *p = (s_pending_t){.corr_id = corr_id,
                       .deadline = zclock_mono() + timeout,
                       .timeout_ms = timeout,
                       .req_tag = req->which_body,
                       .done = done,
                       .arg = arg,
                       .reply_arr = reply_arr};
    if (p->deadline < self->earliest)
        self->earliest = p->deadline;
    self->stats.sent++;
    if (corr_id_out)
        *corr_id_out = corr_id;
    return 0;
}

static bool s_should_warn(uint64_t count)
{
    return count <= S_WARN_FIRST || count % 1000 == 0;
}

/* A message without corr_id (0, which no request has) is no request's reply: a
 * notice the server sent by itself (a body without arrays: a tier's TierNotice).
 * Handed to the owner's handler when it decodes; counted as bad and dropped
 * otherwise. */
static int s_handle_notice(bus_client_t *self, zmsg_t *msg)
{
    kvtier_Status st = {0};
    if (bus_msg_decode(msg, BUS_DIR_REPLY, &self->reply, NULL, &st) < 0 ||
        self->reply.which_body == 0) {
        if (s_should_warn(++self->stats.bad_replies))
            bus_warn("bus", "client %s: dropped a message without corr_id: %s", self->name,
                     self->reply.which_body == 0 && st.code == 0 ? "no body" : st.message);
        zmsg_destroy(&msg);
        return 0;
    }
    self->stats.notices++;
    self->callback_depth++;
    self->notice(self->notice_arg, &self->reply);
    self->callback_depth--;
    zmsg_destroy(&msg);
    return 0;
}

void bus_client_set_notice(bus_client_t *self, bus_client_notice_fn *fn, void *arg)
{
    self->notice = fn;
    self->notice_arg = arg;
}

/* One received reply: match, decode with the request's arrays, complete. */
static int s_handle_reply(bus_client_t *self, zmsg_t *msg)
{
    zframe_t *f0 = zmsg_first(msg);
    bus_env_header_t h;
    int peek = f0 ? bus_env_peek(zframe_data(f0), zframe_size(f0), &h) : -1;
    if (peek == 0 && !h.has_corr_id && self->notice)
        return s_handle_notice(self, msg);
    if (peek < 0 || !h.has_corr_id) {
        if (s_should_warn(++self->stats.bad_replies))
            bus_warn("bus", "client %s: dropped a reply without a readable corr_id (%zu bytes)",
                     self->name, f0 ? zframe_size(f0) : (size_t)0);
        zmsg_destroy(&msg);
        return 0;
    }
    if (h.body_tag != 0 && bus_body_dir(h.body_tag) == BUS_DIR_REQUEST) {
        /* our own request back: a TCP connection to itself (the server's port is free
         * and in the ephemeral range, e.g. while a leader restarts). Not a reply: the
         * request times out and the caller looks for the server again. */
        if (s_should_warn(++self->stats.bad_replies))
            bus_warn("bus", "client %s: a request came back (%s): connected to itself? dropped",
                     self->name, bus_body_name(h.body_tag));
        zmsg_destroy(&msg);
        return 0;
    }
    uint64_t slot = h.corr_id & S_SLOT_MASK;
    if (slot >= self->cap || self->pending[slot].corr_id != h.corr_id) {
        self->stats.late++;
        bus_debug("bus", "client %s: dropped late or unknown reply corr_id %" PRIu64, self->name,
                  h.corr_id);
        zmsg_destroy(&msg);
        return 0;
    }
    s_pending_t p = self->pending[slot];
    bus_reply_t r = {.corr_id = p.corr_id, .req_tag = p.req_tag};
    int rc = bus_msg_decode(msg, BUS_DIR_REPLY, &self->reply, p.reply_arr, &r.status);
    pb_size_t want = bus_body_reply_tag(p.req_tag);
    if (rc == 0 && self->reply.which_body != 0 && self->reply.which_body != want)
        rc = bus_status_set(&r.status, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                            "reply to %s carries %s", bus_body_name(p.req_tag),
                            bus_body_name(self->reply.which_body));
    if (rc < 0) {
        if (s_should_warn(++self->stats.bad_replies))
            bus_warn("bus", "client %s: bad reply to %s: %s", self->name, bus_body_name(p.req_tag),
                     r.status.message);
        zmsg_destroy(&msg);
    } else {
        self->stats.replies++;
        r.env = &self->reply;
        r.msg = msg;
        if (self->reply.has_status)
            r.status = self->reply.status;
        else
            r.status = (kvtier_Status){.code = kvtier_StatusCode_STATUS_OK};
    }
    s_release_slot(self, (uint32_t)slot);
    s_complete(self, &p, &r);
    return 1;
}

/* Faults on purpose (bus_fault.h): a reply lost, or held back to arrive late
 * (after its request timed out and was maybe retried under a new corr_id).
 * True when msg was taken. */
static bool s_fault_reply(bus_client_t *self, zmsg_t *msg)
{
    bus_fault_hit_t hit;
    if (!bus_fault_fire(BUS_FAULT_CLIENT_REPLY, &hit))
        return false;
    if (hit.action == BUS_FAULT_LATE && self->nheld < S_HELD_MAX) {
        self->held_until[self->nheld] = zclock_mono() + hit.ms;
        self->held[self->nheld++] = msg;
        return true;
    }
    if (hit.action != BUS_FAULT_DROP)
        return false;
    zmsg_destroy(&msg);
    return true;
}

/* Delivers the held replies whose time has come. */
static int s_release_held(bus_client_t *self, int64_t now)
{
    int done = 0;
    while (self->nheld && self->held_until[0] <= now) {
        zmsg_t *msg = self->held[0];
        self->nheld--;
        memmove(self->held, self->held + 1, self->nheld * sizeof self->held[0]);
        memmove(self->held_until, self->held_until + 1, self->nheld * sizeof self->held_until[0]);
        done += s_handle_reply(self, msg);
    }
    return done;
}

static int s_drain(bus_client_t *self)
{
    int done = self->nheld ? s_release_held(self, zclock_mono()) : 0;
    for (int i = 0; i < S_DRAIN_MAX; i++) {
        zmsg_t *msg = zmsg_recv(self->sock);
        if (!msg)
            break;
        if (!s_fault_reply(self, msg))
            done += s_handle_reply(self, msg);
    }
    return done;
}

static int s_expire(bus_client_t *self, int64_t now)
{
    if (now < self->earliest)
        return 0;
    int done = 0;
    /* Recomputed below; sends from callbacks lower it as they go. */
    self->earliest = INT64_MAX;
    for (uint32_t slot = 0; slot < self->cap; slot++) {
        s_pending_t *p = &self->pending[slot];
        if (!p->corr_id)
            continue;
        if (p->deadline > now) {
            if (p->deadline < self->earliest)
                self->earliest = p->deadline;
            continue;
        }
        s_fail_slot(self, slot, kvtier_StatusCode_STATUS_TIMEOUT,
                    "no reply to %s (corr_id %" PRIu64 ") within %u ms", bus_body_name(p->req_tag),
                    p->corr_id, p->timeout_ms);
        done++;
    }
    return done;
}

int64_t bus_client_next_timeout_ms(bus_client_t *self)
{
    int64_t due = self->nfree == self->cap ? INT64_MAX : self->earliest;
    if (self->nheld && self->held_until[0] < due)
        due = self->held_until[0];
    if (due == INT64_MAX)
        return -1;
    int64_t now = zclock_mono();
    return due > now ? due - now : 0;
}

/* fail_on_disconnect: a DISCONNECTED event fails what is in flight, and so does a
 * connect that was refused (CONNECT_RETRIED) while no connection is up: a peer
 * that is not there answers nothing queued for it. */
static int s_monitor(bus_client_t *self)
{
    int done = 0;
    zmsg_t *ev;
    while (self->monitor && (ev = zmsg_recv(self->monitor)) != NULL) {
        zframe_t *f = zmsg_first(ev);
        uint16_t id = 0;
        if (f && zframe_size(f) >= 2)
            memcpy(&id, zframe_data(f), 2); /* host order, as libzmq writes it */
        zmsg_destroy(&ev);
        if (id == ZMQ_EVENT_CONNECTED) {
            self->connected = true;
            continue;
        }
        bool down = id == ZMQ_EVENT_DISCONNECTED;
        if (down)
            self->connected = false;
        if ((down || (id == ZMQ_EVENT_CONNECT_RETRIED && !self->connected)) &&
            self->nfree != self->cap) {
            char why[400];
            snprintf(why, sizeof why,
                     down ? "client %.63s: the connection to %.255s closed with the request in "
                            "flight"
                          : "client %.63s: %.255s refused the connection (nothing listens "
                            "there now)",
                     self->name, self->endpoint);
            done += bus_client_fail_all(self, kvtier_StatusCode_STATUS_UNAVAILABLE, why);
        }
    }
    return done;
}

int bus_client_dispatch(bus_client_t *self, int wait_ms)
{
    if (self->callback_depth > 0) {
        bus_error("bus", "client %s: dispatch called from inside a completion callback",
                  self->name);
        return -(int)kvtier_StatusCode_STATUS_INTERNAL;
    }
    int64_t start = zclock_mono();
    int done = 0;
    for (;;) {
        done += s_drain(self);
        done += s_monitor(self);
        done += s_expire(self, zclock_mono());
        if (done > 0 || wait_ms == 0)
            return done;
        if (wait_ms < 0 && self->nfree == self->cap)
            return 0; /* nothing in flight: nothing to wait for */
        int64_t now = zclock_mono();
        int64_t until = wait_ms < 0 ? INT64_MAX : start + wait_ms - now;
        if (until <= 0)
            return 0;
        if (self->earliest != INT64_MAX && self->earliest - now < until)
            until = self->earliest > now ? self->earliest - now : 0;
        if (self->nheld && self->held_until[0] - now < until)
            until = self->held_until[0] > now ? self->held_until[0] - now : 0;
        zmq_pollitem_t items[2] = {{zsock_resolve(self->sock), 0, ZMQ_POLLIN, 0},
                                   {self->monitor ? zsock_resolve(self->monitor) : NULL, 0,
                                    ZMQ_POLLIN, 0}};
        long timeout = until > INT_MAX ? -1 : (long)until;
        if (zmq_poll(items, self->monitor ? 2 : 1, timeout) < 0) {
            if (errno == EINTR)
                return done;
            return -(int)kvtier_StatusCode_STATUS_UNAVAILABLE;
        }
    }
}

int bus_client_fail_all(bus_client_t *self, bus_code_t code, const char *why)
{
    int done = 0;
    for (uint32_t slot = 0; slot < self->cap; slot++) {
        if (!self->pending[slot].corr_id)
            continue;
        s_fail_slot(self, slot, code, "%s", why ? why : bus_status_name((int)code));
        done++;
    }
    return done;
}

typedef struct {
    bool done;
    kvtier_Status st;
    kvtier_Envelope *reply;
    zmsg_t **payload_out;
} s_call_t;

static void s_call_done(void *arg, bus_reply_t *r)
{
    s_call_t *c = arg;
    c->done = true;
    c->st = r->status;
    if (r->env && c->reply)
        memcpy(c->reply, r->env, sizeof *c->reply);
    if (r->msg && c->payload_out && zmsg_size(r->msg) > 1) {
        zframe_t *f0 = zmsg_pop(r->msg);
        zframe_destroy(&f0);
        *c->payload_out = r->msg;
        r->msg = NULL;
    }
}

int bus_client_call(bus_client_t *self, kvtier_Envelope *req, bus_arrays_t *req_arr,
                    const bus_payload_t *payload, uint32_t npayload, uint32_t timeout_ms,
                    kvtier_Envelope *reply, bus_arrays_t *reply_arr, zmsg_t **reply_payload,
                    kvtier_Status *st)
{
    kvtier_Status scratch;
    if (!st)
        st = &scratch;
    if (reply_payload)
        *reply_payload = NULL;
    if (self->callback_depth > 0) {
        bus_payload_release(payload, npayload);
        return bus_status_set(st, kvtier_StatusCode_STATUS_INTERNAL,
                              "client %s: bus_client_call from inside a completion callback",
                              self->name);
    }
    s_call_t call = {.reply = reply, .payload_out = reply_payload};
    uint64_t corr_id = 0;
    int rc = bus_client_send(self, req, req_arr, payload, npayload, timeout_ms, reply_arr,
                             s_call_done, &call, &corr_id, st);
    if (rc < 0)
        return rc;
    while (!call.done) {
        if (bus_client_dispatch(self, -1) < 0 && !call.done) {
            uint32_t slot = (uint32_t)(corr_id & S_SLOT_MASK);
            s_fail_slot(self, slot, kvtier_StatusCode_STATUS_UNAVAILABLE,
                        "client %s: socket failed while waiting for the reply", self->name);
        }
    }
    *st = call.st;
    return call.st.code == kvtier_StatusCode_STATUS_OK ? 0 : -(int)call.st.code;
}

void bus_client_stats(bus_client_t *self, bus_client_stats_t *stats)
{
    *stats = self->stats;
    stats->in_flight = self->cap - self->nfree;
}
