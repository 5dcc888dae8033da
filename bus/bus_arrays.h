/* bus_arrays.h — the long arrays of wire messages (block keys, per-key vectors,
 * success masks, token payloads). They are nanopb FT_CALLBACK fields: these
 * helpers encode them from, and decode them into, caller-provided bounded arrays.
 * Never allocates on the encode/decode path, never writes past a caller's `cap`,
 * and never trusts a count from the wire (DESIGN.md §5).
 *
 * A message body names its arrays by role. The role of each callback field:
 *   keys       *.keys, Token.keys                 16-byte block keys
 *   tier_ids   LookupReply.tier_ids               uint32 per key
 *   slots      *.slots                            uint64 slot numbers
 *   dst_slots  CopySlotsRequest.dst_slots         uint64 slot numbers
 *   sizes      *.sizes                            uint64 bytes per frame / block
 *   checksums  *.checksums                        fixed64 xxh3-64
 *   mask       LookupReply.hit, *.success, ProbeReply.present   bool per element
 *   payload    Token.payload                      opaque bytes
 *   token_ids  PreparePutRequest.token_ids, PrepareRequest.token_ids
 *                                                 uint32 token ids (tokens_per_block per key)
 * (bus_envelope.c holds the body -> field -> role table.) */
#ifndef KVT_BUS_ARRAYS_H
#define KVT_BUS_ARRAYS_H

#include <pb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BUS_KEY_LEN 16
/* Protocol bound: elements of one array in one message (65,536 keys per request). */
#define BUS_MAX_ARRAY 65536u
/* Protocol bound: bytes of one opaque payload field (Token.payload). */
#define BUS_MAX_BLOB (4u << 20)

/* Caller-owned arrays. Decoding sets `n`/`len` and fails (INVALID_ARGUMENT) rather
 * than exceed min(cap, protocol bound); encoding writes the first `n`/`len`. */
typedef struct {
    uint8_t (*keys)[BUS_KEY_LEN];
    uint32_t n, cap;
} bus_keys_t;

typedef struct {
    uint32_t *v;
    uint32_t n, cap;
} bus_u32s_t;

typedef struct {
    uint64_t *v;
    uint32_t n, cap;
} bus_u64s_t;

typedef struct {
    bool *v;
    uint32_t n, cap;
} bus_bools_t;

typedef struct {
    uint8_t *data;
    uint32_t len, cap;
} bus_blob_t;

typedef enum {
    BUS_ROLE_KEYS = 0,
    BUS_ROLE_TIER_IDS,
    BUS_ROLE_SLOTS,
    BUS_ROLE_DST_SLOTS,
    BUS_ROLE_SIZES,
    BUS_ROLE_CHECKSUMS,
    BUS_ROLE_MASK,
    BUS_ROLE_PAYLOAD,
    BUS_ROLE_TOKEN_IDS,
    BUS_ROLE_COUNT
} bus_role_t;

typedef enum {
    BUS_ARRAY_OK = 0,
    BUS_ARRAY_OVERFLOW,   /* more elements (or bytes) than the capacity */
    BUS_ARRAY_KEY_LENGTH, /* a key that is not exactly 16 bytes */
    BUS_ARRAY_MALFORMED,  /* element bytes that do not parse (truncated varint, ...) */
    BUS_ARRAY_MISSING     /* encode: n > 0 but no storage pointer */
} bus_array_fault_t;

/* What went wrong in the first failing element; filled by a failed encode/decode. */
typedef struct {
    bus_array_fault_t fault;
    bus_role_t role;
    uint32_t index; /* element index that failed */
    uint32_t cap;   /* effective capacity at the time */
    uint64_t value; /* KEY_LENGTH: bytes seen; payload OVERFLOW: bytes offered */
} bus_array_error_t;

/* The arrays of one message, by role. Zero-initialise, then point the roles a
 * body uses at storage; unused roles may stay empty (cap 0). */
typedef struct bus_arrays {
    bus_keys_t keys;
    bus_u32s_t tier_ids;
    bus_u64s_t slots;
    bus_u64s_t dst_slots;
    bus_u64s_t sizes;
    bus_u64s_t checksums;
    bus_bools_t mask;
    bus_blob_t payload;
    bus_u32s_t token_ids;
    bus_array_error_t error;
} bus_arrays_t;

/* Allocates every role with `cap` elements (clamped to BUS_MAX_ARRAY) and a payload
 * of `payload_cap` bytes (clamped to BUS_MAX_BLOB). For servers that must accept
 * any body: allocate once at start, reuse for every message. NULL on ENOMEM. */
bus_arrays_t *bus_arrays_new(uint32_t cap, uint32_t payload_cap);

/* Frees what bus_arrays_new allocated; nulls *self_p; idempotent. */
void bus_arrays_destroy(bus_arrays_t **self_p);

/* Sets every count to 0 and clears the error; keeps storage and capacities. */
void bus_arrays_clear(bus_arrays_t *self);

/* "keys", "tier_ids", ... ; "?" outside the enum. */
const char *bus_role_name(bus_role_t role);

/* Element count of a role (bytes for BUS_ROLE_PAYLOAD). */
uint32_t bus_arrays_count(const bus_arrays_t *self, bus_role_t role);

/* Points a message's callback field at a role of `arr`, for pb_encode / pb_decode.
 * Decoding appends to the role (call bus_arrays_clear first); a NULL arr binds an
 * empty set (encode: nothing; decode: any element fails with OVERFLOW, cap 0). */
void bus_arrays_bind_encode(pb_callback_t *cb, bus_arrays_t *arr, bus_role_t role);
void bus_arrays_bind_decode(pb_callback_t *cb, bus_arrays_t *arr, bus_role_t role);

/* Formats self->error for a person, e.g. "LookupRequest.keys[3]: key is 15 bytes,
 * a block key is exactly 16". `where` names the message. Returns buf. */
const char *bus_arrays_error_text(const bus_arrays_t *self, const char *where, char *buf,
                                  size_t len);

/* Standalone key-array callbacks (arg: bus_keys_t *, for messages outside the
 * Envelope such as events). Same bounds; decode failures report through `err` if
 * set via bus_keys_bind_decode. */
void bus_keys_bind_encode(pb_callback_t *cb, const bus_keys_t *keys);

typedef struct {
    bus_keys_t *keys;
    bus_array_error_t *err; /* may be NULL */
} bus_keys_sink_t;
void bus_keys_bind_decode(pb_callback_t *cb, bus_keys_sink_t *sink);

/* Standalone packed uint32 callbacks (BlockStored.token_ids): the same bounds
 * (min(cap, BUS_MAX_ARRAY)); decoding appends to sink->v and reports through
 * sink->err when set. */
void bus_u32s_bind_encode(pb_callback_t *cb, const bus_u32s_t *v);

typedef struct {
    bus_u32s_t *v;
    bus_array_error_t *err; /* may be NULL */
} bus_u32s_sink_t;
void bus_u32s_bind_decode(pb_callback_t *cb, bus_u32s_sink_t *sink);

#endif
