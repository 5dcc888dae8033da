/* tier_gpu.h — the `gpu` tier backend (issue 11 §1): one arena of device memory on
 * one GPU, cut into `capacity` slots of `slot_size` bytes (slot i at
 * i * slot_stride, the stride slot_size rounded up to TIER_GPU_SLOT_ALIGN), through
 * the CUDA runtime loaded at run time (tier_cuda.h). Slot headers live in host
 * memory of the tier process (the tier plane reads them; device memory does not
 * survive the process, so neither do they: every open is a new epoch, empty).
 *
 * Bytes move between the caller's host buffers (the tier actor's frames) and the
 * arena through a pinned staging buffer of `staging_bytes` (cudaHostRegister),
 * split in two halves so that one half's copy on the tier's stream overlaps the
 * host copy into or out of the other; a block larger than the staging goes in
 * pieces. Host buffers the runtime has registered (cudaHostRegister: a host tier's
 * segment, pinned frames) skip the staging: one cudaMemcpyAsync per segment. Every
 * op waits for its copies before it returns, so the ops table's
 * synchronous contract holds. Same-host clients on the same GPU reach the arena
 * without a message through describe's CUDA IPC handle (TIER_ACCESS_CUDA_IPC).
 *
 * Options: device (an index, default 0, or a GPU UUID "GPU-..."), cuda_library (a
 * path or soname of libcudart; else $KVT_CUDA_LIBRARY, else the default names),
 * staging_bytes (pinned staging, TIER_GPU_STAGING_MIN..MAX, default 8 MiB),
 * verify_put (default false: a SERVING header's given checksum is kept as the host
 * tier keeps it; true: checked against the bytes, read back, -EBADMSG). A header
 * without a checksum gets the checksum of the bytes, read back. open
 * fails with a message naming what is missing when there is no runtime, no driver
 * or no such device. Single-threaded like every backend: the tier actor owns it. */
#ifndef KVT_TIER_GPU_H
#define KVT_TIER_GPU_H

#include "tier.h"

#define TIER_GPU_SLOT_ALIGN 4096u
#define TIER_GPU_STAGING_MIN (64u * 1024u)
#define TIER_GPU_STAGING_MAX (1024u * 1024u * 1024u)
#define TIER_GPU_STAGING_DEFAULT (8u * 1024u * 1024u)

extern const struct tier_ops tier_gpu_ops;

#endif
