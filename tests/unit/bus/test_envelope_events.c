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

/* Issue 10 §1: BlockStored.token_ids (packed, a callback) round-trips per event;
 * a decoder without a token pool skips them; a small pool is refused, never
 * overrun. */
static void test_stored_token_ids_round_trip_bounded(void **state)
{
    (void)state;
    bus_event_t in[3], out[3];
    uint8_t keys[4][BUS_KEY_LEN], pool_keys[8][BUS_KEY_LEN];
    uint32_t toks[6] = {1, 127, 128, 70000, 0xFFFFFFFFu, 5}, pool_toks[8];
    memset(in, 0, sizeof in);
    for (uint32_t i = 0; i < 4; i++)
        tu_key(i, keys[i]);
    for (uint32_t i = 0; i < 3; i++) {
        in[i].ev.which_kind = kvtier_Event_block_stored_tag;
        in[i].ev.kind.block_stored.tokens_per_block = 2;
    }
    in[0].keys = (bus_keys_t){.keys = keys, .n = 2, .cap = 2};
    in[0].tokens = (bus_u32s_t){.v = toks, .n = 4, .cap = 4};
    in[1].keys = (bus_keys_t){.keys = keys + 2, .n = 1, .cap = 1}; /* no tokens known */
    in[2].keys = (bus_keys_t){.keys = keys + 3, .n = 1, .cap = 1};
    in[2].tokens = (bus_u32s_t){.v = toks + 4, .n = 2, .cap = 2};
    in[2].ev.kind.block_stored.parent_key.size = BUS_KEY_LEN;
    memcpy(in[2].ev.kind.block_stored.parent_key.bytes, keys[2], BUS_KEY_LEN);
    kvtier_EventBatch hdr = {.epoch = 1};
    zframe_t *f = NULL;
    kvtier_Status st;
    assert_int_equal(bus_events_encode(&hdr, in, 3, &f, &st), 0);

    kvtier_EventBatch got;
    bus_keys_t pool = {.keys = pool_keys, .cap = 8};
    bus_u32s_t tpool = {.v = pool_toks, .cap = 8};
    uint32_t n = 0;
    assert_int_equal(bus_events_decode_tokens(zframe_data(f), zframe_size(f), &got, out, 3, &n,
                                              &pool, &tpool, &st),
                     0);
    assert_int_equal(n, 3);
    assert_int_equal(tpool.n, 6);
    assert_int_equal(out[0].tokens.n, 4);
    assert_memory_equal(out[0].tokens.v, toks, 4 * sizeof *toks);
    assert_int_equal(out[1].tokens.n, 0);
    assert_int_equal(out[2].tokens.n, 2);
    assert_memory_equal(out[2].tokens.v, toks + 4, 2 * sizeof *toks);
    assert_int_equal(out[2].ev.kind.block_stored.parent_key.size, BUS_KEY_LEN);
    assert_memory_equal(out[2].ev.kind.block_stored.parent_key.bytes, keys[2], BUS_KEY_LEN);
    assert_int_equal(out[2].keys.n, 1);

    /* the plain decoder skips the token ids */
    assert_int_equal(
        bus_events_decode(zframe_data(f), zframe_size(f), &got, out, 3, &n, &pool, &st), 0);
    assert_int_equal(n, 3);
    assert_int_equal(out[0].tokens.n, 0);
    assert_int_equal(out[0].keys.n, 2);

    /* a token pool smaller than the batch's token ids: refused, with the field named */
    bus_u32s_t small = {.v = pool_toks, .cap = 5};
    assert_int_equal(bus_events_decode_tokens(zframe_data(f), zframe_size(f), &got, out, 3, &n,
                                              &pool, &small, &st),
                     -kvtier_StatusCode_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(st.message, "token_ids"));
    zframe_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_event_kind_round_trips_with_its_keys),
        cmocka_unit_test(test_stored_token_ids_round_trip_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
