/* test_tier_actor.c — the tier actor (DESIGN.md §3, §4, §5, §7; issue 3 §2, §5)
 * over real sockets against a real host tier (POSIX shm) and a real nvme tier
 * (files in a mkdtemp directory under /tmp): byte-exact round trips through payload
 * frames, multi-segment blocks, headers and inventory, the WRITING mark, probe,
 * delete, bad input sent raw (each answered with its status, stored blocks left
 * intact), nvme checksum failures, restarts, the pipe commands and failed starts.
 * Shm names and directories carry the pid so parallel runs never collide. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus_client.h"
#include "bus_inventory.h"
#include "tier_actor.h"
#include "tier_checksum.h"
#include "tier_fake.h"
#include "tier_host.h"

#define SLOT (64u * 1024u)
#define CAP 16u
#define T_MS 20000u
#define MAXN 32u
#define INST "llama-7b/fp16"

#define ST_OK kvtier_StatusCode_STATUS_OK
#define ST_INVALID kvtier_StatusCode_STATUS_INVALID_ARGUMENT
#define ST_NOT_FOUND kvtier_StatusCode_STATUS_NOT_FOUND
#define ST_CONFLICT kvtier_StatusCode_STATUS_CONFLICT
#define ST_INTERNAL kvtier_StatusCode_STATUS_INTERNAL
#define ST_UNAVAILABLE kvtier_StatusCode_STATUS_UNAVAILABLE

static char s_dir[128];
static int s_seq;
static uint64_t s_fence; /* epoch put in requests that carry one (0: any) */

/* ---- fixture ---------------------------------------------------------------- */

typedef struct {
    zactor_t *actor;
    bus_client_t *client;
    char ep[TIER_ACTOR_ENDPOINT_MAX];
    tier_actor_config_t cfg;
} fx_t;

typedef struct {
    uint64_t slot;
    uint8_t key[16];
    size_t size;
    uint8_t *bytes;
    uint64_t sum;
} blk_t;

static tier_actor_config_t s_cfg(const char *kind)
{
    tier_actor_config_t c;
    memset(&c, 0, sizeof c);
    int seq = s_seq++;
    snprintf(c.tier.name, sizeof c.tier.name, "%s%d", kind, seq);
    snprintf(c.tier.kind, sizeof c.tier.kind, "%s", kind);
    c.tier.capacity = CAP;
    c.tier.slot_size = SLOT;
    if (strcmp(kind, "host") == 0)
        snprintf(c.tier.path, sizeof c.tier.path, "/kvt-ta-%d-%d", (int)getpid(), seq);
    else if (strcmp(kind, "nvme") == 0) {
        snprintf(c.tier.path, sizeof c.tier.path, "%s/nvme-%d.dat", s_dir, seq);
        (void)tier_config_set(&c.tier, "queue_depth", "8");
    } else if (strcmp(kind, "gpu") == 0) { /* on the fake CUDA runtime (tests/CMakeLists.txt) */
        (void)tier_config_set(&c.tier, "cuda_library", KVT_FAKECUDA_SO);
        (void)tier_config_set(&c.tier, "staging_bytes", "65536");
    }
    c.tier_id = 3;
    c.endpoint = "tcp://127.0.0.1:*";
    return c;
}

static void s_start(fx_t *fx, const tier_actor_config_t *cfg)
{
    memset(fx, 0, sizeof *fx);
    fx->cfg = *cfg;
    fx->actor = tier_actor_new(cfg);
    assert_non_null(fx->actor);
    assert_int_equal(tier_actor_endpoint(fx->actor, fx->ep, sizeof fx->ep), 0);
    bus_client_config_t cc = {.name = "test", .default_timeout_ms = T_MS};
    fx->client = bus_client_new(fx->ep, &cc);
    assert_non_null(fx->client);
}

static void s_stop(fx_t *fx)
{
    bus_client_destroy(&fx->client);
    zactor_destroy(&fx->actor);
}

static void s_fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1u);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
}

static void s_key(uint8_t key[16], uint32_t seed)
{
    s_fill(key, 16, seed * 7919u + 11u);
}

static void s_blk(blk_t *b, uint64_t slot, size_t size, uint32_t seed)
{
    b->slot = slot;
    b->size = size;
    b->bytes = malloc(size ? size : 1);
    assert_non_null(b->bytes);
    s_fill(b->bytes, size, seed);
    s_key(b->key, seed);
    struct iovec iov = {b->bytes, size};
    b->sum = tier_checksum(&iov, 1);
}

static void s_blks_free(blk_t *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        free(b[i].bytes);
        b[i].bytes = NULL;
    }
}

/* ---- requests through a bus_client -------------------------------------------- */

static int s_call(fx_t *fx, kvtier_Envelope *req, bus_arrays_t *arr, const bus_payload_t *pl,
                  uint32_t npl, kvtier_Envelope *rep, bus_arrays_t *rep_arr, zmsg_t **payload,
                  kvtier_Status *st)
{
    memset(rep, 0, sizeof *rep);
    return bus_client_call(fx->client, req, arr, pl, npl, T_MS, rep, rep_arr, payload, st);
}

/* WriteSlots: frames[i * segs + s] of sizes[...] go to slots[i]. */
static int s_write(fx_t *fx, const uint64_t *slots, uint32_t n, uint32_t segs,
                   uint8_t *const *frames, const uint64_t *sizes, uint32_t *written,
                   kvtier_Status *st)
{
    static kvtier_Envelope req, rep;
    bus_payload_t pl[MAXN * 4];
    uint64_t sz[MAXN * 4];
    assert_true(n * segs <= MAXN * 4);
    for (uint32_t f = 0; f < n * segs; f++) {
        pl[f] = (bus_payload_t){frames[f], sizes[f], NULL, NULL};
        sz[f] = sizes[f];
    }
    bus_env_init(&req, kvtier_Envelope_write_slots_req_tag, "test");
    req.body.write_slots_req.tier_id = fx->cfg.tier_id;
    req.body.write_slots_req.segments = segs;
    req.body.write_slots_req.epoch = s_fence;
    bus_arrays_t arr = {.slots = {(uint64_t *)slots, n, n}, .sizes = {sz, n * segs, n * segs}};
    int rc = s_call(fx, &req, &arr, pl, n * segs, &rep, NULL, NULL, st);
    if (written)
        *written = rep.which_body == kvtier_Envelope_write_slots_rep_tag
                       ? rep.body.write_slots_rep.written
                       : 0;
    return rc;
}

static int s_put(fx_t *fx, const char *instance, kvtier_LocationState state, uint64_t deadline,
                 const uint64_t *slots, uint8_t (*keys)[16], const uint64_t *sizes,
                 const uint64_t *sums, uint32_t n, uint32_t *written, kvtier_Status *st)
{
    static kvtier_Envelope req, rep;
    bus_env_init(&req, kvtier_Envelope_put_header_req_tag, "test");
    kvtier_PutHeaderRequest *p = &req.body.put_header_req;
    p->tier_id = fx->cfg.tier_id;
    snprintf(p->instance_id, sizeof p->instance_id, "%s", instance);
    p->state = state;
    p->ttl_deadline_ms = deadline;
    p->epoch = s_fence;
    uint32_t nsum = sums ? n : 0;
    bus_arrays_t arr = {.slots = {(uint64_t *)slots, n, n},
                        .keys = {keys, n, n},
                        .sizes = {(uint64_t *)sizes, n, n},
                        .checksums = {(uint64_t *)sums, nsum, nsum}};
    int rc = s_call(fx, &req, &arr, NULL, 0, &rep, NULL, NULL, st);
    if (written)
        *written = rep.which_body == kvtier_Envelope_put_header_rep_tag
                       ? rep.body.put_header_rep.written
                       : 0;
    return rc;
}

/* Writes each block (one frame) and commits its header (SERVING, INST). */
static void s_store(fx_t *fx, blk_t *b, uint32_t n, bool with_sums)
{
    uint64_t slots[MAXN], sizes[MAXN], sums[MAXN];
    uint8_t keys[MAXN][16];
    uint8_t *frames[MAXN];
    kvtier_Status st;
    uint32_t written = 0;
    for (uint32_t i = 0; i < n; i++) {
        slots[i] = b[i].slot;
        sizes[i] = b[i].size;
        sums[i] = b[i].sum;
        frames[i] = b[i].bytes;
        memcpy(keys[i], b[i].key, 16);
    }
    assert_int_equal(s_write(fx, slots, n, 1, frames, sizes, &written, &st), 0);
    assert_int_equal(written, n);
    assert_int_equal(s_put(fx, INST, kvtier_LocationState_LOCATION_SERVING, 0, slots, keys, sizes,
                           with_sums ? sums : NULL, n, &written, &st),
                     0);
    assert_int_equal(written, n);
}

/* ReadSlots of one slot; *payload gets the frames. */
static int s_read(fx_t *fx, uint64_t slot, const uint8_t *key, uint32_t segs, const uint64_t *sizes,
                  zmsg_t **payload, kvtier_Status *st)
{
    static kvtier_Envelope req, rep;
    uint64_t slots[1] = {slot}, rsz[MAXN];
    uint8_t keys[1][16];
    uint32_t nsz = sizes ? segs : 0;
    if (key)
        memcpy(keys[0], key, 16);
    bus_env_init(&req, kvtier_Envelope_read_slots_req_tag, "test");
    req.body.read_slots_req.tier_id = fx->cfg.tier_id;
    req.body.read_slots_req.segments = segs;
    req.body.read_slots_req.epoch = s_fence;
    bus_arrays_t arr = {.slots = {slots, 1, 1},
                        .sizes = {(uint64_t *)sizes, nsz, nsz},
                        .keys = {keys, key ? 1u : 0u, 1}};
    bus_arrays_t rarr = {.sizes = {rsz, 0, MAXN}};
    return s_call(fx, &req, &arr, NULL, 0, &rep, &rarr, payload, st);
}

/* Every block reads back byte-exact (asked by key). */
static void s_expect_intact(fx_t *fx, const blk_t *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        zmsg_t *pl = NULL;
        kvtier_Status st;
        int rc = s_read(fx, b[i].slot, b[i].key, 1, NULL, &pl, &st);
        if (rc != 0)
            fail_msg("slot %" PRIu64 ": %s", b[i].slot, st.message);
        assert_non_null(pl);
        assert_int_equal(zmsg_size(pl), 1);
        zframe_t *f = zmsg_first(pl);
        assert_int_equal(zframe_size(f), b[i].size);
        assert_memory_equal(zframe_data(f), b[i].bytes, b[i].size);
        zmsg_destroy(&pl);
    }
}

static int s_probe(fx_t *fx, const uint64_t *slots, uint8_t (*keys)[16], uint32_t n, bool *present,
                   kvtier_Status *st)
{
    static kvtier_Envelope req, rep;
    bus_env_init(&req, kvtier_Envelope_probe_req_tag, "test");
    req.body.probe_req.tier_id = fx->cfg.tier_id;
    bus_arrays_t arr = {.slots = {(uint64_t *)slots, n, n}, .keys = {keys, keys ? n : 0, n}};
    bus_arrays_t rarr = {.mask = {present, 0, n}};
    int rc = s_call(fx, &req, &arr, NULL, 0, &rep, &rarr, NULL, st);
    if (rc == 0)
        assert_int_equal(rarr.mask.n, n);
    return rc;
}

static bool s_present(fx_t *fx, uint64_t slot, const uint8_t *key)
{
    uint8_t keys[1][16];
    bool present[1] = {false};
    kvtier_Status st;
    if (key)
        memcpy(keys[0], key, 16);
    assert_int_equal(s_probe(fx, &slot, key ? keys : NULL, 1, present, &st), 0);
    return present[0];
}

static int s_delete(fx_t *fx, const uint64_t *slots, uint8_t (*keys)[16], uint32_t n,
                    uint32_t *deleted, kvtier_Status *st)
{
    static kvtier_Envelope req, rep;
    bus_env_init(&req, kvtier_Envelope_delete_slots_req_tag, "test");
    req.body.delete_slots_req.tier_id = fx->cfg.tier_id;
    req.body.delete_slots_req.epoch = s_fence;
    bus_arrays_t arr = {.slots = {(uint64_t *)slots, n, n}, .keys = {keys, keys ? n : 0, n}};
    int rc = s_call(fx, &req, &arr, NULL, 0, &rep, NULL, NULL, st);
    if (deleted)
        *deleted = rep.which_body == kvtier_Envelope_delete_slots_rep_tag
                       ? rep.body.delete_slots_rep.deleted
                       : 0;
    return rc;
}

/* Every page with max_entries `max` until done; entries into out (at most CAP). */
static uint32_t s_inventory(fx_t *fx, uint32_t max, kvtier_InventoryEntry *out,
                            kvtier_TierInfo *info)
{
    static kvtier_Envelope req, rep;
    uint64_t cursor = 0;
    uint32_t n = 0, pages = 0;
    kvtier_Status st;
    while (true) {
        bus_env_init(&req, kvtier_Envelope_inventory_req_tag, "test");
        req.body.inventory_req.tier_id = fx->cfg.tier_id;
        req.body.inventory_req.cursor = cursor;
        req.body.inventory_req.max_entries = max;
        int rc = s_call(fx, &req, NULL, NULL, 0, &rep, NULL, NULL, &st);
        if (rc != 0)
            fail_msg("inventory: %s", st.message);
        const kvtier_InventoryReply *r = &rep.body.inventory_rep;
        assert_true(max == 0 || r->entries_count <= max);
        for (pb_size_t i = 0; i < r->entries_count; i++) {
            assert_true(n < CAP);
            out[n++] = r->entries[i];
        }
        if (info && pages == 0)
            *info = r->tier;
        pages++;
        assert_true(pages <= CAP + 1);
        if (r->done)
            break;
        assert_true(r->next_cursor > cursor);
        cursor = r->next_cursor;
    }
    return n;
}

static const kvtier_InventoryEntry *s_find(const kvtier_InventoryEntry *e, uint32_t n,
                                           uint64_t slot)
{
    for (uint32_t i = 0; i < n; i++)
        if (e[i].slot == slot)
            return &e[i];
    return NULL;
}

static bool s_listed(fx_t *fx, uint64_t slot)
{
    kvtier_InventoryEntry e[CAP];
    uint32_t n = s_inventory(fx, 0, e, NULL);
    return s_find(e, n, slot) != NULL;
}

/* ---- raw requests (no bus_client): exactly the bytes given -------------------- */

/* Sends msg (destroyed) on a fresh DEALER and returns the reply's status code;
 * st gets the reply's status. */
static int s_raw(fx_t *fx, zmsg_t **msg, kvtier_Status *st)
{
    zsock_t *d = zsock_new_dealer(fx->ep);
    assert_non_null(d);
    assert_int_equal(zmsg_send(msg, d), 0);
    zpoller_t *p = zpoller_new(d, NULL);
    assert_ptr_equal(zpoller_wait(p, T_MS), d);
    zpoller_destroy(&p);
    zmsg_t *rep = zmsg_recv(d);
    assert_non_null(rep);
    static kvtier_Envelope env;
    kvtier_Status dst;
    assert_int_equal(bus_msg_decode(rep, BUS_DIR_REPLY, &env, NULL, &dst), 0);
    zmsg_destroy(&rep);
    zsock_destroy(&d);
    assert_true(env.has_status);
    *st = env.status;
    return (int)env.status.code;
}

static zmsg_t *s_raw_bytes(const void *p, size_t n)
{
    zmsg_t *m = zmsg_new();
    zmsg_addmem(m, p, n);
    return m;
}

/* ---- tests: round trips ------------------------------------------------------- */

/* DESIGN §5, §7: block bytes travel as payload frames and come back byte-exact
 * (on nvme through the O_DIRECT file and io_uring). */
static void test_write_read_round_trip_through_frames(void **state)
{
    const char *kind = *state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg(kind);
    s_start(&fx, &cfg);
    blk_t b[4];
    s_blk(&b[0], 0, SLOT, 1);
    s_blk(&b[1], 7, 1000, 2);
    s_blk(&b[2], CAP - 1, SLOT - 4095, 3);
    s_blk(&b[3], 3, 4096, 4);
    s_store(&fx, b, 4, true);
    s_expect_intact(&fx, b, 4);
    /* and without keys: as stored */
    zmsg_t *pl = NULL;
    kvtier_Status st;
    assert_int_equal(s_read(&fx, 7, NULL, 1, NULL, &pl, &st), 0);
    assert_int_equal(zframe_size(zmsg_first(pl)), 1000);
    assert_memory_equal(zframe_data(zmsg_first(pl)), b[1].bytes, 1000);
    zmsg_destroy(&pl);
    s_blks_free(b, 4);
    s_stop(&fx);
}

/* Data-plane rule: a multi-segment block is one slot written from consecutive
 * frames; it reads back per segment or whole. */
static void test_multi_segment_block_is_one_slot(void **state)
{
    const char *kind = *state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg(kind);
    s_start(&fx, &cfg);
    enum { SEGS = 3, N = 2 };
    uint64_t seg_sizes[SEGS] = {1000, 5000, 20000};
    uint64_t slots[N] = {2, 9}, sizes[N * SEGS], totals[N];
    uint8_t *frames[N * SEGS];
    uint8_t keys[N][16];
    for (uint32_t i = 0; i < N; i++) {
        totals[i] = 0;
        s_key(keys[i], 100 + i);
        for (uint32_t s = 0; s < SEGS; s++) {
            uint32_t f = i * SEGS + s;
            sizes[f] = seg_sizes[s];
            frames[f] = malloc(seg_sizes[s]);
            s_fill(frames[f], seg_sizes[s], 50 + f);
            totals[i] += seg_sizes[s];
        }
    }
    uint32_t written = 0;
    kvtier_Status st;
    assert_int_equal(s_write(&fx, slots, N, SEGS, frames, sizes, &written, &st), 0);
    assert_int_equal(written, N);
    /* no checksums given: the tier computes them over the segments in order */
    assert_int_equal(s_put(&fx, INST, kvtier_LocationState_LOCATION_SERVING, 0, slots, keys, totals,
                           NULL, N, &written, &st),
                     0);
    kvtier_InventoryEntry e[CAP];
    uint32_t ne = s_inventory(&fx, 0, e, NULL);
    assert_int_equal(ne, N);
    for (uint32_t i = 0; i < N; i++) {
        struct iovec iov[SEGS];
        for (uint32_t s = 0; s < SEGS; s++)
            iov[s] = (struct iovec){frames[i * SEGS + s], seg_sizes[s]};
        const kvtier_InventoryEntry *en = s_find(e, ne, slots[i]);
        assert_non_null(en);
        assert_int_equal(en->checksum, tier_checksum(iov, SEGS));
        assert_int_equal(en->size, totals[i]);
        /* segment by segment */
        zmsg_t *pl = NULL;
        assert_int_equal(s_read(&fx, slots[i], keys[i], SEGS, seg_sizes, &pl, &st), 0);
        assert_int_equal(zmsg_size(pl), SEGS);
        zframe_t *f = zmsg_first(pl);
        for (uint32_t s = 0; s < SEGS; s++, f = zmsg_next(pl)) {
            assert_int_equal(zframe_size(f), seg_sizes[s]);
            assert_memory_equal(zframe_data(f), frames[i * SEGS + s], seg_sizes[s]);
        }
        zmsg_destroy(&pl);
        /* and whole: the concatenation */
        assert_int_equal(s_read(&fx, slots[i], keys[i], 1, NULL, &pl, &st), 0);
        f = zmsg_first(pl);
        assert_int_equal(zframe_size(f), totals[i]);
        const uint8_t *d = zframe_data(f);
        for (uint32_t s = 0; s < SEGS; s++) {
            assert_memory_equal(d, frames[i * SEGS + s], seg_sizes[s]);
            d += seg_sizes[s];
        }
        zmsg_destroy(&pl);
    }
    /* sizes that do not add up to the block, or segments without sizes */
    uint64_t bad[SEGS] = {1000, 5000, 19999};
    assert_int_not_equal(s_read(&fx, slots[0], keys[0], SEGS, bad, NULL, &st), 0);
    assert_int_equal(st.code, ST_INVALID);
    assert_int_not_equal(s_read(&fx, slots[0], keys[0], SEGS, NULL, NULL, &st), 0);
    assert_int_equal(st.code, ST_INVALID);
    /* sizes whose 64-bit sum wraps around to the block size: refused, nothing read
     * past the block (found in review: it crashed the actor) */
    uint64_t wrap[SEGS] = {totals[0] + (1ull << 30), UINT64_MAX - (1ull << 30) + 1, 0};
    assert_int_not_equal(s_read(&fx, slots[0], keys[0], SEGS, wrap, NULL, &st), 0);
    assert_int_equal(st.code, ST_INVALID);
    zmsg_t *again = NULL;
    assert_int_equal(s_read(&fx, slots[0], keys[0], 1, NULL, &again, &st), 0);
    assert_int_equal(zframe_size(zmsg_first(again)), totals[0]);
    zmsg_destroy(&again);
    for (uint32_t f = 0; f < N * SEGS; f++)
        free(frames[f]);
    s_stop(&fx);
}

/* ---- tests: headers and inventory --------------------------------------------- */

/* DESIGN §4: after PutHeader, Inventory lists exactly the committed blocks with
 * key, instance, size, checksum, deadline (paged, slot order). */
static void test_inventory_lists_exactly_the_committed_blocks(void **state)
{
    const char *kind = *state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg(kind);
    s_start(&fx, &cfg);
    enum { N = 5 };
    uint64_t slots[N] = {1, 4, 5, 9, 15};
    blk_t b[N];
    for (uint32_t i = 0; i < N; i++)
        s_blk(&b[i], slots[i], 3000 + i * 100, 200 + i);
    /* bytes only (no header) at slot 7: not a block */
    blk_t loose;
    s_blk(&loose, 7, 500, 299);
    uint64_t sz = loose.size;
    kvtier_Status st;
    assert_int_equal(s_write(&fx, &loose.slot, 1, 1, &loose.bytes, &sz, NULL, &st), 0);
    uint64_t sizes[N], sums[N];
    uint8_t keys[N][16];
    uint8_t *frames[N];
    for (uint32_t i = 0; i < N; i++) {
        sizes[i] = b[i].size;
        sums[i] = b[i].sum;
        frames[i] = b[i].bytes;
        memcpy(keys[i], b[i].key, 16);
    }
    uint32_t written;
    assert_int_equal(s_write(&fx, slots, N, 1, frames, sizes, &written, &st), 0);
    assert_int_equal(s_put(&fx, INST, kvtier_LocationState_LOCATION_SERVING, 1234567890123ull,
                           slots, keys, sizes, sums, N, &written, &st),
                     0);
    assert_int_equal(written, N);

    kvtier_InventoryEntry e[CAP];
    kvtier_TierInfo info;
    uint32_t n = s_inventory(&fx, 2, e, &info); /* pages of 2 */
    assert_int_equal(n, N);
    for (uint32_t i = 0; i < N; i++) {
        assert_int_equal(e[i].slot, slots[i]); /* slot order */
        assert_memory_equal(e[i].key, b[i].key, 16);
        assert_string_equal(e[i].instance_id, INST);
        assert_int_equal(e[i].size, b[i].size);
        assert_int_equal(e[i].checksum, b[i].sum);
        assert_int_equal(e[i].ttl_deadline_ms, 1234567890123ull);
        assert_int_equal(e[i].state, kvtier_LocationState_LOCATION_SERVING);
    }
    assert_int_equal(info.tier_id, cfg.tier_id);
    assert_string_equal(info.name, cfg.tier.name);
    assert_int_equal(info.kind, tier_kind_wire(kind)); /* fake: UNSPECIFIED, named below */
    assert_string_equal(info.kind_name, kind);
    assert_string_equal(info.endpoint, fx.ep);
    assert_int_equal(info.capacity_slots, CAP);
    assert_int_equal(info.slot_bytes, SLOT);
    assert_int_equal(info.used_slots, N);
    assert_int_equal(info.epoch, tier_actor_epoch(fx.actor));
    assert_string_equal(info.shm, strcmp(kind, "host") == 0 ? cfg.tier.path : "");
    assert_true(info.up);
    assert_int_equal(s_inventory(&fx, 0, e, NULL), N); /* 0: whole pages */
    s_blks_free(b, N);
    s_blks_free(&loose, 1);
    s_stop(&fx);
}

/* Wave-2 rule: a write marks the slot WRITING first, so a SERVING slot being
 * rewritten leaves the inventory (and is never served) until its new header. */
static void test_write_marks_slot_writing_until_new_header(void **state)
{
    const char *kind = *state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg(kind);
    s_start(&fx, &cfg);
    blk_t a, b;
    s_blk(&a, 2, 8000, 300);
    s_blk(&b, 2, 9000, 301);
    s_store(&fx, &a, 1, true);
    assert_true(s_listed(&fx, 2));
    assert_true(s_present(&fx, 2, a.key));
    /* a new write over the SERVING slot: the old block is gone at once */
    uint64_t sz = b.size;
    kvtier_Status st;
    assert_int_equal(s_write(&fx, &b.slot, 1, 1, &b.bytes, &sz, NULL, &st), 0);
    assert_false(s_listed(&fx, 2));
    assert_false(s_present(&fx, 2, a.key));
    assert_false(s_present(&fx, 2, NULL));
    assert_int_not_equal(s_read(&fx, 2, NULL, 1, NULL, NULL, &st), 0);
    assert_int_equal(st.code, ST_NOT_FOUND);
    assert_non_null(strstr(st.message, "WRITING"));
    /* a late key-qualified delete of the old block does not empty the new write */
    uint8_t keys[1][16];
    memcpy(keys[0], a.key, 16);
    uint32_t deleted = 9;
    assert_int_equal(s_delete(&fx, &b.slot, keys, 1, &deleted, &st), 0);
    assert_int_equal(deleted, 0);
    /* its header commits the new block */
    memcpy(keys[0], b.key, 16);
    assert_int_equal(s_put(&fx, INST, kvtier_LocationState_LOCATION_SERVING, 0, &b.slot, keys, &sz,
                           &b.sum, 1, NULL, &st),
                     0);
    kvtier_InventoryEntry e[CAP];
    uint32_t n = s_inventory(&fx, 0, e, NULL);
    assert_int_equal(n, 1);
    assert_memory_equal(e[0].key, b.key, 16);
    s_expect_intact(&fx, &b, 1);
    s_blks_free(&a, 1);
    s_blks_free(&b, 1);
    s_stop(&fx);
}

/* DESIGN §6 GC: Probe says whether the tier still holds a block (key must match). */
static void test_probe_reports_serving_blocks_with_matching_key(void **state)
{
    const char *kind = *state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg(kind);
    s_start(&fx, &cfg);
    blk_t b[2];
    s_blk(&b[0], 1, 100, 400);
    s_blk(&b[1], 2, 200, 401);
    s_store(&fx, b, 2, true);
    uint64_t slots[4] = {1, 2, 3, 1};
    uint8_t keys[4][16];
    memcpy(keys[0], b[0].key, 16);
    memcpy(keys[1], b[0].key, 16); /* wrong key for slot 2 */
    memcpy(keys[2], b[1].key, 16);
    memcpy(keys[3], b[0].key, 16);
    bool present[4];
    kvtier_Status st;
    assert_int_equal(s_probe(&fx, slots, keys, 4, present, &st), 0);
    assert_true(present[0]);
    assert_false(present[1]);
    assert_false(present[2]);
    assert_true(present[3]);
    assert_int_equal(s_probe(&fx, slots, NULL, 4, present, &st), 0);
    assert_true(present[0] && present[1] && !present[2] && present[3]);
    s_blks_free(b, 2);
    s_stop(&fx);
}

/* DeleteSlots empties a slot, only where the key matches when keys are given. */
static void test_delete_empties_slots_matching_key(void **state)
{
    const char *kind = *state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg(kind);
    s_start(&fx, &cfg);
    blk_t b[3];
    for (uint32_t i = 0; i < 3; i++)
        s_blk(&b[i], 4 + i, 4096, 500 + i);
    s_store(&fx, b, 3, true);
    uint8_t keys[1][16];
    uint32_t deleted = 9;
    kvtier_Status st;
    memcpy(keys[0], b[1].key, 16); /* slot 4 holds b[0] */
    assert_int_equal(s_delete(&fx, &b[0].slot, keys, 1, &deleted, &st), 0);
    assert_int_equal(deleted, 0);
    assert_true(s_present(&fx, 4, b[0].key));
    memcpy(keys[0], b[0].key, 16);
    assert_int_equal(s_delete(&fx, &b[0].slot, keys, 1, &deleted, &st), 0);
    assert_int_equal(deleted, 1);
    assert_false(s_present(&fx, 4, NULL));
    assert_int_not_equal(s_read(&fx, 4, b[0].key, 1, NULL, NULL, &st), 0);
    assert_int_equal(st.code, ST_NOT_FOUND);
    /* without keys; an empty slot is not counted */
    uint64_t slots[2] = {5, 4};
    assert_int_equal(s_delete(&fx, slots, NULL, 2, &deleted, &st), 0);
    assert_int_equal(deleted, 1);
    assert_false(s_present(&fx, 5, NULL));
    kvtier_InventoryEntry e[CAP];
    assert_int_equal(s_inventory(&fx, 0, e, NULL), 1);
    assert_int_equal(e[0].slot, 6);
    s_expect_intact(&fx, &b[2], 1);
    s_blks_free(b, 3);
    s_stop(&fx);
}

/* ---- tests: bad input ----------------------------------------------------------- */

static void s_expect(int rc, const kvtier_Status *st, int code, const char *needle)
{
    if (rc == 0 || (int)st->code != code || (needle && !strstr(st->message, needle)))
        fail_msg("expected %d \"%s\", got rc %d code %d \"%s\"", code, needle ? needle : "", rc,
                 (int)st->code, st->message);
}

/* A PutHeader rewrite (a touch's new deadline) changes only headers still
 * SERVING with the request's key and checksum, and only their deadline; a slot
 * holding another key, another checksum, or nothing is left as it was; a rewrite
 * of any state but SERVING is refused. */
static void test_put_header_rewrite_changes_only_matching_headers(void **state)
{
    const char *kind = *state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg(kind);
    s_start(&fx, &cfg);
    blk_t b[3];
    for (uint32_t i = 0; i < 3; i++)
        s_blk(&b[i], 4 + i, 4096, 700 + i);
    s_store(&fx, b, 3, true);
    uint64_t slots[4] = {4, 5, 6, 7}, sizes[4] = {4096, 4096, 4096, 4096};
    uint64_t sums[4] = {b[0].sum, b[1].sum, b[2].sum + 1, 0};
    uint8_t keys[4][16];
    memcpy(keys[0], b[0].key, 16);
    memcpy(keys[1], b[0].key, 16); /* slot 5 holds b[1] */
    memcpy(keys[2], b[2].key, 16);
    memset(keys[3], 7, 16); /* slot 7 is empty */
    static kvtier_Envelope req, rep;
    bus_env_init(&req, kvtier_Envelope_put_header_req_tag, "test");
    kvtier_PutHeaderRequest *p = &req.body.put_header_req;
    p->tier_id = fx.cfg.tier_id;
    snprintf(p->instance_id, sizeof p->instance_id, "%s", INST);
    p->state = kvtier_LocationState_LOCATION_SERVING;
    p->ttl_deadline_ms = 4102444800000ull; /* 2100-01-01 */
    p->epoch = s_fence;
    p->rewrite = true;
    bus_arrays_t arr = {.slots = {slots, 4, 4},
                        .keys = {keys, 4, 4},
                        .sizes = {sizes, 4, 4},
                        .checksums = {sums, 4, 4}};
    kvtier_Status st;
    assert_int_equal(s_call(&fx, &req, &arr, NULL, 0, &rep, NULL, NULL, &st), 0);
    assert_int_equal(rep.body.put_header_rep.written, 1);
    kvtier_InventoryEntry e[CAP];
    assert_int_equal(s_inventory(&fx, 0, e, NULL), 3);
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(e[i].ttl_deadline_ms, e[i].slot == 4 ? 4102444800000ull : 0);
    s_expect_intact(&fx, b, 3);
    /* a rewrite of another state */
    p->state = kvtier_LocationState_LOCATION_WRITING;
    s_expect(s_call(&fx, &req, &arr, NULL, 0, &rep, NULL, NULL, &st), &st, ST_INVALID,
             "rewrite applies to SERVING headers only");
    s_expect_intact(&fx, b, 3);
    s_blks_free(b, 3);
    s_stop(&fx);
}

/* Requests through the client that must be refused whole. */
static void s_bad_requests(fx_t *fx, blk_t *b)
{
    kvtier_Status st;
    uint32_t written = 9;
    uint64_t slots[2] = {b[0].slot, CAP}, sizes[2] = {100, 100};
    uint8_t buf[SLOT + 1];
    memset(buf, 0xAB, sizeof buf);
    uint8_t *frames[2] = {buf, buf};
    uint8_t keys[2][16] = {{0}};
    char want[64];
    snprintf(want, sizeof want, "slot %u out of range (capacity %u)", CAP, CAP);

    /* slot out of range (after a stored one: nothing may be written) */
    s_expect(s_write(fx, slots, 2, 1, frames, sizes, &written, &st), &st, ST_INVALID, want);
    assert_int_equal(written, 0);
    s_expect(s_read(fx, CAP, NULL, 1, NULL, NULL, &st), &st, ST_INVALID, want);
    s_expect(s_put(fx, INST, kvtier_LocationState_LOCATION_SERVING, 0, slots, keys, sizes, NULL, 2,
                   NULL, &st),
             &st, ST_INVALID, want);
    s_expect(s_delete(fx, slots, NULL, 2, NULL, &st), &st, ST_INVALID, want);
    bool present[2];
    s_expect(s_probe(fx, slots, NULL, 2, present, &st), &st, ST_INVALID, want);
    /* a frame larger than a slot */
    uint64_t big = SLOT + 1;
    s_expect(s_write(fx, &b[0].slot, 1, 1, frames, &big, NULL, &st), &st, ST_INVALID,
             "does not fit");
    /* too many segments per slot */
    uint8_t *many[17];
    uint64_t msz[17];
    for (int i = 0; i < 17; i++) {
        many[i] = buf;
        msz[i] = 10;
    }
    s_expect(s_write(fx, &b[0].slot, 1, 17, many, msz, NULL, &st), &st, ST_INVALID, "at most 16");
    /* a state that is not a header state; a key that is not the stored one */
    s_expect(s_put(fx, INST, kvtier_LocationState_LOCATION_STATE_NONE, 0, &b[0].slot, keys, sizes,
                   NULL, 1, NULL, &st),
             &st, ST_INVALID, "DeleteSlots");
    s_expect(s_read(fx, b[0].slot, keys[0], 1, NULL, NULL, &st), &st, ST_NOT_FOUND,
             "another block");
    /* a request for another tier id */
    static kvtier_Envelope req, rep;
    bus_env_init(&req, kvtier_Envelope_probe_req_tag, "test");
    req.body.probe_req.tier_id = fx->cfg.tier_id + 1;
    bus_arrays_t arr = {.slots = {&b[0].slot, 1, 1}};
    s_expect(s_call(fx, &req, &arr, NULL, 0, &rep, NULL, NULL, &st), &st, ST_INVALID, "tier id");
    /* keys that do not match the slot count */
    uint64_t two[2] = {b[0].slot, b[1].slot};
    bus_env_init(&req, kvtier_Envelope_probe_req_tag, "test");
    arr = (bus_arrays_t){.slots = {two, 2, 2}, .keys = {keys, 1, 1}};
    s_expect(s_call(fx, &req, &arr, NULL, 0, &rep, NULL, NULL, &st), &st, ST_INVALID,
             "1 keys for 2 slots");
    /* a copy without a destination (copies: test_tier_actor_copy.c) */
    bus_env_init(&req, kvtier_Envelope_copy_slots_req_tag, "test");
    s_expect(s_call(fx, &req, NULL, NULL, 0, &rep, NULL, NULL, &st), &st, ST_INVALID,
             "destination");
}

/* Raw frames: what a broken or hostile peer could send. */
static void s_bad_raw(fx_t *fx, blk_t *b)
{
    kvtier_Status st;
    /* garbage */
    const uint8_t junk[] = {0xff, 0xff, 0xff, 0x13, 0x37, 0x00, 0x99};
    zmsg_t *m = s_raw_bytes(junk, sizeof junk);
    assert_int_equal(s_raw(fx, &m, &st), ST_INVALID);
    /* an unknown body (field 90, unused in the tier-plane range) with corr_id 5 */
    const uint8_t unknown[] = {0x08, 0x05, 0x18, 0x01, 0xd2, 0x05, 0x00};
    m = s_raw_bytes(unknown, sizeof unknown);
    assert_int_equal(s_raw(fx, &m, &st), ST_INVALID);
    /* a known body that is not tier plane */
    static kvtier_Envelope env;
    bus_env_init(&env, kvtier_Envelope_lookup_req_tag, "raw");
    env.corr_id = 7;
    zframe_t *f0 = NULL;
    assert_int_equal(bus_env_encode(&env, NULL, &f0, &st), 0);
    m = zmsg_new();
    zmsg_append(m, &f0);
    assert_int_equal(s_raw(fx, &m, &st), ST_INVALID);
    assert_non_null(strstr(st.message, "not a tier-plane request"));
    /* WriteSlots declaring two slots with one payload frame */
    uint64_t slots[2] = {b[0].slot, b[1].slot}, sizes[2] = {10, 10};
    bus_arrays_t arr = {.slots = {slots, 2, 2}, .sizes = {sizes, 2, 2}};
    bus_env_init(&env, kvtier_Envelope_write_slots_req_tag, "raw");
    env.corr_id = 8;
    assert_int_equal(bus_env_encode(&env, &arr, &f0, &st), 0);
    m = zmsg_new();
    zmsg_append(m, &f0);
    zmsg_addmem(m, "0123456789", 10);
    assert_int_equal(s_raw(fx, &m, &st), ST_INVALID);
    assert_non_null(strstr(st.message, "payload frames"));
    /* payload on a body that carries none */
    bus_env_init(&env, kvtier_Envelope_inventory_req_tag, "raw");
    assert_int_equal(bus_env_encode(&env, NULL, &f0, &st), 0);
    m = zmsg_new();
    zmsg_append(m, &f0);
    zmsg_addmem(m, "x", 1);
    assert_int_equal(s_raw(fx, &m, &st), ST_INVALID);
}

/* DESIGN §5, issue 3 §5: bad input (out of range, wrong frame counts, oversize
 * frames, unknown bodies, garbage) gets its status and leaves blocks intact. */
static void test_bad_input_gets_status_and_leaves_blocks_intact(void **state)
{
    const char *kind = *state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg(kind);
    s_start(&fx, &cfg);
    blk_t b[3];
    s_blk(&b[0], 0, SLOT, 600);
    s_blk(&b[1], 8, 777, 601);
    s_blk(&b[2], CAP - 1, 4096, 602);
    s_store(&fx, b, 3, true);
    s_bad_requests(&fx, b);
    s_expect_intact(&fx, b, 3);
    s_bad_raw(&fx, b);
    s_expect_intact(&fx, b, 3);
    kvtier_InventoryEntry e[CAP];
    assert_int_equal(s_inventory(&fx, 0, e, NULL), 3);
    tier_actor_stats_t stats;
    assert_int_equal(tier_actor_stats(fx.actor, &stats), 0);
    assert_true(stats.rejected >= 4); /* the raw ones refused by the server */
    assert_true(stats.errors >= 10);
    s_blks_free(b, 3);
    s_stop(&fx);
}

/* STYLE §7: requests over the configured bounds are refused whole. */
static void test_requests_over_bounds_are_refused_whole(void **state)
{
    const char *kind = *state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg(kind);
    cfg.max_slots = 4;
    cfg.max_bytes = 3 * SLOT;
    s_start(&fx, &cfg);
    blk_t b[4];
    for (uint32_t i = 0; i < 4; i++)
        s_blk(&b[i], i, SLOT, 700 + i);
    s_store(&fx, b, 3, true);
    kvtier_Status st;
    uint64_t slots[5] = {0, 1, 2, 3, 4}, sizes[5];
    uint8_t *frames[5];
    for (uint32_t i = 0; i < 5; i++) {
        sizes[i] = SLOT;
        frames[i] = b[i % 4].bytes;
    }
    uint32_t written = 9;
    s_expect(s_write(&fx, slots, 5, 1, frames, sizes, &written, &st), &st, ST_INVALID,
             "the limit is 4");
    assert_int_equal(written, 0);
    s_expect(s_write(&fx, slots, 4, 1, frames, sizes, &written, &st), &st, ST_INVALID,
             "payload bytes");
    assert_int_equal(written, 0);
    bool present[5];
    s_expect(s_probe(&fx, slots, NULL, 5, present, &st), &st, ST_INVALID, "the limit is 4");
    s_expect_intact(&fx, b, 3);
    s_blks_free(b, 4);
    s_stop(&fx);
}

/* Wave-2 schema: a request fenced with another epoch (the actor restarted) is
 * refused UNAVAILABLE and applies nothing; the actor's own epoch or 0 passes. */
static void test_epoch_fence_refuses_requests_for_another_incarnation(void **state)
{
    const char *kind = *state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg(kind);
    s_start(&fx, &cfg);
    uint64_t epoch = tier_actor_epoch(fx.actor);
    blk_t a, b;
    s_blk(&a, 4, 5000, 1600);
    s_blk(&b, 4, 6000, 1601);
    s_fence = epoch;
    s_store(&fx, &a, 1, true);
    s_expect_intact(&fx, &a, 1);
    s_fence = epoch ^ 0x5555;
    kvtier_Status st;
    uint64_t sz = b.size;
    uint32_t n = 9;
    uint8_t keys[1][16];
    memcpy(keys[0], b.key, 16);
    s_expect(s_write(&fx, &b.slot, 1, 1, &b.bytes, &sz, &n, &st), &st, ST_UNAVAILABLE, "restarted");
    assert_int_equal(n, 0);
    s_expect(s_read(&fx, a.slot, a.key, 1, NULL, NULL, &st), &st, ST_UNAVAILABLE, "epoch");
    s_expect(s_put(&fx, INST, kvtier_LocationState_LOCATION_SERVING, 0, &b.slot, keys, &sz, &b.sum,
                   1, NULL, &st),
             &st, ST_UNAVAILABLE, "epoch");
    s_expect(s_delete(&fx, &a.slot, NULL, 1, NULL, &st), &st, ST_UNAVAILABLE, "epoch");
    s_fence = 0;
    s_expect_intact(&fx, &a, 1);
    assert_true(s_present(&fx, a.slot, a.key));
    s_blks_free(&a, 1);
    s_blks_free(&b, 1);
    s_stop(&fx);
}

/* ---- tests: nvme specifics ---------------------------------------------------------- */

static uint64_t s_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Flips bytes of slot `slot` in the file behind the tier's back. */
static void s_corrupt(const char *path, uint64_t slot)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t sb[64];
    assert_int_equal(pread(fd, sb, sizeof sb, 0), (ssize_t)sizeof sb);
    /* layout version 2 (tier_nvme.h): slot i's record at data_off + i * stride,
     * its bytes right after the record's record_bytes */
    uint64_t stride = s_le64(sb + 32), data_off = s_le64(sb + 48);
    uint32_t rec;
    memcpy(&rec, sb + 12, sizeof rec);
    uint8_t junk[64];
    memset(junk, 0x5A, sizeof junk);
    assert_int_equal(pwrite(fd, junk, sizeof junk, (off_t)(data_off + slot * stride + rec + 100)),
                     (ssize_t)sizeof junk);
    assert_int_equal(fsync(fd), 0);
    close(fd);
}

/* nvme rule: a checksum failure is an error status for the request; wrong bytes are
 * never served and the slot is dropped. */
static void test_nvme_checksum_failure_is_an_error_never_wrong_bytes(void **state)
{
    (void)state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg("nvme");
    s_start(&fx, &cfg);
    blk_t b[2];
    s_blk(&b[0], 3, 8192, 800);
    s_blk(&b[1], 4, 8192, 801);
    s_store(&fx, b, 2, true);
    s_corrupt(cfg.tier.path, 3);
    zmsg_t *pl = NULL;
    kvtier_Status st;
    s_expect(s_read(&fx, 3, b[0].key, 1, NULL, &pl, &st), &st, ST_INTERNAL, "checksum");
    assert_null(pl);
    assert_false(s_present(&fx, 3, NULL));
    assert_false(s_listed(&fx, 3));
    s_expect_intact(&fx, &b[1], 1);
    tier_actor_stats_t stats;
    assert_int_equal(tier_actor_stats(fx.actor, &stats), 0);
    assert_int_equal(stats.checksum_failures, 1);
    s_blks_free(b, 2);
    s_stop(&fx);
}

/* tier_nvme.h: a SERVING header needs bytes written through this actor, of the
 * header's size, hashing to the given checksum. */
static void test_nvme_put_header_requires_matching_written_bytes(void **state)
{
    (void)state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg("nvme");
    s_start(&fx, &cfg);
    blk_t b;
    s_blk(&b, 6, 1000, 900);
    uint8_t keys[1][16];
    memcpy(keys[0], b.key, 16);
    uint64_t sz = b.size, wrong_sz = b.size - 1, wrong_sum = b.sum ^ 1;
    kvtier_Status st;
    s_expect(s_put(&fx, INST, kvtier_LocationState_LOCATION_SERVING, 0, &b.slot, keys, &sz, &b.sum,
                   1, NULL, &st),
             &st, ST_NOT_FOUND, "WriteSlots first");
    assert_int_equal(s_write(&fx, &b.slot, 1, 1, &b.bytes, &sz, NULL, &st), 0);
    s_expect(s_put(&fx, INST, kvtier_LocationState_LOCATION_SERVING, 0, &b.slot, keys, &wrong_sz,
                   &b.sum, 1, NULL, &st),
             &st, ST_INVALID, "differs");
    s_expect(s_put(&fx, INST, kvtier_LocationState_LOCATION_SERVING, 0, &b.slot, keys, &sz,
                   &wrong_sum, 1, NULL, &st),
             &st, ST_CONFLICT, "checksum");
    assert_false(s_present(&fx, b.slot, NULL));
    assert_int_equal(s_put(&fx, INST, kvtier_LocationState_LOCATION_SERVING, 0, &b.slot, keys, &sz,
                           &b.sum, 1, NULL, &st),
                     0);
    s_expect_intact(&fx, &b, 1);
    s_blks_free(&b, 1);
    s_stop(&fx);
}

/* DESIGN §4: nvme blocks survive a restart; the new actor has a new epoch and
 * reports instances it has not been told about as "#" + hash. */
static void test_nvme_blocks_survive_restart_with_new_epoch(void **state)
{
    (void)state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg("nvme");
    s_start(&fx, &cfg);
    uint64_t e1 = tier_actor_epoch(fx.actor);
    assert_int_not_equal(e1, 0);
    blk_t b;
    s_blk(&b, 11, 5000, 1000);
    s_store(&fx, &b, 1, true);
    s_stop(&fx);

    s_start(&fx, &cfg);
    assert_int_not_equal(tier_actor_epoch(fx.actor), e1);
    kvtier_InventoryEntry e[CAP];
    assert_int_equal(s_inventory(&fx, 0, e, NULL), 1);
    char want[16];
    snprintf(want, sizeof want, "#%08x", tier_actor_instance_hash(INST));
    assert_string_equal(e[0].instance_id, want);
    assert_int_equal(e[0].checksum, b.sum);
    s_expect_intact(&fx, &b, 1);
    /* told again (a header update of the same block), the name comes back */
    uint8_t keys[1][16];
    memcpy(keys[0], b.key, 16);
    uint64_t sz = b.size;
    kvtier_Status st;
    assert_int_equal(s_put(&fx, INST, kvtier_LocationState_LOCATION_SERVING, 99, &b.slot, keys, &sz,
                           &b.sum, 1, NULL, &st),
                     0);
    assert_int_equal(s_inventory(&fx, 0, e, NULL), 1);
    assert_string_equal(e[0].instance_id, INST);
    assert_int_equal(e[0].ttl_deadline_ms, 99);
    s_blks_free(&b, 1);
    s_stop(&fx);
}

/* ---- tests: host specifics ----------------------------------------------------------- */

/* verify_put: a host header whose checksum does not match the slot bytes is refused. */
static void test_host_verify_put_refuses_checksum_mismatch(void **state)
{
    (void)state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg("host");
    cfg.verify_put = true;
    s_start(&fx, &cfg);
    blk_t b;
    s_blk(&b, 5, 3000, 1100);
    uint64_t sz = b.size, wrong = b.sum + 1;
    uint8_t keys[1][16];
    memcpy(keys[0], b.key, 16);
    kvtier_Status st;
    assert_int_equal(s_write(&fx, &b.slot, 1, 1, &b.bytes, &sz, NULL, &st), 0);
    s_expect(s_put(&fx, INST, kvtier_LocationState_LOCATION_SERVING, 0, &b.slot, keys, &sz, &wrong,
                   1, NULL, &st),
             &st, ST_CONFLICT, "checksum");
    assert_false(s_present(&fx, 5, NULL));
    assert_int_equal(s_put(&fx, INST, kvtier_LocationState_LOCATION_SERVING, 0, &b.slot, keys, &sz,
                           &b.sum, 1, NULL, &st),
                     0);
    s_expect_intact(&fx, &b, 1);
    s_blks_free(&b, 1);
    s_stop(&fx);
}

/* Bytes that arrive over the network (WriteSlots frames) are checked at their
 * SERVING header even without verify_put (issue 12 §4): a checksum that does not
 * match is CONFLICT, "damaged in transit", nothing committed, counted; the right
 * one commits. A header of bytes a same-host writer copied in is not re-hashed
 * (test_host_serving_without_checksum_is_hashed covers the hash when none is given). */
static void test_host_checks_bytes_that_arrived_over_the_network(void **state)
{
    (void)state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg("host");
    assert_false(cfg.verify_put);
    s_start(&fx, &cfg);
    blk_t b;
    s_blk(&b, 6, 3000, 1200);
    uint64_t sz = b.size, wrong = b.sum ^ 1;
    uint8_t keys[1][16];
    memcpy(keys[0], b.key, 16);
    kvtier_Status st;
    assert_int_equal(s_write(&fx, &b.slot, 1, 1, &b.bytes, &sz, NULL, &st), 0);
    s_expect(s_put(&fx, INST, kvtier_LocationState_LOCATION_SERVING, 0, &b.slot, keys, &sz, &wrong,
                   1, NULL, &st),
             &st, ST_CONFLICT, "damaged in transit");
    assert_false(s_present(&fx, 6, NULL));
    tier_actor_stats_t ts;
    assert_int_equal(tier_actor_stats(fx.actor, &ts), 0);
    assert_int_equal(ts.arrivals_verified, 1);
    assert_int_equal(ts.checksum_failures, 1);
    /* sent again (the scheduler's retry after a new write): committed */
    assert_int_equal(s_write(&fx, &b.slot, 1, 1, &b.bytes, &sz, NULL, &st), 0);
    assert_int_equal(s_put(&fx, INST, kvtier_LocationState_LOCATION_SERVING, 0, &b.slot, keys, &sz,
                           &b.sum, 1, NULL, &st),
                     0);
    s_expect_intact(&fx, &b, 1);
    assert_int_equal(tier_actor_stats(fx.actor, &ts), 0);
    assert_int_equal(ts.arrivals_verified, 2);
    assert_int_equal(ts.checksum_failures, 1);
    s_blks_free(&b, 1);
    s_stop(&fx);
}

static int s_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Leaves slot `slot`'s header seqlock odd, as a same-host writer killed inside
 * tier_seg_put_header would (layout: tier_host.h). */
static void s_break_header(const char *shm, uint64_t slot)
{
    int fd = shm_open(shm, O_RDWR, 0);
    assert_true(fd >= 0);
    uint8_t *base = mmap(NULL, 4096 + CAP * 64, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(base != MAP_FAILED);
    uint64_t headers_off;
    memcpy(&headers_off, base + 40, sizeof headers_off);
    assert_int_equal(headers_off, 4096);
    uint32_t *seq = (uint32_t *)(base + headers_off + slot * 64);
    __atomic_store_n(seq, *seq | 1u, __ATOMIC_RELEASE);
    munmap(base, 4096 + CAP * 64);
    close(fd);
}

/* A header a dead writer left mid-update is never served, and an unconditional
 * DeleteSlots repairs it (the slot can be used again). */
static void test_host_delete_repairs_header_left_mid_write(void **state)
{
    (void)state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg("host");
    s_start(&fx, &cfg);
    blk_t b[2];
    s_blk(&b[0], 9, 3000, 1700);
    s_blk(&b[1], 10, 3000, 1701);
    s_store(&fx, b, 2, true);
    s_break_header(cfg.tier.path, 9);
    kvtier_Status st;
    s_expect(s_read(&fx, 9, b[0].key, 1, NULL, NULL, &st), &st, ST_UNAVAILABLE, "busy");
    assert_false(s_present(&fx, 9, NULL));
    assert_false(s_listed(&fx, 9));
    uint8_t keys[1][16];
    memcpy(keys[0], b[0].key, 16);
    s_expect(s_delete(&fx, &b[0].slot, keys, 1, NULL, &st), &st, ST_UNAVAILABLE, "busy");
    uint32_t deleted = 0;
    assert_int_equal(s_delete(&fx, &b[0].slot, NULL, 1, &deleted, &st), 0);
    assert_int_equal(deleted, 1);
    s_store(&fx, b, 1, true);
    s_expect_intact(&fx, b, 2);
    s_blks_free(b, 2);
    s_stop(&fx);
}

/* Two instance ids with the same 32-bit hash are refused rather than confused. */
static void test_instance_hash_collision_is_a_conflict(void **state)
{
    const char *kind = *state;
    enum { N = 300000 };
    uint64_t *h = malloc(N * sizeof *h);
    assert_non_null(h);
    char name[32];
    for (uint32_t i = 0; i < N; i++) {
        snprintf(name, sizeof name, "inst-%u", i);
        h[i] = ((uint64_t)tier_actor_instance_hash(name) << 32) | i;
    }
    qsort(h, N, sizeof *h, s_cmp_u64);
    uint32_t a = UINT32_MAX, b = UINT32_MAX;
    for (uint32_t i = 1; i < N && a == UINT32_MAX; i++)
        if (h[i] >> 32 == h[i - 1] >> 32) {
            a = (uint32_t)h[i - 1];
            b = (uint32_t)h[i];
        }
    free(h);
    assert_int_not_equal(a, UINT32_MAX); /* ~1 - e^-10 likely; deterministic */
    char na[32], nb[32];
    snprintf(na, sizeof na, "inst-%u", a);
    snprintf(nb, sizeof nb, "inst-%u", b);
    assert_int_equal(tier_actor_instance_hash(na), tier_actor_instance_hash(nb));

    fx_t fx;
    tier_actor_config_t cfg = s_cfg(kind);
    s_start(&fx, &cfg);
    blk_t blk;
    s_blk(&blk, 1, 100, 1200);
    uint64_t sz = blk.size;
    uint8_t keys[1][16];
    memcpy(keys[0], blk.key, 16);
    kvtier_Status st;
    assert_int_equal(s_write(&fx, &blk.slot, 1, 1, &blk.bytes, &sz, NULL, &st), 0);
    assert_int_equal(s_put(&fx, na, kvtier_LocationState_LOCATION_SERVING, 0, &blk.slot, keys, &sz,
                           &blk.sum, 1, NULL, &st),
                     0);
    s_expect(s_put(&fx, nb, kvtier_LocationState_LOCATION_SERVING, 0, &blk.slot, keys, &sz,
                   &blk.sum, 1, NULL, &st),
             &st, ST_CONFLICT, "same value");
    kvtier_InventoryEntry e[CAP];
    assert_int_equal(s_inventory(&fx, 0, e, NULL), 1);
    assert_string_equal(e[0].instance_id, na);
    s_blks_free(&blk, 1);
    s_stop(&fx);
}

/* ---- tests: pipe, transports, failed starts ------------------------------------------ */

/* Actor contract: ENDPOINT gives the bound endpoint (ephemeral port resolved),
 * EPOCH the host segment's epoch, STATS the counters. */
static void test_pipe_endpoint_epoch_and_stats(void **state)
{
    (void)state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg("host");
    s_start(&fx, &cfg);
    assert_true(strncmp(fx.ep, "tcp://127.0.0.1:", 16) == 0);
    assert_null(strchr(fx.ep, '*'));
    assert_true(atoi(fx.ep + 16) > 0);
    tier_seg_t *seg = NULL;
    char err[256];
    assert_int_equal(tier_seg_attach(cfg.tier.path, SLOT, CAP, &seg, err, sizeof err), 0);
    assert_int_equal(tier_actor_epoch(fx.actor), tier_seg_epoch(seg));
    /* a same-host client sees what the actor wrote, in place */
    blk_t b;
    s_blk(&b, 12, 2048, 1300);
    s_store(&fx, &b, 1, false);
    assert_true(tier_seg_serving(seg, 12));
    tier_slot_header_t h;
    assert_int_equal(tier_seg_get_header(seg, 12, &h), 0);
    assert_int_equal(h.checksum, b.sum); /* computed by the actor: none was given */
    assert_int_equal(h.instance, tier_actor_instance_hash(INST));
    assert_memory_equal(tier_seg_slot(seg, 12), b.bytes, b.size);
    tier_seg_detach(&seg);
    s_expect_intact(&fx, &b, 1);
    tier_actor_stats_t st;
    assert_int_equal(tier_actor_stats(fx.actor, &st), 0);
    assert_int_equal(st.slots_written, 1);
    assert_int_equal(st.bytes_written, 2048);
    assert_int_equal(st.headers_put, 1);
    assert_int_equal(st.slots_read, 1);
    assert_int_equal(st.bytes_read, 2048);
    assert_int_equal(st.requests, 3);
    assert_int_equal(st.errors, 0);
    assert_int_equal(st.capacity, CAP);
    assert_int_equal(st.used_slots, 1);
    s_blks_free(&b, 1);
    s_stop(&fx);
}

/* DESIGN §3: inproc:// and ipc:// are only configuration. */
static void test_serves_over_inproc_and_ipc(void **state)
{
    (void)state;
    char inproc[64], ipc[192];
    snprintf(inproc, sizeof inproc, "inproc://tier-actor-test-%d", (int)getpid());
    snprintf(ipc, sizeof ipc, "ipc://%s/tier.sock", s_dir);
    const char *eps[2] = {inproc, ipc};
    for (int i = 0; i < 2; i++) {
        fx_t fx;
        tier_actor_config_t cfg = s_cfg(i == 0 ? "host" : "nvme");
        cfg.endpoint = eps[i];
        s_start(&fx, &cfg);
        assert_string_equal(fx.ep, eps[i]);
        blk_t b;
        s_blk(&b, 1, 10000, 1400 + (uint32_t)i);
        s_store(&fx, &b, 1, true);
        s_expect_intact(&fx, &b, 1);
        s_blks_free(&b, 1);
        s_stop(&fx);
    }
}

static bool s_shm_exists(const char *name)
{
    int fd = shm_open(name, O_RDONLY, 0);
    if (fd < 0)
        return false;
    close(fd);
    return true;
}

/* Actor contract: a start that cannot open its tier or bind returns NULL and
 * leaves nothing behind (segment removed, no thread waiting). */
static void test_bad_config_fails_cleanly(void **state)
{
    (void)state;
    tier_actor_config_t cfg = s_cfg("host");
    snprintf(cfg.tier.kind, sizeof cfg.tier.kind, "floppy");
    assert_null(tier_actor_new(&cfg));
    cfg = s_cfg("host");
    snprintf(cfg.tier.path, sizeof cfg.tier.path, "no-leading-slash");
    assert_null(tier_actor_new(&cfg));
    cfg = s_cfg("host");
    cfg.tier.capacity = 0;
    assert_null(tier_actor_new(&cfg));
    cfg = s_cfg("nvme");
    snprintf(cfg.tier.path, sizeof cfg.tier.path, "%s/no/such/dir/f.dat", s_dir);
    assert_null(tier_actor_new(&cfg));
    cfg = s_cfg("host");
    cfg.tier_id = 0;
    assert_null(tier_actor_new(&cfg));
    cfg = s_cfg("host");
    cfg.endpoint = "bogus://nowhere";
    assert_null(tier_actor_new(&cfg));
    assert_false(s_shm_exists(cfg.tier.path)); /* opened, then closed on the bind failure */
    cfg.endpoint = NULL;
    assert_null(tier_actor_new(&cfg));
    assert_null(tier_actor_new(NULL));

    /* an endpoint in use, and a segment owned by a live actor */
    fx_t fx;
    tier_actor_config_t a = s_cfg("host");
    s_start(&fx, &a);
    cfg = s_cfg("host");
    cfg.endpoint = fx.ep;
    assert_null(tier_actor_new(&cfg));
    assert_false(s_shm_exists(cfg.tier.path));
    cfg = s_cfg("host");
    snprintf(cfg.tier.path, sizeof cfg.tier.path, "%s", a.tier.path);
    assert_null(tier_actor_new(&cfg));
    assert_true(s_shm_exists(a.tier.path)); /* the live one keeps it */
    blk_t b;
    s_blk(&b, 0, 64, 1500);
    s_store(&fx, &b, 1, true);
    s_expect_intact(&fx, &b, 1);
    s_blks_free(&b, 1);
    s_stop(&fx);
    assert_false(s_shm_exists(a.tier.path));
}

/* ---- main ------------------------------------------------------------------------------ */

static int s_group_setup(void **state)
{
    (void)state;
    if (tier_register(&tier_fake_ops) < 0)
        return -1;
    snprintf(s_dir, sizeof s_dir, "/tmp/kvt-tier-actor-XXXXXX");
    return mkdtemp(s_dir) ? 0 : -1;
}

static int s_group_teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* One Inventory page of records over [cursor, end) (end 0: the tier's end), at
 * most max; the records into rec (CAP of them at most). The reply's status code. */
static int s_records_page(fx_t *fx, uint64_t cursor, uint64_t end, uint32_t max,
                          bus_inv_record_t *rec, uint32_t *n, kvtier_InventoryReply *out,
                          kvtier_Status *st)
{
    static kvtier_Envelope req, rep;
    static uint8_t buf[(CAP + 1) * BUS_INVENTORY_RECORD_BYTES];
    bus_env_init(&req, kvtier_Envelope_inventory_req_tag, "test");
    req.body.inventory_req.tier_id = fx->cfg.tier_id;
    req.body.inventory_req.cursor = cursor;
    req.body.inventory_req.end = end;
    req.body.inventory_req.max_entries = max;
    req.body.inventory_req.records = true;
    bus_arrays_t ra = {.payload = {.data = buf, .cap = sizeof buf}};
    int rc = s_call(fx, &req, NULL, NULL, 0, &rep, &ra, NULL, st);
    *n = 0;
    if (rc != 0)
        return (int)st->code;
    *out = rep.body.inventory_rep;
    assert_int_equal(out->entries_count, 0); /* records instead */
    assert_int_equal(bus_inv_records_count(ra.payload.len, CAP, n, st), 0);
    for (uint32_t i = 0; i < *n; i++)
        bus_inv_record_get(buf, i, &rec[i]);
    return 0;
}

/* Per-instance isolation (meta_keys_only): an Inventory lists every instance's
 * keys, so a connection without one of the allowed CURVE keys (here: no CURVE at
 * all) is refused, naming why; other requests are not affected; too many keys is
 * a start error. (test_curve.sh runs the keyed case: the coordinators' key served.) */
static void test_inventory_only_for_meta_keys(void **state)
{
    (void)state;
    static const char keys[2][BUS_CURVE_KEY_TXT] = {"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7",
                                                    "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID"};
    fx_t fx;
    tier_actor_config_t cfg = s_cfg("host");
    cfg.meta_keys_only = true;
    cfg.n_meta_keys = 2;
    cfg.meta_keys = keys;
    s_start(&fx, &cfg);
    bus_inv_record_t rec[4];
    uint32_t n = 0;
    kvtier_InventoryReply out;
    kvtier_Status st;
    assert_int_equal(s_records_page(&fx, 0, 0, 4, rec, &n, &out, &st),
                     kvtier_StatusCode_STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(st.message, "only the coordinators and keys granted"));
    assert_non_null(strstr(st.message, "not a CURVE connection"));
    assert_int_equal(n, 0);
    s_stop(&fx);

    cfg = s_cfg("host");
    cfg.meta_keys_only = true;
    cfg.n_meta_keys = TIER_ACTOR_MAX_META_KEYS + 1;
    cfg.meta_keys = keys; /* refused on the count, before it is read */
    assert_null(tier_actor_new(&cfg));
}

/* Issue 13 §5: records carry what entries carry (the instance as its slot-header
 * number), a window [cursor, end) is never left, next_cursor / done say where the
 * window goes on; a page of max records ends at the max-th. */
static void test_inventory_records_in_windows(void **state)
{
    const char *kind = *state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg(kind);
    s_start(&fx, &cfg);
    enum { N = 6 };
    uint64_t slots[N] = {0, 3, 4, 8, 12, 15}, sizes[N], sums[N];
    uint8_t keys[N][16], *frames[N];
    blk_t b[N];
    for (uint32_t i = 0; i < N; i++) {
        s_blk(&b[i], slots[i], 2000 + i * 10, 300 + i);
        sizes[i] = b[i].size;
        sums[i] = b[i].sum;
        frames[i] = b[i].bytes;
        memcpy(keys[i], b[i].key, 16);
    }
    kvtier_Status st;
    uint32_t written;
    assert_int_equal(s_write(&fx, slots, N, 1, frames, sizes, &written, &st), 0);
    assert_int_equal(s_put(&fx, INST, kvtier_LocationState_LOCATION_SERVING, 4242ull, slots, keys,
                           sizes, sums, N, &written, &st),
                     0);
    kvtier_InventoryEntry e[CAP];
    uint32_t ne = s_inventory(&fx, 0, e, NULL);
    assert_int_equal(ne, N);

    bus_inv_record_t rec[CAP];
    kvtier_InventoryReply rep;
    uint32_t n;
    /* the whole tier in one page: the same headers as the entries */
    assert_int_equal(s_records_page(&fx, 0, 0, 0, rec, &n, &rep, &st), 0);
    assert_int_equal(n, N);
    assert_true(rep.done);
    assert_int_equal(rep.next_cursor, CAP);
    assert_int_equal(rep.tier.epoch, tier_actor_epoch(fx.actor));
    for (uint32_t i = 0; i < N; i++) {
        assert_int_equal(rec[i].slot, e[i].slot);
        assert_memory_equal(rec[i].key, e[i].key, 16);
        assert_int_equal(rec[i].size, e[i].size);
        assert_int_equal(rec[i].checksum, e[i].checksum);
        assert_int_equal(rec[i].ttl_deadline_ms, 4242ull);
        assert_int_equal(rec[i].instance, tier_actor_instance_hash(INST));
        assert_int_equal(rec[i].state, kvtier_LocationState_LOCATION_SERVING);
    }
    /* window [3, 9): slots 3, 4, 8 and nothing past 9; done means the window's end */
    assert_int_equal(s_records_page(&fx, 3, 9, 0, rec, &n, &rep, &st), 0);
    assert_int_equal(n, 3);
    assert_int_equal(rec[0].slot, 3);
    assert_int_equal(rec[2].slot, 8);
    assert_true(rep.done);
    assert_int_equal(rep.next_cursor, 9);
    /* at most 2 a page: the page ends at the second, the window goes on after it */
    assert_int_equal(s_records_page(&fx, 3, 9, 2, rec, &n, &rep, &st), 0);
    assert_int_equal(n, 2);
    assert_false(rep.done);
    assert_int_equal(rep.next_cursor, 5);
    assert_int_equal(s_records_page(&fx, 5, 9, 2, rec, &n, &rep, &st), 0);
    assert_int_equal(n, 1);
    assert_true(rep.done);
    /* an end past the capacity is the capacity; entries honour a window too */
    assert_int_equal(s_records_page(&fx, 9, 1000, 0, rec, &n, &rep, &st), 0);
    assert_int_equal(n, 2);
    assert_true(rep.done);
    assert_int_equal(rep.next_cursor, CAP);
    static kvtier_Envelope req, erep;
    bus_env_init(&req, kvtier_Envelope_inventory_req_tag, "test");
    req.body.inventory_req.cursor = 1;
    req.body.inventory_req.end = 5;
    assert_int_equal(s_call(&fx, &req, NULL, NULL, 0, &erep, NULL, NULL, &st), 0);
    assert_int_equal(erep.body.inventory_rep.entries_count, 2); /* slots 3 and 4 */
    assert_true(erep.body.inventory_rep.done);
    assert_int_equal(erep.body.inventory_rep.next_cursor, 5);
    s_blks_free(b, N);
    s_stop(&fx);
}

/* Bad page sizes and windows are refused with INVALID_ARGUMENT naming the bound,
 * and nothing is listed; a records page larger than the client can hold fails on
 * the client's side (the decoder's bound), never past its buffer. */
static void test_inventory_bad_pages_are_refused(void **state)
{
    const char *kind = *state;
    fx_t fx;
    tier_actor_config_t cfg = s_cfg(kind);
    s_start(&fx, &cfg);
    bus_inv_record_t rec[CAP];
    kvtier_InventoryReply rep;
    uint32_t n;
    kvtier_Status st;
    assert_int_equal(s_records_page(&fx, 0, 0, BUS_MAX_INVENTORY_RECORDS + 1, rec, &n, &rep, &st),
                     ST_INVALID);
    assert_non_null(strstr(st.message, "65537 records a page"));
    assert_non_null(strstr(st.message, "at most 65536"));
    assert_int_equal(s_records_page(&fx, 8, 8, 0, rec, &n, &rep, &st), ST_INVALID);
    assert_non_null(strstr(st.message, "window [8, 8) is empty"));
    assert_int_equal(s_records_page(&fx, 9, 3, 0, rec, &n, &rep, &st), ST_INVALID);
    /* entries keep their old bound: more than 128 is 128, never an error */
    static kvtier_Envelope req, erep;
    bus_env_init(&req, kvtier_Envelope_inventory_req_tag, "test");
    req.body.inventory_req.max_entries = 100000;
    assert_int_equal(s_call(&fx, &req, NULL, NULL, 0, &erep, NULL, NULL, &st), 0);
    /* CAP + 1 records fit the client's buffer, not more: a full tier with a tiny buffer */
    enum { N = CAP };
    uint64_t slots[N], sizes[N], sums[N];
    uint8_t keys[N][16], *frames[N];
    blk_t b[N];
    for (uint32_t i = 0; i < N; i++) {
        slots[i] = i;
        s_blk(&b[i], i, 100, 500 + i);
        sizes[i] = b[i].size;
        sums[i] = b[i].sum;
        frames[i] = b[i].bytes;
        memcpy(keys[i], b[i].key, 16);
    }
    uint32_t written;
    assert_int_equal(s_write(&fx, slots, N, 1, frames, sizes, &written, &st), 0);
    assert_int_equal(s_put(&fx, INST, kvtier_LocationState_LOCATION_SERVING, 0, slots, keys, sizes,
                           sums, N, &written, &st),
                     0);
    bus_env_init(&req, kvtier_Envelope_inventory_req_tag, "test");
    req.body.inventory_req.records = true;
    uint8_t small[3 * BUS_INVENTORY_RECORD_BYTES];
    bus_arrays_t ra = {.payload = {.data = small, .cap = sizeof small}};
    assert_int_not_equal(s_call(&fx, &req, NULL, NULL, 0, &erep, &ra, NULL, &st), 0);
    assert_int_equal(st.code, ST_INVALID);
    assert_non_null(strstr(st.message, "records"));
    s_blks_free(b, N);
    s_stop(&fx);
}

/* The rules that are not about a medium run on each tier kind of their row, the
 * kind being the test's state: host (POSIX shm), nvme (O_DIRECT file, io_uring)
 * fake (tests/support/tier_fake.c), which has no batch, inventory, probe,
 * describe or slot_data op, so on it the actor runs through tier.c's fallbacks, and
 * gpu (device memory on the fake CUDA runtime, no slot_data: bytes through staging).
 * ON_KIND is cmocka_unit_test_prestate with the kind in the test's name. */
#define ON_KIND(f, kind)                                                                           \
    {                                                                                              \
        .name = #f "/" kind, .test_func = f, .initial_state = (void *)kind                         \
    }
#define ON_EVERY_KIND(f)                                                                           \
    ON_KIND(f, "host"), ON_KIND(f, "nvme"), ON_KIND(f, "fake"), ON_KIND(f, "gpu")
#define ON_HOST_FAKE_GPU(f) ON_KIND(f, "host"), ON_KIND(f, "fake"), ON_KIND(f, "gpu")

int main(void)
{
    const struct CMUnitTest tests[] = {
        ON_EVERY_KIND(test_write_read_round_trip_through_frames),
        ON_EVERY_KIND(test_multi_segment_block_is_one_slot),
        ON_EVERY_KIND(test_inventory_lists_exactly_the_committed_blocks),
        ON_EVERY_KIND(test_inventory_records_in_windows),
        ON_HOST_FAKE_GPU(test_inventory_bad_pages_are_refused),
        ON_EVERY_KIND(test_write_marks_slot_writing_until_new_header),
        ON_HOST_FAKE_GPU(test_probe_reports_serving_blocks_with_matching_key),
        ON_EVERY_KIND(test_delete_empties_slots_matching_key),
        ON_EVERY_KIND(test_put_header_rewrite_changes_only_matching_headers),
        ON_EVERY_KIND(test_bad_input_gets_status_and_leaves_blocks_intact),
        ON_HOST_FAKE_GPU(test_requests_over_bounds_are_refused_whole),
        ON_HOST_FAKE_GPU(test_epoch_fence_refuses_requests_for_another_incarnation),
        cmocka_unit_test(test_nvme_checksum_failure_is_an_error_never_wrong_bytes),
        cmocka_unit_test(test_nvme_put_header_requires_matching_written_bytes),
        cmocka_unit_test(test_nvme_blocks_survive_restart_with_new_epoch),
        cmocka_unit_test(test_host_verify_put_refuses_checksum_mismatch),
        cmocka_unit_test(test_host_checks_bytes_that_arrived_over_the_network),
        cmocka_unit_test(test_host_delete_repairs_header_left_mid_write),
        ON_HOST_FAKE_GPU(test_instance_hash_collision_is_a_conflict),
        cmocka_unit_test(test_pipe_endpoint_epoch_and_stats),
        cmocka_unit_test(test_serves_over_inproc_and_ipc),
        cmocka_unit_test(test_bad_config_fails_cleanly),
        cmocka_unit_test(test_inventory_only_for_meta_keys),
    };
    int rc = cmocka_run_group_tests(tests, s_group_setup, s_group_teardown);
    zsys_shutdown();
    return rc;
}
