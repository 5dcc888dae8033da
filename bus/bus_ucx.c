/* bus_ucx.c — the UCX context and worker (bus_ucx.h). Everything else of UCX
 * (listeners, endpoints, memory) belongs to its user. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* open_memstream */
#endif
#include "bus_ucx.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *bus_ucx_env(char *buf, size_t len)
{
    const char *tls = getenv("UCX_TLS"), *dev = getenv("UCX_NET_DEVICES");
    if (!tls && !dev)
        snprintf(buf, len, "UCX_TLS and UCX_NET_DEVICES at their defaults");
    else
        snprintf(buf, len, "UCX_TLS=%s UCX_NET_DEVICES=%s", tls ? tls : "(default)",
                 dev ? dev : "(default)");
    return buf;
}

#ifdef KVT_HAVE_UCX
#include <ucp/api/ucp.h>

struct bus_ucx {
    ucp_context_h ctx;
    ucp_worker_h worker;
    int efd;
};

bool bus_ucx_built(void)
{
    return true;
}

bus_ucx_t *bus_ucx_new(const char *who, char *why, size_t len)
{
    char env[256];
    bus_ucx_t *self = calloc(1, sizeof *self);
    if (!self) {
        snprintf(why, len, "%s: UCX: out of memory", who);
        return NULL;
    }
    self->efd = -1;
    ucp_config_t *config = NULL;
    ucs_status_t s = ucp_config_read(NULL, NULL, &config);
    if (s != UCS_OK) {
        snprintf(why, len, "%s: UCX: cannot read its configuration: %s (%s)", who,
                 ucs_status_string(s), bus_ucx_env(env, sizeof env));
        goto out_fail;
    }
    ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME,
                      .features = UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP,
                      .name = who};
    s = ucp_init(&p, config, &self->ctx);
    ucp_config_release(config);
    if (s != UCS_OK) {
        snprintf(why, len, "%s: UCX: no usable transport (ucp_init: %s; %s)", who,
                 ucs_status_string(s), bus_ucx_env(env, sizeof env));
        goto out_fail;
    }
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    s = ucp_worker_create(self->ctx, &wp, &self->worker);
    if (s != UCS_OK) {
        snprintf(why, len, "%s: UCX: cannot create a worker: %s (%s)", who, ucs_status_string(s),
                 bus_ucx_env(env, sizeof env));
        goto out_fail;
    }
    s = ucp_worker_get_efd(self->worker, &self->efd);
    if (s != UCS_OK) {
        snprintf(why, len, "%s: UCX: its worker has no event fd: %s (%s)", who,
                 ucs_status_string(s), bus_ucx_env(env, sizeof env));
        goto out_fail;
    }
    return self;

out_fail:
    bus_ucx_destroy(&self);
    return NULL;
}

void bus_ucx_destroy(bus_ucx_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    bus_ucx_t *self = *self_p;
    if (self->worker)
        ucp_worker_destroy(self->worker);
    if (self->ctx)
        ucp_cleanup(self->ctx);
    free(self);
    *self_p = NULL;
}

int bus_ucx_efd(bus_ucx_t *self)
{
    return self ? self->efd : -1;
}

/* The context's resources as ucp_context_print_info lists them ("resource N : md M
 * dev D flags -- TL/DEV"): one whose transport is not a same-host one. */
int bus_ucx_check_network(bus_ucx_t *self, const char *who, char *why, size_t len)
{
    static const char *const local[] = {"self", "sysv", "posix", "cma", "knem", "xpmem", NULL};
    char *buf = NULL, env[256], found[256] = "";
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) {
        snprintf(why, len, "%s: UCX: cannot list its transports", who);
        return -1;
    }
    ucp_context_print_info(self->ctx, f);
    fclose(f);
    bool net = false;
    for (char *line = buf; line && *line && !net;) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        char *tl = strstr(line, "resource") ? strstr(line, "-- ") : NULL;
        if (tl) {
            tl += 3;
            size_t k = strcspn(tl, "/");
            net = true;
            for (int i = 0; local[i]; i++)
                if (strlen(local[i]) == k && strncmp(tl, local[i], k) == 0)
                    net = false;
            if (strlen(found) + k + 2 < sizeof found) {
                strncat(found, tl, k);
                strcat(found, " ");
            }
        }
        line = end ? end + 1 : NULL;
    }
    free(buf);
    if (net)
        return 0;
    size_t fl = strlen(found);
    if (fl)
        found[fl - 1] = '\0'; /* the last separator */
    snprintf(why, len,
             "%s: UCX: no network transport, only this host's (%s): peers on other hosts could "
             "not reach it (%s)",
             who, found[0] ? found : "none", bus_ucx_env(env, sizeof env));
    return -1;
}

unsigned bus_ucx_progress(bus_ucx_t *self, unsigned rounds)
{
    unsigned n = 0;
    for (unsigned r = 0; self && r < rounds; r++) {
        unsigned k = ucp_worker_progress(self->worker);
        n += k;
        if (!k)
            break;
    }
    return n;
}

bool bus_ucx_arm(bus_ucx_t *self)
{
    if (!self)
        return true;
    (void)bus_ucx_progress(self, 64);
    return ucp_worker_arm(self->worker) == UCS_OK;
}

void *bus_ucx_context(bus_ucx_t *self)
{
    return self ? self->ctx : NULL;
}

void *bus_ucx_worker(bus_ucx_t *self)
{
    return self ? self->worker : NULL;
}

#else /* no UCX in this build */

bool bus_ucx_built(void)
{
    return false;
}

bus_ucx_t *bus_ucx_new(const char *who, char *why, size_t len)
{
    snprintf(why, len,
             "%s: UCX is not in this build (libucx-dev was not found when it was configured, "
             "or -DKVT_UCX=OFF): install libucx-dev (deploy/bootstrap) and rebuild, or use "
             "transport \"zmq\"",
             who);
    return NULL;
}

void bus_ucx_destroy(bus_ucx_t **self_p)
{
    if (self_p)
        *self_p = NULL;
}

int bus_ucx_efd(bus_ucx_t *self)
{
    (void)self;
    return -1;
}

int bus_ucx_check_network(bus_ucx_t *self, const char *who, char *why, size_t len)
{
    (void)self;
    snprintf(why, len, "%s: UCX is not in this build", who);
    return -1;
}

unsigned bus_ucx_progress(bus_ucx_t *self, unsigned rounds)
{
    (void)self;
    (void)rounds;
    return 0;
}

bool bus_ucx_arm(bus_ucx_t *self)
{
    (void)self;
    return true;
}

void *bus_ucx_context(bus_ucx_t *self)
{
    (void)self;
    return NULL;
}

void *bus_ucx_worker(bus_ucx_t *self)
{
    (void)self;
    return NULL;
}
#endif
