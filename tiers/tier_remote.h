/* tier_remote.h — the `remote` tier backend (issue 9 §4, DESIGN.md §7, §12): host
 * memory that is served over the network only. It holds its slots in the host
 * segment layout (tiers/tier_seg.h: headers, seqlock protocol, writer words) but
 * in anonymous memory of its own process: no shm name, nothing another process can
 * map, so describe reports no same-host access and every client, on this host or
 * another, reads and writes through the tier actor (frames, or its UCX staging
 * regions; tier-to-tier copies too). Host memory does not survive its process: a restart is a new
 * epoch.
 *
 * Options: "transport" — the byte transport, "zmq" (the default: ZeroMQ frames);
 * "ucx" (bytes through UCX staging regions, docs/ARCHITECTURE.md; refused at
 * configure where the build has no UCX) with "ucx_regions" (default 16) regions of
 * "ucx_region_mib" (default 64) MiB; "prefault" (default true: every page is
 * faulted in at open, so the first puts do not pay for page faults);
 * "verify_reads" (default false: the tier actor checks each block it serves). */
#ifndef KVT_TIER_REMOTE_H
#define KVT_TIER_REMOTE_H

#include "tier.h"

/* The ops table, kind "remote" (wire TIER_KIND_REMOTE). It takes no address
 * (path_key NULL); open returns -EINVAL for bad geometry, -EOVERFLOW when
 * capacity x slot size does not fit, -ENOMEM when the memory cannot be had. */
extern const struct tier_ops tier_remote_ops;

#endif
