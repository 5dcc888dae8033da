/* bus_le.h — little-endian fields of the project's own binary formats (tier-plane
 * tokens, inventory records, exported tokens): the wire's byte order whatever the
 * host's. On a little-endian host the compiler turns each into one load or store.
 * Header-only; p need not be aligned. */
#ifndef KVT_BUS_LE_H
#define KVT_BUS_LE_H

#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define BUS_LE_HOST 1 /* the wire's order: fields are copied as they are */
#else
#define BUS_LE_HOST 0
#endif

static inline void bus_le_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void bus_le_put32(uint8_t *p, uint32_t v)
{
    if (BUS_LE_HOST) {
        memcpy(p, &v, 4);
        return;
    }
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void bus_le_put64(uint8_t *p, uint64_t v)
{
    if (BUS_LE_HOST) {
        memcpy(p, &v, 8);
        return;
    }
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t bus_le_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t bus_le_get32(const uint8_t *p)
{
    uint32_t v = 0;
    if (BUS_LE_HOST) {
        memcpy(&v, p, 4);
        return v;
    }
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static inline uint64_t bus_le_get64(const uint8_t *p)
{
    uint64_t v = 0;
    if (BUS_LE_HOST) {
        memcpy(&v, p, 8);
        return v;
    }
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

#endif
