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
from opgen.kernel.isa import Op, Pipe
from opgen.kernel.rowprog import Instr, RowProgram, batchable, batched
from opgen.registry import load_spec

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples" / "specs"


def _vector_work(stmts) -> list:
    """The vector instructions and row-reduction calls among `stmts` (nested)."""
    return [s for s in kir.walk(stmts) if isinstance(s, kir.Vec)
            or isinstance(s, kir.Call) and s.method in ("RowSum", "RowMax", "RowsSum", "RowsMax", "RowsSumB", "RowsMaxB")]


def _split(stmts):
    """(work issued once a pass, work in the per-row loop) of a Compute branch."""
    loops = [s for s in stmts if isinstance(s, kir.For) and s.var == "i"]
    assert len(loops) == 1
    per_row = _vector_work(loops[0].body)
    return [s for s in _vector_work(stmts) if not any(s is x for x in per_row)], per_row


def test_rms_norm_issues_its_elementwise_work_and_row_sums_once_a_pass():
    # by hand from the spec: x widened, x * x and y narrowed need no per-row value: once a pass; the product by rstd
    # (a per-row scalar) runs per row. When the rows fit the repeat strides: the row sums by RowsSum over all rows
    # (then one V->S wait a pass) and the product by gamma (a column row, one row long) chunk by chunk over all rows
    # (Mul's mask / repeat form, gamma's repeat stride 0); else RowSum and the product by gamma row by row.
    # Rows of 9 to 255 blocks, 2 or more rows a pass: eight rows a repeat (rowsched.BLOCK_FITS), no vector
    # instruction in a per-row loop: the row sums by RowsSumB, rstd's k values written by one scalar loop, broadcast
    # by Brcb and applied by Mul's mask / repeat form, the product by gamma by the same form (gamma's block stride 0).
    (k,) = kernel_classes(load_spec(str(EX / "rms_norm.py")))
    body = k.method("Compute").body
    (blocks,) = [s for s in body if isinstance(s, kir.If)]
    assert "rowsPerPass" in repr(blocks.cond) and "rowStride_" in repr(blocks.cond)
    loops = [s for s in blocks.then if isinstance(s, kir.For) and s.var == "i"]
    assert loops and not any(_vector_work(x.body) for x in loops)
    assert [s.method for s in _vector_work(blocks.then) if isinstance(s, kir.Call)] == ["RowsSumB"]
    assert sorted(s.op.name for s in _vector_work(blocks.then) if isinstance(s, kir.Vec)) == [
        "BRCB", "CAST_FROM", "CAST_TO", "MUL", "MUL_REP", "MUL_REP"]
    (branch,) = blocks.orelse
    assert "rowStride_" in repr(branch.cond) and "Sym(name='k')" in repr(branch.cond)
    for stmts, calls, vecs in ((branch.then, (["RowsSum"], []), (["CAST_FROM", "CAST_TO", "MUL", "MUL_REP"], ["MULS"])),
                               (branch.orelse, ([], ["RowSum"]), (["CAST_FROM", "CAST_TO", "MUL"], ["MUL", "MULS"]))):
        per_pass, per_row = _split(stmts)
        assert [s.method for s in per_pass if isinstance(s, kir.Call)] == calls[0]
        assert [s.method for s in per_row if isinstance(s, kir.Call)] == calls[1]
        assert sorted(s.op.name for s in per_pass if isinstance(s, kir.Vec)) == vecs[0]
        assert sorted(s.op.name for s in per_row if isinstance(s, kir.Vec)) == vecs[1]
        over_pass = Bin("*", Sym("k"), Sym("rowStride_"))
        assert [s.arg("count") for s in per_pass if isinstance(s, kir.Vec) and s.op in (Op.CAST_FROM, Op.MUL)] == [
            over_pass, over_pass]
    flags = [s for s in branch.then if isinstance(s, kir.WaitFlag)]
    assert len(flags) == 1 and flags[0].src is Pipe.V and flags[0].dst is Pipe.S
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
    # per-batch rows: a pass's rows one batch at a time (tests/test_rows_batch_runs.py); column-dependent lanes: row
    # by row throughout
    assert batchable(_prog([cast, out], brow=["b0"]))
    assert not batchable(_prog([cast, Instr("viota", "w1", arg="0.0f"), out]))
    # masks packed over all rows of a pass: batched when every compare / select is, not one inside a row loop
    cmp = Instr("vcmps", "w1", ("w0",), "GT", "0.0f")
    sel = Instr("vsels", "w2", ("w1", "w0"), arg="0.0f")
    assert batchable(_prog([cast, cmp, sel, out]))
    per_row_sel = Instr("vsels", "w2", ("w1", "w0"), arg="s0")      # chooses a per-row value: row by row
    assert not batchable(_prog([cast, sq, rs, cmp, per_row_sel, out]))
    inside = Instr("vscalar", "w0", ("w0",), "Adds", "s0")           # reads s0 after the compare: s0's row loop
    assert not batchable(_prog([cast, sq, rs, cmp, sel, inside, out]))     # holds the compare
    assert batchable(_prog([cast, cmp, sel, sq, rs, inside, out]))


def test_masks_and_byte_rows_are_issued_over_all_rows_when_a_row_fills_whole_mask_bytes():
    # MaskedFill (examples/specs/masked_fill.py: out = where(mask, value, self), mask bool): the byte row widened
    # through half, the compare, the select all once a pass with count k * rowStride_ (the compare and select over
    # whole 256-B repeats of it) when H is a multiple of 8 (a row's lanes fill whole mask bytes); else row by row
    (k,) = kernel_classes(load_spec(str(EX / "masked_fill.py")))
    (branch,) = [s for s in k.method("Compute").body if isinstance(s, kir.If)]
    assert repr(branch.cond) == repr((kir.Constraint("==", Bin("%", Sym("n_"), kir.Lit(8)), kir.Lit(0)),))
    assert not any(isinstance(s, kir.For) for s in branch.then)
    over_pass = Bin("*", Sym("k"), Sym("rowStride_"))
    ops = {s.op.name: s.arg("count") for s in _vector_work(branch.then)}
    # the select of the Duplicate of value is Selects of the negated compare (rowalg.select_with_scalar)
    assert set(ops) == {"CAST", "COMPARE_SCALAR", "CAST_FROM", "SELECT_SCALAR", "CAST_TO"}
    assert ops["CAST"] == over_pass and repr(over_pass) in repr(ops["COMPARE_SCALAR"])
    # beside the row loop only the buffers' hand-offs (each input freed after its last read, each output allocated
    # before its first write: rowsched.free_after_last_use / alloc_before_first_use)
    (loop,) = [s for s in branch.orelse if not isinstance(s, (kir.Alloc, kir.Free))]
    assert isinstance(loop, kir.For) and loop.var == "i"
    assert {s.arg("count") for s in _vector_work(loop.body) if s.op.name == "CAST"} == {Sym("n_")}


def test_per_row_statistics_are_broadcast_from_their_input_queue_eight_rows_a_repeat():
    # LayerNormGradV3 (examples/specs/layer_norm_grad.py: z = (x - mean) * rstd, ...): in the block branch x - mean
    # is Sub of mean's Brcb blocks read straight from its input queue, z * rstd Mul of rstd's, both eight rows a
    # repeat; no scalar loop writes a slot before the first row sum; the two row sums by RowsSumB
    (k,) = kernel_classes(load_spec(str(EX / "layer_norm_grad.py")))
    (blocks,) = [s for s in k.method("Compute").body if isinstance(s, kir.If)]
    assert "rowsPerPass" in repr(blocks.cond)
    first = next(n for n, s in enumerate(blocks.then) if isinstance(s, kir.Call) and s.method == "RowsSumB")
    head = blocks.then[:first]
    brcb = [s for s in kir.walk(head) if isinstance(s, kir.Vec) and s.op is Op.BRCB]
    assert [s.arg("src").tensor for s in brcb] == ["statIn_mean", "statIn_rstd"]
    assert [s.op for s in kir.walk(head) if isinstance(s, kir.Vec) and s.op in (Op.SUB_REP, Op.MUL_REP)] == [
        Op.SUB_REP, Op.MUL_REP, Op.MUL_REP]   # x - mean, z * rstd, dy * gamma (gamma's block stride 0)
    assert not any(isinstance(s, kir.SetValue) for s in kir.walk(head))
    assert [s.method for s in kir.walk(blocks.then) if isinstance(s, kir.Call)] == ["RowsSumB", "RowsSumB"]


def test_the_ub_plan_counts_the_row_temporaries_per_row_of_a_pass():
    from opgen.tiling.program import lit
    from opgen.tiling.rowkernel import ROW_SPLIT, RowCounts, _fixed_plan

    base = dict(row_in=(("f32", 1),), row_out=(("f32", 1),), stat_in=0, stat_out=0, temps=3, brow=0, col=0,
                brow_acc=0, col_acc=0, rsums=1, rsums_per_level=1, levels=1)
    for batch, per_row in ((1, True), (0, False)):
        (work,) = [b for b in _fixed_plan(RowCounts(**base, batch=batch), 1000, ROW_SPLIT, lambda d: lit(4)) if b.name == "workBuf"]
        assert work.per_row is per_row and work.num == 3 and work.elem_bytes == 4


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_issued_instructions_of_rms_norm_match_the_hand_count(examples_gen):
    """RmsNorm fp32, 96 rows of 45 on the 48 AIV cores of ascend910b1: 2 rows per core in one pass (colAlign 48).
    Vector issues of a core, counted by the emulation (docs/reference/kernel_cost.md §1: one per instruction of at
    most 255 repeats; ReduceSum two, its pass over the per-repeat sums counted apart): gamma widened once (1); per
    pass (two rows a pass: eight rows a repeat, rowsched.BLOCK_FITS, rows of one repeat or less included) x
    widened (2 rows * 48 * 4 B = 1.5 repeats: 1), x * x (1), the row sums (rows of 45 <= 64 lanes: RowsSumB's
    fallback, one WholeReduceSum with a repeat a row, 1), rstd's two values broadcast by Brcb (1) and applied by
    Mul's mask / repeat form (the two rows in one repeat's blocks: 1), the product by gamma (the same form, gamma's
    block stride 0: 1), y narrowed (1), rstd narrowed (1). 1 + 8 = 9 (row by row it was 1 + 1 + 2 * 7 = 16:
    ReduceSum and a V->S wait a row). Flag waits: V -> S once for the row sums, S -> V once for rstd's slots before
    Brcb and once for the staged rstd (3). The values against float64."""
    from opgen.check import run_check

    r = run_check(str(EX / "rms_norm.py"), dims={"Bd": (96,), "H": 45}, dtypes={"T": "float32"}, gen_dir=examples_gen,
                  seed=3, progress=False)
    assert r.passed and not r.faults and r.tiling_key % 10 == 1
    assert r.cost["vec_issues"] == 9 and r.cost["flag_waits"] == 3
    x, g = np.asarray(r.inputs["x"], np.float64), np.asarray(r.inputs["gamma"], np.float64)
    rstd = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    y = x * rstd * g
    assert np.allclose(np.asarray(r.arrays["y"], np.float64), y, rtol=2.0**-20, atol=2.0**-20 * np.abs(y).max())
    assert np.allclose(np.asarray(r.arrays["rstd"], np.float64), rstd, rtol=2.0**-20)


_FAULTS = {   # name: (statement on a 1024-float UB tensor t, a fragment of the fault)
    "mask past one repeat": ("Add(t, t, t, 65, 1, BinaryRepeatParams(1, 1, 1, 8, 8, 8));", "mask 65 outside 1..64"),
    "mask 0": ("Mul(t, t, t, 0, 1, BinaryRepeatParams(1, 1, 1, 8, 8, 8));", "mask 0 outside"),
    "repeat past 255": ("WholeReduceSum(t, t, 64, 256, 1, 1, 8);", "repeatTime 256 outside 0..255"),
    "strides past the tensor": ("Add(t, t, t, 64, 200, BinaryRepeatParams(1, 1, 1, 8, 8, 8));", "past the end"),
    "misaligned operand": ("Max(t, t[3], t, 64, 1, BinaryRepeatParams(1, 1, 1, 8, 8, 8));", "not 32-byte aligned"),
    "a WholeReduceMax index order": ("WholeReduceMax(t, t, 64, 1, 1, 1, 8);", "ORDER_ONLY_VALUE only"),
    # the general address-overlap rules (asc-devkit docs, SIMD-API/通用说明和约束.md, 通用地址重叠约束): within a
    # repeat dst and a source overlap 100 % or not at all; no repeat reads what an earlier repeat wrote, except
    # Add / Sub / Mul / Max / Min (half, float, int32) reading src1 where dst's or src1's repeat stride is 0
    "a destination block stride 0": ("Add(t[256], t, t[64], 64, 1, BinaryRepeatParams(0, 1, 1, 8, 8, 8));",
                                     "dstBlkStride 0"),
    "dst partly over a source in a repeat": ("Add(t[8], t, t[256], 64, 1, BinaryRepeatParams(1, 1, 1, 8, 8, 8));",
                                             "partly overlaps src0"),
    "a repeat reads an earlier repeat's dst": ("Add(t[64], t, t[512], 64, 2, BinaryRepeatParams(1, 1, 1, 8, 8, 8));",
                                               "reads what repeat 0 of the same instruction wrote"),
    "Div accumulating through src1": ("Div(t, t[256], t, 64, 2, BinaryRepeatParams(1, 1, 1, 0, 8, 0));",
                                      "reads what repeat 0 of the same instruction wrote"),
    "WholeReduceSum dst inside its repeat's lanes": ("WholeReduceSum(t[3], t, 64, 1, 1, 1, 8);",
                                                     "overlaps the lanes of src"),
    "WholeReduceSum reads an earlier repeat's dst": ("WholeReduceSum(t[64], t, 64, 2, 1, 1, 8);",
                                                     "reads what repeat 0 of the same instruction wrote"),
    "WholeReduce stride past 16 bits": ("WholeReduceSum(t[900], t, 64, 1, 1, 1, 65536);",
                                        "srcRepStride 65536 outside 0..65535"),
}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_the_repeat_forms_fault_where_the_device_would_misbehave(tmp_path):
    """The emulation's mask / repeat forms (opgen/emu/include/emu/vector.h) refuse a mask outside one repeat, a
    repeatTime past 255, an element past the tensor, a misaligned operand, the index orders of WholeReduceMax it
    does not model, a destination block stride 0, operands that overlap against the device's address-overlap rules
    and WholeReduce strides past 16 bits (docs/reference/ascendc.md §1.9); valid calls on the same data pass."""
    import subprocess

    inc = ROOT / "opgen" / "emu" / "include"
    cases = list(_FAULTS.items()) + [
        ("valid", ("Add(t[512], t, t[64], 64, 3, BinaryRepeatParams(1, 1, 1, 8, 16, 16));"
                   " PipeBarrier<PIPE_V>(); WholeReduceSum(t[900], t[512], 40, 3, 1, 1, 8);", None)),
        # in place, 100 % overlap within each repeat (RowsSum's fold into its scratch)
        ("valid in place", ("Add(t, t, t[512], 64, 3, BinaryRepeatParams(1, 1, 1, 8, 8, 8));", None)),
        # the documented exception: Add accumulating through src1 with dst's and src1's repeat stride 0
        ("valid accumulation", ("Add(t, t[256], t, 64, 3, BinaryRepeatParams(1, 1, 1, 0, 8, 0));", None))]
    lines = ['#include <cstdio>', '#include "kernel_operator.h"', '#include "emu/launch.h"', "using namespace AscendC;",
             "int main() {"]
    for n, (_name, (stmt, _want)) in enumerate(cases):
        lines += [f"  {{ auto r = emu::Launch(1, 196608, [&] {{ TPipe pipe; TBuf<> b; pipe.InitBuffer(b, 4096);",
                  "    LocalTensor<float> t = b.Get<float>(); Duplicate(t, 1.0f, 1024); PipeBarrier<PIPE_V>();",
                  f"    {stmt} PipeBarrier<PIPE_ALL>(); }});",
                  f'    printf("case {n} %d %s\\n", r.ok ? 1 : 0, r.firstFault.c_str()); }}']
    lines.append("  return 0; }")
    (tmp_path / "f.cpp").write_text("\n".join(lines))
    b = subprocess.run(["g++", "-std=c++17", "-O0", "-pthread", f"-I{inc}", str(tmp_path / "f.cpp"), "-o",
                        str(tmp_path / "f")], capture_output=True, text=True)
    assert b.returncode == 0, b.stderr[-3000:]
    out = subprocess.run([str(tmp_path / "f")], capture_output=True, text=True, timeout=60).stdout.splitlines()
    got = {int(ln.split(" ")[1]): ln.split(" ", 3)[2:] for ln in out if ln.startswith("case ")}
    for n, (name, (_stmt, want)) in enumerate(cases):
        ok, why = got[n][0], (got[n][1] if len(got[n]) > 1 else "")
        if want is None:
            assert ok == "1", (name, why)
        else:
            assert ok == "0" and want in why, (name, why)


def test_the_kir_interpreter_runs_the_repeat_forms_as_the_table_means():
    """Kernel IR interpreter (opgen.kernel.kir_interp): 3 rows of 40 floats (rows 5 blocks apart, as a rows kernel
    lays out rows of 37): the first 32 lanes of each row copied by Max(x, x) in mask / repeat form into a [3, 32]
    block, then WholeReduceSum of each row's 37 lanes and WholeReduceMax of each copied row: against float64 sums
    and maxima of the same rows (the fp32 halving-tree sum within 37 * 2^-24 relative)."""
    from opgen.ir.dims import Lit
    from opgen.kernel import kir_interp as ki
    from opgen.kernel.kir import (Copy, Get, GmTensor, GmView, InitBuffer, KernelClass, Local, Ref, SetFlag, TensorVar,
                                  WaitFlag, vec)

    rng = np.random.default_rng(11)
    x = rng.uniform(-4, 4, 120).astype(np.float32)
    t, f = Ref("t"), Lit
    proc = (InitBuffer("b", f(4096)), Get("t", "b", "float"),
            Copy(t, GmView("gmX"), f(1), f(480)), SetFlag(Pipe.MTE2, Pipe.V), WaitFlag(Pipe.MTE2, Pipe.V),
            vec(Op.MAX_REP, dst=Ref("t", f(256)), src0=t, src1=t, mask=f(32), repeat=f(3),
                params=(f(1), f(1), f(1), f(4), f(5), f(5))),
            vec(Op.WHOLE_REDUCE_SUM, dst=Ref("t", f(512)), src=t, mask=f(37), repeat=f(3), dstRep=f(1), srcBlk=f(1),
                srcRep=f(5)),
            kir.Barrier(Pipe.V),
            vec(Op.WHOLE_REDUCE_MAX, dst=Ref("t", f(515)), src=Ref("t", f(256)), mask=f(32), repeat=f(3),
                dstRep=f(1), srcBlk=f(1), srcRep=f(4)),
            SetFlag(Pipe.V, Pipe.MTE3), WaitFlag(Pipe.V, Pipe.MTE3),
            Copy(GmView("gmY"), Ref("t", f(512)), f(1), f(24)))
    k = KernelClass("Tiny", "TinyTiling", args=("x", "y"), gms=(GmTensor("gmX", "float", "x"),
                                                               GmTensor("gmY", "float", "y")),
                    locals=(Local("b"),), tensors=(TensorVar("t", "float"),), fields=(), process=proc)
    gm = {"x": x.copy(), "y": np.zeros(8, np.float32)}
    r = ki.run(k, {}, gm, 1, ub_bytes=196608, verify_first=True)
    assert r.ok, r.first_fault
    rows = x.reshape(3, 40).astype(np.float64)
    y = np.asarray(gm["y"], np.float64)
    assert np.allclose(y[:3], rows[:, :37].sum(1), rtol=0, atol=37 * 2.0**-24 * np.abs(rows[:, :37]).sum(1).max())
    assert np.array_equal(y[3:6], rows[:, :32].max(1))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_rows_over_64_lanes_fold_tails_and_narrow_inputs_against_float64(examples_gen):
    """The RowsSum / RowsMax fold (rows longer than one repeat: first chunk copied, full chunks and a tail chunk of
    its own mask combined, one WholeReduce; opgen.kernel.rowsched._rows_reduce) and the column-row Mul chunk by chunk,
    end to end in the emulation: RmsNorm bf16 97 rows of 150 (two full chunks and a 22-lane tail; 2 or 3 rows a core
    on 48 cores, so k differs between cores) and SoftmaxV2 fp16 243 rows of 200 (RowsMax then RowsSum, 8-lane tail;
    5 or 6 rows a core). Both take the eight-rows branch (rowsched.BLOCK_FITS: colAlign 160 / 208 in (64, 2040],
    2 or more rows a pass); RmsNorm's rows of 150 (not whole blocks) are summed by RowsSumB's fallback RowsSum,
    SoftmaxV2's of 200 by RowsMaxB / RowsSumB.
    Values against float64 of the same inputs (bf16 / fp16 outputs: within 2 ulps of the output type plus the fp32
    sums' error)."""
    from opgen.check import run_check

    r = run_check(str(EX / "rms_norm.py"), dims={"Bd": (97,), "H": 150}, dtypes={"T": "bfloat16"}, gen_dir=examples_gen,
                  seed=5, progress=False)
    assert r.passed and not r.faults and r.tiling_key % 10 == 1
    x, g = (np.asarray(r.inputs[n], np.float64) for n in ("x", "gamma"))
    rstd = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    y = x * rstd * g
    got = np.asarray(r.arrays["y"], np.float64)
    assert np.all(np.abs(got - y) <= 2.0**-7 * np.abs(y) + 2.0**-20 * np.abs(y).max())
    assert np.allclose(np.asarray(r.arrays["rstd"], np.float64).reshape(rstd.shape), rstd, rtol=2.0**-18)
    r = run_check(str(EX / "softmax.py"), dims={"Bd": (243,), "H": 200}, dtypes={"T": "float16"}, gen_dir=examples_gen,
                  seed=7, progress=False)
    assert r.passed and not r.faults
    x = np.asarray(r.inputs["x"], np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    y = e / e.sum(-1, keepdims=True)
    got = np.asarray(r.arrays["y"], np.float64)
    assert np.all(np.abs(got - y) <= 2.0**-10 * np.abs(y) + 2.0**-24)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_rows_sums_eight_rows_a_repeat_over_the_longest_rows_against_float64(examples_gen):
    """RowsSumB over rows of 2040 fp32 lanes (255 blocks: the most BLOCK_FITS takes) adds each lane's 255 elements in
    order, then 8 lanes by WholeReduceSum: the fp32 sum of positive terms is within 255 u of the float64 sum (u =
    2^-24; docs/reference/kernel_cost.md §4), rstd = 1 / sqrt(mean + eps) within half that plus a few roundings.
    RmsNorm fp32, 96 rows (2 a core, one pass), against float64; SoftmaxV2 fp32 (RowsMaxB, RowsSumB) likewise."""
    from opgen.check import run_check

    r = run_check(str(EX / "rms_norm.py"), dims={"Bd": (96,), "H": 2040}, dtypes={"T": "float32"},
                  gen_dir=examples_gen, seed=11, progress=False)
    assert r.passed and not r.faults and r.tiling_key % 10 == 1
    x = np.asarray(r.inputs["x"], np.float64)
    rstd = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    assert np.allclose(np.asarray(r.arrays["rstd"], np.float64).reshape(rstd.shape), rstd, rtol=255 * 2.0**-25
                       + 4 * 2.0**-24, atol=0)
    r = run_check(str(EX / "softmax.py"), dims={"Bd": (96,), "H": 2040}, dtypes={"T": "float32"},
                  gen_dir=examples_gen, seed=12, progress=False)
    assert r.passed and not r.faults and r.tiling_key % 10 == 1
    x = np.asarray(r.inputs["x"], np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    y = e / e.sum(-1, keepdims=True)
    assert np.all(np.abs(np.asarray(r.arrays["y"], np.float64) - y) <= (255 + 8) * 2.0**-24 * y)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("engine", ["emu", "kir"])
def test_column_sums_of_many_short_rows_go_chunk_by_chunk_against_float64(examples_gen, engine):
    """LayerNormGradV3 fp32, 2400 rows of 200 (50 a core, many a pass; 480 on the Kernel-IR interpreter, whose
    repeat forms read an accumulating src1 from dst as the device does): ceil(200 / 64) = 4 chunks < 2 k, so dgamma's
    and dbeta's column sums take a pass's rows per chunk in one Add with the column row's repeat stride 0 (the
    accumulation exception), in row order as row by row. The branch is in the IR; the sums against float64."""
    from opgen.check import run_check

    (k,) = kernel_classes(load_spec(str(EX / "layer_norm_grad.py")))
    adds = [s for s in kir.walk(k.method("Compute").body) if isinstance(s, kir.Vec) and s.op is Op.ADD_REP
            and s.arg("dst").tensor == "colv_" and s.arg("src1").tensor == "colv_"]
    assert len(adds) == 2 and all(s.arg("params")[3] == kir.Lit(0) for s in adds)
    rows = 2400 if engine == "emu" else 480   # the interpreter: 10 rows a core, still 4 chunks < 2 k
    r = run_check(str(EX / "layer_norm_grad.py"), dims={"Bd": (rows,), "H": 200},
                  dtypes={"T": "float32", "U": "float32"}, gen_dir=examples_gen, seed=13, progress=False,
                  engine=engine)
    assert r.passed and not r.faults and r.tiling_key % 10 == 1
    dy, x = (np.asarray(r.inputs[n], np.float64) for n in ("dy", "x"))
    z = (x - np.asarray(r.inputs["mean"], np.float64)) * np.asarray(r.inputs["rstd"], np.float64)
    for name, want in (("pd_gamma", (dy * z).sum(0)), ("pd_beta", dy.sum(0))):
        got = np.asarray(r.arrays[name], np.float64)
        assert np.all(np.abs(got - want) <= rows * 2.0**-21 * np.abs(dy).sum(0)), name


@pytest.mark.slow
def test_rows_sums_eight_rows_a_repeat_on_the_kernel_ir_interpreter():
    """RowsSumB accumulates a row's blocks with the scratch as dst and src1, repeat stride 0: the Kernel-IR
    interpreter reads src1 as the earlier repeats left it (isa._binary_repeat, src1_is_dst), as the device and the
    emulation do. RmsNorm fp32 150 rows of 256 (whole blocks: RowsSumB itself) through `--engine kir`."""
    from opgen.check import run_check

    r = run_check(str(EX / "rms_norm.py"), dims={"Bd": (150,), "H": 256}, dtypes={"T": "float32"}, seed=14,
                  progress=False, engine="kir")
    assert r.variant == "kir" and r.passed and not r.faults and r.tiling_key % 10 == 1


def test_a_pass_of_a_program_with_row_reductions_fits_one_repeat_form_instruction():
    """RowsSum / RowsMax issue one instruction with a repeat a row, so they run only when the pass's k rows are at
    most 255 (repeatTime 0..255; rowsched.ROWS_REDUCE_FITS). Short rows fit far more than 255 rows in UB: RmsNorm
    fp32 H = 8 holds 8 * 4 = 32 B per row in each of its in / out / temporary buffers, so the UB fit is some hundreds
    of rows, and with 48 * 1000 rows every core has 1000 rows. The tiling caps a pass at 255 rows (else every full
    pass would fall back to the row-by-row reductions); SoftmaxV2 too."""
    from opgen.ir.dtypes import parse_dtype
    from opgen.tiling.pipeline import kernel_build
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import evaluate

    for name, dims in (("rms_norm.py", {"Bd": (48000,), "H": 8}), ("softmax.py", {"Bd": (48000,), "H": 8})):
        spec = load_spec(str(EX / name))
        u = kernel_build(spec)
        tl = evaluate(spec, u.tiling.program, u.tiling.inputs, dims, {"T": parse_dtype("float32")},
                      PLATFORMS["ascend910b1"], {})
        assert tl["strategy"] == 1 and tl["rowsFit"] > 255 and tl["rowsPerPass"] == 255, (name, tl)


def test_rowssum_scratch_is_counted_for_every_row_length_where_eight_rows_a_repeat_run():
    """The [k, 64] fp32 scratch rowsRed_ holds RowsSum / RowsMax's folds of rows longer than 64 lanes and, at every
    row length, the eight-rows-a-repeat forms' Brcb blocks and per-row scalar slots (rowsched.BLOCK_FITS, rows of
    one repeat or less included), so the UB plan counts its 64 * 4 = 256 B a row at H = 64 as at H = 80. RmsNorm
    fp32 by hand: per row and colAlign element x's queue 2 * 4 B, y's 2 * 4 B and two fp32 temporaries 2 * 4 B =
    24 B; H 64 -> 80 (colAlign: a multiple of 16) adds 16 * 24 = 384 B a row and nothing else; at H = 64 a row takes
    64 * 24 B plus the scratch's 256 B and more (the plan with two buffers per row queue, rowBytesTwoBufs: at 4800
    rows the tiling takes one buffer a queue, opgen.tiling.rows.row_split)."""
    from opgen.ir.dtypes import parse_dtype
    from opgen.tiling.pipeline import kernel_build
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import evaluate

    spec = load_spec(str(EX / "rms_norm.py"))
    u = kernel_build(spec)
    row = {H: evaluate(spec, u.tiling.program, u.tiling.inputs, {"Bd": (4800,), "H": H}, {"T": parse_dtype("float32")},
                       PLATFORMS["ascend910b1"], {})["rowBytesTwoBufs"] for H in (64, 80)}
    assert row[80] - row[64] == 16 * 24, row
    assert row[64] >= 64 * 24 + 256, row


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_rows_sum_of_long_rows_starts_with_the_first_two_chunks(examples_gen):
    """RowsSum of rows of at least 128 lanes starts with Add of the first two 64-lane chunks (no copy of the first
    chunk first). RmsNorm fp32, 96 rows of 150 on 48 cores: 2 rows a core in one pass, colAlign 160. Vector issues
    of a core by hand (as test_issued_instructions_of_rms_norm_match_the_hand_count): gamma widened once (1); per
    pass x widened (1), x * x (1), RowsSum: Add of chunks 0 and 1 (1), the 22-lane tail chunk (1), WholeReduceSum
    (1); the product by gamma in ceil(160 / 64) = 3 chunks (3), y narrowed (1), rstd narrowed (1); per row Muls by
    rstd (2 * 1). 1 + 10 + 2 = 13. Eight rows a repeat (rowsched.BLOCK_FITS: colAlign 160 > 64, 2 rows a pass):
    RowsSumB falls back to RowsSum (150 % 8 != 0: a block's pad lanes are never summed), the product by gamma one
    instruction (1), rstd broadcast by Brcb and applied by one Mul (2): 1 + 1 + 1 + 3 + 1 + 2 + 1 + 1 = 11."""
    from opgen.check import run_check

    r = run_check(str(EX / "rms_norm.py"), dims={"Bd": (96,), "H": 150}, dtypes={"T": "float32"}, gen_dir=examples_gen,
                  seed=4, progress=False)
    assert r.passed and not r.faults and r.tiling_key % 10 == 1
    assert r.cost["vec_issues"] == 11
    x, g = np.asarray(r.inputs["x"], np.float64), np.asarray(r.inputs["gamma"], np.float64)
    rstd = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    y = x * rstd * g
    assert np.allclose(np.asarray(r.arrays["y"], np.float64), y, rtol=2.0**-19, atol=2.0**-20 * np.abs(y).max())


def test_the_table_meaning_of_a_repeat_form_refuses_a_destination_block_stride_0():
    """The KIR interpreter runs the instruction table's meanings (opgen.kernel.isa): a binary mask / repeat form
    with dstBlkStride 0 is refused there as in the emulation (a destination block stride must not be 0,
    docs/reference/ascendc.md §1.9); stride 1 computes 64 lanes of float64-exact sums."""
    from opgen.kernel.isa import INSTRS

    a = np.arange(128, dtype=np.float32)
    env = {"dst": np.zeros(128, np.float32), "src0": a, "src1": a, "mask": 64, "repeat": 1}
    with pytest.raises(ValueError, match="dstBlkStride 0"):
        INSTRS[Op.ADD_REP].meaning({**env, "params": (0, 1, 1, 8, 8, 8)})
    got = INSTRS[Op.ADD_REP].meaning({**env, "params": (1, 1, 1, 8, 8, 8)})["dst"]
    assert np.array_equal(got[:64], 2 * np.arange(64.0)) and not got[64:].any()


def _tree_adds(stmts) -> list:
    """The halving branches (`rowclass._rows_tree_nodes`: an If on k == 1 whose else holds the For over accDone)."""
    from opgen.ir.dims import Constraint, Lit

    return [s for s in kir.walk(stmts) if isinstance(s, kir.If) and s.cond == (Constraint("==", Sym("k"), Lit(1)),)
            and any(isinstance(x, kir.For) and x.var == "accDone" for x in kir.walk(s.orelse))]


def test_column_sums_of_a_pass_halve_its_rows_in_a_dead_row_temporary():
    # LayerNormGradV3 (examples/specs/layer_norm_grad.py): dbeta += dy while dy (w1) is read again (dy * gamma,
    # dy * z) and w2 is written next (dy * gamma): the halving writes w2, the odd middle row straight into the column
    # row; dgamma += dy * z (w1, overwritten next by g * z) halves w1 in place, no odd-row Add. Where the rows make
    # fewer chunks than 2 k the chunk form stays, under 4 rows the row loop.
    (k,) = kernel_classes(load_spec(str(EX / "layer_norm_grad.py")))
    (blocks,) = [s for s in k.method("Compute").body if isinstance(s, kir.If)]
    trees = _tree_adds(blocks.then)
    assert len(trees) == 2
    firsts = []
    for t in trees:
        first = next(s for s in t.orelse if isinstance(s, kir.Vec))
        firsts.append((first.arg("dst").slot, first.arg("src0").slot))
        odd = [s for s in t.orelse if isinstance(s, kir.If)]
        assert len(odd) == (0 if first.arg("dst").slot == first.arg("src0").slot else 1)
        last = [s for s in t.orelse if isinstance(s, kir.Vec)][-1]
        assert last.arg("dst").tensor == "colv_" and last.arg("count") == Sym("n_")
    assert firsts == [(kir.Lit(2), kir.Lit(1)), (kir.Lit(1), kir.Lit(1))]
    guards = [s for s in kir.walk(blocks.then) if isinstance(s, kir.If) and any(t is x for t in trees for x in s.then)]
    assert len(guards) == 2 and all("4" in repr(g.cond) for g in guards)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("engine", ["emu", "kir"])
def test_column_sums_by_halving_issue_the_hand_count_and_match_float64(examples_gen, engine):
    """LayerNormGradV3 T bf16, U fp32, rows of 1152 (18 chunks of 64 lanes, 144 blocks: the eight-rows branch) on 48
    cores, one pass a core: 6, 5 and 3 rows a core (rowsPerPass 6; 18 chunks >= 2 k). Compute's vector issues by
    hand (docs/design.md "Kernel IR", many rows per instruction): x widened, mean's Brcb, Sub, rstd's Brcb, Mul, dy
    widened (6), dy * gamma, dy * z and g * z (3), two RowsSumB (rows of whole blocks, one group of eight: Max, Add,
    WholeReduceSum: 6), the Brcb and Add of -mean(g) (2), the rstd Brcb and Mul (2), the narrowing (1): 20, plus k
    Axpy, plus the two column sums: row by row k each (k = 3: 3 + 3), by halving (k >= 4): k = 6 [0, 3) + [3, 6),
    [0] + [2], [0] + [1], the column row + [0]: 4 each; k = 5 dbeta into w2: [0, 2) + [3, 5), the middle row 2 into
    the column row, [0] + [1], the column row + [0] (4), dgamma in place: [0, 2) + [3, 5), [0] + [2], [0] + [1],
    the column row + [0] (4). Compute(6) - Compute(3) = (20 + 6 + 8) - (20 + 3 + 6) = 5 issues, Compute(5) -
    Compute(3) = 4, every other instruction of the launch the same (row by row it was 9 and 6). The column sums
    (another order of additions, docs/reference/kernel_cost.md §4) and dx against float64."""
    from opgen.check import run_check

    issues = {}
    # the Kernel-IR engine counts no issues: it runs the two halving forms (even and odd k), not the row loop of k = 3
    for per_core, seed in ((6, 21), (5, 23), (3, 22)) if engine == "emu" else ((6, 21), (5, 23)):
        rows = 48 * per_core
        r = run_check(str(EX / "layer_norm_grad.py"), dims={"Bd": (rows,), "H": 1152},
                      dtypes={"T": "bfloat16", "U": "float32"}, gen_dir=examples_gen, seed=seed, progress=False,
                      engine=engine)
        assert r.passed and not r.faults and r.tiling_key % 10 == 1
        issues[per_core] = r.cost.get("vec_issues")   # the emulation's counters (none on the interpreter)
        dy, x = (np.asarray(r.inputs[n], np.float64) for n in ("dy", "x"))
        mean, rstd = (np.asarray(r.inputs[n], np.float64).reshape(rows, 1) for n in ("mean", "rstd"))
        z = (x - mean) * rstd
        for name, want, mag in (("pd_gamma", (dy * z).sum(0), np.abs(dy * z).sum(0)),
                                ("pd_beta", dy.sum(0), np.abs(dy).sum(0))):
            got = np.asarray(r.arrays[name], np.float64)
            assert np.all(np.abs(got - want) <= rows * 2.0**-22 * mag + 2.0**-30), name
        g = dy * np.asarray(r.inputs["gamma"], np.float64)
        dx = rstd * (g - g.mean(-1, keepdims=True) - z * (g * z).mean(-1, keepdims=True))
        got = np.asarray(r.arrays["pd_x"], np.float64).reshape(dx.shape)
        assert np.all(np.abs(got - dx) <= 2.0**-8 * np.abs(dx) + 2.0**-14 * np.abs(dx).max())
    if engine == "emu":
        assert (issues[6] - issues[3], issues[5] - issues[3]) == (5, 4)
