/* tier_host.h — the `host` tier backend (DESIGN.md §3, §4, §7): one POSIX
 * shared-memory segment per tier, named by cfg.path ("/kvtier-host0"), so a
 * client process on the same host maps it by name and copies block bytes
 * without a message. The tier actor's process owns the segment: it creates it
 * at open (replacing a stale one left by a dead process — host memory does not
 * survive its process) and removes it at close. This file never knows about
 * the scheduler, the bus or etcd, and never allocates on the data path.
 *
 * The segment's layout and header protocol are tiers/tier_seg.h's (the library a
 * same-host client links); this file is the owner side behind the ops table.
 */
#ifndef KVT_TIER_HOST_H
#define KVT_TIER_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "tier.h"
#include "tier_checksum.h"
#include "tier_seg.h"

/* The ops table, kind "host". cfg.path is the shm name: it starts with '/',
 * holds no other '/', and is 2..TIER_SEG_SHM_NAME_MAX bytes. open returns
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

/* Who owns the live segment named NAME (its holder's flock, found in /proc/locks):
 * "pid N (command)" into buf, 0. -ENOENT with buf "" when no segment of that name
 * exists or no live process holds it (a stale one, which open replaces). */
int tier_host_owner(const char *name, char *buf, size_t len);

#endif
