/* bench_svc.h — the kvtier service on one host, started inside a benchmark process:
 * one host tier actor (its own shared-memory segment, unique name, pre-faulted)
 * and one scheduler actor, both on tcp://127.0.0.1:* ephemeral ports, wired the
 * way the coordinator process wires them (the tier's membership handed to the
 * scheduler), with one instance registered. Clients connect through libkvtier
 * with the scheduler's endpoint as their coordinator. Shared by the "data" and
 * "meta" parts of kvt-bench; never used by the service itself. */
#ifndef KVT_BENCH_SVC_H
#define KVT_BENCH_SVC_H

#include <stdbool.h>
#include <stdint.h>

#include "kvtier.h"

#define BENCH_SVC_INSTANCE "bench-llama"
#define BENCH_SVC_TIMEOUT_MS 10000u

typedef struct bench_svc bench_svc_t;

/* Starts a tier of `capacity` slots of `slot_size` bytes (instance blocks are
 * slot_size bytes) and the scheduler, waits until the scheduler reports the tier
 * up, registers BENCH_SVC_INSTANCE. NULL (after printing why) on failure. */
bench_svc_t *bench_svc_start(const char *part, uint64_t slot_size, uint64_t capacity);

/* The same service with events on, the way the leader runs them: a publisher
 * (replay socket, mirror and vLLM stream on) fed by the scheduler and, when
 * SUBSCRIBER, one subscriber thread in this process that reads both streams as
 * fast as they come (on this host its CPU is taken from the service's). */
bench_svc_t *bench_svc_start_events(const char *part, uint64_t slot_size, uint64_t capacity,
                                    bool subscriber);

/* Events so far: batches the scheduler handed over (*handed, its own count),
 * dropped (its input full), and messages the subscriber read on the protobuf
 * and vLLM streams. 0, or -1 without events. */
int bench_svc_events(bench_svc_t *svc, uint64_t *handed, uint64_t *dropped, uint64_t *read_pb,
                     uint64_t *read_vllm);

/* The kind of the tier the next start makes: "host" (the default) or "remote"
 * (issue 9 §4: the same slots in anonymous memory, served over frames only).
 * 0, or -1 for another kind. */
int bench_svc_set_kind(const char *kind);
/* A remote tier's transport for the next start: "zmq" (the default) or "ucx"
 * (its clients then move bytes through UCX staging regions). 0, or -1. */
int bench_svc_set_transport(const char *transport);
/* The address the next start binds its tier and scheduler to (default 127.0.0.1):
 * another network namespace's clients reach it there. 0, or -1 when too long. */
int bench_svc_set_bind(const char *ip);
/* A service started by another process (its scheduler's endpoint), for
 * bench_svc_connect; bench_svc_stop frees it and stops nothing. */
bench_svc_t *bench_svc_attach(const char *sched_ep);
const char *bench_svc_endpoint(const bench_svc_t *svc);

/* Stops both actors (the segment is removed by the tier). Idempotent, nulls *svc. */
void bench_svc_stop(bench_svc_t **svc);

/* A new client handle on the service; NULL after printing why. */
kvt_client_t *bench_svc_connect(bench_svc_t *svc, bool disable_shm, const char *name);

/* Seconds tier_actor_new took: mostly the segment's pre-fault (touching every page). */
double bench_svc_prefault_s(const bench_svc_t *svc);

/* Block key of id `id` in a run: xxh3-128 of (nonce, id), so keys look random to
 * the index, as real chained keys do. */
void bench_svc_key(uint64_t nonce, uint64_t id, kvt_key_t *out);

#endif
