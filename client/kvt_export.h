/* kvt_export.h — the byte formats a token and its result travel in between
 * processes (kvt_token_export / kvt_token_import, kvt_token_result_export /
 * kvt_token_result_import; docs/PROTOCOL.md "Token export"). A pure codec: no
 * handle, no allocation; decoding checks every length, count and string and
 * points into the caller's bytes. Private to client/ (and the fuzz harness).
 *
 * Token, "KVTX" version 1 (integers little-endian):
 *    0  4  magic "KVTX"          (magic and version stay at 0..5 in every version)
 *    4  2  version (1)
 *    6  2  kind: 1 get, 2 put, 3 prefetch (bus_token.h's numbers)
 *    8  4  flags, 0 (a v1 reader refuses any bit)
 *   12  4  n_keys (<= KVT_MAX_KEYS)
 *   16  8  token_id
 *   24  8  prepare_id     the prepare's job_id, echoed by the complete
 *   32  8  lease_ms
 *   40  8  remaining_ms   lease left when exported (<= lease_ms)
 *   48  8  leader_epoch   of the leader that answered the prepare
 *   56  8  bytes_per_block  the instance's, as the exporter registered it (0: unknown)
 *   64  4  segments       the instance's (0: unknown; 1: whole blocks)
 *   68  4  payload_len    bytes of the scheduler's token payload (bus_token.h)
 *   72     u8 len + cluster | u8 len + instance_id | u8 len + request_id
 *          n_keys x 16 key bytes | payload_len payload bytes
 *   end    u64 xxh3-64 of every byte before it
 *
 * Result, "KVTR" version 1:
 *    0  4  magic "KVTR"
 *    4  2  version (1)
 *    6  2  kind
 *    8  4  flags, 0
 *   12  4  n_keys
 *   16  8  token_id
 *   24  8  prepare_id
 *   32  4  segments   layer-wise state of the token (0: no layer-wise job ran)
 *   36  4  seg_next   a put's next segment (<= segments)
 *   40  8  seg_bytes  bytes of one segment (0 when segments is 0)
 *   48     n_keys x 16 key bytes | n_keys x u8 outcome (bit 0 moved, bit 1 failed
 *          in a layer-wise job; other bits 0) | n_keys x u64 checksum (put: xxh3-64
 *          of the bytes written, else 0)
 *   end    u64 xxh3-64 of every byte before it
 *
 * Version rule: what is new comes with a new version (or a flag bit); a reader
 * refuses versions and flags it does not know rather than guess. */
#ifndef KVT_EXPORT_H
#define KVT_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KVTI_TOKX_MAGIC "KVTX"
#define KVTI_TOKR_MAGIC "KVTR"
#define KVTI_TOKX_VERSION 1
#define KVTI_TOKR_VERSION 1
#define KVTI_TOKX_HEADER 72u
#define KVTI_TOKR_HEADER 48u
#define KVTI_EXPORT_STR_MAX 255u /* a string's u8 length */
#define KVTI_OUT_MOVED 0x1u
#define KVTI_OUT_SEG_FAILED 0x2u

/* A token as exported. Strings are NUL-terminated copies; keys and payload point
 * into the bytes decoded (or the caller's arrays, to encode). */
typedef struct kvti_tokx {
    uint16_t kind;
    uint32_t n_keys;
    uint64_t token_id, prepare_id;
    uint64_t lease_ms, remaining_ms;
    uint64_t leader_epoch;
    uint64_t bytes_per_block;
    uint32_t segments;
    char cluster[KVTI_EXPORT_STR_MAX + 1];
    char instance_id[KVTI_EXPORT_STR_MAX + 1];
    char request_id[KVTI_EXPORT_STR_MAX + 1];
    const uint8_t *keys; /* n_keys x 16 */
    const uint8_t *payload;
    uint32_t payload_len;
} kvti_tokx_t;

/* A token's result as exported. outcome: n_keys bytes (KVTI_OUT_*); checksums
 * are read with kvti_tokr_checksum (unaligned in the bytes). */
typedef struct kvti_tokr {
    uint16_t kind;
    uint32_t n_keys;
    uint64_t token_id, prepare_id;
    uint32_t segments, seg_next;
    uint64_t seg_bytes;
    const uint8_t *keys;
    const uint8_t *outcome;
    const uint8_t *checksums; /* n_keys x 8, little-endian */
    const uint64_t *sums;     /* to encode: n_keys checksums (NULL: all 0) */
} kvti_tokr_t;

/* Bytes the encoding takes (0: a string or count beyond the format's bounds). */
size_t kvti_tokx_size(const kvti_tokx_t *x);
size_t kvti_tokr_size(uint32_t n_keys);

/* Encode into buf (cap bytes, at least the size); *len gets the size. 0, or -1
 * when cap is too small or a field is out of bounds (err says which). */
int kvti_tokx_encode(const kvti_tokx_t *x, uint8_t *buf, size_t cap, size_t *len, char *err,
                     size_t errlen);
int kvti_tokr_encode(const kvti_tokr_t *r, uint8_t *buf, size_t cap, size_t *len, char *err,
                     size_t errlen);

/* Decode and check (buf must outlive *out). 0, or -1 with what is wrong in err. */
int kvti_tokx_decode(const uint8_t *buf, size_t len, kvti_tokx_t *out, char *err, size_t errlen);
int kvti_tokr_decode(const uint8_t *buf, size_t len, kvti_tokr_t *out, char *err, size_t errlen);

/* Checksum i of a decoded result (i < n_keys). */
uint64_t kvti_tokr_checksum(const kvti_tokr_t *r, uint32_t i);

#endif
