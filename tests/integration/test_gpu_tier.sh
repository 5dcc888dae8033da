#!/usr/bin/env bash
# issue 11 §1 and §6: the gpu tier in a real deployment, on the fake CUDA runtime
# (tests/support/fakecuda, libkvt_fakecuda.so, loaded by the tier's cuda_library).
# 1. A chain gpu0 -> host0 -> nvme0 under deploy/supervise, gpu0 and host0 small:
#    blocks put through the CLI land on gpu0, are demoted to host0 and nvme0 as more
#    come, every get is byte-exact, and hits below the head are promoted back up. The
#    fake's call log shows the tier copied only through pinned (registered) staging.
# (The no-runtime case: test_gpu_no_runtime.sh.)
. "$(dirname "$0")/lib.sh"

: "${KVT_FAKECUDA_SO:?KVT_FAKECUDA_SO must name the fake CUDA runtime}"

SLOT=65536
NBLOCKS=48
REPLAY_REQUESTS=12
export KVT_FAKECUDA_LOG=$it_dir/fakecuda.log

it_write_deployment <<JSON
{"tiers": [
  {"name": "gpu0", "kind": "gpu", "capacity": 256, "slot_size": "64KiB",
   "high_watermark": "60%", "low_watermark": "40%",
   "cuda_library": "$KVT_FAKECUDA_SO", "staging_bytes": "65536"},
  {"name": "host0", "kind": "host", "capacity": 256, "slot_size": "64KiB"},
  {"name": "nvme0", "kind": "nvme", "capacity": 4096, "slot_size": "64KiB"}]}
JSON
it_start

counter() { it_cli status | awk -v n="$1" '$1 == n { print $2; exit }'; }

it_cli status >"$it_dir/status.txt" || it_fail "status"
grep -q 'tier 1 gpu0: kind gpu, up' "$it_dir/status.txt" ||
  it_fail "status does not show the gpu tier up: $(cat "$it_dir/status.txt")"

# Promotion: `kvtier replay` copies hits below the head up before loading them (the
# CLI's get loads in place). Pass 1 stores the trace's blocks (most end below gpu0),
# pass 2 finds them all and promotes; every load is checked against key-derived bytes.
replay() {
  local out=$1 rc=0
  it_cli replay "$it_trace" --requests $REPLAY_REQUESTS --no-progress >"$out" || rc=$?
  [ $rc -eq 0 ] || it_fail "replay exited with status $rc: $(cat "$out")"
  grep -q "^requests  *$REPLAY_REQUESTS replayed, 0 failed$" "$out" || it_fail "failed requests: $(cat "$out")"
  grep -q '^failures  *0 hits not granted, 0 loads failed, 0 stores failed, 0 verify failures$' "$out" ||
    it_fail "failed or wrong blocks: $(cat "$out")"
  [ "$(it_replay_field "$out" 5)" = 0 ] || it_fail "wrong bytes: $(cat "$out")"
}
# ---- 1. put, demotion down the chain, byte-exact gets, promotion -----------------
replay "$it_dir/pass1.txt"
it_log "replay pass 1: $(grep -E '^(blocks|tier )' "$it_dir/pass1.txt" | tr '\n' ' ')"
keys=()
for i in $(seq 1 $NBLOCKS); do keys+=("$(printf 'a1%06d%024x' $$ "$i")"); done
# put_retry KEY: a full head tier answers NO_SPACE / BUSY until the reclaimer has
# demoted room (asynchronously); the client retries, as an engine would.
put_retry() {
  local tries=0
  until it_cli put --key "$1" --file "$it_dir/$1.in" --block-size $SLOT >"$it_dir/put.txt" 2>&1; do
    grep -qE 'NO_SPACE|BUSY' "$it_dir/put.txt" || it_fail "put $1: $(cat "$it_dir/put.txt")"
    tries=$((tries + 1))
    [ $tries -lt 300 ] || it_fail "put $1: no room after $tries tries: $(cat "$it_dir/put.txt")"
    sleep 0.1
  done
}
for k in "${keys[@]}"; do
  head -c $SLOT /dev/urandom >"$it_dir/$k.in"
  put_retry "$k"
done
demoted=$(counter demoted)
[ "${demoted:-0}" -gt 0 ] || it_fail "nothing was demoted from gpu0: $(it_cli status)"
[ "$(counter evictions)" = 0 ] || it_fail "blocks were evicted (dropped): $(counter evictions)"
it_cli status >"$it_dir/status.txt" || it_fail "status"
for t in gpu0 host0 nvme0; do
  grep -qE "^tier [0-9]+ $t: .* fill [1-9][0-9]*/" "$it_dir/status.txt" ||
    it_fail "no block on $t after the puts: $(grep '^tier ' "$it_dir/status.txt")"
done
for k in "${keys[@]}"; do
  it_cli get --key "$k" --out "$it_dir/$k.out" --block-size $SLOT >/dev/null || it_fail "get $k"
  cmp -s "$it_dir/$k.in" "$it_dir/$k.out" || it_fail "get $k: bytes differ from the put"
done
hits=$(it_cli lookup --mode per-key "${keys[@]}" | grep -c ' hit ' || true)
[ "$hits" -eq $NBLOCKS ] || it_fail "expected $NBLOCKS blocks still stored, got $hits"

replay "$it_dir/pass2.txt"
promoted=$(sed -n 's/^promotion  *\([0-9]*\) hits copied up.*$/\1/p' "$it_dir/pass2.txt")
[ "${promoted:-0}" -gt 0 ] || it_fail "pass 2 promoted nothing to gpu0: $(cat "$it_dir/pass2.txt")"
it_log "replay pass 2: $(grep -E '^(hit rate|promotion|tier )' "$it_dir/pass2.txt" | tr '\n' ' ')"
it_no_crash

grep -q ' host_register size=65536 flags=1 rc=0$' "$KVT_FAKECUDA_LOG" ||
  it_fail "the gpu tier did not pin its staging: $(head -20 "$KVT_FAKECUDA_LOG")"
grep -q 'memcpy_async stream=[0-9]* kind=H2D' "$KVT_FAKECUDA_LOG" || it_fail "no H2D copy logged"
grep -q 'memcpy_async stream=[0-9]* kind=D2H' "$KVT_FAKECUDA_LOG" || it_fail "no D2H copy logged"
if grep -q ' unpinned' "$KVT_FAKECUDA_LOG"; then
  it_fail "a copy touched unpinned host memory: $(grep -m3 ' unpinned' "$KVT_FAKECUDA_LOG")"
fi
it_log "ok: $NBLOCKS blocks byte-exact through gpu0 -> host0 -> nvme0 ($demoted demoted, $promoted promoted)"
