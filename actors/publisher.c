/* publisher.c — the publisher actor (rules and protocol in publisher.h): a PULL
 * of batches from the scheduler, an XPUB that publishes them, a ring of the
 * last ones and a ROUTER that replays from it, in one zpoller loop. Every turn
 * serves each socket non-blocking with a bounded budget, so no socket starves
 * another and the pipe is answered between turns.
 *
 * Owns the ring (entries allocated at start; payloads are the received ZeroMQ
 * messages, shared with the sockets by reference count, never copied) and at
 * most PUBLISHER_MAX_REPLAYS replay cursors (a fixed table). Never decodes a
 * payload, never blocks on a socket, never trusts a frame it reads.
 *
 * A replay cursor's lifecycle (one table; a free slot is S_FREE):
 *
 *   state     event                                   action / next
 *   S_FREE    valid REPLAY request, a slot free       snapshot end, next=from -> S_SENDING
 *   S_SENDING next <= evicted_upto (batches lost)     GAP(oldest), next=oldest -> S_SENDING
 *   S_SENDING a ring batch with seq in [next, end]    BATCH, next=seq+1        -> S_SENDING
 *   S_SENDING nothing left up to end                  END(end+1)               -> S_FREE
 *   S_SENDING ROUTER full (EAGAIN)                    retry next turn          -> S_SENDING
 *   S_SENDING peer gone, or stalled stall_ms          counted replay_errors    -> S_FREE
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
#include "bus_endpoint.h"
#include "bus_log.h"

#define S_LOG "publisher"
#define S_INPUT_PER_TURN 256   /* input batches taken per loop turn */
#define S_SUBS_PER_TURN 256    /* XPUB subscription messages per turn */
#define S_REQUESTS_PER_TURN 16 /* replay requests per turn */
#define S_RETRY_MS 5           /* wait when every replay is held by a full ROUTER */
#define S_ROUTING_ID_MAX 256   /* ZeroMQ routing ids are 1..255 bytes */
#define S_REQUEST_FRAMES 4     /* frames kept of a request: id, [delimiter], verb, seq */
#define S_XPUB_MAXMSG 4096     /* longest subscription message accepted over tcp */
#define S_ROUTER_MAXMSG 1024   /* longest replay request frame accepted over tcp */

_Static_assert(PUBLISHER_REPLAY_PER_TURN >= PUBLISHER_MAX_REPLAYS,
               "every replay in progress sends at least one batch per turn");

typedef struct {
    uint64_t seq;
    uint8_t topic_len;
    char topic[PUBLISHER_TOPIC_MAX];
    zmq_msg_t payload; /* the received message; copies share its data */
} s_entry_t;

typedef enum { S_FREE = 0, S_SENDING } s_replay_state_t;

typedef struct {
    s_replay_state_t state;
    uint8_t id[S_ROUTING_ID_MAX];
    size_t id_len;
    uint64_t next;         /* the lowest seq not yet sent */
    uint64_t end;          /* the last seq published when the request came */
    int64_t last_progress; /* zclock_mono of the last message sent */
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
    uint32_t ring_cap;
    uint64_t ring_max_bytes;
    uint64_t first_seq_hint;
    uint32_t stall_ms;
    s_entry_t *ring; /* ring_cap entries, oldest at head */
    uint32_t head, count;
    uint64_t bytes;
    bool have_last;
    bool have_evicted;
    uint64_t evicted_upto; /* highest seq no longer in the ring (when have_evicted) */
    s_replay_t replays[PUBLISHER_MAX_REPLAYS];
    uint32_t n_replays;
    uint32_t rr;         /* replay served first in the next turn */
    bool replay_blocked; /* the last turn sent nothing for any replay */
    publisher_stats_t st;
} self_t;

/* ---- helpers ---- */

static void s_put_be64(uint8_t out[8], uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        out[i] = (uint8_t)(v & 0xff);
        v >>= 8;
    }
}

static uint64_t s_get_be64(const uint8_t in[8])
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | in[i];
    return v;
}

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

static s_entry_t *s_ring_at(self_t *self, uint32_t i)
{
    return &self->ring[(self->head + i) % self->ring_cap];
}

static void s_ring_evict(self_t *self)
{
    s_entry_t *e = s_ring_at(self, 0);
    self->bytes -= e->topic_len + zmq_msg_size(&e->payload);
    self->have_evicted = true;
    self->evicted_upto = e->seq;
    zmq_msg_close(&e->payload);
    self->head = (self->head + 1) % self->ring_cap;
    self->count--;
}

/* Keeps the batch (moving PAYLOAD in) after evicting what the bounds require. */
static void s_ring_push(self_t *self, const char *topic, size_t tlen, uint64_t seq,
                        zmq_msg_t *payload)
{
    uint64_t size = tlen + zmq_msg_size(payload);
    if (size > self->ring_max_bytes) {
        while (self->count)
            s_ring_evict(self);
        self->have_evicted = true;
        self->evicted_upto = seq;
        return; /* the caller closes PAYLOAD */
    }
    while (self->count == self->ring_cap || self->bytes + size > self->ring_max_bytes)
        s_ring_evict(self);
    s_entry_t *e = s_ring_at(self, self->count);
    e->seq = seq;
    e->topic_len = (uint8_t)tlen;
    memcpy(e->topic, topic, tlen);
    zmq_msg_init(&e->payload);
    zmq_msg_move(&e->payload, payload);
    self->count++;
    self->bytes += size;
}

/* Index of the oldest entry with seq >= SEQ (count when none). */
static uint32_t s_ring_find(self_t *self, uint64_t seq)
{
    uint32_t lo = 0, hi = self->count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s_ring_at(self, mid)->seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
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

static void s_publish(self_t *self, const uint8_t *topic, size_t tlen, const uint8_t *seq_be,
                      zmq_msg_t *payload)
{
    void *h = zsock_resolve(self->xpub);
    zmq_msg_t out;
    zmq_msg_init(&out);
    zmq_msg_copy(&out, payload);
    /* XPUB never blocks (NODROP off): a send fails only when the context ends */
    if (zmq_send(h, topic, tlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(h, seq_be, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_msg_send(&out, h, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&out);
        bus_debug(S_LOG, "%s: XPUB send failed: %s", self->name, zmq_strerror(errno));
        return;
    }
    self->st.published++;
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
    uint64_t seq = s_get_be64(seq_be);
    if (seq == UINT64_MAX) {
        s_bad(self, "seq %" PRIu64 " is reserved (a replay's END carries seq + 1)", seq);
        return;
    }
    if (self->have_last && seq <= self->st.last_seq) {
        s_bad(self, "seq %" PRIu64 " not above the last one, %" PRIu64, seq, self->st.last_seq);
        return;
    }
    uint64_t expected = self->have_last ? self->st.last_seq + 1 : self->first_seq_hint;
    if ((self->have_last || self->first_seq_hint) && seq > expected) {
        self->st.gaps_in++;
        self->st.missing_in += seq - expected;
    }
    self->have_last = true;
    self->st.last_seq = seq;
    s_publish(self, topic, tlen, seq_be, &p[2]);
    s_ring_push(self, (const char *)topic, tlen, seq, &p[2]);
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

/* ---- subscriptions ---- */

static void s_on_xpub(self_t *self)
{
    for (int k = 0; k < S_SUBS_PER_TURN; k++) {
        zmq_msg_t m;
        int n = s_recv_parts(self->xpub, &m, 1);
        if (n == 0)
            return;
        const uint8_t *d = zmq_msg_data(&m);
        if (n == 1 && zmq_msg_size(&m) >= 1 && d[0] == 1)
            self->st.subscribers++;
        else if (n == 1 && zmq_msg_size(&m) >= 1 && d[0] == 0 && self->st.subscribers > 0)
            self->st.subscribers--;
        zmq_msg_close(&m);
    }
}

/* ---- replay: sending ---- */

/* Sends [id][delim?][frames...] on the ROUTER: 0, or -1 with errno EAGAIN (the
 * peer's queue is full: nothing sent) or another error (the peer is gone). */
static int s_router_send(self_t *self, const uint8_t *id, size_t id_len, bool delim,
                         const void *const *data, const size_t *len, int n)
{
    void *h = zsock_resolve(self->router);
    if (zmq_send(h, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return -1;
    /* past the routing id the message is committed: its parts always go */
    if (delim)
        zmq_send(h, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    for (int i = 0; i < n; i++)
        zmq_send(h, data[i], len[i], (i + 1 < n ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT);
    return 0;
}

static int s_send_seq(self_t *self, s_replay_t *r, const char *verb, uint64_t seq)
{
    uint8_t be[8];
    s_put_be64(be, seq);
    const void *d[2] = {verb, be};
    size_t l[2] = {strlen(verb), 8};
    return s_router_send(self, r->id, r->id_len, false, d, l, 2);
}

static int s_send_batch(self_t *self, s_replay_t *r, s_entry_t *e)
{
    void *h = zsock_resolve(self->router);
    uint8_t be[8];
    s_put_be64(be, e->seq);
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
    r->state = S_FREE;
    self->n_replays--;
}

/* One message of replay R: 1 sent, 0 the replay ended, -1 held (EAGAIN). */
static int s_replay_step(self_t *self, s_replay_t *r)
{
    uint64_t oldest = self->count ? s_ring_at(self, 0)->seq : self->st.last_seq + 1;
    if (self->have_evicted && r->next <= self->evicted_upto && r->next <= r->end) {
        uint64_t to = oldest < r->end + 1 ? oldest : r->end + 1;
        if (s_send_seq(self, r, "GAP", to) < 0)
            return -1;
        r->next = to;
        return 1;
    }
    uint32_t i = r->next <= r->end ? s_ring_find(self, r->next) : self->count;
    if (i < self->count && s_ring_at(self, i)->seq <= r->end) {
        s_entry_t *e = s_ring_at(self, i);
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

static s_replay_t *s_replay_of(self_t *self, zmq_msg_t *id)
{
    size_t n = zmq_msg_size(id);
    for (uint32_t k = 0; k < PUBLISHER_MAX_REPLAYS; k++) {
        s_replay_t *r = &self->replays[k];
        if (r->state == S_SENDING && r->id_len == n && memcmp(r->id, zmq_msg_data(id), n) == 0)
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
    r->state = S_SENDING;
    r->id_len = zmq_msg_size(id);
    memcpy(r->id, zmq_msg_data(id), r->id_len);
    r->next = from;
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
    if (n != 3) {
        s_request_error(self, id, false,
                        "replay: %d frames, expected 2: [\"REPLAY\"][8-byte big-endian from_seq]",
                        n - 1);
        return;
    }
    if (zmq_msg_size(&p[1]) != 6 || memcmp(zmq_msg_data(&p[1]), "REPLAY", 6) != 0) {
        char verb[40];
        s_verb_text(&p[1], verb, sizeof verb);
        s_request_error(self, id, false, "replay: unknown verb '%s' (the only one is REPLAY)",
                        verb);
        return;
    }
    if (zmq_msg_size(&p[2]) != 8) {
        s_request_error(self, id, false,
                        "replay: from_seq of %zu bytes, expected 8 (unsigned, big-endian)",
                        zmq_msg_size(&p[2]));
        return;
    }
    if (s_replay_of(self, id)) {
        s_request_error(self, id, false,
                        "busy: a replay to this requester is in progress; wait for its END");
        return;
    }
    if (self->n_replays >= PUBLISHER_MAX_REPLAYS) {
        s_request_error(self, id, false, "busy: %u replays in progress; retry after one ends",
                        self->n_replays);
        return;
    }
    s_replay_start(self, id, s_get_be64(zmq_msg_data(&p[2])));
}

static void s_on_router(self_t *self)
{
    for (int k = 0; k < S_REQUESTS_PER_TURN; k++) {
        zmq_msg_t p[S_REQUEST_FRAMES];
        int n = s_recv_parts(self->router, p, S_REQUEST_FRAMES);
        if (n == 0)
            return;
        s_request_one(self, p, n);
        s_close_parts(p, n, S_REQUEST_FRAMES);
    }
}

/* ---- pipe and loop ---- */

static void s_cmd_stats(zsock_t *pipe, void *arg)
{
    self_t *self = arg;
    self->st.ring_batches = self->count;
    self->st.ring_bytes = self->bytes;
    self->st.ring_first_seq = self->count ? s_ring_at(self, 0)->seq : 0;
    self->st.replays_active = self->n_replays;
    zsock_send(pipe, "b", &self->st, sizeof self->st);
}

static void s_cmd_endpoints(zsock_t *pipe, void *arg)
{
    self_t *self = arg;
    zsock_send(pipe, "ss", self->xpub_ep, self->replay_ep);
}

static const bus_actor_cmd_t s_cmds[] = {
    {"STATS", s_cmd_stats},
    {"ENDPOINTS", s_cmd_endpoints},
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
        if (self->router) {
            s_on_router(self);
            s_replays_service(self);
        }
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
    return 0;
}

static void s_self_destroy(self_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    self_t *self = *self_p;
    zpoller_destroy(&self->poller);
    while (self->ring && self->count)
        s_ring_evict(self);
    free(self->ring);
    zsock_destroy(&self->router);
    zsock_destroy(&self->xpub);
    zsock_destroy(&self->input);
    free(self);
    *self_p = NULL;
}

/* Binds SOCK at EP and writes the endpoint as bound into OUT: 0 or -1. */
static int s_bind(zsock_t *sock, const char *what, const char *ep, char *out, size_t len, char *why,
                  size_t wlen)
{
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
    self->poller = zpoller_new(self->pipe, self->input, self->xpub, NULL);
    if (!self->poller || (self->router && zpoller_add(self->poller, self->router) < 0)) {
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
    self->ring_cap = cfg->ring_batches ? cfg->ring_batches : PUBLISHER_DEFAULT_RING_BATCHES;
    self->ring_max_bytes = cfg->ring_bytes ? cfg->ring_bytes : PUBLISHER_DEFAULT_RING_BYTES;
    self->first_seq_hint = cfg->first_seq_hint;
    self->stall_ms =
        cfg->replay_stall_ms ? cfg->replay_stall_ms : PUBLISHER_DEFAULT_REPLAY_STALL_MS;
    self->ring = calloc(self->ring_cap, sizeof *self->ring);
    if (!self->ring) {
        snprintf(why, len, "%s: out of memory for a ring of %u batches", self->name,
                 self->ring_cap);
        goto out_fail;
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
    bus_info(S_LOG, "%s: publishing on %s, replay %s, ring %u batches / %" PRIu64 " bytes",
             self->name, self->xpub_ep, self->replay_ep[0] ? self->replay_ep : "off",
             self->ring_cap, self->ring_max_bytes);
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

int publisher_endpoints(zactor_t *publisher, char *xpub, size_t xlen, char *replay, size_t rlen)
{
    if (!xpub || !xlen || !replay || !rlen ||
        bus_actor_ask(publisher, BUS_ACTOR_ASK_MS, "s", "ENDPOINTS") < 0)
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
