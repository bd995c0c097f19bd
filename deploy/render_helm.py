#!/usr/bin/env python3
"""Render deploy/helm/cborgate offline with Helm's own Go SDK (helm-python-sdk,
which bundles it as libhelm_c; no helm binary, no cluster), for validate.sh.

  render_helm.py CHART OUTDIR

Writes OUTDIR/helm-<case>.yaml for each values case (the defaults and every
file in CHART/ci/), after `helm lint`; then `helm package`s the chart into OUTDIR
and renders every case again from the archive. Also renders the opt-in shared
front-proxy credential WITHOUT its acknowledgement and expects Helm to refuse.
Exit status 1 if anything fails.
"""

import os
import sys

import helm_python as helm
import yaml


def main() -> int:
    chart_dir, out = sys.argv[1], sys.argv[2]
    bad = 0
    lint = helm.lint(chart_dir)
    for m in lint.get("messages") or []:
        # Helm's severities: 1 info, 2 warning, 3 error.
        if m.get("severity", 0) >= 2:
            print(f"  FAIL helm lint: {m.get('path')}: {m.get('error')}")
            bad += 1
    cases = [("default", {})]
    ci = os.path.join(chart_dir, "ci")
    for f in sorted(os.listdir(ci)) if os.path.isdir(ci) else []:
        if f.endswith(".yaml"):
            cases.append((f[: -len("-values.yaml")] if f.endswith("-values.yaml") else f[:-5],
                          yaml.safe_load(open(os.path.join(ci, f), encoding="utf-8")) or {}))
    with helm.Chart.load(chart_dir) as chart:
        for name, values in cases:
            try:
                rendered = chart.render(values, name="cborgate", namespace="cborgate")
            except Exception as e:  # the SDK's HelmRenderError and friends
                print(f"  FAIL helm template ({name}): {e}")
                bad += 1
                continue
            docs = [text for path, text in sorted(rendered.items())
                    if path.endswith((".yaml", ".yml")) and text.strip()]
            with open(os.path.join(out, f"helm-{name}.yaml"), "w", encoding="utf-8") as f:
                f.write("\n---\n".join(docs))
            kinds = [d.get("kind") for t in docs for d in yaml.safe_load_all(t) if d]
            print(f"  ok   helm template ({name}): {len(kinds)} objects "
                  f"({', '.join(sorted(set(kinds)))})")
        # The shared credential without the acknowledgement must not render.
        unacked = {"aggregated": {"enabled": True, "sharedFrontProxyCredential": {"enabled": True}}}
        try:
            chart.render(unacked, name="cborgate", namespace="cborgate")
            print("  FAIL the shared front-proxy credential rendered without its acknowledgement")
            bad += 1
        except Exception as e:
            if "cluster-admin-equivalent" in str(e):
                print("  ok   the shared front-proxy credential is refused without its acknowledgement")
            else:
                print(f"  FAIL the unacknowledged shared credential failed for another reason: {e}")
                bad += 1
    # The chart as an operator vendors it: `helm package` (no symlinks may leave the
    # chart folder), then `helm template` of the archive, which must render what the
    # folder renders and carry the monitoring files themselves.
    try:
        archive = helm.package(chart_dir, destination=out)
    except Exception as e:
        print(f"  FAIL helm package: {e}")
        return 1
    with helm.Chart.load(chart_dir) as d, helm.Chart.load_archive(open(archive, "rb").read()) as a:
        files = {f.get("name") or f.get("path"): f for f in a.files}
        for want in ("files/prometheusrule.yaml", "files/grafana-dashboard.json"):
            if want not in files:
                print(f"  FAIL the packaged chart lacks {want}")
                bad += 1
        same = 0
        for name, values in cases:
            try:
                if a.render(values, name="cborgate", namespace="cborgate") != \
                        d.render(values, name="cborgate", namespace="cborgate"):
                    print(f"  FAIL helm template ({name}) of the packaged chart differs from the chart folder's")
                    bad += 1
                else:
                    same += 1
            except Exception as e:
                print(f"  FAIL helm template ({name}) of the packaged chart: {e}")
                bad += 1
        print(f"  ok   helm package: {os.path.basename(archive)} ({os.path.getsize(archive)} bytes); "
              f"helm template of it renders {same} of {len(cases)} cases as the folder does")
    print(f"  Helm SDK {helm.helm_sdk_version()} (helm-python-sdk {helm.helm_c_version()})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
