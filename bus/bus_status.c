/* bus_status.c — names for wire status codes; formatting of Status messages. */
#include "bus_status.h"

#include <stdarg.h>
#include <stdio.h>

static const char *const s_names[] = {
    [kvtier_StatusCode_STATUS_OK] = "OK",
    [kvtier_StatusCode_STATUS_NOT_FOUND] = "NOT_FOUND",
    [kvtier_StatusCode_STATUS_INVALID_ARGUMENT] = "INVALID_ARGUMENT",
    [kvtier_StatusCode_STATUS_NOT_LEADER] = "NOT_LEADER",
    [kvtier_StatusCode_STATUS_NO_SPACE] = "NO_SPACE",
    [kvtier_StatusCode_STATUS_TIMEOUT] = "TIMEOUT",
    [kvtier_StatusCode_STATUS_CONFLICT] = "CONFLICT",
    [kvtier_StatusCode_STATUS_UNAVAILABLE] = "UNAVAILABLE",
    [kvtier_StatusCode_STATUS_INTERNAL] = "INTERNAL",
    [kvtier_StatusCode_STATUS_EXPIRED] = "EXPIRED",
    [kvtier_StatusCode_STATUS_ALREADY_EXISTS] = "ALREADY_EXISTS",
    [kvtier_StatusCode_STATUS_BUSY] = "BUSY",
    [kvtier_StatusCode_STATUS_PERMISSION_DENIED] = "PERMISSION_DENIED",
    [kvtier_StatusCode_STATUS_OVERLOADED] = "OVERLOADED",
    [kvtier_StatusCode_STATUS_ABORTED] = "ABORTED",
};

const char *bus_status_name(int code)
{
    if (code < 0)
        code = -code;
    if ((size_t)code >= sizeof s_names / sizeof s_names[0] || !s_names[code])
        return "UNKNOWN";
    return s_names[code];
}

int bus_status_set(kvtier_Status *st, bus_code_t code, const char *fmt, ...)
{
    va_list ap;
    st->code = code;
    va_start(ap, fmt);
    vsnprintf(st->message, sizeof st->message, fmt, ap);
    va_end(ap);
    return -(int)code;
}
