#!/usr/bin/env bash
# Issue 9 §4: the remote tier's `transport: ucx` (UCX over tcp here; the same code
# path runs RDMA verbs where devices exist — memory registration and remote keys
# are exercised for real only on RDMA hardware).
#
# A deployment host0 (256 slots) -> remote0 (4,096 slots, kind remote, transport
# ucx) under deploy/supervise.
# 0. First, a remote tier whose UCX has no usable transport (UCX_TLS=bogus), or none
#    that reaches another host (UCX_NET_DEVICES=nosuch0), is refused at start: its
#    process exits with a message naming UCX and the cause.
# 1. remote0's tier process says it serves UCX and names its UCX listener.
# 2. `kvtier replay` stores several times what host0 holds: blocks are demoted
#    host0 -> remote0 (tier actor to tier actor), their bytes put over UCX into
#    remote0's staging region (host0's and remote0's UCX counters); every load
#    byte-exact.
# 3. Again: every block hits, remote0's blocks are promoted back to host0 (by
#    frames: host0 serves no UCX, a copy goes the way its destination serves).
# 4. Again with --no-promote: the client reads remote0's blocks itself, every load
#    byte-exact; remote0's metrics show the client's bytes went through its UCX
#    staging regions (ucx read bytes > 0, regions granted > 0).
. "$(dirname "$0")/lib.sh"

REQUESTS=80
it_write_deployment <<JSON
{"tiers": [
  {"name": "host0", "kind": "host", "capacity": 256, "slot_size": "64KiB"},
  {"name": "remote0", "kind": "remote", "capacity": 4096, "slot_size": "64KiB",
   "prefault": false, "transport": "ucx", "ucx_regions": 8, "ucx_region_mib": 16}],
 "metrics": {"refresh": "200ms"}}
JSON

if ! "$KVTIER_BIN" deployment -c "$it_dir/deployment.json" >"$it_dir/deployment.txt" 2>&1; then
  grep -q 'transport: "ucx" is not in this build' "$it_dir/deployment.txt" &&
    it_skip "UCX is not in this build"
  it_fail "kvtier deployment refused it: $(cat "$it_dir/deployment.txt")"
fi

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
counter() { it_cli status | awk -v n="$1" '$1 == n { print $2; exit }'; }
tier_hits() { sed -n "s/^tier $2: \([0-9]*\) hits$/\1/p" "$1"; }
maddr() { /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print([t for t in d["tiers"] if t["name"]==sys.argv[2]][0]["metrics"])' "$it_dir/deployment.json" "$1"; }
metric() { # NAME [TIER]: the tier's value (remote0's by default), fresh (refresh is 200 ms)
  sleep 0.5
  curl -s "http://$(maddr "${2:-remote0}")/metrics" | awk -v n="$1" '$1 ~ "^"n"({|$)" { print $2; exit }'
}

# an unusable UCX: the tier process exits at start, saying why
"$KVTIER_BIN" keygen --secret "$it_dir/secret" >/dev/null
export UCX_TLS=bogus
rc=0
timeout 30 "$KVTIER_BIN" tier -c "$it_dir/deployment.json" --name remote0 --etcd http://127.0.0.1:9 --secret "$it_dir/secret" >"$it_dir/bogus.txt" 2>&1 || rc=$?
unset UCX_TLS
[ $rc -ne 0 ] || it_fail "a remote tier with UCX_TLS=bogus started: $(cat "$it_dir/bogus.txt")"
grep -q 'tier remote0: UCX: no usable transport (ucp_init: .*UCX_TLS=bogus' "$it_dir/bogus.txt" || it_fail "unclear refusal: $(cat "$it_dir/bogus.txt")"
it_log "UCX_TLS=bogus: $(grep 'tier remote0: UCX' "$it_dir/bogus.txt" | head -1)"
rc=0
UCX_NET_DEVICES=nosuch0 timeout 30 "$KVTIER_BIN" tier -c "$it_dir/deployment.json" --name remote0 \
  --etcd http://127.0.0.1:9 --secret "$it_dir/secret" >"$it_dir/nodev.txt" 2>&1 || rc=$?
[ $rc -ne 0 ] || it_fail "a remote tier with UCX_NET_DEVICES=nosuch0 started: $(cat "$it_dir/nodev.txt")"
grep -q 'tier remote0: UCX: no network transport, only this host.s (.*UCX_NET_DEVICES=nosuch0' "$it_dir/nodev.txt" ||
  it_fail "unclear refusal: $(cat "$it_dir/nodev.txt")"

it_start
log="$it_run/logs/tier-remote0.log"
grep -q 'tier remote0 (id [0-9]*, remote, 4096 x 65536 bytes; host memory of [0-9]* bytes served over UCX' "$log" ||
  it_fail "remote0 does not say it serves UCX: $(cat "$log")"
grep -q 'tier remote0: UCX listener on [0-9.]*:[0-9]* (8 staging regions of 16777216 bytes)' "$log" ||
  it_fail "remote0 names no UCX listener: $(cat "$log")"

replay "$it_dir/pass1.txt"
[ "$(counter demoted)" -gt 0 ] || it_fail "nothing was demoted to remote0"
written=$(metric kvtier_tier_actor_ucx_written_bytes_total)
copied=$(metric kvtier_tier_actor_ucx_copy_bytes_total host0)
[ "${written:-0}" -gt 0 ] || it_fail "demotions did not write remote0 over UCX (ucx written bytes: $written)"
[ "${copied:-0}" -gt 0 ] || it_fail "host0 put no copy bytes over UCX ($copied)"
grep -q "tier host0: copies to tcp://[0-9.:]* go over UCX" "$it_run/logs/tier-host0.log" ||
  it_fail "host0 does not say its copies go over UCX: $(cat "$it_run/logs/tier-host0.log")"
it_log "pass 1: $(counter demoted) demoted to remote0; $copied bytes copied host0 -> remote0 over UCX"

replay "$it_dir/pass2.txt"
[ "$(it_replay_field "$it_dir/pass2.txt" 2)" = 100.0 ] || it_fail "pass 2 missed blocks: $(cat "$it_dir/pass2.txt")"
[ "$(counter prefetch_committed)" -gt 0 ] || it_fail "nothing was promoted out of remote0"

read0=$(metric kvtier_tier_actor_ucx_read_bytes_total)
replay "$it_dir/pass3.txt" --no-promote
[ "$(it_replay_field "$it_dir/pass3.txt" 2)" = 100.0 ] || it_fail "pass 3 missed blocks: $(cat "$it_dir/pass3.txt")"
[ "$(tier_hits "$it_dir/pass3.txt" remote0)" -gt 0 ] || it_fail "pass 3 read nothing from remote0: $(cat "$it_dir/pass3.txt")"
read1=$(metric kvtier_tier_actor_ucx_read_bytes_total)
granted=$(metric kvtier_tier_actor_ucx_regions_granted_total)
[ -n "$read1" ] && [ "$read1" -gt "${read0:-0}" ] ||
  it_fail "the client's reads of remote0 did not go through UCX (ucx read bytes $read0 -> $read1)"
[ "${granted:-0}" -gt 0 ] || it_fail "no UCX staging region was handed out"
it_log "pass 3 (--no-promote): remote0 served $((read1 - ${read0:-0})) bytes over UCX; $granted regions granted"

it_no_crash
it_log PASS
