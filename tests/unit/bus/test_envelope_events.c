/* test_envelope_events.c — EventBatch codec (bus_events): every event kind
 * round-trips with its keys inside the protobuf (DESIGN.md §5 "any protobuf
 * library can decode the events"), and capacities bound decoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "bus_events.h"
#include "wire_testutil.h"

#define N_EVENTS 5

static void s_build(bus_event_t ev[N_EVENTS], uint8_t (*keys)[BUS_KEY_LEN])
{
    static const pb_size_t kinds[N_EVENTS] = {
        kvtier_Event_cache_get_tag, kvtier_Event_block_stored_tag, kvtier_Event_block_removed_tag,
        kvtier_Event_block_moved_tag, kvtier_Event_leader_changed_tag};
    uint32_t k = 0;
    memset(ev, 0, sizeof(bus_event_t) * N_EVENTS);
    for (uint32_t i = 0; i < N_EVENTS; i++) {
        ev[i].ev.ts_us = 1700000000000000ull + i;
        snprintf(ev[i].ev.instance_id, sizeof ev[i].ev.instance_id, "inst-%u", i);
        ev[i].ev.which_kind = kinds[i];
        uint32_t nkeys = kinds[i] == kvtier_Event_leader_changed_tag ? 0 : i + 2;
        ev[i].keys = (bus_keys_t){.keys = keys + k, .n = nkeys, .cap = nkeys};
        for (uint32_t j = 0; j < nkeys; j++)
            tu_key(k + j, keys[k + j]);
        k += nkeys;
    }
    ev[0].ev.kind.cache_get.hit_count = 3;
    strcpy(ev[0].ev.kind.cache_get.request_id, "r1");
    ev[1].ev.kind.block_stored.tier_id = 1;
    ev[1].ev.kind.block_stored.block_bytes = 1 << 20;
    ev[2].ev.kind.block_removed.reason = kvtier_RemoveReason_REMOVE_REASON_EXPIRED;
    ev[3].ev.kind.block_moved.src_tier_id = 1;
    ev[3].ev.kind.block_moved.dst_tier_id = 2;
    strcpy(ev[4].ev.kind.leader_changed.node_id, "coord-b");
    ev[4].ev.kind.leader_changed.epoch = 9;
}

/* Issue 2 §2 events: each kind carries timestamp, instance, keys, tier. */
static void test_every_event_kind_round_trips_with_its_keys(void **state)
{
    (void)state;
    bus_event_t in[N_EVENTS], out[N_EVENTS];
    uint8_t keys[64][BUS_KEY_LEN], pool_keys[64][BUS_KEY_LEN];
    s_build(in, keys);
    kvtier_EventBatch hdr = {.epoch = 4};
    strcpy(hdr.source, "coord-a");
    zframe_t *f = NULL;
    kvtier_Status st;
    assert_int_equal(bus_events_encode(&hdr, in, N_EVENTS, &f, &st), 0);

    kvtier_EventBatch got;
    bus_keys_t pool = {.keys = pool_keys, .cap = 64};
    uint32_t n = 0;
    assert_int_equal(
        bus_events_decode(zframe_data(f), zframe_size(f), &got, out, N_EVENTS, &n, &pool, &st), 0);
    assert_int_equal(n, N_EVENTS);
    assert_string_equal(got.source, "coord-a");
    assert_int_equal(got.epoch, 4);
    for (uint32_t i = 0; i < N_EVENTS; i++) {
        assert_int_equal(out[i].ev.ts_us, in[i].ev.ts_us);
        assert_string_equal(out[i].ev.instance_id, in[i].ev.instance_id);
        assert_int_equal(out[i].ev.which_kind, in[i].ev.which_kind);
        assert_memory_equal(&out[i].ev.kind, &in[i].ev.kind, sizeof in[i].ev.kind);
        assert_int_equal(out[i].keys.n, in[i].keys.n);
        if (in[i].keys.n)
            assert_memory_equal(out[i].keys.keys, in[i].keys.keys, in[i].keys.n * BUS_KEY_LEN);
    }

    /* fewer event slots or pool keys than the batch holds: refused, never overrun */
    assert_int_equal(
        bus_events_decode(zframe_data(f), zframe_size(f), &got, out, 2, &n, &pool, &st),
        -kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(st.message, "more than 2 events"));
    bus_keys_t small = {.keys = pool_keys, .cap = 4};
    assert_int_equal(
        bus_events_decode(zframe_data(f), zframe_size(f), &got, out, N_EVENTS, &n, &small, &st),
        -kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(st.message, "keys: more than 4"));
    /* a cut batch is refused */
    assert_true(bus_events_decode(zframe_data(f), zframe_size(f) - 4, &got, out, N_EVENTS, &n,
                                  &pool, &st) < 0);
    zframe_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_event_kind_round_trips_with_its_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
