/* sched_fake_tier.c — see sched_fake_tier.h. Serves the tier plane subset the
 * scheduler uses; anything else is answered INVALID_ARGUMENT. */
#include "sched_fake_tier.h"

#include <czmq.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_inventory.h"
#include "bus_server.h"
#include "tier_key.h"

struct sched_fake_tier {
    zactor_t *actor;
    pthread_mutex_t mu;
    uint32_t tier_id;
    uint64_t capacity;
    sched_fake_slot_t *slots;
    bool mute;
    size_t oversize; /* WriteSlots / ReadSlots: answered with a frame this large */
    sched_fake_inv_t inv;
    uint32_t inv_pages;     /* since the last set_inventory */
    uint64_t records_pages; /* Inventory requests that asked for records */
    uint64_t max_asked;     /* the largest max_entries asked for */
    sched_fake_tier_stats_t stats;
    char endpoint[256];
};

typedef struct {
    sched_fake_tier_t *ft;
    bus_server_t *server;
    bus_arrays_t *arr;
    bus_request_t req;
    kvtier_Envelope rep;
    uint8_t *records; /* one page of Inventory records, and a byte more */
} s_ctx_t;

static void s_put_header(s_ctx_t *c)
{
    sched_fake_tier_t *ft = c->ft;
    const kvtier_PutHeaderRequest *r = &c->req.env.body.put_header_req;
    bus_arrays_t *a = c->arr;
    uint32_t n = a->slots.n;
    if (a->keys.n != n || a->sizes.n != n || (a->checksums.n && a->checksums.n != n)) {
        bus_server_reply_error(c->server, c->req.routing_id, c->req.env.corr_id,
                               kvtier_StatusCode_STATUS_INVALID_ARGUMENT, "arrays differ");
        return;
    }
    uint32_t written = 0;
    pthread_mutex_lock(&ft->mu);
    ft->stats.put_headers++;
    ft->stats.last_epoch = r->epoch;
    for (uint32_t i = 0; i < n && a->slots.v[i] < ft->capacity; i++, written++) {
        sched_fake_slot_t *s = &ft->slots[a->slots.v[i]];
        s->serving = r->state == kvtier_LocationState_LOCATION_SERVING;
        memcpy(s->key, a->keys.keys[i], 16);
        snprintf(s->instance_id, sizeof s->instance_id, "%s", r->instance_id);
        s->size = a->sizes.v[i];
        s->checksum = a->checksums.n ? a->checksums.v[i] : 0;
        s->deadline_ms = r->ttl_deadline_ms;
    }
    ft->stats.headers += written;
    pthread_mutex_unlock(&ft->mu);
    bus_env_init_reply(&c->rep, &c->req.env, kvtier_Envelope_put_header_rep_tag, "fake-tier");
    c->rep.body.put_header_rep.written = written;
    bus_server_reply(c->server, c->req.routing_id, &c->rep, NULL, NULL, 0, NULL);
}

static void s_delete(s_ctx_t *c)
{
    sched_fake_tier_t *ft = c->ft;
    bus_arrays_t *a = c->arr;
    uint32_t deleted = 0;
    pthread_mutex_lock(&ft->mu);
    ft->stats.deletes++;
    ft->stats.last_epoch = c->req.env.body.delete_slots_req.epoch;
    for (uint32_t i = 0; i < a->slots.n; i++) {
        if (a->slots.v[i] >= ft->capacity)
            continue;
        sched_fake_slot_t *s = &ft->slots[a->slots.v[i]];
        if (!s->serving || (a->keys.n > i && memcmp(s->key, a->keys.keys[i], 16) != 0))
            continue;
        s->serving = false;
        deleted++;
    }
    ft->stats.slots_deleted += deleted;
    pthread_mutex_unlock(&ft->mu);
    bus_env_init_reply(&c->rep, &c->req.env, kvtier_Envelope_delete_slots_rep_tag, "fake-tier");
    c->rep.body.delete_slots_rep.deleted = deleted;
    bus_server_reply(c->server, c->req.routing_id, &c->rep, NULL, NULL, 0, NULL);
}

/* The slot-header number of an instance id, as the tier actor stores it. */
static uint32_t s_instance_number(const char *id)
{
    if (id[0] == '#' && strlen(id) == 9)
        return (uint32_t)strtoul(id + 1, NULL, 16);
    return tier_instance_hash(id);
}

static void s_inventory(s_ctx_t *c)
{
    sched_fake_tier_t *ft = c->ft;
    const kvtier_InventoryRequest *r = &c->req.env.body.inventory_req;
    bus_env_init_reply(&c->rep, &c->req.env, kvtier_Envelope_inventory_rep_tag, "fake-tier");
    kvtier_InventoryReply *ir = &c->rep.body.inventory_rep;
    pthread_mutex_lock(&ft->mu);
    ft->stats.inventories++;
    uint32_t page = ++ft->inv_pages;
    const sched_fake_inv_t *inv = &ft->inv;
    if (inv->on_page)
        inv->on_page(inv->arg, page, ft->slots, ft->capacity);
    if (inv->mute_from && r->cursor >= inv->mute_from) {
        pthread_mutex_unlock(&ft->mu);
        return;
    }
    bool records = r->records && !inv->legacy;
    ft->records_pages += records;
    if (r->max_entries > ft->max_asked)
        ft->max_asked = r->max_entries;
    uint32_t max = records ? (r->max_entries ? r->max_entries : BUS_MAX_INVENTORY_RECORDS)
                   : r->max_entries && r->max_entries < 128 ? r->max_entries
                                                            : 128;
    uint64_t end = !inv->legacy && r->end && r->end < ft->capacity ? r->end : ft->capacity;
    bool bad = page >= inv->bad_from && page < inv->bad_from + inv->bad_count;
    if ((records && max > BUS_MAX_INVENTORY_RECORDS) ||
        (bad && inv->bad == SCHED_FAKE_BAD_STATUS)) {
        pthread_mutex_unlock(&ft->mu);
        bus_server_reply_error(c->server, c->req.routing_id, c->req.env.corr_id,
                               kvtier_StatusCode_STATUS_UNAVAILABLE, "fake tier: page %u refused",
                               page);
        return;
    }
    ir->has_tier = true;
    ir->tier.tier_id = ft->tier_id;
    ir->tier.capacity_slots = ft->capacity;
    ir->tier.epoch = bad && inv->bad == SCHED_FAKE_BAD_EPOCH ? inv->epoch + 1 : inv->epoch;
    uint32_t n = 0;
    uint64_t slot = r->cursor;
    for (; slot < end && n < max; slot++) {
        const sched_fake_slot_t *s = &ft->slots[slot];
        if (!s->serving)
            continue;
        if (records) {
            bus_inv_record_t rec = {.slot = slot,
                                    .size = s->size,
                                    .checksum = s->checksum,
                                    .ttl_deadline_ms = s->deadline_ms,
                                    .instance = s_instance_number(s->instance_id),
                                    .state = kvtier_LocationState_LOCATION_SERVING};
            memcpy(rec.key, s->key, 16);
            bus_inv_record_put(c->records, n++, &rec);
            continue;
        }
        kvtier_InventoryEntry *e = &ir->entries[ir->entries_count++];
        n++;
        e->slot = slot;
        memcpy(e->key, s->key, 16);
        snprintf(e->instance_id, sizeof e->instance_id, "%s", s->instance_id);
        e->size = s->size;
        e->checksum = s->checksum;
        e->ttl_deadline_ms = s->deadline_ms;
        e->state = kvtier_LocationState_LOCATION_SERVING;
    }
    ir->next_cursor = slot;
    ir->done = slot >= end;
    uint32_t len = records ? n * BUS_INVENTORY_RECORD_BYTES : 0;
    if (bad && records && len && inv->bad == SCHED_FAKE_BAD_LENGTH)
        len--; /* the last record cut short */
    if (bad && records && n && inv->bad == SCHED_FAKE_BAD_OUTSIDE) {
        bus_inv_record_t rec;
        bus_inv_record_get(c->records, n - 1, &rec);
        rec.slot = end;
        bus_inv_record_put(c->records, n - 1, &rec);
    }
    pthread_mutex_unlock(&ft->mu);
    bus_arrays_t arr = {.payload = {.data = c->records, .len = len, .cap = len}};
    bus_server_reply(c->server, c->req.routing_id, &c->rep, &arr, NULL, 0, NULL);
}

static void s_handle(s_ctx_t *c)
{
    pthread_mutex_lock(&c->ft->mu);
    c->ft->stats.requests++;
    bool mute = c->ft->mute;
    pthread_mutex_unlock(&c->ft->mu);
    if (mute)
        return;
    switch (c->req.env.which_body) {
    case kvtier_Envelope_put_header_req_tag:
        s_put_header(c);
        break;
    case kvtier_Envelope_delete_slots_req_tag:
        s_delete(c);
        break;
    case kvtier_Envelope_inventory_req_tag:
        s_inventory(c);
        break;
    case kvtier_Envelope_write_slots_req_tag:
    case kvtier_Envelope_read_slots_req_tag: {
        pthread_mutex_lock(&c->ft->mu);
        size_t big = c->ft->oversize;
        pthread_mutex_unlock(&c->ft->mu);
        if (big) { /* [routing id][an OK reply's frame 0][`big` zero bytes], raw: the
                      bus would refuse a payload frame on a WriteSlots reply */
            bool write = c->req.env.which_body == kvtier_Envelope_write_slots_req_tag;
            bus_env_init_reply(&c->rep, &c->req.env,
                               write ? kvtier_Envelope_write_slots_rep_tag
                                     : kvtier_Envelope_read_slots_rep_tag,
                               "fake-tier");
            zframe_t *f0 = NULL;
            kvtier_Status st;
            zmsg_t *m = zmsg_new();
            if (bus_env_encode(&c->rep, NULL, &f0, &st) == 0) {
                zframe_t *rid = zframe_dup((zframe_t *)c->req.routing_id);
                zmsg_append(m, &rid);
                zmsg_append(m, &f0);
                zframe_t *fb = zframe_new(NULL, big);
                zmsg_append(m, &fb);
                zmsg_send(&m, bus_server_sock(c->server));
            }
            zmsg_destroy(&m);
            break;
        }
    }
        /* fall through */
    default:
        bus_server_reply_error(c->server, c->req.routing_id, c->req.env.corr_id,
                               kvtier_StatusCode_STATUS_INVALID_ARGUMENT, "fake tier: %s",
                               bus_body_name(c->req.env.which_body));
        break;
    }
}

static void s_actor(zsock_t *pipe, void *args)
{
    s_ctx_t c = {.ft = args};
    c.server = bus_server_new("tcp://127.0.0.1:*", "fake-tier");
    c.arr = bus_arrays_new(BUS_MAX_ARRAY, 64u << 10); /* a WriteSlots token */
    c.records = malloc((size_t)BUS_MAX_INVENTORY_RECORDS * BUS_INVENTORY_RECORD_BYTES + 1);
    if (c.server)
        snprintf(c.ft->endpoint, sizeof c.ft->endpoint, "%s", bus_server_endpoint(c.server));
    zsock_signal(pipe, 0);
    zpoller_t *poller =
        c.server && c.arr && c.records ? zpoller_new(pipe, bus_server_sock(c.server), NULL) : NULL;
    while (poller) {
        void *which = zpoller_wait(poller, -1);
        if (which == pipe || !which)
            break; /* $TERM (or interrupted) */
        while (bus_server_recv(c.server, 0, &c.req, c.arr) == 1) {
            s_handle(&c);
            bus_request_reset(&c.req);
        }
    }
    zpoller_destroy(&poller);
    bus_request_reset(&c.req);
    bus_arrays_destroy(&c.arr);
    free(c.records);
    bus_server_destroy(&c.server);
}

sched_fake_tier_t *sched_fake_tier_new(uint32_t tier_id, uint64_t capacity)
{
    sched_fake_tier_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    pthread_mutex_init(&self->mu, NULL);
    self->tier_id = tier_id;
    self->capacity = capacity;
    self->slots = calloc(capacity, sizeof *self->slots);
    if (self->slots)
        self->actor = zactor_new(s_actor, self);
    if (!self->actor || !self->endpoint[0]) {
        sched_fake_tier_destroy(&self);
        return NULL;
    }
    return self;
}

void sched_fake_tier_destroy(sched_fake_tier_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sched_fake_tier_t *self = *self_p;
    zactor_destroy(&self->actor);
    pthread_mutex_destroy(&self->mu);
    free(self->slots);
    free(self);
    *self_p = NULL;
}

const char *sched_fake_tier_endpoint(const sched_fake_tier_t *self)
{
    return self->endpoint;
}

void sched_fake_tier_set_inventory(sched_fake_tier_t *self, const sched_fake_inv_t *inv)
{
    pthread_mutex_lock(&self->mu);
    self->inv = *inv;
    self->inv_pages = 0;
    pthread_mutex_unlock(&self->mu);
}

void sched_fake_tier_inventory_asks(sched_fake_tier_t *self, uint64_t *records_pages,
                                    uint64_t *max_entries)
{
    pthread_mutex_lock(&self->mu);
    *records_pages = self->records_pages;
    *max_entries = self->max_asked;
    pthread_mutex_unlock(&self->mu);
}

void sched_fake_tier_set_oversize(sched_fake_tier_t *self, size_t bytes)
{
    pthread_mutex_lock(&self->mu);
    self->oversize = bytes;
    pthread_mutex_unlock(&self->mu);
}

void sched_fake_tier_set_mute(sched_fake_tier_t *self, bool mute)
{
    pthread_mutex_lock(&self->mu);
    self->mute = mute;
    pthread_mutex_unlock(&self->mu);
}

int sched_fake_tier_set(sched_fake_tier_t *self, uint64_t slot, const sched_fake_slot_t *h)
{
    if (slot >= self->capacity)
        return -1;
    pthread_mutex_lock(&self->mu);
    if (h)
        self->slots[slot] = *h;
    else
        memset(&self->slots[slot], 0, sizeof self->slots[slot]);
    pthread_mutex_unlock(&self->mu);
    return 0;
}

int sched_fake_tier_get(sched_fake_tier_t *self, uint64_t slot, sched_fake_slot_t *out)
{
    if (slot >= self->capacity)
        return -1;
    pthread_mutex_lock(&self->mu);
    *out = self->slots[slot];
    pthread_mutex_unlock(&self->mu);
    return 0;
}

void sched_fake_tier_clear(sched_fake_tier_t *self)
{
    pthread_mutex_lock(&self->mu);
    memset(self->slots, 0, self->capacity * sizeof *self->slots);
    pthread_mutex_unlock(&self->mu);
}

void sched_fake_tier_stats(sched_fake_tier_t *self, sched_fake_tier_stats_t *out)
{
    pthread_mutex_lock(&self->mu);
    *out = self->stats;
    pthread_mutex_unlock(&self->mu);
}

uint32_t sched_fake_tier_count_key(sched_fake_tier_t *self, const uint8_t key[16])
{
    uint32_t n = 0;
    pthread_mutex_lock(&self->mu);
    for (uint64_t i = 0; i < self->capacity; i++)
        n += self->slots[i].serving && memcmp(self->slots[i].key, key, 16) == 0;
    pthread_mutex_unlock(&self->mu);
    return n;
}
