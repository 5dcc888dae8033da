#!/usr/bin/env bash
# Issue 9 §3 ("kvtier drain TIER moves a member's blocks ... down the chain and then
# retires it — an admin message on the bus, with a clear answer when refused").
#
# A deployment host0 -> nvme0 under deploy/supervise. One instance stored by
# `kvtier replay` (its blocks on host0, the overflow on nvme0). `kvtier drain host0
# --wait` ends with host0 retired and empty; `kvtier status` says so; a replay of
# the same requests then hits every block, each load verified byte-exact (from
# nvme0), and a new instance's stores land on nvme0 (host0 stays empty).
# Refusals: an unknown tier (NOT_FOUND), the last tier of the chain
# (INVALID_ARGUMENT), a second drain (CONFLICT), each exit 1. --cancel brings host0
# back: new stores land on it again.
. "$(dirname "$0")/lib.sh"

it_write_deployment <<JSON
{"tiers": [
  {"name": "host0", "kind": "host", "capacity": 256, "slot_size": "64KiB"},
  {"name": "nvme0", "kind": "nvme", "capacity": 2048, "slot_size": "64KiB"}],
 "reclaimer": {"delete_delay": "10ms"}}
JSON
it_start

replay() { # INSTANCE OUT: the first 20 trace requests as INSTANCE, every load verified
  local rc=0
  it_cli replay "$it_trace" --requests 20 --no-progress --instance "$1" >"$2" || rc=$?
  [ $rc -eq 0 ] || it_fail "replay as $1 exited with status $rc: $(cat "$2")"
  grep -q '^failures  *0 hits not granted, 0 loads failed, 0 stores failed, 0 verify failures$' "$2" ||
    it_fail "failed or wrong blocks: $(cat "$2")"
}
used_of() { # TIER: its used slots as kvtier status prints them
  it_cli status | sed -n "s/^tier [0-9]* $1: .* fill \([0-9]*\)\/[0-9]* slots.*$/\1/p"
}
refused() { # WANT OUT ARGS...: kvtier drain ARGS exits 1 with WANT in its output
  local want=$1 out=$2 rc=0
  shift 2
  it_cli drain "$@" >"$out" 2>&1 || rc=$?
  [ $rc -eq 1 ] && grep -q "$want" "$out" || it_fail "drain $*: status $rc, expected $want: $(cat "$out")"
}

replay inst-a "$it_dir/a1.txt"
h0=$(used_of host0)
n0=$(used_of nvme0)
it_log "stored: host0 $h0 slots, nvme0 $n0 slots"
[ "$h0" -gt 0 ] || it_fail "nothing on host0 to drain"

refused NOT_FOUND "$it_dir/bad1.txt" host9
refused INVALID_ARGUMENT "$it_dir/bad2.txt" nvme0
grep -q 'last tier of chain' "$it_dir/bad2.txt" || it_fail "no reason given: $(cat "$it_dir/bad2.txt")"

it_cli drain host0 --wait 60 >"$it_dir/drain.txt" || it_fail "drain failed: $(cat "$it_dir/drain.txt")"
tail -1 "$it_dir/drain.txt" | grep -q '^drain: tier host0: retired (' ||
  it_fail "host0 not retired: $(cat "$it_dir/drain.txt")"
refused CONFLICT "$it_dir/bad3.txt" host0
it_cli status >"$it_dir/status.txt" || it_fail "status failed: $(cat "$it_dir/status.txt")"
grep -q '^tier [0-9]* host0: .* fill 0/256 slots.*, retired (kvtier drain' "$it_dir/status.txt" ||
  it_fail "status does not show host0 retired and empty: $(cat "$it_dir/status.txt")"
# the Python binding sees the same: Client.drain and cluster_info
KVTIER_COORDINATOR=$KVTIER_COORDINATOR it_python -c '
import os, sys
sys.path.insert(0, os.path.join(os.environ["KVT_SOURCE_DIR"], "client", "python"))
import kvtier
c = kvtier.Client(coordinators=os.environ["KVTIER_COORDINATOR"], name="it-drain")
d = c.drain("host0", status_only=True)
assert d["state"] == "retired" and d["blocks_left"] == 0 and d["blocks_moved"] > 0, d
tiers = {t["name"]: t["drain"] for t in c.cluster_info()["tiers"]}
assert tiers == {"host0": "retired", "nvme0": "serving"}, tiers
try:
    c.drain("nvme0")
    raise SystemExit("draining the last tier was not refused")
except kvtier.InvalidArgumentError as e:
    assert "last tier of chain" in str(e), e
' >"$it_dir/python.txt" 2>&1 || it_fail "Python binding: $(cat "$it_dir/python.txt")"
[ "$(used_of nvme0)" -ge $((h0 + n0)) ] || it_fail "nvme0 holds $(used_of nvme0) slots, fewer than the $((h0 + n0)) stored"

# nothing lost: every block hits and loads byte-exact
replay inst-a "$it_dir/a2.txt"
[ "$(it_replay_field "$it_dir/a2.txt" 2)" = 100.0 ] || it_fail "blocks lost by the drain: $(cat "$it_dir/a2.txt")"
# new stores go to nvme0
before=$(used_of nvme0)
replay inst-b "$it_dir/b1.txt"
[ "$(used_of host0)" = 0 ] || it_fail "a store landed on the retired host0: $(used_of host0) slots"
[ "$(used_of nvme0)" -gt "$before" ] || it_fail "inst-b stored nothing on nvme0"
it_log "host0 drained ($h0 slots moved) and retired; every block hit from nvme0; new stores on nvme0"

it_cli drain host0 --cancel >"$it_dir/cancel.txt" || it_fail "cancel failed: $(cat "$it_dir/cancel.txt")"
grep -q '^drain: tier host0: serving' "$it_dir/cancel.txt" || it_fail "cancel: $(cat "$it_dir/cancel.txt")"
replay inst-c "$it_dir/c1.txt"
[ "$(used_of host0)" -gt 0 ] || it_fail "host0 takes nothing after the cancel"
it_no_crash
it_log PASS
