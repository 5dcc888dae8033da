/* publisher_mirror.c — the publisher's copy of the index (rules in
 * publisher_mirror.h): an open-addressing table of locations (linear probing,
 * backward-shift deletion, so no tombstones), an instance-id table, and a stale
 * flag with its reason. Keys are already uniform hashes (XXH3-128 chains), so a
 * location hashes by mixing its key's first 8 bytes with instance and tier. */
#include "publisher_mirror.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MIN_SLOTS 1024u

struct publisher_mirror_t {
    publisher_mirror_loc_t *slots;
    uint32_t cap; /* power of two */
    uint32_t count;
    uint32_t max_blocks;
    char (*inst)[BUS_INSTANCE_ID_MAX];
    uint32_t n_inst;
    bool stale;
    char why[192];
};

static uint64_t s_mix(const uint8_t key[BUS_KEY_LEN], uint16_t instance, uint32_t tier)
{
    uint64_t h;
    memcpy(&h, key, sizeof h);
    h ^= (uint64_t)instance << 48 ^ (uint64_t)tier * 0x9e3779b97f4a7c15ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static bool s_same(const publisher_mirror_loc_t *l, const uint8_t *key, uint16_t inst,
                   uint32_t tier)
{
    return l->used && l->tier_id == tier && l->instance == inst &&
           memcmp(l->key, key, BUS_KEY_LEN) == 0;
}

static uint32_t s_home(const publisher_mirror_t *self, const publisher_mirror_loc_t *l)
{
    return (uint32_t)(s_mix(l->key, l->instance, l->tier_id) & (self->cap - 1));
}

publisher_mirror_t *publisher_mirror_new(uint32_t max_blocks)
{
    if (max_blocks > PUBLISHER_MIRROR_MAX_BLOCKS)
        return NULL;
    publisher_mirror_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->max_blocks = max_blocks ? max_blocks : PUBLISHER_MIRROR_DEFAULT_BLOCKS;
    self->cap = S_MIN_SLOTS;
    self->slots = calloc(self->cap, sizeof *self->slots);
    self->inst = calloc(PUBLISHER_MIRROR_INSTANCES, sizeof *self->inst);
    if (!self->slots || !self->inst)
        publisher_mirror_destroy(&self);
    return self;
}

void publisher_mirror_destroy(publisher_mirror_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free((*self_p)->slots);
    free((*self_p)->inst);
    free(*self_p);
    *self_p = NULL;
}

static void s_stale(publisher_mirror_t *self, const char *fmt, uint64_t a, uint64_t b)
{
    if (self->stale)
        return;
    self->stale = true;
    snprintf(self->why, sizeof self->why, fmt, a, b);
}

static void s_clear(publisher_mirror_t *self)
{
    memset(self->slots, 0, (size_t)self->cap * sizeof *self->slots);
    self->count = 0;
    self->n_inst = 0;
    self->stale = false;
    self->why[0] = '\0';
}

/* ---- table ---- */

static publisher_mirror_loc_t *s_find(publisher_mirror_t *self, const uint8_t *key, uint16_t inst,
                                      uint32_t tier)
{
    uint32_t i = (uint32_t)(s_mix(key, inst, tier) & (self->cap - 1));
    for (;; i = (i + 1) & (self->cap - 1)) {
        publisher_mirror_loc_t *l = &self->slots[i];
        if (!l->used)
            return NULL;
        if (s_same(l, key, inst, tier))
            return l;
    }
}

/* Places L (not in the table) in its probe run; the table has a free slot. */
static void s_place(publisher_mirror_t *self, const publisher_mirror_loc_t *l)
{
    uint32_t i = s_home(self, l);
    while (self->slots[i].used)
        i = (i + 1) & (self->cap - 1);
    self->slots[i] = *l;
    self->slots[i].used = 1;
}

static int s_grow(publisher_mirror_t *self)
{
    uint32_t cap = self->cap * 2;
    publisher_mirror_loc_t *old = self->slots, *nw = calloc(cap, sizeof *nw);
    if (!nw)
        return -1;
    uint32_t old_cap = self->cap;
    self->slots = nw;
    self->cap = cap;
    for (uint32_t i = 0; i < old_cap; i++)
        if (old[i].used)
            s_place(self, &old[i]);
    free(old);
    return 0;
}

static void s_add(publisher_mirror_t *self, const publisher_mirror_loc_t *l, uint64_t seq)
{
    publisher_mirror_loc_t *have = s_find(self, l->key, l->instance, l->tier_id);
    if (have) {
        have->medium = l->medium;
        have->bytes = l->bytes;
        have->tokens = l->tokens;
        return;
    }
    if (self->count >= self->max_blocks) {
        s_stale(self,
                "the index passed events.snapshot_blocks (%" PRIu64 " locations) at seq %" PRIu64,
                self->max_blocks, seq);
        return;
    }
    if ((uint64_t)(self->count + 1) * 2 > self->cap && s_grow(self) < 0) {
        s_stale(self, "out of memory growing past %" PRIu64 " locations at seq %" PRIu64,
                self->count, seq);
        return;
    }
    s_place(self, l);
    self->count++;
}

/* Backward-shift deletion: the entries after the hole that may move into it do. */
static void s_del_at(publisher_mirror_t *self, uint32_t hole)
{
    uint32_t mask = self->cap - 1;
    for (uint32_t j = (hole + 1) & mask; self->slots[j].used; j = (j + 1) & mask) {
        uint32_t home = s_home(self, &self->slots[j]);
        /* j may fill the hole unless its home lies cyclically in (hole, j] */
        bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            self->slots[hole] = self->slots[j];
            hole = j;
        }
    }
    memset(&self->slots[hole], 0, sizeof self->slots[hole]);
    self->count--;
}

static bool s_del(publisher_mirror_t *self, const uint8_t *key, uint16_t inst, uint32_t tier,
                  publisher_mirror_loc_t *was)
{
    publisher_mirror_loc_t *l = s_find(self, key, inst, tier);
    if (!l)
        return false;
    if (was)
        *was = *l;
    s_del_at(self, (uint32_t)(l - self->slots));
    return true;
}

static void s_drop_tier(publisher_mirror_t *self, uint32_t tier)
{
    /* deleting shifts later entries back: rescan a slot until it stays */
    for (uint32_t i = 0; i < self->cap;)
        if (self->slots[i].used && self->slots[i].tier_id == tier)
            s_del_at(self, i);
        else
            i++;
}

/* ---- instances ---- */

/* The table index of id; -1 when the table is full (the mirror goes stale). */
static int s_instance(publisher_mirror_t *self, const char *id, uint64_t seq)
{
    for (uint32_t i = 0; i < self->n_inst; i++)
        if (strcmp(self->inst[i], id) == 0)
            return (int)i;
    if (self->n_inst >= PUBLISHER_MIRROR_INSTANCES) {
        s_stale(self, "more than %" PRIu64 " instances at seq %" PRIu64, PUBLISHER_MIRROR_INSTANCES,
                seq);
        return -1;
    }
    snprintf(self->inst[self->n_inst], sizeof self->inst[0], "%s", id);
    return (int)self->n_inst++;
}

/* ---- apply ---- */

static void s_apply_one(publisher_mirror_t *self, uint64_t seq, const bus_event_t *e)
{
    const kvtier_Event *ev = &e->ev;
    switch (ev->which_kind) {
    case kvtier_Event_leader_changed_tag:
    case kvtier_Event_all_cleared_tag:
        s_clear(self);
        return;
    case kvtier_Event_tier_changed_tag:
        if (!ev->kind.tier_changed.up)
            s_drop_tier(self, ev->kind.tier_changed.tier_id);
        return;
    case kvtier_Event_block_stored_tag:
    case kvtier_Event_block_removed_tag:
    case kvtier_Event_block_moved_tag:
        break;
    default:
        return; /* lookups and kinds of newer publishers change nothing */
    }
    int inst = s_instance(self, ev->instance_id, seq);
    if (inst < 0)
        return;
    for (uint32_t k = 0; k < e->keys.n && !self->stale; k++) {
        const uint8_t *key = e->keys.keys[k];
        publisher_mirror_loc_t l = {.instance = (uint16_t)inst};
        memcpy(l.key, key, BUS_KEY_LEN);
        if (ev->which_kind == kvtier_Event_block_stored_tag) {
            const kvtier_BlockStored *s = &ev->kind.block_stored;
            l.tier_id = s->tier_id;
            l.medium = (uint8_t)s->medium;
            l.bytes = s->block_bytes;
            l.tokens = s->tokens_per_block;
            s_add(self, &l, seq);
        } else if (ev->which_kind == kvtier_Event_block_removed_tag) {
            s_del(self, key, (uint16_t)inst, ev->kind.block_removed.tier_id, NULL);
        } else {
            const kvtier_BlockMoved *m = &ev->kind.block_moved;
            publisher_mirror_loc_t was = {0};
            bool had = s_del(self, key, (uint16_t)inst, m->src_tier_id, &was);
            l.tier_id = m->dst_tier_id;
            l.medium = (uint8_t)m->dst_medium;
            l.bytes = had ? was.bytes : 0;
            l.tokens = had ? was.tokens : 0;
            s_add(self, &l, seq);
        }
    }
}

void publisher_mirror_apply(publisher_mirror_t *self, uint64_t seq, const kvtier_EventBatch *b,
                            const bus_event_t *events, uint32_t n)
{
    (void)b;
    for (uint32_t i = 0; i < n; i++)
        s_apply_one(self, seq, &events[i]);
}

void publisher_mirror_lost(publisher_mirror_t *self, uint64_t seq, const char *why)
{
    if (self->stale)
        return;
    self->stale = true;
    snprintf(self->why, sizeof self->why, "batch %" PRIu64 " was not applied (%s)", seq,
             why ? why : "lost");
}

uint32_t publisher_mirror_count(const publisher_mirror_t *self)
{
    return self->count;
}

const char *publisher_mirror_stale(const publisher_mirror_t *self)
{
    return self->stale ? self->why : NULL;
}

const char *publisher_mirror_instance(const publisher_mirror_t *self, uint16_t i)
{
    return i < self->n_inst ? self->inst[i] : "";
}

int publisher_mirror_copy_instances(const publisher_mirror_t *self,
                                    char (**out)[BUS_INSTANCE_ID_MAX], uint32_t *n)
{
    *out = NULL;
    *n = 0;
    if (!self->n_inst)
        return 0;
    *out = malloc((size_t)self->n_inst * sizeof **out);
    if (!*out)
        return -1;
    memcpy(*out, self->inst, (size_t)self->n_inst * sizeof **out);
    *n = self->n_inst;
    return 0;
}

static int s_cmp(const void *pa, const void *pb)
{
    const publisher_mirror_loc_t *a = pa, *b = pb;
    if (a->instance != b->instance)
        return a->instance < b->instance ? -1 : 1;
    if (a->tier_id != b->tier_id)
        return a->tier_id < b->tier_id ? -1 : 1;
    if (a->medium != b->medium)
        return a->medium < b->medium ? -1 : 1;
    if (a->bytes != b->bytes)
        return a->bytes < b->bytes ? -1 : 1;
    if (a->tokens != b->tokens)
        return a->tokens < b->tokens ? -1 : 1;
    return memcmp(a->key, b->key, BUS_KEY_LEN);
}

int publisher_mirror_copy(const publisher_mirror_t *self, publisher_mirror_loc_t **out, uint32_t *n)
{
    *out = NULL;
    *n = 0;
    if (!self->count)
        return 0;
    publisher_mirror_loc_t *a = malloc((size_t)self->count * sizeof *a);
    if (!a)
        return -1;
    uint32_t k = 0;
    for (uint32_t i = 0; i < self->cap; i++)
        if (self->slots[i].used)
            a[k++] = self->slots[i];
    qsort(a, k, sizeof *a, s_cmp);
    *out = a;
    *n = k;
    return 0;
}
