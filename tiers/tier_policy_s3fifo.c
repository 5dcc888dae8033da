/* tier_policy_s3fifo.c — S3-FIFO (Yang et al., SOSP 2023) made prefix-aware:
 * a small FIFO queue S for new blocks (two fifths of the slots), a main FIFO
 * queue M with reinsertion, and a ghost list G of the fingerprints of blocks
 * that left S without a hit (the last 3 x capacity of them). docs/POLICY.md
 * has the figures and why.
 *
 * - admitted: a block whose fingerprint is in G goes to M (it came back
 *   soon after leaving: it is reused), any other to S; its use count is 0.
 *   Prefix order: the keys of one put batch come head first, and each next
 *   one of the same batch is placed just older than the one before, so the
 *   tail of a request leaves before its head (a prefix hit needs the head;
 *   a tail without its head can never hit).
 * - touched: use count + 1, at most 3; nothing moves.
 * - victim: from S while S holds at least its target (or M is empty), else
 *   from M; S's oldest evictable block moves to M if it was used since it came
 *   in, else it is the victim (and enters G); M's oldest evictable block with
 *   a use count goes back to M's newest end with the count minus one, else it
 *   is the victim. Slots the engine may not take are passed over in place.
 * - released: leaves its queue; from S unused, it enters G.
 * - rollback: restore puts the victim back in its queue, just newer than the
 *   block just older than it when it was taken (at the oldest end if a later
 *   pick moved that one from S to M: an expired victim need not be the
 *   oldest), with its count, and takes its fingerprint out of G again; the
 *   moves to M and the counts lowered on the way stay (like clock's hand and
 *   bits).
 *
 * O(1) per admit, touch and release; a victim pick passes each evictable M
 * block at most 4 times and each other block once (amortised O(1)). G is a
 * table of 8-way buckets of 32-bit entries (a 16-bit tag of the fingerprint,
 * a 16-bit insertion epoch of 3 x capacity / 512 insertions), at least 6 x
 * capacity entries, so that at most half are live: an entry counts while
 * fewer than 3 x capacity insertions have followed it (to an epoch), and a
 * full bucket loses its oldest entry early; insertions clear the dead
 * entries of one bucket in turn, so a 16-bit epoch never wraps onto a
 * forgotten entry. Memory: 13 bytes per slot plus G,
 * 24 to 48 (tier_policy_s3fifo.state_size). Never allocates. */
#include "tier_policy.h"

#include <stdalign.h>

#define S_NONE UINT32_MAX
#define S_FMAX 3u
#define S_WAYS 8u
#define S_GHOST_PER_SLOT 3u /* G remembers this many x capacity insertions */
#define S_EPOCHS 512u       /* per G length: the resolution of an entry's age */

enum { S_Q_NONE = 0, S_Q_S = 1, S_Q_M = 2 };

typedef uint32_t s_ghost_t; /* tag << 16 | epoch; 0 = empty */

typedef struct {
    uint32_t capacity;
    uint32_t small_target; /* S is taken from while it holds this many (2/5) */
    uint32_t n[3];         /* blocks per queue (index S_Q_S, S_Q_M) */
    uint32_t newest[3];
    uint32_t oldest[3];
    uint32_t anchor[3]; /* per queue: the block admitted there last, S_NONE once it left */
    uint32_t anchor_batch[3];
    uint32_t ghost_mask;        /* buckets - 1 */
    uint32_t ghost_count;       /* insertions into the current epoch */
    uint32_t ghost_unit;        /* insertions per epoch */
    uint32_t ghost_life;        /* epochs an entry counts: 3 x capacity insertions */
    uint32_t ghost_epoch;       /* current epoch (16 bits used; ages are differences) */
    uint32_t ghost_sweep;       /* next bucket whose dead entries are cleared */
    uint32_t ghost_sweep_count; /* insertions since the last bucket cleared */
    uint32_t ghost_sweep_every; /* insertions per bucket cleared */
    uint64_t ghost_off;         /* byte offsets into the state block */
    uint64_t meta_off;
    /* link[2 * slot] = next newer, link[2 * slot + 1] = next older; then
     * fp[capacity], then the ghost buckets, then meta[capacity] */
    uint32_t link[];
} s_s3_t;

#define S_NEWER(c, s) ((c)->link[2 * (size_t)(s)])
#define S_OLDER(c, s) ((c)->link[2 * (size_t)(s) + 1])

static uint32_t *s_fps(s_s3_t *c)
{
    return c->link + 2 * (size_t)c->capacity;
}

static s_ghost_t *s_ghost(s_s3_t *c)
{
    return (s_ghost_t *)((char *)c + c->ghost_off);
}

static uint8_t *s_meta(s_s3_t *c)
{
    return (uint8_t *)c + c->meta_off;
}

static const uint8_t *s_cmeta(const s_s3_t *c)
{
    return (const uint8_t *)c + c->meta_off;
}

static unsigned s_queue_of(uint8_t m)
{
    return m & 3u;
}

static unsigned s_freq_of(uint8_t m)
{
    return m >> 2;
}

static uint64_t s_buckets(uint32_t capacity)
{
    uint64_t want = (2 * S_GHOST_PER_SLOT * (uint64_t)capacity + S_WAYS - 1) / S_WAYS, b = 1;
    while (b < want)
        b <<= 1;
    return b;
}

static uint64_t s_ghost_offset(uint32_t capacity)
{
    uint64_t off = sizeof(s_s3_t) + 3 * (uint64_t)capacity * sizeof(uint32_t);
    return (off + alignof(s_ghost_t) - 1) & ~(uint64_t)(alignof(s_ghost_t) - 1);
}

static size_t s_size(uint32_t capacity)
{
    return (size_t)(s_ghost_offset(capacity) + s_buckets(capacity) * S_WAYS * sizeof(s_ghost_t) +
                    capacity);
}

static void s_init(void *st, uint32_t capacity)
{
    s_s3_t *c = st;
    c->capacity = capacity;
    c->small_target = (uint32_t)((uint64_t)capacity * 2 / 5);
    if (c->small_target == 0)
        c->small_target = 1;
    for (unsigned q = 0; q < 3; q++) {
        c->n[q] = 0;
        c->newest[q] = c->oldest[q] = S_NONE;
    }
    for (unsigned q = 0; q < 3; q++) {
        c->anchor[q] = S_NONE;
        c->anchor_batch[q] = 0;
    }
    uint64_t buckets = s_buckets(capacity);
    c->ghost_mask = (uint32_t)(buckets - 1);
    /* Rounded up, so that an entry's life fits S_EPOCHS epochs of 16 bits; in
     * units of insertions it is then 3 x capacity, exactly while unit is 1. */
    uint64_t remember = (uint64_t)capacity * S_GHOST_PER_SLOT;
    uint64_t unit = remember ? (remember + S_EPOCHS - 1) / S_EPOCHS : 1;
    c->ghost_unit = (uint32_t)unit;
    c->ghost_life = (uint32_t)((remember + unit - 1) / unit);
    c->ghost_count = 0;
    c->ghost_epoch = 0;
    c->ghost_sweep = 0;
    c->ghost_sweep_count = 0;
    uint64_t every = ((uint64_t)1 << 14) * unit / buckets;
    c->ghost_sweep_every = every == 0 ? 1 : every > UINT32_MAX ? UINT32_MAX : (uint32_t)every;
    c->ghost_off = s_ghost_offset(capacity);
    c->meta_off = c->ghost_off + buckets * S_WAYS * sizeof(s_ghost_t);
    for (size_t i = 0; i < 2 * (size_t)capacity; i++)
        c->link[i] = S_NONE;
    uint32_t *fp = s_fps(c);
    uint8_t *meta = s_meta(c);
    for (uint32_t i = 0; i < capacity; i++) {
        fp[i] = 0;
        meta[i] = 0;
    }
    s_ghost_t *g = s_ghost(c);
    for (uint64_t i = 0; i < buckets * S_WAYS; i++)
        g[i] = 0;
}

/* ---- the two queues: one link array, a slot is in at most one ---- */

/* Insert slot into queue q just newer than older (S_NONE: at the oldest end). */
static void s_insert_newer_than(s_s3_t *c, unsigned q, uint32_t slot, uint32_t older)
{
    uint32_t newer = older == S_NONE ? c->oldest[q] : S_NEWER(c, older);
    S_OLDER(c, slot) = older;
    S_NEWER(c, slot) = newer;
    if (older == S_NONE)
        c->oldest[q] = slot;
    else
        S_NEWER(c, older) = slot;
    if (newer == S_NONE)
        c->newest[q] = slot;
    else
        S_OLDER(c, newer) = slot;
    c->n[q]++;
}

static void s_unlink(s_s3_t *c, unsigned q, uint32_t slot)
{
    uint32_t newer = S_NEWER(c, slot), older = S_OLDER(c, slot);
    if (newer == S_NONE)
        c->newest[q] = older;
    else
        S_OLDER(c, newer) = older;
    if (older == S_NONE)
        c->oldest[q] = newer;
    else
        S_NEWER(c, older) = newer;
    S_NEWER(c, slot) = S_OLDER(c, slot) = S_NONE;
    c->n[q]--;
}

/* ---- ghost list ---- */

static uint32_t s_mix(uint32_t h) /* murmur3's finaliser */
{
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

static s_ghost_t *s_bucket(s_s3_t *c, uint32_t fp)
{
    return s_ghost(c) + (size_t)(s_mix(fp) & c->ghost_mask) * S_WAYS;
}

static uint32_t s_tag(uint32_t fp)
{
    uint32_t t = fp & 0xffffu;
    return t ? t : 1;
}

/* Age of a live entry in epochs, or UINT32_MAX for an empty or forgotten one.
 * An entry is 1 epoch old once its own insertion closed its epoch (unit 1),
 * so with k insertions after it, k + 1: it counts while k < 3 x capacity. */
static uint32_t s_age(const s_s3_t *c, s_ghost_t g)
{
    if (g == 0)
        return UINT32_MAX;
    uint32_t age = (c->ghost_epoch - g) & 0xffffu;
    return age <= c->ghost_life ? age : UINT32_MAX;
}

/* Epochs are 16 bits: an entry left dead and never overwritten would look
 * young again after 65,536 epochs. One bucket's dead entries are cleared
 * every ghost_sweep_every insertions, so every bucket once in 2^14 epochs,
 * long before an entry's age can wrap: O(1), 8 entries looked at, at most
 * once per insertion (about once per 64 to 128 on large tiers). */
static void s_ghost_sweep(s_s3_t *c)
{
    if (++c->ghost_sweep_count < c->ghost_sweep_every)
        return;
    c->ghost_sweep_count = 0;
    s_ghost_t *b = s_ghost(c) + (size_t)c->ghost_sweep * S_WAYS;
    for (unsigned w = 0; w < S_WAYS; w++)
        if (b[w] != 0 && s_age(c, b[w]) == UINT32_MAX)
            b[w] = 0;
    c->ghost_sweep = (c->ghost_sweep + 1) & c->ghost_mask;
}

static void s_ghost_add(s_s3_t *c, uint32_t fp)
{
    s_ghost_t *b = s_bucket(c, fp);
    unsigned pick = 0;
    uint32_t oldest = 0;
    for (unsigned w = 0; w < S_WAYS; w++) {
        uint32_t age = s_age(c, b[w]);
        if (age == UINT32_MAX) {
            pick = w;
            break;
        }
        if (age >= oldest) {
            oldest = age;
            pick = w;
        }
    }
    b[pick] = s_tag(fp) << 16 | (c->ghost_epoch & 0xffffu);
    if (++c->ghost_count == c->ghost_unit) {
        c->ghost_count = 0;
        c->ghost_epoch++;
    }
    s_ghost_sweep(c);
}

/* true when fp is remembered; the entry is taken out (used once). */
static bool s_ghost_take(s_s3_t *c, uint32_t fp)
{
    s_ghost_t *b = s_bucket(c, fp);
    for (unsigned w = 0; w < S_WAYS; w++)
        if (b[w] >> 16 == s_tag(fp) && s_age(c, b[w]) != UINT32_MAX) {
            b[w] = 0;
            return true;
        }
    return false;
}

/* ---- ops ---- */

static void s_admitted_facts(void *st, uint32_t slot, const tier_policy_facts_t *f)
{
    s_s3_t *c = st;
    uint32_t fp = (uint32_t)(f->key_hash >> 32);
    if (fp == 0)
        fp = 1;
    s_fps(c)[slot] = fp;
    unsigned q = s_ghost_take(c, fp) ? S_Q_M : S_Q_S;
    uint8_t *meta = s_meta(c);
    meta[slot] = (uint8_t)q;
    /* One anchor per queue: a batch whose keys split between S and M (some
     * come back from G) keeps its prefix order in each. */
    uint32_t a = c->anchor[q];
    if (f->batch != 0 && a != S_NONE && c->anchor_batch[q] == f->batch && s_queue_of(meta[a]) == q)
        s_insert_newer_than(c, q, slot, S_OLDER(c, a)); /* just older than the head side */
    else
        s_insert_newer_than(c, q, slot, c->newest[q]);
    c->anchor[q] = slot;
    c->anchor_batch[q] = f->batch;
}

static void s_touched(void *st, uint32_t slot)
{
    s_s3_t *c = st;
    uint8_t *meta = s_meta(c);
    unsigned fr = s_freq_of(meta[slot]);
    if (fr < S_FMAX)
        meta[slot] = (uint8_t)(s_queue_of(meta[slot]) | (fr + 1) << 2);
}

static bool s_to_ghost(uint8_t m)
{
    return s_queue_of(m) == S_Q_S && s_freq_of(m) == 0;
}

static void s_released(void *st, uint32_t slot)
{
    s_s3_t *c = st;
    uint8_t *meta = s_meta(c);
    unsigned q = s_queue_of(meta[slot]);
    if (q == S_Q_NONE)
        return;
    if (s_to_ghost(meta[slot]))
        s_ghost_add(c, s_fps(c)[slot]);
    s_unlink(c, q, slot);
    meta[slot] = 0;
    for (unsigned aq = 0; aq < 3; aq++)
        if (c->anchor[aq] == slot)
            c->anchor[aq] = S_NONE;
}

/* memo: the next older slot (bits 0-31), queue (32-33), count (34-35), and
 * bit 36 when leaving puts the fingerprint into G. */
static uint64_t s_position(const void *st, uint32_t slot)
{
    const s_s3_t *c = st;
    uint8_t m = s_cmeta(c)[slot];
    return (uint64_t)S_OLDER(c, slot) | (uint64_t)s_queue_of(m) << 32 |
           (uint64_t)s_freq_of(m) << 34 | (uint64_t)s_to_ghost(m) << 36;
}

static void s_restore(void *st, uint32_t slot, uint64_t memo)
{
    s_s3_t *c = st;
    unsigned q = (unsigned)(memo >> 32) & 3u, fr = (unsigned)(memo >> 34) & 3u;
    if (q == S_Q_NONE)
        return;
    if (memo >> 36 & 1u)
        (void)s_ghost_take(c, s_fps(c)[slot]);
    uint32_t older = (uint32_t)memo;
    /* A victim taken for its expiry need not be its queue's oldest: a later
     * pick of the batch may have moved its older neighbour from S to M. It
     * goes back at S's oldest end then, not into M's list. */
    if (older != S_NONE && s_queue_of(s_meta(c)[older]) != q)
        older = S_NONE;
    s_insert_newer_than(c, q, slot, older);
    s_meta(c)[slot] = (uint8_t)(q | fr << 2);
}

static bool s_pick_victim(void *st, tier_policy_evictable_fn evictable, const void *ctx,
                          uint32_t *slot)
{
    s_s3_t *c = st;
    uint8_t *meta = s_meta(c);
    uint32_t s_cur = c->oldest[S_Q_S], m_cur = c->oldest[S_Q_M];
    /* Each step passes a block; an M block can come round S_FMAX + 1 times. */
    for (uint64_t step = 0; step < (uint64_t)(S_FMAX + 3) * c->capacity + 2; step++) {
        bool from_s = s_cur != S_NONE && (c->n[S_Q_S] >= c->small_target || m_cur == S_NONE);
        if (!from_s && m_cur == S_NONE)
            return false;
        if (from_s) {
            uint32_t x = s_cur;
            s_cur = S_NEWER(c, x);
            if (!evictable(ctx, x))
                continue;
            if (s_freq_of(meta[x]) == 0) {
                *slot = x;
                return true;
            }
            s_unlink(c, S_Q_S, x);
            s_insert_newer_than(c, S_Q_M, x, c->newest[S_Q_M]);
            meta[x] = S_Q_M;
            if (m_cur == S_NONE)
                m_cur = x;
            continue;
        }
        uint32_t x = m_cur;
        m_cur = S_NEWER(c, x);
        if (!evictable(ctx, x))
            continue;
        unsigned fr = s_freq_of(meta[x]);
        if (fr == 0) {
            *slot = x;
            return true;
        }
        meta[x] = (uint8_t)(S_Q_M | (fr - 1) << 2);
        if (c->newest[S_Q_M] != x) {
            s_unlink(c, S_Q_M, x);
            s_insert_newer_than(c, S_Q_M, x, c->newest[S_Q_M]);
        }
        if (m_cur == S_NONE)
            m_cur = x;
    }
    return false;
}

/* The order a pick would follow if nothing were touched: the queue taken
 * first (S while it holds its target or M is empty, else M), then the other,
 * each from its oldest, first the blocks without a use since they came in or
 * came round, then those with one. cursor: phase << 32 | (1 + last slot). */
static bool s_next_coldest(const void *st, uint64_t *cursor, uint32_t *slot)
{
    const s_s3_t *c = st;
    const uint8_t *meta = s_cmeta(c);
    bool s_first = c->n[S_Q_S] >= c->small_target || c->n[S_Q_M] == 0;
    const unsigned order[4] = {s_first ? S_Q_S : S_Q_M, s_first ? S_Q_M : S_Q_S,
                               s_first ? S_Q_S : S_Q_M, s_first ? S_Q_M : S_Q_S};
    uint64_t phase = *cursor >> 32;
    uint32_t pos = (uint32_t)*cursor;
    for (; phase < 4; phase++, pos = 0) {
        unsigned q = order[phase];
        bool used = phase >= 2;
        uint32_t s = pos == 0 ? c->oldest[q] : S_NEWER(c, pos - 1);
        for (; s != S_NONE; s = S_NEWER(c, s))
            if ((s_freq_of(meta[s]) != 0) == used) {
                *slot = s;
                *cursor = phase << 32 | ((uint64_t)s + 1);
                return true;
            }
    }
    *cursor = (uint64_t)4 << 32;
    return false;
}

const tier_policy_ops_t tier_policy_s3fifo = {
    .name = "s3fifo",
    .state_size = s_size,
    .init = s_init,
    .admitted = NULL,
    .admitted_facts = s_admitted_facts,
    .touched = s_touched,
    .released = s_released,
    .position = s_position,
    .restore = s_restore,
    .pick_victim = s_pick_victim,
    .next_coldest = s_next_coldest,
};
