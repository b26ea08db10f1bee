"""Broken inputs and silent acceptance ("Exit 3 instead of a clean error", "Silent acceptance").

Through `opgen interpret` and `opgen check` (the npz is read before anything is built): an empty, truncated,
non-zip, zip-without-npy, garbled-header npz, a header claiming terabytes, a structured or complex dtype each
exit 2 with one line naming --inputs (and the array) and the rule, no traceback, no output file. `--dims`
needing more memory than the machine has, `--out` on a directory, under /proc, empty or equal to `--inputs`,
duplicate `--attr`/`--dtype` keys: exit 2 before any work. Fortran-order arrays give the interpreter the same
output bits as C-order ones. A corrupt `debug/check` binary in the build cache is rebuilt (its stamp no longer
matches), not executed.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow   # builds C++ or runs many processes (the fast tier: -m "not slow")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
GELU = ROOT / "examples" / "specs" / "gelu.py"


def cli(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "opgen.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=cwd)


def assert_clean_error(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("opgen: error: "), r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def _npy_bytes(arr=None, header=None) -> bytes:
    f = io.BytesIO()
    if header is not None:
        np.lib.format.write_array_header_1_0(f, header)
    else:
        np.lib.format.write_array(f, arr)
    return f.getvalue()


def _zip(path, members: dict) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def _good(tmp):
    p = tmp / "good.npz"
    np.savez(p, self=np.ones((2, 3), np.float32))
    return p


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


MALFORMED = {
    "empty": lambda t: _write(t / "e.npz", b""),
    "truncated": lambda t: _write(t / "tr.npz", _good(t).read_bytes()[:60]),
    "not a zip": lambda t: _write(t / "nz.npz", b"hello, not a zip at all\n" * 4),
    "member not npy": lambda t: _zip(t / "m.npz", {"self.txt": b"1 2 3"}),
    "garbled header": lambda t: _zip(t / "g.npz", {"self.npy": b"\x93NUMPY\x01\x00\x10\x00{'descr': <<<}    \n"}),
    "bad magic": lambda t: _zip(t / "b.npz", {"self.npy": b"NOTNUMPY" + b"\0" * 64}),
    "data truncated": lambda t: _zip(t / "d.npz", {"self.npy": _npy_bytes(np.ones(1000, np.float32))[:200]}),
    "terabyte header": lambda t: _zip(t / "tb.npz", {"self.npy": _npy_bytes(header={
        "descr": "<f4", "fortran_order": False, "shape": (10 ** 7, 10 ** 7)})}),
    "structured 2-byte": lambda t: _zip(t / "s.npz", {"self.npy": _npy_bytes(
        np.zeros((2, 3), dtype=[("a", "u1"), ("b", "u1")]))}),
    "complex": lambda t: _zip(t / "c.npz", {"self.npy": _npy_bytes(np.zeros((2, 3), np.complex64))}),
    "unicode": lambda t: _zip(t / "u.npz", {"self.npy": _npy_bytes(np.array(["ab", "cd"]))}),
    "directory": lambda t: (t / "dir.npz").mkdir() or (t / "dir.npz"),
}
NEEDLES = {"terabyte header": ["self", "400000000000000 bytes", "truncated or corrupt"], "structured 2-byte": ["self", "numeric"],
           "complex": ["self", "numeric"], "unicode": ["self", "numeric"], "data truncated": ["self", "truncated"]}


@pytest.mark.parametrize("command", ["interpret", "check"])
@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_npz(tmp_path, command, case, monkeypatch):
    """In-process (tests/inproc.py: exit status, stderr and files are what a process shows; an exception escaping
    main fails the test as a traceback would), with an empty $OPGEN_BUILD_DIR: `check` refuses the file before
    anything is built, so the build root stays absent."""
    from inproc import cli as inproc_cli

    build = tmp_path / "build"
    monkeypatch.setenv("OPGEN_BUILD_DIR", str(build))
    path = MALFORMED[case](tmp_path)
    out = tmp_path / "out.npz"
    r = inproc_cli(command, GELU, "--inputs", path, "--out", out)
    assert_clean_error(r, "--inputs", *NEEDLES.get(case, []))
    assert not out.exists() and not build.exists()


def test_header_beyond_available_memory(tmp_path):
    """A header whose bytes the member does hold (a sparse-looking but honest size) yet memory cannot."""
    from opgen import resources

    avail = resources.available_memory()
    assert avail is not None and avail > 0
    from opgen.cli import _load_npz
    from opgen.errors import ValidationError

    n = avail // 4 + 1024
    p = tmp_path / "big.npz"
    hdr = _npy_bytes(header={"descr": "<f4", "fortran_order": False, "shape": (n,)})
    zi = zipfile.ZipInfo("self.npy")
    with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_STORED) as z:   # claim the size without writing it
        z.writestr(zi, hdr)
    orig = zipfile.ZipFile.infolist

    def patched(self):
        infos = orig(self)
        for i in infos:
            i.file_size = len(hdr) + 4 * n
        return infos

    try:
        zipfile.ZipFile.infolist = patched
        with pytest.raises(ValidationError) as e:
            _load_npz(str(p))
    finally:
        zipfile.ZipFile.infolist = orig
    assert "self" in str(e.value) and "memory available" in str(e.value)


def test_dims_beyond_memory():
    r = cli("interpret", GELU, "--dims", "Bd=1000000x1000000x100", "--out", "/tmp/never-written.npz")
    assert_clean_error(r, "--dims", "self", "memory available")
    assert not Path("/tmp/never-written.npz").exists()


@pytest.mark.parametrize("out", ["", "DIR", "/proc/self/x", "/proc", "INPUTS", "MISSING/o.npz"])
def test_bad_out(tmp_path, out):
    inputs = _good(tmp_path)
    before = inputs.read_bytes()
    out = {"DIR": str(tmp_path), "INPUTS": str(inputs), "MISSING/o.npz": str(tmp_path / "no" / "o.npz")}.get(out, out)
    r = cli("interpret", GELU, "--inputs", inputs, "--out", out)
    assert_clean_error(r, "--out")
    assert inputs.read_bytes() == before


def test_save_inputs_equal_to_out(tmp_path):
    o = tmp_path / "o.npz"
    r = cli("interpret", GELU, "--dims", "Bd=2x3", "--out", o, "--save-inputs", o)
    assert_clean_error(r, "--save-inputs", "--out")
    assert not o.exists()


@pytest.mark.parametrize("flag,a,b", [("--attr", "eps=1", "eps=2"), ("--dtype", "T=float16", "T=float32")])
def test_duplicate_keys(tmp_path, flag, a, b):
    r = cli("interpret", GELU, "--dims", "Bd=2x3", flag, a, flag, b, "--out", tmp_path / "o.npz")
    assert_clean_error(r, flag, "given twice")


@pytest.mark.parametrize("out", ["", "FILE", "/proc/opgen"])
def test_generate_bad_out(tmp_path, out):
    f = tmp_path / "file"
    f.write_text("x")
    r = cli("generate", GELU, "--out", {"FILE": str(f)}.get(out, out), cwd=tmp_path)
    assert_clean_error(r, "--out")
    assert f.read_text() == "x" and sorted(os.listdir(tmp_path)) == ["file"]


def test_fortran_order_same_bits(tmp_path):
    """AdaLayerNormGrad reduces over rows: a Fortran-order x must give the C-order output bits."""
    from opgen.cli import _load_npz
    from opgen.interp import interpret
    from opgen.registry import load_spec

    r = np.random.default_rng(3)
    x = r.standard_normal((4, 5, 33)).astype(np.float32)
    arrays = {"dy": r.standard_normal((4, 5, 33)).astype(np.float32), "x": x,
              "rstd": (1 / np.sqrt(x.var(-1, keepdims=True) + 1e-5)).astype(np.float32),
              "mean": x.mean(-1, keepdims=True).astype(np.float32),
              "scale": (0.1 * r.standard_normal((4, 1, 33))).astype(np.float32),
              "gamma": r.standard_normal(33).astype(np.float32), "beta": r.standard_normal(33).astype(np.float32)}
    c, f = tmp_path / "c.npz", tmp_path / "f.npz"
    np.savez(c, **arrays)
    np.savez(f, **{k: np.asfortranarray(v) for k, v in arrays.items()})
    assert not _load_npz(str(f))["x"].flags.f_contiguous or _load_npz(str(f))["x"].flags.c_contiguous
    spec = load_spec("AdaLayerNormGrad")
    for mode in ("device", "exact"):
        a = interpret(spec, _load_npz(str(c)), {}, {}, mode)
        b = interpret(spec, _load_npz(str(f)), {}, {}, mode)
        direct = interpret(spec, {k: np.asfortranarray(v) for k, v in arrays.items()}, {}, {}, mode)
        for k in a:
            assert a[k].tobytes() == b[k].tobytes() == direct[k].tobytes(), (mode, k)


def test_structured_dtype_refused_in_api():
    from opgen.errors import ValidationError
    from opgen.interp import interpret
    from opgen.registry import load_spec

    spec = load_spec(str(GELU))
    with pytest.raises(ValidationError) as e:
        interpret(spec, {"self": np.zeros((2, 3), dtype=[("a", "u1"), ("b", "u1")])}, {}, {"T": "bfloat16"})
    assert e.value.param == "self" and "structured" in e.value.rule


def test_corrupt_build_cache_binary_is_rebuilt(tmp_path):
    """Builder's stamp: a binary whose bytes changed after its build is deleted and relinked by ninja."""
    from opgen.check import build

    b = build.Builder.__new__(build.Builder)
    b.src, b.dir, b.files, b.progress = types.SimpleNamespace(op="Tiny"), tmp_path / "bd", {}, False
    (tmp_path / "bd").mkdir()
    (tmp_path / "prog.sh").write_text("#!/bin/sh\necho fine\n")
    ninja = ("rule cp\n  command = cp $in $out && chmod +x $out\n"
             f"build debug/check: cp {tmp_path / 'prog.sh'}\n")
    orig = build.ninja_file
    build.ninja_file = lambda src, cxx, shared=None, **kw: ninja
    try:
        first = b.build("debug/check")
        exe = tmp_path / "bd" / "debug" / "check"
        assert first.rebuilt and subprocess.run([str(exe)], capture_output=True, text=True).stdout == "fine\n"
        assert not b.build("debug/check").rebuilt                 # verified: no work
        exe.write_bytes(b"\x7fELF garbage")                        # corrupt, newer than its input
        again = b.build("debug/check")
        assert again.rebuilt and subprocess.run([str(exe)], capture_output=True, text=True).stdout == "fine\n"
    finally:
        build.ninja_file = orig
