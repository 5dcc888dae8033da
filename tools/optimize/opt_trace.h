/* opt_trace.h — the optimizer's input: requests as lists of dense block ids
 * (0 .. distinct-1, in order of first appearance), read from a Mooncake JSONL trace
 * (traces/README.md) or from an event recording (JSON lines as `kvtier events`
 * prints them; the "lookup" lines are the requests), or built in memory (tests).
 *
 * Owns: the requests, the id map (block key -> dense id) and each block's 16-byte
 * key (a Mooncake id is its little-endian u64 and 8 zero bytes). Grows while
 * loading, never afterwards. Never asserts on file contents: a bad line is an error
 * naming the file, the line and what was wrong. Bounded: at most max_refs block
 * references and OPT_TRACE_MAX_LINE bytes per line (both refused with the reason).
 *
 * Memory: about 4 bytes per block reference plus 48 per distinct block and 24 per
 * request (docs/OPTIMIZER.md has the whole optimizer's figure). */
#ifndef KVT_OPT_TRACE_H
#define KVT_OPT_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OPT_KEY_BYTES 16
#define OPT_TRACE_MAX_LINE (4u << 20)          /* bytes per line */
#define OPT_TRACE_MAX_BLOCKS (1u << 20)        /* block references per request */
#define OPT_TRACE_DEFAULT_MAX_REFS (64u << 20) /* references per trace, by default */
#define OPT_TRACE_LIMIT_MAX_REFS (1ull << 30)  /* the most --max-refs may allow */
#define OPT_TRACE_MAX_INSTANCES 1024u          /* distinct instances of a recording */
#define OPT_DEFAULT_TOKENS_PER_BLOCK 512u      /* the shipped trace's */

typedef enum {
    OPT_FORMAT_AUTO = 0, /* by the first non-blank line: "hash_ids" or "kind" */
    OPT_FORMAT_MOONCAKE = 1,
    OPT_FORMAT_EVENTS = 2,
} opt_format_t;

typedef struct opt_trace opt_trace_t;

typedef struct {
    opt_format_t format;
    uint64_t max_refs;         /* 0: OPT_TRACE_DEFAULT_MAX_REFS */
    uint32_t tokens_per_block; /* tokens of a request without input_length; 0: 512 */
    const char *instance;      /* recordings: only this instance's lookups (NULL: all) */
} opt_load_config_t;

/* Reads PATH. NULL on failure with "trace.jsonl:12: hash_ids[3]: expected a
 * non-negative integer" in ERR. */
opt_trace_t *opt_trace_load(const char *path, const opt_load_config_t *cfg, char *err,
                            size_t errlen);

/* An empty trace to fill with opt_trace_add (tests, generators). NULL: no memory. */
opt_trace_t *opt_trace_new(uint64_t max_refs, uint32_t tokens_per_block);
/* Appends one request of N block keys of instance INST (OPT_KEY_BYTES each, prefix
 * order). TOKENS: its prompt length (0: n x tokens_per_block). OBSERVED_HITS /
 * HEAD_HITS: what the service reported (recordings), or -1 when not known.
 * 0, or -1 with the reason in ERR (over a bound, no memory). */
int opt_trace_add(opt_trace_t *t, uint32_t inst, const uint8_t (*keys)[OPT_KEY_BYTES], size_t n,
                  uint64_t tokens, int64_t observed_hits, int64_t head_hits, char *err,
                  size_t errlen);
/* The same for Mooncake ids (key = little-endian id, 8 zero bytes). */
int opt_trace_add_ids(opt_trace_t *t, const uint64_t *ids, size_t n, uint64_t tokens, char *err,
                      size_t errlen);

/* Frees and nulls *T; idempotent. */
void opt_trace_destroy(opt_trace_t **t);

opt_format_t opt_trace_format(const opt_trace_t *t);
size_t opt_trace_requests(const opt_trace_t *t);
uint64_t opt_trace_refs(const opt_trace_t *t);     /* block references */
uint32_t opt_trace_distinct(const opt_trace_t *t); /* distinct blocks */
uint32_t opt_trace_max_blocks(const opt_trace_t *t);
/* Request I's dense block ids (owned by T) and their count in *N. */
const uint32_t *opt_trace_blocks(const opt_trace_t *t, size_t i, uint32_t *n);
/* Index of request I's first reference (references are stored in request order). */
uint64_t opt_trace_first_ref(const opt_trace_t *t, size_t i);
/* Request I's prompt tokens (input_length, else blocks x tokens_per_block). */
uint64_t opt_trace_tokens(const opt_trace_t *t, size_t i);
uint32_t opt_trace_tokens_per_block(const opt_trace_t *t);
/* Dense block B's key and instance (index into the recording's instances, 0 for a
 * Mooncake trace). */
const uint8_t *opt_trace_key(const opt_trace_t *t, uint32_t b, uint32_t *inst);

/* True when every request carries the service's own hit counts (recordings). */
bool opt_trace_has_observed(const opt_trace_t *t);
/* Request I's reported hits and hits on the head tier of its chain. */
void opt_trace_observed(const opt_trace_t *t, size_t i, uint32_t *hits, uint32_t *head_hits);
/* Lines of a recording that were not lookups (or lookups of another instance than
 * the one asked for), and lookups of a mode other than PREFIX (all skipped). */
uint64_t opt_trace_skipped_events(const opt_trace_t *t);
uint64_t opt_trace_skipped_modes(const opt_trace_t *t);

#endif
