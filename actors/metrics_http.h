/* metrics_http.h — the metrics actor's HTTP server (libmicrohttpd): serves a
 * fixed table of documents (path -> status, content type, body) that its owner
 * publishes; nothing else.
 *
 * Threads: libmicrohttpd answers on one internal thread of its own. That thread
 * reads only the document table, under the server's mutex, and copies the body it
 * sends; it never calls back into an actor. The owner (the metrics actor) replaces
 * documents with metrics_http_publish from its own thread.
 *
 * Bounds (metrics_http_config_t): at most max_connections connections at once
 * (more wait in the kernel's backlog, then are refused), each closed after
 * timeout_s without progress; a request (line and headers) beyond
 * max_request_bytes is refused by libmicrohttpd itself (431 / 414) and a URL over
 * METRICS_HTTP_URL_MAX gets 414; a method other than GET or HEAD gets 405; a path
 * not in the table 404 (query strings are ignored). A body is never read. */
#ifndef KVT_METRICS_HTTP_H
#define KVT_METRICS_HTTP_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define METRICS_HTTP_ADDR_MAX 64 /* "255.255.255.255:65535" and then some */
#define METRICS_HTTP_PATHS 8     /* documents in the table */
#define METRICS_HTTP_URL_MAX 1024
#define METRICS_HTTP_DEFAULT_CONNECTIONS 16u
#define METRICS_HTTP_DEFAULT_TIMEOUT_S 5u
#define METRICS_HTTP_DEFAULT_REQUEST_BYTES 8192u

typedef struct metrics_http metrics_http_t;

typedef struct {
    const char *bind;           /* "IPV4:PORT"; port 0: the kernel picks one */
    uint32_t max_connections;   /* 0: METRICS_HTTP_DEFAULT_CONNECTIONS */
    uint32_t timeout_s;         /* idle connection timeout; 0: default */
    uint32_t max_request_bytes; /* request line + headers; 0: default, at least 2048 */
} metrics_http_config_t;

typedef struct {
    uint64_t requests;  /* answered, whatever the status */
    uint64_t not_found; /* 404 */
    uint64_t refused;   /* 405 and 414 */
} metrics_http_stats_t;

/* Parses "A.B.C.D:PORT" (an IPv4 literal, "localhost" for 127.0.0.1, or "*" for
 * every address; port 0..65535). 0, or -EINVAL with why filled ("expected
 * HOST:PORT", "port 70000 out of 0..65535", ...). */
int metrics_http_parse_addr(const char *s, struct sockaddr_in *out, char *why, size_t whylen);

/* Starts listening on cfg->bind. NULL with err filled (bad address, cannot bind). */
metrics_http_t *metrics_http_new(const metrics_http_config_t *cfg, char *err, size_t errlen);
/* Stops the server (connections closed) and frees it. NULL-safe; nulls *p. */
void metrics_http_destroy(metrics_http_t **p);
/* The bound address, "127.0.0.1:41234" (the port the kernel picked). */
const char *metrics_http_address(const metrics_http_t *h);
/* Sets path's document (a copy of body[0..len)). 0, or -1 (table full, no memory). */
int metrics_http_publish(metrics_http_t *h, const char *path, unsigned status, const char *ctype,
                         const char *body, size_t len);
void metrics_http_stats(metrics_http_t *h, metrics_http_stats_t *out);

#endif
