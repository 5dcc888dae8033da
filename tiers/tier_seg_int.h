/* tier_seg_int.h — the segment's in-memory structs and the layout helpers the
 * owner side (tier_host.c) shares with the segment library (tier_seg.c). Private
 * to tiers/tier_seg.c and tiers/tier_host.c. */
#ifndef KVT_TIER_SEG_INT_H
#define KVT_TIER_SEG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tier_seg.h"

#define TIER_SEG_PATH_MAX 256

#define TIER_SEG_SHM_MODE 0600       /* same-user clients only */
#define TIER_SEG_SHM_GROUP_MODE 0660 /* with "shm_group": that group's members too */
#define TIER_SEG_CREATE_ATTEMPTS 4   /* replace-stale races before giving up */
#define TIER_SEG_SPINS_BEFORE_YIELD 64

struct tier_seg_super {
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
    uint32_t flags; /* TIER_SEG_FLAG_* */
};

struct tier_seg_slot_hdr {
    uint32_t seq;
    uint32_t state;
    uint64_t key[2];
    uint32_t instance;
    uint32_t reserved0;
    uint64_t size;
    uint64_t checksum;
    uint64_t deadline_ms;
    uint64_t writer; /* the writer word (tier_seg.h "Writers"); not part of the seqlock */
};

/* The layout is an ABI between processes: pin it to the documented offsets. */
_Static_assert(sizeof(struct tier_seg_super) <= TIER_SEG_SUPER_SIZE, "superblock fits its page");
_Static_assert(offsetof(struct tier_seg_super, epoch) == 64, "superblock layout");
_Static_assert(offsetof(struct tier_seg_super, live) == 76, "superblock layout");
_Static_assert(offsetof(struct tier_seg_super, name) == 80, "superblock layout");
_Static_assert(offsetof(struct tier_seg_super, flags) == 144, "superblock layout");
_Static_assert(sizeof(struct tier_seg_slot_hdr) == TIER_SEG_HEADER_SIZE, "slot header record");
_Static_assert(offsetof(struct tier_seg_slot_hdr, key) == 8, "slot header layout");
_Static_assert(offsetof(struct tier_seg_slot_hdr, size) == 32, "slot header layout");
_Static_assert(offsetof(struct tier_seg_slot_hdr, deadline_ms) == 48, "slot header layout");
_Static_assert(offsetof(struct tier_seg_slot_hdr, writer) == 56, "slot header layout");
_Static_assert(sizeof(tier_key_t) == 2 * sizeof(uint64_t), "key is two words");

struct tier_seg_layout {
    uint64_t stride;
    uint64_t headers_off;
    uint64_t data_off;
    uint64_t total;
};

struct tier_seg {
    uint8_t *base;
    size_t len;
    struct tier_seg_super *sb;
    struct tier_seg_slot_hdr *hdrs;
    uint8_t *data;
    uint64_t capacity; /* validated copies: never re-read from shared memory */
    uint64_t slot_size;
    uint64_t stride;
    uint64_t epoch;
    int fd; /* owner only (holds the flock); -1 for clients */
    bool owner;
    uint64_t prefault_ns;
    char name[TIER_SEG_PATH_MAX];
};

/* The layout of capacity slots of slot_size bytes; -EINVAL / -EOVERFLOW. */
int tier_seg_layout(uint64_t capacity, uint64_t slot_size, struct tier_seg_layout *l);
/* Points seg's fields into a mapping of the layout. */
void tier_seg_bind(tier_seg_t *seg, void *base, size_t len, const struct tier_seg_layout *l,
                   uint64_t capacity, uint64_t slot_size);
uint64_t tier_seg_now_ns(void);
/* A random non-zero epoch. */
uint64_t tier_seg_new_epoch(void);
/* The owner fills the superblock of a segment seg was bound to (tier_seg_bind: its
 * capacity, slot size and epoch set), live, magic last. */
void tier_seg_init_super(tier_seg_t *seg, const char *tier_name, const struct tier_seg_layout *l,
                         bool verify_reads);

#endif
