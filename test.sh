#!/usr/bin/env bash
# The whole test suite: the README's test command, and what CI runs.
set -euo pipefail
cd "$(dirname "$0")"
cargo test --locked --all-targets
