/* bus_config.h — the deployment's JSON configuration (DESIGN.md §10): load it
 * from a file or a string, read typed values, reject bad ones with the full path
 * of the offending key ("tiers[1].capacity: expected a positive integer, got
 * \"12x\"").
 *
 * Owns: the loaded document and the rules for reading it. Never asserts on file
 * content, never reads more than the size limit, never logs (the caller decides
 * what to do with the message). Not thread-safe for writes; concurrent reads of
 * a loaded config are fine.
 *
 * Paths: keys joined by '.', array elements as [N]: "tiers[1].capacity",
 * "etcd.endpoints[0]". A key containing '.', '[' or ']' cannot be named in a
 * path (reach it with bus_config_object_next); in messages such a key is shown
 * as ["key"]. The empty path "" is the node itself; messages call the root
 * "(root)".
 *
 * Nodes: a bus_config_node_t is a cursor (a value in the document plus its full
 * path), filled by the library and copied freely by the caller. Its fields are
 * private. It stays valid while the config lives. Every getter takes a node and
 * a path relative to it, so these two read the same key and fail with the same
 * message:
 *     bus_config_get_u64(bus_config_root(cfg), "tiers[1].capacity", ...)
 *     bus_config_get_u64(&tier, "capacity", ...)   (tier = element 1 of "tiers")
 *
 * Errors: getters return 0, BUS_CONFIG_EMISSING when the key (or an object or
 * element on its path) is absent, or BUS_CONFIG_EINVALID for a wrong type, bad
 * value or bad path; ERR (may be NULL) receives "<path>: <problem>". `bus_config_opt_*`
 * return the default for an absent key and an error for a present but bad one.
 * JSON null is a value of the wrong type, not an absent key.
 */
#ifndef KVT_BUS_CONFIG_H
#define KVT_BUS_CONFIG_H

#include "bus_endpoint.h"
#include "bus_status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BUS_CONFIG_EMISSING (-(int)kvtier_StatusCode_STATUS_NOT_FOUND)
#define BUS_CONFIG_EINVALID (-(int)kvtier_StatusCode_STATUS_INVALID_ARGUMENT)

/* Default and hard limit on a config file or string (bytes). */
#define BUS_CONFIG_MAX_BYTES (1u << 20)
/* Longest path kept in a node (longer ones end in "..." in messages). */
#define BUS_CONFIG_PATH_MAX 256
/* An error buffer of this size never truncates a message with a short path. */
#define BUS_CONFIG_ERR_MAX 512

typedef struct bus_config bus_config_t;

typedef struct {
    void *priv_json; /* private: the json_t value */
    char priv_path[BUS_CONFIG_PATH_MAX];
} bus_config_node_t;

/* --- loading ------------------------------------------------------------ */

/* Loads FILENAME (at most MAX_BYTES, 0 = BUS_CONFIG_MAX_BYTES). The top level
 * must be an object; duplicate keys are rejected. On failure returns NULL and
 * ERR names the file: "x.json: cannot open: No such file or directory",
 * "x.json:3:15: invalid JSON: ...", "x.json: file too large (over 1048576 bytes)". */
bus_config_t *bus_config_load_file(const char *filename, size_t max_bytes, char *err,
                                   size_t errlen);

/* Same rules for TEXT (at most BUS_CONFIG_MAX_BYTES); NAME stands for the file
 * in messages (e.g. "<defaults>"). */
bus_config_t *bus_config_load_string(const char *name, const char *text, char *err, size_t errlen);

/* Frees the config and nulls *CFG_P; idempotent. Nodes taken from it die too. */
void bus_config_destroy(bus_config_t **cfg_p);

/* The file name or NAME given at load, for prefixing messages. */
const char *bus_config_source(const bus_config_t *cfg);

/* The top-level object; owned by CFG. */
const bus_config_node_t *bus_config_root(const bus_config_t *cfg);

/* Fills every key missing from CFG with a copy of the one in DEFAULTS,
 * recursing into objects present in both; arrays and scalars in CFG win.
 * A key that is an object in DEFAULTS but not in CFG is an error naming the
 * path. Returns 0 or BUS_CONFIG_EINVALID (CFG may then be partly filled). */
int bus_config_merge_defaults(bus_config_t *cfg, const bus_config_t *defaults, char *err,
                              size_t errlen);

/* --- nodes -------------------------------------------------------------- */

/* The node's full path ("" for the root). */
const char *bus_config_node_path(const bus_config_node_t *node);

/* True when PATH exists below NODE (any type, null included). */
bool bus_config_has(const bus_config_node_t *node, const char *path);

/* Any value at PATH. */
int bus_config_get_node(const bus_config_node_t *node, const char *path, bus_config_node_t *out,
                        char *err, size_t errlen);

/* An object at PATH with at most MAX_KEYS keys. */
int bus_config_get_object(const bus_config_node_t *node, const char *path, size_t max_keys,
                          bus_config_node_t *out, char *err, size_t errlen);

/* An array at PATH with at most MAX_LEN elements; its length in *LEN. */
int bus_config_get_array(const bus_config_node_t *node, const char *path, size_t max_len,
                         bus_config_node_t *out, size_t *len, char *err, size_t errlen);

/* Element INDEX of ARRAY (a node from bus_config_get_array). */
int bus_config_array_elem(const bus_config_node_t *array, size_t index, bus_config_node_t *out,
                          char *err, size_t errlen);

/* Iterates OBJECT's keys in file order: start with *ITER = NULL; returns true
 * and fills *KEY (owned by the config) and *CHILD while there is a next key,
 * false at the end or when OBJECT is not an object. */
bool bus_config_object_next(const bus_config_node_t *object, void **iter, const char **key,
                            bus_config_node_t *child);

/* The object at PATH has only keys listed in ALLOWED (NULL-terminated). The
 * first other key is an error: "tiers[0].capacty: unknown key (did you mean
 * \"capacity\"?)" or, when nothing is close, "...: unknown key (allowed: a, b)". */
int bus_config_check_keys(const bus_config_node_t *node, const char *path,
                          const char *const *allowed, char *err, size_t errlen);

/* Formats a caller's own rule violation with the full path of PATH below NODE
 * ("reclaimer.low: must be below reclaimer.high"); returns BUS_CONFIG_EINVALID. */
int bus_config_error(const bus_config_node_t *node, const char *path, char *err, size_t errlen,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* --- typed values --------------------------------------------------------- */

/* A string copied into OUT; longer than OUTSZ - 1 bytes is an error. */
int bus_config_get_string(const bus_config_node_t *node, const char *path, char *out, size_t outsz,
                          char *err, size_t errlen);
int bus_config_opt_string(const bus_config_node_t *node, const char *path, const char *dflt,
                          char *out, size_t outsz, char *err, size_t errlen);

/* true or false (no strings, no numbers). */
int bus_config_get_bool(const bus_config_node_t *node, const char *path, bool *out, char *err,
                        size_t errlen);
int bus_config_opt_bool(const bus_config_node_t *node, const char *path, bool dflt, bool *out,
                        char *err, size_t errlen);

/* A JSON integer (not 1.0, not "1") within [MIN, MAX]; pass the type's limits
 * for no range. JSON integers end at INT64_MAX, for uint64 too. */
int bus_config_get_i64(const bus_config_node_t *node, const char *path, int64_t min, int64_t max,
                       int64_t *out, char *err, size_t errlen);
int bus_config_opt_i64(const bus_config_node_t *node, const char *path, int64_t min, int64_t max,
                       int64_t dflt, int64_t *out, char *err, size_t errlen);
int bus_config_get_u64(const bus_config_node_t *node, const char *path, uint64_t min, uint64_t max,
                       uint64_t *out, char *err, size_t errlen);
int bus_config_opt_u64(const bus_config_node_t *node, const char *path, uint64_t min, uint64_t max,
                       uint64_t dflt, uint64_t *out, char *err, size_t errlen);

/* An integer >= 1. */
int bus_config_get_positive(const bus_config_node_t *node, const char *path, uint64_t *out,
                            char *err, size_t errlen);
int bus_config_opt_positive(const bus_config_node_t *node, const char *path, uint64_t dflt,
                            uint64_t *out, char *err, size_t errlen);

/* Any JSON number within [MIN, MAX]. */
int bus_config_get_double(const bus_config_node_t *node, const char *path, double min, double max,
                          double *out, char *err, size_t errlen);
int bus_config_opt_double(const bus_config_node_t *node, const char *path, double min, double max,
                          double dflt, double *out, char *err, size_t errlen);

/* A size in bytes: a JSON integer >= 0, or a string per bus_config_parse_size. */
int bus_config_get_size(const bus_config_node_t *node, const char *path, uint64_t *out, char *err,
                        size_t errlen);
int bus_config_opt_size(const bus_config_node_t *node, const char *path, uint64_t dflt,
                        uint64_t *out, char *err, size_t errlen);

/* A duration in milliseconds: a JSON integer >= 0 (milliseconds), or a string
 * per bus_config_parse_duration_ms. */
int bus_config_get_duration_ms(const bus_config_node_t *node, const char *path, uint64_t *out,
                               char *err, size_t errlen);
int bus_config_opt_duration_ms(const bus_config_node_t *node, const char *path, uint64_t dflt,
                               uint64_t *out, char *err, size_t errlen);

/* A string among NAMES (NULL-terminated); *OUT is its index. The error lists
 * the allowed values: "tiers[0].kind: expected one of "gpu", "host", got "ssd"". */
int bus_config_get_enum(const bus_config_node_t *node, const char *path, const char *const *names,
                        int *out, char *err, size_t errlen);
int bus_config_opt_enum(const bus_config_node_t *node, const char *path, const char *const *names,
                        int dflt, int *out, char *err, size_t errlen);

/* An endpoint string valid for USE (bus_endpoint_check) copied into OUT:
 * "events.endpoint: tcp://127.0.0.1:99999: port out of range 1..65535". */
int bus_config_get_endpoint(const bus_config_node_t *node, const char *path, bus_endpoint_use_t use,
                            char *out, size_t outsz, char *err, size_t errlen);

/* --- unit parsers (also for command-line flags) -------------------------- */

/* "4096", "64MiB", "1 GiB", "10KB": digits, an optional space, an optional unit
 * (case-insensitive): B; KiB MiB GiB TiB (powers of 1024); KB MB GB TB (powers
 * of 1000). Rejects signs, fractions, other units and results over UINT64_MAX.
 * ERR gets the problem without a path. */
int bus_config_parse_size(const char *text, uint64_t *out, char *err, size_t errlen);

/* "500ms", "30s", "2m", "1h", "1m30s": one or more <digits><unit> with unit ms,
 * s, m or h; a bare number, a sign, a fraction or a result over UINT64_MAX
 * milliseconds is rejected. */
int bus_config_parse_duration_ms(const char *text, uint64_t *out, char *err, size_t errlen);

#endif
