"""Syncs at the end of a statement list and the dependency pass's sink of a sync into an If's branch
(opgen.kernel.kir_sync._sink; docs/design.md "Syncs at the end of a branch"), on programs built from Kernel IR nodes
for the purpose: where each placed sync goes, that the placed program runs race-free on the Kernel-IR interpreter
with the values a float64 NumPy model of the program gives, on inputs that take each branch, and that deleting any
placed sync races there (the mutation check)."""

from __future__ import annotations

import numpy as np
import pytest

from opgen.ir.dims import Constraint, Lit, Sym
from opgen.kernel import kir
from opgen.kernel import kir_interp as ki
from opgen.kernel import kir_sync as ks
from opgen.kernel.isa import Op, Pipe
from opgen.kernel.kir import (Barrier, Copy, FConst, FInt, For, GmTensor, GmView, If, InitBuffer, Get, KernelClass, Let,
                              Local, Ref, Scope, SetFlag, SetValue, TensorVar, WaitFlag, vec)

NBLK = 4   # blocks of 8 floats (32 B) in the buffer t


def _kernel(body) -> KernelClass:
    """x -> t (MTE2), body, t -> y (MTE3): one TBuf of NBLK blocks, tiling field n."""
    process = (InitBuffer("b", Lit(32 * NBLK)), Get("t", "b", "float"),
               Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(32 * NBLK))) + tuple(body) + \
        (Copy(GmView("gmY"), Ref("t"), Lit(1), Lit(32 * NBLK)),)
    return KernelClass("Sink", "SinkTiling", args=("x", "y"),
                       gms=(GmTensor("gmX", "float", "x"), GmTensor("gmY", "float", "y")), locals=(Local("b"),),
                       tensors=(TensorVar("t", "float"),), fields=("n",), process=process)


def _run(k, n: int):
    """(RunResult, y) of k on x = 0, 1, ..., 8 NBLK - 1 with tiling n."""
    gm = {"x": np.arange(8 * NBLK, dtype=np.float32), "y": np.zeros(8 * NBLK, np.float32)}
    return ki.run(k, {"n": n}, gm, 1), gm["y"]


def _adds(dst: int, src: int, v: float = 1.0):
    """V: t[8 dst, 8 dst + 8) = t[8 src, 8 src + 8) + v (blocks)."""
    return vec(Op.ADDS, dst=Ref("t", Lit(8 * dst)), src0=Ref("t", Lit(8 * src)), scalar=v, count=8)


def _even_i():
    return (Constraint("==", Sym("i") % Lit(2), Lit(0)),)


def _syncs_at(ins: dict) -> dict:
    """{position: [(kind, event or pipe)]} of a placement."""
    return {p: [(type(x).__name__, x.event if isinstance(x, (SetFlag, WaitFlag)) else x.pipe) for x in v]
            for p, v in ins.items()}


def _model(n: int, fixed=lambda i: i % 2 == 0, stat: bool = False, pre: bool = False) -> np.ndarray:
    """float64 NumPy of the loop programs below: per iteration block 1 = block 0 + 1, t[8] = 5 where fixed(i), block 2
    = block 1 + 1; `stat`: t[24] = i first in each iteration and block 3 = block 3 + 1 after the loop; `pre`: t[9] = 7
    before the If in each iteration."""
    t = np.arange(8 * NBLK, dtype=np.float64)
    for i in range(n):
        if stat:
            t[24] = i
        t[8:16] = t[0:8] + 1
        if pre:
            t[9] = 7.0
        if fixed(i):
            t[8] = 5.0
        t[16:24] = t[8:16] + 1
    if stat:
        t[24:32] = t[24:32] + 1
    return t


def _guarded_loop(branch: str = "then", stat: bool = False, pre: bool = False) -> KernelClass:
    """The GroupNorm pattern (a guarded fix-up of a segment end): V writes block 1, an If whose branch has the
    scalar unit write t[8] (behind a Scope, past a Let) on even i, then V reads block 1. `branch`: "then" (the
    then-branch scalar work, no else), "else" (the scalar work in the else-branch, V work rewriting block 3 as it is
    in the then-branch), "nested" (the then-branch V work on block 3, then an inner If writing t[8] where i % 4 ==
    0). `stat`: the scalar unit also writes t[24] = i first in every iteration (a per-row statistic), which V reads
    after the loop. `pre`: the scalar unit writes t[9] = 7 right before the If in every iteration."""
    fix = (SetValue(Ref("t", Lit(8)), FConst(5.0)),)
    keep3 = _adds(3, 3, 0.0)
    if branch == "else":
        guard = If((Constraint("==", Sym("i") % Lit(2), Lit(1)),), (keep3,), fix)
    elif branch == "nested":
        guard = If(_even_i(), (keep3, If((Constraint("==", Sym("i") % Lit(4), Lit(0)),), fix)))
    else:
        guard = If(_even_i(), fix)
    pre_s = (SetValue(Ref("t", Lit(9)), FConst(7.0)),) if pre else ()
    body = (_adds(1, 0), Scope((Let("seg", Sym("n") % Lit(3)),) + pre_s + (guard,)), Let("z", Lit(0)),
            _adds(2, 1))
    if stat:
        body = (SetValue(Ref("t", Lit(24)), FInt(Sym("i"))),) + body
    after = (_adds(3, 3),) if stat else ()
    return _kernel((For("i", Lit(0), Sym("n"), Lit(1), body),) + after)


def _check_runs(k, ins: dict, model) -> None:
    """The placed program k (from `ins`) runs race-free with the model's values for n = 0..5, and deleting any
    placed sync races for some n of 1..5 (the mutation check)."""
    for n in range(6):
        r, y = _run(k, n)
        assert r.ok, (n, r.first_fault)
        np.testing.assert_array_equal(y, model(n).astype(np.float32), err_msg=f"n={n}")
    k0 = ks.strip_syncs(k)
    for w in ks.placed(ins):
        faults = [_run(ks.without(k0, ins, w), n)[0].first_fault for n in range(1, 6)]
        assert any("race" in f for f in faults), (w, faults)


def _s_v_waits(ins: dict) -> list:
    """The positions of the placed S -> V waits."""
    return sorted(p for p, v in ins.items() for x in v if isinstance(x, WaitFlag) and x.event == "S_V")


LOOP = ("Process", 3, "b")          # the loop body's statements
GUARD = LOOP + (1, "s", 1)          # the If in the Scope (after the Let)


@pytest.mark.parametrize("branch, end, fixed", [
    ("then", GUARD + ("t", 1), lambda i: i % 2 == 0),
    ("else", GUARD + ("e", 1), lambda i: i % 2 == 0),
    ("nested", GUARD + ("t", 1, "t", 1), lambda i: i % 4 == 0),
])
def test_a_wait_after_a_guarded_fix_up_sinks_to_the_end_of_the_branch_doing_the_scalar_work(branch, end, fixed):
    """The S -> V wait ordering the branch's scalar write before the V read after the If goes to the end of that
    branch (past the Let, out of the Scope; into an inner If in turn), where it runs only when the branch is taken;
    without the sink it stands after the If, run every iteration. Both programs run race-free with NumPy's values
    on trip counts taking each path, and deleting any sync the pass placed races."""
    k = _guarded_loop(branch)
    before, ins0 = ks.place_syncs(k, sink=False)
    assert _s_v_waits(ins0) and all(p[:len(GUARD)] != GUARD for p in _s_v_waits(ins0)), _syncs_at(ins0)
    out, ins = ks.place_syncs(k)
    assert _s_v_waits(ins) == [end], _syncs_at(ins)
    assert end[-1] == len(ks._body_at(k, end[:-1]))   # the list's end: after its last statement
    model = lambda n: _model(n, fixed)   # noqa: E731
    _check_runs(out, ins, model)
    _check_runs(before, ins0, model)


def test_a_sync_that_also_orders_an_access_after_the_loop_sinks_and_that_access_gets_its_own_after_the_loop():
    """The S -> V wait after the If also ordered the scalar unit's per-iteration statistic (t[24]) before V's read of
    it after the loop: sunk into the branch, the pass places that read's own S -> V pair after the loop (once), and
    nothing more inside the loop."""
    k = _guarded_loop(stat=True)
    out, ins = ks.place_syncs(k)
    body = ("Process", 3, "b", 2, "s", 1)   # the statistic's SetValue comes first in the loop body
    assert _s_v_waits(ins) == [body + ("t", 1), ("Process", 4)], _syncs_at(ins)
    in_loop = sum(len(v) for p, v in ins.items() if p[:3] == ("Process", 3, "b"))
    _, ins0 = ks.place_syncs(k, sink=False)
    assert in_loop <= sum(len(v) for p, v in ins0.items() if p[:3] == ("Process", 3, "b")), _syncs_at(ins)
    _check_runs(out, ins, lambda n: _model(n, stat=True))


def test_a_sync_that_orders_scalar_work_before_the_if_too_stays_after_it():
    """The scalar unit also writes t[9] before the If on every iteration: no branch holds every access the S -> V
    wait orders, and the other path would need one in the loop, so the wait stays after the If."""
    k = _guarded_loop(pre=True)
    out, ins = ks.place_syncs(k)
    assert _s_v_waits(ins) and all(p[:len(GUARD)] != GUARD + ("t",) for p in _s_v_waits(ins)), _syncs_at(ins)
    assert ins == ks.place_syncs(k, sink=False)[1]
    _check_runs(out, ins, lambda n: _model(n, pre=True))


def test_syncs_at_the_end_of_a_loop_body_order_the_next_iteration():
    """A hand-placed barrier at the end of a loop body (the position len(body)): each iteration's V write of block 0
    reaches the next iteration's V read of it, which the analysis and the interpreter agree it orders; printed as
    the body's last statement. Without it both report the loop-carried race."""
    body = (_adds(1, 0), _adds(0, 1))
    k = _kernel((For("i", Lit(0), Sym("n"), Lit(1), body),))
    mte = {("Process", 3): [SetFlag(Pipe.MTE2, Pipe.V, 0), WaitFlag(Pipe.MTE2, Pipe.V, 0)],
           ("Process", 4): [SetFlag(Pipe.V, Pipe.MTE3, 0), WaitFlag(Pipe.V, Pipe.MTE3, 0)],
           LOOP + (1,): [Barrier(Pipe.V)]}
    end = {**mte, LOOP + (2,): [Barrier(Pipe.V)]}
    good = ks._with(k, end)
    assert isinstance(next(x for x in good.process if isinstance(x, For)).body[-1], Barrier)
    assert not ks.conflicts(good)
    bad = ks._with(k, mte)
    assert ks.conflicts(bad)
    for n in (1, 3):
        r, y = _run(good, n)
        assert r.ok, r.first_fault
        t = np.arange(8 * NBLK, dtype=np.float64)
        for _ in range(n):
            t[8:16] = t[0:8] + 1
            t[0:8] = t[8:16] + 1
        np.testing.assert_array_equal(y, t.astype(np.float32))
    assert "race" in _run(bad, 3)[0].first_fault


def test_the_memo_keeps_a_sync_placed_at_a_list_s_end(tmp_path, monkeypatch):
    """place_syncs_memo stores a position at a list's end and a hit puts the sync back there."""
    monkeypatch.setenv("OPGEN_SYNC_DIR", str(tmp_path))
    k = _guarded_loop()
    out, ins = ks.place_syncs_memo(k)
    again, ins2 = ks.place_syncs_memo(k)
    assert list(tmp_path.iterdir())
    assert ins2 == ins and kir.to_text(again) == kir.to_text(out)
    assert GUARD + ("t", 1) in ins2
