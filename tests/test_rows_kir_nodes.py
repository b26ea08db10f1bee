"""The rows family's per-row instruction streams as Kernel-IR nodes (opgen.codegen.kernel `_Printer.nodes`,
opgen.kernel.rowsched): in every kernel class of the example specs, the per-row loops of ROW_SPLIT (Compute) and
COL_SPLIT (the level and final phases) hold no C++ text; each per-row instruction of the row program is one node
citing its spec line; the class verifies; and the dependency pass places a PipeBarrier<PIPE_V> exactly where the
vector pipe's out-of-order completion needs one (docs/reference/ascendc.md §1.6: V instructions complete out of
order unless a barrier orders them)."""

from __future__ import annotations

import pytest

from opgen.check.kirengine import kernel_classes
from opgen.kernel import kir_sync as ks
from opgen.ir.dims import Lit
from opgen.kernel import kir
from opgen.kernel.isa import Op, Pipe
from opgen.registry import load_spec


def _loops(stmts, var="i"):
    """The bodies of every For over `var` in `stmts` (nested)."""
    out = []
    for s in kir.walk(stmts):
        if isinstance(s, kir.For) and s.var == var:
            out.append(s.body)
    return out


@pytest.mark.parametrize("spec", ["rms_norm", "add_rms_norm", "softmax", "layer_norm_grad"])
def test_the_per_row_loops_of_every_example_rows_kernel_are_nodes(spec):
    classes = kernel_classes(load_spec(f"examples/specs/{spec}.py"))
    assert classes
    for k in classes:
        kir.verify(k)
        compute = k.method("Compute").body
        col = k.method("ColSplit").body
        loops = _loops(compute) + _loops(col)
        # ROW_SPLIT: per-row loops only for what reads a per-row value; the rest one instruction over the pass
        assert len(_loops(compute)) >= 1 and len(_loops(col)) >= 1
        for body in loops:
            stmts = list(kir.walk(body))
            assert not any(isinstance(s, kir.Verbatim) for s in stmts), k.name
        vecs = [s for s in kir.walk(compute) if isinstance(s, kir.Vec)]
        assert vecs and all(s.doc.startswith("spec: ") and f"{spec}.py:" in s.doc for s in vecs)
        # the syncs are the dependency pass's: no unordered conflict on chip is left (GM: the workspace exchange
        # only, tests/test_kir_sync.py)
        assert [str(c) for c in ks.conflicts(k) if c.later.region.base[0] != "gm"] == [], k.name


def _t(k):
    return kir.Ref(f"t{k}")


def _placed(stream) -> list:
    """The straight-line vector `stream` over six 8-float tensors t0..t5 of one TBuf, with the syncs the dependency
    pass (opgen.kernel.kir_sync) places: the statements after the buffer's set-up."""
    init = (kir.InitBuffer("b", Lit(6 * 32)),) + tuple(kir.Get(f"t{j}", "b", "float", offset=Lit(8 * j))
                                                        for j in range(6))
    k = kir.KernelClass("Rv", "RvTiling", args=("x",), gms=(kir.GmTensor("gmX", "float", "x"),),
                        locals=(kir.Local("b"),), tensors=tuple(kir.TensorVar(f"t{j}", "float") for j in range(6)),
                        fields=("n",), process=init + tuple(stream))
    placed, _ = ks.place_syncs(k)
    return list(placed.process[len(init):])


def test_barriers_only_where_a_vector_operand_depends():
    n = Lit(8)
    mul = kir.vec(Op.MUL, dst=_t(0), src0=_t(1), src1=_t(2), count=n)
    add = kir.vec(Op.ADD, dst=_t(3), src0=_t(0), src1=_t(1), count=n)        # RAW on t0
    muls = kir.vec(Op.MULS, dst=_t(4), src0=_t(5), scalar=2.0, count=n)     # independent of both
    war = kir.vec(Op.ADDS, dst=_t(1), src0=_t(5), scalar=1.0, count=n)      # WAR on t1 (read by mul and add)
    raw = kir.vec(Op.ADDS, dst=_t(2), src0=_t(1), scalar=1.0, count=n)      # RAW on t1, written by war
    got = ["B" if isinstance(x, kir.Barrier) and x.pipe is Pipe.V else x for x in _placed([mul, add, muls, war, raw])]
    assert got == [mul, "B", add, muls, "B", war, "B", raw]


def test_no_barrier_between_independent_instructions_and_none_at_the_end():
    n = Lit(8)
    a = kir.vec(Op.MUL, dst=_t(0), src0=_t(1), src1=_t(2), count=n)
    b = kir.vec(Op.ADD, dst=_t(3), src0=_t(1), src1=_t(2), count=n)   # reads shared with a: no hazard
    assert _placed([a, b]) == [a, b]
