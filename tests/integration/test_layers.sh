#!/usr/bin/env bash
# issue 11 §2: layer-wise blocks (docs/PROTOCOL.md "Layer-wise moves"). An instance
# registered with 16 segments (8 layers x K/V) stores blocks layer by layer from the
# pages of a numpy paged KV cache and loads them layer by layer into other pages,
# through the Python binding against the deployment under deploy/supervise:
# 1. on the shared-memory path (in place), including bad ranges and buffers;
# 2. another process loads them over frames (staged whole blocks), byte-exact;
# 3. and the same round trip with every byte as frames.
. "$(dirname "$0")/lib.sh"
: "${KVTIER_LIB:?KVTIER_LIB must name libkvtier.so}"

it_write_deployment <<JSON
{"tiers": [{"name": "host0", "kind": "host", "capacity": 64, "slot_size": "256KiB"}]}
JSON
it_start

KVTIER_COORDINATOR=$KVTIER_COORDINATOR it_python "$KVT_SOURCE_DIR/tests/integration/it_layers.py" \
  store-load || it_fail "layer-wise store and load over shared memory failed"
KVTIER_COORDINATOR=$KVTIER_COORDINATOR IT_DISABLE_SHM=1 \
  it_python "$KVT_SOURCE_DIR/tests/integration/it_layers.py" load 12 ||
  it_fail "another process could not load the blocks layer by layer over frames"
KVTIER_COORDINATOR=$KVTIER_COORDINATOR IT_DISABLE_SHM=1 IT_INSTANCE=it-layers-frames \
  it_python "$KVT_SOURCE_DIR/tests/integration/it_layers.py" store-load ||
  it_fail "layer-wise store and load over frames failed"
it_no_crash
it_log "layer-wise blocks stored and loaded byte-exact (shm, frames, another process)"
