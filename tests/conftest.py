"""Session settings of the test suite (read before any test module)."""

import os

# The test suite's checks run small cases: their launch drivers are built at -O0 (the "quick" variant,
# opgen/check/build.py launch_variant), a third of the compiler CPU of the default -O1. Subprocesses inherit it.
# An explicit OPGEN_CHECK_OPT in the environment wins (OPGEN_CHECK_OPT=1 runs the suite on the -O1 drivers).
os.environ.setdefault("OPGEN_CHECK_OPT", "0")


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def session_build_root(tmp_path_factory):
    """One check build root for the whole session (per xdist worker), for tests that check copies of a package
    (mutations) and must not touch $OPGEN_BUILD_DIR: the op-independent objects (runtime.o, check_main.o) are then
    compiled once, not once per test; each copied tree still gets its own build directory (its path's hash)."""
    return tmp_path_factory.mktemp("check-build")
