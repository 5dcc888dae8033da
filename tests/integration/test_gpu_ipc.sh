#!/usr/bin/env bash
# issue 11 §1/§2: same-host clients on the gpu tier's GPU read its blocks device to
# device through the tier's CUDA IPC handle. A deployment gpu0 -> host0 on the fake
# CUDA runtime (tests/support/fakecuda: device memory is memfd mappings, so a
# handle from the tier process opens in the client process); it_device.py puts
# device blocks (through the tier actor) and loads them whole and layer by layer:
# the shared-memory client's loads map the arena and copy device to device (the
# fake's log shows D2D copies in the client process), the frames-only client's go
# through pinned staging; both byte-exact.
. "$(dirname "$0")/lib.sh"
: "${KVTIER_LIB:?KVTIER_LIB must name libkvtier.so}"
: "${KVT_FAKECUDA_SO:?KVT_FAKECUDA_SO must name libkvt_fakecuda.so}"
export KVT_FAKECUDA_LOG=$it_dir/fakecuda.log

it_write_deployment <<JSON
{"tiers": [
  {"name": "gpu0", "kind": "gpu", "capacity": 64, "slot_size": "64KiB",
   "cuda_library": "$KVT_FAKECUDA_SO"},
  {"name": "host0", "kind": "host", "capacity": 64, "slot_size": "64KiB"}]}
JSON
it_start

KVTIER_COORDINATOR=$KVTIER_COORDINATOR IT_EXPECT_IPC=1 KVT_LOG_LEVEL=debug \
  it_python "$KVT_SOURCE_DIR/tests/integration/it_device.py" >"$it_dir/it_device.out" 2>&1 ||
  it_fail "device buffers against a gpu tier failed: $(cat "$it_dir/it_device.out")"
# The tier process never opens an IPC handle nor copies device to device: these
# lines are the client's.
grep -q " ipc_open_mem_handle pid=[0-9]* dev[0-9]* size=" "$it_dir/fakecuda.log" ||
  it_fail "the client process never opened the tier's IPC handle"
grep -q " memcpy_async stream=[0-9]* kind=D2D" "$it_dir/fakecuda.log" ||
  it_fail "the client process made no device to device copy"
it_no_crash
it_log "gpu tier: device blocks loaded device to device through CUDA IPC, and through staging"
