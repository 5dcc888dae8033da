#!/usr/bin/env bash
# failover_replay.sh — issue 9 §7 under replay load (report, never a gate; root).
#
#   KVTIER_BIN=build/bin/kvtier KVT_SOURCE_DIR=. tools/bench/failover_replay.sh [KILLS] [LEASE] [TIMEOUT_MS]
#
# Three hosts as network namespaces, a three-member etcd and a supervisor per host,
# exactly as ./deploy/run --hosts 3 (deploy/hosts.sh): coordinators c1..c3, host0 on
# h1, remote2/remote3 on h2/h3, lease LEASE (default 1s). `kvtier replay` of the
# synthetic trace runs from h1 without pause (one replay after another, 4 in flight,
# 4 KiB blocks, call timeout TIMEOUT_MS, default 1000), each with a timeline (--log).
# KILLS times (default 20): once all three coordinators are registered again, kill -9
# of the leader; its supervisor restarts it. Per kill, from the timelines:
#   to first call   the kill -> the first call a leader of a higher epoch served
#                   (kvt_leader_epoch after a call that succeeded)
#   to recovery     the kill -> the first request that ended ok at or after that call
# Prints every sample, then
#   failover: N kills under replay, lease L, call timeout T ms: kill -> first call p50 X ms, p99 Y ms, max Z ms; kill -> recovery p50 X ms, p99 Y ms, max Z ms; F requests failed
set -euo pipefail
: "${KVTIER_BIN:?KVTIER_BIN must name the kvtier executable}"
: "${KVT_SOURCE_DIR:?KVT_SOURCE_DIR must name the repository}"
kills=${1:-20}
lease=${2:-1s}
timeout_ms=${3:-1000}
. "$KVT_SOURCE_DIR/deploy/hosts.sh"
say() { printf '[%s failover_replay] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
[ "$(id -u)" = 0 ] && hosts_can_netns || { say "needs root and network namespaces"; exit 2; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/kvt-fo-replay-XXXXXX")
cluster=forep$$
sup=() loop_pid=""
stop() {
  local p
  trap - EXIT INT TERM
  touch "$dir/stop"
  [ -z "$loop_pid" ] || wait "$loop_pid" 2>/dev/null || true
  for p in "${sup[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${sup[@]}"; do wait "$p" 2>/dev/null || true; done
  hosts_cleanup
  rm -f "/dev/shm/kvtier-$cluster-host0"
  say "logs kept in $dir"
}
trap stop EXIT
trap 'exit 130' INT TERM

hosts_create 3 || exit 1
hosts_etcd_init "$dir" "$cluster"
for m in 1 2 3; do hosts_etcd_start "$m"; done
deadline=$((SECONDS + 30))
until hosts_etcd_healthy; do [ $SECONDS -lt $deadline ] || { say "etcd did not start"; exit 1; }; sleep 0.2; done
"$KVTIER_BIN" keygen --secret "$dir/secret" >/dev/null
hosts_deployment "$dir/deployment.json" "$cluster" "$dir/secret" "$lease" 8192 32768 4KiB
for i in 1 2 3; do
  hosts_exec "$i" "$KVT_SOURCE_DIR/deploy/supervise" "$dir/deployment.json" --host "h$i" \
    --etcd "$HOSTS_ETCD_URLS" --run-dir "$dir/h$i" --kvtier "$KVTIER_BIN" >"$dir/supervise-h$i.log" 2>&1 &
  sup+=($!)
done
for i in 1 2 3; do
  deadline=$((SECONDS + 120))
  until [ -f "$dir/h$i/ready" ]; do [ $SECONDS -lt $deadline ] || { say "h$i not ready"; exit 1; }; sleep 0.2; done
done
. "$dir/h1/ready"

# the load: replays back to back until told to stop
(
  n=0
  while [ ! -e "$dir/stop" ]; do
    n=$((n + 1))
    hosts_exec 1 env KVTIER_HOST=h1 "$KVTIER_BIN" replay "$KVT_SOURCE_DIR/traces/synthetic_trace.jsonl" \
      --coordinator "$KVTIER_COORDINATOR" --cluster "$cluster" --instance fo-bench --block-size 4KiB \
      --tokens-per-block 16 --timeout "$timeout_ms" --no-progress --log "$dir/timeline-$n.txt" \
      >"$dir/replay-$n.txt" 2>"$dir/replay-$n.err" || true
  done
) &
loop_pid=$!
timelines() { { cat "$dir"/timeline-*.txt 2>/dev/null || true; } | sort -n -k2,2; }
ends() { { cat "$dir"/timeline-*.txt 2>/dev/null || true; } | awk '$1 == "end" { n++ } END { print n + 0 }'; }
registered() {
  ETCDCTL_API=3 etcdctl --endpoints "$HOSTS_ETCD_URLS" get --prefix "/kvtier/$cluster/coordinators/" --keys-only 2>/dev/null |
    grep -c . || true
}
first=() recov=()
for k in $(seq 1 "$kills"); do
  deadline=$((SECONDS + 90))
  until [ "$(registered)" -ge 3 ]; do [ $SECONDS -lt $deadline ] || { say "a coordinator is not back"; exit 1; }; sleep 0.2; done
  e0=$(ends)
  deadline=$((SECONDS + 60))
  until [ "$(ends)" -ge $((e0 + 50)) ]; do [ $SECONDS -lt $deadline ] || { say "the replay does not progress"; exit 1; }; sleep 0.1; done
  read -r old old_epoch < <(hosts_leader "$HOSTS_ETCD_URLS" "$cluster")
  pid=$(cat "$dir/h${old#c}/pids/coordinator-$old.pid")
  t_kill=$(date +%s%3N)
  kill -KILL "$pid"
  sample() {
    timelines | awk -v t="$t_kill" -v e="$old_epoch" '
      $1 == "leader" && $3 > e && lt == "" { lt = $2 }
      $1 == "end" && $4 == "ok" && lt != "" && $2 >= lt && rt == "" { rt = $2 }
      END { if (lt == "" || rt == "") exit 1; print lt - t, rt - t }'
  }
  deadline=$((SECONDS + 60))
  until s=$(sample); do [ $SECONDS -lt $deadline ] || { say "kill $k: no recovery in 60 s"; exit 1; }; sleep 0.2; done
  read -r a b <<<"$s"
  first+=("$a") recov+=("$b")
  say "kill $k: $old (epoch $old_epoch) killed; first call at a new leader after $a ms, replay recovered after $b ms"
done
touch "$dir/stop"
wait "$loop_pid" 2>/dev/null || true
loop_pid=""
failed=$(cat "$dir"/replay-*.txt | sed -n 's/^requests  *[0-9]* replayed, \([0-9]*\) failed.*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
verify=$(cat "$dir"/replay-*.txt | sed -n 's/^replay: .*verify failures \([0-9]*\)$/\1/p' | awk '{ s += $1 } END { print s + 0 }')
pct() { # nearest rank
  sort -n | awk '{ v[NR] = $1 } END {
    r50 = int(NR * 0.50); if (r50 < NR * 0.50) r50++
    r99 = int(NR * 0.99); if (r99 < NR * 0.99) r99++
    printf "p50 %d ms, p99 %d ms, max %d ms", v[r50], v[r99], v[NR] }'
}
echo "failover: $kills kills under replay, lease $lease, call timeout $timeout_ms ms:" \
  "kill -> first call $(printf '%s\n' "${first[@]}" | pct);" \
  "kill -> recovery $(printf '%s\n' "${recov[@]}" | pct); $failed requests failed, $verify verify failures"
