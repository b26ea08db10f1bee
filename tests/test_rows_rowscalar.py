"""Compares by a per-row scalar over many rows per instruction (opgen.kernel.rowprog.row_scalar_chain,
opgen.kernel.rowclass._Printer._block_mask_nodes): a spec written here, HotScale, multiplies x by a one-hot row
(each column's lane index compared with the row's index; CrossEntropyLossGrad's one-hot term, an addend, is a
one-lane update now: rowalg.one_lane_updates). Its programs are `batchable`: eight rows a repeat, the k indices
broadcast by Brcb to one 32-byte block a row, Compare's mask / repeat form against those blocks and Select's
tensor-scalar mask / repeat form reading the mask as it was written; row by row where the block forms do not
apply (their compare and selects together). Checked by the kernel text and by emulated kernels and the Kernel-IR
interpreter against float64 NumPy: COL_SPLIT with sub-batches (colBatchRows >= 8; rows not a multiple of 8; a
last core whose slice is not a multiple of 8 columns), ROW_SPLIT with rows of many repeats, fp32 / bf16; and
CrossEntropyLoss / CrossEntropyLossGrad against float64 NumPy written here from the operators' formulas (fp32 /
fp16 / bf16, weights, label smoothing, ignored rows). A compare of a row temporary by a per-row scalar (ArgMax's x >= max x,
ArgMin's x <= min x) is no such chain: it would read the rows' padding and, eight rows a repeat, rows past the pass;
those programs run row by row, checked against NumPy's argmax / argmin at the shapes that faulted when they were
batched (N 1000 x H 33, 3 x 1) and rows of 65..2040 lanes (the block form's)."""

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

from test_rows_gather_gm import check_on

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "specs"
B1 = PLATFORMS["ascend910b1"]
DT = {"float32": DType.f32, "float16": DType.f16, "bfloat16": DType.bf16}
ULP = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def _tiling(name: str, n: int, c: int, dtype: str, eps: float = 0.1) -> dict:
    """The tiling of CrossEntropyLoss / CrossEntropyLossGrad at label smoothing `eps` (0.1, as the runs here: at 0 the
    weight's smoothing sum is skipped and a weighted call may take ROW_CHUNK, tests/test_rows_runtime_guard.py)."""
    from opgen.tiling.pipeline import kernel_build

    spec = _load_file(EX / name)
    t = kernel_build(spec).tiling
    attrs = {"labelSmoothing": eps} if "grad" in name else {"label_smoothing": eps}
    return t.program.evaluate(program_inputs(spec, t.program, t.inputs, {"N": n, "C": c}, {"T": DT[dtype]}, B1,
                                             attrs))


def _f(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


HOT_SCALE = '''from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32, i64
from opgen.dsl.checks import index_in_range

spec = OpSpec("HotScale", aclnn="aclnnHotScale", socs=(A2, A3), round="rint")
N = spec.dim("N")
C = spec.dim("C", max=131072)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [N, C])
spec.input("idx", i64, [N])
spec.input("g", T, [N])
spec.input("w", f32, [C], optional=True)
spec.output("y", T, [N, C])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


spec.check("idx", index_in_range("idx", "C"), on="device")


@spec.body
def _(b, x, idx, g, w):
    v = x.f32()
    hot = b.scatter_add(idx, g.f32(), axis=1, size=C)   # g[n] at column idx[n], 0 elsewhere: a product keeps it
    if w is None:
        y = v * hot + v
    else:
        total = w.broadcast_to([N, C]).sum(-1, keepdims=False)
        y = v * hot + v * total.reshape([N, 1]) - w
    return {"y": y.cast(T, "rint")}
'''
"""HotScale: y = x * onehot(idx) g + x (w absent) or + x sum(w) - w: a one-hot row that a product reads (no one-lane
update, rowalg.one_lane_updates: the compare of the lane indices by the row's index and its select stay)."""


def _hot_scale(tmp_path: Path) -> Path:
    path = tmp_path / "hot_scale.py"
    path.write_text(HOT_SCALE)
    return path


def _hot_scale64(x, idx, g, w):
    """HotScale in float64."""
    x = _f(x)
    hot = np.zeros_like(x)
    hot[np.arange(len(idx)), idx] = _f(g)
    return x * hot + (x if w is None else x * _f(w).sum() - _f(w)[None, :])


def test_the_programs_batch_and_the_kernel_prints_the_repeat_forms(tmp_path):
    """HotScale's ColSplit (with w) runs sub-batches whose index compare is a Brcb of the k indices, Compare's
    repeat form over the column row of lane indices (block stride 0) against each row's block (block stride 1,
    repeat stride 0), then Select's repeat form with the rows' lanes; the row-by-row fallback keeps Compares /
    Select; its RowSplit does the same eight rows a repeat, and its ColSplit's exchange slot of a row sum w's
    absence skips is set to 0 by one Duplicate. CrossEntropyLoss and CrossEntropyLossGrad compare no lane index
    any more (the loss's picked log-probability is scalar work, rowalg.gather_through_lanewise; the gradient's
    one-hot term a one-lane update, rowalg.one_lane_updates) and their programs still batch."""
    from opgen.cli import main
    from opgen.kernel.rowprog import batchable, row_scalar_chain
    from opgen.tiling.pipeline import kernel_build

    for name in ("cross_entropy_loss.py", "cross_entropy_loss_grad.py"):
        for v in kernel_build(_load_file(EX / name)).lowered.extra["variants"]:
            assert batchable(v.prog) and not any(i.kind in ("vcmps", "vcmp") for i in v.prog.instrs), v.cls
    path = _hot_scale(tmp_path)
    for v in kernel_build(_load_file(path)).lowered.extra["variants"]:
        assert batchable(v.prog) and row_scalar_chain(v.prog), v.cls
    assert main(["generate", str(path), "--out", str(tmp_path)]) in (0, None)
    text = (tmp_path / "hot_scale" / "op_kernel" / "hot_scale.h").read_text()
    at = text.index("void ColSplit()")   # its one class serves both presences: guarded row sums over many rows
    gcol = " ".join(text[at:text.index("__aicore__ inline void", at)].split())
    assert "for (int64_t b0 = 0; b0 < k; b0 += td_->colBatchRows)" in gcol
    assert "Brcb(rowsRed_, rowsRed_[(8 + 0) * AlignUp(kb, 8)], (kb + 7) / 8, BrcbRepeatParams(1, 8));" in gcol
    assert ("Compare(w_[0][g * 8 * rowStride_].template ReinterpretCast<uint8_t>(), colv_[0], rowsRed_[g * 64], "
            "CMPMODE::EQ, 64, static_cast<uint8_t>((n_ + 7) / 8),") in gcol
    assert "BinaryRepeatParams(1, 0, 1, 8, 1, 0)" in gcol
    assert "Compares(w_[0][i * rowStride_].template ReinterpretCast<uint8_t>(), colv_[0]" in gcol   # row by row
    at = text.index("void Compute(")
    row = " ".join(text[at:text.index("__aicore__ inline void", at)].split())
    assert "BinaryRepeatParams(1, 0, 1, 8, 1, 0)" in row and "VSEL_TENSOR_SCALAR_MODE, static_cast<uint64_t>" in row
    # w's row sum, or 0 without it, broadcast over the sub-batch's rows: one guard with both branches
    # (kirguard.hoist_guards keeps only what differs under it)
    assert "if (hasInput0_) { // when w present, else absent const float part_s1 = RowSum(colv_[1], n_);" in gcol
    assert "} else { PipeBarrier<PIPE_V>(); // sumBuf_: V writes after V's write Duplicate(sums_[0 * groupStride_ " \
           "+ b0], 0.0f, static_cast<int32_t>(kb)); }" in gcol


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("n, c, dtype, engine", [
    (33, 14001, "float32", "emu"),   # with w COL_SPLIT, sub-batches 16 x 2 + 1; without ROW_CHUNK
    (9, 15001, "bfloat16", "kir"),
    (97, 1000, "float32", "emu"),    # ROW_SPLIT: eight rows a repeat, a tail over cores
    (50, 333, "bfloat16", "kir"),    # ROW_SPLIT: rows not a multiple of 8 lanes
])
@pytest.mark.parametrize("weighted", [True, False], ids=["w", "bare"])
def test_hot_scale_against_float64(tmp_path, n, c, dtype, engine, weighted):
    """HotScale's compare chain (many rows a compare, or row by row) against float64: one rounding to the dtype
    after a few fp32 ones (the class sum of w: C * 2^-24 relative to its terms)."""
    from opgen.tiling.pipeline import kernel_build

    path = _hot_scale(tmp_path)
    spec = _load_file(path)
    t = kernel_build(spec).tiling
    tl = t.program.evaluate(program_inputs(spec, t.program, t.inputs, {"N": n, "C": c}, {"T": DT[dtype]}, B1, {},
                                           present=(weighted,)))
    want = 2 if weighted and c > 10000 else (4 if c > 10000 else 1)
    assert tl["strategy"] == want and (want != 2 or tl["colBatchRows"] >= 8), tl
    rng = np.random.default_rng(n + c)
    cast = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32   # the values the kernel reads
    x = rng.normal(0.0, 2.0, (n, c)).astype(cast)
    idx = rng.integers(0, c, n).astype(np.int64)
    idx[0], idx[-1] = 0, c - 1
    g = rng.normal(0.0, 1.0, n).astype(cast)
    w = rng.uniform(0.25, 2.0, c).astype(np.float32) if weighted else None
    r = check_on(path, engine, tmp_path, {"x": x, "idx": idx, "g": g, "w": w}, {"T": dtype})
    assert r.tiling_key % 10 == want, r.tiling_key
    ref = _hot_scale64(r.inputs["x"], idx, r.inputs["g"], w)
    mag = np.abs(_f(r.inputs["x"])) * (1.0 + np.abs(_f(r.inputs["g"]))[:, None] + (0 if w is None else w.sum())) + 2
    got = _f(r.arrays["y"])
    assert np.all(np.abs(got - ref) <= 2 * ULP[dtype] * np.abs(ref) + 2.0**-24 * 4 * c * mag), \
        float(np.abs(got - ref).max())


def _ce_inputs(n: int, c: int, seed: int):
    rng = np.random.default_rng(seed)
    t = rng.integers(0, c, n).astype(np.int64)
    t[::5] = -100                 # ignored rows
    t[1] = c - 1                  # the last class: in the last core's slice
    t[2] = 0
    x = rng.normal(0.0, 3.0, (n, c)).astype(np.float32)
    return x, t, rng.uniform(0.25, 2.0, c).astype(np.float32)


def _ce_reference(x, t, w, eps):
    """float64: log_prob = x - logsumexp(x); loss = -((1 - eps) w[t] log_prob[t] + eps / C sum_c w_c log_prob_c), 0
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
    # the loss ROW_CHUNK (its picked log-probability is scalar work: no lane-index row), the gradient too (its
    # one-hot term a one-lane update)
    (33, 14001, "float32", 4, "emu", True),
    (9, 15001, "float16", 4, "emu", False),    # no weight: ROW_CHUNK (test_rows_colchunk)
    (9, 15001, "bfloat16", 4, "kir", True),    # the one-lane update in the Kernel-IR interpreter
    (50, 20001, "float32", 2, "emu", True),    # both COL_SPLIT: the gradient's one-lane update in sub-batches of 8
                                               # rows (tests/test_rows_one_lane.py pins that tiling)
    (97, 1000, "float32", 1, "emu", True),     # ROW_SPLIT: rows of 16 repeats eight rows a repeat, a tail over cores
    (50, 333, "bfloat16", 1, "kir", False),    # ROW_SPLIT: rows not a multiple of 8 lanes
    (1000, 33, "float32", 1, "emu", True),     # ROW_SPLIT rows of one repeat (colAlign 64): the chain row by row
    (3, 1, "bfloat16", 1, "kir", False),       # ... rows of one lane, one row a pass
])
def test_cross_entropy_and_grad_with_many_rows_a_compare_against_float64(n, c, dtype, strategy, engine, weighted,
                                                                          examples_gen):
    """CrossEntropyLoss and CrossEntropyLossGrad (weights or none (ones), label smoothing 0.1, every fifth row
    ignored) against
    float64: log_prob and loss within a few roundings of the dtype (fp32 sums of C terms: C * 2^-24 relative to the
    terms' magnitude), xGrad = g ((1 - eps) w_t (p - onehot(t)) + eps / C (p sum w - w)) on p = exp(log_prob) from the
    forward kernel's output (0 on ignored rows) likewise."""
    eps = 0.1
    x, t, w = _ce_inputs(n, c, n * c)
    if not weighted:
        w = np.ones_like(w)   # the reference's weights; the kernels get none
    r = run_check(str(EX / "cross_entropy_loss.py"), {"input": x, "target": t, "weight": w if weighted else None},
                  {"reduction": "none", "label_smoothing": eps}, dtypes={"T": dtype}, gen_dir=examples_gen,
                  progress=False, engine=engine)
    assert not r.faults and r.passed, r.faults[:3]
    assert r.tiling_key % 10 == strategy, r.tiling_key
    x64, w64 = _f(r.inputs["input"]), _f(w)
    loss, lp = _ce_reference(x64, t, w64, eps)
    terms = 2.0**-24 * 4 * c
    got_lp = _f(r.arrays["log_prob"])
    scale = np.abs(x64).max(-1, keepdims=True) + np.abs(lp).max(-1, keepdims=True)
    assert np.all(np.abs(got_lp - lp) <= 4 * ULP[dtype] * np.abs(lp) + terms * scale), \
        float(np.abs(got_lp - lp).max())
    got_loss = _f(r.arrays["loss"])
    lscale = np.abs(lp).max(-1) * w64.max() + scale[:, 0]
    assert np.all(np.abs(got_loss - loss) <= 4 * ULP[dtype] * np.abs(loss) + terms * lscale), \
        float(np.abs(got_loss - loss).max())
    assert np.all(got_loss[t == -100] == 0.0)

    g = np.random.default_rng(c).normal(0.0, 1.0, n).astype(np.float32)
    lpin = np.asarray(r.arrays["log_prob"])
    rg = run_check(str(EX / "cross_entropy_loss_grad.py"), {"gradLoss": g, "logProb": lpin, "target": t,
                                                             "weight": w if weighted else None},
                   {"labelSmoothing": eps}, dtypes={"T": dtype}, gen_dir=examples_gen, progress=False, engine=engine)
    assert not rg.faults and rg.passed, rg.faults[:3]
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



@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_cross_entropy_wide_slices_run_eight_rows_at_once(examples_gen):
    """CrossEntropyLoss bf16 [64, 32000] with weights (the bench's row length): 48 cores take slices of 672 columns,
    too wide for 8 rows of fp32 temporaries in a quarter of UB, and the tiling takes 8 rows at once
    (opgen.tiling.rowkernel.col_batch_rows, priced below row by row) in groups of 52 rows (the weight's gather and
    the picked log-probability scalar work, no partial exchanged for them: opgen.kernel.rowalg.gather_column_inputs,
    gather_through_lanewise). Counted by the emulation against hand counts: ceil(64 / 52) = 2 groups x 3
    row-reduction levels x 2 SyncAll = 12 on every core; the busiest core issues fewer vector instructions than
    64 rows x (the program's 11 + a second instruction for each of its 3 row reductions), as row by row would,
    and fewer V -> S waits than one a row reduction a row; loss and log_prob against float64 as in the test
    above."""
    n, c, eps = 64, 32000, 0.1
    tl = _tiling("cross_entropy_loss.py", n, c, "bfloat16")
    assert (tl["strategy"], tl["colsPerPass"], tl["colBatchRows"], tl["groupRows"]) == (2, 672, 8, 52)
    x, t, w = _ce_inputs(n, c, 7)
    r = run_check(str(EX / "cross_entropy_loss.py"), {"input": x, "target": t, "weight": w},
                  {"reduction": "none", "label_smoothing": eps}, dtypes={"T": "bfloat16"}, gen_dir=examples_gen,
                  progress=False)
    assert not r.faults and r.passed, r.faults[:3]
    assert r.cost["sync_alls"] == 2 * 3 * 2
    assert r.cost["vec_issues"] < n * (11 + 3), r.cost["vec_issues"]
    # rowalg.reuse_scalar_functions moves the picked Ln (a per-row sunary: one V -> S wait a row) ahead of the
    # smoothing phase's log_prob, which took the Ln once per sub-batch of 8 rows before: the vector issues fall
    # (9.02 -> 6.88 us of vector time) and the waits rise to about 4 a row (156 -> 247; the estimate 36.3 -> 36.4 us,
    # nll2's measurement). Still fewer than one a row reduction a row plus one a row for the picked Ln:
    assert r.cost["flag_waits"] < n * (3 + 1), r.cost["flag_waits"]
    loss, lp = _ce_reference(_f(r.inputs["input"]), t, _f(w), eps)
    terms = 2.0**-24 * 4 * c
    scale = np.abs(_f(r.inputs["input"])).max(-1, keepdims=True) + np.abs(lp).max(-1, keepdims=True)
    assert np.all(np.abs(_f(r.arrays["log_prob"]) - lp) <= 4 * ULP["bfloat16"] * np.abs(lp) + terms * scale)
    lscale = np.abs(lp).max(-1) * w.max() + scale[:, 0]
    got = _f(r.arrays["loss"])
    assert np.all(np.abs(got - loss) <= 4 * ULP["bfloat16"] * np.abs(loss) + terms * lscale)


ARG = '''
from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32, i64

spec = OpSpec("{name}", aclnn="aclnn{api}", socs=(A2, A3), round="rint")
N = spec.dim("N")
H = spec.dim("H", max=65536)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [N, H])
spec.output("y", i64, [N])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, x):
    m = x.{red}(-1)
    pos = b.where(x {cmp} m, b.iota(H).f32(), float(2**24))
    return {{"y": pos.min(-1, keepdims=False).cast(i64, "rint")}}
'''
"""ArgMax / ArgMin over the last axis as a user writes them (the first index of the extreme value: the smallest lane
index whose value compares equal to the row's max / min), as tests/test_rows_stat_i64.py's ArgMax."""


@pytest.fixture(scope="module")
def arg_specs(tmp_path_factory):
    """The two specs (ArgMaxV2 x >= max, ArgMinV2 x <= min) written to files and generated once: {name: (spec path,
    generated tree)}."""
    from opgen.codegen import write_ops

    d = tmp_path_factory.mktemp("argext")
    out = {}
    for name, api, red, cmp in (("ArgMaxV2", "ArgMax", "max", ">="), ("ArgMinV2", "ArgMin", "min", "<=")):
        p = d / f"{api.lower()}.py"
        p.write_text(ARG.format(name=name, api=api, red=red, cmp=cmp))
        gen = d / f"gen_{api.lower()}"
        write_ops([str(p)], gen)
        out[name] = (p, gen)
    return out


def test_a_compare_of_a_row_temporary_by_a_per_row_scalar_is_not_batched(arg_specs):
    """ArgMax's / ArgMin's compare reads the row (a row temporary), not a column row: row_scalar_chain refuses it and
    the program runs row by row (its row in a scratch row whose lanes past the row are written), where the batched
    fallback read the rows' unwritten padding and eight rows a repeat read rows past the pass."""
    from opgen.kernel.rowprog import batchable, row_scalar_chain
    from opgen.tiling.pipeline import kernel_build

    for p, _ in arg_specs.values():
        for v in kernel_build(_load_file(p)).lowered.extra["variants"]:
            assert row_scalar_chain(v.prog) is None and not batchable(v.prog), v.cls


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("n, h, dtype, engine", [
    # rows of 33 lanes, 21 a pass: faulted batched (padding in a mask byte)
    pytest.param(1000, 33, "float32", "emu", marks=pytest.mark.slow),
    pytest.param(3, 1, "float32", "emu", marks=pytest.mark.slow),      # one lane a row: faulted batched
    # rows of 128 lanes (the block form's 65..2040): faulted batched (rows past the pass read into another operand)
    pytest.param(300, 100, "float32", "emu", marks=pytest.mark.slow),
    pytest.param(50, 100, "bfloat16", "emu", marks=pytest.mark.slow),   # two rows a pass: read past the buffer
    (1000, 33, "bfloat16", "kir"),    # the Kernel-IR interpreter, the same fault rules
    (300, 100, "float16", "kir"),
])
@pytest.mark.parametrize("name", ["ArgMaxV2", "ArgMinV2"])
def test_arg_max_and_min_against_numpy(arg_specs, name, n, h, dtype, engine):
    """The first index of the row's maximum / minimum against float64 NumPy argmax / argmin (integer-valued inputs in
    [-50, 50): exact in every dtype, with ties); no fault in either engine."""
    p, gen = arg_specs[name]
    rng = np.random.default_rng(n * h)
    x = rng.integers(-50, 50, (n, h)).astype(np.float32)
    r = run_check(str(p), inputs={"x": x}, dtypes={"T": dtype}, gen_dir=gen, progress=False, engine=engine)
    assert r.passed and not r.faults, r.faults[:2]
    assert r.tiling_key % 10 == 1, r.tiling_key   # ROW_SPLIT
    x64 = x.astype(np.float64)
    ref = np.argmax(x64, axis=-1) if name == "ArgMaxV2" else np.argmin(x64, axis=-1)
    y = np.asarray(r.arrays["y"])
    assert y.dtype == np.int64 and np.array_equal(y, ref), np.flatnonzero(y != ref)[:5]
