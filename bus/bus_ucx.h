/* bus_ucx.h — one UCX context and worker for a process role (the remote tier's
 * actor, a client handle): created with the RMA and WAKEUP features, single
 * threaded, its event fd for a poll loop and bounded progress. Shared by the
 * tier actor (actors/tier_actor_ucx.c) and the client (client/kvt_ucx.c).
 *
 * Where UCX finds no usable transport (UCX_TLS naming none that exists, no
 * device), bus_ucx_new fails with a message that names UCX, what failed and the
 * UCX_TLS / UCX_NET_DEVICES in force. Without UCX in the build (no libucx-dev at
 * configure, or -DKVT_UCX=OFF), bus_ucx_new always fails, saying so. Never spins:
 * progress runs a bounded number of rounds; a caller that sleeps arms first. */
#ifndef KVT_BUS_UCX_H
#define KVT_BUS_UCX_H

#include <stdbool.h>
#include <stddef.h>

typedef struct bus_ucx bus_ucx_t;

/* true when this build has the UCX transport */
bool bus_ucx_built(void);

/* NULL (why filled: "UCX: ...") when UCX cannot run here. who: for messages. */
bus_ucx_t *bus_ucx_new(const char *who, char *why, size_t len);
void bus_ucx_destroy(bus_ucx_t **self_p);

/* 0 when UCX has a transport that reaches other hosts (tcp, RDMA verbs...), not
 * only this host's shared memory (self, sysv, posix, cma, knem, xpmem); -1 with
 * why filled ("UCX: no network transport ...") otherwise. */
int bus_ucx_check_network(bus_ucx_t *self, const char *who, char *why, size_t len);

/* The worker's event fd (poll it for reading); -1 without one. */
int bus_ucx_efd(bus_ucx_t *self);

/* Runs the worker's progress until it reports nothing done, at most `rounds`
 * times; returns the events handled. */
unsigned bus_ucx_progress(bus_ucx_t *self, unsigned rounds);

/* Progress, then arm the event fd: true when armed (the caller may sleep on the
 * fd), false when events are pending (poll again without sleeping). */
bool bus_ucx_arm(bus_ucx_t *self);

/* The UCX objects (ucp_context_h, ucp_worker_h); NULL without UCX. */
void *bus_ucx_context(bus_ucx_t *self);
void *bus_ucx_worker(bus_ucx_t *self);

/* "UCX_TLS=... UCX_NET_DEVICES=..." as set in the environment, or "defaults". */
const char *bus_ucx_env(char *buf, size_t len);

#endif
