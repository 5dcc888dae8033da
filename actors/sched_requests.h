/* sched_requests.h — requests and their windows (sched_window.h), get / put / prefetch, leases, the
 * window entry pool and deferred put replies. Private to actors/sched_*.c; includes only the core
 * types (sched_int.h). */
#ifndef KVT_SCHED_REQUESTS_H
#define KVT_SCHED_REQUESTS_H

#include "sched_int.h"

/* ---- sched_requests.c ---- */
int sched_requests_init(sched_t *self);
void sched_requests_fini(sched_t *self);
sched_request_t *sched_request_find(sched_t *self, uint32_t inst, const char *id);
uint32_t sched_open_requests(const sched_t *self);
uint32_t sched_open_windows_keys(const sched_t *self);
void sched_on_begin(sched_t *self, sched_call_t *call);
void sched_on_end(sched_t *self, sched_call_t *call);
void sched_on_prepare_get(sched_t *self, sched_call_t *call);
void sched_on_complete_get(sched_t *self, sched_call_t *call);
void sched_on_prepare_put(sched_t *self, sched_call_t *call);
void sched_on_complete_put(sched_t *self, sched_call_t *call);
void sched_on_prepare_prefetch(sched_t *self, sched_call_t *call);
void sched_on_complete_prefetch(sched_t *self, sched_call_t *call);
/* CopyPrefetch: the window's copies go to the migrator; answered when they end. */
void sched_on_copy_prefetch(sched_t *self, sched_call_t *call);
/* A prefetch copy's result (DemoteDone of priority MIGRATOR_PREFETCH, internal plane). */
void sched_on_copy_done(sched_t *self, sched_call_t *call);
/* Fails prefetch copies without a result after SCHED_COPY_LOST_MS. */
void sched_copy_tick(sched_t *self, int64_t now);
void sched_lease_scan(sched_t *self, int64_t now);

/* ---- window pool (sched_requests.c) ---- */
sched_entry_t *sched_list_push(sched_t *self, sched_list_t *l);
void sched_list_free(sched_t *self, sched_list_t *l);
/* Iteration: for (it = sched_list_first(..); e; e = sched_list_next(..)) */
typedef struct {
    uint32_t chunk, i, left;
} sched_iter_t;
sched_entry_t *sched_list_first(sched_t *self, const sched_list_t *l, sched_iter_t *it);
sched_entry_t *sched_list_next(sched_t *self, sched_iter_t *it);
/* Put op completion (called by sched_tiers.c from the PutHeader reply). */
void sched_put_done(sched_put_op_t *op, const kvtier_Status *st, uint32_t written);

#endif
