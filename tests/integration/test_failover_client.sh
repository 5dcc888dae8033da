#!/usr/bin/env bash
# Issue 9 §1: failover that clients do not notice. A deployment under deploy/supervise
# (coordinator A, one host tier) and a second coordinator B started by hand as a
# standby; clients are given both. While `kvtier replay` of the synthetic trace runs,
# the leading coordinator is SIGKILLed (the supervisor restarts it; one of the two
# takes over). The replay must finish by itself with 0 verify failures and at most
# one failed request per request in flight (a window opened at the old leader), with
# nobody registering anything by hand: libkvtier logs that it told the new leader
# its instance and requests. A block put before the kill is still served after it.
# Beside it, a client holding a get and a put window at the old leader sees one
# ABORTED per window and then reads its keys byte-exact in the same request.
# etcd holds the instance registry (/kvtier/<cluster>/instances/<id>, JSON), and the
# new leader registers those instances before serving.
. "$(dirname "$0")/lib.sh"

IN_FLIGHT=4
REQUESTS=800 # 16156 distinct blocks: nothing is evicted at this capacity
CAPACITY=20480
INST=(--instance fo-replay --block-size 4KiB --tokens-per-block 16)

it_deployment "$CAPACITY" 4KiB
it_start

b_port=$(it_free_port)
B="tcp://127.0.0.1:$b_port"
"$KVTIER_BIN" coordinator -c "$it_dir/deployment.json" --etcd "$KVTIER_ETCD" --secret "$it_run/secret" \
  --name "standby-$it_name" --endpoint "$B" >"$it_dir/coord-b.log" 2>&1 &
echo $! >"$it_run/pids/coord-b.pid" # it_cleanup kills it with the rest
COORDS="$KVTIER_COORDINATOR,$B"

epoch_of() { it_cli status 2>/dev/null | awk '$1 == "leader" { gsub(/[()]/, "", $4); print $4 }'; }
e1=$(epoch_of)
[ -n "$e1" ] || it_fail "no leader epoch in kvtier status"
it_log "leader epoch $e1 (A, $KVTIER_COORDINATOR); standby B on $B"

etcd_get() { ETCDCTL_API=3 etcdctl --endpoints "$KVTIER_ETCD" get "$1" --print-value-only; }

# a block stored before the kill
k1=$(printf 'f1%030x' $$)
it_cli put "${INST[@]}" --key "$k1" --pattern >/dev/null || it_fail "put $k1"

# a client holding windows at the leader that will be killed
IT_COORDINATORS=$COORDS IT_INSTANCE="fo-held" IT_BLOCK=4096 it_python "$KVT_SOURCE_DIR/tests/integration/it_client.py" \
  failover held 4 "$it_dir/held.ready" "$it_dir/held.go" >"$it_dir/held.out" 2>"$it_dir/held.err" &
held_pid=$!
it_wait_until 60 test -f "$it_dir/held.ready" || it_fail "the holding client is not ready: $(cat "$it_dir/held.err")"

# the replay, through both coordinators
"$KVTIER_BIN" replay "$it_trace" --coordinator "$COORDS" --requests "$REQUESTS" --in-flight "$IN_FLIGHT" \
  "${INST[@]}" --no-progress >"$it_dir/replay.txt" 2>"$it_dir/replay.err" &
replay_pid=$!

# registration reaches etcd (written at registration, readable with etcdctl)
rec="/kvtier/$it_name/instances/fo-replay"
registered() { etcd_get "$rec" | grep -q '"instance_id":"fo-replay"'; }
it_wait_until 30 registered || it_fail "no instance record in etcd: $rec = $(etcd_get "$rec")"
etcd_get "$rec" | grep -q '"bytes_per_block":4096,.*"tokens_per_block":16' || it_fail "$rec = $(etcd_get "$rec")"
etcd_get "/kvtier/$it_name/instances/fo-held" | grep -q '"bytes_per_block":4096' ||
  it_fail "instance record of fo-held: $(etcd_get "/kvtier/$it_name/instances/fo-held")"
it_log "etcd: $rec = $(etcd_get "$rec")"
# the replay is storing blocks
storing() { it_cli status 2>/dev/null | grep -Eq "^tier 1 host0: .* fill ([3-9][0-9]|[1-9][0-9]{2,})/$CAPACITY slots"; }
it_wait_until 60 storing || it_fail "the replay stores nothing: $(cat "$it_dir/replay.err")"
kill -0 "$replay_pid" 2>/dev/null || it_fail "the replay ended before the kill: $(tail -n 3 "$it_dir/replay.txt")"

a_pid=$(cat "$it_run/pids/coordinator.pid")
it_log "killing the leader (coordinator A, pid $a_pid) under replay load"
kill -KILL "$a_pid"
touch "$it_dir/held.go"
new_epoch() {
  local e
  e=$(epoch_of)
  [ -n "$e" ] && [ "$e" -gt "$e1" ]
}
it_wait_until 60 new_epoch || it_fail "no new leader after the kill"
e2=$(epoch_of)
it_log "new leader, epoch $e2"

wait "$held_pid" || it_fail "the holding client: $(cat "$it_dir/held.err")"
cat "$it_dir/held.out"
[ "$(grep -c '^complete_[a-z]*: .*ABORTED' "$it_dir/held.out")" = 2 ] ||
  it_fail "not one ABORTED per window: $(cat "$it_dir/held.out")"

rc=0
wait "$replay_pid" || rc=$?
cat "$it_dir/replay.txt"
[ $rc -eq 0 ] || it_fail "replay exited with status $rc: $(tail -n 5 "$it_dir/replay.err")"
last=$(tail -n 1 "$it_dir/replay.txt")
[[ $last =~ ^replay:\ $REQUESTS\ requests, ]] || it_fail "last line: $last"
[ "$(it_replay_field "$it_dir/replay.txt" 5)" = 0 ] || it_fail "verify failures: $last"
failed=$(sed -n 's/^requests  *[0-9]* replayed, \([0-9]*\) failed.*/\1/p' "$it_dir/replay.txt")
[ -n "$failed" ] || it_fail "no requests line in the report"
[ "$failed" -le "$IN_FLIGHT" ] || it_fail "$failed requests failed, more than the $IN_FLIGHT in flight at the kill"
grep -q 'kvtier-replay-[0-9]*: leader .*: 1 instances registered and [0-9]* requests begun again' "$it_dir/replay.err" ||
  it_fail "libkvtier did not tell a new leader (no failover during the replay?): $(tail -n 5 "$it_dir/replay.err")"
it_log "replay: $failed requests failed; $(grep -c 'begun again' "$it_dir/replay.err") recoveries logged"

# the block stored before the kill is still served
it_cli get "${INST[@]}" --key "$k1" --verify >/dev/null || it_fail "get $k1 after the failover"
# the new leader registered the registry's instances before serving
grep -hq 'instances of the etcd registry registered before serving' "$it_dir/coord-b.log" "$it_run"/logs/*.log ||
  it_fail "no leader registered the etcd registry's instances"
# (it_no_crash would see the kill itself) no sanitizer report anywhere
if grep -Eq 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$it_run"/logs/*.log "$it_dir"/*.log "$it_dir"/*.err; then
  it_fail "sanitizer report: $(grep -Eh -A3 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$it_run"/logs/*.log "$it_dir"/*.log "$it_dir"/*.err | head -n 20)"
fi
it_log "PASS"
