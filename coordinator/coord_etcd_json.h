/* coord_etcd_json.h — parsing of etcd JSON-gateway answers, separate from the HTTP
 * transport so it can be tested with crafted (and malformed) answers.
 * Internal to coordinator/ (and its tests); not part of the public API.
 *
 * Rules the gateway imposes: int64 fields come as JSON strings (IDs exceed 2^53,
 * so they are parsed as decimal text, never through a double); fields equal to
 * zero/false/empty are omitted; keys and values are base64. Everything here
 * treats the answer as untrusted: wrong types, bad base64 or numbers out of range
 * are -EBADMSG, never a crash. */
#ifndef KVT_COORD_ETCD_JSON_H
#define KVT_COORD_ETCD_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coord_etcd.h"

/* Growable byte buffer with a hard cap, for decoded keys and values. */
typedef struct {
    uint8_t *buf;
    size_t cap;
    size_t max; /* never grows past this: -EMSGSIZE */
} coord_scratch_t;

int coord_scratch_reserve(coord_scratch_t *s, size_t n);
void coord_scratch_free(coord_scratch_t *s);

/* Strict decimal int64 ("-"? digits, no spaces, no '+', no leading zeros
 * except "0"); -EBADMSG otherwise or on overflow. */
int coord_json_parse_int64(const char *s, size_t n, int64_t *out);

/* obj[name] as int64: a JSON string of decimal digits or a JSON integer; missing
 * or null → 0 (the gateway omits zeros); anything else → -EBADMSG. */
int coord_json_int64(const json_t *obj, const char *name, int64_t *out);
/* obj[name] as bool; missing → false; non-boolean → -EBADMSG. */
int coord_json_bool(const json_t *obj, const char *name, bool *out);

/* Parses a whole answer; it must be a JSON object. -EBADMSG with jansson's
 * reason in err otherwise. */
int coord_json_load(const char *buf, size_t len, json_t **out, char *err, size_t err_cap);

/* The error an answer carries: {"error":"..","code":N} (unary) or
 * {"error":{"grpc_code":N,"message":".."}} (streams). Returns 0 when there is no
 * error member, else the negative code mapped from etcd's gRPC code, with the
 * message copied into msg. */
int coord_json_error(const json_t *root, char *msg, size_t msg_cap);
/* gRPC status code → negative errno (see coord_etcd.h). */
int coord_grpc_to_errno(int64_t grpc_code);

/* Decodes one mvccpb.KeyValue object: key and value into s (key NUL-terminated).
 * kv's pointers refer to s->buf and are valid until the next use of s. */
int coord_json_kv(const json_t *obj, coord_scratch_t *s, coord_etcd_kv_t *kv);

/* {"header":{"revision":".."}} → revision (0 if absent). */
int coord_json_header_revision(const json_t *root, int64_t *rev);

/* LeaseGrantResponse → id and TTL (both required, id > 0). */
int coord_json_lease_grant(const json_t *root, int64_t *id, int64_t *ttl);
/* LeaseKeepAliveResponse, bare or wrapped in "result" (the gateway streams it).
 * A TTL missing or <= 0 means the lease is gone: -ENOENT. */
int coord_json_lease_keepalive(const json_t *root, int64_t *ttl);

/* RangeResponse: calls fn per kv (stops and returns its value if non-zero);
 * count/more/revision are optional. */
int coord_json_range(const json_t *root, coord_scratch_t *s, coord_etcd_kv_fn fn, void *arg,
                     size_t *count, bool *more, int64_t *revision);

/* DeleteRangeResponse → deleted count. */
int coord_json_deleted(const json_t *root, int64_t *deleted);

/* TxnResponse of create_if_absent, whose last response on both branches is a
 * range of the key: *won = succeeded, *kv = the key after the transaction.
 * -EBADMSG when the range is missing or empty (the key must exist either way). */
int coord_json_txn_create(const json_t *root, coord_scratch_t *s, bool *won, coord_etcd_kv_t *kv);

/* One line of the watch stream, {"result":{...}} or {"error":...}. */
typedef struct {
    bool created;
    bool canceled;
    int64_t header_revision;
    int64_t compact_revision;
    char reason[256];     /* cancel_reason or the error message */
    const json_t *events; /* borrowed from the root; NULL when none */
} coord_watch_msg_t;

/* 0 with m filled; a negative mapped code (and m->reason) for an error line;
 * -EBADMSG for a malformed one. */
int coord_json_watch_msg(const json_t *root, coord_watch_msg_t *m);
/* One mvccpb.Event ("type" omitted = PUT). */
int coord_json_event(const json_t *obj, coord_scratch_t *s, coord_etcd_event_t *ev);

/* Splits a byte stream into '\n'-terminated lines held in a bounded buffer. */
typedef struct {
    char *buf;
    size_t len;
    size_t cap; /* a line longer than this (without its '\n') is -EMSGSIZE */
} coord_linebuf_t;

/* line is NUL-terminated at len; return non-zero to stop (returned by feed). */
typedef int (*coord_line_fn)(char *line, size_t len, void *arg);

int coord_linebuf_init(coord_linebuf_t *lb, size_t cap);
void coord_linebuf_free(coord_linebuf_t *lb);
/* Appends data; calls fn for every complete non-empty line (without '\n' or a
 * trailing '\r'). Returns 0, fn's non-zero return, or -EMSGSIZE when a line
 * exceeds cap (the buffer is then unusable until reset). */
int coord_linebuf_feed(coord_linebuf_t *lb, const char *data, size_t n, coord_line_fn fn,
                       void *arg);
/* Delivers a final unterminated line, if any, and empties the buffer. */
int coord_linebuf_flush(coord_linebuf_t *lb, coord_line_fn fn, void *arg);

#endif
