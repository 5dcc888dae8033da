/* tier_remote.c — the remote tier backend (tier_remote.h): the host segment's
 * layout in anonymous memory. Everything after open is the host backend's own
 * code (tier_host_ops: the segment protocol does not care who could map it);
 * what differs is open, close and describe: no name, no flock, no /dev/shm,
 * and no same-host access advertised. Nothing here allocates after open. */
#include "tier_remote.h"
#include "tier_host.h"
#include "tier_seg_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static const char *const s_option_keys[] = {"transport",   "prefault",       "verify_reads",
                                            "ucx_regions", "ucx_region_mib", NULL};
static const char *const s_transports[] = {"zmq", "ucx", NULL};
enum { S_ZMQ = 0, S_UCX = 1 };
/* transport ucx: staging regions a tier actor hands out (one per client handle or
 * copying tier actor at a time) and the MiB of each */
#define S_UCX_REGIONS 16u
#define S_UCX_REGION_MIB 64u

/* The remote tier's own state: the segment (tier_seg_t first: the host backend's
 * ops take t->priv as one) and the transport. */
typedef struct {
    tier_seg_t seg;
    bool ucx;
    uint32_t ucx_regions;
    uint64_t ucx_region_mib;
} s_remote_t;

static int s_configure(tier_config_t *cfg, char *err, size_t errlen)
{
    int transport = S_ZMQ;
    bool b;
    int rc = tier_option_enum(cfg, "transport", s_transports, S_ZMQ, &transport, err, errlen);
#ifndef KVT_HAVE_UCX
    if (rc == 0 && transport == S_UCX) {
        snprintf(err, errlen,
                 "transport: \"ucx\" is not in this build (libucx-dev was not found when it was "
                 "built, or -DKVT_UCX=OFF; its remote tier serves ZeroMQ frames only): install "
                 "libucx-dev and rebuild, or use \"zmq\", the default");
        return -ENOTSUP;
    }
#endif
    uint64_t u;
    if (rc == 0)
        rc = tier_option_u64(cfg, "ucx_regions", 1, 256, S_UCX_REGIONS, &u, err, errlen);
    if (rc == 0)
        rc = tier_option_u64(cfg, "ucx_region_mib", 1, 4096, S_UCX_REGION_MIB, &u, err, errlen);
    if (rc == 0 && u << 20 < cfg->slot_size) {
        snprintf(err, errlen,
                 "ucx_region_mib: %" PRIu64 " MiB does not hold one slot of %" PRIu64 " bytes", u,
                 cfg->slot_size);
        rc = -EINVAL;
    }
    if (rc == 0)
        rc = tier_option_bool(cfg, "prefault", true, &b, err, errlen);
    if (rc == 0)
        rc = tier_option_bool(cfg, "verify_reads", false, &b, err, errlen);
    /* the defaults, written down (kvtier deployment shows them) */
    if (rc == 0 && !tier_config_get(cfg, "transport"))
        rc = tier_config_set(cfg, "transport", "zmq");
    if (rc == 0 && !tier_config_get(cfg, "prefault"))
        rc = tier_config_set(cfg, "prefault", "true");
    return rc;
}

static int s_open(tier_t *t, const tier_config_t *cfg, char *err, size_t errlen)
{
    struct tier_seg_layout l;
    bool prefault = true, verify = false;
    (void)tier_option_bool(cfg, "prefault", true, &prefault, err, errlen);
    (void)tier_option_bool(cfg, "verify_reads", false, &verify, err, errlen);
    int rc = tier_seg_layout(cfg->capacity, cfg->slot_size, &l);
    if (rc < 0)
        return rc;
    s_remote_t *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    tier_seg_t *seg = &r->seg;
    int transport = S_ZMQ;
    (void)tier_option_enum(cfg, "transport", s_transports, S_ZMQ, &transport, err, errlen);
    uint64_t regions = S_UCX_REGIONS;
    (void)tier_option_u64(cfg, "ucx_regions", 1, 256, S_UCX_REGIONS, &regions, err, errlen);
    (void)tier_option_u64(cfg, "ucx_region_mib", 1, 4096, S_UCX_REGION_MIB, &r->ucx_region_mib, err,
                          errlen);
    r->ucx = transport == S_UCX;
    r->ucx_regions = (uint32_t)regions;
    seg->owner = true;
    seg->fd = -1;
    seg->epoch = tier_seg_new_epoch();
    uint64_t t0 = tier_seg_now_ns();
    /* prefault: MAP_POPULATE faults every page in now, so the first block copies
     * do not pay for page faults. It reserves nothing: mmap does not report a
     * populate that fell short, and a host short of memory meets the OOM killer
     * later (the host tier's posix_fallocate on /dev/shm has no equivalent here). */
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
    if (prefault)
        flags |= MAP_POPULATE;
    void *base = mmap(NULL, (size_t)l.total, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (base == MAP_FAILED) {
        rc = -errno;
        snprintf(err, errlen, "cannot map %llu bytes of memory for %llu slots of %llu bytes: %s",
                 (unsigned long long)l.total, (unsigned long long)cfg->capacity,
                 (unsigned long long)cfg->slot_size, strerror(errno));
        free(r);
        return rc;
    }
    tier_seg_bind(seg, base, (size_t)l.total, &l, cfg->capacity, cfg->slot_size);
    if (prefault) {
        seg->prefault_ns = tier_seg_now_ns() - t0;
        if (seg->prefault_ns == 0)
            seg->prefault_ns = 1;
    }
    tier_seg_init_super(seg, cfg->name, &l, verify);
    t->priv = seg;
    return 0;
}

static void s_close(tier_t *t)
{
    tier_seg_t *seg = t->priv;
    if (!seg)
        return;
    munmap(seg->base, seg->len);
    free(seg); /* the s_remote_t it begins */
    t->priv = NULL;
}

static int s_describe(tier_t *t, tier_desc_t *out)
{
    const tier_seg_t *seg = t->priv;
    out->epoch = seg->epoch;
    out->access_kind = TIER_ACCESS_NONE; /* never mapped by another process */
    out->access[0] = '\0';
    const s_remote_t *r = t->priv;
    snprintf(out->detail, sizeof out->detail, "host memory of %zu bytes served over %s%s%s",
             seg->len, r->ucx ? "UCX (and ZeroMQ frames)" : "ZeroMQ frames only",
             seg->prefault_ns ? ", pre-faulted" : "",
             tier_seg_verify_reads(seg) ? ", reads verified" : "");
    out->ucx_regions = r->ucx ? r->ucx_regions : 0;
    out->ucx_region_bytes = r->ucx ? r->ucx_region_mib << 20 : 0;
    out->verify_reads = tier_seg_verify_reads(seg);
    return 0;
}

/* The rest is the host backend's segment code, reached through its table. */
static int s_write(tier_t *t, uint64_t slot, const struct iovec *iov, int n)
{
    return tier_host_ops.write(t, slot, iov, n);
}

static int s_read(tier_t *t, uint64_t slot, struct iovec *iov, int n)
{
    return tier_host_ops.read(t, slot, iov, n);
}

static int s_put_header(tier_t *t, uint64_t slot, const tier_slot_header_t *h)
{
    return tier_host_ops.put_header(t, slot, h);
}

static int s_get_header(tier_t *t, uint64_t slot, tier_slot_header_t *h)
{
    return tier_host_ops.get_header(t, slot, h);
}

static int s_inventory(tier_t *t, uint64_t from, uint64_t to, tier_inventory_fn fn, void *arg)
{
    return tier_host_ops.inventory(t, from, to, fn, arg);
}

static int s_probe(tier_t *t, const uint64_t *slots, size_t n, bool *present)
{
    return tier_host_ops.probe(t, slots, n, present);
}

static void *s_slot_data(tier_t *t, uint64_t slot)
{
    return tier_host_ops.slot_data(t, slot);
}

const struct tier_ops tier_remote_ops = {
    .version = TIER_OPS_VERSION,
    .kind = "remote",
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
    .slot_data = s_slot_data,
};
