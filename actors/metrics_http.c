/* metrics_http.c — the document server on libmicrohttpd (see metrics_http.h). */
#include "metrics_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

typedef struct {
    char path[64];
    unsigned status;
    char ctype[64];
    char *body;
    size_t len;
} s_doc_t;

struct metrics_http {
    struct MHD_Daemon *d;
    char address[METRICS_HTTP_ADDR_MAX];
    pthread_mutex_t mu; /* docs and stats: the owner writes, the server's thread reads */
    s_doc_t docs[METRICS_HTTP_PATHS];
    uint32_t n_docs;
    metrics_http_stats_t st;
};

static int s_why(char *why, size_t len, const char *fmt, const char *arg)
{
    if (why && len)
        snprintf(why, len, fmt, arg);
    return -EINVAL;
}

int metrics_http_parse_addr(const char *s, struct sockaddr_in *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    out->sin_family = AF_INET;
    const char *colon = s ? strrchr(s, ':') : NULL;
    if (!colon || colon == s || !colon[1])
        return s_why(why, whylen, "\"%s\": expected HOST:PORT (e.g. \"127.0.0.1:7790\")",
                     s ? s : "");
    char host[48];
    size_t hl = (size_t)(colon - s);
    if (hl >= sizeof host)
        return s_why(why, whylen, "\"%s\": host too long", s);
    memcpy(host, s, hl);
    host[hl] = '\0';
    char *end = NULL;
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (errno || *end || colon[1] < '0' || colon[1] > '9' || port > 65535)
        return s_why(why, whylen, "\"%s\": port must be 0..65535", s);
    out->sin_port = htons((uint16_t)port);
    if (strcmp(host, "*") == 0)
        out->sin_addr.s_addr = htonl(INADDR_ANY);
    else if (strcmp(host, "localhost") == 0)
        out->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    else if (inet_pton(AF_INET, host, &out->sin_addr) != 1)
        return s_why(why, whylen, "\"%s\": host must be an IPv4 address, \"localhost\" or \"*\"",
                     s);
    return 0;
}

static enum MHD_Result s_send(struct MHD_Connection *c, unsigned status, const char *ctype,
                              char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result s_text(struct MHD_Connection *c, unsigned status, const char *msg)
{
    char *b = strdup(msg);
    return b ? s_send(c, status, "text/plain; charset=utf-8", b, strlen(b)) : MHD_NO;
}

/* libmicrohttpd's thread: reads the table under the mutex, never anything else. */
static enum MHD_Result s_handle(void *cls, struct MHD_Connection *c, const char *url,
                                const char *method, const char *version, const char *upload,
                                size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload;
    metrics_http_t *h = cls;
    if (*con_cls == NULL) { /* the first call: headers only; answer on the next */
        *con_cls = h;
        return MHD_YES;
    }
    *upload_size = 0; /* a body is never read */
    bool head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    pthread_mutex_lock(&h->mu);
    h->st.requests++;
    if (!head && strcmp(method, MHD_HTTP_METHOD_GET) != 0) {
        h->st.refused++;
        pthread_mutex_unlock(&h->mu);
        return s_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
    }
    if (strlen(url) > METRICS_HTTP_URL_MAX) {
        h->st.refused++;
        pthread_mutex_unlock(&h->mu);
        return s_text(c, MHD_HTTP_URI_TOO_LONG, "URL too long\n");
    }
    const s_doc_t *d = NULL;
    for (uint32_t i = 0; i < h->n_docs && !d; i++)
        if (strcmp(h->docs[i].path, url) == 0)
            d = &h->docs[i];
    if (!d) {
        h->st.not_found++;
        pthread_mutex_unlock(&h->mu);
        return s_text(c, MHD_HTTP_NOT_FOUND, "not found (try /metrics, /healthz, /readyz)\n");
    }
    unsigned status = d->status;
    char ctype[sizeof d->ctype];
    memcpy(ctype, d->ctype, sizeof ctype);
    size_t len = d->len;
    char *body = malloc(len ? len : 1);
    if (body)
        memcpy(body, d->body, len);
    pthread_mutex_unlock(&h->mu);
    if (!body)
        return MHD_NO;
    return s_send(c, status, ctype, body, len);
}

metrics_http_t *metrics_http_new(const metrics_http_config_t *cfg, char *err, size_t errlen)
{
    struct sockaddr_in sa;
    if (metrics_http_parse_addr(cfg->bind, &sa, err, errlen) < 0)
        return NULL;
    metrics_http_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    pthread_mutex_init(&h->mu, NULL);
    unsigned conns = cfg->max_connections ? cfg->max_connections : METRICS_HTTP_DEFAULT_CONNECTIONS;
    unsigned timeout = cfg->timeout_s ? cfg->timeout_s : METRICS_HTTP_DEFAULT_TIMEOUT_S;
    size_t mem =
        cfg->max_request_bytes ? cfg->max_request_bytes : METRICS_HTTP_DEFAULT_REQUEST_BYTES;
    if (mem < 2048)
        mem = 2048;
    h->d = MHD_start_daemon(MHD_USE_POLL_INTERNAL_THREAD, 0, NULL, NULL, s_handle, h,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                            MHD_OPTION_CONNECTION_LIMIT, conns, MHD_OPTION_CONNECTION_TIMEOUT,
                            timeout, MHD_OPTION_CONNECTION_MEMORY_LIMIT, mem,
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, 64u, MHD_OPTION_END);
    if (!h->d) {
        if (err && errlen)
            snprintf(err, errlen, "cannot listen on %s (in use, or not an address of this host)",
                     cfg->bind);
        pthread_mutex_destroy(&h->mu);
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_LISTEN_FD);
    struct sockaddr_in got = sa;
    socklen_t gl = sizeof got;
    if (di)
        (void)getsockname(di->listen_fd, (struct sockaddr *)&got, &gl);
    char ip[INET_ADDRSTRLEN] = "0.0.0.0";
    inet_ntop(AF_INET, &got.sin_addr, ip, sizeof ip);
    snprintf(h->address, sizeof h->address, "%s:%u", ip, (unsigned)ntohs(got.sin_port));
    return h;
}

void metrics_http_destroy(metrics_http_t **p)
{
    metrics_http_t *h = *p;
    if (!h)
        return;
    MHD_stop_daemon(h->d);
    for (uint32_t i = 0; i < h->n_docs; i++)
        free(h->docs[i].body);
    pthread_mutex_destroy(&h->mu);
    free(h);
    *p = NULL;
}

const char *metrics_http_address(const metrics_http_t *h)
{
    return h->address;
}

int metrics_http_publish(metrics_http_t *h, const char *path, unsigned status, const char *ctype,
                         const char *body, size_t len)
{
    char *copy = malloc(len ? len : 1);
    if (!copy || strlen(path) >= sizeof h->docs[0].path)
        goto out_fail;
    memcpy(copy, body, len);
    pthread_mutex_lock(&h->mu);
    s_doc_t *d = NULL;
    for (uint32_t i = 0; i < h->n_docs && !d; i++)
        if (strcmp(h->docs[i].path, path) == 0)
            d = &h->docs[i];
    if (!d && h->n_docs < METRICS_HTTP_PATHS) {
        d = &h->docs[h->n_docs++];
        snprintf(d->path, sizeof d->path, "%s", path);
    }
    if (!d) {
        pthread_mutex_unlock(&h->mu);
        goto out_fail;
    }
    char *old = d->body;
    d->body = copy;
    d->len = len;
    d->status = status;
    snprintf(d->ctype, sizeof d->ctype, "%s", ctype);
    pthread_mutex_unlock(&h->mu);
    free(old);
    return 0;
out_fail:
    free(copy);
    return -1;
}

void metrics_http_stats(metrics_http_t *h, metrics_http_stats_t *out)
{
    pthread_mutex_lock(&h->mu);
    *out = h->st;
    pthread_mutex_unlock(&h->mu);
}
