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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from processes import children, procs_mentioning  # noqa: E402

from opgen.errors import OpgenError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "specs"
SPECS = [str(EX / n) for n in ("gelu.py", "softmax.py", "swiglu.py")]


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPGEN_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def test_workers_give_the_files_one_process_gives(empty_cache, monkeypatch):
    from opgen.codegen import generation

    forked, in_parent = [], []
    real_init, real_start = generation._Renderers.__init__, generation.start_generation

    def spy(self, specs, todo, jobs):
        forked.append((list(todo), jobs))
        real_init(self, specs, todo, jobs)

    monkeypatch.setattr(generation._Renderers, "__init__", spy)
    monkeypatch.setattr(generation, "start_generation", lambda spec: in_parent.append(spec) or real_start(spec))
    parallel = generation.generate_all(SPECS, jobs=2)
    assert forked == [([0, 1, 2], 2)]          # all three rendered by workers, two at a time
    assert in_parent == []                     # none of them had to be rendered again here
    monkeypatch.setenv("OPGEN_CACHE_DIR", str(empty_cache / "cache2"))
    serial = generation.generate_all(SPECS, jobs=1)
    assert forked == [([0, 1, 2], 2)] and len(in_parent) == 3   # jobs=1: no worker, all rendered here
    assert parallel == serial
    assert all(files for _n, files in parallel)


def test_the_library_renders_in_one_process_unless_asked(empty_cache, monkeypatch):
    """write_ops / diff_ops / generate_all fork no worker unless given jobs (a caller may itself be a worker);
    the command line passes None: one per CPU."""
    from opgen.codegen import generation

    forked = []
    monkeypatch.setattr(generation._Renderers, "start", lambda self: forked.append(self))
    out = empty_cache / "out"
    generation.write_ops(SPECS[:2], out)
    assert generation.diff_ops(SPECS[:2], out) == ""
    assert len(generation.generate_all(SPECS[:2])) == 2
    assert forked == []
    monkeypatch.setenv("OPGEN_CACHE_DIR", str(empty_cache / "cache2"))   # nothing cached: there is work to fork
    generation.generate_all(SPECS[:2], jobs=None)   # workers asked for (they are stubbed: the parent renders)
    assert len(forked) == (1 if generation.default_jobs() > 1 else 0)


def test_inside_a_daemonic_process_the_op_is_rendered_in_that_process(empty_cache):
    """A multiprocessing worker (daemonic: it may not have children) calling generate_all(jobs=2) still gets
    the packages."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = pool.apply(_names_in_a_worker, (SPECS[:2],))
    assert got == ["Gelu", "SoftmaxV2"]


def _names_in_a_worker(specs):
    from opgen.codegen.generation import generate_all

    return [n for n, _files in generate_all(specs, jobs=2)]


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

    monkeypatch.setattr(generation, "_render_child", lambda spec, conn, mask: os._exit(3))   # every worker dies at once
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


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_an_interrupted_parallel_generate_leaves_no_worker(tmp_path, sig):
    """The signal is sent once the run reports its first rendering step (--progress: one line per step in a pipe)
    and has forked its workers; afterwards no process of the run is left and stderr holds the progress lines and
    the one-line interruption notice, no traceback."""
    import signal
    import time

    out = tmp_path / "out"
    env = {**os.environ, "OPGEN_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "opgen.cli", "generate", *SPECS, "--out", str(out), "--jobs", "2",
                          "--progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    first = p.stderr.readline()
    assert "rendering 1/3" in first, first
    deadline = time.monotonic() + 30
    while not children(p.pid) and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.01)
    workers = children(p.pid)
    p.send_signal(getattr(signal, sig))
    _o, rest = p.communicate(timeout=60)
    err = first + rest
    assert p.returncode in (0, 128 + getattr(signal, sig)), err
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if not ln.startswith("opgen generate: ")]
    if p.returncode:
        assert lines == [f"opgen: interrupted ({sig})"], err
        assert workers   # it was interrupted while its workers ran
    time.sleep(0.3)
    assert procs_mentioning(str(out)) == []   # forked workers carry the parent's command line


@dataclasses.dataclass(frozen=True)
class _SlottedBase:
    __slots__ = ("a",)
    a: int


@dataclasses.dataclass(frozen=True)
class _FromSlotted(_SlottedBase):
    b: int = 0


def test_evolve_of_a_dataclass_with_a_slotted_base_goes_through_replace():
    from opgen.ir.records import evolve

    x = _FromSlotted(1, 2)
    assert evolve(x, b=3) == dataclasses.replace(x, b=3) == _FromSlotted(1, 3)


def test_every_failing_op_is_reported_and_nothing_written(empty_cache, tmp_path, capsys):
    """Two broken specs among good ones: `opgen generate` renders every op and reports both errors, each as it
    reports a single one (a located diagnostic), then one summary line; exit 2 and --out untouched. The
    library raises ManyErrors holding each op's own error in order, the same with workers as without."""
    from opgen.cli import main
    from opgen.codegen.generation import generate_all
    from opgen.errors import ManyErrors

    bad1, bad2 = tmp_path / "geglu.py", tmp_path / "swiglu.py"
    bad1.write_text((EX / "geglu.py").read_text().replace("return {", "return {'x': undefined_name_xyz, ", 1))
    bad2.write_text((EX / "swiglu.py").read_text().replace('return {"y"', 'return {"w"', 1))
    ops = [str(bad1), SPECS[0], str(bad2)]
    got = []
    for jobs in (2, 1):
        with pytest.raises(ManyErrors) as e:
            generate_all(ops, jobs=jobs)
        got.append([str(x) for x in e.value.errors])
        assert e.value.total == 3
    assert got[0] == got[1] and len(got[0]) == 2
    assert "undefined_name_xyz" in got[0][0] and "'w'" in got[0][1]
    text = str(e.value).splitlines()   # a library caller's str(): the summary, then each error indented
    assert text[0] == "2 of 3 ops failed; nothing was written:"
    assert text[1:] == ["  " + line for x in got[1] for line in x.splitlines()]
    out = tmp_path / "out"
    assert main(["generate", *ops, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{bad1}:" in err and f"{bad2}:" in err and "undefined_name_xyz" in err and "'w'" in err
    assert err.rstrip().splitlines()[-1] == "opgen: error: 2 of 3 ops failed; nothing was written"
    assert not out.exists()


def test_one_failing_op_among_several_says_the_others_were_not_written(empty_cache, tmp_path, capsys):
    """One broken spec beside a good one: its error, then a line saying 1 of 2 ops failed and nothing was written
    (a new user's trial: the good package was silently not written)."""
    from opgen.cli import main

    bad = tmp_path / "geglu.py"
    bad.write_text((EX / "geglu.py").read_text().replace("return {", "return {'x': undefined_name_xyz, ", 1))
    out = tmp_path / "out"
    assert main(["generate", SPECS[0], str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "undefined_name_xyz" in err
    assert err.rstrip().splitlines()[-1] == "opgen: error: 1 of 2 ops failed; nothing was written"
    assert not out.exists()


def test_a_failing_op_in_diff_says_nothing_was_compared(empty_cache, tmp_path, capsys):
    """`opgen diff` writes nothing: its summary line after a failing op says nothing was compared (it said
    "nothing was written", the words of generate; a new user's trial)."""
    from opgen.cli import main

    bad = tmp_path / "geglu.py"
    bad.write_text((EX / "geglu.py").read_text().replace("return {", "return {'x': undefined_name_xyz, ", 1))
    assert main(["diff", SPECS[0], str(bad), "--out", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "undefined_name_xyz" in err
    assert err.rstrip().splitlines()[-1] == "opgen: error: 1 of 2 ops failed; nothing was compared"
