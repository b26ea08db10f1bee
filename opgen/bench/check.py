"""Benchmark: `opgen check` (build cached) as a whole process next to `opgen interpret` of the same case (goal
<= 2x wall), and check's resident memory over the case's inputs and outputs (goal <= 3x).

The case is the workloads' CHECK entry (bench/workloads.py): a spec, its dims and dtypes. Its package is generated
into `<build root>/bench-check-gen` (opgen.check.build.default_build_root), so the build of the launch driver is
cached across runs; one check runs first to build it. Then each side is a fresh process of this interpreter, the
two alternating in one run, wall clock and the child's peak resident set (os.wait4's ru_maxrss), median of
`repeat` runs. `phases` are the medians of check's `--json` seconds (docs/design.md "Comparison in chunks").
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run(cmd: list[str], stdout=subprocess.DEVNULL) -> tuple[float, int, bytes]:
    """(wall seconds, peak resident bytes, stdout) of one child process; raises CalledProcessError on a failure."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL)
        _pid, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            raise subprocess.CalledProcessError(p.returncode, cmd)
        out.seek(0)
        return wall, ru.ru_maxrss * 1024, out.read()


def run(repeat: int = 3, quick: bool = False, workloads=None) -> dict:
    """{"case", "interpret_s", "check_s", "ratio", "goal", "check_rss_bytes", "interpret_rss_bytes", "io_bytes",
    "rss_ratio", "rss_goal", "phases", "commands"}: wall seconds and peak resident bytes (medians), io_bytes =
    the inputs in their declared dtypes plus the outputs in theirs (bytes). quick: the case's quick dims."""
    import numpy as np

    from opgen.bench.common import case_label, compile_bytecode, dims_label, load_workloads
    from opgen.check.build import default_build_root  # lazy: start-up time
    from opgen.dsl.examples import random_inputs  # lazy: start-up time
    from opgen.interp import interpret  # lazy: start-up time
    from opgen.registry import load_spec  # lazy: start-up time

    compile_bytecode()
    w = workloads or load_workloads()
    c = w.CHECK
    dims = c["quick_dims"] if quick else c["dims"]
    py = sys.executable
    spec_path = str(Path(w.__file__).resolve().parent.parent / c["spec"])
    gen = default_build_root() / "bench-check-gen"
    subprocess.run([py, "-m", "opgen.cli", "generate", spec_path, "--out", str(gen)], check=True,
                   capture_output=True)
    spec = load_spec(spec_path)
    inputs = random_inputs(spec, dims, {}, c["dtypes"], seed=0)
    outs = interpret(spec, inputs, {}, c["dtypes"])
    declared = spec.bind(inputs, {}, c["dtypes"])
    io_bytes = sum(int(np.asarray(a).nbytes) for a in declared.arrays.values() if a is not None) + \
        sum(int(np.asarray(a).nbytes) for a in outs.values())
    del outs, declared
    with tempfile.TemporaryDirectory(prefix="opgen-bench-check-") as tmp:
        tmp = Path(tmp)
        npz = tmp / "in.npz"
        np.savez(npz, **{k: (v.astype(np.float32) if v.dtype.kind == "f" or "bfloat16" in str(v.dtype) else v)
                         for k, v in inputs.items() if v is not None})
        del inputs
        dt = [f"--dtype={k}={v}" for k, v in c["dtypes"].items()]
        icmd = [py, "-m", "opgen.cli", "interpret", spec_path, "--inputs", str(npz), "--out", str(tmp / "o.npz"),
                *dt]
        ccmd = [py, "-m", "opgen.cli", "check", spec_path, "--inputs", str(npz), "--gen-dir", str(gen), "--json",
                *dt]
        _run(ccmd)   # builds the driver once (cached from then on)
        ti, tc, ri, rc, phases = [], [], [], [], {}
        for _ in range(repeat):
            t, r, _o = _run(icmd)
            ti.append(t)
            ri.append(r)
            t, r, o = _run(ccmd, subprocess.PIPE)
            tc.append(t)
            rc.append(r)
            for k, v in json.loads(o)["seconds"].items():
                phases.setdefault(k, []).append(v)
    a, b = statistics.median(ti), statistics.median(tc)
    rss = statistics.median(rc)
    label = case_label(f"{Path(c['spec']).stem} {dims_label(dims)}", Path(c["spec"]).stem, dims, quick) + \
        "".join(f" {k}={v}" for k, v in c["dtypes"].items())
    return {"case": label, "interpret_s": a, "check_s": b, "ratio": b / a, "goal": 2.0,
            "check_rss_bytes": rss, "interpret_rss_bytes": statistics.median(ri), "io_bytes": io_bytes,
            "rss_ratio": rss / io_bytes, "rss_goal": 3.0,
            "phases": {k: statistics.median(v) for k, v in phases.items()},
            "commands": [" ".join(x[2:]).replace(str(tmp), "$TMP").replace(str(gen), "$GEN") for x in (icmd, ccmd)],
            "repeat": repeat}


if __name__ == "__main__":   # python -m opgen.bench.check [--quick] [N]
    args = sys.argv[1:]
    print(json.dumps(run(int(next((x for x in args if x.isdigit()), 3)), "--quick" in args), indent=2))
