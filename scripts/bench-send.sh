#!/usr/bin/env bash
# Benchmark of `rmqstore send`: a generated store of OPERATIONS producer operations (default
# 1,000,000: about 1.05M records of 1 KiB on average, 1 GiB of commitlog) sent to a local
# rocketmq-rust name server and broker (the programs `.ci/run` installs in $RMQSTORE_PEERS/bin,
# started with the configs tests/all/common/cluster.rs writes), next to `cat` of the store's
# commitlog in the same run. Two sends, each to a fresh broker: the default (a batch holds
# messages born in the same millisecond, so every message keeps its born time) and
# --loose-born-time (batches of up to 256 messages). For each: messages/s, MB/s (of the source
# records sent), send's CPU (user + sys, /usr/bin/time -v) against its wall time, and the
# broker's CPU over the same time (/proc/<pid>/stat). Figures go to README.md by hand.
# Usage: scripts/bench-send.sh [DIR] [OPERATIONS]
#        (BENCH_NO_BUILD=1 uses the release binary already built; BENCH_LOOSE_ONLY=1 skips the
#        default send, which takes about 11 minutes for 1M messages; NAMESRV_PORT, BROKER_PORT and
#        HA_PORT choose the ports, default 39876, 30911 and 30912; the broker also listens on
#        BROKER_PORT - 2)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-${TMPDIR:-/tmp}/rmqstore-bench-send}
n=${2:-1000000}
ns_port=${NAMESRV_PORT:-39876}
broker_port=${BROKER_PORT:-30911}
ha_port=${HA_PORT:-30912}
peers=${RMQSTORE_PEERS:-$HOME/.cache/rmqstore-peers}/bin
[ -n "${BENCH_NO_BUILD:-}" ] || cargo build --release --bins >/dev/null
bin=$PWD/target/release/rmqstore
tck=$(getconf CLK_TCK)
for p in rocketmq-namesrv-rust rocketmq-broker-rust; do
  [ -x "$peers/$p" ] || { echo "no $peers/$p (.ci/run installs it)" >&2; exit 2; }
done

# --- the cluster: a name server and one broker, TLS off, store and logs under $1 -------------
ns_pid= broker_pid=
start_cluster() {
  local home=$1
  mkdir -p "$home/namesrv" "$home/broker/auth"
  cat > "$home/namesrv/namesrv.toml" <<EOF
rocketmqHome = "$home/namesrv"
kvConfigPath = "$home/namesrv/kvConfig.json"
configStorePath = "$home/namesrv/namesrv.properties"
tls.server.mode = "disabled"
EOF
  cat > "$home/broker/broker.toml" <<EOF
[broker]
listenPort = $broker_port
brokerIp1 = "127.0.0.1"
storePathRootDir = "$home/broker/store"
namesrvAddr = "127.0.0.1:$ns_port"
autoCreateTopicEnable = true
authenticationEnabled = false
authorizationEnabled = false
authConfigPath = "$home/broker/auth"
aclFile = ""

[broker.brokerIdentity]
brokerName = "broker-a"
brokerClusterName = "DefaultCluster"
brokerId = 0

[broker.brokerServerConfig]
bindAddress = "127.0.0.1"

[broker.brokerServerConfig.tlsConfig.server]
mode = "disabled"

[store]
storePathRootDir = "$home/broker/store"
haListenAddress = "127.0.0.1"
haListenPort = $ha_port
mappedFileSizeCommitLog = 134217728
EOF
  HOME=$home/namesrv ROCKETMQ_HOME=$home/namesrv RUST_LOG=warn "$peers/rocketmq-namesrv-rust" \
    -c "$home/namesrv/namesrv.toml" --listenPort "$ns_port" --bindAddress 127.0.0.1 \
    </dev/null >"$home/namesrv.log" 2>&1 &
  ns_pid=$!
  HOME=$home/broker ROCKETMQ_HOME=$home/broker RUST_LOG=warn "$peers/rocketmq-broker-rust" \
    -c "$home/broker/broker.toml" -n "127.0.0.1:$ns_port" </dev/null >"$home/broker.log" 2>&1 &
  broker_pid=$!
  # registered once the name server routes TBW102 (the broker's auto-creation topic): a dry run
  # of a few messages renamed to it finds no topic missing
  for _ in $(seq 100); do
    if "$bin" send "$store" --dry-run --json --namesrv "127.0.0.1:$ns_port" --topic OrderTopic \
      --queue 0 --end 100000 --topic-map OrderTopic=TBW102 --journal "$home/probe" 2>/dev/null |
      tail -1 | grep -q '"missing_topics":\[\],"unchecked":null'; then
      return
    fi
    sleep 0.2
  done
  echo "the broker did not register; see $home/*.log" >&2
  exit 2
}
stop_cluster() {
  for p in $broker_pid $ns_pid; do kill "$p" 2>/dev/null || true; done
  for p in $broker_pid $ns_pid; do wait "$p" 2>/dev/null || true; done
  ns_pid= broker_pid=
}
trap stop_cluster EXIT
# utime + stime of a process, in clock ticks
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

store=$dir/store
rm -rf "$dir"
mkdir -p "$dir"
echo "== gen $n operations into $store"
/usr/bin/time -f "  %e s wall" "$bin" gen "$store" --messages "$n" --json | tee "$dir/gen.json" |
  grep -o '"records":[0-9]*,"bytes":[0-9]*' | sed 's/^/  /'
records=$(grep -o '"records":[0-9]*' "$dir/gen.json" | cut -d: -f2)
bytes=$(grep -o '"bytes":[0-9]*' "$dir/gen.json" | cut -d: -f2)
echo "== cat commitlog/* > /dev/null (warm, the baseline)"
cat "$store"/commitlog/* >/dev/null
/usr/bin/time -f "  %e s wall, %U s user, %S s sys" sh -c "cat '$store'/commitlog/* > /dev/null"

# send_run NAME [ARGS]: a fresh cluster, one send, its figures
send_run() {
  local name=$1
  shift
  local home=$dir/cluster-$name
  start_cluster "$home"
  local before
  before=$(ticks "$broker_pid")
  /usr/bin/time -v -o "$dir/time-$name" "$bin" send "$store" --namesrv "127.0.0.1:$ns_port" \
    --journal "$dir/journal-$name" --create-topics --deliver-now "$@" >"$dir/send-$name.out"
  local after
  after=$(ticks "$broker_pid")
  stop_cluster
  local sent batches wall user sys rss
  sent=$(grep -o '^sent [0-9]*' "$dir/send-$name.out" | cut -d' ' -f2)
  batches=$(grep -o '[0-9]* batch(es)' "$dir/send-$name.out" | cut -d' ' -f1)
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0;
    for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s}' "$dir/time-$name")
  user=$(awk -F': ' '/User time/ {print $2}' "$dir/time-$name")
  sys=$(awk -F': ' '/System time/ {print $2}' "$dir/time-$name")
  rss=$(awk -F': ' '/Maximum resident/ {print $2}' "$dir/time-$name")
  awk -v name="$name" -v sent="$sent" -v batches="$batches" -v wall="$wall" -v user="$user" \
    -v sys="$sys" -v rss="$rss" -v bt=$((after - before)) -v tck="$tck" -v records="$records" \
    -v bytes="$bytes" 'BEGIN {
      mb = bytes * sent / records / 1e6; cpu = user + sys; b = bt / tck
      printf "  %s: %d messages in %d batches, %.1f s wall: %.0f messages/s, %.1f MB/s\n",
        name, sent, batches, wall, sent / wall, mb / wall
      printf "    send CPU %.1f s (user %.1f, sys %.1f) = %.0f%% of one core; max RSS %d KiB\n",
        cpu, user, sys, 100 * cpu / wall, rss
      printf "    broker CPU %.1f s = %.0f%% of one core\n", b, 100 * b / wall
    }'
  rm -rf "$home"
}
if [ -z "${BENCH_LOOSE_ONLY:-}" ]; then
  echo "== send, born times kept (the default: a batch holds messages born in the same ms)"
  send_run default
fi
echo "== send --loose-born-time (batches of up to 256 messages)"
send_run loose --loose-born-time
