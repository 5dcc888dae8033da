/* coord_base64.h — standard base64 (RFC 4648 §4, '+' '/' and '=' padding), the
 * encoding etcd's JSON gateway uses for keys and values.
 * Owns nothing: callers pass the buffers. Never allocates, never reads or writes
 * outside the lengths it is given. */
#ifndef KVT_COORD_BASE64_H
#define KVT_COORD_BASE64_H

#include <stddef.h>

/* Characters needed to encode n bytes (without the terminating NUL). */
size_t coord_base64_encoded_len(size_t n);

/* Upper bound of the bytes that decoding n characters can produce. */
size_t coord_base64_decoded_max(size_t n);

/* Encodes n bytes of src into dst and NUL-terminates it. Returns the number of
 * characters written (excluding the NUL), or 0 with dst untouched when cap is
 * smaller than coord_base64_encoded_len(n) + 1. */
size_t coord_base64_encode(const void *src, size_t n, char *dst, size_t cap);

/* Decodes n characters of src into dst (cap bytes). Padding is required for a
 * final group shorter than four characters only if present at all: "QQ==" and
 * "QQ" both decode to "A"; whitespace and any other character are rejected.
 * Returns 0 and sets *out_len, -EINVAL on a malformed input, -ENOBUFS when dst
 * is too small (*out_len then says how many bytes are needed). */
int coord_base64_decode(const char *src, size_t n, void *dst, size_t cap, size_t *out_len);

#endif
