#!/usr/bin/env bash
# issue 3 §4: "stops everything cleanly on SIGINT/SIGTERM": SIGTERM to deploy/supervise
# stops the live optimizer, the tier actor, the coordinator and etcd (each by itself,
# no SIGKILL needed),
# the supervisor exits 0, no process of the deployment is left and the tier's shared
# memory segment is gone from /dev/shm.
. "$(dirname "$0")/lib.sh"

it_deployment 512 64KiB
it_start

it_cli put --key "$(printf 'c3%030x' $$)" --pattern >/dev/null || it_fail "put"
# issue 12: readiness never accepts another deployment's coordinator at its endpoint
it_cli status --check --cluster "other-$it_name" >/dev/null 2>"$it_dir/check.err" &&
  it_fail "status --check accepted a coordinator of another cluster"
grep -q "serves cluster '$it_name', not 'other-$it_name'" "$it_dir/check.err" ||
  it_fail "status --check did not name the clusters: $(cat "$it_dir/check.err")"
it_cli status --check --cluster "$it_name" >/dev/null || it_fail "status --check of its own cluster"
# issue 12 §8: a CLI error names the argument and what was expected
it_cli put --key "$(printf 'c4%030x' $$)" --file "$it_dir" >/dev/null 2>"$it_dir/put.err" &&
  it_fail "put --file DIRECTORY succeeded"
grep -q -- "--file $it_dir: a directory, not a file holding one block" "$it_dir/put.err" ||
  it_fail "put --file DIRECTORY said: $(cat "$it_dir/put.err")"

pids=()
for f in "$it_run"/pids/*.pid; do pids+=("$(cat "$f")"); done
[ ${#pids[@]} -eq 4 ] ||
  it_fail "expected 4 children (etcd, coordinator, host0, optimizer), found ${#pids[@]}"
for s in "${it_shms[@]}"; do [ -e "/dev/shm/${s#/}" ] || it_fail "shm $s missing while running"; done

kill -TERM "$it_supervisor"
it_wait_gone "$it_supervisor" "$IT_STOP_TIMEOUT_S" || it_fail "the supervisor did not exit after SIGTERM"
rc=0
wait "$it_supervisor" || rc=$?
it_supervisor=""
[ $rc -eq 0 ] || it_fail "the supervisor exited with status $rc"

for p in "${pids[@]}"; do
  ! kill -0 "$p" 2>/dev/null || it_fail "process $p still running after the stop"
done
for d in /proc/[0-9]*; do
  ! it_ours "${d#/proc/}" || it_fail "process ${d#/proc/} of this deployment left: $(tr '\0' ' ' <"$d/cmdline")"
done
for s in "${it_shms[@]}"; do
  [ ! -e "/dev/shm/${s#/}" ] || it_fail "shm segment $s left in /dev/shm"
done
[ ! -e "$it_run/ready" ] || it_fail "ready marker left"
grep -q "all stopped" "$it_dir/supervise.log" || it_fail "the supervisor did not report the stop"
! grep -q "SIGKILL" "$it_dir/supervise.log" || it_fail "a child needed SIGKILL"
! grep -q "removed shm segment" "$it_dir/supervise.log" || it_fail "the tier left its segment"
grep -q "stopped tier-host0 .*exit status 0" "$it_dir/supervise.log" || it_fail "tier exit status"
grep -q "stopped coordinator .*exit status 0" "$it_dir/supervise.log" || it_fail "coordinator exit status"
grep -q "stopped optimizer .*exit status 0" "$it_dir/supervise.log" || it_fail "optimizer exit status"
it_log "PASS"
