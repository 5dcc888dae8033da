/* kvt_control.c — the control role of libkvtier (DESIGN.md §6, §9): instances,
 * request lifetime, lookups, the prepare/complete windows and their tokens,
 * touch, remove, cluster info and stats. One synchronous meta-plane call each.
 *
 * Owns the token pool. Never sends a request whose arguments it can see are
 * wrong (the server would refuse it anyway; the caller gets a clearer message
 * without the round trip), and never hands out a token whose payload does not
 * decode: such a window is closed at once (all keys failed) and the call fails. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kvt_internal.h"

/* Smallest token arrays: small windows reuse one token without regrowing. */
#define S_TOKEN_MIN_CAP 64u
/* Tries of kvt_stats_page when the counter list changes length between pages. */
#define S_STATS_ATTEMPTS 4

/* kvtier.h keeps copies of the protocol's bounds (it cannot include generated
 * code): they must be the wire's, and its strings wide enough for the wire's. */
#define S_HAS_ROOM(type, field, wire) (sizeof(((type *)0)->field) >= (wire))
_Static_assert(KVT_MAX_TIERS == BUS_MAX_TIERS, "kvtier.h KVT_MAX_TIERS: ClusterInfoReply.tiers");
_Static_assert(KVT_STATS_PAGE == BUS_STATS_PAGE_MAX,
               "kvtier.h KVT_STATS_PAGE: StatsReply.counters");
_Static_assert(KVT_KEY_BYTES == BUS_BLOCK_KEY_BYTES, "kvtier.h KVT_KEY_BYTES: BlockKey.key");
_Static_assert(S_HAS_ROOM(kvt_stat_t, name, BUS_STAT_NAME_MAX), "kvt_stat_t.name");
_Static_assert(S_HAS_ROOM(kvt_tier_info_t, name, BUS_TIER_NAME_MAX) &&
                   S_HAS_ROOM(kvt_tier_info_t, kind, BUS_TIER_KIND_MAX) &&
                   S_HAS_ROOM(kvt_tier_info_t, endpoint, BUS_TIER_ENDPOINT_MAX),
               "kvt_tier_info_t strings");
_Static_assert(S_HAS_ROOM(kvt_cluster_info_t, cluster, BUS_CLUSTER_MAX) &&
                   S_HAS_ROOM(kvt_cluster_info_t, leader_endpoint,
                              BUS_FIELD_SIZE(kvtier_ClusterInfoReply, leader_endpoint)) &&
                   S_HAS_ROOM(kvt_cluster_info_t, event_endpoint,
                              BUS_FIELD_SIZE(kvtier_ClusterInfoReply, event_endpoint)) &&
                   S_HAS_ROOM(kvt_cluster_info_t, event_replay_endpoint,
                              BUS_FIELD_SIZE(kvtier_ClusterInfoReply, event_replay_endpoint)) &&
                   S_HAS_ROOM(kvt_cluster_info_t, vllm_event_endpoint,
                              BUS_FIELD_SIZE(kvtier_ClusterInfoReply, vllm_event_endpoint)) &&
                   S_HAS_ROOM(kvt_cluster_info_t, vllm_replay_endpoint,
                              BUS_FIELD_SIZE(kvtier_ClusterInfoReply, vllm_replay_endpoint)),
               "kvt_cluster_info_t strings");

/* ---- token pool ------------------------------------------------------------ */

void kvti_segs_free(kvti_segs_t **sp)
{
    if (!sp || !*sp)
        return;
    kvti_segs_t *s = *sp;
    free(s->failed);
    free(s->hash);
    free(s->stage);
    free(s->staged);
    free(s->fetching);
    free(s);
    *sp = NULL;
}

static void s_token_free(struct kvt_token *t)
{
    kvti_segs_free(&t->segs);
    if (t->halves) {
        kvti_segs_free(&t->halves[0].segs);
        kvti_segs_free(&t->halves[1].segs);
    }
    free(t->keys);
    free(t->ok);
    free(t->checksums);
    free(t->payload);
    free(t->halves); /* views: their arrays are t's */
    free(t);
}

static int s_token_grow(struct kvt_token *t, uint32_t cap)
{
    if (cap < S_TOKEN_MIN_CAP)
        cap = S_TOKEN_MIN_CAP;
    if (t->cap >= cap)
        return 0;
    uint64_t pcap = KVT_TOKEN_PAYLOAD_MAX(cap);
    if (pcap > BUS_MAX_BLOB)
        pcap = BUS_MAX_BLOB;
    kvt_key_t *k = realloc(t->keys, (size_t)cap * sizeof *k);
    if (k)
        t->keys = k;
    bool *ok = realloc(t->ok, (size_t)cap * sizeof *ok);
    if (ok)
        t->ok = ok;
    uint64_t *cs = realloc(t->checksums, (size_t)cap * sizeof *cs);
    if (cs)
        t->checksums = cs;
    uint8_t *p = realloc(t->payload, (size_t)pcap);
    if (p)
        t->payload = p;
    if (!k || !ok || !cs || !p)
        return -1;
    t->cap = cap;
    t->payload_cap = (uint32_t)pcap;
    return 0;
}

struct kvt_token *kvti_token_acquire(kvt_client_t *c, uint32_t cap)
{
    struct kvt_token *t = c->free_tokens;
    if (t) {
        c->free_tokens = t->next;
        c->n_free_tokens--;
    } else {
        t = calloc(1, sizeof *t);
        if (!t)
            return NULL;
    }
    if (s_token_grow(t, cap) < 0) {
        s_token_free(t);
        return NULL;
    }
    t->owner = c;
    t->live = true;
    t->stale = false;
    t->leader_epoch = 0;
    t->jobs = 0;
    t->n = 0;
    t->n_get = 0;
    t->parent = NULL;
    t->payload_len = 0;
    t->imported = false;
    t->x_segments = 0;
    t->x_bpb = 0;
    if (t->segs)
        t->segs->segments = 0;
    t->prev = NULL;
    t->next = c->live_tokens;
    if (c->live_tokens)
        c->live_tokens->prev = t;
    c->live_tokens = t;
    return t;
}

void kvti_token_release(kvt_client_t *c, struct kvt_token *t)
{
    if (t->prev)
        t->prev->next = t->next;
    else
        c->live_tokens = t->next;
    if (t->next)
        t->next->prev = t->prev;
    t->live = false;
    t->prev = NULL;
    if (t->halves) /* a completed get+put token's halves go with it */
        t->halves[0].live = t->halves[1].live = false;
    if (c->n_free_tokens >= KVT_TOKEN_KEEP) {
        s_token_free(t);
        return;
    }
    t->next = c->free_tokens;
    c->free_tokens = t;
    c->n_free_tokens++;
}

static void s_free_list(struct kvt_token *t)
{
    while (t) {
        struct kvt_token *next = t->next;
        s_token_free(t);
        t = next;
    }
}

void kvti_tokens_free_all(kvt_client_t *c)
{
    s_free_list(c->live_tokens);
    s_free_list(c->free_tokens);
    c->live_tokens = c->free_tokens = NULL;
    c->n_free_tokens = 0;
}

uint32_t kvt_token_count(const kvt_token_t *tok)
{
    return tok ? tok->n : 0;
}

const kvt_key_t *kvt_token_keys(const kvt_token_t *tok)
{
    return tok ? tok->keys : NULL;
}

uint32_t kvt_token_tier(const kvt_token_t *tok, uint32_t i)
{
    if (!tok || i >= tok->n || i >= tok->view.n_entries)
        return 0;
    bus_token_entry_t e;
    bus_token_entry_at(&tok->view, i, &e);
    return e.tier < tok->view.n_tiers ? tok->view.tiers[e.tier].tier_id : 0;
}

/* ---- argument checks -------------------------------------------------------- */

static int s_check_keys(kvt_client_t *c, const char *what, const kvt_key_t *keys, uint32_t n)
{
    if (n > KVT_MAX_KEYS)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what, "%u keys, at most %u per call", n,
                         KVT_MAX_KEYS);
    if (n > 0 && !keys)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what, "keys is NULL with n = %u", n);
    return 0;
}

static void s_bind_keys(bus_arrays_t *arr, const kvt_key_t *keys, uint32_t n)
{
    /* kvt_key_t is 16 bytes without padding: the array is the wire's key array. */
    arr->keys.keys = (uint8_t(*)[BUS_KEY_LEN])(uintptr_t)keys;
    arr->keys.n = n;
    arr->keys.cap = n;
}

_Static_assert(sizeof(kvt_key_t) == BUS_KEY_LEN, "kvt_key_t must be exactly 16 bytes");

/* ---- registration and request lifetime -------------------------------------- */

int kvt_register_instance(kvt_client_t *c, const kvt_instance_t *spec)
{
    const char *W = "register_instance";
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (!spec)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "spec is NULL");
    int rc = kvti_check_id(c, W, "instance_id", spec->instance_id, false);
    if (rc < 0)
        return rc;
    bus_env_init(c->req, kvtier_Envelope_register_instance_req_tag, c->name);
    kvtier_InstanceSpec *s = &c->req->body.register_instance_req.spec;
    c->req->body.register_instance_req.has_spec = true;
    if (spec->model && strlen(spec->model) >= sizeof s->model)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "model is longer than %zu bytes",
                         sizeof s->model - 1);
    if (spec->dtype && strlen(spec->dtype) >= sizeof s->dtype)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "dtype is longer than %zu bytes",
                         sizeof s->dtype - 1);
    if (spec->tokens_per_block == 0 || spec->bytes_per_block == 0)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "tokens_per_block (%u) and bytes_per_block (%llu) must be > 0",
                         spec->tokens_per_block, (unsigned long long)spec->bytes_per_block);
    snprintf(s->instance_id, sizeof s->instance_id, "%s", spec->instance_id);
    snprintf(s->model, sizeof s->model, "%s", spec->model ? spec->model : "");
    snprintf(s->dtype, sizeof s->dtype, "%s", spec->dtype ? spec->dtype : "");
    if (spec->segments > KVT_MAX_SEGMENTS ||
        (spec->segments > 1 && spec->bytes_per_block % spec->segments != 0))
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "segments %u: want at most %u, and a divisor of bytes_per_block %llu",
                         spec->segments, KVT_MAX_SEGMENTS,
                         (unsigned long long)spec->bytes_per_block);
    s->tokens_per_block = spec->tokens_per_block;
    s->bytes_per_block = spec->bytes_per_block;
    s->segments = spec->segments > 1 ? spec->segments : 0;
    rc = kvti_meta_call(c, W, true, NULL, NULL);
    if (rc == 0) /* a new leader is told again (kvtier.h "Failover") */
        kvti_remember_instance(c, &c->req->body.register_instance_req.spec);
    return rc;
}

_Static_assert(KVT_BRANCH_NAME_MAX >= sizeof(((kvtier_RequestBeginReply *)0)->branch_name),
               "a branch name fits kvt_request_begin_info_t");

int kvt_request_begin_ex(kvt_client_t *c, const kvt_request_t *req, kvt_request_begin_info_t *info)
{
    const char *W = "request_begin";
    if (info)
        memset(info, 0, sizeof *info);
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (!req)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "req is NULL");
    int rc = kvti_check_id(c, W, "instance_id", req->instance_id, false);
    if (rc == 0)
        rc = kvti_check_id(c, W, "request_id", req->request_id, false);
    if (rc < 0)
        return rc;
    bus_env_init(c->req, kvtier_Envelope_request_begin_req_tag, c->name);
    kvtier_RequestBeginRequest *b = &c->req->body.request_begin_req;
    snprintf(b->instance_id, sizeof b->instance_id, "%s", req->instance_id);
    b->has_ctx = true;
    snprintf(b->ctx.request_id, sizeof b->ctx.request_id, "%s", req->request_id);
    b->ctx.ttl_ms = req->ttl_ms;
    b->ctx.total_blocks = req->total_blocks;
    /* a resend of the same context answers OK (begun already) */
    rc = kvti_meta_call(c, W, true, NULL, NULL);
    if (rc < 0)
        return rc;
    const kvtier_RequestBeginReply *r = &c->rep->body.request_begin_rep;
    bool has = c->rep->which_body == kvtier_Envelope_request_begin_rep_tag;
    kvti_remember_request(c, req->instance_id, req->request_id, req->ttl_ms, req->total_blocks,
                          has ? r->branch : 0, has ? r->branch_name : "");
    if (info && has) {
        info->branch = r->branch;
        info->head_tier_id = r->head_tier_id;
        snprintf(info->branch_name, sizeof info->branch_name, "%s", r->branch_name);
    }
    return 0;
}

int kvt_request_begin(kvt_client_t *c, const kvt_request_t *req)
{
    return kvt_request_begin_ex(c, req, NULL);
}

int kvt_request_end(kvt_client_t *c, const char *instance_id, const char *request_id,
                    kvt_request_end_info_t *info)
{
    const char *W = "request_end";
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (info)
        memset(info, 0, sizeof *info);
    int rc = kvti_check_id(c, W, "instance_id", instance_id, false);
    if (rc == 0)
        rc = kvti_check_id(c, W, "request_id", request_id, false);
    if (rc < 0)
        return rc;
    bus_env_init(c->req, kvtier_Envelope_request_end_req_tag, c->name);
    kvtier_RequestEndRequest *e = &c->req->body.request_end_req;
    snprintf(e->instance_id, sizeof e->instance_id, "%s", instance_id);
    snprintf(e->request_id, sizeof e->request_id, "%s", request_id);
    /* ending a request that is not open answers OK: safe to send again */
    rc = kvti_meta_call(c, W, true, NULL, NULL);
    kvti_forget_request(c, instance_id, request_id); /* ended, or left to request_idle */
    if (rc == 0 && info && c->rep->which_body == kvtier_Envelope_request_end_rep_tag) {
        const kvtier_RequestEndReply *r = &c->rep->body.request_end_rep;
        info->closed_windows = r->closed_windows_count;
        info->released_pins = r->released_pins;
        info->aborted_reservations = r->aborted_reservations;
    }
    return rc;
}

/* ---- lookup ----------------------------------------------------------------- */

int kvt_lookup(kvt_client_t *c, const char *instance_id, const char *request_id,
               kvt_lookup_mode_t mode, uint32_t window, const kvt_key_t *keys, uint32_t n,
               kvt_lookup_result_t *out)
{
    const char *W = "lookup";
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (!out)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "out is NULL");
    out->hit_count = 0;
    out->prefetch_advised = false;
    int rc = kvti_check_id(c, W, "instance_id", instance_id, false);
    if (rc == 0)
        rc = kvti_check_id(c, W, "request_id", request_id, true);
    if (rc == 0)
        rc = s_check_keys(c, W, keys, n);
    if (rc < 0)
        return rc;
    if (mode != KVT_LOOKUP_PREFIX && mode != KVT_LOOKUP_REVERSE && mode != KVT_LOOKUP_PER_KEY)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "unknown lookup mode %d", (int)mode);
    bool *hit = out->hit;
    uint32_t *tiers = out->tier_ids;
    if (!hit || !tiers) {
        if (!c->scratch_hit)
            c->scratch_hit = calloc(KVT_MAX_KEYS, sizeof *c->scratch_hit);
        if (!c->scratch_tiers)
            c->scratch_tiers = calloc(KVT_MAX_KEYS, sizeof *c->scratch_tiers);
        if (!c->scratch_hit || !c->scratch_tiers)
            return kvti_fail(c, KVT_INTERNAL, W, "out of memory");
        hit = hit ? hit : c->scratch_hit;
        tiers = tiers ? tiers : c->scratch_tiers;
    }
    bus_env_init(c->req, kvtier_Envelope_lookup_req_tag, c->name);
    kvtier_LookupRequest *l = &c->req->body.lookup_req;
    snprintf(l->instance_id, sizeof l->instance_id, "%s", instance_id);
    snprintf(l->request_id, sizeof l->request_id, "%s", request_id ? request_id : "");
    l->mode = (kvtier_LookupMode)mode;
    l->window = window;
    bus_arrays_t req_arr = {0}, rep_arr = {0};
    s_bind_keys(&req_arr, keys, n);
    rep_arr.mask = (bus_bools_t){.v = hit, .cap = n};
    rep_arr.tier_ids = (bus_u32s_t){.v = tiers, .cap = n};
    rc = kvti_meta_call(c, W, true, &req_arr, &rep_arr);
    if (rc < 0)
        return rc;
    kvti_touch_request(c, instance_id, request_id);
    /* Keys past the ones the scheduler examined (a prefix stops at its first miss)
     * are misses. */
    for (uint32_t i = rep_arr.mask.n; i < n; i++)
        hit[i] = false;
    for (uint32_t i = rep_arr.tier_ids.n; i < n; i++)
        tiers[i] = 0;
    if (c->rep->which_body == kvtier_Envelope_lookup_rep_tag) {
        out->hit_count = c->rep->body.lookup_rep.hit_count;
        out->prefetch_advised = c->rep->body.lookup_rep.prefetch_advised;
    }
    return 0;
}

/* ---- windows ------------------------------------------------------------------ */

typedef struct {
    const char *prepare;  /* names for messages */
    const char *complete; /* ... */
    pb_size_t prep_tag;
    pb_size_t comp_tag;
    pb_size_t prep_rep_tag;
} s_window_t;

static const s_window_t s_windows[] = {
    [BUS_TOKEN_GET] = {"prepare_get", "complete_get", kvtier_Envelope_prepare_get_req_tag,
                       kvtier_Envelope_complete_get_req_tag, kvtier_Envelope_prepare_get_rep_tag},
    [BUS_TOKEN_PUT] = {"prepare_put", "complete_put", kvtier_Envelope_prepare_put_req_tag,
                       kvtier_Envelope_complete_put_req_tag, kvtier_Envelope_prepare_put_rep_tag},
    [BUS_TOKEN_PREFETCH] = {"prepare_prefetch", "complete_prefetch",
                            kvtier_Envelope_prepare_prefetch_req_tag,
                            kvtier_Envelope_complete_prefetch_req_tag,
                            kvtier_Envelope_prepare_prefetch_rep_tag},
    [BUS_TOKEN_GET_PUT] = {"prepare", "complete", kvtier_Envelope_prepare_req_tag,
                           kvtier_Envelope_complete_req_tag, kvtier_Envelope_prepare_rep_tag},
};

/* Sends the complete of t's window with `success` (n flags). */
static int s_send_complete(kvt_client_t *c, struct kvt_token *t, const bool *success,
                           const char *what)
{
    const s_window_t *w = &s_windows[t->kind];
    bus_env_init(c->req, w->comp_tag, c->name);
    bus_arrays_t req_arr = {0};
    req_arr.mask = (bus_bools_t){.v = (bool *)(uintptr_t)success, .n = t->n, .cap = t->n};
    /* The three complete bodies start with the same fields. */
    switch (t->kind) {
    case BUS_TOKEN_GET: {
        kvtier_CompleteGetRequest *r = &c->req->body.complete_get_req;
        snprintf(r->instance_id, sizeof r->instance_id, "%s", t->instance_id);
        snprintf(r->request_id, sizeof r->request_id, "%s", t->request_id);
        r->job_id = t->prepare_id;
        r->token_id = t->token_id;
        r->leader_epoch = t->leader_epoch;
        break;
    }
    case BUS_TOKEN_PUT: {
        kvtier_CompletePutRequest *r = &c->req->body.complete_put_req;
        snprintf(r->instance_id, sizeof r->instance_id, "%s", t->instance_id);
        snprintf(r->request_id, sizeof r->request_id, "%s", t->request_id);
        r->job_id = t->prepare_id;
        r->token_id = t->token_id;
        r->leader_epoch = t->leader_epoch;
        req_arr.checksums = (bus_u64s_t){.v = t->checksums, .n = t->n, .cap = t->n};
        break;
    }
    case BUS_TOKEN_PREFETCH: {
        kvtier_CompletePrefetchRequest *r = &c->req->body.complete_prefetch_req;
        snprintf(r->instance_id, sizeof r->instance_id, "%s", t->instance_id);
        snprintf(r->request_id, sizeof r->request_id, "%s", t->request_id);
        r->job_id = t->prepare_id;
        r->token_id = t->token_id;
        r->leader_epoch = t->leader_epoch;
        break;
    }
    case BUS_TOKEN_GET_PUT: { /* the flags of both halves; checksums of the put half */
        kvtier_CompleteRequest *r = &c->req->body.complete_req;
        snprintf(r->instance_id, sizeof r->instance_id, "%s", t->instance_id);
        snprintf(r->request_id, sizeof r->request_id, "%s", t->request_id);
        r->job_id = t->prepare_id;
        r->token_id = t->token_id;
        r->leader_epoch = t->leader_epoch;
        uint32_t np = t->n - t->n_get;
        req_arr.checksums = (bus_u64s_t){.v = t->checksums + t->n_get, .n = np, .cap = np};
        break;
    }
    case BUS_TOKEN_ADMIN: /* the scheduler's own kinds: a client never holds one */
    case BUS_TOKEN_COPY:
        break;
    }
    /* the same token again: a complete that concluded is answered as it was */
    return kvti_meta_call(c, what, true, &req_arr, NULL);
}

/* Half h of get+put token t: a view of kind GET (h 0, keys [0, n_get)) or PUT (h 1,
 * the rest) over t's arrays, payload and decoded view. */
static void s_half_init(struct kvt_token *t, int h)
{
    struct kvt_token *v = &t->halves[h];
    uint32_t off = h == 0 ? 0 : t->n_get;
    kvti_segs_t *segs = v->segs; /* the half's own, kept with it in the pool */
    if (segs)
        segs->segments = 0;
    *v = (struct kvt_token){.owner = t->owner,
                            .live = true,
                            .kind = h == 0 ? BUS_TOKEN_GET : BUS_TOKEN_PUT,
                            .token_id = t->token_id,
                            .prepare_id = t->prepare_id,
                            .lease_ms = t->lease_ms,
                            .minted_ms = t->minted_ms,
                            .leader_epoch = t->leader_epoch,
                            .n = h == 0 ? t->n_get : t->n - t->n_get,
                            .keys = t->keys + off,
                            .ok = t->ok + off,
                            .checksums = t->checksums + off,
                            .payload = t->payload,
                            .payload_len = t->payload_len,
                            .payload_cap = t->payload_cap,
                            .view = t->view,
                            .parent = t,
                            .segs = segs};
    v->cap = v->n;
    memcpy(v->instance_id, t->instance_id, sizeof v->instance_id);
    memcpy(v->request_id, t->request_id, sizeof v->request_id);
    /* the whole payload travels (its MAC covers it); the half's entries are its part */
    v->view.n_entries = v->n;
    v->view.entries =
        t->view.entries ? t->view.entries + (size_t)off * BUS_TOKEN_ENTRY_BYTES : NULL;
}

/* The split of a get+put token: the reply's hit_count is the token's n_get. */
static int s_halves(kvt_client_t *c, struct kvt_token *t, const char *what)
{
    uint32_t hits = c->rep->body.prepare_rep.hit_count;
    if (t->payload_len == 0 && t->n == 0)
        t->view.meta.n_get = 0;
    if (t->view.meta.n_get != hits || hits > t->n)
        return kvti_fail(c, KVT_INTERNAL, what,
                         "the scheduler's token splits at %u of %u keys, its reply says %u hits",
                         t->view.meta.n_get, t->n, hits);
    t->n_get = hits;
    if (!t->halves && !(t->halves = calloc(2, sizeof *t->halves)))
        return kvti_fail(c, KVT_INTERNAL, what, "out of memory for the token's halves");
    s_half_init(t, 0);
    s_half_init(t, 1);
    return 0;
}

/* Reads the Token of a prepare reply into t; 0 or -code with the message set. */
static int s_take_token(kvt_client_t *c, struct kvt_token *t, const char *what,
                        const bus_arrays_t *rep_arr)
{
    const kvtier_Token *tok = NULL;
    bool has = false;
    switch (t->kind) {
    case BUS_TOKEN_GET:
        has = c->rep->body.prepare_get_rep.has_token;
        tok = &c->rep->body.prepare_get_rep.token;
        break;
    case BUS_TOKEN_PUT:
        has = c->rep->body.prepare_put_rep.has_token;
        tok = &c->rep->body.prepare_put_rep.token;
        break;
    case BUS_TOKEN_PREFETCH:
        has = c->rep->body.prepare_prefetch_rep.has_token;
        tok = &c->rep->body.prepare_prefetch_rep.token;
        break;
    case BUS_TOKEN_GET_PUT:
        has = c->rep->body.prepare_rep.has_token;
        tok = &c->rep->body.prepare_rep.token;
        break;
    case BUS_TOKEN_ADMIN: /* never a prepare's */
    case BUS_TOKEN_COPY:
        break;
    }
    t->token_id = has ? tok->token_id : 0;
    t->lease_ms = has ? tok->lease_ms : 0;
    t->minted_ms = zclock_mono();
    t->leader_epoch = c->rep->leader_epoch; /* its completes carry it */
    t->n = rep_arr->keys.n;
    t->payload_len = rep_arr->payload.len;
    memset(t->ok, 0, (size_t)t->n * sizeof *t->ok);
    memset(t->checksums, 0, (size_t)t->n * sizeof *t->checksums);
    memset(&t->view, 0, sizeof t->view);
    t->view.kind = t->kind;
    if (t->payload_len == 0 && t->n == 0)
        return t->kind == BUS_TOKEN_GET_PUT ? s_halves(c, t, what) : 0;
    char err[256];
    if (bus_token_decode(t->payload, t->payload_len, &t->view, err, sizeof err) < 0)
        return kvti_fail(c, KVT_INTERNAL, what, "the scheduler's token does not decode: %s", err);
    if (t->view.kind != t->kind)
        return kvti_fail(c, KVT_INTERNAL, what, "the scheduler's token is of kind %d, not %d",
                         (int)t->view.kind, (int)t->kind);
    if (t->view.n_entries != t->n)
        return kvti_fail(c, KVT_INTERNAL, what, "the scheduler's token has %u entries for %u keys",
                         t->view.n_entries, t->n);
    if (t->kind == BUS_TOKEN_GET_PUT)
        return s_halves(c, t, what);
    return 0;
}

/* A put's optional parent and token ids: the count is checked against the
 * bound and the keys here, against the instance's tokens_per_block by the
 * scheduler (the client does not know every instance's spec). */
static int s_check_meta(kvt_client_t *c, const char *what, const kvt_put_meta_t *meta, uint32_t n)
{
    if (!meta)
        return 0;
    if (meta->n_token_ids > KVT_MAX_TOKEN_IDS)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "%u token ids: at most %d per call (KVT_MAX_TOKEN_IDS); put fewer keys "
                         "per call",
                         meta->n_token_ids, KVT_MAX_TOKEN_IDS);
    if (meta->n_token_ids && !meta->token_ids)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what, "n_token_ids is %u but token_ids is NULL",
                         meta->n_token_ids);
    if (n && meta->n_token_ids % n != 0)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "%u token ids for %u keys: give tokens_per_block ids per key (or none)",
                         meta->n_token_ids, n);
    return 0;
}

static int s_prepare(kvt_client_t *c, bus_token_kind_t kind, const char *instance_id,
                     const char *request_id, const kvt_key_t *keys, uint32_t n,
                     const kvt_put_meta_t *meta, kvt_token_t **tok)
{
    const s_window_t *w = &s_windows[kind];
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (!tok)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, w->prepare, "tok is NULL");
    *tok = NULL;
    int rc = kvti_check_id(c, w->prepare, "instance_id", instance_id, false);
    if (rc == 0)
        rc = kvti_check_id(c, w->prepare, "request_id", request_id, false);
    if (rc == 0)
        rc = s_check_keys(c, w->prepare, keys, n);
    if (rc == 0)
        rc = s_check_meta(c, w->prepare, meta, n);
    if (rc < 0)
        return rc;
    struct kvt_token *t = kvti_token_acquire(c, n);
    if (!t)
        return kvti_fail(c, KVT_INTERNAL, w->prepare, "out of memory for a token of %u keys", n);
    t->kind = kind;
    snprintf(t->instance_id, sizeof t->instance_id, "%s", instance_id);
    snprintf(t->request_id, sizeof t->request_id, "%s", request_id);
    if (++c->prepare_seq == 0) /* job_id 0 is "none" on the wire */
        ++c->prepare_seq;
    t->prepare_id = c->prepare_seq;

    bus_env_init(c->req, w->prep_tag, c->name);
    /* The four prepare bodies begin alike (a put's and a get+put's own fields follow
     * keys). */
    kvtier_PrepareGetRequest *p = &c->req->body.prepare_get_req;
#define S_SAME_AT(m)                                                                               \
    (offsetof(kvtier_PrepareGetRequest, m) == offsetof(kvtier_PreparePutRequest, m) &&             \
     offsetof(kvtier_PrepareGetRequest, m) == offsetof(kvtier_PreparePrefetchRequest, m) &&        \
     offsetof(kvtier_PrepareGetRequest, m) == offsetof(kvtier_PrepareRequest, m))
    _Static_assert(S_SAME_AT(instance_id) && S_SAME_AT(request_id) && S_SAME_AT(job_id) &&
                       S_SAME_AT(keys) &&
                       sizeof(kvtier_PrepareGetRequest) == sizeof(kvtier_PreparePrefetchRequest),
                   "prepare bodies differ");
#undef S_SAME_AT
    snprintf(p->instance_id, sizeof p->instance_id, "%s", instance_id);
    snprintf(p->request_id, sizeof p->request_id, "%s", request_id);
    p->job_id = t->prepare_id;
    bus_arrays_t req_arr = {0}, rep_arr = {0};
    s_bind_keys(&req_arr, keys, n);
    if (kind == BUS_TOKEN_PUT && meta && meta->parent) {
        kvtier_PreparePutRequest *pp = &c->req->body.prepare_put_req;
        pp->parent_key.size = KVT_KEY_BYTES;
        memcpy(pp->parent_key.bytes, meta->parent->b, KVT_KEY_BYTES);
    }
    if (kind == BUS_TOKEN_GET_PUT) {
        kvtier_PrepareRequest *pr = &c->req->body.prepare_req;
        pr->mode = kvtier_LookupMode_LOOKUP_MODE_PREFIX;
        if (meta && meta->parent) {
            pr->parent_key.size = KVT_KEY_BYTES;
            memcpy(pr->parent_key.bytes, meta->parent->b, KVT_KEY_BYTES);
        }
    }
    if (meta)
        req_arr.token_ids = (bus_u32s_t){
            .v = (uint32_t *)meta->token_ids, .n = meta->n_token_ids, .cap = meta->n_token_ids};
    rep_arr.keys = (bus_keys_t){.keys = (uint8_t(*)[BUS_KEY_LEN])t->keys, .cap = n};
    rep_arr.payload = (bus_blob_t){.data = t->payload, .cap = t->payload_cap};
    /* BUSY: a full head tier is demoting to make room and nothing was reserved
     * (nor pinned, for a get+put), so sending a put again is safe; backs off 1, 2,
     * 4 .. 32 ms within timeout_ms. A prefetch is not retried: its blocks can be
     * loaded from where they are meanwhile, which beats waiting for room. */
    bool retry_busy = kind == BUS_TOKEN_PUT || kind == BUS_TOKEN_GET_PUT;
    int64_t give_up = zclock_mono() + c->timeout_ms;
    for (int pause = 1;; pause = pause < 32 ? 2 * pause : 32) {
        /* the same job_id again: a resend cancels the window it opened */
        rc = kvti_meta_call(c, w->prepare, true, &req_arr, &rep_arr);
        if (rc != -KVT_BUSY || !retry_busy || zclock_mono() + pause > give_up)
            break;
        zclock_sleep(pause);
        rep_arr.keys.n = 0;
        rep_arr.payload.len = 0;
    }
    if (rc == 0 && c->rep->which_body != w->prep_rep_tag)
        rc = kvti_fail(c, KVT_INTERNAL, w->prepare, "reply without a body");
    if (rc == 0)
        rc = s_take_token(c, t, w->prepare, &rep_arr);
    if (rc < 0) {
        if (c->rep->which_body == w->prep_rep_tag && t->token_id) {
            /* A window was opened with a token we cannot use: close it now (all
             * keys failed) rather than leave pins or reservations to the lease. */
            char keep[KVT_ERR_MAX];
            snprintf(keep, sizeof keep, "%s", c->err);
            t->n = rep_arr.keys.n;
            t->n_get = 0; /* all flags off: no checksums are sent */
            memset(t->ok, 0, (size_t)t->n * sizeof *t->ok);
            memset(t->checksums, 0, (size_t)t->n * sizeof *t->checksums);
            (void)s_send_complete(c, t, t->ok, w->complete);
            snprintf(c->err, sizeof c->err, "%s", keep);
        }
        kvti_token_release(c, t);
        return rc;
    }
    kvti_touch_request(c, instance_id, request_id);
    *tok = t;
    return 0;
}

/* A token of a leader that is gone (kvti_recover marked it): its window went with
 * that leader. Released; -KVT_ABORTED, once. */
static int s_aborted(kvt_client_t *c, struct kvt_token *t, kvt_token_t **tokp, const char *what)
{
    uint64_t id = t->token_id, epoch = t->leader_epoch;
    kvti_token_release(c, t);
    *tokp = NULL;
    return kvti_fail(c, KVT_ABORTED, what,
                     "token %" PRIu64 " was minted by the leader of epoch %" PRIu64
                     ", which is gone (leader now %s, epoch %" PRIu64
                     "): nothing of its window is applied at this leader (a complete whose "
                     "reply was lost may have committed at the old one); prepare again",
                     id, epoch, c->leader, c->leader_epoch);
}

/* A layer-wise put stopped before its last segment has no key to commit: success
 * flags saying otherwise would commit part of a block. 0, or -INVALID_ARGUMENT. */
static int s_layers_unfinished(kvt_client_t *c, const struct kvt_token *t, const bool *success,
                               const char *what)
{
    const kvti_segs_t *g = t->segs;
    if (!success || !g || !g->segments || g->next == g->segments)
        return 0;
    for (uint32_t i = 0; i < t->n; i++)
        if (success[i])
            return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                             "key %u: its layer-wise put stopped at segment %u of %u, so it "
                             "cannot commit: give false (or NULL) for it (the token is kept)",
                             i, g->next, g->segments);
    return 0;
}

static int s_complete(kvt_client_t *c, bus_token_kind_t kind, kvt_token_t **tokp,
                      const bool *success, kvt_complete_info_t *info)
{
    const s_window_t *w = &s_windows[kind];
    if (info)
        *info = (kvt_complete_info_t){0};
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (!tokp || !*tokp)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, w->complete, "no token");
    struct kvt_token *t = *tokp;
    if (t->owner != c || !t->live)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, w->complete,
                         "the token belongs to another handle or was already completed");
    if (t->parent)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, w->complete,
                         "the token is a half of a kvt_prepare token: complete that one with "
                         "kvt_complete (both halves at once)");
    if (t->imported)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, w->complete, "%s", KVTI_IMPORTED_NO_COMPLETE);
    if (t->kind != kind)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, w->complete, "the token comes from %s",
                         s_windows[t->kind].prepare);
    if (t->jobs > 0)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, w->complete,
                         "a job on this token is still in flight: collect it with "
                         "kvt_get_finished or kvt_wait first (the token is kept)");
    if (t->stale)
        return s_aborted(c, t, tokp, w->complete);
    if (s_layers_unfinished(c, t, success, w->complete) < 0)
        return -KVT_INVALID_ARGUMENT;
    /* BUSY: the scheduler still copies the prefetch window (its CopyPrefetch job
     * gave up first): nothing was concluded, so the complete is sent again
     * (1, 2, 4 .. 32 ms) within timeout_ms; still BUSY, the token is kept. */
    int64_t give_up = zclock_mono() + c->timeout_ms;
    int rc;
    for (int pause = 1;; pause = pause < 32 ? 2 * pause : 32) {
        rc = s_send_complete(c, t, success ? success : t->ok, w->complete);
        if (rc != -KVT_BUSY || zclock_mono() + pause > give_up)
            break;
        zclock_sleep(pause);
    }
    kvti_touch_request(c, t->instance_id, t->request_id);
    if (rc == -KVT_BUSY)
        return rc; /* the window is still held: complete again later (the token is kept) */
    if (rc == 0 && info && c->rep->which_body == kvtier_Envelope_complete_put_rep_tag)
        *info = (kvt_complete_info_t){.committed = c->rep->body.complete_put_rep.committed,
                                      .failed = c->rep->body.complete_put_rep.failed};
    else if (rc == 0 && info && c->rep->which_body == kvtier_Envelope_complete_get_rep_tag)
        info->released = c->rep->body.complete_get_rep.released;
    kvti_token_release(c, t);
    *tokp = NULL;
    return rc;
}

int kvt_prepare_get(kvt_client_t *c, const char *instance_id, const char *request_id,
                    const kvt_key_t *keys, uint32_t n, kvt_token_t **tok)
{
    return s_prepare(c, BUS_TOKEN_GET, instance_id, request_id, keys, n, NULL, tok);
}

int kvt_complete_get(kvt_client_t *c, kvt_token_t **tok, const bool *success)
{
    return s_complete(c, BUS_TOKEN_GET, tok, success, NULL);
}

int kvt_prepare_put(kvt_client_t *c, const char *instance_id, const char *request_id,
                    const kvt_key_t *keys, uint32_t n, kvt_token_t **tok)
{
    return s_prepare(c, BUS_TOKEN_PUT, instance_id, request_id, keys, n, NULL, tok);
}

int kvt_prepare_put_ex(kvt_client_t *c, const char *instance_id, const char *request_id,
                       const kvt_key_t *keys, uint32_t n, const kvt_put_meta_t *meta,
                       kvt_token_t **tok)
{
    return s_prepare(c, BUS_TOKEN_PUT, instance_id, request_id, keys, n, meta, tok);
}

int kvt_complete_put(kvt_client_t *c, kvt_token_t **tok, const bool *success)
{
    return s_complete(c, BUS_TOKEN_PUT, tok, success, NULL);
}

int kvt_complete_put_ex(kvt_client_t *c, kvt_token_t **tok, const bool *success,
                        kvt_complete_info_t *info)
{
    return s_complete(c, BUS_TOKEN_PUT, tok, success, info);
}

int kvt_prepare_prefetch(kvt_client_t *c, const char *instance_id, const char *request_id,
                         const kvt_key_t *keys, uint32_t n, kvt_token_t **tok)
{
    return s_prepare(c, BUS_TOKEN_PREFETCH, instance_id, request_id, keys, n, NULL, tok);
}

int kvt_complete_prefetch(kvt_client_t *c, kvt_token_t **tok, const bool *success)
{
    return s_complete(c, BUS_TOKEN_PREFETCH, tok, success, NULL);
}

/* ---- a request in two round trips (issue 13 §2) ---------------------------------- */

int kvt_prepare(kvt_client_t *c, const char *instance_id, const char *request_id,
                const kvt_key_t *keys, uint32_t n, const kvt_put_meta_t *meta, kvt_token_t **tok,
                kvt_prepare_info_t *info)
{
    if (info)
        *info = (kvt_prepare_info_t){0};
    if (c && n == 0) /* the scheduler would refuse it: say so without the round trip */
        return kvti_fail(c, KVT_INVALID_ARGUMENT, "prepare",
                         "no keys: a prepare covers the request's blocks in prompt order");
    int rc = s_prepare(c, BUS_TOKEN_GET_PUT, instance_id, request_id, keys, n, meta, tok);
    if (rc == 0 && info) {
        info->hit_count = (*tok)->n_get;
        info->skipped = c->rep->body.prepare_rep.skipped;
    }
    return rc;
}

kvt_token_t *kvt_token_half(kvt_token_t *tok, kvt_half_t half)
{
    if (!tok || tok->kind != BUS_TOKEN_GET_PUT || !tok->halves || (unsigned)half > KVT_HALF_PUT)
        return NULL;
    return &tok->halves[half];
}

int kvt_complete(kvt_client_t *c, kvt_token_t **tokp, const bool *get_success,
                 const bool *put_success, kvt_complete_info_t *info)
{
    const char *W = "complete";
    if (info)
        *info = (kvt_complete_info_t){0};
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (!tokp || !*tokp)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "no token");
    struct kvt_token *t = *tokp;
    if (t->owner != c || !t->live)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "the token belongs to another handle or was already completed");
    if (t->parent)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "the token is a half: complete the token kvt_prepare returned");
    if (t->imported) /* never: a combined token is not exported; kept for the rule */
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "%s", KVTI_IMPORTED_NO_COMPLETE);
    if (t->kind != BUS_TOKEN_GET_PUT)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "the token comes from %s: complete it with kvt_complete_%s",
                         s_windows[t->kind].prepare, s_windows[t->kind].prepare + 8);
    if (t->halves[0].jobs > 0 || t->halves[1].jobs > 0)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "a job on the token's %s half is still in flight: collect it with "
                         "kvt_get_finished or kvt_wait first (the token is kept)",
                         t->halves[0].jobs > 0 ? "get" : "put");
    if (t->stale)
        return s_aborted(c, t, tokp, W);
    if (s_layers_unfinished(c, &t->halves[1], put_success, W) < 0)
        return -KVT_INVALID_ARGUMENT;
    /* the halves' flags are t's (views): given ones replace the recorded ones */
    if (get_success)
        memcpy(t->ok, get_success, (size_t)t->n_get * sizeof *t->ok);
    if (put_success)
        memcpy(t->ok + t->n_get, put_success, (size_t)(t->n - t->n_get) * sizeof *t->ok);
    int rc = s_send_complete(c, t, t->ok, W);
    kvti_touch_request(c, t->instance_id, t->request_id);
    if (rc == 0 && info && c->rep->which_body == kvtier_Envelope_complete_rep_tag)
        *info = (kvt_complete_info_t){.released = c->rep->body.complete_rep.released,
                                      .committed = c->rep->body.complete_rep.committed,
                                      .failed = c->rep->body.complete_rep.failed};
    kvti_token_release(c, t);
    *tokp = NULL;
    return rc;
}

/* ---- maintenance and cluster ---------------------------------------------------- */

int kvt_touch(kvt_client_t *c, const char *instance_id, const kvt_key_t *keys, uint32_t n,
              uint64_t ttl_ms, uint32_t *touched)
{
    const char *W = "touch";
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (touched)
        *touched = 0;
    int rc = kvti_check_id(c, W, "instance_id", instance_id, false);
    if (rc == 0)
        rc = s_check_keys(c, W, keys, n);
    if (rc < 0)
        return rc;
    bus_env_init(c->req, kvtier_Envelope_touch_req_tag, c->name);
    kvtier_TouchRequest *t = &c->req->body.touch_req;
    snprintf(t->instance_id, sizeof t->instance_id, "%s", instance_id);
    t->ttl_ms = ttl_ms;
    bus_arrays_t req_arr = {0};
    s_bind_keys(&req_arr, keys, n);
    rc = kvti_meta_call(c, W, true, &req_arr, NULL);
    if (rc == 0 && touched && c->rep->which_body == kvtier_Envelope_touch_rep_tag)
        *touched = c->rep->body.touch_rep.touched;
    return rc;
}

int kvt_remove(kvt_client_t *c, const char *instance_id, const kvt_key_t *keys, uint32_t n,
               uint32_t *removed)
{
    const char *W = "remove";
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (removed)
        *removed = 0;
    int rc = kvti_check_id(c, W, "instance_id", instance_id, false);
    if (rc == 0)
        rc = s_check_keys(c, W, keys, n);
    if (rc < 0)
        return rc;
    bus_env_init(c->req, kvtier_Envelope_remove_req_tag, c->name);
    kvtier_RemoveRequest *r = &c->req->body.remove_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", instance_id);
    bus_arrays_t req_arr = {0};
    s_bind_keys(&req_arr, keys, n);
    rc = kvti_meta_call(c, W, false, &req_arr, NULL);
    if (rc == 0 && removed && c->rep->which_body == kvtier_Envelope_remove_rep_tag)
        *removed = c->rep->body.remove_rep.removed;
    return rc;
}

int kvt_trim(kvt_client_t *c, const char *instance_id, uint64_t keep_blocks, unsigned flags,
             kvt_trim_info_t *out)
{
    const char *W = "trim";
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (out)
        *out = (kvt_trim_info_t){0};
    int rc = kvti_check_id(c, W, "instance_id", instance_id, false);
    if (rc < 0)
        return rc;
    if (flags & ~(KVT_TRIM_STATUS | KVT_TRIM_CANCEL))
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "flags 0x%x: only KVT_TRIM_STATUS and "
                         "KVT_TRIM_CANCEL are defined",
                         flags);
    if ((flags & KVT_TRIM_STATUS) && (flags & KVT_TRIM_CANCEL))
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "KVT_TRIM_STATUS and KVT_TRIM_CANCEL together: pass one");
    bus_env_init(c->req, kvtier_Envelope_admin_trim_req_tag, c->name);
    kvtier_AdminTrimRequest *r = &c->req->body.admin_trim_req;
    snprintf(r->instance_id, sizeof r->instance_id, "%s", instance_id);
    r->keep_blocks = keep_blocks;
    r->status_only = (flags & KVT_TRIM_STATUS) != 0;
    r->cancel = (flags & KVT_TRIM_CANCEL) != 0;
    rc = kvti_meta_call(c, W, true, NULL, NULL); /* setting the same target twice is one */
    if (rc == 0 && out && c->rep->which_body == kvtier_Envelope_admin_trim_rep_tag) {
        const kvtier_AdminTrimReply *p = &c->rep->body.admin_trim_rep;
        *out = (kvt_trim_info_t){
            .blocks = p->blocks, .active = p->active, .keep_blocks = p->keep_blocks};
    }
    return rc;
}

int kvt_drain(kvt_client_t *c, const char *tier, unsigned flags, kvt_drain_info_t *out)
{
    const char *W = "drain";
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (out)
        *out = (kvt_drain_info_t){0};
    int rc = kvti_check_id(c, W, "tier", tier, false);
    if (rc < 0)
        return rc;
    if (flags & ~(KVT_DRAIN_STATUS | KVT_DRAIN_CANCEL))
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "flags 0x%x: only KVT_DRAIN_STATUS and KVT_DRAIN_CANCEL are defined",
                         flags);
    if ((flags & KVT_DRAIN_STATUS) && (flags & KVT_DRAIN_CANCEL))
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                         "KVT_DRAIN_STATUS and KVT_DRAIN_CANCEL together: pass one");
    bus_env_init(c->req, kvtier_Envelope_admin_drain_req_tag, c->name);
    kvtier_AdminDrainRequest *r = &c->req->body.admin_drain_req;
    if (strlen(tier) >= sizeof r->tier)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "tier name \"%s\" is longer than %zu bytes",
                         tier, sizeof r->tier - 1);
    snprintf(r->tier, sizeof r->tier, "%s", tier);
    r->status_only = (flags & KVT_DRAIN_STATUS) != 0;
    r->cancel = (flags & KVT_DRAIN_CANCEL) != 0;
    /* resent only when it changes nothing twice: a status, a cancel; a second
     * drain would read CONFLICT for the first one's success */
    rc = kvti_meta_call(c, W, r->status_only || r->cancel, NULL, NULL);
    if (rc == 0 && out && c->rep->which_body == kvtier_Envelope_admin_drain_rep_tag) {
        const kvtier_AdminDrainReply *p = &c->rep->body.admin_drain_rep;
        *out = (kvt_drain_info_t){.tier_id = p->tier_id,
                                  .state = (kvt_tier_drain_t)p->state,
                                  .blocks_left = p->blocks_left,
                                  .blocks_moved = p->blocks_moved,
                                  .elapsed_ms = p->elapsed_ms};
        snprintf(out->next_tier, sizeof out->next_tier, "%s", p->next_tier);
    }
    return rc;
}

#define KVT_RESIGN_POLL_MS 100 /* between the asks for the new leader */

int kvt_leader_resign(kvt_client_t *c, uint32_t wait_s, kvt_resign_info_t *out)
{
    const char *W = "leader_resign";
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (out)
        *out = (kvt_resign_info_t){0};
    if (wait_s > KVT_RESIGN_WAIT_MAX_S)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "wait_s %u: at most %u seconds (0: %u)",
                         wait_s, KVT_RESIGN_WAIT_MAX_S, KVT_RESIGN_WAIT_DEFAULT_S);
    uint32_t wait = wait_s ? wait_s : KVT_RESIGN_WAIT_DEFAULT_S;
    bus_env_init(c->req, kvtier_Envelope_admin_resign_req_tag, c->name);
    c->req->body.admin_resign_req.wait_s = wait_s;
    /* answered at the hand-over: this one call waits for the windows too; never
     * sent twice (retry false): a resend reaching the new leader would resign it */
    uint32_t saved = c->timeout_ms;
    c->timeout_ms = saved + wait * 1000;
    int rc = kvti_meta_call(c, W, false, NULL, NULL);
    c->timeout_ms = saved;
    if (rc < 0)
        return rc;
    kvt_resign_info_t info = {0};
    info.old_epoch = c->rep->leader_epoch;
    if (c->rep->which_body == kvtier_Envelope_admin_resign_rep_tag) {
        const kvtier_AdminResignReply *p = &c->rep->body.admin_resign_rep;
        snprintf(info.old_leader, sizeof info.old_leader, "%s", p->node_id);
        info.windows_open = p->windows_open;
        info.windows_finished = p->windows_finished;
        info.windows_lapsed = p->windows_lapsed;
        info.standbys = p->standbys;
        info.waited_ms = p->waited_ms;
    }
    /* the new leader: asked (through redirects and discovery, as any call) until a
     * leader of another epoch answers, within failover_ms */
    int64_t until = zclock_mono() + c->failover_ms;
    while (zclock_mono() < until) {
        bus_env_init(c->req, kvtier_Envelope_admin_status_req_tag, c->name);
        if (kvti_meta_call(c, W, true, NULL, NULL) == 0 &&
            c->rep->which_body == kvtier_Envelope_admin_status_rep_tag) {
            const kvtier_AdminStatusReply *a = &c->rep->body.admin_status_rep;
            if (a->leader && a->leader_epoch != 0 && a->leader_epoch != info.old_epoch) {
                snprintf(info.new_leader, sizeof info.new_leader, "%s", a->node_id);
                snprintf(info.new_leader_endpoint, sizeof info.new_leader_endpoint, "%s",
                         a->leader_endpoint);
                info.new_epoch = a->leader_epoch;
                break;
            }
        }
        zclock_sleep(KVT_RESIGN_POLL_MS);
    }
    kvti_clear_error(c);
    if (out)
        *out = info;
    return 0;
}

/* The kind's name: as the scheduler names it (a plug-in kind has no wire number),
 * else from the wire enum (a scheduler from before TierInfo.kind_name). */
static const char *s_kind_name(const kvtier_TierInfo *ti)
{
    if (ti->kind_name[0])
        return ti->kind_name;
    switch (ti->kind) {
    case kvtier_TierKind_TIER_KIND_HOST:
        return "host";
    case kvtier_TierKind_TIER_KIND_NVME:
        return "nvme";
    case kvtier_TierKind_TIER_KIND_GPU:
        return "gpu";
    case kvtier_TierKind_TIER_KIND_REMOTE:
        return "remote";
    default:
        return "unspecified";
    }
}

int kvt_cluster_info(kvt_client_t *c, kvt_cluster_info_t *out)
{
    const char *W = "cluster_info";
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (!out)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "out is NULL");
    memset(out, 0, sizeof *out);
    bus_env_init(c->req, kvtier_Envelope_cluster_info_req_tag, c->name);
    int rc = kvti_meta_call(c, W, true, NULL, NULL);
    if (rc < 0)
        return rc;
    if (c->rep->which_body != kvtier_Envelope_cluster_info_rep_tag)
        return kvti_fail(c, KVT_INTERNAL, W, "reply without a body");
    const kvtier_ClusterInfoReply *r = &c->rep->body.cluster_info_rep;
    snprintf(out->cluster, sizeof out->cluster, "%s", r->cluster);
    snprintf(out->leader_endpoint, sizeof out->leader_endpoint, "%s", r->leader_endpoint);
    out->leader_epoch = r->leader_epoch;
    snprintf(out->event_endpoint, sizeof out->event_endpoint, "%s", r->event_endpoint);
    snprintf(out->event_replay_endpoint, sizeof out->event_replay_endpoint, "%s",
             r->event_replay_endpoint);
    snprintf(out->vllm_event_endpoint, sizeof out->vllm_event_endpoint, "%s",
             r->vllm_event_endpoint);
    snprintf(out->vllm_replay_endpoint, sizeof out->vllm_replay_endpoint, "%s",
             r->vllm_replay_endpoint);
    out->resigning = r->resigning;
    out->etcd_cluster_id = r->etcd_cluster_id;
    uint32_t n = r->tiers_count < KVT_MAX_TIERS ? r->tiers_count : KVT_MAX_TIERS;
    out->n_tiers = n;
    /* a server without the field (older) sends 0: its list is the total */
    out->total_tiers = r->total_tiers > r->tiers_count ? r->total_tiers : r->tiers_count;
    for (uint32_t i = 0; i < n; i++) {
        const kvtier_TierInfo *ti = &r->tiers[i];
        kvt_tier_info_t *o = &out->tiers[i];
        o->tier_id = ti->tier_id;
        snprintf(o->name, sizeof o->name, "%s", ti->name);
        snprintf(o->kind, sizeof o->kind, "%s", s_kind_name(ti));
        snprintf(o->endpoint, sizeof o->endpoint, "%s", ti->endpoint);
        o->capacity = ti->capacity_slots;
        o->slot_size = ti->slot_bytes;
        o->used = ti->used_slots;
        o->up = ti->up;
        o->drain = (kvt_tier_drain_t)ti->drain;
        snprintf(o->pool, sizeof o->pool, "%s", ti->pool);
    }
    return 0;
}

int kvti_tier_access(kvt_client_t *c, uint32_t tier_id, kvti_tier_access_t *out)
{
    const char *W = "cluster_info";
    memset(out, 0, sizeof *out);
    bus_env_init(c->req, kvtier_Envelope_cluster_info_req_tag, c->name);
    int rc = kvti_meta_call(c, W, true, NULL, NULL);
    if (rc < 0)
        return rc;
    if (c->rep->which_body != kvtier_Envelope_cluster_info_rep_tag)
        return kvti_fail(c, KVT_INTERNAL, W, "reply without a body");
    const kvtier_ClusterInfoReply *r = &c->rep->body.cluster_info_rep;
    for (pb_size_t i = 0; i < r->tiers_count; i++) {
        const kvtier_TierInfo *ti = &r->tiers[i];
        if (ti->tier_id != tier_id)
            continue;
        out->epoch = ti->epoch;
        snprintf(out->host, sizeof out->host, "%s", ti->host);
        if (ti->cuda_ipc_handle.size == sizeof out->ipc_handle) {
            memcpy(out->ipc_handle, ti->cuda_ipc_handle.bytes, sizeof out->ipc_handle);
            out->ipc_handle_len = sizeof out->ipc_handle;
        }
        if (ti->gpu_uuid.size == sizeof out->gpu_uuid)
            memcpy(out->gpu_uuid, ti->gpu_uuid.bytes, sizeof out->gpu_uuid);
        out->slot_stride = ti->slot_stride;
        return 0;
    }
    return kvti_fail(c, KVT_NOT_FOUND, W, "the leader lists no tier %u", tier_id);
}

/* Asks for counters [offset, offset + want) (at least one, at most a page); the
 * reply is in c->rep. */
static int s_stats_call(kvt_client_t *c, const char *instance_id, uint32_t offset, uint32_t want)
{
    bus_env_init(c->req, kvtier_Envelope_stats_req_tag, c->name);
    kvtier_StatsRequest *q = &c->req->body.stats_req;
    snprintf(q->instance_id, sizeof q->instance_id, "%s", instance_id ? instance_id : "");
    q->offset = offset;
    q->max_counters = want == 0 ? 1 : want < BUS_STATS_PAGE_MAX ? want : BUS_STATS_PAGE_MAX;
    int rc = kvti_meta_call(c, "stats", true, NULL, NULL);
    if (rc < 0)
        return rc;
    if (c->rep->which_body != kvtier_Envelope_stats_rep_tag)
        return kvti_fail(c, KVT_INTERNAL, "stats", "reply without a body");
    return 0;
}

/* The reply's total; a server without paging (older) sends 0 and one list. */
static uint32_t s_stats_total(const kvtier_StatsReply *r, uint32_t from)
{
    return r->total ? r->total : from + r->counters_count;
}

/* One pass from offset: 0 (*n, *total set), 1 when the total changed between pages,
 * or a negative code. */
static int s_stats_pass(kvt_client_t *c, const char *instance_id, uint32_t offset, kvt_stat_t *out,
                        uint32_t cap, uint32_t *n, uint32_t *total)
{
    uint32_t got = 0;
    for (bool first = true;; first = false) {
        int rc = s_stats_call(c, instance_id, offset + got, cap - got);
        if (rc < 0)
            return rc;
        const kvtier_StatsReply *r = &c->rep->body.stats_rep;
        uint32_t t = s_stats_total(r, offset + got);
        if (!first && t != *total)
            return 1;
        *total = t;
        uint32_t m = r->counters_count < cap - got ? r->counters_count : cap - got;
        for (uint32_t i = 0; i < m; i++) {
            snprintf(out[got + i].name, sizeof out[got + i].name, "%s", r->counters[i].name);
            out[got + i].value = r->counters[i].value;
        }
        got += m;
        if (got == cap || m == 0 || offset + got >= t)
            break;
    }
    *n = got;
    return 0;
}

int kvt_stats_page(kvt_client_t *c, const char *instance_id, uint32_t offset, kvt_stat_t *out,
                   uint32_t cap, uint32_t *n, uint32_t *total)
{
    const char *W = "stats";
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (n)
        *n = 0;
    if (total)
        *total = 0;
    if (!n || (!out && cap > 0))
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "%s is NULL", !n ? "n" : "out");
    int rc = kvti_check_id(c, W, "instance_id", instance_id, true);
    if (rc < 0)
        return rc;
    for (int attempt = 0; attempt < S_STATS_ATTEMPTS; attempt++) {
        uint32_t got = 0, all = 0;
        rc = s_stats_pass(c, instance_id, offset, out, cap, &got, &all);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            *n = got;
            if (total)
                *total = all;
            return 0;
        }
    }
    return kvti_fail(c, KVT_CONFLICT, W,
                     "the scheduler's counter list changed length on each of %d tries to page "
                     "through it (tiers coming and going); try again",
                     S_STATS_ATTEMPTS);
}

int kvt_stats(kvt_client_t *c, const char *instance_id, kvt_stat_t *out, uint32_t cap, uint32_t *n)
{
    return kvt_stats_page(c, instance_id, 0, out, cap, n, NULL);
}
