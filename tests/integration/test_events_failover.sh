#!/usr/bin/env bash
# Issue 10 §1, DESIGN.md §13: the publisher runs on the leader, its endpoints move
# at failover, sequences stay monotonic across leaders (a new leader's first batch
# is LeaderChanged) and a subscriber follows a failover by itself.
#
# A deployment under deploy/supervise (coordinator A, one host tier) and a second
# coordinator B started by hand as a standby. `kvtier events --record` runs
# throughout (endpoint from cluster info: it follows the leader). A block is put,
# the leading coordinator is SIGKILLed (the supervisor restarts it; one of the two
# takes over), another block is put. The recording must hold: the first block
# stored in the first term, a LeaderChanged of a higher epoch, the second block
# stored in that new term, and sequences that only grow; etcd's
# /kvtier/<cluster>/events names each term's endpoints.
. "$(dirname "$0")/lib.sh"

it_deployment 256 64KiB
it_start

b_port=$(it_free_port)
"$KVTIER_BIN" coordinator -c "$it_dir/deployment.json" --etcd "$KVTIER_ETCD" --secret "$it_run/secret" \
  --name "standby-$it_name" --endpoint "tcp://127.0.0.1:$b_port" >"$it_dir/coord-b.log" 2>&1 &
echo $! >"$it_run/pids/coord-b.pid" # it_cleanup kills it with the rest

epoch_of() { it_cli status 2>/dev/null | awk '$1 == "leader" { gsub(/[()]/, "", $4); print $4 }'; }
e1=$(epoch_of)
[ -n "$e1" ] || it_fail "no leader epoch in kvtier status"
it_log "leader epoch $e1; standby B on port $b_port"

# the leader advertises its event endpoints in etcd too, under its lease
etcd_events() {
  ETCDCTL_API=3 etcdctl --endpoints "$KVTIER_ETCD" get "/kvtier/$it_name/events" --print-value-only
}
events_epoch_is() { etcd_events | /usr/bin/python3 -c 'import json,sys; sys.exit(json.load(sys.stdin)["epoch"] != int(sys.argv[1]))' "$1" 2>/dev/null; }
it_wait_until 20 events_epoch_is "$e1" || it_fail "etcd does not advertise the events of epoch $e1: $(etcd_events)"
ev_ep=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["events"]["endpoint"])' "$it_dir/deployment.json")
etcd_events | grep -q "\"endpoint\":\"$ev_ep\"" || it_fail "etcd's events record: $(etcd_events)"

# the process itself in the background (not it_cli's subshell): it gets the SIGTERM
"$KVTIER_BIN" events --coordinator "$KVTIER_COORDINATOR" --record "$it_dir/rec.jsonl" \
  --for 90000 >/dev/null 2>"$it_dir/events.err" &
ev_pid=$!
sleep 1 # its subscription reaches the publisher (ZeroMQ's slow joiner)

k1=$(printf 'e1%030x' $$)
k2=$(printf 'e2%030x' $$)
it_cli put --key "$k1" --pattern >/dev/null || it_fail "put $k1"
it_wait_until 20 grep -q "$k1" "$it_dir/rec.jsonl" || it_fail "the first put was not seen"

a_pid=$(cat "$it_run/pids/coordinator.pid")
it_log "killing the leader (coordinator A, pid $a_pid)"
kill -KILL "$a_pid"
new_epoch() {
  local e
  e=$(epoch_of)
  [ -n "$e" ] && [ "$e" -gt "$e1" ]
}
it_wait_until 60 new_epoch || it_fail "no new leader after the kill"
e2=$(epoch_of)
it_log "new leader, epoch $e2"
it_wait_until 60 it_cli put --key "$k2" --pattern >/dev/null || it_fail "put $k2 after the failover"
it_wait_until 20 events_epoch_is "$e2" || it_fail "etcd still advertises another term: $(etcd_events)"
it_wait_until 30 grep -q "$k2" "$it_dir/rec.jsonl" ||
  it_fail "the subscriber did not follow the new leader: $(cat "$it_dir/events.err")"
# A whole term the subscriber cannot see: it is stopped while the leader of e2 is
# killed (term e3 begins) and then e3's leader too (term e4); resumed, it reaches
# e4, whose LeaderChanged names e3 as the term before: it must say e3 was lost.
kill -STOP "$ev_pid"
leader_pid() { # the coordinator process that leads now: B's (by its endpoint) or A's
  local ep
  ep=$(it_cli status 2>/dev/null | awk '$1 == "leader" { print $2 }')
  if [ "$ep" = "tcp://127.0.0.1:$b_port" ]; then cat "$it_run/pids/coord-b.pid"; else cat "$it_run/pids/coordinator.pid"; fi
}
epoch_above() {
  local e
  e=$(epoch_of)
  [ -n "$e" ] && [ "$e" -gt "$1" ]
}
kill -KILL "$(leader_pid)"
it_wait_until 60 epoch_above "$e2" || it_fail "no term after $e2"
e3=$(epoch_of)
it_wait_until 20 events_epoch_is "$e3" || it_fail "term $e3 never started its publisher"
kill -KILL "$(leader_pid)"
it_wait_until 60 epoch_above "$e3" || it_fail "no term after $e3"
e4=$(epoch_of)
it_log "terms $e3 (unseen) and $e4; resuming the subscriber"
kill -CONT "$ev_pid"
it_wait_until 30 grep -q "\"leader_epoch\":$e4," "$it_dir/rec.jsonl" ||
  it_fail "the resumed subscriber did not reach term $e4: $(tail -n 3 "$it_dir/events.err")"
grep -q "term $e3 (after $e2, before $e4) is missing from this stream" "$it_dir/events.err" ||
  it_fail "kvtier events did not say term $e3 was lost: $(tail -n 4 "$it_dir/events.err")"
kill -TERM "$ev_pid"
wait "$ev_pid" || it_fail "kvtier events failed: $(cat "$it_dir/events.err")"
grep -q '^events: .*, 1 terms lost$' "$it_dir/events.err" ||
  it_fail "the summary does not count the lost term: $(tail -n 1 "$it_dir/events.err")"
cat "$it_dir/events.err"

/usr/bin/python3 - "$it_dir/rec.jsonl" "$k1" "$k2" "$e1" "$e2" <<'EOF' || it_fail "the recording does not show the failover"
import json, sys
rec, k1, k2, e1, e2 = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
lines = [json.loads(l) for l in open(rec)]
fail, last = [], 0
for l in lines:
    if l["seq"] < last:
        fail.append("seq %d after %d" % (l["seq"], last))
    last = l["seq"]
s1 = [l for l in lines if l["kind"] == "stored" and k1 in l["keys"]]
s2 = [l for l in lines if l["kind"] == "stored" and k2 in l["keys"]]
leaders = [l for l in lines if l["kind"] == "leader" and e1 < l["leader_epoch"] <= e2]
if not s1 or s1[0]["epoch"] != e1:
    fail.append("the first block is not stored in term %d: %s" % (e1, s1[:1]))
if not leaders:
    fail.append("no LeaderChanged of an epoch above %d" % e1)
elif not s2 or s2[0]["epoch"] != leaders[-1]["leader_epoch"]:
    fail.append("the second block is not stored in the new term: %s" % s2[:1])
elif leaders[-1]["seq"] != leaders[-1]["epoch"] << 40 | 1:
    fail.append("the new term's first batch is not its LeaderChanged: %s" % leaders[-1])
# each LeaderChanged names the term before it (etcd's /kvtier/<cluster>/term): the
# one recorded before it, since this recording lost no term
terms = sorted({l["epoch"] for l in lines if l["epoch"] <= e2})
for l in leaders:
    before = [t for t in terms if t < l["leader_epoch"]]
    if not before or l.get("previous_epoch") != before[-1]:
        fail.append("LeaderChanged of epoch %d names previous term %s, the recording's is %s" %
                    (l["leader_epoch"], l.get("previous_epoch"), before[-1:]))
print("recording: %d events, terms %s" % (len(lines), sorted({l["epoch"] for l in lines})))
if fail:
    print("\n".join(fail))
    sys.exit(1)
EOF
grep -q "following the new leader" "$it_dir/events.err" ||
  it_fail "kvtier events did not say it followed the new leader"
it_log "PASS"
