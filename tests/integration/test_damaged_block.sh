#!/usr/bin/env bash
# issue 12 §4 / the list at its top: "after a tier drops a corrupted block, lookups keep
# reporting it as a hit until a gc round reaches it, and the load fails with
# `transfer failed: INTERNAL (1 of 1 keys failed)`". Now the tier actor tells the
# scheduler at once (a TierNotice): with the gc's round an hour away, a lookup right
# after the failed load is a miss, the load's error names the checksum, the event
# stream reports the block removed as DAMAGED, the other blocks still load.
. "$(dirname "$0")/lib.sh"

it_write_deployment <<'JSON'
{"tiers": [{"name": "nvme0", "kind": "nvme", "capacity": 64, "slot_size": "64KiB"}],
 "gc": {"interval": "1h"}}
JSON
it_start
nvme_file=$it_dir/nvme0.dat
nvme() { /usr/bin/python3 "$KVT_SOURCE_DIR/tests/integration/nvme_file.py" "$1" "$nvme_file" "${@:2}"; }

keys=()
for i in 1 2 3; do
  keys+=("$(printf 'dd%02x%028x' "$i" $$)")
  it_cli put --key "${keys[-1]}" --pattern >/dev/null || it_fail "put ${keys[-1]}"
done
"$KVTIER_BIN" events --coordinator "$KVTIER_COORDINATOR" >"$it_dir/events.txt" 2>&1 &
ev_pid=$!
sleep 1 # the subscription is up before the damage

read -r slot off len _ < <(nvme slot "${keys[0]}") || it_fail "no slot holds ${keys[0]}"
nvme garble "$off" "$len"
rc=0
it_cli get --key "${keys[0]}" --verify >"$it_dir/get.txt" 2>&1 || rc=$?
[ $rc -ne 4 ] || it_fail "the damaged block was served with wrong bytes"
[ $rc -ne 0 ] || it_fail "the damaged block was served"
grep -q "slot $slot failed its checksum" "$it_dir/get.txt" ||
  it_fail "the load's error does not name the cause: $(cat "$it_dir/get.txt")"

# at once: no gc round (1 h) in between; a few polls only for the notice's own trip
it_wait_until 10 sh -c "'$KVTIER_BIN' lookup --coordinator '$KVTIER_COORDINATOR' --mode per-key ${keys[0]} | grep -q ' miss'" ||
  it_fail "lookups still report the dropped block: $(it_cli lookup --mode per-key "${keys[0]}")"
dropped=$(it_cli status | awk '$1 == "damaged_dropped" { print $2; exit }')
[ "$dropped" = 1 ] || it_fail "damaged_dropped is '$dropped', want 1"
gc=$(it_cli status | awk '$1 == "gc_dropped" { print $2; exit }')
[ "${gc:-0}" = 0 ] || it_fail "the gc dropped it ($gc), not the notice"
it_wait_until 10 grep -q '"kind":"removed","tier":1,"reason":7' "$it_dir/events.txt" ||
  it_fail "no BlockRemoved DAMAGED on the event stream: $(tail -n 5 "$it_dir/events.txt")"
kill "$ev_pid" 2>/dev/null || true
for k in "${keys[@]:1}"; do
  it_cli get --key "$k" --verify >/dev/null || it_fail "get $k after the drop"
done
# the slot is free again: a new put of the key stores and loads
it_cli put --key "${keys[0]}" --pattern >/dev/null || it_fail "put of the dropped key again"
it_cli get --key "${keys[0]}" --verify >/dev/null || it_fail "get of the key stored again"
it_no_crash
it_log "PASS"
