/* sched_fake_tier.c — see sched_fake_tier.h. Serves the tier plane subset the
 * scheduler uses; anything else is answered INVALID_ARGUMENT. */
#include "sched_fake_tier.h"

#include <czmq.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_server.h"

struct sched_fake_tier {
    zactor_t *actor;
    pthread_mutex_t mu;
    uint32_t tier_id;
    uint64_t capacity;
    sched_fake_slot_t *slots;
    bool mute;
    sched_fake_tier_stats_t stats;
    char endpoint[256];
};

typedef struct {
    sched_fake_tier_t *ft;
    bus_server_t *server;
    bus_arrays_t *arr;
    bus_request_t req;
    kvtier_Envelope rep;
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

static void s_inventory(s_ctx_t *c)
{
    sched_fake_tier_t *ft = c->ft;
    const kvtier_InventoryRequest *r = &c->req.env.body.inventory_req;
    bus_env_init_reply(&c->rep, &c->req.env, kvtier_Envelope_inventory_rep_tag, "fake-tier");
    kvtier_InventoryReply *ir = &c->rep.body.inventory_rep;
    uint32_t max = r->max_entries && r->max_entries < 128 ? r->max_entries : 128;
    pthread_mutex_lock(&ft->mu);
    ft->stats.inventories++;
    ir->has_tier = true;
    ir->tier.tier_id = ft->tier_id;
    ir->tier.capacity_slots = ft->capacity;
    uint64_t slot = r->cursor;
    for (; slot < ft->capacity && ir->entries_count < max; slot++) {
        const sched_fake_slot_t *s = &ft->slots[slot];
        if (!s->serving)
            continue;
        kvtier_InventoryEntry *e = &ir->entries[ir->entries_count++];
        e->slot = slot;
        memcpy(e->key, s->key, 16);
        snprintf(e->instance_id, sizeof e->instance_id, "%s", s->instance_id);
        e->size = s->size;
        e->checksum = s->checksum;
        e->ttl_deadline_ms = s->deadline_ms;
        e->state = kvtier_LocationState_LOCATION_SERVING;
    }
    ir->next_cursor = slot;
    ir->done = slot >= ft->capacity;
    pthread_mutex_unlock(&ft->mu);
    bus_server_reply(c->server, c->req.routing_id, &c->rep, NULL, NULL, 0, NULL);
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
    c.arr = bus_arrays_new(BUS_MAX_ARRAY, 0);
    if (c.server)
        snprintf(c.ft->endpoint, sizeof c.ft->endpoint, "%s", bus_server_endpoint(c.server));
    zsock_signal(pipe, 0);
    zpoller_t *poller =
        c.server && c.arr ? zpoller_new(pipe, bus_server_sock(c.server), NULL) : NULL;
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
