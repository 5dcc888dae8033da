/* cli_trace.c — trace loading (jansson, one object per line), the chained block keys
 * of a request and the key-derived block bytes of the replay. */
#include "cli_trace.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

struct cli_trace {
    size_t n_requests;
    size_t cap_requests;
    size_t *offset; /* n_requests + 1 offsets into ids */
    uint64_t *ids;
    size_t n_ids;
    size_t cap_ids;
    size_t max_blocks;
};

static int s_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 1024;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}

/* Appends the hash_ids of one parsed line; 0 or -1 with ERR set. */
static int s_add_request(cli_trace_t *t, json_t *obj, const char *where, char *err, size_t errlen)
{
    json_t *ids = json_is_object(obj) ? json_object_get(obj, "hash_ids") : NULL;
    if (!json_is_array(ids)) {
        snprintf(err, errlen, "%s: expected an object with a \"hash_ids\" array", where);
        return -1;
    }
    size_t n = json_array_size(ids);
    if (n > CLI_TRACE_MAX_BLOCKS) {
        snprintf(err, errlen, "%s: %zu hash_ids (at most %u per request)", where, n,
                 (unsigned)CLI_TRACE_MAX_BLOCKS);
        return -1;
    }
    if (t->n_requests >= CLI_TRACE_MAX_REQUESTS) {
        snprintf(err, errlen, "%s: more than %u requests", where, (unsigned)CLI_TRACE_MAX_REQUESTS);
        return -1;
    }
    if (s_grow((void **)&t->ids, &t->cap_ids, t->n_ids + n, sizeof *t->ids) < 0 ||
        s_grow((void **)&t->offset, &t->cap_requests, t->n_requests + 2, sizeof *t->offset) < 0) {
        snprintf(err, errlen, "%s: out of memory", where);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(ids, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            snprintf(err, errlen, "%s: hash_ids[%zu]: expected a non-negative integer", where, i);
            return -1;
        }
        t->ids[t->n_ids + i] = (uint64_t)json_integer_value(v);
    }
    t->offset[t->n_requests] = t->n_ids;
    t->n_ids += n;
    t->n_requests++;
    t->offset[t->n_requests] = t->n_ids;
    if (n > t->max_blocks)
        t->max_blocks = n;
    return 0;
}

static bool s_blank(const char *line)
{
    for (; *line; line++)
        if (*line != ' ' && *line != '\t' && *line != '\r' && *line != '\n')
            return false;
    return true;
}

static int s_parse_line(cli_trace_t *t, const char *path, size_t lineno, const char *line,
                        size_t len, char *err, size_t errlen)
{
    char where[512];
    snprintf(where, sizeof where, "%s:%zu", path, lineno);
    if (len > CLI_TRACE_MAX_LINE) {
        snprintf(err, errlen, "%s: line longer than %u bytes", where, (unsigned)CLI_TRACE_MAX_LINE);
        return -1;
    }
    if (s_blank(line))
        return 0;
    json_error_t jerr;
    json_t *obj = json_loadb(line, len, 0, &jerr);
    if (!obj) {
        snprintf(err, errlen, "%s: invalid JSON: %s", where, jerr.text);
        return -1;
    }
    int rc = s_add_request(t, obj, where, err, errlen);
    json_decref(obj);
    return rc;
}

cli_trace_t *cli_trace_load(const char *path, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    cli_trace_t *t = calloc(1, sizeof *t);
    char *line = NULL;
    size_t cap = 0;
    size_t lineno = 0;
    if (!t) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto out_fail;
    }
    for (;;) {
        errno = 0;
        ssize_t len = getline(&line, &cap, fp);
        if (len < 0) {
            if (errno != 0) {
                snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
                goto out_fail;
            }
            break;
        }
        lineno++;
        if (s_parse_line(t, path, lineno, line, (size_t)len, err, errlen) < 0)
            goto out_fail;
    }
    if (t->n_requests == 0) {
        snprintf(err, errlen, "%s: no requests in the trace", path);
        goto out_fail;
    }
    free(line);
    fclose(fp);
    return t;
out_fail:
    free(line);
    fclose(fp);
    cli_trace_destroy(&t);
    return NULL;
}

void cli_trace_destroy(cli_trace_t **t)
{
    if (!t || !*t)
        return;
    free((*t)->offset);
    free((*t)->ids);
    free(*t);
    *t = NULL;
}

size_t cli_trace_requests(const cli_trace_t *t)
{
    return t->n_requests;
}

size_t cli_trace_max_blocks(const cli_trace_t *t)
{
    return t->max_blocks;
}

size_t cli_trace_total_blocks(const cli_trace_t *t)
{
    return t->n_ids;
}

const uint64_t *cli_trace_ids(const cli_trace_t *t, size_t i, size_t *n)
{
    if (i >= t->n_requests) {
        *n = 0;
        return NULL;
    }
    /* A trace of empty requests never grows ids: NULL + 0 is undefined (UBSan,
     * found by tests/fuzz/fuzz_trace), so such a request gets an empty array. */
    static const uint64_t s_none[1];
    *n = t->offset[i + 1] - t->offset[i];
    return t->ids ? t->ids + t->offset[i] : s_none;
}

void cli_trace_chain_keys(const uint64_t *ids, size_t n, kvt_key_t *out)
{
    uint8_t buf[KVT_KEY_BYTES + 8];
    memset(buf, 0, KVT_KEY_BYTES);
    for (size_t i = 0; i < n; i++) {
        for (int b = 0; b < 8; b++)
            buf[KVT_KEY_BYTES + b] = (uint8_t)(ids[i] >> (8 * b));
        XXH128_canonical_t c;
        XXH128_canonicalFromHash(&c, XXH3_128bits(buf, sizeof buf));
        memcpy(out[i].b, c.digest, KVT_KEY_BYTES);
        memcpy(buf, c.digest, KVT_KEY_BYTES);
    }
}

static uint64_t s_load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t s_seed(const kvt_key_t *key)
{
    uint64_t lo = s_load_le64(key->b);
    uint64_t hi = s_load_le64(key->b + 8);
    return lo ^ ((hi << 32) | (hi >> 32)) ^ 0x6b76746965720000ull; /* "kvtier" */
}

/* splitmix64 (Steele, Lea, Flood 2014): one well-mixed word per step, fast enough
 * to fill and check gigabytes. */
static inline uint64_t s_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void cli_block_fill(const kvt_key_t *key, void *buf, size_t len)
{
    uint64_t s = s_seed(key);
    uint8_t *p = buf;
    size_t words = len / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t w = s_next(&s);
        memcpy(p + 8 * i, &w, 8);
    }
    if (len % 8) {
        uint64_t w = s_next(&s);
        memcpy(p + 8 * words, &w, len % 8);
    }
}

bool cli_block_verify(const kvt_key_t *key, const void *buf, size_t len)
{
    uint64_t s = s_seed(key);
    const uint8_t *p = buf;
    size_t words = len / 8;
    uint64_t diff = 0;
    for (size_t i = 0; i < words; i++) {
        uint64_t w;
        memcpy(&w, p + 8 * i, 8);
        diff |= w ^ s_next(&s);
    }
    if (len % 8) {
        uint64_t w = s_next(&s);
        diff |= (uint64_t)(memcmp(p + 8 * words, &w, len % 8) != 0);
    }
    return diff == 0;
}

static int s_hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int cli_key_parse_hex(const char *hex, kvt_key_t *out)
{
    if (!hex || strlen(hex) != 2 * KVT_KEY_BYTES)
        return -KVT_INVALID_ARGUMENT;
    for (int i = 0; i < KVT_KEY_BYTES; i++) {
        int hi = s_hexval(hex[2 * i]);
        int lo = s_hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -KVT_INVALID_ARGUMENT;
        out->b[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

void cli_key_format_hex(const kvt_key_t *key, char out[2 * KVT_KEY_BYTES + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < KVT_KEY_BYTES; i++) {
        out[2 * i] = digits[key->b[i] >> 4];
        out[2 * i + 1] = digits[key->b[i] & 15];
    }
    out[2 * KVT_KEY_BYTES] = '\0';
}
