/* publisher.c — the publisher actor (rules and protocol in publisher.h): a PULL
 * of batches from the scheduler, an XPUB that publishes them, a ring of the
 * last ones and a ROUTER that replays from it (and serves snapshots of the
 * mirror), and optionally the vLLM stream (XPUB, ring, ROUTER), in one zpoller
 * loop. Every turn serves each socket non-blocking with a bounded budget, so no
 * socket starves another and the pipe is answered between turns.
 *
 * Owns the rings (entries allocated at start; payloads are ZeroMQ messages,
 * shared with the sockets by reference count), the mirror and the decode
 * scratch (allocated at start), and at most PUBLISHER_MAX_REPLAYS cursors (a
 * fixed table). Never blocks on a socket, never trusts a frame it reads: a
 * payload that does not decode is published all the same, and only makes the
 * mirror stale.
 *
 * A cursor's lifecycle (one table; a free slot is S_FREE; kind fixed at start):
 *
 *   kind      state     event                                 action / next
 *   any       S_FREE    valid request, a slot free            end=last seq   -> S_SENDING
 *   REPLAY    S_SENDING next <= evicted_upto (batches lost)   GAP(oldest), next=oldest
 *   REPLAY    S_SENDING a ring batch with seq in [next, end]  BATCH, next=seq+1
 *   REPLAY    S_SENDING nothing left up to end                END(end+1)     -> S_FREE
 *   SNAPSHOT  S_SENDING head not sent                         SNAPSHOT(end, n)
 *   SNAPSHOT  S_SENDING locations left                        BLOCKS(page), pos += page
 *   SNAPSHOT  S_SENDING none left                             END(end+1)     -> S_FREE
 *   VLLM      S_SENDING a vLLM ring batch in [next, end]      [seq][payload], next=seq+1
 *   VLLM      S_SENDING nothing left up to end                [-1][""]       -> S_FREE
 *   any       S_SENDING ROUTER full (EAGAIN)                  retry next turn
 *   any       S_SENDING peer gone, or stalled stall_ms        replay_errors  -> S_FREE
 */
#include "publisher.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_actor.h"
#include "bus_arrays.h"
#include "bus_curve.h"
#include "bus_endpoint.h"
#include "bus_log.h"
#include "events_vllm.h"
#include "publisher_mirror.h"
#include "tier_mem.h"

#define S_LOG "publisher"
#define S_INPUT_PER_TURN 256   /* input batches taken per loop turn */
#define S_SUBS_PER_TURN 256    /* XPUB subscription messages per turn */
#define S_REQUESTS_PER_TURN 16 /* replay requests per turn */
#define S_RETRY_MS 5           /* wait when every replay is held by a full ROUTER */
#define S_DEC_TOKENS                                                                               \
    (1u << 20) /* token ids of one decoded batch (4 MiB; a scheduler batch has at most 262,144) */
#define S_ROUTING_ID_MAX 256        /* ZeroMQ routing ids are 1..255 bytes */
#define S_REQUEST_FRAMES 4          /* frames kept of a request: id, [delimiter], verb, seq */
#define S_XPUB_MAXMSG 4096          /* longest subscription message accepted over tcp */
#define S_ROUTER_MAXMSG 1024        /* longest replay request frame accepted over tcp */
#define S_SNAPSHOT_PAGE_KEYS 4096u  /* locations per snapshot page */
#define S_SNAPSHOT_PAGE_EVENTS 256u /* BlockStored events per snapshot page */

_Static_assert(PUBLISHER_REPLAY_PER_TURN >= PUBLISHER_MAX_REPLAYS,
               "every replay in progress sends at least one batch per turn");

typedef struct {
    uint64_t seq;
    uint8_t topic_len;
    char topic[PUBLISHER_TOPIC_MAX];
    zmq_msg_t payload; /* the received message; copies share its data */
} s_entry_t;

/* The last batches of one stream, bounded by count and bytes, oldest at head. */
typedef struct {
    s_entry_t *e; /* cap entries */
    uint32_t cap, head, count;
    uint64_t bytes, max_bytes;
    bool have_evicted;
    uint64_t evicted_upto; /* highest seq no longer in the ring (when have_evicted) */
} s_ring_t;

typedef enum { S_FREE = 0, S_SENDING } s_replay_state_t;

/* What a cursor sends: a replay of the ring, a snapshot of the mirror (both on
 * the kvtier ROUTER), or a replay of the vLLM ring in vLLM's framing. */
typedef enum { S_REPLAY = 0, S_SNAPSHOT, S_VLLM_REPLAY } s_replay_kind_t;

typedef struct {
    s_replay_state_t state;
    s_replay_kind_t kind;
    uint8_t id[S_ROUTING_ID_MAX];
    size_t id_len;
    bool delim;                        /* vLLM replay: the request had an empty delimiter */
    uint64_t next;                     /* the lowest seq not yet sent */
    uint64_t end;                      /* the last seq published when the request came */
    int64_t last_progress;             /* zclock_mono of the last message sent */
    publisher_mirror_loc_t *locs;      /* snapshot: the mirror copied at the request */
    uint32_t n_locs, pos;              /* snapshot: locations, the next one to send */
    char (*inst)[BUS_INSTANCE_ID_MAX]; /* snapshot: the instance ids, copied with them */
    uint32_t n_inst;
    bool head_sent; /* snapshot: the SNAPSHOT message went */
} s_replay_t;

typedef struct {
    zsock_t *pipe;
    zsock_t *input; /* PULL */
    zsock_t *xpub;
    zsock_t *router; /* NULL: no replay socket */
    zpoller_t *poller;
    bool terminated;
    char name[64];
    char xpub_ep[BUS_ENDPOINT_MAX];
    char replay_ep[BUS_ENDPOINT_MAX];
    uint64_t first_seq_hint;
    uint32_t stall_ms;
    s_ring_t ring;
    bool have_last;
    s_replay_t replays[PUBLISHER_MAX_REPLAYS];
    uint32_t n_replays;
    uint32_t rr;         /* replay served first in the next turn */
    bool replay_blocked; /* the last turn sent nothing for any replay */
    publisher_stats_t st;
    /* derived streams: decoded batches feed the mirror and the vLLM encoding */
    publisher_mirror_t *mirror;        /* NULL: no replay socket and no vLLM stream */
    bus_event_t *dec;                  /* BUS_MAX_EVENTS decoded events */
    bus_keys_t dec_keys;               /* their keys */
    bus_u32s_t dec_tokens;             /* their token ids (BlockStored) */
    bus_event_t *page;                 /* S_SNAPSHOT_PAGE_EVENTS, a snapshot page's events */
    uint8_t (*page_keys)[BUS_KEY_LEN]; /* S_SNAPSHOT_PAGE_KEYS */
    zsock_t *vxpub;                    /* NULL: no vLLM stream */
    zsock_t *vrouter;                  /* NULL: no vLLM replay socket */
    char vxpub_ep[BUS_ENDPOINT_MAX];
    char vreplay_ep[BUS_ENDPOINT_MAX];
    events_vllm_layout_t vlayout;
    s_ring_t vring;
    /* keys_only (publisher_config_t): the keys allowed besides this process's */
    bool keys_only;
    char (*keys)[BUS_CURVE_KEY_TXT];
    uint32_t n_keys;
    uint64_t vlast; /* the vLLM stream's last seq (skipped ones included) */
    msgpack_sbuffer vbuf;
} self_t;

/* ---- helpers ---- */

/* Receives one whole message from SOCK without waiting: its first MAX parts in
 * PARTS (initialised, the caller closes them), the rest read and dropped. The
 * number of parts, or 0 when nothing was waiting. */
static int s_recv_parts(zsock_t *sock, zmq_msg_t *parts, int max)
{
    void *h = zsock_resolve(sock);
    int n = 0;
    bool more = true;
    while (more) {
        zmq_msg_t scratch;
        zmq_msg_t *m = n < max ? &parts[n] : &scratch;
        zmq_msg_init(m);
        if (zmq_msg_recv(m, h, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(m);
            break; /* EAGAIN before the first part: nothing; after: not possible */
        }
        more = zmq_msg_more(m);
        if (m == &scratch)
            zmq_msg_close(m);
        n++;
    }
    return n;
}

static void s_close_parts(zmq_msg_t *parts, int n, int max)
{
    for (int i = 0; i < n && i < max; i++)
        zmq_msg_close(&parts[i]);
}

/* ---- ring ---- */

static s_entry_t *s_ring_at(s_ring_t *r, uint32_t i)
{
    return &r->e[(r->head + i) % r->cap];
}

static void s_ring_evict(s_ring_t *r)
{
    s_entry_t *e = s_ring_at(r, 0);
    r->bytes -= e->topic_len + zmq_msg_size(&e->payload);
    r->have_evicted = true;
    r->evicted_upto = e->seq;
    zmq_msg_close(&e->payload);
    r->head = (r->head + 1) % r->cap;
    r->count--;
}

/* Keeps the batch (moving PAYLOAD in) after evicting what the bounds require. */
static void s_ring_push(s_ring_t *r, const char *topic, size_t tlen, uint64_t seq,
                        zmq_msg_t *payload)
{
    uint64_t size = tlen + zmq_msg_size(payload);
    if (size > r->max_bytes) {
        while (r->count)
            s_ring_evict(r);
        r->have_evicted = true;
        r->evicted_upto = seq;
        return; /* the caller closes PAYLOAD */
    }
    while (r->count == r->cap || r->bytes + size > r->max_bytes)
        s_ring_evict(r);
    s_entry_t *e = s_ring_at(r, r->count);
    e->seq = seq;
    e->topic_len = (uint8_t)tlen;
    memcpy(e->topic, topic, tlen);
    zmq_msg_init(&e->payload);
    zmq_msg_move(&e->payload, payload);
    r->count++;
    r->bytes += size;
}

/* Index of the oldest entry with seq >= SEQ (count when none). */
static uint32_t s_ring_find(s_ring_t *r, uint64_t seq)
{
    uint32_t lo = 0, hi = r->count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s_ring_at(r, mid)->seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int s_ring_init(s_ring_t *r, uint32_t cap, uint64_t max_bytes)
{
    *r = (s_ring_t){.cap = cap, .max_bytes = max_bytes};
    r->e = calloc(cap, sizeof *r->e);
    return r->e ? 0 : -1;
}

static void s_ring_fini(s_ring_t *r)
{
    while (r->e && r->count)
        s_ring_evict(r);
    free(r->e);
    r->e = NULL;
}

/* ---- input ---- */

static void s_bad(self_t *self, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_bad(self_t *self, const char *fmt, ...)
{
    if (self->st.bad_input++ % PUBLISHER_LOG_EVERY != 0)
        return;
    char why[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    bus_warn(S_LOG, "%s: input batch dropped: %s (%" PRIu64 " dropped so far; logged once per %u)",
             self->name, why, self->st.bad_input, PUBLISHER_LOG_EVERY);
}

static bool s_topic_ok(const uint8_t *t, size_t n)
{
    if (n < 1 || n > PUBLISHER_TOPIC_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (t[i] < 0x20 || t[i] > 0x7e)
            return false;
    return true;
}

/* Sends [topic][seq][payload] on XPUB (payload shared, not moved): true when sent. */
static bool s_publish_on(self_t *self, zsock_t *xpub, const uint8_t *topic, size_t tlen,
                         const uint8_t *seq_be, zmq_msg_t *payload)
{
    void *h = zsock_resolve(xpub);
    zmq_msg_t out;
    zmq_msg_init(&out);
    zmq_msg_copy(&out, payload);
    /* XPUB never blocks (NODROP off): a send fails only when the context ends */
    if (zmq_send(h, topic, tlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(h, seq_be, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_msg_send(&out, h, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&out);
        bus_debug(S_LOG, "%s: XPUB send failed: %s", self->name, zmq_strerror(errno));
        return false;
    }
    return true;
}

/* ---- derived streams: the mirror and the vLLM encoding ---- */

/* The vLLM stream's next seq in EPOCH's range: one per batch sent, one more
 * skipped for each batch it could not derive (its subscribers see that gap). */
static uint64_t s_vllm_next(self_t *self, uint64_t epoch)
{
    uint64_t base = epoch << BUS_EVENTS_SEQ_SHIFT;
    if (self->vlast < base)
        self->vlast = base;
    return ++self->vlast;
}

/* Publishes vbuf on the vLLM XPUB under TOPIC and keeps it in the vLLM ring. */
static void s_vllm_send(self_t *self, const char *topic, size_t tlen, uint64_t epoch)
{
    zmq_msg_t m;
    if (zmq_msg_init_size(&m, self->vbuf.size) != 0) {
        (void)s_vllm_next(self, epoch); /* a gap */
        return;
    }
    memcpy(zmq_msg_data(&m), self->vbuf.data, self->vbuf.size);
    uint64_t seq = s_vllm_next(self, epoch);
    uint8_t be[8];
    bus_events_seq_put(be, seq);
    if (s_publish_on(self, self->vxpub, (const uint8_t *)topic, tlen, be, &m))
        self->st.vllm_published++;
    self->st.vllm_last_seq = seq;
    s_ring_push(&self->vring, topic, tlen, seq, &m);
    zmq_msg_close(&m);
}

/* A tier went down: vLLM has no tier event, so its blocks (the mirror's
 * locations on it, before the mirror drops them) go out as BlockRemoved, one
 * batch per run of (instance, medium) of at most S_SNAPSHOT_PAGE_KEYS keys. */
static void s_vllm_tier_down(self_t *self, uint64_t epoch, double ts, uint32_t tier)
{
    publisher_mirror_loc_t *locs = NULL;
    uint32_t n = 0;
    if (publisher_mirror_stale(self->mirror) ||
        publisher_mirror_copy(self->mirror, &locs, &n) < 0) {
        (void)s_vllm_next(self, epoch); /* what the tier held is not known: a gap */
        return;
    }
    for (uint32_t i = 0, j; i < n; i = j) {
        const publisher_mirror_loc_t *f = &locs[i];
        uint32_t k = 0;
        for (j = i; j < n && k < S_SNAPSHOT_PAGE_KEYS && locs[j].instance == f->instance &&
                    locs[j].tier_id == f->tier_id && locs[j].medium == f->medium;
             j++)
            if (f->tier_id == tier)
                memcpy(self->page_keys[k++], locs[j].key, BUS_KEY_LEN);
        if (!k)
            continue;
        msgpack_sbuffer_clear(&self->vbuf);
        char topic[PUBLISHER_TOPIC_MAX + 1];
        int tl = snprintf(topic, sizeof topic, "removed/%.64s",
                          publisher_mirror_instance(self->mirror, f->instance));
        if (events_vllm_removed(self->vlayout, ts, (const uint8_t(*)[BUS_KEY_LEN])self->page_keys,
                                k, f->medium, &self->vbuf) < 0)
            (void)s_vllm_next(self, epoch);
        else
            s_vllm_send(self, topic, (size_t)tl, epoch);
    }
    free(locs);
}

/* A batch is a run of one kind (sched_events.h): a tier-down batch holds only
 * TierChanged events, so expanding them before the batch's own vLLM events (and
 * before the mirror drops the tier) loses nothing. */
static void s_vllm_derive(self_t *self, const char *topic, size_t tlen, const kvtier_EventBatch *b,
                          uint32_t n)
{
    double ts = n ? (double)self->dec[0].ev.ts_us / 1e6 : 0.0;
    for (uint32_t i = 0; i < n; i++) {
        const kvtier_Event *e = &self->dec[i].ev;
        if (e->which_kind == kvtier_Event_tier_changed_tag && !e->kind.tier_changed.up)
            s_vllm_tier_down(self, b->epoch, ts, e->kind.tier_changed.tier_id);
    }
    if (!events_vllm_count(self->dec, n))
        return;
    msgpack_sbuffer_clear(&self->vbuf);
    if (events_vllm_batch(self->vlayout, self->dec, n, &self->vbuf) < 0)
        (void)s_vllm_next(self, b->epoch);
    else
        s_vllm_send(self, topic, tlen, b->epoch);
}

/* Batch SEQ (just published) feeds the mirror and the vLLM stream. GAP: batches
 * before it never arrived, so neither can be whole from here. */
static void s_derive(self_t *self, const char *topic, size_t tlen, uint64_t seq, zmq_msg_t *payload,
                     bool gap)
{
    if (!self->mirror)
        return;
    uint64_t epoch = seq >> BUS_EVENTS_SEQ_SHIFT;
    if (gap) {
        publisher_mirror_lost(self->mirror, seq - 1,
                              "the scheduler dropped batches before it: its events.queue was full");
        if (self->vxpub)
            (void)s_vllm_next(self, epoch);
    }
    /* lookups (the most frequent batches, and the longest) change neither the
     * mirror nor the vLLM stream: the scheduler puts them, and only them, under
     * lookup/ (sched_events.h), so they are not decoded */
    if (tlen >= 7 && memcmp(topic, "lookup/", 7) == 0)
        return;
    kvtier_EventBatch b;
    uint32_t n = 0;
    kvtier_Status st;
    if (bus_events_decode_tokens(zmq_msg_data(payload), zmq_msg_size(payload), &b, self->dec,
                                 BUS_MAX_EVENTS, &n, &self->dec_keys,
                                 self->vxpub ? &self->dec_tokens : NULL, &st) < 0) {
        self->st.undecodable++;
        publisher_mirror_lost(self->mirror, seq, "not a readable EventBatch");
        if (self->vxpub)
            (void)s_vllm_next(self, epoch);
        return;
    }
    if (self->vxpub)
        s_vllm_derive(self, topic, tlen, &b, n);
    publisher_mirror_apply(self->mirror, seq, &b, self->dec, n);
}

/* One input message of N parts (the first 3 in P). */
static void s_input_one(self_t *self, zmq_msg_t *p, int n)
{
    self->st.received++;
    if (n != 3) {
        s_bad(self, "%d frames, expected 3: [topic][8-byte BE seq][payload]", n);
        return;
    }
    const uint8_t *topic = zmq_msg_data(&p[0]);
    size_t tlen = zmq_msg_size(&p[0]);
    if (!s_topic_ok(topic, tlen)) {
        s_bad(self, "topic of %zu bytes: need 1..%u bytes of printable ASCII", tlen,
              PUBLISHER_TOPIC_MAX);
        return;
    }
    if (zmq_msg_size(&p[1]) != 8) {
        s_bad(self, "seq frame of %zu bytes, expected 8 (big-endian)", zmq_msg_size(&p[1]));
        return;
    }
    if (zmq_msg_size(&p[2]) > BUS_MAX_BLOB) {
        s_bad(self, "payload of %zu bytes, above %u", zmq_msg_size(&p[2]), BUS_MAX_BLOB);
        return;
    }
    const uint8_t *seq_be = zmq_msg_data(&p[1]);
    uint64_t seq = bus_events_seq_get(seq_be);
    if (seq == UINT64_MAX) {
        s_bad(self, "seq %" PRIu64 " is reserved (a replay's END carries seq + 1)", seq);
        return;
    }
    if (self->have_last && seq <= self->st.last_seq) {
        s_bad(self, "seq %" PRIu64 " not above the last one, %" PRIu64, seq, self->st.last_seq);
        return;
    }
    uint64_t expected = self->have_last ? self->st.last_seq + 1 : self->first_seq_hint;
    bool gap = (self->have_last || self->first_seq_hint) && seq > expected;
    if (gap) {
        self->st.gaps_in++;
        self->st.missing_in += seq - expected;
    }
    self->have_last = true;
    self->st.last_seq = seq;
    if (s_publish_on(self, self->xpub, topic, tlen, seq_be, &p[2]))
        self->st.published++;
    s_derive(self, (const char *)topic, tlen, seq, &p[2], gap);
    s_ring_push(&self->ring, (const char *)topic, tlen, seq, &p[2]);
}

static void s_on_input(self_t *self)
{
    for (int k = 0; k < S_INPUT_PER_TURN; k++) {
        zmq_msg_t p[3];
        int n = s_recv_parts(self->input, p, 3);
        if (n == 0)
            return;
        s_input_one(self, p, n);
        s_close_parts(p, n, 3);
    }
}

/* ---- who may read (keys_only) ---- */

/* The CURVE key of the connection message M came on (zauth's User-Id), or NULL. */
static const char *s_peer_key(zmq_msg_t *m)
{
    const char *uid = zmq_msg_gets(m, "User-Id");
    return uid && bus_curve_is_z85(uid) ? uid : NULL;
}

/* May the peer that sent M read the streams? Always without keys_only; with it,
 * only a key granted every instance, or this process's own (its metrics actor,
 * the live optimizer started with the coordinator's pair). */
static bool s_peer_allowed(const self_t *self, zmq_msg_t *m, const char **key)
{
    *key = NULL;
    if (!self->keys_only)
        return true;
    const char *k = s_peer_key(m);
    *key = k;
    if (!k)
        return false;
    const bus_curve_client_t *own = bus_curve_process_keys();
    if (own && !strcmp(k, own->public_key))
        return true;
    for (uint32_t i = 0; i < self->n_keys; i++)
        if (!strcmp(self->keys[i], k))
            return true;
    return false;
}

static void s_refused(self_t *self, const char *what, const char *key)
{
    if (self->st.refused++ % PUBLISHER_LOG_EVERY == 0)
        bus_warn(S_LOG,
                 "%s: %s refused: key %s is not granted \"*\" (security.curve.instances): the "
                 "event streams carry every instance's events (%" PRIu64
                 " refused so far; logged once per %u)",
                 self->name, what, key ? key : "(none: not a CURVE connection)", self->st.refused,
                 PUBLISHER_LOG_EVERY);
}

/* ---- subscriptions ---- */

/* One subscription message M of an XPUB in manual mode (keys_only): applied for
 * the peer that sent it when it may read, else dropped. true when applied. */
static bool s_manual_sub(self_t *self, zsock_t *xpub, zmq_msg_t *m, const char *what)
{
    const uint8_t *d = zmq_msg_data(m);
    size_t n = zmq_msg_size(m);
    if (n < 1 || (d[0] != 0 && d[0] != 1))
        return false;
    const char *key;
    if (!s_peer_allowed(self, m, &key)) {
        if (d[0] == 1)
            s_refused(self, what, key);
        return false;
    }
    /* in manual mode this applies to the pipe the message came from (the last read) */
    zmq_setsockopt(zsock_resolve(xpub), d[0] == 1 ? ZMQ_SUBSCRIBE : ZMQ_UNSUBSCRIBE, d + 1, n - 1);
    return true;
}

static void s_on_xpub(self_t *self)
{
    for (int k = 0; k < S_SUBS_PER_TURN; k++) {
        zmq_msg_t m;
        int n = s_recv_parts(self->xpub, &m, 1);
        if (n == 0)
            return;
        const uint8_t *d = zmq_msg_data(&m);
        /* keys_only: an unsubscription without a key is libzmq's own, made when a
         * peer leaves (manual mode applies nothing for it); it is counted down,
         * though a refused peer's leaving looks the same (the count stays >= 0) */
        bool left = self->keys_only && n == 1 && zmq_msg_size(&m) >= 1 && d[0] == 0 &&
                    !s_peer_key(&m);
        bool counted = n == 1 && (!self->keys_only || left ||
                                  s_manual_sub(self, self->xpub, &m, "subscription"));
        if (counted && zmq_msg_size(&m) >= 1 && d[0] == 1)
            self->st.subscribers++;
        else if (counted && zmq_msg_size(&m) >= 1 && d[0] == 0 && self->st.subscribers > 0)
            self->st.subscribers--;
        zmq_msg_close(&m);
    }
}

/* ---- replay: sending ---- */

/* Sends [id][delim?][frames...] on the ROUTER: 0, or -1 with errno EAGAIN (the
 * peer's queue is full: nothing sent) or another error (the peer is gone). */
static int s_router_send_on(zsock_t *router, const uint8_t *id, size_t id_len, bool delim,
                            const void *const *data, const size_t *len, int n)
{
    void *h = zsock_resolve(router);
    if (zmq_send(h, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return -1;
    /* past the routing id the message is committed: its parts always go */
    if (delim)
        zmq_send(h, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    for (int i = 0; i < n; i++)
        zmq_send(h, data[i], len[i], (i + 1 < n ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT);
    return 0;
}

static int s_router_send(self_t *self, const uint8_t *id, size_t id_len, bool delim,
                         const void *const *data, const size_t *len, int n)
{
    return s_router_send_on(self->router, id, id_len, delim, data, len, n);
}

static int s_send_seq(self_t *self, s_replay_t *r, const char *verb, uint64_t seq)
{
    uint8_t be[8];
    bus_events_seq_put(be, seq);
    const void *d[2] = {verb, be};
    size_t l[2] = {strlen(verb), 8};
    return s_router_send(self, r->id, r->id_len, false, d, l, 2);
}

static int s_send_batch(self_t *self, s_replay_t *r, s_entry_t *e)
{
    void *h = zsock_resolve(self->router);
    uint8_t be[8];
    bus_events_seq_put(be, e->seq);
    const void *d[3] = {"BATCH", e->topic, be};
    size_t l[3] = {5, e->topic_len, 8};
    if (zmq_send(h, r->id, r->id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return -1;
    for (int i = 0; i < 3; i++)
        zmq_send(h, d[i], l[i], ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_msg_t out;
    zmq_msg_init(&out);
    zmq_msg_copy(&out, &e->payload);
    if (zmq_msg_send(&out, h, ZMQ_DONTWAIT) < 0)
        zmq_msg_close(&out);
    return 0;
}

static void s_replay_free(self_t *self, s_replay_t *r)
{
    free(r->locs);
    free(r->inst);
    r->locs = NULL;
    r->inst = NULL;
    r->state = S_FREE;
    self->n_replays--;
}

/* One page of snapshot R from r->pos: BlockStored events, one per run of equal
 * (instance, tier, medium, bytes, tokens), at most S_SNAPSHOT_PAGE_KEYS keys.
 * Encoded into *frame; the number of locations in it, or 0 on an encode failure. */
static uint32_t s_snapshot_page(self_t *self, s_replay_t *r, zframe_t **frame)
{
    uint32_t n_ev = 0, k = 0;
    uint64_t now_us = (uint64_t)zclock_time() * 1000;
    for (uint32_t i = r->pos; i < r->n_locs && k < S_SNAPSHOT_PAGE_KEYS;) {
        const publisher_mirror_loc_t *f = &r->locs[i];
        if (n_ev == S_SNAPSHOT_PAGE_EVENTS)
            break;
        bus_event_t *e = &self->page[n_ev++];
        memset(e, 0, sizeof *e);
        e->ev.ts_us = now_us;
        snprintf(e->ev.instance_id, sizeof e->ev.instance_id, "%s",
                 f->instance < r->n_inst ? r->inst[f->instance] : "");
        e->ev.which_kind = kvtier_Event_block_stored_tag;
        e->ev.kind.block_stored = (kvtier_BlockStored){.tier_id = f->tier_id,
                                                       .block_bytes = f->bytes,
                                                       .medium = (kvtier_Medium)f->medium,
                                                       .tokens_per_block = f->tokens};
        e->keys.keys = &self->page_keys[k];
        uint32_t first = k;
        for (; i < r->n_locs && k < S_SNAPSHOT_PAGE_KEYS && r->locs[i].instance == f->instance &&
               r->locs[i].tier_id == f->tier_id && r->locs[i].medium == f->medium &&
               r->locs[i].bytes == f->bytes && r->locs[i].tokens == f->tokens;
             i++)
            memcpy(self->page_keys[k++], r->locs[i].key, BUS_KEY_LEN);
        e->keys.n = e->keys.cap = k - first;
    }
    kvtier_EventBatch b = {.epoch = r->end >> BUS_EVENTS_SEQ_SHIFT};
    snprintf(b.source, sizeof b.source, "%s", self->name);
    kvtier_Status st;
    if (bus_events_encode(&b, self->page, n_ev, frame, &st) < 0) {
        bus_warn(S_LOG, "%s: snapshot page not encoded: %s", self->name, st.message);
        return 0;
    }
    return k;
}

/* One message of snapshot R (the protocol in publisher.h): 1 sent, 0 ended, -1 held. */
static int s_snapshot_step(self_t *self, s_replay_t *r)
{
    uint8_t be[8], cnt[8];
    if (!r->head_sent) {
        bus_events_seq_put(be, r->end);
        bus_events_seq_put(cnt, r->n_locs);
        const void *d[3] = {"SNAPSHOT", be, cnt};
        size_t l[3] = {8, 8, 8};
        if (s_router_send(self, r->id, r->id_len, false, d, l, 3) < 0)
            return -1;
        r->head_sent = true;
        return 1;
    }
    if (r->pos < r->n_locs) {
        zframe_t *frame = NULL;
        uint32_t k = s_snapshot_page(self, r, &frame);
        if (!k) {
            errno = EPROTO;
            return -1; /* given up below: the requester sees no END */
        }
        const void *d[2] = {"BLOCKS", zframe_data(frame)};
        size_t l[2] = {6, zframe_size(frame)};
        int rc = s_router_send(self, r->id, r->id_len, false, d, l, 2);
        zframe_destroy(&frame);
        if (rc < 0)
            return -1;
        r->pos += k;
        self->st.snapshot_blocks_sent += k;
        return 1;
    }
    if (s_send_seq(self, r, "END", r->end + 1) < 0)
        return -1;
    self->st.snapshots_served++;
    s_replay_free(self, r);
    return 0;
}

/* One message of a vLLM replay: [delim?][seq][payload] per batch, then the end
 * marker [delim?][-1][""] as vLLM's publisher sends it. */
static int s_vllm_replay_step(self_t *self, s_replay_t *r)
{
    s_ring_t *ring = &self->vring;
    uint32_t i = r->next <= r->end ? s_ring_find(ring, r->next) : ring->count;
    uint8_t be[8];
    if (i < ring->count && s_ring_at(ring, i)->seq <= r->end) {
        s_entry_t *e = s_ring_at(ring, i);
        bus_events_seq_put(be, e->seq);
        const void *d[2] = {be, zmq_msg_data(&e->payload)};
        size_t l[2] = {8, zmq_msg_size(&e->payload)};
        if (s_router_send_on(self->vrouter, r->id, r->id_len, r->delim, d, l, 2) < 0)
            return -1;
        r->next = e->seq + 1;
        return 1;
    }
    bus_events_seq_put(be, UINT64_MAX);
    const void *d[2] = {be, ""};
    size_t l[2] = {8, 0};
    if (s_router_send_on(self->vrouter, r->id, r->id_len, r->delim, d, l, 2) < 0)
        return -1;
    self->st.vllm_replays_served++;
    s_replay_free(self, r);
    return 0;
}

/* One message of replay R: 1 sent, 0 the replay ended, -1 held (EAGAIN). */
static int s_replay_step(self_t *self, s_replay_t *r)
{
    if (r->kind == S_SNAPSHOT)
        return s_snapshot_step(self, r);
    if (r->kind == S_VLLM_REPLAY)
        return s_vllm_replay_step(self, r);
    s_ring_t *ring = &self->ring;
    uint64_t oldest = ring->count ? s_ring_at(ring, 0)->seq : self->st.last_seq + 1;
    if (ring->have_evicted && r->next <= ring->evicted_upto && r->next <= r->end) {
        uint64_t to = oldest < r->end + 1 ? oldest : r->end + 1;
        if (s_send_seq(self, r, "GAP", to) < 0)
            return -1;
        r->next = to;
        return 1;
    }
    uint32_t i = r->next <= r->end ? s_ring_find(ring, r->next) : ring->count;
    if (i < ring->count && s_ring_at(ring, i)->seq <= r->end) {
        s_entry_t *e = s_ring_at(ring, i);
        if (s_send_batch(self, r, e) < 0)
            return -1;
        self->st.replay_batches_sent++;
        r->next = e->seq + 1;
        return 1;
    }
    if (s_send_seq(self, r, "END", r->end + 1) < 0)
        return -1;
    self->st.replays_served++;
    s_replay_free(self, r);
    return 0;
}

/* Sends up to BUDGET messages of R; the number sent. */
static uint32_t s_replay_serve(self_t *self, s_replay_t *r, uint32_t budget, int64_t now)
{
    uint32_t sent = 0;
    while (sent < budget && r->state == S_SENDING) {
        int rc = s_replay_step(self, r);
        if (rc < 0) {
            bool gone = errno != EAGAIN;
            if (gone || now - r->last_progress > (int64_t)self->stall_ms) {
                bus_warn(S_LOG, "%s: replay given up at seq %" PRIu64 ": %s", self->name, r->next,
                         gone ? "requester gone" : "requester not reading");
                self->st.replay_errors++;
                s_replay_free(self, r);
            }
            break;
        }
        sent++;
        r->last_progress = now;
    }
    return sent;
}

static void s_replays_service(self_t *self)
{
    if (!self->n_replays)
        return;
    int64_t now = zclock_mono();
    uint32_t share = PUBLISHER_REPLAY_PER_TURN / self->n_replays;
    uint32_t sent = 0;
    for (uint32_t k = 0; k < PUBLISHER_MAX_REPLAYS; k++) {
        s_replay_t *r = &self->replays[(self->rr + k) % PUBLISHER_MAX_REPLAYS];
        if (r->state == S_SENDING)
            sent += s_replay_serve(self, r, share, now);
    }
    self->rr = (self->rr + 1) % PUBLISHER_MAX_REPLAYS;
    self->replay_blocked = sent == 0;
}

/* ---- replay: requests ---- */

static void s_request_error(self_t *self, zmq_msg_t *id, bool delim, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void s_request_error(self_t *self, zmq_msg_t *id, bool delim, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    self->st.replay_errors++;
    bus_debug(S_LOG, "%s: replay request refused: %s", self->name, why);
    const void *d[2] = {"ERROR", why};
    size_t l[2] = {5, strlen(why)};
    /* a requester that is gone or not reading loses its answer */
    s_router_send(self, zmq_msg_data(id), zmq_msg_size(id), delim, d, l, 2);
}

/* The verb as text a person can read in an error: printable, bounded. */
static void s_verb_text(zmq_msg_t *m, char *out, size_t len)
{
    const uint8_t *d = zmq_msg_data(m);
    size_t n = zmq_msg_size(m), j = 0;
    for (size_t i = 0; i < n && i < 32 && j + 1 < len; i++)
        out[j++] = d[i] >= 0x20 && d[i] <= 0x7e ? (char)d[i] : '?';
    out[j] = '\0';
}

/* The cursor of requester ID on the vLLM ROUTER (VLLM) or the kvtier one: routing
 * ids are unique per socket only. */
static s_replay_t *s_replay_of(self_t *self, zmq_msg_t *id, bool vllm)
{
    size_t n = zmq_msg_size(id);
    for (uint32_t k = 0; k < PUBLISHER_MAX_REPLAYS; k++) {
        s_replay_t *r = &self->replays[k];
        if (r->state == S_SENDING && (r->kind == S_VLLM_REPLAY) == vllm && r->id_len == n &&
            memcmp(r->id, zmq_msg_data(id), n) == 0)
            return r;
    }
    return NULL;
}

static void s_replay_start(self_t *self, zmq_msg_t *id, uint64_t from)
{
    if (!self->have_last) {
        /* nothing published yet: the answer is END(from_seq) alone */
        s_replay_t tmp = {.id_len = zmq_msg_size(id)};
        memcpy(tmp.id, zmq_msg_data(id), tmp.id_len);
        if (s_send_seq(self, &tmp, "END", from) == 0)
            self->st.replays_served++;
        else
            self->st.replay_errors++;
        return;
    }
    s_replay_t *r = NULL;
    for (uint32_t k = 0; k < PUBLISHER_MAX_REPLAYS && !r; k++)
        if (self->replays[k].state == S_FREE)
            r = &self->replays[k];
    if (!r) /* the caller checked n_replays < PUBLISHER_MAX_REPLAYS */
        return;
    *r = (s_replay_t){.state = S_SENDING, .kind = S_REPLAY, .id_len = zmq_msg_size(id)};
    memcpy(r->id, zmq_msg_data(id), r->id_len);
    r->next = from;
    r->end = self->st.last_seq;
    r->last_progress = zclock_mono();
    self->n_replays++;
}

static s_replay_t *s_replay_slot(self_t *self)
{
    for (uint32_t k = 0; k < PUBLISHER_MAX_REPLAYS; k++)
        if (self->replays[k].state == S_FREE)
            return &self->replays[k];
    return NULL;
}

static uint32_t s_snapshots_active(const self_t *self)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < PUBLISHER_MAX_REPLAYS; k++)
        n += self->replays[k].state == S_SENDING && self->replays[k].kind == S_SNAPSHOT;
    return n;
}

/* ["SNAPSHOT"]: the mirror as it is now (copied, so the stream can go on),
 * and the seq it reflects. */
static void s_snapshot_start(self_t *self, zmq_msg_t *id)
{
    const char *stale = self->mirror ? publisher_mirror_stale(self->mirror) : NULL;
    if (!self->mirror || stale) {
        s_request_error(self, id, false,
                        "snapshot unavailable: %s; it is whole again at the next leader term. "
                        "Rebuild from the live stream instead",
                        stale ? stale : "this publisher keeps no mirror of the index");
        return;
    }
    if (s_snapshots_active(self) >= PUBLISHER_MAX_SNAPSHOTS) {
        s_request_error(self, id, false, "busy: %u snapshots in progress; retry after one ends",
                        PUBLISHER_MAX_SNAPSHOTS);
        return;
    }
    s_replay_t *r = s_replay_slot(self);
    publisher_mirror_loc_t *locs = NULL;
    uint32_t n = 0;
    char(*inst)[BUS_INSTANCE_ID_MAX] = NULL;
    uint32_t n_inst = 0;
    if (!r || publisher_mirror_copy(self->mirror, &locs, &n) < 0 ||
        publisher_mirror_copy_instances(self->mirror, &inst, &n_inst) < 0) {
        free(locs);
        s_request_error(self, id, false, "busy: no memory for a snapshot now; retry later");
        return;
    }
    *r = (s_replay_t){.state = S_SENDING, .kind = S_SNAPSHOT, .id_len = zmq_msg_size(id)};
    memcpy(r->id, zmq_msg_data(id), r->id_len);
    r->locs = locs;
    r->n_locs = n;
    r->inst = inst;
    r->n_inst = n_inst;
    r->end = self->st.last_seq;
    r->last_progress = zclock_mono();
    self->n_replays++;
}

/* One request of N parts (the first S_REQUEST_FRAMES in P; P[0] the routing id). */
static void s_request_one(self_t *self, zmq_msg_t *p, int n)
{
    zmq_msg_t *id = &p[0];
    if (n < 1 || zmq_msg_size(id) == 0 || zmq_msg_size(id) > S_ROUTING_ID_MAX)
        return; /* not from a peer the ROUTER can answer */
    /* a REQ puts an empty delimiter first: tell it why it cannot replay */
    bool delim = n >= 2 && zmq_msg_size(&p[1]) == 0;
    if (delim) {
        s_request_error(self, id, true,
                        "replay: use a DEALER, not a REQ (the answer is many messages); send "
                        "[\"REPLAY\"][8-byte big-endian from_seq]");
        return;
    }
    const char *key;
    if (!s_peer_allowed(self, &p[n >= 2 ? 1 : 0], &key)) {
        s_refused(self, "replay request", key);
        s_request_error(self, id, false,
                        "permission denied: key %s is not granted \"*\" in "
                        "security.curve.instances: the event streams carry every instance's "
                        "events, so only keys granted every instance may read them",
                        key ? key : "(none: not a CURVE connection)");
        return;
    }
    bool snapshot =
        n >= 2 && zmq_msg_size(&p[1]) == 8 && memcmp(zmq_msg_data(&p[1]), "SNAPSHOT", 8) == 0;
    if (snapshot && n != 2) {
        s_request_error(self, id, false, "snapshot: %d frames, expected 1: [\"SNAPSHOT\"]", n - 1);
        return;
    }
    if (!snapshot && n != 3) {
        s_request_error(self, id, false,
                        "replay: %d frames, expected 2: [\"REPLAY\"][8-byte big-endian from_seq] "
                        "(or 1: [\"SNAPSHOT\"])",
                        n - 1);
        return;
    }
    if (!snapshot && (zmq_msg_size(&p[1]) != 6 || memcmp(zmq_msg_data(&p[1]), "REPLAY", 6) != 0)) {
        char verb[40];
        s_verb_text(&p[1], verb, sizeof verb);
        s_request_error(self, id, false, "replay: unknown verb '%s' (REPLAY or SNAPSHOT)", verb);
        return;
    }
    if (!snapshot && zmq_msg_size(&p[2]) != 8) {
        s_request_error(self, id, false,
                        "replay: from_seq of %zu bytes, expected 8 (unsigned, big-endian)",
                        zmq_msg_size(&p[2]));
        return;
    }
    if (s_replay_of(self, id, false)) {
        s_request_error(self, id, false,
                        "busy: a replay to this requester is in progress; wait for its END");
        return;
    }
    if (self->n_replays >= PUBLISHER_MAX_REPLAYS) {
        s_request_error(self, id, false, "busy: %u replays in progress; retry after one ends",
                        self->n_replays);
        return;
    }
    if (snapshot)
        s_snapshot_start(self, id);
    else
        s_replay_start(self, id, bus_events_seq_get(zmq_msg_data(&p[2])));
}

/* A request on the vLLM replay socket, in vLLM's framing: [id][""][from_seq]
 * (a REQ) or [id][from_seq] (a DEALER); from_seq 8 bytes big-endian. A bad one
 * is answered with the end marker and the reason as its payload. */
static void s_vllm_request_one(self_t *self, zmq_msg_t *p, int n)
{
    zmq_msg_t *id = &p[0];
    if (n < 1 || zmq_msg_size(id) == 0 || zmq_msg_size(id) > S_ROUTING_ID_MAX)
        return;
    bool delim = n >= 3 && zmq_msg_size(&p[1]) == 0;
    int body = n - 1 - (delim ? 1 : 0);
    zmq_msg_t *seq = &p[delim ? 2 : 1];
    const char *why = NULL, *key;
    if (!s_peer_allowed(self, &p[n >= 2 ? 1 : 0], &key)) {
        s_refused(self, "vllm replay request", key);
        why = "vllm replay: permission denied: this key is not granted \"*\" in "
              "security.curve.instances (the stream carries every instance's events)";
    } else if (body != 1 || zmq_msg_size(seq) != 8)
        why = "vllm replay: send one frame, the 8-byte big-endian start sequence";
    else if (s_replay_of(self, id, true))
        why = "vllm replay: busy: a replay to this requester is in progress";
    else if (self->n_replays >= PUBLISHER_MAX_REPLAYS)
        why = "vllm replay: busy: too many replays in progress; retry after one ends";
    uint8_t end[8];
    bus_events_seq_put(end, UINT64_MAX);
    if (why) {
        self->st.replay_errors++;
        const void *d[2] = {end, why};
        size_t l[2] = {8, strlen(why)};
        s_router_send_on(self->vrouter, zmq_msg_data(id), zmq_msg_size(id), delim, d, l, 2);
        return;
    }
    s_replay_t *r = s_replay_slot(self);
    *r = (s_replay_t){
        .state = S_SENDING, .kind = S_VLLM_REPLAY, .id_len = zmq_msg_size(id), .delim = delim};
    memcpy(r->id, zmq_msg_data(id), r->id_len);
    r->next = bus_events_seq_get(zmq_msg_data(seq));
    r->end = self->vlast;
    r->last_progress = zclock_mono();
    self->n_replays++;
}

static void s_on_router(self_t *self, zsock_t *router,
                        void (*one)(self_t *self, zmq_msg_t *p, int n))
{
    for (int k = 0; k < S_REQUESTS_PER_TURN; k++) {
        zmq_msg_t p[S_REQUEST_FRAMES];
        int n = s_recv_parts(router, p, S_REQUEST_FRAMES);
        if (n == 0)
            return;
        one(self, p, n);
        s_close_parts(p, n, S_REQUEST_FRAMES);
    }
}

/* The vLLM XPUB's subscription messages: read so they never queue up. */
static void s_on_vxpub(self_t *self)
{
    for (int k = 0; k < S_SUBS_PER_TURN; k++) {
        zmq_msg_t m;
        int n = s_recv_parts(self->vxpub, &m, 1);
        if (n == 0)
            return;
        if (n == 1 && self->keys_only)
            (void)s_manual_sub(self, self->vxpub, &m, "vllm subscription");
        zmq_msg_close(&m);
    }
}

/* ---- pipe and loop ---- */

static void s_cmd_stats(zsock_t *pipe, void *arg)
{
    self_t *self = arg;
    self->st.ring_batches = self->ring.count;
    self->st.ring_bytes = self->ring.bytes;
    self->st.ring_first_seq = self->ring.count ? s_ring_at(&self->ring, 0)->seq : 0;
    self->st.replays_active = self->n_replays;
    self->st.mirror_blocks = self->mirror ? publisher_mirror_count(self->mirror) : 0;
    self->st.mirror_stale = self->mirror && publisher_mirror_stale(self->mirror) ? 1 : 0;
    zsock_send(pipe, "b", &self->st, sizeof self->st);
}

static void s_cmd_endpoints(zsock_t *pipe, void *arg)
{
    self_t *self = arg;
    zsock_send(pipe, "ss", self->xpub_ep, self->replay_ep);
}

static void s_cmd_vllm_endpoints(zsock_t *pipe, void *arg)
{
    self_t *self = arg;
    zsock_send(pipe, "ss", self->vxpub_ep, self->vreplay_ep);
}

static const bus_actor_cmd_t s_cmds[] = {
    {"STATS", s_cmd_stats},
    {"ENDPOINTS", s_cmd_endpoints},
    {"VLLM_ENDPOINTS", s_cmd_vllm_endpoints},
    {NULL, NULL},
};

static void s_on_pipe(self_t *self)
{
    if (bus_actor_pipe_cmds(self->pipe, S_LOG, s_cmds, self) < 0)
        self->terminated = true;
}

static void s_run(self_t *self)
{
    while (!self->terminated) {
        int wait = !self->n_replays ? -1 : self->replay_blocked ? S_RETRY_MS : 0;
        void *which = zpoller_wait(self->poller, wait);
        if (which == self->pipe)
            s_on_pipe(self);
        else if (!which && zpoller_terminated(self->poller) && errno == ETERM)
            break;
        if (self->terminated)
            break;
        s_on_input(self);
        s_on_xpub(self);
        if (self->vxpub)
            s_on_vxpub(self);
        if (self->router)
            s_on_router(self, self->router, s_request_one);
        if (self->vrouter)
            s_on_router(self, self->vrouter, s_vllm_request_one);
        s_replays_service(self);
    }
}

/* ---- construction ---- */

static int s_check_endpoint(const char *what, const char *ep, char *why, size_t len)
{
    char err[BUS_ENDPOINT_MAX + 96];
    if (bus_endpoint_check(ep, BUS_ENDPOINT_BIND, err, sizeof err) < 0) {
        snprintf(why, len, "publisher: %s: %s", what, err);
        return -1;
    }
    return 0;
}

static int s_check_config(const publisher_config_t *cfg, char *why, size_t len)
{
    if (!cfg) {
        snprintf(why, len, "publisher: no config");
        return -1;
    }
    if (!cfg->input_endpoint || !cfg->input_endpoint[0]) {
        snprintf(why, len,
                 "publisher: input_endpoint is required (the PULL the scheduler "
                 "pushes batches to binds there)");
        return -1;
    }
    if (!cfg->endpoint || !cfg->endpoint[0]) {
        snprintf(why, len, "publisher: endpoint is required (the XPUB binds there)");
        return -1;
    }
    if (s_check_endpoint("input_endpoint", cfg->input_endpoint, why, len) < 0 ||
        s_check_endpoint("endpoint", cfg->endpoint, why, len) < 0)
        return -1;
    if (cfg->replay_endpoint && cfg->replay_endpoint[0] &&
        s_check_endpoint("replay_endpoint", cfg->replay_endpoint, why, len) < 0)
        return -1;
    if (cfg->vllm_endpoint && cfg->vllm_endpoint[0] &&
        s_check_endpoint("vllm_endpoint", cfg->vllm_endpoint, why, len) < 0)
        return -1;
    if (cfg->vllm_replay_endpoint && cfg->vllm_replay_endpoint[0] &&
        (!cfg->vllm_endpoint || !cfg->vllm_endpoint[0])) {
        snprintf(why, len,
                 "publisher: vllm_replay_endpoint needs vllm_endpoint (the stream it replays)");
        return -1;
    }
    if (cfg->vllm_replay_endpoint && cfg->vllm_replay_endpoint[0] &&
        s_check_endpoint("vllm_replay_endpoint", cfg->vllm_replay_endpoint, why, len) < 0)
        return -1;
    if (cfg->vllm_layout != EVENTS_VLLM_MAP && cfg->vllm_layout != EVENTS_VLLM_ARRAY) {
        snprintf(why, len, "publisher: vllm_layout %d: 0 (map) or 1 (array)", cfg->vllm_layout);
        return -1;
    }
    if (cfg->snapshot_blocks > PUBLISHER_MIRROR_MAX_BLOCKS) {
        snprintf(why, len, "publisher: snapshot_blocks %u above %u", cfg->snapshot_blocks,
                 PUBLISHER_MIRROR_MAX_BLOCKS);
        return -1;
    }
    if (cfg->ring_batches > PUBLISHER_MAX_RING_BATCHES) {
        snprintf(why, len, "publisher: ring_batches %u above %u", cfg->ring_batches,
                 PUBLISHER_MAX_RING_BATCHES);
        return -1;
    }
    if (cfg->xpub_hwm < 0 || cfg->input_hwm < 0) {
        snprintf(why, len, "publisher: xpub_hwm %d / input_hwm %d: need >= 0 (0: default)",
                 cfg->xpub_hwm, cfg->input_hwm);
        return -1;
    }
    if (cfg->n_keys > PUBLISHER_MAX_KEYS || (cfg->n_keys && !cfg->keys)) {
        snprintf(why, len, "publisher: %u keys allowed: at most %u, and keys must be given",
                 cfg->n_keys, PUBLISHER_MAX_KEYS);
        return -1;
    }
    for (uint32_t i = 0; i < cfg->n_keys; i++)
        if (!bus_curve_is_z85(cfg->keys[i])) {
            snprintf(why, len, "publisher: keys[%u] is not a Z85 public key", i);
            return -1;
        }
    return 0;
}

static void s_self_destroy(self_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    self_t *self = *self_p;
    zpoller_destroy(&self->poller);
    for (uint32_t k = 0; k < PUBLISHER_MAX_REPLAYS; k++) {
        free(self->replays[k].locs);
        free(self->replays[k].inst);
    }
    s_ring_fini(&self->ring);
    s_ring_fini(&self->vring);
    publisher_mirror_destroy(&self->mirror);
    tier_mem_free(self->dec);
    tier_mem_free(self->dec_keys.keys);
    tier_mem_free(self->dec_tokens.v);
    tier_mem_free(self->page);
    tier_mem_free(self->page_keys);
    msgpack_sbuffer_destroy(&self->vbuf);
    zsock_destroy(&self->vrouter);
    zsock_destroy(&self->vxpub);
    zsock_destroy(&self->router);
    zsock_destroy(&self->xpub);
    zsock_destroy(&self->input);
    free(self->keys);
    free(self);
    *self_p = NULL;
}

/* Binds SOCK at EP and writes the endpoint as bound into OUT: 0 or -1. */
static int s_bind(zsock_t *sock, const char *what, const char *ep, char *out, size_t len, char *why,
                  size_t wlen)
{
    char curve[256];
    if (bus_curve_bind_setup(sock, ep, curve, sizeof curve) < 0) {
        snprintf(why, wlen, "publisher: %s: %s", what, curve);
        return -1;
    }
    if (zsock_bind(sock, "%s", ep) < 0) {
        snprintf(why, wlen, "publisher: cannot bind %s '%s': %s", what, ep, zmq_strerror(errno));
        return -1;
    }
    char *last = zsock_last_endpoint(sock);
    if (out)
        snprintf(out, len, "%s", last ? last : ep);
    zstr_free(&last);
    return 0;
}

static int s_open_vllm(self_t *self, const publisher_config_t *cfg, char *why, size_t len)
{
    if (!cfg->vllm_endpoint || !cfg->vllm_endpoint[0])
        return 0;
    self->vxpub = zsock_new(ZMQ_XPUB);
    bool replay = cfg->vllm_replay_endpoint && cfg->vllm_replay_endpoint[0];
    if (replay)
        self->vrouter = zsock_new(ZMQ_ROUTER);
    if (!self->vxpub || (replay && !self->vrouter)) {
        snprintf(why, len, "%s: cannot create the vLLM sockets", self->name);
        return -1;
    }
    zsock_set_sndhwm(self->vxpub, cfg->xpub_hwm ? cfg->xpub_hwm : PUBLISHER_DEFAULT_XPUB_HWM);
    zsock_set_xpub_nodrop(self->vxpub, 0);
    zsock_set_maxmsgsize(self->vxpub, S_XPUB_MAXMSG);
    if (self->keys_only) /* each subscription vetted by its key (s_manual_sub) */
        zsock_set_xpub_manual(self->vxpub, 1);
    if (s_bind(self->vxpub, "vllm_endpoint", cfg->vllm_endpoint, self->vxpub_ep,
               sizeof self->vxpub_ep, why, len) < 0)
        return -1;
    if (replay) {
        zsock_set_router_mandatory(self->vrouter, 1);
        zsock_set_maxmsgsize(self->vrouter, S_ROUTER_MAXMSG);
        if (s_bind(self->vrouter, "vllm_replay_endpoint", cfg->vllm_replay_endpoint,
                   self->vreplay_ep, sizeof self->vreplay_ep, why, len) < 0)
            return -1;
    }
    return 0;
}

static int s_open_sockets(self_t *self, const publisher_config_t *cfg, char *why, size_t len)
{
    self->input = zsock_new(ZMQ_PULL);
    self->xpub = zsock_new(ZMQ_XPUB);
    bool replay = cfg->replay_endpoint && cfg->replay_endpoint[0];
    if (replay)
        self->router = zsock_new(ZMQ_ROUTER);
    if (!self->input || !self->xpub || (replay && !self->router)) {
        snprintf(why, len, "%s: cannot create sockets", self->name);
        return -1;
    }
    zsock_set_rcvhwm(self->input, cfg->input_hwm ? cfg->input_hwm : PUBLISHER_DEFAULT_INPUT_HWM);
    zsock_set_maxmsgsize(self->input, (int)BUS_MAX_BLOB);
    zsock_set_sndhwm(self->xpub, cfg->xpub_hwm ? cfg->xpub_hwm : PUBLISHER_DEFAULT_XPUB_HWM);
    zsock_set_xpub_nodrop(self->xpub, 0);
    zsock_set_xpub_verbose(self->xpub, 1);
    zsock_set_xpub_verboser(self->xpub, 1);
    zsock_set_maxmsgsize(self->xpub, S_XPUB_MAXMSG);
    if (self->keys_only)
        zsock_set_xpub_manual(self->xpub, 1);
    if (s_bind(self->input, "input_endpoint", cfg->input_endpoint, NULL, 0, why, len) < 0 ||
        s_bind(self->xpub, "endpoint", cfg->endpoint, self->xpub_ep, sizeof self->xpub_ep, why,
               len) < 0)
        return -1;
    if (replay) {
        zsock_set_router_mandatory(self->router, 1);
        zsock_set_maxmsgsize(self->router, S_ROUTER_MAXMSG);
        if (s_bind(self->router, "replay_endpoint", cfg->replay_endpoint, self->replay_ep,
                   sizeof self->replay_ep, why, len) < 0)
            return -1;
    }
    if (s_open_vllm(self, cfg, why, len) < 0)
        return -1;
    self->poller = zpoller_new(self->pipe, self->input, self->xpub, NULL);
    if (!self->poller || (self->router && zpoller_add(self->poller, self->router) < 0) ||
        (self->vxpub && zpoller_add(self->poller, self->vxpub) < 0) ||
        (self->vrouter && zpoller_add(self->poller, self->vrouter) < 0)) {
        snprintf(why, len, "%s: no poller", self->name);
        return -1;
    }
    zpoller_set_nonstop(self->poller, true);
    return 0;
}

static self_t *s_self_new(zsock_t *pipe, const publisher_config_t *cfg, char *why, size_t len)
{
    if (s_check_config(cfg, why, len) < 0)
        return NULL;
    self_t *self = calloc(1, sizeof *self);
    if (!self) {
        snprintf(why, len, "publisher: out of memory");
        return NULL;
    }
    self->pipe = pipe;
    snprintf(self->name, sizeof self->name, "%s", cfg->name ? cfg->name : "publisher");
    uint32_t ring_cap = cfg->ring_batches ? cfg->ring_batches : PUBLISHER_DEFAULT_RING_BATCHES;
    uint64_t ring_bytes = cfg->ring_bytes ? cfg->ring_bytes : PUBLISHER_DEFAULT_RING_BYTES;
    self->first_seq_hint = cfg->first_seq_hint;
    self->stall_ms =
        cfg->replay_stall_ms ? cfg->replay_stall_ms : PUBLISHER_DEFAULT_REPLAY_STALL_MS;
    self->vlayout = (events_vllm_layout_t)cfg->vllm_layout;
    msgpack_sbuffer_init(&self->vbuf);
    self->keys_only = cfg->keys_only;
    if (cfg->n_keys) {
        self->keys = calloc(cfg->n_keys, sizeof *self->keys);
        if (!self->keys) {
            snprintf(why, len, "publisher: out of memory");
            goto out_fail;
        }
        memcpy(self->keys, cfg->keys, cfg->n_keys * sizeof *self->keys);
        self->n_keys = cfg->n_keys;
    }
    bool vllm = cfg->vllm_endpoint && cfg->vllm_endpoint[0];
    if (s_ring_init(&self->ring, ring_cap, ring_bytes) < 0 ||
        (vllm && s_ring_init(&self->vring, ring_cap, ring_bytes) < 0)) {
        snprintf(why, len, "%s: out of memory for a ring of %u batches", self->name, ring_cap);
        goto out_fail;
    }
    if ((cfg->replay_endpoint && cfg->replay_endpoint[0]) || vllm) {
        self->mirror = publisher_mirror_new(cfg->snapshot_blocks);
        self->dec = tier_mem_calloc(BUS_MAX_EVENTS, sizeof *self->dec);
        self->dec_keys.cap = BUS_MAX_BLOB / BUS_KEY_LEN;
        self->dec_keys.keys = tier_mem_calloc(self->dec_keys.cap, BUS_KEY_LEN);
        self->dec_tokens.cap = S_DEC_TOKENS;
        self->dec_tokens.v = tier_mem_calloc(S_DEC_TOKENS, sizeof *self->dec_tokens.v);
        self->page = tier_mem_calloc(S_SNAPSHOT_PAGE_EVENTS, sizeof *self->page);
        self->page_keys = tier_mem_calloc(S_SNAPSHOT_PAGE_KEYS, BUS_KEY_LEN);
        if (!self->mirror || !self->dec || !self->dec_keys.keys || !self->dec_tokens.v ||
            !self->page || !self->page_keys) {
            snprintf(why, len, "%s: out of memory for the index mirror", self->name);
            goto out_fail;
        }
    }
    if (s_open_sockets(self, cfg, why, len) < 0)
        goto out_fail;
    return self;

out_fail:
    s_self_destroy(&self);
    return NULL;
}

static void s_actor(zsock_t *pipe, void *args)
{
    char why[512] = "";
    self_t *self = s_self_new(pipe, args, why, sizeof why);
    if (!self)
        bus_error(S_LOG, "%s", why);
    if (bus_actor_ready(pipe, self != NULL) < 0)
        return;
    bus_info(S_LOG,
             "%s: publishing on %s, replay %s, ring %u batches / %" PRIu64 " bytes, vLLM %s (%s)",
             self->name, self->xpub_ep, self->replay_ep[0] ? self->replay_ep : "off",
             self->ring.cap, self->ring.max_bytes, self->vxpub_ep[0] ? self->vxpub_ep : "off",
             events_vllm_layout_name(self->vlayout));
    s_run(self);
    s_self_destroy(&self);
}

zactor_t *publisher_new(const publisher_config_t *cfg)
{
    return bus_actor_new(s_actor, (void *)cfg);
}

/* ---- wrappers ---- */

int publisher_stats(zactor_t *publisher, publisher_stats_t *out)
{
    return bus_actor_stats(publisher, out, sizeof *out);
}

static int s_ask_endpoints(zactor_t *publisher, const char *cmd, char *xpub, size_t xlen,
                           char *replay, size_t rlen)
{
    if (!xpub || !xlen || !replay || !rlen ||
        bus_actor_ask(publisher, BUS_ACTOR_ASK_MS, "s", cmd) < 0)
        return -1;
    char *x = NULL, *r = NULL;
    int rc = -1;
    if (zsock_recv(publisher, "ss", &x, &r) == 0 && x && r && strlen(x) < xlen &&
        strlen(r) < rlen) {
        snprintf(xpub, xlen, "%s", x);
        snprintf(replay, rlen, "%s", r);
        rc = 0;
    }
    zstr_free(&x);
    zstr_free(&r);
    return rc;
}

int publisher_endpoints(zactor_t *publisher, char *xpub, size_t xlen, char *replay, size_t rlen)
{
    return s_ask_endpoints(publisher, "ENDPOINTS", xpub, xlen, replay, rlen);
}

int publisher_vllm_endpoints(zactor_t *publisher, char *xpub, size_t xlen, char *replay,
                             size_t rlen)
{
    return s_ask_endpoints(publisher, "VLLM_ENDPOINTS", xpub, xlen, replay, rlen);
}
