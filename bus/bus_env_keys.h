/* bus_env_keys.h — the fast path of frame 0 decoding for a body that carries its
 * block keys directly (LookupRequest.keys, Prepare*Request.keys, TouchRequest.keys,
 * the tier plane's keys...): one 16-byte field per key, which nanopb decodes field
 * by field through a callback (about 350 instructions a key). bus_env_keys_split
 * scans the envelope once by hand, copies the keys straight into the caller's
 * array, and writes the envelope without them into `rest`, which nanopb then
 * decodes as usual (issue 13 §3: "a body-level key decoder").
 *
 * Same bytes in, same result out: the split succeeds only on input that it can
 * prove nanopb would decode to the same keys (every field well formed, the body
 * present once, every key field 16 bytes, no more keys than the array holds);
 * on anything else it declines, writes nothing, and the caller decodes the
 * original buffer the slow way, which reports the error as before. Private to
 * bus/ (bus_envelope.c). Never reads outside [buf, buf + len). */
#ifndef KVT_BUS_ENV_KEYS_H
#define KVT_BUS_ENV_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Splits frame 0 (buf, len) whose body is Envelope field body_tag, its keys in
 * the body's field keys_field: on success true, the keys in keys[0..*n) (at most
 * cap; keys may be NULL only when cap is 0) and the envelope without them in
 * rest[0..*rest_len) (at most rest_cap). false: declined (nothing written to
 * keys, *n and *rest_len untouched). */
bool bus_env_keys_split(const uint8_t *buf, size_t len, uint32_t body_tag, uint32_t keys_field,
                        uint8_t (*keys)[16], uint32_t cap, uint32_t *n, uint8_t *rest,
                        size_t rest_cap, size_t *rest_len);

#endif
