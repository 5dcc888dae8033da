/* bus_status.h — status codes (the wire enum of schemas/common.proto) and their
 * names. Every reply carries one; every failing call returns a negative code. */
#ifndef KVT_BUS_STATUS_H
#define KVT_BUS_STATUS_H

#include "common.pb.h"

typedef kvtier_StatusCode bus_code_t;

/* Stable upper-case name of a code ("INVALID_ARGUMENT"); "UNKNOWN" for values
 * outside the enum (a newer peer). Never NULL. */
const char *bus_status_name(int code);

/* Fills a wire Status with code and a printf-formatted message (truncated to the
 * field bound, always NUL-terminated). Returns -code so callers can
 * `return bus_status_set(...)` on error paths, 0 for OK. */
int bus_status_set(kvtier_Status *st, bus_code_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
