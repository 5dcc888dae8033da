/* tier_key.c — formatting of block keys for logs and error messages, and the
 * instance hash of slot headers. */
#include "tier_key.h"

#include <stdio.h>
#include <sys/uio.h>

#include "tier_checksum.h"

uint32_t tier_instance_hash(const char *instance_id)
{
    if (!instance_id || !instance_id[0])
        return 0;
    struct iovec iov = {.iov_base = (void *)instance_id, .iov_len = strlen(instance_id)};
    uint32_t h = (uint32_t)tier_checksum(&iov, 1);
    return h ? h : 1;
}

/* Writes 32 lowercase hex digits and a NUL into out (33 bytes). */
char *tier_key_hex(const tier_key_t *key, char out[2 * TIER_KEY_BYTES + 1])
{
    for (int i = 0; i < TIER_KEY_BYTES; i++)
        snprintf(out + 2 * i, 3, "%02x", key->b[i]);
    return out;
}
