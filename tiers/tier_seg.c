/* tier_seg.c — the host segment library (tier_seg.h): layout, attach by name,
 * slot bytes and the seqlock header protocol. Shared by the host backend (the
 * owner, tier_host.c) and same-host clients. Never trusts the contents of a
 * segment it did not create: geometry is validated once at attach and kept in
 * process-local fields; nothing allocates after attach. */
#include "tier_seg.h"
#include "tier_seg_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

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
int tier_seg_layout(uint64_t capacity, uint64_t slot_size, struct tier_seg_layout *l)
{
    uint64_t hdr_bytes, data_bytes;
    if (capacity == 0 || slot_size == 0)
        return -EINVAL;
    l->headers_off = TIER_SEG_SUPER_SIZE;
    if (!s_align_up(slot_size, TIER_SEG_ALIGN, &l->stride) ||
        __builtin_mul_overflow(capacity, (uint64_t)TIER_SEG_HEADER_SIZE, &hdr_bytes) ||
        __builtin_add_overflow(l->headers_off, hdr_bytes, &l->data_off) ||
        !s_align_up(l->data_off, TIER_SEG_ALIGN, &l->data_off) ||
        __builtin_mul_overflow(capacity, l->stride, &data_bytes) ||
        __builtin_add_overflow(l->data_off, data_bytes, &l->total))
        return -EOVERFLOW;
    if (l->total > (uint64_t)INT64_MAX || l->total > (uint64_t)SIZE_MAX)
        return -EOVERFLOW;
    return 0;
}

int tier_seg_name_check(const char *name)
{
    if (!name)
        return -EINVAL;
    size_t len = strnlen(name, TIER_SEG_SHM_NAME_MAX + 1);
    if (len < 2 || len > TIER_SEG_SHM_NAME_MAX || name[0] != '/')
        return -EINVAL;
    if (strchr(name + 1, '/') || strcmp(name, "/.") == 0 || strcmp(name, "/..") == 0)
        return -EINVAL;
    return 0;
}

uint64_t tier_seg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t tier_seg_new_epoch(void)
{
    uint64_t e = 0;
    if (getrandom(&e, sizeof e, GRND_NONBLOCK) != (ssize_t)sizeof e)
        e = tier_seg_now_ns() ^ ((uint64_t)getpid() << 32);
    return e ? e : 1;
}

/* Points the segment handle at a mapping whose geometry was validated. */
void tier_seg_bind(tier_seg_t *seg, void *base, size_t len, const struct tier_seg_layout *l,
                   uint64_t capacity, uint64_t slot_size)
{
    seg->base = base;
    seg->len = len;
    seg->sb = base;
    seg->hdrs = (struct tier_seg_slot_hdr *)(seg->base + l->headers_off);
    seg->data = seg->base + l->data_off;
    seg->capacity = capacity;
    seg->slot_size = slot_size;
    seg->stride = l->stride;
}

/* ---- slot data ---------------------------------------------------------- */

static int s_check_iov(const tier_seg_t *seg, uint64_t slot, const struct iovec *iov, int n)
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

void *tier_seg_slot(tier_seg_t *seg, uint64_t slot)
{
    if (!seg || slot >= seg->capacity)
        return NULL;
    return seg->data + slot * seg->stride;
}

int tier_seg_write(tier_seg_t *seg, uint64_t slot, const struct iovec *iov, int n)
{
    int rc = s_check_iov(seg, slot, iov, n);
    if (rc < 0)
        return rc;
    uint8_t *dst = tier_seg_slot(seg, slot);
    for (int i = 0; i < n; i++) {
        if (iov[i].iov_len)
            memcpy(dst, iov[i].iov_base, iov[i].iov_len);
        dst += iov[i].iov_len;
    }
    return 0;
}

int tier_seg_read(tier_seg_t *seg, uint64_t slot, struct iovec *iov, int n)
{
    int rc = s_check_iov(seg, slot, iov, n);
    if (rc < 0)
        return rc;
    const uint8_t *src = tier_seg_slot(seg, slot);
    for (int i = 0; i < n; i++) {
        if (iov[i].iov_len)
            memcpy(iov[i].iov_base, src, iov[i].iov_len);
        src += iov[i].iov_len;
    }
    return 0;
}

/* ---- slot headers (seqlock; every field an atomic word, state last) ----- */

int tier_seg_put_header(tier_seg_t *seg, uint64_t slot, const tier_slot_header_t *h)
{
    if (!seg || !h)
        return -EINVAL;
    if (slot >= seg->capacity)
        return -ERANGE;
    if (h->size > seg->slot_size || h->state > TIER_SLOT_DELETING)
        return -EINVAL;
    struct tier_seg_slot_hdr *r = &seg->hdrs[slot];
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
static bool s_header_try(const struct tier_seg_slot_hdr *r, tier_slot_header_t *h)
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

int tier_seg_get_header(tier_seg_t *seg, uint64_t slot, tier_slot_header_t *h)
{
    if (!seg || !h)
        return -EINVAL;
    if (slot >= seg->capacity)
        return -ERANGE;
    const struct tier_seg_slot_hdr *r = &seg->hdrs[slot];
    for (int i = 0; i < TIER_SEG_SPINS_BEFORE_YIELD; i++)
        if (s_header_try(r, h))
            return 0;
    /* bounded in time, not in tries: yields cost from microseconds to a time
     * slice, and a header left busy by a dead writer (or a hostile segment)
     * must cost every reader little (fuzz_host found 64 such slots taking 12 s) */
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        sched_yield();
        if (s_header_try(r, h))
            return 0;
        clock_gettime(CLOCK_MONOTONIC, &t);
        int64_t us = (int64_t)(t.tv_sec - t0.tv_sec) * 1000000 + (t.tv_nsec - t0.tv_nsec) / 1000;
        if (us > TIER_SEG_HEADER_WAIT_US)
            return -EAGAIN;
    }
}

bool tier_seg_serving(tier_seg_t *seg, uint64_t slot)
{
    if (!seg || slot >= seg->capacity)
        return false;
    return __atomic_load_n(&seg->hdrs[slot].state, __ATOMIC_ACQUIRE) == TIER_SLOT_SERVING;
}

/* ---- client side -------------------------------------------------------- */

uint64_t tier_seg_capacity(const tier_seg_t *seg)
{
    return seg ? seg->capacity : 0;
}

uint64_t tier_seg_slot_size(const tier_seg_t *seg)
{
    return seg ? seg->slot_size : 0;
}

uint64_t tier_seg_epoch(const tier_seg_t *seg)
{
    return seg ? seg->epoch : 0;
}

bool tier_seg_verify_reads(const tier_seg_t *seg)
{
    return seg && (seg->sb->flags & TIER_SEG_FLAG_VERIFY_READS) != 0;
}

bool tier_seg_live(const tier_seg_t *seg)
{
    return seg && __atomic_load_n(&seg->sb->live, __ATOMIC_ACQUIRE) == 1;
}

/* Checks a superblock copy against itself, the file size and expectations. */
static int s_super_check(const char *name, const struct tier_seg_super *sb, uint64_t file_len,
                         uint64_t slot_size, uint64_t capacity, struct tier_seg_layout *l,
                         char *err, size_t errlen)
{
    if (sb->magic != TIER_SEG_MAGIC) {
        s_err(err, errlen, "shm %s: not a kvtier host segment (magic %#llx)", name,
              (unsigned long long)sb->magic);
        return -EPROTO;
    }
    if (sb->version != TIER_SEG_VERSION || sb->header_size != TIER_SEG_HEADER_SIZE) {
        s_err(err, errlen, "shm %s: layout version %u / header size %u, expected %u / %u", name,
              sb->version, sb->header_size, TIER_SEG_VERSION, TIER_SEG_HEADER_SIZE);
        return -EPROTO;
    }
    if (tier_seg_layout(sb->capacity, sb->slot_size, l) < 0 || l->stride != sb->slot_stride ||
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
static int s_super_read(const char *name, int fd, uint64_t file_len, struct tier_seg_super *out,
                        char *err, size_t errlen)
{
    if (file_len < TIER_SEG_SUPER_SIZE) {
        s_err(err, errlen, "shm %s: truncated: %llu bytes, shorter than a superblock", name,
              (unsigned long long)file_len);
        return -EPROTO;
    }
    void *p = mmap(NULL, TIER_SEG_SUPER_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int rc = -errno;
        s_err(err, errlen, "shm %s: mmap superblock: %s", name, strerror(-rc));
        return rc;
    }
    const struct tier_seg_super *sb = p;
    uint64_t magic = __atomic_load_n(&sb->magic, __ATOMIC_ACQUIRE);
    memcpy(out, sb, sizeof *out);
    out->magic = magic;
    munmap(p, TIER_SEG_SUPER_SIZE);
    if (magic == 0) {
        s_err(err, errlen, "shm %s: not initialised yet (owner still creating it?)", name);
        return -EAGAIN;
    }
    return 0;
}

static int s_attach_fd(const char *name, int fd, uint64_t slot_size, uint64_t capacity,
                       tier_seg_t *seg, char *err, size_t errlen)
{
    struct stat st;
    struct tier_seg_super sb = {0};
    struct tier_seg_layout l;
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
    tier_seg_bind(seg, base, (size_t)l.total, &l, sb.capacity, sb.slot_size);
    seg->epoch = sb.epoch;
    return 0;
}

int tier_seg_attach(const char *name, uint64_t slot_size, uint64_t capacity, tier_seg_t **out,
                    char *err, size_t errlen)
{
    if (out)
        *out = NULL;
    if (!out || tier_seg_name_check(name) < 0) {
        s_err(err, errlen, "shm %s: invalid name (want \"/name\", no other '/', at most %d bytes)",
              name ? name : "(null)", TIER_SEG_SHM_NAME_MAX);
        return -EINVAL;
    }
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        int rc = -errno;
        s_err(err, errlen, "shm %s: %s", name,
              rc == -ENOENT ? "no such segment (is the host tier running?)" : strerror(-rc));
        return rc;
    }
    tier_seg_t *seg = calloc(1, sizeof *seg);
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

void tier_seg_detach(tier_seg_t **segp)
{
    if (!segp || !*segp)
        return;
    tier_seg_t *seg = *segp;
    if (seg->base)
        munmap(seg->base, seg->len);
    free(seg);
    *segp = NULL;
}

/* ---- writers ---- */

#define S_PID_MASK ((1ull << TIER_SEG_WRITER_PID_BITS) - 1)

uint64_t tier_seg_writer_id(uint64_t a, uint64_t b)
{
    /* splitmix64 finaliser over both words */
    uint64_t x = a * 0x9E3779B97F4A7C15ull ^ b;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    uint64_t id = (x & ~TIER_SEG_WRITER_BUSY & ~S_PID_MASK) | ((uint64_t)getpid() & S_PID_MASK);
    return id ? id : 1;
}

static bool s_holder_gone(uint64_t word)
{
    pid_t pid = (pid_t)(word & S_PID_MASK);
    return pid > 0 && kill(pid, 0) < 0 && errno == ESRCH;
}

int tier_seg_claim(tier_seg_t *seg, uint64_t slot, uint64_t writer, uint32_t wait_ms,
                   uint32_t *holder)
{
    if (!seg || writer == 0 || (writer & TIER_SEG_WRITER_BUSY))
        return -EINVAL;
    if (slot >= seg->capacity)
        return -ERANGE;
    uint64_t *w = &seg->hdrs[slot].writer;
    uint64_t deadline = 0;
    for (uint32_t spins = 0;; spins++) {
        uint64_t cur = __atomic_load_n(w, __ATOMIC_ACQUIRE);
        if (!(cur & TIER_SEG_WRITER_BUSY) || s_holder_gone(cur)) {
            if (__atomic_compare_exchange_n(w, &cur, writer | TIER_SEG_WRITER_BUSY, false,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                return 0;
            continue; /* lost a race: look again */
        }
        /* another writer is in a chunk (microseconds), or stopped in one */
        uint64_t now = tier_seg_now_ns();
        if (deadline == 0)
            deadline = now + (uint64_t)wait_ms * 1000000u;
        if (now >= deadline) {
            if (holder)
                *holder = (uint32_t)(cur & S_PID_MASK);
            return -EBUSY;
        }
        if (spins > 64)
            (void)nanosleep(&(struct timespec){.tv_nsec = 50000}, NULL);
    }
}

int tier_seg_hold(tier_seg_t *seg, uint64_t slot, uint64_t writer)
{
    if (!seg || slot >= seg->capacity)
        return -ERANGE;
    uint64_t expect = writer;
    return __atomic_compare_exchange_n(&seg->hdrs[slot].writer, &expect,
                                       writer | TIER_SEG_WRITER_BUSY, false, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE)
               ? 0
               : -ESTALE;
}

void tier_seg_release(tier_seg_t *seg, uint64_t slot, uint64_t writer)
{
    if (!seg || slot >= seg->capacity)
        return;
    uint64_t expect = writer | TIER_SEG_WRITER_BUSY;
    (void)__atomic_compare_exchange_n(&seg->hdrs[slot].writer, &expect, writer, false,
                                      __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

/* ---- owner side ---- */

void tier_seg_init_super(tier_seg_t *seg, const char *tier_name, const struct tier_seg_layout *l,
                         bool verify_reads)
{
    struct tier_seg_super *sb = seg->sb;
    sb->version = TIER_SEG_VERSION;
    sb->header_size = TIER_SEG_HEADER_SIZE;
    sb->slot_size = seg->slot_size;
    sb->capacity = seg->capacity;
    sb->slot_stride = l->stride;
    sb->headers_off = l->headers_off;
    sb->data_off = l->data_off;
    sb->total_len = l->total;
    sb->epoch = seg->epoch;
    sb->owner_pid = (uint32_t)getpid();
    snprintf(sb->name, sizeof sb->name, "%s", tier_name);
    sb->flags = verify_reads ? TIER_SEG_FLAG_VERIFY_READS : 0;
    __atomic_store_n(&sb->live, 1u, __ATOMIC_RELAXED);
    __atomic_store_n(&sb->magic, TIER_SEG_MAGIC, __ATOMIC_RELEASE);
}
