/* wire_testutil.h — helpers shared by the bus wire tests (envelope, bad input,
 * request/reply): deterministic keys and arrays, a generic filler that sets every
 * static field of a nanopb message to a non-default value, and a raw protobuf
 * writer for hand-made (bad) frames. Test use only. */
#ifndef KVT_WIRE_TESTUTIL_H
#define KVT_WIRE_TESTUTIL_H

#include <pb_encode.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bus_arrays.h"
#include "bus_envelope.h"

/* Key i: 16 bytes that differ in every position from key i+1. */
void tu_key(uint32_t i, uint8_t out[BUS_KEY_LEN]);
/* Fills every role of arr with n elements (payload: blob_len bytes) from seed. */
void tu_arrays_fill(bus_arrays_t *a, uint32_t n, uint32_t blob_len, uint32_t seed);
/* Does role r hold the same elements in a and b? */
bool tu_role_equal(const bus_arrays_t *a, const bus_arrays_t *b, bus_role_t r);
/* Sets every static field (repeated ones to their max count) to a non-default
 * value; callback fields and oneofs are left alone. */
void tu_fill_msg(const pb_msgdesc_t *desc, void *msg, uint32_t seed);
/* Descriptor of the body with field number tag (NULL if none). */
const pb_msgdesc_t *tu_body_desc(pb_size_t tag);

/* Raw protobuf writer for hand-made frames. */
typedef struct {
    uint8_t buf[8192];
    pb_ostream_t s;
} tu_writer_t;

void tu_w_init(tu_writer_t *w);
void tu_w_varint(tu_writer_t *w, uint32_t tag, uint64_t v);
void tu_w_bytes(tu_writer_t *w, uint32_t tag, const void *p, size_t n);
size_t tu_w_len(const tu_writer_t *w);
/* Header of a hand-made envelope: corr_id and version. */
void tu_w_header(tu_writer_t *w, uint64_t corr_id, uint32_t version);

#endif
