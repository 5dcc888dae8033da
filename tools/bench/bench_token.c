/* bench_token.c — `kvt-bench token`: what the tier plane's tokens cost
 * (docs/SECURITY.md). Two figures, CPU only and per request:
 *   - sealing a token (encode + HMAC-SHA-512/256, what the scheduler adds to a
 *     prepare) and opening one (decode + verify + the scan of its entries against
 *     the request, what a tier actor adds to a request), for tokens of 1, 64 and
 *     4096 entries;
 *   - the round trip they are paid on: ReadSlots of one 4 KiB block from a real
 *     host tier actor over tcp loopback, p50 of --requests, against an actor without
 *     the secret (no token sent, none checked) in the same run, alternating slices.
 * Never used by the service; prints a table and returns 0, 1 if setup or a request
 * fails, 2 on bad arguments. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "bus_client.h"
#include "bus_token_mac.h"

#if __has_include("tier_actor.h")
#include "tier_actor.h"
#define S_HAVE_ACTOR 1
#endif

#define S_SLOT 4096u
#define S_CLUSTER "bench-token"
#define S_TIMEOUT_MS 5000u

static const uint8_t s_secret[BUS_SECRET_BYTES] = "kvt-bench token secret 32 bytes";

static uint64_t s_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t s_wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000u + (uint64_t)tv.tv_usec / 1000u;
}

/* A token of n entries on tier (id 1, epoch) like a prepare's: one tier record. */
static int s_mint(const bus_token_key_t *key, bus_token_kind_t kind, uint64_t epoch, const char *ep,
                  uint32_t n, bus_token_entry_t *e, uint8_t *buf, size_t cap, size_t *len)
{
    bus_token_tier_t t = {.tier_id = 1, .slot_size = S_SLOT, .epoch = epoch};
    snprintf(t.endpoint, sizeof t.endpoint, "%s", ep);
    snprintf(t.host, sizeof t.host, "bench-host-0123456789");
    for (uint32_t i = 0; i < n; i++)
        e[i] = (bus_token_entry_t){.tier = 0,
                                   .src_tier = BUS_TOKEN_NO_TIER,
                                   .size = S_SLOT,
                                   .slot = (uint64_t)i * 7919u % 65536u};
    bus_token_meta_t m = {.token_id = 42,
                          .issuer = 7,
                          .leader_epoch = 3,
                          .expiry_ms = s_wall_ms() + 600000u,
                          .instance = 1};
    int rc = bus_token_encode(kind, &m, &t, 1, e, n, buf, cap, len);
    return rc == 0 && key ? bus_token_seal(key, buf, cap, len) : rc;
}

static int s_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* ns per seal and per open of an n-entry token, best of 3 passes of `iters`. */
static void s_cpu_row(const bus_token_key_t *key, uint32_t n, uint32_t iters)
{
    size_t cap = (size_t)BUS_TOKEN_MAX_BYTES(1, n), len = 0;
    uint8_t *buf = malloc(cap);
    bus_token_entry_t *e = calloc(n, sizeof *e);
    uint64_t *pairs = calloc(2, sizeof *pairs);
    bus_token_view_t *v = malloc(sizeof *v);
    double seal = 1e30, open = 1e30;
    for (int pass = 0; buf && e && pairs && v && pass < 3; pass++) {
        uint64_t t0 = s_now_ns();
        for (uint32_t i = 0; i < iters; i++)
            (void)s_mint(key, BUS_TOKEN_GET, 1, "tcp://127.0.0.1:7710", n, e, buf, cap, &len);
        uint64_t t1 = s_now_ns();
        for (uint32_t i = 0; i < iters; i++) {
            char err[128];
            if (bus_token_decode(buf, len, v, err, sizeof err) < 0 ||
                bus_token_verify(key, v, buf) != 0)
                break;
            uint64_t hit = 0; /* the actor scans every entry against the request */
            for (uint32_t k = 0; k < v->n_entries; k++) {
                bus_token_entry_t x;
                bus_token_entry_at(v, k, &x);
                hit += x.tier == 0 && x.slot == pairs[0];
            }
            pairs[1] = hit;
        }
        uint64_t t2 = s_now_ns();
        seal = (double)(t1 - t0) / iters < seal ? (double)(t1 - t0) / iters : seal;
        open = (double)(t2 - t1) / iters < open ? (double)(t2 - t1) / iters : open;
    }
    printf("token %5u entries %7zu bytes   seal %9.0f ns   open (decode+verify+scan) %9.0f ns\n", n,
           len, seal, open);
    free(buf);
    free(e);
    free(pairs);
    free(v);
}

#ifdef S_HAVE_ACTOR
typedef struct {
    zactor_t *actor;
    bus_client_t *client;
    char ep[TIER_ACTOR_ENDPOINT_MAX];
    uint64_t epoch;
    uint8_t tok[512];
    size_t tok_len;
} s_side_t;

static int s_side_start(s_side_t *s, bool auth, int seq, const bus_token_key_t *key)
{
    tier_actor_config_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.tier.name, sizeof c.tier.name, "bench%d", seq);
    snprintf(c.tier.kind, sizeof c.tier.kind, "host");
    snprintf(c.tier.path, sizeof c.tier.path, "/kvt-bench-token-%d-%d", (int)getpid(), seq);
    c.tier.capacity = 16;
    c.tier.slot_size = S_SLOT;
    c.tier_id = 1;
    c.endpoint = "tcp://127.0.0.1:*";
    c.secret = auth ? s_secret : NULL;
    c.cluster = S_CLUSTER;
    s->actor = tier_actor_new(&c);
    if (!s->actor || tier_actor_endpoint(s->actor, s->ep, sizeof s->ep) < 0)
        return -1;
    s->epoch = tier_actor_epoch(s->actor);
    bus_client_config_t cc = {.name = "bench-token", .default_timeout_ms = S_TIMEOUT_MS};
    s->client = bus_client_new(s->ep, &cc);
    if (!s->client)
        return -1;
    /* one block, written and committed with the tokens a client and the scheduler use */
    static uint8_t bytes[S_SLOT];
    memset(bytes, 0x3C, sizeof bytes);
    bus_token_entry_t e[1];
    uint64_t slot = 0, size = S_SLOT, sum = 0;
    uint8_t keys[1][16] = {{1}};
    kvtier_Envelope req, rep;
    kvtier_Status st;
    bus_payload_t pl = {bytes, S_SLOT, NULL, NULL};
    const bus_token_key_t *k = auth ? key : NULL;
    int rc = s_mint(k, BUS_TOKEN_PUT, s->epoch, s->ep, 1, e, s->tok, sizeof s->tok, &s->tok_len);
    bus_env_init(&req, kvtier_Envelope_write_slots_req_tag, "bench");
    bus_arrays_t w = {.slots = {&slot, 1, 1},
                      .sizes = {&size, 1, 1},
                      .payload = {s->tok, auth ? (uint32_t)s->tok_len : 0, (uint32_t)s->tok_len}};
    if (rc < 0 ||
        bus_client_call(s->client, &req, &w, &pl, 1, S_TIMEOUT_MS, &rep, NULL, NULL, &st) < 0)
        return -1;
    rc = s_mint(k, BUS_TOKEN_ADMIN, s->epoch, s->ep, 1, e, s->tok, sizeof s->tok, &s->tok_len);
    bus_env_init(&req, kvtier_Envelope_put_header_req_tag, "bench");
    req.body.put_header_req.state = kvtier_LocationState_LOCATION_SERVING;
    bus_arrays_t h = {.slots = {&slot, 1, 1},
                      .keys = {keys, 1, 1},
                      .sizes = {&size, 1, 1},
                      .checksums = {&sum, 0, 1},
                      .payload = {s->tok, auth ? (uint32_t)s->tok_len : 0, (uint32_t)s->tok_len}};
    if (rc < 0 ||
        bus_client_call(s->client, &req, &h, NULL, 0, S_TIMEOUT_MS, &rep, NULL, NULL, &st) < 0) {
        fprintf(stderr, "kvt-bench token: %s\n", st.message);
        return -1;
    }
    rc = s_mint(k, BUS_TOKEN_GET, s->epoch, s->ep, 1, e, s->tok, sizeof s->tok, &s->tok_len);
    if (!auth)
        s->tok_len = 0;
    return rc;
}

static void s_side_stop(s_side_t *s)
{
    bus_client_destroy(&s->client);
    zactor_destroy(&s->actor);
}

/* n ReadSlots of the block; their latencies (ns) into lat. */
static int s_reads(s_side_t *s, uint32_t n, uint64_t *lat)
{
    uint64_t slot = 0, rsz[2];
    kvtier_Envelope req, rep;
    kvtier_Status st;
    for (uint32_t i = 0; i < n; i++) {
        bus_env_init(&req, kvtier_Envelope_read_slots_req_tag, "bench");
        bus_arrays_t a = {.slots = {&slot, 1, 1},
                          .payload = {s->tok, (uint32_t)s->tok_len, (uint32_t)s->tok_len}};
        bus_arrays_t ra = {.sizes = {rsz, 0, 2}};
        zmsg_t *pl = NULL;
        uint64_t t0 = s_now_ns();
        int rc = bus_client_call(s->client, &req, &a, NULL, 0, S_TIMEOUT_MS, &rep, &ra, &pl, &st);
        lat[i] = s_now_ns() - t0;
        zmsg_destroy(&pl);
        if (rc < 0) {
            fprintf(stderr, "kvt-bench token: ReadSlots: %s\n", st.message);
            return -1;
        }
    }
    return 0;
}

static int s_round_trips(const bus_token_key_t *key, uint32_t requests, uint32_t rounds)
{
    s_side_t sides[2] = {0};
    uint64_t *lat[2] = {calloc((size_t)requests * rounds, 8), calloc((size_t)requests * rounds, 8)};
    int rc = lat[0] && lat[1] && s_side_start(&sides[0], true, 0, key) == 0 &&
                     s_side_start(&sides[1], false, 1, key) == 0
                 ? 0
                 : -1;
    for (uint32_t r = 0; rc == 0 && r < rounds; r++)
        for (int k = 0; rc == 0 && k < 2; k++)
            rc = s_reads(&sides[k], requests, lat[k] + (size_t)r * requests);
    if (rc == 0) {
        double p50[2];
        for (int k = 0; k < 2; k++) {
            qsort(lat[k], (size_t)requests * rounds, 8, s_cmp_u64);
            p50[k] = (double)lat[k][(size_t)requests * rounds / 2] / 1000.0;
        }
        printf("ReadSlots 1 x %u B, tcp loopback, p50 of %u: with token %.1f us, without %.1f "
               "us (x%.3f)\n",
               S_SLOT, requests * rounds, p50[0], p50[1], p50[0] / p50[1]);
    }
    s_side_stop(&sides[0]);
    s_side_stop(&sides[1]);
    free(lat[0]);
    free(lat[1]);
    return rc;
}
#endif

int bench_token(int argc, char **argv)
{
    uint32_t requests = 2000, rounds = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--requests") && i + 1 < argc)
            requests = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = (uint32_t)strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr,
                    "usage: kvt-bench token [--requests N] [--rounds R]\n"
                    "  token seal/open CPU cost (1, 64, 4096 entries) and ReadSlots round\n"
                    "  trips with and without the token check, R alternating slices of N\n");
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (requests == 0 || rounds == 0)
        return 2;
    bus_token_key_t key;
    if (bus_token_key_derive(s_secret, S_CLUSTER, &key) < 0)
        return 1;
    s_cpu_row(&key, 1, 20000);
    s_cpu_row(&key, 64, 5000);
    s_cpu_row(&key, 4096, 200);
#ifdef S_HAVE_ACTOR
    return s_round_trips(&key, requests, rounds) == 0 ? 0 : 1;
#else
    return 0;
#endif
}
