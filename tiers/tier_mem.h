/* tier_mem.h — zeroed memory for the large tables that live as long as a
 * scheduler term or a tier (slot arrays, window pools, per-call scratch).
 *
 * calloc does not promise untouched pages: glibc serves a request from memory a
 * freed table left in its arena and then clears it, so every page becomes
 * resident at once. A coordinator that lost and won leadership a few times had
 * tens of MiB more resident than after its first term (the soak's RSS check
 * found it). tier_mem_calloc maps a request of TIER_MEM_MAP_MIN or more with
 * mmap, whose pages are zero and stay out of memory until written, and
 * tier_mem_free unmaps it, so a table costs what its users touch, in every term
 * (transparent huge pages are turned off for it: one write would fault in 2 MiB).
 * Smaller requests, and every request under AddressSanitizer (so it sees
 * overruns and leaks), are heap blocks cleared with memset. Free only with
 * tier_mem_free. */
#ifndef KVT_TIER_MEM_H
#define KVT_TIER_MEM_H

#include <stddef.h>

#define TIER_MEM_MAP_MIN ((size_t)1 << 20)

/* 1 when large requests are mapped; 0 under AddressSanitizer, whose shadow memory
 * does not cover a mapping: there every block is a heap block, so overruns and
 * leaks of these tables stay visible to it. */
#if defined(__SANITIZE_ADDRESS__)
#define TIER_MEM_MAPS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TIER_MEM_MAPS 0
#endif
#endif
#ifndef TIER_MEM_MAPS
#define TIER_MEM_MAPS 1
#endif

/* n elements of size bytes, zeroed; NULL when out of memory or n * size overflows. */
void *tier_mem_calloc(size_t n, size_t size);
/* Releases what tier_mem_calloc returned; NULL is a no-op. */
void tier_mem_free(void *p);

#endif
