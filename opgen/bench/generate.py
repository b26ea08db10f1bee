"""Benchmark: `opgen generate` of all six ops as a whole process, next to a bare Python that only imports
numpy, jinja2 and networkx (goal <= 3x), and a cached re-generation (a second run into the same directory:
files already up to date are not rewritten).

Each side is a fresh `python` process (the venv's interpreter), timed wall-clock, median of `repeat` runs,
on the same machine in one run. The goals are the ones README "Benchmarks" states.

`phases` splits one first generation, in a fresh process and without workers, into where the time goes:
importing opgen, loading the specs (executing them, enumerating their specialisation keys), tracing every
specialisation's graph (the golden merges all of them; the kernels use a subset), compiling the kernels
(opgen.tiling.pipeline.kernel_build: tensor passes, fusion, family lowering and tiling of every kernel
specialisation, shared by the kernel and tiling emitters), each emitter (opgen.codegen.EMITTERS) on top of
that, and clang-format run alone (in `opgen generate` it overlaps the rendering of the ops after it).

The first generation is timed twice: with the default worker processes (`opgen generate`, one per CPU) and in
one process (`--jobs 1`).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time


def wall_seconds(cmd: list[str], env: dict | None = None) -> float:
    """Wall-clock seconds of running `cmd` (argv) to completion as a whole process with environment `env` (None:
    this process's), output captured. Raises subprocess.CalledProcessError when it exits non-zero (a benchmark of a
    failing command measures nothing). How the figures use it: README "Benchmarks"."""
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return time.perf_counter() - t0


_PHASES = r"""
import json, os, sys, time
os.environ.pop("OPGEN_FORMAT_DIR", None)   # clang-format measured, not the format store (opgen.codegen.fmt)
t0 = time.perf_counter()
import opgen.codegen as cg
from opgen.codegen.fmt import format_many
from opgen.registry import load_spec, spec_files
t = {"import opgen": time.perf_counter() - t0}
s0 = time.perf_counter()
specs = [load_spec(str(p)) for p in spec_files()]
for sp in specs:
    sp.keys()
t["load specs + keys"] = time.perf_counter() - s0
s0 = time.perf_counter()
for sp in specs:
    for k in sp.keys():
        sp.graph(k)
t["trace every specialisation"] = time.perf_counter() - s0
from opgen.tiling.pipeline import kernel_build
s0 = time.perf_counter()
for sp in specs:
    kernel_build(sp)
t["compile kernels"] = time.perf_counter() - s0
rendered = []
for sp in specs:
    files = {}
    for emit in cg.EMITTERS:
        s0 = time.perf_counter()
        files.update(emit(sp))
        t[emit.__name__] = t.get(emit.__name__, 0.0) + time.perf_counter() - s0
    rendered.append(files)
s0 = time.perf_counter()
for files in rendered:
    format_many(files)
t["clang-format"] = time.perf_counter() - s0
combos = {}
for sp in specs:
    n = 1
    for a in sp.static_attrs:
        n *= len(a.choices)
    combos[sp.name] = n
json.dump({"phases": t, "combinations": combos}, sys.stdout)
"""


def phases() -> dict:
    """{"phases": {phase: seconds} of one first generation of every bundled op in a fresh process (module
    docstring), "combinations": {op: static attribute combinations = kernel specialisations lowered}}."""
    import json

    out = subprocess.run([sys.executable, "-c", _PHASES], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def run(repeat: int = 3, quick: bool = False, ops=()) -> dict:
    """{"bare_s", "generate_s" (default workers, "jobs" of them), "generate_serial_s" (--jobs 1), "regenerate_s",
    "ratio", "ratio_serial", "ratio_cached"} (medians over `repeat` runs) and "phases" / "combinations" (`phases`).
    quick: the first and the cached generation only (generate_serial_s None, no phases; a smoke run). ops: the spec
    paths or OpDef names generated (default every bundled op), recorded as "ops"."""
    from opgen.bench.common import compile_bytecode

    compile_bytecode()
    bare, gen, serial, regen = [], [], [], []
    py = sys.executable
    for _ in range(repeat):
        bare.append(wall_seconds([py, "-c", "import numpy, jinja2, networkx"]))
        with tempfile.TemporaryDirectory(prefix="opgen-bench-gen-") as out, \
                tempfile.TemporaryDirectory(prefix="opgen-bench-cache-") as cache:
            env = {**os.environ, "OPGEN_CACHE_DIR": cache}   # an empty generation cache: a first generation
            gen.append(wall_seconds([py, "-m", "opgen.cli", "generate", *ops, "--out", out], env))
            regen.append(wall_seconds([py, "-m", "opgen.cli", "generate", *ops, "--out", out], env))
        if quick:
            continue
        with tempfile.TemporaryDirectory(prefix="opgen-bench-gen-") as out, \
                tempfile.TemporaryDirectory(prefix="opgen-bench-cache-") as cache:
            env = {**os.environ, "OPGEN_CACHE_DIR": cache}
            serial.append(wall_seconds([py, "-m", "opgen.cli", "generate", *ops, "--jobs", "1", "--out", out], env))
    b, g, r = (statistics.median(x) for x in (bare, gen, regen))
    s1 = statistics.median(serial) if serial else None
    from opgen.codegen.generation import default_jobs  # lazy: start-up time

    return {"bare_s": b, "generate_s": g, "generate_serial_s": s1, "jobs": default_jobs(), "regenerate_s": r,
            "ratio": g / b, "ratio_serial": s1 / b if s1 is not None else None, "ratio_cached": r / b,
            "repeat": repeat, "ops": [os.path.basename(o) for o in ops] or "every bundled op",
            **({} if quick else phases())}


def main(argv=None) -> int:
    """Print the figures (see module docstring)."""
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    r = run(a.repeat)
    print(f"bare import {r['bare_s']:.2f} s; opgen generate (6 ops) {r['generate_s']:.2f} s = {r['ratio']:.1f}x "
          f"(goal <= 3x), --jobs 1 {r['generate_serial_s']:.2f} s = {r['ratio_serial']:.1f}x; cached "
          f"re-generation {r['regenerate_s']:.2f} s = {r['ratio_cached']:.1f}x")
    print("first generation by phase: " + ", ".join(f"{k} {v:.2f} s" for k, v in r["phases"].items()))
    return 0
