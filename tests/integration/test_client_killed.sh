#!/usr/bin/env bash
# issue 4 §6: "A client killed between prepare_put and complete_put: GC frees its slots
# after the grace." (DESIGN §6 "Pins and reservations are leases".)
#
# A deployment with one host tier and a short coordinator.write_grace runs under
# deploy/supervise; the clients are Python processes (it_client.py, the binding).
# 1. Other blocks are stored and read back byte-exact.
# 2. A client reserves NA keys and writes their bytes (other bytes than the pattern)
#    in one request, reserves NB keys and writes nothing in another, then gets SIGKILL
#    before any complete_put. While held the slots count as reserved and used, and
#    no held key is served (lookup misses, prepare_get NOT_FOUND).
# 3. After the grace the scheduler closes both windows: reservations_lapsed counts
#    them, nothing is reserved, the slots are free again (the coordinator logs it).
# 4. Another client stores the same keys: none is skipped as cached, all are written
#    and load byte-exact (never the dead writer's bytes). The blocks of step 1 are
#    still there, byte-exact.
. "$(dirname "$0")/lib.sh"

CAPACITY=128 # host slots of 64 KiB: everything below stays under the watermarks
N_OTHER=24   # blocks stored before the client dies
NA=12        # held keys whose bytes the dead client wrote
NB=10        # held keys with nothing written
GRACE=2s     # coordinator.write_grace
: "${KVTIER_LIB:?KVTIER_LIB must name libkvtier.so}"

it_write_deployment <<JSON
{"coordinator": {"write_grace": "$GRACE"}, "security": {"clock_skew": "500ms"},
 "tiers": [{"name": "host0", "kind": "host", "capacity": $CAPACITY, "slot_size": "64KiB"}]}
JSON

# it_client ARGS...: one client process (the Python binding) against this deployment.
it_client() {
  KVTIER_COORDINATOR=$KVTIER_COORDINATOR it_python "$KVT_SOURCE_DIR/tests/integration/it_client.py" "$@"
}
# counter NAME: one scheduler counter, now.
counter() { it_client stats | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
# field FILE PATH: a value of the hold client's ready file ("stats/reserved").
field() {
  /usr/bin/python3 -c '
import json, sys
v = json.load(open(sys.argv[1]))
for p in sys.argv[2].split("/"):
    v = v[p]
print(v)' "$1" "$2"
}

it_start

# ---- 1. other blocks --------------------------------------------------------------
it_client store other 0 $N_OTHER >/dev/null || it_fail "storing the other blocks"
used0=$(counter used.host0)
[ "$used0" -eq $N_OTHER ] || it_fail "$N_OTHER blocks stored, host0 uses $used0 slots"
[ "$(counter reserved)" -eq 0 ] || it_fail "slots reserved before the client starts"

# ---- 2. the client reserves, writes some, and is killed ------------------------------
ready=$it_dir/hold.json
# (not through a shell function: $! must be the python process itself)
# shellcheck disable=SC2046  # word splitting wanted: NAME=VALUE words
env $(it_python_env) KVTIER_COORDINATOR="$KVTIER_COORDINATOR" /usr/bin/python3 \
  "$KVT_SOURCE_DIR/tests/integration/it_client.py" hold held $NA $NB "$ready" >"$it_dir/hold.log" 2>&1 &
hold_pid=$!
trap 'rc=$?; set +e; kill -KILL "$hold_pid" 2>/dev/null; (exit $rc); it_cleanup' EXIT
hold_ready() {
  kill -0 $hold_pid 2>/dev/null || it_fail "the holding client exited: $(cat "$it_dir/hold.log")"
  [ -f "$ready" ]
}
it_wait_until 60 hold_ready || it_fail "the holding client did not reserve its keys"
[ "$(field "$ready" count_a)" -eq $NA ] || it_fail "the first put token has $(field "$ready" count_a) keys, not $NA"
[ "$(field "$ready" count_b)" -eq $NB ] || it_fail "the second put token has $(field "$ready" count_b) keys, not $NB"
[ "$(field "$ready" pid)" -eq $hold_pid ] || it_fail "the ready file comes from another process"
[ "$(field "$ready" hits)" -eq 0 ] || it_fail "keys being written hit in a lookup"
# The client's own stats right after its prepares: while the windows are open (none
# lapsed yet) the held slots are reserved and used.
if [ "$(field "$ready" stats/reservations_lapsed)" -eq 0 ]; then
  [ "$(field "$ready" stats/reserved)" -eq $((NA + NB)) ] ||
    it_fail "while held: $(field "$ready" stats/reserved) slots reserved, expected $((NA + NB))"
  [ "$(field "$ready" stats/used.host0)" -eq $((N_OTHER + NA + NB)) ] ||
    it_fail "while held: host0 uses $(field "$ready" stats/used.host0) slots, expected $((N_OTHER + NA + NB))"
  it_log "while held: $((NA + NB)) slots reserved, $((N_OTHER + NA + NB)) used"
else
  it_log "the grace lapsed before the client read the stats: held state not observed"
fi
it_log "killing the client (pid $hold_pid) with SIGKILL before complete_put"
kill -KILL $hold_pid
it_wait_gone $hold_pid 30 || it_fail "the client did not die"
wait $hold_pid 2>/dev/null || true
trap it_cleanup EXIT

# No held key is served, whether its window is still open or already lapsed.
it_client miss held 0 $((NA + NB)) >/dev/null || it_fail "a held key was served"

# ---- 3. after the grace the reservations are released --------------------------------
released() {
  local lapsed reserved
  lapsed=$(counter reservations_lapsed)
  reserved=$(counter reserved)
  [ "$lapsed" -eq $((NA + NB)) ] && [ "$reserved" -eq 0 ]
}
it_wait_until 60 released ||
  it_fail "the dead client's reservations were not released: $(it_client stats)"
used=$(counter used.host0)
[ "$used" -eq $N_OTHER ] || it_fail "after the grace host0 uses $used slots, expected $N_OTHER"
grep -q "put window (token [0-9]*) lapsed after [0-9]* ms: $NA reservations released" \
  "$it_run/logs/coordinator.log" || it_fail "the coordinator did not log the lapse of the written window"
grep -q "put window (token [0-9]*) lapsed after [0-9]* ms: $NB reservations released" \
  "$it_run/logs/coordinator.log" || it_fail "the coordinator did not log the lapse of the reserved window"
it_log "after the grace: reservations_lapsed $((NA + NB)), 0 reserved, host0 uses $used slots"
it_client miss held 0 $((NA + NB)) >/dev/null || it_fail "a released key was served"
"$KVTIER_BIN" status --coordinator "$KVTIER_COORDINATOR" >"$it_dir/status.txt" ||
  it_fail "kvtier status failed"
grep -Eq "^ +reservations_lapsed +$((NA + NB))$" "$it_dir/status.txt" ||
  it_fail "kvtier status does not show the lapsed reservations: $(cat "$it_dir/status.txt")"

# ---- 4. the same keys again, from another client; the other blocks are intact -----------
it_client store held 0 $((NA + NB)) >"$it_dir/store_again.txt" || it_fail "storing the released keys again"
grep -q "^stored $((NA + NB)) keys held/0.., $((NA + NB)) written, byte-exact$" "$it_dir/store_again.txt" ||
  it_fail "the released keys were not all written again: $(cat "$it_dir/store_again.txt")"
it_client verify held 0 $((NA + NB)) >/dev/null || it_fail "the keys stored again are not served byte-exact"
it_client verify other 0 $N_OTHER >/dev/null || it_fail "the other blocks were damaged"
used=$(counter used.host0)
[ "$used" -eq $((N_OTHER + NA + NB)) ] || it_fail "host0 uses $used slots, expected $((N_OTHER + NA + NB))"
[ "$(counter reserved)" -eq 0 ] || it_fail "slots still reserved at the end"
# Not asserted: the dead client's two requests stay open (nothing ends a request but
# request_end), so open_requests still counts them.
it_log "counts: other $N_OTHER, held $NA written + $NB reserved, reservations_lapsed $(counter reservations_lapsed), puts_committed $(counter puts_committed), open_requests $(counter open_requests)"
it_no_crash
it_log "PASS"
