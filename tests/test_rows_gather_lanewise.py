"""A gather of a row value by a checked per-row index taken through the lane-wise instructions computing the row
(opgen.kernel.rowalg.gather_through_lanewise): sum(select(lane == i, f(a, b, ...), 0)) = f(a[i], b[i], ...) on the
scalar unit, a row input's element read from GM at the row's offset plus i (`sgather` of a row tensor), Ln / Exp
of a picked value on 8 lanes of the vector unit (`sunary`), so no Compares / Select / ReduceSum is left for it and
CrossEntropyLoss's picked log-probability is no third row-reduction level; a level whose row reductions all run
under one presence (the smoothing sum, label_smoothing != 0) runs its ROW_CHUNK chunk loop only there
(rowclass._level_guards). Checked: the rewritten programs, the ROW_CHUNK class's guarded loop and hoisted Ln, and
emulated kernels and the Kernel-IR interpreter against float64 NumPy written here from the formulas (odd C, rows
over cores with tails, fp32 and bf16, every strategy of the spec)."""

from __future__ import annotations

import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from opgen.kernel import kir
from opgen.registry import _load_file

from test_rows_gather_gm import check_on, gather_spec_text, row_programs

ROOT = Path(__file__).resolve().parent.parent
CE = ROOT / "examples" / "specs" / "cross_entropy_loss.py"
DERIVED = ROOT / "examples" / "specs" / "derived" / "cross_entropy_loss_grad.py"
NP_DT = {"bfloat16": ml_dtypes.bfloat16, "float32": np.float32}

PICKED = gather_spec_text("PickedShift", """    v = x.f32()
    z = (v - v.max(-1)) * 0.5 + w.f32()
    e = b.exp(b.log(b.abs(v).sum(-1).broadcast_to([N, C])))
    return {"y": b.gather(z * 3.0 - e, idx, axis=1)}""")


def _picked64(x, idx, w):
    """PickedShift in float64: (x[n, i] - max_c x[n, c]) / 2 + w[i], times 3, minus exp(log(sum_c |x[n, c]|))."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n = np.arange(x.shape[0])
    return ((x[n, idx] - x.max(-1)) * 0.5 + w[idx]) * 3.0 - np.abs(x).sum(-1)


def _spec(tmp_path: Path) -> Path:
    path = tmp_path / "picked_shift.py"
    path.write_text(PICKED)
    return path


def test_the_gather_of_a_lanewise_row_is_scalar_work(tmp_path):
    """PickedShift's gather: the row input's element and the column input's element read from GM (two `sgather`,
    the first of the row tensor x), exp(log(s)) of the per-row sum on 8 lanes (two `sunary`), the rest scalar
    expressions; no compare, select, lane-index row or column load is left, and the only row reductions are the
    maximum and the sum of |x|."""
    (p,) = row_programs(_spec(tmp_path))
    kinds = [i.kind for i in p.instrs]
    assert sorted(p.tensor(i.gm).gm for i in p.instrs if i.kind == "sgather") == ["w", "x"]
    assert {p.tensor(i.gm).space for i in p.instrs if i.kind == "sgather"} == {"row", "col"}
    assert [i.op for i in p.instrs if i.kind == "sunary"] == ["Ln", "Exp"]
    assert not {"vcmps", "vsels", "viota", "load"} & set(kinds), kinds
    assert sorted(i.kind for i in p.rsums()) == ["rmax", "rsum"]


def test_cross_entropy_picks_its_log_probability_on_the_scalar_unit():
    """CrossEntropyLoss: log_prob[n, t] is x[n, t] - max - Ln(sum) from one GM element and the Ln of the sum on 8
    lanes, so the row reductions left are the maximum, the sum of exponentials and (label_smoothing != 0 only) the
    class sum; no Compares of the lane indices. The derived CrossEntropyLossGrad's sum of its one-hot row is the
    one-hot's scalar itself: at label_smoothing 0 its program has no row reduction."""
    for p in row_programs(CE):
        assert not any(i.kind in ("vcmps", "viota") for i in p.instrs)
        assert [i.op for i in p.instrs if i.kind == "sunary"] == ["Ln"]
        assert [p.tensor(i.gm).gm for i in p.instrs if i.kind == "sgather" and p.tensor(i.gm).space == "row"] \
            == ["input"]
        assert all(i.when for i in p.rsums(2))   # the class sum only, under the guard
    for p in row_programs(DERIVED):
        k = p.presence.index(next(n for n in p.presence if "label_smoothing" in str(n)))
        assert not [i for i in p.rsums() if not i.when or any(pt[k] is False for pt in i.when)]


def test_cross_entropy_log_prob_reuses_the_picked_ln():
    """rowalg.reuse_scalar_functions: CrossEntropyLoss's log_prob row z - log(sum) reads the Ln of the sum its pick
    computed on 8 lanes (sunary) with one Adds, instead of Duplicate, Ln over the row and Sub; the sunary comes before
    the Adds in program order (it was after: moved up), so the level of the row is the sum's level + 1."""
    for p in row_programs(CE):
        (ln,) = [i for i in p.instrs if i.kind == "sunary"]
        assert not [i for i in p.instrs if i.kind in ("vunary", "vdup") and i.op in ("Ln", "")], \
            [i for i in p.instrs if i.kind in ("vunary", "vdup")]
        adds = [i for i in p.instrs if i.kind == "vscalar" and i.op == "Adds" and ln.dst in i.arg]
        assert len(adds) == 1 and adds[0].arg.replace(" ", "") == f"-({ln.dst})", adds
        assert p.instrs.index(ln) < p.instrs.index(adds[0]) and adds[0].level == ln.level


def test_row_chunk_skips_a_guarded_level_and_hoists_the_picked_ln():
    """CrossEntropyLoss's ROW_CHUNK method: level 2's chunk loop (the smoothing sum) sits in a presence guard on
    guard1_ (label_smoothing != 0), and the Ln of the sum of exponentials is taken once per group over the totals
    (the output chunks read it with an Adds and the picked value is the total itself: no Ln inside a chunk loop)."""
    from opgen.tiling.pipeline import kernel_build

    (v,) = kernel_build(_load_file(CE)).lowered.extra["variants"]
    (rc,) = [f for f in v.kclass.methods if f.name == "RowChunk"]
    loops = [s for s in kir.walk(rc.body) if isinstance(s, kir.For) and s.var == "g0"]
    grp = loops[0].body
    guarded = [s for s in grp if isinstance(s, kir.If) and s.guard
               and any(isinstance(t, kir.For) and t.var == "c0_" for t in s.then)]
    assert len(guarded) == 1 and "guard1_" in str(guarded[0].cond)
    top_ln = [s for s in grp if isinstance(s, kir.Vec) and s.op is kir.Op.LN]
    assert len(top_ln) == 1
    chunk_lns = [s for st in grp if isinstance(st, (kir.For, kir.If)) for s in kir.walk((st,))
                 if isinstance(s, kir.Vec) and s.op is kir.Op.LN]
    assert chunk_lns == []


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("engine", ["emu", "kir"])
@pytest.mark.parametrize("n, c, dtype", [
    (50, 1001, "float32"),     # odd C, ROW_SPLIT; 50 rows on 48 cores: two take a second row
    (131, 20001, "bfloat16"),  # a row longer than UB's share: ROW_CHUNK / COL_SPLIT
    (5, 40001, "float32"),     # few rows: the columns split over cores
])
def test_a_picked_lanewise_row_against_float64(tmp_path, engine, n, c, dtype):
    """y[n] = 3 ((x[n, i] - max x[n]) / 2 + w[i]) - exp(log(sum |x[n]|)) against float64, the first and last
    classes among the indices: the fp32 scalar ops and the row sums within a few ulp of the terms' magnitudes."""
    rng = np.random.default_rng(c + n)
    x = (rng.standard_normal((n, c)) * 3.0).astype(NP_DT[dtype])
    idx = rng.integers(0, c, n).astype(np.int64)
    idx[0], idx[-1] = 0, c - 1
    w = rng.uniform(0.25, 2.0, c).astype(NP_DT[dtype])
    path = _spec(tmp_path)
    r = check_on(path, engine, tmp_path, {"x": x, "idx": idx, "w": w}, {"T": dtype})
    want = _picked64(x, idx, w)
    got = np.asarray(r.arrays["y"], np.float64)
    xs = np.abs(np.asarray(x, np.float64)).sum(-1)
    assert np.all(np.abs(got - want) <= 2.0**-18 * (xs + 12.0)), float(np.abs(got - want).max())
