/* kvt_transport_frames.c — the frame transport of the data path, usable for every
 * tier and kind (the last of the table, so every tier has one): WriteSlots /
 * ReadSlots to the tier actor's endpoint, in chunks of at most S_CHUNK_SLOTS
 * slots and S_CHUNK_BYTES bytes. Put bytes are copied into the messages when a
 * chunk is sent; get bytes are copied out of the reply frames. A prefetch is one
 * CopyPrefetch to the scheduler that minted the token (the leader): it has the
 * migrator copy the blocks tier actor to tier actor and answers, once they are
 * copied, with one flag per token key; no bytes pass through the client.
 *
 * Owns the tier-plane DEALERs (one per tier endpoint, kept for the handle's life;
 * each accepts frames of at most the tier's slot size or BUS_MAX_FRAME0, whichever
 * is larger: ZMQ_MAXMSGSIZE, set before the connect, so a tier answering with a
 * larger frame costs its connection, never the memory)
 * and per job slot the send order and chunks (grown to the largest token, never
 * freed before close). A chunk is one part of its job: it ends exactly once, by
 * its reply, a send failure or the job's deadline. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "bus_log.h"
#include "kvt_transport.h"
#include "bus_ucx_peer.h"
#include "tier_checksum.h"

#define S_CHUNK_SLOTS 128u        /* slots per tier-plane message */
#define S_CHUNK_BYTES (32u << 20) /* payload bytes per tier-plane message */
#define S_MAX_CONNS 64u           /* tier endpoints per handle */
#define S_CONN_IN_FLIGHT 4096u    /* tier-plane requests in flight per endpoint */

/* A chunk's life: UNSENT -> SENT -> DONE; over UCX a put is FLUSHING (its bytes on
 * the way into the tier's staging region) before SENT, a get FETCHING (its bytes on
 * the way out of it) after SENT's reply. */
enum { S_UNSENT = 0, S_SENT = 1, S_DONE = 2, S_FLUSHING = 3, S_FETCHING = 4 };
/* A tier endpoint's transport ucx (kvt_ucx.h): not asked yet, Probe{ucx} in flight,
 * connected to its staging region, or frames (the tier has no UCX, or it failed:
 * asked again after S_UX_RETRY_MS). */
enum { S_UX_UNKNOWN = 0, S_UX_PROBING = 1, S_UX_READY = 2, S_UX_NONE = 3 };
#define S_UX_RETRY_MS 10000

typedef struct s_frames s_frames_t;
typedef struct s_fjob s_fjob_t;

typedef struct {
    s_fjob_t *fj;
    uint16_t tier;  /* token tier index the request goes to (prefetch: unused) */
    uint32_t start; /* first index into fj->order */
    uint32_t count;
    uint8_t state;
    /* transport ucx: the chunk's range of its connection's staging region */
    struct s_conn *ux_conn;
    uint64_t ux_off, ux_len;
    int64_t ux_deadline;
    bool ux_staged; /* a put's bytes are in the range (flushed) */
} s_chunk_t;

/* What this transport keeps for one job slot. */
struct s_fjob {
    s_frames_t *fs;
    kvti_job_t *job;
    uint32_t *order; /* token key indices going by frames, grouped by tier */
    uint32_t order_cap;
    s_chunk_t *chunks;
    uint32_t n_chunks, chunks_cap;
    uint32_t unsent; /* chunks UNSENT */
    bool *mask;      /* a CopyPrefetch reply's flags (one per token key) */
    uint64_t *sums;  /* transport ucx gets: each block's checksum from the reply (by order) */
    uint32_t sums_cap;
    uint32_t mask_cap;
    bus_arrays_t arr; /* a CopyPrefetch reply decodes here */
};

typedef struct s_conn {
    char endpoint[BUS_ENDPOINT_MAX];
    uint64_t max_frame; /* its ZMQ_MAXMSGSIZE (s_max_frame) */
    bus_client_t *cl;
    struct s_frames *fs;
    uint8_t ux_state;
    bus_ucx_conn_t *ux;
    int64_t ux_retry; /* S_UX_NONE: when to ask again */
    uint32_t ux_open; /* chunks holding a range of its region */
} s_conn_t;

struct s_frames {
    kvt_client_t *c;
    s_fjob_t *fjobs; /* one per job slot */
    uint32_t cap;
    s_conn_t conns[S_MAX_CONNS];
    uint32_t n_conns;
    kvtier_Envelope *env;
    /* one chunk's arrays to send, and the arrays every tier-plane reply decodes
     * into (replies are decoded one at a time, right before their callback) */
    uint64_t slots[S_CHUNK_SLOTS], sizes[S_CHUNK_SLOTS];
    uint8_t keys[S_CHUNK_SLOTS][BUS_KEY_LEN];
    bus_payload_t payload[S_CHUNK_SLOTS];
    uint64_t rep_sizes[S_CHUNK_SLOTS];
    uint64_t rep_sums[S_CHUNK_SLOTS]; /* ReadSlots: each block's checksum, 0 = unknown */
    bool rep_mask[S_CHUNK_SLOTS];
    bus_arrays_t rep_arr;
    bus_ucx_peer_t *ux; /* transport ucx: the handle's worker, made on first use */
    bool ux_off;        /* UCX cannot run here (said once) or KVT_UCX=0 */
    bool closing;
};

/* ---- lifetime ------------------------------------------------------------------ */

static void s_close(void **xs);

static void *s_open(kvt_client_t *c, kvti_job_t *jobs, uint32_t cap)
{
    s_frames_t *fs = calloc(1, sizeof *fs);
    if (!fs)
        return NULL;
    fs->c = c;
    fs->cap = cap;
    const char *env = getenv("KVT_UCX"); /* "0": this process keeps to frames */
    fs->ux_off = env && strcmp(env, "0") == 0;
    fs->fjobs = calloc(cap, sizeof *fs->fjobs);
    fs->env = calloc(1, sizeof *fs->env);
    if (!fs->fjobs || !fs->env) {
        void *p = fs;
        s_close(&p);
        return NULL;
    }
    for (uint32_t i = 0; i < cap; i++)
        fs->fjobs[i] = (s_fjob_t){.fs = fs, .job = &jobs[i]};
    fs->rep_arr.sizes = (bus_u64s_t){.v = fs->rep_sizes, .cap = S_CHUNK_SLOTS};
    fs->rep_arr.mask = (bus_bools_t){.v = fs->rep_mask, .cap = S_CHUNK_SLOTS};
    fs->rep_arr.checksums = (bus_u64s_t){.v = fs->rep_sums, .cap = S_CHUNK_SLOTS};
    return fs;
}

static void s_close(void **xs)
{
    if (!xs || !*xs)
        return;
    s_frames_t *fs = *xs;
    fs->closing = true; /* UCX callbacks of the closes below do nothing */
    for (uint32_t i = 0; i < fs->n_conns; i++)
        bus_ucx_conn_close(&fs->conns[i].ux);
    bus_ucx_peer_destroy(&fs->ux);
    /* Requests in flight are dropped with their sockets, without callbacks. */
    for (uint32_t i = 0; i < fs->n_conns; i++)
        bus_client_destroy(&fs->conns[i].cl);
    for (uint32_t i = 0; fs->fjobs && i < fs->cap; i++) {
        free(fs->fjobs[i].order);
        free(fs->fjobs[i].chunks);
        free(fs->fjobs[i].mask);
        free(fs->fjobs[i].sums);
    }
    free(fs->fjobs);
    free(fs->env);
    free(fs);
    *xs = NULL;
}

static int s_reserve(void *xs, uint32_t job, uint32_t n)
{
    s_frames_t *fs = xs;
    s_fjob_t *fj = &fs->fjobs[job];
    fj->n_chunks = fj->unsent = 0;
    if (kvti_grow((void **)&fj->order, &fj->order_cap, n, sizeof *fj->order) < 0 ||
        kvti_grow((void **)&fj->chunks, &fj->chunks_cap, n, sizeof *fj->chunks) < 0 ||
        kvti_grow((void **)&fj->mask, &fj->mask_cap, n, sizeof *fj->mask) < 0 ||
        kvti_grow((void **)&fj->sums, &fj->sums_cap, n, sizeof *fj->sums) < 0)
        return -1;
    fj->arr = (bus_arrays_t){.mask = {.v = fj->mask, .cap = fj->mask_cap}};
    return 0;
}

/* ---- chunks ----------------------------------------------------------------------- */

/* The largest frame a reply to a request for blocks of slot_size bytes can carry
 * (ZMQ_MAXMSGSIZE bounds each frame): frame 0 (the envelope, BUS_MAX_FRAME0) or
 * one block. A larger frame drops the connection instead of being buffered (issue 12). */
static uint64_t s_max_frame(uint64_t slot_size)
{
    return slot_size > BUS_MAX_FRAME0 ? slot_size : BUS_MAX_FRAME0;
}

/* The connection to endpoint that accepts frames up to max_frame: a tier whose slots
 * outgrow an open connection's bound (a restarted tier with a larger slot size at
 * the same endpoint) gets a new one. */
static s_conn_t *s_conn(s_frames_t *fs, const char *endpoint, uint64_t max_frame, char *why,
                        size_t whylen)
{
    for (uint32_t i = 0; i < fs->n_conns; i++)
        if (strcmp(fs->conns[i].endpoint, endpoint) == 0 && fs->conns[i].max_frame >= max_frame)
            return &fs->conns[i];
    if (fs->n_conns == S_MAX_CONNS) {
        snprintf(why, whylen, "more than %u tier endpoints in use by this handle", S_MAX_CONNS);
        return NULL;
    }
    if (bus_endpoint_check(endpoint, BUS_ENDPOINT_CONNECT, why, whylen) < 0)
        return NULL;
    bus_client_config_t cfg = {.name = fs->c->name,
                               .max_in_flight = S_CONN_IN_FLIGHT,
                               .default_timeout_ms = fs->c->timeout_ms,
                               .max_frame = max_frame,
                               .curve = kvti_curve(fs->c)};
    bus_client_t *cl = bus_client_new(endpoint, &cfg);
    if (!cl) {
        snprintf(why, whylen, "cannot connect a socket to %s", endpoint);
        return NULL;
    }
    s_conn_t *s = &fs->conns[fs->n_conns++];
    *s = (s_conn_t){.cl = cl, .fs = fs};
    snprintf(s->endpoint, sizeof s->endpoint, "%s", endpoint);
    s->max_frame = max_frame;
    return s;
}

static const char *s_op_name(bus_token_kind_t k)
{
    return k == BUS_TOKEN_GET ? "ReadSlots" : k == BUS_TOKEN_PUT ? "WriteSlots" : "CopyPrefetch";
}

/* The chunk ended: one part of its job is done. */
static void s_chunk_end(s_chunk_t *ch)
{
    if (ch->ux_conn) { /* the tier is done with the range: the reply came, or the
                          connection was closed (its region is given up with it) */
        if (ch->ux_conn->ux)
            bus_ucx_conn_free(ch->ux_conn->ux, ch->ux_off, ch->ux_len);
        ch->ux_conn->ux_open--;
        ch->ux_conn = NULL;
    }
    if (ch->state == S_UNSENT)
        ch->fj->unsent--;
    ch->state = S_DONE;
    kvti_job_part_done(ch->fj->job);
}

static void s_chunk_fail(s_chunk_t *ch, int code, const char *msg)
{
    kvti_job_t *j = ch->fj->job;
    const bus_token_tier_t *t = &j->tok->view.tiers[ch->tier];
    /* An imported token's worker may make no meta call to learn of a new leader:
     * the tier actor's leader fence ("... fenced: ...", tier_actor_auth.c) is how
     * it hears that the window went with the old one (kvtier.h "Failover"). */
    if (code == kvtier_StatusCode_STATUS_PERMISSION_DENIED && kvti_token_root(j->tok)->imported &&
        strstr(msg, " fenced: "))
        code = kvtier_StatusCode_STATUS_ABORTED;
    if (j->kind == BUS_TOKEN_PREFETCH)
        kvti_job_error(j, code, "%s of %u blocks at the scheduler (%s): %s: %s", s_op_name(j->kind),
                       ch->count, ch->fj->fs->c->leader, kvt_status_name(code), msg);
    else
        kvti_job_error(j, code, "%s of %u slots to tier %u (%s): %s: %s", s_op_name(j->kind),
                       ch->count, t->tier_id, t->endpoint, kvt_status_name(code), msg);
    s_chunk_end(ch);
}

/* A block that came over the network is the tier's, bit for bit: its bytes hash to
 * the checksum the tier sent with them (from the slot header); else it is never
 * delivered (the buffer is zeroed) and the key fails with INTERNAL. */
static bool s_arrived_intact(kvti_job_t *j, const s_chunk_t *ch, uint64_t want, uint32_t i,
                             uint32_t size)
{
    if (want == 0)
        return true; /* a tier actor that sends none: nothing to check against */
    struct iovec iov = {.iov_base = j->bufs[i], .iov_len = size};
    uint64_t sum = tier_checksum(&iov, 1);
    if (sum == want)
        return true;
    memset(j->bufs[i], 0, size);
    char hex[2 * KVT_KEY_BYTES + 1];
    for (int b = 0; b < KVT_KEY_BYTES; b++)
        snprintf(hex + 2 * b, 3, "%02x", j->tok->keys[i].b[b]);
    kvti_job_error(j, KVT_INTERNAL,
                   "block %s from tier %u failed its checksum in transit (got %016" PRIx64
                   ", the tier's %016" PRIx64 "): not delivered",
                   hex, j->tok->view.tiers[ch->tier].tier_id, sum, want);
    return false;
}

/* ---- transport ucx: the bytes of a chunk through the tier's staging region ------- */

static void s_ux_drop(s_conn_t *cn, const char *why);
static void s_send_chunk(s_frames_t *fs, s_chunk_t *ch);

/* A UCX get's bytes are in the caller's buffers: checked like frames' bytes. */
static void s_ux_fetched(void *arg, int status, const char *msg)
{
    s_chunk_t *ch = arg;
    s_fjob_t *fj = ch->fj;
    if (fj->fs->closing || ch->state != S_FETCHING)
        return;
    kvti_job_t *j = fj->job;
    if (status < 0) {
        s_chunk_fail(ch, KVT_UNAVAILABLE, msg);
        return;
    }
    for (uint32_t k = 0; k < ch->count; k++) {
        uint32_t i = fj->order[ch->start + k];
        bus_token_entry_t e;
        bus_token_entry_at(&j->tok->view, i, &e);
        j->tok->ok[i] = s_arrived_intact(j, ch, fj->sums[ch->start + k], i, e.size);
    }
    s_chunk_end(ch);
}

/* The ReadSlots reply of a UCX get: the blocks wait in the region; fetch them. */
static void s_ux_fetch(s_frames_t *fs, s_chunk_t *ch)
{
    s_fjob_t *fj = ch->fj;
    kvti_job_t *j = fj->job;
    bus_ucx_conn_t *u = ch->ux_conn->ux;
    char why[160];
    if (!u) {
        s_chunk_fail(ch, KVT_UNAVAILABLE, "the UCX connection was closed");
        return;
    }
    bool sums = fs->rep_arr.checksums.n == ch->count;
    uint64_t off = ch->ux_off;
    for (uint32_t k = 0; k < ch->count; k++) {
        uint32_t i = fj->order[ch->start + k];
        bus_token_entry_t e;
        bus_token_entry_at(&j->tok->view, i, &e);
        fj->sums[ch->start + k] = sums ? fs->rep_sums[k] : 0;
        if (bus_ucx_conn_get(u, j->bufs[i], e.size, off, why, sizeof why) < 0) {
            s_chunk_fail(ch, KVT_UNAVAILABLE, why);
            return;
        }
        off += e.size;
    }
    ch->state = S_FETCHING;
    ch->ux_deadline = j->deadline;
    if (bus_ucx_conn_flush(u, s_ux_fetched, ch, why, sizeof why) < 0)
        s_chunk_fail(ch, KVT_UNAVAILABLE, why);
}

static void s_chunk_reply_ok(s_frames_t *fs, s_chunk_t *ch, bus_reply_t *r)
{
    s_fjob_t *fj = ch->fj;
    kvti_job_t *j = fj->job;
    struct kvt_token *tok = j->tok;
    if (j->kind == BUS_TOKEN_PUT) {
        for (uint32_t k = 0; k < ch->count; k++)
            tok->ok[fj->order[ch->start + k]] = true;
        return;
    }
    if (j->kind == BUS_TOKEN_PREFETCH) {
        bool all = fj->arr.mask.n == ch->count;
        uint32_t refused = 0;
        for (uint32_t k = 0; k < ch->count; k++) {
            tok->ok[fj->order[ch->start + k]] = all && fj->mask[k];
            refused += all && !fj->mask[k];
        }
        if (!all)
            kvti_job_error(j, KVT_INTERNAL, "CopyPrefetch reply has %u flags for %u keys",
                           fj->arr.mask.n, ch->count);
        else if (refused)
            /* The copy failed, or the source no longer held the expected block in
             * that slot (the unchanged-source check): nothing to promote. */
            kvti_job_error(j, KVT_NOT_FOUND,
                           "CopyPrefetch: %u of %u blocks not copied (the copy failed or their "
                           "source changed)",
                           refused, ch->count);
        return;
    }
    if (ch->ux_conn && fs->rep_arr.sizes.n == 0) {
        s_ux_fetch(fs, ch); /* the chunk ends when the bytes are here */
        return;
    }
    if (fs->rep_arr.sizes.n != ch->count) {
        kvti_job_error(j, KVT_INTERNAL, "ReadSlots reply has %u frames for %u slots",
                       fs->rep_arr.sizes.n, ch->count);
        return;
    }
    for (uint32_t k = 0; k < ch->count; k++) {
        uint32_t i = fj->order[ch->start + k];
        bus_token_entry_t e;
        bus_token_entry_at(&tok->view, i, &e);
        zframe_t *f = r->msg ? bus_msg_payload(r->msg, k) : NULL;
        if (!f || zframe_size(f) != e.size) {
            kvti_job_error(j, KVT_INTERNAL, "ReadSlots frame %u is %zu bytes, the block is %u", k,
                           f ? zframe_size(f) : (size_t)0, e.size);
            continue;
        }
        memcpy(j->bufs[i], zframe_data(f), e.size);
        bool sums = fs->rep_arr.checksums.n == ch->count;
        tok->ok[i] = s_arrived_intact(j, ch, sums ? fs->rep_sums[k] : 0, i, e.size);
    }
}

static void s_chunk_done(void *arg, bus_reply_t *r)
{
    s_chunk_t *ch = arg;
    if (ch->ux_conn && r->status.code == kvtier_StatusCode_STATUS_INVALID_ARGUMENT &&
        strstr(r->status.message, "Probe with ucx again")) {
        /* the region went to another peer while this handle was idle: ask for a new
         * one and send the chunk again (a put stages its bytes again) */
        s_conn_t *cn = ch->ux_conn;
        cn->ux_open--;
        ch->ux_conn = NULL;
        ch->ux_staged = false;
        s_ux_drop(cn, "its staging region went to another peer");
        ch->state = S_UNSENT;
        ch->fj->unsent++;
        return;
    }
    if (r->status.code == kvtier_StatusCode_STATUS_TIMEOUT && ch->fj->job->kind != BUS_TOKEN_PREFETCH) {
        /* a reply with a frame above the connection's bound was dropped by ZeroMQ
         * (the connection with it): it ends here, as a timeout; say so. The tier may
         * still place bytes in the chunk's UCX range later: that region is given up */
        if (ch->ux_conn)
            s_ux_drop(ch->ux_conn, "a request over it timed out");
        const bus_token_tier_t *t = &ch->fj->job->tok->view.tiers[ch->tier];
        char msg[sizeof r->status.message + 160];
        snprintf(msg, sizeof msg,
                 "%s (or the reply had a frame above %" PRIu64
                 " bytes, this connection's bound for slots of %" PRIu64
                 " bytes: ZeroMQ drops such a reply and its connection)",
                 r->status.message, s_max_frame(t->slot_size), t->slot_size);
        s_chunk_fail(ch, (int)r->status.code, msg);
        return;
    }
    if (r->status.code != kvtier_StatusCode_STATUS_OK) {
        /* no reply: the tier may still place bytes in the chunk's range later, so
         * the region is given up (a new Probe gets another one) */
        if (ch->ux_conn && r->status.code == kvtier_StatusCode_STATUS_TIMEOUT)
            s_ux_drop(ch->ux_conn, "a request over it timed out");
        s_chunk_fail(ch, (int)r->status.code, r->status.message);
        return;
    }
    s_chunk_reply_ok(ch->fj->fs, ch, r);
    if (ch->state == S_SENT) /* else fetching over UCX, or already ended */
        s_chunk_end(ch);
}

/* Sends fs->env for chunk ch (replies decode into rep). */
static void s_send_env(s_frames_t *fs, bus_client_t *cl, s_chunk_t *ch, bus_arrays_t *arr,
                       uint32_t npayload, bus_arrays_t *rep)
{
    kvtier_Status st = {0};
    int rc = bus_client_send(cl, fs->env, arr, fs->payload, npayload, fs->c->timeout_ms, rep,
                             s_chunk_done, ch, NULL, &st);
    if (rc == 0) {
        ch->state = S_SENT;
        ch->fj->unsent--;
    } else if (st.code != kvtier_StatusCode_STATUS_UNAVAILABLE) {
        s_chunk_fail(ch, (int)st.code, st.message);
    }
}

/* ---- transport ucx: asking a tier endpoint, connecting, staging --------------------- */

static void s_ux_none(s_conn_t *cn)
{
    cn->ux_state = S_UX_NONE;
    cn->ux_retry = zclock_mono() + S_UX_RETRY_MS;
}

/* Closes the connection (pending UCX operations are called back with an error),
 * fails the chunks still moving bytes over it, and has the endpoint asked again. */
static void s_ux_drop(s_conn_t *cn, const char *why)
{
    s_frames_t *fs = cn->fs;
    bus_debug("client", "%s: UCX connection for %s dropped: %s", fs->c->name, cn->endpoint, why);
    bus_ucx_conn_close(&cn->ux);
    cn->ux_state = S_UX_UNKNOWN;
    for (uint32_t ji = 0; ji < fs->cap; ji++) {
        s_fjob_t *fj = &fs->fjobs[ji];
        if (!fj->job->used || fj->job->finished)
            continue;
        for (uint32_t k = 0; k < fj->n_chunks; k++) {
            s_chunk_t *ch = &fj->chunks[k];
            if (ch->ux_conn == cn && (ch->state == S_FLUSHING || ch->state == S_FETCHING))
                s_chunk_fail(ch, KVT_UNAVAILABLE, why);
        }
    }
}

static void s_ux_probed(void *arg, bus_reply_t *r)
{
    s_conn_t *cn = arg;
    s_frames_t *fs = cn->fs;
    char why[256];
    if (r->status.code != kvtier_StatusCode_STATUS_OK || !r->env ||
        r->env->which_body != kvtier_Envelope_probe_rep_tag) {
        bus_debug("client", "%s: %s: no UCX (frames): %s", fs->c->name, cn->endpoint,
                  r->status.message);
        s_ux_none(cn);
        return;
    }
    const kvtier_ProbeReply *p = &r->env->body.probe_rep;
    if (!p->ucx_address[0] || !p->ucx_region) {
        s_ux_none(cn); /* a tier actor without UCX: frames */
        return;
    }
    if (!fs->ux && !fs->ux_off && !(fs->ux = bus_ucx_peer_new(fs->c->name, why, sizeof why))) {
        fs->ux_off = true;
        bus_warn("client", "%s: %s advertises UCX but it cannot run here (frames instead): %s",
                 fs->c->name, cn->endpoint, why);
    }
    if (fs->ux_off) {
        s_ux_none(cn);
        return;
    }
    cn->ux = bus_ucx_conn_new(fs->ux, p->ucx_address, p->ucx_region, p->ucx_base, p->ucx_length,
                              p->ucx_rkey.bytes, p->ucx_rkey.size, why, sizeof why);
    if (!cn->ux) {
        bus_warn("client", "%s: %s: UCX not used (frames instead): %s", fs->c->name, cn->endpoint,
                 why);
        s_ux_none(cn);
        return;
    }
    cn->ux_state = S_UX_READY;
}

/* Whether chunk ch waits for its endpoint's UCX question: asks it (Probe{ucx})
 * the first time and every S_UX_RETRY_MS after it found none. */
static bool s_ux_waits(s_frames_t *fs, s_conn_t *cn)
{
    if (fs->ux_off)
        return false;
    if (cn->ux_state == S_UX_READY && bus_ucx_conn_failed(cn->ux))
        s_ux_drop(cn, "the peer went");
    if (cn->ux_state == S_UX_NONE && zclock_mono() >= cn->ux_retry && cn->ux_open == 0)
        cn->ux_state = S_UX_UNKNOWN;
    if (cn->ux_state == S_UX_UNKNOWN) {
        bus_env_init(fs->env, kvtier_Envelope_probe_req_tag, fs->c->name);
        fs->env->body.probe_req.ucx = true;
        kvtier_Status st = {0};
        fs->rep_arr.mask.n = 0;
        if (bus_client_send(cn->cl, fs->env, NULL, NULL, 0, fs->c->timeout_ms, &fs->rep_arr,
                            s_ux_probed, cn, NULL, &st) == 0)
            cn->ux_state = S_UX_PROBING;
        else if (st.code != kvtier_StatusCode_STATUS_UNAVAILABLE)
            s_ux_none(cn);
    }
    return cn->ux_state == S_UX_PROBING;
}

static void s_ux_flushed(void *arg, int status, const char *msg)
{
    s_chunk_t *ch = arg;
    if (ch->fj->fs->closing || ch->state != S_FLUSHING)
        return;
    if (status < 0) {
        s_chunk_fail(ch, KVT_UNAVAILABLE, msg);
        return;
    }
    ch->state = S_UNSENT; /* staged: the WriteSlots goes now (or when the endpoint takes it) */
    ch->ux_staged = true;
    ch->fj->unsent++;
    s_send_chunk(ch->fj->fs, ch);
}

/* A put's bytes go into the chunk's range first (checksums taken from the caller's
 * buffers as frames does); the WriteSlots follows the flush. */
static void s_ux_stage(s_chunk_t *ch)
{
    s_fjob_t *fj = ch->fj;
    kvti_job_t *j = fj->job;
    bus_ucx_conn_t *u = ch->ux_conn->ux;
    char why[160];
    uint64_t off = ch->ux_off;
    for (uint32_t k = 0; k < ch->count; k++) {
        uint32_t i = fj->order[ch->start + k];
        bus_token_entry_t e;
        bus_token_entry_at(&j->tok->view, i, &e);
        struct iovec iov = {.iov_base = j->bufs[i], .iov_len = e.size};
        j->tok->checksums[i] = tier_checksum(&iov, 1);
        if (bus_ucx_conn_put(u, j->bufs[i], e.size, off, why, sizeof why) < 0) {
            s_chunk_fail(ch, KVT_UNAVAILABLE, why);
            return;
        }
        off += e.size;
    }
    ch->state = S_FLUSHING;
    fj->unsent--;
    ch->ux_deadline = j->deadline;
    if (bus_ucx_conn_flush(u, s_ux_flushed, ch, why, sizeof why) < 0)
        s_chunk_fail(ch, KVT_UNAVAILABLE, why);
}

/* Takes a range of the endpoint's region for the chunk: 1 taken, 0 frames (no
 * UCX there, or a chunk larger than the region), -1 wait (the region is full). */
static int s_ux_claim(s_conn_t *cn, s_chunk_t *ch)
{
    if (ch->ux_conn)
        return 1;
    if (cn->ux_state != S_UX_READY)
        return 0;
    uint64_t bytes = 0;
    for (uint32_t k = 0; k < ch->count; k++) {
        bus_token_entry_t e;
        bus_token_entry_at(&ch->fj->job->tok->view, ch->fj->order[ch->start + k], &e);
        bytes += e.size;
    }
    if (bytes > bus_ucx_conn_length(cn->ux))
        return 0;
    if (bus_ucx_conn_alloc(cn->ux, bytes, &ch->ux_off) < 0)
        return -1;
    ch->ux_conn = cn;
    ch->ux_len = bytes;
    cn->ux_open++;
    return 1;
}

/* Sends one chunk. Leaves it UNSENT when the endpoint's bound or queue is full
 * (sent again by progress); fails it on any other error. Over UCX a put stages
 * its bytes first and is sent again when they are flushed. */
static void s_send_chunk(s_frames_t *fs, s_chunk_t *ch)
{
    s_fjob_t *fj = ch->fj;
    kvti_job_t *j = fj->job;
    struct kvt_token *tok = j->tok;
    const bus_token_tier_t *t = &tok->view.tiers[ch->tier];
    bool prefetch = j->kind == BUS_TOKEN_PREFETCH;
    char why[BUS_ENDPOINT_MAX + 128];
    s_conn_t *cn = prefetch ? s_conn(fs, fs->c->leader, BUS_MAX_FRAME0, why, sizeof why)
                            : s_conn(fs, t->endpoint, s_max_frame(t->slot_size), why, sizeof why);
    if (!cn) {
        s_chunk_fail(ch, KVT_UNAVAILABLE, why);
        return;
    }
    bus_client_t *cl = cn->cl;
    int ux = 0;
    if (!prefetch && !ch->ux_conn && s_ux_waits(fs, cn))
        return; /* asked; sent when the answer is in */
    if (!prefetch && (ux = s_ux_claim(cn, ch)) < 0)
        return; /* the region is full: sent when ranges are free again */
    if (ux && j->kind == BUS_TOKEN_PUT && !ch->ux_staged) {
        s_ux_stage(ch);
        return;
    }
    if (prefetch) {
        bus_env_init(fs->env, kvtier_Envelope_copy_prefetch_req_tag, fs->c->name);
        kvtier_CopyPrefetchRequest *cp = &fs->env->body.copy_prefetch_req;
        snprintf(cp->instance_id, sizeof cp->instance_id, "%s", tok->instance_id);
        snprintf(cp->request_id, sizeof cp->request_id, "%s", tok->request_id);
        cp->job_id = tok->prepare_id;
        cp->token_id = tok->token_id;
        fj->arr.mask.n = 0;
        s_send_env(fs, cl, ch, NULL, 0, &fj->arr);
        return;
    }
    bus_arrays_t arr = {0};
    arr.slots = (bus_u64s_t){.v = fs->slots, .n = ch->count, .cap = S_CHUNK_SLOTS};
    /* the prepare's token, as the scheduler sealed it: the tier actor's grant */
    arr.payload =
        (bus_blob_t){.data = tok->payload, .len = tok->payload_len, .cap = tok->payload_len};
    uint32_t npayload = 0;
    pb_size_t tag = j->kind == BUS_TOKEN_PUT ? kvtier_Envelope_write_slots_req_tag
                                             : kvtier_Envelope_read_slots_req_tag;
    bus_env_init(fs->env, tag, fs->c->name);
    for (uint32_t k = 0; k < ch->count; k++) {
        uint32_t i = fj->order[ch->start + k];
        bus_token_entry_t e;
        bus_token_entry_at(&tok->view, i, &e);
        fs->slots[k] = e.slot;
        fs->sizes[k] = e.size;
        memcpy(fs->keys[k], tok->keys[i].b, BUS_KEY_LEN);
        if (j->kind == BUS_TOKEN_PUT && !ux) {
            struct iovec iov = {.iov_base = j->bufs[i], .iov_len = e.size};
            tok->checksums[i] = tier_checksum(&iov, 1);
            fs->payload[npayload++] = (bus_payload_t){.data = j->bufs[i], .size = e.size};
        }
    }
    if (j->kind == BUS_TOKEN_PUT) {
        kvtier_WriteSlotsRequest *w = &fs->env->body.write_slots_req;
        w->tier_id = t->tier_id;
        w->epoch = t->epoch; /* fence: a restarted tier actor refuses an old token */
        w->segments = 1;
        if (ux) { /* the bytes are in the staging region already */
            w->ucx_region = bus_ucx_conn_region(cn->ux);
            w->ucx_offset = ch->ux_off;
        }
        arr.sizes = (bus_u64s_t){.v = fs->sizes, .n = ch->count, .cap = S_CHUNK_SLOTS};
    } else {
        kvtier_ReadSlotsRequest *rd = &fs->env->body.read_slots_req;
        rd->tier_id = t->tier_id;
        rd->epoch = t->epoch;
        rd->segments = 1;
        rd->checksums = true; /* each block's checksum comes back: verified on arrival */
        if (ux) {             /* the tier copies the blocks into the region; fetched on the reply */
            rd->ucx_region = bus_ucx_conn_region(cn->ux);
            rd->ucx_offset = ch->ux_off;
        }
        arr.sizes = (bus_u64s_t){.v = fs->sizes, .n = ch->count, .cap = S_CHUNK_SLOTS};
        arr.keys = (bus_keys_t){.keys = fs->keys, .n = ch->count, .cap = S_CHUNK_SLOTS};
    }
    s_send_env(fs, cl, ch, &arr, npayload, &fs->rep_arr);
}

/* ---- moving a job ----------------------------------------------------------------- */

/* Groups the keys of this transport's tiers by the tier they are sent to (key
 * order within a tier; a counting sort, tiers are few) and cuts the groups into
 * chunks, each one part of the job. */
static void s_plan_chunks(s_fjob_t *fj, const bool mine[BUS_TOKEN_MAX_TIERS])
{
    kvti_job_t *j = fj->job;
    struct kvt_token *tok = j->tok;
    fj->n_chunks = 0;
    if (j->kind == BUS_TOKEN_PREFETCH) { /* one CopyPrefetch: every key, token order */
        uint32_t n = 0;
        for (uint32_t i = 0; i < tok->n; i++) {
            bus_token_entry_t e;
            bus_token_entry_at(&tok->view, i, &e);
            if (mine[e.tier])
                fj->order[n++] = i;
        }
        if (n)
            fj->chunks[fj->n_chunks++] = (s_chunk_t){.fj = fj, .start = 0, .count = n};
        fj->unsent = fj->n_chunks;
        j->open += fj->n_chunks;
        return;
    }
    uint32_t start[BUS_TOKEN_MAX_TIERS + 1] = {0};
    uint32_t n_frames = 0;
    for (uint32_t i = 0; i < tok->n; i++) {
        bus_token_entry_t e;
        bus_token_entry_at(&tok->view, i, &e);
        if (mine[e.tier]) {
            start[e.tier + 1]++;
            n_frames++;
        }
    }
    for (uint32_t t = 1; t <= BUS_TOKEN_MAX_TIERS; t++)
        start[t] += start[t - 1];
    for (uint32_t i = 0; i < tok->n; i++) {
        bus_token_entry_t e;
        bus_token_entry_at(&tok->view, i, &e);
        if (mine[e.tier])
            fj->order[start[e.tier]++] = i;
    }
    s_chunk_t *cur = NULL;
    uint64_t bytes = 0;
    for (uint32_t k = 0; k < n_frames; k++) {
        bus_token_entry_t e;
        bus_token_entry_at(&tok->view, fj->order[k], &e);
        if (!cur || cur->tier != e.tier || cur->count == S_CHUNK_SLOTS ||
            bytes + e.size > S_CHUNK_BYTES) {
            cur = &fj->chunks[fj->n_chunks++];
            *cur = (s_chunk_t){.fj = fj, .tier = e.tier, .start = k};
            bytes = 0;
        }
        cur->count++;
        bytes += e.size;
    }
    fj->unsent = fj->n_chunks;
    j->open += fj->n_chunks;
}

/* Every kind: plan the chunks and send what the endpoints take now. */
static void s_move(void *xs, kvti_job_t *j, const bool mine[BUS_TOKEN_MAX_TIERS])
{
    s_frames_t *fs = xs;
    s_fjob_t *fj = &fs->fjobs[j - fs->fjobs[0].job];
    s_plan_chunks(fj, mine);
    for (uint32_t k = 0; k < fj->n_chunks; k++)
        if (fj->chunks[k].state == S_UNSENT)
            s_send_chunk(fs, &fj->chunks[k]);
}

/* ---- progress: send what waits, receive what arrived, expire what is due ---------- */

static void s_send_pending(s_frames_t *fs)
{
    int64_t now = zclock_mono();
    for (uint32_t ji = 0; ji < fs->cap; ji++) {
        s_fjob_t *fj = &fs->fjobs[ji];
        kvti_job_t *j = fj->job;
        if (!j->used || j->finished)
            continue;
        for (uint32_t k = 0; fs->ux && k < fj->n_chunks; k++) { /* UCX phases past due */
            s_chunk_t *ch = &fj->chunks[k];
            if ((ch->state == S_FLUSHING || ch->state == S_FETCHING) && now >= ch->ux_deadline)
                s_ux_drop(ch->ux_conn, "its bytes did not move within the timeout");
        }
        if (j->finished || fj->unsent == 0)
            continue;
        for (uint32_t k = 0; k < fj->n_chunks && fj->unsent > 0; k++) {
            s_chunk_t *ch = &fj->chunks[k];
            if (ch->state != S_UNSENT)
                continue;
            if (now >= j->deadline) {
                s_chunk_fail(ch, KVT_TIMEOUT,
                             "not sent within the timeout: the tier endpoint's request bound "
                             "or send queue stayed full");
                continue;
            }
            s_send_chunk(fs, ch);
            if (ch->state == S_UNSENT)
                break; /* that endpoint is full: try again later */
        }
    }
}

static int64_t s_next_due(s_frames_t *fs)
{
    int64_t due = -1;
    for (uint32_t i = 0; i < fs->n_conns; i++) {
        int64_t t = bus_client_next_timeout_ms(fs->conns[i].cl);
        if (t >= 0 && (due < 0 || t < due))
            due = t;
    }
    int64_t now = zclock_mono();
    for (uint32_t ji = 0; ji < fs->cap; ji++) {
        kvti_job_t *j = fs->fjobs[ji].job;
        for (uint32_t k = 0; fs->ux && j->used && !j->finished && k < fs->fjobs[ji].n_chunks; k++) {
            const s_chunk_t *ch = &fs->fjobs[ji].chunks[k];
            if (ch->state == S_FLUSHING || ch->state == S_FETCHING) {
                int64_t t = ch->ux_deadline > now ? ch->ux_deadline - now : 0;
                if (due < 0 || t < due)
                    due = t;
            }
        }
        if (j->used && !j->finished && fs->fjobs[ji].unsent > 0) {
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

static bool s_anything_open(s_frames_t *fs)
{
    for (uint32_t i = 0; i < fs->cap; i++)
        if (fs->fjobs[i].job->used && !fs->fjobs[i].job->finished)
            return true;
    return false;
}

static void s_progress(void *xs, int wait_ms)
{
    s_frames_t *fs = xs;
    s_send_pending(fs);
    zmq_pollitem_t items[S_MAX_CONNS + 1];
    for (uint32_t i = 0; i < fs->n_conns; i++)
        items[i] =
            (zmq_pollitem_t){zsock_resolve(bus_client_sock(fs->conns[i].cl)), 0, ZMQ_POLLIN, 0};
    int n = (int)fs->n_conns;
    long timeout = wait_ms;
    int64_t due = s_next_due(fs);
    if (due >= 0 && (timeout < 0 || due < timeout))
        timeout = (long)due;
    if (fs->ux) { /* UCX: its event fd beside the sockets; pending events: no sleep */
        if (bus_ucx_peer_progress(fs->ux) == 0)
            timeout = 0;
        items[n++] = (zmq_pollitem_t){NULL, bus_ucx_peer_fd(fs->ux), ZMQ_POLLIN, 0};
    }
    if (fs->n_conns > 0 && s_anything_open(fs))
        (void)zmq_poll(items, n, timeout);
    if (fs->ux)
        (void)bus_ucx_peer_progress(fs->ux);
    for (uint32_t i = 0; i < fs->n_conns; i++)
        bus_client_dispatch(fs->conns[i].cl, 0);
    s_send_pending(fs);
}

const kvti_transport_t kvti_transport_frames = {
    .name = "frames",
    .open = s_open,
    .close = s_close,
    .reserve = s_reserve,
    .put = s_move,
    .get = s_move,
    .prefetch = s_move,
    .progress = s_progress,
};
