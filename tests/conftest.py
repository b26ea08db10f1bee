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


CPU_LOG = os.environ.get("OPGEN_TEST_CPU_LOG")
"""When set, a file to which every test phase appends one line `<cpu seconds>\t<phase>\t<node id>`: user + system CPU
of the worker process and of the processes it waited for (g++, ninja, CLI subprocesses), from getrusage. Wall time
(`--durations`) on a shared machine measures the load as much as the test; this measures the test (README "Set up",
how the suite's time was measured)."""


if CPU_LOG:
    import resource  # noqa: E402

    def _cpu() -> float:
        s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

    def _logged(phase):
        @pytest.hookimpl(hookwrapper=True)
        def hook(item):
            t0 = _cpu()
            yield
            with open(CPU_LOG, "a") as f:
                f.write(f"{_cpu() - t0:.3f}\t{phase}\t{item.nodeid}\n")
        return hook

    pytest_runtest_setup = _logged("setup")
    pytest_runtest_call = _logged("call")
    pytest_runtest_teardown = _logged("teardown")
