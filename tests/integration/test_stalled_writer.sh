#!/usr/bin/env bash
# issue 12 §4 / the list at its top: "a writer whose lease lapsed while it was stalled
# can still be copying into a slot that the scheduler has given to someone else".
# A libkvtier writer (tests/integration/stall_writer.c) puts 4 blocks of 0xEE into a
# host tier of 4 slots and is stopped (SIGSTOP) in the middle of its same-host
# memcpy; its put's lease (write_grace 3 s) lapses, and the scheduler gives the slots
# to other puts (the CLI, key-derived bytes). The slot it is stopped in keeps them out
# (CONFLICT naming its pid); the others are written and committed. Then it resumes:
# its copy of the later slots is refused (it lost them), its complete is EXPIRED, and
# every committed block still loads byte-exact — before and after, no reader ever
# receives a wrong byte, and none of its keys is ever served.
. "$(dirname "$0")/lib.sh"

: "${KVT_STALL_WRITER:?KVT_STALL_WRITER must name the kvt_stall_writer executable}"
it_write_deployment <<'JSON'
{"coordinator": {"write_grace": "3s"}, "security": {"clock_skew": "1s"},
 "tiers": [{"name": "host0", "kind": "host", "capacity": 4, "slot_size": "256KiB",
            "high_watermark": 1.0, "low_watermark": 0.99}]}
JSON
it_start
inst=(--instance stall --block-size 256KiB --tokens-per-block 16)
stale_prefix=$(printf '5e%026x' $$)

"$KVT_STALL_WRITER" "$KVTIER_COORDINATOR" stall 262144 4 "$stale_prefix" "$it_dir/stopped" \
  >"$it_dir/stall.out" 2>"$it_dir/stall.err" &
stall_pid=$!
it_wait_until 30 test -f "$it_dir/stopped" || it_fail "the writer never reached its copy: $(cat "$it_dir/stall.err")"
[ "$(awk '{ print $3 }' "/proc/$stall_pid/stat")" = T ] || it_fail "the writer is not stopped"
it_log "writer $stall_pid stopped in the middle of its copy"

# other puts take the slots once the lease has lapsed
keys=() ok=() conflict=0
for i in 0 1 2 3; do keys+=("$(printf 'a2%026x%04x' $$ "$i")"); done
deadline=$((SECONDS + 30))
for k in "${keys[@]}"; do
  while :; do
    rc=0
    it_cli put "${inst[@]}" --key "$k" --pattern >"$it_dir/put.txt" 2>&1 || rc=$?
    if [ $rc -eq 0 ]; then ok+=("$k"); break; fi
    if grep -q "is being written by pid $stall_pid" "$it_dir/put.txt"; then conflict=$((conflict + 1)); break; fi
    [ $SECONDS -lt $deadline ] || it_fail "put $k: $(cat "$it_dir/put.txt")"
    sleep 0.3 # the stopped writer's reservation: until its lease lapses
  done
done
it_log "while it is stopped: ${#ok[@]} puts committed, $conflict kept out of its slot"
[ ${#ok[@]} -ge 1 ] || it_fail "no put got one of the stopped writer's slots"
check() {
  local k rc
  for k in "${ok[@]}"; do
    rc=0
    it_cli get "${inst[@]}" --key "$k" --verify >"$it_dir/get.txt" 2>&1 || rc=$?
    [ $rc -ne 4 ] || it_fail "$1: $k loaded WRONG BYTES: $(cat "$it_dir/get.txt")"
    [ $rc -eq 0 ] || it_fail "$1: $k did not load: $(cat "$it_dir/get.txt")"
  done
  for i in 0 1 2 3; do
    rc=0
    it_cli get "${inst[@]}" --key "$stale_prefix$(printf '%04x' "$i")" --out /dev/null \
      >"$it_dir/get.txt" 2>&1 || rc=$?
    [ $rc -ne 0 ] || it_fail "$1: a key of the stopped writer was served"
  done
}
check "while it is stopped"

kill -CONT "$stall_pid"
it_wait_gone "$stall_pid" 30 || it_fail "the resumed writer did not finish"
wait "$stall_pid" || it_fail "the writer: $(cat "$it_dir/stall.err")"
cat "$it_dir/stall.out" >&2
check "after it resumed"
grep -q "complete EXPIRED" "$it_dir/stall.out" || it_fail "the resumed writer's complete: $(cat "$it_dir/stall.out")"
grep -q "was given to another writer\|lease lapsed before its copy" "$it_dir/stall.err" ||
  it_fail "the resumed writer was not refused the slots it lost: $(cat "$it_dir/stall.err")"
[ $conflict -ge 1 ] || it_fail "no put met the slot the writer is stopped in"

# the slot it held is free again: the put it kept out now goes through
for k in "${keys[@]}"; do
  [[ " ${ok[*]} " == *" $k "* ]] && continue
  it_cli put "${inst[@]}" --key "$k" --pattern >/dev/null || it_fail "put $k after the writer ended"
  ok+=("$k")
done
check "at the end"
it_no_crash
it_log "PASS"
