#!/usr/bin/env bash
# issue 12 §1: "a token-less WriteSlots with epoch 0 sent to a tier actor overwrites any
# block ... CopySlots names its destination endpoint itself". A real deployment
# (supervise on its default secret handling: it makes RUN/secret and passes it on),
# a block stored and read back through the real client, then a hostile process speaks
# the tier plane raw (python3-zmq, protoc-generated classes): token-less WriteSlots,
# DeleteSlots and PutHeader with epoch 0 over every slot, a junk token, and CopySlots to
# a listener of its own. Every request is refused PERMISSION_DENIED, nothing reaches
# the listener, and the block still reads back byte-exact. Then: a tier process given a
# group-readable secret or none does not start, naming why.
. "$(dirname "$0")/lib.sh"

it_write_deployment <<'JSON'
{"tiers": [{"name": "host0", "kind": "host", "capacity": 16, "slot_size": "64KiB"},
           {"name": "host1", "kind": "host", "capacity": 16, "slot_size": "64KiB"}]}
JSON
it_start

[ "$(stat -c %a "$it_run/secret")" = 600 ] || it_fail "supervise's secret is not mode 600"
key=$(printf 'c3%06d%024x' $$ 1)
it_cli put --key "$key" --pattern >/dev/null || it_fail "put $key"
it_cli get --key "$key" --verify >/dev/null || it_fail "get $key"

py=$it_dir/py
mkdir -p "$py"
protoc -I"$KVT_SOURCE_DIR/schemas" --python_out="$py" "$KVT_SOURCE_DIR"/schemas/*.proto ||
  it_fail "protoc"
/usr/bin/python3 - "$py" "$it_dir/deployment.json" >"$it_dir/hostile.json" <<'PY' ||
import json, sys, zmq
sys.path.insert(0, sys.argv[1])
import envelope_pb2, common_pb2
dep = json.load(open(sys.argv[2]))
tiers = {t["name"]: t for t in dep["tiers"]}
ctx = zmq.Context()
corr = [0]

def call(ep, fill, payload=()):
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(ep)
    env = envelope_pb2.Envelope(version=1, sender="hostile")
    corr[0] += 1
    env.corr_id = corr[0]
    fill(env)
    s.send_multipart([env.SerializeToString()] + list(payload))
    if not s.poll(5000):
        raise SystemExit("no reply from %s" % ep)
    rep = envelope_pb2.Envelope()
    rep.ParseFromString(s.recv_multipart()[0])
    s.close()
    return rep.status.code, rep.status.message

out = {"write": [], "delete": [], "header": [], "junk": [], "copy": [], "trap": 0}
garbage = bytes([0x5A]) * 65536
src = tiers["host0"]
trap = ctx.socket(zmq.ROUTER)
trap_ep = "tcp://127.0.0.1:%d" % trap.bind_to_random_port("tcp://127.0.0.1")

def write(env, slot, token=b""):
    r = env.write_slots_req
    r.tier_id, r.epoch, r.segments = 1, 0, 1
    r.slots.append(slot)
    r.sizes.append(len(garbage))
    r.token = token

def delete(env, slot):
    env.delete_slots_req.tier_id = 1
    env.delete_slots_req.slots.append(slot)

def header(env, slot):
    r = env.put_header_req
    r.tier_id, r.state = 1, common_pb2.LOCATION_SERVING
    r.slots.append(slot)
    r.keys.append(bytes(16))
    r.sizes.append(16)

def copy(env, slot):
    r = env.copy_slots_req
    r.tier_id, r.dst_tier_id, r.dst_endpoint = 1, 2, trap_ep
    r.dst_state = common_pb2.LOCATION_SERVING
    r.slots.append(slot)
    r.dst_slots.append(slot)
    r.keys.append(bytes(16))

junk = b"KVT1" + bytes(64)
for slot in range(src["capacity"]):
    out["write"].append(call(src["endpoint"], lambda e: write(e, slot), [garbage]))
    out["junk"].append(call(src["endpoint"], lambda e: write(e, slot, junk), [garbage]))
    out["delete"].append(call(src["endpoint"], lambda e: delete(e, slot)))
    out["header"].append(call(src["endpoint"], lambda e: header(e, slot)))
    out["copy"].append(call(src["endpoint"], lambda e: copy(e, slot)))
if trap.poll(1000):
    out["trap"] = len(trap.recv_multipart())
json.dump(out, sys.stdout)
PY
  it_fail "the hostile client did not finish: $(cat "$it_dir/hostile.json")"

/usr/bin/python3 - "$it_dir/hostile.json" <<'PY' || it_fail "a hostile request was not refused (see above)"
import json, sys
out = json.load(open(sys.argv[1]))
kinds = ("write", "junk", "delete", "header", "copy")
bad = 0
for kind in kinds:
    for code, msg in out[kind]:
        if code != 12:  # STATUS_PERMISSION_DENIED
            print("%s answered %d: %s" % (kind, code, msg), file=sys.stderr)
            bad += 1
if out["trap"]:
    print("the listener named by CopySlots received %d frames" % out["trap"], file=sys.stderr)
    bad += 1
print("refused: %s; e.g. %s" % ({k: len(out[k]) for k in kinds}, out["write"][0][1]),
      file=sys.stderr)
sys.exit(1 if bad else 0)
PY

it_cli get --key "$key" --verify >/dev/null || it_fail "the stored block changed after the hostile requests"
it_cli status --check >/dev/null || it_fail "the deployment is not healthy after the hostile requests"
it_no_crash

# A secret anyone else can read, or none: the tier process does not start.
etcd=$(. "$it_run/ready" && echo "$KVTIER_ETCD")
cp "$it_run/secret" "$it_dir/open-secret"
chmod 644 "$it_dir/open-secret"
rc=0
"$KVTIER_BIN" tier -c "$it_dir/deployment.json" --name host1 --etcd "$etcd" \
  --secret "$it_dir/open-secret" >"$it_dir/open.log" 2>&1 || rc=$?
[ $rc -eq 2 ] || it_fail "tier with a mode 644 secret: exit $rc, expected 2"
grep -q "$it_dir/open-secret: mode 0644 lets group or others reach it" "$it_dir/open.log" ||
  it_fail "no message naming the open secret: $(cat "$it_dir/open.log")"
rc=0
"$KVTIER_BIN" tier -c "$it_dir/deployment.json" --name host1 --etcd "$etcd" \
  >"$it_dir/none.log" 2>&1 || rc=$?
[ $rc -eq 2 ] || it_fail "tier without a secret: exit $rc, expected 2"
grep -q "no cluster secret" "$it_dir/none.log" || it_fail "no message: $(cat "$it_dir/none.log")"
it_log "PASS"
