/* test_schemas.c — the generated wire structs keep the rules of DESIGN.md §5:
 * static structs well under 64 KiB (nanopb here has 16-bit field sizes), every
 * Envelope body kind known to the bus with each of its callback (array) fields
 * bound, requests paired with replies, and no unbounded field left anywhere. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pb_common.h>

#include "bus_envelope.h"
#include "events.pb.h"

/* Counts callback fields reachable through static submessages. */
static uint32_t s_callbacks(const pb_msgdesc_t *desc)
{
    _Alignas(max_align_t) uint8_t scratch[65536];
    pb_field_iter_t it;
    uint32_t n = 0;
    memset(scratch, 0, sizeof scratch);
    if (!pb_field_iter_begin(&it, desc, scratch))
        return 0;
    do {
        if (PB_ATYPE(it.type) == PB_ATYPE_CALLBACK)
            n++;
        else if (PB_LTYPE_IS_SUBMSG(it.type) && PB_HTYPE(it.type) != PB_HTYPE_ONEOF)
            n += s_callbacks(it.submsg_desc);
    } while (pb_field_iter_next(&it));
    return n;
}

/* DESIGN.md §5: "keep each static message struct well under 64 KiB". */
static void test_envelope_struct_is_well_under_64k(void **state)
{
    (void)state;
    assert_true(sizeof(kvtier_Envelope) <= 32u * 1024u);
#ifdef kvtier_Envelope_size
    assert_true(kvtier_Envelope_size <= 65535u);
#endif
    assert_true(sizeof(kvtier_EventBatch) <= 32u * 1024u);
    assert_true(sizeof(kvtier_Event) <= 32u * 1024u);
    /* every body's encoded static part fits 16-bit field sizes */
    kvtier_Envelope env;
    pb_field_iter_t it;
    assert_true(pb_field_iter_begin(&it, kvtier_Envelope_fields, &env));
    do {
        assert_true(it.data_size < 65535u);
    } while (pb_field_iter_next(&it));
}

/* Issue 2 §2: one oneof member per request and reply kind, each known to the bus,
 * with every callback field bound to an array role (none silently skipped). */
static void test_every_oneof_member_is_a_known_body_with_its_arrays_bound(void **state)
{
    (void)state;
    kvtier_Envelope env;
    pb_field_iter_t it;
    uint32_t members = 0;
    assert_true(pb_field_iter_begin(&it, kvtier_Envelope_fields, &env));
    do {
        if (PB_HTYPE(it.type) != PB_HTYPE_ONEOF) {
            assert_true(it.tag < 16); /* header fields */
            continue;
        }
        members++;
        assert_true(it.tag >= 16);
        const char *name = bus_body_name(it.tag);
        if (!name)
            fail_msg("Envelope field %u has no entry in the bus body table", it.tag);
        uint32_t want = s_callbacks(it.submsg_desc);
        uint32_t got = bus_body_arrays(it.tag, NULL, NULL, 0);
        if (want != got)
            fail_msg("%s: %u callback fields but %u bound", name, want, got);
    } while (pb_field_iter_next(&it));
    assert_int_equal(members, bus_body_count());
}

/* envelope.proto: a request with field number N is answered by field N + 1. The
 * one reply-direction body that answers no request is the tier's unsolicited
 * TierNotice (docs/PROTOCOL.md §8). */
static void test_each_request_pairs_with_the_next_field_as_reply(void **state)
{
    (void)state;
    uint32_t requests = 0, replies = 0;
    for (uint32_t i = 0; i < bus_body_count(); i++) {
        pb_size_t tag = bus_body_tag_at(i);
        if (tag == kvtier_Envelope_tier_notice_tag) {
            assert_int_equal(bus_body_dir(tag), BUS_DIR_REPLY);
            assert_int_equal(bus_body_reply_tag((pb_size_t)(tag - 1)), 0); /* 77 is a reply */
            continue;
        }
        if (bus_body_dir(tag) == BUS_DIR_REQUEST) {
            requests++;
            assert_int_equal(bus_body_reply_tag(tag), tag + 1);
        } else {
            replies++;
            assert_int_equal(bus_body_dir(tag), BUS_DIR_REPLY);
            assert_int_equal(bus_body_dir((pb_size_t)(tag - 1)), BUS_DIR_REQUEST);
        }
    }
    assert_int_equal(requests, replies);
}

/* DESIGN.md §5: events carry keys inside protobuf; the only callbacks are the
 * two the events codec binds (Event.keys, EventBatch.events). */
static void test_event_messages_have_only_the_bound_callbacks(void **state)
{
    (void)state;
    assert_int_equal(s_callbacks(kvtier_Event_fields), 1);
    assert_int_equal(s_callbacks(kvtier_EventBatch_fields), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_envelope_struct_is_well_under_64k),
        cmocka_unit_test(test_every_oneof_member_is_a_known_body_with_its_arrays_bound),
        cmocka_unit_test(test_each_request_pairs_with_the_next_field_as_reply),
        cmocka_unit_test(test_event_messages_have_only_the_bound_callbacks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
