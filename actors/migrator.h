/* migrator.h — the migrator actor (issue 4 §2, DESIGN.md §6): runs copy jobs
 * between tier actors. A job names a source tier actor, its slots and the keys
 * expected there, and a destination tier actor and slots; the migrator sends one
 * CopySlots to the source, which copies tier to tier (bytes never pass through
 * the migrator or the coordinator; tier_actor.h has the copy's rules, including
 * the unchanged-source check), and reports one result per job. It never changes
 * a location: the scheduler switches locations from the results (DemoteDone in
 * schemas/internal.proto has that shape). A failed copy leaves the source as it
 * was, serving.
 *
 * Scheduling: two priorities. Queued prefetch jobs (MIGRATOR_PREFETCH) are
 * dispatched before queued demotions; within a priority, first in first out. At
 * most cfg.max_in_flight CopySlots are outstanding overall and
 * cfg.max_per_source per source endpoint; a job whose source is at its bound
 * waits and does not hold up jobs of other sources, except that a demotion is
 * never dispatched while a prefetch of the same source waits.
 *
 * Protocol: envelopes over sockets (schemas/internal.proto), so the migrator
 * can run beside the scheduler or in another process:
 *   - jobs: MigrateJobRequest to the ROUTER the actor binds at cfg.endpoint,
 *     answered at once with MigrateJobReply: OK = queued, exactly one result
 *     follows; otherwise refused and counted, no result: INVALID_ARGUMENT (bad
 *     or malformed job: counts that differ, more than 64 slots, endpoints out of
 *     bounds, unknown priority or state, tier id 0), UNAVAILABLE (cfg.max_queued
 *     jobs already wait: backpressure, retry after results).
 *   - results: one DemoteDoneRequest per queued job (demotion or prefetch), in
 *     completion order, sent to the ROUTER at cfg.results_endpoint (the
 *     scheduler's internal plane), which answers DemoteDoneReply. At most one
 *     result per job in flight (the client's bound is the job pool's size); a
 *     result whose answer does not come is counted in results_lost.
 *   - the pipe carries only $TERM, "STATS" -> frame(migrator_stats_t) and
 *     "ENDPOINT" -> string (the jobs endpoint as bound).
 *
 * Deadlines: a job with dispatch_within_ms still queued that long after it
 * arrived fails (TIMEOUT) without being dispatched, so its submitter knows when
 * no copy of it can start any more (prefetch copies use it: a late promotion
 * helps nobody, and their destination slots are freed after a bound).
 *
 * Timeouts: a CopySlots that gets no answer within cfg.copy_timeout_ms fails its
 * job (TIMEOUT) and the client to that source is closed, so requests queued
 * toward it are dropped rather than delivered late. Keep copy_timeout_ms above
 * the tier actors' copy_timeout_ms: a delivered copy is then always answered
 * (its own deadline ends it) before the migrator gives up on it. */
#ifndef KVT_MIGRATOR_H
#define KVT_MIGRATOR_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

#include "bus_client.h"
#include "bus_limits.h"
#include "bus_server.h"

#define MIGRATOR_MAX_JOB_SLOTS BUS_MAX_DEMOTE_BATCH /* a job's results fit one DemoteDone */
/* int: printf precision ("%.*s") and "%d" take it */
#define MIGRATOR_ENDPOINT_MAX ((int)BUS_COPY_ENDPOINT_MAX)
#define MIGRATOR_DEFAULT_IN_FLIGHT 4u
#define MIGRATOR_DEFAULT_PER_SOURCE 2u
#define MIGRATOR_DEFAULT_QUEUED 256u
#define MIGRATOR_DEFAULT_SOURCES 16u
#define MIGRATOR_DEFAULT_TIMEOUT_MS 10000u
/* A job's copy token (bus_token.h, two tiers and a job's entries): the
 * MigrateJobRequest.token bound (schemas/internal.options). */
#define MIGRATOR_TOKEN_MAX 3072u

typedef enum {
    MIGRATOR_PREFETCH = 0, /* promotion for a waiting reader: first */
    MIGRATOR_DEMOTE = 1,   /* reclaim: when no prefetch waits */
} migrator_priority_t;

typedef struct {
    const char *name;             /* logs and Envelope.sender; NULL: "migrator" */
    const char *endpoint;         /* required: the jobs ROUTER is bound here */
    const char *results_endpoint; /* required: DemoteDone goes to the ROUTER here */
    uint32_t max_in_flight;       /* CopySlots outstanding overall; 0: default */
    uint32_t max_per_source;      /* CopySlots outstanding per source endpoint; 0: default */
    uint32_t max_queued;          /* jobs waiting, both priorities; 0: default */
    uint32_t max_sources;         /* source clients kept (idle ones closed at the bound) */
    uint32_t copy_timeout_ms;     /* per CopySlots; 0: default */
} migrator_config_t;

typedef struct {
    uint64_t job_id;   /* the submitter's; echoed in the result */
    uint32_t priority; /* migrator_priority_t */
    uint32_t src_tier_id;
    char src_endpoint[MIGRATOR_ENDPOINT_MAX];
    uint32_t dst_tier_id;
    char dst_endpoint[MIGRATOR_ENDPOINT_MAX];
    uint32_t dst_state; /* kvtier_LocationState written at the destination */
    /* 0: none; a job still queued this many ms after it arrived fails (TIMEOUT,
     * nothing copied): after that its submitter may free the destination slots,
     * once the longest copy (copy_timeout_ms) could have ended */
    uint32_t dispatch_within_ms;
    uint32_t n; /* 1..MIGRATOR_MAX_JOB_SLOTS */
    uint64_t src_slots[MIGRATOR_MAX_JOB_SLOTS];
    uint64_t dst_slots[MIGRATOR_MAX_JOB_SLOTS];
    uint8_t keys[MIGRATOR_MAX_JOB_SLOTS][BUS_KEY_LEN]; /* expected at the source */
    /* the copy token the scheduler minted for this job (0 bytes: none), sent as
     * CopySlotsRequest.token: the source tier actor copies only what it grants */
    uint32_t token_len;
    uint8_t token[MIGRATOR_TOKEN_MAX];
} migrator_job_t;

typedef struct {
    uint64_t job_id;
    uint32_t priority;
    uint32_t src_tier_id, dst_tier_id;
    uint32_t n, copied;
    /* the CopySlots reply's status (kvtier_StatusCode): OK, or the destination's
     * failure as the source reported it, or TIMEOUT / UNAVAILABLE / ... when the
     * source tier actor did not copy at all (then every ok[] is false) */
    uint32_t status;
    bool ok[MIGRATOR_MAX_JOB_SLOTS]; /* copied, and the source unchanged */
    char message[160];
} migrator_result_t;

typedef struct {
    uint64_t submitted;       /* jobs queued */
    uint64_t refused_full;    /* refused at max_queued */
    uint64_t refused_invalid; /* refused as malformed */
    uint64_t dispatched;      /* CopySlots sent */
    uint64_t completed;       /* results sent */
    uint64_t slots_copied;
    uint64_t slots_failed;
    uint64_t timeouts;        /* jobs failed by copy_timeout_ms */
    uint64_t expired;         /* jobs failed undispatched past dispatch_within_ms */
    uint64_t results_lost;    /* results not sent or not answered (should stay 0) */
    uint32_t queued_prefetch; /* now */
    uint32_t queued_demote;   /* now */
    uint32_t in_flight;       /* now */
} migrator_stats_t;

/* Starts the actor. NULL (after logging why) on a bad config. */
zactor_t *migrator_new(const migrator_config_t *cfg);

/* The jobs endpoint as bound (ephemeral port resolved) into buf; 0 or -1. */
int migrator_endpoint(zactor_t *migrator, char *buf, size_t len);

/* Builds a MigrateJobRequest envelope from job. */
void migrator_job_encode(const migrator_job_t *job, kvtier_Envelope *env, const char *sender);

/* Checks and copies a decoded MigrateJobRequest: never trusts it. 0, or
 * -INVALID_ARGUMENT with why filled. */
int migrator_job_decode(const kvtier_MigrateJobRequest *in, migrator_job_t *out, char *why,
                        size_t len);

/* Checks and copies a decoded DemoteDoneRequest (at most MIGRATOR_MAX_JOB_SLOTS
 * results). 0, or -INVALID_ARGUMENT with why filled. */
int migrator_result_decode(const kvtier_DemoteDoneRequest *in, migrator_result_t *out, char *why,
                           size_t len);

/* Submits a job over a client connected to the migrator's endpoint and waits
 * for the answer (given at once). A job of 0 or more than MIGRATOR_MAX_JOB_SLOTS
 * slots is refused here (-INVALID_ARGUMENT): the envelope cannot carry it. 0: queued (one result
 * follows); else -status code (the kvtier_StatusCode) with why filled; -TIMEOUT / -UNAVAILABLE when
 * the migrator does not answer within timeout_ms (0: BUS_ACTOR_ASK_MS). */
int migrator_submit(bus_client_t *migrator, const migrator_job_t *job, uint32_t timeout_ms,
                    char *why, size_t len);

/* Counters. 0, or -1 when the actor does not answer. */
int migrator_stats(zactor_t *migrator, migrator_stats_t *out);

/* For tests and tools that stand in for the scheduler: receives one DemoteDone
 * on srv (waiting up to wait_ms), answers it, decodes it into out. 0, or -1 when
 * nothing or something that is not a valid result arrived. */
int migrator_result_recv(bus_server_t *srv, int wait_ms, migrator_result_t *out);

#endif
