#!/usr/bin/env bash
# issue 11 §3: tokens across processes (docs/PROTOCOL.md "Token export") through the
# Python binding against the deployment under deploy/supervise: a control process
# prepares puts and gets, worker processes (their own clients) import the tokens,
# move the bytes (shared memory and frames, whole blocks and layer by layer) and send
# the results back as bytes; the control side completes, and every byte read in a
# worker is the one another worker stored. Altered bytes, a result for another token
# and a complete where the token was imported are refused (InvalidArgumentError).
. "$(dirname "$0")/lib.sh"
: "${KVTIER_LIB:?KVTIER_LIB must name libkvtier.so}"

it_write_deployment <<JSON
{"tiers": [{"name": "host0", "kind": "host", "capacity": 64, "slot_size": "16KiB"}]}
JSON
it_start

KVTIER_COORDINATOR=$KVTIER_COORDINATOR it_python "$KVT_SOURCE_DIR/tests/integration/it_tokens.py" ||
  it_fail "tokens across processes through the Python binding failed"
it_no_crash
it_log "tokens handed to worker processes and their results back, byte-exact (shm, frames, layer-wise)"
