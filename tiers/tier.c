/* tier.c — the one kind registry (name ↔ wire kind ↔ ops), the plug-in loader,
 * option helpers and checked dispatch with fallbacks for optional ops. Holds no
 * per-tier state of its own; the registry is process-wide and bounded
 * (TIER_MAX_BACKENDS). */
#include "tier.h"

#include "tier_checksum.h"
#include "tier_gpu.h"
#include "tier_host.h"
#include "tier_nvme.h"
#include "tier_remote.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The registry's built-in lines: adding a kind is its file plus one line here.
 * The numbers are schemas/common.proto TierKind's. */
static const struct {
    const struct tier_ops *ops;
    uint32_t wire;
} s_builtin[] = {
    {&tier_host_ops, 1},
    {&tier_nvme_ops, 2},
    {&tier_gpu_ops, 3},
    {&tier_remote_ops, 4},
};

typedef struct {
    const struct tier_ops *ops;
    uint32_t wire;
    char path[TIER_PATH_MAX]; /* loaded from, "" for a built-in or registered one */
} s_entry_t;

static s_entry_t s_backends[TIER_MAX_BACKENDS];
static size_t s_nbackends;
static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t s_once = PTHREAD_ONCE_INIT;

static bool s_ops_valid(const struct tier_ops *ops)
{
    return ops && ops->version == TIER_OPS_VERSION && ops->kind && ops->kind[0] &&
           strlen(ops->kind) < TIER_KIND_MAX && ops->open && ops->close && ops->write &&
           ops->read && ops->put_header && ops->get_header;
}

static s_entry_t *s_lookup_locked(const char *kind)
{
    for (size_t i = 0; i < s_nbackends; i++)
        if (strcmp(s_backends[i].ops->kind, kind) == 0)
            return &s_backends[i];
    return NULL;
}

static int s_register_locked(const struct tier_ops *ops, uint32_t wire, const char *path)
{
    if (!s_ops_valid(ops))
        return -EINVAL;
    if (s_lookup_locked(ops->kind))
        return -EEXIST;
    if (s_nbackends == TIER_MAX_BACKENDS)
        return -ENOSPC;
    s_entry_t *e = &s_backends[s_nbackends++];
    e->ops = ops;
    e->wire = wire;
    snprintf(e->path, sizeof e->path, "%s", path ? path : "");
    return 0;
}

static void s_register_builtins(void)
{
    pthread_mutex_lock(&s_lock);
    for (size_t i = 0; i < sizeof s_builtin / sizeof s_builtin[0]; i++)
        (void)s_register_locked(s_builtin[i].ops, s_builtin[i].wire, NULL);
    pthread_mutex_unlock(&s_lock);
}

int tier_register(const struct tier_ops *ops)
{
    pthread_once(&s_once, s_register_builtins);
    pthread_mutex_lock(&s_lock);
    int rc = s_register_locked(ops, 0, NULL);
    pthread_mutex_unlock(&s_lock);
    return rc;
}

const struct tier_ops *tier_find(const char *kind)
{
    pthread_once(&s_once, s_register_builtins);
    if (!kind)
        return NULL;
    pthread_mutex_lock(&s_lock);
    s_entry_t *e = s_lookup_locked(kind);
    const struct tier_ops *ops = e ? e->ops : NULL;
    pthread_mutex_unlock(&s_lock);
    return ops;
}

uint32_t tier_kind_wire(const char *kind)
{
    pthread_once(&s_once, s_register_builtins);
    if (!kind)
        return 0;
    pthread_mutex_lock(&s_lock);
    s_entry_t *e = s_lookup_locked(kind);
    uint32_t wire = e ? e->wire : 0;
    pthread_mutex_unlock(&s_lock);
    return wire;
}

const char *tier_kind_name(uint32_t wire)
{
    pthread_once(&s_once, s_register_builtins);
    const char *name = NULL;
    pthread_mutex_lock(&s_lock);
    for (size_t i = 0; wire && i < s_nbackends && !name; i++)
        if (s_backends[i].wire == wire)
            name = s_backends[i].ops->kind;
    pthread_mutex_unlock(&s_lock);
    return name;
}

/* ---- plug-ins ---- */

typedef const struct tier_ops *(*s_entry_fn)(uint32_t host_version);

static const struct tier_ops *s_loaded_locked(const char *path)
{
    for (size_t i = 0; i < s_nbackends; i++)
        if (s_backends[i].path[0] && strcmp(s_backends[i].path, path) == 0)
            return s_backends[i].ops;
    return NULL;
}

/* Whether the object at PATH (stat ST) may be trusted with the process: a regular
 * file owned by root or this user and writable by no one else, in a directory
 * nobody else can replace it in (owned likewise and not group/other writable, or
 * sticky). 0, or -1 with the reason in err. */
static int s_trusted(const char *path, const struct stat *st, char *err, size_t errlen)
{
    uid_t me = geteuid();
    if (!S_ISREG(st->st_mode)) {
        snprintf(err, errlen, "tier plug-in %s: refused: not a regular file", path);
        return -1;
    }
    if (st->st_uid != 0 && st->st_uid != me) {
        snprintf(err, errlen,
                 "tier plug-in %s: refused: owned by uid %u; a plug-in runs inside the tier "
                 "process, so it must belong to root or to this user (uid %u)",
                 path, (unsigned)st->st_uid, (unsigned)me);
        return -1;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(err, errlen,
                 "tier plug-in %s: refused: writable by group or others (mode %04o); "
                 "chmod go-w it",
                 path, (unsigned)(st->st_mode & 07777));
        return -1;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    struct stat ds;
    if (stat(dir, &ds) == 0 && (ds.st_mode & (S_IWGRP | S_IWOTH)) && !(ds.st_mode & S_ISVTX)) {
        snprintf(err, errlen,
                 "tier plug-in %s: refused: its directory %s is writable by group or others "
                 "(mode %04o), so anyone could replace it",
                 path, dir, (unsigned)(ds.st_mode & 07777));
        return -1;
    }
    return 0;
}

static const struct tier_ops *s_load_locked(const char *path, char *err, size_t errlen)
{
    const struct tier_ops *ops = s_loaded_locked(path);
    if (ops)
        return ops;
    /* what is checked is what loads: the file is opened once (path is tier_load's
     * real path: no symlink in it, and O_NOFOLLOW refuses one put there since),
     * checked through that descriptor, and loaded through it, so a file swapped in
     * after the check is not the one loaded */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK); /* a fifo: no wait */
    if (fd < 0) {
        snprintf(err, errlen, "tier plug-in %s: cannot open (%s)", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        snprintf(err, errlen, "tier plug-in %s: cannot stat (%s)", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (s_trusted(path, &st, err, errlen) < 0) {
        close(fd);
        return NULL;
    }
    /* The loader knows an object by the name it was opened under: a plug-in that
     * stays loaded keeps its descriptor open, so no later load is handed the same
     * /proc/self/fd/N name (and with it the earlier object) */
    char fdpath[64];
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fd);
    void *h = dlopen(fdpath, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        close(fd);
        const char *why = dlerror();
        snprintf(err, errlen, "tier plug-in %s: cannot load: %s", path, why ? why : "?");
        return NULL;
    }
    s_entry_fn entry;
    *(void **)&entry = dlsym(h, TIER_PLUGIN_ENTRY);
    if (!entry) {
        snprintf(err, errlen, "tier plug-in %s: symbol missing: it does not export %s()", path,
                 TIER_PLUGIN_ENTRY);
        goto out_close;
    }
    ops = entry(TIER_OPS_VERSION);
    if (ops && ops->version != TIER_OPS_VERSION) {
        snprintf(err, errlen,
                 "tier plug-in %s: version mismatch: its ops table is version %" PRIu32
                 ", this kvtier needs version %d (rebuild it against this tier.h)",
                 path, ops->version, TIER_OPS_VERSION);
        goto out_close;
    }
    if (!ops) {
        snprintf(err, errlen, "tier plug-in %s: version mismatch: %s() refused tier ops version %d",
                 path, TIER_PLUGIN_ENTRY, TIER_OPS_VERSION);
        goto out_close;
    }
    int rc = s_register_locked(ops, 0, path);
    if (rc == -EEXIST)
        snprintf(err, errlen, "tier plug-in %s: kind already registered: \"%s\"", path, ops->kind);
    else if (rc == -ENOSPC)
        snprintf(err, errlen, "tier plug-in %s: registry full (%d kinds)", path, TIER_MAX_BACKENDS);
    else if (rc < 0)
        snprintf(err, errlen,
                 "tier plug-in %s: invalid ops table (a kind of 1..%d bytes and open, close, "
                 "write, read, put_header, get_header are required)",
                 path, TIER_KIND_MAX - 1);
    if (rc == 0)
        return ops; /* stays loaded (and fd open): the registry points into it */
out_close:
    dlclose(h);
    close(fd);
    return NULL;
}

const struct tier_ops *tier_load(const char *path, char *err, size_t errlen)
{
    char scratch[8];
    if (!err || !errlen) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    if (!path || !path[0] || strlen(path) >= TIER_PATH_MAX) {
        snprintf(err, errlen, "tier plug-in: a path of 1..%d bytes is needed", TIER_PATH_MAX - 1);
        return NULL;
    }
    /* one object under two spellings (../, a symlink) is one plug-in */
    char real[PATH_MAX];
    if (!realpath(path, real)) {
        snprintf(err, errlen, "tier plug-in %s: file not found (%s)", path, strerror(errno));
        return NULL;
    }
    if (strlen(real) >= TIER_PATH_MAX) {
        snprintf(err, errlen, "tier plug-in %s: its real path is longer than %d bytes", path,
                 TIER_PATH_MAX - 1);
        return NULL;
    }
    pthread_once(&s_once, s_register_builtins);
    pthread_mutex_lock(&s_lock);
    const struct tier_ops *ops = s_load_locked(real, err, errlen);
    pthread_mutex_unlock(&s_lock);
    return ops;
}

/* ---- options ---- */

static tier_option_t *s_option(const tier_config_t *cfg, const char *key)
{
    for (uint32_t i = 0; i < cfg->n_options && i < TIER_MAX_OPTIONS; i++)
        if (strcmp(cfg->options[i].key, key) == 0)
            return (tier_option_t *)&cfg->options[i];
    return NULL;
}

int tier_config_set(tier_config_t *cfg, const char *key, const char *value)
{
    if (!cfg || !key || !key[0] || !value)
        return -EINVAL;
    if (strlen(key) >= TIER_OPTION_KEY_MAX || strlen(value) >= TIER_OPTION_VALUE_MAX)
        return -ENAMETOOLONG;
    tier_option_t *o = s_option(cfg, key);
    if (!o) {
        if (cfg->n_options >= TIER_MAX_OPTIONS)
            return -ENOSPC;
        o = &cfg->options[cfg->n_options++];
        snprintf(o->key, sizeof o->key, "%s", key);
    }
    snprintf(o->value, sizeof o->value, "%s", value);
    return 0;
}

const char *tier_config_get(const tier_config_t *cfg, const char *key)
{
    const tier_option_t *o = cfg && key ? s_option(cfg, key) : NULL;
    return o ? o->value : NULL;
}

static int s_opt_err(char *err, size_t errlen, const char *key, const char *value, const char *want)
{
    if (err && errlen)
        snprintf(err, errlen, "%s: \"%s\" is not %s", key, value, want);
    return -EINVAL;
}

int tier_option_u64(const tier_config_t *cfg, const char *key, uint64_t min, uint64_t max,
                    uint64_t dflt, uint64_t *out, char *err, size_t errlen)
{
    const char *v = tier_config_get(cfg, key);
    *out = dflt;
    if (!v)
        return 0;
    char *end = NULL, want[96];
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    snprintf(want, sizeof want, "an integer in %" PRIu64 "..%" PRIu64, min, max);
    if (!v[0] || v[0] == '-' || errno || !end || *end || x < min || x > max)
        return s_opt_err(err, errlen, key, v, want);
    *out = x;
    return 0;
}

int tier_option_bool(const tier_config_t *cfg, const char *key, bool dflt, bool *out, char *err,
                     size_t errlen)
{
    const char *v = tier_config_get(cfg, key);
    *out = dflt;
    if (!v)
        return 0;
    if (strcmp(v, "true") == 0 || strcmp(v, "false") == 0) {
        *out = v[0] == 't';
        return 0;
    }
    return s_opt_err(err, errlen, key, v, "true or false");
}

int tier_option_enum(const tier_config_t *cfg, const char *key, const char *const *names, int dflt,
                     int *out, char *err, size_t errlen)
{
    const char *v = tier_config_get(cfg, key);
    *out = dflt;
    if (!v)
        return 0;
    char want[TIER_OPTION_VALUE_MAX] = "one of";
    size_t off = strlen(want);
    for (int i = 0; names[i]; i++) {
        if (strcmp(v, names[i]) == 0) {
            *out = i;
            return 0;
        }
        int k = snprintf(want + off, sizeof want - off, "%s \"%s\"", i ? "," : "", names[i]);
        if (k > 0 && (size_t)k < sizeof want - off)
            off += (size_t)k;
    }
    return s_opt_err(err, errlen, key, v, want);
}

static int s_check_keys(const struct tier_ops *ops, const tier_config_t *cfg, char *err,
                        size_t errlen)
{
    for (uint32_t i = 0; i < cfg->n_options; i++) {
        const char *key = cfg->options[i].key;
        bool known = false;
        for (size_t k = 0; ops->option_keys && ops->option_keys[k] && !known; k++)
            known = strcmp(ops->option_keys[k], key) == 0;
        if (known)
            continue;
        char list[TIER_OPTION_VALUE_MAX] = "";
        size_t off = 0;
        for (size_t k = 0; ops->option_keys && ops->option_keys[k]; k++) {
            int w = snprintf(list + off, sizeof list - off, "%s\"%s\"", k ? ", " : "",
                             ops->option_keys[k]);
            if (w > 0 && (size_t)w < sizeof list - off)
                off += (size_t)w;
        }
        snprintf(err, errlen, "%s: not an option of kind \"%s\" (it takes %s)", key, ops->kind,
                 off ? list : "none");
        return -EINVAL;
    }
    return 0;
}

int tier_configure(tier_config_t *cfg, char *err, size_t errlen)
{
    char scratch[8];
    if (!err || !errlen) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    if (!cfg) {
        snprintf(err, errlen, "tier ?: no config");
        return -EINVAL;
    }
    if (cfg->capacity == 0 || cfg->slot_size == 0) {
        snprintf(err, errlen, "capacity and slot size must be positive");
        return -EINVAL;
    }
    if (cfg->n_options > TIER_MAX_OPTIONS) {
        snprintf(err, errlen, "%u options, at most %d", cfg->n_options, TIER_MAX_OPTIONS);
        return -EINVAL;
    }
    const struct tier_ops *ops = tier_find(cfg->kind);
    if (!ops) {
        snprintf(err, errlen, "unknown kind \"%.*s\"", TIER_KIND_MAX, cfg->kind);
        return -EINVAL;
    }
    int rc = s_check_keys(ops, cfg, err, errlen);
    if (rc == 0 && ops->configure)
        rc = ops->configure(cfg, err, errlen);
    return rc;
}

/* ---- lifecycle ---- */

static uint64_t s_random_epoch(void)
{
    uint64_t e = 0;
    while (e == 0) {
        if (getrandom(&e, sizeof e, 0) != (ssize_t)sizeof e) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            e = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
                ((uint64_t)getpid() << 40);
        }
    }
    return e;
}

tier_t *tier_open(const tier_config_t *cfg, char *err, size_t errlen)
{
    char scratch[8], why[384];
    if (!err || !errlen) {
        err = scratch;
        errlen = sizeof scratch;
    }
    const char *name = cfg && cfg->name[0] ? cfg->name : "?";
    tier_t *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "tier %s: out of memory", name);
        return NULL;
    }
    if (cfg)
        t->cfg = *cfg;
    why[0] = '\0';
    if (tier_configure(cfg ? &t->cfg : NULL, why, sizeof why) < 0) {
        snprintf(err, errlen, "tier %s: %s", name, why);
        free(t);
        return NULL;
    }
    t->ops = tier_find(t->cfg.kind);
    t->epoch = s_random_epoch();
    int rc = t->ops->open(t, &t->cfg, why, sizeof why);
    if (rc < 0) {
        if (why[0])
            snprintf(err, errlen, "tier %s: %s", name, why);
        else
            snprintf(err, errlen, "tier %s: open (%s) failed: %s", name, t->cfg.kind,
                     strerror(-rc));
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

/* ---- single-slot dispatch ---- */

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
    return rc < 0 ? rc : t->ops->write(t, slot, iov, n);
}

int tier_read(tier_t *t, uint64_t slot, struct iovec *iov, int n)
{
    int rc = s_check_iov(t, slot, iov, n);
    return rc < 0 ? rc : t->ops->read(t, slot, iov, n);
}

int tier_put_header(tier_t *t, uint64_t slot, const tier_slot_header_t *h)
{
    if (slot >= t->cfg.capacity)
        return -ERANGE;
    if (!h || h->size > t->cfg.slot_size || h->state > TIER_SLOT_DELETING)
        return -EINVAL;
    return t->ops->put_header(t, slot, h);
}

int tier_get_header(tier_t *t, uint64_t slot, tier_slot_header_t *h)
{
    if (slot >= t->cfg.capacity)
        return -ERANGE;
    if (!h)
        return -EINVAL;
    return t->ops->get_header(t, slot, h);
}

/* Without an inventory op: every slot's header, in slot order. */
int tier_inventory(tier_t *t, tier_inventory_fn fn, void *arg)
{
    return tier_inventory_range(t, 0, UINT64_MAX, fn, arg);
}

int tier_inventory_range(tier_t *t, uint64_t from, uint64_t to, tier_inventory_fn fn, void *arg)
{
    if (!fn)
        return -EINVAL;
    if (from > t->cfg.capacity)
        return -ERANGE;
    if (to > t->cfg.capacity)
        to = t->cfg.capacity;
    if (t->ops->inventory)
        return t->ops->inventory(t, from, to, fn, arg);
    for (uint64_t i = from; i < to; i++) {
        tier_slot_header_t h;
        if (t->ops->get_header(t, i, &h) < 0 || h.state != TIER_SLOT_SERVING)
            continue;
        int rc = fn(arg, i, &h);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Without a probe op: present = the header says SERVING. */
int tier_probe(tier_t *t, const uint64_t *slots, size_t n, bool *present)
{
    if (n && (!slots || !present))
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (slots[i] >= t->cfg.capacity)
            return -ERANGE;
    if (t->ops->probe)
        return t->ops->probe(t, slots, n, present);
    for (size_t i = 0; i < n; i++) {
        tier_slot_header_t h;
        present[i] = t->ops->get_header(t, slots[i], &h) == 0 && h.state == TIER_SLOT_SERVING;
    }
    return 0;
}

void *tier_map(tier_t *t, size_t *len)
{
    return t->ops->map ? t->ops->map(t, len) : NULL;
}

/* ---- batches: the backend's op, or the one-by-one loop it must match ---- */

static int s_cancel_rest(tier_io_t *items, size_t from, size_t n)
{
    for (size_t i = from; i < n; i++)
        items[i].rc = -ECANCELED;
    return 0;
}

int tier_write_batch(tier_t *t, tier_io_t *items, size_t n)
{
    if (n && !items)
        return -EINVAL;
    if (t->ops->write_batch)
        return t->ops->write_batch(t, items, n);
    for (size_t i = 0; i < n; i++) {
        items[i].rc = tier_write(t, items[i].slot, items[i].iov, items[i].n);
        if (items[i].rc < 0)
            return s_cancel_rest(items, i + 1, n), items[i].rc;
    }
    return 0;
}

int tier_read_batch(tier_t *t, tier_io_t *items, size_t n)
{
    if (n && !items)
        return -EINVAL;
    if (t->ops->read_batch)
        return t->ops->read_batch(t, items, n);
    int first = 0;
    for (size_t i = 0; i < n; i++) {
        tier_slot_header_t h;
        tier_io_t *it = &items[i];
        it->size = 0;
        it->rc = tier_get_header(t, it->slot, &h);
        if (it->rc == 0 && h.state != TIER_SLOT_SERVING)
            it->rc = -ENODATA;
        if (it->rc == 0)
            it->rc = tier_read(t, it->slot, (struct iovec *)it->iov, it->n);
        if (it->rc == 0)
            it->size = h.size;
        if (it->rc < 0 && !first)
            first = it->rc;
    }
    return first;
}

int tier_commit_batch(tier_t *t, tier_io_t *items, size_t n)
{
    if (n && !items)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        items[i].hdr.state = TIER_SLOT_SERVING;
    if (t->ops->commit_batch)
        return t->ops->commit_batch(t, items, n);
    for (size_t i = 0; i < n; i++) {
        items[i].rc = tier_put_header(t, items[i].slot, &items[i].hdr);
        if (items[i].rc == 0)
            (void)tier_get_header(t, items[i].slot, &items[i].hdr);
        if (items[i].rc < 0)
            return s_cancel_rest(items, i + 1, n), items[i].rc;
    }
    return 0;
}

int tier_put_batch(tier_t *t, tier_io_t *items, size_t n)
{
    if (n && !items)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        items[i].hdr.state = TIER_SLOT_SERVING;
        items[i].hdr.size = 0;
        for (int j = 0; items[i].iov && j < items[i].n; j++)
            items[i].hdr.size += items[i].iov[j].iov_len;
    }
    tier_desc_t d;
    tier_describe(t, &d);
    if (d.write_commits && t->ops->write_batch)
        return t->ops->write_batch(t, items, n);
    tier_slot_header_t hdr[64];
    int first = 0;
    for (size_t i = 0; i < n && !first; i += 64) { /* write then commit, 64 at a time */
        size_t k = n - i < 64 ? n - i : 64;
        /* an expected checksum the bytes do not have: refused before anything of it
         * is written (as the nvme backend does), and the batch stops there */
        for (size_t j = 0; j < k; j++)
            if (items[i + j].hdr.checksum && items[i + j].iov &&
                tier_checksum(items[i + j].iov, items[i + j].n) != items[i + j].hdr.checksum) {
                items[i + j].rc = -EBADMSG;
                s_cancel_rest(items, i + j + 1, n);
                k = j;
                first = -EBADMSG;
                break;
            }
        for (size_t j = 0; j < k; j++) {
            hdr[j] = items[i + j].hdr;
            items[i + j].hdr.state = TIER_SLOT_EMPTY; /* a plain write */
        }
        int wrc = tier_write_batch(t, items + i, k);
        if (!first)
            first = wrc;
        size_t w = 0;
        while (w < k && items[i + w].rc == 0)
            w++;
        for (size_t j = w; j < k; j++) /* written after a failure: never committed */
            if (items[i + j].rc == 0)
                items[i + j].rc = -ECANCELED;
        for (size_t j = 0; j < k; j++)
            items[i + j].hdr = hdr[j];
        int rc = tier_commit_batch(t, items + i, w);
        if (!first)
            first = rc;
        if (first)
            s_cancel_rest(items, i + k, n);
    }
    return first;
}

int tier_clear_batch(tier_t *t, tier_io_t *items, size_t n)
{
    if (n && !items)
        return -EINVAL;
    if (t->ops->clear_batch)
        return t->ops->clear_batch(t, items, n);
    int first = 0;
    const tier_slot_header_t empty = {.state = TIER_SLOT_EMPTY};
    for (size_t i = 0; i < n; i++) {
        items[i].rc = tier_put_header(t, items[i].slot, &empty);
        if (items[i].rc < 0 && !first)
            first = items[i].rc;
    }
    return first;
}

/* ---- description, views, counters ---- */

void tier_describe(tier_t *t, tier_desc_t *out)
{
    memset(out, 0, sizeof *out);
    if (!t->ops->describe || t->ops->describe(t, out) < 0) {
        memset(out, 0, sizeof *out);
        out->access_kind = TIER_ACCESS_NONE;
    }
    if (out->epoch == 0 && t->epoch == 0)
        t->epoch = s_random_epoch(); /* a tier opened by a backend's own constructor */
    if (out->epoch == 0)
        out->epoch = t->epoch;
}

void *tier_slot_data(tier_t *t, uint64_t slot)
{
    if (slot >= t->cfg.capacity || !t->ops->slot_data)
        return NULL;
    return t->ops->slot_data(t, slot);
}

void tier_counters(tier_t *t, tier_counter_fn fn, void *arg)
{
    if (fn && t->ops->counters)
        t->ops->counters(t, fn, arg);
}
