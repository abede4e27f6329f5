#!/usr/bin/env bash
# Before/after in one sitting: builds two revisions of bufpool, runs the same command on
# each in turn, and prints each side's median, min and max of one figure and the ratio of
# the medians (new over old).
#
# Runs alternate in ABBA order (old new, new old, ...), so a machine that drifts over the
# sitting (a neighbour, the page cache, thermal limits) hits both sides alike. Each side
# runs in a folder of its own (its own default data directory: a database made by one
# revision is never opened by the other).
#
# Usage: scripts/ab.sh OLD_REV NEW_REV [--runs N] [--metric KEY] [--setup 'ARGS'] -- ARGS...
#   OLD_REV NEW_REV  anything git names (a commit, a branch, HEAD~1); NEW_REV may be
#                    `worktree` for the uncommitted files of this checkout
#   --runs N         runs of each side (default 3, at least 1)
#   --metric KEY     the figure, a dotted path into the JSON the command prints on stdout
#                    (default `tps`; e.g. `figures.seqscan_vs_memscan.median`, or
#                    `targets.name=tpcb_vs_limit.value` to pick a list entry by a field)
#   --setup 'ARGS'   a bufpool command run once per side before the runs (e.g. 'init -s 10')
#   ARGS             the bufpool command of a run; it must print JSON (pass --json)
# Env: AB_DIR=path   where builds and run folders go (default target/ab; builds are kept
#                    per commit and reused)
# Example:
#   scripts/ab.sh HEAD~1 HEAD --runs 5 --setup 'init -s 10' -- \
#       bench -c 4 -T 20 --set synchronous_commit=off --json
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
usage() {
    sed -n '/^# Usage:/,/^# Example:/p' "$0" | sed 's/^# \{0,1\}//' | sed '$d' >&2
    exit 2
}
[ $# -ge 2 ] || usage
old_rev=$1 new_rev=$2
shift 2
runs=3 metric=tps setup=""
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs=${2:?--runs needs a number}; shift 2 ;;
        --metric) metric=${2:?--metric needs a key}; shift 2 ;;
        --setup) setup=${2:?--setup needs a command}; shift 2 ;;
        --) shift; break ;;
        *) echo "ab.sh: unknown option $1 (the command goes after --)" >&2; usage ;;
    esac
done
[ $# -gt 0 ] || { echo "ab.sh: no command after --" >&2; usage; }
case "$runs" in
    '' | *[!0-9]* | 0) echo "ab.sh: --runs must be a whole number of at least 1, not '$runs'" >&2; exit 2 ;;
esac
ab_dir=${AB_DIR:-$repo/target/ab}
mkdir -p "$ab_dir/bin"
ab_dir=$(cd "$ab_dir" && pwd) # absolute: the runs start in folders of their own

# Builds REV (or the work tree) once; prints the binary's path.
build() {
    local rev=$1 sha src bin
    if [ "$rev" = worktree ]; then
        cargo build --release -q -p pgbufpool-bench >&2
        bin="$ab_dir/bin/worktree"
        cp target/release/bufpool "$bin"
        echo "$bin"
        return
    fi
    sha=$(git rev-parse --verify -q "$rev^{commit}") || {
        echo "ab.sh: git does not know revision '$rev'" >&2
        exit 2
    }
    bin="$ab_dir/bin/$sha"
    if [ ! -x "$bin" ]; then
        src="$ab_dir/src-$sha"
        rm -rf "$src"
        git worktree add -q --detach "$src" "$sha" >&2
        echo "ab.sh: building $rev ($sha)" >&2
        (cd "$src" && CARGO_TARGET_DIR="$ab_dir/target" cargo build --release -q -p pgbufpool-bench) >&2
        cp "$ab_dir/target/release/bufpool" "$bin"
        git worktree remove --force "$src"
    fi
    echo "$bin"
}

old_bin=$(build "$old_rev")
new_bin=$(build "$new_rev")
declare -A bin=([old]=$old_bin [new]=$new_bin) dir=()
for side in old new; do
    dir[$side]="$ab_dir/run-$side"
    rm -rf "${dir[$side]}"
    mkdir -p "${dir[$side]}"
    if [ -n "$setup" ]; then
        echo "ab.sh: $side: bufpool $setup" >&2
        # shellcheck disable=SC2086 # the setup is a word list on purpose
        (cd "${dir[$side]}" && "${bin[$side]}" $setup) >"${dir[$side]}/setup.log" 2>&1 || {
            echo "ab.sh: $side: setup failed; its output:" >&2
            cat "${dir[$side]}/setup.log" >&2
            exit 1
        }
    fi
done

# Prints the figure KEY of the JSON in FILE.
pick() {
    python3 - "$1" "$2" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
for part in sys.argv[2].split("."):
    if isinstance(v, list):
        if "=" in part:
            field, want = part.split("=", 1)
            v = next(x for x in v if str(x.get(field)) == want)
        else:
            v = v[int(part)]
    else:
        v = v[part]
print(float(v))
PY
}

: >"$ab_dir/values"
for i in $(seq 1 "$runs"); do
    if [ $((i % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
    for side in $order; do
        out="${dir[$side]}/run-$i.json"
        (cd "${dir[$side]}" && "${bin[$side]}" "$@") >"$out" 2>"${dir[$side]}/run-$i.err" || {
            echo "ab.sh: $side run $i failed; its stderr:" >&2
            tail -20 "${dir[$side]}/run-$i.err" >&2
            exit 1
        }
        v=$(pick "$out" "$metric") || {
            echo "ab.sh: $side run $i: no figure '$metric' in $out" >&2
            exit 1
        }
        echo "$side $v" >>"$ab_dir/values"
        echo "ab.sh: run $i $side: $metric = $v" >&2
    done
done

python3 - "$ab_dir/values" "$metric" "$old_rev" "$new_rev" <<'PY'
import statistics, sys
vals = {"old": [], "new": []}
for line in open(sys.argv[1]):
    side, v = line.split()
    vals[side].append(float(v))
metric, names = sys.argv[2], {"old": sys.argv[3], "new": sys.argv[4]}
med = {s: statistics.median(v) for s, v in vals.items()}
for s in ("old", "new"):
    v = vals[s]
    print(f"{s} {names[s]}: {metric} median {med[s]:.6g} min {min(v):.6g} max {max(v):.6g} "
          f"({len(v)} runs: {', '.join(f'{x:.6g}' for x in v)})")
ratio = med["new"] / med["old"] if med["old"] else float("nan")
print(f"new/old medians: {ratio:.4f}")
PY
