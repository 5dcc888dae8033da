/* coord_base64.c — standard base64 codec for etcd's JSON gateway.
 * Strict on input (rejects stray characters, bad padding, non-zero trailing bits)
 * because etcd answers are untrusted input; never allocates. */
#include "coord_base64.h"

#include <errno.h>
#include <stdint.h>

static const char s_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* -1 for characters outside the alphabet (padding is handled separately). */
static int s_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

size_t coord_base64_encoded_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

size_t coord_base64_decoded_max(size_t n)
{
    return (n + 3) / 4 * 3;
}

size_t coord_base64_encode(const void *src, size_t n, char *dst, size_t cap)
{
    const uint8_t *in = src;
    size_t need = coord_base64_encoded_len(n);
    if (!dst || cap < need + 1)
        return 0;
    size_t o = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        dst[o++] = s_alphabet[v >> 18 & 63];
        dst[o++] = s_alphabet[v >> 12 & 63];
        dst[o++] = s_alphabet[v >> 6 & 63];
        dst[o++] = s_alphabet[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        dst[o++] = s_alphabet[v >> 18 & 63];
        dst[o++] = s_alphabet[v >> 12 & 63];
        dst[o++] = '=';
        dst[o++] = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        dst[o++] = s_alphabet[v >> 18 & 63];
        dst[o++] = s_alphabet[v >> 12 & 63];
        dst[o++] = s_alphabet[v >> 6 & 63];
        dst[o++] = '=';
    }
    dst[o] = '\0';
    return o;
}

/* Strips the padding and checks its shape; returns the number of significant
 * characters or -1 when the padding is malformed. */
static long s_strip_padding(const char *src, size_t n)
{
    size_t pad = 0;
    while (pad < n && pad < 2 && src[n - 1 - pad] == '=')
        pad++;
    if (pad > 0 && n % 4 != 0)
        return -1; /* padded input must be whole groups */
    size_t sig = n - pad;
    if (sig % 4 == 1)
        return -1; /* one leftover character cannot encode a byte */
    return (long)sig;
}

int coord_base64_decode(const char *src, size_t n, void *dst, size_t cap, size_t *out_len)
{
    if (!out_len || (n > 0 && !src))
        return -EINVAL;
    long sig_l = s_strip_padding(src, n);
    if (sig_l < 0)
        return -EINVAL;
    size_t sig = (size_t)sig_l;
    size_t need = sig / 4 * 3 + (sig % 4 == 0 ? 0 : sig % 4 - 1);
    for (size_t i = 0; i < sig; i++) {
        if (s_value((unsigned char)src[i]) < 0)
            return -EINVAL;
    }
    /* Unused low bits of the last character must be zero (canonical form). */
    if (sig % 4 == 2 && (s_value((unsigned char)src[sig - 1]) & 0x0f) != 0)
        return -EINVAL;
    if (sig % 4 == 3 && (s_value((unsigned char)src[sig - 1]) & 0x03) != 0)
        return -EINVAL;
    *out_len = need;
    if (need > cap || (need > 0 && !dst))
        return -ENOBUFS;
    uint8_t *out = dst;
    size_t o = 0, i = 0;
    for (; i + 4 <= sig; i += 4) {
        uint32_t v = (uint32_t)s_value((unsigned char)src[i]) << 18 |
                     (uint32_t)s_value((unsigned char)src[i + 1]) << 12 |
                     (uint32_t)s_value((unsigned char)src[i + 2]) << 6 |
                     (uint32_t)s_value((unsigned char)src[i + 3]);
        out[o++] = (uint8_t)(v >> 16);
        out[o++] = (uint8_t)(v >> 8);
        out[o++] = (uint8_t)v;
    }
    size_t rest = sig - i;
    if (rest >= 2) {
        uint32_t v = (uint32_t)s_value((unsigned char)src[i]) << 18 |
                     (uint32_t)s_value((unsigned char)src[i + 1]) << 12;
        if (rest == 3)
            v |= (uint32_t)s_value((unsigned char)src[i + 2]) << 6;
        out[o++] = (uint8_t)(v >> 16);
        if (rest == 3)
            out[o++] = (uint8_t)(v >> 8);
    }
    return 0;
}
