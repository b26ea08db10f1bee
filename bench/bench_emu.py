"""Emulated kernels: time vs the interpreter, counted GM bytes, roofline (opgen/bench/emu.py; `opgen bench`)."""
import sys

from opgen.bench.emu import main

if __name__ == "__main__":
    sys.exit(main())
