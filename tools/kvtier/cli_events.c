/* cli_events.c — `kvtier events`: subscribes to the leader's event socket
 * (docs/EVENTS.md) and prints every event as one JSON line (to --record FILE
 * instead of stdout), or only a summary of what it saw (batches, sequence
 * gaps). --from SEQ first replays the ring from SEQ, --snapshot first prints the
 * publisher's snapshot of the index and replays from where it stands; batches
 * seen twice (replayed and live) print once. Without --endpoint it follows the
 * leader: when the leader's epoch changes it subscribes to the new leader and
 * replays that term from its first batch; a whole term it never saw (a new
 * term's LeaderChanged names a previous epoch newer than the last one seen) is
 * said and counted. Stops after --count batches, after --for milliseconds, or on
 * SIGINT / SIGTERM, and always ends with the summary line
 * "events: N batches, G gaps (M missing), L terms lost" on stderr. Exit status 0, 1 when
 * it could not subscribe (or a replay / snapshot failed), 2 on bad usage. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <czmq.h>

#include "bus_events.h"
#include "cli_common.h"

enum {
    S_OPT_ENDPOINT = CLI_OPT_FIRST_COMMAND_OPT,
    S_OPT_TOPIC,
    S_OPT_COUNT,
    S_OPT_FOR,
    S_OPT_SUM,
    S_OPT_REPLAY_EP,
    S_OPT_FROM,
    S_OPT_SNAPSHOT,
    S_OPT_RECORD,
};

#define S_ANSWER_MS 10000 /* a replay / snapshot message must come within this */
#define S_FOLLOW_MS 2000  /* silence after which the leader is asked again */
#define S_PROBE_MS 1000   /* the bound of that asking */

#define S_MAX_EVENTS 4096u
#define S_MAX_KEYS 65536u
#define S_MAX_TOKENS (1u << 20) /* token ids of one batch (a scheduler's has at most 262,144) */

typedef struct {
    const char *endpoint;
    const char *replay_endpoint;
    const char *topic;
    const char *record;
    uint64_t count;  /* 0: no bound */
    uint64_t for_ms; /* 0: no bound */
    uint64_t from;
    bool have_from;
    bool snapshot;
    bool summary;
} s_args_t;

/* What one run has seen and where it prints. */
typedef struct {
    const s_args_t *a;
    FILE *out;
    bus_event_t *events;
    uint8_t (*pool)[BUS_KEY_LEN];
    uint32_t *tok_pool;              /* S_MAX_TOKENS */
    const char *replay_ep;           /* "": none known */
    const bus_curve_client_t *curve; /* --cert: this client's keys; NULL: none */
    bool replaying;
    uint64_t batches, gaps, missing, bad, last;
    uint64_t prior_term;  /* the term seen before the current one (0: none) */
    uint64_t terms_lost;  /* whole terms between two seen, told by a LeaderChanged */
} s_run_t;

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
    case S_OPT_REPLAY_EP:
        a->replay_endpoint = arg;
        return arg && arg[0] ? 0 : -1;
    case S_OPT_FROM:
        a->have_from = true;
        return cli_parse_u64("--from", arg, 0, UINT64_MAX - 1, &a->from);
    case S_OPT_SNAPSHOT:
        a->snapshot = true;
        return 0;
    case S_OPT_RECORD:
        a->record = arg;
        return arg && arg[0] ? 0 : -1;
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
static void s_jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void s_print_event(FILE *f, const char *topic, uint64_t seq, const kvtier_EventBatch *b,
                          const bus_event_t *e, bool snapshot)
{
    const kvtier_Event *ev = &e->ev;
    fprintf(f, "{\"seq\":%" PRIu64 "%s,\"topic\":", seq, snapshot ? ",\"snapshot\":true" : "");
    s_jstr(f, topic);
    fprintf(f, ",\"epoch\":%" PRIu64 ",\"ts_us\":%" PRIu64 ",\"instance\":", b->epoch, ev->ts_us);
    s_jstr(f, ev->instance_id);
    switch (ev->which_kind) {
    case kvtier_Event_block_stored_tag:
        fprintf(f, ",\"kind\":\"stored\",\"tier\":%u,\"bytes\":%" PRIu64 ",\"medium\":%d",
                ev->kind.block_stored.tier_id, ev->kind.block_stored.block_bytes,
                (int)ev->kind.block_stored.medium);
        if (ev->kind.block_stored.parent_key.size == BUS_KEY_LEN) {
            fputs(",\"parent\":\"", f);
            for (int i = 0; i < BUS_KEY_LEN; i++)
                fprintf(f, "%02x", ev->kind.block_stored.parent_key.bytes[i]);
            fputc('"', f);
        }
        fputs(",\"token_ids\":[", f);
        for (uint32_t i = 0; i < e->tokens.n; i++)
            fprintf(f, "%s%u", i ? "," : "", e->tokens.v[i]);
        fputc(']', f);
        break;
    case kvtier_Event_block_removed_tag:
        fprintf(f, ",\"kind\":\"removed\",\"tier\":%u,\"reason\":%d",
                ev->kind.block_removed.tier_id, (int)ev->kind.block_removed.reason);
        break;
    case kvtier_Event_block_moved_tag:
        fprintf(f, ",\"kind\":\"moved\",\"from\":%u,\"to\":%u,\"reason\":%d",
                ev->kind.block_moved.src_tier_id, ev->kind.block_moved.dst_tier_id,
                (int)ev->kind.block_moved.reason);
        break;
    case kvtier_Event_cache_get_tag: {
        const kvtier_CacheGet *g = &ev->kind.cache_get;
        fprintf(f, ",\"kind\":\"lookup\",\"request\":");
        s_jstr(f, g->request_id);
        fprintf(f, ",\"mode\":%d,\"hits\":%u,\"head_hits\":%u,\"tier_hits\":{", (int)g->mode,
                g->hit_count, g->head_hits);
        for (pb_size_t i = 0; i < g->tier_hits_count; i++)
            fprintf(f, "%s\"%u\":%u", i ? "," : "", g->tier_hits[i].tier_id, g->tier_hits[i].hits);
        fputc('}', f);
        break;
    }
    case kvtier_Event_tier_changed_tag: {
        const kvtier_TierChanged *t = &ev->kind.tier_changed;
        fprintf(f, ",\"kind\":\"tier\",\"tier\":%u,\"name\":", t->tier_id);
        s_jstr(f, t->name);
        fprintf(f, ",\"up\":%s,\"capacity\":%" PRIu64 ",\"slot_bytes\":%" PRIu64,
                t->up ? "true" : "false", t->capacity_slots, t->slot_bytes);
        break;
    }
    case kvtier_Event_leader_changed_tag:
        fprintf(f, ",\"kind\":\"leader\",\"node\":");
        s_jstr(f, ev->kind.leader_changed.node_id);
        fprintf(f, ",\"leader_epoch\":%" PRIu64 ",\"previous_epoch\":%" PRIu64,
                ev->kind.leader_changed.epoch, ev->kind.leader_changed.previous_epoch);
        break;
    default:
        fprintf(f, ",\"kind\":\"cleared\"");
        break;
    }
    fprintf(f, ",\"keys\":[");
    char hex[2 * BUS_KEY_LEN + 1];
    for (uint32_t k = 0; k < e->keys.n; k++) {
        s_hex(e->keys.keys[k], BUS_KEY_LEN, hex);
        fprintf(f, "%s\"%s\"", k ? "," : "", hex);
    }
    fprintf(f, "]}\n");
}

/* The leader's event endpoints (cluster info): XPUB into out, replay into rout
 * ("" when none), its epoch into *epoch; 0, or -1 with the reason printed
 * (quiet: only when asked again while following). */
static int s_find_endpoint(cli_common_t *o, char *out, size_t len, char *rout, size_t rlen,
                           uint64_t *epoch, bool quiet)
{
    /* asked again while following: bounded by S_PROBE_MS, not by a call's failover
     * budget (15 s), which would hold the live stream while a whole short term passes
     * (its batches then dropped with the socket); a probe that fails is tried again
     * after the next silence */
    cli_common_t probe = *o;
    if (quiet) {
        probe.timeout_ms = probe.timeout_ms && probe.timeout_ms < S_PROBE_MS ? probe.timeout_ms : S_PROBE_MS;
        probe.failover_ms = S_PROBE_MS;
    }
    kvt_client_t *c = cli_connect(&probe, "kvtier-events");
    if (!c)
        return -1;
    kvt_cluster_info_t *ci = calloc(1, sizeof *ci);
    int rc = ci ? kvt_cluster_info(c, ci) : -KVT_INTERNAL;
    if (rc < 0) {
        if (!quiet)
            cli_report_error("events", "cluster info", c, rc);
    } else if (!ci->event_endpoint[0]) {
        if (!quiet)
            fprintf(stderr,
                    "kvtier events: the leader publishes no events (events.endpoint is \"\")\n");
        rc = -1;
    } else {
        snprintf(out, len, "%s", ci->event_endpoint);
        snprintf(rout, rlen, "%s", ci->event_replay_endpoint);
        *epoch = ci->leader_epoch;
    }
    free(ci);
    kvt_close(&c);
    return rc < 0 ? -1 : 0;
}

static bool s_topic_wanted(const s_args_t *a, const char *topic)
{
    return !a->topic || strncmp(topic, a->topic, strlen(a->topic)) == 0;
}

/* A new term's LeaderChanged names the term before it: when that is newer than
 * the last term this stream saw, a whole term went by unseen (its leader lost
 * before this subscriber reached it, and its replay ring with it). */
static void s_check_term(s_run_t *r, const kvtier_LeaderChanged *l)
{
    if (!r->prior_term || !l->previous_epoch || l->previous_epoch <= r->prior_term)
        return;
    r->terms_lost++;
    fprintf(stderr,
            "kvtier events: term %" PRIu64 " (after %" PRIu64 ", before %" PRIu64
            ") is missing from this stream: its events were lost\n",
            l->previous_epoch, r->prior_term, l->epoch);
}

/* Decodes and prints one batch (snapshot: a page of the index at seq); print
 * false: only decoded (a new term's first batch, checked under a topic filter). */
static void s_print_batch(s_run_t *r, const char *topic, uint64_t seq, const void *data, size_t len,
                          bool snapshot, bool print)
{
    kvtier_EventBatch b;
    uint32_t n = 0;
    bus_keys_t keys = {.keys = r->pool, .cap = S_MAX_KEYS};
    bus_u32s_t tokens = {.v = r->tok_pool, .cap = S_MAX_TOKENS};
    kvtier_Status st;
    if (bus_events_decode_tokens(data, len, &b, r->events, S_MAX_EVENTS, &n, &keys, &tokens, &st) <
        0) {
        r->bad++;
        fprintf(stderr, "kvtier events: batch %" PRIu64 " does not decode: %s\n", seq, st.message);
        return;
    }
    for (uint32_t i = 0; !snapshot && seq == BUS_EVENTS_SEQ_FIRST(BUS_EVENTS_SEQ_TERM(seq)) && i < n; i++)
        if (r->events[i].ev.which_kind == kvtier_Event_leader_changed_tag)
            s_check_term(r, &r->events[i].ev.kind.leader_changed);
    if (r->a->summary || !print)
        return;
    for (uint32_t i = 0; i < n; i++) {
        char t[128];
        if (snapshot) /* a page holds every instance: filter as its stored/<id> batch would be */
            snprintf(t, sizeof t, "stored/%.64s", r->events[i].ev.instance_id);
        if (!snapshot || s_topic_wanted(r->a, t))
            s_print_event(r->out, snapshot ? t : topic, seq, &b, &r->events[i], snapshot);
    }
    fflush(r->out);
}

static int s_replay(s_run_t *r, const char *replay_ep, uint64_t from);
static int s_replay_once(s_run_t *r, const char *replay_ep, uint64_t from);

/* One batch, live or replayed: printed once (a seq not above the last is a
 * duplicate), gaps counted within a leader's term. A live batch of a new term
 * that is not its first (the SUB reconnected by itself to a new leader on the
 * same address and missed its start) first replays that term from batch 1; a
 * live batch past a gap within the term first replays the gap. */
static void s_on_batch(s_run_t *r, const uint8_t *t, size_t tlen, uint64_t seq, const void *data,
                       size_t len)
{
    if (r->last && seq <= r->last)
        return;
    uint64_t term = BUS_EVENTS_SEQ_TERM(seq);
    if (r->last && term > BUS_EVENTS_SEQ_TERM(r->last) && !r->replaying) {
        fprintf(stderr, "kvtier events: following the new leader (epoch %" PRIu64 ")\n", term);
        if (r->replay_ep[0] && seq != BUS_EVENTS_SEQ_FIRST(term)) {
            r->replaying = true;
            if (s_replay(r, r->replay_ep, BUS_EVENTS_SEQ_FIRST(term)) < 0)
                fprintf(stderr, "kvtier events: the new term's replay failed; going on live\n");
            r->replaying = false;
            if (r->last && seq <= r->last)
                return;
        }
    }
    /* a gap within the term on the live stream (the SUB joined the new leader's
     * XPUB a moment after a replay ended, or its queue overflowed): the replay ring
     * fills it; what the ring no longer holds counts as missing there */
    if (r->last && term == BUS_EVENTS_SEQ_TERM(r->last) && seq > r->last + 1 && !r->replaying &&
        r->replay_ep[0] && !r->a->topic) {
        if (s_replay(r, r->replay_ep, r->last + 1) < 0)
            fprintf(stderr, "kvtier events: the replay of a gap failed; going on live\n");
        if (r->last && seq <= r->last)
            return;
    }
    char topic[128];
    if (tlen >= sizeof topic) {
        r->bad++;
        return;
    }
    memcpy(topic, t, tlen);
    topic[tlen] = '\0';
    /* a gap within one leader's term (the epoch is in the high bits); with a
     * topic filter the SUB skips batches on purpose */
    if (r->last && BUS_EVENTS_SEQ_TERM(seq) == BUS_EVENTS_SEQ_TERM(r->last) && seq > r->last + 1 &&
        !r->a->topic) {
        r->gaps++;
        r->missing += seq - r->last - 1;
    }
    if (!r->last || BUS_EVENTS_SEQ_TERM(seq) != BUS_EVENTS_SEQ_TERM(r->last))
        r->prior_term = r->last ? BUS_EVENTS_SEQ_TERM(r->last) : 0;
    r->last = seq;
    r->batches++;
    bool wanted = s_topic_wanted(r->a, topic);
    if (wanted || seq == BUS_EVENTS_SEQ_FIRST(BUS_EVENTS_SEQ_TERM(seq)))
        s_print_batch(r, topic, seq, data, len, false, wanted);
}

/* The next message on the DEALER within S_ANSWER_MS, or NULL (reason printed). */
static zmsg_t *s_answer(zsock_t *d, const char *what)
{
    zpoller_t *p = zpoller_new(d, NULL);
    void *which = p ? zpoller_wait(p, S_ANSWER_MS) : NULL;
    zpoller_destroy(&p);
    zmsg_t *m = which ? zmsg_recv(d) : NULL;
    if (!m)
        fprintf(stderr, "kvtier events: %s: no answer within %d ms\n", what, S_ANSWER_MS);
    return m;
}

/* An ERROR answer: printed; true when m is one. */
static bool s_error_answer(zmsg_t *m, const char *what)
{
    zframe_t *v = zmsg_first(m);
    if (!zframe_streq(v, "ERROR"))
        return false;
    zframe_t *text = zmsg_next(m);
    fprintf(stderr, "kvtier events: %s refused: %.*s\n", what, text ? (int)zframe_size(text) : 0,
            text ? (const char *)zframe_data(text) : "");
    return true;
}

/* REPLAY from seq over the replay socket: every batch not printed yet, in
 * order; a GAP (history lost) counts as a gap. 0, or -1 (reason printed). */
static int s_replay(s_run_t *r, const char *replay_ep, uint64_t from)
{
    bool was = r->replaying;
    r->replaying = true;
    int rc = s_replay_once(r, replay_ep, from);
    r->replaying = was;
    return rc;
}

static int s_replay_once(s_run_t *r, const char *replay_ep, uint64_t from)
{
    zsock_t *d = cli_socket("kvtier events: replay socket", r->curve, ZMQ_DEALER, replay_ep);
    if (!d)
        return -1;
    uint8_t be[8];
    bus_events_seq_put(be, from);
    zmsg_t *m = zmsg_new();
    zmsg_addstr(m, "REPLAY");
    zmsg_addmem(m, be, 8);
    int rc = zmsg_send(&m, d) == 0 ? 1 : -1;
    while (rc > 0) {
        m = s_answer(d, "replay");
        if (!m || s_error_answer(m, "replay")) {
            rc = -1;
        } else {
            zframe_t *v = zmsg_first(m), *f1 = zmsg_next(m), *f2 = zmsg_next(m), *f3 = zmsg_next(m);
            if (zframe_streq(v, "BATCH") && f3 && zframe_size(f2) == 8)
                s_on_batch(r, zframe_data(f1), zframe_size(f1), bus_events_seq_get(zframe_data(f2)),
                           zframe_data(f3), zframe_size(f3));
            else if (zframe_streq(v, "GAP") && f1 && zframe_size(f1) == 8) {
                uint64_t oldest = bus_events_seq_get(zframe_data(f1));
                fprintf(stderr, "kvtier events: replay: batches before %" PRIu64 " are gone\n",
                        oldest);
                /* missing: what was not printed yet, within the oldest batch's term */
                uint64_t base = from > r->last ? from : r->last + 1;
                if (BUS_EVENTS_SEQ_TERM(base) < BUS_EVENTS_SEQ_TERM(oldest))
                    base = BUS_EVENTS_SEQ_FIRST(BUS_EVENTS_SEQ_TERM(oldest));
                if (oldest > base) {
                    r->gaps++;
                    r->missing += oldest - base;
                }
            } else if (zframe_streq(v, "END"))
                rc = 0;
            else
                r->bad++;
        }
        zmsg_destroy(&m);
    }
    zsock_destroy(&d);
    return rc;
}

/* SNAPSHOT, then REPLAY from the seq it reflects: prints the index as
 * "snapshot": true stored events. 0, or -1 (reason printed). */
static int s_snapshot(s_run_t *r, const char *replay_ep)
{
    zsock_t *d = cli_socket("kvtier events: replay socket", r->curve, ZMQ_DEALER, replay_ep);
    if (!d)
        return -1;
    zstr_send(d, "SNAPSHOT");
    uint64_t at = 0;
    int rc = 1;
    while (rc > 0) {
        zmsg_t *m = s_answer(d, "snapshot");
        if (!m || s_error_answer(m, "snapshot")) {
            rc = -1;
        } else {
            zframe_t *v = zmsg_first(m), *f1 = zmsg_next(m);
            if (zframe_streq(v, "SNAPSHOT") && f1 && zframe_size(f1) == 8)
                at = bus_events_seq_get(zframe_data(f1));
            else if (zframe_streq(v, "BLOCKS") && f1)
                s_print_batch(r, "snapshot", at, zframe_data(f1), zframe_size(f1), true, true);
            else if (zframe_streq(v, "END"))
                rc = 0;
            else
                r->bad++;
        }
        zmsg_destroy(&m);
    }
    zsock_destroy(&d);
    if (rc < 0)
        return -1;
    fprintf(stderr, "kvtier events: snapshot at seq %" PRIu64 "\n", at);
    r->last = at;
    return s_replay(r, replay_ep, at + 1);
}

static zsock_t *s_subscribe(const s_run_t *r, const char *ep, const char *topic)
{
    zsock_t *sub = cli_socket("kvtier events", r->curve, ZMQ_SUB, ep);
    if (!sub)
        return NULL;
    zsock_set_subscribe(sub, topic ? topic : "");
    return sub;
}

/* Receives one live message (waited for by the caller). */
static void s_on_live(s_run_t *r, zsock_t *sub)
{
    zmsg_t *m = zmsg_recv(sub);
    if (!m)
        return;
    zframe_t *t = zmsg_first(m), *s = zmsg_next(m), *p = zmsg_next(m);
    if (zmsg_size(m) != 3 || zframe_size(s) != 8)
        r->bad++;
    else
        s_on_batch(r, zframe_data(t), zframe_size(t), bus_events_seq_get(zframe_data(s)),
                   zframe_data(p), zframe_size(p));
    zmsg_destroy(&m);
}

/* Every batch already queued on SUB, without waiting. */
static void s_drain(s_run_t *r, zsock_t *sub)
{
    zpoller_t *p = zpoller_new(sub, NULL);
    while (p && !s_stop && (!r->a->count || r->batches < r->a->count) && zpoller_wait(p, 0))
        s_on_live(r, sub);
    zpoller_destroy(&p);
}

static void s_usage(FILE *f)
{
    fprintf(
        f,
        "usage: kvtier events [--endpoint EP] [--replay-endpoint EP] [--topic PREFIX]\n"
        "                     [--from SEQ | --snapshot] [--record FILE] [--count N]\n"
        "                     [--for MS] [--summary] [connection flags]\n"
        "  prints the leader's events (docs/EVENTS.md) as JSON lines, one per event\n"
        "  --endpoint EP         the event socket (default: the leader's, from cluster\n"
        "                        info, followed across failovers)\n"
        "  --replay-endpoint EP  its replay socket (default: the leader's)\n"
        "  --topic PREFIX        only batches whose topic starts with PREFIX (stored/, lookup/ID)\n"
        "  --from SEQ            first the batches from SEQ still in the replay ring\n"
        "  --snapshot            first the index now (\"snapshot\":true stored events), then\n"
        "                        every batch after it\n"
        "  --record FILE         write the JSON lines to FILE (kvtier optimize reads it)\n"
        "  --count N             stop after N batches     --for MS  stop after MS ms\n"
        "  --summary             print nothing but the last line\n"
        "  always ends with \"events: N batches, G gaps (M missing), L terms lost\" on "
        "stderr\n" CLI_COMMON_USAGE);
}

/* Subscribes, catches up (--from / --snapshot) and prints until a bound or a
 * signal; follows the leader when FOLLOW. 0 or -1. */
static int s_run(s_run_t *r, cli_common_t *o, char *ep, char *rep, uint64_t epoch, bool follow)
{
    const s_args_t *a = r->a;
    zsock_t *sub = s_subscribe(r, ep, a->topic);
    if (!sub)
        return -1;
    if ((a->have_from || a->snapshot) && !rep[0]) {
        fprintf(stderr, "kvtier events: the leader has no replay socket (events.replay_endpoint "
                        "is \"\"); give --replay-endpoint\n");
        zsock_destroy(&sub);
        return -1;
    }
    /* over CURVE the streams may be closed to this key (security.curve.instances: only
     * keys granted "*"): a replay from past the end asks, and says why when refused,
     * instead of a subscription that silently receives nothing */
    int rc = 0;
    if (r->curve && rep[0] && !a->snapshot && !a->have_from)
        rc = s_replay(r, rep, UINT64_MAX);
    if (rc == 0)
        rc = a->snapshot ? s_snapshot(r, rep) : a->have_from ? s_replay(r, rep, a->from) : 0;
    int64_t until = a->for_ms ? zclock_mono() + (int64_t)a->for_ms : INT64_MAX;
    int64_t heard = zclock_mono();
    zpoller_t *poller = zpoller_new(sub, NULL);
    while (rc == 0 && !s_stop && (!a->count || r->batches < a->count) && zclock_mono() < until) {
        int64_t left = until - zclock_mono();
        if (zpoller_wait(poller, left < 200 ? (int)left : 200)) {
            s_on_live(r, sub);
            heard = zclock_mono();
            continue;
        }
        if (!follow || zclock_mono() - heard < S_FOLLOW_MS)
            continue;
        heard = zclock_mono();
        char nep[256], nrep[256];
        uint64_t nepoch = 0;
        /* epoch 0: no leader yet (a standby's answer during an election) — not a new
         * leader to follow: going there would replay from a socket nobody serves and
         * hold the live stream meanwhile, losing the term that is about to begin */
        if (s_find_endpoint(o, nep, sizeof nep, nrep, sizeof nrep, &nepoch, true) < 0 ||
            nepoch == 0 || nepoch == epoch)
            continue;
        /* what arrived meanwhile first: on the same address the SUB may have
         * reconnected by itself to a leader between the two we know of, and its
         * batches are only in this socket's queue */
        s_drain(r, sub);
        if (r->last && nepoch <= BUS_EVENTS_SEQ_TERM(r->last)) {
            epoch = nepoch; /* followed already, by the live stream */
            continue;
        }
        /* a new leader: its socket, and its term from the first batch on */
        fprintf(stderr, "kvtier events: following the new leader (epoch %" PRIu64 ") at %s\n",
                nepoch, nep);
        bool moved = strcmp(ep, nep) != 0;
        snprintf(ep, 256, "%s", nep);
        snprintf(rep, 256, "%s", nrep);
        epoch = nepoch;
        if (moved) {
            zpoller_destroy(&poller);
            zsock_destroy(&sub);
            sub = s_subscribe(r, ep, a->topic);
            if (!sub)
                return -1;
            poller = zpoller_new(sub, NULL);
        }
        if (rep[0] && s_replay(r, rep, BUS_EVENTS_SEQ_FIRST(nepoch)) < 0)
            fprintf(stderr, "kvtier events: the new leader's replay failed; going on live\n");
    }
    zpoller_destroy(&poller);
    zsock_destroy(&sub);
    return rc;
}

int cli_cmd_events(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_COMMON_LONGOPTS,
        {"endpoint", required_argument, NULL, S_OPT_ENDPOINT},
        {"replay-endpoint", required_argument, NULL, S_OPT_REPLAY_EP},
        {"topic", required_argument, NULL, S_OPT_TOPIC},
        {"count", required_argument, NULL, S_OPT_COUNT},
        {"for", required_argument, NULL, S_OPT_FOR},
        {"from", required_argument, NULL, S_OPT_FROM},
        {"snapshot", no_argument, NULL, S_OPT_SNAPSHOT},
        {"record", required_argument, NULL, S_OPT_RECORD},
        {"summary", no_argument, NULL, S_OPT_SUM},
        {0, 0, 0, 0}};
    cli_common_t o;
    s_args_t a = {0};
    cli_common_init(&o);
    int first = cli_parse(argc, argv, "c:", longopts, &o, s_opt, &a);
    bool clash = (a.have_from && a.snapshot) || (a.record && a.summary);
    if (first < 0 || o.help || first != argc || clash) {
        if (a.have_from && a.snapshot)
            fprintf(stderr, "kvtier events: --from and --snapshot exclude each other\n");
        if (a.record && a.summary)
            fprintf(stderr, "kvtier events: --summary prints no events: nothing to --record\n");
        s_usage(o.help ? stdout : stderr);
        return o.help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    char ep[256] = "", rep[256] = "";
    uint64_t epoch = 0;
    bool follow = !a.endpoint;
    if (a.endpoint)
        snprintf(ep, sizeof ep, "%s", a.endpoint);
    else if (s_find_endpoint(&o, ep, sizeof ep, rep, sizeof rep, &epoch, false) < 0)
        return CLI_EXIT_FAIL;
    if (a.replay_endpoint)
        snprintf(rep, sizeof rep, "%s", a.replay_endpoint);
    bus_curve_client_t keys;
    bool curve = false;
    if (cli_curve_keys(&o, &curve, &keys) < 0)
        return CLI_EXIT_FAIL;
    s_run_t r = {.a = &a, .out = stdout, .replay_ep = rep, .curve = curve ? &keys : NULL};
    if (a.record && !(r.out = fopen(a.record, "w"))) {
        fprintf(stderr, "kvtier events: cannot write %s: %s\n", a.record, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    signal(SIGINT, s_on_signal);
    signal(SIGTERM, s_on_signal);
    r.events = calloc(S_MAX_EVENTS, sizeof *r.events);
    r.pool = calloc(S_MAX_KEYS, BUS_KEY_LEN);
    r.tok_pool = calloc(S_MAX_TOKENS, sizeof *r.tok_pool);
    int rc = -1;
    if (!r.events || !r.pool || !r.tok_pool)
        fprintf(stderr, "kvtier events: out of memory\n");
    else
        rc = s_run(&r, &o, ep, rep, epoch, follow);
    free(r.events);
    free(r.pool);
    free(r.tok_pool);
    if (a.record && fclose(r.out) != 0) {
        fprintf(stderr, "kvtier events: writing %s failed: %s\n", a.record, strerror(errno));
        rc = -1;
    }
    fprintf(stderr,
            "events: %" PRIu64 " batches, %" PRIu64 " gaps (%" PRIu64 " missing), %" PRIu64
            " terms lost%s\n",
            r.batches, r.gaps, r.missing, r.terms_lost, r.bad ? ", some undecodable" : "");
    return rc < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
