/* metrics_page.c — the status page and the optimizer record (see metrics_page.h). */
#include "metrics_page.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

/* ---- the optimizer record ---- */

static int s_bad(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int s_bad(char *why, size_t len, const char *fmt, ...)
{
    if (why && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static int s_uint(json_t *o, const char *k, uint64_t *out, char *why, size_t wl)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return s_bad(why, wl, "%s: expected an integer >= 0", k);
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int s_rate(json_t *v, const char *k, double *out, char *why, size_t wl)
{
    if (!json_is_number(v))
        return s_bad(why, wl, "%s: expected a number", k);
    double d = json_number_value(v);
    if (!(d >= 0.0 && d <= 1.0))
        return s_bad(why, wl, "%s: hit rate %g outside 0..1", k, d);
    *out = d;
    return 0;
}

static int s_curve(json_t *o, metrics_opt_t *out, char *why, size_t wl)
{
    json_t *c = json_object_get(o, "curve");
    if (!c)
        return 0;
    if (!json_is_array(c))
        return s_bad(why, wl, "%s: expected an array", "curve");
    if (json_array_size(c) > METRICS_OPT_CURVE_MAX)
        return s_bad(why, wl, "%s: more than 256 points", "curve");
    for (size_t i = 0; i < json_array_size(c); i++) {
        json_t *p = json_array_get(c, i);
        char path[32];
        snprintf(path, sizeof path, "curve[%zu]", i);
        if (!json_is_array(p) || json_array_size(p) != 2 ||
            !json_is_integer(json_array_get(p, 0)) || json_integer_value(json_array_get(p, 0)) < 0)
            return s_bad(why, wl, "%s: expected [capacity_blocks, hit_rate]", path);
        out->curve_cap[i] = (uint64_t)json_integer_value(json_array_get(p, 0));
        if (s_rate(json_array_get(p, 1), path, &out->curve_rate[i], why, wl) < 0)
            return -EINVAL;
        out->n_curve = (uint32_t)i + 1;
    }
    return 0;
}

int metrics_opt_parse(const char *json, size_t len, metrics_opt_t *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    if (len > METRICS_OPT_MAX_BYTES)
        return s_bad(why, whylen, "%s: larger than 64 KiB", "record");
    json_error_t jerr;
    json_t *o = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        return s_bad(why, whylen, "%s: not a JSON object", "record");
    }
    uint64_t ts = 0;
    int rc = s_uint(o, "ts_ms", &ts, why, whylen);
    out->ts_ms = (int64_t)(ts & INT64_MAX);
    if (rc == 0)
        rc = s_uint(o, "window_requests", &out->window_requests, why, whylen);
    if (rc == 0)
        rc = s_uint(o, "capacity_blocks", &out->capacity_blocks, why, whylen);
    if (rc == 0)
        rc = s_rate(json_object_get(o, "live_hit_rate"), "live_hit_rate", &out->live, why, whylen);
    if (rc == 0)
        rc = s_rate(json_object_get(o, "lru_hit_rate"), "lru_hit_rate", &out->lru, why, whylen);
    if (rc == 0)
        rc = s_rate(json_object_get(o, "belady_hit_rate"), "belady_hit_rate", &out->belady, why,
                    whylen);
    if (rc == 0)
        rc = s_curve(o, out, why, whylen);
    json_decref(o);
    return rc;
}

/* ---- the page ---- */

#define S_W 560 /* chart size (SVG user units) */
#define S_H 200
#define S_PAD 36

static const char s_style[] =
    "body{font-family:system-ui,sans-serif;margin:24px;color:#1d2733;background:#f6f7f9}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:22px 0 8px}"
    ".sub{color:#5a6675;margin-bottom:14px}"
    "table{border-collapse:collapse;background:#fff}"
    "td,th{padding:6px 12px;border-bottom:1px solid #e2e6ea;text-align:left}"
    ".bar{width:180px;height:12px;background:#e2e6ea;border-radius:6px;overflow:hidden}"
    ".bar div{height:12px;background:#2f7dd1}"
    ".down{color:#b3261e;font-weight:600}.up{color:#1b7f3b}"
    "svg{background:#fff;border:1px solid #e2e6ea}"
    ".note{color:#5a6675;font-size:13px}";

static void s_head(metrics_buf_t *b, const metrics_page_t *p)
{
    metrics_buf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    if (p->refresh_s)
        metrics_buf_printf(b, "<meta http-equiv=\"refresh\" content=\"%u\">", p->refresh_s);
    metrics_buf_puts(b, "<title>kvtier ");
    metrics_buf_html(b, p->cluster);
    metrics_buf_printf(b, "</title><style>%s</style></head><body>\n<h1>kvtier cluster ", s_style);
    metrics_buf_html(b, p->cluster);
    metrics_buf_puts(b, "</h1>\n<div class=\"sub\" id=\"role\">coordinator ");
    metrics_buf_html(b, p->name);
    if (p->leader)
        metrics_buf_printf(b, ": <b>leader</b>, epoch %" PRIu64, p->epoch);
    else if (p->epoch) {
        metrics_buf_printf(b, ": standby; leader epoch %" PRIu64 " at ", p->epoch);
        metrics_buf_html(b, p->leader_ep ? p->leader_ep : "?");
    } else
        metrics_buf_puts(b, ": standby; no leader known");
    if (p->have_stats && p->lookup_keys)
        metrics_buf_printf(b,
                           " &middot; %" PRIu64 " lookups, hit rate <b id=\"hitrate\">%.1f%%</b> "
                           "(%" PRIu64 " of %" PRIu64 " looked-up blocks)",
                           p->lookups, 100.0 * (double)p->hits / (double)p->lookup_keys, p->hits,
                           p->lookup_keys);
    metrics_buf_puts(b, "</div>\n");
}

static void s_tiers(metrics_buf_t *b, const metrics_page_t *p)
{
    metrics_buf_puts(b, "<h2>Tiers</h2>\n<table id=\"tiers\"><tr><th>tier</th><th>kind</th>"
                        "<th>state</th><th>fill</th><th></th><th>hits</th></tr>\n");
    if (!p->n_tiers)
        metrics_buf_puts(b, "<tr><td colspan=\"6\">no tier known yet</td></tr>\n");
    for (uint32_t i = 0; i < p->n_tiers; i++) {
        const metrics_page_tier_t *t = &p->tiers[i];
        double pct = t->capacity ? 100.0 * (double)t->used / (double)t->capacity : 0.0;
        metrics_buf_puts(b, "<tr class=\"tier\" data-tier=\"");
        metrics_buf_html(b, t->name);
        metrics_buf_puts(b, "\"><td class=\"name\">");
        metrics_buf_html(b, t->name);
        metrics_buf_puts(b, "</td><td>");
        metrics_buf_html(b, t->kind);
        if (t->pool[0]) { /* a pool's member (docs/OPERATIONS.md "Pools") */
            metrics_buf_puts(b, ", member of pool <span class=\"pool\">");
            metrics_buf_html(b, t->pool);
            metrics_buf_puts(b, "</span>");
        }
        metrics_buf_printf(b, "</td><td class=\"%s\">%s</td>", t->up ? "up" : "down",
                           t->up ? "up" : "DOWN");
        metrics_buf_printf(b,
                           "<td class=\"fill\">%" PRIu64 " / %" PRIu64 " slots (%.1f%%)</td>"
                           "<td><div class=\"bar\"><div style=\"width:%.1f%%\"></div></div></td>"
                           "<td>%" PRIu64 "</td></tr>\n",
                           t->used, t->capacity, pct, pct > 100 ? 100.0 : pct, t->hits);
    }
    metrics_buf_puts(b, "</table>\n");
}

/* The chart's frame: axes, y grid 0..100 %, an x label. */
static void s_frame(metrics_buf_t *b, const char *id, const char *xlabel)
{
    metrics_buf_printf(b,
                       "<svg id=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                       "height=\"%d\" viewBox=\"0 0 %d %d\">",
                       id, S_W + 2 * S_PAD, S_H + 2 * S_PAD, S_W + 2 * S_PAD, S_H + 2 * S_PAD);
    for (int k = 0; k <= 4; k++) {
        int y = S_PAD + S_H - k * S_H / 4;
        metrics_buf_printf(b,
                           "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#e2e6ea\"/>"
                           "<text x=\"4\" y=\"%d\" font-size=\"11\" fill=\"#5a6675\">%d%%</text>",
                           S_PAD, y, S_PAD + S_W, y, y + 4, k * 25);
    }
    metrics_buf_printf(b,
                       "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#5a6675\"/>"
                       "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#5a6675\">",
                       S_PAD, S_PAD + S_H, S_PAD + S_W, S_PAD + S_H, S_PAD + S_W / 2 - 60,
                       S_PAD + S_H + 28);
    metrics_buf_html(b, xlabel);
    metrics_buf_puts(b, "</text>");
}

static double s_y(double rate)
{
    return S_PAD + S_H - rate * S_H;
}

static void s_history(metrics_buf_t *b, const metrics_page_t *p)
{
    metrics_buf_printf(b,
                       "<h2>Hit rate over time</h2>\n<div class=\"note\">one point per %u s "
                       "(hit keys / looked-up keys in the interval), the last %u intervals"
                       "</div>\n",
                       p->sample_ms / 1000 ? p->sample_ms / 1000 : 1, p->n_points);
    s_frame(b, "history", "time (oldest left, now right)");
    uint32_t valid = 0;
    metrics_buf_puts(b, "<polyline id=\"history-line\" fill=\"none\" stroke=\"#2f7dd1\" "
                        "stroke-width=\"2\" points=\"");
    for (uint32_t i = 0; i < p->n_points; i++) {
        if (!p->points[i].valid)
            continue;
        double x = S_PAD + (p->n_points > 1 ? (double)i * S_W / (p->n_points - 1) : S_W);
        metrics_buf_printf(b, "%.1f,%.1f ", x, s_y(p->points[i].rate));
        valid++;
    }
    metrics_buf_puts(b, "\"/>");
    if (!valid)
        metrics_buf_printf(b,
                           "<text x=\"%d\" y=\"%d\" font-size=\"14\" fill=\"#5a6675\">no lookups "
                           "in these intervals</text>",
                           S_PAD + 20, S_PAD + S_H / 2);
    metrics_buf_puts(b, "</svg>\n");
}

static void s_optimizer(metrics_buf_t *b, const metrics_page_t *p)
{
    metrics_buf_puts(b, "<h2>Hit rate vs capacity (optimizer)</h2>\n");
    const metrics_opt_t *o = p->opt;
    if (!o) {
        metrics_buf_puts(b, "<div id=\"optimizer\" class=\"note\">no optimizer figures yet "
                            "(run <code>kvtier optimize --live</code>)</div>\n");
        return;
    }
    metrics_buf_printf(b,
                       "<div id=\"optimizer\" class=\"note\">retrospective, over the last "
                       "%" PRIu64 " requests at %" PRIu64 " blocks: live <b>%.1f%%</b>, LRU "
                       "%.1f%%, Belady %.1f%% (%.0f s old)</div>\n",
                       o->window_requests, o->capacity_blocks, 100 * o->live, 100 * o->lru,
                       100 * o->belady,
                       p->now_ms > o->ts_ms ? (double)(p->now_ms - o->ts_ms) / 1000.0 : 0.0);
    uint64_t xmax = o->capacity_blocks;
    for (uint32_t i = 0; i < o->n_curve; i++)
        if (o->curve_cap[i] > xmax)
            xmax = o->curve_cap[i];
    if (!xmax)
        xmax = 1;
    s_frame(b, "curve", "capacity (blocks)");
    metrics_buf_puts(b, "<polyline fill=\"none\" stroke=\"#1b7f3b\" stroke-width=\"2\" points=\"");
    for (uint32_t i = 0; i < o->n_curve; i++)
        metrics_buf_printf(b, "%.1f,%.1f ", S_PAD + (double)o->curve_cap[i] * S_W / (double)xmax,
                           s_y(o->curve_rate[i]));
    metrics_buf_puts(b, "\"/>");
    double cx = S_PAD + (double)o->capacity_blocks * S_W / (double)xmax;
    metrics_buf_printf(b,
                       "<line id=\"capacity\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                       "stroke=\"#b3261e\" stroke-dasharray=\"4 3\"/>"
                       "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" fill=\"#b3261e\">capacity "
                       "%" PRIu64 "</text>"
                       "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#2f7dd1\"/>"
                       "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#8a4fd1\"/>",
                       cx, S_PAD, cx, S_PAD + S_H, cx + 4, S_PAD + 12, o->capacity_blocks, cx,
                       s_y(o->live), cx, s_y(o->belady));
    metrics_buf_puts(b, "</svg>\n<div class=\"note\">green: LRU at every capacity; red line: "
                        "the current capacity; blue dot: live; purple dot: Belady</div>\n");
}

void metrics_page_render(metrics_buf_t *b, const metrics_page_t *p)
{
    s_head(b, p);
    s_tiers(b, p);
    s_history(b, p);
    s_optimizer(b, p);
    time_t now = (time_t)(p->now_ms / 1000);
    struct tm tm;
    char when[32] = "";
    if (gmtime_r(&now, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    metrics_buf_printf(b,
                       "<p class=\"note\">rendered %s; metrics at <a href=\"/metrics\">/metrics"
                       "</a>, targets at <a href=\"/sd\">/sd</a></p>\n</body></html>\n",
                       when);
}
