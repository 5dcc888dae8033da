#!/usr/bin/env bash
# A tier kind from outside the tree (docs/ARCHITECTURE.md "Tiers": one shared object
# loaded by path): a deployment whose only tier is the test plug-in (the fake tier,
# tests/support/tier_fake.c, built as kvt_tier_fake.so) runs under the supervisor in
# a real tier process; blocks put through the CLI come back byte-exact, the status
# names the plug-in's kind, and a deployment naming a missing plug-in is refused
# with the loader's reason.
. "$(dirname "$0")/lib.sh"

: "${KVT_TIER_FAKE_SO:?KVT_TIER_FAKE_SO must name the fake tier plug-in}"

it_write_deployment <<JSON
{"tiers": [{"name": "fake0", "kind": "fake", "plugin": "$KVT_TIER_FAKE_SO",
            "capacity": 64, "slot_size": "64KiB", "max_bytes": 8388608}]}
JSON
it_start

it_cli status >"$it_dir/status.txt" || it_fail "status"
grep -q 'tier 1 fake0: kind fake, up' "$it_dir/status.txt" ||
  it_fail "status does not show the plug-in tier up: $(cat "$it_dir/status.txt")"

keys=()
for i in 1 2 3 4 5 6; do keys+=("$(printf 'c3%06d%024x' $$ "$i")"); done
for k in "${keys[@]}"; do
  head -c 65536 /dev/urandom >"$it_dir/$k.in"
  it_cli put --key "$k" --file "$it_dir/$k.in" --block-size 65536 >/dev/null ||
    it_fail "put $k into the plug-in tier"
done
for k in "${keys[@]}"; do
  it_cli get --key "$k" --out "$it_dir/$k.out" --block-size 65536 >/dev/null ||
    it_fail "get $k from the plug-in tier"
  cmp -s "$it_dir/$k.in" "$it_dir/$k.out" || it_fail "get $k: bytes differ from the put"
done
hits=$(it_cli lookup --mode per-key "${keys[@]}" | grep -c ' hit ' || true)
[ "$hits" -eq 6 ] || it_fail "expected 6 hits on the plug-in tier, got $hits"
it_no_crash

# A missing plug-in: the deployment is refused with the loader's reason and the key.
sed "s#$KVT_TIER_FAKE_SO#$it_dir/missing.so#" "$it_dir/deployment.json" >"$it_dir/bad.json"
rc=0
"$KVTIER_BIN" deployment -c "$it_dir/bad.json" >"$it_dir/bad.txt" 2>&1 || rc=$?
[ $rc -ne 0 ] || it_fail "a deployment with a missing plug-in was accepted"
grep -q 'tiers\[0\].plugin: tier plug-in .*missing.so: file not found' "$it_dir/bad.txt" ||
  it_fail "unexpected refusal: $(cat "$it_dir/bad.txt")"
it_log "ok: 6 blocks byte-exact through the plug-in tier"
