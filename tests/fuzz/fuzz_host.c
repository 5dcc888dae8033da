/* fuzz_host.c — libFuzzer harness for the host segment headers a same-host client
 * reads when it attaches (tiers/tier_seg.c): the superblock checked at
 * tier_seg_attach and the slot header records read through the seqlock
 * (tier_seg_get_header, tier_seg_serving), then the slot bytes (tier_seg_read),
 * as client/kvt_transport_shm.c does (attach with the token's slot size, capacity
 * 0 = what the segment says). The input is written into a real POSIX shm segment
 * of this process's own name; byte 0: bit 0 attach expecting 4096-byte slots
 * (else 0, any), bit 1 grow the segment to the length its superblock claims (at
 * most 16 MiB) so the fuzzer gets past "truncated". */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tier_seg.h"
#include "tier_seg_int.h"

#define S_MAX_LEN (16u << 20)
#define S_MAX_SLOTS 64u

static char s_name[64];
static uint8_t s_slot[1u << 20];

static void s_cleanup(void)
{
    shm_unlink(s_name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > S_MAX_LEN)
        return 0;
    if (!s_name[0]) {
        snprintf(s_name, sizeof s_name, "/kvt-fuzz-host-%d", (int)getpid());
        atexit(s_cleanup);
    }
    int fd = shm_open(s_name, O_RDWR | O_CREAT, 0600);
    if (fd < 0)
        abort();
    uint64_t len = size - 1;
    if (data[0] & 2u && size - 1 >= sizeof(struct tier_seg_super)) {
        struct tier_seg_super sb;
        memcpy(&sb, data + 1, sizeof sb);
        if (sb.total_len > len && sb.total_len <= S_MAX_LEN)
            len = sb.total_len;
    }
    if (ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)len) < 0 ||
        pwrite(fd, data + 1, size - 1, 0) != (ssize_t)(size - 1))
        abort();
    close(fd);

    tier_seg_t *seg = NULL;
    char err[512];
    if (tier_seg_attach(s_name, (data[0] & 1u) ? 4096u : 0u, 0, &seg, err, sizeof err) < 0)
        return 0;
    uint64_t cap = tier_seg_capacity(seg);
    uint64_t slot_size = tier_seg_slot_size(seg);
    (void)tier_seg_live(seg);
    (void)tier_seg_epoch(seg);
    for (uint64_t i = 0; i < cap && i < S_MAX_SLOTS; i++) {
        tier_slot_header_t h;
        (void)tier_seg_get_header(seg, i, &h); /* the client compares h.size, never trusts it */
        (void)tier_seg_serving(seg, i);
        if (!tier_seg_slot(seg, i))
            abort();
        if (slot_size <= sizeof s_slot) {
            struct iovec v = {.iov_base = s_slot, .iov_len = (size_t)slot_size};
            (void)tier_seg_read(seg, i, &v, 1);
        }
    }
    (void)tier_seg_get_header(seg, cap, NULL);
    tier_seg_detach(&seg);
    return 0;
}
