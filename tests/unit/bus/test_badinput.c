/* test_badinput.c — bad input never crashes the bus and is answered with
 * INVALID_ARGUMENT and an actionable message (DESIGN.md §5; issue 2 §3). Each case
 * is checked at the codec (bus_msg_decode) and end to end: raw frames sent from a
 * plain DEALER to a real bus_server, which answers INVALID_ARGUMENT (echoing the
 * corr_id when readable) and then keeps serving the next good request. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "bus_envelope.h"
#include "bus_server.h"
#include "wire_testserver.h"
#include "wire_testutil.h"

#define CORR 0x5EEDull

typedef struct {
    const char *name;
    zmsg_t *(*build)(void);
    const char *expect; /* substring of the status message */
    bool corr_readable; /* the reply echoes CORR */
} bad_case_t;

static zmsg_t *s_msg_of(const void *data, size_t len)
{
    zmsg_t *msg = zmsg_new();
    zmsg_addmem(msg, data, len);
    return msg;
}

/* A valid LookupRequest with n keys, encoded by the codec. */
static zmsg_t *s_lookup(uint32_t n, uint32_t version)
{
    bus_arrays_t *arr = bus_arrays_new(n, 0);
    kvtier_Envelope *env = calloc(1, sizeof *env);
    bus_env_init(env, kvtier_Envelope_lookup_req_tag, "bad-client");
    env->corr_id = CORR;
    env->version = version;
    strcpy(env->body.lookup_req.instance_id, "inst");
    tu_arrays_fill(arr, n, 0, 3);
    zframe_t *f0 = NULL;
    assert_int_equal(bus_env_encode(env, arr, &f0, NULL), 0);
    zmsg_t *msg = zmsg_new();
    zmsg_append(msg, &f0);
    bus_arrays_destroy(&arr);
    free(env);
    return msg;
}

static zmsg_t *b_truncated(void)
{
    zmsg_t *msg = s_lookup(3, BUS_PROTOCOL_VERSION);
    zframe_t *f = zmsg_first(msg);
    zframe_t *cut = zframe_new(zframe_data(f), zframe_size(f) - 5);
    zmsg_t *out = zmsg_new();
    zmsg_append(out, &cut);
    zmsg_destroy(&msg);
    return out;
}

static zmsg_t *b_garbage(void)
{
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                   0xff, 0xff, 0xff, 0xff, 0x13, 0x37, 0xde, 0xad};
    return s_msg_of(junk, sizeof junk);
}

static zmsg_t *b_empty(void)
{
    return s_msg_of("", 0);
}

static zmsg_t *b_unknown_body(void)
{
    tu_writer_t w;
    tu_w_header(&w, CORR, BUS_PROTOCOL_VERSION);
    tu_w_bytes(&w, 200, "", 0);
    return s_msg_of(w.buf, tu_w_len(&w));
}

static zmsg_t *b_string_over_bound(void)
{
    char id[100];
    memset(id, 'x', sizeof id);
    tu_writer_t body, w;
    tu_w_init(&body);
    tu_w_bytes(&body, kvtier_LookupRequest_instance_id_tag, id, sizeof id);
    tu_w_header(&w, CORR, BUS_PROTOCOL_VERSION);
    tu_w_bytes(&w, kvtier_Envelope_lookup_req_tag, body.buf, tu_w_len(&body));
    return s_msg_of(w.buf, tu_w_len(&w));
}

static zmsg_t *b_bytes_over_bound(void)
{
    /* InventoryRequest is fine; a BlockRef key (bytes, fixed 16) of 40 bytes is not */
    uint8_t key[40] = {0};
    tu_writer_t ref, body, w;
    tu_w_init(&ref);
    tu_w_bytes(&ref, kvtier_BlockRef_key_tag, key, sizeof key);
    tu_w_init(&body);
    tu_w_bytes(&body, kvtier_GcDropRequest_missing_tag, ref.buf, tu_w_len(&ref));
    tu_w_header(&w, CORR, BUS_PROTOCOL_VERSION);
    tu_w_bytes(&w, kvtier_Envelope_gc_drop_req_tag, body.buf, tu_w_len(&body));
    return s_msg_of(w.buf, tu_w_len(&w));
}

/* One more key than the protocol bound (and any receiver's capacity). */
static zmsg_t *b_too_many_keys(void)
{
    uint32_t n = BUS_MAX_ARRAY + 1;
    size_t inner = (size_t)n * (2 + BUS_KEY_LEN);
    size_t cap = inner + 64;
    uint8_t *buf = malloc(cap);
    pb_ostream_t s = pb_ostream_from_buffer(buf, cap);
    uint8_t key[BUS_KEY_LEN];
    pb_encode_tag(&s, PB_WT_VARINT, kvtier_Envelope_corr_id_tag);
    pb_encode_varint(&s, CORR);
    pb_encode_tag(&s, PB_WT_VARINT, kvtier_Envelope_version_tag);
    pb_encode_varint(&s, BUS_PROTOCOL_VERSION);
    pb_encode_tag(&s, PB_WT_STRING, kvtier_Envelope_lookup_req_tag);
    pb_encode_varint(&s, inner);
    for (uint32_t i = 0; i < n; i++) {
        tu_key(i, key);
        pb_encode_tag(&s, PB_WT_STRING, kvtier_LookupRequest_keys_tag);
        pb_encode_string(&s, key, BUS_KEY_LEN);
    }
    zmsg_t *msg = s_msg_of(buf, s.bytes_written);
    free(buf);
    return msg;
}

static zmsg_t *b_key_wrong_length(void)
{
    uint8_t key[BUS_KEY_LEN];
    tu_writer_t body, w;
    tu_w_init(&body);
    tu_key(0, key);
    tu_w_bytes(&body, kvtier_LookupRequest_keys_tag, key, BUS_KEY_LEN);
    tu_w_bytes(&body, kvtier_LookupRequest_keys_tag, key, BUS_KEY_LEN - 1);
    tu_w_header(&w, CORR, BUS_PROTOCOL_VERSION);
    tu_w_bytes(&w, kvtier_Envelope_lookup_req_tag, body.buf, tu_w_len(&body));
    return s_msg_of(w.buf, tu_w_len(&w));
}

/* WriteSlots for slots 1..3 with `frames` payload frames of 8 bytes. */
static zmsg_t *s_write_slots(uint32_t frames)
{
    bus_arrays_t *arr = bus_arrays_new(8, 0);
    kvtier_Envelope *env = calloc(1, sizeof *env);
    bus_env_init(env, kvtier_Envelope_write_slots_req_tag, "bad-client");
    env->corr_id = CORR;
    for (uint32_t i = 0; i < 3; i++) {
        arr->slots.v[i] = i + 1;
        arr->sizes.v[i] = 8;
    }
    arr->slots.n = arr->sizes.n = 3;
    zframe_t *f0 = NULL;
    assert_int_equal(bus_env_encode(env, arr, &f0, NULL), 0);
    zmsg_t *msg = zmsg_new();
    zmsg_append(msg, &f0);
    for (uint32_t i = 0; i < frames; i++) {
        uint8_t bytes[8];
        memset(bytes, (int)(i / 1 + 1), sizeof bytes);
        zmsg_addmem(msg, bytes, sizeof bytes);
    }
    bus_arrays_destroy(&arr);
    free(env);
    return msg;
}

static zmsg_t *b_missing_payload_frame(void)
{
    return s_write_slots(2);
}

static zmsg_t *b_extra_payload_frame(void)
{
    return s_write_slots(4);
}

static zmsg_t *b_payload_on_a_bodiless_kind(void)
{
    zmsg_t *msg = s_lookup(2, BUS_PROTOCOL_VERSION);
    zmsg_addstr(msg, "stray");
    return msg;
}

static zmsg_t *b_wrong_version(void)
{
    return s_lookup(2, 7);
}

static zmsg_t *b_two_bodies(void)
{
    tu_writer_t w;
    tu_w_header(&w, CORR, BUS_PROTOCOL_VERSION);
    tu_w_bytes(&w, kvtier_Envelope_touch_req_tag, "", 0);
    tu_w_bytes(&w, kvtier_Envelope_remove_req_tag, "", 0);
    return s_msg_of(w.buf, tu_w_len(&w));
}

static zmsg_t *b_reply_sent_as_request(void)
{
    tu_writer_t w;
    tu_w_header(&w, CORR, BUS_PROTOCOL_VERSION);
    tu_w_bytes(&w, kvtier_Envelope_lookup_rep_tag, "", 0);
    return s_msg_of(w.buf, tu_w_len(&w));
}

static const bad_case_t s_cases[] = {
    {"truncated frame 0", b_truncated, "not a protobuf Envelope", true},
    {"garbage bytes", b_garbage, "not a protobuf Envelope", false},
    {"empty message", b_empty, "empty frame 0", false},
    {"unknown body", b_unknown_body, "unknown body kind: Envelope field 200", true},
    {"string over its bound", b_string_over_bound, "LookupRequest): string overflow", true},
    {"bytes over its bound", b_bytes_over_bound, "GcDropRequest)", true},
    {"too many keys", b_too_many_keys, "LookupRequest.keys: more than 65536 elements", true},
    {"key of wrong length", b_key_wrong_length,
     "LookupRequest.keys[1]: key is 15 bytes, a block key is exactly 16", true},
    {"missing payload frame", b_missing_payload_frame,
     "WriteSlotsRequest: 3 slots declared (1 segment each) but 2 payload frames present", true},
    {"extra payload frame", b_extra_payload_frame,
     "WriteSlotsRequest: 3 slots declared (1 segment each) but 4 payload frames present", true},
    {"payload on a kind without payload", b_payload_on_a_bodiless_kind,
     "LookupRequest carries no payload but 1 payload frame is present", true},
    {"wrong protocol version", b_wrong_version, "protocol version 7 not supported", true},
    {"two bodies", b_two_bodies, "2 bodies present", true},
    {"reply kind sent as a request", b_reply_sent_as_request,
     "LookupReply received where a request was expected", true},
};
#define N_CASES (sizeof s_cases / sizeof s_cases[0])

/* Issue 2 §3: each bad input fails decoding with INVALID_ARGUMENT and a message
 * that says what is wrong (codec level). */
static void test_codec_rejects_each_bad_input_with_invalid_argument(void **state)
{
    (void)state;
    bus_arrays_t *arr = bus_arrays_new(BUS_MAX_ARRAY, 1024);
    kvtier_Envelope *env = calloc(1, sizeof *env);
    for (size_t i = 0; i < N_CASES; i++) {
        zmsg_t *msg = s_cases[i].build();
        kvtier_Status st = {0};
        int rc = bus_msg_decode(msg, BUS_DIR_REQUEST, env, arr, &st);
        if (rc != -kvtier_StatusCode_STATUS_INVALID_ARGUMENT ||
            st.code != kvtier_StatusCode_STATUS_INVALID_ARGUMENT ||
            !strstr(st.message, s_cases[i].expect))
            fail_msg("%s: rc %d code %d message '%s', expected '%s'", s_cases[i].name, rc,
                     (int)st.code, st.message, s_cases[i].expect);
        zmsg_destroy(&msg);
    }
    /* no frames at all */
    zmsg_t *none = zmsg_new();
    kvtier_Status st;
    assert_int_equal(bus_msg_decode(none, BUS_DIR_REQUEST, env, arr, &st),
                     -kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(st.message, "empty message"));
    zmsg_destroy(&none);
    free(env);
    bus_arrays_destroy(&arr);
}

/* bus_arrays: the caller's capacity bounds decoding, not only the protocol bound. */
static void test_codec_rejects_keys_over_the_callers_capacity(void **state)
{
    (void)state;
    bus_arrays_t *arr = bus_arrays_new(8, 0);
    kvtier_Envelope *env = calloc(1, sizeof *env);
    zmsg_t *msg = s_lookup(9, BUS_PROTOCOL_VERSION);
    kvtier_Status st;
    assert_int_equal(bus_msg_decode(msg, BUS_DIR_REQUEST, env, arr, &st),
                     -kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(st.message, "LookupRequest.keys: more than 8 elements (receiver "
                                       "capacity 8)"));
    assert_true(arr->keys.n <= 8);
    /* a receiver that gives no arrays at all accepts no keys */
    assert_int_equal(bus_msg_decode(msg, BUS_DIR_REQUEST, env, NULL, &st),
                     -kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    zmsg_destroy(&msg);
    /* and payload frames whose size differ from the declared sizes */
    msg = s_write_slots(3);
    zframe_t *last = zmsg_last(msg);
    zmsg_remove(msg, last);
    zframe_destroy(&last);
    zmsg_addmem(msg, "12345", 5);
    assert_int_equal(bus_msg_decode(msg, BUS_DIR_REQUEST, env, arr, &st),
                     -kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(st.message, "payload frame 2 is 5 bytes but sizes[2] says 8"));
    zmsg_destroy(&msg);
    free(env);
    bus_arrays_destroy(&arr);
}

/* Waits for one message on sock (poll, no sleep). */
static zmsg_t *s_recv(zsock_t *sock)
{
    zpoller_t *p = zpoller_new(sock, NULL);
    zmsg_t *msg = zpoller_wait(p, 10000) ? zmsg_recv(sock) : NULL;
    zpoller_destroy(&p);
    return msg;
}

/* Issue 2 §3: the server answers every bad input INVALID_ARGUMENT (corr_id echoed
 * when readable), counts it, and keeps serving the next good request. */
static void test_server_answers_bad_input_and_keeps_serving(void **state)
{
    (void)state;
    tu_server_args_t args = {.endpoint = "tcp://127.0.0.1:*"};
    char *endpoint = NULL;
    zactor_t *server = tu_server_start(&args, &endpoint);
    assert_non_null(endpoint);
    zsock_t *raw = zsock_new_dealer(endpoint);
    assert_non_null(raw);
    kvtier_Envelope *rep = calloc(1, sizeof *rep);
    bus_arrays_t *arr = bus_arrays_new(64, 0);

    for (size_t i = 0; i < N_CASES; i++) {
        zmsg_t *bad = s_cases[i].build();
        assert_int_equal(zmsg_send(&bad, raw), 0);
        zmsg_t *answer = s_recv(raw);
        assert_non_null(answer);
        kvtier_Status st;
        assert_int_equal(bus_msg_decode(answer, BUS_DIR_REPLY, rep, arr, &st), 0);
        if (rep->status.code != kvtier_StatusCode_STATUS_INVALID_ARGUMENT ||
            !strstr(rep->status.message, s_cases[i].expect))
            fail_msg("%s: server answered %d '%s'", s_cases[i].name, (int)rep->status.code,
                     rep->status.message);
        assert_int_equal(rep->corr_id, s_cases[i].corr_readable ? CORR : 0);
        assert_int_equal(rep->which_body, 0);
        zmsg_destroy(&answer);

        /* the next good request is served */
        zmsg_t *good = s_lookup(4, BUS_PROTOCOL_VERSION);
        assert_int_equal(zmsg_send(&good, raw), 0);
        answer = s_recv(raw);
        assert_non_null(answer);
        assert_int_equal(bus_msg_decode(answer, BUS_DIR_REPLY, rep, arr, &st), 0);
        assert_int_equal(rep->status.code, kvtier_StatusCode_STATUS_OK);
        assert_int_equal(rep->which_body, kvtier_Envelope_lookup_rep_tag);
        assert_int_equal(arr->mask.n, 4);
        zmsg_destroy(&answer);
    }
    uint64_t accepted = 0, rejected = 0;
    tu_server_counts(server, &accepted, &rejected);
    assert_int_equal(rejected, N_CASES);
    assert_int_equal(accepted, N_CASES);

    bus_arrays_destroy(&arr);
    free(rep);
    zsock_destroy(&raw);
    zstr_free(&endpoint);
    zactor_destroy(&server);
}

/* Issue 12 §3: a server's largest frame is in force (ZMQ_MAXMSGSIZE set before the
 * bind). A frame above it disconnects its sender and is never delivered (nor
 * buffered whole); a good request on a new connection is still served, and its
 * sender's own reply shows the server alive. */
static void test_oversized_frame_is_refused_and_the_server_keeps_serving(void **state)
{
    (void)state;
    bus_server_t *srv = bus_server_new_bounded("tcp://127.0.0.1:*", "bounded", 1u << 20);
    assert_non_null(srv);
    assert_null(bus_server_new_bounded("tcp://127.0.0.1:*", "zero", 0));
    zsock_t *big = zsock_new_dealer(bus_server_endpoint(srv));
    assert_non_null(big);
    size_t len = 8u << 20;
    char *buf = calloc(1, len);
    assert_non_null(buf);
    assert_true(zmq_send(zsock_resolve(big), buf, len, 0) == (int)len);
    free(buf);
    bus_arrays_t *arr = bus_arrays_new(BUS_MAX_ARRAY, BUS_MAX_BLOB);
    bus_request_t req = {0};
    /* nothing arrives from the oversized sender: not even as bad input (which the
     * server would answer INVALID_ARGUMENT): libzmq dropped the connection */
    assert_int_equal(bus_server_recv(srv, 1000, &req, arr), 0);
    zpoller_t *p = zpoller_new(big, NULL);
    assert_null(zpoller_wait(p, 500));
    zpoller_destroy(&p);
    /* a good request from another connection still does */
    zsock_t *good = zsock_new_dealer(bus_server_endpoint(srv));
    zmsg_t *m = s_lookup(3, BUS_PROTOCOL_VERSION);
    assert_int_equal(zmsg_send(&m, good), 0);
    assert_int_equal(bus_server_recv(srv, 10000, &req, arr), 1);
    assert_int_equal(req.env.which_body, kvtier_Envelope_lookup_req_tag);
    bus_request_reset(&req);
    bus_arrays_destroy(&arr);
    zsock_destroy(&good);
    zsock_destroy(&big);
    bus_server_destroy(&srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_rejects_each_bad_input_with_invalid_argument),
        cmocka_unit_test(test_codec_rejects_keys_over_the_callers_capacity),
        cmocka_unit_test(test_server_answers_bad_input_and_keeps_serving),
        cmocka_unit_test(test_oversized_frame_is_refused_and_the_server_keeps_serving),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zsys_shutdown();
    return rc;
}
