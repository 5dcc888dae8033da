/* bus_inventory.c — see bus_inventory.h. Offsets: slot 0, key 8, size 24,
 * checksum 32, ttl_deadline_ms 40, instance 48, state 52. */
#include "bus_inventory.h"

#include <string.h>

#include "bus_le.h"

void bus_inv_record_put(uint8_t *out, uint32_t i, const bus_inv_record_t *r)
{
    uint8_t *p = out + (size_t)i * BUS_INVENTORY_RECORD_BYTES;
    bus_le_put64(p, r->slot);
    memcpy(p + 8, r->key, BUS_BLOCK_KEY_BYTES);
    bus_le_put64(p + 24, r->size);
    bus_le_put64(p + 32, r->checksum);
    bus_le_put64(p + 40, r->ttl_deadline_ms);
    bus_le_put32(p + 48, r->instance);
    bus_le_put32(p + 52, r->state);
}

uint64_t bus_inv_record_slot(const uint8_t *in, uint32_t i)
{
    return bus_le_get64(in + (size_t)i * BUS_INVENTORY_RECORD_BYTES);
}

void bus_inv_record_get(const uint8_t *in, uint32_t i, bus_inv_record_t *r)
{
    const uint8_t *p = in + (size_t)i * BUS_INVENTORY_RECORD_BYTES;
    r->slot = bus_le_get64(p);
    memcpy(r->key, p + 8, BUS_BLOCK_KEY_BYTES);
    r->size = bus_le_get64(p + 24);
    r->checksum = bus_le_get64(p + 32);
    r->ttl_deadline_ms = bus_le_get64(p + 40);
    r->instance = bus_le_get32(p + 48);
    r->state = bus_le_get32(p + 52);
}

int bus_inv_records_count(uint32_t len, uint32_t max, uint32_t *n, kvtier_Status *st)
{
    if (len % BUS_INVENTORY_RECORD_BYTES != 0)
        return bus_status_set(st, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                              "InventoryReply.records is %u bytes: not a whole number of %u-byte "
                              "records",
                              len, BUS_INVENTORY_RECORD_BYTES);
    uint32_t count = len / BUS_INVENTORY_RECORD_BYTES;
    if (count > max)
        return bus_status_set(st, kvtier_StatusCode_STATUS_INVALID_ARGUMENT,
                              "InventoryReply.records holds %u records, more than the %u the "
                              "page asked for",
                              count, max);
    *n = count;
    return 0;
}
