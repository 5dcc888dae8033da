#!/usr/bin/env bash
# issue 12 §2 (and §1's isolation): an authenticated, encrypted bus (docs/SECURITY.md).
# A deployment with security.curve (auto: deploy/supervise makes the process pairs)
# and security.curve.instances granting alice tenant-a and bob tenant-b runs under
# deploy/supervise; its readiness check itself goes over CURVE.
# 1. alice (kvtier CLI, --no-shm: the block travels over the tier plane) puts and gets
#    a block of tenant-a byte-exact; the Python binding (curve_cert /
#    curve_server_key) stores and verifies blocks as bob in tenant-b.
# 2. events: carol (granted "*") reads the leader's ring over the replay socket and
#    the live stream over the XPUB, both CURVE; alice (granted tenant-a only) is
#    refused, naming her key and the rule, and her raw subscription receives nothing
#    while carol's receives batches (the streams carry every instance's events).
# 3. isolation: alice can neither look up nor get tenant-b's blocks
#    (PERMISSION_DENIED naming tenant-b and her key); bob still sees them.
# 4. refused: a client without keys and one with a key not admitted get no answer
#    (their handshake fails: TIMEOUT), nothing crashes; a secret file others can read
#    is refused with what to do.
. "$(dirname "$0")/lib.sh"
: "${KVTIER_LIB:?KVTIER_LIB must name libkvtier.so}"

keys=$it_dir/keys
users=$it_dir/users
mkdir -p "$keys/clients"
chmod 700 "$keys" "$keys/clients"
for u in alice bob carol mallory; do
  "$KVTIER_BIN" keygen --out "$users" --name "$u" >/dev/null || it_fail "keygen $u"
done
cp "$users/alice.key" "$users/bob.key" "$users/carol.key" "$keys/clients/" # mallory is never admitted

it_write_deployment <<JSON
{"tiers": [{"name": "host0", "kind": "host", "capacity": 256, "slot_size": "64KiB"}],
 "security": {"curve": {"keys": "$keys", "auto": true,
   "instances": {"tenant-a": ["alice"], "tenant-b": ["bob"], "*": ["carol"]}}}}
JSON
it_start
[ -f "$keys/server.key_secret" ] && [ -f "$keys/coordinator.key_secret" ] &&
  [ -f "$keys/host0.key_secret" ] || it_fail "the supervisor did not make the process pairs"
[ -f "$keys/clients/host0.key" ] || it_fail "the tier's public key was not admitted"
sk=(--server-key "$keys/server.key")
as() { # as USER CMD ARGS...: the CLI with USER's pair
  local u=$1 cmd=$2
  shift 2
  "$KVTIER_BIN" "$cmd" --coordinator "$KVTIER_COORDINATOR" --cert "$users/$u.key" "${sk[@]}" "$@"
}
KA=00112233445566778899aabbccddeeff

# ---- 1. listed clients work end to end ------------------------------------------------
as alice put --instance tenant-a --key $KA --pattern --no-shm >"$it_dir/put.txt" 2>&1 ||
  it_fail "alice's put failed: $(cat "$it_dir/put.txt")"
as alice get --instance tenant-a --key $KA --verify --no-shm >"$it_dir/get.txt" 2>&1 ||
  it_fail "alice's get failed: $(cat "$it_dir/get.txt")"
it_log "alice: put and get of tenant-a over CURVE (meta and tier planes)"
bob_py() {
  KVTIER_COORDINATOR=$KVTIER_COORDINATOR IT_INSTANCE=tenant-b IT_CURVE_CERT=$users/bob.key \
    IT_CURVE_SERVER_KEY=$keys/server.key it_python "$KVT_SOURCE_DIR/tests/integration/it_client.py" "$@"
}
bob_py store b 0 8 >/dev/null || it_fail "bob's store (Python binding) failed"
bob_py verify b 0 8 >/dev/null || it_fail "bob's blocks do not verify"
it_log "bob: 8 blocks of tenant-b stored and verified through the Python binding"

# ---- 2. events over CURVE -------------------------------------------------------------
as carol events --from 0 --for 1500 >"$it_dir/ev-from.txt" 2>"$it_dir/ev-from.err" ||
  it_fail "kvtier events --from (replay socket) failed: $(cat "$it_dir/ev-from.err")"
grep -q "\"stored\"" "$it_dir/ev-from.txt" || it_fail "no stored event replayed: $(head -c 600 "$it_dir/ev-from.txt")"
alice_pub=$(awk -F'"' '/public-key/ { print $2 }' "$users/alice.key")
for mode in live from; do # alice: refused on the replay socket, with the reason
  args=(--for 1500); [ $mode = from ] && args+=(--from 0)
  if as alice events "${args[@]}" >"$it_dir/a-ev-$mode.txt" 2>"$it_dir/a-ev-$mode.err"; then
    it_fail "alice read the event streams ($mode): $(cat "$it_dir/a-ev-$mode.err")"
  fi
  grep -q 'permission denied' "$it_dir/a-ev-$mode.err" && grep -qF -e "$alice_pub" "$it_dir/a-ev-$mode.err" &&
    grep -q 'security.curve.instances' "$it_dir/a-ev-$mode.err" ||
    it_fail "alice's refusal ($mode) does not say why: $(cat "$it_dir/a-ev-$mode.err")"
  [ ! -s "$it_dir/a-ev-$mode.txt" ] || it_fail "alice got events ($mode): $(head -c 300 "$it_dir/a-ev-$mode.txt")"
done
ev_ep=$(as carol status | awk '$1 == "events" { print $2; exit }')
[ -n "$ev_ep" ] || it_fail "no events line in kvtier status: $(as carol status)"
# the raw XPUB: alice's subscription (no replay socket to ask) is dropped, carol's served
as alice events --endpoint "$ev_ep" --for 8000 --topic stored/ >"$it_dir/a-ev-raw.txt" 2>"$it_dir/a-ev-raw.err" &
a_pid=$!
as carol events --endpoint "$ev_ep" --for 20000 --count 1 --topic stored/ >"$it_dir/ev-live.txt" 2>"$it_dir/ev-live.err" &
ev_pid=$!
sleep 1 # both subscribed
i=0
while kill -0 $ev_pid 2>/dev/null && [ $i -lt 100 ]; do # puts until carol has one
  as alice put --instance tenant-a --key "$(printf 'ee%030x' $i)" --pattern >/dev/null 2>&1 ||
    it_fail "put $i failed"
  i=$((i + 1))
  sleep 0.2
done
wait $ev_pid || it_fail "kvtier events (live) failed: $(cat "$it_dir/ev-live.err")"
grep -q '^events: 1 batches' "$it_dir/ev-live.err" || it_fail "no live batch: $(cat "$it_dir/ev-live.err")"
wait $a_pid || true
grep -q '^events: 0 batches' "$it_dir/a-ev-raw.err" && [ ! -s "$it_dir/a-ev-raw.txt" ] ||
  it_fail "alice's raw subscription received events: $(cat "$it_dir/a-ev-raw.err"; head -c 300 "$it_dir/a-ev-raw.txt")"
# logged once per 1,000 refusals, the first whichever it was (a replay request or a subscription)
grep -Eq '(subscription|replay request) refused: key .* is not granted' "$it_run"/logs/coordinator*.log ||
  it_fail "the publisher did not log the refusal"
it_log "events: carol (\"*\") reads replay and live stream over CURVE; alice refused (replay: named; XPUB: nothing)"

# ---- 3. isolation by key --------------------------------------------------------------
kb=$(/usr/bin/python3 -c 'import hashlib; print(hashlib.sha256(b"b/0").digest()[:16].hex())')
as bob lookup --instance tenant-b --mode per-key "$kb" >"$it_dir/bob-lookup.txt" 2>&1 ||
  it_fail "bob's lookup failed: $(cat "$it_dir/bob-lookup.txt")"
if as alice lookup --instance tenant-b --mode per-key "$kb" >"$it_dir/a-lookup.txt" 2>&1; then
  it_fail "alice looked up tenant-b: $(cat "$it_dir/a-lookup.txt")"
fi
grep -q PERMISSION_DENIED "$it_dir/a-lookup.txt" && grep -q '"tenant-b"' "$it_dir/a-lookup.txt" &&
  grep -qF -e "$alice_pub" "$it_dir/a-lookup.txt" ||
  it_fail "alice's refusal does not name the status, instance and key: $(cat "$it_dir/a-lookup.txt")"
if as alice get --instance tenant-b --key "$kb" --verify >"$it_dir/a-get.txt" 2>&1; then
  it_fail "alice read tenant-b's block"
fi
grep -q PERMISSION_DENIED "$it_dir/a-get.txt" || it_fail "alice's get: $(cat "$it_dir/a-get.txt")"
bob_py verify b 0 8 >/dev/null || it_fail "bob's blocks were damaged"
it_log "isolation: alice refused tenant-b (lookup and get), bob's blocks intact"

# ---- 4. unauthenticated and unknown peers ---------------------------------------------
if "$KVTIER_BIN" status --coordinator "$KVTIER_COORDINATOR" --timeout 1500 >"$it_dir/nokey.txt" 2>&1; then
  it_fail "a client without keys was answered"
fi
grep -q TIMEOUT "$it_dir/nokey.txt" || it_fail "no-key client: $(cat "$it_dir/nokey.txt")"
if as mallory status --timeout 1500 >"$it_dir/mallory.txt" 2>&1; then
  it_fail "a client with a key not admitted was answered"
fi
grep -q TIMEOUT "$it_dir/mallory.txt" || it_fail "unknown key: $(cat "$it_dir/mallory.txt")"
chmod 644 "$users/alice.key_secret"
if as alice status >"$it_dir/perm.txt" 2>&1; then it_fail "a readable secret was used"; fi
grep -q "chmod 600" "$it_dir/perm.txt" || it_fail "readable secret: $(cat "$it_dir/perm.txt")"
chmod 600 "$users/alice.key_secret"
as alice get --instance tenant-a --key $KA --verify --no-shm >/dev/null 2>&1 ||
  it_fail "alice's block is gone after the refused peers"
it_no_crash
it_log "refused: no key (TIMEOUT), unknown key (TIMEOUT), readable secret (named); service intact"
# the tier's Inventory (every instance's keys) is served to the coordinators' key
# only (and "*" keys; actors/tier_actor_auth.c): the leader read it at tier up
grep -q 'blocks adopted from its inventory' "$it_run"/logs/coordinator*.log ||
  it_fail "the coordinator did not read the tier's inventory: $(grep -h inventory "$it_run"/logs/coordinator*.log | tail -n 3)"
! grep -q 'Inventory refused' "$it_run"/logs/tier-*.log ||
  it_fail "a tier refused an Inventory: $(grep -h 'Inventory refused' "$it_run"/logs/tier-*.log | head -n 2)"
it_log "the tier's inventory: read by the coordinator (its key allowed), no refusal"
