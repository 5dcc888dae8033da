/* copy_testkit.h — helpers for the tier-to-tier copy and migrator tests: start
 * real tier actors (host: POSIX shm named after the pid; nvme: a file in a
 * mkdtemp directory) on tcp://127.0.0.1:*, store blocks through the tier plane
 * (WriteSlots + PutHeader SERVING), read them back, page the inventory and send
 * CopySlots. Block bytes and keys derive from a seed, so every read is checked
 * byte-exact. Header-only (static inline), test use only. */
#ifndef KVT_COPY_TESTKIT_H
#define KVT_COPY_TESTKIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus_client.h"
#include "tier_actor.h"
#include "tier_checksum.h"

#define CK_SLOT (32u * 1024u)
#define CK_CAP 32u
#define CK_CALL_MS 20000u /* generous: the tests assert on behaviour only */
#define CK_INST "llama-7b/fp16"

typedef struct {
    zactor_t *actor;
    bus_client_t *client;
    char ep[TIER_ACTOR_ENDPOINT_MAX];
    tier_actor_config_t cfg;
    kvtier_Envelope req, rep;
} ck_tier_t;

static inline void ck_fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1u);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
}

static inline void ck_key(uint32_t seed, uint8_t key[16])
{
    ck_fill(key, 16, seed * 7919u + 11u);
}

/* Block size of a seed: varied, never a multiple of 4096, at most CK_SLOT. */
static inline size_t ck_size(uint32_t seed)
{
    return 1000u + (seed * 2654435761u) % (CK_SLOT - 1000u);
}

/* A config for kind "host", "nvme" or "gpu" (on the fake CUDA runtime: the test
 * defines KVT_FAKECUDA_SO, or $KVT_FAKECUDA_SO names it); dir holds nvme files; seq
 * makes names unique. */
static inline tier_actor_config_t ck_cfg(const char *kind, uint32_t tier_id, const char *dir,
                                         int seq)
{
    tier_actor_config_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.tier.name, sizeof c.tier.name, "%s%d", kind, seq);
    snprintf(c.tier.kind, sizeof c.tier.kind, "%s", kind);
    c.tier.capacity = CK_CAP;
    c.tier.slot_size = CK_SLOT;
    if (strcmp(kind, "host") == 0) {
        snprintf(c.tier.path, sizeof c.tier.path, "/kvt-ck-%d-%d", (int)getpid(), seq);
    } else if (strcmp(kind, "gpu") == 0) {
        const char *fake = getenv("KVT_FAKECUDA_SO");
#ifdef KVT_FAKECUDA_SO
        if (!fake || !fake[0])
            fake = KVT_FAKECUDA_SO;
#endif
        (void)tier_config_set(&c.tier, "cuda_library", fake ? fake : "");
        (void)tier_config_set(&c.tier, "staging_bytes", "65536");
    } else {
        snprintf(c.tier.path, sizeof c.tier.path, "%s/nvme-%d.dat", dir, seq);
        (void)tier_config_set(&c.tier, "queue_depth", "8");
    }
    c.tier_id = tier_id;
    c.endpoint = "tcp://127.0.0.1:*";
    return c;
}

static inline void ck_start(ck_tier_t *t, const tier_actor_config_t *cfg)
{
    memset(t, 0, sizeof *t);
    t->cfg = *cfg;
    t->actor = tier_actor_new(cfg);
    assert_non_null(t->actor);
    assert_int_equal(tier_actor_endpoint(t->actor, t->ep, sizeof t->ep), 0);
    bus_client_config_t cc = {.name = "test", .default_timeout_ms = CK_CALL_MS};
    t->client = bus_client_new(t->ep, &cc);
    assert_non_null(t->client);
}

static inline void ck_stop(ck_tier_t *t)
{
    bus_client_destroy(&t->client);
    zactor_destroy(&t->actor);
}

/* Stores block `seed` (one frame) in `slot` and commits it SERVING. */
static inline void ck_store(ck_tier_t *t, uint64_t slot, uint32_t seed, uint64_t deadline)
{
    size_t size = ck_size(seed);
    uint8_t *bytes = malloc(size);
    assert_non_null(bytes);
    ck_fill(bytes, size, seed);
    uint64_t sz = size;
    kvtier_Status st;
    bus_payload_t pl = {bytes, size, NULL, NULL};
    bus_env_init(&t->req, kvtier_Envelope_write_slots_req_tag, "test");
    t->req.body.write_slots_req.tier_id = t->cfg.tier_id;
    bus_arrays_t arr = {.slots = {&slot, 1, 1}, .sizes = {&sz, 1, 1}};
    int rc =
        bus_client_call(t->client, &t->req, &arr, &pl, 1, CK_CALL_MS, &t->rep, NULL, NULL, &st);
    if (rc != 0)
        fail_msg("store write: %s", st.message);
    uint8_t key[1][16];
    ck_key(seed, key[0]);
    struct iovec iov = {bytes, size};
    uint64_t sum = tier_checksum(&iov, 1);
    free(bytes);
    bus_env_init(&t->req, kvtier_Envelope_put_header_req_tag, "test");
    kvtier_PutHeaderRequest *p = &t->req.body.put_header_req;
    p->tier_id = t->cfg.tier_id;
    snprintf(p->instance_id, sizeof p->instance_id, "%s", CK_INST);
    p->state = kvtier_LocationState_LOCATION_SERVING;
    p->ttl_deadline_ms = deadline;
    bus_arrays_t parr = {.slots = {&slot, 1, 1},
                         .keys = {key, 1, 1},
                         .sizes = {&sz, 1, 1},
                         .checksums = {&sum, 1, 1}};
    rc = bus_client_call(t->client, &t->req, &parr, NULL, 0, CK_CALL_MS, &t->rep, NULL, NULL, &st);
    if (rc != 0)
        fail_msg("store put header: %s", st.message);
}

/* Reads `slot` expecting block `seed`: status code, and the bytes compared. */
static inline int ck_read_code(ck_tier_t *t, uint64_t slot, uint32_t seed)
{
    uint8_t key[1][16];
    ck_key(seed, key[0]);
    uint64_t sizes[4];
    bus_arrays_t rarr = {.sizes = {sizes, 0, 4}};
    zmsg_t *payload = NULL;
    kvtier_Status st = {0};
    bus_env_init(&t->req, kvtier_Envelope_read_slots_req_tag, "test");
    t->req.body.read_slots_req.tier_id = t->cfg.tier_id;
    bus_arrays_t arr = {.slots = {&slot, 1, 1}, .keys = {key, 1, 1}};
    int rc = bus_client_call(t->client, &t->req, &arr, NULL, 0, CK_CALL_MS, &t->rep, &rarr,
                             &payload, &st);
    if (rc == 0) {
        size_t size = ck_size(seed);
        uint8_t *want = malloc(size);
        assert_non_null(want);
        ck_fill(want, size, seed);
        assert_non_null(payload);
        assert_int_equal(zmsg_size(payload), 1);
        zframe_t *f = zmsg_first(payload);
        assert_int_equal(zframe_size(f), size);
        assert_memory_equal(zframe_data(f), want, size);
        free(want);
    }
    zmsg_destroy(&payload);
    return rc == 0 ? 0 : (int)st.code;
}

/* Inventory entry of `slot` (paged to the end); false when the slot is not listed. */
static inline bool ck_inventory_find(ck_tier_t *t, uint64_t slot, kvtier_InventoryEntry *out)
{
    uint64_t cursor = 0;
    kvtier_Status st;
    for (int pages = 0; pages <= (int)CK_CAP; pages++) {
        bus_env_init(&t->req, kvtier_Envelope_inventory_req_tag, "test");
        t->req.body.inventory_req.cursor = cursor;
        if (bus_client_call(t->client, &t->req, NULL, NULL, 0, CK_CALL_MS, &t->rep, NULL, NULL,
                            &st) != 0)
            fail_msg("inventory: %s", st.message);
        const kvtier_InventoryReply *r = &t->rep.body.inventory_rep;
        for (pb_size_t i = 0; i < r->entries_count; i++)
            if (r->entries[i].slot == slot) {
                *out = r->entries[i];
                return true;
            }
        if (r->done)
            return false;
        cursor = r->next_cursor;
    }
    fail_msg("inventory did not end");
    return false;
}

/* A CopySlots request from `src` into t->req with the given arrays bound in *arr
 * (storage owned by the caller). */
static inline void ck_copy_req(ck_tier_t *src, const char *dst_ep, uint32_t dst_id,
                               kvtier_LocationState state)
{
    bus_env_init(&src->req, kvtier_Envelope_copy_slots_req_tag, "test");
    kvtier_CopySlotsRequest *c = &src->req.body.copy_slots_req;
    c->tier_id = src->cfg.tier_id;
    c->dst_tier_id = dst_id;
    snprintf(c->dst_endpoint, sizeof c->dst_endpoint, "%.*s", (int)sizeof c->dst_endpoint - 1,
             dst_ep);
    c->dst_state = state;
}

/* Synchronous CopySlots: status code (0: OK); mask (n entries) and *copied set
 * from the reply's body when it has one. */
static inline int ck_copy(ck_tier_t *src, const char *dst_ep, uint32_t dst_id,
                          const uint64_t *slots, const uint64_t *dst_slots, uint8_t (*keys)[16],
                          uint32_t n, bool *mask, uint32_t *copied)
{
    ck_copy_req(src, dst_ep, dst_id, kvtier_LocationState_LOCATION_SERVING);
    bus_arrays_t arr = {.slots = {(uint64_t *)slots, n, n},
                        .dst_slots = {(uint64_t *)dst_slots, n, n},
                        .keys = {keys, n, n}};
    bool m[CK_CAP] = {0};
    bus_arrays_t rarr = {.mask = {m, 0, CK_CAP}};
    kvtier_Status st = {0};
    memset(&src->rep, 0, sizeof src->rep);
    int rc = bus_client_call(src->client, &src->req, &arr, NULL, 0, CK_CALL_MS, &src->rep, &rarr,
                             NULL, &st);
    bool body = src->rep.which_body == kvtier_Envelope_copy_slots_rep_tag;
    if (copied)
        *copied = body ? src->rep.body.copy_slots_rep.copied : 0;
    if (mask) {
        memset(mask, 0, n * sizeof *mask);
        if (body) {
            assert_int_equal(rarr.mask.n, n);
            memcpy(mask, m, n * sizeof *mask);
        }
    }
    return rc == 0 ? 0 : (int)st.code;
}

#endif
