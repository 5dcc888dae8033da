/* bus_ucx_peer.c — UCX connections to remote tiers' staging regions (bus_ucx_peer.h).
 * Owns the worker (bus_ucx.h), the endpoints, the unpacked remote keys and each
 * region's allocation (64 KiB units, first fit). Bounded: one connection per
 * tier endpoint (its users keep at most 64), one flush record per
 * transfer in flight. Never waits: completion comes through bus_ucx_peer_progress. */
#include "bus_ucx_peer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_ucx.h"

#define S_UNIT (64u << 10) /* allocation unit of a region */

#ifdef KVT_HAVE_UCX
#include <arpa/inet.h>
#include <netdb.h>
#include <ucp/api/ucp.h>

struct bus_ucx_peer {
    bus_ucx_t *u;
    uint32_t live; /* flush records not yet called back */
};

struct bus_ucx_conn {
    bus_ucx_peer_t *x;
    ucp_ep_h ep;
    ucp_rkey_h rkey;
    bool failed;
    char why[128];
    uint64_t region, base, length;
    uint8_t *used; /* one per unit */
    uint32_t units;
};

typedef struct {
    bus_ucx_peer_t *x;
    bus_ucx_done_fn fn;
    void *arg;
} s_flush_t;

bus_ucx_peer_t *bus_ucx_peer_new(const char *name, char *why, size_t len)
{
    bus_ucx_peer_t *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(why, len, "%s: UCX: out of memory", name);
        return NULL;
    }
    x->u = bus_ucx_new(name, why, len);
    if (!x->u) {
        free(x);
        return NULL;
    }
    return x;
}

void bus_ucx_peer_destroy(bus_ucx_peer_t **xp)
{
    if (!xp || !*xp)
        return;
    bus_ucx_peer_t *x = *xp;
    for (int k = 0; k < 1000 && x->live > 0; k++)
        (void)bus_ucx_progress(x->u, 16);
    bus_ucx_destroy(&x->u);
    free(x);
    *xp = NULL;
}

int bus_ucx_peer_fd(bus_ucx_peer_t *x)
{
    return x ? bus_ucx_efd(x->u) : -1;
}

int bus_ucx_peer_progress(bus_ucx_peer_t *x)
{
    if (!x)
        return -1;
    (void)bus_ucx_progress(x->u, 256);
    return bus_ucx_arm(x->u) ? -1 : 0;
}

static void s_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    bus_ucx_conn_t *c = arg;
    (void)ep;
    c->failed = true;
    snprintf(c->why, sizeof c->why, "%s", ucs_status_string(status));
}

bus_ucx_conn_t *bus_ucx_conn_new(bus_ucx_peer_t *x, const char *address, uint64_t region,
                                 uint64_t base, uint64_t length, const void *rkey, size_t rkey_len,
                                 char *why, size_t len)
{
    char host[80];
    const char *colon = strrchr(address, ':');
    if (!colon || colon == address || (size_t)(colon - address) >= sizeof host || length < S_UNIT) {
        snprintf(why, len, "UCX address \"%s\" (region of %llu bytes) is not usable", address,
                 (unsigned long long)length);
        return NULL;
    }
    memcpy(host, address, (size_t)(colon - address));
    host[colon - address] = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(host, colon + 1, &hints, &ai);
    if (g != 0 || !ai) {
        snprintf(why, len, "UCX address \"%s\": %s", address, gai_strerror(g));
        return NULL;
    }
    bus_ucx_conn_t *c = calloc(1, sizeof *c);
    uint32_t units = (uint32_t)(length / S_UNIT);
    if (c)
        c->used = calloc(units, 1);
    if (!c || !c->used) {
        freeaddrinfo(ai);
        free(c);
        snprintf(why, len, "out of memory");
        return NULL;
    }
    *c = (bus_ucx_conn_t){.x = x,
                          .used = c->used,
                          .units = units,
                          .region = region,
                          .base = base,
                          .length = (uint64_t)units * S_UNIT};
    ucp_ep_params_t p = {.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                                       UCP_EP_PARAM_FIELD_ERR_HANDLER |
                                       UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
                         .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
                         .sockaddr = {.addr = ai->ai_addr, .addrlen = ai->ai_addrlen},
                         .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                         .err_handler = {.cb = s_ep_error, .arg = c}};
    ucs_status_t s = ucp_ep_create(bus_ucx_worker(x->u), &p, &c->ep);
    freeaddrinfo(ai);
    if (s == UCS_OK)
        s = ucp_ep_rkey_unpack(c->ep, rkey, &c->rkey);
    else
        c->ep = NULL;
    if (s != UCS_OK) {
        char env[200];
        snprintf(why, len, "UCX cannot reach %s: %s (%s)", address, ucs_status_string(s),
                 bus_ucx_env(env, sizeof env));
        (void)rkey_len;
        bus_ucx_conn_close(&c);
        return NULL;
    }
    return c;
}

void bus_ucx_conn_close(bus_ucx_conn_t **cp)
{
    if (!cp || !*cp)
        return;
    bus_ucx_conn_t *c = *cp;
    if (c->rkey)
        ucp_rkey_destroy(c->rkey);
    if (c->ep) {
        ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                 .flags = UCP_EP_CLOSE_FLAG_FORCE};
        void *r = ucp_ep_close_nbx(c->ep, &p);
        /* forced: completes at once or within a few rounds; pending flushes are
         * called back with an error meanwhile */
        for (int k = 0;
             k < 1000 && UCS_PTR_IS_PTR(r) && ucp_request_check_status(r) == UCS_INPROGRESS; k++)
            (void)bus_ucx_progress(c->x->u, 16);
        if (UCS_PTR_IS_PTR(r))
            ucp_request_free(r);
    }
    free(c->used);
    free(c);
    *cp = NULL;
}

bool bus_ucx_conn_failed(const bus_ucx_conn_t *c)
{
    return c->failed;
}

uint64_t bus_ucx_conn_region(const bus_ucx_conn_t *c)
{
    return c->region;
}

uint64_t bus_ucx_conn_length(const bus_ucx_conn_t *c)
{
    return c->length;
}

int bus_ucx_conn_alloc(bus_ucx_conn_t *c, uint64_t len, uint64_t *off)
{
    uint32_t need = (uint32_t)((len + S_UNIT - 1) / S_UNIT);
    if (need == 0)
        need = 1;
    uint32_t run = 0;
    for (uint32_t u = 0; u < c->units; u++) {
        run = c->used[u] ? 0 : run + 1;
        if (run == need) {
            uint32_t first = u + 1 - need;
            memset(c->used + first, 1, need);
            *off = (uint64_t)first * S_UNIT;
            return 0;
        }
    }
    return -1;
}

void bus_ucx_conn_free(bus_ucx_conn_t *c, uint64_t off, uint64_t len)
{
    uint32_t first = (uint32_t)(off / S_UNIT);
    uint32_t need = (uint32_t)((len + S_UNIT - 1) / S_UNIT);
    if (need == 0)
        need = 1;
    if (first < c->units && need <= c->units - first)
        memset(c->used + first, 0, need);
}

static int s_posted(bus_ucx_conn_t *c, ucs_status_ptr_t r, const char *op, char *why, size_t whylen)
{
    if (UCS_PTR_IS_ERR(r)) {
        snprintf(why, whylen, "UCX %s failed: %s", op, ucs_status_string(UCS_PTR_STATUS(r)));
        c->failed = true;
        return -1;
    }
    if (UCS_PTR_IS_PTR(r))
        ucp_request_free(r); /* released when done; the flush reports completion */
    return 0;
}

int bus_ucx_conn_put(bus_ucx_conn_t *c, const void *buf, size_t len, uint64_t off, char *why,
                     size_t whylen)
{
    if (c->failed) {
        snprintf(why, whylen, "the UCX peer went: %s", c->why);
        return -1;
    }
    ucp_request_param_t p = {.op_attr_mask = 0};
    return s_posted(c, ucp_put_nbx(c->ep, buf, len, c->base + off, c->rkey, &p), "put", why,
                    whylen);
}

int bus_ucx_conn_get(bus_ucx_conn_t *c, void *buf, size_t len, uint64_t off, char *why,
                     size_t whylen)
{
    if (c->failed) {
        snprintf(why, whylen, "the UCX peer went: %s", c->why);
        return -1;
    }
    ucp_request_param_t p = {.op_attr_mask = 0};
    return s_posted(c, ucp_get_nbx(c->ep, buf, len, c->base + off, c->rkey, &p), "get", why,
                    whylen);
}

static void s_flushed(void *request, ucs_status_t status, void *user_data)
{
    s_flush_t *f = user_data;
    f->x->live--;
    char msg[160];
    snprintf(msg, sizeof msg, "UCX flush: %s", ucs_status_string(status));
    f->fn(f->arg, status == UCS_OK ? 0 : -1, msg);
    free(f);
    ucp_request_free(request);
}

int bus_ucx_conn_flush(bus_ucx_conn_t *c, bus_ucx_done_fn fn, void *arg, char *why, size_t whylen)
{
    s_flush_t *f = malloc(sizeof *f);
    if (!f) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    *f = (s_flush_t){.x = c->x, .fn = fn, .arg = arg};
    ucp_request_param_t p = {.op_attr_mask =
                                 UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                             .cb = {.send = s_flushed},
                             .user_data = f};
    ucs_status_ptr_t r = ucp_ep_flush_nbx(c->ep, &p);
    if (UCS_PTR_IS_PTR(r)) {
        c->x->live++;
        return 0;
    }
    free(f);
    if (UCS_PTR_IS_ERR(r)) {
        snprintf(why, whylen, "UCX flush failed: %s", ucs_status_string(UCS_PTR_STATUS(r)));
        c->failed = true;
        return -1;
    }
    fn(arg, 0, "");
    return 0;
}

#else /* no UCX in this build: nothing connects; the frames transport keeps frames */

bus_ucx_peer_t *bus_ucx_peer_new(const char *name, char *why, size_t len)
{
    (void)bus_ucx_new(name, why, len);
    return NULL;
}
void bus_ucx_peer_destroy(bus_ucx_peer_t **xp)
{
    if (xp)
        *xp = NULL;
}
int bus_ucx_peer_fd(bus_ucx_peer_t *x)
{
    (void)x;
    return -1;
}
int bus_ucx_peer_progress(bus_ucx_peer_t *x)
{
    (void)x;
    return -1;
}
bus_ucx_conn_t *bus_ucx_conn_new(bus_ucx_peer_t *x, const char *address, uint64_t region,
                                 uint64_t base, uint64_t length, const void *rkey, size_t rkey_len,
                                 char *why, size_t len)
{
    (void)x, (void)address, (void)region, (void)base, (void)length, (void)rkey, (void)rkey_len;
    snprintf(why, len, "UCX is not in this build");
    return NULL;
}
void bus_ucx_conn_close(bus_ucx_conn_t **cp)
{
    if (cp)
        *cp = NULL;
}
bool bus_ucx_conn_failed(const bus_ucx_conn_t *c)
{
    (void)c;
    return true;
}
uint64_t bus_ucx_conn_region(const bus_ucx_conn_t *c)
{
    (void)c;
    return 0;
}
uint64_t bus_ucx_conn_length(const bus_ucx_conn_t *c)
{
    (void)c;
    return 0;
}
int bus_ucx_conn_alloc(bus_ucx_conn_t *c, uint64_t len, uint64_t *off)
{
    (void)c, (void)len, (void)off;
    return -1;
}
void bus_ucx_conn_free(bus_ucx_conn_t *c, uint64_t off, uint64_t len)
{
    (void)c, (void)off, (void)len;
}
int bus_ucx_conn_put(bus_ucx_conn_t *c, const void *buf, size_t len, uint64_t off, char *why,
                     size_t whylen)
{
    (void)c, (void)buf, (void)len, (void)off;
    snprintf(why, whylen, "UCX is not in this build");
    return -1;
}
int bus_ucx_conn_get(bus_ucx_conn_t *c, void *buf, size_t len, uint64_t off, char *why,
                     size_t whylen)
{
    return bus_ucx_conn_put(c, buf, len, off, why, whylen);
}
int bus_ucx_conn_flush(bus_ucx_conn_t *c, bus_ucx_done_fn fn, void *arg, char *why, size_t whylen)
{
    (void)c, (void)fn, (void)arg;
    snprintf(why, whylen, "UCX is not in this build");
    return -1;
}
#endif
