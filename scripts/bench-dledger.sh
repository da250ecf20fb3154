#!/usr/bin/env bash
# Benchmark of the read commands on a DLedger-mode store against a normal-mode store of the same
# messages (`gen` and `gen --dledger` with the same seed and operations), next to `cat` of each
# store's data files in the same run. Each command runs once to warm the page cache, then three
# times; the table gives the fastest wall and CPU times of the three. Figures go to README.md by
# hand. `SKIP_GEN=1` times the stores already in DIR.
# Usage: scripts/bench-dledger.sh [DIR] [OPERATIONS]
#        (default: 2,000,000 operations, about 2 GiB of data at the default geometry: 1 GiB
#        data files; BENCH_NO_BUILD=1 uses the release binary already built)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-${TMPDIR:-/tmp}/rmqstore-bench-dledger}
n=${2:-2000000}
[ -n "${BENCH_NO_BUILD:-}" ] || cargo build --release --bins >/dev/null
bin=$PWD/target/release/rmqstore
normal=$dir/normal
dledger=$dir/dledger
if [ -z "${SKIP_GEN:-}" ]; then
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "== gen $n operations, normal mode and DLedger mode"
  /usr/bin/time -f "  normal: %e s" $bin gen "$normal" --messages "$n" >/dev/null
  /usr/bin/time -f "  dledger: %e s" $bin gen "$dledger" --messages "$n" --dledger >/dev/null
fi
du -s --block-size=1 "$normal/commitlog" "$dledger/dledger-n0/data"
# fastest wall time and fastest CPU time (user + system) of three runs, after one warm-up run,
# of a shell command: "wall cpu"; the CPU time is the steadier figure on a busy machine
best() {
  local bw=1e9 bc=1e9 w c
  sh -c "$1" >/dev/null 2>&1 || true
  for _ in 1 2 3; do
    /usr/bin/time -o "$dir/time" -f "%e %U %S" sh -c "$1" >/dev/null 2>&1 || true
    read -r w c < <(tail -1 "$dir/time" | awk '{print $1, $2 + $3}')
    bw=$(echo "$w $bw" | awk '{print ($1 < $2 ? $1 : $2)}')
    bc=$(echo "$c $bc" | awk '{print ($1 < $2 ? $1 : $2)}')
  done
  echo "$bw $bc"
}
row() {
  local name=$1 a b
  read -r aw ac < <(best "$2")
  read -r bw bc < <(best "$3")
  printf "| %s | %.2f / %.2f | %.2f / %.2f | %s / %s |\n" "$name" "$aw" "$ac" "$bw" "$bc" \
    "$(echo "$aw $bw" | awk '{printf "%+.0f%%", ($2 / $1 - 1) * 100}')" \
    "$(echo "$ac $bc" | awk '{printf "%+.0f%%", ($2 / ($1 > 0 ? $1 : 1) - 1) * 100}')"
}
echo
echo "load average before the runs: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| command (warm cache, best of 3: wall s / CPU s) | normal | DLedger | DLedger vs normal |"
echo "|---|---|---|---|"
row "cat of the data files" "cat $normal/commitlog/* > /dev/null" "cat $dledger/dledger-n0/data/* > /dev/null"
row "verify" "$bin verify $normal" "$bin verify $dledger"
row "rebuild --out" "rm -rf $dir/rn; $bin rebuild $normal --out $dir/rn" "rm -rf $dir/rd; $bin rebuild $dledger --out $dir/rd"
row "dump commitlog --body none" "$bin dump commitlog $normal --body none" "$bin dump commitlog $dledger --body none"
