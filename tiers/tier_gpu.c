/* tier_gpu.c — the `gpu` backend behind the ops table (tier_gpu.h): the device
 * arena, host-side slot headers, the pinned staging both ways and the CUDA IPC
 * description. Knows nothing of the scheduler, the bus or etcd; allocates only in
 * open. */
#include "tier_gpu.h"
#include "tier_checksum.h"

#include "tier_cuda.h"
#include "tier_seg_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define S_HALVES 2
#define S_NONE UINT64_MAX

typedef struct {
    tier_cuda_t *cu;
    int device;
    char device_name[TIER_CUDA_NAME_MAX];
    uint8_t uuid[TIER_CUDA_UUID_LEN];
    char uuid_text[TIER_CUDA_UUID_STR_LEN];
    char *arena; /* device pointer */
    uint64_t stride;
    uint64_t capacity, slot_size;
    tier_slot_header_t *hdrs;
    /* per slot: the size of the bytes last written through write; S_NONE: none */
    uint64_t *written;
    bool verify_put; /* given checksums are checked against the bytes (read back) */
    char *staging;   /* host, registered when pinned */
    size_t half;     /* bytes per staging half */
    bool pinned;
    tier_cuda_stream_t stream;
    tier_cuda_event_t done[S_HALVES]; /* the last copy through each half */
    uint64_t epoch;
    tier_cuda_ipc_handle_t ipc;
    bool ipc_ok;
    char ipc_why[128]; /* why there is no IPC handle */
    uint64_t bytes_h2d, bytes_d2h, cuda_errors;
    uint64_t direct_copies; /* ops whose host side was registered: no staging */
} s_gpu_t;

static const char *const s_option_keys[] = {"device", "cuda_library", "staging_bytes", "verify_put",
                                            NULL};

static int s_configure(tier_config_t *cfg, char *err, size_t errlen)
{
    uint64_t staging;
    bool verify;
    int rc = tier_option_u64(cfg, "staging_bytes", TIER_GPU_STAGING_MIN, TIER_GPU_STAGING_MAX,
                             TIER_GPU_STAGING_DEFAULT, &staging, err, errlen);
    if (rc == 0)
        rc = tier_option_bool(cfg, "verify_put", false, &verify, err, errlen);
    if (rc < 0)
        return rc;
    const char *dev = tier_config_get(cfg, "device");
    if (dev) {
        uint8_t u[TIER_CUDA_UUID_LEN];
        size_t digits = strspn(dev, "0123456789");
        bool index = dev[0] && digits == strlen(dev) && digits < 6;
        if (!index && tier_cuda_uuid_parse(dev, u) < 0) {
            snprintf(err, errlen,
                     "device: \"%.64s\" is neither a device index (0, 1, ...) nor a GPU UUID "
                     "(GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, as nvidia-smi -L prints it)",
                     dev);
            return -EINVAL;
        }
    }
    const char *lib = tier_config_get(cfg, "cuda_library");
    struct stat st;
    /* a path (not a soname the loader searches for) must be there now */
    if (lib && strchr(lib, '/') && stat(lib, &st) < 0) {
        snprintf(err, errlen, "cuda_library: %.100s: %s (a path to libcudart, or a soname)", lib,
                 strerror(errno));
        return -EINVAL;
    }
    if (lib && !lib[0]) {
        snprintf(err, errlen, "cuda_library: empty (leave it out to search the default names)");
        return -EINVAL;
    }
    if (cfg->slot_size > UINT64_MAX / 2 ||
        cfg->capacity > UINT64_MAX / (cfg->slot_size + TIER_GPU_SLOT_ALIGN)) {
        snprintf(err, errlen, "capacity x slot size does not fit in 64 bits");
        return -EOVERFLOW;
    }
    return 0;
}

static int s_check(s_gpu_t *g, int rc, const char *what, char *err, size_t errlen)
{
    char local[256];
    if (!err) {
        err = local;
        errlen = sizeof local;
    }
    int e = tier_cuda_check(g->cu, rc, what, err, errlen);
    if (e < 0)
        g->cuda_errors++;
    return e;
}

static void s_release(s_gpu_t *g)
{
    if (!g)
        return;
    if (g->cu) {
        for (int i = 0; i < S_HALVES; i++)
            if (g->done[i])
                (void)g->cu->event_destroy(g->done[i]);
        if (g->stream)
            (void)g->cu->stream_destroy(g->stream);
        if (g->pinned)
            (void)g->cu->host_unregister(g->staging);
        if (g->arena)
            (void)g->cu->free_device(g->arena);
    }
    free(g->staging);
    free(g->hdrs);
    free(g->written);
    tier_cuda_close(&g->cu);
    free(g);
}

/* The runtime, the device and what identifies it. */
static int s_open_device(s_gpu_t *g, const tier_config_t *cfg, char *err, size_t errlen)
{
    char key[TIER_NAME_MAX + 32];
    snprintf(key, sizeof key, "tiers.%s.cuda_library", cfg->name);
    char why[512] = "";
    g->cu = tier_cuda_open(tier_config_get(cfg, "cuda_library"), key, why, sizeof why);
    if (!g->cu) {
        snprintf(err, errlen, "%s", why);
        return -ENOENT;
    }
    int rc =
        tier_cuda_find_device(g->cu, tier_config_get(cfg, "device"), &g->device, why, sizeof why);
    if (rc == 0)
        rc = s_check(g, g->cu->set_device(g->device), "cudaSetDevice", why, sizeof why);
    if (rc == 0)
        rc = tier_cuda_device_identity(g->cu, g->device, g->uuid, g->device_name,
                                       sizeof g->device_name, why, sizeof why);
    if (rc < 0) {
        snprintf(err, errlen, "%s", why);
        return rc;
    }
    tier_cuda_uuid_format(g->uuid, g->uuid_text, sizeof g->uuid_text);
    return 0;
}

/* The arena, the stream and events, the staging (pinned where the runtime lets
 * us: unpinned staging still works, more slowly, and describe says so). */
static int s_open_memory(s_gpu_t *g, const tier_config_t *cfg, char *err, size_t errlen)
{
    char why[384] = "", what[96];
    uint64_t staging = TIER_GPU_STAGING_DEFAULT;
    (void)tier_option_u64(cfg, "staging_bytes", TIER_GPU_STAGING_MIN, TIER_GPU_STAGING_MAX,
                          TIER_GPU_STAGING_DEFAULT, &staging, why, sizeof why);
    g->half = (size_t)(staging / S_HALVES) & ~(size_t)(TIER_GPU_SLOT_ALIGN - 1);
    uint64_t total = g->capacity * g->stride;
    snprintf(what, sizeof what, "cudaMalloc(%" PRIu64 " bytes) on %s", total, g->uuid_text);
    int rc =
        s_check(g, g->cu->malloc_device((void **)&g->arena, (size_t)total), what, why, sizeof why);
    if (rc == 0)
        rc = s_check(g, g->cu->stream_create(&g->stream, TIER_CUDA_STREAM_NON_BLOCKING),
                     "cudaStreamCreateWithFlags", why, sizeof why);
    for (int i = 0; rc == 0 && i < S_HALVES; i++)
        rc = s_check(g, g->cu->event_create(&g->done[i], TIER_CUDA_EVENT_DISABLE_TIMING),
                     "cudaEventCreateWithFlags", why, sizeof why);
    if (rc < 0) {
        snprintf(err, errlen, "%s", why);
        return rc;
    }
    g->staging = aligned_alloc(TIER_GPU_SLOT_ALIGN, g->half * S_HALVES);
    g->hdrs = calloc(g->capacity, sizeof *g->hdrs);
    g->written = malloc(g->capacity * sizeof *g->written);
    if (!g->staging || !g->hdrs || !g->written) {
        snprintf(err, errlen, "out of host memory for staging and headers");
        return -ENOMEM;
    }
    for (uint64_t i = 0; i < g->capacity; i++)
        g->written[i] = S_NONE;
    g->pinned = g->cu->host_register(g->staging, g->half * S_HALVES,
                                     TIER_CUDA_HOST_REGISTER_PORTABLE) == TIER_CUDA_SUCCESS;
    int irc = g->cu->ipc_get_mem_handle(&g->ipc, g->arena);
    g->ipc_ok = irc == TIER_CUDA_SUCCESS;
    if (!g->ipc_ok)
        tier_cuda_strerror(g->cu, irc, g->ipc_why, sizeof g->ipc_why);
    return 0;
}

static int s_open(tier_t *t, const tier_config_t *cfg, char *err, size_t errlen)
{
    s_gpu_t *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    g->capacity = cfg->capacity;
    g->slot_size = cfg->slot_size;
    (void)tier_option_bool(cfg, "verify_put", false, &g->verify_put, err, errlen);
    g->stride =
        (cfg->slot_size + TIER_GPU_SLOT_ALIGN - 1) / TIER_GPU_SLOT_ALIGN * TIER_GPU_SLOT_ALIGN;
    int rc = s_open_device(g, cfg, err, errlen);
    if (rc == 0)
        rc = s_open_memory(g, cfg, err, errlen);
    if (rc < 0) {
        s_release(g);
        return rc;
    }
    g->epoch = tier_seg_new_epoch();
    t->priv = g;
    return 0;
}

static void s_close(tier_t *t)
{
    s_release(t->priv);
    t->priv = NULL;
}

/* ---- bytes through the staging ---- */

/* The tier's calls may come from another thread than open's (the actor's). */
static int s_bind(s_gpu_t *g)
{
    return s_check(g, g->cu->set_device(g->device), "cudaSetDevice", NULL, 0);
}

/* Host bytes of iov, from byte `off` on, `n` of them, into dst (or out of src). */
static void s_gather(const struct iovec *iov, int cnt, uint64_t off, char *dst, size_t n)
{
    for (int i = 0; i < cnt && n; i++) {
        if (off >= iov[i].iov_len) {
            off -= iov[i].iov_len;
            continue;
        }
        size_t k = iov[i].iov_len - off < n ? iov[i].iov_len - off : n;
        memcpy(dst, (const char *)iov[i].iov_base + off, k);
        dst += k;
        n -= k;
        off = 0;
    }
}

static void s_scatter(struct iovec *iov, int cnt, uint64_t off, const char *src, size_t n)
{
    for (int i = 0; i < cnt && n; i++) {
        if (off >= iov[i].iov_len) {
            off -= iov[i].iov_len;
            continue;
        }
        size_t k = iov[i].iov_len - off < n ? iov[i].iov_len - off : n;
        memcpy((char *)iov[i].iov_base + off, src, k);
        src += k;
        n -= k;
        off = 0;
    }
}

/* Host to device, a staging half at a time: half h is filled once its previous
 * copy is done, so the host copy of one piece overlaps the DMA of the other. */
static int s_h2d(s_gpu_t *g, char *dst, const struct iovec *iov, int cnt, uint64_t total)
{
    int rc = 0;
    for (uint64_t off = 0, k = 0; off < total && rc == 0; off += g->half, k++) {
        int h = (int)(k % S_HALVES);
        size_t n = total - off < g->half ? (size_t)(total - off) : g->half;
        char *buf = g->staging + (size_t)h * g->half;
        rc = s_check(g, g->cu->event_synchronize(g->done[h]), "cudaEventSynchronize", NULL, 0);
        if (rc == 0)
            s_gather(iov, cnt, off, buf, n);
        if (rc == 0)
            rc = s_check(g, g->cu->memcpy_async(dst + off, buf, n, TIER_CUDA_H2D, g->stream),
                         "cudaMemcpyAsync H2D", NULL, 0);
        if (rc == 0)
            rc = s_check(g, g->cu->event_record(g->done[h], g->stream), "cudaEventRecord", NULL, 0);
    }
    int src = s_check(g, g->cu->stream_synchronize(g->stream), "cudaStreamSynchronize", NULL, 0);
    if (rc == 0 && src == 0)
        g->bytes_h2d += total;
    return rc < 0 ? rc : src;
}

/* Device to host: the copy of piece k+1 is queued before piece k leaves the staging. */
static int s_d2h(s_gpu_t *g, const char *src, struct iovec *iov, int cnt, uint64_t total)
{
    uint64_t pieces = (total + g->half - 1) / g->half;
    int rc = 0;
    for (uint64_t k = 0; k < pieces + 1 && rc == 0; k++) {
        if (k < pieces) { /* queue piece k */
            int h = (int)(k % S_HALVES);
            uint64_t off = k * g->half;
            size_t n = total - off < g->half ? (size_t)(total - off) : g->half;
            char *buf = g->staging + (size_t)h * g->half;
            rc = s_check(g, g->cu->memcpy_async(buf, src + off, n, TIER_CUDA_D2H, g->stream),
                         "cudaMemcpyAsync D2H", NULL, 0);
            if (rc == 0)
                rc = s_check(g, g->cu->event_record(g->done[h], g->stream), "cudaEventRecord", NULL,
                             0);
        }
        if (rc == 0 && k > 0) { /* drain piece k-1 */
            uint64_t p = k - 1;
            int h = (int)(p % S_HALVES);
            uint64_t off = p * g->half;
            size_t n = total - off < g->half ? (size_t)(total - off) : g->half;
            rc = s_check(g, g->cu->event_synchronize(g->done[h]), "cudaEventSynchronize", NULL, 0);
            if (rc == 0)
                s_scatter(iov, cnt, off, g->staging + (size_t)h * g->half, n);
        }
    }
    if (rc < 0)
        (void)g->cu->stream_synchronize(g->stream); /* nothing of ours stays queued */
    else
        g->bytes_d2h += total;
    return rc;
}

static uint64_t s_iov_total(const struct iovec *iov, int n)
{
    uint64_t size = 0;
    for (int i = 0; i < n; i++)
        size += iov[i].iov_len;
    return size;
}

/* Whether every segment starts in host memory the runtime has registered (a host
 * tier's segment a caller registered, pinned frames): such bytes go straight
 * between them and the arena, without the staging. */
static bool s_registered(s_gpu_t *g, const struct iovec *iov, int n)
{
    for (int i = 0; i < n; i++) {
        tier_cuda_ptr_attr_t a;
        if (iov[i].iov_len && (g->cu->pointer_get_attributes(&a, iov[i].iov_base) != 0 ||
                               a.type != TIER_CUDA_MEM_HOST))
            return false;
    }
    return true;
}

/* The direct copies: one cudaMemcpyAsync per segment on the tier's stream, then one
 * synchronisation. */
static int s_direct(s_gpu_t *g, char *dev, const struct iovec *iov, int n, bool h2d)
{
    int rc = 0;
    uint64_t off = 0;
    for (int i = 0; i < n && rc == 0; off += iov[i].iov_len, i++)
        if (iov[i].iov_len)
            rc = s_check(g,
                         h2d ? g->cu->memcpy_async(dev + off, iov[i].iov_base, iov[i].iov_len,
                                                   TIER_CUDA_H2D, g->stream)
                             : g->cu->memcpy_async(iov[i].iov_base, dev + off, iov[i].iov_len,
                                                   TIER_CUDA_D2H, g->stream),
                         h2d ? "cudaMemcpyAsync H2D" : "cudaMemcpyAsync D2H", NULL, 0);
    int src = s_check(g, g->cu->stream_synchronize(g->stream), "cudaStreamSynchronize", NULL, 0);
    rc = rc < 0 ? rc : src;
    if (rc == 0) {
        uint64_t total = s_iov_total(iov, n);
        if (h2d)
            g->bytes_h2d += total;
        else
            g->bytes_d2h += total;
        g->direct_copies++;
    }
    return rc;
}

static int s_write(tier_t *t, uint64_t slot, const struct iovec *iov, int n)
{
    s_gpu_t *g = t->priv;
    uint64_t size = s_iov_total(iov, n);
    if (size > g->slot_size)
        return -EMSGSIZE;
    int rc = s_bind(g);
    if (rc < 0)
        return rc;
    /* the slot stops being served before its bytes change (tier.h) */
    g->hdrs[slot] = (tier_slot_header_t){.state = TIER_SLOT_WRITING, .size = size};
    g->written[slot] = S_NONE;
    char *dev = g->arena + slot * g->stride;
    rc = s_registered(g, iov, n) ? s_direct(g, dev, iov, n, true) : s_h2d(g, dev, iov, n, size);
    if (rc == 0)
        g->written[slot] = size;
    return rc;
}

static int s_read(tier_t *t, uint64_t slot, struct iovec *iov, int n)
{
    s_gpu_t *g = t->priv;
    uint64_t size = s_iov_total(iov, n);
    if (size > g->slot_size)
        return -EMSGSIZE;
    int rc = s_bind(g);
    if (rc < 0)
        return rc;
    char *dev = g->arena + slot * g->stride;
    return s_registered(g, iov, n) ? s_direct(g, dev, iov, n, false) : s_d2h(g, dev, iov, n, size);
}

/* The checksum of a slot's first size bytes, read back through the staging: the
 * arena is not host-readable, and hashing every write on its way in would cost
 * the write path a pass over the bytes that most puts (which bring their
 * checksum) never need. */
static int s_device_checksum(s_gpu_t *g, uint64_t slot, uint64_t size, uint64_t *sum)
{
    tier_checksum_state_t st;
    tier_checksum_reset(&st);
    const char *src = g->arena + slot * g->stride;
    int rc = s_bind(g);
    for (uint64_t off = 0; rc == 0 && off < size; off += g->half) {
        size_t n = size - off < g->half ? (size_t)(size - off) : g->half;
        rc = s_check(g, g->cu->memcpy_async(g->staging, src + off, n, TIER_CUDA_D2H, g->stream),
                     "cudaMemcpyAsync D2H", NULL, 0);
        if (rc == 0)
            rc = s_check(g, g->cu->stream_synchronize(g->stream), "cudaStreamSynchronize", NULL, 0);
        if (rc == 0)
            tier_checksum_update(&st, g->staging, n);
    }
    *sum = tier_checksum_digest(&st);
    return rc;
}

/* An unmapped backend checks SERVING headers itself (tier.h): checksum 0 takes the
 * checksum of the bytes written through write, read back (-ENODATA when none were,
 * -EINVAL when their size is not the header's); a given one is kept as the host
 * tier keeps it, and checked against the bytes (-EBADMSG) with verify_put. A block
 * written into the arena by a same-GPU client (IPC, no write here) keeps the
 * checksum its writer gives, provided the slot's header went through a state other
 * than SERVING since the last write here (which forgets that write's record). */
static int s_put_header(tier_t *t, uint64_t slot, const tier_slot_header_t *h)
{
    s_gpu_t *g = t->priv;
    if (h->size > g->slot_size || h->state > TIER_SLOT_DELETING)
        return -EINVAL;
    tier_slot_header_t n = *h;
    if (n.state == TIER_SLOT_SERVING) {
        bool known = g->written[slot] != S_NONE;
        if (known && g->written[slot] != n.size)
            return -EINVAL;
        if (n.checksum == 0 && !known)
            return -ENODATA;
        if (n.checksum == 0 || (known && g->verify_put)) {
            uint64_t sum;
            int rc = s_device_checksum(g, slot, n.size, &sum);
            if (rc < 0)
                return rc;
            if (n.checksum && n.checksum != sum)
                return -EBADMSG;
            n.checksum = sum;
        }
    } else {
        g->written[slot] = S_NONE;
    }
    g->hdrs[slot] = n;
    return 0;
}

static int s_get_header(tier_t *t, uint64_t slot, tier_slot_header_t *h)
{
    s_gpu_t *g = t->priv;
    *h = g->hdrs[slot];
    return 0;
}

static int s_inventory(tier_t *t, uint64_t from, uint64_t to, tier_inventory_fn fn, void *arg)
{
    s_gpu_t *g = t->priv;
    for (uint64_t i = from; i < to; i++) {
        if (g->hdrs[i].state != TIER_SLOT_SERVING)
            continue;
        int rc = fn(arg, i, &g->hdrs[i]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int s_probe(tier_t *t, const uint64_t *slots, size_t n, bool *present)
{
    s_gpu_t *g = t->priv;
    for (size_t i = 0; i < n; i++) {
        if (slots[i] >= g->capacity)
            return -ERANGE;
        present[i] = g->hdrs[slots[i]].state == TIER_SLOT_SERVING;
    }
    return 0;
}

static int s_describe(tier_t *t, tier_desc_t *out)
{
    const s_gpu_t *g = t->priv;
    out->epoch = g->epoch;
    out->slot_stride = g->stride;
    memcpy(out->gpu_uuid, g->uuid, sizeof out->gpu_uuid);
    snprintf(out->access, sizeof out->access, "%s", g->uuid_text);
    if (g->ipc_ok) {
        out->access_kind = TIER_ACCESS_CUDA_IPC;
        out->handle_len = sizeof g->ipc;
        memcpy(out->handle, &g->ipc, sizeof g->ipc);
    }
    /* detail is for people and bounded: the longest parts are cut, never the flags */
    int k = snprintf(out->detail, sizeof out->detail, "device %d (%.24s), %s staging %zu KiB",
                     g->device, g->device_name, g->pinned ? "pinned" : "UNPINNED",
                     g->half * S_HALVES / 1024);
    if (!g->ipc_ok && k > 0 && (size_t)k < sizeof out->detail)
        snprintf(out->detail + k, sizeof out->detail - (size_t)k, ", no CUDA IPC: %.*s",
                 (int)(sizeof out->detail - (size_t)k), g->ipc_why);
    return 0;
}

static void s_counters(tier_t *t, tier_counter_fn fn, void *arg)
{
    const s_gpu_t *g = t->priv;
    fn(arg, "bytes_written", g->bytes_h2d);
    fn(arg, "bytes_read", g->bytes_d2h);
    fn(arg, "cuda_errors", g->cuda_errors);
    fn(arg, "direct_copies", g->direct_copies);
    fn(arg, "staging_pinned", g->pinned ? 1 : 0);
}

const struct tier_ops tier_gpu_ops = {
    .version = TIER_OPS_VERSION,
    .kind = "gpu",
    .option_keys = s_option_keys,
    .path_key = NULL,
    .path_access = TIER_ACCESS_NONE,
    .configure = s_configure,
    .open = s_open,
    .close = s_close,
    .write = s_write,
    .read = s_read,
    .put_header = s_put_header,
    .get_header = s_get_header,
    .inventory = s_inventory,
    .probe = s_probe,
    .describe = s_describe,
    .counters = s_counters,
};
