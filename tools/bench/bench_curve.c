/* bench_curve.c — `kvt-bench curve`: what CurveZMQ (bus_curve.h, docs/SECURITY.md)
 * costs on the bus. The same bus_client -> bus_server round trips over tcp
 * loopback, once on plain sockets and once on CURVE sockets (a server admitting
 * the client's key through the real zauth actor), in the same run, alternating
 * slices so that background load hits both alike. Two cells, 8 requests in flight:
 *   meta    LookupRequest of 256 keys -> LookupReply (256 hits, tier ids)
 *   frames  ReadSlotsRequest of 1 slot -> ReadSlotsReply carrying one block
 *           (--block, default 256 KiB): the frame path of a get
 * Prints round trips/s, payload MB/s and CURVE / plain per cell. The servers are
 * actors on their own threads, the keys a temp dir removed at the end. Never used
 * by the service; 0, 1 if setup or a round trip fails, 2 on bad arguments. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "bus_client.h"
#include "bus_config.h"
#include "bus_curve.h"
#include "bus_server.h"

#define S_DEPTH 8u
#define S_KEYS 256u
#define S_TIMEOUT_MS 10000u

typedef struct {
    double seconds;
    uint32_t rounds;
    uint64_t block;
} s_args_t;

typedef struct {
    bus_server_t *srv;
    uint8_t *block;
    uint64_t block_size;
    uint64_t failures;
} s_srv_args_t;

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void s_keep(void *data, void *hint)
{
    (void)data;
    (void)hint;
}

/* Answers one request: a lookup with every key a hit, a read with the block. */
static void s_answer(s_srv_args_t *a, bus_request_t *req, bus_arrays_t *in, kvtier_Envelope *rep,
                     bus_arrays_t *out)
{
    bus_arrays_clear(out);
    bus_payload_t pl = {.data = a->block, .size = a->block_size, .free_fn = s_keep};
    uint32_t npl = 0;
    if (req->env.which_body == kvtier_Envelope_lookup_req_tag) {
        bus_env_init_reply(rep, &req->env, kvtier_Envelope_lookup_rep_tag, NULL);
        for (uint32_t i = 0; i < in->keys.n; i++) {
            out->mask.v[i] = true;
            out->tier_ids.v[i] = 1;
        }
        out->mask.n = out->tier_ids.n = in->keys.n;
        rep->body.lookup_rep.hit_count = in->keys.n;
    } else {
        bus_env_init_reply(rep, &req->env, kvtier_Envelope_read_slots_rep_tag, NULL);
        out->sizes.v[0] = a->block_size;
        out->sizes.n = 1;
        npl = 1;
    }
    if (bus_server_reply(a->srv, req->routing_id, rep, out, &pl, npl, NULL) < 0)
        a->failures++;
}

static void s_server(zsock_t *pipe, void *args)
{
    s_srv_args_t *a = args;
    bus_request_t *req = calloc(1, sizeof *req);
    kvtier_Envelope *rep = calloc(1, sizeof *rep);
    bus_arrays_t *in = bus_arrays_new(BUS_MAX_ARRAY, BUS_MAX_BLOB);
    bus_arrays_t *out = bus_arrays_new(S_KEYS, 0);
    zpoller_t *poller = zpoller_new(pipe, bus_server_sock(a->srv), NULL);
    zsock_signal(pipe, req && rep && in && out && poller ? 0 : 1);
    while (req && rep && in && out && poller) {
        void *which = zpoller_wait(poller, -1);
        if (which == pipe || !which)
            break; /* $TERM */
        while (bus_server_recv(a->srv, 0, req, in) == 1)
            s_answer(a, req, in, rep, out);
    }
    bus_request_reset(req);
    zpoller_destroy(&poller);
    bus_arrays_destroy(&in);
    bus_arrays_destroy(&out);
    free(req);
    free(rep);
}

/* One side (plain or CURVE): its server actor and its client. */
typedef struct {
    const char *name;
    s_srv_args_t sa;
    zactor_t *actor;
    bus_client_t *cl;
    pb_size_t tag; /* the cell's request */
    bool running;  /* completions send the next request */
    uint64_t done, errors, bytes;
    uint8_t (*keys)[BUS_KEY_LEN];
    uint64_t slot0;
    bus_arrays_t *reply_arr; /* shared: each reply is decoded and dropped in turn */
    kvtier_Envelope *env;
} s_side_t;

static void s_send(s_side_t *s);

static void s_done(void *arg, bus_reply_t *r)
{
    s_side_t *s = arg;
    if (r->status.code != kvtier_StatusCode_STATUS_OK) {
        s->errors++;
        return;
    }
    s->done++;
    zframe_t *f = r->msg ? bus_msg_payload(r->msg, 0) : NULL;
    s->bytes += f ? zframe_size(f) : 0;
    if (s->running)
        s_send(s);
}

static void s_send(s_side_t *s)
{
    kvtier_Status st;
    bus_arrays_t arr = {0};
    bus_env_init(s->env, s->tag, "bench-curve");
    if (s->tag == kvtier_Envelope_lookup_req_tag) {
        snprintf(s->env->body.lookup_req.instance_id, sizeof s->env->body.lookup_req.instance_id,
                 "bench");
        s->env->body.lookup_req.mode = kvtier_LookupMode_LOOKUP_MODE_PER_KEY;
        arr.keys = (bus_keys_t){.keys = s->keys, .n = S_KEYS, .cap = S_KEYS};
    } else {
        s->env->body.read_slots_req.tier_id = 1;
        arr.slots = (bus_u64s_t){.v = &s->slot0, .n = 1, .cap = 1};
    }
    if (bus_client_send(s->cl, s->env, &arr, NULL, 0, S_TIMEOUT_MS, s->reply_arr, s_done, s, NULL,
                        &st) < 0) {
        fprintf(stderr, "curve bench: %s: send failed: %s\n", s->name, st.message);
        s->errors++;
    }
}

static uint32_t s_in_flight(s_side_t *s)
{
    bus_client_stats_t st;
    bus_client_stats(s->cl, &st);
    return st.in_flight;
}

/* Runs S for SECONDS with S_DEPTH in flight; adds what completed meanwhile. */
static void s_slice(s_side_t *s, double seconds, uint64_t *rts, uint64_t *bytes, double *elapsed)
{
    uint64_t d0 = s->done, b0 = s->bytes;
    double t0 = s_now(), end = t0 + seconds;
    s->running = true;
    for (uint32_t i = 0; i < S_DEPTH; i++)
        s_send(s);
    while (s->errors == 0 && s_now() < end)
        if (bus_client_dispatch(s->cl, 100) < 0)
            s->errors++;
    double t1 = s_now();
    uint64_t d1 = s->done, b1 = s->bytes;
    s->running = false;
    while (s->errors == 0 && s_in_flight(s) > 0)
        if (bus_client_dispatch(s->cl, 100) < 0)
            s->errors++;
    *rts += d1 - d0;
    *bytes += b1 - b0;
    *elapsed += t1 - t0;
}

/* Binds a server (CURVE when the process setting is on) and connects a client. */
static int s_side_open(s_side_t *s, const char *name, s_args_t *a, uint8_t *block,
                       uint8_t (*keys)[BUS_KEY_LEN], const bus_curve_client_t *curve)
{
    s->name = name;
    s->keys = keys;
    s->sa = (s_srv_args_t){.block = block, .block_size = a->block};
    s->sa.srv = bus_server_new_bounded("tcp://127.0.0.1:*", name, BUS_MAX_FRAME0);
    s->reply_arr = bus_arrays_new(S_KEYS, 0);
    s->env = calloc(1, sizeof *s->env);
    if (!s->sa.srv || !s->reply_arr || !s->env)
        return -1;
    bus_client_config_t cc = {.name = name,
                              .max_in_flight = S_DEPTH,
                              .default_timeout_ms = S_TIMEOUT_MS,
                              .max_frame = BUS_CLIENT_UNBOUNDED,
                              .curve = curve};
    s->cl = bus_client_new(bus_server_endpoint(s->sa.srv), &cc);
    s->actor = s->cl ? zactor_new(s_server, &s->sa) : NULL;
    return s->actor ? 0 : -1;
}

static void s_side_close(s_side_t *s)
{
    zactor_destroy(&s->actor);
    bus_client_destroy(&s->cl);
    bus_server_destroy(&s->sa.srv);
    bus_arrays_destroy(&s->reply_arr);
    free(s->env);
}

/* One cell: plain and CURVE alternating, then the row. */
static int s_cell(s_args_t *a, s_side_t *plain, s_side_t *curve, pb_size_t tag, const char *what)
{
    uint64_t rts[2] = {0}, bytes[2] = {0};
    double el[2] = {0};
    s_side_t *sides[2] = {plain, curve};
    for (int i = 0; i < 2; i++) {
        sides[i]->tag = tag;
        uint64_t r = 0, b = 0;
        double e = 0;
        s_slice(sides[i], a->seconds / 10 < 0.2 ? 0.2 : a->seconds / 10, &r, &b, &e); /* warm */
    }
    for (uint32_t round = 0; round < a->rounds; round++)
        for (int i = 0; i < 2; i++)
            s_slice(sides[i], a->seconds / a->rounds, &rts[i], &bytes[i], &el[i]);
    if (plain->errors || curve->errors || !rts[0] || !rts[1]) {
        fprintf(stderr,
                "curve bench: %s: round trips failed (plain %" PRIu64 ", curve %" PRIu64 ")\n",
                what, plain->errors, curve->errors);
        return -1;
    }
    double pr = (double)rts[0] / el[0], cr = (double)rts[1] / el[1];
    double pm = (double)bytes[0] / el[0] / 1e6, cm = (double)bytes[1] / el[1] / 1e6;
    printf("%-7s %12.0f %12.0f %8.3f %12.1f %12.1f\n", what, pr, cr, cr / pr, pm, cm);
    fflush(stdout);
    return 0;
}

/* Keys in a temp dir: the server pair, the client's pair admitted. */
static int s_keys(char *dir, size_t len, bus_curve_client_t *client)
{
    char err[600], path[512], clients[300], cmd[700];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, len, "%s/kvt-bench-curve-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return -1;
    snprintf(clients, sizeof clients, "%s/clients", dir);
    if (bus_curve_keygen(dir, "server", NULL, err, sizeof err) < 0 ||
        bus_curve_keygen(dir, "client", NULL, err, sizeof err) < 0 ||
        bus_curve_keygen(dir, "proc", NULL, err, sizeof err) < 0) {
        fprintf(stderr, "curve bench: %s\n", err);
        return -1;
    }
    snprintf(cmd, sizeof cmd, "mkdir -m 700 '%s' && cp '%s/client.key' '%s/'", clients, dir,
             clients);
    if (system(cmd) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/client.key", dir);
    if (bus_curve_load_pair(path, client->public_key, client->secret_key, err, sizeof err) < 0)
        return -1;
    snprintf(path, sizeof path, "%s/server.key", dir);
    if (bus_curve_load_public(path, client->server_key, err, sizeof err) < 0)
        return -1;
    char cert[512], server[512];
    snprintf(cert, sizeof cert, "%s/proc.key", dir);
    snprintf(server, sizeof server, "%s/server.key", dir);
    bus_curve_config_t bc = {.cert = cert, .server_cert = server, .clients = clients};
    if (bus_curve_start(&bc, err, sizeof err) < 0) {
        fprintf(stderr, "curve bench: %s\n", err);
        return -1;
    }
    return 0;
}

static int s_parse(int argc, char **argv, s_args_t *a)
{
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL, err[128];
        if (!strcmp(opt, "--help") || !strcmp(opt, "-h"))
            return 1;
        if (!val)
            return -1;
        i++;
        if (!strcmp(opt, "--seconds")) {
            a->seconds = strtod(val, &end);
            if (end == val || *end)
                return -1;
        } else if (!strcmp(opt, "--rounds")) {
            unsigned long v = strtoul(val, &end, 10);
            if (end == val || *end || v < 1 || v > 100)
                return -1;
            a->rounds = (uint32_t)v;
        } else if (!strcmp(opt, "--block")) {
            if (bus_config_parse_size(val, &a->block, err, sizeof err) < 0)
                return -1;
        } else {
            return -1;
        }
    }
    return a->seconds >= 0.1 && a->seconds <= 600 && a->block >= 1 && a->block <= (64u << 20) ? 0
                                                                                              : -1;
}

int bench_curve(int argc, char **argv)
{
    s_args_t a = {.seconds = 2.0, .rounds = 4, .block = 256u << 10};
    int parsed = s_parse(argc, argv, &a);
    if (parsed != 0) {
        fprintf(stderr,
                "usage: kvt-bench curve [--seconds S] [--rounds R] [--block SIZE]\n"
                "  S timed seconds per side and cell (default 2, 0.1..600) in R\n"
                "  alternating plain/CURVE slices (default 4); SIZE the block of the\n"
                "  frames cell (default 256KiB, up to 64MiB). %u requests in flight.\n",
                S_DEPTH);
        return parsed > 0 ? 0 : 2;
    }
    uint8_t *block = malloc(a.block);
    uint8_t(*keys)[BUS_KEY_LEN] = malloc((size_t)S_KEYS * BUS_KEY_LEN);
    s_side_t plain = {0}, curve = {0};
    bus_curve_client_t ck;
    char dir[256] = "";
    int rc = 1;
    if (!block || !keys)
        goto out;
    memset(block, 0xA5, a.block);
    for (uint32_t i = 0; i < S_KEYS; i++)
        memset(keys[i], (int)i, BUS_KEY_LEN);
    /* the plain side binds before CURVE is on; the CURVE side after */
    if (s_side_open(&plain, "plain", &a, block, keys, NULL) < 0 ||
        s_keys(dir, sizeof dir, &ck) < 0 ||
        s_side_open(&curve, "curve", &a, block, keys, &ck) < 0) {
        fprintf(stderr, "curve bench: setup failed\n");
        goto out;
    }
    printf("bus round trips over tcp loopback, %u in flight, %.1f s per side and cell\n", S_DEPTH,
           a.seconds);
    printf("%-7s %12s %12s %8s %12s %12s\n", "cell", "plain rt/s", "curve rt/s", "ratio",
           "plain MB/s", "curve MB/s");
    if (s_cell(&a, &plain, &curve, kvtier_Envelope_lookup_req_tag, "meta") == 0 &&
        s_cell(&a, &plain, &curve, kvtier_Envelope_read_slots_req_tag, "frames") == 0)
        rc = 0;
out:
    s_side_close(&curve);
    s_side_close(&plain);
    bus_curve_stop();
    if (dir[0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "curve bench: cannot remove %s\n", dir);
    }
    free(block);
    free(keys);
    return rc;
}
