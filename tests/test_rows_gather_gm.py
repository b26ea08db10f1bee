"""A column row input gathered by a per-row index is one GM element read by the scalar unit
(opgen.kernel.rowalg.gather_column_inputs, the row-program kind `sgather`, Kernel IR FLoad of a GmView at
kir.FIndex): weight[target[n]] no longer a Compares of the lane indices, a Select and a ReduceSum over a [C] column
row of the weight per row (a partial per core exchanged in COL_SPLIT, a column chunk reloaded per chunk in
ROW_CHUNK). Checked: the rewrite on the row program (and its absence where the gathered row is computed), the
Kernel-IR verifier's and interpreter's FIndex, and emulated kernels and the Kernel-IR interpreter against float64
NumPy written here from the operators' formulas: a spec whose only use of its weight is the gather (odd C, rows over
cores with tails, fp32 and bf16 weights), and CrossEntropyLoss with a weight (ignored rows, label smoothing 0 and
0.1, bf16 and fp32)."""

from __future__ import annotations

import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from opgen.check import run_check
from opgen.ir.dims import Bin, Lit
from opgen.kernel import kir
from opgen.registry import _load_file

from test_rows_colchunk import _close, _inputs, _loss64

ROOT = Path(__file__).resolve().parent.parent
CE = ROOT / "examples" / "specs" / "cross_entropy_loss.py"
NP_DT = {"bfloat16": ml_dtypes.bfloat16, "float32": np.float32}

def gather_spec_text(op: str, body: str) -> str:
    """The text of a spec `op` over x [N, C] (T), a device-checked index idx [N] into C, a column input w [C] (T) and
    one output y [N] (f32); `body`: the lines of its body function `_(b, x, idx, w)`, indented four spaces."""
    return f'''from opgen.dsl import A2, A3, OpSpec, bf16, f32, i64
from opgen.dsl.checks import index_in_range

spec = OpSpec("{op}", aclnn="aclnn{op}", socs=(A2, A3), round="rint")
N = spec.dim("N")
C = spec.dim("C", max=65536)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [N, C])
spec.input("idx", i64, [N])
spec.input("w", T, [C])
spec.output("y", f32, [N])
spec.dtypes((T,), [(f32,), (bf16,)])


spec.check("idx", index_in_range("idx", "C"), on="device")


@spec.body
def _(b, x, idx, w):
{body}
'''


PICK = gather_spec_text("WeightedRowMax",
                        '    return {"y": x.f32().max(-1, keepdims=False) * b.gather(w.f32(), idx, axis=0)}')


def _pick_spec(tmp_path: Path) -> Path:
    path = tmp_path / "weighted_row_max.py"
    path.write_text(PICK)
    return path


def check_on(path, engine: str, tmp_path, inputs: dict, dtypes: dict):
    """`opgen check` of spec file `path` on `engine` ("emu": its package generated into tmp_path/gen first, the
    emitted C++ built and emulated; "kir": the Kernel-IR interpreter), asserted to pass without a fault (the
    interpreter's float64 golden inside run_check); returns the CheckResult for the caller's own oracle."""
    gen = tmp_path / "gen"
    if engine == "emu":
        from opgen.codegen import write_ops

        write_ops([str(path)], gen)
    r = run_check(str(path), inputs=inputs, dtypes=dtypes, gen_dir=gen if engine == "emu" else None, progress=False,
                  engine=engine)
    assert not r.faults and r.passed, r.faults[:3]
    return r


def row_programs(path: Path):
    """The row programs (one per kernel class) of the spec at `path`."""
    from opgen.tiling.pipeline import kernel_build

    return [v.prog for v in kernel_build(_load_file(path)).lowered.extra["variants"]]


def test_the_gather_of_a_column_input_is_one_gm_element(tmp_path):
    """The weight gathered by the row's index is an `sgather` of GM input w reading the checked index (the scheck
    stays: Trap() outside the row); with no other use of w its column row is not loaded at all, and no compare,
    select or row sum is left."""
    (p,) = row_programs(_pick_spec(tmp_path))
    kinds = [i.kind for i in p.instrs]
    (g,) = [i for i in p.instrs if i.kind == "sgather"]
    chk = next(i for i in p.instrs if i.dst == g.srcs[0])
    assert chk.kind == "scheck" and p.tensor(g.gm).gm == "w"
    assert not any(i.kind == "load" and p.tensor(i.gm).gm == "w" for i in p.instrs), kinds
    assert not {"vcmps", "vsels", "rsum"} & set(kinds), kinds


def test_cross_entropy_gathers_its_weight_from_gm():
    """CrossEntropyLoss with a weight: weight[target] is one `sgather` (the smoothing sum still reads the weight's
    column row), so its maximum's level holds no other reduction and pairs with the sum (online maximum and sum)."""
    from opgen.kernel.rowprog import online_pair

    progs = [p for p in row_programs(CE) if any(t.gm == "weight" for t in p.gm)]
    assert progs
    for p in progs:
        assert [p.tensor(i.gm).gm for i in p.instrs if i.kind == "sgather" and p.tensor(i.gm).space == "col"] \
            == ["weight"]
        assert online_pair(p) is not None


def test_findex_is_an_index_without_int_symbols():
    """kir.FIndex: no int64 symbol (the verifier checks its float scalar apart), no static value, found inside an
    integer expression (float_indices)."""
    e = kir.FIndex("ix")
    assert e.symbols() == set() and str(e) == "int(ix)"
    with pytest.raises(kir.IRError):
        e.evaluate({})
    assert kir.float_indices(Bin("+", Lit(3), e)) == [e]


def _pick64(x, idx, w):
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    return x.max(-1) * w[idx]


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("engine", ["emu", "kir"])
@pytest.mark.parametrize("n, c, dtype", [
    (50, 1001, "float32"),     # odd C; 50 rows on 48 cores: two take a second row
    (131, 20001, "bfloat16"),  # bf16 weight (read by the scalar unit through ToFloat); a row longer than UB's share
])
def test_a_gathered_weight_against_float64(tmp_path, engine, n, c, dtype):
    """y[n] = max_c x[n, c] * w[idx[n]] against float64, the first and last classes among the indices; the emulation
    reads w only at the gathered elements (a few per row, never a [C] row)."""
    rng = np.random.default_rng(c)
    x = (rng.standard_normal((n, c)) * 3.0).astype(NP_DT[dtype])
    idx = rng.integers(0, c, n).astype(np.int64)
    idx[0], idx[1] = 0, c - 1
    w = rng.uniform(0.25, 2.0, c).astype(NP_DT[dtype])
    path = _pick_spec(tmp_path)
    r = check_on(path, engine, tmp_path, {"x": x, "idx": idx, "w": w}, {"T": dtype})
    want = _pick64(x, idx, w)
    got = np.asarray(r.arrays["y"], np.float64)
    assert np.all(np.abs(got - want) <= 2.0**-22 * np.abs(want)), float(np.abs(got - want).max())
    if engine == "emu":
        read = r.gm["w"].read
        assert 0 < read < n * 64 and read % (n * np.dtype(NP_DT[dtype]).itemsize) == 0, read


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("n, c, dtype, eps, engine", [
    (37, 1001, "bfloat16", 0.0, "emu"),     # ROW_SPLIT: odd C, every 7th row ignored
    (37, 1001, "bfloat16", 0.0, "kir"),
    (63, 12001, "float32", 0.1, "emu"),     # label smoothing sums every class's weighted log-probability
    (5, 12001, "float32", 0.1, "kir"),      # the same COL_SPLIT on the Kernel-IR engine over 5 rows (13 s of CPU at 63)
])
def test_cross_entropy_with_a_weight_against_float64(n, c, dtype, eps, engine, examples_gen):
    """CrossEntropyLoss with a weight (its gather one GM element a row) against float64: loss and log_prob, ignored
    rows 0."""
    x, t = _inputs(n, c, dtype, seed=c + 1)
    w = np.random.default_rng(c).uniform(0.25, 2.0, c).astype(np.float32)
    r = run_check(str(CE), inputs={"input": x, "target": t, "weight": w},
                  attrs={"reduction": "none", "label_smoothing": eps}, dtypes={"T": dtype}, gen_dir=examples_gen,
                  progress=False, engine=engine)
    assert not r.faults and r.passed, r.faults[:3]
    loss, lp = _loss64(x, t, w, -100, eps)
    _close(r.arrays["log_prob"], lp, dtype)
    _close(r.arrays["loss"], loss, dtype)
    assert np.all(np.asarray(r.arrays["loss"])[t == -100] == 0)


@pytest.mark.parametrize("weight, eps, strategy", [(False, 0.0, 4), (True, 0.0, 4), (True, 0.1, 2)])
def test_derived_grad_prices_only_the_column_rows_it_makes(weight, eps, strategy):
    """The derived CrossEntropyLossGrad [1024, 32000] bf16: without a weight its ROW_CHUNK chunks make only the lane
    index (the weight's per-chunk load is priced only while the weight is present: `colLoadsAbsent`), so ROW_CHUNK
    (4) is taken over COL_SPLIT (2), as the emulation's estimate orders them (2.85x against 3.72x its floor); with a
    weight at label_smoothing 0.1 the smoothing terms re-read it per row beyond GM_REREAD_SHARE and COL_SPLIT stays;
    at label_smoothing 0 the runtime guard skips them (the masked zero pushed through the broadcast and the sum,
    docs/design.md "Backward from forward") and ROW_CHUNK is taken: the cost model's estimate 2.61x its floor,
    against 5.06x for the COL_SPLIT class before that push (docs/design.md, runtime guards)."""
    from opgen.ir.dtypes import DType
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import program_inputs
    from opgen.tiling.pipeline import kernel_build

    spec = _load_file(ROOT / "examples" / "specs" / "derived" / "cross_entropy_loss_grad.py")
    t = kernel_build(spec).tiling
    tl = t.program.evaluate(program_inputs(spec, t.program, t.inputs, {"N": 1024, "C": 32000}, {"T": DType.bf16},
                                           PLATFORMS["ascend910b1"], {"label_smoothing": eps}, present=(weight,)))
    assert tl["strategy"] == strategy, {k: v for k, v in tl.items() if "Cycles" in k}
