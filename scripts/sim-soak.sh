#!/usr/bin/env bash
# The whole-engine simulation (crates/bufpool/tests/sim.rs) as a soak: seeds one after
# another for MINUTES, in JOBS processes with disjoint seed ranges (one per core by
# default), each printing what it tried: seeds, lives, crash states (power cuts with
# random fates, with a prefix of the pending writes, bit flips at rest and what became of
# them), faults armed and hit, engine errors met, and failures. Every failure prints its
# seed, the last steps and the command that reruns it alone.
#
# Usage: scripts/sim-soak.sh MINUTES
# Env: JOBS=n          processes (default: the number of cores)
#      FIRST_SEED=n    the first seed of job 0 (default: from the clock, printed); job j
#                      starts at FIRST_SEED + j * 10,000,000
#      SIM_DIR=path    keep each job's log there (default: a temporary directory, kept
#                      if a job failed)
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:?usage: scripts/sim-soak.sh MINUTES}"
jobs="${JOBS:-$(nproc)}"
first="${FIRST_SEED:-$(( $(date +%s) % 1000000 * 1000 ))}"
seconds=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
dir="${SIM_DIR:-$(mktemp -d /tmp/bufpool-sim.XXXXXX)}"
mkdir -p "$dir"

# One build, so the jobs start together and time only the simulation.
cargo test --release -p pgbufpool --test sim --no-run 2>&1 | tail -1
echo "sim-soak: $jobs jobs for $minutes min from seed $first; logs in $dir"
start=$(date +%s)
pids=()
for j in $(seq 0 $((jobs - 1))); do
  BUFPOOL_SIM_SECONDS=$seconds BUFPOOL_SIM_FIRST_SEED=$((first + j * 10000000)) \
    cargo test --release -p pgbufpool --test sim sim_soak -- --ignored --nocapture \
    > "$dir/job$j.log" 2>&1 &
  pids+=($!)
done
failed=0
for j in "${!pids[@]}"; do
  if ! wait "${pids[$j]}"; then failed=$((failed + 1)); fi
done
elapsed=$(( $(date +%s) - start ))
for j in $(seq 0 $((jobs - 1))); do
  grep -E "^sim_soak:" "$dir/job$j.log" | sed "s/^/job $j: /" || echo "job $j: no summary (see $dir/job$j.log)"
  grep -A3 "failed in" "$dir/job$j.log" | head -40 || true
done
cpu=$(cat "$dir"/job*.log | sed -n 's/.* s, \([0-9]*\) CPU-seconds:.*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
echo "sim-soak: $jobs jobs, $elapsed s wall, $cpu CPU-seconds; jobs failed: $failed"
if [ "$failed" -gt 0 ]; then
  echo "logs kept in $dir"
  exit 1
fi
if [ -z "${SIM_DIR:-}" ]; then rm -rf "$dir"; fi
