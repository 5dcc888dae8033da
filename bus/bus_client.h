/* bus_client.h — request/reply client over a DEALER socket (DESIGN.md §3, §5).
 * Many requests in flight, matched to replies by correlation id in any order;
 * each completes exactly once: with its reply, with TIMEOUT when its deadline
 * passes, or with the error that refused it. Replies that match nothing in
 * flight (late after a timeout, duplicated, or unknown) are dropped and counted.
 *
 * Thread-safety: none. One owner thread creates, sends, dispatches and destroys
 * a client; completion callbacks run on that thread inside bus_client_dispatch
 * or bus_client_call. Use one client per thread (the socket is not thread-safe
 * either).
 *
 * Bounds: at most `max_in_flight` requests are outstanding; at the bound
 * bus_client_send refuses with UNAVAILABLE (nothing is queued). Sends never block:
 * a full ZeroMQ send queue is UNAVAILABLE too. */
#ifndef KVT_BUS_CLIENT_H
#define KVT_BUS_CLIENT_H

#include "bus_curve.h"
#include "bus_envelope.h"

#define BUS_CLIENT_DEFAULT_IN_FLIGHT 64u
#define BUS_CLIENT_MAX_IN_FLIGHT 65536u /* corr ids keep the slot in 24 bits */
#define BUS_CLIENT_DEFAULT_TIMEOUT_MS 5000u

typedef struct bus_client bus_client_t;

typedef struct {
    const char *name;            /* Envelope.sender of requests; NULL: "client" */
    uint32_t max_in_flight;      /* 0: BUS_CLIENT_DEFAULT_IN_FLIGHT */
    uint32_t default_timeout_ms; /* used when a send passes 0; 0: BUS_CLIENT_DEFAULT_TIMEOUT_MS */
    uint64_t max_frame;          /* largest reply frame accepted (ZMQ_MAXMSGSIZE, set before
                                    the connect): a larger one drops the connection instead
                                    of being buffered; 0: BUS_MAX_FRAME0; BUS_CLIENT_UNBOUNDED:
                                    none (replies that carry blocks of any size) */
    const bus_curve_client_t *curve; /* keys for a tcp endpoint (copied at the connect);
                                        NULL: the process setting (bus_curve.h), if on */
    /* Fail every request in flight with UNAVAILABLE as soon as the connection drops
     * (a socket monitor's DISCONNECTED), or when a connect is refused while none is
     * up (CONNECT_RETRIED), instead of at each one's timeout: a peer that died
     * never answers what it had. For a caller that resends (libkvtier's meta
     * plane); a reply that still comes is counted late. */
    bool fail_on_disconnect;
} bus_client_config_t;

#define BUS_CLIENT_UNBOUNDED UINT64_MAX

typedef struct {
    uint64_t sent;        /* requests accepted by bus_client_send */
    uint64_t completed;   /* completions delivered (replies + timeouts + failures) */
    uint64_t replies;     /* completions carrying a reply that decoded */
    uint64_t timeouts;    /* completions with TIMEOUT */
    uint64_t refused;     /* sends refused (in-flight bound, queue full, bad request) */
    uint64_t late;        /* replies dropped: no request in flight with that corr_id */
    uint64_t notices;     /* unsolicited messages (corr_id 0) handed to the notice handler */
    uint64_t bad_replies; /* replies that did not decode (request completed with the error)
                             or had no readable corr_id (dropped) */
    uint32_t in_flight;
} bus_client_stats_t;

/* One completion, valid only during the callback. */
typedef struct {
    uint64_t corr_id;
    pb_size_t req_tag;    /* body kind of the request */
    kvtier_Status status; /* the reply's own status, or TIMEOUT, or a decode error */
    kvtier_Envelope *env; /* decoded reply; NULL when none arrived or it did not decode */
    zmsg_t *msg;          /* [frame 0][payload...] of the reply, or NULL. The callback
                             may take it (set msg = NULL); otherwise it is destroyed */
} bus_reply_t;

typedef void(bus_client_done_fn)(void *arg, bus_reply_t *reply);

/* Creates a DEALER connected to `endpoint` (a plain ZeroMQ endpoint). NULL on
 * failure (bad endpoint, bad config, out of memory). */
bus_client_t *bus_client_new(const char *endpoint, const bus_client_config_t *cfg);

/* Closes the socket. Requests still in flight are dropped without callbacks; call
 * bus_client_fail_all first when callers wait on them. Nulls *self_p; idempotent. */
void bus_client_destroy(bus_client_t **self_p);

/* The DEALER, for a zpoller/zloop: call bus_client_dispatch(self, 0) when readable,
 * and when bus_client_next_timeout_ms says a deadline is due. */
zsock_t *bus_client_sock(bus_client_t *self);

/* Sends a request (its body kind must be a request). Sets req->corr_id, and
 * req->version / req->sender when unset. `reply_arr` receives the reply's arrays
 * and must stay valid until the completion; NULL: the reply carries none.
 * timeout_ms 0: the configured default. `done` runs exactly once if this returns 0;
 * never if it returns < 0 (st says why). Payload ownership passes in all cases
 * (bus_payload_t). *corr_id_out (may be NULL) gets the correlation id. */
int bus_client_send(bus_client_t *self, kvtier_Envelope *req, bus_arrays_t *req_arr,
                    const bus_payload_t *payload, uint32_t npayload, uint32_t timeout_ms,
                    bus_arrays_t *reply_arr, bus_client_done_fn *done, void *arg,
                    uint64_t *corr_id_out, kvtier_Status *st);

/* Receives what has arrived, waiting up to wait_ms (0: do not wait; -1: until at
 * least one completion) for the first completion, expires due requests and runs
 * their callbacks. Returns the number of completions, or < 0 (interrupted, or
 * called from inside a completion callback). */
int bus_client_dispatch(bus_client_t *self, int wait_ms);

/* Milliseconds until the earliest in-flight deadline (0 if due), -1 if none. */
int64_t bus_client_next_timeout_ms(bus_client_t *self);

/* Completes every in-flight request now with `code` and `why` (e.g. UNAVAILABLE
 * before reconnecting to a new leader). Returns how many completed. */
int bus_client_fail_all(bus_client_t *self, bus_code_t code, const char *why);

/* Synchronous call: sends and dispatches until this request completes (other
 * requests' callbacks run meanwhile). *reply gets the reply envelope (arrays in
 * reply_arr); *reply_payload (may be NULL) gets the reply's payload frames 1..n as
 * a zmsg the caller destroys (NULL when there are none). Returns 0 when the reply
 * status is OK; otherwise < 0 with st set (the reply's status, TIMEOUT, ...). Not
 * callable from inside a completion callback. */
int bus_client_call(bus_client_t *self, kvtier_Envelope *req, bus_arrays_t *req_arr,
                    const bus_payload_t *payload, uint32_t npayload, uint32_t timeout_ms,
                    kvtier_Envelope *reply, bus_arrays_t *reply_arr, zmsg_t **reply_payload,
                    kvtier_Status *st);

void bus_client_stats(bus_client_t *self, bus_client_stats_t *stats);

/* A message the server sends by itself (no corr_id, a reply-direction body without
 * arrays, e.g. a tier's TierNotice) runs FN(arg, env) inside bus_client_dispatch;
 * env is valid during the call. Without a handler (the default), or when it does not
 * decode, such a message is dropped and counted in bad_replies. A handler must not
 * call into this client. */
typedef void(bus_client_notice_fn)(void *arg, const kvtier_Envelope *env);
void bus_client_set_notice(bus_client_t *self, bus_client_notice_fn *fn, void *arg);

#endif
