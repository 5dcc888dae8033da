/* bus_log.c — stderr logger. Formats into a stack buffer and emits each line
 * with a single write(2), so lines from threads and processes never interleave. */
#include "bus_log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define S_LINE_MAX 1024

static atomic_int s_level = -1;

static const char *const s_level_names[] = {"debug", "info", "warn", "error", "off"};

int bus_log_level_parse(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i <= BUS_LOG_OFF; i++)
        if (strcasecmp(name, s_level_names[i]) == 0)
            return i;
    return -1;
}

bus_log_level_t bus_log_level(void)
{
    int level = atomic_load(&s_level);
    if (level < 0) {
        level = bus_log_level_parse(getenv("KVT_LOG_LEVEL"));
        if (level < 0)
            level = BUS_LOG_INFO;
        atomic_store(&s_level, level);
    }
    return (bus_log_level_t)level;
}

void bus_log_set_level(bus_log_level_t level)
{
    atomic_store(&s_level, (int)level);
}

void bus_log_write(bus_log_level_t level, const char *component, const char *fmt, ...)
{
    if (level < bus_log_level() || level >= BUS_LOG_OFF)
        return;

    char line[S_LINE_MAX];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(
        line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s[%d]: ", tm.tm_year + 1900,
        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
        s_level_names[level], component ? component : "-", (int)getpid());
    if (n < 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m > 0 ? (size_t)m : 0);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}
