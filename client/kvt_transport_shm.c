/* kvt_transport_shm.c — the shared-memory transport of the data path: the tier
 * actor is on this host (same host identity: host name and boot id, bus_host.h),
 * names its segment, the segment attaches and its epoch is the token's, and shm is not disabled.
 * The job copies inside submit (memcpy, no message): a put first marks the slot header WRITING (key
 * zero, as the tier actor does for a WriteSlots) so an evicted block's old header is never served,
 * then copies and computes the xxh3-64 in the same pass; a get checks the header is SERVING with
 * the token's key and size before and after copying out. No prefetch: the scheduler has the
 * migrator copy (frames sends CopyPrefetch).
 *
 * Owns the segment attachments (one per segment name; replaced when the epoch
 * changes, least recently used one evicted past S_MAX_ATTACH). Never allocates
 * per block; a segment is mapped once per (name, epoch). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bus_fault.h"
#include "bus_log.h"
#include "kvt_device.h"
#include "kvt_transport.h"
#include "tier_checksum.h"
#include "tier_seg.h"

#define S_MAX_ATTACH (2 * BUS_TOKEN_MAX_TIERS) /* > one token's tiers: see s_attach */
#ifdef MADV_POPULATE_WRITE
#define S_MADV_POPULATE_WRITE MADV_POPULATE_WRITE
#else
#define S_MADV_POPULATE_WRITE 23 /* Linux >= 5.14; older kernels answer EINVAL */
#endif

typedef struct {
    char shm[BUS_TOKEN_NAME_MAX];
    uint64_t epoch; /* the token epoch this entry was checked against */
    tier_seg_t *seg;
    uint8_t *mapped; /* bit per slot: its pages are in this process's page tables */
    uint64_t used;   /* job->seq when last used (eviction: least recent) */
    /* device gets (kvt_device.h): the slots registered with the CUDA runtime, so a
     * slot's bytes go straight into device memory; tried once per attachment */
    void *dev_reg;
    bool dev_tried;
} s_attach_t;

typedef struct {
    kvt_client_t *c;
    kvti_job_t *jobs; /* the handle's job table (device copies to wait for) */
    uint32_t cap;
    s_attach_t att[S_MAX_ATTACH];
    uint32_t n_att;
    tier_checksum_state_t *hash;
} s_shm_t;

static void *s_open(kvt_client_t *c, kvti_job_t *jobs, uint32_t cap)
{
    s_shm_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->c = c;
    s->jobs = jobs;
    s->cap = cap;
    s->hash = aligned_alloc(_Alignof(tier_checksum_state_t), sizeof *s->hash);
    if (!s->hash) {
        free(s);
        return NULL;
    }
    return s;
}

/* Detaches an entry's segment, unregistered first. */
static void s_detach(s_shm_t *s, s_attach_t *a)
{
    if (a->dev_reg) /* a device get may still be copying out of it */
        kvti_dev_quiesce(s->c, s->jobs, s->cap);
    kvti_dev_host_unregister(s->c, a->dev_reg);
    a->dev_reg = NULL;
    a->dev_tried = false;
    tier_seg_detach(&a->seg);
}

static void s_close(void **xs)
{
    if (!xs || !*xs)
        return;
    s_shm_t *s = *xs;
    for (uint32_t i = 0; i < s->n_att; i++) {
        s_detach(s, &s->att[i]);
        free(s->att[i].mapped);
    }
    free(s->hash);
    free(s);
    *xs = NULL;
}

/* The tier's host identity is "<host name>/<boot id hash>" (bus_host_identity):
 * another name is another host even where the boot id and /dev/shm are shared
 * (network namespaces); said once per tier id at debug level. */
static bool s_usable(kvt_client_t *c, const bus_token_tier_t *t)
{
    if (c->disable_shm || !c->host_id[0] || !t->shm[0])
        return false;
    if (strcmp(t->host, c->host_id) == 0)
        return true;
    uint64_t bit = 1ull << (t->tier_id % 64);
    if (!(c->host_refusals_logged & bit)) {
        c->host_refusals_logged |= bit;
        bus_debug("client",
                  "%s: tier %u: shared memory %s not used: the tier is on host %s, this client "
                  "on %s; using frames",
                  c->name, t->tier_id, t->shm, t->host[0] ? t->host : "(unknown)", c->host_id);
    }
    return false;
}

/* The attachment for a token tier, or NULL when it cannot be used (the
 * dispatcher then takes the next transport). */
static void *s_attach(void *xs, const kvti_job_t *j, const bus_token_tier_t *t)
{
    s_shm_t *s = xs;
    kvt_client_t *c = s->c;
    s_attach_t *a = NULL;
    for (uint32_t i = 0; i < s->n_att; i++)
        if (strcmp(s->att[i].shm, t->shm) == 0)
            a = &s->att[i];
    if (a && a->epoch == t->epoch) {
        a->used = j->seq;
        return a->seg ? a : NULL; /* no segment: attaching failed for this epoch already */
    }
    if (!a && s->n_att < S_MAX_ATTACH) {
        a = &s->att[s->n_att++];
    } else if (!a) {
        /* Replace the least recently used entry in place. A token names at most
         * half as many tiers as there are entries, so the entries this submit
         * already handed out (used == j->seq) are never the oldest. */
        a = &s->att[0];
        for (uint32_t i = 1; i < s->n_att; i++)
            if (s->att[i].used < a->used)
                a = &s->att[i];
        s_detach(s, a);
        free(a->mapped);
    }
    if (strcmp(a->shm, t->shm) != 0) {
        memset(a, 0, sizeof *a);
        snprintf(a->shm, sizeof a->shm, "%s", t->shm);
    }
    a->used = j->seq;
    /* A new epoch: the segment may have been replaced under the same name. */
    s_detach(s, a);
    free(a->mapped);
    a->mapped = NULL;
    a->epoch = t->epoch;
    char err[256];
    int rc = tier_seg_attach(t->shm, t->slot_size, 0, &a->seg, err, sizeof err);
    if (rc < 0) {
        bus_debug("client", "%s: tier %u: shared memory %s not used (%s); using frames", c->name,
                  t->tier_id, t->shm, err);
        return NULL;
    }
    if (tier_seg_epoch(a->seg) != t->epoch || !tier_seg_live(a->seg)) {
        bus_debug("client",
                  "%s: tier %u: segment %s has epoch %" PRIu64 ", token %" PRIu64 "; using frames",
                  c->name, t->tier_id, t->shm, tier_seg_epoch(a->seg), t->epoch);
        tier_seg_detach(&a->seg);
    }
    if (a->seg) {
        a->mapped = calloc(tier_seg_capacity(a->seg) / 8 + 1, 1);
        if (!a->mapped)
            tier_seg_detach(&a->seg);
    }
    return a->seg ? a : NULL;
}

/* The slot's data, with its pages mapped into this process in one system call
 * the first time: touching them one by one costs a page fault each, which
 * dominates the copy on virtual machines. Best effort (older kernels lack
 * MADV_POPULATE_WRITE; the copy then faults the pages in). */
static void *s_slot(s_attach_t *a, uint64_t slot)
{
    uint8_t *p = tier_seg_slot(a->seg, slot);
    if (p && !(a->mapped[slot / 8] & (1u << (slot % 8)))) {
        size_t len = (tier_seg_slot_size(a->seg) + 4095) & ~(size_t)4095;
        (void)madvise(p, len, S_MADV_POPULATE_WRITE);
        a->mapped[slot / 8] |= (uint8_t)(1u << (slot % 8));
    }
    return p;
}

/* memcpy that hashes the source as it copies (tier_checksum_copy: L1-sized
 * pieces, no second trip through memory). The copy holds the slot's
 * writer word one S_HOLD_CHUNK at a time (tier_seg.h "Writers"): the caller has
 * claimed it (BUSY) for the first chunk; each later chunk is copied only while the
 * word is still ME. -ESTALE: another writer claimed the slot (this put's lease
 * lapsed, for instance while this process was stopped): nothing more was written. */
#define S_HOLD_CHUNK (256u << 10)

static int s_copy_update(tier_seg_t *seg, uint64_t slot, uint64_t me, void *dst, const void *src,
                         size_t size, tier_checksum_state_t *hash)
{
    for (size_t off = 0; off < size; off += S_HOLD_CHUNK) {
        if (off) {
            tier_seg_release(seg, slot, me);
            if (tier_seg_hold(seg, slot, me) < 0)
                return -ESTALE;
        }
        size_t n = size - off < S_HOLD_CHUNK ? size - off : S_HOLD_CHUNK;
        tier_checksum_copy(hash, (uint8_t *)dst + off, (const uint8_t *)src + off, n);
    }
    tier_seg_release(seg, slot, me);
    return 0;
}

static int s_copy_hash(s_shm_t *s, tier_seg_t *seg, uint64_t slot, uint64_t me, void *dst,
                       const void *src, size_t size, uint64_t *sum)
{
    tier_checksum_reset(s->hash);
    if (s_copy_update(seg, slot, me, dst, src, size, s->hash) < 0)
        return -ESTALE;
    *sum = tier_checksum_digest(s->hash);
    return 0;
}

/* How long a put waits for another writer in the middle of a chunk of its slot. */
#define S_CLAIM_WAIT_MS 100u

/* Claims the slot of a put's key and marks it WRITING, the writer word left BUSY
 * for the first chunk: 0, or -1 with the job's error recorded. */
static int s_claim(kvti_job_t *j, s_attach_t *a, const bus_token_entry_t *e, uint64_t me)
{
    tier_seg_t *seg = a->seg;
    const bus_token_tier_t *t = &j->tok->view.tiers[e->tier];
    tier_slot_header_t h = {.state = TIER_SLOT_WRITING};
    if (kvti_token_lapsed(j->tok, NULL)) { /* before claiming: a lapsed put takes nothing */
        kvti_job_error(j, KVT_EXPIRED,
                       "tier %u: slot %" PRIu64 ": this put's lease lapsed before its copy "
                       "began: nothing was written",
                       t->tier_id, e->slot);
        return -1;
    }
    uint32_t holder = 0;
    int rc = tier_seg_claim(seg, e->slot, me, S_CLAIM_WAIT_MS, &holder);
    if (rc == -EBUSY) {
        kvti_job_error(j, KVT_CONFLICT,
                       "tier %u: slot %" PRIu64 " is being written by pid %u, stopped or slow "
                       "in the middle of a copy (its lease lapsed): try the put again",
                       t->tier_id, e->slot, holder);
        return -1;
    }
    /* Holding the slot (BUSY), the lease checked again: a put stopped before its
     * claim may have lost the slot to a writer that has committed since; it
     * has taken the word over, but writes nothing. */
    if (rc == 0 && kvti_token_lapsed(j->tok, NULL)) {
        tier_seg_release(seg, e->slot, me);
        kvti_job_error(j, KVT_EXPIRED,
                       "tier %u: slot %" PRIu64 ": this put's lease lapsed before its copy "
                       "began: nothing was written",
                       t->tier_id, e->slot);
        return -1;
    }
    if (rc == 0 && (rc = tier_seg_put_header(seg, e->slot, &h)) < 0)
        tier_seg_release(seg, e->slot, me);
    if (rc < 0) {
        kvti_job_error(j, KVT_INTERNAL, "tier %u: slot %" PRIu64 ": marking WRITING failed: %s",
                       t->tier_id, e->slot, strerror(-rc));
        return -1;
    }
    return 0;
}

/* The slot's bytes for a key of j: NULL with the job's error when outside the segment. */
static uint8_t *s_dst(kvti_job_t *j, s_attach_t *a, const bus_token_entry_t *e)
{
    const bus_token_tier_t *t = &j->tok->view.tiers[e->tier];
    uint8_t *dst = s_slot(a, e->slot);
    if (!dst || e->size > tier_seg_slot_size(a->seg)) {
        kvti_job_error(j, KVT_INTERNAL, "tier %u: slot %" PRIu64 " (%u bytes) outside segment %s",
                       t->tier_id, e->slot, e->size, t->shm);
        return NULL;
    }
    return dst;
}

static uint64_t s_writer(const kvti_job_t *j)
{
    return tier_seg_writer_id(j->tok->view.meta.issuer, j->tok->view.meta.token_id);
}

static int s_put_one(s_shm_t *s, kvti_job_t *j, s_attach_t *a, uint32_t i,
                     const bus_token_entry_t *e)
{
    tier_seg_t *seg = a->seg;
    const bus_token_tier_t *t = &j->tok->view.tiers[e->tier];
    uint64_t me = s_writer(j);
    uint8_t *dst = s_dst(j, a, e);
    if (!dst || s_claim(j, a, e, me) < 0)
        return -1;
    if (s_copy_hash(s, seg, e->slot, me, dst, j->bufs[i], e->size, &j->tok->checksums[i]) < 0) {
        kvti_job_error(j, KVT_EXPIRED,
                       "tier %u: slot %" PRIu64 " was given to another writer during the copy "
                       "(this put's lease lapsed): nothing of this block was kept",
                       t->tier_id, e->slot);
        return -1;
    }
    j->tok->ok[i] = true;
    return 0;
}

/* Faults on purpose at host.read (bus_fault.h), for tests in this process: one
 * bit of the copied bytes inverted. True when it fired (the copy is then checked
 * whatever the tier asks, so a flip is never delivered). */
static bool s_fault_flip(uint8_t *buf, uint32_t size)
{
    bus_fault_hit_t hit;
    if (!bus_fault_fire(BUS_FAULT_HOST_READ, &hit) || hit.action != BUS_FAULT_FLIP || !size)
        return false;
    uint64_t bit = (hit.n - 1) % ((uint64_t)size * 8);
    buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    return true;
}

static bool s_header_matches(tier_seg_t *seg, uint64_t slot, const kvt_key_t *key, uint32_t size,
                             tier_slot_header_t *h)
{
    return tier_seg_get_header(seg, slot, h) == 0 && h->state == TIER_SLOT_SERVING &&
           memcmp(h->key.b, key->b, KVT_KEY_BYTES) == 0 && h->size == size;
}

/* A device get copies a slot straight into device memory when the segment's slots
 * are registered with the runtime (tried once per attachment; a tier that asks
 * readers to verify what they copy goes through the staging, where the copy is
 * hashed). true: the copy is queued (or refused: the job's error recorded). */
static bool s_dev_direct(s_shm_t *s, kvti_job_t *j, s_attach_t *a)
{
    if (j->dev_phase == KVTI_DEV_NONE || tier_seg_verify_reads(a->seg))
        return false;
    if (!a->dev_tried) {
        a->dev_tried = true;
        uint64_t cap = tier_seg_capacity(a->seg);
        uint8_t *first = tier_seg_slot(a->seg, 0);
        uint8_t *last = cap ? tier_seg_slot(a->seg, cap - 1) : NULL;
        size_t len = last ? (size_t)(last - first) + tier_seg_slot_size(a->seg) : 0;
        if (len && kvti_dev_host_register(s->c, first, len) == 0)
            a->dev_reg = first;
        else
            bus_debug("client",
                      "%s: segment %s: not registered with the CUDA runtime: device "
                      "gets go through the staging",
                      s->c->name, a->shm);
    }
    return a->dev_reg != NULL;
}

static int s_dev_copy(s_shm_t *s, kvti_job_t *j, uint32_t i, void *dst, const void *src, uint64_t n,
                      const bus_token_entry_t *e)
{
    int rc = kvti_dev_h2d(j, dst, src, n);
    if (rc != 0) {
        char b[128];
        kvti_job_error(j, KVT_INTERNAL,
                       "tier %u: slot %" PRIu64 ": copy into the device "
                       "refused: %s",
                       j->tok->view.tiers[e->tier].tier_id, e->slot,
                       kvti_dev_strerror(s->c, rc, b, sizeof b));
        return -1;
    }
    j->ddirect[i] = true;
    return 0;
}

static int s_get_one(s_shm_t *s, kvti_job_t *j, s_attach_t *a, uint32_t i,
                     const bus_token_entry_t *e)
{
    tier_seg_t *seg = a->seg;
    const bus_token_tier_t *t = &j->tok->view.tiers[e->tier];
    const kvt_key_t *key = &j->tok->keys[i];
    tier_slot_header_t h;
    void *src = s_slot(a, e->slot);
    if (!src || !s_header_matches(seg, e->slot, key, e->size, &h)) {
        kvti_job_error(j, KVT_NOT_FOUND,
                       "tier %u: slot %" PRIu64 " does not hold the token's block (state %u, "
                       "size %" PRIu64 ", want %u)",
                       t->tier_id, e->slot, src ? h.state : 0u, src ? h.size : 0, e->size);
        return -1;
    }
    if (s_dev_direct(s, j, a)) {
        /* queued on the job's stream; the pin keeps the slot until the job is done */
        if (s_dev_copy(s, j, i, j->dev_ptrs[i], src, e->size, e) < 0)
            return -1;
        j->tok->ok[i] = true;
        return 0;
    }
    memcpy(j->bufs[i], src, e->size);
    if (s_fault_flip(j->bufs[i], e->size) || tier_seg_verify_reads(seg)) {
        /* the tier asks same-host readers to check what they copied (issue 12 §4) */
        struct iovec v = {.iov_base = j->bufs[i], .iov_len = e->size};
        uint64_t sum = tier_checksum(&v, 1);
        if (h.checksum && sum != h.checksum) {
            memset(j->bufs[i], 0, e->size);
            kvti_job_error(j, KVT_INTERNAL,
                           "tier %u: slot %" PRIu64 " failed its checksum in shared memory "
                           "(bytes %016" PRIx64 ", header %016" PRIx64 "): not delivered",
                           t->tier_id, e->slot, sum, h.checksum);
            return -1;
        }
    }
    /* A pinned slot cannot change; checking again costs little and means a broken
     * pin shows up as a failed key, never as wrong bytes. */
    if (!s_header_matches(seg, e->slot, key, e->size, &h)) {
        kvti_job_error(j, KVT_CONFLICT, "tier %u: slot %" PRIu64 " changed while it was read",
                       t->tier_id, e->slot);
        return -1;
    }
    j->tok->ok[i] = true;
    return 0;
}

/* A layer-wise put of key i: the job starting at segment 0 claims the slot and
 * marks it WRITING, each later one holds the writer word again (lost: another
 * writer has the slot, this put's lease lapsed); the key's checksum runs on in its
 * per-key state across the jobs and is final with the last segment. */
static int s_put_segs_one(kvti_job_t *j, s_attach_t *a, uint32_t i, const bus_token_entry_t *e)
{
    kvti_segs_t *g = j->tok->segs;
    const bus_token_tier_t *t = &j->tok->view.tiers[e->tier];
    tier_checksum_state_t *hash =
        (tier_checksum_state_t *)((uint8_t *)g->hash + (size_t)i * g->hash_size);
    uint64_t me = s_writer(j);
    uint8_t *dst = s_dst(j, a, e);
    if (!dst)
        return -1;
    bool held = false;
    if (j->seg_first == 0) {
        if (s_claim(j, a, e, me) < 0)
            return -1;
        tier_checksum_reset(hash);
        held = true;
    } else if (kvti_token_lapsed(j->tok, NULL)) {
        kvti_job_error(j, KVT_EXPIRED,
                       "tier %u: slot %" PRIu64 ": this put's lease lapsed before segment %u: "
                       "the block is not kept",
                       t->tier_id, e->slot, j->seg_first);
        return -1;
    }
    for (uint32_t s = 0; s < j->seg_count; s++) {
        uint64_t off = (uint64_t)(j->seg_first + s) * g->seg_bytes;
        if ((!held && tier_seg_hold(a->seg, e->slot, me) < 0) ||
            s_copy_update(a->seg, e->slot, me, dst + off, j->seg_ptrs[(size_t)i * j->seg_count + s],
                          g->seg_bytes, hash) < 0) {
            kvti_job_error(j, KVT_EXPIRED,
                           "tier %u: slot %" PRIu64 " was given to another writer before "
                           "segment %u (this put's lease lapsed): the block is not kept",
                           t->tier_id, e->slot, j->seg_first + s);
            return -1;
        }
        held = false;
    }
    if (j->seg_first + j->seg_count == g->segments)
        j->tok->checksums[i] = tier_checksum_digest(hash);
    j->tok->ok[i] = true;
    return 0;
}

/* A layer-wise get of key i: the header checked before and after, as s_get_one;
 * where the tier asks readers to verify, the whole block is hashed in place first
 * (a range cannot be checked against the block's checksum). */
static int s_get_segs_one(s_shm_t *s, kvti_job_t *j, s_attach_t *a, uint32_t i,
                          const bus_token_entry_t *e)
{
    kvti_segs_t *g = j->tok->segs;
    tier_seg_t *seg = a->seg;
    const bus_token_tier_t *t = &j->tok->view.tiers[e->tier];
    const kvt_key_t *key = &j->tok->keys[i];
    tier_slot_header_t h;
    uint8_t *src = s_slot(a, e->slot);
    if (!src || !s_header_matches(seg, e->slot, key, e->size, &h)) {
        kvti_job_error(j, KVT_NOT_FOUND,
                       "tier %u: slot %" PRIu64 " does not hold the token's block (state %u, "
                       "size %" PRIu64 ", want %u)",
                       t->tier_id, e->slot, src ? h.state : 0u, src ? h.size : 0, e->size);
        return -1;
    }
    if (tier_seg_verify_reads(seg) && h.checksum) {
        struct iovec v = {.iov_base = src, .iov_len = e->size};
        uint64_t sum = tier_checksum(&v, 1);
        if (sum != h.checksum) {
            kvti_job_error(j, KVT_INTERNAL,
                           "tier %u: slot %" PRIu64 " failed its checksum in shared memory "
                           "(bytes %016" PRIx64 ", header %016" PRIx64 "): not delivered",
                           t->tier_id, e->slot, sum, h.checksum);
            return -1;
        }
    }
    if (s_dev_direct(s, j, a)) {
        for (uint32_t k = 0; k < j->seg_count; k++)
            if (s_dev_copy(s, j, i, j->dev_ptrs[(size_t)i * j->seg_count + k],
                           src + (uint64_t)(j->seg_first + k) * g->seg_bytes, g->seg_bytes, e) < 0)
                return -1;
        j->tok->ok[i] = true;
        return 0;
    }
    bool flipped = false;
    for (uint32_t k = 0; k < j->seg_count; k++) {
        uint8_t *dst = j->seg_ptrs[(size_t)i * j->seg_count + k];
        memcpy(dst, src + (uint64_t)(j->seg_first + k) * g->seg_bytes, g->seg_bytes);
        flipped |= s_fault_flip(dst, (uint32_t)g->seg_bytes);
    }
    if (flipped) { /* an injected flip in a range: treated as found, never delivered */
        for (uint32_t k = 0; k < j->seg_count; k++)
            memset(j->seg_ptrs[(size_t)i * j->seg_count + k], 0, g->seg_bytes);
        kvti_job_error(j, KVT_INTERNAL,
                       "tier %u: slot %" PRIu64 " failed its checksum in shared memory "
                       "(injected fault): not delivered",
                       t->tier_id, e->slot);
        return -1;
    }
    if (!s_header_matches(seg, e->slot, key, e->size, &h)) {
        kvti_job_error(j, KVT_CONFLICT, "tier %u: slot %" PRIu64 " changed while it was read",
                       t->tier_id, e->slot);
        return -1;
    }
    j->tok->ok[i] = true;
    return 0;
}

/* Both kinds copy now, in key order: nothing is left open. */
static void s_put(void *xs, kvti_job_t *j, const bool mine[BUS_TOKEN_MAX_TIERS])
{
    for (uint32_t i = 0; i < j->tok->n; i++) {
        bus_token_entry_t e;
        bus_token_entry_at(&j->tok->view, i, &e);
        if (!mine[e.tier] || kvti_job_skips(j, i))
            continue;
        if (j->seg_count)
            (void)s_put_segs_one(j, j->at[e.tier], i, &e);
        else
            (void)s_put_one(xs, j, j->at[e.tier], i, &e);
    }
}

static void s_get(void *xs, kvti_job_t *j, const bool mine[BUS_TOKEN_MAX_TIERS])
{
    for (uint32_t i = 0; i < j->tok->n; i++) {
        bus_token_entry_t e;
        bus_token_entry_at(&j->tok->view, i, &e);
        if (!mine[e.tier] || kvti_job_skips(j, i))
            continue;
        if (j->seg_count)
            (void)s_get_segs_one(xs, j, j->at[e.tier], i, &e);
        else
            (void)s_get_one(xs, j, j->at[e.tier], i, &e);
    }
}

const kvti_transport_t kvti_transport_shm = {
    .name = "shm",
    .segments = true,
    .open = s_open,
    .close = s_close,
    .usable = s_usable,
    .attach = s_attach,
    .put = s_put,
    .get = s_get,
};
