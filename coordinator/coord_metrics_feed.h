/* coord_metrics_feed.h — what the coordinator's metrics actor needs from etcd
 * (issue 10 §2, §3), read on a thread of its own so that no etcd call ever runs in
 * an actor others wait on:
 *   - registers /kvtier/<cluster>/metrics/coordinators/<name> = the coordinator's
 *     metrics address under a lease of its own (kept alive, registered again when
 *     lost), so every coordinator's /sd lists the standbys too;
 *   - every interval_ms lists the tier records (/kvtier/<cluster>/tiers/, their
 *     "metrics" field) and the coordinators' addresses, and reads the optimizer's
 *     record (/kvtier/<cluster>/optimizer, at most METRICS_OPT_MAX_BYTES).
 * It sends each result on its pipe as the metrics actor's own pipe message
 * ("TARGETS" + frame of metrics_target_t, "OPTIMIZER" + frame, an empty frame
 * when the key is absent); the process main forwards them unchanged
 * (coord_main.c). Bounds: at most METRICS_MAX_TARGETS targets (the rest are
 * logged once and left out). etcd unreachable: nothing is sent, retried next
 * interval.
 *
 * It also advertises the leader's event endpoints (DESIGN §13): the pipe
 * command "EVENTS" + a JSON record (docs/EVENTS.md "Where to subscribe") puts
 * /kvtier/<cluster>/events = record under the feed's lease (again whenever the
 * lease is granted anew); "EVENTS" + "" deletes it if it still holds this
 * coordinator's record (a newer leader's stays). */
#ifndef KVT_COORD_METRICS_FEED_H
#define KVT_COORD_METRICS_FEED_H

#include <czmq.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *const *etcd_endpoints;
    size_t n_etcd;
    const char *cluster;
    const char *name;    /* this coordinator */
    const char *address; /* its metrics address, as bound */
    int64_t lease_ttl_s;
    uint32_t interval_ms; /* 0: 1000 */
} coord_metrics_feed_config_t;

/* NULL (logged) on a bad config or no etcd handle. */
zactor_t *coord_metrics_feed_new(const coord_metrics_feed_config_t *cfg);
/* Advertises (record non-empty, at most 1 KiB) or withdraws ("" or NULL) the
 * event endpoints; does not wait. 0 or -1. */
int coord_metrics_feed_events(zactor_t *feed, const char *record);
/* Stops it and revokes its lease (the registration disappears). NULL-safe. */
void coord_metrics_feed_destroy(zactor_t **pa);

#endif
