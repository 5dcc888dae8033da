/* sched_drain.c — `kvtier drain TIER` (issue 9 §3; docs/OPERATIONS.md "Draining a
 * tier"): retire a tier of a chain without losing its blocks. Pools are not built:
 * a tier's blocks go down its chain.
 *
 * On an AdminDrainRequest the tier is marked DRAINING (sched_tier_t.drain):
 *   - nothing new is placed on it: the chain's head for puts and prefetches is its
 *     first placeable tier (sched_chain_head), and demotions from the tiers above
 *     skip it (sched_next_tier); windows opened before keep their reservations on
 *     it (sched_window_t.head) and complete there;
 *   - every tick moves its coldest blocks to the next placeable tier below through
 *     the demotion path (sched_demote: pinned sources, reserved below, one migrator
 *     job, destination SERVING): a block leaves the tier only once its copy below
 *     is committed SERVING (sched_demote.c s_result_one), or at once when it is
 *     SERVING below already. Pinned blocks are not taken (sched_reclaim_rank): they
 *     wait for their pins, which a lease bounds;
 *   - the first tick that finds it holding no slot (DELETING and reservations
 *     included) and no demotion job of it in flight marks it RETIRED: nothing is
 *     placed on it until a cancel.
 * A cancel brings a draining or retired tier back (the blocks moved stay below).
 * The state lives in the leader's memory only: a new leader (a restart, a
 * failover) places on every tier again, and a drain must then be asked again.
 * Never: drains the last placeable tier of a chain (its blocks would have nowhere
 * to go), nor a tier whose chain would be left without a placeable tier. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bus_log.h"
#include "sched_int.h"
#include "sched_reclaim.h"

#define S_LOG "sched"
/* demotion jobs started per draining tier and tick: the loop stays responsive */
#define S_DRAIN_JOBS_PER_TICK 4

bool sched_tier_placeable(const sched_t *self, const sched_tier_t *t)
{
    (void)self;
    return t->drain == kvtier_TierDrain_TIER_DRAIN_NONE;
}

/* Is a's free fraction above b's? (free: capacity less the slots in use that
 * are not DELETING; capacities are at most 2^31, so the products fit.) */
static bool s_roomier(const sched_tier_t *a, const sched_tier_t *b)
{
    tier_slots_stats_t sa, sb;
    tier_slots_stats(a->slots, &sa);
    tier_slots_stats(b->slots, &sb);
    uint64_t ua = sa.used > a->n_deleting ? sa.used - a->n_deleting : 0;
    uint64_t ub = sb.used > b->n_deleting ? sb.used - b->n_deleting : 0;
    uint64_t fa = sa.capacity > ua ? sa.capacity - ua : 0;
    uint64_t fb = sb.capacity > ub ? sb.capacity - ub : 0;
    return fa * sb.capacity > fb * sa.capacity;
}

sched_tier_t *sched_pool_pick(sched_t *self, uint32_t pool, const sched_tier_t *except)
{
    if (pool < 1 || pool > self->cfg.n_pools)
        return NULL;
    const sched_tier_pool_config_t *p = &self->cfg.pools[pool - 1];
    sched_tier_t *best = NULL;
    for (uint32_t k = 0; k < p->max_members; k++) {
        sched_tier_t *t = &self->tierset.tiers[p->first_id - 1 + k];
        if (t == except || t->state != SCHED_TIER_UP || !sched_tier_placeable(self, t))
            continue;
        if (!best || s_roomier(t, best))
            best = t;
    }
    return best;
}

bool sched_same_level(const sched_tier_t *a, const sched_tier_t *b)
{
    return a == b || (a->cfg.pool && a->cfg.pool == b->cfg.pool);
}

uint32_t sched_drain_target(sched_t *self, const sched_tier_t *t)
{
    sched_tier_t *m = t->cfg.pool ? sched_pool_pick(self, t->cfg.pool, t) : NULL;
    return m ? m->cfg.tier_id : sched_next_tier(self, t);
}

sched_tier_t *sched_chain_head(sched_t *self, uint32_t chain)
{
    const sched_chain_config_t *ch = &self->cfg.chains[chain];
    for (uint32_t j = 0; j < ch->n_tiers; j++) {
        sched_tier_t *t = &self->tierset.tiers[ch->tier_ids[j] - 1];
        if (t->cfg.pool) { /* a pool level: its roomiest member; none up: the next level */
            sched_tier_t *m = sched_pool_pick(self, t->cfg.pool, NULL);
            if (m)
                return m;
            continue;
        }
        if (sched_tier_placeable(self, t))
            return t;
    }
    /* unreachable while drain keeps one placeable tier per chain */
    return &self->tierset.tiers[ch->tier_ids[ch->n_tiers - 1] - 1];
}

void sched_drain_moved(sched_t *self, sched_tier_t *t, uint32_t n)
{
    (void)self;
    if (t->drain == kvtier_TierDrain_TIER_DRAIN_DRAINING)
        t->drain_moved += n;
}

static sched_tier_t *s_tier_named(sched_t *self, const char *name)
{
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++)
        if (!strcmp(self->tierset.tiers[i].cfg.name, name))
            return &self->tierset.tiers[i];
    return NULL;
}

/* Is T the last tier of a chain it belongs to (nothing below by configuration)?
 * A member of a pool at the bottom is when no other member is up to take its
 * blocks. */
static bool s_last_of_chain(sched_t *self, const sched_tier_t *t, const char **chain)
{
    if (t->cfg.pool && sched_pool_pick(self, t->cfg.pool, t))
        return false;
    for (uint32_t c = 0; c < self->cfg.n_chains; c++) {
        const sched_chain_config_t *ch = &self->cfg.chains[c];
        if (ch->n_tiers &&
            sched_same_level(&self->tierset.tiers[ch->tier_ids[ch->n_tiers - 1] - 1], t)) {
            *chain = ch->name;
            return true;
        }
    }
    return false;
}

/* With T marked draining: a chain left without a placeable tier, or a draining
 * tier left with nowhere to move its blocks (its name into WHY), else true. */
static bool s_drain_leaves_room(sched_t *self, char *why, size_t len)
{
    for (uint32_t c = 0; c < self->cfg.n_chains; c++) {
        const sched_chain_config_t *ch = &self->cfg.chains[c];
        bool any = false;
        for (uint32_t j = 0; j < ch->n_tiers && !any; j++)
            any = sched_tier_placeable(self, &self->tierset.tiers[ch->tier_ids[j] - 1]);
        if (!any) {
            snprintf(why, len, "chain %s would have no tier left to place blocks on", ch->name);
            return false;
        }
    }
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++) {
        const sched_tier_t *d = &self->tierset.tiers[i];
        if (d->drain == kvtier_TierDrain_TIER_DRAIN_DRAINING && !sched_drain_target(self, d)) {
            snprintf(why, len,
                     "tier %s (draining) would have no tier below it left to take its blocks",
                     d->cfg.name);
            return false;
        }
    }
    return true;
}

static const char *s_state_name(int drain)
{
    return drain == kvtier_TierDrain_TIER_DRAIN_DRAINING  ? "draining"
           : drain == kvtier_TierDrain_TIER_DRAIN_RETIRED ? "retired"
                                                          : "serving";
}

static void s_answer(sched_t *self, sched_call_t *call, sched_tier_t *t, int64_t now)
{
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_admin_drain_rep_tag);
    kvtier_AdminDrainReply *p = &rep->body.admin_drain_rep;
    sched_strcpy(p->tier, sizeof p->tier, t->cfg.name);
    p->tier_id = t->cfg.tier_id;
    p->state = (kvtier_TierDrain)t->drain;
    if (t->drain == kvtier_TierDrain_TIER_DRAIN_DRAINING) {
        uint32_t next = sched_drain_target(self, t);
        if (next)
            sched_strcpy(p->next_tier, sizeof p->next_tier, self->tierset.tiers[next - 1].cfg.name);
    }
    tier_slots_stats_t ts;
    tier_slots_stats(t->slots, &ts);
    p->blocks_left = ts.used;
    p->blocks_moved = t->drain_moved;
    p->elapsed_ms =
        t->drain != kvtier_TierDrain_TIER_DRAIN_NONE ? (uint64_t)(now - t->drain_started_ms) : 0;
    sched_reply(self, call);
}

void sched_on_admin_drain(sched_t *self, sched_call_t *call)
{
    const kvtier_AdminDrainRequest *r = &call->req.env.body.admin_drain_req;
    int64_t now = sched_now();
    if (!r->tier[0]) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "AdminDrainRequest.tier is empty: name a tier of the deployment "
                          "(kvtier status lists them)");
        return;
    }
    if (r->status_only && r->cancel) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "AdminDrainRequest: status_only and cancel together (a status "
                          "changes nothing)");
        return;
    }
    sched_tier_t *t = r->tier[0] ? s_tier_named(self, r->tier) : NULL;
    for (uint32_t i = 0; !t && i < self->cfg.n_pools; i++)
        if (!strcmp(self->cfg.pools[i].name, r->tier)) {
            sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                              "\"%s\" is a pool: drain its members one by one (kvtier status "
                              "lists them)",
                              r->tier);
            return;
        }
    if (!t) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_NOT_FOUND,
                          "no tier named \"%s\" in this deployment (kvtier status lists them)",
                          r->tier);
        return;
    }
    if (r->status_only) {
        s_answer(self, call, t, now);
        return;
    }
    if (r->cancel) {
        if (t->drain != kvtier_TierDrain_TIER_DRAIN_NONE)
            bus_info(S_LOG,
                     "tier %s: drain cancelled (%s, %" PRIu64 " blocks moved down): it takes "
                     "new blocks again",
                     t->cfg.name, s_state_name(t->drain), t->drain_moved);
        t->drain = kvtier_TierDrain_TIER_DRAIN_NONE;
        s_answer(self, call, t, now);
        return;
    }
    if (t->drain != kvtier_TierDrain_TIER_DRAIN_NONE) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_CONFLICT,
                          "tier %s is already %s (since %" PRId64 " ms, %" PRIu64
                          " blocks moved): ask its status (kvtier drain %s --status), or cancel "
                          "it (--cancel)",
                          t->cfg.name, s_state_name(t->drain), now - t->drain_started_ms,
                          t->drain_moved, t->cfg.name);
        return;
    }
    const char *chain = "";
    if (s_last_of_chain(self, t, &chain)) {
        /* by configuration: asking again never works, hence not CONFLICT */
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "tier %s is the last tier of chain %s: there is no tier below to take "
                          "its blocks (drain the tiers above it, or remove its blocks with "
                          "kvtier trim / kvtier remove)",
                          t->cfg.name, chain);
        return;
    }
    if (!self->cfg.demote) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_CONFLICT,
                          "tier %s: this scheduler runs without demotion, which moves the blocks "
                          "of a drained tier down",
                          t->cfg.name);
        return;
    }
    t->drain = kvtier_TierDrain_TIER_DRAIN_DRAINING;
    char why[160];
    if (!s_drain_leaves_room(self, why, sizeof why)) {
        t->drain = kvtier_TierDrain_TIER_DRAIN_NONE;
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_CONFLICT,
                          "tier %s cannot be drained now: %s (cancel the drain of a tier below "
                          "first)",
                          t->cfg.name, why);
        return;
    }
    t->drain_started_ms = now;
    t->drain_moved = 0;
    uint32_t next = sched_drain_target(self, t);
    tier_slots_stats_t ts;
    tier_slots_stats(t->slots, &ts);
    bus_info(S_LOG, "tier %s: draining: no new blocks; its %" PRIu64 " used slots move down to %s",
             t->cfg.name, (uint64_t)ts.used, self->tierset.tiers[next - 1].cfg.name);
    sched_drain_tick(self, now); /* an empty tier retires at once */
    s_answer(self, call, t, now);
}

/* One draining tier's round: a few demotion jobs of its coldest blocks. */
static void s_drain_one(sched_t *self, sched_tier_t *t, int64_t now)
{
    tier_slots_stats_t ts;
    tier_slots_stats(t->slots, &ts);
    if (ts.used == 0 && sched_demote_in_flight(self, t) == 0) {
        t->drain = kvtier_TierDrain_TIER_DRAIN_RETIRED;
        bus_info(S_LOG,
                 "tier %s: drained after %" PRId64 " ms (%" PRIu64 " blocks moved down): "
                 "retired, nothing is placed on it until kvtier drain %s --cancel",
                 t->cfg.name, now - t->drain_started_ms, t->drain_moved, t->cfg.name);
        return;
    }
    uint32_t next = sched_drain_target(self, t);
    if (!next || t->state != SCHED_TIER_UP)
        return; /* waits: the tier or the one below comes back */
    sched_tier_t *dst = &self->tierset.tiers[next - 1];
    for (int round = 0; round < S_DRAIN_JOBS_PER_TICK; round++) {
        sched_cand_t best[BUS_MAX_RECLAIM_BATCH];
        uint32_t n = sched_candidates(self, t, sched_job_slots(self, t), now, best);
        if (n == 0)
            return; /* the rest is pinned, DELETING or being demoted */
        uint32_t slots[BUS_MAX_RECLAIM_BATCH], taken[BUS_MAX_RECLAIM_BATCH];
        for (uint32_t i = 0; i < n; i++)
            slots[i] = best[i].slot;
        bool bp = false;
        uint32_t k = sched_demote(self, t, dst, slots, n, taken, &bp);
        if (k == 0 || bp)
            return;
    }
}

void sched_drain_tick(sched_t *self, int64_t now)
{
    if (sched_lease_lapsed(self))
        return;
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++) {
        sched_tier_t *t = &self->tierset.tiers[i];
        if (t->drain == kvtier_TierDrain_TIER_DRAIN_RETIRED) {
            /* nothing is placed on it, but a persistent tier that comes back may
             * bring blocks in its inventory (deletes it never applied): moved too */
            tier_slots_stats_t ts;
            tier_slots_stats(t->slots, &ts);
            if (ts.used == 0)
                continue;
            bus_info(S_LOG, "tier %s: retired but holds %" PRIu64 " slots again: draining them",
                     t->cfg.name, (uint64_t)ts.used);
            t->drain = kvtier_TierDrain_TIER_DRAIN_DRAINING;
        }
        if (t->drain == kvtier_TierDrain_TIER_DRAIN_DRAINING)
            s_drain_one(self, t, now);
    }
}
