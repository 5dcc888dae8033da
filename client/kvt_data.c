/* kvt_data.c — the data role of libkvtier (DESIGN.md §3, §6, §9): jobs that move
 * the bytes of a token between the caller's buffers and the tier actors.
 *
 * Per token tier, one of two paths:
 * - shared memory: the tier actor is on this host (same bus_host_id), names its
 *   segment, the segment attaches and its epoch is the token's, and shm is not
 *   disabled. The job copies inside submit (memcpy, no message): a put first marks
 *   the slot header WRITING (key zero, as the tier actor does for a WriteSlots) so
 *   an evicted block's old header is never served, then copies and computes the
 *   xxh3-64 in the same pass; a get checks the header is SERVING with the token's
 *   key and size before and after copying out.
 * - frames: WriteSlots / ReadSlots (CopySlots for prefetch: the source tier actor
 *   copies to the destination) to the tier actor's endpoint, in chunks of at most
 *   S_CHUNK_SLOTS slots and S_CHUNK_BYTES bytes. Put bytes are copied into the
 *   messages when a chunk is sent; get bytes are copied out of the reply frames.
 *
 * Owns the job table (max_in_flight jobs, from submit until collected), the
 * tier-plane DEALERs (one per tier endpoint, kept for the handle's life) and the
 * segment attachments (one per segment name; replaced when the epoch changes).
 * Never reports a job twice, never keeps a job slot after it was collected, and
 * never allocates per job once a slot's arrays have grown to the largest token. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <xxhash.h>
#include <zmq.h>

#include "bus_log.h"
#include "kvt_internal.h"
#include "tier_checksum.h"
#include "tier_seg.h"

#define S_CHUNK_SLOTS 128u                     /* slots per tier-plane message */
#define S_CHUNK_BYTES (32u << 20)              /* payload bytes per tier-plane message */
#define S_MAX_CONNS 64u                        /* tier endpoints per handle */
#define S_MAX_ATTACH (2 * BUS_TOKEN_MAX_TIERS) /* > one token's tiers: see s_shm */
#define S_CONN_IN_FLIGHT 4096u                 /* tier-plane requests in flight per endpoint */
#define S_HASH_PIECE (32u << 10)
#ifdef MADV_POPULATE_WRITE
#define S_MADV_POPULATE_WRITE MADV_POPULATE_WRITE
#else
#define S_MADV_POPULATE_WRITE 23 /* Linux >= 5.14; older kernels answer EINVAL */
#endif

enum { S_UNSENT = 0, S_SENT = 1, S_DONE = 2 };

typedef struct s_job s_job_t;

typedef struct {
    s_job_t *job;
    uint16_t tier;     /* token tier index the request goes to (prefetch: the source) */
    uint16_t dst_tier; /* prefetch: destination tier index */
    uint32_t start;    /* first index into job->order */
    uint32_t count;
    uint8_t state;
} s_chunk_t;

struct s_job {
    bool used;
    bool finished;
    uint64_t id;
    bus_token_kind_t kind;
    struct kvt_token *tok;
    void **bufs;
    uint32_t bufs_cap;
    size_t len;
    uint32_t *order; /* token key indices going by frames, grouped by tier */
    uint32_t order_cap;
    s_chunk_t *chunks;
    uint32_t n_chunks, chunks_cap;
    uint32_t open;   /* chunks not DONE */
    uint32_t unsent; /* chunks UNSENT */
    int64_t deadline;
    int status;
    uint32_t n_keys, n_failed; /* set when it finishes: the token may be completed
                                  (and reused) before the job is collected */
    char msg[256];
    int32_t fin_prev, fin_next;
};

typedef struct {
    char endpoint[BUS_ENDPOINT_MAX];
    bus_client_t *cl;
} s_conn_t;

typedef struct {
    char shm[BUS_TOKEN_NAME_MAX];
    uint64_t epoch; /* the token epoch this entry was checked against */
    tier_seg_t *seg;
    uint8_t *mapped; /* bit per slot: its pages are in this process's page tables */
    uint64_t used;   /* d->submits when last used (eviction: least recent) */
} s_attach_t;

struct kvt_data {
    kvt_client_t *c;
    s_job_t *jobs;
    uint32_t cap, used;
    int32_t fin_head, fin_tail;
    s_conn_t conns[S_MAX_CONNS];
    uint32_t n_conns;
    s_attach_t att[S_MAX_ATTACH];
    uint32_t n_att;
    uint64_t submits;
    XXH3_state_t *hash;
    kvtier_Envelope *env;
    /* one chunk's arrays to send, and the arrays every tier-plane reply decodes
     * into (replies are decoded one at a time, right before their callback) */
    uint64_t slots[S_CHUNK_SLOTS], dst_slots[S_CHUNK_SLOTS], sizes[S_CHUNK_SLOTS];
    uint8_t keys[S_CHUNK_SLOTS][BUS_KEY_LEN];
    bus_payload_t payload[S_CHUNK_SLOTS];
    uint64_t rep_sizes[S_CHUNK_SLOTS];
    bool rep_mask[S_CHUNK_SLOTS];
    bus_arrays_t rep_arr;
};

/* ---- lifetime ------------------------------------------------------------------ */

struct kvt_data *kvti_data_new(kvt_client_t *c)
{
    struct kvt_data *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->c = c;
    d->cap = c->max_in_flight;
    d->jobs = calloc(d->cap, sizeof *d->jobs);
    d->env = calloc(1, sizeof *d->env);
    d->hash = XXH3_createState();
    if (!d->jobs || !d->env || !d->hash) {
        kvti_data_destroy(&d);
        return NULL;
    }
    d->fin_head = d->fin_tail = -1;
    d->rep_arr.sizes = (bus_u64s_t){.v = d->rep_sizes, .cap = S_CHUNK_SLOTS};
    d->rep_arr.mask = (bus_bools_t){.v = d->rep_mask, .cap = S_CHUNK_SLOTS};
    return d;
}

void kvti_data_destroy(struct kvt_data **dp)
{
    if (!dp || !*dp)
        return;
    struct kvt_data *d = *dp;
    /* Requests in flight are dropped with their sockets, without callbacks. */
    for (uint32_t i = 0; i < d->n_conns; i++)
        bus_client_destroy(&d->conns[i].cl);
    for (uint32_t i = 0; i < d->n_att; i++) {
        tier_seg_detach(&d->att[i].seg);
        free(d->att[i].mapped);
    }
    for (uint32_t i = 0; d->jobs && i < d->cap; i++) {
        free(d->jobs[i].bufs);
        free(d->jobs[i].order);
        free(d->jobs[i].chunks);
    }
    free(d->jobs);
    free(d->env);
    if (d->hash)
        XXH3_freeState(d->hash);
    free(d);
    *dp = NULL;
}

/* ---- jobs ------------------------------------------------------------------------- */

static s_job_t *s_find(struct kvt_data *d, uint64_t id)
{
    for (uint32_t i = 0; i < d->cap; i++)
        if (d->jobs[i].used && d->jobs[i].id == id)
            return &d->jobs[i];
    return NULL;
}

static const char *s_kind_name(bus_token_kind_t k)
{
    return k == BUS_TOKEN_GET ? "get" : k == BUS_TOKEN_PUT ? "put" : "prefetch";
}

/* Records the first failure of a job (its status and message). */
static void s_job_error(s_job_t *j, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void s_job_error(s_job_t *j, int code, const char *fmt, ...)
{
    if (j->status != 0)
        return;
    j->status = -(code < 0 ? -code : code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->msg, sizeof j->msg, fmt, ap);
    va_end(ap);
}

static void s_finish(struct kvt_data *d, s_job_t *j)
{
    j->finished = true;
    j->n_keys = j->tok->n;
    j->n_failed = 0;
    for (uint32_t i = 0; i < j->tok->n; i++)
        j->n_failed += !j->tok->ok[i];
    if (j->n_failed > 0 && j->status == 0) /* every failing path records one; guard */
        s_job_error(j, KVT_INTERNAL, "%u keys failed without a status", j->n_failed);
    j->tok->jobs--;
    j->tok = NULL;
    int32_t idx = (int32_t)(j - d->jobs);
    j->fin_next = -1;
    j->fin_prev = d->fin_tail;
    if (d->fin_tail >= 0)
        d->jobs[d->fin_tail].fin_next = idx;
    else
        d->fin_head = idx;
    d->fin_tail = idx;
}

static void s_maybe_finish(struct kvt_data *d, s_job_t *j)
{
    if (!j->finished && j->open == 0)
        s_finish(d, j);
}

static void s_collect(struct kvt_data *d, s_job_t *j, kvt_job_result_t *out)
{
    out->job_id = j->id;
    out->status = j->status;
    out->n_keys = j->n_keys;
    out->n_failed = j->n_failed;
    if (out->status != 0)
        snprintf(d->c->err, sizeof d->c->err, "job %" PRIu64 " (%s): %s: %s", j->id,
                 s_kind_name(j->kind), kvt_status_name(out->status), j->msg);
    if (j->fin_prev >= 0)
        d->jobs[j->fin_prev].fin_next = j->fin_next;
    else
        d->fin_head = j->fin_next;
    if (j->fin_next >= 0)
        d->jobs[j->fin_next].fin_prev = j->fin_prev;
    else
        d->fin_tail = j->fin_prev;
    j->used = false;
    j->finished = false;
    d->used--;
}

/* ---- shared memory ---------------------------------------------------------------- */

/* The attachment for a token tier, or NULL when the frame path must be used. */
static s_attach_t *s_shm(struct kvt_data *d, const bus_token_tier_t *t)
{
    kvt_client_t *c = d->c;
    if (c->disable_shm || !c->host_id[0] || !t->shm[0] || strcmp(t->host, c->host_id) != 0)
        return NULL;
    s_attach_t *a = NULL;
    for (uint32_t i = 0; i < d->n_att; i++)
        if (strcmp(d->att[i].shm, t->shm) == 0)
            a = &d->att[i];
    if (a && a->epoch == t->epoch) {
        a->used = d->submits;
        return a->seg ? a : NULL; /* no segment: attaching failed for this epoch already */
    }
    if (!a && d->n_att < S_MAX_ATTACH) {
        a = &d->att[d->n_att++];
    } else if (!a) {
        /* Replace the least recently used entry in place. A token names at most
         * half as many tiers as there are entries, so the entries this submit
         * already handed out (used == d->submits) are never the oldest. */
        a = &d->att[0];
        for (uint32_t i = 1; i < d->n_att; i++)
            if (d->att[i].used < a->used)
                a = &d->att[i];
        tier_seg_detach(&a->seg);
        free(a->mapped);
    }
    if (strcmp(a->shm, t->shm) != 0) {
        memset(a, 0, sizeof *a);
        snprintf(a->shm, sizeof a->shm, "%s", t->shm);
    }
    a->used = d->submits;
    /* A new epoch: the segment may have been replaced under the same name. */
    tier_seg_detach(&a->seg);
    free(a->mapped);
    a->mapped = NULL;
    a->epoch = t->epoch;
    char err[256];
    int rc = tier_seg_attach(t->shm, t->slot_size, 0, &a->seg, err, sizeof err);
    if (rc < 0) {
        bus_debug("client", "%s: tier %u: shared memory %s not used (%s); using frames", c->name,
                  t->tier_id, t->shm, err);
        return NULL;
    }
    if (tier_seg_epoch(a->seg) != t->epoch || !tier_seg_live(a->seg)) {
        bus_debug("client",
                  "%s: tier %u: segment %s has epoch %" PRIu64 ", token %" PRIu64 "; using frames",
                  c->name, t->tier_id, t->shm, tier_seg_epoch(a->seg), t->epoch);
        tier_seg_detach(&a->seg);
    }
    if (a->seg) {
        a->mapped = calloc(tier_seg_capacity(a->seg) / 8 + 1, 1);
        if (!a->mapped)
            tier_seg_detach(&a->seg);
    }
    return a->seg ? a : NULL;
}

/* The slot's data, with its pages mapped into this process in one system call
 * the first time: touching them one by one costs a page fault each, which
 * dominates the copy on virtual machines. Best effort (older kernels lack
 * MADV_POPULATE_WRITE; the copy then faults the pages in). */
static void *s_slot(s_attach_t *a, uint64_t slot)
{
    uint8_t *p = tier_seg_slot(a->seg, slot);
    if (p && !(a->mapped[slot / 8] & (1u << (slot % 8)))) {
        size_t len = (tier_seg_slot_size(a->seg) + 4095) & ~(size_t)4095;
        (void)madvise(p, len, S_MADV_POPULATE_WRITE);
        a->mapped[slot / 8] |= (uint8_t)(1u << (slot % 8));
    }
    return p;
}

/* memcpy that hashes the source in L1-sized pieces right after copying them, so
 * the checksum costs no second trip through memory. */
static uint64_t s_copy_hash(struct kvt_data *d, void *dst, const void *src, size_t size)
{
    XXH3_64bits_reset(d->hash);
    for (size_t off = 0; off < size; off += S_HASH_PIECE) {
        size_t n = size - off < S_HASH_PIECE ? size - off : S_HASH_PIECE;
        memcpy((uint8_t *)dst + off, (const uint8_t *)src + off, n);
        XXH3_64bits_update(d->hash, (const uint8_t *)src + off, n);
    }
    return XXH3_64bits_digest(d->hash);
}

static int s_shm_put(struct kvt_data *d, s_job_t *j, s_attach_t *a, uint32_t i,
                     const bus_token_entry_t *e)
{
    tier_seg_t *seg = a->seg;
    const bus_token_tier_t *t = &j->tok->view.tiers[e->tier];
    tier_slot_header_t h = {.state = TIER_SLOT_WRITING};
    void *dst = s_slot(a, e->slot);
    if (!dst || e->size > tier_seg_slot_size(seg)) {
        s_job_error(j, KVT_INTERNAL, "tier %u: slot %" PRIu64 " (%u bytes) outside segment %s",
                    t->tier_id, e->slot, e->size, t->shm);
        return -1;
    }
    int rc = tier_seg_put_header(seg, e->slot, &h);
    if (rc < 0) {
        s_job_error(j, KVT_INTERNAL, "tier %u: slot %" PRIu64 ": marking WRITING failed: %s",
                    t->tier_id, e->slot, strerror(-rc));
        return -1;
    }
    j->tok->checksums[i] = s_copy_hash(d, dst, j->bufs[i], e->size);
    j->tok->ok[i] = true;
    return 0;
}

static bool s_header_matches(tier_seg_t *seg, uint64_t slot, const kvt_key_t *key, uint32_t size,
                             tier_slot_header_t *h)
{
    return tier_seg_get_header(seg, slot, h) == 0 && h->state == TIER_SLOT_SERVING &&
           memcmp(h->key.b, key->b, KVT_KEY_BYTES) == 0 && h->size == size;
}

static int s_shm_get(s_job_t *j, s_attach_t *a, uint32_t i, const bus_token_entry_t *e)
{
    tier_seg_t *seg = a->seg;
    const bus_token_tier_t *t = &j->tok->view.tiers[e->tier];
    const kvt_key_t *key = &j->tok->keys[i];
    tier_slot_header_t h;
    void *src = s_slot(a, e->slot);
    if (!src || !s_header_matches(seg, e->slot, key, e->size, &h)) {
        s_job_error(j, KVT_NOT_FOUND,
                    "tier %u: slot %" PRIu64 " does not hold the token's block (state %u, "
                    "size %" PRIu64 ", want %u)",
                    t->tier_id, e->slot, src ? h.state : 0u, src ? h.size : 0, e->size);
        return -1;
    }
    memcpy(j->bufs[i], src, e->size);
    /* A pinned slot cannot change; checking again costs little and means a broken
     * pin shows up as a failed key, never as wrong bytes. */
    if (!s_header_matches(seg, e->slot, key, e->size, &h)) {
        s_job_error(j, KVT_CONFLICT, "tier %u: slot %" PRIu64 " changed while it was read",
                    t->tier_id, e->slot);
        return -1;
    }
    j->tok->ok[i] = true;
    return 0;
}

/* ---- frames ------------------------------------------------------------------------- */

static bus_client_t *s_conn(struct kvt_data *d, const char *endpoint, char *why, size_t whylen)
{
    for (uint32_t i = 0; i < d->n_conns; i++)
        if (strcmp(d->conns[i].endpoint, endpoint) == 0)
            return d->conns[i].cl;
    if (d->n_conns == S_MAX_CONNS) {
        snprintf(why, whylen, "more than %u tier endpoints in use by this handle", S_MAX_CONNS);
        return NULL;
    }
    if (bus_endpoint_check(endpoint, BUS_ENDPOINT_CONNECT, why, whylen) < 0)
        return NULL;
    bus_client_config_t cfg = {.name = d->c->name,
                               .max_in_flight = S_CONN_IN_FLIGHT,
                               .default_timeout_ms = d->c->timeout_ms};
    bus_client_t *cl = bus_client_new(endpoint, &cfg);
    if (!cl) {
        snprintf(why, whylen, "cannot connect a socket to %s", endpoint);
        return NULL;
    }
    s_conn_t *s = &d->conns[d->n_conns++];
    snprintf(s->endpoint, sizeof s->endpoint, "%s", endpoint);
    s->cl = cl;
    return cl;
}

static const char *s_op_name(bus_token_kind_t k)
{
    return k == BUS_TOKEN_GET ? "ReadSlots" : k == BUS_TOKEN_PUT ? "WriteSlots" : "CopySlots";
}

static void s_chunk_fail(struct kvt_data *d, s_chunk_t *ch, int code, const char *msg)
{
    s_job_t *j = ch->job;
    const bus_token_tier_t *t = &j->tok->view.tiers[ch->tier];
    s_job_error(j, code, "%s of %u slots to tier %u (%s): %s: %s", s_op_name(j->kind), ch->count,
                t->tier_id, t->endpoint, kvt_status_name(code), msg);
    if (ch->state == S_UNSENT)
        j->unsent--;
    ch->state = S_DONE;
    j->open--;
    s_maybe_finish(d, j);
}

static void s_chunk_reply_ok(struct kvt_data *d, s_chunk_t *ch, bus_reply_t *r)
{
    s_job_t *j = ch->job;
    struct kvt_token *tok = j->tok;
    if (j->kind == BUS_TOKEN_PUT) {
        for (uint32_t k = 0; k < ch->count; k++)
            tok->ok[j->order[ch->start + k]] = true;
        return;
    }
    if (j->kind == BUS_TOKEN_PREFETCH) {
        bool all = d->rep_arr.mask.n == ch->count;
        uint32_t refused = 0;
        for (uint32_t k = 0; k < ch->count; k++) {
            tok->ok[j->order[ch->start + k]] = all && d->rep_mask[k];
            refused += all && !d->rep_mask[k];
        }
        if (!all)
            s_job_error(j, KVT_INTERNAL, "CopySlots reply has %u flags for %u slots",
                        d->rep_arr.mask.n, ch->count);
        else if (refused)
            /* The source tier no longer holds the expected block in that slot
             * (the unchanged-source check failed): nothing to promote. */
            s_job_error(j, KVT_NOT_FOUND,
                        "CopySlots: %u of %u source slots no longer hold the expected block",
                        refused, ch->count);
        return;
    }
    if (d->rep_arr.sizes.n != ch->count) {
        s_job_error(j, KVT_INTERNAL, "ReadSlots reply has %u frames for %u slots",
                    d->rep_arr.sizes.n, ch->count);
        return;
    }
    for (uint32_t k = 0; k < ch->count; k++) {
        uint32_t i = j->order[ch->start + k];
        bus_token_entry_t e;
        bus_token_entry_at(&tok->view, i, &e);
        zframe_t *f = r->msg ? bus_msg_payload(r->msg, k) : NULL;
        if (!f || zframe_size(f) != e.size) {
            s_job_error(j, KVT_INTERNAL, "ReadSlots frame %u is %zu bytes, the block is %u", k,
                        f ? zframe_size(f) : (size_t)0, e.size);
            continue;
        }
        memcpy(j->bufs[i], zframe_data(f), e.size);
        tok->ok[i] = true;
    }
}

static void s_chunk_done(void *arg, bus_reply_t *r)
{
    s_chunk_t *ch = arg;
    s_job_t *j = ch->job;
    struct kvt_data *d = j->tok->owner->data;
    if (r->status.code != kvtier_StatusCode_STATUS_OK) {
        s_chunk_fail(d, ch, (int)r->status.code, r->status.message);
        return;
    }
    s_chunk_reply_ok(d, ch, r);
    ch->state = S_DONE;
    j->open--;
    s_maybe_finish(d, j);
}

/* Sends one chunk. Leaves it UNSENT when the endpoint's bound or queue is full
 * (sent again by the pump); fails it on any other error. */
static void s_send_chunk(struct kvt_data *d, s_chunk_t *ch)
{
    s_job_t *j = ch->job;
    struct kvt_token *tok = j->tok;
    const bus_token_tier_t *t = &tok->view.tiers[ch->tier];
    char why[BUS_ENDPOINT_MAX + 128];
    bus_client_t *cl = s_conn(d, t->endpoint, why, sizeof why);
    if (!cl) {
        s_chunk_fail(d, ch, KVT_UNAVAILABLE, why);
        return;
    }
    bus_arrays_t arr = {0};
    arr.slots = (bus_u64s_t){.v = d->slots, .n = ch->count, .cap = S_CHUNK_SLOTS};
    uint32_t npayload = 0;
    pb_size_t tag = j->kind == BUS_TOKEN_PUT   ? kvtier_Envelope_write_slots_req_tag
                    : j->kind == BUS_TOKEN_GET ? kvtier_Envelope_read_slots_req_tag
                                               : kvtier_Envelope_copy_slots_req_tag;
    bus_env_init(d->env, tag, d->c->name);
    for (uint32_t k = 0; k < ch->count; k++) {
        uint32_t i = j->order[ch->start + k];
        bus_token_entry_t e;
        bus_token_entry_at(&tok->view, i, &e);
        d->slots[k] = j->kind == BUS_TOKEN_PREFETCH ? e.src_slot : e.slot;
        d->dst_slots[k] = e.slot;
        d->sizes[k] = e.size;
        memcpy(d->keys[k], tok->keys[i].b, BUS_KEY_LEN);
        if (j->kind == BUS_TOKEN_PUT) {
            struct iovec iov = {.iov_base = j->bufs[i], .iov_len = e.size};
            tok->checksums[i] = tier_checksum(&iov, 1);
            d->payload[npayload++] = (bus_payload_t){.data = j->bufs[i], .size = e.size};
        }
    }
    if (j->kind == BUS_TOKEN_PUT) {
        kvtier_WriteSlotsRequest *w = &d->env->body.write_slots_req;
        w->tier_id = t->tier_id;
        w->epoch = t->epoch; /* fence: a restarted tier actor refuses an old token */
        w->segments = 1;
        arr.sizes = (bus_u64s_t){.v = d->sizes, .n = ch->count, .cap = S_CHUNK_SLOTS};
    } else if (j->kind == BUS_TOKEN_GET) {
        kvtier_ReadSlotsRequest *rd = &d->env->body.read_slots_req;
        rd->tier_id = t->tier_id;
        rd->epoch = t->epoch;
        rd->segments = 1;
        arr.sizes = (bus_u64s_t){.v = d->sizes, .n = ch->count, .cap = S_CHUNK_SLOTS};
        arr.keys = (bus_keys_t){.keys = d->keys, .n = ch->count, .cap = S_CHUNK_SLOTS};
    } else {
        const bus_token_tier_t *dst = &tok->view.tiers[ch->dst_tier];
        kvtier_CopySlotsRequest *cp = &d->env->body.copy_slots_req;
        cp->tier_id = t->tier_id;
        cp->dst_tier_id = dst->tier_id;
        size_t elen = strnlen(dst->endpoint, sizeof dst->endpoint);
        if (elen >= sizeof cp->dst_endpoint) {
            s_chunk_fail(d, ch, KVT_INVALID_ARGUMENT,
                         "destination endpoint too long for CopySlots");
            return;
        }
        memcpy(cp->dst_endpoint, dst->endpoint, elen + 1);
        cp->dst_state = kvtier_LocationState_LOCATION_WRITING;
        arr.dst_slots = (bus_u64s_t){.v = d->dst_slots, .n = ch->count, .cap = S_CHUNK_SLOTS};
        arr.keys = (bus_keys_t){.keys = d->keys, .n = ch->count, .cap = S_CHUNK_SLOTS};
    }
    kvtier_Status st = {0};
    int rc = bus_client_send(cl, d->env, &arr, d->payload, npayload, d->c->timeout_ms, &d->rep_arr,
                             s_chunk_done, ch, NULL, &st);
    if (rc == 0) {
        ch->state = S_SENT;
        j->unsent--;
    } else if (st.code != kvtier_StatusCode_STATUS_UNAVAILABLE) {
        s_chunk_fail(d, ch, (int)st.code, st.message);
    }
}

/* ---- the pump: send what waits, receive what arrived, expire what is due ---------- */

static void s_send_pending(struct kvt_data *d)
{
    int64_t now = zclock_mono();
    for (uint32_t ji = 0; ji < d->cap; ji++) {
        s_job_t *j = &d->jobs[ji];
        if (!j->used || j->finished || j->unsent == 0)
            continue;
        for (uint32_t k = 0; k < j->n_chunks && j->unsent > 0; k++) {
            s_chunk_t *ch = &j->chunks[k];
            if (ch->state != S_UNSENT)
                continue;
            if (now >= j->deadline) {
                s_chunk_fail(d, ch, KVT_TIMEOUT,
                             "not sent within the timeout: the tier endpoint's request bound "
                             "or send queue stayed full");
                continue;
            }
            s_send_chunk(d, ch);
            if (ch->state == S_UNSENT)
                break; /* that endpoint is full: try again later */
        }
    }
}

static int64_t s_next_due(struct kvt_data *d)
{
    int64_t due = -1;
    for (uint32_t i = 0; i < d->n_conns; i++) {
        int64_t t = bus_client_next_timeout_ms(d->conns[i].cl);
        if (t >= 0 && (due < 0 || t < due))
            due = t;
    }
    int64_t now = zclock_mono();
    for (uint32_t ji = 0; ji < d->cap; ji++) {
        s_job_t *j = &d->jobs[ji];
        if (j->used && !j->finished && j->unsent > 0) {
            /* unsent chunks retry every few ms until their deadline */
            int64_t t = j->deadline > now ? j->deadline - now : 0;
            if (t > 5)
                t = 5;
            if (due < 0 || t < due)
                due = t;
        }
    }
    return due;
}

static bool s_anything_open(struct kvt_data *d)
{
    for (uint32_t i = 0; i < d->cap; i++)
        if (d->jobs[i].used && !d->jobs[i].finished)
            return true;
    return false;
}

/* One round; waits up to wait_ms (0: none) for a reply when something is open. */
static void s_pump(struct kvt_data *d, int wait_ms)
{
    s_send_pending(d);
    zmq_pollitem_t items[S_MAX_CONNS];
    for (uint32_t i = 0; i < d->n_conns; i++)
        items[i] =
            (zmq_pollitem_t){zsock_resolve(bus_client_sock(d->conns[i].cl)), 0, ZMQ_POLLIN, 0};
    long timeout = wait_ms;
    int64_t due = s_next_due(d);
    if (due >= 0 && (timeout < 0 || due < timeout))
        timeout = (long)due;
    if (d->n_conns > 0 && s_anything_open(d))
        (void)zmq_poll(items, (int)d->n_conns, timeout);
    for (uint32_t i = 0; i < d->n_conns; i++)
        bus_client_dispatch(d->conns[i].cl, 0);
    s_send_pending(d);
}

/* ---- submit ------------------------------------------------------------------------- */

static int s_grow(void **p, uint32_t *cap, uint32_t want, size_t elem)
{
    if (*cap >= want)
        return 0;
    uint32_t n = want < 64 ? 64 : want;
    void *q = realloc(*p, (size_t)n * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* Groups the keys of the frame-path tiers by the tier they are sent to (key order
 * within a tier; a counting sort, tiers are few) and cuts the groups into chunks. */
static void s_plan_chunks(s_job_t *j, const bool frames[BUS_TOKEN_MAX_TIERS])
{
    struct kvt_token *tok = j->tok;
    bool prefetch = j->kind == BUS_TOKEN_PREFETCH;
    uint32_t start[BUS_TOKEN_MAX_TIERS + 1] = {0};
    uint32_t n_frames = 0;
    for (uint32_t i = 0; i < tok->n; i++) {
        bus_token_entry_t e;
        bus_token_entry_at(&tok->view, i, &e);
        if (frames[e.tier]) {
            start[(prefetch ? e.src_tier : e.tier) + 1]++;
            n_frames++;
        }
    }
    for (uint32_t t = 1; t <= BUS_TOKEN_MAX_TIERS; t++)
        start[t] += start[t - 1];
    for (uint32_t i = 0; i < tok->n; i++) {
        bus_token_entry_t e;
        bus_token_entry_at(&tok->view, i, &e);
        if (frames[e.tier])
            j->order[start[prefetch ? e.src_tier : e.tier]++] = i;
    }
    j->n_chunks = 0;
    s_chunk_t *cur = NULL;
    uint64_t bytes = 0;
    for (uint32_t k = 0; k < n_frames; k++) {
        bus_token_entry_t e;
        bus_token_entry_at(&tok->view, j->order[k], &e);
        uint16_t to = prefetch ? e.src_tier : e.tier;
        uint16_t dst = prefetch ? e.tier : 0;
        if (!cur || cur->tier != to || cur->dst_tier != dst || cur->count == S_CHUNK_SLOTS ||
            (!prefetch && bytes + e.size > S_CHUNK_BYTES)) {
            cur = &j->chunks[j->n_chunks++];
            *cur = (s_chunk_t){.job = j, .tier = to, .dst_tier = dst, .start = k};
            bytes = 0;
        }
        cur->count++;
        bytes += e.size;
    }
    j->open = j->unsent = j->n_chunks;
}

/* Checks the token entries against the buffers before anything moves. */
static int s_check_entries(kvt_client_t *c, const char *what, struct kvt_token *tok,
                           void *const *bufs, size_t len)
{
    for (uint32_t i = 0; i < tok->n; i++) {
        bus_token_entry_t e;
        bus_token_entry_at(&tok->view, i, &e);
        if (tok->kind == BUS_TOKEN_PREFETCH) {
            if (e.src_tier >= tok->view.n_tiers)
                return kvti_fail(c, KVT_INTERNAL, what, "token key %u has no source tier", i);
            continue;
        }
        if (!bufs[i])
            return kvti_fail(c, KVT_INVALID_ARGUMENT, what, "bufs[%u] is NULL", i);
        if (e.size != len)
            return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                             "block size mismatch: token key %u is %u bytes on tier %u, the "
                             "buffers are %zu bytes (the instance's bytes_per_block)",
                             i, e.size, tok->view.tiers[e.tier].tier_id, len);
        if (e.size > tok->view.tiers[e.tier].slot_size)
            return kvti_fail(c, KVT_INTERNAL, what,
                             "token key %u: %u bytes exceed tier %u's slot "
                             "size %" PRIu64,
                             i, e.size, tok->view.tiers[e.tier].tier_id,
                             tok->view.tiers[e.tier].slot_size);
    }
    return 0;
}

static int s_submit(kvt_client_t *c, bus_token_kind_t kind, uint64_t job_id, kvt_token_t *tok,
                    void *const *bufs, size_t len)
{
    const char *what = kind == BUS_TOKEN_GET   ? "submit_get"
                       : kind == BUS_TOKEN_PUT ? "submit_put"
                                               : "submit_prefetch";
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    struct kvt_data *d = c->data;
    if (!tok || tok->owner != c || !tok->live)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "no token, or the token belongs to another handle or was completed");
    if (tok->kind != kind)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what, "the token is not from prepare_%s",
                         s_kind_name(kind));
    if (tok->jobs > 0)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "the token already has a job in flight: collect it first");
    /* The scheduler closes a window whose lease lapsed and may hand its slots to
     * someone else: a transfer started that late could overwrite another block.
     * Leave a tenth of the lease (at least 1 s) for the transfer itself. */
    if (tok->lease_ms > 0) {
        int64_t margin = (int64_t)(tok->lease_ms / 10 > 1000 ? tok->lease_ms / 10 : 1000);
        int64_t age = zclock_mono() - tok->minted_ms;
        if (age > (int64_t)tok->lease_ms - margin)
            return kvti_fail(c, KVT_EXPIRED, what,
                             "the token is %" PRId64 " ms old and its lease is %" PRIu64
                             " ms: complete it and prepare again",
                             age, tok->lease_ms);
    }
    if (kind != BUS_TOKEN_PREFETCH && tok->n > 0 && !bufs)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what, "bufs is NULL");
    if (s_find(d, job_id))
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "job id %" PRIu64 " is already in flight on this handle", job_id);
    if (d->used == d->cap)
        return kvti_fail(c, KVT_UNAVAILABLE, what,
                         "%u jobs in flight (max_in_flight): collect completions with "
                         "kvt_get_finished or kvt_wait first",
                         d->cap);
    int rc = s_check_entries(c, what, tok, bufs, len);
    if (rc < 0)
        return rc;
    s_job_t *j = NULL;
    for (uint32_t i = 0; i < d->cap && !j; i++)
        if (!d->jobs[i].used)
            j = &d->jobs[i];
    if (s_grow((void **)&j->bufs, &j->bufs_cap, tok->n, sizeof *j->bufs) < 0 ||
        s_grow((void **)&j->order, &j->order_cap, tok->n, sizeof *j->order) < 0 ||
        s_grow((void **)&j->chunks, &j->chunks_cap, tok->n, sizeof *j->chunks) < 0)
        return kvti_fail(c, KVT_INTERNAL, what, "out of memory for a job of %u keys", tok->n);
    j->used = true;
    j->finished = false;
    j->id = job_id;
    j->kind = kind;
    j->tok = tok;
    j->len = len;
    j->status = 0;
    j->msg[0] = '\0';
    j->n_chunks = j->open = j->unsent = 0;
    j->fin_prev = j->fin_next = -1;
    j->deadline = zclock_mono() + c->timeout_ms;
    if (bufs && kind != BUS_TOKEN_PREFETCH)
        memcpy(j->bufs, bufs, (size_t)tok->n * sizeof *bufs);
    d->used++;
    tok->jobs++;
    memset(tok->ok, 0, (size_t)tok->n * sizeof *tok->ok);

    /* Same-host tiers move now, by memcpy; the others go by frames. */
    d->submits++;
    s_attach_t *seg[BUS_TOKEN_MAX_TIERS] = {0};
    bool frames[BUS_TOKEN_MAX_TIERS] = {0};
    for (uint32_t t = 0; t < tok->view.n_tiers; t++) {
        seg[t] = kind == BUS_TOKEN_PREFETCH ? NULL : s_shm(d, &tok->view.tiers[t]);
        frames[t] = !seg[t];
    }
    for (uint32_t i = 0; i < tok->n; i++) {
        bus_token_entry_t e;
        bus_token_entry_at(&tok->view, i, &e);
        if (frames[e.tier])
            continue;
        if (kind == BUS_TOKEN_PUT)
            (void)s_shm_put(d, j, seg[e.tier], i, &e);
        else
            (void)s_shm_get(j, seg[e.tier], i, &e);
    }
    s_plan_chunks(j, frames);
    if (j->open == 0)
        s_finish(d, j);
    else
        for (uint32_t k = 0; k < j->n_chunks; k++)
            if (j->chunks[k].state == S_UNSENT)
                s_send_chunk(d, &j->chunks[k]);
    kvti_clear_error(c);
    return 0;
}

int kvt_submit_get(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok, void *const *bufs,
                   size_t len)
{
    return s_submit(c, BUS_TOKEN_GET, job_id, tok, bufs, len);
}

int kvt_submit_put(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok, const void *const *bufs,
                   size_t len)
{
    /* Put buffers are only read; the job table keeps one pointer type for both. */
    return s_submit(c, BUS_TOKEN_PUT, job_id, tok, (void *const *)(uintptr_t)bufs, len);
}

int kvt_submit_prefetch(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok)
{
    return s_submit(c, BUS_TOKEN_PREFETCH, job_id, tok, NULL, 0);
}

/* ---- completions -------------------------------------------------------------------- */

int kvt_get_finished(kvt_client_t *c, kvt_job_result_t *out, uint32_t cap, uint32_t *n)
{
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (n)
        *n = 0;
    if (!n || (!out && cap > 0))
        return kvti_fail(c, KVT_INVALID_ARGUMENT, "get_finished", "%s is NULL", !n ? "n" : "out");
    struct kvt_data *d = c->data;
    kvti_clear_error(c);
    s_pump(d, 0);
    uint32_t m = 0;
    while (m < cap && d->fin_head >= 0)
        s_collect(d, &d->jobs[d->fin_head], &out[m++]);
    *n = m;
    return 0;
}

int kvt_wait(kvt_client_t *c, const uint64_t *job_ids, uint32_t n, int timeout_ms,
             kvt_job_result_t *results)
{
    const char *W = "wait";
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    if (n > 0 && (!job_ids || !results))
        return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "%s is NULL",
                         !job_ids ? "job_ids" : "results");
    struct kvt_data *d = c->data;
    for (uint32_t i = 0; i < n; i++) {
        if (!s_find(d, job_ids[i]))
            return kvti_fail(c, KVT_INVALID_ARGUMENT, W,
                             "job %" PRIu64 " is not in flight (never submitted, or already "
                             "collected)",
                             job_ids[i]);
        for (uint32_t k = 0; k < i; k++)
            if (job_ids[k] == job_ids[i])
                return kvti_fail(c, KVT_INVALID_ARGUMENT, W, "job %" PRIu64 " is listed twice",
                                 job_ids[i]);
    }
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : zclock_mono() + timeout_ms;
    s_pump(d, 0); /* a zero timeout still collects what has arrived */
    for (;;) {
        uint32_t done = 0;
        for (uint32_t i = 0; i < n; i++)
            done += s_find(d, job_ids[i])->finished;
        if (done == n)
            break;
        int64_t now = zclock_mono();
        if (now >= deadline)
            return kvti_fail(c, KVT_TIMEOUT, W,
                             "%u of %u jobs still running after %d ms (they stay in flight)",
                             n - done, n, timeout_ms);
        int64_t left = deadline - now;
        s_pump(d, left > 1000 ? 1000 : (int)left);
    }
    kvti_clear_error(c);
    for (uint32_t i = 0; i < n; i++)
        s_collect(d, s_find(d, job_ids[i]), &results[i]);
    return 0;
}
