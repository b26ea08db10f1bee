"""A per-row value summed (or averaged) over every row to one element (opgen.kernel.rows `_Lowering.stat_total`):
one lane of a column accumulator updated by the scalar unit per row (rowprog.lane_acc: no Compares, Duplicate,
Select or Add over the row), and a row input of which only one element a row is read (a gather through lane-wise
instructions) copied in by no schedule: read from GM at the row's offset plus the index (GmTensor space "elem").
Checked: the programs of a spec written here (PickTotal: a gathered sum and a mean over the rows; with a row max
summed over the rows beside it, the input is copied in again), NLLLoss's program, and emulated kernels and the
Kernel-IR interpreter against float64 NumPy / torch (odd C, rows over cores with tails, fp32 and bf16, ROW_SPLIT and
COL_SPLIT)."""

from __future__ import annotations

import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from opgen.check import run_check
from opgen.ir.dtypes import DType
from opgen.kernel.rowalg import vector_instrs_per_row
from opgen.kernel.rowprog import NARROW_LANES, lane_acc, narrow_rows
from opgen.platforms import PLATFORMS
from opgen.registry import _load_file
from opgen.tiling.emit import program_inputs

from test_rows_gather_gm import check_on, row_programs

ROOT = Path(__file__).resolve().parent.parent
NLL = ROOT / "examples" / "specs" / "nll_loss.py"
B1 = PLATFORMS["ascend910b1"]
NP_DT = {"bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
DT = {"bfloat16": DType.bf16, "float32": DType.f32}
UNIT = {"bfloat16": 2.0**-8, "float32": 2.0**-24}

PICK_TOTAL = '''from opgen.dsl import A2, A3, OpSpec, bf16, f32, i64
from opgen.dsl.checks import index_in_range

spec = OpSpec("PickTotal", aclnn="aclnnPickTotal", socs=(A2, A3), round="rint")
N = spec.dim("N")
C = spec.dim("C", max=65536)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [N, C])
spec.input("idx", i64, [N])
spec.input("g", T, [N])
spec.output("s", T, [])
spec.output("m", f32, [])
spec.dtypes((T,), [(f32,), (bf16,)])


spec.check("idx", index_in_range("idx", "C"), on="device")


@spec.body
def _(b, x, idx, g):
    v = b.gather(x.f32() * 2.0, idx, axis=1)
    s = (v * g.f32()).sum(0, keepdims=False)
    m = (v + g.f32() * 0.5).mean(0, keepdims=False)
    return {"s": s.cast(T, "rint"), "m": m}
'''


def _spec(tmp_path: Path, text: str = PICK_TOTAL, name: str = "pick_total.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _pick_total64(x, idx, g):
    """PickTotal in float64: v = 2 x[n, idx[n]], s = sum_n v g, m = mean_n (v + g / 2)."""
    x, g = np.asarray(x, np.float64), np.asarray(g, np.float64)
    v = 2.0 * x[np.arange(x.shape[0]), idx]
    return {"s": (v * g).sum(), "m": (v + g / 2).mean(), "s_mag": np.abs(v * g).sum(),
            "m_mag": np.abs(v + g / 2).mean()}


def test_the_totals_are_lane_updates_and_the_row_is_not_copied(tmp_path):
    """PickTotal: the two totals are one-lane accumulates of per-row scalars (lane 0), x is read by an `sgather`
    only (space "elem": no cast_in, no row buffer), and nothing per row is a vector instruction."""
    (p,) = row_programs(_spec(tmp_path))
    accs = [i for i in p.instrs if i.kind == "acc"]
    assert len(accs) == 2 and all(lane_acc(i) and i.arg == "0" for i in accs), accs
    assert p.tensor("x").space == "elem"
    assert not any(i.kind == "cast_in" for i in p.instrs)
    assert [p.tensor(i.gm).gm for i in p.instrs if i.kind == "sgather"] == ["x"]
    assert vector_instrs_per_row(p) == 0
    assert not {"vcmps", "vsels", "viota", "vdup"} & {i.kind for i in p.instrs}


PICK_TOTAL_MAX = PICK_TOTAL.replace('spec.output("m", f32, [])',
                                    'spec.output("m", f32, [])\nspec.output("h", f32, [])') \
    .replace('return {"s": s.cast(T, "rint"), "m": m}',
             'return {"s": s.cast(T, "rint"), "m": m, "h": x.f32().max(1, keepdims=False).sum(0, keepdims=False)}')
"""PickTotal with the row max of x summed over the rows beside the gather (output h)."""


def test_a_row_read_beside_the_pick_is_copied(tmp_path):
    """With the row max of x summed over the rows beside the gather, x stays a row input (cast_in, ReduceMax); the
    max's total is a one-lane accumulate too; the program holds rows in UB (not narrow_rows)."""
    (p,) = row_programs(_spec(tmp_path, PICK_TOTAL_MAX, "pick_total_max.py"))
    assert p.tensor("x").space == "row"
    assert any(i.kind == "cast_in" for i in p.instrs)
    assert len([i for i in p.instrs if lane_acc(i)]) == 3
    assert not narrow_rows(p)


def test_narrow_programs_run_row_split_on_short_rows(tmp_path):
    """NLLLoss and PickTotal hold no row in UB (rowprog.narrow_rows: per-row scalar work and lane-0 accumulates of
    totals): the tiling keeps the rows whole (ROW_SPLIT) at every C, its UB rows NARROW_LANES long (rowAlign), even
    with fewer rows than column slices and at [1024, 32000], where the column accumulators' whole rows (2 x 128000
    bytes) would not fit UB; the kernel's RowSplit sizes its rows the same way."""
    from opgen.tiling.pipeline import kernel_build

    for path in (NLL, _spec(tmp_path)):
        (p,) = row_programs(path)
        assert narrow_rows(p), path
        for n, c in ((1024, 32000), (3, 40001), (7, 37)):
            tl = _tiling(path, n, c, "bfloat16")
            assert tl["strategy"] == 1 and tl["rowAlign"] == min(NARROW_LANES, -(-c // 16) * 16), (path, n, c, tl)
            assert tl["blockDim"] == min(n, B1.aiv), (n, tl["blockDim"])
    from opgen.codegen.kernel import schedule_text

    spec = _load_file(NLL)
    unit = kernel_build(spec)
    text = schedule_text(spec, unit, unit.key0)
    assert f"n_ := min(hidden_, {NARROW_LANES})" in text and f"rowStride_ := min(colAlign_, {NARROW_LANES})" in text


def test_nll_loss_reads_one_element_a_row():
    """NLLLoss: self is read only at each row's target (space "elem"), out and totalWeight are lane accumulates,
    no vector instruction per row."""
    (p,) = row_programs(NLL)
    assert p.tensor("self").space == "elem"
    assert not any(i.kind == "cast_in" for i in p.instrs)
    assert sorted(p.accs[i.dst][1] for i in p.instrs if lane_acc(i)) == ["out", "totalWeight"]
    assert vector_instrs_per_row(p) == 0


def _tiling(path, n, c, dtype) -> dict:
    """The rows tiling program of the spec at `path` evaluated at [n, c], dtype T = `dtype`, on ascend910b1."""
    from opgen.tiling.pipeline import kernel_build

    spec = _load_file(path)
    t = kernel_build(spec).tiling
    return t.program.evaluate(program_inputs(spec, t.program, t.inputs, {"N": n, "C": c}, {"T": DT[dtype]}, B1, {}))


def _strategy(path, n, c, dtype) -> int:
    return _tiling(path, n, c, dtype)["strategy"]


CASES = [   # (n, c, dtype, strategy)
    (50, 1001, "float32", 1),     # odd C, ROW_SPLIT; 50 rows on 48 cores: two take a second row
    (97, 333, "bfloat16", 1),     # 97 rows over 48 cores, bf16
    (5, 40001, "float32", 1),     # fewer rows than column slices, a row longer than UB: narrow rows, ROW_SPLIT
]


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("engine", ["emu", "kir"])
@pytest.mark.parametrize("n, c, dtype, strategy", CASES)
def test_pick_total_against_float64(tmp_path, engine, n, c, dtype, strategy):
    """PickTotal against float64, the first and last columns among the indices: s within one rounding to T plus n
    fp32 roundings of its magnitude, m within n + 2 fp32 roundings of its magnitude."""
    path = _spec(tmp_path)
    assert _strategy(path, n, c, dtype) == strategy
    rng = np.random.default_rng(c + n)
    x = rng.standard_normal((n, c)).astype(NP_DT[dtype])
    idx = rng.integers(0, c, n).astype(np.int64)
    idx[0], idx[-1] = 0, c - 1
    g = (rng.standard_normal(n) * 4.0).astype(NP_DT[dtype])
    r = check_on(path, engine, tmp_path, {"x": x, "idx": idx, "g": g}, {"T": dtype})
    if engine == "emu":
        assert r.tiling_key % 10 == strategy, r.tiling_key
    # the floor's bytes: x read at one 32-byte granule a row, idx and g once, s and m written once
    assert r.gm_bytes_min == n * (32 + 8 + np.dtype(NP_DT[dtype]).itemsize) + np.dtype(NP_DT[dtype]).itemsize + 4
    want = _pick_total64(x, idx, g)
    s = float(np.asarray(r.arrays["s"], np.float64))
    assert abs(s - want["s"]) <= UNIT[dtype] * abs(want["s"]) + 2.0**-24 * (n + 2) * want["s_mag"], (s, want["s"])
    m = float(np.asarray(r.arrays["m"], np.float64))
    assert abs(m - want["m"]) <= 2.0**-24 * (n + 4) * want["m_mag"], (m, want["m"])


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("engine", ["emu", "kir"])
def test_pick_total_max_in_col_split_against_float64(tmp_path, engine):
    """PickTotal with h (the row max summed over the rows) holds x's rows in UB: with 3 rows of 20001 COL_SPLIT
    runs it, the one-lane accumulates only in the slice holding column 0; s, m and h against float64."""
    n, c, dtype = 3, 20001, "bfloat16"
    path = _spec(tmp_path, PICK_TOTAL_MAX, "pick_total_max.py")
    assert _strategy(path, n, c, dtype) == 2
    rng = np.random.default_rng(7)
    x = rng.standard_normal((n, c)).astype(NP_DT[dtype])
    idx = np.array([0, c - 1, 12345], np.int64)
    g = (rng.standard_normal(n) * 4.0).astype(NP_DT[dtype])
    r = check_on(path, engine, tmp_path, {"x": x, "idx": idx, "g": g}, {"T": dtype})
    if engine == "emu":
        assert r.tiling_key % 10 == 2, r.tiling_key
    want = _pick_total64(x, idx, g)
    s = float(np.asarray(r.arrays["s"], np.float64))
    assert abs(s - want["s"]) <= UNIT[dtype] * abs(want["s"]) + 2.0**-24 * (n + 2) * want["s_mag"], (s, want["s"])
    m = float(np.asarray(r.arrays["m"], np.float64))
    assert abs(m - want["m"]) <= 2.0**-24 * (n + 4) * want["m_mag"], (m, want["m"])
    hmax = np.asarray(x, np.float64).max(axis=1)
    h = float(np.asarray(r.arrays["h"], np.float64))
    assert abs(h - hmax.sum()) <= 2.0**-24 * (n + 2) * np.abs(hmax).sum(), (h, hmax.sum())


NLL_CASES = [   # (n, c, dtype, strategy)
    (97, 1001, "float32", 1),     # odd C, rows over cores with tails
    (50, 333, "bfloat16", 1),
    (3, 40001, "float32", 1),     # fewer rows than column slices, a row longer than UB: narrow rows, ROW_SPLIT
]


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("engine", ["emu", "kir"])
@pytest.mark.parametrize("n, c, dtype, strategy", NLL_CASES)
def test_nll_loss_against_torch(tmp_path, engine, n, c, dtype, strategy):
    """NLLLoss (weight, ignoreIndex -100 on every fourth row, the first and last classes among the targets) against
    torch.nn.functional.nll_loss in float64 on the kernel's inputs, and totalWeight against the sum of the kept
    rows' weights."""
    import torch

    assert _strategy(NLL, n, c, dtype) == strategy
    rng = np.random.default_rng(n * c)
    x = rng.normal(-3.0, 1.0, (n, c)).astype(NP_DT[dtype])
    t = rng.integers(0, c, n).astype(np.int64)
    t[0], t[-1] = 0, c - 1
    t[1::4] = -100
    w = rng.uniform(0.5, 2.0, c).astype(NP_DT[dtype])
    gen = tmp_path / "gen"
    if engine == "emu":
        from opgen.codegen import write_ops

        write_ops([str(NLL)], gen)
    r = run_check(str(NLL), {"self": x, "target": t, "weight": w}, dtypes={"T": dtype},
                  gen_dir=gen if engine == "emu" else None, progress=False, engine=engine)
    assert not r.faults and r.passed, r.faults[:3]
    if engine == "emu":
        assert r.tiling_key % 10 == strategy, r.tiling_key
    # the floor's bytes: self read at one 32-byte granule a row, weight at one a row or whole (the smaller),
    # target once, the two 0-d outputs written once
    size = np.dtype(NP_DT[dtype]).itemsize
    assert r.gm_bytes_min == n * 32 + min(n * 32, c * size) + n * 8 + 2 * size, r.gm_bytes_min
    x64, w64 = np.asarray(x, np.float64), np.asarray(w, np.float64)
    out = torch.nn.functional.nll_loss(torch.tensor(x64), torch.tensor(t), weight=torch.tensor(w64),
                                       reduction="sum", ignore_index=-100).item()
    keep = t != -100
    total = w64[t[keep]].sum()
    mag = np.abs(x64[keep, t[keep]] * w64[t[keep]]).sum()
    for name, ref, m in (("out", out, mag), ("totalWeight", total, total)):
        got = float(np.asarray(r.arrays[name], np.float64))
        assert abs(got - ref) <= UNIT[dtype] * abs(ref) + 2.0**-24 * (n + 2) * m, (name, got, ref)
