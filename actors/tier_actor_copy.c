/* tier_actor_copy.c — CopySlots: the tier actor copies its own SERVING blocks,
 * bytes and headers, to another tier actor, tier to tier (DESIGN.md §6 demotion
 * and prefetch, issue 4 §2; the wire rules are in tier_actor.h). Owns the copies
 * in flight and one bus_client per destination endpoint.
 *
 * A copy is a small state machine driven only by the destination's completions:
 *   WRITE   the source slots that pass the check (SERVING, expected key, bytes
 *           that read back with their checksum) go out in one WriteSlots;
 *   PUT     one PutHeader per run of slots sharing instance and deadline;
 *   DELETE  the source is checked again; a slot whose source changed fails and
 *           its destination copy is deleted (keyed) before the reply;
 *   then the deferred reply goes to the requester (routing id + corr id kept).
 * A destination that serves UCX (a remote tier with transport ucx: Probe{ucx}
 * when its client is made) gets the WRITE's bytes one-sided into its staging
 * region first (UXFLUSH: ucp_put_nbx + flush, bus_ucx_peer.h), then a WriteSlots
 * that names the range instead of carrying frames; its checks are the frames
 * path's. Until it answered, or when its region is full, frames carry them.
 * Never blocks on a destination (every request is asynchronous, bounded by the
 * copy's deadline), never sends bytes that did not pass the source check, never
 * reports a slot copied unless the source is the same block afterwards, and never
 * lets a timed-out destination receive a request late (its client is closed). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_client.h"
#include "bus_log.h"
#include "bus_ucx_peer.h"
#include "tier_actor_int.h"
#include "tier_checksum.h"

typedef tier_actor_self_t self_t;

#define S_LOG "tier"
#define S_OK kvtier_StatusCode_STATUS_OK
#define S_INVALID kvtier_StatusCode_STATUS_INVALID_ARGUMENT
#define S_TIMEOUT kvtier_StatusCode_STATUS_TIMEOUT
#define S_UNAVAILABLE kvtier_StatusCode_STATUS_UNAVAILABLE
/* Completion rounds per destination per wake-up (each drains a burst). */
#define S_DISPATCH_ROUNDS 8

enum { S_IDLE = 0, S_WRITE, S_PUT, S_DELETE, S_UXFLUSH };
/* a destination's UCX: not asked, asking, connected, frames only */
enum { S_UX_UNKNOWN = 0, S_UX_PROBING, S_UX_READY, S_UX_NONE };

typedef struct s_copy s_copy_t;

typedef struct {
    char ep[TIER_ACTOR_ENDPOINT_MAX];
    bus_client_t *client; /* NULL: entry free */
    uint32_t users;       /* copies in flight through it */
    int64_t last_used;    /* zclock_mono when a copy last took it */
    bool broken;          /* a request timed out: failed and closed on the next service */
    struct tier_actor_copy *owner;
    uint8_t ux_state;   /* S_UX_* */
    bus_ucx_conn_t *ux; /* S_UX_READY: its staging region */
} s_dest_t;

/* One PutHeader: slots idx[first .. first + count) of its copy. */
typedef struct {
    s_copy_t *copy;
    uint32_t first, count;
} s_group_t;

struct s_copy {
    tier_actor_copy_t *owner;
    int stage; /* S_IDLE: free */
    zframe_t *routing_id;
    uint64_t corr_id;
    s_dest_t *dest;
    uint32_t dst_tier_id;
    kvtier_LocationState dst_state;
    int64_t deadline; /* zclock_mono ms */
    uint64_t bytes;   /* counted against the in-flight byte bound */
    uint32_t n;
    uint64_t *src, *dst;
    uint8_t (*keys)[BUS_KEY_LEN];
    tier_slot_header_t *hdr; /* source headers as checked */
    bool *ok;                /* the slot is still on its way to success */
    uint32_t *idx;           /* slots sent by the current stage, in wire order */
    uint32_t nidx;
    s_group_t *groups;
    uint8_t *token; /* the CopySlots' token, forwarded to the destination */
    uint32_t token_len, token_cap;
    uint32_t pending; /* destination requests in flight */
    kvtier_Status st; /* the first destination failure; OK when none */
    /* UCX: the WRITE's bytes (held until flushed) and their range at the destination */
    tier_actor_rbuf_t **ux_bufs;
    uint32_t ux_n;
    bus_ucx_conn_t *ux_conn;
    uint64_t ux_off, ux_len;
    bool ux_was; /* the WRITE in flight named a region */
};

struct tier_actor_copy {
    self_t *self;
    uint32_t max_copies, max_slots, max_dests, timeout_ms;
    uint64_t max_bytes, bytes;
    s_copy_t *copies;
    s_dest_t *dests;
    /* scratch for the one request or reply being built */
    kvtier_Envelope env;
    uint64_t *slots, *sizes, *sums;
    uint8_t (*keys)[BUS_KEY_LEN];
    bool *mask;
    bus_payload_t *payload;
    tier_actor_rbuf_t **bufs;
    tier_io_t *gets;
    struct iovec *iov;
    /* UCX toward destinations that serve it (made when the first one answers) */
    bus_ucx_peer_t *ux;
    int ux_fd;   /* in the actor's poller */
    int ux_wait; /* its last progress: 0 when events are pending */
    bool ux_off;
    bool ux_probe_mask[1];
    bus_arrays_t ux_probe_arr;
};

static void s_send_write(s_copy_t *c);
static void s_after_puts(s_copy_t *c);
static void s_finish(s_copy_t *c);

/* ---- state ---- */

static int s_copy_alloc(s_copy_t *c, uint32_t ms)
{
    c->src = calloc(ms, sizeof *c->src);
    c->dst = calloc(ms, sizeof *c->dst);
    c->keys = calloc(ms, sizeof *c->keys);
    c->hdr = calloc(ms, sizeof *c->hdr);
    c->ok = calloc(ms, sizeof *c->ok);
    c->idx = calloc(ms, sizeof *c->idx);
    c->groups = calloc(ms, sizeof *c->groups);
    c->ux_bufs = calloc(ms, sizeof *c->ux_bufs);
    c->token_cap = (uint32_t)BUS_TOKEN_MAX_BYTES(BUS_TOKEN_MAX_TIERS, ms);
    c->token = malloc(c->token_cap);
    return c->src && c->dst && c->keys && c->hdr && c->ok && c->idx && c->groups && c->token &&
                   c->ux_bufs
               ? 0
               : -1;
}

static void s_copy_free(s_copy_t *c)
{
    zframe_destroy(&c->routing_id);
    free(c->src);
    free(c->dst);
    free(c->keys);
    free(c->hdr);
    free(c->ok);
    free(c->idx);
    free(c->groups);
    free(c->token);
    for (uint32_t k = 0; c->ux_bufs && k < c->ux_n; k++)
        free(c->ux_bufs[k]);
    free(c->ux_bufs);
}

int tier_actor_copy_new(self_t *self, const tier_actor_config_t *cfg, char *why, size_t len)
{
    tier_actor_copy_t *cp = calloc(1, sizeof *cp);
    if (!cp)
        goto out_nomem;
    self->copy = cp;
    cp->self = self;
    cp->max_copies =
        cfg->copy_max_in_flight ? cfg->copy_max_in_flight : TIER_ACTOR_DEFAULT_COPY_IN_FLIGHT;
    cp->max_slots = cfg->copy_max_slots ? cfg->copy_max_slots : TIER_ACTOR_DEFAULT_COPY_SLOTS;
    if (cp->max_slots > self->max_slots)
        cp->max_slots = self->max_slots;
    cp->max_dests = cfg->copy_max_dests ? cfg->copy_max_dests : TIER_ACTOR_DEFAULT_COPY_DESTS;
    cp->timeout_ms =
        cfg->copy_timeout_ms ? cfg->copy_timeout_ms : TIER_ACTOR_DEFAULT_COPY_TIMEOUT_MS;
    cp->max_bytes = self->max_bytes;
    uint32_t ms = cp->max_slots;
    cp->copies = calloc(cp->max_copies, sizeof *cp->copies);
    cp->dests = calloc(cp->max_dests, sizeof *cp->dests);
    cp->slots = calloc(ms, sizeof *cp->slots);
    cp->sizes = calloc(ms, sizeof *cp->sizes);
    cp->sums = calloc(ms, sizeof *cp->sums);
    cp->keys = calloc(ms, sizeof *cp->keys);
    cp->mask = calloc(ms, sizeof *cp->mask);
    cp->payload = calloc(ms, sizeof *cp->payload);
    cp->bufs = calloc(ms, sizeof *cp->bufs);
    cp->gets = calloc(ms, sizeof *cp->gets);
    cp->iov = calloc(ms, sizeof *cp->iov);
    if (!cp->copies || !cp->dests || !cp->slots || !cp->sizes || !cp->sums || !cp->keys ||
        !cp->mask || !cp->payload || !cp->bufs || !cp->gets || !cp->iov)
        goto out_nomem;
    for (uint32_t i = 0; i < cp->max_copies; i++) {
        cp->copies[i].owner = cp;
        if (s_copy_alloc(&cp->copies[i], ms) < 0)
            goto out_nomem;
    }
    return 0;

out_nomem:
    snprintf(why, len, "tier %s: out of memory for copy state", self->name);
    return -1;
}

static void s_dest_close(tier_actor_copy_t *cp, s_dest_t *d)
{
    if (!d->client)
        return;
    if (cp->self->poller)
        zpoller_remove(cp->self->poller, bus_client_sock(d->client));
    bus_ucx_conn_close(&d->ux);
    bus_client_destroy(&d->client);
    memset(d, 0, sizeof *d);
}

void tier_actor_copy_destroy(self_t *self)
{
    tier_actor_copy_t *cp = self->copy;
    if (!cp)
        return;
    for (uint32_t i = 0; cp->dests && i < cp->max_dests; i++)
        s_dest_close(cp, &cp->dests[i]);
    if (cp->ux && cp->self->poller)
        zpoller_remove(cp->self->poller, &cp->ux_fd);
    bus_ucx_peer_destroy(&cp->ux);
    for (uint32_t i = 0; cp->copies && i < cp->max_copies; i++)
        s_copy_free(&cp->copies[i]);
    free(cp->copies);
    free(cp->dests);
    free(cp->slots);
    free(cp->sizes);
    free(cp->sums);
    free(cp->keys);
    free(cp->mask);
    free(cp->payload);
    free(cp->bufs);
    free(cp->gets);
    free(cp->iov);
    free(cp);
    self->copy = NULL;
}

uint32_t tier_actor_copy_max_slots(self_t *self)
{
    return self->copy->max_slots;
}

/* ---- destinations ---- */

/* Probe{ucx}'s answer: a destination with a UCX listener and a region is
 * connected; any other answer leaves it to frames. */
static void s_ux_probed(void *arg, bus_reply_t *r)
{
    s_dest_t *d = arg;
    tier_actor_copy_t *cp = d->owner;
    self_t *self = cp->self;
    char why[256];
    d->ux_state = S_UX_NONE;
    if (r->status.code != S_OK || !r->env || r->env->which_body != kvtier_Envelope_probe_rep_tag)
        return;
    const kvtier_ProbeReply *p = &r->env->body.probe_rep;
    if (!p->ucx_address[0] || !p->ucx_region || cp->ux_off)
        return;
    if (!cp->ux) {
        char who[96];
        snprintf(who, sizeof who, "tier %s (copies)", self->name);
        cp->ux = bus_ucx_peer_new(who, why, sizeof why);
        if (!cp->ux) {
            cp->ux_off = true;
            bus_warn(S_LOG, "tier %s: copies to %s go by frames: %s", self->name, d->ep, why);
            return;
        }
        cp->ux_fd = bus_ucx_peer_fd(cp->ux);
        if (self->poller && cp->ux_fd >= 0)
            zpoller_add(self->poller, &cp->ux_fd);
    }
    d->ux = bus_ucx_conn_new(cp->ux, p->ucx_address, p->ucx_region, p->ucx_base, p->ucx_length,
                             p->ucx_rkey.bytes, p->ucx_rkey.size, why, sizeof why);
    if (!d->ux) {
        bus_warn(S_LOG, "tier %s: copies to %s go by frames: %s", self->name, d->ep, why);
        return;
    }
    d->ux_state = S_UX_READY;
    bus_info(S_LOG, "tier %s: copies to %s go over UCX (%s)", self->name, d->ep, p->ucx_address);
}

static void s_ux_probe(tier_actor_copy_t *cp, s_dest_t *d)
{
    kvtier_Status st = {0};
    d->owner = cp;
    d->ux_state = S_UX_NONE;
    if (cp->ux_off)
        return;
    bus_env_init(&cp->env, kvtier_Envelope_probe_req_tag, cp->self->name);
    cp->env.body.probe_req.ucx = true;
    cp->ux_probe_arr.mask = (bus_bools_t){.v = cp->ux_probe_mask, .cap = 1};
    if (bus_client_send(d->client, &cp->env, NULL, NULL, 0, cp->timeout_ms, &cp->ux_probe_arr,
                        s_ux_probed, d, NULL, &st) == 0)
        d->ux_state = S_UX_PROBING;
}

/* The client for ep: cached, a free entry, or the idle one used longest ago. */
static s_dest_t *s_dest_get(tier_actor_copy_t *cp, const char *ep, kvtier_Status *st)
{
    self_t *self = cp->self;
    s_dest_t *free_d = NULL, *idle = NULL;
    for (uint32_t i = 0; i < cp->max_dests; i++) {
        s_dest_t *d = &cp->dests[i];
        if (d->client && !d->broken && strcmp(d->ep, ep) == 0)
            return d;
        if (!d->client && !free_d)
            free_d = d;
        else if (d->client && d->users == 0 && (!idle || d->last_used < idle->last_used))
            idle = d;
    }
    if (!free_d && idle) {
        s_dest_close(cp, idle);
        free_d = idle;
    }
    if (!free_d) {
        tier_actor_fail(self, st, S_UNAVAILABLE,
                        "copy to %s: all %u destination clients are busy with copies; retry "
                        "later",
                        ep, cp->max_dests);
        return NULL;
    }
    uint64_t inflight = (uint64_t)cp->max_copies * cp->max_slots + cp->max_copies;
    bus_client_config_t cc = {
        .name = self->name,
        .max_in_flight =
            inflight > BUS_CLIENT_MAX_IN_FLIGHT ? BUS_CLIENT_MAX_IN_FLIGHT : (uint32_t)inflight,
        .default_timeout_ms = cp->timeout_ms,
    };
    free_d->client = bus_client_new(ep, &cc);
    if (!free_d->client) {
        tier_actor_fail(self, st, S_INVALID, "copy to \"%s\": cannot connect to that endpoint", ep);
        return NULL;
    }
    if (self->poller)
        zpoller_add(self->poller, bus_client_sock(free_d->client));
    snprintf(free_d->ep, sizeof free_d->ep, "%s", ep);
    s_ux_probe(cp, free_d);
    return free_d;
}

/* ---- helpers ---- */

/* Records the first destination failure of a copy (the reply's status). */
static void s_note(s_copy_t *c, const kvtier_Status *why)
{
    if (why->code == S_OK || c->st.code != S_OK)
        return;
    tier_actor_fail(c->owner->self, &c->st, why->code, "copy to %s: %s", c->dest->ep, why->message);
}

/* A timeout leaves requests queued toward the destination: its client is closed
 * (tier_actor_copy_service) so they are never delivered late. */
static void s_note_reply(s_copy_t *c, const bus_reply_t *r)
{
    if (r->status.code == S_TIMEOUT && !r->env)
        c->dest->broken = true;
    s_note(c, &r->status);
}

/* Milliseconds left of the copy's deadline; 0 when it has passed. */
static uint32_t s_left_ms(s_copy_t *c)
{
    int64_t left = c->deadline - zclock_mono();
    return left <= 0 ? 0 : left > UINT32_MAX ? UINT32_MAX : (uint32_t)left;
}

static bool s_send_ok(s_copy_t *c, kvtier_Status *st)
{
    if (c->dest->broken) {
        bus_status_set(st, S_UNAVAILABLE, "the destination timed out earlier");
        return false;
    }
    if (s_left_ms(c) == 0) {
        bus_status_set(st, S_TIMEOUT, "the copy's %u ms passed", c->owner->timeout_ms);
        return false;
    }
    return true;
}

/* The copy's token as the payload of its destination requests (empty: none). */
static bus_blob_t s_token(const s_copy_t *c)
{
    return (bus_blob_t){.data = c->token, .len = c->token_len, .cap = c->token_len};
}

static bool s_same_block(const tier_slot_header_t *a, const tier_slot_header_t *b)
{
    return a->state == TIER_SLOT_SERVING && b->state == TIER_SLOT_SERVING &&
           memcmp(a->key.b, b->key.b, TIER_KEY_BYTES) == 0 && a->size == b->size &&
           a->checksum == b->checksum;
}

/* ---- start: the source check ---- */

static bool s_source_check(self_t *self, s_copy_t *c, uint32_t i)
{
    tier_slot_header_t *h = &c->hdr[i];
    char hex[33];
    if (tier_get_header(self->tier, c->src[i], h) < 0 || h->state != TIER_SLOT_SERVING) {
        bus_debug(S_LOG, "tier %s: copy of slot %" PRIu64 ": not SERVING", self->name, c->src[i]);
        return false;
    }
    if (memcmp(h->key.b, c->keys[i], TIER_KEY_BYTES) != 0) {
        bus_debug(S_LOG, "tier %s: copy of slot %" PRIu64 ": it holds key %s, not the expected one",
                  self->name, c->src[i], tier_key_hex(&h->key, hex));
        return false;
    }
    return true;
}

/* Takes the request's arrays into c and checks every source slot; *bytes gets the
 * bytes of the slots that passed. */
static void s_take(self_t *self, s_copy_t *c, const kvtier_CopySlotsRequest *r, uint64_t *bytes)
{
    const bus_arrays_t *a = self->arr;
    c->n = a->slots.n;
    c->dst_tier_id = r->dst_tier_id;
    c->dst_state = r->dst_state;
    c->st = (kvtier_Status){.code = S_OK};
    *bytes = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        c->src[i] = a->slots.v[i];
        c->dst[i] = a->dst_slots.v[i];
        memcpy(c->keys[i], a->keys.keys[i], BUS_KEY_LEN);
        c->ok[i] = s_source_check(self, c, i);
        *bytes += c->ok[i] ? c->hdr[i].size : 0;
    }
}

int tier_actor_copy_start(self_t *self, bus_request_t *req, const char *dst_ep,
                          const bus_blob_t *token, kvtier_Status *st)
{
    tier_actor_copy_t *cp = self->copy;
    const kvtier_CopySlotsRequest *r = &req->env.body.copy_slots_req;
    s_copy_t *c = NULL;
    for (uint32_t i = 0; i < cp->max_copies && !c; i++)
        if (cp->copies[i].stage == S_IDLE)
            c = &cp->copies[i];
    if (!c) {
        self->stats.copies_refused++;
        return tier_actor_fail(self, st, S_UNAVAILABLE,
                               "%u copies in flight (copy_max_in_flight); retry after they finish",
                               cp->max_copies);
    }
    if (token->len > c->token_cap)
        return tier_actor_fail(self, st, S_INVALID,
                               "CopySlots with a %u-byte token, at most %u for %u slots",
                               token->len, c->token_cap, cp->max_slots);
    uint64_t bytes = 0;
    s_take(self, c, r, &bytes);
    if (bytes > cp->max_bytes)
        return tier_actor_fail(self, st, S_INVALID,
                               "CopySlots of %" PRIu64 " bytes, the limit is %" PRIu64
                               " per copy: split it",
                               bytes, cp->max_bytes);
    if (cp->bytes + bytes > cp->max_bytes) {
        self->stats.copies_refused++;
        return tier_actor_fail(self, st, S_UNAVAILABLE,
                               "%" PRIu64 " bytes of copies in flight, %" PRIu64
                               " more would pass the bound %" PRIu64 "; retry later",
                               cp->bytes, bytes, cp->max_bytes);
    }
    s_dest_t *d = s_dest_get(cp, dst_ep, st);
    if (!d) {
        if (st->code == S_UNAVAILABLE)
            self->stats.copies_refused++;
        return -(int)st->code;
    }
    memcpy(c->token, token->data, token->len);
    c->token_len = token->len;
    c->routing_id = zframe_dup(req->routing_id);
    c->corr_id = req->env.corr_id;
    c->dest = d;
    c->deadline = zclock_mono() + cp->timeout_ms;
    c->bytes = bytes;
    c->pending = 0;
    c->stage = S_WRITE;
    d->users++;
    d->last_used = zclock_mono();
    cp->bytes += bytes;
    self->stats.copies++;
    s_send_write(c);
    return 0;
}

/* ---- WRITE ---- */

/* Reads the bytes of idx[0..nidx) into cp->bufs; a slot that fails (or whose host
 * bytes do not match the header's checksum: torn by a writer) drops out. */
static void s_read(s_copy_t *c)
{
    tier_actor_copy_t *cp = c->owner;
    self_t *self = cp->self;
    for (uint32_t k = 0; k < c->nidx; k++) {
        const tier_slot_header_t *h = &c->hdr[c->idx[k]];
        cp->bufs[k] = tier_actor_rbuf_new(h->size);
        cp->iov[k] = (struct iovec){cp->bufs[k] ? cp->bufs[k]->data : NULL, h->size};
        cp->gets[k] = (tier_io_t){.slot = c->src[c->idx[k]], .iov = &cp->iov[k], .n = 1};
        cp->gets[k].rc = cp->bufs[k] ? 0 : -ENOMEM;
    }
    /* only the slots that got a buffer are read; the others keep -ENOMEM */
    uint32_t m = 0;
    for (uint32_t k = 0; k < c->nidx; k++)
        if (cp->bufs[k])
            cp->gets[m++] = cp->gets[k];
    (void)tier_read_batch(self->tier, cp->gets, m);
    for (uint32_t k = c->nidx; k-- > 0;) /* spread back, keeping order */
        cp->gets[k] = cp->bufs[k] ? cp->gets[--m] : (tier_io_t){.rc = -ENOMEM};
    /* The unchanged-source check: the bytes read are the header's (a backend that
     * verifies its own reads, tier_desc_t.reads_verified, has refused a mismatch). */
    for (uint32_t k = 0; k < c->nidx && !self->desc.reads_verified; k++)
        if (cp->gets[k].rc == 0 && tier_checksum(&cp->iov[k], 1) != c->hdr[c->idx[k]].checksum)
            cp->gets[k].rc = -EBADMSG;
    for (uint32_t k = 0; k < c->nidx; k++) {
        if (cp->gets[k].rc == 0)
            continue;
        if (cp->gets[k].rc == -EBADMSG)
            self->stats.checksum_failures++;
        if (cp->gets[k].rc == -EBADMSG && self->desc.reads_verified) /* the backend dropped it */
            tier_actor_notice_dropped(self, c->src[c->idx[k]], c->hdr[c->idx[k]].key.b,
                                      "copy: the bytes on the medium failed their checksum");
        bus_warn(S_LOG, "tier %s: copy of slot %" PRIu64 ": read failed: %s", self->name,
                 c->src[c->idx[k]], strerror(-cp->gets[k].rc));
        c->ok[c->idx[k]] = false;
        free(cp->bufs[k]);
        cp->bufs[k] = NULL;
    }
}

static void s_on_written(void *arg, bus_reply_t *r);
static void s_fail_rest(s_copy_t *c, uint32_t from);
static bool s_send_ok(s_copy_t *c, kvtier_Status *st);
static bus_blob_t s_token(const s_copy_t *c);
static void s_send_puts(s_copy_t *c);
static void s_on_put(void *arg, bus_reply_t *r);
static void s_on_deleted(void *arg, bus_reply_t *r);

/* Fails the slots idx[from..nidx) (they were not applied at the destination). */
static void s_fail_rest(s_copy_t *c, uint32_t from)
{
    for (uint32_t k = from; k < c->nidx; k++)
        c->ok[c->idx[k]] = false;
}

/* ---- WRITE over UCX ---- */

static void s_ux_release(s_copy_t *c)
{
    for (uint32_t k = 0; k < c->ux_n; k++) {
        free(c->ux_bufs[k]);
        c->ux_bufs[k] = NULL;
    }
    c->ux_n = 0;
}

/* The destination replied (or will never): its range is free again. A timeout
 * gives the region up instead (a late request could still land in it). */
static void s_ux_range_done(s_copy_t *c, bool timed_out)
{
    if (!c->ux_conn)
        return;
    if (c->dest->ux != c->ux_conn) /* closed meanwhile: its region went with it */
        ;
    else if (timed_out) {
        bus_ucx_conn_close(&c->dest->ux);
        c->dest->ux_state = S_UX_NONE;
    } else {
        bus_ucx_conn_free(c->ux_conn, c->ux_off, c->ux_len);
    }
    c->ux_conn = NULL;
    c->ux_was = true;
}

/* The bytes are in the destination's region: the WriteSlots names it. */
static void s_ux_flushed(void *arg, int status, const char *msg)
{
    s_copy_t *c = arg;
    tier_actor_copy_t *cp = c->owner;
    kvtier_Status st = {0};
    if (c->stage != S_UXFLUSH)
        return;
    c->pending = 0;
    s_ux_release(c);
    if (status < 0) {
        bus_status_set(&st, S_UNAVAILABLE, "%s", msg);
        goto out_fail;
    }
    if (!s_send_ok(c, &st))
        goto out_fail;
    for (uint32_t k = 0; k < c->nidx; k++) {
        cp->slots[k] = c->dst[c->idx[k]];
        cp->sizes[k] = c->hdr[c->idx[k]].size;
    }
    bus_env_init(&cp->env, kvtier_Envelope_write_slots_req_tag, cp->self->name);
    kvtier_WriteSlotsRequest *w = &cp->env.body.write_slots_req;
    w->tier_id = c->dst_tier_id;
    w->segments = 1;
    w->ucx_region = bus_ucx_conn_region(c->ux_conn);
    w->ucx_offset = c->ux_off;
    uint32_t m = c->nidx;
    bus_arrays_t arr = {
        .slots = {cp->slots, m, m}, .sizes = {cp->sizes, m, m}, .payload = s_token(c)};
    if (bus_client_send(c->dest->client, &cp->env, &arr, NULL, 0, s_left_ms(c), NULL, s_on_written,
                        c, NULL, &st) < 0)
        goto out_fail;
    c->stage = S_WRITE;
    c->pending = 1;
    return;

out_fail:
    s_ux_range_done(c, false);
    s_note(c, &st);
    s_fail_rest(c, 0);
    s_finish(c);
}

/* Puts the m blocks in cp->payload into the destination's region when it serves
 * UCX and has room: true (the copy continues in s_ux_flushed), false (frames). */
static bool s_ux_write(s_copy_t *c, uint32_t m)
{
    tier_actor_copy_t *cp = c->owner;
    s_dest_t *d = c->dest;
    if (d->ux_state != S_UX_READY || !d->ux)
        return false;
    if (bus_ucx_conn_failed(d->ux)) {
        bus_ucx_conn_close(&d->ux);
        d->ux_state = S_UX_NONE;
        return false;
    }
    uint64_t total = 0;
    for (uint32_t k = 0; k < m; k++)
        total += cp->payload[k].size;
    if (total > bus_ucx_conn_length(d->ux) || bus_ucx_conn_alloc(d->ux, total, &c->ux_off) < 0)
        return false; /* full: this one goes by frames */
    c->ux_conn = d->ux;
    c->ux_len = total;
    char why[160];
    uint64_t off = c->ux_off;
    bool ok = true;
    for (uint32_t k = 0; k < m; k++) { /* the buffers are the copy's until flushed */
        c->ux_bufs[k] = cp->payload[k].hint;
        if (ok && bus_ucx_conn_put(d->ux, cp->payload[k].data, cp->payload[k].size, off, why,
                                   sizeof why) < 0)
            ok = false;
        off += cp->payload[k].size;
    }
    c->ux_n = m;
    c->stage = S_UXFLUSH;
    c->pending = 1;
    cp->self->stats.ucx_copy_bytes += total;
    if (!ok || bus_ucx_conn_flush(d->ux, s_ux_flushed, c, why, sizeof why) < 0)
        s_ux_flushed(c, -1, why);
    return true;
}

/* Reads the slots that passed the check and sends them in one WriteSlots. */
static void s_send_write(s_copy_t *c)
{
    tier_actor_copy_t *cp = c->owner;
    kvtier_Status st = {0};
    c->nidx = 0;
    for (uint32_t i = 0; i < c->n; i++)
        if (c->ok[i])
            c->idx[c->nidx++] = i;
    if (c->nidx == 0)
        goto out_finish;
    if (!s_send_ok(c, &st))
        goto out_fail;
    s_read(c);
    uint32_t m = 0;
    for (uint32_t k = 0; k < c->nidx; k++) {
        if (!cp->bufs[k])
            continue;
        uint32_t i = c->idx[k];
        tier_actor_rbuf_t *b = cp->bufs[k];
        b->refs = 1;
        cp->payload[m] = (bus_payload_t){b->data, c->hdr[i].size, tier_actor_rbuf_unref, b};
        cp->slots[m] = c->dst[i];
        cp->sizes[m] = c->hdr[i].size;
        cp->bufs[k] = NULL;
        c->idx[m++] = i;
    }
    c->nidx = m;
    if (m == 0)
        goto out_finish;
    if (s_ux_write(c, m))
        return; /* the bytes go over UCX; the WriteSlots follows their flush */
    bus_env_init(&cp->env, kvtier_Envelope_write_slots_req_tag, cp->self->name);
    cp->env.body.write_slots_req.tier_id = c->dst_tier_id;
    cp->env.body.write_slots_req.segments = 1;
    bus_arrays_t arr = {
        .slots = {cp->slots, m, m}, .sizes = {cp->sizes, m, m}, .payload = s_token(c)};
    /* the payload passes to the client whatever happens */
    if (bus_client_send(c->dest->client, &cp->env, &arr, cp->payload, m, s_left_ms(c), NULL,
                        s_on_written, c, NULL, &st) < 0)
        goto out_fail;
    c->stage = S_WRITE;
    c->pending = 1;
    return;

out_fail:
    s_note(c, &st);
    s_fail_rest(c, 0);
out_finish:
    s_finish(c);
}

/* ---- PUT ---- */

static void s_on_written(void *arg, bus_reply_t *r)
{
    s_copy_t *c = arg;
    c->pending--;
    s_ux_range_done(c, r->status.code == S_TIMEOUT && !r->env);
    if (c->ux_was && r->status.code == S_INVALID && c->dest->ux &&
        strstr(r->status.message, "Probe with ucx again")) {
        /* the destination gave the region to another peer: ask again for the next copy */
        bus_ucx_conn_close(&c->dest->ux);
        s_ux_probe(c->owner, c->dest);
    }
    c->ux_was = false;
    uint32_t w = 0;
    if (r->env && r->env->which_body == kvtier_Envelope_write_slots_rep_tag)
        w = r->env->body.write_slots_rep.written;
    if (w > c->nidx) /* never trust a count from the wire */
        w = c->nidx;
    if (r->status.code != S_OK)
        s_note_reply(c, r);
    s_fail_rest(c, w);
    c->nidx = w;
    s_send_puts(c);
}

/* One PutHeader per run of written slots sharing instance and deadline (a
 * PutHeader carries one of each for its batch). */
static void s_send_puts(s_copy_t *c)
{
    if (c->nidx == 0) {
        s_after_puts(c);
        return;
    }
    c->stage = S_PUT;
    uint32_t ng = 0;
    for (uint32_t k = 0; k < c->nidx; k++) {
        const tier_slot_header_t *h = &c->hdr[c->idx[k]];
        s_group_t *g = ng ? &c->groups[ng - 1] : NULL;
        const tier_slot_header_t *g0 = g ? &c->hdr[c->idx[g->first]] : NULL;
        if (g && g0->instance == h->instance && g0->deadline_ms == h->deadline_ms) {
            g->count++;
            continue;
        }
        c->groups[ng++] = (s_group_t){.copy = c, .first = k, .count = 1};
    }
    tier_actor_copy_t *cp = c->owner;
    for (uint32_t gi = 0; gi < ng; gi++) {
        s_group_t *g = &c->groups[gi];
        kvtier_Status st = {0};
        const tier_slot_header_t *h0 = &c->hdr[c->idx[g->first]];
        bus_env_init(&cp->env, kvtier_Envelope_put_header_req_tag, cp->self->name);
        kvtier_PutHeaderRequest *p = &cp->env.body.put_header_req;
        p->tier_id = c->dst_tier_id;
        p->state = c->dst_state;
        p->ttl_deadline_ms = h0->deadline_ms;
        tier_actor_instance_name(cp->self, h0->instance, p->instance_id, sizeof p->instance_id);
        for (uint32_t j = 0; j < g->count; j++) {
            uint32_t i = c->idx[g->first + j];
            cp->slots[j] = c->dst[i];
            cp->sizes[j] = c->hdr[i].size;
            cp->sums[j] = c->hdr[i].checksum;
            memcpy(cp->keys[j], c->hdr[i].key.b, BUS_KEY_LEN);
        }
        uint32_t n = g->count;
        bus_arrays_t arr = {.slots = {cp->slots, n, n},
                            .keys = {cp->keys, n, n},
                            .sizes = {cp->sizes, n, n},
                            .checksums = {cp->sums, n, n},
                            .payload = s_token(c)};
        if (s_send_ok(c, &st) && bus_client_send(c->dest->client, &cp->env, &arr, NULL, 0,
                                                 s_left_ms(c), NULL, s_on_put, g, NULL, &st) == 0) {
            c->pending++;
            continue;
        }
        s_note(c, &st);
        for (uint32_t j = 0; j < n; j++)
            c->ok[c->idx[g->first + j]] = false;
    }
    if (c->pending == 0)
        s_after_puts(c);
}

static void s_on_put(void *arg, bus_reply_t *r)
{
    s_group_t *g = arg;
    s_copy_t *c = g->copy;
    c->pending--;
    uint32_t w = 0;
    if (r->env && r->env->which_body == kvtier_Envelope_put_header_rep_tag)
        w = r->env->body.put_header_rep.written;
    if (w > g->count)
        w = g->count;
    if (r->status.code != S_OK)
        s_note_reply(c, r);
    for (uint32_t j = w; j < g->count; j++)
        c->ok[c->idx[g->first + j]] = false;
    if (c->pending == 0)
        s_after_puts(c);
}

/* ---- DELETE: the source must still be the block that was copied ---- */

static void s_after_puts(s_copy_t *c)
{
    tier_actor_copy_t *cp = c->owner;
    self_t *self = cp->self;
    kvtier_Status st = {0};
    c->stage = S_DELETE;
    c->nidx = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        if (!c->ok[i])
            continue;
        tier_slot_header_t now;
        if (tier_get_header(self->tier, c->src[i], &now) == 0 && s_same_block(&now, &c->hdr[i]))
            continue;
        bus_info(S_LOG,
                 "tier %s: slot %" PRIu64 " changed while it was copied; its copy at slot %" PRIu64
                 " of %s is deleted",
                 self->name, c->src[i], c->dst[i], c->dest->ep);
        c->ok[i] = false;
        cp->slots[c->nidx] = c->dst[i];
        memcpy(cp->keys[c->nidx], c->hdr[i].key.b, BUS_KEY_LEN);
        c->idx[c->nidx++] = i;
    }
    if (c->nidx == 0 || !s_send_ok(c, &st)) {
        s_note(c, &st);
        s_finish(c);
        return;
    }
    uint32_t n = c->nidx;
    bus_env_init(&cp->env, kvtier_Envelope_delete_slots_req_tag, self->name);
    cp->env.body.delete_slots_req.tier_id = c->dst_tier_id;
    bus_arrays_t arr = {
        .slots = {cp->slots, n, n}, .keys = {cp->keys, n, n}, .payload = s_token(c)};
    if (bus_client_send(c->dest->client, &cp->env, &arr, NULL, 0, s_left_ms(c), NULL, s_on_deleted,
                        c, NULL, &st) < 0) {
        s_note(c, &st);
        s_finish(c);
        return;
    }
    c->pending = 1;
}

static void s_on_deleted(void *arg, bus_reply_t *r)
{
    s_copy_t *c = arg;
    c->pending--;
    if (r->status.code != S_OK) {
        bus_warn(S_LOG, "tier %s: deleting copies at %s whose source changed: %s",
                 c->owner->self->name, c->dest->ep, r->status.message);
        s_note_reply(c, r);
    }
    s_finish(c);
}

/* ---- reply ---- */

static void s_finish(s_copy_t *c)
{
    tier_actor_copy_t *cp = c->owner;
    self_t *self = cp->self;
    uint32_t copied = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        cp->mask[i] = c->ok[i];
        copied += c->ok[i];
    }
    bus_env_init(&cp->env, kvtier_Envelope_copy_slots_rep_tag, self->name);
    cp->env.corr_id = c->corr_id;
    cp->env.has_status = true;
    cp->env.status = c->st;
    cp->env.body.copy_slots_rep.copied = copied;
    bus_arrays_t arr = {.mask = {cp->mask, c->n, c->n}};
    if (c->st.code != S_OK) {
        self->stats.errors++;
        bus_debug(S_LOG, "%s", c->st.message);
    }
    (void)bus_server_reply(self->server, c->routing_id, &cp->env, &arr, NULL, 0, NULL);
    self->stats.slots_copied += copied;
    self->stats.copy_slot_failures += c->n - copied;
    zframe_destroy(&c->routing_id);
    c->dest->users--;
    c->dest = NULL;
    cp->bytes -= c->bytes;
    c->bytes = 0;
    c->stage = S_IDLE;
}

/* ---- the loop's side ---- */

void tier_actor_copy_service(self_t *self)
{
    tier_actor_copy_t *cp = self->copy;
    if (!cp)
        return;
    if (cp->ux) { /* flushes past their copy's deadline: the connection goes */
        int64_t now = zclock_mono();
        for (uint32_t i = 0; i < cp->max_copies; i++) {
            s_copy_t *c = &cp->copies[i];
            if (c->stage == S_UXFLUSH && now >= c->deadline && c->dest->ux) {
                bus_warn(S_LOG, "tier %s: UCX flush to %s past the copy's deadline: dropped",
                         self->name, c->dest->ep);
                bus_ucx_conn_close(&c->dest->ux); /* its flushes are called back failed */
                c->dest->ux_state = S_UX_NONE;
            }
        }
        cp->ux_wait = bus_ucx_peer_progress(cp->ux);
    }
    for (uint32_t i = 0; i < cp->max_dests; i++) {
        s_dest_t *d = &cp->dests[i];
        if (!d->client)
            continue;
        for (int round = 0; round < S_DISPATCH_ROUNDS; round++)
            if (bus_client_dispatch(d->client, 0) <= 0)
                break;
        if (!d->broken)
            continue;
        /* the copies still waiting on it fail now; then it is closed */
        bus_client_fail_all(d->client, S_UNAVAILABLE,
                            "the destination timed out on an earlier request; its client was "
                            "closed");
        if (d->users == 0) {
            bus_warn(S_LOG, "tier %s: copy destination %s timed out; client closed", self->name,
                     d->ep);
            s_dest_close(cp, d);
        }
    }
}

int tier_actor_copy_wait_ms(self_t *self)
{
    tier_actor_copy_t *cp = self->copy;
    int64_t best = cp && cp->ux ? cp->ux_wait : -1; /* UCX events pending: 0 */
    for (uint32_t i = 0; cp && cp->ux && i < cp->max_copies; i++)
        if (cp->copies[i].stage == S_UXFLUSH) {
            int64_t t = cp->copies[i].deadline - zclock_mono();
            t = t < 0 ? 0 : t;
            if (best < 0 || t < best)
                best = t;
        }
    for (uint32_t i = 0; cp && i < cp->max_dests; i++) {
        s_dest_t *d = &cp->dests[i];
        if (!d->client)
            continue;
        if (d->broken)
            return 0;
        int64_t t = bus_client_next_timeout_ms(d->client);
        if (t >= 0 && (best < 0 || t < best))
            best = t;
    }
    return best > INT_MAX ? INT_MAX : (int)best;
}
