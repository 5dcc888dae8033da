#!/usr/bin/env bash
# issue 4 §6 (first case): "A workload larger than the host tier: nothing is lost while
# the NVMe tier has room; every load is byte-exact; blocks come back up on reuse."
#
# A deployment host0 (CHAIN_HOST slots) -> nvme0 (CHAIN_NVME slots, a file in the
# test's temp dir) under deploy/supervise, the reclaimer on its defaults (host0 ahead,
# 97% / 94%; nvme0, the last tier, on demand).
# 1. `kvtier replay` of the first CHAIN_REQUESTS trace requests stores about 2,000
#    distinct blocks: several times the host tier, under the nvme tier's
#    capacity. Every store succeeds (a full host answers BUSY and the client
#    retries), no block is evicted, blocks were demoted, every load is byte-exact.
# 2. The same requests again: every block hits (nothing lost), nothing is stored,
#    every load is byte-exact; hits below the head were promoted before their load
#    (blocks come back up on reuse).
# 3. The same requests with --no-promote: all hit again, loaded where they are.
. "$(dirname "$0")/lib.sh"

CHAIN_HOST=256
CHAIN_NVME=4096      # above the ~2,000 distinct blocks stored
CHAIN_SLOT=64KiB
CHAIN_REQUESTS=80    # 2,021 distinct blocks (traces/synthetic_trace.jsonl)
nvme_file=$it_dir/nvme0.dat

it_write_deployment <<JSON
{"tiers": [
  {"name": "host0", "kind": "host", "capacity": $CHAIN_HOST, "slot_size": "$CHAIN_SLOT"},
  {"name": "nvme0", "kind": "nvme", "capacity": $CHAIN_NVME, "slot_size": "$CHAIN_SLOT",
   "path": "$nvme_file"}]}
JSON

# counter NAME: a scheduler counter from `kvtier status`.
counter() { it_cli status | awk -v n="$1" '$1 == n { print $2; exit }'; }
# tier_hits FILE NAME: the report's "tier NAME: N hits".
tier_hits() { sed -n "s/^tier $2: \([0-9]*\) hits$/\1/p" "$1"; }

# replay FILE ARGS...: the first CHAIN_REQUESTS requests; no failed request, no
# failed call, no wrong bytes, no load or store that failed.
replay() {
  local out=$1 rc=0
  shift
  it_cli replay "$it_trace" --requests $CHAIN_REQUESTS --no-progress "$@" >"$out" || rc=$?
  [ $rc -eq 0 ] || it_fail "replay exited with status $rc: $(cat "$out")"
  grep -q "^requests  *$CHAIN_REQUESTS replayed, 0 failed$" "$out" || it_fail "failed requests: $(cat "$out")"
  grep -q '^failures  *0 hits not granted, 0 loads failed, 0 stores failed, 0 verify failures$' "$out" ||
    it_fail "failed or wrong blocks: $(cat "$out")"
  grep -q '^errors  *0 failed calls$' "$out" || it_fail "failed calls: $(cat "$out")"
  [ "$(it_replay_field "$out" 5)" = 0 ] || it_fail "wrong bytes: $(cat "$out")"
}

it_start
it_cli status --check >/dev/null || it_fail "status --check failed on a ready deployment"

# ---- 1. more than the host tier holds ----------------------------------------------
replay "$it_dir/pass1.txt"
stored=$(sed -n 's/^blocks .*, \([0-9]*\) stored, .*$/\1/p' "$it_dir/pass1.txt")
it_log "pass 1: $stored blocks stored; $(grep '^tier ' "$it_dir/pass1.txt" | tr '\n' ' ')"
[ "$stored" -gt $((3 * CHAIN_HOST)) ] || it_fail "only $stored blocks stored: not larger than the host tier"
[ "$(counter evictions)" = 0 ] || it_fail "blocks were evicted (dropped): $(counter evictions)"
[ "$(counter demoted)" -gt 0 ] || it_fail "nothing was demoted"
blocks=$(counter blocks)
it_log "after pass 1: $blocks blocks indexed, $(counter demoted) demoted, $(counter put_busy) puts told BUSY, $(counter room_demotions) demoted on demand"

# ---- 2. again: nothing lost, blocks come back up -----------------------------------
replay "$it_dir/pass2.txt"
hit=$(it_replay_field "$it_dir/pass2.txt" 2)
[ "$hit" = 100.0 ] || it_fail "pass 2: hit rate $hit%, not every block stored is there: $(cat "$it_dir/pass2.txt")"
grep -q '^blocks .*, 0 stored, 0 already stored$' "$it_dir/pass2.txt" ||
  it_fail "pass 2 stored blocks again: $(cat "$it_dir/pass2.txt")"
promoted=$(sed -n 's/^promotion  *\([0-9]*\) hits copied up.*$/\1/p' "$it_dir/pass2.txt")
[ "${promoted:-0}" -gt 0 ] || it_fail "pass 2 promoted nothing: $(cat "$it_dir/pass2.txt")"
[ "$(tier_hits "$it_dir/pass2.txt" nvme0)" -gt 0 ] || it_fail "pass 2: no hit on nvme0"
[ "$(counter prefetch_committed)" -gt 0 ] || it_fail "no prefetch committed"
[ "$(counter evictions)" = 0 ] || it_fail "blocks were evicted (dropped) in pass 2"
it_log "pass 2: hit rate $hit%, $promoted hits promoted; $(grep '^tier ' "$it_dir/pass2.txt" | tr '\n' ' ')"

# ---- 3. and loaded where they are ---------------------------------------------------
replay "$it_dir/pass3.txt" --no-promote
hit=$(it_replay_field "$it_dir/pass3.txt" 2)
[ "$hit" = 100.0 ] || it_fail "pass 3: hit rate $hit%: $(cat "$it_dir/pass3.txt")"
it_log "pass 3 (--no-promote): hit rate $hit%; $(grep '^tier ' "$it_dir/pass3.txt" | tr '\n' ' ')"
it_no_crash
it_log PASS
