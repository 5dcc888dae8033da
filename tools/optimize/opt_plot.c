/* opt_plot.c — the hit-rate plot: a gnuplot script with inline data blocks (the LRU
 * curve sampled at 400 log-spaced capacities plus the table's, the Belady reference,
 * ARC, the deployment's point) written to a temporary file, run once for PNG and SVG.
 * Never leaves the script behind; never writes outside PREFIX.png / PREFIX.svg. */
#include "opt_report.h"

#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define S_SAMPLES 400

extern char **environ;

/* gnuplot on PATH (or $KVTIER_GNUPLOT) into OUT; false when there is none. */
static bool s_find_gnuplot(char *out, size_t len)
{
    const char *env = getenv("KVTIER_GNUPLOT");
    if (env && env[0]) {
        snprintf(out, len, "%s", env);
        return access(out, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        snprintf(out, len, "%.*s/gnuplot", (int)n, path);
        if (n > 0 && access(out, X_OK) == 0)
            return true;
        path += n + (path[n] == ':');
    }
    return false;
}

static double s_rate(const opt_report_t *rep, int64_t hits)
{
    uint64_t refs = opt_trace_refs(rep->t);
    return refs ? 100.0 * (double)hits / (double)refs : 0.0;
}

static void s_data_curve(const opt_report_t *rep, FILE *fp)
{
    uint32_t max = opt_curve_max_capacity(rep->curve);
    fprintf(fp, "$lru << EOD\n");
    uint64_t prev = 0;
    size_t r = 0;
    for (int i = 0; i <= S_SAMPLES; i++) {
        uint64_t c = (uint64_t)llround(pow((double)(max ? max : 1), (double)i / S_SAMPLES));
        for (; r < rep->n_rows && rep->rows[r].capacity <= c; r++)
            if (rep->rows[r].capacity > prev) {
                prev = rep->rows[r].capacity;
                fprintf(fp, "%llu %.4f\n", (unsigned long long)prev,
                        s_rate(rep, (int64_t)opt_curve_hits(rep->curve, prev)));
            }
        if (c > prev) {
            prev = c;
            fprintf(fp, "%llu %.4f\n", (unsigned long long)c,
                    s_rate(rep, (int64_t)opt_curve_hits(rep->curve, c)));
        }
    }
    fprintf(fp, "EOD\n");
}

/* One data block of a table column (belady, arc): WHICH 0 / 1. */
static void s_data_column(const opt_report_t *rep, FILE *fp, const char *name, int which)
{
    fprintf(fp, "$%s << EOD\n", name);
    for (size_t i = 0; i < rep->n_rows; i++) {
        int64_t v = which == 0 ? rep->rows[i].belady : rep->rows[i].arc;
        if (v >= 0)
            fprintf(fp, "%llu %.4f\n", (unsigned long long)rep->rows[i].capacity, s_rate(rep, v));
    }
    fprintf(fp, "EOD\n");
}

static void s_script(const opt_report_t *rep, FILE *fp, const char *prefix)
{
    s_data_curve(rep, fp);
    bool belady = !rep->no_belady, arc = !rep->no_arc;
    if (belady)
        s_data_column(rep, fp, "belady", 0);
    if (arc)
        s_data_column(rep, fp, "arc", 1);
    const opt_row_t *pt = rep->point_row >= 0 ? &rep->rows[rep->point_row] : NULL;
    if (pt)
        fprintf(fp, "$point << EOD\n%llu %.4f\nEOD\n", (unsigned long long)pt->capacity,
                s_rate(rep, (int64_t)pt->lru));
    fprintf(fp,
            "set logscale x\nset grid\nset key bottom right\nset yrange [0:*]\n"
            "set xlabel 'capacity (blocks)'\nset ylabel 'prefix hit rate (%%)'\n"
            "set title 'kvtier optimize: %zu requests, %llu block references'\n",
            opt_trace_requests(rep->t), (unsigned long long)opt_trace_refs(rep->t));
    fprintf(fp,
            "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) "
            "{ set terminal pngcairo size 1000,640 } else { set terminal png size 1000,640 }\n"
            "set output \"%s.png\"\n",
            prefix);
    fprintf(fp, "plot $lru with lines lw 2 title 'LRU (exact)'");
    if (belady)
        fprintf(fp, ", $belady with linespoints pt 7 dt 2 title 'Belady reference (not a bound)'");
    if (arc)
        fprintf(fp, ", $arc with linespoints pt 5 title 'ARC'");
    if (pt)
        fprintf(fp, ", $point with points pt 9 ps 2.5 title 'deployment (%llu blocks)'",
                (unsigned long long)pt->capacity);
    fprintf(fp, "\nset terminal svg size 1000,640\nset output \"%s.svg\"\nreplot\nset output\n",
            prefix);
}

int opt_report_plot(const opt_report_t *rep, const char *prefix, char *err, size_t errlen)
{
    char gp[4096];
    if (!s_find_gnuplot(gp, sizeof gp)) {
        snprintf(err, errlen,
                 "gnuplot not found (install gnuplot-nox, or set KVTIER_GNUPLOT): "
                 "no plot written");
        return 1;
    }
    if (!prefix[0] || strpbrk(prefix, "\"\\\n'`$")) {
        snprintf(err, errlen, "plot prefix \"%s\": empty or with quotes, backslashes or $", prefix);
        return -1;
    }
    char script[] = "/tmp/kvtier-plot-XXXXXX";
    int fd = mkstemp(script);
    FILE *fp = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!fp) {
        snprintf(err, errlen, "cannot write a temporary script: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    s_script(rep, fp, prefix);
    int bad = ferror(fp);
    fclose(fp);
    int rc = -1;
    if (bad) {
        snprintf(err, errlen, "cannot write the gnuplot script");
        goto out;
    }
    char *argv[] = {gp, script, NULL};
    pid_t pid;
    int st = 0;
    if (posix_spawn(&pid, gp, NULL, NULL, argv, environ) != 0 || waitpid(pid, &st, 0) < 0) {
        snprintf(err, errlen, "cannot run %s", gp);
        goto out;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(err, errlen, "%s failed (status %d) writing %s.png / %s.svg", gp, st, prefix,
                 prefix);
        goto out;
    }
    rc = 0;
out:
    unlink(script);
    return rc;
}
