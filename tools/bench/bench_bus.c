/* bench_bus.c — `kvt-bench bus`: request/reply over the bus (bus_client on a
 * DEALER, bus_server on a ROUTER): a LookupRequest of 256 keys answered with a
 * LookupReply of 256 hits and tier ids, against raw libzmq DEALER/ROUTER moving
 * opaque single frames of exactly the encoded request and reply sizes, in the
 * same run. The ratio is the cost of the envelope, the nanopb codec and the
 * czmq framing (the raw side does zmq_msg_recv / zmq_send and nothing else).
 *
 * Per transport (tcp://127.0.0.1:* ephemeral port, ipc:// under a mkdtemp
 * directory) and per depth (1 and 8 requests kept in flight): round trips per
 * second and p50/p99 latency (CLOCK_MONOTONIC, send to completion). A row warms
 * both sides up, then alternates kvtier and raw slices (--rounds) until each
 * side has had --seconds, so a change in background load hits both alike. Every
 * completion in a timed window goes into a latency array allocated and touched
 * before timing (a side that fills it stops early and says so). A new request is
 * sent as soon as one completes, on both sides. A first line gives the CPU time
 * of the frame-0 codec alone (encode + decode of request and reply, no sockets),
 * which a busy machine distorts far less than the socket figures.
 *
 * The servers are czmq actors on their own threads, stopped and joined before
 * return; the ipc directory is removed. Never used by the service; prints a
 * table and returns 0, 1 if setup or any round trip fails, 2 on bad arguments. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "bench.h"
#include "bus_client.h"
#include "bus_server.h"

#define S_DEFAULT_KEYS 256u
#define S_DEFAULT_ROUNDS 4u
#define S_KEY_ROTATE 1024u         /* requests start at one of this many pool offsets */
#define S_SAMPLES_PER_SEC 1000000u /* latency array room, per timed second */
#define S_MAX_SAMPLES (16u << 20)
#define S_RAW_ID_BYTES 8 /* raw baseline: request index in the first bytes, echoed */
#define S_REPLY_TIMEOUT_MS 5000u
/* Sizing the raw frames: a corr_id of the magnitude the client uses mid-run. */
#define S_TYPICAL_CORR_ID ((UINT64_C(100000) << 24) | 7u)

static const uint32_t s_depths[] = {1, 8};

struct s_args {
    double seconds;
    uint32_t rounds;
    bool tcp, ipc;
    uint32_t keys;
};

static uint64_t s_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the workload: what the server answers, shared with the sizing pass ---- */

/* Deterministic from the key bytes, so the server reads every key. */
static uint32_t s_answer(const bus_keys_t *keys, bool *hit, uint32_t *tier)
{
    uint32_t hits = 0;
    for (uint32_t i = 0; i < keys->n; i++) {
        hit[i] = (keys->keys[i][0] & 3u) != 0;
        tier[i] = hit[i] ? 1u + keys->keys[i][1] % 3u : 0u;
        hits += hit[i];
    }
    return hits;
}

static void s_request_init(kvtier_Envelope *env)
{
    bus_env_init(env, kvtier_Envelope_lookup_req_tag, "bench-client");
    kvtier_LookupRequest *lk = &env->body.lookup_req;
    snprintf(lk->instance_id, sizeof lk->instance_id, "llama-3-8b-instruct");
    snprintf(lk->request_id, sizeof lk->request_id, "bench-request-000001");
    lk->mode = kvtier_LookupMode_LOOKUP_MODE_PREFIX;
}

/* ---- servers (czmq actors) ---- */

typedef struct {
    const char *bind;
    uint32_t nkeys;
    size_t rep_bytes;   /* raw server: reply frame size */
    char endpoint[256]; /* bound endpoint, written before the ready signal */
    int rc;             /* 0 when the server started */
    uint64_t served, failures;
} s_server_args_t;

/* 1 when `sock` is readable, 0 on $TERM from the pipe, -1 on failure. */
static int s_wait(zsock_t *pipe, void *sock)
{
    zmq_pollitem_t items[2] = {{zsock_resolve(pipe), 0, ZMQ_POLLIN, 0}, {sock, 0, ZMQ_POLLIN, 0}};
    for (;;) {
        if (zmq_poll(items, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (items[0].revents & ZMQ_POLLIN) {
            char *cmd = zstr_recv(pipe);
            bool term = !cmd || streq(cmd, "$TERM");
            zstr_free(&cmd);
            if (term)
                return 0;
        }
        if (items[1].revents & ZMQ_POLLIN)
            return 1;
    }
}

static void s_kvt_answer(bus_server_t *srv, const bus_request_t *req, const bus_arrays_t *in,
                         bus_arrays_t *out, kvtier_Envelope *rep, s_server_args_t *a)
{
    if (req->env.which_body != kvtier_Envelope_lookup_req_tag) {
        bus_server_reply_error(srv, req->routing_id, req->env.corr_id,
                               kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                               "the bench server answers LookupRequest only");
        a->failures++;
        return;
    }
    bus_env_init_reply(rep, &req->env, kvtier_Envelope_lookup_rep_tag, NULL);
    rep->body.lookup_rep.hit_count = s_answer(&in->keys, out->mask.v, out->tier_ids.v);
    out->mask.n = out->tier_ids.n = in->keys.n;
    kvtier_Status st;
    if (bus_server_reply(srv, req->routing_id, rep, out, NULL, 0, &st) < 0)
        a->failures++;
    else
        a->served++;
}

static void s_kvt_server(zsock_t *pipe, void *args)
{
    s_server_args_t *a = args;
    bus_server_t *srv = bus_server_new(a->bind, "bench-server");
    bus_arrays_t *in = bus_arrays_new(a->nkeys, 0);
    bus_arrays_t *out = bus_arrays_new(a->nkeys, 0);
    bus_request_t *req = calloc(1, sizeof *req);
    kvtier_Envelope *rep = malloc(sizeof *rep);
    a->rc = srv && in && out && req && rep ? 0 : -1;
    if (a->rc == 0)
        snprintf(a->endpoint, sizeof a->endpoint, "%s", bus_server_endpoint(srv));
    zsock_signal(pipe, 0);
    while (a->rc == 0 && s_wait(pipe, zsock_resolve(bus_server_sock(srv))) == 1) {
        while (bus_server_recv(srv, 0, req, in) == 1)
            s_kvt_answer(srv, req, in, out, rep, a);
    }
    if (req)
        bus_request_reset(req);
    free(req);
    free(rep);
    bus_arrays_destroy(&in);
    bus_arrays_destroy(&out);
    bus_server_destroy(&srv);
}

/* One raw request [routing id][body]: the reply echoes the body's first bytes (the
 * client's request index). 1 when one was answered, 0 when none is waiting. */
static int s_raw_answer(void *h, uint8_t *rep, s_server_args_t *a)
{
    zmq_msg_t rid, body;
    zmq_msg_init(&rid);
    if (zmq_msg_recv(&rid, h, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&rid);
        return 0;
    }
    zmq_msg_init(&body);
    bool more = zmq_msg_more(&rid) && zmq_msg_recv(&body, h, 0) >= 0;
    if (more && zmq_msg_size(&body) >= S_RAW_ID_BYTES)
        memcpy(rep, zmq_msg_data(&body), S_RAW_ID_BYTES);
    while (more && zmq_msg_more(&body)) /* never sent by the bench client: drop */
        more = zmq_msg_recv(&body, h, 0) >= 0;
    zmq_msg_close(&body);
    if (zmq_msg_send(&rid, h, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(h, rep, a->rep_bytes, ZMQ_DONTWAIT) < 0)
        a->failures++;
    else
        a->served++;
    zmq_msg_close(&rid);
    return 1;
}

static void s_raw_server(zsock_t *pipe, void *args)
{
    s_server_args_t *a = args;
    zsock_t *sock = zsock_new(ZMQ_ROUTER);
    uint8_t *rep = calloc(1, a->rep_bytes);
    a->rc = sock && rep && zsock_bind(sock, "%s", a->bind) >= 0 ? 0 : -1;
    if (a->rc == 0) {
        char *ep = zsock_last_endpoint(sock);
        snprintf(a->endpoint, sizeof a->endpoint, "%s", ep ? ep : a->bind);
        zstr_free(&ep);
    }
    zsock_signal(pipe, 0);
    void *h = sock ? zsock_resolve(sock) : NULL;
    while (a->rc == 0 && s_wait(pipe, h) == 1) {
        while (s_raw_answer(h, rep, a) == 1)
            ;
    }
    zsock_destroy(&sock);
    free(rep);
}

/* ---- timed cells: one per side, filled over several interleaved slices ---- */

typedef struct {
    uint32_t *lat; /* ns per round trip, saturated; all slices of the cell */
    uint32_t n, cap;
    uint64_t elapsed;        /* ns of timed window, summed over slices */
    uint64_t t_start, t_end; /* this slice: completions in [t_start, t_end) count */
    uint64_t errors;
    bool stop; /* send no more: the slice ended, the array filled, or a failure */
    bool full;
} s_cell_t;

static void s_cell_reset(s_cell_t *c)
{
    c->n = 0;
    c->elapsed = 0;
    c->errors = 0;
    c->full = false;
}

/* Starts a slice; a full cell gets an empty one (nothing is sent). */
static void s_slice_begin(s_cell_t *c, double warmup_s, double seconds)
{
    c->stop = c->full;
    c->t_start = s_now_ns() + (uint64_t)(warmup_s * 1e9);
    c->t_end = c->full ? c->t_start : c->t_start + (uint64_t)(seconds * 1e9);
}

static void s_slice_end(s_cell_t *c)
{
    c->elapsed += c->t_end - c->t_start;
}

/* A request sent at t0 completed at now; true if the caller should send another. */
static bool s_record(s_cell_t *c, uint64_t t0, uint64_t now)
{
    if (c->stop)
        return false;
    if (now >= c->t_end) {
        c->stop = true;
        return false;
    }
    if (now < c->t_start)
        return true;
    if (c->n == c->cap) {
        c->stop = c->full = true;
        c->t_end = now;
        return false;
    }
    uint64_t d = now - t0;
    c->lat[c->n++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
    return true;
}

/* Shared by every cell: keys, the request template, the raw frame sizes. */
typedef struct {
    struct s_args args;
    double warmup;
    uint8_t (*pool)[BUS_KEY_LEN]; /* keys + S_KEY_ROTATE keys */
    kvtier_Envelope *req;
    bus_arrays_t *rep_arr;
    size_t req_bytes, rep_bytes;
    uint8_t *raw_req; /* req_bytes of opaque payload */
} s_ctx_t;

/* ---- kvtier side: bus_client ---- */

typedef struct s_kvt_run s_kvt_run_t;
typedef struct {
    s_kvt_run_t *run;
    uint64_t t0;
} s_kvt_slot_t;

struct s_kvt_run {
    s_ctx_t *ctx;
    s_cell_t *cell;
    bus_client_t *client;
    s_kvt_slot_t *slots; /* one per request in flight */
    uint32_t depth;
    bus_arrays_t req_arr;
    uint64_t seq;
    uint32_t outstanding;
    bool warned;
};

static void s_kvt_done(void *arg, bus_reply_t *reply);

static void s_kvt_send(s_kvt_run_t *r, s_kvt_slot_t *slot)
{
    r->req_arr.keys.keys = r->ctx->pool + r->seq++ % S_KEY_ROTATE;
    r->req_arr.keys.n = r->req_arr.keys.cap = r->ctx->args.keys;
    slot->t0 = s_now_ns();
    kvtier_Status st;
    if (bus_client_send(r->client, r->ctx->req, &r->req_arr, NULL, 0, S_REPLY_TIMEOUT_MS,
                        r->ctx->rep_arr, s_kvt_done, slot, NULL, &st) < 0) {
        fprintf(stderr, "bus bench: request refused: %s\n", st.message);
        r->cell->errors++;
        r->cell->stop = true;
        return;
    }
    r->outstanding++;
}

static bool s_kvt_reply_ok(s_kvt_run_t *r, const bus_reply_t *reply)
{
    const bus_arrays_t *a = r->ctx->rep_arr;
    const char *why = NULL;
    if (reply->status.code != kvtier_StatusCode_STATUS_OK || !reply->env)
        why = reply->status.message;
    else if (reply->env->which_body != kvtier_Envelope_lookup_rep_tag)
        why = "not a LookupReply";
    else if (a->mask.n != r->ctx->args.keys || a->tier_ids.n != r->ctx->args.keys)
        why = "hit or tier_ids count differs from the key count";
    if (!why) {
        uint32_t hits = 0;
        for (uint32_t i = 0; i < a->mask.n; i++)
            hits += a->mask.v[i];
        if (hits != reply->env->body.lookup_rep.hit_count)
            why = "hit_count differs from the hits in the mask";
    }
    if (why && !r->warned) {
        fprintf(stderr, "bus bench: bad reply (%s): %s\n", bus_status_name(reply->status.code),
                why);
        r->warned = true;
    }
    return why == NULL;
}

static void s_kvt_done(void *arg, bus_reply_t *reply)
{
    s_kvt_slot_t *slot = arg;
    s_kvt_run_t *r = slot->run;
    uint64_t now = s_now_ns();
    r->outstanding--;
    if (!s_kvt_reply_ok(r, reply)) {
        r->cell->errors++;
        r->cell->stop = true;
        return;
    }
    if (s_record(r->cell, slot->t0, now))
        s_kvt_send(r, slot);
}

static int s_kvt_open(s_kvt_run_t *r, s_ctx_t *ctx, const char *endpoint, uint32_t depth,
                      s_cell_t *cell)
{
    bus_client_config_t cfg = {
        .name = "bench-client", .max_in_flight = depth, .default_timeout_ms = S_REPLY_TIMEOUT_MS};
    *r = (s_kvt_run_t){.ctx = ctx, .cell = cell, .depth = depth};
    r->slots = calloc(depth, sizeof *r->slots);
    r->client = bus_client_new(endpoint, &cfg);
    if (!r->slots || !r->client)
        return -1;
    for (uint32_t i = 0; i < depth; i++)
        r->slots[i].run = r;
    return 0;
}

static void s_kvt_close(s_kvt_run_t *r)
{
    bus_client_destroy(&r->client);
    free(r->slots);
    r->slots = NULL;
}

/* Keeps `depth` requests in flight until the slice ends, then drains them. */
static void s_kvt_slice(s_kvt_run_t *r, double warmup_s, double seconds)
{
    s_cell_t *cell = r->cell;
    s_slice_begin(cell, warmup_s, seconds);
    for (uint32_t i = 0; i < r->depth && !cell->stop; i++)
        s_kvt_send(r, &r->slots[i]);
    while (r->outstanding > 0) {
        if (bus_client_dispatch(r->client, -1) < 0) {
            cell->errors++;
            break;
        }
    }
    s_slice_end(cell);
}

/* ---- raw libzmq side: one frame out, one frame back ---- */

typedef struct {
    const s_ctx_t *ctx;
    s_cell_t *cell;
    zsock_t *sock; /* czmq only creates it; the data path is plain libzmq */
    void *h;
    uint64_t *t0; /* send time per request index */
    uint32_t depth, outstanding;
} s_raw_run_t;

static void s_raw_send(s_raw_run_t *r, uint64_t id)
{
    memcpy(r->ctx->raw_req, &id, S_RAW_ID_BYTES);
    r->t0[id] = s_now_ns();
    if (zmq_send(r->h, r->ctx->raw_req, r->ctx->req_bytes, ZMQ_DONTWAIT) < 0) {
        r->cell->errors++;
        r->cell->stop = true;
        return;
    }
    r->outstanding++;
}

/* Handles every reply waiting on the socket. */
static void s_raw_drain(s_raw_run_t *r)
{
    zmq_msg_t m;
    zmq_msg_init(&m);
    while (zmq_msg_recv(&m, r->h, ZMQ_DONTWAIT) >= 0) {
        uint64_t now = s_now_ns(), id = UINT64_MAX;
        r->outstanding--;
        if (zmq_msg_size(&m) == r->ctx->rep_bytes && !zmq_msg_more(&m))
            memcpy(&id, zmq_msg_data(&m), S_RAW_ID_BYTES);
        if (id >= r->depth) {
            r->cell->errors++;
            r->cell->stop = true;
            continue;
        }
        if (s_record(r->cell, r->t0[id], now))
            s_raw_send(r, id);
    }
    zmq_msg_close(&m);
}

static int s_raw_open(s_raw_run_t *r, const s_ctx_t *ctx, const char *endpoint, uint32_t depth,
                      s_cell_t *cell)
{
    *r = (s_raw_run_t){.ctx = ctx, .cell = cell, .depth = depth};
    r->sock = zsock_new(ZMQ_DEALER);
    r->t0 = calloc(depth, sizeof *r->t0);
    if (!r->sock || !r->t0 || zsock_connect(r->sock, "%s", endpoint) != 0)
        return -1;
    r->h = zsock_resolve(r->sock);
    return 0;
}

static void s_raw_close(s_raw_run_t *r)
{
    zsock_destroy(&r->sock);
    free(r->t0);
    r->t0 = NULL;
}

static void s_raw_slice(s_raw_run_t *r, double warmup_s, double seconds)
{
    s_cell_t *cell = r->cell;
    s_slice_begin(cell, warmup_s, seconds);
    for (uint32_t id = 0; id < r->depth && !cell->stop; id++)
        s_raw_send(r, id);
    while (r->outstanding > 0) {
        zmq_pollitem_t it = {r->h, 0, ZMQ_POLLIN, 0};
        int rc = zmq_poll(&it, 1, S_REPLY_TIMEOUT_MS);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0) { /* nothing within the reply timeout: the rest are lost */
            cell->errors += r->outstanding;
            r->outstanding = 0;
            break;
        }
        s_raw_drain(r);
    }
    s_slice_end(cell);
}

/* ---- report ---- */

static int s_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double rate, p50_us, p99_us;
    uint32_t n;
    uint64_t errors;
    bool full;
} s_result_t;

/* Nearest-rank percentiles; sorts the cell's samples. */
static s_result_t s_result(s_cell_t *c)
{
    s_result_t res = {.n = c->n, .errors = c->errors, .full = c->full};
    double secs = (double)c->elapsed * 1e-9;
    res.rate = secs > 0 ? c->n / secs : 0;
    if (c->n == 0)
        return res;
    qsort(c->lat, c->n, sizeof c->lat[0], s_cmp_u32);
    uint32_t i50 = (uint32_t)((c->n * 50ull + 99) / 100) - 1;
    uint32_t i99 = (uint32_t)((c->n * 99ull + 99) / 100) - 1;
    res.p50_us = c->lat[i50] * 1e-3;
    res.p99_us = c->lat[i99] * 1e-3;
    return res;
}

static void s_row(const char *transport, uint32_t depth, const s_result_t *k, const s_result_t *r)
{
    char kl[48], rl[48];
    snprintf(kl, sizeof kl, "%.1f / %.1f", k->p50_us, k->p99_us);
    snprintf(rl, sizeof rl, "%.1f / %.1f", r->p50_us, r->p99_us);
    printf("%-9s %9u %12.0f %12.0f %6.2f %20s %20s\n", transport, depth, k->rate, r->rate,
           r->rate > 0 ? k->rate / r->rate : 0.0, kl, rl);
    if (k->full || r->full)
        printf("          (latency array full: %s cell ended early)\n", k->full ? "kvtier" : "raw");
    if (k->errors || r->errors)
        printf("          FAILED round trips: kvtier %" PRIu64 ", raw %" PRIu64 "\n", k->errors,
               r->errors);
}

/* ---- per transport ---- */

/* One row: kvtier and raw at one depth, alternating slices so that a change in
 * background load hits both sides alike. */
static int s_pair(s_ctx_t *ctx, const char *kvt_ep, const char *raw_ep, uint32_t depth,
                  s_cell_t *kc, s_cell_t *rc, const char *name)
{
    s_kvt_run_t k = {0};
    s_raw_run_t r = {0};
    int ok =
        s_kvt_open(&k, ctx, kvt_ep, depth, kc) == 0 && s_raw_open(&r, ctx, raw_ep, depth, rc) == 0;
    s_cell_reset(kc);
    s_cell_reset(rc);
    double slice = ctx->args.seconds / ctx->args.rounds;
    for (uint32_t i = 0; ok && i < ctx->args.rounds && !kc->errors && !rc->errors; i++) {
        double warm = i == 0 ? ctx->warmup : 0.0;
        s_kvt_slice(&k, warm, slice);
        s_raw_slice(&r, warm, slice);
    }
    s_kvt_close(&k);
    s_raw_close(&r);
    if (!ok)
        return -1;
    s_result_t kr = s_result(kc), rr = s_result(rc);
    s_row(name, depth, &kr, &rr);
    fflush(stdout);
    return kr.errors || rr.errors || kr.n == 0 || rr.n == 0 ? -1 : 0;
}

static int s_transport(s_ctx_t *ctx, s_cell_t *cells, const char *name, const char *kvt_bind,
                       const char *raw_bind)
{
    s_server_args_t ks = {.bind = kvt_bind, .nkeys = ctx->args.keys, .rc = -1};
    s_server_args_t rs = {.bind = raw_bind, .rep_bytes = ctx->rep_bytes, .rc = -1};
    zactor_t *kvt = zactor_new(s_kvt_server, &ks);
    zactor_t *raw = zactor_new(s_raw_server, &rs);
    int rc = 0;
    if (!kvt || !raw || ks.rc != 0 || rs.rc != 0) {
        fprintf(stderr, "bus bench: cannot start the %s servers (%s, %s)\n", name, kvt_bind,
                raw_bind);
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < sizeof s_depths / sizeof s_depths[0]; i++)
        rc = s_pair(ctx, ks.endpoint, rs.endpoint, s_depths[i], &cells[0], &cells[1], name);
    zactor_destroy(&kvt);
    zactor_destroy(&raw);
    if (ks.failures || rs.failures) {
        fprintf(stderr,
                "bus bench: %s servers failed %" PRIu64 " (kvtier) / %" PRIu64 " (raw) replies\n",
                name, ks.failures, rs.failures);
        rc = -1;
    }
    return rc;
}

static int s_run_ipc(s_ctx_t *ctx, s_cell_t *cells)
{
    const char *tmp = getenv("TMPDIR");
    char dir[200], kvt[256], raw[256];
    snprintf(dir, sizeof dir, "%s/kvt-bench-bus-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "bus bench: mkdtemp %s: %s\n", dir, strerror(errno));
        return -1;
    }
    snprintf(kvt, sizeof kvt, "ipc://%s/kvtier.sock", dir);
    snprintf(raw, sizeof raw, "ipc://%s/raw.sock", dir);
    int rc = s_transport(ctx, cells, "ipc", kvt, raw);
    /* libzmq removes a bound ipc file on close; make sure, then remove the dir. */
    unlink(kvt + strlen("ipc://"));
    unlink(raw + strlen("ipc://"));
    if (rmdir(dir) != 0)
        fprintf(stderr, "bus bench: cannot remove %s: %s\n", dir, strerror(errno));
    return rc;
}

/* ---- setup ---- */

/* Encoded frame 0 sizes of the request and of its reply: the raw frame sizes. */
static int s_sizes(s_ctx_t *ctx)
{
    uint32_t n = ctx->args.keys;
    bus_arrays_t req_arr = {.keys = {.keys = ctx->pool, .n = n, .cap = n}};
    kvtier_Envelope *rep = malloc(sizeof *rep);
    kvtier_Status st;
    int rc = -1;
    if (!rep)
        return -1;
    ctx->req->corr_id = S_TYPICAL_CORR_ID;
    if (bus_env_encoded_size(ctx->req, &req_arr, &ctx->req_bytes, &st) < 0)
        goto out;
    bus_env_init_reply(rep, ctx->req, kvtier_Envelope_lookup_rep_tag, "bench-server");
    bus_arrays_t *ra = ctx->rep_arr;
    rep->body.lookup_rep.hit_count = s_answer(&req_arr.keys, ra->mask.v, ra->tier_ids.v);
    ra->mask.n = ra->tier_ids.n = n;
    if (bus_env_encoded_size(rep, ra, &ctx->rep_bytes, &st) < 0)
        goto out;
    rc = ctx->req_bytes >= S_RAW_ID_BYTES && ctx->rep_bytes >= S_RAW_ID_BYTES ? 0 : -1;
out:
    if (rc < 0)
        fprintf(stderr, "bus bench: sizing the messages failed: %s\n", st.message);
    free(rep);
    return rc;
}

static int s_ctx_init(s_ctx_t *ctx)
{
    uint32_t npool = ctx->args.keys + S_KEY_ROTATE;
    ctx->pool = malloc((size_t)npool * BUS_KEY_LEN);
    ctx->req = malloc(sizeof *ctx->req);
    ctx->rep_arr = bus_arrays_new(ctx->args.keys, 0);
    if (!ctx->pool || !ctx->req || !ctx->rep_arr)
        return -1;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (uint32_t i = 0; i < npool; i++) {
        for (int j = 0; j < BUS_KEY_LEN; j += 8) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            memcpy(&ctx->pool[i][j], &x, 8);
        }
    }
    s_request_init(ctx->req);
    if (s_sizes(ctx) < 0)
        return -1;
    ctx->raw_req = malloc(ctx->req_bytes);
    if (!ctx->raw_req)
        return -1;
    memcpy(ctx->raw_req, ctx->pool,
           ctx->req_bytes < (size_t)npool * BUS_KEY_LEN ? ctx->req_bytes
                                                        : (size_t)npool * BUS_KEY_LEN);
    return 0;
}

static void s_ctx_fini(s_ctx_t *ctx)
{
    free(ctx->pool);
    free(ctx->req);
    free(ctx->raw_req);
    bus_arrays_destroy(&ctx->rep_arr);
}

/* ---- codec alone: no sockets, thread CPU time (robust on a busy machine) ---- */

#define S_CODEC_ITERS 500 /* per batch */
#define S_CODEC_BATCHES 5 /* the best batch counts: preemption only ever adds */

static double s_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Microseconds per encode and per decode of env (arrays in arr) into `into`. */
static int s_codec_one(kvtier_Envelope *env, bus_arrays_t *arr, bus_dir_t dir,
                       kvtier_Envelope *into, bus_arrays_t *into_arr, uint8_t *buf, size_t cap,
                       double *enc_us, double *dec_us)
{
    kvtier_Status st;
    size_t len = 0;
    *enc_us = *dec_us = 1e30;
    for (int b = 0; b < S_CODEC_BATCHES; b++) {
        double t0 = s_cpu_s();
        for (int i = 0; i < S_CODEC_ITERS; i++)
            if (bus_env_encode_buf(env, arr, buf, cap, &len, &st) < 0)
                return -1;
        double t1 = s_cpu_s();
        for (int i = 0; i < S_CODEC_ITERS; i++)
            if (bus_env_decode(buf, len, dir, into, into_arr, &st) < 0)
                return -1;
        double t2 = s_cpu_s(), e = (t1 - t0) * 1e6 / S_CODEC_ITERS,
               d = (t2 - t1) * 1e6 / S_CODEC_ITERS;
        *enc_us = e < *enc_us ? e : *enc_us;
        *dec_us = d < *dec_us ? d : *dec_us;
    }
    return 0;
}

/* Prints the CPU cost of frame 0 for the request and the reply of one round trip. */
static int s_codec(s_ctx_t *ctx)
{
    uint32_t n = ctx->args.keys;
    bus_arrays_t req_arr = {.keys = {.keys = ctx->pool, .n = n, .cap = n}};
    size_t cap = (ctx->req_bytes > ctx->rep_bytes ? ctx->req_bytes : ctx->rep_bytes) + 64;
    kvtier_Envelope *rep = malloc(sizeof *rep), *into = malloc(sizeof *into);
    bus_arrays_t *into_arr = bus_arrays_new(n, 0);
    uint8_t *buf = malloc(cap);
    double qe = 0, qd = 0, pe = 0, pd = 0;
    int rc = -1;
    if (!rep || !into || !into_arr || !buf)
        goto out;
    bus_arrays_t *ra = ctx->rep_arr;
    bus_env_init_reply(rep, ctx->req, kvtier_Envelope_lookup_rep_tag, "bench-server");
    rep->body.lookup_rep.hit_count = s_answer(&req_arr.keys, ra->mask.v, ra->tier_ids.v);
    ra->mask.n = ra->tier_ids.n = n;
    if (s_codec_one(ctx->req, &req_arr, BUS_DIR_REQUEST, into, into_arr, buf, cap, &qe, &qd) < 0 ||
        s_codec_one(rep, ra, BUS_DIR_REPLY, into, into_arr, buf, cap, &pe, &pd) < 0)
        goto out;
    printf("codec alone (frame 0, thread CPU, best of %d): request encode %.1f + decode %.1f us, "
           "reply "
           "encode %.1f + decode %.1f us; %.1f us per round trip\n",
           S_CODEC_BATCHES, qe, qd, pe, pd, qe + qd + pe + pd);
    rc = 0;
out:
    if (rc < 0)
        fprintf(stderr, "bus bench: codec pass failed\n");
    free(rep);
    free(into);
    free(buf);
    bus_arrays_destroy(&into_arr);
    return rc;
}

static void s_usage(void)
{
    fprintf(stderr,
            "usage: kvt-bench bus [--seconds S] [--rounds R] [--transport tcp|ipc|both] "
            "[--keys N]\n"
            "  S timed seconds per side and cell (default 2, 0.1..600), after a warm-up of\n"
            "  S/10 (0.2..1 s), split into R alternating kvtier/raw slices (default %u,\n"
            "  1..100); N keys per LookupRequest (default %u, 1..%u).\n"
            "  Cells: 1 and 8 requests in flight per transport.\n",
            S_DEFAULT_ROUNDS, S_DEFAULT_KEYS, BUS_MAX_ARRAY);
}

static int s_parse(int argc, char **argv, struct s_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0)
            return 1;
        if (!val)
            return -1;
        i++;
        if (strcmp(opt, "--seconds") == 0) {
            a->seconds = strtod(val, &end);
        } else if (strcmp(opt, "--rounds") == 0) {
            unsigned long v = strtoul(val, &end, 10);
            a->rounds = v > 100 ? 0 : (uint32_t)v;
        } else if (strcmp(opt, "--keys") == 0) {
            unsigned long v = strtoul(val, &end, 10);
            a->keys = v > BUS_MAX_ARRAY ? 0 : (uint32_t)v;
        } else if (strcmp(opt, "--transport") == 0) {
            a->tcp = strcmp(val, "tcp") == 0 || strcmp(val, "both") == 0;
            a->ipc = strcmp(val, "ipc") == 0 || strcmp(val, "both") == 0;
            if (!a->tcp && !a->ipc)
                return -1;
        } else {
            return -1;
        }
        if (end && (end == val || *end != '\0'))
            return -1;
    }
    return a->seconds >= 0.1 && a->seconds <= 600 && a->keys >= 1 && a->rounds >= 1 ? 0 : -1;
}

int bench_bus(int argc, char **argv)
{
    s_ctx_t ctx = {.args = {.seconds = 2.0,
                            .rounds = S_DEFAULT_ROUNDS,
                            .tcp = true,
                            .ipc = true,
                            .keys = S_DEFAULT_KEYS}};
    int parsed = s_parse(argc, argv, &ctx.args);
    if (parsed != 0) {
        s_usage();
        return parsed > 0 ? 0 : 2;
    }
    double w = ctx.args.seconds / 10;
    ctx.warmup = w < 0.2 ? 0.2 : w > 1.0 ? 1.0 : w;
    double room = ctx.args.seconds * S_SAMPLES_PER_SEC + 1024;
    uint32_t cap = room > S_MAX_SAMPLES ? S_MAX_SAMPLES : (uint32_t)room;
    s_cell_t cells[2] = {{.cap = cap}, {.cap = cap}}; /* kvtier, raw */
    int rc = -1;
    for (int i = 0; i < 2; i++) {
        cells[i].lat = malloc((size_t)cap * sizeof cells[i].lat[0]);
        if (cells[i].lat) /* fault the pages in before timing */
            memset(cells[i].lat, 0, (size_t)cap * sizeof cells[i].lat[0]);
    }
    if (!cells[0].lat || !cells[1].lat || s_ctx_init(&ctx) < 0) {
        fprintf(stderr, "bus bench: setup failed (out of memory or sizing)\n");
        goto out;
    }
    rc = 0;
    printf("bus request/reply: LookupRequest %u keys (frame 0: %zu B) -> LookupReply (%zu B); "
           "raw = libzmq DEALER/ROUTER, one frame of the same size each way\n",
           ctx.args.keys, ctx.req_bytes, ctx.rep_bytes);
    printf("%.1f s timed per side and cell in %u alternating slices, after %.1f s warm-up; "
           "ratio = kvtier rt/s / raw rt/s\n",
           ctx.args.seconds, ctx.args.rounds, ctx.warmup);
    if (s_codec(&ctx) < 0) {
        rc = -1;
        goto out;
    }
    printf("%-9s %9s %12s %12s %6s %20s %20s\n", "transport", "in-flight", "kvtier rt/s",
           "raw rt/s", "ratio", "kvtier p50/p99 us", "raw p50/p99 us");
    if (ctx.args.tcp &&
        s_transport(&ctx, cells, "tcp", "tcp://127.0.0.1:*", "tcp://127.0.0.1:*") < 0)
        rc = -1;
    if (ctx.args.ipc && s_run_ipc(&ctx, cells) < 0)
        rc = -1;
out:
    free(cells[0].lat);
    free(cells[1].lat);
    s_ctx_fini(&ctx);
    return rc < 0 ? 1 : 0;
}
