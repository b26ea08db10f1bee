"""Interpreter vs direct NumPy (opgen/bench/interp.py; `opgen bench` runs every benchmark)."""
import sys

from opgen.bench.interp import main

if __name__ == "__main__":
    sys.exit(main())
