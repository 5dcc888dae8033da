/* opt_arc.c — ARC over four intrusive doubly linked lists (T1, T2, B1, B2) threaded
 * through per-block prev/next arrays; each block is on at most one list. */
#include "opt_arc.h"

#include <stdlib.h>

#define S_NONE UINT32_MAX

enum { S_OUT = 0, S_T1, S_T2, S_B1, S_B2, S_NLISTS };

typedef struct {
    uint32_t head, tail; /* head: MRU, tail: LRU */
    uint64_t size;
} s_list_t;

typedef struct {
    uint32_t *prev, *next;
    uint8_t *where;
    s_list_t l[S_NLISTS];
    double p;
    double c;
} s_arc_t;

static void s_unlink(s_arc_t *a, uint32_t x)
{
    s_list_t *l = &a->l[a->where[x]];
    if (a->prev[x] != S_NONE)
        a->next[a->prev[x]] = a->next[x];
    else
        l->head = a->next[x];
    if (a->next[x] != S_NONE)
        a->prev[a->next[x]] = a->prev[x];
    else
        l->tail = a->prev[x];
    l->size--;
    a->where[x] = S_OUT;
}

static void s_push_mru(s_arc_t *a, uint32_t x, int list)
{
    if (a->where[x] != S_OUT)
        s_unlink(a, x);
    s_list_t *l = &a->l[list];
    a->prev[x] = S_NONE;
    a->next[x] = l->head;
    if (l->head != S_NONE)
        a->prev[l->head] = x;
    else
        l->tail = x;
    l->head = x;
    l->size++;
    a->where[x] = (uint8_t)list;
}

/* REPLACE(x, p): moves the LRU of T1 to B1 or the LRU of T2 to B2. */
static void s_replace(s_arc_t *a, bool in_b2)
{
    double t1 = (double)a->l[S_T1].size;
    if (a->l[S_T1].size >= 1 && ((in_b2 && t1 == a->p) || t1 > a->p))
        s_push_mru(a, a->l[S_T1].tail, S_B1);
    else if (a->l[S_T2].size >= 1)
        s_push_mru(a, a->l[S_T2].tail, S_B2);
    else if (a->l[S_T1].size >= 1) /* T2 empty: not reached while ARC's invariants hold */
        s_push_mru(a, a->l[S_T1].tail, S_B1);
}

static double s_max(double x, double y)
{
    return x > y ? x : y;
}

static void s_miss_new(s_arc_t *a, uint32_t x)
{
    uint64_t c = (uint64_t)a->c;
    uint64_t t1 = a->l[S_T1].size, t2 = a->l[S_T2].size;
    uint64_t b1 = a->l[S_B1].size, b2 = a->l[S_B2].size;
    if (t1 + b1 == c) { /* case A */
        if (t1 < c) {
            s_unlink(a, a->l[S_B1].tail);
            s_replace(a, false);
        } else {
            s_unlink(a, a->l[S_T1].tail);
        }
    } else if (t1 + t2 + b1 + b2 >= c) { /* case B */
        if (t1 + t2 + b1 + b2 == 2 * c)
            s_unlink(a, a->l[S_B2].tail);
        s_replace(a, false);
    }
    s_push_mru(a, x, S_T1);
}

static void s_access(s_arc_t *a, uint32_t x)
{
    double b1 = (double)a->l[S_B1].size, b2 = (double)a->l[S_B2].size;
    switch (a->where[x]) {
    case S_T1:
    case S_T2: /* case I */
        s_push_mru(a, x, S_T2);
        return;
    case S_B1: /* case II */
        a->p = a->p + s_max(b2 / b1, 1.0);
        if (a->p > a->c)
            a->p = a->c;
        s_replace(a, false);
        s_push_mru(a, x, S_T2);
        return;
    case S_B2: /* case III */
        a->p = a->p - s_max(b1 / b2, 1.0);
        if (a->p < 0)
            a->p = 0;
        s_replace(a, true);
        s_push_mru(a, x, S_T2);
        return;
    default: /* case IV */
        s_miss_new(a, x);
    }
}

int64_t opt_arc_run(const opt_trace_t *t, uint64_t capacity, uint32_t *req_hits)
{
    uint32_t distinct = opt_trace_distinct(t);
    s_arc_t a = {.c = (double)(capacity ? capacity : 1)};
    a.prev = malloc(((size_t)distinct + 1) * sizeof *a.prev);
    a.next = malloc(((size_t)distinct + 1) * sizeof *a.next);
    a.where = calloc((size_t)distinct + 1, 1);
    int64_t hits = -1;
    if (!a.prev || !a.next || !a.where)
        goto out;
    for (int i = 0; i < S_NLISTS; i++)
        a.l[i] = (s_list_t){S_NONE, S_NONE, 0};
    hits = 0;
    for (size_t r = 0; r < opt_trace_requests(t); r++) {
        uint32_t n, h = 0;
        const uint32_t *blocks = opt_trace_blocks(t, r, &n);
        while (h < n && (a.where[blocks[h]] == S_T1 || a.where[blocks[h]] == S_T2))
            h++;
        hits += h;
        if (req_hits)
            req_hits[r] = h;
        for (uint32_t j = 0; j < n; j++)
            s_access(&a, blocks[j]);
    }
out:
    free(a.prev);
    free(a.next);
    free(a.where);
    return hits;
}
