#!/usr/bin/env bash
# Benchmarks over a generated multi-GB store: generating it, `info`, and a CRC-checked parallel
# read of the whole commitlog (cold and warm page cache when run as root).
# Usage: scripts/bench.sh [DIR] [MESSAGES]   (default: a 2 GiB store of 2,000,000 operations)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-${TMPDIR:-/tmp}/rmqstore-bench}
n=${2:-2000000}
cargo build --release --example scan >/dev/null
bin=target/release/rmqstore
rm -rf "$dir"
echo "== gen $n operations into $dir (default geometry: 1 GiB commitlog files)"
/usr/bin/time -f "%e s wall, %M KiB max RSS" $bin gen "$dir" --messages "$n"
du -sh --apparent-size "$dir/commitlog"
echo "== info"
/usr/bin/time -f "%e s wall, %M KiB max RSS" $bin info "$dir" >/dev/null
echo "== read the whole commitlog (CRC checked, files in parallel)"
sync
if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches; echo "(cold cache)"; fi
target/release/examples/scan "$dir"
echo "(warm cache)"
target/release/examples/scan "$dir"
