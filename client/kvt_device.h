/* kvt_device.h — device buffers of the data role (kvtier.h "Device buffers"): the
 * CUDA runtime a handle loads at its first device submit, the pinned staging of its
 * job slots, and the copies between the caller's device memory and that staging on
 * either side of a job's host move. Private to client/.
 *
 * A device job runs in phases (kvti_job_t.dev_phase):
 *   put: D2H (the copy out of the device, after the caller's wait_event) -> HOST
 *        (the transports move the staging as host bytes) -> finished;
 *   get: HOST (into the staging) -> H2D (into the device, after wait_event) ->
 *        finished.
 * A phase's copies end in the slot's own event; kvti_dev_pump moves jobs on when
 * their event is done. Nothing here blocks on the device. */
#ifndef KVT_DEVICE_H
#define KVT_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvt_transport.h"

enum {
    KVTI_DEV_NONE = 0, /* host buffers */
    KVTI_DEV_D2H = 1,  /* a put's copy out of the device is running */
    KVTI_DEV_HOST = 2, /* the host move is running (or about to) */
    KVTI_DEV_H2D = 3,  /* a get's copy into the device is running */
};

/* Checks a device submit's pointers (n of piece bytes each: blocks, or a layer-wise
 * job's segments), opens the runtime when this is the handle's first, gives the job
 * slot its staging and points the job's host buffers into it (j->bufs for whole
 * blocks, j->seg_ptrs for segments; jobs / cap: the handle's job table, whose idle
 * slots give their staging back when the bound is reached). 0, or a negative status with the
 * handle's error set; nothing is started. */
int kvti_dev_prepare(kvt_client_t *c, const char *what, kvti_job_t *jobs, uint32_t cap,
                     kvti_job_t *j, const kvt_xfer_t *x, void *const *ptrs, uint64_t n,
                     uint64_t piece);

/* Host buffers on a handle whose runtime is open (it moved device buffers before):
 * refuses device pointers passed as host memory (a host copy of them would fault).
 * 0, or -KVT_INVALID_ARGUMENT with the handle's error set; 0 without a runtime. */
int kvti_dev_check_host(kvt_client_t *c, const char *what, void *const *ptrs, uint64_t n);

/* A prepared device put: queues its copy out of the device (phase D2H). false when
 * the runtime refused the copies: the job's error is recorded, nothing moved, and the
 * caller starts the job's host part at once so that it finishes (every key failed). */
bool kvti_dev_start_put(kvti_job_t *j);

/* The host part of a device get ended (the job's open parts reached 0): queues the
 * copy into the device of the keys that moved (phase H2D). true: the job finishes
 * later (kvti_dev_pump); false: now (nothing to copy, or the copy was refused). */
bool kvti_dev_defer_get(kvti_job_t *j);

/* One round over the handle's device jobs: each whose event is done moves on —
 * start(j) for a put whose copy out of the device is done, finish(j) for a get
 * whose copy into it is. Returns how many device jobs are still copying. */
typedef void (*kvti_dev_step_fn)(void *arg, kvti_job_t *j);
uint32_t kvti_dev_pump(kvti_job_t *jobs, uint32_t cap, kvti_dev_step_fn start,
                       kvti_dev_step_fn finish, void *arg);

/* For transports that copy straight into device memory (kvt_transport_cuda.c): a
 * device-to-device copy on the job's stream, after its wait_event (the first copy
 * of the job queues the wait); the key is then left out of the copy from the
 * staging (mark it in j->ddirect). A cudaError_t (0: queued). */
int kvti_dev_d2d(kvti_job_t *j, void *dst, const void *src, uint64_t n);
/* The same from host memory the device can reach (a registered mapping), kind H2D. */
int kvti_dev_h2d(kvti_job_t *j, void *dst, const void *src, uint64_t n);
/* Registers a mapping of this process (the host tier's segment) with the runtime so
 * that device copies reach it directly (cudaHostRegister) / unregisters it. A
 * cudaError_t, or -1 without a runtime open. */
int kvti_dev_host_register(kvt_client_t *c, void *p, size_t n);
void kvti_dev_host_unregister(kvt_client_t *c, void *p);
/* The 16-byte UUID of the GPU the job's device buffers are on. 0 or -1. */
int kvti_dev_buffer_uuid(const kvti_job_t *j, uint8_t uuid[16]);
/* Maps another process's device allocation (cudaIpcOpenMemHandle) / unmaps it. A
 * cudaError_t; the runtime must be open (a device job was prepared). */
int kvti_dev_ipc_open(kvt_client_t *c, const uint8_t handle[64], void **base);
void kvti_dev_ipc_close(kvt_client_t *c, void *base);
/* A cudaError_t as text (the runtime's string and number). */
const char *kvti_dev_strerror(kvt_client_t *c, int rc, char *buf, size_t len);

/* Waits until no copy of the handle's device jobs is queued on the device: before a
 * mapping those copies may read or write is unmapped or unregistered (a segment
 * detached, an IPC mapping closed, the handle closing). No-op without a runtime. */
void kvti_dev_quiesce(kvt_client_t *c, kvti_job_t *jobs, uint32_t cap);

/* A device get whose copies are done: its keys copied straight from a tier's slots
 * count only if the token's lease still held (the pin kept the slot) — a lapsed one
 * fails them (EXPIRED): a slot given to another block meanwhile is never delivered. */
void kvti_dev_check_direct(kvti_job_t *j);

/* The slot's staging and event, when the handle closes. */
void kvti_dev_release(kvt_client_t *c, kvti_job_t *j);
/* The handle's runtime, after every slot was released. */
void kvti_dev_close(kvt_client_t *c);

#endif
