/* tier_seg.h — the host segment library: the layout of a host tier's POSIX
 * shared-memory segment, its header protocol (WRITING before bytes, a seqlock per
 * slot header, state stored last) and the checksum of its bytes. The host backend
 * (tier_host.c) creates segments with it; a same-host client (libkvtier) attaches
 * with it. It is the only server-side code an engine links, so it knows nothing of
 * the tier ops table, the bus or the scheduler, and never allocates after attach.
 *
 * Segment layout (version 1; native byte order, same host only; all offsets
 * are read from the superblock, never assumed, except the superblock itself):
 *
 *   offset 0, one 4096-byte page: superblock
 *     +0  u64 magic        0x3154534f4854564b ("KVTHOST1" as bytes)
 *     +8  u32 version      TIER_SEG_VERSION
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
 *     +144 u32 flags       TIER_SEG_FLAG_VERIFY_READS (1): readers check each
 *                          block they copy against its header's checksum (the
 *                          host tier's verify_reads option); other bits 0. A
 *                          segment written before the field has 0 here.
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
 *     +56 u64 writer       the writer word (below; version 2)
 *   data_off: slot i's bytes at data_off + slot_stride * i; every slot starts
 *     on a 4096-byte boundary, so GPU engines can register the area for DMA.
 *
 * Writers (version 2, issue 12 §4: a writer stopped past its lease must never
 * change a slot the scheduler has given to another). Every writer of a slot's bytes
 * or of its WRITING header names itself with a writer id (tier_seg_writer_id: the
 * token's issuer and id, the writer's pid in the low bits) and writes only while the
 * slot's writer word holds its id with the BUSY bit: it claims the word at the start
 * (tier_seg_claim: any word without BUSY is taken over; BUSY held by another live
 * process is waited for, then refused), and before each further chunk it sets BUSY
 * again only if the word is still its own (tier_seg_hold; -ESTALE: another writer
 * claimed the slot, so this one's lease lapsed: stop, write nothing more). A writer
 * stopped between chunks therefore loses the slot to the next claimer; one stopped
 * in the middle of a chunk keeps the next claimer out until it resumes (and then
 * finds nothing committed in its name). Committed headers (SERVING, by the tier
 * actor after the writer's complete) need no claim: by then only the committed
 * writer owns the word.
 *
 * Ordering rule: a writer copies the bytes first and then writes the header;
 * the header's state is stored last with release order and the seqlock closes
 * after it, so a reader in another process that sees SERVING (acquire) also
 * sees the bytes and the full header. Header writers must be serialised per
 * slot by the protocol (the tier actor, or the one client holding the
 * reservation); readers never block writers.
 */
#ifndef KVT_TIER_SEG_H
#define KVT_TIER_SEG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "tier_checksum.h"
#include "tier_key.h"
#include "tier_slot_header.h"

#define TIER_SEG_MAGIC 0x3154534f4854564bULL
#define TIER_SEG_VERSION 2u          /* 2: the writer word at +56 */
#define TIER_SEG_ALIGN 4096u         /* slot data alignment (DMA registration) */
#define TIER_SEG_SUPER_SIZE 4096u    /* superblock page */
#define TIER_SEG_HEADER_SIZE 64u     /* one slot header record */
#define TIER_SEG_SHM_NAME_MAX 255    /* bytes of "/name", NUL excluded (NAME_MAX) */
#define TIER_SEG_HEADER_WAIT_US 2000 /* a reader waits this long for a header writer */

/* Checks an shm name as the host backend's open does: '/' then 1+ characters,
 * no other '/', at most TIER_SEG_SHM_NAME_MAX bytes. 0 or -EINVAL. */
int tier_seg_name_check(const char *name);

typedef struct tier_seg tier_seg_t;

/* Maps the segment `name` read-write and validates it. slot_size / capacity
 * are what the caller expects (0 = accept what the segment says). Returns 0
 * and sets *out, or a negative errno with a message for a person in err:
 * -EINVAL bad name or arguments, -ENOENT no such segment, -EACCES no
 * permission, -EPROTO not a kvtier host segment (magic, version, layout,
 * truncated) or geometry other than expected, -EAGAIN the owner has not
 * finished creating it. Never crashes on a foreign or damaged segment. */
int tier_seg_attach(const char *name, uint64_t slot_size, uint64_t capacity, tier_seg_t **out,
                    char *err, size_t errlen);

/* Unmaps; the segment stays (its owner removes it). Idempotent, nulls *seg. */
void tier_seg_detach(tier_seg_t **seg);

uint64_t tier_seg_capacity(const tier_seg_t *seg);
uint64_t tier_seg_slot_size(const tier_seg_t *seg);
uint64_t tier_seg_epoch(const tier_seg_t *seg);

/* False once the owner has closed the segment (its memory is then orphaned:
 * detach and re-attach to whatever replaces it). */
bool tier_seg_live(const tier_seg_t *seg);
#define TIER_SEG_FLAG_VERIFY_READS 1u
/* The owner asks readers to verify what they copy (flags, above). */
bool tier_seg_verify_reads(const tier_seg_t *seg);

/* Start of slot i's data (4096-aligned, slot_size bytes), or NULL when i is
 * out of range. The caller copies directly; then it publishes a header. */
void *tier_seg_slot(tier_seg_t *seg, uint64_t slot);

/* Gather iov into slot i / scatter slot i into iov, at offset 0. -ERANGE for
 * a slot out of range, -EINVAL for a bad iov, -EMSGSIZE when the bytes exceed
 * the slot size. */
int tier_seg_write(tier_seg_t *seg, uint64_t slot, const struct iovec *iov, int n);
int tier_seg_read(tier_seg_t *seg, uint64_t slot, struct iovec *iov, int n);

/* Publishes slot i's header with the ordering rule above (bytes before
 * header, state last). -ERANGE / -EINVAL (size > slot size, unknown state). */
int tier_seg_put_header(tier_seg_t *seg, uint64_t slot, const tier_slot_header_t *h);

/* Reads a consistent snapshot of slot i's header (seqlock). -EAGAIN when a
 * writer kept it busy for TIER_SEG_HEADER_WAIT_US (a header write is a few
 * stores: longer means its writer was preempted or died in the middle, and a
 * dead one's record stays busy until the tier actor rewrites it). */
int tier_seg_get_header(tier_seg_t *seg, uint64_t slot, tier_slot_header_t *h);

/* True when slot i's state is SERVING (acquire: its bytes are visible). */
bool tier_seg_serving(tier_seg_t *seg, uint64_t slot);

/* ---- writers (see "Writers" above) ---- */

#define TIER_SEG_WRITER_BUSY (1ull << 63)
#define TIER_SEG_WRITER_PID_BITS 22 /* Linux pid_max is at most 2^22 */

/* A writer id: a mix of a and b (a token's issuer and id; the tier actor uses its
 * epoch and a counter) with this process's pid in the low 22 bits. Never 0, BUSY
 * bit clear. */
uint64_t tier_seg_writer_id(uint64_t a, uint64_t b);

/* Takes slot i for WRITER and sets BUSY. A word held BUSY by another writer whose
 * process lives is waited for up to wait_ms, then -EBUSY (*holder, may be NULL, gets
 * its pid); one whose process is gone (it died in a chunk) is taken over. -ERANGE,
 * -EINVAL (writer 0 or with BUSY set). */
int tier_seg_claim(tier_seg_t *seg, uint64_t slot, uint64_t writer, uint32_t wait_ms,
                   uint32_t *holder);

/* Sets BUSY again for the next chunk: 0, or -ESTALE when the word is no longer
 * WRITER's (the slot was claimed by another: write nothing more). */
int tier_seg_hold(tier_seg_t *seg, uint64_t slot, uint64_t writer);

/* Clears BUSY after a chunk (the word stays WRITER's). */
void tier_seg_release(tier_seg_t *seg, uint64_t slot, uint64_t writer);

#endif
