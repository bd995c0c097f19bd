#!/bin/sh
# The end-to-end load harness, in one command (see bench/README.md):
#   bench/load.sh [--seconds N] [--rounds N] [--quick] [--out DIR]
# Builds the release cborgate and the harness together (one cargo invocation, so
# nothing is rebuilt twice), then runs the harness, which rewrites
# bench/RESULTS.md and bench/results.png.
set -eu
cd "$(dirname "$0")/.."
cargo build --release --locked -p cborgate -p cborgate-load
target="${CARGO_TARGET_DIR:-target}"
exec "$target/release/cborgate-load" --cborgate "$target/release/cborgate" "$@"
