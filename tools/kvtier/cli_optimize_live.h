/* cli_optimize_live.h — `kvtier optimize --subscribe`: the optimizer over a bounded
 * window of the live event stream (cli_optimize_live.c). */
#ifndef KVT_CLI_OPTIMIZE_LIVE_H
#define KVT_CLI_OPTIMIZE_LIVE_H

#include <stdint.h>

#include "cli_common.h"

#define CLI_LIVE_DEFAULT_WINDOW (1u << 20) /* block references */
#define CLI_LIVE_MAX_WINDOW (1u << 26)
#define CLI_LIVE_DEFAULT_EVERY_MS 10000u

typedef struct {
    const char *endpoint; /* NULL: the leader's, from cluster info */
    const char *instance; /* NULL: every instance */
    uint64_t capacity;    /* of the figures; 0: all tiers' slots, from cluster info */
    uint64_t window_refs; /* the last lookups holding at most this many references */
    uint64_t every_ms;    /* a figure line this often */
    uint64_t for_ms;      /* 0: until SIGINT / SIGTERM */
    uint32_t tokens_per_block;
    bool publish;         /* write each figure to etcd (/kvtier/<cluster>/optimizer) */
} cli_live_args_t;

#define CLI_LIVE_CURVE_POINTS 64u /* points of the published curve (the page's is <= 256) */

/* Subscribes and prints a line every every_ms, and one at the end. Exit status. */
int cli_optimize_live(cli_common_t *o, const cli_live_args_t *a);

#endif
