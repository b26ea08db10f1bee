"""`opgen generate` / `opgen diff` rendering in worker processes (opgen.codegen.generation.generate_all, --jobs):
the same files as one process gives, the same error for a spec that fails, --jobs validated, and the
copy-with-changes helper the lowering passes use (opgen.ir.records.evolve) equal to dataclasses.replace."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opgen.errors import OpgenError

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "specs"
SPECS = [str(EX / n) for n in ("gelu.py", "softmax.py", "swiglu.py")]


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPGEN_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def test_workers_give_the_files_one_process_gives(empty_cache, monkeypatch):
    from opgen.codegen import generation

    forked = []
    real = generation._Renderers.__init__

    def spy(self, todo, jobs):
        forked.append((list(todo), jobs))
        real(self, todo, jobs)

    monkeypatch.setattr(generation._Renderers, "__init__", spy)
    parallel = generation.generate_all(SPECS, jobs=2)
    assert forked == [([0, 1, 2], 2)]          # all three rendered by workers, two at a time
    monkeypatch.setenv("OPGEN_CACHE_DIR", str(empty_cache / "cache2"))
    serial = generation.generate_all(SPECS, jobs=1)
    assert forked == [([0, 1, 2], 2)]          # jobs=1: no worker
    assert parallel == serial
    assert all(files for _n, files in parallel)


def test_a_failing_spec_raises_the_error_one_process_raises(empty_cache, tmp_path):
    from opgen.codegen.generation import generate_all

    bad = tmp_path / "geglu.py"
    bad.write_text((EX / "geglu.py").read_text().replace("return {", "return {'x': undefined_name_xyz, ", 1))
    errors = []
    for jobs in (2, 1):
        with pytest.raises(OpgenError) as e:
            generate_all([SPECS[0], str(bad), SPECS[1]], jobs=jobs)
        errors.append(str(e.value))
    assert errors[0] == errors[1]
    assert "undefined_name_xyz" in errors[0] and "geglu.py:" in errors[0]


def test_a_worker_that_dies_is_replaced_by_the_parent(empty_cache, monkeypatch):
    from opgen.codegen import generation

    monkeypatch.setattr(generation, "_render_child", lambda k, conn: os._exit(3))   # every worker dies at once
    got = generation.generate_all(SPECS[:2], jobs=2)
    monkeypatch.setenv("OPGEN_CACHE_DIR", str(empty_cache / "cache2"))
    assert got == generation.generate_all(SPECS[:2], jobs=1)


@pytest.mark.parametrize("jobs", [0, -1, 1.5, True, "2"])
def test_jobs_must_be_a_whole_number_of_processes(jobs):
    from opgen.codegen.generation import check_jobs

    with pytest.raises(OpgenError, match="--jobs: must be a whole number of processes >= 1"):
        check_jobs(jobs)
    assert check_jobs(3) == 3 and check_jobs(None) >= 1


@pytest.mark.parametrize("arg", ["0", "two", "-3"])
def test_cli_refuses_a_bad_jobs_value(arg, tmp_path):
    p = subprocess.run([sys.executable, "-m", "opgen.cli", "generate", SPECS[0], "--out", str(tmp_path / "o"),
                        "--jobs", arg], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2
    assert "--jobs: must be a whole number of processes >= 1" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "o").exists()


# -- opgen.ir.records.evolve ------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Plain:
    a: int
    b: tuple = ()
    c: str = "x"


@dataclasses.dataclass(frozen=True)
class _Checked:
    a: int

    def __post_init__(self):
        if self.a < 0:
            raise ValueError("a < 0")


def test_evolve_equals_dataclasses_replace():
    from opgen.ir.records import evolve

    x = _Plain(1, (2, 3))
    for changes in ({}, {"a": 5}, {"b": (), "c": "y"}):
        got, want = evolve(x, **changes), dataclasses.replace(x, **changes)
        assert got == want and type(got) is _Plain and hash(got) == hash(want)
    assert x == _Plain(1, (2, 3))                       # the original is untouched
    with pytest.raises(TypeError, match="no field 'd'"):
        evolve(x, d=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        evolve(x, a=2).a = 3                             # the copy is as frozen as the original


def test_evolve_keeps_the_checks_of_a_class_with_post_init():
    from opgen.ir.records import evolve

    assert evolve(_Checked(1), a=2) == _Checked(2)
    with pytest.raises(ValueError, match="a < 0"):
        evolve(_Checked(1), a=-1)


def _procs_mentioning(text: str) -> list[int]:
    """Pids of live processes whose command line contains `text` (forked workers keep the parent's)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) != os.getpid():
            try:
                if text.encode() in (p / "cmdline").read_bytes():
                    out.append(int(p.name))
            except OSError:
                pass
    return out


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_an_interrupted_parallel_generate_leaves_no_worker(tmp_path, sig):
    import signal
    import time

    out = tmp_path / "out"
    env = {**os.environ, "OPGEN_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "opgen.cli", "generate", *SPECS, "--out", str(out), "--jobs", "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(1.5)
    p.send_signal(getattr(signal, sig))
    _o, err = p.communicate(timeout=60)
    assert p.returncode in (0, 128 + getattr(signal, sig)), err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 1, err
    time.sleep(0.3)
    assert _procs_mentioning(str(out)) == []
