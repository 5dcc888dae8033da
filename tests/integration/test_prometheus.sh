#!/usr/bin/env bash
# Issue 10 §2: a real Prometheus (Debian's prometheus 2.42) scrapes a running
# deployment found through the coordinator's http_sd list (/sd), scrape interval
# 1 s, its own free port and storage dir. After a short replay:
# - every target of /sd is up: the coordinator and each tier process, including a
#   tier process registered after Prometheus started (found through /sd);
# - kvtier_lookups_total, kvtier_lookup_hit_keys_total and the per-tier
#   kvtier_tier_hits_total equal what `kvtier status` reports, and the lookup
#   latency histogram counted every lookup;
# - `promtool check metrics` accepts every process's /metrics;
# - /healthz is 200, /readyz 200 with its reason, an unknown path 404.
. "$(dirname "$0")/lib.sh"

it_write_deployment <<'JSON'
{"tiers": [{"name": "host0", "kind": "host", "capacity": 2048, "slot_size": "64KiB"}],
 "metrics": {"refresh": "500ms", "sample_interval": "1s"}}
JSON
it_start

addr() { # KEY: a metrics address of the deployment file ($1 = coordinator | TIER)
  /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
k = sys.argv[2]
print(d["coordinator"]["metrics"] if k == "coordinator" else
      [t for t in d["tiers"] if t["name"] == k][0]["metrics"])' "$2" "$1"
}
coord=$(addr coordinator "$it_dir/deployment.json")
host0=$(addr host0 "$it_dir/deployment.json")
it_log "coordinator metrics on $coord, host0 on $host0"

code() { curl -s -o "$it_dir/body" -w '%{http_code}' "$1" || echo 000; }
[ "$(code "http://$coord/healthz")" = 200 ] || it_fail "/healthz: $(cat "$it_dir/body")"
it_wait_until 20 bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://$coord/readyz)\" = 200 ]" ||
  it_fail "coordinator /readyz: $(curl -s "http://$coord/readyz")"
grep -q '^ready: leader' <(curl -s "http://$coord/readyz") || it_fail "readyz reason"
it_wait_until 20 bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://$host0/readyz)\" = 200 ]" ||
  it_fail "host0 /readyz: $(curl -s "http://$host0/readyz")"
[ "$(code "http://$coord/nosuch")" = 404 ] || it_fail "an unknown path is not 404"

# Prometheus, on its own port and storage, discovering targets through /sd
prom_port=$(it_free_port)
mkdir -p "$it_dir/prom"
cat >"$it_dir/prometheus.yml" <<YAML
global: {scrape_interval: 1s, scrape_timeout: 900ms, evaluation_interval: 1s}
scrape_configs:
  - job_name: kvtier
    http_sd_configs:
      - url: http://$coord/sd
        refresh_interval: 1s
YAML
promtool check config "$it_dir/prometheus.yml" >/dev/null || it_fail "promtool check config"
prometheus --config.file="$it_dir/prometheus.yml" --storage.tsdb.path="$it_dir/prom" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$it_dir/prometheus.log" 2>&1 &
prom_pid=$!
echo "$prom_pid" >"$it_run/pids/prometheus.pid" # it_cleanup kills it (its args name $it_dir)

prom() { # QUERY -> JSON of /api/v1/query
  curl -s --max-time 5 --get "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1"
}
# a tier process registered after Prometheus started: same cluster, its own tier
/usr/bin/python3 - "$it_dir/deployment.json" "$it_dir/late.json" "$it_name" <<'EOF'
import json, os, socket, sys
sys.path.insert(0, os.path.join(os.environ["KVT_SOURCE_DIR"], "tests/integration")); import ports
src, dst, name = sys.argv[1:]
d = json.load(open(src))
def port():
    s = socket.socket(); ports.bind_free(s); p = s.getsockname()[1]; s.close(); return p
d["tiers"].append({"name": "late1", "kind": "host", "capacity": 64, "slot_size": "64KiB",
                   "endpoint": "tcp://127.0.0.1:%d" % port(), "metrics": "127.0.0.1:%d" % port(),
                   "shm": "/kvtier-%s-late1" % name, "prefault": False})
json.dump(d, open(dst, "w"))
EOF
it_shms+=("/kvtier-$it_name-late1")
it_wait_until 30 bash -c "curl -s http://127.0.0.1:$prom_port/-/ready | grep -q Ready" ||
  it_fail "prometheus not ready: $(cat "$it_dir/prometheus.log")"
"$KVTIER_BIN" tier -c "$it_dir/late.json" --name late1 --etcd "$KVTIER_ETCD" --secret "$it_run/secret" \
  >"$it_dir/late1.log" 2>&1 &
echo $! >"$it_run/pids/late1.pid"
late1=$(addr late1 "$it_dir/late.json")

rc=0
it_cli replay "$it_trace" --requests 150 --no-progress >"$it_dir/replay.txt" || rc=$?
cat "$it_dir/replay.txt"
[ $rc -eq 0 ] || it_fail "replay exited with status $rc"
it_cli status >"$it_dir/status.txt" || it_fail "status failed"
stat() { awk -v k="$1" '$1 == k { print $2 }' "$it_dir/status.txt"; }
lookups=$(stat lookups) hits=$(stat hits) tier_hits=$(stat tier.host0.hits)
it_log "kvtier status: lookups $lookups, hits $hits, tier.host0.hits $tier_hits"
[ "${lookups:-0}" -gt 0 ] && [ "${tier_hits:-0}" -gt 0 ] || it_fail "no lookups or hits to compare"

value() { # QUERY -> the single result's value, "" when none
  prom "$1" | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if len(r) == 1 else "")' 2>/dev/null || true
}
# figures: Prometheus scrapes a copy at most refresh (500 ms) + 1 s old
check_figures() {
  [ "$(value 'kvtier_lookups_total')" = "$lookups" ] &&
    [ "$(value 'kvtier_lookup_hit_keys_total')" = "$hits" ] &&
    [ "$(value 'kvtier_tier_hits_total{tier="host0"}')" = "$tier_hits" ] &&
    [ "$(value 'kvtier_meta_request_duration_seconds_count{call="lookup"}')" = "$lookups" ]
}
it_wait_until 30 check_figures || it_fail "Prometheus has lookups $(value kvtier_lookups_total), \
hits $(value kvtier_lookup_hit_keys_total), host0 hits $(value 'kvtier_tier_hits_total{tier="host0"}'), \
lookup latency count $(value 'kvtier_meta_request_duration_seconds_count{call="lookup"}'); \
kvtier status: $lookups, $hits, $tier_hits"

# every target discovered through /sd is up, the late tier among them
targets_up() {
  prom 'up{job="kvtier"}' | /usr/bin/python3 -c '
import json, sys
want = set(sys.argv[1:])
r = json.load(sys.stdin)["data"]["result"]
up = {x["metric"]["instance"]: x["value"][1] for x in r}
sys.exit(0 if want <= set(up) and all(v == "1" for v in up.values()) else 1)' "$coord" "$host0" "$late1"
}
it_wait_until 30 targets_up || it_fail "targets: $(prom 'up{job="kvtier"}')"
[ "$(value 'kvtier_leader{job="kvtier"}')" = 1 ] || it_fail "kvtier_leader is not 1"
[ "$(value 'kvtier_tier_actor_up{tier="late1"}')" = 1 ] || it_fail "late1 not scraped"
it_log "targets by role: $(prom 'count by (kvtier_role) (up{job="kvtier"})')"

for a in "$coord" "$host0" "$late1"; do
  curl -s "http://$a/metrics" >"$it_dir/m.txt" || it_fail "GET $a/metrics"
  out=$(promtool check metrics <"$it_dir/m.txt" 2>&1) || it_fail "promtool check metrics ($a): $out"
  [ -z "$out" ] || it_fail "promtool lint ($a): $out"
done
it_no_crash
it_log "PASS: lookups $lookups, hits $hits, host0 hits $tier_hits"
late_pid=$(cat "$it_run/pids/late1.pid")
kill -TERM "$prom_pid" "$late_pid" 2>/dev/null || true
it_wait_gone "$prom_pid" 10 || true
it_wait_gone "$late_pid" 10 || true
