/* tier_actor_ucx.c — the tier actor's UCX side (the remote tier's transport ucx,
 * issue 9 §4; docs/ARCHITECTURE.md "The remote tier over UCX"): one worker, a
 * listener on the address of the tier-plane endpoint, the endpoints its peers
 * (client handles, copying tier actors) connect, and a bounded set of staging
 * regions, each ucp_mem_map'ed with a packed remote key that Probe{ucx} hands to
 * one peer at a time.
 *
 * Peers move bytes one-sided into and out of their own region (ucp_put_nbx /
 * ucp_get_nbx + flush); the tier actor never lets a peer reach the slots: a
 * WriteSlots / ReadSlots that names the region passes every check of the frames
 * path first (token, fence, ranges, sizes, header state), and only then are the
 * bytes copied between region and slots, inside the handler, as frames are. A
 * region handed to another peer is unmapped and mapped again first: the old
 * holder's remote key stops working (on RDMA hardware; over tcp UCX emulates
 * RMA with messages and the new id refuses the old holder's requests).
 *
 * Never blocks: the worker's event fd sits in the actor's poller and progress is
 * bounded (bus_ucx.h). Without UCX in the build every entry point is inert and
 * start refuses a tier that asks for it. */
#include "tier_actor_ucx.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_endpoint.h"
#include "bus_log.h"
#include "bus_ucx.h"

#define S_LOG "tier"
#define S_MAX_EPS 64u          /* peer endpoints kept at once */
#define S_REGION_IDLE_MS 10000 /* a region unused this long may go to another peer */

#ifdef KVT_HAVE_UCX
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/mman.h>
#include <unistd.h>
#include <ucp/api/ucp.h>

typedef struct {
    uint64_t id; /* 0: free */
    uint8_t *mem;
    ucp_mem_h memh;
    void *rkey;
    size_t rkey_len;
    int64_t used_ms;
} s_region_t;

typedef struct {
    ucp_ep_h ep;   /* NULL: free */
    bool failed;   /* the peer went: close it */
    void *closing; /* the close request in progress */
    struct tier_actor_ucx *owner;
} s_ep_t;

struct tier_actor_ucx {
    bus_ucx_t *u;
    ucp_context_h ctx;
    ucp_listener_h listener;
    char address[64];
    int efd;
    bool armed;
    s_region_t *regions;
    uint32_t n_regions;
    uint64_t region_bytes;
    s_ep_t eps[S_MAX_EPS];
    uint64_t rejected; /* connections refused at S_MAX_EPS */
    const char *name;
};

static void s_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    s_ep_t *e = arg;
    (void)ep;
    bus_debug(S_LOG, "tier %s: a UCX peer went: %s", e->owner->name, ucs_status_string(status));
    e->failed = true;
}

static void s_on_conn(ucp_conn_request_h req, void *arg)
{
    tier_actor_ucx_t *x = arg;
    s_ep_t *e = NULL;
    for (uint32_t i = 0; i < S_MAX_EPS && !e; i++)
        if (!x->eps[i].ep && !x->eps[i].closing)
            e = &x->eps[i];
    if (!e) {
        x->rejected++;
        bus_warn(S_LOG, "tier %s: UCX connection refused: %u endpoints in use already", x->name,
                 S_MAX_EPS);
        (void)ucp_listener_reject(x->listener, req);
        return;
    }
    ucp_ep_params_t p = {.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST |
                                       UCP_EP_PARAM_FIELD_ERR_HANDLER |
                                       UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
                         .conn_request = req,
                         .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                         .err_handler = {.cb = s_ep_error, .arg = e}};
    *e = (s_ep_t){.owner = x};
    ucs_status_t s = ucp_ep_create(bus_ucx_worker(x->u), &p, &e->ep);
    if (s != UCS_OK) {
        e->ep = NULL;
        bus_warn(S_LOG, "tier %s: cannot accept a UCX connection: %s", x->name,
                 ucs_status_string(s));
    }
}

/* The listener's address: the tier-plane endpoint's host (a wildcard binds every
 * interface and advertises the host name's address), an ephemeral port. */
static int s_listen(tier_actor_ucx_t *x, const char *endpoint, char *why, size_t len)
{
    bus_endpoint_t ep;
    char env[256];
    if (bus_endpoint_parse(endpoint, &ep, why, len) < 0 || ep.transport != BUS_ENDPOINT_TCP) {
        snprintf(why, len, "tier %s: UCX needs a tcp tier-plane endpoint to listen beside, not %s",
                 x->name, endpoint);
        return -1;
    }
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    char host[256];
    if (ep.wildcard_host)
        snprintf(host, sizeof host, "0.0.0.0");
    else
        snprintf(host, sizeof host, "%s", ep.address);
    int g = getaddrinfo(host, NULL, &hints, &ai);
    if (g != 0 || !ai) {
        snprintf(why, len, "tier %s: UCX: cannot resolve %s: %s", x->name, host, gai_strerror(g));
        return -1;
    }
    memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
    socklen_t alen = ai->ai_addrlen;
    freeaddrinfo(ai);
    ucp_listener_params_t lp = {.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                                              UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
                                .sockaddr = {.addr = (struct sockaddr *)&ss, .addrlen = alen},
                                .conn_handler = {.cb = s_on_conn, .arg = x}};
    ucs_status_t s = ucp_listener_create(bus_ucx_worker(x->u), &lp, &x->listener);
    if (s != UCS_OK) {
        snprintf(why, len, "tier %s: UCX: cannot listen on %s: %s (%s)", x->name, host,
                 ucs_status_string(s), bus_ucx_env(env, sizeof env));
        return -1;
    }
    ucp_listener_attr_t la = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
    s = ucp_listener_query(x->listener, &la);
    if (s != UCS_OK) {
        snprintf(why, len, "tier %s: UCX: cannot query its listener: %s", x->name,
                 ucs_status_string(s));
        return -1;
    }
    char ip[INET6_ADDRSTRLEN] = "?";
    uint16_t port = 0;
    if (la.sockaddr.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&la.sockaddr;
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
        port = ntohs(in->sin_port);
    } else if (la.sockaddr.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&la.sockaddr;
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
        port = ntohs(in6->sin6_port);
    }
    if (ep.wildcard_host) { /* advertise something a peer can reach */
        char hn[256];
        if (gethostname(hn, sizeof hn) == 0)
            snprintf(ip, sizeof ip, "%.45s", hn);
    }
    snprintf(x->address, sizeof x->address, "%s:%u", ip, port);
    return 0;
}

int tier_actor_ucx_new(tier_actor_ucx_t **out, const char *name, const char *endpoint,
                       uint32_t regions, uint64_t region_bytes, char *why, size_t len)
{
    *out = NULL;
    if (regions == 0)
        return 0;
    tier_actor_ucx_t *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(why, len, "tier %s: out of memory", name);
        return -1;
    }
    x->name = name;
    x->efd = -1;
    x->n_regions = regions;
    x->region_bytes = region_bytes;
    x->regions = calloc(regions, sizeof *x->regions);
    char who[96];
    snprintf(who, sizeof who, "tier %s", name);
    if (!x->regions || !(x->u = bus_ucx_new(who, why, len)) ||
        bus_ucx_check_network(x->u, who, why, len) < 0 || s_listen(x, endpoint, why, len) < 0) {
        tier_actor_ucx_destroy(&x);
        return -1;
    }
    x->ctx = bus_ucx_context(x->u);
    x->efd = bus_ucx_efd(x->u);
    *out = x;
    return 0;
}

static void s_region_unmap(tier_actor_ucx_t *x, s_region_t *r)
{
    if (r->rkey)
        ucp_rkey_buffer_release(r->rkey);
    if (r->memh)
        (void)ucp_mem_unmap(x->ctx, r->memh);
    r->rkey = NULL;
    r->memh = NULL;
    r->id = 0;
}

void tier_actor_ucx_destroy(tier_actor_ucx_t **xp)
{
    if (!xp || !*xp)
        return;
    tier_actor_ucx_t *x = *xp;
    for (uint32_t i = 0; i < S_MAX_EPS; i++) {
        s_ep_t *e = &x->eps[i];
        if (e->ep) {
            ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                     .flags = UCP_EP_CLOSE_FLAG_FORCE};
            void *r = ucp_ep_close_nbx(e->ep, &p);
            for (int k = 0;
                 k < 1000 && UCS_PTR_IS_PTR(r) && ucp_request_check_status(r) == UCS_INPROGRESS;
                 k++)
                (void)bus_ucx_progress(x->u, 16);
            if (UCS_PTR_IS_PTR(r))
                ucp_request_free(r);
        }
        if (e->closing)
            ucp_request_free(e->closing);
    }
    if (x->listener)
        ucp_listener_destroy(x->listener);
    for (uint32_t i = 0; x->regions && i < x->n_regions; i++) {
        s_region_unmap(x, &x->regions[i]);
        if (x->regions[i].mem)
            munmap(x->regions[i].mem, x->region_bytes);
    }
    free(x->regions);
    bus_ucx_destroy(&x->u);
    free(x);
    *xp = NULL;
}

const char *tier_actor_ucx_address(const tier_actor_ucx_t *x)
{
    return x ? x->address : "";
}

int *tier_actor_ucx_fd(tier_actor_ucx_t *x)
{
    return x && x->efd >= 0 ? &x->efd : NULL;
}

/* Endpoints whose peer went are closed (forced: nothing of theirs is owed). */
static void s_reap(tier_actor_ucx_t *x)
{
    for (uint32_t i = 0; i < S_MAX_EPS; i++) {
        s_ep_t *e = &x->eps[i];
        if (e->closing && ucp_request_check_status(e->closing) != UCS_INPROGRESS) {
            ucp_request_free(e->closing);
            e->closing = NULL;
        }
        if (e->ep && e->failed) {
            ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                     .flags = UCP_EP_CLOSE_FLAG_FORCE};
            void *r = ucp_ep_close_nbx(e->ep, &p);
            e->ep = NULL;
            e->failed = false;
            e->closing = UCS_PTR_IS_PTR(r) ? r : NULL;
        }
    }
}

int tier_actor_ucx_service(tier_actor_ucx_t *x)
{
    if (!x)
        return -1;
    (void)bus_ucx_progress(x->u, 256);
    s_reap(x);
    x->armed = bus_ucx_arm(x->u);
    return x->armed ? -1 : 0;
}

int tier_actor_ucx_grant(tier_actor_ucx_t *x, int64_t now_ms, tier_actor_ucx_region_t *out,
                         char *why, size_t len)
{
    s_region_t *r = NULL;
    for (uint32_t i = 0; i < x->n_regions && !r; i++)
        if (x->regions[i].id == 0)
            r = &x->regions[i];
    if (!r) { /* else the one idle longest */
        r = &x->regions[0];
        for (uint32_t i = 1; i < x->n_regions; i++)
            if (x->regions[i].used_ms < r->used_ms)
                r = &x->regions[i];
    }
    if (r->id != 0 && now_ms - r->used_ms < S_REGION_IDLE_MS) {
        snprintf(why, len,
                 "all %u UCX staging regions are held by peers active within %d ms: raise "
                 "ucx_regions (the peer uses frames meanwhile)",
                 x->n_regions, S_REGION_IDLE_MS);
        return -EBUSY;
    }
    s_region_unmap(x, r); /* the old holder's key and id stop working */
    if (!r->mem) {
        void *m =
            mmap(NULL, x->region_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            snprintf(why, len, "no memory for a UCX staging region of %" PRIu64 " bytes: %s",
                     x->region_bytes, strerror(errno));
            return -ENOMEM;
        }
        r->mem = m;
    }
    ucp_mem_map_params_t mp = {.field_mask =
                                   UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                               .address = r->mem,
                               .length = x->region_bytes};
    ucs_status_t s = ucp_mem_map(x->ctx, &mp, &r->memh);
    if (s == UCS_OK)
        s = ucp_rkey_pack(x->ctx, r->memh, &r->rkey, &r->rkey_len);
    if (s != UCS_OK) {
        snprintf(why, len, "UCX cannot register a staging region: %s", ucs_status_string(s));
        s_region_unmap(x, r);
        return -EIO;
    }
    do
        r->id = ((uint64_t)random() << 33) ^ ((uint64_t)random() << 11) ^ (uint64_t)random();
    while (r->id == 0);
    r->used_ms = now_ms;
    *out = (tier_actor_ucx_region_t){.id = r->id,
                                     .base = (uint64_t)(uintptr_t)r->mem,
                                     .length = x->region_bytes,
                                     .rkey = r->rkey,
                                     .rkey_len = r->rkey_len};
    return 0;
}

uint8_t *tier_actor_ucx_range(tier_actor_ucx_t *x, uint64_t id, uint64_t offset, uint64_t len,
                              int64_t now_ms, char *why, size_t whylen)
{
    if (!x) {
        snprintf(why, whylen,
                 "this tier actor serves no UCX (transport is not ucx): send the "
                 "bytes in frames");
        return NULL;
    }
    for (uint32_t i = 0; i < x->n_regions; i++) {
        s_region_t *r = &x->regions[i];
        if (r->id != id)
            continue;
        if (offset > x->region_bytes || len > x->region_bytes - offset) {
            snprintf(why, whylen,
                     "%" PRIu64 " bytes at offset %" PRIu64 " do not fit its UCX staging region "
                     "of %" PRIu64 " bytes",
                     len, offset, x->region_bytes);
            return NULL;
        }
        r->used_ms = now_ms;
        return r->mem + offset;
    }
    snprintf(why, whylen,
             "UCX staging region %016" PRIx64 " is not (or no longer) one of this tier actor's: "
             "Probe with ucx again for a new one",
             id);
    return NULL;
}

#else /* no UCX in this build: nothing starts */

int tier_actor_ucx_new(tier_actor_ucx_t **out, const char *name, const char *endpoint,
                       uint32_t regions, uint64_t region_bytes, char *why, size_t len)
{
    (void)endpoint;
    (void)region_bytes;
    *out = NULL;
    if (regions == 0)
        return 0;
    char who[96];
    snprintf(who, sizeof who, "tier %s", name);
    (void)bus_ucx_new(who, why, len);
    return -1;
}

void tier_actor_ucx_destroy(tier_actor_ucx_t **xp)
{
    if (xp)
        *xp = NULL;
}

const char *tier_actor_ucx_address(const tier_actor_ucx_t *x)
{
    (void)x;
    return "";
}

int *tier_actor_ucx_fd(tier_actor_ucx_t *x)
{
    (void)x;
    return NULL;
}

int tier_actor_ucx_service(tier_actor_ucx_t *x)
{
    (void)x;
    return -1;
}

int tier_actor_ucx_grant(tier_actor_ucx_t *x, int64_t now_ms, tier_actor_ucx_region_t *out,
                         char *why, size_t len)
{
    (void)x;
    (void)now_ms;
    (void)out;
    snprintf(why, len, "UCX is not in this build");
    return -ENOTSUP;
}

uint8_t *tier_actor_ucx_range(tier_actor_ucx_t *x, uint64_t id, uint64_t offset, uint64_t len,
                              int64_t now_ms, char *why, size_t whylen)
{
    (void)x;
    (void)id;
    (void)offset;
    (void)len;
    (void)now_ms;
    snprintf(why, whylen,
             "this tier actor serves no UCX (not in this build): send the bytes in "
             "frames");
    return NULL;
}
#endif
