/* sched_window.c — the window state machine (sched_window.h). The transition
 * table below is the whole lifecycle; sched_window_step is the only writer of
 * a window's state.
 *
 *   state       event        next        what the caller does
 *   CLOSED      PREPARE      OPEN        entries placed; the token is handed out
 *   OPEN        CANCEL       CLOSED      the prepare failed after opening: released
 *   OPEN        COMPLETE     COMPLETING  the token matched: entries are concluded
 *   COMPLETING  DONE         CLOSED      every entry concluded, the reply is sent
 *   COMPLETING  HANDOFF      CLOSED      entries moved to a tier confirmation
 *                                        (sched_put_op_t), which replies later
 *   OPEN        LAPSE        CLOSED      lease over: released, the token recorded
 *   OPEN        END          CLOSED      request_end: released (the safety net)
 *   OPEN        TIER_RESET   OPEN        entries of the reset tier are stale (by
 *                                        generation) and fail at complete
 *   OPEN        COPY         COPYING     prefetch: copies handed to the migrator;
 *                                        no lapse, no complete until they end
 *   COPYING     COPIED       OPEN        the last copy ended: the caller is told
 *                                        which keys were copied; its lease restarts
 *   COPYING     END          ABANDONED   request_end mid-copy: the request's name is
 *                                        free, its entries held until the copy ends
 *   ABANDONED   COPIED       CLOSED      the copy ended: released
 *
 * Anything else (a complete of a closed window, a second prepare, a lapse while
 * completing) is refused: -1, nothing changes.
 *
 * The kinds (one window of each per request; s_excludes below):
 *
 *   kind     entries                         lease         excludes  complete
 *   get      pins                            pin_lease     get+put   unpins
 *   put      reservations (shared by key)    write_grace   get+put   PutHeader, then commits
 *   prefetch head reservations + source pins pin_lease     -         PutHeader, then commits
 *   get+put  reservations; pins: the pinned  min(both)     get, put  unpins at once, then
 *            prefix hits (token [0, n_get))                          PutHeader and commits
 *
 * A get+put window (PrepareRequest, issue 13 §2) goes through the same states as
 * a put window (CLOSED -> OPEN -> COMPLETING -> CLOSED, by DONE or HANDOFF); its
 * LAPSE, END and CANCEL release both lists, its TIER_RESET makes entries of the
 * reset tier (either list) fail at complete. It exists only at the leader that
 * opened it: a new leader has no such request, and the complete is NOT_FOUND. */
#include "sched_window.h"

#include <stdlib.h>

#include "tier_mem.h"

typedef struct {
    sched_win_state_t from;
    sched_win_event_t ev;
    sched_win_state_t to;
} s_transition_t;

static const s_transition_t s_table[] = {
    {SCHED_WIN_CLOSED, SCHED_WEV_PREPARE, SCHED_WIN_OPEN},
    {SCHED_WIN_OPEN, SCHED_WEV_CANCEL, SCHED_WIN_CLOSED},
    {SCHED_WIN_OPEN, SCHED_WEV_COMPLETE, SCHED_WIN_COMPLETING},
    {SCHED_WIN_COMPLETING, SCHED_WEV_DONE, SCHED_WIN_CLOSED},
    {SCHED_WIN_COMPLETING, SCHED_WEV_HANDOFF, SCHED_WIN_CLOSED},
    {SCHED_WIN_OPEN, SCHED_WEV_LAPSE, SCHED_WIN_CLOSED},
    {SCHED_WIN_OPEN, SCHED_WEV_END, SCHED_WIN_CLOSED},
    {SCHED_WIN_OPEN, SCHED_WEV_TIER_RESET, SCHED_WIN_OPEN},
    {SCHED_WIN_OPEN, SCHED_WEV_COPY, SCHED_WIN_COPYING},
    {SCHED_WIN_COPYING, SCHED_WEV_COPIED, SCHED_WIN_OPEN},
    {SCHED_WIN_COPYING, SCHED_WEV_END, SCHED_WIN_ABANDONED},
    {SCHED_WIN_ABANDONED, SCHED_WEV_COPIED, SCHED_WIN_CLOSED},
};

void sched_window_init(sched_window_t *w)
{
    *w = (sched_window_t){.state = SCHED_WIN_CLOSED,
                          .entries = {.head = UINT32_MAX, .tail = UINT32_MAX},
                          .pins = {.head = UINT32_MAX, .tail = UINT32_MAX}};
}

int sched_window_step(sched_window_t *w, sched_win_event_t ev, uint64_t token_id, uint64_t job_id,
                      int64_t now_ms)
{
    for (unsigned i = 0; i < sizeof s_table / sizeof s_table[0]; i++) {
        if (s_table[i].from != w->state || s_table[i].ev != ev)
            continue;
        w->state = s_table[i].to;
        if (ev == SCHED_WEV_PREPARE) {
            w->token_id = token_id;
            w->job_id = job_id;
            w->opened_ms = now_ms;
            w->stale = 0;
        } else if (ev == SCHED_WEV_COPIED) {
            w->opened_ms = now_ms; /* the lease restarts: the caller still has to complete */
        } else if (ev == SCHED_WEV_LAPSE) {
            w->lapsed_token_id = w->token_id;
        } else if (ev == SCHED_WEV_TIER_RESET) {
            w->stale++;
        }
        return 0;
    }
    return -1;
}

/* kind -> the kinds whose open window keeps it from opening (bit per kind) */
static const uint8_t s_excludes[SCHED_WIN_KINDS] = {
    [SCHED_WIN_GET] = 1u << SCHED_WIN_GET | 1u << SCHED_WIN_GETPUT,
    [SCHED_WIN_PUT] = 1u << SCHED_WIN_PUT | 1u << SCHED_WIN_GETPUT,
    [SCHED_WIN_PREFETCH] = 1u << SCHED_WIN_PREFETCH,
    [SCHED_WIN_GETPUT] = 1u << SCHED_WIN_GETPUT | 1u << SCHED_WIN_GET | 1u << SCHED_WIN_PUT,
};

int sched_window_blocker(const sched_window_t win[SCHED_WIN_KINDS], int kind)
{
    if ((unsigned)kind >= SCHED_WIN_KINDS)
        return -1;
    if (win[kind].state != SCHED_WIN_CLOSED)
        return kind;
    for (int k = 0; k < SCHED_WIN_KINDS; k++)
        if ((s_excludes[kind] & (1u << k)) && win[k].state != SCHED_WIN_CLOSED)
            return k;
    return -1;
}

uint64_t sched_window_lease_ms(int kind, uint64_t pin_lease_ms, uint64_t write_grace_ms)
{
    if (kind == SCHED_WIN_PUT)
        return write_grace_ms;
    if (kind == SCHED_WIN_GETPUT)
        return pin_lease_ms < write_grace_ms ? pin_lease_ms : write_grace_ms;
    return pin_lease_ms;
}

const char *sched_window_kind_name(int kind)
{
    static const char *const names[SCHED_WIN_KINDS] = {"get", "put", "prefetch", "get+put"};
    return (unsigned)kind < SCHED_WIN_KINDS ? names[kind] : "?";
}

const char *sched_window_state_name(sched_win_state_t s)
{
    static const char *const names[SCHED_WIN_STATES] = {"closed", "open", "completing", "copying",
                                                        "abandoned"};
    return (unsigned)s < SCHED_WIN_STATES ? names[s] : "?";
}

const char *sched_window_event_name(sched_win_event_t ev)
{
    static const char *const names[SCHED_WEV_COUNT] = {
        "prepare", "cancel", "complete",   "done", "handoff",
        "lapse",   "end",    "tier-reset", "copy", "copied"};
    return (unsigned)ev < SCHED_WEV_COUNT ? names[ev] : "?";
}

/* ---- the entry pool ---- */

static uint32_t s_chunks_for(uint32_t n)
{
    return (n + SCHED_CHUNK - 1) / SCHED_CHUNK;
}

int sched_pool_init(sched_pool_t *p, uint32_t max_entries)
{
    *p = (sched_pool_t){.n_chunks = s_chunks_for(max_entries)};
    /* mapped pages stay untouched (not resident) until a window uses them (tier_mem.h) */
    p->entries = tier_mem_calloc((size_t)p->n_chunks * SCHED_CHUNK, sizeof *p->entries);
    p->chunk_next = tier_mem_calloc(p->n_chunks, sizeof *p->chunk_next);
    p->chunk_free = tier_mem_calloc(p->n_chunks, sizeof *p->chunk_free);
    if (!p->entries || !p->chunk_next || !p->chunk_free) {
        sched_pool_fini(p);
        return -1;
    }
    for (uint32_t c = 0; c < p->n_chunks; c++)
        p->chunk_free[c] = p->n_chunks - 1 - c;
    p->n_chunk_free = p->n_chunks;
    return 0;
}

void sched_pool_fini(sched_pool_t *p)
{
    tier_mem_free(p->entries);
    tier_mem_free(p->chunk_next);
    tier_mem_free(p->chunk_free);
    *p = (sched_pool_t){0};
}

bool sched_pool_can_take(const sched_pool_t *p, uint32_t n)
{
    return s_chunks_for(n) <= p->n_chunk_free;
}

uint32_t sched_pool_used(const sched_pool_t *p)
{
    return (p->n_chunks - p->n_chunk_free) * SCHED_CHUNK;
}

sched_entry_t *sched_list_push(sched_pool_t *p, sched_list_t *l)
{
    if (l->n % SCHED_CHUNK == 0) {
        if (p->n_chunk_free == 0)
            return NULL;
        uint32_t c = p->chunk_free[--p->n_chunk_free];
        p->chunk_next[c] = UINT32_MAX;
        if (l->head == UINT32_MAX || l->n == 0)
            l->head = c;
        else
            p->chunk_next[l->tail] = c;
        l->tail = c;
    }
    sched_entry_t *e = &p->entries[(size_t)l->tail * SCHED_CHUNK + l->n % SCHED_CHUNK];
    l->n++;
    return e;
}

void sched_list_free(sched_pool_t *p, sched_list_t *l)
{
    uint32_t c = l->n ? l->head : UINT32_MAX;
    while (c != UINT32_MAX) {
        uint32_t next = p->chunk_next[c];
        p->chunk_free[p->n_chunk_free++] = c;
        c = next;
    }
    *l = (sched_list_t){.head = UINT32_MAX, .tail = UINT32_MAX, .n = 0};
}

sched_entry_t *sched_list_first(const sched_pool_t *p, const sched_list_t *l, sched_iter_t *it)
{
    *it = (sched_iter_t){.chunk = l->head, .i = 0, .left = l->n};
    if (it->left == 0)
        return NULL;
    it->left--;
    return &p->entries[(size_t)it->chunk * SCHED_CHUNK];
}

sched_entry_t *sched_list_next(const sched_pool_t *p, sched_iter_t *it)
{
    if (it->left == 0)
        return NULL;
    it->left--;
    if (++it->i == SCHED_CHUNK) {
        it->i = 0;
        it->chunk = p->chunk_next[it->chunk];
    }
    return &p->entries[(size_t)it->chunk * SCHED_CHUNK + it->i];
}

/* ---- the token pool of open puts ---- */

int sched_tokpool_init(sched_tokpool_t *p, uint32_t words)
{
    *p = (sched_tokpool_t){0};
    if (words == 0)
        return 0;
    uint32_t n = (words + SCHED_TOK_CHUNK - 1) / SCHED_TOK_CHUNK;
    p->words = tier_mem_calloc(1, (size_t)n * SCHED_TOK_CHUNK * sizeof *p->words);
    p->chunk_next = tier_mem_calloc(n, sizeof *p->chunk_next);
    p->chunk_free = tier_mem_calloc(n, sizeof *p->chunk_free);
    if (!p->words || !p->chunk_next || !p->chunk_free) {
        sched_tokpool_fini(p);
        return -1;
    }
    for (uint32_t i = 0; i < n; i++)
        p->chunk_free[i] = n - 1 - i;
    p->n_chunks = p->n_chunk_free = n;
    return 0;
}

void sched_tokpool_fini(sched_tokpool_t *p)
{
    tier_mem_free(p->words);
    tier_mem_free(p->chunk_next);
    tier_mem_free(p->chunk_free);
    *p = (sched_tokpool_t){0};
}

uint32_t sched_tokpool_used(const sched_tokpool_t *p)
{
    return (p->n_chunks - p->n_chunk_free) * SCHED_TOK_CHUNK;
}

int sched_putmeta_take(sched_tokpool_t *p, sched_putmeta_t *m, uint32_t n, uint32_t n_tok)
{
    *m = (sched_putmeta_t){0};
    if (n == 0 || n_tok > SCHED_TOK_CHUNK - SCHED_TOK_HEAD)
        return -1;
    uint32_t rec = SCHED_TOK_HEAD + n_tok, per = SCHED_TOK_CHUNK / rec;
    uint32_t chunks = (n + per - 1) / per;
    if (chunks > p->n_chunk_free)
        return -1;
    uint32_t prev = UINT32_MAX;
    for (uint32_t i = 0; i < chunks; i++) {
        uint32_t c = p->chunk_free[--p->n_chunk_free];
        p->chunk_next[c] = UINT32_MAX;
        if (prev == UINT32_MAX)
            m->head = c;
        else
            p->chunk_next[prev] = c;
        prev = c;
    }
    m->rec = rec;
    m->n_tok = n_tok;
    m->n = n;
    return 0;
}

uint32_t *sched_putmeta_at(const sched_tokpool_t *p, const sched_putmeta_t *m, uint32_t i)
{
    uint32_t per = SCHED_TOK_CHUNK / m->rec, c = m->head;
    for (uint32_t k = i / per; k > 0; k--)
        c = p->chunk_next[c];
    return p->words + (size_t)c * SCHED_TOK_CHUNK + (size_t)(i % per) * m->rec;
}

void sched_putmeta_free(sched_tokpool_t *p, sched_putmeta_t *m)
{
    if (m->rec == 0) {
        *m = (sched_putmeta_t){0};
        return;
    }
    uint32_t per = SCHED_TOK_CHUNK / m->rec, chunks = (m->n + per - 1) / per, c = m->head;
    for (uint32_t i = 0; i < chunks; i++) {
        uint32_t next = p->chunk_next[c];
        p->chunk_free[p->n_chunk_free++] = c;
        c = next;
    }
    *m = (sched_putmeta_t){0};
}
