"""Concurrent and interrupted `opgen generate` ("Concurrency / interruption").

- Three `opgen generate --out D` processes at once (each with its own empty generation cache, so all three
  render, format and write): all exit 0, D holds exactly the package, no temporary directory is left.
- SIGINT or SIGTERM at several points of a run (while Python renders, while clang-format runs, while the
  package is written): the exit status is 130 or 143 (0 when the run finished first), stderr is at most one
  line and holds no traceback, no clang-format process started by the run is left, no `opgen-fmt-*` directory
  in its TMPDIR and no writer temporary directory in D, and D holds the old tree or the new one, never a mix.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from processes import procs_mentioning  # noqa: E402

pytestmark = pytest.mark.slow   # builds C++ or runs many processes (the fast tier: -m "not slow")

ROOT = Path(__file__).resolve().parent.parent
GELU = ROOT / "examples" / "specs" / "gelu.py"


def _env(tmp: Path, name: str) -> dict:
    t = tmp / f"tmp-{name}"
    t.mkdir()
    env = {**os.environ, "OPGEN_CACHE_DIR": str(tmp / f"cache-{name}"), "PYTHONPATH": str(ROOT), "TMPDIR": str(t)}
    env.pop("OPGEN_FORMAT_DIR", None)   # clang-format runs (and is interrupted), not the suite's format store
    return env


def _tree(d: Path) -> dict:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """The package generate writes for Gelu (the "new" tree)."""
    d = tmp_path_factory.mktemp("ref")
    r = subprocess.run([sys.executable, "-m", "opgen.cli", "generate", str(GELU), "--out", str(d / "out")],
                       capture_output=True, text=True, timeout=120, env=_env(d, "ref"))
    assert r.returncode == 0, r.stderr
    return _tree(d / "out" / "gelu")


def test_three_generates_at_once(tmp_path, fresh):
    out = tmp_path / "out"
    procs = [subprocess.Popen([sys.executable, "-m", "opgen.cli", "generate", str(GELU), "--out", str(out)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(tmp_path, str(k)))
             for k in range(3)]
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    for _o, err, rc in results:
        assert rc == 0, err
    assert os.listdir(out) == ["gelu"] and _tree(out / "gelu") == fresh
    for k in range(3):
        assert os.listdir(tmp_path / f"tmp-{k}") == []


@pytest.mark.parametrize("delay", [0.4, 0.9, 1.4, 2.0])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_generate(tmp_path, fresh, sig, delay):
    out = tmp_path / "out"
    old = {rel: b"// old\n" + data for rel, data in fresh.items()}
    old["stale.txt"] = b"old\n"
    for rel, data in old.items():
        (out / "gelu" / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / "gelu" / rel).write_bytes(data)
    env = _env(tmp_path, "run")
    p = subprocess.Popen([sys.executable, "-m", "opgen.cli", "generate", str(GELU), "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(delay)
    p.send_signal(sig)
    _out, err = p.communicate(timeout=60)
    assert p.returncode in (0, 128 + sig), err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 1, err
    if p.returncode:   # silent only when the signal came while Python was still importing (nothing started)
        assert err.strip() in ("", f"opgen: interrupted ({sig.name})")
        if not err.strip():
            assert _tree(out / "gelu") == old
    time.sleep(0.2)
    assert procs_mentioning(env["TMPDIR"]) == []               # no clang-format left running
    assert os.listdir(env["TMPDIR"]) == []                      # no opgen-fmt-* directories
    assert os.listdir(out) == ["gelu"]                          # no writer temp dirs
    assert _tree(out / "gelu") in (old, fresh)                  # the old tree or the new one
    if p.returncode == 0:
        assert _tree(out / "gelu") == fresh


def test_cancel_after_an_interrupted_result_is_quiet(monkeypatch):
    """A signal during PendingFormat.result() reaps clang-format there; generate_all's clean-up then cancels the
    same pending format, which must not read the closed pipes (it raised ValueError: exit 3 instead of 143)."""
    from opgen.codegen.fmt import format_start

    monkeypatch.delenv("OPGEN_FORMAT_DIR", raising=False)   # a process to interrupt, not the format store
    pf = format_start({"a.cpp": "int  x ;\n"})
    pf.proc.kill()
    pf.proc.communicate()          # what result()'s handler does when interrupted
    pf.cancel()                    # must not raise
    pf.cancel()
