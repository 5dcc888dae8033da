/* opt_report.h — one optimizer run over a loaded trace: the exact LRU curve, the
 * table of chosen capacities (Belady reference, ARC and every registered slot-engine
 * policy at each), the chain, the service's own figures when the input is a
 * recording, the TTFT model; and its outputs (table, CSV, JSON, gnuplot plot).
 *
 * Owns: the curve and the rows; per-request scratch is allocated per figure and
 * freed. Never exits; errors are returned with a message. */
#ifndef KVT_OPT_REPORT_H
#define KVT_OPT_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "opt_lru.h"
#include "opt_replay.h"
#include "opt_trace.h"
#include "opt_ttft.h"

#define OPT_MAX_CAPACITIES 64
#define OPT_MAX_POLICIES 16           /* registered slot-engine policies replayed */
#define OPT_MAX_CAPACITY (1ull << 31) /* the slot engine's bound */
#define OPT_MAX_TTFT_ROWS 4

typedef struct {
    uint64_t capacities[OPT_MAX_CAPACITIES]; /* table rows; 0 of them: the defaults */
    size_t n_capacities;
    uint64_t point; /* the deployment's capacity (--capacity), 0: none */
    bool no_belady, no_arc, no_policies;
    bool chain;
    opt_chain_config_t chain_cfg;
    opt_ttft_model_t ttft;
} opt_run_config_t;

/* Fills CFG with the defaults (no point, no chain, every figure, TTFT defaults). */
void opt_run_defaults(opt_run_config_t *cfg);

typedef struct {
    uint64_t capacity;
    bool unbounded; /* the distinct-block count: no eviction */
    uint64_t lru;   /* exact curve */
    int64_t belady; /* -1: not computed */
    int64_t arc;
    int64_t policy[OPT_MAX_POLICIES];
} opt_row_t;

typedef struct {
    char label[96];
    uint64_t hits[2]; /* per level */
    opt_ttft_result_t r;
} opt_ttft_row_t;

typedef struct {
    const char *input;
    const opt_trace_t *t;
    opt_curve_t *curve;
    size_t n_policies;
    const char *policies[OPT_MAX_POLICIES];
    opt_row_t rows[OPT_MAX_CAPACITIES + 2];
    size_t n_rows;
    int point_row; /* index of the deployment's row, -1: none */
    bool no_belady, no_arc, no_policies;
    bool has_chain;
    opt_chain_config_t chain_cfg;
    opt_chain_result_t chain;
    bool has_observed;
    uint64_t observed_hits, observed_head;
    opt_ttft_model_t model;
    opt_ttft_row_t ttft[OPT_MAX_TTFT_ROWS];
    size_t n_ttft;
    double secs_load; /* set by the caller: reading the input */
    double secs_curve, secs_belady, secs_arc, secs_policies, secs_chain, secs_ttft;
} opt_report_t;

/* Computes every figure CFG asks for over T (T must outlive REP). 0, or -1 with
 * the reason in ERR. */
int opt_report_run(const opt_trace_t *t, const char *input, const opt_run_config_t *cfg,
                   opt_report_t *rep, char *err, size_t errlen);
void opt_report_fini(opt_report_t *rep);

void opt_report_table(const opt_report_t *rep, FILE *out);
/* 0, or -1 with the reason in ERR. */
int opt_report_csv(const opt_report_t *rep, const char *path, char *err, size_t errlen);
int opt_report_json(const opt_report_t *rep, const char *path, char *err, size_t errlen);
/* PREFIX.png and PREFIX.svg through gnuplot (found on PATH, or $KVTIER_GNUPLOT).
 * 0 written, 1 gnuplot is missing (nothing written, reason in ERR), -1 failed. */
int opt_report_plot(const opt_report_t *rep, const char *prefix, char *err, size_t errlen);

#endif
