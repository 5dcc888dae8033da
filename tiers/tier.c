/* tier.c — backend registry and checked dispatch for tier ops tables. Holds no
 * per-tier state of its own; the registry is process-wide and small (bounded). */
#include "tier.h"
#include "tier_host.h"
#include "tier_nvme.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX_BACKENDS 16

/* Built-in backends, registered on first use. */
static const struct tier_ops *const s_builtin[] = {
    &tier_host_ops,
    &tier_nvme_ops,
    NULL,
};

static const struct tier_ops *s_backends[S_MAX_BACKENDS];
static size_t s_nbackends;
static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t s_once = PTHREAD_ONCE_INIT;

static int s_register_locked(const struct tier_ops *ops)
{
    if (!ops || ops->version != TIER_OPS_VERSION || !ops->kind || !ops->open || !ops->close)
        return -EINVAL;
    for (size_t i = 0; i < s_nbackends; i++)
        if (strcmp(s_backends[i]->kind, ops->kind) == 0)
            return -EEXIST;
    if (s_nbackends == S_MAX_BACKENDS)
        return -ENOSPC;
    s_backends[s_nbackends++] = ops;
    return 0;
}

static void s_register_builtins(void)
{
    pthread_mutex_lock(&s_lock);
    for (size_t i = 0; s_builtin[i]; i++)
        s_register_locked(s_builtin[i]);
    pthread_mutex_unlock(&s_lock);
}

int tier_register(const struct tier_ops *ops)
{
    pthread_once(&s_once, s_register_builtins);
    pthread_mutex_lock(&s_lock);
    int rc = s_register_locked(ops);
    pthread_mutex_unlock(&s_lock);
    return rc;
}

const struct tier_ops *tier_find(const char *kind)
{
    const struct tier_ops *found = NULL;
    pthread_once(&s_once, s_register_builtins);
    if (!kind)
        return NULL;
    pthread_mutex_lock(&s_lock);
    for (size_t i = 0; i < s_nbackends && !found; i++)
        if (strcmp(s_backends[i]->kind, kind) == 0)
            found = s_backends[i];
    pthread_mutex_unlock(&s_lock);
    return found;
}

tier_t *tier_open(const tier_config_t *cfg, char *err, size_t errlen)
{
    if (!cfg || cfg->capacity == 0 || cfg->slot_size == 0) {
        snprintf(err, errlen, "tier %s: capacity and slot size must be positive",
                 cfg ? cfg->name : "?");
        return NULL;
    }
    const struct tier_ops *ops = tier_find(cfg->kind);
    if (!ops) {
        snprintf(err, errlen, "tier %s: unknown kind \"%s\"", cfg->name, cfg->kind);
        return NULL;
    }
    tier_t *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "tier %s: out of memory", cfg->name);
        return NULL;
    }
    t->ops = ops;
    t->cfg = *cfg;
    int rc = ops->open(t, cfg);
    if (rc < 0) {
        snprintf(err, errlen, "tier %s: open (%s) failed: %s", cfg->name, cfg->kind, strerror(-rc));
        free(t);
        return NULL;
    }
    return t;
}

void tier_close(tier_t **tp)
{
    if (!tp || !*tp)
        return;
    tier_t *t = *tp;
    t->ops->close(t);
    free(t);
    *tp = NULL;
}

static int s_check_iov(const tier_t *t, uint64_t slot, const struct iovec *iov, int n)
{
    if (slot >= t->cfg.capacity)
        return -ERANGE;
    if (!iov || n <= 0 || n > TIER_MAX_IOV)
        return -EINVAL;
    uint64_t total = 0;
    for (int i = 0; i < n; i++)
        total += iov[i].iov_len;
    return total <= t->cfg.slot_size ? 0 : -EMSGSIZE;
}

int tier_write(tier_t *t, uint64_t slot, const struct iovec *iov, int n)
{
    int rc = s_check_iov(t, slot, iov, n);
    if (rc < 0)
        return rc;
    return t->ops->write ? t->ops->write(t, slot, iov, n) : -ENOTSUP;
}

int tier_read(tier_t *t, uint64_t slot, struct iovec *iov, int n)
{
    int rc = s_check_iov(t, slot, iov, n);
    if (rc < 0)
        return rc;
    return t->ops->read ? t->ops->read(t, slot, iov, n) : -ENOTSUP;
}

int tier_put_header(tier_t *t, uint64_t slot, const tier_slot_header_t *h)
{
    if (slot >= t->cfg.capacity)
        return -ERANGE;
    if (!h || h->size > t->cfg.slot_size)
        return -EINVAL;
    return t->ops->put_header ? t->ops->put_header(t, slot, h) : -ENOTSUP;
}

int tier_get_header(tier_t *t, uint64_t slot, tier_slot_header_t *h)
{
    if (slot >= t->cfg.capacity)
        return -ERANGE;
    if (!h)
        return -EINVAL;
    return t->ops->get_header ? t->ops->get_header(t, slot, h) : -ENOTSUP;
}

int tier_inventory(tier_t *t, tier_inventory_fn fn, void *arg)
{
    if (!fn)
        return -EINVAL;
    return t->ops->inventory ? t->ops->inventory(t, fn, arg) : -ENOTSUP;
}

int tier_probe(tier_t *t, const uint64_t *slots, size_t n, bool *present)
{
    if (n && (!slots || !present))
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (slots[i] >= t->cfg.capacity)
            return -ERANGE;
    return t->ops->probe ? t->ops->probe(t, slots, n, present) : -ENOTSUP;
}

void *tier_map(tier_t *t, size_t *len)
{
    return t->ops->map ? t->ops->map(t, len) : NULL;
}
