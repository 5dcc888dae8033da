/* bus_config.c — JSON configuration: bounded loading, path lookup, typed
 * getters whose errors carry the full key path, unit parsers, unknown-key
 * checks with a spelling suggestion.
 *
 * Owns the jansson document of one config. Never asserts on file content, never
 * reads past the size limit, never logs. Every string taken from the file is
 * escaped and cut before it goes into a message, so a hostile file cannot
 * forge log lines or overflow a buffer. */
#include "bus_config.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Longest string value or key echoed back in a message. */
#define S_ECHO_MAX 48
/* Longest word the edit-distance suggestion considers. */
#define S_SUGGEST_MAX 64
#define S_SOURCE_MAX 256

struct bus_config {
    bus_config_node_t root;
    json_t *json;
    char source[S_SOURCE_MAX];
};

/* --- messages ------------------------------------------------------------ */

/* Writes S (N bytes) into OUT as printable ASCII: bytes outside 0x20..0x7e as
 * \xNN, '"' and '\' escaped when QUOTES (the result goes between quotes), cut
 * with "..." after MAX bytes of S. */
static void s_escape_ex(const char *s, size_t n, char *out, size_t outlen, size_t max, bool quotes)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (outlen == 0)
        return;
    for (size_t i = 0; i < n && o + 8 < outlen; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i >= max) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (quotes && (c == '"' || c == '\\')) {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20 || c > 0x7e) {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
}

static void s_escape(const char *s, size_t n, char *out, size_t outlen)
{
    s_escape_ex(s, n, out, outlen, S_ECHO_MAX, true);
}

/* Size of a buffer that holds any s_escape result. */
#define S_ESCAPED_MAX (S_ECHO_MAX * 4 + 8)

/* A short description of a value for "got ..." ("\"12x\"", "-3", "an array"). */
static void s_describe(const json_t *v, char *out, size_t outlen)
{
    char esc[S_ESCAPED_MAX];
    switch (json_typeof(v)) {
    case JSON_STRING:
        s_escape(json_string_value(v), json_string_length(v), esc, sizeof esc);
        snprintf(out, outlen, "\"%s\"", esc);
        break;
    case JSON_INTEGER:
        snprintf(out, outlen, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        break;
    case JSON_REAL:
        snprintf(out, outlen, "%g", json_real_value(v));
        break;
    case JSON_TRUE:
        snprintf(out, outlen, "true");
        break;
    case JSON_FALSE:
        snprintf(out, outlen, "false");
        break;
    case JSON_NULL:
        snprintf(out, outlen, "null");
        break;
    case JSON_OBJECT:
        snprintf(out, outlen, "an object");
        break;
    case JSON_ARRAY:
        snprintf(out, outlen, "an array");
        break;
    }
}

/* "<path>: <message>"; the root shows as "(root)". Returns CODE. */
__attribute__((format(printf, 5, 0))) static int
s_verr(int code, char *err, size_t errlen, const char *path, const char *fmt, va_list ap)
{
    if (!err || errlen == 0)
        return code;
    int n = snprintf(err, errlen, "%s: ", path[0] ? path : "(root)");
    if (n >= 0 && (size_t)n < errlen)
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    return code;
}

__attribute__((format(printf, 4, 5))) static int s_err(char *err, size_t errlen, const char *path,
                                                       const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = s_verr(BUS_CONFIG_EINVALID, err, errlen, path, fmt, ap);
    va_end(ap);
    return rc;
}

static int s_type_err(char *err, size_t errlen, const char *path, const char *expected,
                      const json_t *got)
{
    char desc[S_ESCAPED_MAX + 4];
    s_describe(got, desc, sizeof desc);
    return s_err(err, errlen, path, "expected %s, got %s", expected, desc);
}

/* --- paths ---------------------------------------------------------------- */

/* Appends to PATH (a BUS_CONFIG_PATH_MAX buffer); a path that does not fit
 * ends in "..." so a message never pretends to be exact. */
__attribute__((format(printf, 2, 3))) static void s_path_add(char *path, const char *fmt, ...)
{
    size_t len = strlen(path);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(path + len, BUS_CONFIG_PATH_MAX - len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= BUS_CONFIG_PATH_MAX - len)
        memcpy(path + BUS_CONFIG_PATH_MAX - 4, "...", 4);
}

static bool s_simple_key(const char *key, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = key[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

static void s_path_key(char *path, const char *key, size_t n)
{
    if (s_simple_key(key, n)) {
        s_path_add(path, "%s%.*s", path[0] ? "." : "", (int)n, key);
    } else {
        char esc[S_ESCAPED_MAX];
        s_escape(key, n, esc, sizeof esc);
        s_path_add(path, "[\"%s\"]", esc);
    }
}

/* BASE joined with the relative PATH as the caller wrote it. */
static void s_path_join(char *out, const char *base, const char *path)
{
    out[0] = '\0';
    s_path_add(out, "%s", base);
    if (path && path[0])
        s_path_add(out, "%s%s", (out[0] && path[0] != '[') ? "." : "", path);
}

/* PATH may be NODE's own path (a caller reusing one node as a cursor). */
static void s_node_set(bus_config_node_t *node, json_t *json, const char *path)
{
    char copy[BUS_CONFIG_PATH_MAX];
    snprintf(copy, sizeof copy, "%s", path);
    node->priv_json = json;
    memcpy(node->priv_path, copy, sizeof copy);
}

/* --- suggestions ---------------------------------------------------------- */

/* Optimal string alignment distance (edits and adjacent swaps), or SIZE_MAX
 * for words too long to bother with. */
static size_t s_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > S_SUGGEST_MAX || lb > S_SUGGEST_MAX)
        return SIZE_MAX;
    size_t rows[3][S_SUGGEST_MAX + 1];
    size_t *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t best = prev[j - 1] + cost;
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                prev2[j - 2] + 1 < best)
                best = prev2[j - 2] + 1;
            cur[j] = best;
        }
        size_t *t = prev2;
        prev2 = prev;
        prev = cur;
        cur = t;
    }
    return prev[lb];
}

/* Close enough to be a typo: at most 2 edits, and at most a third of the word. */
static bool s_close(const char *a, const char *b, size_t *dist)
{
    size_t d = s_distance(a, b);
    size_t la = strlen(a), lb = strlen(b);
    size_t longer = la > lb ? la : lb;
    *dist = d;
    return d != SIZE_MAX && d <= 2 && d * 3 <= longer;
}

static const char *s_suggest(const char *word, const char *const *names)
{
    const char *best = NULL;
    size_t best_d = SIZE_MAX, d;
    for (size_t i = 0; names[i]; i++)
        if (s_close(word, names[i], &d) && d < best_d) {
            best = names[i];
            best_d = d;
        }
    return best;
}

/* Writes `"a", "b", "c"` (QUOTED) or `a, b, c` into OUT, cut to fit. */
static void s_list(const char *const *names, bool quoted, char *out, size_t outlen)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; names[i] && o < outlen; i++) {
        int n =
            snprintf(out + o, outlen - o, quoted ? "%s\"%s\"" : "%s%s", i ? ", " : "", names[i]);
        if (n < 0)
            break;
        o += (size_t)n;
    }
}

/* --- lookup --------------------------------------------------------------- */

static int s_bad_path(const bus_config_node_t *node, const char *path, char *err, size_t errlen)
{
    char esc[S_ESCAPED_MAX];
    s_escape(path, strlen(path), esc, sizeof esc);
    return s_err(err, errlen, node->priv_path, "bad config path \"%s\" (expected key.key[N])", esc);
}

/* Missing key: names the full requested path, plus a hint. */
static int s_missing(const bus_config_node_t *node, const char *path, bool required,
                     const char *hint, char *err, size_t errlen)
{
    if (!required || !err || errlen == 0)
        return BUS_CONFIG_EMISSING;
    char full[BUS_CONFIG_PATH_MAX];
    s_path_join(full, node->priv_path, path);
    snprintf(err, errlen, "%s: missing required key%s", full[0] ? full : "(root)", hint);
    return BUS_CONFIG_EMISSING;
}

/* A key of OBJECT close to the missing KEY (N bytes) is most likely the
 * reason it is missing: say so in HINT. */
static void s_near_miss(json_t *object, const char *key, size_t n, char *hint, size_t hintlen)
{
    char word[S_SUGGEST_MAX + 1], esc[S_ESCAPED_MAX];
    const char *k;
    json_t *v;
    size_t best_d = SIZE_MAX, d;
    if (n > S_SUGGEST_MAX)
        return;
    memcpy(word, key, n);
    word[n] = '\0';
    json_object_foreach(object, k, v)
    {
        if (s_close(word, k, &d) && d < best_d) {
            best_d = d;
            s_escape(k, strlen(k), esc, sizeof esc);
            snprintf(hint, hintlen, " (found \"%s\": a typo?)", esc);
        }
    }
}

/* PATH follows key(.key|[N])* — checked before lookup so that a typo in a
 * caller's path is an error even where the key is absent (an opt_ getter
 * would otherwise return its default forever). */
static bool s_path_valid(const char *p)
{
    for (bool first = true; *p; first = false) {
        if (*p == '[') {
            const char *q = p + 1;
            size_t digits = strspn(q, "0123456789");
            if (digits == 0 || digits > 18 || q[digits] != ']')
                return false;
            p = q + digits + 1;
            continue;
        }
        if (!first && *p++ != '.')
            return false;
        size_t n = strcspn(p, ".[]");
        if (n == 0 || p[n] == ']')
            return false;
        p += n;
    }
    return true;
}

/* Looks PATH up below NODE: 0 with *OUT and its display path in JPATH (a
 * BUS_CONFIG_PATH_MAX buffer), BUS_CONFIG_EMISSING (message only when
 * REQUIRED) or BUS_CONFIG_EINVALID (a container of the wrong type, a bad path). */
static int s_find(const bus_config_node_t *node, const char *path, bool required, json_t **out,
                  char *jpath, char *err, size_t errlen)
{
    json_t *cur = node->priv_json;
    const char *p = path ? path : "";
    char hint[BUS_CONFIG_PATH_MAX + 64] = "";
    snprintf(jpath, BUS_CONFIG_PATH_MAX, "%s", node->priv_path);
    if (!s_path_valid(p))
        return s_bad_path(node, p, err, errlen);
    for (bool first = true; *p; first = false) {
        if (*p == '[') {
            char *end;
            size_t idx = (size_t)strtoull(p + 1, &end, 10);
            const char *q = end;
            if (!json_is_array(cur))
                return s_type_err(err, errlen, jpath, "an array", cur);
            if (idx >= json_array_size(cur)) {
                snprintf(hint, sizeof hint, " (%s has %zu elements)", jpath[0] ? jpath : "(root)",
                         json_array_size(cur));
                return s_missing(node, path, required, hint, err, errlen);
            }
            s_path_add(jpath, "[%zu]", idx);
            cur = json_array_get(cur, idx);
            p = q + 1;
            continue;
        }
        if (!first)
            p++; /* the '.' */
        size_t n = strcspn(p, ".[]");
        if (!json_is_object(cur))
            return s_type_err(err, errlen, jpath, "an object", cur);
        json_t *next = json_object_getn(cur, p, n);
        if (!next) {
            if (required)
                s_near_miss(cur, p, n, hint, sizeof hint);
            return s_missing(node, path, required, hint, err, errlen);
        }
        s_path_key(jpath, p, n);
        cur = next;
        p += n;
    }
    *out = cur;
    return 0;
}

/* --- loading -------------------------------------------------------------- */

static bus_config_t *s_parse(const char *name, const char *buf, size_t len, char *err,
                             size_t errlen)
{
    char src[S_ESCAPED_MAX];
    s_escape(name, strlen(name), src, sizeof src);
    json_error_t jerr;
    json_t *json = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json) {
        /* jansson's text quotes file bytes ("near '...'"): keep it whole, only
         * make it printable. */
        char text[JSON_ERROR_TEXT_LENGTH * 4 + 8];
        s_escape_ex(jerr.text, strnlen(jerr.text, sizeof jerr.text), text, sizeof text,
                    JSON_ERROR_TEXT_LENGTH, false);
        if (err && errlen)
            snprintf(err, errlen, "%s:%d:%d: invalid JSON: %s", src, jerr.line, jerr.column, text);
        return NULL;
    }
    if (!json_is_object(json)) {
        char desc[S_ESCAPED_MAX + 4];
        s_describe(json, desc, sizeof desc);
        if (err && errlen)
            snprintf(err, errlen, "%s: the top level must be a JSON object, got %s", src, desc);
        json_decref(json);
        return NULL;
    }
    bus_config_t *cfg = calloc(1, sizeof *cfg);
    if (!cfg) {
        if (err && errlen)
            snprintf(err, errlen, "%s: out of memory", src);
        json_decref(json);
        return NULL;
    }
    cfg->json = json;
    snprintf(cfg->source, sizeof cfg->source, "%s", name);
    s_node_set(&cfg->root, json, "");
    return cfg;
}

bus_config_t *bus_config_load_file(const char *filename, size_t max_bytes, char *err, size_t errlen)
{
    bus_config_t *cfg = NULL;
    char *buf = NULL;
    char src[S_ESCAPED_MAX];
    if (!filename)
        filename = "";
    s_escape(filename, strlen(filename), src, sizeof src);
    if (max_bytes == 0 || max_bytes > BUS_CONFIG_MAX_BYTES)
        max_bytes = BUS_CONFIG_MAX_BYTES;
    FILE *f = fopen(filename, "rb");
    if (!f) {
        if (err && errlen)
            snprintf(err, errlen, "%s: cannot open: %s", src, strerror(errno));
        goto out;
    }
    /* One byte more than allowed tells "exactly at the limit" from "over it". */
    buf = malloc(max_bytes + 1);
    if (!buf) {
        if (err && errlen)
            snprintf(err, errlen, "%s: out of memory", src);
        goto out_close;
    }
    size_t n = fread(buf, 1, max_bytes + 1, f);
    if (ferror(f)) {
        if (err && errlen)
            snprintf(err, errlen, "%s: cannot read: %s", src, strerror(errno));
        goto out_close;
    }
    if (n > max_bytes) {
        if (err && errlen)
            snprintf(err, errlen, "%s: file too large (over %zu bytes)", src, max_bytes);
        goto out_close;
    }
    cfg = s_parse(filename, buf, n, err, errlen);
out_close:
    fclose(f);
out:
    free(buf);
    return cfg;
}

bus_config_t *bus_config_load_string(const char *name, const char *text, char *err, size_t errlen)
{
    if (!name)
        name = "<string>";
    if (!text) {
        if (err && errlen)
            snprintf(err, errlen, "%s: no text", name);
        return NULL;
    }
    size_t n = strnlen(text, BUS_CONFIG_MAX_BYTES + 1);
    if (n > BUS_CONFIG_MAX_BYTES) {
        if (err && errlen)
            snprintf(err, errlen, "%s: text too large (over %u bytes)", name,
                     (unsigned)BUS_CONFIG_MAX_BYTES);
        return NULL;
    }
    return s_parse(name, text, n, err, errlen);
}

void bus_config_destroy(bus_config_t **cfg_p)
{
    if (!cfg_p || !*cfg_p)
        return;
    json_decref((*cfg_p)->json);
    free(*cfg_p);
    *cfg_p = NULL;
}

const char *bus_config_source(const bus_config_t *cfg)
{
    return cfg->source;
}

const bus_config_node_t *bus_config_root(const bus_config_t *cfg)
{
    return &cfg->root;
}

/* Recursion depth is bounded by the nesting of DEFAULTS (jansson caps it). */
static int s_merge(json_t *dst, json_t *src, char *path, char *err, size_t errlen)
{
    const char *key;
    json_t *sv;
    json_object_foreach(src, key, sv)
    {
        size_t len = strlen(path);
        int rc = 0;
        json_t *dv = json_object_get(dst, key);
        s_path_key(path, key, strlen(key));
        if (!dv) {
            if (json_object_set_new(dst, key, json_deep_copy(sv)) < 0)
                rc = s_err(err, errlen, path, "out of memory");
        } else if (json_is_object(sv)) {
            rc = json_is_object(dv) ? s_merge(dv, sv, path, err, errlen)
                                    : s_type_err(err, errlen, path, "an object", dv);
        }
        path[len] = '\0';
        if (rc < 0)
            return rc;
    }
    return 0;
}

int bus_config_merge_defaults(bus_config_t *cfg, const bus_config_t *defaults, char *err,
                              size_t errlen)
{
    char path[BUS_CONFIG_PATH_MAX] = "";
    return s_merge(cfg->json, defaults->json, path, err, errlen);
}

/* --- nodes ---------------------------------------------------------------- */

const char *bus_config_node_path(const bus_config_node_t *node)
{
    return node->priv_path;
}

bool bus_config_has(const bus_config_node_t *node, const char *path)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    return s_find(node, path, false, &j, jp, NULL, 0) == 0;
}

int bus_config_get_node(const bus_config_node_t *node, const char *path, bus_config_node_t *out,
                        char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, true, &j, jp, err, errlen);
    if (rc == 0)
        s_node_set(out, j, jp);
    return rc;
}

int bus_config_get_object(const bus_config_node_t *node, const char *path, size_t max_keys,
                          bus_config_node_t *out, char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, true, &j, jp, err, errlen);
    if (rc < 0)
        return rc;
    if (!json_is_object(j))
        return s_type_err(err, errlen, jp, "an object", j);
    if (json_object_size(j) > max_keys)
        return s_err(err, errlen, jp, "too many keys (%zu, max %zu)", json_object_size(j),
                     max_keys);
    s_node_set(out, j, jp);
    return 0;
}

int bus_config_get_array(const bus_config_node_t *node, const char *path, size_t max_len,
                         bus_config_node_t *out, size_t *len, char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, true, &j, jp, err, errlen);
    if (rc < 0)
        return rc;
    if (!json_is_array(j))
        return s_type_err(err, errlen, jp, "an array", j);
    if (json_array_size(j) > max_len)
        return s_err(err, errlen, jp, "too many elements (%zu, max %zu)", json_array_size(j),
                     max_len);
    s_node_set(out, j, jp);
    *len = json_array_size(j);
    return 0;
}

int bus_config_array_elem(const bus_config_node_t *array, size_t index, bus_config_node_t *out,
                          char *err, size_t errlen)
{
    json_t *a = array->priv_json;
    if (!json_is_array(a))
        return s_type_err(err, errlen, array->priv_path, "an array", a);
    if (index >= json_array_size(a)) {
        char p[BUS_CONFIG_PATH_MAX];
        s_path_join(p, array->priv_path, "");
        s_path_add(p, "[%zu]", index);
        if (err && errlen)
            snprintf(err, errlen, "%s: missing (array has %zu elements)", p, json_array_size(a));
        return BUS_CONFIG_EMISSING;
    }
    s_node_set(out, json_array_get(a, index), array->priv_path);
    s_path_add(out->priv_path, "[%zu]", index);
    return 0;
}

bool bus_config_object_next(const bus_config_node_t *object, void **iter, const char **key,
                            bus_config_node_t *child)
{
    json_t *o = object->priv_json;
    if (!json_is_object(o))
        return false;
    void *it = *iter ? json_object_iter_next(o, *iter) : json_object_iter(o);
    if (!it)
        return false;
    *iter = it;
    *key = json_object_iter_key(it);
    s_node_set(child, json_object_iter_value(it), object->priv_path);
    s_path_key(child->priv_path, *key, json_object_iter_key_len(it));
    return true;
}

int bus_config_check_keys(const bus_config_node_t *node, const char *path,
                          const char *const *allowed, char *err, size_t errlen)
{
    bus_config_node_t obj, child;
    int rc = bus_config_get_object(node, path, SIZE_MAX, &obj, err, errlen);
    if (rc < 0)
        return rc;
    void *it = NULL;
    const char *key;
    while (bus_config_object_next(&obj, &it, &key, &child)) {
        bool known = false;
        for (size_t i = 0; allowed[i] && !known; i++)
            known = strcmp(key, allowed[i]) == 0;
        if (known)
            continue;
        const char *near = s_suggest(key, allowed);
        if (near)
            return s_err(err, errlen, child.priv_path, "unknown key (did you mean \"%s\"?)", near);
        char list[BUS_CONFIG_ERR_MAX];
        s_list(allowed, false, list, sizeof list);
        return s_err(err, errlen, child.priv_path, "unknown key (allowed: %s)", list);
    }
    return 0;
}

int bus_config_error(const bus_config_node_t *node, const char *path, char *err, size_t errlen,
                     const char *fmt, ...)
{
    char full[BUS_CONFIG_PATH_MAX];
    s_path_join(full, node->priv_path, path);
    va_list ap;
    va_start(ap, fmt);
    int rc = s_verr(BUS_CONFIG_EINVALID, err, errlen, full, fmt, ap);
    va_end(ap);
    return rc;
}

/* --- typed values --------------------------------------------------------- */

/* Each getter: s_find, then a converter that checks the value at JP. The opt_
 * form turns an absent key into the default and nothing else. */

static int s_to_string(const json_t *j, const char *jp, char *out, size_t outsz, char *err,
                       size_t errlen)
{
    if (!json_is_string(j))
        return s_type_err(err, errlen, jp, "a string", j);
    size_t n = json_string_length(j);
    if (outsz == 0 || n >= outsz)
        return s_err(err, errlen, jp, "string too long (%zu bytes, max %zu)", n,
                     outsz ? outsz - 1 : 0);
    memcpy(out, json_string_value(j), n + 1);
    return 0;
}

int bus_config_get_string(const bus_config_node_t *node, const char *path, char *out, size_t outsz,
                          char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, true, &j, jp, err, errlen);
    return rc < 0 ? rc : s_to_string(j, jp, out, outsz, err, errlen);
}

int bus_config_opt_string(const bus_config_node_t *node, const char *path, const char *dflt,
                          char *out, size_t outsz, char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, false, &j, jp, err, errlen);
    if (rc == BUS_CONFIG_EMISSING) {
        if (!dflt)
            dflt = "";
        if (outsz == 0 || strlen(dflt) >= outsz)
            return bus_config_error(node, path, err, errlen, "default too long (max %zu bytes)",
                                    outsz ? outsz - 1 : 0);
        memcpy(out, dflt, strlen(dflt) + 1);
        return 0;
    }
    return rc < 0 ? rc : s_to_string(j, jp, out, outsz, err, errlen);
}

static int s_to_bool(const json_t *j, const char *jp, bool *out, char *err, size_t errlen)
{
    if (!json_is_boolean(j))
        return s_type_err(err, errlen, jp, "true or false", j);
    *out = json_is_true(j);
    return 0;
}

int bus_config_get_bool(const bus_config_node_t *node, const char *path, bool *out, char *err,
                        size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, true, &j, jp, err, errlen);
    return rc < 0 ? rc : s_to_bool(j, jp, out, err, errlen);
}

int bus_config_opt_bool(const bus_config_node_t *node, const char *path, bool dflt, bool *out,
                        char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, false, &j, jp, err, errlen);
    if (rc == BUS_CONFIG_EMISSING) {
        *out = dflt;
        return 0;
    }
    return rc < 0 ? rc : s_to_bool(j, jp, out, err, errlen);
}

static int s_to_i64(const json_t *j, const char *jp, int64_t min, int64_t max, int64_t *out,
                    char *err, size_t errlen)
{
    if (!json_is_integer(j))
        return s_type_err(err, errlen, jp, "an integer", j);
    int64_t v = json_integer_value(j);
    if (v < min || v > max)
        return s_err(err, errlen, jp, "%" PRId64 " out of range %" PRId64 "..%" PRId64, v, min,
                     max);
    *out = v;
    return 0;
}

int bus_config_get_i64(const bus_config_node_t *node, const char *path, int64_t min, int64_t max,
                       int64_t *out, char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, true, &j, jp, err, errlen);
    return rc < 0 ? rc : s_to_i64(j, jp, min, max, out, err, errlen);
}

int bus_config_opt_i64(const bus_config_node_t *node, const char *path, int64_t min, int64_t max,
                       int64_t dflt, int64_t *out, char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, false, &j, jp, err, errlen);
    if (rc == BUS_CONFIG_EMISSING) {
        *out = dflt;
        return 0;
    }
    return rc < 0 ? rc : s_to_i64(j, jp, min, max, out, err, errlen);
}

static int s_to_u64(const json_t *j, const char *jp, uint64_t min, uint64_t max, uint64_t *out,
                    char *err, size_t errlen)
{
    if (!json_is_integer(j) || json_integer_value(j) < 0)
        return s_type_err(err, errlen, jp, "a non-negative integer", j);
    uint64_t v = (uint64_t)json_integer_value(j);
    if (v < min || v > max)
        return s_err(err, errlen, jp, "%" PRIu64 " out of range %" PRIu64 "..%" PRIu64, v, min,
                     max);
    *out = v;
    return 0;
}

int bus_config_get_u64(const bus_config_node_t *node, const char *path, uint64_t min, uint64_t max,
                       uint64_t *out, char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, true, &j, jp, err, errlen);
    return rc < 0 ? rc : s_to_u64(j, jp, min, max, out, err, errlen);
}

int bus_config_opt_u64(const bus_config_node_t *node, const char *path, uint64_t min, uint64_t max,
                       uint64_t dflt, uint64_t *out, char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, false, &j, jp, err, errlen);
    if (rc == BUS_CONFIG_EMISSING) {
        *out = dflt;
        return 0;
    }
    return rc < 0 ? rc : s_to_u64(j, jp, min, max, out, err, errlen);
}

static int s_to_positive(const json_t *j, const char *jp, uint64_t *out, char *err, size_t errlen)
{
    if (!json_is_integer(j) || json_integer_value(j) < 1)
        return s_type_err(err, errlen, jp, "a positive integer", j);
    *out = (uint64_t)json_integer_value(j);
    return 0;
}

int bus_config_get_positive(const bus_config_node_t *node, const char *path, uint64_t *out,
                            char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, true, &j, jp, err, errlen);
    return rc < 0 ? rc : s_to_positive(j, jp, out, err, errlen);
}

int bus_config_opt_positive(const bus_config_node_t *node, const char *path, uint64_t dflt,
                            uint64_t *out, char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, false, &j, jp, err, errlen);
    if (rc == BUS_CONFIG_EMISSING) {
        *out = dflt;
        return 0;
    }
    return rc < 0 ? rc : s_to_positive(j, jp, out, err, errlen);
}

static int s_to_double(const json_t *j, const char *jp, double min, double max, double *out,
                       char *err, size_t errlen)
{
    if (!json_is_number(j))
        return s_type_err(err, errlen, jp, "a number", j);
    double v = json_number_value(j);
    if (!(v >= min && v <= max))
        return s_err(err, errlen, jp, "%g out of range %g..%g", v, min, max);
    *out = v;
    return 0;
}

int bus_config_get_double(const bus_config_node_t *node, const char *path, double min, double max,
                          double *out, char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, true, &j, jp, err, errlen);
    return rc < 0 ? rc : s_to_double(j, jp, min, max, out, err, errlen);
}

int bus_config_opt_double(const bus_config_node_t *node, const char *path, double min, double max,
                          double dflt, double *out, char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, false, &j, jp, err, errlen);
    if (rc == BUS_CONFIG_EMISSING) {
        *out = dflt;
        return 0;
    }
    return rc < 0 ? rc : s_to_double(j, jp, min, max, out, err, errlen);
}

typedef int (*s_unit_parser_fn)(const char *text, uint64_t *out, char *err, size_t errlen);

/* Sizes and durations: a non-negative JSON integer as is, or a string with units. */
static int s_to_units(const json_t *j, const char *jp, const char *expected, s_unit_parser_fn fn,
                      uint64_t *out, char *err, size_t errlen)
{
    if (json_is_integer(j) && json_integer_value(j) >= 0) {
        *out = (uint64_t)json_integer_value(j);
        return 0;
    }
    if (!json_is_string(j))
        return s_type_err(err, errlen, jp, expected, j);
    char msg[BUS_CONFIG_ERR_MAX];
    if (fn(json_string_value(j), out, msg, sizeof msg) < 0)
        return s_err(err, errlen, jp, "%s", msg);
    return 0;
}

#define S_SIZE_EXPECTED "a size (bytes, or a string like \"64MiB\")"
#define S_DURATION_EXPECTED "a duration (milliseconds, or a string like \"30s\")"

int bus_config_get_size(const bus_config_node_t *node, const char *path, uint64_t *out, char *err,
                        size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, true, &j, jp, err, errlen);
    return rc < 0 ? rc
                  : s_to_units(j, jp, S_SIZE_EXPECTED, bus_config_parse_size, out, err, errlen);
}

int bus_config_opt_size(const bus_config_node_t *node, const char *path, uint64_t dflt,
                        uint64_t *out, char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, false, &j, jp, err, errlen);
    if (rc == BUS_CONFIG_EMISSING) {
        *out = dflt;
        return 0;
    }
    return rc < 0 ? rc
                  : s_to_units(j, jp, S_SIZE_EXPECTED, bus_config_parse_size, out, err, errlen);
}

int bus_config_get_duration_ms(const bus_config_node_t *node, const char *path, uint64_t *out,
                               char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, true, &j, jp, err, errlen);
    return rc < 0 ? rc
                  : s_to_units(j, jp, S_DURATION_EXPECTED, bus_config_parse_duration_ms, out, err,
                               errlen);
}

int bus_config_opt_duration_ms(const bus_config_node_t *node, const char *path, uint64_t dflt,
                               uint64_t *out, char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, false, &j, jp, err, errlen);
    if (rc == BUS_CONFIG_EMISSING) {
        *out = dflt;
        return 0;
    }
    return rc < 0 ? rc
                  : s_to_units(j, jp, S_DURATION_EXPECTED, bus_config_parse_duration_ms, out, err,
                               errlen);
}

static int s_to_enum(const json_t *j, const char *jp, const char *const *names, int *out, char *err,
                     size_t errlen)
{
    char list[BUS_CONFIG_ERR_MAX];
    if (json_is_string(j)) {
        for (int i = 0; names[i]; i++)
            if (strcmp(json_string_value(j), names[i]) == 0) {
                *out = i;
                return 0;
            }
    }
    s_list(names, true, list, sizeof list);
    char desc[S_ESCAPED_MAX + 4];
    s_describe(j, desc, sizeof desc);
    const char *near = json_is_string(j) ? s_suggest(json_string_value(j), names) : NULL;
    if (near)
        return s_err(err, errlen, jp, "expected one of %s, got %s (did you mean \"%s\"?)", list,
                     desc, near);
    return s_err(err, errlen, jp, "expected one of %s, got %s", list, desc);
}

int bus_config_get_enum(const bus_config_node_t *node, const char *path, const char *const *names,
                        int *out, char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, true, &j, jp, err, errlen);
    return rc < 0 ? rc : s_to_enum(j, jp, names, out, err, errlen);
}

int bus_config_opt_enum(const bus_config_node_t *node, const char *path, const char *const *names,
                        int dflt, int *out, char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    int rc = s_find(node, path, false, &j, jp, err, errlen);
    if (rc == BUS_CONFIG_EMISSING) {
        *out = dflt;
        return 0;
    }
    return rc < 0 ? rc : s_to_enum(j, jp, names, out, err, errlen);
}

int bus_config_get_endpoint(const bus_config_node_t *node, const char *path, bus_endpoint_use_t use,
                            char *out, size_t outsz, char *err, size_t errlen)
{
    json_t *j;
    char jp[BUS_CONFIG_PATH_MAX];
    char text[BUS_ENDPOINT_MAX], msg[BUS_CONFIG_ERR_MAX];
    int rc = s_find(node, path, true, &j, jp, err, errlen);
    if (rc < 0)
        return rc;
    rc = s_to_string(j, jp, text, sizeof text, err, errlen);
    if (rc < 0)
        return rc;
    if (bus_endpoint_check(text, use, msg, sizeof msg) < 0)
        return s_err(err, errlen, jp, "%s", msg);
    return s_to_string(j, jp, out, outsz, err, errlen);
}

/* --- unit parsers --------------------------------------------------------- */

typedef struct {
    const char *name;
    uint64_t mult;
} s_unit_t;

static const s_unit_t s_size_units[] = {
    {"b", 1},
    {"kib", 1ull << 10},
    {"mib", 1ull << 20},
    {"gib", 1ull << 30},
    {"tib", 1ull << 40},
    {"pib", 1ull << 50},
    {"kb", 1000ull},
    {"mb", 1000ull * 1000},
    {"gb", 1000ull * 1000 * 1000},
    {"tb", 1000ull * 1000 * 1000 * 1000},
    {"pb", 1000ull * 1000 * 1000 * 1000 * 1000},
};

#define S_SIZE_UNITS "B, KiB, MiB, GiB, TiB, PiB, KB, MB, GB, TB, PB"

/* Reads decimal digits at *P into *V; false on overflow. */
static bool s_digits(const char **p, uint64_t *v)
{
    *v = 0;
    for (; **p >= '0' && **p <= '9'; (*p)++) {
        uint64_t d = (uint64_t)(**p - '0');
        if (*v > (UINT64_MAX - d) / 10)
            return false;
        *v = *v * 10 + d;
    }
    return true;
}

__attribute__((format(printf, 5, 6))) static int
s_unit_err(char *err, size_t errlen, const char *what, const char *text, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return BUS_CONFIG_EINVALID;
    char esc[S_ESCAPED_MAX];
    s_escape(text, strlen(text), esc, sizeof esc);
    int n = snprintf(err, errlen, "bad %s \"%s\": ", what, esc);
    if (n >= 0 && (size_t)n < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return BUS_CONFIG_EINVALID;
}

int bus_config_parse_size(const char *text, uint64_t *out, char *err, size_t errlen)
{
    const char *p = text ? text : "";
    uint64_t v, mult = 0;
    if (*p == '-')
        return s_unit_err(err, errlen, "size", p, "must not be negative");
    if (*p < '0' || *p > '9')
        return s_unit_err(err, errlen, "size", p, "expected a number of bytes and a unit (%s)",
                          S_SIZE_UNITS);
    if (!s_digits(&p, &v))
        return s_unit_err(err, errlen, "size", text, "overflows 64 bits");
    if (*p == '.')
        return s_unit_err(err, errlen, "size", text,
                          "fractions are not supported (use a smaller unit)");
    if (*p == ' ')
        p++;
    if (*p == '\0' && p[-1] != ' ') {
        mult = 1;
    } else {
        for (size_t i = 0; i < sizeof s_size_units / sizeof s_size_units[0]; i++)
            if (strcasecmp(p, s_size_units[i].name) == 0)
                mult = s_size_units[i].mult;
    }
    if (mult == 0) {
        char esc[S_ESCAPED_MAX];
        s_escape(p, strlen(p), esc, sizeof esc);
        return s_unit_err(err, errlen, "size", text, "unknown unit \"%s\" (use %s)", esc,
                          S_SIZE_UNITS);
    }
    if (v > UINT64_MAX / mult)
        return s_unit_err(err, errlen, "size", text, "overflows 64 bits");
    *out = v * mult;
    return 0;
}

static const s_unit_t s_duration_units[] = {
    {"ms", 1}, /* before "m": the longest unit that matches wins */
    {"s", 1000},
    {"m", 60 * 1000},
    {"h", 60 * 60 * 1000},
};

#define S_DURATION_UNITS "ms, s, m, h"

int bus_config_parse_duration_ms(const char *text, uint64_t *out, char *err, size_t errlen)
{
    const char *p = text ? text : "";
    uint64_t total = 0;
    if (*p == '-')
        return s_unit_err(err, errlen, "duration", p, "must not be negative");
    if (*p == '\0')
        return s_unit_err(err, errlen, "duration", p, "empty (use a number and a unit: %s)",
                          S_DURATION_UNITS);
    while (*p) {
        uint64_t v, mult = 0;
        if (*p < '0' || *p > '9')
            return s_unit_err(err, errlen, "duration", text,
                              "expected a number before each unit (%s)", S_DURATION_UNITS);
        if (!s_digits(&p, &v))
            return s_unit_err(err, errlen, "duration", text, "overflows 64 bits");
        if (*p == '.')
            return s_unit_err(err, errlen, "duration", text,
                              "fractions are not supported (use a smaller unit)");
        if (*p == ' ')
            p++;
        size_t ulen = 0;
        while (p[ulen] >= 'a' && p[ulen] <= 'z')
            ulen++;
        for (size_t i = 0; i < sizeof s_duration_units / sizeof s_duration_units[0]; i++)
            if (strlen(s_duration_units[i].name) == ulen &&
                strncmp(p, s_duration_units[i].name, ulen) == 0)
                mult = s_duration_units[i].mult;
        if (ulen == 0)
            return s_unit_err(err, errlen, "duration", text, "missing unit (use %s)",
                              S_DURATION_UNITS);
        if (mult == 0)
            return s_unit_err(err, errlen, "duration", text, "unknown unit \"%.*s\" (use %s)",
                              (int)(ulen > 8 ? 8 : ulen), p, S_DURATION_UNITS);
        if (v > UINT64_MAX / mult || total > UINT64_MAX - v * mult)
            return s_unit_err(err, errlen, "duration", text, "overflows 64 bits");
        total += v * mult;
        p += ulen;
    }
    *out = total;
    return 0;
}
