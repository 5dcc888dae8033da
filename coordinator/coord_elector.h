/* coord_elector.h — the coordinator's leader election in etcd (DESIGN.md §3
 * elector, §6 Failover), as a czmq actor.
 *
 * It holds one etcd lease, kept alive by its own thread on its own etcd handle
 * (so a slow campaign call never stalls the keepalive), registers
 * /kvtier/<cluster>/coordinators/<name> = endpoint under it, and campaigns with
 * one create-if-absent transaction on /kvtier/<cluster>/leader (value JSON
 * {"name","endpoint","epoch"}; epoch = the key's create_revision). It watches the
 * leader key and campaigns again when it is deleted. It reports what the main
 * loop must react to as messages on the actor's pipe (read them with
 * coord_elector_recv):
 *   LEADER    this process became leader (epoch, our endpoint)
 *   LOST      this process is no longer leader: stop serving now
 *   FOLLOWER  another process leads, or the leader changed (epoch, endpoint);
 *             epoch 0 and "" when no leader is known
 *
 * Safety rule: a leader steps down (reports LOST) once 3/4 of the lease TTL
 * etcd granted has passed since the last keepalive that etcd confirmed
 * (measured from when it was sent: etcd's expiry is no earlier than that send
 * plus the TTL), i.e. a margin of TTL/4 before etcd can expire the lease and let
 * another coordinator win. A timer checks it every TTL/20 whatever the keepalive
 * thread is doing (a call hanging, a process stopped and resumed): it does not
 * wait for etcd to say the lease is gone. It then revokes that lease (best
 * effort) and campaigns anew with a fresh one after a hold-off. The same bound
 * is published in lease_until_ms for the scheduler, which stops granting the
 * moment it passes, before the LOST event has even been read. The published
 * word is tied to one term (sched_lease_word: the epoch's low 24 bits with the
 * bound): it is written when a term begins, moved on by a confirmed keepalive
 * only while the word is still that term's and not stepped down (one
 * compare-and-swap), and set to "stepped down" (until 1) for that epoch on LOST
 * or when the actor ends. A keepalive landing late, a new lease taken by the
 * re-campaign, or a later term never revives it; a scheduler of another epoch
 * than the word's counts it as lapsed.
 * Every grant logs the TTL etcd granted (etcd raises a short one to its minimum,
 * 3/2 of its election timeout rounded up to a second: docs/OPERATIONS.md).
 *
 * Hand-over (`kvtier leader resign`): an inbox message "RESIGN" with the epoch
 * of our term (sent by that term's scheduler once its open windows are done)
 * ends the term as a step-down does (the lease word set to stepped down, LOST
 * reported, the lease revoked, so the leader key goes at once) and holds the
 * next campaign off for one whole lease TTL, not a quarter: a standby watching
 * the key wins meanwhile; if none did, this one campaigns again after it. One
 * for another epoch, or while not leading, is logged and ignored.
 *
 * Never: blocks the keepalive behind a campaign or a watch, keeps reporting
 * LEADER after its lease is gone, or retries etcd faster than retry_ms.
 * Destroying the actor revokes the lease (the leader key and the coordinator
 * registration disappear at once). */
#ifndef KVT_COORD_ELECTOR_H
#define KVT_COORD_ELECTOR_H

#include <czmq.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bus_endpoint.h"

#define COORD_ELECTOR_NAME_MAX 64 /* bytes of a coordinator name, NUL included */

typedef struct {
    const char *const *etcd_endpoints; /* 1..COORD_ETCD_MAX_ENDPOINTS URLs */
    size_t n_etcd;
    const char *cluster;  /* keys under /kvtier/<cluster>/ */
    const char *name;     /* this coordinator, unique in the cluster */
    const char *endpoint; /* meta endpoint advertised to clients (leader key value) */
    int64_t lease_ttl_s;  /* >= 1 (etcd may raise it to its minimum) */
    int etcd_timeout_ms;  /* one etcd call of the campaign loop; 0: 2000 */
    int retry_ms;         /* first backoff after an etcd failure, doubled up to 2 s; 0: 100 */
    /* Where the elector publishes, while it leads, the lease word: its epoch and
     * the zclock_mono ms past which it is no leader (the safety rule's bound;
     * sched_config_t's lease_until_ms reads it); NULL: not published. Outlives
     * the actor. */
    _Atomic int64_t *lease_until_ms;
    /* `kvtier leader resign` (issue 9 §3): while it leads, the elector counts the
     * other coordinators registered under /kvtier/<cluster>/coordinators/ into
     * *standbys, at once when a term begins and then every
     * COORD_ELECTOR_STANDBYS_MS (NULL: not counted; the scheduler reads it,
     * sched_config_t.standbys). inbox_endpoint names the actor's inbox (an
     * inproc name; NULL: a generated one): a scheduler hands over by pushing
     * "RESIGN" there (sched_config_t.resign_endpoint). Both outlive the actor. */
    _Atomic uint32_t *standbys;
    const char *inbox_endpoint;
} coord_elector_config_t;

#define COORD_ELECTOR_STANDBYS_MS 1000
#define COORD_ELECTOR_INBOX_MAX 128 /* bytes of inbox_endpoint, NUL included */

/* Moves the lease word (sched_lease_word) on to `until` for `epoch`, only while
 * it is that epoch's, not stepped down and earlier (compare-and-swap): 0, or
 * -ESTALE when the word belongs to no term, another term, or stepped down (it is
 * then left as it is). The keepalive thread's only write. */
int coord_lease_word_extend(_Atomic int64_t *word, uint64_t epoch, int64_t until);

typedef enum {
    COORD_ELECTOR_LEADER = 1,
    COORD_ELECTOR_LOST = 2,
    COORD_ELECTOR_FOLLOWER = 3,
} coord_elector_event_kind_t;

typedef struct {
    coord_elector_event_kind_t kind;
    uint64_t epoch;                  /* the leader's epoch (LEADER, FOLLOWER); LOST: ours */
    uint64_t previous_epoch;         /* LEADER: the term before ours (etcd's
                                        /kvtier/<cluster>/term); 0: none or unknown */
    uint64_t etcd_cluster_id;        /* the etcd cluster the elector talks to (0: none
                                        answered yet; coord_etcd_cluster_id) */
    char endpoint[BUS_ENDPOINT_MAX]; /* the leader's meta endpoint; LOST: "" */
    char name[COORD_ELECTOR_NAME_MAX];
} coord_elector_event_t;

/* Starts the elector; it campaigns at once. NULL on a bad config (no endpoints,
 * names or endpoint too long, lease_ttl_s < 1) or when its start fails (no etcd
 * handle: an empty endpoint, out of memory; logged); etcd being unreachable is
 * not an error (it retries). */
zactor_t *coord_elector_new(const coord_elector_config_t *cfg);

/* Stops the elector: ends the watch and the keepalive, revokes the lease.
 * NULL-safe, idempotent, nulls *pa. */
void coord_elector_destroy(zactor_t **pa);

/* Reads one event from the elector's pipe (poll the actor first: this blocks).
 * 0, or -1 when interrupted or the message is not an elector event. */
int coord_elector_recv(zactor_t *elector, coord_elector_event_t *ev);

/* "LEADER", "LOST", "FOLLOWER"; "?" outside the enum. */
const char *coord_elector_event_name(coord_elector_event_kind_t kind);

/* The leader key's value: {"name":NAME,"endpoint":EP,"epoch":N}. Shared with
 * readers of the key (clients, tools). Encode: 0 or -ENOBUFS (len gets the size
 * needed). Decode: 0 or -EBADMSG; epoch is optional in the value (0 when absent;
 * the authoritative epoch is the key's create_revision). */
int coord_leader_value_encode(const char *name, const char *endpoint, uint64_t epoch, char *buf,
                              size_t cap, size_t *len);
int coord_leader_value_decode(const void *buf, size_t len, char *name, size_t name_cap,
                              char *endpoint, size_t endpoint_cap, uint64_t *epoch);

#endif
