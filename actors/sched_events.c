/* sched_events.c — records of the scheduler's changes, flushed to the publisher
 * as numbered EventBatches (sched_events.h has the contract). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "bus_log.h"
#include "sched_events.h"
#include "sched_int.h"
#include "tier_mem.h"

#define S_LOG "sched"
#define S_PUSH_HWM 1024 /* default cfg.events_queue */

static const char *const s_topic[SCHED_EV_KINDS] = {"stored", "removed", "moved",  "lookup",
                                                    "tier",   "leader",  "cleared"};

uint32_t sched_ev_medium(uint32_t wire_kind)
{
    switch (wire_kind) {
    case kvtier_TierKind_TIER_KIND_HOST:
        return kvtier_Medium_MEDIUM_CPU;
    case kvtier_TierKind_TIER_KIND_NVME:
        return kvtier_Medium_MEDIUM_DISK;
    case kvtier_TierKind_TIER_KIND_GPU:
        return kvtier_Medium_MEDIUM_GPU;
    case kvtier_TierKind_TIER_KIND_REMOTE:
        return kvtier_Medium_MEDIUM_REMOTE;
    default:
        return kvtier_Medium_MEDIUM_UNSPECIFIED;
    }
}

/* ---- lifetime ---- */

int sched_events_init(sched_t *self, const char *endpoint, uint32_t queue, uint64_t epoch,
                      uint64_t previous_epoch,
                      const char *leader, sched_name_fn name_of, sched_tokens_fn tokens_of)
{
    sched_events_t *ev = &self->events;
    *ev = (sched_events_t){.name_of = name_of, .tokens_of = tokens_of, .epoch = epoch, .next = 1};
    if (!endpoint || !endpoint[0])
        return 0;
    ev->rec = tier_mem_calloc(SCHED_EV_RECORDS, sizeof *ev->rec);
    ev->keys = tier_mem_calloc(SCHED_EV_KEYS, sizeof *ev->keys);
    ev->hits = tier_mem_calloc(2 * SCHED_EV_TIER_HITS * SCHED_EV_RECORDS, sizeof *ev->hits);
    ev->events = tier_mem_calloc(SCHED_EV_RECORDS, sizeof *ev->events);
    ev->tokens = tier_mem_calloc(SCHED_EV_TOKENS, sizeof *ev->tokens);
    zsock_t *push = zsock_new(ZMQ_PUSH);
    if (!ev->rec || !ev->keys || !ev->hits || !ev->events || !ev->tokens || !push) {
        zsock_destroy(&push);
        sched_events_fini(self);
        return -1;
    }
    zsock_set_sndhwm(push, queue ? (int)queue : S_PUSH_HWM);
    zsock_set_linger(push, 0);
    if (zsock_connect(push, "%s", endpoint) < 0) {
        bus_error(S_LOG, "events: cannot connect to the publisher's input '%s'", endpoint);
        zsock_destroy(&push);
        sched_events_fini(self);
        return -1;
    }
    ev->push = push;
    /* a new leader's first batch (sequences of this term start here) */
    sched_ev_rec_t *r = &ev->rec[ev->n_rec++];
    *r = (sched_ev_rec_t){
        .kind = SCHED_EV_LEADER,
        .a = epoch,
        .b = previous_epoch,
        .ts_us = (uint64_t)zclock_time() * 1000};
    snprintf(r->text, sizeof r->text, "%s", leader ? leader : "");
    ev->records++;
    return 0;
}

void sched_events_fini(sched_t *self)
{
    sched_events_t *ev = &self->events;
    zsock_t *push = ev->push;
    zsock_destroy(&push);
    ev->push = NULL;
    tier_mem_free(ev->rec);
    tier_mem_free(ev->keys);
    tier_mem_free(ev->hits);
    tier_mem_free(ev->events);
    tier_mem_free(ev->tokens);
    ev->tokens = NULL;
    ev->rec = NULL;
    ev->keys = NULL;
    ev->hits = NULL;
    ev->events = NULL;
    ev->n_rec = ev->n_keys = ev->n_hits = ev->n_tok = 0;
}

bool sched_events_on(const sched_t *self)
{
    return self->events.push != NULL;
}

/* ---- records ---- */

static uint64_t s_now_us(void)
{
    return (uint64_t)zclock_time() * 1000;
}

/* A record like *proto with room for n keys: the last one when it only differs
 * in its keys and its keys end the pool, else a new one (flushing first when
 * the records or keys would not fit). NULL: events off, or n beyond the pool. */
static sched_ev_rec_t *s_record_new(sched_t *self, const sched_ev_rec_t *proto);

static sched_ev_rec_t *s_record(sched_t *self, const sched_ev_rec_t *proto, uint32_t n)
{
    sched_events_t *ev = &self->events;
    if (!ev->push || n > SCHED_EV_KEYS)
        return NULL;
    if (ev->n_rec > 0) {
        sched_ev_rec_t *last = &ev->rec[ev->n_rec - 1];
        if (last->kind == proto->kind && proto->kind != SCHED_EV_LOOKUP &&
            last->number == proto->number && last->tier == proto->tier &&
            last->tier2 == proto->tier2 && last->reason == proto->reason &&
            last->medium == proto->medium && last->medium2 == proto->medium2 &&
            last->a == proto->a && last->key_off + last->n_keys == ev->n_keys &&
            ev->n_keys + n <= SCHED_EV_KEYS && !last->has_parent && last->n_tok == 0)
            return last;
    }
    if (ev->n_rec == SCHED_EV_RECORDS || ev->n_keys + n > SCHED_EV_KEYS ||
        ev->n_hits + SCHED_EV_TIER_HITS > SCHED_EV_TIER_HITS * SCHED_EV_RECORDS)
        sched_events_flush(self);
    return s_record_new(self, proto);
}

/* A new record like *proto (the caller made room). */
static sched_ev_rec_t *s_record_new(sched_t *self, const sched_ev_rec_t *proto)
{
    sched_events_t *ev = &self->events;
    sched_ev_rec_t *r = &ev->rec[ev->n_rec++];
    *r = *proto;
    r->key_off = ev->n_keys;
    r->n_keys = 0;
    r->hits_off = ev->n_hits;
    r->n_hits = 0;
    r->tok_off = ev->n_tok;
    r->n_tok = 0;
    r->ts_us = s_now_us();
    ev->records++;
    return r;
}

static void s_keys(sched_events_t *ev, sched_ev_rec_t *r, const tier_key_t *keys, uint32_t n)
{
    memcpy(&ev->keys[ev->n_keys], keys, (size_t)n * sizeof *keys);
    ev->n_keys += n;
    r->n_keys += n;
}

void sched_ev_stored(sched_t *self, uint32_t number, uint32_t tier_id, uint32_t medium,
                     uint64_t block_bytes, const tier_key_t *keys, uint32_t n)
{
    sched_ev_rec_t p = {.kind = SCHED_EV_STORED,
                        .number = number,
                        .tier = tier_id,
                        .medium = (uint8_t)medium,
                        .a = block_bytes};
    sched_ev_rec_t *r = n ? s_record(self, &p, n) : NULL;
    if (r)
        s_keys(&self->events, r, keys, n);
}

/* Does key k extend record r (same store, r's keys end the pool, r's last key is
 * k's parent, and token ids present on both or neither, contiguous)? */
static bool s_chain_extends(const sched_events_t *ev, const sched_ev_rec_t *r,
                            const sched_ev_rec_t *proto, const tier_key_t *parent, uint32_t n_tok)
{
    if (r->kind != SCHED_EV_STORED || r->number != proto->number || r->tier != proto->tier ||
        r->medium != proto->medium || r->a != proto->a || r->n_keys == 0 ||
        r->key_off + r->n_keys != ev->n_keys || ev->n_keys >= SCHED_EV_KEYS)
        return false;
    if (!parent || memcmp(&ev->keys[ev->n_keys - 1], parent, sizeof *parent) != 0)
        return false;
    if ((r->n_tok == 0) != (n_tok == 0))
        return false;
    return n_tok == 0 ||
           (r->tok_off + r->n_tok == ev->n_tok && ev->n_tok + n_tok <= SCHED_EV_TOKENS);
}

void sched_ev_stored_chain(sched_t *self, uint32_t number, uint32_t tier_id, uint32_t medium,
                           uint64_t block_bytes, const tier_key_t *key, const tier_key_t *parent,
                           const uint32_t *tokens, uint32_t n_tok)
{
    sched_events_t *ev = &self->events;
    if (!ev->push)
        return;
    if (n_tok > SCHED_EV_TOKENS) { /* more than the whole pool: kept without them */
        ev->tokens_dropped++;
        n_tok = 0;
    }
    sched_ev_rec_t p = {.kind = SCHED_EV_STORED,
                        .number = number,
                        .tier = tier_id,
                        .medium = (uint8_t)medium,
                        .a = block_bytes};
    sched_ev_rec_t *r = ev->n_rec ? &ev->rec[ev->n_rec - 1] : NULL;
    if (!r || !s_chain_extends(ev, r, &p, parent, n_tok)) {
        if (ev->n_rec == SCHED_EV_RECORDS || ev->n_keys + 1 > SCHED_EV_KEYS ||
            ev->n_tok + n_tok > SCHED_EV_TOKENS)
            sched_events_flush(self);
        r = s_record_new(self, &p);
        if (parent) {
            r->has_parent = true;
            r->parent = *parent;
        }
    }
    s_keys(ev, r, key, 1);
    if (n_tok) {
        memcpy(&ev->tokens[ev->n_tok], tokens, (size_t)n_tok * sizeof *tokens);
        ev->n_tok += n_tok;
        r->n_tok += n_tok;
    }
}

void sched_ev_removed(sched_t *self, uint32_t number, uint32_t tier_id, uint32_t medium,
                      uint32_t reason, const tier_key_t *keys, uint32_t n)
{
    sched_ev_rec_t p = {.kind = SCHED_EV_REMOVED,
                        .number = number,
                        .tier = tier_id,
                        .medium = (uint8_t)medium,
                        .reason = (uint8_t)reason};
    sched_ev_rec_t *r = n ? s_record(self, &p, n) : NULL;
    if (r)
        s_keys(&self->events, r, keys, n);
}

void sched_ev_moved(sched_t *self, uint32_t number, uint32_t src_tier_id, uint32_t src_medium,
                    uint32_t dst_tier_id, uint32_t dst_medium, uint32_t reason,
                    const tier_key_t *keys, uint32_t n)
{
    sched_ev_rec_t p = {.kind = SCHED_EV_MOVED,
                        .reason = (uint8_t)reason,
                        .number = number,
                        .tier = src_tier_id,
                        .tier2 = dst_tier_id,
                        .medium = (uint8_t)src_medium,
                        .medium2 = (uint8_t)dst_medium};
    sched_ev_rec_t *r = n ? s_record(self, &p, n) : NULL;
    if (r)
        s_keys(&self->events, r, keys, n);
}

void sched_ev_lookup(sched_t *self, uint32_t number, const char *request_id, uint32_t mode,
                     uint32_t hit_count, uint32_t head_hits, const tier_key_t *keys, uint32_t n,
                     const uint32_t (*tier_hits)[2], uint32_t n_tiers)
{
    sched_ev_rec_t p = {.kind = SCHED_EV_LOOKUP,
                        .number = number,
                        .tier2 = mode,
                        .a = hit_count,
                        .b = head_hits,
                        .c = n};
    /* a lookup longer than the key pool keeps its first SCHED_EV_KEYS keys; its
     * key_count says how many it had */
    if (n > SCHED_EV_KEYS)
        n = SCHED_EV_KEYS;
    sched_ev_rec_t *r = s_record(self, &p, n);
    if (!r)
        return;
    sched_events_t *ev = &self->events;
    snprintf(r->text, sizeof r->text, "%s", request_id ? request_id : "");
    s_keys(ev, r, keys, n);
    for (uint32_t i = 0; i < n_tiers && r->n_hits < SCHED_EV_TIER_HITS; i++) {
        ev->hits[2 * ev->n_hits] = tier_hits[i][0];
        ev->hits[2 * ev->n_hits + 1] = tier_hits[i][1];
        ev->n_hits++;
        r->n_hits++;
    }
}

void sched_ev_tier(sched_t *self, uint32_t tier_id, const char *name, uint32_t medium, bool up,
                   uint64_t capacity_slots, uint64_t slot_bytes, uint64_t epoch)
{
    sched_ev_rec_t p = {.kind = SCHED_EV_TIER,
                        .tier = tier_id,
                        .medium = (uint8_t)medium,
                        .reason = up,
                        .a = capacity_slots,
                        .b = slot_bytes,
                        .c = epoch};
    sched_ev_rec_t *r = s_record(self, &p, 0);
    if (r)
        snprintf(r->text, sizeof r->text, "%s", name ? name : "");
}

void sched_ev_cleared(sched_t *self)
{
    sched_ev_rec_t p = {.kind = SCHED_EV_CLEARED};
    (void)s_record(self, &p, 0);
}

/* ---- flush ---- */

/* The protobuf event of record r. */
static void s_event(sched_t *self, const sched_ev_rec_t *r, bus_event_t *out)
{
    sched_events_t *ev = &self->events;
    memset(out, 0, sizeof *out);
    kvtier_Event *e = &out->ev;
    e->ts_us = r->ts_us;
    out->keys = (bus_keys_t){
        .keys = (uint8_t(*)[BUS_KEY_LEN])ev->keys[r->key_off].b, .n = r->n_keys, .cap = r->n_keys};
    switch (r->kind) {
    case SCHED_EV_STORED:
        e->which_kind = kvtier_Event_block_stored_tag;
        e->kind.block_stored.tier_id = r->tier;
        e->kind.block_stored.block_bytes = r->a;
        e->kind.block_stored.medium = (kvtier_Medium)r->medium;
        e->kind.block_stored.tokens_per_block = ev->tokens_of ? ev->tokens_of(self, r->number) : 0;
        if (r->has_parent) {
            e->kind.block_stored.parent_key.size = BUS_KEY_LEN;
            memcpy(e->kind.block_stored.parent_key.bytes, r->parent.b, BUS_KEY_LEN);
        }
        out->tokens = (bus_u32s_t){.v = ev->tokens + r->tok_off, .n = r->n_tok, .cap = r->n_tok};
        break;
    case SCHED_EV_REMOVED:
        e->which_kind = kvtier_Event_block_removed_tag;
        e->kind.block_removed.tier_id = r->tier;
        e->kind.block_removed.reason = (kvtier_RemoveReason)r->reason;
        e->kind.block_removed.medium = (kvtier_Medium)r->medium;
        break;
    case SCHED_EV_MOVED:
        e->which_kind = kvtier_Event_block_moved_tag;
        e->kind.block_moved.src_tier_id = r->tier;
        e->kind.block_moved.dst_tier_id = r->tier2;
        e->kind.block_moved.src_medium = (kvtier_Medium)r->medium;
        e->kind.block_moved.dst_medium = (kvtier_Medium)r->medium2;
        e->kind.block_moved.reason = (kvtier_MoveReason)r->reason;
        e->kind.block_moved.tokens_per_block = ev->tokens_of ? ev->tokens_of(self, r->number) : 0;
        break;
    case SCHED_EV_LOOKUP: {
        e->which_kind = kvtier_Event_cache_get_tag;
        kvtier_CacheGet *g = &e->kind.cache_get;
        snprintf(g->request_id, sizeof g->request_id, "%s", r->text);
        g->mode = (kvtier_LookupMode)r->tier2;
        g->hit_count = (uint32_t)r->a;
        g->head_hits = (uint32_t)r->b;
        g->key_count = (uint32_t)r->c; /* keys holds the first min(key_count, 16384) */
        for (uint32_t i = 0; i < r->n_hits && i < 32; i++) {
            g->tier_hits[i].tier_id = ev->hits[2 * (r->hits_off + i)];
            g->tier_hits[i].hits = ev->hits[2 * (r->hits_off + i) + 1];
        }
        g->tier_hits_count = (pb_size_t)(r->n_hits < 32 ? r->n_hits : 32);
        break;
    }
    case SCHED_EV_TIER: {
        e->which_kind = kvtier_Event_tier_changed_tag;
        kvtier_TierChanged *t = &e->kind.tier_changed;
        t->tier_id = r->tier;
        t->up = r->reason != 0;
        t->capacity_slots = r->a;
        t->slot_bytes = r->b;
        t->epoch = r->c;
        t->medium = (kvtier_Medium)r->medium;
        snprintf(t->name, sizeof t->name, "%.*s", (int)sizeof t->name - 1, r->text);
        break;
    }
    case SCHED_EV_LEADER: {
        e->which_kind = kvtier_Event_leader_changed_tag;
        kvtier_LeaderChanged *l = &e->kind.leader_changed;
        snprintf(l->node_id, sizeof l->node_id, "%s", self->cfg.node_name);
        snprintf(l->endpoint, sizeof l->endpoint, "%s", r->text);
        l->epoch = r->a;
        l->previous_epoch = r->b;
        break;
    }
    default:
        e->which_kind = kvtier_Event_all_cleared_tag;
        break;
    }
}

/* Sends [topic][seq][payload] without waiting; false when the input is full. */
static bool s_hand_over(sched_events_t *ev, const char *topic, uint64_t seq, zframe_t **payload)
{
    zsock_t *push = ev->push;
    uint8_t be[8];
    bus_events_seq_put(be, seq);
    void *h = zsock_resolve(push);
    if (zmq_send(h, topic, strlen(topic), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        zframe_destroy(payload);
        return false;
    }
    /* once the first frame is in, the others of the message are accepted */
    (void)zmq_send(h, be, sizeof be, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    bool ok = zframe_send(payload, push, ZFRAME_DONTWAIT) == 0;
    zframe_destroy(payload);
    return ok;
}

void sched_events_flush(sched_t *self)
{
    sched_events_t *ev = &self->events;
    if (!ev->push || ev->n_rec == 0)
        return;
    /* a batch is a run of consecutive records of one (kind, instance): batches
     * keep the order things happened in (a block stored, then removed, is never
     * seen removed first) */
    for (uint32_t i = 0, k; i < ev->n_rec; i = k) {
        const sched_ev_rec_t *first = &ev->rec[i];
        uint32_t n = 0;
        for (k = i;
             k < ev->n_rec && ev->rec[k].kind == first->kind && ev->rec[k].number == first->number;
             k++)
            s_event(self, &ev->rec[k], &ev->events[n++]);
        char topic[SCHED_NAME_MAX + 96];
        const char *kind = s_topic[first->kind];
        bool per_instance = first->kind <= SCHED_EV_LOOKUP;
        const char *id = per_instance && ev->name_of ? ev->name_of(self, first->number) : NULL;
        char anon[16];
        if (per_instance && !id) {
            snprintf(anon, sizeof anon, "#%08x", first->number);
            id = anon;
        }
        if (per_instance)
            snprintf(topic, sizeof topic, "%s/%.64s", kind, id);
        else
            snprintf(topic, sizeof topic, "%s", kind);
        for (uint32_t e = 0; e < n && per_instance; e++)
            snprintf(ev->events[e].ev.instance_id, sizeof ev->events[e].ev.instance_id, "%s", id);
        kvtier_EventBatch batch = {.epoch = ev->epoch};
        snprintf(batch.source, sizeof batch.source, "%s", self->cfg.node_name);
        uint64_t seq = ev->epoch << BUS_EVENTS_SEQ_SHIFT | ev->next++;
        zframe_t *payload = NULL;
        kvtier_Status st;
        if (bus_events_encode(&batch, ev->events, n, &payload, &st) < 0) {
            bus_warn(S_LOG, "events: batch %" PRIu64 " not encoded: %s", seq, st.message);
            ev->dropped++;
            continue;
        }
        if (s_hand_over(ev, topic, seq, &payload)) {
            ev->handed++;
            ev->events_out += n;
        } else {
            ev->dropped++;
        }
    }
    ev->n_rec = ev->n_keys = ev->n_hits = ev->n_tok = 0;
}
