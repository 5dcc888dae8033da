/* metrics_expo.c — the exposition writer (see metrics_expo.h). */
#include "metrics_expo.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_DEFAULT_MAX (4u << 20)

void metrics_buf_init(metrics_buf_t *b, size_t max)
{
    memset(b, 0, sizeof *b);
    b->max = max ? max : S_DEFAULT_MAX;
}

void metrics_buf_free(metrics_buf_t *b)
{
    free(b->buf);
    size_t max = b->max;
    memset(b, 0, sizeof *b);
    b->max = max;
}

void metrics_buf_reset(metrics_buf_t *b)
{
    b->len = 0;
    b->overflow = false;
    if (b->buf)
        b->buf[0] = '\0';
}

/* Room for n more bytes and the NUL; false (overflow set) beyond max. */
static bool s_room(metrics_buf_t *b, size_t n)
{
    if (b->overflow)
        return false;
    if (b->len + n + 1 > b->max) {
        b->overflow = true;
        /* cut at the last complete line, so a reader never sees half a sample */
        while (b->len && b->buf[b->len - 1] != '\n')
            b->len--;
        if (b->buf)
            b->buf[b->len] = '\0';
        return false;
    }
    if (b->len + n + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1)
        cap *= 2;
    if (cap > b->max)
        cap = b->max;
    char *nb = realloc(b->buf, cap);
    if (!nb) {
        b->overflow = true;
        return false;
    }
    b->buf = nb;
    b->cap = cap;
    return true;
}

void metrics_buf_append(metrics_buf_t *b, const char *s, size_t n)
{
    if (!s_room(b, n))
        return;
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = '\0';
}

void metrics_buf_puts(metrics_buf_t *b, const char *s)
{
    metrics_buf_append(b, s, strlen(s));
}

void metrics_buf_printf(metrics_buf_t *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        metrics_buf_append(b, small, (size_t)n);
        return;
    }
    if (!s_room(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void metrics_buf_html(metrics_buf_t *b, const char *s)
{
    for (const char *p = s; *p; p++) {
        switch (*p) {
        case '&':
            metrics_buf_puts(b, "&amp;");
            break;
        case '<':
            metrics_buf_puts(b, "&lt;");
            break;
        case '>':
            metrics_buf_puts(b, "&gt;");
            break;
        case '"':
            metrics_buf_puts(b, "&quot;");
            break;
        case '\'':
            metrics_buf_puts(b, "&#39;");
            break;
        default:
            metrics_buf_append(b, p, 1);
        }
    }
}

/* ---- exposition ---- */

static void s_label_value(metrics_buf_t *b, const char *v)
{
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == '\\')
            metrics_buf_puts(b, "\\\\");
        else if (*p == '"')
            metrics_buf_puts(b, "\\\"");
        else if (*p == '\n')
            metrics_buf_puts(b, "\\n");
        else if (*p < 0x20 || *p >= 0x7f)
            metrics_buf_puts(b, "?");
        else
            metrics_buf_append(b, (const char *)p, 1);
    }
}

/* name{a="x",b="y"[,extra="v"]} — extra may be NULL. */
static void s_series(metrics_buf_t *b, const char *name, const char *suffix,
                     const metrics_label_t *labels, size_t n, const char *extra_name,
                     const char *extra_value)
{
    metrics_buf_puts(b, name);
    if (suffix)
        metrics_buf_puts(b, suffix);
    if (n == 0 && !extra_name)
        return;
    metrics_buf_puts(b, "{");
    for (size_t i = 0; i < n; i++) {
        metrics_buf_printf(b, "%s%s=\"", i ? "," : "", labels[i].name);
        s_label_value(b, labels[i].value ? labels[i].value : "");
        metrics_buf_puts(b, "\"");
    }
    if (extra_name) {
        metrics_buf_printf(b, "%s%s=\"", n ? "," : "", extra_name);
        s_label_value(b, extra_value);
        metrics_buf_puts(b, "\"");
    }
    metrics_buf_puts(b, "}");
}

void metrics_expo_family(metrics_buf_t *b, const char *name, const char *type, const char *help)
{
    metrics_buf_printf(b, "# HELP %s ", name);
    for (const char *p = help; *p; p++) {
        if (*p == '\\')
            metrics_buf_puts(b, "\\\\");
        else if (*p == '\n')
            metrics_buf_puts(b, "\\n");
        else
            metrics_buf_append(b, p, 1);
    }
    metrics_buf_printf(b, "\n# TYPE %s %s\n", name, type);
}

void metrics_expo_u64(metrics_buf_t *b, const char *name, const metrics_label_t *labels, size_t n,
                      uint64_t v)
{
    s_series(b, name, NULL, labels, n, NULL, NULL);
    metrics_buf_printf(b, " %llu\n", (unsigned long long)v);
}

static void s_double(metrics_buf_t *b, double v)
{
    if (isnan(v))
        metrics_buf_puts(b, "NaN");
    else if (isinf(v))
        metrics_buf_puts(b, v > 0 ? "+Inf" : "-Inf");
    else {
        /* the shortest of %.15g .. %.17g that reads back as v (0.21, not 0.20999..) */
        char t[40];
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(t, sizeof t, "%.*g", prec, v);
            if (strtod(t, NULL) == v)
                break;
        }
        metrics_buf_puts(b, t);
    }
}

void metrics_expo_double(metrics_buf_t *b, const char *name, const metrics_label_t *labels,
                         size_t n, double v)
{
    s_series(b, name, NULL, labels, n, NULL, NULL);
    metrics_buf_puts(b, " ");
    s_double(b, v);
    metrics_buf_puts(b, "\n");
}

void metrics_expo_histogram(metrics_buf_t *b, const char *name, const metrics_label_t *labels,
                            size_t n, const double *bounds, const uint64_t *buckets,
                            size_t n_bounds, double sum)
{
    uint64_t cum = 0;
    char le[40];
    for (size_t i = 0; i <= n_bounds; i++) {
        cum += buckets[i];
        if (i < n_bounds)
            snprintf(le, sizeof le, "%.15g", bounds[i]);
        else
            snprintf(le, sizeof le, "+Inf");
        s_series(b, name, "_bucket", labels, n, "le", le);
        metrics_buf_printf(b, " %llu\n", (unsigned long long)cum);
    }
    s_series(b, name, "_sum", labels, n, NULL, NULL);
    metrics_buf_puts(b, " ");
    s_double(b, sum);
    metrics_buf_puts(b, "\n");
    s_series(b, name, "_count", labels, n, NULL, NULL);
    metrics_buf_printf(b, " %llu\n", (unsigned long long)cum);
}

/* ---- bounded label values ---- */

void metrics_labelset_init(metrics_labelset_t *s, uint32_t max)
{
    memset(s, 0, sizeof *s);
    s->max = max < 1 ? 1 : max > METRICS_LABELSET_MAX ? METRICS_LABELSET_MAX : max;
}

uint32_t metrics_labelset_index(metrics_labelset_t *s, const char *v)
{
    for (uint32_t i = 0; i < s->n; i++)
        if (strcmp(s->values[i], v) == 0)
            return i;
    if (s->n >= s->max || strlen(v) >= METRICS_LABEL_VALUE_MAX)
        return METRICS_LABEL_OTHER;
    snprintf(s->values[s->n], sizeof s->values[0], "%s", v);
    return s->n++;
}
