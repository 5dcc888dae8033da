/* bus_server.h — the serving end of request/reply over a ROUTER socket.
 * bus_server_recv hands over only requests that decoded and validated; anything
 * else is answered INVALID_ARGUMENT right here (echoing the corr_id when it can
 * be read), logged and counted, and never reaches the caller or crashes it.
 *
 * Thread-safety: none; one owner thread (typically an actor) uses a server. */
#ifndef KVT_BUS_SERVER_H
#define KVT_BUS_SERVER_H

#include "bus_curve.h"
#include "bus_envelope.h"

typedef struct bus_server bus_server_t;

typedef struct {
    uint64_t received; /* messages read off the socket */
    uint64_t accepted; /* handed to the caller */
    uint64_t rejected; /* answered INVALID_ARGUMENT by the server itself */
    uint64_t replies;  /* replies sent (including rejections) */
    uint64_t send_failures;
    uint64_t connections;         /* connections open now (accepted, not yet gone) */
    uint64_t connections_refused; /* accepted past the bound and closed at once */
} bus_server_stats_t;

/* Connections a server keeps open by default (bus_server_set_max_connections). */
#define BUS_MAX_CONNECTIONS 1024u

/* A received request. Reuse one (it embeds a whole Envelope); bus_server_recv
 * resets it first. To answer later, keep zframe_dup(routing_id). */
typedef struct {
    zframe_t *routing_id; /* the peer */
    zmsg_t *msg;          /* [frame 0][payload...]: payload i is bus_msg_payload(msg, i) */
    kvtier_Envelope env;  /* decoded request; its arrays are in the caller's bus_arrays_t */
    char peer_key[BUS_CURVE_KEY_TXT]; /* the CURVE client key (Z85) the request came
                                         from; "" on a socket without CURVE */
} bus_request_t;

/* Binds a ROUTER to `endpoint` ("tcp://127.0.0.1:*" picks a port; read it back
 * with bus_server_endpoint). `name` is the sender of replies. NULL on failure. */
bus_server_t *bus_server_new(const char *endpoint, const char *name);

/* The same with the largest frame accepted (ZMQ_MAXMSGSIZE, set before the bind so
 * that it holds: a larger frame disconnects its sender instead of being buffered).
 * bus_server_new uses BUS_MAX_FRAME0, the largest frame any request has; a tier
 * actor, whose writes carry blocks, gives its slot size when that is larger. */
bus_server_t *bus_server_new_bounded(const char *endpoint, const char *name, uint64_t max_frame);

/* Closes the socket; nulls *self_p; idempotent. */
void bus_server_destroy(bus_server_t **self_p);

zsock_t *bus_server_sock(bus_server_t *self);

/* The endpoint actually bound (ephemeral port resolved). */
const char *bus_server_endpoint(bus_server_t *self);

/* Waits up to wait_ms (0: no wait, -1: forever) for one message. Returns 1 with a
 * valid request in *req (arrays in arr, which needs room for any body the server
 * accepts, e.g. bus_arrays_new(BUS_MAX_ARRAY, BUS_MAX_BLOB)); 0 when nothing
 * arrived or the message was rejected (already answered); < 0 on socket failure
 * or interrupt. */
int bus_server_recv(bus_server_t *self, int wait_ms, bus_request_t *req, bus_arrays_t *arr);

/* Frees the routing id and frames of *req (the envelope stays as it was). */
void bus_request_reset(bus_request_t *req);

/* Sends a reply (built with bus_env_init_reply) to routing_id. Payload ownership
 * passes (bus_payload_t). 0 or < 0 with st set. */
int bus_server_reply(bus_server_t *self, const zframe_t *routing_id, kvtier_Envelope *rep,
                     bus_arrays_t *arr, const bus_payload_t *payload, uint32_t npayload,
                     kvtier_Status *st);

/* Sends a reply without body: status `code` and a formatted message. */
int bus_server_reply_error(bus_server_t *self, const zframe_t *routing_id, uint64_t corr_id,
                           bus_code_t code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

void bus_server_stats(bus_server_t *self, bus_server_stats_t *stats);

/* Every reply this server sends from now on (its errors and rejections too)
 * carries Envelope.leader_epoch = epoch, unless the reply set one itself: the
 * scheduler's (issue 9 §1), so a client sees which leader answered. 0: none. */
void bus_server_set_leader_epoch(bus_server_t *self, uint64_t epoch);

/* The bound on connections (issue 12 §3). libzmq accepts every connection and
 * has no cap of its own, so a server watches its ROUTER's accepted and
 * disconnected events (a socket monitor set before the bind) and closes, at once,
 * each connection accepted while `max` others are open: the peer sees its
 * connection drop (a ZeroMQ peer reconnects by itself and is refused again while
 * the server stays full); the first refusals and every 1000th are logged. The
 * bound keeps file descriptors and libzmq's per-connection buffers bounded under a
 * flood of connections; it does not tell a legitimate client from a hostile one.
 * max 0: BUS_MAX_CONNECTIONS (the default of every server). */
void bus_server_set_max_connections(bus_server_t *self, uint32_t max);

/* The monitor socket to poll beside bus_server_sock: when it is readable, call
 * bus_server_watch, which reads every pending event and closes connections past
 * the bound. bus_server_recv also calls it, so a busy server keeps the count
 * without polling it; an idle one that must stay bounded polls it. */
zsock_t *bus_server_monitor_sock(bus_server_t *self);
void bus_server_watch(bus_server_t *self);

#endif
