"""opgen's benchmarks (issue 6), run on demand by `opgen bench` or the thin scripts in bench/:

interp    device-mode interpretation vs a direct NumPy implementation of the same math (goal <= 1.5x)
generate  `opgen generate` of all ops vs a bare `python -c "import numpy, jinja2, networkx"` (goal <= 3x),
          and cached re-generation
emu       emulated kernels vs the interpreter (goal <= 5x), GM bytes counted by the emulation over the
          minimum (goal <= 1.10 for the vector ops; NSA next to the reference's CANN estimate) and a
          roofline estimate for Atlas A2 from the counted bytes and cost counters
report    results JSON + markdown table + PNG plots

Every figure is measured side by side in one run on the same machine and states how (command, machine
size, median of N runs).
"""

from __future__ import annotations

import os
import platform


def run_all(repeat: int = 3, quick: bool = False, command: str = "opgen bench") -> dict:
    """Every benchmark; the dict opgen.bench.report writes. `quick`: smaller cases (a smoke run, not the
    figures of record)."""
    from opgen.bench import emu, generate, interp

    res = {"command": command, "repeat": repeat, "quick": quick,
           "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "machine": platform.machine()}}
    res["interp"] = interp.run(repeat, quick=quick)
    res["generate"] = generate.run(repeat)
    g = res["generate"]
    if g["ratio"] > 3:
        g["gap"] = (f"Gap: a first generation traces, lowers and formats every specialisation of the six ops "
                    f"(NormRopeConcat alone: 108 attribute combinations) — {g['ratio']:.1f}x the bare import; the "
                    f"generation cache (opgen/codegen/cache.py) makes an unchanged re-generation "
                    f"{g['ratio_cached']:.1f}x. Closing it: lower one program per distinct body (NormRopeConcat's 108 "
                    f"combinations share 15 bodies) and render the kernels' per-combination tables without "
                    f"tracing each key.")
    res.update(emu.run(repeat, quick))
    return res
