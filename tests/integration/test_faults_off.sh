#!/usr/bin/env bash
# issue 12 §6: "off by default (only when the config enables it ...)": a deployment
# without faults.enabled has no fault admin socket in any process, so every
# `kvtier fault` command is refused with a message that says how to enable them;
# a deployment that lists faults without enabling them is refused at the start.
. "$(dirname "$0")/lib.sh"

# a list of faults without faults.enabled: the file is refused, naming the key
cp "$KVT_SOURCE_DIR/deploy/default.json" "$it_dir/listed.json"
/usr/bin/python3 - "$it_dir/listed.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["faults"] = {"points": [{"point": "nvme.read", "action": "flip", "rate": "1/10"}]}
json.dump(d, open(sys.argv[1], "w"))
PY
rc=0
out=$("$KVTIER_BIN" deployment -c "$it_dir/listed.json" 2>&1) || rc=$?
[ $rc -ne 0 ] && [[ $out == *"faults.points: faults are listed but faults.enabled is not true"* ]] ||
  it_fail "a deployment listing faults it does not enable was accepted (exit $rc): $out"

it_deployment 256 64KiB
it_start
k=$(printf 'f0%06d%024x' $$ 1)
it_cli put --key "$k" --pattern >/dev/null || it_fail "put"
for p in coordinator tier-host0; do
  for cmd in show "set nvme.read flip 1/10" clear; do
    rc=0
    # shellcheck disable=SC2086  # the command's words
    out=$("$KVTIER_BIN" fault --run-dir "$it_run" --process $p $cmd 2>&1) || rc=$?
    [ $rc -eq 1 ] || it_fail "kvtier fault --process $p $cmd: exit $rc, expected 1: $out"
    [[ $out == *"faults are off in its config (faults.enabled is not true)"* ]] ||
      it_fail "kvtier fault --process $p $cmd: unclear refusal: $out"
  done
done
it_log "refused: $out"
[ ! -e "$it_run/faults" ] || it_fail "a fault socket directory exists with faults off"
it_cli get --key "$k" --verify >/dev/null || it_fail "get"
it_no_crash
it_log "PASS"
