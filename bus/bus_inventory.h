/* bus_inventory.h — Inventory records (schemas/tier.proto InventoryReply.records,
 * docs/PROTOCOL.md "Inventory records"): a page of slot headers packed as fixed-size
 * little-endian records in one bytes field, so a page of 65,536 headers is one
 * 3.5 MiB field decoded at memory speed instead of 65,536 nested messages. The
 * tier actor encodes them, the scheduler decodes them. Never allocates; never
 * trusts a length from the wire. */
#ifndef KVT_BUS_INVENTORY_H
#define KVT_BUS_INVENTORY_H

#include <stdint.h>

#include "bus_limits.h"
#include "bus_status.h"

/* One record: BUS_INVENTORY_RECORD_BYTES on the wire, in this order. */
typedef struct {
    uint64_t slot;
    uint8_t key[BUS_BLOCK_KEY_BYTES];
    uint64_t size;
    uint64_t checksum;
    uint64_t ttl_deadline_ms; /* wall clock; 0: none */
    uint32_t instance;        /* the slot header's instance number (0: none) */
    uint32_t state;           /* kvtier_LocationState */
} bus_inv_record_t;

/* Writes r as record i of out (out holds at least i + 1 records). */
void bus_inv_record_put(uint8_t *out, uint32_t i, const bus_inv_record_t *r);
/* Reads record i of in (checked by bus_inv_records_count). */
void bus_inv_record_get(const uint8_t *in, uint32_t i, bus_inv_record_t *r);

/* The slot of record i, alone. */
uint64_t bus_inv_record_slot(const uint8_t *in, uint32_t i);

/* Records in a field of `len` bytes when a page may carry at most `max`: 0 and *n,
 * or -INVALID_ARGUMENT with st naming what is wrong ("InventoryReply.records is 57
 * bytes: not a whole number of 56-byte records"). */
int bus_inv_records_count(uint32_t len, uint32_t max, uint32_t *n, kvtier_Status *st);

#endif
