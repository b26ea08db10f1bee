"""Special files, odd paths and the --dims grammar (docs/design.md "Command line"): `--inputs` / `--out` take regular files only (a FIFO, a character device, a socket, a link to
/dev/zero are refused with one line, and a FIFO never hangs the command); `--dims` has a strict grammar; a
`--gen-dir` path holding `$`, spaces, colons or a line break builds and checks (ninja escaping; a line break,
which a ninja file cannot express, through a link under the build directory). Errors: exit 2 and one line."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from opgen.cli import main

ROOT = Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "examples" / "specs" / "rms_norm.py")


def _cli_subprocess(*args, timeout=60):
    """(exit status, stderr) of the CLI in a child process: a hang fails the test instead of blocking it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "opgen.cli", *args], capture_output=True, text=True, timeout=timeout,
                       env=env, stdin=subprocess.DEVNULL)
    return r.returncode, r.stderr


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def npz(tmp_path):
    p = tmp_path / "in.npz"
    np.savez(p, x=np.ones((2, 8), np.float32), gamma=np.ones(8, np.float32))
    return p


@pytest.mark.parametrize("cmd", ["interpret", "check"])
def test_inputs_fifo_is_refused_without_hanging(tmp_path, cmd):
    fifo = tmp_path / "in.npz"
    os.mkfifo(fifo)
    out = ["--out", str(tmp_path / "o.npz")] if cmd == "interpret" else []
    rc, err = _cli_subprocess(cmd, SPEC, "--inputs", str(fifo), *out, timeout=60)
    assert rc == 2
    assert _one_line(err) == f"opgen: error: --inputs: {fifo} is a FIFO (named pipe); must be a regular .npz file"


def test_inputs_link_to_dev_zero_and_socket(tmp_path, capsys):
    link = tmp_path / "zero.npz"
    link.symlink_to("/dev/zero")
    assert main(["interpret", SPEC, "--inputs", str(link), "--out", str(tmp_path / "o.npz")]) == 2
    assert _one_line(capsys.readouterr().err).endswith(f"--inputs: {link} is a character device; must be a regular "
                                                       f".npz file")
    sock_path = tmp_path / "s.npz"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock_path))
        assert main(["interpret", SPEC, "--inputs", str(sock_path), "--out", str(tmp_path / "o.npz")]) == 2
    assert _one_line(capsys.readouterr().err).endswith(f"--inputs: {sock_path} is a socket; must be a regular .npz "
                                                       f"file")


def test_out_special_files_are_refused(tmp_path, npz, capsys):
    fifo = tmp_path / "o.npz"
    os.mkfifo(fifo)
    rc, err = _cli_subprocess("interpret", SPEC, "--inputs", str(npz), "--out", str(fifo))
    assert rc == 2
    assert _one_line(err) == f"opgen: error: --out: {fifo} is a FIFO (named pipe); must be a regular .npz file"
    assert fifo.is_fifo()      # left as it was
    link = tmp_path / "z.npz"
    link.symlink_to("/dev/zero")
    assert main(["interpret", SPEC, "--inputs", str(npz), "--out", str(link)]) == 2
    assert "--out" in _one_line(capsys.readouterr().err)
    # a regular file is still overwritten, an absent one written
    assert main(["interpret", SPEC, "--inputs", str(npz), "--out", str(tmp_path / "new.npz")]) == 0
    assert set(np.load(tmp_path / "new.npz").files) == {"y", "rstd"}


@pytest.mark.parametrize("dims, rule", [
    ("Bd=2,,H=8", "--dims: item 2 of 'Bd=2,,H=8' is empty"),
    ("Bd=2,H=8,", "--dims: item 3 of 'Bd=2,H=8,' is empty"),
    ("Bd=2,H=\u0663", "--dims: H: '\u0663' is not a dim value (ASCII digits 0-9"),
    ("Bd=2,H=\uff18", "--dims: H: '\uff18' is not a dim value"),          # a full-width 8
    ("Bd=2,H=+8", "--dims: H: '+8' is not a dim value"),
    ("Bd=2,H=1_6", "--dims: H: '1_6' is not a dim value"),
    ("Bd=2x,H=8", "--dims: Bd: '2x' is not a dim value"),
    ("2H=8", "--dims: '2H' is not a dim name (an ASCII identifier"),
    ("H\u00e9=8", "--dims: 'H\u00e9' is not a dim name"),
    ("", "--dims: give at least one NAME=VALUE"),
])
def test_dims_grammar(dims, rule, tmp_path, capsys):
    assert main(["interpret", SPEC, "--dims", dims, "--out", str(tmp_path / "o.npz")]) == 2
    assert _one_line(capsys.readouterr().err).startswith(f"opgen: error: {rule}")


def test_dims_grammar_accepts_its_forms():
    from opgen.dsl.examples import parse_dims

    assert parse_dims("Bd=2x3,H=8") == {"Bd": (2, 3), "H": 8}
    assert parse_dims(" Bd = , H=08 ") == {"Bd": (), "H": 8}
    assert parse_dims("_x1=0") == {"_x1": 0}


def test_ninja_values_and_paths_are_escaped(tmp_path):
    from opgen.check.build import Sources, ninja_file

    op_dir = tmp_path / "a$b c:d" / "rms_norm"
    text = ninja_file(Sources("RmsNorm", "rms_norm", "aclnn_rms_norm", op_dir), "/usr/bin/g++")
    for line in text.splitlines():
        if line.startswith("build ") and "rms_norm_tiling.cpp" in line:
            assert str(tmp_path / "a$$b$ c$:d" / "rms_norm" / "op_host" / "rms_norm_tiling.cpp") in line, line
        if line.strip().startswith("inc = ") and "op_kernel" in line:
            assert f"-I'{tmp_path}/a$$b c:d/rms_norm/op_kernel'" in line, line
    with pytest.raises(Exception, match="line break"):
        ninja_file(Sources("RmsNorm", "rms_norm", "aclnn_rms_norm", op_dir), "/usr/bin/g\n++")
    with pytest.raises(Exception, match="'\\|'"):   # a tree reaches ninja_file through its link (Builder.build)
        ninja_file(Sources("RmsNorm", "rms_norm", "aclnn_rms_norm", tmp_path / "a|b" / "rms_norm"), "/usr/bin/g++")


@pytest.mark.slow   # builds and runs the check
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")
@pytest.mark.parametrize("odd", ["a$b c:d", "new\nline|pipe"])
def test_gen_dir_with_odd_characters_checks(odd, tmp_path, capsys):
    """A legal --gen-dir path simply works: `$`, space and `:` escaped for ninja; a line break or a `|` (no ninja
    syntax for either in a build statement) through the link <build dir>/tree. The two characters share one case:
    either alone sends the tree through the link (Builder.build's _ninja_safe tests `\n`, `\r` and `|` alike,
    and test_ninja_values_and_paths_are_escaped refuses each in ninja_file). The session's build root serves (its
    shared objects and precompiled header built once); the tree's own build directory is the one whose link, if
    any, points at it."""
    from opgen.check.build import default_build_root

    gen = tmp_path / odd / "gen"
    assert main(["generate", SPEC, "--out", str(gen)]) == 0
    rc = main(["check", SPEC, "--dims", "Bd=2,H=16", "--gen-dir", str(gen)])
    assert rc == 0, capsys.readouterr().err
    target = str((gen / "rms_norm").resolve())
    links = [p for p in default_build_root().glob("rms_norm-*/tree") if os.readlink(p) == target]
    assert len(links) == (1 if ("\n" in odd or "|" in odd) else 0)
