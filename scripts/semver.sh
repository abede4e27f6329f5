#!/usr/bin/env bash
# The library's public API against its last release: `cargo semver-checks` (installed from
# crates.io, version pinned below, if this machine lacks it) compares pgbufpool now with
# the commit named in .ci/semver-baseline, the last release's. A change the semver rules
# call breaking fails unless the package's version says so (before 1.0, a minor bump:
# 0.2 -> 0.3), with its line in docs/CHANGELOG.md's API part. When a version is released,
# its commit goes into .ci/semver-baseline.
#
# Usage: scripts/semver.sh            (exit 0: no break the version does not allow; 3: the
#                                     baseline commit is not in this clone, nothing checked)
# Cost: about 30 s once installed; the install builds it from source (about 8 minutes of
# CPU on 2 cores) into ~/.cargo/bin, so a machine that keeps its home pays it once.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.51.0
if ! cargo semver-checks --version 2>/dev/null | grep -q "$VERSION"; then
  echo "semver: installing cargo-semver-checks $VERSION from crates.io (once per machine)..." >&2
  cargo install cargo-semver-checks --version "$VERSION" --locked -q
fi
base=$(tr -d '[:space:]' < .ci/semver-baseline)
[[ $base =~ ^[0-9a-f]{40}$ ]] || { echo "semver: .ci/semver-baseline must hold a full commit id, not '$base'" >&2; exit 2; }
if ! git cat-file -e "$base^{commit}" 2>/dev/null; then
  # A shallow clone: fetch the history if the clone has a remote to fetch it from.
  git fetch -q --unshallow 2>/dev/null || true
fi
git cat-file -e "$base^{commit}" 2>/dev/null || {
  echo "semver: the baseline commit $base is not in this clone and could not be fetched" >&2
  exit 3
}
echo "semver: pgbufpool $(grep -m1 '^version' crates/bufpool/Cargo.toml | cut -d'"' -f2) against the release at ${base:0:12}" >&2
cargo semver-checks -p pgbufpool --baseline-rev "$base"
