/* gen_seeds.c — writes the binary seeds of tests/fuzz/corpus from the project's
 * own encoders (the messages the unit tests build): one envelope per body kind
 * with two elements in each of its arrays, tokens of each kind, event batches of
 * each event kind, the first bytes of a freshly formatted nvme file with a block
 * in it and of a host segment. Not part of the suite: run it by hand when a wire
 * format changes (tests/fuzz/run --seeds). Usage: gen_seeds CORPUS_DIR */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bus_envelope.h"
#include "bus_events.h"
#include "bus_token.h"
#include "bus_token_mac.h"
#include "kvt_export.h"
#include "tier.h"
#include "tier_checksum.h"
#include "tier_nvme.h"

static const char *s_dir;

static void s_write(const char *harness, const char *name, const void *a, size_t alen,
                    const void *b, size_t blen)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", s_dir, harness);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/%s", s_dir, harness, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(a, 1, alen, f) != alen || (blen && fwrite(b, 1, blen, f) != blen) ||
        fclose(f) != 0) {
        fprintf(stderr, "gen_seeds: %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

static size_t s_token(bus_token_kind_t kind, uint8_t *buf, size_t cap)
{
    bus_token_tier_t tiers[2] = {{.tier_id = 1,
                                  .slot_size = 4096,
                                  .epoch = 7,
                                  .endpoint = "tcp://127.0.0.1:7711",
                                  .shm = "/kvtier-host0",
                                  .host = "h1"},
                                 {.tier_id = 2,
                                  .slot_size = 4096,
                                  .epoch = 9,
                                  .endpoint = "tcp://127.0.0.1:7712",
                                  .host = "h1"}};
    bus_token_entry_t e[2] = {{.tier = 0, .src_tier = BUS_TOKEN_NO_TIER, .size = 4096, .slot = 3},
                              {.tier = 0, .src_tier = BUS_TOKEN_NO_TIER, .size = 100, .slot = 5}};
    if (kind == BUS_TOKEN_PREFETCH || kind == BUS_TOKEN_COPY)
        e[0].src_tier = e[1].src_tier = 1;
    bus_token_meta_t m = {.token_id = 42, .issuer = 0x1234, .leader_epoch = 1, .instance = 1};
    if (kind == BUS_TOKEN_GET_PUT)
        m.n_get = 1; /* one pinned hit, one reserved miss */
    size_t len = 0;
    if (bus_token_encode(kind, &m, tiers, 2, e, 2, buf, cap, &len) < 0)
        exit(1);
    return len;
}

static size_t s_frame_size_8(void *ctx, uint32_t i)
{
    (void)ctx;
    (void)i;
    return 8;
}

static void s_envelopes(void)
{
    static uint8_t keys[2][BUS_KEY_LEN] = {{1, 2, 3}, {4, 5, 6}};
    static uint32_t u32[2] = {1, 2};
    static uint64_t u64[2] = {8, 8};
    static bool mask[2] = {true, false};
    static uint8_t payload[1024], buf[4096];
    static kvtier_Envelope env, back;
    uint32_t payload_len = (uint32_t)s_token(BUS_TOKEN_GET, payload, sizeof payload);
    for (uint32_t i = 0; i < bus_body_count(); i++) {
        pb_size_t tag = bus_body_tag_at(i);
        bool reply = bus_body_dir(tag) == BUS_DIR_REPLY;
        bus_arrays_t arr = {.keys = {keys, 2, 2},
                            .tier_ids = {u32, 2, 2},
                            .slots = {u64, 2, 2},
                            .dst_slots = {u64, 2, 2},
                            .sizes = {u64, 2, 2},
                            .checksums = {u64, 2, 2},
                            .mask = {mask, 2, 2},
                            .payload = {payload, payload_len, payload_len},
                            .token_ids = {u32, 2, 2}};
        bus_env_init(&env, tag, "seed");
        env.corr_id = 7 + i;
        if (reply) {
            env.has_status = true;
            env.status.code = kvtier_StatusCode_STATUS_OK;
        }
        size_t len = 0;
        kvtier_Status st;
        if (bus_env_encode_buf(&env, &arr, buf, sizeof buf, &len, &st) < 0) {
            fprintf(stderr, "gen_seeds: %s: %s\n", bus_body_name(tag), st.message);
            continue;
        }
        /* how many payload frames the body declares: none, or one per size */
        bus_arrays_t *dec = bus_arrays_new(16, 4096);
        uint8_t head[5] = {(uint8_t)(reply ? 1u : 0u)};
        size_t hlen = 1;
        int rc = bus_env_decode(buf, len, reply ? BUS_DIR_REPLY : BUS_DIR_REQUEST, &back, dec, &st);
        if (rc == 0 && bus_env_check_payload(&back, dec, 0, s_frame_size_8, NULL, &st) < 0) {
            head[0] |= 2u << 1;
            head[1] = 8, head[3] = 8;
            hlen = 5;
            rc = bus_env_check_payload(&back, dec, 2, s_frame_size_8, NULL, &st);
        }
        if (rc < 0)
            fprintf(stderr, "gen_seeds: %s does not decode: %s\n", bus_body_name(tag), st.message);
        bus_arrays_destroy(&dec);
        s_write("envelope", bus_body_name(tag), head, hlen, buf, len);
    }
}

static void s_tokens(void)
{
    uint8_t buf[2048];
    static const char *const names[] = {"", "get", "put", "prefetch", "get_put", "admin", "copy"};
    /* sealed as a scheduler with the secret mints them, under fuzz_token.c's key */
    static const char *const sealed[] = {"",
                                         "sealed_get",
                                         "sealed_put",
                                         "sealed_prefetch",
                                         "sealed_get_put",
                                         "sealed_admin",
                                         "sealed_copy"};
    bus_token_key_t key;
    if (bus_token_key_derive((const uint8_t *)"kvtier fuzz seeds secret, 32 B!", "fuzz", &key) < 0)
        exit(1);
    for (int k = BUS_TOKEN_GET; k <= BUS_TOKEN_COPY; k++) {
        size_t len = s_token((bus_token_kind_t)k, buf, sizeof buf);
        s_write("token", names[k], buf, len, NULL, 0);
        if (bus_token_seal(&key, buf, sizeof buf, &len) < 0)
            exit(1);
        s_write("token", sealed[k], buf, len, NULL, 0);
    }
}

/* fuzz_export.c's seeds: byte 0 picks the decoder (bit 0: result) and asks for
 * the checksum restamped (bit 1: a mutation keeps it right). */
static void s_exports(void)
{
    static uint8_t payload[2048], buf[4096];
    uint8_t keys[2 * 16];
    for (size_t i = 0; i < sizeof keys; i++)
        keys[i] = (uint8_t)(i * 5 + 3);
    static const char *const names[] = {"", "get", "put", "prefetch"};
    for (int k = BUS_TOKEN_GET; k <= BUS_TOKEN_PREFETCH; k++) {
        kvti_tokx_t x = {.kind = (uint16_t)k, .n_keys = 2, .token_id = 42, .prepare_id = 7,
                         .lease_ms = 30000, .remaining_ms = 29000, .leader_epoch = 1,
                         .bytes_per_block = 4096, .segments = 8, .keys = keys,
                         .payload = payload};
        x.payload_len = (uint32_t)s_token((bus_token_kind_t)k, payload, sizeof payload);
        snprintf(x.cluster, sizeof x.cluster, "fuzz");
        snprintf(x.instance_id, sizeof x.instance_id, "llama");
        snprintf(x.request_id, sizeof x.request_id, "r1");
        size_t len = 0;
        if (kvti_tokx_encode(&x, buf + 1, sizeof buf - 1, &len, NULL, 0) < 0)
            exit(1);
        buf[0] = 2;
        char name[32];
        snprintf(name, sizeof name, "token_%s", names[k]);
        s_write("export", name, buf, len + 1, NULL, 0);
    }
    uint8_t outcome[2] = {KVTI_OUT_MOVED, KVTI_OUT_SEG_FAILED};
    uint64_t sums[2] = {0x1234, 0};
    kvti_tokr_t r = {.kind = BUS_TOKEN_PUT, .n_keys = 2, .token_id = 42, .prepare_id = 7,
                     .segments = 8, .seg_next = 8, .seg_bytes = 512, .keys = keys,
                     .outcome = outcome, .sums = sums};
    size_t len = 0;
    if (kvti_tokr_encode(&r, buf + 1, sizeof buf - 1, &len, NULL, 0) < 0)
        exit(1);
    buf[0] = 3;
    s_write("export", "result_put", buf, len + 1, NULL, 0);
}

static void s_events(void)
{
    static uint8_t keys[2][BUS_KEY_LEN] = {{1, 2, 3}, {4, 5, 6}};
    static uint32_t tokens[4] = {11, 12, 13, 14};
    static const pb_size_t kinds[] = {
        kvtier_Event_cache_get_tag,      kvtier_Event_block_stored_tag,
        kvtier_Event_block_removed_tag,  kvtier_Event_block_moved_tag,
        kvtier_Event_leader_changed_tag, kvtier_Event_tier_changed_tag,
        kvtier_Event_all_cleared_tag};
    enum { N = sizeof kinds / sizeof kinds[0] };
    bus_event_t ev[N];
    memset(ev, 0, sizeof ev);
    for (int i = 0; i < N; i++) {
        ev[i].ev.ts_us = 1700000000000000ull + (uint64_t)i;
        snprintf(ev[i].ev.instance_id, sizeof ev[i].ev.instance_id, "vllm-0");
        ev[i].ev.which_kind = kinds[i];
        ev[i].keys = (bus_keys_t){keys, 2, 2};
    }
    ev[1].ev.kind.block_stored.tier_id = 1;
    ev[1].ev.kind.block_stored.tokens_per_block = 2;
    ev[1].ev.kind.block_stored.medium = kvtier_Medium_MEDIUM_CPU;
    ev[1].tokens = (bus_u32s_t){tokens, 4, 4};
    kvtier_EventBatch b = {.source = "coord-1", .epoch = 3};
    zframe_t *f = NULL;
    kvtier_Status st;
    if (bus_events_encode(&b, ev, N, &f, &st) < 0)
        exit(1);
    s_write("events", "all_kinds", zframe_data(f), zframe_size(f), NULL, 0);
    zframe_destroy(&f);
    if (bus_events_encode(&b, &ev[1], 1, &f, &st) < 0)
        exit(1);
    s_write("events", "stored_tokens", zframe_data(f), zframe_size(f), NULL, 0);
    zframe_destroy(&f);
}

/* The first bytes of a tier file: what fuzz_nvme rewrites from its input. */
static void s_nvme(void)
{
    char path[] = "/tmp/kvt-gen-seeds-nvme-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        exit(1);
    close(fd);
    unlink(path);
    tier_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.name, sizeof cfg.name, "nvme0");
    snprintf(cfg.kind, sizeof cfg.kind, "nvme");
    snprintf(cfg.path, sizeof cfg.path, "%s", path);
    cfg.capacity = 8;
    cfg.slot_size = 4096;
    tier_nvme_opts_t o;
    tier_nvme_opts_default(&o);
    o.queue_depth = 4;
    o.chunk_bytes = 64u * 1024u;
    char err[512];
    tier_t *t = tier_nvme_open(&cfg, &o, err, sizeof err);
    if (!t) {
        fprintf(stderr, "gen_seeds: nvme: %s\n", err);
        exit(1);
    }
    static uint8_t block[4096];
    memset(block, 0xab, sizeof block);
    struct iovec v = {.iov_base = block, .iov_len = 1000};
    tier_slot_header_t h = {.state = TIER_SLOT_SERVING, .size = 1000, .instance = 1};
    h.key.b[0] = 1;
    h.checksum = tier_checksum(&v, 1);
    if (tier_write(t, 2, &v, 1) < 0 || tier_put_header(t, 2, &h) < 0)
        exit(1);
    tier_close(&t);
    /* Layout version 2: the superblock page, then the slot area from data_off
     * (each slot a record page and its bytes), as fuzz_nvme maps its input. */
    static uint8_t file[4096 + 8 * 8192];
    fd = open(path, O_RDONLY);
    uint64_t data_off = 0, stride = 0;
    ssize_t k = pread(fd, file, 4096, 0);
    memcpy(&stride, file + 32, sizeof stride);
    memcpy(&data_off, file + 48, sizeof data_off);
    size_t len = 4096u + 8u * (size_t)stride;
    if (k != 4096 || stride != 8192 || data_off != (1u << 20) ||
        pread(fd, file + 4096, len - 4096, (off_t)data_off) != (ssize_t)(len - 4096))
        exit(1);
    close(fd);
    unlink(path);
    uint8_t flags = 3; /* restamped: the same bytes, checksums recomputed */
    s_write("nvme", "formatted_one_block", &flags, 1, file, len);
}

static void s_host(void)
{
    char name[64];
    snprintf(name, sizeof name, "/kvt-gen-seeds-%d", (int)getpid());
    tier_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.name, sizeof cfg.name, "host0");
    snprintf(cfg.kind, sizeof cfg.kind, "host");
    snprintf(cfg.path, sizeof cfg.path, "%s", name);
    cfg.capacity = 4;
    cfg.slot_size = 4096;
    tier_config_set(&cfg, "prefault", "false");
    char err[512];
    tier_t *t = tier_open(&cfg, err, sizeof err);
    if (!t) {
        fprintf(stderr, "gen_seeds: host: %s\n", err);
        exit(1);
    }
    static uint8_t block[100];
    struct iovec v = {.iov_base = block, .iov_len = sizeof block};
    tier_slot_header_t h = {.state = TIER_SLOT_SERVING, .size = sizeof block, .instance = 1};
    h.checksum = tier_checksum(&v, 1);
    if (tier_write(t, 1, &v, 1) < 0 || tier_put_header(t, 1, &h) < 0)
        exit(1);
    int fd = shm_open(name, O_RDONLY, 0);
    static uint8_t seg[4096 + 4 * 64];
    if (fd < 0 || pread(fd, seg, sizeof seg, 0) != (ssize_t)sizeof seg)
        exit(1);
    close(fd);
    tier_close(&t);
    uint8_t flags = 3; /* grow to the claimed length, attach expecting 4096-byte slots */
    s_write("host", "four_slots", &flags, 1, seg, sizeof seg);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_seeds CORPUS_DIR\n");
        return 2;
    }
    s_dir = argv[1];
    mkdir(s_dir, 0755);
    s_envelopes();
    s_tokens();
    s_exports();
    s_events();
    s_nvme();
    s_host();
    return 0;
}
