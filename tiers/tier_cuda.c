/* tier_cuda.c — the CUDA runtime loader (tier_cuda.h): dlopen of one library,
 * dlsym of the entry points, and the few helpers every user needs (error text,
 * device identity, device lookup by index or UUID). Holds no state but the handle;
 * never includes a CUDA header. */
#include "tier_cuda.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const s_default_names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                              "libcudart.so.11.0", NULL};

/* Properties: name[256] then cudaUUID_t (16 bytes). Every runtime's struct is
 * well under this (about 1 KiB in CUDA 12); the rest is never read. */
#define S_PROP_BUF 16384
#define S_PROP_UUID_OFF 256

typedef struct {
    const char *symbol;
    size_t offset;
} s_sym_t;

#define S_SYM(name, field)                                                                         \
    {                                                                                              \
        name, offsetof(tier_cuda_t, field)                                                         \
    }
static const s_sym_t s_syms[] = {
    S_SYM("cudaGetDeviceCount", get_device_count),
    S_SYM("cudaSetDevice", set_device),
    S_SYM("cudaGetDevice", get_device),
    S_SYM("cudaMalloc", malloc_device),
    S_SYM("cudaFree", free_device),
    S_SYM("cudaMemcpyAsync", memcpy_async),
    S_SYM("cudaMemcpy", memcpy_sync),
    S_SYM("cudaStreamCreateWithFlags", stream_create),
    S_SYM("cudaStreamDestroy", stream_destroy),
    S_SYM("cudaStreamSynchronize", stream_synchronize),
    S_SYM("cudaStreamWaitEvent", stream_wait_event),
    S_SYM("cudaEventCreateWithFlags", event_create),
    S_SYM("cudaEventRecord", event_record),
    S_SYM("cudaEventSynchronize", event_synchronize),
    S_SYM("cudaEventQuery", event_query),
    S_SYM("cudaEventDestroy", event_destroy),
    S_SYM("cudaIpcGetMemHandle", ipc_get_mem_handle),
    S_SYM("cudaIpcOpenMemHandle", ipc_open_mem_handle),
    S_SYM("cudaIpcCloseMemHandle", ipc_close_mem_handle),
    S_SYM("cudaHostRegister", host_register),
    S_SYM("cudaHostUnregister", host_unregister),
    S_SYM("cudaPointerGetAttributes", pointer_get_attributes),
    S_SYM("cudaGetErrorString", get_error_string),
};

static void *s_open_one(const char *name, char *why, size_t whylen)
{
    dlerror();
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, whylen, "%s", e ? e : "cannot load");
    }
    return h;
}

static int s_resolve(tier_cuda_t *cu, char *err, size_t errlen)
{
    for (size_t i = 0; i < sizeof s_syms / sizeof s_syms[0]; i++) {
        void *fn = dlsym(cu->dl, s_syms[i].symbol);
        if (!fn) {
            snprintf(err, errlen,
                     "%s: symbol %s missing: not a CUDA runtime (libcudart), or one older "
                     "than CUDA 11",
                     cu->path, s_syms[i].symbol);
            return -ENOENT;
        }
        /* POSIX guarantees a data pointer from dlsym converts to a function pointer */
        memcpy((char *)cu + s_syms[i].offset, &fn, sizeof fn);
    }
    void *props = dlsym(cu->dl, "cudaGetDeviceProperties_v2");
    if (!props)
        props = dlsym(cu->dl, "cudaGetDeviceProperties");
    if (!props) {
        snprintf(err, errlen,
                 "%s: symbol cudaGetDeviceProperties_v2 (or cudaGetDeviceProperties) missing: "
                 "not a CUDA runtime",
                 cu->path);
        return -ENOENT;
    }
    memcpy(&cu->get_device_properties, &props, sizeof props);
    return 0;
}

tier_cuda_t *tier_cuda_open(const char *library, const char *config_key, char *err, size_t errlen)
{
    const char *key = config_key && config_key[0] ? config_key : "the cuda_library option";
    const char *env = getenv(TIER_CUDA_LIBRARY_ENV);
    const char *given = library && library[0] ? library : (env && env[0] ? env : NULL);
    tier_cuda_t *cu = calloc(1, sizeof *cu);
    if (!cu) {
        snprintf(err, errlen, "CUDA runtime: out of memory");
        return NULL;
    }
    char why[512] = "";
    if (given) {
        if (strlen(given) >= sizeof cu->path) {
            snprintf(err, errlen, "CUDA runtime %.64s...: path longer than %zu bytes", given,
                     sizeof cu->path - 1);
            goto out_free;
        }
        cu->dl = s_open_one(given, why, sizeof why);
        if (!cu->dl) {
            snprintf(err, errlen, "CUDA runtime %s (%s): %s; fix %s or %s", given,
                     library && library[0] ? key : TIER_CUDA_LIBRARY_ENV, why,
                     library && library[0] ? key : TIER_CUDA_LIBRARY_ENV,
                     library && library[0] ? TIER_CUDA_LIBRARY_ENV : key);
            goto out_free;
        }
        snprintf(cu->path, sizeof cu->path, "%s", given);
    } else {
        for (size_t i = 0; s_default_names[i] && !cu->dl; i++) {
            char one[256];
            cu->dl = s_open_one(s_default_names[i], one, sizeof one);
            if (cu->dl)
                snprintf(cu->path, sizeof cu->path, "%s", s_default_names[i]);
            else if (i == 0)
                snprintf(why, sizeof why, "%s", one);
        }
        if (!cu->dl) {
            snprintf(err, errlen,
                     "%s (also tried libcudart.so.13, .12, .11.0): no CUDA runtime "
                     "found; install it or set %s or %s to its path",
                     why, TIER_CUDA_LIBRARY_ENV, key);
            goto out_free;
        }
    }
    if (s_resolve(cu, err, errlen) < 0)
        goto out_close;
    return cu;

out_close:
    dlclose(cu->dl);
out_free:
    free(cu);
    return NULL;
}

void tier_cuda_close(tier_cuda_t **cu)
{
    if (!cu || !*cu)
        return;
    if ((*cu)->dl)
        dlclose((*cu)->dl);
    free(*cu);
    *cu = NULL;
}

static const char *s_error_name(int rc)
{
    switch (rc) {
    case TIER_CUDA_SUCCESS:
        return "cudaSuccess";
    case TIER_CUDA_ERR_INVALID_VALUE:
        return "cudaErrorInvalidValue";
    case TIER_CUDA_ERR_MEMORY_ALLOCATION:
        return "cudaErrorMemoryAllocation";
    case TIER_CUDA_ERR_INITIALIZATION:
        return "cudaErrorInitializationError";
    case TIER_CUDA_ERR_INSUFFICIENT_DRIVER:
        return "cudaErrorInsufficientDriver";
    case TIER_CUDA_ERR_NO_DEVICE:
        return "cudaErrorNoDevice";
    case TIER_CUDA_ERR_INVALID_DEVICE:
        return "cudaErrorInvalidDevice";
    case TIER_CUDA_ERR_INVALID_RESOURCE_HANDLE:
        return "cudaErrorInvalidResourceHandle";
    case TIER_CUDA_ERR_NOT_READY:
        return "cudaErrorNotReady";
    case TIER_CUDA_ERR_HOST_MEMORY_ALREADY_REGISTERED:
        return "cudaErrorHostMemoryAlreadyRegistered";
    case TIER_CUDA_ERR_HOST_MEMORY_NOT_REGISTERED:
        return "cudaErrorHostMemoryNotRegistered";
    case TIER_CUDA_ERR_NOT_SUPPORTED:
        return "cudaErrorNotSupported";
    default:
        return "cudaError";
    }
}

const char *tier_cuda_strerror(const tier_cuda_t *cu, int rc, char *buf, size_t len)
{
    const char *text = cu && cu->get_error_string ? cu->get_error_string(rc) : NULL;
    snprintf(buf, len, "%s (%d): %s", s_error_name(rc), rc, text ? text : "unknown error");
    return buf;
}

int tier_cuda_check(const tier_cuda_t *cu, int rc, const char *what, char *err, size_t errlen)
{
    if (rc == TIER_CUDA_SUCCESS)
        return 0;
    char text[256];
    snprintf(err, errlen, "%s: %s", what, tier_cuda_strerror(cu, rc, text, sizeof text));
    switch (rc) {
    case TIER_CUDA_ERR_MEMORY_ALLOCATION:
        return -ENOMEM;
    case TIER_CUDA_ERR_NO_DEVICE:
    case TIER_CUDA_ERR_INSUFFICIENT_DRIVER:
    case TIER_CUDA_ERR_INVALID_DEVICE:
        return -ENODEV;
    case TIER_CUDA_ERR_NOT_SUPPORTED:
        return -ENOTSUP;
    default:
        return -EIO;
    }
}

int tier_cuda_device_identity(const tier_cuda_t *cu, int dev, uint8_t uuid[TIER_CUDA_UUID_LEN],
                              char *name, size_t namelen, char *err, size_t errlen)
{
    /* zeroed, so a runtime writing less than we read leaves zeros, not garbage */
    unsigned char *props = calloc(1, S_PROP_BUF);
    if (!props) {
        snprintf(err, errlen, "device %d properties: out of memory", dev);
        return -ENOMEM;
    }
    char what[64];
    snprintf(what, sizeof what, "cudaGetDeviceProperties(device %d)", dev);
    int rc = tier_cuda_check(cu, cu->get_device_properties(props, dev), what, err, errlen);
    if (rc == 0) {
        if (uuid)
            memcpy(uuid, props + S_PROP_UUID_OFF, TIER_CUDA_UUID_LEN);
        if (name && namelen)
            snprintf(name, namelen, "%.*s", (int)(TIER_CUDA_NAME_MAX - 1), (const char *)props);
    }
    free(props);
    return rc;
}

void tier_cuda_uuid_format(const uint8_t u[TIER_CUDA_UUID_LEN], char *out, size_t len)
{
    snprintf(out, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}

static int s_hex(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int tier_cuda_uuid_parse(const char *text, uint8_t uuid[TIER_CUDA_UUID_LEN])
{
    if (!text)
        return -EINVAL;
    if (strncmp(text, "GPU-", 4) == 0)
        text += 4;
    size_t n = 0;
    int hi = -1;
    for (const char *p = text; *p; p++) {
        if (*p == '-')
            continue;
        int v = s_hex((unsigned char)*p);
        if (v < 0 || n == TIER_CUDA_UUID_LEN)
            return -EINVAL;
        if (hi < 0) {
            hi = v;
        } else {
            uuid[n++] = (uint8_t)(hi << 4 | v);
            hi = -1;
        }
    }
    return n == TIER_CUDA_UUID_LEN && hi < 0 ? 0 : -EINVAL;
}

int tier_cuda_find_device(const tier_cuda_t *cu, const char *spec, int *dev, char *err,
                          size_t errlen)
{
    int count = 0;
    int rc = tier_cuda_check(cu, cu->get_device_count(&count),
                             "no usable CUDA device (cudaGetDeviceCount)", err, errlen);
    if (rc < 0) {
        size_t used = strlen(err);
        if (used < errlen)
            snprintf(err + used, errlen - used, " (runtime %s; is the NVIDIA driver loaded?)",
                     cu->path);
        return rc == -EIO ? -ENODEV : rc;
    }
    if (count <= 0) {
        snprintf(err, errlen, "no CUDA device: cudaGetDeviceCount found none (runtime %s)",
                 cu->path);
        return -ENODEV;
    }
    if (!spec || !spec[0])
        spec = "0";
    char *end = NULL;
    errno = 0;
    unsigned long idx = strtoul(spec, &end, 10);
    if (isdigit((unsigned char)spec[0]) && end && *end == '\0' && errno == 0 && strlen(spec) < 6) {
        if (idx >= (unsigned long)count) {
            snprintf(err, errlen, "device %s: no such CUDA device (%d found, 0..%d)", spec, count,
                     count - 1);
            return -ENODEV;
        }
        *dev = (int)idx;
        return 0;
    }
    uint8_t want[TIER_CUDA_UUID_LEN];
    if (tier_cuda_uuid_parse(spec, want) < 0) {
        snprintf(err, errlen,
                 "device %s: neither a device index (0..%d) nor a GPU UUID "
                 "(GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, as nvidia-smi -L prints it)",
                 spec, count - 1);
        return -EINVAL;
    }
    for (int i = 0; i < count; i++) {
        uint8_t u[TIER_CUDA_UUID_LEN];
        if ((rc = tier_cuda_device_identity(cu, i, u, NULL, 0, err, errlen)) < 0)
            return rc;
        if (memcmp(u, want, sizeof u) == 0) {
            *dev = i;
            return 0;
        }
    }
    snprintf(err, errlen, "device %s: no CUDA device has this UUID (%d devices searched)", spec,
             count);
    return -ENODEV;
}
