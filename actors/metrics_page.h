/* metrics_page.h — the coordinator's status page (issue 10 §3) and the optimizer's
 * figures it shows: one self-contained HTML document (inline CSS and SVG, no
 * external asset, no script needed to see the data: everything is in the DOM as
 * served), and the parser of the optimizer's JSON record
 * (/kvtier/<cluster>/optimizer, written by `kvtier optimize --live`).
 *
 * Owns only the rendering and the validation; it reads nothing by itself. Every
 * string put into the page is HTML-escaped. */
#ifndef KVT_METRICS_PAGE_H
#define KVT_METRICS_PAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "metrics_expo.h"

#define METRICS_OPT_MAX_BYTES (64u << 10) /* the optimizer record, at most */
#define METRICS_OPT_CURVE_MAX 256         /* curve points, at most */

/* {"ts_ms":N,"window_requests":N,"capacity_blocks":N,"live_hit_rate":F,
 *  "lru_hit_rate":F,"belady_hit_rate":F,"curve":[[capacity_blocks,hit_rate],...]} */
typedef struct {
    int64_t ts_ms;
    uint64_t window_requests, capacity_blocks;
    double live, lru, belady; /* 0..1 */
    uint32_t n_curve;
    uint64_t curve_cap[METRICS_OPT_CURVE_MAX];
    double curve_rate[METRICS_OPT_CURVE_MAX];
} metrics_opt_t;

/* Validates and reads one record. 0, or -EINVAL with why naming the field ("curve[3]:
 * hit rate 1.5 outside 0..1"); *out is meaningful only on success. Unknown fields
 * are ignored (a newer optimizer may add some). */
int metrics_opt_parse(const char *json, size_t len, metrics_opt_t *out, char *why, size_t whylen);

typedef struct {
    char name[64];
    char kind[32];
    bool up;
    uint64_t used, capacity; /* slots */
    uint64_t slot_bytes;
    uint64_t hits; /* looked-up keys found there */
    char pool[32]; /* the pool it is a member of ("": a deployment tier) */
} metrics_page_tier_t;

typedef struct {
    int64_t t_ms; /* wall clock, end of the interval */
    bool valid;   /* keys were looked up in the interval */
    double rate;  /* hit keys / looked-up keys in the interval */
} metrics_page_point_t;

typedef struct {
    const char *cluster, *name; /* this coordinator */
    bool leader;
    uint64_t epoch; /* the leader's epoch, 0: none known */
    const char *leader_ep;
    bool have_stats;                     /* the scheduler answered lately */
    uint64_t lookups, lookup_keys, hits; /* cumulative (the leader's counters) */
    const metrics_page_tier_t *tiers;
    uint32_t n_tiers;
    const metrics_page_point_t *points; /* oldest first */
    uint32_t n_points;
    uint32_t sample_ms;
    const metrics_opt_t *opt; /* NULL: no optimizer figures yet */
    int64_t now_ms;
    uint32_t refresh_s; /* the page reloads itself (a meta refresh; 0: never) */
} metrics_page_t;

void metrics_page_render(metrics_buf_t *b, const metrics_page_t *p);

#endif
