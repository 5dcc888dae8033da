/* cli_trace.h — the replay workload's data: a trace in the format of traces/README.md
 * loaded into memory, the block keys derived from its ids, and block bytes derived
 * from a key (so every block loaded back can be checked byte for byte).
 *
 * Owns: the loaded trace (one allocation per load, none afterwards). Never talks to
 * the service; never asserts on file contents (a bad line is an error naming it). */
#ifndef KVT_CLI_TRACE_H
#define KVT_CLI_TRACE_H

#include "kvtier.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds on what a trace may hold; a file over them is rejected with the line. */
#define CLI_TRACE_MAX_LINE (1u << 20)     /* bytes per line */
#define CLI_TRACE_MAX_REQUESTS (1u << 22) /* lines with a request */
#define CLI_TRACE_MAX_BLOCKS KVT_MAX_KEYS /* hash_ids per request */

typedef struct cli_trace cli_trace_t;

/* Reads every request of PATH (blank lines are skipped). NULL on failure with
 * "trace.jsonl:12: hash_ids[3]: expected a non-negative integer" in ERR. */
cli_trace_t *cli_trace_load(const char *path, char *err, size_t errlen);
/* Frees and nulls *T; idempotent. */
void cli_trace_destroy(cli_trace_t **t);

size_t cli_trace_requests(const cli_trace_t *t);
/* Most hash_ids in one request / in all requests together. */
size_t cli_trace_max_blocks(const cli_trace_t *t);
size_t cli_trace_total_blocks(const cli_trace_t *t);
/* Request I's hash_ids (owned by T) and their count in *N; NULL when I is out of range. */
const uint64_t *cli_trace_ids(const cli_trace_t *t, size_t i, size_t *n);

/* Block keys of a request: key[-1] = 16 zero bytes,
 * key[i] = XXH3_128(key[i-1] || u64 little-endian ids[i]), in canonical big-endian
 * byte order (XXH128_canonical_t). Equal id prefixes give equal key prefixes. */
void cli_trace_chain_keys(const uint64_t *ids, size_t n, kvt_key_t *out);

/* The bytes of the block with KEY: a splitmix64 stream seeded from the key. */
void cli_block_fill(const kvt_key_t *key, void *buf, size_t len);
/* True when BUF holds exactly the bytes cli_block_fill writes for KEY. */
bool cli_block_verify(const kvt_key_t *key, const void *buf, size_t len);

/* 32 hex digits (either case) to a key; 0 or -KVT_INVALID_ARGUMENT. */
int cli_key_parse_hex(const char *hex, kvt_key_t *out);
/* 32 lower-case hex digits and a NUL into OUT. */
void cli_key_format_hex(const kvt_key_t *key, char out[2 * KVT_KEY_BYTES + 1]);

#endif
