/* sched_testkit.h — helpers for the scheduler actor tests: start a scheduler on
 * tcp://127.0.0.1:*, talk to it over a real DEALER (bus_client), one helper per
 * meta-plane call returning the status code (0 = OK) with the reply kept in the
 * kit, and polling helpers (no sleeps: poll a condition with a generous deadline).
 * Header-only (static inline), test use only. */
#ifndef KVT_SCHED_TESTKIT_H
#define KVT_SCHED_TESTKIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bus_client.h"
#include "bus_token.h"
#include "sched_actor.h"
#include "sched_fake_tier.h"

#define TK_CALL_MS 10000u /* per call: generous, the tests assert on behaviour only */
#define TK_POLL_MS 20000  /* condition polling deadline */
#define TK_INST "llama-8b"

typedef struct {
    zactor_t *sched;
    bus_client_t *c;
    char ep[256];
    kvtier_Envelope *req, *rep;
    bus_arrays_t *arr; /* reply arrays */
    char msg[256];
} tk_t;

/* Key i (16 bytes), distinct for distinct i. */
static inline void tk_key(uint32_t i, uint8_t out[16])
{
    for (uint32_t j = 0; j < 16; j++)
        out[j] = (uint8_t)(i * 131u + j * 7u + (i >> 8) + 1u);
    out[15] = (uint8_t)(i >> 24);
    out[14] = (uint8_t)(i >> 16);
}

static inline void tk_keys(uint32_t first, uint32_t n, uint8_t (*out)[16])
{
    for (uint32_t i = 0; i < n; i++)
        tk_key(first + i, out[i]);
}

/* One tier "host0" (kind host) of `capacity` slots of `slot_size` bytes, one chain. */
static inline void tk_config(sched_config_t *cfg, uint64_t capacity, uint64_t slot_size)
{
    sched_config_defaults(cfg);
    cfg->n_tiers = 1;
    cfg->tiers[0] =
        (sched_tier_config_t){.tier_id = 1, .capacity = capacity, .slot_size = slot_size};
    snprintf(cfg->tiers[0].name, sizeof cfg->tiers[0].name, "host0");
    snprintf(cfg->tiers[0].kind, sizeof cfg->tiers[0].kind, "host");
    cfg->chains[0].n_tiers = 1;
    cfg->chains[0].tier_ids[0] = 1;
    cfg->leader_epoch = 7;
    snprintf(cfg->node_name, sizeof cfg->node_name, "test-coord");
    cfg->max_batch = 1024;
    cfg->max_requests = 64;
    cfg->max_window_keys = 8192;
    cfg->tier_timeout_ms = 2000;
}

static inline tk_t *tk_new(const sched_config_t *cfg)
{
    tk_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    t->sched = sched_actor_new(cfg);
    assert_non_null(t->sched);
    assert_int_equal(sched_actor_endpoint(t->sched, t->ep, sizeof t->ep), 0);
    bus_client_config_t cc = {
        .name = "test", .max_in_flight = 16, .default_timeout_ms = TK_CALL_MS};
    t->c = bus_client_new(t->ep, &cc);
    assert_non_null(t->c);
    t->req = calloc(1, sizeof *t->req);
    t->rep = calloc(1, sizeof *t->rep);
    t->arr = bus_arrays_new(BUS_MAX_ARRAY, BUS_MAX_BLOB);
    assert_true(t->req && t->rep && t->arr);
    return t;
}

static inline void tk_destroy(tk_t **tp)
{
    tk_t *t = *tp;
    if (!t)
        return;
    bus_client_destroy(&t->c);
    zactor_destroy(&t->sched);
    free(t->req);
    free(t->rep);
    bus_arrays_destroy(&t->arr);
    free(t);
    *tp = NULL;
}

/* Sends t->req (body already filled) with request arrays `ra`; returns the reply's
 * status code (0 = OK); the reply is in t->rep / t->arr, its message in t->msg. */
static inline int tk_call(tk_t *t, bus_arrays_t *ra)
{
    kvtier_Status st;
    memset(&st, 0, sizeof st);
    bus_arrays_clear(t->arr);
    int rc = bus_client_call(t->c, t->req, ra, NULL, 0, TK_CALL_MS, t->rep, t->arr, NULL, &st);
    snprintf(t->msg, sizeof t->msg, "%s", st.message);
    return rc < 0 ? -rc : 0;
}

static inline kvtier_Envelope *tk_req(tk_t *t, pb_size_t tag)
{
    bus_env_init(t->req, tag, "test");
    return t->req;
}

static inline bus_arrays_t tk_keys_arr(uint8_t (*keys)[16], uint32_t n)
{
    return (bus_arrays_t){.keys = {.keys = keys, .n = n, .cap = n}};
}

static inline int tk_register(tk_t *t, const char *id, uint64_t bytes_per_block)
{
    kvtier_RegisterInstanceRequest *r =
        &tk_req(t, kvtier_Envelope_register_instance_req_tag)->body.register_instance_req;
    r->has_spec = true;
    snprintf(r->spec.instance_id, sizeof r->spec.instance_id, "%s", id);
    snprintf(r->spec.model, sizeof r->spec.model, "llama-3-8b");
    snprintf(r->spec.dtype, sizeof r->spec.dtype, "bf16");
    r->spec.tokens_per_block = 16;
    r->spec.bytes_per_block = bytes_per_block;
    return tk_call(t, NULL);
}

static inline int tk_begin(tk_t *t, const char *inst, const char *req, uint64_t ttl_ms)
{
    kvtier_RequestBeginRequest *r =
        &tk_req(t, kvtier_Envelope_request_begin_req_tag)->body.request_begin_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", inst);
    r->has_ctx = true;
    snprintf(r->ctx.request_id, sizeof r->ctx.request_id, "%s", req);
    r->ctx.ttl_ms = ttl_ms;
    return tk_call(t, NULL);
}

static inline int tk_end(tk_t *t, const char *inst, const char *req)
{
    kvtier_RequestEndRequest *r =
        &tk_req(t, kvtier_Envelope_request_end_req_tag)->body.request_end_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", inst);
    snprintf(r->request_id, sizeof r->request_id, "%s", req);
    return tk_call(t, NULL);
}

static inline int tk_lookup(tk_t *t, const char *inst, const char *req, kvtier_LookupMode mode,
                            uint32_t window, uint8_t (*keys)[16], uint32_t n)
{
    kvtier_LookupRequest *r = &tk_req(t, kvtier_Envelope_lookup_req_tag)->body.lookup_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", inst);
    snprintf(r->request_id, sizeof r->request_id, "%s", req ? req : "");
    r->mode = mode;
    r->window = window;
    bus_arrays_t ra = tk_keys_arr(keys, n);
    return tk_call(t, &ra);
}

/* PREFIX lookup outside a request: the cached prefix length (or -code). */
static inline int tk_prefix(tk_t *t, uint8_t (*keys)[16], uint32_t n)
{
    int rc = tk_lookup(t, TK_INST, NULL, kvtier_LookupMode_LOOKUP_MODE_PREFIX, 0, keys, n);
    return rc ? -rc : (int)t->rep->body.lookup_rep.hit_count;
}

/* Is key i cached (PER_KEY lookup)? */
static inline bool tk_cached(tk_t *t, uint32_t i)
{
    uint8_t k[1][16];
    tk_key(i, k[0]);
    int rc = tk_lookup(t, TK_INST, NULL, kvtier_LookupMode_LOOKUP_MODE_PER_KEY, 0, k, 1);
    assert_int_equal(rc, 0);
    return t->rep->body.lookup_rep.hit_count == 1;
}

#define TK_FILL_IDS(r, inst, req)                                                                  \
    do {                                                                                           \
        snprintf((r)->instance_id, sizeof(r)->instance_id, "%s", inst);                            \
        snprintf((r)->request_id, sizeof(r)->request_id, "%s", req);                               \
    } while (0)

static inline int tk_prepare(tk_t *t, pb_size_t tag, const char *inst, const char *req,
                             uint8_t (*keys)[16], uint32_t n)
{
    kvtier_Envelope *e = tk_req(t, tag);
    if (tag == kvtier_Envelope_prepare_get_req_tag)
        TK_FILL_IDS(&e->body.prepare_get_req, inst, req);
    else if (tag == kvtier_Envelope_prepare_put_req_tag)
        TK_FILL_IDS(&e->body.prepare_put_req, inst, req);
    else
        TK_FILL_IDS(&e->body.prepare_prefetch_req, inst, req);
    bus_arrays_t ra = tk_keys_arr(keys, n);
    return tk_call(t, &ra);
}

static inline int tk_prepare_put(tk_t *t, const char *req, uint8_t (*keys)[16], uint32_t n)
{
    return tk_prepare(t, kvtier_Envelope_prepare_put_req_tag, TK_INST, req, keys, n);
}

static inline int tk_prepare_get(tk_t *t, const char *req, uint8_t (*keys)[16], uint32_t n)
{
    return tk_prepare(t, kvtier_Envelope_prepare_get_req_tag, TK_INST, req, keys, n);
}

/* checksums: one per token key (n_ck of them); mask NULL = all succeeded. */
static inline int tk_complete_put(tk_t *t, const char *req, uint64_t token_id, bool *mask,
                                  uint32_t n_mask, uint64_t *ck, uint32_t n_ck)
{
    kvtier_CompletePutRequest *r =
        &tk_req(t, kvtier_Envelope_complete_put_req_tag)->body.complete_put_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", TK_INST);
    snprintf(r->request_id, sizeof r->request_id, "%s", req);
    r->token_id = token_id;
    bus_arrays_t ra = {.mask = {.v = mask, .n = mask ? n_mask : 0, .cap = n_mask},
                       .checksums = {.v = ck, .n = n_ck, .cap = n_ck}};
    return tk_call(t, &ra);
}

static inline int tk_complete(tk_t *t, pb_size_t tag, const char *req, uint64_t token_id)
{
    kvtier_Envelope *e = tk_req(t, tag);
    if (tag == kvtier_Envelope_complete_get_req_tag) {
        TK_FILL_IDS(&e->body.complete_get_req, TK_INST, req);
        e->body.complete_get_req.token_id = token_id;
    } else {
        TK_FILL_IDS(&e->body.complete_prefetch_req, TK_INST, req);
        e->body.complete_prefetch_req.token_id = token_id;
    }
    return tk_call(t, NULL);
}

/* prepare_put + complete_put (all succeeded) of keys first..first+n-1 in request req. */
static inline int tk_put(tk_t *t, const char *req, uint32_t first, uint32_t n)
{
    uint8_t(*keys)[16] = calloc(n, 16);
    tk_keys(first, n, keys);
    int rc = tk_prepare_put(t, req, keys, n);
    free(keys);
    if (rc)
        return rc;
    uint64_t token = t->rep->body.prepare_put_rep.token.token_id;
    uint32_t m = t->arr->keys.n;
    uint64_t *ck = calloc(m ? m : 1, sizeof *ck);
    for (uint32_t i = 0; i < m; i++)
        ck[i] = 0xC0FFEE00u + i;
    rc = tk_complete_put(t, req, token, NULL, 0, ck, m);
    free(ck);
    return rc;
}

static inline int tk_touch(tk_t *t, uint8_t (*keys)[16], uint32_t n, uint64_t ttl_ms)
{
    kvtier_TouchRequest *r = &tk_req(t, kvtier_Envelope_touch_req_tag)->body.touch_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", TK_INST);
    r->ttl_ms = ttl_ms;
    bus_arrays_t ra = tk_keys_arr(keys, n);
    return tk_call(t, &ra);
}

static inline int tk_remove(tk_t *t, uint8_t (*keys)[16], uint32_t n)
{
    kvtier_RemoveRequest *r = &tk_req(t, kvtier_Envelope_remove_req_tag)->body.remove_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", TK_INST);
    bus_arrays_t ra = tk_keys_arr(keys, n);
    return tk_call(t, &ra);
}

/* A scheduler counter by name (all instances); UINT64_MAX when absent. */
static inline uint64_t tk_stat(tk_t *t, const char *name)
{
    tk_req(t, kvtier_Envelope_stats_req_tag);
    assert_int_equal(tk_call(t, NULL), 0);
    const kvtier_StatsReply *r = &t->rep->body.stats_rep;
    for (pb_size_t i = 0; i < r->counters_count; i++)
        if (strcmp(r->counters[i].name, name) == 0)
            return r->counters[i].value;
    return UINT64_MAX;
}

static inline const kvtier_TierInfo *tk_tier(tk_t *t, uint32_t tier_id)
{
    tk_req(t, kvtier_Envelope_cluster_info_req_tag);
    assert_int_equal(tk_call(t, NULL), 0);
    const kvtier_ClusterInfoReply *r = &t->rep->body.cluster_info_rep;
    for (pb_size_t i = 0; i < r->tiers_count; i++)
        if (r->tiers[i].tier_id == tier_id)
            return &r->tiers[i];
    return NULL;
}

/* Polls cond(t, arg) every few ms until true or TK_POLL_MS pass. */
static inline bool tk_poll(bool (*cond)(tk_t *t, void *arg), tk_t *t, void *arg)
{
    int64_t until = zclock_mono() + TK_POLL_MS;
    while (!cond(t, arg)) {
        if (zclock_mono() > until)
            return false;
        zclock_sleep(5);
    }
    return true;
}

typedef struct {
    uint32_t tier_id;
    bool up;
    uint64_t epoch;
} tk_tier_want_t;

static inline bool tk_tier_is(tk_t *t, void *arg)
{
    const tk_tier_want_t *w = arg;
    const kvtier_TierInfo *ti = tk_tier(t, w->tier_id);
    return ti && ti->up == w->up && (!w->up || ti->epoch == w->epoch);
}

/* Announces tier tier_id UP at endpoint with epoch and waits until it is writable. */
static inline void tk_tier_up(tk_t *t, uint32_t tier_id, const char *endpoint, uint64_t epoch,
                              uint64_t capacity, uint64_t slot_size)
{
    kvtier_TierInfo info;
    memset(&info, 0, sizeof info);
    info.tier_id = tier_id;
    snprintf(info.endpoint, sizeof info.endpoint, "%.*s", (int)sizeof info.endpoint - 1, endpoint);
    snprintf(info.host, sizeof info.host, "test-host");
    snprintf(info.shm, sizeof info.shm, "/kvtier-test-host0");
    info.epoch = epoch;
    info.capacity_slots = capacity;
    info.slot_bytes = slot_size;
    assert_int_equal(sched_actor_tier_change(t->sched, true, &info), 0);
    tk_tier_want_t w = {tier_id, true, epoch};
    assert_true(tk_poll(tk_tier_is, t, &w));
}

static inline void tk_tier_down(tk_t *t, uint32_t tier_id)
{
    kvtier_TierInfo info;
    memset(&info, 0, sizeof info);
    info.tier_id = tier_id;
    assert_int_equal(sched_actor_tier_change(t->sched, false, &info), 0);
    tk_tier_want_t w = {tier_id, false, 0};
    assert_true(tk_poll(tk_tier_is, t, &w));
}

/* A scheduler with one tier served by a fake tier actor, up and writable. */
typedef struct {
    tk_t *t;
    sched_fake_tier_t *ft;
    sched_config_t cfg;
} tk_env_t;

static inline void tk_env_start(tk_env_t *e, uint64_t capacity, void (*tweak)(sched_config_t *))
{
    memset(e, 0, sizeof *e);
    tk_config(&e->cfg, capacity, 4096);
    if (tweak)
        tweak(&e->cfg);
    e->ft = sched_fake_tier_new(1, capacity);
    assert_non_null(e->ft);
    e->t = tk_new(&e->cfg);
    tk_tier_up(e->t, 1, sched_fake_tier_endpoint(e->ft), 1, capacity, 4096);
    assert_int_equal(tk_register(e->t, TK_INST, 4096), 0);
}

static inline void tk_env_stop(tk_env_t *e)
{
    tk_destroy(&e->t);
    sched_fake_tier_destroy(&e->ft);
}

#endif
