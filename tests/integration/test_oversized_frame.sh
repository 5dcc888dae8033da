#!/usr/bin/env bash
# issue 12 §3 / the list at its top: "ZMQ_MAXMSGSIZE is set after bind, so it has no
# effect, and the scheduler's ROUTER sets none: one 1 GiB frame grew a tier process and
# the coordinator by 1 GB each and stalled the coordinator". A raw ZMTP peer
# (zmtp_flood.py) sends one 1 GiB message to the coordinator's meta endpoint and to
# the tier's endpoint: each drops the connection at the frame's header, neither
# process's resident memory grows by more than 64 MiB (a memory bound, not a timing
# one), and the service keeps serving puts and gets.
. "$(dirname "$0")/lib.sh"

it_deployment 256 64KiB
it_start
rss_kb() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$1/status"; }
coord=$(it_pid coordinator)
tier=$(it_pid tier-host0)
tier_ep=$("$KVTIER_BIN" deployment -c "$it_dir/deployment.json" | awk '$1 == "tier" { print $4; exit }')
key=$(printf 'b1%030x' $$)
it_cli put --key "$key" --pattern >/dev/null || it_fail "put before"

for target in "coordinator $coord $KVTIER_COORDINATOR" "tier $tier $tier_ep"; do
  read -r what pid ep <<<"$target"
  hostport=${ep#tcp://}
  before=$(rss_kb "$pid")
  out=$(/usr/bin/python3 "$KVT_SOURCE_DIR/tests/integration/zmtp_flood.py" big "${hostport%:*}" "${hostport##*:}" 1024) ||
    it_fail "zmtp_flood against the $what failed"
  after=$(rss_kb "$pid")
  it_log "$what: $out; RSS $before kB -> $after kB"
  [[ $out == *"dropped: yes" ]] || it_fail "the $what kept a 1 GiB frame's connection: $out"
  [ $((after - before)) -lt $((64 << 10)) ] || it_fail "the $what grew by $((after - before)) kB"
done
it_cli get --key "$key" --verify >/dev/null || it_fail "get after the floods"
it_cli put --key "$(printf 'b2%030x' $$)" --pattern >/dev/null || it_fail "put after the floods"
it_cli status --check --cluster "$it_name" >/dev/null || it_fail "not ready after the floods"
it_no_crash
it_log "PASS"
