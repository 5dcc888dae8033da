#!/usr/bin/env bash
# issue 11 §5: kvtier.connector, the vLLM-shaped connector, end to end without vLLM
# (tests/integration/it_connector.py): a scheduler side in this test's python and
# worker sides in two other processes with paged KV caches of torch CPU tensors,
# handing tokens across processes as bytes; a request sharing a prefix loads its
# blocks layer by layer into other pages, byte-exact — over shared memory, then
# with every byte as frames; examples/vllm_connector/demo.py as its README shows it;
# and device buffers (__cuda_array_interface__) through the fake CUDA runtime.
. "$(dirname "$0")/lib.sh"
: "${KVTIER_LIB:?KVTIER_LIB must name libkvtier.so}"

it_write_deployment <<JSON
{"tiers": [{"name": "host0", "kind": "host", "capacity": 64, "slot_size": "256KiB"}]}
JSON
it_start

KVTIER_COORDINATOR=$KVTIER_COORDINATOR it_python "$KVT_SOURCE_DIR/tests/integration/it_connector.py" ||
  it_fail "the connector over shared memory failed"
KVTIER_COORDINATOR=$KVTIER_COORDINATOR IT_DISABLE_SHM=1 IT_INSTANCE=it-connector-frames \
  it_python "$KVT_SOURCE_DIR/tests/integration/it_connector.py" ||
  it_fail "the connector over frames failed"
out=$(KVTIER_COORDINATOR=$KVTIER_COORDINATOR PYTHONPATH="$KVT_SOURCE_DIR/client/python" \
  it_python "$KVT_SOURCE_DIR/examples/vllm_connector/demo.py" "$KVTIER_COORDINATOR") ||
  it_fail "examples/vllm_connector/demo.py failed: $out"
echo "$out"
grep -q "chat-2: 84 prompt tokens, 64 matched in kvtier, 4 blocks loaded, 1 stored" <<<"$out" ||
  it_fail "demo.py did not print what its README says"
: "${KVT_FAKECUDA_SO:?KVT_FAKECUDA_SO must name libkvt_fakecuda.so}"
KVTIER_COORDINATOR=$KVTIER_COORDINATOR it_python "$KVT_SOURCE_DIR/tests/integration/it_device.py" ||
  it_fail "device buffers through the Python binding failed"
it_no_crash
it_log "connector: prefix blocks saved by one worker process loaded byte-exact by another"
