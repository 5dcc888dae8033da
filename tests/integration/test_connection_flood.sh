#!/usr/bin/env bash
# issue 12 §3: "a bound on connections". libzmq accepts every connection, so each
# ROUTER closes at once any connection accepted while max_connections others are
# open (bus_server_set_max_connections). A raw peer (zmtp_flood.py conns) opens 200
# connections to the coordinator's meta endpoint (coordinator.max_connections 16) and
# to a tier's endpoint (tiers[i].max_connections 16): at most 16 stay, the others are
# closed, neither process holds more than 16 + a margin of new descriptors (a count,
# not a timing), a client connected before the flood keeps being answered, the
# refusals are logged, and once the flood ends new clients are served again.
. "$(dirname "$0")/lib.sh"

it_write_deployment <<'JSON'
{"coordinator": {"max_connections": 16},
 "tiers": [{"name": "host0", "kind": "host", "capacity": 256, "slot_size": "64KiB",
            "max_connections": 16}]}
JSON
it_start
fds() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
coord=$(it_pid coordinator)
tier=$(it_pid tier-host0)
tier_ep=$("$KVTIER_BIN" deployment -c "$it_dir/deployment.json" | awk '$1 == "tier" { print $4; exit }')
key=$(printf 'c1%030x' $$)
it_cli put --key "$key" --pattern >/dev/null || it_fail "put before the flood"

# a client connected before the flood: its lookups go on while the server is full
mkfifo "$it_dir/early.go"
KVTIER_COORDINATOR=$KVTIER_COORDINATOR it_python - "$it_dir/early.go" >"$it_dir/early.out" 2>&1 <<'PY' &
import os, sys
sys.path.insert(0, os.path.join(os.environ["KVT_SOURCE_DIR"], "client", "python"))
import kvtier
c = kvtier.Client(coordinators=os.environ["KVTIER_COORDINATOR"], name="early", timeout_ms=5000)
c.register_instance("early", 16, 64 << 10)
c.lookup("early", [b"\x01" * 16])
print("connected", flush=True)
with open(sys.argv[1]) as go:
    go.read()  # the flood is on
for _ in range(20):
    c.lookup("early", [b"\x02" * 16])
print("20 lookups during the flood", flush=True)
PY
early=$!
it_wait_until 30 grep -q connected "$it_dir/early.out" || it_fail "the early client: $(cat "$it_dir/early.out")"

flood() { # flood WHAT PID ENDPOINT
  local what=$1 pid=$2 hostport=${3#tcp://} before after
  before=$(fds "$pid")
  rm -f "$it_dir/flood.out"
  mkfifo "$it_dir/flood.hold"
  /usr/bin/python3 "$KVT_SOURCE_DIR/tests/integration/zmtp_flood.py" conns "${hostport%:*}" \
    "${hostport##*:}" 200 "$it_dir/flood.out" <"$it_dir/flood.hold" &
  local fl=$!
  exec 7>"$it_dir/flood.hold"
  it_wait_until 60 test -s "$it_dir/flood.out" || it_fail "the flood against the $what did not report"
  after=$(fds "$pid")
  local out
  out=$(cat "$it_dir/flood.out")
  it_log "$what: $out; descriptors $before -> $after"
  local kept=${out##*kept }
  [ "$kept" -le 16 ] || it_fail "the $what kept $kept connections (bound 16): $out"
  [ "$kept" -ge 8 ] || it_fail "the $what kept only $kept connections: $out"
  [ $((after - before)) -le 24 ] || it_fail "the $what holds $((after - before)) more descriptors"
  FLOOD_PID=$fl
}
flood coordinator "$coord" "$KVTIER_COORDINATOR"
echo go >"$it_dir/early.go"
wait "$early" || it_fail "the early client failed during the flood: $(cat "$it_dir/early.out")"
exec 7>&-
wait "$FLOOD_PID"
rm -f "$it_dir/flood.hold"
grep -Eq 'connection #1 refused: [0-9]+ are open, the bound is 16' "$it_run/logs/coordinator.log" ||
  it_fail "no refusal logged by the coordinator"

flood tier "$tier" "$tier_ep"
exec 7>&-
wait "$FLOOD_PID"
rm -f "$it_dir/flood.hold"
grep -q 'connection #1 refused' "$it_run/logs/tier-host0.log" || it_fail "no refusal logged by the tier"

# the flood is over: its connections are counted out, new clients are served
quiet_get() { it_cli get --key "$key" --verify >/dev/null 2>&1; }
it_wait_until 30 quiet_get ||
  it_fail "get after the floods"
it_cli put --key "$(printf 'c2%030x' $$)" --pattern >/dev/null || it_fail "put after the floods"
it_no_crash
it_log "PASS"
