/* opt_trace.c — loading traces and recordings (jansson, one object per line) into
 * dense block ids; an open-addressing map (key, instance) -> dense id at load <= 1/2. */
#include "opt_trace.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define S_EMPTY UINT32_MAX

struct opt_trace {
    opt_format_t format;
    uint64_t max_refs;
    uint32_t tokens_per_block;
    const char *only_instance; /* borrowed from the load config, during the load */
    /* requests */
    uint64_t n_req, cap_req;
    uint64_t *offset; /* n_req + 1 */
    uint64_t *tokens;
    uint32_t *obs_hits; /* NULL unless a recording */
    uint32_t *obs_head;
    bool observed;
    /* references */
    uint32_t *refs;
    uint64_t n_refs, cap_refs;
    uint32_t max_blocks;
    /* distinct blocks */
    uint8_t (*keys)[OPT_KEY_BYTES];
    uint32_t *inst;
    uint32_t n_blocks, cap_blocks;
    uint32_t *map; /* dense ids, S_EMPTY when free */
    uint32_t map_mask;
    /* recordings */
    char **instances;
    uint32_t n_instances;
    uint64_t skipped_events, skipped_modes;
};

static int s_grow(void **p, uint64_t *cap, uint64_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    uint64_t n = *cap ? *cap : 1024;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, (size_t)(n * elem));
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}

static int s_grow_requests(opt_trace_t *t, bool obs);

opt_trace_t *opt_trace_new(uint64_t max_refs, uint32_t tokens_per_block)
{
    opt_trace_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->max_refs = max_refs ? max_refs : OPT_TRACE_DEFAULT_MAX_REFS;
    if (t->max_refs > OPT_TRACE_LIMIT_MAX_REFS)
        t->max_refs = OPT_TRACE_LIMIT_MAX_REFS;
    t->tokens_per_block = tokens_per_block ? tokens_per_block : OPT_DEFAULT_TOKENS_PER_BLOCK;
    t->map_mask = 1023;
    t->offset = NULL;
    t->map = malloc(1024 * sizeof *t->map);
    if (!t->map || s_grow_requests(t, false) < 0) {
        opt_trace_destroy(&t);
        return NULL;
    }
    memset(t->map, 0xff, 1024 * sizeof *t->map);
    t->offset[0] = 0;
    return t;
}

void opt_trace_destroy(opt_trace_t **t)
{
    if (!t || !*t)
        return;
    opt_trace_t *s = *t;
    for (uint32_t i = 0; i < s->n_instances; i++)
        free(s->instances[i]);
    free(s->instances);
    free(s->offset);
    free(s->tokens);
    free(s->obs_hits);
    free(s->obs_head);
    free(s->refs);
    free(s->keys);
    free(s->inst);
    free(s->map);
    free(s);
    *t = NULL;
}

/* ---- the id map ---- */

static uint32_t s_hash(const uint8_t *key, uint32_t inst)
{
    uint64_t h = XXH3_64bits_withSeed(key, OPT_KEY_BYTES, inst);
    return (uint32_t)(h ^ (h >> 32));
}

static int s_map_grow(opt_trace_t *t)
{
    uint64_t n = ((uint64_t)t->map_mask + 1) * 2;
    if (n > (1ull << 32))
        return -ENOMEM;
    uint32_t *m = malloc((size_t)n * sizeof *m);
    if (!m)
        return -ENOMEM;
    memset(m, 0xff, (size_t)n * sizeof *m);
    uint32_t mask = (uint32_t)(n - 1);
    for (uint32_t b = 0; b < t->n_blocks; b++) {
        uint32_t i = s_hash(t->keys[b], t->inst[b]) & mask;
        while (m[i] != S_EMPTY)
            i = (i + 1) & mask;
        m[i] = b;
    }
    free(t->map);
    t->map = m;
    t->map_mask = mask;
    return 0;
}

/* The dense id of (KEY, INST), a new one when first seen; S_EMPTY when out of memory. */
static uint32_t s_intern(opt_trace_t *t, const uint8_t *key, uint32_t inst)
{
    uint32_t i = s_hash(key, inst) & t->map_mask;
    for (; t->map[i] != S_EMPTY; i = (i + 1) & t->map_mask) {
        uint32_t b = t->map[i];
        if (t->inst[b] == inst && memcmp(t->keys[b], key, OPT_KEY_BYTES) == 0)
            return b;
    }
    uint64_t cap = t->cap_blocks;
    if (t->n_blocks == UINT32_MAX - 1 ||
        s_grow((void **)&t->keys, &cap, (uint64_t)t->n_blocks + 1, OPT_KEY_BYTES) < 0)
        return S_EMPTY;
    cap = t->cap_blocks;
    if (s_grow((void **)&t->inst, &cap, (uint64_t)t->n_blocks + 1, sizeof *t->inst) < 0)
        return S_EMPTY;
    t->cap_blocks = (uint32_t)cap;
    uint32_t b = t->n_blocks++;
    memcpy(t->keys[b], key, OPT_KEY_BYTES);
    t->inst[b] = inst;
    t->map[i] = b;
    if ((uint64_t)t->n_blocks * 2 > (uint64_t)t->map_mask + 1 && s_map_grow(t) < 0)
        return S_EMPTY;
    return b;
}

/* ---- building ---- */

/* Room for one more request in every per-request array (all share cap_req). */
static int s_grow_requests(opt_trace_t *t, bool obs)
{
    if (t->n_req + 2 <= t->cap_req && (!obs || t->obs_hits))
        return 0;
    uint64_t n = t->cap_req < 1024 ? 1024 : t->cap_req;
    while (n < t->n_req + 2)
        n *= 2;
    void *p;
    if (!(p = realloc(t->offset, (size_t)n * sizeof *t->offset)))
        return -ENOMEM;
    t->offset = p;
    if (!(p = realloc(t->tokens, (size_t)n * sizeof *t->tokens)))
        return -ENOMEM;
    t->tokens = p;
    if (obs) {
        if (!(p = realloc(t->obs_hits, (size_t)n * sizeof *t->obs_hits)))
            return -ENOMEM;
        t->obs_hits = p;
        if (!(p = realloc(t->obs_head, (size_t)n * sizeof *t->obs_head)))
            return -ENOMEM;
        t->obs_head = p;
    }
    t->cap_req = n;
    return 0;
}

int opt_trace_add(opt_trace_t *t, uint32_t inst, const uint8_t (*keys)[OPT_KEY_BYTES], size_t n,
                  uint64_t tokens, int64_t observed_hits, int64_t head_hits, char *err,
                  size_t errlen)
{
    if (n > OPT_TRACE_MAX_BLOCKS) {
        snprintf(err, errlen, "%zu blocks in one request (at most %u)", n,
                 (unsigned)OPT_TRACE_MAX_BLOCKS);
        return -1;
    }
    if (t->n_refs + n > t->max_refs) {
        snprintf(err, errlen,
                 "more than %llu block references in the trace (--max-refs; about 40 bytes "
                 "each)",
                 (unsigned long long)t->max_refs);
        return -1;
    }
    bool obs = observed_hits >= 0;
    if (t->n_req > 0 && obs != t->observed) {
        snprintf(err, errlen, "requests with and without observed hits mixed");
        return -1;
    }
    t->observed = obs;
    if (s_grow((void **)&t->refs, &t->cap_refs, t->n_refs + n, sizeof *t->refs) < 0 ||
        s_grow_requests(t, obs) < 0)
        goto out_nomem;
    for (size_t i = 0; i < n; i++) {
        uint32_t b = s_intern(t, keys[i], inst);
        if (b == S_EMPTY)
            goto out_nomem;
        t->refs[t->n_refs + i] = b;
    }
    t->tokens[t->n_req] = tokens ? tokens : (uint64_t)n * t->tokens_per_block;
    if (obs) {
        t->obs_hits[t->n_req] = (uint32_t)observed_hits;
        t->obs_head[t->n_req] = (uint32_t)(head_hits >= 0 ? head_hits : observed_hits);
    }
    t->n_refs += n;
    t->n_req++;
    t->offset[t->n_req] = t->n_refs;
    if (n > t->max_blocks)
        t->max_blocks = (uint32_t)n;
    return 0;
out_nomem:
    snprintf(err, errlen, "out of memory");
    return -1;
}

static void s_id_key(uint64_t id, uint8_t *key)
{
    memset(key, 0, OPT_KEY_BYTES);
    for (int b = 0; b < 8; b++)
        key[b] = (uint8_t)(id >> (8 * b));
}

int opt_trace_add_ids(opt_trace_t *t, const uint64_t *ids, size_t n, uint64_t tokens, char *err,
                      size_t errlen)
{
    uint8_t(*keys)[OPT_KEY_BYTES] = malloc((n ? n : 1) * OPT_KEY_BYTES);
    if (!keys) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        s_id_key(ids[i], keys[i]);
    int rc =
        opt_trace_add(t, 0, (const uint8_t(*)[OPT_KEY_BYTES])keys, n, tokens, -1, -1, err, errlen);
    free(keys);
    return rc;
}

/* ---- parsing ---- */

/* Scratch of one load: the keys of the line being parsed. */
typedef struct {
    uint8_t (*keys)[OPT_KEY_BYTES];
    uint64_t cap;
} s_scratch_t;

static int s_scratch(s_scratch_t *s, size_t n)
{
    return s_grow((void **)&s->keys, &s->cap, n ? n : 1, OPT_KEY_BYTES);
}

/* A non-negative integer member NAME of OBJ: 1 found, 0 absent, -1 wrong type. */
static int s_uint_member(json_t *obj, const char *name, uint64_t max, uint64_t *out)
{
    json_t *v = json_object_get(obj, name);
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > max)
        return -1;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

static int s_mooncake_line(opt_trace_t *t, json_t *obj, s_scratch_t *s, char *err, size_t errlen)
{
    json_t *ids = json_object_get(obj, "hash_ids");
    if (!json_is_array(ids)) {
        snprintf(err, errlen, "expected an object with a \"hash_ids\" array");
        return -1;
    }
    size_t n = json_array_size(ids);
    if (n > OPT_TRACE_MAX_BLOCKS) {
        snprintf(err, errlen, "%zu hash_ids (at most %u per request)", n,
                 (unsigned)OPT_TRACE_MAX_BLOCKS);
        return -1;
    }
    uint64_t tokens = 0;
    if (s_uint_member(obj, "input_length", UINT32_MAX, &tokens) < 0) {
        snprintf(err, errlen, "input_length: expected a non-negative integer");
        return -1;
    }
    if (s_scratch(s, n) < 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(ids, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            snprintf(err, errlen, "hash_ids[%zu]: expected a non-negative integer", i);
            return -1;
        }
        s_id_key((uint64_t)json_integer_value(v), s->keys[i]);
    }
    return opt_trace_add(t, 0, (const uint8_t(*)[OPT_KEY_BYTES])s->keys, n, tokens, -1, -1, err,
                         errlen);
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

static int s_parse_key(const char *hex, uint8_t *out)
{
    if (!hex || strlen(hex) != 2 * OPT_KEY_BYTES)
        return -1;
    for (int i = 0; i < OPT_KEY_BYTES; i++) {
        int hi = s_hexval(hex[2 * i]), lo = s_hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/* The index of instance NAME, interned; UINT32_MAX past the bound or out of memory. */
static uint32_t s_instance(opt_trace_t *t, const char *name)
{
    for (uint32_t i = 0; i < t->n_instances; i++)
        if (strcmp(t->instances[i], name) == 0)
            return i;
    if (t->n_instances == OPT_TRACE_MAX_INSTANCES)
        return UINT32_MAX;
    char **v = realloc(t->instances, (t->n_instances + 1) * sizeof *v);
    if (!v)
        return UINT32_MAX;
    t->instances = v;
    if (!(v[t->n_instances] = strdup(name)))
        return UINT32_MAX;
    return t->n_instances++;
}

static int s_lookup_event(opt_trace_t *t, json_t *obj, s_scratch_t *s, char *err, size_t errlen)
{
    uint64_t mode = 0, hits = 0, head = 0;
    if (s_uint_member(obj, "mode", UINT32_MAX, &mode) < 0) {
        snprintf(err, errlen, "mode: expected a non-negative integer");
        return -1;
    }
    if (mode != 0) { /* not LOOKUP_MODE_PREFIX: not this trace's semantics */
        t->skipped_modes++;
        return 0;
    }
    json_t *keys = json_object_get(obj, "keys");
    if (!json_is_array(keys)) {
        snprintf(err, errlen, "lookup: expected a \"keys\" array");
        return -1;
    }
    size_t n = json_array_size(keys);
    int hrc = s_uint_member(obj, "hits", n, &hits);
    if (hrc <= 0) {
        snprintf(err, errlen, "lookup: \"hits\": expected an integer from 0 to %zu (keys)", n);
        return -1;
    }
    int head_rc = s_uint_member(obj, "head_hits", hits, &head);
    if (head_rc < 0) {
        snprintf(err, errlen, "lookup: \"head_hits\": expected an integer from 0 to %llu (hits)",
                 (unsigned long long)hits);
        return -1;
    }
    json_t *iv = json_object_get(obj, "instance");
    if (iv && !json_is_string(iv)) {
        snprintf(err, errlen, "lookup: \"instance\": expected a string");
        return -1;
    }
    const char *name = iv ? json_string_value(iv) : "";
    if (t->only_instance && strcmp(name, t->only_instance) != 0) {
        t->skipped_events++;
        return 0;
    }
    uint32_t inst = s_instance(t, name);
    if (inst == UINT32_MAX) {
        snprintf(err, errlen, "more than %u instances", (unsigned)OPT_TRACE_MAX_INSTANCES);
        return -1;
    }
    if (n > OPT_TRACE_MAX_BLOCKS || s_scratch(s, n) < 0) {
        snprintf(err, errlen, "%zu keys: too many or out of memory", n);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (s_parse_key(json_string_value(json_array_get(keys, i)), s->keys[i]) < 0) {
            snprintf(err, errlen, "keys[%zu]: expected a string of 32 hex digits", i);
            return -1;
        }
    return opt_trace_add(t, inst, (const uint8_t(*)[OPT_KEY_BYTES])s->keys, n, 0, (int64_t)hits,
                         head_rc > 0 ? (int64_t)head : (int64_t)hits, err, errlen);
}

static int s_event_line(opt_trace_t *t, json_t *obj, s_scratch_t *s, char *err, size_t errlen)
{
    json_t *kind = json_object_get(obj, "kind");
    if (!json_is_string(kind)) {
        snprintf(err, errlen, "expected an event object with a \"kind\" string");
        return -1;
    }
    if (strcmp(json_string_value(kind), "lookup") != 0) {
        t->skipped_events++;
        return 0;
    }
    return s_lookup_event(t, obj, s, err, errlen);
}

static bool s_blank(const char *line)
{
    for (; *line; line++)
        if (*line != ' ' && *line != '\t' && *line != '\r' && *line != '\n')
            return false;
    return true;
}

/* One non-blank line; the format is settled by the first one when AUTO. */
static int s_line(opt_trace_t *t, const char *line, size_t len, s_scratch_t *s, char *err,
                  size_t errlen)
{
    json_error_t jerr;
    json_t *obj = json_loadb(line, len, 0, &jerr);
    if (!obj) {
        snprintf(err, errlen, "invalid JSON: %s", jerr.text);
        return -1;
    }
    int rc = -1;
    if (!json_is_object(obj)) {
        snprintf(err, errlen, "expected a JSON object");
        goto out;
    }
    if (t->format == OPT_FORMAT_AUTO) {
        if (json_object_get(obj, "hash_ids"))
            t->format = OPT_FORMAT_MOONCAKE;
        else if (json_object_get(obj, "kind"))
            t->format = OPT_FORMAT_EVENTS;
        else {
            snprintf(err, errlen,
                     "neither a trace line (\"hash_ids\") nor an event (\"kind\"): "
                     "name the format with --format");
            goto out;
        }
    }
    rc = t->format == OPT_FORMAT_MOONCAKE ? s_mooncake_line(t, obj, s, err, errlen)
                                          : s_event_line(t, obj, s, err, errlen);
out:
    json_decref(obj);
    return rc;
}

opt_trace_t *opt_trace_load(const char *path, const opt_load_config_t *cfg, char *err,
                            size_t errlen)
{
    opt_load_config_t c = cfg ? *cfg : (opt_load_config_t){0};
    FILE *fp = fopen(path, "r");
    if (!fp) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    opt_trace_t *t = opt_trace_new(c.max_refs, c.tokens_per_block);
    s_scratch_t s = {0};
    char *line = NULL, why[400];
    size_t cap = 0, lineno = 0;
    if (!t) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto out_fail;
    }
    t->format = c.format;
    t->only_instance = c.instance;
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
        if ((size_t)len > OPT_TRACE_MAX_LINE) {
            snprintf(err, errlen, "%s:%zu: line longer than %u bytes", path, lineno,
                     (unsigned)OPT_TRACE_MAX_LINE);
            goto out_fail;
        }
        if (s_blank(line))
            continue;
        if (s_line(t, line, (size_t)len, &s, why, sizeof why) < 0) {
            snprintf(err, errlen, "%s:%zu: %s", path, lineno, why);
            goto out_fail;
        }
    }
    if (t->n_req == 0) {
        snprintf(err, errlen, "%s: no requests in the %s", path,
                 t->format == OPT_FORMAT_EVENTS ? "recording (no prefix lookup events)" : "trace");
        goto out_fail;
    }
    t->only_instance = NULL;
    free(s.keys);
    free(line);
    fclose(fp);
    return t;
out_fail:
    free(s.keys);
    free(line);
    fclose(fp);
    opt_trace_destroy(&t);
    return NULL;
}

/* ---- access ---- */

opt_format_t opt_trace_format(const opt_trace_t *t)
{
    return t->format;
}

size_t opt_trace_requests(const opt_trace_t *t)
{
    return t->n_req;
}

uint64_t opt_trace_refs(const opt_trace_t *t)
{
    return t->n_refs;
}

uint32_t opt_trace_distinct(const opt_trace_t *t)
{
    return t->n_blocks;
}

uint32_t opt_trace_max_blocks(const opt_trace_t *t)
{
    return t->max_blocks;
}

const uint32_t *opt_trace_blocks(const opt_trace_t *t, size_t i, uint32_t *n)
{
    /* A trace whose requests are all empty never grows refs: NULL + 0 is undefined
     * (UBSan, found by tests/fuzz/fuzz_trace), so such a request gets an empty array. */
    static const uint32_t s_none[1];
    *n = (uint32_t)(t->offset[i + 1] - t->offset[i]);
    return t->refs ? t->refs + t->offset[i] : s_none;
}

uint64_t opt_trace_first_ref(const opt_trace_t *t, size_t i)
{
    return t->offset[i];
}

uint64_t opt_trace_tokens(const opt_trace_t *t, size_t i)
{
    return t->tokens[i];
}

uint32_t opt_trace_tokens_per_block(const opt_trace_t *t)
{
    return t->tokens_per_block;
}

const uint8_t *opt_trace_key(const opt_trace_t *t, uint32_t b, uint32_t *inst)
{
    if (inst)
        *inst = t->inst[b];
    return t->keys[b];
}

bool opt_trace_has_observed(const opt_trace_t *t)
{
    return t->observed && t->n_req > 0;
}

void opt_trace_observed(const opt_trace_t *t, size_t i, uint32_t *hits, uint32_t *head_hits)
{
    *hits = t->observed ? t->obs_hits[i] : 0;
    *head_hits = t->observed ? t->obs_head[i] : 0;
}

uint64_t opt_trace_skipped_events(const opt_trace_t *t)
{
    return t->skipped_events;
}

uint64_t opt_trace_skipped_modes(const opt_trace_t *t)
{
    return t->skipped_modes;
}
