/* test_tier_host.c — the host tier backend (DESIGN.md §3, §4, §7 and the host
 * tier issue): segment lifecycle, byte and header round trips, the same-host
 * client path (a forked process attaches by name), superblock validation,
 * checksums, dispatcher bounds and replacement of stale segments. Segment
 * names carry the pid so parallel runs (plain and ASan) never collide. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "tier.h"
#include "tier_checksum.h"
#include "tier_host.h"

#define SLOT_SIZE (3 * 4096 + 100) /* not a multiple of the alignment */
#define CAPACITY 6

static char s_name[128];

static void s_make_name(const char *tag)
{
    static int n;
    snprintf(s_name, sizeof s_name, "/kvt-test-host-%d-%s-%d", (int)getpid(), tag, n++);
}

static tier_config_t s_cfg(uint64_t capacity, uint64_t slot_size, bool prefault)
{
    tier_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.name, sizeof cfg.name, "host0");
    snprintf(cfg.kind, sizeof cfg.kind, "host");
    snprintf(cfg.path, sizeof cfg.path, "%s", s_name);
    cfg.capacity = capacity;
    cfg.slot_size = slot_size;
    assert_int_equal(tier_config_set(&cfg, "prefault", prefault ? "true" : "false"), 0);
    return cfg;
}

static tier_t *s_open(const char *tag, uint64_t capacity, uint64_t slot_size)
{
    char err[256] = "";
    s_make_name(tag);
    tier_config_t cfg = s_cfg(capacity, slot_size, false);
    tier_t *t = tier_open(&cfg, err, sizeof err);
    if (!t)
        fail_msg("tier_open: %s", err);
    return t;
}

static bool s_shm_exists(const char *name)
{
    int fd = shm_open(name, O_RDONLY, 0);
    if (fd < 0)
        return false;
    close(fd);
    return true;
}

/* Deterministic bytes: the same (seed, len) gives the same data in any process. */
static void s_fill(uint8_t *buf, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
}

static tier_slot_header_t s_header(uint8_t tag, uint32_t state, uint64_t size)
{
    tier_slot_header_t h;
    memset(&h, 0, sizeof h);
    memset(h.key.b, tag, sizeof h.key.b);
    h.key.b[0] = 0xA5;
    h.instance = 100u + tag;
    h.state = state;
    h.size = size;
    h.checksum = 0x1234567800000000ull | tag;
    h.deadline_ms = 1700000000000ull + tag;
    return h;
}

/* A failed test may leave its segment behind: remove the name either way. */
static int s_teardown(void **state)
{
    (void)state;
    shm_unlink(s_name);
    return 0;
}

static int s_group_setup(void **state)
{
    (void)state;
    int rc = tier_register(&tier_host_ops);
    return rc == 0 || rc == -EEXIST ? 0 : -1;
}

/* Issue: open creates the named segment, close unmaps and shm_unlinks it. */
static void test_open_close_removes_segment(void **state)
{
    (void)state;
    tier_t *t = s_open("life", CAPACITY, SLOT_SIZE);
    assert_true(s_shm_exists(s_name));
    size_t len = 0;
    uint8_t *base = tier_map(t, &len);
    assert_non_null(base);
    assert_true(len >= (size_t)CAPACITY * SLOT_SIZE);
    tier_close(&t);
    assert_null(t);
    assert_false(s_shm_exists(s_name));
    tier_close(&t); /* idempotent */
}

/* issue 12 §1, same-host access: a segment is its owner's only (0600) unless
 * "shm_group" hands it to a group (0660, that gid); a group that does not exist is
 * refused at configure, naming it. */
static void test_segment_mode_and_shm_group(void **state)
{
    (void)state;
    struct stat sb;
    tier_t *t = s_open("mode", CAPACITY, SLOT_SIZE);
    int fd = shm_open(s_name, O_RDONLY, 0);
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &sb), 0);
    close(fd);
    assert_int_equal(sb.st_mode & 0777, 0600);
    tier_close(&t);

    char err[256] = "";
    struct group *gr = getgrgid(getgid());
    assert_non_null(gr);
    s_make_name("group");
    tier_config_t cfg = s_cfg(CAPACITY, SLOT_SIZE, false);
    assert_int_equal(tier_config_set(&cfg, "shm_group", gr->gr_name), 0);
    t = tier_open(&cfg, err, sizeof err);
    if (!t)
        fail_msg("tier_open with shm_group %s: %s", gr->gr_name, err);
    fd = shm_open(s_name, O_RDONLY, 0);
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &sb), 0);
    close(fd);
    assert_int_equal(sb.st_mode & 0777, 0660);
    assert_int_equal(sb.st_gid, gr->gr_gid);
    tier_close(&t);

    s_make_name("nogroup");
    cfg = s_cfg(CAPACITY, SLOT_SIZE, false);
    assert_int_equal(tier_config_set(&cfg, "shm_group", "kvt-no-such-group-xyz"), 0);
    assert_null(tier_open(&cfg, err, sizeof err));
    assert_non_null(strstr(err, "no group \"kvt-no-such-group-xyz\""));
    assert_false(s_shm_exists(s_name));
}

/* Issue: segment layout — slot data aligned to 4096 bytes for DMA, headers
 * and data inside the mapping, superblock describes the geometry. */
static void test_slot_data_aligned_for_dma(void **state)
{
    (void)state;
    tier_t *t = s_open("align", CAPACITY, SLOT_SIZE);
    size_t len = 0;
    uint8_t *base = tier_map(t, &len);
    char err[256];
    tier_seg_t *seg = NULL;
    assert_int_equal(tier_seg_attach(s_name, SLOT_SIZE, CAPACITY, &seg, err, sizeof err), 0);
    assert_int_equal(tier_seg_capacity(seg), CAPACITY);
    assert_int_equal(tier_seg_slot_size(seg), SLOT_SIZE);
    assert_true(tier_seg_live(seg));
    assert_int_equal(*(uint64_t *)base, TIER_SEG_MAGIC);
    for (uint64_t i = 0; i < CAPACITY; i++) {
        uint8_t *p = tier_seg_slot(seg, i);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % TIER_SEG_ALIGN, 0);
    }
    assert_null(tier_seg_slot(seg, CAPACITY));
    tier_seg_detach(&seg);
    assert_null(seg);
    tier_seg_detach(&seg);
    tier_close(&t);
}

/* Issue: write/read gather and scatter across iov segments, full and partial. */
static void test_write_read_round_trip_iov(void **state)
{
    (void)state;
    tier_t *t = s_open("rw", CAPACITY, SLOT_SIZE);
    static uint8_t src[2][SLOT_SIZE], dst[SLOT_SIZE];
    s_fill(src[0], SLOT_SIZE, 1);
    s_fill(src[1], SLOT_SIZE, 2);

    /* Full slot, written as three segments (one empty), neighbours distinct. */
    for (int s = 0; s < 2; s++) {
        struct iovec w[4] = {{src[s], 1000},
                             {src[s] + 1000, 0},
                             {src[s] + 1000, 5000},
                             {src[s] + 6000, SLOT_SIZE - 6000}};
        assert_int_equal(tier_write(t, (uint64_t)s + 2, w, 4), 0);
    }
    for (int s = 0; s < 2; s++) {
        memset(dst, 0, sizeof dst);
        struct iovec r[2] = {{dst, 4097}, {dst + 4097, SLOT_SIZE - 4097}};
        assert_int_equal(tier_read(t, (uint64_t)s + 2, r, 2), 0);
        assert_memory_equal(dst, src[s], SLOT_SIZE);
    }

    /* Partial: 7 + 1 bytes at the start of the slot, read back as one. */
    struct iovec w[2] = {{src[1], 7}, {src[1] + 100, 1}};
    assert_int_equal(tier_write(t, 0, w, 2), 0);
    uint8_t small[8] = {0};
    struct iovec r = {small, sizeof small};
    assert_int_equal(tier_read(t, 0, &r, 1), 0);
    assert_memory_equal(small, src[1], 7);
    assert_int_equal(small[7], src[1][100]);
    tier_close(&t);
}

struct inv {
    uint64_t slots[CAPACITY];
    tier_slot_header_t h[CAPACITY];
    int n;
    int stop_after; /* return 7 once this many were seen; 0 = never */
};

static int s_inv_fn(void *arg, uint64_t slot, const tier_slot_header_t *h)
{
    struct inv *inv = arg;
    if (inv->n < CAPACITY) {
        inv->slots[inv->n] = slot;
        inv->h[inv->n] = *h;
    }
    inv->n++;
    return inv->stop_after && inv->n >= inv->stop_after ? 7 : 0;
}

/* DESIGN §4 / issue: headers round trip; inventory lists exactly the SERVING
 * slots in slot order; probe says present iff SERVING. */
static void test_headers_inventory_probe(void **state)
{
    (void)state;
    tier_t *t = s_open("hdr", CAPACITY, SLOT_SIZE);
    const uint32_t st[CAPACITY] = {TIER_SLOT_EMPTY,   TIER_SLOT_SERVING,  TIER_SLOT_WRITING,
                                   TIER_SLOT_SERVING, TIER_SLOT_DELETING, TIER_SLOT_SERVING};
    for (uint64_t i = 1; i < CAPACITY; i++) {
        tier_slot_header_t h = s_header((uint8_t)i, st[i], 1000 * i);
        assert_int_equal(tier_put_header(t, i, &h), 0);
    }
    /* Slot 5 goes back from SERVING to DELETING. */
    tier_slot_header_t del = s_header(5, TIER_SLOT_DELETING, 5000);
    assert_int_equal(tier_put_header(t, 5, &del), 0);

    tier_slot_header_t got, zero;
    memset(&zero, 0, sizeof zero);
    assert_int_equal(tier_get_header(t, 0, &got), 0);
    assert_memory_equal(&got, &zero, sizeof got);
    for (uint64_t i = 1; i < 5; i++) {
        tier_slot_header_t want = s_header((uint8_t)i, st[i], 1000 * i);
        assert_int_equal(tier_get_header(t, i, &got), 0);
        assert_memory_equal(&got, &want, sizeof got);
    }

    struct inv inv = {0};
    assert_int_equal(tier_inventory(t, s_inv_fn, &inv), 0);
    assert_int_equal(inv.n, 2);
    assert_int_equal(inv.slots[0], 1);
    assert_int_equal(inv.slots[1], 3);
    tier_slot_header_t want3 = s_header(3, TIER_SLOT_SERVING, 3000);
    assert_memory_equal(&inv.h[1], &want3, sizeof want3);

    struct inv stop = {.stop_after = 1};
    assert_int_equal(tier_inventory(t, s_inv_fn, &stop), 7);
    assert_int_equal(stop.n, 1);

    uint64_t slots[CAPACITY] = {5, 4, 3, 2, 1, 0};
    bool present[CAPACITY];
    assert_int_equal(tier_probe(t, slots, CAPACITY, present), 0);
    for (int i = 0; i < CAPACITY; i++)
        assert_int_equal(present[i], slots[i] == 1 || slots[i] == 3);
    tier_close(&t);
}

/* Child side of the same-host client path: attach by name, check what the
 * owner wrote, copy bytes directly, publish a header. Exit code = step failed. */
static int s_client_child(const char *name)
{
    static uint8_t buf[SLOT_SIZE], want[SLOT_SIZE];
    char err[256];
    tier_seg_t *seg = NULL;
    if (tier_seg_attach(name, SLOT_SIZE, CAPACITY, &seg, err, sizeof err) != 0)
        return 10;
    s_fill(want, 5000, 40);
    tier_slot_header_t h;
    if (!tier_seg_serving(seg, 0) || tier_seg_get_header(seg, 0, &h) != 0 || h.size != 5000 ||
        memcmp(tier_seg_slot(seg, 0), want, 5000) != 0)
        return 11;
    s_fill(buf, SLOT_SIZE, 41);
    memcpy(tier_seg_slot(seg, 4), buf, SLOT_SIZE);
    struct iovec iov = {buf, SLOT_SIZE};
    h = s_header(4, TIER_SLOT_SERVING, SLOT_SIZE);
    h.checksum = tier_checksum(&iov, 1);
    if (tier_seg_put_header(seg, 4, &h) != 0)
        return 12;
    /* The iovec path too, into slot 5. */
    struct iovec two[2] = {{buf, 10}, {buf + 10, 90}};
    h = s_header(5, TIER_SLOT_SERVING, 100);
    if (tier_seg_write(seg, 5, two, 2) != 0 || tier_seg_put_header(seg, 5, &h) != 0)
        return 13;
    tier_seg_detach(&seg);
    return 0;
}

/* DESIGN §3: a same-host client (another process) maps the segment by name
 * and copies without a message; the owner sees its bytes and header exactly. */
static void test_forked_client_writes_parent_reads(void **state)
{
    (void)state;
    tier_t *t = s_open("fork", CAPACITY, SLOT_SIZE);
    static uint8_t mine[5000], want[SLOT_SIZE], got[SLOT_SIZE];
    s_fill(mine, sizeof mine, 40);
    struct iovec w = {mine, sizeof mine};
    assert_int_equal(tier_write(t, 0, &w, 1), 0);
    tier_slot_header_t h0 = s_header(0, TIER_SLOT_SERVING, sizeof mine);
    assert_int_equal(tier_put_header(t, 0, &h0), 0);

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(s_client_child(s_name));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    uint64_t slots[2] = {4, 5};
    bool present[2] = {false, false};
    assert_int_equal(tier_probe(t, slots, 2, present), 0);
    assert_true(present[0] && present[1]);
    tier_slot_header_t h;
    assert_int_equal(tier_get_header(t, 4, &h), 0);
    assert_int_equal(h.state, TIER_SLOT_SERVING);
    assert_int_equal(h.size, SLOT_SIZE);
    struct iovec r = {got, SLOT_SIZE};
    assert_int_equal(tier_read(t, 4, &r, 1), 0);
    s_fill(want, SLOT_SIZE, 41);
    assert_memory_equal(got, want, SLOT_SIZE);
    assert_int_equal(h.checksum, tier_checksum(&r, 1));
    struct iovec r5 = {got, 100};
    assert_int_equal(tier_read(t, 5, &r5, 1), 0);
    assert_memory_equal(got, want, 100);
    tier_close(&t);
}

/* Creates an shm object of len bytes holding data (the rest zero). */
static void s_make_shm(const char *name, const void *data, size_t dlen, size_t len)
{
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)len), 0);
    if (dlen)
        assert_int_equal(pwrite(fd, data, dlen, 0), (ssize_t)dlen);
    close(fd);
}

static void s_expect_attach(const char *name, uint64_t slot_size, uint64_t capacity, int rc,
                            const char *needle)
{
    char err[256] = "";
    tier_seg_t *seg = (tier_seg_t *)&err; /* must be reset to NULL */
    assert_int_equal(tier_seg_attach(name, slot_size, capacity, &seg, err, sizeof err), rc);
    assert_null(seg);
    if (!strstr(err, needle))
        fail_msg("error \"%s\" lacks \"%s\"", err, needle);
}

/* Issue: the client-side map rejects a missing segment, a bad name, a wrong
 * magic, a version mismatch, a truncated segment and unexpected geometry. */
static void test_attach_rejects_bad_segments(void **state)
{
    (void)state;
    s_make_name("missing");
    s_expect_attach(s_name, 0, 0, -ENOENT, "no such segment");
    s_expect_attach("no-slash", 0, 0, -EINVAL, "invalid name");
    s_expect_attach("/a/b", 0, 0, -EINVAL, "invalid name");
    s_expect_attach("/", 0, 0, -EINVAL, "invalid name");
    s_expect_attach(NULL, 0, 0, -EINVAL, "invalid name");

    static uint8_t junk[8192];
    memset(junk, 0xAB, sizeof junk);
    s_make_name("junk");
    s_make_shm(s_name, junk, sizeof junk, sizeof junk);
    s_expect_attach(s_name, 0, 0, -EPROTO, "magic");
    shm_unlink(s_name);

    s_make_name("tiny");
    s_make_shm(s_name, junk, 100, 100);
    s_expect_attach(s_name, 0, 0, -EPROTO, "truncated");
    shm_unlink(s_name);

    s_make_name("zero");
    s_make_shm(s_name, NULL, 0, 8192);
    s_expect_attach(s_name, 0, 0, -EAGAIN, "not initialised");
    shm_unlink(s_name);

    /* A real superblock copied into segments that are too short or altered. */
    tier_t *t = s_open("real", CAPACITY, SLOT_SIZE);
    char real[sizeof s_name];
    memcpy(real, s_name, sizeof real);
    static uint8_t sb[TIER_SEG_SUPER_SIZE];
    memcpy(sb, tier_map(t, NULL), sizeof sb);
    s_expect_attach(real, SLOT_SIZE + 1, CAPACITY, -EPROTO, "geometry");
    s_expect_attach(real, SLOT_SIZE, CAPACITY + 1, -EPROTO, "geometry");

    s_make_name("short");
    s_make_shm(s_name, sb, sizeof sb, sizeof sb + 64);
    s_expect_attach(s_name, 0, 0, -EPROTO, "truncated");
    shm_unlink(s_name);

    sb[8] = 99; /* version */
    s_make_name("version");
    s_make_shm(s_name, sb, sizeof sb, 1 << 20);
    s_expect_attach(s_name, 0, 0, -EPROTO, "version");
    shm_unlink(s_name);

    sb[8] = TIER_SEG_VERSION;
    sb[48] ^= 0x10; /* data_off */
    s_make_name("layout");
    s_make_shm(s_name, sb, sizeof sb, 1 << 20);
    s_expect_attach(s_name, 0, 0, -EPROTO, "inconsistent");
    shm_unlink(s_name);
    tier_close(&t);
}

/* Issue: tier_checksum is XXH3_64bits over the concatenated block bytes. */
static void test_checksum_is_xxh3_of_concatenation(void **state)
{
    (void)state;
    static uint8_t buf[10000];
    s_fill(buf, sizeof buf, 7);
    uint64_t want = XXH3_64bits(buf, sizeof buf);
    struct iovec one = {buf, sizeof buf};
    assert_int_equal(tier_checksum(&one, 1), want);
    const size_t cuts[] = {1, 16, 240, 241, 4096, 9999};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        struct iovec v[3] = {
            {buf, cuts[c]}, {buf + cuts[c], 0}, {buf + cuts[c], sizeof buf - cuts[c]}};
        assert_int_equal(tier_checksum(v, 3), want);
    }
    assert_int_equal(tier_checksum(NULL, 0), XXH3_64bits(NULL, 0));
    struct iovec empty = {buf, 0};
    assert_int_equal(tier_checksum(&empty, 1), XXH3_64bits(NULL, 0));
}

/* tier.h: the dispatcher rejects slots out of range, too many bytes or
 * segments and oversized headers before the backend; the client API checks
 * the same bounds itself (it has no dispatcher in front). */
static void test_bounds_rejected(void **state)
{
    (void)state;
    tier_t *t = s_open("bounds", CAPACITY, SLOT_SIZE);
    static uint8_t buf[SLOT_SIZE + 1];
    struct iovec ok = {buf, 10}, big = {buf, SLOT_SIZE + 1};
    struct iovec many[TIER_MAX_IOV + 1];
    for (int i = 0; i <= TIER_MAX_IOV; i++)
        many[i] = (struct iovec){buf, 1};
    tier_slot_header_t h = s_header(1, TIER_SLOT_SERVING, 10);
    bool present;
    uint64_t bad = CAPACITY;

    assert_int_equal(tier_write(t, CAPACITY, &ok, 1), -ERANGE);
    assert_int_equal(tier_read(t, CAPACITY, &ok, 1), -ERANGE);
    assert_int_equal(tier_put_header(t, CAPACITY, &h), -ERANGE);
    assert_int_equal(tier_get_header(t, CAPACITY, &h), -ERANGE);
    assert_int_equal(tier_probe(t, &bad, 1, &present), -ERANGE);
    assert_int_equal(tier_write(t, 0, &big, 1), -EMSGSIZE);
    assert_int_equal(tier_read(t, 0, &big, 1), -EMSGSIZE);
    assert_int_equal(tier_write(t, 0, many, TIER_MAX_IOV + 1), -EINVAL);
    h.size = SLOT_SIZE + 1;
    assert_int_equal(tier_put_header(t, 0, &h), -EINVAL);

    char err[256];
    tier_seg_t *seg = NULL;
    assert_int_equal(tier_seg_attach(s_name, 0, 0, &seg, err, sizeof err), 0);
    assert_int_equal(tier_seg_write(seg, CAPACITY, &ok, 1), -ERANGE);
    assert_int_equal(tier_seg_read(seg, 0, &big, 1), -EMSGSIZE);
    assert_int_equal(tier_seg_write(seg, 0, many, TIER_MAX_IOV + 1), -EINVAL);
    struct iovec nullbase = {NULL, 4};
    assert_int_equal(tier_seg_write(seg, 0, &nullbase, 1), -EINVAL);
    assert_int_equal(tier_seg_put_header(seg, 0, &h), -EINVAL);
    h.size = 1;
    h.state = 42;
    assert_int_equal(tier_seg_put_header(seg, 0, &h), -EINVAL);
    assert_int_equal(tier_seg_get_header(seg, CAPACITY, &h), -ERANGE);
    assert_false(tier_seg_serving(seg, CAPACITY));
    tier_seg_detach(&seg);
    tier_close(&t);
}

/* Issue: shm name validated, capacity x slot size overflow checked, a segment
 * larger than /dev/shm refused at open — each a clear error, no crash. */
static void test_open_rejects_bad_config(void **state)
{
    (void)state;
    char err[256];
    const char *names[] = {"", "/", "noslash", "/a/b", "/..", NULL};
    for (int i = 0; names[i]; i++) {
        tier_config_t cfg = s_cfg(CAPACITY, SLOT_SIZE, false);
        snprintf(cfg.path, sizeof cfg.path, "%s", names[i]);
        assert_null(tier_open(&cfg, err, sizeof err));
        assert_int_equal(tier_seg_name_check(names[i]), -EINVAL);
    }
    char longname[TIER_SEG_SHM_NAME_MAX + 2];
    memset(longname, 'x', sizeof longname - 1);
    longname[0] = '/';
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(tier_seg_name_check(longname), -EINVAL);
    tier_config_t cfg = s_cfg(CAPACITY, SLOT_SIZE, false);
    memset(cfg.path, 'x', sizeof cfg.path); /* no NUL at all */
    cfg.path[0] = '/';
    assert_null(tier_open(&cfg, err, sizeof err));

    s_make_name("overflow");
    cfg = s_cfg(UINT64_MAX / 4096, 8192, false);
    assert_null(tier_open(&cfg, err, sizeof err));
    assert_non_null(strstr(err, strerror(EOVERFLOW)));
    cfg = s_cfg(2, UINT64_MAX - 10, false);
    assert_null(tier_open(&cfg, err, sizeof err));
    assert_false(s_shm_exists(s_name));

    /* 1 TiB: more than this machine's /dev/shm (when it has a size limit). */
    struct statvfs vfs;
    if (statvfs("/dev/shm", &vfs) == 0 && vfs.f_blocks != 0 &&
        (uint64_t)vfs.f_bavail * vfs.f_frsize < (1ull << 40)) {
        cfg = s_cfg(1u << 20, 1u << 20, false);
        assert_null(tier_open(&cfg, err, sizeof err));
        assert_non_null(strstr(err, strerror(ENOSPC)));
        assert_false(s_shm_exists(s_name));
    }
}

/* DESIGN §4: host memory does not survive its process — a segment left by a
 * dead tier process (or any leftover object of that name) is replaced. */
static void test_reopen_replaces_stale_segment(void **state)
{
    (void)state;
    s_make_name("stale");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char err[256];
        tier_config_t cfg = s_cfg(2, 4096, false);
        tier_t *t = tier_open(&cfg, err, sizeof err);
        tier_slot_header_t h = s_header(1, TIER_SLOT_SERVING, 1);
        _exit(t && tier_put_header(t, 1, &h) == 0 ? 0 : 1); /* dies without close */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_true(s_shm_exists(s_name));

    char err[256];
    tier_seg_t *old = NULL;
    assert_int_equal(tier_seg_attach(s_name, 4096, 2, &old, err, sizeof err), 0);
    tier_config_t cfg = s_cfg(CAPACITY, SLOT_SIZE, false);
    tier_t *t = tier_open(&cfg, err, sizeof err);
    if (!t)
        fail_msg("tier_open over a stale segment: %s", err);
    struct inv inv = {0};
    assert_int_equal(tier_inventory(t, s_inv_fn, &inv), 0);
    assert_int_equal(inv.n, 0);
    tier_seg_t *seg = NULL;
    assert_int_equal(tier_seg_attach(s_name, SLOT_SIZE, CAPACITY, &seg, err, sizeof err), 0);
    assert_int_not_equal(tier_seg_epoch(seg), tier_seg_epoch(old));
    tier_seg_detach(&seg);
    tier_seg_detach(&old);
    tier_close(&t);

    /* A leftover object that is not a kvtier segment at all. */
    s_make_shm(s_name, "junk", 4, 100);
    t = tier_open(&cfg, err, sizeof err);
    if (!t)
        fail_msg("tier_open over a foreign segment: %s", err);
    tier_close(&t);
    assert_false(s_shm_exists(s_name));
}

/* A segment whose owner is alive is not taken over: the second open fails, naming
 * the segment and its holder (issue 12: "a held shm segment gives Device or
 * resource busy without naming it or its owner"), and the first keeps working. */
static void test_open_refuses_live_owner(void **state)
{
    (void)state;
    tier_t *t = s_open("busy", CAPACITY, SLOT_SIZE);
    char err[512], pid[32];
    tier_config_t cfg = s_cfg(CAPACITY, SLOT_SIZE, false);
    assert_null(tier_open(&cfg, err, sizeof err));
    snprintf(pid, sizeof pid, "pid %ld (", (long)getpid());
    if (!strstr(err, s_name) || !strstr(err, pid) || !strstr(err, "in use"))
        fail_msg("the error does not name the segment %s and its holder (%s): %s", s_name, pid,
                 err);
    tier_seg_t *seg = NULL;
    assert_int_equal(tier_seg_attach(s_name, SLOT_SIZE, CAPACITY, &seg, err, sizeof err), 0);
    tier_seg_detach(&seg);
    tier_close(&t);
}

/* Clients can tell that the owner closed the segment (its memory is orphaned);
 * their mapping stays valid until they detach. */
static void test_client_sees_owner_close(void **state)
{
    (void)state;
    tier_t *t = s_open("orphan", CAPACITY, SLOT_SIZE);
    char err[256];
    tier_seg_t *seg = NULL;
    assert_int_equal(tier_seg_attach(s_name, SLOT_SIZE, CAPACITY, &seg, err, sizeof err), 0);
    assert_true(tier_seg_live(seg));
    tier_close(&t);
    assert_false(tier_seg_live(seg));
    memset(tier_seg_slot(seg, CAPACITY - 1), 1, SLOT_SIZE);
    tier_seg_detach(&seg);
}

/* Issue: cfg.prefault touches every page at open and the time is measured;
 * the memory stays zero. Without it nothing is measured. */
static void test_prefault_measured(void **state)
{
    (void)state;
    char err[256];
    s_make_name("prefault");
    tier_config_t cfg = s_cfg(16, 64 * 1024, true);
    tier_t *t = tier_open(&cfg, err, sizeof err);
    assert_non_null(t);
    assert_true(tier_host_prefault_ns(t) > 0);
    static uint8_t got[64 * 1024], zero[64 * 1024];
    struct iovec r = {got, sizeof got};
    assert_int_equal(tier_read(t, 15, &r, 1), 0);
    assert_memory_equal(got, zero, sizeof got);
    tier_close(&t);

    t = s_open("noprefault", 4, 4096);
    assert_int_equal(tier_host_prefault_ns(t), 0);
    tier_close(&t);
    assert_int_equal(tier_host_prefault_ns(NULL), 0);
}

struct race {
    tier_seg_t *seg;
    int stop; /* set by the reader when done (atomic) */
};

static void *s_header_writer(void *arg)
{
    struct race *r = arg;
    for (uint64_t i = 1; !__atomic_load_n(&r->stop, __ATOMIC_RELAXED); i++) {
        tier_slot_header_t h = s_header((uint8_t)i, TIER_SLOT_SERVING, i % 4096);
        h.checksum = i;
        h.deadline_ms = i * 3;
        h.instance = (uint32_t)i;
        tier_seg_put_header(r->seg, 1, &h);
    }
    return NULL;
}

static bool s_header_consistent(const tier_slot_header_t *h)
{
    uint64_t i = h->checksum;
    if (i == 0)
        return h->state == TIER_SLOT_EMPTY;
    tier_slot_header_t want = s_header((uint8_t)i, TIER_SLOT_SERVING, i % 4096);
    want.checksum = i;
    want.deadline_ms = i * 3;
    want.instance = (uint32_t)i;
    return memcmp(h, &want, sizeof want) == 0;
}

/* Issue: header writes are ordered — a reader never sees a header mixing two
 * writes (seqlock), even while another thread rewrites it continuously. */
static void test_header_reads_never_torn(void **state)
{
    (void)state;
    tier_t *t = s_open("race", 2, 4096);
    char err[256];
    struct race r = {0};
    assert_int_equal(tier_seg_attach(s_name, 0, 0, &r.seg, err, sizeof err), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, s_header_writer, &r), 0);
    /* Start reading once the writer runs (bounded poll, no sleep). */
    for (long spin = 0; spin < 100000000L && !tier_seg_serving(r.seg, 1); spin++)
        sched_yield();
    assert_true(tier_seg_serving(r.seg, 1));
    int reads = 0, torn = 0;
    for (int i = 0; i < 300000; i++) {
        tier_slot_header_t h;
        int rc = tier_get_header(t, 1, &h);
        if (rc == 0) {
            reads++;
            torn += !s_header_consistent(&h);
        } else {
            assert_int_equal(rc, -EAGAIN);
        }
    }
    __atomic_store_n(&r.stop, 1, __ATOMIC_RELAXED);
    pthread_join(th, NULL);
    tier_slot_header_t last;
    assert_int_equal(tier_get_header(t, 1, &last), 0);
    assert_true(s_header_consistent(&last));
    assert_true(reads > 0);
    assert_int_equal(torn, 0);
    tier_seg_detach(&r.seg);
    tier_close(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_open_close_removes_segment, s_teardown),
        cmocka_unit_test_teardown(test_slot_data_aligned_for_dma, s_teardown),
        cmocka_unit_test_teardown(test_write_read_round_trip_iov, s_teardown),
        cmocka_unit_test_teardown(test_headers_inventory_probe, s_teardown),
        cmocka_unit_test_teardown(test_forked_client_writes_parent_reads, s_teardown),
        cmocka_unit_test_teardown(test_attach_rejects_bad_segments, s_teardown),
        cmocka_unit_test_teardown(test_checksum_is_xxh3_of_concatenation, s_teardown),
        cmocka_unit_test_teardown(test_bounds_rejected, s_teardown),
        cmocka_unit_test_teardown(test_open_rejects_bad_config, s_teardown),
        cmocka_unit_test_teardown(test_segment_mode_and_shm_group, s_teardown),
        cmocka_unit_test_teardown(test_reopen_replaces_stale_segment, s_teardown),
        cmocka_unit_test_teardown(test_open_refuses_live_owner, s_teardown),
        cmocka_unit_test_teardown(test_client_sees_owner_close, s_teardown),
        cmocka_unit_test_teardown(test_prefault_measured, s_teardown),
        cmocka_unit_test_teardown(test_header_reads_never_torn, s_teardown),
    };
    return cmocka_run_group_tests(tests, s_group_setup, NULL);
}
