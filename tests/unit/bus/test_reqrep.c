/* test_reqrep.c — bus_client over DEALER against a real bus_server (issue 2 §3):
 * many requests in flight matched out of order, per-request timeout completing
 * exactly once while others succeed, late replies dropped and counted, the
 * in-flight bound refusing with a clear status, payload frames both ways, and
 * replies that do not decode completing their request with INVALID_ARGUMENT, and
 * (fail_on_disconnect) a dropped connection failing what is in flight. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus_client.h"
#include "reqrep_kit.h"

/* Issue 2 §3: a synchronous call returns the matching reply with its arrays. */
static void test_sync_call_returns_the_reply_and_its_arrays(void **state)
{
    (void)state;
    env_t *e = s_start(0);
    bus_client_t *c = bus_client_new(e->endpoint, &(bus_client_config_t){.name = "sync"});
    assert_non_null(c);
    uint8_t keys[3][BUS_KEY_LEN];
    bool mask[3];
    uint32_t tiers[3];
    for (uint32_t i = 0; i < 3; i++)
        tu_key(i + 100, keys[i]);
    bus_arrays_t req_arr = {.keys = {.keys = keys, .n = 3, .cap = 3}};
    bus_arrays_t rep_arr = {.mask = {.v = mask, .cap = 3}, .tier_ids = {.v = tiers, .cap = 3}};
    kvtier_Envelope *req = calloc(1, sizeof *req), *rep = calloc(1, sizeof *rep);
    bus_env_init(req, kvtier_Envelope_lookup_req_tag, NULL);
    req->body.lookup_req.window = 42;
    kvtier_Status st;
    assert_int_equal(
        bus_client_call(c, req, &req_arr, NULL, 0, LONG_TIMEOUT_MS, rep, &rep_arr, NULL, &st), 0);
    assert_int_equal(st.code, kvtier_StatusCode_STATUS_OK);
    assert_int_equal(rep->which_body, kvtier_Envelope_lookup_rep_tag);
    assert_int_equal(rep->corr_id, req->corr_id);
    assert_string_equal(rep->sender, "testsrv");
    assert_int_equal(rep->body.lookup_rep.hit_count, 42);
    assert_int_equal(rep_arr.mask.n, 3);
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(mask[i], keys[i][0] & 1);
        assert_int_equal(tiers[i], keys[i][1]);
    }
    /* a kind the server does not serve: the call fails with the server's status */
    bus_env_init(req, kvtier_Envelope_stats_req_tag, NULL);
    assert_int_equal(bus_client_call(c, req, NULL, NULL, 0, LONG_TIMEOUT_MS, rep, NULL, NULL, &st),
                     -kvtier_StatusCode_STATUS_NOT_FOUND);
    assert_non_null(strstr(st.message, "StatsRequest"));
    free(req);
    free(rep);
    bus_client_destroy(&c);
    bus_client_destroy(&c); /* idempotent */
    s_stop(&e);
}

/* Issue 2 §3: 8+ in flight; the server answers in reverse order; each request
 * gets its own reply exactly once. */
static void test_replies_out_of_order_match_their_requests(void **state)
{
    (void)state;
    enum { N = 16 };
    env_t *e = s_start(N);
    bus_client_t *c = bus_client_new(e->endpoint, &(bus_client_config_t){.max_in_flight = N});
    pending_t *p = calloc(N, sizeof *p);
    kvtier_Status st;
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(s_send_lookup(c, &p[i], i, LONG_TIMEOUT_MS, &st), 0);
    bus_client_stats_t stats;
    bus_client_stats(c, &stats);
    assert_int_equal(stats.in_flight, N);
    s_rank = 0;
    s_wait_all(c, p, N);
    for (uint32_t i = 0; i < N; i++) {
        assert_int_equal(p[i].completions, 1);
        assert_int_equal(p[i].status.code, kvtier_StatusCode_STATUS_OK);
        assert_int_equal(p[i].hit_count, i);
        assert_true(p[i].arrays_ok);
        assert_int_equal(p[i].order, N - 1 - (int)i); /* reverse order of sending */
    }
    bus_client_stats(c, &stats);
    assert_int_equal(stats.replies, N);
    assert_int_equal(stats.in_flight, 0);
    assert_int_equal(stats.late, 0);
    free(p);
    bus_client_destroy(&c);
    s_stop(&e);
}

/* Issue 2 §3: one request times out (TIMEOUT exactly once) while the others
 * succeed; its reply, arriving later, is dropped and counted as late. */
static void test_timeout_of_one_request_while_others_succeed(void **state)
{
    (void)state;
    enum { N = 9 };
    env_t *e = s_start(0);
    bus_client_t *c = bus_client_new(e->endpoint, NULL);
    pending_t *p = calloc(N + 1, sizeof *p);
    kvtier_Status st;
    assert_int_equal(s_send_lookup(c, &p[0], TU_HOLD, 50, &st), 0);
    for (uint32_t i = 1; i < N; i++)
        assert_int_equal(s_send_lookup(c, &p[i], i, LONG_TIMEOUT_MS, &st), 0);
    s_wait_all(c, p, N);
    assert_int_equal(p[0].status.code, kvtier_StatusCode_STATUS_TIMEOUT);
    assert_non_null(strstr(p[0].status.message, "no reply to LookupRequest"));
    for (uint32_t i = 1; i < N; i++) {
        assert_int_equal(p[i].status.code, kvtier_StatusCode_STATUS_OK);
        assert_true(p[i].arrays_ok);
    }
    /* release the held reply: it arrives after the flush request's own reply */
    assert_int_equal(s_send_lookup(c, &p[N], TU_FLUSH, LONG_TIMEOUT_MS, &st), 0);
    s_wait_all(c, &p[N], 1);
    assert_int_equal(p[N].status.code, kvtier_StatusCode_STATUS_OK);
    bus_client_stats_t stats;
    bus_client_stats(c, &stats);
    assert_int_equal(stats.late, 1);
    assert_int_equal(stats.timeouts, 1);
    assert_int_equal(stats.completed, N + 1);
    assert_int_equal(p[0].completions, 1); /* exactly once */
    free(p);
    bus_client_destroy(&c);
    s_stop(&e);
}

/* Issue 2 §3: at the in-flight bound new sends are refused with a clear status;
 * completions free room again. */
static void test_in_flight_bound_refuses_new_sends(void **state)
{
    (void)state;
    enum { BOUND = 4 };
    env_t *e = s_start(0);
    bus_client_t *c = bus_client_new(
        e->endpoint, &(bus_client_config_t){.name = "bounded", .max_in_flight = BOUND});
    pending_t *p = calloc(BOUND + 2, sizeof *p);
    kvtier_Status st;
    for (uint32_t i = 0; i < BOUND; i++)
        assert_int_equal(s_send_lookup(c, &p[i], TU_HOLD, LONG_TIMEOUT_MS, &st), 0);
    assert_int_equal(s_send_lookup(c, &p[BOUND], 1, LONG_TIMEOUT_MS, &st),
                     -kvtier_StatusCode_STATUS_UNAVAILABLE);
    assert_int_equal(st.code, kvtier_StatusCode_STATUS_UNAVAILABLE);
    assert_non_null(strstr(st.message, "max_in_flight 4"));
    assert_int_equal(p[BOUND].completions, 0); /* refused: never completes */

    /* completing them (as a client does before reconnecting) frees the table */
    assert_int_equal(bus_client_fail_all(c, kvtier_StatusCode_STATUS_UNAVAILABLE, "reconnecting"),
                     BOUND);
    for (uint32_t i = 0; i < BOUND; i++) {
        assert_int_equal(p[i].completions, 1);
        assert_int_equal(p[i].status.code, kvtier_StatusCode_STATUS_UNAVAILABLE);
    }
    assert_int_equal(s_send_lookup(c, &p[BOUND + 1], TU_FLUSH, LONG_TIMEOUT_MS, &st), 0);
    s_wait_all(c, &p[BOUND + 1], 1);
    assert_int_equal(p[BOUND + 1].status.code, kvtier_StatusCode_STATUS_OK);
    bus_client_stats_t stats;
    bus_client_stats(c, &stats);
    assert_int_equal(stats.refused, 1);
    assert_int_equal(stats.late, BOUND); /* the held replies came after fail_all */
    for (uint32_t i = 0; i < BOUND; i++)
        assert_int_equal(p[i].completions, 1);
    free(p);
    bus_client_destroy(&c);
    s_stop(&e);
}

static int s_freed;
static void s_count_free(void *data, void *hint)
{
    (void)hint;
    __atomic_add_fetch(&s_freed, 1, __ATOMIC_SEQ_CST);
    free(data);
}

/* DESIGN.md §5: block bytes travel as payload frames, zero-copy, both ways. */
static void test_payload_frames_travel_both_ways(void **state)
{
    (void)state;
    env_t *e = s_start(0);
    bus_client_t *c = bus_client_new(e->endpoint, NULL);
    kvtier_Envelope *req = calloc(1, sizeof *req), *rep = calloc(1, sizeof *rep);
    uint64_t slots[2] = {7, 9}, sizes[4] = {100, 200, 300, 400};
    bus_arrays_t arr = {.slots = {.v = slots, .n = 2, .cap = 2},
                        .sizes = {.v = sizes, .n = 4, .cap = 4}};
    bus_payload_t pl[4];
    for (uint32_t i = 0; i < 4; i++) {
        uint8_t *b = malloc(sizes[i]);
        memset(b, (int)(slots[i / 2] + i % 2), sizes[i]);
        pl[i] = (bus_payload_t){.data = b, .size = sizes[i], .free_fn = s_count_free};
    }
    bus_env_init(req, kvtier_Envelope_write_slots_req_tag, NULL);
    req->body.write_slots_req.segments = 2;
    s_freed = 0;
    kvtier_Status st;
    assert_int_equal(bus_client_call(c, req, &arr, pl, 4, LONG_TIMEOUT_MS, rep, NULL, NULL, &st),
                     0);
    assert_int_equal(rep->body.write_slots_rep.written, 1000);

    /* read two slots back: the reply's payload frames are handed to the caller */
    uint64_t rsizes[2] = {64, 128}, got_sizes[2];
    bus_arrays_t rarr = {.slots = {.v = slots, .n = 2, .cap = 2},
                         .sizes = {.v = rsizes, .n = 2, .cap = 2}};
    bus_arrays_t rrep = {.sizes = {.v = got_sizes, .cap = 2}};
    bus_env_init(req, kvtier_Envelope_read_slots_req_tag, NULL);
    zmsg_t *frames = NULL;
    assert_int_equal(
        bus_client_call(c, req, &rarr, NULL, 0, LONG_TIMEOUT_MS, rep, &rrep, &frames, &st), 0);
    assert_non_null(frames);
    assert_int_equal(zmsg_size(frames), 2);
    zframe_t *f = zmsg_first(frames);
    for (uint32_t i = 0; i < 2; i++, f = zmsg_next(frames)) {
        assert_int_equal(zframe_size(f), rsizes[i]);
        assert_int_equal(got_sizes[i], rsizes[i]);
        for (size_t b = 0; b < zframe_size(f); b++)
            assert_int_equal(zframe_data(f)[b], slots[i]);
    }
    zmsg_destroy(&frames);
    free(req);
    free(rep);
    bus_client_destroy(&c);
    s_stop(&e);
    /* every zero-copy buffer was released exactly once (libzmq is done with them
     * once the client socket and the context's sockets are closed) */
    zsys_shutdown();
    assert_int_equal(s_freed, 4);
}

/* Issue 2 §3: a reply that does not decode completes its request with
 * INVALID_ARGUMENT (counted); a reply with no readable corr_id is dropped. */
static void test_undecodable_reply_completes_its_request_with_invalid_argument(void **state)
{
    (void)state;
    zsock_t *router = zsock_new(ZMQ_ROUTER);
    assert_true(zsock_bind(router, "tcp://127.0.0.1:*") > 0);
    char *endpoint = zsock_last_endpoint(router);
    bus_client_t *c = bus_client_new(endpoint, NULL);
    pending_t p[2];
    kvtier_Status st;
    assert_int_equal(s_send_lookup(c, &p[0], 1, LONG_TIMEOUT_MS, &st), 0);
    assert_int_equal(s_send_lookup(c, &p[1], 2, LONG_TIMEOUT_MS, &st), 0);
    bus_env_header_t h[2];
    zframe_t *rid[2];
    for (int i = 0; i < 2; i++) {
        zmsg_t *m = zmsg_recv(router);
        rid[i] = zmsg_pop(m);
        zframe_t *f0 = zmsg_first(m);
        assert_int_equal(bus_env_peek(zframe_data(f0), zframe_size(f0), &h[i]), 0);
        zmsg_destroy(&m);
    }
    /* garbage without corr_id: dropped */
    zmsg_t *m = zmsg_new();
    zmsg_append(m, &(zframe_t *){zframe_dup(rid[0])});
    zmsg_addmem(m, "\xff\xff\xff", 3);
    zmsg_send(&m, router);
    /* right corr_id, wrong body kind: the request completes INVALID_ARGUMENT */
    tu_writer_t w;
    tu_w_header(&w, h[0].corr_id, BUS_PROTOCOL_VERSION);
    tu_w_bytes(&w, kvtier_Envelope_touch_rep_tag, "", 0);
    m = zmsg_new();
    zmsg_append(m, &rid[0]);
    zmsg_addmem(m, w.buf, tu_w_len(&w));
    zmsg_send(&m, router);
    /* right corr_id, key vector over the request's reply capacity (5) */
    kvtier_Envelope *rep = calloc(1, sizeof *rep);
    bus_arrays_t *big = bus_arrays_new(8, 0);
    tu_arrays_fill(big, 8, 0, 1);
    kvtier_Envelope req = {.corr_id = h[1].corr_id};
    bus_env_init_reply(rep, &req, kvtier_Envelope_lookup_rep_tag, "fake");
    assert_int_equal(bus_msg_send(router, rid[1], rep, big, NULL, 0, &st), 0);
    zframe_destroy(&rid[1]);

    s_wait_all(c, p, 2);
    assert_int_equal(p[0].status.code, kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(p[0].status.message, "reply to LookupRequest carries TouchReply"));
    assert_int_equal(p[1].status.code, kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(p[1].status.message, "LookupReply.hit: more than 5 elements"));
    bus_client_stats_t stats;
    bus_client_stats(c, &stats);
    assert_int_equal(stats.bad_replies, 3);
    assert_int_equal(stats.completed, 2);
    bus_arrays_destroy(&big);
    free(rep);
    bus_client_destroy(&c);
    zstr_free(&endpoint);
    zsock_destroy(&router);
}

/* Issue 9 §1: a request that comes back as is (a TCP connection to itself, when the
 * server's port is free and in the ephemeral range) is no reply: dropped and
 * counted, the request times out (libkvtier then finds the server again) rather
 * than failing INVALID_ARGUMENT. */
static void test_echoed_request_is_no_reply(void **state)
{
    (void)state;
    zsock_t *router = zsock_new_router("tcp://127.0.0.1:*");
    assert_non_null(router);
    char *ep = zsock_last_endpoint(router);
    bus_client_t *c = bus_client_new(ep, NULL);
    pending_t p;
    kvtier_Status st;
    assert_int_equal(s_send_lookup(c, &p, 1, 1500, &st), 0);
    zmsg_t *req = zmsg_recv(router);
    assert_non_null(req);
    assert_int_equal(zmsg_send(&req, router), 0); /* routing id and frames, unchanged */
    s_wait_all(c, &p, 1);
    assert_int_equal(p.status.code, kvtier_StatusCode_STATUS_TIMEOUT);
    bus_client_stats_t cs;
    bus_client_stats(c, &cs);
    assert_int_equal(cs.bad_replies, 1);
    bus_client_destroy(&c);
    zstr_free(&ep);
    zsock_destroy(&router);
}

/* Issue 12 §3: a client's largest reply frame is in force (ZMQ_MAXMSGSIZE before
 * the connect): a peer answering with a larger frame is disconnected, so the reply
 * is never buffered whole nor decoded; the request ends with TIMEOUT, not with the
 * bad reply it would otherwise be. */
static void test_oversized_reply_is_refused_by_the_client(void **state)
{
    (void)state;
    zsock_t *router = zsock_new_router("tcp://127.0.0.1:*");
    assert_non_null(router);
    char *ep = zsock_last_endpoint(router);
    bus_client_config_t cfg = {.name = "bounded", .max_frame = 1u << 20};
    bus_client_t *c = bus_client_new(ep, &cfg);
    assert_non_null(c);
    pending_t p;
    kvtier_Status st;
    assert_int_equal(s_send_lookup(c, &p, 1, 1500, &st), 0);
    zmsg_t *req = zmsg_recv(router);
    assert_non_null(req);
    zframe_t *id = zmsg_pop(req);
    size_t len = 8u << 20;
    zframe_t *big = zframe_new(NULL, len);
    memset(zframe_data(big), 0x11, len);
    zmsg_t *rep = zmsg_new();
    zmsg_append(rep, &id);
    zmsg_append(rep, &big);
    assert_int_equal(zmsg_send(&rep, router), 0);
    zmsg_destroy(&req);
    s_wait_all(c, &p, 1);
    assert_int_equal(p.completions, 1);
    assert_int_equal(p.status.code, kvtier_StatusCode_STATUS_TIMEOUT);
    bus_client_stats_t cs;
    bus_client_stats(c, &cs);
    assert_int_equal(cs.bad_replies, 0); /* it never arrived, so it was never decoded */
    bus_client_destroy(&c);
    zstr_free(&ep);
    zsock_destroy(&router);
}

/* Issue 12 §4: a message the server sends by itself (no corr_id: a tier's
 * TierNotice) reaches the notice handler, between replies that still complete
 * their requests; without a handler, or when it does not decode, it is counted as
 * bad and dropped. */
static int s_notices;
static uint64_t s_notice_slot;

static void s_on_notice(void *arg, const kvtier_Envelope *env)
{
    (void)arg;
    assert_int_equal(env->which_body, kvtier_Envelope_tier_notice_tag);
    s_notices++;
    s_notice_slot = env->body.tier_notice.dropped[0].slot;
}

static void s_send_notice(zsock_t *router, const zframe_t *rid, uint64_t slot)
{
    kvtier_Envelope env;
    bus_env_init_reply(&env, NULL, kvtier_Envelope_tier_notice_tag, "tier");
    env.body.tier_notice.tier_id = 1;
    env.body.tier_notice.dropped_count = 1;
    env.body.tier_notice.dropped[0].slot = slot;
    kvtier_Status st;
    assert_int_equal(bus_msg_send(router, rid, &env, NULL, NULL, 0, &st), 0);
}

static void test_unsolicited_notice_reaches_its_handler(void **state)
{
    (void)state;
    zsock_t *router = zsock_new_router("tcp://127.0.0.1:*");
    char *ep = zsock_last_endpoint(router);
    bus_client_t *c = bus_client_new(ep, NULL);
    pending_t p[2];
    kvtier_Status st;
    assert_int_equal(s_send_lookup(c, &p[0], 1, LONG_TIMEOUT_MS, &st), 0);
    zmsg_t *m = zmsg_recv(router);
    zframe_t *rid = zmsg_pop(m);
    zmsg_destroy(&m);
    /* no handler yet: dropped, counted */
    s_send_notice(router, rid, 7);
    /* then a handler, a notice, and garbage without corr_id */
    zclock_sleep(100);
    (void)bus_client_dispatch(c, 0);
    bus_client_set_notice(c, s_on_notice, NULL);
    s_send_notice(router, rid, 9);
    m = zmsg_new();
    zmsg_append(m, &(zframe_t *){zframe_dup(rid)});
    zmsg_addmem(m, "\xff\xff\xff", 3);
    zmsg_send(&m, router);
    /* the request still gets its reply */
    kvtier_Envelope *rep = calloc(1, sizeof *rep);
    kvtier_Envelope req = {.corr_id = 0};
    assert_int_equal(s_send_lookup(c, &p[1], 2, LONG_TIMEOUT_MS, &st), 0);
    m = zmsg_recv(router);
    zframe_t *rid2 = zmsg_pop(m);
    zframe_t *f0 = zmsg_first(m);
    bus_env_header_t h;
    assert_int_equal(bus_env_peek(zframe_data(f0), zframe_size(f0), &h), 0);
    zmsg_destroy(&m);
    req.corr_id = h.corr_id;
    bus_env_init_reply(rep, &req, kvtier_Envelope_lookup_rep_tag, "fake");
    assert_int_equal(bus_msg_send(router, rid2, rep, NULL, NULL, 0, &st), 0);
    int64_t deadline = zclock_mono() + 5000;
    while (p[1].completions == 0 && zclock_mono() < deadline)
        (void)bus_client_dispatch(c, 100);
    assert_int_equal(p[1].completions, 1);
    assert_int_equal(p[1].status.code, kvtier_StatusCode_STATUS_OK);
    assert_int_equal(p[0].completions, 0);
    assert_int_equal(s_notices, 1);
    assert_int_equal(s_notice_slot, 9);
    bus_client_stats_t cs;
    bus_client_stats(c, &cs);
    assert_int_equal(cs.notices, 1);
    assert_int_equal(cs.bad_replies, 2); /* the notice before the handler, the garbage */
    free(rep);
    zframe_destroy(&rid);
    zframe_destroy(&rid2);
    bus_client_destroy(&c);
    zstr_free(&ep);
    zsock_destroy(&router);
}

/* fail_on_disconnect: a peer that closes its connection with a request in flight
 * (a leader killed) fails that request at once with UNAVAILABLE naming the
 * connection; without it the request waits its timeout (TIMEOUT). */
static void test_disconnect_fails_the_requests_in_flight(void **state)
{
    (void)state;
    for (int on = 0; on <= 1; on++) {
        zsock_t *router = zsock_new(ZMQ_ROUTER);
        assert_non_null(router);
        int port = zsock_bind(router, "tcp://127.0.0.1:*");
        assert_true(port > 0);
        char ep[64];
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
        bus_client_config_t cfg = {.name = "t", .fail_on_disconnect = on};
        bus_client_t *c = bus_client_new(ep, &cfg);
        assert_non_null(c);
        pending_t p = {0};
        kvtier_Status st;
        /* on: a timeout far past the test's length; off: a short one */
        assert_int_equal(s_send_lookup(c, &p, 1, on ? LONG_TIMEOUT_MS : 300, &st), 0);
        zmsg_t *req = zmsg_recv(router); /* it arrived: the connection is up */
        assert_non_null(req);
        zmsg_destroy(&req);
        zsock_destroy(&router); /* the peer dies with the request unanswered */
        s_wait_all(c, &p, 1);
        assert_int_equal(p.completions, 1);
        if (on) {
            assert_int_equal(p.status.code, kvtier_StatusCode_STATUS_UNAVAILABLE);
            assert_non_null(strstr(p.status.message, "closed with the request in flight"));
            assert_non_null(strstr(p.status.message, ep));
        } else {
            assert_int_equal(p.status.code, kvtier_StatusCode_STATUS_TIMEOUT);
        }
        bus_client_destroy(&c);
    }
    /* nothing listening at all (a leader's process gone, not restarted yet): a
     * refused connect fails the request too, instead of its 30 s timeout. The port
     * stays bound, never listened on, for the whole case: connects to it are refused,
     * and no test running beside this one can bind it in between (CI once saw a freed
     * port taken by another listener, whose close read as "closed in flight"). */
    int held = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(held >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(held, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t salen = sizeof sa;
    assert_int_equal(getsockname(held, (struct sockaddr *)&sa, &salen), 0);
    int port = ntohs(sa.sin_port);
    assert_true(port > 0);
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    bus_client_config_t cfg = {.name = "t", .fail_on_disconnect = true};
    bus_client_t *c = bus_client_new(ep, &cfg);
    assert_non_null(c);
    pending_t p = {0};
    kvtier_Status st;
    assert_int_equal(s_send_lookup(c, &p, 1, LONG_TIMEOUT_MS, &st), 0);
    s_wait_all(c, &p, 1);
    if (!strstr(p.status.message, "refused the connection"))
        print_error("status %d: %s\n", (int)p.status.code, p.status.message);
    assert_int_equal(p.status.code, kvtier_StatusCode_STATUS_UNAVAILABLE);
    assert_non_null(strstr(p.status.message, "refused the connection"));
    bus_client_destroy(&c);
    close(held);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oversized_reply_is_refused_by_the_client),
        cmocka_unit_test(test_echoed_request_is_no_reply),
        cmocka_unit_test(test_sync_call_returns_the_reply_and_its_arrays),
        cmocka_unit_test(test_replies_out_of_order_match_their_requests),
        cmocka_unit_test(test_timeout_of_one_request_while_others_succeed),
        cmocka_unit_test(test_in_flight_bound_refuses_new_sends),
        cmocka_unit_test(test_undecodable_reply_completes_its_request_with_invalid_argument),
        cmocka_unit_test(test_payload_frames_travel_both_ways),
        cmocka_unit_test(test_unsolicited_notice_reaches_its_handler),
        cmocka_unit_test(test_disconnect_fails_the_requests_in_flight),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
