/* sched_requests.c — open requests and their windows (DESIGN.md §2, §6; UCM window
 * protocol): per request and per kind (get, put, prefetch) at most one window is
 * open; prepare opens it and returns a token, complete closes it; a second
 * prepare, a complete without prepare or with another token is INVALID_ARGUMENT
 * and changes nothing; a failed prepare opens nothing. request_end closes what is
 * left (safety net: pins released, reservations aborted) and reports it.
 *
 * Owns: the request table (bounded, with a hash map by instance and request id),
 * the window pool (entries in fixed chunks, sized at start by max_window_keys),
 * the deferred complete_put replies (bounded by max_pending_puts) and the lease
 * scan (pins older than pin_lease and reservations older than write_grace are
 * released by a bounded round per tick: a client that died holds nothing for ever).
 *
 * complete_put is two-step: the tier actor writes the slot headers (PutHeader),
 * and only its OK commits the blocks in the slot engine (SERVING) and answers the
 * client (DESIGN.md §4). Never: blocks, allocates per request, or replies twice. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_log.h"
#include "sched_int.h"
#include "sched_requests.h"
#include "sched_route.h"
#include "tier_mem.h"

#define S_LOG "sched"
#define S_MAX_TTL_MS (1ull << 40)

static const char *s_kind_name[SCHED_WIN_KINDS] = {"get", "put", "prefetch", "get+put"};
static const char *s_prepare_name[SCHED_WIN_KINDS] = {"prepare_get", "prepare_put",
                                                      "prepare_prefetch", "prepare"};

static bool s_copying(sched_t *self, sched_call_t *call, const sched_request_t *q,
                      uint64_t token_id, const char *what);

int sched_requests_init(sched_t *self)
{
    uint32_t nr = self->cfg.max_requests;
    if (sched_pool_init(&self->requests.pool, self->cfg.max_window_keys) < 0)
        return -1;
    /* token ids and parents are kept for the events only */
    uint32_t words =
        self->cfg.events_put_tokens ? self->cfg.events_put_tokens : SCHED_PUT_TOKEN_WORDS;
    if (sched_tokpool_init(&self->requests.tokpool, self->cfg.events_input[0] ? words : 0) < 0)
        return -1;
    self->requests.reqs = tier_mem_calloc(nr, sizeof *self->requests.reqs);
    self->requests.req_free = tier_mem_calloc(nr, sizeof *self->requests.req_free);
    self->requests.ops = tier_mem_calloc(self->cfg.max_pending_puts, sizeof *self->requests.ops);
    self->requests.op_free =
        tier_mem_calloc(self->cfg.max_pending_puts, sizeof *self->requests.op_free);
    self->requests.copy_mask =
        tier_mem_calloc(self->cfg.max_batch, sizeof *self->requests.copy_mask);
    self->requests.copy_wait = tier_mem_calloc(nr, sizeof *self->requests.copy_wait);
    if (!self->requests.reqs || !self->requests.req_free || !self->requests.ops ||
        !self->requests.op_free || !self->requests.copy_mask || !self->requests.copy_wait ||
        sched_map_init(&self->requests.req_map, nr) < 0)
        return -1;
    for (uint32_t i = 0; i < nr; i++)
        self->requests.req_free[i] = nr - 1 - i;
    self->requests.n_req_free = nr;
    for (uint32_t i = 0; i < self->cfg.max_pending_puts; i++)
        self->requests.op_free[i] = self->cfg.max_pending_puts - 1 - i;
    self->requests.n_op_free = self->cfg.max_pending_puts;
    return 0;
}

void sched_requests_fini(sched_t *self)
{
    /* pending puts: their tier clients are failed (and answer the clients) by
     * sched_tiers_fini; here only the memory goes */
    if (self->requests.ops)
        for (uint32_t i = 0; i < self->cfg.max_pending_puts; i++)
            zframe_destroy(&self->requests.ops[i].routing_id);
    /* prefetch copies in flight: their callers time out */
    if (self->requests.reqs)
        for (uint32_t i = 0; i < self->cfg.max_requests; i++)
            zframe_destroy(&self->requests.reqs[i].copy_rid);
    tier_mem_free(self->requests.copy_mask);
    tier_mem_free(self->requests.copy_wait);
    self->requests.copy_wait = NULL;
    self->requests.copy_mask = NULL;
    sched_pool_fini(&self->requests.pool);
    sched_tokpool_fini(&self->requests.tokpool);
    tier_mem_free(self->requests.reqs);
    tier_mem_free(self->requests.req_free);
    tier_mem_free(self->requests.ops);
    tier_mem_free(self->requests.op_free);
    sched_map_fini(&self->requests.req_map);
    self->requests.reqs = NULL;
    self->requests.ops = NULL;
}

uint32_t sched_open_requests(const sched_t *self)
{
    return self->cfg.max_requests - self->requests.n_req_free;
}

uint32_t sched_open_windows_keys(const sched_t *self)
{
    return sched_pool_used(&self->requests.pool);
}

/* ---- requests ---- */

typedef struct {
    const sched_t *self;
    uint32_t inst;
    const char *id;
} s_req_key_t;

static bool s_req_eq(const void *ctx, uint32_t idx)
{
    const s_req_key_t *k = ctx;
    const sched_request_t *q = &k->self->requests.reqs[idx];
    return q->inst == k->inst && strcmp(q->id, k->id) == 0;
}

static uint64_t s_req_hash(sched_t *self, uint32_t inst, const char *id)
{
    return sched_hash(self, id, strlen(id), 2 + inst);
}

sched_request_t *sched_request_find(sched_t *self, uint32_t inst, const char *id)
{
    s_req_key_t k = {self, inst, id};
    uint32_t q = sched_map_find(&self->requests.req_map, s_req_hash(self, inst, id), s_req_eq, &k);
    return q == SCHED_NONE ? NULL : &self->requests.reqs[q];
}

uint32_t sched_request_chain(sched_t *self, uint32_t inst, const char *request_id)
{
    sched_request_t *q = sched_request_find(self, inst, request_id);
    if (!q)
        return SCHED_NONE;
    q->last_ms = sched_now(); /* in use (request_idle) */
    return q->chain;
}

/* The open request named by a window call, or NULL after replying. */
static sched_request_t *s_req_get(sched_t *self, sched_call_t *call, const char *inst_id,
                                  const char *req_id, sched_instance_t **in_out)
{
    sched_instance_t *in = sched_instance_get(self, call, inst_id);
    if (!in)
        return NULL;
    if (!req_id[0]) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "request_id is empty");
        return NULL;
    }
    sched_request_t *q = sched_request_find(self, (uint32_t)(in - self->index.inst), req_id);
    if (!q)
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_NOT_FOUND,
                          "request %s of instance %s is not open (request_begin first, "
                          "or it was ended after request_idle without a call)",
                          req_id, inst_id);
    else
        q->last_ms = sched_now();
    *in_out = in;
    return q;
}

static void s_begin_reply(sched_t *self, sched_call_t *call, const sched_request_t *q)
{
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_request_begin_rep_tag);
    rep->body.request_begin_rep.branch = q->chain;
    rep->body.request_begin_rep.head_tier_id = sched_chain_head(self, q->chain)->cfg.tier_id;
    sched_strcpy(rep->body.request_begin_rep.branch_name,
                 sizeof rep->body.request_begin_rep.branch_name, self->cfg.chains[q->chain].name);
    sched_reply(self, call);
}

/* request_begin: opens a request; one already open with the same context (ttl_ms,
 * total_blocks) is a resend and answered as the first was (issue 9 §1). */
void sched_on_begin(sched_t *self, sched_call_t *call)
{
    const kvtier_RequestBeginRequest *r = &call->req.env.body.request_begin_req;
    sched_instance_t *in = sched_instance_get(self, call, r->instance_id);
    if (!in)
        return;
    if (!r->has_ctx || !r->ctx.request_id[0]) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "ctx.request_id is empty");
        return;
    }
    if (r->ctx.ttl_ms > S_MAX_TTL_MS) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "ctx.ttl_ms %" PRIu64 " too large (at most %llu)", r->ctx.ttl_ms,
                          S_MAX_TTL_MS);
        return;
    }
    uint32_t ii = (uint32_t)(in - self->index.inst);
    sched_request_t *open = sched_request_find(self, ii, r->ctx.request_id);
    if (open && (open->ttl_ms != r->ctx.ttl_ms || open->total_blocks != r->ctx.total_blocks)) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_ALREADY_EXISTS,
                          "request %s of instance %s is already open with another context "
                          "(ttl_ms %" PRIu64 ", total_blocks %u)",
                          r->ctx.request_id, in->id, open->ttl_ms, open->total_blocks);
        return;
    }
    if (open) { /* a resend (issue 9 §1): the same answer, nothing changes */
        open->last_ms = sched_now();
        s_begin_reply(self, call, open);
        return;
    }
    sched_client_t *cl = &self->requests.clients[call->client];
    if (cl->open >= self->cfg.max_requests_per_client) {
        self->g.overloaded++;
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_OVERLOADED,
                          "this client has %u requests open (coordinator.max_requests_per_client"
                          "): end some before beginning more",
                          cl->open);
        return;
    }
    if (self->requests.n_req_free == 0) {
        self->g.overloaded++;
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_OVERLOADED,
                          "%u requests are open (coordinator.max_requests): end some and back "
                          "off before beginning more",
                          self->cfg.max_requests);
        return;
    }
    uint32_t qi = self->requests.req_free[--self->requests.n_req_free];
    sched_request_t *q = &self->requests.reqs[qi];
    memset(q, 0, sizeof *q);
    q->used = true;
    q->inst = ii;
    q->client = call->client;
    cl->open++;
    snprintf(q->id, sizeof q->id, "%s", r->ctx.request_id);
    q->hash = s_req_hash(self, ii, q->id);
    q->ttl_ms = r->ctx.ttl_ms;
    q->total_blocks = r->ctx.total_blocks;
    /* the branch: a pure function of the facts, so a re-begin after a failover
     * (libkvtier's recovery) lands on the same one (sched_route.h) */
    q->chain = sched_route_select(&self->cfg, in->id, q->ttl_ms, q->total_blocks);
    self->requests.begun[q->chain]++;
    q->last_ms = sched_now();
    for (int k = 0; k < SCHED_WIN_KINDS; k++)
        sched_window_init(&q->win[k]);
    sched_map_insert(&self->requests.req_map, q->hash, qi);
    s_begin_reply(self, call, q);
}

/* ---- closing windows ---- */

/* Unpins the entries of l; pins_only: only those flagged PIN (a prefetch list). */
static uint32_t s_unpin_entries(sched_t *self, uint32_t number, const sched_list_t *l,
                                bool pins_only)
{
    uint32_t released = 0;
    sched_iter_t it;
    for (sched_entry_t *e = sched_list_first(&self->requests.pool, l, &it); e;
         e = sched_list_next(&self->requests.pool, &it)) {
        if (pins_only && !(e->kind & SCHED_ENTRY_PIN))
            continue;
        sched_tier_t *t = &self->tierset.tiers[e->tier];
        tier_key_t key;
        key = e->key;
        if (e->gen == t->gen && tier_slots_unpin(t->slots, number, &key) == 0)
            released++;
    }
    return released;
}

/* Concludes one put entry as failed; a shared reservation that another sharer
 * committed stays (the last conclusion decides) and gets its header again, since
 * this writer may have overwritten it with WRITING. */
static bool s_abort_entry(sched_t *self, uint32_t number, const sched_entry_t *e, int64_t now)
{
    sched_tier_t *t = &self->tierset.tiers[e->tier];
    if (e->gen != t->gen || (e->kind & (SCHED_ENTRY_SKIP | SCHED_ENTRY_PIN)))
        return false;
    tier_key_t key;
    key = e->key;
    tier_commit_outcome_t out = 0;
    if (tier_slots_commit(t->slots, number, &key, false, (uint64_t)now, &out) < 0)
        return false;
    if (out == TIER_COMMIT_COMMITTED)
        sched_tier_reput_header(self, t, sched_instance_name(self, number), number, e->slot, &key);
    return true;
}

static uint32_t s_abort_entries(sched_t *self, uint32_t number, const sched_list_t *l)
{
    uint32_t aborted = 0;
    int64_t now = sched_now();
    sched_iter_t it;
    for (sched_entry_t *e = sched_list_first(&self->requests.pool, l, &it); e;
         e = sched_list_next(&self->requests.pool, &it))
        aborted += s_abort_entry(self, number, e, now);
    return aborted;
}

/* Window `kind` of q takes event ev (sched_window.c's table): the caller has
 * checked that the transition exists; one that does not is a scheduler bug,
 * logged, and changes nothing. */
static bool s_window_step(sched_t *self, sched_request_t *q, int kind, sched_win_event_t ev,
                          uint64_t job_id)
{
    sched_window_t *w = &q->win[kind];
    uint64_t token = ev == SCHED_WEV_PREPARE ? self->next_token_id++ : 0;
    if (sched_window_step(w, ev, token, job_id, sched_now()) == 0)
        return true;
    bus_error(S_LOG, "request %s: %s window: no transition from %s on %s", q->id, s_kind_name[kind],
              sched_window_state_name(w->state), sched_window_event_name(ev));
    return false;
}

/* Closes window `kind` of q on event ev (CANCEL, LAPSE, END, or DONE after a
 * COMPLETE), releasing what it holds. Returns pins released (get, prefetch,
 * get+put) or reservations aborted (put); *aborted (may be NULL) gets a
 * prefetch's aborted head reservations and a get+put window's aborted ones. */
static uint32_t s_window_close_counted(sched_t *self, sched_request_t *q, int kind,
                                       sched_win_event_t ev, uint32_t *aborted)
{
    sched_window_t *w = &q->win[kind];
    uint32_t number = self->index.inst[q->inst].number, n = 0, a = 0;
    if (kind == SCHED_WIN_GET)
        n = s_unpin_entries(self, number, &w->entries, false);
    else if (kind == SCHED_WIN_PUT)
        n = s_abort_entries(self, number, &w->entries);
    else if (kind == SCHED_WIN_GETPUT) { /* reservations aborted, the prefix's pins released */
        a = s_abort_entries(self, number, &w->entries);
        n = s_unpin_entries(self, number, &w->pins, false);
    } else { /* prefetch: head reservations aborted, source pins released */
        a = s_abort_entries(self, number, &w->entries);
        n = s_unpin_entries(self, number, &w->entries, true);
    }
    if (aborted)
        *aborted = a;
    sched_list_free(&self->requests.pool, &w->entries);
    sched_list_free(&self->requests.pool, &w->pins);
    if (kind == SCHED_WIN_PUT || kind == SCHED_WIN_GETPUT)
        sched_putmeta_free(&self->requests.tokpool, &q->put_meta);
    (void)s_window_step(self, q, kind, ev, 0);
    return n;
}

static uint32_t s_window_close(sched_t *self, sched_request_t *q, int kind, sched_win_event_t ev)
{
    return s_window_close_counted(self, q, kind, ev, NULL);
}

/* A request leaves the map (its name can be begun again); its entry is freed now,
 * or, when a prefetch copy still writes into its slots, once that copy ends. */
static void s_request_free(sched_t *self, sched_request_t *q)
{
    if (!q->used)
        return; /* freed already (a copy that ended during request_end) */
    if (!q->ended)
        sched_map_remove(&self->requests.req_map, q->hash, (uint32_t)(q - self->requests.reqs));
    q->ended = true;
    sched_putmeta_free(&self->requests.tokpool, &q->put_meta);
    if (q->win[SCHED_WIN_PREFETCH].state == SCHED_WIN_ABANDONED)
        return;
    q->used = false;
    sched_client_request_done(self, q->client);
    self->requests.req_free[self->requests.n_req_free++] = (uint32_t)(q - self->requests.reqs);
}

void sched_on_end(sched_t *self, sched_call_t *call)
{
    const kvtier_RequestEndRequest *r = &call->req.env.body.request_end_req;
    sched_instance_t *in = sched_instance_get(self, call, r->instance_id);
    if (!in)
        return;
    if (!r->request_id[0]) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "request_id is empty");
        return;
    }
    sched_request_t *q = sched_request_find(self, (uint32_t)(in - self->index.inst), r->request_id);
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_request_end_rep_tag);
    if (!q) { /* ended already (a resend), lapsed, or begun at an earlier leader */
        sched_reply(self, call);
        return;
    }
    kvtier_RequestEndReply *er = &rep->body.request_end_rep;
    static const kvtier_WindowKind wk[SCHED_WIN_KINDS] = {
        kvtier_WindowKind_WINDOW_KIND_GET, kvtier_WindowKind_WINDOW_KIND_PUT,
        kvtier_WindowKind_WINDOW_KIND_PREFETCH, kvtier_WindowKind_WINDOW_KIND_GET_PUT};
    for (int k = 0; k < SCHED_WIN_KINDS; k++) {
        if (q->win[k].state == SCHED_WIN_COPYING) {
            /* the migrator still writes into its head slots: held until it ends */
            (void)s_window_step(self, q, k, SCHED_WEV_END, 0);
            er->closed_windows[er->closed_windows_count++] = wk[k];
            self->g.safety_net_windows++;
            continue;
        }
        if (!sched_window_open(&q->win[k]))
            continue;
        uint32_t aborted = 0;
        uint32_t n = s_window_close_counted(self, q, k, SCHED_WEV_END, &aborted);
        er->closed_windows[er->closed_windows_count++] = wk[k];
        if (k == SCHED_WIN_PUT) {
            er->aborted_reservations += n;
        } else { /* get: pins; prefetch, get+put: pins and reservations */
            er->released_pins += n;
            er->aborted_reservations += aborted;
        }
        self->g.safety_net_windows++;
    }
    if (er->closed_windows_count)
        bus_info(S_LOG,
                 "request %s/%s ended with %u open window(s): %u pins released, %u "
                 "reservations aborted",
                 in->id, q->id, (unsigned)er->closed_windows_count, er->released_pins,
                 er->aborted_reservations);
    s_request_free(self, q);
    sched_reply(self, call);
}

/* ---- window checks ---- */

static bool s_window_can_open(sched_t *self, sched_call_t *call, sched_request_t *q, int kind,
                              uint32_t n, uint64_t job_id)
{
    int b = sched_window_blocker(q->win, kind);
    if (b == kind && job_id != 0 && q->win[kind].job_id == job_id &&
        sched_window_open(&q->win[kind])) {
        /* a resend of the prepare that opened it (its reply was lost, issue 9 §1):
         * that window is cancelled (pins released, reservations aborted) and the
         * prepare runs again */
        bus_debug(S_LOG, "request %s: %s job %" PRIu64 " sent again: token %" PRIu64 " cancelled",
                  q->id, s_prepare_name[kind], job_id, q->win[kind].token_id);
        (void)s_window_close(self, q, kind, SCHED_WEV_CANCEL);
        b = sched_window_blocker(q->win, kind);
    }
    if (b == kind) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "request %s already has an open %s window (token %" PRIu64
                          "): complete it before the next prepare",
                          q->id, s_kind_name[kind], q->win[kind].token_id);
        return false;
    }
    if (b >= 0) { /* a get+put window holds a get and a put (sched_window.c's kinds) */
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "request %s has an open %s window (token %" PRIu64
                          "): a %s window cannot open beside it; complete it first",
                          q->id, s_kind_name[b], q->win[b].token_id, s_kind_name[kind]);
        return false;
    }
    if (!sched_pool_can_take(&self->requests.pool, n)) {
        self->g.busy_refusals++;
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_UNAVAILABLE,
                          "open windows hold too many keys (max_window_keys %u): retry after "
                          "some complete",
                          self->cfg.max_window_keys);
        return false;
    }
    return true;
}

/* A complete (or CopyPrefetch) carries the epoch of the leader that minted its
 * token (issue 9 §1): a window of another leader is gone with it, and nothing of
 * it may be applied here (a complete whose reply was lost may have committed at
 * that leader before it went). true when it answered ABORTED. */
static bool s_foreign_epoch(sched_t *self, sched_call_t *call, uint64_t epoch, uint64_t token_id,
                            const char *what)
{
    if (epoch == 0 || epoch == self->cfg.leader_epoch)
        return false;
    sched_reply_error(self, call, kvtier_StatusCode_STATUS_ABORTED,
                      "token %" PRIu64 " (%s) was minted by the leader of epoch %" PRIu64
                      "; this leader's epoch is %" PRIu64
                      ": its window went with that leader and nothing of it is applied at this "
                      "leader; prepare again",
                      token_id, what, epoch, self->cfg.leader_epoch);
    return true;
}

/* A complete of window `kind` whose token concluded already (its reply was lost):
 * answered OK again with the counts it had, nothing applied twice. */
static void s_complete_resend(sched_t *self, sched_call_t *call, const sched_request_t *q, int kind)
{
    static const pb_size_t tag[SCHED_WIN_KINDS] = {
        kvtier_Envelope_complete_get_rep_tag, kvtier_Envelope_complete_put_rep_tag,
        kvtier_Envelope_complete_prefetch_rep_tag, kvtier_Envelope_complete_rep_tag};
    kvtier_Envelope *rep = sched_reply_begin(self, call, tag[kind]);
    if (kind == SCHED_WIN_GET) {
        rep->body.complete_get_rep.released = q->done[kind].released;
    } else if (kind == SCHED_WIN_PUT) {
        rep->body.complete_put_rep.committed = q->done[kind].committed;
        rep->body.complete_put_rep.failed = q->done[kind].failed;
    } else if (kind == SCHED_WIN_PREFETCH) {
        rep->body.complete_prefetch_rep.committed = q->done[kind].committed;
    } else {
        rep->body.complete_rep.released = q->done[kind].released;
        rep->body.complete_rep.committed = q->done[kind].committed;
        rep->body.complete_rep.failed = q->done[kind].failed;
    }
    bus_debug(S_LOG, "request %s: %s window: complete of token %" PRIu64 " sent again: answered",
              q->id, s_kind_name[kind], q->done[kind].token_id);
    sched_reply(self, call);
}

/* Records the OK conclusion of q's window `kind` (token token_id) for resends. */
static void s_remember_done(sched_request_t *q, int kind, uint64_t token_id, uint32_t released,
                            uint32_t committed, uint32_t failed)
{
    q->done[kind].token_id = token_id;
    q->done[kind].released = released;
    q->done[kind].committed = committed;
    q->done[kind].failed = failed;
}

/* Is a complete of q's window `kind` with token token_id still concluding: the
 * window COMPLETING, or its entries handed to a tier confirmation (an op) that has
 * not replied yet? A resend of that complete (its sender gave up waiting) is then
 * answered UNAVAILABLE: libkvtier retries it until the first concludes; a retry
 * after an OK conclusion is answered as that one was (s_complete_resend). */
static bool s_completing(const sched_t *self, const sched_request_t *q, int kind, uint64_t token_id)
{
    if (token_id == 0)
        return false;
    if (q->win[kind].state == SCHED_WIN_COMPLETING && q->win[kind].token_id == token_id)
        return true;
    uint32_t qi = (uint32_t)(q - self->requests.reqs);
    for (uint32_t i = 0; i < self->cfg.max_pending_puts; i++) {
        const sched_put_op_t *op = &self->requests.ops[i];
        if (op->used && op->req == qi && op->req_hash == q->hash && op->kind == kind &&
            op->token_id == token_id)
            return true;
    }
    return false;
}

/* The open request a complete or CopyPrefetch names, or NULL after replying:
 * ABORTED when its token is another leader's (s_foreign_epoch), else as s_req_get. */
static sched_request_t *s_req_of_token(sched_t *self, sched_call_t *call, uint64_t epoch,
                                       uint64_t token_id, const char *inst_id, const char *req_id,
                                       const char *what, sched_instance_t **in_out)
{
    if (s_foreign_epoch(self, call, epoch, token_id, what))
        return NULL;
    return s_req_get(self, call, inst_id, req_id, in_out);
}

static sched_window_t *s_window_for_complete(sched_t *self, sched_call_t *call, sched_request_t *q,
                                             int kind, uint64_t token_id)
{
    sched_window_t *w = &q->win[kind];
    if (token_id != 0 && token_id == q->done[kind].token_id) {
        s_complete_resend(self, call, q, kind);
        return NULL;
    }
    if (!sched_window_open(w)) {
        if (s_completing(self, q, kind, token_id))
            sched_reply_error(self, call, kvtier_StatusCode_STATUS_UNAVAILABLE,
                              "the %s window of token %" PRIu64
                              " is still completing (a complete sent before waits on its "
                              "tier): retry",
                              s_kind_name[kind], token_id);
        else if (token_id != 0 && token_id == q->done[kind].failed_token_id)
            /* its first complete was answered with that error (the reply may be
             * what was lost, or libkvtier retried an UNAVAILABLE while settling
             * after a failover): the window is over, nothing of it applies now */
            sched_reply_error(self, call, kvtier_StatusCode_STATUS_ABORTED,
                              "the %s window of token %" PRIu64
                              " concluded already and failed (%s: its tier did not confirm "
                              "the blocks); nothing more of it is applied: prepare again",
                              s_kind_name[kind], token_id,
                              bus_status_name((int)q->done[kind].failed_code));
        else if (token_id != 0 && token_id == w->lapsed_token_id)
            sched_reply_error(
                self, call, kvtier_StatusCode_STATUS_EXPIRED,
                "the %s window of token %" PRIu64 " lapsed (lease %" PRIu64
                " ms) and was closed by the scheduler",
                s_kind_name[kind], token_id,
                sched_window_lease_ms(kind, self->cfg.pin_lease_ms, self->cfg.write_grace_ms));
        else
            sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                              "request %s has no open %s window (%s first)", q->id,
                              s_kind_name[kind], s_prepare_name[kind]);
        return NULL;
    }
    if (token_id != w->token_id) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "token %" PRIu64 " is not the open %s window's token (%" PRIu64 ")",
                          token_id, s_kind_name[kind], w->token_id);
        return NULL;
    }
    /* entries placed on a tier that was reset since fail at complete, by generation */
    uint32_t stale = 0;
    sched_iter_t it;
    for (sched_entry_t *e = sched_list_first(&self->requests.pool, &w->entries, &it); e;
         e = sched_list_next(&self->requests.pool, &it))
        stale += e->gen != self->tierset.tiers[e->tier].gen;
    for (sched_entry_t *e = sched_list_first(&self->requests.pool, &w->pins, &it); e;
         e = sched_list_next(&self->requests.pool, &it))
        stale += e->gen != self->tierset.tiers[e->tier].gen;
    if (stale && s_window_step(self, q, kind, SCHED_WEV_TIER_RESET, 0))
        bus_debug(S_LOG, "request %s: %s window: %u entries on a reset tier", q->id,
                  s_kind_name[kind], stale);
    return w;
}

/* head: the tier its reservations were made on (NULL: the chain's head now). Kept
 * because the head can move before the complete (a drain begun, another pool
 * member picked: sched_chain_head depends on the fill). */
static void s_window_open(sched_t *self, sched_request_t *q, int kind, uint64_t job_id,
                          const sched_tier_t *head)
{
    (void)s_window_step(self, q, kind, SCHED_WEV_PREPARE, job_id);
    q->win[kind].head = head ? head->idx : sched_chain_head(self, q->chain)->idx;
}

/* A success mask is empty (all succeeded) or one flag per token key. */
static bool s_mask_ok(sched_t *self, sched_call_t *call, uint32_t n)
{
    uint32_t m = call->req_arr->mask.n;
    if (m == 0 || m == n)
        return true;
    sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                      "success has %u flags, the token covers %u keys", m, n);
    return false;
}

static bool s_success(const sched_call_t *call, uint32_t i)
{
    return call->req_arr->mask.n == 0 || call->req_arr->mask.v[i];
}

/* ---- tokens ---- */

/* What the token says about itself (bus_token.h): the window's token id, this
 * scheduler's issuer and leader epoch, the instance, and the lease's end on the
 * wall clock (the window itself lapses on the monotonic clock, sched_lease_scan).
 * A tier actor accepts a token up to clock_skew past its expiry, so the expiry is
 * the lease's end less that skew (leases longer than twice it): with the clocks in
 * step, a writer late past its lease is refused at the tier by the time the window
 * lapses here and its slots may go to another (issue 12 §4). */
static bus_token_meta_t s_token_meta(const sched_t *self, const sched_instance_t *in,
                                     const sched_window_t *w, uint64_t lease_ms)
{
    uint64_t skew = self->cfg.clock_skew_ms;
    uint64_t slack = lease_ms > 2 * skew ? skew : 0;
    return (bus_token_meta_t){.token_id = w->token_id,
                              .issuer = self->token_issuer,
                              .leader_epoch = self->cfg.leader_epoch,
                              .expiry_ms = (uint64_t)sched_wall_ms() + lease_ms - slack,
                              .instance = in->number};
}

/* Encodes a token of `n` entries from call->tok whose `tier` fields are tier
 * indices; they are rewritten as indices into the token's own tier table. */
static int s_token_encode(sched_t *self, sched_call_t *call, bus_token_kind_t kind,
                          const bus_token_meta_t *meta, uint32_t n, size_t *len)
{
    bus_token_tier_t tt[SCHED_MAX_TIERS];
    uint16_t map[SCHED_MAX_TIERS];
    uint32_t nt = 0;
    for (uint32_t i = 0; i < SCHED_MAX_TIERS; i++)
        map[i] = BUS_TOKEN_NO_TIER;
    for (uint32_t i = 0; i < n; i++) {
        uint16_t t = call->tok[i].tier;
        if (map[t] == BUS_TOKEN_NO_TIER) {
            map[t] = (uint16_t)nt;
            sched_tier_token(&self->tierset.tiers[t], &tt[nt++]);
        }
        call->tok[i].tier = map[t];
        uint16_t st = call->tok[i].src_tier;
        if (st == BUS_TOKEN_NO_TIER)
            continue;
        if (map[st] == BUS_TOKEN_NO_TIER) {
            map[st] = (uint16_t)nt;
            sched_tier_token(&self->tierset.tiers[st], &tt[nt++]);
        }
        call->tok[i].src_tier = map[st];
    }
    /* A client may hand a get, put or prefetch window's token to another process
     * (kvt_token_export); a combined window's never leaves its handle. */
    bus_token_meta_t m = *meta;
    if (kind != BUS_TOKEN_GET_PUT)
        m.flags |= BUS_TOKEN_F_EXPORTABLE;
    int rc =
        bus_token_encode(kind, &m, tt, nt, call->tok, n, call->payload, call->payload_cap, len);
    if (rc == 0 && self->seal) /* the tier actors open the tier plane only under the MAC */
        rc = bus_token_seal(&self->token_key, call->payload, call->payload_cap, len);
    return rc;
}

static void s_token_reply(sched_call_t *call, kvtier_Token *tok, const sched_window_t *w,
                          uint64_t lease_ms, uint32_t n_keys, size_t payload_len)
{
    tok->token_id = w->token_id;
    tok->lease_ms = lease_ms;
    call->rep_arr.keys.n = n_keys;
    call->rep_arr.payload.len = (uint32_t)payload_len;
}

/* ---- get ---- */

static void s_get_not_found(sched_t *self, sched_call_t *call, sched_instance_t *in,
                            uint32_t missing, uint32_t n, uint32_t first_miss)
{
    char hex[33];
    uint32_t down = 0;
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++)
        down += self->tierset.tiers[i].state == SCHED_TIER_DOWN;
    in->c.get_not_found++;
    self->c.get_not_found++;
    sched_reply_error(self, call, kvtier_StatusCode_STATUS_NOT_FOUND,
                      "%u of %u keys are not cached (first: #%u %s)%s; nothing pinned", missing, n,
                      first_miss, tier_key_hex(&call->keys[first_miss], hex),
                      down ? " and a tier is down" : "");
}

void sched_on_prepare_get(sched_t *self, sched_call_t *call)
{
    const kvtier_PrepareGetRequest *r = &call->req.env.body.prepare_get_req;
    sched_instance_t *in;
    sched_request_t *q = s_req_get(self, call, r->instance_id, r->request_id, &in);
    if (!q)
        return;
    uint32_t n = call->req_arr->keys.n;
    if (n == 0) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT, "no keys to get");
        return;
    }
    if (!s_window_can_open(self, call, q, SCHED_WIN_GET, n, r->job_id))
        return;
    sched_keys_load(call, n);
    int64_t now = sched_now();
    uint32_t missing = 0, first_miss = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t slot = 0;
        uint32_t t = sched_block_find(self, in->number, &call->keys[k], q->chain, now, &slot);
        if (t != SCHED_NONE && tier_slots_pin(self->tierset.tiers[t].slots, in->number,
                                              &call->keys[k], (uint64_t)now, &slot) != 0)
            t = SCHED_NONE;
        call->pos[k] = t;
        if (t == SCHED_NONE && missing++ == 0)
            first_miss = k;
        call->tok[k] =
            (bus_token_entry_t){.tier = (uint16_t)(t == SCHED_NONE ? 0 : t),
                                .src_tier = BUS_TOKEN_NO_TIER,
                                .size = t == SCHED_NONE ? 0 : self->tierset.tiers[t].sizes[slot],
                                .slot = slot};
    }
    if (missing) { /* all or nothing */
        for (uint32_t k = 0; k < n; k++)
            if (call->pos[k] != SCHED_NONE)
                (void)tier_slots_unpin(self->tierset.tiers[call->pos[k]].slots, in->number,
                                       &call->keys[k]);
        s_get_not_found(self, call, in, missing, n, first_miss);
        return;
    }
    s_window_open(self, q, SCHED_WIN_GET, r->job_id, NULL);
    sched_window_t *w = &q->win[SCHED_WIN_GET];
    for (uint32_t k = 0; k < n; k++) {
        sched_entry_t *e = sched_list_push(&self->requests.pool, &w->entries);
        e->key = call->keys[k];
        e->slot = (uint32_t)call->tok[k].slot;
        e->tier = (uint8_t)call->pos[k];
        e->kind = 0;
        e->gen = self->tierset.tiers[call->pos[k]].gen;
    }
    size_t len = 0;
    bus_token_meta_t meta = s_token_meta(self, in, w, self->cfg.pin_lease_ms);
    if (s_token_encode(self, call, BUS_TOKEN_GET, &meta, n, &len) < 0) {
        s_window_close(self, q, SCHED_WIN_GET, SCHED_WEV_CANCEL);
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INTERNAL, "token encoding failed");
        return;
    }
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_prepare_get_rep_tag);
    rep->body.prepare_get_rep.has_token = true;
    s_token_reply(call, &rep->body.prepare_get_rep.token, w, self->cfg.pin_lease_ms, n, len);
    /* the token covers the request's keys in order: reply with them as they came */
    call->rep_arr.keys.keys = call->req_arr->keys.keys;
    in->c.gets++;
    in->c.get_keys += n;
    self->c.gets++;
    self->c.get_keys += n;
    sched_reply(self, call);
}

void sched_on_complete_get(sched_t *self, sched_call_t *call)
{
    const kvtier_CompleteGetRequest *r = &call->req.env.body.complete_get_req;
    sched_instance_t *in;
    sched_request_t *q = s_req_of_token(self, call, r->leader_epoch, r->token_id, r->instance_id,
                                        r->request_id, "complete_get", &in);
    if (!q)
        return;
    sched_window_t *w = s_window_for_complete(self, call, q, SCHED_WIN_GET, r->token_id);
    if (!w || !s_mask_ok(self, call, w->entries.n))
        return;
    /* a key whose load failed may be a block its tier dropped (damaged bytes): the
     * gc probes it first in its next round (issue 12 §4) */
    uint32_t i = 0;
    sched_iter_t it;
    for (sched_entry_t *e = sched_list_first(&self->requests.pool, &w->entries, &it);
         e && call->req_arr->mask.n; e = sched_list_next(&self->requests.pool, &it), i++)
        if (!s_success(call, i))
            sched_gc_suspect(self, e->tier, e->slot, e->gen);
    (void)s_window_step(self, q, SCHED_WIN_GET, SCHED_WEV_COMPLETE, 0);
    uint32_t released = s_window_close(self, q, SCHED_WIN_GET, SCHED_WEV_DONE);
    s_remember_done(q, SCHED_WIN_GET, r->token_id, released, 0, 0);
    in->c.get_released += released;
    self->c.get_released += released;
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_complete_get_rep_tag);
    rep->body.complete_get_rep.released = released;
    sched_reply(self, call);
}

/* ---- put ---- */

/* Is tier tier_id on chain `chain`? (A prefetch moves only its own branch's copy.) */
static bool s_tier_in_chain(const sched_t *self, uint32_t chain, uint32_t tier_id)
{
    const sched_chain_config_t *ch = &self->cfg.chains[chain];
    for (uint32_t j = 0; j < ch->n_tiers; j++)
        if (ch->tier_ids[j] == tier_id)
            return true;
    return false;
}

/* Of keys [from, n), those already SERVING on a lower tier of the chain (or on
 * any member of a pool at its head: one level) are skipped like head-tier ones;
 * the others are compacted to the front of call->keys (pos: request index). */
static uint32_t s_put_compact(sched_t *self, sched_call_t *call, const sched_instance_t *in,
                              uint32_t chain, uint32_t from, uint32_t n, int64_t now)
{
    const sched_chain_config_t *ch = &self->cfg.chains[chain];
    uint32_t m = 0;
    for (uint32_t k = from; k < n; k++) {
        bool serving = false;
        for (uint32_t j = 0; j < ch->n_tiers && !serving; j++) {
            sched_tier_t *t = &self->tierset.tiers[ch->tier_ids[j] - 1];
            if (j == 0 && !t->cfg.pool)
                continue; /* the head tier: its reservation skips what it serves */
            tier_slot_info_t info;
            /* a DELETING block is going away: the put stores the key again */
            serving =
                t->state != SCHED_TIER_DOWN &&
                tier_slots_lookup(t->slots, in->number, &call->keys[k], (uint64_t)now, &info) ==
                    0 &&
                !(t->n_deleting && sched_is_deleting(t, in->number, &call->keys[k], info.slot));
        }
        if (serving)
            continue;
        call->keys[m] = call->keys[k];
        call->pos[m++] = k;
    }
    return m;
}

static bool s_put_tier_ready(sched_t *self, sched_call_t *call, const sched_tier_t *t,
                             const sched_instance_t *in)
{
    if (t->state == SCHED_TIER_DOWN && sched_tier_vacant(t)) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_UNAVAILABLE,
                          "pool %s has no member up (kvtier tier --pool %s adds one) and no "
                          "level below it takes the blocks: nothing can be written",
                          sched_tier_pool_name(self, t), sched_tier_pool_name(self, t));
        return false;
    }
    if (t->state == SCHED_TIER_DOWN) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_UNAVAILABLE,
                          "tier %s is down (no tier actor registered): nothing can be written",
                          t->cfg.name);
        return false;
    }
    if (t->state == SCHED_TIER_RECOVERING) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_UNAVAILABLE,
                          "tier %s is rebuilding its index from the tier actor's inventory: "
                          "retry shortly",
                          t->cfg.name);
        return false;
    }
    if (in->spec.bytes_per_block > t->cfg.slot_size) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "instance %s: %" PRIu64 "-byte blocks do not fit tier %s's %" PRIu64
                          "-byte slots",
                          in->id, in->spec.bytes_per_block, t->cfg.name, t->cfg.slot_size);
        return false;
    }
    return true;
}

/* KEEP: t keeps its live blocks (sched_keeps_victims), so the reserve ran with
 * TIER_RESERVE_NO_EVICT and an ENOSPC means "demote first": the answer is BUSY
 * and the client retries while blocks are on their way out (or now start to be),
 * or held ones (being written, pinned) will be released (by their client or a
 * lease) and can then be demoted. NO_SPACE only for a batch that cannot fit. */
static void s_reserve_failed(sched_t *self, sched_call_t *call, sched_instance_t *in,
                             sched_tier_t *t, int rc, uint32_t m, bool keep,
                             const sched_request_t *q /* NULL ok */)
{
    tier_slots_stats_t ts;
    tier_slots_stats(t->slots, &ts);
    if (rc == TIER_SLOTS_ENOSPC && keep && m <= ts.capacity) {
        int64_t now = sched_now();
        if (q && (!t->room_need || now - t->room_asked_ms > SCHED_ROOM_HOLD_MS ||
                  m > t->room_need || q->hash == t->room_waiter)) {
            t->room_need = m; /* this write is the one room is kept for */
            t->room_waiter = q->hash;
            t->room_asked_ms = now;
        }
        uint32_t going = sched_make_room(self, t, m);
        if (going > 0 || ts.reserved > 0 || ts.pinned > 0) {
            in->c.put_busy++;
            self->c.put_busy++;
            sched_reply_error(self, call, kvtier_StatusCode_STATUS_BUSY,
                              "tier %s is full: %u of its coldest blocks are being demoted to "
                              "make room for %u (%u pinned, %u being written); nothing "
                              "reserved, retry shortly",
                              t->cfg.name, going, m, ts.pinned, ts.reserved);
            return;
        }
        if (ts.evictable >= m) {
            /* the blocks could go, but none could be demoted now (the tier below is
             * down, still reading its inventory, full of writes, or the migrator's
             * queue is full): transient, not a batch too big for the tier */
            in->c.put_busy++;
            self->c.put_busy++;
            sched_reply_error(self, call, kvtier_StatusCode_STATUS_BUSY,
                              "tier %s is full and none of its %u evictable blocks could be "
                              "demoted now (the tier below is down, recovering or busy): "
                              "nothing reserved, retry shortly",
                              t->cfg.name, ts.evictable);
            return;
        }
    }
    switch (rc) {
    case TIER_SLOTS_ENOSPC:
        in->c.put_no_space++;
        self->c.put_no_space++;
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_NO_SPACE,
                          "tier %s: no room for %u blocks (capacity %u: %u pinned, %u being "
                          "written, %u evictable); nothing reserved",
                          t->cfg.name, m, ts.capacity, ts.pinned, ts.reserved, ts.evictable);
        break;
    case TIER_SLOTS_EDUP:
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "a key appears twice in the batch");
        break;
    case TIER_SLOTS_E2BIG:
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "%u keys exceed max_batch %u", m, self->cfg.max_batch);
        break;
    case TIER_SLOTS_EOVERFLOW:
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_UNAVAILABLE,
                          "too many concurrent writers of one key: retry");
        break;
    default:
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INTERNAL,
                          "tier %s: reserve failed: %s", t->cfg.name, tier_slots_strerror(rc));
        break;
    }
}

/* Room is being made on t for an earlier, larger write told BUSY (its request is
 * the waiter): another request's M blocks may only take free slots beyond that
 * write's need, else BUSY too (it retries like the waiter). The waiter's own
 * success clears the hold; one that stopped retrying is forgotten after
 * SCHED_ROOM_HOLD_MS. Only looks: s_room_busy answers. */
static bool s_room_held(sched_call_t *call, sched_tier_t *t, const sched_request_t *q,
                        uint32_t number, uint32_t m)
{
    if (!t->room_need)
        return false;
    if (sched_now() - t->room_asked_ms > SCHED_ROOM_HOLD_MS) {
        t->room_need = 0;
        return false;
    }
    if (q->hash == t->room_waiter)
        return false;
    /* keys already on t take no slot (a re-put of a cached prefix): not held */
    uint32_t fresh = 0;
    for (uint32_t i = 0; i < m; i++) {
        tier_slot_info_t info;
        fresh += tier_slots_peek(t->slots, number, &call->keys[i], &info) != 0 ||
                 info.state != TIER_SLOT_COMMITTED;
    }
    m = fresh;
    if (m == 0)
        return false;
    tier_slots_stats_t ts;
    tier_slots_stats(t->slots, &ts);
    uint64_t free_slots = ts.capacity > ts.used ? ts.capacity - ts.used : 0;
    return free_slots < (uint64_t)t->room_need + m;
}

/* BUSY for a write held back by s_room_held. */
static void s_room_busy(sched_t *self, sched_call_t *call, sched_instance_t *in, sched_tier_t *t,
                        uint32_t m)
{
    tier_slots_stats_t ts;
    tier_slots_stats(t->slots, &ts);
    uint64_t free_slots = ts.capacity > ts.used ? ts.capacity - ts.used : 0;
    (void)sched_make_room(self, t, t->room_need + m);
    in->c.put_busy++;
    self->c.put_busy++;
    sched_reply_error(self, call, kvtier_StatusCode_STATUS_BUSY,
                      "tier %s is full: room is being made for an earlier write of %u blocks "
                      "first (%" PRIu64 " slots free); nothing reserved, retry shortly",
                      t->cfg.name, t->room_need, free_slots);
}

/* A prepare's optional parent key (prepare_put, prepare): its length and bytes. */
typedef struct {
    uint32_t size;
    const uint8_t *bytes;
} s_parent_t;

static s_parent_t s_parent(const sched_call_t *call)
{
    const kvtier_Envelope *env = &call->req.env;
    if (env->which_body == kvtier_Envelope_prepare_req_tag)
        return (s_parent_t){env->body.prepare_req.parent_key.size,
                            env->body.prepare_req.parent_key.bytes};
    return (s_parent_t){env->body.prepare_put_req.parent_key.size,
                        env->body.prepare_put_req.parent_key.bytes};
}

/* The optional parent key and token ids of a prepare_put or prepare (issue 10
 * §1): checked before anything is reserved. */
static bool s_put_meta_ok(sched_t *self, sched_call_t *call, const sched_instance_t *in, uint32_t n)
{
    s_parent_t parent = s_parent(call);
    uint32_t nt = call->req_arr->token_ids.n, tpb = in->spec.tokens_per_block;
    if (parent.size != 0 && parent.size != BUS_KEY_LEN) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "parent_key is %u bytes: a block key is exactly %d (or empty: none)",
                          (unsigned)parent.size, BUS_KEY_LEN);
        return false;
    }
    if (nt != 0 && (uint64_t)nt != (uint64_t)n * tpb) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "%u token ids for %u keys: instance %s has %u tokens per block, so "
                          "give %" PRIu64 " (or none)",
                          nt, n, in->id, tpb, (uint64_t)n * tpb);
        return false;
    }
    return true;
}

/* Keeps, for each entry of the put window just opened (entries e of the
 * compacted keys, request position call->pos[i]), the block before it in the
 * put (the put's parent for keys[0]) and its token ids, for its stored event.
 * Only with events on and a parent or token ids given; a full pool keeps no
 * token ids (counted), and then no parents either when even those do not fit. */
static void s_put_meta_keep(sched_t *self, sched_call_t *call, const sched_instance_t *in,
                            sched_request_t *q, uint32_t m, uint32_t entries)
{
    s_parent_t parent = s_parent(call);
    const bus_arrays_t *a = call->req_arr;
    bool has_parent = parent.size == BUS_KEY_LEN;
    uint32_t tpb = a->token_ids.n ? in->spec.tokens_per_block : 0;
    sched_tokpool_t *p = &self->requests.tokpool;
    if (!sched_events_on(self) || entries == 0 || (!has_parent && tpb == 0))
        return;
    if (sched_putmeta_take(p, &q->put_meta, entries, tpb) < 0) {
        if (tpb)
            self->events.tokens_dropped++;
        tpb = 0;
        if (sched_putmeta_take(p, &q->put_meta, entries, 0) < 0)
            return;
    }
    uint32_t j = 0;
    for (uint32_t i = 0; i < m; i++) {
        if (call->resv[i].kind == TIER_RESV_SERVING)
            continue;
        uint32_t pos = call->pos[i], *w = sched_putmeta_at(p, &q->put_meta, j++);
        w[0] = pos > 0 || has_parent;
        if (pos > 0)
            memcpy(&w[1], a->keys.keys[pos - 1], BUS_KEY_LEN);
        else if (has_parent)
            memcpy(&w[1], parent.bytes, BUS_KEY_LEN);
        if (tpb)
            memcpy(&w[SCHED_TOK_HEAD], &a->token_ids.v[(size_t)pos * tpb], (size_t)tpb * sizeof *w);
    }
}

/* Reserves the m compacted keys of call->keys on the head tier t for q (shared
 * with sharers of a key; skipped when SERVING: call->resv says which), evicting
 * or, on a tier that keeps its blocks, answering BUSY while room is made. 0, or
 * -1 after replying (nothing reserved). */
static int s_put_reserve(sched_t *self, sched_call_t *call, sched_instance_t *in,
                         sched_request_t *q, sched_tier_t *t, uint32_t m, int64_t now)
{
    uint64_t deadline = q->ttl_ms ? (uint64_t)now + q->ttl_ms : 0;
    if (t->n_deleting)
        sched_deleting_settle(self, t, in->number, call->keys, m);
    size_t nv = 0;
    /* a head tier with a next tier demotes its live blocks, never drops them */
    bool keep = sched_keeps_victims(self, t);
    unsigned flags = TIER_RESERVE_SKIP_SERVING | (keep ? TIER_RESERVE_NO_EVICT : 0u);
    if (m && keep && s_room_held(call, t, q, in->number, m)) {
        s_room_busy(self, call, in, t, m);
        return -1;
    }
    int rc = m == 0 ? 0
                    : tier_slots_reserve(t->slots, in->number, call->keys, m, deadline,
                                         (uint64_t)now, flags, call->resv, call->victims, &nv);
    if (rc < 0) {
        s_reserve_failed(self, call, in, t, rc, m, keep, q);
        return -1;
    }
    if (t->room_need && q->hash == t->room_waiter)
        t->room_need = 0; /* the write room was kept for got it */
    for (size_t v = 0; v < nv; v++) {
        sched_tier_queue_delete(t, call->victims[v].slot, &call->victims[v].key);
        sched_tier_victim(self, t, &call->victims[v]);
        if (call->victims[v].expired)
            self->g.expirations++;
        else
            self->g.evictions++;
    }
    return 0;
}

void sched_on_prepare_put(sched_t *self, sched_call_t *call)
{
    const kvtier_PreparePutRequest *r = &call->req.env.body.prepare_put_req;
    sched_instance_t *in;
    sched_request_t *q = s_req_get(self, call, r->instance_id, r->request_id, &in);
    if (!q)
        return;
    uint32_t n = call->req_arr->keys.n;
    sched_tier_t *t = sched_chain_head(self, q->chain);
    if (n == 0) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT, "no keys to put");
        return;
    }
    if (!s_put_meta_ok(self, call, in, n))
        return;
    if (!s_window_can_open(self, call, q, SCHED_WIN_PUT, n, r->job_id) ||
        !s_put_tier_ready(self, call, t, in))
        return;
    int64_t now = sched_now();
    sched_keys_load(call, n);
    uint32_t m = s_put_compact(self, call, in, q->chain, 0, n, now);
    if (s_put_reserve(self, call, in, q, t, m, now) < 0)
        return;
    s_window_open(self, q, SCHED_WIN_PUT, r->job_id, t);
    sched_window_t *w = &q->win[SCHED_WIN_PUT];
    uint32_t j = 0;
    for (uint32_t i = 0; i < m; i++) {
        if (call->resv[i].kind == TIER_RESV_SERVING)
            continue;
        sched_entry_t *e = sched_list_push(&self->requests.pool, &w->entries);
        e->key = call->keys[i];
        e->slot = call->resv[i].slot;
        e->tier = (uint8_t)t->idx;
        e->kind = (uint8_t)call->resv[i].kind;
        e->gen = t->gen;
        memcpy(call->rep_keys[j], call->keys[i].b, TIER_KEY_BYTES);
        call->tok[j++] = (bus_token_entry_t){.tier = (uint16_t)t->idx,
                                             .src_tier = BUS_TOKEN_NO_TIER,
                                             .size = (uint32_t)in->spec.bytes_per_block,
                                             .slot = call->resv[i].slot};
    }
    s_put_meta_keep(self, call, in, q, m, j);
    size_t len = 0;
    bus_token_meta_t meta = s_token_meta(self, in, w, self->cfg.write_grace_ms);
    if (s_token_encode(self, call, BUS_TOKEN_PUT, &meta, j, &len) < 0) {
        s_window_close(self, q, SCHED_WIN_PUT, SCHED_WEV_CANCEL);
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INTERNAL, "token encoding failed");
        return;
    }
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_prepare_put_rep_tag);
    rep->body.prepare_put_rep.has_token = true;
    rep->body.prepare_put_rep.skipped = n - j;
    s_token_reply(call, &rep->body.prepare_put_rep.token, w, self->cfg.write_grace_ms, j, len);
    in->c.puts++;
    in->c.put_keys += j;
    in->c.put_skipped += n - j;
    self->c.puts++;
    self->c.put_keys += j;
    self->c.put_skipped += n - j;
    sched_reply(self, call);
}

/* A complete_put / complete_prefetch that waits on tier t's PutHeader: a free op
 * takes window w's entries (and a prefetch's source pins) and closes the window.
 * NULL after answering UNAVAILABLE at max_pending_puts (the window stays open). */
static sched_put_op_t *s_op_take(sched_t *self, sched_call_t *call, const sched_instance_t *in,
                                 const sched_tier_t *t, sched_request_t *q, int kind)
{
    sched_window_t *w = &q->win[kind];
    bool prefetch = kind == SCHED_WIN_PREFETCH;
    static const char *const complete[SCHED_WIN_KINDS] = {"complete_get", "complete_put",
                                                          "complete_prefetch", "complete"};
    if (self->requests.n_op_free == 0) {
        self->g.busy_refusals++;
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_UNAVAILABLE,
                          "%u puts are waiting for tier confirmation (max_pending_puts): retry "
                          "%s; the window stays open",
                          self->cfg.max_pending_puts, complete[kind]);
        return NULL;
    }
    zframe_t *rid = zframe_dup(call->req.routing_id); /* the reply may come later */
    if (!rid) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INTERNAL,
                          "out of memory: retry %s; the window stays open", complete[kind]);
        return NULL;
    }
    sched_put_op_t *op = &self->requests.ops[self->requests.op_free[--self->requests.n_op_free]];
    *op = (sched_put_op_t){.used = true,
                           .routing_id = rid,
                           .self = self,
                           .corr_id = call->req.env.corr_id,
                           .inst = (uint32_t)(in - self->index.inst),
                           .tier = t->idx,
                           .gen = t->gen,
                           .prefetch = prefetch,
                           .chain = q->chain,
                           .combined = kind == SCHED_WIN_GETPUT,
                           .entries = w->entries,
                           .req = (uint32_t)(q - self->requests.reqs),
                           .req_hash = q->hash,
                           .token_id = w->token_id,
                           .kind = (uint8_t)kind};
    (void)s_window_step(self, q, kind, SCHED_WEV_COMPLETE, 0);
    w->entries = (sched_list_t){.head = SCHED_NONE, .tail = SCHED_NONE};
    if (kind != SCHED_WIN_PREFETCH) { /* the stored events need them until the commit */
        op->meta = q->put_meta;
        q->put_meta = (sched_putmeta_t){0};
    }
    (void)s_window_step(self, q, kind, SCHED_WEV_HANDOFF, 0);
    return op;
}

static void s_op_free(sched_t *self, sched_put_op_t *op)
{
    sched_list_free(&self->requests.pool, &op->entries);
    sched_putmeta_free(&self->requests.tokpool, &op->meta);
    zframe_destroy(&op->routing_id);
    op->used = false;
    self->requests.op_free[self->requests.n_op_free++] = (uint32_t)(op - self->requests.ops);
}

static const char *s_op_name(const sched_put_op_t *op)
{
    return op && op->prefetch   ? "complete_prefetch"
           : op && op->combined ? "complete"
                                : "complete_put";
}

/* Answers a complete_put, complete_prefetch or complete (now or deferred) with its
 * counts; code != OK carries msg. */
static void s_put_reply(sched_t *self, const sched_put_op_t *op, const zframe_t *rid,
                        uint64_t corr_id, uint32_t committed, uint32_t failed, bus_code_t code,
                        const char *msg)
{
    kvtier_Envelope *rep = self->requests.op_rep;
    bool prefetch = op && op->prefetch, combined = op && op->combined;
    if (op) { /* for a resend of this complete */
        sched_request_t *q = &self->requests.reqs[op->req];
        if (q->used && !q->ended && q->hash == op->req_hash) {
            if (code == kvtier_StatusCode_STATUS_OK) {
                s_remember_done(q, op->kind, op->token_id, op->released, committed, failed);
            } else {
                q->done[op->kind].failed_token_id = op->token_id;
                q->done[op->kind].failed_code = (uint32_t)code;
            }
        }
    }
    if (!rid) { /* its routing id could not be kept (out of memory): the caller times out */
        bus_warn(S_LOG, "%s reply lost: no routing id", s_op_name(op));
        return;
    }
    bus_env_init(rep,
                 prefetch   ? kvtier_Envelope_complete_prefetch_rep_tag
                 : combined ? kvtier_Envelope_complete_rep_tag
                            : kvtier_Envelope_complete_put_rep_tag,
                 self->cfg.node_name);
    rep->corr_id = corr_id;
    rep->has_status = true;
    rep->status.code = code;
    snprintf(rep->status.message, sizeof rep->status.message, "%s", msg ? msg : "");
    if (prefetch) {
        rep->body.complete_prefetch_rep.committed = committed;
    } else if (combined) {
        rep->body.complete_rep.released = op->released;
        rep->body.complete_rep.committed = committed;
        rep->body.complete_rep.failed = failed;
    } else {
        rep->body.complete_put_rep.committed = committed;
        rep->body.complete_put_rep.failed = failed;
    }
    kvtier_Status st;
    if (bus_server_reply(self->server, rid, rep, NULL, NULL, 0, &st) < 0)
        bus_warn(S_LOG, "%s reply not sent: %s", s_op_name(op), st.message);
}

/* The stored event of a committed put key with its record (sched_putmeta_t). */
static void s_ev_stored_meta(sched_t *self, uint32_t number, const sched_tier_t *t, uint32_t slot,
                             const tier_key_t *key, const uint32_t *meta, uint32_t n_tok)
{
    tier_key_t parent;
    memcpy(parent.b, &meta[1], BUS_KEY_LEN);
    sched_ev_stored_chain(self, number, t->cfg.tier_id, t->medium, t->sizes[slot], key,
                          meta[0] ? &parent : NULL, n_tok ? meta + SCHED_TOK_HEAD : NULL, n_tok);
}

static void sched_put_done(sched_put_op_t *op, const kvtier_Status *st, uint32_t written)
{
    sched_t *self = op->self;
    sched_instance_t *in = &self->index.inst[op->inst];
    sched_tier_t *t = &self->tierset.tiers[op->tier];
    bool ok_status = st->code == kvtier_StatusCode_STATUS_OK;
    uint32_t committed = 0, failed = op->failed, i = 0, rec = 0;
    int64_t now = sched_now();
    /* an exclusive prefetch: the head copy of the pair being done committed at
     * this slot; its event waits for the source (a move, or a second copy) */
    bool moving = false;
    uint32_t moving_slot = 0;
    sched_iter_t it;
    for (sched_entry_t *e = sched_list_first(&self->requests.pool, &op->entries, &it); e;
         e = sched_list_next(&self->requests.pool, &it)) {
        if (e->kind & SCHED_ENTRY_PIN) { /* prefetch source: the copy is done with it */
            sched_tier_t *src = &self->tierset.tiers[e->tier];
            tier_key_t key;
            key = e->key;
            bool live = e->gen == src->gen;
            if (live)
                (void)tier_slots_unpin(src->slots, in->number, &key);
            if (!moving)
                continue;
            moving = false;
            if (live && s_tier_in_chain(self, op->chain, src->cfg.tier_id) &&
                sched_release_demoted(self, src, in->number, &key, e->slot, now)) {
                sched_ev_moved(self, in->number, src->cfg.tier_id, src->medium, t->cfg.tier_id,
                               t->medium, kvtier_MoveReason_MOVE_REASON_PROMOTED, &key, 1);
                self->g.prefetch_moved++;
            } else { /* the source stays (or went on its own): a second copy */
                sched_ev_stored(self, in->number, t->cfg.tier_id, t->medium, t->sizes[moving_slot],
                                &key, 1);
            }
            continue;
        }
        const uint32_t *meta =
            rec < op->meta.n ? sched_putmeta_at(&self->requests.tokpool, &op->meta, rec) : NULL;
        rec++;
        if (e->kind & SCHED_ENTRY_SKIP)
            continue;
        bool ok = i++ < written && e->gen == t->gen;
        tier_key_t key;
        key = e->key;
        if (!ok) {
            s_abort_entry(self, in->number, e, now);
            /* The PutHeader may still land after the timeout, on a slot that is free
             * again (or already someone else's): a keyed delete sent on the same
             * connection arrives after it and removes exactly that header. */
            tier_slot_info_t info;
            if (e->gen == t->gen && tier_slots_peek(t->slots, in->number, &key, &info) < 0)
                sched_tier_queue_delete(t, e->slot, &key);
            failed++;
            continue;
        }
        if (tier_slots_commit(t->slots, in->number, &key, true, (uint64_t)now, NULL) == 0) {
            committed++;
            if (op->prefetch && op->exclusive) {
                moving = true; /* recorded with its source, the next entry */
                moving_slot = e->slot;
            } else if (meta)
                s_ev_stored_meta(self, in->number, t, e->slot, &key, meta, op->meta.n_tok);
            else
                sched_ev_stored(self, in->number, t->cfg.tier_id, t->medium, t->sizes[e->slot],
                                &key, 1);
        } else
            failed++;
    }
    if (op->prefetch) {
        in->c.prefetch_committed += committed;
        in->c.prefetch_failed += failed;
        self->c.prefetch_committed += committed;
        self->c.prefetch_failed += failed;
    } else {
        in->c.puts_committed += committed;
        in->c.puts_failed += failed;
        self->c.puts_committed += committed;
        self->c.puts_failed += failed;
    }
    if (ok_status && written >= op->n_sent) {
        s_put_reply(self, op, op->routing_id, op->corr_id, committed, failed,
                    kvtier_StatusCode_STATUS_OK, NULL);
    } else {
        char msg[256];
        snprintf(msg, sizeof msg, "tier %s confirmed %u of %u block headers: %.120s", t->cfg.name,
                 written < op->n_sent ? written : op->n_sent, op->n_sent,
                 ok_status ? "short reply" : st->message);
        bus_code_t code = st->code == kvtier_StatusCode_STATUS_TIMEOUT
                              ? kvtier_StatusCode_STATUS_TIMEOUT
                              : kvtier_StatusCode_STATUS_UNAVAILABLE;
        if (code == kvtier_StatusCode_STATUS_TIMEOUT)
            self->g.tier_timeouts++;
        else
            self->g.tier_errors++;
        bus_warn(S_LOG, "%s: %s", s_op_name(op), msg);
        s_put_reply(self, op, op->routing_id, op->corr_id, committed, failed, code, msg);
    }
    s_op_free(self, op);
}

/* The tier set's answer to an op's headers. */
static void s_op_headers_done(sched_header_cb_t *cb, const kvtier_Status *st, uint32_t written)
{
    sched_put_done((sched_put_op_t *)(void *)((char *)cb - offsetof(sched_put_op_t, cb)), st,
                   written);
}

/* Sends an op's SERVING headers (its entries flagged neither SKIP nor PIN) to its
 * tier; sizes NULL: the instance's block size. -1 (st set) when not sent. */
static int s_op_headers(sched_t *self, sched_put_op_t *op, const sched_instance_t *in,
                        uint64_t deadline_wall_ms, const uint64_t *checksums, const uint64_t *sizes,
                        kvtier_Status *st)
{
    op->cb.done = s_op_headers_done;
    sched_headers_t h = {.instance_id = in->id,
                         .block_bytes = in->spec.bytes_per_block,
                         .deadline_wall_ms = deadline_wall_ms,
                         .checksums = checksums,
                         .sizes = sizes,
                         .cb = &op->cb};
    return sched_tier_put_headers(self, &self->tierset.tiers[op->tier], &self->requests.pool,
                                  &op->entries, &h, st);
}

/* Validates a complete_put's arrays against its window (n token keys). */
static bool s_put_arrays_ok(sched_t *self, sched_call_t *call, uint32_t n)
{
    if (!s_mask_ok(self, call, n))
        return false;
    bool any = false;
    for (uint32_t i = 0; i < n && !any; i++)
        any = s_success(call, i);
    uint32_t nck = call->req_arr->checksums.n;
    if (any && nck != n) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "checksums has %u values, the token covers %u keys (one xxh3-64 per "
                          "written block)",
                          nck, n);
        return false;
    }
    return true;
}

/* Concludes a put op just taken from its window: keys that failed (mask flag
 * off + i of entry i, stale, tier down) release their reservation; the others'
 * headers go to the tier, which commits them, and the reply follows (now when
 * nothing is sent). */
static void s_put_conclude(sched_t *self, sched_call_t *call, sched_instance_t *in,
                           const sched_request_t *q, sched_tier_t *t, sched_put_op_t *op,
                           uint32_t off)
{
    int64_t now = sched_now();
    uint32_t i = 0;
    bool wanted = false;
    sched_iter_t it;
    for (sched_entry_t *e = sched_list_first(&self->requests.pool, &op->entries, &it); e;
         e = sched_list_next(&self->requests.pool, &it), i++) {
        wanted |= s_success(call, off + i);
        if (e->gen != t->gen || !s_success(call, off + i) || t->state != SCHED_TIER_UP) {
            s_abort_entry(self, in->number, e, now);
            e->kind |= SCHED_ENTRY_SKIP;
            op->failed++;
            continue;
        }
        call->checksums[op->n_sent++] = call->req_arr->checksums.v[i];
    }
    if (op->n_sent == 0) {
        bool down = t->state != SCHED_TIER_UP && wanted;
        in->c.puts_failed += op->failed;
        self->c.puts_failed += op->failed;
        char msg[160];
        snprintf(msg, sizeof msg, "tier %s is down: the blocks were not committed", t->cfg.name);
        s_put_reply(self, op, op->routing_id, op->corr_id, 0, op->failed,
                    down ? kvtier_StatusCode_STATUS_UNAVAILABLE : kvtier_StatusCode_STATUS_OK,
                    down ? msg : NULL);
        s_op_free(self, op);
        return;
    }
    uint64_t wall = q->ttl_ms ? (uint64_t)sched_wall_ms() + q->ttl_ms : 0;
    kvtier_Status st;
    if (s_op_headers(self, op, in, wall, call->checksums, NULL, &st) < 0)
        sched_put_done(op, &st, 0); /* aborts the keys, replies, frees the op */
}

void sched_on_complete_put(sched_t *self, sched_call_t *call)
{
    const kvtier_CompletePutRequest *r = &call->req.env.body.complete_put_req;
    sched_instance_t *in;
    sched_request_t *q = s_req_of_token(self, call, r->leader_epoch, r->token_id, r->instance_id,
                                        r->request_id, "complete_put", &in);
    if (!q)
        return;
    sched_window_t *w = s_window_for_complete(self, call, q, SCHED_WIN_PUT, r->token_id);
    if (!w || !s_put_arrays_ok(self, call, w->entries.n))
        return;
    sched_tier_t *t = &self->tierset.tiers[w->head];
    sched_put_op_t *op = s_op_take(self, call, in, t, q, SCHED_WIN_PUT);
    if (op)
        s_put_conclude(self, call, in, q, t, op, 0);
}

/* ---- a request in two round trips: the get+put window (issue 13 §2) ----
 *
 * prepare: one call for what lookup, prepare_get and prepare_put did. The
 * request's keys are looked up from the first; the longest cached prefix is
 * pinned where it lives (the get part, entries [0, n_get) of the token), the
 * misses after it are reserved on the head tier as prepare_put reserves them
 * (keys SERVING anywhere in the chain skipped, shared reservations, BUSY while
 * a full tier demotes): the put part. All or nothing: a put part that cannot be
 * reserved unpins the prefix and answers as prepare_put would (BUSY is retried
 * by libkvtier). The window (kind get+put) keeps the pins in its own list and
 * the reservations in its entries, and lapses at the shorter of both leases.
 * complete: the get part is concluded at once (pins released, a failed key's
 * block suspected by the gc), the put part as complete_put concludes (PutHeader,
 * then the commit), and one reply carries both, once. */

/* Pins keys[0..) while they hit, the cached prefix: each recorded in call->tok
 * (tier index, slot, size) and call->rep_keys. Returns its length. */
static uint32_t s_pin_prefix(sched_t *self, sched_call_t *call, const sched_instance_t *in,
                             const sched_request_t *q, uint32_t n, int64_t now)
{
    uint32_t h = 0;
    for (; h < n; h++) {
        uint32_t slot = 0;
        uint32_t t = sched_block_find(self, in->number, &call->keys[h], q->chain, now, &slot);
        if (t == SCHED_NONE || tier_slots_pin(self->tierset.tiers[t].slots, in->number,
                                              &call->keys[h], (uint64_t)now, &slot) != 0)
            break;
        call->tok[h] = (bus_token_entry_t){.tier = (uint16_t)t,
                                           .src_tier = BUS_TOKEN_NO_TIER,
                                           .size = self->tierset.tiers[t].sizes[slot],
                                           .slot = slot};
        memcpy(call->rep_keys[h], call->keys[h].b, TIER_KEY_BYTES);
    }
    return h;
}

/* Undoes s_pin_prefix (the prepare failed after it). */
static void s_unpin_prefix(sched_t *self, sched_call_t *call, const sched_instance_t *in,
                           uint32_t h)
{
    for (uint32_t k = 0; k < h; k++) {
        tier_key_t key;
        memcpy(key.b, call->rep_keys[k], TIER_KEY_BYTES);
        (void)tier_slots_unpin(self->tierset.tiers[call->tok[k].tier].slots, in->number, &key);
    }
}

/* The put part of a prepare: the misses keys[h, n) compacted and reserved on
 * the head tier t; *m gets how many were compacted. 0, or -1 after replying
 * (nothing reserved; the caller unpins the prefix). */
static int s_prepare_misses(sched_t *self, sched_call_t *call, sched_instance_t *in,
                            sched_request_t *q, sched_tier_t *t, uint32_t h, uint32_t n,
                            int64_t now, uint32_t *m)
{
    *m = 0;
    if (h == n)
        return 0; /* all cached: nothing to write */
    if (!s_put_tier_ready(self, call, t, in))
        return -1;
    *m = s_put_compact(self, call, in, q->chain, h, n, now);
    return s_put_reserve(self, call, in, q, t, *m, now);
}

/* A prepare that succeeded stands for the request's prefix lookup: its hits are
 * counted per tier and touched (the policies' access order, as a lookup touches
 * them), the lookup counters count it, and the CacheGet event a lookup records is
 * recorded (once: the BUSY attempts before it record nothing). Before the token's
 * encoding rewrites call->tok's tier indices; reloads call->keys (the request's). */
static void s_prepare_lookup(sched_t *self, sched_call_t *call, sched_instance_t *in,
                             const sched_request_t *q, uint32_t h, uint32_t n, int64_t now)
{
    uint32_t head = sched_chain_head(self, q->chain)->cfg.tier_id, head_hits = 0;
    uint32_t per_tier[SCHED_MAX_TIERS] = {0};
    for (uint32_t k = 0; k < h; k++) {
        sched_tier_t *t = &self->tierset.tiers[call->tok[k].tier];
        tier_key_t key;
        memcpy(key.b, call->rep_keys[k], TIER_KEY_BYTES);
        t->hits++;
        (void)tier_slots_touch(t->slots, in->number, &key, (uint64_t)now, 0);
        head_hits += t->cfg.tier_id == head;
        per_tier[t->idx]++;
    }
    in->c.lookups++;
    in->c.lookup_keys += n;
    in->c.hit_keys += h;
    in->c.miss_keys += n - h;
    self->c.lookups++;
    self->c.lookup_keys += n;
    self->c.hit_keys += h;
    self->c.miss_keys += n - h;
    if (!sched_events_on(self))
        return;
    uint32_t th[SCHED_EV_TIER_HITS][2], nt = 0;
    for (uint32_t i = 0; i < self->tierset.n_tiers && nt < SCHED_EV_TIER_HITS; i++)
        if (per_tier[i]) {
            th[nt][0] = self->tierset.tiers[i].cfg.tier_id;
            th[nt++][1] = per_tier[i];
        }
    sched_keys_load(call, n); /* the put part compacted call->keys */
    sched_ev_lookup(self, in->number, call->req.env.body.prepare_req.request_id,
                    (uint32_t)kvtier_LookupMode_LOOKUP_MODE_PREFIX, h, head_hits, call->keys, n,
                    (const uint32_t(*)[2])th, nt);
}

/* Checks a prepare's own arguments; false after replying. */
static bool s_prepare_ok(sched_t *self, sched_call_t *call, sched_instance_t *in,
                         sched_request_t *q, uint32_t n)
{
    const kvtier_PrepareRequest *r = &call->req.env.body.prepare_req;
    if (n == 0) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "no keys: a prepare covers the request's blocks in prompt order");
        return false;
    }
    if (r->mode != kvtier_LookupMode_LOOKUP_MODE_PREFIX) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "mode %d: a prepare pins the cached prefix only (LOOKUP_MODE_PREFIX); "
                          "use lookup with prepare_get / prepare_put for the other modes",
                          (int)r->mode);
        return false;
    }
    if (!s_put_meta_ok(self, call, in, n))
        return false;
    /* the two lists of the window may each end in a partial chunk */
    return s_window_can_open(self, call, q, SCHED_WIN_GETPUT, n + SCHED_CHUNK, r->job_id);
}

void sched_on_prepare(sched_t *self, sched_call_t *call)
{
    const kvtier_PrepareRequest *r = &call->req.env.body.prepare_req;
    sched_instance_t *in;
    sched_request_t *q = s_req_get(self, call, r->instance_id, r->request_id, &in);
    if (!q)
        return;
    uint32_t n = call->req_arr->keys.n, m = 0;
    if (!s_prepare_ok(self, call, in, q, n))
        return;
    sched_tier_t *t = sched_chain_head(self, q->chain);
    int64_t now = sched_now();
    sched_keys_load(call, n);
    uint32_t h = s_pin_prefix(self, call, in, q, n, now);
    if (s_prepare_misses(self, call, in, q, t, h, n, now, &m) < 0) {
        s_unpin_prefix(self, call, in, h);
        return;
    }
    s_window_open(self, q, SCHED_WIN_GETPUT, r->job_id, t);
    sched_window_t *w = &q->win[SCHED_WIN_GETPUT];
    for (uint32_t k = 0; k < h; k++) {
        sched_entry_t *e = sched_list_push(&self->requests.pool, &w->pins);
        memcpy(e->key.b, call->rep_keys[k], TIER_KEY_BYTES);
        e->slot = (uint32_t)call->tok[k].slot;
        e->tier = (uint8_t)call->tok[k].tier;
        e->kind = 0;
        e->gen = self->tierset.tiers[call->tok[k].tier].gen;
    }
    uint32_t j = 0;
    for (uint32_t i = 0; i < m; i++) {
        if (call->resv[i].kind == TIER_RESV_SERVING)
            continue;
        sched_entry_t *e = sched_list_push(&self->requests.pool, &w->entries);
        e->key = call->keys[i];
        e->slot = call->resv[i].slot;
        e->tier = (uint8_t)t->idx;
        e->kind = (uint8_t)call->resv[i].kind;
        e->gen = t->gen;
        memcpy(call->rep_keys[h + j], call->keys[i].b, TIER_KEY_BYTES);
        call->tok[h + j++] = (bus_token_entry_t){.tier = (uint16_t)t->idx,
                                                 .src_tier = BUS_TOKEN_NO_TIER,
                                                 .size = (uint32_t)in->spec.bytes_per_block,
                                                 .slot = call->resv[i].slot};
    }
    s_put_meta_keep(self, call, in, q, m, j);
    s_prepare_lookup(self, call, in, q, h, n, now);
    uint64_t lease =
        sched_window_lease_ms(SCHED_WIN_GETPUT, self->cfg.pin_lease_ms, self->cfg.write_grace_ms);
    size_t len = 0;
    bus_token_meta_t meta = s_token_meta(self, in, w, lease);
    meta.n_get = h;
    if (s_token_encode(self, call, BUS_TOKEN_GET_PUT, &meta, h + j, &len) < 0) {
        s_window_close(self, q, SCHED_WIN_GETPUT, SCHED_WEV_CANCEL);
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INTERNAL, "token encoding failed");
        return;
    }
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_prepare_rep_tag);
    kvtier_PrepareReply *pr = &rep->body.prepare_rep;
    pr->has_token = true;
    pr->hit_count = h;
    pr->skipped = n - h - j;
    s_token_reply(call, &pr->token, w, lease, h + j, len);
    in->c.gets += h > 0;
    in->c.get_keys += h;
    in->c.puts += j > 0;
    in->c.put_keys += j;
    in->c.put_skipped += n - h - j;
    self->c.gets += h > 0;
    self->c.get_keys += h;
    self->c.puts += j > 0;
    self->c.put_keys += j;
    self->c.put_skipped += n - h - j;
    in->c.prepares++;
    self->c.prepares++;
    sched_reply(self, call);
}

/* The get part of a complete: a key whose load failed is suspected (the gc
 * probes it first), every pin is released, the list freed. Returns pins released. */
static uint32_t s_complete_pins(sched_t *self, sched_call_t *call, const sched_instance_t *in,
                                sched_window_t *w)
{
    uint32_t i = 0;
    sched_iter_t it;
    for (sched_entry_t *e = sched_list_first(&self->requests.pool, &w->pins, &it);
         e && call->req_arr->mask.n; e = sched_list_next(&self->requests.pool, &it), i++)
        if (!s_success(call, i))
            sched_gc_suspect(self, e->tier, e->slot, e->gen);
    uint32_t released = s_unpin_entries(self, in->number, &w->pins, false);
    sched_list_free(&self->requests.pool, &w->pins);
    return released;
}

/* A complete's arrays against its window: h pins then np reservations. */
static bool s_complete_arrays_ok(sched_t *self, sched_call_t *call, uint32_t h, uint32_t np)
{
    if (!s_mask_ok(self, call, h + np))
        return false;
    bool any = false;
    for (uint32_t i = 0; i < np && !any; i++)
        any = s_success(call, h + i);
    uint32_t nck = call->req_arr->checksums.n;
    if (any && nck != np) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "checksums has %u values, the token's put part has %u keys (one xxh3-64 "
                          "per written block, after the %u hits)",
                          nck, np, h);
        return false;
    }
    return true;
}

void sched_on_complete(sched_t *self, sched_call_t *call)
{
    const kvtier_CompleteRequest *r = &call->req.env.body.complete_req;
    sched_instance_t *in;
    sched_request_t *q = s_req_of_token(self, call, r->leader_epoch, r->token_id, r->instance_id,
                                        r->request_id, "complete", &in);
    if (!q)
        return;
    sched_window_t *w = s_window_for_complete(self, call, q, SCHED_WIN_GETPUT, r->token_id);
    if (!w)
        return;
    uint32_t h = w->pins.n, np = w->entries.n;
    if (!s_complete_arrays_ok(self, call, h, np))
        return;
    sched_tier_t *t = &self->tierset.tiers[w->head];
    /* the put part first: the only step that can refuse (the window stays open) */
    sched_put_op_t *op = NULL;
    if (np > 0 && !(op = s_op_take(self, call, in, t, q, SCHED_WIN_GETPUT)))
        return;
    if (!op)
        (void)s_window_step(self, q, SCHED_WIN_GETPUT, SCHED_WEV_COMPLETE, 0);
    uint32_t released = s_complete_pins(self, call, in, w);
    in->c.get_released += released;
    self->c.get_released += released;
    in->c.completes++;
    self->c.completes++;
    if (op) {
        op->released = released;
        s_put_conclude(self, call, in, q, t, op, h); /* replies, now or when the tier has */
        return;
    }
    (void)s_window_close(self, q, SCHED_WIN_GETPUT, SCHED_WEV_DONE);
    s_remember_done(q, SCHED_WIN_GETPUT, r->token_id, released, 0, 0);
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_complete_rep_tag);
    rep->body.complete_rep.released = released;
    sched_reply(self, call);
}

/* ---- prefetch (promotion, DESIGN.md §6; issue 4 §3) ----
 *
 * prepare_prefetch: keys SERVING on a lower tier (and not on the head tier) are
 * promoted; the others are left out of the token. Each lower copy is pinned and
 * a head-tier slot reserved, all or nothing (NO_SPACE frees everything). The
 * window holds two entries per token key, in token order: the head reservation,
 * then the source pin (flagged PIN). The token's entries carry the source as
 * src_tier / src_slot and the head destination as tier / slot; the client has
 * the source tier actor copy them (CopySlots, destination header WRITING).
 * complete_prefetch: successful keys get PutHeader(SERVING) on the head tier
 * actor and commit when it confirms; the others release their reservation.
 * Either way the source pins are released. On an exclusive chain (the default,
 * sched_placement_t) a committed key's lower copy then goes (freed, or DELETING
 * while a reader holds it; BlockMoved PROMOTED); on an inclusive one it stays:
 * the block has two locations and lookups report the head one (BlockStored). */

void sched_on_prepare_prefetch(sched_t *self, sched_call_t *call)
{
    const kvtier_PreparePrefetchRequest *r = &call->req.env.body.prepare_prefetch_req;
    sched_instance_t *in;
    sched_request_t *q = s_req_get(self, call, r->instance_id, r->request_id, &in);
    if (!q)
        return;
    uint32_t n = call->req_arr->keys.n;
    sched_tier_t *head = sched_chain_head(self, q->chain);
    if (!s_window_can_open(self, call, q, SCHED_WIN_PREFETCH, 2 * n, r->job_id))
        return;
    if (n && !s_put_tier_ready(self, call, head, in))
        return;
    int64_t now = sched_now();
    sched_keys_load(call, n);
    /* sources: pin the lower copies; compact the promotable keys to the front */
    uint32_t m = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t slot = 0;
        uint32_t t = sched_block_find(self, in->number, &call->keys[k], q->chain, now, &slot);
        if (t == SCHED_NONE || sched_same_level(&self->tierset.tiers[t], head) ||
            tier_slots_pin(self->tierset.tiers[t].slots, in->number, &call->keys[k], (uint64_t)now,
                           &slot) != 0)
            continue;
        call->keys[m] = call->keys[k];
        call->pos[m] = t;
        call->tok[m++] = (bus_token_entry_t){.tier = (uint16_t)head->idx,
                                             .src_tier = (uint16_t)t,
                                             .size = self->tierset.tiers[t].sizes[slot],
                                             .src_slot = slot};
    }
    if (head->n_deleting && m)
        sched_deleting_settle(self, head, in->number, call->keys, m);
    /* the promoted copy lives by the request's TTL, like a put's blocks */
    uint64_t deadline = q->ttl_ms ? (uint64_t)now + q->ttl_ms : 0;
    size_t nv = 0;
    bool keep = sched_keeps_victims(self, head);
    unsigned flags = TIER_RESERVE_SKIP_SERVING | (keep ? TIER_RESERVE_NO_EVICT : 0u);
    if (m && keep && s_room_held(call, head, q, in->number, m)) {
        for (uint32_t i = 0; i < m; i++)
            (void)tier_slots_unpin(self->tierset.tiers[call->pos[i]].slots, in->number,
                                   &call->keys[i]);
        s_room_busy(self, call, in, head, m);
        return;
    }
    int rc = m == 0 ? 0
                    : tier_slots_reserve(head->slots, in->number, call->keys, m, deadline,
                                         (uint64_t)now, flags, call->resv, call->victims, &nv);
    if (rc < 0) {
        for (uint32_t i = 0; i < m; i++)
            (void)tier_slots_unpin(self->tierset.tiers[call->pos[i]].slots, in->number,
                                   &call->keys[i]);
        s_reserve_failed(self, call, in, head, rc, m, keep, NULL); /* not retried: no waiter */
        return;
    }
    for (size_t v = 0; v < nv; v++) {
        sched_tier_queue_delete(head, call->victims[v].slot, &call->victims[v].key);
        sched_tier_victim(self, head, &call->victims[v]);
        if (call->victims[v].expired)
            self->g.expirations++;
        else
            self->g.evictions++;
    }
    s_window_open(self, q, SCHED_WIN_PREFETCH, r->job_id, head);
    q->copy_ran = false;
    sched_window_t *w = &q->win[SCHED_WIN_PREFETCH];
    uint32_t j = 0;
    for (uint32_t i = 0; i < m; i++) {
        sched_tier_t *src = &self->tierset.tiers[call->pos[i]];
        tier_resv_kind_t kind = call->resv[i].kind;
        if (kind != TIER_RESV_NEW && kind != TIER_RESV_EVICTED) {
            /* already on the head (SERVING, or a put writing it): nothing to
             * promote; a sharer's part is concluded at once (the writer decides) */
            if (kind == TIER_RESV_SHARED || kind == TIER_RESV_READMIT)
                (void)tier_slots_commit(head->slots, in->number, &call->keys[i], false,
                                        (uint64_t)now, NULL);
            (void)tier_slots_unpin(src->slots, in->number, &call->keys[i]);
            continue;
        }
        sched_entry_t *e = sched_list_push(&self->requests.pool, &w->entries);
        e->key = call->keys[i];
        e->slot = call->resv[i].slot;
        e->tier = (uint8_t)head->idx;
        e->kind = (uint8_t)kind;
        e->gen = head->gen;
        e = sched_list_push(&self->requests.pool, &w->entries);
        e->key = call->keys[i];
        e->slot = (uint32_t)call->tok[i].src_slot;
        e->tier = (uint8_t)src->idx;
        e->kind = SCHED_ENTRY_PIN;
        e->gen = src->gen;
        memcpy(call->rep_keys[j], call->keys[i].b, TIER_KEY_BYTES);
        call->tok[j] = call->tok[i];
        call->tok[j++].slot = call->resv[i].slot;
    }
    size_t len = 0;
    bus_token_meta_t meta = s_token_meta(self, in, w, self->cfg.pin_lease_ms);
    if (s_token_encode(self, call, BUS_TOKEN_PREFETCH, &meta, j, &len) < 0) {
        s_window_close(self, q, SCHED_WIN_PREFETCH, SCHED_WEV_CANCEL);
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INTERNAL, "token encoding failed");
        return;
    }
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_prepare_prefetch_rep_tag);
    rep->body.prepare_prefetch_rep.has_token = true;
    s_token_reply(call, &rep->body.prepare_prefetch_rep.token, w, self->cfg.pin_lease_ms, j, len);
    in->c.prefetches++;
    in->c.prefetch_keys += j;
    self->c.prefetches++;
    self->c.prefetch_keys += j;
    sched_reply(self, call);
}

void sched_on_complete_prefetch(sched_t *self, sched_call_t *call)
{
    const kvtier_CompletePrefetchRequest *r = &call->req.env.body.complete_prefetch_req;
    sched_instance_t *in;
    sched_request_t *q = s_req_of_token(self, call, r->leader_epoch, r->token_id, r->instance_id,
                                        r->request_id, "complete_prefetch", &in);
    if (!q || s_copying(self, call, q, r->token_id, "complete_prefetch"))
        return;
    sched_window_t *w = s_window_for_complete(self, call, q, SCHED_WIN_PREFETCH, r->token_id);
    if (!w || !s_mask_ok(self, call, w->entries.n / 2))
        return;
    sched_tier_t *t = &self->tierset.tiers[w->head];
    sched_put_op_t *op = s_op_take(self, call, in, t, q, SCHED_WIN_PREFETCH);
    if (!op)
        return;
    uint32_t placement = self->cfg.chains[q->chain].placement;
    op->exclusive = (placement ? placement : SCHED_PLACEMENT_DEFAULT) == SCHED_PLACEMENT_EXCLUSIVE;
    int64_t now = sched_now();
    uint32_t i = 0;
    sched_iter_t it;
    sched_entry_t *dst = NULL;
    for (sched_entry_t *e = sched_list_first(&self->requests.pool, &op->entries, &it); e;
         e = sched_list_next(&self->requests.pool, &it)) {
        if (!(e->kind & SCHED_ENTRY_PIN)) {
            dst = e;
            continue;
        }
        /* a pair: dst (head reservation), e (source pin) */
        sched_tier_t *src = &self->tierset.tiers[e->tier];
        /* a window the scheduler copied commits what the migrator copied; one the
         * caller copied itself (CopySlots) commits what the caller reports */
        bool ok = s_success(call, i++) && (!q->copy_ran || (dst->kind & SCHED_ENTRY_COPIED)) &&
                  dst->gen == t->gen && e->gen == src->gen && t->state == SCHED_TIER_UP;
        if (!ok) {
            s_abort_entry(self, in->number, dst, now);
            dst->kind |= SCHED_ENTRY_SKIP;
            op->failed++;
            continue;
        }
        call->sizes[op->n_sent] = src->sizes[e->slot];
        call->checksums[op->n_sent++] = src->checksums[e->slot];
    }
    if (op->n_sent == 0) {
        sched_put_done(op, &(kvtier_Status){.code = kvtier_StatusCode_STATUS_OK}, 0);
        return;
    }
    kvtier_Status st;
    uint64_t wall = q->ttl_ms ? (uint64_t)sched_wall_ms() + q->ttl_ms : 0;
    if (s_op_headers(self, op, in, wall, call->checksums, call->sizes, &st) < 0)
        sched_put_done(op, &st, 0); /* aborts, unpins, replies, frees the op */
}

/* ---- prefetch copies through the migrator (DESIGN.md §6) ----
 *
 * CopyPrefetch, between prepare_prefetch and complete_prefetch: the window's
 * pairs not copied yet go to the migrator as jobs of priority PREFETCH (ahead of
 * demotions), one source tier and at most sched_job_slots() pairs each, header
 * WRITING at the head slot (complete_prefetch's PutHeader makes it SERVING).
 * The window is COPYING until the last pair has an outcome: it does not lapse, a
 * complete is answered BUSY, and a request_end leaves it ABANDONED (the request's
 * name is free at once; pins and reservations are released when the copy ends,
 * since the migrator may still be writing into those slots). The caller is
 * answered then, with one flag per token key, and the window's lease restarts.
 *
 * Bounds: SCHED_COPY_JOBS jobs in flight over all windows. Pairs that find no
 * free job (or that the migrator refuses: its queue is full) wait in the window,
 * and the window waits in a FIFO; each finished job (and each tick) hands free
 * jobs to the waiting windows in turn, one window's share at a time, so a large
 * window does not starve the others. A pair still waiting SCHED_COPY_DISPATCH_MS
 * after its CopyPrefetch fails. Every job carries dispatch_within_ms =
 * SCHED_COPY_DISPATCH_MS, so the migrator never starts it later than that; a job
 * without a result after SCHED_COPY_LOST_MS (that bound plus the longest copy the
 * migrator allows, copy_timeout_ms <= 50 s) has no copy left running and fails,
 * and only then may its head slots be reused. */

/* A CopyPrefetch or complete while the window copies: BUSY (the copy's end
 * answers soon; complete after it). true when it answered. */
static bool s_copying(sched_t *self, sched_call_t *call, const sched_request_t *q,
                      uint64_t token_id, const char *what)
{
    const sched_window_t *w = &q->win[SCHED_WIN_PREFETCH];
    if (w->state != SCHED_WIN_COPYING || w->token_id != token_id)
        return false;
    sched_reply_error(self, call, kvtier_StatusCode_STATUS_BUSY,
                      "%s: the prefetch window of token %" PRIu64
                      " is being copied (%u migrator jobs in flight): retry after CopyPrefetch "
                      "answers",
                      what, token_id, q->copies);
    return true;
}

static sched_copy_t *s_copy_free_entry(sched_t *self)
{
    for (uint32_t i = 0; i < SCHED_COPY_JOBS; i++)
        if (!self->requests.copies[i].used)
            return &self->requests.copies[i];
    return NULL;
}

/* Submits the pairs gathered in mj / pairs / dsts (source tier src) as one job.
 * false: not submitted (no free job, or the migrator refused it). */
static bool s_copy_submit(sched_t *self, sched_request_t *q, const sched_tier_t *src,
                          const sched_tier_t *head, migrator_job_t *mj, const uint32_t *pairs,
                          sched_entry_t *const *dsts)
{
    sched_copy_t *job = s_copy_free_entry(self);
    if (!job)
        return false;
    mj->priority = MIGRATOR_PREFETCH;
    mj->src_tier_id = src->cfg.tier_id;
    mj->dst_tier_id = head->cfg.tier_id;
    sched_strcpy(mj->src_endpoint, sizeof mj->src_endpoint, src->endpoint);
    sched_strcpy(mj->dst_endpoint, sizeof mj->dst_endpoint, head->endpoint);
    mj->dst_state = kvtier_LocationState_LOCATION_WRITING;
    mj->dispatch_within_ms = SCHED_COPY_DISPATCH_MS;
    char why[160] = "";
    if (sched_migrate_submit(self, mj, why, sizeof why) != 0) {
        bus_debug(S_LOG, "request %s: prefetch copy of %u blocks %s -> %s waits: %s", q->id, mj->n,
                  src->cfg.name, head->cfg.name, why);
        return false;
    }
    *job = (sched_copy_t){.used = true,
                          .job_id = mj->job_id,
                          .req = (uint32_t)(q - self->requests.reqs),
                          .token_id = q->win[SCHED_WIN_PREFETCH].token_id,
                          .src_tier_id = src->cfg.tier_id,
                          .dst_tier_id = head->cfg.tier_id,
                          .submitted_ms = sched_now(),
                          .n = mj->n};
    memcpy(job->pairs, pairs, (size_t)mj->n * sizeof *pairs);
    for (uint32_t i = 0; i < mj->n; i++)
        dsts[i]->kind |= SCHED_ENTRY_COPYING;
    q->copies++;
    self->g.prefetch_copy_jobs++;
    return true;
}

/* A pair's copy will not happen in this CopyPrefetch. */
static void s_copy_fail(sched_t *self, sched_entry_t *dst)
{
    dst->kind |= SCHED_ENTRY_COPY_FAILED;
    self->g.prefetch_copy_failed++;
}

static bool s_copy_settled(const sched_entry_t *dst)
{
    return (dst->kind & (SCHED_ENTRY_COPIED | SCHED_ENTRY_COPYING | SCHED_ENTRY_COPY_FAILED)) != 0;
}

/* Hands the window's unsettled pairs to the migrator, one source tier at a time,
 * at most `share` jobs (0: as many as are free). Pairs that cannot go now stay
 * unsettled (or fail when they can never go, or waited too long). Returns
 * whether some wait. */
static bool s_copy_start(sched_t *self, sched_request_t *q, uint32_t share)
{
    sched_window_t *w = &q->win[SCHED_WIN_PREFETCH];
    sched_tier_t *head = &self->tierset.tiers[w->head];
    bool too_late = w->state == SCHED_WIN_ABANDONED ||
                    sched_now() - q->copy_started_ms > SCHED_COPY_DISPATCH_MS;
    bool head_ok = head->state == SCHED_TIER_UP && head->client;
    bool waiting = false, blocked = false;
    uint32_t jobs = 0;
    migrator_job_t mj; /* ~2 KiB */
    uint32_t pairs[MIGRATOR_MAX_JOB_SLOTS];
    sched_entry_t *dsts[MIGRATOR_MAX_JOB_SLOTS];
    for (uint32_t s = 0; s < self->tierset.n_tiers; s++) {
        sched_tier_t *src = &self->tierset.tiers[s];
        if (s == head->idx)
            continue;
        bool src_ok = head_ok && src->state != SCHED_TIER_DOWN && src->client;
        uint32_t max_m = sched_job_slots(self, src), p = 0;
        memset(&mj, 0, sizeof mj);
        sched_iter_t it;
        sched_entry_t *dst = NULL;
        for (sched_entry_t *e = sched_list_first(&self->requests.pool, &w->entries, &it); e;
             e = sched_list_next(&self->requests.pool, &it)) {
            if (!(e->kind & SCHED_ENTRY_PIN)) {
                dst = e;
                continue;
            }
            uint32_t pair = p++;
            if (e->tier != s || s_copy_settled(dst))
                continue;
            if (too_late || !src_ok || dst->gen != head->gen || e->gen != src->gen) {
                s_copy_fail(self, dst);
                continue;
            }
            if (blocked || (share && jobs == share)) {
                waiting = true;
                continue;
            }
            mj.src_slots[mj.n] = e->slot;
            mj.dst_slots[mj.n] = dst->slot;
            memcpy(mj.keys[mj.n], e->key.b, TIER_KEY_BYTES);
            dsts[mj.n] = dst;
            pairs[mj.n++] = pair;
            if (mj.n == max_m) {
                if (s_copy_submit(self, q, src, head, &mj, pairs, dsts))
                    jobs++;
                else
                    blocked = waiting = true;
                memset(&mj, 0, sizeof mj);
            }
        }
        if (mj.n) {
            if (s_copy_submit(self, q, src, head, &mj, pairs, dsts))
                jobs++;
            else
                blocked = waiting = true;
        }
    }
    return waiting;
}

/* Puts q at the end of the windows waiting for free jobs (once). */
static void s_copy_wait(sched_t *self, sched_request_t *q)
{
    sched_requests_t *rq = &self->requests;
    if (q->copy_waiting)
        return;
    q->copy_waiting = true;
    rq->copy_wait[(rq->copy_wait_head + rq->n_copy_wait++) % self->cfg.max_requests] =
        (uint32_t)(q - rq->reqs);
}

static void s_copy_finish(sched_t *self, sched_request_t *q);

/* Has the window copied everything it will (no job in flight, nothing waiting)? */
static void s_copy_check_done(sched_t *self, sched_request_t *q, bool waiting)
{
    if (waiting)
        s_copy_wait(self, q);
    else if (q->copies == 0 && !q->copy_waiting)
        s_copy_finish(self, q);
}

/* Free jobs go to the waiting windows in turn, one job each per round. */
static void s_copy_pump(sched_t *self)
{
    sched_requests_t *rq = &self->requests;
    uint32_t rounds = rq->n_copy_wait;
    while (rounds-- > 0 && rq->n_copy_wait > 0 && s_copy_free_entry(self)) {
        uint32_t qi = rq->copy_wait[rq->copy_wait_head];
        rq->copy_wait_head = (rq->copy_wait_head + 1) % self->cfg.max_requests;
        rq->n_copy_wait--;
        sched_request_t *q = &rq->reqs[qi];
        q->copy_waiting = false;
        s_copy_check_done(self, q, s_copy_start(self, q, 1));
    }
}

/* The window's copy is over (no job in flight, no pair waiting): the caller learns
 * which keys were copied; an abandoned window is released with its request. */
static void s_copy_finish(sched_t *self, sched_request_t *q)
{
    sched_window_t *w = &q->win[SCHED_WIN_PREFETCH];
    uint32_t n = 0, copied = 0;
    sched_iter_t it;
    for (sched_entry_t *e = sched_list_first(&self->requests.pool, &w->entries, &it); e;
         e = sched_list_next(&self->requests.pool, &it)) {
        if (e->kind & SCHED_ENTRY_PIN)
            continue;
        bool c = (e->kind & SCHED_ENTRY_COPIED) != 0;
        self->requests.copy_mask[n++] = c;
        copied += c;
    }
    kvtier_Envelope *rep = self->requests.op_rep;
    bus_env_init(rep, kvtier_Envelope_copy_prefetch_rep_tag, self->cfg.node_name);
    rep->corr_id = q->copy_corr;
    rep->has_status = true;
    bus_arrays_t arr = {0};
    bool abandoned = w->state == SCHED_WIN_ABANDONED;
    if (abandoned) {
        rep->status.code = kvtier_StatusCode_STATUS_NOT_FOUND;
        snprintf(rep->status.message, sizeof rep->status.message,
                 "request %.64s ended while its prefetch copied: nothing promoted", q->id);
    } else {
        rep->status.code = kvtier_StatusCode_STATUS_OK;
        rep->body.copy_prefetch_rep.copied = copied;
        arr.mask = (bus_bools_t){.v = self->requests.copy_mask, .n = n, .cap = self->cfg.max_batch};
    }
    kvtier_Status st;
    if (q->copy_rid && bus_server_reply(self->server, q->copy_rid, rep, &arr, NULL, 0, &st) < 0)
        bus_warn(S_LOG, "CopyPrefetch reply not sent: %s", st.message);
    zframe_destroy(&q->copy_rid);
    if (abandoned) {
        (void)s_window_close(self, q, SCHED_WIN_PREFETCH, SCHED_WEV_COPIED);
        s_request_free(self, q);
    } else {
        (void)s_window_step(self, q, SCHED_WIN_PREFETCH, SCHED_WEV_COPIED, 0);
    }
}

void sched_on_copy_prefetch(sched_t *self, sched_call_t *call)
{
    const kvtier_CopyPrefetchRequest *r = &call->req.env.body.copy_prefetch_req;
    sched_instance_t *in;
    sched_request_t *q = s_req_of_token(self, call, r->leader_epoch, r->token_id, r->instance_id,
                                        r->request_id, "CopyPrefetch", &in);
    if (!q || s_copying(self, call, q, r->token_id, "CopyPrefetch"))
        return;
    sched_window_t *w = s_window_for_complete(self, call, q, SCHED_WIN_PREFETCH, r->token_id);
    if (!w)
        return;
    if (!self->reclaim.mig_client) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_UNAVAILABLE,
                          "no migrator runs beside this scheduler: prefetch cannot copy");
        return;
    }
    zframe_t *rid = zframe_dup(call->req.routing_id); /* answered when the copies end */
    if (!rid) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INTERNAL,
                          "out of memory: retry CopyPrefetch");
        return;
    }
    /* pairs that failed an earlier CopyPrefetch are tried again */
    sched_iter_t it;
    for (sched_entry_t *e = sched_list_first(&self->requests.pool, &w->entries, &it); e;
         e = sched_list_next(&self->requests.pool, &it))
        e->kind &= (uint8_t)~SCHED_ENTRY_COPY_FAILED;
    q->copy_rid = rid;
    q->copy_corr = call->req.env.corr_id;
    q->copy_ran = true;
    q->copies = 0;
    q->copy_started_ms = sched_now();
    (void)s_window_step(self, q, SCHED_WIN_PREFETCH, SCHED_WEV_COPY, 0);
    /* a share while others wait, so the newcomer queues behind them */
    s_copy_check_done(self, q, s_copy_start(self, q, self->requests.n_copy_wait ? 1 : 0));
}

/* One job's outcome on its window (ok: per pair, NULL when nothing was copied). */
static void s_copy_result(sched_t *self, sched_copy_t *job, const bool *ok, uint32_t n_ok)
{
    sched_request_t *q = &self->requests.reqs[job->req];
    sched_window_t *w = &q->win[SCHED_WIN_PREFETCH];
    job->used = false;
    if (!q->used || w->token_id != job->token_id ||
        (w->state != SCHED_WIN_COPYING && w->state != SCHED_WIN_ABANDONED)) {
        /* not reached: a window is held until its last job's result */
        bus_error(S_LOG, "prefetch copy %" PRIu64 ": its window is gone", job->job_id);
        return;
    }
    uint32_t p = 0, k = 0, copied = 0;
    sched_iter_t it;
    sched_entry_t *dst = NULL;
    for (sched_entry_t *e = sched_list_first(&self->requests.pool, &w->entries, &it);
         e && k < job->n; e = sched_list_next(&self->requests.pool, &it)) {
        if (!(e->kind & SCHED_ENTRY_PIN)) {
            dst = e;
            continue;
        }
        if (p++ != job->pairs[k])
            continue;
        dst->kind &= (uint8_t)~SCHED_ENTRY_COPYING;
        if (ok && k < n_ok && ok[k]) {
            dst->kind |= SCHED_ENTRY_COPIED;
            copied++;
        } else {
            dst->kind |= SCHED_ENTRY_COPY_FAILED;
        }
        k++;
    }
    self->g.prefetch_copied += copied;
    self->g.prefetch_copy_failed += job->n - copied;
    q->copies--;
    /* the window's own waiting pairs first, then the other windows' */
    bool waiting = q->copy_waiting ? true : s_copy_start(self, q, 0);
    s_copy_check_done(self, q, waiting);
    s_copy_pump(self);
}

void sched_on_copy_done(sched_t *self, sched_call_t *call)
{
    migrator_result_t res;
    const migrator_result_t *r = &res;
    char why[200];
    if (migrator_result_decode(&call->req.env.body.demote_done_req, &res, why, sizeof why) < 0) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT, "%s", why);
        return;
    }
    sched_copy_t *job = NULL;
    for (uint32_t i = 0; i < SCHED_COPY_JOBS && !job; i++)
        if (self->requests.copies[i].used && self->requests.copies[i].job_id == r->job_id)
            job = &self->requests.copies[i];
    if (!job) { /* a demotion's result without its priority: demotion answers it */
        sched_on_demote_done(self, call);
        return;
    }
    if (r->src_tier_id != job->src_tier_id || r->dst_tier_id != job->dst_tier_id ||
        r->n != job->n) {
        bus_warn(S_LOG,
                 "migrator: result for prefetch copy %" PRIu64 " names tiers %u -> %u and %u "
                 "slots, the job is %u -> %u with %u: ignored",
                 r->job_id, r->src_tier_id, r->dst_tier_id, r->n, job->src_tier_id,
                 job->dst_tier_id, job->n);
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "prefetch copy %" PRIu64 " is %u -> %u with %u slots", r->job_id,
                          job->src_tier_id, job->dst_tier_id, job->n);
        return;
    }
    if (r->status != kvtier_StatusCode_STATUS_OK)
        bus_info(S_LOG, "prefetch copy %" PRIu64 ": %s", r->job_id,
                 r->message[0] ? r->message : "the source tier actor reported it failed");
    uint32_t n = job->n, copied = 0;
    for (uint32_t i = 0; i < n && i < r->n; i++)
        copied += r->ok[i];
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_demote_done_rep_tag);
    rep->body.demote_done_rep.switched = copied;
    rep->body.demote_done_rep.rolled_back = n - copied;
    sched_reply(self, call);
    s_copy_result(self, job, r->ok, r->n);
}

void sched_copy_tick(sched_t *self, int64_t now)
{
    for (uint32_t i = 0; i < SCHED_COPY_JOBS; i++) {
        sched_copy_t *job = &self->requests.copies[i];
        if (!job->used || now - job->submitted_ms < SCHED_COPY_LOST_MS)
            continue;
        bus_warn(S_LOG, "prefetch copy %" PRIu64 ": no result after %d ms: failed", job->job_id,
                 SCHED_COPY_LOST_MS);
        self->g.prefetch_copy_lost++;
        s_copy_result(self, job, NULL, 0);
    }
    s_copy_pump(self); /* windows the migrator refused wait for no job's result */
}

/* ---- leases ---- */

void sched_lease_scan(sched_t *self, int64_t now)
{
    uint32_t nr = self->cfg.max_requests;
    uint32_t steps = self->cfg.scan_max < nr ? self->cfg.scan_max : nr;
    for (uint32_t s = 0; s < steps; s++) {
        sched_request_t *q = &self->requests.reqs[self->requests.scan_cursor];
        self->requests.scan_cursor = (self->requests.scan_cursor + 1) % nr;
        if (!q->used)
            continue;
        for (int k = 0; k < SCHED_WIN_KINDS; k++) {
            sched_window_t *w = &q->win[k];
            uint64_t lease =
                sched_window_lease_ms(k, self->cfg.pin_lease_ms, self->cfg.write_grace_ms);
            if (!sched_window_open(w) || now - w->opened_ms < (int64_t)lease)
                continue;
            uint32_t aborted = 0;
            uint32_t n = s_window_close_counted(self, q, k, SCHED_WEV_LAPSE, &aborted);
            if (k == SCHED_WIN_GET)
                self->g.pins_lapsed += n;
            else if (k == SCHED_WIN_PUT)
                self->g.reservations_lapsed += n;
            else if (k == SCHED_WIN_GETPUT) {
                self->g.pins_lapsed += n;
                self->g.reservations_lapsed += aborted;
            }
            bus_warn(S_LOG,
                     "request %s/%s: %s window (token %" PRIu64 ") lapsed after %" PRIu64
                     " ms: %u %s released%s",
                     self->index.inst[q->inst].id, q->id, s_kind_name[k], w->token_id, lease, n,
                     k == SCHED_WIN_PUT ? "reservations" : "pins",
                     k == SCHED_WIN_GETPUT && aborted ? " and its reservations aborted" : "");
        }
        /* a request nobody uses any more (its client died after request_begin, or
         * never called request_end) would hold its entry for good: ended */
        bool open = false;
        for (int k = 0; k < SCHED_WIN_KINDS; k++)
            open = open || q->win[k].state != SCHED_WIN_CLOSED;
        if (!open && now - q->last_ms >= (int64_t)self->cfg.request_idle_ms) {
            bus_warn(S_LOG, "request %s/%s: no call for %" PRIu64 " ms (request_idle): ended",
                     self->index.inst[q->inst].id, q->id, self->cfg.request_idle_ms);
            self->g.requests_lapsed++;
            s_request_free(self, q);
        }
    }
}
