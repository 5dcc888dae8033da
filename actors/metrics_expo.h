/* metrics_expo.h — the Prometheus text exposition format 0.0.4 (what /metrics
 * serves): a bounded growable text buffer, metric families (# HELP / # TYPE once
 * each), samples with escaped label values, histograms (cumulative buckets ending
 * with +Inf, _sum, _count), and a bounded set of label values (everything past the
 * bound is "other").
 *
 * Owns nothing but the text it writes; knows no actor, socket or thread. Never
 * writes past its bound: a buffer that would grow beyond `max` stops growing and
 * says so (metrics_buf_t.overflow), so a scrape is cut, never unbounded. */
#ifndef KVT_METRICS_EXPO_H
#define KVT_METRICS_EXPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *buf; /* NUL-terminated; NULL until the first write */
    size_t len, cap, max;
    bool overflow; /* a write did not fit max: the text is cut at a line end */
} metrics_buf_t;

/* An empty buffer of at most max bytes (0: 4 MiB). */
void metrics_buf_init(metrics_buf_t *b, size_t max);
void metrics_buf_free(metrics_buf_t *b);
void metrics_buf_reset(metrics_buf_t *b);
void metrics_buf_append(metrics_buf_t *b, const char *s, size_t n);
void metrics_buf_puts(metrics_buf_t *b, const char *s);
void metrics_buf_printf(metrics_buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* s with &, <, >, " and ' escaped for HTML text and attribute values. */
void metrics_buf_html(metrics_buf_t *b, const char *s);

typedef struct {
    const char *name;  /* [a-zA-Z_][a-zA-Z0-9_]* (not checked: the callers' constants) */
    const char *value; /* any bytes: escaped (\\ \" \n), other control and non-ASCII
                          bytes written as '?', so the value is always valid UTF-8 */
} metrics_label_t;

/* "# HELP name help\n# TYPE name type\n" (type "counter", "gauge", "histogram"). */
void metrics_expo_family(metrics_buf_t *b, const char *name, const char *type, const char *help);
/* name{labels} value (an integer: exact up to 2^64 - 1). */
void metrics_expo_u64(metrics_buf_t *b, const char *name, const metrics_label_t *labels, size_t n,
                      uint64_t v);
/* name{labels} value (a float: %.17g; NaN and infinities as Prometheus spells them). */
void metrics_expo_double(metrics_buf_t *b, const char *name, const metrics_label_t *labels,
                         size_t n, double v);
/* A histogram's samples: name_bucket{labels,le="bound"} for each of n_bounds bounds
 * (ascending, in the unit of sum) and le="+Inf", cumulative from buckets[0..n_bounds]
 * (per bucket, not cumulative; buckets[n_bounds] is above the last bound), then
 * name_sum and name_count (the total of buckets). */
void metrics_expo_histogram(metrics_buf_t *b, const char *name, const metrics_label_t *labels,
                            size_t n, const double *bounds, const uint64_t *buckets,
                            size_t n_bounds, double sum);

/* A bounded set of label values: the first `max` distinct values get their own
 * index (0..max-1, kept for the process's life so a series never changes label);
 * any other value maps to METRICS_LABEL_OTHER ("other"). */
#define METRICS_LABELSET_MAX 64
#define METRICS_LABEL_VALUE_MAX 72
#define METRICS_LABEL_OTHER UINT32_MAX
typedef struct {
    uint32_t max, n;
    char values[METRICS_LABELSET_MAX][METRICS_LABEL_VALUE_MAX];
} metrics_labelset_t;

/* max is clamped to 1..METRICS_LABELSET_MAX. */
void metrics_labelset_init(metrics_labelset_t *s, uint32_t max);
/* v's index, adding it while there is room; METRICS_LABEL_OTHER when full (or v
 * is too long to keep). */
uint32_t metrics_labelset_index(metrics_labelset_t *s, const char *v);

#endif
