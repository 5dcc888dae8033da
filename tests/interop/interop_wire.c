/* interop_wire.c — the C half of the wire interop test (tests/interop/interop_wire.py).
 *   kvt_interop encode DIR   writes messages encoded by the bus codec to DIR/c_*.bin
 *   kvt_interop check DIR    decodes DIR/py_*.bin (encoded by python3-protobuf) and
 *                            checks every field; exit 1 on the first mismatch.
 * Both sides derive their values from the same rules (key(i), slot(i), ...), which
 * interop_wire.py repeats; the wire format being real protobuf is what is tested. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus_envelope.h"
#include "bus_events.h"

#define N 5u

static int s_failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "interop C check failed: %s: ", #cond);                                \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            s_failures++;                                                                          \
        }                                                                                          \
    } while (0)

/* The shared value rules (mirrored in interop_wire.py). */
static void s_key(uint32_t i, uint8_t out[BUS_KEY_LEN])
{
    for (uint32_t j = 0; j < BUS_KEY_LEN; j++)
        out[j] = (uint8_t)(i * 131u + j * 7u + 1u);
}
static uint64_t s_slot(uint32_t i)
{
    return 1000000007ull * (i + 1);
}
static uint64_t s_checksum(uint32_t i)
{
    return 0xF00DFACE12345678ull ^ ((uint64_t)i << 56);
}

typedef struct {
    uint8_t keys[64][BUS_KEY_LEN];
    uint32_t tiers[64];
    uint64_t slots[64], dst[64], sizes[64], sums[64];
    bool mask[64];
    uint8_t blob[256];
    bus_arrays_t a;
} storage_t;

static void s_storage_init(storage_t *s)
{
    memset(s, 0, sizeof *s);
    s->a.keys = (bus_keys_t){.keys = s->keys, .cap = 64};
    s->a.tier_ids = (bus_u32s_t){.v = s->tiers, .cap = 64};
    s->a.slots = (bus_u64s_t){.v = s->slots, .cap = 64};
    s->a.dst_slots = (bus_u64s_t){.v = s->dst, .cap = 64};
    s->a.sizes = (bus_u64s_t){.v = s->sizes, .cap = 64};
    s->a.checksums = (bus_u64s_t){.v = s->sums, .cap = 64};
    s->a.mask = (bus_bools_t){.v = s->mask, .cap = 64};
    s->a.payload = (bus_blob_t){.data = s->blob, .cap = sizeof s->blob};
}

static int s_write(const char *dir, const char *name, const void *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len) {
        fprintf(stderr, "cannot write %s\n", path);
        if (f)
            fclose(f);
        return -1;
    }
    fclose(f);
    return 0;
}

static uint8_t *s_read(const char *dir, const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot read %s\n", path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(size > 0 ? (size_t)size : 1);
    *len = fread(buf, 1, (size_t)size, f);
    fclose(f);
    return buf;
}

static int s_write_env(const char *dir, const char *name, kvtier_Envelope *env, bus_arrays_t *a)
{
    zframe_t *f = NULL;
    kvtier_Status st;
    if (bus_env_encode(env, a, &f, &st) < 0) {
        fprintf(stderr, "%s: encode failed: %s\n", name, st.message);
        return -1;
    }
    int rc = s_write(dir, name, zframe_data(f), zframe_size(f));
    zframe_destroy(&f);
    return rc;
}

/* ---- encode: C -> Python ---- */

static int s_encode(const char *dir)
{
    kvtier_Envelope *env = calloc(1, sizeof *env);
    storage_t *s = calloc(1, sizeof *s);
    int rc = 0;

    /* Envelope carrying a LookupRequest with keys */
    s_storage_init(s);
    bus_env_init(env, kvtier_Envelope_lookup_req_tag, "c-client");
    env->corr_id = 0x0123456789ABCDEFull;
    strcpy(env->body.lookup_req.instance_id, "llama-3-70b");
    strcpy(env->body.lookup_req.request_id, "req-7");
    env->body.lookup_req.mode = kvtier_LookupMode_LOOKUP_MODE_REVERSE;
    env->body.lookup_req.window = 4;
    for (uint32_t i = 0; i < N; i++)
        s_key(i, s->keys[i]);
    s->a.keys.n = N;
    rc |= s_write_env(dir, "c_lookup.bin", env, &s->a);

    /* Envelope carrying a PutHeaderRequest (parallel arrays, fixed64 checksums) */
    s_storage_init(s);
    bus_env_init(env, kvtier_Envelope_put_header_req_tag, "c-sched");
    env->corr_id = 77;
    kvtier_PutHeaderRequest *ph = &env->body.put_header_req;
    ph->tier_id = 3;
    strcpy(ph->instance_id, "llama-3-70b");
    ph->state = kvtier_LocationState_LOCATION_SERVING;
    ph->ttl_deadline_ms = 1893456000000ull;
    for (uint32_t i = 0; i < N; i++) {
        s_key(i + 10, s->keys[i]);
        s->slots[i] = s_slot(i);
        s->sizes[i] = 2u << 20;
        s->sums[i] = s_checksum(i);
    }
    s->a.keys.n = s->a.slots.n = s->a.sizes.n = s->a.checksums.n = N;
    rc |= s_write_env(dir, "c_put_header.bin", env, &s->a);

    /* A reply: LookupReply with hit mask, tier ids and a status */
    s_storage_init(s);
    kvtier_Envelope req = {.corr_id = 4242};
    bus_env_init_reply(env, &req, kvtier_Envelope_lookup_rep_tag, "c-sched");
    env->status.code = kvtier_StatusCode_STATUS_OK;
    strcpy(env->status.message, "served");
    env->body.lookup_rep.hit_count = 3;
    env->body.lookup_rep.prefetch_advised = true;
    for (uint32_t i = 0; i < N; i++) {
        s->mask[i] = i < 3;
        s->tiers[i] = i < 3 ? i + 1 : 0;
    }
    s->a.mask.n = s->a.tier_ids.n = N;
    rc |= s_write_env(dir, "c_lookup_reply.bin", env, &s->a);

    /* A PreparePutReply: Token with keys and opaque payload (nested callbacks) */
    s_storage_init(s);
    bus_env_init_reply(env, &req, kvtier_Envelope_prepare_put_rep_tag, "c-sched");
    env->body.prepare_put_rep.has_token = true;
    env->body.prepare_put_rep.token.token_id = 99;
    env->body.prepare_put_rep.token.lease_ms = 30000;
    env->body.prepare_put_rep.skipped = 2;
    for (uint32_t i = 0; i < 3; i++)
        s_key(i + 20, s->keys[i]);
    s->a.keys.n = 3;
    for (uint32_t i = 0; i < 100; i++)
        s->blob[i] = (uint8_t)(255 - i);
    s->a.payload.len = 100;
    rc |= s_write_env(dir, "c_prepare_put_reply.bin", env, &s->a);

    /* ClusterInfoReply: static repeated submessages */
    bus_env_init_reply(env, &req, kvtier_Envelope_cluster_info_rep_tag, "c-coord");
    kvtier_ClusterInfoReply *ci = &env->body.cluster_info_rep;
    strcpy(ci->cluster, "demo");
    strcpy(ci->leader_endpoint, "tcp://10.0.0.1:7000");
    ci->leader_epoch = 5;
    ci->tiers_count = 2;
    for (uint32_t i = 0; i < 2; i++) {
        ci->tiers[i].tier_id = i + 1;
        snprintf(ci->tiers[i].name, sizeof ci->tiers[i].name, "tier%u", i);
        ci->tiers[i].kind =
            i == 0 ? kvtier_TierKind_TIER_KIND_HOST : kvtier_TierKind_TIER_KIND_NVME;
        snprintf(ci->tiers[i].endpoint, sizeof ci->tiers[i].endpoint, "tcp://10.0.0.%u:7100",
                 i + 2);
        ci->tiers[i].capacity_slots = 1000u * (i + 1);
        ci->tiers[i].slot_bytes = 2u << 20;
        ci->tiers[i].used_slots = 10u * (i + 1);
    }
    rc |= s_write_env(dir, "c_cluster_info.bin", env, NULL);

    /* EventBatch with every event kind */
    bus_event_t ev[5];
    memset(ev, 0, sizeof ev);
    uint8_t keys[20][BUS_KEY_LEN];
    for (uint32_t i = 0; i < 20; i++)
        s_key(i + 30, keys[i]);
    pb_size_t kinds[5] = {kvtier_Event_cache_get_tag, kvtier_Event_block_stored_tag,
                          kvtier_Event_block_removed_tag, kvtier_Event_block_moved_tag,
                          kvtier_Event_leader_changed_tag};
    for (uint32_t i = 0; i < 5; i++) {
        ev[i].ev.ts_us = 1700000000000000ull + i;
        if (i < 4)
            snprintf(ev[i].ev.instance_id, sizeof ev[i].ev.instance_id, "inst-%u", i);
        ev[i].ev.which_kind = kinds[i];
        ev[i].keys = (bus_keys_t){.keys = keys + 4 * i, .n = i < 4 ? 4 : 0};
    }
    ev[0].ev.kind.cache_get.hit_count = 2;
    ev[0].ev.kind.cache_get.head_hits = 1;
    strcpy(ev[0].ev.kind.cache_get.request_id, "req-7");
    ev[0].ev.kind.cache_get.mode = kvtier_LookupMode_LOOKUP_MODE_PER_KEY;
    ev[1].ev.kind.block_stored.tier_id = 1;
    ev[1].ev.kind.block_stored.block_bytes = 2u << 20;
    ev[2].ev.kind.block_removed.tier_id = 2;
    ev[2].ev.kind.block_removed.reason = kvtier_RemoveReason_REMOVE_REASON_EVICTED;
    ev[3].ev.kind.block_moved.src_tier_id = 1;
    ev[3].ev.kind.block_moved.dst_tier_id = 2;
    strcpy(ev[4].ev.kind.leader_changed.node_id, "coord-b");
    strcpy(ev[4].ev.kind.leader_changed.endpoint, "tcp://10.0.0.9:7000");
    ev[4].ev.kind.leader_changed.epoch = 6;
    kvtier_EventBatch hdr = {.epoch = 6};
    strcpy(hdr.source, "coord-b");
    zframe_t *f = NULL;
    kvtier_Status st;
    if (bus_events_encode(&hdr, ev, 5, &f, &st) < 0) {
        fprintf(stderr, "events encode: %s\n", st.message);
        rc = -1;
    } else {
        rc |= s_write(dir, "c_events.bin", zframe_data(f), zframe_size(f));
        zframe_destroy(&f);
    }
    free(s);
    free(env);
    return rc;
}

/* ---- check: Python -> C ---- */

static int s_decode_file(const char *dir, const char *name, bus_dir_t d, kvtier_Envelope *env,
                         bus_arrays_t *a)
{
    size_t len = 0;
    uint8_t *buf = s_read(dir, name, &len);
    if (!buf)
        return -1;
    kvtier_Status st;
    int rc = bus_env_decode(buf, len, d, env, a, &st);
    if (rc < 0)
        fprintf(stderr, "%s: decode failed: %s\n", name, st.message);
    free(buf);
    return rc;
}

static void s_check_lookup_reply(const char *dir, kvtier_Envelope *env, storage_t *s)
{
    s_storage_init(s);
    if (s_decode_file(dir, "py_lookup_reply.bin", BUS_DIR_REPLY, env, &s->a) < 0) {
        s_failures++;
        return;
    }
    CHECK(env->corr_id == 31337, "corr_id %" PRIu64, env->corr_id);
    CHECK(strcmp(env->sender, "py-sched") == 0, "sender %s", env->sender);
    CHECK(env->version == BUS_PROTOCOL_VERSION, "version %u", env->version);
    CHECK(env->has_status && env->status.code == kvtier_StatusCode_STATUS_OK, "status");
    CHECK(strcmp(env->status.message, "all good") == 0, "message %s", env->status.message);
    CHECK(env->which_body == kvtier_Envelope_lookup_rep_tag, "body %u", env->which_body);
    CHECK(env->body.lookup_rep.hit_count == 4, "hit_count %u", env->body.lookup_rep.hit_count);
    CHECK(env->body.lookup_rep.prefetch_advised, "prefetch_advised");
    CHECK(s->a.mask.n == 6 && s->a.tier_ids.n == 6, "counts %u %u", s->a.mask.n, s->a.tier_ids.n);
    for (uint32_t i = 0; i < 6 && i < s->a.mask.n; i++) {
        CHECK(s->mask[i] == (i % 2 == 0), "hit[%u]", i);
        CHECK(s->tiers[i] == (i % 2 == 0 ? 300 + i : 0), "tier_ids[%u] = %u", i, s->tiers[i]);
    }
}

static void s_check_write_slots(const char *dir, kvtier_Envelope *env, storage_t *s)
{
    s_storage_init(s);
    if (s_decode_file(dir, "py_write_slots.bin", BUS_DIR_REQUEST, env, &s->a) < 0) {
        s_failures++;
        return;
    }
    kvtier_WriteSlotsRequest *w = &env->body.write_slots_req;
    CHECK(env->which_body == kvtier_Envelope_write_slots_req_tag, "body %u", env->which_body);
    CHECK(w->tier_id == 2 && w->segments == 2, "tier %u segments %u", w->tier_id, w->segments);
    CHECK(s->a.slots.n == 3 && s->a.sizes.n == 6, "counts %u %u", s->a.slots.n, s->a.sizes.n);
    for (uint32_t i = 0; i < s->a.slots.n && i < 3; i++)
        CHECK(s->slots[i] == s_slot(i), "slots[%u] = %" PRIu64, i, s->slots[i]);
    for (uint32_t i = 0; i < s->a.sizes.n && i < 6; i++)
        CHECK(s->sizes[i] == 4096u * (i + 1), "sizes[%u] = %" PRIu64, i, s->sizes[i]);
}

static void s_check_complete_put(const char *dir, kvtier_Envelope *env, storage_t *s)
{
    s_storage_init(s);
    if (s_decode_file(dir, "py_complete_put.bin", BUS_DIR_REQUEST, env, &s->a) < 0) {
        s_failures++;
        return;
    }
    kvtier_CompletePutRequest *c = &env->body.complete_put_req;
    CHECK(env->which_body == kvtier_Envelope_complete_put_req_tag, "body %u", env->which_body);
    CHECK(strcmp(c->instance_id, "inst-py") == 0, "instance %s", c->instance_id);
    CHECK(strcmp(c->request_id, "req-py") == 0, "request %s", c->request_id);
    CHECK(c->job_id == 0xFFFFFFFFFFFFull && c->token_id == 12, "job %" PRIu64 " token %" PRIu64,
          c->job_id, c->token_id);
    CHECK(s->a.mask.n == N && s->a.checksums.n == N, "counts %u %u", s->a.mask.n, s->a.checksums.n);
    for (uint32_t i = 0; i < N && i < s->a.mask.n; i++) {
        CHECK(s->mask[i] == (i != 1), "success[%u]", i);
        CHECK(s->sums[i] == s_checksum(i), "checksums[%u] = %" PRIx64, i, s->sums[i]);
    }
}

static void s_check_not_leader(const char *dir, kvtier_Envelope *env)
{
    if (s_decode_file(dir, "py_not_leader.bin", BUS_DIR_REPLY, env, NULL) < 0) {
        s_failures++;
        return;
    }
    CHECK(env->which_body == 0, "body %u", env->which_body);
    CHECK(env->corr_id == 5, "corr_id %" PRIu64, env->corr_id);
    CHECK(env->status.code == kvtier_StatusCode_STATUS_NOT_LEADER, "code %d",
          (int)env->status.code);
    CHECK(strcmp(env->leader_endpoint, "tcp://10.0.0.3:7000") == 0, "leader %s",
          env->leader_endpoint);
}

static void s_check_prepare_get_reply(const char *dir, kvtier_Envelope *env, storage_t *s)
{
    s_storage_init(s);
    if (s_decode_file(dir, "py_prepare_get_reply.bin", BUS_DIR_REPLY, env, &s->a) < 0) {
        s_failures++;
        return;
    }
    kvtier_PrepareGetReply *r = &env->body.prepare_get_rep;
    CHECK(env->which_body == kvtier_Envelope_prepare_get_rep_tag, "body %u", env->which_body);
    CHECK(r->has_token && r->token.token_id == 555 && r->token.lease_ms == 30000, "token");
    CHECK(s->a.keys.n == 4, "keys %u", s->a.keys.n);
    for (uint32_t i = 0; i < 4 && i < s->a.keys.n; i++) {
        uint8_t k[BUS_KEY_LEN];
        s_key(i + 40, k);
        CHECK(memcmp(s->keys[i], k, BUS_KEY_LEN) == 0, "keys[%u]", i);
    }
    CHECK(s->a.payload.len == 200, "payload len %u", s->a.payload.len);
    for (uint32_t i = 0; i < 200 && i < s->a.payload.len; i++)
        CHECK(s->blob[i] == (uint8_t)(i * 3), "payload[%u]", i);
}

static void s_check_events(const char *dir)
{
    size_t len = 0;
    uint8_t *buf = s_read(dir, "py_events.bin", &len);
    if (!buf) {
        s_failures++;
        return;
    }
    bus_event_t ev[8];
    uint8_t pool_keys[32][BUS_KEY_LEN];
    bus_keys_t pool = {.keys = pool_keys, .cap = 32};
    kvtier_EventBatch hdr;
    uint32_t n = 0;
    kvtier_Status st;
    int rc = bus_events_decode(buf, len, &hdr, ev, 8, &n, &pool, &st);
    free(buf);
    CHECK(rc == 0, "decode: %s", st.message);
    if (rc < 0)
        return;
    CHECK(strcmp(hdr.source, "py-coord") == 0 && hdr.epoch == 3, "header");
    CHECK(n == 2, "events %u", n);
    if (n != 2)
        return;
    CHECK(ev[0].ev.which_kind == kvtier_Event_block_stored_tag, "kind0 %u", ev[0].ev.which_kind);
    CHECK(ev[0].ev.ts_us == 1700000000123456ull, "ts0");
    CHECK(strcmp(ev[0].ev.instance_id, "inst-py") == 0, "instance0");
    CHECK(ev[0].ev.kind.block_stored.tier_id == 1 &&
              ev[0].ev.kind.block_stored.block_bytes == 65536,
          "stored");
    CHECK(ev[0].keys.n == 3, "keys0 %u", ev[0].keys.n);
    for (uint32_t i = 0; i < 3 && i < ev[0].keys.n; i++) {
        uint8_t k[BUS_KEY_LEN];
        s_key(i + 50, k);
        CHECK(memcmp(ev[0].keys.keys[i], k, BUS_KEY_LEN) == 0, "event0 key %u", i);
    }
    CHECK(ev[1].ev.which_kind == kvtier_Event_block_removed_tag, "kind1 %u", ev[1].ev.which_kind);
    CHECK(ev[1].ev.kind.block_removed.reason == kvtier_RemoveReason_REMOVE_REASON_GC, "reason");
    CHECK(ev[1].keys.n == 1, "keys1 %u", ev[1].keys.n);
}

static int s_check(const char *dir)
{
    kvtier_Envelope *env = calloc(1, sizeof *env);
    storage_t *s = calloc(1, sizeof *s);
    s_check_lookup_reply(dir, env, s);
    s_check_write_slots(dir, env, s);
    s_check_complete_put(dir, env, s);
    s_check_not_leader(dir, env);
    s_check_prepare_get_reply(dir, env, s);
    s_check_events(dir);
    free(s);
    free(env);
    if (s_failures)
        fprintf(stderr, "interop C check: %d failure(s)\n", s_failures);
    else
        printf("interop C check: all Python-encoded messages decoded and matched\n");
    return s_failures ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "encode") != 0 && strcmp(argv[1], "check") != 0)) {
        fprintf(stderr, "usage: %s encode|check DIR\n", argv[0]);
        return 2;
    }
    int rc = strcmp(argv[1], "encode") == 0 ? s_encode(argv[2]) : s_check(argv[2]);
    return rc == 0 ? 0 : 1;
}
