/* tier.h — a tier backend is a const ops table registered by name (DESIGN.md §7),
 * and this header is the only door to a medium: the tier actor, the benchmarks and
 * the tools reach every backend through these dispatchers, never through a
 * backend's own functions. The dispatcher (tier.c) checks slot ranges, options and
 * optional ops, and supplies the fallbacks (a batch op a backend leaves NULL runs
 * as a loop of its single-slot op; a backend without `describe` gets a random
 * epoch), so backends only implement the medium. Backends own the bytes and the
 * slot headers; they never know about the scheduler, the bus or etcd. Errors are
 * negative errno values.
 *
 * One registry (tier.c) maps kind names to wire kinds (schemas/common.proto
 * TierKind) to ops tables. A kind outside the tree is one shared object loaded by
 * path (tier_load): it exports TIER_PLUGIN_ENTRY, a function returning its ops
 * table, and configures through the plain-C options below — never through the
 * service's own config types. Of this process a plug-in may call only
 * tier_config_get / tier_config_set, the tier_option_* readers and tier_checksum
 * (tier_checksum.h): the executables export exactly those
 * (tiers/tier_plugin_api.list). A plug-in's write must stop serving a SERVING
 * slot before its bytes change (see write below): nothing above it can. */
#ifndef KVT_TIER_H
#define KVT_TIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "tier_key.h"
#include "tier_slot_header.h"

/* Version 2: options, configure, batch ops, describe, slot_data, counters, and
 * open with an error buffer. A table of another version is refused. */
#define TIER_OPS_VERSION 2
#define TIER_NAME_MAX 64
#define TIER_KIND_MAX 16
#define TIER_PATH_MAX 256
#define TIER_MAX_OPTIONS 16
#define TIER_OPTION_KEY_MAX 32
#define TIER_OPTION_VALUE_MAX 128
#define TIER_DETAIL_MAX 128
#define TIER_MAX_BACKENDS 16 /* kinds registered in one process */

/* The symbol a plug-in exports: `const struct tier_ops *kvtier_tier_entry(uint32_t
 * host_version)`, called with TIER_OPS_VERSION; it returns its table (whose
 * version the loader checks) or NULL when it cannot serve that host. */
#define TIER_PLUGIN_ENTRY "kvtier_tier_entry"

/* A backend option: a key the backend declares (tier_ops.option_keys) and its
 * value as text ("32", "true", "dsync"). The backend parses and checks it. */
typedef struct tier_option {
    char key[TIER_OPTION_KEY_MAX];
    char value[TIER_OPTION_VALUE_MAX];
} tier_option_t;

/* One line for a person, without a trailing newline. */
typedef void (*tier_log_fn)(void *arg, const char *line);

typedef struct tier_config {
    char name[TIER_NAME_MAX]; /* "host0", "nvme0" */
    char kind[TIER_KIND_MAX]; /* a registered kind: "host", "nvme", a plug-in's */
    uint64_t capacity;        /* slots */
    uint64_t slot_size;       /* bytes per slot */
    /* The medium's address as the backend reads it (host: the shm name
     * "/kvtier-host0"; nvme: the file). configure may fill a default from scope. */
    char path[TIER_PATH_MAX];
    /* Unique to this tier among the deployments of one host ("kvtier-<cluster>-
     * <name>"); a backend may derive default addresses from it. May be empty. */
    char scope[TIER_NAME_MAX * 2];
    uint32_t n_options;
    tier_option_t options[TIER_MAX_OPTIONS];
    tier_log_fn log; /* the backend's log lines; NULL: stderr */
    void *log_arg;
} tier_config_t;

/* One item of a batch op. write: iov holds the bytes (1..TIER_MAX_IOV segments,
 * total <= slot size); read: iov receives them and size is set; commit: hdr in
 * (key, instance, size, checksum or 0, deadline) and out (as stored); clear: slot
 * only. rc is each item's 0 or negative errno (-ECANCELED: not tried). */
typedef struct tier_io {
    uint64_t slot;
    const struct iovec *iov; /* iov_base is written by reads */
    int n;
    tier_slot_header_t hdr;
    uint64_t size; /* read: bytes read */
    int rc;
} tier_io_t;

/* How a client on the same host reaches the slot bytes without a message. */
enum tier_access {
    TIER_ACCESS_NONE = 0, /* frames through the tier actor only */
    TIER_ACCESS_SHM = 1,  /* a POSIX shm segment (tiers/tier_seg.h) named by access */
    /* device memory of one GPU (tiers/tier_gpu.h): a CUDA IPC handle of the arena in
     * handle, the GPU's UUID in gpu_uuid (access: its text), slot i at
     * i * slot_stride in the arena */
    TIER_ACCESS_CUDA_IPC = 2,
};

#define TIER_DESC_HANDLE_MAX 64 /* a cudaIpcMemHandle_t */
#define TIER_DESC_UUID_LEN 16

typedef struct tier_desc {
    uint64_t epoch;               /* the incarnation: a new one means the bytes are gone */
    uint32_t access_kind;         /* enum tier_access */
    char access[TIER_PATH_MAX];   /* the descriptor: shm name, later an IPC handle or address */
    char detail[TIER_DETAIL_MAX]; /* for people: engine, queue depth... */
    /* reads check the bytes against the header's checksum themselves (and refuse
     * a mismatch, -EBADMSG): a caller need not hash them again */
    bool reads_verified;
    /* the tier is configured to have its reads checked (a backend option: host
     * verify_reads): where reads_verified is false, the tier actor checks each block
     * it serves, and same-host readers check what they copy (tier_seg.h) */
    bool verify_reads;
    /* write_batch commits the items whose hdr.state is SERVING with their bytes
     * (a put, tier_put_batch): nvme writes each block's bytes and header record
     * in one I/O. false: tier_put_batch writes, then commits. */
    bool write_commits;
    /* TIER_ACCESS_CUDA_IPC only (zero otherwise). Valid for this epoch: a handle of
     * an earlier incarnation names memory that is gone. */
    uint32_t handle_len;
    uint8_t handle[TIER_DESC_HANDLE_MAX];
    uint8_t gpu_uuid[TIER_DESC_UUID_LEN];
    uint64_t slot_stride; /* bytes between slot starts in the mapping */
    /* The tier actor serves its bytes over UCX too (the remote tier's transport
     * ucx): ucx_regions staging regions of ucx_region_bytes each (0: frames only). */
    uint32_t ucx_regions;
    uint64_t ucx_region_bytes;
    char ucx_address[64]; /* set by the tier actor once it listens: "ip:port" */
} tier_desc_t;

struct tier;
/* Called once per SERVING slot, in slot order. Returning 0 continues the walk;
 * any other value stops it and becomes the return value of inventory. */
typedef int (*tier_inventory_fn)(void *arg, uint64_t slot, const tier_slot_header_t *h);
/* One named counter (bytes_read, checksum_failures...). */
typedef void (*tier_counter_fn)(void *arg, const char *name, uint64_t value);

struct tier_ops {
    uint32_t version; /* TIER_OPS_VERSION */
    const char *kind;
    /* The option keys the backend reads, NULL-terminated (NULL: none); any
     * other key is refused by tier_configure before the backend sees it. */
    const char *const *option_keys;
    /* The deployment file's key for tier_config.path ("shm", "path"); NULL:
     * the backend takes no address. */
    const char *path_key;
    /* What the address names for same-host clients (enum tier_access): a
     * supervisor removes a killed host tier's segment by it. */
    uint32_t path_access;
    /* Checks cfg (options, path, geometry) and fills defaults into it; never
     * touches a medium. Errors for a person in err ("queue_depth: 0 is not in
     * 1..4096"). Optional. */
    int (*configure)(tier_config_t *cfg, char *err, size_t errlen);
    int (*open)(struct tier *t, const tier_config_t *cfg, char *err, size_t errlen);
    void (*close)(struct tier *t);
    /* write: before new bytes go over a slot it stops being served (a SERVING
     * header becomes WRITING first), so an overwritten block is never read. */
    int (*write)(struct tier *t, uint64_t slot, const struct iovec *iov, int n);
    int (*read)(struct tier *t, uint64_t slot, struct iovec *iov, int n);
    /* put_header(SERVING) with checksum 0: the backend stores the checksum of
     * the bytes when it knows it (nvme), else 0. */
    int (*put_header)(struct tier *t, uint64_t slot, const tier_slot_header_t *h);
    int (*get_header)(struct tier *t, uint64_t slot, tier_slot_header_t *h);
    /* SERVING slots of [from, to) in slot order (to <= capacity; fn may stop it). */
    int (*inventory)(struct tier *t, uint64_t from, uint64_t to, tier_inventory_fn fn, void *arg);
    int (*probe)(struct tier *t, const uint64_t *slots, size_t n, bool *present);
    /* Optional batches, with the outcome of the fallback loops in tier.c. */
    int (*write_batch)(struct tier *t, tier_io_t *items, size_t n);
    int (*read_batch)(struct tier *t, tier_io_t *items, size_t n);
    int (*commit_batch)(struct tier *t, tier_io_t *items, size_t n);
    int (*clear_batch)(struct tier *t, tier_io_t *items, size_t n);
    /* Optional: epoch, same-host access, detail. */
    int (*describe)(struct tier *t, tier_desc_t *out);
    /* Optional: the bytes of a slot in a mapping that stays valid while the tier
     * is open (zero-copy reads, checksums of mapped bytes); NULL when none. */
    void *(*slot_data)(struct tier *t, uint64_t slot);
    /* Optional: the backend's counters since open. */
    void (*counters)(struct tier *t, tier_counter_fn fn, void *arg);
    void *(*map)(struct tier *t, size_t *len); /* optional: the whole shared mapping */
};

/* Public so backends can reach their state; callers treat it as opaque. */
typedef struct tier {
    const struct tier_ops *ops;
    tier_config_t cfg;
    void *priv;     /* backend state */
    uint64_t epoch; /* tier.c's, for backends without describe */
} tier_t;

/* ---- registry ---- */

/* Built-in backends are registered on first use; tier_register adds another.
 * -EEXIST for a duplicate kind, -EINVAL for a table with the wrong version or
 * without kind/open/close/write/read/put_header/get_header, -ENOSPC beyond
 * TIER_MAX_BACKENDS. */
int tier_register(const struct tier_ops *ops);
const struct tier_ops *tier_find(const char *kind);

/* The wire kind (schemas/common.proto TierKind) of a kind name: 0 (UNSPECIFIED)
 * for a kind the wire has no number for (a plug-in). And the reverse: NULL for
 * a number no registered kind has. */
uint32_t tier_kind_wire(const char *kind);
const char *tier_kind_name(uint32_t wire);

/* Loads a backend from a shared object by path (dlopen RTLD_NOW | RTLD_LOCAL),
 * checks it and registers it; the object stays loaded for the process's life.
 * Loading a path already loaded returns its table again. NULL with one of these
 * in err: "file not found", "cannot load" (dlerror), "symbol missing", "version
 * mismatch", "invalid ops table", "kind already registered". */
const struct tier_ops *tier_load(const char *path, char *err, size_t errlen);

/* ---- options (the plain-C configuration interface) ---- */

/* Sets key to value in cfg (replacing an earlier value): 0, -EINVAL (empty or
 * NULL key), -ENAMETOOLONG (key or value over its bound), -ENOSPC (full). */
int tier_config_set(tier_config_t *cfg, const char *key, const char *value);
/* The value of key, or NULL when unset. */
const char *tier_config_get(const tier_config_t *cfg, const char *key);

/* Option readers for backends' configure/open: absent → dflt; a value that is
 * not what the reader expects is -EINVAL with "KEY: why" in err. */
int tier_option_u64(const tier_config_t *cfg, const char *key, uint64_t min, uint64_t max,
                    uint64_t dflt, uint64_t *out, char *err, size_t errlen);
int tier_option_bool(const tier_config_t *cfg, const char *key, bool dflt, bool *out, char *err,
                     size_t errlen);
/* names is NULL-terminated; *out is the index of the value. */
int tier_option_enum(const tier_config_t *cfg, const char *key, const char *const *names, int dflt,
                     int *out, char *err, size_t errlen);

/* Checks cfg for its kind without opening anything: the kind is registered, the
 * geometry is positive, every option key is one the backend declares, then the
 * backend's configure (which may fill defaults into cfg). 0, or a negative errno
 * with a message for a person in err. */
int tier_configure(tier_config_t *cfg, char *err, size_t errlen);

/* ---- lifecycle ---- */

/* Opens a tier of cfg->kind (tier_configure first). NULL on failure with a
 * message for a person in err. */
tier_t *tier_open(const tier_config_t *cfg, char *err, size_t errlen);
void tier_close(tier_t **t);

/* ---- dispatchers ---- */

/* Single-slot ops: check the slot range (-ERANGE), the iov count and sizes
 * (-EINVAL, -EMSGSIZE), optional ops (-ENOTSUP), then call the backend. */
int tier_write(tier_t *t, uint64_t slot, const struct iovec *iov, int n);
int tier_read(tier_t *t, uint64_t slot, struct iovec *iov, int n);
int tier_put_header(tier_t *t, uint64_t slot, const tier_slot_header_t *h);
int tier_get_header(tier_t *t, uint64_t slot, tier_slot_header_t *h);
int tier_inventory(tier_t *t, tier_inventory_fn fn, void *arg);
/* The same walk over slots [from, to) only (a bounded page; to is capped at the
 * capacity); -ERANGE when from is past the capacity. */
int tier_inventory_range(tier_t *t, uint64_t from, uint64_t to, tier_inventory_fn fn, void *arg);
int tier_probe(tier_t *t, const uint64_t *slots, size_t n, bool *present);
void *tier_map(tier_t *t, size_t *len);

/* Batches: each returns 0 when every item succeeded, else the first item's
 * error. write and commit behave like a one-by-one loop that stops at the
 * first failure (the items after it are -ECANCELED); read and clear try every
 * item. commit writes SERVING headers (hdr.state is set). */
int tier_write_batch(tier_t *t, tier_io_t *items, size_t n);
int tier_read_batch(tier_t *t, tier_io_t *items, size_t n);
int tier_commit_batch(tier_t *t, tier_io_t *items, size_t n);
/* Puts: each item's bytes (iov) and its SERVING header (hdr in: key, instance,
 * deadline, checksum 0 or the expected one; hdr.size is set to the bytes' total;
 * hdr out as stored), with the outcome of tier_write_batch then tier_commit_batch
 * of the items written. A backend whose description says write_commits does it
 * in one write_batch (nvme: bytes and header in one write per block, durable as
 * its sync policy says, once it returns). An expected checksum the bytes do not
 * have is -EBADMSG for that item, nothing of it written: the write-then-commit
 * path stops there (later items -ECANCELED); nvme's one write per block still
 * tries the later items. Used by kvt-bench nvme; the tier actor writes and
 * commits in two requests. */
int tier_put_batch(tier_t *t, tier_io_t *items, size_t n);
int tier_clear_batch(tier_t *t, tier_io_t *items, size_t n);

/* The backend's description; without a describe op: tier.c's random epoch, no
 * same-host access. Never fails for an open tier. */
void tier_describe(tier_t *t, tier_desc_t *out);
/* Zero-copy view of a slot's bytes, or NULL (no mapping, or slot out of range). */
void *tier_slot_data(tier_t *t, uint64_t slot);
/* Calls fn for each of the backend's counters (none without a counters op). */
void tier_counters(tier_t *t, tier_counter_fn fn, void *arg);

#endif
