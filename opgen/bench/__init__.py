"""opgen's benchmarks, run on demand by `opgen bench` or the thin scripts in bench/:

startup   `opgen interpret` / `opgen list` as whole processes vs plain-Python processes (goals <= 1.5x, 2x)
interp    device-mode interpretation vs a direct NumPy implementation of the same math (goal <= 1.5x)
generate  `opgen generate` of all ops vs a bare `python -c "import numpy, jinja2, networkx"` (goal <= 3x),
          and cached re-generation
emu       emulated kernels vs the interpreter (goal <= 5x), GM bytes counted by the emulation over the
          minimum (goal <= 1.10 for the vector ops; NSA next to the reference's CANN estimate) and a
          roofline estimate for Atlas A2 from the counted bytes and cost counters
check     `opgen check` (build cached) vs `opgen interpret` of the same case, whole processes (goal <= 2x), and
          check's peak resident memory over the inputs and outputs (goal <= 3x)
report    results JSON + markdown table + PNG plots

Every figure is measured side by side in one run on the same machine and states how (command, machine
size, median of N runs). Which operators at which sizes is data: bench/workloads.py of the checkout
(`load_workloads`), so nothing here names an operator.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from opgen.bench.common import case_label, compile_bytecode, dims_label, load_workloads


PHASES = ("interp", "startup", "generate", "emu", "check")
"""The benchmark phases in the order `run_all` runs them (`opgen bench --only` names a subset)."""


def run_all(repeat: int = 3, quick: bool = False, command: str = "opgen bench", progress=None, only=None,
            on_phase=None, base: dict | None = None) -> dict:
    """Every benchmark (or the PHASES named in `only`); the dict opgen.bench.report writes. `quick`: smaller cases
    and fewer workloads (bench/workloads.py QUICK; a smoke run, not the figures of record; README "Benchmarks").
    progress: called with one line as each phase starts and as it ends (with its seconds); on_phase: called with
    the results so far after each phase, so an interrupted run keeps what it measured. base: the results of an
    earlier full run (its results.json) that a run of some phases updates — the phases not run keep their figures,
    and `measured_by` records which command measured each phase. Raises OpgenError for a phase name not in
    PHASES."""
    import time

    from opgen.errors import OpgenError  # lazy: start-up time

    step = progress or (lambda text: None)
    done = on_phase or (lambda res: None)
    chosen = list(PHASES) if not only else list(only)
    bad = [p for p in chosen if p not in PHASES]
    if bad:
        raise OpgenError(f"unknown benchmark phase {', '.join(bad)}: choose from {', '.join(PHASES)}")
    from opgen.bench import check, emu, generate, interp, startup  # lazy: start-up time

    res = {k: v for k, v in (base or {}).items() if k not in ("plots", "plots_skipped")}
    phase_keys = {"interp": "interp", "startup": "startup", "generate": "generate", "emu": "gm", "check": "check"}
    measured_by = dict(res.get("measured_by") or {p: res.get("command", "opgen bench") for p in PHASES
                                                  if base and phase_keys.get(p) in base})
    res.update({"command": command, "repeat": repeat, "quick": quick,
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                            "machine": platform.machine()}})
    w = load_workloads()

    def _generate():
        ops = [str(Path(w.__file__).resolve().parent.parent / o) for o in w.QUICK["generate"]] if quick else ()
        g = generate.run(repeat, quick=quick, ops=ops)
        if g["ratio"] > 3 and g.get("phases"):
            g["gap"] = generate_gap(g)
        return {"generate": g}

    jobs = {
        "interp": ("interpreter vs NumPy", lambda: {"interp": interp.run(repeat, quick=quick, workloads=w)}),
        "startup": ("command-line start-up", lambda: {"startup": startup.run(repeat, quick=quick, workloads=w)}),
        "generate": ("opgen generate", _generate),
        "emu": ("emulated kernels (GM bytes, times)", lambda: emu.run(repeat, quick, workloads=w)),
        "check": ("opgen check vs opgen interpret (whole processes)",
                  lambda: {"check": check.run(repeat, quick=quick, workloads=w)}),
    }
    phases = [p for p in PHASES if p in chosen]
    res["phases_run"] = []
    for i, name in enumerate(phases, 1):
        title, fn = jobs[name]
        step(f"{i}/{len(phases)} {name}: {title} ...")
        t0 = time.monotonic()
        load0 = _load()
        res.update(fn())
        res.setdefault("load", {})[name] = [load0, _load()]
        res["phases_run"].append({"phase": name, "seconds": round(time.monotonic() - t0, 2)})
        measured_by[name] = command
        res["measured_by"] = measured_by
        step(f"{i}/{len(phases)} {name}: done in {time.monotonic() - t0:.1f} s")
        done(res)
    return res


def _load():
    """The machine's 1-minute load average (os.getloadavg), None where the platform has none: recorded at the start
    and end of each phase, since the timed ratios of a run on a machine busier than its CPU count are pessimistic
    (GM bytes and instruction counts do not depend on it)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


REMEDIES = {
    "trace every specialisation": "trace the body once per combination of the attributes and presences it "
                                  "branches on (declared in the spec, or recorded by attribute proxies while "
                                  "tracing) instead of once per specialisation key; the golden merges the graphs "
                                  "of all keys",
    "compile kernels": "lower each kernel part once per combination of the attributes it depends on (most "
                       "combinations share their part bodies and differ only in addressing) instead of fusing and "
                       "lowering every combination's whole graph",
    "emit_golden": "cover each statement block's key set from a per-variable index instead of scanning every key",
    "emit_kernel": "print each shared part body once and reference it from the combinations that use it",
    "emit_tiling_files": "derive the tiling program once per family layout and reuse it across dtype rows and "
                         "attribute combinations that share it",
    "clang-format": "print the templates already in clang-format's layout so formatting leaves the generation "
                    "path (kept as a CI check)",
    "load specs + keys": "enumerate specialisation keys lazily",
}
"""What would shrink each phase of a first generation (generate_gap names the ones that dominate)."""


def generate_gap(g: dict) -> str:
    """Why a first `opgen generate` misses the 3x goal and what would close it: the measured phases of `g`
    (opgen.bench.generate.run's result), largest first, each with its seconds, its multiple of the bare import and
    its remedy (REMEDIES)."""
    ph = g.get("phases", {})
    bare = g["bare_s"]
    top = sorted(ph.items(), key=lambda kv: -kv[1])[:3]
    parts = [f"{name} {sec:.2f} s ({sec / bare:.1f}x the bare import by itself)" + (
        f": {REMEDIES[name]}" if name in REMEDIES else "") for name, sec in top]
    workers = ""
    if g.get("generate_serial_s") is not None:
        workers = (f" With {g.get('jobs', '?')} render workers the first generation takes {g['generate_s']:.2f} s, in "
                   f"one process {g['generate_serial_s']:.2f} s: the workers overlap ops, but the largest op's own "
                   f"phases stay on the critical path.")
    return (f"Gap: {g['ratio']:.1f}x the bare import (goal 3x = {3 * bare:.2f} s).{workers} The largest phases of one "
            f"first generation (table above), and what would close them: " + "; ".join(parts) + ". An unchanged "
            f"re-generation, answered by the generation cache (opgen/codegen/cache.py), is {g['ratio_cached']:.1f}x.")
