/* fakecuda.h — the test-only controls of libkvt_fakecuda.so, the fake CUDA runtime
 * the suite builds (fakecuda.c). Tests reach them with dlsym on the handle the code
 * under test opened (dlopen of the same path returns the same object), so nothing
 * links the fake.
 *
 * What the fake is: the runtime entry points of tiers/tier_cuda.h with host memory
 * behind device pointers. Device allocations are memfd mappings, so an IPC handle
 * (the owner's pid, the memfd's number, the size) lets another process of the same
 * user open /proc/<pid>/fd/<n> and map the same bytes, as cudaIpcOpenMemHandle does.
 * Streams are queues run in order, lazily: queued work runs only at a
 * synchronisation point (cudaStreamSynchronize, cudaEventSynchronize,
 * cudaEventQuery, cudaMemcpy), so code that reads a copy's destination without
 * waiting for it sees the old bytes, as it may with a real GPU. cudaStreamWaitEvent
 * holds a stream until the event's latest record has run. A copy touching host
 * memory that was not registered (cudaHostRegister) is counted (unpinned_copies).
 *
 * Environment: KVT_FAKECUDA_LOG=path appends one line per call and per executed
 * operation ("<pid> <what>"), the protocol a test checks; KVT_FAKECUDA_DEVICES=n
 * (default 1, 0 gives cudaErrorNoDevice); KVT_FAKECUDA_NO_DRIVER=1 makes every
 * call fail with cudaErrorInsufficientDriver (a runtime without a driver);
 * KVT_FAKECUDA_NO_IPC=1 makes cudaIpcGetMemHandle fail with cudaErrorNotSupported. */
#ifndef KVT_FAKECUDA_H
#define KVT_FAKECUDA_H

#include <stdint.h>

/* Queues a hold on stream s: work queued after it does not run until
 * kvt_fakecuda_stream_release(s) releases it (the earliest unreleased hold).
 * 0, or -1 for an unknown stream / nothing to release. A stream synchronize that
 * reaches a hold waits for the release (from another thread). */
typedef int (*kvt_fakecuda_hold_fn)(void *stream);
#define KVT_FAKECUDA_HOLD "kvt_fakecuda_stream_hold"
#define KVT_FAKECUDA_RELEASE "kvt_fakecuda_stream_release"

/* A counter by name: "copies" (executed), "unpinned_copies", "allocations" (live),
 * "registered" (live host registrations), "ipc_opened" (live), "pending" (queued
 * operations of all streams). UINT64_MAX for an unknown name. */
typedef uint64_t (*kvt_fakecuda_counter_fn)(const char *name);
#define KVT_FAKECUDA_COUNTER "kvt_fakecuda_counter"

#endif
