#!/usr/bin/env bash
# issue 3 §4 + §5: deploy/supervise starts a default-like deployment (embedded etcd,
# coordinator, host tier actor) and marks it ready; `kvtier replay` of the first 200
# trace requests loads every hit byte-exact (zero verify failures), with a non-zero
# hit rate, no failed request, and the report's last line in the documented form.
. "$(dirname "$0")/lib.sh"

it_deployment 2048 64KiB
it_start

it_cli status --check >"$it_dir/status.txt" || it_fail "status --check failed on a ready deployment"
cat "$it_dir/status.txt"
grep -q "^leader  *$KVTIER_COORDINATOR " "$it_dir/status.txt" || it_fail "status does not name the leader"
grep -q "^tier 1 host0: kind host, up," "$it_dir/status.txt" || it_fail "status does not show host0 up"

rc=0
it_cli replay "$it_trace" --requests 200 --no-progress >"$it_dir/replay.txt" || rc=$?
cat "$it_dir/replay.txt"
[ $rc -eq 0 ] || it_fail "replay exited with status $rc"

last=$(tail -n 1 "$it_dir/replay.txt")
[[ $last =~ ^replay:\ 200\ requests,\ hit\ rate\ [0-9]+\.[0-9]%,\ loaded\ [0-9]+\.[0-9]{2}\ GB,\ stored\ [0-9]+\.[0-9]{2}\ GB,\ verify\ failures\ 0$ ]] ||
  it_fail "last line not in the documented form: $last"
hit=$(it_replay_field "$it_dir/replay.txt" 2)
awk -v h="$hit" 'BEGIN { exit !(h > 0) }' || it_fail "hit rate is $hit%, expected above zero"
grep -q '^requests  *200 replayed, 0 failed$' "$it_dir/replay.txt" || it_fail "some requests failed"
grep -q '^errors  *0 failed calls$' "$it_dir/replay.txt" || it_fail "some calls failed"
grep -q '^tier host0: [1-9][0-9]* hits$' "$it_dir/replay.txt" || it_fail "no per-tier hits for host0"

# The blocks written are visible in the tier's fill.
it_cli status >"$it_dir/status2.txt"
grep -Eq '^tier 1 host0: .* fill [1-9][0-9]*/2048 slots' "$it_dir/status2.txt" ||
  it_fail "host0 shows no used slots after the replay: $(grep '^tier 1' "$it_dir/status2.txt")"
it_log "PASS"
