#!/usr/bin/env bash
# Issue 9 §3 ("kvtier remove / kvtier trim drop an instance's blocks (all, or beyond a
# count) — an admin message on the bus, with a clear answer when refused").
#
# A deployment host0 -> nvme0 under deploy/supervise, no quota configured. Two
# instances stored by `kvtier replay`. `kvtier trim A --keep 100 --wait` leaves A
# exactly 100 blocks (the coldest went, over both tiers), B keeps all of its;
# `kvtier remove A --wait` leaves A none, and a replay of A's requests then hits
# nothing while B's still hit everything. Refusals: an unknown instance
# (NOT_FOUND, exit 1), bad usage (exit 2).
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
blocks_of() { # INSTANCE: its locations as kvtier trim --status says
  it_cli trim "$1" --status | sed -n 's/^trim: instance [^:]*: \([0-9]*\) blocks, .*$/\1/p'
}

replay inst-a "$it_dir/a1.txt"
replay inst-b "$it_dir/b1.txt"
a0=$(blocks_of inst-a)
b0=$(blocks_of inst-b)
it_log "stored: inst-a $a0 blocks, inst-b $b0 blocks"
[ "$a0" -gt 100 ] || it_fail "inst-a has only $a0 blocks: the test needs more than 100"

it_cli trim inst-a --keep 100 --wait 60 >"$it_dir/trim.txt" || it_fail "trim failed: $(cat "$it_dir/trim.txt")"
tail -1 "$it_dir/trim.txt" | grep -q '^trim: instance inst-a: 100 blocks, no trim in progress$' ||
  it_fail "trim did not end at 100: $(cat "$it_dir/trim.txt")"
[ "$(blocks_of inst-b)" = "$b0" ] || it_fail "inst-b lost blocks: $(blocks_of inst-b) of $b0"

it_cli remove inst-a --wait 60 >"$it_dir/remove.txt" || it_fail "remove failed: $(cat "$it_dir/remove.txt")"
tail -1 "$it_dir/remove.txt" | grep -q '^trim: instance inst-a: 0 blocks, no trim in progress$' ||
  it_fail "remove left blocks: $(cat "$it_dir/remove.txt")"
replay inst-a "$it_dir/a2.txt"
[ "$(it_replay_field "$it_dir/a2.txt" 2)" = 0.0 ] || it_fail "inst-a still hits after remove: $(cat "$it_dir/a2.txt")"
replay inst-b "$it_dir/b2.txt"
[ "$(it_replay_field "$it_dir/b2.txt" 2)" = 100.0 ] || it_fail "inst-b lost hits: $(cat "$it_dir/b2.txt")"
it_log "trim to 100 and remove of inst-a done; inst-b kept all $b0 blocks and hits 100%"

rc=0
it_cli trim nobody --keep 1 >"$it_dir/bad1.txt" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q 'NOT_FOUND' "$it_dir/bad1.txt" || it_fail "unknown instance: status $rc: $(cat "$it_dir/bad1.txt")"
rc=0
it_cli trim inst-b >"$it_dir/bad2.txt" 2>&1 || rc=$?
[ $rc -eq 2 ] || it_fail "trim without --keep: status $rc: $(cat "$it_dir/bad2.txt")"
rc=0
it_cli remove inst-b --keep 3 >"$it_dir/bad3.txt" 2>&1 || rc=$?
[ $rc -eq 2 ] || it_fail "remove --keep: status $rc: $(cat "$it_dir/bad3.txt")"
[ "$(blocks_of inst-b)" = "$b0" ] || it_fail "a refused call changed inst-b"
it_no_crash
it_log PASS
