"""COL_SPLIT / COL_STREAM exchanges with one SyncAll and COL_STREAM's double-buffered chunks (opgen.kernel.rowsched
`_exchange`, `_total_all_rows`, `_stream_chunks`; opgen.tiling.rowkernel `xchg_all`; docs/design.md "COL_SPLIT
exchange"): where the tiling takes the one-SyncAll exchange (every core totals every row of a group, its partials in
one of two workspace regions that alternate), and the kernels -- each exchange form and COL_STREAM forced through
the tiling function, odd widths, a tail core, several groups -- against float64 softmax / log-softmax / RMS norm
written from the formulas, on the g++ emulation and the Kernel-IR interpreter.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from forced_tiling import forced_package
from opgen.ir.dtypes import DType
from opgen.platforms import PLATFORMS
from opgen.registry import _load_file
from opgen.tiling.emit import program_inputs

EX = Path(__file__).resolve().parent.parent / "examples" / "specs"
B1 = PLATFORMS["ascend910b1"]
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")


def _tiling(name: str, rows: int, h: int, dtype: DType) -> dict:
    from opgen.tiling.pipeline import kernel_build

    spec = _load_file(EX / f"{name}.py")
    t = kernel_build(spec).tiling
    return t.program.evaluate(program_inputs(spec, t.program, t.inputs, {"Bd": (rows,), "H": h}, {"T": dtype}, B1,
                                             {}))


def test_one_syncall_only_where_the_extra_reads_stay_within_the_share():
    """xchgAll is 1 only where the one-SyncAll exchange's reads beyond the owners' exchange -- every core reading
    every core's fp32 partials, rows x 2 row reductions x 4 bytes x (cores^2 - 2 cores - 1), counted here from the
    two exchanges' copies -- stay within 1 / 2000 of the row operands' bytes (x read, y written once: 8 bytes an
    fp32 element), so no GM ratio of bench/results rises: the bench's SoftmaxV2 [48, 262144] fp32
    (847,488 bytes against 100,663,296: 0.84 %) and [8, 786432] (0.28 %) keep the owners' exchange (two SyncAll),
    as do [1024, 32000] fp16 and the longest row the spec allows; a row over two cores (fewer bytes than the owners'
    exchange) takes it. The workspace then holds a second region of partials after the first and the totals."""
    from opgen.tiling.rowkernel import XCHG_ALL_SHARE

    assert XCHG_ALL_SHARE == 2000
    for rows, h, dt, elem in ((48, 262144, DType.f32, 8), (8, 786432, DType.f32, 8), (1024, 32000, DType.f16, 4),
                              (1, 1048576, DType.f32, 8), (1, 32, DType.f32, 8)):
        tl = _tiling("softmax", rows, h, dt)
        cc = tl["colCores"]
        owners = 2 * cc + 1          # a row reduction of a row: every core's partial in, the total out, read back
        extra = rows * 2 * 4 * (cc * cc - owners)
        assert tl["xchgAll"] == int(extra * 2000 <= rows * h * elem), (rows, h, cc, extra)
        assert tl["xchgAll"] == (cc <= 2), (rows, h, cc)
    tl = _tiling("softmax", 48, 262144, DType.f32)
    assert (tl["strategy"], tl["blockDim"], tl["colCores"]) == (2, 48, 48)
    # the second region of partials lies after the first (blockDim cores x 1 slot) and the totals (2 slots),
    # groupStride_ floats each; COL_SPLIT's workspace holds it where xchgAll is 1
    for rows, h in ((1, 32), (48, 262144)):
        tl = _tiling("softmax", rows, h, DType.f32)
        g8 = -(-tl["groupRows"] // 8) * 8
        assert tl["xchgOff1"] == (tl["blockDim"] * 1 + 2) * g8
        assert tl["wsColBytesAll"] == (tl["xchgOff1"] + tl["xchgAll"] * tl["blockDim"] * g8) * 4


def _softmax64(x):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _log_softmax64(x):
    x = np.asarray(x, np.float64)
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def _rms_norm64(x, gamma, eps):
    x = np.asarray(x, np.float64)
    rstd = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return x * rstd * np.asarray(gamma, np.float64), rstd


def _run(tmp_path, name, dims, dtype, lets=None, fields=None, seed=0):
    from opgen.check import run_check

    gen = forced_package(tmp_path, EX / f"{name}.py", lets=lets, fields=fields)
    r = run_check(str(EX / f"{name}.py"), dims=dims, dtypes={"T": dtype}, gen_dir=gen, seed=seed, progress=False)
    assert not r.faults and r.passed, (r.faults[:3], r.tiling_key)
    return r


@needs_gxx
@pytest.mark.slow
@pytest.mark.parametrize("dtype,unit", [("float32", 2.0**-24), ("bfloat16", 2.0**-8)])
def test_col_split_softmax_with_either_exchange_against_float64(tmp_path, dtype, unit):
    """SoftmaxV2 COL_SPLIT over 7 rows of 40001 columns (47 cores of 848 and a tail core of 145), in groups of 2
    rows (4 groups, the last of 1: 8 exchanges, so both workspace regions are written twice), with the one-SyncAll
    exchange (xchgAll 1) and the owners' (0), forced through the tiling function: both equal float64 softmax within
    a few units of T's rounding; the one-SyncAll form calls SyncAll once per exchange, the owners' twice."""
    got = {}
    for xa in (1, 0):
        r = _run(tmp_path / f"x{xa}", "softmax", {"Bd": (7,), "H": 40001}, dtype,
                 lets={"strategy": "2", "xchgAll": str(xa)}, fields={"groupRows": "2"}, seed=5)
        assert r.tiling_key % 10 == 2 and r.block_dim == 48
        want = _softmax64(r.inputs["x"])
        y = np.asarray(r.arrays["y"], np.float64)
        assert np.all(np.abs(y - want) <= 4 * unit * want + 2.0**-30), float(np.abs(y - want).max())
        got[xa] = r.cost["sync_alls"]
    assert got == {1: 8, 0: 16}, got


@needs_gxx
@pytest.mark.slow
def test_col_split_rms_norm_one_level_alternates_regions(tmp_path):
    """RmsNorm has one row-reduction level, so consecutive groups' exchanges alternate the two workspace regions
    (a region written again two exchanges later): COL_SPLIT over 9 rows of 33333 bf16 in groups of 2 (5 groups),
    xchgAll forced to 1, against float64 x * rstd * gamma; rstd within fp32 rounding of the float64 one."""
    r = _run(tmp_path, "rms_norm", {"Bd": (9,), "H": 33333}, "bfloat16",
             lets={"strategy": "2", "xchgAll": "1"}, fields={"groupRows": "2"}, seed=2)
    assert r.tiling_key % 10 == 2 and r.cost["sync_alls"] == 5
    y, rstd = _rms_norm64(r.inputs["x"], r.inputs["gamma"], 1e-6)
    got = np.asarray(r.arrays["y"], np.float64)
    assert np.all(np.abs(got - y) <= 4 * 2.0**-8 * np.abs(y) + 1e-6 * np.abs(y).max()), float(np.abs(got - y).max())
    assert np.allclose(np.asarray(r.arrays["rstd"], np.float64).reshape(rstd.shape), rstd, rtol=2.0**-18, atol=0)


@needs_gxx
@pytest.mark.slow
@pytest.mark.parametrize("name,dtype", [("softmax", "float32"), ("log_softmax", "bfloat16")])
def test_col_stream_double_buffered_chunks_against_float64(tmp_path, name, dtype):
    """COL_STREAM forced over 3 rows of 100003 columns in chunks of 512 (slices of 2096: four whole chunks and a
    tail of 48; the tail core's slice of 1491 in three): each chunk's copy issued while the chunk before computes,
    the next phase starting from its own first chunk. Equals float64 (log-)softmax; x read twice (the online maximum
    and sum, then the output pass), y written once."""
    r = _run(tmp_path, name, {"Bd": (3,), "H": 100003}, dtype, lets={"strategy": "3"},
             fields={"colsPerPass": "strategy == 3 ? 512 : colsPerPass"}, seed=4)
    assert r.tiling_key % 10 == 3
    x = r.inputs["x"]
    y = np.asarray(r.arrays["y"], np.float64)
    if name == "softmax":
        want = _softmax64(x)
        assert np.all(np.abs(y - want) <= 8 * 2.0**-24 * want + 2.0**-40), float(np.abs(y - want).max())
    else:
        want = _log_softmax64(x)
        assert np.all(np.abs(y - want) <= 2.0**-8 * np.abs(want) + 2.0**-12), float(np.abs(y - want).max())
    assert r.gm_ratio < 1.51


@pytest.mark.parametrize("name,rows,h", [("softmax", 2, 262144), ("softmax", 2, 786433)])
def test_kernel_ir_interpreter_one_syncall_and_stream(name, rows, h, monkeypatch):
    """The Kernel-IR interpreter (--engine kir) runs the one-SyncAll exchange (SoftmaxV2 [2, 262144] fp32: COL_SPLIT,
    xchgAll forced to 1 through the tiling's Python twin, tests/forced_tiling.py forced_evaluate: the tiling keeps
    the owners' exchange there) and the double-buffered stream ([2, 786433]: COL_STREAM, a tail chunk, xchgAll
    forced too) against float64 softmax."""
    from forced_tiling import forced_evaluate
    from opgen.check import run_check

    tl = _tiling(name, rows, h, DType.f32)
    assert (tl["strategy"], tl["xchgAll"]) == ((2, 0) if h == 262144 else (3, 0))
    forced_evaluate(monkeypatch, {"xchgAll": 1})
    r = run_check(str(EX / f"{name}.py"), dims={"Bd": (rows,), "H": h}, dtypes={"T": "float32"}, engine="kir",
                  seed=1, progress=False)
    assert not r.faults and r.passed
    want = _softmax64(r.inputs["x"])
    y = np.asarray(r.arrays["y"], np.float64)
    assert np.all(np.abs(y - want) <= 8 * 2.0**-24 * want + 2.0**-40), float(np.abs(y - want).max())
