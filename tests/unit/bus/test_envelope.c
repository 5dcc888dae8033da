/* test_envelope.c — bus_envelope / bus_arrays codec: every body kind survives a
 * round trip with every array it declares (DESIGN.md §5; issue 2 §2 Schemas),
 * maximum-size arrays (65,536 keys), payload-frame declarations and zero-copy
 * sends whose buffers are released exactly once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "bus_envelope.h"
#include "wire_testutil.h"

#define N_ELEMS 37u
#define BLOB_LEN 100u

typedef struct {
    bus_arrays_t *src;
    bus_arrays_t *dst;
    kvtier_Envelope *a;
    kvtier_Envelope *b;
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    f->src = bus_arrays_new(BUS_MAX_ARRAY, BLOB_LEN * 2);
    f->dst = bus_arrays_new(BUS_MAX_ARRAY, BLOB_LEN * 2);
    f->a = calloc(1, sizeof *f->a);
    f->b = calloc(1, sizeof *f->b);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    bus_arrays_destroy(&f->src);
    bus_arrays_destroy(&f->dst);
    free(f->a);
    free(f->b);
    free(f);
    return 0;
}

/* Issue 2 §2: "round trip of every body kind you define, all array kinds". */
static void test_every_body_kind_round_trips_with_all_its_arrays(void **state)
{
    fixture_t *f = *state;
    uint32_t kinds = bus_body_count();
    assert_true(kinds >= 54);
    for (uint32_t k = 0; k < kinds; k++) {
        pb_size_t tag = bus_body_tag_at(k);
        const pb_msgdesc_t *desc = tu_body_desc(tag);
        assert_non_null(desc);

        bus_env_init(f->a, tag, "tester");
        f->a->corr_id = 0x1234567890ull + tag;
        if (bus_body_dir(tag) == BUS_DIR_REPLY) {
            f->a->has_status = true;
            bus_status_set(&f->a->status, kvtier_StatusCode_STATUS_OK, "fine %u", tag);
        }
        tu_fill_msg(desc, &f->a->body, tag);
        tu_arrays_fill(f->src, N_ELEMS, BLOB_LEN, tag);

        zframe_t *frame = NULL;
        kvtier_Status st;
        assert_int_equal(bus_env_encode(f->a, f->src, &frame, &st), 0);
        memset(f->b, 0, sizeof *f->b);
        int rc =
            bus_env_decode(zframe_data(frame), zframe_size(frame), BUS_DIR_ANY, f->b, f->dst, &st);
        if (rc != 0)
            fail_msg("%s: %s", bus_body_name(tag), st.message);
        zframe_destroy(&frame);

        if (memcmp(f->a, f->b, sizeof *f->a) != 0)
            fail_msg("%s: static fields differ after the round trip", bus_body_name(tag));
        bus_role_t roles[8];
        uint32_t n = bus_body_arrays(tag, roles, NULL, 8);
        for (int r = 0; r < BUS_ROLE_COUNT; r++) {
            bool bound = false;
            for (uint32_t i = 0; i < n; i++)
                bound |= roles[i] == (bus_role_t)r;
            if (bound && !tu_role_equal(f->src, f->dst, (bus_role_t)r))
                fail_msg("%s: array %s differs", bus_body_name(tag), bus_role_name(r));
            if (!bound && bus_arrays_count(f->dst, (bus_role_t)r) != 0)
                fail_msg("%s: unbound array %s got data", bus_body_name(tag), bus_role_name(r));
        }
    }
}

/* DESIGN.md §5: keys always travel inside protobuf; a lookup's fields arrive intact. */
static void test_lookup_request_fields_round_trip(void **state)
{
    fixture_t *f = *state;
    bus_env_init(f->a, kvtier_Envelope_lookup_req_tag, "engine-7");
    kvtier_LookupRequest *lk = &f->a->body.lookup_req;
    strcpy(lk->instance_id, "llama-70b");
    strcpy(lk->request_id, "req-42");
    lk->mode = kvtier_LookupMode_LOOKUP_MODE_REVERSE;
    lk->window = 4;
    bus_arrays_clear(f->src);
    for (uint32_t i = 0; i < 5; i++)
        tu_key(i, f->src->keys.keys[i]);
    f->src->keys.n = 5;
    f->src->slots.n = 3; /* not a Lookup array: must not travel */

    uint8_t buf[1024];
    size_t len = 0;
    kvtier_Status st;
    assert_int_equal(bus_env_encode_buf(f->a, f->src, buf, sizeof buf, &len, &st), 0);
    assert_int_equal(bus_env_decode(buf, len, BUS_DIR_REQUEST, f->b, f->dst, &st), 0);
    assert_int_equal(f->b->which_body, kvtier_Envelope_lookup_req_tag);
    assert_string_equal(f->b->sender, "engine-7");
    assert_int_equal(f->b->version, BUS_PROTOCOL_VERSION);
    assert_string_equal(f->b->body.lookup_req.instance_id, "llama-70b");
    assert_string_equal(f->b->body.lookup_req.request_id, "req-42");
    assert_int_equal(f->b->body.lookup_req.mode, kvtier_LookupMode_LOOKUP_MODE_REVERSE);
    assert_int_equal(f->b->body.lookup_req.window, 4);
    assert_int_equal(f->dst->keys.n, 5);
    assert_memory_equal(f->dst->keys.keys, f->src->keys.keys, 5 * BUS_KEY_LEN);
    assert_int_equal(f->dst->slots.n, 0);
}

/* Issue 2 §2: max-size arrays of 65,536 keys, on every parallel array at once. */
static void test_max_size_arrays_of_65536_round_trip(void **state)
{
    fixture_t *f = *state;
    bus_env_init(f->a, kvtier_Envelope_put_header_req_tag, "tier-client");
    strcpy(f->a->body.put_header_req.instance_id, "inst");
    f->a->body.put_header_req.state = kvtier_LocationState_LOCATION_SERVING;
    tu_arrays_fill(f->src, BUS_MAX_ARRAY, 0, 99);
    zframe_t *frame = NULL;
    kvtier_Status st;
    assert_int_equal(bus_env_encode(f->a, f->src, &frame, &st), 0);
    assert_true(zframe_size(frame) < BUS_MAX_FRAME0);
    assert_int_equal(
        bus_env_decode(zframe_data(frame), zframe_size(frame), BUS_DIR_REQUEST, f->b, f->dst, &st),
        0);
    zframe_destroy(&frame);
    assert_true(tu_role_equal(f->src, f->dst, BUS_ROLE_KEYS));
    assert_true(tu_role_equal(f->src, f->dst, BUS_ROLE_SLOTS));
    assert_true(tu_role_equal(f->src, f->dst, BUS_ROLE_SIZES));
    assert_true(tu_role_equal(f->src, f->dst, BUS_ROLE_CHECKSUMS));
    assert_int_equal(f->dst->keys.n, BUS_MAX_ARRAY);

    /* and a lookup of 65,536 keys with its reply vectors */
    bus_env_init(f->a, kvtier_Envelope_lookup_rep_tag, "sched");
    f->a->body.lookup_rep.hit_count = BUS_MAX_ARRAY;
    assert_int_equal(bus_env_encode(f->a, f->src, &frame, &st), 0);
    assert_int_equal(
        bus_env_decode(zframe_data(frame), zframe_size(frame), BUS_DIR_REPLY, f->b, f->dst, &st),
        0);
    zframe_destroy(&frame);
    assert_true(tu_role_equal(f->src, f->dst, BUS_ROLE_MASK));
    assert_true(tu_role_equal(f->src, f->dst, BUS_ROLE_TIER_IDS));
}

/* DESIGN.md §5: 65,536 keys per request is the protocol bound; more is refused
 * at encode time with a message naming the field. */
static void test_encode_refuses_arrays_over_the_protocol_bound(void **state)
{
    fixture_t *f = *state;
    bus_keys_t big = {.keys = calloc(BUS_MAX_ARRAY + 1, BUS_KEY_LEN), .n = BUS_MAX_ARRAY + 1};
    bus_arrays_t arr = {.keys = big};
    bus_env_init(f->a, kvtier_Envelope_lookup_req_tag, "t");
    zframe_t *frame = NULL;
    kvtier_Status st;
    assert_int_equal(bus_env_encode(f->a, &arr, &frame, &st),
                     -kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_null(frame);
    assert_int_equal(st.code, kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(st.message, "LookupRequest.keys"));
    free(big.keys);
}

/* Issue 2 §3: WriteSlots declares its payload frames (slots x segments, one size each). */
static void test_write_slots_payload_frames_match_declaration(void **state)
{
    fixture_t *f = *state;
    static uint8_t bytes[4][64];
    bus_env_init(f->a, kvtier_Envelope_write_slots_req_tag, "worker");
    f->a->body.write_slots_req.segments = 2;
    bus_arrays_clear(f->src);
    f->src->slots.v[0] = 10;
    f->src->slots.v[1] = 11;
    f->src->slots.n = 2;
    bus_payload_t pl[4];
    for (uint32_t i = 0; i < 4; i++) {
        memset(bytes[i], (int)i + 1, sizeof bytes[i]);
        f->src->sizes.v[i] = 16 * (i + 1);
        pl[i] = (bus_payload_t){.data = bytes[i], .size = 16 * (i + 1)};
    }
    f->src->sizes.n = 4;
    zmsg_t *msg = NULL;
    kvtier_Status st;
    assert_int_equal(bus_msg_encode(f->a, f->src, pl, 4, &msg, &st), 0);
    assert_int_equal(zmsg_size(msg), 5);
    assert_int_equal(bus_msg_decode(msg, BUS_DIR_REQUEST, f->b, f->dst, &st), 0);
    for (uint32_t i = 0; i < 4; i++) {
        zframe_t *p = bus_msg_payload(msg, i);
        assert_non_null(p);
        assert_int_equal(zframe_size(p), 16 * (i + 1));
        assert_memory_equal(zframe_data(p), bytes[i], 16 * (i + 1));
    }
    assert_null(bus_msg_payload(msg, 4));
    zmsg_destroy(&msg);

    /* the encoder checks the same rule: 3 frames for 2 slots x 2 segments is refused */
    assert_int_equal(bus_msg_encode(f->a, f->src, pl, 3, &msg, &st),
                     -kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(st.message, "2 slots declared"));
    assert_null(msg);
}

/* DESIGN.md §5: replies carry their status; an error reply may carry no body. */
static void test_error_reply_without_body_decodes_only_with_an_error_status(void **state)
{
    fixture_t *f = *state;
    bus_env_init_reply(f->a, NULL, 0, "sched");
    f->a->corr_id = 77;
    bus_status_set(&f->a->status, kvtier_StatusCode_STATUS_NOT_LEADER, "leader is elsewhere");
    strcpy(f->a->leader_endpoint, "tcp://10.0.0.2:5555");
    uint8_t buf[512];
    size_t len = 0;
    kvtier_Status st;
    assert_int_equal(bus_env_encode_buf(f->a, NULL, buf, sizeof buf, &len, &st), 0);
    assert_int_equal(bus_env_decode(buf, len, BUS_DIR_REPLY, f->b, NULL, &st), 0);
    assert_int_equal(f->b->corr_id, 77);
    assert_int_equal(f->b->status.code, kvtier_StatusCode_STATUS_NOT_LEADER);
    assert_string_equal(f->b->leader_endpoint, "tcp://10.0.0.2:5555");
    /* the same without an error status is not a valid reply */
    f->a->status.code = kvtier_StatusCode_STATUS_OK;
    assert_int_equal(bus_env_encode_buf(f->a, NULL, buf, sizeof buf, &len, &st), 0);
    assert_int_equal(bus_env_decode(buf, len, BUS_DIR_REPLY, f->b, NULL, &st),
                     -kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    /* and never a valid request */
    assert_int_equal(bus_env_decode(buf, len, BUS_DIR_REQUEST, f->b, NULL, &st),
                     -kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
}

/* Issue 2 §3: peek recovers corr_id, version and body kind without decoding the body. */
static void test_peek_reads_header_without_the_body(void **state)
{
    fixture_t *f = *state;
    bus_env_init(f->a, kvtier_Envelope_touch_req_tag, "c");
    f->a->corr_id = 0xABCDEF;
    tu_arrays_fill(f->src, 3, 0, 1);
    uint8_t buf[512];
    size_t len = 0;
    assert_int_equal(bus_env_encode_buf(f->a, f->src, buf, sizeof buf, &len, NULL), 0);
    bus_env_header_t h;
    assert_int_equal(bus_env_peek(buf, len, &h), 0);
    assert_true(h.has_corr_id);
    assert_int_equal(h.corr_id, 0xABCDEF);
    assert_int_equal(h.version, BUS_PROTOCOL_VERSION);
    assert_int_equal(h.body_tag, kvtier_Envelope_touch_req_tag);
    assert_int_equal(h.bodies, 1);
    assert_int_equal(h.unknown_tag, 0);
    /* cut inside the body: the header fields seen before the cut survive */
    assert_true(bus_env_peek(buf, len - 3, &h) < 0);
    assert_true(h.has_corr_id);
    assert_int_equal(h.corr_id, 0xABCDEF);
}

static int s_freed;
static void s_count_free(void *data, void *hint)
{
    (void)hint;
    s_freed++;
    free(data);
}

/* DESIGN.md §5: payload frames are sent zero-copy and released exactly once. */
static void test_send_zero_copy_payload_released_exactly_once(void **state)
{
    fixture_t *f = *state;
    zsock_t *router = zsock_new_router("inproc://test_envelope_zc");
    zsock_t *dealer = zsock_new_dealer("inproc://test_envelope_zc");
    assert_non_null(router);
    assert_non_null(dealer);

    bus_env_init(f->a, kvtier_Envelope_write_slots_req_tag, "worker");
    bus_arrays_clear(f->src);
    f->src->slots.v[0] = 5;
    f->src->slots.n = 1;
    f->src->sizes.v[0] = 4096;
    f->src->sizes.n = 1;
    uint8_t *block = malloc(4096);
    memset(block, 0x5A, 4096);
    bus_payload_t pl = {.data = block, .size = 4096, .free_fn = s_count_free};
    s_freed = 0;
    kvtier_Status st;
    assert_int_equal(bus_msg_send(dealer, NULL, f->a, f->src, &pl, 1, &st), 0);

    zmsg_t *msg = zmsg_recv(router);
    assert_non_null(msg);
    zframe_t *rid = zmsg_pop(msg);
    assert_int_equal(bus_msg_decode(msg, BUS_DIR_REQUEST, f->b, f->dst, &st), 0);
    zframe_t *p = bus_msg_payload(msg, 0);
    assert_int_equal(zframe_size(p), 4096);
    /* inproc passes the buffer itself: the receiver sees our bytes, not a copy */
    assert_ptr_equal(zframe_data(p), block);
    assert_int_equal(s_freed, 0);
    zmsg_destroy(&msg);
    assert_int_equal(s_freed, 1);

    /* a refused send (payload does not match the body) still releases the buffer */
    block = malloc(10);
    pl = (bus_payload_t){.data = block, .size = 10, .free_fn = s_count_free};
    assert_true(bus_msg_send(dealer, NULL, f->a, f->src, &pl, 1, &st) < 0);
    assert_int_equal(s_freed, 2);

    zframe_destroy(&rid);
    zsock_destroy(&dealer);
    zsock_destroy(&router);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_body_kind_round_trips_with_all_its_arrays),
        cmocka_unit_test(test_lookup_request_fields_round_trip),
        cmocka_unit_test(test_max_size_arrays_of_65536_round_trip),
        cmocka_unit_test(test_encode_refuses_arrays_over_the_protocol_bound),
        cmocka_unit_test(test_write_slots_payload_frames_match_declaration),
        cmocka_unit_test(test_error_reply_without_body_decodes_only_with_an_error_status),
        cmocka_unit_test(test_peek_reads_header_without_the_body),
        cmocka_unit_test(test_send_zero_copy_payload_released_exactly_once),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    zsys_shutdown();
    return rc;
}
