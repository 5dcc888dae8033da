/* tier.h — a tier backend is a const ops table registered by name (DESIGN.md §7).
 * The dispatcher (tier.c) checks slot ranges and optional ops, so backends only
 * implement the medium. Backends own the bytes and the slot headers; they never
 * know about the scheduler, the bus or etcd. Errors are negative errno values. */
#ifndef KVT_TIER_H
#define KVT_TIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "tier_key.h"

#define TIER_OPS_VERSION 1
#define TIER_NAME_MAX 64
#define TIER_PATH_MAX 256
#define TIER_MAX_IOV 16 /* segments per block */

/* What a tier actor knows about the block in a slot. Persisted by tiers that
 * survive restarts. A slot whose header is not TIER_SLOT_SERVING is not served. */
enum tier_slot_state {
    TIER_SLOT_EMPTY = 0,
    TIER_SLOT_WRITING = 1,
    TIER_SLOT_SERVING = 2,
    TIER_SLOT_DELETING = 3,
};

typedef struct tier_slot_header {
    tier_key_t key;
    uint32_t instance;    /* scheduler-assigned instance id */
    uint32_t state;       /* enum tier_slot_state */
    uint64_t size;        /* bytes of the block, <= slot size */
    uint64_t checksum;    /* xxh3-64 of the block bytes */
    uint64_t deadline_ms; /* TTL deadline, wall-clock ms since the epoch; 0 = none */
} tier_slot_header_t;

typedef struct tier_config {
    char name[TIER_NAME_MAX]; /* "host0", "nvme0" */
    char kind[16];            /* ops table name: "host", "nvme", ... */
    uint64_t capacity;        /* slots */
    uint64_t slot_size;       /* bytes per slot */
    char path[TIER_PATH_MAX]; /* nvme: file path; host: shm name ("/kvtier-host0") */
    uint32_t queue_depth;     /* nvme: io_uring depth (0 = default) */
    bool prefault;            /* host: touch every page at open */
} tier_config_t;

struct tier;
/* Called once per SERVING slot, in slot order. Returning 0 continues the walk;
 * any other value stops it and becomes the return value of inventory. */
typedef int (*tier_inventory_fn)(void *arg, uint64_t slot, const tier_slot_header_t *h);

struct tier_ops {
    uint32_t version; /* TIER_OPS_VERSION */
    const char *kind;
    int (*open)(struct tier *t, const tier_config_t *cfg);
    void (*close)(struct tier *t);
    int (*write)(struct tier *t, uint64_t slot, const struct iovec *iov, int n);
    int (*read)(struct tier *t, uint64_t slot, struct iovec *iov, int n);
    int (*put_header)(struct tier *t, uint64_t slot, const tier_slot_header_t *h);
    int (*get_header)(struct tier *t, uint64_t slot, tier_slot_header_t *h);
    int (*inventory)(struct tier *t, tier_inventory_fn fn, void *arg);
    int (*probe)(struct tier *t, const uint64_t *slots, size_t n, bool *present);
    void *(*map)(struct tier *t, size_t *len); /* shared mapping, host tier only */
};

/* Public so backends can reach their state; callers treat it as opaque. */
typedef struct tier {
    const struct tier_ops *ops;
    tier_config_t cfg;
    void *priv; /* backend state */
} tier_t;

/* Registry of backends by kind. Built-in backends are registered on first use;
 * tier_register adds another (an out-of-tree one). Returns -EEXIST for a
 * duplicate kind, -EINVAL for a table with the wrong version or no open/close. */
int tier_register(const struct tier_ops *ops);
const struct tier_ops *tier_find(const char *kind);

/* Opens a tier of cfg->kind. NULL on failure with a message for a person in err. */
tier_t *tier_open(const tier_config_t *cfg, char *err, size_t errlen);
void tier_close(tier_t **t);

/* Dispatchers: check the slot range (-ERANGE), the iov count and sizes
 * (-EINVAL), optional ops (-ENOTSUP), then call the backend. */
int tier_write(tier_t *t, uint64_t slot, const struct iovec *iov, int n);
int tier_read(tier_t *t, uint64_t slot, struct iovec *iov, int n);
int tier_put_header(tier_t *t, uint64_t slot, const tier_slot_header_t *h);
int tier_get_header(tier_t *t, uint64_t slot, tier_slot_header_t *h);
int tier_inventory(tier_t *t, tier_inventory_fn fn, void *arg);
int tier_probe(tier_t *t, const uint64_t *slots, size_t n, bool *present);
void *tier_map(tier_t *t, size_t *len);

#endif
