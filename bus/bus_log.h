/* bus_log.h — process-wide logging to stderr: one line per event with time,
 * level, component and message. Thread-safe (one write(2) per line). */
#ifndef KVT_BUS_LOG_H
#define KVT_BUS_LOG_H

typedef enum {
    BUS_LOG_DEBUG = 0,
    BUS_LOG_INFO = 1,
    BUS_LOG_WARN = 2,
    BUS_LOG_ERROR = 3,
    BUS_LOG_OFF = 4,
} bus_log_level_t;

/* Lines below this level are dropped. Default INFO, or KVT_LOG_LEVEL from the
 * environment (debug|info|warn|error|off) read on first use. */
void bus_log_set_level(bus_log_level_t level);
bus_log_level_t bus_log_level(void);

/* Parses "debug", "info", "warn", "error", "off"; returns -1 for anything else. */
int bus_log_level_parse(const char *name);

void bus_log_write(bus_log_level_t level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define bus_debug(comp, ...) bus_log_write(BUS_LOG_DEBUG, comp, __VA_ARGS__)
#define bus_info(comp, ...) bus_log_write(BUS_LOG_INFO, comp, __VA_ARGS__)
#define bus_warn(comp, ...) bus_log_write(BUS_LOG_WARN, comp, __VA_ARGS__)
#define bus_error(comp, ...) bus_log_write(BUS_LOG_ERROR, comp, __VA_ARGS__)

#endif
