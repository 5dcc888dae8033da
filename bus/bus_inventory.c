/* bus_inventory.c — see bus_inventory.h. Offsets: slot 0, key 8, size 24,
 * checksum 32, ttl_deadline_ms 40, instance 48, state 52. */
#include "bus_inventory.h"

#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define S_LE 1 /* the wire's order: fields are copied as they are */
#else
#define S_LE 0
#endif

static void s_put64(uint8_t *p, uint64_t v)
{
    if (S_LE) {
        memcpy(p, &v, 8);
        return;
    }
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void s_put32(uint8_t *p, uint32_t v)
{
    if (S_LE) {
        memcpy(p, &v, 4);
        return;
    }
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t s_get64(const uint8_t *p)
{
    uint64_t v = 0;
    if (S_LE) {
        memcpy(&v, p, 8);
        return v;
    }
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t s_get32(const uint8_t *p)
{
    uint32_t v = 0;
    if (S_LE) {
        memcpy(&v, p, 4);
        return v;
    }
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

void bus_inv_record_put(uint8_t *out, uint32_t i, const bus_inv_record_t *r)
{
    uint8_t *p = out + (size_t)i * BUS_INVENTORY_RECORD_BYTES;
    s_put64(p, r->slot);
    memcpy(p + 8, r->key, BUS_BLOCK_KEY_BYTES);
    s_put64(p + 24, r->size);
    s_put64(p + 32, r->checksum);
    s_put64(p + 40, r->ttl_deadline_ms);
    s_put32(p + 48, r->instance);
    s_put32(p + 52, r->state);
}

uint64_t bus_inv_record_slot(const uint8_t *in, uint32_t i)
{
    return s_get64(in + (size_t)i * BUS_INVENTORY_RECORD_BYTES);
}

void bus_inv_record_get(const uint8_t *in, uint32_t i, bus_inv_record_t *r)
{
    const uint8_t *p = in + (size_t)i * BUS_INVENTORY_RECORD_BYTES;
    r->slot = s_get64(p);
    memcpy(r->key, p + 8, BUS_BLOCK_KEY_BYTES);
    r->size = s_get64(p + 24);
    r->checksum = s_get64(p + 32);
    r->ttl_deadline_ms = s_get64(p + 40);
    r->instance = s_get32(p + 48);
    r->state = s_get32(p + 52);
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
