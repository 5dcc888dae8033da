/* test_tier_slots_diff.c — randomized differential test of the slot engine
 * (issue 2 §4): for each policy, well over 100,000 random operations
 * (reserve, commit true/false, pin, unpin, touch, lookup, time advance, plus
 * remove, expire and adopt) run against the engine and against the model
 * below, and every result is compared: return codes, slot and kind per key,
 * victims (key, slot, deadline, expired) in order, lookup info, then the full
 * state of every slot and every counter, and the engine's own invariants.
 *
 * The model is deliberately naive: a plain array of slots scanned linearly,
 * the free list an array with its head at index 0, lru/fifo as a logical
 * admission/touch time per slot (victim = smallest), clock as a hand over slot
 * indices with one reference bit each, expiry as a scan for the smallest
 * (deadline, slot), s3fifo as arrays S and M (oldest first), a use count per
 * slot and its ghost as the records of the last 3 x capacity fingerprints, 8
 * live at most per bucket (the policy's tags never collide for the test's
 * keys under HASH_SEED: checked). It replicates each policy's order exactly, so slot
 * numbers and victims must match exactly. A failed batch is undone by
 * restoring a snapshot of the whole model, keeping only what the engine
 * documents it does not undo (clock hand and cleared reference bits, expired
 * held blocks it deferred on the way; s3fifo's moves to M, lowered counts and
 * ghost insertions, its victims put back by their position memo).
 *
 * Seeds are fixed; a mismatch prints policy, seed, op number and the op.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tier_slots.h"

#define MAXCAP 32
#define MAXB 8
#define NIDS 48
#define NTICKETS 4096
#define NONE UINT32_MAX

enum { P_LRU, P_CLOCK, P_FIFO, P_S3FIFO };
static const char *const s_pol_names[4] = {"lru", "clock", "fifo", "s3fifo"};
#define HASH_SEED 0x5eed5eed5eedull

/* ------------------------------------------------------------ the model */

typedef struct {
    uint8_t state; /* tier_slot_state_t */
    uint32_t inst, id;
    uint32_t pins, refs;
    bool any_ok;
    bool deferred;  /* expired while held: out of the expiry order until released */
    bool ref;       /* clock reference bit */
    uint64_t order; /* lru/fifo: logical time of admission (and touch for lru) */
    uint64_t deadline, pending;
    uint32_t stamp; /* batch that settled / placed it */
} m_slot_t;

/* s3fifo as its header states it, naively: S and M as arrays oldest first,
 * a use count per slot, the ghost as the records of the last 3 x capacity
 * fingerprints that entered it, each in a bucket of 8 (a full bucket loses
 * its oldest record). */
enum { Q_NONE, Q_S, Q_M };
#define GHOST_WAYS 8
#define GHOST_MAX (3 * MAXCAP)

typedef struct {
    uint32_t fp, bucket;
    uint64_t seq; /* its insertion number, from 1 */
    bool gone;    /* taken, or lost from a full bucket */
} m_ghost_t;

typedef struct {
    uint32_t q[3][MAXCAP], n[3]; /* queue Q_S / Q_M, oldest first */
    uint8_t qof[MAXCAP], cnt[MAXCAP];
    uint32_t fp[MAXCAP];                 /* fingerprint of the block last admitted to the slot */
    uint32_t anchor[3], anchor_batch[3]; /* per queue: the block admitted there last */
    m_ghost_t g[GHOST_MAX];              /* record of insertion seq at seq % GHOST_MAX */
    uint64_t gseq;
    uint32_t gmask, target, window;
} m_s3_t;

/* Where a victim was, for the rollback: restore puts it back just newer
 * than its older neighbour then (NONE: at the oldest end). */
typedef struct {
    uint32_t slot, older;
    uint8_t q, cnt;
    bool to_ghost;
} m_memo_t;

typedef struct {
    int pol;
    uint32_t cap, max_batch;
    const tier_slots_t *eng; /* s3fifo: the engine's tier_slots_key_hash */
    m_s3_t s3;
    m_slot_t s[MAXCAP];
    uint32_t fl[MAXCAP]; /* free list, head first */
    uint32_t nfl;
    uint64_t tick, now;
    uint32_t hand, batch;
    bool in_batch;
    uint64_t evictions, expirations, removals, rollbacks;
} model_t;

typedef struct {
    uint32_t inst, id, slot;
    uint64_t deadline;
    bool expired;
} m_victim_t;

static void m_init(model_t *m, int pol, uint32_t cap, uint32_t max_batch, const tier_slots_t *eng)
{
    memset(m, 0, sizeof(*m));
    m->pol = pol;
    m->cap = cap;
    m->max_batch = max_batch;
    m->eng = eng;
    for (uint32_t i = 0; i < cap; i++)
        m->fl[i] = i;
    m->nfl = cap;
    m->s3.anchor[Q_S] = m->s3.anchor[Q_M] = NONE;
    m->s3.target = cap * 2 / 5 ? cap * 2 / 5 : 1;
    uint32_t buckets = 1;
    while (buckets * GHOST_WAYS < 6 * cap)
        buckets <<= 1;
    m->s3.gmask = buckets - 1;
    m->s3.window = 3 * cap;
}

/* ---- s3fifo */

static uint32_t s3_mix(uint32_t h) /* the bucket hash: murmur3's finaliser */
{
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

/* A record counts while fewer than 3 x capacity insertions followed it. */
static bool s3_live(const m_s3_t *c, const m_ghost_t *g)
{
    return g->seq != 0 && !g->gone && c->gseq - g->seq < c->window;
}

static void s3_ghost_add(m_s3_t *c, uint32_t fp)
{
    uint32_t bucket = s3_mix(fp) & c->gmask, live = 0;
    m_ghost_t *oldest = NULL;
    for (uint32_t k = 0; k < GHOST_MAX; k++) {
        m_ghost_t *g = &c->g[k];
        if (s3_live(c, g) && g->bucket == bucket) {
            live++;
            if (!oldest || g->seq < oldest->seq)
                oldest = g;
        }
    }
    if (live == GHOST_WAYS)
        oldest->gone = true;
    c->gseq++;
    c->g[c->gseq % GHOST_MAX] = (m_ghost_t){fp, bucket, c->gseq, false};
}

/* Is fp remembered? The record is used up. (The test's fingerprints differ in
 * their bucket or 16-bit tag, test_differential checks: a match is fp's own.) */
static bool s3_ghost_take(m_s3_t *c, uint32_t fp)
{
    for (uint32_t k = 0; k < GHOST_MAX; k++)
        if (s3_live(c, &c->g[k]) && c->g[k].fp == fp) {
            c->g[k].gone = true;
            return true;
        }
    return false;
}

static uint32_t s3_index(const m_s3_t *c, unsigned q, uint32_t slot)
{
    for (uint32_t k = 0; k < c->n[q]; k++)
        if (c->q[q][k] == slot)
            return k;
    return NONE;
}

static void s3_insert_at(m_s3_t *c, unsigned q, uint32_t k, uint32_t slot)
{
    memmove(&c->q[q][k + 1], &c->q[q][k], (c->n[q] - k) * sizeof(uint32_t));
    c->q[q][k] = slot;
    c->n[q]++;
    c->qof[slot] = (uint8_t)q;
}

static void s3_remove_at(m_s3_t *c, unsigned q, uint32_t k)
{
    c->qof[c->q[q][k]] = Q_NONE;
    memmove(&c->q[q][k], &c->q[q][k + 1], (c->n[q] - k - 1) * sizeof(uint32_t));
    c->n[q]--;
}

static tier_key_t K(uint32_t id);

/* The engine's fingerprint of a key: the high half of its key hash, never 0. */
static uint32_t s3_fp(const model_t *m, uint32_t inst, uint32_t id)
{
    tier_key_t k = K(id);
    uint32_t fp = (uint32_t)(tier_slots_key_hash(m->eng, inst, &k) >> 32);
    return fp ? fp : 1;
}

static void s3_admitted(model_t *m, uint32_t i, uint32_t batch)
{
    m_s3_t *c = &m->s3;
    uint32_t fp = s3_fp(m, m->s[i].inst, m->s[i].id);
    c->fp[i] = fp;
    unsigned q = s3_ghost_take(c, fp) ? Q_M : Q_S;
    c->cnt[i] = 0;
    uint32_t a = c->anchor[q];
    if (batch != 0 && a != NONE && c->anchor_batch[q] == batch && c->qof[a] == q)
        s3_insert_at(c, q, s3_index(c, q, a), i); /* just older than the one before */
    else
        s3_insert_at(c, q, c->n[q], i);
    c->anchor[q] = i;
    c->anchor_batch[q] = batch;
}

static m_memo_t s3_released(model_t *m, uint32_t i)
{
    m_s3_t *c = &m->s3;
    unsigned q = c->qof[i];
    uint32_t k = s3_index(c, q, i);
    m_memo_t memo = {i, k == 0 ? NONE : c->q[q][k - 1], (uint8_t)q, c->cnt[i],
                     q == Q_S && c->cnt[i] == 0};
    if (memo.to_ghost)
        s3_ghost_add(c, c->fp[i]);
    s3_remove_at(c, q, k);
    for (unsigned aq = Q_S; aq <= Q_M; aq++)
        if (c->anchor[aq] == i)
            c->anchor[aq] = NONE;
    return memo;
}

static void s3_restore(model_t *m, const m_memo_t *memo)
{
    m_s3_t *c = &m->s3;
    if (memo->to_ghost)
        (void)s3_ghost_take(c, c->fp[memo->slot]);
    /* Just newer than its older neighbour then, wherever that is now; at the
     * oldest end if it has left the queue (a later pick of the batch moved it
     * from S to M after this victim was taken for its expiry). */
    uint32_t k = memo->older == NONE ? NONE : s3_index(c, memo->q, memo->older);
    s3_insert_at(c, memo->q, k == NONE ? 0 : k + 1, memo->slot);
    c->cnt[memo->slot] = memo->cnt;
}

static void m_clock(model_t *m, uint64_t now)
{
    if (now > m->now)
        m->now = now;
}

static uint32_t m_find(const model_t *m, uint32_t inst, uint32_t id)
{
    for (uint32_t i = 0; i < m->cap; i++)
        if (m->s[i].state != TIER_SLOT_FREE && m->s[i].inst == inst && m->s[i].id == id)
            return i;
    return NONE;
}

static bool m_held(const m_slot_t *e)
{
    return e->pins > 0 || e->refs > 0;
}

static bool m_expired(const model_t *m, const m_slot_t *e)
{
    return e->state == TIER_SLOT_COMMITTED && e->deadline != 0 && e->deadline <= m->now;
}

static bool m_evictable(const model_t *m, uint32_t i)
{
    const m_slot_t *e = &m->s[i];
    return e->state == TIER_SLOT_COMMITTED && !m_held(e) && !(m->in_batch && e->stamp == m->batch);
}

static void m_admitted(model_t *m, uint32_t i, uint32_t batch)
{
    m->s[i].order = ++m->tick;
    m->s[i].ref = false;
    if (m->pol == P_S3FIFO)
        s3_admitted(m, i, batch);
}

/* Committed slot i leaves the order (evicted, expired, removed). */
static m_memo_t m_released(model_t *m, uint32_t i)
{
    if (m->pol == P_S3FIFO)
        return s3_released(m, i);
    return (m_memo_t){i, NONE, Q_NONE, 0, false};
}

static void m_touched(model_t *m, uint32_t i)
{
    if (m->pol == P_S3FIFO && m->s3.cnt[i] < 3)
        m->s3.cnt[i]++;
    else if (m->pol == P_LRU)
        m->s[i].order = ++m->tick;
    else if (m->pol == P_CLOCK)
        m->s[i].ref = true;
}

static void m_free_push(model_t *m, uint32_t i)
{
    memset(&m->s[i], 0, sizeof(m->s[i]));
    memmove(&m->fl[1], &m->fl[0], m->nfl * sizeof(uint32_t));
    m->fl[0] = i;
    m->nfl++;
}

static void m_free_unlink(model_t *m, uint32_t i)
{
    uint32_t pos = 0;
    while (m->fl[pos] != i)
        pos++;
    memmove(&m->fl[pos], &m->fl[pos + 1], (m->nfl - pos - 1) * sizeof(uint32_t));
    m->nfl--;
}

/* A block stopped being held: a deferred expiry resumes. */
static void m_fix_deferred(model_t *m, uint32_t i)
{
    if (!m_held(&m->s[i]))
        m->s[i].deferred = false;
}

/* Earliest (deadline, slot) expired block in the expiry order; held ones met
 * first are deferred. */
static uint32_t m_sweep(model_t *m)
{
    for (;;) {
        uint32_t best = NONE;
        for (uint32_t i = 0; i < m->cap; i++) {
            const m_slot_t *e = &m->s[i];
            if (!m_expired(m, e) || e->deferred)
                continue;
            if (best == NONE || e->deadline < m->s[best].deadline)
                best = i;
        }
        if (best == NONE)
            return NONE;
        if (m_evictable(m, best))
            return best;
        m->s[best].deferred = true;
    }
}

/* s3fifo's victim: from S while S holds its target (or M has nothing left to
 * pass), else from M; each queue passed from its oldest, slots that may not
 * be taken left in place. */
static uint32_t s3_pick(model_t *m)
{
    m_s3_t *c = &m->s3;
    uint32_t sp = 0, mp = 0; /* the next of each queue to look at */
    for (uint64_t step = 0; step < 6 * (uint64_t)m->cap + 2; step++) {
        bool s_left = sp < c->n[Q_S], m_left = mp < c->n[Q_M];
        bool from_s = s_left && (c->n[Q_S] >= c->target || !m_left);
        if (!from_s && !m_left)
            return NONE;
        unsigned q = from_s ? Q_S : Q_M;
        uint32_t *pos = from_s ? &sp : &mp;
        uint32_t x = c->q[q][*pos];
        if (!m_evictable(m, x)) {
            (*pos)++;
            continue;
        }
        if (c->cnt[x] == 0)
            return x;
        /* used: S's moves to M unused, M's comes round with one use less */
        c->cnt[x] = from_s ? 0 : c->cnt[x] - 1;
        s3_remove_at(c, q, *pos);
        s3_insert_at(c, Q_M, c->n[Q_M], x);
    }
    return NONE;
}

static uint32_t m_pick(model_t *m)
{
    if (m->pol == P_S3FIFO)
        return s3_pick(m);
    if (m->pol == P_CLOCK) {
        for (uint32_t step = 0; step < 2 * m->cap; step++) {
            uint32_t i = m->hand;
            m->hand = (i + 1) % m->cap;
            if (!m_evictable(m, i))
                continue;
            if (m->s[i].ref) {
                m->s[i].ref = false;
                continue;
            }
            return i;
        }
        return NONE;
    }
    uint32_t best = NONE;
    for (uint32_t i = 0; i < m->cap; i++)
        if (m_evictable(m, i) && (best == NONE || m->s[i].order < m->s[best].order))
            best = i;
    return best;
}

static int m_settle(model_t *m, uint32_t inst, const uint32_t *ids, size_t n, uint64_t deadline,
                    unsigned flags, tier_resv_t *out)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t j = m_find(m, inst, ids[i]);
        out[i] = (tier_resv_t){j, 0};
        if (j == NONE)
            continue;
        m_slot_t *e = &m->s[j];
        if (e->stamp == m->batch)
            return TIER_SLOTS_EDUP;
        e->stamp = m->batch;
        if (e->state == TIER_SLOT_COMMITTED && (flags & TIER_RESERVE_SKIP_SERVING) &&
            (!m_expired(m, e) || e->pins > 0)) {
            out[i].kind = TIER_RESV_SERVING;
            continue;
        }
        if (e->state == TIER_SLOT_RESERVED) {
            out[i].kind = TIER_RESV_SHARED;
        } else {
            out[i].kind = TIER_RESV_READMIT;
            if (e->refs == 0)
                e->any_ok = false;
        }
        e->refs++;
        e->pending = deadline;
    }
    return 0;
}

static int m_place(model_t *m, uint32_t inst, const uint32_t *ids, size_t n, uint64_t deadline,
                   tier_resv_t *out, m_victim_t *v, bool *vref, m_memo_t *vmemo, size_t *nv)
{
    for (size_t i = 0; i < n; i++) {
        if (out[i].kind != 0)
            continue;
        if (m_find(m, inst, ids[i]) != NONE)
            return TIER_SLOTS_EDUP;
        uint32_t j;
        uint32_t kind = TIER_RESV_NEW;
        if (m->nfl > 0) {
            j = m->fl[0];
            m_free_unlink(m, j);
        } else {
            bool any = false;
            for (uint32_t k = 0; k < m->cap; k++)
                any |= m_evictable(m, k);
            if (!any)
                return TIER_SLOTS_ENOSPC;
            bool expired = true;
            j = m_sweep(m);
            if (j == NONE) {
                expired = false;
                j = m_pick(m);
            }
            if (j == NONE)
                return TIER_SLOTS_ENOSPC;
            m_slot_t *e = &m->s[j];
            v[*nv] = (m_victim_t){e->inst, e->id, j, e->deadline, expired};
            vmemo[*nv] = m_released(m, j);
            vref[(*nv)++] = e->ref;
            if (expired)
                m->expirations++;
            else
                m->evictions++;
            kind = TIER_RESV_EVICTED;
        }
        m_slot_t *e = &m->s[j];
        memset(e, 0, sizeof(*e));
        e->state = TIER_SLOT_RESERVED;
        e->inst = inst;
        e->id = ids[i];
        e->refs = 1;
        e->pending = deadline;
        e->stamp = m->batch;
        out[i] = (tier_resv_t){j, kind};
    }
    return 0;
}

static int m_reserve(model_t *m, uint32_t inst, const uint32_t *ids, size_t n, uint64_t deadline,
                     uint64_t now, unsigned flags, tier_resv_t *out, m_victim_t *v, size_t *nv)
{
    *nv = 0;
    m_clock(m, now);
    if (n > m->max_batch)
        return TIER_SLOTS_E2BIG;
    if (n == 0)
        return 0;
    static model_t snap, post;
    snap = *m;
    m->batch++;
    m->in_batch = true;
    bool vref[MAXB];
    m_memo_t vmemo[MAXB];
    int rc = m_settle(m, inst, ids, n, deadline, flags, out);
    if (rc == 0)
        rc = m_place(m, inst, ids, n, deadline, out, v, vref, vmemo, nv);
    m->in_batch = false;
    if (rc == 0)
        return 0;
    /* Undo everything but what the engine keeps: clock hand and bits,
     * deferrals of blocks still held. */
    post = *m;
    *m = snap;
    m->batch = post.batch;
    m->hand = post.hand;
    for (uint32_t i = 0; i < m->cap; i++) {
        m_slot_t *e = &m->s[i];
        if (e->state != TIER_SLOT_COMMITTED)
            continue;
        e->ref = post.s[i].ref;
        e->deferred = (e->deferred || post.s[i].deferred) && m_held(e);
    }
    for (size_t k = 0; k < *nv; k++)
        m->s[v[k].slot].ref = vref[k];
    /* s3fifo keeps what its picks did (moves to M, counts lowered, the ghost's
     * insertions) and puts the victims back, latest first. */
    m->s3 = post.s3;
    for (size_t k = *nv; k-- > 0;)
        if (m->pol == P_S3FIFO)
            s3_restore(m, &vmemo[k]);
    m->rollbacks++;
    *nv = 0;
    return rc;
}

static int m_commit(model_t *m, uint32_t inst, uint32_t id, bool ok, uint64_t now, int *oc)
{
    m_clock(m, now);
    uint32_t j = m_find(m, inst, id);
    if (j == NONE)
        return TIER_SLOTS_ENOENT;
    m_slot_t *e = &m->s[j];
    if (e->refs == 0)
        return TIER_SLOTS_ESTATE;
    e->any_ok |= ok;
    if (--e->refs > 0) {
        *oc = TIER_COMMIT_PENDING;
        return 0;
    }
    if (e->state == TIER_SLOT_RESERVED) {
        if (!e->any_ok) {
            m_free_push(m, j);
            *oc = TIER_COMMIT_RELEASED;
            return 0;
        }
        e->state = TIER_SLOT_COMMITTED;
        e->deadline = e->pending;
        e->pending = 0;
        e->any_ok = false;
        m_admitted(m, j, e->stamp);
        *oc = TIER_COMMIT_COMMITTED;
        return 0;
    }
    *oc = TIER_COMMIT_KEPT;
    if (e->any_ok && m_expired(m, e)) {
        e->deferred = false;
        e->deadline = e->pending;
        m_touched(m, j);
        *oc = TIER_COMMIT_REVIVED;
    }
    e->any_ok = false;
    e->pending = 0;
    m_fix_deferred(m, j);
    return 0;
}

static int m_serve(model_t *m, uint32_t inst, uint32_t id, uint64_t now, uint32_t *slot)
{
    m_clock(m, now);
    uint32_t j = m_find(m, inst, id);
    *slot = j;
    if (j == NONE || m->s[j].state != TIER_SLOT_COMMITTED)
        return TIER_SLOTS_ENOENT;
    if (m_expired(m, &m->s[j])) {
        if (m_held(&m->s[j]))
            return TIER_SLOTS_EXPIRED_HELD;
        m_released(m, j);
        m_free_push(m, j);
        m->expirations++;
        return TIER_SLOTS_EXPIRED;
    }
    return 0;
}

static int m_pin(model_t *m, uint32_t inst, uint32_t id, uint64_t now)
{
    uint32_t j;
    int rc = m_serve(m, inst, id, now, &j);
    if (rc == 0)
        m->s[j].pins++;
    return rc;
}

static int m_unpin(model_t *m, uint32_t inst, uint32_t id)
{
    uint32_t j = m_find(m, inst, id);
    if (j == NONE || m->s[j].state != TIER_SLOT_COMMITTED)
        return TIER_SLOTS_ENOENT;
    if (m->s[j].pins == 0)
        return TIER_SLOTS_ESTATE;
    m->s[j].pins--;
    m_fix_deferred(m, j);
    return 0;
}

static int m_touch(model_t *m, uint32_t inst, uint32_t id, uint64_t now, uint64_t deadline)
{
    uint32_t j;
    int rc = m_serve(m, inst, id, now, &j);
    if (rc != 0)
        return rc;
    m_touched(m, j);
    if (deadline != 0 && m->s[j].deadline != 0 && deadline > m->s[j].deadline)
        m->s[j].deadline = deadline;
    return 0;
}

static int m_remove(model_t *m, uint32_t inst, uint32_t id)
{
    uint32_t j = m_find(m, inst, id);
    if (j == NONE)
        return TIER_SLOTS_ENOENT;
    if (m->s[j].state != TIER_SLOT_COMMITTED || m_held(&m->s[j]))
        return TIER_SLOTS_EBUSY;
    m_released(m, j);
    m_free_push(m, j);
    m->removals++;
    return 0;
}

static size_t m_expire(model_t *m, uint64_t now, size_t max, m_victim_t *v)
{
    m_clock(m, now);
    size_t n = 0;
    while (n < max) {
        uint32_t j = m_sweep(m);
        if (j == NONE)
            break;
        v[n++] = (m_victim_t){m->s[j].inst, m->s[j].id, j, m->s[j].deadline, true};
        m_released(m, j);
        m_free_push(m, j);
        m->expirations++;
    }
    return n;
}

static int m_adopt(model_t *m, uint32_t inst, uint32_t id, uint32_t slot, uint64_t deadline,
                   uint64_t now)
{
    m_clock(m, now);
    if (slot >= m->cap)
        return TIER_SLOTS_EINVAL;
    if (m->s[slot].state != TIER_SLOT_FREE)
        return TIER_SLOTS_EBUSY;
    if (m_find(m, inst, id) != NONE)
        return TIER_SLOTS_EDUP;
    m_free_unlink(m, slot);
    m_slot_t *e = &m->s[slot];
    memset(e, 0, sizeof(*e));
    e->state = TIER_SLOT_COMMITTED;
    e->inst = inst;
    e->id = id;
    e->deadline = deadline;
    m_admitted(m, slot, 0);
    return 0;
}

/* ----------------------------------------------------------- the driver */

static tier_key_t K(uint32_t id)
{
    tier_key_t k;
    uint64_t x = 0x9e3779b97f4a7c15ull * (id + 1);
    for (int i = 0; i < 2; i++) {
        x ^= x >> 30;
        x *= 0xbf58476d1ce4e5b9ull;
        x ^= x >> 27;
        memcpy(k.b + 8 * i, &x, 8);
    }
    return k; /* the same bytes in both instances: scoping must keep them apart */
}

typedef struct {
    const char *policy;
    uint64_t seed;
    unsigned long op;
    char what[160];
    uint64_t rng;
} ctx_t;

static ctx_t s_ctx;

static uint32_t rnd(uint32_t n)
{
    uint64_t x = s_ctx.rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s_ctx.rng = x;
    return (uint32_t)((x * 0x2545f4914f6cdd1dull) >> 33) % n;
}

#define DIFF(cond, ...)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            print_error("slot engine differs from model: policy %s seed %#llx op %lu (%s): ",      \
                        s_ctx.policy, (unsigned long long)s_ctx.seed, s_ctx.op, s_ctx.what);       \
            print_error(__VA_ARGS__);                                                              \
            print_error("\n");                                                                     \
            fail();                                                                                \
        }                                                                                          \
    } while (0)

static void cmp_victims(const m_victim_t *mv, size_t mn, const tier_victim_t *ev, size_t en)
{
    DIFF(mn == en, "victim count model %zu engine %zu", mn, en);
    for (size_t i = 0; i < mn; i++) {
        tier_key_t k = K(mv[i].id);
        DIFF(tier_key_eq(&ev[i].key, &k) && ev[i].instance == mv[i].inst,
             "victim %zu: model (%u,%u)", i, mv[i].inst, mv[i].id);
        DIFF(ev[i].slot == mv[i].slot, "victim %zu slot model %u engine %u", i, mv[i].slot,
             ev[i].slot);
        DIFF(ev[i].deadline_ms == mv[i].deadline && ev[i].expired == mv[i].expired,
             "victim %zu deadline/expired model %llu/%d engine %llu/%d", i,
             (unsigned long long)mv[i].deadline, mv[i].expired,
             (unsigned long long)ev[i].deadline_ms, ev[i].expired);
    }
}

/* The policy's order as the model keeps it, coldest first (tier_slots_walk_coldest):
 * lru/fifo by logical time, clock from the hand, slots without their reference
 * bit first. Returns how many. */
static uint32_t m_order(const model_t *m, uint32_t *out)
{
    uint32_t n = 0;
    if (m->pol == P_S3FIFO) { /* the queue taken first, then the other; unused, then used */
        const m_s3_t *c = &m->s3;
        unsigned first = c->n[Q_S] >= c->target || c->n[Q_M] == 0 ? Q_S : Q_M;
        for (int used = 0; used < 2; used++)
            for (unsigned q = first, k = 0; k < 2; k++, q = Q_S + Q_M - q)
                for (uint32_t x = 0; x < c->n[q]; x++)
                    if ((c->cnt[c->q[q][x]] != 0) == (used == 1))
                        out[n++] = c->q[q][x];
        return n;
    }
    if (m->pol == P_CLOCK) {
        for (int lap = 0; lap < 2; lap++)
            for (uint32_t k = 0; k < m->cap; k++) {
                uint32_t i = (m->hand + k) % m->cap;
                if (m->s[i].state == TIER_SLOT_COMMITTED && m->s[i].ref == (lap == 1))
                    out[n++] = i;
            }
        return n;
    }
    for (uint32_t i = 0; i < m->cap; i++)
        if (m->s[i].state == TIER_SLOT_COMMITTED) {
            uint32_t j = n++;
            while (j > 0 && m->s[out[j - 1]].order > m->s[i].order) {
                out[j] = out[j - 1];
                j--;
            }
            out[j] = i;
        }
    return n;
}

typedef struct {
    uint32_t n, slots[MAXCAP];
} walk_t;

static bool walk_collect(void *arg, uint32_t slot)
{
    walk_t *w = arg;
    w->slots[w->n++] = slot;
    return w->n == MAXCAP;
}

static void cmp_state(const model_t *m, const tier_slots_t *s)
{
    /* the reclaim order is the policy's: the engine's walk is the model's order */
    static uint32_t order[MAXCAP];
    static walk_t w;
    w.n = 0;
    uint32_t no = m_order(m, order);
    uint32_t steps = tier_slots_walk_coldest(s, MAXCAP, walk_collect, &w);
    DIFF(steps == no && w.n == no, "walk: engine %u slots, model %u", w.n, no);
    for (uint32_t i = 0; i < no; i++)
        DIFF(w.slots[i] == order[i], "walk[%u]: engine slot %u, model slot %u", i, w.slots[i],
             order[i]);
    for (uint32_t i = 0; i < m->cap; i++) {
        tier_slot_info_t info;
        DIFF(tier_slots_slot_info(s, i, &info) == 0, "slot_info %u", i);
        const m_slot_t *e = &m->s[i];
        DIFF(info.state == e->state, "slot %u state model %u engine %u", i, e->state, info.state);
        if (e->state == TIER_SLOT_FREE)
            continue;
        tier_key_t k = K(e->id);
        DIFF(tier_key_eq(&info.key, &k) && info.instance == e->inst, "slot %u key", i);
        DIFF(info.pins == e->pins && info.refs == e->refs,
             "slot %u pins/refs model %u/%u engine %u/%u", i, e->pins, e->refs, info.pins,
             info.refs);
        DIFF(info.deadline_ms == e->deadline && info.pending_deadline_ms == e->pending,
             "slot %u deadline/pending model %llu/%llu engine %llu/%llu", i,
             (unsigned long long)e->deadline, (unsigned long long)e->pending,
             (unsigned long long)info.deadline_ms, (unsigned long long)info.pending_deadline_ms);
        DIFF(info.deferred == e->deferred && info.expired == m_expired(m, e),
             "slot %u deferred/expired model %d/%d engine %d/%d", i, e->deferred, m_expired(m, e),
             info.deferred, info.expired);
    }
    tier_slots_stats_t st;
    tier_slots_stats(s, &st);
    uint32_t res = 0, com = 0, pinned = 0, rew = 0, def = 0, evi = 0;
    for (uint32_t i = 0; i < m->cap; i++) {
        const m_slot_t *e = &m->s[i];
        res += e->state == TIER_SLOT_RESERVED;
        if (e->state != TIER_SLOT_COMMITTED)
            continue;
        com++;
        pinned += e->pins > 0;
        rew += e->refs > 0;
        def += e->deferred;
        evi += !m_held(e);
    }
    DIFF(st.reserved == res && st.committed == com && st.used == res + com && st.free == m->nfl &&
             st.pinned == pinned && st.rewriting == rew && st.deferred == def &&
             st.evictable == evi,
         "gauges: engine res %u com %u free %u pin %u rew %u def %u evi %u", st.reserved,
         st.committed, st.free, st.pinned, st.rewriting, st.deferred, st.evictable);
    DIFF(st.evictions == m->evictions && st.expirations == m->expirations &&
             st.removals == m->removals && st.rollbacks == m->rollbacks && st.now_ms == m->now,
         "counters: model ev %llu ex %llu rm %llu rb %llu, engine ev %llu ex %llu rm %llu rb %llu",
         (unsigned long long)m->evictions, (unsigned long long)m->expirations,
         (unsigned long long)m->removals, (unsigned long long)m->rollbacks,
         (unsigned long long)st.evictions, (unsigned long long)st.expirations,
         (unsigned long long)st.removals, (unsigned long long)st.rollbacks);
    int chk = tier_slots_check(s);
    DIFF(chk == 0, "engine invariant failed at tier_slots.c line %d", -chk);
}

typedef struct {
    uint32_t inst, id;
} ticket_t;

typedef struct {
    model_t m;
    tier_slots_t *s;
    ticket_t tickets[NTICKETS]; /* reservations owed a commit */
    size_t ntickets;
    uint64_t now;
} run_t;

static void pick_key(uint32_t *inst, uint32_t *id)
{
    *inst = rnd(10) == 0 ? 2 : 1;
    *id = rnd(NIDS);
}

/* The now a call passes: usually the current time, sometimes an older one. */
static uint64_t call_now(const run_t *r)
{
    return rnd(30) == 0 && r->now > 5 ? r->now - rnd(5) : r->now;
}

static void op_reserve(run_t *r)
{
    uint32_t inst = rnd(10) == 0 ? 2 : 1;
    size_t n = 1 + rnd(r->m.max_batch);
    if (rnd(50) == 0)
        n = r->m.max_batch + 1; /* over the limit */
    if (r->ntickets + n > NTICKETS)
        return;
    uint32_t ids[MAXB + 1];
    for (size_t i = 0; i < n; i++) {
        bool dup;
        do {
            ids[i] = rnd(NIDS);
            dup = false;
            for (size_t j = 0; j < i; j++)
                dup |= ids[j] == ids[i];
        } while (dup);
    }
    if (n > 1 && rnd(20) == 0)
        ids[rnd((uint32_t)n)] = ids[0]; /* sometimes a duplicate key */
    uint32_t dsel = rnd(20);
    uint64_t deadline = dsel < 6 ? 0 : dsel == 6 ? r->now : r->now + 1 + rnd(40);
    unsigned flags = rnd(2) ? TIER_RESERVE_SKIP_SERVING : 0;
    uint64_t now = call_now(r);
    snprintf(s_ctx.what, sizeof(s_ctx.what),
             "reserve inst %u n %zu first id %u deadline %llu flags %u", inst, n, ids[0],
             (unsigned long long)deadline, flags);

    tier_key_t keys[MAXB + 1];
    for (size_t i = 0; i < n; i++)
        keys[i] = K(ids[i]);
    tier_resv_t eout[MAXB + 1], mout[MAXB + 1];
    tier_victim_t ev[MAXB + 1];
    m_victim_t mv[MAXB + 1];
    size_t env, mnv;
    int erc = tier_slots_reserve(r->s, inst, keys, n, deadline, now, flags, eout, ev, &env);
    int mrc = m_reserve(&r->m, inst, ids, n, deadline, now, flags, mout, mv, &mnv);
    DIFF(erc == mrc, "rc model %d engine %d", mrc, erc);
    if (mrc != 0) {
        DIFF(env == 0, "victims reported on failure");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        DIFF(eout[i].kind == mout[i].kind && eout[i].slot == mout[i].slot,
             "key %zu (id %u): model kind %u slot %u, engine kind %u slot %u", i, ids[i],
             mout[i].kind, mout[i].slot, eout[i].kind, eout[i].slot);
        if (mout[i].kind != TIER_RESV_SERVING)
            r->tickets[r->ntickets++] = (ticket_t){inst, ids[i]};
    }
    cmp_victims(mv, mnv, ev, env);
}

static void op_commit(run_t *r)
{
    uint32_t inst, id;
    if (r->ntickets > 0 && rnd(20) != 0) {
        size_t i = rnd((uint32_t)r->ntickets);
        inst = r->tickets[i].inst;
        id = r->tickets[i].id;
        r->tickets[i] = r->tickets[--r->ntickets];
    } else {
        pick_key(&inst, &id); /* most likely nothing in flight: an error */
    }
    bool ok = rnd(10) < 6;
    uint64_t now = call_now(r);
    snprintf(s_ctx.what, sizeof(s_ctx.what), "commit (%u,%u) %s", inst, id, ok ? "ok" : "failed");
    tier_key_t k = K(id);
    tier_commit_outcome_t eoc = 0;
    int moc = 0;
    int erc = tier_slots_commit(r->s, inst, &k, ok, now, &eoc);
    int mrc = m_commit(&r->m, inst, id, ok, now, &moc);
    DIFF(erc == mrc, "rc model %d engine %d", mrc, erc);
    if (mrc == 0)
        DIFF((int)eoc == moc, "outcome model %d engine %d", moc, (int)eoc);
}

static void op_read(run_t *r, int kind)
{
    uint32_t inst, id;
    pick_key(&inst, &id);
    if (kind == 2 && rnd(10) < 7) { /* unpin: prefer a pinned block */
        uint32_t start = rnd(r->m.cap);
        for (uint32_t i = 0; i < r->m.cap; i++) {
            const m_slot_t *e = &r->m.s[(start + i) % r->m.cap];
            if (e->state == TIER_SLOT_COMMITTED && e->pins > 0) {
                inst = e->inst;
                id = e->id;
                break;
            }
        }
    }
    uint64_t now = call_now(r);
    uint64_t deadline = rnd(3) == 0 ? 0 : r->now + rnd(60);
    static const char *const names[] = {"lookup", "pin", "unpin", "touch", "remove"};
    snprintf(s_ctx.what, sizeof(s_ctx.what), "%s (%u,%u)", names[kind], inst, id);
    tier_key_t k = K(id);
    int erc, mrc;
    switch (kind) {
    case 0: {
        tier_slot_info_t info;
        uint32_t mslot;
        erc = tier_slots_lookup(r->s, inst, &k, now, &info);
        uint64_t mdeadline = 0;
        uint32_t j = m_find(&r->m, inst, id);
        if (j != NONE)
            mdeadline = r->m.s[j].deadline;
        mrc = m_serve(&r->m, inst, id, now, &mslot);
        if (mrc != TIER_SLOTS_ENOENT && erc == mrc)
            DIFF(info.slot == mslot && info.deadline_ms == mdeadline,
                 "lookup info slot %u deadline %llu, model slot %u deadline %llu", info.slot,
                 (unsigned long long)info.deadline_ms, mslot, (unsigned long long)mdeadline);
        break;
    }
    case 1:
        erc = tier_slots_pin(r->s, inst, &k, now, NULL);
        mrc = m_pin(&r->m, inst, id, now);
        break;
    case 2:
        erc = tier_slots_unpin(r->s, inst, &k);
        mrc = m_unpin(&r->m, inst, id);
        break;
    case 3:
        erc = tier_slots_touch(r->s, inst, &k, now, deadline);
        mrc = m_touch(&r->m, inst, id, now, deadline);
        break;
    default:
        erc = tier_slots_remove(r->s, inst, &k);
        mrc = m_remove(&r->m, inst, id);
        break;
    }
    DIFF(erc == mrc, "rc model %d engine %d", mrc, erc);
}

static void op_expire(run_t *r)
{
    size_t max = rnd(5);
    uint64_t now = call_now(r);
    snprintf(s_ctx.what, sizeof(s_ctx.what), "expire max %zu", max);
    tier_victim_t ev[8];
    m_victim_t mv[8];
    size_t en;
    int erc = tier_slots_expire(r->s, now, ev, max, &en);
    DIFF(erc == 0, "expire rc %d", erc);
    size_t mn = m_expire(&r->m, now, max, mv);
    cmp_victims(mv, mn, ev, en);
}

static void op_adopt(run_t *r)
{
    uint32_t inst, id;
    pick_key(&inst, &id);
    uint32_t slot = rnd(r->m.cap + 1); /* sometimes out of range */
    uint64_t deadline = rnd(2) ? 0 : r->now + rnd(40);
    uint64_t now = call_now(r);
    snprintf(s_ctx.what, sizeof(s_ctx.what), "adopt (%u,%u) at %u", inst, id, slot);
    tier_key_t k = K(id);
    int erc = tier_slots_adopt(r->s, inst, &k, slot, deadline, now);
    int mrc = m_adopt(&r->m, inst, id, slot, deadline, now);
    DIFF(erc == mrc, "rc model %d engine %d", mrc, erc);
}

/* The model's ghost matches by fingerprint, the policy's by a 16-bit tag in
 * the fingerprint's bucket: the same as long as no two of the test's keys
 * share bucket and tag, which holds for HASH_SEED (checked, not assumed). */
static void check_fingerprints_apart(const model_t *m)
{
    for (uint32_t a = 0; a < 2 * NIDS; a++)
        for (uint32_t b = a + 1; b < 2 * NIDS; b++) {
            uint32_t fa = s3_fp(m, 1 + a / NIDS, a % NIDS), fb = s3_fp(m, 1 + b / NIDS, b % NIDS);
            uint32_t ta = fa & 0xffffu ? fa & 0xffffu : 1, tb = fb & 0xffffu ? fb & 0xffffu : 1;
            assert_false((s3_mix(fa) & m->s3.gmask) == (s3_mix(fb) & m->s3.gmask) && ta == tb);
        }
}

static void run_one(int pol, uint32_t cap, uint32_t max_batch, uint32_t stale_bound,
                    unsigned long nops, uint64_t seed)
{
    static run_t r;
    memset(&r, 0, sizeof(r));
    s_ctx.policy = s_pol_names[pol];
    s_ctx.seed = seed;
    s_ctx.rng = seed;
    s_ctx.op = 0;
    snprintf(s_ctx.what, sizeof(s_ctx.what), "create");
    tier_slots_config_t cfg = {.policy = s_pol_names[pol],
                               .capacity = cap,
                               .max_batch = max_batch,
                               .heap_stale_bound = stale_bound,
                               .hash_seed = HASH_SEED};
    r.s = tier_slots_new(&cfg);
    assert_non_null(r.s);
    m_init(&r.m, pol, cap, max_batch, r.s);
    if (pol == P_S3FIFO)
        check_fingerprints_apart(&r.m);
    r.now = 1;
    for (s_ctx.op = 1; s_ctx.op <= nops; s_ctx.op++) {
        uint32_t c = rnd(100);
        if (r.ntickets > 2 * cap && c < 40)
            c = 20; /* keep reservations turning over */
        if (c < 18)
            op_reserve(&r);
        else if (c < 42)
            op_commit(&r);
        else if (c < 52)
            op_read(&r, 0); /* lookup */
        else if (c < 62)
            op_read(&r, 1); /* pin */
        else if (c < 73)
            op_read(&r, 2); /* unpin */
        else if (c < 81)
            op_read(&r, 3); /* touch */
        else if (c < 83)
            op_read(&r, 4); /* remove */
        else if (c < 85)
            op_expire(&r);
        else if (c < 86)
            op_adopt(&r);
        else
            r.now += rnd(6); /* time advance */
        cmp_state(&r.m, r.s);
    }
    tier_slots_stats_t st;
    tier_slots_stats(r.s, &st);
    print_message("%-5s cap %2u batch %u: %lu ops, %llu evictions, %llu expirations, %llu "
                  "rollbacks, %llu heap compactions\n",
                  s_pol_names[pol], cap, max_batch, nops, (unsigned long long)st.evictions,
                  (unsigned long long)st.expirations, (unsigned long long)st.rollbacks,
                  (unsigned long long)st.heap_compactions);
    /* The run did reach the interesting paths. */
    assert_true(st.evictions > 100 && st.expirations > 100 && st.rollbacks > 100);
    assert_true(st.heap_compactions > 10);
    tier_slots_destroy(&r.s);
}

/* One policy's runs: a large pool and a small, contended one, each from its seed. */
typedef struct {
    int pol;
    uint64_t seed_large, seed_small;
} diff_case_t;

static const diff_case_t s_lru = {P_LRU, 0x51075eedull, 0x51075eefull};
static const diff_case_t s_clock = {P_CLOCK, 0xc10c5eedull, 0xc10c5eefull};
static const diff_case_t s_fifo = {P_FIFO, 0xf1f05eedull, 0xf1f05eefull};
static const diff_case_t s_s3fifo = {P_S3FIFO, 0x53f1f05eedull, 0x53f1f05eefull};

/* Rule (issue 2 §4): the engine matches an obviously correct model over at
 * least 100,000 random operations per policy (the test's state). */
static void test_differential(void **state)
{
    const diff_case_t *c = *state;
    run_one(c->pol, 24, 8, 3, 120000, c->seed_large);
    run_one(c->pol, 4, 3, 1, 40000, c->seed_small);
}

/* test_differential under policy s_<p>, named after it. */
#define UNDER_POLICY(p)                                                                            \
    {                                                                                              \
        .name = "test_differential/" #p, .test_func = test_differential,                           \
        .initial_state = (void *)&s_##p                                                            \
    }

int main(void)
{
    const struct CMUnitTest tests[] = {
        UNDER_POLICY(lru),
        UNDER_POLICY(clock),
        UNDER_POLICY(fifo),
        UNDER_POLICY(s3fifo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
