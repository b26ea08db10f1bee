"""Benchmark: the command line as a whole process, next to the plain-Python process doing the same work.

interpret  `opgen interpret <op> --inputs in.npz --out out.npz` vs `python -c` running the workload's NumPy
           implementation of the same math with the same npz reading and writing (goal <= 1.5x); the case is
           the workloads' STARTUP entry (bench/workloads.py), its inputs made once and saved to an npz
list       `opgen list` vs a bare `python -c "import numpy, jinja2, networkx, ml_dtypes"` (goal <= 2x)

Each side is a fresh process of this interpreter, timed wall clock, median of `repeat` runs, the two sides
alternating in one run on the same machine, opgen's bytecode compiled first (opgen.bench.compile_bytecode).
`phases` of the interpret case say where opgen's time goes (import, loading the one spec, validating and
converting the inputs, evaluating, writing).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


_NUMPY_SIDE = r"""
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import numpy_side
with np.load(sys.argv[2]) as z:
    inputs = {k: z[k] for k in z.files}
out = getattr(numpy_side, sys.argv[3])(**inputs)
np.savez(sys.argv[4], **{k: np.asarray(v, np.float32) for k, v in out.items()})
"""
_NUMPY_PRELUDE = "import ml_dtypes\nimport numpy as np\n\nBF16 = ml_dtypes.bfloat16\n\n\n"
"""What the workload's NumPy function may use: numpy as np, ml_dtypes and BF16 (nothing of opgen)."""

_PHASES = r"""
import json, sys, time
t = {}
t0 = time.perf_counter()
from opgen import cli
from opgen.registry import load_spec
t["import opgen"] = time.perf_counter() - t0
s0 = time.perf_counter()
spec = load_spec(sys.argv[1])
t["load the spec"] = time.perf_counter() - s0
s0 = time.perf_counter()
inputs = cli._load_npz(sys.argv[2])
t["read npz"] = time.perf_counter() - s0
from opgen.interp import interpret
s0 = time.perf_counter()
out = interpret(spec, inputs, json.loads(sys.argv[3]), json.loads(sys.argv[4]))
t["validate + evaluate"] = time.perf_counter() - s0
s0 = time.perf_counter()
cli._save_npz(sys.argv[5], out)
t["write npz"] = time.perf_counter() - s0
json.dump(t, sys.stdout)
"""


def run(repeat: int = 3, quick: bool = False, workloads=None) -> dict:
    """{"interpret": {...}, "list": {...}}: per figure the medians of each side (seconds), the ratio, the goal
    and the command lines; interpret also "phases" (module docstring). quick: the STARTUP case's quick dims."""
    from opgen.bench.common import case_label, compile_bytecode, dims_label, load_workloads
    from opgen.bench.generate import wall_seconds
    from opgen.dsl.examples import random_inputs  # lazy: start-up time
    from opgen.registry import load_spec  # lazy: start-up time

    compile_bytecode()
    w = workloads or load_workloads()
    c = w.STARTUP
    py = sys.executable
    res = {}
    with tempfile.TemporaryDirectory(prefix="opgen-bench-startup-") as tmp:
        tmp = Path(tmp)
        dims = c["quick_dims"] if quick else c["dims"]
        spec = load_spec(c["op"])
        inputs = random_inputs(spec, dims, c["attrs"], c["dtypes"], seed=0)
        npz = tmp / "in.npz"
        import numpy as np

        np.savez(npz, **{k: (v.astype(np.float32) if v.dtype.kind == "f" or "bfloat16" in str(v.dtype) else v)
                         for k, v in inputs.items() if v is not None})
        import inspect

        (tmp / "numpy_side.py").write_text(_NUMPY_PRELUDE + inspect.getsource(getattr(w, c["numpy"])))
        opgen_cmd = [py, "-m", "opgen.cli", "interpret", c["op"], "--inputs", str(npz), "--out", str(tmp / "o.npz"),
                     "-q", *(f"--attr={k}={v}" for k, v in c["attrs"].items()),
                     *(f"--dtype={k}={v}" for k, v in c["dtypes"].items())]
        numpy_cmd = [py, "-c", _NUMPY_SIDE, str(tmp), str(npz), c["numpy"], str(tmp / "n.npz")]
        a, b = [], []
        for _ in range(repeat):
            a.append(wall_seconds(opgen_cmd))
            b.append(wall_seconds(numpy_cmd))
        ta, tb = statistics.median(a), statistics.median(b)
        ph = subprocess.run([py, "-c", _PHASES, c["op"], str(npz), json.dumps(c["attrs"]), json.dumps(c["dtypes"]),
                             str(tmp / "p.npz")], check=True, capture_output=True, text=True)
        label = case_label(f"{c['op']} {dims_label(dims)}", c["op"], dims, quick) + \
            "".join(f" {k}={v}" for k, v in c["dtypes"].items())
        res["interpret"] = {"case": label, "opgen_s": ta, "baseline_s": tb, "ratio": ta / tb, "goal": 1.5,
                            "command": "opgen interpret " + " ".join(opgen_cmd[4:]).replace(str(tmp), "$TMP"),
                            "baseline": "python -c <npz in; the workload's NumPy function; npz out>",
                            "phases": json.loads(ph.stdout)}
        a, b = [], []
        for _ in range(repeat):
            a.append(wall_seconds([py, "-m", "opgen.cli", "list"]))
            b.append(wall_seconds([py, "-c", "import numpy, jinja2, networkx, ml_dtypes"]))
        ta, tb = statistics.median(a), statistics.median(b)
        res["list"] = {"case": "opgen list (every bundled spec)", "opgen_s": ta, "baseline_s": tb, "ratio": ta / tb,
                       "goal": 2.0, "command": "opgen list", "baseline": "python -c 'import numpy, jinja2, networkx, "
                       "ml_dtypes'"}
    res["repeat"] = repeat
    res["cpus"] = os.cpu_count()
    return res
