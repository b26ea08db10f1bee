"""A lane-wise instruction adding a one-hot row (select(lane == i, v, 0), a scatter-add of one value per row) taken
as the instruction without it and one lane updated by the scalar unit (opgen.kernel.rowalg.one_lane_updates, kind
`vlane`): x - h -> x with lane i minus v[i], h + x -> x, h + s -> Duplicate(s), h + x * s -> Muls(x, s), each
with lane i plus v[i], in the column chunk or slice holding column i only. Checked: the rewritten programs of a
spec written here (LaneShift: each form once) and of CrossEntropyLossGrad (hand-written and derived: no compare,
select or lane-index row left), the refusals (a product with the one-hot, a one-hot read twice), the printed
update, and emulated kernels and the Kernel-IR interpreter against float64 NumPy written here from the formulas
(odd C, rows over cores with tails, fp32 and bf16, ROW_SPLIT, ROW_CHUNK and COL_SPLIT)."""

from __future__ import annotations

import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from opgen.ir.dtypes import DType
from opgen.platforms import PLATFORMS
from opgen.registry import _load_file
from opgen.tiling.emit import program_inputs

from test_rows_gather_gm import check_on, row_programs

ROOT = Path(__file__).resolve().parent.parent
CEG = ROOT / "examples" / "specs" / "cross_entropy_loss_grad.py"
DERIVED = ROOT / "examples" / "specs" / "derived" / "cross_entropy_loss_grad.py"
B1 = PLATFORMS["ascend910b1"]
NP_DT = {"bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
DT = {"bfloat16": DType.bf16, "float32": DType.f32}
ULP = {"bfloat16": 2.0**-8, "float32": 2.0**-24}

LANE_SHIFT = '''from opgen.dsl import A2, A3, OpSpec, bf16, f32, i64
from opgen.dsl.checks import index_in_range

spec = OpSpec("LaneShift", aclnn="aclnnLaneShift", socs=(A2, A3), round="rint")
N = spec.dim("N")
C = spec.dim("C", max=65536)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [N, C])
spec.input("idx", i64, [N])
spec.input("g", T, [N])
spec.input("w", T, [C])
spec.output("y1", T, [N, C])
spec.output("y2", T, [N, C])
spec.output("y3", T, [N, C])
spec.output("s", f32, [N])
spec.dtypes((T,), [(f32,), (bf16,)])


spec.check("idx", index_in_range("idx", "C"), on="device")


@spec.body
def _(b, x, idx, g, w):
    v, gg = x.f32(), g.f32()
    y1 = v * 2.0 - b.scatter_add(idx, gg, axis=1, size=C)                   # x - h
    y2 = b.scatter_add(idx, gg * 3.0, axis=1, size=C) + v * w.f32()         # h + x
    y3 = b.scatter_add(idx, gg * 0.5, axis=1, size=C) + b.exp(v) * 0.25     # h + x * s (Axpy)
    s = (b.scatter_add(idx, -gg, axis=1, size=C) + 0.125).sum(-1, keepdims=False)   # h + s, a row sum
    return {"y1": y1.cast(T, "rint"), "y2": y2.cast(T, "rint"), "y3": y3.cast(T, "rint"), "s": s}
'''


def _spec(tmp_path: Path, text: str = LANE_SHIFT, name: str = "lane_shift.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _lane_shift64(x, idx, g, w):
    """LaneShift in float64: y1 = 2x - g onehot, y2 = 3g onehot + x w, y3 = g / 2 onehot + exp(x) / 4,
    s = C / 8 - g."""
    x, g, w = (np.asarray(a, np.float64) for a in (x, g, w))
    hot = np.zeros_like(x)
    hot[np.arange(x.shape[0]), idx] = 1.0
    gh = g[:, None] * hot
    return {"y1": 2 * x - gh, "y2": 3 * gh + x * w[None, :], "y3": gh / 2 + np.exp(x) / 4,
            "s": x.shape[1] / 8 - g}


def test_each_form_is_a_one_lane_update(tmp_path):
    """LaneShift: four `vlane` updates (signs -, +, +, + of the picked g, 3g, g / 2, -g), the Axpy become a Muls and
    the Adds a Duplicate; no compare, select or lane-index row left, the row sum over the updated Duplicate."""
    (p,) = row_programs(_spec(tmp_path))
    kinds = [i.kind for i in p.instrs]
    lanes = [i for i in p.instrs if i.kind == "vlane"]
    assert len(lanes) == 4, kinds
    assert not {"vcmps", "vsels", "viota", "vaxpy"} & set(kinds), kinds
    chk = {i.dst for i in p.instrs if i.kind == "scheck"}
    assert all(i.srcs[1] in chk and i.op == "Adds" for i in lanes)
    assert [i.arg.startswith("-") for i in lanes] == [True, False, False, False]
    (r,) = p.rsums()
    assert r.srcs == (lanes[-1].dst,)


def test_a_product_or_a_second_reader_keeps_the_select(tmp_path):
    """x * h is no addition (the select stays), nor is x - h where h is read twice (it would need its row twice)."""
    text = LANE_SHIFT.replace("y1 = v * 2.0 - b.scatter_add(idx, gg, axis=1, size=C)",
                              "y1 = v * b.scatter_add(idx, gg, axis=1, size=C)")
    text = text.replace("b.scatter_add(idx, gg * 3.0, axis=1, size=C) + v * w.f32()",
                        "b.scatter_add(idx, gg * 3.0, axis=1, size=C) * (v * w.f32() + "
                        "b.scatter_add(idx, gg * 3.0, axis=1, size=C))")
    (p,) = row_programs(_spec(tmp_path, text, "lane_keep.py"))
    assert len([i for i in p.instrs if i.kind == "vlane"]) == 2
    assert len([i for i in p.instrs if i.kind == "vsels"]) == 2


def test_cross_entropy_grad_updates_the_target_lane():
    """CrossEntropyLossGrad, hand-written and derived: the one-hot term of each presence a `vlane` at the checked
    target, no compare or lane-index row; the kernel reads and writes the element only in the chunk holding the
    target's column."""
    from opgen.kernel import kir
    from opgen.tiling.pipeline import kernel_build

    for path in (CEG, DERIVED):
        for p in row_programs(path):
            assert any(i.kind == "vlane" for i in p.instrs)
            assert not any(i.kind in ("vcmps", "viota", "vsels") for i in p.instrs), path
    (v,) = kernel_build(_load_file(CEG)).lowered.extra["variants"]
    (rc,) = [f for f in v.kclass.methods if f.name == "RowChunk"]
    ifs = [s for s in kir.walk(rc.body) if isinstance(s, kir.If) and "indexed column" in s.doc]
    assert ifs and all([type(t) for t in s.then if not isinstance(t, (kir.SetFlag, kir.WaitFlag))] == [kir.SetValue]
                       for s in ifs), [s.then for s in ifs]
    assert all(str(s.cond[0]).startswith("c0_ <= int(") for s in ifs), [str(s.cond) for s in ifs]


def test_cross_entropy_grad_splits_columns_in_sub_batches():
    """CrossEntropyLossGrad [50, 20001] fp32 with a weight at label smoothing 0.1 runs COL_SPLIT in sub-batches of 8
    rows: its one-lane update per row inside them (checked against float64 by tests/test_rows_rowscalar.py)."""
    from opgen.tiling.pipeline import kernel_build

    spec = _load_file(CEG)
    t = kernel_build(spec).tiling
    tl = t.program.evaluate(program_inputs(spec, t.program, t.inputs, {"N": 50, "C": 20001}, {"T": DType.f32}, B1,
                                           {"labelSmoothing": 0.1}, present=(True,)))
    assert (tl["strategy"], tl["colBatchRows"]) == (2, 8), tl


def _strategy(path, n, c, dtype) -> int:
    from opgen.tiling.pipeline import kernel_build

    spec = _load_file(path)
    t = kernel_build(spec).tiling
    return t.program.evaluate(program_inputs(spec, t.program, t.inputs, {"N": n, "C": c}, {"T": DT[dtype]}, B1,
                                             {}))["strategy"]


CASES = [   # (n, c, dtype, strategy)
    (50, 1001, "float32", 1),     # odd C, ROW_SPLIT; 50 rows on 48 cores: two take a second row
    (131, 20001, "bfloat16", 4),  # ROW_CHUNK: the index in one chunk of the row
    (5, 40001, "float32", 2),     # few rows: the columns split over cores, the index in one core's slice
]


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("engine", ["emu", "kir"])
@pytest.mark.parametrize("n, c, dtype, strategy", CASES)
def test_lane_shift_against_float64(tmp_path, engine, n, c, dtype, strategy):
    """LaneShift against float64, the first and last columns among the indices: y1..y3 one rounding to T after at
    most two fp32 ones, s = C / 8 - g within one fp32 rounding of its magnitude (the 0.125 terms sum exactly)."""
    path = _spec(tmp_path)
    assert _strategy(path, n, c, dtype) == strategy
    rng = np.random.default_rng(c + n)
    x = rng.standard_normal((n, c)).astype(NP_DT[dtype])
    idx = rng.integers(0, c, n).astype(np.int64)
    idx[0], idx[-1] = 0, c - 1
    g = (rng.standard_normal(n) * 4.0).astype(NP_DT[dtype])
    w = rng.uniform(0.25, 2.0, c).astype(NP_DT[dtype])
    r = check_on(path, engine, tmp_path, {"x": x, "idx": idx, "g": g, "w": w}, {"T": dtype})
    if engine == "emu":
        assert r.tiling_key % 10 == strategy, r.tiling_key
    want = _lane_shift64(x, idx, g, w)
    for name in ("y1", "y2", "y3"):
        got = np.asarray(r.arrays[name], np.float64)
        err = np.abs(got - want[name])
        assert np.all(err <= ULP[dtype] * np.abs(want[name]) + 2.0**-22 * (np.abs(want[name]) + 1.0)), \
            (name, float(err.max()))
    got = np.asarray(r.arrays["s"], np.float64)
    assert np.all(np.abs(got - want["s"]) <= 2.0**-23 * (c / 8 + np.abs(want["s"]))), float(np.abs(got - want["s"]).max())
