/* bench_data.c — `kvt-bench data`: the data plane, put+get GB/s of KV blocks
 * through libkvtier against the real service started in this process (a host
 * tier actor with a pre-faulted shared-memory segment and the scheduler actor,
 * bench_svc.h), with the baseline of each path measured in the same run:
 *
 *   shm path   (disable_shm = false: the client maps the segment and copies)
 *              vs memcpy of the same bytes between pre-faulted buffers;
 *   frame path (disable_shm = true: WriteSlots / ReadSlots payload frames to the
 *              tier actor over tcp://127.0.0.1) vs a raw ZeroMQ DEALER/ROUTER
 *              stream moving the same blocks in messages of the same bounds, the
 *              server copying them into / out of a pre-faulted store as the tier
 *              actor does with its segment.
 *
 * The loop, identical on every side: batches of --batch fresh keys are put
 * (kvtier: prepare_put, submit_put, wait, complete_put), then the batch put
 * `lag` keys earlier is read back (prepare_get, submit_get, wait, complete_get)
 * and its stamp checked, so reads come from memory written long before (the lag
 * is a quarter of the tier: with LRU the read keys are never the victims). The
 * tier holds --shm-mib of slots of the block size; the caller's blocks rotate
 * through two pre-faulted pools of --pool-mib. Before timing each side writes
 * the whole tier once (so every page the client maps is mapped). A cell
 * alternates --rounds slices of the kvtier side and its baseline so background
 * load hits both alike. Put and get GB/s count wall time of their phases,
 * meta-plane calls included; "meta" is the kvtier time spent in prepare and
 * complete calls.
 *
 * Sets mallopt(M_MMAP_THRESHOLD, 64 MiB) and mallopt(M_TRIM_THRESHOLD, 1 GiB)
 * first (unless --default-malloc): 2 MiB ZeroMQ message buffers are then reused
 * from the heap instead of being fresh mmaps that fault every page in.
 *
 * Everything stops by itself: each cell is bounded by --seconds; actors and the
 * raw server are joined and the shm segment removed before return. Prints
 * tables; returns 0, 1 when setup or any batch fails, 2 on bad arguments. */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <czmq.h>
#include <zmq.h>

#include "bench.h"
#include "bench_svc.h"
#include "tier_checksum.h"

#define S_MAX_BATCH 128u
#define S_RAW_CHUNK_BLOCKS 128u         /* same bounds as the client's WriteSlots chunks */
#define S_RAW_CHUNK_BYTES (32ull << 20) /* (client/kvt_transport_frames.c S_CHUNK_*) */
#define S_RAW_TIMEOUT_MS 10000
#define S_WAIT_MS 10000
#define S_MMAP_THRESHOLD (64 << 20)
#define S_TRIM_THRESHOLD (1 << 30)

enum { S_OP_PUT = 1, S_OP_GET = 2 };

struct s_args {
    double seconds;
    uint32_t rounds;
    uint64_t sizes[2];
    uint32_t n_sizes;
    uint32_t batch;
    uint64_t shm_mib, pool_mib;
    bool shm, frame;
    bool default_malloc;
    bool remote;                 /* --tier-kind remote: the frame path against a remote tier */
    int transport;               /* S_TR_*: the remote tier's, and which client rows run */
    char bind[64];               /* --bind: the service's and the raw TCP server's address */
    const char *serve, *connect; /* two processes: --serve FILE / --connect FILE */
    /* --calls 2: once reads begin, a batch is one get+put window (kvt_prepare /
     * kvt_complete: two meta calls) instead of a put and a get window (four) */
    bool combined;
};
enum { S_TR_ZMQ = 0, S_TR_UCX = 1, S_TR_BOTH = 2 };

/* What one side did in timed slices. */
typedef struct {
    uint64_t put_bytes, get_bytes;
    uint64_t put_ns, get_ns, meta_ns;
    uint64_t call_ns[4]; /* prepare_put, complete_put, prepare_get, complete_get */
    uint64_t batches;
    uint64_t minflt; /* page faults of the whole process during its slices */
} s_side_t;

/* One block size: geometry and buffers shared by every side. */
typedef struct {
    uint64_t bs;    /* block bytes = slot size */
    uint64_t cap;   /* slots in the tier and in the baseline store */
    uint32_t batch; /* keys per batch */
    uint64_t lag;   /* a batch is read back this many keys after it was put */
    uint64_t npool; /* blocks in each of src and dst */
    uint8_t *src, *dst;
    uint8_t *store; /* baseline store: cap * bs, pre-faulted */
    uint64_t nonce; /* stamps and keys differ per block size */
} s_geo_t;

/* Where a side is in its id sequence. */
typedef struct {
    uint64_t base; /* first id of this side */
    uint64_t next; /* next id to put */
} s_seq_t;

static uint64_t s_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Anonymous memory with every page mapped now (first touch is slow on VMs). */
static void *s_prefaulted(size_t len)
{
    void *p =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static uint8_t *s_src(const s_geo_t *g, uint64_t id)
{
    return g->src + (id % g->npool) * g->bs;
}

static uint8_t *s_dst(const s_geo_t *g, uint64_t id)
{
    return g->dst + (id % g->npool) * g->bs;
}

static uint64_t s_stamp_of(const s_geo_t *g, uint64_t id)
{
    return id ^ g->nonce;
}

/* The block's first and last 8 bytes carry its id: a read-back is checked. */
static void s_stamp(const s_geo_t *g, uint8_t *blk, uint64_t id)
{
    uint64_t v = s_stamp_of(g, id);
    memcpy(blk, &v, 8);
    memcpy(blk + g->bs - 8, &v, 8);
}

static bool s_stamp_ok(const s_geo_t *g, const uint8_t *blk, uint64_t id)
{
    uint64_t a, b, v = s_stamp_of(g, id);
    memcpy(&a, blk, 8);
    memcpy(&b, blk + g->bs - 8, 8);
    return a == v && b == v;
}

/* ---- kvtier side: libkvtier against the service ---- */

typedef struct {
    const s_geo_t *g;
    kvt_client_t *c;
    char rid[64];
    uint64_t job;
    s_seq_t seq;
    bool combined; /* struct s_args.combined */
    kvt_key_t keys[2 * S_MAX_BATCH];
    const void *pbufs[S_MAX_BATCH];
    void *gbufs[S_MAX_BATCH];
} s_kvt_t;

static int s_kvt_fail(s_kvt_t *k, const char *what)
{
    fprintf(stderr, "data bench: %s: %s\n", what, kvt_last_error(k->c));
    return -1;
}

/* Runs one job to completion. */
static int s_kvt_wait(s_kvt_t *k, const char *what)
{
    kvt_job_result_t res;
    if (kvt_wait(k->c, &k->job, 1, S_WAIT_MS, &res) != 0)
        return s_kvt_fail(k, what);
    if (res.status != 0 || res.n_failed != 0) {
        fprintf(stderr, "data bench: %s: job status %s, %u of %u keys failed: %s\n", what,
                kvt_status_name(res.status), res.n_failed, res.n_keys, kvt_last_error(k->c));
        return -1;
    }
    return 0;
}

/* prepare_put, submit_put, wait, complete_put for ids [first, first + n). */
static int s_kvt_put(s_kvt_t *k, uint64_t first, uint32_t n, s_side_t *side)
{
    const s_geo_t *g = k->g;
    for (uint32_t i = 0; i < n; i++) {
        bench_svc_key(g->nonce, first + i, &k->keys[i]);
        uint8_t *b = s_src(g, first + i);
        s_stamp(g, b, first + i);
        k->pbufs[i] = b;
    }
    kvt_token_t *tok = NULL;
    uint64_t t0 = s_now_ns();
    if (kvt_prepare_put(k->c, BENCH_SVC_INSTANCE, k->rid, k->keys, n, &tok) != 0)
        return s_kvt_fail(k, "prepare_put");
    uint64_t t1 = s_now_ns();
    /* fresh keys: the token lists them all, in request order */
    if (kvt_token_count(tok) != n || memcmp(kvt_token_keys(tok), k->keys, n * sizeof k->keys[0])) {
        fprintf(stderr, "data bench: prepare_put: token holds %u of %u fresh keys\n",
                kvt_token_count(tok), n);
        kvt_complete_put(k->c, &tok, NULL);
        return -1;
    }
    k->job++;
    if (kvt_submit_put(k->c, k->job, tok, k->pbufs, g->bs) != 0) {
        s_kvt_fail(k, "submit_put");
        kvt_complete_put(k->c, &tok, NULL);
        return -1;
    }
    if (s_kvt_wait(k, "put") != 0) {
        kvt_complete_put(k->c, &tok, NULL);
        return -1;
    }
    uint64_t t2 = s_now_ns();
    if (kvt_complete_put(k->c, &tok, NULL) != 0)
        return s_kvt_fail(k, "complete_put");
    if (side) {
        uint64_t t3 = s_now_ns();
        side->meta_ns += (t1 - t0) + (t3 - t2);
        side->call_ns[0] += t1 - t0;
        side->call_ns[1] += t3 - t2;
    }
    return 0;
}

/* prepare_get, submit_get, wait, complete_get for ids [first, first + n). */
static int s_kvt_get(s_kvt_t *k, uint64_t first, uint32_t n, s_side_t *side)
{
    const s_geo_t *g = k->g;
    for (uint32_t i = 0; i < n; i++) {
        bench_svc_key(g->nonce, first + i, &k->keys[i]);
        k->gbufs[i] = s_dst(g, first + i);
    }
    kvt_token_t *tok = NULL;
    uint64_t t0 = s_now_ns();
    if (kvt_prepare_get(k->c, BENCH_SVC_INSTANCE, k->rid, k->keys, n, &tok) != 0)
        return s_kvt_fail(k, "prepare_get");
    uint64_t t1 = s_now_ns();
    if (kvt_token_count(tok) != n) {
        fprintf(stderr, "data bench: prepare_get: %u of %u keys cached (evicted too early?)\n",
                kvt_token_count(tok), n);
        kvt_complete_get(k->c, &tok, NULL);
        return -1;
    }
    k->job++;
    if (kvt_submit_get(k->c, k->job, tok, k->gbufs, g->bs) != 0) {
        s_kvt_fail(k, "submit_get");
        kvt_complete_get(k->c, &tok, NULL);
        return -1;
    }
    if (s_kvt_wait(k, "get") != 0) {
        kvt_complete_get(k->c, &tok, NULL);
        return -1;
    }
    uint64_t t2 = s_now_ns();
    if (kvt_complete_get(k->c, &tok, NULL) != 0)
        return s_kvt_fail(k, "complete_get");
    if (side) {
        uint64_t t3 = s_now_ns();
        side->meta_ns += (t1 - t0) + (t3 - t2);
        side->call_ns[2] += t1 - t0;
        side->call_ns[3] += t3 - t2;
    }
    for (uint32_t i = 0; i < n; i++)
        if (!s_stamp_ok(g, k->gbufs[i], first + i)) {
            fprintf(stderr, "data bench: get: block %" PRIu64 " read back wrong bytes\n",
                    first + i);
            return -1;
        }
    return 0;
}

/* One get+put window: the batch put `lag` keys ago (ids [gfirst, gfirst + n), the
 * cached prefix) and n fresh ids from pfirst (the misses) in one kvt_prepare; the
 * get and the put half go as two jobs at once; one kvt_complete concludes both.
 * Its wall time counts half to put and half to get (they overlap). */
static int s_kvt_both(s_kvt_t *k, uint64_t pfirst, uint64_t gfirst, uint32_t n, s_side_t *side)
{
    const s_geo_t *g = k->g;
    for (uint32_t i = 0; i < n; i++) {
        bench_svc_key(g->nonce, gfirst + i, &k->keys[i]);
        k->gbufs[i] = s_dst(g, gfirst + i);
        bench_svc_key(g->nonce, pfirst + i, &k->keys[n + i]);
        uint8_t *b = s_src(g, pfirst + i);
        s_stamp(g, b, pfirst + i);
        k->pbufs[i] = b;
    }
    kvt_token_t *tok = NULL;
    kvt_prepare_info_t info;
    uint64_t t0 = s_now_ns();
    if (kvt_prepare(k->c, BENCH_SVC_INSTANCE, k->rid, k->keys, 2 * n, NULL, &tok, &info) != 0)
        return s_kvt_fail(k, "prepare (get+put)");
    uint64_t t1 = s_now_ns();
    kvt_token_t *gh = kvt_token_half(tok, KVT_HALF_GET), *ph = kvt_token_half(tok, KVT_HALF_PUT);
    if (info.hit_count != n || !gh || !ph || kvt_token_count(gh) != n ||
        kvt_token_count(ph) != n) {
        fprintf(stderr, "data bench: prepare (get+put): %u hits and %u to write, want %u and %u\n",
                info.hit_count, ph ? kvt_token_count(ph) : 0, n, n);
        kvt_complete(k->c, &tok, NULL, NULL, NULL);
        return -1;
    }
    uint64_t jobs[2] = {k->job + 1, k->job + 2};
    k->job += 2;
    if (kvt_submit_get(k->c, jobs[0], gh, k->gbufs, g->bs) != 0 ||
        kvt_submit_put(k->c, jobs[1], ph, k->pbufs, g->bs) != 0) {
        s_kvt_fail(k, "submit (get+put)");
        kvt_job_result_t drop[2];
        (void)kvt_wait(k->c, jobs, 2, S_WAIT_MS, drop);
        kvt_complete(k->c, &tok, NULL, NULL, NULL);
        return -1;
    }
    kvt_job_result_t res[2];
    if (kvt_wait(k->c, jobs, 2, S_WAIT_MS, res) != 0 || res[0].status || res[0].n_failed ||
        res[1].status || res[1].n_failed) {
        s_kvt_fail(k, "get+put jobs");
        kvt_complete(k->c, &tok, NULL, NULL, NULL);
        return -1;
    }
    uint64_t t2 = s_now_ns();
    if (kvt_complete(k->c, &tok, NULL, NULL, NULL) != 0)
        return s_kvt_fail(k, "complete (get+put)");
    uint64_t t3 = s_now_ns();
    if (side) {
        side->meta_ns += (t1 - t0) + (t3 - t2);
        side->call_ns[0] += t1 - t0; /* prepare */
        side->call_ns[1] += t3 - t2; /* complete */
        side->put_ns += (t3 - t0) / 2;
        side->get_ns += (t3 - t0) - (t3 - t0) / 2;
        side->put_bytes += (uint64_t)n * g->bs;
        side->get_bytes += (uint64_t)n * g->bs;
        side->batches++;
    }
    for (uint32_t i = 0; i < n; i++)
        if (!s_stamp_ok(g, k->gbufs[i], gfirst + i)) {
            fprintf(stderr, "data bench: get+put: block %" PRIu64 " read back wrong bytes\n",
                    gfirst + i);
            return -1;
        }
    return 0;
}

static int s_kvt_request(s_kvt_t *k, bool begin)
{
    static unsigned s_n;
    if (begin) {
        snprintf(k->rid, sizeof k->rid, "data-%u", s_n++);
        kvt_request_t r = {.instance_id = BENCH_SVC_INSTANCE, .request_id = k->rid};
        return kvt_request_begin(k->c, &r) == 0 ? 0 : s_kvt_fail(k, "request_begin");
    }
    return kvt_request_end(k->c, BENCH_SVC_INSTANCE, k->rid, NULL) == 0
               ? 0
               : s_kvt_fail(k, "request_end");
}

/* ---- memcpy baseline: the same bytes between pre-faulted buffers ---- */

static int s_copy_put(const s_geo_t *g, uint64_t first, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *b = s_src(g, first + i);
        s_stamp(g, b, first + i);
        memcpy(g->store + ((first + i) % g->cap) * g->bs, b, g->bs);
    }
    return 0;
}

static int s_copy_get(const s_geo_t *g, uint64_t first, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *b = s_dst(g, first + i);
        memcpy(b, g->store + ((first + i) % g->cap) * g->bs, g->bs);
        if (!s_stamp_ok(g, b, first + i)) {
            fprintf(stderr, "data bench: memcpy: block %" PRIu64 " wrong\n", first + i);
            return -1;
        }
    }
    return 0;
}

/* ---- raw ZeroMQ baseline: DEALER/ROUTER, same message bounds as the client ---- */

typedef struct {
    uint32_t op, count;
    uint64_t first;
} s_raw_hdr_t;

typedef struct {
    const s_geo_t *g;
    char endpoint[256];
    int rc;
    uint64_t failures;
} s_raw_srv_t;

/* Receives the rest of a multipart message and drops it. */
static void s_drain_more(void *h, zmq_msg_t *m)
{
    while (zmq_msg_more(m) && zmq_msg_recv(m, h, 0) >= 0)
        ;
}

/* One request: [rid][hdr] then, for a put, hdr.count blocks. */
static int s_raw_serve_one(s_raw_srv_t *a, void *h)
{
    const s_geo_t *g = a->g;
    zmq_msg_t rid, m;
    zmq_msg_init(&rid);
    if (zmq_msg_recv(&rid, h, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&rid);
        return 0;
    }
    zmq_msg_init(&m);
    s_raw_hdr_t hdr = {0};
    bool ok = zmq_msg_more(&rid) && zmq_msg_recv(&m, h, 0) >= 0 && zmq_msg_size(&m) == sizeof hdr;
    if (ok)
        memcpy(&hdr, zmq_msg_data(&m), sizeof hdr);
    for (uint32_t i = 0; ok && hdr.op == S_OP_PUT && i < hdr.count; i++) {
        ok = zmq_msg_more(&m) && zmq_msg_recv(&m, h, 0) >= 0 && zmq_msg_size(&m) == g->bs;
        if (ok)
            memcpy(g->store + ((hdr.first + i) % g->cap) * g->bs, zmq_msg_data(&m), g->bs);
    }
    s_drain_more(h, &m);
    zmq_msg_close(&m);
    ok = ok && (hdr.op == S_OP_PUT || hdr.op == S_OP_GET) &&
         zmq_msg_send(&rid, h, ZMQ_SNDMORE) >= 0 &&
         zmq_send(h, &hdr, sizeof hdr, hdr.op == S_OP_GET && hdr.count ? ZMQ_SNDMORE : 0) >= 0;
    for (uint32_t i = 0; ok && hdr.op == S_OP_GET && i < hdr.count; i++)
        ok = zmq_send(h, g->store + ((hdr.first + i) % g->cap) * g->bs, g->bs,
                      i + 1 < hdr.count ? ZMQ_SNDMORE : 0) >= 0;
    if (!ok)
        a->failures++;
    zmq_msg_close(&rid);
    return 1;
}

static void s_raw_server(zsock_t *pipe, void *args)
{
    s_raw_srv_t *a = args;
    zsock_t *sock = zsock_new(ZMQ_ROUTER);
    a->rc = sock && zsock_bind(sock, "tcp://127.0.0.1:*") >= 0 ? 0 : -1;
    if (a->rc == 0) {
        char *ep = zsock_last_endpoint(sock);
        snprintf(a->endpoint, sizeof a->endpoint, "%s", ep ? ep : "");
        zstr_free(&ep);
    }
    zsock_signal(pipe, 0);
    void *h = sock ? zsock_resolve(sock) : NULL;
    zmq_pollitem_t items[2] = {{zsock_resolve(pipe), 0, ZMQ_POLLIN, 0}, {h, 0, ZMQ_POLLIN, 0}};
    while (a->rc == 0) {
        if (zmq_poll(items, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (items[0].revents & ZMQ_POLLIN)
            break; /* $TERM: the only command */
        while (s_raw_serve_one(a, h) == 1)
            ;
    }
    zsock_destroy(&sock);
}

typedef struct {
    const s_geo_t *g;
    zsock_t *sock;
    void *h;
} s_raw_t;

static uint32_t s_raw_chunk(const s_geo_t *g)
{
    uint64_t by_bytes = S_RAW_CHUNK_BYTES / g->bs;
    uint64_t n = by_bytes < S_RAW_CHUNK_BLOCKS ? by_bytes : S_RAW_CHUNK_BLOCKS;
    return n ? (uint32_t)n : 1u;
}

/* Waits for one reply's header; its payload stays to be read. */
static int s_raw_recv_hdr(s_raw_t *r, zmq_msg_t *m, s_raw_hdr_t *hdr)
{
    zmq_pollitem_t it = {r->h, 0, ZMQ_POLLIN, 0};
    for (;;) {
        int rc = zmq_poll(&it, 1, S_RAW_TIMEOUT_MS);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            return -1;
        break;
    }
    if (zmq_msg_recv(m, r->h, 0) < 0 || zmq_msg_size(m) != sizeof *hdr)
        return -1;
    memcpy(hdr, zmq_msg_data(m), sizeof *hdr);
    return 0;
}

static int s_raw_put(s_raw_t *r, uint64_t first, uint32_t n)
{
    const s_geo_t *g = r->g;
    uint32_t chunk = s_raw_chunk(g), sent = 0;
    for (uint32_t off = 0; off < n; off += chunk, sent++) {
        s_raw_hdr_t hdr = {S_OP_PUT, n - off < chunk ? n - off : chunk, first + off};
        if (zmq_send(r->h, &hdr, sizeof hdr, ZMQ_SNDMORE) < 0)
            return -1;
        for (uint32_t i = 0; i < hdr.count; i++) {
            uint8_t *b = s_src(g, hdr.first + i);
            s_stamp(g, b, hdr.first + i);
            if (zmq_send(r->h, b, g->bs, i + 1 < hdr.count ? ZMQ_SNDMORE : 0) < 0)
                return -1;
        }
    }
    zmq_msg_t m;
    zmq_msg_init(&m);
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < sent; i++) {
        s_raw_hdr_t hdr;
        rc = s_raw_recv_hdr(r, &m, &hdr) == 0 && hdr.op == S_OP_PUT ? 0 : -1;
        s_drain_more(r->h, &m);
    }
    zmq_msg_close(&m);
    if (rc < 0)
        fprintf(stderr, "data bench: raw put: no or bad ack\n");
    return rc;
}

static int s_raw_get(s_raw_t *r, uint64_t first, uint32_t n)
{
    const s_geo_t *g = r->g;
    uint32_t chunk = s_raw_chunk(g), sent = 0;
    for (uint32_t off = 0; off < n; off += chunk, sent++) {
        s_raw_hdr_t hdr = {S_OP_GET, n - off < chunk ? n - off : chunk, first + off};
        if (zmq_send(r->h, &hdr, sizeof hdr, 0) < 0)
            return -1;
    }
    zmq_msg_t m;
    zmq_msg_init(&m);
    int rc = 0;
    for (uint32_t c = 0; rc == 0 && c < sent; c++) {
        s_raw_hdr_t hdr;
        rc = s_raw_recv_hdr(r, &m, &hdr) == 0 && hdr.op == S_OP_GET ? 0 : -1;
        for (uint32_t i = 0; rc == 0 && i < hdr.count; i++) {
            uint8_t *b = s_dst(g, hdr.first + i);
            if (!zmq_msg_more(&m) || zmq_msg_recv(&m, r->h, 0) < 0 || zmq_msg_size(&m) != g->bs) {
                rc = -1;
                break;
            }
            memcpy(b, zmq_msg_data(&m), g->bs);
            if (!s_stamp_ok(g, b, hdr.first + i))
                rc = -1;
        }
        s_drain_more(r->h, &m);
    }
    zmq_msg_close(&m);
    if (rc < 0)
        fprintf(stderr, "data bench: raw get: missing or wrong blocks\n");
    return rc;
}

/* ---- raw TCP baseline: plain sockets moving the same blocks (remote tier) ---- */

typedef struct {
    const s_geo_t *g;
    int lfd;
    char host[64];
    uint16_t port;
    pthread_t th;
    bool started;
    volatile bool stop;
    uint64_t failures;
} s_tcp_srv_t;

typedef struct {
    const s_geo_t *g;
    int fd;
} s_tcp_t;

static int s_full(int fd, void *buf, size_t len, bool out)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t k = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

/* One connection: [hdr] then hdr.count blocks for a put (acked with the header);
 * a get is answered with the header and its blocks, from the pre-faulted store. */
static void s_tcp_serve_conn(s_tcp_srv_t *a, int fd);

static void *s_tcp_server(void *arg)
{
    s_tcp_srv_t *a = arg;
    while (!a->stop) { /* one connection at a time, each row its own */
        int fd = -1;
        struct pollfd p = {.fd = a->lfd, .events = POLLIN};
        if (poll(&p, 1, 100) > 0)
            fd = accept(a->lfd, NULL, NULL);
        if (fd >= 0)
            s_tcp_serve_conn(a, fd);
    }
    return NULL;
}

static void s_tcp_serve_conn(s_tcp_srv_t *a, int fd)
{
    const s_geo_t *g = a->g;
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    s_raw_hdr_t hdr;
    while (!a->stop && s_full(fd, &hdr, sizeof hdr, false) == 0) {
        bool ok = hdr.op == S_OP_PUT || hdr.op == S_OP_GET;
        for (uint32_t i = 0; ok && hdr.op == S_OP_PUT && i < hdr.count; i++)
            ok = s_full(fd, g->store + ((hdr.first + i) % g->cap) * g->bs, g->bs, false) == 0;
        ok = ok && s_full(fd, &hdr, sizeof hdr, true) == 0;
        for (uint32_t i = 0; ok && hdr.op == S_OP_GET && i < hdr.count; i++)
            ok = s_full(fd, g->store + ((hdr.first + i) % g->cap) * g->bs, g->bs, true) == 0;
        if (!ok) {
            a->failures++;
            break;
        }
    }
    close(fd);
}

static int s_tcp_listen(s_tcp_srv_t *a, const char *ip)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof sa;
    a->lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (a->lfd < 0 || inet_pton(AF_INET, ip, &sa.sin_addr) != 1 ||
        bind(a->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(a->lfd, 4) != 0 ||
        getsockname(a->lfd, (struct sockaddr *)&sa, &sl) != 0) {
        fprintf(stderr, "data bench: raw tcp server on %s: %s\n", ip, strerror(errno));
        return -1;
    }
    snprintf(a->host, sizeof a->host, "%s", ip);
    a->port = ntohs(sa.sin_port);
    if (pthread_create(&a->th, NULL, s_tcp_server, a) != 0)
        return -1;
    a->started = true;
    return 0;
}

static void s_tcp_stop(s_tcp_srv_t *a)
{
    a->stop = true;
    if (a->started)
        pthread_join(a->th, NULL);
    if (a->lfd >= 0)
        close(a->lfd);
    a->started = false;
    a->lfd = -1;
}

static int s_tcp_connect(s_tcp_t *t, const char *host, uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    t->fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    if (t->fd < 0 || inet_pton(AF_INET, host, &sa.sin_addr) != 1 ||
        connect(t->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        fprintf(stderr, "data bench: raw tcp to %s:%u: %s\n", host, port, strerror(errno));
        return -1;
    }
    (void)setsockopt(t->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return 0;
}

static int s_tcp_put(s_tcp_t *t, uint64_t first, uint32_t n)
{
    const s_geo_t *g = t->g;
    s_raw_hdr_t hdr = {S_OP_PUT, n, first};
    int rc = s_full(t->fd, &hdr, sizeof hdr, true);
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        uint8_t *b = s_src(g, first + i);
        s_stamp(g, b, first + i);
        rc = s_full(t->fd, b, g->bs, true);
    }
    if (rc == 0)
        rc = s_full(t->fd, &hdr, sizeof hdr, false) == 0 && hdr.op == S_OP_PUT ? 0 : -1;
    if (rc < 0)
        fprintf(stderr, "data bench: raw tcp put failed\n");
    return rc;
}

static int s_tcp_get(s_tcp_t *t, uint64_t first, uint32_t n)
{
    const s_geo_t *g = t->g;
    s_raw_hdr_t hdr = {S_OP_GET, n, first};
    int rc = s_full(t->fd, &hdr, sizeof hdr, true) == 0 &&
                     s_full(t->fd, &hdr, sizeof hdr, false) == 0 && hdr.op == S_OP_GET
                 ? 0
                 : -1;
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        uint8_t *b = s_dst(g, first + i);
        rc = s_full(t->fd, b, g->bs, false) == 0 && s_stamp_ok(g, b, first + i) ? 0 : -1;
    }
    if (rc < 0)
        fprintf(stderr, "data bench: raw tcp get: missing or wrong blocks\n");
    return rc;
}

/* ---- sides and slices ---- */

typedef enum { S_KVT, S_MEMCPY, S_RAW, S_TCP } s_kind_t;

typedef struct {
    s_kind_t kind;
    s_kvt_t *kvt;
    s_raw_t *raw;
    s_tcp_t *tcp;
    const s_geo_t *g;
    s_seq_t own; /* memcpy / raw id sequence */
    s_side_t side;
} s_runner_t;

static s_seq_t *s_seq(s_runner_t *r)
{
    return r->kind == S_KVT ? &r->kvt->seq : &r->own;
}

static int s_put(s_runner_t *r, uint64_t first, uint32_t n, s_side_t *side)
{
    switch (r->kind) {
    case S_KVT:
        return s_kvt_put(r->kvt, first, n, side);
    case S_MEMCPY:
        return s_copy_put(r->g, first, n);
    case S_RAW:
        return s_raw_put(r->raw, first, n);
    case S_TCP:
        return s_tcp_put(r->tcp, first, n);
    }
    return -1;
}

static int s_get(s_runner_t *r, uint64_t first, uint32_t n, s_side_t *side)
{
    switch (r->kind) {
    case S_KVT:
        return s_kvt_get(r->kvt, first, n, side);
    case S_MEMCPY:
        return s_copy_get(r->g, first, n);
    case S_RAW:
        return s_raw_get(r->raw, first, n);
    case S_TCP:
        return s_tcp_get(r->tcp, first, n);
    }
    return -1;
}

/* One batch: put the next ids, read back those put `lag` keys ago (when there are
 * any). Adds to side when side is not NULL (timed). */
static int s_batch(s_runner_t *r, s_side_t *side)
{
    const s_geo_t *g = r->g;
    s_seq_t *q = s_seq(r);
    if (r->kind == S_KVT && r->kvt->combined && q->next - q->base >= g->lag) {
        /* the read-back batch and the next fresh one in one window */
        uint64_t first = q->next;
        q->next += g->batch;
        return s_kvt_both(r->kvt, first, q->next - g->lag - g->batch, g->batch, side);
    }
    uint64_t t0 = s_now_ns();
    if (s_put(r, q->next, g->batch, side) != 0)
        return -1;
    uint64_t t1 = s_now_ns();
    q->next += g->batch;
    if (q->next - q->base < g->lag + g->batch)
        return 0;
    if (s_get(r, q->next - g->lag - g->batch, g->batch, side) != 0)
        return -1;
    uint64_t t2 = s_now_ns();
    if (side) {
        side->put_ns += t1 - t0;
        side->get_ns += t2 - t1;
        side->put_bytes += (uint64_t)g->batch * g->bs;
        side->get_bytes += (uint64_t)g->batch * g->bs;
        side->batches++;
    }
    return 0;
}

static int s_with_request(s_runner_t *r, bool begin)
{
    return r->kind == S_KVT ? s_kvt_request(r->kvt, begin) : 0;
}

/* Writes the whole tier (store) once, untimed. */
static int s_warm(s_runner_t *r)
{
    int rc = s_with_request(r, true);
    while (rc == 0 && s_seq(r)->next - s_seq(r)->base < r->g->cap + r->g->lag)
        rc = s_batch(r, NULL);
    return s_with_request(r, false) == 0 ? rc : -1;
}

static uint64_t s_minflt(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (uint64_t)ru.ru_minflt : 0;
}

static int s_slice(s_runner_t *r, double seconds)
{
    int rc = s_with_request(r, true);
    uint64_t f0 = s_minflt();
    uint64_t end = s_now_ns() + (uint64_t)(seconds * 1e9);
    while (rc == 0 && s_now_ns() < end)
        rc = s_batch(r, &r->side);
    r->side.minflt += s_minflt() - f0;
    return s_with_request(r, false) == 0 ? rc : -1;
}

/* ---- report ---- */

static double s_gbps(uint64_t bytes, uint64_t ns)
{
    return ns ? (double)bytes / (double)ns : 0.0;
}

static void s_row(const char *bsname, const char *path, const char *base, const s_side_t *k,
                  const s_side_t *b)
{
    uint64_t kns = k->put_ns + k->get_ns, kbytes = k->put_bytes + k->get_bytes;
    double kc = s_gbps(kbytes, kns);
    double bc = s_gbps(b->put_bytes + b->get_bytes, b->put_ns + b->get_ns);
    double meta = kns ? 100.0 * (double)k->meta_ns / (double)kns : 0.0;
    double bytes_only = s_gbps(kbytes, kns > k->meta_ns ? kns - k->meta_ns : 0);
    char kv[48], bv[48];
    snprintf(kv, sizeof kv, "%.2f / %.2f / %.2f", s_gbps(k->put_bytes, k->put_ns),
             s_gbps(k->get_bytes, k->get_ns), kc);
    snprintf(bv, sizeof bv, "%.2f / %.2f / %.2f", s_gbps(b->put_bytes, b->put_ns),
             s_gbps(b->get_bytes, b->get_ns), bc);
    double kmib = (double)kbytes / (1 << 20),
           bmib = (double)(b->put_bytes + b->get_bytes) / (1 << 20);
    printf("%-7s %-6s %-22s %-8s %-22s %6.2f %5.0f%% %9.2f %6.2f %8" PRIu64 " %5.1f/%.1f\n", bsname,
           path, kv, base, bv, bc > 0 ? kc / bc : 0.0, meta, bytes_only,
           bc > 0 ? bytes_only / bc : 0.0, k->batches, kmib > 0 ? (double)k->minflt / kmib : 0.0,
           bmib > 0 ? (double)b->minflt / bmib : 0.0);
    if (k->batches && !k->call_ns[2] && !k->call_ns[3])
        printf("        kvtier mean us per call: prepare (get+put) %.0f, complete %.0f\n",
               (double)k->call_ns[0] / (double)k->batches * 1e-3,
               (double)k->call_ns[1] / (double)k->batches * 1e-3);
    else if (k->batches)
        printf("        kvtier mean us per call: prepare_put %.0f, complete_put %.0f, "
               "prepare_get %.0f, complete_get %.0f\n",
               (double)k->call_ns[0] / (double)k->batches * 1e-3,
               (double)k->call_ns[1] / (double)k->batches * 1e-3,
               (double)k->call_ns[2] / (double)k->batches * 1e-3,
               (double)k->call_ns[3] / (double)k->batches * 1e-3);
    fflush(stdout);
}

static void s_bsname(uint64_t bs, char *buf, size_t len)
{
    if (bs % (1u << 20) == 0)
        snprintf(buf, len, "%" PRIu64 "MiB", bs >> 20);
    else if (bs % 1024 == 0)
        snprintf(buf, len, "%" PRIu64 "KiB", bs >> 10);
    else
        snprintf(buf, len, "%" PRIu64 "B", bs);
}

/* One row: kvtier side and its baseline, warmed, then alternating slices. */
static int s_cell(const struct s_args *a, s_runner_t *k, s_runner_t *b, const char *path,
                  const char *base)
{
    if (s_warm(k) != 0 || s_warm(b) != 0)
        return -1;
    double slice = a->seconds / a->rounds;
    for (uint32_t i = 0; i < a->rounds; i++)
        if (s_slice(k, slice) != 0 || s_slice(b, slice) != 0)
            return -1;
    char bsname[32];
    s_bsname(k->g->bs, bsname, sizeof bsname);
    s_row(bsname, path, base, &k->side, &b->side);
    return 0;
}

static int s_cell_shm(const struct s_args *a, bench_svc_t *svc, s_geo_t *g)
{
    s_kvt_t *kvt = calloc(1, sizeof *kvt);
    if (!kvt)
        return -1;
    *kvt = (s_kvt_t){.g = g, .c = bench_svc_connect(svc, false, "bench-shm"), .combined = a->combined};
    s_runner_t k = {.kind = S_KVT, .kvt = kvt, .g = g};
    s_runner_t b = {.kind = S_MEMCPY, .g = g};
    int rc = kvt->c ? s_cell(a, &k, &b, "shm", "memcpy") : -1;
    kvt_close(&kvt->c);
    free(kvt);
    return rc;
}

static int s_cell_frame(const struct s_args *a, bench_svc_t *svc, s_geo_t *g)
{
    s_kvt_t *kvt = calloc(1, sizeof *kvt);
    s_raw_srv_t srv = {.g = g, .rc = -1};
    s_raw_t raw = {.g = g};
    int rc = -1;
    zactor_t *server = zactor_new(s_raw_server, &srv);
    if (!kvt || !server || srv.rc != 0)
        goto out;
    raw.sock = zsock_new(ZMQ_DEALER);
    if (!raw.sock || zsock_connect(raw.sock, "%s", srv.endpoint) != 0)
        goto out;
    raw.h = zsock_resolve(raw.sock);
    /* the kvtier side continues the id space the shm cell used: keys stay fresh */
    *kvt = (s_kvt_t){.g = g, .c = bench_svc_connect(svc, true, "bench-frames"), .combined = a->combined};
    kvt->seq.base = kvt->seq.next = (uint64_t)1 << 40;
    s_runner_t k = {.kind = S_KVT, .kvt = kvt, .g = g};
    s_runner_t b = {.kind = S_RAW, .raw = &raw, .g = g};
    rc = kvt->c ? s_cell(a, &k, &b, "frame", "raw zmq") : -1;
out:
    if (kvt)
        kvt_close(&kvt->c);
    free(kvt);
    zsock_destroy(&raw.sock);
    zactor_destroy(&server);
    if (srv.failures) {
        fprintf(stderr, "data bench: raw server failed %" PRIu64 " requests\n", srv.failures);
        rc = -1;
    }
    return rc;
}

/* The remote tier against raw TCP: one row per client transport asked (frames with
 * KVT_UCX=0 set while its handle opens; UCX when the tier serves it), each with
 * its own connection to the raw TCP server, in alternating slices. */
static int s_cell_remote(const struct s_args *a, bench_svc_t *svc, s_geo_t *g, const char *host,
                         uint16_t port)
{
    int rc = 0;
    for (int row = 0; row < 2 && rc == 0; row++) {
        bool ucx = row == 1;
        if ((ucx && a->transport == S_TR_ZMQ) || (!ucx && a->transport == S_TR_UCX))
            continue;
        s_kvt_t *kvt = calloc(1, sizeof *kvt);
        s_tcp_t tcp = {.g = g, .fd = -1};
        if (!kvt || s_tcp_connect(&tcp, host, port) != 0) {
            free(kvt);
            if (tcp.fd >= 0)
                close(tcp.fd);
            return -1;
        }
        if (!ucx)
            setenv("KVT_UCX", "0", 1);
        *kvt = (s_kvt_t){.g = g,
                         .c = bench_svc_connect(svc, true, ucx ? "bench-ucx" : "bench-frames")};
        unsetenv("KVT_UCX");
        kvt->seq.base = kvt->seq.next = (uint64_t)(row + 1) << 40;
        s_runner_t k = {.kind = S_KVT, .kvt = kvt, .g = g};
        s_runner_t b = {.kind = S_TCP, .tcp = &tcp, .g = g};
        b.own.base = b.own.next = (uint64_t)(row + 3) << 40;
        rc = kvt->c ? s_cell(a, &k, &b, ucx ? "ucx" : "frame", "raw tcp") : -1;
        kvt_close(&kvt->c);
        free(kvt);
        close(tcp.fd);
    }
    return rc;
}

/* --serve FILE: "SCHED_EP TCP_HOST TCP_PORT" into FILE (written whole), then wait
 * until the --connect side removes it (at most 30 min). */
static int s_serve_wait(const char *file, bench_svc_t *svc, const s_tcp_srv_t *srv)
{
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.tmp", file);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%s %s %u\n", bench_svc_endpoint(svc), srv->host, srv->port) < 0 ||
        fclose(f) != 0 || rename(tmp, file) != 0) {
        fprintf(stderr, "data bench: cannot write %s\n", file);
        return -1;
    }
    printf("serving: %s (raw tcp %s:%u); waiting for the client to remove %s\n",
           bench_svc_endpoint(svc), srv->host, srv->port, file);
    fflush(stdout);
    for (int i = 0; i < 18000 && access(file, F_OK) == 0; i++)
        usleep(100000);
    return 0;
}

/* --connect FILE: waits (60 s at most) for the serving side's FILE. */
static int s_connect_read(const char *file, char *ep, size_t eplen, char *host, uint16_t *port)
{
    for (int i = 0; i < 600 && access(file, F_OK) != 0; i++)
        usleep(100000);
    FILE *f = fopen(file, "r");
    unsigned p = 0;
    char e[256], h[64];
    int n = f ? fscanf(f, "%255s %63s %u", e, h, &p) : 0;
    if (f)
        fclose(f);
    if (n != 3 || p == 0 || p > 65535) {
        fprintf(stderr, "data bench: no service described in %s\n", file);
        return -1;
    }
    snprintf(ep, eplen, "%s", e);
    snprintf(host, 64, "%s", h);
    *port = (uint16_t)p;
    return 0;
}

/* Wall-clock GB/s of xxh3-64 over the source pool, through tier_checksum as
 * kvtier computes it: the checksum the client computes for every block it puts
 * (fused with its copy on the shm path). */
static double s_xxh3_gbps(const s_geo_t *g)
{
    uint64_t bytes = 0, t0 = s_now_ns(), sink = 0;
    for (uint64_t i = 0; s_now_ns() - t0 < 300000000u; i++) {
        sink ^= tier_checksum_buf(s_src(g, i), g->bs);
        bytes += g->bs;
    }
    uint64_t ns = s_now_ns() - t0;
    return sink == 42 ? 0.0 : s_gbps(bytes, ns); /* sink keeps the hash alive */
}

static int s_block_size(const struct s_args *a, uint64_t bs, uint8_t *store, uint8_t *src,
                        uint8_t *dst)
{
    s_geo_t g = {.bs = bs, .batch = a->batch, .src = src, .dst = dst, .store = store};
    g.cap = (a->shm_mib << 20) / bs;
    g.npool = (a->pool_mib << 20) / bs;
    g.lag = g.cap / 4 / g.batch * g.batch;
    g.nonce = s_now_ns() * 0x9e3779b97f4a7c15ull;
    char bsname[32];
    s_bsname(bs, bsname, sizeof bsname);
    if (g.lag < g.batch || g.npool < g.batch) {
        fprintf(stderr,
                "data bench: %s: the tier (%" PRIu64 " slots) must hold 4 batches and the pool "
                "one (%" PRIu64 " blocks)\n",
                bsname, g.cap, g.npool);
        return -1;
    }
    if (a->remote && a->connect) { /* the client side of two processes */
        char ep[256], host[64];
        uint16_t port = 0;
        if (s_connect_read(a->connect, ep, sizeof ep, host, &port) != 0)
            return -1;
        bench_svc_t *svc = bench_svc_attach(ep);
        printf("%s: remote tier of %" PRIu64 " slots served by another process (%s), read-back "
               "lag %" PRIu64 " keys, pools 2 x %" PRIu64 " blocks\n",
               bsname, g.cap, ep, g.lag, g.npool);
        fflush(stdout);
        int rc = svc ? s_cell_remote(a, svc, &g, host, port) : -1;
        bench_svc_stop(&svc);
        unlink(a->connect); /* the serving side stops */
        return rc;
    }
    bench_svc_t *svc = bench_svc_start("data", bs, g.cap);
    if (!svc)
        return -1;
    printf("%s: %s tier %" PRIu64 " slots (%" PRIu64 " MiB %s, pre-faulted in %.1f s), read-back "
           "lag %" PRIu64 " keys, pools 2 x %" PRIu64 " blocks; xxh3-64 alone %.2f GB/s\n",
           bsname, a->remote ? "remote" : "host", g.cap, (g.cap * bs) >> 20,
           a->remote ? "anonymous memory" : "shm", bench_svc_prefault_s(svc), g.lag, g.npool,
           s_xxh3_gbps(&g));
    fflush(stdout);
    int rc = 0;
    if (a->remote) { /* against raw TCP, from this process or another one */
        s_tcp_srv_t srv = {.g = &g, .lfd = -1};
        rc = s_tcp_listen(&srv, a->bind[0] ? a->bind : "127.0.0.1");
        if (rc == 0 && a->serve)
            rc = s_serve_wait(a->serve, svc, &srv);
        else if (rc == 0)
            rc = s_cell_remote(a, svc, &g, srv.host, srv.port);
        s_tcp_stop(&srv);
        if (srv.failures) {
            fprintf(stderr, "data bench: raw tcp server failed %" PRIu64 " requests\n",
                    srv.failures);
            rc = -1;
        }
        bench_svc_stop(&svc);
        return rc;
    }
    if (a->shm && s_cell_shm(a, svc, &g) != 0)
        rc = -1;
    if (a->frame && s_cell_frame(a, svc, &g) != 0)
        rc = -1;
    bench_svc_stop(&svc);
    return rc;
}

/* ---- arguments ---- */

static void s_usage(void)
{
    fprintf(stderr,
            "usage: kvt-bench data [--seconds S] [--rounds R] [--block-size SIZE|both]\n"
            "                      [--batch B] [--shm-mib M] [--pool-mib P]\n"
            "                      [--path shm|frame|both] [--tier-kind host|remote]\n"
            "                      [--transport zmq|ucx|both] [--bind IP]\n"
            "                      [--serve FILE | --connect FILE]\n"
            "                      [--calls 4|2] [--default-malloc]\n"
            "  S timed seconds per side and cell (default 3, 0.1..600) in R alternating\n"
            "  kvtier/baseline slices (default 3, 1..100); SIZE 256KiB, 2MiB, or bytes with\n"
            "  a K/M suffix (default both 256KiB and 2MiB); B keys per batch (default 32,\n"
            "  1..%u); M MiB of tier (default 1024); P MiB per caller pool (default 256).\n"
            "  --tier-kind remote: the tier is a remote one (no segment to map), so only the\n"
            "  frame path runs, against raw TCP (plain sockets, the same blocks); --transport\n"
            "  ucx has it serve UCX (the client's bytes go through its staging region), both\n"
            "  measures frames and UCX clients in the same run. Two processes (e.g. two network\n"
            "  namespaces, tools/bench/netns_remote.sh): --serve FILE --bind IP runs the tier,\n"
            "  scheduler and raw TCP server, --connect FILE the clients (same sizes).\n"
            "  --calls 2: each batch after the warm-up is one get+put window (kvt_prepare /\n"
            "  kvt_complete, the read-back batch and the fresh one together, two meta calls)\n"
            "  instead of a put and a get window (four, the default).\n"
            "  --default-malloc leaves glibc's malloc thresholds alone.\n",
            S_MAX_BATCH);
}

static int s_parse_size(const char *v, uint64_t *out)
{
    char *end = NULL;
    unsigned long long n = strtoull(v, &end, 10);
    if (end == v)
        return -1;
    if (*end == 'K' || *end == 'k')
        n <<= 10, end++;
    else if (*end == 'M' || *end == 'm')
        n <<= 20, end++;
    if (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0)
        end += strlen(end);
    if (*end != '\0' || n < 4096 || n > (256ull << 20))
        return -1;
    *out = n;
    return 0;
}

static int s_parse_one(struct s_args *a, const char *opt, const char *val)
{
    char *end = NULL;
    if (strcmp(opt, "--seconds") == 0) {
        a->seconds = strtod(val, &end);
        return *end == '\0' && a->seconds >= 0.1 && a->seconds <= 600 ? 0 : -1;
    }
    if (strcmp(opt, "--block-size") == 0) {
        if (strcmp(val, "both") == 0) {
            a->n_sizes = 2;
            return 0;
        }
        a->n_sizes = 1;
        return s_parse_size(val, &a->sizes[0]);
    }
    if (strcmp(opt, "--tier-kind") == 0) {
        if (bench_svc_set_kind(val) != 0)
            return -1;
        a->remote = strcmp(val, "remote") == 0;
        return 0;
    }
    if (strcmp(opt, "--transport") == 0) { /* issue 9 §4: the remote tier's transport */
        a->transport = strcmp(val, "both") == 0  ? S_TR_BOTH
                       : strcmp(val, "ucx") == 0 ? S_TR_UCX
                                                 : S_TR_ZMQ;
        return bench_svc_set_transport(a->transport == S_TR_ZMQ ? val : "ucx");
    }
    if (strcmp(opt, "--bind") == 0) {
        snprintf(a->bind, sizeof a->bind, "%s", val);
        return bench_svc_set_bind(val);
    }
    if (strcmp(opt, "--serve") == 0 || strcmp(opt, "--connect") == 0) {
        *(opt[2] == 's' ? &a->serve : &a->connect) = val;
        return 0;
    }
    if (strcmp(opt, "--path") == 0) {
        a->shm = strcmp(val, "shm") == 0 || strcmp(val, "both") == 0;
        a->frame = strcmp(val, "frame") == 0 || strcmp(val, "both") == 0;
        return a->shm || a->frame ? 0 : -1;
    }
    if (strcmp(opt, "--calls") == 0) {
        if (strcmp(val, "2") && strcmp(val, "4"))
            return -1;
        a->combined = val[0] == '2';
        return 0;
    }
    unsigned long v = strtoul(val, &end, 10);
    if (*end != '\0' || end == val)
        return -1;
    if (strcmp(opt, "--rounds") == 0 && v >= 1 && v <= 100)
        a->rounds = (uint32_t)v;
    else if (strcmp(opt, "--batch") == 0 && v >= 1 && v <= S_MAX_BATCH)
        a->batch = (uint32_t)v;
    else if (strcmp(opt, "--shm-mib") == 0 && v >= 1 && v <= (1u << 20))
        a->shm_mib = v;
    else if (strcmp(opt, "--pool-mib") == 0 && v >= 1 && v <= (1u << 20))
        a->pool_mib = v;
    else
        return -1;
    return 0;
}

static int s_parse(int argc, char **argv, struct s_args *a)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
        if (strcmp(argv[i], "--default-malloc") == 0) {
            a->default_malloc = true;
            continue;
        }
        if (i + 1 >= argc || s_parse_one(a, argv[i], argv[i + 1]) != 0)
            return -1;
        i++;
    }
    return 0;
}

int bench_data(int argc, char **argv)
{
    struct s_args a = {.seconds = 3.0,
                       .rounds = 3,
                       .sizes = {256u << 10, 2u << 20},
                       .n_sizes = 2,
                       .batch = 32,
                       .shm_mib = 1024,
                       .pool_mib = 256,
                       .shm = true,
                       .frame = true};
    int parsed = s_parse(argc, argv, &a);
    if (parsed != 0) {
        s_usage();
        return parsed > 0 ? 0 : 2;
    }
    if (a.remote && a.shm) { /* a remote tier has no segment to map */
        if (!a.frame) {
            fprintf(stderr, "data bench: --path shm with --tier-kind remote: a remote tier is "
                            "served over frames only\n");
            return 2;
        }
        a.shm = false;
    }
    if (!a.default_malloc) {
        int m1 = mallopt(M_MMAP_THRESHOLD, S_MMAP_THRESHOLD);
        int m2 = mallopt(M_TRIM_THRESHOLD, S_TRIM_THRESHOLD);
        printf("malloc: mallopt(M_MMAP_THRESHOLD, 64 MiB) %s, mallopt(M_TRIM_THRESHOLD, 1 GiB) "
               "%s\n",
               m1 ? "set" : "REFUSED", m2 ? "set" : "REFUSED");
    } else {
        printf("malloc: glibc defaults (--default-malloc)\n");
    }
    uint64_t max_bs = a.sizes[0];
    for (uint32_t i = 1; i < a.n_sizes; i++)
        max_bs = a.sizes[i] > max_bs ? a.sizes[i] : max_bs;
    size_t store_len = (size_t)a.shm_mib << 20, pool_len = (size_t)a.pool_mib << 20;
    uint8_t *store = s_prefaulted(store_len);
    uint8_t *src = s_prefaulted(pool_len);
    uint8_t *dst = s_prefaulted(pool_len);
    int rc = -1;
    if (!store || !src || !dst || pool_len < max_bs) {
        fprintf(stderr, "data bench: cannot map %zu MiB of buffers\n",
                (store_len + 2 * pool_len) >> 20);
        goto out;
    }
    for (size_t i = 0; i < pool_len; i += 8) { /* bytes that are not all zeros */
        uint64_t v = i * 0x9e3779b97f4a7c15ull;
        memcpy(src + i, &v, 8);
    }
    printf("data plane: put+get of fresh keys, %u keys per batch (%s), "
           "%.1f s per side and cell in %u alternating slices\n",
           a.batch,
           a.combined ? "one get+put window: prepare, submit both, wait, complete: 2 meta calls"
                      : "a put and a get window: prepare/submit/wait/complete each: 4 meta calls",
           a.seconds, a.rounds);
    printf("GB/s = 1e9 bytes/s of wall time; ratio = kvtier both / baseline both; meta = share "
           "of kvtier time in prepare/complete calls; bytes-only = kvtier both without it; faults "
           "= page faults per MiB moved, kvtier/baseline\n");
    printf("%-7s %-6s %-22s %-8s %-22s %6s %6s %9s %6s %8s %s\n", "block", "path",
           "kvtier put/get/both", "baseline", "baseline put/get/both", "ratio", "meta",
           "bytes-only", "ratio", "batches", "faults");
    rc = 0;
    for (uint32_t i = 0; i < a.n_sizes; i++)
        if (s_block_size(&a, a.sizes[i], store, src, dst) != 0)
            rc = -1;
out:
    if (store)
        munmap(store, store_len);
    if (src)
        munmap(src, pool_len);
    if (dst)
        munmap(dst, pool_len);
    return rc < 0 ? 1 : 0;
}
