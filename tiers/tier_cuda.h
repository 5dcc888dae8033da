/* tier_cuda.h — the CUDA runtime, loaded at run time (issue 11 §1). The few entry
 * points kvtier uses are declared here by the project itself and resolved with
 * dlsym from a library opened with dlopen, so nothing is built against CUDA headers
 * or a toolkit: one binary runs with the real libcudart, with the test fake
 * (tests/support/fakecuda, libkvt_fakecuda.so) or without either, in which case
 * only the processes that need a GPU refuse to start, with a message naming what is
 * missing.
 *
 * The declarations follow the CUDA runtime API's C ABI (cudaError_t is an int,
 * streams and events are opaque pointers, cudaIpcMemHandle_t is 64 bytes passed by
 * value). Device properties are the one struct whose layout changes between CUDA
 * versions: only its leading name[256] and the 16-byte uuid that follows are read,
 * from a buffer much larger than any version's struct.
 *
 * The library is the first that opens of: the path or name given to tier_cuda_open
 * (a gpu tier's cuda_library option), else $KVT_CUDA_LIBRARY, else libcudart.so,
 * libcudart.so.13, libcudart.so.12, libcudart.so.11.0. A handle is immutable after open and its
 * entry points may be called from any thread (the runtime's own rules apply). Static library
 * kvt_cuda, position independent so libkvtier links it too; it needs only libdl and never allocates
 * after open. */
#ifndef KVT_TIER_CUDA_H
#define KVT_TIER_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The environment variable naming the runtime (a path or a soname). */
#define TIER_CUDA_LIBRARY_ENV "KVT_CUDA_LIBRARY"
#define TIER_CUDA_PATH_MAX 256
#define TIER_CUDA_UUID_LEN 16
#define TIER_CUDA_IPC_HANDLE_LEN 64
#define TIER_CUDA_NAME_MAX 256
/* "GPU-" + 8-4-4-4-12 hex digits, as nvidia-smi prints it, and the NUL. */
#define TIER_CUDA_UUID_STR_LEN 41

/* cudaError_t values kvtier names (the rest are reported by number and string). */
enum {
    TIER_CUDA_SUCCESS = 0,
    TIER_CUDA_ERR_INVALID_VALUE = 1,
    TIER_CUDA_ERR_MEMORY_ALLOCATION = 2,
    TIER_CUDA_ERR_INITIALIZATION = 3,
    TIER_CUDA_ERR_INSUFFICIENT_DRIVER = 35,
    TIER_CUDA_ERR_NO_DEVICE = 100,
    TIER_CUDA_ERR_INVALID_DEVICE = 101,
    TIER_CUDA_ERR_INVALID_RESOURCE_HANDLE = 400,
    TIER_CUDA_ERR_NOT_READY = 600,
    TIER_CUDA_ERR_HOST_MEMORY_ALREADY_REGISTERED = 712,
    TIER_CUDA_ERR_HOST_MEMORY_NOT_REGISTERED = 713,
    TIER_CUDA_ERR_NOT_SUPPORTED = 801,
};

/* enum cudaMemcpyKind */
enum {
    TIER_CUDA_H2H = 0,
    TIER_CUDA_H2D = 1,
    TIER_CUDA_D2H = 2,
    TIER_CUDA_D2D = 3,
    TIER_CUDA_DEFAULT = 4,
};

/* Flags of the calls below (the runtime's values). */
#define TIER_CUDA_STREAM_NON_BLOCKING 0x01u    /* cudaStreamNonBlocking */
#define TIER_CUDA_EVENT_DISABLE_TIMING 0x02u   /* cudaEventDisableTiming */
#define TIER_CUDA_IPC_LAZY_PEER_ACCESS 0x01u   /* cudaIpcMemLazyEnablePeerAccess */
#define TIER_CUDA_HOST_REGISTER_PORTABLE 0x01u /* cudaHostRegisterPortable */

/* enum cudaMemoryType, in tier_cuda_ptr_attr_t.type */
enum {
    TIER_CUDA_MEM_UNREGISTERED = 0,
    TIER_CUDA_MEM_HOST = 1,
    TIER_CUDA_MEM_DEVICE = 2,
    TIER_CUDA_MEM_MANAGED = 3,
};

typedef void *tier_cuda_stream_t; /* cudaStream_t; NULL is the default stream */
typedef void *tier_cuda_event_t;  /* cudaEvent_t */

/* cudaIpcMemHandle_t: 64 opaque bytes, passed by value to cudaIpcOpenMemHandle. */
typedef struct tier_cuda_ipc_handle {
    char reserved[TIER_CUDA_IPC_HANDLE_LEN];
} tier_cuda_ipc_handle_t;

/* struct cudaPointerAttributes (CUDA 11 and later). */
typedef struct tier_cuda_ptr_attr {
    int type; /* TIER_CUDA_MEM_* */
    int device;
    void *device_pointer;
    void *host_pointer;
} tier_cuda_ptr_attr_t;

/* The resolved entry points: each is the runtime function of the comment's name,
 * returning a cudaError_t (0 success). */
typedef struct tier_cuda {
    void *dl;
    char path[TIER_CUDA_PATH_MAX];                 /* what was opened, as given to dlopen */
    int (*get_device_count)(int *count);           /* cudaGetDeviceCount */
    int (*set_device)(int device);                 /* cudaSetDevice */
    int (*get_device)(int *device);                /* cudaGetDevice */
    int (*malloc_device)(void **ptr, size_t size); /* cudaMalloc */
    int (*free_device)(void *ptr);                 /* cudaFree */
    int (*memcpy_async)(void *dst, const void *src, size_t n, int kind, /* cudaMemcpyAsync */
                        tier_cuda_stream_t stream);
    int (*memcpy_sync)(void *dst, const void *src, size_t n, int kind); /* cudaMemcpy */
    int (*stream_create)(tier_cuda_stream_t *s, unsigned flags); /* cudaStreamCreateWithFlags */
    int (*stream_destroy)(tier_cuda_stream_t s);                 /* cudaStreamDestroy */
    int (*stream_synchronize)(tier_cuda_stream_t s);             /* cudaStreamSynchronize */
    int (*stream_wait_event)(tier_cuda_stream_t s, tier_cuda_event_t e,
                             unsigned flags);                       /* cudaStreamWaitEvent */
    int (*event_create)(tier_cuda_event_t *e, unsigned flags);      /* cudaEventCreateWithFlags */
    int (*event_record)(tier_cuda_event_t e, tier_cuda_stream_t s); /* cudaEventRecord */
    int (*event_synchronize)(tier_cuda_event_t e);                  /* cudaEventSynchronize */
    int (*event_query)(tier_cuda_event_t e);   /* cudaEventQuery: 0 done, 600 not yet */
    int (*event_destroy)(tier_cuda_event_t e); /* cudaEventDestroy */
    int (*ipc_get_mem_handle)(tier_cuda_ipc_handle_t *h, void *dev_ptr); /* cudaIpcGetMemHandle */
    int (*ipc_open_mem_handle)(void **dev_ptr, tier_cuda_ipc_handle_t h,
                               unsigned flags);                   /* cudaIpcOpenMemHandle */
    int (*ipc_close_mem_handle)(void *dev_ptr);                   /* cudaIpcCloseMemHandle */
    int (*host_register)(void *ptr, size_t size, unsigned flags); /* cudaHostRegister */
    int (*host_unregister)(void *ptr);                            /* cudaHostUnregister */
    int (*pointer_get_attributes)(tier_cuda_ptr_attr_t *attr,
                                  const void *ptr); /* cudaPointerGetAttributes */
    /* cudaGetDeviceProperties_v2 where the runtime has it, else cudaGetDeviceProperties */
    int (*get_device_properties)(void *prop, int device);
    const char *(*get_error_string)(int rc); /* cudaGetErrorString */
} tier_cuda_t;

/* Opens the runtime (see the order above: library when non-empty, else the
 * environment, else the default names) and resolves every entry point. NULL with a
 * message for a person in err naming what is missing ("libcudart.so: cannot open
 * shared object file ...; set KVT_CUDA_LIBRARY or <config_key>", or the symbol a
 * library lacks). config_key names the setting in that message
 * ("tiers.gpu0.cuda_library"); NULL says "the cuda_library option". Opening does
 * not touch a device: the runtime initialises at the first call. */
tier_cuda_t *tier_cuda_open(const char *library, const char *config_key, char *err, size_t errlen);
/* dlclose and free; sets *cu to NULL; NULL or *cu NULL is fine. */
void tier_cuda_close(tier_cuda_t **cu);

/* "cudaErrorNoDevice (100): no CUDA-capable device is detected" style text of rc
 * into buf (the runtime's string, its number); returns buf. */
const char *tier_cuda_strerror(const tier_cuda_t *cu, int rc, char *buf, size_t len);

/* Formats "what: <tier_cuda_strerror>" into err when rc is not 0. Returns 0 for
 * success, else -EIO (-ENOMEM for an allocation failure, -ENODEV for no device or
 * driver) so callers can return it as the negative errno tiers/ uses. */
int tier_cuda_check(const tier_cuda_t *cu, int rc, const char *what, char *err, size_t errlen);

/* Device identity: name (NUL-terminated, may be NULL) and 16-byte UUID of device dev
 * from its properties. 0 or a negative errno with err filled. */
int tier_cuda_device_identity(const tier_cuda_t *cu, int dev, uint8_t uuid[TIER_CUDA_UUID_LEN],
                              char *name, size_t namelen, char *err, size_t errlen);

/* The UUID as nvidia-smi prints it ("GPU-1d4a...-..."): out holds
 * TIER_CUDA_UUID_STR_LEN bytes. */
void tier_cuda_uuid_format(const uint8_t uuid[TIER_CUDA_UUID_LEN], char *out, size_t len);
/* The reverse, accepting the text with or without "GPU-" and with or without the
 * dashes; -EINVAL for anything else. */
int tier_cuda_uuid_parse(const char *text, uint8_t uuid[TIER_CUDA_UUID_LEN]);

/* The device a gpu tier's `device` option names: a decimal index ("0") or a UUID
 * as above. Counts the devices first, so no driver or no device is reported here
 * ("no CUDA device: cudaErrorNoDevice ..."). 0 and *dev, or a negative errno with a
 * message in err (-ENODEV: none / not found, -EINVAL: neither an index nor a UUID). */
int tier_cuda_find_device(const tier_cuda_t *cu, const char *spec, int *dev, char *err,
                          size_t errlen);

#endif
