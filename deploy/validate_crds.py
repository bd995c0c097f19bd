#!/usr/bin/env python3
"""Offline checks for deploy/ that a JSON schema alone does not cover.

Used by validate.sh; needs PyYAML and kubernetes-validate (validate.sh installs both).

  validate_crds.py check [--k8s-version V] [--wire docs/wire.md] FILE...
      Every YAML document in FILE... (rendered kustomizations or raw manifests):
      - built-in kinds: strict JSON-schema validation with kubernetes-validate
        against Kubernetes V (APIService included: the package bundles it);
      - ServiceMonitor, PrometheusRule (monitoring.coreos.com/v1): structural checks
        (required fields, types, durations, one of alert/record, balanced PromQL;
        recording rules named level:metric:operations, each once, and a recorded
        series used only after the rule that records it, in the same group);
      - any other kind: an error (nothing here may go unchecked);
      - with --cross-refs (all rendered bases at once): the ServiceMonitor selects
        rendered Services that have its port name;
      - cborgate containers: only the documented `serve` flags, ports and probes
        that agree with --listen/--admin;
      - every cborgate_* metric in PrometheusRule expressions and in Grafana
        dashboards (JSON files, or ConfigMaps labelled grafana_dashboard) is a
        family of docs/wire.md section 6 (histograms may add _bucket/_sum/_count),
        with only that family's labels (plus target labels); dashboards must
        show every family, with unique panel ids and no two panels overlapping
        on the grid;
      - every selector of cborgate_request_duration_seconds_bucket leaves out
        the long-running verbs WATCH and CONNECT (as verb!~"WATCH|CONNECT", the
        by-verb panel's matcher), whose duration is the stream's lifetime.
      Exit status 1 if anything is wrong.

  validate_crds.py render DIR
      Minimal kustomize stand-in (used only when no kustomize binary could be
      installed): resources, namespace, commonLabels, images, configMapGenerator
      and generatorOptions. Prints the multi-document YAML on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

import yaml

# --------------------------------------------------------------------------
# docs/wire.md section 6, used when the spec file is not found (validate.sh passes it).
# When it is found, the spec wins (see load_families).
EMBEDDED_FAMILIES: Dict[str, Tuple[Set[str], bool]] = {
    "cborgate_requests_total": ({"verb", "code", "request_format", "response_format"}, False),
    "cborgate_request_duration_seconds": ({"verb", "response_format"}, True),
    "cborgate_codec_duration_seconds": ({"direction", "from", "to"}, True),
    "cborgate_codec_bytes_total": ({"direction", "format"}, False),
    "cborgate_fallbacks_total": ({"reason"}, False),
    "cborgate_unsupported_media_type_total": ({"origin"}, False),
    "cborgate_not_acceptable_total": ({"origin"}, False),
    "cborgate_transcode_errors_total": ({"direction", "reason"}, False),
    "cborgate_watch_streams_active": (set(), False),
    "cborgate_watch_events_total": ({"format"}, False),
    "cborgate_upgrades_active": ({"protocol"}, False),
    "cborgate_build_info": ({"version"}, False),
}
# Labels Prometheus / the Prometheus Operator attach to every scraped series.
TARGET_LABELS = {"namespace", "job", "pod", "instance", "service", "container", "endpoint"}
HIST_SUFFIXES = ("_bucket", "_sum", "_count")

# The `cborgate serve` flags deploy/ may use, and whether each takes a value.
SERVE_FLAGS = {
    "--config": True, "--listen": True, "--upstream": True, "--admin": True, "--mode": True,
    "--tls-cert": True, "--tls-key": True, "--upstream-ca": True,
    "--upstream-client-cert": True, "--upstream-client-key": True,
    "--client-ca-file": True, "--requestheader-client-ca-file": True,
    "--requestheader-allowed-names": True, "--requestheader-username-headers": True,
    "--requestheader-group-headers": True, "--requestheader-extra-headers-prefix": True,
    "--forwarded-for": True, "--tls-min-version": True, "--tls-cipher-suites": True,
    "--shutdown-delay-seconds": True, "--grace-period-seconds": True,
    "--threads": True, "--idle-timeout-seconds": True, "--request-read-timeout-seconds": True,
    "--request-head-timeout-seconds": True, "--max-connections": True,
    "--http2-max-streams": True, "--write-buffer-bytes": True, "--max-header-bytes": True, "--max-requests-inflight": True,
    "--max-long-running-requests": True, "--max-buffered-body-bytes": True,
    "--upstream-connect-timeout-ms": True, "--upstream-response-header-timeout-seconds": True,
    "--upstream-max-request-body-bytes": True, "--upstream-capability-ttl-seconds": True,
    "--upstream-http2": True, "--upstream-http2-max-streams": True,
    "--codec-window-bytes": True, "--codec-strings": True, "--codec-max-depth": True,
    "--codec-max-string-bytes": True, "--codec-max-request-body-bytes": True,
    "--metrics-max-resources": True,
    "--cbor-protection-user-agents": True, "--cbor-protection-max-elements": True,
    "--cbor-protection-hold-bytes": True,
    "--log-level": True, "--log-format": True, "--log-queue-lines": True,
    # Booleans: `--flag` alone is true; a value only as `--flag=true|false`.
    "--compress-responses": False, "--upstream-insecure-skip-verify": False,
    "--cbor-protection-enabled": False, "--cbor-protection-all-clients": False,
}
MODES = {"auto", "legacy", "native", "upgrade"}

CLUSTER_SCOPED = {
    "Namespace", "ClusterRole", "ClusterRoleBinding", "APIService", "CustomResourceDefinition",
    "PriorityClass", "StorageClass", "PersistentVolume", "Node", "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration", "IngressClass", "RuntimeClass",
}

DURATION_RE = re.compile(r"^(0|(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?)$")
LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
RECORD_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_:]*[a-zA-Z0-9_]$")


class Problems:
    def __init__(self) -> None:
        self.items: List[str] = []

    def add(self, where: str, msg: str) -> None:
        self.items.append(f"{where}: {msg}")


# --------------------------------------------------------------------------
# Metric families


def load_families(wire: Optional[str]) -> Tuple[Dict[str, Tuple[Set[str], bool]], str]:
    if not wire or not os.path.isfile(wire):
        return EMBEDDED_FAMILIES, "embedded copy of docs/wire.md section 6"
    text = open(wire, encoding="utf-8").read()
    m = re.search(r"^## 6\..*?$(.*?)(?=^## )", text, re.S | re.M)
    if not m:
        raise SystemExit(f"{wire}: no '## 6.' section found")
    fams: Dict[str, Tuple[Set[str], bool]] = {}
    for line in m.group(1).splitlines():
        for name, labels in re.findall(r"`(cborgate_[a-z0-9_]+)(?:\{([a-z0-9_,\s]*)\})?`", line):
            fams[name] = ({l.strip() for l in labels.split(",") if l.strip()}, "histogram" in line)
    if not fams:
        raise SystemExit(f"{wire}: section 6 lists no cborgate_* metric")
    return fams, wire


def family_of(token: str, fams: Dict[str, Tuple[Set[str], bool]]) -> Optional[str]:
    if token in fams:
        return token
    for suf in HIST_SUFFIXES:
        base = token[: -len(suf)]
        if token.endswith(suf) and base in fams and fams[base][1]:
            return base
    return None


def matching_paren(s: str, i: int) -> int:
    """Index of the ')' or '}' closing the bracket at s[i], or -1."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack = [pairs[s[i]]]
    j = i + 1
    in_str: Optional[str] = None
    while j < len(s):
        c = s[j]
        if in_str:
            if c == "\\":
                j += 1
            elif c == in_str:
                in_str = None
        elif c in "\"'`":
            in_str = c
        elif c in pairs:
            stack.append(pairs[c])
        elif c in ")}]":
            if c != stack.pop():
                return -1
            if not stack:
                return j
        j += 1
    return -1


# Requests whose duration is the lifetime of a stream (docs/wire.md section 6 verbs).
LONG_RUNNING_VERBS = ("WATCH", "CONNECT")


def excludes_long_running(selector: str) -> bool:
    """True if the label matchers in `selector` (the text between the braces)
    keep every long-running verb out: a verb!~ / verb!= naming each one, or a
    verb= / verb=~ naming none of them."""
    excluded: Set[str] = set()
    for m in re.finditer(r'\bverb\s*(=~|!~|!=|=)\s*"([^"]*)"', selector):
        op, alts = m.group(1), set(m.group(2).split("|"))
        if op in ("!~", "!="):
            excluded |= alts
        elif not alts & set(LONG_RUNNING_VERBS):
            return True
    return set(LONG_RUNNING_VERBS) <= excluded


def check_promql(where: str, expr: str, fams, problems: Problems,
                 legends: Iterable[str] = (), seen: Optional[Set[str]] = None) -> None:
    # Balanced brackets (outside strings).
    depth: List[str] = []
    in_str: Optional[str] = None
    pairs = {"(": ")", "{": "}", "[": "]"}
    k = 0
    while k < len(expr):
        c = expr[k]
        if in_str:
            if c == "\\":
                k += 1
            elif c == in_str:
                in_str = None
        elif c in "\"'`":
            in_str = c
        elif c in pairs:
            depth.append(pairs[c])
        elif c in ")}]":
            if not depth or depth.pop() != c:
                problems.add(where, f"unbalanced '{c}' in: {expr.strip()}")
                return
        k += 1
    if depth or in_str:
        problems.add(where, f"unbalanced brackets or quotes in: {expr.strip()}")
        return

    allowed: Set[str] = set(TARGET_LABELS)
    uses_bucket = False
    # (A recorded series, `cborgate_request:burnrate1h`, is not a family.)
    for m in re.finditer(r"\bcborgate_[a-zA-Z0-9_]+(?![a-zA-Z0-9_:])", expr):
        tok = m.group(0)
        fam = family_of(tok, fams)
        if fam is None:
            problems.add(where, f"metric {tok} is not a docs/wire.md section 6 family")
            continue
        if seen is not None:
            seen.add(fam)
        own = set(fams[fam][0]) | TARGET_LABELS
        if tok.endswith("_bucket"):
            own.add("le")
            uses_bucket = True
        allowed |= own
        j = m.end()
        body = ""
        if j < len(expr) and expr[j] == "{":
            end = matching_paren(expr, j)
            body = expr[j + 1:end]
            for lm in re.finditer(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)", body):
                if lm.group(1) not in own:
                    problems.add(where, f"{tok} has no label '{lm.group(1)}' (docs/wire.md: {sorted(fams[fam][0])})")
        if tok == "cborgate_request_duration_seconds_bucket" and not excludes_long_running(body):
            problems.add(where, f"{tok} without verb!~\"{'|'.join(LONG_RUNNING_VERBS)}\": "
                                "watches and CONNECT streams would set the quantiles")
    if uses_bucket:
        allowed.add("le")
    if "cborgate_" in expr:
        for m in re.finditer(r"\b(by|without)\s*\(([^)]*)\)", expr):
            for lab in (l.strip() for l in m.group(2).split(",")):
                if lab and lab not in allowed:
                    problems.add(where, f"grouping label '{lab}' is not a label of the metrics used")
        for leg in legends:
            for lab in re.findall(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}", leg or ""):
                if lab not in allowed:
                    problems.add(where, f"legend uses label '{lab}' that the query cannot have")


def check_dashboard(where: str, dash: Any, fams, problems: Problems) -> int:
    if not isinstance(dash, dict) or not isinstance(dash.get("panels"), list):
        problems.add(where, "not a Grafana dashboard (no panels list)")
        return 0
    if not dash.get("title") or not dash.get("uid"):
        problems.add(where, "dashboard needs a title and a uid")
    seen: Set[str] = set()
    count = 0

    def walk(panels: List[Any]) -> None:
        nonlocal count
        for p in panels:
            if not isinstance(p, dict):
                problems.add(where, "panel is not an object")
                continue
            if p.get("type") == "row":
                walk(p.get("panels") or [])
                continue
            count += 1
            title = p.get("title") or f"panel {p.get('id')}"
            targets = p.get("targets") or []
            if not targets:
                problems.add(where, f"panel '{title}' has no query")
            for t in targets:
                expr = t.get("expr", "")
                if not expr:
                    problems.add(where, f"panel '{title}' target {t.get('refId')} has no expr")
                check_promql(f"{where} panel '{title}'", expr, fams, problems,
                             legends=[t.get("legendFormat", "")], seen=seen)
            gp = p.get("gridPos") or {}
            if not all(isinstance(gp.get(k), int) for k in ("h", "w", "x", "y")):
                problems.add(where, f"panel '{title}' has no complete gridPos")
    walk(dash["panels"])
    every = [p for p in dash["panels"] if isinstance(p, dict)]
    every += [q for p in every if p.get("type") == "row" for q in (p.get("panels") or []) if isinstance(q, dict)]
    ids = [p.get("id") for p in every]
    if len(ids) != len(set(ids)):
        dup = sorted({i for i in ids if ids.count(i) > 1}, key=str)
        problems.add(where, f"duplicate panel ids: {dup}")
    # Panels laid out on the page (not those inside a collapsed row) must not overlap.
    placed = []
    for p in dash["panels"]:
        if not isinstance(p, dict):
            continue
        gp = p.get("gridPos") or {}
        if all(isinstance(gp.get(k), int) for k in ("h", "w", "x", "y")):
            placed.append((p.get("title") or f"panel {p.get('id')}", gp))
        if gp.get("x", 0) + gp.get("w", 0) > 24:
            problems.add(where, f"panel '{p.get('title')}' is wider than the 24-column grid")
    for i, (ta, a) in enumerate(placed):
        for tb, b in placed[i + 1:]:
            if (a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"]
                    and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]):
                problems.add(where, f"panels '{ta}' and '{tb}' overlap (gridPos)")
    for var in (dash.get("templating") or {}).get("list", []):
        q = var.get("query")
        q = q.get("query", "") if isinstance(q, dict) else (q or "")
        if "cborgate_" in q:
            check_promql(f"{where} variable '{var.get('name')}'", q, fams, problems, seen=seen)
    missing = sorted(set(fams) - seen)
    if missing:
        problems.add(where, f"dashboard shows no panel for: {', '.join(missing)}")
    return count


# --------------------------------------------------------------------------
# Custom resources (structural)


def need(obj: Any, key: str, typ, where: str, problems: Problems, what: str = "") -> Any:
    if not isinstance(obj, dict) or key not in obj:
        problems.add(where, f"missing {what or key}")
        return None
    val = obj[key]
    if not isinstance(val, typ) or (isinstance(val, (str, list, dict)) and not val and typ is not dict):
        problems.add(where, f"{what or key} must be a non-empty {getattr(typ, '__name__', typ)}")
        return None
    return val


def check_str_map(obj: Any, where: str, problems: Problems) -> None:
    if obj is None:
        return
    if not isinstance(obj, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in obj.items()):
        problems.add(where, "must map strings to strings")


SM_SPEC_KEYS = {"jobLabel", "targetLabels", "podTargetLabels", "endpoints", "selector", "selectorMechanism",
                "namespaceSelector", "sampleLimit", "scrapeProtocols", "fallbackScrapeProtocol",
                "targetLimit", "labelLimit", "labelNameLengthLimit", "labelValueLengthLimit",
                "scrapeClassicHistograms", "nativeHistogramBucketLimit", "nativeHistogramMinBucketFactor",
                "convertClassicHistogramsToNHCB", "keepDroppedTargets", "attachMetadata", "scrapeClass",
                "bodySizeLimit", "serviceDiscoveryRole"}
SM_EP_KEYS = {"port", "targetPort", "path", "scheme", "params", "interval", "scrapeTimeout", "tlsConfig",
              "bearerTokenFile", "bearerTokenSecret", "authorization", "honorLabels", "honorTimestamps",
              "trackTimestampsStaleness", "basicAuth", "oauth2", "metricRelabelings", "relabelings",
              "proxyUrl", "noProxy", "proxyFromEnvironment", "proxyConnectHeader", "followRedirects",
              "enableHttp2", "filterRunning"}


def scrape_endpoints(where: str, spec: dict, field: str, keys: Set[str], problems: Problems):
    """The endpoint objects of a ServiceMonitor or PodMonitor, with what both check:
    objects, known fields, Prometheus durations."""
    for i, ep in enumerate(need(spec, field, list, where, problems, f"spec.{field}") or []):
        w = f"{where} spec.{field}[{i}]"
        if not isinstance(ep, dict):
            problems.add(w, "must be an object")
            continue
        for k in ep:
            if k not in keys:
                problems.add(w, f"unknown field {k}")
        for k in ("interval", "scrapeTimeout"):
            if k in ep and not (isinstance(ep[k], str) and DURATION_RE.match(ep[k])):
                problems.add(w, f"{k} is not a Prometheus duration: {ep[k]!r}")
        yield w, ep


def monitor_spec(where: str, doc: dict, keys: Set[str], problems: Problems) -> Tuple[Optional[dict], Optional[dict]]:
    """A ServiceMonitor's or PodMonitor's spec (known fields only) and its selector."""
    spec = need(doc, "spec", dict, where, problems, "spec")
    if spec is None:
        return None, None
    for k in spec:
        if k not in keys:
            problems.add(where, f"unknown field spec.{k}")
    sel = need(spec, "selector", dict, where, problems, "spec.selector")
    if sel is not None and not sel.get("matchLabels") and not sel.get("matchExpressions"):
        problems.add(where, "spec.selector selects everything: give matchLabels or matchExpressions")
    return spec, sel


def check_servicemonitor(where: str, doc: dict, problems: Problems, services: Optional[Dict[str, dict]]) -> None:
    spec, sel = monitor_spec(where, doc, SM_SPEC_KEYS, problems)
    if spec is None:
        return
    if sel is not None:
        check_str_map(sel.get("matchLabels"), where + " spec.selector.matchLabels", problems)
    ns = spec.get("namespaceSelector")
    if ns is not None:
        if not isinstance(ns, dict) or set(ns) - {"any", "matchNames"}:
            problems.add(where, "spec.namespaceSelector takes only any and matchNames")
        elif "any" in ns and not isinstance(ns["any"], bool):
            problems.add(where, "spec.namespaceSelector.any must be a boolean")
    for w, ep in scrape_endpoints(where, spec, "endpoints", SM_EP_KEYS, problems):
        if "port" not in ep and "targetPort" not in ep:
            problems.add(w, "needs port (a Service port name) or targetPort")
        if "port" in ep and not isinstance(ep["port"], str):
            problems.add(w, "port must be a Service port *name*")
        if ep.get("scheme", "http") not in ("http", "https", "HTTP", "HTTPS"):
            problems.add(w, "scheme must be http or https")
        if "path" in ep and not str(ep["path"]).startswith("/"):
            problems.add(w, "path must start with /")
        # The port name must exist on a rendered Service that the selector matches
        # (checked when the run includes Services, i.e. all bases together).
        if isinstance(ep.get("port"), str) and services is not None and sel and isinstance(sel.get("matchLabels"), dict):
            want = sel["matchLabels"]
            hits = [s for s in services.values() if all(s["labels"].get(k) == v for k, v in want.items())]
            if not hits:
                problems.add(w, f"selects no rendered Service (labels {want})")
            for s in hits:
                if ep["port"] not in s["ports"]:
                    problems.add(w, f"Service {s['name']} selected but has no port named {ep['port']!r}")


PM_SPEC_KEYS = SM_SPEC_KEYS - {"endpoints", "targetLabels"} | {"podMetricsEndpoints"}
PM_EP_KEYS = (SM_EP_KEYS - {"targetPort", "bearerTokenFile"}) | {"portNumber"}


def check_podmonitor(where: str, doc: dict, problems: Problems) -> None:
    spec, _ = monitor_spec(where, doc, PM_SPEC_KEYS, problems)
    if spec is None:
        return
    for w, ep in scrape_endpoints(where, spec, "podMetricsEndpoints", PM_EP_KEYS, problems):
        if not isinstance(ep.get("port"), str):
            problems.add(w, "port must be a container port *name*")


# kubeadm's configuration kinds (kubeadm.k8s.io/v1beta4): top-level fields only.
KUBEADM_KINDS = {
    "InitConfiguration": {"bootstrapTokens", "dryRun", "nodeRegistration", "localAPIEndpoint",
                          "certificateKey", "skipPhases", "patches", "timeouts"},
    "ClusterConfiguration": {"etcd", "networking", "kubernetesVersion", "controlPlaneEndpoint", "apiServer",
                             "controllerManager", "scheduler", "dns", "proxy", "certificatesDir",
                             "imageRepository", "featureGates", "clusterName", "encryptionAlgorithm",
                             "certificateValidityPeriod", "caCertificateValidityPeriod"},
    "JoinConfiguration": {"dryRun", "nodeRegistration", "caCertPath", "discovery", "controlPlane",
                          "skipPhases", "patches", "timeouts"},
    "UpgradeConfiguration": {"apply", "node", "diff", "plan", "timeouts"},
}


def check_kubeadm(where: str, doc: dict, problems: Problems) -> None:
    kind = doc.get("kind")
    if doc.get("apiVersion") != "kubeadm.k8s.io/v1beta4":
        problems.add(where, "kubeadm configuration must be kubeadm.k8s.io/v1beta4 (kubeadm 1.31 and later)")
    for k in doc:
        if k not in KUBEADM_KINDS[kind] | {"apiVersion", "kind"}:
            problems.add(where, f"unknown field {k} for {kind}")
    for k in ("extraArgs",):
        for comp in ("apiServer", "controllerManager", "scheduler"):
            args = (doc.get(comp) or {}).get(k)
            if args is not None and not (isinstance(args, list) and all(
                    isinstance(a, dict) and set(a) == {"name", "value"} for a in args)):
                problems.add(where, f"{comp}.{k} must be a list of {{name, value}} (v1beta4)")


def toml_loads(text: str) -> dict:
    try:
        import tomllib  # Python 3.11+
    except ImportError:  # pragma: no cover
        raise SystemExit("validate_crds.py needs Python 3.11 or later (tomllib)")
    return tomllib.loads(text)


def cborgate_opts(c: dict) -> Dict[str, str]:
    """`--flag value` / `--flag=value` pairs of a cborgate container's args."""
    args = [str(a) for a in (c.get("args") or [])]
    opts: Dict[str, str] = {}
    i = 1
    while i < len(args):
        flag, eq, val = args[i].partition("=")
        if not eq and i + 1 < len(args) and not args[i + 1].startswith("--"):
            val = args[i + 1]
            i += 1
        opts[flag] = val
        i += 1
    return opts


def config_text(opts: Dict[str, str], c: dict, ps: dict, configmaps: Dict[str, dict],
                host_files: Dict[str, str]) -> Tuple[Optional[str], str]:
    """The text of the container's --config file, and where it came from."""
    path = opts.get("--config")
    if not path:
        return "", "no --config (built-in defaults)"
    vols = {v.get("name"): v for v in ps.get("volumes") or []}
    for m in c.get("volumeMounts") or []:
        mp = m.get("mountPath", "")
        if path != mp and not path.startswith(mp.rstrip("/") + "/"):
            continue
        v = vols.get(m.get("name")) or {}
        if "configMap" in v:
            key = m.get("subPath") or path[len(mp.rstrip("/")) + 1:]
            cm = configmaps.get(v["configMap"].get("name"))
            if cm is None:
                return None, f"ConfigMap {v['configMap'].get('name')} is not in the same manifests"
            return (cm.get("data") or {}).get(key), f"ConfigMap {v['configMap'].get('name')} key {key}"
        if "hostPath" in v:
            host = v["hostPath"].get("path", "") + path[len(mp):]
            if host in host_files:
                return open(host_files[host], encoding="utf-8").read(), host_files[host]
            return None, f"host file {host} (give --host-file {host}=REPO_FILE)"
        return None, f"volume {m.get('name')} is neither a ConfigMap nor a hostPath"
    return None, f"--config {path} is not mounted"


def check_shutdown(where: str, c: dict, ps: dict, configmaps: Dict[str, dict], host_files: Dict[str, str],
                   problems: Problems) -> None:
    """Every manifest drains: a shutdown delay > 0 and terminationGracePeriodSeconds above
    delay + grace period (README "SIGTERM")."""
    opts = cborgate_opts(c)
    text, src = config_text(opts, c, ps, configmaps, host_files)
    if text is None:
        problems.add(where, f"cannot read cborgate's configuration: {src}")
        return
    server = toml_loads(text).get("server", {})
    delay = int(opts.get("--shutdown-delay-seconds", server.get("shutdown_delay_seconds", 0)))
    grace = int(opts.get("--grace-period-seconds", server.get("grace_period_seconds", 30)))
    tgps = ps.get("terminationGracePeriodSeconds", 30)
    if delay <= 0:
        problems.add(where, f"server.shutdown_delay_seconds is {delay} ({src}): set a few seconds, "
                            "so endpoints stop sending before the listener closes")
    if tgps < delay + grace:
        problems.add(where, f"terminationGracePeriodSeconds {tgps} is below shutdown delay {delay} + "
                            f"grace period {grace} ({src}): the kubelet kills the drain")


SHARED_ACK = "cborgate.io/shared-front-proxy-credential"


def check_credentials(where: str, doc: dict, ps: dict, problems: Problems) -> None:
    """No workload gets a credential the main apiserver trusts for X-Remote-* headers
    (kubeadm's front-proxy client certificate) without an explicit, annotated opt-in.
    The kube-apiserver static pod (kube-system/kube-apiserver) uses the node's own copy."""
    meta = doc.get("metadata") or {}
    static_apiserver = (doc.get("kind") == "Pod" and meta.get("name") == "kube-apiserver"
                        and ps.get("hostNetwork") is True)
    tmeta = meta if doc.get("kind") == "Pod" else ((doc.get("spec") or {}).get("template") or {}).get("metadata") or {}
    acked = ((tmeta.get("annotations") or {}).get(SHARED_ACK) == "acknowledged")
    for v in ps.get("volumes") or []:
        name = None
        if "secret" in v:
            name = f"Secret {v['secret'].get('secretName')}"
            shared = "front-proxy" in str(v["secret"].get("secretName", ""))
        elif "hostPath" in v:
            name = f"hostPath {v['hostPath'].get('path')}"
            shared = re.search(r"front-proxy-client\.key$|/pki/?$", str(v["hostPath"].get("path", ""))) is not None
        elif "projected" in v:
            srcs = [s.get("secret", {}).get("name", "") for s in v["projected"].get("sources") or []]
            name = f"projected Secret(s) {srcs}"
            shared = any("front-proxy" in s for s in srcs)
        else:
            continue
        if shared and not static_apiserver and not acked:
            problems.add(where, f"volume {v.get('name')} ({name}) looks like the front-proxy client credential "
                                "that the main apiserver trusts for X-Remote-* headers (anyone who can read it "
                                f"can act as system:masters): opt in with the pod annotation {SHARED_ACK}: "
                                "acknowledged, next to the warning, or use a CA only the aggregated server trusts")


ADMIN_OK = re.compile(r"^(127\.0\.0\.1|\[127\.0\.0\.1\]|\[::1\]|localhost|\$\(POD_IP\)|\$\(NODE_IP\)"
                      r"|\[\$\(POD_IP\)\]|\[\$\(NODE_IP\)\]):\d+$")

# The pod's or node's address, as the downward API fills $(POD_IP)/$(NODE_IP), in each family.
FAMILY_ADDRS = {"IPv4": "192.0.2.10", "IPv6": "fd00::5"}


def listen_addr_error(addr: str, family: str) -> Optional[str]:
    """Why cborgate would refuse `addr`, or not serve `family` on it (None: fine). The
    binary's rule (src/config.rs listen_addr, docs/surface.md): IPv4:PORT, [IP]:PORT for
    either family, HOST:PORT, or :PORT (every address)."""
    import ipaddress
    m = re.fullmatch(r"\[([^\]]*)\]:(\d{1,5})", addr) or re.fullmatch(r"()?:(\d{1,5})", addr) \
        or re.fullmatch(r"([^:\[\]]+):(\d{1,5})", addr)
    if not m or int(m.group(2)) > 65535:
        return "not IPv4:PORT, [IP]:PORT or :PORT (cborgate exits 2)"
    host = m.group(1) or ""
    if not host:
        return None
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if addr.startswith("["):
            return f"[{host}] is not an IP address (cborgate exits 2)"
        return None  # a host name
    if family == "IPv6" and ip.version == 4:
        return f"{host} is IPv4 only: an IPv6-only pod is not served (use :PORT or [$(POD_IP)]:PORT)"
    return None


def check_address_families(where: str, c: dict, problems: Problems) -> None:
    """Each kit must work in IPv4, IPv6 and dual-stack clusters: render --listen and --admin
    with an address of each family for $(POD_IP)/$(NODE_IP) and check cborgate takes it."""
    opts = cborgate_opts(c)
    for f in ("--listen", "--admin"):
        if f not in opts:
            continue
        for family, ip in FAMILY_ADDRS.items():
            rendered = re.sub(r"\$\((POD_IP|NODE_IP)\)", ip, opts[f])
            err = listen_addr_error(rendered, family)
            if err:
                problems.add(where, f"{f} {opts[f]} in an {family} pod is {rendered}: {err}")


def check_admin_bind(where: str, c: dict, problems: Problems) -> None:
    """The admin listener (/metrics, /debug/capabilities) has no authentication: never
    0.0.0.0; loopback, or the pod's or node's own address from the downward API."""
    admin = cborgate_opts(c).get("--admin", "")
    if admin and not ADMIN_OK.match(admin):
        problems.add(where, f"--admin {admin}: the unauthenticated admin listener must bind loopback, "
                            "$(POD_IP) or $(NODE_IP) (downward API), never every address")
    env = {e.get("name"): e for e in c.get("env") or []}
    for var, field in (("POD_IP", "status.podIP"), ("NODE_IP", "status.hostIP")):
        if f"$({var})" in " ".join(str(a) for a in c.get("args") or []):
            got = (((env.get(var) or {}).get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
            if got != field:
                problems.add(where, f"$({var}) is used but env {var} is not fieldRef {field}")


def check_prometheusrule(where: str, doc: dict, fams, problems: Problems) -> int:
    spec = need(doc, "spec", dict, where, problems, "spec")
    if spec is None:
        return 0
    n = 0
    groups = need(spec, "groups", list, where, problems, "spec.groups")
    gnames: Set[str] = set()
    records: Set[Tuple[str, Tuple]] = set()
    for gi, g in enumerate(groups or []):
        w = f"{where} group[{gi}]"
        if not isinstance(g, dict):
            problems.add(w, "must be an object")
            continue
        name = need(g, "name", str, w, problems, "name")
        if name in gnames:
            problems.add(w, f"duplicate group name {name}")
        gnames.add(name)
        if "interval" in g and not DURATION_RE.match(str(g["interval"])):
            problems.add(w, "interval is not a duration")
        rules = need(g, "rules", list, w, problems, "rules")
        recorded_here: Set[str] = set()
        for ri, r in enumerate(rules or []):
            rw = f"{w} rule[{ri}]"
            if not isinstance(r, dict):
                problems.add(rw, "must be an object")
                continue
            if ("alert" in r) == ("record" in r):
                problems.add(rw, "needs exactly one of alert and record")
            name = r.get("alert") or r.get("record")
            rw = f"{where} {name or rw}"
            if "alert" in r and not LABEL_NAME_RE.match(str(r["alert"])):
                problems.add(rw, "alert name must match [a-zA-Z_][a-zA-Z0-9_]*")
            if "record" in r:
                rec = str(r["record"])
                # Recorded series are named level:metric:operations.
                if not RECORD_NAME_RE.match(rec):
                    problems.add(rw, "record name must be level:metric:operations ([a-zA-Z_:][a-zA-Z0-9_:]* with colons)")
                # The same name with other labels is another series (the mixin's
                # burn rates: verb="read" and verb="write").
                key = (rec, tuple(sorted((r.get("labels") or {}).items())))
                if key in records:
                    problems.add(rw, f"{rec} is recorded twice")
                records.add(key)
            # A recorded series used here is recorded before, in the same group (Prometheus
            # evaluates a group's rules in order; anything else reads a stale or no value).
            for used in re.findall(r"\bcborgate[a-zA-Z0-9_]*:[a-zA-Z0-9_:]+", str(r.get("expr", ""))):
                if used not in recorded_here:
                    problems.add(rw, f"{used} is not recorded earlier in this group")
            if "record" in r:
                recorded_here.add(str(r["record"]))
            for k in r:
                if k not in {"alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"}:
                    problems.add(rw, f"unknown field {k}")
            expr = r.get("expr")
            if not isinstance(expr, (str, int)) or (isinstance(expr, str) and not expr.strip()):
                problems.add(rw, "expr must be a non-empty PromQL string")
            else:
                check_promql(rw, str(expr), fams, problems)
            for k in ("for", "keep_firing_for"):
                if k in r and not (isinstance(r[k], str) and DURATION_RE.match(r[k])):
                    problems.add(rw, f"{k} is not a duration: {r[k]!r}")
            check_str_map(r.get("labels"), rw + " labels", problems)
            check_str_map(r.get("annotations"), rw + " annotations", problems)
            if "alert" in r:
                labels = r.get("labels") or {}
                ann = r.get("annotations") or {}
                if labels.get("severity") not in ("critical", "warning", "info"):
                    problems.add(rw, "labels.severity must be critical, warning or info")
                for k in ("summary", "description"):
                    if not ann.get(k):
                        problems.add(rw, f"annotations.{k} is missing")
                if not (ann.get("runbook_url") or ann.get("runbook")):
                    problems.add(rw, "annotations need a runbook or runbook_url")
                for k, v in ann.items():
                    if isinstance(v, str) and v.count("{{") != v.count("}}"):
                        problems.add(rw, f"annotations.{k} has unbalanced {{{{ }}}}")
            n += 1
    return n


# --------------------------------------------------------------------------
# cborgate containers


def port_of(addr: str) -> Optional[int]:
    m = re.match(r"^(?:\[[^\]]+\]|[^:\[\]]*):(\d+)$", addr or "")
    return int(m.group(1)) if m else None


def check_cborgate_container(where: str, c: dict, problems: Problems) -> None:
    check_address_families(where, c, problems)
    args = c.get("args") or []
    if c.get("command"):
        problems.add(where, "use args, not command (the image's ENTRYPOINT is the binary)")
    if not args or args[0] != "serve":
        problems.add(where, "args must start with 'serve'")
        return
    opts: Dict[str, str] = {}
    i = 1
    while i < len(args):
        a = str(args[i])
        flag, eq, val = a.partition("=")
        if flag not in SERVE_FLAGS:
            problems.add(where, f"flag {flag!r} is not one deploy/ may use ({', '.join(SERVE_FLAGS)})")
            i += 1 if eq or i + 1 >= len(args) or str(args[i + 1]).startswith("--") else 2
            continue
        if not SERVE_FLAGS[flag]:
            if eq and val not in ("true", "false"):
                problems.add(where, f"{flag} takes =true or =false, not {val!r}")
            val = val if eq else "true"
        elif not eq:
            if i + 1 >= len(args) or str(args[i + 1]).startswith("--"):
                problems.add(where, f"{flag} needs a value")
                i += 1
                continue
            val = str(args[i + 1])
            i += 1
        if flag in opts:
            problems.add(where, f"{flag} given twice")
        opts[flag] = val
        i += 1
    if opts.get("--mode", "auto") not in MODES:
        problems.add(where, f"--mode must be one of {sorted(MODES)}")
    if "--upstream" in opts and not re.match(r"^https?://", opts["--upstream"]):
        problems.add(where, "--upstream must be http:// or https://")
    if ("--tls-cert" in opts) != ("--tls-key" in opts):
        problems.add(where, "--tls-cert and --tls-key go together")
    if ("--upstream-client-cert" in opts) != ("--upstream-client-key" in opts):
        problems.add(where, "--upstream-client-cert and --upstream-client-key go together")
    for f in ("--client-ca-file", "--requestheader-client-ca-file"):
        # As cborgate's start-up checks: client certificates need the TLS listener and
        # a front-proxy certificate to name identities upstream with.
        if f in opts and "--tls-cert" not in opts:
            problems.add(where, f"{f} needs --tls-cert (client certificates need the TLS listener)")
        if f in opts and "--upstream-client-cert" not in opts:
            problems.add(where, f"{f} needs --upstream-client-cert (the front-proxy client certificate)")
    if "--requestheader-allowed-names" in opts and "--requestheader-client-ca-file" not in opts:
        problems.add(where, "--requestheader-allowed-names needs --requestheader-client-ca-file")
    for f in ("--listen", "--admin"):
        if f not in opts:
            problems.add(where, f"{f} must be given (the built-in default is loopback)")
        elif port_of(opts[f]) is None:
            problems.add(where, f"{f} {opts[f]!r} is not HOST:PORT")
    declared = {p.get("containerPort"): p.get("name") for p in c.get("ports") or []}
    lport, aport = port_of(opts.get("--listen", "")), port_of(opts.get("--admin", ""))
    for f, p in (("--listen", lport), ("--admin", aport)):
        if p is not None and p not in declared:
            problems.add(where, f"{f} port {p} is not a declared containerPort")
    if lport is not None and lport == aport:
        problems.add(where, "--listen and --admin must differ")
    mounts = [m.get("mountPath", "") for m in c.get("volumeMounts") or []]
    for f in ("--config", "--tls-cert", "--tls-key", "--upstream-ca", "--upstream-client-cert", "--upstream-client-key",
              "--client-ca-file", "--requestheader-client-ca-file"):
        if f in opts and not any(opts[f] == m or opts[f].startswith(m.rstrip("/") + "/") for m in mounts):
            problems.add(where, f"{f} {opts[f]} is not inside any volumeMount")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        pr = c.get(probe)
        hg = (pr or {}).get("httpGet")
        if not hg:
            problems.add(where, f"{probe} must be an httpGet on the admin port")
            continue
        port = hg.get("port")
        if isinstance(port, str):
            port = {v: k for k, v in declared.items()}.get(port)
        if port != aport or hg.get("path") != path:
            problems.add(where, f"{probe} must be httpGet {path} on the admin port {aport}")
        if hg.get("scheme", "HTTP") != "HTTP":
            problems.add(where, f"{probe}: the admin listener is plain HTTP")
    sc = c.get("securityContext") or {}
    if sc.get("readOnlyRootFilesystem") is not True or sc.get("allowPrivilegeEscalation") is not False:
        problems.add(where, "securityContext needs readOnlyRootFilesystem: true, allowPrivilegeEscalation: false")
    if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
        problems.add(where, "securityContext must drop ALL capabilities")
    res = c.get("resources") or {}
    if not (res.get("requests") and (res.get("limits") or {}).get("memory")):
        problems.add(where, "resources need requests and a memory limit")


def pod_spec(doc: dict) -> Optional[dict]:
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind == "Pod":
        return spec
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        return (spec.get("template") or {}).get("spec")
    if kind == "CronJob":
        return (((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec")
    return None


# --------------------------------------------------------------------------
# Driver


def load_docs(path: str) -> List[Tuple[str, Any]]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    docs = []
    for i, d in enumerate(yaml.safe_load_all(text)):
        if d is not None:
            docs.append((f"{path}#{i}", d))
    return docs


def cmd_check(args: argparse.Namespace) -> int:
    import kubernetes_validate as kv  # installed by validate.sh
    from kubernetes_validate import utils as kvu

    fams, source = load_families(args.wire)
    problems = Problems()
    counts = {"builtin": 0, "custom": 0, "rules": 0, "panels": 0, "cborgate": 0, "dashboards": 0}
    all_docs: List[Tuple[str, Any]] = []
    for path in args.files:
        if path.endswith(".json"):
            try:
                dash = json.load(open(path, encoding="utf-8"))
            except ValueError as e:
                problems.add(path, f"invalid JSON: {e}")
                continue
            counts["panels"] += check_dashboard(path, dash, fams, problems)
            counts["dashboards"] += 1
            continue
        try:
            all_docs.extend(load_docs(path))
        except yaml.YAMLError as e:
            problems.add(path, f"invalid YAML: {e}")

    # Services' labels and port names, for ServiceMonitor cross-checks.
    services: Dict[str, dict] = {}
    for where, d in all_docs:
        if isinstance(d, dict) and d.get("kind") == "Service":
            meta = d.get("metadata") or {}
            services[where] = {
                "name": f"{meta.get('namespace', '')}/{meta.get('name')}",
                "labels": meta.get("labels") or {},
                "ports": {p.get("name") for p in (d.get("spec") or {}).get("ports") or []},
            }

    configmaps = {(d.get("metadata") or {}).get("name"): d for _, d in all_docs
                  if isinstance(d, dict) and d.get("kind") == "ConfigMap"}
    netpols = [((d.get("spec") or {}).get("podSelector") or {}).get("matchLabels") or {} for _, d in all_docs
               if isinstance(d, dict) and d.get("kind") == "NetworkPolicy"]
    host_files = dict(hf.split("=", 1) for hf in args.host_file)
    for where, d in all_docs:
        if not isinstance(d, dict):
            problems.add(where, "document is not a mapping")
            continue
        kind, api = d.get("kind"), d.get("apiVersion")
        if kind == "Kustomization":
            continue
        name = (d.get("metadata") or {}).get("name")
        if kind in KUBEADM_KINDS and str(api).startswith("kubeadm.k8s.io/"):
            # kubeadm's configuration files have no metadata.
            check_kubeadm(f"{where} {kind}", d, problems)
            counts["custom"] += 1
            continue
        if not kind or not api or not name:
            problems.add(where, "apiVersion, kind and metadata.name are required")
            continue
        w = f"{where} {kind}/{name}"
        if kind == "PodMonitor":
            if api != "monitoring.coreos.com/v1":
                problems.add(w, f"apiVersion must be monitoring.coreos.com/v1, not {api}")
            check_podmonitor(w, d, problems)
            counts["custom"] += 1
            continue
        if kind in ("ServiceMonitor", "PrometheusRule"):
            if api != "monitoring.coreos.com/v1":
                problems.add(w, f"apiVersion must be monitoring.coreos.com/v1, not {api}")
            if not re.match(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", str(name)):
                problems.add(w, "metadata.name is not a valid DNS subdomain")
            if kind == "ServiceMonitor":
                check_servicemonitor(w, d, problems, services if args.cross_refs else None)
            else:
                counts["rules"] += check_prometheusrule(w, d, fams, problems)
            counts["custom"] += 1
            continue
        try:
            kvu.validate(d, args.k8s_version, strict=True)
            counts["builtin"] += 1
        except kvu.SchemaNotFoundError:
            problems.add(w, f"no schema for {api} {kind} in Kubernetes {args.k8s_version} and no structural check")
            continue
        except kvu.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            problems.add(w, f"schema: {e.message} (at {path or '<root>'})")
            continue
        # Beyond the schema.
        ps = pod_spec(d)
        if ps:
            check_credentials(w, d, ps, problems)
            for c in (ps.get("containers") or []) + (ps.get("initContainers") or []):
                if "cborgate" in str(c.get("image", "")):
                    counts["cborgate"] += 1
                    cw = f"{w} container {c.get('name')}"
                    check_cborgate_container(cw, c, problems)
                    check_shutdown(cw, c, ps, configmaps, host_files, problems)
                    check_admin_bind(cw, c, problems)
                    if args.cross_refs and kind != "Pod" and not any(
                            all(tl.get(k) == v for k, v in sel.items())
                            for sel in netpols
                            for tl in [((d.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}]):
                        problems.add(w, "no rendered NetworkPolicy selects this pod: the admin port and the "
                                        "proxy port are open to every pod without one")
                    img = str(c.get("image"))
                    if img != "ghcr.io/example/cborgate:0.1.0":
                        problems.add(w, f"image {img}: deploy/ uses ghcr.io/example/cborgate:0.1.0 throughout")
        if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"):
            sel = ((d.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            tl = (((d.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {}
            if any(tl.get(k) != v for k, v in sel.items()):
                problems.add(w, "spec.selector.matchLabels do not match the pod template labels")
        if kind == "ConfigMap":
            labels = (d.get("metadata") or {}).get("labels") or {}
            for key, val in (d.get("data") or {}).items():
                if key.endswith(".json") and labels.get("grafana_dashboard"):
                    try:
                        dash = json.loads(val)
                    except ValueError as e:
                        problems.add(w, f"data.{key} is not JSON: {e}")
                        continue
                    counts["panels"] += check_dashboard(f"{w} data.{key}", dash, fams, problems)
                    counts["dashboards"] += 1

    for p in problems.items:
        print(f"  FAIL {p}")
    print(f"  {len(all_docs)} documents: {counts['builtin']} built-in (Kubernetes {args.k8s_version}, strict, "
          f"kubernetes-validate {kv.__version__ if hasattr(kv, '__version__') else ''}), "
          f"{counts['custom']} custom resources (structural), {counts['rules']} alert rules, "
          f"{counts['cborgate']} cborgate containers (--listen, --admin rendered for IPv4 and IPv6), {counts['dashboards']} dashboards / {counts['panels']} panels; "
          f"metric families from {source}")
    return 1 if problems.items else 0


# --------------------------------------------------------------------------
# kubeadm: the patched kube-apiserver.yaml

PKI = "/etc/kubernetes/pki/"
LOOPBACK_BIND = "--bind-address=127.0.0.1"
CBORGATE_PKI_FILES = ["apiserver.crt", "apiserver.key", "ca.crt", "front-proxy-ca.crt",
                      "front-proxy-client.crt", "front-proxy-client.key"]


def kubeadm_layout_problems(orig: dict, pod: dict) -> List[str]:
    """What is wrong with kubeadm's kube-apiserver.yaml after deploy/kubeadm's patch, for the
    layout deploy/README.md describes (apiserver on 127.0.0.1:6443 keeping its advertise
    address, cborgate on NODE_IP:6443)."""
    out: List[str] = []
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    ometa, ospec = orig.get("metadata") or {}, orig.get("spec") or {}
    ann = meta.get("annotations") or {}
    if ann.get("kubectl.kubernetes.io/default-container") != "kube-apiserver":
        out.append("annotation kubectl.kubernetes.io/default-container: kube-apiserver is missing")
    adv_key = "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"
    if ann.get(adv_key) != (ometa.get("annotations") or {}).get(adv_key):
        out.append(f"{adv_key} changed: kubeadm upgrade and join read it")
    names = [c.get("name") for c in spec.get("containers") or []]
    if names != ["kube-apiserver", "cborgate"]:
        return out + [f"containers are {names}, not [kube-apiserver, cborgate]"]
    api, cg = spec["containers"]
    oapi = ospec["containers"][0]
    # The apiserver: kubeadm's container, probes on loopback, nothing else changed.
    cmd = api.get("command") or []
    # kubeadm's flags, every one kept, then the per-node loopback bind (kube-apiserver+json.yaml);
    # pflag takes the last --bind-address.
    if cmd != (oapi.get("command") or []) + [LOOPBACK_BIND]:
        out.append(f"the kube-apiserver command must be kubeadm's, unchanged, followed by {LOOPBACK_BIND}")
    binds = [a for a in cmd if a.startswith("--bind-address=")]
    if not binds or binds[-1] != LOOPBACK_BIND:
        out.append(f"kube-apiserver's last --bind-address must be 127.0.0.1, got {binds}")
    adv = next((a.split("=", 1)[1] for a in cmd if a.startswith("--advertise-address=")), None)
    if "--secure-port=6443" not in cmd:
        out.append("kube-apiserver needs --secure-port=6443")
    if not adv or adv.startswith("127."):
        out.append("kube-apiserver needs its node --advertise-address (the endpoint reconciler publishes it)")
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz"), ("startupProbe", "/livez")):
        hg = (api.get(probe) or {}).get("httpGet") or {}
        if (hg.get("host"), hg.get("port"), hg.get("path"), hg.get("scheme")) != ("127.0.0.1", 6443, path, "HTTPS"):
            out.append(f"kube-apiserver {probe} must be HTTPS 127.0.0.1:6443{path}, got {hg}")
        rest = {k: v for k, v in (api.get(probe) or {}).items() if k != "httpGet"}
        orest = {k: v for k, v in (oapi.get(probe) or {}).items() if k != "httpGet"}
        if rest != orest:
            out.append(f"kube-apiserver {probe}: timings changed from kubeadm's")
    if api.get("volumeMounts") != oapi.get("volumeMounts") or api.get("image") != oapi.get("image"):
        out.append("kube-apiserver's image or mounts changed")
    # cborgate: on the advertised address, in front of the loopback apiserver.
    opts = cborgate_opts(cg)
    if opts.get("--listen") != "[$(NODE_IP)]:6443":
        out.append(f"cborgate --listen must be [$(NODE_IP)]:6443 (both families), got {opts.get('--listen')}")
    if "--config" in opts or any("config" in (m.get("name") or "") for m in cg.get("volumeMounts") or []):
        out.append("cborgate must take flags only: a config file missing on a node would stop the apiserver too")
    if opts.get("--upstream") != "https://127.0.0.1:6443":
        out.append(f"cborgate --upstream must be https://127.0.0.1:6443, got {opts.get('--upstream')}")
    env = {e.get("name"): e for e in cg.get("env") or []}
    if (((env.get("NODE_IP") or {}).get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath") != "status.hostIP":
        out.append("cborgate needs env NODE_IP from fieldRef status.hostIP")
    ports = {(p.get("name"), p.get("containerPort")) for p in cg.get("ports") or []}
    if not {("https", 6443), ("metrics", 9464)} <= ports:
        out.append(f"cborgate ports must include https 6443 and metrics 9464, got {sorted(ports)}")
    for f, want in (("--tls-cert", "apiserver.crt"), ("--tls-key", "apiserver.key"), ("--upstream-ca", "ca.crt"),
                    ("--client-ca-file", "ca.crt"), ("--upstream-client-cert", "front-proxy-client.crt"),
                    ("--upstream-client-key", "front-proxy-client.key"),
                    ("--requestheader-client-ca-file", "front-proxy-ca.crt")):
        if opts.get(f) != PKI + want:
            out.append(f"cborgate {f} must be {PKI + want}, got {opts.get(f)}")
    if opts.get("--requestheader-allowed-names") != "front-proxy-client":
        out.append("cborgate --requestheader-allowed-names must be front-proxy-client (kubeadm's)")
    # Volumes: kubeadm's kept as they were; cborgate's six files each mounted alone.
    vols = {v.get("name"): v for v in spec.get("volumes") or []}
    if len(vols) != len(spec.get("volumes") or []):
        out.append("two volumes have the same name")
    for v in ospec.get("volumes") or []:
        if vols.get(v.get("name")) != v:
            out.append(f"kubeadm's volume {v.get('name')} changed or went away")
    mounted = {}
    for m in cg.get("volumeMounts") or []:
        v = vols.get(m.get("name"))
        if v is None:
            out.append(f"cborgate mounts volume {m.get('name')}, which the pod does not have")
            continue
        if m.get("readOnly") is not True:
            out.append(f"cborgate mount {m.get('mountPath')} must be readOnly")
        hp = (v.get("hostPath") or {}).get("path", "")
        if hp.rstrip("/") in ("/etc/kubernetes/pki", "/etc/kubernetes"):
            out.append(f"cborgate mounts the whole {hp} (CA keys, sa.key): mount single files")
        mounted[m.get("mountPath")] = hp
    for f in CBORGATE_PKI_FILES:
        if mounted.get(PKI + f) != PKI + f:
            out.append(f"cborgate does not mount {PKI + f} from the same host file")
    extra = [p for p in mounted if p.startswith(PKI) and p[len(PKI):] not in CBORGATE_PKI_FILES]
    if extra:
        out.append(f"cborgate mounts more of the pki directory than it needs: {extra}")
    return out


def kubeadm_failsafe_problems(orig: dict, configs: List[str]) -> List[str]:
    """docs: a manifest kubeadm renders WITHOUT cborgate's patches (an `upgrade apply`
    typed from habit, a `join --control-plane` on a node without the directory) must
    serve on the node's address: no loopback bind in kubeadm's manifest, nor anywhere
    in the configuration kubeadm keeps cluster-wide or is given."""
    out: List[str] = []
    cmd = ((orig.get("spec") or {}).get("containers") or [{}])[0].get("command") or []
    binds = [a.split("=", 1)[1] for a in cmd if a.startswith("--bind-address=")]
    if binds and (binds[-1].startswith("127.") or binds[-1] == "::1"):
        out.append(f"kubeadm's unpatched manifest binds {binds[-1]}: without cborgate nothing listens "
                   "on the node's address")
    adv = next((a.split("=", 1)[1] for a in cmd if a.startswith("--advertise-address=")), "")
    if not adv or adv.startswith("127."):
        out.append("kubeadm's unpatched manifest has no node --advertise-address")
    for f in configs:
        for d in yaml.safe_load_all(open(f, encoding="utf-8")):
            text = yaml.safe_dump(d or {})
            if "bind-address" in text:
                out.append(f"{f}: {d.get('kind')} sets bind-address: it belongs in the per-node patch only")
    return out


def cmd_kubeadm_failsafe(args: argparse.Namespace) -> int:
    orig = yaml.safe_load(open(args.unpatched, encoding="utf-8"))
    problems = kubeadm_failsafe_problems(orig, args.configs)
    for p in problems:
        print(f"  FAIL {p}")
    if not problems:
        adv = next(a for a in orig["spec"]["containers"][0]["command"] if a.startswith("--advertise-address="))
        print(f"  ok   without the patches kubeadm's manifest serves on the node's address ({adv}, no "
              f"loopback --bind-address); {len(args.configs)} kubeadm configuration file(s) carry no bind-address")
    return 1 if problems else 0


def cmd_existing_cluster(args: argparse.Namespace) -> int:
    """deploy/kubeadm/config-from-cluster.sh's output keeps the cluster's
    ClusterConfiguration exactly, and adds this node's InitConfiguration; the
    cluster's manifest, patched, keeps every flag and volume kubeadm wrote."""
    bad: List[str] = []
    given = yaml.safe_load(open(args.cluster_config, encoding="utf-8"))
    docs = [d for d in yaml.safe_load_all(open(args.written, encoding="utf-8")) if d]
    kinds = [d.get("kind") for d in docs]
    if kinds != ["InitConfiguration", "ClusterConfiguration"]:
        bad.append(f"config-from-cluster.sh wrote {kinds}, not [InitConfiguration, ClusterConfiguration]")
    else:
        init, cluster = docs
        if cluster != given:
            bad.append("the ClusterConfiguration written differs from the cluster's kubeadm-config")
        if init.get("apiVersion") != given.get("apiVersion"):
            bad.append(f"InitConfiguration apiVersion {init.get('apiVersion')} != {given.get('apiVersion')}")
        if (init.get("patches") or {}).get("directory") != "/etc/kubernetes/cborgate/patches":
            bad.append("InitConfiguration has no patches.directory /etc/kubernetes/cborgate/patches")
        manifest = yaml.safe_load(open(args.manifest, encoding="utf-8"))
        ep = manifest["metadata"]["annotations"]["kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"]
        want = (ep.rsplit(":", 1)[0].strip("[]"), int(ep.rsplit(":", 1)[1]))
        lae = init.get("localAPIEndpoint") or {}
        if (lae.get("advertiseAddress"), lae.get("bindPort")) != want:
            bad.append(f"localAPIEndpoint {lae} is not this node's {ep}")
    # What the cluster set must still be in the patched manifest, each flag as kubeadm wrote it.
    orig = yaml.safe_load(open(args.manifest, encoding="utf-8"))
    ocmd = orig["spec"]["containers"][0]["command"]
    for path in args.patched:
        pod = yaml.safe_load(open(path, encoding="utf-8"))
        cmd = pod["spec"]["containers"][0]["command"]
        for flag in args.expect_flag:
            if flag not in ocmd:
                bad.append(f"fixture: {args.manifest} lacks {flag}")
            if flag not in cmd:
                bad.append(f"{path}: {flag} went away")
        vols = {v["name"]: v for v in pod["spec"].get("volumes") or []}
        for v in orig["spec"].get("volumes") or []:
            if vols.get(v["name"]) != v:
                bad.append(f"{path}: the cluster's volume {v['name']} changed")
        bad += [f"{path}: {p}" for p in kubeadm_layout_problems(orig, pod)]
    for p in bad:
        print(f"  FAIL {p}")
    if not bad:
        print(f"  ok   the cluster's ClusterConfiguration copied unchanged; {len(args.expect_flag)} cluster flags "
              f"(SANs' endpoint, service range, OIDC, audit, encryption, external etcd) kept in "
              f"{len(args.patched)} patched manifest(s), loopback bind last")
    return 1 if bad else 0


def cmd_kubeadm_check(args: argparse.Namespace) -> int:
    orig = yaml.safe_load(open(args.original, encoding="utf-8"))
    results = []
    bad = 0
    for path in args.patched:
        docs = [d for d in yaml.safe_load_all(open(path, encoding="utf-8")) if d]
        if len(docs) != 1 or docs[0].get("kind") != "Pod":
            print(f"  FAIL {path}: expected one Pod, got {[d.get('kind') for d in docs]}")
            bad += 1
            continue
        results.append(docs[0])
        for p in kubeadm_layout_problems(orig, docs[0]):
            print(f"  FAIL {path}: {p}")
            bad += 1
    if any(r != results[0] for r in results[1:]):
        print(f"  FAIL the patch tools disagree: {args.patched}")
        bad += 1
    if not bad:
        c = results[0]["spec"]["containers"]
        print(f"  ok   {len(args.patched)} patched manifest(s): containers {[x['name'] for x in c]}, "
              f"{len(c[1].get('volumeMounts') or [])} cborgate mounts, apiserver probes on 127.0.0.1:6443, "
              "default-container annotation")
    return 1 if bad else 0


# --------------------------------------------------------------------------
# Fallback renderer


def _set_labels(obj: dict, path: List[str], labels: Dict[str, str], create: bool) -> None:
    cur = obj
    for p in path[:-1]:
        if not isinstance(cur.get(p), dict):
            if not create:
                return
            cur[p] = {}
        cur = cur[p]
    last = path[-1]
    if not isinstance(cur.get(last), dict):
        if not create:
            return
        cur[last] = {}
    cur[last].update(labels)


def render(base: str) -> List[dict]:
    kfile = next((os.path.join(base, n) for n in ("kustomization.yaml", "kustomization.yml", "Kustomization")
                  if os.path.isfile(os.path.join(base, n))), None)
    if not kfile:
        raise SystemExit(f"{base}: no kustomization.yaml")
    k = yaml.safe_load(open(kfile, encoding="utf-8")) or {}
    supported = {"apiVersion", "kind", "resources", "namespace", "commonLabels", "images",
                 "configMapGenerator", "generatorOptions"}
    unknown = set(k) - supported
    if unknown:
        raise SystemExit(f"{kfile}: the fallback renderer does not support {sorted(unknown)}")
    docs: List[dict] = []
    for r in k.get("resources") or []:
        p = os.path.join(base, r)
        if os.path.isdir(p):
            docs.extend(render(p))
        else:
            docs.extend(d for _, d in load_docs(p))
    gopts = k.get("generatorOptions") or {}
    for g in k.get("configMapGenerator") or []:
        data: Dict[str, str] = {}
        for f in g.get("files") or []:
            key, _, path = f.partition("=") if "=" in f else (os.path.basename(f), "", f)
            data[key] = open(os.path.join(base, path), encoding="utf-8").read()
        for lit in g.get("literals") or []:
            key, _, val = lit.partition("=")
            data[key] = val
        labels = dict(gopts.get("labels") or {})
        labels.update((g.get("options") or {}).get("labels") or {})
        name = g["name"] if gopts.get("disableNameSuffixHash") else g["name"] + "-unhashed"
        meta: Dict[str, Any] = {"name": name}
        if labels:
            meta["labels"] = labels
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data})
    ns = k.get("namespace")
    cl = k.get("commonLabels") or {}
    images = k.get("images") or []
    for d in docs:
        meta = d.setdefault("metadata", {})
        if ns and d.get("kind") not in CLUSTER_SCOPED:
            meta["namespace"] = ns
        if cl:
            _set_labels(d, ["metadata", "labels"], cl, True)
            kind = d.get("kind")
            if kind == "Service":
                _set_labels(d, ["spec", "selector"], cl, True)
            elif kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"):
                _set_labels(d, ["spec", "selector", "matchLabels"], cl, True)
                _set_labels(d, ["spec", "template", "metadata", "labels"], cl, True)
            elif kind == "PodDisruptionBudget":
                _set_labels(d, ["spec", "selector", "matchLabels"], cl, False)
            elif kind == "NetworkPolicy":
                _set_labels(d, ["spec", "podSelector", "matchLabels"], cl, False)
        ps = pod_spec(d)
        for c in ((ps or {}).get("containers") or []) + ((ps or {}).get("initContainers") or []):
            for im in images:
                ref = str(c.get("image", ""))
                repo = re.split(r"[:@]", ref.rsplit("/", 1)[-1])[0]
                repo = ref[: len(ref) - len(ref.rsplit("/", 1)[-1])] + repo
                if repo == im.get("name"):
                    new = im.get("newName", repo)
                    if "digest" in im:
                        new += "@" + im["digest"]
                    elif "newTag" in im:
                        new += ":" + str(im["newTag"])
                    else:
                        new = im.get("newName", repo) + ref[len(repo):]
                    c["image"] = new
    return docs


def cmd_render(args: argparse.Namespace) -> int:
    yaml.safe_dump_all(render(args.dir), sys.stdout, sort_keys=False, default_flow_style=False)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("--k8s-version", default="1.36.0")
    c.add_argument("--wire", default=None)
    c.add_argument("--cross-refs", action="store_true",
                   help="FILES are all rendered bases together: check that the ServiceMonitor selects their Services")
    c.add_argument("--host-file", action="append", default=[], metavar="HOST_PATH=REPO_FILE",
                   help="a node file a hostPath volume mounts, and the repository file it is made from")
    c.add_argument("files", nargs="+")
    c.set_defaults(func=cmd_check)
    k = sub.add_parser("kubeadm-check")
    k.add_argument("--original", required=True, help="kubeadm's kube-apiserver.yaml before the patches")
    k.add_argument("patched", nargs="+", help="the same after the patches, one file per tool that applied them")
    k.set_defaults(func=cmd_kubeadm_check)
    f = sub.add_parser("kubeadm-failsafe")
    f.add_argument("--unpatched", required=True, help="kubeadm's kube-apiserver.yaml without cborgate's patches")
    f.add_argument("configs", nargs="*", help="kubeadm configuration files that must carry no bind-address")
    f.set_defaults(func=cmd_kubeadm_failsafe)
    e = sub.add_parser("existing-cluster")
    e.add_argument("--cluster-config", required=True, help="the cluster's ClusterConfiguration (kubeadm-config)")
    e.add_argument("--written", required=True, help="config-from-cluster.sh's output")
    e.add_argument("--manifest", required=True, help="kubeadm's manifest for that cluster, unpatched")
    e.add_argument("--expect-flag", action="append", default=[], help="a flag the cluster set, to be kept")
    e.add_argument("patched", nargs="+")
    e.set_defaults(func=cmd_existing_cluster)
    r = sub.add_parser("render")
    r.add_argument("dir")
    r.set_defaults(func=cmd_render)
    args = ap.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
