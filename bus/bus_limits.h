/* bus_limits.h — the protocol's shared limits as C constants, derived from the
 * nanopb-generated structs, so the .options files of schemas/ stay their one source: a bound
 * changed there changes every array sized from it here. Everything is an integer
 * constant expression (array sizes, _Static_assert, case labels) but not usable in
 * #if (sizeof). Code that must keep a copy (the public kvtier.h, which cannot
 * include generated code; a file format) keeps it with a _Static_assert against
 * the constant below.
 *
 * String sizes count the NUL, as nanopb's max_size does: the longest string on the
 * wire is BUS_*_MAX - 1 bytes. */
#ifndef KVT_BUS_LIMITS_H
#define KVT_BUS_LIMITS_H

#include <stdint.h>

#include "bus_arrays.h"
#include "common.pb.h"
#include "internal.pb.h"
#include "meta.pb.h"
#include "tier.pb.h"

/* Bytes of a static string or bytes field, and entries of a static repeated field. */
#define BUS_FIELD_SIZE(type, field) ((uint32_t)sizeof(((type *)0)->field))
#define BUS_FIELD_COUNT(type, field)                                                               \
    ((uint32_t)(sizeof(((type *)0)->field) / sizeof(((type *)0)->field[0])))

/* Tiers per cluster: what one ClusterInfoReply carries, so every tier table
 * (deployment file, scheduler, standby, reclaimer, gc, token) holds at most this. */
#define BUS_MAX_TIERS BUS_FIELD_COUNT(kvtier_ClusterInfoReply, tiers)

/* TierInfo strings. */
#define BUS_TIER_NAME_MAX BUS_FIELD_SIZE(kvtier_TierInfo, name)
#define BUS_TIER_KIND_MAX BUS_FIELD_SIZE(kvtier_TierInfo, kind_name)
#define BUS_TIER_ENDPOINT_MAX BUS_FIELD_SIZE(kvtier_TierInfo, endpoint)
#define BUS_TIER_HOST_MAX BUS_FIELD_SIZE(kvtier_TierInfo, host)
#define BUS_TIER_SHM_MAX BUS_FIELD_SIZE(kvtier_TierInfo, shm)
/* Tier-plane endpoint a copy is sent to (CopySlotsRequest.dst_endpoint). */
#define BUS_COPY_ENDPOINT_MAX BUS_FIELD_SIZE(kvtier_CopySlotsRequest, dst_endpoint)

/* Instance ids (every instance_id field has the same bound, meta.options). */
#define BUS_INSTANCE_ID_MAX BUS_FIELD_SIZE(kvtier_InstanceSpec, instance_id)
#define BUS_CLUSTER_MAX BUS_FIELD_SIZE(kvtier_ClusterInfoReply, cluster)
/* Equal segments of a block (InstanceSpec.segments: layers x K/V), the layer-wise
 * submits of kvtier.h (KVT_MAX_SEGMENTS keeps a copy). A uint32 on the wire: the bound
 * is this project's, not nanopb's. */
#define BUS_MAX_BLOCK_SEGMENTS 4096u

/* Stats: counters per StatsReply (one page) and bytes of a counter name. */
#define BUS_STATS_PAGE_MAX BUS_FIELD_COUNT(kvtier_StatsReply, counters)
#define BUS_STAT_NAME_MAX BUS_FIELD_SIZE(kvtier_StatCounter, name)
/* Instances a detail StatsReply names (StatsReply.instance_ids). */
#define BUS_STATS_INSTANCES_MAX BUS_FIELD_COUNT(kvtier_StatsReply, instance_ids)

/* Internal-plane batches (internal.options). */
#define BUS_MAX_RECLAIM_BATCH BUS_FIELD_COUNT(kvtier_ReclaimCandidatesReply, blocks)
#define BUS_MAX_QUOTA_BATCH BUS_FIELD_COUNT(kvtier_QuotaEnforceReply, blocks)
#define BUS_MAX_DEMOTE_BATCH BUS_FIELD_COUNT(kvtier_DemoteDoneRequest, results)
#define BUS_MAX_GC_PAGE BUS_FIELD_COUNT(kvtier_GcScanReply, to_probe)
#define BUS_MAX_GC_DROP BUS_FIELD_COUNT(kvtier_GcDropRequest, missing)

/* Slot headers per InventoryReply page as entries (tier.options). */
#define BUS_MAX_INVENTORY_PAGE BUS_FIELD_COUNT(kvtier_InventoryReply, entries)
/* ... and as records (InventoryReply.records, InventoryRequest.records): 56 bytes each,
 * at most 65,536 a page, so a page is 3.5 MiB: within one opaque field (BUS_MAX_BLOB)
 * and frame 0 (BUS_MAX_FRAME0, bus_envelope.h). */
#define BUS_INVENTORY_RECORD_BYTES 56u
#define BUS_MAX_INVENTORY_RECORDS 65536u

/* Block keys (fixed_length 16 in every schema that carries one). */
#define BUS_BLOCK_KEY_BYTES BUS_FIELD_SIZE(kvtier_BlockKey, key)

_Static_assert(BUS_FIELD_COUNT(kvtier_GcScanReply, to_probe_epochs) == BUS_MAX_GC_PAGE,
               "GcScanReply.to_probe_epochs runs parallel to to_probe");
_Static_assert(BUS_FIELD_COUNT(kvtier_GcDropRequest, epochs) == BUS_MAX_GC_DROP,
               "GcDropRequest.epochs runs parallel to missing");
_Static_assert((uint64_t)BUS_MAX_INVENTORY_RECORDS *BUS_INVENTORY_RECORD_BYTES <= BUS_MAX_BLOB,
               "an Inventory page of records fits one opaque field (and frame 0)");
_Static_assert(BUS_KEY_LEN == BUS_BLOCK_KEY_BYTES, "bus_arrays.h keys are block keys");
_Static_assert(BUS_FIELD_SIZE(kvtier_BlockRef, key) == BUS_BLOCK_KEY_BYTES &&
                   BUS_FIELD_SIZE(kvtier_InventoryEntry, key) == BUS_BLOCK_KEY_BYTES,
               "every block key field has one size");
_Static_assert(BUS_FIELD_SIZE(kvtier_BlockRef, instance_id) == BUS_INSTANCE_ID_MAX &&
                   BUS_FIELD_SIZE(kvtier_PutHeaderRequest, instance_id) == BUS_INSTANCE_ID_MAX &&
                   BUS_FIELD_SIZE(kvtier_StatsRequest, instance_id) == BUS_INSTANCE_ID_MAX,
               "every instance_id field has one bound");

#endif
