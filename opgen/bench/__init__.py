"""opgen's benchmarks (issue 6), run on demand by `opgen bench` or the thin scripts in bench/:

interp    device-mode interpretation vs a direct NumPy implementation of the same math (goal <= 1.5x)
generate  `opgen generate` of all ops vs a bare `python -c "import numpy, jinja2, networkx"` (goal <= 3x),
          and cached re-generation
Every figure is measured side by side in one run on the same machine and states how (command, machine
size, median of N runs).
"""
