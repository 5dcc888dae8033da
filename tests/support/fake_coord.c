/* fake_coord.c — the scripted coordinator of fake_coord.h: one zactor owning a
 * bus_server, driven through its pipe by the fc_* wrappers at the end. Test use
 * only; never a scheduler (no index, no slot engine). */
#include "fake_coord.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bus_client.h"
#include "bus_server.h"

typedef struct {
    bus_server_t *srv;
    bus_arrays_t *in, *out;
    kvtier_Envelope *env, *rep;
    bus_request_t *req;
    fc_mode_t mode;
    char leader[128];
    fc_token_mode_t token_mode;
    bus_token_tier_t tier; /* the tier tokens point at */
    uint32_t block_size;
    bus_client_t *tier_cl;
    uint64_t token_seq;
    uint8_t *payload;
    uint32_t n_counters; /* 0: the two unpaged counters */
    bool growing;
    fc_stats_t stats;
} fc_state_t;

static void s_reply(fc_state_t *s, pb_size_t tag)
{
    bus_env_init_reply(s->rep, &s->req->env, tag, "fake");
}

static void s_send(fc_state_t *s, bus_arrays_t *arr)
{
    bus_server_reply(s->srv, s->req->routing_id, s->rep, arr, NULL, 0, NULL);
    s->stats.served++;
}

static void s_token(fc_state_t *s, bus_token_kind_t kind, kvtier_Token *tok)
{
    uint32_t n = s->in->keys.n;
    bus_token_entry_t *e = calloc(n ? n : 1, sizeof *e);
    for (uint32_t i = 0; i < n; i++)
        e[i] = (bus_token_entry_t){.tier = 0,
                                   .src_tier = kind == BUS_TOKEN_PREFETCH ? 0 : BUS_TOKEN_NO_TIER,
                                   .size = s->block_size,
                                   .slot = s->in->keys.keys[i][0],
                                   .src_slot = s->in->keys.keys[i][0]};
    bus_token_kind_t k = kind;
    if (s->token_mode == FC_TOKEN_WRONG_KIND)
        k = kind == BUS_TOKEN_GET ? BUS_TOKEN_PUT : BUS_TOKEN_GET;
    uint32_t ne = s->token_mode == FC_TOKEN_SHORT && n > 0 ? n - 1 : n;
    size_t len = 0;
    bus_token_meta_t meta = {.token_id = s->token_seq + 1};
    int rc = bus_token_encode(k, &meta, &s->tier, 1, e, ne, s->payload, BUS_MAX_BLOB, &len);
    if (rc < 0)
        len = 0;
    if (s->token_mode == FC_TOKEN_GARBAGE) {
        memcpy(s->payload, "garbage!", 8);
        len = 8;
    }
    if (s->token_mode == FC_TOKEN_V1) { /* v1 header: no tiers, no entries */
        const uint8_t v1[16] = {'K', 'V', 'T', '1', 1, 0, (uint8_t)k, 0};
        memcpy(s->payload, v1, sizeof v1);
        len = sizeof v1;
    }
    free(e);
    /* keys echo the request keys */
    memcpy(s->out->keys.keys, s->in->keys.keys, (size_t)n * BUS_KEY_LEN);
    s->out->keys.n = n;
    memcpy(s->out->payload.data, s->payload, len);
    s->out->payload.len = (uint32_t)len;
    tok->token_id = ++s->token_seq;
    tok->lease_ms = 30000;
}

static void s_put_headers(fc_state_t *s)
{
    if (!s->tier_cl)
        return;
    kvtier_Envelope *ph = calloc(1, sizeof *ph);
    kvtier_Envelope *rep = calloc(1, sizeof *rep);
    bus_arrays_t *a = bus_arrays_new(4096, 0);
    bus_env_init(ph, kvtier_Envelope_put_header_req_tag, "fake");
    ph->body.put_header_req.tier_id = s->tier.tier_id;
    snprintf(ph->body.put_header_req.instance_id, sizeof ph->body.put_header_req.instance_id, "%s",
             "inst");
    ph->body.put_header_req.state = kvtier_LocationState_LOCATION_SERVING;
    uint32_t m = 0;
    for (uint32_t i = 0; i < s->in->keys.n && m < 4096; i++) {
        bool ok = s->in->mask.n == 0 || (i < s->in->mask.n && s->in->mask.v[i]);
        if (!ok)
            continue;
        a->slots.v[m] = s->in->keys.keys[i][0];
        memcpy(a->keys.keys[m], s->in->keys.keys[i], BUS_KEY_LEN);
        a->sizes.v[m] = s->block_size;
        a->checksums.v[m] = i < s->in->checksums.n ? s->in->checksums.v[i] : 0;
        m++;
    }
    a->slots.n = a->keys.n = a->sizes.n = a->checksums.n = m;
    kvtier_Status st;
    if (m > 0 && bus_client_call(s->tier_cl, ph, a, NULL, 0, 2000, rep, NULL, NULL, &st) == 0)
        s->stats.headers_put += rep->body.put_header_rep.written;
    bus_arrays_destroy(&a);
    free(ph);
    free(rep);
}

/* A page of the n_counters counters, as the scheduler pages them. */
static void s_stats_page(fc_state_t *s, const kvtier_StatsRequest *q, kvtier_StatsReply *r)
{
    if (s->growing)
        s->n_counters++;
    uint32_t max = sizeof r->counters / sizeof r->counters[0];
    if (q->max_counters && q->max_counters < max)
        max = q->max_counters;
    uint32_t i = q->offset < s->n_counters ? q->offset : s->n_counters;
    for (; i < s->n_counters && r->counters_count < max; i++) {
        kvtier_StatCounter *c = &r->counters[r->counters_count++];
        snprintf(c->name, sizeof c->name, "c%u", i);
        c->value = 1000 + i;
    }
    r->total = s->n_counters;
    r->next_offset = i;
}

/* Complete* requests carry their token's keys nowhere: the fake remembers the
 * keys of the last prepare for CompletePut's headers. */
typedef struct {
    uint8_t keys[4096][BUS_KEY_LEN];
    uint32_t n;
} fc_last_t;

static void s_record_success(fc_state_t *s)
{
    s->stats.completes++;
    s->stats.last_success_n = s->in->mask.n;
    s->stats.last_success_true = 0;
    for (uint32_t i = 0; i < s->in->mask.n; i++)
        s->stats.last_success_true += s->in->mask.v[i];
}

static void s_serve(fc_state_t *s, fc_last_t *last)
{
    kvtier_Envelope *q = &s->req->env;
    bus_arrays_clear(s->out);
    switch (q->which_body) {
    case kvtier_Envelope_cluster_info_req_tag:
        s_reply(s, kvtier_Envelope_cluster_info_rep_tag);
        snprintf(s->rep->body.cluster_info_rep.cluster, 64, "test");
        snprintf(s->rep->body.cluster_info_rep.leader_endpoint, 128, "%s",
                 bus_server_endpoint(s->srv));
        s->rep->body.cluster_info_rep.leader_epoch = 7;
        s->rep->body.cluster_info_rep.tiers_count = 1;
        s->rep->body.cluster_info_rep.tiers[0].tier_id = 1;
        snprintf(s->rep->body.cluster_info_rep.tiers[0].name, 32, "host0");
        s->rep->body.cluster_info_rep.tiers[0].kind = kvtier_TierKind_TIER_KIND_HOST;
        s->rep->body.cluster_info_rep.tiers[0].up = true;
        s_send(s, NULL);
        return;
    case kvtier_Envelope_register_instance_req_tag:
        s_reply(s, kvtier_Envelope_register_instance_rep_tag);
        s->rep->body.register_instance_rep.created = true;
        s_send(s, NULL);
        return;
    case kvtier_Envelope_request_begin_req_tag:
        s->stats.begins++;
        s_reply(s, kvtier_Envelope_request_begin_rep_tag);
        s_send(s, NULL);
        return;
    case kvtier_Envelope_request_end_req_tag:
        s_reply(s, kvtier_Envelope_request_end_rep_tag);
        s->rep->body.request_end_rep.released_pins = 3;
        s_send(s, NULL);
        return;
    case kvtier_Envelope_lookup_req_tag: {
        s_reply(s, kvtier_Envelope_lookup_rep_tag);
        uint32_t hits = 0;
        for (uint32_t i = 0; i < s->in->keys.n; i++) {
            s->out->mask.v[i] = s->in->keys.keys[i][0] & 1;
            s->out->tier_ids.v[i] = s->out->mask.v[i] ? 1 : 0;
            hits += s->out->mask.v[i];
        }
        s->out->mask.n = s->out->tier_ids.n = s->in->keys.n;
        s->rep->body.lookup_rep.hit_count = hits;
        s_send(s, s->out);
        return;
    }
    case kvtier_Envelope_touch_req_tag:
        s_reply(s, kvtier_Envelope_touch_rep_tag);
        s->rep->body.touch_rep.touched = s->in->keys.n;
        s_send(s, NULL);
        return;
    case kvtier_Envelope_remove_req_tag:
        s_reply(s, kvtier_Envelope_remove_rep_tag);
        s->rep->body.remove_rep.removed = s->in->keys.n;
        s_send(s, NULL);
        return;
    case kvtier_Envelope_stats_req_tag:
        s->stats.stats_reqs++;
        s_reply(s, kvtier_Envelope_stats_rep_tag);
        if (s->n_counters) {
            s_stats_page(s, &q->body.stats_req, &s->rep->body.stats_rep);
            s_send(s, NULL);
            return;
        }
        s->rep->body.stats_rep.counters_count = 2;
        snprintf(s->rep->body.stats_rep.counters[0].name, 48, "lookups");
        s->rep->body.stats_rep.counters[0].value = 11;
        snprintf(s->rep->body.stats_rep.counters[1].name, 48, "hits");
        s->rep->body.stats_rep.counters[1].value = 5;
        s_send(s, NULL);
        return;
    case kvtier_Envelope_prepare_get_req_tag:
    case kvtier_Envelope_prepare_put_req_tag:
    case kvtier_Envelope_prepare_prefetch_req_tag: {
        pb_size_t tag = q->which_body;
        bus_token_kind_t kind = tag == kvtier_Envelope_prepare_get_req_tag   ? BUS_TOKEN_GET
                                : tag == kvtier_Envelope_prepare_put_req_tag ? BUS_TOKEN_PUT
                                                                             : BUS_TOKEN_PREFETCH;
        s_reply(s, (pb_size_t)(tag + 1));
        kvtier_Token *tok =
            tag == kvtier_Envelope_prepare_get_req_tag   ? &s->rep->body.prepare_get_rep.token
            : tag == kvtier_Envelope_prepare_put_req_tag ? &s->rep->body.prepare_put_rep.token
                                                         : &s->rep->body.prepare_prefetch_rep.token;
        if (tag == kvtier_Envelope_prepare_get_req_tag)
            s->rep->body.prepare_get_rep.has_token = true;
        else if (tag == kvtier_Envelope_prepare_put_req_tag)
            s->rep->body.prepare_put_rep.has_token = true;
        else
            s->rep->body.prepare_prefetch_rep.has_token = true;
        s_token(s, kind, tok);
        last->n = s->in->keys.n < 4096 ? s->in->keys.n : 4096;
        memcpy(last->keys, s->in->keys.keys, (size_t)last->n * BUS_KEY_LEN);
        s_send(s, s->out);
        return;
    }
    case kvtier_Envelope_complete_put_req_tag: {
        s_record_success(s);
        /* headers for the remembered keys of the last prepare */
        memcpy(s->in->keys.keys, last->keys, (size_t)last->n * BUS_KEY_LEN);
        s->in->keys.n = last->n;
        s_put_headers(s);
        s_reply(s, kvtier_Envelope_complete_put_rep_tag);
        s->rep->body.complete_put_rep.committed = (uint32_t)s->stats.last_success_true;
        s_send(s, NULL);
        return;
    }
    case kvtier_Envelope_copy_prefetch_req_tag:
        /* no migrator here: nothing is copied, every key of the last prepare fails */
        s->stats.copies++;
        s_reply(s, kvtier_Envelope_copy_prefetch_rep_tag);
        for (uint32_t i = 0; i < last->n; i++)
            s->out->mask.v[i] = false;
        s->out->mask.n = last->n;
        s_send(s, s->out);
        return;
    case kvtier_Envelope_complete_get_req_tag:
    case kvtier_Envelope_complete_prefetch_req_tag:
        s_record_success(s);
        s_reply(s, (pb_size_t)(q->which_body + 1));
        s_send(s, NULL);
        return;
    default:
        bus_server_reply_error(s->srv, s->req->routing_id, q->corr_id,
                               kvtier_StatusCode_STATUS_NOT_FOUND, "fake does not serve %s",
                               bus_body_name(q->which_body));
    }
}

static void s_on_request(fc_state_t *s, fc_last_t *last)
{
    s->stats.requests++;
    kvtier_Envelope *q = &s->req->env;
    if (s->mode == FC_SILENT)
        return;
    if (s->mode == FC_STANDBY) {
        if (q->which_body == kvtier_Envelope_cluster_info_req_tag) {
            s_reply(s, kvtier_Envelope_cluster_info_rep_tag);
            snprintf(s->rep->body.cluster_info_rep.leader_endpoint, 128, "%s", s->leader);
            bus_server_reply(s->srv, s->req->routing_id, s->rep, NULL, NULL, 0, NULL);
            return;
        }
        bus_env_init_reply(s->rep, q, 0, "fake");
        s->rep->has_status = true;
        s->rep->status.code = kvtier_StatusCode_STATUS_NOT_LEADER;
        snprintf(s->rep->status.message, sizeof s->rep->status.message, "not the leader");
        snprintf(s->rep->leader_endpoint, sizeof s->rep->leader_endpoint, "%s", s->leader);
        bus_server_reply(s->srv, s->req->routing_id, s->rep, NULL, NULL, 0, NULL);
        s->stats.not_leader++;
        return;
    }
    s_serve(s, last);
}

/* Pipe: "MODE" i s | "TOKEN" i | "TIER" b i i (a bus_token_tier_t, block size,
 * write headers) | "COUNTERS" i i (n, growing) | "STATS" -> b | "ENDPOINT" -> s. Each command but
 * the last two is acknowledged with a signal. */
static void s_actor(zsock_t *pipe, void *args)
{
    (void)args;
    fc_state_t s = {0};
    fc_last_t *last = calloc(1, sizeof *last);
    s.srv = bus_server_new("tcp://127.0.0.1:*", "fake");
    s.in = bus_arrays_new(BUS_MAX_ARRAY, BUS_MAX_BLOB);
    s.out = bus_arrays_new(BUS_MAX_ARRAY, BUS_MAX_BLOB);
    s.payload = malloc(BUS_MAX_BLOB);
    s.rep = calloc(1, sizeof *s.rep);
    s.req = calloc(1, sizeof *s.req);
    s.block_size = 4096;
    zpoller_t *poller = zpoller_new(pipe, bus_server_sock(s.srv), NULL);
    zsock_signal(pipe, 0);
    for (;;) {
        void *which = zpoller_wait(poller, -1);
        if (which == pipe) {
            zmsg_t *m = zmsg_recv(pipe);
            char *cmd = m ? zmsg_popstr(m) : NULL;
            bool term = !cmd || streq(cmd, "$TERM");
            if (cmd && streq(cmd, "MODE")) {
                char *mode = zmsg_popstr(m), *leader = zmsg_popstr(m);
                s.mode = (fc_mode_t)atoi(mode);
                snprintf(s.leader, sizeof s.leader, "%s", leader ? leader : "");
                zstr_free(&mode);
                zstr_free(&leader);
                zsock_signal(pipe, 0);
            } else if (cmd && streq(cmd, "TOKEN")) {
                char *tm = zmsg_popstr(m);
                s.token_mode = (fc_token_mode_t)atoi(tm);
                zstr_free(&tm);
                zsock_signal(pipe, 0);
            } else if (cmd && streq(cmd, "TIER")) {
                zframe_t *f = zmsg_pop(m);
                if (f && zframe_size(f) == sizeof s.tier)
                    memcpy(&s.tier, zframe_data(f), sizeof s.tier);
                zframe_destroy(&f);
                char *bs = zmsg_popstr(m), *hdr = zmsg_popstr(m);
                s.block_size = (uint32_t)atoi(bs);
                bus_client_destroy(&s.tier_cl);
                bus_client_config_t cfg = {.name = "fake", .max_in_flight = 4};
                if (hdr && atoi(hdr))
                    s.tier_cl = bus_client_new(s.tier.endpoint, &cfg);
                zstr_free(&bs);
                zstr_free(&hdr);
                zsock_signal(pipe, 0);
            } else if (cmd && streq(cmd, "COUNTERS")) {
                char *n = zmsg_popstr(m), *grow = zmsg_popstr(m);
                s.n_counters = n ? (uint32_t)atoi(n) : 0;
                s.growing = grow && atoi(grow);
                zstr_free(&n);
                zstr_free(&grow);
                zsock_signal(pipe, 0);
            } else if (cmd && streq(cmd, "STATS")) {
                zsock_send(pipe, "b", &s.stats, sizeof s.stats);
            } else if (cmd && streq(cmd, "ENDPOINT")) {
                zstr_send(pipe, bus_server_endpoint(s.srv));
            }
            zstr_free(&cmd);
            zmsg_destroy(&m);
            if (term)
                break;
        } else if (which == bus_server_sock(s.srv)) {
            if (bus_server_recv(s.srv, 0, s.req, s.in) == 1)
                s_on_request(&s, last);
            bus_request_reset(s.req);
        } else {
            break;
        }
    }
    zpoller_destroy(&poller);
    bus_client_destroy(&s.tier_cl);
    bus_server_destroy(&s.srv);
    bus_arrays_destroy(&s.in);
    bus_arrays_destroy(&s.out);
    free(s.payload);
    free(s.rep);
    free(s.req);
    free(last);
}

/* ---- test-side wrappers (fake_coord.h) ---- */

zactor_t *fc_new(void)
{
    return zactor_new(s_actor, NULL);
}

char *fc_endpoint(zactor_t *a, char *buf, size_t len)
{
    zstr_send(a, "ENDPOINT");
    char *ep = zstr_recv(a);
    snprintf(buf, len, "%s", ep ? ep : "");
    zstr_free(&ep);
    return buf;
}

void fc_set_mode(zactor_t *a, fc_mode_t mode, const char *leader)
{
    zsock_send(a, "sis", "MODE", (int)mode, leader ? leader : "");
    zsock_wait(a);
}

void fc_set_token_mode(zactor_t *a, fc_token_mode_t mode)
{
    zsock_send(a, "si", "TOKEN", (int)mode);
    zsock_wait(a);
}

/* headers: CompletePut writes SERVING headers through the tier actor at t->endpoint. */
void fc_set_tier(zactor_t *a, const bus_token_tier_t *t, uint32_t block_size, bool headers)
{
    zsock_send(a, "sbii", "TIER", t, sizeof *t, (int)block_size, (int)headers);
    zsock_wait(a);
}

/* Stats from now on: n paged counters (0: the two unpaged ones), one more on every
 * StatsRequest when growing. */
void fc_set_counters(zactor_t *a, uint32_t n, bool growing)
{
    zsock_send(a, "sii", "COUNTERS", (int)n, (int)growing);
    zsock_wait(a);
}

fc_stats_t fc_stats(zactor_t *a)
{
    fc_stats_t st = {0};
    zstr_send(a, "STATS");
    zframe_t *f = NULL;
    zsock_recv(a, "f", &f);
    if (f && zframe_size(f) == sizeof st)
        memcpy(&st, zframe_data(f), sizeof st);
    zframe_destroy(&f);
    return st;
}
