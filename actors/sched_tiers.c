/* sched_tiers.c — the scheduler's view of its tiers: one slot engine per tier (the
 * block index, with per-slot block size and checksum), one asynchronous bus_client
 * per tier actor, and tier membership (DESIGN.md §4).
 *
 * Membership: a tier is DOWN until its actor is announced UP (endpoint, epoch,
 * capacity, slot size). A new incarnation — first UP, UP after DOWN, another
 * epoch, endpoint or geometry — drops every location on the tier (its host memory
 * is gone or unknown), opens a fresh client (nothing queued for the old actor can
 * reach the new one) and pages the actor's Inventory to rebuild the index
 * (RECOVERING: reads only, puts refused until done): the slots are cut into
 * windows of cfg.inventory_page, each read as pages of packed records
 * (bus_inventory.h), cfg.inventory_in_flight windows at once; every tier does so
 * at the same time. A page is adopted only if it is what was asked (its tier's
 * announced epoch, records inside its window); else it is retried from the tick,
 * and a window failing SCHED_INV_TRIES times in a row ends the rebuild with a
 * partial index (the gc's probes and later puts repair it). DOWN fails the tier's pending
 * requests and drops its locations. Engine resets bump the tier's generation, so
 * window entries made before are recognised as stale and never touch the new one.
 *
 * Inventory entries are adopted as SERVING under their slot-header instance number
 * (instance ids are "#xxxxxxxx" or the id itself, hashed like tier_actor.h does),
 * whether or not that instance is registered yet: they serve again once it
 * registers. Expired entries are not adopted and their headers are deleted.
 *
 * Never blocks: every tier exchange is a bus_client_send with a deadline; replies
 * and timeouts arrive through the loop. Allocates only on membership changes. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_inventory.h"
#include "bus_log.h"
#include "sched_int.h"
#include "sched_reclaim.h"
#include "sched_tiers.h"
#include "tier.h"

#define S_LOG "sched"

/* ---- DELETING marks (set and cleared by reclaim, sched_internal.c) ---- */

/* Per-slot side arrays of a fresh engine (DELETING marks); 0 or -1. */
static int s_deleting_reset(sched_t *self, sched_tier_t *t, uint64_t capacity)
{
    uint32_t *mark = calloc(capacity, sizeof *mark);
    sched_deleting_t *del =
        t->deleting ? t->deleting : calloc(self->cfg.max_pending_deletes, sizeof *del);
    if (!mark || !del) {
        free(mark);
        if (del != t->deleting)
            free(del);
        return -1;
    }
    free(t->del_mark);
    t->del_mark = mark;
    t->deleting = del;
    t->n_deleting = 0;
    return 0;
}

static void s_deleting_fini(sched_tier_t *t)
{
    free(t->del_mark);
    free(t->deleting);
    t->del_mark = NULL;
    t->deleting = NULL;
    t->n_deleting = 0;
}

bool sched_is_deleting(const sched_tier_t *t, uint32_t number, const tier_key_t *key, uint32_t slot)
{
    uint32_t m = t->del_mark[slot];
    if (m == 0 || m > t->n_deleting)
        return false;
    const sched_deleting_t *d = &t->deleting[m - 1];
    return d->slot == slot && d->number == number && tier_key_eq(&d->key, key);
}

void sched_deleting_forget(sched_tier_t *t, uint32_t i)
{
    sched_deleting_t *d = &t->deleting[i];
    if (t->del_mark[d->slot] == i + 1)
        t->del_mark[d->slot] = 0;
    uint32_t last = t->n_deleting - 1;
    if (i != last) {
        *d = t->deleting[last];
        if (t->del_mark[d->slot] == last + 1)
            t->del_mark[d->slot] = i + 1;
    }
    t->n_deleting--;
}

void sched_tier_victim(sched_t *self, sched_tier_t *t, const tier_victim_t *v)
{
    uint32_t m = t->del_mark[v->slot];
    if (m && sched_is_deleting(t, v->instance, &v->key, v->slot)) {
        sched_deleting_forget(t, m - 1); /* reported removed when it was marked */
        return;
    }
    sched_ev_removed(self, v->instance, t->cfg.tier_id, t->medium,
                     v->expired ? kvtier_RemoveReason_REMOVE_REASON_EXPIRED
                                : kvtier_RemoveReason_REMOVE_REASON_EVICTED,
                     &v->key, 1);
}

/* A stream's records buffer goes once nothing can be decoded into it any more. */
static void s_stream_release(sched_inv_stream_t *s)
{
    free(s->records);
    s->records = NULL;
    s->busy = false;
}

/* ---- engines ---- */

/* A fresh engine (and side arrays) of `capacity` slots; the old one is dropped. */
static int s_engine_reset(sched_t *self, sched_tier_t *t, uint64_t capacity)
{
    tier_slots_config_t sc = {
        .policy = t->cfg.policy[0] ? t->cfg.policy : "lru",
        .capacity = (uint32_t)capacity,
        .max_batch = self->cfg.max_batch,
        .hash_seed = self->hash_seed ^ (0x51ED270B27A3C1ull * (t->idx + 1)),
    };
    tier_slots_t *slots = tier_slots_new(&sc);
    uint32_t *sizes = calloc(capacity, sizeof *sizes);
    uint64_t *checksums = calloc(capacity, sizeof *checksums);
    if (!slots || !sizes || !checksums || s_deleting_reset(self, t, capacity) < 0) {
        tier_slots_destroy(&slots);
        free(sizes);
        free(checksums);
        bus_error(S_LOG, "tier %s: cannot allocate a slot engine of %" PRIu64 " slots", t->cfg.name,
                  capacity);
        return -1;
    }
    if (t->slots) {
        tier_slots_stats_t ts;
        tier_slots_stats(t->slots, &ts);
        t->dropped += ts.committed;
        self->g.dropped_by_tier += ts.committed;
    }
    tier_slots_destroy(&t->slots);
    free(t->sizes);
    free(t->checksums);
    t->slots = slots;
    t->sizes = sizes;
    t->checksums = checksums;
    t->cfg.capacity = capacity;
    t->gen++;
    return 0;
}

/* Is t's engine of `capacity` slots as s_engine_reset leaves it (a DOWN tier's:
 * nothing placed, evicted, expired, removed or rolled back since, nothing
 * DELETING)? Then a tier coming UP keeps it: a new leader's first membership does
 * not allocate its index twice (sched_tiers_init did at start). */
static bool s_engine_fresh(const sched_tier_t *t, uint64_t capacity)
{
    tier_slots_stats_t ts;
    tier_slots_stats(t->slots, &ts);
    return capacity == t->cfg.capacity && ts.used == 0 && ts.evictions == 0 &&
           ts.expirations == 0 && ts.removals == 0 && ts.rollbacks == 0 && t->n_deleting == 0;
}

/* ---- clients ---- */

static int s_on_client(zloop_t *loop, zsock_t *sock, void *arg)
{
    (void)loop;
    (void)sock;
    sched_tier_t *t = arg;
    if (t->client)
        bus_client_dispatch(t->client, 0);
    sched_tiers_flush(t->self);
    sched_events_flush(t->self); /* the end of a loop event: commits are recorded */
    return 0;
}

/* Fails everything in flight on t's client (callbacks run: pending puts are
 * answered) and closes it. */
static void s_client_close(sched_t *self, sched_tier_t *t, const char *why)
{
    if (!t->client)
        return;
    t->inv_active = false;
    bus_client_fail_all(t->client, kvtier_StatusCode_STATUS_UNAVAILABLE, why);
    zloop_reader_end(self->loop, bus_client_sock(t->client));
    bus_client_destroy(&t->client);
}

/* A TierNotice from t's actor (bus_client_set_notice): blocks it dropped. */
static void s_on_notice(void *arg, const kvtier_Envelope *env)
{
    sched_tier_t *t = arg;
    if (env->which_body == kvtier_Envelope_tier_notice_tag)
        (void)sched_tier_dropped(t->self, t, &env->body.tier_notice);
}

static int s_client_open(sched_t *self, sched_tier_t *t)
{
    char name[64];
    snprintf(name, sizeof name, "sched>%s", t->cfg.name);
    bus_client_config_t cc = {
        .name = name,
        .max_in_flight = self->cfg.max_pending_puts + 64,
        .default_timeout_ms = (uint32_t)self->cfg.tier_timeout_ms,
    };
    t->client = bus_client_new(t->endpoint, &cc);
    if (!t->client)
        return -1;
    bus_client_set_notice(t->client, s_on_notice, t);
    if (zloop_reader(self->loop, bus_client_sock(t->client), s_on_client, t) < 0) {
        bus_client_destroy(&t->client);
        return -1;
    }
    return 0;
}

int sched_tiers_init(sched_t *self)
{
    self->tierset.n_tiers = self->cfg.n_tiers;
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++) {
        sched_tier_t *t = &self->tierset.tiers[i];
        t->self = self;
        t->idx = i;
        t->cfg = self->cfg.tiers[i];
        t->medium = sched_ev_medium(tier_kind_wire(t->cfg.kind));
        t->state = SCHED_TIER_DOWN;
        /* a vacant pool slot holds nothing: a one-slot engine until a member joins
         * (its UP allocates the member's), so max_members x capacity is not
         * allocated for members that may never come */
        if (s_engine_reset(self, t, t->cfg.pool ? 1 : t->cfg.capacity) < 0)
            return -1;
    }
    return 0;
}

void sched_tiers_fini(sched_t *self)
{
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++) {
        sched_tier_t *t = &self->tierset.tiers[i];
        s_client_close(self, t, "the scheduler is stopping");
        for (uint32_t k = 0; k < SCHED_INV_MAX_IN_FLIGHT; k++)
            s_stream_release(&t->inv[k]);
        tier_slots_destroy(&t->slots);
        free(t->sizes);
        free(t->checksums);
        t->sizes = NULL;
        t->checksums = NULL;
        s_deleting_fini(t);
    }
}

/* ---- the scheduler's own tokens ---- */

int sched_token_mint(sched_t *self, bus_token_kind_t kind, const sched_tier_t *const *tiers,
                     uint32_t nt, const bus_token_entry_t *entries, uint32_t n, uint64_t ttl_ms,
                     uint8_t *buf, size_t cap, size_t *len)
{
    bus_token_tier_t tt[2];
    if (nt > 2)
        return -EINVAL;
    if (sched_lease_lapsed(self)) /* a deposed leader grants nothing */
        return -ESTALE;
    for (uint32_t i = 0; i < nt; i++)
        sched_tier_token(tiers[i], &tt[i]);
    bus_token_meta_t meta = {.issuer = self->token_issuer,
                             .leader_epoch = self->cfg.leader_epoch,
                             .expiry_ms = (uint64_t)sched_wall_ms() + ttl_ms};
    int rc = bus_token_encode(kind, &meta, tt, nt, entries, n, buf, cap, len);
    if (rc == 0 && self->seal)
        rc = bus_token_seal(&self->token_key, buf, cap, len);
    return rc;
}

/* An admin token over slots[0..n) of t (sizes: at most these bytes; NULL: 0) in
 * the tier scratch; an empty blob without the secret (tier actors without one
 * check nothing) or when it cannot be minted (the tier refuses the request). */
static bus_blob_t s_admin_token(sched_t *self, const sched_tier_t *t, const uint64_t *slots,
                                const uint64_t *sizes, uint32_t n)
{
    bus_blob_t none = {0};
    if (!self->seal)
        return none;
    bus_token_entry_t *e = self->tierset.tio.tok_entries;
    for (uint32_t i = 0; i < n; i++)
        e[i] = (bus_token_entry_t){.tier = 0,
                                   .src_tier = BUS_TOKEN_NO_TIER,
                                   .size = sizes ? (uint32_t)sizes[i] : 0,
                                   .slot = slots[i]};
    size_t len = 0;
    int rc = sched_token_mint(self, BUS_TOKEN_ADMIN, &t, 1, e, n, SCHED_ADMIN_TOKEN_MS,
                              self->tierset.tio.tok, self->tierset.tio.tok_cap, &len);
    if (rc < 0) {
        bus_warn(S_LOG, "tier %s: admin token for %u slots not minted: %s", t->cfg.name, n,
                 strerror(-rc));
        return none;
    }
    return (bus_blob_t){.data = self->tierset.tio.tok, .len = (uint32_t)len, .cap = (uint32_t)len};
}

/* ---- deletes ---- */

static void s_delete_done(void *arg, bus_reply_t *r)
{
    sched_tier_t *t = arg;
    if (r->status.code != kvtier_StatusCode_STATUS_OK) {
        t->self->g.tier_errors++;
        bus_debug(S_LOG, "tier %s: DeleteSlots: %s", t->cfg.name, r->status.message);
    }
}

static void s_flush_tier(sched_t *self, sched_tier_t *t)
{
    uint32_t n = t->n_del;
    t->n_del = 0;
    if (n == 0)
        return;
    if (!t->client || t->state == SCHED_TIER_DOWN) {
        self->g.deletes_dropped += n;
        return;
    }
    kvtier_Envelope *env = self->tierset.tio.env;
    bus_env_init(env, kvtier_Envelope_delete_slots_req_tag, self->cfg.node_name);
    env->body.delete_slots_req.tier_id = t->cfg.tier_id;
    env->body.delete_slots_req.epoch = t->epoch;
    bus_arrays_t arr = {
        .slots = {.v = t->del_slots, .n = n, .cap = SCHED_DEL_BATCH},
        .keys = {.keys = t->del_keys, .n = n, .cap = SCHED_DEL_BATCH},
        .payload = s_admin_token(self, t, t->del_slots, NULL, n),
    };
    kvtier_Status st;
    if (bus_client_send(t->client, env, &arr, NULL, 0, 0, NULL, s_delete_done, t, NULL, &st) < 0) {
        /* a lost delete leaves a header whose bytes are still the block's: harmless */
        self->g.deletes_dropped += n;
        bus_debug(S_LOG, "tier %s: %u deletes dropped: %s", t->cfg.name, n, st.message);
        return;
    }
    self->g.deletes_sent += n;
}

void sched_tier_queue_delete(sched_tier_t *t, uint32_t slot, const tier_key_t *key)
{
    if (t->n_del == SCHED_DEL_BATCH)
        s_flush_tier(t->self, t);
    t->del_slots[t->n_del] = slot;
    memcpy(t->del_keys[t->n_del], key->b, TIER_KEY_BYTES);
    t->n_del++;
}

void sched_tiers_flush(sched_t *self)
{
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++)
        if (self->tierset.tiers[i].n_del)
            s_flush_tier(self, &self->tierset.tiers[i]);
}

/* ---- the leader fence ---- */

static void s_fence_done(void *arg, bus_reply_t *r)
{
    sched_tier_t *t = arg;
    /* Best effort, not retried; the tier is served anyway (docs/SECURITY.md rule
     * 5): one the tier refuses for its token (an older epoch, another secret)
     * means it refuses every token this leader mints too; one lost in transit
     * leaves it unfenced until this leader's first token verifies there.
     * Counted in tier_errors. */
    if (r->status.code != kvtier_StatusCode_STATUS_OK) {
        t->self->g.tier_errors++;
        bus_warn(S_LOG,
                 "tier %s: raising the leader fence (epoch %" PRIu64 ") failed: %s (not retried: "
                 "the tier is fenced when this leader's first token verifies there)",
                 t->cfg.name, t->self->cfg.leader_epoch, r->status.message);
    }
}

/* An empty DeleteSlots under this leader's admin token: it deletes nothing, and
 * the tier actor, once it verifies the token, refuses every token of an older
 * leader from then on (tier_actor_auth.c). Sent before the inventory's first page
 * on the same connection, so the tier has raised it by the time this leader
 * serves from its index: a deposed leader that resumes changes nothing there,
 * whether or not this leader has sent the tier anything since. Without the
 * secret there are no tokens and nothing to raise. */
static void s_raise_fence(sched_t *self, sched_tier_t *t)
{
    if (!self->seal)
        return;
    kvtier_Envelope *env = self->tierset.tio.env;
    bus_env_init(env, kvtier_Envelope_delete_slots_req_tag, self->cfg.node_name);
    env->body.delete_slots_req.tier_id = t->cfg.tier_id;
    env->body.delete_slots_req.epoch = t->epoch;
    bus_arrays_t arr = {.payload = s_admin_token(self, t, NULL, NULL, 0)};
    kvtier_Status st;
    if (arr.payload.len == 0 ||
        bus_client_send(t->client, env, &arr, NULL, 0, 0, NULL, s_fence_done, t, NULL, &st) < 0)
        bus_warn(S_LOG, "tier %s: the leader fence (epoch %" PRIu64 ") was not sent", t->cfg.name,
                 self->cfg.leader_epoch);
}

/* ---- headers ---- */

static void s_put_header_done(void *arg, bus_reply_t *r)
{
    sched_header_cb_t *cb = arg;
    uint32_t written = 0;
    if (r->env && r->env->which_body == kvtier_Envelope_put_header_rep_tag)
        written = r->env->body.put_header_rep.written;
    cb->done(cb, &r->status, written);
}

int sched_tier_put_headers(sched_t *self, sched_tier_t *t, const sched_pool_t *pool,
                           const sched_list_t *entries, const sched_headers_t *h, kvtier_Status *st)
{
    if (!t->client || t->state != SCHED_TIER_UP)
        return bus_status_set(st, kvtier_StatusCode_STATUS_UNAVAILABLE, "tier %s is down",
                              t->cfg.name);
    uint32_t i = 0;
    sched_iter_t it;
    for (sched_entry_t *e = sched_list_first(pool, entries, &it); e;
         e = sched_list_next(pool, &it)) {
        if (e->kind & (SCHED_ENTRY_SKIP | SCHED_ENTRY_PIN))
            continue;
        self->tierset.tio.slots[i] = e->slot;
        memcpy(self->tierset.tio.keys[i], e->key.b, TIER_KEY_BYTES);
        self->tierset.tio.sizes[i] = h->sizes ? h->sizes[i] : h->block_bytes;
        /* side arrays of a slot being written: nobody reads them until it serves */
        t->sizes[e->slot] = (uint32_t)self->tierset.tio.sizes[i];
        t->checksums[e->slot] = h->checksums[i];
        i++;
    }
    kvtier_Envelope *env = self->tierset.tio.env;
    bus_env_init(env, kvtier_Envelope_put_header_req_tag, self->cfg.node_name);
    kvtier_PutHeaderRequest *ph = &env->body.put_header_req;
    ph->tier_id = t->cfg.tier_id;
    sched_strcpy(ph->instance_id, sizeof ph->instance_id, h->instance_id);
    ph->state = kvtier_LocationState_LOCATION_SERVING;
    ph->ttl_deadline_ms = h->deadline_wall_ms;
    ph->epoch = t->epoch;
    uint32_t cap = self->cfg.max_batch;
    bus_arrays_t arr = {
        .slots = {.v = self->tierset.tio.slots, .n = i, .cap = cap},
        .keys = {.keys = self->tierset.tio.keys, .n = i, .cap = cap},
        .sizes = {.v = self->tierset.tio.sizes, .n = i, .cap = cap},
        .checksums = {.v = (uint64_t *)h->checksums, .n = i, .cap = cap},
        .payload = s_admin_token(self, t, self->tierset.tio.slots, self->tierset.tio.sizes, i),
    };
    return bus_client_send(t->client, env, &arr, NULL, 0, 0, NULL, s_put_header_done, h->cb, NULL,
                           st);
}

static void s_reput_done(void *arg, bus_reply_t *r)
{
    sched_tier_t *t = arg;
    if (r->status.code != kvtier_StatusCode_STATUS_OK) {
        t->self->g.tier_errors++;
        bus_warn(S_LOG, "tier %s: header rewrite failed: %s", t->cfg.name, r->status.message);
    }
}

void sched_tier_reput_header(sched_t *self, sched_tier_t *t, const char *id, uint32_t number,
                             uint32_t slot, const tier_key_t *key)
{
    tier_slot_info_t info;
    if (!id || !t->client || t->state != SCHED_TIER_UP ||
        tier_slots_peek(t->slots, number, key, &info) < 0)
        return;
    int64_t now = sched_now();
    uint64_t wall = 0;
    if (info.deadline_ms)
        wall = (uint64_t)sched_wall_ms() +
               (info.deadline_ms > (uint64_t)now ? info.deadline_ms - (uint64_t)now : 0);
    uint64_t s = slot, size = t->sizes[slot], ck = t->checksums[slot];
    uint8_t k[1][BUS_KEY_LEN];
    memcpy(k[0], key->b, TIER_KEY_BYTES);
    kvtier_Envelope *env = self->tierset.tio.env;
    bus_env_init(env, kvtier_Envelope_put_header_req_tag, self->cfg.node_name);
    kvtier_PutHeaderRequest *ph = &env->body.put_header_req;
    ph->tier_id = t->cfg.tier_id;
    sched_strcpy(ph->instance_id, sizeof ph->instance_id, id);
    ph->state = kvtier_LocationState_LOCATION_SERVING;
    ph->ttl_deadline_ms = wall;
    ph->epoch = t->epoch;
    bus_arrays_t arr = {
        .slots = {.v = &s, .n = 1, .cap = 1},
        .keys = {.keys = k, .n = 1, .cap = 1},
        .sizes = {.v = &size, .n = 1, .cap = 1},
        .checksums = {.v = &ck, .n = 1, .cap = 1},
        .payload = s_admin_token(self, t, &s, &size, 1),
    };
    kvtier_Status st;
    if (bus_client_send(t->client, env, &arr, NULL, 0, 0, NULL, s_reput_done, t, NULL, &st) < 0)
        bus_warn(S_LOG, "tier %s: header rewrite not sent: %s", t->cfg.name, st.message);
}

/* Slots per header rewrite of a touch (its admin token lists them). */
#define S_REPUT_CHUNK 256u

void sched_tier_reput_deadlines(sched_t *self, sched_tier_t *t, const char *id,
                                uint64_t deadline_ms, const uint32_t *slots, const tier_key_t *keys,
                                const uint32_t *which, uint32_t n)
{
    if (!id || !t->client || t->state != SCHED_TIER_UP || n == 0)
        return;
    int64_t now = sched_now();
    uint64_t wall =
        (uint64_t)sched_wall_ms() + (deadline_ms > (uint64_t)now ? deadline_ms - (uint64_t)now : 0);
    uint64_t s[S_REPUT_CHUNK], size[S_REPUT_CHUNK], ck[S_REPUT_CHUNK];
    uint8_t k[S_REPUT_CHUNK][BUS_KEY_LEN];
    /* the admin token's entries: the scratch holds max(max_batch, a delete batch) */
    uint32_t chunk = self->cfg.max_batch > SCHED_DEL_BATCH ? self->cfg.max_batch : SCHED_DEL_BATCH;
    if (chunk > S_REPUT_CHUNK)
        chunk = S_REPUT_CHUNK;
    /* puts come first: a touch's rewrites use at most half of what the tier
     * client leaves free; the rest is not rewritten (counted, logged) */
    bus_client_stats_t cs;
    bus_client_stats(t->client, &cs);
    uint32_t max_if = self->cfg.max_pending_puts + 64;
    uint32_t budget = cs.in_flight < max_if ? (max_if - cs.in_flight) / 2 : 0;
    for (uint32_t base = 0; base < n; base += chunk) {
        uint32_t m = n - base < chunk ? n - base : chunk;
        if (budget == 0) {
            self->g.touch_rewrites_skipped += n - base;
            bus_warn(S_LOG, "tier %s: %u touched headers not rewritten (the tier client is busy)",
                     t->cfg.name, n - base);
            return;
        }
        budget--;
        for (uint32_t i = 0; i < m; i++) {
            s[i] = slots[base + i];
            size[i] = t->sizes[s[i]];
            ck[i] = t->checksums[s[i]];
            memcpy(k[i], keys[which[base + i]].b, TIER_KEY_BYTES);
        }
        kvtier_Envelope *env = self->tierset.tio.env;
        bus_env_init(env, kvtier_Envelope_put_header_req_tag, self->cfg.node_name);
        kvtier_PutHeaderRequest *ph = &env->body.put_header_req;
        ph->tier_id = t->cfg.tier_id;
        sched_strcpy(ph->instance_id, sizeof ph->instance_id, id);
        ph->state = kvtier_LocationState_LOCATION_SERVING;
        ph->ttl_deadline_ms = wall;
        ph->epoch = t->epoch;
        ph->rewrite = true; /* only where still SERVING with this key and checksum */
        bus_arrays_t arr = {
            .slots = {.v = s, .n = m, .cap = m},
            .keys = {.keys = k, .n = m, .cap = m},
            .sizes = {.v = size, .n = m, .cap = m},
            .checksums = {.v = ck, .n = m, .cap = m},
            .payload = s_admin_token(self, t, s, size, m),
        };
        kvtier_Status st;
        if (bus_client_send(t->client, env, &arr, NULL, 0, 0, NULL, s_reput_done, t, NULL, &st) <
            0) {
            self->g.tier_errors++;
            self->g.touch_rewrites_skipped += n - base;
            bus_warn(S_LOG, "tier %s: %u touched headers not rewritten: %s", t->cfg.name, n - base,
                     st.message);
            return;
        }
    }
}

/* ---- inventory ---- */

static void s_stream_send(sched_t *self, sched_inv_stream_t *s);

/* A new leader serves puts as soon as no tier is left RECOVERING (reads are
 * served from the start: a tier being read serves what it has adopted so far).
 * Logged once per scheduler, from its start: what a failover costs after the
 * election (docs/OPERATIONS.md). */
static void s_serving(sched_t *self)
{
    uint32_t up = 0;
    uint64_t blocks = 0;
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++) {
        const sched_tier_t *t = &self->tierset.tiers[i];
        if (t->state == SCHED_TIER_RECOVERING)
            return;
        up += t->state == SCHED_TIER_UP;
        blocks += t->state == SCHED_TIER_UP ? t->inv_adopted : 0;
    }
    if (self->serving_logged || up == 0)
        return;
    self->serving_logged = true;
    bus_info(
        S_LOG,
        "leader epoch %" PRIu64 ": serving after %" PRId64 " ms of rebuild (%u of %u tiers up, "
        "%" PRIu64 " blocks adopted)",
        self->cfg.leader_epoch, sched_now() - self->started_ms, up, self->tierset.n_tiers, blocks);
}

static void s_inventory_finish(sched_t *self, sched_tier_t *t, bool complete)
{
    t->inv_active = false;
    t->state = SCHED_TIER_UP;
    for (uint32_t i = 0; i < SCHED_INV_MAX_IN_FLIGHT; i++)
        if (!t->inv[i].in_flight) /* else its completion releases it */
            s_stream_release(&t->inv[i]);
    int64_t ms = sched_now() - t->inv_started_ms;
    if (complete)
        bus_info(S_LOG,
                 "tier %s up (epoch %" PRIu64 ", %s): %" PRIu64
                 " blocks adopted from its inventory (%" PRIu64 " pages, %" PRId64 " ms)",
                 t->cfg.name, t->epoch, t->endpoint, t->inv_adopted, t->inv_pages, ms);
    else
        bus_warn(S_LOG,
                 "tier %s up (epoch %" PRIu64 ") with a partial index: an inventory page "
                 "failed %u times in a row after %" PRIu64 " blocks",
                 t->cfg.name, t->epoch, SCHED_INV_TRIES, t->inv_adopted);
    s_serving(self);
}

static void s_stream_failed(sched_t *self, sched_inv_stream_t *s, const char *why)
{
    sched_tier_t *t = s->t;
    s->failures++;
    t->inv_failures++;
    bus_warn(S_LOG, "tier %s: inventory page at slot %" PRIu64 " failed (%u/%u): %s", t->cfg.name,
             s->cursor, s->failures, SCHED_INV_TRIES, why);
    if (s->failures >= SCHED_INV_TRIES)
        s_inventory_finish(self, t, false);
    /* else the next tick sends the page again */
}

/* Slot-header instance number of an inventory entry ("#xxxxxxxx" or an id). */
static uint32_t s_entry_instance(const char *id)
{
    if (id[0] == '#' && strlen(id) == 9) {
        uint32_t v = 0;
        for (int i = 1; i < 9; i++) {
            char c = id[i];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0)
                return sched_instance_number(id);
            v = v << 4 | (uint32_t)d;
        }
        return v;
    }
    return sched_instance_number(id);
}

/* One reported slot header, entry or record alike (instance: its number). */
static void s_adopt(sched_t *self, sched_tier_t *t, const bus_inv_record_t *e, int64_t now,
                    int64_t wall)
{
    if (e->state != kvtier_LocationState_LOCATION_SERVING)
        return;
    tier_key_t key;
    memcpy(key.b, e->key, TIER_KEY_BYTES);
    if (e->slot >= t->cfg.capacity || e->size == 0 || e->size > t->cfg.slot_size) {
        bus_warn(S_LOG,
                 "tier %s: inventory entry at slot %" PRIu64 " (size %" PRIu64
                 ") does not fit the tier; ignored",
                 t->cfg.name, e->slot, e->size);
        return;
    }
    uint32_t number = e->instance;
    uint64_t deadline = 0;
    if (e->ttl_deadline_ms) {
        if ((int64_t)e->ttl_deadline_ms <= wall) {
            sched_tier_queue_delete(t, (uint32_t)e->slot, &key);
            self->g.expirations++;
            return;
        }
        deadline = (uint64_t)now + (e->ttl_deadline_ms - (uint64_t)wall);
    }
    if (number == 0)
        return;
    int rc = tier_slots_adopt(t->slots, number, &key, (uint32_t)e->slot, deadline, (uint64_t)now);
    if (rc == 0) {
        t->sizes[e->slot] = (uint32_t)e->size;
        t->checksums[e->slot] = e->checksum;
        t->inv_adopted++;
        self->g.adopted++;
        sched_ev_stored(self, number, t->cfg.tier_id, t->medium, e->size, &key, 1);
    } else if (rc == TIER_SLOTS_EDUP) {
        sched_tier_queue_delete(t, (uint32_t)e->slot, &key); /* a second copy of one key */
    }
}

/* Adopts a page's headers inside the stream's window: -1 (st says why, nothing
 * adopted) when the page is not what was asked. Entries past the window are an
 * actor that predates windows running on: they belong to a later window. */
static int s_adopt_page(sched_t *self, sched_inv_stream_t *s, const kvtier_InventoryReply *ir,
                        kvtier_Status *st)
{
    sched_tier_t *t = s->t;
    if (ir->has_tier && ir->tier.epoch != 0 && ir->tier.epoch != t->epoch)
        return bus_status_set(st, kvtier_StatusCode_STATUS_UNAVAILABLE,
                              "the page comes from epoch %" PRIu64 ", the tier was announced "
                              "with epoch %" PRIu64 " (the actor restarted: its new membership "
                              "restarts the rebuild)",
                              ir->tier.epoch, t->epoch);
    uint32_t n = 0;
    const bus_blob_t *rec = &s->arr.payload;
    if (rec->len && ir->entries_count)
        return bus_status_set(st, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                              "InventoryReply carries both entries and records");
    if (rec->len && bus_inv_records_count(rec->len, self->cfg.inventory_page, &n, st) < 0)
        return -1;
    for (uint32_t i = 0; i < n; i++) { /* records were asked for this window only */
        uint64_t slot = bus_inv_record_slot(rec->data, i);
        if (slot < s->cursor || slot >= s->end)
            return bus_status_set(st, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                                  "InventoryReply.records[%u] is slot %" PRIu64
                                  ", outside the window [%" PRIu64 ", %" PRIu64 ") asked for",
                                  i, slot, s->cursor, s->end);
    }
    bus_inv_record_t r;
    int64_t now = sched_now(), wall = sched_wall_ms();
    for (uint32_t i = 0; i < n; i++) {
        bus_inv_record_get(rec->data, i, &r);
        s_adopt(self, t, &r, now, wall);
    }
    for (pb_size_t i = 0; i < ir->entries_count; i++) {
        const kvtier_InventoryEntry *e = &ir->entries[i];
        if (e->slot < s->cursor || e->slot >= s->end)
            continue;
        r = (bus_inv_record_t){.slot = e->slot,
                               .size = e->size,
                               .checksum = e->checksum,
                               .ttl_deadline_ms = e->ttl_deadline_ms,
                               .instance = s_entry_instance(e->instance_id),
                               .state = (uint32_t)e->state};
        memcpy(r.key, e->key, TIER_KEY_BYTES);
        s_adopt(self, t, &r, now, wall);
    }
    return 0;
}

/* Hands the stream the next window, or leaves it idle when none is left; the
 * rebuild is complete when every stream is idle. */
static void s_stream_next(sched_t *self, sched_inv_stream_t *s)
{
    sched_tier_t *t = s->t;
    uint64_t cap = t->cfg.capacity;
    s->busy = false;
    s->failures = 0;
    if (t->inv_next < cap) {
        uint64_t w = self->cfg.inventory_entries ? cap : self->cfg.inventory_page;
        s->cursor = t->inv_next;
        s->end = cap - s->cursor > w ? s->cursor + w : cap;
        t->inv_next = s->end;
        s->busy = true;
        s_stream_send(self, s);
        return;
    }
    for (uint32_t i = 0; i < SCHED_INV_MAX_IN_FLIGHT; i++)
        if (t->inv[i].busy)
            return;
    s_inventory_finish(self, t, true);
}

static void s_inventory_done(void *arg, bus_reply_t *r)
{
    sched_inv_stream_t *s = arg;
    sched_tier_t *t = s->t;
    sched_t *self = t->self;
    s->in_flight = false;
    if (!t->inv_active) { /* the tier changed, or the rebuild ended, meanwhile */
        s_stream_release(s);
        return;
    }
    if (r->status.code != kvtier_StatusCode_STATUS_OK || !r->env ||
        r->env->which_body != kvtier_Envelope_inventory_rep_tag) {
        s_stream_failed(self, s, r->status.message);
        return;
    }
    const kvtier_InventoryReply *ir = &r->env->body.inventory_rep;
    kvtier_Status st;
    if (s_adopt_page(self, s, ir, &st) < 0) {
        s_stream_failed(self, s, st.message);
        return;
    }
    t->inv_pages++;
    if (ir->done || ir->next_cursor >= s->end) {
        s_stream_next(self, s);
        return;
    }
    if (ir->next_cursor <= s->cursor) {
        s_stream_failed(self, s, "next_cursor did not advance");
        return;
    }
    s->cursor = ir->next_cursor;
    s->failures = 0;
    s_stream_send(self, s);
}

static void s_stream_send(sched_t *self, sched_inv_stream_t *s)
{
    sched_tier_t *t = s->t;
    kvtier_Envelope *env = self->tierset.tio.env;
    bus_env_init(env, kvtier_Envelope_inventory_req_tag, self->cfg.node_name);
    kvtier_InventoryRequest *q = &env->body.inventory_req;
    q->tier_id = t->cfg.tier_id;
    q->cursor = s->cursor;
    uint32_t page = self->cfg.inventory_page;
    s->arr = (bus_arrays_t){
        .payload = {.data = s->records, .cap = s->records ? page * BUS_INVENTORY_RECORD_BYTES : 0}};
    if (self->cfg.inventory_entries) {
        q->max_entries = SCHED_INV_PAGE;
    } else {
        q->max_entries = page;
        q->end = s->end;
        q->records = true;
    }
    kvtier_Status st;
    if (bus_client_send(t->client, env, NULL, NULL, 0, 0, &s->arr, s_inventory_done, s, NULL, &st) <
        0) {
        s_stream_failed(self, s, st.message);
        return;
    }
    s->in_flight = true;
}

/* Starts reading t's inventory: cfg.inventory_in_flight windows at once (one with
 * cfg.inventory_entries). -1 when the records buffers cannot be had. */
static int s_inventory_start(sched_t *self, sched_tier_t *t)
{
    uint32_t n = self->cfg.inventory_entries ? 1 : self->cfg.inventory_in_flight;
    t->inv_active = true;
    t->inv_next = 0;
    t->inv_failures = 0;
    t->inv_adopted = 0;
    t->inv_pages = 0;
    t->inv_started_ms = sched_now();
    for (uint32_t i = 0; i < n; i++) {
        sched_inv_stream_t *s = &t->inv[i];
        *s = (sched_inv_stream_t){.t = t};
        if (self->cfg.inventory_entries)
            continue;
        s->records = malloc((size_t)self->cfg.inventory_page * BUS_INVENTORY_RECORD_BYTES);
        if (!s->records) {
            bus_error(S_LOG, "tier %s: no memory for %u inventory pages of %u records", t->cfg.name,
                      n, self->cfg.inventory_page);
            s_inventory_finish(self, t, false);
            return -1;
        }
    }
    for (uint32_t i = 0; i < n && t->inv_active; i++)
        if (!t->inv[i].busy)
            s_stream_next(self, &t->inv[i]);
    return 0;
}

/* The tick's retry: every window whose page failed is asked again. */
static void s_inventory_resume(sched_t *self, sched_tier_t *t)
{
    for (uint32_t i = 0; i < SCHED_INV_MAX_IN_FLIGHT && t->inv_active; i++)
        if (t->inv[i].busy && !t->inv[i].in_flight)
            s_stream_send(self, &t->inv[i]);
}

/* ---- membership ---- */

static void s_tier_down(sched_t *self, sched_tier_t *t, const char *why)
{
    if (t->state == SCHED_TIER_DOWN && !t->client)
        return;
    s_client_close(self, t, why);
    self->g.deletes_dropped += t->n_del;
    t->n_del = 0;
    (void)s_engine_reset(self, t, t->cfg.capacity);
    t->state = SCHED_TIER_DOWN;
    t->inv_active = false;
    /* every block it held is gone: one TierChanged, no removal per block */
    sched_ev_tier(self, t->cfg.tier_id, t->cfg.name, t->medium, false, t->cfg.capacity,
                  t->cfg.slot_size, t->epoch);
    bus_warn(S_LOG, "tier %s down (%s): its locations are dropped from the index", t->cfg.name,
             why);
}

static bool s_info_ok(const sched_tier_t *t, const kvtier_TierInfo *in)
{
    const char *bad = !in->endpoint[0] ? "no endpoint"
                      : in->capacity_slots < 1 || in->capacity_slots > SCHED_MAX_CAPACITY
                          ? "capacity"
                      : in->slot_bytes < 1 || in->slot_bytes > UINT32_MAX ? "slot size"
                                                                          : NULL;
    if (bad)
        bus_warn(S_LOG, "tier %s: membership UP ignored: bad %s", t->cfg.name, bad);
    return bad == NULL;
}

/* Bounded by the nanopb options, so the copies always fit. */
_Static_assert(sizeof((sched_tier_t *)0)->cuda_ipc_handle ==
                   sizeof((kvtier_TierInfo *)0)->cuda_ipc_handle.bytes,
               "sched_tier_t.cuda_ipc_handle holds TierInfo.cuda_ipc_handle");
_Static_assert(sizeof((sched_tier_t *)0)->gpu_uuid == sizeof((kvtier_TierInfo *)0)->gpu_uuid.bytes,
               "sched_tier_t.gpu_uuid holds TierInfo.gpu_uuid");
static void s_copy_device_access(sched_tier_t *t, const kvtier_TierInfo *in)
{
    t->cuda_ipc_handle_len = in->cuda_ipc_handle.size;
    memcpy(t->cuda_ipc_handle, in->cuda_ipc_handle.bytes, in->cuda_ipc_handle.size);
    t->gpu_uuid_len = in->gpu_uuid.size;
    memcpy(t->gpu_uuid, in->gpu_uuid.bytes, in->gpu_uuid.size);
    t->slot_stride = in->slot_stride;
}

static void s_tier_up(sched_t *self, sched_tier_t *t, const kvtier_TierInfo *in)
{
    if (!s_info_ok(t, in))
        return;
    sched_strcpy(t->host, sizeof t->host, in->host);
    sched_strcpy(t->shm, sizeof t->shm, in->shm);
    sched_strcpy(t->ucx_address, sizeof t->ucx_address, in->ucx_address);
    s_copy_device_access(t, in);
    bool same = t->state != SCHED_TIER_DOWN && t->epoch == in->epoch &&
                strcmp(t->endpoint, in->endpoint) == 0 && t->cfg.capacity == in->capacity_slots &&
                t->cfg.slot_size == in->slot_bytes;
    if (same)
        return;
    s_client_close(self, t, "the tier actor changed (new epoch, endpoint or geometry)");
    self->g.deletes_dropped += t->n_del;
    t->n_del = 0;
    if (t->state != SCHED_TIER_DOWN) /* the old actor's blocks are gone */
        sched_ev_tier(self, t->cfg.tier_id, t->cfg.name, t->medium, false, t->cfg.capacity,
                      t->cfg.slot_size, t->epoch);
    bool fresh = t->state == SCHED_TIER_DOWN && s_engine_fresh(t, in->capacity_slots);
    t->state = SCHED_TIER_DOWN;
    if (fresh)
        t->gen++; /* as a reset: whatever was made before is stale */
    else if (s_engine_reset(self, t, in->capacity_slots) < 0)
        return;
    t->cfg.slot_size = in->slot_bytes;
    t->epoch = in->epoch;
    sched_strcpy(t->endpoint, sizeof t->endpoint, in->endpoint);
    if (s_client_open(self, t) < 0) {
        bus_error(S_LOG, "tier %s: cannot open a client to %s", t->cfg.name, t->endpoint);
        return;
    }
    t->state = SCHED_TIER_RECOVERING;
    sched_ev_tier(self, t->cfg.tier_id, t->cfg.name, t->medium, true, t->cfg.capacity,
                  t->cfg.slot_size, t->epoch);
    bus_info(S_LOG,
             "tier %s at %s (epoch %" PRIu64 ", %" PRIu64 " slots of %" PRIu64
             " bytes): reading its inventory",
             t->cfg.name, t->endpoint, t->epoch, t->cfg.capacity, t->cfg.slot_size);
    s_raise_fence(self, t);
    (void)s_inventory_start(self, t);
}

/* ---- pools (issue 9 §3) ---- */

const char *sched_tier_pool_name(const sched_t *self, const sched_tier_t *t)
{
    return t->cfg.pool ? self->cfg.pools[t->cfg.pool - 1].name : "";
}

/* A member leaves its slot: its blocks out of the index (as a tier going DOWN),
 * then the slot is vacant (no name, no drain, a one-slot engine). */
static void s_member_leave(sched_t *self, sched_tier_t *t, const char *why)
{
    if (!t->cfg.name[0])
        return;
    s_tier_down(self, t, why);
    bus_info(S_LOG, "pool %s: member %s (tier id %u) left: %" PRIu64 " blocks dropped with it",
             sched_tier_pool_name(self, t), t->cfg.name, t->cfg.tier_id, t->dropped);
    (void)s_engine_reset(self, t, 1);
    t->cfg.name[0] = '\0';
    t->endpoint[0] = '\0';
    t->epoch = 0;
    t->drain = kvtier_TierDrain_TIER_DRAIN_NONE;
    t->drain_moved = 0;
    t->hits = 0;
    t->dropped = 0;
}

static void s_member_change(sched_t *self, sched_tier_t *t, const kvtier_MembershipChange change,
                            const kvtier_TierInfo *in)
{
    const char *pool = sched_tier_pool_name(self, t);
    if (in->pool[0] && strcmp(in->pool, pool) != 0) {
        bus_warn(S_LOG,
                 "membership change for tier id %u names pool '%s', the id is pool %s's: "
                 "ignored",
                 in->tier_id, in->pool, pool);
        return;
    }
    if (change == kvtier_MembershipChange_MEMBERSHIP_CHANGE_REMOVED) {
        if (in->name[0] && strcmp(in->name, t->cfg.name) != 0)
            return; /* a member that is not (any more) the slot's */
        s_member_leave(self, t, "the member deregistered");
        return;
    }
    if (!in->name[0]) {
        bus_warn(S_LOG, "pool %s: a member without a name (tier id %u) ignored", pool, in->tier_id);
        return;
    }
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++) {
        const sched_tier_t *o = &self->tierset.tiers[i];
        if (o != t && !strcmp(o->cfg.name, in->name)) {
            bus_warn(S_LOG,
                     "pool %s: member %s (tier id %u) ignored: tier id %u already has that name",
                     pool, in->name, in->tier_id, o->cfg.tier_id);
            return;
        }
    }
    if (t->cfg.name[0] && strcmp(t->cfg.name, in->name) != 0)
        s_member_leave(self, t, "another member took its id");
    if (!t->cfg.name[0]) {
        sched_strcpy(t->cfg.name, sizeof t->cfg.name, in->name);
        bus_info(S_LOG, "pool %s: member %s joined as tier id %u (%" PRIu64 " slots)", pool,
                 in->name, in->tier_id, in->capacity_slots);
    }
    s_tier_up(self, t, in);
}

void sched_tier_membership(sched_t *self, const kvtier_TierMembershipRequest *m)
{
    const kvtier_TierInfo *in = &m->tier;
    if (!m->has_tier || in->tier_id < 1 || in->tier_id > self->tierset.n_tiers) {
        bus_warn(S_LOG, "membership change for unknown tier id %u ignored",
                 m->has_tier ? in->tier_id : 0);
        return;
    }
    sched_tier_t *t = &self->tierset.tiers[in->tier_id - 1];
    if (t->cfg.pool) {
        s_member_change(self, t, m->change, in);
        return;
    }
    if (in->name[0] && strcmp(in->name, t->cfg.name) != 0) {
        bus_warn(S_LOG,
                 "membership change for tier id %u names '%s', the deployment says '%s': "
                 "ignored",
                 in->tier_id, in->name, t->cfg.name);
        return;
    }
    switch (m->change) {
    case kvtier_MembershipChange_MEMBERSHIP_CHANGE_ADDED:
    case kvtier_MembershipChange_MEMBERSHIP_CHANGE_UPDATED:
        s_tier_up(self, t, in);
        break;
    case kvtier_MembershipChange_MEMBERSHIP_CHANGE_REMOVED:
        s_tier_down(self, t, "the tier actor deregistered");
        break;
    default:
        bus_warn(S_LOG, "membership change %d ignored", (int)m->change);
        break;
    }
}

/* ---- tick ---- */

void sched_tiers_tick(sched_t *self, int64_t now)
{
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++) {
        sched_tier_t *t = &self->tierset.tiers[i];
        if (t->client)
            bus_client_dispatch(t->client, 0); /* deadlines of tier requests */
        size_t n = 0;
        if (t->state != SCHED_TIER_DOWN &&
            tier_slots_expire(t->slots, (uint64_t)now, self->tierset.tio.victims,
                              SCHED_EXPIRE_BATCH, &n) == 0) {
            for (size_t v = 0; v < n; v++) {
                sched_tier_queue_delete(t, self->tierset.tio.victims[v].slot,
                                        &self->tierset.tio.victims[v].key);
                sched_tier_victim(self, t, &self->tierset.tio.victims[v]);
            }
            self->g.expirations += n;
        }
        if (t->client && t->inv_active)
            s_inventory_resume(self, t);
    }
}

/* ---- identity ---- */

void sched_tier_info(sched_t *self, const sched_tier_t *t, kvtier_TierInfo *out)
{
    memset(out, 0, sizeof *out);
    tier_slots_stats_t ts;
    tier_slots_stats(t->slots, &ts);
    out->tier_id = t->cfg.tier_id;
    sched_strcpy(out->name, sizeof out->name, t->cfg.name);
    out->kind = (kvtier_TierKind)tier_kind_wire(t->cfg.kind);
    sched_strcpy(out->kind_name, sizeof out->kind_name, t->cfg.kind);
    sched_strcpy(out->endpoint, sizeof out->endpoint, t->endpoint);
    sched_strcpy(out->host, sizeof out->host, t->host);
    sched_strcpy(out->shm, sizeof out->shm, t->shm);
    sched_strcpy(out->ucx_address, sizeof out->ucx_address, t->ucx_address);
    out->cuda_ipc_handle.size = (pb_size_t)t->cuda_ipc_handle_len;
    memcpy(out->cuda_ipc_handle.bytes, t->cuda_ipc_handle, t->cuda_ipc_handle_len);
    out->gpu_uuid.size = (pb_size_t)t->gpu_uuid_len;
    memcpy(out->gpu_uuid.bytes, t->gpu_uuid, t->gpu_uuid_len);
    out->slot_stride = t->slot_stride;
    out->epoch = t->epoch;
    out->capacity_slots = t->cfg.capacity;
    out->slot_bytes = t->cfg.slot_size;
    out->used_slots = ts.used;
    out->up = t->state == SCHED_TIER_UP; /* recovering: not yet writable */
    out->drain = (kvtier_TierDrain)t->drain;
    sched_strcpy(out->pool, sizeof out->pool, sched_tier_pool_name(self, t));
}

void sched_tier_token(const sched_tier_t *t, bus_token_tier_t *out)
{
    memset(out, 0, sizeof *out);
    out->tier_id = t->cfg.tier_id;
    out->slot_size = t->cfg.slot_size;
    out->epoch = t->epoch;
    sched_strcpy(out->endpoint, sizeof out->endpoint, t->endpoint);
    sched_strcpy(out->shm, sizeof out->shm, t->shm);
    sched_strcpy(out->host, sizeof out->host, t->host);
}
