/* tier_key.c — formatting of block keys for logs and error messages. */
#include "tier_key.h"

#include <stdio.h>

/* Writes 32 lowercase hex digits and a NUL into out (33 bytes). */
char *tier_key_hex(const tier_key_t *key, char out[2 * TIER_KEY_BYTES + 1])
{
    for (int i = 0; i < TIER_KEY_BYTES; i++)
        snprintf(out + 2 * i, 3, "%02x", key->b[i]);
    return out;
}
