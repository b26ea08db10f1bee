"""Benchmark: device-mode interpretation vs a direct NumPy implementation of the same math.

The cases are the workloads' INTERP table (bench/workloads.py: the README's DiT-sized AdaLayerNormGrad,
Flux-sized NormRopeConcatGrad and an NSA-shaped NsaSelectedAttentionGrad, each with its NumPy implementation).
Both sides run in this process on the same inputs: fp32 compute, outputs rounded as the device rounds them. The
interpreter side is the whole `interpret()` call (validation + conversion + evaluation).

Run: python bench/bench_interp.py [--repeat 5] [--json]  (or `opgen bench`)
Prints per case the median seconds of each side and the ratio interpreter / NumPy (goal <= 1.5).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

from opgen.dsl.examples import random_inputs
from opgen.interp import interpret
from opgen.registry import load_spec

def _median_time(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(repeat: int = 5, quick: bool = False, workloads=None) -> list[dict]:
    """Measure every case of the workloads' INTERP table; returns one dict per case (seconds are medians of `repeat`
    runs). quick: the rows QUICK["interp"] names at the INTERP_QUICK sizes (a smoke run). workloads: the module (default opgen.bench.load_workloads())."""
    from opgen.bench.common import load_workloads

    w = workloads or load_workloads()
    rows = []
    for name, c in w.INTERP.items():
        if quick and name not in w.QUICK["interp"]:
            continue
        spec = load_spec(c["op"])
        dims = w.INTERP_QUICK[c["op"]] if quick else c["dims"]
        inputs = random_inputs(spec, dims, c["attrs"], c["dtypes"], seed=0)
        ref = c["numpy"](inputs)
        got = interpret(spec, inputs, c["attrs"], c["dtypes"])
        worst = max(float(np.linalg.norm(got[k].astype(np.float64) - ref[k].astype(np.float64)) /
                          max(np.linalg.norm(ref[k].astype(np.float64)), 1e-30)) for k in ref)
        t_np = _median_time(lambda: c["numpy"](inputs), repeat)
        t_in = _median_time(lambda: interpret(spec, inputs, c["attrs"], c["dtypes"]), repeat)
        from opgen.bench.common import case_label

        rows.append({"case": case_label(name, c["op"], dims, quick), "numpy_s": t_np, "interpret_s": t_in, "ratio": t_in / t_np,
                     "rel_l2_vs_numpy": worst, "repeat": repeat})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = run(args.repeat)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}"
    if args.json:
        print(json.dumps({"machine": machine, "results": rows}, indent=2))
        return 0
    print(f"interpreter (device mode) vs direct NumPy, median of {args.repeat} runs, {machine}")
    for r in rows:
        print(f"  {r['case']}: numpy {r['numpy_s']:.3f} s, interpret {r['interpret_s']:.3f} s, "
              f"ratio {r['ratio']:.2f} (goal <= 1.5); rel L2 vs NumPy {r['rel_l2_vs_numpy']:.2g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
