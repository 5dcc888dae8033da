/* sched_window.h — a request's window of one kind (DESIGN.md §2 "window"): its
 * lifecycle as an explicit state machine, and its entries (the keys a prepare
 * covered, where they live or go). At most one window of each kind is open per
 * request, and a get+put window excludes the get and put kinds (the kinds table
 * of sched_window.c). Every change of state goes through sched_window_step, which executes
 * the one transition table of sched_window.c; a transition the table does not
 * have is an error and changes nothing. Knows nothing of the scheduler's
 * requests, tiers or replies (the callers act on what a transition means). */
#ifndef KVT_SCHED_WINDOW_H
#define KVT_SCHED_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

#include "tier_key.h"

/* sched_entry_t.kind flags (the low three bits hold a put's tier_resv_kind_t) */
#define SCHED_ENTRY_SKIP 0x80u        /* excluded from the batch */
#define SCHED_ENTRY_PIN 0x40u         /* a pinned source (prefetch) */
#define SCHED_ENTRY_COPIED 0x20u      /* a prefetch destination the migrator filled */
#define SCHED_ENTRY_COPYING 0x10u     /* ... its copy job is at the migrator */
#define SCHED_ENTRY_COPY_FAILED 0x08u /* ... its copy failed in this CopyPrefetch */

/* One key of a window. */
typedef struct {
    tier_key_t key;
    uint32_t slot;
    uint8_t tier; /* tier index */
    uint8_t kind; /* put: tier_resv_kind_t, | SCHED_ENTRY_SKIP */
    uint16_t gen; /* the tier's generation when the entry was made */
} sched_entry_t;

/* A window's entries: chunks of an entry pool. */
typedef struct {
    uint32_t head, tail; /* chunk indices, UINT32_MAX when empty */
    uint32_t n;          /* entries */
} sched_list_t;

#define SCHED_CHUNK 256u /* entries per chunk of the pool */

/* The entries of every window: fixed chunks sized once (max entries), handed to
 * lists and back; never allocates after sched_pool_init. */
typedef struct {
    sched_entry_t *entries; /* n_chunks x SCHED_CHUNK */
    uint32_t *chunk_next;
    uint32_t *chunk_free;
    uint32_t n_chunks, n_chunk_free;
} sched_pool_t;

/* A pool for at least max_entries entries (0 or -1); fini frees it (idempotent). */
int sched_pool_init(sched_pool_t *p, uint32_t max_entries);
void sched_pool_fini(sched_pool_t *p);
/* Could a list of n entries be placed now (enough free chunks)? */
bool sched_pool_can_take(const sched_pool_t *p, uint32_t n);
/* Entries held by lists (in whole chunks). */
uint32_t sched_pool_used(const sched_pool_t *p);

/* Appends an entry to l (NULL when the pool is out of chunks). */
sched_entry_t *sched_list_push(sched_pool_t *p, sched_list_t *l);
/* Returns l's chunks to the pool; l becomes empty. */
void sched_list_free(sched_pool_t *p, sched_list_t *l);
/* Iteration: for (e = sched_list_first(p, l, &it); e; e = sched_list_next(p, &it)) */
typedef struct {
    uint32_t chunk, i, left;
} sched_iter_t;
sched_entry_t *sched_list_first(const sched_pool_t *p, const sched_list_t *l, sched_iter_t *it);
sched_entry_t *sched_list_next(const sched_pool_t *p, sched_iter_t *it);

/* The token ids and parents of open puts, for their stored events (events on
 * only): fixed chunks of SCHED_TOK_CHUNK words handed to a put and back; never
 * allocates after sched_tokpool_init. A put keeps, per window entry, one record
 * of `rec` words: [has parent][parent: 4 words][n_tok token ids]; records never
 * straddle chunks. */
#define SCHED_TOK_CHUNK 4096u
#define SCHED_PUT_TOKEN_WORDS (4u << 20) /* default pool: 4 Mi words, 16 MiB */
#define SCHED_TOK_HEAD 5u                /* words of a record before its token ids */

typedef struct {
    uint32_t *words; /* n_chunks x SCHED_TOK_CHUNK */
    uint32_t *chunk_next;
    uint32_t *chunk_free;
    uint32_t n_chunks, n_chunk_free;
} sched_tokpool_t;

/* One put's records; rec == 0: nothing kept (zero-initialised = empty). */
typedef struct {
    uint32_t head; /* first chunk */
    uint32_t rec;  /* words per record */
    uint32_t n_tok;
    uint32_t n; /* records */
} sched_putmeta_t;

/* A pool of at least `words` words (0: none; every put then keeps nothing). */
int sched_tokpool_init(sched_tokpool_t *p, uint32_t words);
void sched_tokpool_fini(sched_tokpool_t *p);
/* Words held by puts (in whole chunks). */
uint32_t sched_tokpool_used(const sched_tokpool_t *p);
/* Takes room for n records of n_tok token ids each into m: 0, or -1 (no room,
 * or one record larger than a chunk; m stays empty). */
int sched_putmeta_take(sched_tokpool_t *p, sched_putmeta_t *m, uint32_t n, uint32_t n_tok);
/* Record i of m (i < m->n). */
uint32_t *sched_putmeta_at(const sched_tokpool_t *p, const sched_putmeta_t *m, uint32_t i);
/* Returns m's chunks; m becomes empty. */
void sched_putmeta_free(sched_tokpool_t *p, sched_putmeta_t *m);

enum {
    SCHED_WIN_GET = 0,
    SCHED_WIN_PUT = 1,
    SCHED_WIN_PREFETCH = 2,
    SCHED_WIN_GETPUT = 3, /* a combined window: pinned prefix hits + reserved misses */
    SCHED_WIN_KINDS = 4,
};

typedef enum {
    SCHED_WIN_CLOSED = 0,     /* no prepare outstanding */
    SCHED_WIN_OPEN = 1,       /* prepared: its entries are held (pins, reservations) */
    SCHED_WIN_COMPLETING = 2, /* a complete is concluding its entries */
    SCHED_WIN_COPYING = 3,    /* prefetch: the migrator is copying its entries */
    SCHED_WIN_ABANDONED = 4,  /* copying, and its request ended: released when the copy ends */
    SCHED_WIN_STATES = 5,
} sched_win_state_t;

typedef enum {
    SCHED_WEV_PREPARE = 0, /* a prepare placed its entries */
    SCHED_WEV_CANCEL,      /* that prepare failed after opening: released again */
    SCHED_WEV_COMPLETE,    /* a complete with the window's token arrived */
    SCHED_WEV_DONE,        /* the complete concluded every entry */
    SCHED_WEV_HANDOFF,     /* the complete handed its entries to a tier confirmation */
    SCHED_WEV_LAPSE,       /* its lease ran out (the scheduler's scan) */
    SCHED_WEV_END,         /* request_end (or the request's end) with the window open */
    SCHED_WEV_TIER_RESET,  /* a tier of its entries was reset: they are stale */
    SCHED_WEV_COPY,        /* prefetch: its copies were handed to the migrator */
    SCHED_WEV_COPIED,      /* prefetch: the last of those copies ended */
    SCHED_WEV_COUNT,
} sched_win_event_t;

typedef struct {
    sched_win_state_t state;
    uint64_t token_id;
    uint64_t lapsed_token_id; /* the last token whose lease lapsed (an EXPIRED complete) */
    uint64_t job_id;
    int64_t opened_ms;
    uint32_t stale;       /* TIER_RESET events since it opened */
    sched_list_t entries; /* get: pins; put, get+put: reservations; prefetch: both */
    sched_list_t pins;    /* get+put: the get part's pins (empty for the other kinds) */
    uint32_t head;        /* the tier index its reservations went to (the chain's first
                             placeable tier at the prepare: sched_chain_head) */
} sched_window_t;

/* A fresh, closed window without entries. */
void sched_window_init(sched_window_t *w);

/* Applies ev: 0 and the new state, or -1 (the table has no such transition; w
 * is unchanged). PREPARE takes token_id, job_id and now_ms; COPIED restarts the
 * lease at now_ms; LAPSE records the token as lapsed; the others ignore them. */
int sched_window_step(sched_window_t *w, sched_win_event_t ev, uint64_t token_id, uint64_t job_id,
                      int64_t now_ms);

static inline bool sched_window_open(const sched_window_t *w)
{
    return w->state == SCHED_WIN_OPEN;
}

/* The open (not CLOSED) window of q's windows `win` that keeps one of `kind` from
 * opening (itself included: one per kind), or -1: none. */
int sched_window_blocker(const sched_window_t win[SCHED_WIN_KINDS], int kind);

/* A window's lease: pin_lease_ms for get and prefetch, write_grace_ms for put,
 * the shorter of both for get+put (its pins and reservations lapse together). */
uint64_t sched_window_lease_ms(int kind, uint64_t pin_lease_ms, uint64_t write_grace_ms);

/* "get", "put", "prefetch", "get+put"; "?" outside the kinds. */
const char *sched_window_kind_name(int kind);

const char *sched_window_state_name(sched_win_state_t s);
const char *sched_window_event_name(sched_win_event_t ev);

#endif
