/* opt_belady.c — farthest-next-use with bypass over a lazily pruned max-heap: an
 * entry (key, block) is live while the block is cached with that next-use key;
 * keys are distinct (positions, or refs + id for "never"), so a stale entry is
 * recognised by its key. The heap is rebuilt from the cached blocks whenever it
 * holds more than twice the capacity plus a margin. */
#include "opt_belady.h"

#include <stdbool.h>
#include <stdlib.h>

#define S_NONE UINT32_MAX
#define S_MARGIN 1024

struct opt_belady {
    const opt_trace_t *t;
    uint32_t *next; /* per reference: index of the next reference of the block, S_NONE */
};

typedef struct {
    uint64_t key;
    uint32_t block;
} s_ent_t;

typedef struct {
    const opt_belady_t *b;
    uint64_t capacity;
    uint8_t *cached;
    uint64_t *cur; /* the cached block's next-use key */
    s_ent_t *heap;
    uint64_t len, cap;
    uint64_t used;
} s_run_t;

opt_belady_t *opt_belady_new(const opt_trace_t *t)
{
    uint64_t refs = opt_trace_refs(t);
    uint32_t distinct = opt_trace_distinct(t);
    opt_belady_t *b = calloc(1, sizeof *b);
    uint32_t *nextpos = malloc(((size_t)distinct + 1) * sizeof *nextpos);
    if (b)
        b->next = malloc((refs ? refs : 1) * sizeof *b->next);
    if (!b || !b->next || !nextpos) {
        free(nextpos);
        opt_belady_destroy(&b);
        return NULL;
    }
    b->t = t;
    for (uint32_t i = 0; i < distinct; i++)
        nextpos[i] = S_NONE;
    /* blocks of all requests are contiguous in reference order: walk them backwards */
    for (size_t r = opt_trace_requests(t); r-- > 0;) {
        uint32_t n;
        const uint32_t *blocks = opt_trace_blocks(t, r, &n);
        uint64_t base = opt_trace_first_ref(t, r);
        for (uint32_t j = n; j-- > 0;) {
            b->next[base + j] = nextpos[blocks[j]];
            nextpos[blocks[j]] = (uint32_t)(base + j);
        }
    }
    free(nextpos);
    return b;
}

void opt_belady_destroy(opt_belady_t **b)
{
    if (!b || !*b)
        return;
    free((*b)->next);
    free(*b);
    *b = NULL;
}

static bool s_above(const s_ent_t *a, const s_ent_t *c)
{
    return a->key > c->key;
}

static void s_sift_down(s_ent_t *h, uint64_t len, uint64_t i)
{
    s_ent_t x = h[i];
    for (;;) {
        uint64_t c = 2 * i + 1;
        if (c >= len)
            break;
        if (c + 1 < len && s_above(&h[c + 1], &h[c]))
            c++;
        if (!s_above(&h[c], &x))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

static bool s_live(const s_run_t *s, const s_ent_t *e)
{
    return s->cached[e->block] && s->cur[e->block] == e->key;
}

static void s_compact(s_run_t *s)
{
    uint64_t kept = 0;
    for (uint64_t i = 0; i < s->len; i++)
        if (s_live(s, &s->heap[i]))
            s->heap[kept++] = s->heap[i];
    s->len = kept;
    for (uint64_t i = kept / 2; i-- > 0;)
        s_sift_down(s->heap, kept, i);
}

static void s_push(s_run_t *s, uint64_t key, uint32_t block)
{
    if (s->len == s->cap)
        s_compact(s); /* live entries <= capacity < cap / 2 */
    uint64_t i = s->len++;
    s_ent_t x = {key, block};
    while (i > 0 && s_above(&x, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = x;
}

/* The live entry with the latest next use (stale ones above it are dropped). */
static const s_ent_t *s_top(s_run_t *s)
{
    while (s->len > 0 && !s_live(s, &s->heap[0])) {
        s->heap[0] = s->heap[--s->len];
        s_sift_down(s->heap, s->len, 0);
    }
    return s->len ? &s->heap[0] : NULL;
}

static void s_access(s_run_t *s, uint32_t block, uint64_t key)
{
    if (s->cached[block]) {
        s->cur[block] = key;
        s_push(s, key, block);
        return;
    }
    if (s->used == s->capacity) {
        const s_ent_t *top = s_top(s);
        if (!top || top->key < key)
            return; /* bypass: b is needed later than everything cached */
        s->cached[top->block] = 0;
        s->used--;
    }
    s->cached[block] = 1;
    s->cur[block] = key;
    s->used++;
    s_push(s, key, block);
}

int64_t opt_belady_run(const opt_belady_t *b, uint64_t capacity, uint32_t *req_hits)
{
    const opt_trace_t *t = b->t;
    uint64_t refs = opt_trace_refs(t);
    uint32_t distinct = opt_trace_distinct(t);
    s_run_t s = {.b = b, .capacity = capacity ? capacity : 1};
    s.cap = 2 * (s.capacity < distinct ? s.capacity : distinct) + S_MARGIN;
    s.cached = calloc((size_t)distinct + 1, 1);
    s.cur = calloc((size_t)distinct + 1, sizeof *s.cur);
    s.heap = malloc(s.cap * sizeof *s.heap);
    int64_t hits = -1;
    if (!s.cached || !s.cur || !s.heap)
        goto out;
    hits = 0;
    uint64_t pos = 0;
    for (size_t r = 0; r < opt_trace_requests(t); r++) {
        uint32_t n, h = 0;
        const uint32_t *blocks = opt_trace_blocks(t, r, &n);
        while (h < n && s.cached[blocks[h]])
            h++;
        hits += h;
        if (req_hits)
            req_hits[r] = h;
        for (uint32_t j = 0; j < n; j++, pos++) {
            uint32_t nx = b->next[pos];
            s_access(&s, blocks[j], nx == S_NONE ? refs + blocks[j] : nx);
        }
    }
out:
    free(s.cached);
    free(s.cur);
    free(s.heap);
    return hits;
}
