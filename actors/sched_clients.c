/* sched_clients.c — the scheduler's meta-plane clients (issue 12 §3): one entry per
 * connection (ZeroMQ routing id), so that one client's flood is bounded by what
 * that client may hold, not by what all of them may: at most max_clients active
 * clients, at most max_requests_per_client open requests each. Past a bound the
 * answer is OVERLOADED (never BUSY: libkvtier retries BUSY inside prepare_put,
 * and a flood answered with retries would grow). Memory is fixed at start: a
 * table of max_clients entries and its hash map; an entry whose client has no open
 * request and has been idle for client_idle_ms is reused for a new one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

typedef struct {
    const sched_t *self;
    const uint8_t *rid;
    size_t len;
} s_key_t;

static bool s_eq(const void *ctx, uint32_t idx)
{
    const s_key_t *k = ctx;
    const sched_client_t *c = &k->self->requests.clients[idx];
    return c->used && c->rid_len == k->len && memcmp(c->rid, k->rid, k->len) == 0;
}

static uint64_t s_hash(const sched_t *self, const uint8_t *rid, size_t len)
{
    uint64_t h = self->hash_seed ^ 0xcbf29ce484222325ull; /* FNV-1a, seeded */
    for (size_t i = 0; i < len; i++)
        h = (h ^ rid[i]) * 0x100000001b3ull;
    return h;
}

int sched_clients_init(sched_t *self)
{
    self->requests.clients = calloc(self->cfg.max_clients, sizeof *self->requests.clients);
    self->requests.n_clients = 0;
    if (!self->requests.clients)
        return -1;
    return sched_map_init(&self->requests.client_map, self->cfg.max_clients);
}

void sched_clients_fini(sched_t *self)
{
    free(self->requests.clients);
    self->requests.clients = NULL;
    sched_map_fini(&self->requests.client_map);
}

/* An entry to (re)use: a fresh one, else the longest idle with nothing open. */
static uint32_t s_free_entry(sched_t *self, int64_t now)
{
    sched_requests_t *r = &self->requests;
    if (r->n_clients < self->cfg.max_clients)
        return r->n_clients++;
    uint32_t best = SCHED_NONE;
    int64_t oldest = now - (int64_t)self->cfg.client_idle_ms;
    for (uint32_t i = 0; i < r->n_clients; i++) {
        const sched_client_t *c = &r->clients[i];
        if (c->open == 0 && c->last_ms <= oldest) {
            best = i;
            oldest = c->last_ms;
        }
    }
    if (best != SCHED_NONE)
        sched_map_remove(&r->client_map, r->clients[best].hash, best);
    return best;
}

bool sched_client_enter(sched_t *self, sched_call_t *call, int64_t now)
{
    sched_requests_t *r = &self->requests;
    const zframe_t *f = call->req.routing_id;
    size_t len = f ? zframe_size((zframe_t *)f) : 0;
    const uint8_t *rid = f ? zframe_data((zframe_t *)f) : NULL;
    if (len > SCHED_RID_MAX)
        len = SCHED_RID_MAX;
    uint64_t h = s_hash(self, rid, len);
    s_key_t k = {self, rid, len};
    uint32_t i = sched_map_find(&r->client_map, h, s_eq, &k);
    if (i == SCHED_NONE) {
        i = s_free_entry(self, now);
        if (i == SCHED_NONE) {
            self->g.overloaded++;
            sched_reply_error(self, call, kvtier_StatusCode_STATUS_OVERLOADED,
                              "%u clients are active (coordinator.max_clients): this new "
                              "connection is refused until one has been idle for %llu ms; "
                              "back off and retry later",
                              self->cfg.max_clients, (unsigned long long)self->cfg.client_idle_ms);
            return false;
        }
        sched_client_t *c = &r->clients[i];
        memset(c, 0, sizeof *c);
        c->used = true;
        if (len)
            memcpy(c->rid, rid, len);
        c->rid_len = (uint8_t)len;
        c->hash = h;
        sched_map_insert(&r->client_map, h, i);
    }
    r->clients[i].last_ms = now;
    call->client = i;
    return true;
}

void sched_client_request_done(sched_t *self, uint32_t client)
{
    if (client < self->requests.n_clients && self->requests.clients[client].open > 0)
        self->requests.clients[client].open--;
}

uint32_t sched_clients_known(const sched_t *self)
{
    return self->requests.n_clients;
}
