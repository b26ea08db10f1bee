"""The two tiers of the test suite (README "Set up"): the full suite (`pytest`) and the fast tier
(`pytest -m "not slow"`, the tests that neither build C++ nor run many processes). One collection in this process
(`pytest --collect-only -m "not slow"` through pytest.main, no test runs) gives both: the fast tier is what it
selects, the full suite that plus what the marker deselected. The fast tier is not empty and leaves the heavy
files out; every test file collects tests in the full suite (an import error would lose it)."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


class _Collector:
    """pytest plugin recording the selected and deselected test ids and the collection errors."""

    def __init__(self):
        self.selected: list[str] = []
        self.deselected: list[str] = []
        self.errors: list[str] = []
        self.emu: dict = {True: [], False: []}   # tests parametrized with engine "emu": selected or not

    def _emu(self, items, selected: bool):
        self.emu[selected] += [it.nodeid for it in items
                               if getattr(getattr(it, "callspec", None), "params", {}).get("engine") == "emu"]

    def pytest_deselected(self, items):
        self.deselected += [it.nodeid for it in items]
        self._emu(items, False)

    def pytest_collection_finish(self, session):
        self.selected = [it.nodeid for it in session.items]
        self._emu(session.items, True)

    def pytest_collectreport(self, report):
        if report.failed:
            self.errors.append(report.nodeid)


def _files(ids) -> dict:
    """{test file name: number of ids in it}."""
    out: dict[str, int] = {}
    for i in ids:
        name = Path(i.split("::", 1)[0]).name
        out[name] = out.get(name, 0) + 1
    return out


@pytest.fixture(scope="module")
def collection() -> _Collector:
    """The one collection of the module: the fast tier selected, the rest deselected."""
    c = _Collector()
    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-m", "not slow",
                        str(TESTS)], plugins=[c])
    assert code == pytest.ExitCode.OK, code
    return c


@pytest.fixture(scope="module")
def tiers(collection):
    """(full suite ids, fast tier ids, collection errors)."""
    return collection.selected + collection.deselected, collection.selected, collection.errors


def test_every_test_file_has_tests_in_the_full_suite(tiers):
    full, _, errors = tiers
    assert not errors, errors
    counts = _files(full)
    assert [p.name for p in sorted(TESTS.glob("test_*.py")) if not counts.get(p.name)] == []
    assert len(set(full)) == len(full) > 500


def test_the_fast_tier_is_a_non_empty_part_of_the_full_suite(tiers):
    full, fast, _ = tiers
    assert fast and len(fast) < len(full)
    counts, all_counts = _files(fast), _files(full)
    # a real choice: most files keep tests in it, the heaviest are out of it, this test is in it
    assert len(counts) >= len(all_counts) // 2, sorted(counts)
    for heavy in ("test_kernels.py", "test_kernels_nsa.py", "test_examples.py", "test_check.py"):
        assert all_counts.get(heavy) and heavy not in counts, heavy
    assert counts.get("test_tiers.py") == all_counts["test_tiers.py"]


def test_ci_runs_the_readmes_test_command_and_the_readme_names_the_fast_tier():
    """.ci/run holds the README's test command as one line, unchanged; the README names the fast tier's command."""
    readme = (TESTS.parent / "README.md").read_text()
    part = readme[readme.index("Install with the test extra"):]
    blocks = part.split("```bash\n")
    command, fast = blocks[1].split("\n```")[0].strip(), blocks[2].split("\n```")[0].strip()
    assert "pip install -e '.[test]'" in command and "-m pytest" in command and "-n auto" in command
    assert command in (TESTS.parent / ".ci" / "run").read_text().splitlines()
    assert fast.endswith('-m "not slow"') and "-m pytest" in fast


def test_an_emulated_engine_case_is_slow(collection):
    """A test parametrized with engine "emu" builds the emitted C++ (tests/conftest.py marks it slow whatever its
    file says): none is in the fast tier, and there are such tests (the rows families' files parametrize both
    engines)."""
    assert collection.emu[True] == [], collection.emu[True][:5]
    assert len(collection.emu[False]) > 50, len(collection.emu[False])


FAST_TIER_PROBE = '''
import subprocess

import pytest


def _compile(tmp_path):
    (tmp_path / "a.c").write_text("int f(void) { return 1; }\\n")
    subprocess.run(["gcc", "-c", str(tmp_path / "a.c"), "-o", str(tmp_path / "a.o")], check=True)


def test_compiles_unmarked(tmp_path):
    _compile(tmp_path)


@pytest.mark.slow
def test_compiles_marked(tmp_path):
    _compile(tmp_path)


def test_plain():
    assert subprocess.run(["gcc", "--version"], capture_output=True).returncode == 0
'''


def test_the_fast_tier_fails_naming_a_test_that_compiles(tmp_path):
    """The fast tier's check (tests/conftest.py pytest_configure / pytest_sessionfinish) in a pytest run of its own
    with this suite's conftest: a `-m "not slow"` run whose unmarked test compiles a C file fails at the end naming
    that test (the test itself passes: the compile ran); the same run without it (a compiler asked for its version
    only) passes; a full run (no marker expression) does not check."""
    import os
    import shutil
    import subprocess
    import sys

    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    (tmp_path / "conftest.py").write_text((TESTS / "conftest.py").read_text())
    (tmp_path / "test_probe.py").write_text(FAST_TIER_PROBE)
    env = {k: v for k, v in os.environ.items() if k not in ("OPGEN_TEST_COMPILE_LOG", "PYTEST_ADDOPTS",
                                                             "PYTEST_XDIST_WORKER", "PYTEST_CURRENT_TEST")}
    env["OPGEN_BUILD_DIR"] = str(tmp_path / "build")

    def run(*args):
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                               "-W", "ignore::pytest.PytestUnknownMarkWarning", *args, "test_probe.py"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)

    r = run("-m", "not slow")
    assert r.returncode == 1 and "2 passed, 1 deselected" in r.stdout, r.stdout[-2000:]
    assert "fast tier: tests that compiled C++" in r.stdout and "test_probe.py::test_compiles_unmarked" in r.stdout
    assert "test_plain" not in r.stdout.split("fast tier: tests that compiled C++")[1]
    r = run("-m", "not slow", "-k", "plain")
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-2000:]
    r = run()
    assert r.returncode == 0 and "3 passed" in r.stdout, r.stdout[-2000:]
