/* bus_events.h — codec for EventBatch, the payload of the event socket
 * ([topic][8-byte BE sequence][EventBatch], DESIGN.md §5). Event keys and the
 * event list are nanopb callbacks bound to caller arrays: no allocation, every
 * count bounded by the caller's capacity. The bytes are plain protobuf that any
 * library decodes (tests/interop checks that with python3-protobuf). */
#ifndef KVT_BUS_EVENTS_H
#define KVT_BUS_EVENTS_H

#include <czmq.h>

#include "bus_arrays.h"
#include "bus_status.h"
#include "events.pb.h"

/* Protocol bound: events in one batch. */
#define BUS_MAX_EVENTS 4096u

/* The event socket's sequences (docs/EVENTS.md "Sequences"): (leader epoch << 40) | n,
 * n counting a term's batches from 1, sent as 8 bytes big-endian. */
#define BUS_EVENTS_SEQ_SHIFT 40
#define BUS_EVENTS_SEQ_TERM(seq) ((seq) >> BUS_EVENTS_SEQ_SHIFT)
#define BUS_EVENTS_SEQ_FIRST(epoch) ((uint64_t)(epoch) << BUS_EVENTS_SEQ_SHIFT | 1u)

/* The 8-byte big-endian form of a sequence, both ways. */
void bus_events_seq_put(uint8_t out[8], uint64_t seq);
uint64_t bus_events_seq_get(const uint8_t in[8]);

typedef struct {
    kvtier_Event ev;   /* ts, instance, kind; ev.keys is bound by the codec */
    bus_keys_t keys;   /* encode: this event's keys; decode: its window into the pool */
    bus_u32s_t tokens; /* BlockStored.token_ids, as keys (empty for other kinds) */
} bus_event_t;

/* Encodes batch (source, epoch) with events[0..n) into a new frame. */
int bus_events_encode(const kvtier_EventBatch *batch, const bus_event_t *events, uint32_t n,
                      zframe_t **frame_out, kvtier_Status *st);

/* Decodes an EventBatch: header into *batch, at most `cap` events into events[]
 * (*n set), all their keys into `pool` (cleared first; each event's keys point at
 * its run in the pool). Over a capacity or malformed: -INVALID_ARGUMENT. */
int bus_events_decode(const void *buf, size_t len, kvtier_EventBatch *batch, bus_event_t *events,
                      uint32_t cap, uint32_t *n, bus_keys_t *pool, kvtier_Status *st);

/* The same, and BlockStored token ids into `tokens` (cleared first; each
 * event's tokens point at its run; NULL: token ids are skipped, every event's
 * tokens empty). More token ids than tokens->cap: -INVALID_ARGUMENT. */
int bus_events_decode_tokens(const void *buf, size_t len, kvtier_EventBatch *batch,
                             bus_event_t *events, uint32_t cap, uint32_t *n, bus_keys_t *pool,
                             bus_u32s_t *tokens, kvtier_Status *st);

#endif
