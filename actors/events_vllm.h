/* events_vllm.h — kvtier's events in the msgpack layout of vLLM's KV events
 * (vllm/distributed/kv_events.py: KVEventBatch of BlockStored / BlockRemoved /
 * AllBlocksCleared, encoded by msgspec), so routers that consume vLLM's event
 * stream can subscribe to kvtier (docs/EVENTS.md "vLLM encoding").
 *
 * Two layouts:
 *   EVENTS_VLLM_MAP    the current one (msgspec structs without array_like): the
 *                      batch is {"ts", "events"}, each event a map whose first
 *                      key is "type" (the class name), then its fields in
 *                      declaration order; fields with a default that equal it
 *                      (extra_keys, group_idx, kv_cache_spec_*, lora_name is
 *                      not one: it has none) are omitted, as omit_defaults does.
 *   EVENTS_VLLM_ARRAY  the older one (array_like=True, vLLM 0.9 - 0.10): the
 *                      batch is [ts, events], each event [type, fields...].
 *
 * What maps to what:
 *   BlockStored (kvtier)  BlockStored{block_hashes: 16-byte bins, parent_block_hash:
 *                         16-byte bin or nil, token_ids: the event's token ids ([]
 *                         when none are known), block_size: tokens per
 *                         block (0 when unknown), lora_id: nil, medium: "GPU" /
 *                         "CPU" / "DISK" / "REMOTE" or nil, lora_name: nil}
 *   BlockRemoved          BlockRemoved{block_hashes, medium}
 *   BlockMoved            BlockRemoved at the source medium, then BlockStored at
 *                         the destination (either reason: a demotion, DISK after
 *                         CPU; an exclusive promotion, CPU after DISK)
 *   LeaderChanged,        AllBlocksCleared (a new leader rebuilds its index: the
 *   AllCleared            stores of what it adopts follow)
 *   lookups, tier up      nothing (vLLM has no such events)
 *   tier down             the caller expands it into BlockRemoved of the blocks
 *                         that tier held (events_vllm_removed), as vLLM has no
 *                         tier event.
 *
 * Encoders append to a msgpack_sbuffer the caller owns; they never fail but on
 * no memory (-1). */
#ifndef KVT_EVENTS_VLLM_H
#define KVT_EVENTS_VLLM_H

#include <msgpack.h>
#include <stdint.h>

#include "bus_events.h"

typedef enum { EVENTS_VLLM_MAP = 0, EVENTS_VLLM_ARRAY } events_vllm_layout_t;

/* Name of a layout ("map", "array") and back: 0, or -1 for an unknown name. */
const char *events_vllm_layout_name(events_vllm_layout_t layout);
int events_vllm_layout_parse(const char *name, events_vllm_layout_t *out);

/* The vLLM events of one decoded kvtier batch: how many there are (0: none for
 * vLLM; nothing is written then). */
uint32_t events_vllm_count(const bus_event_t *events, uint32_t n);

/* Encodes a KVEventBatch of the vLLM events of events[0..n) into out (which
 * the caller reset), ts the first event's time in seconds. 0 or -1. */
int events_vllm_batch(events_vllm_layout_t layout, const bus_event_t *events, uint32_t n,
                      msgpack_sbuffer *out);

/* Encodes a KVEventBatch of one BlockRemoved of keys[0..n) (16 bytes each) at
 * medium (kvtier_Medium), with time ts (seconds). 0 or -1. */
int events_vllm_removed(events_vllm_layout_t layout, double ts, const uint8_t (*keys)[BUS_KEY_LEN],
                        uint32_t n, uint32_t medium, msgpack_sbuffer *out);

#endif
