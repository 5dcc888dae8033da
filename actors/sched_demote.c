/* sched_demote.c — demotion (DESIGN.md §6 "Reclaim and demotion"; issue 4 §2, §4):
 * the reclaimer's ReclaimCandidates(demote) on a tier with a next tier hands its
 * coldest blocks here. The scheduler pins the sources (no eviction, not chosen
 * again, not freed while copied), reserves their slots on the next tier (all or
 * nothing; a full next tier makes room by its own reclaimer, the demotion is
 * retried at a later call) and submits one job to the migrator (priority DEMOTE,
 * destination header SERVING; bytes go tier actor to tier actor). The migrator
 * runs beside the scheduler (cfg.migrator_endpoint; the coordinator starts it);
 * without that endpoint the scheduler starts one of its own (unit tests).
 *
 * Jobs go to the migrator's ROUTER as MigrateJob envelopes (answered at once);
 * results come back as DemoteDone requests on the scheduler's internal plane
 * (sched_on_demote_done), like the reclaimer's and gc's requests. Per block: copied
 * and the source is still the same committed block in the same slot -> the
 * destination commits (two locations for a moment) and the source is marked
 * DELETING (two-step: freed after the delete delay once no reader holds it).
 * Source changed meanwhile -> the copy is discarded (reservation released,
 * DeleteSlots for the destination slot). Copy failed -> the reservation is
 * released and the source keeps serving. A tier reset (down, new epoch) between
 * submit and result is detected by its generation and its side is left alone.
 *
 * The migrator also runs the prefetch copies (sched_requests.c, CopyPrefetch):
 * it is started or connected whether or not demotion is on; the actor hands a
 * result of priority MIGRATOR_PREFETCH to sched_on_copy_done instead.
 *
 * Bounded: SCHED_DEMOTE_JOBS jobs in flight, MIGRATOR_MAX_JOB_SLOTS blocks each;
 * the migrator bounds its own queue (refusal = backpressure). Never blocks for long:
 * the migrator answers a submission at once (bounded by BUS_ACTOR_ASK_MS). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bus_log.h"
#include "sched_int.h"
#include "sched_reclaim.h"

#define S_LOG "sched"

int sched_demote_init(sched_t *self)
{
    /* job ids differ between schedulers (and terms): a result of another one's
     * job, reaching this one through a migrator that runs beside, names none of
     * this one's jobs */
    self->reclaim.next_job_id = (self->hash_seed ^ (uint64_t)zclock_usecs()) << 16 | 1;
    char ep[SCHED_ENDPOINT_MAX];
    if (self->cfg.migrator_endpoint[0]) { /* a sibling actor: connect only */
        sched_strcpy(ep, sizeof ep, self->cfg.migrator_endpoint);
    } else {
        snprintf(ep, sizeof ep, "inproc://sched-migrator-%p-%" PRIx64, (void *)self,
                 self->hash_seed);
        migrator_config_t mc = {
            .name = "migrator", .endpoint = ep, .results_endpoint = self->internal_ep};
        self->reclaim.migrator = migrator_new(&mc);
        if (!self->reclaim.migrator) {
            bus_error(S_LOG, "cannot start the migrator");
            return -1;
        }
    }
    bus_client_config_t cc = {.name = self->cfg.node_name, .max_in_flight = 1};
    self->reclaim.mig_client = bus_client_new(ep, &cc);
    if (!self->reclaim.mig_client) {
        bus_error(S_LOG, "cannot connect to the migrator at '%s'", ep);
        return -1;
    }
    return 0;
}

void sched_demote_fini(sched_t *self)
{
    zactor_destroy(&self->reclaim.migrator);
    bus_client_destroy(&self->reclaim.mig_client);
}

uint32_t sched_demote_in_flight(const sched_t *self, const sched_tier_t *t)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < SCHED_DEMOTE_JOBS; i++)
        if (self->reclaim.demotes[i].used && self->reclaim.demotes[i].src == t->idx &&
            self->reclaim.demotes[i].src_gen == t->gen)
            n += self->reclaim.demotes[i].n;
    return n;
}

uint32_t sched_job_slots(const sched_t *self, const sched_tier_t *t)
{
    /* a job moves at most SCHED_DEMOTE_JOB_BYTES of slots: one CopySlots is one
     * WriteSlots message and must finish within the migrator's deadline */
    uint64_t by_bytes = SCHED_DEMOTE_JOB_BYTES / (t->cfg.slot_size ? t->cfg.slot_size : 1);
    uint32_t max_m = by_bytes < 1                        ? 1
                     : by_bytes < MIGRATOR_MAX_JOB_SLOTS ? (uint32_t)by_bytes
                                                         : MIGRATOR_MAX_JOB_SLOTS;
    /* and at most max_batch: the slot engines take no longer batch */
    return max_m > self->cfg.max_batch ? self->cfg.max_batch : max_m;
}

static sched_tier_t *s_tier_by_id(sched_t *self, uint32_t id)
{
    return id >= 1 && id <= self->tierset.n_tiers ? &self->tierset.tiers[id - 1] : NULL;
}

/* The job's copy token (docs/SECURITY.md): its source and destination tiers as
 * the scheduler's membership has them, and every slot pair with the block's size;
 * none without the cluster secret. */
static int s_copy_token(sched_t *self, migrator_job_t *mj, char *why, size_t len)
{
    mj->token_len = 0;
    if (!self->seal)
        return 0;
    sched_tier_t *src = s_tier_by_id(self, mj->src_tier_id);
    sched_tier_t *dst = s_tier_by_id(self, mj->dst_tier_id);
    if (!src || !dst || src == dst) {
        snprintf(why, len, "copy from tier id %u to %u: not two tiers of this deployment",
                 mj->src_tier_id, mj->dst_tier_id);
        return -1;
    }
    bus_token_entry_t e[MIGRATOR_MAX_JOB_SLOTS];
    for (uint32_t i = 0; i < mj->n; i++)
        e[i] = (bus_token_entry_t){
            .tier = 1,
            .src_tier = 0,
            .size = mj->src_slots[i] < src->cfg.capacity ? src->sizes[mj->src_slots[i]] : 0,
            .slot = mj->dst_slots[i],
            .src_slot = mj->src_slots[i]};
    const sched_tier_t *tiers[2] = {src, dst};
    size_t n = 0;
    int rc = sched_token_mint(self, BUS_TOKEN_COPY, tiers, 2, e, mj->n, SCHED_COPY_TOKEN_MS,
                              mj->token, sizeof mj->token, &n);
    if (rc < 0) {
        snprintf(why, len, "copy token not minted: %s", strerror(-rc));
        return -1;
    }
    mj->token_len = (uint32_t)n;
    return 0;
}

int sched_migrate_submit(sched_t *self, migrator_job_t *mj, char *why, size_t len)
{
    if (!self->reclaim.mig_client) {
        snprintf(why, len, "no migrator");
        return -1;
    }
    if (s_copy_token(self, mj, why, len) < 0)
        return -1;
    mj->job_id = self->reclaim.next_job_id++;
    return migrator_submit(self->reclaim.mig_client, mj, 0, why, len) == 0 ? 0 : -1;
}

static sched_demote_t *s_job_free(sched_t *self)
{
    for (uint32_t i = 0; i < SCHED_DEMOTE_JOBS; i++)
        if (!self->reclaim.demotes[i].used)
            return &self->reclaim.demotes[i];
    return NULL;
}

uint32_t sched_demote(sched_t *self, sched_tier_t *t, sched_tier_t *dst, const uint32_t *slots,
                      uint32_t n, uint32_t *taken, bool *backpressure)
{
    *backpressure = false;
    if (!self->cfg.demote || !self->reclaim.mig_client || n == 0 || t->state != SCHED_TIER_UP ||
        dst->state != SCHED_TIER_UP || !t->client || !dst->client)
        return 0;
    sched_demote_t *job = s_job_free(self);
    if (!job) {
        *backpressure = true;
        return 0;
    }
    int64_t now = sched_now();
    uint32_t number = 0, m = 0;
    uint32_t max_m = sched_job_slots(self, t);
    /* pin the sources: one instance per job (a reservation is per instance) */
    for (uint32_t i = 0; i < n && m < max_m; i++) {
        tier_slot_info_t info;
        if (tier_slots_slot_info(t->slots, slots[i], &info) < 0 ||
            info.state != TIER_SLOT_COMMITTED || (m > 0 && info.instance != number))
            continue;
        uint32_t slot = 0;
        if (tier_slots_pin(t->slots, info.instance, &info.key, (uint64_t)now, &slot) != 0)
            continue;
        if (slot != slots[i]) {
            (void)tier_slots_unpin(t->slots, info.instance, &info.key);
            continue;
        }
        number = info.instance;
        self->reclaim.dm.keys[m] = info.key;
        self->reclaim.dm.pos[m++] = slot;
    }
    if (m == 0)
        return 0;
    if (dst->n_deleting)
        sched_deleting_settle(self, dst, number, self->reclaim.dm.keys, m);
    size_t nv = 0;
    /* a destination that itself has a next tier keeps its live blocks too */
    bool keep = sched_keeps_victims(self, dst);
    unsigned flags = TIER_RESERVE_SKIP_SERVING | (keep ? TIER_RESERVE_NO_EVICT : 0u);
    int rc = tier_slots_reserve(dst->slots, number, self->reclaim.dm.keys, m, 0, (uint64_t)now,
                                flags, self->reclaim.dm.resv, self->reclaim.dm.victims, &nv);
    if (rc < 0) {
        for (uint32_t i = 0; i < m; i++)
            (void)tier_slots_unpin(t->slots, number, &self->reclaim.dm.keys[i]);
        /* its own demotion (after the unpins: it reuses self->reclaim.dm) */
        if (keep && rc == TIER_SLOTS_ENOSPC)
            (void)sched_make_room(self, dst, m);
        *backpressure = true; /* the next tier is full of held blocks: later */
        return 0;
    }
    for (size_t v = 0; v < nv; v++) {
        sched_tier_queue_delete(dst, self->reclaim.dm.victims[v].slot,
                                &self->reclaim.dm.victims[v].key);
        sched_tier_victim(self, dst, &self->reclaim.dm.victims[v]);
        if (self->reclaim.dm.victims[v].expired)
            self->g.expirations++;
        else
            self->g.evictions++;
    }
    migrator_job_t mj; /* ~5 KiB (its copy token included) */
    memset(&mj, 0, sizeof mj);
    *job = (sched_demote_t){.used = true,
                            .job_id = self->reclaim.next_job_id++,
                            .src = t->idx,
                            .dst = dst->idx,
                            .src_gen = t->gen,
                            .dst_gen = dst->gen,
                            .number = number,
                            .submitted_ms = now};
    uint32_t k = 0;
    for (uint32_t i = 0; i < m; i++) {
        tier_resv_kind_t kind = self->reclaim.dm.resv[i].kind;
        if (kind == TIER_RESV_NEW || kind == TIER_RESV_EVICTED) { /* stays pinned */
            job->src_slots[job->n] = self->reclaim.dm.pos[i];
            job->dst_slots[job->n] = self->reclaim.dm.resv[i].slot;
            job->keys[job->n] = self->reclaim.dm.keys[i];
            mj.src_slots[job->n] = self->reclaim.dm.pos[i];
            mj.dst_slots[job->n] = self->reclaim.dm.resv[i].slot;
            memcpy(mj.keys[job->n], self->reclaim.dm.keys[i].b, TIER_KEY_BYTES);
            job->n++;
            continue;
        }
        (void)tier_slots_unpin(t->slots, number, &self->reclaim.dm.keys[i]);
        if (kind == TIER_RESV_SERVING) {
            /* already stored below (a promoted block keeps its lower copy): only
             * the source goes */
            if (sched_deleting_mark(self, t, number, &self->reclaim.dm.keys[i],
                                    self->reclaim.dm.pos[i], now, 0)) {
                taken[k++] = self->reclaim.dm.pos[i];
                sched_drain_moved(self, t, 1);
                sched_ev_moved(self, number, t->cfg.tier_id, t->medium, dst->cfg.tier_id,
                               dst->medium, kvtier_MoveReason_MOVE_REASON_DEMOTED,
                               &self->reclaim.dm.keys[i], 1);
            }
            continue;
        }
        /* a reservation in flight on dst: concluded at once, retried later */
        (void)tier_slots_commit(dst->slots, number, &self->reclaim.dm.keys[i], false, (uint64_t)now,
                                NULL);
    }
    if (job->n == 0) {
        job->used = false;
        return k;
    }
    mj.priority = MIGRATOR_DEMOTE;
    mj.src_tier_id = t->cfg.tier_id;
    mj.dst_tier_id = dst->cfg.tier_id;
    sched_strcpy(mj.src_endpoint, sizeof mj.src_endpoint, t->endpoint);
    sched_strcpy(mj.dst_endpoint, sizeof mj.dst_endpoint, dst->endpoint);
    mj.dst_state = kvtier_LocationState_LOCATION_SERVING;
    mj.n = job->n;
    char why[160];
    mj.job_id = job->job_id;
    if (s_copy_token(self, &mj, why, sizeof why) < 0 ||
        migrator_submit(self->reclaim.mig_client, &mj, 0, why, sizeof why) != 0) {
        for (uint32_t i = 0; i < job->n; i++) {
            (void)tier_slots_unpin(t->slots, number, &job->keys[i]);
            (void)tier_slots_commit(dst->slots, number, &job->keys[i], false, (uint64_t)now, NULL);
        }
        bus_debug(S_LOG, "demotion %s -> %s not submitted: %s", t->cfg.name, dst->cfg.name, why);
        job->used = false;
        *backpressure = true;
        return k;
    }
    for (uint32_t i = 0; i < job->n; i++)
        taken[k++] = job->src_slots[i];
    self->g.demote_submitted += job->n;
    return k;
}

/* One block of a finished job; true when it switched to the destination. */
static bool s_result_one(sched_t *self, const sched_demote_t *job, uint32_t i, bool ok, int64_t now)
{
    sched_tier_t *src = &self->tierset.tiers[job->src];
    sched_tier_t *dst = &self->tierset.tiers[job->dst];
    bool src_live = src->gen == job->src_gen, dst_live = dst->gen == job->dst_gen;
    const tier_key_t *key = &job->keys[i];
    uint32_t ss = job->src_slots[i], ds = job->dst_slots[i];
    if (src_live)
        (void)tier_slots_unpin(src->slots, job->number, key);
    tier_slot_info_t info;
    bool same = src_live && tier_slots_slot_info(src->slots, ss, &info) == 0 &&
                info.state == TIER_SLOT_COMMITTED && info.instance == job->number &&
                tier_key_eq(&info.key, key) && !sched_is_deleting(src, job->number, key, ss);
    if (!dst_live) {
        self->g.demote_failed++;
        return false; /* the destination tier was reset: its reservation is gone */
    }
    if (!ok || !same) {
        (void)tier_slots_commit(dst->slots, job->number, key, false, (uint64_t)now, NULL);
        if (ok) { /* copied, but the source changed: discard the copy */
            sched_tier_queue_delete(dst, ds, key);
            self->g.demote_stale++;
        } else {
            self->g.demote_failed++;
        }
        return false;
    }
    dst->sizes[ds] = src->sizes[ss];
    dst->checksums[ds] = src->checksums[ss];
    if (tier_slots_commit(dst->slots, job->number, key, true, (uint64_t)now, NULL) < 0) {
        self->g.demote_failed++;
        return false;
    }
    /* the copy keeps the source's deadline (its reservation had none); the tier
     * header already carries it (the copy's PutHeader takes the source header's) */
    if (info.deadline_ms)
        (void)tier_slots_set_deadline(dst->slots, job->number, key, (uint64_t)now,
                                      info.deadline_ms);
    sched_ev_moved(self, job->number, src->cfg.tier_id, src->medium, dst->cfg.tier_id, dst->medium,
                   kvtier_MoveReason_MOVE_REASON_DEMOTED, key, 1);
    /* the source goes now, or once its readers let go; a full DELETING queue
     * leaves it in place (its reclaimer finds it again: already below) */
    sched_release_demoted(self, src, job->number, key, ss, now);
    self->g.demoted++;
    sched_drain_moved(self, src, 1);
    return true;
}

void sched_on_demote_done(sched_t *self, sched_call_t *call)
{
    migrator_result_t r;
    char why[200];
    if (migrator_result_decode(&call->req.env.body.demote_done_req, &r, why, sizeof why) < 0) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT, "%s", why);
        return;
    }
    sched_demote_t *job = NULL;
    for (uint32_t i = 0; i < SCHED_DEMOTE_JOBS && !job; i++)
        if (self->reclaim.demotes[i].used && self->reclaim.demotes[i].job_id == r.job_id)
            job = &self->reclaim.demotes[i];
    if (!job || r.src_tier_id != self->tierset.tiers[job->src].cfg.tier_id ||
        r.dst_tier_id != self->tierset.tiers[job->dst].cfg.tier_id) {
        bus_warn(S_LOG, "migrator: result for unknown job %" PRIu64, r.job_id);
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_NOT_FOUND,
                          "no migrator job %" PRIu64 " from tier %u to tier %u in flight", r.job_id,
                          r.src_tier_id, r.dst_tier_id);
        return;
    }
    uint32_t not_copied = 0;
    for (uint32_t i = 0; i < job->n; i++)
        not_copied += !(i < r.n && r.ok[i]);
    if (r.status != kvtier_StatusCode_STATUS_OK || not_copied)
        bus_info(S_LOG,
                 "demotion job %" PRIu64 " %s -> %s: %u of %u blocks not copied (they keep "
                 "serving from the source): %s",
                 r.job_id, self->tierset.tiers[job->src].cfg.name,
                 self->tierset.tiers[job->dst].cfg.name, not_copied, job->n,
                 r.message[0] ? r.message : "the source tier actor reported them failed");
    int64_t now = sched_now();
    if (now - job->submitted_ms > 2000) /* writes wait for it when the head is full */
        bus_info(S_LOG, "demotion job %" PRIu64 " (%u blocks) took %" PRId64 " ms", r.job_id,
                 job->n, now - job->submitted_ms);
    uint32_t switched = 0;
    for (uint32_t i = 0; i < job->n; i++)
        switched += s_result_one(self, job, i, i < r.n && r.ok[i], now);
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_demote_done_rep_tag);
    rep->body.demote_done_rep.switched = switched;
    rep->body.demote_done_rep.rolled_back = job->n - switched;
    job->used = false;
    sched_reply(self, call);
    sched_tiers_flush(self);
}
