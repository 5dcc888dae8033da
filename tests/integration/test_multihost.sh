#!/usr/bin/env bash
# Issue 9 §5, §6: three hosts as network namespaces (deploy/hosts.sh, as deploy/run
# --hosts 3 makes them), a three-member etcd (a member on each host), one
# deploy/supervise --host hK per host: coordinators c1..c3 (one a host), host0 on h1,
# a remote pool of members r2 on h2 and r3 on h3 (chain host0, remote; exclusive),
# lease 1 s. A replay runs
# from h1 (KVTIER_HOST=h1: host0 by shared memory, the remote tiers across the veths)
# with a timeline (kvtier replay --log). Checked:
# (a) kill -9 of the leader under replay load: the replay finishes by itself with 0
#     verify failures and at most as many failed requests as were in flight at the
#     kill; a leader of a higher epoch served; every block acknowledged (its put and
#     complete succeeded) is served afterwards, key by key, byte-exact (kvtier get
#     --keys; the tiers hold more than the replay stores, so nothing is evicted);
# (b) one etcd member killed (-9, the raft leader of the three): puts and gets go on,
#     and a kill -9 of the kvtier leader still hands over (two members are a quorum);
#     the member started again rejoins;
# (c) all three etcd members stopped and started again: a leader is elected again,
#     every acknowledged block is still served byte-exact, and stores resume;
# (d) two hosts with one name: a supervisor for h2 started on h1 (another namespace and
#     address, its own run dir) is refused at start, naming h2's claim in etcd, and
#     starts nothing; the real h2 serves on.
# Skipped where namespaces cannot be made, unless KVT_REQUIRE_NETNS=1 (.ci/run).
. "$(dirname "$0")/lib.sh"

REQUESTS=800 # 16156 distinct blocks
IN_FLIGHT=4
INST=(--instance mh --block-size 4KiB --tokens-per-block 16)

it_netns_hosts 3
hosts_etcd_init "$it_dir" "$it_name"
for m in 1 2 3; do hosts_etcd_start "$m"; done
it_wait_until 30 hosts_etcd_healthy || it_fail "etcd did not come up: $(tail -n 3 "$it_dir"/etcd-e*.log)"
"$KVTIER_BIN" keygen --secret "$it_dir/secret" >/dev/null
# 2048 + 2 x 12288 slots: more than the replay's blocks, nothing is evicted
hosts_deployment "$it_dir/deployment.json" "$it_name" "$it_dir/secret" 1s 2048 12288 4KiB ||
  it_fail "cannot write the deployment"
"$KVTIER_BIN" deployment -c "$it_dir/deployment.json" >/dev/null || it_fail "the deployment is not valid (see above)"
it_shms+=("/kvtier-$it_name-host0")
sup=()
for i in 1 2 3; do
  it_ns_exec "$i" "$KVT_SOURCE_DIR/deploy/supervise" "$it_dir/deployment.json" --host "h$i" \
    --etcd "$HOSTS_ETCD_URLS" --run-dir "$it_dir/h$i" --kvtier "$KVTIER_BIN" \
    >"$it_dir/supervise-h$i.log" 2>&1 &
  sup[i]=$!
done
stop_all_then_cleanup() { # the supervisors first (they stop their children), then lib.sh's
  local r=$? i f
  set +e
  for i in 1 2 3; do kill -TERM "${sup[i]}" 2>/dev/null; done
  for i in 1 2 3; do it_wait_gone "${sup[i]}" 30 || kill -KILL "${sup[i]}" 2>/dev/null; done
  if [ $r -ne 0 ]; then
    for f in "$it_dir"/supervise-h*.log "$it_dir"/h*/logs/*.log "$it_dir"/etcd-e*.log "$it_dir"/*.err; do
      [ -f "$f" ] && { echo "----- last lines of $f" >&2; tail -n 15 "$f" >&2; }
    done
  fi
  (exit "$r")
  it_cleanup
}
trap stop_all_then_cleanup EXIT
for i in 1 2 3; do
  it_wait_until 90 test -f "$it_dir/h$i/ready" || it_fail "host h$i not ready: $(tail -n 5 "$it_dir/supervise-h$i.log")"
done
. "$it_dir/h1/ready"
COORDS=$KVTIER_COORDINATOR
it_log "ready: coordinators $COORDS, etcd $HOSTS_ETCD_URLS"

# k I ARGS...: kvtier on host I
k() {
  local i=$1 cmd=$2
  shift 2
  it_ns_exec "$i" env KVTIER_HOST="h$i" "$KVTIER_BIN" "$cmd" --coordinator "$COORDS" --cluster "$it_name" "$@"
}
leader() { hosts_leader "$HOSTS_ETCD_URLS" "$it_name"; }
# kill_leader: kill -9 of the kvtier leader; sets old, old_epoch, t_kill
kill_leader() {
  read -r old old_epoch < <(leader) || it_fail "no leader in etcd"
  local h=${old#c} pid
  pid=$(cat "$it_dir/h$h/pids/coordinator-$old.pid")
  t_kill=$(date +%s%3N)
  kill -KILL "$pid"
  it_log "killed the leader $old (epoch $old_epoch, pid $pid on h$h)"
}
# wait_new_leader: a leader key of a higher epoch than old_epoch; sets new, new_epoch
wait_new_leader() {
  higher() {
    read -r new new_epoch < <(leader) || return 1
    [ -n "${new_epoch:-}" ] && [ "$new_epoch" -gt "$old_epoch" ]
  }
  it_wait_until 60 higher || it_fail "no leader of an epoch above $old_epoch"
}
# check_keys FILE WHAT: every key of FILE served byte-exact, from h1
check_keys() {
  local out=$it_dir/keys-$2.txt rc=0
  k 1 get "${INST[@]}" --keys "$1" --verify >"$out" 2>&1 || rc=$?
  [ $rc -eq 0 ] || it_fail "$2: keys not served as stored (status $rc): $(grep -v '^keys:' "$out" | head -n 5) $(tail -n 1 "$out")"
  it_log "$2: $(tail -n 1 "$out")"
}
put_get() { # KEY WHAT: a new block stored and read back
  k 1 put "${INST[@]}" --key "$1" --pattern >/dev/null || it_fail "$2: put $1"
  k 2 get "${INST[@]}" --key "$1" --verify >/dev/null || it_fail "$2: get $1 (from h2)"
}

# ---- (a) kill -9 of the leader under replay load -------------------------------------
k 1 replay "$it_trace" --requests "$REQUESTS" --in-flight "$IN_FLIGHT" "${INST[@]}" --timeout 1000 \
  --no-progress --log "$it_dir/timeline.txt" >"$it_dir/replay.txt" 2>"$it_dir/replay.err" &
replay_pid=$!
ended() { [ "$(awk '$1 == "end" { n++ } END { print n + 0 }' "$it_dir/timeline.txt" 2>/dev/null || echo 0)" -ge "$1" ]; }
it_wait_until 60 ended 200 || it_fail "the replay does not progress: $(tail -n 3 "$it_dir/replay.err")"
kill -0 "$replay_pid" 2>/dev/null || it_fail "the replay ended before the kill"
kill_leader
rc=0
wait "$replay_pid" || rc=$?
cat "$it_dir/replay.txt"
[ $rc -eq 0 ] || it_fail "replay exited with status $rc: $(tail -n 5 "$it_dir/replay.err")"
[[ $(tail -n 1 "$it_dir/replay.txt") =~ ^replay:\ $REQUESTS\ requests, ]] || it_fail "the replay did not finish all requests"
[ "$(it_replay_field "$it_dir/replay.txt" 5)" = 0 ] || it_fail "verify failures"
wait_new_leader
read -r in_flight to_leader < <(awk -v t="$t_kill" -v e="$old_epoch" '
  $1 == "begin" && $2 <= t { open[$3] = 1 }
  $1 == "end" && $2 <= t { delete open[$3] }
  $1 == "leader" && $3 > e && first == "" { first = $2 - t }
  END { n = 0; for (r in open) n++; print n, (first == "" ? "-" : first) }' "$it_dir/timeline.txt")
failed=$(sed -n 's/^requests  *[0-9]* replayed, \([0-9]*\) failed.*/\1/p' "$it_dir/replay.txt")
[ "$in_flight" -ge 1 ] || it_fail "no request was in flight at the kill"
[ "$failed" -le "$in_flight" ] || it_fail "$failed requests failed, more than the $in_flight in flight at the kill"
[ "$to_leader" != - ] || it_fail "the replay saw no call served by a leader above epoch $old_epoch"
it_log "(a) leader $old -> $new (epoch $new_epoch): first call served by it $to_leader ms after the kill; $in_flight in flight, $failed failed, 0 verify failures"
awk -v t="$t_kill" '$1 == "stored" && $2 < t { print $3 }' "$it_dir/timeline.txt" >"$it_dir/acked-before.txt"
awk '$1 == "stored" { print $3 }' "$it_dir/timeline.txt" >"$it_dir/acked.txt"
[ -s "$it_dir/acked-before.txt" ] || it_fail "no block was acknowledged before the kill"
it_log "$(wc -l <"$it_dir/acked-before.txt") blocks acknowledged before the kill, $(wc -l <"$it_dir/acked.txt") in all"
# the pool is spread over h2 and h3: both members hold blocks
for m in r2 r3; do
  fill=$(k 1 status 2>/dev/null | sed -n "s/^tier [0-9]* $m: .* fill \([0-9]*\)\/.*/\1/p")
  [ "${fill:-0}" -gt 0 ] || it_fail "(a) pool member $m holds no block: $(k 1 status 2>&1 | grep '^tier ')"
done
check_keys "$it_dir/acked-before.txt" "(a) acknowledged before the kill"
check_keys "$it_dir/acked.txt" "(a) acknowledged in all"

# ---- (b) one etcd member killed -----------------------------------------------------
# the raft leader of the three (etcdctl endpoint status: IS LEADER)
etcd_leader=$(ETCDCTL_API=3 etcdctl --endpoints "$HOSTS_ETCD_URLS" endpoint status -w json 2>/dev/null |
  /usr/bin/python3 -c 'import json, sys
for s in json.load(sys.stdin):
    if s["Status"]["header"]["member_id"] == s["Status"]["leader"]: print(s["Endpoint"])')
m=1
for i in 1 2 3; do [ "${HOSTS_ETCD_CLIENT[i]}" != "$etcd_leader" ] || m=$i; done
hosts_etcd_stop "$m" KILL
it_log "(b) killed etcd member e$m (${HOSTS_ETCD_CLIENT[m]}, raft leader: ${etcd_leader:-?})"
put_get "$(printf 'b1%030x' $$)" "(b) one member down"
kill_leader
wait_new_leader
it_wait_until 30 k 1 status --check --timeout 1000 >/dev/null 2>&1 || it_fail "(b) the new leader does not serve"
put_get "$(printf 'b2%030x' $$)" "(b) one member down, after the leader change"
check_keys "$it_dir/acked.txt" "(b) one member down, leader $old -> $new"
hosts_etcd_start "$m"
it_wait_until 30 hosts_etcd_healthy || it_fail "(b) member e$m did not rejoin: $(tail -n 3 "$it_dir/etcd-e$m.log")"
it_log "(b) member e$m rejoined"

# ---- (c) all of etcd stopped and started again ---------------------------------------
read -r old old_epoch < <(leader)
for m in 1 2 3; do hosts_etcd_stop "$m" TERM; done
it_log "(c) all three etcd members stopped"
sleep 3 # past the lease: every coordinator steps down
for m in 1 2 3; do hosts_etcd_start "$m"; done
it_wait_until 30 hosts_etcd_healthy || it_fail "(c) etcd did not come back: $(tail -n 3 "$it_dir"/etcd-e*.log)"
wait_new_leader
it_wait_until 60 k 1 status --check --timeout 1000 >/dev/null 2>&1 || it_fail "(c) the service did not recover"
it_log "(c) etcd back: leader $new (epoch $new_epoch)"
check_keys "$it_dir/acked.txt" "(c) after etcd's restart"
put_get "$(printf 'c1%030x' $$)" "(c) after etcd's restart"
printf '%s\n' "$(printf 'b1%030x' $$)" "$(printf 'b2%030x' $$)" >"$it_dir/b-keys.txt"
check_keys "$it_dir/b-keys.txt" "(c) the blocks stored while a member was down"

# ---- (d) two hosts with one name ---------------------------------------------------
rc=0
it_ns_exec 1 timeout 60 "$KVT_SOURCE_DIR/deploy/supervise" "$it_dir/deployment.json" --host h2 \
  --etcd "$HOSTS_ETCD_URLS" --run-dir "$it_dir/h2-again" --kvtier "$KVTIER_BIN" >"$it_dir/h2-again.log" 2>&1 || rc=$?
[ $rc -eq 1 ] || it_fail "(d) a second supervisor for h2: status $rc, want 1: $(tail -n 5 "$it_dir/h2-again.log")"
grep -q "host h2 of cluster $it_name is already claimed (/kvtier/$it_name/hosts/h2 = .*run dir $it_dir/h2\"" "$it_dir/h2-again.log" ||
  it_fail "(d) the refusal does not name h2's claim: $(cat "$it_dir/h2-again.log")"
for f in "$it_dir"/h2-again/logs/*.log; do
  [ ! -e "$f" ] || [ "${f##*/}" = host-claim.log ] || it_fail "(d) the second supervisor started ${f##*/}"
done
kill -0 "${sup[2]}" || it_fail "(d) h2's supervisor is gone"
put_get "$(printf 'd1%030x' $$)" "(d) after the refused supervisor"
it_log "(d) $(grep -o 'supervise: --host h2: kvtier host-claim: host h2 .* already claimed' "$it_dir/h2-again.log")"

if grep -Eq 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$it_dir"/h*/logs/*.log "$it_dir"/*.err; then
  it_fail "sanitizer report: $(grep -Eh -A3 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$it_dir"/h*/logs/*.log "$it_dir"/*.err | head -n 20)"
fi
it_log PASS
