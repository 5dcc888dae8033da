#!/usr/bin/env bash
# issue 12 §2: "etcd over TLS with client certificates when configured"
# (docs/SECURITY.md "etcd"). A CA, a server certificate for 127.0.0.1 and a client
# certificate are made with openssl; etcd serves https only and demands client
# certificates (--client-cert-auth). A deployment naming it with etcd.tls runs under
# deploy/supervise: the coordinator is elected and the tier registers through etcd
# over TLS (ready); a block goes in and out; `kvtier status` finds the leader through
# etcd with -c (the file's certificates) and fails, naming the TLS problem, without
# them; so does libkvtier with its own files (kvt_options etcd_*_file); a deployment with a certificate but no key is refused naming the key.
. "$(dirname "$0")/lib.sh"

pki=$it_dir/pki
mkdir -p "$pki"
(
  cd "$pki"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=kvtier-test-ca \
    -keyout ca.key -out ca.crt
  printf 'subjectAltName=IP:127.0.0.1\n' >san.ext
  for who in server client; do
    openssl req -newkey rsa:2048 -nodes -subj "/CN=kvtier-$who" -keyout $who.key -out $who.csr
    openssl x509 -req -in $who.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
      -extfile san.ext -out $who.crt
  done
  chmod 600 ./*.key
) >"$it_dir/openssl.log" 2>&1 || it_fail "openssl: $(tail -5 "$it_dir/openssl.log")"

cport=$(it_free_port)
pport=$(it_free_port)
url=https://127.0.0.1:$cport
/usr/bin/etcd --name=tls-etcd --data-dir="$it_dir/etcd" \
  --listen-client-urls="$url" --advertise-client-urls="$url" \
  --listen-peer-urls="http://127.0.0.1:$pport" --initial-advertise-peer-urls="http://127.0.0.1:$pport" \
  --initial-cluster="tls-etcd=http://127.0.0.1:$pport" \
  --cert-file="$pki/server.crt" --key-file="$pki/server.key" \
  --client-cert-auth --trusted-ca-file="$pki/ca.crt" \
  --heartbeat-interval=10 --election-timeout=100 --logger=zap --log-outputs=stderr \
  >"$it_dir/etcd.log" 2>&1 &
etcd_pid=$!
# stopped before lib.sh's cleanup (the supervisor clears its pids dir, so not there)
trap 'rc=$?; set +e; kill -TERM $etcd_pid 2>/dev/null; it_wait_gone $etcd_pid 10 || kill -KILL $etcd_pid 2>/dev/null; (exit $rc); it_cleanup' EXIT
healthy() {
  curl -sf --cacert "$pki/ca.crt" --cert "$pki/client.crt" --key "$pki/client.key" "$url/health" |
    grep -q '"health":"true"'
}
it_wait_until 30 healthy || it_fail "etcd over TLS not healthy: $(tail -5 "$it_dir/etcd.log")"
curl -s --cacert "$pki/ca.crt" "$url/health" >/dev/null 2>&1 &&
  it_fail "etcd answered a client without a certificate (the test needs --client-cert-auth)"

it_write_deployment <<JSON
{"tiers": [{"name": "host0", "kind": "host", "capacity": 64, "slot_size": "64KiB"}],
 "optimizer": {"enabled": false}}
JSON
/usr/bin/python3 - "$it_dir/deployment.json" "$url" "$pki" <<'PY'
import json, sys
path, url, pki = sys.argv[1:]
d = json.load(open(path))
d["etcd"]["endpoints"] = [url]
d["etcd"]["tls"] = {"ca": pki + "/ca.crt", "cert": pki + "/client.crt", "key": pki + "/client.key"}
json.dump(d, open(path, "w"), indent=2)
PY
it_start
it_cli put --key 00112233445566778899aabbccddeeff --pattern >/dev/null || it_fail "put failed"
it_cli get --key 00112233445566778899aabbccddeeff --verify >/dev/null || it_fail "get failed"
it_log "elected and registered through etcd over TLS with client certificates; a block in and out"

"$KVTIER_BIN" status --etcd "$url" --cluster "$it_name" -c "$it_dir/deployment.json" \
  >"$it_dir/status.txt" 2>&1 || it_fail "status through etcd with -c: $(cat "$it_dir/status.txt")"
if "$KVTIER_BIN" status --etcd "$url" --cluster "$it_name" --timeout 2000 >"$it_dir/nocert.txt" 2>&1; then
  it_fail "status through etcd without certificates worked"
fi
grep -Eiq 'ssl|tls|certificate' "$it_dir/nocert.txt" ||
  it_fail "the failure does not name TLS: $(cat "$it_dir/nocert.txt")"
it_log "status through etcd: works with the file's certificates, refused without"

# libkvtier finds the leader through etcd over TLS with its own files (kvt_options
# etcd_*_file, the Python binding's etcd_*_file): works with them, refused without a
# certificate (UNAVAILABLE naming etcd), and a certificate without its key or an
# unreadable file is INVALID_ARGUMENT at connect, naming it
it_python - "$url" "$it_name" "$pki" >"$it_dir/client.txt" 2>&1 <<'PY' ||
import os, sys
sys.path.insert(0, os.path.join(os.environ["KVT_SOURCE_DIR"], "client", "python"))
import kvtier
url, cluster, pki = sys.argv[1:]
files = dict(etcd_ca_file=pki + "/ca.crt", etcd_cert_file=pki + "/client.crt",
             etcd_key_file=pki + "/client.key")
with kvtier.Client(etcd_endpoints=url, cluster=cluster, name="tls-client", **files) as c:
    c.register_instance("tls", 16, 64 << 10)
    c.lookup("tls", [b"\x01" * 16])
    print("discovered through etcd over TLS:", c.cluster_info()["leader_endpoint"])
def refused(why, **kw):
    try:
        kvtier.Client(etcd_endpoints=url, cluster=cluster, timeout_ms=2000, **kw).close()
    except kvtier.KvtError as e:
        print("refused (%s): %s" % (why, e))
        return e
    sys.exit("connected " + why)
e = refused("no certificate", etcd_ca_file=pki + "/ca.crt")
# etcd drops the handshake: OpenSSL's alert, or (TLS 1.3) a connection closed under it
assert e.code == kvtier.UNAVAILABLE and "etcd https://" in str(e), e
e = refused("cert without key", etcd_ca_file=pki + "/ca.crt", etcd_cert_file=pki + "/client.crt")
assert e.code == kvtier.INVALID_ARGUMENT and "key" in str(e), e
e = refused("unreadable ca", etcd_ca_file=pki + "/missing.crt")
assert e.code == kvtier.INVALID_ARGUMENT and "missing.crt" in str(e), e
PY
  it_fail "libkvtier through etcd over TLS: $(cat "$it_dir/client.txt")"
it_log "$(cat "$it_dir/client.txt")"

/usr/bin/python3 - "$it_dir/deployment.json" "$it_dir/bad.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
del d["etcd"]["tls"]["key"]
json.dump(d, open(sys.argv[2], "w"))
PY
if "$KVTIER_BIN" deployment -c "$it_dir/bad.json" >"$it_dir/bad.txt" 2>&1; then
  it_fail "a certificate without its key was accepted"
fi
grep -q 'etcd.tls.key: missing' "$it_dir/bad.txt" || it_fail "bad tls: $(cat "$it_dir/bad.txt")"
it_no_crash
it_log "etcd.tls with a cert but no key refused naming etcd.tls.key"
