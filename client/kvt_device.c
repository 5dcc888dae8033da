/* kvt_device.c — device buffers of the data role (kvt_device.h, kvtier.h "Device
 * buffers"). The CUDA runtime comes through tiers/tier_cuda.h (dlopen: no CUDA
 * headers or toolkit to build; the test fake tests/support/fakecuda runs it here).
 *
 * The staging is pinned memory of the job slots (aligned, cudaHostRegister'd),
 * kept by a slot across its jobs so a steady engine allocates nothing per job, and
 * bounded per handle (kvt_options_t.device_staging): a slot that needs more takes
 * the idle slots' staging back first. Copies go on the caller's stream or the
 * handle's own; each phase ends with the slot's event, which kvti_dev_pump polls:
 * nothing here blocks on the device except a handle closing with copies running. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_log.h"
#include "kvt_device.h"
#include "tier_cuda.h"

#define D_ALIGN 4096u

struct kvti_dev {
    tier_cuda_t *cu;
    tier_cuda_stream_t stream; /* the handle's own, made at open */
    uint64_t staged;           /* bytes of staging the slots hold */
    bool unpinned_logged;
};

static const char *s_cuerr(const struct kvti_dev *d, int rc, char *buf, size_t len)
{
    return tier_cuda_strerror(d->cu, rc, buf, len);
}

/* The handle's runtime and stream: opened at the first device submit, kept until
 * the handle closes. A failed open is tried again at the next submit (the message
 * names what is missing). */
static struct kvti_dev *s_open(kvt_client_t *c, const char *what, int *rc)
{
    if (c->dev)
        return c->dev;
    char err[512];
    tier_cuda_t *cu = tier_cuda_open(c->cuda_library[0] ? c->cuda_library : NULL,
                                     "kvt_options_t.cuda_library", err, sizeof err);
    if (!cu) {
        *rc = kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                        "device buffers need the CUDA runtime, which did not load: %s", err);
        return NULL;
    }
    struct kvti_dev *d = calloc(1, sizeof *d);
    if (!d) {
        tier_cuda_close(&cu);
        *rc = kvti_fail(c, KVT_INTERNAL, what, "out of memory");
        return NULL;
    }
    d->cu = cu;
    int e = cu->stream_create(&d->stream, TIER_CUDA_STREAM_NON_BLOCKING);
    if (e != 0) {
        char b[256];
        *rc = kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                        "device buffers: creating a CUDA stream failed: %s (is there a device, "
                        "and a driver for it?)",
                        s_cuerr(d, e, b, sizeof b));
        tier_cuda_close(&d->cu);
        free(d);
        return NULL;
    }
    c->dev = d;
    return d;
}

static void s_drop_stage(struct kvti_dev *d, kvti_job_t *j)
{
    if (!j->dstage)
        return;
    (void)d->cu->host_unregister(j->dstage); /* never registered: an error, ignored */
    free(j->dstage);
    d->staged -= j->dstage_cap;
    j->dstage = NULL;
    j->dstage_cap = 0;
}

/* The slot's staging of at least want bytes, within the handle's bound. */
static int s_stage(kvt_client_t *c, struct kvti_dev *d, const char *what, kvti_job_t *jobs,
                   uint32_t cap, kvti_job_t *j, uint64_t want)
{
    if (j->dstage_cap >= want)
        return 0;
    want = (want + D_ALIGN - 1) & ~(uint64_t)(D_ALIGN - 1);
    if (want > c->device_staging)
        return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                         "a device job of %" PRIu64 " bytes is above this handle's staging "
                         "bound (kvt_options_t.device_staging, %" PRIu64 " bytes): move fewer "
                         "keys or segments in one job",
                         want, c->device_staging);
    s_drop_stage(d, j);
    for (uint32_t i = 0; i < cap && d->staged + want > c->device_staging; i++)
        if (!jobs[i].used && &jobs[i] != j)
            s_drop_stage(d, &jobs[i]);
    if (d->staged + want > c->device_staging)
        return kvti_fail(c, KVT_BUSY, what,
                         "device staging is full: jobs in flight hold %" PRIu64 " of %" PRIu64
                         " bytes and this one needs %" PRIu64 ": collect jobs and submit again",
                         d->staged, c->device_staging, want);
    uint64_t size = want;
    uint8_t *p = aligned_alloc(D_ALIGN, size);
    if (!p)
        return kvti_fail(c, KVT_INTERNAL, what,
                         "out of memory for %" PRIu64 " bytes of device staging", size);
    int e = d->cu->host_register(p, size, TIER_CUDA_HOST_REGISTER_PORTABLE);
    if (e != 0 && !d->unpinned_logged) {
        char b[256];
        d->unpinned_logged = true;
        bus_info("client",
                 "%s: device staging is not pinned (cudaHostRegister: %s): copies "
                 "run at pageable speed",
                 c->name, s_cuerr(d, e, b, sizeof b));
    }
    j->dstage = p;
    j->dstage_cap = size;
    d->staged += size;
    return 0;
}

static int s_bools(bool **p, uint32_t *cap, uint32_t n)
{
    return kvti_grow((void **)p, cap, n ? n : 1, sizeof **p);
}

int kvti_dev_prepare(kvt_client_t *c, const char *what, kvti_job_t *jobs, uint32_t cap,
                     kvti_job_t *j, const kvt_xfer_t *x, void *const *ptrs, uint64_t n,
                     uint64_t piece)
{
    int rc = 0;
    struct kvti_dev *d = s_open(c, what, &rc);
    if (!d)
        return rc;
    char b[256];
    for (uint64_t k = 0; k < n; k++) {
        tier_cuda_ptr_attr_t a = {0};
        int e = d->cu->pointer_get_attributes(&a, ptrs[k]);
        if (e != 0 || (a.type != TIER_CUDA_MEM_DEVICE && a.type != TIER_CUDA_MEM_MANAGED))
            return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                             "buffer %" PRIu64 " (%p) is not CUDA device memory (%s): "
                             "KVT_MEM_CUDA takes device pointers only; host memory goes "
                             "with KVT_MEM_HOST",
                             k, ptrs[k],
                             e                              ? s_cuerr(d, e, b, sizeof b)
                             : a.type == TIER_CUDA_MEM_HOST ? "pinned host memory"
                                                            : "host memory");
    }
    if (kvti_grow((void **)&j->dev_ptrs, &j->dev_ptrs_cap, (uint32_t)n, sizeof *j->dev_ptrs) < 0)
        return kvti_fail(c, KVT_INTERNAL, what, "out of memory for a device job");
    if ((rc = s_stage(c, d, what, jobs, cap, j, n * piece)) < 0)
        return rc;
    if (!j->devent) {
        int e = d->cu->event_create(&j->devent, TIER_CUDA_EVENT_DISABLE_TIMING);
        if (e != 0) {
            j->devent = NULL;
            return kvti_fail(c, KVT_INTERNAL, what, "creating a CUDA event failed: %s",
                             s_cuerr(d, e, b, sizeof b));
        }
    }
    if (s_bools(&j->ddirect, &j->ddirect_cap, j->tok->n) < 0)
        return kvti_fail(c, KVT_INTERNAL, what, "out of memory for a device job");
    memset(j->ddirect, 0, (size_t)j->tok->n * sizeof *j->ddirect);
    j->dwaited = false;
    j->dqueued = false;
    memcpy(j->dev_ptrs, ptrs, n * sizeof *ptrs);
    void **host = j->seg_count ? j->seg_ptrs : j->bufs;
    for (uint64_t k = 0; k < n; k++)
        host[k] = j->dstage + k * piece;
    j->dev = d;
    j->dstream = x->stream;
    j->dwait = x->wait_event;
    j->ddone = x->done_event;
    j->dev_phase = KVTI_DEV_HOST;
    return 0;
}

int kvti_dev_check_host(kvt_client_t *c, const char *what, void *const *ptrs, uint64_t n)
{
    struct kvti_dev *d = c->dev;
    for (uint64_t k = 0; d && k < n; k++) {
        tier_cuda_ptr_attr_t a = {0};
        if (d->cu->pointer_get_attributes(&a, ptrs[k]) == 0 && a.type == TIER_CUDA_MEM_DEVICE)
            return kvti_fail(c, KVT_INVALID_ARGUMENT, what,
                             "buffer %" PRIu64 " (%p) is CUDA device memory: pass it with "
                             "kvt_xfer_t.mem = KVT_MEM_CUDA (kvt_submit_*_ex)",
                             k, ptrs[k]);
    }
    return 0;
}

/* The job's pieces: count and size (whole blocks, or a layer-wise job's segments). */
static uint64_t s_pieces(const kvti_job_t *j, uint64_t *piece, uint32_t *per_key)
{
    if (j->seg_count) {
        *piece = j->tok->segs->seg_bytes;
        *per_key = j->seg_count;
    } else {
        *piece = j->len;
        *per_key = 1;
    }
    return (uint64_t)j->tok->n * *per_key;
}

static tier_cuda_stream_t s_stream(const struct kvti_dev *d, const kvti_job_t *j)
{
    return j->dstream ? j->dstream : d->stream;
}

/* Records the runtime's refusal as the job's error: every key fails. */
static bool s_refused(struct kvti_dev *d, kvti_job_t *j, int e, const char *step)
{
    /* copies queued before the refusal still run: they must be done before the job
     * (and its staging) is let go */
    (void)d->cu->stream_synchronize(s_stream(d, j));
    char b[256];
    memset(j->tok->ok, 0, (size_t)j->tok->n * sizeof *j->tok->ok);
    kvti_job_error(j, KVT_INTERNAL, "device copy (%s) refused: %s: no key moved", step,
                   s_cuerr(d, e, b, sizeof b));
    return false;
}

bool kvti_dev_start_put(kvti_job_t *j)
{
    struct kvti_dev *d = j->dev;
    tier_cuda_stream_t s = s_stream(d, j);
    uint64_t piece;
    uint32_t per_key;
    uint64_t n = s_pieces(j, &piece, &per_key);
    int e = j->dwait ? d->cu->stream_wait_event(s, j->dwait, 0) : 0;
    if (e != 0)
        return s_refused(d, j, e, "waiting for wait_event");
    for (uint64_t k = 0; k < n; k++)
        if ((e = d->cu->memcpy_async(j->dstage + k * piece, j->dev_ptrs[k], piece, TIER_CUDA_D2H,
                                     s)) != 0)
            return s_refused(d, j, e, "device to host");
    if (j->ddone && (e = d->cu->event_record(j->ddone, s)) != 0)
        return s_refused(d, j, e, "recording done_event");
    if ((e = d->cu->event_record(j->devent, s)) != 0)
        return s_refused(d, j, e, "recording its event");
    j->dev_phase = KVTI_DEV_D2H;
    return true;
}

bool kvti_dev_defer_get(kvti_job_t *j)
{
    struct kvti_dev *d = j->dev;
    tier_cuda_stream_t s = s_stream(d, j);
    uint64_t piece;
    uint32_t per_key;
    (void)s_pieces(j, &piece, &per_key);
    int e = j->dwait && !j->dwaited ? d->cu->stream_wait_event(s, j->dwait, 0) : 0;
    if (e != 0)
        return s_refused(d, j, e, "waiting for wait_event");
    j->dwaited = j->dwait != NULL;
    for (uint32_t i = 0; i < j->tok->n; i++) {
        if (!j->tok->ok[i] || j->ddirect[i])
            continue; /* failed (its pages are left as they were), or in device memory */
        for (uint32_t p = 0; p < per_key; p++) {
            uint64_t k = (uint64_t)i * per_key + p;
            if ((e = d->cu->memcpy_async(j->dev_ptrs[k], j->dstage + k * piece, piece,
                                         TIER_CUDA_H2D, s)) != 0)
                return s_refused(d, j, e, "host to device");
        }
    }
    if (j->ddone && (e = d->cu->event_record(j->ddone, s)) != 0)
        return s_refused(d, j, e, "recording done_event");
    if ((e = d->cu->event_record(j->devent, s)) != 0)
        return s_refused(d, j, e, "recording its event");
    j->dev_phase = KVTI_DEV_H2D;
    return true;
}

static int s_direct(kvti_job_t *j, void *dst, const void *src, uint64_t n, int kind)
{
    struct kvti_dev *d = j->dev;
    tier_cuda_stream_t s = s_stream(d, j);
    if (j->dwait && !j->dwaited) {
        int e = d->cu->stream_wait_event(s, j->dwait, 0);
        if (e != 0)
            return e;
        j->dwaited = true;
    }
    j->dqueued = true;
    return d->cu->memcpy_async(dst, src, n, kind, s);
}

int kvti_dev_d2d(kvti_job_t *j, void *dst, const void *src, uint64_t n)
{
    return s_direct(j, dst, src, n, TIER_CUDA_D2D);
}

int kvti_dev_h2d(kvti_job_t *j, void *dst, const void *src, uint64_t n)
{
    return s_direct(j, dst, src, n, TIER_CUDA_H2D);
}

int kvti_dev_host_register(kvt_client_t *c, void *p, size_t n)
{
    return c->dev ? c->dev->cu->host_register(p, n, TIER_CUDA_HOST_REGISTER_PORTABLE) : -1;
}

void kvti_dev_host_unregister(kvt_client_t *c, void *p)
{
    if (c->dev && p)
        (void)c->dev->cu->host_unregister(p);
}

int kvti_dev_buffer_uuid(const kvti_job_t *j, uint8_t uuid[16])
{
    struct kvti_dev *d = j->dev;
    tier_cuda_ptr_attr_t a = {0};
    if (!d || !j->dev_ptrs || d->cu->pointer_get_attributes(&a, j->dev_ptrs[0]) != 0)
        return -1;
    char err[128];
    return tier_cuda_device_identity(d->cu, a.device, uuid, NULL, 0, err, sizeof err) < 0 ? -1 : 0;
}

int kvti_dev_ipc_open(kvt_client_t *c, const uint8_t handle[64], void **base)
{
    tier_cuda_ipc_handle_t h;
    memcpy(h.reserved, handle, sizeof h.reserved);
    return c->dev->cu->ipc_open_mem_handle(base, h, TIER_CUDA_IPC_LAZY_PEER_ACCESS);
}

void kvti_dev_ipc_close(kvt_client_t *c, void *base)
{
    if (c->dev && base)
        (void)c->dev->cu->ipc_close_mem_handle(base);
}

const char *kvti_dev_strerror(kvt_client_t *c, int rc, char *buf, size_t len)
{
    if (!c->dev) {
        snprintf(buf, len, "CUDA error %d", rc);
        return buf;
    }
    return s_cuerr(c->dev, rc, buf, len);
}

uint32_t kvti_dev_pump(kvti_job_t *jobs, uint32_t cap, kvti_dev_step_fn start,
                       kvti_dev_step_fn finish, void *arg)
{
    uint32_t busy = 0;
    for (uint32_t i = 0; i < cap; i++) {
        kvti_job_t *j = &jobs[i];
        if (!j->used || (j->dev_phase != KVTI_DEV_D2H && j->dev_phase != KVTI_DEV_H2D))
            continue;
        struct kvti_dev *d = j->dev;
        int e = d->cu->event_query(j->devent);
        if (e == TIER_CUDA_ERR_NOT_READY) {
            busy++;
            continue;
        }
        bool d2h = j->dev_phase == KVTI_DEV_D2H;
        if (d2h)
            j->dev_phase = KVTI_DEV_HOST; /* a get's finish sees H2D: its copy in is done */
        if (e != 0) {
            (void)s_refused(d, j, e, d2h ? "device to host" : "host to device");
            if (d2h) { /* the staging holds nothing: the host part does not run */
                j->open = 1;
                kvti_job_part_done(j);
                continue;
            }
        }
        if (d2h)
            start(arg, j);
        else
            finish(arg, j);
    }
    return busy;
}

void kvti_dev_quiesce(kvt_client_t *c, kvti_job_t *jobs, uint32_t cap)
{
    struct kvti_dev *d = c->dev;
    for (uint32_t i = 0; d && i < cap; i++) {
        kvti_job_t *j = &jobs[i];
        if (!j->used || j->dev_phase == KVTI_DEV_NONE)
            continue;
        if (j->dev_phase == KVTI_DEV_D2H || j->dev_phase == KVTI_DEV_H2D)
            (void)d->cu->event_synchronize(j->devent);
        else if (j->dqueued) /* host part running, direct copies queued on its stream */
            (void)d->cu->stream_synchronize(s_stream(d, j));
    }
}

void kvti_dev_check_direct(kvti_job_t *j)
{
    if (!kvti_token_lapsed(j->tok, NULL))
        return;
    for (uint32_t i = 0; i < j->tok->n; i++) {
        if (!j->ddirect[i] || !j->tok->ok[i])
            continue;
        j->tok->ok[i] = false;
        kvti_job_error(j, KVT_EXPIRED,
                       "the copy into device memory ran after the token's lease lapsed "
                       "(%" PRIu64 " ms): the slot may hold another block by now, so the "
                       "keys copied straight from it failed; prepare again",
                       j->tok->lease_ms);
    }
}

void kvti_dev_release(kvt_client_t *c, kvti_job_t *j)
{
    struct kvti_dev *d = c->dev;
    if (!d)
        return;
    if (j->devent && (j->dev_phase == KVTI_DEV_D2H || j->dev_phase == KVTI_DEV_H2D))
        (void)d->cu->event_synchronize(j->devent); /* the device still copies from/to it */
    s_drop_stage(d, j);
    if (j->devent)
        (void)d->cu->event_destroy(j->devent);
    j->devent = NULL;
    free(j->dev_ptrs);
    j->dev_ptrs = NULL;
    j->dev_ptrs_cap = 0;
    free(j->ddirect);
    j->ddirect = NULL;
    j->ddirect_cap = 0;
}

void kvti_dev_close(kvt_client_t *c)
{
    struct kvti_dev *d = c->dev;
    if (!d)
        return;
    (void)d->cu->stream_synchronize(d->stream);
    (void)d->cu->stream_destroy(d->stream);
    tier_cuda_close(&d->cu);
    free(d);
    c->dev = NULL;
}
