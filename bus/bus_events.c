/* bus_events.c — EventBatch encode/decode through callbacks into caller arrays.
 * Never allocates per event; never writes past the event or key capacity. */
#include "bus_events.h"

#include <pb_decode.h>
#include <pb_encode.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const bus_event_t *events;
    uint32_t n;
} s_enc_ctx_t;

static bool s_encode_events(pb_ostream_t *stream, const pb_field_t *field, void *const *arg)
{
    const s_enc_ctx_t *ctx = *arg;
    for (uint32_t i = 0; i < ctx->n; i++) {
        kvtier_Event ev = ctx->events[i].ev;
        bus_keys_bind_encode(&ev.keys, &ctx->events[i].keys);
        ev.cb_kind = (pb_callback_t){0};
        if (ev.which_kind == kvtier_Event_block_stored_tag)
            bus_u32s_bind_encode(&ev.kind.block_stored.token_ids, &ctx->events[i].tokens);
        if (!pb_encode_tag_for_field(stream, field) ||
            !pb_encode_submessage(stream, kvtier_Event_fields, &ev))
            return false;
    }
    return true;
}

int bus_events_encode(const kvtier_EventBatch *batch, const bus_event_t *events, uint32_t n,
                      zframe_t **frame_out, kvtier_Status *st)
{
    kvtier_Status scratch;
    if (!st)
        st = &scratch;
    *frame_out = NULL;
    if (n > BUS_MAX_EVENTS || (n > 0 && !events))
        return bus_status_set(st, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                              "EventBatch: %u events, the bound is %u per batch", n,
                              BUS_MAX_EVENTS);
    for (uint32_t i = 0; i < n; i++)
        if (events[i].keys.n > BUS_MAX_ARRAY || (events[i].keys.n && !events[i].keys.keys))
            return bus_status_set(st, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                                  "EventBatch: event %u has %u keys (bound %u) or no storage", i,
                                  events[i].keys.n, BUS_MAX_ARRAY);
    for (uint32_t i = 0; i < n; i++)
        if (events[i].tokens.n > BUS_MAX_ARRAY || (events[i].tokens.n && !events[i].tokens.v))
            return bus_status_set(st, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                                  "EventBatch: event %u has %u token ids (bound %u) or no storage",
                                  i, events[i].tokens.n, BUS_MAX_ARRAY);
    kvtier_EventBatch b = *batch;
    s_enc_ctx_t ctx = {.events = events, .n = n};
    b.events.funcs.encode = s_encode_events;
    b.events.arg = &ctx;
    size_t size = 0;
    if (!pb_get_encoded_size(&size, kvtier_EventBatch_fields, &b))
        return bus_status_set(st, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                              "EventBatch: cannot encode (a string over its bound?)");
    zframe_t *frame = zframe_new(NULL, size);
    if (!frame)
        return bus_status_set(st, kvtier_StatusCode_STATUS_INTERNAL,
                              "out of memory for a %zu byte event batch", size);
    pb_ostream_t s = pb_ostream_from_buffer(zframe_data(frame), size);
    if (!pb_encode(&s, kvtier_EventBatch_fields, &b)) {
        zframe_destroy(&frame);
        return bus_status_set(st, kvtier_StatusCode_STATUS_INTERNAL, "EventBatch: %s",
                              PB_GET_ERROR(&s));
    }
    *frame_out = frame;
    st->code = kvtier_StatusCode_STATUS_OK;
    st->message[0] = '\0';
    return 0;
}

typedef struct {
    bus_event_t *events;
    uint32_t cap, n;
    bus_keys_t *pool;
    bus_u32s_t *tokens; /* NULL: token ids skipped */
    bus_u32s_sink_t tok_sink;
    bus_array_error_t err, tok_err;
    bool too_many;
} s_dec_ctx_t;

/* Event.kind is known and zeroed, not yet decoded: bind its token ids. */
static bool s_decode_kind(pb_istream_t *stream, const pb_field_t *field, void **arg)
{
    s_dec_ctx_t *ctx = *arg;
    (void)stream;
    if (field->tag == kvtier_Event_block_stored_tag && ctx->tokens)
        bus_u32s_bind_decode(&((kvtier_BlockStored *)field->pData)->token_ids, &ctx->tok_sink);
    return true;
}

static bool s_decode_event(pb_istream_t *stream, const pb_field_t *field, void **arg)
{
    s_dec_ctx_t *ctx = *arg;
    (void)field;
    uint32_t cap = ctx->cap < BUS_MAX_EVENTS ? ctx->cap : BUS_MAX_EVENTS;
    if (ctx->n >= cap) {
        ctx->too_many = true;
        PB_RETURN_ERROR(stream, "too many events");
    }
    bus_event_t *e = &ctx->events[ctx->n];
    uint32_t start = ctx->pool->n, tstart = ctx->tokens ? ctx->tokens->n : 0;
    bus_keys_sink_t sink = {.keys = ctx->pool, .err = &ctx->err};
    memset(&e->ev, 0, sizeof e->ev);
    bus_keys_bind_decode(&e->ev.keys, &sink);
    e->ev.cb_kind.funcs.decode = s_decode_kind;
    e->ev.cb_kind.arg = ctx;
    if (!pb_decode(stream, kvtier_Event_fields, &e->ev))
        return false;
    e->ev.keys = (pb_callback_t){0};
    e->ev.cb_kind = (pb_callback_t){0};
    if (e->ev.which_kind == kvtier_Event_block_stored_tag)
        e->ev.kind.block_stored.token_ids = (pb_callback_t){0};
    e->keys.keys = ctx->pool->keys ? ctx->pool->keys + start : NULL;
    e->keys.n = e->keys.cap = ctx->pool->n - start;
    e->tokens = (bus_u32s_t){0};
    if (ctx->tokens && ctx->tokens->n > tstart)
        e->tokens = (bus_u32s_t){.v = ctx->tokens->v + tstart,
                                 .n = ctx->tokens->n - tstart,
                                 .cap = ctx->tokens->n - tstart};
    ctx->n++;
    return true;
}

int bus_events_decode(const void *buf, size_t len, kvtier_EventBatch *batch, bus_event_t *events,
                      uint32_t cap, uint32_t *n, bus_keys_t *pool, kvtier_Status *st)
{
    return bus_events_decode_tokens(buf, len, batch, events, cap, n, pool, NULL, st);
}

int bus_events_decode_tokens(const void *buf, size_t len, kvtier_EventBatch *batch,
                             bus_event_t *events, uint32_t cap, uint32_t *n, bus_keys_t *pool,
                             bus_u32s_t *tokens, kvtier_Status *st)
{
    kvtier_Status scratch;
    bus_keys_t none = {0};
    if (!st)
        st = &scratch;
    if (!pool)
        pool = &none;
    pool->n = 0;
    *n = 0;
    if (tokens)
        tokens->n = 0;
    s_dec_ctx_t ctx = {.events = events, .cap = events ? cap : 0, .pool = pool, .tokens = tokens};
    ctx.tok_sink = (bus_u32s_sink_t){.v = tokens, .err = &ctx.tok_err};
    batch->events.funcs.decode = s_decode_event;
    batch->events.arg = &ctx;
    pb_istream_t s = pb_istream_from_buffer(buf, len);
    bool ok = pb_decode(&s, kvtier_EventBatch_fields, batch);
    batch->events = (pb_callback_t){0};
    if (!ok) {
        if (ctx.too_many)
            return bus_status_set(st, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                                  "EventBatch: more than %u events (receiver capacity)", cap);
        if (ctx.err.fault != BUS_ARRAY_OK) {
            bus_arrays_t tmp = {.error = ctx.err};
            char where[48], text[160];
            snprintf(where, sizeof where, "EventBatch event %u keys", ctx.n);
            return bus_status_set(st, kvtier_StatusCode_STATUS_INVALID_ARGUMENT, "%s",
                                  bus_arrays_error_text(&tmp, where, text, sizeof text));
        }
        if (ctx.tok_err.fault != BUS_ARRAY_OK) {
            bus_arrays_t tmp = {.error = ctx.tok_err};
            char where[48], text[160];
            snprintf(where, sizeof where, "EventBatch event %u token_ids", ctx.n);
            return bus_status_set(st, kvtier_StatusCode_STATUS_INVALID_ARGUMENT, "%s",
                                  bus_arrays_error_text(&tmp, where, text, sizeof text));
        }
        return bus_status_set(st, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                              "EventBatch (%zu bytes): %s", len, PB_GET_ERROR(&s));
    }
    *n = ctx.n;
    st->code = kvtier_StatusCode_STATUS_OK;
    st->message[0] = '\0';
    return 0;
}

void bus_events_seq_put(uint8_t out[8], uint64_t seq)
{
    for (int i = 7; i >= 0; i--, seq >>= 8)
        out[i] = (uint8_t)seq;
}

uint64_t bus_events_seq_get(const uint8_t in[8])
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | in[i];
    return v;
}
