/* kvt_transport_cuda.c — the CUDA IPC transport of the data path: a device get (a
 * job with device buffers, kvt_device.h) from a gpu tier on this host (same host
 * identity, shm not disabled) whose arena this process can map (the tier announces
 * a CUDA IPC handle for the token's epoch, and the job's buffers are on the GPU
 * with the tier's UUID) copies device to device on the job's stream, after its
 * wait_event, straight from the slots into the caller's buffers; the job is
 * reported once the copies are done (kvt_device.c's event), like any device get.
 *
 * Gets only: the slot is the token's while its pin holds, and the tier's headers
 * (host memory of the tier process) are not reachable from here. Puts to a gpu tier
 * go through its tier actor (frames), which marks the slot WRITING before its bytes
 * change and computes nothing it is not given: the put's checksum, computed by the
 * client over the staged bytes, stays end to end. A tier without IPC (the runtime
 * gives no handle, or the tier is in this process: the runtime refuses to open a
 * handle where it was made), on another GPU or another host goes by the next
 * transport, said once per tier at debug level.
 *
 * Owns the mappings (one per tier epoch; a new epoch closes the old one). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_log.h"
#include "kvt_device.h"
#include "kvt_transport.h"

#define C_MAX_TIERS (2 * BUS_TOKEN_MAX_TIERS)

typedef struct {
    uint32_t tier_id;
    uint64_t epoch; /* the token epoch this entry was resolved for */
    bool used;
    void *base; /* the mapped arena, or NULL: not this way for this epoch */
    uint64_t stride;
    uint8_t uuid[16];
    uint64_t seq; /* job->seq when last used (eviction) */
} c_tier_t;

typedef struct {
    kvt_client_t *c;
    kvti_job_t *jobs; /* the handle's job table (device copies to wait for) */
    uint32_t cap;
    c_tier_t tiers[C_MAX_TIERS];
} c_cuda_t;

static void *c_open(kvt_client_t *c, kvti_job_t *jobs, uint32_t cap)
{
    c_cuda_t *x = calloc(1, sizeof *x);
    if (x) {
        x->c = c;
        x->jobs = jobs;
        x->cap = cap;
    }
    return x;
}

/* Closes an entry's mapping once no queued copy can read it. */
static void c_unmap(c_cuda_t *x, c_tier_t *t)
{
    if (!t->base)
        return;
    kvti_dev_quiesce(x->c, x->jobs, x->cap);
    kvti_dev_ipc_close(x->c, t->base);
    t->base = NULL;
}

static void c_drop(c_cuda_t *x, c_tier_t *t)
{
    c_unmap(x, t);
    memset(t, 0, sizeof *t);
}

static void c_close(void **xs)
{
    if (!xs || !*xs)
        return;
    c_cuda_t *x = *xs;
    for (uint32_t i = 0; i < C_MAX_TIERS; i++)
        if (x->tiers[i].used)
            c_drop(x, &x->tiers[i]);
    free(x);
    *xs = NULL;
}

/* Same host, no shm name (a gpu tier announces none), shm not disabled. */
static bool c_usable(kvt_client_t *c, const bus_token_tier_t *t)
{
    return !c->disable_shm && c->host_id[0] && !t->shm[0] && strcmp(t->host, c->host_id) == 0;
}

static c_tier_t *c_entry(c_cuda_t *x, const kvti_job_t *j, uint32_t tier_id)
{
    c_tier_t *free_e = NULL, *old = NULL;
    for (uint32_t i = 0; i < C_MAX_TIERS; i++) {
        c_tier_t *t = &x->tiers[i];
        if (t->used && t->tier_id == tier_id)
            return t;
        if (!t->used && !free_e)
            free_e = t;
        if (t->used && (!old || t->seq < old->seq))
            old = t;
    }
    c_tier_t *t = free_e ? free_e : old;
    if (t == old)
        c_drop(x, t);
    t->used = true;
    t->tier_id = tier_id;
    t->seq = j->seq;
    return t;
}

/* The tier's mapping for this job, or NULL (the next transport takes it). Resolved
 * once per tier epoch: a ClusterInfo round trip, then cudaIpcOpenMemHandle. */
static void *c_attach(void *xs, const kvti_job_t *j, const bus_token_tier_t *tt)
{
    c_cuda_t *x = xs;
    kvt_client_t *c = x->c;
    if (j->dev_phase == KVTI_DEV_NONE) /* host buffers: not this transport's */
        return NULL;
    c_tier_t *t = c_entry(x, j, tt->tier_id);
    t->seq = j->seq;
    if (t->epoch == tt->epoch)
        return t->base ? t : NULL;
    c_unmap(x, t);
    t->epoch = tt->epoch;
    kvti_tier_access_t a;
    char why[160] = "";
    uint8_t mine[16];
    if (kvti_tier_access(c, tt->tier_id, &a) < 0) {
        snprintf(why, sizeof why, "%s", kvt_last_error(c));
        kvti_clear_error(c);
    } else if (a.epoch != tt->epoch || !a.ipc_handle_len) {
        snprintf(why, sizeof why, "%s",
                 a.ipc_handle_len ? "the tier restarted since the token"
                                  : "the tier announces no CUDA IPC handle");
    } else if (kvti_dev_buffer_uuid(j, mine) < 0 || memcmp(mine, a.gpu_uuid, sizeof mine) != 0) {
        snprintf(why, sizeof why, "the buffers are on another GPU than the tier");
    } else {
        void *base = NULL;
        int e = kvti_dev_ipc_open(c, a.ipc_handle, &base);
        if (e != 0) {
            char b[128];
            snprintf(why, sizeof why, "cudaIpcOpenMemHandle: %s",
                     kvti_dev_strerror(c, e, b, sizeof b));
        } else {
            t->base = base;
            t->stride = a.slot_stride;
            memcpy(t->uuid, a.gpu_uuid, sizeof t->uuid);
        }
    }
    if (!t->base)
        bus_debug("client", "%s: tier %u (epoch %" PRIu64 "): device to device not used (%s)",
                  c->name, tt->tier_id, tt->epoch, why);
    return t->base ? t : NULL;
}

static void c_get(void *xs, kvti_job_t *j, const bool mine[BUS_TOKEN_MAX_TIERS])
{
    kvt_client_t *c = ((c_cuda_t *)xs)->c;
    for (uint32_t i = 0; i < j->tok->n; i++) {
        bus_token_entry_t e;
        bus_token_entry_at(&j->tok->view, i, &e);
        if (!mine[e.tier] || kvti_job_skips(j, i))
            continue;
        const c_tier_t *t = j->at[e.tier];
        const uint8_t *src = (const uint8_t *)t->base + e.slot * t->stride;
        int rc = 0;
        if (j->seg_count == 0) {
            rc = kvti_dev_d2d(j, j->dev_ptrs[i], src, e.size);
        } else {
            uint64_t seg = j->tok->segs->seg_bytes;
            for (uint32_t s = 0; s < j->seg_count && rc == 0; s++)
                rc = kvti_dev_d2d(j, j->dev_ptrs[(size_t)i * j->seg_count + s],
                                  src + (uint64_t)(j->seg_first + s) * seg, seg);
        }
        if (rc != 0) {
            char b[128];
            kvti_job_error(
                j, KVT_INTERNAL, "tier %u: slot %" PRIu64 ": device to device copy refused: %s",
                j->tok->view.tiers[e.tier].tier_id, e.slot, kvti_dev_strerror(c, rc, b, sizeof b));
            continue;
        }
        j->tok->ok[i] = true;
        j->ddirect[i] = true;
    }
}

const kvti_transport_t kvti_transport_cuda = {
    .name = "cuda_ipc",
    .segments = true,
    .open = c_open,
    .close = c_close,
    .usable = c_usable,
    .attach = c_attach,
    .get = c_get,
};
