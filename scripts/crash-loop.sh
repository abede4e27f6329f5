#!/usr/bin/env bash
# Kill loop through the real binary (issue 11): `bufpool bench` (TPC-B, 4 clients,
# synchronous commit; every other round with the savepoint-overflow side script) on one
# database, SIGKILLed at a random moment, N times; after each
# kill the database is reopened (crash recovery) by `bufpool check`, which verifies the
# TPC-B invariants, every key against its heap, every page checksum, and that every
# transaction the clients acknowledged (a line of the --ack-log, written after its commit
# returned) is in pgbench_history. 0 lost is the only pass.
#
# Usage: scripts/crash-loop.sh N [--release]
#   N          kills (CI runs 20)
#   --release  use a release build (faster; for long soaks)
# Env: BUFPOOL_BIN=path uses that binary; CRASH_LOOP_DIR=path keeps the work there;
#      CRASH_LOOP_FRESH_EVERY=K starts a new database every K kills (a long soak's check
#      then reads at most K rounds of history instead of all of them);
#      CRASH_LOOP_WORKLOAD=tpcc kills TPC-C instead (one warehouse, a 32 MB pool so pages
#      are written and evicted, 30 s checkpoints; its B-tree inserts log shifts): each
#      reopen's `check` must find consistency conditions 1-4, every key and every page
#      sound (TPC-C acknowledges nothing, so there is no --acked list).
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:?usage: scripts/crash-loop.sh N [--release]}"
profile=debug
if [ "${2:-}" = "--release" ]; then profile=release; fi
if [ -n "${BUFPOOL_BIN:-}" ]; then
  bin="$BUFPOOL_BIN"
else
  if [ "$profile" = release ]; then cargo build -q --release -p pgbufpool-bench; else cargo build -q -p pgbufpool-bench; fi
  bin="$PWD/target/$profile/bufpool"
fi
work="${CRASH_LOOP_DIR:-$(mktemp -d)}"
mkdir -p "$work"
if [ -z "${CRASH_LOOP_DIR:-}" ]; then trap 'rm -rf "$work"' EXIT; fi
cd "$work"
fresh_every="${CRASH_LOOP_FRESH_EVERY:-0}"
workload="${CRASH_LOOP_WORKLOAD:-tpcb}"
case "$workload" in tpcb | tpcc) ;; *) echo "CRASH_LOOP_WORKLOAD must be tpcb or tpcc"; exit 2 ;; esac
fresh() {
  rm -rf db ack.* bench.* check.*
  if [ "$workload" = tpcc ]; then
    "$bin" init --workload tpcc -w 1 -D db --set shared_buffers=32MB --set checkpoint_timeout=30s > init.log 2>&1 || { cat init.log; exit 1; }
  else
    "$bin" init -s 1 -D db > init.log 2>&1 || { cat init.log; exit 1; }
  fi
}
fresh

rec_ms=()
total_acked=0
start=$(date +%s)
for i in $(seq 1 "$n"); do
  if [ "$fresh_every" -gt 0 ] && [ "$i" -gt 1 ] && [ $(( (i - 1) % fresh_every )) -eq 0 ]; then fresh; fi
  # Even rounds add the savepoint-overflow side script (70 nested savepoints per
  # transaction, a 100 ms pause): kills land inside savepoint trees and between their
  # transaction tree commit records, and recovery replays them.
  side=()
  if [ $((i % 2)) -eq 0 ]; then side=(--side-script savepoint-overflow --side-pause-ms 100); fi
  if [ "$workload" = tpcc ]; then
    "$bin" bench -D db -c 4 -j 2 -T 60 --random-seed "$i" > "bench.$i" 2>&1 &
  else
    "$bin" bench -D db -c 4 -j 2 -T 60 --random-seed "$i" --ack-log "ack.$i" "${side[@]}" > "bench.$i" 2>&1 &
  fi
  pid=$!
  # A random moment 0.3..3.3 s after the start (startup and recovery included): this is
  # the fault's timing, not a wait for anything.
  sleep "$(awk -v s="$RANDOM" 'BEGIN { printf "%.3f", 0.3 + (s % 3000) / 1000 }')"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null && { echo "round $i: bench finished before the kill"; cat "bench.$i"; exit 1; } || true
  if [ "$workload" = tpcc ]; then
    if ! "$bin" check -D db > "check.$i" 2>&1 || ! grep -q 'check: OK' "check.$i"; then
      echo "round $i: check FAILED"; cat "check.$i"; exit 1
    fi
    ms=$(sed -n 's/.*opened in \([0-9]*\) ms.*/\1/p' "check.$i" | head -1)
    rec_ms+=("${ms:-0}")
    printf 'round %3d: %s; reopen %s ms\n' "$i" "$(grep -m1 '^check: TPC-C' "check.$i")" "${ms:-?}"
    continue
  fi
  touch "ack.$i"
  acked_now=$(wc -l < "ack.$i")
  total_acked=$((total_acked + acked_now))
  if ! "$bin" check -D db --acked ack.* > "check.$i" 2>&1; then
    echo "round $i: check FAILED"; cat "check.$i"; exit 1
  fi
  ms=$(sed -n 's/.*opened in \([0-9]*\) ms.*/\1/p' "check.$i" | head -1)
  rec_ms+=("${ms:-0}")
  line=$(grep '^acked:' "check.$i")
  lost=$(echo "$line" | sed -n 's/.* \([0-9]*\) lost/\1/p')
  printf 'round %3d: killed after %5d acknowledged commits; %s; reopen %s ms\n' "$i" "$acked_now" "$line" "${ms:-?}"
  if [ "$lost" != "0" ]; then echo "LOST acknowledged commits"; cat "check.$i"; exit 1; fi
done
elapsed=$(( $(date +%s) - start ))
sorted=($(printf '%s\n' "${rec_ms[@]}" | sort -n))
median=${sorted[$(( ${#sorted[@]} / 2 ))]}
max=${sorted[$(( ${#sorted[@]} - 1 ))]}
if [ "$workload" = tpcc ]; then
  echo "crash-loop: $n kills of TPC-C, every reopen consistent (conditions 1-4, keys, checksums); reopen (recovery) median $median ms, max $max ms; $elapsed s in all ($profile build)"
else
  echo "crash-loop: $n kills, $total_acked commits acknowledged before the kills, 0 lost; reopen (recovery) median $median ms, max $max ms; $elapsed s in all ($profile build)"
fi
