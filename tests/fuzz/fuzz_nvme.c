/* fuzz_nvme.c — libFuzzer harness for what the nvme tier reads at open
 * (tiers/tier_nvme.c: s_super_load checks the superblock, s_scan / s_rec_load
 * load every slot header record into the mirror, verify_on_open reads the
 * SERVING slots). The decoders are static, so the harness runs the real open
 * path, tier_nvme_open with format off (as a restarted tier actor opens its file),
 * against a file written from the input (layout version 2): the input's first
 * TIER_NVME_SUPER_BYTES are the superblock page, the rest is the slot area from
 * data_off (1 MiB): slot i's header record at i * stride, its bytes after the
 * record; the rest of the file is zero up to the length the tier's config needs.
 * Both the superblock and every record carry a checksum that random bytes never
 * match, so byte 0 asks the harness to restamp them (bit 0: superblock, bit 1:
 * records, with the tier's own tier_checksum and the offsets pinned in
 * tier_nvme.c; bit 4: first each record's data checksum over the bytes after it,
 * so blocks verify and are served); bit 2 turns on verify_on_open; bit 3 keeps
 * the file at the input's length (truncation). After a successful open every
 * slot's header and bytes are read back. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tier.h"
#include "tier_checksum.h"
#include "tier_nvme.h"

#define S_CAPACITY 8u
#define S_SLOT 4096u
#define S_DATA_OFF (1u << 20)                           /* version 2: the slot area */
#define S_STRIDE (4096u + S_SLOT)                       /* a record page, the bytes */
#define S_FILE_LEN (S_DATA_OFF + S_CAPACITY * S_STRIDE) /* the layout of 8 x 4096 */
#define S_MAX_INPUT (TIER_NVME_SUPER_BYTES + S_CAPACITY * S_STRIDE)
#define S_SUPER_SUMMED 160u /* tier_nvme.c: superblock bytes its checksum covers */
#define S_REC_SUMMED 96u    /* tier_nvme.c: record bytes rec_checksum covers */
#define S_REC_BYTES_OFF 12u /* tier_nvme.c: struct s_super.record_bytes */
#define S_REC_SIZE_OFF 64u  /* tier_nvme.c: struct s_rec.size, then .checksum */

static char s_path[256];
static uint8_t s_file[S_MAX_INPUT];
static uint8_t s_slot[S_SLOT];

static void s_cleanup(void)
{
    unlink(s_path);
}

static void s_null_log(void *arg, const char *line)
{
    (void)arg;
    (void)line;
}

static uint64_t s_sum(const void *p, size_t len)
{
    struct iovec v = {.iov_base = (void *)p, .iov_len = len};
    return tier_checksum(&v, 1);
}

static bool s_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* Restamps the checksums the way tier_nvme.c computes them (f: the input
 * without its flags byte, len bytes). */
static void s_restamp(uint8_t *f, size_t len, unsigned flags)
{
    if (flags & 1u && len >= S_SUPER_SUMMED + 8u) {
        uint64_t sum = s_sum(f, S_SUPER_SUMMED);
        memcpy(f + S_SUPER_SUMMED, &sum, sizeof sum);
    }
    uint32_t rec = 0;
    if (len >= S_REC_BYTES_OFF + 4u)
        memcpy(&rec, f + S_REC_BYTES_OFF, sizeof rec);
    if (!(flags & 2u) || rec < S_REC_SUMMED + 8u || rec > 4096u)
        return;
    for (size_t off = TIER_NVME_SUPER_BYTES; off + S_REC_SUMMED + 8u <= len; off += S_STRIDE) {
        if (s_zero(f + off, S_REC_SUMMED + 8u))
            continue;
        uint64_t size;
        memcpy(&size, f + off + S_REC_SIZE_OFF, sizeof size);
        if (flags & 16u && size <= S_SLOT && off + rec + size <= len) {
            uint64_t data = s_sum(f + off + rec, (size_t)size);
            memcpy(f + off + S_REC_SIZE_OFF + 8u, &data, sizeof data);
        }
        uint64_t sum = s_sum(f + off, S_REC_SUMMED);
        memcpy(f + off + S_REC_SUMMED, &sum, sizeof sum);
    }
}

static int s_on_slot(void *arg, uint64_t slot, const tier_slot_header_t *h)
{
    tier_t *t = arg;
    struct iovec v = {.iov_base = s_slot, .iov_len = h->size <= S_SLOT ? h->size : S_SLOT};
    (void)tier_read(t, slot, &v, 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size - 1 > S_MAX_INPUT)
        return 0;
    if (!s_path[0]) {
        const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(s_path, sizeof s_path, "%s/kvt-fuzz-nvme-%d.img", dir, (int)getpid());
        atexit(s_cleanup);
    }
    size_t len = size - 1;
    memcpy(s_file, data + 1, len);
    s_restamp(s_file, len, data[0]);
    size_t head = len < TIER_NVME_SUPER_BYTES ? len : TIER_NVME_SUPER_BYTES;
    size_t rest = len - head;
    int fd = open(s_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || pwrite(fd, s_file, head, 0) != (ssize_t)head ||
        (rest && pwrite(fd, s_file + head, rest, S_DATA_OFF) != (ssize_t)rest) ||
        (!(data[0] & 8u) && ftruncate(fd, S_FILE_LEN) < 0))
        abort();
    close(fd);

    tier_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.name, sizeof cfg.name, "nvme0");
    snprintf(cfg.kind, sizeof cfg.kind, "nvme");
    snprintf(cfg.path, sizeof cfg.path, "%s", s_path);
    cfg.capacity = S_CAPACITY;
    cfg.slot_size = S_SLOT;
    tier_nvme_opts_t o;
    tier_nvme_opts_default(&o);
    o.queue_depth = 4;
    o.chunk_bytes = 64u * 1024u;
    o.verify_on_open = data[0] & 4u;
    o.log = s_null_log;
    char err[512];
    tier_t *t = tier_nvme_open(&cfg, &o, err, sizeof err);
    if (!t)
        return 0;
    for (uint64_t i = 0; i < S_CAPACITY; i++) {
        tier_slot_header_t h;
        (void)tier_get_header(t, i, &h);
    }
    (void)tier_inventory(t, s_on_slot, t);
    tier_close(&t);
    return 0;
}
