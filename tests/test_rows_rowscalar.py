"""Compares by a per-row scalar over many rows per instruction (opgen.kernel.rowprog.row_scalar_chain,
opgen.kernel.rowclass._Printer._block_mask_nodes): CrossEntropyLoss / CrossEntropyLossGrad compare each column's
lane index with the row's target class. Their programs are now `batchable`: eight rows a repeat, the k targets
broadcast by Brcb to one 32-byte block a row, Compare's mask / repeat form against those blocks and Select's
tensor-scalar mask / repeat form reading the mask as it was written; row by row where the block forms do not
apply (their compare and selects together). Checked by the kernel text and by emulated kernels against float64
NumPy written here from the operators' formulas: COL_SPLIT with sub-batches (colBatchRows >= 8; rows not a multiple
of 8; a last core whose slice is not a multiple of 8 columns), ROW_SPLIT with rows of many repeats, fp32 / fp16 /
bf16, weights, label smoothing, ignored rows."""

from __future__ import annotations

import shutil
from pathlib import Path

import ml_dtypes
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
DT = {"float32": DType.f32, "float16": DType.f16, "bfloat16": DType.bf16}
ULP = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def _tiling(name: str, n: int, c: int, dtype: str) -> dict:
    from opgen.tiling.pipeline import kernel_build

    spec = _load_file(EX / name)
    t = kernel_build(spec).tiling
    return t.program.evaluate(program_inputs(spec, t.program, t.inputs, {"N": n, "C": c}, {"T": DT[dtype]}, B1, {}))


def _f(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def test_the_programs_batch_and_the_kernel_prints_the_repeat_forms(tmp_path):
    """CrossEntropyLoss's ColSplit runs sub-batches whose target compare is a Brcb of the k targets, Compare's repeat
    form over the column row of lane indices (block stride 0) against each row's block (block stride 1, repeat
    stride 0), then Select's repeat form with the rows' lanes; the row-by-row fallback keeps Compares / Select;
    CrossEntropyLossGrad's RowSplit does the same eight rows a repeat, and its ColSplit runs sub-batches too, the
    exchange slot of a row sum its weight's absence skips set to 0 by one Duplicate."""
    from opgen.cli import main
    from opgen.kernel.rowprog import batchable, row_scalar_chain
    from opgen.tiling.pipeline import kernel_build

    for spec in ("cross_entropy_loss.py", "cross_entropy_loss_grad.py"):
        for v in kernel_build(_load_file(EX / spec)).lowered.extra["variants"]:
            assert batchable(v.prog) and row_scalar_chain(v.prog), v.cls
        assert main(["generate", str(EX / spec), "--out", str(tmp_path)]) in (0, None)
    text = (tmp_path / "cross_entropy_loss" / "op_kernel" / "cross_entropy_loss.h").read_text()
    at = text.index("void ColSplit()")
    col = " ".join(text[at:text.index("__aicore__ inline void", at)].split())
    assert "for (int64_t b0 = 0; b0 < k; b0 += td_->colBatchRows)" in col
    assert "Brcb(rowsRed_, rowsRed_[(8 + 0) * AlignUp(kb, 8)], (kb + 7) / 8, BrcbRepeatParams(1, 8));" in col
    assert ("Compare(w_[2][g * 8 * rowStride_].template ReinterpretCast<uint8_t>(), colv_[0], rowsRed_[g * 64], "
            "CMPMODE::EQ, 64, static_cast<uint8_t>((n_ + 7) / 8),") in col
    assert "BinaryRepeatParams(1, 0, 1, 8, 1, 0)" in col
    assert "static_cast<uint64_t>(8 * (8 < kb - g * 8 ? 8 : kb - g * 8))" in col   # the select: the rows' lanes
    assert "Compares(w_[2].template ReinterpretCast<uint8_t>(), colv_[0]" in col   # row by row
    grad = (tmp_path / "cross_entropy_loss_grad" / "op_kernel" / "cross_entropy_loss_grad.h").read_text()
    at = grad.index("void Compute(")
    row = " ".join(grad[at:grad.index("__aicore__ inline void", at)].split())
    assert "BinaryRepeatParams(1, 0, 1, 8, 1, 0)" in row and "VSEL_TENSOR_SCALAR_MODE, static_cast<uint64_t>" in row
    at = grad.index("void ColSplit()")   # its one class serves both presences: guarded row sums over many rows
    gcol = " ".join(grad[at:grad.index("__aicore__ inline void", at)].split())
    assert "b0 += td_->colBatchRows" in gcol
    assert "if (!hasInput0_) { // when weight absent PipeBarrier<PIPE_V>(); // sumBuf_: V writes after V's write " \
           "Duplicate(sums_[0 * groupStride_ + b0], 0.0f, static_cast<int32_t>(kb));" in gcol


def _ce_inputs(n: int, c: int, seed: int):
    rng = np.random.default_rng(seed)
    t = rng.integers(0, c, n).astype(np.int64)
    t[::5] = -100                 # ignored rows
    t[1] = c - 1                  # the last class: in the last core's slice
    t[2] = 0
    x = rng.normal(0.0, 3.0, (n, c)).astype(np.float32)
    return x, t, rng.uniform(0.25, 2.0, c).astype(np.float32)


def _ce_reference(x, t, w, eps):
    """float64: logProb = x - logsumexp(x); loss = -((1 - eps) w[t] logProb[t] + eps / C sum_c w_c logProb_c), 0
    where t is ignored (-100)."""
    c = x.shape[1]
    m = x.max(-1, keepdims=True)
    lp = x - (m + np.log(np.exp(x - m).sum(-1, keepdims=True)))
    keep = t != -100
    tk = np.where(keep, t, 0)
    picked = lp[np.arange(len(t)), tk] * w[tk]
    loss = -((1 - eps) * picked + eps / c * (lp * w[None, :]).sum(-1)) * keep
    return loss, lp


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("n, c, dtype, strategy, engine, weighted", [
    (33, 14001, "float32", 2, "emu", True),    # COL_SPLIT: sub-batches 8 x 4 + 1; last slice 241 columns (not 8k)
    (9, 15001, "float16", 2, "emu", False),    # COL_SPLIT: a sub-batch of 8 and one of 1; last slice 281 columns
    (9, 15001, "bfloat16", 2, "kir", True),    # the same in the Kernel-IR interpreter
    (97, 1000, "float32", 1, "emu", True),     # ROW_SPLIT: rows of 16 repeats eight rows a repeat, a tail over cores
    (50, 333, "bfloat16", 1, "kir", False),    # ROW_SPLIT: rows not a multiple of 8 lanes
])
def test_cross_entropy_and_grad_with_many_rows_a_compare_against_float64(n, c, dtype, strategy, engine, weighted,
                                                                          examples_gen):
    """CrossEntropyLoss and CrossEntropyLossGrad (weights or none (ones), label smoothing 0.1, every fifth row
    ignored) against
    float64: logProb and lossOut within a few roundings of the dtype (fp32 sums of C terms: C * 2^-24 relative to the
    terms' magnitude), xGrad = g ((1 - eps) w_t (p - onehot(t)) + eps / C (p sum w - w)) on p = exp(logProb) from the
    forward kernel's output (0 on ignored rows) likewise."""
    eps = 0.1
    if strategy == 2:
        tl = _tiling("cross_entropy_loss.py", n, c, dtype)
        assert tl["strategy"] == 2 and tl["colBatchRows"] >= 8, tl
    x, t, w = _ce_inputs(n, c, n * c)
    if not weighted:
        w = np.ones_like(w)   # the reference's weights; the kernels get none
    r = run_check(str(EX / "cross_entropy_loss.py"), {"input": x, "target": t, "weight": w if weighted else None},
                  {"labelSmoothing": eps}, dtypes={"T": dtype}, gen_dir=examples_gen, progress=False, engine=engine)
    assert not r.faults and r.passed, r.faults[:3]
    assert r.tiling_key % 10 == strategy, r.tiling_key
    x64, w64 = _f(r.inputs["input"]), _f(w)
    loss, lp = _ce_reference(x64, t, w64, eps)
    terms = 2.0**-24 * 4 * c
    got_lp = _f(r.arrays["logProb"])
    scale = np.abs(x64).max(-1, keepdims=True) + np.abs(lp).max(-1, keepdims=True)
    assert np.all(np.abs(got_lp - lp) <= 4 * ULP[dtype] * np.abs(lp) + terms * scale), \
        float(np.abs(got_lp - lp).max())
    got_loss = _f(r.arrays["lossOut"])
    lscale = np.abs(lp).max(-1) * w64.max() + scale[:, 0]
    assert np.all(np.abs(got_loss - loss) <= 4 * ULP[dtype] * np.abs(loss) + terms * lscale), \
        float(np.abs(got_loss - loss).max())
    assert np.all(got_loss[t == -100] == 0.0)

    g = np.random.default_rng(c).normal(0.0, 1.0, n).astype(np.float32)
    lpin = np.asarray(r.arrays["logProb"])
    rg = run_check(str(EX / "cross_entropy_loss_grad.py"), {"gradLoss": g, "logProb": lpin, "target": t,
                                                             "weight": w if weighted else None},
                   {"labelSmoothing": eps}, dtypes={"T": dtype}, gen_dir=examples_gen, progress=False, engine=engine)
    assert not rg.faults and rg.passed, rg.faults[:3]
    if strategy == 2:   # both presences of the grad's one class over many rows (guarded row sums' slots zeroed)
        assert _tiling("cross_entropy_loss_grad.py", n, c, dtype)["colBatchRows"] >= 8
    keep = t != -100
    tk = np.where(keep, t, 0)
    onehot = (np.arange(c)[None, :] == tk[:, None]) & keep[:, None]
    p = np.exp(_f(rg.inputs["logProb"]))
    gk = (_f(rg.inputs["gradLoss"]) * keep)[:, None]
    ref = gk * ((1 - eps) * w64[tk][:, None] * (p - onehot) + eps / c * (p * w64.sum() - w64[None, :]))
    got = _f(rg.arrays["xGrad"])
    mag = np.abs(gk) * (w64.max() + eps * w64.sum() / c)
    assert np.all(np.abs(got - ref) <= 4 * ULP[dtype] * np.abs(ref) + (4 * ULP[dtype] + terms) * mag), \
        float(np.abs(got - ref).max())
