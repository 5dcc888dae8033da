#!/usr/bin/env bash
# issue 12 §8: ./deploy/run --config with a bad deployment is refused before anything
# starts, with an error naming the file and what is wrong — never a Python
# traceback: malformed JSON, a missing required section, a topology's bounds out of
# order (issue 11 §6), a directory, no such file. Issue 9 §6: deploy/supervise --host
# refuses an invalid advertised endpoint (an IPv4 address out of range, a name that
# does not resolve) at start; deploy/run --hosts refuses a host count out of 2..8.
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

# an advertised endpoint that is invalid, at start of one host's supervisor
adv_check() { # ADVERTISE EXPECTED-TEXT
  local rc=0 f=$it_dir/adv.json port
  port=$(it_free_port)
  cat >"$f" <<JSON
{"cluster": "$it_name", "security": {"secret_file": "$it_dir/secret"},
 "etcd": {"endpoints": ["http://127.0.0.1:1"]},
 "coordinators": [{"name": "a", "host": "h1", "endpoint": "tcp://0.0.0.0:$port", "advertise": "$1"}],
 "tiers": [{"name": "host0", "kind": "host", "host": "h1", "endpoint": "tcp://127.0.0.1:$(it_free_port)",
            "capacity": 8, "slot_size": "4KiB", "shm": "/kvtier-$it_name-host0"}]}
JSON
  timeout 60 "$KVT_SOURCE_DIR/deploy/supervise" "$f" --host h1 --run-dir "$it_dir/adv-run" \
    --kvtier "$KVTIER_BIN" >"$it_dir/out" 2>&1 || rc=$?
  [ $rc -eq 1 ] || it_fail "supervise with advertise $1: status $rc, want 1: $(cat "$it_dir/out")"
  grep -qF -- "$2" "$it_dir/out" || it_fail "supervise with advertise $1 lacks '$2': $(cat "$it_dir/out")"
  [ ! -e "$it_dir/adv-run/logs/coordinator-a.log" ] || it_fail "supervise with advertise $1 started a coordinator"
}
"$KVTIER_BIN" keygen --secret "$it_dir/secret" >/dev/null
adv_check "tcp://10.0.0.300:7700" "coordinators[0].advertise: tcp://10.0.0.300:7700: bad IPv4 address"
adv_check "tcp://no-such-host.invalid:7700" 'host "no-such-host.invalid" does not resolve here'

# deploy/run --hosts N: 2..8
for n in 1 9 x; do
  rc=0
  KVT_KVTIER=$KVTIER_BIN timeout 60 "$KVT_SOURCE_DIR/deploy/run" --hosts "$n" >"$it_dir/out" 2>&1 || rc=$?
  [ $rc -eq 2 ] || it_fail "deploy/run --hosts $n: status $rc, want 2: $(cat "$it_dir/out")"
  grep -qF -- "--hosts $n: give 2 to 8 hosts" "$it_dir/out" || it_fail "deploy/run --hosts $n: $(cat "$it_dir/out")"
done
it_log "PASS"
