/* sched_internal.c — the scheduler's internal plane (schemas/internal.proto), served
 * on a second ROUTER by the same loop: the gc actor's GcScan / GcDrop and the
 * reclaimer's ReclaimCandidates (DESIGN.md §6), plus the DELETING state and the
 * delayed free of reclaimed blocks. The reclaimer's QuotaEnforce is dispatched here
 * and served by sched_quota.c.
 *
 * Owns: per tier, the bounded queue of DELETING blocks (cfg.max_pending_deletes).
 *
 * Candidate order is the tier policy's own (tier_slots_walk_coldest: lru, clock or
 * fifo order, coldest first): expired blocks first, then the coldest committed,
 * unpinned, not rewritten, not DELETING blocks. A call walks at most
 * cfg.reclaim_scan slots of that order from its coldest end.
 *
 * DELETING: the block stays in the slot engine (its slot is not reused) but is
 * hidden from lookups and pins; at or after its due time, once no reader holds it,
 * it is removed and DeleteSlots goes to the tier actor. A put of a DELETING key
 * finishes the deletion first (the key is stored again, not skipped as cached).
 *
 * Never blocks, never allocates outside an engine reset: every round is bounded
 * (64 blocks per message, cfg.reclaim_scan slots per scan). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_log.h"
#include "sched_int.h"
#include "sched_reclaim.h"

#define S_LOG "sched"
#define S_MAX_REFS BUS_MAX_RECLAIM_BATCH /* ReclaimCandidatesReply.blocks */

/* ---- per-slot side arrays ---- */

uint32_t sched_deleting_count(const sched_t *self)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++)
        n += self->tierset.tiers[i].n_deleting;
    return n;
}

/* Forgets entry i (swap with the last). */
/* Frees entry i if its block is still there and unheld. 1 = entry gone, 0 = kept. */
static int s_try_free(sched_t *self, sched_tier_t *t, uint32_t i)
{
    sched_deleting_t *d = &t->deleting[i];
    tier_slot_info_t info;
    if (tier_slots_slot_info(t->slots, d->slot, &info) < 0 || info.state != TIER_SLOT_COMMITTED ||
        info.instance != d->number || !tier_key_eq(&info.key, &d->key)) {
        self->g.reclaim_stale++; /* evicted, expired or removed meanwhile */
        sched_deleting_forget(t, i);
        return 1;
    }
    if (info.pins || info.refs)
        return 0; /* a reader still holds it: freed after its unpin */
    if (tier_slots_remove(t->slots, d->number, &d->key) < 0)
        return 0;
    sched_tier_queue_delete(t, d->slot, &d->key);
    self->g.reclaimed++;
    sched_deleting_forget(t, i);
    return 1;
}

void sched_deleting_tick(sched_t *self, int64_t now)
{
    for (uint32_t k = 0; k < self->tierset.n_tiers; k++) {
        sched_tier_t *t = &self->tierset.tiers[k];
        if (t->state == SCHED_TIER_DOWN)
            continue;
        for (uint32_t i = 0; i < t->n_deleting;) {
            if (t->deleting[i].due <= now && s_try_free(self, t, i))
                continue; /* entry i now holds another one */
            i++;
        }
    }
}

void sched_deleting_settle(sched_t *self, sched_tier_t *t, uint32_t number, const tier_key_t *keys,
                           uint32_t n)
{
    for (uint32_t k = 0; k < n && t->n_deleting; k++) {
        tier_slot_info_t info;
        if (tier_slots_peek(t->slots, number, &keys[k], &info) < 0 ||
            info.state != TIER_SLOT_COMMITTED || !sched_is_deleting(t, number, &keys[k], info.slot))
            continue;
        (void)s_try_free(self, t, t->del_mark[info.slot] - 1);
    }
}

bool sched_deleting_mark(sched_t *self, sched_tier_t *t, uint32_t number, const tier_key_t *key,
                         uint32_t slot, int64_t now, uint32_t reason)
{
    if (t->n_deleting >= self->cfg.max_pending_deletes ||
        (t->del_mark[slot] && sched_is_deleting(t, number, key, slot)))
        return false;
    sched_deleting_t *d = &t->deleting[t->n_deleting++];
    *d = (sched_deleting_t){.key = *key,
                            .number = number,
                            .slot = slot,
                            .due = now + (int64_t)self->cfg.delete_delay_ms};
    t->del_mark[slot] = t->n_deleting;
    if (reason)
        sched_ev_removed(self, number, t->cfg.tier_id, t->medium, reason, key, 1);
    return true;
}

/* ---- helpers ---- */

static void s_ref(sched_t *self, const sched_tier_t *t, uint32_t number, const tier_key_t *key,
                  uint32_t slot, kvtier_BlockRef *out)
{
    memset(out, 0, sizeof *out);
    const char *id = sched_instance_name(self, number);
    if (id)
        sched_strcpy(out->instance_id, sizeof out->instance_id, id);
    else
        snprintf(out->instance_id, sizeof out->instance_id, "#%08" PRIx32, number);
    memcpy(out->key, key->b, TIER_KEY_BYTES);
    out->tier_id = t->cfg.tier_id;
    out->slot = slot;
}

void sched_block_ref(sched_t *self, const sched_tier_t *t, uint32_t number, const tier_key_t *key,
                     uint32_t slot, kvtier_BlockRef *out)
{
    s_ref(self, t, number, key, slot, out);
}

/* The slot-header instance number named by a BlockRef ("#xxxxxxxx" or an id). */
static uint32_t s_ref_number(const char *id)
{
    if (id[0] == '#' && strlen(id) == 9) {
        char *end = NULL;
        unsigned long v = strtoul(id + 1, &end, 16);
        if (end && *end == '\0')
            return (uint32_t)v;
    }
    return sched_instance_number(id);
}

/* The tier below T that takes its blocks: the next one of T's chain that is not
 * drained (`kvtier drain`: demotions skip a draining or retired tier); below T's
 * own level (a member's pool), and a pool level answers its roomiest member up
 * (sched_pool_pick: one call, one member for the whole batch), or is skipped
 * when none is. */
static uint32_t s_next_tier(const sched_t *self, const sched_tier_t *t)
{
    sched_t *mut = (sched_t *)self; /* the pick reads the engines' stats only */
    for (uint32_t c = 0; c < self->cfg.n_chains; c++) {
        const sched_chain_config_t *ch = &self->cfg.chains[c];
        for (uint32_t j = 0; j + 1 < ch->n_tiers; j++) {
            if (ch->tier_ids[j] != t->cfg.tier_id)
                continue;
            for (uint32_t k = j + 1; k < ch->n_tiers; k++) {
                uint32_t id = ch->tier_ids[k];
                if (id < 1 || id > self->tierset.n_tiers)
                    continue;
                sched_tier_t *u = &mut->tierset.tiers[id - 1];
                if (sched_same_level(u, t))
                    continue;
                if (u->cfg.pool) {
                    sched_tier_t *m = sched_pool_pick(mut, u->cfg.pool, NULL);
                    if (m)
                        return m->cfg.tier_id;
                    continue;
                }
                if (sched_tier_placeable(self, u))
                    return id;
            }
            return 0;
        }
    }
    return 0;
}

uint32_t sched_next_tier(const sched_t *self, const sched_tier_t *t)
{
    return s_next_tier(self, t);
}

static uint32_t s_fill_permille(const sched_tier_t *t)
{
    tier_slots_stats_t ts;
    tier_slots_stats(t->slots, &ts);
    uint64_t used = ts.used > t->n_deleting ? ts.used - t->n_deleting : 0;
    return ts.capacity ? (uint32_t)(used * 1000 / ts.capacity) : 0;
}

/* ---- ReclaimCandidates ---- */

typedef sched_cand_t s_cand_t;

/* The walk of s_candidates: keeps the max lowest ranks, coldest first. */
typedef struct {
    const sched_tier_t *t;
    int64_t now;
    uint64_t order; /* place in the policy's order of the slot being looked at */
    uint32_t n, max;
    uint32_t eligible, budget; /* reclaimable slots seen, and how many to look at */
    s_cand_t *best;
} s_walk_t;

static bool s_candidate(void *arg, uint32_t slot)
{
    s_walk_t *w = arg;
    tier_slot_info_t info;
    uint64_t rank = 0, order = w->order++;
    if (tier_slots_slot_info(w->t->slots, slot, &info) < 0 ||
        !sched_reclaim_rank(w->t, &info, slot, w->now, order, &rank))
        return false;
    sched_cand_insert(w->best, &w->n, w->max, rank, slot);
    return ++w->eligible >= w->budget; /* an expired block further on still ranks first */
}

/* The coldest reclaimable blocks among the first cfg.reclaim_scan reclaimable
 * slots of the tier policy's order, coldest first, into best[0..max). Blocks that
 * cannot be taken (pinned, DELETING, being demoted) do not use the budget, so
 * they cannot hide the blocks behind them; the walk still ends at the tier's
 * size. Returns how many. */
static uint32_t s_candidates(sched_t *self, sched_tier_t *t, uint32_t max, int64_t now,
                             s_cand_t *best)
{
    s_walk_t w = {.t = t, .now = now, .max = max, .budget = self->cfg.reclaim_scan, .best = best};
    if (max > 0)
        (void)tier_slots_walk_coldest(t->slots, (uint32_t)t->cfg.capacity, s_candidate, &w);
    return w.n;
}

uint32_t sched_candidates(sched_t *self, sched_tier_t *t, uint32_t max, int64_t now,
                          sched_cand_t *best)
{
    return s_candidates(self, t, max < S_MAX_REFS ? max : S_MAX_REFS, now, best);
}

static void s_on_reclaim(sched_t *self, sched_call_t *call)
{
    const kvtier_ReclaimCandidatesRequest *r = &call->req.env.body.reclaim_candidates_req;
    if (r->tier_id < 1 || r->tier_id > self->tierset.n_tiers) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "no tier with id %u", r->tier_id);
        return;
    }
    sched_tier_t *t = &self->tierset.tiers[r->tier_id - 1];
    uint32_t next = s_next_tier(self, t);
    if (r->mark_deleting && next) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "tier %s has a next tier (id %u) in its chain: its blocks are "
                          "demoted, not deleted",
                          t->cfg.name, next);
        return;
    }
    if (r->mark_deleting && (r->low_permille < 1 || r->low_permille > 1000)) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "low_permille %u out of 1..1000", r->low_permille);
        return;
    }
    uint32_t max = r->max_blocks < S_MAX_REFS ? r->max_blocks : S_MAX_REFS;
    s_cand_t best[S_MAX_REFS];
    uint32_t n = 0;
    int64_t now = sched_now();
    if (t->state == SCHED_TIER_UP && max > 0)
        n = s_candidates(self, t, max, now, best);
    kvtier_Envelope *rep =
        sched_reply_begin(self, call, kvtier_Envelope_reclaim_candidates_rep_tag);
    kvtier_ReclaimCandidatesReply *out = &rep->body.reclaim_candidates_rep;
    out->next_tier_id = next;
    if (r->mark_deleting) {
        tier_slots_stats_t ts;
        tier_slots_stats(t->slots, &ts);
        uint64_t used = ts.used > t->n_deleting ? ts.used - t->n_deleting : 0;
        uint64_t target = ts.capacity * (uint64_t)r->low_permille / 1000;
        uint64_t need = used > target ? used - target : 0;
        uint32_t want = need < n ? (uint32_t)need : n;
        uint32_t room = self->cfg.max_pending_deletes - t->n_deleting;
        if (want > room) {
            out->backpressure = true;
            self->g.reclaim_backpressure++;
            want = room;
        }
        for (uint32_t i = 0; i < want; i++) {
            tier_slot_info_t info;
            (void)tier_slots_slot_info(t->slots, best[i].slot, &info);
            (void)sched_deleting_mark(self, t, info.instance, &info.key, best[i].slot, now,
                                      kvtier_RemoveReason_REMOVE_REASON_EVICTED);
            s_ref(self, t, info.instance, &info.key, best[i].slot,
                  &out->blocks[out->blocks_count++]);
        }
        out->marked = want;
        self->g.reclaim_marked += want;
    } else if (r->demote && next && n > 0) {
        /* demotion: as many as bring the fill (DELETING and blocks already being
         * demoted excluded) down to low */
        tier_slots_stats_t ts;
        tier_slots_stats(t->slots, &ts);
        uint64_t gone = (uint64_t)t->n_deleting + sched_demote_in_flight(self, t);
        uint64_t used = ts.used > gone ? ts.used - gone : 0;
        uint64_t low = r->low_permille >= 1 && r->low_permille <= 1000 ? r->low_permille : 1000;
        uint64_t target = ts.capacity * low / 1000;
        uint64_t need = used > target ? used - target : 0;
        uint32_t want = need < n ? (uint32_t)need : n;
        uint32_t slots[S_MAX_REFS], taken[S_MAX_REFS];
        for (uint32_t i = 0; i < want; i++)
            slots[i] = best[i].slot;
        bool bp = false;
        uint32_t k = sched_demote(self, t, &self->tierset.tiers[next - 1], slots, want, taken, &bp);
        for (uint32_t i = 0; i < k; i++) {
            tier_slot_info_t info;
            (void)tier_slots_slot_info(t->slots, taken[i], &info);
            s_ref(self, t, info.instance, &info.key, taken[i], &out->blocks[out->blocks_count++]);
        }
        out->marked = k;
        out->backpressure = bp;
        if (bp)
            self->g.reclaim_backpressure++;
    } else {
        for (uint32_t i = 0; i < n; i++) {
            tier_slot_info_t info;
            (void)tier_slots_slot_info(t->slots, best[i].slot, &info);
            s_ref(self, t, info.instance, &info.key, best[i].slot,
                  &out->blocks[out->blocks_count++]);
        }
    }
    out->fill_permille = s_fill_permille(t);
    out->deleting = t->n_deleting;
    sched_reply(self, call);
}

/* ---- room on demand (prepare_put / prepare_prefetch) ---- */

bool sched_keeps_victims(const sched_t *self, const sched_tier_t *t)
{
    if (!self->cfg.demote || !self->reclaim.mig_client)
        return false;
    uint32_t next = s_next_tier(self, t);
    return next && self->tierset.tiers[next - 1].state == SCHED_TIER_UP;
}

uint32_t sched_make_room(sched_t *self, sched_tier_t *t, uint32_t need)
{
    uint32_t next = s_next_tier(self, t);
    if (!next || t->state != SCHED_TIER_UP)
        return 0;
    sched_tier_t *dst = &self->tierset.tiers[next - 1];
    uint32_t going = t->n_deleting + sched_demote_in_flight(self, t);
    /* a little more than asked (1/16 of the tier), so the next writes find room;
     * none on a tier reclaimed on demand (its slots hold blocks, not room) */
    uint64_t more = t->cfg.room_on_demand ? 0 : (t->cfg.capacity + 15) / 16;
    need = (uint32_t)((uint64_t)need + more < t->cfg.capacity ? need + more : t->cfg.capacity);
    int64_t now = sched_now();
    uint32_t started = 0;
    /* a few jobs per call at most: the loop stays responsive, the client retries */
    for (int round = 0; round < 4 && going + started < need; round++) {
        uint32_t want = need - (going + started);
        want = want < S_MAX_REFS ? want : S_MAX_REFS;
        s_cand_t best[S_MAX_REFS];
        uint32_t n = s_candidates(self, t, want, now, best);
        uint32_t slots[S_MAX_REFS], taken[S_MAX_REFS];
        for (uint32_t i = 0; i < n; i++)
            slots[i] = best[i].slot;
        bool bp = false;
        uint32_t k = n ? sched_demote(self, t, dst, slots, n, taken, &bp) : 0;
        started += k;
        if (k == 0 || bp)
            break;
    }
    self->g.room_demotions += started;
    return going + started;
}

bool sched_release_demoted(sched_t *self, sched_tier_t *t, uint32_t number, const tier_key_t *key,
                           uint32_t slot, int64_t now)
{
    tier_slot_info_t info;
    if (tier_slots_slot_info(t->slots, slot, &info) < 0 || info.state != TIER_SLOT_COMMITTED ||
        info.instance != number || !tier_key_eq(&info.key, key))
        return false;
    if (t->del_mark[slot] && sched_is_deleting(t, number, key, slot))
        return false; /* on its way out already: its removal was recorded then */
    if (!info.pins && !info.refs && tier_slots_remove(t->slots, number, key) == 0) {
        sched_tier_queue_delete(t, slot, key);
        self->g.reclaimed++;
        return true;
    }
    /* held by a reader: DELETING, freed once it lets go (no further delay) */
    return sched_deleting_mark(self, t, number, key, slot, now - (int64_t)self->cfg.delete_delay_ms,
                               0 /* the caller records the move */);
}

/* ---- GcScan / GcDrop ---- */

void sched_gc_suspect(sched_t *self, uint32_t tier, uint32_t slot, uint16_t gen)
{
    sched_reclaim_t *r = &self->reclaim;
    for (uint32_t i = 0; i < r->n_suspects; i++)
        if (r->suspects[i].tier == tier && r->suspects[i].slot == slot)
            return;
    if (r->n_suspects == SCHED_GC_SUSPECTS) {
        self->g.gc_suspects_dropped++;
        return;
    }
    r->suspects[r->n_suspects].tier = tier;
    r->suspects[r->n_suspects].slot = slot;
    r->suspects[r->n_suspects].gen = gen;
    r->n_suspects++;
    self->g.gc_suspects++;
}

/* The suspects still serving from the same engine, first in the page. */
static void s_gc_suspects(sched_t *self, kvtier_GcScanReply *out, uint32_t max, int64_t now)
{
    sched_reclaim_t *r = &self->reclaim;
    uint32_t k = 0;
    for (; k < r->n_suspects && out->to_probe_count < max; k++) {
        sched_tier_t *t = &self->tierset.tiers[r->suspects[k].tier];
        uint32_t slot = r->suspects[k].slot;
        tier_slot_info_t info;
        if (t->state != SCHED_TIER_UP || t->gen != r->suspects[k].gen ||
            tier_slots_slot_info(t->slots, slot, &info) != 0 || info.state != TIER_SLOT_COMMITTED ||
            (info.deadline_ms && info.deadline_ms <= (uint64_t)now))
            continue;
        s_ref(self, t, info.instance, &info.key, slot, &out->to_probe[out->to_probe_count++]);
        out->to_probe_epochs[out->to_probe_epochs_count++] = t->epoch;
    }
    memmove(r->suspects, r->suspects + k, (r->n_suspects - k) * sizeof r->suspects[0]);
    r->n_suspects -= k;
}

static void s_on_gc_scan(sched_t *self, sched_call_t *call)
{
    const kvtier_GcScanRequest *r = &call->req.env.body.gc_scan_req;
    uint32_t max =
        r->max_entries && r->max_entries < BUS_MAX_GC_PAGE ? r->max_entries : BUS_MAX_GC_PAGE;
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_gc_scan_rep_tag);
    kvtier_GcScanReply *out = &rep->body.gc_scan_rep;
    uint32_t ti = (uint32_t)(r->cursor >> 32);
    uint64_t slot = r->cursor & 0xffffffffu;
    uint32_t budget = self->cfg.reclaim_scan;
    int64_t now = sched_now();
    s_gc_suspects(self, out, max, now);
    while (ti < self->tierset.n_tiers && budget > 0 && out->to_probe_count < max) {
        sched_tier_t *t = &self->tierset.tiers[ti];
        if (t->state != SCHED_TIER_UP || slot >= t->cfg.capacity) {
            ti++;
            slot = 0;
            continue;
        }
        tier_slot_info_t info;
        if (tier_slots_slot_info(t->slots, (uint32_t)slot, &info) == 0 &&
            info.state == TIER_SLOT_COMMITTED &&
            !(info.deadline_ms && info.deadline_ms <= (uint64_t)now) &&
            !(t->del_mark[slot] &&
              sched_is_deleting(t, info.instance, &info.key, (uint32_t)slot))) {
            s_ref(self, t, info.instance, &info.key, (uint32_t)slot,
                  &out->to_probe[out->to_probe_count++]);
            out->to_probe_epochs[out->to_probe_epochs_count++] = t->epoch;
        }
        slot++;
        budget--;
        out->scanned++;
    }
    if (ti >= self->tierset.n_tiers) {
        out->wrapped = true;
        out->next_cursor = 0;
    } else {
        out->next_cursor = (uint64_t)ti << 32 | slot;
    }
    /* unfinished reservations and pins lapse in the scheduler's own lease scan
     * (write_grace, pin_lease); the gc reports what lapsed since its last round */
    out->aborted_writes = (uint32_t)(self->g.reservations_lapsed - self->reclaim.gc_seen_resv);
    out->released_pins = (uint32_t)(self->g.pins_lapsed - self->reclaim.gc_seen_pins);
    self->reclaim.gc_seen_resv = self->g.reservations_lapsed;
    self->reclaim.gc_seen_pins = self->g.pins_lapsed;
    self->g.gc_scans++;
    sched_reply(self, call);
}

static void s_on_gc_drop(sched_t *self, sched_call_t *call)
{
    const kvtier_GcDropRequest *r = &call->req.env.body.gc_drop_req;
    if (r->epochs_count != r->missing_count) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "GcDrop: %u epochs for %u locations (one each)", r->epochs_count,
                          r->missing_count);
        return;
    }
    uint32_t dropped = 0;
    for (pb_size_t i = 0; i < r->missing_count; i++) {
        const kvtier_BlockRef *b = &r->missing[i];
        if (b->tier_id < 1 || b->tier_id > self->tierset.n_tiers)
            continue;
        sched_tier_t *t = &self->tierset.tiers[b->tier_id - 1];
        if (t->state != SCHED_TIER_UP || t->epoch != r->epochs[i] || b->slot >= t->cfg.capacity)
            continue;
        tier_key_t key;
        memcpy(key.b, b->key, TIER_KEY_BYTES);
        uint32_t number = s_ref_number(b->instance_id);
        tier_slot_info_t info;
        if (tier_slots_peek(t->slots, number, &key, &info) < 0 ||
            info.state != TIER_SLOT_COMMITTED || info.slot != b->slot || info.pins || info.refs)
            continue; /* moved, gone, or held by a reader: a later round sees it again */
        if (tier_slots_remove(t->slots, number, &key) < 0)
            continue;
        if (t->del_mark[info.slot] && sched_is_deleting(t, number, &key, info.slot))
            sched_deleting_forget(t, t->del_mark[info.slot] - 1);
        else /* a DELETING block was reported removed when it was marked */
            sched_ev_removed(self, number, t->cfg.tier_id, t->medium,
                             kvtier_RemoveReason_REMOVE_REASON_GC, &key, 1);
        dropped++;
        bus_info(S_LOG, "gc: tier %s slot %" PRIu64 " (%s) no longer holds its block: dropped",
                 t->cfg.name, b->slot, b->instance_id);
    }
    self->g.gc_dropped += dropped;
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_gc_drop_rep_tag);
    rep->body.gc_drop_rep.dropped = dropped;
    sched_reply(self, call);
}

uint32_t sched_tier_dropped(sched_t *self, sched_tier_t *t, const kvtier_TierNotice *n)
{
    if (t->state != SCHED_TIER_UP || n->tier_id != t->cfg.tier_id || n->epoch != t->epoch)
        return 0;
    uint32_t gone = 0;
    int64_t now = sched_now();
    for (pb_size_t i = 0; i < n->dropped_count; i++) {
        uint64_t slot = n->dropped[i].slot;
        tier_slot_info_t info;
        if (slot >= t->cfg.capacity || tier_slots_slot_info(t->slots, (uint32_t)slot, &info) != 0 ||
            info.state != TIER_SLOT_COMMITTED ||
            memcmp(info.key.b, n->dropped[i].key, TIER_KEY_BYTES) != 0)
            continue; /* moved, freed or reused since: not this block any more */
        tier_key_t key = info.key;
        bool deleting = t->del_mark[slot] && sched_is_deleting(t, info.instance, &key, info.slot);
        if (!info.pins && !info.refs && tier_slots_remove(t->slots, info.instance, &key) == 0) {
            if (deleting) /* already reported removed when it was marked */
                sched_deleting_forget(t, t->del_mark[slot] - 1);
            else
                sched_ev_removed(self, info.instance, t->cfg.tier_id, t->medium,
                                 kvtier_RemoveReason_REMOVE_REASON_DAMAGED, &key, 1);
        } else if (deleting || !sched_deleting_mark(self, t, info.instance, &key, info.slot, now,
                                                    kvtier_RemoveReason_REMOVE_REASON_DAMAGED)) {
            continue; /* on its way out already, or no room to mark: the gc's probe */
        }
        gone++;
        bus_warn(S_LOG, "tier %s dropped slot %" PRIu64 " (%s): it left the index", t->cfg.name,
                 slot, n->cause);
    }
    self->g.damaged_dropped += gone;
    return gone;
}

void sched_on_internal(sched_t *self, sched_call_t *call)
{
    switch (call->req.env.which_body) {
    case kvtier_Envelope_reclaim_candidates_req_tag:
        s_on_reclaim(self, call);
        break;
    case kvtier_Envelope_gc_scan_req_tag:
        s_on_gc_scan(self, call);
        break;
    case kvtier_Envelope_gc_drop_req_tag:
        s_on_gc_drop(self, call);
        break;
    case kvtier_Envelope_quota_enforce_req_tag:
        sched_on_quota(self, call);
        break;
    case kvtier_Envelope_demote_done_req_tag:
        sched_on_demote_done(self, call);
        break;
    default:
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "%s is not served on the internal plane",
                          bus_body_name(call->req.env.which_body));
        break;
    }
}
