/* tier_remote.c — the remote tier backend (tier_remote.h): the host segment's
 * layout in anonymous memory. Everything after open is the host backend's own
 * code (tier_host_ops: the segment protocol does not care who could map it);
 * what differs is open, close and describe: no name, no flock, no /dev/shm,
 * and no same-host access advertised. Nothing here allocates after open. */
#include "tier_remote.h"
#include "tier_host.h"
#include "tier_seg_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static const char *const s_option_keys[] = {"transport", "prefault", "verify_reads", NULL};
static const char *const s_transports[] = {"zmq", "ucx", NULL};
enum { S_ZMQ = 0, S_UCX = 1 };

static int s_configure(tier_config_t *cfg, char *err, size_t errlen)
{
    int transport = S_ZMQ;
    bool b;
    int rc = tier_option_enum(cfg, "transport", s_transports, S_ZMQ, &transport, err, errlen);
    if (rc == 0 && transport == S_UCX) {
        snprintf(err, errlen,
                 "transport: \"ucx\" is not in this build (its remote tier serves ZeroMQ frames "
                 "only): use \"zmq\", the default");
        return -ENOTSUP;
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
    tier_seg_t *seg = calloc(1, sizeof *seg);
    if (!seg)
        return -ENOMEM;
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
        free(seg);
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
    free(seg);
    t->priv = NULL;
}

static int s_describe(tier_t *t, tier_desc_t *out)
{
    const tier_seg_t *seg = t->priv;
    out->epoch = seg->epoch;
    out->access_kind = TIER_ACCESS_NONE; /* never mapped by another process */
    out->access[0] = '\0';
    snprintf(out->detail, sizeof out->detail,
             "host memory of %zu bytes served over ZeroMQ frames only%s%s", seg->len,
             seg->prefault_ns ? ", pre-faulted" : "",
             tier_seg_verify_reads(seg) ? ", reads verified" : "");
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
