/* sched_quota.c — per-instance quotas (issue 4 §4; docs/SCHEDULER.md "Quotas"): the
 * scheduler's side of the reclaimer's QuotaEnforce on the internal plane.
 *
 * Usage of an instance = its locations over all tiers: committed blocks and
 * reservations being written, DELETING blocks excluded (already on their way out);
 * bytes = locations x its bytes_per_block. Counted on demand, per call, by one scan
 * of every tier's slot engine (tier_slots_slot_info over its capacity): no running
 * counters that could drift from the index.
 *
 * Each registered instance above its limit (its own cfg.quotas entry, else "*") has
 * its coldest unpinned SERVING blocks marked DELETING — the deepest tier of the
 * chains first (the coldest data), within a tier in reclaim order
 * (sched_reclaim_rank: expired first, then the tier policy's order) — until its usage is at
 * most limit x low. The two-step DELETING path of sched_internal.c frees them after
 * the delete delay, once no reader holds them.
 *
 * Cost of a call: the usage scan reads every slot once, plus one candidate scan per
 * tier that still has work: at most 2 x the sum of the tiers' capacities slot
 * reads, O(1) each (reported as `scanned`). Bounded: at most 64 blocks marked per
 * call, S_SERVE over-quota instances served per call (the next call starts with the
 * first one left out), each tier's DELETING queue (cfg.max_pending_deletes; full =
 * backpressure, counted). Never blocks; allocates only at start (the number map).
 * Soft quotas: nothing here refuses a write. */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_log.h"
#include "sched_int.h"
#include "sched_reclaim.h"

#define S_LOG "sched"
#define S_MAX_REFS BUS_MAX_QUOTA_BATCH /* QuotaEnforceReply.blocks */
#define S_SERVE 8u                     /* over-quota instances served per call */
#define S_TRIM_RECOUNT_MS 1000         /* AdminTrim counts again at most this often */

typedef sched_cand_t s_cand_t;

/* An over-quota instance served by this call and its candidates on one tier. */
typedef struct {
    uint32_t inst; /* instance index */
    uint64_t need; /* blocks still to mark to reach its target */
    uint32_t k;    /* candidates wanted on the current tier */
    uint32_t n;    /* ... found, coldest first */
    bool trim;     /* need comes from an operator's trim, not the quota */
    s_cand_t best[S_MAX_REFS];
} s_served_t;

int sched_quota_init(sched_t *self)
{
    uint32_t buckets = 2;
    while (buckets < 2u * self->cfg.max_instances)
        buckets <<= 1;
    self->reclaim.quota_map = calloc(buckets, sizeof *self->reclaim.quota_map);
    if (!self->reclaim.quota_map)
        return -1;
    self->reclaim.quota_mask = buckets - 1;
    return 0;
}

void sched_quota_fini(sched_t *self)
{
    free(self->reclaim.quota_map);
    self->reclaim.quota_map = NULL;
}

/* ---- number -> instance (numbers are hash bits of the id: the low bits spread) ---- */

static void s_map_build(sched_t *self)
{
    memset(self->reclaim.quota_map, 0,
           ((size_t)self->reclaim.quota_mask + 1) * sizeof *self->reclaim.quota_map);
    for (uint32_t i = 0; i < self->index.n_inst; i++) {
        uint32_t b = self->index.inst[i].number & self->reclaim.quota_mask;
        while (self->reclaim.quota_map[b])
            b = (b + 1) & self->reclaim.quota_mask;
        self->reclaim.quota_map[b] = i + 1;
    }
}

static uint32_t s_map_find(const sched_t *self, uint32_t number)
{
    /* at least half the buckets are empty (2 x max_instances): the probe ends */
    for (uint32_t b = number & self->reclaim.quota_mask;; b = (b + 1) & self->reclaim.quota_mask) {
        uint32_t v = self->reclaim.quota_map[b];
        if (!v)
            return SCHED_NONE;
        if (self->index.inst[v - 1].number == number)
            return v - 1;
    }
}

/* ---- limits ---- */

/* The quota entry of an instance (its own, else "*"), resolved once: the config
 * and the instance's id never change. NULL: no quota. */
static const sched_quota_config_t *s_quota_of(const sched_t *self, sched_instance_t *in)
{
    if (!in->q_entry) {
        uint32_t own = UINT32_MAX, star = UINT32_MAX;
        for (uint32_t i = 0; i < self->cfg.n_quotas; i++) {
            if (strcmp(self->cfg.quotas[i].instance, in->id) == 0)
                own = i;
            else if (strcmp(self->cfg.quotas[i].instance, "*") == 0)
                star = i;
        }
        uint32_t e = own != UINT32_MAX ? own : star;
        in->q_entry = e == UINT32_MAX ? UINT32_MAX : e + 1;
    }
    return in->q_entry == UINT32_MAX ? NULL : &self->cfg.quotas[in->q_entry - 1];
}

/* floor(v x permille / 1000) without overflow. */
static uint64_t s_scale(uint64_t v, uint32_t permille)
{
    return v / 1000 * permille + v % 1000 * permille / 1000;
}

/* The limit and the target (limit x low) in blocks: the tighter of max_blocks and
 * max_bytes / bytes_per_block. */
static void s_limits(const sched_quota_config_t *q, uint64_t bpb, uint32_t low, uint64_t *limit,
                     uint64_t *target)
{
    uint64_t lim = UINT64_MAX, tgt = UINT64_MAX;
    if (q->max_blocks) {
        lim = q->max_blocks;
        tgt = s_scale(q->max_blocks, low);
    }
    if (q->max_bytes && bpb) {
        uint64_t l = q->max_bytes / bpb, t = s_scale(q->max_bytes, low) / bpb;
        lim = l < lim ? l : lim;
        tgt = t < tgt ? t : tgt;
    }
    *limit = lim;
    *target = tgt;
}

/* ---- scans ---- */

static uint32_t s_capacity(const sched_tier_t *t)
{
    if (!t->slots || t->state == SCHED_TIER_DOWN)
        return 0; /* a DOWN tier holds no locations */
    tier_slots_stats_t ts;
    tier_slots_stats(t->slots, &ts);
    return ts.capacity;
}

/* Every registered instance's q_usage from one pass over all slots. Returns the
 * slots read. */
static uint64_t s_count_usage(sched_t *self)
{
    uint64_t scanned = 0;
    for (uint32_t i = 0; i < self->index.n_inst; i++)
        self->index.inst[i].q_usage = 0;
    for (uint32_t k = 0; k < self->tierset.n_tiers; k++) {
        sched_tier_t *t = &self->tierset.tiers[k];
        uint32_t cap = s_capacity(t);
        for (uint32_t slot = 0; slot < cap; slot++) {
            tier_slot_info_t info;
            if (tier_slots_slot_info(t->slots, slot, &info) < 0 || info.state == TIER_SLOT_FREE)
                continue;
            if (info.state == TIER_SLOT_COMMITTED && t->del_mark[slot] &&
                sched_is_deleting(t, info.instance, &info.key, slot))
                continue;
            uint32_t i = s_map_find(self, info.instance);
            if (i != SCHED_NONE)
                self->index.inst[i].q_usage++;
        }
        scanned += cap;
    }
    return scanned;
}

/* Tier indices, deepest position in any chain first (ties: table order). */
static void s_tier_order(const sched_t *self, uint32_t *order)
{
    uint32_t depth[SCHED_MAX_TIERS] = {0};
    for (uint32_t c = 0; c < self->cfg.n_chains; c++) {
        const sched_chain_config_t *ch = &self->cfg.chains[c];
        for (uint32_t j = 0; j < ch->n_tiers; j++) {
            uint32_t ti = ch->tier_ids[j] - 1;
            if (ti < SCHED_MAX_TIERS && j > depth[ti])
                depth[ti] = j;
        }
    }
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++) {
        uint32_t j = i;
        while (j > 0 && depth[order[j - 1]] < depth[i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
}

/* The walk of s_scan_tier over one tier's policy order. */
typedef struct {
    sched_t *self;
    const sched_tier_t *t;
    s_served_t *sv;
    uint32_t n_sv;
    int64_t now;
    uint64_t order;
} s_walk_t;

static bool s_scan_slot(void *arg, uint32_t slot)
{
    s_walk_t *w = arg;
    tier_slot_info_t info;
    uint64_t rank = 0, order = w->order++;
    if (tier_slots_slot_info(w->t->slots, slot, &info) < 0 ||
        !sched_reclaim_rank(w->t, &info, slot, w->now, order, &rank))
        return false;
    s_served_t *s = NULL;
    for (uint32_t i = 0; i < w->n_sv && !s; i++)
        if (w->sv[i].k && w->self->index.inst[w->sv[i].inst].number == info.instance)
            s = &w->sv[i];
    if (s)
        sched_cand_insert(s->best, &s->n, s->k, rank, slot);
    return false;
}

/* The k coldest candidates of each served instance on tier t (one walk of the
 * tier policy's whole order). Returns the slots read. */
static uint32_t s_scan_tier(sched_t *self, sched_tier_t *t, s_served_t *sv, uint32_t n_sv,
                            int64_t now)
{
    s_walk_t w = {.self = self, .t = t, .sv = sv, .n_sv = n_sv, .now = now};
    return tier_slots_walk_coldest(t->slots, s_capacity(t), s_scan_slot, &w);
}

/* Marks the candidates found on t, instance by instance, within the budget.
 * false: t's DELETING queue is full (backpressure). */
static bool s_mark_tier(sched_t *self, sched_tier_t *t, s_served_t *sv, uint32_t n_sv,
                        uint32_t *budget, int64_t now, kvtier_QuotaEnforceReply *out)
{
    for (uint32_t i = 0; i < n_sv; i++) {
        s_served_t *s = &sv[i];
        sched_instance_t *in = &self->index.inst[s->inst];
        for (uint32_t c = 0; c < s->n && s->need > 0 && *budget > 0; c++) {
            if (t->n_deleting >= self->cfg.max_pending_deletes)
                return false;
            uint32_t slot = s->best[c].slot;
            tier_slot_info_t info;
            kvtier_RemoveReason why = s->trim ? kvtier_RemoveReason_REMOVE_REASON_REMOVED
                                              : kvtier_RemoveReason_REMOVE_REASON_QUOTA;
            if (tier_slots_slot_info(t->slots, slot, &info) < 0 ||
                !sched_deleting_mark(self, t, info.instance, &info.key, slot, now, why))
                continue;
            sched_block_ref(self, t, info.instance, &info.key, slot,
                            &out->blocks[out->blocks_count++]);
            s->need--;
            (*budget)--;
            out->marked++;
            in->q_usage--;
            if (s->trim) {
                in->trim_removed++;
                self->g.trim_removed++;
            } else {
                in->q_reclaimed++;
                self->g.quota_reclaimed++;
            }
        }
    }
    return true;
}

static bool s_any_need(const s_served_t *sv, uint32_t n_sv)
{
    for (uint32_t i = 0; i < n_sv; i++)
        if (sv[i].need)
            return true;
    return false;
}

/* Is every tier up (none down, none reading its inventory)? */
static bool s_tiers_settled(const sched_t *self)
{
    for (uint32_t k = 0; k < self->tierset.n_tiers; k++)
        if (self->tierset.tiers[k].state != SCHED_TIER_UP)
            return false;
    return true;
}

/* An operator's trim reached its count: it ends (it is one-shot, not a quota). */
static void s_trim_done(sched_t *self, sched_instance_t *in)
{
    bus_info(S_LOG, "trim of instance %s done: %" PRIu64 " blocks left (keep %" PRIu64 ")", in->id,
             in->q_usage, in->trim_keep);
    in->trim_on = false;
    if (self->reclaim.n_trims)
        self->reclaim.n_trims--;
}

/* Over-quota instances from the rotating cursor into sv (at most S_SERVE).
 * Returns how many; *left_out: more were over. */
static uint32_t s_pick(sched_t *self, uint32_t low, s_served_t *sv, bool *left_out,
                       kvtier_QuotaEnforceReply *out)
{
    uint32_t n_sv = 0;
    uint32_t first_left = SCHED_NONE;
    for (uint32_t k = 0; k < self->index.n_inst; k++) {
        uint32_t i = (self->reclaim.quota_cursor + k) % self->index.n_inst;
        sched_instance_t *in = &self->index.inst[i];
        const sched_quota_config_t *q = s_quota_of(self, in);
        in->q_limit = 0;
        if (!q && !in->trim_on)
            continue;
        uint64_t limit = UINT64_MAX, target = UINT64_MAX;
        if (q) {
            out->instances++;
            s_limits(q, in->spec.bytes_per_block, low, &limit, &target);
            in->q_limit = limit;
            if (in->q_usage > limit) {
                in->q_over++;
                in->q_draining = true;
            }
            if (in->q_usage <= target)
                in->q_draining = false; /* hysteresis, as the watermarks' */
        }
        /* a trim ends at its count once every tier is up: a persistent tier that is
         * down or still reading its inventory brings its blocks back */
        if (in->trim_on && in->q_usage <= in->trim_keep && s_tiers_settled(self))
            s_trim_done(self, in);
        bool trimming = in->trim_on && in->q_usage > in->trim_keep;
        if (!in->q_draining && !trimming)
            continue;
        /* the lower of the two targets rules; a trim's is exact (no hysteresis) */
        uint64_t quota_target = in->q_draining ? target : UINT64_MAX;
        bool by_trim = trimming && in->trim_keep < quota_target;
        target = by_trim ? in->trim_keep : quota_target;
        out->over += in->q_draining;
        if (n_sv == S_SERVE) {
            if (first_left == SCHED_NONE)
                first_left = i;
            continue;
        }
        sv[n_sv].inst = i;
        sv[n_sv].trim = by_trim;
        sv[n_sv].need = in->q_usage - target; /* target < usage either way */
        n_sv++;
    }
    *left_out = first_left != SCHED_NONE;
    if (*left_out)
        self->reclaim.quota_cursor = first_left; /* served first next time */
    return n_sv;
}

void sched_on_quota(sched_t *self, sched_call_t *call)
{
    const kvtier_QuotaEnforceRequest *r = &call->req.env.body.quota_enforce_req;
    if (r->low_permille < 1 || r->low_permille > 1000) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "QuotaEnforce: low_permille %u out of 1..1000", r->low_permille);
        return;
    }
    uint32_t budget = r->max_blocks && r->max_blocks < S_MAX_REFS ? r->max_blocks : S_MAX_REFS;
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_quota_enforce_rep_tag);
    kvtier_QuotaEnforceReply *out = &rep->body.quota_enforce_rep;
    if ((self->cfg.n_quotas == 0 && self->reclaim.n_trims == 0) || self->index.n_inst == 0) {
        self->g.quota_over = 0;
        sched_reply(self, call);
        return;
    }
    s_map_build(self);
    out->scanned = s_count_usage(self);
    static_assert(S_SERVE * sizeof(s_served_t) < 16384, "served set on the actor's stack");
    s_served_t sv[S_SERVE];
    bool left_out = false;
    uint32_t n_sv = s_pick(self, r->low_permille, sv, &left_out, out);
    self->g.quota_over = out->over;

    uint32_t order[SCHED_MAX_TIERS];
    s_tier_order(self, order);
    int64_t now = sched_now();
    bool bp = false;
    for (uint32_t o = 0; o < self->tierset.n_tiers && budget > 0 && s_any_need(sv, n_sv); o++) {
        sched_tier_t *t = &self->tierset.tiers[order[o]];
        if (t->state != SCHED_TIER_UP)
            continue;
        if (t->n_deleting >= self->cfg.max_pending_deletes) {
            bp = true;
            continue;
        }
        for (uint32_t i = 0; i < n_sv; i++) {
            uint64_t k = sv[i].need < budget ? sv[i].need : budget;
            sv[i].k = (uint32_t)k;
            sv[i].n = 0;
        }
        out->scanned += s_scan_tier(self, t, sv, n_sv, now);
        if (!s_mark_tier(self, t, sv, n_sv, &budget, now, out))
            bp = true;
    }
    out->backpressure = bp;
    out->more = left_out || (budget == 0 && s_any_need(sv, n_sv));
    if (bp)
        self->g.quota_backpressure++;
    if (out->marked)
        bus_debug(S_LOG,
                  "quotas: %u of %u instances over, %u blocks marked DELETING%s (%" PRIu64
                  " slots read)",
                  out->over, out->instances, out->marked, bp ? ", DELETING queue full" : "",
                  out->scanned);
    sched_reply(self, call);
}

/* ---- operator trims ---- */

void sched_on_admin_trim(sched_t *self, sched_call_t *call)
{
    const kvtier_AdminTrimRequest *r = &call->req.env.body.admin_trim_req;
    if (r->cancel && r->status_only) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "AdminTrim: cancel and status_only together; send one");
        return;
    }
    sched_instance_t *in = sched_instance_get(self, call, r->instance_id);
    if (!in)
        return;
    /* A count reads every slot of every tier (about 95 ms at 8 Mi slots): a poll of
     * a trim in progress takes the last round's (the reclaimer's rounds keep it
     * fresh), anything else counts again at most once per S_TRIM_RECOUNT_MS, so
     * no caller can hold the scheduler with a loop of calls. */
    int64_t now = sched_now();
    if ((!r->status_only || !in->trim_on) &&
        (self->reclaim.trim_counted_ms == 0 ||
         now - self->reclaim.trim_counted_ms >= S_TRIM_RECOUNT_MS)) {
        s_map_build(self);
        (void)s_count_usage(self);
        self->reclaim.trim_counted_ms = now;
    }
    if (r->cancel) {
        if (in->trim_on) {
            bus_info(S_LOG, "trim of instance %s cancelled at %" PRIu64 " blocks", in->id,
                     in->q_usage);
            in->trim_on = false;
            self->reclaim.n_trims--;
        }
    } else if (!r->status_only) {
        if (!in->trim_on)
            self->reclaim.n_trims++;
        in->trim_on = true;
        in->trim_keep = r->keep_blocks;
        bus_info(S_LOG, "trim of instance %s: %" PRIu64 " blocks, keeping %" PRIu64, in->id,
                 in->q_usage, in->trim_keep);
        if (in->q_usage <= in->trim_keep && s_tiers_settled(self))
            s_trim_done(self, in);
    }
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_admin_trim_rep_tag);
    kvtier_AdminTrimReply *out = &rep->body.admin_trim_rep;
    out->blocks = in->q_usage;
    out->active = in->trim_on;
    out->keep_blocks = in->trim_on ? in->trim_keep : 0;
    sched_reply(self, call);
}
