#!/usr/bin/env bash
# Seed 002's own experiment-2 comparison: PostgreSQL 16's multixact SLRU sizes (16 offset,
# 32 member pages) with the central design (the seed's "Head") against the banked design at
# the seed's larger sizes (64/128), and central at 64/128, at 128 clients of
# `bench -b multixact` beside `--side-script long-running`; 3 repeats interleaved, a fresh
# copy of a scale-10 template per run. Prints tps and multixact page reads per transaction.
#
# Usage: scripts/slru-exp2-sizes.sh [WORKDIR]   (release binary built first; ~2 minutes)
set -euo pipefail
B="$(cd "$(dirname "$0")/.." && pwd)/target/release/bufpool"
W="${1:-$(mktemp -d)}"
[ -x "$B" ] || { echo "build first: cargo build --release" >&2; exit 1; }
if [ ! -d "$W/template" ]; then
  "$B" init -s 10 -D "$W/template" --set shared_buffers=64MB >/dev/null 2>&1
fi
for rep in 1 2 3; do
  for cfg in "central 16 32" "banks_locks_lru 64 128" "central 64 128"; do
    set -- $cfg
    rm -rf "$W/run"; cp -r "$W/template" "$W/run"
    out=$("$B" bench -D "$W/run" -b multixact -c 128 -j 2 -T 10 --side-script long-running \
      --set slru_design="$1" --set multixact_offset_buffers="$2" --set multixact_member_buffers="$3" \
      --set checkpoint_timeout=300s --set log_checkpoints=off --json 2>/dev/null |
      python3 -c "import json,sys; d=json.load(sys.stdin); s={x['name']:x for x in d['slru']}; print(round(d['tps']), round((s['multixact_offset']['blks_read']+s['multixact_member']['blks_read'])/d['transactions'],2))")
    echo "repeat $rep  $1 $2/$3  tps reads/txn: $out"
  done
done
rm -rf "$W/run"
