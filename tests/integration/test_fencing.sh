#!/usr/bin/env bash
# Issue 9 §1 (last bullet) and §2: leader fencing with a 1 s lease.
#
# A deployment under deploy/supervise with etcd.lease_ttl "1s" (the embedded etcd
# runs with --election-timeout=100, so it grants 1 s: the coordinator logs the
# TTL granted), coordinator A leading, a second coordinator B started by hand as
# standby, one host tier. Blocks are stored; a client holds a put token of A
# (prepare_put done, bytes not written yet); a load of stores runs throughout
# (each store a new client process, coordinators "A,B").
#   1. SIGSTOP of A past its lease: B leads and logs "serving after N ms of
#      rebuild"; the tier logs the fence rising to B's epoch before B serves.
#   2. The held client writes under A's token: the tier refuses it (WriteSlots
#      fenced, PERMISSION_DENIED), counted under reason old_leader.
#   3. SIGCONT of A: it steps down by itself, changes nothing (the blocks stored
#      before read back byte-exact at B, the fence still B's), and the load keeps
#      being served, by the new leader.
#   4. All of etcd stopped (killed) and restarted by the supervisor: a leader is
#      elected again, the blocks still read back, new stores work.
# (The load here is one process per store, which registers anew; a long-lived
# client re-registering by itself at a new leader is test_failover_client.sh's.)
. "$(dirname "$0")/lib.sh"

it_write_deployment <<'EOF'
{"etcd": {"lease_ttl": "1s"},
 "tiers": [{"name": "host0", "kind": "host", "capacity": 512, "slot_size": "64KiB"}]}
EOF
it_start
a_ep=$KVTIER_COORDINATOR
b_port=$(it_free_port)
b_ep="tcp://127.0.0.1:$b_port"
# B's own metrics and event addresses (A, stopped, still holds the deployment's)
/usr/bin/python3 -c '
import json, os, socket, sys
sys.path.insert(0, os.path.join(os.environ["KVT_SOURCE_DIR"], "tests/integration")); import ports
d = json.load(open(sys.argv[1]))
socks = []
def port():
    s = socket.socket(); ports.bind_free(s); socks.append(s)
    return s.getsockname()[1]
d["coordinator"]["metrics"] = "127.0.0.1:%d" % port()
for k in ("endpoint", "replay_endpoint", "vllm_endpoint", "vllm_replay_endpoint"):
    if d["events"].get(k):
        d["events"][k] = "tcp://127.0.0.1:%d" % port()
json.dump(d, open(sys.argv[2], "w"), indent=2)' "$it_dir/deployment.json" "$it_dir/deployment-b.json"
"$KVTIER_BIN" coordinator -c "$it_dir/deployment-b.json" --etcd "$KVTIER_ETCD" --secret "$it_run/secret" \
  --name "standby-$it_name" --endpoint "$b_ep" >"$it_dir/coord-b.log" 2>&1 &
echo $! >"$it_run/pids/coord-b.pid" # it_cleanup kills it with the rest
both="$a_ep,$b_ep"
a_log=$it_run/logs/coordinator.log
t_log=$it_run/logs/tier-host0.log
client=$KVT_SOURCE_DIR/tests/integration/it_client.py

epoch_at() {
  { "$KVTIER_BIN" status --coordinator "$1" 2>/dev/null || true; } | awk '$1 == "leader" { gsub(/[()]/, "", $4); print $4 }'
}
e1=$(epoch_at "$a_ep")
[ -n "$e1" ] || it_fail "no leader epoch in kvtier status"
grep -Eq 'granted by etcd with TTL 1 s \(asked 1 s' "$a_log" ||
  it_fail "the coordinator does not log a 1 s lease granted: $(grep -h 'lease' "$a_log" | head -n 3)"
it_log "leader A epoch $e1, standby B on $b_ep; $(grep -ho 'lease [0-9a-f]* granted by etcd with TTL [0-9]* s' "$a_log" | head -n 1)"
b_ready() { grep -q 'FOLLOWER' "$it_dir/coord-b.log"; }
it_wait_until 30 b_ready || it_fail "B does not follow: $(tail -n 5 "$it_dir/coord-b.log")"

# blocks stored at A; a client holding one of A's put tokens
KVTIER_COORDINATOR=$both it_python "$client" store pre 0 16 || it_fail "store before the stop"
# (over the tier plane: a writer on the tier's own host through shared memory is
# beyond the tier actor's fence, docs/SECURITY.md)
KVTIER_COORDINATOR=$both IT_DISABLE_SHM=1 it_python "$client" stale stale 4 "$it_dir/stale.ready" "$it_dir/stale.go" \
  >"$it_dir/stale.out" 2>"$it_dir/stale.err" &
stale_pid=$!
echo "$stale_pid" >"$it_run/pids/stale.pid"
it_wait_until 30 test -f "$it_dir/stale.ready" || it_fail "the held client did not get a token: $(cat "$it_dir/stale.err")"

# the load: one store of 2 blocks after another, each a new client process
load() {
  local i=0
  while [ -d "$it_dir" ] && [ ! -f "$it_dir/load.stop" ]; do
    if KVTIER_COORDINATOR=$both it_python "$client" store load "$i" 2 2>>"$it_dir/load.err"; then
      echo "ok $i $(date +%s%3N)"
    else
      echo "fail $i $(date +%s%3N)"
    fi
    i=$((i + 2))
  done
}
load >"$it_dir/load.txt" &
load_pid=$!
# the loop is a subshell of this script: stopped before lib.sh's cleanup runs
trap 'rc=$?; set +e; kill "$load_pid" 2>/dev/null; (exit $rc); it_cleanup' EXIT
oks() { grep -c '^ok' "$it_dir/load.txt" || true; }
has_oks() { [ "$(oks)" -ge "$1" ]; }
it_wait_until 30 has_oks 1 || it_fail "the load does not run: $(tail -n 3 "$it_dir/load.err")"

# 1. the leader stopped past its lease
a_pid=$(it_pid coordinator)
kill -STOP "$a_pid"
t_stop=$(date +%s%3N)
it_log "SIGSTOP leader A (pid $a_pid)"
b_leads() {
  local e
  e=$(epoch_at "$b_ep")
  [ -n "$e" ] && [ "$e" -gt "$e1" ] && grep -q 'serving after' "$it_dir/coord-b.log"
}
it_wait_until 30 b_leads || { kill -CONT "$a_pid"; it_fail "B does not lead: $(tail -n 5 "$it_dir/coord-b.log")"; }
e2=$(epoch_at "$b_ep")
# from the stop to B's election and to its scheduler serving, by B's log clock
since_stop() {
  /usr/bin/python3 -c '
import datetime, re, sys
t0, pat = int(sys.argv[1]), sys.argv[2]
for l in open(sys.argv[3]):
    if re.search(pat, l):
        ts = datetime.datetime.strptime(l.split()[0], "%Y-%m-%dT%H:%M:%S.%fZ")
        ts = ts.replace(tzinfo=datetime.timezone.utc).timestamp()
        print(int(ts * 1000) - t0)
        break' "$t_stop" "$1" "$it_dir/coord-b.log"
}
it_log "B leads, epoch $e2: elected $(since_stop "LEADER epoch $e2") ms after the stop, serving $(since_stop "leader epoch $e2: serving after") ms after it ($(grep -ho 'serving after [0-9]* ms of rebuild[^)]*)' "$it_dir/coord-b.log" | tail -n 1))"
grep -q "leader epoch $e2 (was $e1)" "$t_log" || it_fail "the tier did not raise its fence to epoch $e2"

# 2. the deposed leader's token, used now
touch "$it_dir/stale.go"
wait "$stale_pid" || it_fail "a write under A's token was not refused: $(cat "$it_dir/stale.out" "$it_dir/stale.err")"
grep -q '"status": "PERMISSION_DENIED"' "$it_dir/stale.out" || it_fail "refused, but not PERMISSION_DENIED: $(cat "$it_dir/stale.out")"
grep -q "WriteSlots fenced: the token is from leader epoch $e1" "$t_log" || it_fail "the tier did not say why it refused"
it_log "a write under A's token: $(cat "$it_dir/stale.out")"

# 3. the old leader resumes
kill -CONT "$a_pid"
it_log "SIGCONT A"
stepped_down() { grep -Eq 'stepping down before the lease can lapse|lease [0-9a-f]+ lost' "$a_log" && grep -q 'leadership lost' "$a_log"; }
it_wait_until 30 stepped_down || it_fail "A did not step down: $(tail -n 5 "$a_log")"
a_follows() { [ "$(epoch_at "$a_ep")" = "$e2" ]; }
it_wait_until 30 a_follows || it_fail "A does not point at the new leader: $(epoch_at "$a_ep")"
t_cont=$(date +%s%3N)
n_ok=$(oks)
it_wait_until 30 has_oks $((n_ok + 2)) || it_fail "the load is not served after the resume: $(tail -n 3 "$it_dir/load.err")"
KVTIER_COORDINATOR=$b_ep it_python "$client" verify pre 0 16 || it_fail "blocks stored before the stop are not served right"
metric() {
  local addr
  addr=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tiers"][0]["metrics"])' "$it_dir/deployment.json")
  /usr/bin/python3 -c 'import sys,urllib.request; print(urllib.request.urlopen("http://" + sys.argv[1] + "/metrics", timeout=5).read().decode())' "$addr" |
    awk -v m="$1" 'index($1, m) == 1 { print $2 }'
}
# (the tier process refreshes its figures every metrics.refresh, 1 s)
counted() {
  refused=$(metric 'kvtier_tier_actor_token_refusals_total{tier="host0",reason="old_leader"}')
  fence=$(metric 'kvtier_tier_actor_leader_epoch{')
  [ "${refused:-0}" -ge 1 ] && [ "$fence" = "$e2" ]
}
it_wait_until 20 counted || it_fail "the tier's metrics: old_leader refusals ${refused:-none}, fence ${fence:-none} (want >= 1, $e2)"
grep -q "leader epoch $e1: the elector stepped down\|leader epoch $e1: the lease was last confirmed" "$a_log" ||
  it_log "(A's scheduler got no request between its resume and its stop)"
it_log "A stepped down; tier fence $fence, old_leader refusals $refused; load $(oks) ok, $(grep -c '^fail' "$it_dir/load.txt" || true) failed"

# 4. all of etcd stopped and restarted
etcd_pid=$(it_pid etcd)
kill -TERM "$etcd_pid"
it_log "etcd (pid $etcd_pid) stopped; the supervisor restarts it"
etcd_back() { [ "$(it_pid etcd)" != "$etcd_pid" ] && kill -0 "$(it_pid etcd)" 2>/dev/null; }
it_wait_until 30 etcd_back || it_fail "etcd was not restarted"
some_leader() {
  local e
  e=$(epoch_at "$b_ep")
  [ -n "$e" ] && [ "$e" != 0 ]
}
it_wait_until 30 some_leader || it_fail "no leader after etcd's restart"
n_ok=$(oks)
it_wait_until 30 has_oks $((n_ok + 2)) || it_fail "the load is not served after etcd's restart: $(tail -n 3 "$it_dir/load.err")"
KVTIER_COORDINATOR=$both it_python "$client" verify pre 0 16 || it_fail "blocks lost across etcd's restart"
touch "$it_dir/load.stop"
wait "$load_pid"
e3=$(epoch_at "$b_ep")
it_log "after etcd's restart: leader epoch $e3, load $(oks) ok, $(grep -c '^fail' "$it_dir/load.txt" || true) failed in all"
# (it_no_crash would count etcd's deliberate exit: the sanitizer half of it only)
if grep -Eq 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$it_run"/logs/*.log "$it_dir/coord-b.log"; then
  it_fail "sanitizer report: $(grep -Eh -A3 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$it_run"/logs/*.log "$it_dir/coord-b.log" | head -n 20)"
fi
it_log "PASS"
