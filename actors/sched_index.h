/* sched_index.h — the index: instances (ids, specs, slot-header numbers) and block lookup over the
 * tiers of a chain; Lookup / Touch / Remove / RegisterInstance. Owns sched_index_t
 * (sched_t.index). Private to actors/sched_*.c; builds on the tier set (sched_tiers.h) only: the
 * chain of a lookup that names a request comes from the caller (sched_chain_fn). */
#ifndef KVT_SCHED_INDEX_H
#define KVT_SCHED_INDEX_H

#include "sched_tiers.h"

typedef struct {
    bool used;
    char id[64];
    uint32_t number; /* slot-header instance number */
    uint64_t hash;
    kvtier_InstanceSpec spec;
    sched_counters_t c;
    /* quotas (sched_quota.c): as of the last enforcement */
    uint32_t q_entry;     /* 1 + index in cfg.quotas that applies; 0 unresolved; UINT32_MAX none */
    uint64_t q_usage;     /* locations over all tiers (DELETING excluded) */
    uint64_t q_limit;     /* limit in blocks (the tighter of max_blocks, max_bytes) */
    uint64_t q_over;      /* enforcements that found it above its limit */
    uint64_t q_reclaimed; /* blocks marked DELETING for its quota */
    bool q_draining;      /* went above its limit, not yet down to limit x low */
    /* an operator's trim (AdminTrimRequest): down to trim_keep locations, exactly */
    bool trim_on;
    uint64_t trim_keep;
    uint64_t trim_removed; /* blocks marked DELETING by trims */
    /* registered from the etcd registry (sched_index_preload), its client not back
     * yet: its first registration hands the spec to the registry writer, which
     * then keeps its record fresh (coord_registry.h) */
    bool preloaded;
} sched_instance_t;

/* The index (sched_t.index): the registered instances, by id. */
typedef struct {
    sched_instance_t *inst;
    uint32_t n_inst;
    sched_map_t inst_map;
    zsock_t *registry; /* PUSH to cfg.registry_output (the etcd registry), or NULL */
} sched_index_t;

/* Specs a PUSH to the registry writer holds before new ones are dropped. */
#define SCHED_REGISTRY_QUEUE 1024

/* The chain a lookup naming request_id of instance inst uses: SCHED_NONE when no
 * such request is open (the requests module answers it, sched_request_chain). */
typedef uint32_t (*sched_chain_fn)(sched_t *self, uint32_t inst, const char *request_id);

/* ---- sched_index.c ---- */
int sched_index_init(sched_t *self);
void sched_index_fini(sched_t *self);
/* Registers the instances of a new leader's etcd registry (cfg.preload) before it
 * serves; a bad, duplicate or excess record is logged and skipped. Returns how
 * many were registered. */
int sched_index_preload(sched_t *self, const kvtier_InstanceSpec *specs, uint32_t n);
sched_instance_t *sched_instance_find(sched_t *self, const char *id);
/* The instance named in a request, or NULL after replying NOT_FOUND / INVALID_ARGUMENT. */
sched_instance_t *sched_instance_get(sched_t *self, sched_call_t *call, const char *id);
const char *sched_instance_name(sched_t *self, uint32_t number); /* NULL if unknown */
uint32_t sched_instance_tokens(sched_t *self, uint32_t number);  /* 0 if unknown */
/* Copies n request keys into self->keys. */
void sched_keys_load(sched_call_t *call, uint32_t n);
/* The best live SERVING location of key (chain order first): tier index or SCHED_NONE. */
uint32_t sched_block_find(sched_t *self, uint32_t number, const tier_key_t *key, uint32_t chain,
                          int64_t now, uint32_t *slot);
void sched_on_register(sched_t *self, sched_call_t *call);
void sched_on_lookup(sched_t *self, sched_call_t *call, sched_chain_fn chain_of);
void sched_on_touch(sched_t *self, sched_call_t *call);
void sched_on_remove(sched_t *self, sched_call_t *call);
uint64_t sched_hash(const sched_t *self, const void *data, size_t len, uint64_t extra);

#endif
