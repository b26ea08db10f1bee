"""Session settings of the test suite (read before any test module)."""

import os
import sys
from pathlib import Path

# The test suite's checks run small cases: their launch drivers are built at -O0 (the "quick" variant,
# opgen/check/build.py launch_variant), a third of the compiler CPU of the default -O1. Subprocesses inherit it.
# An explicit OPGEN_CHECK_OPT in the environment wins (OPGEN_CHECK_OPT=1 runs the suite on the -O1 drivers).
os.environ.setdefault("OPGEN_CHECK_OPT", "0")
# The aclnn case runner as one translation unit (opgen.check.build.ONE_TU_ENV): one compiler process instead of three;
# tests/test_codegen.py compiles every emitted file on its own, tests/test_build_variants.py a runner both ways.
os.environ.setdefault("OPGEN_CHECK_ACLNN_ONE_TU", "1")

# One BLAS / OpenMP thread a process. The suite runs one xdist worker per CPU, so NumPy's OpenBLAS (the interpreter's
# matmuls, the oracles) and torch's intra-op pool in each worker only contended for the CPUs the other worker uses,
# and an idle OpenBLAS pool spins: tests/test_nsa.py, test_oracles.py and test_cube.py (interpreter and oracle cases,
# -n 2) took 30.3 s of CPU with the default threads and 22.8 s with one, at the same wall time; every `opgen`
# subprocess starts 0.05 s of CPU cheaper (OpenBLAS starts no thread pool). Set before anything imports NumPy (pytest
# has not: this file is read first); subprocesses inherit it. An explicit value in the environment wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

# Bytecode: the suite starts a few hundred `opgen` processes (the CLI tests) and each imports ~150 opgen modules.
# Where the environment forbids writing bytecode (PYTHONDONTWRITEBYTECODE, set on some CI images), every one of them
# compiled every module from source again (0.16 s of CPU a process). The suite writes it instead, beside the check
# builds (a cache the suite uses anyway, empty on a fresh machine), never into the source tree: Python's pycache
# prefix ($OPGEN_BUILD_DIR/pycache, else ~/.cache/opgen/build/pycache). Subprocesses inherit it; pytest's rewritten
# test modules go there too. An explicit PYTHONPYCACHEPREFIX wins.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
_root = os.environ.get("OPGEN_BUILD_DIR") or str(Path.home() / ".cache" / "opgen" / "build")
os.environ.setdefault("PYTHONPYCACHEPREFIX", str(Path(_root) / "pycache"))
# The dependency pass's placements (opgen.kernel.kir_sync.place_syncs_memo) are shared the same way: a kernel class
# placed by one worker or one `opgen` subprocess is read by the others, whatever generate cache a test isolates. The
# directory is the one `opgen` itself uses in this environment (memo_dir(): `syncs/` of $OPGEN_CACHE_DIR, else of
# ~/.cache/opgen/generate), fixed here before any test isolates its generate cache, so an `opgen generate` or
# `opgen diff` run after the suite (.ci/run) reads the placements the suite made instead of placing them again.
_gen_root = os.environ.get("OPGEN_CACHE_DIR") or str(Path.home() / ".cache" / "opgen" / "generate")
os.environ.setdefault("OPGEN_SYNC_DIR", str(Path(_gen_root) / "syncs"))
# clang-format's results (opgen.codegen.fmt, "The format store"), keyed by the binary's version, the style file and the
# input text, are shared the same way: a file any worker, test or `opgen` subprocess formatted is not formatted again
# (the suite formats the same emitted files many times over: each test isolating its generate cache renders them anew).
os.environ.setdefault("OPGEN_FORMAT_DIR", str(Path(_gen_root) / "formats"))
sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"]
sys.dont_write_bytecode = False


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def session_build_root(tmp_path_factory):
    """One check build root for the whole session (per xdist worker), for tests that check copies of a package
    (mutations) and must not touch $OPGEN_BUILD_DIR: the op-independent objects (runtime.o, check_main.o) are then
    compiled once, not once per test; each copied tree still gets its own build directory (its path's hash)."""
    return tmp_path_factory.mktemp("check-build")


CPU_LOG = os.environ.get("OPGEN_TEST_CPU_LOG")
"""When set, a file to which every test phase appends one line `<cpu seconds>\t<phase>\t<node id>\t<worker>\t<end>`:
user + system CPU of the worker process and of the processes it waited for (g++, ninja, CLI subprocesses), from
getrusage; the xdist worker (gw<N>, "-" without xdist) and the phase's end (Unix time, seconds), which show how the
run was spread over the workers. Wall time (`--durations`) on a shared machine measures the load as much as the
test; this measures the test (README "Set up", how the suite's time was measured)."""


if CPU_LOG:
    import resource  # noqa: E402
    import time  # noqa: E402

    def _cpu() -> float:
        s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

    def _logged(phase):
        @pytest.hookimpl(hookwrapper=True)
        def hook(item):
            t0 = _cpu()
            yield
            with open(CPU_LOG, "a") as f:
                f.write(f"{_cpu() - t0:.3f}\t{phase}\t{item.nodeid}\t{os.environ.get('PYTEST_XDIST_WORKER', '-')}"
                        f"\t{time.time():.1f}\n")
        return hook

    pytest_runtest_setup = _logged("setup")
    pytest_runtest_call = _logged("call")
    pytest_runtest_teardown = _logged("teardown")


@pytest.hookimpl(tryfirst=True)   # before `-m`'s deselection reads the markers
def pytest_collection_modifyitems(config, items):
    """A test parametrized with engine "emu" runs the emitted C++ on the g++ emulation, so it builds C++: it is
    `slow` (the marker's rule, pyproject.toml), as its "kir" twin, which runs the Kernel IR on the interpreter, is
    not. One rule for every file that parametrizes both engines, so the fast tier (README "Set up") holds the
    interpreter's half of each such test and none of its builds."""
    for item in items:
        cs = getattr(item, "callspec", None)
        if cs is not None and cs.params.get("engine") == "emu":
            item.add_marker(pytest.mark.slow)


def _run_dir(tmp_path_factory) -> Path:
    """The run's own temporary directory, shared by its xdist workers (each worker's basetemp is popen-gw<N>
    inside it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def run_shared(tmp_path_factory):
    """get(name, fill) -> Path: the directory `name` of the run's temporary directory, made once per run and shared
    by the xdist workers: the first call of the run creates it and calls fill(path) to fill it, holding a lock that
    a call from the other worker waits on; every later call returns it as it is. For what every worker would
    otherwise make the same way (a generated tree, so its emulated kernels are built once: a check's build
    directory is keyed by the tree's path and the builds of one directory take its lock; a test helper compiled
    with g++). A fill that raises leaves nothing behind, and the next call tries again. The directory is read-only
    by convention: a test that edits it copies it first."""
    import fcntl
    import shutil

    def get(name: str, fill) -> Path:
        base = _run_dir(tmp_path_factory)
        path = base / name
        with open(base / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (base / f"{name}.complete").exists():
                shutil.rmtree(path, ignore_errors=True)
                path.mkdir()
                try:
                    fill(path)
                except BaseException:
                    shutil.rmtree(path, ignore_errors=True)
                    raise
                (base / f"{name}.complete").write_text("")
        return path
    return get


def _generate(specs: list):
    def fill(tree):
        from opgen.codegen import write_ops

        write_ops(sorted(str(p) for p in specs), tree, jobs=2)   # the other worker waits for it
    return fill


EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "specs"
DERIVED_CHECKED = ("cross_entropy_loss_grad", "gelu_grad", "layer_norm_grad", "rms_norm_grad", "softmax_grad",
                   "swiglu_grad")
"""The specs of examples/specs/derived/ whose emitted kernels tests check (`derived_gen`)."""


@pytest.fixture(scope="session")
def examples_gen(run_shared):
    """Every spec of examples/specs/ generated once per run (as `opgen generate examples/specs/*.py --out DIR`) into
    one tree the xdist workers share (run_shared): the tests that check an example as it is check it there, so its
    emulated kernel is built once per run, not once per test that generated a tree of its own. A test that edits a
    spec or a generated file generates its own tree. Returns the tree's path (one directory per op,
    opgen.codegen.write_ops)."""
    return run_shared("examples-gen", _generate(EXAMPLES.glob("*.py")))


@pytest.fixture(scope="session")
def derived_gen(run_shared):
    """The derived operators of examples/specs/derived/ that tests check (DERIVED_CHECKED) generated once per run
    into one tree the xdist workers share, as examples_gen: each derived kernel is built once per run. Returns the
    tree's path."""
    return run_shared("derived-gen", _generate([EXAMPLES / "derived" / f"{n}.py" for n in DERIVED_CHECKED]))


@pytest.fixture(scope="session")
def emu_instances():
    """variant -> the g++ arguments with which a test's own emulation program shares the emulation's common template
    specializations with the check builds: [-D<INSTANCES_MACRO>, the shared directory's instances_target(variant)]
    (opgen.check.build.shared_objects; "quick": the object compiled at -O1, for the -O1 programs; "asan": compiled
    with the asan variant's sanitizers at -O0, for the -O0 AddressSanitizer + UBSan programs). The program's
    kernel_operator.h then declares those specializations `extern template` and links the one object instead of
    compiling its own copies: tests/cpp/emu_scenarios.cpp at -O1 3.3 -> 2.8 s of compiler CPU, its ASan build
    5.7 -> 4.3 s, test_isa's program 9.0 -> 7.8 s; the object is built once per run (the check builds link it too).
    The same emulation code runs, compiled with the same optimisation level and sanitizers."""
    from opgen.check.build import INSTANCES_MACRO, instances_target, shared_objects

    def get(variant: str) -> list:
        return [f"-D{INSTANCES_MACRO}", str(shared_objects([instances_target(variant)]) / instances_target(variant))]
    return get


@pytest.fixture(scope="session")
def emu_pch(run_shared):
    """flags -> the g++ arguments with which a test's own emulation program reads the emulation's kernel_operator.h
    precompiled, once per run and flag set, instead of parsing it again: [-Winvalid-pch, -include, <dir>/
    kernel_operator.h], the directory (run_shared, named by a hash of the flags) holding the check builds' wrapper
    header (opgen.check.build.pch_wrapper: an include guard around the real header's path) and its .gch.

    flags: the program's compile options (a list of str: -std, -O, -pthread, -D, -I, -f and sanitizer options, as
    given to g++). The header is precompiled with them, the -W options left out: GCC accepts a .gch only from a compile
    with the same code-generation options and macros (-Winvalid-pch warns otherwise, an error under -Werror), while
    warning options do not enter it. Forced first (-include), so a program whose first line is another `#include`
    still reads it; the program's own `#include "kernel_operator.h"` then adds nothing (the header's #pragma once).
    What a program compiles and runs is the same: the parse of the header is read back, the program's code is
    generated as before (the -O1 emulation programs: 0.3-0.5 s of compiler CPU less each, the syntax-only compiles of
    tests/test_emu_strict.py 0.64 -> 0.22 s each). Raises AssertionError with g++'s output when the header does not
    compile with `flags`, ValueError when the wrapper cannot name the header (a `"` in its path)."""
    import hashlib
    import shutil
    import subprocess

    from opgen.check.build import PCH_HEADER, pch_wrapper

    wrapper = pch_wrapper()
    if wrapper is None:
        raise ValueError("emu_pch: the emulation's include path cannot be written in an #include line")

    def get(flags: list) -> list:
        opts = [f for f in flags if not f.startswith("-W")]
        key = hashlib.sha256("\0".join(opts).encode()).hexdigest()[:12]

        def fill(d: Path):
            (d / PCH_HEADER).write_text(wrapper)
            r = subprocess.run([shutil.which("g++") or "g++", *opts, "-x", "c++-header", str(d / PCH_HEADER), "-o",
                                str(d / f"{PCH_HEADER}.gch")], capture_output=True, text=True)
            assert r.returncode == 0, f"emu_pch({opts}): the header does not precompile:\n{r.stderr[-4000:]}"
        return ["-Winvalid-pch", "-include", str(run_shared(f"emu-pch-{key}", fill) / PCH_HEADER)]
    return get


EMU_INCLUDE = Path(__file__).resolve().parent.parent / "opgen" / "emu" / "include"
EMU_PROGRAM_FLAGS = ("-std=c++17", "-O1", "-pthread", "-Wall", "-Werror", f"-I{EMU_INCLUDE}")
"""g++ options of a test's own -O1 emulation program (emu_program): the emulation's include directory, every
warning an error."""


@pytest.fixture(scope="session")
def emu_program(run_shared, emu_instances, emu_pch):
    """(source, flags=EMU_PROGRAM_FLAGS) -> path of the executable of one C++ file of the tests (tests/cpp/...)
    compiled with `flags` (a sequence of g++ options), linking the emulation's quick shared specializations
    (emu_instances) and reading kernel_operator.h precompiled (emu_pch): built once per run for every test and worker
    that asks for the same file and flags (run_shared, named by the file's stem and a hash of path and flags), so a
    module whose tests the two workers share, or several tests running one program, compile it once. Raises
    AssertionError with g++'s output when it does not compile."""
    import hashlib
    import shutil
    import subprocess

    def get(src: Path, flags=EMU_PROGRAM_FLAGS) -> Path:
        flags = list(flags)
        key = hashlib.sha256("\0".join([str(src), *flags]).encode()).hexdigest()[:12]
        exe = Path(src).stem

        def fill(d: Path):
            quick = emu_instances("quick")
            r = subprocess.run([shutil.which("g++") or "g++", *flags, *emu_pch(flags + quick[:1]), str(src), *quick,
                                "-o", str(d / exe)], capture_output=True, text=True)
            assert r.returncode == 0, f"{src} does not compile:\n{r.stderr[-4000:]}"
        return run_shared(f"emu-prog-{exe}-{key}", fill) / exe
    return get


COMPILE_LOG_ENV = "OPGEN_TEST_COMPILE_LOG"
"""Set by the fast tier (`-m "not slow"`) to a file every compile or link of the run appends its test's id to."""


def _fast_tier(config) -> bool:
    """Whether this run is the fast tier: the marker expression `not slow` (README "Set up")."""
    return (config.getoption("markexpr", "") or "").split() == ["not", "slow"]


def pytest_configure(config):
    """The fast tier's rule, checked (README "Set up": its tests build no C++): in a `-m "not slow"` run, g++ / gcc /
    c++ / cc on PATH are small scripts that append the id of the running test (PYTEST_CURRENT_TEST, which pytest
    sets in the process every compile inherits) to a log when they compile or link (`-c` or `-o` among their
    arguments, or a syntax-only compile), then run the real compiler, so every test passes or fails on its own
    merits; the run fails at the end naming each test that compiled (pytest_sessionfinish). The scripts live in the
    build root (`fast-tier-bin`: one stable path, so the check builds' compiler-keyed shared directory is one for
    every fast-tier run; outside a fast-tier run they only run the compiler), xdist workers inherit PATH and the log's
    path from the controller; this run alone reads the log (a session started inside it, in-process or as a
    subprocess, inherits the variable and leaves it alone), and pytest_unconfigure puts PATH back."""
    import shlex
    import shutil
    import tempfile

    if not _fast_tier(config) or config.option.collectonly or os.environ.get(COMPILE_LOG_ENV):
        return   # (a collection only, as tests/test_tiers.py runs in-process, compiles nothing)
    shim = Path(_root) / "fast-tier-bin"
    shim.mkdir(parents=True, exist_ok=True)
    # the real compilers: PATH without the scripts (a run started from a fast-tier test inherits them)
    search = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                             if d and Path(d).resolve() != shim.resolve())
    found = False
    for name in ("g++", "gcc", "c++", "cc"):
        real = shutil.which(name, path=search)
        if real is None:
            continue
        found = True
        text = ("#!/bin/sh\n"
                "# opgen's fast tier (tests/conftest.py pytest_configure): log the test that compiles, then compile\n"
                'if [ -n "$OPGEN_TEST_COMPILE_LOG" ]; then\n'
                '  for a in "$@"; do case "$a" in -c|-o|-fsyntax-only)\n'
                '    printf \'%s\\n\' "${PYTEST_CURRENT_TEST:-(no test)}" >> "$OPGEN_TEST_COMPILE_LOG"; break;;\n'
                '  esac; done\n'
                "fi\n"
                f"exec {shlex.quote(real)} \"$@\"\n")
        path = shim / name
        if not path.exists() or path.read_text() != text:
            tmp = path.with_name(f".{name}.{os.getpid()}")
            tmp.write_text(text)
            tmp.chmod(0o755)
            tmp.replace(path)
    if found:
        fd, log = tempfile.mkstemp(prefix="opgen-fast-tier-compiles-", suffix=".log")
        os.close(fd)
        _COMPILE_LOG_OWNER.update(config=config, log=log, path=os.environ.get("PATH"))
        os.environ[COMPILE_LOG_ENV] = log
        os.environ["PATH"] = f"{shim}{os.pathsep}{search}"


_COMPILE_LOG_OWNER: dict = {}
"""The run that set up the fast tier's compile log (pytest_configure): its config, the log's path, PATH before."""


def pytest_unconfigure(config):
    """The fast tier's run puts PATH and COMPILE_LOG_ENV back and removes its log (pytest_configure)."""
    if _COMPILE_LOG_OWNER.get("config") is not config:
        return
    path, log = _COMPILE_LOG_OWNER.pop("path"), _COMPILE_LOG_OWNER.pop("log")
    _COMPILE_LOG_OWNER.clear()
    if path is None:
        os.environ.pop("PATH", None)
    else:
        os.environ["PATH"] = path
    os.environ.pop(COMPILE_LOG_ENV, None)
    Path(log).unlink(missing_ok=True)


def pytest_sessionfinish(session, exitstatus):
    """The fast tier fails when a test compiled C++ (pytest_configure), naming each one: mark it
    @pytest.mark.slow."""
    if _COMPILE_LOG_OWNER.get("config") is not session.config:   # a worker, or a session started inside the run
        return
    try:
        lines = Path(_COMPILE_LOG_OWNER["log"]).read_text().splitlines()
    except OSError:
        return
    tests = sorted({x.rsplit(" (", 1)[0] for x in lines})
    if tests:
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        text = ("the fast tier builds no C++ (README \"Set up\"), but these tests compiled (mark them "
                "@pytest.mark.slow):\n" + "\n".join(f"  {t}" for t in tests))
        if tr is not None:
            tr.ensure_newline()
            tr.write_sep("=", "fast tier: tests that compiled C++", red=True)
            tr.write_line(text)
        else:
            print(text, file=sys.stderr)
        if session.exitstatus == pytest.ExitCode.OK:   # (an interrupted or failed run keeps its own status)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
