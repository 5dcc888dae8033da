/* tier_host.h — the `host` tier backend (DESIGN.md §3, §4, §7): one POSIX
 * shared-memory segment per tier, named by cfg.path ("/kvtier-host0"), so a
 * client process on the same host maps it by name and copies block bytes
 * without a message. The tier actor's process owns the segment: it creates it
 * at open (replacing a stale one left by a dead process — host memory does not
 * survive its process) and removes it at close. This file never knows about
 * the scheduler, the bus or etcd, and never allocates on the data path.
 *
 * Segment layout (version 1; native byte order, same host only; all offsets
 * are read from the superblock, never assumed, except the superblock itself):
 *
 *   offset 0, one 4096-byte page: superblock
 *     +0  u64 magic        0x3154534f4854564b ("KVTHOST1" as bytes)
 *     +8  u32 version      TIER_HOST_VERSION
 *     +12 u32 header_size  bytes per slot header record (64)
 *     +16 u64 slot_size    usable bytes per slot
 *     +24 u64 capacity     number of slots
 *     +32 u64 slot_stride  distance between slot data starts (slot_size
 *                          rounded up to 4096)
 *     +40 u64 headers_off  start of the slot header array (4096)
 *     +48 u64 data_off     start of the slot data area (multiple of 4096)
 *     +56 u64 total_len    segment length = data_off + capacity * slot_stride
 *     +64 u64 epoch        random per open: a replaced segment has a new one
 *     +72 u32 owner_pid    pid of the tier process
 *     +76 u32 live         1 while the owner has it open, 0 after close
 *     +80 char name[64]    tier name, NUL-terminated (diagnostics)
 *     The owner stores magic last (release), so a reader that sees the magic
 *     sees a complete superblock.
 *   headers_off: capacity records of 64 bytes (slot i at headers_off + 64 * i)
 *     +0  u32 seq          seqlock: odd while a header write is in progress
 *     +4  u32 state        enum tier_slot_state; stored last (release)
 *     +8  u8  key[16]
 *     +24 u32 instance
 *     +28 u32 reserved (0)
 *     +32 u64 size
 *     +40 u64 checksum     xxh3-64 of the block bytes (tier_checksum)
 *     +48 u64 deadline_ms
 *     +56 u64 reserved (0)
 *   data_off: slot i's bytes at data_off + slot_stride * i; every slot starts
 *     on a 4096-byte boundary, so GPU engines can register the area for DMA.
 *
 * Ordering rule: a writer copies the bytes first and then writes the header;
 * the header's state is stored last with release order and the seqlock closes
 * after it, so a reader in another process that sees SERVING (acquire) also
 * sees the bytes and the full header. Header writers must be serialised per
 * slot by the protocol (the tier actor, or the one client holding the
 * reservation); readers never block writers.
 */
#ifndef KVT_TIER_HOST_H
#define KVT_TIER_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "tier.h"
#include "tier_checksum.h"

#define TIER_HOST_MAGIC 0x3154534f4854564bULL
#define TIER_HOST_VERSION 1u
#define TIER_HOST_ALIGN 4096u          /* slot data alignment (DMA registration) */
#define TIER_HOST_SUPER_SIZE 4096u     /* superblock page */
#define TIER_HOST_HEADER_SIZE 64u      /* one slot header record */
#define TIER_HOST_SHM_NAME_MAX 255     /* bytes of "/name", NUL excluded (NAME_MAX) */
#define TIER_HOST_HEADER_RETRIES 10000 /* seqlock read attempts before -EAGAIN */

/* The ops table, kind "host". cfg.path is the shm name: it starts with '/',
 * holds no other '/', and is 2..TIER_HOST_SHM_NAME_MAX bytes. open returns
 * -EINVAL for a bad name or geometry, -EOVERFLOW when capacity x slot size
 * does not fit, -ENOSPC when /dev/shm cannot hold the segment, -EBUSY when a
 * live process owns a segment of that name. inventory calls fn for each
 * SERVING slot in slot order; a non-zero return from fn stops the walk and is
 * returned. probe reports present = header SERVING. map returns the whole
 * segment (len = total_len). */
extern const struct tier_ops tier_host_ops;

/* Nanoseconds the pre-fault at open took (reserving the memory and touching
 * every page of the segment); 0 when cfg.prefault was off or t is not a host
 * tier. The caller logs it (tiers/ does not log). */
uint64_t tier_host_prefault_ns(const tier_t *t);

/* Checks an shm name as open does; 0 or -EINVAL. */
int tier_host_name_check(const char *name);

/* ---- client side (same host): map an existing segment by name ---------- */

typedef struct tier_host_seg tier_host_seg_t;

/* Maps the segment `name` read-write and validates it. slot_size / capacity
 * are what the caller expects (0 = accept what the segment says). Returns 0
 * and sets *out, or a negative errno with a message for a person in err:
 * -EINVAL bad name or arguments, -ENOENT no such segment, -EACCES no
 * permission, -EPROTO not a kvtier host segment (magic, version, layout,
 * truncated) or geometry other than expected, -EAGAIN the owner has not
 * finished creating it. Never crashes on a foreign or damaged segment. */
int tier_host_attach(const char *name, uint64_t slot_size, uint64_t capacity, tier_host_seg_t **out,
                     char *err, size_t errlen);

/* Unmaps; the segment stays (its owner removes it). Idempotent, nulls *seg. */
void tier_host_detach(tier_host_seg_t **seg);

uint64_t tier_host_seg_capacity(const tier_host_seg_t *seg);
uint64_t tier_host_seg_slot_size(const tier_host_seg_t *seg);
uint64_t tier_host_seg_epoch(const tier_host_seg_t *seg);

/* False once the owner has closed the segment (its memory is then orphaned:
 * detach and re-attach to whatever replaces it). */
bool tier_host_seg_live(const tier_host_seg_t *seg);

/* Start of slot i's data (4096-aligned, slot_size bytes), or NULL when i is
 * out of range. The caller copies directly; then it publishes a header. */
void *tier_host_seg_slot(tier_host_seg_t *seg, uint64_t slot);

/* Gather iov into slot i / scatter slot i into iov, at offset 0. -ERANGE for
 * a slot out of range, -EINVAL for a bad iov, -EMSGSIZE when the bytes exceed
 * the slot size. */
int tier_host_seg_write(tier_host_seg_t *seg, uint64_t slot, const struct iovec *iov, int n);
int tier_host_seg_read(tier_host_seg_t *seg, uint64_t slot, struct iovec *iov, int n);

/* Publishes slot i's header with the ordering rule above (bytes before
 * header, state last). -ERANGE / -EINVAL (size > slot size, unknown state). */
int tier_host_seg_put_header(tier_host_seg_t *seg, uint64_t slot, const tier_slot_header_t *h);

/* Reads a consistent snapshot of slot i's header (seqlock). -EAGAIN when a
 * writer kept it busy for TIER_HOST_HEADER_RETRIES attempts. */
int tier_host_seg_get_header(tier_host_seg_t *seg, uint64_t slot, tier_slot_header_t *h);

/* True when slot i's state is SERVING (acquire: its bytes are visible). */
bool tier_host_seg_serving(tier_host_seg_t *seg, uint64_t slot);

#endif
