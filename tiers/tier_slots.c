/* tier_slots.c — the per-tier slot engine (see tier_slots.h for the contract).
 *
 * Layout: one s_slot_t per slot, indexed by slot number. The hash index is
 * open addressing with linear probing at load <= 2/3 (capacity x 3/2 + 1 entries,
 * a hash's home by fastrange rather than a power-of-two mask, so 10 M slots take
 * 120 MB of index instead of 268 MB; a probe run rarely leaves its 64-byte line
 * of 8 entries): each entry is the slot
 * number plus 32 hash bits, so a probe touches a slot (its key) only when the
 * hash bits match — a hit costs two cache misses, a miss one. Deletion shifts
 * entries back (no tombstones). A free slot sits in the doubly linked free
 * list through `next`/`prev` (doubly linked so recovery can adopt any free
 * slot in O(1)). The TTL heap holds (deadline, slot, epoch) entries;
 * an entry is live while its slot has S_IN_HEAP and the same epoch, so a
 * deadline change or a departure only bumps the epoch (the old entry goes
 * stale) and compaction rebuilds the heap once stale entries exceed the
 * bound. The journal records what the batch being reserved did, one entry
 * per key, so a failed batch is replayed backwards.
 *
 * Must never allocate outside tier_slots_new, and never let a block being
 * written, or an expired one, be served.
 */
#include "tier_slots.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <xxhash.h>

#include "tier_mem.h"
#include "tier_policy.h"

#define S_NONE UINT32_MAX
#define S_COUNT_MAX (UINT32_MAX - 1)
#define S_EMPTY UINT64_MAX

enum {
    S_ANY_OK = 1,   /* a sharer / rewriter of the reservation in flight succeeded */
    S_IN_HEAP = 2,  /* has a live TTL-heap entry */
    S_DEFERRED = 4, /* expired while held; pushed back on the heap when released */
};

typedef struct {
    tier_key_t key;
    uint64_t deadline; /* COMMITTED: absolute ms, 0 = none */
    uint64_t pending;  /* deadline the reservation / rewrite in flight will apply */
    uint32_t instance;
    uint32_t next;  /* free list */
    uint32_t prev;  /* free list */
    uint32_t pins;  /* COMMITTED only */
    uint32_t refs;  /* sharers (RESERVED) or rewriters (COMMITTED) */
    uint32_t epoch; /* validates heap entries */
    uint32_t stamp; /* batch that last settled or placed this slot */
    uint8_t state;
    uint8_t flags;
} s_slot_t;

typedef struct {
    uint64_t deadline;
    uint32_t slot;
    uint32_t epoch;
} s_heap_ent_t;

enum { S_J_NEW, S_J_EVICT, S_J_SHARE, S_J_READMIT };

typedef struct {
    tier_key_t key;    /* S_J_EVICT: the victim's */
    uint64_t deadline; /* S_J_EVICT: the victim's */
    uint64_t memo;     /* S_J_EVICT: the victim's policy position */
    uint64_t pending;  /* S_J_SHARE / S_J_READMIT: pending deadline before */
    uint32_t instance; /* S_J_EVICT: the victim's */
    uint32_t slot;
    uint32_t stamp; /* S_J_SHARE / S_J_READMIT: stamp before */
    uint8_t op;
    uint8_t expired; /* S_J_EVICT: the victim was taken because expired */
} s_journal_t;

struct tier_slots {
    const tier_policy_ops_t *pol;
    void *pol_state;
    s_slot_t *slots;
    uint64_t *index; /* (hash32 << 32 | slot), S_EMPTY when empty */
    s_heap_ent_t *heap;
    s_journal_t *journal;
    uint32_t capacity;
    uint32_t max_batch;
    uint64_t nindex; /* index entries: capacity x 3/2 + 1 (home = fastrange) */
    uint32_t free_head;
    uint32_t heap_len;
    uint32_t heap_cap;
    uint32_t heap_stale;
    uint32_t stale_bound;
    uint32_t jlen;
    uint32_t batch;      /* stamp of the reserve in progress, 0 outside one */
    uint32_t batch_seq;  /* last stamp handed out */
    uint32_t protected_; /* evictable blocks the current batch reported SERVING */
    uint32_t n_free;
    uint32_t n_reserved;
    uint32_t n_committed;
    uint32_t n_pinned;
    uint32_t n_rewriting;
    uint32_t n_deferred;
    uint32_t n_evictable;
    uint64_t evictions;
    uint64_t expirations;
    uint64_t removals;
    uint64_t rollbacks;
    uint64_t compactions;
    uint64_t now;
    uint64_t seed; /* of the index hash */
};

/* ---------------------------------------------------------------- basics */

static uint64_t s_clock(tier_slots_t *self, uint64_t now_ms)
{
    if (now_ms > self->now)
        self->now = now_ms;
    return self->now;
}

static bool s_expired(const s_slot_t *e, uint64_t now)
{
    return e->deadline != 0 && e->deadline <= now;
}

static bool s_held(const s_slot_t *e)
{
    return e->pins != 0 || e->refs != 0;
}

/* May the slot be taken as a victim? Members of the batch being reserved never are. */
static bool s_evictable(const tier_slots_t *self, uint32_t slot)
{
    const s_slot_t *e = &self->slots[slot];
    return e->state == TIER_SLOT_COMMITTED && !s_held(e) &&
           (self->batch == 0 || e->stamp != self->batch);
}

static bool s_pol_evictable(const void *ctx, uint32_t slot)
{
    return s_evictable(ctx, slot);
}

/* ------------------------------------------------------------ hash index */

/* Keys come from clients: hash them with a per-engine secret seed so nobody
 * can craft keys that pile up in one probe run. The 32-bit result goes in the
 * index entry; its low bits choose the home position. */
static uint32_t s_hash32(const tier_slots_t *self, uint32_t instance, const tier_key_t *key)
{
    uint64_t h = XXH3_64bits_withSeed(key->b, TIER_KEY_BYTES,
                                      self->seed ^ (instance * 0x9e3779b97f4a7c15ull));
    return (uint32_t)(h >> 32) ^ (uint32_t)h;
}

uint64_t tier_slots_key_hash(const tier_slots_t *self, uint32_t instance, const tier_key_t *key)
{
    if (!self || !key)
        return 0;
    /* Another seed than the index's: the policy's fingerprints say nothing of
     * where a key sits in the index. */
    return XXH3_64bits_withSeed(key->b, TIER_KEY_BYTES,
                                ~self->seed ^ (instance * 0xc2b2ae3d27d4eb4full));
}

/* Tells the policy that slot j (committed now) is admitted. */
static void s_admitted(tier_slots_t *self, uint32_t j, uint32_t batch)
{
    if (!self->pol->admitted_facts) {
        self->pol->admitted(self->pol_state, j);
        return;
    }
    const s_slot_t *e = &self->slots[j];
    tier_policy_facts_t f = {tier_slots_key_hash(self, e->instance, &e->key), batch};
    self->pol->admitted_facts(self->pol_state, j, &f);
}

static bool s_same(const s_slot_t *e, uint32_t instance, const tier_key_t *key)
{
    return e->instance == instance && tier_key_eq(&e->key, key);
}

/* Index position a hash starts probing at (Lemire's fastrange: the hash's high bits
 * spread over nindex entries), and the next position, wrapping. */
static inline uint32_t s_home(const tier_slots_t *self, uint32_t h)
{
    return (uint32_t)(((uint64_t)h * self->nindex) >> 32);
}

static inline uint32_t s_next(const tier_slots_t *self, uint32_t i)
{
    return (uint64_t)i + 1 == self->nindex ? 0 : i + 1;
}

/* Probe distance from a to b (b at or after a, wrapping). */
static inline uint64_t s_dist(const tier_slots_t *self, uint32_t a, uint32_t b)
{
    return b >= a ? (uint64_t)(b - a) : (uint64_t)b + self->nindex - a;
}

/* The slot of (instance, key) whose s_hash32 is h, or S_NONE. */
static uint32_t s_find_h(const tier_slots_t *self, uint32_t h, uint32_t instance,
                         const tier_key_t *key)
{
    for (uint32_t i = s_home(self, h);; i = s_next(self, i)) {
        uint64_t ent = self->index[i];
        if (ent == S_EMPTY)
            return S_NONE;
        uint32_t slot = (uint32_t)ent;
        if ((uint32_t)(ent >> 32) == h && s_same(&self->slots[slot], instance, key))
            return slot;
    }
}

static uint32_t s_find(const tier_slots_t *self, uint32_t instance, const tier_key_t *key)
{
    return s_find_h(self, s_hash32(self, instance, key), instance, key);
}

static void s_hash_insert(tier_slots_t *self, uint32_t slot)
{
    const s_slot_t *e = &self->slots[slot];
    uint32_t h = s_hash32(self, e->instance, &e->key);
    uint32_t i = s_home(self, h);
    while (self->index[i] != S_EMPTY)
        i = s_next(self, i);
    self->index[i] = (uint64_t)h << 32 | slot;
}

/* Removes slot's entry and shifts later entries of the run back into the
 * hole when that keeps them reachable from their home position. */
static void s_hash_remove(tier_slots_t *self, uint32_t slot)
{
    const s_slot_t *e = &self->slots[slot];
    uint32_t i = s_home(self, s_hash32(self, e->instance, &e->key));
    while ((uint32_t)self->index[i] != slot)
        i = s_next(self, i);
    for (uint32_t j = i;;) {
        self->index[i] = S_EMPTY;
        for (;;) {
            j = s_next(self, j);
            uint64_t ent = self->index[j];
            if (ent == S_EMPTY)
                return;
            uint32_t home = s_home(self, (uint32_t)(ent >> 32));
            if (s_dist(self, home, j) >= s_dist(self, i, j)) {
                self->index[i] = ent;
                i = j;
                break;
            }
        }
    }
}

/* ------------------------------------------------------------- free list */

static void s_free_push(tier_slots_t *self, uint32_t slot)
{
    s_slot_t *e = &self->slots[slot];
    e->state = TIER_SLOT_FREE;
    e->pins = e->refs = 0;
    e->flags = 0;
    e->deadline = e->pending = 0;
    e->prev = S_NONE;
    e->next = self->free_head;
    if (self->free_head != S_NONE)
        self->slots[self->free_head].prev = slot;
    self->free_head = slot;
    self->n_free++;
}

static void s_free_unlink(tier_slots_t *self, uint32_t slot)
{
    s_slot_t *e = &self->slots[slot];
    if (e->prev != S_NONE)
        self->slots[e->prev].next = e->next;
    else
        self->free_head = e->next;
    if (e->next != S_NONE)
        self->slots[e->next].prev = e->prev;
    e->next = e->prev = S_NONE;
    self->n_free--;
}

/* -------------------------------------------------------------- TTL heap */

static bool s_heap_before(const s_heap_ent_t *a, const s_heap_ent_t *b)
{
    return a->deadline < b->deadline || (a->deadline == b->deadline && a->slot < b->slot);
}

static void s_heap_sift_up(s_heap_ent_t *h, uint32_t i)
{
    s_heap_ent_t x = h[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!s_heap_before(&x, &h[parent]))
            break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = x;
}

static void s_heap_sift_down(s_heap_ent_t *h, uint32_t len, uint32_t i)
{
    s_heap_ent_t x = h[i];
    for (;;) {
        uint64_t c = 2 * (uint64_t)i + 1;
        if (c >= len)
            break;
        if (c + 1 < len && s_heap_before(&h[c + 1], &h[c]))
            c++;
        if (!s_heap_before(&h[c], &x))
            break;
        h[i] = h[c];
        i = (uint32_t)c;
    }
    h[i] = x;
}

static bool s_heap_live(const tier_slots_t *self, const s_heap_ent_t *ent)
{
    const s_slot_t *e = &self->slots[ent->slot];
    return (e->flags & S_IN_HEAP) && e->epoch == ent->epoch;
}

/* Drops every stale entry and re-heapifies: O(heap), run once more than
 * stale_bound entries went stale, so amortised O(1) per stale entry. */
static void s_heap_compact(tier_slots_t *self)
{
    uint32_t kept = 0;
    for (uint32_t i = 0; i < self->heap_len; i++)
        if (s_heap_live(self, &self->heap[i]))
            self->heap[kept++] = self->heap[i];
    self->heap_len = kept;
    self->heap_stale = 0;
    for (uint32_t i = kept / 2; i-- > 0;)
        s_heap_sift_down(self->heap, kept, i);
    self->compactions++;
}

static void s_heap_push(tier_slots_t *self, uint32_t slot)
{
    s_slot_t *e = &self->slots[slot];
    assert(e->deadline != 0 && !(e->flags & S_IN_HEAP));
    /* Cannot be full while live <= capacity and stale <= bound; kept as a guard. */
    if (self->heap_len == self->heap_cap)
        s_heap_compact(self);
    self->heap[self->heap_len] = (s_heap_ent_t){e->deadline, slot, e->epoch};
    s_heap_sift_up(self->heap, self->heap_len++);
    e->flags |= S_IN_HEAP;
}

/* The slot's heap entry (if any) goes stale. */
static void s_heap_forget(tier_slots_t *self, uint32_t slot)
{
    s_slot_t *e = &self->slots[slot];
    if (!(e->flags & S_IN_HEAP))
        return;
    e->flags &= (uint8_t)~S_IN_HEAP;
    e->epoch++;
    if (++self->heap_stale > self->stale_bound)
        s_heap_compact(self);
}

static void s_heap_pop(tier_slots_t *self)
{
    self->heap[0] = self->heap[--self->heap_len];
    if (self->heap_len > 0)
        s_heap_sift_down(self->heap, self->heap_len, 0);
}

/* Pops expired entries, earliest first, until one whose block may be taken:
 * returns it (off the heap) or S_NONE. Expired held blocks met on the way
 * leave the heap as deferred; they come back when released. */
static uint32_t s_sweep_expired(tier_slots_t *self)
{
    while (self->heap_len > 0) {
        s_heap_ent_t top = self->heap[0];
        s_slot_t *e = &self->slots[top.slot];
        if (!s_heap_live(self, &top)) {
            s_heap_pop(self);
            self->heap_stale--;
            continue;
        }
        if (top.deadline > self->now)
            break;
        s_heap_pop(self);
        e->flags &= (uint8_t)~S_IN_HEAP;
        if (s_evictable(self, top.slot))
            return top.slot;
        /* Only holds keep an expired block: batch protection covers live ones. */
        assert(s_held(e));
        e->flags |= S_DEFERRED;
        self->n_deferred++;
    }
    return S_NONE;
}

/* ------------------------------------------------------ block transitions */

/* A committed block stopped being held: evictable again, and a deferred
 * expiry resumes (it is expired, so it goes to the top of the heap). */
static void s_unheld(tier_slots_t *self, uint32_t slot)
{
    s_slot_t *e = &self->slots[slot];
    self->n_evictable++;
    if (e->flags & S_DEFERRED) {
        e->flags &= (uint8_t)~S_DEFERRED;
        self->n_deferred--;
        s_heap_push(self, slot);
    }
}

/* Removes a committed unheld block and frees its slot. */
static void s_drop(tier_slots_t *self, uint32_t slot)
{
    self->pol->released(self->pol_state, slot);
    s_heap_forget(self, slot);
    s_hash_remove(self, slot);
    self->n_committed--;
    self->n_evictable--;
    s_free_push(self, slot);
}

static void s_fill_info(const tier_slots_t *self, uint32_t slot, tier_slot_info_t *info)
{
    if (!info)
        return;
    const s_slot_t *e = &self->slots[slot];
    memset(info, 0, sizeof(*info));
    info->slot = slot;
    info->state = e->state;
    if (e->state == TIER_SLOT_FREE)
        return;
    info->key = e->key;
    info->instance = e->instance;
    info->pins = e->pins;
    info->refs = e->refs;
    info->deadline_ms = e->deadline;
    info->pending_deadline_ms = e->pending;
    info->expired = e->state == TIER_SLOT_COMMITTED && s_expired(e, self->now);
    info->deferred = (e->flags & S_DEFERRED) != 0;
}

/* The read path's view: a committed block, lazily expired. */
/* s_serve of the slot s_find gave (S_NONE: absent). */
static int s_serve_found(tier_slots_t *self, uint32_t i, tier_slot_info_t *info, uint32_t *slot)
{
    if (i == S_NONE || self->slots[i].state != TIER_SLOT_COMMITTED)
        return TIER_SLOTS_ENOENT;
    s_fill_info(self, i, info);
    s_slot_t *e = &self->slots[i];
    if (s_expired(e, self->now)) {
        if (s_held(e))
            return TIER_SLOTS_EXPIRED_HELD;
        s_drop(self, i);
        self->expirations++;
        return TIER_SLOTS_EXPIRED;
    }
    *slot = i;
    return 0;
}

static int s_serve(tier_slots_t *self, uint32_t instance, const tier_key_t *key,
                   tier_slot_info_t *info, uint32_t *slot)
{
    return s_serve_found(self, s_find(self, instance, key), info, slot);
}

/* -------------------------------------------------------------- lifecycle */

static uint64_t s_seed(const void *self, uint64_t given)
{
    uint64_t seed = given;
    if (seed == 0 && getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        seed = (uint64_t)(uintptr_t)self ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32);
    }
    return seed;
}

tier_slots_t *tier_slots_new(const tier_slots_config_t *cfg)
{
    if (!cfg || cfg->capacity == 0 || cfg->capacity > (1u << 31) || cfg->max_batch == 0)
        return NULL;
    const tier_policy_ops_t *pol = tier_policy_find(cfg->policy ? cfg->policy : "lru");
    if (!pol)
        return NULL;
    uint64_t bound = cfg->heap_stale_bound ? cfg->heap_stale_bound : cfg->capacity / 4 + 16;
    uint64_t heap_cap = (uint64_t)cfg->capacity + bound + 1;
    if (heap_cap >= S_NONE)
        return NULL;
    /* one empty entry at least (a miss ends), < 2^32: positions fit 32 bits */
    uint64_t nindex = (uint64_t)cfg->capacity + cfg->capacity / 2 + 1;

    tier_slots_t *self = calloc(1, sizeof(*self));
    if (!self)
        goto out_fail;
    self->pol = pol;
    self->seed = s_seed(self, cfg->hash_seed);
    self->capacity = cfg->capacity;
    self->max_batch = cfg->max_batch;
    self->nindex = nindex;
    self->stale_bound = (uint32_t)bound;
    self->heap_cap = (uint32_t)heap_cap;
    self->pol_state = malloc(pol->state_size(cfg->capacity));
    self->slots = malloc((size_t)cfg->capacity * sizeof(s_slot_t));
    self->index = malloc((size_t)nindex * sizeof(uint64_t));
    self->heap = tier_mem_calloc(heap_cap, sizeof(s_heap_ent_t));
    self->journal = malloc((size_t)cfg->max_batch * sizeof(s_journal_t));
    if (!self->pol_state || !self->slots || !self->index || !self->heap || !self->journal)
        goto out_fail;

    pol->init(self->pol_state, cfg->capacity);
    memset(self->index, 0xff, (size_t)nindex * sizeof(uint64_t));
    memset(self->slots, 0, (size_t)cfg->capacity * sizeof(s_slot_t));
    /* Touch the journal now so first use does not page-fault. The TTL heap is not
     * touched: 16 bytes a slot of resident memory that blocks without a TTL never
     * use; its pages fault in as deadlines fill it (one per 256 entries). */
    memset(self->journal, 0, (size_t)cfg->max_batch * sizeof(s_journal_t));
    self->free_head = S_NONE;
    for (uint32_t i = cfg->capacity; i-- > 0;)
        s_free_push(self, i); /* slot 0 ends at the head: slots are handed out in order */
    return self;

out_fail:
    tier_slots_destroy(&self);
    return NULL;
}

void tier_slots_destroy(tier_slots_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    tier_slots_t *self = *self_p;
    free(self->pol_state);
    free(self->slots);
    free(self->index);
    tier_mem_free(self->heap);
    free(self->journal);
    free(self);
    *self_p = NULL;
}

const char *tier_slots_policy(const tier_slots_t *self)
{
    return self->pol->name;
}

const char *tier_slots_strerror(int rc)
{
    switch (rc) {
    case 0:
        return "ok";
    case TIER_SLOTS_ENOENT:
        return "no such block";
    case TIER_SLOTS_EXPIRED:
        return "block expired (removed)";
    case TIER_SLOTS_EXPIRED_HELD:
        return "block expired (held, removed once released)";
    case TIER_SLOTS_ENOSPC:
        return "no space for the batch";
    case TIER_SLOTS_E2BIG:
        return "batch larger than the tier's max batch";
    case TIER_SLOTS_EDUP:
        return "duplicate key";
    case TIER_SLOTS_EBUSY:
        return "block or slot busy";
    case TIER_SLOTS_ESTATE:
        return "wrong state for this call";
    case TIER_SLOTS_EOVERFLOW:
        return "pin or sharer count at its limit";
    case TIER_SLOTS_EINVAL:
        return "invalid argument";
    default:
        return "unknown slot engine error";
    }
}

/* ---------------------------------------------------------------- reserve */

static void s_batch_begin(tier_slots_t *self)
{
    if (++self->batch_seq == 0) {
        /* Stamps wrapped: clear old ones so none matches a new batch by chance. */
        for (uint32_t i = 0; i < self->capacity; i++)
            self->slots[i].stamp = 0;
        self->batch_seq = 1;
    }
    self->batch = self->batch_seq;
    self->jlen = 0;
    self->protected_ = 0;
}

/* Pass 1: keys already known. Marks newcomers with kind 0. */
static int s_settle_known(tier_slots_t *self, uint32_t instance, const tier_key_t *keys, size_t n,
                          uint64_t deadline, unsigned flags, tier_resv_t *out)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t j = s_find(self, instance, &keys[i]);
        out[i] = (tier_resv_t){j, 0};
        if (j == S_NONE)
            continue;
        s_slot_t *e = &self->slots[j];
        if (e->stamp == self->batch)
            return TIER_SLOTS_EDUP;
        uint32_t was = e->stamp; /* a reservation's is its admission batch: undone on rollback */
        e->stamp = self->batch;
        /* A pinned block counts as serving even once expired: its readers may be
         * copying it right now, so it must not be re-admitted and rewritten. */
        if (e->state == TIER_SLOT_COMMITTED && (flags & TIER_RESERVE_SKIP_SERVING) &&
            (!s_expired(e, self->now) || e->pins > 0)) {
            out[i].kind = TIER_RESV_SERVING;
            if (!s_held(e))
                self->protected_++;
            continue;
        }
        if (e->refs == S_COUNT_MAX) {
            e->stamp = was;
            return TIER_SLOTS_EOVERFLOW;
        }
        s_journal_t *jr = &self->journal[self->jlen++];
        jr->slot = j;
        jr->stamp = was;
        jr->pending = e->pending;
        if (e->state == TIER_SLOT_RESERVED) {
            jr->op = S_J_SHARE;
            out[i].kind = TIER_RESV_SHARED;
        } else {
            jr->op = S_J_READMIT;
            out[i].kind = TIER_RESV_READMIT;
            if (e->refs == 0) { /* S_ANY_OK is clear while nobody rewrites */
                self->n_rewriting++;
                if (e->pins == 0)
                    self->n_evictable--;
            }
        }
        e->refs++;
        e->pending = deadline; /* last writer wins */
    }
    return 0;
}

/* Takes slot j from its committed block for the batch, journaling the victim. */
static void s_evict(tier_slots_t *self, uint32_t j, bool expired, s_journal_t *jr)
{
    s_slot_t *e = &self->slots[j];
    jr->op = S_J_EVICT;
    jr->key = e->key;
    jr->instance = e->instance;
    jr->deadline = e->deadline;
    jr->expired = expired;
    jr->memo = self->pol->position(self->pol_state, j);
    self->pol->released(self->pol_state, j);
    s_heap_forget(self, j); /* an expired victim already left the heap */
    s_hash_remove(self, j);
    self->n_committed--;
    self->n_evictable--;
    if (expired)
        self->expirations++;
    else
        self->evictions++;
}

static void s_occupy(tier_slots_t *self, uint32_t j, uint32_t instance, const tier_key_t *key,
                     uint64_t deadline)
{
    s_slot_t *e = &self->slots[j];
    e->key = *key;
    e->instance = instance;
    e->state = TIER_SLOT_RESERVED;
    e->refs = 1;
    e->pins = 0;
    e->flags = 0;
    e->deadline = 0;
    e->pending = deadline;
    e->stamp = self->batch;
    s_hash_insert(self, j);
    self->n_reserved++;
}

/* Pass 2: newcomers into free slots, then expired blocks, then policy victims
 * (not with TIER_RESERVE_NO_EVICT). */
static int s_place_newcomers(tier_slots_t *self, uint32_t instance, const tier_key_t *keys,
                             size_t n, uint64_t deadline, unsigned flags, tier_resv_t *out)
{
    for (size_t i = 0; i < n; i++) {
        if (out[i].kind != 0)
            continue;
        if (s_find(self, instance, &keys[i]) != S_NONE)
            return TIER_SLOTS_EDUP; /* placed earlier in this batch */
        s_journal_t *jr = &self->journal[self->jlen];
        uint32_t j;
        uint32_t kind = TIER_RESV_NEW;
        if (self->free_head != S_NONE) {
            j = self->free_head;
            s_free_unlink(self, j);
            jr->op = S_J_NEW;
        } else {
            if (self->n_evictable <= self->protected_)
                return TIER_SLOTS_ENOSPC;
            bool expired = true;
            j = s_sweep_expired(self);
            if (j == S_NONE) {
                expired = false;
                if (flags & TIER_RESERVE_NO_EVICT)
                    return TIER_SLOTS_ENOSPC;
                if (!self->pol->pick_victim(self->pol_state, s_pol_evictable, self, &j))
                    return TIER_SLOTS_ENOSPC;
            }
            s_evict(self, j, expired, jr);
            kind = TIER_RESV_EVICTED;
        }
        jr->slot = j;
        self->jlen++;
        s_occupy(self, j, instance, &keys[i], deadline);
        out[i] = (tier_resv_t){j, kind};
    }
    return 0;
}

/* Replays the journal backwards: every slot back as it was before the batch. */
static void s_rollback(tier_slots_t *self)
{
    while (self->jlen > 0) {
        s_journal_t *jr = &self->journal[--self->jlen];
        s_slot_t *e = &self->slots[jr->slot];
        switch (jr->op) {
        case S_J_NEW:
            s_hash_remove(self, jr->slot);
            self->n_reserved--;
            s_free_push(self, jr->slot);
            break;
        case S_J_EVICT:
            s_hash_remove(self, jr->slot);
            self->n_reserved--;
            e->key = jr->key;
            e->instance = jr->instance;
            e->deadline = jr->deadline;
            e->pending = 0;
            e->refs = e->pins = 0;
            e->flags = 0;
            e->state = TIER_SLOT_COMMITTED;
            s_hash_insert(self, jr->slot);
            self->pol->restore(self->pol_state, jr->slot, jr->memo);
            if (e->deadline != 0)
                s_heap_push(self, jr->slot);
            self->n_committed++;
            self->n_evictable++;
            if (jr->expired)
                self->expirations--;
            else
                self->evictions--;
            break;
        case S_J_SHARE:
            e->refs--;
            e->pending = jr->pending;
            e->stamp = jr->stamp;
            break;
        case S_J_READMIT:
            e->refs--;
            e->pending = jr->pending;
            e->stamp = jr->stamp;
            if (e->refs == 0) {
                self->n_rewriting--;
                if (e->pins == 0)
                    s_unheld(self, jr->slot);
            }
            break;
        }
    }
}

int tier_slots_reserve(tier_slots_t *self, uint32_t instance, const tier_key_t *keys, size_t n,
                       uint64_t deadline_ms, uint64_t now_ms, unsigned flags, tier_resv_t *out,
                       tier_victim_t *victims, size_t *n_victims)
{
    if (n_victims)
        *n_victims = 0;
    if (!self)
        return TIER_SLOTS_EINVAL;
    s_clock(self, now_ms);
    if ((n > 0 && (!keys || !out)) || (victims == NULL) != (n_victims == NULL))
        return TIER_SLOTS_EINVAL;
    if (n > self->max_batch)
        return TIER_SLOTS_E2BIG;
    if (n == 0)
        return 0;

    s_batch_begin(self);
    int rc = s_settle_known(self, instance, keys, n, deadline_ms, flags, out);
    if (rc == 0)
        rc = s_place_newcomers(self, instance, keys, n, deadline_ms, flags, out);
    if (rc != 0) {
        s_rollback(self);
        self->rollbacks++;
    } else if (victims) {
        size_t nv = 0;
        for (uint32_t i = 0; i < self->jlen; i++) {
            const s_journal_t *jr = &self->journal[i];
            if (jr->op == S_J_EVICT)
                victims[nv++] = (tier_victim_t){jr->key, jr->instance, jr->slot, jr->deadline,
                                                jr->expired != 0};
        }
        *n_victims = nv;
    }
    self->batch = 0;
    self->jlen = 0;
    return rc;
}

/* ----------------------------------------------------------------- commit */

static tier_commit_outcome_t s_conclude_reservation(tier_slots_t *self, uint32_t j)
{
    s_slot_t *e = &self->slots[j];
    self->n_reserved--;
    if (!(e->flags & S_ANY_OK)) {
        s_hash_remove(self, j);
        s_free_push(self, j);
        return TIER_COMMIT_RELEASED;
    }
    e->state = TIER_SLOT_COMMITTED;
    e->flags = 0;
    e->deadline = e->pending;
    e->pending = 0;
    s_admitted(self, j, e->stamp);
    if (e->deadline != 0)
        s_heap_push(self, j);
    self->n_committed++;
    self->n_evictable++;
    return TIER_COMMIT_COMMITTED;
}

/* A successful rewrite revives an expired block with the new deadline; a
 * live block keeps its deadline (only touch extends it); failure changes
 * nothing. Either way the block is no longer held by rewriters. */
static tier_commit_outcome_t s_conclude_rewrite(tier_slots_t *self, uint32_t j)
{
    s_slot_t *e = &self->slots[j];
    tier_commit_outcome_t oc = TIER_COMMIT_KEPT;
    self->n_rewriting--;
    if ((e->flags & S_ANY_OK) && s_expired(e, self->now)) {
        if (e->flags & S_DEFERRED) {
            e->flags &= (uint8_t)~S_DEFERRED;
            self->n_deferred--;
        }
        s_heap_forget(self, j);
        e->deadline = e->pending;
        if (e->deadline != 0)
            s_heap_push(self, j);
        self->pol->touched(self->pol_state, j);
        oc = TIER_COMMIT_REVIVED;
    }
    e->flags &= (uint8_t)~S_ANY_OK;
    e->pending = 0;
    if (e->pins == 0)
        s_unheld(self, j);
    return oc;
}

int tier_slots_commit(tier_slots_t *self, uint32_t instance, const tier_key_t *key, bool success,
                      uint64_t now_ms, tier_commit_outcome_t *outcome)
{
    if (!self)
        return TIER_SLOTS_EINVAL;
    s_clock(self, now_ms);
    if (!key)
        return TIER_SLOTS_EINVAL;
    uint32_t j = s_find(self, instance, key);
    if (j == S_NONE)
        return TIER_SLOTS_ENOENT;
    s_slot_t *e = &self->slots[j];
    if (e->refs == 0)
        return TIER_SLOTS_ESTATE;
    if (success)
        e->flags |= S_ANY_OK;
    tier_commit_outcome_t oc = TIER_COMMIT_PENDING;
    if (--e->refs == 0)
        oc = e->state == TIER_SLOT_RESERVED ? s_conclude_reservation(self, j)
                                            : s_conclude_rewrite(self, j);
    if (outcome)
        *outcome = oc;
    return 0;
}

/* -------------------------------------------------------------- read path */

int tier_slots_lookup(tier_slots_t *self, uint32_t instance, const tier_key_t *key, uint64_t now_ms,
                      tier_slot_info_t *info)
{
    if (!self)
        return TIER_SLOTS_EINVAL;
    s_clock(self, now_ms);
    if (!key)
        return TIER_SLOTS_EINVAL;
    uint32_t slot;
    return s_serve(self, instance, key, info, &slot);
}

/* Keys of a batch hashed and prefetched together: enough misses in flight to
 * overlap them, few enough that the lines are still cached when used. */
#define S_BATCH_GROUP 16u

int tier_slots_lookup_batch(tier_slots_t *self, uint32_t instance, const tier_key_t *keys,
                            uint32_t n, uint64_t now_ms, tier_slot_info_t *info, int *rc)
{
    if (!self || (n && (!keys || !info || !rc)))
        return TIER_SLOTS_EINVAL;
    s_clock(self, now_ms);
    uint32_t h[S_BATCH_GROUP];
    for (uint32_t base = 0; base < n; base += S_BATCH_GROUP) {
        uint32_t m = n - base < S_BATCH_GROUP ? n - base : S_BATCH_GROUP;
        for (uint32_t i = 0; i < m; i++) { /* every index line asked for at once */
            h[i] = s_hash32(self, instance, &keys[base + i]);
            __builtin_prefetch(&self->index[s_home(self, h[i])]);
        }
        for (uint32_t i = 0; i < m; i++) { /* then the records they name */
            uint64_t ent = self->index[s_home(self, h[i])];
            if (ent != S_EMPTY)
                __builtin_prefetch(&self->slots[(uint32_t)ent]);
        }
        for (uint32_t i = 0; i < m; i++) { /* in order: an expiry seen by one is seen by the next */
            uint32_t slot;
            rc[base + i] = s_serve_found(self, s_find_h(self, h[i], instance, &keys[base + i]),
                                         &info[base + i], &slot);
        }
    }
    return 0;
}

int tier_slots_pin(tier_slots_t *self, uint32_t instance, const tier_key_t *key, uint64_t now_ms,
                   uint32_t *slot_out)
{
    if (!self)
        return TIER_SLOTS_EINVAL;
    s_clock(self, now_ms);
    if (!key)
        return TIER_SLOTS_EINVAL;
    uint32_t j;
    int rc = s_serve(self, instance, key, NULL, &j);
    if (rc != 0)
        return rc;
    s_slot_t *e = &self->slots[j];
    if (e->pins == S_COUNT_MAX)
        return TIER_SLOTS_EOVERFLOW;
    if (e->pins++ == 0) {
        self->n_pinned++;
        if (e->refs == 0)
            self->n_evictable--;
    }
    if (slot_out)
        *slot_out = j;
    return 0;
}

int tier_slots_unpin(tier_slots_t *self, uint32_t instance, const tier_key_t *key)
{
    if (!self || !key)
        return TIER_SLOTS_EINVAL;
    uint32_t j = s_find(self, instance, key);
    if (j == S_NONE || self->slots[j].state != TIER_SLOT_COMMITTED)
        return TIER_SLOTS_ENOENT;
    s_slot_t *e = &self->slots[j];
    if (e->pins == 0)
        return TIER_SLOTS_ESTATE;
    if (--e->pins == 0) {
        self->n_pinned--;
        if (e->refs == 0)
            s_unheld(self, j);
    }
    return 0;
}

/* touch of the slot s_find gave. */
static int s_touch_found(tier_slots_t *self, uint32_t found, uint64_t deadline_ms)
{
    uint32_t j;
    int rc = s_serve_found(self, found, NULL, &j);
    if (rc != 0)
        return rc;
    s_slot_t *e = &self->slots[j];
    self->pol->touched(self->pol_state, j);
    if (deadline_ms != 0 && e->deadline != 0 && deadline_ms > e->deadline) {
        s_heap_forget(self, j);
        e->deadline = deadline_ms;
        s_heap_push(self, j);
    }
    return 0;
}

int tier_slots_touch(tier_slots_t *self, uint32_t instance, const tier_key_t *key, uint64_t now_ms,
                     uint64_t deadline_ms)
{
    if (!self)
        return TIER_SLOTS_EINVAL;
    s_clock(self, now_ms);
    if (!key)
        return TIER_SLOTS_EINVAL;
    return s_touch_found(self, s_find(self, instance, key), deadline_ms);
}

int tier_slots_touch_at(tier_slots_t *self, uint32_t slot, uint32_t instance, const tier_key_t *key,
                        uint64_t now_ms, uint64_t deadline_ms)
{
    if (!self)
        return TIER_SLOTS_EINVAL;
    s_clock(self, now_ms);
    if (!key)
        return TIER_SLOTS_EINVAL;
    /* a committed record of the key is the one its index entry names (one per
     * key); anything else is looked up by key */
    bool here = slot < self->capacity && self->slots[slot].state == TIER_SLOT_COMMITTED &&
                s_same(&self->slots[slot], instance, key);
    return s_touch_found(self, here ? slot : s_find(self, instance, key), deadline_ms);
}

int tier_slots_set_deadline(tier_slots_t *self, uint32_t instance, const tier_key_t *key,
                            uint64_t now_ms, uint64_t deadline_ms)
{
    if (!self)
        return TIER_SLOTS_EINVAL;
    s_clock(self, now_ms);
    if (!key)
        return TIER_SLOTS_EINVAL;
    uint32_t j;
    int rc = s_serve(self, instance, key, NULL, &j);
    if (rc != 0)
        return rc;
    s_slot_t *e = &self->slots[j];
    if (e->deadline == deadline_ms)
        return 0;
    s_heap_forget(self, j);
    e->deadline = deadline_ms;
    if (deadline_ms)
        s_heap_push(self, j);
    return 0;
}

/* ------------------------------------------------ removal, expiry, recovery */

int tier_slots_remove(tier_slots_t *self, uint32_t instance, const tier_key_t *key)
{
    if (!self || !key)
        return TIER_SLOTS_EINVAL;
    uint32_t j = s_find(self, instance, key);
    if (j == S_NONE)
        return TIER_SLOTS_ENOENT;
    s_slot_t *e = &self->slots[j];
    if (e->state != TIER_SLOT_COMMITTED || s_held(e))
        return TIER_SLOTS_EBUSY;
    s_drop(self, j);
    self->removals++;
    return 0;
}

int tier_slots_expire(tier_slots_t *self, uint64_t now_ms, tier_victim_t *victims, size_t max,
                      size_t *n)
{
    if (n)
        *n = 0;
    if (!self)
        return TIER_SLOTS_EINVAL;
    s_clock(self, now_ms);
    if (!n || (max > 0 && !victims))
        return TIER_SLOTS_EINVAL;
    while (*n < max) {
        uint32_t j = s_sweep_expired(self);
        if (j == S_NONE)
            break;
        const s_slot_t *e = &self->slots[j];
        victims[(*n)++] = (tier_victim_t){e->key, e->instance, j, e->deadline, true};
        s_drop(self, j);
        self->expirations++;
    }
    return 0;
}

int tier_slots_adopt(tier_slots_t *self, uint32_t instance, const tier_key_t *key, uint32_t slot,
                     uint64_t deadline_ms, uint64_t now_ms)
{
    if (!self)
        return TIER_SLOTS_EINVAL;
    s_clock(self, now_ms);
    if (!key || slot >= self->capacity)
        return TIER_SLOTS_EINVAL;
    if (self->slots[slot].state != TIER_SLOT_FREE)
        return TIER_SLOTS_EBUSY;
    if (s_find(self, instance, key) != S_NONE)
        return TIER_SLOTS_EDUP;
    s_free_unlink(self, slot);
    s_slot_t *e = &self->slots[slot];
    e->key = *key;
    e->instance = instance;
    e->state = TIER_SLOT_COMMITTED;
    e->deadline = deadline_ms;
    e->pending = 0;
    e->pins = e->refs = 0;
    e->flags = 0;
    s_hash_insert(self, slot);
    s_admitted(self, slot, 0);
    if (deadline_ms != 0)
        s_heap_push(self, slot);
    self->n_committed++;
    self->n_evictable++;
    return 0;
}

/* ---------------------------------------------------------- introspection */

int tier_slots_peek(const tier_slots_t *self, uint32_t instance, const tier_key_t *key,
                    tier_slot_info_t *info)
{
    if (!self || !key)
        return TIER_SLOTS_EINVAL;
    uint32_t j = s_find(self, instance, key);
    if (j == S_NONE)
        return TIER_SLOTS_ENOENT;
    s_fill_info(self, j, info);
    return 0;
}

int tier_slots_slot_info(const tier_slots_t *self, uint32_t slot, tier_slot_info_t *info)
{
    if (!self || !info || slot >= self->capacity)
        return TIER_SLOTS_EINVAL;
    s_fill_info(self, slot, info);
    return 0;
}

uint32_t tier_slots_walk_coldest(const tier_slots_t *self, uint32_t max_steps,
                                 tier_slots_walk_fn fn, void *arg)
{
    uint64_t cursor = 0;
    uint32_t slot, n = 0;
    while (n < max_steps && self->pol->next_coldest(self->pol_state, &cursor, &slot)) {
        n++;
        if (fn(arg, slot))
            break;
    }
    return n;
}

void tier_slots_stats(const tier_slots_t *self, tier_slots_stats_t *st)
{
    *st = (tier_slots_stats_t){
        .capacity = self->capacity,
        .used = self->n_reserved + self->n_committed,
        .free = self->n_free,
        .reserved = self->n_reserved,
        .committed = self->n_committed,
        .pinned = self->n_pinned,
        .rewriting = self->n_rewriting,
        .deferred = self->n_deferred,
        .evictable = self->n_evictable,
        .evictions = self->evictions,
        .expirations = self->expirations,
        .removals = self->removals,
        .rollbacks = self->rollbacks,
        .heap_len = self->heap_len,
        .heap_stale = self->heap_stale,
        .heap_compactions = self->compactions,
        .now_ms = self->now,
    };
}

#define S_CHECK(cond)                                                                              \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return -__LINE__;                                                                      \
    } while (0)

static int s_check_slots(const tier_slots_t *self, uint32_t *in_heap)
{
    uint32_t n_state[3] = {0}, pinned = 0, rewriting = 0, deferred = 0, evictable = 0;
    *in_heap = 0;
    for (uint32_t i = 0; i < self->capacity; i++) {
        const s_slot_t *e = &self->slots[i];
        S_CHECK(e->state <= TIER_SLOT_COMMITTED);
        n_state[e->state]++;
        if (e->state == TIER_SLOT_FREE) {
            S_CHECK(e->flags == 0 && e->pins == 0 && e->refs == 0);
            continue;
        }
        S_CHECK(s_find(self, e->instance, &e->key) == i);
        if (e->state == TIER_SLOT_RESERVED) {
            S_CHECK(e->refs >= 1 && e->pins == 0 && e->deadline == 0);
            S_CHECK(!(e->flags & (S_IN_HEAP | S_DEFERRED)));
            continue;
        }
        pinned += e->pins > 0;
        rewriting += e->refs > 0;
        S_CHECK(e->refs > 0 || !(e->flags & S_ANY_OK));
        evictable += !s_held(e);
        if (e->flags & S_DEFERRED) {
            deferred++;
            S_CHECK(s_held(e) && s_expired(e, self->now) && !(e->flags & S_IN_HEAP));
        } else {
            S_CHECK((e->deadline != 0) == ((e->flags & S_IN_HEAP) != 0));
        }
        *in_heap += (e->flags & S_IN_HEAP) != 0;
    }
    S_CHECK(n_state[TIER_SLOT_FREE] == self->n_free);
    S_CHECK(n_state[TIER_SLOT_RESERVED] == self->n_reserved);
    S_CHECK(n_state[TIER_SLOT_COMMITTED] == self->n_committed);
    S_CHECK(pinned == self->n_pinned && rewriting == self->n_rewriting);
    S_CHECK(deferred == self->n_deferred && evictable == self->n_evictable);
    return 0;
}

int tier_slots_check(const tier_slots_t *self)
{
    uint32_t in_heap;
    int rc = s_check_slots(self, &in_heap);
    if (rc != 0)
        return rc;
    uint32_t nfree = 0, prev = S_NONE;
    for (uint32_t i = self->free_head; i != S_NONE; i = self->slots[i].next) {
        S_CHECK(self->slots[i].state == TIER_SLOT_FREE && self->slots[i].prev == prev);
        S_CHECK(++nfree <= self->n_free);
        prev = i;
    }
    S_CHECK(nfree == self->n_free);
    uint32_t indexed = 0;
    for (uint64_t i = 0; i < self->nindex; i++) {
        uint64_t ent = self->index[i];
        if (ent == S_EMPTY)
            continue;
        const s_slot_t *e = &self->slots[(uint32_t)ent];
        S_CHECK((uint32_t)ent < self->capacity && e->state != TIER_SLOT_FREE);
        S_CHECK((uint32_t)(ent >> 32) == s_hash32(self, e->instance, &e->key));
        /* reachable: no empty entry between its home and where it sits (the rule
         * the backward-shift removal keeps) */
        for (uint32_t j = s_home(self, (uint32_t)(ent >> 32)); j != (uint32_t)i;
             j = s_next(self, j))
            S_CHECK(self->index[j] != S_EMPTY);
        indexed++;
    }
    S_CHECK(indexed == self->n_reserved + self->n_committed);
    uint32_t live = 0;
    for (uint32_t i = 0; i < self->heap_len; i++) {
        const s_heap_ent_t *h = &self->heap[i];
        if (i > 0)
            S_CHECK(!s_heap_before(h, &self->heap[(i - 1) / 2]));
        if (s_heap_live(self, h)) {
            live++;
            S_CHECK(h->deadline == self->slots[h->slot].deadline);
        }
    }
    S_CHECK(live == in_heap && self->heap_len - live == self->heap_stale);
    S_CHECK(self->heap_stale <= self->stale_bound && self->heap_len <= self->heap_cap);
    return 0;
}
