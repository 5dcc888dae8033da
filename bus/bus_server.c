/* bus_server.c — ROUTER request intake and replies. Rejects undecodable input
 * itself (INVALID_ARGUMENT, corr_id echoed when readable, warning rate-limited,
 * counted) so handlers only ever see validated requests. Never asserts on input. */
#include "bus_server.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <zmq.h>

#include "bus_curve.h"
#include "bus_fault.h"
#include "bus_log.h"
#include "bus_owner.h"

/* Warnings about rejected input: the first few, then every 1000th. */
#define S_WARN_FIRST 16

/* One connection event of the ROUTER's monitor. */
typedef struct {
    uint16_t event; /* ZMQ_EVENT_ACCEPTED or _DISCONNECTED */
    int fd;
    bool refuse; /* accepted past the bound */
} s_event_t;

struct bus_server {
    zsock_t *sock;
    zsock_t *mon;  /* PAIR: the ROUTER's accepted / disconnected events */
    s_event_t *ev; /* events read in one watch */
    uint32_t ev_cap;
    char name[64];
    char endpoint[256];
    uint32_t max_connections;
    uint64_t leader_epoch; /* stamped on every reply (bus_server_set_leader_epoch) */
    bus_server_stats_t stats;
    kvtier_Envelope scratch; /* error replies */
};

/* Sets up the monitor before the bind, so that no accepted connection is missed. */
static int s_monitor_new(bus_server_t *self)
{
    /* a name never used twice in the process: libzmq releases an inproc name only
     * when its socket is reaped, after the server that used it may be gone */
    static _Atomic uint64_t next;
    char ep[96];
    snprintf(ep, sizeof ep, "inproc://bus-server-mon-%" PRIu64, ++next);
    if (zmq_socket_monitor(zsock_resolve(self->sock), ep,
                           ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) < 0)
        return -1;
    self->mon = zsock_new(ZMQ_PAIR);
    if (!self->mon)
        return -1;
    /* no high-water mark: libzmq drops events it cannot queue, and a lost
     * disconnect would leave the count high for good */
    zsock_set_rcvhwm(self->mon, 0);
    if (zsock_connect(self->mon, "%s", ep) < 0)
        return -1;
    zsock_set_rcvtimeo(self->mon, 0);
    return 0;
}

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
    self->max_connections = BUS_MAX_CONNECTIONS;
    if (s_monitor_new(self) < 0) {
        bus_error("bus", "server %s: cannot watch its connections: %s", self->name,
                  zmq_strerror(errno));
        goto out_fail;
    }
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
    if (self->sock && self->mon)
        (void)zmq_socket_monitor(zsock_resolve(self->sock), NULL, 0);
    zsock_destroy(&self->mon);
    zsock_destroy(&self->sock);
    free(self->ev);
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
    if (rep->leader_epoch == 0)
        rep->leader_epoch = self->leader_epoch;
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

void bus_server_set_leader_epoch(bus_server_t *self, uint64_t epoch)
{
    self->leader_epoch = epoch;
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
    bus_server_watch(self);
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

void bus_server_set_max_connections(bus_server_t *self, uint32_t max)
{
    self->max_connections = max ? max : BUS_MAX_CONNECTIONS;
}

zsock_t *bus_server_monitor_sock(bus_server_t *self)
{
    return self->mon;
}

/* Is fd still a connection accepted on our endpoint? libzmq may have closed it
 * (its disconnected event is then queued behind) and the number may already name
 * another descriptor of this process: only a stream socket whose local address is
 * our listener's is shut down. */
static bool s_fd_is_ours(const bus_server_t *self, int fd)
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    if (fd < 0 || getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
        return false;
    const char *ep = self->endpoint;
    if (sa.ss_family == AF_UNIX) {
        const struct sockaddr_un *un = (const struct sockaddr_un *)&sa;
        size_t off = offsetof(struct sockaddr_un, sun_path);
        size_t plen = len > off ? len - off : 0; /* bytes of sun_path given */
        if (strncmp(ep, "ipc://", 6) != 0 || plen == 0)
            return false;
        const char *want = ep + 6;
        if (want[0] == '@') /* abstract: a leading NUL on the wire, no terminator */
            return un->sun_path[0] == '\0' && plen - 1 == strlen(want + 1) &&
                   memcmp(un->sun_path + 1, want + 1, plen - 1) == 0;
        size_t have = strnlen(un->sun_path, plen);
        return have == strlen(want) && memcmp(un->sun_path, want, have) == 0;
    }
    const char *colon = strrchr(ep, ':');
    if (strncmp(ep, "tcp://", 6) != 0 || !colon)
        return false;
    long port = strtol(colon + 1, NULL, 10);
    if (sa.ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)&sa)->sin_port) == port;
    if (sa.ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)&sa)->sin6_port) == port;
    return false;
}

static void s_refuse(bus_server_t *self, int fd)
{
    if (!s_fd_is_ours(self, fd))
        return;
    (void)shutdown(fd, SHUT_RDWR); /* libzmq sees the end and closes it */
    self->stats.connections_refused++;
    if (self->stats.connections_refused <= S_WARN_FIRST ||
        self->stats.connections_refused % 1000 == 0)
        bus_warn("bus",
                 "server %s: connection #%" PRIu64 " refused: %" PRIu64
                 " are open, the bound is %u (max_connections)",
                 self->name, self->stats.connections_refused, self->stats.connections - 1,
                 self->max_connections);
}

/* Reads one monitor event: false when none is pending. */
static bool s_event(void *mon, s_event_t *e)
{
    zmq_msg_t ev;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&ev);
        return false;
    }
    uint16_t event = 0;
    uint32_t value = 0;
    if (zmq_msg_size(&ev) >= 6) {
        const uint8_t *d = zmq_msg_data(&ev);
        memcpy(&event, d, sizeof event);
        memcpy(&value, d + 2, sizeof value);
    }
    bool more = zmq_msg_more(&ev);
    zmq_msg_close(&ev);
    while (more) { /* the endpoint frame */
        zmq_msg_t part;
        zmq_msg_init(&part);
        int r = zmq_msg_recv(&part, mon, ZMQ_DONTWAIT);
        more = r >= 0 && zmq_msg_more(&part);
        zmq_msg_close(&part);
    }
    *e = (s_event_t){.event = event, .fd = (int)value, .refuse = false};
    return true;
}

/* Appends every pending event to self->ev from index n: the new count. */
static uint32_t s_drain(bus_server_t *self, uint32_t n)
{
    void *mon = zsock_resolve(self->mon);
    for (;;) {
        if (n == self->ev_cap) {
            uint32_t cap = self->ev_cap ? 2 * self->ev_cap : 64;
            s_event_t *ev = realloc(self->ev, cap * sizeof *ev);
            if (!ev)
                return n; /* the rest stays queued for the next watch */
            self->ev = ev;
            self->ev_cap = cap;
        }
        if (!s_event(mon, &self->ev[n]))
            return n;
        n++;
    }
}

/* Refuses each connection marked in ev[from, to) that no later event of
 * ev[from, n) shows gone already. libzmq reports a connection disconnected before
 * it closes the descriptor, so a number reused by a newer connection always has
 * the old one's DISCONNECTED between the two: an accepted connection followed by
 * a disconnect of its number is gone, and its number may be another's now. */
static void s_refuse_marked(bus_server_t *self, uint32_t from, uint32_t to, uint32_t n)
{
    int max_fd = -1;
    for (uint32_t i = from; i < n; i++)
        if (self->ev[i].fd > max_fd)
            max_fd = self->ev[i].fd;
    if (max_fd < 0)
        return;
    uint8_t *gone = calloc((size_t)max_fd / 8 + 1, 1); /* disconnects seen after i */
    for (uint32_t i = n; i-- > from;) {
        s_event_t *e = &self->ev[i];
        if (e->fd < 0)
            continue;
        if (e->event == ZMQ_EVENT_DISCONNECTED && gone)
            gone[e->fd / 8] |= (uint8_t)(1u << (e->fd % 8));
        else if (i < to && e->refuse && !(gone && (gone[e->fd / 8] & (1u << (e->fd % 8)))))
            s_refuse(self, e->fd);
    }
    free(gone);
}

void bus_server_watch(bus_server_t *self)
{
    if (!self->mon)
        return;
    uint32_t n = s_drain(self, 0), done = 0;
    while (done < n) {
        uint32_t end = n;
        for (uint32_t i = done; i < end; i++) {
            s_event_t *e = &self->ev[i];
            if (e->event == ZMQ_EVENT_ACCEPTED) {
                self->stats.connections++;
                e->refuse = self->stats.connections > self->max_connections;
            } else if (e->event == ZMQ_EVENT_DISCONNECTED && self->stats.connections > 0) {
                self->stats.connections--;
            }
        }
        /* what arrived meanwhile may show a marked connection gone: read it first,
         * then refuse at once (the window left is the one system call) */
        n = s_drain(self, n);
        s_refuse_marked(self, done, end, n);
        done = end;
    }
}
