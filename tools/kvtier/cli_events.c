/* cli_events.c — `kvtier events`: subscribes to the leader's event socket
 * (docs/EVENTS.md) and prints every event as one JSON line, or only a summary of
 * what it saw (batches, sequence gaps). Stops after --count batches, after --for
 * milliseconds, or on SIGINT / SIGTERM, and always ends with the summary line
 * "events: N batches, G gaps (M missing)" on stderr. Exit status 0, 1 when it
 * could not subscribe, 2 on bad usage. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <czmq.h>

#include "bus_events.h"
#include "cli_common.h"

enum { S_OPT_ENDPOINT = CLI_OPT_FIRST_COMMAND_OPT, S_OPT_TOPIC, S_OPT_COUNT, S_OPT_FOR, S_OPT_SUM };

#define S_MAX_EVENTS 4096u
#define S_MAX_KEYS 65536u

typedef struct {
    const char *endpoint;
    const char *topic;
    uint64_t count;  /* 0: no bound */
    uint64_t for_ms; /* 0: no bound */
    bool summary;
} s_args_t;

static volatile sig_atomic_t s_stop;

static void s_on_signal(int sig)
{
    (void)sig;
    s_stop = 1;
}

static int s_opt(void *ctx, int opt, const char *arg)
{
    s_args_t *a = ctx;
    switch (opt) {
    case S_OPT_ENDPOINT:
        a->endpoint = arg;
        return arg && arg[0] ? 0 : -1;
    case S_OPT_TOPIC:
        a->topic = arg;
        return 0;
    case S_OPT_COUNT:
        return cli_parse_u64("--count", arg, 1, UINT64_MAX, &a->count);
    case S_OPT_FOR:
        return cli_parse_u64("--for", arg, 1, UINT64_MAX, &a->for_ms);
    case S_OPT_SUM:
        a->summary = true;
        return 0;
    default:
        return -1;
    }
}

static void s_hex(const uint8_t *b, size_t n, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[b[i] >> 4];
        out[2 * i + 1] = d[b[i] & 15];
    }
    out[2 * n] = '\0';
}

/* Prints s as a JSON string (it is a bounded id or name: escapes quotes,
 * backslashes and control bytes). */
static void s_jstr(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void s_print_event(const char *topic, uint64_t seq, const kvtier_EventBatch *b,
                          const bus_event_t *e)
{
    const kvtier_Event *ev = &e->ev;
    printf("{\"seq\":%" PRIu64 ",\"topic\":", seq);
    s_jstr(topic);
    printf(",\"epoch\":%" PRIu64 ",\"ts_us\":%" PRIu64 ",\"instance\":", b->epoch, ev->ts_us);
    s_jstr(ev->instance_id);
    switch (ev->which_kind) {
    case kvtier_Event_block_stored_tag:
        printf(",\"kind\":\"stored\",\"tier\":%u,\"bytes\":%" PRIu64 ",\"medium\":%d",
               ev->kind.block_stored.tier_id, ev->kind.block_stored.block_bytes,
               (int)ev->kind.block_stored.medium);
        break;
    case kvtier_Event_block_removed_tag:
        printf(",\"kind\":\"removed\",\"tier\":%u,\"reason\":%d", ev->kind.block_removed.tier_id,
               (int)ev->kind.block_removed.reason);
        break;
    case kvtier_Event_block_moved_tag:
        printf(",\"kind\":\"moved\",\"from\":%u,\"to\":%u", ev->kind.block_moved.src_tier_id,
               ev->kind.block_moved.dst_tier_id);
        break;
    case kvtier_Event_cache_get_tag: {
        const kvtier_CacheGet *g = &ev->kind.cache_get;
        printf(",\"kind\":\"lookup\",\"request\":");
        s_jstr(g->request_id);
        printf(",\"mode\":%d,\"hits\":%u,\"head_hits\":%u,\"tier_hits\":{", (int)g->mode,
               g->hit_count, g->head_hits);
        for (pb_size_t i = 0; i < g->tier_hits_count; i++)
            printf("%s\"%u\":%u", i ? "," : "", g->tier_hits[i].tier_id, g->tier_hits[i].hits);
        putchar('}');
        break;
    }
    case kvtier_Event_tier_changed_tag: {
        const kvtier_TierChanged *t = &ev->kind.tier_changed;
        printf(",\"kind\":\"tier\",\"tier\":%u,\"name\":", t->tier_id);
        s_jstr(t->name);
        printf(",\"up\":%s,\"capacity\":%" PRIu64 ",\"slot_bytes\":%" PRIu64,
               t->up ? "true" : "false", t->capacity_slots, t->slot_bytes);
        break;
    }
    case kvtier_Event_leader_changed_tag:
        printf(",\"kind\":\"leader\",\"node\":");
        s_jstr(ev->kind.leader_changed.node_id);
        printf(",\"leader_epoch\":%" PRIu64, ev->kind.leader_changed.epoch);
        break;
    default:
        printf(",\"kind\":\"cleared\"");
        break;
    }
    printf(",\"keys\":[");
    char hex[2 * BUS_KEY_LEN + 1];
    for (uint32_t k = 0; k < e->keys.n; k++) {
        s_hex(e->keys.keys[k], BUS_KEY_LEN, hex);
        printf("%s\"%s\"", k ? "," : "", hex);
    }
    printf("]}\n");
}

/* The leader's event endpoint (cluster info); 0, or -1 with the reason printed. */
static int s_find_endpoint(cli_common_t *o, char *out, size_t len)
{
    kvt_client_t *c = cli_connect(o, "kvtier-events");
    if (!c)
        return -1;
    kvt_cluster_info_t *ci = calloc(1, sizeof *ci);
    int rc = ci ? kvt_cluster_info(c, ci) : -KVT_INTERNAL;
    if (rc < 0)
        cli_report_error("events", "cluster info", c, rc);
    else if (!ci->event_endpoint[0]) {
        fprintf(stderr,
                "kvtier events: the leader publishes no events (events.endpoint is \"\")\n");
        rc = -1;
    } else {
        snprintf(out, len, "%s", ci->event_endpoint);
    }
    free(ci);
    kvt_close(&c);
    return rc < 0 ? -1 : 0;
}

int cli_cmd_events(int argc, char **argv)
{
    static const struct option longopts[] = {CLI_COMMON_LONGOPTS,
                                             {"endpoint", required_argument, NULL, S_OPT_ENDPOINT},
                                             {"topic", required_argument, NULL, S_OPT_TOPIC},
                                             {"count", required_argument, NULL, S_OPT_COUNT},
                                             {"for", required_argument, NULL, S_OPT_FOR},
                                             {"summary", no_argument, NULL, S_OPT_SUM},
                                             {0, 0, 0, 0}};
    cli_common_t o;
    s_args_t a = {0};
    cli_common_init(&o);
    int first = cli_parse(argc, argv, "c:", longopts, &o, s_opt, &a);
    if (first < 0 || o.help || first != argc) {
        fprintf(
            o.help ? stdout : stderr,
            "usage: kvtier events [--endpoint EP] [--topic PREFIX] [--count N] [--for MS]\n"
            "                     [--summary] [connection flags]\n"
            "  prints the leader's events (docs/EVENTS.md) as JSON lines, one per event\n"
            "  --endpoint EP    the event socket (default: the leader's, from cluster info)\n"
            "  --topic PREFIX   only batches whose topic starts with PREFIX (stored/, lookup/ID)\n"
            "  --count N        stop after N batches     --for MS  stop after MS ms\n"
            "  --summary        print nothing but the last line\n"
            "  always ends with \"events: N batches, G gaps (M missing)\" on "
            "stderr\n" CLI_COMMON_USAGE);
        return o.help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    char ep[256];
    if (a.endpoint)
        snprintf(ep, sizeof ep, "%s", a.endpoint);
    else if (s_find_endpoint(&o, ep, sizeof ep) < 0)
        return CLI_EXIT_FAIL;
    zsock_t *sub = zsock_new(ZMQ_SUB);
    if (!sub || zsock_connect(sub, "%s", ep) < 0) {
        fprintf(stderr, "kvtier events: cannot connect to %s\n", ep);
        zsock_destroy(&sub);
        return CLI_EXIT_FAIL;
    }
    zsock_set_subscribe(sub, a.topic ? a.topic : "");
    signal(SIGINT, s_on_signal);
    signal(SIGTERM, s_on_signal);
    bus_event_t *events = calloc(S_MAX_EVENTS, sizeof *events);
    uint8_t(*pool)[BUS_KEY_LEN] = calloc(S_MAX_KEYS, BUS_KEY_LEN);
    if (!events || !pool) {
        fprintf(stderr, "kvtier events: out of memory\n");
        free(events);
        free(pool);
        zsock_destroy(&sub);
        return CLI_EXIT_FAIL;
    }
    uint64_t batches = 0, gaps = 0, missing = 0, bad = 0, last = 0;
    int64_t until = a.for_ms ? zclock_mono() + (int64_t)a.for_ms : INT64_MAX;
    zpoller_t *poller = zpoller_new(sub, NULL);
    while (!s_stop && (!a.count || batches < a.count) && zclock_mono() < until) {
        int64_t left = until - zclock_mono();
        if (!zpoller_wait(poller, left < 200 ? (int)left : 200))
            continue;
        zmsg_t *m = zmsg_recv(sub);
        if (!m)
            continue;
        zframe_t *t = zmsg_first(m), *s = zmsg_next(m), *p = zmsg_next(m);
        if (zmsg_size(m) != 3 || zframe_size(s) != 8 || zframe_size(t) >= 128) {
            bad++;
            zmsg_destroy(&m);
            continue;
        }
        uint64_t seq = 0;
        for (int i = 0; i < 8; i++)
            seq = seq << 8 | zframe_data(s)[i];
        /* a gap within one leader's term (the epoch is in the high bits) */
        if (last && seq >> 40 == last >> 40 && seq > last + 1 && !a.topic) {
            gaps++;
            missing += seq - last - 1;
        }
        last = seq;
        batches++;
        char topic[128];
        memcpy(topic, zframe_data(t), zframe_size(t));
        topic[zframe_size(t)] = '\0';
        kvtier_EventBatch b;
        uint32_t n = 0;
        bus_keys_t keys = {.keys = pool, .cap = S_MAX_KEYS};
        kvtier_Status st;
        if (bus_events_decode(zframe_data(p), zframe_size(p), &b, events, S_MAX_EVENTS, &n, &keys,
                              &st) < 0) {
            bad++;
            fprintf(stderr, "kvtier events: batch %" PRIu64 " does not decode: %s\n", seq,
                    st.message);
        } else if (!a.summary) {
            for (uint32_t i = 0; i < n; i++)
                s_print_event(topic, seq, &b, &events[i]);
            fflush(stdout);
        }
        zmsg_destroy(&m);
    }
    zpoller_destroy(&poller);
    zsock_destroy(&sub);
    free(events);
    free(pool);
    fprintf(stderr, "events: %" PRIu64 " batches, %" PRIu64 " gaps (%" PRIu64 " missing)%s\n",
            batches, gaps, missing, bad ? ", some undecodable" : "");
    return CLI_EXIT_OK;
}
