/* bench_svc.c — starts and stops the one-host kvtier service inside kvt-bench
 * (see bench_svc.h). Owns the actors (tier, scheduler; with events the publisher
 * and a subscriber) and the shm name; never leaves the segment behind (the tier
 * actor removes it when destroyed). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "bench_svc.h"
#include "bus_host.h"
#include "publisher.h"
#include "sched_actor.h"
#include "tier_actor.h"

#define S_UP_POLL_MS 10
#define S_UP_TRIES 1000 /* about 10 s for the scheduler to page the tier's inventory */

/* The subscriber of an events-on service: counts what it reads. */
typedef struct {
    char pb_ep[SCHED_ENDPOINT_MAX], vllm_ep[SCHED_ENDPOINT_MAX];
    atomic_uint_fast64_t pb, vllm;
} s_drain_t;

struct bench_svc {
    zactor_t *tier;
    zactor_t *sched;
    zactor_t *publisher; /* NULL: events off */
    zactor_t *drain;
    s_drain_t *counts;
    char events_in[64];
    char sched_ep[SCHED_ENDPOINT_MAX];
    char shm[64];
    double prefault_s;
};

static double s_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void bench_svc_key(uint64_t nonce, uint64_t id, kvt_key_t *out)
{
    uint64_t in[2] = {nonce, id};
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(in, sizeof in));
    memcpy(out->b, c.digest, sizeof out->b);
}

static bool s_remote;                         /* bench_svc_set_kind("remote") */
static bool s_ucx;                            /* bench_svc_set_transport("ucx") */
static char s_bind[80] = "tcp://127.0.0.1:*"; /* bench_svc_set_bind */

int bench_svc_set_bind(const char *ip)
{
    int n = snprintf(s_bind, sizeof s_bind, "tcp://%s:*", ip);
    return n > 0 && (size_t)n < sizeof s_bind ? 0 : -1;
}

bench_svc_t *bench_svc_attach(const char *sched_ep)
{
    bench_svc_t *s = calloc(1, sizeof *s);
    if (s)
        snprintf(s->sched_ep, sizeof s->sched_ep, "%s", sched_ep);
    return s;
}

const char *bench_svc_endpoint(const bench_svc_t *svc)
{
    return svc->sched_ep;
}

int bench_svc_set_transport(const char *transport)
{
    if (strcmp(transport, "zmq") != 0 && strcmp(transport, "ucx") != 0)
        return -1;
    s_ucx = strcmp(transport, "ucx") == 0;
    return 0;
}

int bench_svc_set_kind(const char *kind)
{
    if (strcmp(kind, "host") != 0 && strcmp(kind, "remote") != 0)
        return -1;
    s_remote = strcmp(kind, "remote") == 0;
    return 0;
}

static zactor_t *s_tier_new(bench_svc_t *s, uint64_t slot_size, uint64_t capacity)
{
    tier_actor_config_t tc = {.tier_id = 1, .endpoint = s_bind};
    snprintf(tc.tier.name, sizeof tc.tier.name, "host0");
    snprintf(tc.tier.kind, sizeof tc.tier.kind, "%s", s_remote ? "remote" : "host");
    if (!s_remote)
        snprintf(tc.tier.path, sizeof tc.tier.path, "%s", s->shm);
    tc.tier.capacity = capacity;
    tc.tier.slot_size = slot_size;
    (void)tier_config_set(&tc.tier, "prefault", "true");
    if (s_remote && s_ucx)
        (void)tier_config_set(&tc.tier, "transport", "ucx");
    /* a whole batch of blocks in one WriteSlots / ReadSlots */
    tc.max_bytes = (uint64_t)1 << 30;
    double t0 = s_now_s();
    zactor_t *a = tier_actor_new(&tc);
    s->prefault_s = s_now_s() - t0;
    return a;
}

static zactor_t *s_sched_new(uint64_t slot_size, uint64_t capacity, const char *events_in)
{
    sched_config_t sc;
    sched_config_defaults(&sc);
    snprintf(sc.endpoint, sizeof sc.endpoint, "%s", s_bind);
    if (events_in)
        snprintf(sc.events_input, sizeof sc.events_input, "%s", events_in);
    snprintf(sc.cluster, sizeof sc.cluster, "bench");
    sc.n_tiers = 1;
    sc.tiers[0] = (sched_tier_config_t){.tier_id = 1, .capacity = capacity, .slot_size = slot_size};
    snprintf(sc.tiers[0].name, sizeof sc.tiers[0].name, "host0");
    snprintf(sc.tiers[0].kind, sizeof sc.tiers[0].kind, "%s", s_remote ? "remote" : "host");
    sc.n_chains = 1;
    snprintf(sc.chains[0].name, sizeof sc.chains[0].name, "default");
    sc.chains[0].n_tiers = 1;
    sc.chains[0].tier_ids[0] = 1;
    return sched_actor_new(&sc);
}

/* Hands the tier to the scheduler as the coordinator's membership watch does. */
static int s_announce(bench_svc_t *s, uint64_t slot_size, uint64_t capacity)
{
    kvtier_TierInfo ti = kvtier_TierInfo_init_zero;
    ti.tier_id = 1;
    snprintf(ti.name, sizeof ti.name, "host0");
    ti.kind = s_remote ? kvtier_TierKind_TIER_KIND_REMOTE : kvtier_TierKind_TIER_KIND_HOST;
    if (tier_actor_endpoint(s->tier, ti.endpoint, sizeof ti.endpoint) != 0)
        return -1;
    bus_host_identity(NULL, ti.host, sizeof ti.host);
    if (!s_remote)
        snprintf(ti.shm, sizeof ti.shm, "%s", s->shm);
    ti.epoch = tier_actor_epoch(s->tier);
    ti.capacity_slots = capacity;
    ti.slot_bytes = slot_size;
    ti.up = true;
    return sched_actor_tier_change(s->sched, true, &ti);
}

/* Polls ClusterInfo until the tier is up (the scheduler reads its inventory
 * before it places blocks there), then registers the instance. */
static int s_ready(bench_svc_t *s, uint64_t slot_size)
{
    kvt_client_t *c = bench_svc_connect(s, false, "bench-setup");
    if (!c)
        return -1;
    kvt_cluster_info_t *ci = malloc(sizeof *ci);
    int rc = -1;
    for (int i = 0; ci && i < S_UP_TRIES; i++) {
        if (kvt_cluster_info(c, ci) == 0 && ci->n_tiers == 1 && ci->tiers[0].up) {
            rc = 0;
            break;
        }
        zclock_sleep(S_UP_POLL_MS);
    }
    free(ci);
    if (rc < 0) {
        fprintf(stderr, "bench: the scheduler never reported the tier up\n");
        goto out;
    }
    kvt_instance_t spec = {.instance_id = BENCH_SVC_INSTANCE,
                           .model = "llama-bench",
                           .dtype = "fp16",
                           .tokens_per_block = 16,
                           .bytes_per_block = slot_size};
    rc = kvt_register_instance(c, &spec);
    if (rc < 0)
        fprintf(stderr, "bench: register_instance: %s\n", kvt_last_error(c));
out:
    kvt_close(&c);
    return rc;
}

static void s_drain_actor(zsock_t *pipe, void *args)
{
    s_drain_t *d = args;
    zsock_t *pb = zsock_new_sub(d->pb_ep, ""), *vl = zsock_new_sub(d->vllm_ep, "");
    zpoller_t *p = pb && vl ? zpoller_new(pipe, pb, vl, NULL) : NULL;
    zsock_signal(pipe, 0);
    while (p) {
        void *which = zpoller_wait(p, -1);
        if (!which || which == pipe)
            break;
        zmsg_t *m = zmsg_recv(which);
        zmsg_destroy(&m);
        atomic_fetch_add(which == pb ? &d->pb : &d->vllm, 1);
    }
    zpoller_destroy(&p);
    zsock_destroy(&pb);
    zsock_destroy(&vl);
}

/* The publisher and its subscriber, before the scheduler that feeds it. */
static int s_events_new(bench_svc_t *s, bool subscriber)
{
    static unsigned s_ev_seq;
    snprintf(s->events_in, sizeof s->events_in, "inproc://bench-events-%d-%u", (int)getpid(),
             s_ev_seq++);
    publisher_config_t pc = {.name = "bench-publisher",
                             .input_endpoint = s->events_in,
                             .endpoint = "tcp://127.0.0.1:*",
                             .replay_endpoint = "tcp://127.0.0.1:*",
                             .vllm_endpoint = "tcp://127.0.0.1:*"};
    s->counts = calloc(1, sizeof *s->counts);
    s->publisher = s->counts ? publisher_new(&pc) : NULL;
    char replay[SCHED_ENDPOINT_MAX], vreplay[SCHED_ENDPOINT_MAX];
    if (!s->publisher ||
        publisher_endpoints(s->publisher, s->counts->pb_ep, sizeof s->counts->pb_ep, replay,
                            sizeof replay) < 0 ||
        publisher_vllm_endpoints(s->publisher, s->counts->vllm_ep, sizeof s->counts->vllm_ep,
                                 vreplay, sizeof vreplay) < 0)
        return -1;
    if (!subscriber)
        return 0;
    s->drain = zactor_new(s_drain_actor, s->counts);
    return s->drain ? 0 : -1;
}

static bench_svc_t *s_start(const char *part, uint64_t slot_size, uint64_t capacity, bool events,
                            bool subscriber)
{
    static unsigned s_seq;
    bench_svc_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    snprintf(s->shm, sizeof s->shm, "/kvt-bench-%s-%d-%u", part, (int)getpid(), s_seq++);
    if (events && s_events_new(s, subscriber) != 0) {
        fprintf(stderr, "bench: cannot start the publisher\n");
        goto out_fail;
    }
    s->tier = s_tier_new(s, slot_size, capacity);
    if (!s->tier) {
        fprintf(stderr, "bench: cannot start the host tier actor (%s, %llu x %llu B)\n", s->shm,
                (unsigned long long)capacity, (unsigned long long)slot_size);
        goto out_fail;
    }
    s->sched = s_sched_new(slot_size, capacity, events ? s->events_in : NULL);
    if (!s->sched || sched_actor_endpoint(s->sched, s->sched_ep, sizeof s->sched_ep) != 0) {
        fprintf(stderr, "bench: cannot start the scheduler actor\n");
        goto out_fail;
    }
    if (s_announce(s, slot_size, capacity) != 0 || s_ready(s, slot_size) != 0)
        goto out_fail;
    return s;
out_fail:
    bench_svc_stop(&s);
    return NULL;
}

bench_svc_t *bench_svc_start(const char *part, uint64_t slot_size, uint64_t capacity)
{
    return s_start(part, slot_size, capacity, false, false);
}

bench_svc_t *bench_svc_start_events(const char *part, uint64_t slot_size, uint64_t capacity,
                                    bool subscriber)
{
    return s_start(part, slot_size, capacity, true, subscriber);
}

int bench_svc_events(bench_svc_t *svc, uint64_t *handed, uint64_t *dropped, uint64_t *read_pb,
                     uint64_t *read_vllm)
{
    if (!svc->publisher)
        return -1;
    kvt_client_t *c = bench_svc_connect(svc, false, "bench-events-stats");
    kvt_stat_t st[128];
    uint32_t n = 0, total = 0;
    int rc = c ? kvt_stats_page(c, NULL, 0, st, 128, &n, &total) : -1;
    kvt_close(&c);
    *handed = *dropped = 0;
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        if (strcmp(st[i].name, "events_batches") == 0)
            *handed = st[i].value;
        else if (strcmp(st[i].name, "events_dropped") == 0)
            *dropped = st[i].value;
    }
    *read_pb = atomic_load(&svc->counts->pb);
    *read_vllm = atomic_load(&svc->counts->vllm);
    return rc < 0 ? -1 : 0;
}

void bench_svc_stop(bench_svc_t **svc)
{
    if (!svc || !*svc)
        return;
    bench_svc_t *s = *svc;
    zactor_destroy(&s->sched);
    zactor_destroy(&s->tier);
    zactor_destroy(&s->drain);
    zactor_destroy(&s->publisher);
    free(s->counts);
    free(s);
    *svc = NULL;
}

kvt_client_t *bench_svc_connect(bench_svc_t *svc, bool disable_shm, const char *name)
{
    char err[512];
    kvt_options_t o = {.coordinators = svc->sched_ep,
                       .name = name,
                       .timeout_ms = BENCH_SVC_TIMEOUT_MS,
                       .disable_shm = disable_shm};
    kvt_client_t *c = kvt_connect(&o, err, sizeof err);
    if (!c)
        fprintf(stderr, "bench: kvt_connect %s: %s\n", svc->sched_ep, err);
    return c;
}

double bench_svc_prefault_s(const bench_svc_t *svc)
{
    return svc->prefault_s;
}
