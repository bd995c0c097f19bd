#!/usr/bin/env python3
"""Offline checks for deploy/ that a JSON schema alone does not cover.

Used by validate.sh; needs PyYAML and kubernetes-validate (validate.sh installs both).

  validate_crds.py check [--k8s-version V] [--wire WIRE.md] FILE...
      Every YAML document in FILE... (rendered kustomizations or raw manifests):
      - built-in kinds: strict JSON-schema validation with kubernetes-validate
        against Kubernetes V (APIService included: the package bundles it);
      - ServiceMonitor, PrometheusRule (monitoring.coreos.com/v1): structural checks
        (required fields, types, durations, one of alert/record, balanced PromQL);
      - any other kind: an error (nothing here may go unchecked);
      - with --cross-refs (all rendered bases at once): the ServiceMonitor selects
        rendered Services that have its port name;
      - cborgate containers: only the documented `serve` flags, ports and probes
        that agree with --listen/--admin;
      - every cborgate_* metric in PrometheusRule expressions and in Grafana
        dashboards (JSON files, or ConfigMaps labelled grafana_dashboard) is a
        family of WIRE.md section 6 (histograms may add _bucket/_sum/_count),
        with only that family's labels (plus target labels); dashboards must
        show every family;
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
}
MODES = {"auto", "legacy", "native", "upgrade"}

CLUSTER_SCOPED = {
    "Namespace", "ClusterRole", "ClusterRoleBinding", "APIService", "CustomResourceDefinition",
    "PriorityClass", "StorageClass", "PersistentVolume", "Node", "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration", "IngressClass", "RuntimeClass",
}

DURATION_RE = re.compile(r"^(0|(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?)$")
LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class Problems:
    def __init__(self) -> None:
        self.items: List[str] = []

    def add(self, where: str, msg: str) -> None:
        self.items.append(f"{where}: {msg}")


# --------------------------------------------------------------------------
# Metric families


def load_families(wire: Optional[str]) -> Tuple[Dict[str, Tuple[Set[str], bool]], str]:
    if not wire or not os.path.isfile(wire):
        return EMBEDDED_FAMILIES, "embedded copy of WIRE.md section 6"
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


# Requests whose duration is the lifetime of a stream (WIRE.md section 6 verbs).
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
    for m in re.finditer(r"\bcborgate_[a-zA-Z0-9_]+", expr):
        tok = m.group(0)
        fam = family_of(tok, fams)
        if fam is None:
            problems.add(where, f"metric {tok} is not a WIRE.md section 6 family")
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
                    problems.add(where, f"{tok} has no label '{lm.group(1)}' (WIRE.md: {sorted(fams[fam][0])})")
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
    ids = [p.get("id") for p in dash["panels"]]
    if len(ids) != len(set(ids)):
        problems.add(where, "duplicate panel ids")
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


def check_servicemonitor(where: str, doc: dict, problems: Problems, services: Optional[Dict[str, dict]]) -> None:
    spec = need(doc, "spec", dict, where, problems, "spec")
    if spec is None:
        return
    for k in spec:
        if k not in SM_SPEC_KEYS:
            problems.add(where, f"unknown field spec.{k}")
    sel = need(spec, "selector", dict, where, problems, "spec.selector")
    if sel is not None:
        if not sel.get("matchLabels") and not sel.get("matchExpressions"):
            problems.add(where, "spec.selector selects everything: give matchLabels or matchExpressions")
        check_str_map(sel.get("matchLabels"), where + " spec.selector.matchLabels", problems)
    ns = spec.get("namespaceSelector")
    if ns is not None:
        if not isinstance(ns, dict) or set(ns) - {"any", "matchNames"}:
            problems.add(where, "spec.namespaceSelector takes only any and matchNames")
        elif "any" in ns and not isinstance(ns["any"], bool):
            problems.add(where, "spec.namespaceSelector.any must be a boolean")
    eps = need(spec, "endpoints", list, where, problems, "spec.endpoints")
    for i, ep in enumerate(eps or []):
        w = f"{where} spec.endpoints[{i}]"
        if not isinstance(ep, dict):
            problems.add(w, "must be an object")
            continue
        for k in ep:
            if k not in SM_EP_KEYS:
                problems.add(w, f"unknown field {k}")
        if "port" not in ep and "targetPort" not in ep:
            problems.add(w, "needs port (a Service port name) or targetPort")
        if "port" in ep and not isinstance(ep["port"], str):
            problems.add(w, "port must be a Service port *name*")
        for k in ("interval", "scrapeTimeout"):
            if k in ep and not (isinstance(ep[k], str) and DURATION_RE.match(ep[k])):
                problems.add(w, f"{k} is not a Prometheus duration: {ep[k]!r}")
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


def check_prometheusrule(where: str, doc: dict, fams, problems: Problems) -> int:
    spec = need(doc, "spec", dict, where, problems, "spec")
    if spec is None:
        return 0
    n = 0
    groups = need(spec, "groups", list, where, problems, "spec.groups")
    gnames: Set[str] = set()
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
    m = re.match(r"^(?:\[[0-9a-fA-F:.]+\]|[^:\[\]]+):(\d+)$", addr or "")
    return int(m.group(1)) if m else None


def check_cborgate_container(where: str, c: dict, problems: Problems) -> None:
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
        if not eq:
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

    for where, d in all_docs:
        if not isinstance(d, dict):
            problems.add(where, "document is not a mapping")
            continue
        kind, api = d.get("kind"), d.get("apiVersion")
        if kind == "Kustomization":
            continue
        name = (d.get("metadata") or {}).get("name")
        if not kind or not api or not name:
            problems.add(where, "apiVersion, kind and metadata.name are required")
            continue
        w = f"{where} {kind}/{name}"
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
            for c in (ps.get("containers") or []) + (ps.get("initContainers") or []):
                if "cborgate" in str(c.get("image", "")):
                    counts["cborgate"] += 1
                    check_cborgate_container(f"{w} container {c.get('name')}", c, problems)
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
          f"{counts['cborgate']} cborgate containers, {counts['dashboards']} dashboards / {counts['panels']} panels; "
          f"metric families from {source}")
    return 1 if problems.items else 0


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
    c.add_argument("files", nargs="+")
    c.set_defaults(func=cmd_check)
    r = sub.add_parser("render")
    r.add_argument("dir")
    r.set_defaults(func=cmd_render)
    args = ap.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
