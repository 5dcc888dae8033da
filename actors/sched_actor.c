/* sched_actor.c — the scheduler actor's thread: configuration, start-up, the zloop
 * (meta ROUTER, pipe, tier clients, one tick timer), the one switch over request
 * bodies, replies, and the read-only requests (ClusterInfo, Stats, AdminStatus).
 * Owns the actor's lifetime; the state it serves lives in sched_index.c,
 * sched_requests.c and sched_tiers.c. Never blocks: sockets are read without
 * waiting and every tier exchange is asynchronous. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bus_actor.h"
#include "bus_log.h"
#include "sched_acl.h"
#include "sched_int.h"
#include "sched_route.h"
#include "tier_mem.h"
#include "tier_policy.h"

#define S_LOG "sched"
#define S_DRAIN 64 /* requests handled per readable event before timers get a turn */
#define S_VERSION "0.1.0"

/* ---- clocks ---- */

int64_t sched_now(void)
{
    return zclock_mono();
}

int64_t sched_wall_ms(void)
{
    return zclock_time();
}

/* ---- the leader's lease ---- */

bool sched_lease_lapsed(sched_t *self)
{
    if (self->lapsed)
        return true;
    if (!self->cfg.lease_until_ms)
        return false;
    int64_t word = atomic_load(self->cfg.lease_until_ms), now = sched_now();
    if (word == 0)
        return false;
    uint64_t mine = sched_lease_word_epoch(sched_lease_word(self->cfg.leader_epoch, 0));
    int64_t until = sched_lease_word_until(word);
    bool other_term = sched_lease_word_epoch(word) != mine;
    if (!other_term && now <= until)
        return false;
    self->lapsed = true;
    if (other_term) /* coord_elector.c: the bound is another term's (a later one of ours) */
        bus_warn(S_LOG,
                 "%s: leader epoch %" PRIu64 ": the elector's lease bound belongs to another "
                 "term: no longer leader (no more tokens, NOT_LEADER to clients) until stopped",
                 self->cfg.node_name, self->cfg.leader_epoch);
    else if (until == SCHED_LEASE_STEPPED_DOWN) /* coord_elector.c: it stepped down */
        bus_warn(S_LOG,
                 "%s: leader epoch %" PRIu64 ": the elector stepped down: no longer leader (no "
                 "more tokens, NOT_LEADER to clients) until stopped",
                 self->cfg.node_name, self->cfg.leader_epoch);
    else
        bus_warn(S_LOG,
                 "%s: leader epoch %" PRIu64 ": the lease was last confirmed to last until %" PRId64
                 " ms ago: no longer leader (no more tokens, NOT_LEADER to clients) until stopped",
                 self->cfg.node_name, self->cfg.leader_epoch, now - until);
    return true;
}

/* Past the lease nothing that leads is done: reads of this process's own state
 * (ClusterInfo, naming no leader then; Stats, AdminStatus) still answer,
 * everything else is refused. */
static bool s_lease_refuses(sched_t *self, sched_call_t *call)
{
    pb_size_t tag = call->req.env.which_body;
    if (tag == kvtier_Envelope_cluster_info_req_tag || tag == kvtier_Envelope_stats_req_tag ||
        tag == kvtier_Envelope_admin_status_req_tag || !sched_lease_lapsed(self))
        return false;
    if (call->srv == self->internal)
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_UNAVAILABLE,
                          "%s: this scheduler's leader lease has run out (epoch %" PRIu64 ")",
                          bus_body_name(tag), self->cfg.leader_epoch);
    else
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_NOT_LEADER,
                          "%s: coordinator %s is no longer the leader (its lease of epoch %" PRIu64
                          " ran out): ask etcd or the coordinator list for the new one",
                          bus_body_name(tag), self->cfg.node_name, self->cfg.leader_epoch);
    return true;
}

/* ---- configuration ---- */

void sched_config_defaults(sched_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->cluster, sizeof cfg->cluster, "kvtier");
    snprintf(cfg->node_name, sizeof cfg->node_name, "coordinator");
    snprintf(cfg->endpoint, sizeof cfg->endpoint, "tcp://127.0.0.1:*");
    cfg->n_chains = 1;
    snprintf(cfg->chains[0].name, sizeof cfg->chains[0].name, "default");
}

static void s_apply_defaults(sched_config_t *c)
{
    if (!c->pin_lease_ms)
        c->pin_lease_ms = 30000;
    if (!c->write_grace_ms)
        c->write_grace_ms = 30000;
    if (!c->clock_skew_ms)
        c->clock_skew_ms = 5000;
    if (!c->tier_timeout_ms)
        c->tier_timeout_ms = 2000;
    if (!c->inventory_page)
        c->inventory_page = SCHED_INV_PAGE_DEFAULT;
    if (!c->inventory_in_flight)
        c->inventory_in_flight = SCHED_INV_IN_FLIGHT_DEFAULT;
    if (!c->max_batch)
        c->max_batch = BUS_MAX_ARRAY;
    if (!c->max_requests)
        c->max_requests = 65536;
    if (!c->max_instances)
        c->max_instances = 64;
    if (!c->max_pending_puts)
        c->max_pending_puts = 1024;
    if (!c->request_idle_ms) {
        uint64_t m = c->pin_lease_ms > c->write_grace_ms ? c->pin_lease_ms : c->write_grace_ms;
        c->request_idle_ms = 4 * m < 60000 ? 60000 : 4 * m;
    }
    if (!c->max_window_keys)
        c->max_window_keys = 4u << 20;
    if (!c->max_clients)
        c->max_clients = 1024;
    if (!c->max_requests_per_client) { /* a quarter of all, but never below 1024 (or all) */
        uint32_t floor = c->max_requests < 1024 ? c->max_requests : 1024;
        c->max_requests_per_client = c->max_requests / 4 > floor ? c->max_requests / 4 : floor;
    }
    if (!c->client_idle_ms)
        c->client_idle_ms = 60000;
    if (!c->max_connections)
        c->max_connections = c->max_clients + 64;
    if (!c->scan_max)
        c->scan_max = 4096;
    if (!c->delete_delay_ms)
        c->delete_delay_ms = 1000;
    if (!c->max_pending_deletes)
        c->max_pending_deletes = 4096;
    if (!c->reclaim_scan)
        c->reclaim_scan = 8192;
    if (!c->tick_ms) {
        uint64_t m = c->pin_lease_ms;
        if (c->write_grace_ms < m)
            m = c->write_grace_ms;
        if (c->tier_timeout_ms < m)
            m = c->tier_timeout_ms;
        m /= 4;
        c->tick_ms = (uint32_t)(m < 5 ? 5 : m > 250 ? 250 : m);
    }
}

static int s_cfg_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_cfg_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static int s_check_tiers(const sched_config_t *c, char *err, size_t errlen)
{
    if (c->n_tiers < 1 || c->n_tiers > SCHED_MAX_TIERS)
        return s_cfg_fail(err, errlen, "scheduler: %u tiers, expected 1..%u", c->n_tiers,
                          SCHED_MAX_TIERS);
    if (c->n_pools > SCHED_MAX_POOLS)
        return s_cfg_fail(err, errlen, "scheduler: %u pools, at most %u", c->n_pools,
                          SCHED_MAX_POOLS);
    for (uint32_t i = 0; i < c->n_pools; i++) {
        const sched_tier_pool_config_t *p = &c->pools[i];
        if (!p->name[0] || p->max_members < 1 || p->first_id < 1 ||
            p->first_id - 1 + (uint64_t)p->max_members > c->n_tiers)
            return s_cfg_fail(err, errlen,
                              "scheduler: pools[%u] ('%s'): ids %u.. for %u members, %u tiers", i,
                              p->name, p->first_id, p->max_members, c->n_tiers);
        for (uint32_t k = 0; k < p->max_members; k++)
            if (c->tiers[p->first_id - 1 + k].pool != i + 1)
                return s_cfg_fail(err, errlen, "scheduler: tier id %u is not marked pool %s's",
                                  p->first_id + k, p->name);
    }
    for (uint32_t i = 0; i < c->n_tiers; i++) {
        const sched_tier_config_t *t = &c->tiers[i];
        if (t->tier_id != i + 1)
            return s_cfg_fail(err, errlen, "scheduler: tiers[%u].tier_id is %u, expected %u", i,
                              t->tier_id, i + 1);
        if (t->pool > c->n_pools)
            return s_cfg_fail(err, errlen, "scheduler: tiers[%u].pool %u, %u pools", i, t->pool,
                              c->n_pools);
        if (t->pool) {
            const sched_tier_pool_config_t *p = &c->pools[t->pool - 1];
            if (t->tier_id < p->first_id || t->tier_id - p->first_id >= p->max_members)
                return s_cfg_fail(
                    err, errlen, "scheduler: tier id %u is in pool %s, whose ids are %u..%u",
                    t->tier_id, p->name, p->first_id, p->first_id + p->max_members - 1);
        }
        if ((!t->name[0] && !t->pool) || strnlen(t->name, SCHED_NAME_MAX) >= SCHED_NAME_MAX)
            return s_cfg_fail(err, errlen, "scheduler: tiers[%u].name empty or too long", i);
        for (uint32_t j = 0; j < i && t->name[0]; j++)
            if (strcmp(c->tiers[j].name, t->name) == 0)
                return s_cfg_fail(err, errlen, "scheduler: tiers[%u].name '%s' is used twice", i,
                                  t->name);
        if (t->capacity < 1 || t->capacity > SCHED_MAX_CAPACITY)
            return s_cfg_fail(err, errlen, "scheduler: tier %s capacity %" PRIu64 " out of 1..%llu",
                              t->name, t->capacity, SCHED_MAX_CAPACITY);
        if (t->slot_size < 1 || t->slot_size > UINT32_MAX)
            return s_cfg_fail(err, errlen,
                              "scheduler: tier %s slot_size %" PRIu64 " out of 1..4 GiB", t->name,
                              t->slot_size);
        const char *pol = t->policy[0] ? t->policy : "lru";
        if (strnlen(t->policy, SCHED_POLICY_MAX) >= SCHED_POLICY_MAX || !tier_policy_find(pol))
            return s_cfg_fail(err, errlen, "scheduler: tier %s: unknown policy '%.15s'", t->name,
                              pol);
    }
    return 0;
}

/* The tier after position j of chain ch (0: none, j is its last). */
static uint32_t s_next_of(const sched_chain_config_t *ch, uint32_t j)
{
    return j + 1 < ch->n_tiers ? ch->tier_ids[j + 1] : 0;
}

/* Branches may share tiers, but a tier has one next tier (or none) in every
 * chain naming it: demotion and reclaim act on a tier, not on the branch a
 * block was written by, so two chains going on differently after a shared tier
 * would be served by neither (docs/SCHEDULER.md "Branches"). */
static int s_check_next_tiers(const sched_config_t *c, char *err, size_t errlen)
{
    for (uint32_t a = 0; a < c->n_chains; a++)
        for (uint32_t j = 0; j < c->chains[a].n_tiers; j++)
            for (uint32_t b = 0; b < a; b++)
                for (uint32_t k = 0; k < c->chains[b].n_tiers; k++) {
                    if (c->chains[b].tier_ids[k] != c->chains[a].tier_ids[j])
                        continue;
                    uint32_t na = s_next_of(&c->chains[a], j), nb = s_next_of(&c->chains[b], k);
                    if (na != nb)
                        return s_cfg_fail(err, errlen,
                                          "scheduler: tier %u is followed by tier %u in chain "
                                          "%u but by tier %u in chain %u (0: none): a tier has "
                                          "one next tier in every chain naming it",
                                          c->chains[a].tier_ids[j], na, a, nb, b);
                }
    return 0;
}

static int s_check_chains(const sched_config_t *c, char *err, size_t errlen)
{
    if (c->n_chains < 1 || c->n_chains > SCHED_MAX_CHAINS)
        return s_cfg_fail(err, errlen, "scheduler: %u chains, expected 1..%u", c->n_chains,
                          SCHED_MAX_CHAINS);
    for (uint32_t i = 0; i < c->n_chains; i++) {
        const sched_chain_config_t *ch = &c->chains[i];
        if (ch->n_tiers < 1 || ch->n_tiers > SCHED_CHAIN_MAX_TIERS)
            return s_cfg_fail(err, errlen, "scheduler: chain %u has %u tiers, expected 1..%u", i,
                              ch->n_tiers, SCHED_CHAIN_MAX_TIERS);
        if (ch->placement > SCHED_PLACEMENT_INCLUSIVE)
            return s_cfg_fail(err, errlen,
                              "scheduler: chain %u placement %u, expected 0 (default), %d "
                              "(exclusive) or %d (inclusive)",
                              i, ch->placement, SCHED_PLACEMENT_EXCLUSIVE,
                              SCHED_PLACEMENT_INCLUSIVE);
        for (uint32_t j = 0; j < ch->n_tiers; j++) {
            if (ch->tier_ids[j] < 1 || ch->tier_ids[j] > c->n_tiers)
                return s_cfg_fail(err, errlen, "scheduler: chain %u names tier id %u (%u tiers)", i,
                                  ch->tier_ids[j], c->n_tiers);
            /* a pool is one level: all its slots, in order, one after the other */
            uint32_t pool = c->tiers[ch->tier_ids[j] - 1].pool;
            if (pool) {
                const sched_tier_pool_config_t *p = &c->pools[pool - 1];
                uint32_t first = j;
                while (first > 0 && c->tiers[ch->tier_ids[first - 1] - 1].pool == pool)
                    first--;
                if (ch->tier_ids[j] != p->first_id + (j - first) ||
                    (ch->tier_ids[j] == p->first_id + p->max_members - 1) !=
                        (j + 1 == ch->n_tiers || c->tiers[ch->tier_ids[j + 1] - 1].pool != pool))
                    return s_cfg_fail(err, errlen,
                                      "scheduler: chain %u: pool %s's slots (ids %u..%u) are "
                                      "not listed together, in order",
                                      i, p->name, p->first_id, p->first_id + p->max_members - 1);
            }
            for (uint32_t k = 0; k < j; k++)
                if (ch->tier_ids[k] == ch->tier_ids[j])
                    return s_cfg_fail(err, errlen, "scheduler: chain %u names tier %u twice", i,
                                      ch->tier_ids[j]);
        }
    }
    return s_check_next_tiers(c, err, errlen);
}

static int s_check_quotas(const sched_config_t *c, char *err, size_t errlen)
{
    if (c->n_quotas > SCHED_MAX_QUOTAS)
        return s_cfg_fail(err, errlen, "scheduler: %u quotas, at most %u", c->n_quotas,
                          SCHED_MAX_QUOTAS);
    for (uint32_t i = 0; i < c->n_quotas; i++) {
        const sched_quota_config_t *q = &c->quotas[i];
        if (!q->instance[0] || strnlen(q->instance, SCHED_INSTANCE_MAX) >= SCHED_INSTANCE_MAX)
            return s_cfg_fail(err, errlen, "scheduler: quotas[%u].instance empty or too long", i);
        if (!q->max_blocks && !q->max_bytes)
            return s_cfg_fail(err, errlen, "scheduler: quota of '%s' sets no limit", q->instance);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(c->quotas[j].instance, q->instance) == 0)
                return s_cfg_fail(err, errlen, "scheduler: two quotas for instance '%s'",
                                  q->instance);
    }
    return 0;
}

int sched_config_check(const sched_config_t *cfg, char *err, size_t errlen)
{
    if (!cfg)
        return s_cfg_fail(err, errlen, "scheduler: no config");
    sched_config_t c = *cfg;
    s_apply_defaults(&c);
    if (!c.endpoint[0] || strnlen(c.endpoint, SCHED_ENDPOINT_MAX) >= SCHED_ENDPOINT_MAX)
        return s_cfg_fail(err, errlen, "scheduler: no meta endpoint to bind");
    if (strnlen(c.cluster, SCHED_CLUSTER_MAX) >= SCHED_CLUSTER_MAX ||
        strnlen(c.node_name, SCHED_NODE_MAX) >= SCHED_NODE_MAX ||
        strnlen(c.advertised_endpoint, SCHED_ENDPOINT_MAX) >= SCHED_ENDPOINT_MAX ||
        strnlen(c.event_endpoint, SCHED_ENDPOINT_MAX) >= SCHED_ENDPOINT_MAX ||
        strnlen(c.event_replay_endpoint, SCHED_ENDPOINT_MAX) >= SCHED_ENDPOINT_MAX ||
        strnlen(c.vllm_event_endpoint, SCHED_ENDPOINT_MAX) >= SCHED_ENDPOINT_MAX ||
        strnlen(c.vllm_replay_endpoint, SCHED_ENDPOINT_MAX) >= SCHED_ENDPOINT_MAX ||
        strnlen(c.internal_endpoint, SCHED_ENDPOINT_MAX) >= SCHED_ENDPOINT_MAX ||
        strnlen(c.migrator_endpoint, SCHED_ENDPOINT_MAX) >= SCHED_ENDPOINT_MAX ||
        strnlen(c.events_input, SCHED_ENDPOINT_MAX) >= SCHED_ENDPOINT_MAX)
        return s_cfg_fail(err, errlen, "scheduler: a name or endpoint is not NUL-terminated");
    if (c.events_queue > 65536)
        return s_cfg_fail(err, errlen, "scheduler: events_queue %u above 65536 batches",
                          c.events_queue);
    if (c.events_put_tokens > (64u << 20))
        return s_cfg_fail(err, errlen, "scheduler: events_put_tokens %u above 64 Mi words",
                          c.events_put_tokens);
    int rc = s_check_tiers(&c, err, errlen);
    if (rc == 0)
        rc = s_check_chains(&c, err, errlen);
    if (rc == 0)
        rc = sched_route_check(&c, err, errlen);
    if (rc == 0)
        rc = s_check_quotas(&c, err, errlen);
    if (rc < 0)
        return rc;
    if (c.max_batch > BUS_MAX_ARRAY)
        return s_cfg_fail(err, errlen, "scheduler: max_batch %u above %u", c.max_batch,
                          BUS_MAX_ARRAY);
    if (c.max_requests > (1u << 24) || c.max_instances > 65536 || c.max_pending_puts > 60000)
        return s_cfg_fail(err, errlen,
                          "scheduler: max_requests (<= 16 Mi), max_instances "
                          "(<= 65536) or max_pending_puts (<= 60000) too large");
    if (c.max_clients > 65536 || c.max_requests_per_client > c.max_requests)
        return s_cfg_fail(err, errlen,
                          "scheduler: max_clients %u (<= 65536) or max_requests_per_client %u "
                          "(<= max_requests %u) too large",
                          c.max_clients, c.max_requests_per_client, c.max_requests);
    if (c.max_connections > (1u << 20))
        return s_cfg_fail(err, errlen, "scheduler: max_connections %u above 1 Mi",
                          c.max_connections);
    if (c.max_pending_deletes > (1u << 24))
        return s_cfg_fail(err, errlen, "scheduler: max_pending_deletes %u above 16 Mi",
                          c.max_pending_deletes);
    if (c.inventory_page > BUS_MAX_INVENTORY_RECORDS ||
        c.inventory_in_flight > SCHED_INV_MAX_IN_FLIGHT)
        return s_cfg_fail(err, errlen,
                          "scheduler: inventory_page %u (1..%u slots) or inventory_in_flight %u "
                          "(1..%u pages) out of range",
                          c.inventory_page, BUS_MAX_INVENTORY_RECORDS, c.inventory_in_flight,
                          SCHED_INV_MAX_IN_FLIGHT);
    if (c.max_window_keys < c.max_batch)
        return s_cfg_fail(err, errlen, "scheduler: max_window_keys %u below max_batch %u",
                          c.max_window_keys, c.max_batch);
    return 0;
}

/* ---- replies ---- */

kvtier_Envelope *sched_reply_begin(sched_t *self, sched_call_t *call, pb_size_t tag)
{
    bus_env_init_reply(call->rep, &call->req.env, tag, self->cfg.node_name);
    uint32_t cap = self->cfg.max_batch;
    call->rep_arr = (bus_arrays_t){
        .keys = {.keys = call->rep_keys, .cap = cap},
        .mask = {.v = call->rep_mask, .cap = cap},
        .tier_ids = {.v = call->rep_tiers, .cap = cap},
        .payload = {.data = call->payload, .cap = (uint32_t)call->payload_cap},
    };
    return call->rep;
}

void sched_reply(sched_t *self, sched_call_t *call)
{
    (void)self;
    kvtier_Status st;
    if (bus_server_reply(call->srv, call->req.routing_id, call->rep, &call->rep_arr, NULL, 0, &st) <
        0)
        bus_warn(S_LOG, "reply to %s not sent: %s", bus_body_name(call->req.env.which_body),
                 st.message);
}

void sched_reply_error(sched_t *self, sched_call_t *call, bus_code_t code, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (code == kvtier_StatusCode_STATUS_INVALID_ARGUMENT)
        self->g.invalid_requests++;
    bus_debug(S_LOG, "%s -> %s: %s", bus_body_name(call->req.env.which_body),
              bus_status_name((int)code), msg);
    bus_server_reply_error(call->srv, call->req.routing_id, call->req.env.corr_id, code, "%s", msg);
}

/* ---- the call context ---- */

void sched_call_destroy(sched_call_t **call_p)
{
    sched_call_t *call = *call_p;
    if (!call)
        return;
    bus_request_reset(&call->req);
    bus_arrays_destroy(&call->req_arr);
    free(call->rep);
    tier_mem_free(call->rep_keys);
    tier_mem_free(call->rep_mask);
    tier_mem_free(call->rep_tiers);
    tier_mem_free(call->payload);
    tier_mem_free(call->keys);
    tier_mem_free(call->resv);
    tier_mem_free(call->victims);
    tier_mem_free(call->pos);
    tier_mem_free(call->tok);
    tier_mem_free(call->sizes);
    tier_mem_free(call->checksums);
    free(call);
    *call_p = NULL;
}

sched_call_t *sched_call_new(uint32_t max_batch)
{
    size_t n = max_batch;
    sched_call_t *call = calloc(1, sizeof *call);
    if (!call)
        return NULL;
    /* token: header, a full tier table with the longest strings, one entry per key */
    call->payload_cap = (size_t)BUS_TOKEN_MAX_BYTES(SCHED_MAX_TIERS, n);
    call->req_arr = bus_arrays_new((uint32_t)n, 0);
    call->rep = calloc(1, sizeof *call->rep);
    call->rep_keys = tier_mem_calloc(n, sizeof *call->rep_keys);
    call->rep_mask = tier_mem_calloc(n, sizeof *call->rep_mask);
    call->rep_tiers = tier_mem_calloc(n, sizeof *call->rep_tiers);
    call->payload = tier_mem_calloc(1, call->payload_cap);
    call->keys = tier_mem_calloc(n, sizeof *call->keys);
    call->resv = tier_mem_calloc(n, sizeof *call->resv);
    call->victims = tier_mem_calloc(n, sizeof *call->victims);
    call->pos = tier_mem_calloc(n, sizeof *call->pos);
    call->tok = tier_mem_calloc(n, sizeof *call->tok);
    call->sizes = tier_mem_calloc(n, sizeof *call->sizes);
    call->checksums = tier_mem_calloc(n, sizeof *call->checksums);
    if (!call->req_arr || !call->rep || !call->rep_keys || !call->rep_mask || !call->rep_tiers ||
        !call->payload || !call->keys || !call->resv || !call->victims || !call->pos ||
        !call->tok || !call->sizes || !call->checksums)
        sched_call_destroy(&call);
    return call;
}

/* ---- read-only requests ---- */

static void s_on_cluster_info(sched_t *self, sched_call_t *call)
{
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_cluster_info_rep_tag);
    kvtier_ClusterInfoReply *r = &rep->body.cluster_info_rep;
    snprintf(r->cluster, sizeof r->cluster, "%s", self->cfg.cluster);
    /* past its lease it names no leader (libkvtier's discovery then reads it as
     * "knows no leader yet" and takes another coordinator's answer): it would
     * answer NOT_LEADER to what it was sent */
    bool leads = !sched_lease_lapsed(self);
    if (leads)
        sched_strcpy(r->leader_endpoint, sizeof r->leader_endpoint,
                     self->cfg.advertised_endpoint[0] ? self->cfg.advertised_endpoint
                                                      : self->endpoint);
    sched_strcpy(r->event_endpoint, sizeof r->event_endpoint, self->cfg.event_endpoint);
    sched_strcpy(r->event_replay_endpoint, sizeof r->event_replay_endpoint,
                 self->cfg.event_replay_endpoint);
    sched_strcpy(r->vllm_event_endpoint, sizeof r->vllm_event_endpoint,
                 self->cfg.vllm_event_endpoint);
    sched_strcpy(r->vllm_replay_endpoint, sizeof r->vllm_replay_endpoint,
                 self->cfg.vllm_replay_endpoint);
    r->leader_epoch = leads ? self->cfg.leader_epoch : 0;
    _Static_assert(SCHED_MAX_TIERS <= BUS_MAX_TIERS, "every tier fits one ClusterInfoReply");
    /* the table holds at most BUS_MAX_TIERS entries, pool slots among them (the
     * tier id space), so one reply lists every tier and member; vacant slots are
     * not listed */
    r->total_tiers = 0;
    for (uint32_t i = 0; i < self->tierset.n_tiers && r->tiers_count < BUS_MAX_TIERS; i++) {
        if (sched_tier_vacant(&self->tierset.tiers[i]))
            continue;
        sched_tier_info(self, &self->tierset.tiers[i], &r->tiers[r->tiers_count++]);
        r->total_tiers++;
    }
    r->resigning = self->resign.on;
    r->etcd_cluster_id = leads ? self->cfg.etcd_cluster_id : 0;
    sched_reply(self, call);
}

/* One StatsReply page being built: every counter is counted (the total), those in
 * [offset, offset + limit) are copied into the reply. */
typedef struct {
    kvtier_StatsReply *r;
    uint32_t offset, limit;
    uint32_t seen;
} s_page_t;

static void s_stat(s_page_t *p, const char *name, uint64_t v)
{
    uint32_t i = p->seen++;
    if (i < p->offset || p->r->counters_count >= p->limit)
        return;
    kvtier_StatCounter *c = &p->r->counters[p->r->counters_count++];
    snprintf(c->name, sizeof c->name, "%s", name);
    c->value = v;
}

static void s_stat_counters(s_page_t *r, const sched_counters_t *c)
{
    s_stat(r, "lookups", c->lookups);
    s_stat(r, "lookup_keys", c->lookup_keys);
    s_stat(r, "hits", c->hit_keys);
    s_stat(r, "misses", c->miss_keys);
    s_stat(r, "gets", c->gets);
    s_stat(r, "get_keys", c->get_keys);
    s_stat(r, "get_not_found", c->get_not_found);
    s_stat(r, "get_released", c->get_released);
    s_stat(r, "puts", c->puts);
    s_stat(r, "put_keys", c->put_keys);
    s_stat(r, "put_skipped", c->put_skipped);
    s_stat(r, "put_no_space", c->put_no_space);
    s_stat(r, "put_busy", c->put_busy);
    s_stat(r, "puts_committed", c->puts_committed);
    s_stat(r, "puts_failed", c->puts_failed);
    s_stat(r, "prefetches", c->prefetches);
    s_stat(r, "prefetch_keys", c->prefetch_keys);
    s_stat(r, "prefetch_committed", c->prefetch_committed);
    s_stat(r, "prefetch_failed", c->prefetch_failed);
    s_stat(r, "touched", c->touched);
    s_stat(r, "removed", c->removed);
    s_stat(r, "remove_busy", c->remove_busy);
    s_stat(r, "prepares", c->prepares);
    s_stat(r, "completes", c->completes);
}

static void s_stat_global(sched_t *self, s_page_t *r)
{
    const sched_global_t *g = &self->g;
    s_stat(r, "evictions", g->evictions);
    s_stat(r, "expirations", g->expirations);
    s_stat(r, "dropped_by_tier", g->dropped_by_tier);
    s_stat(r, "pins_lapsed", g->pins_lapsed);
    s_stat(r, "reservations_lapsed", g->reservations_lapsed);
    s_stat(r, "safety_net_windows", g->safety_net_windows);
    s_stat(r, "tier_timeouts", g->tier_timeouts);
    s_stat(r, "tier_errors", g->tier_errors);
    s_stat(r, "touch_rewrites_skipped", g->touch_rewrites_skipped);
    s_stat(r, "registry_dropped", g->registry_dropped);
    s_stat(r, "deletes_sent", g->deletes_sent);
    s_stat(r, "deletes_dropped", g->deletes_dropped);
    s_stat(r, "adopted", g->adopted);
    s_stat(r, "invalid_requests", g->invalid_requests);
    s_stat(r, "busy_refusals", g->busy_refusals);
    s_stat(r, "requests_lapsed", g->requests_lapsed);
    s_stat(r, "gc_scans", g->gc_scans);
    s_stat(r, "gc_suspects", g->gc_suspects);
    s_stat(r, "gc_suspects_dropped", g->gc_suspects_dropped);
    s_stat(r, "gc_dropped", g->gc_dropped);
    s_stat(r, "damaged_dropped", g->damaged_dropped);
    s_stat(r, "overloaded", g->overloaded);
    s_stat(r, "clients", sched_clients_known(self));
    s_stat(r, "reclaim_marked", g->reclaim_marked);
    s_stat(r, "reclaimed", g->reclaimed);
    s_stat(r, "reclaim_backpressure", g->reclaim_backpressure);
    s_stat(r, "demote_submitted", g->demote_submitted);
    s_stat(r, "demoted", g->demoted);
    s_stat(r, "demote_failed", g->demote_failed);
    s_stat(r, "demote_stale", g->demote_stale);
    s_stat(r, "room_demotions", g->room_demotions);
    s_stat(r, "prefetch_copy_jobs", g->prefetch_copy_jobs);
    s_stat(r, "prefetch_copied", g->prefetch_copied);
    s_stat(r, "prefetch_copy_failed", g->prefetch_copy_failed);
    s_stat(r, "prefetch_copy_lost", g->prefetch_copy_lost);
    s_stat(r, "prefetch_moved", g->prefetch_moved);
    s_stat(r, "events_recorded", self->events.records);
    s_stat(r, "events_batches", self->events.handed);
    s_stat(r, "events_dropped", self->events.dropped);
    s_stat(r, "events_tokens_dropped", self->events.tokens_dropped);
    s_stat(r, "quota_reclaimed", g->quota_reclaimed);
    s_stat(r, "trim_removed", g->trim_removed);
    s_stat(r, "quota_backpressure", g->quota_backpressure);
    s_stat(r, "quota_over_instances", g->quota_over);
    s_stat(r, "deleting", sched_deleting_count(self));
    s_stat(r, "instances", self->index.n_inst);
    s_stat(r, "open_requests", sched_open_requests(self));
    s_stat(r, "window_keys", sched_open_windows_keys(self));
    s_stat(r, "pending_puts", self->cfg.max_pending_puts - self->requests.n_op_free);
    uint64_t blocks = 0, pinned = 0, reserved = 0;
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++) {
        tier_slots_stats_t ts;
        tier_slots_stats(self->tierset.tiers[i].slots, &ts);
        blocks += ts.committed;
        pinned += ts.pinned;
        reserved += ts.reserved;
    }
    s_stat(r, "blocks", blocks);
    s_stat(r, "pinned", pinned);
    s_stat(r, "reserved", reserved);
    _Static_assert(SCHED_NAME_MAX - 1 + sizeof "tier..capacity" <= BUS_STAT_NAME_MAX,
                   "per-tier counter names fit StatCounter.name uncut");
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++) {
        if (sched_tier_vacant(&self->tierset.tiers[i]))
            continue;
        tier_slots_stats_t ts;
        tier_slots_stats(self->tierset.tiers[i].slots, &ts);
        char name[BUS_STAT_NAME_MAX];
        snprintf(name, sizeof name, "tier.%s.used", self->tierset.tiers[i].cfg.name);
        s_stat(r, name, ts.used);
        snprintf(name, sizeof name, "tier.%s.capacity", self->tierset.tiers[i].cfg.name);
        s_stat(r, name, ts.capacity);
    }
    /* appended after the list above, so its older order stays (kvtier status) */
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++) {
        const sched_tier_t *t = &self->tierset.tiers[i];
        if (sched_tier_vacant(t))
            continue;
        tier_slots_stats_t ts;
        tier_slots_stats(t->slots, &ts);
        char name[BUS_STAT_NAME_MAX];
        snprintf(name, sizeof name, "tier.%s.hits", t->cfg.name);
        s_stat(r, name, t->hits);
        snprintf(name, sizeof name, "tier.%s.blocks", t->cfg.name);
        s_stat(r, name, ts.committed);
        snprintf(name, sizeof name, "tier.%s.slot_bytes", t->cfg.name);
        s_stat(r, name, t->cfg.slot_size);
        snprintf(name, sizeof name, "tier.%s.up", t->cfg.name);
        s_stat(r, name, t->state == SCHED_TIER_UP);
        snprintf(name, sizeof name, "tier.%s.evictions", t->cfg.name);
        s_stat(r, name, ts.evictions);
    }
    /* pools (issue 9 §3): members up, and the sums over them */
    _Static_assert(SCHED_NAME_MAX - 1 + sizeof "pool..capacity" <= BUS_STAT_NAME_MAX,
                   "per-pool counter names fit StatCounter.name uncut");
    for (uint32_t p = 0; p < self->cfg.n_pools; p++) {
        const sched_tier_pool_config_t *pc = &self->cfg.pools[p];
        uint64_t members = 0, cap = 0, used = 0;
        for (uint32_t k = 0; k < pc->max_members; k++) {
            const sched_tier_t *t = &self->tierset.tiers[pc->first_id - 1 + k];
            if (sched_tier_vacant(t))
                continue;
            tier_slots_stats_t ts;
            tier_slots_stats(t->slots, &ts);
            members++;
            if (t->state != SCHED_TIER_DOWN) {
                cap += ts.capacity;
                used += ts.used;
            }
        }
        char name[BUS_STAT_NAME_MAX];
        snprintf(name, sizeof name, "pool.%s.members", pc->name);
        s_stat(r, name, members);
        snprintf(name, sizeof name, "pool.%s.max", pc->name);
        s_stat(r, name, pc->max_members);
        snprintf(name, sizeof name, "pool.%s.capacity", pc->name);
        s_stat(r, name, cap);
        snprintf(name, sizeof name, "pool.%s.used", pc->name);
        s_stat(r, name, used);
    }
    /* the router's work: requests begun on each branch (docs/SCHEDULER.md "Branches") */
    _Static_assert(SCHED_NAME_MAX - 1 + sizeof "branch..requests" <= BUS_STAT_NAME_MAX,
                   "per-branch counter names fit StatCounter.name uncut");
    for (uint32_t i = 0; i < self->cfg.n_chains; i++) {
        char name[BUS_STAT_NAME_MAX];
        snprintf(name, sizeof name, "branch.%s.requests", self->cfg.chains[i].name);
        s_stat(r, name, self->requests.begun[i]);
    }
}

/* ---- latency of the meta-plane calls (SCHED_LAT_*) ---- */

const char *const sched_lat_call_names[SCHED_LAT_CALLS] = {
    "register_instance", "request_begin", "request_end",  "lookup",           "prepare_get",
    "complete_get",      "prepare_put",   "complete_put", "prepare_prefetch", "copy_prefetch",
    "complete_prefetch", "touch",         "remove",       "cluster_info",     "stats",
    "admin_status",      "prepare",       "complete"};

/* The histogram index of a meta-plane request body; -1: not a meta-plane call. */
static int s_lat_call(pb_size_t tag)
{
    switch (tag) {
    case kvtier_Envelope_register_instance_req_tag:
        return 0;
    case kvtier_Envelope_request_begin_req_tag:
        return 1;
    case kvtier_Envelope_request_end_req_tag:
        return 2;
    case kvtier_Envelope_lookup_req_tag:
        return 3;
    case kvtier_Envelope_prepare_get_req_tag:
        return 4;
    case kvtier_Envelope_complete_get_req_tag:
        return 5;
    case kvtier_Envelope_prepare_put_req_tag:
        return 6;
    case kvtier_Envelope_complete_put_req_tag:
        return 7;
    case kvtier_Envelope_prepare_prefetch_req_tag:
        return 8;
    case kvtier_Envelope_copy_prefetch_req_tag:
        return 9;
    case kvtier_Envelope_complete_prefetch_req_tag:
        return 10;
    case kvtier_Envelope_touch_req_tag:
        return 11;
    case kvtier_Envelope_remove_req_tag:
        return 12;
    case kvtier_Envelope_cluster_info_req_tag:
        return 13;
    case kvtier_Envelope_stats_req_tag:
        return 14;
    case kvtier_Envelope_admin_status_req_tag:
        return 15;
    case kvtier_Envelope_prepare_req_tag:
        return 16;
    case kvtier_Envelope_complete_req_tag:
        return 17;
    default:
        return -1;
    }
}

static int64_t s_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void s_lat_record(sched_t *self, pb_size_t tag, int64_t us)
{
    static const uint32_t bounds[SCHED_LAT_BUCKETS] = SCHED_LAT_BOUNDS_US;
    int c = s_lat_call(tag);
    if (c < 0)
        return;
    uint64_t v = us < 0 ? 0 : (uint64_t)us;
    uint32_t b = 0;
    while (b < SCHED_LAT_BUCKETS && v > bounds[b])
        b++;
    sched_lat_t *l = &self->lat[c];
    l->count++;
    l->sum_us += v;
    l->buckets[b]++;
}

static void s_stat_latency(sched_t *self, s_page_t *r)
{
    _Static_assert(sizeof "lat.complete_prefetch.sum_us" <= BUS_STAT_NAME_MAX,
                   "latency counter names fit StatCounter.name");
    char name[BUS_STAT_NAME_MAX];
    for (uint32_t c = 0; c < SCHED_LAT_CALLS; c++) {
        const sched_lat_t *l = &self->lat[c];
        for (uint32_t b = 0; b <= SCHED_LAT_BUCKETS; b++) {
            snprintf(name, sizeof name, "lat.%s.b%u", sched_lat_call_names[c], b);
            s_stat(r, name, l->buckets[b]);
        }
        snprintf(name, sizeof name, "lat.%s.count", sched_lat_call_names[c]);
        s_stat(r, name, l->count);
        snprintf(name, sizeof name, "lat.%s.sum_us", sched_lat_call_names[c]);
        s_stat(r, name, l->sum_us);
    }
}

/* A detail reply names the first registered instances (registration order). */
static void s_stat_instances(sched_t *self, kvtier_StatsReply *rep)
{
    for (uint32_t i = 0; i < self->index.n_inst; i++) {
        const sched_instance_t *in = &self->index.inst[i];
        if (!in->used)
            continue;
        rep->instance_total++;
        if (rep->instance_ids_count < BUS_STATS_INSTANCES_MAX)
            sched_strcpy(rep->instance_ids[rep->instance_ids_count++], sizeof rep->instance_ids[0],
                         in->id);
    }
}

static void s_on_stats(sched_t *self, sched_call_t *call)
{
    const char *id = call->req.env.body.stats_req.instance_id;
    const sched_instance_t *in = NULL;
    if (id[0] && !(in = sched_instance_get(self, call, id)))
        return;
    const kvtier_StatsRequest *q = &call->req.env.body.stats_req;
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_stats_rep_tag);
    s_page_t page = {.r = &rep->body.stats_rep,
                     .offset = q->offset,
                     .limit = q->max_counters && q->max_counters < BUS_STATS_PAGE_MAX
                                  ? q->max_counters
                                  : BUS_STATS_PAGE_MAX};
    s_page_t *r = &page;
    s_stat_counters(r, in ? &in->c : &self->c);
    if (in) {
        /* quotas: as of the last enforcement (sched_quota.c) */
        s_stat(r, "quota_usage_blocks", in->q_usage);
        s_stat(r, "quota_usage_bytes", in->q_usage * in->spec.bytes_per_block);
        s_stat(r, "quota_limit_blocks", in->q_limit);
        s_stat(r, "quota_over", in->q_over);
        s_stat(r, "quota_reclaimed", in->q_reclaimed);
        s_stat(r, "trim_removed", in->trim_removed);
    } else {
        s_stat_global(self, r);
        if (q->detail) {
            s_stat_latency(self, r);
            s_stat_instances(self, &rep->body.stats_rep);
        }
    }
    rep->body.stats_rep.total = page.seen;
    uint32_t first = page.offset < page.seen ? page.offset : page.seen;
    rep->body.stats_rep.next_offset = first + rep->body.stats_rep.counters_count;
    sched_reply(self, call);
}

static void s_on_admin_status(sched_t *self, sched_call_t *call)
{
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_admin_status_rep_tag);
    kvtier_AdminStatusReply *r = &rep->body.admin_status_rep;
    snprintf(r->node_id, sizeof r->node_id, "%s", self->cfg.node_name);
    r->leader = !sched_lease_lapsed(self); /* past its lease, or handed over: no more */
    sched_strcpy(r->leader_endpoint, sizeof r->leader_endpoint,
                 self->cfg.advertised_endpoint[0] ? self->cfg.advertised_endpoint : self->endpoint);
    r->leader_epoch = self->cfg.leader_epoch;
    r->uptime_ms = (uint64_t)(sched_now() - self->started_ms);
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++) {
        tier_slots_stats_t ts;
        tier_slots_stats(self->tierset.tiers[i].slots, &ts);
        r->blocks += ts.committed;
    }
    r->instances = self->index.n_inst;
    r->open_requests = sched_open_requests(self);
    r->tiers = 0;
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++)
        r->tiers += !sched_tier_vacant(&self->tierset.tiers[i]);
    snprintf(r->version, sizeof r->version, "%s", S_VERSION);
    r->resigning = self->resign.on;
    sched_reply(self, call);
}

/* ---- dispatch: one switch over the request body ---- */

static void s_dispatch(sched_t *self, sched_call_t *call)
{
    /* the meta plane's clients are bounded (sched_clients.c), then checked against
     * the instance grants of their CURVE keys (sched_acl.c) */
    if (call->srv == self->server && !sched_client_enter(self, call, sched_now()))
        return;
    if (!sched_acl_allows(self, call) || s_lease_refuses(self, call) ||
        sched_resign_refuses(self, call))
        return;
    switch (call->req.env.which_body) {
    case kvtier_Envelope_register_instance_req_tag:
        sched_on_register(self, call);
        break;
    case kvtier_Envelope_request_begin_req_tag:
        sched_on_begin(self, call);
        break;
    case kvtier_Envelope_request_end_req_tag:
        sched_on_end(self, call);
        break;
    case kvtier_Envelope_lookup_req_tag:
        sched_on_lookup(self, call, sched_request_chain);
        break;
    case kvtier_Envelope_prepare_get_req_tag:
        sched_on_prepare_get(self, call);
        break;
    case kvtier_Envelope_complete_get_req_tag:
        sched_on_complete_get(self, call);
        break;
    case kvtier_Envelope_prepare_put_req_tag:
        sched_on_prepare_put(self, call);
        break;
    case kvtier_Envelope_complete_put_req_tag:
        sched_on_complete_put(self, call);
        break;
    case kvtier_Envelope_prepare_prefetch_req_tag:
        sched_on_prepare_prefetch(self, call);
        break;
    case kvtier_Envelope_copy_prefetch_req_tag:
        sched_on_copy_prefetch(self, call);
        break;
    case kvtier_Envelope_complete_prefetch_req_tag:
        sched_on_complete_prefetch(self, call);
        break;
    case kvtier_Envelope_prepare_req_tag:
        sched_on_prepare(self, call);
        break;
    case kvtier_Envelope_complete_req_tag:
        sched_on_complete(self, call);
        break;
    case kvtier_Envelope_touch_req_tag:
        sched_on_touch(self, call);
        break;
    case kvtier_Envelope_remove_req_tag:
        sched_on_remove(self, call);
        break;
    case kvtier_Envelope_cluster_info_req_tag:
        s_on_cluster_info(self, call);
        break;
    case kvtier_Envelope_stats_req_tag:
        s_on_stats(self, call);
        break;
    case kvtier_Envelope_admin_status_req_tag:
        s_on_admin_status(self, call);
        break;
    case kvtier_Envelope_admin_trim_req_tag:
        sched_on_admin_trim(self, call);
        break;
    case kvtier_Envelope_admin_resign_req_tag:
        sched_on_admin_resign(self, call);
        break;
    case kvtier_Envelope_admin_drain_req_tag:
        sched_on_admin_drain(self, call);
        break;
    case kvtier_Envelope_reclaim_candidates_req_tag:
    case kvtier_Envelope_gc_scan_req_tag:
    case kvtier_Envelope_gc_drop_req_tag:
    case kvtier_Envelope_demote_done_req_tag:
    case kvtier_Envelope_quota_enforce_req_tag:
        if (call->srv != self->internal)
            sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                              "%s is served on the scheduler's internal plane only",
                              bus_body_name(call->req.env.which_body));
        else if (call->req.env.which_body == kvtier_Envelope_demote_done_req_tag &&
                 call->req.env.body.demote_done_req.priority == MIGRATOR_PREFETCH)
            sched_on_copy_done(self, call); /* a prefetch copy's result: the windows' */
        else
            sched_on_internal(self, call);
        break;
    case kvtier_Envelope_tier_membership_req_tag:
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "TierMembershipRequest comes from the coordinator process over the "
                          "actor pipe, not over the meta plane");
        break;
    default:
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "%s is not served on the meta plane (tier-plane requests go to a "
                          "tier actor)",
                          bus_body_name(call->req.env.which_body));
        break;
    }
}

static void s_drain(sched_t *self, sched_call_t *call, bus_server_t *server)
{
    call->srv = server;
    for (int i = 0; i < S_DRAIN; i++) {
        int rc = bus_server_recv(server, 0, &call->req, call->req_arr);
        if (rc <= 0)
            break;
        pb_size_t tag = call->req.env.which_body;
        int64_t t0 = s_mono_us();
        s_dispatch(self, call);
        s_lat_record(self, tag, s_mono_us() - t0);
        bus_request_reset(&call->req);
    }
    sched_tiers_flush(self);
    sched_events_flush(self);
}

/* The loop's readers of the two planes: the scheduler and the one call context
 * the actor made for it (s_actor). */
typedef struct {
    sched_t *self;
    sched_call_t *call;
} s_serve_t;

static int s_on_server(zloop_t *loop, zsock_t *sock, void *arg)
{
    (void)loop;
    (void)sock;
    s_serve_t *sv = arg;
    s_drain(sv->self, sv->call, sv->self->server);
    return 0;
}

static int s_on_internal(zloop_t *loop, zsock_t *sock, void *arg)
{
    (void)loop;
    (void)sock;
    s_serve_t *sv = arg;
    s_drain(sv->self, sv->call, sv->self->internal);
    return 0;
}

/* ---- pipe ---- */

static void s_pipe_envelope(sched_t *self, zmsg_t *msg)
{
    kvtier_Envelope *env = self->tierset.tio.env;
    kvtier_Status st;
    if (bus_msg_decode(msg, BUS_DIR_REQUEST, env, NULL, &st) < 0) {
        bus_warn(S_LOG, "pipe: dropped a message that does not decode: %s", st.message);
        return;
    }
    if (env->which_body != kvtier_Envelope_tier_membership_req_tag) {
        bus_warn(S_LOG, "pipe: dropped %s (only TierMembershipRequest is accepted)",
                 bus_body_name(env->which_body));
        return;
    }
    kvtier_TierMembershipRequest m = env->body.tier_membership_req;
    sched_tier_membership(self, &m);
    sched_tiers_flush(self);
    sched_events_flush(self);
}

static int s_on_pipe(zloop_t *loop, zsock_t *pipe, void *arg)
{
    (void)loop;
    sched_t *self = arg;
    zmsg_t *msg = zmsg_recv(pipe);
    if (!msg)
        return -1; /* interrupted */
    zframe_t *f = zmsg_first(msg);
    int rc = 0;
    if (f && zframe_streq(f, "$TERM")) {
        self->terminated = true;
        rc = -1;
    } else if (f && zframe_streq(f, "ENDPOINT")) {
        zstr_send(pipe, self->endpoint);
    } else if (f && zframe_streq(f, "INTERNAL")) {
        zstr_send(pipe, self->internal_ep);
    } else if (f) {
        s_pipe_envelope(self, msg);
    }
    zmsg_destroy(&msg);
    return rc;
}

static int s_on_tick(zloop_t *loop, int timer_id, void *arg)
{
    (void)loop;
    (void)timer_id;
    sched_t *self = arg;
    int64_t now = sched_now();
    sched_tiers_tick(self, now);
    sched_lease_scan(self, now);
    sched_deleting_tick(self, now);
    sched_copy_tick(self, now);
    sched_resign_tick(self, now);
    sched_drain_tick(self, now);
    sched_tiers_flush(self);
    sched_events_flush(self);
    return 0;
}

/* The meta ROUTER's connection events: closes those past max_connections. */
static int s_on_watch(zloop_t *loop, zsock_t *reader, void *arg)
{
    (void)loop;
    (void)reader;
    sched_t *self = arg;
    bus_server_watch(self->server);
    return 0;
}

/* ---- construction ---- */

static void s_self_destroy(sched_t **self_p)
{
    sched_t *self = *self_p;
    if (!self)
        return;
    sched_demote_fini(self); /* the migrator first: nothing more arrives for the tiers */
    sched_tiers_fini(self);  /* first: failing tier requests answers pending puts */
    sched_resign_fini(self);
    sched_requests_fini(self);
    sched_clients_fini(self);
    sched_quota_fini(self);
    sched_index_fini(self);
    sched_events_fini(self);
    zloop_destroy(&self->loop);
    bus_server_destroy(&self->server);
    bus_server_destroy(&self->internal);
    free(self->tierset.tio.env);
    tier_mem_free(self->tierset.tio.slots);
    tier_mem_free(self->tierset.tio.sizes);
    tier_mem_free(self->tierset.tio.keys);
    tier_mem_free(self->tierset.tio.tok_entries);
    tier_mem_free(self->tierset.tio.tok);
    free(self->requests.op_rep);
    bus_secret_wipe(&self->token_key, sizeof self->token_key);
    free(self);
    *self_p = NULL;
}

/* The tier-plane messages' scratch (sched_tiers.c) and the deferred replies'. */
static int s_alloc_scratch(sched_t *self)
{
    size_t n = self->cfg.max_batch;
    self->tierset.tio.env = calloc(1, sizeof *self->tierset.tio.env);
    self->tierset.tio.slots = tier_mem_calloc(n, sizeof *self->tierset.tio.slots);
    self->tierset.tio.sizes = tier_mem_calloc(n, sizeof *self->tierset.tio.sizes);
    self->tierset.tio.keys = tier_mem_calloc(n, sizeof *self->tierset.tio.keys);
    /* its own tokens: one tier, up to max_batch (or a delete batch's) entries */
    size_t nt = n > SCHED_DEL_BATCH ? n : SCHED_DEL_BATCH;
    self->tierset.tio.tok_entries = tier_mem_calloc(nt, sizeof *self->tierset.tio.tok_entries);
    self->tierset.tio.tok_cap = (size_t)BUS_TOKEN_MAX_BYTES(1, nt);
    self->tierset.tio.tok = tier_mem_calloc(1, self->tierset.tio.tok_cap);
    if (!self->tierset.tio.tok_entries || !self->tierset.tio.tok)
        return -ENOMEM;
    self->requests.op_rep = calloc(1, sizeof *self->requests.op_rep);
    if (!self->tierset.tio.env || !self->tierset.tio.slots || !self->tierset.tio.sizes ||
        !self->tierset.tio.keys || !self->requests.op_rep)
        return -ENOMEM;
    return 0;
}

static sched_t *s_self_new(zsock_t *pipe, const sched_config_t *cfg)
{
    char err[256];
    if (sched_config_check(cfg, err, sizeof err) < 0) {
        bus_error(S_LOG, "%s", err);
        return NULL;
    }
    sched_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->cfg = *cfg;
    s_apply_defaults(&self->cfg);
    self->pipe = pipe;
    self->started_ms = sched_now();
    self->next_token_id = 1;
    /* names this incarnation's tokens (bus_token.h issuer): never 0 */
    self->token_issuer = (((uint64_t)randof(0x7fffffff) << 32) ^ (uint64_t)zclock_usecs()) | 1;
    self->hash_seed = ((uint64_t)randof(0x7fffffff) << 32) ^ (uint64_t)zclock_usecs();
    if (self->cfg.has_secret) {
        if (bus_token_key_derive(self->cfg.secret, self->cfg.cluster, &self->token_key) < 0) {
            bus_error(S_LOG, "cannot derive the token key for cluster \"%s\"", self->cfg.cluster);
            goto out_fail;
        }
        self->seal = true;
    }
    bus_secret_wipe(self->cfg.secret, sizeof self->cfg.secret); /* the key is all it keeps */
    if (s_alloc_scratch(self) < 0 || sched_index_init(self) < 0 || sched_quota_init(self) < 0 ||
        sched_requests_init(self) < 0 || sched_clients_init(self) < 0) {
        bus_error(S_LOG,
                  "out of memory sizing the scheduler (max_batch %u, max_requests %u, "
                  "max_window_keys %u)",
                  self->cfg.max_batch, self->cfg.max_requests, self->cfg.max_window_keys);
        goto out_fail;
    }
    self->loop = zloop_new();
    if (!self->loop || sched_tiers_init(self) < 0)
        goto out_fail;
    (void)sched_index_preload(self, self->cfg.preload, self->cfg.n_preload);
    self->cfg.preload = NULL; /* the caller's, valid during sched_actor_new only */
    self->cfg.n_preload = 0;
    self->server = bus_server_new(self->cfg.endpoint, self->cfg.node_name);
    if (!self->server) {
        bus_error(S_LOG, "cannot bind the meta endpoint '%s'", self->cfg.endpoint);
        goto out_fail;
    }
    bus_server_set_max_connections(self->server, self->cfg.max_connections);
    bus_server_set_leader_epoch(self->server, self->cfg.leader_epoch); /* every reply */
    snprintf(self->endpoint, sizeof self->endpoint, "%s", bus_server_endpoint(self->server));
    char iep[SCHED_ENDPOINT_MAX];
    if (self->cfg.internal_endpoint[0])
        sched_strcpy(iep, sizeof iep, self->cfg.internal_endpoint);
    else
        snprintf(iep, sizeof iep, "inproc://sched-internal-%p-%" PRIx64, (void *)self,
                 self->hash_seed);
    self->internal = bus_server_new(iep, self->cfg.node_name);
    if (!self->internal) {
        bus_error(S_LOG, "cannot bind the internal endpoint '%s'", iep);
        goto out_fail;
    }
    sched_strcpy(self->internal_ep, sizeof self->internal_ep, bus_server_endpoint(self->internal));
    if (sched_events_init(self, self->cfg.events_input, self->cfg.events_queue,
                          self->cfg.leader_epoch, self->cfg.previous_epoch, self->endpoint, sched_instance_name,
                          sched_instance_tokens) < 0) {
        bus_error(S_LOG, "cannot start the events of this scheduler (publisher input '%s')",
                  self->cfg.events_input);
        goto out_fail;
    }
    zloop_set_nonstop(self->loop, true); /* the owner stops us with $TERM */
    if (zloop_reader(self->loop, pipe, s_on_pipe, self) < 0 ||
        zloop_timer(self->loop, self->cfg.tick_ms, 0, s_on_tick, self) < 0 ||
        sched_demote_init(self) < 0)
        goto out_fail;
    return self;

out_fail:
    s_self_destroy(&self);
    return NULL;
}

/* The planes are read with the one call context, owned here: sched_t holds
 * nothing about a request. */
static int s_serve(sched_t *self, s_serve_t *sv)
{
    sv->self = self;
    sv->call = sched_call_new(self->cfg.max_batch);
    if (!sv->call) {
        bus_error(S_LOG, "out of memory for the request scratch (max_batch %u)",
                  self->cfg.max_batch);
        return -1;
    }
    if (zloop_reader(self->loop, bus_server_sock(self->server), s_on_server, sv) < 0 ||
        zloop_reader(self->loop, bus_server_sock(self->internal), s_on_internal, sv) < 0 ||
        zloop_reader(self->loop, bus_server_monitor_sock(self->server), s_on_watch, self) < 0)
        return -1;
    return 0;
}

static void s_actor(zsock_t *pipe, void *args)
{
    s_serve_t sv = {0};
    sched_t *self = s_self_new(pipe, args);
    if (self && s_serve(self, &sv) < 0) {
        sched_call_destroy(&sv.call);
        s_self_destroy(&self);
    }
    if (bus_actor_ready(pipe, self != NULL) < 0)
        return;
    bus_info(S_LOG, "scheduler %s serving cluster '%s' on %s (epoch %" PRIu64 ", %u tiers)",
             self->cfg.node_name, self->cfg.cluster, self->endpoint, self->cfg.leader_epoch,
             self->tierset.n_tiers);
    zloop_start(self->loop);
    bus_info(S_LOG, "scheduler %s stopped", self->cfg.node_name);
    s_self_destroy(&self);
    sched_call_destroy(&sv.call);
}

zactor_t *sched_actor_new(const sched_config_t *cfg)
{
    return bus_actor_new(s_actor, (void *)cfg);
}

/* CMD ("ENDPOINT", "INTERNAL") is answered with one string. */
static int s_ask_endpoint(zactor_t *actor, const char *cmd, char *buf, size_t len)
{
    if (!buf || len == 0 || bus_actor_ask(actor, BUS_ACTOR_ASK_MS, "s", cmd) < 0)
        return -1;
    char *ep = zstr_recv(actor);
    if (!ep)
        return -1;
    snprintf(buf, len, "%s", ep);
    zstr_free(&ep);
    return 0;
}

int sched_actor_endpoint(zactor_t *actor, char *buf, size_t len)
{
    return s_ask_endpoint(actor, "ENDPOINT", buf, len);
}

int sched_actor_internal_endpoint(zactor_t *actor, char *buf, size_t len)
{
    return s_ask_endpoint(actor, "INTERNAL", buf, len);
}

int sched_actor_tier_change(zactor_t *actor, bool up, const kvtier_TierInfo *info)
{
    if (!actor || !info)
        return -1;
    kvtier_Envelope *env = calloc(1, sizeof *env);
    if (!env)
        return -1;
    bus_env_init(env, kvtier_Envelope_tier_membership_req_tag, "coordinator");
    kvtier_TierMembershipRequest *m = &env->body.tier_membership_req;
    m->change = up ? kvtier_MembershipChange_MEMBERSHIP_CHANGE_UPDATED
                   : kvtier_MembershipChange_MEMBERSHIP_CHANGE_REMOVED;
    m->has_tier = true;
    m->tier = *info;
    zmsg_t *msg = NULL;
    kvtier_Status st;
    int rc = bus_msg_encode(env, NULL, NULL, 0, &msg, &st);
    free(env);
    if (rc < 0) {
        bus_warn(S_LOG, "tier change not sent: %s", st.message);
        return -1;
    }
    return zmsg_send(&msg, actor) == 0 ? 0 : -1;
}
