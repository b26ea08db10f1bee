"""Session settings of the test suite (read before any test module)."""

import os

# The test suite's checks run small cases: their launch drivers are built at -O0 (the "quick" variant,
# opgen/check/build.py launch_variant), a third of the compiler CPU of the default -O1. Subprocesses inherit it.
# An explicit OPGEN_CHECK_OPT in the environment wins (OPGEN_CHECK_OPT=1 runs the suite on the -O1 drivers).
os.environ.setdefault("OPGEN_CHECK_OPT", "0")
