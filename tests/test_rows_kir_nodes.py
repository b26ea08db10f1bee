"""The rows family's per-row instruction streams as Kernel-IR nodes (opgen.codegen.kernel `_Printer.nodes`,
opgen.kernel.rowsched): in every kernel class of the example specs, the per-row loops of ROW_SPLIT (Compute) and
COL_SPLIT (the level and final phases) hold no C++ text; each per-row instruction of the row program is one node
citing its spec line; the class verifies; and the barrier rule over nodes (`with_barriers`) places a
PipeBarrier<PIPE_V> exactly where the vector pipe's out-of-order completion needs one (docs/reference/ascendc.md
§1.6: V instructions complete out of order unless a barrier orders them)."""

from __future__ import annotations

import pytest

from opgen.check.kirengine import kernel_classes
from opgen.kernel import kir_sync as ks
from opgen.kernel.rowclass import with_barriers
from opgen.ir.dims import Lit, Sym
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


def _w(k):
    return kir.Ref("w_", slot=Lit(k))


def test_barriers_only_where_a_vector_operand_depends():
    n = Sym("n")
    mul = kir.vec(Op.MUL, dst=_w(0), src0=_w(1), src1=_w(2), count=n)
    add = kir.vec(Op.ADD, dst=_w(3), src0=_w(0), src1=_w(1), count=n)        # RAW on w0
    muls = kir.vec(Op.MULS, dst=_w(4), src0=_w(5), scalar=2.0, count=n)     # independent of both
    war = kir.vec(Op.ADDS, dst=_w(1), src0=_w(5), scalar=1.0, count=n)      # WAR on w1 (read by add)
    red = kir.Call("RowSum", (_w(4), n), result="s")   # reads w4: its write was ordered by the barrier before war
    red2 = kir.Call("RowSum", (_w(1), n), result="t")  # reads w1, written by war with no barrier since: RAW
    out = with_barriers([mul, add, muls, war, red, red2])
    bar = kir.Barrier(Pipe.V)
    assert out == [mul, bar, add, muls, bar, war, red, bar, red2]


def test_no_barrier_between_independent_instructions_and_none_at_the_end_without_pending_work():
    n = Sym("n")
    a = kir.vec(Op.MUL, dst=_w(0), src0=_w(1), src1=_w(2), count=n)
    b = kir.vec(Op.ADD, dst=_w(3), src0=_w(1), src1=_w(2), count=n)   # reads shared with a: no hazard
    assert with_barriers([a, b]) == [a, b, kir.Barrier(Pipe.V)]
    assert with_barriers([a, b], tail=False) == [a, b]
    g = kir.GetValue("s", kir.Ref("statIn_x", Sym("i")))
    assert with_barriers([g]) == [g]
