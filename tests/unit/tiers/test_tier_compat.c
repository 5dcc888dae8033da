/* test_tier_compat.c — the on-medium layouts stay readable across code changes
 * (docs/ARCHITECTURE.md "Tiers": the nvme file and the host segment are formats,
 * versioned in their superblocks). nvme: a file of layout version 1 written by the
 * code before the tier ops table's version 2 (fixtures/nvme_v1.bin.gz) is refused
 * by layout version 2 with a message naming both versions, untouched, and is
 * reformatted only when asked, and the layout version 2 file of that layout's
 * commit (fixtures/nvme_v2.bin.gz) is adopted byte-exact at its documented
 * offsets (generic tier API only). host: a segment built byte by byte
 * from the offsets documented in tier_seg.h is read through the segment library
 * a client links. Expected values are the
 * constants of fixtures/nvme_v1.h and this file, never a re-read of the
 * fixture; the fixture is never regenerated here. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>
#include <zlib.h>

#include "nvme_v2.h" /* and nvme_v1.h, whose blocks both fixtures hold */
#include "tier.h"
#include "tier_seg.h"

#define S_FIXTURE KVT_TIER_FIXTURES "/nvme_v1.bin.gz"
#define S_FIXTURE_V2 KVT_TIER_FIXTURES "/nvme_v2.bin.gz"

static char s_dir[128];
static char s_path[256];

/* ---- nvme: the committed v1 file ------------------------------------------ */

static int s_gunzip(const char *src, const char *dst)
{
    static uint8_t buf[16384];
    int rc = -1, k;
    gzFile in = gzopen(src, "rb");
    int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (!in || fd < 0)
        goto out;
    while ((k = gzread(in, buf, sizeof buf)) > 0)
        if (write(fd, buf, (size_t)k) != k)
            goto out;
    rc = k == 0 && fsync(fd) == 0 ? 0 : -1;
out:
    if (rc < 0)
        print_error("gunzip %s to %s failed\n", src, dst);
    if (in)
        gzclose(in);
    if (fd >= 0)
        close(fd);
    return rc;
}

static int s_group_setup(void **state)
{
    (void)state;
    snprintf(s_dir, sizeof s_dir, "/tmp/kvt-compat-XXXXXX");
    if (!mkdtemp(s_dir))
        return -1;
    snprintf(s_path, sizeof s_path, "%s/nvme_v1.bin", s_dir);
    return 0;
}

static int s_group_teardown(void **state)
{
    (void)state;
    unlink(s_path);
    return rmdir(s_dir);
}

/* Each nvme test starts from the fixture as committed. */
static int s_fresh_fixture(void **state)
{
    (void)state;
    struct stat st;
    unlink(s_path);
    if (s_gunzip(S_FIXTURE, s_path) < 0 || stat(s_path, &st) < 0)
        return -1;
    return st.st_size == (off_t)NVME_V1_FILE_SIZE ? 0 : -1;
}

static void s_nvme_cfg(tier_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->name, sizeof cfg->name, "nvme0"); /* the name at format is diagnostics only */
    snprintf(cfg->kind, sizeof cfg->kind, "nvme");
    snprintf(cfg->path, sizeof cfg->path, "%s", s_path);
    cfg->capacity = NVME_V1_CAPACITY;
    cfg->slot_size = NVME_V1_SLOT_SIZE;
    (void)tier_config_set(cfg, "queue_depth", "4");
}

/* xxh3 of the whole file: "not touched" is the same bytes. */
static uint64_t s_file_sum(const char *path)
{
    static uint8_t buf[NVME_V1_FILE_SIZE];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, buf, sizeof buf, 0), (ssize_t)sizeof buf);
    close(fd);
    return XXH3_64bits(buf, sizeof buf);
}

static void s_noop_log(void *arg, const char *line)
{
    (void)arg;
    (void)line;
}

/* Layout version 2 (issue 13 §4: each slot's header record in the same write
 * as its bytes) does not migrate version 1 files: open refuses one with a
 * message that names both versions and says how to reformat, and leaves its
 * bytes as they were. */
static void test_nvme_v1_file_refused_naming_the_version(void **state)
{
    (void)state;
    uint64_t before = s_file_sum(s_path);
    tier_config_t cfg;
    s_nvme_cfg(&cfg);
    cfg.log = s_noop_log;
    char err[512] = "";
    tier_t *t = tier_open(&cfg, err, sizeof err);
    assert_null(t);
    assert_non_null(strstr(err, "file version 1"));
    assert_non_null(strstr(err, "this build reads version 2"));
    assert_non_null(strstr(err, "not migrated"));
    assert_non_null(strstr(err, "set format to reformat"));
    assert_int_equal(s_file_sum(s_path), before);
}

/* With format set, the version 1 file becomes an empty version 2 tier that
 * stores and serves blocks, and a reopen keeps them. */
static void test_nvme_v1_file_reformatted_when_asked(void **state)
{
    (void)state;
    static uint8_t buf[NVME_V1_SLOT_SIZE], got[NVME_V1_SLOT_SIZE];
    tier_config_t cfg;
    s_nvme_cfg(&cfg);
    cfg.log = s_noop_log;
    (void)tier_config_set(&cfg, "format", "true");
    char err[512] = "";
    tier_t *t = tier_open(&cfg, err, sizeof err);
    assert_non_null(t);
    for (uint64_t slot = 0; slot < NVME_V1_CAPACITY; slot++) {
        bool present = true;
        assert_int_equal(tier_probe(t, &slot, 1, &present), 0);
        assert_false(present); /* nothing of version 1 is recovered */
    }
    nvme_v1_fill(buf, sizeof buf, 77);
    struct iovec v = {.iov_base = buf, .iov_len = sizeof buf};
    tier_io_t it = {.slot = 3, .iov = &v, .n = 1};
    it.hdr.key.b[0] = 3;
    assert_int_equal(tier_put_batch(t, &it, 1), 0);
    assert_int_equal(it.hdr.checksum, XXH3_64bits(buf, sizeof buf));
    tier_close(&t);
    uint8_t sb[16];
    int fd = open(s_path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, sb, sizeof sb, 0), (ssize_t)sizeof sb);
    close(fd);
    uint32_t version;
    memcpy(&version, sb + 8, sizeof version);
    assert_int_equal(version, 2);
    s_nvme_cfg(&cfg);
    cfg.log = s_noop_log;
    t = tier_open(&cfg, err, sizeof err);
    assert_non_null(t);
    struct iovec g = {.iov_base = got, .iov_len = sizeof got};
    assert_int_equal(tier_read(t, 3, &g, 1), 0);
    assert_memory_equal(got, buf, sizeof buf);
    tier_close(&t);
}

/* Each version 2 test starts from that fixture as committed. */
static int s_fresh_fixture_v2(void **state)
{
    (void)state;
    struct stat st;
    unlink(s_path);
    if (s_gunzip(S_FIXTURE_V2, s_path) < 0 || stat(s_path, &st) < 0)
        return -1;
    return st.st_size == (off_t)NVME_V2_FILE_SIZE ? 0 : -1;
}

static void s_assert_header(const tier_slot_header_t *h, const struct nvme_v1_block *b,
                            uint32_t state)
{
    assert_memory_equal(h->key.b, b->key, TIER_KEY_BYTES);
    assert_int_equal(h->instance, b->instance);
    assert_int_equal(h->state, state);
    assert_int_equal(h->size, b->size);
    assert_int_equal(h->checksum, b->checksum);
    assert_int_equal(h->deadline_ms, b->deadline_ms);
}

static void s_assert_block(tier_t *t, const struct nvme_v1_block *b)
{
    static uint8_t got[NVME_V1_SLOT_SIZE], want[NVME_V1_SLOT_SIZE];
    nvme_v1_fill(want, b->size, b->seed);
    assert_int_equal(XXH3_64bits(want, b->size), b->checksum);
    memset(got, 0, sizeof got);
    struct iovec v = {.iov_base = got, .iov_len = sizeof got};
    assert_int_equal(tier_read(t, b->slot, &v, 1), 0);
    assert_memory_equal(got, want, b->size);
}

static void s_assert_not_served(tier_t *t, uint64_t slot)
{
    static uint8_t got[NVME_V1_SLOT_SIZE];
    struct iovec v = {.iov_base = got, .iov_len = sizeof got};
    bool present = true;
    assert_int_equal(tier_read(t, slot, &v, 1), -ENODATA);
    assert_int_equal(tier_probe(t, &slot, 1, &present), 0);
    assert_false(present);
}

struct s_inv {
    size_t n;
    uint64_t slots[NVME_V1_CAPACITY];
    tier_slot_header_t h[NVME_V1_CAPACITY];
};

static int s_inv_fn(void *arg, uint64_t slot, const tier_slot_header_t *h)
{
    struct s_inv *inv = arg;
    if (inv->n == NVME_V1_CAPACITY)
        return -ENOSPC;
    inv->slots[inv->n] = slot;
    inv->h[inv->n++] = *h;
    return 0;
}

static void s_pread(const char *path, uint64_t off, void *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, buf, len, (off_t)off), (ssize_t)len);
    close(fd);
}

static uint64_t s_u64(const uint8_t *p);
static uint32_t s_u32(const uint8_t *p);

/* b's record and bytes in the file, at the offsets nvme_v2.h documents; its seq
 * above min_seq when given. */
static void s_assert_v2_record(const struct nvme_v1_block *b, uint64_t min_seq)
{
    static uint8_t rec[NVME_V2_RECORD_BYTES], zero[NVME_V2_RECORD_BYTES];
    static uint8_t got[NVME_V1_SLOT_SIZE], want[NVME_V1_SLOT_SIZE];
    const uint8_t uuid[16] = NVME_V2_UUID;
    s_pread(s_path, NVME_V2_REC_OFF(b->slot), rec, sizeof rec);
    assert_int_equal(s_u32(rec + 0), 0x4853564bu); /* "KVSH" */
    assert_int_equal(s_u32(rec + 4), TIER_SLOT_SERVING);
    assert_int_equal(s_u64(rec + 8), b->slot);
    assert_true(s_u64(rec + 16) > min_seq);
    assert_memory_equal(rec + 24, uuid, 16);
    assert_memory_equal(rec + 40, b->key, 16);
    assert_int_equal(s_u32(rec + 56), b->instance);
    assert_int_equal(s_u64(rec + 64), b->size);
    assert_int_equal(s_u64(rec + 72), b->checksum);
    assert_int_equal(s_u64(rec + 80), b->deadline_ms);
    assert_int_equal(s_u64(rec + 96), XXH3_64bits(rec, 96));
    assert_memory_equal(rec + 104, zero, sizeof rec - 104);
    s_pread(s_path, NVME_V2_BYTES_OFF(b->slot), got, b->size);
    nvme_v1_fill(want, b->size, b->seed);
    assert_memory_equal(got, want, b->size);
}

/* The committed layout version 2 file is adopted: every SERVING block with its
 * header and its bytes, at the offsets nvme_v2.h documents; the interrupted
 * overwrite (a WRITING record with the new bytes' size and checksum), the
 * deleted and the never-written slots are not served; a put after adoption is
 * one record-and-bytes write at its slot's offsets with a later seq, and the
 * file keeps serving across a reopen. */
static void test_nvme_v2_file_adopted_byte_exact(void **state)
{
    (void)state;
    tier_config_t cfg;
    s_nvme_cfg(&cfg);
    cfg.log = s_noop_log;
    char err[512] = "";
    tier_t *t = tier_open(&cfg, err, sizeof err);
    if (!t)
        fail_msg("tier_open of the v2 fixture: %s", err);
    struct s_inv inv = {0};
    assert_int_equal(tier_inventory(t, s_inv_fn, &inv), 0);
    assert_int_equal(inv.n, NVME_V1_NSERVING);
    for (size_t i = 0; i < NVME_V1_NSERVING; i++) {
        const struct nvme_v1_block *b = &nvme_v1_serving[i];
        tier_slot_header_t h;
        assert_int_equal(inv.slots[i], b->slot);
        s_assert_header(&inv.h[i], b, TIER_SLOT_SERVING);
        assert_int_equal(tier_get_header(t, b->slot, &h), 0);
        s_assert_header(&h, b, TIER_SLOT_SERVING);
        s_assert_block(t, b);
        s_assert_v2_record(b, 0);
    }
    tier_slot_header_t h;
    struct nvme_v1_block w = nvme_v1_writing;
    w.size = NVME_V1_OVER_SIZE;
    w.checksum = NVME_V2_WRITING_CHECKSUM;
    assert_int_equal(tier_get_header(t, w.slot, &h), 0);
    s_assert_header(&h, &w, TIER_SLOT_WRITING);
    s_assert_not_served(t, w.slot);
    const uint64_t empty[] = {nvme_v1_deleted.slot, NVME_V1_NEVER_WRITTEN};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(tier_get_header(t, empty[i], &h), 0);
        assert_int_equal(h.state, TIER_SLOT_EMPTY);
        s_assert_not_served(t, empty[i]);
    }
    /* a new block into the never-written slot */
    static uint8_t buf[NVME_V1_SLOT_SIZE];
    struct nvme_v1_block nb = {NVME_V1_NEVER_WRITTEN,
                               {0x44, 0x44, 0x44, 0x44, 0x44, 0x44, 0x44, 0x44, 0x04, 0x04, 0x04,
                                0x04, 0x04, 0x04, 0x04, 0x04},
                               4444u,
                               NVME_V1_SLOT_SIZE - 1,
                               2000000000000ull,
                               0x440u,
                               0};
    nvme_v1_fill(buf, nb.size, nb.seed);
    nb.checksum = XXH3_64bits(buf, nb.size);
    struct iovec v = {.iov_base = buf, .iov_len = nb.size};
    tier_io_t it = {.slot = nb.slot, .iov = &v, .n = 1};
    it.hdr.instance = nb.instance;
    it.hdr.deadline_ms = nb.deadline_ms;
    memcpy(it.hdr.key.b, nb.key, sizeof it.hdr.key.b);
    assert_int_equal(tier_put_batch(t, &it, 1), 0);
    tier_close(&t);
    s_assert_v2_record(&nb, NVME_V2_MAX_SEQ);
    t = tier_open(&cfg, err, sizeof err);
    assert_non_null(t);
    s_assert_block(t, &nb);
    for (size_t i = 0; i < NVME_V1_NSERVING; i++)
        s_assert_block(t, &nvme_v1_serving[i]);
    tier_close(&t);
}

static uint64_t s_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint32_t s_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* ---- host: a segment built from the documented offsets ------------------- */

#define H_CAP 65u /* 65 headers of 64 bytes: the last on a second page */
#define H_SLOT_SIZE 5000u
#define H_STRIDE 8192u
#define H_HEADERS_OFF 4096u
#define H_DATA_OFF 12288u /* 4096 + 65 * 64, rounded up to 4096 */
#define H_TOTAL (H_DATA_OFF + H_CAP * H_STRIDE)
#define H_EPOCH 0x1122334455667788ull
#define H_ODD_SLOT 7u /* seq odd: a header write in progress */

struct s_hslot {
    uint64_t slot;
    uint32_t seq;
    uint32_t state;
    uint8_t key[16];
    uint32_t instance;
    uint64_t size;
    uint64_t deadline_ms;
    uint64_t seed;
};

static const struct s_hslot s_hslots[] = {
    {0,
     2,
     TIER_SLOT_SERVING,
     {0xa0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
     500u,
     H_SLOT_SIZE,
     1893456000000ull,
     0x200u},
    {1,
     4,
     TIER_SLOT_WRITING,
     {0xa1, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff},
     501u,
     1234u,
     0u,
     0x201u},
    {64,
     6,
     TIER_SLOT_SERVING,
     {0xa2, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
      0xcd},
     0xffffffffu,
     1u,
     0x0123456789abcdefull,
     0x264u},
};
#define S_NHSLOTS (sizeof s_hslots / sizeof s_hslots[0])

static char s_shm[64];
static uint8_t *s_base;

static void s_put64(uint64_t off, uint64_t v)
{
    memcpy(s_base + off, &v, sizeof v);
}

static void s_put32(uint64_t off, uint32_t v)
{
    memcpy(s_base + off, &v, sizeof v);
}

/* The segment an owner of layout v1 leaves, written field by field. */
static void s_build_segment(void)
{
    snprintf(s_shm, sizeof s_shm, "/kvt-test-compat-%d", (int)getpid());
    shm_unlink(s_shm);
    int fd = shm_open(s_shm, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, H_TOTAL), 0);
    s_base = mmap(NULL, H_TOTAL, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    assert_true(s_base != MAP_FAILED);
    s_put32(8, TIER_SEG_VERSION);
    s_put32(12, 64);
    s_put64(16, H_SLOT_SIZE);
    s_put64(24, H_CAP);
    s_put64(32, H_STRIDE);
    s_put64(40, H_HEADERS_OFF);
    s_put64(48, H_DATA_OFF);
    s_put64(56, H_TOTAL);
    s_put64(64, H_EPOCH);
    s_put32(72, (uint32_t)getpid());
    s_put32(76, 1);
    memcpy(s_base + 80, "host-fixture", sizeof "host-fixture");
    for (size_t i = 0; i < S_NHSLOTS; i++) {
        const struct s_hslot *s = &s_hslots[i];
        uint64_t r = H_HEADERS_OFF + 64 * s->slot;
        uint8_t *data = s_base + H_DATA_OFF + H_STRIDE * s->slot;
        nvme_v1_fill(data, s->size, s->seed);
        s_put32(r + 0, s->seq);
        s_put32(r + 4, s->state);
        memcpy(s_base + r + 8, s->key, 16);
        s_put32(r + 24, s->instance);
        s_put64(r + 32, s->size);
        s_put64(r + 40, XXH3_64bits(data, s->size));
        s_put64(r + 48, s->deadline_ms);
    }
    s_put32(H_HEADERS_OFF + 64 * H_ODD_SLOT, 3);
    s_put32(H_HEADERS_OFF + 64 * H_ODD_SLOT + 4, TIER_SLOT_SERVING);
    __atomic_store_n((uint64_t *)s_base, TIER_SEG_MAGIC, __ATOMIC_RELEASE); /* magic last */
}

static int s_host_teardown(void **state)
{
    (void)state;
    if (s_base && s_base != MAP_FAILED)
        munmap(s_base, H_TOTAL);
    s_base = NULL;
    shm_unlink(s_shm);
    return 0;
}

static void s_assert_hslot(tier_seg_t *seg, const struct s_hslot *s)
{
    static uint8_t got[H_SLOT_SIZE], want[H_SLOT_SIZE];
    tier_slot_header_t h;
    nvme_v1_fill(want, s->size, s->seed);
    assert_int_equal(tier_seg_get_header(seg, s->slot, &h), 0);
    assert_memory_equal(h.key.b, s->key, 16);
    assert_int_equal(h.instance, s->instance);
    assert_int_equal(h.state, s->state);
    assert_int_equal(h.size, s->size);
    assert_int_equal(h.checksum, XXH3_64bits(want, s->size));
    assert_int_equal(h.deadline_ms, s->deadline_ms);
    assert_int_equal(tier_seg_serving(seg, s->slot), s->state == TIER_SLOT_SERVING);
    struct iovec v = {.iov_base = got, .iov_len = s->size};
    assert_int_equal(tier_seg_read(seg, s->slot, &v, 1), 0);
    assert_memory_equal(got, want, s->size);
}

/* A client's header and bytes land at the documented offsets. */
static void s_assert_client_write(tier_seg_t *seg)
{
    static uint8_t buf[H_SLOT_SIZE];
    const uint64_t slot = 3, r = H_HEADERS_OFF + 64 * slot;
    nvme_v1_fill(buf, sizeof buf, 0x203u);
    tier_slot_header_t h = {.instance = 503u,
                            .state = TIER_SLOT_SERVING,
                            .size = 777u,
                            .checksum = XXH3_64bits(buf, 777u),
                            .deadline_ms = 1767225600000ull};
    memset(h.key.b, 0xa3, sizeof h.key.b);
    struct iovec v = {.iov_base = buf, .iov_len = 777u};
    assert_int_equal(tier_seg_write(seg, slot, &v, 1), 0);
    assert_int_equal(tier_seg_put_header(seg, slot, &h), 0);
    uint32_t seq = s_u32(s_base + r);
    assert_true(seq != 0 && seq % 2 == 0);
    assert_int_equal(s_u32(s_base + r + 4), TIER_SLOT_SERVING);
    assert_memory_equal(s_base + r + 8, h.key.b, 16);
    assert_int_equal(s_u32(s_base + r + 24), 503u);
    assert_int_equal(s_u32(s_base + r + 28), 0);
    assert_int_equal(s_u64(s_base + r + 32), 777u);
    assert_int_equal(s_u64(s_base + r + 40), h.checksum);
    assert_int_equal(s_u64(s_base + r + 48), h.deadline_ms);
    assert_int_equal(s_u64(s_base + r + 56), 0);
    assert_memory_equal(s_base + H_DATA_OFF + H_STRIDE * slot, buf, 777u);
}

/* The host segment layout v1 stays readable: a client attaches to a segment laid
 * out per tier_seg.h, reads its geometry, headers (seqlock respected) and bytes,
 * sees the owner's live flag, and writes at the documented offsets. */
static void test_host_v1_segment_read_by_attach(void **state)
{
    (void)state;
    char err[256] = "";
    tier_seg_t *seg = NULL;
    s_build_segment();
    if (tier_seg_attach(s_shm, H_SLOT_SIZE, H_CAP, &seg, err, sizeof err) < 0)
        fail_msg("attach to a v1 segment: %s", err);
    assert_int_equal(tier_seg_capacity(seg), H_CAP);
    assert_int_equal(tier_seg_slot_size(seg), H_SLOT_SIZE);
    assert_int_equal(tier_seg_epoch(seg), H_EPOCH);
    assert_true(tier_seg_live(seg));
    uint8_t *slot0 = tier_seg_slot(seg, 0);
    assert_int_equal((uint8_t *)tier_seg_slot(seg, 64) - slot0, 64 * H_STRIDE);
    assert_null(tier_seg_slot(seg, H_CAP));
    for (size_t i = 0; i < S_NHSLOTS; i++)
        s_assert_hslot(seg, &s_hslots[i]);
    tier_slot_header_t h;
    assert_int_equal(tier_seg_get_header(seg, 2, &h), 0);
    assert_int_equal(h.state, TIER_SLOT_EMPTY);
    assert_false(tier_seg_serving(seg, 2));
    assert_int_equal(tier_seg_get_header(seg, H_ODD_SLOT, &h), -EAGAIN);
    s_assert_client_write(seg);
    s_put32(76, 0); /* the owner closed it */
    assert_false(tier_seg_live(seg));
    tier_seg_detach(&seg);
    assert_null(seg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_nvme_v1_file_refused_naming_the_version, s_fresh_fixture),
        cmocka_unit_test_setup(test_nvme_v1_file_reformatted_when_asked, s_fresh_fixture),
        cmocka_unit_test_setup(test_nvme_v2_file_adopted_byte_exact, s_fresh_fixture_v2),
        cmocka_unit_test_teardown(test_host_v1_segment_read_by_attach, s_host_teardown),
    };
    return cmocka_run_group_tests(tests, s_group_setup, s_group_teardown);
}
