/* tier_host.c — host tier backend: a POSIX shm segment holding a superblock,
 * a slot header array and 4096-aligned slot data (layout in tier_host.h).
 * The owner (tier process) creates, pre-faults and removes the segment;
 * clients on the same host attach by name and copy directly. Ownership is an
 * flock on the segment held for the owner's lifetime, so a segment left by a
 * dead process is told apart from one in use. Nothing here allocates after
 * open/attach, and nothing trusts the contents of a segment it did not create:
 * geometry is validated once and kept in process-local fields. */
#include "tier_host.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define S_SHM_MODE 0600     /* same-user clients only */
#define S_CREATE_ATTEMPTS 4 /* replace-stale races before giving up */
#define S_SPINS_BEFORE_YIELD 64

struct s_super {
    uint64_t magic;
    uint32_t version;
    uint32_t header_size;
    uint64_t slot_size;
    uint64_t capacity;
    uint64_t slot_stride;
    uint64_t headers_off;
    uint64_t data_off;
    uint64_t total_len;
    uint64_t epoch;
    uint32_t owner_pid;
    uint32_t live;
    char name[64];
};

struct s_slot_hdr {
    uint32_t seq;
    uint32_t state;
    uint64_t key[2];
    uint32_t instance;
    uint32_t reserved0;
    uint64_t size;
    uint64_t checksum;
    uint64_t deadline_ms;
    uint64_t reserved1;
};

/* The layout is an ABI between processes: pin it to the documented offsets. */
_Static_assert(sizeof(struct s_super) <= TIER_HOST_SUPER_SIZE, "superblock fits its page");
_Static_assert(offsetof(struct s_super, epoch) == 64, "superblock layout");
_Static_assert(offsetof(struct s_super, live) == 76, "superblock layout");
_Static_assert(offsetof(struct s_super, name) == 80, "superblock layout");
_Static_assert(sizeof(struct s_slot_hdr) == TIER_HOST_HEADER_SIZE, "slot header record");
_Static_assert(offsetof(struct s_slot_hdr, key) == 8, "slot header layout");
_Static_assert(offsetof(struct s_slot_hdr, size) == 32, "slot header layout");
_Static_assert(offsetof(struct s_slot_hdr, deadline_ms) == 48, "slot header layout");
_Static_assert(sizeof(tier_key_t) == 2 * sizeof(uint64_t), "key is two words");

struct s_layout {
    uint64_t stride;
    uint64_t headers_off;
    uint64_t data_off;
    uint64_t total;
};

struct tier_host_seg {
    uint8_t *base;
    size_t len;
    struct s_super *sb;
    struct s_slot_hdr *hdrs;
    uint8_t *data;
    uint64_t capacity; /* validated copies: never re-read from shared memory */
    uint64_t slot_size;
    uint64_t stride;
    uint64_t epoch;
    int fd; /* owner only (holds the flock); -1 for clients */
    bool owner;
    uint64_t prefault_ns;
    char name[TIER_PATH_MAX];
};

static void s_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void s_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static bool s_align_up(uint64_t v, uint64_t align, uint64_t *out)
{
    if (__builtin_add_overflow(v, align - 1, out))
        return false;
    *out &= ~(align - 1);
    return true;
}

/* Layout for a geometry; -EOVERFLOW when it does not fit in size_t / off_t. */
static int s_layout(uint64_t capacity, uint64_t slot_size, struct s_layout *l)
{
    uint64_t hdr_bytes, data_bytes;
    if (capacity == 0 || slot_size == 0)
        return -EINVAL;
    l->headers_off = TIER_HOST_SUPER_SIZE;
    if (!s_align_up(slot_size, TIER_HOST_ALIGN, &l->stride) ||
        __builtin_mul_overflow(capacity, (uint64_t)TIER_HOST_HEADER_SIZE, &hdr_bytes) ||
        __builtin_add_overflow(l->headers_off, hdr_bytes, &l->data_off) ||
        !s_align_up(l->data_off, TIER_HOST_ALIGN, &l->data_off) ||
        __builtin_mul_overflow(capacity, l->stride, &data_bytes) ||
        __builtin_add_overflow(l->data_off, data_bytes, &l->total))
        return -EOVERFLOW;
    if (l->total > (uint64_t)INT64_MAX || l->total > (uint64_t)SIZE_MAX)
        return -EOVERFLOW;
    return 0;
}

int tier_host_name_check(const char *name)
{
    if (!name)
        return -EINVAL;
    size_t len = strnlen(name, TIER_HOST_SHM_NAME_MAX + 1);
    if (len < 2 || len > TIER_HOST_SHM_NAME_MAX || name[0] != '/')
        return -EINVAL;
    if (strchr(name + 1, '/') || strcmp(name, "/.") == 0 || strcmp(name, "/..") == 0)
        return -EINVAL;
    return 0;
}

static uint64_t s_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t s_new_epoch(void)
{
    uint64_t e = 0;
    if (getrandom(&e, sizeof e, GRND_NONBLOCK) != (ssize_t)sizeof e)
        e = s_now_ns() ^ ((uint64_t)getpid() << 32);
    return e ? e : 1;
}

/* Points the segment handle at a mapping whose geometry was validated. */
static void s_seg_bind(tier_host_seg_t *seg, void *base, size_t len, const struct s_layout *l,
                       uint64_t capacity, uint64_t slot_size)
{
    seg->base = base;
    seg->len = len;
    seg->sb = base;
    seg->hdrs = (struct s_slot_hdr *)(seg->base + l->headers_off);
    seg->data = seg->base + l->data_off;
    seg->capacity = capacity;
    seg->slot_size = slot_size;
    seg->stride = l->stride;
}

/* ---- slot data ---------------------------------------------------------- */

static int s_check_iov(const tier_host_seg_t *seg, uint64_t slot, const struct iovec *iov, int n)
{
    if (!seg)
        return -EINVAL;
    if (slot >= seg->capacity)
        return -ERANGE;
    if (!iov || n <= 0 || n > TIER_MAX_IOV)
        return -EINVAL;
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (iov[i].iov_len && !iov[i].iov_base)
            return -EINVAL;
        if (__builtin_add_overflow(total, (uint64_t)iov[i].iov_len, &total))
            return -EMSGSIZE;
    }
    return total <= seg->slot_size ? 0 : -EMSGSIZE;
}

void *tier_host_seg_slot(tier_host_seg_t *seg, uint64_t slot)
{
    if (!seg || slot >= seg->capacity)
        return NULL;
    return seg->data + slot * seg->stride;
}

int tier_host_seg_write(tier_host_seg_t *seg, uint64_t slot, const struct iovec *iov, int n)
{
    int rc = s_check_iov(seg, slot, iov, n);
    if (rc < 0)
        return rc;
    uint8_t *dst = tier_host_seg_slot(seg, slot);
    for (int i = 0; i < n; i++) {
        if (iov[i].iov_len)
            memcpy(dst, iov[i].iov_base, iov[i].iov_len);
        dst += iov[i].iov_len;
    }
    return 0;
}

int tier_host_seg_read(tier_host_seg_t *seg, uint64_t slot, struct iovec *iov, int n)
{
    int rc = s_check_iov(seg, slot, iov, n);
    if (rc < 0)
        return rc;
    const uint8_t *src = tier_host_seg_slot(seg, slot);
    for (int i = 0; i < n; i++) {
        if (iov[i].iov_len)
            memcpy(iov[i].iov_base, src, iov[i].iov_len);
        src += iov[i].iov_len;
    }
    return 0;
}

/* ---- slot headers (seqlock; every field an atomic word, state last) ----- */

int tier_host_seg_put_header(tier_host_seg_t *seg, uint64_t slot, const tier_slot_header_t *h)
{
    if (!seg || !h)
        return -EINVAL;
    if (slot >= seg->capacity)
        return -ERANGE;
    if (h->size > seg->slot_size || h->state > TIER_SLOT_DELETING)
        return -EINVAL;
    struct s_slot_hdr *r = &seg->hdrs[slot];
    uint64_t key[2];
    memcpy(key, h->key.b, sizeof key);

    /* Odd seq first (a writer that died mid-update left it odd: stay odd). */
    uint32_t seq = __atomic_load_n(&r->seq, __ATOMIC_RELAXED) | 1u;
    __atomic_store_n(&r->seq, seq, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&r->key[0], key[0], __ATOMIC_RELAXED);
    __atomic_store_n(&r->key[1], key[1], __ATOMIC_RELAXED);
    __atomic_store_n(&r->instance, h->instance, __ATOMIC_RELAXED);
    __atomic_store_n(&r->size, h->size, __ATOMIC_RELAXED);
    __atomic_store_n(&r->checksum, h->checksum, __ATOMIC_RELAXED);
    __atomic_store_n(&r->deadline_ms, h->deadline_ms, __ATOMIC_RELAXED);
    /* State last, release: whoever sees it also sees the bytes and fields. */
    __atomic_store_n(&r->state, h->state, __ATOMIC_RELEASE);
    __atomic_store_n(&r->seq, seq + 1u, __ATOMIC_RELEASE);
    return 0;
}

/* One seqlock read attempt: true when the snapshot is consistent. */
static bool s_header_try(const struct s_slot_hdr *r, tier_slot_header_t *h)
{
    uint32_t s1 = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
    if (s1 & 1u)
        return false;
    uint64_t key[2] = {__atomic_load_n(&r->key[0], __ATOMIC_RELAXED),
                       __atomic_load_n(&r->key[1], __ATOMIC_RELAXED)};
    h->instance = __atomic_load_n(&r->instance, __ATOMIC_RELAXED);
    h->size = __atomic_load_n(&r->size, __ATOMIC_RELAXED);
    h->checksum = __atomic_load_n(&r->checksum, __ATOMIC_RELAXED);
    h->deadline_ms = __atomic_load_n(&r->deadline_ms, __ATOMIC_RELAXED);
    h->state = __atomic_load_n(&r->state, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&r->seq, __ATOMIC_RELAXED) != s1)
        return false;
    memcpy(h->key.b, key, sizeof key);
    return true;
}

int tier_host_seg_get_header(tier_host_seg_t *seg, uint64_t slot, tier_slot_header_t *h)
{
    if (!seg || !h)
        return -EINVAL;
    if (slot >= seg->capacity)
        return -ERANGE;
    const struct s_slot_hdr *r = &seg->hdrs[slot];
    for (int i = 0; i < TIER_HOST_HEADER_RETRIES; i++) {
        if (s_header_try(r, h))
            return 0;
        if (i >= S_SPINS_BEFORE_YIELD)
            sched_yield();
    }
    return -EAGAIN;
}

bool tier_host_seg_serving(tier_host_seg_t *seg, uint64_t slot)
{
    if (!seg || slot >= seg->capacity)
        return false;
    return __atomic_load_n(&seg->hdrs[slot].state, __ATOMIC_ACQUIRE) == TIER_SLOT_SERVING;
}

/* ---- client side -------------------------------------------------------- */

uint64_t tier_host_seg_capacity(const tier_host_seg_t *seg)
{
    return seg ? seg->capacity : 0;
}

uint64_t tier_host_seg_slot_size(const tier_host_seg_t *seg)
{
    return seg ? seg->slot_size : 0;
}

uint64_t tier_host_seg_epoch(const tier_host_seg_t *seg)
{
    return seg ? seg->epoch : 0;
}

bool tier_host_seg_live(const tier_host_seg_t *seg)
{
    return seg && __atomic_load_n(&seg->sb->live, __ATOMIC_ACQUIRE) == 1;
}

/* Checks a superblock copy against itself, the file size and expectations. */
static int s_super_check(const char *name, const struct s_super *sb, uint64_t file_len,
                         uint64_t slot_size, uint64_t capacity, struct s_layout *l, char *err,
                         size_t errlen)
{
    if (sb->magic != TIER_HOST_MAGIC) {
        s_err(err, errlen, "shm %s: not a kvtier host segment (magic %#llx)", name,
              (unsigned long long)sb->magic);
        return -EPROTO;
    }
    if (sb->version != TIER_HOST_VERSION || sb->header_size != TIER_HOST_HEADER_SIZE) {
        s_err(err, errlen, "shm %s: layout version %u / header size %u, expected %u / %u", name,
              sb->version, sb->header_size, TIER_HOST_VERSION, TIER_HOST_HEADER_SIZE);
        return -EPROTO;
    }
    if (s_layout(sb->capacity, sb->slot_size, l) < 0 || l->stride != sb->slot_stride ||
        l->headers_off != sb->headers_off || l->data_off != sb->data_off ||
        l->total != sb->total_len) {
        s_err(err, errlen, "shm %s: inconsistent superblock (capacity %llu, slot size %llu)", name,
              (unsigned long long)sb->capacity, (unsigned long long)sb->slot_size);
        return -EPROTO;
    }
    if (file_len < l->total) {
        s_err(err, errlen, "shm %s: truncated: %llu bytes, superblock says %llu", name,
              (unsigned long long)file_len, (unsigned long long)l->total);
        return -EPROTO;
    }
    if ((slot_size && slot_size != sb->slot_size) || (capacity && capacity != sb->capacity)) {
        s_err(err, errlen, "shm %s: geometry %llu slots x %llu bytes, expected %llu x %llu", name,
              (unsigned long long)sb->capacity, (unsigned long long)sb->slot_size,
              (unsigned long long)capacity, (unsigned long long)slot_size);
        return -EPROTO;
    }
    return 0;
}

/* Reads a copy of the superblock of an open segment (magic acquire first). */
static int s_super_read(const char *name, int fd, uint64_t file_len, struct s_super *out, char *err,
                        size_t errlen)
{
    if (file_len < TIER_HOST_SUPER_SIZE) {
        s_err(err, errlen, "shm %s: truncated: %llu bytes, shorter than a superblock", name,
              (unsigned long long)file_len);
        return -EPROTO;
    }
    void *p = mmap(NULL, TIER_HOST_SUPER_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int rc = -errno;
        s_err(err, errlen, "shm %s: mmap superblock: %s", name, strerror(-rc));
        return rc;
    }
    const struct s_super *sb = p;
    uint64_t magic = __atomic_load_n(&sb->magic, __ATOMIC_ACQUIRE);
    memcpy(out, sb, sizeof *out);
    out->magic = magic;
    munmap(p, TIER_HOST_SUPER_SIZE);
    if (magic == 0) {
        s_err(err, errlen, "shm %s: not initialised yet (owner still creating it?)", name);
        return -EAGAIN;
    }
    return 0;
}

static int s_attach_fd(const char *name, int fd, uint64_t slot_size, uint64_t capacity,
                       tier_host_seg_t *seg, char *err, size_t errlen)
{
    struct stat st;
    struct s_super sb = {0};
    struct s_layout l;
    if (fstat(fd, &st) < 0) {
        int rc = -errno;
        s_err(err, errlen, "shm %s: fstat: %s", name, strerror(-rc));
        return rc;
    }
    uint64_t file_len = st.st_size > 0 ? (uint64_t)st.st_size : 0;
    int rc = s_super_read(name, fd, file_len, &sb, err, errlen);
    if (rc < 0)
        return rc;
    rc = s_super_check(name, &sb, file_len, slot_size, capacity, &l, err, errlen);
    if (rc < 0)
        return rc;
    void *base = mmap(NULL, (size_t)l.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        rc = -errno;
        s_err(err, errlen, "shm %s: mmap %llu bytes: %s", name, (unsigned long long)l.total,
              strerror(-rc));
        return rc;
    }
    s_seg_bind(seg, base, (size_t)l.total, &l, sb.capacity, sb.slot_size);
    seg->epoch = sb.epoch;
    return 0;
}

int tier_host_attach(const char *name, uint64_t slot_size, uint64_t capacity, tier_host_seg_t **out,
                     char *err, size_t errlen)
{
    if (out)
        *out = NULL;
    if (!out || tier_host_name_check(name) < 0) {
        s_err(err, errlen, "shm %s: invalid name (want \"/name\", no other '/', at most %d bytes)",
              name ? name : "(null)", TIER_HOST_SHM_NAME_MAX);
        return -EINVAL;
    }
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        int rc = -errno;
        s_err(err, errlen, "shm %s: %s", name,
              rc == -ENOENT ? "no such segment (is the host tier running?)" : strerror(-rc));
        return rc;
    }
    tier_host_seg_t *seg = calloc(1, sizeof *seg);
    if (!seg) {
        close(fd);
        s_err(err, errlen, "shm %s: out of memory", name);
        return -ENOMEM;
    }
    int rc = s_attach_fd(name, fd, slot_size, capacity, seg, err, errlen);
    close(fd); /* the mapping keeps the segment; clients hold no lock */
    if (rc < 0) {
        free(seg);
        return rc;
    }
    seg->fd = -1;
    snprintf(seg->name, sizeof seg->name, "%s", name);
    *out = seg;
    return 0;
}

void tier_host_detach(tier_host_seg_t **segp)
{
    if (!segp || !*segp)
        return;
    tier_host_seg_t *seg = *segp;
    if (seg->base)
        munmap(seg->base, seg->len);
    free(seg);
    *segp = NULL;
}

/* ---- owner side (the ops table) ----------------------------------------- */

/* True when `name` currently names the object open on fd. */
static bool s_names_fd(const char *name, int fd)
{
    struct stat a, b;
    int nfd = shm_open(name, O_RDONLY, 0);
    if (nfd < 0)
        return false;
    bool same =
        fstat(nfd, &a) == 0 && fstat(fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    close(nfd);
    return same;
}

/* Removes a segment of this name whose owner is gone (no flock held). */
static int s_remove_stale(const char *name)
{
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    int rc = 0;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0)
        rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
    else if (s_names_fd(name, fd) && shm_unlink(name) < 0 && errno != ENOENT)
        rc = -errno;
    close(fd);
    return rc;
}

/* Creates a fresh segment, replacing a stale one; returns a locked fd. */
static int s_create(const char *name)
{
    for (int i = 0; i < S_CREATE_ATTEMPTS; i++) {
        int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, S_SHM_MODE);
        if (fd < 0) {
            if (errno != EEXIST)
                return -errno;
            int rc = s_remove_stale(name);
            if (rc < 0)
                return rc;
            continue;
        }
        /* Another opener may have taken our fresh segment for stale before
         * we locked it; then the name is no longer ours: try again. */
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 && s_names_fd(name, fd))
            return fd;
        close(fd);
    }
    return -EEXIST;
}

static int s_reserve(int fd, uint64_t total)
{
    struct statvfs vfs;
    if (fstatvfs(fd, &vfs) == 0 && vfs.f_blocks != 0 &&
        (uint64_t)vfs.f_bavail * vfs.f_frsize < total)
        return -ENOSPC;
    if (ftruncate(fd, (off_t)total) < 0)
        return -errno;
    return 0;
}

/* Allocates the memory now (a clean -ENOSPC instead of SIGBUS later) and
 * touches every page so the first block copies do not pay for page faults. */
static int s_prefault(tier_host_seg_t *seg, int fd)
{
    uint64_t t0 = s_now_ns();
    int rc = posix_fallocate(fd, 0, (off_t)seg->len);
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL)
        return -rc;
    long page = sysconf(_SC_PAGESIZE);
    size_t step = page > 0 ? (size_t)page : TIER_HOST_ALIGN;
    volatile uint8_t *p = seg->base;
    for (size_t off = 0; off < seg->len; off += step)
        p[off] = 0; /* fresh segment: every byte is already zero */
    seg->prefault_ns = s_now_ns() - t0;
    if (seg->prefault_ns == 0)
        seg->prefault_ns = 1;
    return 0;
}

static void s_super_init(tier_host_seg_t *seg, const tier_config_t *cfg, const struct s_layout *l)
{
    struct s_super *sb = seg->sb;
    sb->version = TIER_HOST_VERSION;
    sb->header_size = TIER_HOST_HEADER_SIZE;
    sb->slot_size = cfg->slot_size;
    sb->capacity = cfg->capacity;
    sb->slot_stride = l->stride;
    sb->headers_off = l->headers_off;
    sb->data_off = l->data_off;
    sb->total_len = l->total;
    sb->epoch = seg->epoch;
    sb->owner_pid = (uint32_t)getpid();
    snprintf(sb->name, sizeof sb->name, "%s", cfg->name);
    __atomic_store_n(&sb->live, 1u, __ATOMIC_RELAXED);
    __atomic_store_n(&sb->magic, TIER_HOST_MAGIC, __ATOMIC_RELEASE);
}

static int s_open(tier_t *t, const tier_config_t *cfg)
{
    struct s_layout l;
    int rc = tier_host_name_check(cfg->path);
    if (rc < 0)
        return rc;
    rc = s_layout(cfg->capacity, cfg->slot_size, &l);
    if (rc < 0)
        return rc;
    tier_host_seg_t *seg = calloc(1, sizeof *seg);
    if (!seg)
        return -ENOMEM;
    snprintf(seg->name, sizeof seg->name, "%s", cfg->path);
    seg->owner = true;
    seg->epoch = s_new_epoch();
    seg->fd = s_create(seg->name);
    if (seg->fd < 0) {
        rc = seg->fd;
        goto out_free;
    }
    rc = s_reserve(seg->fd, l.total);
    if (rc < 0)
        goto out_unlink;
    void *base = mmap(NULL, (size_t)l.total, PROT_READ | PROT_WRITE, MAP_SHARED, seg->fd, 0);
    if (base == MAP_FAILED) {
        rc = -errno;
        goto out_unlink;
    }
    s_seg_bind(seg, base, (size_t)l.total, &l, cfg->capacity, cfg->slot_size);
    if (cfg->prefault && (rc = s_prefault(seg, seg->fd)) < 0)
        goto out_unmap;
    s_super_init(seg, cfg, &l);
    t->priv = seg;
    return 0;

out_unmap:
    munmap(seg->base, seg->len);
out_unlink:
    shm_unlink(seg->name);
    close(seg->fd);
out_free:
    free(seg);
    return rc;
}

static void s_close(tier_t *t)
{
    tier_host_seg_t *seg = t->priv;
    if (!seg)
        return;
    __atomic_store_n(&seg->sb->live, 0u, __ATOMIC_RELEASE);
    /* Remove the name only while it is still ours (we hold the lock). */
    if (s_names_fd(seg->name, seg->fd))
        shm_unlink(seg->name);
    munmap(seg->base, seg->len);
    close(seg->fd);
    free(seg);
    t->priv = NULL;
}

static int s_write(tier_t *t, uint64_t slot, const struct iovec *iov, int n)
{
    return tier_host_seg_write(t->priv, slot, iov, n);
}

static int s_read(tier_t *t, uint64_t slot, struct iovec *iov, int n)
{
    return tier_host_seg_read(t->priv, slot, iov, n);
}

static int s_put_header(tier_t *t, uint64_t slot, const tier_slot_header_t *h)
{
    return tier_host_seg_put_header(t->priv, slot, h);
}

static int s_get_header(tier_t *t, uint64_t slot, tier_slot_header_t *h)
{
    return tier_host_seg_get_header(t->priv, slot, h);
}

/* A slot whose header stays mid-write (a writer died in put_header) is not
 * reported: its contents are undefined until the next put_header. */
static int s_inventory(tier_t *t, tier_inventory_fn fn, void *arg)
{
    tier_host_seg_t *seg = t->priv;
    for (uint64_t i = 0; i < seg->capacity; i++) {
        tier_slot_header_t h;
        if (__atomic_load_n(&seg->hdrs[i].state, __ATOMIC_RELAXED) != TIER_SLOT_SERVING)
            continue;
        if (tier_host_seg_get_header(seg, i, &h) < 0 || h.state != TIER_SLOT_SERVING)
            continue;
        int rc = fn(arg, i, &h);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int s_probe(tier_t *t, const uint64_t *slots, size_t n, bool *present)
{
    tier_host_seg_t *seg = t->priv;
    for (size_t i = 0; i < n; i++) {
        if (slots[i] >= seg->capacity)
            return -ERANGE;
        present[i] = tier_host_seg_serving(seg, slots[i]);
    }
    return 0;
}

static void *s_map(tier_t *t, size_t *len)
{
    tier_host_seg_t *seg = t->priv;
    if (len)
        *len = seg->len;
    return seg->base;
}

uint64_t tier_host_prefault_ns(const tier_t *t)
{
    if (!t || t->ops != &tier_host_ops || !t->priv)
        return 0;
    return ((const tier_host_seg_t *)t->priv)->prefault_ns;
}

const struct tier_ops tier_host_ops = {
    .version = TIER_OPS_VERSION,
    .kind = "host",
    .open = s_open,
    .close = s_close,
    .write = s_write,
    .read = s_read,
    .put_header = s_put_header,
    .get_header = s_get_header,
    .inventory = s_inventory,
    .probe = s_probe,
    .map = s_map,
};
