"""ROW_SPLIT of a program with per-batch rows over many rows at once (opgen.kernel.rowprog.batchable,
opgen.kernel.rowsched `_batch_runs`, opgen.kernel.rowclass `_run_segments` / `_Printer._whole`): a pass's rows are
run one batch at a time, the batch bookkeeping once a run, the batch rows (AdaLayerNormGrad's 1 + scale, the sums
pd_scale / pd_shift) read and accumulated as column rows are. The expectations below are worked out from the
AdaLayerNormGrad spec (specs/ada_layer_norm_grad.py) and docs/reference/ada_layer_norm.md §1.2, the values against
float64 NumPy of the same inputs, not the code's earlier output."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from oracles import ada_layer_norm_grad

from opgen.check.kirengine import kernel_classes
from opgen.kernel import kir
from opgen.kernel.rowprog import Instr, RowProgram, batchable
from opgen.registry import load_spec


def _for_loops(stmts, var: str) -> list:
    return [s for s in kir.walk(stmts) if isinstance(s, kir.For) and s.var == var]


def test_a_one_pass_program_with_batch_rows_is_batchable_a_two_pass_one_is_not():
    cast = Instr("cast_in", "w0", gm="x")
    by_brow = Instr("vbin", "w0", ("w0", "b0"), "Mul")
    out = Instr("store", srcs=("w0",), gm="y", arg="CAST_RINT")
    assert batchable(RowProgram("t", None, instrs=[cast, by_brow, out], row_temps=1, brow=["b0"]))
    # a second pass reading a reduction over rows, or per-batch values: their bookkeeping runs row by row
    assert not batchable(RowProgram("t", None, instrs=[cast, by_brow, out], row_temps=1, brow=["b0"],
                                    acc_reads=["b0"]))
    assert not batchable(RowProgram("t", None, instrs=[cast, by_brow, out], row_temps=1, brow=["b0"],
                                    btotals=[("bt0_", "b0", "sum")]))


def test_ada_layer_norm_grad_runs_a_pass_one_batch_at_a_time_with_its_batch_rows_as_column_rows():
    # by hand from the spec: per row z = (x - mean) * rstd (two ops by per-row scalars), dy * (1 + scale) (a batch
    # row), the sums pd_shift += dy and pd_scale += dy * (...) into batch rows, pd_gamma / pd_beta into column rows.
    # In the eight-rows branch every one of them is issued over the run's rows: no vector instruction is left in a
    # per-row loop, the batch row read with block stride 0 (as gamma), the batch sums chunk by chunk or by halving.
    (k,) = kernel_classes(load_spec("AdaLayerNormGrad"))
    body = k.method("Compute").body
    (runs,) = _for_loops(body, "b")
    assert runs.inclusive and runs.nonempty
    lets = [s.name for s in runs.body if isinstance(s, kir.Let)]
    assert lets[:2] == ["b0", "kb"]
    calls = [s.method for s in kir.walk(runs.body) if isinstance(s, kir.Call)]
    assert calls.count("LoadBatch") == 1 and calls.count("FlushRow") == 1 and calls.count("ZeroBatchSums") == 1
    (blocks,) = [s for s in runs.body if isinstance(s, kir.If) and "rowsPerPass" in repr(s.cond)]
    # the eight-rows branch: the per-row loops write scalar slots (GetValue / SetValue); their only vector work is
    # the row-by-row fallback of the accumulations (fewer than four rows, many chunks) and pd_x's Axpy by the per-row
    # mean of g * z (no eight-rows form of Axpy by a per-row scalar)
    for loop in _for_loops(blocks.then, "i"):
        work = [s for s in kir.walk(loop.body) if isinstance(s, kir.Vec)]
        assert all(s.arg("dst").tensor in ("brow_", "colv_") or s.op.name == "AXPY" for s in work)
    brow_reads = [s for s in kir.walk(blocks.then) if isinstance(s, kir.Vec) and s.op.name == "MUL_REP"
                  and s.arg("src1") is not None and s.arg("src1").tensor == "brow_"]
    assert brow_reads and all(s.arg("params")[2] == kir.Lit(0) for s in brow_reads)   # block stride 0
    # the run's rows of the pass's input queue: from row b0
    casts = [s for s in kir.walk(blocks.then) if isinstance(s, kir.Vec) and s.op.name == "CAST_FROM"]
    assert casts and all("b0" in repr(s.arg("src").offset) for s in casts)


def _want(r, present):
    """AdaLayerNormGrad in float64 from the run's inputs: the suite's torch-autograd oracle at the given statistics
    (tests/oracles.py ada_layer_norm_grad; docs/reference/ada_layer_norm.md §1.2), an absent gamma / beta as ones /
    zeros."""
    f = {n: np.asarray(a, np.float64) for n, a in r.inputs.items() if a is not None}
    return ada_layer_norm_grad(f["dy"], f["x"], f["rstd"], f["mean"], f["scale"],
                               f["gamma"] if "gamma" in present else None, f["beta"] if "beta" in present else None)


# (Bd, S, H): batch boundaries inside a core's passes (S not a multiple of the rows a core takes), odd H; rows of
# more than one repeat (the eight-rows branch), of at most 64 lanes (the row reductions over all rows), many batches
# a pass (runs of 3 rows), rows over the cores with tails
CASES = [
    ((5,), 211, 130, {"T": "bfloat16", "U": "float32"}, ("gamma", "beta")),
    ((3,), 400, 33, {"T": "float32", "U": "float32"}, ()),
    ((41,), 3, 64, {"T": "float16", "U": "float16"}, ("gamma",)),
    ((2,), 301, 1000, {"T": "float32", "U": "float32"}, ("beta",)),
]
KIR_CASES = [((5,), 31, 130, {"T": "bfloat16", "U": "float32"}, ("gamma", "beta")),
             ((17,), 3, 33, {"T": "float32", "U": "float32"}, ("gamma",))]
# COL_SPLIT (rows too long for UB) in sub-batches, its groups within one batch: a batch's rows not a multiple of the
# sub-batch (a tail sub-batch, a group ending at the batch's end), slices of 80 / 96 columns
COL_CASES = [((3,), 37, 3441, {"T": "bfloat16", "U": "float32"}, ("gamma", "beta")),
             ((5,), 9, 3440, {"T": "float16", "U": "float16"}, ()),
             ((2,), 301, 4099, {"T": "float32", "U": "float32"}, ("gamma",))]
KIR_COL_CASES = [((3,), 37, 3441, {"T": "bfloat16", "U": "float32"}, ("beta",))]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("engine,case", [("emu", c) for c in CASES + COL_CASES]
                         + [("kir", c) for c in KIR_CASES + KIR_COL_CASES],
                         ids=lambda v: v if isinstance(v, str) else f"{v[0]}x{v[1]}x{v[2]}-{v[3]['T']}-{'+'.join(v[4]) or 'none'}")
def test_ada_layer_norm_grad_batch_runs_against_float64(engine, case):
    """The emitted AdaLayerNormGrad (ROW_SPLIT: passes of many rows meeting batch boundaries; COL_SPLIT: groups
    within one batch in sub-batches) on both engines:
    every output within its dtype's rounding of the float64 values (bf16 / fp16 outputs: 2^-7 / 2^-9 of the value
    plus as much of the largest, the fp32 sums' and the cancellation in pd_x's error; fp32: 2^-12 of the largest)."""
    from opgen.check import run_check

    bd, s, h, dt, present = case
    r = run_check("AdaLayerNormGrad", dims={"Bd": bd, "S": s, "H": h}, dtypes=dt, present=present, seed=h + s,
                  progress=False, engine=engine)
    assert not r.faults and r.passed and r.tiling_key % 10 == (2 if h > 3000 else 1)
    want = _want(r, present)
    rel = {"float32": 2.0**-12, "float16": 2.0**-9, "bfloat16": 2.0**-7}
    for name, w in want.items():
        got = np.asarray(r.arrays[name], np.float64).reshape(w.shape)
        tol = rel[dt["U"] if name in ("pd_gamma", "pd_beta") else dt["T"]]
        assert np.all(np.abs(got - w) <= tol * (np.abs(w) + np.abs(w).max())), name


def _col_tiling(bd, s, h):
    from opgen.platforms import get_platform
    from opgen.tiling.pipeline import kernel_build

    plat = get_platform("ascend910b1")
    prog = kernel_build(load_spec("AdaLayerNormGrad")).tiling.program
    b = int(np.prod(bd))
    return prog.evaluate(dict(rows=b * s, seq=s, batch=b, hidden=h, TBytes=2, UBytes=4, dtypeKey=5, attrKey=0,
                              formKey=0, coreNum=plat.aiv, ubBytes=plat.ub_bytes))


def test_col_split_takes_sub_batches_only_where_groups_within_a_batch_are_priced_cheaper():
    """COL_SPLIT of AdaLayerNormGrad (H = 3441: slices of 80 columns) in sub-batches needs groups within one batch
    (opgen.tiling.rowkernel.col_batch_rows): 2 batches of 2048 rows cost a few groups more than row by row's and
    take them (each row's 13 or so instructions issued once for 8 rows or more); 6 batches of 5 rows would be 6
    groups (6 exchanges, two SyncAll each) against one group of 30 rows row by row: row by row."""
    tl = _col_tiling((2,), 2048, 3441)
    assert tl["strategy"] == 2 and tl["colBatchRows"] >= 8 and tl["colBatchRows"] % 8 == 0
    assert tl["colBatchGroups"] == 2 * -(-2048 // tl["groupRows"])
    tl = _col_tiling((2, 3), 5, 3441)
    assert tl["strategy"] == 2 and tl["colBatchRows"] == 0 and tl["groupRows"] == 30
