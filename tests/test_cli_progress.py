"""Progress lines (opgen.progress): on a terminal the long commands show one line rewritten in place and erased at
the end; in a pipe nothing, unless --progress asks (then one line per step); `opgen bench --quick` writes its report
to a scratch directory, never over the committed bench/results; the help of every option says what it does."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from opgen.progress import Progress

pytestmark = pytest.mark.slow   # builds C++ or runs many processes (the fast tier: -m "not slow")

ROOT = Path(__file__).resolve().parent.parent


def _read_all(fd) -> bytes:
    out = b""
    while True:
        r, _, _ = select.select([fd], [], [], 0.5)
        if not r:
            return out
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return out
        if not chunk:
            return out
        out += chunk


def test_generate_shows_progress_on_a_terminal_only(tmp_path):
    cmd = [sys.executable, "-m", "opgen.cli", "generate", "AdaLayerNormV2", "--out", str(tmp_path / "g")]
    env = {**os.environ, "OPGEN_CACHE_DIR": str(tmp_path / "cache")}
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    out, _ = p.communicate(timeout=300)
    err = _read_all(master).decode()
    os.close(master)
    assert p.returncode == 0
    assert "\ropgen generate: rendering 1/1 AdaLayerNormV2" in err and err.endswith("\r")   # erased at the end
    assert "opgen generate" not in out.decode()   # standard output keeps only the summary
    piped = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert piped.returncode == 0 and piped.stderr == ""
    asked = subprocess.run(cmd + ["--progress"], capture_output=True, text=True, env=env)
    lines = asked.stderr.splitlines()
    assert asked.returncode == 0 and lines and all(x.startswith("opgen generate: ") for x in lines)
    assert "\r" not in asked.stderr and any("formatting 1/1" in x for x in lines)


def test_progress_reporter_in_place_and_as_a_log():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    t = Tty()
    p = Progress("x", stream=t)
    p.step("a long step")
    p.step("b")
    p.done()
    text = t.getvalue()
    assert text.startswith("\rx: a long step (") and "\rx: b (" in text and text.endswith("\r")
    log = io.StringIO()
    q = Progress("x", stream=log)
    q.step("a")
    assert log.getvalue() == ""          # not a terminal, not asked
    q = Progress("x", enabled=True, stream=log)
    q.step("a")
    q.done()
    assert log.getvalue().startswith("x: a (") and log.getvalue().endswith(" s)\n")


def test_bench_quick_never_writes_the_committed_results(tmp_path, monkeypatch):
    import opgen.bench as bench
    from opgen import cli

    results = ROOT / "bench" / "results"
    before = {p: p.stat().st_mtime_ns for p in results.rglob("*") if p.is_file()}
    seen = {}

    def fake_run_all(repeat, quick, command, progress=None, **kw):
        seen["quick"] = quick
        return {"command": command, "repeat": repeat, "quick": quick, "machine": {}}

    monkeypatch.setattr(bench, "run_all", fake_run_all)
    monkeypatch.setattr(cli, "quick_out_dir", lambda: tmp_path / "quick")
    args = cli.build_parser().parse_args(["bench", "--quick", "--repeat", "1"])
    assert cli.cmd_bench(args) == 0 and seen["quick"] is True
    assert (tmp_path / "quick" / "results.json").is_file()
    assert {p: p.stat().st_mtime_ns for p in results.rglob("*") if p.is_file()} == before
    args = cli.build_parser().parse_args(["bench", "--quick", "--out", str(tmp_path / "r")])
    assert cli.cmd_bench(args) == 0 and (tmp_path / "r" / "results.json").is_file()


def test_quick_rows_name_the_case_they_ran():
    from opgen.bench import case_label

    assert case_label("DiT", "AdaLayerNormGrad", {"Bd": (2,), "S": 64, "H": 1152}, True) == \
        "AdaLayerNormGrad Bd=2,S=64,H=1152 (--quick size)"
    assert case_label("DiT", "AdaLayerNormGrad", {"Bd": (2,), "S": 1024, "H": 1152}, False) == "DiT"


def test_every_option_has_help():
    from opgen import cli

    p = cli.build_parser()
    sub = next(a for a in p._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, sp in sub.choices.items():
        assert sp.description or name in ("interpret", "graph", "generate", "check", "bench") and sp.format_usage()
        for a in sp._actions:
            if a.dest in ("help", "debug"):
                continue
            assert a.help and a.help != "==SUPPRESS==", f"opgen {name} {a.option_strings or a.dest}: no help"
    graph = sub.choices["graph"]
    stage = next(a for a in graph._actions if a.dest == "stage")
    assert all(s in stage.help for s in stage.choices)
    interp = sub.choices["interpret"]
    mode = next(a for a in interp._actions if a.dest == "mode")
    assert mode.metavar == "{device,exact}" and "device" in mode.help and "exact" in mode.help
    assert sub.choices["list"].description


def test_interpret_without_out_prints_the_summary(tmp_path):
    r = subprocess.run([sys.executable, "-m", "opgen.cli", "interpret", "AdaLayerNormV2", "--dims", "Bd=2,S=3,H=8"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("dtypes: T=float32, U=float32\nout: [2, 3, 8] float32 min ") and "nothing written" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_unknown_dtype_lists_the_known_ones():
    r = subprocess.run([sys.executable, "-m", "opgen.cli", "interpret", "AdaLayerNormV2", "--dims", "Bd=2,S=3,H=8",
                        "--dtype", "T=complex64"], capture_output=True, text=True)
    assert r.returncode == 2
    assert "unknown dtype 'complex64'" in r.stderr and "bfloat16" in r.stderr and "float16" in r.stderr
