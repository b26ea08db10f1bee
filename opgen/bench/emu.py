"""Benchmark: the emitted kernels in the emulation — time next to the interpreter, GM bytes next to the minimum.

The cases are the workloads' tables (bench/workloads.py):
1. EMU_TIME: emulated kernel vs device-mode interpretation on the README's real-sized cases (goal <= 5x): both
   sides timed inside one `opgen check` run (opgen.check.run_check: `seconds["kernel"]` is the emu::Launch call
   running the kernel on blockDim simulated cores, timed by the driver; `seconds["launch"]` the whole driver
   process incl. case I/O; `seconds["interpret"]` is opgen.interp.run_graph in device mode, same inputs).
2. GM: bytes moved by the emitted kernels, counted by the emulation per buffer (inputs, outputs, workspace), over
   the minimum (each input read once, each output written once; goal <= 1.10), next to the reference notes' figures
   for CANN's kernels where they exist; cases marked time_interp also time the emulated kernel against the
   device-mode interpreter (a case with golden=False is launched without the float64 golden and its device-mode
   interpretation is timed on its own).
3. NSA_GM: the NSA mixed kernels' counted bytes next to the minimum, the gather minimum (every unit reads its L
   selected K/V rows once; the rest once) and the reference's estimate for CANN's kernels (declared by the spec).
4. The cost model's estimate for Atlas A2 (opgen.check.cost; docs/reference/kernel_cost.md): counted bursts with
   their per-burst overhead over HBM bandwidth, the busiest core's vector cycles plus its issue, barrier, flag and
   SyncAll cost, cube fractals; over the memory-bound floor = minimum bytes / 1.6 TB/s, with the bound named.

Run: python bench/bench_emu.py [--repeat 3] [--json] [--quick]   (or `opgen bench`)
Medians of --repeat runs; the build is cached (ninja) and not timed. Machine size is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys

import numpy as np

from opgen.bench.common import case_label
from opgen.check import run_check
from opgen.errors import OpgenError
from opgen.platforms.cost import CLOCK_HZ, HBM_BYTES_PER_S


def _median_check(repeat, *args, **kw):
    runs = [run_check(*args, progress=False, **kw) for _ in range(repeat)]
    return runs[-1], {k: statistics.median(r.seconds[k] for r in runs) for k in ("kernel", "launch", "interpret")}


def _issue_rates(r) -> dict:
    """Vector instructions issued (all cores' counts, opgen.check.cost) per row and per element of the case's largest
    input (its last axis a row): {"issues_per_row", "issues_per_elem"}; {} without inputs or counts."""
    shapes = [np.shape(a) for a in (getattr(r, "inputs", None) or {}).values() if a is not None and np.ndim(a)]
    total = (getattr(r, "cost", None) or {}).get("vec_issues_total")
    if not shapes or total is None:
        return {}
    shape = max(shapes, key=lambda s: int(np.prod(s)))
    elems = int(np.prod(shape))
    rows = elems // shape[-1] if shape[-1] else 0
    return {"issues_per_row": total / rows if rows else None, "issues_per_elem": total / elems if elems else None}


def roofline(op: str, case: str, r, **extra) -> dict:
    """Cost estimate of one check result `r` (module docstring, item 4); times in microseconds. With the per-core
    counters (r.cost, opgen.check.cost.estimate) the row holds the model's estimate, floor, bound and issue terms;
    without them (a failed launch) the older roofline from the summed bytes and the busiest core's cycles."""
    if getattr(r, "cost", None):
        return {"op": op, "case": case, **r.cost, **_issue_rates(r), **extra}
    mem = r.gm_bytes / HBM_BYTES_PER_S * 1e6
    vec = r.cycles.get("vector", 0) / CLOCK_HZ * 1e6
    cube = r.cycles.get("cube", 0) / CLOCK_HZ * 1e6
    floor = r.gm_bytes_min / HBM_BYTES_PER_S * 1e6
    est = max(mem, vec, cube)
    return {"op": op, "case": case, "floor_us": floor, "memory_us": mem, "vector_us": vec, "cube_us": cube,
            "estimate_us": est, "ratio": est / floor if floor else None, **extra}


def time_cases(cases, repeat: int, quick: bool) -> list[dict]:
    """Emulation / interpreter seconds of `cases` ([(name, op, dims, attrs, dtypes)]; rows: name, launch_s,
    interpret_s, ratio, passed)."""
    out = []
    for name, op, dims, attrs, dtypes in cases:
        if quick:
            dims = {k: (tuple(max(1, x // 8) for x in v) if isinstance(v, tuple) else max(1, v // 8))
                    for k, v in dims.items()}
        try:
            r, sec = _median_check(repeat, op, dims=dims, attrs=attrs, dtypes=dtypes)
        except OpgenError as e:   # e.g. the op has no emitted kernel
            out.append({"case": case_label(name, op, dims, quick), "error": str(e).splitlines()[0]})
            continue
        name = case_label(name, op, dims, quick)
        out.append({"case": name, "launch_s": sec["kernel"], "driver_s": sec["launch"], "interpret_s": sec["interpret"],
                    "ratio": sec["kernel"] / sec["interpret"], "passed": r.passed, "block_dim": r.block_dim,
                    "roofline": roofline(r.op, name, r)})
    return out


def _interp_seconds(op, dims, attrs, dtypes, seed=0) -> float:
    """Seconds of one device-mode interpretation (opgen.interp.run_graph) of the inputs run_check makes."""
    import time

    from opgen.check.run import make_inputs  # lazy: start-up time
    from opgen.interp import run_graph  # lazy: start-up time
    from opgen.registry import load_spec  # lazy: start-up time

    spec = load_spec(op)
    inputs, full = make_inputs(spec, dims, dict(attrs), dict(dtypes), seed)
    bound = spec.bind(inputs, full, dtypes)
    g = spec.graph(bound.key)
    t0 = time.perf_counter()
    run_graph(g, bound, "device")
    return time.perf_counter() - t0


def _strategy(op: str, tiling_key: int) -> str:
    """The schedule a tiling key names: the rows family's strategy digit (ROW_SPLIT, COL_SPLIT, COL_STREAM,
    ROW_CHUNK: opgen.tiling.rowkernel), or the family's one schedule (cube: the GEMM, attention: its units)."""
    from opgen.registry import load_spec  # lazy: start-up time
    from opgen.tiling.pipeline import kernel_build

    family = kernel_build(load_spec(op)).family.name
    if family != "rows":
        return {"cube": "GEMM (cube)", "attention": "attention units"}.get(family, family)
    return {1: "ROW_SPLIT", 2: "COL_SPLIT", 3: "COL_STREAM", 4: "ROW_CHUNK"}.get(tiling_key % 10, "—")


def gm_cases(cases, quick: bool) -> list[dict]:
    """GM bytes / minimum of every case of the workloads' GM table (module docstring, item 2). A case whose op is a
    spec file (not a bundled spec, so not in generated/) runs on a package generated for this run."""
    import tempfile

    from opgen.codegen import write_ops  # lazy: start-up time

    out = []
    tmp = tempfile.TemporaryDirectory(prefix="opgen-bench-")
    generated: set = set()
    for c in cases:
        dims = c.get("quick_dims", c["dims"]) if quick else c["dims"]
        attrs, dtypes = c.get("attrs", {}), c.get("dtypes", {})
        golden = c.get("golden", True)
        gen_dir = None
        if c["op"].endswith(".py"):
            if c["op"] not in generated:
                write_ops([c["op"]], tmp.name)
                generated.add(c["op"])
            gen_dir = tmp.name
        r = run_check(c["op"], dims=dims, attrs=attrs, dtypes=dtypes, progress=False, golden=golden, gen_dir=gen_dir)
        row = {"op": r.op, "case": case_label(c["case"], r.op, dims, quick),
               "strategy": _strategy(c["op"], r.tiling_key),
               "gm_bytes": r.gm_bytes, "gm_bytes_min": r.gm_bytes_min, "ratio": r.gm_ratio,
               "workspace_bytes_moved": r.gm["workspace"].read + r.gm["workspace"].written if "workspace" in r.gm else 0,
               "passed": r.passed, "golden": golden, "cann": c.get("cann", ""),
               "roofline": roofline(r.op, c["case"], r, **({"H": c["H"]} if "H" in c else {}))}
        if "H" in c:
            row["H"] = c["H"]
        if c.get("time_interp"):
            interp = r.seconds.get("interpret") if golden else _interp_seconds(c["op"], dims, attrs, dtypes)
            row.update(kernel_s=r.seconds.get("kernel"), interpret_s=interp,
                       kernel_vs_interp=(r.seconds.get("kernel", 0.0) / interp) if interp else None)
        out.append(row)
    tmp.cleanup()
    return out


def nsa_gm(cases, runs, gather_min, quick: bool) -> list[dict]:
    """GM bytes of the NSA kernels per case and direction: counted, minimum, gather minimum, CANN estimate."""
    out = []
    for label, dims in cases:
        dims = dict(dims)
        if quick:
            dims["T1"] = 8
        for op, attrs, present in runs:
            r = run_check(op, dims=dims, attrs=attrs, dtypes={"T": "float16"}, present=present, progress=False)
            gmin = gather_min(op.endswith("Grad"), dims, 2)
            out.append({"case": case_label(label, op, dims, quick), "op": op, "dims": dims, "passed": r.passed,
                        "gm_bytes": r.gm_bytes,
                        "gm_bytes_min": r.gm_bytes_min, "gather_min": gmin, "cann": r.gm_reference,
                        "cann_source": r.gm_reference_source, "vs_cann": r.gm_bytes / r.gm_reference,
                        "vs_gather_min": r.gm_bytes / gmin,
                        "workspace_bytes_moved": r.gm["workspace"].read + r.gm["workspace"].written,
                        "roofline": roofline(op, case_label(label, op, dims, quick), r)})
    return out


def run(repeat: int = 3, quick: bool = False, workloads=None) -> dict:
    """Every figure of this module over the workloads (default opgen.bench.load_workloads()): {"emu_time", "gm",
    "nsa_gm", "roofline"}. quick: only the rows the workloads' QUICK names, at their quick sizes."""
    from opgen.bench.common import load_workloads

    w = workloads or load_workloads()
    emu_time, gm_rows, nsa_rows, nsa_runs = w.EMU_TIME, w.GM, w.NSA_GM, w.NSA_RUNS
    if quick:   # the smoke run's subset (bench/workloads.py QUICK)
        q = w.QUICK
        emu_time = [c for c in emu_time if c[0] in q["emu_time"]]
        gm_rows = [c for c in gm_rows if c["case"] in q["gm"]]
        nsa_rows = [c for c in nsa_rows if c[0] in q["nsa_gm"]]
        nsa_runs = [c for c in nsa_runs if c[0] in q["nsa_runs"]]
    t = time_cases(emu_time, repeat, quick)
    gm = gm_cases(gm_rows, quick)
    nsa = nsa_gm(nsa_rows, nsa_runs, w.gather_min_bytes, quick)
    roof = [r["roofline"] for r in (*t, *gm, *nsa) if "roofline" in r]
    return {"emu_time": t, "gm": gm, "nsa_gm": nsa, "roofline": roof}


def main(argv=None) -> int:
    """Print (or --json) the figures of the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="smaller cases (smoke run)")
    a = ap.parse_args(argv)
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "machine": platform.machine()}
    res = {"machine": machine, "repeat": a.repeat, **run(a.repeat, a.quick)}
    if a.json:
        print(json.dumps(res, indent=1, default=str))
        return 0
    from opgen.bench.report import markdown

    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
