/* tier_host.c — host tier backend: the owner side of a POSIX shm segment laid out
 * by the segment library (tier_seg.h). The owner (tier process) creates,
 * pre-faults and removes the segment; clients on the same host attach by name
 * with tier_seg.h and copy directly. Ownership is an flock on the segment held for
 * the owner's lifetime, so a segment left by a dead process is told apart from
 * one in use. The segment is mode 0600 (the tier process's user), or 0660 owned by
 * the "shm_group" option's group: whoever maps it reaches every slot
 * (docs/SECURITY.md, same-host access). Nothing here allocates after open. */
#include "tier_host.h"
#include "tier_seg_int.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
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
    for (int i = 0; i < TIER_SEG_CREATE_ATTEMPTS; i++) {
        int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, TIER_SEG_SHM_MODE);
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

/* The holder's flock is matched by the segment's inode in /proc/locks. */
int tier_host_owner(const char *name, char *buf, size_t len)
{
    buf[0] = '\0';
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "/dev/shm/%s", name[0] == '/' ? name + 1 : name);
    FILE *f = stat(path, &st) == 0 ? fopen("/proc/locks", "r") : NULL;
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        long pid = 0;
        unsigned maj = 0, min = 0;
        unsigned long long ino = 0;
        /* "1: FLOCK  ADVISORY  WRITE 1234 00:19:5678 0 EOF" */
        if (sscanf(line, "%*s FLOCK %*s %*s %ld %x:%x:%llu", &pid, &maj, &min, &ino) == 4 &&
            ino == (unsigned long long)st.st_ino && pid > 0) {
            char cmd[160] = "", cpath[64];
            snprintf(cpath, sizeof cpath, "/proc/%ld/cmdline", pid);
            FILE *c = fopen(cpath, "r");
            size_t n = c ? fread(cmd, 1, sizeof cmd - 1, c) : 0;
            if (c)
                fclose(c);
            while (n > 0 && cmd[n - 1] == '\0')
                n--;
            cmd[n] = '\0';
            for (size_t k = 0; k < n; k++) /* NUL-separated arguments; no control bytes */
                if ((unsigned char)cmd[k] < 0x20 || cmd[k] == 0x7f)
                    cmd[k] = ' ';
            snprintf(buf, len, "pid %ld (%s)", pid, cmd[0] ? cmd : "?");
            break;
        }
    }
    if (f)
        fclose(f);
    return buf[0] ? 0 : -ENOENT;
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
static int s_prefault(tier_seg_t *seg, int fd)
{
    uint64_t t0 = tier_seg_now_ns();
    int rc = posix_fallocate(fd, 0, (off_t)seg->len);
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL)
        return -rc;
    long page = sysconf(_SC_PAGESIZE);
    size_t step = page > 0 ? (size_t)page : TIER_SEG_ALIGN;
    volatile uint8_t *p = seg->base;
    for (size_t off = 0; off < seg->len; off += step)
        p[off] = 0; /* fresh segment: every byte is already zero */
    seg->prefault_ns = tier_seg_now_ns() - t0;
    if (seg->prefault_ns == 0)
        seg->prefault_ns = 1;
    return 0;
}

static const char *const s_option_keys[] = {"prefault", "verify_reads", "shm_group", NULL};

/* The "shm_group" option's gid into *gid; 0 when the option is absent or "". */
static int s_shm_group(const tier_config_t *cfg, gid_t *gid, bool *set, char *err, size_t errlen)
{
    const char *g = tier_config_get(cfg, "shm_group");
    *set = g && g[0];
    if (!*set)
        return 0;
    struct group gr, *res = NULL;
    char buf[4096];
    if (getgrnam_r(g, &gr, buf, sizeof buf, &res) != 0 || !res) {
        snprintf(err, errlen,
                 "shm_group: no group \"%.64s\" on this host (give an existing group whose "
                 "members may map the segment, or leave it out: owner only)",
                 g);
        return -EINVAL;
    }
    *gid = gr.gr_gid;
    return 0;
}

/* Hands the fresh segment to the group: 0660, group gid. */
static int s_give_group(const tier_seg_t *seg, const tier_config_t *cfg, gid_t gid, char *err,
                        size_t errlen)
{
    if (fchown(seg->fd, (uid_t)-1, gid) == 0 && fchmod(seg->fd, TIER_SEG_SHM_GROUP_MODE) == 0)
        return 0;
    int rc = -errno;
    snprintf(err, errlen,
             "shm segment %s: cannot give it to group \"%.64s\": %s (the tier process must be a "
             "member of that group)",
             seg->name, tier_config_get(cfg, "shm_group"), strerror(-rc));
    return rc;
}

/* The shm name defaults to "/" + scope; prefault (touch every page at open)
 * defaults to on; verify_reads (check each block read against its checksum,
 * issue 12 §4) to off: those bytes never left memory. */
static int s_configure(tier_config_t *cfg, char *err, size_t errlen)
{
    bool prefault;
    if (!cfg->path[0] && cfg->scope[0])
        snprintf(cfg->path, sizeof cfg->path, "/%.*s", (int)sizeof cfg->path - 2, cfg->scope);
    if (tier_seg_name_check(cfg->path) < 0) {
        snprintf(err, errlen,
                 "shm: \"%.*s\": a shared-memory name is '/' then 1..%d characters, no other '/'",
                 (int)sizeof cfg->path - 1, cfg->path, TIER_SEG_SHM_NAME_MAX - 1);
        return -EINVAL;
    }
    bool verify;
    int rc = tier_option_bool(cfg, "prefault", true, &prefault, err, errlen);
    if (rc == 0)
        rc = tier_option_bool(cfg, "verify_reads", false, &verify, err, errlen);
    if (rc == 0 && !tier_config_get(cfg, "prefault"))
        rc = tier_config_set(cfg, "prefault", "true"); /* the default, written down */
    gid_t gid;
    bool group;
    if (rc == 0)
        rc = s_shm_group(cfg, &gid, &group, err, errlen);
    return rc;
}

static int s_open(tier_t *t, const tier_config_t *cfg, char *err, size_t errlen)
{
    struct tier_seg_layout l;
    bool prefault = true, verify = false, group = false;
    gid_t gid = 0;
    (void)tier_option_bool(cfg, "prefault", true, &prefault, err, errlen);
    (void)tier_option_bool(cfg, "verify_reads", false, &verify, err, errlen);
    int rc = s_shm_group(cfg, &gid, &group, err, errlen);
    if (rc == 0)
        rc = tier_seg_layout(cfg->capacity, cfg->slot_size, &l);
    if (rc < 0)
        return rc;
    tier_seg_t *seg = calloc(1, sizeof *seg);
    if (!seg)
        return -ENOMEM;
    snprintf(seg->name, sizeof seg->name, "%s", cfg->path);
    seg->owner = true;
    seg->epoch = tier_seg_new_epoch();
    seg->fd = s_create(seg->name);
    if (seg->fd < 0) {
        rc = seg->fd;
        if (rc == -EBUSY) {
            char who[192];
            (void)tier_host_owner(seg->name, who, sizeof who);
            snprintf(err, errlen,
                     "shm segment %s is in use by %s: another tier actor (or another "
                     "deployment) runs on this name; stop it, or give this tier its own \"shm\"",
                     seg->name, who[0] ? who : "a running process");
        }
        goto out_free;
    }
    if (group && (rc = s_give_group(seg, cfg, gid, err, errlen)) < 0)
        goto out_unlink;
    rc = s_reserve(seg->fd, l.total);
    if (rc < 0)
        goto out_unlink;
    void *base = mmap(NULL, (size_t)l.total, PROT_READ | PROT_WRITE, MAP_SHARED, seg->fd, 0);
    if (base == MAP_FAILED) {
        rc = -errno;
        goto out_unlink;
    }
    tier_seg_bind(seg, base, (size_t)l.total, &l, cfg->capacity, cfg->slot_size);
    if (prefault && (rc = s_prefault(seg, seg->fd)) < 0)
        goto out_unmap;
    tier_seg_init_super(seg, cfg->name, &l, verify);
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
    tier_seg_t *seg = t->priv;
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

/* The old header stops being served before new bytes go over it (tier.h). The
 * actor's own writes (WriteSlots, a copy's destination) claim the writer word like
 * a same-host client does (tier_seg.h "Writers"): a client stopped in the middle of a
 * chunk of this slot keeps them out (-EBUSY after S_CLAIM_WAIT_MS), one stopped
 * between chunks loses the slot to them. The wait is for a live sharer of the same
 * reservation copying the same block over shared memory (a chunk takes microseconds):
 * not waiting failed such puts (seen in test_concurrent_replay); the price is that
 * a write into a slot whose writer is stopped inside a chunk holds the actor's one
 * thread for S_CLAIM_WAIT_MS. */
#define S_CLAIM_WAIT_MS 100u

static int s_write(tier_t *t, uint64_t slot, const struct iovec *iov, int n)
{
    static uint64_t writes;
    tier_seg_t *seg = t->priv;
    uint64_t size = 0;
    for (int i = 0; i < n; i++)
        size += iov[i].iov_len;
    uint64_t me =
        tier_seg_writer_id(tier_seg_epoch(seg), __atomic_add_fetch(&writes, 1, __ATOMIC_RELAXED));
    int rc = tier_seg_claim(seg, slot, me, S_CLAIM_WAIT_MS, NULL);
    if (rc < 0)
        return rc;
    tier_slot_header_t h = {.state = TIER_SLOT_WRITING, .size = size};
    rc = tier_seg_put_header(seg, slot, &h);
    if (rc == 0)
        rc = tier_seg_write(seg, slot, iov, n);
    tier_seg_release(seg, slot, me);
    return rc;
}

static int s_read(tier_t *t, uint64_t slot, struct iovec *iov, int n)
{
    return tier_seg_read(t->priv, slot, iov, n);
}

static int s_put_header(tier_t *t, uint64_t slot, const tier_slot_header_t *h)
{
    return tier_seg_put_header(t->priv, slot, h);
}

static int s_get_header(tier_t *t, uint64_t slot, tier_slot_header_t *h)
{
    return tier_seg_get_header(t->priv, slot, h);
}

/* A slot whose header stays mid-write (a writer died in put_header) is not
 * reported: its contents are undefined until the next put_header. */
static int s_inventory(tier_t *t, uint64_t from, uint64_t to, tier_inventory_fn fn, void *arg)
{
    tier_seg_t *seg = t->priv;
    for (uint64_t i = from; i < to; i++) {
        tier_slot_header_t h;
        if (__atomic_load_n(&seg->hdrs[i].state, __ATOMIC_RELAXED) != TIER_SLOT_SERVING)
            continue;
        if (tier_seg_get_header(seg, i, &h) < 0 || h.state != TIER_SLOT_SERVING)
            continue;
        int rc = fn(arg, i, &h);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Present = a consistent header snapshot says SERVING: a header a writer left
 * mid-update (seqlock odd) is not present, as it is not served. */
static int s_probe(tier_t *t, const uint64_t *slots, size_t n, bool *present)
{
    tier_seg_t *seg = t->priv;
    for (size_t i = 0; i < n; i++) {
        tier_slot_header_t h;
        if (slots[i] >= seg->capacity)
            return -ERANGE;
        present[i] = tier_seg_serving(seg, slots[i]) &&
                     tier_seg_get_header(seg, slots[i], &h) == 0 && h.state == TIER_SLOT_SERVING;
    }
    return 0;
}

static int s_describe(tier_t *t, tier_desc_t *out)
{
    const tier_seg_t *seg = t->priv;
    out->epoch = seg->epoch;
    out->access_kind = TIER_ACCESS_SHM;
    snprintf(out->access, sizeof out->access, "%s", seg->name);
    snprintf(out->detail, sizeof out->detail, "shm segment of %zu bytes%s%s", seg->len,
             seg->prefault_ns ? ", pre-faulted" : "",
             tier_seg_verify_reads(seg) ? ", reads verified" : "");
    out->verify_reads = tier_seg_verify_reads(seg);
    return 0;
}

static void *s_slot_data(tier_t *t, uint64_t slot)
{
    return tier_seg_slot(t->priv, slot);
}

static void *s_map(tier_t *t, size_t *len)
{
    tier_seg_t *seg = t->priv;
    if (len)
        *len = seg->len;
    return seg->base;
}

uint64_t tier_host_prefault_ns(const tier_t *t)
{
    if (!t || t->ops != &tier_host_ops || !t->priv)
        return 0;
    return ((const tier_seg_t *)t->priv)->prefault_ns;
}

const struct tier_ops tier_host_ops = {
    .version = TIER_OPS_VERSION,
    .kind = "host",
    .option_keys = s_option_keys,
    .path_key = "shm",
    .path_access = TIER_ACCESS_SHM,
    .configure = s_configure,
    .open = s_open,
    .close = s_close,
    .write = s_write,
    .read = s_read,
    .put_header = s_put_header,
    .get_header = s_get_header,
    .inventory = s_inventory,
    .probe = s_probe,
    .describe = s_describe,
    .slot_data = s_slot_data,
    .map = s_map,
};
