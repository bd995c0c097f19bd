#!/bin/sh
# The end-to-end load harness, in one command (see bench/README.md):
#   bench/load.sh [--seconds N] [--rounds N] [--quick] [--no-anchors] [--shared-cores] [--out DIR]
#                 [--only SCENARIO] [--tls-connections N]
# Installs the anchors (haproxy and nginx, from Debian packages) when they are missing
# and it may (as root, or with passwordless sudo), then builds the release cborgate and
# the harness together (one cargo invocation, so nothing is rebuilt twice), then runs
# the harness, which rewrites bench/RESULTS.md and bench/results.png. Without the
# anchors the run still completes; it says which one is skipped and why.
set -eu
cd "$(dirname "$0")/.."

found() {
  command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/local/sbin/$1" ]
}

anchors=yes
for a in "$@"; do
  [ "$a" = "--no-anchors" ] && anchors=no
done
missing=""
if [ "$anchors" = yes ]; then
  for p in haproxy nginx; do
    found "$p" || missing="$missing $p"
  done
fi
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then
    as_root=""
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root="sudo -n"
  else
    as_root="none"
  fi
  if [ "$as_root" = none ]; then
    echo "load.sh: cannot install$missing (not root, no passwordless sudo); the harness skips that anchor" >&2
  elif ! command -v apt-get >/dev/null 2>&1; then
    echo "load.sh: cannot install$missing (no apt-get on this machine); the harness skips that anchor" >&2
  else
    echo "load.sh: installing$missing from Debian packages" >&2
    # shellcheck disable=SC2086 # word splitting intended: the package list, the sudo prefix
    if ! $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >/dev/null; then
      # A fresh machine may have no package lists yet.
      $as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null || true
      $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >/dev/null ||
        echo "load.sh: installing$missing failed; the harness skips what is still missing" >&2
    fi
  fi
fi

cargo build --release --locked -p cborgate -p cborgate-load
target="${CARGO_TARGET_DIR:-target}"
exec "$target/release/cborgate-load" --cborgate "$target/release/cborgate" "$@"
