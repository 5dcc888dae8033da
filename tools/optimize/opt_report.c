/* opt_report.c — running the figures of one report and writing its outputs. */
#include "opt_report.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "opt_arc.h"
#include "opt_belady.h"
#include "tier_policy.h"

static const uint64_t s_default_caps[] = {100, 300, 1000, 3000, 10000, 30000, 100000};

void opt_run_defaults(opt_run_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    opt_ttft_defaults(&cfg->ttft);
}

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int s_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The table's capacities: the chosen ones (or the defaults) below the distinct
 * count, the deployment's point, then the unbounded row. */
static void s_rows(opt_report_t *rep, const opt_run_config_t *cfg)
{
    uint32_t distinct = opt_trace_distinct(rep->t);
    uint64_t caps[OPT_MAX_CAPACITIES + 1];
    size_t n = 0;
    const uint64_t *src = cfg->n_capacities ? cfg->capacities : s_default_caps;
    size_t nsrc =
        cfg->n_capacities ? cfg->n_capacities : sizeof s_default_caps / sizeof s_default_caps[0];
    for (size_t i = 0; i < nsrc; i++)
        if (src[i] >= 1 && src[i] < distinct)
            caps[n++] = src[i];
    if (cfg->point >= 1 && cfg->point < distinct)
        caps[n++] = cfg->point;
    qsort(caps, n, sizeof *caps, s_cmp_u64);
    rep->n_rows = 0;
    rep->point_row = -1;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && caps[i] == caps[i - 1])
            continue;
        if (caps[i] == cfg->point)
            rep->point_row = (int)rep->n_rows;
        rep->rows[rep->n_rows++] = (opt_row_t){.capacity = caps[i]};
    }
    if (cfg->point >= distinct)
        rep->point_row = (int)rep->n_rows;
    rep->rows[rep->n_rows++] = (opt_row_t){.capacity = distinct ? distinct : 1, .unbounded = true};
}

static int s_run_rows(opt_report_t *rep, char *err, size_t errlen)
{
    double t0 = s_now();
    opt_belady_t *bel = rep->no_belady ? NULL : opt_belady_new(rep->t);
    if (!rep->no_belady && !bel)
        goto out_nomem;
    for (size_t i = 0; i < rep->n_rows; i++) {
        opt_row_t *row = &rep->rows[i];
        row->lru = opt_curve_hits(rep->curve, row->capacity);
        row->belady = bel ? opt_belady_run(bel, row->capacity, NULL) : -1;
        if (bel && row->belady < 0)
            goto out_nomem;
    }
    opt_belady_destroy(&bel);
    double t1 = s_now();
    rep->secs_belady = t1 - t0;
    for (size_t i = 0; i < rep->n_rows; i++) {
        opt_row_t *row = &rep->rows[i];
        row->arc = rep->no_arc ? -1 : opt_arc_run(rep->t, row->capacity, NULL);
        if (!rep->no_arc && row->arc < 0)
            goto out_nomem;
    }
    double t2 = s_now();
    rep->secs_arc = t2 - t1;
    for (size_t i = 0; i < rep->n_rows; i++)
        for (size_t p = 0; p < OPT_MAX_POLICIES; p++) {
            opt_row_t *row = &rep->rows[i];
            row->policy[p] = -1;
            if (p < rep->n_policies && (row->policy[p] = opt_replay_policy(
                                            rep->t, rep->policies[p], row->capacity, NULL)) < 0) {
                snprintf(err, errlen, "policy %s at %llu blocks: the slot engine refused",
                         rep->policies[p], (unsigned long long)row->capacity);
                return -1;
            }
        }
    rep->secs_policies = s_now() - t2;
    return 0;
out_nomem:
    opt_belady_destroy(&bel);
    snprintf(err, errlen, "out of memory");
    return -1;
}

static void s_ttft_row(opt_report_t *rep, const uint32_t *hits2, const char *label)
{
    if (rep->n_ttft == OPT_MAX_TTFT_ROWS)
        return;
    opt_ttft_row_t *row = &rep->ttft[rep->n_ttft];
    snprintf(row->label, sizeof row->label, "%s", label);
    row->hits[0] = row->hits[1] = 0;
    for (size_t r = 0; r < opt_trace_requests(rep->t); r++) {
        row->hits[0] += hits2[2 * r];
        row->hits[1] += hits2[2 * r + 1];
    }
    if (opt_ttft_run(rep->t, &rep->model, hits2, &row->r) == 0)
        rep->n_ttft++;
}

/* The chain, the service's own figures and the TTFT rows: per-request hits each. */
static int s_run_per_request(opt_report_t *rep, const opt_run_config_t *cfg, char *err,
                             size_t errlen)
{
    size_t n = opt_trace_requests(rep->t);
    uint32_t *one = calloc(n ? n : 1, sizeof *one);
    uint32_t *hits2 = calloc(2 * (n ? n : 1), sizeof *hits2);
    char label[96];
    int rc = -1;
    if (!one || !hits2) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    const opt_row_t *at =
        &rep->rows[rep->point_row >= 0 ? (size_t)rep->point_row : rep->n_rows - 1];
    double t0 = s_now();
    if (opt_lru_request_hits(rep->t, at->capacity, one) < 0) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    for (size_t r = 0; r < n; r++) {
        hits2[2 * r] = one[r];
        hits2[2 * r + 1] = 0;
    }
    if (at->unbounded)
        snprintf(label, sizeof label, "lru, unbounded, on host");
    else
        snprintf(label, sizeof label, "lru, %llu blocks on host", (unsigned long long)at->capacity);
    s_ttft_row(rep, hits2, label);
    if (cfg->chain) {
        double c0 = s_now();
        if (opt_replay_chain(rep->t, &rep->chain_cfg, &rep->chain, hits2) < 0) {
            snprintf(err, errlen, "chain replay failed (policy or memory)");
            goto out;
        }
        rep->secs_chain = s_now() - c0;
        rep->has_chain = true;
        snprintf(label, sizeof label, "chain host %llu -> nvme %llu",
                 (unsigned long long)rep->chain_cfg.capacity[0],
                 (unsigned long long)rep->chain_cfg.capacity[1]);
        s_ttft_row(rep, hits2, label);
    }
    if (opt_trace_has_observed(rep->t)) {
        rep->has_observed = true;
        for (size_t r = 0; r < n; r++) {
            uint32_t h, head;
            opt_trace_observed(rep->t, r, &h, &head);
            hits2[2 * r] = head;
            hits2[2 * r + 1] = h - head;
            rep->observed_hits += h;
            rep->observed_head += head;
        }
        s_ttft_row(rep, hits2, "the service (recording): head at host, rest at nvme speed");
    }
    rep->secs_ttft = s_now() - t0 - rep->secs_chain;
    rc = 0;
out:
    free(one);
    free(hits2);
    return rc;
}

int opt_report_run(const opt_trace_t *t, const char *input, const opt_run_config_t *cfg,
                   opt_report_t *rep, char *err, size_t errlen)
{
    memset(rep, 0, sizeof *rep);
    rep->t = t;
    rep->input = input;
    rep->model = cfg->ttft;
    rep->no_belady = cfg->no_belady;
    rep->no_arc = cfg->no_arc;
    rep->no_policies = cfg->no_policies;
    rep->chain_cfg = cfg->chain_cfg;
    for (int l = 0; l < 2; l++)
        if (!rep->chain_cfg.policy[l])
            rep->chain_cfg.policy[l] = "lru";
    for (size_t i = 0; !cfg->no_policies && i < tier_policy_count() && i < OPT_MAX_POLICIES; i++)
        rep->policies[rep->n_policies++] = tier_policy_at(i)->name;
    double t0 = s_now();
    rep->curve = opt_curve_new(t);
    if (!rep->curve) {
        snprintf(err, errlen, "out of memory computing the LRU curve");
        return -1;
    }
    rep->secs_curve = s_now() - t0;
    s_rows(rep, cfg);
    if (s_run_rows(rep, err, errlen) < 0 || s_run_per_request(rep, cfg, err, errlen) < 0) {
        opt_report_fini(rep);
        return -1;
    }
    return 0;
}

void opt_report_fini(opt_report_t *rep)
{
    opt_curve_destroy(&rep->curve);
}

/* ---- table ---- */

static double s_pct(uint64_t hits, uint64_t refs)
{
    return refs ? 100.0 * (double)hits / (double)refs : 0.0;
}

static void s_cell(FILE *out, int64_t hits, uint64_t refs)
{
    if (hits < 0)
        fprintf(out, " %9s", "-");
    else
        fprintf(out, " %8.2f%%", s_pct((uint64_t)hits, refs));
}

static void s_table_rows(const opt_report_t *rep, FILE *out)
{
    uint64_t refs = opt_trace_refs(rep->t);
    fprintf(out, "\n%-12s %9s %9s %9s", "capacity", "lru", "belady*", "arc");
    for (size_t p = 0; p < rep->n_policies; p++)
        fprintf(out, " %9.9s", rep->policies[p]);
    fprintf(out, "\n%-12s %9s %9s %9s", "(blocks)", "(exact)", "", "");
    for (size_t p = 0; p < rep->n_policies; p++)
        fprintf(out, " %9s", "(slots)");
    fputc('\n', out);
    for (size_t i = 0; i < rep->n_rows; i++) {
        const opt_row_t *row = &rep->rows[i];
        char cap[32];
        if (row->unbounded)
            snprintf(cap, sizeof cap, "unbounded");
        else
            snprintf(cap, sizeof cap, "%llu", (unsigned long long)row->capacity);
        fprintf(out, "%-10s%s", cap, (int)i == rep->point_row ? " <" : "  ");
        s_cell(out, (int64_t)row->lru, refs);
        s_cell(out, row->belady, refs);
        s_cell(out, row->arc, refs);
        for (size_t p = 0; p < rep->n_policies; p++)
            s_cell(out, row->policy[p], refs);
        fputc('\n', out);
    }
    fprintf(out,
            "(hit rate: block hits / block references. lru: exact prefix-hit LRU, one pass; "
            "belady*: the Belady reference, an OPT heuristic and not a bound "
            "(docs/OPTIMIZER.md); arc: offline ARC; the rest: the slot engine's "
            "policies replayed through tiers/%s)\n",
            rep->point_row >= 0 ? "; <: the deployment's capacity" : "");
}

static void s_table_extra(const opt_report_t *rep, FILE *out)
{
    uint64_t refs = opt_trace_refs(rep->t);
    if (rep->has_chain) {
        const opt_chain_result_t *c = &rep->chain;
        fprintf(out,
                "\nchain host %llu (%s) -> nvme %llu (%s), %s: hit rate %.1f%% (host %.1f%%, "
                "nvme %.1f%%); %llu promoted, %llu demoted, %llu dropped from nvme\n",
                (unsigned long long)rep->chain_cfg.capacity[0], rep->chain_cfg.policy[0],
                (unsigned long long)rep->chain_cfg.capacity[1], rep->chain_cfg.policy[1],
                rep->chain_cfg.inclusive ? "inclusive" : "exclusive",
                s_pct(c->hits[0] + c->hits[1], refs), s_pct(c->hits[0], refs),
                s_pct(c->hits[1], refs), (unsigned long long)c->promoted,
                (unsigned long long)c->demoted, (unsigned long long)c->dropped);
    }
    if (rep->has_observed)
        fprintf(out, "\nthe service (recording): hit rate %.1f%% (head tier %.1f%%)\n",
                s_pct(rep->observed_hits, refs), s_pct(rep->observed_head, refs));
    const opt_ttft_model_t *m = &rep->model;
    double bb = opt_ttft_block_bytes(m, rep->t);
    fprintf(out,
            "\nTTFT model: %.3g parameters, %.0f TFLOP/s, %.1f MiB per block of %u tokens, "
            "host %.2f GB/s, nvme %.2f GB/s (a block's prefill %.2f ms, its load %.2f / %.2f "
            "ms)\n",
            m->params, m->gpu_flops / 1e12, bb / (1 << 20), opt_trace_tokens_per_block(rep->t),
            m->bw[0] / 1e9, m->bw[1] / 1e9,
            1e3 * opt_ttft_prefill_s(m, opt_trace_tokens_per_block(rep->t)), 1e3 * bb / m->bw[0],
            1e3 * bb / m->bw[1]);
    fprintf(out, "%-58s %10s %10s %10s\n", "", "mean ms", "p50 ms", "p99 ms");
    if (rep->n_ttft) {
        const opt_ttft_stats_t *w = &rep->ttft[0].r.without;
        fprintf(out, "%-58s %10.2f %10.2f %10.2f\n", "no cache", 1e3 * w->mean, 1e3 * w->p50,
                1e3 * w->p99);
    }
    for (size_t i = 0; i < rep->n_ttft; i++) {
        const opt_ttft_stats_t *s = &rep->ttft[i].r.with;
        fprintf(out, "%-58.58s %10.2f %10.2f %10.2f\n", rep->ttft[i].label, 1e3 * s->mean,
                1e3 * s->p50, 1e3 * s->p99);
    }
}

void opt_report_table(const opt_report_t *rep, FILE *out)
{
    const opt_trace_t *t = rep->t;
    fprintf(out,
            "kvtier optimize: %s (%s): %zu requests, %llu block references, %u distinct "
            "blocks\n",
            rep->input, opt_trace_format(t) == OPT_FORMAT_EVENTS ? "event recording" : "trace",
            opt_trace_requests(t), (unsigned long long)opt_trace_refs(t), opt_trace_distinct(t));
    if (opt_trace_skipped_events(t) || opt_trace_skipped_modes(t))
        fprintf(out,
                "(skipped %llu events that are not lookups or of another instance, %llu "
                "lookups not in PREFIX mode)\n",
                (unsigned long long)opt_trace_skipped_events(t),
                (unsigned long long)opt_trace_skipped_modes(t));
    fprintf(out,
            "time: read %.3f s, exact LRU curve (every capacity) %.3f s; Belady reference "
            "%.3f s, ARC %.3f s, slot-engine policies %.3f s (%zu rows)\n",
            rep->secs_load, rep->secs_curve, rep->secs_belady, rep->secs_arc, rep->secs_policies,
            rep->n_rows);
    s_table_rows(rep, out);
    s_table_extra(rep, out);
}

/* ---- CSV, JSON ---- */

int opt_report_csv(const opt_report_t *rep, const char *path, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "w");
    if (!fp) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        return -1;
    }
    uint64_t refs = opt_trace_refs(rep->t);
    fprintf(fp, "capacity,unbounded,deployment,references,lru_hits,belady_hits,arc_hits");
    for (size_t p = 0; p < rep->n_policies; p++)
        fprintf(fp, ",%s_hits", rep->policies[p]);
    fprintf(fp, ",lru_rate,belady_rate,arc_rate");
    for (size_t p = 0; p < rep->n_policies; p++)
        fprintf(fp, ",%s_rate", rep->policies[p]);
    fputc('\n', fp);
    for (size_t i = 0; i < rep->n_rows; i++) {
        const opt_row_t *row = &rep->rows[i];
        fprintf(fp, "%llu,%d,%d,%llu,%llu,%lld,%lld", (unsigned long long)row->capacity,
                row->unbounded, (int)i == rep->point_row, (unsigned long long)refs,
                (unsigned long long)row->lru, (long long)row->belady, (long long)row->arc);
        for (size_t p = 0; p < rep->n_policies; p++)
            fprintf(fp, ",%lld", (long long)row->policy[p]);
        int64_t v[3] = {(int64_t)row->lru, row->belady, row->arc};
        for (int k = 0; k < 3; k++)
            fprintf(fp, v[k] < 0 ? "," : ",%.6f",
                    v[k] < 0 ? 0.0 : s_pct((uint64_t)v[k], refs) / 100);
        for (size_t p = 0; p < rep->n_policies; p++)
            fprintf(fp, row->policy[p] < 0 ? "," : ",%.6f",
                    row->policy[p] < 0 ? 0.0 : s_pct((uint64_t)row->policy[p], refs) / 100);
        fputc('\n', fp);
    }
    int bad = ferror(fp);
    if (fclose(fp) != 0 || bad) {
        snprintf(err, errlen, "%s: write error", path);
        return -1;
    }
    return 0;
}

static json_t *s_json_rows(const opt_report_t *rep)
{
    json_t *rows = json_array();
    for (size_t i = 0; i < rep->n_rows; i++) {
        const opt_row_t *row = &rep->rows[i];
        json_t *o = json_pack("{s:I,s:b,s:b,s:I}", "capacity", (json_int_t)row->capacity,
                              "unbounded", row->unbounded, "deployment", (int)i == rep->point_row,
                              "lru", (json_int_t)row->lru);
        if (row->belady >= 0)
            json_object_set_new(o, "belady", json_integer(row->belady));
        if (row->arc >= 0)
            json_object_set_new(o, "arc", json_integer(row->arc));
        json_t *pol = json_object();
        for (size_t p = 0; p < rep->n_policies; p++)
            json_object_set_new(pol, rep->policies[p], json_integer(row->policy[p]));
        json_object_set_new(o, "policies", pol);
        json_array_append_new(rows, o);
    }
    return rows;
}

/* The curve's steps: (capacity, hits) wherever the hit count grows. */
static json_t *s_json_curve(const opt_report_t *rep)
{
    json_t *steps = json_array();
    uint64_t prev = 0;
    for (uint32_t c = 1; c <= opt_curve_max_capacity(rep->curve); c++) {
        uint64_t h = opt_curve_hits(rep->curve, c);
        if (h != prev)
            json_array_append_new(steps, json_pack("[I,I]", (json_int_t)c, (json_int_t)h));
        prev = h;
    }
    return steps;
}

static json_t *s_json_ttft(const opt_report_t *rep)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < rep->n_ttft; i++) {
        const opt_ttft_row_t *r = &rep->ttft[i];
        json_array_append_new(
            arr, json_pack("{s:s,s:I,s:I,s:{s:f,s:f,s:f},s:{s:f,s:f,s:f}}", "label", r->label,
                           "host_hits", (json_int_t)r->hits[0], "nvme_hits", (json_int_t)r->hits[1],
                           "without_s", "mean", r->r.without.mean, "p50", r->r.without.p50, "p99",
                           r->r.without.p99, "with_s", "mean", r->r.with.mean, "p50", r->r.with.p50,
                           "p99", r->r.with.p99));
    }
    return arr;
}

int opt_report_json(const opt_report_t *rep, const char *path, char *err, size_t errlen)
{
    const opt_trace_t *t = rep->t;
    const opt_ttft_model_t *m = &rep->model;
    json_t *root = json_pack(
        "{s:s,s:s,s:I,s:I,s:I,s:{s:f,s:f,s:f,s:f,s:f,s:f,s:f}}", "input", rep->input, "format",
        opt_trace_format(t) == OPT_FORMAT_EVENTS ? "events" : "mooncake", "requests",
        (json_int_t)opt_trace_requests(t), "references", (json_int_t)opt_trace_refs(t),
        "distinct_blocks", (json_int_t)opt_trace_distinct(t), "seconds", "read", rep->secs_load,
        "lru_curve", rep->secs_curve, "belady", rep->secs_belady, "arc", rep->secs_arc, "policies",
        rep->secs_policies, "chain", rep->secs_chain, "ttft", rep->secs_ttft);
    if (!root) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    json_object_set_new(root, "rows", s_json_rows(rep));
    json_object_set_new(root, "lru_curve_steps", s_json_curve(rep));
    if (rep->has_chain)
        json_object_set_new(
            root, "chain",
            json_pack("{s:I,s:s,s:I,s:s,s:s,s:I,s:I,s:I,s:I,s:I}", "host_capacity",
                      (json_int_t)rep->chain_cfg.capacity[0], "host_policy",
                      rep->chain_cfg.policy[0], "nvme_capacity",
                      (json_int_t)rep->chain_cfg.capacity[1], "nvme_policy",
                      rep->chain_cfg.policy[1], "placement",
                      rep->chain_cfg.inclusive ? "inclusive" : "exclusive", "host_hits",
                      (json_int_t)rep->chain.hits[0], "nvme_hits", (json_int_t)rep->chain.hits[1],
                      "promoted", (json_int_t)rep->chain.promoted, "demoted",
                      (json_int_t)rep->chain.demoted, "dropped", (json_int_t)rep->chain.dropped));
    if (rep->has_observed)
        json_object_set_new(root, "observed",
                            json_pack("{s:I,s:I}", "hits", (json_int_t)rep->observed_hits,
                                      "head_hits", (json_int_t)rep->observed_head));
    json_object_set_new(root, "ttft_model",
                        json_pack("{s:f,s:f,s:f,s:f,s:f}", "params", m->params, "gpu_flops",
                                  m->gpu_flops, "block_bytes", opt_ttft_block_bytes(m, t),
                                  "host_bytes_per_s", m->bw[0], "nvme_bytes_per_s", m->bw[1]));
    json_object_set_new(root, "ttft", s_json_ttft(rep));
    int rc = json_dump_file(root, path, JSON_INDENT(1) | JSON_REAL_PRECISION(9));
    json_decref(root);
    if (rc != 0) {
        snprintf(err, errlen, "%s: cannot write", path);
        return -1;
    }
    return 0;
}
