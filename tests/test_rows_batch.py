"""ROW_SPLIT over the rows of a pass at once (opgen.kernel.rowprog.batchable / batched, opgen.codegen.kernel
`_Printer.batch_segments`, opgen.kernel.rowsched): the elementwise row instructions of a pass are issued once with
count k * colAlign, only what reads a per-row value runs in a per-row loop; the row temporaries hold the pass's rows
(the tiling's UB plan counts them per row). Counts below are worked out by hand from the RmsNorm spec
(examples/specs/rms_norm.py: y = x * rsqrt(mean(x * x) + eps) * gamma, rstd a per-row output) and the schedule
described in docs/design.md (the rows family), not read from the code's earlier output."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from opgen.check.kirengine import kernel_classes
from opgen.ir.dims import Bin, Sym
from opgen.kernel import kir
from opgen.kernel.isa import Op
from opgen.kernel.rowprog import Instr, RowProgram, batchable, batched
from opgen.registry import load_spec

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples" / "specs"


def _vector_work(stmts) -> list:
    """The vector instructions and row-reduction calls among `stmts` (nested)."""
    return [s for s in kir.walk(stmts) if isinstance(s, kir.Vec)
            or isinstance(s, kir.Call) and s.method in ("RowSum", "RowMax")]


def test_rms_norm_issues_four_instructions_per_pass_and_three_per_row():
    # by hand: x widened, x * x, y narrowed and rstd narrowed need no per-row value (4 per pass); the row sum, the
    # product by rstd (a per-row scalar) and the product by gamma (a column row, one row long) run per row (3)
    (k,) = kernel_classes(load_spec(str(EX / "rms_norm.py")))
    body = k.method("Compute").body
    loops = [s for s in body if isinstance(s, kir.For)]
    assert len(loops) == 1
    per_row = _vector_work(loops[0].body)
    per_pass = [s for s in _vector_work(body) if not any(s is x for x in per_row)]
    assert len(per_pass) == 4 and len(per_row) == 3
    assert [s.method for s in per_row if isinstance(s, kir.Call)] == ["RowSum"]
    assert sorted(s.op.name for s in per_row if isinstance(s, kir.Vec)) == ["MUL", "MULS"]
    over_pass = Bin("*", Sym("k"), Sym("rowStride_"))
    assert [s.arg("count") for s in per_pass if s.op in (Op.CAST_FROM, Op.MUL)] == [over_pass, over_pass]
    # the row temporaries hold the pass's rows: w_[j] starts j * pass * rowStride_ floats into workBuf_
    inits = [s for s in kir.walk(k.method("RowSplit").body) if isinstance(s, kir.InitBuffer) and s.buf == "workBuf_"]
    assert len(inits) == 1 and "Sym(name='pass')" in repr(inits[0].bytes)


def _prog(instrs, brow=()) -> RowProgram:
    return RowProgram("t", None, instrs=list(instrs), row_temps=3, brow=list(brow))


def test_which_instructions_run_over_all_rows():
    cast = Instr("cast_in", "w0", gm="x")
    sq = Instr("vbin", "w1", ("w0", "w0"), "Mul")
    rs = Instr("rsum", "s0", ("w1",), space="stat")
    by_row = Instr("vscalar", "w0", ("w0",), "Muls", "s0")          # reads the per-row sum
    by_attr = Instr("vscalar", "w0", ("w0",), "Muls", "attr_alpha")  # a runtime attribute: the same for every row
    by_col = Instr("vbin", "w0", ("w0", "g"), "Mul")                  # g: a column row, one row long
    out = Instr("store", srcs=("w0",), gm="y", arg="CAST_RINT")
    p = _prog([cast, sq, rs, by_row, by_attr, by_col, out])
    assert batchable(p)
    assert [batched(i, p) for i in p.instrs] == [True, True, False, False, True, False, True]
    # per-batch rows (the batch bookkeeping runs row by row), column-dependent lanes, masks: row by row throughout
    assert not batchable(_prog([cast, out], brow=["b0"]))
    assert not batchable(_prog([cast, Instr("viota", "w1", arg="0.0f"), out]))
    assert not batchable(_prog([cast, Instr("vcmps", "w1", ("w0",), "GT", "0.0f"), out]))


def test_the_ub_plan_counts_the_row_temporaries_per_row_of_a_pass():
    from opgen.tiling.rowkernel import ROW_SPLIT, RowCounts, _fixed_plan

    base = dict(row_in=(("f32", 1),), row_out=(("f32", 1),), stat_in=0, stat_out=0, temps=3, brow=0, col=0,
                brow_acc=0, col_acc=0, rsums=1, rsums_per_level=1, levels=1)
    for batch, per_row in ((1, True), (0, False)):
        (work,) = [b for b in _fixed_plan(RowCounts(**base, batch=batch), 1000, ROW_SPLIT) if b.name == "workBuf"]
        assert work.per_row is per_row and work.num == 3 and work.elem_bytes == 4


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_issued_instructions_of_rms_norm_match_the_hand_count(tmp_path):
    """RmsNorm fp32, 96 rows of 45 on the 48 AIV cores of ascend910b1: 2 rows per core in one pass (colAlign 48).
    Vector issues of a core, counted by the emulation (docs/reference/kernel_cost.md §1: one per instruction of at
    most 255 repeats; ReduceSum two, its pass over the per-repeat sums counted apart): gamma widened once (1); per
    pass x widened (2 rows * 48 * 4 B = 1.5 repeats: 1), x * x (1), y narrowed (1), rstd narrowed (1); per row
    ReduceSum (2), Muls by rstd (1), Mul by gamma (1). 1 + 4 + 2 * 4 = 13 (row by row it was 1 + 1 + 2 * 7 = 16).
    The values against float64."""
    from opgen.check import run_check
    from opgen.codegen import write_ops

    write_ops([str(EX / "rms_norm.py")], tmp_path)
    r = run_check(str(EX / "rms_norm.py"), dims={"Bd": (96,), "H": 45}, dtypes={"T": "float32"}, gen_dir=tmp_path,
                  seed=3, progress=False)
    assert r.passed and not r.faults and r.tiling_key % 10 == 1
    assert r.cost["vec_issues"] == 13
    x, g = np.asarray(r.inputs["x"], np.float64), np.asarray(r.inputs["gamma"], np.float64)
    rstd = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    y = x * rstd * g
    assert np.allclose(np.asarray(r.arrays["y"], np.float64), y, rtol=2.0**-20, atol=2.0**-20 * np.abs(y).max())
    assert np.allclose(np.asarray(r.arrays["rstd"], np.float64), rstd, rtol=2.0**-20)
