/* bus_ucx_peer.h — the sending side of the remote tier's transport ucx
 * (bus_ucx_peer.c): a UCX worker (bus_ucx.h) and one connection per tier actor
 * that advertised UCX: an endpoint to its listener, the remote key of the staging
 * region its Probe{ucx} handed out, and the region's allocation. Used by the
 * client's frames transport (client/kvt_transport_frames.c) and by a copying tier
 * actor (actors/tier_actor_copy.c), which keep the ZeroMQ requests that carry the
 * token, the fence and the checksums; only the bytes move here, one-sided into
 * and out of the region. */
#ifndef KVT_BUS_UCX_PEER_H
#define KVT_BUS_UCX_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bus_ucx_peer bus_ucx_peer_t;
typedef struct bus_ucx_conn bus_ucx_conn_t;

/* Runs when the operations posted before it are complete: status 0, or < 0 with
 * a message (the peer went, the endpoint was closed). */
typedef void (*bus_ucx_done_fn)(void *arg, int status, const char *msg);

/* NULL (why filled) when UCX cannot run here or is not in this build. */
bus_ucx_peer_t *bus_ucx_peer_new(const char *name, char *why, size_t len);
/* Closes every connection (their pending callbacks run with an error first). */
void bus_ucx_peer_destroy(bus_ucx_peer_t **xp);
/* The worker's event fd for the client's poll (-1: none). */
int bus_ucx_peer_fd(bus_ucx_peer_t *x);
/* Bounded progress and re-arm: the next wait bound in ms (-1: may sleep, 0: poll
 * again at once). Callbacks run inside. */
int bus_ucx_peer_progress(bus_ucx_peer_t *x);

/* Connects to a tier actor's listener ("ip:port") for its region. NULL, why set. */
bus_ucx_conn_t *bus_ucx_conn_new(bus_ucx_peer_t *x, const char *address, uint64_t region,
                                 uint64_t base, uint64_t length, const void *rkey, size_t rkey_len,
                                 char *why, size_t len);
/* Forced close: callbacks of operations still pending run with an error. */
void bus_ucx_conn_close(bus_ucx_conn_t **cp);
/* The peer went (the error handler ran): close it and probe again. */
bool bus_ucx_conn_failed(const bus_ucx_conn_t *c);
uint64_t bus_ucx_conn_region(const bus_ucx_conn_t *c);
uint64_t bus_ucx_conn_length(const bus_ucx_conn_t *c);

/* The region's space: len bytes, contiguous; -1 when not free now. */
int bus_ucx_conn_alloc(bus_ucx_conn_t *c, uint64_t len, uint64_t *off);
void bus_ucx_conn_free(bus_ucx_conn_t *c, uint64_t off, uint64_t len);

/* Posts a put of buf into the region at off, or a get from it into buf; then
 * bus_ucx_conn_flush calls fn once they (and everything before) are done. < 0 with
 * why set when posting failed. */
int bus_ucx_conn_put(bus_ucx_conn_t *c, const void *buf, size_t len, uint64_t off, char *why,
                     size_t whylen);
int bus_ucx_conn_get(bus_ucx_conn_t *c, void *buf, size_t len, uint64_t off, char *why,
                     size_t whylen);
int bus_ucx_conn_flush(bus_ucx_conn_t *c, bus_ucx_done_fn fn, void *arg, char *why, size_t whylen);

#endif
