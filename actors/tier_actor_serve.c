/* tier_actor_serve.c — the tier plane as the tier actor serves it (DESIGN.md §4,
 * §7; the rules are listed in tier_actor.h): one switch on the envelope's body,
 * one handler per request kind. Every handler validates the whole request before
 * it touches the tier and always sends exactly one reply. Never serves bytes whose
 * header is not SERVING, never trusts a count or a slot number from the wire, and
 * never asserts on a request. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_fault.h"
#include "bus_inventory.h"
#include "bus_log.h"
#include "tier_actor_int.h"
#include "tier_checksum.h"

typedef tier_actor_self_t self_t;

#define S_LOG "tier"
#define S_INVALID kvtier_StatusCode_STATUS_INVALID_ARGUMENT
#define S_NOT_FOUND kvtier_StatusCode_STATUS_NOT_FOUND
#define S_CONFLICT kvtier_StatusCode_STATUS_CONFLICT
#define S_INTERNAL kvtier_StatusCode_STATUS_INTERNAL
#define S_UNAVAILABLE kvtier_StatusCode_STATUS_UNAVAILABLE
#define S_RBUF_ALIGN 4096u

/* ---- small helpers ---- */

static const char *s_state_name(uint32_t state)
{
    switch (state) {
    case TIER_SLOT_EMPTY:
        return "EMPTY";
    case TIER_SLOT_WRITING:
        return "WRITING";
    case TIER_SLOT_SERVING:
        return "SERVING";
    case TIER_SLOT_DELETING:
        return "DELETING";
    default:
        return "?";
    }
}

static bool s_key_is(const tier_slot_header_t *h, const uint8_t key[BUS_KEY_LEN])
{
    return memcmp(h->key.b, key, TIER_KEY_BYTES) == 0;
}

static const char *s_hex(const uint8_t key[BUS_KEY_LEN], char out[2 * TIER_KEY_BYTES + 1])
{
    tier_key_t k;
    memcpy(k.b, key, TIER_KEY_BYTES);
    return tier_key_hex(&k, out);
}

/* Sends self->rep (its body set by the handler); a non-OK st becomes its status. */
static void s_reply(self_t *self, bus_request_t *req, bus_arrays_t *arr,
                    const bus_payload_t *payload, uint32_t npayload, const kvtier_Status *st)
{
    if (st->code != kvtier_StatusCode_STATUS_OK) {
        self->rep.status = *st;
        self->stats.errors++;
        if (st->code == S_INTERNAL)
            bus_warn(S_LOG, "%s", st->message);
        else
            bus_debug(S_LOG, "%s: %s", bus_status_name(st->code), st->message);
    }
    (void)bus_server_reply(self->server, req->routing_id, &self->rep, arr, payload, npayload, NULL);
}

/* A status for a failed tier call on `slot` (the common cases; callers map the
 * codes whose meaning depends on the operation first). */
static int s_tier_error(self_t *self, kvtier_Status *st, int rc, uint64_t slot, const char *op)
{
    switch (rc) {
    case -ERANGE:
        return tier_actor_fail(self, st, S_INVALID,
                               "slot %" PRIu64 " out of range (capacity %" PRIu64 ")", slot,
                               self->tier->cfg.capacity);
    case -EINVAL:
    case -EMSGSIZE:
        return tier_actor_fail(self, st, S_INVALID, "%s slot %" PRIu64 ": %s", op, slot,
                               strerror(-rc));
    case -ENODATA:
        return tier_actor_fail(self, st, S_NOT_FOUND, "%s slot %" PRIu64 ": no block there", op,
                               slot);
    case -EAGAIN:
        return tier_actor_fail(self, st, S_UNAVAILABLE,
                               "%s slot %" PRIu64 ": header kept busy by a writer; retry", op,
                               slot);
    default:
        return tier_actor_fail(self, st, S_INTERNAL, "%s slot %" PRIu64 " failed: %s", op, slot,
                               strerror(rc < 0 ? -rc : EIO));
    }
}

/* The request is for this tier and, when it names an epoch (a fence), for this
 * incarnation of it: a restarted actor's earlier blocks are not to be trusted. */
static int s_check_tier(self_t *self, uint32_t tier_id, uint64_t epoch, const char *what,
                        kvtier_Status *st)
{
    if (tier_id != 0 && tier_id != self->tier_id)
        return tier_actor_fail(self, st, S_INVALID,
                               "%s for tier id %u reached tier id %u (check the endpoint or the "
                               "token)",
                               what, tier_id, self->tier_id);
    if (epoch != 0 && epoch != self->epoch)
        return tier_actor_fail(self, st, S_UNAVAILABLE,
                               "%s for epoch %016" PRIx64 " reached epoch %016" PRIx64
                               ": the tier actor restarted and the blocks placed before are gone; "
                               "refresh its locations",
                               what, epoch, self->epoch);
    return 0;
}

/* Count bound and range of every slot. */
static int s_check_slots(self_t *self, const bus_u64s_t *slots, const char *what, kvtier_Status *st)
{
    if (slots->n > self->max_slots)
        return tier_actor_fail(self, st, S_INVALID,
                               "%u slots in one %s, the limit is %u: split the request", slots->n,
                               what, self->max_slots);
    for (uint32_t i = 0; i < slots->n; i++)
        if (slots->v[i] >= self->tier->cfg.capacity)
            return tier_actor_fail(self, st, S_INVALID,
                                   "slot %" PRIu64 " out of range (capacity %" PRIu64 ")",
                                   slots->v[i], self->tier->cfg.capacity);
    return 0;
}

/* One per slot, or (when optional) none. */
static int s_check_count(self_t *self, uint32_t got, uint32_t n, bool optional, const char *what,
                         const char *field, kvtier_Status *st)
{
    if (got == n || (optional && got == 0))
        return 0;
    return tier_actor_fail(self, st, S_INVALID, "%s has %u %s for %u slots: give one per slot%s",
                           what, got, field, n, optional ? " or none" : "");
}

static int s_get_header(self_t *self, uint64_t slot, tier_slot_header_t *h, const char *op,
                        kvtier_Status *st)
{
    int rc = tier_get_header(self->tier, slot, h);
    return rc < 0 ? s_tier_error(self, st, rc, slot, op) : 0;
}

/* ---- WriteSlots ---- */

static int s_write_check(self_t *self, const kvtier_WriteSlotsRequest *w, kvtier_Status *st)
{
    const bus_arrays_t *a = self->arr;
    uint32_t segs = w->segments ? w->segments : 1;
    int rc = s_check_tier(self, w->tier_id, w->epoch, "WriteSlots", st);
    if (rc == 0 && segs > TIER_MAX_IOV)
        rc = tier_actor_fail(self, st, S_INVALID,
                             "WriteSlots with %u segments per slot; a block has at most %d", segs,
                             TIER_MAX_IOV);
    if (rc == 0)
        rc = s_check_slots(self, &a->slots, "WriteSlots", st);
    uint64_t total = 0;
    for (uint32_t i = 0; rc == 0 && i < a->slots.n; i++) {
        uint64_t block = 0;
        for (uint32_t s = 0; s < segs; s++)
            block += a->sizes.v[i * segs + s];
        if (block > self->tier->cfg.slot_size)
            rc = tier_actor_fail(self, st, S_INVALID,
                                 "slot %" PRIu64 ": a block of %" PRIu64
                                 " bytes does not fit (slot size %" PRIu64 ")",
                                 a->slots.v[i], block, self->tier->cfg.slot_size);
        self->block_size[i] = block;
        total += block;
    }
    if (rc == 0 && total > self->max_bytes)
        rc = tier_actor_fail(self, st, S_INVALID,
                             "%" PRIu64 " payload bytes in one WriteSlots, the limit is %" PRIu64
                             ": split the request",
                             total, self->max_bytes);
    return rc;
}

/* The slots of a request go to the tier S_BATCH at a time (tier_write_batch: a
 * backend with a batch op overlaps their I/O); the outcome is the one-by-one
 * loop's: the first failing slot is the error and `written` counts the slots
 * before it. Before the bytes, the backend stops serving the old block (tier.h). */
#define S_BATCH 64u

/* transport ucx: the request's bytes, back to back in the sender's staging region
 * (checked to lie inside it); NULL with st set when they do not. */
static uint8_t *s_ucx_bytes(self_t *self, uint64_t region, uint64_t offset, uint64_t total,
                            const char *what, kvtier_Status *st)
{
    char why[256];
    uint8_t *p =
        tier_actor_ucx_range(self->ucx, region, offset, total, zclock_mono(), why, sizeof why);
    if (!p)
        (void)tier_actor_fail(self, st, S_INVALID, "%s over UCX: %s", what, why);
    return p;
}

static int s_write_apply(self_t *self, bus_request_t *req, const kvtier_WriteSlotsRequest *w,
                         uint32_t *written, kvtier_Status *st)
{
    const bus_arrays_t *a = self->arr;
    uint32_t segs = w->segments ? w->segments : 1;
    struct iovec iov[S_BATCH][TIER_MAX_IOV];
    tier_io_t items[S_BATCH];
    zframe_t *f = zmsg_first(req->msg); /* frame 0; payload follows */
    uint8_t *staged = NULL;             /* transport ucx: the bytes' place in the staging region */
    if (w->ucx_region) {
        uint64_t total = 0;
        for (uint32_t i = 0; i < a->sizes.n; i++)
            total += a->sizes.v[i];
        staged = s_ucx_bytes(self, w->ucx_region, w->ucx_offset, total, "WriteSlots", st);
        if (!staged)
            return -1;
        self->stats.ucx_bytes_written += total;
    }
    uint32_t fi = 0;
    for (uint32_t i = 0; i < a->slots.n; i += S_BATCH) {
        uint32_t k = a->slots.n - i < S_BATCH ? a->slots.n - i : S_BATCH;
        for (uint32_t j = 0; j < k; j++) {
            for (uint32_t s = 0; s < segs; s++, fi++) {
                if (staged) {
                    iov[j][s] = (struct iovec){.iov_base = staged, .iov_len = a->sizes.v[fi]};
                    staged += a->sizes.v[fi];
                    continue;
                }
                f = zmsg_next(req->msg);
                iov[j][s] = (struct iovec){.iov_base = zframe_data(f), .iov_len = zframe_size(f)};
            }
            items[j] = (tier_io_t){.slot = a->slots.v[i + j], .iov = iov[j], .n = (int)segs};
        }
        (void)tier_write_batch(self->tier, items, k);
        for (uint32_t j = 0; j < k; j++) {
            if (items[j].rc < 0)
                return s_tier_error(self, st, items[j].rc, items[j].slot, "write");
            if (self->net_written) /* checked at its SERVING header (s_mapped_checksum) */
                self->net_written[items[j].slot / 8] |= (uint8_t)(1u << (items[j].slot % 8));
            (*written)++;
            self->stats.slots_written++;
            self->stats.bytes_written += self->block_size[i + j];
        }
    }
    return 0;
}

static void s_on_write(self_t *self, bus_request_t *req)
{
    const kvtier_WriteSlotsRequest *w = &req->env.body.write_slots_req;
    kvtier_Status st = {0};
    uint32_t written = 0;
    tier_actor_grant_t g;
    bus_env_init_reply(&self->rep, &req->env, kvtier_Envelope_write_slots_rep_tag, self->name);
    int rc = tier_actor_auth(self, TIER_AUTH_WRITE, &self->arr->payload, 0, &g, &st);
    if (rc == 0)
        rc = s_write_check(self, w, &st);
    if (rc == 0)
        rc =
            tier_actor_auth_slots(self, &g, &self->arr->slots, self->block_size, "WriteSlots", &st);
    if (rc == 0)
        (void)s_write_apply(self, req, w, &written, &st);
    self->rep.body.write_slots_rep.written = written;
    s_reply(self, req, NULL, NULL, 0, &st);
}

/* ---- ReadSlots ---- */

static int s_read_shape(self_t *self, const kvtier_ReadSlotsRequest *r, kvtier_Status *st)
{
    const bus_arrays_t *a = self->arr;
    uint32_t segs = r->segments ? r->segments : 1;
    int rc = s_check_tier(self, r->tier_id, r->epoch, "ReadSlots", st);
    if (rc == 0 && segs > TIER_MAX_IOV)
        rc = tier_actor_fail(self, st, S_INVALID,
                             "ReadSlots with %u segments per slot; a block has at most %d", segs,
                             TIER_MAX_IOV);
    if (rc == 0)
        rc = s_check_slots(self, &a->slots, "ReadSlots", st);
    if (rc == 0 && a->sizes.n != 0 && a->sizes.n != a->slots.n * segs)
        rc = tier_actor_fail(self, st, S_INVALID,
                             "ReadSlots has %u sizes for %u slots x %u segments: give one per "
                             "frame or none",
                             a->sizes.n, a->slots.n, segs);
    if (rc == 0 && a->slots.n * segs > self->max_frames)
        rc = tier_actor_fail(self, st, S_INVALID,
                             "ReadSlots asks for %u frames, the limit is %u: split the request",
                             a->slots.n * segs, self->max_frames);
    if (rc == 0 && a->sizes.n == 0 && segs > 1)
        rc = tier_actor_fail(self, st, S_INVALID,
                             "ReadSlots with %u segments per slot needs sizes (bytes of each "
                             "frame)",
                             segs);
    if (rc == 0)
        rc = s_check_count(self, a->keys.n, a->slots.n, true, "ReadSlots", "keys", st);
    return rc;
}

/* Slot i of a read: SERVING, the asked key, sizes that add up to the block. */
static int s_read_slot_check(self_t *self, uint32_t i, uint32_t segs, kvtier_Status *st)
{
    const bus_arrays_t *a = self->arr;
    uint64_t slot = a->slots.v[i];
    tier_slot_header_t h;
    char hex1[33], hex2[33];
    int rc = s_get_header(self, slot, &h, "read", st);
    if (rc < 0)
        return rc;
    if (h.state != TIER_SLOT_SERVING)
        return tier_actor_fail(self, st, S_NOT_FOUND, "slot %" PRIu64 " holds no block (state %s)",
                               slot, s_state_name(h.state));
    if (a->keys.n && !s_key_is(&h, a->keys.keys[i]))
        return tier_actor_fail(self, st, S_NOT_FOUND,
                               "slot %" PRIu64 " holds another block (key %s, asked for %s)", slot,
                               tier_key_hex(&h.key, hex1), s_hex(a->keys.keys[i], hex2));
    if (a->sizes.n) {
        uint64_t sum = 0;
        for (uint32_t s = 0; s < segs; s++) {
            uint64_t part = a->sizes.v[i * segs + s];
            /* Each part within what is left of the block: no sum can wrap and no
             * frame can reach past the block (or the slot). */
            if (part > h.size - sum)
                return tier_actor_fail(self, st, S_INVALID,
                                       "slot %" PRIu64 " holds %" PRIu64
                                       " bytes but segment %u of the request asks for %" PRIu64
                                       " bytes after %" PRIu64,
                                       slot, h.size, s, part, sum);
            sum += part;
        }
        if (sum != h.size)
            return tier_actor_fail(self, st, S_INVALID,
                                   "slot %" PRIu64 " holds %" PRIu64
                                   " bytes but the request's sizes for it add up to %" PRIu64,
                                   slot, h.size, sum);
    }
    self->block_size[i] = h.size;
    self->block_sum[i] = h.checksum;
    return 0;
}

/* After s_read_shape: every slot's header and sizes, and the byte bound. */
static int s_read_check(self_t *self, const kvtier_ReadSlotsRequest *r, kvtier_Status *st)
{
    uint32_t segs = r->segments ? r->segments : 1;
    int rc = 0;
    uint64_t total = 0;
    for (uint32_t i = 0; rc == 0 && i < self->arr->slots.n; i++) {
        rc = s_read_slot_check(self, i, segs, st);
        total += rc == 0 ? self->block_size[i] : 0;
    }
    if (rc == 0 && total > self->max_bytes)
        rc = tier_actor_fail(self, st, S_INVALID,
                             "ReadSlots asks for %" PRIu64 " bytes, the limit is %" PRIu64
                             " per request: split it",
                             total, self->max_bytes);
    return rc;
}

/* Frame sizes of slot i: as asked, or the whole block. */
static uint64_t s_frame_len(self_t *self, uint32_t i, uint32_t s, uint32_t segs)
{
    return self->arr->sizes.n ? self->arr->sizes.v[i * segs + s] : self->block_size[i];
}

/* Faults on purpose at host.read (bus_fault.h): a delay, or one bit of the bytes
 * served inverted, in a copy (the block in memory stays as it is). 0 with *base
 * the bytes to serve (*copy set when they are a copy), or -ENOMEM. */
static int s_read_fault(uint8_t **base, uint64_t len, tier_actor_rbuf_t **copy)
{
    bus_fault_hit_t hit;
    *copy = NULL;
    if (!bus_fault_fire(BUS_FAULT_HOST_READ, &hit))
        return 0;
    if (hit.action == BUS_FAULT_DELAY) {
        zclock_sleep((int)hit.ms);
        return 0;
    }
    if (hit.action != BUS_FAULT_FLIP || len == 0)
        return 0;
    *copy = tier_actor_rbuf_new(len);
    if (!*copy)
        return -ENOMEM;
    memcpy((*copy)->data, *base, len);
    uint64_t bit = (hit.n - 1) % (len * 8);
    (*copy)->data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    *base = (*copy)->data;
    return 0;
}

/* Mapped tiers (tier_slot_data, the host tier): frames point into the mapping and
 * are copied into ZeroMQ messages when the reply is sent, still inside this handler
 * (free_fn NULL), so a later rewrite of the slot cannot change bytes already
 * replied. */
static int s_read_mapped(self_t *self, uint32_t segs, uint32_t *nframes, kvtier_Status *st)
{
    const bus_arrays_t *a = self->arr;
    uint32_t f = 0;
    for (uint32_t i = 0; i < a->slots.n; i++) {
        uint8_t *base = tier_slot_data(self->tier, a->slots.v[i]);
        tier_actor_rbuf_t *copy = NULL;
        if (s_read_fault(&base, self->block_size[i], &copy) < 0) {
            *nframes = f;
            return tier_actor_fail(self, st, S_INTERNAL,
                                   "out of memory for a %" PRIu64 " byte block",
                                   self->block_size[i]);
        }
        if (copy)
            copy->refs = (int)segs;
        uint64_t off = 0;
        for (uint32_t s = 0; s < segs; s++, f++) {
            uint64_t len = s_frame_len(self, i, s, segs);
            self->payload[f] = (bus_payload_t){.data = base + off,
                                               .size = len,
                                               .free_fn = copy ? tier_actor_rbuf_unref : NULL,
                                               .hint = copy};
            self->rep_sizes[f] = len;
            off += len;
        }
    }
    *nframes = f;
    return 0;
}

/* Hands back the buffers of frames that will not be sent. */
static void s_payload_release(self_t *self, uint32_t nframes)
{
    for (uint32_t f = 0; f < nframes; f++)
        if (self->payload[f].free_fn)
            self->payload[f].free_fn((void *)self->payload[f].data, self->payload[f].hint);
}

/* A block whose bytes failed verify_reads is dropped like a damaged nvme block
 * (issue 12 §4: it leaves the index at once) when the bytes in memory themselves
 * fail (not only the copy that was to be sent) and the header is still the one
 * the read began with (SERVING, the same checksum): a header that changed
 * meanwhile belongs to another write and is left alone. */
static bool s_drop_damaged(self_t *self, uint64_t slot, uint64_t sum)
{
    tier_slot_header_t h;
    uint8_t *data = tier_slot_data(self->tier, slot);
    if (!data || tier_get_header(self->tier, slot, &h) < 0 || h.state != TIER_SLOT_SERVING ||
        h.checksum != sum || h.size > self->tier->cfg.slot_size)
        return false;
    struct iovec whole = {data, h.size};
    if (tier_checksum(&whole, 1) == sum)
        return false; /* the block is whole: what failed was the copy */
    /* and still the same header after the hash: a writer that took the slot in
     * the meantime (a reused slot, same-host) keeps its WRITING header */
    tier_slot_header_t again;
    if (tier_get_header(self->tier, slot, &again) < 0 || again.state != TIER_SLOT_SERVING ||
        again.checksum != sum || !tier_key_eq(&again.key, &h.key))
        return false;
    tier_slot_header_t empty = {0};
    if (tier_put_header(self->tier, slot, &empty) < 0)
        return false;
    tier_actor_notice_dropped(self, slot, h.key.b,
                              "read: the bytes in memory failed their checksum (verify_reads)");
    return true;
}

/* verify_reads, for a backend that does not verify its own reads: the frames of
 * each slot hash to its header's checksum (0: none known), else nothing is sent
 * and the damaged block is dropped. */
static int s_read_verify(self_t *self, uint32_t segs, kvtier_Status *st)
{
    const bus_arrays_t *a = self->arr;
    struct iovec iov[TIER_MAX_IOV];
    uint32_t failed = 0, dropped = 0, first = 0;
    uint64_t first_sum = 0;
    for (uint32_t i = 0; i < a->slots.n; i++) { /* every block: each damaged one is dropped */
        for (uint32_t s = 0; s < segs; s++)
            iov[s] = (struct iovec){(void *)self->payload[i * segs + s].data,
                                    self->payload[i * segs + s].size};
        uint64_t sum = tier_checksum(iov, (int)segs);
        if (self->block_sum[i] == 0 || sum == self->block_sum[i])
            continue;
        self->stats.checksum_failures++;
        if (failed++ == 0) {
            first = i;
            first_sum = sum;
        }
        dropped += s_drop_damaged(self, a->slots.v[i], self->block_sum[i]);
    }
    if (!failed)
        return 0;
    return tier_actor_fail(self, st, S_INTERNAL,
                           "slot %" PRIu64 " failed its checksum on read (header %016" PRIx64
                           ", bytes %016" PRIx64 "), %u of %u blocks in all: nothing was sent; "
                           "%u damaged in memory and dropped",
                           a->slots.v[first], self->block_sum[first], first_sum, failed,
                           (unsigned)a->slots.n, dropped);
}

void tier_actor_rbuf_unref(void *data, void *hint)
{
    (void)data;
    tier_actor_rbuf_t *b = hint;
    if (__atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(b);
}

/* One allocation: the struct in the first 4096 bytes, the block after it. */
tier_actor_rbuf_t *tier_actor_rbuf_new(uint64_t len)
{
    uint64_t body = (len + S_RBUF_ALIGN - 1) / S_RBUF_ALIGN * S_RBUF_ALIGN;
    tier_actor_rbuf_t *b = aligned_alloc(S_RBUF_ALIGN, S_RBUF_ALIGN + (body ? body : S_RBUF_ALIGN));
    if (!b)
        return NULL;
    b->refs = 0;
    b->len = len;
    b->data = (uint8_t *)b + S_RBUF_ALIGN;
    return b;
}

static void s_rbufs_free(self_t *self, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        free(self->bufs[i]);
        self->bufs[i] = NULL;
    }
}

static int s_read_error(self_t *self, int rc, uint32_t i, kvtier_Status *st)
{
    uint64_t slot = self->arr->slots.v[i];
    if (rc != -EBADMSG)
        return s_tier_error(self, st, rc, slot, "read");
    self->stats.checksum_failures++;
    /* the backend dropped it: the index must lose it now, not at the gc's round */
    tier_actor_notice_dropped(self, slot, self->arr->keys.n ? self->arr->keys.keys[i] : NULL,
                              "read: the bytes on the medium failed their checksum");
    return tier_actor_fail(self, st, S_INTERNAL,
                           "slot %" PRIu64 " failed its checksum (the bytes on the medium are "
                           "damaged); the block was dropped and nothing was sent",
                           slot);
}

/* Reads every slot into its buffer, in one batch (overlapped where the backend
 * has a batch op). */
static int s_read_into(self_t *self, kvtier_Status *st)
{
    const bus_arrays_t *a = self->arr;
    uint32_t n = a->slots.n;
    for (uint32_t i = 0; i < n; i++) {
        self->get_iov[i] = (struct iovec){self->bufs[i]->data, self->block_size[i]};
        self->gets[i] = (tier_io_t){.slot = a->slots.v[i], .iov = &self->get_iov[i], .n = 1};
    }
    (void)tier_read_batch(self->tier, self->gets, n);
    for (uint32_t i = 0; i < n; i++)
        if (self->gets[i].rc < 0)
            return s_read_error(self, self->gets[i].rc, i, st);
    return 0;
}

/* Unmapped tiers: read into a buffer per block; its frames go out zero-copy and the
 * last one sent frees it. */
static int s_read_copied(self_t *self, uint32_t segs, uint32_t *nframes, kvtier_Status *st)
{
    uint32_t n = self->arr->slots.n, f = 0;
    for (uint32_t i = 0; i < n; i++) {
        self->bufs[i] = tier_actor_rbuf_new(self->block_size[i]);
        if (!self->bufs[i]) {
            s_rbufs_free(self, i);
            return tier_actor_fail(self, st, S_INTERNAL,
                                   "out of memory for a %" PRIu64 " byte block",
                                   self->block_size[i]);
        }
    }
    int rc = s_read_into(self, st);
    if (rc < 0) {
        s_rbufs_free(self, n);
        return rc;
    }
    for (uint32_t i = 0; i < n; i++) {
        tier_actor_rbuf_t *b = self->bufs[i];
        uint64_t off = 0;
        b->refs = (int)segs;
        for (uint32_t s = 0; s < segs; s++, f++) {
            uint64_t len = s_frame_len(self, i, s, segs);
            self->payload[f] = (bus_payload_t){b->data + off, len, tier_actor_rbuf_unref, b};
            self->rep_sizes[f] = len;
            off += len;
        }
        self->bufs[i] = NULL;
    }
    *nframes = f;
    return 0;
}

/* transport ucx: every block is read (the tier's own read, as for an unmapped
 * tier) into the sender's staging region, back to back; the reply carries no
 * frames. The copy is made here, inside the handler: a later rewrite of a slot
 * cannot change what the sender fetches (a pinned read never sees a reused slot),
 * and only the sender's own requests write its region. payload[] describes the
 * copies for verify_reads (no free_fn: nothing is sent). */
static int s_read_ucx(self_t *self, const kvtier_ReadSlotsRequest *r, kvtier_Status *st)
{
    const bus_arrays_t *a = self->arr;
    uint32_t n = a->slots.n;
    if (r->segments > 1)
        return tier_actor_fail(self, st, S_INVALID,
                               "ReadSlots over UCX moves whole blocks: segments must be 1, not %u",
                               r->segments);
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += self->block_size[i];
    uint8_t *dst = s_ucx_bytes(self, r->ucx_region, r->ucx_offset, total, "ReadSlots", st);
    if (!dst)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        self->get_iov[i] = (struct iovec){dst, self->block_size[i]};
        self->gets[i] = (tier_io_t){.slot = a->slots.v[i], .iov = &self->get_iov[i], .n = 1};
        self->payload[i] = (bus_payload_t){.data = dst, .size = self->block_size[i]};
        dst += self->block_size[i];
    }
    (void)tier_read_batch(self->tier, self->gets, n);
    for (uint32_t i = 0; i < n; i++)
        if (self->gets[i].rc < 0)
            return s_read_error(self, self->gets[i].rc, i, st);
    self->stats.ucx_bytes_read += total;
    return 0;
}

static void s_on_read(self_t *self, bus_request_t *req)
{
    const kvtier_ReadSlotsRequest *r = &req->env.body.read_slots_req;
    uint32_t segs = r->segments ? r->segments : 1;
    kvtier_Status st = {0};
    uint32_t nframes = 0;
    tier_actor_grant_t g;
    bus_env_init_reply(&self->rep, &req->env, kvtier_Envelope_read_slots_rep_tag, self->name);
    int rc = tier_actor_auth(self, TIER_AUTH_READ, &self->arr->payload, 0, &g, &st);
    if (rc == 0)
        rc = s_read_shape(self, r, &st);
    if (rc == 0)
        rc = tier_actor_auth_slots(self, &g, &self->arr->slots, NULL, "ReadSlots", &st);
    if (rc == 0)
        rc = s_read_check(self, r, &st);
    if (rc == 0 && r->ucx_region)
        rc = s_read_ucx(self, r, &st);
    else if (rc == 0 && self->arr->slots.n && tier_slot_data(self->tier, self->arr->slots.v[0]))
        rc = s_read_mapped(self, segs, &nframes, &st);
    else if (rc == 0)
        rc = s_read_copied(self, segs, &nframes, &st);
    if (rc == 0 && self->verify_reads && !self->desc.reads_verified)
        rc = s_read_verify(self, r->ucx_region ? 1 : segs, &st);
    if (rc < 0) {
        s_payload_release(self, nframes);
        nframes = 0;
    }
    if (rc == 0) {
        self->stats.slots_read += self->arr->slots.n;
        for (uint32_t i = 0; i < self->arr->slots.n; i++)
            self->stats.bytes_read += self->block_size[i];
    }
    self->rep_arr.sizes.n = nframes;
    /* each block's checksum: the receiver verifies the bytes it got (§4 of issue 12) */
    self->rep_arr.checksums.n = rc == 0 && r->checksums ? self->arr->slots.n : 0;
    s_reply(self, req, &self->rep_arr, self->payload, nframes, &st);
    self->rep_arr.checksums.n = 0;
}

/* ---- PutHeader ---- */

/* "#" + 8 lowercase hex digits, not all zero: a hash given as such (a copy of a
 * block whose instance string the copying actor did not know). */
static bool s_instance_hash_form(const char *id, uint32_t *out)
{
    if (id[0] != '#' || strlen(id) != 9)
        return false;
    uint32_t h = 0;
    for (int i = 1; i < 9; i++) {
        char c = id[i];
        uint32_t d = c >= '0' && c <= '9'   ? (uint32_t)(c - '0')
                     : c >= 'a' && c <= 'f' ? (uint32_t)(c - 'a' + 10)
                                            : 16u;
        if (d == 16u)
            return false;
        h = h << 4 | d;
    }
    *out = h;
    return h != 0;
}

static int s_instance(self_t *self, const char *id, uint32_t *out, kvtier_Status *st)
{
    if (s_instance_hash_form(id, out))
        return 0;
    uint32_t h = tier_actor_instance_hash(id);
    *out = h;
    if (h == 0)
        return 0;
    for (uint32_t k = 0; k < self->ninstances; k++) {
        if (self->instances[k].hash != h)
            continue;
        if (strcmp(self->instances[k].id, id) == 0)
            return 0;
        return tier_actor_fail(self, st, S_CONFLICT,
                               "instance ids \"%s\" and \"%s\" hash to the same value %08x; "
                               "rename one",
                               self->instances[k].id, id, h);
    }
    if (self->ninstances < self->max_instances) { /* else Inventory reports "#hash" */
        tier_actor_instance_t *e = &self->instances[self->ninstances++];
        e->hash = h;
        snprintf(e->id, sizeof e->id, "%s", id);
    }
    return 0;
}

static int s_state_from_wire(self_t *self, kvtier_LocationState s, uint32_t *out, kvtier_Status *st)
{
    switch (s) {
    case kvtier_LocationState_LOCATION_WRITING:
        *out = TIER_SLOT_WRITING;
        return 0;
    case kvtier_LocationState_LOCATION_SERVING:
        *out = TIER_SLOT_SERVING;
        return 0;
    case kvtier_LocationState_LOCATION_DELETING:
        *out = TIER_SLOT_DELETING;
        return 0;
    default:
        return tier_actor_fail(self, st, S_INVALID,
                               "PutHeader with state %d: give WRITING, SERVING or DELETING "
                               "(DeleteSlots empties a slot)",
                               (int)s);
    }
}

static int s_put_check(self_t *self, const kvtier_PutHeaderRequest *p, uint32_t *state,
                       kvtier_Status *st)
{
    const bus_arrays_t *a = self->arr;
    uint32_t n = a->slots.n;
    int rc = s_check_tier(self, p->tier_id, p->epoch, "PutHeader", st);
    if (rc == 0)
        rc = s_state_from_wire(self, p->state, state, st);
    if (rc == 0)
        rc = s_check_slots(self, &a->slots, "PutHeader", st);
    if (rc == 0)
        rc = s_check_count(self, a->keys.n, n, false, "PutHeader", "keys", st);
    if (rc == 0)
        rc = s_check_count(self, a->sizes.n, n, false, "PutHeader", "sizes", st);
    if (rc == 0)
        rc = s_check_count(self, a->checksums.n, n, true, "PutHeader", "checksums", st);
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        if (a->sizes.v[i] > self->tier->cfg.slot_size)
            rc = tier_actor_fail(self, st, S_INVALID,
                                 "slot %" PRIu64 ": block size %" PRIu64
                                 " exceeds the slot size %" PRIu64,
                                 a->slots.v[i], a->sizes.v[i], self->tier->cfg.slot_size);
    return rc;
}

/* Did WriteSlots bring slot's bytes over the network since its last header? */
static bool s_net_written(const self_t *self, uint64_t slot)
{
    return self->net_written && slot < self->tier->cfg.capacity &&
           (self->net_written[slot / 8] >> (slot % 8) & 1u);
}

/* Any header of slot ends what its last WriteSlots brought (a new write sets it again). */
static void s_net_clear(self_t *self, uint64_t slot)
{
    if (self->net_written && slot < self->tier->cfg.capacity)
        self->net_written[slot / 8] &= (uint8_t) ~(1u << (slot % 8));
}

/* SERVING headers of a mapped tier: the checksum of the mapped bytes, when the
 * writer gave none, verify_put asks for a check, or the bytes arrived over the
 * network (WriteSlots: frames or a UCX region — issue 12 §4; a same-host writer's
 * bytes never left memory); an unmapped backend checks its own, tier.h. */
static int s_mapped_checksum(self_t *self, uint32_t i, tier_slot_header_t *h, kvtier_Status *st)
{
    const bus_arrays_t *a = self->arr;
    bool given = a->checksums.n != 0;
    uint64_t slot = a->slots.v[i];
    bool arrived = s_net_written(self, slot);
    s_net_clear(self, slot);
    void *bytes = tier_slot_data(self->tier, slot);
    if (!bytes || h->state != TIER_SLOT_SERVING || (given && !self->verify_put && !arrived))
        return 0;
    struct iovec iov = {bytes, h->size};
    uint64_t sum = tier_checksum(&iov, 1);
    if (given && arrived)
        self->stats.arrivals_verified++;
    if (given && sum != h->checksum) {
        if (arrived)
            self->stats.checksum_failures++;
        return tier_actor_fail(self, st, S_CONFLICT,
                               "slot %" PRIu64 ": its bytes hash to %016" PRIx64
                               " but the writer's checksum is %016" PRIx64 " (%s)",
                               slot, sum, h->checksum,
                               arrived ? "damaged in transit: the block was not committed"
                                       : "bytes changed, or other bytes were hashed");
    }
    h->checksum = sum;
    return 0;
}

static int s_put_error(self_t *self, int rc, uint32_t i, kvtier_Status *st)
{
    const bus_arrays_t *a = self->arr;
    uint64_t slot = a->slots.v[i];
    if (rc == -ENODATA)
        return tier_actor_fail(self, st, S_NOT_FOUND,
                               "slot %" PRIu64 ": no bytes were written to it through this tier "
                               "actor since it started (send WriteSlots first)",
                               slot);
    if (rc == -EINVAL) /* the request was checked: the tier refused this header */
        return tier_actor_fail(self, st, S_INVALID,
                               "slot %" PRIu64 ": header size %" PRIu64
                               " differs from the bytes written to the slot",
                               slot, a->sizes.v[i]);
    if (rc == -EBADMSG)
        return tier_actor_fail(self, st, S_CONFLICT,
                               "slot %" PRIu64 ": the bytes written do not match the checksum "
                               "%016" PRIx64,
                               slot, a->checksums.n ? a->checksums.v[i] : 0);
    return s_tier_error(self, st, rc, slot, "put header of");
}

static tier_slot_header_t s_header(self_t *self, const kvtier_PutHeaderRequest *p, uint32_t state,
                                   uint32_t instance, uint32_t i)
{
    const bus_arrays_t *a = self->arr;
    tier_slot_header_t h = {
        .instance = instance,
        .state = state,
        .size = a->sizes.v[i],
        .checksum = a->checksums.n ? a->checksums.v[i] : 0,
        .deadline_ms = p->ttl_deadline_ms,
    };
    memcpy(h.key.b, a->keys.keys[i], TIER_KEY_BYTES);
    return h;
}

/* SERVING headers: S_BATCH per tier_commit_batch (a backend with a batch op
 * writes them with one barrier pair, overlapped); outcome as the one-by-one
 * loop's. */
static int s_put_serving(self_t *self, const kvtier_PutHeaderRequest *p, uint32_t instance,
                         uint32_t *written, kvtier_Status *st)
{
    const bus_arrays_t *a = self->arr;
    tier_io_t items[S_BATCH];
    for (uint32_t i = 0; i < a->slots.n; i += S_BATCH) {
        uint32_t k = a->slots.n - i < S_BATCH ? a->slots.n - i : S_BATCH;
        for (uint32_t j = 0; j < k; j++) {
            items[j] = (tier_io_t){.slot = a->slots.v[i + j]};
            items[j].hdr = s_header(self, p, TIER_SLOT_SERVING, instance, i + j);
            int rc = s_mapped_checksum(self, i + j, &items[j].hdr, st);
            if (rc < 0) {
                k = j; /* the slots before it are still committed, as one by one */
                (void)tier_commit_batch(self->tier, items, k);
                for (uint32_t m = 0; m < k; m++) {
                    if (items[m].rc < 0)
                        return s_put_error(self, items[m].rc, i + m, st);
                    (*written)++;
                    self->stats.headers_put++;
                }
                return rc;
            }
        }
        (void)tier_commit_batch(self->tier, items, k);
        for (uint32_t j = 0; j < k; j++) {
            if (items[j].rc < 0)
                return s_put_error(self, items[j].rc, i + j, st);
            (*written)++;
            self->stats.headers_put++;
        }
    }
    return 0;
}

/* PutHeader rewrite (a touch's deadline): only a header still SERVING with the
 * request's key and checksum is rewritten, its other fields kept. A slot reused
 * since (evicted, reserved for another block, WRITING or EMPTY now) is skipped. */
static int s_put_rewrite(self_t *self, const kvtier_PutHeaderRequest *p, uint32_t *written,
                         kvtier_Status *st)
{
    const bus_arrays_t *a = self->arr;
    for (uint32_t i = 0; i < a->slots.n; i++) {
        tier_slot_header_t h;
        if (tier_get_header(self->tier, a->slots.v[i], &h) < 0 || h.state != TIER_SLOT_SERVING ||
            memcmp(h.key.b, a->keys.keys[i], TIER_KEY_BYTES) != 0 ||
            (a->checksums.n && h.checksum != a->checksums.v[i]))
            continue;
        if (h.deadline_ms == p->ttl_deadline_ms)
            continue;
        h.deadline_ms = p->ttl_deadline_ms;
        int rc = tier_put_header(self->tier, a->slots.v[i], &h);
        if (rc < 0)
            return s_put_error(self, rc, i, st);
        (*written)++;
        self->stats.headers_put++;
    }
    return 0;
}

static int s_put_apply(self_t *self, const kvtier_PutHeaderRequest *p, uint32_t state,
                       uint32_t instance, uint32_t *written, kvtier_Status *st)
{
    const bus_arrays_t *a = self->arr;
    if (p->rewrite)
        return state == TIER_SLOT_SERVING
                   ? s_put_rewrite(self, p, written, st)
                   : tier_actor_fail(self, st, S_INVALID,
                                     "PutHeader rewrite applies to SERVING headers only");
    if (state == TIER_SLOT_SERVING)
        return s_put_serving(self, p, instance, written, st);
    for (uint32_t i = 0; i < a->slots.n; i++) {
        tier_slot_header_t h = s_header(self, p, state, instance, i);
        int rc = tier_put_header(self->tier, a->slots.v[i], &h);
        if (rc < 0)
            return s_put_error(self, rc, i, st);
        if (state != TIER_SLOT_WRITING) /* the write it marked is over */
            s_net_clear(self, a->slots.v[i]);
        (*written)++;
        self->stats.headers_put++;
    }
    return 0;
}

static void s_on_put_header(self_t *self, bus_request_t *req)
{
    const kvtier_PutHeaderRequest *p = &req->env.body.put_header_req;
    kvtier_Status st = {0};
    uint32_t written = 0, state = 0, instance = 0;
    tier_actor_grant_t g;
    bus_env_init_reply(&self->rep, &req->env, kvtier_Envelope_put_header_rep_tag, self->name);
    int rc = tier_actor_auth(self, TIER_AUTH_HEADER, &self->arr->payload, 0, &g, &st);
    if (rc == 0)
        rc = s_put_check(self, p, &state, &st);
    if (rc == 0)
        rc = tier_actor_auth_slots(self, &g, &self->arr->slots, self->arr->sizes.v, "PutHeader",
                                   &st);
    if (rc == 0) /* last: it remembers the instance id */
        rc = s_instance(self, p->instance_id, &instance, &st);
    if (rc == 0) {
        tier_actor_notice_peer(self, req, &g); /* the scheduler: where drops are told */
        (void)s_put_apply(self, p, state, instance, &written, &st);
    }
    self->rep.body.put_header_rep.written = written;
    s_reply(self, req, NULL, NULL, 0, &st);
}

/* ---- DeleteSlots ---- */

/* With a key, only a committed (SERVING or DELETING) header of that key goes: a
 * late delete of an evicted block never empties the slot under its new write. */
static bool s_delete_wanted(const tier_slot_header_t *h, const bus_keys_t *keys, uint32_t i)
{
    if (h->state == TIER_SLOT_EMPTY)
        return false;
    if (!keys->n)
        return true;
    return (h->state == TIER_SLOT_SERVING || h->state == TIER_SLOT_DELETING) &&
           s_key_is(h, keys->keys[i]);
}

/* The slots to clear are gathered S_BATCH at a time and emptied with
 * tier_clear_batch (overlapped where the backend has a batch op); the outcome is
 * the one-by-one loop's. */
static int s_delete_apply(self_t *self, uint32_t *deleted, kvtier_Status *st)
{
    const bus_arrays_t *a = self->arr;
    tier_io_t items[S_BATCH];
    for (uint32_t i = 0; i < a->slots.n; i += S_BATCH) {
        uint32_t k = a->slots.n - i < S_BATCH ? a->slots.n - i : S_BATCH, m = 0;
        for (uint32_t j = 0; j < k; j++) {
            tier_slot_header_t h;
            uint64_t slot = a->slots.v[i + j];
            int rc = tier_get_header(self->tier, slot, &h);
            /* A header left mid-write by a dead same-host writer cannot be read, but
             * an unconditional delete rewrites it whole: that is the repair. */
            if (rc == -EAGAIN && !a->keys.n)
                h.state = TIER_SLOT_WRITING;
            else if (rc < 0)
                return s_tier_error(self, st, rc, slot, "delete");
            if (s_delete_wanted(&h, &a->keys, i + j))
                items[m++] = (tier_io_t){.slot = slot};
        }
        (void)tier_clear_batch(self->tier, items, m);
        for (uint32_t j = 0; j < m; j++) {
            if (items[j].rc < 0)
                return s_tier_error(self, st, items[j].rc, items[j].slot, "delete");
            s_net_clear(self, items[j].slot);
            (*deleted)++;
            self->stats.slots_deleted++;
        }
    }
    return 0;
}

static void s_on_delete(self_t *self, bus_request_t *req)
{
    const kvtier_DeleteSlotsRequest *d = &req->env.body.delete_slots_req;
    kvtier_Status st = {0};
    uint32_t deleted = 0;
    tier_actor_grant_t g;
    bus_env_init_reply(&self->rep, &req->env, kvtier_Envelope_delete_slots_rep_tag, self->name);
    int rc = tier_actor_auth(self, TIER_AUTH_DELETE, &self->arr->payload, 0, &g, &st);
    if (rc == 0)
        rc = s_check_tier(self, d->tier_id, d->epoch, "DeleteSlots", &st);
    if (rc == 0)
        rc = s_check_slots(self, &self->arr->slots, "DeleteSlots", &st);
    if (rc == 0)
        rc = tier_actor_auth_slots(self, &g, &self->arr->slots, NULL, "DeleteSlots", &st);
    if (rc == 0)
        rc = s_check_count(self, self->arr->keys.n, self->arr->slots.n, true, "DeleteSlots", "keys",
                           &st);
    if (rc == 0) {
        tier_actor_notice_peer(self, req, &g);
        (void)s_delete_apply(self, &deleted, &st);
    }
    self->rep.body.delete_slots_rep.deleted = deleted;
    s_reply(self, req, NULL, NULL, 0, &st);
}

/* ---- Probe ---- */

/* Probe{ucx}: the listener's address and a staging region for the sender (a tier
 * actor without UCX leaves the fields empty: the sender keeps to frames). */
static int s_probe_ucx(self_t *self, kvtier_ProbeReply *out, kvtier_Status *st)
{
    tier_actor_ucx_region_t g;
    char why[256];
    int rc = tier_actor_ucx_grant(self->ucx, zclock_mono(), &g, why, sizeof why);
    if (rc == -EBUSY)
        return tier_actor_fail(self, st, S_UNAVAILABLE, "%s", why);
    if (rc < 0)
        return tier_actor_fail(self, st, S_INTERNAL, "%s", why);
    if (g.rkey_len > sizeof out->ucx_rkey.bytes)
        return tier_actor_fail(self, st, S_INTERNAL,
                               "a UCX remote key of %zu bytes does not fit ProbeReply (%zu)",
                               g.rkey_len, sizeof out->ucx_rkey.bytes);
    snprintf(out->ucx_address, sizeof out->ucx_address, "%s", tier_actor_ucx_address(self->ucx));
    out->ucx_region = g.id;
    out->ucx_base = g.base;
    out->ucx_length = g.length;
    memcpy(out->ucx_rkey.bytes, g.rkey, g.rkey_len);
    out->ucx_rkey.size = (pb_size_t)g.rkey_len;
    self->stats.ucx_regions_granted++;
    return 0;
}

static void s_on_probe(self_t *self, bus_request_t *req)
{
    const kvtier_ProbeRequest *p = &req->env.body.probe_req;
    const bus_arrays_t *a = self->arr;
    kvtier_Status st = {0};
    bus_env_init_reply(&self->rep, &req->env, kvtier_Envelope_probe_rep_tag, self->name);
    int rc = s_check_tier(self, p->tier_id, 0, "Probe", &st);
    if (rc == 0)
        rc = s_check_slots(self, &a->slots, "Probe", &st);
    if (rc == 0)
        rc = s_check_count(self, a->keys.n, a->slots.n, true, "Probe", "keys", &st);
    int prc = rc == 0 ? tier_probe(self->tier, a->slots.v, a->slots.n, self->rep_mask) : 0;
    if (prc < 0)
        rc = tier_actor_fail(self, &st, S_INTERNAL, "probe of %u slots failed: %s", a->slots.n,
                             strerror(-prc));
    for (uint32_t i = 0; rc == 0 && a->keys.n && i < a->slots.n; i++) {
        tier_slot_header_t h; /* a keyed probe: the present block must be that key's */
        if (self->rep_mask[i])
            self->rep_mask[i] = tier_get_header(self->tier, a->slots.v[i], &h) == 0 &&
                                h.state == TIER_SLOT_SERVING && s_key_is(&h, a->keys.keys[i]);
    }
    if (rc == 0 && p->ucx && self->ucx)
        rc = s_probe_ucx(self, &self->rep.body.probe_rep, &st);
    self->rep_arr.mask.n = rc == 0 ? a->slots.n : 0;
    self->stats.probes += self->rep_arr.mask.n;
    s_reply(self, req, &self->rep_arr, NULL, 0, &st);
}

/* ---- Inventory ---- */

static void s_tier_info(self_t *self, kvtier_TierInfo *ti)
{
    const tier_config_t *c = &self->tier->cfg;
    ti->tier_id = self->tier_id;
    snprintf(ti->name, sizeof ti->name, "%.*s", (int)sizeof ti->name - 1, self->name);
    ti->kind = (kvtier_TierKind)tier_kind_wire(c->kind);
    snprintf(ti->kind_name, sizeof ti->kind_name, "%.*s", (int)sizeof ti->kind_name - 1, c->kind);
    snprintf(ti->endpoint, sizeof ti->endpoint, "%.*s", (int)sizeof ti->endpoint - 1,
             bus_server_endpoint(self->server));
    snprintf(ti->host, sizeof ti->host, "%.*s", (int)sizeof ti->host - 1, self->host);
    ti->capacity_slots = c->capacity;
    ti->slot_bytes = c->slot_size;
    ti->used_slots = self->used_slots;
    if (self->desc.access_kind == TIER_ACCESS_SHM)
        snprintf(ti->shm, sizeof ti->shm, "%.*s", (int)sizeof ti->shm - 1, self->desc.access);
    tier_actor_info_access(&self->desc, ti);
    snprintf(ti->ucx_address, sizeof ti->ucx_address, "%s", tier_actor_ucx_address(self->ucx));
    ti->epoch = self->epoch;
    ti->up = true;
}

void tier_actor_instance_name(self_t *self, uint32_t hash, char *out, size_t len)
{
    if (hash == 0) {
        out[0] = '\0';
        return;
    }
    for (uint32_t k = 0; k < self->ninstances; k++)
        if (self->instances[k].hash == hash) {
            snprintf(out, len, "%s", self->instances[k].id);
            return;
        }
    snprintf(out, len, "#%08x", hash);
}

static void s_inventory_entry(self_t *self, uint64_t slot, const tier_slot_header_t *h,
                              kvtier_InventoryEntry *e)
{
    e->slot = slot;
    memcpy(e->key, h->key.b, TIER_KEY_BYTES);
    tier_actor_instance_name(self, h->instance, e->instance_id, sizeof e->instance_id);
    e->size = h->size;
    e->checksum = h->checksum;
    e->ttl_deadline_ms = h->deadline_ms;
    e->state = kvtier_LocationState_LOCATION_SERVING;
}

/* One Inventory page: entries (or records) until the page is full
 * (tier_inventory_range walks the slots of the page's scan bound). */
typedef struct {
    self_t *self;
    kvtier_InventoryReply *r;
    uint8_t *records; /* records mode: the page's records; NULL: entries */
    uint32_t n, max;
    uint64_t next; /* where the next page starts when the page filled up */
} s_page_t;

static int s_page_entry(void *arg, uint64_t slot, const tier_slot_header_t *h)
{
    s_page_t *p = arg;
    if (p->n >= p->max) /* a backend that walks on after a stop */
        return 1;
    if (p->records) {
        bus_inv_record_t rec = {.slot = slot,
                                .size = h->size,
                                .checksum = h->checksum,
                                .ttl_deadline_ms = h->deadline_ms,
                                .instance = h->instance,
                                .state = kvtier_LocationState_LOCATION_SERVING};
        memcpy(rec.key, h->key.b, TIER_KEY_BYTES);
        bus_inv_record_put(p->records, p->n, &rec);
    } else {
        s_inventory_entry(p->self, slot, h, &p->r->entries[p->r->entries_count++]);
    }
    if (++p->n < p->max)
        return 0;
    p->next = slot + 1;
    return 1;
}

/* The page's bound: entries 0 or above 128 mean 128 (as always); records must be
 * 1..BUS_MAX_INVENTORY_RECORDS (0: all of them), and their buffer is grown to it
 * (kept for the actor's life: the next rebuild asks for the same). */
static int s_inventory_page(self_t *self, const kvtier_InventoryRequest *q, uint32_t *max,
                            kvtier_Status *st)
{
    if (q->end != 0 && q->end <= q->cursor)
        return tier_actor_fail(self, st, S_INVALID,
                               "tier %s: Inventory window [%" PRIu64 ", %" PRIu64
                               ") is empty: end must be above cursor (0: the tier's end)",
                               self->name, q->cursor, q->end);
    if (!q->records) {
        *max = q->max_entries && q->max_entries < TIER_ACTOR_INVENTORY_PAGE
                   ? q->max_entries
                   : TIER_ACTOR_INVENTORY_PAGE;
        return 0;
    }
    if (q->max_entries > BUS_MAX_INVENTORY_RECORDS)
        return tier_actor_fail(self, st, S_INVALID,
                               "tier %s: Inventory asks for %u records a page; at most %u fit "
                               "one reply (0 means %u)",
                               self->name, q->max_entries, BUS_MAX_INVENTORY_RECORDS,
                               BUS_MAX_INVENTORY_RECORDS);
    *max = q->max_entries ? q->max_entries : BUS_MAX_INVENTORY_RECORDS;
    size_t need = (size_t)*max * BUS_INVENTORY_RECORD_BYTES;
    if (need > self->inv_records_cap) {
        uint8_t *b = realloc(self->inv_records, need);
        if (!b)
            return tier_actor_fail(self, st, S_INTERNAL,
                                   "tier %s: no memory for an Inventory page of %u records",
                                   self->name, *max);
        self->inv_records = b;
        self->inv_records_cap = need;
    }
    return 0;
}

static void s_on_inventory(self_t *self, bus_request_t *req)
{
    const kvtier_InventoryRequest *q = &req->env.body.inventory_req;
    kvtier_Status st = {0};
    bus_env_init_reply(&self->rep, &req->env, kvtier_Envelope_inventory_rep_tag, self->name);
    kvtier_InventoryReply *r = &self->rep.body.inventory_rep;
    bus_arrays_t arr = {0};
    uint32_t max = 0;
    if (tier_actor_auth_meta(self, req, "Inventory", &st) == 0 &&
        s_check_tier(self, q->tier_id, 0, "Inventory", &st) == 0 &&
        s_inventory_page(self, q, &max, &st) == 0) {
        tier_actor_notice_peer(self, req, NULL); /* counts only with tokens off */
        uint64_t cap = self->tier->cfg.capacity;
        uint64_t end = q->end && q->end < cap ? q->end : cap;
        uint64_t from = q->cursor < end ? q->cursor : end;
        uint64_t to =
            end - from > TIER_ACTOR_INVENTORY_SCAN ? from + TIER_ACTOR_INVENTORY_SCAN : end;
        if (q->cursor == 0)
            tier_actor_count_used(self);
        s_page_t page = {.self = self,
                         .r = r,
                         .records = q->records ? self->inv_records : NULL,
                         .max = max,
                         .next = to};
        (void)tier_inventory_range(self->tier, from, to, s_page_entry, &page);
        uint64_t i = page.next;
        r->has_tier = true;
        s_tier_info(self, &r->tier);
        r->next_cursor = i < end ? i : end;
        r->done = i >= end;
        if (q->records)
            arr.payload = (bus_blob_t){.data = self->inv_records,
                                       .len = page.n * BUS_INVENTORY_RECORD_BYTES,
                                       .cap = page.n * BUS_INVENTORY_RECORD_BYTES};
        self->stats.inventory_pages++;
    }
    s_reply(self, req, &arr, NULL, 0, &st);
}

/* ---- CopySlots ---- */

/* Where a copy goes: with a token, the endpoint its tier table names for the
 * destination (the scheduler's membership), which a dst_endpoint in the request
 * may only repeat; without, the request's. */
static const char *s_copy_dest(self_t *self, const kvtier_CopySlotsRequest *c,
                               const tier_actor_grant_t *g, kvtier_Status *st)
{
    if (!g->on)
        return c->dst_endpoint;
    const char *ep = g->view.tiers[g->dst].endpoint;
    if (c->dst_endpoint[0] && strcmp(c->dst_endpoint, ep) != 0) {
        (void)tier_actor_fail(self, st, kvtier_StatusCode_STATUS_PERMISSION_DENIED,
                              "CopySlots names destination endpoint \"%s\" but tier id %u is at "
                              "\"%s\" (its registration): a copy goes only where the token says",
                              c->dst_endpoint, c->dst_tier_id, ep);
        return NULL;
    }
    return ep;
}

/* The whole request is checked here; tier_actor_copy.c does the copying. */
static int s_copy_check(self_t *self, const kvtier_CopySlotsRequest *c, const tier_actor_grant_t *g,
                        kvtier_Status *st)
{
    const bus_arrays_t *a = self->arr;
    uint32_t state = 0, max = tier_actor_copy_max_slots(self);
    int rc = s_check_tier(self, c->tier_id, 0, "CopySlots", st);
    if (rc == 0 && (c->dst_tier_id == 0 || (!g->on && !c->dst_endpoint[0])))
        rc = tier_actor_fail(self, st, S_INVALID,
                             "CopySlots needs the destination's tier id and endpoint (got id %u, "
                             "endpoint \"%s\")",
                             c->dst_tier_id, c->dst_endpoint);
    if (rc == 0)
        rc = s_state_from_wire(self, c->dst_state, &state, st);
    if (rc == 0 && a->slots.n > max)
        rc = tier_actor_fail(self, st, S_INVALID,
                             "%u slots in one CopySlots, the limit is %u: split the request",
                             a->slots.n, max);
    if (rc == 0)
        rc = s_check_slots(self, &a->slots, "CopySlots", st);
    if (rc == 0)
        rc = s_check_count(self, a->dst_slots.n, a->slots.n, false, "CopySlots", "dst_slots", st);
    if (rc == 0)
        rc = s_check_count(self, a->keys.n, a->slots.n, false, "CopySlots", "keys", st);
    if (rc == 0)
        rc = tier_actor_auth_pairs(self, g, &a->slots, &a->dst_slots, st);
    return rc;
}

static void s_on_copy(self_t *self, bus_request_t *req)
{
    const kvtier_CopySlotsRequest *c = &req->env.body.copy_slots_req;
    kvtier_Status st = {0};
    tier_actor_grant_t g;
    const char *ep = NULL;
    int rc = tier_actor_auth(self, TIER_AUTH_COPY, &self->arr->payload, c->dst_tier_id, &g, &st);
    if (rc == 0)
        rc = s_copy_check(self, c, &g, &st);
    if (rc == 0 && !(ep = s_copy_dest(self, c, &g, &st)))
        rc = -1;
    if (rc == 0)
        rc = tier_actor_copy_start(self, req, ep, &self->arr->payload, &st);
    if (rc == 0)
        return; /* replied when the copy is done */
    bus_env_init_reply(&self->rep, &req->env, kvtier_Envelope_copy_slots_rep_tag, self->name);
    self->rep_arr.mask.n = 0;
    s_reply(self, req, &self->rep_arr, NULL, 0, &st);
}

/* ---- dispatch ---- */

void tier_actor_serve(self_t *self, bus_request_t *req)
{
    self->rep_arr.sizes.n = 0;
    self->rep_arr.mask.n = 0;
    switch (req->env.which_body) {
    case kvtier_Envelope_write_slots_req_tag:
        s_on_write(self, req);
        break;
    case kvtier_Envelope_read_slots_req_tag:
        s_on_read(self, req);
        break;
    case kvtier_Envelope_put_header_req_tag:
        s_on_put_header(self, req);
        break;
    case kvtier_Envelope_delete_slots_req_tag:
        s_on_delete(self, req);
        break;
    case kvtier_Envelope_probe_req_tag:
        s_on_probe(self, req);
        break;
    case kvtier_Envelope_inventory_req_tag:
        s_on_inventory(self, req);
        break;
    case kvtier_Envelope_copy_slots_req_tag:
        s_on_copy(self, req);
        break;
    default: {
        const char *name = bus_body_name(req->env.which_body);
        self->stats.errors++;
        bus_server_reply_error(self->server, req->routing_id, req->env.corr_id, S_INVALID,
                               "tier %s: %s is not a tier-plane request (the coordinator serves "
                               "it)",
                               self->name, name ? name : "?");
        break;
    }
    }
}
