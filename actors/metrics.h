/* metrics.h — the metrics actor (DESIGN.md §3 "metrics", issue 10 §2, §3): one per
 * process (coordinator or tier), serving over HTTP (metrics_http.h, libmicrohttpd)
 *   /metrics  Prometheus text format 0.0.4 (docs/OPERATIONS.md lists every metric)
 *   /healthz  200 "ok" while the process runs
 *   /readyz   200 or 503 with a one-line reason (semantics below)
 *   /sd       coordinator: Prometheus http_sd target groups of every live process
 *   /         coordinator: the status page (metrics_page.h)
 *
 * Where the figures come from: a coordinator's actor asks its own coordinator's
 * meta endpoint every refresh_ms — ClusterInfo (answered by the scheduler or the
 * standby), a detail StatsRequest (paged) and one StatsRequest per named instance
 * — over its own DEALER, with a timeout (the standby answers NOT_LEADER: no
 * scheduler counters then). A tier process's actor gets the tier actor's counters
 * from the process main (metrics_set_tier). What the process main knows from etcd
 * (role, epoch, targets, the optimizer's record) arrives on the pipe. The actor
 * then renders every document and publishes it to the HTTP server, whose own
 * thread only copies published documents: it never touches an actor's state and
 * never waits for the bus. A scrape therefore sees figures at most refresh_ms (+
 * the call timeout) old.
 *
 * Readiness. Coordinator: the leader is ready when its scheduler runs and answered
 * the last Stats round; a standby is ready when it knows a leader (its elector
 * reported one). Tier: ready when the tier actor answered its last stats ask and
 * the process is registered in etcd (metrics_set_tier's registered).
 *
 * Bounds: per-instance series for at most max_instances instance ids (the first
 * ones the scheduler names, kept for the process's life), the rest summed as
 * instance_id="other"; documents at most 4 MiB; targets at most METRICS_MAX_TARGETS;
 * the hit-rate history a ring of `samples` points.
 *
 * Pipe protocol (the wrappers below): "$TERM"; "ADDRESS" -> one string, the bound
 * HTTP address; "ROLE", "TIER", "TARGETS", "OPTIMIZER" (no reply). */
#ifndef KVT_METRICS_H
#define KVT_METRICS_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

#include "metrics_http.h"
#include "tier_actor.h"

#define METRICS_MAX_TARGETS 64
#define METRICS_NAME_MAX 64
#define METRICS_DEFAULT_INSTANCES 16u

typedef enum { METRICS_ROLE_COORDINATOR = 1, METRICS_ROLE_TIER = 2 } metrics_role_t;

typedef struct {
    metrics_role_t role;
    const char *name;           /* the coordinator's name, or the tier's */
    const char *cluster;        /* label kvtier_cluster on /sd targets */
    const char *bind;           /* "IPV4:PORT" (port 0: the kernel picks) */
    const char *sched_endpoint; /* coordinator: its meta endpoint (ClusterInfo, Stats) */
    uint32_t max_connections;   /* 0: METRICS_HTTP_DEFAULT_CONNECTIONS */
    uint32_t timeout_s;         /* HTTP idle timeout; 0: default */
    uint32_t refresh_ms;        /* figures refreshed this often; 0: 1000 */
    uint32_t sample_ms;         /* a hit-rate point per; 0: 5000 */
    uint32_t samples;           /* hit-rate points kept; 0: 360, at most 4096 */
    uint32_t max_instances;     /* instance_id label values; 0: 16, at most 16 */
} metrics_config_t;

/* One process to scrape (the coordinator's /sd). */
typedef struct {
    char role[16]; /* "coordinator", "tier" */
    char name[METRICS_NAME_MAX];
    char address[METRICS_HTTP_ADDR_MAX];
} metrics_target_t;

/* Starts the actor and its HTTP server. NULL (logged) on a bad config or when the
 * address cannot be bound. */
zactor_t *metrics_new(const metrics_config_t *cfg);
/* The bound HTTP address ("127.0.0.1:41234"). 0, or -1 when it does not answer. */
int metrics_address(zactor_t *actor, char *buf, size_t len);
/* Coordinator: leader or not, its scheduler running, the leader's epoch (0: none
 * known) and endpoint. */
int metrics_set_role(zactor_t *actor, bool leader, bool sched_running, uint64_t epoch,
                     const char *leader_ep);
/* Tier process: the tier actor's counters (ok false: it did not answer), whether
 * the process is registered in etcd, and the tier's kind and slot size. */
int metrics_set_tier(zactor_t *actor, const tier_actor_stats_t *st, bool ok, bool registered,
                     const char *kind, uint64_t slot_bytes);
/* Coordinator: every live process's metrics address (from etcd); this process is
 * listed by itself whatever the list says. */
int metrics_set_targets(zactor_t *actor, const metrics_target_t *t, uint32_t n);
/* Coordinator: the optimizer's record (NULL / 0: absent). A record that does not
 * validate is ignored (logged once until a good one arrives). */
int metrics_set_optimizer(zactor_t *actor, const char *json, size_t len);

#endif
