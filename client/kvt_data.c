/* kvt_data.c — the data role of libkvtier (DESIGN.md §3, §6, §9): jobs that move
 * the bytes of a token between the caller's buffers and the tier actors.
 *
 * The bytes go by a transport (kvt_transport.h), chosen per token tier once per
 * job: the first in the registry (kvt_transport.c) that has the job kind's move
 * op, finds the tier usable and attaches. In preference order:
 * - shm (kvt_transport_shm.c): the tier actor is on this host, names its
 *   segment, the segment attaches with the token's epoch and is live, and shm is
 *   not disabled; copies inside submit.
 * - frames (kvt_transport_frames.c): WriteSlots / ReadSlots to the tier actor's
 *   endpoint, and a prefetch's CopyPrefetch to the scheduler (the migrator
 *   copies); every tier and kind can go this way.
 *
 * Owns the job table (max_in_flight jobs, from submit until collected) and each
 * transport's state for the handle. Never reports a job twice, never keeps a job
 * slot after it was collected, and never allocates per job once a slot's arrays
 * have grown to the largest token. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvt_device.h"
#include "kvt_internal.h"
#include "kvt_transport.h"
#include "tier_checksum.h"

struct kvt_data {
    kvt_client_t *c;
    kvti_job_t *jobs;
    uint32_t cap, used;
    int32_t fin_head, fin_tail;
    uint64_t submits;
    void *xs[KVTI_N_TRANSPORTS]; /* each transport's state, kvti_transports order */
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
    if (!d->jobs) {
        kvti_data_destroy(&d);
        return NULL;
    }
    for (uint32_t i = 0; i < d->cap; i++)
        d->jobs[i].owner = d;
    for (int x = 0; x < KVTI_N_TRANSPORTS; x++) {
        d->xs[x] = kvti_transports[x]->open(c, d->jobs, d->cap);
        if (!d->xs[x]) {
            kvti_data_destroy(&d);
            return NULL;
        }
    }
    d->fin_head = d->fin_tail = -1;
    return d;
}

void kvti_data_destroy(struct kvt_data **dp)
{
    if (!dp || !*dp)
        return;
    struct kvt_data *d = *dp;
    /* copies still queued may read or write mappings the transports own */
    if (d->jobs)
        kvti_dev_quiesce(d->c, d->jobs, d->cap);
    for (int x = KVTI_N_TRANSPORTS - 1; x >= 0; x--) /* frames first, as before */
        kvti_transports[x]->close(&d->xs[x]);
    for (uint32_t i = 0; d->jobs && i < d->cap; i++) {
        kvti_dev_release(d->c, &d->jobs[i]);
        free(d->jobs[i].bufs);
        free(d->jobs[i].seg_ptrs);
    }
    kvti_dev_close(d->c);
    free(d->jobs);
    free(d);
    *dp = NULL;
}

/* ---- jobs ------------------------------------------------------------------------- */

static kvti_job_t *s_find(struct kvt_data *d, uint64_t id)
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

void kvti_job_error(kvti_job_t *j, int code, const char *fmt, ...)
{
    if (j->status != 0)
        return;
    j->status = -(code < 0 ? -code : code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->msg, sizeof j->msg, fmt, ap);
    va_end(ap);
}

/* What a layer-wise job leaves on its token: a get's fetched blocks are scattered
 * from the stage and kept there; a key that failed stays failed. */
static void s_segs_finish(kvti_job_t *j)
{
    kvti_segs_t *g = j->tok->segs;
    for (uint32_t i = 0; i < j->tok->n; i++) {
        if (j->seg_fetch && g->fetching[i]) {
            g->fetching[i] = false;
            if (j->tok->ok[i] && !g->failed[i]) {
                const uint8_t *blk = g->stage + (size_t)i * g->seg_bytes * g->segments;
                for (uint32_t s = 0; s < j->seg_count; s++)
                    memcpy(j->seg_ptrs[(size_t)i * j->seg_count + s],
                           blk + (size_t)(j->seg_first + s) * g->seg_bytes, g->seg_bytes);
                g->staged[i] = true;
            }
        }
        if (g->failed[i])
            j->tok->ok[i] = false;
        else if (!j->tok->ok[i])
            g->failed[i] = true;
    }
}

static void s_finish(struct kvt_data *d, kvti_job_t *j)
{
    if (j->dev_phase != KVTI_DEV_H2D) { /* a device get's copy in: this was done before it */
        const struct kvt_token *root = kvti_token_root(j->tok);
        if (root->stale) { /* its leader is gone: what it moved does not count (issue 9 §1) */
            memset(j->tok->ok, 0, (size_t)j->tok->n * sizeof *j->tok->ok);
            j->status = 0;
            kvti_job_error(j, KVT_ABORTED,
                           "token %" PRIu64 " was minted by the leader of epoch %" PRIu64
                           ", which is gone: all keys failed; complete the token and prepare "
                           "again",
                           root->token_id, root->leader_epoch);
        }
        if (j->seg_count > 0)
            s_segs_finish(j);
        /* a device get: the bytes are in the staging; it finishes once they are in
         * the device (kvti_dev_pump) */
        if (j->dev_phase == KVTI_DEV_HOST && j->kind == BUS_TOKEN_GET && kvti_dev_defer_get(j))
            return;
    }
    if (j->dev_phase == KVTI_DEV_H2D)
        kvti_dev_check_direct(j);
    j->dev_phase = KVTI_DEV_NONE;
    j->finished = true;
    j->n_keys = j->tok->n;
    j->n_failed = 0;
    for (uint32_t i = 0; i < j->tok->n; i++)
        j->n_failed += !j->tok->ok[i];
    /* a put's key is written with its last segment: a complete before that fails it */
    if (j->seg_count > 0 && j->kind == BUS_TOKEN_PUT &&
        j->seg_first + j->seg_count < j->tok->segs->segments)
        memset(j->tok->ok, 0, (size_t)j->tok->n * sizeof *j->tok->ok);
    if (j->n_failed > 0 && j->status == 0) /* every failing path records one; guard */
        kvti_job_error(j, KVT_INTERNAL, "%u keys failed without a status", j->n_failed);
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

void kvti_job_part_done(kvti_job_t *j)
{
    j->open--;
    if (!j->finished && j->open == 0)
        s_finish(j->owner, j);
}

static void s_collect(struct kvt_data *d, kvti_job_t *j, kvt_job_result_t *out)
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

/* ---- progress ------------------------------------------------------------------ */

/* One round of every transport that completes jobs later; waits up to wait_ms
 * (0: none) for a reply when something is open. */
static void s_start(struct kvt_data *d, kvti_job_t *j);
static void s_choose(struct kvt_data *d, kvti_job_t *j);
static int s_layer_stage(kvt_client_t *c, const char *what, kvti_job_t *j);

/* A device put's copy out of the device is done: its host part starts now. The
 * transports chosen at submit are chosen again: an attachment may have been
 * replaced since (another tier epoch, an eviction). */
static void s_dev_start(void *arg, kvti_job_t *j)
{
    struct kvt_data *d = arg;
    s_choose(d, j);
    if (j->seg_count > 0 && s_layer_stage(d->c, "submit_put", j) < 0) {
        kvti_job_error(j, KVT_INTERNAL, "%s", kvt_last_error(d->c));
        kvti_clear_error(d->c);
        memset(j->tok->ok, 0, (size_t)j->tok->n * sizeof *j->tok->ok);
        j->open = 1;
        kvti_job_part_done(j);
        return;
    }
    s_start(d, j);
}

static void s_dev_finish(void *arg, kvti_job_t *j)
{
    s_finish(arg, j);
}

/* Device jobs copying (kvt_device.c) are polled, not waited on: the wait is cut to
 * a millisecond while one is, and a round that found only them sleeps a little. */
static void s_pump(struct kvt_data *d, int wait_ms)
{
    uint32_t busy = d->c->dev ? kvti_dev_pump(d->jobs, d->cap, s_dev_start, s_dev_finish, d) : 0;
    if (busy && wait_ms > 1)
        wait_ms = 1;
    for (int x = 0; x < KVTI_N_TRANSPORTS; x++)
        if (kvti_transports[x]->progress)
            kvti_transports[x]->progress(d->xs[x], wait_ms);
    if (busy && kvti_dev_pump(d->jobs, d->cap, s_dev_start, s_dev_finish, d) && wait_ms > 0)
        (void)usleep(200);
}

/* ---- submit ------------------------------------------------------------------------- */

int kvti_grow(void **p, uint32_t *cap, uint32_t want, size_t elem)
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

/* The job slot's arrays for n keys: its buffers and each transport's records. */
static int s_reserve(struct kvt_data *d, kvti_job_t *j, uint32_t n)
{
    if (kvti_grow((void **)&j->bufs, &j->bufs_cap, n, sizeof *j->bufs) < 0)
        return -1;
    for (int x = 0; x < KVTI_N_TRANSPORTS; x++)
        if (kvti_transports[x]->reserve &&
            kvti_transports[x]->reserve(d->xs[x], (uint32_t)(j - d->jobs), n) < 0)
            return -1;
    return 0;
}

/* Per token tier, once per job: the transport (kvti_transport_choose). */
static void s_choose(struct kvt_data *d, kvti_job_t *j)
{
    const bus_token_view_t *v = &j->tok->view;
    for (uint32_t t = 0; t < v->n_tiers; t++) {
        int x = kvti_transport_choose(d->xs, d->c, j, &v->tiers[t], &j->at[t]);
        j->via[t] = x >= 0 ? kvti_transports[x] : NULL; /* none: its keys fail (s_finish) */
    }
}

/* A layer-wise job's keys of tiers whose transport moves whole blocks (mine): a
 * put gathers their segments into the stage and lets the transport send the
 * blocks with the last segment; a get scatters from the stage what it holds, or
 * has the transport fetch the blocks into it first (s_segs_finish scatters).
 * True when the transport has to run now. */
static bool s_stage(kvti_job_t *j, const bool mine[BUS_TOKEN_MAX_TIERS])
{
    struct kvt_token *tok = j->tok;
    kvti_segs_t *g = tok->segs;
    uint64_t block = g->seg_bytes * g->segments;
    bool last = j->seg_first + j->seg_count == g->segments;
    bool all_staged = true;
    for (uint32_t i = 0; i < tok->n; i++) {
        bus_token_entry_t e;
        bus_token_entry_at(&tok->view, i, &e);
        if (!mine[e.tier] || g->failed[i])
            continue;
        uint8_t *blk = g->stage + (size_t)i * block;
        if (j->kind == BUS_TOKEN_PUT) {
            for (uint32_t s = 0; s < j->seg_count; s++)
                memcpy(blk + (size_t)(j->seg_first + s) * g->seg_bytes,
                       j->seg_ptrs[(size_t)i * j->seg_count + s], g->seg_bytes);
            tok->ok[i] = !last; /* staged; with the last segment the transport sends it */
        } else if (!g->staged[i]) {
            all_staged = false;
        }
    }
    if (j->kind == BUS_TOKEN_PUT)
        return last;
    if (all_staged) {
        for (uint32_t i = 0; i < tok->n; i++) {
            bus_token_entry_t e;
            bus_token_entry_at(&tok->view, i, &e);
            if (!mine[e.tier] || g->failed[i])
                continue;
            const uint8_t *blk = g->stage + (size_t)i * block;
            for (uint32_t s = 0; s < j->seg_count; s++)
                memcpy(j->seg_ptrs[(size_t)i * j->seg_count + s],
                       blk + (size_t)(j->seg_first + s) * g->seg_bytes, g->seg_bytes);
            tok->ok[i] = true;
        }
        return false;
    }
    for (uint32_t i = 0; i < tok->n; i++) {
        bus_token_entry_t e;
        bus_token_entry_at(&tok->view, i, &e);
        if (mine[e.tier])
            g->fetching[i] = true;
    }
    j->seg_fetch = true;
    return true;
}

/* Hands each transport the keys of its tiers, in table order. The job holds one
 * part of its own until all have started, so none finishes it early. */
static void s_start(struct kvt_data *d, kvti_job_t *j)
{
    const bus_token_view_t *v = &j->tok->view;
    j->open = 1;
    for (int x = 0; x < KVTI_N_TRANSPORTS; x++) {
        bool mine[BUS_TOKEN_MAX_TIERS] = {false};
        bool any = false;
        for (uint32_t t = 0; t < v->n_tiers; t++)
            any |= mine[t] = j->via[t] == kvti_transports[x];
        if (any && j->seg_count > 0 && !kvti_transports[x]->segments && !s_stage(j, mine))
            continue;
        if (any)
            kvti_transport_move_op(kvti_transports[x], j->kind)(d->xs[x], j, mine);
    }
    kvti_job_part_done(j);
}

/* A layer-wise submit's range (kvt_submit_*_segments). */
typedef struct {
    uint32_t first, count;
    void *const *ptrs;
} s_layer_t;

static int s_bools(bool **p, uint32_t n)
{
    bool *q = realloc(*p, (size_t)n * sizeof *q);
    if (!q)
        return -1;
    *p = q;
    return 0;
}

/* The token's layer-wise state for an instance of `segments` parts of seg_bytes. */
static int s_segs_ready(struct kvt_token *tok, uint32_t segments, uint64_t seg_bytes)
{
    if (!tok->segs && !(tok->segs = calloc(1, sizeof *tok->segs)))
        return -1;
    kvti_segs_t *g = tok->segs;
    if (g->cap < tok->n) {
        size_t hs = sizeof(tier_checksum_state_t); /* a multiple of its 64-byte alignment */
        void *h = aligned_alloc(64, ((size_t)tok->n * hs + 63) & ~(size_t)63);
        if (!h || s_bools(&g->failed, tok->n) < 0 || s_bools(&g->staged, tok->n) < 0 ||
            s_bools(&g->fetching, tok->n) < 0) {
            free(h);
            return -1;
        }
        free(g->hash);
        g->hash = h;
        g->hash_size = hs;
        g->cap = tok->n;
    }
    if (g->segments == 0) { /* first layer-wise job since the token was handed out */
        g->segments = segments;
        g->seg_bytes = seg_bytes;
        g->next = 0;
        memset(g->failed, 0, (size_t)tok->n * sizeof *g->failed);
        memset(g->staged, 0, (size_t)tok->n * sizeof *g->staged);
        memset(g->fetching, 0, (size_t)tok->n * sizeof *g->fetching);
    }
    return 0;
}

int kvti_segs_adopt(struct kvt_token *tok, uint32_t segments, uint64_t seg_bytes, uint32_t next,
                    const bool *failed)
{
    if (tok->segs)
        tok->segs->segments = 0; /* whatever ran here before is replaced */
    if (s_segs_ready(tok, segments, seg_bytes) < 0)
        return -1;
    kvti_segs_t *g = tok->segs;
    g->next = next;
    memcpy(g->failed, failed, (size_t)tok->n * sizeof *g->failed);
    return 0;
}

/* Checks a layer-wise range against the instance as this handle registered it;
 * *len gets the block size. */
static int s_layer_check(kvt_client_t *c, const char *what, struct kvt_token *tok,
                         const s_layer_t *lw, size_t *len)
{
    uint64_t bpb = 0;
    uint32_t segs = kvti_instance_segments(c, tok->instance_id, &bpb);
    const struct kvt_token *root = kvti_token_root(tok);
    if (segs == 0 && root->imported && root->x_segments) { /* as the exporter registered it */
        segs = root->x_segments;
        bpb = root->x_bpb;
    }
    if (segs == 0)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "instance %s is not registered on this handle (or beyond the %d it "
                         "remembers): register it here (the same spec again is OK) before "
                         "layer-wise submits",
                         tok->instance_id, KVT_RECOVER_INSTANCES);
    if (segs == 1)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "instance %s has blocks of one segment (segments 0 or 1 in its spec): "
                         "use kvt_submit_get / kvt_submit_put",
                         tok->instance_id);
    if (lw->count == 0 || lw->first >= segs || lw->count > segs - lw->first)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "segments [%u, %u + %u) are not a non-empty range of the instance's "
                         "%u",
                         lw->first, lw->first, lw->count, segs);
    if (tok->n > 0 && !lw->ptrs)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what, "ptrs is NULL");
    for (uint64_t k = 0; k < (uint64_t)tok->n * lw->count; k++)
        if (!lw->ptrs[k])
            return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                             "ptrs[%" PRIu64 "] (key %" PRIu64 ", segment %" PRIu64 ") is NULL", k,
                             k / lw->count, lw->first + k % lw->count);
    const kvti_segs_t *g = tok->segs;
    bool used = g && g->segments;
    if (tok->kind == BUS_TOKEN_PUT && lw->first != (used ? g->next : 0))
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "a put's segments go in order: this token's next job starts at "
                         "segment %u, not %u",
                         used ? g->next : 0, lw->first);
    if (s_segs_ready(tok, segs, bpb / segs) < 0)
        return kvti_fail(c, KVT_INTERNAL, what, "out of memory for the token's layer-wise state");
    *len = (size_t)bpb;
    return 0;
}

/* A layer-wise job over a transport that moves whole blocks stages them (kvtier.h
 * KVT_SEGMENT_STAGING_MAX): the stage, and the job's bufs pointing into it. */
static int s_layer_stage(kvt_client_t *c, const char *what, kvti_job_t *j)
{
    bool need = false;
    for (uint32_t t = 0; t < j->tok->view.n_tiers; t++)
        need |= j->via[t] && !j->via[t]->segments;
    if (!need)
        return 0;
    kvti_segs_t *g = j->tok->segs;
    uint64_t want = (uint64_t)j->tok->n * j->len;
    if (want > KVT_SEGMENT_STAGING_MAX)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "layer-wise over frames stages whole blocks: %u keys of %zu bytes "
                         "need %" PRIu64 " bytes, above KVT_SEGMENT_STAGING_MAX (%llu): put "
                         "fewer keys in one token",
                         j->tok->n, j->len, want, (unsigned long long)KVT_SEGMENT_STAGING_MAX);
    if (g->stage_cap < want) {
        uint8_t *p = realloc(g->stage, want);
        if (!p)
            return kvti_fail(c, KVT_INTERNAL, what, "out of memory for a %" PRIu64 "-byte stage",
                             want);
        g->stage = p;
        g->stage_cap = want;
    }
    for (uint32_t i = 0; i < j->tok->n; i++)
        j->bufs[i] = g->stage + (size_t)i * j->len;
    return 0;
}

static int s_submit(kvt_client_t *c, bus_token_kind_t kind, uint64_t job_id, kvt_token_t *tok,
                    void *const *bufs, size_t len, const s_layer_t *lw, const kvt_xfer_t *x)
{
    const char *what = kind == BUS_TOKEN_GET   ? "submit_get"
                       : kind == BUS_TOKEN_PUT ? "submit_put"
                                               : "submit_prefetch";
    if (!c)
        return -KVT_INVALID_ARGUMENT;
    struct kvt_data *d = c->data;
    if (x && x->mem != KVT_MEM_HOST && x->mem != KVT_MEM_CUDA)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "xfer.mem %d is neither KVT_MEM_HOST (0) nor KVT_MEM_CUDA (1)",
                         (int)x->mem);
    if (x && x->mem == KVT_MEM_HOST && (x->stream || x->wait_event || x->done_event))
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "a stream or an event goes with device buffers (KVT_MEM_CUDA) only");
    bool dev = x && x->mem == KVT_MEM_CUDA;
    if (dev && kind == BUS_TOKEN_PREFETCH)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what, "a prefetch moves no buffers");
    if (!tok || tok->owner != c || !tok->live)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "no token, or the token belongs to another handle or was completed");
    if (tok->kind == BUS_TOKEN_GET_PUT)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "a kvt_prepare token moves by its halves: submit "
                         "kvt_token_half(tok, KVT_HALF_GET) to kvt_submit_get and "
                         "KVT_HALF_PUT to kvt_submit_put");
    if (tok->kind != kind)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what, "the token is not from prepare_%s%s",
                         s_kind_name(kind),
                         tok->parent ? " (it is the other half of a kvt_prepare token)" : "");
    if (tok->jobs > 0)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "the token already has a job in flight: collect it first");
    const struct kvt_token *root = kvti_token_root(tok);
    if (root->stale)
        return kvti_fail(c, KVT_ABORTED, what,
                         "token %" PRIu64 " was minted by the leader of epoch %" PRIu64
                         ", which is gone: complete it (ABORTED) and prepare again",
                         root->token_id, root->leader_epoch);
    /* A transfer started that late could overwrite a block the slots went to. */
    int64_t age = 0;
    if (kvti_token_lapsed(tok, &age))
        return kvti_fail(c, KVT_EXPIRED, what,
                         "the token is %" PRId64 " ms old and its lease is %" PRIu64
                         " ms: complete it and prepare again",
                         age, tok->lease_ms);
    if (!lw && kind != BUS_TOKEN_PREFETCH && tok->n > 0 && !bufs)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what, "bufs is NULL");
    if (s_find(d, job_id))
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "job id %" PRIu64 " is already in flight on this handle", job_id);
    if (d->used == d->cap)
        return kvti_fail(c, KVT_UNAVAILABLE, what,
                         "%u jobs in flight (max_in_flight): collect completions with "
                         "kvt_get_finished or kvt_wait first",
                         d->cap);
    int rc = lw ? s_layer_check(c, what, tok, lw, &len) : 0;
    if (rc < 0)
        return rc;
    /* a layer-wise job's entries are checked with stand-ins for whole-block buffers */
    rc = s_check_entries(c, what, tok, lw ? lw->ptrs : bufs, len);
    if (rc < 0)
        return rc;
    kvti_job_t *j = NULL;
    for (uint32_t i = 0; i < d->cap && !j; i++)
        if (!d->jobs[i].used)
            j = &d->jobs[i];
    if (s_reserve(d, j, tok->n) < 0 ||
        (lw && kvti_grow((void **)&j->seg_ptrs, &j->seg_ptrs_cap, tok->n * lw->count,
                         sizeof *j->seg_ptrs) < 0))
        return kvti_fail(c, KVT_INTERNAL, what, "out of memory for a job of %u keys", tok->n);
    j->used = true;
    j->finished = false;
    j->id = job_id;
    j->kind = kind;
    j->tok = tok;
    j->len = len;
    j->status = 0;
    j->msg[0] = '\0';
    j->open = 0;
    j->fin_prev = j->fin_next = -1;
    j->deadline = zclock_mono() + c->timeout_ms;
    j->seg_first = lw ? lw->first : 0;
    j->seg_count = lw ? lw->count : 0;
    j->seg_fetch = false;
    if (lw)
        memcpy(j->seg_ptrs, lw->ptrs, (size_t)tok->n * lw->count * sizeof *lw->ptrs);
    else if (bufs && kind != BUS_TOKEN_PREFETCH)
        memcpy(j->bufs, bufs, (size_t)tok->n * sizeof *bufs);
    j->dev_phase = KVTI_DEV_NONE;
    if (!dev && c->dev && tok->n > 0 && kind != BUS_TOKEN_PREFETCH &&
        (rc = kvti_dev_check_host(c, what, lw ? lw->ptrs : bufs,
                                  lw ? (uint64_t)tok->n * lw->count : tok->n)) < 0) {
        j->used = false; /* nothing moved, nothing counted */
        return rc;
    }
    if (dev && tok->n > 0 &&
        (rc = kvti_dev_prepare(c, what, d->jobs, d->cap, j, x, lw ? lw->ptrs : bufs,
                               lw ? (uint64_t)tok->n * lw->count : tok->n,
                               lw ? tok->segs->seg_bytes : len)) < 0) {
        j->used = false; /* nothing moved, nothing counted */
        j->dev_phase = KVTI_DEV_NONE;
        return rc;
    }
    j->seq = ++d->submits;
    s_choose(d, j);
    if (lw && (rc = s_layer_stage(c, what, j)) < 0) {
        j->used = false; /* nothing moved, nothing counted */
        j->dev_phase = KVTI_DEV_NONE;
        return rc;
    }
    if (lw && kind == BUS_TOKEN_PUT)
        tok->segs->next = lw->first + lw->count;
    d->used++;
    tok->jobs++;
    memset(tok->ok, 0, (size_t)tok->n * sizeof *tok->ok);
    if (j->dev_phase == KVTI_DEV_HOST && kind == BUS_TOKEN_PUT) {
        /* the host part starts once the copy out of the device is done (s_pump) */
        if (!kvti_dev_start_put(j)) {
            j->open = 1; /* refused: the job finishes with every key failed */
            kvti_job_part_done(j);
        }
    } else {
        s_start(d, j);
    }
    kvti_clear_error(c);
    return 0;
}

int kvt_submit_get(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok, void *const *bufs,
                   size_t len)
{
    return s_submit(c, BUS_TOKEN_GET, job_id, tok, bufs, len, NULL, NULL);
}

int kvt_submit_put(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok, const void *const *bufs,
                   size_t len)
{
    /* Put buffers are only read; the job table keeps one pointer type for both. */
    return s_submit(c, BUS_TOKEN_PUT, job_id, tok, (void *const *)(uintptr_t)bufs, len, NULL, NULL);
}

int kvt_submit_prefetch(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok)
{
    return s_submit(c, BUS_TOKEN_PREFETCH, job_id, tok, NULL, 0, NULL, NULL);
}

int kvt_submit_get_segments(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok, uint32_t first,
                            uint32_t count, void *const *ptrs)
{
    s_layer_t lw = {first, count, ptrs};
    return s_submit(c, BUS_TOKEN_GET, job_id, tok, NULL, 0, &lw, NULL);
}

int kvt_submit_put_segments(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok, uint32_t first,
                            uint32_t count, const void *const *ptrs)
{
    s_layer_t lw = {first, count, (void *const *)(uintptr_t)ptrs};
    return s_submit(c, BUS_TOKEN_PUT, job_id, tok, NULL, 0, &lw, NULL);
}

int kvt_submit_get_ex(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok, void *const *bufs,
                      size_t len, const kvt_xfer_t *x)
{
    return s_submit(c, BUS_TOKEN_GET, job_id, tok, bufs, len, NULL, x);
}

int kvt_submit_put_ex(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok, const void *const *bufs,
                      size_t len, const kvt_xfer_t *x)
{
    return s_submit(c, BUS_TOKEN_PUT, job_id, tok, (void *const *)(uintptr_t)bufs, len, NULL, x);
}

int kvt_submit_get_segments_ex(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok, uint32_t first,
                               uint32_t count, void *const *ptrs, const kvt_xfer_t *x)
{
    s_layer_t lw = {first, count, ptrs};
    return s_submit(c, BUS_TOKEN_GET, job_id, tok, NULL, 0, &lw, x);
}

int kvt_submit_put_segments_ex(kvt_client_t *c, uint64_t job_id, kvt_token_t *tok, uint32_t first,
                               uint32_t count, const void *const *ptrs, const kvt_xfer_t *x)
{
    s_layer_t lw = {first, count, (void *const *)(uintptr_t)ptrs};
    return s_submit(c, BUS_TOKEN_PUT, job_id, tok, NULL, 0, &lw, x);
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
