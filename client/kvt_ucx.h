/* kvt_ucx.h — the client side of the remote tier's transport ucx (kvt_ucx.c): a
 * handle's UCX worker (made on first use) and one connection per tier endpoint
 * that advertised UCX: an endpoint to its listener, the remote key of the staging
 * region its Probe handed out, and the region's allocation. Used by the frames
 * transport (kvt_transport_frames.c), which keeps the ZeroMQ requests that carry
 * the token, the fence and the checksums; only the bytes move here, one-sided
 * into and out of the region. Private to client/. */
#ifndef KVT_UCX_H
#define KVT_UCX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kvti_ucx kvti_ucx_t;
typedef struct kvti_ucx_conn kvti_ucx_conn_t;

/* Runs when the operations posted before it are complete: status 0, or < 0 with
 * a message (the peer went, the endpoint was closed). */
typedef void (*kvti_ucx_done_fn)(void *arg, int status, const char *msg);

/* NULL (why filled) when UCX cannot run here or is not in this build. */
kvti_ucx_t *kvti_ucx_new(const char *name, char *why, size_t len);
/* Closes every connection (their pending callbacks run with an error first). */
void kvti_ucx_destroy(kvti_ucx_t **xp);
/* The worker's event fd for the client's poll (-1: none). */
int kvti_ucx_fd(kvti_ucx_t *x);
/* Bounded progress and re-arm: the next wait bound in ms (-1: may sleep, 0: poll
 * again at once). Callbacks run inside. */
int kvti_ucx_progress(kvti_ucx_t *x);

/* Connects to a tier actor's listener ("ip:port") for its region. NULL, why set. */
kvti_ucx_conn_t *kvti_ucx_connect(kvti_ucx_t *x, const char *address, uint64_t region,
                                  uint64_t base, uint64_t length, const void *rkey, size_t rkey_len,
                                  char *why, size_t len);
/* Forced close: callbacks of operations still pending run with an error. */
void kvti_ucx_conn_close(kvti_ucx_conn_t **cp);
/* The peer went (the error handler ran): close it and probe again. */
bool kvti_ucx_conn_failed(const kvti_ucx_conn_t *c);
uint64_t kvti_ucx_conn_region(const kvti_ucx_conn_t *c);
uint64_t kvti_ucx_conn_length(const kvti_ucx_conn_t *c);

/* The region's space: len bytes, contiguous; -1 when not free now. */
int kvti_ucx_alloc(kvti_ucx_conn_t *c, uint64_t len, uint64_t *off);
void kvti_ucx_free(kvti_ucx_conn_t *c, uint64_t off, uint64_t len);

/* Posts a put of buf into the region at off, or a get from it into buf; then
 * kvti_ucx_flush calls fn once they (and everything before) are done. < 0 with
 * why set when posting failed. */
int kvti_ucx_put(kvti_ucx_conn_t *c, const void *buf, size_t len, uint64_t off, char *why,
                 size_t whylen);
int kvti_ucx_get(kvti_ucx_conn_t *c, void *buf, size_t len, uint64_t off, char *why, size_t whylen);
int kvti_ucx_flush(kvti_ucx_conn_t *c, kvti_ucx_done_fn fn, void *arg, char *why, size_t whylen);

#endif
