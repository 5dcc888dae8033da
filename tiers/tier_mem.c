/* tier_mem.c — see tier_mem.h. Every block starts with a header of one cache
 * line (the mapping's length, or 0 for calloc), so the caller's pointer keeps a
 * 64-byte alignment and tier_mem_free knows how the block was made. */
#include "tier_mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define S_HEAD 64u
#define S_MAGIC 0x6b76746d656d0001ull /* "kvtmem", version 1 */

/* Under AddressSanitizer every block is a heap block (tier_mem.h TIER_MEM_MAPS). */
#if TIER_MEM_MAPS
#define S_MAP_MIN TIER_MEM_MAP_MIN
#else
#define S_MAP_MIN SIZE_MAX
#endif

typedef struct {
    uint64_t magic;
    uint64_t mapped; /* bytes mapped with the header, 0: calloc'd */
} s_head_t;

_Static_assert(sizeof(s_head_t) <= S_HEAD, "the header fits its cache line");

void *tier_mem_calloc(size_t n, size_t size)
{
    if (size && n > (SIZE_MAX - S_HEAD - 4096) / size)
        return NULL;
    size_t bytes = n * size + S_HEAD;
    uint8_t *base;
    uint64_t mapped = 0;
    if (bytes >= S_MAP_MIN) {
        base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED)
            return NULL;
        /* with transparent huge pages "always", one write would fault in 2 MiB */
        (void)madvise(base, bytes, MADV_NOHUGEPAGE);
        mapped = bytes;
    } else {
        base = aligned_alloc(S_HEAD, (bytes + S_HEAD - 1) / S_HEAD * S_HEAD);
        if (!base)
            return NULL;
        memset(base, 0, bytes);
    }
    *(s_head_t *)base = (s_head_t){.magic = S_MAGIC, .mapped = mapped};
    return base + S_HEAD;
}

void tier_mem_free(void *p)
{
    if (!p)
        return;
    uint8_t *base = (uint8_t *)p - S_HEAD;
    s_head_t h = *(s_head_t *)base;
    if (h.magic != S_MAGIC)
        abort(); /* not ours: freeing it would corrupt the heap */
    if (h.mapped)
        munmap(base, h.mapped);
    else
        free(base);
}
