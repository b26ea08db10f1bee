"""COL_SPLIT over many rows per instruction: a group's resident slices [groupRows, rowStride_] computed colBatchRows
rows at a time (opgen.kernel.rowsched `_col_rows`, opgen.kernel.rowclass `_Printer.col_batch_segments`; the field
from opgen.tiling.rowkernel.col_batch_rows): each phase's instructions over the sub-batch's rows at once, the row
partial sums by RowsSum / RowsSumB into the sums_ slots, the exchanged totals read from tots_ (broadcast by Brcb
eight rows a repeat). Checked by the tiling's fields, the kernel text, and emulated kernels against float64 NumPy
written from RmsNorm's formula (odd row lengths, a last core with a shorter slice, a last sub-batch shorter than
colBatchRows, fp16 / bf16). CrossEntropyLoss (its compare by each row's target index: Brcb blocks, Compare's and
Select's repeat forms) is checked in tests/test_rows_rowscalar.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from opgen.check import run_check
from opgen.ir.dtypes import DType
from opgen.platforms import PLATFORMS
from opgen.registry import _load_file
from opgen.tiling.emit import program_inputs

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "specs"
B1 = PLATFORMS["ascend910b1"]


def _tiling(name: str, rows: int, h: int, dtype: DType) -> dict:
    from opgen.tiling.pipeline import kernel_build

    spec = _load_file(EX / name)
    t = kernel_build(spec).tiling
    return t.program.evaluate(program_inputs(spec, t.program, t.inputs, {"Bd": (rows,), "H": h}, {"T": dtype}, B1,
                                             {}))


def test_the_sub_batch_is_whole_blocks_of_rows_within_a_quarter_of_ub_else_priced():
    """RmsNorm fp16, 33 rows of 30001: COL_SPLIT with colBatchRows a multiple of 8 (each sub-batch starts a 32-byte
    block of the per-row buffers) whose two fp32 row temporaries of the slice and 64-float scratch a row take at
    most a quarter of UB; 60 rows of 40000 bf16: a slice of 848 columns leaves room for fewer than 8 such rows in a
    quarter, and 8 rows (56 KB) are taken from the group (53 rows row by row, 39 with them: one group either way, no
    more exchanges), priced below row by row."""
    tl = _tiling("rms_norm.py", 33, 30001, DType.f16)
    assert tl["strategy"] == 2
    b, cols = tl["colBatchRows"], tl["colsPerPass"]
    assert b >= 8 and b % 8 == 0 and b <= 248
    assert b * (2 * 4 * cols + 64 * 4) <= B1.ub_bytes // 4 < (b + 8) * (2 * 4 * cols + 64 * 4)
    tl = _tiling("rms_norm.py", 60, 40000, DType.bf16)
    cols = tl["colsPerPass"]
    assert tl["strategy"] == 2 and cols == 848 and tl["colBatchRows"] == 8 and tl["groupRows"] == 39
    assert 8 * (2 * 4 * cols + 64 * 4) > B1.ub_bytes // 4
    assert tl["colBatchCost8"] < tl["colBatchCost0"]


def test_the_sub_batch_is_priced_by_issues_and_exchanges():
    """CrossEntropyLoss bf16 [1024, 32000] (the bench's case, weights present) at label_smoothing 0.1: 48 cores take
    slices of 672 columns; the tiling prices row by row against sub-batches of 8 rows by hand-countable terms of
    docs/reference/kernel_cost.md §2 (an instruction 8 + 16 cycles with its barrier, a V -> S wait 32, a SyncAll
    1800, a burst 256 bytes at 1.8 GHz / 1.6 TB/s), with the program's 9 vector instructions a row (cast, max,
    Adds, Exp, sum, the Adds of -Ln(sum), store, the weight's Mul and the smoothing sum), 3 row reductions, 3 levels
    (the weight's gather and the picked log-probability are scalar work: opgen.kernel.rowalg.gather_column_inputs,
    gather_through_lanewise; log_prob reads the picked Ln: reuse_scalar_functions):
      row by row: 1024 rows x (9 x 24 + 3 x (24 + 32)) = 393216, plus 16 groups of 64 rows x 3 levels x
        (2 x 1800 + 2 x 32 + 6 tree steps x 24 + 48 bursts x 256 x 9 / 8000 = 13) = 183408
      8 rows at once: 20 groups of 52 rows, each 7 sub-batches (8 x 6, 4) of 9 instructions and 3 RowsSum of
        11 + 1, plus 20 exchanges
    and takes the cheaper sub-batch of 8 rows."""
    from opgen.tiling.pipeline import kernel_build

    spec = _load_file(EX / "cross_entropy_loss.py")
    t = kernel_build(spec).tiling
    tl = t.program.evaluate(program_inputs(spec, t.program, t.inputs, {"N": 1024, "C": 32000}, {"T": DType.bf16},
                                           B1, {"label_smoothing": 0.1}))   # at 0: ROW_CHUNK (no weight row read)
    assert (tl["strategy"], tl["colsPerPass"], tl["colBatchRows"]) == (2, 672, 8)
    xchg = 3 * (2 * 1800 + 2 * 32 + 6 * 24 + 48 * 256 * 9 // 8000)
    assert tl["colBatchCost0"] == 1024 * (9 * 24 + 3 * (24 + 32)) + 16 * xchg == 576624
    groups, rows = 20, tl["groupRows"]
    assert rows == 52 and -(-1024 // rows) == groups
    # a group of 52 rows is 7 sub-batches (8 x 6, 4), each of 9 instructions and 3 RowsSum of 11 + 1
    assert tl["colBatchCost8"] == groups * 7 * (9 + 3 * 12) * 24 + groups * xchg
    assert tl["colBatchCost8"] < tl["colBatchCost0"]


def test_the_kernel_runs_sub_batches_and_row_sums_into_the_exchange_slots(tmp_path):
    """The generated ColSplit of RmsNorm loops b0 over the group's rows colBatchRows at a time, casts kb rows of the
    resident slice with one instruction and sums them into the exchange slot with RowsSum (RowsSumB eight rows a
    repeat), and keeps the row-by-row loop for slices RowsSum cannot take."""
    from opgen.cli import main

    assert main(["generate", str(EX / "rms_norm.py"), "--out", str(tmp_path)]) in (0, None)
    text = (tmp_path / "rms_norm" / "op_kernel" / "rms_norm.h").read_text()
    col = text[text.index("void ColSplit()"):text.index("void ColStream()")]
    assert "for (int64_t b0 = 0; b0 < k; b0 += td_->colBatchRows)" in col
    assert "CastFrom(w_[0], res_x[b0 * rowStride_], kb * rowStride_)" in col
    assert "RowsSumB(w_[1], sums_[0 * groupStride_ + b0], kb)" in col
    assert "RowsSum(w_[1], sums_[0 * groupStride_ + b0], kb)" in col
    assert "const float part_s0 = RowSum(w_[1], n_);" in col   # the row-by-row fallback


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("engine", ["emu", "kir"])
@pytest.mark.parametrize("rows, h, dtype, eps", [
    (33, 30001, "float16", 1e-6),   # 4 sub-batches of 8 and one of 1; odd H: the last core's slice is shorter
    (17, 30011, "bfloat16", 0.01),  # 2 sub-batches of 8 and one of 1
])
def test_rms_norm_col_split_sub_batches_against_float64(engine, rows, h, dtype, eps, examples_gen):
    """RmsNorm through COL_SPLIT with sub-batches (strategy 2, colBatchRows >= 8) against float64:
    rstd = 1 / sqrt(mean(x^2) + eps), y = x * rstd * gamma; y within a few roundings of its dtype, rstd (fp32)
    within 1e-4 relative (fp32 sums of 30000 squares in the kernel's order: per core eight-lane partials over the
    slice's blocks, then the cores' partials in core order; the worst-case bound n * 2^-24 is 1.8e-3)."""
    rng = np.random.default_rng(h)
    x = (rng.standard_normal((rows, h)) * rng.uniform(0.1, 4.0, (rows, 1))).astype(np.float32)
    gamma = rng.uniform(-2.0, 2.0, h).astype(np.float32)
    r = run_check(str(EX / "rms_norm.py"), {"x": x, "gamma": gamma}, {"epsilon": eps}, dtypes={"T": dtype},
                  gen_dir=examples_gen, progress=False, engine=engine)
    assert not r.faults and r.passed, r.faults[:3]
    assert r.tiling_key % 10 == 2, r.tiling_key
    assert _tiling("rms_norm.py", rows, h, {"float16": DType.f16, "bfloat16": DType.bf16}[dtype])["colBatchRows"] >= 8
    x64 = np.asarray(r.inputs["x"], np.float64)
    g64 = np.asarray(r.inputs["gamma"], np.float64)
    rstd = 1.0 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + eps)
    y = x64 * rstd * g64
    got_r = np.asarray(r.arrays["rstd"], np.float64).reshape(rstd.shape)
    assert np.all(np.abs(got_r - rstd) <= 1e-4 * rstd), float(np.abs(got_r / rstd - 1).max())
    ulp = {"float16": 2.0**-10, "bfloat16": 2.0**-7}[dtype]
    got = np.asarray(r.arrays["y"], np.float64)
    assert np.all(np.abs(got - y) <= 2 * ulp * np.abs(y) + 1e-6), float(np.abs(got - y).max())
