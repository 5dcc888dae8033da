/* sched_index.h — the index: instances (ids, specs, slot-header numbers) and block lookup over the
 * tiers of a chain; Lookup / Touch / Remove / RegisterInstance. Private to actors/sched_*.c;
 * includes only the core types (sched_int.h). */
#ifndef KVT_SCHED_INDEX_H
#define KVT_SCHED_INDEX_H

#include "sched_int.h"

/* ---- sched_index.c ---- */
int sched_index_init(sched_t *self);
void sched_index_fini(sched_t *self);
sched_instance_t *sched_instance_find(sched_t *self, const char *id);
/* The instance named in a request, or NULL after replying NOT_FOUND / INVALID_ARGUMENT. */
sched_instance_t *sched_instance_get(sched_t *self, sched_call_t *call, const char *id);
const char *sched_instance_name(sched_t *self, uint32_t number); /* NULL if unknown */
/* Copies n request keys into self->keys. */
void sched_keys_load(sched_call_t *call, uint32_t n);
/* The best live SERVING location of key (chain order first): tier index or SCHED_NONE. */
uint32_t sched_block_find(sched_t *self, uint32_t number, const tier_key_t *key, uint32_t chain,
                          int64_t now, uint32_t *slot);
void sched_on_register(sched_t *self, sched_call_t *call);
void sched_on_lookup(sched_t *self, sched_call_t *call);
void sched_on_touch(sched_t *self, sched_call_t *call);
void sched_on_remove(sched_t *self, sched_call_t *call);
uint64_t sched_hash(const sched_t *self, const void *data, size_t len, uint64_t extra);

#endif
