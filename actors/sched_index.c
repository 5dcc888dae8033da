/* sched_index.c — the scheduler's block index and instance registry.
 *
 * The index is the per-tier slot engines themselves (tiers/tier_slots.h: a hash
 * over (instance number, key) with state, pins, reservations and deadlines) plus
 * per-slot side arrays in sched_tiers.c (block size, checksum). A block's
 * locations are found by asking each tier's engine, the request's chain first, so
 * there is no second map to keep consistent with the engines.
 *
 * Instances get a 32-bit number that slot headers store; it is a hash of the id
 * (sched_instance_number), so a new leader maps a tier's inventory back to
 * instances without any persisted state. Two registered ids with the same number
 * are refused (CONFLICT).
 *
 * Lookup rules (docs/SCHEDULER.md): only SERVING, unexpired blocks hit; WRITING
 * never does. A lookup refreshes the policy rank (touch) of the hits it counts and
 * of nothing else, so probing keys that then miss does not keep blocks warm.
 * Never: allocates per request, blocks, or trusts a count from the wire. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "bus_log.h"
#include "sched_int.h"
#include "sched_index.h"
#include "tier_mem.h"

/* TTLs above this (about 34 years) are refused: deadlines must not overflow. */
#define S_MAX_TTL_MS (1ull << 40)

/* ---- hashing and the u32 map ---- */

uint64_t sched_hash(const sched_t *self, const void *data, size_t len, uint64_t extra)
{
    return XXH3_64bits_withSeed(data, len, self->hash_seed ^ (extra * 0x9E3779B97F4A7C15ull));
}

uint32_t sched_instance_number(const char *instance_id)
{
    return tier_instance_hash(instance_id);
}

int sched_map_init(sched_map_t *m, uint32_t max_items)
{
    uint64_t buckets = 16;
    while (buckets < 2ull * max_items)
        buckets <<= 1;
    m->idx = tier_mem_calloc(buckets, sizeof *m->idx);
    m->hash = tier_mem_calloc(buckets, sizeof *m->hash);
    m->mask = (uint32_t)(buckets - 1);
    return m->idx && m->hash ? 0 : -1;
}

void sched_map_fini(sched_map_t *m)
{
    tier_mem_free(m->idx);
    tier_mem_free(m->hash);
    m->idx = NULL;
    m->hash = NULL;
}

uint32_t sched_map_find(const sched_map_t *m, uint64_t hash, sched_map_eq_fn eq, const void *ctx)
{
    for (uint32_t b = (uint32_t)hash & m->mask;; b = (b + 1) & m->mask) {
        if (m->idx[b] == 0)
            return SCHED_NONE;
        if (m->hash[b] == hash && eq(ctx, m->idx[b] - 1))
            return m->idx[b] - 1;
    }
}

void sched_map_insert(sched_map_t *m, uint64_t hash, uint32_t idx)
{
    uint32_t b = (uint32_t)hash & m->mask;
    while (m->idx[b] != 0)
        b = (b + 1) & m->mask;
    m->idx[b] = idx + 1;
    m->hash[b] = hash;
}

/* Linear probing with backward-shift deletion: no tombstones, so probe runs stay
 * as short as the load factor (<= 1/2) allows. */
void sched_map_remove(sched_map_t *m, uint64_t hash, uint32_t idx)
{
    uint32_t b = (uint32_t)hash & m->mask;
    while (m->idx[b] != idx + 1) {
        if (m->idx[b] == 0)
            return;
        b = (b + 1) & m->mask;
    }
    for (uint32_t j = (b + 1) & m->mask; m->idx[j] != 0; j = (j + 1) & m->mask) {
        uint32_t home = (uint32_t)m->hash[j] & m->mask;
        if (((j - home) & m->mask) >= ((j - b) & m->mask)) {
            m->idx[b] = m->idx[j];
            m->hash[b] = m->hash[j];
            b = j;
        }
    }
    m->idx[b] = 0;
    m->hash[b] = 0;
}

/* ---- instances ---- */

int sched_index_init(sched_t *self)
{
    self->index.inst = calloc(self->cfg.max_instances, sizeof *self->index.inst);
    if (!self->index.inst)
        return -1;
    if (self->cfg.registry_output[0]) {
        self->index.registry = zsock_new(ZMQ_PUSH);
        if (!self->index.registry)
            return -1;
        zsock_set_sndhwm(self->index.registry, SCHED_REGISTRY_QUEUE);
        zsock_set_linger(self->index.registry, 1000); /* the last specs reach the writer */
        if (zsock_connect(self->index.registry, "%s", self->cfg.registry_output) < 0) {
            bus_error("sched", "cannot connect to the instance registry at %s",
                      self->cfg.registry_output);
            return -1;
        }
    }
    return sched_map_init(&self->index.inst_map, self->cfg.max_instances);
}

void sched_index_fini(sched_t *self)
{
    zsock_destroy(&self->index.registry);
    free(self->index.inst);
    self->index.inst = NULL;
    sched_map_fini(&self->index.inst_map);
}

typedef struct {
    const sched_t *self;
    const char *id;
} s_inst_key_t;

static bool s_inst_eq(const void *ctx, uint32_t idx)
{
    const s_inst_key_t *k = ctx;
    return strcmp(k->self->index.inst[idx].id, k->id) == 0;
}

sched_instance_t *sched_instance_find(sched_t *self, const char *id)
{
    s_inst_key_t k = {self, id};
    uint64_t h = sched_hash(self, id, strlen(id), 1);
    uint32_t i = sched_map_find(&self->index.inst_map, h, s_inst_eq, &k);
    return i == SCHED_NONE ? NULL : &self->index.inst[i];
}

sched_instance_t *sched_instance_get(sched_t *self, sched_call_t *call, const char *id)
{
    if (!id[0]) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "instance_id is empty");
        return NULL;
    }
    sched_instance_t *in = sched_instance_find(self, id);
    if (!in)
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_NOT_FOUND,
                          "instance '%s' is not registered (register_instance first)", id);
    return in;
}

const char *sched_instance_name(sched_t *self, uint32_t number)
{
    for (uint32_t i = 0; i < self->index.n_inst; i++)
        if (self->index.inst[i].number == number)
            return self->index.inst[i].id;
    return NULL;
}

uint32_t sched_instance_tokens(sched_t *self, uint32_t number)
{
    for (uint32_t i = 0; i < self->index.n_inst; i++)
        if (self->index.inst[i].number == number)
            return self->index.inst[i].spec.tokens_per_block;
    return 0;
}

static bool s_spec_equal(const kvtier_InstanceSpec *a, const kvtier_InstanceSpec *b)
{
    if (strcmp(a->model, b->model) || strcmp(a->dtype, b->dtype) ||
        a->tokens_per_block != b->tokens_per_block || a->bytes_per_block != b->bytes_per_block ||
        a->segment_bytes_count != b->segment_bytes_count ||
        (a->segments > 1 ? a->segments : 1) != (b->segments > 1 ? b->segments : 1))
        return false;
    for (pb_size_t i = 0; i < a->segment_bytes_count; i++)
        if (a->segment_bytes[i] != b->segment_bytes[i])
            return false;
    return true;
}

/* The smallest slot of any tier a block may be stored on (every chain's tiers). */
static const sched_tier_t *s_smallest_tier(sched_t *self)
{
    const sched_tier_t *best = NULL;
    for (uint32_t c = 0; c < self->cfg.n_chains; c++)
        for (uint32_t j = 0; j < self->cfg.chains[c].n_tiers; j++) {
            const sched_tier_t *t = &self->tierset.tiers[self->cfg.chains[c].tier_ids[j] - 1];
            if (!best || t->cfg.slot_size < best->cfg.slot_size)
                best = t;
        }
    return best;
}

/* A spec a scheduler can serve: 0, or -1 with why (an INVALID_ARGUMENT message). */
static int s_spec_check(sched_t *self, const kvtier_InstanceSpec *s, char *why, size_t len)
{
    if (!s->instance_id[0]) {
        snprintf(why, len, "spec.instance_id is empty");
        return -1;
    }
    /* ids name event topics ("stored/<id>"), metric labels and log lines: printable
     * ASCII without spaces, so that none of them needs escaping or can collide */
    for (const unsigned char *p = (const unsigned char *)s->instance_id; *p; p++)
        if (*p < 0x21 || *p > 0x7e) {
            snprintf(why, len,
                     "spec.instance_id: byte 0x%02x at offset %u: use printable ASCII "
                     "without spaces (letters, digits, punctuation)",
                     *p, (unsigned)(p - (const unsigned char *)s->instance_id));
            return -1;
        }
    if (s->tokens_per_block == 0 || s->bytes_per_block == 0) {
        snprintf(why, len,
                 "instance %s: tokens_per_block and bytes_per_block must be "
                 "> 0 (got %u, %" PRIu64 ")",
                 s->instance_id, s->tokens_per_block, s->bytes_per_block);
        return -1;
    }
    const sched_tier_t *t = s_smallest_tier(self);
    if (t && s->bytes_per_block > t->cfg.slot_size) {
        snprintf(why, len,
                 "instance %s: bytes_per_block %" PRIu64 " exceeds the slot "
                 "size of tier %s (%" PRIu64 " bytes)",
                 s->instance_id, s->bytes_per_block, t->cfg.name, t->cfg.slot_size);
        return -1;
    }
    if (s->segments > BUS_MAX_BLOCK_SEGMENTS) {
        snprintf(why, len, "instance %s: segments %u is above the maximum %u", s->instance_id,
                 s->segments, BUS_MAX_BLOCK_SEGMENTS);
        return -1;
    }
    if (s->segments > 1 && s->segment_bytes_count > 0) {
        snprintf(why, len, "instance %s: give segments (equal parts) or segment_bytes, not both",
                 s->instance_id);
        return -1;
    }
    if (s->segments > 1 && s->bytes_per_block % s->segments != 0) {
        snprintf(why, len,
                 "instance %s: bytes_per_block %" PRIu64 " is not a multiple of segments %u",
                 s->instance_id, s->bytes_per_block, s->segments);
        return -1;
    }
    if (s->segment_bytes_count > 0) {
        uint64_t sum = 0;
        for (pb_size_t i = 0; i < s->segment_bytes_count; i++) {
            if (s->segment_bytes[i] == 0 || s->segment_bytes[i] > s->bytes_per_block) {
                snprintf(why, len,
                         "instance %s: segment_bytes[%u] = %" PRIu64
                         " is 0 or larger than the block",
                         s->instance_id, (unsigned)i, s->segment_bytes[i]);
                return -1;
            }
            sum += s->segment_bytes[i];
        }
        if (sum != s->bytes_per_block) {
            snprintf(why, len,
                     "instance %s: segment_bytes add up to %" PRIu64
                     ", bytes_per_block is %" PRIu64,
                     s->instance_id, sum, s->bytes_per_block);
            return -1;
        }
    }
    return 0;
}

/* Registers a new instance of spec s (checked, not registered yet): the entry, or
 * NULL with the status code and why (CONFLICT: its header number is taken;
 * NO_SPACE: max_instances). */
static sched_instance_t *s_instance_add(sched_t *self, const kvtier_InstanceSpec *s,
                                        bus_code_t *code, char *why, size_t len)
{
    uint32_t number = sched_instance_number(s->instance_id);
    const char *other = sched_instance_name(self, number);
    if (other) {
        *code = kvtier_StatusCode_STATUS_CONFLICT;
        snprintf(why, len,
                 "instance %s hashes to the same slot-header number (%08x) as "
                 "registered instance %s: choose another id",
                 s->instance_id, number, other);
        return NULL;
    }
    if (self->index.n_inst >= self->cfg.max_instances) {
        *code = kvtier_StatusCode_STATUS_NO_SPACE;
        snprintf(why, len, "%u instances registered (max_instances %u)", self->index.n_inst,
                 self->cfg.max_instances);
        return NULL;
    }
    sched_instance_t *in = &self->index.inst[self->index.n_inst];
    memset(in, 0, sizeof *in);
    in->used = true;
    snprintf(in->id, sizeof in->id, "%s", s->instance_id);
    in->number = number;
    in->spec = *s;
    in->hash = sched_hash(self, in->id, strlen(in->id), 1);
    sched_map_insert(&self->index.inst_map, in->hash, self->index.n_inst);
    self->index.n_inst++;
    bus_info("sched",
             "instance %s registered (model %s, %" PRIu64 " bytes per block, number "
             "%08x)",
             in->id, in->spec.model, in->spec.bytes_per_block, in->number);
    return in;
}

/* Hands a newly registered instance's spec to the registry writer (etcd, issue 9
 * §1), without waiting: one that does not fit its queue is dropped, counted and
 * logged (a new leader then learns it from the client's re-registration). */
static void s_registry_push(sched_t *self, const kvtier_InstanceSpec *s)
{
    if (!self->index.registry)
        return;
    if (zmq_send(zsock_resolve(self->index.registry), s, sizeof *s, ZMQ_DONTWAIT) !=
        (int)sizeof *s) {
        self->g.registry_dropped++;
        bus_warn("sched", "instance %s not handed to the etcd registry (its queue of %d is full)",
                 s->instance_id, SCHED_REGISTRY_QUEUE);
    }
}

int sched_index_preload(sched_t *self, const kvtier_InstanceSpec *specs, uint32_t n)
{
    uint32_t added = 0;
    for (uint32_t i = 0; i < n; i++) {
        char why[256];
        bus_code_t code = kvtier_StatusCode_STATUS_INVALID_ARGUMENT;
        const kvtier_InstanceSpec *s = &specs[i];
        sched_instance_t *in = sched_instance_find(self, s->instance_id);
        if (in) {
            if (!s_spec_equal(&in->spec, s))
                bus_warn("sched",
                         "registry: instance %s listed twice with two specs: the "
                         "first is kept",
                         s->instance_id);
            continue;
        }
        if (s_spec_check(self, s, why, sizeof why) < 0 ||
            !(in = s_instance_add(self, s, &code, why, sizeof why))) {
            bus_warn("sched", "registry: instance %.64s not registered (%s): %s", s->instance_id,
                     bus_status_name((int)code), why);
            continue;
        }
        in->preloaded = true;
        added++;
    }
    if (n)
        bus_info("sched", "%u of %u instances of the etcd registry registered before serving",
                 added, n);
    return (int)added;
}

void sched_on_register(sched_t *self, sched_call_t *call)
{
    const kvtier_RegisterInstanceRequest *r = &call->req.env.body.register_instance_req;
    if (!r->has_spec) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT, "no spec");
        return;
    }
    const kvtier_InstanceSpec *s = &r->spec;
    char why[256];
    bus_code_t code = kvtier_StatusCode_STATUS_INVALID_ARGUMENT;
    if (s_spec_check(self, s, why, sizeof why) < 0) {
        sched_reply_error(self, call, code, "%s", why);
        return;
    }
    sched_instance_t *in = sched_instance_find(self, s->instance_id);
    if (in) {
        if (!s_spec_equal(&in->spec, s)) {
            sched_reply_error(self, call, kvtier_StatusCode_STATUS_CONFLICT,
                              "instance %s is registered with another spec (model %s, %u tokens "
                              "and %" PRIu64 " bytes per block)",
                              s->instance_id, in->spec.model, in->spec.tokens_per_block,
                              in->spec.bytes_per_block);
            return;
        }
        if (in->preloaded) { /* its client is back: the registry keeps its record fresh */
            in->preloaded = false;
            s_registry_push(self, s);
        }
        sched_reply_begin(self, call, kvtier_Envelope_register_instance_rep_tag);
        sched_reply(self, call);
        return;
    }
    if (!s_instance_add(self, s, &code, why, sizeof why)) {
        sched_reply_error(self, call, code, "%s", why);
        return;
    }
    s_registry_push(self, s); /* at registration only, never per request */
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_register_instance_rep_tag);
    rep->body.register_instance_rep.created = true;
    sched_reply(self, call);
}

/* ---- finding blocks ---- */

void sched_keys_load(sched_call_t *call, uint32_t n)
{
    memcpy(call->keys, call->req_arr->keys.keys, (size_t)n * TIER_KEY_BYTES);
}

/* Looks key up on tier t: 0 and *slot for a live SERVING block. An expired one is
 * removed by the engine; its header is deleted on the tier. */
/* What the engine's lookup of key on tier t (rc, info) means here. */
static int s_tier_result(sched_t *self, sched_tier_t *t, uint32_t number, const tier_key_t *key,
                         int rc, const tier_slot_info_t *info, uint32_t *slot)
{
    if (rc == 0) {
        if (t->n_deleting && sched_is_deleting(t, number, key, info->slot))
            return TIER_SLOTS_ENOENT; /* DELETING: not served, not pinnable */
        *slot = info->slot;
        return 0;
    }
    if (rc == TIER_SLOTS_EXPIRED) {
        self->g.expirations++;
        sched_tier_queue_delete(t, info->slot, key);
        sched_ev_removed(self, number, t->cfg.tier_id, t->medium,
                         kvtier_RemoveReason_REMOVE_REASON_EXPIRED, key, 1);
    }
    return rc;
}

static int s_tier_lookup(sched_t *self, sched_tier_t *t, uint32_t number, const tier_key_t *key,
                         int64_t now, uint32_t *slot)
{
    tier_slot_info_t info;
    int rc = tier_slots_lookup(t->slots, number, key, (uint64_t)now, &info);
    return s_tier_result(self, t, number, key, rc, &info, slot);
}

/* sched_block_find from the chain's tier `from` on (then the tiers outside it). */
static uint32_t s_block_find_from(sched_t *self, uint32_t number, const tier_key_t *key,
                                  uint32_t chain, uint32_t from, int64_t now, uint32_t *slot)
{
    const sched_chain_config_t *ch = &self->cfg.chains[chain];
    for (uint32_t j = from; j < ch->n_tiers; j++) {
        sched_tier_t *t = &self->tierset.tiers[ch->tier_ids[j] - 1];
        if (t->state != SCHED_TIER_DOWN && s_tier_lookup(self, t, number, key, now, slot) == 0)
            return t->idx;
    }
    if (ch->n_tiers == self->tierset.n_tiers)
        return SCHED_NONE;
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++) {
        bool in_chain = false;
        for (uint32_t j = 0; j < ch->n_tiers; j++)
            in_chain |= ch->tier_ids[j] == i + 1;
        sched_tier_t *t = &self->tierset.tiers[i];
        if (!in_chain && t->state != SCHED_TIER_DOWN &&
            s_tier_lookup(self, t, number, key, now, slot) == 0)
            return i;
    }
    return SCHED_NONE;
}

uint32_t sched_block_find(sched_t *self, uint32_t number, const tier_key_t *key, uint32_t chain,
                          int64_t now, uint32_t *slot)
{
    return s_block_find_from(self, number, key, chain, 0, now, slot);
}

/* ---- Lookup ---- */

/* The chain of the named request, 0 without one; SCHED_NONE after replying. */
static uint32_t s_lookup_chain(sched_t *self, sched_call_t *call, const sched_instance_t *in,
                               const char *request_id, sched_chain_fn chain_of);

static void s_lookup_key(sched_t *self, sched_call_t *call, const sched_instance_t *in,
                         uint32_t chain, uint32_t k, int64_t now)
{
    uint32_t slot;
    uint32_t t = sched_block_find(self, in->number, &call->keys[k], chain, now, &slot);
    call->rep_mask[k] = t != SCHED_NONE;
    call->rep_tiers[k] = t != SCHED_NONE ? t + 1 : 0;
    call->pos[k] = slot;
}

/* Keys a batched lookup asks the chain's head tier for at once. */
#define S_LOOKUP_GROUP 32u

/* Looks keys [0, n) up with the results of s_lookup_key on each, the head tier
 * asked a group at a time (tier_slots_lookup_batch: its cache misses overlap),
 * the tiers below key by key for the head's misses. stop_at_miss (prefix
 * modes): returns the first missing key's index (n when all hit); the keys after
 * it in its group were looked up on the head too: they get no hit, tier or touch,
 * but an expired block among them is removed as by any lookup (counted in
 * expirations, a BlockRemoved EXPIRED event), up to 31 keys past the prefix. */
static uint32_t s_lookup_keys(sched_t *self, sched_call_t *call, const sched_instance_t *in,
                              uint32_t chain, uint32_t n, int64_t now, bool stop_at_miss)
{
    sched_tier_t *head = &self->tierset.tiers[self->cfg.chains[chain].tier_ids[0] - 1];
    bool head_up = head->state != SCHED_TIER_DOWN;
    tier_slot_info_t info[S_LOOKUP_GROUP];
    int rc[S_LOOKUP_GROUP];
    for (uint32_t base = 0; base < n; base += S_LOOKUP_GROUP) {
        uint32_t m = n - base < S_LOOKUP_GROUP ? n - base : S_LOOKUP_GROUP;
        if (head_up)
            (void)tier_slots_lookup_batch(head->slots, in->number, &call->keys[base], m,
                                          (uint64_t)now, info, rc);
        uint32_t miss = UINT32_MAX;
        for (uint32_t i = 0; i < m; i++) {
            uint32_t k = base + i, slot = 0, t = SCHED_NONE;
            int r = head_up ? s_tier_result(self, head, in->number, &call->keys[k], rc[i], &info[i],
                                            &slot)
                            : TIER_SLOTS_ENOENT;
            if (miss != UINT32_MAX)
                continue; /* past the prefix: only the head's expiries are kept */
            t = r == 0 ? head->idx
                       : s_block_find_from(self, in->number, &call->keys[k], chain, 1, now, &slot);
            call->rep_mask[k] = t != SCHED_NONE;
            call->rep_tiers[k] = t != SCHED_NONE ? t + 1 : 0;
            call->pos[k] = slot;
            if (t == SCHED_NONE && stop_at_miss)
                miss = k;
        }
        if (miss != UINT32_MAX)
            return miss;
    }
    return n;
}

void sched_on_lookup(sched_t *self, sched_call_t *call, sched_chain_fn chain_of)
{
    const kvtier_LookupRequest *r = &call->req.env.body.lookup_req;
    sched_instance_t *in = sched_instance_get(self, call, r->instance_id);
    if (!in)
        return;
    uint32_t chain = s_lookup_chain(self, call, in, r->request_id, chain_of);
    if (chain == SCHED_NONE)
        return;
    if (r->mode != kvtier_LookupMode_LOOKUP_MODE_PREFIX &&
        r->mode != kvtier_LookupMode_LOOKUP_MODE_REVERSE &&
        r->mode != kvtier_LookupMode_LOOKUP_MODE_PER_KEY) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "unknown lookup mode %d", (int)r->mode);
        return;
    }
    uint32_t n = call->req_arr->keys.n;
    kvtier_LookupMode mode = r->mode;
    uint32_t w = r->window;
    int64_t now = sched_now();
    sched_keys_load(call, n);
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_lookup_rep_tag);
    memset(call->rep_mask, 0, n * sizeof *call->rep_mask);
    memset(call->rep_tiers, 0, n * sizeof *call->rep_tiers);

    uint32_t first = 0, end = 0; /* counted hits: [first, end), PER_KEY: every hit */
    if (mode == kvtier_LookupMode_LOOKUP_MODE_PREFIX ||
        (mode == kvtier_LookupMode_LOOKUP_MODE_REVERSE && w == 0)) {
        end = s_lookup_keys(self, call, in, chain, n, now, true);
    } else if (mode == kvtier_LookupMode_LOOKUP_MODE_REVERSE) {
        /* REVERSE with window w: scanning from the last key, the answer is the end
         * of the rightmost run of w consecutive hits; without one, a run of hits
         * starting at key 0 (a cached prefix shorter than w) counts; else 0. Keys
         * before the run found are not examined. */
        uint32_t run = 0;
        bool found = false;
        for (uint32_t k = n; k-- > 0;) {
            s_lookup_key(self, call, in, chain, k, now);
            run = call->rep_mask[k] ? run + 1 : 0;
            if (run == w) {
                first = k;
                end = k + w;
                found = true;
                break;
            }
        }
        if (!found)
            end = run; /* keys 0..run-1 all hit (the scan reached key 0) */
    } else {
        (void)s_lookup_keys(self, call, in, chain, n, now, false);
    }

    /* the head new blocks go to (a drained head tier is skipped): a hit there is
     * not worth a prefetch, nor one on another member of a head pool (one level) */
    const sched_tier_t *hd = sched_chain_head(self, chain);
    uint32_t hits = 0, head_hits = 0;
    bool events = sched_events_on(self); /* hits per tier are counted for the event only */
    uint32_t per_tier[SCHED_MAX_TIERS];
    if (events)
        memset(per_tier, 0, sizeof per_tier);
    bool advise = false;
    uint32_t lo = mode == kvtier_LookupMode_LOOKUP_MODE_PER_KEY ? 0 : first;
    uint32_t hi = mode == kvtier_LookupMode_LOOKUP_MODE_PER_KEY ? n : end;
    for (uint32_t k = lo; k < hi; k++) {
        if (!call->rep_mask[k])
            continue;
        hits++;
        bool on_head = sched_same_level(&self->tierset.tiers[call->rep_tiers[k] - 1], hd);
        advise |= !on_head;
        if (events) {
            head_hits += on_head;
            per_tier[call->rep_tiers[k] - 1]++;
        }
        sched_tier_t *t = &self->tierset.tiers[call->rep_tiers[k] - 1];
        t->hits++;
        (void)tier_slots_touch_at(t->slots, call->pos[k], in->number, &call->keys[k], (uint64_t)now,
                                  0);
    }
    kvtier_LookupReply *lr = &rep->body.lookup_rep;
    lr->hit_count = mode == kvtier_LookupMode_LOOKUP_MODE_PER_KEY ? hits : end;
    lr->prefetch_advised = advise;
    if (events) { /* enough to rebuild the trace: keys, mode, hits per tier */
        uint32_t th[SCHED_EV_TIER_HITS][2], nt = 0;
        for (uint32_t i = 0; i < self->tierset.n_tiers && nt < SCHED_EV_TIER_HITS; i++)
            if (per_tier[i]) {
                th[nt][0] = self->tierset.tiers[i].cfg.tier_id;
                th[nt++][1] = per_tier[i];
            }
        sched_ev_lookup(self, in->number, r->request_id, (uint32_t)mode, lr->hit_count, head_hits,
                        call->keys, n, (const uint32_t(*)[2])th, nt);
    }
    call->rep_arr.mask.n = n;
    call->rep_arr.tier_ids.n = n;
    in->c.lookups++;
    in->c.lookup_keys += n;
    in->c.hit_keys += hits;
    in->c.miss_keys += n - hits;
    self->c.lookups++;
    self->c.lookup_keys += n;
    self->c.hit_keys += hits;
    self->c.miss_keys += n - hits;
    sched_reply(self, call);
}

static uint32_t s_lookup_chain(sched_t *self, sched_call_t *call, const sched_instance_t *in,
                               const char *request_id, sched_chain_fn chain_of)
{
    if (!request_id[0])
        return 0;
    uint32_t chain = chain_of(self, (uint32_t)(in - self->index.inst), request_id);
    if (chain == SCHED_NONE)
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_NOT_FOUND,
                          "request %s of instance %s is not open (request_begin first, or "
                          "look up without a request id)",
                          request_id, in->id);
    return chain;
}

/* ---- Touch and Remove ---- */

void sched_on_touch(sched_t *self, sched_call_t *call)
{
    const kvtier_TouchRequest *r = &call->req.env.body.touch_req;
    sched_instance_t *in = sched_instance_get(self, call, r->instance_id);
    if (!in)
        return;
    if (r->ttl_ms > S_MAX_TTL_MS) {
        sched_reply_error(self, call, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                          "ttl_ms %" PRIu64 " too large (at most %llu)", r->ttl_ms, S_MAX_TTL_MS);
        return;
    }
    uint32_t n = call->req_arr->keys.n;
    int64_t now = sched_now();
    uint64_t deadline = r->ttl_ms ? (uint64_t)now + r->ttl_ms : 0;
    sched_keys_load(call, n);
    bool *any = call->rep_mask; /* scratch: was key k touched on some tier */
    memset(any, 0, n * sizeof *any);
    for (uint32_t i = 0; i < self->tierset.n_tiers; i++) {
        sched_tier_t *t = &self->tierset.tiers[i];
        if (t->state == SCHED_TIER_DOWN)
            continue;
        /* the blocks whose deadline this touch extends: their tier headers are
         * rewritten too, or a rebuilt index would expire them early */
        uint32_t *moved = call->pos, *moved_keys = call->rep_tiers, n_moved = 0;
        for (uint32_t k = 0; k < n; k++) {
            tier_slot_info_t info;
            int rc = tier_slots_peek(t->slots, in->number, &call->keys[k], &info);
            if (rc < 0)
                continue;
            rc = tier_slots_touch(t->slots, in->number, &call->keys[k], (uint64_t)now, deadline);
            if (rc == 0) {
                any[k] = true;
                if (deadline && info.deadline_ms && deadline > info.deadline_ms &&
                    !(t->n_deleting &&
                      sched_is_deleting(t, in->number, &call->keys[k], info.slot))) {
                    moved[n_moved] = info.slot;
                    moved_keys[n_moved++] = k;
                }
            } else if (rc == TIER_SLOTS_EXPIRED) {
                self->g.expirations++;
                sched_tier_queue_delete(t, info.slot, &call->keys[k]);
                sched_ev_removed(self, in->number, t->cfg.tier_id, t->medium,
                                 kvtier_RemoveReason_REMOVE_REASON_EXPIRED, &call->keys[k], 1);
            }
        }
        sched_tier_reput_deadlines(self, t, in->id, deadline, moved, call->keys, moved_keys,
                                   n_moved);
    }
    uint32_t touched = 0;
    for (uint32_t k = 0; k < n; k++)
        touched += any[k];
    in->c.touched += touched;
    self->c.touched += touched;
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_touch_rep_tag);
    rep->body.touch_rep.touched = touched;
    sched_reply(self, call);
}

void sched_on_remove(sched_t *self, sched_call_t *call)
{
    const kvtier_RemoveRequest *r = &call->req.env.body.remove_req;
    sched_instance_t *in = sched_instance_get(self, call, r->instance_id);
    if (!in)
        return;
    uint32_t n = call->req_arr->keys.n;
    sched_keys_load(call, n);
    uint32_t removed = 0, busy = 0;
    for (uint32_t k = 0; k < n; k++) {
        bool gone = false, held = false;
        for (uint32_t i = 0; i < self->tierset.n_tiers; i++) {
            sched_tier_t *t = &self->tierset.tiers[i];
            tier_slot_info_t info;
            if (t->state == SCHED_TIER_DOWN ||
                tier_slots_peek(t->slots, in->number, &call->keys[k], &info) < 0)
                continue;
            int rc = tier_slots_remove(t->slots, in->number, &call->keys[k]);
            if (rc == 0) {
                gone = true;
                sched_tier_queue_delete(t, info.slot, &call->keys[k]);
                sched_ev_removed(self, in->number, t->cfg.tier_id, t->medium,
                                 kvtier_RemoveReason_REMOVE_REASON_REMOVED, &call->keys[k], 1);
            } else if (rc == TIER_SLOTS_EBUSY) {
                held = true;
            }
        }
        removed += gone && !held;
        busy += held;
    }
    in->c.removed += removed;
    in->c.remove_busy += busy;
    self->c.removed += removed;
    self->c.remove_busy += busy;
    kvtier_Envelope *rep = sched_reply_begin(self, call, kvtier_Envelope_remove_rep_tag);
    rep->body.remove_rep.removed = removed;
    if (busy)
        snprintf(rep->status.message, sizeof rep->status.message,
                 "%u of %u keys are pinned or being written and were not removed", busy, n);
    sched_reply(self, call);
}
