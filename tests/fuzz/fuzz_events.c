/* fuzz_events.c — libFuzzer harness for the event encodings: an EventBatch off the
 * event socket decoded as the publisher decodes it (bus/bus_events.c,
 * bus_events_decode_tokens with BUS_MAX_EVENTS events, a key pool of
 * BUS_MAX_BLOB / 16 keys and 2^20 token ids, or without token ids as when no vLLM
 * stream is configured) and as the live optimizer does (bus_events_decode); then,
 * as the publisher's vLLM stream does, encoded to msgpack in both layouts
 * (actors/events_vllm.c). Property: msgpack-c unpacks the encoding as exactly one
 * object that uses every byte, a 2-element batch whose event list has
 * events_vllm_count entries. */
#include <msgpack.h>
#include <stdlib.h>

#include "bus_events.h"
#include "events_vllm.h"

#define S_TOKENS (1u << 20)

static bus_event_t *s_ev;
static bus_keys_t s_pool;
static bus_u32s_t s_tokens;

static void s_init(void)
{
    if (s_ev)
        return;
    s_ev = calloc(BUS_MAX_EVENTS, sizeof *s_ev);
    s_pool.cap = BUS_MAX_BLOB / BUS_KEY_LEN;
    s_pool.keys = calloc(s_pool.cap, BUS_KEY_LEN);
    s_tokens.cap = S_TOKENS;
    s_tokens.v = calloc(S_TOKENS, sizeof *s_tokens.v);
    if (!s_ev || !s_pool.keys || !s_tokens.v)
        abort();
}

static void s_check_vllm(events_vllm_layout_t layout, uint32_t n)
{
    msgpack_sbuffer out;
    msgpack_sbuffer_init(&out);
    uint32_t want = events_vllm_count(s_ev, n);
    if (events_vllm_batch(layout, s_ev, n, &out) < 0)
        abort();
    if (want == 0 && out.size == 0) {
        msgpack_sbuffer_destroy(&out);
        return;
    }
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    if (msgpack_unpack_next(&u, out.data, out.size, &off) != MSGPACK_UNPACK_SUCCESS ||
        off != out.size)
        abort();
    const msgpack_object *o = &u.data, *events = NULL;
    if (layout == EVENTS_VLLM_ARRAY && o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size == 2)
        events = &o->via.array.ptr[1];
    if (layout == EVENTS_VLLM_MAP && o->type == MSGPACK_OBJECT_MAP && o->via.map.size == 2)
        events = &o->via.map.ptr[1].val;
    if (!events || events->type != MSGPACK_OBJECT_ARRAY || events->via.array.size != want)
        abort();
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    s_init();
    kvtier_EventBatch b;
    kvtier_Status st;
    uint32_t n = 0;
    if (bus_events_decode(data, size, &b, s_ev, BUS_MAX_EVENTS, &n, &s_pool, &st) == 0)
        s_check_vllm(EVENTS_VLLM_MAP, n);
    if (bus_events_decode_tokens(data, size, &b, s_ev, BUS_MAX_EVENTS, &n, &s_pool, &s_tokens,
                                 &st) == 0) {
        s_check_vllm(EVENTS_VLLM_MAP, n);
        s_check_vllm(EVENTS_VLLM_ARRAY, n);
    }
    return 0;
}
