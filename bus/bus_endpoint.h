/* bus_endpoint.h — endpoint strings for the bus: parse, validate and build
 * `inproc://name`, `ipc:///path` and `tcp://host:port` (DESIGN.md §3: which
 * transport an actor uses is only configuration).
 *
 * Owns: the syntax rules and the error text for a bad endpoint. Never touches a
 * socket, resolves a name or allocates; every string it writes is bounded by
 * the caller's buffer and by BUS_ENDPOINT_MAX.
 *
 * Accepted forms (anything else is rejected with a message naming the problem):
 *   inproc://NAME        NAME: 1+ printable characters, no spaces
 *   ipc://PATH           PATH: 1..BUS_ENDPOINT_IPC_PATH_MAX bytes (the Unix socket
 *                        limit); PATH "@name" is Linux's abstract namespace;
 *                        PATH "*" binds a fresh path chosen by ZeroMQ (bind only)
 *   tcp://HOST:PORT      HOST: a name or IPv4 address (letters, digits, '.', '-',
 *                        '_'), `[IPv6]`, or `*` (all interfaces, bind only);
 *                        PORT: 1..65535, or `*` (ephemeral, bind only)
 */
#ifndef KVT_BUS_ENDPOINT_H
#define KVT_BUS_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest endpoint string, including the terminating NUL. */
#define BUS_ENDPOINT_MAX 256
/* Longest ipc path: sizeof(sockaddr_un.sun_path) - 1 on Linux. */
#define BUS_ENDPOINT_IPC_PATH_MAX 107

typedef enum {
    BUS_ENDPOINT_INPROC = 0,
    BUS_ENDPOINT_IPC = 1,
    BUS_ENDPOINT_TCP = 2,
} bus_endpoint_transport_t;

/* What an endpoint string will be used for. */
typedef enum {
    BUS_ENDPOINT_ANY = 0,     /* only check the syntax */
    BUS_ENDPOINT_BIND = 1,    /* every valid form can be bound */
    BUS_ENDPOINT_CONNECT = 2, /* wildcard host, ephemeral port, ipc path "*" rejected */
} bus_endpoint_use_t;

/* A parsed endpoint: plain data, copy freely. */
typedef struct {
    bus_endpoint_transport_t transport;
    /* inproc: the name; ipc: the path ("*" for a fresh one); tcp: the host
     * without brackets ("*" for all interfaces). */
    char address[BUS_ENDPOINT_MAX];
    uint16_t port;       /* tcp only; 0 when ephemeral */
    bool wildcard_host;  /* tcp host "*" */
    bool ephemeral_port; /* tcp port "*" */
    bool wildcard_ipc;   /* ipc path "*" */
} bus_endpoint_t;

/* Parses TEXT into OUT (may be NULL to only validate). Returns 0, or
 * -INVALID_ARGUMENT with a message in ERR that starts with the endpoint, e.g.
 * "tcp://127.0.0.1:99999: port out of range 1..65535". ERR may be NULL. */
int bus_endpoint_parse(const char *text, bus_endpoint_t *out, char *err, size_t errlen);

/* bus_endpoint_parse plus the rules of USE: a connect endpoint must name one
 * peer (host "*": "... a wildcard host can only be bound, not connected to"). */
int bus_endpoint_check(const char *text, bus_endpoint_use_t use, char *err, size_t errlen);

/* True when EP can only be bound (wildcard host, ephemeral port, ipc path "*"). */
bool bus_endpoint_is_bind_only(const bus_endpoint_t *ep);

/* Writes the canonical string of EP into BUF (IPv6 hosts bracketed, 0 port as
 * "*"). Returns 0, or -INVALID_ARGUMENT if it does not fit in LEN or in
 * BUS_ENDPOINT_MAX (BUF is then the empty string). */
int bus_endpoint_format(const bus_endpoint_t *ep, char *buf, size_t len);

/* Builders: write "tcp://HOST:PORT" (PORT 0 → "*"; a HOST with ':' is
 * bracketed), "ipc://PATH" or "inproc://NAME" into BUF and validate the result
 * with bus_endpoint_parse. Return 0, or -INVALID_ARGUMENT with the reason in ERR
 * and BUF set to the empty string (too long for LEN or BUS_ENDPOINT_MAX, bad
 * host, empty name...). */
int bus_endpoint_tcp(char *buf, size_t len, const char *host, uint16_t port, char *err,
                     size_t errlen);
int bus_endpoint_ipc(char *buf, size_t len, const char *path, char *err, size_t errlen);
int bus_endpoint_inproc(char *buf, size_t len, const char *name, char *err, size_t errlen);

/* "inproc", "ipc", "tcp"; "?" for a value outside the enum. */
const char *bus_endpoint_transport_name(bus_endpoint_transport_t transport);

#endif
