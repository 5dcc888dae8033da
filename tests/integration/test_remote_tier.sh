#!/usr/bin/env bash
# Issue 9 §4: a `remote` tier — host memory served to clients and other tier actors
# over the network, never advertised for shared memory.
#
# A deployment host0 (256 slots) -> remote0 (4,096 slots, kind "remote") under
# deploy/supervise. `kvtier deployment` lists remote0 without a segment and no
# segment of it appears in /dev/shm; its tier process says it serves frames only.
# 1. `kvtier replay` of 80 trace requests (about 2,000 distinct blocks) stores
#    several times what host0 holds: blocks are demoted host0 -> remote0 (tier
#    actor to tier actor over the bus), nothing is evicted, every load byte-exact.
# 2. Again: every block hits, the remote ones are promoted back to host0 (copies
#    out of the remote tier), every load byte-exact.
# 3. Again with --no-promote: the client reads remote0's blocks itself, over frames
#    (there is no segment to map), every load byte-exact.
# 4. transport "ucx" is accepted by `kvtier deployment` (test_remote_ucx.sh runs it).
. "$(dirname "$0")/lib.sh"

REQUESTS=80
it_write_deployment <<JSON
{"tiers": [
  {"name": "host0", "kind": "host", "capacity": 256, "slot_size": "64KiB"},
  {"name": "remote0", "kind": "remote", "capacity": 4096, "slot_size": "64KiB",
   "prefault": false}]}
JSON

"$KVTIER_BIN" deployment -c "$it_dir/deployment.json" >"$it_dir/deployment.txt" ||
  it_fail "kvtier deployment refused it: $(cat "$it_dir/deployment.txt")"
awk '$1 == "tier" && $2 == "remote0"' "$it_dir/deployment.txt" | grep -q remote ||
  it_fail "kvtier deployment does not list remote0 as remote: $(cat "$it_dir/deployment.txt")"
[ ${#it_shms[@]} -eq 1 ] || it_fail "segments expected for host0 only: ${it_shms[*]}"

counter() { it_cli status | awk -v n="$1" '$1 == n { print $2; exit }'; }
tier_hits() { sed -n "s/^tier $2: \([0-9]*\) hits$/\1/p" "$1"; }
replay() {
  local out=$1 rc=0
  shift
  it_cli replay "$it_trace" --requests $REQUESTS --no-progress "$@" >"$out" || rc=$?
  [ $rc -eq 0 ] || it_fail "replay exited with status $rc: $(cat "$out")"
  grep -q "^requests  *$REQUESTS replayed, 0 failed$" "$out" || it_fail "failed requests: $(cat "$out")"
  grep -q '^failures  *0 hits not granted, 0 loads failed, 0 stores failed, 0 verify failures$' "$out" ||
    it_fail "failed or wrong blocks: $(cat "$out")"
  [ "$(it_replay_field "$out" 5)" = 0 ] || it_fail "wrong bytes: $(cat "$out")"
}

it_start
grep -q 'tier remote0 (id [0-9]*, remote, 4096 x 65536 bytes; host memory of [0-9]* bytes served over ZeroMQ frames only)' \
  "$it_run/logs/tier-remote0.log" || it_fail "remote0 does not say what it serves: $(cat "$it_run/logs/tier-remote0.log")"
ls /dev/shm | grep -q -- "$it_name-remote0" && it_fail "a segment for remote0 exists: $(ls /dev/shm | grep "$it_name")"

replay "$it_dir/pass1.txt"
[ "$(counter evictions)" = 0 ] || it_fail "blocks were evicted: $(counter evictions)"
[ "$(counter demoted)" -gt 0 ] || it_fail "nothing was demoted to remote0"
it_log "pass 1: $(counter blocks) blocks indexed, $(counter demoted) demoted to remote0"

replay "$it_dir/pass2.txt"
[ "$(it_replay_field "$it_dir/pass2.txt" 2)" = 100.0 ] || it_fail "pass 2 missed blocks: $(cat "$it_dir/pass2.txt")"
[ "$(tier_hits "$it_dir/pass2.txt" remote0)" -gt 0 ] || it_fail "pass 2: no hit on remote0: $(cat "$it_dir/pass2.txt")"
[ "$(counter prefetch_committed)" -gt 0 ] || it_fail "nothing was promoted out of remote0"
it_log "pass 2: all hit; $(grep '^tier ' "$it_dir/pass2.txt" | tr '\n' ' ')"

replay "$it_dir/pass3.txt" --no-promote
[ "$(it_replay_field "$it_dir/pass3.txt" 2)" = 100.0 ] || it_fail "pass 3 missed blocks: $(cat "$it_dir/pass3.txt")"
[ "$(tier_hits "$it_dir/pass3.txt" remote0)" -gt 0 ] || it_fail "pass 3 read nothing from remote0: $(cat "$it_dir/pass3.txt")"
it_log "pass 3 (--no-promote): all hit; $(grep '^tier ' "$it_dir/pass3.txt" | tr '\n' ' ')"

/usr/bin/python3 - "$it_dir/deployment.json" "$it_dir/ucx.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for t in d["tiers"]:
    if t["kind"] == "remote":
        t["transport"] = "ucx"
json.dump(d, open(sys.argv[2], "w"))
PY
# (a build without UCX refuses it, saying so)
if ! "$KVTIER_BIN" deployment -c "$it_dir/ucx.json" >"$it_dir/ucx.txt" 2>&1; then
  grep -q 'transport: "ucx" is not in this build' "$it_dir/ucx.txt" ||
    it_fail "transport ucx was refused: $(cat "$it_dir/ucx.txt")"
fi
it_no_crash
it_log PASS
