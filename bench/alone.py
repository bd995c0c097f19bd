#!/usr/bin/env python3
"""Each codec path alone: wall and CPU time per document, and the ratio to `validate`.

The interleaved table of `cargo bench --bench codec` runs every path in turns inside one
process; on a shared machine its ratios move by tens of per cent between runs. This runs
the bench binary once per path with `--iters N` (N untimed calls, nothing else of the
benchmark), subtracts a run with `--iters 0` (input generation and checks), and keeps the
best of several repetitions, the paths taking turns.

    cargo bench --bench codec --no-run
    python3 bench/alone.py podlist-100 --iters 1000 --reps 3
    python3 bench/alone.py podlist-1 --iters 50000 --paths validate,j2c,c2j-dd,naive

Paths: validate j2c j2c-dd c2j c2j-dd naive (validate first: the ratios are to it).
Standard library only.
"""

import argparse
import glob
import os
import resource
import subprocess
import time


def newest_bench_binary():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "release", "deps")
    bins = [f for f in glob.glob(os.path.join(root, "codec-*")) if not f.endswith(".d")]
    if not bins:
        raise SystemExit("no bench binary: run `cargo bench --bench codec --no-run` first")
    return max(bins, key=os.path.getmtime)


def run(binary, args, scenario):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([binary, *args, scenario], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", help="podlist-1, podlist-100, podlist-10000 or watch-10000")
    ap.add_argument("--iters", type=int, default=1000, help="calls per run")
    ap.add_argument("--reps", type=int, default=3, help="runs per path; the best counts")
    ap.add_argument("--paths", default="validate,j2c,c2j,c2j-dd,naive")
    ap.add_argument("--bin", default=None, help="bench binary (default: the newest built)")
    a = ap.parse_args()
    binary = a.bin or newest_bench_binary()
    paths = a.paths.split(",")
    best = {}
    for _ in range(a.reps):
        for p in ["(generation)"] + paths:
            args = ["--iters", "0", "--only", "validate"] if p == "(generation)" else ["--iters", str(a.iters), "--only", p]
            wall, cpu = run(binary, args, a.scenario)
            w, c = best.get(p, (float("inf"), float("inf")))
            best[p] = (min(w, wall), min(c, cpu))
    gen_wall, gen_cpu = best["(generation)"]
    per_call = {p: ((best[p][0] - gen_wall) / a.iters, (best[p][1] - gen_cpu) / a.iters) for p in paths}
    print(f"{a.scenario}: {a.iters} calls per run, best of {a.reps}; binary {os.path.basename(binary)}")
    print("| path | wall ms/doc | CPU ms/doc | validate / path (wall) |")
    print("|---|---:|---:|---:|")
    v = per_call.get("validate", (None,))[0]
    for p in paths:
        w, c = per_call[p]
        ratio = f"{v / w:.2f}" if v and w > 0 else "-"
        print(f"| {p} | {w * 1e3:.4f} | {c * 1e3:.4f} | {ratio} |")


if __name__ == "__main__":
    main()
