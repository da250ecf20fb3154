#!/usr/bin/env bash
# Benchmarks over a generated multi-GB store, each next to `cat commitlog/*` in the same run:
# gen, info, a CRC-checked parallel read, verify, dump --json (with and without bodies), rebuild, 1,000 key lookups, serve
# under load (1, 4, 16 consumers), the browser's time to first screen, and repair at scale (a flipped body bit in the middle of a
# 1 GiB commitlog file: verify, the dry run, repair --out, verify of the result, a cp of the same
# commitlog for scale, peak anonymous memory). Figures go to
# README.md by hand.
# Usage: scripts/bench.sh [DIR] [OPERATIONS]   (default: a 2 GiB store of 2,000,000 operations)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-${TMPDIR:-/tmp}/rmqstore-bench}
n=${2:-2000000}
cargo build --release --bins --examples >/dev/null
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
rm -rf "$dir" "$dir.rebuilt" "$dir.damaged" "$dir.damaged.repaired"
echo "== gen $n operations into $dir (default geometry: 1 GiB commitlog files)"
t $bin gen "$dir" --messages "$n"
du -sh --apparent-size "$dir/commitlog"
echo "== cat commitlog/* > /dev/null"
cold; t sh -c "cat '$dir'/commitlog/* > /dev/null"
t sh -c "cat '$dir'/commitlog/* > /dev/null"
echo "== read every record, CRC checked, files in parallel"
cold; target/release/examples/scan "$dir"
target/release/examples/scan "$dir"
echo "== verify (first run also reads the consume queues and index files into the page cache)"
t $bin verify "$dir" >/dev/null || true
echo "== verify warm, three runs, each next to a warm cat"
for _ in 1 2 3; do
  t sh -c "cat '$dir'/commitlog/* > /dev/null"
  t $bin verify "$dir" >/dev/null || true
done
echo "== dump commitlog --json (bodies, then --body none) and rebuild --out, each next to a warm cat"
for _ in 1 2 3; do
  t sh -c "cat '$dir'/commitlog/* > /dev/null"
  t sh -c "$bin dump commitlog '$dir' --json > /dev/null 2>&1"
  t sh -c "$bin dump commitlog '$dir' --json --body none > /dev/null 2>&1"
  t $bin rebuild "$dir" --out "$dir.rebuilt" >/dev/null
  rm -rf "$dir.rebuilt"
done
anon $bin dump commitlog "$dir" --json
anon $bin rebuild "$dir" --out "$dir.rebuilt"
rm -rf "$dir.rebuilt"
echo "== 1,000 key lookups"
target/release/examples/query_bench "$dir" 2>&1 | tail -3
echo "== serve: every user queue drained over loopback by 1, 4 and 16 consumers (maxMsgNums 32)"
cat "$dir"/commitlog/* > /dev/null
target/release/examples/serve_load "$dir" 1 4 16
echo "== info"
t $bin info "$dir" >/dev/null
echo "== tui: time to first screen"
cold; target/release/examples/tui_first_screen "$dir"
target/release/examples/tui_first_screen "$dir"
echo "== repair at scale: a flipped body bit at 512 MiB of the first 1 GiB commitlog file"
dmg="$dir.damaged"
rm -rf "$dmg" "$dmg.repaired"
cp -al "$dir" "$dmg"
first=$(ls "$dmg"/commitlog/* | head -1)
cp --sparse=always "$first" "$first.copy" && mv "$first.copy" "$first"
python3 - "$first" <<'PY'
import sys
with open(sys.argv[1], 'r+b') as f:
    f.seek(512 << 20); b = f.read(1); f.seek(512 << 20); f.write(bytes([b[0] ^ 0x10]))
PY
t sh -c "cat '$dmg'/commitlog/* > /dev/null"
t $bin verify "$dmg" >/dev/null || true
t $bin repair "$dmg" --dry-run >/dev/null
t $bin repair "$dmg" --out "$dmg.repaired"
t $bin verify "$dmg.repaired" >/dev/null
du -sh --apparent-size "$dmg.repaired"/repair-*/* | sed 's/^/  /'
echo "== what repair writes, for scale: cp of the commitlog (sparse) and sync"
t sh -c "cp -r --sparse=always '$dmg/commitlog' '$dmg.cp' && sync"
rm -rf "$dmg.cp" "$dmg.repaired"
echo "== peak anonymous memory: verify, dry run, repair --out"
anon $bin verify "$dmg"
anon $bin repair "$dmg" --dry-run
anon $bin repair "$dmg" --out "$dmg.repaired"
rm -rf "$dmg" "$dmg.repaired"
