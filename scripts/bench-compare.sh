#!/usr/bin/env bash
# Benchmark of `rmqstore compare` over a generated master and a slave cut from a copy of it,
# next to `cmp` of the same commitlog files in the same run (cmp stops at the first byte that
# differs, where the slave's copy ends: the same common prefix compare proves record by record).
# The slave is the master's copy with its commitlog cut at a record boundary CUT_BYTES before the
# end of the data (the rest of that file zero, later files gone); its consume queues are left as
# they are (compare does not read them). Figures go to README.md by hand.
# Usage: scripts/bench-compare.sh [DIR] [OPERATIONS] [CUT_BYTES]
#        (default: a 2 GiB store of 2,000,000 operations, a slave 8 MiB behind;
#        BENCH_NO_BUILD=1 uses the release binary already built)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-${TMPDIR:-/tmp}/rmqstore-bench-compare}
n=${2:-2000000}
behind=${3:-8388608}
[ -n "${BENCH_NO_BUILD:-}" ] || cargo build --release --bins >/dev/null
bin=target/release/rmqstore
t() { /usr/bin/time -f "  %e s wall, %M KiB max RSS" "$@"; }
# peak anonymous memory (RssAnon, sampled every 20 ms): max RSS also counts mapped file pages
anon() {
  "$@" >/dev/null & local pid=$! peak=0 a
  while kill -0 $pid 2>/dev/null; do
    a=$(awk '/RssAnon/ {print $2}' /proc/$pid/status 2>/dev/null || true)
    [ -n "$a" ] && [ "$a" -gt "$peak" ] && peak=$a
    sleep 0.02
  done
  wait $pid || true
  echo "  peak anonymous memory ${peak} KiB: $*"
}
cold() { sync; if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches; echo "  (cold cache)"; fi; }
master=$dir/master
slave=$dir/slave
rm -rf "$dir"
mkdir -p "$dir"
echo "== gen $n operations into $master (default geometry: 1 GiB commitlog files)"
t $bin gen "$master" --messages "$n" >/dev/null
du -sh --apparent-size "$master/commitlog"
echo "== the slave: a copy cut $behind bytes before the end of the data, at a record boundary"
cp -r "$master" "$slave"
last=$(ls "$slave/commitlog" | tail -1)
end=$($bin dump commitlog "$master/commitlog/$last" --json --body none 2>/dev/null | tail -1 \
  | grep -o '"commitlog_offset":[0-9]*' | cut -d: -f2)
cut=$($bin dump commitlog "$master" --json --body none -o $((end > behind ? end - behind : 0)) -c 1 \
  2>/dev/null | grep -o '"commitlog_offset":[0-9]*' | cut -d: -f2)
for f in "$slave"/commitlog/*; do
  start=$((10#$(basename "$f")))
  size=$(stat -c %s "$f")
  if [ "$start" -ge "$cut" ]; then
    rm "$f"
  elif [ "$cut" -lt $((start + size)) ]; then
    truncate -s $((cut - start)) "$f"
    truncate -s "$size" "$f"
  fi
done
echo "  cut at commitlog offset $cut (the master's last record starts at $end)"
cmp_all() {
  for f in "$slave"/commitlog/*; do cmp "$master/commitlog/$(basename "$f")" "$f" >/dev/null || true; done
}
echo "== cmp of the slave's commitlog files with the master's, then compare --json: cold, then warm three times each"
cold
t bash -c "$(declare -f cmp_all); master='$master' slave='$slave' cmp_all"
cold
t sh -c "$bin compare '$master' '$slave' --json > '$dir/compare.jsonl'" || true
for _ in 1 2 3; do
  t bash -c "$(declare -f cmp_all); master='$master' slave='$slave' cmp_all"
  t sh -c "$bin compare '$master' '$slave' --json > '$dir/compare.jsonl'" || true
done
tail -1 "$dir/compare.jsonl" | cut -c1-400
echo "== compare --export (JSON Lines of the lost messages)"
t sh -c "$bin compare '$master' '$slave' --export '$dir/lost.jsonl' > /dev/null" || true
wc -l < "$dir/lost.jsonl"
anon $bin compare "$master" "$slave" --json
