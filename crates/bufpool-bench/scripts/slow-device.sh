#!/usr/bin/env bash
# A slow block device to measure on: a file-backed loop device (direct I/O on the backing
# file), ext4 on it, mounted at a folder of your choice, throttled by cgroup v1
# blk-throttle rules (blkio.throttle.{read,write}_{bps,iops}_device) written to the ROOT
# blkio cgroup for the loop device's major:minor. This machine's disk is cached by its
# host (8 KiB O_DIRECT read ~35 us, fdatasync ~120-250 us) and 24 GiB of RAM hide
# buffered writes, so background-writer and spread-checkpoint effects barely show on it.
#
# Usage (root; `status` and `profiles` also work unprivileged):
#   scripts/slow-device.sh up --mount DIR [--profile NAME] [--size 4G] [--backing FILE]
#                             [--fresh] [--no-direct-io] [--mount-opts OPTS] [--owner TOKEN]
#                             [--read-bps N] [--write-bps N] [--read-iops N] [--write-iops N]
#   scripts/slow-device.sh set-profile NAME [--read-bps N ...]   # new limits, same data
#   scripts/slow-device.sh down [--mount DIR] [--owner TOKEN] [--keep] [--force]
#   scripts/slow-device.sh status [--json]
#   scripts/slow-device.sh profiles
#
#   Every command but `profiles` takes --name NAME (letters, digits, '-'): several devices
#   can be up at once, one per name, each with its own state, backing file
#   (/var/tmp/bufpool-slow-device-NAME.img by default) and throttle rules; e.g. the data
#   on one and the write-ahead log on another (`bufpool init --waldir`). Without --name,
#   the unnamed device, as before.
#
#   up        Creates FILE (sparse; default /var/tmp/bufpool-slow-device.img, --size 4G),
#             makes ext4 on it (label bufpool-slow; inode tables and journal initialised
#             at mkfs, so no ext4lazyinit thread spends the throttled budget later),
#             attaches it with `losetup --direct-io=on` (status: dio=1), mounts it at DIR
#             (created if missing, else it must be an empty folder) with ext4's default
#             options (or --mount-opts), chmod 1777 on its root (lost+found is there: put
#             a database in a subfolder), then applies the profile (default hdd). If FILE
#             already holds ext4 it is reused as is (e.g. a database loaded once, kept
#             with down --keep); --fresh re-creates it. Already up at DIR: only re-applies
#             a profile (--profile, else the current one). Up at another DIR: exit 2 (one
#             device per --name). A stale state (loop detached, unmounted) is cleaned up
#             first, keeping FILE. Prints the status line.
#             --owner TOKEN records who brought it up (`bufpool` passes one per run).
#   set-profile  New limits on the device that is up; nothing else changes.
#   down      Removes the throttle rules first (so flushing dirty pages is not slowed),
#             unmounts, detaches the loop device, removes FILE unless --keep if this
#             script made it (ext4 label bufpool-slow; a FILE of yours is kept) and DIR if
#             `up` created it. Nothing up: does nothing, exit 0. Without the state file,
#             --mount DIR finds the loop device through the mount table. DIR busy: exit 1,
#             everything left as it was (throttle re-applied); --force unmounts lazily.
#             --owner TOKEN: only if the device was brought up with that token (else
#             nothing to do, exit 0): how a run's watchdog takes down its own device after
#             the run died, never a later run's.
#   status    One line of key=value pairs (values never contain spaces), e.g.
#               state=up profile=hdd device=/dev/loop0 majmin=7:0 mount=/x fs=ext4 dio=1
#               read_bps=120000000 write_bps=120000000 read_iops=150 write_iops=150
#               size=4294967296 backing=/var/tmp/bufpool-slow-device.img
#               io_read_bytes=N io_write_bytes=N io_read_ios=N io_write_ios=N
#             io_*: bytes and bios through the loop device since `up`, from the root
#             cgroup's blkio.throttle.io_service_bytes and io_serviced lines for majmin.
#             A limit of 0 means unlimited. Exit 0 when up. Not up: `state=down`, exit 1.
#             Up but inconsistent (loop detached, not mounted, rules differ):
#             `state=broken reason=... <the other keys>`, exit 1. --json: the same keys as
#             one JSON object, numbers unquoted.
#   profiles  Lists the profiles (name, read/write MB/s, read/write IOPS, note).
# State: /run/bufpool-slow-device/state[-NAME] (key=value lines), lock
# /run/bufpool-slow-device/lock (one for all names: commands run one at a time).
#
# Profiles (MB = 10^6 bytes; the same limits for reads and writes):
#   ssd-nvme  3000 MB/s, 500000 IOPS  not reachable here: a baseline with the same loop +
#                                     ext4 stack (the stack itself does ~10k IOPS at
#                                     queue depth 1, ~30-40k at 16, ~0.5 GB/s writes)
#   ssd-sata   500 MB/s,  20000 IOPS
#   hdd        120 MB/s,    150 IOPS  a 7200 rpm disk of today
#   hdd-2007    60 MB/s,    100 IOPS  one 7200 rpm SATA disk of the pgsql-hackers
#                                     checkpoint threads (2007): ~8.5 ms seek + 4.2 ms
#                                     half turn = ~80 random IOPS, ~100 with NCQ and short
#                                     seeks; ~60 MB/s sequential
#   slow10      10 MB/s,   1000 IOPS  quick demos: 50 MiB + fsync takes ~5.2 s
# --read-bps/--write-bps (bytes/s), --read-iops/--write-iops override single limits
# (0 = unlimited); the profile is then reported as NAME+custom.
#
# Exit codes: 0 ok; 1 failure; 2 usage error or already up elsewhere; 3 cannot work
# here: `skip: <reason>` on stderr (not root, no cgroup v1 blkio throttle, no loop
# devices, no losetup/mkfs.ext4), so tests and experiments can skip with the reason.
#
# Caveats (measured on this machine, Linux 6.18):
# - IOPS limits count bios as submitted, before any merging: 8 KiB writes to adjacent
#   blocks are one I/O each (a real disk's scheduler would merge them); O_DIRECT bios are
#   at most 512 KiB here, so large O_DIRECT transfers hit the IOPS limit first: hdd gives
#   ~79 MB/s, hdd-2007 ~52 MB/s with 1 MiB O_DIRECT requests. Page-cache writeback and
#   readahead build ~1.1-1.25 MiB bios and reach the MB/s limits.
# - ext4's journal and metadata I/O counts too: an fdatasync after overwriting 8 KiB is 2
#   write bios (data + cache flush), ~6 when it allocates blocks (hdd: ~75 resp. ~25/s).
# - Buffered writes are throttled only at writeback: write + fsync shows the limit, a
#   buffered write alone does not. Page-cache hits are never throttled (O_DIRECT, or
#   echo 3 > /proc/sys/vm/drop_caches). Reads of never-written (fallocated) blocks do no
#   I/O: fill files with data before measuring reads.
# - The throttle is a token bucket with 100 ms slices: averages are right, single
#   latencies are not a disk's (hdd, queue depth 1: mean 6.7 ms, median 0.2 ms, p95 60 ms,
#   p99 99 ms). Compare throughput and averages, not latency shapes.
# - cgroup v1 throttling is flat: only tasks in the root blkio cgroup, plus all writeback
#   (v1 charges it to the root), are limited; `up` warns if the caller is elsewhere.
set -euo pipefail

prog=slow-device
CG=/sys/fs/cgroup/blkio
STATE_DIR=/run/bufpool-slow-device
STATE="$STATE_DIR/state"
DEFAULT_BACKING=/var/tmp/bufpool-slow-device.img
DEFAULT_SIZE=4G
DEFAULT_PROFILE=hdd
LABEL=bufpool-slow # ext4 label of the file systems this script makes
LIMIT_FILES=(read_bps write_bps read_iops write_iops)

# name read_bps write_bps read_iops write_iops note
PROFILES=(
  "ssd-nvme 3000000000 3000000000 500000 500000 baseline_with_the_same_loop+ext4_stack"
  "ssd-sata 500000000 500000000 20000 20000 SATA_SSD"
  "hdd 120000000 120000000 150 150 7200rpm_disk_of_today"
  "hdd-2007 60000000 60000000 100 100 one_7200rpm_SATA_disk_of_2007"
  "slow10 10000000 10000000 1000 1000 quick_demos"
)

die() { echo "$prog: $*" >&2; exit 1; }
usage() { echo "$prog: $*" >&2; echo "usage: $0 up|set-profile|down|status|profiles [options] (see the header of $0)" >&2; exit 2; }
skip() { echo "skip: $*" >&2; exit 3; }
log() { echo "$prog: $*" >&2; }

profile_limits() { # name -> "rbps wbps riops wiops" or return 1
  local p
  for p in "${PROFILES[@]}"; do
    # shellcheck disable=SC2086 # split on purpose
    set -- $p
    if [ "$1" = "$PROFILE_Q" ]; then echo "$2 $3 $4 $5"; return 0; fi
  done
  return 1
}

need_root_env() {
  [ "$(id -u)" -eq 0 ] || skip "not root (blkio throttle rules, losetup and mount need root)"
  [ -w "$CG/blkio.throttle.read_bps_device" ] || skip "no cgroup v1 blkio throttle at $CG (cgroup v2 only, or blk-throttle not built)"
  command -v losetup >/dev/null || skip "losetup not installed (util-linux)"
  command -v mkfs.ext4 >/dev/null || skip "mkfs.ext4 not installed (e2fsprogs)"
  command -v findmnt >/dev/null || skip "findmnt not installed (util-linux)"
  [ -e /dev/loop-control ] || modprobe loop 2>/dev/null || true
  [ -e /dev/loop-control ] || ls /dev/loop[0-9]* >/dev/null 2>&1 || skip "no loop devices (/dev/loop-control missing; modprobe loop?)"
}

# ---- state ------------------------------------------------------------------------------
declare -A S=()
load_state() {
  S=()
  [ -f "$STATE" ] || return 1
  local k v
  while IFS='=' read -r k v; do
    [ -n "$k" ] && S[$k]="$v"
  done < "$STATE"
  return 0
}
save_state() {
  mkdir -p "$STATE_DIR"
  local k tmp="$STATE.tmp.$$"
  : > "$tmp"
  for k in profile device majmin mount fs dio read_bps write_bps read_iops write_iops \
           size backing created_backing created_mount base_rbytes base_wbytes base_rios \
           base_wios up_at owner; do
    echo "$k=${S[$k]:-}" >> "$tmp"
  done
  mv -f "$tmp" "$STATE"
}

lock() {
  mkdir -p "$STATE_DIR"
  exec 9> "$STATE_DIR/lock"
  flock -w 60 9 || die "another $prog command holds $STATE_DIR/lock"
}

# ---- cgroup -----------------------------------------------------------------------------
# value of the rule for majmin in file, or 0
cg_rule() { awk -v d="$1" '$1 == d { print $2; f = 1 } END { if (!f) print 0 }' "$CG/blkio.throttle.$2_device" 2>/dev/null || echo 0; }
cg_set() { # majmin rbps wbps riops wiops ; 0 removes a rule
  local mm=$1 i=0 f
  shift
  for f in "${LIMIT_FILES[@]}"; do
    i=$((i + 1))
    echo "$mm ${!i}" > "$CG/blkio.throttle.${f}_device" || return 1
  done
}
cg_clear() { cg_set "$1" 0 0 0 0; }
cg_lists() { # majmin -> 0 if any throttle rule file lists it
  local f
  for f in "${LIMIT_FILES[@]}"; do
    awk -v d="$1" '$1 == d { f = 1 } END { exit !f }' "$CG/blkio.throttle.${f}_device" && return 0
  done
  return 1
}
cg_counter() { # majmin file Read|Write -> number (0 if absent)
  awk -v d="$1" -v o="$3" '$1 == d && $2 == o { print $3; f = 1 } END { if (!f) print 0 }' \
    "$CG/blkio.throttle.$2" 2>/dev/null || echo 0
}

# ---- pieces -----------------------------------------------------------------------------
majmin_of() { local d=${1#/dev/}; cat "/sys/class/block/$d/dev"; }
dio_of() { local d=${1#/dev/}; cat "/sys/class/block/$d/loop/dio" 2>/dev/null || echo 0; }
mounted_source() { findmnt -n -o SOURCE --mountpoint "$1" 2>/dev/null | head -n1; }
abspath() { # path that may not exist yet
  local p=$1
  case "$p" in /*) ;; *) p="$PWD/$p" ;; esac
  realpath -m -- "$p"
}
check_path_chars() {
  case "$1" in *[[:space:]=\"\\]*) usage "$2 must not contain whitespace, '=', '\"' or '\\': $1" ;; esac
}

resolve_limits() { # profile name + overrides -> L[] and PROFILE_NAME
  PROFILE_Q="$1"
  local lim
  lim=$(profile_limits) || usage "unknown profile '$1' (see: $0 profiles)"
  # shellcheck disable=SC2086 # split on purpose
  set -- $lim
  L_read_bps=$1; L_write_bps=$2; L_read_iops=$3; L_write_iops=$4
  PROFILE_NAME="$PROFILE_Q"
  local custom=0 f v
  for f in "${LIMIT_FILES[@]}"; do
    v=${O[$f]:-}
    if [ -n "$v" ]; then
      [[ "$v" =~ ^[0-9]+$ ]] || usage "--${f/_/-} wants a non-negative integer, got '$v'"
      printf -v "L_$f" '%s' "$v"
      custom=1
    fi
  done
  [ "$custom" = 0 ] || PROFILE_NAME="$PROFILE_Q+custom"
}

apply_limits() {
  cg_set "${S[majmin]}" "$L_read_bps" "$L_write_bps" "$L_read_iops" "$L_write_iops" \
    || die "cannot write the throttle rules for ${S[majmin]} in $CG"
  S[profile]=$PROFILE_NAME
  S[read_bps]=$L_read_bps; S[write_bps]=$L_write_bps
  S[read_iops]=$L_read_iops; S[write_iops]=$L_write_iops
  save_state
}

warn_cgroup() {
  local mine
  mine=$(awk -F: '$2 ~ /(^|,)blkio(,|$)/ { print $3 }' /proc/self/cgroup)
  if [ -n "$mine" ] && [ "$mine" != / ]; then
    log "warning: this shell is in blkio cgroup $mine, not the root: cgroup v1 throttling is flat, so its direct I/O and reads are NOT throttled (writeback still is); run the workload from the root cgroup (echo \$\$ > $CG/cgroup.procs)"
  fi
  local n
  n=$(find "$CG" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | wc -l)
  if [ "$n" -gt 0 ]; then
    log "note: $n child blkio cgroup(s) exist under $CG; tasks in them are not throttled (v1 is flat)"
  fi
}

# status line (or JSON) from S; returns 0 up, 1 broken
print_status() {
  local json=$1 state=up reason=
  local dev=${S[device]} mm=${S[majmin]} mnt=${S[mount]}
  if [ ! -e "$dev" ] || [ "$(majmin_of "$dev" 2>/dev/null)" != "$mm" ]; then
    state=broken; reason=device_gone
  elif [ "$(losetup -n -O BACK-FILE "$dev" 2>/dev/null | sed 's/ *$//')" != "${S[backing]}" ]; then
    state=broken; reason=loop_not_attached_to_backing
  elif [ "$(mounted_source "$mnt")" != "$dev" ]; then
    state=broken; reason=not_mounted
  else
    local f
    for f in "${LIMIT_FILES[@]}"; do
      if [ "$(cg_rule "$mm" "$f")" != "${S[$f]}" ]; then state=broken; reason=throttle_rules_differ_${f}; break; fi
    done
  fi
  local rb wb ri wi
  rb=$(( $(cg_counter "$mm" io_service_bytes Read) - ${S[base_rbytes]:-0} ))
  wb=$(( $(cg_counter "$mm" io_service_bytes Write) - ${S[base_wbytes]:-0} ))
  ri=$(( $(cg_counter "$mm" io_serviced Read) - ${S[base_rios]:-0} ))
  wi=$(( $(cg_counter "$mm" io_serviced Write) - ${S[base_wios]:-0} ))
  local keys=(state) vals=("$state")
  [ -z "$reason" ] || { keys+=(reason); vals+=("$reason"); }
  keys+=(profile device majmin mount fs dio read_bps write_bps read_iops write_iops size backing
         io_read_bytes io_write_bytes io_read_ios io_write_ios)
  vals+=("${S[profile]}" "$dev" "$mm" "$mnt" "${S[fs]}" "${S[dio]}" "${S[read_bps]}" "${S[write_bps]}"
         "${S[read_iops]}" "${S[write_iops]}" "${S[size]}" "${S[backing]}" "$rb" "$wb" "$ri" "$wi")
  emit "$json" keys vals
  [ "$state" = up ]
}

emit() { # json keys-array-name vals-array-name
  local json=$1 i out=
  local -n _ek=$2 _ev=$3
  if [ "$json" = 1 ]; then
    for i in "${!_ek[@]}"; do
      if [[ "${_ev[$i]}" =~ ^-?[0-9]+$ ]]; then out+="\"${_ek[$i]}\":${_ev[$i]},"
      else out+="\"${_ek[$i]}\":\"${_ev[$i]}\","; fi
    done
    echo "{${out%,}}"
  else
    for i in "${!_ek[@]}"; do out+="${_ek[$i]}=${_ev[$i]} "; done
    echo "${out% }"
  fi
}

# ---- commands ---------------------------------------------------------------------------
cmd_profiles() {
  printf '%-9s %10s %10s %9s %10s  %s\n' name read_MB/s write_MB/s read_iops write_iops note
  local p
  for p in "${PROFILES[@]}"; do
    # shellcheck disable=SC2086 # split on purpose
    set -- $p
    printf '%-9s %10s %10s %9s %10s  %s\n' "$1" $(($2 / 1000000)) $(($3 / 1000000)) "$4" "$5" "${6//_/ }"
  done
}

cmd_status() {
  local json=0
  while [ $# -gt 0 ]; do
    case "$1" in --json) json=1 ;; *) usage "status: unknown argument '$1'" ;; esac
    shift
  done
  if ! load_state; then
    local keys=(state) vals=(down)
    emit "$json" keys vals
    return 1
  fi
  print_status "$json"
}

cmd_set_profile() { # name already in PROFILE_ARG
  need_root_env
  lock
  load_state || die "not up (no $STATE); use: $0 up --mount DIR --profile NAME"
  resolve_limits "$PROFILE_ARG"
  apply_limits
  log "profile $PROFILE_NAME on ${S[device]} (${S[majmin]}) at ${S[mount]}"
  print_status 0 >/dev/null || die "device is in a broken state: $(print_status 0 || true)"
  print_status 0
}

# rollback stack for a failing `up`
UNDO=()
undo_all() {
  local i
  for ((i = ${#UNDO[@]} - 1; i >= 0; i--)); do eval "${UNDO[$i]}" >/dev/null 2>&1 || true; done
  UNDO=()
}

cmd_up() {
  need_root_env
  [ -n "$MOUNT_ARG" ] || usage "up needs --mount DIR"
  local mnt backing size
  mnt=$(abspath "$MOUNT_ARG"); check_path_chars "$mnt" --mount
  lock
  if load_state; then
    if [ "${S[mount]}" = "$mnt" ] && print_status 0 >/dev/null; then
      [ -n "$PROFILE_ARG" ] || PROFILE_ARG=${S[profile]%+custom}
      resolve_limits "$PROFILE_ARG"
      S[owner]=$OWNER_ARG
      apply_limits
      log "already up at $mnt (${S[device]}); profile $PROFILE_NAME applied"
      print_status 0
      return 0
    elif [ "${S[mount]}" != "$mnt" ] && print_status 0 >/dev/null; then
      echo "$prog: already up at ${S[mount]} (${S[device]}); run '$0 down${NAME:+ --name $NAME}' first (one device per --name)" >&2
      exit 2
    else
      log "stale state ($(print_status 0 | sed 's/ profile=.*//' || true)); cleaning it up first"
      do_down 1 0 || die "could not clean up the stale device; fix by hand (state: $STATE)"
      S=()
    fi
  fi
  resolve_limits "${PROFILE_ARG:-$DEFAULT_PROFILE}"
  backing=$(abspath "${BACKING_ARG:-$DEFAULT_BACKING}"); check_path_chars "$backing" --backing
  size=${SIZE_ARG:-$DEFAULT_SIZE}
  case "$mnt" in "$backing"|"$backing"/*) usage "--mount must not be the backing file" ;; esac
  [ "$mnt" != / ] || usage "--mount / ? no."

  # mount point: must be missing, empty, or not a mount point already
  local created_mount=0
  if [ -e "$mnt" ]; then
    [ -d "$mnt" ] || die "$mnt exists and is not a directory"
    if findmnt -n --mountpoint "$mnt" >/dev/null 2>&1; then
      die "$mnt is already a mount point ($(mounted_source "$mnt")); not ours (no state), refusing"
    fi
    [ -z "$(ls -A "$mnt")" ] || die "$mnt is not empty; mounting over it would hide its contents (use an empty or new folder)"
  else
    mkdir -p "$mnt"; created_mount=1
    UNDO+=("rmdir '$mnt'")
  fi

  # backing file
  local created_backing=0 fresh_fs=1
  mkdir -p "$(dirname "$backing")"
  local bfs
  bfs=$(stat -f -c %T "$(dirname "$backing")")
  case "$bfs" in tmpfs|ramfs) log "warning: $backing is on $bfs (RAM): fine for the throttle, but not a disk below it" ;; esac
  if [ -e "$backing" ]; then
    [ -f "$backing" ] || die "$backing exists and is not a regular file"
    if [ -n "$(losetup -n -O NAME -j "$backing" 2>/dev/null)" ]; then
      die "$backing is already attached to $(losetup -n -O NAME -j "$backing" | tr '\n' ' ')(not by this state); detach it first"
    fi
    if [ "$FRESH" = 1 ]; then
      [ "$(blkid -p -o value -s LABEL "$backing" 2>/dev/null || true)" != "$LABEL" ] || created_backing=1
      truncate -s 0 "$backing"; truncate -s "$size" "$backing"
    elif [ "$(blkid -p -o value -s TYPE "$backing" 2>/dev/null || true)" = ext4 ]; then
      fresh_fs=0
      # made by this script (label) -> ours to remove on down; otherwise the caller's, kept
      [ "$(blkid -p -o value -s LABEL "$backing" 2>/dev/null || true)" != "$LABEL" ] || created_backing=1
      log "reusing the ext4 file system in $backing ($(stat -c %s "$backing") bytes; --size ignored; --fresh to re-create)"
    else
      die "$backing exists and holds no ext4 file system; remove it or pass --fresh"
    fi
  else
    local avail want
    avail=$(df -B1 --output=avail "$(dirname "$backing")" | tail -n1 | tr -d ' ')
    truncate -s "$size" "$backing" || die "cannot create $backing with size $size"
    created_backing=1
    UNDO+=("rm -f '$backing'")
    want=$(stat -c %s "$backing")
    [ "$avail" -ge "$want" ] || log "warning: $backing is sparse, $want bytes, but only $avail bytes are free below it"
  fi

  # loop device
  local dev dio_flag=on
  [ "$NO_DIO" = 1 ] && dio_flag=off
  local errf
  errf=$(mktemp)
  dev=$(losetup -f --show --direct-io="$dio_flag" "$backing" 2>"$errf") || {
    local e; e=$(cat "$errf"); rm -f "$errf"
    undo_all
    case "$e" in *"could not find any free loop device"*|*"No such device"*) skip "no free loop device ($e)" ;; esac
    die "losetup failed: $e"
  }
  [ ! -s "$errf" ] || log "losetup: $(cat "$errf")"
  rm -f "$errf"
  UNDO+=("losetup -d '$dev'")
  local mm dio
  mm=$(majmin_of "$dev")
  dio=$(dio_of "$dev")
  [ "$NO_DIO" = 1 ] || [ "$dio" = 1 ] || log "warning: direct I/O on $backing could not be enabled; reads may be served by the page cache below the loop device"
  cg_clear "$mm" # a rule left over from an earlier user of this loop device would slow mkfs
  UNDO+=("cg_clear '$mm'")

  if [ "$fresh_fs" = 1 ]; then
    nice -n 10 mkfs.ext4 -q -F -L "$LABEL" -E lazy_itable_init=0,lazy_journal_init=0 "$dev" \
      || { undo_all; die "mkfs.ext4 on $dev failed"; }
  fi
  local mopts=()
  [ -z "$MOUNT_OPTS" ] || mopts=(-o "$MOUNT_OPTS")
  mount -t ext4 "${mopts[@]}" "$dev" "$mnt" || { undo_all; die "mount $dev $mnt failed"; }
  UNDO+=("umount '$mnt'")
  [ "$fresh_fs" = 0 ] || chmod 1777 "$mnt"
  sync -f "$mnt" 2>/dev/null || sync

  S=([device]="$dev" [majmin]="$mm" [mount]="$mnt" [fs]=ext4 [dio]="$dio" [owner]="$OWNER_ARG"
     [size]="$(stat -c %s "$backing")" [backing]="$backing"
     [created_backing]="$created_backing" [created_mount]="$created_mount"
     [base_rbytes]="$(cg_counter "$mm" io_service_bytes Read)"
     [base_wbytes]="$(cg_counter "$mm" io_service_bytes Write)"
     [base_rios]="$(cg_counter "$mm" io_serviced Read)"
     [base_wios]="$(cg_counter "$mm" io_serviced Write)"
     [up_at]="$(date +%s)")
  apply_limits || { undo_all; rm -f "$STATE"; die "applying the profile failed"; }
  UNDO=()
  warn_cgroup
  log "up: $dev ($mm) ext4 at $mnt, backing $backing, direct I/O $dio, profile $PROFILE_NAME"
  print_status 0
}

# down from S (state or discovered). keep=1 keeps the backing file; force=1 lazy umount.
do_down() {
  local keep=$1 force=$2
  local dev=${S[device]:-} mm=${S[majmin]:-} mnt=${S[mount]:-} backing=${S[backing]:-}
  # 1. unthrottle (also if the device is gone: the rules outlive the loop device's use)
  if [ -n "$mm" ]; then cg_clear "$mm" || log "warning: could not clear the throttle rules for $mm"; fi
  # 2. unmount
  if [ -n "$mnt" ] && [ -n "$dev" ] && [ "$(mounted_source "$mnt")" = "$dev" ]; then
    sync -f "$mnt" 2>/dev/null || true
    if ! umount "$mnt" 2>/dev/null; then
      if [ "$force" = 1 ]; then
        umount -l "$mnt" || { log "lazy umount of $mnt failed"; return 1; }
        log "$mnt was busy: lazily unmounted; the loop device is freed when its last user closes it"
        DEFERRED=1
      else
        local pids users=
        pids=$(fuser -m "$mnt" 2>/dev/null | xargs || true)
        [ -z "$pids" ] || users=$(ps -o pid=,comm= -p "${pids// /,}" 2>/dev/null | awk '{ printf "%s%s(%s)", s, $2, $1; s = " " }' || true)
        log "cannot unmount $mnt: busy${users:+, used by $users}"
        if [ -n "${S[read_bps]:-}" ]; then
          cg_set "$mm" "${S[read_bps]}" "${S[write_bps]}" "${S[read_iops]}" "${S[write_iops]}" || true
        fi
        log "left as it was (throttle re-applied); close the users or use: $0 down --force"
        return 1
      fi
    fi
  fi
  # 3. detach (only if it is still attached to our backing file)
  if [ -n "$dev" ] && [ -e "$dev" ] && [ -n "$backing" ]; then
    local bf
    bf=$(losetup -n -O BACK-FILE "$dev" 2>/dev/null | sed 's/ *$//' || true)
    if [ "$bf" = "$backing" ] || [ "$bf" = "$backing (deleted)" ]; then
      losetup -d "$dev" || log "warning: losetup -d $dev failed"
      local i
      for i in 1 2 3 4 5 6 7 8 9 10; do
        [ -n "$(losetup -n -O BACK-FILE "$dev" 2>/dev/null)" ] || break
        sleep 0.2
      done
    fi
  fi
  # 4. backing file and mount point
  if [ -n "$backing" ] && [ -f "$backing" ]; then
    if [ "${S[created_backing]:-0}" = 1 ] && [ "$keep" = 0 ]; then
      if [ -n "$(losetup -n -O NAME -j "$backing" 2>/dev/null)" ]; then
        log "backing file $backing is still attached (lazy unmount); remove it once the users are gone: rm $backing"
      else
        rm -f "$backing"
      fi
    else
      log "kept backing file $backing ($( [ "$keep" = 1 ] && echo --keep || echo 'not made by this script' ))"
    fi
  fi
  if [ "${S[created_mount]:-0}" = 1 ] && [ -d "$mnt" ] && ! findmnt -n --mountpoint "$mnt" >/dev/null 2>&1; then
    rmdir "$mnt" 2>/dev/null || true
  fi
  rm -f "$STATE"
  return 0
}

cmd_down() {
  if [ "$(id -u)" -ne 0 ]; then
    load_state || { log "not up (no $STATE); nothing to do"; return 0; }
    skip "not root (down needs root)"
  fi
  lock
  if ! load_state; then
    if [ -z "$MOUNT_ARG" ]; then log "not up (no $STATE); nothing to do"; return 0; fi
    local mnt dev
    mnt=$(abspath "$MOUNT_ARG")
    dev=$(mounted_source "$mnt")
    case "$dev" in
      /dev/loop[0-9]*) ;;
      "") log "not up and nothing mounted at $mnt; nothing to do"; return 0 ;;
      *) die "$mnt holds $dev, not a loop device; refusing" ;;
    esac
    local bf
    bf=$(losetup -n -O BACK-FILE "$dev" | sed 's/ *$//')
    S=([device]="$dev" [majmin]="$(majmin_of "$dev")" [mount]="$mnt" [backing]="$bf" [created_backing]=0 [created_mount]=0)
    [ "$(blkid -o value -s LABEL "$dev" 2>/dev/null || true)" != "$LABEL" ] || S[created_backing]=1
    log "no state file; found $dev ($bf) at $mnt"
  elif [ -n "$OWNER_ARG" ] && [ "${S[owner]:-}" != "$OWNER_ARG" ]; then
    log "up for another owner (${S[owner]:-none}), not $OWNER_ARG; nothing to do"
    return 0
  elif [ -n "$MOUNT_ARG" ] && [ "$(abspath "$MOUNT_ARG")" != "${S[mount]}" ]; then
    die "up at ${S[mount]}, not at $(abspath "$MOUNT_ARG"); refusing"
  fi
  local dev=${S[device]} mnt=${S[mount]}
  do_down "$KEEP" "$FORCE" || exit 1
  if [ -n "${S[majmin]:-}" ] && cg_lists "${S[majmin]}"; then
    die "throttle rules for ${S[majmin]} are still listed in $CG/blkio.throttle.*_device"
  fi
  if [ "$DEFERRED" = 1 ]; then
    log "down: throttle rules removed, $mnt lazily unmounted, $dev detaches when its last user exits"
  else
    log "down: throttle rules removed, $mnt unmounted, $dev detached"
  fi
}

# ---- main -------------------------------------------------------------------------------
[ $# -ge 1 ] || usage "missing command"
CMD=$1; shift
NAME=''
REST=()
while [ $# -gt 0 ]; do
  if [ "$1" = --name ]; then
    [ $# -ge 2 ] || usage "--name needs a value"
    NAME=$2; shift 2
    case "$NAME" in ''|*[!A-Za-z0-9-]*) usage "--name: letters, digits and '-' only: '$NAME'" ;; esac
  else
    REST+=("$1"); shift
  fi
done
set -- ${REST[@]+"${REST[@]}"}
STATE="$STATE_DIR/state${NAME:+-$NAME}"
DEFAULT_BACKING="/var/tmp/bufpool-slow-device${NAME:+-$NAME}.img"
DEFERRED=0 OWNER_ARG='' MOUNT_ARG='' PROFILE_ARG='' SIZE_ARG='' BACKING_ARG='' MOUNT_OPTS='' FRESH=0 NO_DIO=0 KEEP=0 FORCE=0
declare -A O=() # limit overrides
if [ "$CMD" = set-profile ] && [ $# -ge 1 ] && [ "${1#-}" = "$1" ]; then PROFILE_ARG=$1; shift; fi
case "$CMD" in status|profiles) ;; *)
  while [ $# -gt 0 ]; do
    case "$1" in
      --owner|--mount|--profile|--size|--backing|--mount-opts|--read-bps|--write-bps|--read-iops|--write-iops)
        [ $# -ge 2 ] || usage "$1 needs a value" ;;
    esac
    case "$1" in
      --owner) OWNER_ARG=$2; shift
               case "$OWNER_ARG" in *[!A-Za-z0-9:.-]*) usage "--owner: letters, digits, ':', '.' and '-' only" ;; esac ;;
      --mount) MOUNT_ARG=$2; shift ;;
      --profile) PROFILE_ARG=$2; shift ;;
      --size) SIZE_ARG=$2; shift ;;
      --backing) BACKING_ARG=$2; shift ;;
      --mount-opts) MOUNT_OPTS=$2; shift ;;
      --read-bps) O[read_bps]=$2; shift ;;
      --write-bps) O[write_bps]=$2; shift ;;
      --read-iops) O[read_iops]=$2; shift ;;
      --write-iops) O[write_iops]=$2; shift ;;
      --fresh) FRESH=1 ;;
      --no-direct-io) NO_DIO=1 ;;
      --keep) KEEP=1 ;;
      --force) FORCE=1 ;;
      -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      *) usage "$CMD: unknown argument '$1'" ;;
    esac
    shift
  done
esac

case "$CMD" in
  up) cmd_up ;;
  set-profile) [ -n "$PROFILE_ARG" ] || usage "set-profile NAME"; cmd_set_profile ;;
  down) cmd_down ;;
  status) cmd_status "$@" ;;
  profiles) cmd_profiles ;;
  -h|--help|help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
  *) usage "unknown command '$CMD'" ;;
esac
