/* wire_testserver.c — the test server of wire_testserver.h: a zactor owning a
 * bus_server, answering as that header says. Test use only. */
#include "wire_testserver.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_server.h"

#define TU_QUEUE_MAX 64

typedef struct {
    zframe_t *rid;
    zmsg_t *msg;
} tu_queued_t;

typedef struct {
    bus_server_t *srv;
    bus_arrays_t *in;
    bus_arrays_t *out;
    kvtier_Envelope *req_env;
    kvtier_Envelope *rep;
    tu_queued_t held[TU_QUEUE_MAX];
    uint32_t nheld;
    tu_queued_t batch[TU_QUEUE_MAX];
    uint32_t nbatch;
} tu_server_t;

static void s_free_block(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* Answers one request held as a message (decoded again here). */
static void s_answer(tu_server_t *s, zframe_t *rid, zmsg_t *msg)
{
    kvtier_Status st;
    if (bus_msg_decode(msg, BUS_DIR_REQUEST, s->req_env, s->in, &st) < 0) {
        bus_server_reply_error(s->srv, rid, s->req_env->corr_id, st.code, "%s", st.message);
        return;
    }
    kvtier_Envelope *req = s->req_env;
    bus_arrays_clear(s->out);
    switch (req->which_body) {
    case kvtier_Envelope_lookup_req_tag: {
        bus_env_init_reply(s->rep, req, kvtier_Envelope_lookup_rep_tag, "testsrv");
        s->rep->body.lookup_rep.hit_count = req->body.lookup_req.window;
        for (uint32_t i = 0; i < s->in->keys.n; i++) {
            s->out->mask.v[i] = s->in->keys.keys[i][0] & 1;
            s->out->tier_ids.v[i] = s->in->keys.keys[i][1];
        }
        s->out->mask.n = s->out->tier_ids.n = s->in->keys.n;
        bus_server_reply(s->srv, rid, s->rep, s->out, NULL, 0, NULL);
        break;
    }
    case kvtier_Envelope_write_slots_req_tag: {
        uint64_t total = 0;
        uint32_t segs = req->body.write_slots_req.segments ? req->body.write_slots_req.segments : 1;
        for (uint32_t i = 0; i < s->in->sizes.n; i++) {
            zframe_t *f = bus_msg_payload(msg, i);
            uint8_t want = (uint8_t)(s->in->slots.v[i / segs] + i % segs);
            for (size_t b = 0; b < zframe_size(f); b++)
                if (zframe_data(f)[b] != want) {
                    bus_server_reply_error(s->srv, rid, req->corr_id,
                                           kvtier_StatusCode_STATUS_INTERNAL,
                                           "frame %u byte %zu corrupt", i, b);
                    return;
                }
            total += zframe_size(f);
        }
        bus_env_init_reply(s->rep, req, kvtier_Envelope_write_slots_rep_tag, "testsrv");
        s->rep->body.write_slots_rep.written = (uint32_t)total;
        bus_server_reply(s->srv, rid, s->rep, NULL, NULL, 0, NULL);
        break;
    }
    case kvtier_Envelope_read_slots_req_tag: {
        bus_payload_t pl[16];
        uint32_t n = s->in->slots.n < 16 ? s->in->slots.n : 16;
        for (uint32_t i = 0; i < n; i++) {
            size_t size = i < s->in->sizes.n ? s->in->sizes.v[i] : 64;
            uint8_t *block = malloc(size ? size : 1);
            memset(block, (int)(s->in->slots.v[i] & 0xff), size);
            pl[i] = (bus_payload_t){.data = block, .size = size, .free_fn = s_free_block};
            s->out->sizes.v[i] = size;
        }
        s->out->sizes.n = n;
        bus_env_init_reply(s->rep, req, kvtier_Envelope_read_slots_rep_tag, "testsrv");
        bus_server_reply(s->srv, rid, s->rep, s->out, pl, n, NULL);
        break;
    }
    default:
        bus_server_reply_error(s->srv, rid, req->corr_id, kvtier_StatusCode_STATUS_NOT_FOUND,
                               "test server does not serve %s", bus_body_name(req->which_body));
    }
}

static void s_answer_queued(tu_server_t *s, tu_queued_t *q)
{
    s_answer(s, q->rid, q->msg);
    zframe_destroy(&q->rid);
    zmsg_destroy(&q->msg);
}

static void s_on_request(tu_server_t *s, const tu_server_args_t *cfg, bus_request_t *req)
{
    tu_queued_t q = {.rid = req->routing_id, .msg = req->msg};
    req->routing_id = NULL;
    req->msg = NULL;
    if (req->env.which_body == kvtier_Envelope_lookup_req_tag) {
        uint32_t window = req->env.body.lookup_req.window;
        if (window == TU_HOLD && s->nheld < TU_QUEUE_MAX) {
            s->held[s->nheld++] = q;
            return;
        }
        if (window == TU_FLUSH) {
            for (uint32_t i = 0; i < s->nheld; i++)
                s_answer_queued(s, &s->held[i]);
            s->nheld = 0;
        } else if (cfg->reverse_batch && s->nbatch < TU_QUEUE_MAX) {
            s->batch[s->nbatch++] = q;
            if (s->nbatch >= cfg->reverse_batch) {
                while (s->nbatch > 0)
                    s_answer_queued(s, &s->batch[--s->nbatch]);
            }
            return;
        }
    }
    s_answer_queued(s, &q);
}

static void s_server_actor(zsock_t *pipe, void *args)
{
    const tu_server_args_t *cfg = args;
    tu_server_t s = {0};
    s.srv = bus_server_new(cfg->endpoint, "testsrv");
    s.in = bus_arrays_new(BUS_MAX_ARRAY, 1 << 16);
    s.out = bus_arrays_new(BUS_MAX_ARRAY, 1 << 16);
    s.req_env = calloc(1, sizeof *s.req_env);
    s.rep = calloc(1, sizeof *s.rep);
    bus_request_t *req = calloc(1, sizeof *req);
    zpoller_t *poller = zpoller_new(pipe, bus_server_sock(s.srv), NULL);
    zsock_signal(pipe, 0);
    zstr_send(pipe, bus_server_endpoint(s.srv));
    for (;;) {
        void *which = zpoller_wait(poller, -1);
        if (which == pipe) {
            char *cmd = zstr_recv(pipe);
            bool term = !cmd || streq(cmd, "$TERM");
            if (cmd && streq(cmd, "STATS")) {
                bus_server_stats_t stats;
                bus_server_stats(s.srv, &stats);
                zstr_sendf(pipe, "%" PRIu64 " %" PRIu64, stats.accepted, stats.rejected);
            }
            zstr_free(&cmd);
            if (term)
                break;
        } else if (which == bus_server_sock(s.srv)) {
            if (bus_server_recv(s.srv, 0, req, s.in) == 1)
                s_on_request(&s, cfg, req);
        } else {
            break;
        }
    }
    for (uint32_t i = 0; i < s.nheld; i++) {
        zframe_destroy(&s.held[i].rid);
        zmsg_destroy(&s.held[i].msg);
    }
    for (uint32_t i = 0; i < s.nbatch; i++) {
        zframe_destroy(&s.batch[i].rid);
        zmsg_destroy(&s.batch[i].msg);
    }
    bus_request_reset(req);
    free(req);
    free(s.req_env);
    free(s.rep);
    zpoller_destroy(&poller);
    bus_arrays_destroy(&s.in);
    bus_arrays_destroy(&s.out);
    bus_server_destroy(&s.srv);
}

/* Starts the server; *endpoint_out gets its bound endpoint (free with zstr_free). */
zactor_t *tu_server_start(tu_server_args_t *args, char **endpoint_out)
{
    zactor_t *actor = zactor_new(s_server_actor, args);
    *endpoint_out = zstr_recv(actor);
    return actor;
}

void tu_server_counts(zactor_t *actor, uint64_t *accepted, uint64_t *rejected)
{
    zstr_send(actor, "STATS");
    char *reply = zstr_recv(actor);
    unsigned long long a = 0, r = 0;
    if (reply)
        sscanf(reply, "%llu %llu", &a, &r);
    *accepted = a;
    *rejected = r;
    zstr_free(&reply);
}
