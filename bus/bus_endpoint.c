/* bus_endpoint.c — parse, validate and build bus endpoint strings.
 *
 * Owns the endpoint grammar described in bus_endpoint.h. Never opens sockets,
 * resolves names or allocates: endpoint strings come from configuration files
 * and peers, so every malformed one is an error value with a message, never an
 * assert. */
#include "bus_endpoint.h"

#include "bus_status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define S_EINVAL (-(int)kvtier_StatusCode_STATUS_INVALID_ARGUMENT)
/* Longest part of a rejected endpoint echoed back in a message. */
#define S_ECHO_MAX 96

/* Copies TEXT into OUT for a message: non-printable bytes as \xNN, cut with
 * "..." after S_ECHO_MAX bytes, so a hostile string cannot forge log lines. */
static void s_echo(const char *text, char *out, size_t outlen)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; text[i] && o + 8 < outlen; i++) {
        unsigned char c = (unsigned char)text[i];
        if (i >= S_ECHO_MAX) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (c < 0x20 || c >= 0x7f) {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
}

__attribute__((format(printf, 4, 5))) static int s_fail(char *err, size_t errlen, const char *text,
                                                        const char *fmt, ...)
{
    if (!err || errlen == 0)
        return S_EINVAL;
    char echo[S_ECHO_MAX * 4 + 8];
    s_echo(text, echo, sizeof echo);
    int n = snprintf(err, errlen, "%s: ", echo);
    if (n >= 0 && (size_t)n < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return S_EINVAL;
}

static bool s_is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Host names, IPv4 addresses and interface names. */
static bool s_host_ok(const char *h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!s_is_alnum(h[i]) && h[i] != '.' && h[i] != '-' && h[i] != '_')
            return false;
    return true;
}

/* A host of digits and dots only is meant as an IPv4 address: four decimal parts
 * 0..255 ("10.0.0.300" or "10.0.1" would otherwise go to the resolver as a name). */
static bool s_looks_ipv4(const char *h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((h[i] < '0' || h[i] > '9') && h[i] != '.')
            return false;
    return true;
}

static bool s_ipv4_ok(const char *h, size_t n)
{
    unsigned parts = 0, digits = 0, v = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || h[i] == '.') {
            if (digits == 0 || v > 255 || ++parts > 4)
                return false;
            digits = v = 0;
        } else if (++digits > 3) {
            return false;
        } else {
            v = v * 10 + (unsigned)(h[i] - '0');
        }
    }
    return parts == 4;
}

/* IPv6 literal with an optional zone ("fe80::1%eth0"); must contain ':'. */
static bool s_ipv6_ok(const char *h, size_t n)
{
    bool colon = false;
    for (size_t i = 0; i < n; i++) {
        if (h[i] == ':')
            colon = true;
        else if (!s_is_alnum(h[i]) && h[i] != '.' && h[i] != '%')
            return false;
    }
    return colon;
}

static int s_parse_port(const char *text, const char *p, bus_endpoint_t *ep, char *err,
                        size_t errlen)
{
    if (*p == '\0')
        return s_fail(err, errlen, text, "missing port (expected 1..65535 or *)");
    if (strcmp(p, "*") == 0) {
        ep->ephemeral_port = true;
        ep->port = 0;
        return 0;
    }
    unsigned long v = 0;
    for (const char *q = p; *q; q++) {
        if (*q < '0' || *q > '9')
            return s_fail(err, errlen, text, "port is not a number (expected 1..65535 or *)");
        if (v <= 65535)
            v = v * 10 + (unsigned long)(*q - '0');
    }
    if (v < 1 || v > 65535)
        return s_fail(err, errlen, text, "port out of range 1..65535");
    ep->port = (uint16_t)v;
    return 0;
}

static int s_parse_tcp(const char *text, const char *rest, bus_endpoint_t *ep, char *err,
                       size_t errlen)
{
    const char *host = rest, *colon;
    size_t hlen;
    if (*rest == '[') {
        const char *close = strchr(rest, ']');
        if (!close)
            return s_fail(err, errlen, text, "missing ']' after IPv6 address");
        host = rest + 1;
        hlen = (size_t)(close - host);
        if (close[1] != ':')
            return s_fail(err, errlen, text, "missing port (expected tcp://[ADDR]:PORT)");
        colon = close + 1;
        if (hlen == 0 || !s_ipv6_ok(host, hlen))
            return s_fail(err, errlen, text, "bad IPv6 address");
    } else {
        colon = strrchr(rest, ':');
        if (!colon)
            return s_fail(err, errlen, text, "missing port (expected tcp://HOST:PORT)");
        hlen = (size_t)(colon - rest);
        if (hlen == 0)
            return s_fail(err, errlen, text, "missing host (expected tcp://HOST:PORT)");
        if (memchr(rest, ':', hlen))
            return s_fail(err, errlen, text, "an IPv6 address must be in brackets ([ADDR]:PORT)");
        if (hlen == 1 && rest[0] == '*')
            ep->wildcard_host = true;
        else if (!s_host_ok(rest, hlen))
            return s_fail(err, errlen, text,
                          "bad host (letters, digits, '.', '-', '_', [IPv6] or *)");
        else if (s_looks_ipv4(rest, hlen) && !s_ipv4_ok(rest, hlen))
            return s_fail(err, errlen, text,
                          "bad IPv4 address (four numbers 0..255: A.B.C.D)");
    }
    memcpy(ep->address, host, hlen);
    ep->address[hlen] = '\0';
    return s_parse_port(text, colon + 1, ep, err, errlen);
}

static int s_parse_rest(const char *text, bus_endpoint_t *ep, char *err, size_t errlen)
{
    const char *sep = strstr(text, "://");
    if (!sep)
        return s_fail(err, errlen, text,
                      "missing transport (expected inproc://, ipc:// or tcp://)");
    size_t slen = (size_t)(sep - text);
    const char *rest = sep + 3;
    if (slen == 6 && memcmp(text, "inproc", 6) == 0) {
        ep->transport = BUS_ENDPOINT_INPROC;
        if (*rest == '\0')
            return s_fail(err, errlen, text, "missing inproc name");
    } else if (slen == 3 && memcmp(text, "ipc", 3) == 0) {
        ep->transport = BUS_ENDPOINT_IPC;
        if (*rest == '\0')
            return s_fail(err, errlen, text, "missing ipc path");
        if (strlen(rest) > BUS_ENDPOINT_IPC_PATH_MAX)
            return s_fail(err, errlen, text, "ipc path too long (%zu bytes, max %d)", strlen(rest),
                          BUS_ENDPOINT_IPC_PATH_MAX);
        ep->wildcard_ipc = strcmp(rest, "*") == 0;
    } else if (slen == 3 && memcmp(text, "tcp", 3) == 0) {
        ep->transport = BUS_ENDPOINT_TCP;
        return s_parse_tcp(text, rest, ep, err, errlen);
    } else {
        return s_fail(err, errlen, text,
                      "unsupported transport \"%.*s\" (expected inproc, ipc or tcp)",
                      (int)(slen > 16 ? 16 : slen), text);
    }
    strcpy(ep->address, rest); /* fits: strlen(text) < BUS_ENDPOINT_MAX */
    return 0;
}

int bus_endpoint_parse(const char *text, bus_endpoint_t *out, char *err, size_t errlen)
{
    bus_endpoint_t ep;
    memset(&ep, 0, sizeof ep);
    if (!text || *text == '\0')
        return s_fail(err, errlen, "(endpoint)", "empty endpoint");
    size_t n = strnlen(text, BUS_ENDPOINT_MAX);
    if (n >= BUS_ENDPOINT_MAX)
        return s_fail(err, errlen, text, "endpoint too long (max %d bytes)", BUS_ENDPOINT_MAX - 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c <= 0x20 || c == 0x7f)
            return s_fail(err, errlen, text, "contains a space or control character at byte %zu",
                          i);
    }
    int rc = s_parse_rest(text, &ep, err, errlen);
    if (rc == 0 && out)
        *out = ep;
    return rc;
}

bool bus_endpoint_is_bind_only(const bus_endpoint_t *ep)
{
    return ep->wildcard_host || ep->ephemeral_port || ep->wildcard_ipc;
}

int bus_endpoint_check(const char *text, bus_endpoint_use_t use, char *err, size_t errlen)
{
    bus_endpoint_t ep;
    int rc = bus_endpoint_parse(text, &ep, err, errlen);
    if (rc < 0 || use != BUS_ENDPOINT_CONNECT)
        return rc;
    if (ep.wildcard_host)
        return s_fail(err, errlen, text, "a wildcard host can only be bound, not connected to");
    if (ep.ephemeral_port)
        return s_fail(err, errlen, text, "an ephemeral port can only be bound, not connected to");
    if (ep.wildcard_ipc)
        return s_fail(err, errlen, text, "a wildcard ipc path can only be bound, not connected to");
    return 0;
}

const char *bus_endpoint_transport_name(bus_endpoint_transport_t transport)
{
    switch (transport) {
    case BUS_ENDPOINT_INPROC:
        return "inproc";
    case BUS_ENDPOINT_IPC:
        return "ipc";
    case BUS_ENDPOINT_TCP:
        return "tcp";
    }
    return "?";
}

/* Writes the formatted string into BUF only if it fits both LEN and
 * BUS_ENDPOINT_MAX; BUF is "" otherwise. */
__attribute__((format(printf, 3, 4))) static int s_write(char *buf, size_t len, const char *fmt,
                                                         ...)
{
    char tmp[BUS_ENDPOINT_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (len > 0)
        buf[0] = '\0';
    if (n < 0 || (size_t)n >= sizeof tmp || (size_t)n >= len)
        return S_EINVAL;
    memcpy(buf, tmp, (size_t)n + 1);
    return 0;
}

int bus_endpoint_format(const bus_endpoint_t *ep, char *buf, size_t len)
{
    const char *tname = bus_endpoint_transport_name(ep->transport);
    if (ep->transport != BUS_ENDPOINT_TCP)
        return s_write(buf, len, "%s://%s", tname, ep->address);
    char port[8];
    if (ep->ephemeral_port || ep->port == 0)
        strcpy(port, "*");
    else
        snprintf(port, sizeof port, "%u", (unsigned)ep->port);
    const char *host = ep->wildcard_host ? "*" : ep->address;
    if (strchr(host, ':'))
        return s_write(buf, len, "tcp://[%s]:%s", host, port);
    return s_write(buf, len, "tcp://%s:%s", host, port);
}

/* Validates a freshly built endpoint and reports why it is unusable. */
static int s_finish(char *buf, size_t len, int wrote, const char *what, char *err, size_t errlen)
{
    if (wrote < 0) {
        if (len > 0)
            buf[0] = '\0';
        return s_fail(err, errlen, what, "endpoint does not fit (buffer %zu bytes, max %d)", len,
                      BUS_ENDPOINT_MAX - 1);
    }
    int rc = bus_endpoint_parse(buf, NULL, err, errlen);
    if (rc < 0)
        buf[0] = '\0';
    return rc;
}

int bus_endpoint_tcp(char *buf, size_t len, const char *host, uint16_t port, char *err,
                     size_t errlen)
{
    if (!host)
        host = "";
    char portstr[8];
    if (port == 0)
        strcpy(portstr, "*");
    else
        snprintf(portstr, sizeof portstr, "%u", (unsigned)port);
    int rc = strchr(host, ':') ? s_write(buf, len, "tcp://[%s]:%s", host, portstr)
                               : s_write(buf, len, "tcp://%s:%s", host, portstr);
    return s_finish(buf, len, rc, host, err, errlen);
}

int bus_endpoint_ipc(char *buf, size_t len, const char *path, char *err, size_t errlen)
{
    if (!path)
        path = "";
    return s_finish(buf, len, s_write(buf, len, "ipc://%s", path), path, err, errlen);
}

int bus_endpoint_inproc(char *buf, size_t len, const char *name, char *err, size_t errlen)
{
    if (!name)
        name = "";
    return s_finish(buf, len, s_write(buf, len, "inproc://%s", name), name, err, errlen);
}
