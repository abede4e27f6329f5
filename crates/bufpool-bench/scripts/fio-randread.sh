#!/usr/bin/env bash
# fio-randread.sh: the device's random-read rate under a file, for `bufpool experiment
# outgrow`'s `outgrow_10x_vs_fio_iops`: fio (Debian's) reading random 8 KiB blocks of FILE
# with O_DIRECT, JOBS synchronous readers (one read in flight each, as the bench's
# clients), for SECONDS.
#
# Usage: scripts/fio-randread.sh FILE SECONDS JOBS
#   Prints fio's JSON (--output-format=json) on stdout; exits 0.
#   Exits 3 with one line "skip: <reason>" on stderr when fio is missing and cannot be
#   installed (it is installed with apt-get when missing and we are root); 2 on bad usage;
#   1 when fio fails.
set -Eeuo pipefail

skip() { printf 'skip: %s\n' "$*" >&2; exit 3; }
usage() { printf 'fio-randread: error: %s (usage: %s FILE SECONDS JOBS)\n' "$*" "$0" >&2; exit 2; }

(($# == 3)) || usage "three arguments expected"
FILE=$1 SECS=$2 JOBS=$3
[[ -f $FILE ]] || usage "no file $FILE"
[[ $SECS =~ ^[1-9][0-9]*$ ]] || usage "SECONDS must be a positive integer, not '$SECS'"
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || usage "JOBS must be a positive integer, not '$JOBS'"

if ! command -v fio >/dev/null 2>&1; then
  [[ $(id -u) == 0 ]] || skip "fio is not installed (apt-get install fio needs root)"
  command -v apt-get >/dev/null 2>&1 || skip "fio is not installed and there is no apt-get"
  printf 'fio-randread: installing fio (apt-get)...\n' >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q fio >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q fio >/dev/null 2>&1; } ||
    skip "apt-get install fio failed"
fi

SIZE=$(stat -c %s "$FILE")
((SIZE >= 8192)) || usage "$FILE is smaller than one 8 KiB block"
exec fio --name=randread --filename="$FILE" --readonly --rw=randread --bs=8k --direct=1 \
  --ioengine=psync --numjobs="$JOBS" --size="$SIZE" --time_based --runtime="$SECS" \
  --group_reporting --output-format=json
