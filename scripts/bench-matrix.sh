#!/usr/bin/env bash
# The TPC-B matrix of issue 6: TPS and latency for -c 1, 4 and 16 at scale 10 (data larger
# than a 64 MiB pool) and scale 1 (fits), synchronous_commit on and off; load times for
# scale 10 and 100; and, in the same run, the machine's raw fdatasync rate (8 KiB write +
# fdatasync in a loop), so synchronous figures can be read against the device's limit.
#
# Usage: scripts/bench-matrix.sh [SECONDS_PER_RUN=20] [WORKDIR=./bufpool-data/matrix]
# Prints a Markdown table on stdout; progress on stderr. Needs a release build:
#   cargo build --release -p pgbufpool-bench
set -euo pipefail
secs="${1:-20}"
work="${2:-bufpool-data/matrix}"
bin="$(cd "$(dirname "$0")/.." && pwd)/target/release/bufpool"
[ -x "$bin" ] || { echo "build first: cargo build --release -p pgbufpool-bench" >&2; exit 2; }
mkdir -p "$work"
work="$(cd "$work" && pwd)"

raw_fdatasync() {
  python3 - "$work/raw_fdatasync.dat" <<'PY'
import os, sys, time
p = sys.argv[1]
fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 16 << 20); os.fsync(fd)
page = b"\x07" * 8192
n, t0 = 0, time.monotonic()
while time.monotonic() - t0 < 3.0:
    os.pwrite(fd, page, (n * 8192) % (16 << 20)); os.fdatasync(fd); n += 1
print(f"{n / (time.monotonic() - t0):.0f}")
os.close(fd); os.unlink(p)
PY
}

load() { # scale -> seconds
  local s=$1 d="$work/s$1"
  rm -rf "$d"
  local t0 t1; t0=$(date +%s%N)
  "$bin" init -s "$s" -D "$d" --set shared_buffers=64MB >/dev/null 2>&1
  t1=$(date +%s%N)
  local ms=$(( (t1 - t0) / 1000000 ))
  printf '%d.%03d' $((ms / 1000)) $((ms % 1000))
}

echo "raw fdatasync..." >&2
raw=$(raw_fdatasync)
echo "loading scale 100..." >&2
load100=$(load 100); rm -rf "$work/s100"
echo "loading scale 10..." >&2
load10=$(load 10)
echo "loading scale 1..." >&2
load1=$(load 1)

echo "| scale | pool | sync | clients | tps | lat avg ms | p95 ms | p99 ms | max ms | failed |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for s in 10 1; do
  for sync in on off; do
    for c in 1 4 16; do
      echo "scale $s sync $sync -c $c..." >&2
      j=$("$bin" bench -D "$work/s$s" -c "$c" -T "$secs" --json \
            --set shared_buffers=64MB --set synchronous_commit=$sync 2>/dev/null)
      python3 - "$s" "$sync" "$c" <<PY
import json, sys
d = json.loads('''$j''')
l = d["latency_ms"]
print(f"| {sys.argv[1]} | 64MB | {sys.argv[2]} | {sys.argv[3]} | {d['tps']:.0f} | {l['avg']:.3f} | {l['p95']:.3f} | {l['p99']:.3f} | {l['max']:.1f} | {d['failed']} |")
PY
    done
  done
done
echo
echo "load time (init, release): scale 1 ${load1} s, scale 10 ${load10} s, scale 100 ${load100} s"
echo "raw fdatasync (8 KiB write + fdatasync, one writer, same file system): ${raw}/s"
