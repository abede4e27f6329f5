#!/usr/bin/env bash
# Stress loop through the real binary: hot rows at full rate, real threads, kills.
#
# Each round runs `bufpool bench` on a scale-1 database (one branch row, 10 teller rows:
# every client updates the same row in every transaction; measured on the vanished-row
# defect, 16 clients for 6 s with synchronous commit off hit it in 4 runs of 6 at scale 1,
# none at scale 2) with a 16 MB pool, a checkpoint every second or
# two (max_wal_size = two 16 MB segments), VACUUM beside the clients (four rounds in
# eight a thread vacuuming every second, --vacuum-every 1; the others the autovacuum
# launcher, looking every second with threshold and scale factor 0, paced by its cost
# limit) and --ack-log. Rounds rotate through
#   synchronous_commit on / off (off: the rate, and so the races, are 3-4x higher),
#   4, 8 and 16 clients,
#   the replacement policy (buffer_replacement clock, sieve, s3fifo, car, 2q, cooling;
#   every three rounds),
#   TPC-B alone (the highest rate), TPC-B with seed 002's savepoint-overflow side script
#   (70 nested savepoints per transaction), and the multixact script (FOR UPDATE, SAVEPOINT, update: row locks and
#   multixacts; it changes accounts alone, so it has a database of its own, checked with
#   --accounts-only),
# half the rounds (two in every four) with the pool resized again and again while the clients
# run (--resize-at: 16 MB -> 64 MB -> 2 MB -> 48 MB -> 4 MB, a second apart, unpaced, so
# shrinks write and drop hot pages under checkpoints, VACUUM and kills),
# and six rounds in every twelve are SIGKILLed at a random moment (over twelve rounds,
# each script runs with synchronous commit on and off, killed and to its end). A round fails if
#   - the bench reports an error (a client's "row 1 vanished", a checkpoint failure, a
#     panic) before it ends or is killed, or exits non-zero when not killed;
#   - `bufpool check --acked` (recovery, TPC-B balances, every key against its heap, every
#     page checksum, every acknowledged commit in pgbench_history) fails. A killed round
#     with synchronous commit off may lose its last acknowledged commits (that is what
#     asynchronous commit means), so its acknowledgment log is kept out of the checks;
#     the database must still be consistent.
# A failure stops the loop, prints the round's logs and keeps the work directory.
#
# Usage: scripts/stress.sh MINUTES [--release]
#   MINUTES    how long to keep starting rounds (decimals allowed: 0.5)
#   --release  use a release build (the default in practice: the races need the rate)
# Env: BUFPOOL_BIN=path    use that binary (no build)
#      STRESS_DIR=path     keep the work there (default: a temporary directory, removed
#                          unless a round failed)
#      STRESS_ROUND_S=N    seconds per round (default 6)
#      STRESS_FRESH_EVERY=K a new database every K rounds (default 10: check reads every
#                          acknowledgment log since the last fresh start)
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:?usage: scripts/stress.sh MINUTES [--release]}"
profile=debug
if [ "${2:-}" = "--release" ]; then profile=release; fi
if [ -n "${BUFPOOL_BIN:-}" ]; then
  bin="$BUFPOOL_BIN"
else
  if [ "$profile" = release ]; then cargo build -q --release -p pgbufpool-bench; else cargo build -q -p pgbufpool-bench; fi
  bin="$PWD/target/$profile/bufpool"
fi
round_s="${STRESS_ROUND_S:-6}"
fresh_every="${STRESS_FRESH_EVERY:-10}"
work="${STRESS_DIR:-$(mktemp -d)}"
mkdir -p "$work"
keep=0
if [ -n "${STRESS_DIR:-}" ]; then keep=1; fi
cleanup() { if [ "$keep" = 0 ]; then rm -rf "$work"; fi; }
trap cleanup EXIT
cd "$work"

fresh() {
  rm -rf db dbm ack-* lossy-* bench.* check.*
  for d in db dbm; do
    "$bin" init -s 1 -D "$d" > init.log 2>&1 || { cat init.log; keep=1; exit 1; }
  done
}

fail() {
  echo "stress: round $1 FAILED: $2"
  echo "--- bench output (bench.$1)"; tail -n 40 "bench.$1" || true
  if [ -f "check.$1" ]; then echo "--- check output (check.$1)"; tail -n 40 "check.$1"; fi
  keep=1
  echo "stress: work kept in $work"
  exit 1
}

clients_cycle=(4 8 16)
policies=(clock sieve s3fifo car 2q cooling)
deadline=$(awk -v m="$minutes" -v now="$(date +%s)" 'BEGIN { printf "%d", now + m * 60 }')
start=$(date +%s)
round=0 kills=0 acked=0 completed=0
fresh
while [ "$(date +%s)" -lt "$deadline" ]; do
  round=$((round + 1))
  if [ "$round" -gt 1 ] && [ $(( (round - 1) % fresh_every )) -eq 0 ]; then fresh; fi
  c=${clients_cycle[$(( (round - 1) % 3 ))]}
  policy=${policies[$(( ((round - 1) / 3) % ${#policies[@]} ))]}
  # Synchronous commit alternates every round, the script every two rounds, the kill
  # every six.
  if [ $((round % 2)) -eq 1 ]; then sync=off; else sync=on; fi
  kind=$(( ((round - 1) / 2) % 3 ))
  if [ "$kind" = 0 ]; then
    script=(); what="tpcb"
    d=db; only=()
  elif [ "$kind" = 1 ]; then
    script=(--side-script savepoint-overflow --side-pause-ms 50); what="tpcb+savepoints"
    d=db; only=()
  else
    script=(-b multixact); what="multixact"
    d=dbm; only=(--accounts-only)
  fi
  kill_round=$(( ((round - 1) / 6) % 2 ))
  if [ $(( ((round - 1) / 4) % 2 )) -eq 0 ]; then
    vac=(--vacuum-every 1)
  else
    vac=(--set autovacuum=on --set autovacuum_naptime=1s --set autovacuum_vacuum_threshold=0
         --set autovacuum_vacuum_scale_factor=0)
    what="$what+autovacuum"
  fi
  if [ $(( (round / 2) % 2 )) -eq 0 ]; then
    resize=(--resize-at 1s:64MB,2s:2MB,3s:48MB,4s:4MB --set resize_duty_cycle=1)
    what="$what+resize"
  else
    resize=()
  fi
  set +e
  "$bin" bench -D "$d" -c "$c" -j 2 -T "$round_s" --random-seed "$round" \
    --set shared_buffers=16MB --set synchronous_commit="$sync" --set max_wal_size=32MB --set min_wal_size=32MB \
    --set buffer_replacement="$policy" ${resize[@]:+"${resize[@]}"} \
    "${vac[@]}" --ack-log "ack-$d.$round" ${script[@]:+"${script[@]}"} > "bench.$round" 2>&1 &
  pid=$!
  killed=0
  if [ "$kill_round" = 1 ]; then
    # A random moment 0.5..round_s s after the start (recovery and startup included): the
    # fault's timing, not a wait for anything.
    sleep "$(awk -v s="$RANDOM" -v t="$round_s" 'BEGIN { printf "%.3f", 0.5 + (s % 1000) / 1000 * (t - 0.5) }')"
    if kill -9 "$pid" 2>/dev/null; then killed=1; kills=$((kills + 1)); fi
  fi
  wait "$pid" 2>/dev/null
  rc=$?
  set -e
  if [ "$killed" = 0 ] && [ "$rc" != 0 ]; then fail "$round" "bench exited $rc (c$c, sync $sync, $what, $policy)"; fi
  if grep -qE "^Error|panicked|Caused by" "bench.$round"; then
    fail "$round" "bench reported an error before it ended (c$c, sync $sync, $what, $policy, killed=$killed)"
  fi
  touch "ack-$d.$round"
  n=$(wc -l < "ack-$d.$round")
  if [ "$killed" = 1 ] && [ "$sync" = off ]; then mv "ack-$d.$round" "lossy-$d.$round"; fi
  acks=(ack-"$d".*)
  [ -e "${acks[0]}" ] || acks=()
  acked=$((acked + n))
  if ! "$bin" check -D "$d" "${only[@]}" ${acks[@]:+--acked "${acks[@]}"} > "check.$round" 2>&1; then
    fail "$round" "check failed after the round (c$c, sync $sync, $what, killed=$killed)"
  fi
  if [ "${#acks[@]}" -gt 0 ] && ! grep -q '^acked:.* 0 lost' "check.$round"; then
    fail "$round" "acknowledged commits lost"
  fi
  [ "$killed" = 0 ] && completed=$((completed + 1))
  tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "bench.$round" | head -1)
  printf 'round %3d: c%-2d sync %-3s %-6s %-16s %s, %6d acknowledged, tps %s\n' \
    "$round" "$c" "$sync" "$policy" "$what" "$([ $killed = 1 ] && echo killed || echo 'ran out')" "$n" "${tps:--}"
done
elapsed=$(( $(date +%s) - start ))
echo "stress: $round rounds ($completed ran to the end, $kills killed), $acked commits acknowledged, 0 lost, 0 errors; $elapsed s ($bin)"
