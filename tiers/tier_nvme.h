/* tier_nvme.h — the `nvme` tier backend (DESIGN.md §4, §7): one preallocated
 * file per tier at cfg.path, slots aligned for O_DIRECT, I/O through io_uring
 * with queue_depth ops in flight (pread/pwrite when io_uring cannot be set
 * up: chosen automatically and logged once). Each slot's header (key,
 * instance, size, xxh3-64 checksum of the bytes, TTL deadline, state) is a
 * record right before its bytes, written in the same I/O as them, so a
 * restarted process rebuilds the inventory from the file. A torn header or a
 * slot whose bytes fail their checksum is dropped, reported (counter + log
 * line) and never served. Knows nothing of the scheduler, the bus or etcd;
 * never allocates after open. A tier_t is used by one thread at a time (its
 * tier actor). Memory: 72 bytes per slot (the header mirror) plus queue_depth
 * buffers of 4096 + min(chunk, slot size rounded to 4096) bytes.
 *
 * File layout (version 2, little-endian, every offset read from the
 * superblock except the superblock's own):
 *
 *   0: superblock, one 4096-byte block
 *     +0  u64 magic        TIER_NVME_MAGIC ("KVTNVME1" as bytes)
 *     +8  u32 version      TIER_NVME_VERSION (2)
 *     +12 u32 record_bytes bytes per slot header record (4096: the bytes after
 *                          it stay 4096-aligned; at least the file system's
 *                          O_DIRECT alignment)
 *     +16 u64 slot_size    usable bytes per slot
 *     +24 u64 capacity     slots
 *     +32 u64 slot_stride  record_bytes + slot_size, rounded up to 4096
 *     +40 u64 headers_off  data_off: the records are in line with the bytes
 *     +48 u64 data_off     1 MiB
 *     +56 u64 file_size    data_off + capacity * slot_stride
 *     +64 u8  uuid[16]     random per format: records of another format are
 *                          stale, never recovered
 *     +80 u64 format_ms    wall clock at format
 *     +88 u64 reserved
 *     +96 char name[64]    tier name at format (diagnostics)
 *     +160 u64 checksum    xxh3-64 of bytes 0..159
 *   data_off: capacity slots of slot_stride bytes; slot i at
 *   data_off + i * slot_stride is its header record (record_bytes), then its
 *   bytes (at data_off + i * slot_stride + record_bytes):
 *     +0  u32 magic        TIER_NVME_REC_MAGIC ("KVSH")
 *     +4  u32 state        enum tier_slot_state
 *     +8  u64 slot         the record's own slot (a misplaced write is caught)
 *     +16 u64 seq          per-file write sequence, increasing
 *     +24 u8  uuid[16]     the superblock's uuid
 *     +40 u8  key[16]
 *     +56 u32 instance
 *     +60 u32 reserved
 *     +64 u64 size         bytes of the block
 *     +72 u64 checksum     tier_checksum of the block bytes
 *     +80 u64 deadline_ms
 *     +88 u64 written_ms   wall clock of the header write (diagnostics)
 *     +96 u64 rec_checksum xxh3-64 of bytes 0..95; a record failing it (a torn
 *                          or damaged write) is dropped at open
 *     the rest of the record is zero. An all-zero record is an empty slot.
 *   Version 1 (records in an area of their own, before the slot bytes, each
 *   written apart from its bytes) is refused at open, naming both versions;
 *   such a file is not migrated (format reformats it, losing its blocks).
 *
 * Writes (crash safety): a block's bytes and its record go to the file in one
 * I/O (its first piece when a bounced block takes several): SERVING for a put
 * (tier_nvme_put_batch, tier_put_batch, write_batch items with hdr.state
 * SERVING), WRITING with the new size and checksum for a write() pending its
 * commit, which then writes the SERVING record alone. There is no ordering
 * between the record and the bytes within that write, nor any need of one: the
 * checksum in the record covers the bytes, every read verifies it, so a crash
 * in the middle (new record over old bytes, old record over new bytes, half of
 * each) fails the check and is dropped, never served. The mirror stops
 * serving a slot before new bytes go over it; a write that fails after its
 * record went out has its record cleared to EMPTY (at once, or after the next
 * write, or at close), so what was not acknowledged does not come back at a
 * restart. Durability per sync policy: dsync, each write RWF_DSYNC (a put is
 * one durable write); fdatasync, plain writes and one fdatasync after a put
 * batch (a commit: one before and one after its records); none, neither.
 *
 * Semantics that differ from the host tier: read requires a SERVING header
 * (-ENODATA otherwise) and an iov of at least the header's size (-EMSGSIZE);
 * it fills the first `size` bytes and leaves the rest of the iov untouched; a
 * checksum mismatch zeroes those bytes, drops the slot and returns -EBADMSG.
 * put_header(SERVING) requires the bytes to have been written by write() in
 * this process (or the slot to be SERVING already, for a deadline/key
 * update), h->size equal to the bytes written (-EINVAL), and h->checksum
 * either 0 (the tier fills in its own) or equal to the tier's (-EBADMSG); a
 * put with a checksum other than its bytes' is refused before any I/O. */
#ifndef KVT_TIER_NVME_H
#define KVT_TIER_NVME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "tier.h"
#include "tier_uring.h"

#define TIER_NVME_MAGIC 0x31454d564e54564bULL /* "KVTNVME1" */
#define TIER_NVME_VERSION 2u
#define TIER_NVME_REC_MAGIC 0x4853564bu /* "KVSH" */
#define TIER_NVME_SUPER_BYTES 4096u
#define TIER_NVME_DEFAULT_DEPTH 32u
#define TIER_NVME_DEFAULT_CHUNK (1u << 20) /* bounce buffer and largest bounced I/O */
#define TIER_NVME_DEFAULT_LOCK_WAIT_MS 2000u
#define TIER_NVME_LOG_DROPS_AT_OPEN 16         /* drop lines logged per open, then a total */
#define TIER_NVME_ENV_ENGINE "KVT_NVME_ENGINE" /* auto | uring | sync */

/* When written bytes and headers are durable. */
enum tier_nvme_sync {
    /* Every data and header write is RWF_DSYNC: complete means durable,
     * power loss included. The default. */
    TIER_NVME_SYNC_DSYNC = 0,
    /* Data writes plain; one fdatasync before and one after the header writes
     * of a put_header or a batch (cheaper for large batches). */
    TIER_NVME_SYNC_FDATASYNC = 1,
    /* O_DIRECT completion only: survives a process crash (kill -9), not a
     * power loss on a device with a volatile write cache. */
    TIER_NVME_SYNC_NONE = 2,
};

/* One line for a person, without a trailing newline. */
typedef void (*tier_nvme_log_fn)(void *arg, const char *line);

typedef struct tier_nvme_opts {
    uint32_t queue_depth; /* I/Os in flight, 1..TIER_URING_DEPTH_MAX; 0: 32 */
    /* TIER_URING_AUTO honours $KVT_NVME_ENGINE (auto|uring|sync) when set. */
    enum tier_uring_kind engine;
    enum tier_nvme_sync sync;
    /* Format the file even when it holds another layout, another geometry or
     * foreign contents: its blocks are lost. Off: such a file is an error. */
    bool format;
    /* Read every SERVING slot at open and drop those whose bytes fail their
     * checksum (otherwise they are caught on first read). */
    bool verify_on_open;
    /* Bounce buffer size = largest bounced I/O (a direct transfer, from or to
     * aligned caller memory, is one I/O per block); multiple of 4096, 0 = 1 MiB.
     * Memory held: queue_depth bounce buffers (capped at the slot size). */
    uint32_t chunk_bytes;
    /* How long open waits for the file lock held by another process (a
     * process killed a moment ago holds it until its io_uring is torn down);
     * then -EBUSY. 0: do not wait. */
    uint32_t lock_wait_ms;
    tier_nvme_log_fn log; /* NULL: stderr */
    void *log_arg;
} tier_nvme_opts_t;

/* Counters since open; read from the thread that uses the tier. */
typedef struct tier_nvme_stats {
    const char *engine; /* "io_uring" or "pread/pwrite" */
    bool fixed_buffers; /* bounce buffers registered with the ring */
    uint32_t queue_depth;
    uint32_t record_bytes;
    uint32_t dio_align; /* O_DIRECT offset/length alignment in use */
    uint64_t reads;     /* blocks read and verified */
    uint64_t writes;    /* blocks written */
    uint64_t headers;   /* header records written (alone or with their bytes) */
    uint64_t write_ops; /* write I/Os issued (a put of a direct block: one) */
    uint64_t bytes_read;
    uint64_t bytes_written;
    uint64_t direct_blocks;     /* transfers straight from/to the caller's memory */
    uint64_t bounced_blocks;    /* transfers through the bounce buffers */
    uint64_t checksum_failures; /* reads whose bytes mismatched (read or verify-on-open):
                                   each read again once, then dropped or recovered */
    uint64_t reread_recovered;  /* reads whose mismatch the re-read did not repeat
                                   (served: a flip in transit, not on the disk) */
    uint64_t torn_headers;      /* header records failing their own check at open */
    uint64_t dropped_slots;     /* slots dropped for either reason */
    uint64_t io_errors;         /* failed I/O operations */
    uint64_t short_reads;       /* reads that moved fewer bytes than asked (-EIO) */
    uint64_t recovered;         /* SERVING slots found at open (before verify) */
    uint64_t serving;           /* SERVING slots now */
} tier_nvme_stats_t;

/* The ops table, kind "nvme". open uses tier_nvme_opts_default() (so
 * $KVT_NVME_ENGINE applies) and logs its error to stderr, since the ops
 * table's open has no error buffer: tier_open's message carries strerror
 * only. Errors: -EINVAL bad config, a foreign/corrupt file or a geometry
 * mismatch; -ENOSPC file system too small; -EBUSY file in use by another
 * process; -ENOENT/-EACCES/-EROFS/-EISDIR from the path; -EOPNOTSUPP no
 * O_DIRECT or fallocate. inventory: each SERVING slot in slot order, a
 * non-zero return from fn stops the walk and is returned. probe: header
 * SERVING. No map. */
extern const struct tier_ops tier_nvme_ops;

/* Defaults: engine AUTO, sync DSYNC, no format, no verify, 1 MiB chunks,
 * 2 s lock wait, stderr log. */
void tier_nvme_opts_default(tier_nvme_opts_t *opts);

/* tier_open for kind "nvme" with options (cfg->kind is ignored): NULL on
 * failure with a message for a person in err (also logged). The result is
 * closed with tier_close(). */
tier_t *tier_nvme_open(const tier_config_t *cfg, const tier_nvme_opts_t *opts, char *err,
                       size_t errlen);

/* 0 and *out filled, or -EINVAL when t is not an open nvme tier. */
int tier_nvme_stats(const tier_t *t, tier_nvme_stats_t *out);

/* ---- batches: many slots per call, up to queue_depth I/Os in flight ----- */

/* Batch items are tier.h's tier_io_t. put: slot, iov (1..TIER_MAX_IOV segments,
 * total <= slot size), n; hdr in: key, instance, deadline_ms (checksum 0, or the
 * expected value); out: size, checksum and state SERVING once committed; rc. */
typedef tier_io_t tier_nvme_put_t;

/* Writes each item's bytes with its SERVING header in one I/O (durable per the
 * sync policy once it returns): the same result as write() + put_header() per
 * item, with the I/O of all items overlapped. Items fail alone (-ERANGE, -EINVAL incl. a slot
 * repeated in the batch, -EMSGSIZE, -EBADMSG, -EIO...). Returns 0 when every item succeeded, else
 * the first item error. No internal allocation; n is bounded by the caller's array. */
int tier_nvme_put_batch(tier_t *t, tier_nvme_put_t *items, size_t n);

/* write: slot, iov, n in; rc out. */
typedef tier_io_t tier_nvme_write_t;

/* tier_write for each item (bytes and a WRITING record in one I/O, pending until
 * a SERVING header; an item whose hdr.state is SERVING is a put instead, as in
 * tier_nvme_put_batch, hdr out as stored), with the I/O of all items overlapped. Like a one-by-one
 * loop that stops at the first error: the items after the first refused one (bad slot, size, a slot
 * repeated in the batch) are not tried (-ECANCELED); an I/O error fails its item alone within its
 * group of 64, and the later groups are not tried. Returns 0 or the first error. */
int tier_nvme_write_batch(tier_t *t, tier_nvme_write_t *items, size_t n);

/* commit: slot, hdr in (as for put_header(SERVING)) and out (as persisted); rc. */
typedef tier_io_t tier_nvme_commit_t;

/* tier_put_header(SERVING) for each item (bytes written before, through this
 * tier), with one barrier pair and the header writes of all items overlapped.
 * Stops like tier_nvme_write_batch (later items -ECANCELED). Returns 0 or the
 * first error. */
int tier_nvme_commit_batch(tier_t *t, tier_nvme_commit_t *items, size_t n);

/* tier_put_header(EMPTY) for each of slots[0..n) (a delete), the header writes
 * overlapped; rcs[i] gets each slot's 0 or negative errno. Returns 0 or the
 * first error. */
int tier_nvme_clear_batch(tier_t *t, const uint64_t *slots, int *rcs, size_t n);

/* get: slot, iov (at least the block's size), n in; size (bytes read, the
 * header's size) and rc (as tier_read) out. */
typedef tier_io_t tier_nvme_get_t;

/* Reads and verifies each item's slot like tier_read, overlapped: each block's
 * check runs as it completes, beside the reads still in flight; a lone block is
 * read in up to 8 pieces, each hashed as soon as it and those before it are in. */
int tier_nvme_get_batch(tier_t *t, tier_nvme_get_t *items, size_t n);

#endif
