/* fakecuda.c — libkvt_fakecuda.so, a fake CUDA runtime for the suite (what it
 * models and its controls: fakecuda.h). It exports the runtime's entry names with
 * the C ABI tiers/tier_cuda.h declares, so the gpu tier and the client's device
 * paths run through the same dlopen as with libcudart. One lock guards all of its
 * state; queued work runs under it, in order, only at synchronisation points, so
 * runs are deterministic. Bounded tables (S_MAX_*): beyond them a call fails with
 * cudaErrorMemoryAllocation. Never used outside tests. */
#include "fakecuda.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

enum {
    E_OK = 0,
    E_INVALID_VALUE = 1,
    E_MEMORY_ALLOCATION = 2,
    E_INSUFFICIENT_DRIVER = 35,
    E_NO_DEVICE = 100,
    E_INVALID_DEVICE = 101,
    E_INVALID_RESOURCE_HANDLE = 400,
    E_NOT_READY = 600,
    E_HOST_ALREADY_REGISTERED = 712,
    E_HOST_NOT_REGISTERED = 713,
    E_NOT_SUPPORTED = 801,
};

enum { K_H2H = 0, K_H2D = 1, K_D2H = 2, K_D2D = 3, K_DEFAULT = 4 };

#define S_MAX_ALLOCS 256
#define S_MAX_REGS 256
#define S_MAX_STREAMS 256
#define S_PROP_UUID_OFF 256
#define S_IPC_MAGIC "KVTFCIPC"

typedef struct {
    char *base;
    size_t size;
    int fd;      /* the memfd (owner) or -1 (an IPC mapping) */
    uint64_t id; /* unique in the owner process: names the memfd */
    int device;
    bool ipc; /* opened from another process's handle */
    bool used;
} s_alloc_t;

typedef struct {
    char *base;
    size_t size;
    bool used;
} s_reg_t;

typedef struct s_event {
    int id;
    uint64_t issued; /* records queued */
    uint64_t done;   /* the latest record that ran */
    int refs;        /* queued operations naming it */
    bool destroyed;
} s_event_t;

enum { OP_COPY, OP_RECORD, OP_WAIT, OP_HOLD };

typedef struct s_op {
    int type;
    void *dst;
    const void *src;
    size_t n;
    s_event_t *ev;
    uint64_t seq; /* RECORD: this record; WAIT: the record waited for */
    bool released;
    struct s_op *next;
} s_op_t;

typedef struct {
    int id;
    s_op_t *head, *tail;
    size_t pending;
} s_stream_t;

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t s_cond = PTHREAD_COND_INITIALIZER;
static s_alloc_t s_allocs[S_MAX_ALLOCS];
static s_reg_t s_regs[S_MAX_REGS];
static s_stream_t s_default = {.id = 0};
static s_stream_t *s_streams[S_MAX_STREAMS] = {&s_default};
static int s_next_stream = 1, s_next_event = 1;
static uint64_t s_next_alloc = 1;
static uint64_t s_copies, s_unpinned, s_ipc_opened;
static __thread int s_current_device;

/* ---- environment and log ---- */

static bool s_env_on(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] && strcmp(v, "0") != 0;
}

static int s_devices(void)
{
    const char *v = getenv("KVT_FAKECUDA_DEVICES");
    return v && v[0] ? atoi(v) : 1;
}

static void s_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void s_log(const char *fmt, ...)
{
    const char *path = getenv("KVT_FAKECUDA_LOG");
    if (!path || !path[0])
        return;
    char line[512];
    int n = snprintf(line, sizeof line, "%d ", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    /* one write per line with O_APPEND: lines of several processes never interleave */
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    ssize_t w = write(fd, line, (size_t)n);
    (void)w;
    close(fd);
}

/* ---- memory classification ---- */

static s_alloc_t *s_alloc_of(const void *p, size_t n)
{
    const char *c = p;
    for (int i = 0; i < S_MAX_ALLOCS; i++) {
        s_alloc_t *a = &s_allocs[i];
        if (a->used && c >= a->base && c < a->base + a->size)
            return (size_t)(a->base + a->size - c) >= n ? a : NULL;
    }
    return NULL;
}

static bool s_is_device(const void *p)
{
    return s_alloc_of(p, 1) != NULL;
}

static s_reg_t *s_reg_of(const void *p, size_t n)
{
    const char *c = p;
    for (int i = 0; i < S_MAX_REGS; i++) {
        s_reg_t *r = &s_regs[i];
        if (r->used && c >= r->base && c < r->base + r->size)
            return (size_t)(r->base + r->size - c) >= n ? r : NULL;
    }
    return NULL;
}

static const char *s_kind_name(int kind)
{
    static const char *const names[] = {"H2H", "H2D", "D2H", "D2D", "DEFAULT"};
    return kind >= 0 && kind <= K_DEFAULT ? names[kind] : "?";
}

/* Checks a copy against its kind and the device ranges; counts unpinned host ends. */
static int s_check_copy(void *dst, const void *src, size_t n, int kind, bool *unpinned)
{
    bool dd = s_is_device(dst), sd = s_is_device(src);
    if ((dd && !s_alloc_of(dst, n)) || (sd && !s_alloc_of(src, n)))
        return E_INVALID_VALUE; /* runs past the end of a device allocation */
    switch (kind) {
    case K_H2D:
        if (!dd || sd)
            return E_INVALID_VALUE;
        break;
    case K_D2H:
        if (dd || !sd)
            return E_INVALID_VALUE;
        break;
    case K_D2D:
        if (!dd || !sd)
            return E_INVALID_VALUE;
        break;
    case K_H2H:
        if (dd || sd)
            return E_INVALID_VALUE;
        break;
    case K_DEFAULT:
        break;
    default:
        return E_INVALID_VALUE;
    }
    *unpinned = (!dd && !s_reg_of(dst, n)) || (!sd && !s_reg_of(src, n));
    return E_OK;
}

/* ---- streams ---- */

static s_stream_t *s_stream_of(void *s)
{
    /* NULL, cudaStreamLegacy (1) and cudaStreamPerThread (2): the default stream */
    if ((uintptr_t)s <= 2)
        return &s_default;
    for (int i = 1; i < S_MAX_STREAMS; i++)
        if (s_streams[i] == s)
            return s;
    return NULL;
}

static int s_enqueue(s_stream_t *st, s_op_t op)
{
    s_op_t *o = malloc(sizeof *o);
    if (!o)
        return E_MEMORY_ALLOCATION;
    *o = op;
    o->next = NULL;
    if (o->ev)
        o->ev->refs++;
    if (st->tail)
        st->tail->next = o;
    else
        st->head = o;
    st->tail = o;
    st->pending++;
    return E_OK;
}

static void s_event_unref(s_event_t *e)
{
    if (e && --e->refs == 0 && e->destroyed)
        free(e);
}

static bool s_runnable(const s_op_t *o)
{
    switch (o->type) {
    case OP_WAIT:
        return o->ev->done >= o->seq;
    case OP_HOLD:
        return o->released;
    default:
        return true;
    }
}

static void s_execute(s_stream_t *st, s_op_t *o)
{
    switch (o->type) {
    case OP_COPY:
        memmove(o->dst, o->src, o->n);
        s_copies++;
        s_log("exec copy stream=%d n=%zu", st->id, o->n);
        break;
    case OP_RECORD:
        if (o->seq > o->ev->done)
            o->ev->done = o->seq;
        s_log("exec record event=%d stream=%d", o->ev->id, st->id);
        break;
    case OP_WAIT:
        s_log("exec wait event=%d stream=%d", o->ev->id, st->id);
        break;
    case OP_HOLD:
        s_log("exec hold stream=%d", st->id);
        break;
    }
}

/* Runs every runnable head of every stream until nothing moves. Under s_lock. */
static void s_pump(void)
{
    bool moved = true, any = false;
    while (moved) {
        moved = false;
        for (int i = 0; i < S_MAX_STREAMS; i++) {
            s_stream_t *st = s_streams[i];
            while (st && st->head && s_runnable(st->head)) {
                s_op_t *o = st->head;
                st->head = o->next;
                if (!st->head)
                    st->tail = NULL;
                st->pending--;
                s_execute(st, o);
                s_event_unref(o->ev);
                free(o);
                moved = any = true;
            }
        }
    }
    if (any)
        pthread_cond_broadcast(&s_cond);
}

#define S_DRIVER_CHECK()                                                                           \
    do {                                                                                           \
        if (s_env_on("KVT_FAKECUDA_NO_DRIVER"))                                                    \
            return E_INSUFFICIENT_DRIVER;                                                          \
    } while (0)

/* ---- devices ---- */

EXPORT int cudaGetDeviceCount(int *count)
{
    S_DRIVER_CHECK();
    if (!count)
        return E_INVALID_VALUE;
    *count = s_devices();
    s_log("get_device_count %d", *count);
    return *count > 0 ? E_OK : E_NO_DEVICE;
}

EXPORT int cudaSetDevice(int dev)
{
    S_DRIVER_CHECK();
    if (dev < 0 || dev >= s_devices())
        return E_INVALID_DEVICE;
    s_current_device = dev;
    s_log("set_device %d", dev);
    return E_OK;
}

EXPORT int cudaGetDevice(int *dev)
{
    S_DRIVER_CHECK();
    if (!dev)
        return E_INVALID_VALUE;
    *dev = s_current_device;
    return E_OK;
}

static int s_properties(void *prop, int dev)
{
    S_DRIVER_CHECK();
    if (!prop)
        return E_INVALID_VALUE;
    if (dev < 0 || dev >= s_devices())
        return E_INVALID_DEVICE;
    unsigned char *p = prop;
    snprintf((char *)p, 256, "kvtier fake GPU %d", dev);
    static const unsigned char uuid[16] = {0x6b, 0x76, 0x74, 0x66, 0x61, 0x6b, 0x65, 0x63,
                                           0x75, 0x64, 0x61, 0x2d, 0x64, 0x65, 0x76, 0x00};
    memcpy(p + S_PROP_UUID_OFF, uuid, sizeof uuid);
    p[S_PROP_UUID_OFF + 15] = (unsigned char)dev;
    return E_OK;
}

EXPORT int cudaGetDeviceProperties_v2(void *prop, int dev)
{
    return s_properties(prop, dev);
}

EXPORT int cudaGetDeviceProperties(void *prop, int dev)
{
    return s_properties(prop, dev);
}

EXPORT const char *cudaGetErrorString(int rc)
{
    switch (rc) {
    case E_OK:
        return "no error";
    case E_INVALID_VALUE:
        return "invalid argument";
    case E_MEMORY_ALLOCATION:
        return "out of memory";
    case E_INSUFFICIENT_DRIVER:
        return "CUDA driver version is insufficient for CUDA runtime version (fake: "
               "KVT_FAKECUDA_NO_DRIVER)";
    case E_NO_DEVICE:
        return "no CUDA-capable device is detected";
    case E_INVALID_DEVICE:
        return "invalid device ordinal";
    case E_INVALID_RESOURCE_HANDLE:
        return "invalid resource handle";
    case E_NOT_READY:
        return "device not ready";
    case E_HOST_ALREADY_REGISTERED:
        return "part or all of the requested memory range is already mapped";
    case E_HOST_NOT_REGISTERED:
        return "pointer does not correspond to a registered memory region";
    case E_NOT_SUPPORTED:
        return "operation not supported";
    default:
        return "unknown error";
    }
}

/* ---- device memory ---- */

static s_alloc_t *s_free_alloc_slot(void)
{
    for (int i = 0; i < S_MAX_ALLOCS; i++)
        if (!s_allocs[i].used)
            return &s_allocs[i];
    return NULL;
}

EXPORT int cudaMalloc(void **ptr, size_t size)
{
    S_DRIVER_CHECK();
    if (!ptr || size == 0)
        return E_INVALID_VALUE;
    pthread_mutex_lock(&s_lock);
    int rc = E_MEMORY_ALLOCATION;
    s_alloc_t *a = s_free_alloc_slot();
    if (!a)
        goto out;
    uint64_t id = s_next_alloc++;
    char name[64];
    snprintf(name, sizeof name, "kvtfc-%" PRIu64, id);
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0)
        goto out;
    if (ftruncate(fd, (off_t)size) < 0) {
        close(fd);
        goto out;
    }
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        close(fd);
        goto out;
    }
    *a = (s_alloc_t){
        .base = base, .size = size, .fd = fd, .id = id, .device = s_current_device, .used = true};
    *ptr = base;
    rc = E_OK;
    s_log("malloc dev%" PRIu64 " size=%zu device=%d", id, size, s_current_device);
out:
    pthread_mutex_unlock(&s_lock);
    return rc;
}

EXPORT int cudaFree(void *ptr)
{
    S_DRIVER_CHECK();
    if (!ptr)
        return E_OK;
    pthread_mutex_lock(&s_lock);
    int rc = E_INVALID_VALUE;
    for (int i = 0; i < S_MAX_ALLOCS; i++) {
        s_alloc_t *a = &s_allocs[i];
        if (a->used && !a->ipc && a->base == ptr) {
            s_pump(); /* work queued on it runs first, as the runtime synchronises */
            munmap(a->base, a->size);
            close(a->fd);
            s_log("free dev%" PRIu64, a->id);
            a->used = false;
            rc = E_OK;
            break;
        }
    }
    pthread_mutex_unlock(&s_lock);
    return rc;
}

/* ---- copies ---- */

static int s_copy(void *dst, const void *src, size_t n, int kind, void *stream, bool async)
{
    S_DRIVER_CHECK();
    if ((!dst || !src) && n)
        return E_INVALID_VALUE;
    pthread_mutex_lock(&s_lock);
    bool unpinned = false;
    int rc = s_check_copy(dst, src, n, kind, &unpinned);
    s_stream_t *st = s_stream_of(stream);
    if (rc == E_OK && !st)
        rc = E_INVALID_RESOURCE_HANDLE;
    s_log("%s stream=%d kind=%s n=%zu%s rc=%d", async ? "memcpy_async" : "memcpy", st ? st->id : -1,
          s_kind_name(kind), n, unpinned ? " unpinned" : "", rc);
    if (rc == E_OK) {
        if (unpinned)
            s_unpinned++;
        if (async) {
            rc = s_enqueue(st, (s_op_t){.type = OP_COPY, .dst = dst, .src = src, .n = n});
        } else {
            s_pump();
            memmove(dst, src, n);
            s_copies++;
        }
    }
    pthread_mutex_unlock(&s_lock);
    return rc;
}

EXPORT int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream)
{
    return s_copy(dst, src, n, kind, stream, true);
}

EXPORT int cudaMemcpy(void *dst, const void *src, size_t n, int kind)
{
    return s_copy(dst, src, n, kind, NULL, false);
}

/* ---- streams and events ---- */

EXPORT int cudaStreamCreateWithFlags(void **stream, unsigned flags)
{
    S_DRIVER_CHECK();
    if (!stream)
        return E_INVALID_VALUE;
    pthread_mutex_lock(&s_lock);
    int rc = E_MEMORY_ALLOCATION;
    for (int i = 1; i < S_MAX_STREAMS; i++) {
        if (s_streams[i])
            continue;
        s_stream_t *st = calloc(1, sizeof *st);
        if (!st)
            break;
        st->id = s_next_stream++;
        s_streams[i] = st;
        *stream = st;
        s_log("stream_create stream=%d flags=%u", st->id, flags);
        rc = E_OK;
        break;
    }
    pthread_mutex_unlock(&s_lock);
    return rc;
}

EXPORT int cudaStreamDestroy(void *stream)
{
    S_DRIVER_CHECK();
    pthread_mutex_lock(&s_lock);
    s_stream_t *st = s_stream_of(stream);
    int rc = E_INVALID_RESOURCE_HANDLE;
    if (st && st != &s_default) {
        s_pump();
        /* what cannot run (a hold never released) is dropped, and said so */
        while (st->head) {
            s_op_t *o = st->head;
            st->head = o->next;
            s_log("dropped op=%d stream=%d", o->type, st->id);
            s_event_unref(o->ev);
            free(o);
        }
        for (int i = 1; i < S_MAX_STREAMS; i++)
            if (s_streams[i] == st)
                s_streams[i] = NULL;
        s_log("stream_destroy stream=%d", st->id);
        free(st);
        rc = E_OK;
    }
    pthread_mutex_unlock(&s_lock);
    return rc;
}

EXPORT int cudaStreamSynchronize(void *stream)
{
    S_DRIVER_CHECK();
    pthread_mutex_lock(&s_lock);
    s_stream_t *st = s_stream_of(stream);
    int rc = st ? E_OK : E_INVALID_RESOURCE_HANDLE;
    if (st) {
        s_log("stream_synchronize stream=%d", st->id);
        for (s_pump(); st->head; s_pump())
            pthread_cond_wait(&s_cond, &s_lock);
    }
    pthread_mutex_unlock(&s_lock);
    return rc;
}

EXPORT int cudaEventCreateWithFlags(void **event, unsigned flags)
{
    S_DRIVER_CHECK();
    if (!event)
        return E_INVALID_VALUE;
    s_event_t *e = calloc(1, sizeof *e);
    if (!e)
        return E_MEMORY_ALLOCATION;
    pthread_mutex_lock(&s_lock);
    e->id = s_next_event++;
    e->refs = 1; /* the caller's */
    s_log("event_create event=%d flags=%u", e->id, flags);
    pthread_mutex_unlock(&s_lock);
    *event = e;
    return E_OK;
}

EXPORT int cudaEventDestroy(void *event)
{
    S_DRIVER_CHECK();
    if (!event)
        return E_INVALID_RESOURCE_HANDLE;
    pthread_mutex_lock(&s_lock);
    s_event_t *e = event;
    s_log("event_destroy event=%d", e->id);
    e->destroyed = true;
    s_event_unref(e);
    pthread_mutex_unlock(&s_lock);
    return E_OK;
}

EXPORT int cudaEventRecord(void *event, void *stream)
{
    S_DRIVER_CHECK();
    if (!event)
        return E_INVALID_RESOURCE_HANDLE;
    pthread_mutex_lock(&s_lock);
    s_event_t *e = event;
    s_stream_t *st = s_stream_of(stream);
    int rc = E_INVALID_RESOURCE_HANDLE;
    if (st) {
        e->issued++;
        s_log("event_record event=%d stream=%d", e->id, st->id);
        rc = s_enqueue(st, (s_op_t){.type = OP_RECORD, .ev = e, .seq = e->issued});
    }
    pthread_mutex_unlock(&s_lock);
    return rc;
}

EXPORT int cudaStreamWaitEvent(void *stream, void *event, unsigned flags)
{
    S_DRIVER_CHECK();
    (void)flags;
    if (!event)
        return E_INVALID_RESOURCE_HANDLE;
    pthread_mutex_lock(&s_lock);
    s_event_t *e = event;
    s_stream_t *st = s_stream_of(stream);
    int rc = E_INVALID_RESOURCE_HANDLE;
    if (st) {
        s_log("stream_wait_event stream=%d event=%d", st->id, e->id);
        /* an event never recorded is complete: nothing to wait for */
        rc = e->issued ? s_enqueue(st, (s_op_t){.type = OP_WAIT, .ev = e, .seq = e->issued}) : E_OK;
    }
    pthread_mutex_unlock(&s_lock);
    return rc;
}

EXPORT int cudaEventSynchronize(void *event)
{
    S_DRIVER_CHECK();
    if (!event)
        return E_INVALID_RESOURCE_HANDLE;
    pthread_mutex_lock(&s_lock);
    s_event_t *e = event;
    s_log("event_synchronize event=%d", e->id);
    for (s_pump(); e->done < e->issued; s_pump())
        pthread_cond_wait(&s_cond, &s_lock);
    pthread_mutex_unlock(&s_lock);
    return E_OK;
}

EXPORT int cudaEventQuery(void *event)
{
    S_DRIVER_CHECK();
    if (!event)
        return E_INVALID_RESOURCE_HANDLE;
    pthread_mutex_lock(&s_lock);
    s_event_t *e = event;
    s_pump();
    int rc = e->done >= e->issued ? E_OK : E_NOT_READY;
    pthread_mutex_unlock(&s_lock);
    return rc;
}

/* ---- IPC ---- */

typedef struct {
    char magic[8];
    uint32_t pid;
    int32_t fd;
    uint64_t size;
    uint64_t id;
    int32_t device;
    char pad[28];
} s_ipc_t;
_Static_assert(sizeof(s_ipc_t) == 64, "an IPC handle is 64 bytes");

typedef struct {
    char reserved[64];
} s_ipc_handle_t;

EXPORT int cudaIpcGetMemHandle(s_ipc_handle_t *handle, void *ptr)
{
    S_DRIVER_CHECK();
    if (!handle || !ptr)
        return E_INVALID_VALUE;
    if (s_env_on("KVT_FAKECUDA_NO_IPC"))
        return E_NOT_SUPPORTED;
    pthread_mutex_lock(&s_lock);
    int rc = E_INVALID_VALUE;
    s_alloc_t *a = s_alloc_of(ptr, 1);
    if (a && !a->ipc) {
        /* like the runtime's, the handle names the whole allocation */
        s_ipc_t h = {.pid = (uint32_t)getpid(),
                     .fd = a->fd,
                     .size = a->size,
                     .id = a->id,
                     .device = a->device};
        memcpy(h.magic, S_IPC_MAGIC, 8);
        memcpy(handle, &h, sizeof h);
        s_log("ipc_get_mem_handle dev%" PRIu64, a->id);
        rc = E_OK;
    }
    pthread_mutex_unlock(&s_lock);
    return rc;
}

/* The memfd behind the handle is still the allocation it named (fd numbers are reused). */
static bool s_same_alloc(const s_ipc_t *h)
{
    char link[64], target[256], want[64];
    snprintf(link, sizeof link, "/proc/%u/fd/%d", h->pid, h->fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0)
        return false;
    target[n] = '\0';
    snprintf(want, sizeof want, "/memfd:kvtfc-%" PRIu64 " ", h->id);
    return strncmp(target, want, strlen(want)) == 0;
}

EXPORT int cudaIpcOpenMemHandle(void **ptr, s_ipc_handle_t handle, unsigned flags)
{
    S_DRIVER_CHECK();
    (void)flags;
    s_ipc_t h;
    memcpy(&h, &handle, sizeof h);
    if (!ptr || memcmp(h.magic, S_IPC_MAGIC, 8) != 0)
        return E_INVALID_VALUE;
    /* the runtime refuses a handle in the process that made it */
    if (h.pid == (uint32_t)getpid())
        return E_INVALID_RESOURCE_HANDLE;
    if (!s_same_alloc(&h)) {
        s_log("ipc_open_mem_handle pid=%u dev%" PRIu64 " rc=%d (gone)", h.pid, h.id,
              E_INVALID_RESOURCE_HANDLE);
        return E_INVALID_RESOURCE_HANDLE;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/fd/%d", h.pid, h.fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return E_INVALID_RESOURCE_HANDLE;
    void *base = mmap(NULL, h.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED)
        return E_MEMORY_ALLOCATION;
    pthread_mutex_lock(&s_lock);
    int rc = E_MEMORY_ALLOCATION;
    s_alloc_t *a = s_free_alloc_slot();
    if (a) {
        *a = (s_alloc_t){.base = base,
                         .size = h.size,
                         .fd = -1,
                         .id = h.id,
                         .device = h.device,
                         .ipc = true,
                         .used = true};
        *ptr = base;
        s_ipc_opened++;
        s_log("ipc_open_mem_handle pid=%u dev%" PRIu64 " size=%" PRIu64, h.pid, h.id, h.size);
        rc = E_OK;
    } else {
        munmap(base, h.size);
    }
    pthread_mutex_unlock(&s_lock);
    return rc;
}

EXPORT int cudaIpcCloseMemHandle(void *ptr)
{
    S_DRIVER_CHECK();
    pthread_mutex_lock(&s_lock);
    int rc = E_INVALID_VALUE;
    for (int i = 0; i < S_MAX_ALLOCS; i++) {
        s_alloc_t *a = &s_allocs[i];
        if (a->used && a->ipc && a->base == ptr) {
            s_pump();
            munmap(a->base, a->size);
            a->used = false;
            s_ipc_opened--;
            s_log("ipc_close_mem_handle dev%" PRIu64, a->id);
            rc = E_OK;
            break;
        }
    }
    pthread_mutex_unlock(&s_lock);
    return rc;
}

/* ---- host registration and pointer attributes ---- */

EXPORT int cudaHostRegister(void *ptr, size_t size, unsigned flags)
{
    S_DRIVER_CHECK();
    if (!ptr || size == 0)
        return E_INVALID_VALUE;
    pthread_mutex_lock(&s_lock);
    int rc = E_MEMORY_ALLOCATION;
    const char *c = ptr;
    for (int i = 0; i < S_MAX_REGS; i++) {
        s_reg_t *r = &s_regs[i];
        if (r->used && c < r->base + r->size && r->base < c + size) {
            rc = E_HOST_ALREADY_REGISTERED;
            goto out;
        }
    }
    if (s_is_device(ptr)) {
        rc = E_INVALID_VALUE;
        goto out;
    }
    for (int i = 0; i < S_MAX_REGS; i++) {
        if (!s_regs[i].used) {
            s_regs[i] = (s_reg_t){.base = ptr, .size = size, .used = true};
            rc = E_OK;
            break;
        }
    }
out:
    s_log("host_register size=%zu flags=%u rc=%d", size, flags, rc);
    pthread_mutex_unlock(&s_lock);
    return rc;
}

EXPORT int cudaHostUnregister(void *ptr)
{
    S_DRIVER_CHECK();
    pthread_mutex_lock(&s_lock);
    int rc = E_HOST_NOT_REGISTERED;
    for (int i = 0; i < S_MAX_REGS; i++) {
        if (s_regs[i].used && s_regs[i].base == ptr) {
            s_pump();
            s_regs[i].used = false;
            rc = E_OK;
            break;
        }
    }
    s_log("host_unregister rc=%d", rc);
    pthread_mutex_unlock(&s_lock);
    return rc;
}

typedef struct {
    int type;
    int device;
    void *device_pointer;
    void *host_pointer;
} s_attr_t;

EXPORT int cudaPointerGetAttributes(s_attr_t *attr, const void *ptr)
{
    S_DRIVER_CHECK();
    if (!attr)
        return E_INVALID_VALUE;
    pthread_mutex_lock(&s_lock);
    s_alloc_t *a = s_alloc_of(ptr, 1);
    if (a)
        *attr = (s_attr_t){.type = 2, .device = a->device, .device_pointer = (void *)ptr};
    else if (s_reg_of(ptr, 1))
        *attr = (s_attr_t){.type = 1,
                           .device = s_current_device,
                           .device_pointer = (void *)ptr,
                           .host_pointer = (void *)ptr};
    else
        *attr = (s_attr_t){.type = 0, .device = -2, .host_pointer = (void *)ptr};
    pthread_mutex_unlock(&s_lock);
    return E_OK;
}

/* ---- test controls (fakecuda.h) ---- */

EXPORT int kvt_fakecuda_stream_hold(void *stream)
{
    pthread_mutex_lock(&s_lock);
    s_stream_t *st = s_stream_of(stream);
    int rc = st ? (s_enqueue(st, (s_op_t){.type = OP_HOLD}) == E_OK ? 0 : -1) : -1;
    if (st)
        s_log("hold stream=%d", st->id);
    pthread_mutex_unlock(&s_lock);
    return rc;
}

EXPORT int kvt_fakecuda_stream_release(void *stream)
{
    pthread_mutex_lock(&s_lock);
    s_stream_t *st = s_stream_of(stream);
    int rc = -1;
    for (s_op_t *o = st ? st->head : NULL; o; o = o->next) {
        if (o->type == OP_HOLD && !o->released) {
            o->released = true;
            s_log("release stream=%d", st->id);
            rc = 0;
            break;
        }
    }
    s_pump();
    pthread_cond_broadcast(&s_cond);
    pthread_mutex_unlock(&s_lock);
    return rc;
}

EXPORT uint64_t kvt_fakecuda_counter(const char *name)
{
    uint64_t v = UINT64_MAX;
    pthread_mutex_lock(&s_lock);
    if (strcmp(name, "copies") == 0) {
        v = s_copies;
    } else if (strcmp(name, "unpinned_copies") == 0) {
        v = s_unpinned;
    } else if (strcmp(name, "ipc_opened") == 0) {
        v = s_ipc_opened;
    } else if (strcmp(name, "allocations") == 0 || strcmp(name, "registered") == 0) {
        v = 0;
        bool allocs = name[0] == 'a';
        for (int i = 0; i < S_MAX_ALLOCS; i++)
            v += allocs ? (s_allocs[i].used && !s_allocs[i].ipc) : s_regs[i].used;
    } else if (strcmp(name, "pending") == 0) {
        v = 0;
        for (int i = 0; i < S_MAX_STREAMS; i++)
            v += s_streams[i] ? s_streams[i]->pending : 0;
    }
    pthread_mutex_unlock(&s_lock);
    return v;
}
