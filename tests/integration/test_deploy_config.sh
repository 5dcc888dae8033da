#!/usr/bin/env bash
# issue 12 §8: ./deploy/run --config with a bad deployment is refused before anything
# starts, with an error naming the file and what is wrong — never a Python
# traceback: malformed JSON, a missing required section, a topology's bounds out of
# order (issue 11 §6), a directory, no such file.
# (KVT_KVTIER runs the suite's kvtier instead of bootstrapping and building.)
. "$(dirname "$0")/lib.sh"

printf '{"cluster": "%s",\n "tiers": [\n' "$it_name" >"$it_dir/truncated.json"
printf '{"cluster": "%s"}\n' "$it_name" >"$it_dir/notiers.json"
printf '{"tiers": [{"name": "host0", "kind": "host"}]}\n' >"$it_dir/nocluster.json"
cat >"$it_dir/badorder.json" <<JSON
{"cluster": "$it_name", "tiers": [
  {"name": "host0", "kind": "host", "endpoint": "tcp://127.0.0.1:1", "capacity": 8},
  {"name": "host1", "kind": "host", "endpoint": "tcp://127.0.0.1:2", "capacity": 8}],
 "topology": {"type": "branches", "route": "ttl", "branches": [
  {"name": "a", "type": "store", "tier": "host0", "ttl_above": "30s"},
  {"name": "b", "type": "store", "tier": "host1", "ttl_above": "1m"},
  {"name": "rest", "type": "store", "tier": "host0", "fallback": true}]}}
JSON
mkdir "$it_dir/adir"
check() { # check FILE EXPECTED-TEXT
  local rc=0
  KVT_KVTIER=$KVTIER_BIN timeout 60 "$KVT_SOURCE_DIR/deploy/run" --config "$1" \
    >"$it_dir/out" 2>&1 || rc=$?
  [ $rc -eq 2 ] || it_fail "deploy/run --config $1: status $rc, want 2: $(cat "$it_dir/out")"
  ! grep -q "Traceback" "$it_dir/out" || it_fail "deploy/run --config $1 printed a traceback"
  grep -qF -- "$2" "$it_dir/out" || it_fail "deploy/run --config $1 lacks '$2': $(cat "$it_dir/out")"
  [ ! -e "$KVT_SOURCE_DIR/run/$(basename "$1" .json)/supervise.log" ] ||
    it_fail "deploy/run --config $1 started a supervisor"
}
check "$it_dir/truncated.json" "$it_dir/truncated.json:3:0: invalid JSON"
check "$it_dir/notiers.json" "$it_dir/notiers.json: tiers: the required section is missing"
check "$it_dir/nocluster.json" "$it_dir/nocluster.json: cluster: the required section is missing"
check "$it_dir/badorder.json" "topology.branches[1].ttl_above: 1m is not below branches[0]'s 30s"
check "$it_dir/adir" "$it_dir/adir is not a regular file"
check "$it_dir/none.json" "no deployment file $it_dir/none.json"
it_log "PASS"
