#!/usr/bin/env bash
# Issue 9 §3: `kvtier leader resign`. Two coordinators (a, b) and one host tier under
# one supervisor. A client stores blocks and holds a put window open (bytes written,
# not completed); the leader is asked to resign with --wait 30: `kvtier status` says
# it is resigning, the held window then completes at the old leader (the resign
# waited for it), the standby becomes the leader (a higher epoch), the client's next
# calls reach it without an error of any kind and every block (the held window's
# too) reads back byte-exact; the old leader stays up, as a standby. Then, the
# supervisor held and the standby stopped, a resign with no standby is refused
# (exit 1, CONFLICT, "no standby"; the Python binding's ConflictError) and the
# leader is unchanged; once the supervisor restarted it, Client.leader_resign hands
# the leadership back. Bad --wait and usage are refused with exit 2.
. "$(dirname "$0")/lib.sh"

it_write_deployment <<'EOF'
{ "etcd": { "lease_ttl": "2s" },
  "tiers": [ { "name": "host0", "kind": "host", "capacity": 4096, "slot_size": "4KiB" } ] }
EOF
/usr/bin/python3 - "$it_dir/deployment.json" <<'EOF'
import json, os, socket, sys
sys.path.insert(0, os.path.join(os.environ["KVT_SOURCE_DIR"], "tests/integration")); import ports
d = json.load(open(sys.argv[1]))
socks = []
def port():
    s = socket.socket(); ports.bind_free(s); socks.append(s)
    return s.getsockname()[1]
d["coordinator"].pop("endpoint")
d["coordinator"].pop("metrics")
d["coordinators"] = [{"name": n, "endpoint": "tcp://127.0.0.1:%d" % port(),
                      "metrics": "127.0.0.1:%d" % port()} for n in ("a", "b")]
json.dump(d, open(sys.argv[1], "w"), indent=2)
EOF

# bad usage first: nothing is contacted (exit 2)
usage() { # usage ARGS...: kvtier leader ARGS... exits 2
  local rc=0
  "$KVTIER_BIN" leader "$@" --coordinator tcp://127.0.0.1:9 >"$it_dir/usage.out" 2>&1 || rc=$?
  [ $rc -eq 2 ] || it_fail "kvtier leader $*: exit $rc, not 2: $(cat "$it_dir/usage.out")"
}
usage resign --wait 0
usage resign --wait 301
usage resign --wait x
usage resign extra
usage abdicate
usage
grep -q 'usage: kvtier leader resign' "$it_dir/usage.out" || it_fail "usage: $(cat "$it_dir/usage.out")"

it_start
role() { it_cli status 2>/dev/null | awk -v n="$1" '$1 == "coordinator" && $2 == n { sub(/:$/, "", $3); sub(/ .*/, "", $4); print $4 }'; }
epoch() { it_cli status 2>/dev/null | awk '$1 == "leader" { gsub(/[()]/, "", $4); print $4 }'; }
one_leads() {
  local ra rb
  ra=$(role a) rb=$(role b)
  { [ "$ra" = leader ] && [ "$rb" = standby ]; } || { [ "$ra" = standby ] && [ "$rb" = leader ]; }
}
it_wait_until 30 one_leads || it_fail "not one leader and one standby: $(it_cli status 2>&1 | head -n 8)"
old=$( [ "$(role a)" = leader ] && echo a || echo b)
new=$( [ "$old" = a ] && echo b || echo a)
e1=$(epoch)
it_log "coordinator $old leads (epoch $e1), $new is a standby"
# the leader has counted its standby (coord_elector.c logs each new count)
it_wait_until 30 grep -q "$old: 1 standby coordinators registered" "$it_run/logs/coordinator-$old.log" ||
  it_fail "the leader $old never counted a standby: $(grep -i standby "$it_run/logs/coordinator-$old.log")"

# ---- resign with a client in the middle of its requests ---------------------------
export KVTIER_COORDINATOR IT_INSTANCE=rs-$it_name IT_BLOCK=4096
it_python "$KVT_SOURCE_DIR/tests/integration/it_client.py" resign rs 16 "$it_dir/cl.ready" \
  "$it_dir/cl.go" "$it_dir/cl.stop" >"$it_dir/cl.out" 2>"$it_dir/cl.err" &
cl_pid=$!
it_wait_until 60 test -f "$it_dir/cl.ready" || it_fail "the client did not get ready: $(cat "$it_dir/cl.err")"
it_cli leader resign --wait 30 >"$it_dir/resign.out" 2>"$it_dir/resign.err" &
rs_pid=$!
resigning() { it_cli status 2>/dev/null | grep -q '^leader .*resigning'; }
it_wait_until 30 resigning || it_fail "status never said resigning: $(it_cli status 2>&1 | head -n 6)"
it_cli status | grep '^leader\|^coordinator ' >&2
kill -0 "$rs_pid" 2>/dev/null || it_fail "the resign did not wait for the open window: $(cat "$it_dir/resign.out" "$it_dir/resign.err")"
touch "$it_dir/cl.go" # the client completes its open window, then goes on
wait "$rs_pid" || it_fail "kvtier leader resign failed: $(cat "$it_dir/resign.out" "$it_dir/resign.err")"
cat "$it_dir/resign.out" >&2
grep -q "^resign: $old (epoch $e1) handed over after [0-9]* ms: 1 windows open at the start, 1 finished, 0 left to lapse; 1 standbys registered$" \
  "$it_dir/resign.out" || it_fail "resign output: $(cat "$it_dir/resign.out")"
grep -q "^leader: $new at .* (epoch [0-9]*); $old is a standby now$" "$it_dir/resign.out" ||
  it_fail "resign output: $(cat "$it_dir/resign.out")"
new_leads() { [ "$(role "$new")" = leader ] && [ "$(epoch)" -gt "$e1" ]; }
it_wait_until 30 new_leads || it_fail "$new does not lead: $(it_cli status 2>&1 | head -n 8)"
e2=$(epoch)
it_wait_until 30 eval '[ "$(role "$old")" = standby ]' || it_fail "$old is not a standby: $(it_cli status 2>&1 | grep '^coordinator ')"
touch "$it_dir/cl.stop"
wait "$cl_pid" || it_fail "the client failed across the resign: $(cat "$it_dir/cl.err")"
it_log "client: $(cat "$it_dir/cl.out")"
/usr/bin/python3 - "$it_dir/cl.out" "$e1" "$e2" <<'EOF' || it_fail "client across the resign: $(cat "$it_dir/cl.out")"
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
e1, e2 = int(sys.argv[2]), int(sys.argv[3])
assert r["errors"] == {}, r["errors"]
assert r["epochs"][0] == e1 and r["epochs"][-1] == e2, (r["epochs"], e1, e2)
assert r["keys"] >= 16 + 8, r["keys"]
EOF
grep -q "$old: resigned leadership (epoch $e1)" "$it_run/logs/coordinator-$old.log" ||
  it_fail "no hand-over line in $old's log"
grep -q "$old: handing leadership over (kvtier leader resign, epoch $e1)" "$it_run/logs/coordinator-$old.log" ||
  it_fail "the elector of $old did not let go: $(tail -n 20 "$it_run/logs/coordinator-$old.log")"
it_no_crash
it_log "$new leads (epoch $e2) after the resign; $old is a standby"

# the old leader registered again at once (a standby the new leader counts)
it_wait_until 30 grep -q "$new: 1 standby coordinators registered" "$it_run/logs/coordinator-$new.log" ||
  it_fail "the new leader $new never counted $old as a standby"

# ---- no standby: refused, the leader unchanged -------------------------------------
kill -STOP "$it_supervisor" # it would restart the standby
pid_old=$(it_pid "coordinator-$old")
kill -TERM "$pid_old" # it revokes its lease as it stops: its registration goes at once
it_wait_until 30 grep -q "$new: 0 standby coordinators registered" "$it_run/logs/coordinator-$new.log" || {
  kill -CONT "$it_supervisor"
  it_fail "the leader $new never saw its standby go"
}
rc=0
it_cli leader resign --wait 5 >"$it_dir/refused.out" 2>"$it_dir/refused.err" || rc=$?
# the Python binding says the same (kvtier.ConflictError), still without a standby
it_python "$KVT_SOURCE_DIR/tests/integration/it_client.py" leader-resign 5 >"$it_dir/refused.json" ||
  { kill -CONT "$it_supervisor"; it_fail "Client.leader_resign: $(cat "$it_dir/refused.json")"; }
kill -CONT "$it_supervisor"
[ $rc -eq 1 ] || it_fail "resign without a standby: exit $rc, not 1: $(cat "$it_dir/refused.out" "$it_dir/refused.err")"
grep -q 'CONFLICT: no standby: no other coordinator is registered in etcd' "$it_dir/refused.err" ||
  it_fail "refusal: $(cat "$it_dir/refused.err")"
grep -q "$new stays the leader (epoch $e2)" "$it_dir/refused.err" || it_fail "refusal: $(cat "$it_dir/refused.err")"
it_log "refused: $(cat "$it_dir/refused.err")"
grep -q '"refused": "CONFLICT"' "$it_dir/refused.json" && grep -q 'no standby' "$it_dir/refused.json" ||
  it_fail "Client.leader_resign without a standby: $(cat "$it_dir/refused.json")"
[ "$(role "$new")" = leader ] && [ "$(epoch)" = "$e2" ] || it_fail "the leader changed: $(it_cli status 2>&1 | head -n 6)"
it_python "$KVT_SOURCE_DIR/tests/integration/it_client.py" store after 0 4 >/dev/null ||
  it_fail "the leader does not serve after the refusal"

# ---- the supervisor restarts the stopped one: a resign through the Python binding hands back
counted_again() { [ "$(grep -c "$new: 1 standby coordinators registered" "$it_run/logs/coordinator-$new.log")" -ge 2 ]; }
it_wait_until 30 counted_again || it_fail "the leader $new never counted the restarted $old"
it_python "$KVT_SOURCE_DIR/tests/integration/it_client.py" leader-resign 5 >"$it_dir/back.json" ||
  it_fail "Client.leader_resign: $(cat "$it_dir/back.json")"
it_log "Client.leader_resign: $(cat "$it_dir/back.json")"
/usr/bin/python3 - "$it_dir/back.json" "$new" "$old" "$e2" <<'EOF' || it_fail "Client.leader_resign: $(cat "$it_dir/back.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["old_leader"] == sys.argv[2] and r["old_epoch"] == int(sys.argv[4]), r
assert r["new_leader"] == sys.argv[3] and r["new_epoch"] > int(sys.argv[4]), r
assert r["windows_open"] == 0 and r["windows_lapsed"] == 0 and r["standbys"] == 1, r
EOF
it_wait_until 30 eval '[ "$(role "$old")" = leader ] && [ "$(role "$new")" = standby ]' ||
  it_fail "$old did not take over again: $(it_cli status 2>&1 | grep '^coordinator ')"
it_log "PASS"
